-- Computing with arrays (API.md "Computing with arrays"): the kernel generators cd.elementwise and cd.reduction,
-- operators with NumPy's promotion and broadcasting, comparisons, cd.where, math functions, astype, reductions
-- and ranges; on every device, each result checked against a Lua reference.
local helper = require "spec.helper"
local cd = require "cudadev"

local values = helper.values

local function close(x, y, tol)
  if x ~= x then return y ~= y end
  if x == math.huge or x == -math.huge then return x == y end
  return math.abs(x - y) <= (tol or 1e-6) * math.max(1, math.abs(y))
end

local function assert_values(a, expected, tol)
  local got = values(a)
  assert.are.equal(#expected, #got, "element count")
  for i = 1, #expected do
    assert(close(got[i], expected[i], tol), ("element %d: got %s, expected %s"):format(i, tostring(got[i]), tostring(expected[i])))
  end
end

-- a reproducible sequence of numbers in [lo, hi)
local function seq(n, lo, hi, int)
  local t, x = {}, 12345
  for i = 1, n do
    x = (x * 1103515245 + 12345) % 2147483648
    local v = lo + (hi - lo) * x / 2147483648
    t[i] = int and math.floor(v) or v
  end
  return t
end

helper.each_device(function(dev)
  describe("computing with arrays on " .. dev, function()
    local function arr(t, dt) return cd.array(t, dt, { device = dev }) end

    describe("cd.elementwise", function()
      it("runs its body per element, with scalars, creating the output", function()
        local axpy = cd.elementwise("T a, T x, T y", "T z", "z = a * x + y")
        local x, y = arr({ 1, 2, 3 }, "float32"), arr({ 10, 20, 30 }, "float32")
        local z = axpy(2, x, y)
        assert.are.equal("float32", z.dtype)
        assert.are.equal(dev, z.device.alias)
        assert_values(z, { 12, 24, 36 })
        assert.matches("^ElementwiseKernel%(cdv_elementwise: T a, T x, T y %-> T z%)$", tostring(axpy))
      end)

      it("writes a given output, broadcasts trailing dimensions and exposes i and raw arrays", function()
        local k = cd.elementwise("T x, raw T r", "T z", "z = x + r[i % 2] + (T)i")
        local m = arr({ { 1, 2, 3 }, { 4, 5, 6 } }, "int32")
        local out = cd.zeros({ 2, 3 }, "int32", { device = dev })
        assert.are.equal(out, k(m, arr({ 100, 200 }, "int32"), out))
        assert_values(out, { 101, 203, 105, 207, 109, 211 })
        local add = cd.elementwise("T x, T y", "T z", "z = x + y")
        assert_values(add(m, arr({ 10, 20, 30 }, "int32")), { 11, 22, 33, 14, 25, 36 })
        assert_values(add(arr({ { 1 }, { 2 } }, "int32"), arr({ 10, 20, 30 }, "int32")), { 11, 21, 31, 12, 22, 32 })
      end)

      it("is correct for sizes around the block and for empty arrays", function()
        local sq = cd.elementwise("float64 x", "float64 y", "y = x * x", { name = "square" })
        for _, n in ipairs({ 0, 1, 255, 256, 257, 10007 }) do
          local x = cd.arange(n, "float64", { device = dev })
          local y = sq(x)
          assert.are.equal(n, y.size)
          local v = values(y)
          for i = 1, n do assert.are.equal((i - 1) * (i - 1), v[i]) end
        end
      end)

      it("checks its parameters, arguments, dtypes and shapes", function()
        helper.assert_error_matches(function() cd.elementwise("T", "T z", "z = 1") end,
          "bad argument #1 to 'elementwise' (parameter 'T' needs a type and a name)")
        helper.assert_error_matches(function() cd.elementwise("T x, T x", "T z", "z = x") end,
          "bad argument #1 to 'elementwise' (parameter 'x' appears twice)")
        helper.assert_error_matches(function() cd.elementwise("T _x", "T z", "z = 1") end,
          "bad argument #1 to 'elementwise' (bad parameter name '_x' (a C identifier not starting with '_'))")
        helper.assert_error_matches(function() cd.elementwise("float* x", "T z", "z = 1") end,
          "bad argument #1 to 'elementwise' (unknown type 'float*' of parameter 'x')")
        helper.assert_error_matches(function() cd.elementwise("T x", "T z", 5) end,
          "bad argument #3 to 'elementwise' (string expected, got number)")
        helper.assert_error_matches(function() cd.elementwise("T x", "T z", "z = x", { blok = 1 }) end,
          "bad option 'blok' to 'elementwise' (unknown option)")
        local add = cd.elementwise("T x, T y", "T z", "z = x + y", { name = "add2" })
        local f, i = arr({ 1, 2 }, "float32"), arr({ 1, 2 }, "int32")
        helper.assert_error_matches(function() add(f, i) end,
          "add2: type T is float32 from an earlier argument but int32 from 'y'")
        helper.assert_error_matches(function() add(f) end,
          "add2: expected 2 input arguments (or 3 with the outputs), got 1")
        helper.assert_error_matches(function() add(f, "x") end,
          "bad argument #2 to 'add2' ('y': Array or number expected, got string)")
        helper.assert_error_matches(function() add(f, f, cd.empty(2, "float64", { device = dev })) end,
          "add2: type T is float32 from an earlier argument but float64 from 'z'")
        local conv = cd.elementwise("T x", "float64 z", "z = x", { name = "conv" })
        helper.assert_error_matches(function() conv(f, cd.empty(2, "float32", { device = dev })) end,
          "conv: output 'z' is float32 but the result is float64 (give an output of that dtype, or convert with a:astype(\"float32\"))")
        helper.assert_error_matches(function() add(f, f, cd.empty(3, "float32", { device = dev })) end,
          "add2: output 'z' has shape {3} but the result has shape {2}")
        helper.assert_error_matches(function() add(f, arr({ 1, 2, 3 }, "float32")) end,
          "add2: shapes {2} and {3} cannot be broadcast together (dimension 1 is 2 and 3)")
        local typed = cd.elementwise("float32 x", "float32 z", "z = x", { name = "typed" })
        helper.assert_error_matches(function() typed(i) end,
          "bad argument #1 to 'typed' ('x' is int32 but the kernel takes float32 (convert with a:astype(\"float32\")))")
      end)
    end)

    describe("cd.reduction", function()
      it("reduces everything and along an axis, for sizes around the block and 0", function()
        local sum = cd.reduction("T x", "T y", "x", "a + b", "y = a", 0, { name = "mysum" })
        for _, n in ipairs({ 0, 1, 255, 256, 257, 1025, 100003 }) do
          local x = cd.arange(1, n + 1, "float64", { device = dev })
          local r = sum(x)
          assert.are.equal(0, r.ndim)
          assert.are.equal(n * (n + 1) / 2, r[1])
        end
        local m = arr({ { 1, 2, 3 }, { 4, 5, 6 } }, "int64")
        assert_values(sum(m, { axis = 1 }), { 5, 7, 9 })
        assert_values(sum(m, { axis = -1 }), { 6, 15 })
        local k = sum(m, { axis = 2, keepdims = true })
        assert.are.same({ 2, 1 }, k.shape)
        local ssq = cd.reduction("T x", "float64 y", "x * x", "a + b", "y = sqrt(a)", "0", { reduce_type = "float64" })
        assert.are.equal(5, ssq(arr({ 3, 4 }, "float32"))[1])
      end)

      it("checks its arguments", function()
        helper.assert_error_matches(function() cd.reduction("T x", "T y, T w", "x", "a + b", "y = a", 0) end,
          "bad argument #2 to 'reduction' (a reduction has one output parameter)")
        helper.assert_error_matches(function() cd.reduction("T x", "T y", "x", "a + b", "y = a", {}) end,
          "bad argument #6 to 'reduction' (string or number expected, got table)")
        local sum = cd.reduction("T x", "T y", "x", "a + b", "y = a", 0)
        helper.assert_error_matches(function() sum(arr({ 1 }, "float32"), { axis = 2 }) end,
          "bad option 'axis' to 'cdv_reduction' (axis 2 is out of range for an array of 1 dimension: 1..1, or -1..-1)")
        helper.assert_error_matches(function() sum(arr({ 1 }, "float32"), { axes = 1 }) end,
          "bad option 'axes' to 'cdv_reduction' (unknown option)")
      end)
    end)

    describe("operators", function()
      it("follow NumPy's promotion", function()
        local cases = {
          { "int8", "uint8", "int16" }, { "int32", "uint32", "int64" }, { "int64", "uint64", "float64" },
          { "int16", "float16", "float32" }, { "int8", "float16", "float16" }, { "int32", "float32", "float64" },
          { "bool", "int8", "int8" }, { "float32", "float64", "float64" }, { "uint8", "uint16", "uint16" },
        }
        for _, c in ipairs(cases) do
          assert.are.equal(c[3], (arr({ 1 }, c[1]) + arr({ 1 }, c[2])).dtype, c[1] .. " + " .. c[2])
        end
        -- Lua numbers are weak (NEP 50): an integer keeps an integer array's dtype, a float makes floats
        assert.are.equal("int8", (arr({ 1 }, "int8") + 1).dtype)
        assert.are.equal("float64", (arr({ 1 }, "int8") + 1.5).dtype)
        assert.are.equal("float32", (2.5 * arr({ 1 }, "float32")).dtype)
        assert.are.equal("int64", (arr({ true }, "bool") + 1).dtype)
        assert.are.equal("float64", (arr({ 1 }, "int32") / 2).dtype)
      end)

      it("compute like Lua, with C's wrap-around for integers", function()
        local xs, ys = seq(200, -50, 50, true), seq(200, -7, 7, true)
        local x, y = arr(xs, "int64"), arr(ys, "int64")
        local add, sub, mul, fdiv, mod = values(x + y), values(x - y), values(x * y), values(x // y), values(x % y)
        for i = 1, #xs do
          assert.are.equal(xs[i] + ys[i], add[i])
          assert.are.equal(xs[i] - ys[i], sub[i])
          assert.are.equal(xs[i] * ys[i], mul[i])
          assert.are.equal(ys[i] == 0 and 0 or xs[i] // ys[i], fdiv[i])
          assert.are.equal(ys[i] == 0 and 0 or xs[i] % ys[i], mod[i])
        end
        assert_values(arr({ 100, -100, 127 }, "int8") + arr({ 100, -100, 1 }, "int8"), { -56, 56, -128 })
        assert_values(arr({ 2147483647 }, "int32") + 1, { -2147483648 })
        assert_values(arr({ 0 }, "uint8") - 1, { 255 })
        assert_values(-arr({ -128 }, "int8"), { -128 })
        assert_values(arr({ math.mininteger }, "int64") // -1, { math.mininteger })
        assert_values(arr({ 3, -3, 2 }, "int32") ^ arr({ 3, 3, 10 }, "int32"), { 27, -27, 1024 })
      end)

      it("compute floats like Lua", function()
        local xs, ys = seq(300, -10, 10), seq(300, 0.5, 4)
        local x, y = arr(xs, "float64"), arr(ys, "float64")
        local r = { values(x + y), values(x - y), values(x * y), values(x / y), values(x // y), values(x % y), values(x ^ 2), values(-x) }
        for i = 1, #xs do
          local a, b = xs[i], ys[i]
          for j, e in ipairs({ a + b, a - b, a * b, a / b, a // b, a % b, a ^ 2, -a }) do
            assert(close(r[j][i], e, 1e-12), ("op %d element %d: %s vs %s"):format(j, i, r[j][i], e))
          end
        end
        assert_values(arr({ 1, -1, 0 }, "float32") / 0, { math.huge, -math.huge, 0 / 0 })
        assert_values(arr({ 1, 2, 3 }, "float16") * 2, { 2, 4, 6 })
      end)

      it("squares a float array to the Lua number 2 as x * x, NumPy's a ** 2 (NOTE [square power])", function()
        -- products that fall on a tie: pow rounds them up (glibc's powf and pow here), the product to even
        local f32 = arr({ 1 + 2 ^ -12, 1 + 3 * 2 ^ -12, -(1 + 2 ^ -12), 0 / 0, -math.huge, -0.0 }, "float32")
        local f64 = arr({ tonumber("0x1.f0a63b79f28c7p+0"), tonumber("0x1.b53cbc099409p+0") }, "float64")
        for _, a in ipairs({ f32, f64, f32:astype("float16"), f32:slice(1, 6, 2) }) do
          local want = a * a
          for _, got in ipairs({ a ^ 2, a ^ 2.0, cd.power(a, 2), cd.power(a, 2.0, { out = cd.empty_like(a) }) }) do
            assert.are.equal(a.dtype, got.dtype)
            assert.are.equal(want:tobytes(), got:tobytes())
          end
        end
        assert.are.equal(tonumber("0x1.002p+0"), (arr({ 1 + 2 ^ -12 }, "float32") ^ 2)[1])
        -- an integer array to 2.0 is a float64 square; to 2 an integer power, as before
        assert.are.equal((arr({ 4097 }, "int32"):astype("float64") ^ 2)[1], (arr({ 4097 }, "int32") ^ 2.0)[1])
        assert.are.same({ 9, 16 }, (arr({ 3, 4 }, "int16") ^ 2):totable())
        assert.are.equal("int16", (arr({ 3, 4 }, "int16") ^ 2).dtype)
        -- other exponents stay pow
        assert.are.same(values(arr({ 2, 3 }, "float32") ^ 3), { 8, 27 })
      end)

      it("has bitwise forms for integers and bools", function()
        local a, b = arr({ 12, 10, -1 }, "int32"), arr({ 10, 3, 1 }, "int32")
        assert_values(a & b, { 8, 2, 1 })
        assert_values(a | b, { 14, 11, -1 })
        assert_values(a ~ b, { 6, 9, -2 })
        assert_values(~a, { -13, -11, 0 })
        assert_values(a << 2, { 48, 40, -4 })
        assert_values(a >> 1, { 6, 5, -1 })
        assert.are.same({ true, false }, (arr({ true, true }, "bool") & arr({ true, false }, "bool")):totable())
        helper.assert_error_matches(function() return arr({ 1 }, "float32") & 1 end,
          "operator &: bitwise operations take integer or bool arrays, not float32")
      end)

      it("refuse what NumPy refuses, by name", function()
        helper.assert_error_matches(function() return arr({ 1 }, "int8") + 300 end,
          "operator +: Lua integer 300 is out of bounds for int8")
        helper.assert_error_matches(function() return arr({ true }, "bool") - arr({ true }, "bool") end,
          "operator -: boolean subtract is not supported; use bxor (~) or a:astype(\"int8\") first")
        helper.assert_error_matches(function() return arr({ 1, 2 }, "float32") + arr({ 1, 2, 3 }, "float32") end,
          "operator +: shapes {2} and {3} cannot be broadcast together (dimension 1 is 2 and 3)")
        helper.assert_error_matches(function() return arr({ 1 }, "float32") + "1" end,
          "bad argument #2 to 'operator +' (Array or number expected, got string)")
        helper.assert_error_matches(function() local s <close> = cd.scope("cpu"); return cd.add(s, 1) end,
          "bad argument #1 to 'add' (Array or number expected, got cudadev.Scope)")
        helper.assert_error_matches(function() return -arr({ true }, "bool") end,
          "negative: the unary minus is not supported for bool arrays; use cd.logical_not")
      end)

      it("have in-place forms and out= options that allocate nothing", function()
        local a = arr({ 1, 2, 3 }, "int32")
        assert.are.equal(a, a:add_(10))
        assert_values(a, { 11, 12, 13 })
        a:mul_(arr({ 2, 2, 2 }, "int32")):sub_(1)
        assert_values(a, { 21, 23, 25 })
        local f = arr({ 1, 2 }, "float32")
        f:add_(0.5)
        assert_values(f, { 1.5, 2.5 })
        helper.assert_error_matches(function() a:add_(0.5) end,
          "add_: the result is float64, which cannot be stored in an int32 array (use an out of the result's dtype, or a:astype first)")
        local out = cd.empty(3, "float64", { device = dev })
        assert.are.equal(out, cd.add(arr({ 1, 2, 3 }, "int32"), 1, { out = out }))
        assert_values(out, { 2, 3, 4 })
        helper.assert_error_matches(function() cd.add(a, 1, { into = out }) end,
          "bad option 'into' to 'add' (unknown option)")
      end)
    end)

    describe("comparisons, where, math and astype", function()
      it("compare into bool arrays, NaN unequal to everything", function()
        local a, b = arr({ 1, 2, 0 / 0 }, "float32"), arr({ 2, 2, 0 / 0 }, "float32")
        assert.are.same({ false, true, false }, a:eq(b):totable())
        assert.are.same({ true, false, true }, a:ne(b):totable())
        assert.are.same({ true, false, false }, a:lt(b):totable())
        assert.are.same({ true, true, false }, a:le(2):totable())
        assert.are.same({ false, false, false }, a:gt(b):totable())
        assert.are.same({ false, true, false }, a:ge(2):totable())
        assert.are.equal("bool", a:lt(b).dtype)
      end)

      it("selects with where, broadcasting", function()
        local c = arr({ true, false, true }, "bool")
        assert_values(cd.where(c, arr({ 1, 2, 3 }, "int32"), -1), { 1, -1, 3 })
        assert.are.equal("float64", cd.where(c, arr({ 1, 2, 3 }, "int32"), 0.5).dtype)
        local m = cd.where(arr({ { true }, { false } }, "bool"), arr({ 1, 2 }, "float32"), arr({ 5, 6 }, "float32"))
        assert_values(m, { 1, 2, 5, 6 })
      end)

      it("computes math functions like Lua's math library", function()
        local xs = seq(100, 0.1, 3)
        local x = arr(xs, "float64")
        local fs = { exp = math.exp, log = math.log, sqrt = math.sqrt, sin = math.sin, cos = math.cos, tan = math.tan,
                     floor = math.floor, ceil = math.ceil, abs = math.abs, atan = math.atan,
                     tanh = function(v) return (math.exp(v) - math.exp(-v)) / (math.exp(v) + math.exp(-v)) end,
                     log10 = function(v) return math.log(v, 10) end, log2 = function(v) return math.log(v, 2) end }
        for name, f in pairs(fs) do
          local got = values(cd[name](x))
          for i = 1, #xs do assert(close(got[i], f(xs[i]), 1e-12), name .. " of " .. xs[i]) end
        end
        assert.are.equal("float32", cd.sqrt(arr({ 4 }, "int16")).dtype)
        assert.are.equal("float64", cd.sqrt(arr({ 4 }, "int32")).dtype)
        assert_values(cd.abs(arr({ -3, 3, -128 }, "int8")), { 3, 3, -128 })
        assert.are.same({ false, true, false }, cd.isnan(arr({ 1, 0 / 0, math.huge }, "float64")):totable())
        assert_values(cd.maximum(arr({ 1, 5, 0 / 0 }, "float64"), arr({ 3, 2, 1 }, "float64")), { 3, 5, 0 / 0 })
      end)

      it("converts dtypes with astype", function()
        local a = arr({ -1.75, 0, 2.5, 300 }, "float32")
        assert_values(a:astype("int32"), { -1, 0, 2, 300 })
        assert.are.same({ true, false, true, true }, a:astype("bool"):totable())
        assert_values(a:astype("float16"), { -1.75, 0, 2.5, 300 })
        assert_values(arr({ 1, 2 }, "int64"):astype("f64"), { 1, 2 })
        helper.assert_error_matches(function() a:astype("float128") end,
          "bad argument #1 to 'astype' (unknown dtype 'float128' (expected float32, int32, ...))")
      end)
    end)

    describe("array reductions", function()
      it("reduce everything to a Lua value, checked against Lua", function()
        local xs = seq(5000, -100, 100, true)
        local a = arr(xs, "int32")
        local s, p, mx, mn, amx, amn = 0, 1, -math.huge, math.huge, nil, nil
        for i, v in ipairs(xs) do
          s = s + v
          if v > mx then mx, amx = v, i end
          if v < mn then mn, amn = v, i end
        end
        assert.are.equal(s, a:sum())
        assert.are.equal("int64", a:sum({ axis = 1 }).dtype)
        assert.are.equal(mx, a:max())
        assert.are.equal(mn, a:min())
        assert.are.equal(amx, a:argmax())
        assert.are.equal(amn, a:argmin())
        assert(close(a:mean(), s / #xs, 1e-12))
        assert.are.equal(24, arr({ 1, 2, 3, 4 }, "int8"):prod())
        assert.are.equal(false, arr({ 1, 0, 2 }, "int32"):all())
        assert.are.equal(true, arr({ 0, 0, 2 }, "int32"):any())
        assert.are.equal(2, arr({ true, false, true }, "bool"):sum())
        assert.are.equal(0.0, arr({}, "float32"):sum())
        assert.are.equal(true, arr({}, "float32"):all())
      end)

      it("reduce along an axis", function()
        local m = arr({ { 1, 7, 3 }, { 4, 2, 9 } }, "float32")
        assert_values(m:sum(1), { 5, 9, 12 })
        assert_values(m:sum(2), { 11, 15 })
        assert_values(m:max(1), { 4, 7, 9 })
        assert_values(m:argmax(2), { 2, 3 })
        assert_values(m:argmin(1), { 1, 2, 1 })
        assert_values(m:mean({ axis = -1 }), { 11 / 3, 5 }, 1e-6)
        assert.are.same({ 1, 3 }, m:sum({ axis = 1, keepdims = true }).shape)
        assert.are.same({ true, true, true }, m:gt(3):any(1):totable())
        assert.are.same({ false, false, false }, m:gt(3):all(1):totable())
        assert.are.same({ false, true }, m:gt(1):all(2):totable())
      end)

      it("propagate NaN as NumPy does, and refuse empty min, max and argmax", function()
        local a = arr({ 1, 0 / 0, 3, 0 / 0 }, "float64")
        assert(a:max() ~= a:max())
        assert(a:min() ~= a:min())
        assert(a:sum() ~= a:sum())
        assert.are.equal(2, a:argmax())
        assert.are.equal(2, a:argmin())
        helper.assert_error_matches(function() arr({}, "float32"):max() end,
          "max: zero-size array to a reduction with no identity")
        helper.assert_error_matches(function() cd.zeros({ 2, 0 }, "float32", { device = dev }):argmin(2) end,
          "argmin: zero-size array to a reduction with no identity")
        helper.assert_error_matches(function() arr({ 1 }, "float32"):sum("x") end,
          "bad argument #2 to 'sum' (axis (integer) or options table expected, got string)")
      end)

      it("sum float16 in float32 and big arrays exactly", function()
        assert.are.equal(3000, cd.ones(3000, "float16", { device = dev }):sum())
        local n = 1000003
        assert.are.equal(n, cd.ones(n, "float32", { device = dev }):sum())
      end)
    end)

    describe("ranges", function()
      it("arange and linspace as NumPy", function()
        assert_values(cd.arange(5, { device = dev }), { 0, 1, 2, 3, 4 })
        assert.are.equal("int64", cd.arange(5, { device = dev }).dtype)
        assert_values(cd.arange(1, 2, 0.25, { device = dev }), { 1, 1.25, 1.5, 1.75 })
        assert_values(cd.arange(10, 0, -3, "int16", { device = dev }), { 10, 7, 4, 1 })
        assert.are.equal(0, cd.arange(5, 1, { device = dev }).size)
        assert_values(cd.linspace(0, 1, 5, { device = dev }), { 0, 0.25, 0.5, 0.75, 1 })
        assert_values(cd.linspace(0, 1, 4, { endpoint = false, device = dev }), { 0, 0.25, 0.5, 0.75 })
        assert.are.equal(1 / 3, values(cd.linspace(0, 1, 4, "float64", { device = dev }))[2])
        helper.assert_error_matches(function() cd.arange(1, 5, 0) end, "bad argument #3 to 'arange' (step must not be zero)")
      end)
    end)

    -- (see NOTE [binary fast path] and NOTE [reduction fast path]) the second call of an operator or a whole-array
    -- reduction takes the kept kernel; whatever falls outside the fast path still goes the general way
    describe("repeated operations", function()
      it("compile nothing again, even across collections (the generated kernels are kept)", function()
        local x = arr({ 1, 2, 3, 4 }, "float32")
        assert_values(x + x, { 2, 4, 6, 8 })
        assert.are.equal(10, x:sum())
        collectgarbage()
        local before = cd.kernel_cache_stats()
        for _ = 1, 5 do
          assert_values(x + x, { 2, 4, 6, 8 })
          assert.are.equal(10, x:sum())
          collectgarbage()
        end
        local after = cd.kernel_cache_stats()
        assert.are.same({ before.memory_hits, before.memory_misses }, { after.memory_hits, after.memory_misses })
      end)

      it("give the general path's results, and its errors, for every form around the kept one", function()
        local a, b = arr({ { 1, 2, 3 }, { 4, 5, 6 } }, "int32"), arr({ { 10, 20, 30 }, { 40, 50, 60 } }, "int32")
        for _ = 1, 2 do assert_values(a + b, { 11, 22, 33, 44, 55, 66 }) end
        assert_values(a + arr({ 100, 200, 300 }, "int32"), { 101, 202, 303, 104, 205, 306 })   -- broadcast
        assert_values(a + b.T:contiguous().T, { 11, 22, 33, 44, 55, 66 })                    -- a strided view
        assert.are.equal("float64", (a + arr({ { 1, 1, 1 }, { 1, 1, 1 } }, "float64")).dtype)
        helper.assert_error_contains(function() return a + arr({ 1, 2 }, "int32") end, "cannot be broadcast")
        local out = cd.zeros({ 2, 3 }, "int32", { device = dev })
        assert.are.equal(out, cd.add(a, b, { out = out }))
        assert_values(out, { 11, 22, 33, 44, 55, 66 })
        for _ = 1, 2 do assert.are.equal(21, a:sum()) end
        local o = cd.empty({}, "int64", { device = dev })
        assert.are.equal(o, a:sum({ out = o }))
        assert.are.equal(21, o[1])
        assert_values(a:sum({ axis = 1 }), { 5, 7, 9 })
        assert.are.equal(0, arr({}, "int32"):sum())
        helper.assert_error_contains(function() return arr({}, "float32"):mean() end, "zero-size array")
        helper.assert_error_contains(function() return a:sum({ out = cd.empty({}, "float32", { device = dev }) }) end,
          "output is float32 but the result is int64")
        cd.clear_kernel_cache()
        assert_values(a + b, { 11, 22, 33, 44, 55, 66 })
        assert.are.equal(21, a:sum())
      end)
    end)
  end)
end)

describe("in-place methods under their functions' names (issue 30)", function()
  it("a:subtract_, a:remainder_, a:bitwise_and_ and the others are the short forms", function()
    local names = { subtract_ = "sub_", multiply_ = "mul_", divide_ = "div_", floor_divide_ = "floordiv_",
                    remainder_ = "mod_", power_ = "pow_", bitwise_and_ = "band_", bitwise_or_ = "bor_",
                    bitwise_xor_ = "bxor_", left_shift_ = "shl_", right_shift_ = "shr_" }
    -- each long name does what its short name does (each is its own function: errors name the one called)
    for long, short in pairs(names) do
      local dt = long == "divide_" and "float32" or "int32"   -- true division's result is a float
      local x, y = cd.array({ 12, 13, 14 }, dt), cd.array({ 12, 13, 14 }, dt)
      assert.are.equal(x, x[long](x, 3), long)
      y[short](y, 3)
      assert.are.same(y:totable(), x:totable(), long)
    end
    local a = cd.array({ 7, 8, 9 }, "int32")
    assert.are.equal(a, a:subtract_(2))
    assert.are.same({ 5, 6, 7 }, a:totable())
    a:remainder_(4)
    assert.are.same({ 1, 2, 3 }, a:totable())
    a:bitwise_and_(2)
    assert.are.same({ 0, 2, 2 }, a:totable())
  end)
end)
