-- Strided views (API.md "Computing with arrays": a:transpose, a.T, stepped slices, a:contiguous()): views
-- share memory and carry strides; every operation either reads and writes through the strides or refuses with
-- a message naming a:contiguous(). Values are checked against Lua tables worked out by hand. The same tests run
-- on the cpu device and on cuda:0 when there is one; the cross-device cases are GPU-only.
local helper = require "spec.helper"
local cd = require "cudadev"

local NC = "is not contiguous: copy it with a:contiguous() first"

helper.each_device(function(dev)
  describe("strided views on " .. dev, function()
    local function arr(t, dt) return cd.array(t, dt or "int32", { device = dev }) end
    -- {{1, 2, 3}, {4, 5, 6}}
    local function m23() return arr({ { 1, 2, 3 }, { 4, 5, 6 } }) end
    -- 2x3x4 of 1..24 in C order
    local function a234()
      local t, v = {}, 0
      for i = 1, 2 do
        t[i] = {}
        for j = 1, 3 do
          t[i][j] = {}
          for k = 1, 4 do v = v + 1; t[i][j][k] = v end
        end
      end
      return arr(t)
    end

    describe("layout", function()
      it("gives strides in elements and is_contiguous for new arrays", function()
        local a = a234()
        assert.are.same({ 12, 4, 1 }, a.strides)
        assert.is_true(a.is_contiguous)
        assert.are.same({}, cd.zeros({}, "float32", { device = dev }).strides)
        assert.is_true(cd.zeros({ 3, 0 }, "float32", { device = dev }).is_contiguous)
      end)

      it("transposes a 2-d array (a.T and a:transpose())", function()
        local a = m23()
        local t = a.T
        assert.are.same({ 3, 2 }, t.shape)
        assert.are.same({ 1, 3 }, t.strides)
        assert.is_false(t.is_contiguous)
        assert.are.same({ { 1, 4 }, { 2, 5 }, { 3, 6 } }, t:totable())
        assert.are.same({ { 1, 4 }, { 2, 5 }, { 3, 6 } }, a:transpose():totable())
        assert.are.same({ { 1, 4 }, { 2, 5 }, { 3, 6 } }, a:transpose(2, 1):totable())
        assert.are.same({ { 1, 2, 3 }, { 4, 5, 6 } }, t.T:totable())
        assert.is_true(t.T.is_contiguous)
      end)

      it("transposes a 3-d array along any permutation", function()
        local a = a234()
        local r = a.T   -- r[k][j][i] = a[i][j][k]
        assert.are.same({ 4, 3, 2 }, r.shape)
        assert.are.same({ 1, 4, 12 }, r.strides)
        assert.are.same({ 1, 13 }, r[1][1]:totable())
        assert.are.same({ { 4, 16 }, { 8, 20 }, { 12, 24 } }, r[4]:totable())
        local p = a:transpose({ 2, 3, 1 })   -- p[j][k][i] = a[i][j][k]
        assert.are.same({ 3, 4, 2 }, p.shape)
        assert.are.same({ 4, 1, 12 }, p.strides)
        assert.are.same({ { 5, 17 }, { 6, 18 }, { 7, 19 }, { 8, 20 } }, p[2]:totable())
        assert.are.same(p.strides, a:transpose(-2, -1, 1).strides)
      end)

      it("gives .T of a 1-d array as the same elements", function()
        local a = arr({ 1, 2, 3 })
        assert.are.same({ 1, 2, 3 }, a.T:totable())
        assert.is_true(a.T.is_contiguous)
        assert.are.same({ 1 }, a.T.strides)
      end)

      it("slices with a step, backwards, and along any axis", function()
        local a = arr({ 1, 2, 3, 4, 5, 6, 7 })
        assert.are.same({ 1, 3, 5, 7 }, a:slice(1, 7, 2):totable())
        assert.are.same({ 2, 5 }, a:slice(2, -1, 3):totable())
        assert.are.same({ 7, 6, 5, 4, 3, 2, 1 }, a:slice(nil, nil, -1):totable())
        assert.are.same({ 6, 4, 2 }, a:slice(6, 1, -2):totable())
        assert.are.same({ -2 }, a:slice(6, 1, -2).strides)
        assert.are.same({}, a:slice(3, 2, 1):totable())
        assert.are.same({}, a:slice(0, 1, -1):totable())
        local m = a234()
        assert.are.same({ { { 1, 3 }, { 5, 7 }, { 9, 11 } }, { { 13, 15 }, { 17, 19 }, { 21, 23 } } },
          m:slice(1, 4, 2, 3):totable())
        assert.are.same({ { { 9, 10, 11, 12 }, { 1, 2, 3, 4 } }, { { 21, 22, 23, 24 }, { 13, 14, 15, 16 } } },
          m:slice(3, 1, -2, 2):totable())
        assert.are.same({ { 2, 6, 10 }, { 14, 18, 22 } }, m:slice(2, 2, 1, -1):contiguous():reshape({ 2, 3 }):totable())
      end)

      it("takes a column as a view, and views of views", function()
        local m = m23()
        local col = m:slice(2, 2, 1, 2)
        assert.are.same({ 2, 1 }, col.shape)
        assert.are.same({ { 2 }, { 5 } }, col:totable())
        local v = m.T:slice(3, 1, -2)   -- rows 3 and 1 of the transpose
        assert.are.same({ { 3, 6 }, { 1, 4 } }, v:totable())
        assert.are.same({ { 3, 1 }, { 6, 4 } }, v.T:totable())
        assert.are.same({ 6, 4 }, v.T[2]:totable())
        assert.are.equal(4, v.T[2][2])
      end)

      it("shows writes through a view in the base", function()
        local m = m23()
        m.T[3][1] = 30
        m:slice(1, 3, 2, 2)[2][1] = 40
        assert.are.same({ { 1, 2, 30 }, { 40, 5, 6 } }, m:totable())
        m.T:slice(2, 2):fill(0)
        assert.are.same({ { 1, 0, 30 }, { 40, 0, 6 } }, m:totable())
        m:slice(nil, nil, -1, 2):add_(arr({ 100, 200, 300 }))
        assert.are.same({ { 301, 200, 130 }, { 340, 200, 106 } }, m:totable())
      end)
    end)

    describe("lifetime", function()
      -- doc/arrays.md: freeing the base ends the base, not the memory (PyTorch's and CuPy's views keep their
      -- storage too); the block is released, and uncharged, with the last array that uses it
      it("keeps a freed base's memory for its views until the last of them goes", function()
        collectgarbage()
        local before = cd.memory_stats(dev).allocated
        local a = cd.arange(1024, "int32", { device = dev })
        local v, t = a:slice(3, 4), a:reshape({ 32, 32 }).T
        a:free()
        helper.assert_error_contains(function() a:fill(0) end, "attempt to use a freed array")
        assert.are.equal("Array(freed)", tostring(a))
        assert.are.same({ 2, 3 }, v:totable())
        v:fill(7)
        assert.are.same({ 7, 7 }, { t[3][1], t[4][1] })
        assert.are.equal(before + 4096, cd.memory_stats(dev).allocated)
        v:free()
        assert.are.equal(34, t[3][2])
        assert.are.equal(before + 4096, cd.memory_stats(dev).allocated)
        t:free()
        collectgarbage() -- the reshape that t was taken from is a view too, unreachable but not yet collected
        assert.are.equal(before, cd.memory_stats(dev).allocated)
        local w = cd.arange(8, "int32", { device = dev }):slice(2, 3)
        collectgarbage()
        assert.are.same({ 1, 2 }, w:totable())
        w = nil
        collectgarbage()
        assert.are.equal(before, cd.memory_stats(dev).allocated)
      end)
    end)

    describe("copies", function()
      it("contiguous() copies a view in C order and returns a contiguous array itself", function()
        local m = m23()
        local c = m.T:contiguous()
        assert.is_true(c.is_contiguous)
        assert.are.same({ 2, 1 }, c.strides)
        assert.are.same({ { 1, 4 }, { 2, 5 }, { 3, 6 } }, c:totable())
        assert.are.equal(m, m:contiguous())
        c[1][1] = 9
        assert.are.equal(1, m[1][1])
      end)

      it("copy() always gives a new contiguous array", function()
        local m = m23()
        local c = m:copy()
        c[1][1] = 9
        assert.are.equal(1, m[1][1])
        assert.are.same({ { 1, 4 }, { 2, 5 }, { 3, 6 } }, m.T:copy():totable())
        assert.are.same({ 5, 3, 1 }, arr({ 1, 2, 3, 4, 5 }):slice(5, 1, -2):copy():totable())
        -- a non-Array self is named by its type's name, not "userdata" (the API fuzzer's seed 9)
        local m2 = m23()
        helper.assert_error_matches(function() m2.contiguous(cd.scope(dev)) end,
          "bad argument #1 to 'contiguous' (Array expected, got cudadev.Scope)")
        helper.assert_error_matches(function() m2.copy(io.stdout) end, "bad argument #1 to 'copy' (Array expected, got FILE*)")
      end)

      it("reads views: tostring, tobytes, astype, elements", function()
        local t = m23().T
        assert.are.equal("Array(int32[3,2] on " .. dev .. ": {{1, 4}, {2, 5}, {3, 6}})", tostring(t))
        assert.are.equal(string.pack("<i4i4i4i4i4i4", 1, 4, 2, 5, 3, 6), t:tobytes())
        assert.are.same({ { 1, 4 }, { 2, 5 }, { 3, 6 } }, t:astype("float64"):totable())
        assert.are.equal(5, t[2][2])
      end)

      it("copies into and out of views with copy_from", function()
        local m = m23()
        m.T:copy_from(arr({ 10, 20, 30, 40, 50, 60 }))
        assert.are.same({ { 10, 30, 50 }, { 20, 40, 60 } }, m:totable())
        m:slice(1, 3, 2, 2):copy_from({ 7, 8, 9, 10 })
        assert.are.same({ { 7, 30, 8 }, { 9, 40, 10 } }, m:totable())
        local flat = arr({ 0, 0, 0, 0, 0, 0 })
        flat:copy_from(m.T)
        assert.are.same({ 7, 9, 30, 40, 8, 10 }, flat:totable())
        local host = cd.zeros({ 3, 2 }, "int32", { device = "cpu" })
        host:copy_from(m.T)
        assert.are.same({ { 7, 9 }, { 30, 40 }, { 8, 10 } }, host:totable())
        assert.are.same({ { 7, 9 }, { 30, 40 }, { 8, 10 } }, m.T:to("cpu"):totable())
        helper.assert_error_matches(function() m.T:copy_from(cd.zeros(6, "float32", { device = dev })) end,
          'bad argument #1 to \'copy_from\' (dtype mismatch: float32 into int32 (convert the source first: src:astype("int32")))')
        helper.assert_error_matches(function() m.T:copy_from({ 1, 2 }) end,
          "bad argument #1 to 'copy_from' (size mismatch: the source has 2 elements, the array 6)")
      end)

      it("zeroes and fills views with checked values", function()
        local m = m23()
        m.T:slice(1, 1):zero()
        assert.are.same({ { 0, 2, 3 }, { 0, 5, 6 } }, m:totable())
        helper.assert_error_matches(function() m.T:fill(2 ^ 40) end,
          "bad argument #1 to 'fill' (value 1099511627776 out of range for int32)")
      end)
    end)

    describe("computing", function()
      it("takes strided operands and outputs in elementwise operations", function()
        local m = m23()
        assert.are.same({ { 2, 8 }, { 4, 10 }, { 6, 12 } }, (m.T + m.T):totable())
        assert.are.same({ { 11, 14 }, { 22, 25 }, { 33, 36 } }, (m.T + arr({ { 10 }, { 20 }, { 30 } })):totable())
        assert.are.same({ { 4, 4, 4 }, { 10, 10, 10 } }, (m + m:slice(nil, nil, -1, 2)):totable())
        assert.are.same({ { 2, 4, 6 }, { 8, 10, 12 } }, (m + m:slice(nil, nil, -1, 2):slice(nil, nil, -1, 2)):totable())
        local out = cd.zeros({ 3, 2 }, "int32", { device = dev })
        cd.add(m.T, 1, { out = out.T.T })
        assert.are.same({ { 2, 5 }, { 3, 6 }, { 4, 7 } }, out:totable())
        local o2 = cd.zeros({ 2, 3 }, "int32", { device = dev })
        cd.multiply(m.T, 2, { out = o2.T })
        assert.are.same({ { 2, 4, 6 }, { 8, 10, 12 } }, o2:totable())
        local sq = cd.elementwise("T x", "T y", "y = x * x")
        assert.are.same({ { 1, 16 }, { 4, 25 }, { 9, 36 } }, sq(m.T):totable())
      end)

      it("reduces views", function()
        local a = a234()
        assert.are.equal(300, a.T:sum())
        local s = a:slice(1, 1, 1, 3)   -- a[i][j][1]: {{1, 5, 9}, {13, 17, 21}}
        assert.are.equal(66, s:sum())
        assert.are.same({ { 15 }, { 51 } }, s:sum(2):totable())
        assert.are.same({ { 14, 22, 30 } }, s.T:sum(3):totable())
        local t = arr({ { 1, 9, 2 }, { 8, 3, 4 } }).T   -- {1, 8, 9, 3, 2, 4} in its C order
        assert.are.equal(3, t:argmax())
        assert.are.equal(1, t:argmin())
        assert.are.same({ 8, 9, 4 }, t:max(2):totable())
      end)
    end)

    describe("refusals", function()
      it("refuses a view as a kernel's pointer argument", function()
        local k = cd.compile('extern "C" __global__ void touch(int *x) { }', { device = dev }):get("touch")
        helper.assert_error_matches(function() k({ dim = 1 }, m23().T) end,
          "bad argument #1 to 'touch' ('x': expected int *, got a non-contiguous Array; pass a:contiguous())")
        k({ dim = 1 }, m23().T:contiguous())
      end)

      it("refuses cd.copy and view to another size for views; reshape copies them, as NumPy", function()
        local t, flat = m23().T, arr({ 1, 2, 3, 4, 5, 6 })
        helper.assert_error_matches(function() cd.copy(t, flat) end,
          "bad argument #1 to 'copy' (the destination is not contiguous: write a view with dst:copy_from(src))")
        helper.assert_error_matches(function() cd.copy(flat, t) end,
          "bad argument #2 to 'copy' (the source " .. NC .. ")")
        local r = t:reshape(6)   -- a copy in C order of the view: {{1, 4}, {2, 5}, {3, 6}}
        assert.are.same({ 1, 4, 2, 5, 3, 6 }, r:totable())
        assert.is_true(r.is_contiguous)
        r[1] = 9
        assert.are.same(1, t[1][1])   -- not a view of t
        assert.are.same({ { 1, 4, 2 }, { 5, 3, 6 } }, t:reshape({ 2, -1 }):totable())
        helper.assert_error_matches(function() t:view("uint8") end, "bad argument #1 to 'view' (the array " .. NC .. ")")
        assert.are.same({ { 1, 4 }, { 2, 5 }, { 3, 6 } }, t:view("uint32"):totable())
      end)

      it("refuses raw generator arguments and reduction outputs that are views", function()
        local t = m23().T
        local k = cd.elementwise("raw T x", "T y", "y = x[i]")
        helper.assert_error_matches(function() k(t, cd.zeros({ 3, 2 }, "int32", { device = dev })) end,
          "cdv_elementwise: raw argument 'x' " .. NC)
        local out = cd.zeros({ 3, 2 }, "int64", { device = dev }):slice(1, 1, 1, 2)
        assert.is_false(out.is_contiguous)
        helper.assert_error_matches(function() m23():sum({ axis = 1, out = out }) end,
          "sum: output is not contiguous: give a contiguous one (a:contiguous() makes a copy)")
      end)

      it("checks transpose and slice arguments", function()
        local a = a234()
        helper.assert_error_matches(function() a:transpose(1, 2) end,
          "bad argument #1 to 'transpose' (2 axes given for an array of 3 dimensions)")
        helper.assert_error_matches(function() a:transpose(1, 4, 2) end,
          "bad argument #2 to 'transpose' (axis 4 out of range 1..3)")
        helper.assert_error_matches(function() a:transpose({ 1, -4, 2 }) end,
          "bad argument #1 to 'transpose' (axis -4 out of range 1..3)")
        helper.assert_error_matches(function() a:transpose(1, 1, 2) end, "bad argument #2 to 'transpose' (axis 1 repeated)")
        helper.assert_error_matches(function() a:slice(1, 2, 0) end, "bad argument #3 to 'slice' (step must not be zero)")
        helper.assert_error_matches(function() a:slice(1, 2, 1, 4) end, "bad argument #4 to 'slice' (axis 4 out of range 1..3)")
        helper.assert_error_matches(function() a:slice(5, 1, -1, 3) end, "bad argument #1 to 'slice' (index 5 out of range 0..4)")
        helper.assert_error_matches(function() a:slice(2, 4, -1, 3) end, "bad argument #2 to 'slice' (index 4 out of range 1..3)")
      end)
    end)
  end)
