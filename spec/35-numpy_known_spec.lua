-- The differential NumPy suite's known failures, fixed (issue 28; spec/29-numpy_diff_spec.lua's KNOWN table had a
-- row for each): one direct case each, with NumPy's answer worked out here (python3 with NumPy gave the same).
local helper = require "spec.helper"
local cd = require "cudadev"

local E = helper.assert_error_matches

helper.each_device(function(dev)
  local D = { device = dev }
  local function arr(t, dt) return cd.array(t, dt or "float64", D) end

  describe("NumPy's answers on " .. dev .. " where cudadev once differed", function()
    it("linspace into an integer dtype floors, as NumPy (a C conversion truncates towards zero)", function()
      assert.are.same({ -1, -1, 0 }, cd.linspace(-1, 0, 3, "int32", D):totable())
      -- -3.5, -2.125, -0.75, 0.625, 2
      assert.are.same({ -4, -3, -1, 0, 2 }, cd.linspace(-3.5, 2, 5, "int16", D):totable())
      assert.are.same({ -3, -2, -2 }, cd.linspace(-2.5, -0.5, 3, "int64", { endpoint = false, device = dev }):totable())
      assert.are.same({ -2.5, -1.25 }, cd.linspace(-2.5, 0, 2, "float64", { endpoint = false, device = dev }):totable())
    end)

    it("linspace rounds i * step before adding start, as NumPy (not one FMA rounding)", function()
      -- 3 * (8 / 6) rounds to 4.0, and -2 + 4.0 is 2 in NumPy; fused into an FMA it is 1.9999999999999996, floor 1
      assert.are.same({ -2, -1, 0, 2, 3, 4, 6 }, cd.linspace(-2, 6, 7, "int64", D):totable())
      assert.equal(0.20000000000000018, cd.linspace(-1, 1, 5, { endpoint = false, device = dev })[4])
      assert.equal(-0.125, cd.linspace(-1.75, 1.5, 7, D)[4])
    end)

    it("arange into an integer dtype with float bounds steps by int(start + step) - int(start), as NumPy", function()
      assert.are.same({ -2, -1, 0, 1, 2 }, cd.arange(-2.5, 1.0, 0.75, "int32", D):totable())
      assert.are.same({ -1, 0, 1, 2, 3, 4, 5 }, cd.arange(-1.25, 2, 0.5, "int16", D):totable())
      assert.are.same({ 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }, cd.arange(0.5, 3, 0.25, "int64", D):totable())
      assert.are.same({ 254, 255 }, cd.arange(-2.5, 0, 1.5, "uint8", D):totable())
      assert.are.same({ 2, 1, 0 }, cd.arange(2.5, -2, -1.5, "int32", D):totable())
      assert.are.same({ 0, 1, 2, 3 }, cd.arange(0, 5, 1.5, "int32", D):totable())
      assert.are.same({ 0.5, 0.75 }, cd.arange(0.5, 1, 0.25, D):totable())
    end)

    it("a Lua integer out of the array's range: converted where the operation computes in a float or bool", function()
      local u16 = arr({ 1, 2 }, "uint16")
      local q = u16 / 70000
      assert.equal("float64", q.dtype)
      assert.are.same({ 1 / 70000, 2 / 70000 }, q:totable())
      assert.are.same({ -0.2, -0.4 }, (u16 / -5):totable())
      assert.are.same({ -5.0, -2.5 }, (-5 / u16):totable())
      -- uint64 and a negative integer: float64, as NumPy's true_divide of uint64
      assert.are.same({ -2.0 ^ 63, -2.0 ^ 62 }, (math.mininteger / arr({ 1, 2 }, "uint64")):totable())
      local h = cd.hypot(u16, -5)
      assert.equal("float32", h.dtype)
      assert(math.abs(h[1] - math.sqrt(26)) < 1e-6 and math.abs(h[2] - math.sqrt(29)) < 1e-6)
      -- int8's float is float16: 70000 is inf there, arctan2(1, inf) = 0 and arctan2(inf, 1) = pi / 2
      local t = cd.arctan2(arr({ 1, 2 }, "uint8"), 70000)
      assert.equal("float16", t.dtype)
      assert.are.same({ 0, 0 }, t:totable())
      assert(math.abs(cd.arctan2(70000, arr({ 1 }, "int8"))[1] - math.pi / 2) < 1e-3)
      local c = cd.copysign(u16, -70000)
      assert.equal("float32", c.dtype)
      assert.are.same({ -1, -2 }, c:totable())
      assert.are.same({ math.huge, math.huge }, cd.copysign(-70000, arr({ 1, 2 }, "uint8")):totable())
      assert.are.same({ true, false }, cd.logical_and(arr({ 1, 0 }, "uint16"), -5):totable())
      assert.are.same({ true, true }, cd.logical_or(math.maxinteger, arr({ 1, 0 }, "int8")):totable())
      assert.are.same({ false, true }, cd.logical_xor(arr({ 1, 0 }, "uint8"), 300):totable())
      assert.are.same({ false, false }, cd.logical_and(arr({ 1, 0 }, "uint8"), 0):totable())
      assert.are.same({ true, false }, cd.logical_and(arr({ 1, 0 }, "uint8"), 0 / 0):totable())   -- NaN is true
      -- NumPy 2 still refuses it where the integer dtype computes: arithmetic, fmod, where
      E(function() return arr({ 1 }, "uint8") + 300 end, "operator +: Lua integer 300 is out of bounds for uint8")
      E(function() return cd.fmod(u16, -5) end, "fmod: Lua integer -5 is out of bounds for uint16")
      E(function() return cd.floor_divide(u16, 70000) end, "floor_divide: Lua integer 70000 is out of bounds for uint16")
    end)

    it("a fused division takes a Lua integer out of range as the unfused one does", function()
      local f = cd.fuse(function(x, s) return x / s end)
      local u16 = arr({ 1, 2 }, "uint16")
      assert.are.same({ 0.5, 1.0 }, f(u16, 2):totable())
      assert.are.same({ -0.2, -0.4 }, f(u16, -5):totable())
    end)

    it("triu and tril of a 1-d array: the square whose rows are it, as NumPy broadcasts it", function()
      local v = arr({ 1, 2, 3 }, "int32")
      assert.are.same({ { 1, 2, 3 }, { 0, 2, 3 }, { 0, 0, 3 } }, cd.triu(v):totable())
      assert.are.same({ { 1, 0, 0 }, { 1, 2, 0 }, { 1, 2, 3 } }, cd.tril(v):totable())
      assert.are.same({ { 0, 2, 3 }, { 0, 0, 3 }, { 0, 0, 0 } }, cd.triu(v, 1):totable())
      assert.are.same({ { 0, 0, 0 }, { 1, 0, 0 }, { 1, 2, 0 } }, cd.tril(v, -1):totable())
      assert.are.same({ { 3, 0 }, { 3, 1 } }, cd.tril(arr({ 3, 1, 7 }):slice(1, 2)):totable())
      assert.are.same({ 0, 0 }, cd.triu(arr({}, "int8")).shape)
      E(function() return cd.tril(cd.zeros({}, "float32", D)) end,
        "bad argument #1 to 'tril' (Array of 1 or more dimensions expected, got 0-d)")
    end)

    it("a uint64 element above 2^63 - 1 reads as the Lua integer of its 64 bits, as max and sum answer", function()
      local u = cd.array(string.pack("<i8i8i8", -1, 5, math.mininteger + 7), "uint64"):to(dev)
      assert.equal(-1, u[1])
      assert.equal("integer", math.type(u[1]))
      assert.equal(math.mininteger + 7, u[-1])
      assert.equal(-1, u:item(1))
      assert.are.same({ -1, 5, math.mininteger + 7 }, u:totable())
      assert.are.same({ { -1 }, { 5 } }, u:slice(1, 2):reshape({ 2, 1 }):totable())
      assert.equal(u:max(), u[1])
      assert.equal(u:slice(3, 3):sum(), u[3])
      assert.equal("Array(uint64[3] on " .. u.device.alias .. ": {18446744073709551615, 5, 9223372036854775815})", tostring(u))
    end)

    it("round of 64-bit integers with negative decimals computes in float64, as NumPy's", function()
      -- NumPy: rint(x / 1e3) * 1e3 as a double, back to int64: 8647107676490578944, not the exact ...579000
      local a = cd.array(string.pack("<i8i8", 8647107676490578979, 1234567), "int64"):to(dev)
      assert.are.same({ 8647107676490578944, 1235000 }, cd.round(a, -3):totable())
      -- past the range: x86-64's conversion of the double, as NumPy's (2^63 as int64 is its lowest value)
      local m = cd.array(string.pack("<i8i8i8", math.maxinteger, math.mininteger, math.maxinteger - 1), "int64"):to(dev)
      assert.are.same({ math.mininteger, math.mininteger, math.mininteger }, cd.round(m, -1):totable())
      assert.are.same({ 9200000000000000000, -9200000000000000000 }, cd.round(m:slice(1, 2), -17):totable())
      assert.are.same({ math.mininteger, math.mininteger }, cd.round(m:slice(1, 2), -19):totable())
      -- uint64: 2^64 - 1 with -3 is 2^64 as a double, which converts to 0; with -4 the double 2^64 - 2048
      local u = cd.array(string.pack("<i8i8", -1, 8647107676490578979), "uint64"):to(dev)
      assert.are.same({ 0, 8647107676490578944 }, cd.round(u, -3):totable())
      assert.are.same({ -2048 }, cd.round(u:slice(1, 1), -4):totable())
      -- the narrower types: int32 past its range is its lowest value, uint32 0, 8 and 16 bits wrap
      local function round1(v, dt, k) return cd.round(arr({ v }, dt), k)[1] end
      assert.are.same({ -2147483648, 2147483600 }, { round1(2147483647, "int32", -1), round1(2147483647, "int32", -2) })
      assert.are.same({ 0, 4294967000 }, { round1(4294967295, "uint32", -1), round1(4294967295, "uint32", -3) })
      assert.are.same({ 4, 44, 0 }, { round1(255, "uint8", -1), round1(255, "uint8", -2), round1(255, "uint8", -3) })
      assert.are.same({ -126, 126 }, cd.round(arr({ 127, -128 }, "int8"), -1):totable())
      assert.are.same({ 0, 20, 20, -20 }, cd.round(arr({ 5, 15, 25, -25 }, "int16"), -1):totable())   -- halves to even
    end)

    it("round of a bool array is float16 with 0 decimals and refused with others, as NumPy", function()
      local r = cd.round(arr({ true, false }, "bool"))
      assert.equal("float16", r.dtype)
      assert.are.same({ 1, 0 }, r:totable())
      assert.are.same({ 1, 0 }, cd.round(arr({ true, false }, "bool"), { out = cd.zeros(2, "float32", D) }):totable())
      E(function() return cd.round(arr({ true }, "bool"), -1) end, "bad argument #2 to 'round' (a bool array rounds only "
        .. "with 0 decimals, to float16 as NumPy's; convert it with a:astype(\"float16\") first)")
    end)

    it("nanmean of integers with no elements is NaN, as of floats and as NumPy's (mean raises)", function()
      local e = cd.nanmean(arr({}, "int32"))
      assert(e ~= e, "NaN expected, got " .. tostring(e))
      local r = cd.nanmean(cd.zeros({ 2, 0 }, "uint8", D), 2)
      assert.equal("float64", r.dtype)
      local t = r:totable()
      assert(#t == 2 and t[1] ~= t[1] and t[2] ~= t[2])
      assert.equal(7 / 3, cd.nanmean(arr({ 1, 2, 4 }, "int8")))
      assert.are.same({ 2, 3.5 }, cd.nanmean(arr({ { 1, 2 }, { 3, 5 } }, "int64"), 1):totable())
      E(function() return cd.mean(arr({}, "int32")) end, "mean: zero-size array to a reduction with no identity")
    end)

    it("var and std whose squares pass double's range are inf, as NumPy's, not NaN", function()
      assert.equal(math.huge, cd.var(arr({ 0, 1e300 })))
      assert.equal(math.huge, cd.std(arr({ 1e200, -1e200, 5 })))
      assert.are.same({ math.huge, 0.25 }, cd.var(arr({ { 0, 1e300 }, { 1, 2 } }), 2):totable())
      assert.equal(0, cd.var(arr({ 1e300, 1e300 })))
      local n = cd.var(arr({ 0 / 0, 1e300 }))
      assert(n ~= n, "NaN stays NaN")
      n = cd.std(arr({ -1e19, 53, -1 / 0, 30 }))   -- an infinite element: NumPy's mean is -inf, and -inf - -inf NaN
      assert(n ~= n, "an infinite element gives NaN")
    end)

    it("vdot and dot of integers wrap in the operands' dtype, of bools answer a boolean, as NumPy", function()
      local a, b = arr({ 10, 10, 1 }, "int8"), arr({ 10, 10, 27 }, "int8")
      assert.equal(-29, cd.vdot(a, b))      -- 227 in int8
      assert.equal(-29, cd.dot(a, b))
      assert.equal(227, cd.vdot(a:astype("int16"), b))
      -- int8 and int32 promote to int32: 2^31 + 2^31 wraps to 0
      local big = arr({ 2 ^ 30, 2 ^ 30 }, "int32")
      assert.equal(0, cd.vdot(arr({ 2, 2 }, "int8"), big))
      assert.equal(0, cd.vdot(arr({ 255, 1 }, "uint8"), arr({ 1, 1 }, "uint8")))   -- 256 wraps to 0 in uint8
      assert.equal(-1, cd.vdot(cd.array(string.pack("<i8", -1), "uint64"):to(dev), arr({ 1 }, "uint64")))
      assert.is_true(cd.vdot(arr({ true, false }, "bool"), arr({ true, true }, "bool")))
      assert.is_false(cd.vdot(arr({ false, true }, "bool"), arr({ true, false }, "bool")))
      assert.is_false(cd.dot(arr({}, "bool"), arr({}, "bool")))
      assert.equal(0, cd.vdot(arr({}, "int8"), arr({}, "int8")))
      assert.equal(2.5, cd.vdot(arr({ 1, 0.5 }), arr({ 2, 1 })))
    end)
  end)
end)
