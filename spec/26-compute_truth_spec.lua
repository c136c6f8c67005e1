-- Computing with arrays against NumPy 2 (issue 28, arrays-truth): the answers an outside differential run found
-- wrong or different, each checked on every device with NumPy's answer written out (NumPy 2's rules: weak Lua
-- numbers, integer floor/ceil/trunc as NumPy 2.1), and the generated kernels those fixes touch compiled by NVRTC
-- for sm_90, which needs no GPU (the arctan2 of integers that failed there).
local helper = require "spec.helper"
local cd = require "cudadev"

local values = helper.values

-- NaN matches NaN; zeros match by sign too (1 / x); tol relative, exact when nil
local function same_value(x, y, tol)
  if x ~= x or y ~= y then return x ~= x and y ~= y end
  if x == 0 and y == 0 then return 1 / x == 1 / y end
  if x == y then return true end
  return tol ~= nil and math.abs(x - y) <= tol * math.abs(y)
end

local function assert_values(a, expected, tol, what)
  local got = values(a)
  assert.are.equal(#expected, #got, (what or "") .. " element count")
  for i = 1, #expected do
    assert(same_value(got[i], expected[i], tol),
      ("%selement %d: got %s, expected %s"):format(what and what .. ": " or "", i, tostring(got[i]), tostring(expected[i])))
  end
end

local INTS = { "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64" }
local MIN = { int8 = -128, int16 = -32768, int32 = -2147483648, int64 = math.mininteger }
local inf, nan = math.huge, 0 / 0

helper.each_device(function(dev)
  describe("computing like NumPy 2 on " .. dev, function()
    local function arr(t, dt) return cd.array(t, dt, { device = dev }) end

    it("divides integers truly, in float64, a zero divisor giving inf or NaN; // and % by zero give 0", function()
      local q = arr({ 1, 7 }, "int32") / arr({ 4, 2 }, "int32")
      assert.are.equal("float64", q.dtype)
      assert_values(q, { 0.25, 3.5 })
      assert_values(arr({ 1, 7 }, "int32") / 2, { 0.5, 3.5 })
      assert_values(7 / arr({ 2, -4 }, "int8"), { 3.5, -1.75 })
      assert_values(cd.divide(arr({ 1, -1, 0 }, "int32"), arr({ 0, 0, 0 }, "int32")), { inf, -inf, nan })
      -- every integer dtype, by another (bool included; the NVRTC test below compiles every dtype by itself)
      local others = { "bool", "int8", "uint16", "int32", "uint64", "int64", "uint8", "int16" }
      for i, a in ipairs(INTS) do
        local b = others[i]
        local r = arr({ 3, 0, 1 }, a) / arr({ 2, 1, 0 }, b == "bool" and "int8" or b):astype(b)
        assert.are.equal("float64", r.dtype, a .. " / " .. b)
        assert_values(r, { b == "bool" and 3 or 1.5, 0, inf }, nil, a .. " / " .. b)
      end
      -- beyond 2^53 the operands are rounded to float64 first, as NumPy does
      assert_values(arr({ math.maxinteger }, "int64") / arr({ 1 }, "int64"), { 2 ^ 63 })
      -- the integer floor division and remainder: 0 for a zero divisor, MIN // -1 wraps, never a trap
      for d, m in pairs(MIN) do
        assert_values(arr({ 5, m, m }, d) // arr({ 0, -1, 0 }, d), { 0, m, 0 }, nil, d .. " //")
        assert_values(arr({ 5, m, -7 }, d) % arr({ 0, -1, 0 }, d), { 0, 0, 0 }, nil, d .. " %")
      end
      assert_values(arr({ 5 }, "uint32") // arr({ 0 }, "uint32"), { 0 })
      assert_values(arr({ 5 }, "uint8") % 0, { 0 })
    end)

    it("floor-divides and takes remainders of floats as NumPy's divmod", function()
      for _, d in ipairs({ "float16", "float32", "float64" }) do
        assert_values(arr({ inf, -inf }, d) // 2, { nan, nan }, nil, d .. " inf // 2")
        assert_values(arr({ inf, -inf }, d) % 2, { nan, nan }, nil, d .. " inf % 2")
        assert_values(arr({ 5, -5, 0 }, d) // 0, { inf, -inf, nan }, nil, d .. " // 0")
        assert_values(arr({ 5, -5 }, d) // inf, { 0, -1 }, nil, d .. " // inf")
        assert_values(arr({ 5, -5 }, d) % inf, { 5, inf }, nil, d .. " % inf")
        -- a zero remainder takes the divisor's sign (fmod gives the dividend's)
        assert_values(arr({ -4, 4 }, d) % arr({ 2, -2 }, d), { 0.0, -0.0 }, nil, d .. " zero remainder")
        assert_values(arr({ 7, -7 }, d) // arr({ 2, 2 }, d), { 3, -4 }, nil, d .. " //")
      end
      -- the quotient from (x - fmod(x, y)) / y: 9, where floor(1 / 0.1) is 10
      assert_values(arr({ 1 }, "float64") // 0.1, { 9 })
      assert_values(arr({ 1 }, "float64") % 0.1, { 0.09999999999999995 })
    end)

    it("gives arctan2 and hypot of integers the float NumPy gives, on every device", function()
      local cases = { { "int8", "int8", "float16" }, { "bool", "bool", "float16" }, { "int8", "uint8", "float16" },
                      { "uint16", "int8", "float32" }, { "int32", "int32", "float64" }, { "int64", "uint64", "float64" },
                      { "int16", "float16", "float32" }, { "float32", "float64", "float64" } }
      for _, c in ipairs(cases) do
        local x, y = arr({ 1, 0, 1 }, c[1] == "bool" and "int8" or c[1]):astype(c[1]), arr({ 1, 1, 0 }, c[2] == "bool" and "int8" or c[2]):astype(c[2])
        local t, h = cd.arctan2(x, y), cd.hypot(x, y)
        assert.are.equal(c[3], t.dtype, "arctan2 of " .. c[1] .. " and " .. c[2])
        assert.are.equal(c[3], h.dtype, "hypot of " .. c[1] .. " and " .. c[2])
        assert_values(t, { math.pi / 4, 0, math.pi / 2 }, 1e-3, "arctan2 " .. c[1] .. " " .. c[2])
        assert_values(h, { math.sqrt(2), 1, 1 }, 1e-3, "hypot " .. c[1] .. " " .. c[2])
      end
      -- a Lua number is weak: an integer takes the array's dtype, a float makes float64
      assert.are.equal("float16", cd.arctan2(arr({ 1 }, "int8"), 3).dtype)
      assert.are.equal("float64", cd.arctan2(arr({ 1 }, "int8"), 3.0).dtype)
      assert.are.equal("float32", cd.hypot(arr({ 3 }, "uint16"), 4).dtype)
      assert_values(cd.hypot(arr({ 3 }, "uint16"), 4), { 5 })
      -- copysign's float is found the same way
      local c = cd.copysign(arr({ 3, 2 }, "int8"), arr({ 1, 0 }, "uint8"))
      assert.are.equal("float16", c.dtype)
      assert_values(c, { 3, 2 })
      assert.are.equal("float32", cd.copysign(arr({ 3 }, "int8"), arr({ 1 }, "int16")).dtype)
      assert.are.equal("float64", cd.copysign(arr({ 3 }, "int8"), -2.0).dtype)
    end)

    it("keeps the dtype of integer and bool arrays in floor, ceil and trunc (NumPy 2.1)", function()
      for i, f in ipairs({ "floor", "ceil", "trunc" }) do
        for j = i, #INTS, 3 do   -- each integer dtype through one of the three
          local d = INTS[j]
          local r = cd[f](arr({ 3, 0, 100 }, d))
          assert.are.equal(d, r.dtype, f .. " of " .. d)
          assert_values(r, { 3, 0, 100 }, nil, f .. " of " .. d)
        end
        assert_values(cd[f](arr({ -7, 5 }, "int64")), { -7, 5 })
        local b = cd[f](arr({ true, false }, "bool"))
        assert.are.equal("bool", b.dtype)
        assert.are.same({ true, false }, b:totable())
      end
      assert_values(cd.floor(arr({ -1.5, 2.5 }, "float32")), { -2, 2 })
      assert.are.equal("float16", cd.rint(arr({ 1 }, "int8")).dtype)   -- rint still gives floats, as in NumPy
    end)

    it("compares with Lua integers outside the dtype exactly, as NumPy 2 does", function()
      local u = arr({ 0, 200, 255 }, "uint8")
      assert.are.same({ true, true, true }, u:lt(256):totable())
      assert.are.same({ false, false, false }, u:gt(256):totable())
      assert.are.same({ false, false, false }, u:eq(-1):totable())
      assert.are.same({ true, true, true }, u:ne(-1):totable())
      assert.are.same({ true, true, true }, u:ge(-1):totable())
      assert.are.same({ false, false, false }, cd.less_equal(u, -1):totable())
      assert.are.same({ true, true, true }, cd.greater(256, u):totable())
      local i = arr({ -128, 0, 127 }, "int8")
      assert.are.same({ true, true, true }, i:lt(1000):totable())
      assert.are.same({ true, true, true }, i:gt(-129):totable())
      assert.are.same({ false, false }, arr({ 1, 2 }, "int32"):eq(1 << 40):totable())
      assert.are.same({ true, true }, arr({ 1, 2 }, "uint32"):lt(1 << 40):totable())
      local big = arr({ 0, 2 ^ 63 }, "uint64")
      assert.are.same({ true, true }, big:gt(-1):totable())
      assert.are.same({ false, false }, big:le(math.mininteger):totable())
      assert.are.same({ false, false }, big:eq(-1):totable())
      -- in range, as before
      assert.are.same({ false, true, false }, u:eq(200):totable())
      -- arithmetic with such an integer is still an error
      helper.assert_error_matches(function() return u + 256 end, "operator +: Lua integer 256 is out of bounds for uint8")
    end)

    it("compares a signed integer array with a uint64 one exactly, as NumPy 1.25 and later do", function()
      -- promoted to float64, 2^63 - 1 and 2^63 compared equal
      local a = arr({ math.maxinteger, -1, 5, math.mininteger }, "int64")
      local b = arr({ 2 ^ 63, 2 ^ 64 - 2048, 5, 0 }, "uint64")
      assert.are.same({ false, false, true, false }, a:eq(b):totable())
      assert.are.same({ true, true, false, true }, cd.not_equal(b, a):totable())
      assert.are.same({ true, true, false, true }, a:lt(b):totable())
      assert.are.same({ true, true, true, true }, a:le(b):totable())
      assert.are.same({ true, true, false, true }, b:gt(a):totable())
      assert.are.same({ false, false, true, false }, a:ge(b):totable())
      assert.are.same({ true, false }, arr({ -1, 3 }, "int8"):lt(arr({ 0, 2 }, "uint64")):totable())
      -- arithmetic still promotes to float64, as NumPy's
      assert.are.equal("float64", (a + b).dtype)
    end)

    it("refuses the sign of bool arrays and squares bool into int8, as NumPy", function()
      helper.assert_error_matches(function() return cd.sign(arr({ true }, "bool")) end,
        "sign: bool arrays have no sign (NumPy refuses them too); convert with a:astype(\"int8\")")
      assert_values(cd.sign(arr({ -3, 0, 5 }, "int8")), { -1, 0, 1 })
      local s = cd.square(arr({ true, false }, "bool"))
      assert.are.equal("int8", s.dtype)
      assert_values(s, { 1, 0 })
    end)

    it("answers a uint64 max, min, sum exactly: the Lua integer of the 64 bits", function()
      local a = arr({ 2 ^ 63 + 4096, 1, 2 ^ 64 - 2048 }, "uint64")
      for _ = 1, 2 do   -- the general path, then the kept kernels' (NOTE [reduction fast path])
        assert.are.equal(-2048, a:max())
        assert.are.equal(1, a:min())
        assert.are.equal(math.mininteger + 4096 - 2048 + 1, a:sum())
      end
      assert.is_true(math.ult(a:min(), a:max()))
      assert.are.equal("fffffffffffff800", ("%x"):format(a:max()))
      assert.are.equal(7, arr({ 5, 7 }, "uint64"):max())
      assert.are.equal(math.maxinteger, arr({ math.maxinteger, 0 }, "uint64"):max())
      -- as an Array, the value stays uint64
      local m = a:max({ keepdims = true })
      assert.are.equal("uint64", m.dtype)
    end)

    it("rebuilds arrays from totable() as NumPy's array(a.tolist()) does, 0 extents included", function()
      -- NumPy: np.array(np.zeros((2, 0)).tolist()).shape is (2, 0); (0, 3) gives (0,) and (2, 0, 3) gives (2, 0),
      -- a nested list having no row to tell the later extents; a:reshape(shape) gives them back
      local cases = { { { 2, 0 }, { 2, 0 } }, { { 2, 3, 0 }, { 2, 3, 0 } }, { { 0, 3 }, { 0 } },
                      { { 2, 0, 3 }, { 2, 0 } }, { { 0 }, { 0 } }, { { 1, 0 }, { 1, 0 } } }
      for _, c in ipairs(cases) do
        local v = cd.zeros(c[1], "int32", { device = dev })
        local b = arr(v:totable(), "int32")
        assert.are.same(c[2], b.shape, "shape {" .. table.concat(c[1], ", ") .. "}")
        assert.are.equal("int32", b.dtype)
        assert.are.same(c[1], b:reshape(v.shape).shape)
      end
    end)
  end)
end)

describe("computing like NumPy 2: the manual", function()
  it("says where a NumPy user looks that Lua's == of two Arrays is identity", function()
    local a = cd.array({ 1, 2 })
    assert.is_false(a == cd.array({ 1, 2 }))
    assert.is_true(a == a)
    local repl = require "cudadev.repl"
    assert.truthy(assert(repl.doc(a.eq)):find("same Array object", 1, true))
    local f = assert(io.open("doc/arrays.md"))
    local text = f:read("a")
    f:close()
    assert.truthy(text:find("`==` is not elementwise", 1, true))
  end)
end)

-- The generated sources of the operations above, compiled by NVRTC for sm_90 (no GPU needed): the cpu device's
-- host compiler took arctan2(int8, int8), which NVRTC refused (atan2 of two ints is ambiguous in CUDA C).
describe("computing like NumPy 2: generated kernels under NVRTC", function()
  helper.nvrtc_it("compile for sm_90 for every dtype the fixed operations take", function()
    local real, STOP, srcs = cd.compile, {}, {}
    -- catch each generated source instead of compiling it for the cpu device (and forget the kernels kept
    -- from earlier tests, so that every source is generated again)
    cd._live()
    local loops = cd._cpu_loops(false)   -- the generated kernels, not the cpu device's loops (NOTE [cpu loops])
    cd.compile = function(src, o)
      if type(o) == "table" and type(o.name) == "string" and o.name:match("^cdv_") then
        srcs[#srcs + 1] = { o.name, src }
        error(STOP)
      end
      return real(src, o)
    end
    local ok, err = pcall(function()
      local dts = { "bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16",
                    "float32", "float64" }
      for _, d in ipairs(dts) do
        local x = cd.ones(2, d, { device = "cpu" })
        for _, f in ipairs({ "arctan2", "hypot", "divide", "floor_divide", "remainder", "power", "copysign", "fmod" }) do
          assert(pcall(cd[f], x, x) == false)
        end
        for _, f in ipairs({ "floor", "ceil", "trunc", "sign", "square" }) do pcall(cd[f], x) end
        if d ~= "bool" and d ~= "int64" and not d:match("^float") then
          pcall(x.lt, x, d == "uint64" and -1 or 1 << 40)
        end
        -- a Lua integer out of range, taken in the compute float (NEP 50); linspace's floor, arange's steps
        for _, f in ipairs({ "divide", "arctan2", "hypot" }) do pcall(cd[f], x, math.mininteger) end
        pcall(cd.linspace, -1, 0, 3, d, { device = "cpu" })
        pcall(cd.arange, -2.5, 1, 0.75, d, { device = "cpu" })
        pcall(cd.arctan2, x, cd.ones(2, "int8", { device = "cpu" }))
        pcall(cd.copysign, x, cd.ones(2, "uint8", { device = "cpu" }))
        pcall(x.lt, x, cd.ones(2, "uint64", { device = "cpu" }))
        pcall(x.max, x)
      end
    end)
    cd.compile = real
    cd._cpu_loops(loops)
    assert(ok or err == STOP, err)
    assert(#srcs >= 12 * 8, "only " .. #srcs .. " sources caught")
    for _, s in ipairs(srcs) do
      local cok, cerr = pcall(cd.compile, s[2], { arch = "sm_90", name = s[1] })
      assert(cok, tostring(cerr))
    end
  end)
end)