end)

describe("strided views across devices", function()
  helper.gpu_it("moves a cuda:0 view to the host and a host view to cuda:0 in C order", function()
    local m = cd.array({ { 1, 2, 3 }, { 4, 5, 6 } }, "float32", { device = "cuda:0" })
    assert.are.same({ { 1, 4 }, { 2, 5 }, { 3, 6 } }, m.T:to("cpu"):totable())
    local h = cd.array({ { 1, 2, 3 }, { 4, 5, 6 } }, "float32", { device = "cpu" })
    local g = h:slice(nil, nil, -1, 2):to("cuda:0")
    assert.is_true(g.is_contiguous)
    assert.are.same({ { 3, 2, 1 }, { 6, 5, 4 } }, g:totable())
  end)

  helper.gpu_it("copies between a cuda:0 view and host arrays with copy_from", function()
    local g = cd.zeros({ 2, 3 }, "float64", { device = "cuda:0" })
    g.T:copy_from(cd.array({ 1, 2, 3, 4, 5, 6 }, "float64", { device = "cpu" }))
    assert.are.same({ { 1, 3, 5 }, { 2, 4, 6 } }, g:totable())
    local h2 = cd.zeros(2, "float64", { device = "cpu" })
    h2:copy_from(g:slice(1, 3, 2, 2)[2])
    assert.are.same({ 2, 6 }, h2:totable())
    local v = cd.zeros({ 3, 2 }, "float64", { device = "cpu" })
    v:copy_from(g.T)
    assert.are.same({ { 1, 2 }, { 3, 4 }, { 5, 6 } }, v:totable())
  end)

  helper.gpu_it("reads and writes single elements of a cuda:0 view", function()
    local g = cd.array({ 1, 2, 3, 4, 5 }, "int32", { device = "cuda:0" })
    local r = g:slice(nil, nil, -2)
    assert.are.equal(3, r[2])
    r[3] = 10
    assert.are.same({ 10, 2, 3, 4, 5 }, g:totable())
    assert.are.equal(string.pack("<i4i4i4", 5, 3, 10), r:tobytes())
  end)
end)

