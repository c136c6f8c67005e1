-- cd.linalg (issue 32): NumPy's numpy.linalg on float32 and float64 matrices and stacks of them, LAPACKE on the
-- cpu device (src/linalg_cpu.c, NOTE [linalg layers] in lua/cudadev/linalg.lua). Values are NumPy 1.24's for the
-- same inputs; where signs are free (eigenvectors, singular vectors, Q) the reconstructions are checked instead.
-- spec/29-numpy_diff_spec.lua compares every function with NumPy over generated inputs too.
local helper = require "spec.helper"
local cd = require "cudadev"
local L = cd.linalg

local E = helper.assert_error_matches
local values = helper.lcg_values

local A3 = { { 4, 1, 2 }, { 1, 5, 3 }, { 2, 3, 6 } }   -- symmetric positive definite

local function flat(x)
  if type(x) == "number" then return { x } end
  if cd.type(x) == "Array" then return helper.values(x) end
  local out = {}
  local function walk(t) for _, v in ipairs(t) do if type(v) == "table" then walk(v) else out[#out + 1] = v end end end
  walk(x)
  return out
end

-- x and y (arrays, nested tables or numbers) agree element by element within tol (relative to max(1, |y|))
local function near(x, y, tol)
  local fx, fy = flat(x), flat(y)
  assert.are.equal(#fy, #fx, "element counts differ")
  for i = 1, #fy do
    local ok = fx[i] == fy[i] or math.abs(fx[i] - fy[i]) <= tol * math.max(1, math.abs(fy[i]))
    assert(ok, ("element %d: %.17g, expected %.17g"):format(i, fx[i], fy[i]))
  end
end

local function swapT(x) return cd.swapaxes(x, -1, -2) end

-- A random n x n matrix (stack of count) that is well conditioned: random entries plus n on the diagonal.
local function well(n, count, dtype, dev, seed)
  local shape = count and { count, n, n } or { n, n }
  local a = cd.array(values(n * n * (count or 1), seed or 7), dtype, { device = dev }):reshape(shape)
  return a + cd.eye(n, n, 0, dtype, { device = dev }) * n
end

local function checks(dev, test)
  local opt = { device = dev }
  local function arr(t, dt) return cd.array(t, dt or "float64", opt) end

  describe("on " .. dev, function()
    test("solve: a matrix and one vector, a matrix and several, a stack with one b broadcast (NumPy 2's rule)", function()
      local a = arr(A3)
      local x = L.solve(a, arr({ 1, 2, 3 }))
      assert.are.same({ 3 }, x.shape)
      near(x, { 0, 1 / 7, 3 / 7 }, 1e-14)
      local X = L.solve(a, arr({ { 1, 0 }, { 2, 1 }, { 3, 0 } }))
      assert.are.same({ 3, 2 }, X.shape)
      near(cd.matmul(a, X), { { 1, 0 }, { 2, 1 }, { 3, 0 } }, 1e-14)
      local s = well(5, 4, "float32", dev)
      local b = arr(values(5 * 2, 3), "float32"):reshape({ 5, 2 })
      local Y = L.solve(s, b)
      assert.are.equal("float32", Y.dtype)
      assert.are.same({ 4, 5, 2 }, Y.shape)
      near(cd.matmul(s, Y), cd.broadcast_to(b, { 4, 5, 2 }):copy(), 1e-5)
      local v = L.solve(s, arr(values(5, 4), "float32"))
      assert.are.same({ 4, 5 }, v.shape)
      -- the dtype of both, as NumPy's: float32 only when both are
      assert.are.equal("float64", L.solve(s, arr(values(5, 4), "float64")).dtype)
      assert.are.equal("float64", L.solve(s, arr({ 1, 2, 3, 4, 5 }, "int32")).dtype)
      assert.are.equal("float64", L.solve(s:astype("float64"), arr(values(5, 4), "float32")).dtype)
    end)

    test("solve and inv of a singular matrix: NumPy's LinAlgError as an error naming the argument", function()
      local sing = arr({ { 1, 2 }, { 2, 4 } })
      E(function() L.solve(sing, arr({ 1, 2 })) end,
        "bad argument #1 to 'solve' (singular matrix; a has no inverse: cd.linalg.lstsq and cd.linalg.pinv take " ..
        "singular matrices)")
      local stack = cd.stack({ arr({ { 1, 0 }, { 0, 1 } }), sing })
      E(function() L.inv(stack) end, "bad argument #1 to 'inv' (singular matrix (matrix 2 of the batch); a has no " ..
        "inverse: cd.linalg.lstsq and cd.linalg.pinv take singular matrices)")
    end)

    test("inv: NumPy's values, a stack, float32 stays float32, integers compute in float64", function()
      near(L.inv(arr(A3)), { { 0.3, -1.3877787807814457e-17, -0.09999999999999999 }, { 0, 0.28571428571428575,
        -0.14285714285714285 }, { -0.1, -0.14285714285714285, 0.2714285714285714 } }, 1e-14)
      local s = well(6, 3, "float32", dev)
      local inv = L.inv(s)
      assert.are.equal("float32", inv.dtype)
      near(cd.matmul(s, inv), cd.broadcast_to(cd.eye(6, 6, 0, "float32", opt), { 3, 6, 6 }):copy(), 1e-5)
      assert.are.equal("float64", L.inv(arr({ { 2, 0 }, { 0, 4 } }, "int32")).dtype)
    end)

    test("det and slogdet: numbers for a matrix, arrays for a stack; a singular matrix is 0 and (0, -inf)", function()
      near(L.det(arr(A3)), 69.99999999999996, 1e-13)
      local sign, logabs = L.slogdet(arr(A3))
      assert.are.equal(1, sign)
      near(logabs, 4.2484952420493585, 1e-14)
      assert.are.equal(-2, math.floor(L.det(arr({ { 1, 2 }, { 3, 4 } })) + 0.5))
      local s0, l0 = L.slogdet(arr({ { 1, 2 }, { 2, 4 } }))
      assert.are.equal(0, s0)
      assert.are.equal(-math.huge, l0)
      assert.are.equal(0, L.det(arr({ { 1, 2 }, { 2, 4 } })))
      local d = L.det(arr({ { { 1, 2 }, { 3, 4 } }, { { 0, 1 }, { 1, 0 } } }, "float32"))
      assert.are.equal("float32", d.dtype)
      near(d, { -2, -1 }, 1e-6)
      local ss, ls = L.slogdet(arr({ { { 2, 0 }, { 0, -3 } } }))
      near(ss, { -1 }, 0)
      near(ls, { math.log(6) }, 1e-15)
    end)

    test("cholesky: lower by default, upper on request, only that triangle read, a stack", function()
      local c = L.cholesky(arr(A3))
      near(c, { { 2, 0, 0 }, { 0.5, 2.179449471770337, 0 }, { 1, 1.1470786693528088, 1.9194297398747862 } }, 1e-15)
      local garbage = arr({ { 4, 99, 99 }, { 1, 5, 99 }, { 2, 3, 6 } })
      near(L.cholesky(garbage), c, 1e-15)
      local u = L.cholesky(arr(A3), { upper = true })
      near(u, swapT(c):copy(), 1e-15)
      local s = well(4, 3, "float32", dev)
      s = cd.matmul(s, swapT(s):copy())
      local f = L.cholesky(s)
      assert.are.equal("float32", f.dtype)
      near(cd.matmul(f, swapT(f):copy()), s, 1e-5)
    end)

    test("cholesky of a matrix that is not positive definite: an error naming the argument and the minor", function()
      E(function() L.cholesky(arr({ { 1, 2 }, { 2, 1 } })) end,
        "bad argument #1 to 'cholesky' (matrix is not positive definite: its leading minor of order 2 is not " ..
        "positive)")
      E(function() L.cholesky(arr({ { { 1, 0 }, { 0, 1 } }, { { -1, 0 }, { 0, 1 } } })) end,
        "bad argument #1 to 'cholesky' (matrix is not positive definite (matrix 2 of the batch): its leading " ..
        "minor of order 1 is not positive)")
    end)

    test("qr: reduced, complete and r shapes of tall and wide matrices; Q R = a, Q's columns orthonormal", function()
      for _, mn in ipairs({ { 5, 3 }, { 3, 5 } }) do
        local m, n = mn[1], mn[2]
        local a = arr(values(m * n, 11)):reshape({ m, n })
        local k = math.min(m, n)
        local q, r = L.qr(a)
        assert.are.same({ m, k }, q.shape)
        assert.are.same({ k, n }, r.shape)
        near(cd.matmul(q, r), a, 1e-14)
        near(cd.matmul(q.T, q), cd.eye(k, k, 0, "float64", opt), 1e-14)
        near(cd.triu(r), r, 0)
        local Q, R = L.qr(a, "complete")
        assert.are.same({ m, m }, Q.shape)
        assert.are.same({ m, n }, R.shape)
        near(cd.matmul(Q, R), a, 1e-14)
        near(cd.matmul(Q.T, Q), cd.eye(m, m, 0, "float64", opt), 1e-14)
        local r_only = L.qr(a, "r")
        near(r_only, r, 0)
      end
      local s = arr(values(2 * 4 * 3, 5), "float32"):reshape({ 2, 4, 3 })
      local q, r = L.qr(s)
      assert.are.same({ 2, 4, 3 }, q.shape)
      assert.are.same({ 2, 3, 3 }, r.shape)
      near(cd.matmul(q, r), s, 1e-5)
    end)

    test("eigh and eigvalsh: ascending eigenvalues (NumPy's), a v = v w, UPLO reads one triangle, a stack", function()
      local w, v = L.eigh(arr(A3))
      near(w, { 2.1943971674224088, 3.3867701566075477, 9.418832675970037 }, 1e-14)
      near(cd.matmul(arr(A3), v), v * w:reshape({ 1, 3 }), 1e-14)
      near(L.eigvalsh(arr(A3)), w, 1e-15)
      local upper_only = arr({ { 4, 1, 2 }, { -9, 5, 3 }, { -9, -9, 6 } })
      near(L.eigvalsh(upper_only, "U"), w, 1e-14)
      local s = well(4, 3, "float32", dev)
      s = s + swapT(s)
      local ws, vs = L.eigh(s)
      assert.are.same({ 3, 4 }, ws.shape)
      assert.are.equal("float32", vs.dtype)
      near(cd.matmul(s, vs), vs * ws:reshape({ 3, 1, 4 }), 1e-4)
      local t = ws:totable()
      for i = 1, 3 do for j = 2, 4 do assert(t[i][j - 1] <= t[i][j]) end end
    end)

    test("svd: descending singular values (NumPy's), full and reduced shapes, U diag(S) Vh = a, a stack", function()
      near(L.svd(arr(A3), { compute_uv = false }), { 9.418832675970041, 3.3867701566075485, 2.1943971674224083 }, 1e-14)
      local a = arr(values(4 * 6, 9)):reshape({ 4, 6 })
      local u, s, vh = L.svd(a)
      assert.are.same({ 4, 4 }, u.shape)
      assert.are.same({ 4 }, s.shape)
      assert.are.same({ 6, 6 }, vh.shape)
      near(cd.matmul(u * s:reshape({ 1, 4 }), vh:slice(1, 4)), a, 1e-14)
      local u2, s2, vh2 = L.svd(a, { full_matrices = false })
      assert.are.same({ 4, 4 }, u2.shape)
      assert.are.same({ 4, 6 }, vh2.shape)
      near(cd.matmul(u2 * s2:reshape({ 1, 4 }), vh2), a, 1e-14)
      local st = arr(values(3 * 5 * 2, 2), "float32"):reshape({ 3, 5, 2 })
      local U, S, V = L.svd(st, { full_matrices = false })
      assert.are.same({ 3, 5, 2 }, U.shape)
      assert.are.same({ 3, 2 }, S.shape)
      assert.are.same({ 3, 2, 2 }, V.shape)
      near(cd.matmul(U * S:reshape({ 3, 1, 2 }), V), st, 1e-5)
    end)

    test("lstsq: NumPy's x, residuals, rank and s; a rank-deficient a has no residuals; b of several columns", function()
      local a = arr({ { 1, 1 }, { 1, 2 }, { 1, 3 }, { 1, 4 } })
      local x, res, rank, s = L.lstsq(a, arr({ 6, 5, 7, 10 }))
      near(x, { 3.5, 1.4 }, 1e-14)
      near(res, { 4.2 }, 1e-13)
      assert.are.equal(2, rank)
      assert.are.equal("integer", math.type(rank))
      near(s, { 5.77937881, 0.77380911 }, 1e-8)
      local X, R = L.lstsq(a, arr({ { 6, 1 }, { 5, 2 }, { 7, 3 }, { 10, 4 } }))
      assert.are.same({ 2, 2 }, X.shape)
      assert.are.same({ 2 }, R.shape)
      near(X:totable()[1], { 3.5, 0 }, 1e-14)
      local dx, dres, drank = L.lstsq(arr({ { 1, 2 }, { 2, 4 }, { 3, 6 } }), arr({ 1, 2, 3 }))
      assert.are.equal(1, drank)
      assert.are.same({ 0 }, dres.shape)
      near(dx, { 0.2, 0.4 }, 1e-14)   -- the minimum-norm solution
      local _, _, r2 = L.lstsq(arr({ { 1, 0 }, { 0, 1e-10 } }), arr({ 1, 1 }), 1e-5)
      assert.are.equal(1, r2)
    end)

    test("pinv: a pinv(a) a = a for a tall, a wide and a singular matrix, a stack, rcond", function()
      for _, a in ipairs({ arr(values(12, 1)):reshape({ 4, 3 }), arr(values(12, 2)):reshape({ 3, 4 }),
                           arr({ { 1, 2 }, { 2, 4 } }) }) do
        local p = L.pinv(a)
        assert.are.same({ a.shape[2], a.shape[1] }, p.shape)
        near(cd.matmul(cd.matmul(a, p), a), a, 1e-13)
      end
      near(L.pinv(arr({ { 1, 2 }, { 2, 4 } })), { { 0.04, 0.08 }, { 0.08, 0.16 } }, 1e-14)
      near(L.pinv(arr({ { 1, 0 }, { 0, 1e-3 } }), { rcond = 1e-2 }), { { 1, 0 }, { 0, 0 } }, 0)
      local s = well(3, 2, "float32", dev)
      near(cd.matmul(s, L.pinv(s)), cd.broadcast_to(cd.eye(3, 3, 0, "float32", opt), { 2, 3, 3 }):copy(), 1e-5)
    end)

    test("norm: NumPy's vector and matrix orders, axis (1-based), keepdims, the options-table form", function()
      local a = arr(A3)
      near(L.norm(a), math.sqrt(105), 1e-15)
      near(L.norm(a, "fro"), math.sqrt(105), 1e-15)
      near(L.norm(a, "nuc"), 14.999999999999998, 1e-14)
      near(L.norm(a, 2), 9.418832675970041, 1e-14)
      near(L.norm(a, -2), 2.1943971674224083, 1e-14)
      near({ L.norm(a, 1), L.norm(a, -1), L.norm(a, math.huge), L.norm(a, -math.huge) }, { 11, 7, 11, 7 }, 0)
      local b = arr({ 3, -4, 0, 1 })
      local want = { 5.0990195135927845, 8.0, 3.0, 4.0, 0.0, 4.514357435474001, 0.0, 22.392304845413257 }
      local got = {}
      for i, o in ipairs({ false, 1, 0, math.huge, -math.huge, 3, -1, 0.5 }) do got[i] = L.norm(b, o or nil) end
      near(got, want, 1e-14)
      near(L.norm(a, nil, 1), { math.sqrt(21), math.sqrt(35), 7 }, 1e-15)
      local k = L.norm(a, { axis = 2, keepdims = true })
      assert.are.same({ 3, 1 }, k.shape)
      assert.are.same({ 1, 1 }, L.norm(a, { keepdims = true }).shape)
      local st = cd.stack({ a, a * 2 })
      near(L.norm(st, "fro", { 2, 3 }), { math.sqrt(105), 2 * math.sqrt(105) }, 1e-14)
      near(L.norm(st, 1, { -2, -1 }), { 11, 22 }, 0)
      near(L.norm(st, 2, { 2, 3 }), { 9.418832675970041, 2 * 9.418832675970041 }, 1e-14)
      assert.are.same({ 2, 1, 1 }, L.norm(st, "nuc", { 2, 3 }, true).shape)
      assert.are.equal("float32", L.norm(a:astype("float32"), nil, 1).dtype)
    end)

    test("bad input: a clear error naming the argument", function()
      local a = arr(A3)
      E(function() L.inv(arr({ 1, 2 })) end,
        "bad argument #1 to 'inv' (1-dimensional array given; the array must be at least two-dimensional)")
      E(function() L.det(arr({ { 1, 2, 3 }, { 4, 5, 6 } })) end,
        "bad argument #1 to 'det' (last 2 dimensions of the array must be square (got 2 x 3))")
      E(function() L.cholesky(a:astype("float16")) end,
        "bad argument #1 to 'cholesky' (array type float16 is unsupported in linalg; convert with a:astype(\"float32\"))")
      E(function() L.svd({ 1, 2 }) end, "bad argument #1 to 'svd' (Array expected, got table)")
      E(function() L.solve(a, arr({ 1, 2 })) end,
        "bad argument #2 to 'solve' (b of shape {2} does not match a of 3 x 3 (b needs 3 rows))")
      E(function() L.eigh(a, "X") end, "bad argument #2 to 'eigh' (UPLO must be \"L\" or \"U\", got \"X\")")
      E(function() L.qr(a, "full") end,
        "bad argument #2 to 'qr' (mode must be \"reduced\", \"complete\" or \"r\", got \"full\")")
      E(function() L.svd(a, { full = true }) end, "bad option 'full' to 'svd' (unknown option)")
      E(function() L.norm(a, "max") end, "bad argument #2 to 'norm' (ord must be a number, \"fro\" or \"nuc\", got \"max\")")
      E(function() L.norm(arr({ 1, 2 }), "fro") end, "bad argument #2 to 'norm' (invalid norm order \"fro\" for vectors)")
      E(function() L.norm(a, nil, 3) end,
        "bad argument #3 to 'norm' (axis 3 is out of range for an array of 2 dimensions (1..2, or -1..-2))")
      E(function() L.norm(cd.zeros({ 2, 2, 2 }, "float32", opt), 1) end,
        "bad argument #1 to 'norm' (improper number of dimensions to norm (1 or 2 with ord))")
      E(function() L.lstsq(a, arr({ 1, 2 })) end,
        "bad argument #2 to 'lstsq' (b of shape {2} does not match a of 3 x 3 (b needs 3 rows, 1 or 2 dimensions))")
      E(function() L.pinv(a, { rcond = "x" }) end, "bad argument #2 to 'pinv' ('rcond' must be a number, got string)")
    end)

    test("empty matrices and empty stacks give empty results, as NumPy's", function()
      assert.are.same({ 0, 3, 3 }, L.inv(cd.zeros({ 0, 3, 3 }, "float64", opt)).shape)
      assert.are.same({ 0, 0 }, L.inv(cd.zeros({ 0, 0 }, "float64", opt)).shape)
      assert.are.equal(1, L.det(cd.zeros({ 0, 0 }, "float64", opt)))
      assert.are.same({ 0 }, L.eigvalsh(cd.zeros({ 0, 0 }, "float64", opt)).shape)
    end)
  end)
end

-- linalg_cuda.c's routines as LAPACK's column-major ones with the same arguments (spec/linalg_colmajor.c, built
-- here), on the cpu device's arrays: for cd._selftest.linalg_through, which runs linalg.lua's column-major adapter
-- (NOTE [linalg layouts]) on them. nil and why when the C compiler or LAPACKE is missing.
local function colmajor_routines()
  local so = os.tmpname() .. ".so"
  local inc = io.popen("pkg-config --cflags lua5.4 2>/dev/null"):read("a"):gsub("%s+$", "")
  local out = helper.run_command(("cc -shared -fPIC -O1 %s -o %s spec/linalg_colmajor.c -ldl"):format(
    inc ~= "" and inc or "-I/usr/include/lua5.4", so))
  local open = package.loadlib(so, "luaopen_linalg_colmajor")
  os.remove(so)
  if not open then return nil, "spec/linalg_colmajor.c did not build: " .. out end
  local ok, F = pcall(open, "liblapacke.so.3")
  if not ok then return nil, "no LAPACKE: " .. tostring(F) end
  local es = { float32 = 4, float64 = 8 }
  local function f64(a) return a.dtype == "float64" end
  local function at(a, off) return a.ptr + off * es[a.dtype] end
  local R = {}   -- each as linalg_cuda.c's function of the same name: its loops, offsets and leading dimensions
  function R.getrf(a, ipiv, info)
    local B, n = a.shape[1], a.shape[2]
    if B == 0 or n == 0 then return end
    for i = 0, B - 1 do info[i + 1] = F.getrf(f64(a), n, n, at(a, i * n * n), n, ipiv.ptr + i * n * 4) end
  end
  function R.getrs(a, ipiv, b, info, transposed)
    local B, n, k = a.shape[1], a.shape[2], b.shape[2]
    if B == 0 or n == 0 or k == 0 then return end
    for i = 0, B - 1 do
      info[i + 1] = F.getrs(f64(a), transposed and "T" or "N", n, k, at(a, i * n * n), n, ipiv.ptr + i * n * 4,
        at(b, i * n * k), n)
    end
  end
  function R.solve_batched(a, ipiv, b, info)   -- cuBLAS's getrfBatched, then getrsBatched with op T
    R.getrf(a, ipiv, info)
    R.getrs(a, ipiv, b, cd.zeros({ a.shape[1] }, "int32", { device = "cpu" }), true)
  end
  R.lu = {}   -- each LU routine called, in order: solve's cuBLAS and cuSOLVER ways (NOTE [fused small solve])
  for _, name in ipairs({ "getrf", "getrs", "solve_batched" }) do
    local f = R[name]
    R[name] = function(...)
      R.lu[#R.lu + 1] = name
      return f(...)
    end
  end
  R.fills = {}   -- each potrf's fill mode, in order
  function R.potrf(a, info, upper)
    R.fills[#R.fills + 1] = upper and "U" or "L"
    local B, n = a.shape[1], a.shape[2]
    if B == 0 or n == 0 then return end
    for i = 0, B - 1 do info[i + 1] = F.potrf(f64(a), upper and "U" or "L", n, at(a, i * n * n), n) end
  end
  function R.geqrf(a, tau, info)
    local B, n, m = a.shape[1], a.shape[2], a.shape[3]
    local k = math.min(m, n)
    if B == 0 or k == 0 then return end
    for i = 0, B - 1 do info[i + 1] = F.geqrf(f64(a), m, n, at(a, i * m * n), m, at(tau, i * k)) end
  end
  function R.orgqr(q, tau, info)
    local B, qc, m, k = q.shape[1], q.shape[2], q.shape[3], tau.shape[2]
    if B == 0 or m == 0 or qc == 0 then return end
    for i = 0, B - 1 do info[i + 1] = F.orgqr(f64(q), m, qc, k, at(q, i * m * qc), m, at(tau, i * k)) end
  end
  function R.syevd(a, w, info, vectors, upper)
    local B, n = a.shape[1], a.shape[2]
    if B == 0 or n == 0 then return end
    for i = 0, B - 1 do
      info[i + 1] = F.syevd(f64(a), vectors and "V" or "N", upper and "U" or "L", n, at(a, i * n * n), n, at(w, i * n))
    end
  end
  function R.gesvd(a, s, u, vt, info, full)
    local B, n, m = a.shape[1], a.shape[2], a.shape[3]
    assert(m >= n, "gesvd takes m >= n")
    local mu, job = full and m or n, u == nil and "N" or full and "A" or "S"
    if B == 0 or n == 0 then return end
    for i = 0, B - 1 do
      info[i + 1] = F.gesvd(f64(a), job, job == "N" and "N" or "A", m, n, at(a, i * m * n), m, at(s, i * n),
        u and at(u, i * m * mu) or 0, m, vt and at(vt, i * n * n) or 0, n)
    end
  end
  -- gesvdj's contract (any shape, V not V^T, a destroyed) from gesvd's: V is VT (n x nv, ld nv: row-major
  -- {n, nv}) transposed; R.gesvdj_fails = i makes matrix i report non-convergence (info k + 1) with S zeroed
  R.calls = { gesvd = 0, gesvdj = 0 }
  local gesvd = R.gesvd
  function R.gesvd(...)
    R.calls.gesvd = R.calls.gesvd + 1
    return gesvd(...)
  end
  function R.gesvdj(a, s, u, v, info, full)
    R.calls.gesvdj = R.calls.gesvdj + 1
    local B, n, m = a.shape[1], a.shape[2], a.shape[3]
    local k = math.min(m, n)
    local mu, nv, job = full and m or k, full and n or k, u == nil and "N" or full and "A" or "S"
    assert(u == nil or (u.shape[2] == mu and v.shape[2] == nv), "gesvdj: u or v of the wrong shape")
    if B == 0 or k == 0 then return end
    local vt = cd.empty({ n, nv }, a.dtype, { device = "cpu" })
    for i = 0, B - 1 do
      info[i + 1] = F.gesvd(f64(a), job, job, m, n, at(a, i * m * n), m, at(s, i * k), u and at(u, i * m * mu) or 0,
        m, u and vt.ptr or 0, u and nv or 1)
      if v then v[i + 1]:copy_from(swapT(vt)) end
    end
    if R.gesvdj_fails then
      info[R.gesvdj_fails] = k + 1
      s:fill(0)
    end
  end
  return R
end

describe("cd.linalg", function()
  checks("cpu", it)

  -- NOTE [linalg layouts]: every cpu expectation again, through the CUDA devices' column-major adapter
  describe("through the column-major adapter", function()
    local R, why = colmajor_routines()
    if not R then
      pending("the CUDA devices' column-major adapter on the cpu device (" .. why .. ")")
      return
    end
    setup(function() cd._selftest.linalg_through(R) end)
    teardown(function() cd._selftest.linalg_through(nil) end)
    checks("cpu", it)

    it("svd runs gesvdj (V, not Vh), any shape, and no gesvd", function()
      R.calls.gesvd, R.calls.gesvdj = 0, 0
      -- signs, and a full U's or Vh's null-space part, are free: S, U diag(S) Vh = a and orthonormal U and Vh
      local function orthonormal(q)
        local p = cd.matmul(swapT(q), q)
        local n = p.shape[#p.shape]
        near(p, cd.broadcast_to(cd.eye(n, n, 0, "float64", { device = "cpu" }), p.shape):copy(), 1e-12)
      end
      for _, shape in ipairs({ { 6, 4 }, { 4, 6 }, { 3, 5, 5 } }) do
        local a = cd.array(values(shape[1] * shape[2] * (shape[3] or 1), 8), "float64"):reshape(shape)
        cd._selftest.linalg_through(nil)
        local want = L.svd(a, { compute_uv = false })
        cd._selftest.linalg_through(R)
        for _, full in ipairs({ true, false }) do
          local u, s, vh = L.svd(a, { full_matrices = full })
          near(s, want, 1e-12)
          local k = s.shape[#s.shape]
          near(cd.matmul(u:slice(1, k, 1, u.ndim) * cd.expand_dims(s, -2), vh:slice(1, k, 1, vh.ndim - 1)), a, 1e-12)
          orthonormal(u)
          orthonormal(swapT(vh))
        end
        near(L.svd(a, { compute_uv = false }), want, 1e-12)
      end
      assert.are.same({ gesvd = 0, gesvdj = 9 }, R.calls)
    end)

    -- NOTE [cholesky fill]: cuSOLVER's fast potrf is the "lower" one; checks() above has the factors' values
    it("cholesky asks potrf for the lower fill mode, for either factor", function()
      local a = cd.array({ { 4, 2 }, { 2, 3 } }, "float64")
      R.fills = {}
      local l, u = L.cholesky(a), L.cholesky(a, { upper = true })
      assert.are.same({ "L", "L" }, R.fills)
      near(cd.matmul(l, swapT(l)), a, 1e-15)
      near(cd.matmul(swapT(u), u), a, 1e-15)
      assert.is_true(l.is_contiguous and u.is_contiguous)
    end)

    -- NOTE [tiled transpose] (views.lua): the lower factor is the tril of potrf's buffer transposed, made by the
    -- tiled kernel (given to the cpu device here); the upper one is the buffer's triu, not transposed
    it("cholesky's lower factor comes through the tiled transpose, in one pass", function()
      local s = well(45, 3, "float64", "cpu", 4)
      s = cd.matmul(s, swapT(s):copy())
      cd._selftest.linalg_through(nil)
      local want, wantu = L.cholesky(s), L.cholesky(s, { upper = true })
      cd._selftest.linalg_through(R)
      cd._transpose_tiles(true)
      local ok, err = pcall(function()
        local before = cd._transpose_tiles()
        local l = L.cholesky(s)
        -- one launch: the copy in is the cpu device's astype (a GPU's is the tiled kernel's too)
        assert.are.equal(1, cd._transpose_tiles() - before)
        near(l, want, 1e-12)
        local u = L.cholesky(s, { upper = true })
        assert.are.equal(1, cd._transpose_tiles() - before)
        near(u, wantu, 1e-12)
      end)
      cd._transpose_tiles(false)
      assert(ok, err)
    end)

    -- NOTE [fused small solve]: n <= 32 and k <= 32 take the generated kernel, which runs on the cpu device too
    describe("the fused small solve", function()
      local opt = { device = "cpu" }
      -- Under valgrind (its preload library, or the in-process launches `make valgrind` asks for) the batches of
      -- 1024 are 37 (and 128 where the peak memory is measured): every kernel and path still runs, with a part-filled
      -- last block, in under a minute where 1024 took most of the valgrind pass's 20 (spec/38 alone: 679 s on this
      -- VM, 350 of them the copies test). The other passes take 1024.
      local slow = (os.getenv("LD_PRELOAD") or ""):find("vgpreload", 1, true) or os.getenv("CUDADEV_CPU_FORK") == "0"
      local BIG, NB = slow and 37 or 1024, slow and 128 or 1024   -- NB: a multiple of 4
      -- L.solve(a, b) by LAPACKE (the cpu device's own routines), then through G, and the LU routines G called
      local function both(a, b, f)
        f = f or L.solve
        cd._selftest.linalg_through(nil)
        local want = f(a, b)
        cd._selftest.linalg_through(R)
        R.lu = {}
        return want, f(a, b), R.lu
      end
      -- the largest |a x - b| of each matrix relative to |a| |x| + |b| (infinity norms), computed in Lua
      local function residual(a, x, b)
        local at, xt, bt, worst = a:totable(), x:totable(), b:totable(), 0
        for m = 1, #at do
          local A, X, Bm, na, nx, nb, r = at[m], xt[m], bt[m], 0, 0, 0, 0
          for i = 1, #A do
            local s = 0
            for j = 1, #A do s = s + math.abs(A[i][j]) end
            na = math.max(na, s)
            for c = 1, #Bm[i] do
              local v = -Bm[i][c]
              for j = 1, #A do v = v + A[i][j] * X[j][c] end
              r, nx, nb = math.max(r, math.abs(v)), math.max(nx, math.abs(X[i][c])), math.max(nb, math.abs(Bm[i][c]))
            end
          end
          worst = math.max(worst, r / (na * nx + nb))
        end
        return worst
      end

      it("answers as LAPACKE for n 1, 2, 7, 31, 32, k 1, 3, (13,) 32, batches of 1, 5 and 1024, float32 and float64, "
        .. "and calls no LU routine", function()
        for _, dt in ipairs({ "float32", "float64" }) do
          local tol = dt == "float32" and 1e-4 or 1e-12
          for _, n in ipairs({ 1, 2, 7, 31, 32 }) do
            for _, k in ipairs(n == 7 and { 1, 3, 13, 32 } or { 1, 3, 32 }) do   -- 13: 8 columns, then 5
              local batches = (n == 32 and k == 1 or n == 7 and k == 3) and { 1, 5, BIG } or { 1, 5 }
              for _, B in ipairs(batches) do
                local a = cd.array(values(B * n * n, n + k), dt, opt):reshape({ B, n, n })
                a = a + cd.eye(n, n, 0, dt, opt) * (n / 2)   -- the diagonal not always the largest: rows move
                local b = cd.array(values(B * n * k, 3 * n + k), dt, opt):reshape({ B, n, k })
                local want, got, lu = both(a, b)
                assert.are.same({}, lu)
                assert.are.equal(dt, got.dtype)
                assert.are.same({ B, n, k }, got.shape)
                near(got, want, tol)
                local r = residual(a, got, b)
                local why = ("n %d k %d B %d %s: residual %g"):format(n, k, B, dt, r)
                assert(r < (dt == "float32" and 1e-5 or 1e-14), why)
              end
            end
          end
        end
      end)

      it("exchanges rows for zeros on the diagonal, as getrf's pivoting does; inv takes it too", function()
        local p = cd.array({ { 0, 0, 0, 2 }, { 0, 3, 0, 0 }, { 1, 0, 0, 0 }, { 0, 0, -4, 1 } }, "float64", opt)
        local want, got, lu = both(p, cd.array({ { 2 }, { 6 }, { 3 }, { 5 } }, "float64", opt))
        assert.are.same({}, lu)
        near(got, { { 3 }, { 2 }, { -1 }, { 1 } }, 0)
        near(got, want, 0)
        local iw, ig = both(p:astype("float32"), nil, L.inv)
        assert.are.same({}, R.lu)
        near(ig, iw, 0)
        near(cd.matmul(p, ig:astype("float64")), cd.eye(4, 4, 0, "float64", opt), 1e-7)
      end)

      it("names the first singular matrix of a batch, whatever column its zero pivot is in", function()
        local a = well(3, 5, "float64", "cpu", 2):copy()
        a[3]:copy_from(cd.array({ { 1, 2, 3 }, { 2, 4, 6.5 }, { 1, 2, 1 } }, "float64", opt))   -- zero pivot at step 2
        a[5]:copy_from(cd.zeros({ 3, 3 }, "float64", opt))
        cd._selftest.linalg_through(R)
        R.lu = {}
        E(function() L.solve(a, cd.ones({ 5, 3, 2 }, "float64", opt)) end, "bad argument #1 to 'solve' (singular " ..
          "matrix (matrix 3 of the batch); a has no inverse: cd.linalg.lstsq and cd.linalg.pinv take singular " ..
          "matrices)")
        E(function() L.inv(a:slice(4, 5):astype("float32")) end, "bad argument #1 to 'inv' (singular matrix (matrix " ..
          "2 of the batch); a has no inverse: cd.linalg.lstsq and cd.linalg.pinv take singular matrices)")
        E(function() L.inv(cd.zeros({ 1, 1 }, "float64", opt)) end, "bad argument #1 to 'inv' (singular matrix; a " ..
          "has no inverse: cd.linalg.lstsq and cd.linalg.pinv take singular matrices)")
        assert.are.same({}, R.lu)
      end)

      -- LAPACK's answer to an inf is not always NaN: a 5 x 5 with one inf below the diagonal has a finite one
      it("answers as LAPACKE for a matrix holding a NaN (NaNs) or an inf, the others of its batch unchanged",
        function()
          for _, v in ipairs({ 0 / 0, math.huge, -math.huge }) do
            for _, n in ipairs({ 1, 5, 32 }) do
              local a = well(n, 3, "float32", "cpu", 4):copy()
              a[2][n][1] = v
              local b = cd.array(values(3 * n, 5), "float32", opt):reshape({ 3, n, 1 })
              local want, got = both(a, b)
              assert.are.same({}, R.lu)
              local w, g = helper.values(want), helper.values(got)
              for i = 1, #w do
                local ok = w[i] ~= w[i] and g[i] ~= g[i] or math.abs(g[i] - w[i]) <= 1e-5 * math.max(1, math.abs(w[i]))
                assert(ok, ("%s, n %d, element %d: %.9g, expected %.9g"):format(v, n, i, g[i], w[i]))
              end
              if v ~= v then assert(g[n + 1] ~= g[n + 1], "the NaN matrix's answer is NaN") end
            end
          end
        end)

      it("reads a and b where they are (contiguous, b one matrix each or one for all), copies neither, changes " ..
        "neither", function()
        local a = well(8, NB, "float64", "cpu", 3)
        local shapes = { { NB, 8, 1 }, { 8, 2 }, { 8 }, { 1, 8, 3 }, { NB, 8, 32 } }
        for _, shape in ipairs(shapes) do
          local size = 1
          for _, d in ipairs(shape) do size = size * d end
          local b = cd.array(values(size, 4), "float64", opt):reshape(shape)
          local a0, b0 = a:copy(), b:copy()
          local want = both(a, b)
          collectgarbage()
          local before = cd.memory_stats("cpu").allocated
          cd.reset_peak_memory_stats("cpu")
          local got = L.solve(a, b)
          local grew = cd.memory_stats("cpu").max_allocated - before
          assert(grew < got.size * 8 + a.size * 4, ("b %s: %d bytes more at the peak, a is %d, the answer %d")
            :format(table.concat(shape, "x"), grew, a.size * 8, got.size * 8))
          near(got, want, 1e-12)
          near(a, a0, 0)
          near(b, b0, 0)
        end
        cd._selftest.linalg_through(nil)
        local want = L.inv(a)
        cd._selftest.linalg_through(R)
        collectgarbage()
        local before = cd.memory_stats("cpu").allocated
        cd.reset_peak_memory_stats("cpu")
        local got = L.inv(a)
        local grew = cd.memory_stats("cpu").max_allocated - before
        assert(grew < a.size * 8 * 3 / 2, ("inv: %d bytes more at the peak, a is %d"):format(grew, a.size * 8))
        near(got, want, 1e-12)
        -- a b broadcast over part of a's batch, a transposed a, and an a of another dtype are copied, as before
        local a4 = a:reshape({ 4, NB // 4, 8, 8 })
        local b3 = cd.array(values(NB // 4 * 8, 2), "float64", opt):reshape({ NB // 4, 8, 1 })
        local w4, g4 = both(a4, b3)
        near(g4, w4, 1e-12)
        local wt, gt = both(swapT(a), b3:reshape({ 1, NB // 4, 8, 1 }):reshape({ NB // 4, 8, 1 }):slice(1, 1))
        near(gt, wt, 1e-12)
        local wf, gf = both(a:astype("float32"), b3:slice(1, 1))
        near(gf, wf, 1e-5)
      end)

      it("takes n and k up to 32; n = 33 or k = 33 go to cuBLAS's batched LU, a single such matrix to cuSOLVER's "
        .. "getrf and getrs", function()
        for _, nk in ipairs({ { 32, 32, 3 }, { 32, 32, 1 }, { 33, 1, 3 }, { 4, 33, 3 }, { 33, 2, 1 } }) do
          local n, k, B = nk[1], nk[2], nk[3]
          local a = well(n, B, "float64", "cpu", 6)
          local b = cd.array(values(B * n * k, 7), "float64", opt):reshape({ B, n, k })
          local want, got, lu = both(a, b)
          local cublas = B > 1 and { "solve_batched", "getrf", "getrs" } or { "getrf", "getrs" }
          assert.are.same((n > 32 or k > 32) and cublas or {}, lu)
          near(got, want, 1e-12)
        end
      end)

      -- the CUDA side of the generated kernel where there is no GPU: NVRTC for sm_90, as spec/31 does the sort's
      -- (g++ on the cpu device took a source that NVRTC refused: INFINITY, which NVRTC does not define)
      helper.nvrtc_it("compiles with NVRTC for n 1, 2, 7, 32 and k 1, 13, 32, float32 and float64", function()
        local names, failures = helper.nvrtc_compiles("^cdv_solve", function()
          for _, dt in ipairs({ "float32", "float64" }) do
            for _, nk in ipairs({ { 1, 1 }, { 2, 13 }, { 7, 1 }, { 32, 1 }, { 32, 32 } }) do
              local n, k = nk[1], nk[2]
              local a = well(n, 2, dt, "cpu", 6)
              both(a, cd.array(values(2 * n * k, 7), dt, opt):reshape({ 2, n, k }))
            end
          end
        end)
        assert.are.same({}, failures)
        assert.are.equal(10, #names)
      end)
    end)

    it("svd does the batch again with gesvd when gesvdj does not converge for a matrix", function()
      local a = cd.array(values(3 * 5 * 4, 9), "float64"):reshape({ 3, 5, 4 })
      cd._selftest.linalg_through(nil)
      local cu, cs, cvh = L.svd(a)
      cd._selftest.linalg_through(R)
      R.calls.gesvd, R.calls.gesvdj, R.gesvdj_fails = 0, 0, 2
      local ok, u, s, vh = pcall(L.svd, a)
      R.gesvdj_fails = nil
      assert(ok, u)
      assert.are.same({ gesvd = 1, gesvdj = 1 }, R.calls)
      near(s, cs, 1e-12)
      near(cd.abs(u), cd.abs(cu), 1e-12)
      near(cd.abs(vh), cd.abs(cvh), 1e-12)
    end)
  end)
  checks("cuda:0", helper.gpu_it)   -- cuSOLVER (NOTE [linalg layouts]): the same expectations

  -- NOTE [fused small solve] on a GPU: the cpu device's LAPACKE answers, the singular matrix named, NaN, and a and b
  -- read where they are (the cuBLAS way copied a: the peak grew by more than a's bytes)
  helper.gpu_it("solves n, k <= 32 on cuda:0 in the fused kernel: as LAPACKE, singular and NaN matrices, no copies",
    function()
      local gpu = { device = "cuda:0" }
      for _, dt in ipairs({ "float32", "float64" }) do
        local tol = dt == "float32" and 1e-4 or 1e-12
        for _, n in ipairs({ 1, 7, 32 }) do
          for _, k in ipairs({ 1, 13, 32 }) do
            for _, B in ipairs({ 1, 5, 1024 }) do
              local a = well(n, B, dt, "cpu", n + k) - cd.eye(n, n, 0, dt, { device = "cpu" }) * (n / 2)
              local b = cd.array(values(B * n * k, k), dt, { device = "cpu" }):reshape({ B, n, k })
              local ga, gb = a:to("cuda:0"), b:to("cuda:0")
              cd.synchronize()
              local before = cd.memory_stats("cuda:0").allocated
              cd.reset_peak_memory_stats("cuda:0")
              local x = L.solve(ga, gb)
              local grew = cd.memory_stats("cuda:0").max_allocated - before
              assert(grew < x.size * x.itemsize + a.size * a.itemsize / 2 + 256,   -- (and the 8-byte word)
                ("%s n %d k %d B %d: %d bytes more at the peak"):format(dt, n, k, B, grew))
              near(x:to("cpu"), L.solve(a, b), tol)
            end
          end
          local a = well(n, 3, dt, "cpu", 9)
          near(L.inv(a:to("cuda:0")):to("cpu"), L.inv(a), tol)
        end
        local a = well(5, 4, dt, "cpu", 2):copy()
        a[3]:copy_from(cd.array({ { 1, 2, 3, 4, 5 }, { 2, 4, 6, 8, 10.5 }, { 0, 0, 1, 0, 0 }, { 0, 0, 0, 1, 0 },
          { 1, 2, 1, 1, 1 } }, dt, { device = "cpu" }))
        local ga = a:to("cuda:0")
        E(function() L.solve(ga, cd.ones({ 4, 5, 1 }, dt, gpu)) end, "bad argument #1 to 'solve' (singular matrix " ..
          "(matrix 3 of the batch); a has no inverse: cd.linalg.lstsq and cd.linalg.pinv take singular matrices)")
        E(function() L.solve(a, cd.ones({ 4, 5, 1 }, dt, { device = "cpu" })) end,
          "bad argument #1 to 'solve' (singular matrix " ..
          "(matrix 3 of the batch); a has no inverse: cd.linalg.lstsq and cd.linalg.pinv take singular matrices)")
        local nan = well(4, 2, dt, "cpu", 3):copy()
        nan[2][3][2] = 0 / 0
        local xs = L.solve(nan:to("cuda:0"), cd.ones({ 2, 4, 1 }, dt, gpu)):to("cpu")
        near(xs[1], L.solve(nan[1], cd.ones({ 4, 1 }, dt, { device = "cpu" })), tol)
        local t = xs[2]:totable()
        assert(t[1][1] ~= t[1][1], "NaN in, NaN out")
      end
    end)

  helper.gpu_it("solves and factors a batch of 1024 32 x 32 float32 matrices at once on cuda:0 (the fused solve, "
    .. "cuSOLVER's potrfBatched)", function()
    local a = well(32, 1024, "float32", "cuda:0", 5)
    local b = cd.array(values(1024 * 32, 6), "float32", { device = "cuda:0" }):reshape({ 1024, 32, 1 })
    local x = L.solve(a, b)
    assert.are.same({ 1024, 32, 1 }, x.shape)
    near(cd.matmul(a, x), b, 1e-4)
    local cpu = L.solve(a:to("cpu"), b:to("cpu"))
    near(x:to("cpu"), cpu, 1e-4)
    local s = cd.matmul(a, swapT(a):copy())   -- 1024 positive definite matrices: one potrfBatched
    local f = L.cholesky(s)
    near(f:to("cpu"), L.cholesky(s:to("cpu")), 1e-3)
    near(cd.triu(f, 1):to("cpu"), cd.zeros({ 1024, 32, 32 }, "float32", { device = "cpu" }), 0)
  end)

  -- NOTE [tiled transpose] (views.lua): a's transpose copied in and the factor's tril copied out, both tiled
  helper.gpu_it("cholesky on cuda:0 copies a's transpose and its factor by the tiled kernel, edges and a batch",
    function()
    for _, shape in ipairs({ { 100 }, { 64 }, { 33, 3 } }) do
      local a = well(shape[1], shape[2], "float64", "cpu", 2)
      a = cd.matmul(a, swapT(a):copy())
      local g = a:to("cuda:0")
      local before = cd._transpose_tiles()
      local f = L.cholesky(g)
      assert.are.equal(2, cd._transpose_tiles() - before)
      near(f:to("cpu"), L.cholesky(a), 1e-10)
      near(L.cholesky(g, { upper = true }):to("cpu"), L.cholesky(a, { upper = true }), 1e-10)
    end
  end)

  helper.gpu_it("svd, qr and eigh on cuda:0 agree with the cpu device's (magnitudes where signs are free)", function()
    for _, shape in ipairs({ { 6, 4 }, { 4, 6 }, { 3, 5, 5 } }) do
      local a = cd.array(values(shape[1] * shape[2] * (shape[3] or 1), 8), "float64"):reshape(shape)
      local g = a:to("cuda:0")
      for _, full in ipairs({ true, false }) do
        local u, s, vh = L.svd(g, { full_matrices = full })
        local cu, cs, cvh = L.svd(a, { full_matrices = full })
        near(s:to("cpu"), cs, 1e-12)
        assert.are.same(cu.shape, u.shape)
        assert.are.same(cvh.shape, vh.shape)
        local k = cs.shape[#cs.shape]
        local uk = full and u:slice(1, k, 1, u.ndim) or u
        local vk = full and vh:slice(1, k, 1, vh.ndim - 1) or vh
        near(cd.matmul(uk * cd.expand_dims(s, -2), vk):to("cpu"), a, 1e-12)
      end
      local q, r = L.qr(g, "complete")
      near(cd.matmul(q, r):to("cpu"), a, 1e-12)
      near(cd.abs(r):to("cpu"), cd.abs(select(2, L.qr(a, "complete"))), 1e-12)
    end
    local spd = well(5, 3, "float64", "cpu", 4)
    spd = spd + swapT(spd)
    local w, v = L.eigh(spd:to("cuda:0"), "U")
    near(w:to("cpu"), L.eigvalsh(spd, "U"), 1e-12)
    near(cd.matmul(spd, v:to("cpu")), v:to("cpu") * cd.expand_dims(w:to("cpu"), -2), 1e-12)
  end)

  helper.gpu_it("svd on cuda:0: a stack of small matrices in one gesvdjBatched (square, full, S alone), larger and "
    .. "economy ones through gesvdj, as the cpu device's", function()
    for _, shape in ipairs({ { 1024, 8, 8 }, { 64, 7, 5 }, { 2, 40, 33 }, { 3, 33, 40 } }) do
      for _, dt in ipairs({ "float32", "float64" }) do
        local a = cd.array(values(shape[1] * shape[2] * shape[3], 10), dt):reshape(shape)
        local g, tol = a:to("cuda:0"), dt == "float32" and 1e-4 or 1e-11
        near(L.svd(g, { compute_uv = false }):to("cpu"), L.svd(a, { compute_uv = false }), tol)
        for _, full in ipairs({ true, false }) do
          local u, s, vh = L.svd(g, { full_matrices = full })
          local k = s.shape[#s.shape]
          local uk, vk = u:slice(1, k, 1, u.ndim), vh:slice(1, k, 1, vh.ndim - 1)
          near(cd.matmul(uk * cd.expand_dims(s, -2), vk):to("cpu"), a, tol * 10)
          near(s:to("cpu"), L.svd(a, { compute_uv = false }), tol)
        end
      end
    end
  end)

  -- (det: inv of a small matrix is the fused solve's, which needs no cuSOLVER: NOTE [fused small solve])
  helper.gpu_it("without cuSOLVER a call on cuda:0 is a cudadev.Error naming every file tried; the cpu device works",
    function()
      local out = helper.run_child([[
        local ok, err = pcall(cd.linalg.det, cd.eye(2, 2, 0, "float64", {device = "cuda:0"}))
        print(ok, cd.type(err), err.name, err.message)
        print(cd.linalg.det(cd.eye(2, 2, 0, "float64", {device = "cpu"})))
      ]], "CUDADEV_LIBCUSOLVER=/nonexistent/libcusolver.so.12")
      assert(out:find("false\tError\tCUSOLVER_NOT_FOUND\tno cuSOLVER: tried /nonexistent/libcusolver.so.12", 1, true), out)
      assert(out:find("\n1.0\n", 1, true), out)
    end)

  it("NaN and inf matrices give NumPy's answers: NaN from inv, det and qr, errors from svd, eigh, pinv, lstsq and "
    .. "cholesky", function()
    for _, v in ipairs({ 0 / 0, math.huge }) do
      local a = cd.full({ 3, 3 }, v, "float64", { device = "cpu" })
      local inv, det = L.inv(a), L.det(a)
      assert(det ~= det and inv[1][1] ~= inv[1][1], "inv and det of a NaN or inf matrix are NaN")
      local q = L.qr(a)
      assert(q[1][1] ~= q[1][1])
      E(function() L.svd(a) end, "svd: SVD did not converge")
      E(function() L.eigvalsh(a) end, "eigvalsh: eigenvalues did not converge")
      E(function() L.pinv(a) end, "pinv: SVD did not converge")
      E(function() L.lstsq(a, cd.ones({ 3 }, "float64", { device = "cpu" })) end, "lstsq: SVD did not converge")
      helper.assert_error_contains(function() L.cholesky(a) end,
        "bad argument #1 to 'cholesky' (matrix is not positive definite: its leading minor of order")
    end
  end)

  it("is cd.linalg, its C side taken away from the module", function()
    assert.are.equal("table", type(cd.linalg))
    assert.is_nil(rawget(cd, "_linalg"))
  end)

  it("without LAPACKE the module loads and the cpu device works; cd.linalg names the package and every name tried",
    function()
      local out = helper.run_child([[
        print(cd.matmul(cd.ones({2, 2}, "float32", {device = "cpu"}), cd.ones({2, 2}, "float32", {device = "cpu"})):sum())
        local ok, err = pcall(cd.linalg.inv, cd.eye(2, 2, 0, "float64", {device = "cpu"}))
        print(ok, err)
      ]], "CUDADEV_LIBLAPACKE=/nonexistent/liblapacke.so.3")
      assert(out:find("8.0\nfalse\t", 1, true), out)
      assert(out:find("inv: no LAPACKE (install Debian's liblapacke, or set CUDADEV_LIBLAPACKE to its path): tried " ..
        "/nonexistent/liblapacke.so.3 (/nonexistent/liblapacke.so.3: cannot open shared object file: No such file or " ..
        "directory)", 1, true), out)
      assert(out:find("exit 0\n", 1, true), out)
    end)
end)
