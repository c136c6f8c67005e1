-- Matrix multiply: cd.matmul(a, b [, opts]) and a:matmul(b [, opts]), cuBLAS on CUDA devices and the blocked
-- host kernel on the cpu device (NOTE [host gemm], NOTE [cublas abi] in src/cublas_abi.h). Results are checked
-- against a triple loop in Lua.
local helper = require "spec.helper"
local cd = require "cudadev"

local E = helper.assert_error_matches

local values = helper.lcg_values   -- deterministic values in [-1, 1)

-- A flat Lua list as an m x n array (rows first).
local function matrix(flat, m, n, dtype, dev)
  return cd.array(flat, dtype, { device = dev }):reshape({ m, n })
end

-- The Lua reference C = alpha op(A) op(B) + beta C0, with the bound of its rounding error for each element.
local function reference(A, B, m, k, n, o)
  o = o or {}
  local alpha, beta = o.alpha or 1, o.beta or 0
  local C, bound = {}, {}
  for i = 1, m do
    for j = 1, n do
      local s, mag = 0, 0
      for p = 1, k do
        local a = o.transa and A[(p - 1) * m + i] or A[(i - 1) * k + p]
        local b = o.transb and B[(j - 1) * k + p] or B[(p - 1) * n + j]
        s, mag = s + a * b, mag + math.abs(a * b)
      end
      local c0 = o.C0 and o.C0[(i - 1) * n + j] or 0
      C[#C + 1] = alpha * s + (beta ~= 0 and beta * c0 or 0)
      bound[#bound + 1] = math.abs(alpha) * mag + math.abs(beta * c0)
    end
  end
  return C, bound
end

local EPS = { float16 = 2e-3, float32 = 1e-6, float64 = 1e-15 }

-- Every element of array c within the dtype's rounding of the reference.
local function assert_close(c, C, bound, dtype, k)
  local got = c:reshape({ c.size }):totable()
  assert.equal(#C, #got)
  local tol = EPS[dtype] * (k + 2)
  for i = 1, #C do
    if not (math.abs(got[i] - C[i]) <= tol * bound[i] + 1e-30) then   -- NaN fails too
      error(("element %d: got %.17g, expected %.17g (%s, tolerance %g)"):format(i, got[i], C[i], dtype, tol * bound[i]))
    end
  end
end

helper.each_device(function(dev)
  describe("cd.matmul on " .. dev, function()
    it("multiplies odd shapes as a triple loop does, in float32 and float64", function()
      for _, s in ipairs({ { 3, 5, 7 }, { 1, 1, 1 }, { 64, 33, 17 }, { 7, 300, 19 }, { 130, 9, 40 } }) do
        local m, k, n = s[1], s[2], s[3]
        local A, B = values(m * k, m + k), values(k * n, n + 1)
        local C, bound = reference(A, B, m, k, n)
        for _, dt in ipairs({ "float32", "float64" }) do
          local c = cd.matmul(matrix(A, m, k, dt, dev), matrix(B, k, n, dt, dev))
          assert.are.same({ m, n }, c.shape)
          assert.equal(dt, c.dtype)
          assert.equal(dev, c.device.alias)
          assert_close(c, C, bound, dt, k)
        end
      end
    end)

    it("a:matmul(b) is cd.matmul(a, b)", function()
      local A, B = values(12, 1), values(20, 2)
      local a, b = matrix(A, 3, 4, "float64", dev), matrix(B, 4, 5, "float64", dev)
      assert.are.same(cd.matmul(a, b):totable(), a:matmul(b):totable())
      local C, bound = reference(A, B, 3, 4, 5, { alpha = 2 })
      assert_close(a:matmul(b, { alpha = 2 }), C, bound, "float64", 4)
    end)

    it("takes 1-d operands as NumPy's matmul does", function()
      local v, w = cd.array({ 1, 2, 3 }, "float64", { device = dev }), cd.array({ 4, 5, 6 }, "float64", { device = dev })
      local m = cd.array({ { 1, 2, 3 }, { 4, 5, 6 } }, "float64", { device = dev })
      local mt = cd.array({ { 1, 4 }, { 2, 5 }, { 3, 6 } }, "float64", { device = dev })
      local dot = cd.matmul(v, w)                       -- vector . vector: a 0-d array
      assert.equal(0, dot.ndim)
      assert.equal(32, dot:totable())
      assert.are.same({ 14, 32 }, cd.matmul(m, v):totable())    -- matrix @ vector
      assert.are.same({ 14, 32 }, v:matmul(mt):totable())       -- vector @ matrix
    end)

    it("multiplies stacks of matrices, broadcasting the batch dimensions as NumPy (NOTE [batched matmul])", function()
      -- each {m, k} @ {k, n} of the batch is checked against the Lua reference of its own matrices
      local m, k, n = 3, 5, 4
      local function stack(nb, r, c, seed)
        local flat = {}
        for i = 1, nb do for _, x in ipairs(values(r * c, seed + i)) do flat[#flat + 1] = x end end
        return flat
      end
      local function mat(flat, idx, r, c)
        return table.move(flat, (idx - 1) * r * c + 1, idx * r * c, 1, {})
      end
      for _, dt in ipairs({ "float32", "float64" }) do
        local A, B = stack(6, m, k, 10), stack(6, k, n, 20)
        local a = cd.array(A, dt, { device = dev }):reshape({ 2, 3, m, k })
        local b = cd.array(B, dt, { device = dev }):reshape({ 2, 3, k, n })
        local c = cd.matmul(a, b)
        assert.are.same({ 2, 3, m, n }, c.shape)
        for i = 1, 6 do
          local C, bound = reference(mat(A, i, m, k), mat(B, i, k, n), m, k, n)
          assert_close(c:reshape({ 6, m, n })[i], C, bound, dt, k)
        end
        -- one matrix for every batch ({k, n} and {1, k, n}), and a 1-d operand
        local b1 = cd.array(mat(B, 1, k, n), dt, { device = dev }):reshape({ k, n })
        for _, bb in ipairs({ b1, b1:reshape({ 1, k, n }) }) do
          local c2 = cd.matmul(a, bb)
          assert.are.same({ 2, 3, m, n }, c2.shape)
          for i = 1, 6 do
            local C, bound = reference(mat(A, i, m, k), mat(B, 1, k, n), m, k, n)
            assert_close(c2:reshape({ 6, m, n })[i], C, bound, dt, k)
          end
        end
        assert.are.same({ 2, 3, m }, cd.matmul(a, cd.ones(k, dt, { device = dev })).shape)
        assert.are.same({ 2, 3, n }, cd.matmul(cd.ones(k, dt, { device = dev }), b).shape)
        -- batch shapes that broadcast both ways: {2, 1} with {1, 3}
        local a21 = a:slice(1, 1, 1, 2)            -- {2, 1, m, k}: batches 1 and 4
        local b13 = b:slice(1, 1, 1, 1)            -- {1, 3, k, n}: batches 1, 2, 3
        local c3 = cd.matmul(a21:contiguous(), b13:contiguous())
        assert.are.same({ 2, 3, m, n }, c3.shape)
        for i = 1, 2 do
          for j = 1, 3 do
            local C, bound = reference(mat(A, (i - 1) * 3 + 1, m, k), mat(B, j, k, n), m, k, n)
            assert_close(c3[i][j], C, bound, dt, k)
          end
        end
        -- transposed last two dimensions, and out=
        local at = cd.array(A, dt, { device = dev }):reshape({ 6, k, m })
        local o = cd.zeros({ 6, m, n }, dt, { device = dev })
        assert.equal(o, cd.matmul(at, b:reshape({ 6, k, n }), { transa = true, out = o }))
        for i = 1, 6 do
          local C, bound = reference(mat(A, i, k, m), mat(B, i, k, n), m, k, n, { transa = true })
          assert_close(o[i], C, bound, dt, k)
        end
        -- empty batches
        assert.are.same({ 0, m, n }, cd.matmul(cd.zeros({ 0, m, k }, dt, { device = dev }), b1).shape)
      end
      E(function() cd.matmul(cd.zeros({ 2, 3, 3 }, "float32", { device = dev }), cd.zeros({ 3, 3, 3 }, "float32", { device = dev })) end,
        "matmul: the batch dimensions of {2, 3, 3} and {3, 3, 3} cannot be broadcast together (2 and 3)")
      E(function() cd.matmul(cd.zeros({ 2, 3, 3 }, "float32", { device = dev }), cd.zeros({ 2, 3, 3 }, "float32", { device = dev }),
        { out = cd.zeros({ 3, 3 }, "float32", { device = dev }) }) end,
        "matmul: out has shape {3, 3} but the result has shape {2, 3, 3}")
    end)

    it("writes into out, scaled by alpha and added to beta times out", function()
      local A, B, C0 = values(15, 3), values(35, 4), values(21, 5)
      for _, dt in ipairs({ "float32", "float64" }) do
        local a, b = matrix(A, 3, 5, dt, dev), matrix(B, 5, 7, dt, dev)
        local out = matrix(C0, 3, 7, dt, dev)
        local r = cd.matmul(a, b, { out = out, alpha = 0.5, beta = -2 })
        assert.equal(out, r)
        local C, bound = reference(A, B, 3, 5, 7, { alpha = 0.5, beta = -2, C0 = C0 })
        assert_close(out, C, bound, dt, 5)
        -- beta 0 (the default) never reads out: NaN there does not propagate, as in BLAS
        out:fill(0 / 0)
        cd.matmul(a, b, { out = out })
        C, bound = reference(A, B, 3, 5, 7)
        assert_close(out, C, bound, dt, 5)
      end
    end)

    it("multiplies transposed operands with transa and transb", function()
      local A, B = values(6 * 4, 6), values(5 * 6, 7)   -- A stored 6 x 4 (op(A) 4 x 6), B stored 5 x 6 (op(B) 6 x 5)
      local a, b = matrix(A, 6, 4, "float64", dev), matrix(B, 5, 6, "float64", dev)
      local c = cd.matmul(a, b, { transa = true, transb = true })
      assert.are.same({ 4, 5 }, c.shape)
      local C, bound = reference(A, B, 4, 6, 5, { transa = true, transb = true })
      assert_close(c, C, bound, "float64", 6)
      local b2 = matrix(values(6 * 5, 8), 6, 5, "float64", dev)
      C, bound = reference(A, values(6 * 5, 8), 4, 6, 5, { transa = true })
      assert_close(cd.matmul(a, b2, { transa = true }), C, bound, "float64", 6)
    end)

    it("takes transposed views (a.T, swapaxes of a stack) as transa and transb do, without a copy (issue 30)", function()
      -- small integer values: every product is exact, so the view's product equals its copy's bit for bit
      local function ints(shape, dt, seed)
        local n = 1
        for _, d in ipairs(shape) do n = n * d end
        local t = {}
        for i = 1, n do t[i] = (i * seed) % 7 - 3 end
        return cd.array(t, dt, { device = dev }):reshape(shape)
      end
      local function same(got, want) assert.are.same(want:totable(), got:totable()) end
      for _, dt in ipairs({ "float32", "float64" }) do
        local a, b = ints({ 6, 4 }, dt, 3), ints({ 6, 5 }, dt, 5)   -- a.T 4 x 6, b 6 x 5
        assert.is_false(a.T.is_contiguous)
        same(cd.matmul(a.T, b), cd.matmul(a.T:contiguous(), b))
        local bt = ints({ 5, 6 }, dt, 2)                                -- bt.T 6 x 5
        same(cd.matmul(a.T, bt.T), cd.matmul(a.T:contiguous(), bt.T:contiguous()))
        same(cd.matmul(ints({ 3, 6 }, dt, 4), bt.T), cd.matmul(ints({ 3, 6 }, dt, 4), bt.T:contiguous()))
        -- with the option too: a transposed view transposed again is the array it views
        same(cd.matmul(a.T, ints({ 4, 2 }, dt, 6), { transa = true }), cd.matmul(a, ints({ 4, 2 }, dt, 6)))
        -- a 1-d operand against a transposed matrix, and out=
        same(cd.matmul(ints({ 6 }, dt, 1), bt.T), cd.matmul(ints({ 6 }, dt, 1), bt.T:contiguous()))
        local out = cd.zeros({ 4, 5 }, dt, { device = dev })
        assert.are.equal(out, cd.matmul(a.T, b, { out = out }))
        same(out, cd.matmul(a.T:contiguous(), b))
        -- stacks: the last two dimensions swapped (cuBLAS's strided-batched call reads them transposed)
        local s, t = ints({ 3, 6, 4 }, dt, 5), ints({ 3, 5, 6 }, dt, 3)
        local sv, tv = cd.swapaxes(s, 2, 3), cd.swapaxes(t, 2, 3)           -- {3, 4, 6} and {3, 6, 5}
        same(cd.matmul(sv, tv), cd.matmul(sv:contiguous(), tv:contiguous()))
        same(cd.matmul(sv, b), cd.matmul(sv:contiguous(), b))                -- a 2-d b for every batch
        same(cd.matmul(a.T, tv), cd.matmul(a.T:contiguous(), tv:contiguous())) -- a 2-d transposed a for every batch
      end
    end)

    it("copies other strided views first (a slice with a step, a 3-d a.T), as CuPy does (issue 30)", function()
      local function ints(shape, seed)
        local n = 1
        for _, d in ipairs(shape) do n = n * d end
        local t = {}
        for i = 1, n do t[i] = (i * seed) % 7 - 3 end
        return cd.array(t, "float32", { device = dev }):reshape(shape)
      end
      local function same(got, want) assert.are.same(want:totable(), got:totable()) end
      local a3 = ints({ 2, 3, 5 }, 3).T                 -- {5, 3, 2}: its batch dimension reversed too (no op reads it)
      same(cd.matmul(a3, ints({ 2, 4 }, 5)), cd.matmul(a3:contiguous(), ints({ 2, 4 }, 5)))
      local a, bs = ints({ 3, 5 }, 2), ints({ 5, 14 }, 4):slice(1, 14, 2, 2)   -- every other column: {5, 7}
      assert.is_false(bs.is_contiguous)
      same(cd.matmul(a, bs), cd.matmul(a, bs:contiguous()))
      local out = cd.zeros({ 3, 7 }, "float32", { device = dev })
      cd.matmul(a, bs, { out = out, stream = cd.stream(dev) })
      cd.synchronize()
      same(out, cd.matmul(a, bs:contiguous()))
      -- the view itself is left as it was
      same(bs, ints({ 5, 14 }, 4):slice(1, 14, 2, 2))
    end)

    it("multiplies float16 arrays, accumulating in float32", function()
      local A, B = values(40, 9), values(40, 10)
      local a, b = matrix(A, 5, 8, "float16", dev), matrix(B, 8, 5, "float16", dev)
      -- the reference from the float16 values themselves
      local a16, b16 = a:reshape({ 40 }):totable(), b:reshape({ 40 }):totable()
      local C, bound = reference(a16, b16, 5, 8, 5)
      local c = cd.matmul(a, b)
      assert.equal("float16", c.dtype)
      assert_close(c, C, bound, "float16", 8)
    end)

    it("handles empty dimensions: no rows, no columns, and k = 0 (out = beta out)", function()
      local D = { device = dev }
      assert.are.same({ 0, 4 }, cd.matmul(cd.zeros({ 0, 3 }, D), cd.zeros({ 3, 4 }, D)).shape)
      assert.are.same({ 2, 0 }, cd.matmul(cd.zeros({ 2, 3 }, D), cd.zeros({ 3, 0 }, D)).shape)
      local z = cd.matmul(cd.zeros({ 2, 0 }, D), cd.zeros({ 0, 3 }, D))
      assert.are.same({ { 0, 0, 0 }, { 0, 0, 0 } }, z:totable())
      local out = cd.full({ 2, 3 }, 4, "float32", D)
      cd.matmul(cd.zeros({ 2, 0 }, D), cd.zeros({ 0, 3 }, D), { out = out, beta = 0.5 })
      assert.are.same({ { 2, 2, 2 }, { 2, 2, 2 } }, out:totable())
    end)

    it("refuses what it cannot multiply, with errors that say what to do", function()
      local D = { device = dev }
      local a, b = cd.zeros({ 3, 5 }, D), cd.zeros({ 4, 7 }, D)
      E(function() cd.matmul(a, b) end, "matmul: shapes {3, 5} and {4, 7} do not match: a has 5 columns but b has 4 rows")
      E(function() cd.matmul(a, a, { transb = true, transa = true }) end,
        "matmul: shapes {3, 5} (transposed) and {3, 5} (transposed) do not match: a has 3 columns but b has 5 rows")
      E(function() cd.matmul(a, cd.zeros({ 5, 2 }, "float64", D)) end,
        'matmul: dtypes differ (float32 and float64); convert one with a:astype("float64")')
      E(function() cd.matmul(cd.zeros({ 2, 2 }, "int32", D), cd.zeros({ 2, 2 }, "int32", D)) end,
        'matmul: int32 arrays are not supported (float16, float32 or float64); convert with a:astype("float32")')
      E(function() cd.matmul(cd.zeros({ 2, 2, 2 }, D), cd.zeros({ 3, 2, 2 }, D)) end,
        "matmul: the batch dimensions of {2, 2, 2} and {3, 2, 2} cannot be broadcast together (2 and 3)")
      E(function() cd.matmul(a, cd.zeros({}, D)) end,
        "matmul: b is 0-d; matmul takes arrays of 1 or more dimensions (multiply by a number with *)")
      -- (Lua names the function as it finds it: 'matmul' or 'cudadev.matmul')
      helper.assert_error_contains(function() cd.matmul(a, 2) end, "matmul' (cudadev.Array expected, got number)")
      local c5 = cd.zeros({ 5, 2 }, D)
      E(function() cd.matmul(a, c5, { out = cd.zeros({ 2, 3 }, D) }) end,
        "matmul: out has shape {2, 3} but the result has shape {3, 2}")
      E(function() cd.matmul(a, c5, { out = cd.zeros({ 3, 2 }, "float64", D) }) end,
        "matmul: out is float64 but the result is float32")
      E(function() cd.matmul(a, c5, { out = 1 }) end, "bad option 'out' to 'matmul' (cudadev.Array expected, got number)")
      local sq = cd.zeros({ 3, 3 }, D)
      E(function() cd.matmul(sq, cd.zeros({ 3, 3 }, D), { out = sq }) end,
        "matmul: out overlaps an input; give an out of its own")
      E(function() cd.matmul(a, c5, { beta = 1 }) end, "bad option 'beta' to 'matmul' (needs out: beta scales out's values)")
      E(function() cd.matmul(a, c5, { alpha = "2" }) end, "bad option 'alpha' to 'matmul' (number expected, got string)")
      E(function() cd.matmul(cd.zeros(5, D), c5, { transa = true }) end,
        "bad option 'transa' to 'matmul' (a must be 2-d to be transposed)")
      helper.assert_error_contains(function() cd.matmul(a, c5, { trans = true }) end,
        "matmul' (unknown option 'trans' (expected out, alpha, beta, transa, transb, stream))")
      local freed = cd.zeros({ 5, 2 }, D)
      freed:free()
      E(function() a:matmul(freed) end, "bad argument #1 to 'matmul' (attempt to use a freed array)")   -- Lua counts a method's arguments after self
    end)
  end)
end)

describe("cd.matmul on the cpu device", function()
  it("splits rows over threads: each row is what a one-row product gives", function()
    local m, k, n = 300, 260, 130   -- 10M multiply-adds: more than one thread where there is more than one CPU
    local a = matrix(values(m * k, 11), m, k, "float64", "cpu")
    local b = matrix(values(k * n, 12), k, n, "float64", "cpu")
    local c = cd.matmul(a, b)
    for _, i in ipairs({ 1, 2, 57, 150, 151, 299, 300 }) do
      assert.are.same(a[i]:matmul(b):totable(), c[i]:totable())
    end
  end)

  it("never opens cuBLAS, and cd._selftest.cublas() lists every name tried when it is missing", function()
    local out = helper.run_child([[
      local c = cd.matmul(cd.ones({2, 2}, {device = "cpu"}), cd.ones({2, 2}, {device = "cpu"}))
      print(c:sum())
      print(cd._selftest.cublas())
    ]], "CUDADEV_LIBCUBLAS=/nonexistent/libcublas.so")
    assert.truthy(out:find("8.0\n", 1, true), out)
    assert.truthy(out:find("nil\tno cuBLAS: tried /nonexistent/libcublas.so (", 1, true), out)
    assert.truthy(out:find("; set CUDADEV_LIBCUBLAS to the path of libcublas.so\n", 1, true), out)
    assert.truthy(out:find("exit 0\n", 1, true), out)
  end)
end)

describe("opening cuBLAS", function()
  it("tries libcublas.so.13, .12 and libcublas.so, through the linker's search and in the toolkit", function()
    -- in a child: loading cuBLAS maps half a gigabyte (cublasLt), which this process (under valgrind) need not
    local out = helper.run_child("print(cd._selftest.cublas())", "env -u CUDADEV_LIBCUBLAS")
    if not out:find("^nil\t") then
      assert.truthy(out:match("^[^\n]*libcublas%.so[.%d]*\nexit 0\n$"), out)
    else
      assert.truthy(out:find("no cuBLAS: tried libcublas.so.13 (", 1, true), out)
      assert.truthy(out:find(", /usr/local/cuda/lib64/libcublas.so.12 (", 1, true), out)
    end
  end)
end)

describe("cd.matmul on a CUDA device", function()
  helper.gpu_it("multiplies 1024 x 1024 float32 as the cpu device does", function()
    cd.random.seed(5)
    local a = cd.random.uniform({ 1024, 1024 }, { device = "cuda:0" })
    local b = cd.random.uniform({ 1024, 1024 }, { device = "cuda:0" })
    local g = cd.matmul(a, b):to("cpu")
    local h = cd.matmul(a:to("cpu"), b:to("cpu"))
    -- values in [0, 1): each element is a sum of 1024 positive products, near 256
    local diff = cd.abs(g - h):max()
    assert(diff < 256 * 1e-4, "largest difference " .. diff)
    assert.equal("float32", g.dtype)
  end)

  helper.gpu_it("multiplies 64 stacked 128 x 128 float32 matrices as the cpu device does (one strided-batched call)", function()
    cd.random.seed(6)
    local a = cd.random.uniform({ 64, 128, 128 }, { device = "cuda:0" })
    local b = cd.random.uniform({ 64, 128, 128 }, { device = "cuda:0" })
    local b2 = cd.random.uniform({ 128, 128 }, { device = "cuda:0" })
    for _, bb in ipairs({ b, b2, b:slice(1, 1):contiguous() }) do
      local g = cd.matmul(a, bb):to("cpu")
      local h = cd.matmul(a:to("cpu"), bb:to("cpu"))
      local diff = cd.abs(g - h):max()
      assert(diff < 32 * 1e-4, "largest difference " .. diff)
    end
    local g = cd.matmul(a:reshape({ 8, 1, 8, 128, 128 }), b:reshape({ 1, 8, 8, 128, 128 }))   -- looped batches
    local h = cd.matmul(a:to("cpu"):reshape({ 8, 1, 8, 128, 128 }), b:to("cpu"):reshape({ 1, 8, 8, 128, 128 }))
    assert.are.same({ 8, 8, 8, 128, 128 }, g.shape)
    assert(cd.abs(g:to("cpu") - h):max() < 32 * 1e-4)
  end)

  helper.gpu_it("runs on the given stream and on the current stream", function()
    local s = cd.stream("cuda:0")
    local a = cd.ones({ 256, 128 }, "float64", { device = "cuda:0" })
    local b = cd.ones({ 128, 64 }, "float64", { device = "cuda:0" })
    local c = cd.matmul(a, b, { stream = s })
    s:synchronize()
    assert.equal(128 * 256 * 64, c:sum())
    E(function() cd.matmul(a, b, { stream = cd.stream("cpu") }) end, "stream is on cpu but the work is on cuda:0")
  end)

  helper.gpu_it("refuses arrays on different devices", function()
    local g, h = cd.zeros({ 2, 2 }, { device = "cuda:0" }), cd.zeros({ 2, 2 }, { device = "cpu" })
    E(function() cd.matmul(g, h) end, "matmul: arrays are on cuda:0 and cpu; move one with a:to(device)")
    E(function() cd.matmul(g, g:to("cuda:0"):new_zeros({ 2, 2 }), { out = cd.zeros({ 2, 2 }, { device = "cpu" }) }) end,
      "matmul: out is on cpu but the inputs on cuda:0")
  end)

  helper.gpu_it("says which names were tried when cuBLAS cannot be opened, naming CUDADEV_LIBCUBLAS", function()
    local out = helper.run_child([[
      local a = cd.ones({2, 2}, {device = "cuda:0"})
      local ok, err = pcall(cd.matmul, a, a)
      print(ok, err.api, err.name)
      print(tostring(err))
      print(cd.matmul(a:to("cpu"), a:to("cpu")):sum())
    ]], "CUDADEV_LIBCUBLAS=/nonexistent/libcublas.so")
    assert.truthy(out:find("false\tdlopen\tCUBLAS_NOT_FOUND\n", 1, true), out)
    assert.truthy(out:find("no cuBLAS: tried /nonexistent/libcublas.so (", 1, true), out)
    assert.truthy(out:find("set CUDADEV_LIBCUBLAS to the path of libcublas.so", 1, true), out)
    assert.truthy(out:find("8.0\n", 1, true), out)
  end)

  helper.gpu_it("keeps one cuBLAS handle per device and state, made again after a reset", function()
    local a = cd.ones({ 4, 4 }, { device = "cuda:0" })
    assert.equal(64, cd.matmul(a, a):sum())
    assert.equal(64, cd.matmul(a, a):sum())
    local out = helper.run_child([[
      local a = cd.ones({4, 4}, {device = "cuda:0"})
      print(cd.matmul(a, a):sum())
      a:free()
      cd.device("cuda:0"):reset()
      local b = cd.ones({4, 4}, {device = "cuda:0"})
      print(cd.matmul(b, b):sum())
    ]])
    assert.equal("64.0\n64.0\nexit 0\n", out)
  end)
end)