-- NOTE [tiled transpose] (views.lua): a transposed matrix, or a batch of them, copied into a contiguous array runs
-- the tiled kernel on CUDA devices; the cpu device keeps its loop unless cd._transpose_tiles(true) gives it the
-- kernel too, which checks the kernel here without a GPU. Every copy is compared with the elements worked out in
-- Lua from the C-ordered base, and cd._transpose_tiles() (the kernel's launches) tells which path ran.
describe("transposed copies", function()
  -- under valgrind (its preload library, or `make valgrind`'s in-process launches) one dtype of each element size:
  -- every size the kernel has still runs, in 25 s where the ten took 76 (this VM, both cpu passes)
  local slow = (os.getenv("LD_PRELOAD") or ""):find("vgpreload", 1, true) or os.getenv("CUDADEV_CPU_FORK") == "0"
  local DTYPES = slow and { "bool", "float16", "int32", "float64", "complex128" }
    or { "bool", "int8", "int16", "float16", "int32", "float32", "int64", "float64", "complex64", "complex128" }
  -- {batch..., rows, cols} of the transposed view: edges not multiples of 32, one tile, 1 x n, n x 1, empty, batches
  local SHAPES = { { 33, 65 }, { 32, 32 }, { 70, 3 }, { 1, 40 }, { 40, 1 }, { 0, 5 }, { 2, 3, 33, 31 }, { 3, 2, 64 } }

  -- a C-ordered {batch..., cols, rows} array of distinct elements (a complex one's two parts differ)
  local function base(shape, dt, dev)
    local s = { table.unpack(shape) }
    s[#s], s[#s - 1] = s[#s - 1], s[#s]
    local n = 1
    for _, d in ipairs(s) do n = n * d end
    if dt:match("^complex") then
      local part = dt == "complex64" and "float32" or "float64"
      local w = { table.unpack(s) }
      w[#w] = w[#w] * 2
      return cd.arange(0, 2 * n, 1, part, { device = dev }):reshape(w):view(dt)
    end
    return (cd.arange(0, n, 1, "int32", { device = dev }) % 97):astype(dt):reshape(s)
  end

  -- v's elements in C order (nested by its shape), read from the flat elements of its C-ordered base at offset
  -- off through v's strides, with the elements outside triangle tri ("tril" or "triu") of diagonal k as zero
  local function expected(v, b, off, tri, k)
    local flat, shape, st = b:reshape(b.size):totable(), v.shape, v.strides
    local zero = cd.zeros(1, v.dtype, { device = "cpu" }):totable()[1]
    local nd = #shape
    local function level(d, at, idx)
      if d > nd then
        local r, c = idx[nd - 1], idx[nd]
        local drop = (tri == "tril" and c - r > k) or (tri == "triu" and c - r < k)
        if drop then return zero end   -- (zero may be false)
        return flat[at + 1]
      end
      local t = {}
      for i = 0, shape[d] - 1 do
        idx[d] = i
        t[i + 1] = level(d + 1, at + i * st[d], idx)
      end
      return t
    end
    return level(1, off, {})
  end

  -- the tiled kernel's launches during fn()
  local function launches(fn)
    local before = cd._transpose_tiles()
    fn()
    return cd._transpose_tiles() - before
  end

  for _, mode in ipairs({ { "cpu", false }, { "cpu", true }, { "cuda:0", true } }) do
    local dev, tiled = mode[1], mode[2]
    local test = dev == "cpu" and it or helper.gpu_it
    describe(("on %s%s"):format(dev, dev == "cpu" and (tiled and ", by the tiled kernel" or ", by its loop") or ""),
      function()
      setup(function() cd._transpose_tiles(tiled and dev == "cpu") end)
      teardown(function() cd._transpose_tiles(false) end)

      -- checks each copy of the view v of b (at offset off) and how many tiled launches it took (t: transposed)
      local function check(v, b, off, t)
        local want = expected(v, b, off)
        local one = t and tiled and v.size > 0 and 1 or 0
        local c
        assert.are.equal(one, launches(function() c = v:copy() end))
        assert.is_true(c.is_contiguous)
        assert.are.same(want, c:totable())
        assert.are.equal(one, launches(function() c = v:contiguous() end))
        assert.are.same(want, c:totable())
        -- astype to its own dtype: the cpu device's host loop reads the view itself
        assert.are.equal(dev == "cpu" and 0 or one, launches(function() c = v:astype(v.dtype) end))
        assert.are.same(want, c:totable())
        local out = cd.zeros(v.shape, v.dtype, { device = dev })
        assert.are.equal(one, launches(function() out:copy_from(v) end))
        assert.are.same(want, out:totable())
        local flat = cd.zeros(v.size, v.dtype, { device = dev })
        assert.are.equal(one, launches(function() flat:copy_from(v) end))
        assert.are.same(want, flat:reshape(v.shape):totable())
        for _, tri in ipairs({ "tril", "triu" }) do
          for _, k in ipairs({ -2, 0, 3 }) do
            assert.are.equal(one, launches(function() c = cd[tri](v, k) end))
            assert.are.same(expected(v, b, off, tri, k), c:totable())
          end
          local o = cd.ones(v.shape, v.dtype, { device = dev })
          assert.are.equal(one, launches(function() cd[tri](v, 1, { out = o }) end))
          assert.are.same(expected(v, b, off, tri, 1), o:totable())
        end
      end

      test("copies transposed matrices of every element size, edges, 1 x n, n x 1, empty, and batches", function()
        for _, dt in ipairs(DTYPES) do
          for _, shape in ipairs(SHAPES) do
            local b = base(shape, dt, dev)
            local v = cd.swapaxes(b, -1, -2)
            assert.are.same(shape, v.shape)
            -- 1 x n and n x 1 are no transposes (their view is contiguous), as is an empty one
            local nd = #shape
            check(v, b, 0, shape[nd - 1] > 1 and shape[nd] > 1 and v.size > 0)
          end
        end
      end)

      test("copies transposed slices (columns ld apart) and broadcast batches", function()
        for _, dt in ipairs({ "int8", "float64", "complex128" }) do
          local b = base({ 40, 50 }, dt, dev)   -- {50, 40}
          -- rows 3..47 of b, columns 2..36: a {35, 45} transposed view with ld 40, at offset 2 * 40 + 1
          check(b:slice(3, 47, 1, 1):slice(2, 36, 1, 2).T, b, 2 * 40 + 1, true)
          local w = cd.broadcast_to(b.T, { 3, 40, 50 })   -- batch stride 0
          check(w, b, 0, true)
        end
      end)

      -- the CUDA side of the kernel where there is no GPU: NVRTC for sm_90, as spec/31 does the sort's
      if dev == "cpu" and tiled then
        helper.nvrtc_it("compiles with NVRTC for elements of 1, 2, 4, 8 and 16 bytes", function()
          local names, failures = helper.nvrtc_compiles("^cdv_transpose", function()
            for _, dt in ipairs({ "int8", "float16", "float32", "float64", "complex128" }) do
              cd.swapaxes(base({ 3, 5 }, dt, dev), -1, -2):copy()
            end
          end)
          assert.are.same({}, failures)
          assert.are.same({ "cdv_transpose1.cu", "cdv_transpose2.cu", "cdv_transpose4.cu", "cdv_transpose8.cu",
            "cdv_transpose16.cu" }, names)
        end)
      end

      if dev == "cpu" and not tiled then
        it("_transpose_tiles takes a boolean", function()
          helper.assert_error_matches(function() cd._transpose_tiles(1) end,
            "bad argument #1 to '_transpose_tiles' (boolean expected, got number)")
        end)
      end

      -- one pass into a contiguous array, but a view of that array itself is read whole first, as it was
      test("copies a view of a matrix into the matrix itself: the transpose, not a race", function()
        for _, n in ipairs({ 3, 40 }) do
          local m = base({ n, n }, "float64", dev)
          local want = expected(m.T, m:copy(), 0)
          assert.are.equal(tiled and 1 or 0, launches(function() m:copy_from(m.T) end))
          assert.are.same(want, m:totable())
          local w = base({ 2, n, n }, "int32", dev)
          want = expected(w[2].T, w:copy(), n * n)
          -- another part of the same memory: one pass
          assert.are.equal(tiled and 1 or 0, launches(function() w[1]:copy_from(w[2].T) end))
          assert.are.same(want, w[1]:totable())
        end
      end)

      test("keeps the elementwise copy for other views", function()
        local b = base({ 4, 5, 6 }, "float32", dev)   -- {4, 6, 5}
        -- all axes reversed (the last two strides 5 and 30), every other row of a transposed view, its rows reversed
        check(b.T, b, 0, false)
        check(cd.swapaxes(b, -1, -2):slice(1, 5, 2, 2), b, 0, false)
        check(cd.swapaxes(b, -1, -2):slice(5, 1, -1, 2), b, 4, false)
      end)
    end)
  end
end)
