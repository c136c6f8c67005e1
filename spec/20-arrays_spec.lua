-- Arrays (API.md "Arrays"): dtypes, shapes, creation, element access and conversion, printing, copies,
-- views, fill, lifetime and options. The same expectations run on every device (cpu everywhere, cuda:0
-- when there is a GPU); moving data between host and GPU, pinned memory and stream lifetimes are in
-- gpu_it blocks.
local helper = require "spec.helper"
local cd = require "cudadev"

local expect_error = helper.assert_error_matches

local DTYPES = {
  { "float16", "f16", 2 }, { "float32", "f32", 4 }, { "float64", "f64", 8 },
  { "int8", "i8", 1 }, { "int16", "i16", 2 }, { "int32", "i32", 4 }, { "int64", "i64", 8 },
  { "uint8", "u8", 1 }, { "uint16", "u16", 2 }, { "uint32", "u32", 4 }, { "uint64", "u64", 8 },
  { "bool", "bool", 1 },
}

local function range(n) local t = {} for i = 1, n do t[i] = i end return t end

-- The same expectations on every device: "cpu", and "cuda:0" when there is a GPU. Arrays are made on the
-- default device, which each test sets to the device under test.
helper.each_device(function(dev)
  -- the expected text of an array on `dev`, written as for cpu
  local function on(text) return (text:gsub(" on cpu", " on " .. dev)) end

  describe("on " .. dev, function()
    local saved
    before_each(function()
      saved = cd.get_device()
      cd.set_device(dev)
    end)
    after_each(function() cd.set_device(saved) end)

    describe("dtypes", function()
      for _, d in ipairs(DTYPES) do
        local name, short, size = d[1], d[2], d[3]
        it(("%s (%s) has itemsize %d"):format(name, short, size), function()
          local a, b = cd.empty(3, name), cd.empty(3, short)
          assert.are.equal(name, a.dtype)
          assert.are.equal(name, b.dtype)
          assert.are.equal(size, a.itemsize)
          assert.are.equal(3 * size, a.nbytes)
        end)
      end

      it("default to float32", function()
        assert.are.equal("float32", cd.empty(2).dtype)
        assert.are.equal("float32", cd.zeros({ 2, 2 }).dtype)
        assert.are.equal("float32", cd.array({ 1, 2 }).dtype)
      end)

      it("reject an unknown name", function()
        expect_error(function() cd.empty(3, "float8") end,
          "bad argument #2 to 'empty' (unknown dtype 'float8' (expected float32, int32, ...))")
        expect_error(function() cd.array({ 1 }, "double") end,
          "bad argument #2 to 'array' (unknown dtype 'double' (expected float32, int32, ...))")
      end)
    end)

    describe("shapes", function()
      it("an integer is a 1-d shape", function()
        local a = cd.empty(5)
        assert.are.same({ 5 }, a.shape)
        assert.are.equal(1, a.ndim)
        assert.are.equal(5, a.size)
        assert.are.equal(5, #a)
      end)

      it("a table gives N-d arrays", function()
        local a = cd.empty({ 2, 3, 4 }, "int16")
        assert.are.same({ 2, 3, 4 }, a.shape)
        assert.are.equal(3, a.ndim)
        assert.are.equal(24, a.size)
        assert.are.equal(24, #a)
        assert.are.equal(48, a.nbytes)
      end)

      it("may have a zero dimension", function()
        local a = cd.zeros({ 3, 0, 2 })
        assert.are.same({ 3, 0, 2 }, a.shape)
        assert.are.equal(0, a.size)
        assert.are.equal(0, a.nbytes)
        assert.are.same({ {}, {}, {} }, a:totable())
        assert.are.equal(0, cd.empty(0).size)
      end)

      it("an empty table is a 0-d array of one element", function()
        local a = cd.full({}, 7, "int32")
        assert.are.equal(0, a.ndim)
        assert.are.equal(1, a.size)
        assert.are.same({}, a.shape)
        assert.are.equal(7, a[1])
        assert.are.equal(7, a:totable())
      end)

      it("shape is a fresh table", function()
        local a = cd.empty({ 2, 3 })
        a.shape[1] = 99
        assert.are.same({ 2, 3 }, a.shape)
        assert.is_false(rawequal(a.shape, a.shape))
      end)

      it("reject negative and fractional sizes", function()
        expect_error(function() cd.empty(-1) end, "bad argument #1 to 'empty' (size must not be negative, got -1)")
        expect_error(function() cd.empty(2.5) end, "bad argument #1 to 'empty' (size must be an integer, got 2.5)")
        expect_error(function() cd.zeros({ 2, -1 }) end,
          "bad argument #1 to 'zeros' (dimension 2 must be a non-negative integer, got -1)")
        expect_error(function() cd.zeros({ 2, "x" }) end,
          "bad argument #1 to 'zeros' (dimension 2 must be a non-negative integer, got x)")
      end)

      it("reject a shape that is neither integer nor table", function()
        expect_error(function() cd.empty("4") end,
          "bad argument #1 to 'empty' (integer or table shape expected, got string)")
      end)

      it("allow at most 8 dimensions", function()
        assert.are.equal(8, cd.empty({ 1, 1, 1, 1, 1, 1, 1, 2 }).ndim)
        expect_error(function() cd.empty({ 1, 1, 1, 1, 1, 1, 1, 1, 1 }) end,
          "bad argument #1 to 'empty' (at most 8 dimensions, got 9)")
      end)

      it("reject a size that overflows", function()
        expect_error(function() cd.empty(2^62) end, "bad argument #1 to 'empty' (array is too large)")
        expect_error(function() cd.empty({ 2^31, 2^31, 2^31 }, "f64") end,
          "bad argument #1 to 'empty' (array is too large)")
      end)
    end)

    describe("creation", function()
      it("zeros and ones", function()
        assert.are.same({ 0, 0, 0 }, cd.zeros(3, "int32"):totable())
        assert.are.same({ { 1, 1 }, { 1, 1 } }, cd.ones({ 2, 2 }):totable())
        assert.are.same({ true, true }, cd.ones(2, "bool"):totable())
        assert.are.same({ false, false }, cd.zeros(2, "bool"):totable())
      end)

      it("full fills with the value, checked against the dtype", function()
        assert.are.same({ 7, 7, 7 }, cd.full(3, 7, "i16"):totable())
        assert.are.same({ { 1.5, 1.5 } }, cd.full({ 1, 2 }, 1.5):totable())
        assert.are.same({ -2, -2 }, cd.full(2, -2, "float64", { device = "cpu" }):totable())
        expect_error(function() cd.full(3, 300, "i8") end, "bad argument #2 to 'full' (value 300 out of range for int8)")
        expect_error(function() cd.full(3, 1, "nope") end,
          "bad argument #3 to 'full' (unknown dtype 'nope' (expected float32, int32, ...))")
        expect_error(function() cd.full(3) end, "bad argument #2 to 'full' (value expected)")
      end)

      it("full names the shape as argument #1", function()
        expect_error(function() cd.full(-1, 0) end, "bad argument #1 to 'full' (size must not be negative, got -1)")
      end)

      it("array from a flat table", function()
        local a = cd.array({ 1, 2, 3, 4 })
        assert.are.same({ 4 }, a.shape)
        assert.are.same({ 1, 2, 3, 4 }, a:totable())
        assert.are.equal("float32", a.dtype)
      end)

      it("array from nested tables takes their shape", function()
        local a = cd.array({ { 1, 2, 3 }, { 4, 5, 6 } }, "int32")
        assert.are.same({ 2, 3 }, a.shape)
        assert.are.same({ { 1, 2, 3 }, { 4, 5, 6 } }, a:totable())
        local b = cd.array({ { { 1 }, { 2 } }, { { 3 }, { 4 } } }, "u8")
        assert.are.same({ 2, 2, 1 }, b.shape)
      end)

      it("array from a string of raw bytes", function()
        local a = cd.array(string.pack("<i4i4i4", 5, -6, 7), "int32")
        assert.are.same({ 5, -6, 7 }, a:totable())
        assert.are.same({ 0x41, 0x42 }, cd.array("AB", "uint8"):totable())
        expect_error(function() cd.array("abc", "i32") end,
          "bad argument #1 to 'array' (string of 3 bytes is not a whole number of int32)")
      end)

      it("array from an empty table is empty", function()
        local a = cd.array({})
        assert.are.same({ 0 }, a.shape)
        assert.are.equal(0, a.size)
      end)

      it("array rejects a number beside a nested row", function()
        expect_error(function() cd.array({ 1, { 2, 3 } }) end,
          "bad argument #1 to 'array' (ragged nested table (row 2 differs from row 1))")
      end)

      it("array rejects ragged tables and bad elements", function()
        expect_error(function() cd.array({ { 1, 2 }, { 3 } }) end,
          "bad argument #1 to 'array' (ragged nested table (row 2 differs from row 1))")
        expect_error(function() cd.array({ { 1, 2 }, 3 }) end,
          "bad argument #1 to 'array' (ragged nested table (row 2 differs from row 1))")
        expect_error(function() cd.array({ 1, "x" }) end,
          "bad argument #1 to 'array' (element 2: number expected, got string)")
        expect_error(function() cd.array({ 1, 2, 256 }, "u8") end,
          "bad argument #1 to 'array' (element 3: value 256 out of range for uint8)")
        expect_error(function() cd.array(42) end, "bad argument #1 to 'array' (table expected, got number)")
      end)

      it("array takes options after the dtype or in its place", function()
        assert.are.equal("cpu", cd.array({ 1 }, { device = "cpu" }).device.alias)
        assert.are.equal("int8", cd.array({ 1 }, "i8", { device = "cpu" }).dtype)
      end)

      it("*_like copy dtype, shape and device", function()
        local a = cd.array({ { 1, 2 }, { 3, 4 } }, "int16")
        local e, z, f = cd.empty_like(a), cd.zeros_like(a), cd.full_like(a, 9)
        for _, b in ipairs({ e, z, f }) do
          assert.are.equal("int16", b.dtype)
          assert.are.same({ 2, 2 }, b.shape)
          assert.are.equal(a.device, b.device)
        end
        assert.are.same({ { 0, 0 }, { 0, 0 } }, z:totable())
        assert.are.same({ { 9, 9 }, { 9, 9 } }, f:totable())
        assert.are.same({ { 1, 2 }, { 3, 4 } }, a:totable())
        expect_error(function() cd.full_like(a, "x") end, "bad argument #2 to 'full_like' (number expected, got string)")
      end)

      it("new_* take dtype and device from the array and a new shape", function()
        local a = cd.array({ 1, 2, 3 }, "uint16")
        local e, z, f = a:new_empty({ 2, 2 }), a:new_zeros(5), a:new_full({ 1, 2 }, 4)
        assert.are.equal("uint16", e.dtype)
        assert.are.same({ 2, 2 }, e.shape)
        assert.are.same({ 0, 0, 0, 0, 0 }, z:totable())
        assert.are.same({ { 4, 4 } }, f:totable())
        assert.are.equal(a.device, f.device)
        expect_error(function() a:new_full(2, -1) end, "bad argument #2 to 'new_full' (value -1 out of range for uint16)")
      end)

      it("arrays live on the default device unless told otherwise", function()
        assert.are.equal(cd.get_device(), cd.empty(1).device)
        assert.are.equal(cd.device("cpu"), cd.empty(1, { device = "cpu" }).device)
      end)
    end)

    describe("fields", function()
      it("report dtype, shape, sizes, device and address", function()
        local a = cd.zeros({ 2, 5 }, "float64", { device = dev })
        assert.are.equal("float64", a.dtype)
        assert.are.equal(2, a.ndim)
        assert.are.equal(10, a.size)
        assert.are.equal(80, a.nbytes)
        assert.are.equal(8, a.itemsize)
        assert.are.equal(cd.device(dev), a.device)
        assert.is_false(a.is_pinned)
        assert.are.equal("integer", math.type(a.ptr))
        assert.are_not.equal(0, a.ptr)
        assert.are.equal("Array", cd.type(a))
      end)

      it("reject unknown fields and assignments to fields", function()
        local a = cd.empty(2)
        expect_error(function() return a.bogus end, "Array has no field or method 'bogus'")
        expect_error(function() a.size = 3 end, "cannot assign to field 'size' of an Array")
      end)
    end)

    describe("element access", function()
      it("is 1-based", function()
        local a = cd.array({ 10, 20, 30 }, "int32")
        assert.are.equal(10, a[1])
        assert.are.equal(30, a[3])
        a[2] = 25
        assert.are.same({ 10, 25, 30 }, a:totable())
        assert.are.equal("integer", math.type(a[1]))
        assert.are.equal("float", math.type(cd.array({ 1 })[1]))
      end)

      it("is bounds-checked", function()
        local a = cd.zeros(4)
        expect_error(function() return a[0] end, "bad argument #2 to 'index' (index 0 out of range 1..4)")
        expect_error(function() return a[5] end, "bad argument #2 to 'index' (index 5 out of range 1..4)")
        expect_error(function() return a[-5] end, "bad argument #2 to 'index' (index -5 out of range 1..4)")
        expect_error(function() return a[1.5] end, "bad argument #2 to 'index' (index 1.5 out of range 1..4)")
        expect_error(function() a[5] = 1 end, "bad argument #2 to 'newindex' (index 5 out of range 1..4)")
        expect_error(function() a[0] = 1 end, "bad argument #2 to 'newindex' (index 0 out of range 1..4)")
      end)

      it("a[i] of an N-d array is row i, a view", function()
        local a = cd.array({ { 1, 2, 3 }, { 4, 5, 6 } }, "int32")
        local row = a[2]
        assert.are.equal("Array", cd.type(row))
        assert.are.same({ 3 }, row.shape)
        assert.are.same({ 4, 5, 6 }, row:totable())
        assert.are.equal(6, a[2][3])
        a[2][3] = 60
        assert.are.same({ { 1, 2, 3 }, { 4, 5, 60 } }, a:totable())
        expect_error(function() return a[3] end, "bad argument #2 to 'index' (index 3 out of range 1..2)")
        expect_error(function() a[1] = 5 end, "cannot assign a row of a 2-d array (use a[i]:fill(v) or copy_from)")
      end)

      it("checks integer ranges", function()
        local i8, u8 = cd.zeros(2, "int8"), cd.zeros(2, "uint8")
        i8[1], i8[2] = 127, -128
        assert.are.same({ 127, -128 }, i8:totable())
        u8[1] = 255
        assert.are.equal(255, u8[1])
        expect_error(function() i8[1] = 300 end, "bad argument #3 to 'newindex' (value 300 out of range for int8)")
        expect_error(function() i8[1] = -129 end, "bad argument #3 to 'newindex' (value -129 out of range for int8)")
        expect_error(function() u8[1] = -1 end, "bad argument #3 to 'newindex' (value -1 out of range for uint8)")
        expect_error(function() u8[1] = 256 end, "bad argument #3 to 'newindex' (value 256 out of range for uint8)")
        local i32 = cd.zeros(1, "int32")
        expect_error(function() i32[1] = 2147483648 end,
          "bad argument #3 to 'newindex' (value 2147483648 out of range for int32)")
        local u16 = cd.zeros(1, "uint16")
        expect_error(function() u16[1] = 65536 end, "bad argument #3 to 'newindex' (value 65536 out of range for uint16)")
        assert.are.same({ 127, -128 }, i8:totable())   -- a refused value writes nothing
      end)

      it("refuses non-integral numbers for integer dtypes", function()
        local a = cd.zeros(1, "int32")
        local nan = 0 / 0
        expect_error(function() a[1] = nan end,
          ("bad argument #3 to 'newindex' (number %s has no int32 representation)"):format(tostring(nan)))
        expect_error(function() a[1] = 1.5 end, "bad argument #3 to 'newindex' (number 1.5 has no int32 representation)")
        expect_error(function() a[1] = math.huge end,
          ("bad argument #3 to 'newindex' (number %s has no int32 representation)"):format(tostring(math.huge)))
        a[1] = 3.0
        assert.are.equal(3, a[1])
        assert.are.equal("integer", math.type(a[1]))
      end)

      it("refuses non-numbers", function()
        local a = cd.zeros(1)
        expect_error(function() a[1] = "1" end, "bad argument #3 to 'newindex' (number expected, got string)")
        expect_error(function() a[1] = true end, "bad argument #3 to 'newindex' (number expected, got boolean)")
        expect_error(function() a[1] = nil end, "bad argument #3 to 'newindex' (number expected, got nil)")
      end)

      it("bool arrays hold booleans, one byte each", function()
        local a = cd.array({ true, false, true }, "bool")
        assert.are.equal(1, a.itemsize)
        assert.are.equal(3, a.nbytes)
        assert.are.same({ true, false, true }, a:totable())
        assert.are.same({ 1, 0, 1 }, a:view("u8"):totable())
        a[2] = true
        a[1] = 0
        assert.are.same({ false, true, true }, a:totable())
        expect_error(function() a[1] = 2 end, "bad argument #3 to 'newindex' (boolean expected, got number)")
        expect_error(function() a[1] = "true" end, "bad argument #3 to 'newindex' (boolean expected, got string)")
      end)

      it("float16 rounds to nearest", function()
        local a = cd.zeros(5, "float16")
        a[1] = 1 / 3
        a[2] = 65504
        a[3] = 1e5
        a[4] = -2.5
        a[5] = 2^-24
        assert.are.equal(0.333251953125, a[1])
        assert.are.equal(65504, a[2])
        assert.are.equal(math.huge, a[3])
        assert.are.equal(-2.5, a[4])
        assert.are.equal(2^-24, a[5])
        assert.are.same({ 0.333251953125, 65504, math.huge, -2.5, 2^-24 }, a:totable())
        assert.are.equal(2, a.nbytes / a.size)
        local nan = cd.full(1, 0 / 0, "f16")[1]
        assert.is_true(nan ~= nan)
      end)

      it("float32 rounds, float64 keeps every bit", function()
        assert.are.equal(0.3333333432674408, cd.array({ 1 / 3 }, "f32")[1])
        assert.are.equal(1 / 3, cd.array({ 1 / 3 }, "f64")[1])
      end)

      it("int64 holds both extremes", function()
        local a = cd.array({ math.mininteger, math.maxinteger, -1 }, "int64")
        assert.are.same({ math.mininteger, math.maxinteger, -1 }, a:totable())
        assert.are.equal("integer", math.type(a[2]))
        expect_error(function() a[1] = 2^63 end,
          ("bad argument #3 to 'newindex' (number %s has no int64 representation)"):format(tostring(2^63)))
      end)

      it("uint64 holds values above 2^63, read back as the Lua integers of their 64 bits", function()
        local a = cd.zeros(3, "uint64")
        a[1] = math.maxinteger
        a[2] = 2^63
        a[3] = 2^63 + 4096
        assert.are.equal(math.maxinteger, a[1])
        assert.are.equal("integer", math.type(a[1]))
        assert.are.equal(math.mininteger, a[2])
        assert.are.equal("integer", math.type(a[2]))
        assert.are.equal(math.mininteger + 4096, a[3])
        assert.are.same({ math.maxinteger, math.mininteger, math.mininteger + 4096 }, a:totable())
        assert.are.equal("Array(uint64[3] on " .. a.device.alias .. ": {9223372036854775807, 9223372036854775808, 9223372036854779904})",
          tostring(a))
        assert.are.same({ 0, 0, 0, 0, 0, 0, 0, 0x80 }, a:view("u8"):slice(9, 16):totable())
        expect_error(function() a[1] = -1 end, "bad argument #3 to 'newindex' (value -1 out of range for uint64)")
        expect_error(function() a[1] = 2^64 end,
          ("bad argument #3 to 'newindex' (number %s has no uint64 representation)"):format(tostring(2^64)))
      end)
    end)

    describe("totable", function()
      it("nests by shape", function()
        local a = cd.array({ { { 1, 2 }, { 3, 4 } }, { { 5, 6 }, { 7, 8 } } }, "int8")
        assert.are.same({ { { 1, 2 }, { 3, 4 } }, { { 5, 6 }, { 7, 8 } } }, a:totable())
      end)

      it("returns a fresh table", function()
        local a = cd.array({ 1, 2 })
        local t = a:totable()
        t[1] = 99
        assert.are.same({ 1, 2 }, a:totable())
      end)
    end)

    describe("printing", function()
      it("shows dtype, shape, device and values", function()
        assert.are.equal(on("Array(float32[4] on cpu: {1, 2, 3, 4})"), tostring(cd.array({ 1, 2, 3, 4 })))
        assert.are.equal(on("Array(int32[2,3] on cpu: {{0, 0, 0}, {0, 0, 0}})"), tostring(cd.zeros({ 2, 3 }, "int32")))
        assert.are.equal(on("Array(bool[2] on cpu: {true, false})"), tostring(cd.array({ true, false }, "bool")))
        assert.are.equal(on("Array(float32[2] on cpu: {1.5, -0.25})"), cd.array({ 1.5, -0.25 }):tostring())
      end)

      it("prints floats with the precision of their dtype", function()
        assert.are.equal(on("Array(float32[1] on cpu: {0.333333})"), tostring(cd.array({ 1 / 3 }, "f32")))
        assert.are.equal(on("Array(float64[1] on cpu: {0.3333333333})"), tostring(cd.array({ 1 / 3 }, "f64")))
        assert.are.equal(on("Array(float16[1] on cpu: {0.333252})"), tostring(cd.array({ 1 / 3 }, "f16")))
      end)

      it("prints integer extremes exactly", function()
        assert.are.equal(on("Array(int64[2] on cpu: {-9223372036854775808, 9223372036854775807})"),
          tostring(cd.array(string.pack("<i8i8", math.mininteger, math.maxinteger), "i64")))
      end)

      it("truncates long dimensions with ...", function()
        assert.are.equal(on("Array(float32[7] on cpu: {1, 2, 3, 4, 5, 6, 7})"), tostring(cd.array(range(7))))
        assert.are.equal(on("Array(float32[8] on cpu: {1, 2, 3, ..., 6, 7, 8})"), tostring(cd.array(range(8))))
        assert.are.equal(on("Array(int32[1000] on cpu: {1, 2, 3, ..., 998, 999, 1000})"),
          tostring(cd.array(range(1000), "int32")))
        local rows = {}
        for i = 1, 10 do rows[i] = { i, 10 * i } end
        assert.are.equal(on("Array(int8[10,2] on cpu: {{1, 10}, {2, 20}, {3, 30}, ..., {8, 80}, {9, 90}, {10, 100}})"),
          tostring(cd.array(rows, "i8")))
      end)

      it("prints a 0-d array as its value", function()
        assert.are.equal(on("Array(float32[] on cpu: 2.5)"), tostring(cd.full({}, 2.5)))
      end)

      it("prints an empty array with its (empty) values", function()
        assert.are.equal(on("Array(float32[0] on cpu: {})"), tostring(cd.array({})))
        assert.are.equal(on("Array(int32[2,0] on cpu: {{}, {}})"), tostring(cd.empty({ 2, 0 }, "int32")))
      end)

      it("prints a freed array as Array(freed)", function()
        local a = cd.zeros(2)
        a:free()
        assert.are.equal("Array(freed)", tostring(a))
        assert.are.equal("Array(freed)", a:tostring())
      end)
    end)

    describe("copies", function()
      it("cd.copy copies everything by default and returns dst", function()
        local src, dst = cd.array({ 1, 2, 3 }), cd.zeros(3)
        assert.is_true(rawequal(dst, cd.copy(dst, src)))
        assert.are.same({ 1, 2, 3 }, dst:totable())
      end)

      it("cd.copy copies into a larger destination", function()
        local dst = cd.zeros(5, "int32")
        cd.copy(dst, cd.array({ 7, 8 }, "int32"))
        assert.are.same({ 7, 8, 0, 0, 0 }, dst:totable())
      end)

      it("cd.copy takes count and offsets in elements", function()
        local src, dst = cd.array({ 1, 2, 3, 4 }, "int32"), cd.zeros(6, "int32")
        cd.copy(dst, src, { count = 2, dst_offset = 1, src_offset = 2 })
        assert.are.same({ 0, 3, 4, 0, 0, 0 }, dst:totable())
        cd.copy(dst, src, { src_offset = 3 })
        assert.are.same({ 4, 3, 4, 0, 0, 0 }, dst:totable())
        cd.copy(dst, src, { count = 0 })
        assert.are.same({ 4, 3, 4, 0, 0, 0 }, dst:totable())
      end)

      it("cd.copy accepts a table or a string as the source", function()
        local dst = cd.zeros(4, "int16")
        cd.copy(dst, { 5, 6 }, { dst_offset = 2 })
        assert.are.same({ 0, 0, 5, 6 }, dst:totable())
        cd.copy(dst, string.pack("<i2i2i2i2", 1, 2, 3, 4))
        assert.are.same({ 1, 2, 3, 4 }, dst:totable())
      end)

      it("cd.copy refuses a destination that is too small", function()
        expect_error(function() cd.copy(cd.empty(1024), cd.empty(4096)) end,
          "bad argument #2 to 'copy' (array of 1024 float32 cannot hold 4096 elements)")
        expect_error(function() cd.copy(cd.empty(4), cd.empty(4), { dst_offset = 2 }) end,
          "bad argument #2 to 'copy' (array of 2 float32 cannot hold 4 elements)")
      end)

      it("cd.copy refuses a range past the end of the source", function()
        expect_error(function() cd.copy(cd.empty(8), cd.empty(4), { src_offset = 3, count = 2 }) end,
          "bad argument #2 to 'copy' (source of 4 elements has no elements 4 to 5)")
      end)

      it("cd.copy refuses mismatched dtypes", function()
        expect_error(function() cd.copy(cd.empty(4), cd.empty(4, "int32")) end,
          "bad argument #2 to 'copy' (dtype mismatch: int32 into float32 (convert the source first: src:astype(\"float32\")))")
      end)

      it("cd.copy checks its options", function()
        local a, b = cd.empty(4), cd.empty(4)
        expect_error(function() cd.copy(a, b, { cnt = 1 }) end,
          "bad argument #3 to 'copy' (unknown option 'cnt' (expected count, dst_offset, src_offset, stream))")
        expect_error(function() cd.copy(a, b, { count = -1 }) end,
          "bad argument #3 to 'copy' ('count' must be a non-negative integer)")
        expect_error(function() cd.copy(a, b, { dst_offset = 0.5 }) end,
          "bad argument #3 to 'copy' ('dst_offset' must be a non-negative integer)")
        expect_error(function() cd.copy(a, 5) end, "bad argument #2 to 'copy' (Array, table or string expected, got number)")
      end)

      it("copy_from needs exactly as many elements and returns the array", function()
        local a = cd.zeros(4)
        assert.is_true(rawequal(a, a:copy_from({ 1, 2, 3, 4 })))
        assert.are.same({ 1, 2, 3, 4 }, a:totable())
        a:copy_from(cd.array({ 4, 3, 2, 1 }))
        assert.are.same({ 4, 3, 2, 1 }, a:totable())
        a:copy_from(string.pack("<ffff", 0.5, 1.5, 2.5, 3.5))
        assert.are.same({ 0.5, 1.5, 2.5, 3.5 }, a:totable())
        a:copy_from({ { 9, 8 }, { 7, 6 } })
        assert.are.same({ 9, 8, 7, 6 }, a:totable())
        expect_error(function() a:copy_from({ 1, 2, 3 }) end,
          "bad argument #1 to 'copy_from' (size mismatch: the source has 3 elements, the array 4)")
        expect_error(function() a:copy_from(cd.zeros(5)) end,
          "bad argument #1 to 'copy_from' (size mismatch: the source has 5 elements, the array 4)")
        expect_error(function() a:copy_from(cd.zeros(4, "f64")) end,
          "bad argument #1 to 'copy_from' (dtype mismatch: float64 into float32 (convert the source first: src:astype(\"float32\")))")
        expect_error(function() a:copy_from({ 1, 2, 3, 4 }, { strm = 1 }) end,
          "bad argument #2 to 'copy_from' (unknown option 'strm' (expected stream))")
      end)

      it("copy_from a table checks each element", function()
        local a = cd.zeros(2, "uint8")
        expect_error(function() a:copy_from({ 1, -1 }) end,
          "bad argument #1 to 'copy_from' (element 2: value -1 out of range for uint8)")
      end)

      it("to() returns the array itself when it is already there", function()
        local a = cd.array({ 1, 2 })
        assert.is_true(rawequal(a, a:to(dev)))
        assert.is_true(rawequal(a, a:to(cd.device(dev))))
        expect_error(function() a:to(dev, { blok = 1 }) end,
          "bad argument #2 to 'to' (unknown option 'blok' (expected stream))")
        expect_error(function() a:to("nowhere") end, "bad argument #1 to 'to' (no device 'nowhere' ("
          .. select(2, pcall(cd.device, "nowhere")):match("%(no device 'nowhere' %((.*)%)%)$") .. "))")
      end)
    end)

    describe("views", function()
      it("slice is inclusive and shares memory", function()
        local a = cd.array(range(6), "int32")
        local s = a:slice(2, 4)
        assert.are.same({ 2, 3, 4 }, s:totable())
        s[1] = 20
        assert.are.equal(20, a[2])
        a[4] = 40
        assert.are.equal(40, s[3])
      end)

      it("slice counts negative positions from the end", function()
        local a = cd.array(range(6), "int32")
        assert.are.same({ 5, 6 }, a:slice(-2, -1):totable())
        assert.are.same({ 3, 4, 5, 6 }, a:slice(3):totable())
        assert.are.same({ 6 }, a:slice(-1):totable())
        assert.are.same({ 1, 2, 3, 4, 5, 6 }, a:slice(1, -1):totable())
      end)

      it("slice may be empty", function()
        local s = cd.array(range(6)):slice(4, 3)
        assert.are.equal(0, s.size)
      end)

      it("slice rejects positions out of range", function()
        local a = cd.array(range(6))
        expect_error(function() a:slice(0, 1) end, "bad argument #1 to 'slice' (index 0 out of range 1..6)")
        expect_error(function() a:slice(8) end, "bad argument #1 to 'slice' (index 8 out of range 1..6)")
        expect_error(function() a:slice(1, 7) end, "bad argument #2 to 'slice' (index 7 out of range 0..6)")
        expect_error(function() a:slice(3, 1) end, "bad argument #2 to 'slice' (index 1 out of range 2..6)")
        expect_error(function() a:slice(1.5) end, "bad argument #1 to 'slice' (integer expected, got number)")
      end)

      it("slice refuses a 0-d array", function()
        expect_error(function() cd.full({}, 1):slice(1) end, "cannot slice a 0-d array")
      end)

      it("slice of an N-d array takes rows", function()
        local a = cd.array({ { 1, 2 }, { 3, 4 }, { 5, 6 } }, "int32")
        local s = a:slice(2, 3)
        assert.are.same({ 2, 2 }, s.shape)
        assert.are.same({ { 3, 4 }, { 5, 6 } }, s:totable())
      end)

      it("reshape keeps the elements, infers -1 and shares memory", function()
        local a = cd.array(range(6), "int32")
        local r = a:reshape({ 2, 3 })
        assert.are.same({ { 1, 2, 3 }, { 4, 5, 6 } }, r:totable())
        assert.are.same({ 3, 2 }, a:reshape({ -1, 2 }).shape)
        assert.are.same({ 6 }, r:reshape(6).shape)
        assert.are.same({ 1, 6, 1 }, a:reshape({ 1, -1, 1 }).shape)
        r[2][1] = 40
        assert.are.equal(40, a[4])
      end)

      it("reshape rejects a shape of another size", function()
        local a = cd.array(range(6))
        expect_error(function() a:reshape({ 4, 2 }) end,
          "bad argument #1 to 'reshape' (cannot reshape 6 elements into a shape of 8)")
        expect_error(function() a:reshape({ -1, 4 }) end,
          "bad argument #1 to 'reshape' (cannot reshape 6 elements into a shape of 4)")
        expect_error(function() a:reshape({ -1, -1 }) end, "bad argument #1 to 'reshape' (bad dimension 2)")
      end)

      it("view reinterprets the bytes and scales the last dimension", function()
        local a = cd.array({ 1, -2 }, "float32")
        local u = a:view("uint32")
        assert.are.same({ 0x3f800000, 0xc0000000 }, u:totable())
        assert.are.same({ 8 }, a:view("u8").shape)
        assert.are.same({ 1 }, a:view("f64").shape)
        u[1] = 0x40400000
        assert.are.equal(3, a[1])
        assert.are.same({ 2, 4 }, cd.zeros({ 2, 2 }, "int32"):view("int16").shape)
        expect_error(function() cd.zeros(3, "f32"):view("f64") end,
          "bad argument #1 to 'view' (last dimension of 12 bytes is not a whole number of float64)")
      end)

      local function churn(n, dtype)
        -- allocate and fill arrays of the same size, so freed memory would be reused and overwritten
        local keep = {}
        for i = 1, 16 do keep[i] = cd.full(n, 99, dtype) end
        return keep
      end

      it("a view keeps the memory alive after its base is freed", function()
        local a = cd.array(range(64), "int32")
        local v = a:slice(3, 4)
        a:free()
        local _ = churn(64, "int32")
        assert.are.same({ 3, 4 }, v:totable())
        v[1] = 30
        assert.are.equal(30, v[1])
      end)

      it("a view keeps the memory alive after its base is collected", function()
        local v
        do
          local a = cd.array(range(64), "int32")
          v = a:reshape({ 8, 8 })[2]
        end
        collectgarbage()
        collectgarbage()
        local _ = churn(64, "int32")
        assert.are.same({ 9, 10, 11, 12, 13, 14, 15, 16 }, v:totable())
      end)

      it("freeing a view leaves the base usable", function()
        local a = cd.array(range(4), "int32")
        local v = a:slice(1, 2)
        v:free()
        assert.are.same({ 1, 2, 3, 4 }, a:totable())
      end)
    end)

    describe("fill and zero", function()
      it("fill sets every element and returns the array", function()
        local a = cd.zeros({ 2, 2 }, "int16")
        assert.is_true(rawequal(a, a:fill(3)))
        assert.are.same({ { 3, 3 }, { 3, 3 } }, a:totable())
      end)

      it("zero clears and returns the array", function()
        local a = cd.full(3, 5.5, "f64")
        assert.is_true(rawequal(a, a:zero()))
        assert.are.same({ 0, 0, 0 }, a:totable())
      end)

      it("fill of a view touches only the view", function()
        local a = cd.zeros(5, "int32")
        a:slice(2, 3):fill(9)
        assert.are.same({ 0, 9, 9, 0, 0 }, a:totable())
      end)

      it("fill takes negative values for signed dtypes", function()
        assert.are.same({ -3, -3 }, cd.zeros(2, "int16"):fill(-3):totable())
        assert.are.same({ -1.5, -1.5 }, cd.zeros(2, "float32"):fill(-1.5):totable())
      end)

      it("fill checks the value against the dtype", function()
        local a = cd.zeros(2, "int8")
        expect_error(function() a:fill(128) end, "bad argument #1 to 'fill' (value 128 out of range for int8)")
        expect_error(function() a:fill("x") end, "bad argument #1 to 'fill' (number expected, got string)")
        expect_error(function() a:fill() end, "bad argument #1 to 'fill' (value expected)")
        assert.are.same({ 0, 0 }, a:totable())
      end)
    end)

    describe("lifetime", function()
      it("free releases the memory; later use says the array is freed", function()
        local a = cd.zeros(4)
        assert.are.equal(0, select("#", a:free()))
        expect_error(function() return a[1] end, "bad argument #1 to 'index' (attempt to use a freed array)")
        expect_error(function() a[1] = 1 end, "bad argument #1 to 'newindex' (attempt to use a freed array)")
        expect_error(function() return a.size end, "bad argument #1 to 'index' (attempt to use a freed array)")
        expect_error(function() return #a end, "bad argument #1 to 'len' (attempt to use a freed array)")
        expect_error(function() a:totable() end, "bad argument #1 to 'totable' (attempt to use a freed array)")
        expect_error(function() a:fill(1) end, "bad argument #1 to 'fill' (attempt to use a freed array)")
        expect_error(function() cd.copy(cd.zeros(4), a) end, "bad argument #2 to 'copy' (attempt to use a freed array)")
        expect_error(function() cd.copy(a, cd.zeros(4)) end, "bad argument #1 to 'copy' (attempt to use a freed array)")
        expect_error(function() cd.zeros_like(a) end, "bad argument #1 to 'zeros_like' (attempt to use a freed array)")
      end)

      it("a second free is an error", function()
        local a = cd.zeros(4)
        a:free()
        expect_error(function() a:free() end, "bad argument #1 to 'free' (attempt to use a freed array)")
      end)

      it("a <close> variable frees at scope end", function()
        local kept
        do
          local a <close> = cd.zeros(4)
          kept = a
          assert.are.equal(4, a.size)
        end
        assert.are.equal("Array(freed)", tostring(kept))
      end)

      it("a <close> variable frees on error too", function()
        local kept
        pcall(function()
          local a <close> = cd.zeros(4)
          kept = a
          error("boom")
        end)
        assert.are.equal("Array(freed)", tostring(kept))
      end)

      it("the collector frees dropped arrays", function()
        local weak = setmetatable({}, { __mode = "v" })
        weak[1] = cd.zeros(1000)
        collectgarbage()
        collectgarbage()
        assert.is_nil(weak[1])
      end)
    end)
  end)
end)

describe("creation options", function()
  it("reject unknown keys", function()
    expect_error(function() cd.empty(4, { blok = 256 }) end,
      "bad argument #2 to 'empty' (unknown option 'blok' (expected device, stream, pinned, ipc, managed))")
    expect_error(function() cd.zeros(4, "f32", { blok = 256 }) end,
      "bad argument #3 to 'zeros' (unknown option 'blok' (expected device, stream, pinned, ipc, managed))")
    expect_error(function() cd.array({ 1 }, { devcie = "cpu" }) end,
      "bad argument #2 to 'array' (unknown option 'devcie' (expected device, stream, pinned, ipc, managed))")
    expect_error(function() cd.full(2, 0, "f32", { 1 }) end,
      "bad argument #4 to 'full' (option keys must be strings (expected device, stream, pinned, ipc, managed))")
  end)

  it("check the type of pinned", function()
    expect_error(function() cd.empty(4, { pinned = "yes" }) end,
      "bad option 'pinned' to 'empty' (boolean expected, got string)")
  end)

  it("name the option when device or stream is not one", function()
    expect_error(function() cd.empty(4, { device = {} }) end,
      "bad option 'device' to 'empty' (device expected (\"cpu\", \"cuda:N\", an ordinal or a Device), got table)")
    expect_error(function() cd.empty(4, { stream = 1 }) end,
      "bad option 'stream' to 'empty' (cudadev.Stream expected, got number)")
  end)

  it("stream puts the array on the stream's device", function()
    local s = cd.stream("cpu")
    local a = cd.zeros(4, { stream = s })
    assert.are.equal(cd.device("cpu"), a.device)
    assert.are.same({ 0, 0, 0, 0 }, a:totable())
  end)

  it("pinned=true without a CUDA driver gives plain host memory", function()
    assert.are.equal("false|cpu|Array(float32[4] on cpu: {0, 0, 0, 0})\nexit 0\n", helper.run_child([[
      local a = cd.zeros(4, { pinned = true })
      io.write(tostring(a.is_pinned), "|", a.device.alias, "|", tostring(a), "\n")
    ]], "CUDADEV_LIBCUDA=/nonexistent/libcuda.so.1 CUDADEV_FAKE_PINNED=0"))
  end)

  helper.gpu_it("pinned=true gives page-locked host memory when there is a driver", function()
    local a = cd.zeros(4, "int32", { pinned = true })
    assert.is_true(a.is_pinned)
    assert.are.equal(cd.device("cpu"), a.device)
    assert.are.equal("Array(int32[4] on cpu pinned: {0, 0, 0, 0})", tostring(a))
    local g = a:to("cuda:0")
    a:fill(3)
    g:copy_from(a)
    assert.are.same({ 3, 3, 3, 3 }, g:totable())
  end)

  helper.gpu_it("pinned arrays cannot live on a GPU", function()
    expect_error(function() cd.empty(4, { device = "cuda:0", pinned = true }) end,
      "bad argument #2 to 'empty' (pinned arrays live in host memory, not on cuda:0)")
  end)

  helper.gpu_it("a stream of another device is refused", function()
    local s = cd.stream("cuda:0")
    expect_error(function() cd.empty(4, { device = "cpu", stream = s }) end,
      "bad argument #2 to 'empty' (stream is on cuda:0 but the array on cpu)")
  end)
end)

describe("between host and GPU", function()
  local child = helper.run_child

  helper.gpu_it("an array outlives the stream it was last used on", function()
    assert.are.equal("0 0\nexit 0\n", child([[
      local s = cd.stream("cuda:0")
      local a = cd.zeros(1024, { device = "cuda:0", stream = s })
      local h = cd.zeros(1024, { device = "cpu" })
      cd.copy(h, a, { stream = s })
      s:synchronize()
      s:destroy()
      a:free()
      h:fill(0)
      s = cd.stream("cuda:0")
      local b = cd.zeros(1024, { device = "cuda:0", stream = s })
      s = nil
      collectgarbage(); collectgarbage()
      b:free()
      io.write(h[1], " ", cd.zeros(4, { device = "cuda:0" })[4], "\n")
      cd.synchronize()
    ]]))
  end)

  helper.gpu_it("the state closes cleanly with arrays, streams and events on a GPU", function()
    assert.are.equal("done\nexit 0\n", child([[
      local keep = {}
      for i = 1, 8 do
        local s = cd.stream("cuda:0")
        keep[#keep + 1] = s
        keep[#keep + 1] = cd.zeros(1 << 16, { device = "cuda:0", stream = s })
        keep[#keep + 1] = cd.event("cuda:0"):record(s)
        keep[#keep + 1] = cd.zeros(16, { pinned = true })
      end
      io.write("done\n")
      os.exit(0, true)
    ]]))
  end)

  -- os.exit(0, false) skips lua_close: no finalizer runs, the process ends with the driver, the staging helper
  -- threads and the pinned pool still live; os.exit(0, true) closes the state first. Both must be quiet.
  for _, close in ipairs { false, true } do
    for _, dev in ipairs { "cpu", "cuda:0" } do
      local it_ = dev == "cpu" and it or helper.gpu_it
      it_(("exits quietly with os.exit(0, %s), objects alive on %s, a staged copy made"):format(close, dev), function()
        assert.are.equal("done\nexit 0\n", child(([[
          local dev = %q
          local keep = {}
          local m = cd.compile('extern "C" __global__ void inc(float *x, int n) { '
            .. 'int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] += 1; }', { device = dev })
          local cfg = cd.launch_config { dim = 1 << 18, stream = cd.stream(dev) }
          local big = cd.zeros(1 << 18, { device = dev })
          big:copy_from(string.rep(string.pack("<f", 1.5), 1 << 18))   -- 1 MiB: staged when dev is a GPU
          m.inc(cfg, big, 1 << 18)
          keep[#keep + 1] = { m, cfg, big, cd.event(dev):record(cfg.stream), cd.zeros(16, { pinned = true }) }
          io.write("done\n")
          os.exit(0, %s)
        ]]):format(dev, close)))
      end)
    end
  end

  helper.gpu_it("prints a GPU array with its values", function()
    assert.are.equal("Array(float32[3] on cuda:0: {1, 2, 3})", tostring(cd.array({ 1, 2, 3 }, { device = "cuda:0" })))
  end)

  helper.gpu_it("to() moves data to a GPU and back", function()
    local a = cd.array({ { 1, 2 }, { 3, 4 } }, "int32")
    local g = a:to("cuda:0")
    assert.are.equal(cd.device("cuda:0"), g.device)
    assert.are.same({ 2, 2 }, g.shape)
    assert.are.equal("int32", g.dtype)
    assert.are.same({ { 1, 2 }, { 3, 4 } }, g:totable())
    assert.is_true(rawequal(g, g:to("cuda:0")))
    local h = g:to("cpu")
    assert.are.equal(cd.device("cpu"), h.device)
    assert.are.same({ { 1, 2 }, { 3, 4 } }, h:totable())
  end)

  helper.gpu_it("copies between host and GPU with offsets, element access on the GPU", function()
    local g = cd.zeros(6, "float64", { device = "cuda:0" })
    cd.copy(g, cd.array({ 1, 2, 3 }, "f64"), { dst_offset = 2 })
    assert.are.same({ 0, 0, 1, 2, 3, 0 }, g:totable())
    g[6] = 6
    assert.are.equal(6, g[6])
    local h = cd.zeros(2, "f64")
    cd.copy(h, g, { src_offset = 3, count = 2 })
    assert.are.same({ 2, 3 }, h:totable())
    local g2 = cd.empty_like(g)
    cd.copy(g2, g)
    assert.are.same(g:totable(), g2:totable())
  end)

  helper.gpu_it("fill and zero on a GPU array", function()
    local a = cd.zeros(1000, "float16", { device = "cuda:0" })
    a:fill(1 / 3)
    assert.are.equal(0.333251953125, a[1000])
    a:zero()
    assert.are.equal(0, a[1])
  end)
end)
