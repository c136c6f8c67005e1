-- Bad input (issue #7): every public function given what it must refuse: wrong types, nil, NaN and
-- infinities, huge and negative sizes, byte counts that overflow, out-of-range indices, unknown option keys,
-- freed, destroyed and stale objects, objects of another device, values given another type's metatable
-- with the debug library, compile errors, huge and NUL-containing sources, bad launch geometry. Each must
-- raise a clear error (the exact text is asserted) and never crash. Runs on the cpu device; the cases that
-- need a GPU are gpu_it.
--
-- Regression tests: a comment "was: ..." tells what the library did wrong before it was fixed. A case that
-- crashed the whole process (a segmentation fault, heap corruption) or was undefined behaviour that a plain
-- build survives (a signed overflow, memcpy to NULL) runs in a child process of its own (crash_it, ub_it), so
-- that a regression, or UBSan under `make asan`, stops the child, not busted.
local helper = require "spec.helper"
local cd = require "cudadev"

local expect_error = helper.assert_error_matches

local NAN, INF = tostring(0 / 0), tostring(1 / 0)   -- "-nan" or "nan", as this libc prints them

-- The reason a missing CUDA device gives inside "no device '...' (REASON)" on this machine.
local function no_device_text(spec)
  if spec ~= "cuda" and not spec:find("^cuda:") then return helper.unknown_device_text(spec) end
  local n = cd.device_count()
  if n == 0 then
    local _, why = cd.is_available()
    if why == "the CUDA driver reports no device" then why = "the driver reports none" end
    return ("no device '%s' (no CUDA device: %s)"):format(spec, why)
  end
  return ("no device '%s' (%d CUDA device%s: cuda:0%s)"):format(spec, n, n == 1 and "" or "s",
    n > 1 and (" to cuda:" .. (n - 1)) or "")
end

local DEVICE_EXPECTED = 'device expected ("cpu", "cuda:N", an ordinal or a Device), got '

-- Kernels used throughout, compiled once on cpu (and again after the device-reset tests).
local SRC = [[
extern "C" __global__ void k(float *x, int n)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = (float)i;
}

extern "C" __global__ void v(float4 f, double d, unsigned char u, bool b, long long ll,
                             unsigned long long ull, float *out)
{
  out[0] = f.x + f.y + f.z + f.w;
}
]]

-- The file's work is on the cpu device (a GPU host's default device is cuda:0): the default device is cpu
-- while it runs, and given back after.
local previous_device
setup(function()
  previous_device = cd.get_device()
  cd.set_device("cpu")
end)
teardown(function() cd.set_device(previous_device) end)

local mod
local function kernels()
  if mod == nil then mod = cd.compile(SRC, { device = "cpu" }) end
  return mod, mod.k, mod.v
end

-- crash_it / ub_it: `code` runs in a child lua5.4 (with `cd` loaded); the child must print `expected` (the
-- error text, position removed) and exit normally.
local function child(code)
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(("package.path = %q\npackage.cpath = %q\nlocal cd = require 'cudadev'\n"):format(package.path, package.cpath),
    "local SRC = ", ("%q"):format(SRC), "\n",
    "local function run()\n", code, "\nend\n",
    "local ok, err = pcall(run)\n",
    "if ok then print('no error') else\n",
    "  local text = type(err) == 'string' and err or tostring(err)\n",
    "  print((text:gsub('^%[string \".-\"%]:%d+: ', '', 1):gsub('^[^%s:]+:%d+: ', '', 1)))\n",
    "end\n",
    "collectgarbage(); collectgarbage()\n",
    "io.stdout:flush()\n")
  f:close()
  local p = assert(io.popen(("CUDADEV_DEVICE=cpu lua5.4 %s 2>&1"):format(path), "r"))   -- cpu, as this file
  local out = p:read("a")
  local _, how, status = p:close()
  os.remove(path)
  return out, how .. " " .. tostring(status)
end

local function child_it(name, code, expected)
  it(name, function()
    local out, how = child(code)
    assert.are.equal("exit 0", how, "the child died:\n" .. out)
    assert.are.equal(expected .. "\n", out)
  end)
end

-- `was`: how the process died before the fix
local function crash_it(name, was, code, expected)
  assert(type(was) == "string")
  child_it(name, code, expected)
end

-- undefined behaviour without a crash (a signed overflow, memcpy of 0 bytes to NULL)
local function ub_it(name, code, expected) child_it(name, code, expected) end

-- ------------------------------------------------------------------------------------------------ arrays

describe("array creation refuses", function()
  it("sizes whose byte count overflows", function()
    expect_error(function() cd.empty({ 2^40, 2^40 }) end, "bad argument #1 to 'empty' (array is too large)")
    expect_error(function() cd.zeros(math.maxinteger) end, "bad argument #1 to 'zeros' (array is too large)")
    expect_error(function() cd.ones({ 1 << 31, 1 << 31, 4 }, "f64") end, "bad argument #1 to 'ones' (array is too large)")
    expect_error(function() cd.full({ 1 << 62, 2 }, 0, "u8") end, "bad argument #1 to 'full' (array is too large)")
  end)

  it("NaN, infinite and extreme sizes", function()
    expect_error(function() cd.empty(0 / 0) end, "bad argument #1 to 'empty' (size must be an integer, got " .. NAN .. ")")
    expect_error(function() cd.zeros(1 / 0) end, "bad argument #1 to 'zeros' (size must be an integer, got " .. INF .. ")")
    expect_error(function() cd.ones(-1 / 0) end, "bad argument #1 to 'ones' (size must be an integer, got -" .. INF .. ")")
    expect_error(function() cd.empty(math.mininteger) end,
      "bad argument #1 to 'empty' (size must not be negative, got -9223372036854775808)")
    expect_error(function() cd.empty({ 3, 0 / 0 }) end,
      "bad argument #1 to 'empty' (dimension 2 must be a non-negative integer, got " .. NAN .. ")")
    expect_error(function() cd.empty({ 2, true }) end,
      "bad argument #1 to 'empty' (dimension 2 must be a non-negative integer, got true)")
    expect_error(function() cd.empty({ math.mininteger }) end,
      "bad argument #1 to 'empty' (dimension 1 must be a non-negative integer, got -9223372036854775808)")
  end)

  it("a missing shape", function()
    expect_error(function() cd.empty() end, "bad argument #1 to 'empty' (integer or table shape expected, got no value)")
    expect_error(function() cd.zeros(nil, "f32") end, "bad argument #1 to 'zeros' (integer or table shape expected, got nil)")
    expect_error(function() cd.ones(true) end, "bad argument #1 to 'ones' (integer or table shape expected, got boolean)")
  end)

  it("bad dtypes and option tables", function()
    expect_error(function() cd.zeros(4, "float128") end,
      "bad argument #2 to 'zeros' (unknown dtype 'float128' (expected float32, int32, ...))")
    expect_error(function() cd.zeros(4, "") end, "bad argument #2 to 'zeros' (unknown dtype '' (expected float32, int32, ...))")
    expect_error(function() cd.empty(4, "f32", { blok = 1 }) end,
      "bad argument #3 to 'empty' (unknown option 'blok' (expected device, stream, pinned, ipc, managed))")
    expect_error(function() cd.empty(4, { [1] = true }) end,
      "bad argument #2 to 'empty' (option keys must be strings (expected device, stream, pinned, ipc, managed))")
    expect_error(function() cd.empty(4, "f32", "cpu") end, "bad argument #3 to 'empty' (table expected, got string)")
    expect_error(function() cd.empty(4, { device = {} }) end, "bad option 'device' to 'empty' (" .. DEVICE_EXPECTED .. "table)")
    expect_error(function() cd.empty(4, { device = "cuda:99" }) end,
      "bad option 'device' to 'empty' (" .. no_device_text("cuda:99") .. ")")
    expect_error(function() cd.empty(4, { pinned = 1 }) end, "bad option 'pinned' to 'empty' (boolean expected, got number)")
    expect_error(function() cd.empty(4, { stream = 1 }) end, "bad option 'stream' to 'empty' (cudadev.Stream expected, got number)")
  end)

  it("another type of object where a stream is expected, by its type name", function()
    -- was: luaL_typename says "userdata" where luaL_typeerror would name cudadev.Event
    expect_error(function() cd.empty(4, { stream = cd.event("cpu") }) end,
      "bad option 'stream' to 'empty' (cudadev.Stream expected, got cudadev.Event)")
  end)

  it("fill values the dtype cannot hold", function()
    expect_error(function() cd.full(2) end, "bad argument #2 to 'full' (value expected)")
    expect_error(function() cd.full(2, 1 / 0, "int32") end, "bad argument #2 to 'full' (number " .. INF .. " has no int32 representation)")
    expect_error(function() cd.full(2, 0 / 0, "u16") end, "bad argument #2 to 'full' (number " .. NAN .. " has no uint16 representation)")
    expect_error(function() cd.full(2, 2^63, "int64") end,
      "bad argument #2 to 'full' (number 9.2233720368548e+18 has no int64 representation)")
    expect_error(function() cd.full(2, -1, "uint8") end, "bad argument #2 to 'full' (value -1 out of range for uint8)")
    expect_error(function() cd.full(2, math.mininteger, "i32") end,
      "bad argument #2 to 'full' (value -9223372036854775808 out of range for int32)")
    expect_error(function() cd.full(2, 0.5, "bool") end, "bad argument #2 to 'full' (boolean expected, got number)")
    expect_error(function() cd.full(2, "1", "f32") end, "bad argument #2 to 'full' (number expected, got string)")
  end)

  it("tables and strings that are no array", function()
    expect_error(function() cd.array(42) end, "bad argument #1 to 'array' (table expected, got number)")
    expect_error(function() cd.array({ 1, "x" }) end, "bad argument #1 to 'array' (element 2: number expected, got string)")
    expect_error(function() cd.array({ { 1, 2 }, { 3, {} } }, "i32") end,
      "bad argument #1 to 'array' (ragged nested table (row 2 differs from row 1))")
    expect_error(function() cd.array("abcde", "float32") end,
      "bad argument #1 to 'array' (string of 5 bytes is not a whole number of float32)")
    expect_error(function() cd.array({ { { { { { { { { 1 } } } } } } } } }) end, "bad argument #1 to 'array' (table nested too deeply)")
    expect_error(function() cd.array({ 1 }, "i8", { blok = 1 }) end,
      "bad argument #3 to 'array' (unknown option 'blok' (expected device, stream, pinned, ipc, managed))")
  end)

  crash_it("a nested table whose first row is empty, and a longer row after it",
    "table_shape pops a value it did not push when a row is empty (lua_pop after a short-circuited lua_rawgeti): the Lua stack is corrupted",
    "cd.array({ {}, { 1 } })", "bad argument #1 to 'array' (ragged nested table (row 2 differs from row 1))")

  crash_it("a nested table of empty rows (no bad input: a 2x0 array)",
    "the same stack corruption in table_shape: cd.array({ {}, {} }) dies with SIGSEGV",
    "local a = cd.array({ {}, {} }); error(table.concat(a.shape, 'x'), 0)", "2x0")

  it("options after an empty table", function()
    -- was: the same lua_pop in table_shape pops the options table: they are ignored, unknown keys too
    expect_error(function() cd.array({}, { blok = 1 }) end,
      "bad argument #2 to 'array' (unknown option 'blok' (expected device, stream, pinned, ipc, managed))")
    expect_error(function() cd.array({}, "f32", { pinned = "yes" }) end,
      "bad option 'pinned' to 'array' (boolean expected, got string)")
  end)

  it("a missing shape before a missing value, naming the shape", function()
    -- was: luaL_checkany(L, 2) runs before the shape is looked at
    expect_error(function() cd.full() end, "bad argument #1 to 'full' (integer or table shape expected, got no value)")
  end)

  -- was: memcpy(a->data, s, 0) with a->data NULL (a 0-byte array has no memory), undefined behaviour that
  -- UBSan stops at (array.c, l_array and host_from_lua)
  ub_it("an empty string as the source: an empty array, and no null pointer handed to memcpy", [[
      local a = cd.array("", "u8")
      cd.zeros(0):copy_from("")
      cd.copy(cd.zeros(0), "")
      error(("%s %d"):format(cd.type(a), #a), 0)]], "Array 0")

  it("*_like and new_* without a value to fill with", function()
    local a = cd.zeros(4)
    -- was: the new array, pushed at the value's position, is taken for the value
    expect_error(function() cd.full_like(a) end, "bad argument #2 to 'full_like' (value expected)")
    expect_error(function() a:new_full(3) end, "bad argument #2 to 'new_full' (value expected)")
  end)

  it("*_like and new_* with bad arguments", function()
    local a = cd.zeros(4)
    expect_error(function() cd.empty_like(nil) end, "bad argument #1 to 'empty_like' (cudadev.Array expected, got nil)")
    expect_error(function() cd.zeros_like({}) end, "bad argument #1 to 'zeros_like' (cudadev.Array expected, got table)")
    expect_error(function() cd.full_like(a, "x") end, "bad argument #2 to 'full_like' (number expected, got string)")
    expect_error(function() a:new_empty({ 2^40, 2^40 }) end, "bad argument #1 to 'new_empty' (array is too large)")
    expect_error(function() a:new_zeros(-1) end, "bad argument #1 to 'new_zeros' (size must not be negative, got -1)")
    expect_error(function() a:new_full(3, 1 / 0 > 0) end, "bad argument #2 to 'new_full' (number expected, got boolean)")
  end)
end)

describe("element access refuses", function()
  it("indices out of range, fractional, NaN and of other types", function()
    local a = cd.zeros(4)
    expect_error(function() return a[0] end, "bad argument #2 to 'index' (index 0 out of range 1..4)")
    expect_error(function() return a[5] end, "bad argument #2 to 'index' (index 5 out of range 1..4)")
    expect_error(function() return a[math.mininteger] end,
      "bad argument #2 to 'index' (index -9223372036854775808 out of range 1..4)")
    expect_error(function() return a[1.5] end, "bad argument #2 to 'index' (index 1.5 out of range 1..4)")
    expect_error(function() return a[0 / 0] end, "bad argument #2 to 'index' (index " .. NAN .. " out of range 1..4)")
    expect_error(function() return a[true] end, "bad argument #2 to 'index' (index true out of range 1..4)")
    expect_error(function() a[math.maxinteger] = 1 end,
      "bad argument #2 to 'newindex' (index 9223372036854775807 out of range 1..4)")
    expect_error(function() return cd.zeros(0)[1] end, "bad argument #2 to 'index' (index 1 out of range 1..0)")
  end)

  it("values the dtype cannot hold, and assignments to fields", function()
    local a = cd.zeros(2, "int64")
    expect_error(function() a[1] = "x" end, "bad argument #3 to 'newindex' (number expected, got string)")
    expect_error(function() a[1] = nil end, "bad argument #3 to 'newindex' (number expected, got nil)")
    expect_error(function() a[1] = 2^63 end, "bad argument #3 to 'newindex' (number 9.2233720368548e+18 has no int64 representation)")
    expect_error(function() a.dtype = "f64" end, "cannot assign to field 'dtype' of an Array")
    expect_error(function() return a.bogus end, "Array has no field or method 'bogus'")
  end)
end)

describe("copies refuse", function()
  it("counts and offsets that are not non-negative integers", function()
    local a, b = cd.zeros(2), cd.zeros(2)
    expect_error(function() cd.copy(a, b, { count = 0 / 0 }) end, "bad argument #3 to 'copy' ('count' must be a non-negative integer)")
    expect_error(function() cd.copy(a, b, { count = -1 }) end, "bad argument #3 to 'copy' ('count' must be a non-negative integer)")
    expect_error(function() cd.copy(a, b, { dst_offset = 1.5 }) end,
      "bad argument #3 to 'copy' ('dst_offset' must be a non-negative integer)")
    expect_error(function() cd.copy(a, b, { src_offset = math.mininteger }) end,
      "bad argument #3 to 'copy' ('src_offset' must be a non-negative integer)")
    expect_error(function() cd.copy(a, b, { cnt = 1 }) end,
      "bad argument #3 to 'copy' (unknown option 'cnt' (expected count, dst_offset, src_offset, stream))")
    expect_error(function() cd.copy(a, b, { count = 2^62 }) end,
      "bad argument #2 to 'copy' (source of 2 elements has no elements 1 to 4611686018427387904)")
  end)

  it("an offset past the end of the source", function()
    -- was: with the default count, "has no elements 4 to 3"
    expect_error(function() cd.copy(cd.zeros(2), cd.zeros(2), { src_offset = 3 }) end,
      "bad argument #3 to 'copy' ('src_offset' 3 is past the end of the source (2 elements))")
  end)

  crash_it("an offset whose sum with the count overflows (source)",
    "src_offset + count overflows int64 and passes the range check: the copy reads 4 bytes before the source (SIGSEGV)",
    "local a = cd.zeros(2); cd.copy(a, cd.full(2, 7), { src_offset = math.maxinteger, count = 1 })",
    "bad argument #3 to 'copy' ('src_offset' 9223372036854775807 is past the end of the source (2 elements))")

  crash_it("an offset whose sum with the count overflows (destination)",
    "dst_offset + count overflows int64 and passes the range check: the copy writes 4 bytes before the destination",
    "local a = cd.zeros(2); cd.copy(a, cd.full(2, 7), { dst_offset = math.maxinteger, count = 1 })",
    "bad argument #3 to 'copy' ('dst_offset' 9223372036854775807 is past the end of the destination (2 elements))")

  crash_it("a count whose sum with both offsets overflows",
    "src_offset + count and dst_offset + count both overflow int64 and pass the range checks: a copy of 2^63 - 1 "
      .. "elements (SIGSEGV)",
    "cd.copy(cd.zeros(2), cd.zeros(2), { src_offset = 1, dst_offset = 1, count = math.maxinteger })",
    "bad argument #2 to 'copy' (source of 2 elements has no elements 2 to 9223372036854775808)")

  it("sources that are no array", function()
    local a = cd.zeros(4)
    expect_error(function() cd.copy(a, 5) end, "bad argument #2 to 'copy' (Array, table or string expected, got number)")
    expect_error(function() cd.copy(5, a) end, "bad argument #1 to 'copy' (cudadev.Array expected, got number)")
    expect_error(function() a:copy_from(nil) end, "bad argument #1 to 'copy_from' (Array, table or string expected, got nil)")
    expect_error(function() a:copy_from("abc") end, "bad argument #1 to 'copy_from' (string of 3 bytes is not a whole number of float32)")
    expect_error(function() a:copy_from({ 1, 2, 3, {} }) end, "bad argument #1 to 'copy_from' (size mismatch: the source has 3 elements, the array 4)")
    expect_error(function() a:to() end, "bad argument #1 to 'to' (" .. DEVICE_EXPECTED .. "no value)")
    expect_error(function() a:to("cpu", { strem = 1 }) end, "bad argument #2 to 'to' (unknown option 'strem' (expected stream))")
  end)

  it("a stream option that is no stream, naming the option", function()
    local a, b = cd.zeros(2), cd.zeros(2)
    -- was: the option is reported as an argument at its stack slot (#4, #3)
    expect_error(function() cd.copy(a, b, { stream = 5 }) end, "bad option 'stream' to 'copy' (cudadev.Stream expected, got number)")
    expect_error(function() a:copy_from(b, { stream = cd.event("cpu") }) end,
      "bad option 'stream' to 'copy_from' (cudadev.Stream expected, got cudadev.Event)")
    expect_error(function() a:to("cpu", { stream = true }) end, "bad option 'stream' to 'to' (cudadev.Stream expected, got boolean)")
  end)
end)

describe("views refuse", function()
  it("bad slices", function()
    local a = cd.zeros(4)
    expect_error(function() a:slice(0) end, "bad argument #1 to 'slice' (index 0 out of range 1..4)")
    expect_error(function() a:slice(1, 9) end, "bad argument #2 to 'slice' (index 9 out of range 0..4)")
    expect_error(function() a:slice(math.maxinteger) end, "bad argument #1 to 'slice' (index 9223372036854775807 out of range 1..4)")
    expect_error(function() a:slice(1.5) end, "bad argument #1 to 'slice' (integer expected, got number)")
    expect_error(function() a:slice("x") end, "bad argument #1 to 'slice' (integer expected, got string)")
    expect_error(function() cd.zeros({}):slice(1) end, "cannot slice a 0-d array")
  end)

  it("bad reshapes and views", function()
    local a = cd.zeros(4)
    expect_error(function() a:reshape({ -1, -1 }) end, "bad argument #1 to 'reshape' (bad dimension 2)")
    expect_error(function() a:reshape({ 2, 0 / 0 }) end, "bad argument #1 to 'reshape' (bad dimension 2)")
    expect_error(function() a:reshape("x") end, "bad argument #1 to 'reshape' (table expected, got string)")
    expect_error(function() a:reshape({ 1, 1, 1, 1, 1, 1, 1, 1, 4 }) end, "bad argument #1 to 'reshape' (too many dimensions)")
    expect_error(function() a:reshape({ 0, -1 }) end, "bad argument #1 to 'reshape' (cannot reshape 4 elements into a shape of 0)")
    expect_error(function() cd.zeros(3, "u8"):view("f32") end,
      "bad argument #1 to 'view' (last dimension of 3 bytes is not a whole number of float32)")
    expect_error(function() a:view(5) end, "bad argument #1 to 'view' (unknown dtype '5' (expected float32, int32, ...))")
  end)

  -- was: add_elem reads floats through a cast pointer, a misaligned load (undefined behaviour, which UBSan
  -- stops at) for a view that starts inside an element
  ub_it("a view of floats that starts inside an element prints", [[
      local v = cd.zeros(16, "u8"):slice(2, 9):view("f64")
      error(tostring(v), 0)]], "Array(float64[1] on cpu: {0})")

  -- was: the product overflows int64 (undefined behaviour; 2^80 wraps to 0 here) and the message names the
  -- wrapped count, "cannot reshape 4 elements into a shape of 0"
  ub_it("a shape whose element count overflows", "cd.zeros(4):reshape({ 2^40, 2^40 })",
    "bad argument #1 to 'reshape' (array is too large)")

  crash_it("a shape whose element count wraps around to the array's size",
    "4 * (2^62 + 1) wraps to 4, so the view is accepted with 2^62 + 1 columns: v[2][100000] = 5 writes far out of bounds",
    "local v = cd.zeros(4):reshape({ 4, (1 << 62) + 1 }); v[2][100000] = 5",
    "bad argument #1 to 'reshape' (array is too large)")
end)

describe("freed arrays", function()
  it("refuse every use, by name", function()
    local _, k = kernels()
    local a = cd.zeros(4)
    a:free()
    expect_error(function() a:free() end, "bad argument #1 to 'free' (attempt to use a freed array)")
    expect_error(function() return #a end, "bad argument #1 to 'len' (attempt to use a freed array)")
    expect_error(function() return a.size end, "bad argument #1 to 'index' (attempt to use a freed array)")
    expect_error(function() a[1] = 1 end, "bad argument #1 to 'newindex' (attempt to use a freed array)")
    expect_error(function() a:view("u8") end, "bad argument #1 to 'view' (attempt to use a freed array)")
    expect_error(function() cd.copy(cd.zeros(4), a) end, "bad argument #2 to 'copy' (attempt to use a freed array)")
    expect_error(function() cd.empty_like(a) end, "bad argument #1 to 'empty_like' (attempt to use a freed array)")
    expect_error(function() k({ dim = 4 }, a, 4) end, "bad argument #1 to 'k' ('x': expected float *, got a freed Array)")
    assert.are.equal("Array(freed)", tostring(a))
  end)
end)

-- ------------------------------------------------------------------------------------------------ streams

describe("streams refuse", function()
  it("bad options", function()
    expect_error(function() cd.stream({ priority = 0 / 0 }) end, "bad option 'priority' to 'stream' (integer expected, got number)")
    expect_error(function() cd.stream({ priority = "high" }) end, "bad option 'priority' to 'stream' (integer expected, got string)")
    expect_error(function() cd.stream("cpu", { blocking = "yes" }) end, "bad option 'blocking' to 'stream' (boolean expected, got string)")
    expect_error(function() cd.stream("cpu", "x") end, "bad argument #2 to 'stream' (table expected, got string)")
    expect_error(function() cd.stream(true) end, "bad argument #1 to 'stream' (" .. DEVICE_EXPECTED .. "boolean)")
  end)

  it("an integer priority out of range, saying so", function()
    -- was: "integer expected, got number" for an integer
    expect_error(function() cd.stream({ priority = 5000 }) end,
      "bad option 'priority' to 'stream' (integer from -1000 to 1000 expected, got 5000)")
  end)

  it("use after destroy", function()
    local s = cd.stream("cpu")
    s:destroy()
    expect_error(function() s:synchronize() end, "bad argument #1 to 'synchronize' (attempt to use a destroyed stream)")
    expect_error(function() s:destroy() end, "bad argument #1 to 'destroy' (attempt to use a destroyed stream)")
    expect_error(function() cd.set_stream(s) end, "bad argument #1 to 'set_stream' (attempt to use a destroyed stream)")
    expect_error(function() cd.with_stream(s, print) end, "bad argument #1 to 'with_stream' (attempt to use a destroyed stream)")
    expect_error(function() cd.zeros(4, { stream = s }) end, "bad option 'stream' to 'zeros' (attempt to use a destroyed stream)")
    expect_error(function() cd.event("cpu"):record(s) end, "bad argument #1 to 'record' (attempt to use a destroyed stream)")
    assert.are.equal("Stream(destroyed)", tostring(s))
  end)

  it("other values where events and streams are expected", function()
    local s = cd.stream("cpu")
    expect_error(function() s:wait_event(s) end, "bad argument #1 to 'wait_event' (cudadev.Event expected, got cudadev.Stream)")
    expect_error(function() s:wait_stream({}) end, "bad argument #1 to 'wait_stream' (cudadev.Stream expected, got table)")
    expect_error(function() cd.with_stream(s, 5) end, "bad argument #2 to 'with_stream' (function expected, got number)")
    expect_error(function() cd.set_stream() end, "bad argument #1 to 'set_stream' (cudadev.Stream expected, got no value)")
    expect_error(function() cd.capture(5, print) end, "bad argument #1 to 'capture' (cudadev.Stream expected, got number)")
    expect_error(function() cd.capture(s) end, "bad argument #2 to 'capture' (function expected, got no value)")
    expect_error(function() cd.capture(s, print) end,
      "bad argument #1 to 'capture' (graphs are a CUDA feature: capture a stream of a CUDA device)")
  end)

  it("record_event of something that is no event", function()
    local s = cd.stream("cpu")
    -- was: "attempt to index a number value", "Stream has no field or method 'record'"
    expect_error(function() s:record_event(5) end, "bad argument #1 to 'record_event' (cudadev.Event expected, got number)")
    expect_error(function() s:record_event(cd.stream("cpu")) end,
      "bad argument #1 to 'record_event' (cudadev.Event expected, got cudadev.Stream)")
  end)
end)

describe("events refuse", function()
  it("bad options and arguments", function()
    expect_error(function() cd.event({ timing = "yes" }) end, "bad option 'timing' to 'event' (boolean expected, got string)")
    expect_error(function() cd.event("cpu", { timng = true }) end,
      "bad argument #2 to 'event' (unknown option 'timng' (expected timing, blocking, ipc))")
    local e = cd.event("cpu")
    expect_error(function() e:record(5) end, "bad argument #1 to 'record' (cudadev.Stream expected, got number)")
    expect_error(function() e:wait({}) end, "bad argument #1 to 'wait' (cudadev.Stream expected, got table)")
    expect_error(function() e:elapsed(5) end, "bad argument #1 to 'elapsed' (cudadev.Event expected, got number)")
    expect_error(function() cd.elapsed_time(e, nil) end, "bad argument #2 to 'elapsed_time' (cudadev.Event expected, got nil)")
    expect_error(function() return e.bogus end, "Event has no field or method 'bogus'")
  end)

  it("elapsed between events never recorded, as a cudadev.Error", function()
    local e1, e2 = cd.event("cpu"), cd.event("cpu")
    local ok, err = pcall(e1.elapsed, e1, e2)
    assert.is_false(ok)
    assert.are.equal("Error", cd.type(err))
    assert.are.same({ "cpu.event_elapsed", "CUDA_ERROR_INVALID_HANDLE", "the start event was never recorded", false },
      { err.api, err.name, err.message, err.sticky })
  end)

  it("use after destroy", function()
    local e = cd.event("cpu")
    e:destroy()
    expect_error(function() e:record() end, "bad argument #1 to 'record' (attempt to use a destroyed event)")
    expect_error(function() cd.stream("cpu"):wait_event(e) end, "bad argument #1 to 'wait_event' (attempt to use a destroyed event)")
    expect_error(function() cd.elapsed_time(cd.event("cpu"), e) end, "bad argument #2 to 'elapsed_time' (attempt to use a destroyed event)")
    assert.are.equal("Event(destroyed)", tostring(e))
  end)
end)

-- ------------------------------------------------------------------------------------------------ devices

describe("devices refuse", function()
  it("NaN, infinite, negative and huge ordinals, empty and malformed names", function()
    expect_error(function() cd.device(0 / 0) end, "bad argument #1 to 'device' (" .. no_device_text("cuda:" .. NAN) .. ")")
    expect_error(function() cd.device(1 / 0) end, "bad argument #1 to 'device' (" .. no_device_text("cuda:" .. INF) .. ")")
    expect_error(function() cd.device(math.mininteger) end,
      "bad argument #1 to 'device' (" .. no_device_text("cuda:-9223372036854775808") .. ")")
    expect_error(function() cd.device("") end, "bad argument #1 to 'device' (" .. no_device_text("") .. ")")
    expect_error(function() cd.device("cuda:") end, "bad argument #1 to 'device' (" .. no_device_text("cuda:") .. ")")
    expect_error(function() cd.device("cuda:99999999999999999999") end,
      "bad argument #1 to 'device' (" .. no_device_text("cuda:99999999999999999999") .. ")")
    expect_error(function() cd.set_device({}) end, "bad argument #1 to 'set_device' (" .. DEVICE_EXPECTED .. "table)")
    expect_error(function() cd.scope() end, "bad argument #1 to 'scope' (" .. DEVICE_EXPECTED .. "no value)")
    expect_error(function() cd.with_device("cpu", nil) end, "bad argument #2 to 'with_device' (function expected, got nil)")
    expect_error(function() cd.synchronize_device(false) end, "bad argument #1 to 'synchronize_device' (" .. DEVICE_EXPECTED .. "boolean)")
  end)

  it("a name with a NUL byte", function()
    -- was: "cpu\0x" is taken for "cpu" (strcmp stops at the NUL)
    expect_error(function() cd.device("cpu\0x") end, "bad argument #1 to 'device' (device name contains a NUL byte)")
  end)

  it("another type of object, by its type name", function()
    -- was: "got userdata"
    expect_error(function() cd.device(cd.stream("cpu")) end, "bad argument #1 to 'device' (" .. DEVICE_EXPECTED .. "cudadev.Stream)")
  end)

  it("bad attribute names and fields", function()
    local d = cd.device("cpu")
    expect_error(function() d:attribute({}) end, "bad argument #1 to 'attribute' (string expected, got table)")
    expect_error(function() d:attribute("") end,
      "bad argument #1 to 'attribute' (unknown attribute '' (any CU_DEVICE_ATTRIBUTE_* name, lowercase, without the prefix))")
    expect_error(function() return d[1] end, "Device has no field or method '1'")
    expect_error(function() d.synchronize(5) end, "bad argument #1 to 'synchronize' (cudadev.Device expected, got number)")
    expect_error(function() d.reset({}) end, "bad argument #1 to 'reset' (cudadev.Device expected, got table)")
  end)

  it("bad devices for the memory statistics", function()
    expect_error(function() cd.memory_stats("nope") end, "bad argument #1 to 'memory_stats' (" .. no_device_text("nope") .. ")")
    expect_error(function() cd.memory_allocated({}) end, "bad argument #1 to 'memory_allocated' (" .. DEVICE_EXPECTED .. "table)")
    expect_error(function() cd.empty_cache(true) end, "bad argument #1 to 'empty_cache' (" .. DEVICE_EXPECTED .. "boolean)")
    expect_error(function() cd.reset_peak_memory_stats(-1) end,
      "bad argument #1 to 'reset_peak_memory_stats' (" .. no_device_text("cuda:-1") .. ")")
  end)

  it("the cpu device and bad values for peer access, naming the first bad argument", function()
    -- was: with two bad arguments, the C evaluation order decides which one is named (#2 with gcc)
    -- a query about the cpu device is answered false, as Warp's (issue 16); setting access still raises
    assert.is_false(cd.is_peer_access_supported("cpu", "cpu"))
    expect_error(function() cd.is_peer_access_enabled({}, "cpu") end,
      "bad argument #1 to 'is_peer_access_enabled' (" .. DEVICE_EXPECTED .. "table)")
  end)

  it("bad values for peer access", function()
    expect_error(function() cd.with_peer_access("cpu", "cpu", true, print) end,
      "bad argument #1 to 'with_peer_access' (peer access is between CUDA devices, not cpu)")
    expect_error(function() cd.set_mempool_access_enabled(nil, "cpu", true) end,
      "bad argument #1 to 'set_mempool_access_enabled' (" .. DEVICE_EXPECTED .. "nil)")
  end)

  it("bad aliases", function()
    expect_error(function() cd.map_cuda_device("cpu") end, "bad argument #1 to 'map_cuda_device' ('cpu' is reserved; choose another alias)")
    expect_error(function() cd.map_cuda_device("cuda:7") end,
      "bad argument #1 to 'map_cuda_device' ('cuda:7' is reserved; choose another alias)")
    expect_error(function() cd.map_cuda_device(("x"):rep(64)) end, "bad argument #1 to 'map_cuda_device' (alias too long)")
    expect_error(function() cd.map_cuda_device() end, "bad argument #1 to 'map_cuda_device' (string expected, got no value)")
    expect_error(function() cd.unmap_cuda_device("nope") end, "bad argument #1 to 'unmap_cuda_device' (no mapped device 'nope')")
    expect_error(function() cd.unmap_cuda_device("cpu") end, "bad argument #1 to 'unmap_cuda_device' (no mapped device 'cpu')")
  end)

  it("bad arguments to the multi-device helpers", function()
    expect_error(function() cd.for_each_device(5) end, "bad argument #1 to 'for_each_device' (function expected, got number)")
    expect_error(function() cd.wait_streams(cd.stream("cpu"), 5) end,
      "bad argument #2 to 'wait_streams' (table of streams expected, got number)")
  end)

  it("bad device lists and streams to the multi-device helpers, by name and position", function()
    -- was: "bad argument #2 (table ...)" without the function's name, and #2 for synchronize_devices' #1;
    -- "attempt to index a number value (local 'stream')" / "(local 'o')" from inside cudadev.extra
    expect_error(function() cd.for_each_device(print, 5) end,
      "bad argument #2 to 'for_each_device' (table of devices expected, got number)")
    expect_error(function() cd.synchronize_devices(5) end,
      "bad argument #1 to 'synchronize_devices' (table of devices expected, got number)")
    expect_error(function() cd.wait_streams(5, { cd.stream("cpu") }) end,
      "bad argument #1 to 'wait_streams' (cudadev.Stream expected, got number)")
    expect_error(function() cd.wait_streams(cd.stream("cpu"), { 5 }) end,
      "bad argument #2 to 'wait_streams' (item 1: cudadev.Stream expected, got number)")
  end)

  it("modules for the cpu device from load_module", function()
    expect_error(function() cd.load_module({}) end, "bad argument #1 to 'load_module' (string expected, got table)")
    expect_error(function() cd.load_module(".entry x", { dev = "cpu" }) end,
      "bad argument #2 to 'load_module' (unknown option 'dev' (expected device))")
    expect_error(function() cd.load_module(".entry x", { device = "cpu" }) end, "load_module loads CUDA code; the target device is cpu")
  end)
end)

-- ------------------------------------------------------------------------------------------------ kernels

describe("compile refuses", function()
  it("sources that are no string, or hold a NUL byte", function()
    expect_error(function() cd.compile(nil) end, "bad argument #1 to 'compile' (string expected, got nil)")
    expect_error(function() cd.compile(print) end, "bad argument #1 to 'compile' (string expected, got function)")
    expect_error(function() cd.compile("\0") end, "bad argument #1 to 'compile' (source contains a NUL byte)")
    expect_error(function() cd.compile(SRC:sub(1, 40) .. "\0" .. SRC:sub(41)) end,
      "bad argument #1 to 'compile' (source contains a NUL byte)")
    expect_error(function() cd.compile(("x"):rep(10 * 2^20) .. "\0") end, "bad argument #1 to 'compile' (source contains a NUL byte)")
  end)

  it("bad options", function()
    expect_error(function() cd.compile(SRC, 5) end, "bad argument #2 to 'compile' (table expected, got number)")
    expect_error(function() cd.compile(SRC, { include_paths = { 5 } }) end,
      "bad option 'include_paths' to 'compile' (item 1: string expected, got number)")
    expect_error(function() cd.compile(SRC, { arch = 0 / 0 }) end,
      "bad option 'arch' to 'compile' (expected \"sm_XY\" or an integer such as 90, got " .. NAN .. ")")
    expect_error(function() cd.compile(SRC, { arch = "sm_" }) end,
      "bad option 'arch' to 'compile' (expected \"sm_XY\" or an integer such as 90, got sm_)")
    expect_error(function() cd.compile(SRC, { target = { "ptx", 5 } }) end,
      "bad option 'target' to 'compile' (expected \"cubin\", \"ptx\" or both in a table)")
    expect_error(function() cd.compile(SRC, { [true] = 1 }) end,
      "bad argument #2 to 'compile' (option keys must be strings (expected name, options, headers, include_paths, "
      .. "name_expressions, device, arch, target, timeout, cpu_check))")
  end)

  it("a bad name or device option, naming the option", function()
    -- was: "bad argument #-1 to 'compile'", "bad argument #12 to 'compile'"
    expect_error(function() cd.compile(SRC, { name = {} }) end, "bad option 'name' to 'compile' (string expected, got table)")
    expect_error(function() cd.compile(SRC, { device = "nope" }) end,
      "bad option 'device' to 'compile' (" .. no_device_text("nope") .. ")")
  end)

  local function compile_error(src, opts)
    local ok, err = pcall(cd.compile, src, opts)
    assert.is_false(ok)
    assert.are.equal("Error", cd.type(err))
    assert.is_false(err.sticky)
    return err
  end

  it("a compile option the cpu compiler does not take, as a cudadev.Error", function()
    local err = compile_error(SRC, { device = "cpu", options = { "--bogus-flag" } })
    assert.are.same({ "cpu.compile", "NVRTC_ERROR_INVALID_OPTION", "unsupported compile option '--bogus-flag' on the cpu device" },
      { err.api, err.name, err.message })
  end)

  it("a 10 MB source of garbage, as a compile error with the log", function()
    local err = compile_error(("x"):rep(10 * 2^20), { device = "cpu", name = "garbage.cu" })
    assert.are.same({ "c++", "HOST_COMPILER_ERROR" }, { err.api, err.name })
    assert.are.equal("compilation of garbage.cu failed: ", err.message:sub(1, 34))
    assert.is_truthy(err.log:find("garbage.cu:1", 1, true))
    assert.are.same({}, err.options)
  end)

  it("takes a 10 MB source that is valid, and its kernel runs", function()
    local m = cd.compile(SRC .. "\n//" .. ("x"):rep(10 * 2^20) .. "\n", { device = "cpu" })
    local a = cd.zeros(3)
    m.k({ dim = 3 }, a, 3)
    assert.are.same({ 0, 1, 2 }, a:totable())
  end)
end)

describe("modules refuse", function()
  it("unknown kernels and bad keys", function()
    local m = kernels()
    expect_error(function() return m.nope end, "module has no kernel 'nope' (kernels: k, v)")
    expect_error(function() m:get() end, "bad argument #1 to 'get' (string expected, got no value)")
    expect_error(function() return m[true] end, "bad argument #2 to 'index' (string expected, got boolean)")
    expect_error(function() m.get(5, "k") end, "bad argument #1 to 'get' (cudadev.Module expected, got number)")
    expect_error(function() m.get(cd.zeros(1), "k") end, "bad argument #1 to 'get' (cudadev.Module expected, got cudadev.Array)")
  end)
end)

describe("kernel launches refuse", function()
  local _, k, v
  local x
  before_each(function()
    _, k, v = kernels()
    x = cd.zeros(4)
  end)
  teardown(function() _, k, v, x = nil, nil, nil, nil end)   -- the suite checks that no object outlives its file

  it("a missing or wrong launch configuration, and a wrong argument count", function()
    expect_error(function() k(5, x, 4) end, "bad argument #1 to 'k' (launch configuration expected (a table or a LaunchConfig), got number)")
    expect_error(function() k(nil, x, 4) end, "bad argument #1 to 'k' (launch configuration expected (a table or a LaunchConfig), got nil)")
    expect_error(function() k({ dim = 4 }, x) end, "wrong number of arguments to 'k' (expected 2, got 1)")
    expect_error(function() k({ dim = 4 }, x, 4, 4) end, "wrong number of arguments to 'k' (expected 2, got 3)")
    expect_error(function() k.launch(5) end, "bad argument #1 to 'launch' (cudadev.Kernel expected, got number)")
  end)

  it("bad geometry", function()
    local function cfg_error(cfg, msg)
      expect_error(function() k(cfg, x, 4) end, "bad launch configuration for 'k' (" .. msg .. ")")
    end
    cfg_error({ dim = 0 }, "'dim' must be a positive integer or {x, y, z}, got 0")
    cfg_error({ dim = -1 }, "'dim' must be a positive integer or {x, y, z}, got -1")
    cfg_error({ dim = 0 / 0 }, "'dim' must be a positive integer or {x, y, z}, got " .. NAN)
    cfg_error({ dim = 1 / 0 }, "'dim' must be a positive integer or {x, y, z}, got " .. INF)
    cfg_error({ dim = math.maxinteger }, "'dim' must be a positive integer or {x, y, z}, got 9223372036854775807")
    cfg_error({ dim = {} }, "'dim' must have 1 to 3 components")
    cfg_error({ dim = { 1, 2, 3, 4 } }, "'dim' must have 1 to 3 components")
    cfg_error({ dim = { 1, 0 } }, "'dim' component 2 must be an integer from 1 to 9007199254740992")
    cfg_error({ dim = { 2^31, 2^31, 2^31 } }, "grid dimension y of 268435456 exceeds the device limit of 65535")
    cfg_error({ grid = 1 }, "missing 'dim', or 'grid' and 'block'")
    cfg_error({}, "missing 'dim', or 'grid' and 'block'")
    cfg_error({ grid = 1, block = 1, dim = 1 }, "give either 'dim' or 'grid' and 'block'")
    cfg_error({ grid = 1, block = 2048 }, "a block of 2048 threads exceeds the device limit of 1024")
    cfg_error({ grid = 1, block = { 32, 32, 2 } }, "a block of 2048 threads exceeds the device limit of 1024")
    cfg_error({ grid = 1, block = { 1, 1, 65 } }, "block dimension z of 65 exceeds the device limit of 64")
    cfg_error({ grid = { 1, 65536 }, block = 1 }, "grid dimension y of 65536 exceeds the device limit of 65535")
    cfg_error({ grid = 2^31, block = 1 }, "'grid' must be a positive integer or {x, y, z}, got 2147483648.0")
    cfg_error({ grid = 1, block = 1, shared = -1 }, "'shared' must be 0 to 1048576 bytes")
    cfg_error({ grid = 1, block = 1, shared = 1.5 }, "'shared' must be 0 to 1048576 bytes")
    cfg_error({ grid = 1, block = 1, shared = 2^40 }, "'shared' must be 0 to 1048576 bytes")
    cfg_error({ grid = 1, block = 1, blok = 1 }, "unknown key 'blok' (expected grid, block, dim, shared, stream, device, cooperative, timeout)")
    cfg_error({ grid = 1, block = 1, [1] = 1 }, "unknown key '1' (expected grid, block, dim, shared, stream, device, cooperative, timeout)")
  end)

  it("a bad stream or device in the configuration, naming the key", function()
    -- was: "bad argument #6 to 'k' (...)": the key's stack slot taken for an argument position
    local s = cd.stream("cpu")
    s:destroy()
    expect_error(function() k({ dim = 4, stream = 5 }, x, 4) end,
      "bad launch configuration for 'k' ('stream': cudadev.Stream expected, got number)")
    expect_error(function() k({ dim = 4, stream = s }, x, 4) end,
      "bad launch configuration for 'k' ('stream': attempt to use a destroyed stream)")
    expect_error(function() k({ dim = 4, device = "nope" }, x, 4) end,
      "bad launch configuration for 'k' ('device': " .. no_device_text("nope") .. ")")
  end)

  it("arguments that do not fit the parameters", function()
    expect_error(function() k({ dim = 4 }, "x", 4) end, "bad argument #1 to 'k' ('x': expected float *, got string)")
    expect_error(function() k({ dim = 4 }, cd.zeros(4, "f64"), 4) end,
      "bad argument #1 to 'k' ('x': expected float *, got an Array of float64)")
    expect_error(function() k({ dim = 4 }, x, 2^31) end, "bad argument #2 to 'k' ('n': expected int, got 2147483648.0)")
    expect_error(function() k({ dim = 4 }, x, 1 << 31) end, "bad argument #2 to 'k' ('n': expected int, got 2147483648)")
    expect_error(function() k({ dim = 4 }, x, 1.5) end, "bad argument #2 to 'k' ('n': expected int, got 1.5)")
    expect_error(function() k({ dim = 4 }, x, 0 / 0) end, "bad argument #2 to 'k' ('n': expected int, got " .. NAN .. ")")
    expect_error(function() k({ dim = 4 }, x, nil) end, "bad argument #2 to 'k' ('n': expected int, got nil)")
    local out = cd.zeros(1)
    local function bad(i, msg, ...)
      local args = { { 1, 2, 3, 4 }, 1.0, 1, true, 1, 1, out }
      for j, a in pairs({ ... }) do args[j] = a end
      local fresh = cd.compile(SRC, { device = "cpu" }).v   -- a Kernel value of its own (see the next test)
      expect_error(function() fresh({ dim = 1 }, table.unpack(args, 1, 7)) end, ("bad argument #%d to 'v' (%s)"):format(i, msg))
    end
    bad(1, "'f': expected float4, got 5", 5)
    bad(1, "'f': expected float4, got nil", { 1, 2, 3 })
    bad(2, "'d': expected double, got string", nil, "x")
    bad(3, "'u': expected unsigned char, got 256", nil, nil, 256)
    bad(3, "'u': expected unsigned char, got -1", nil, nil, -1)
    bad(4, "'b': expected bool, got 1", nil, nil, nil, 1)
    bad(5, "'ll': expected long long, got 9.2233720368548e+18", nil, nil, nil, nil, 2^63)
    bad(6, "'ull': expected unsigned long long, got -1", nil, nil, nil, nil, nil, -1)
    bad(6, "'ull': expected unsigned long long, got 1.844674407371e+19", nil, nil, nil, nil, nil, 2^64)
  end)

  it("nothing of a refused vector argument stays behind in the kernel", function()
    local out = cd.zeros(1)
    v = cd.compile(SRC, { device = "cpu" }).v
    assert.is_false(pcall(v, { dim = 1 }, { x = 1, y = 2, z = 3, w = "a" }, 1.0, 1, true, 1, 1, out))
    -- was: put_vec changes the parameter's kind to float for the components and a refused component
    -- skips the restore: afterwards a float4 is refused and a plain number accepted
    v({ dim = 1 }, { 1, 2, 3, 4 }, 1.0, 1, true, 1, 1, out)
    assert.are.equal(10, out[1])
    expect_error(function() v({ dim = 1 }, 5, 1.0, 1, true, 1, 1, out) end, "bad argument #1 to 'v' ('f': expected float4, got 5)")
  end)

  it("bad occupancy queries", function()
    expect_error(function() k:occupancy() end, "bad argument #1 to 'occupancy' (integer expected, got no value)")
    expect_error(function() k:occupancy(0) end, "bad argument #1 to 'occupancy' (block must be 1 to 1024 threads)")
    expect_error(function() k:occupancy(2^40) end, "bad argument #1 to 'occupancy' (block must be 1 to 1024 threads)")
    expect_error(function() k:occupancy(0 / 0) end, "bad argument #1 to 'occupancy' (block must be an integer, got " .. NAN .. ")")
    expect_error(function() k:occupancy(32, -1) end, "bad argument #2 to 'occupancy' (shared must not be negative, got -1)")
    expect_error(function() k:suggest_block_size("x") end, "bad argument #1 to 'suggest_block_size' (integer expected, got string)")
    expect_error(function() return k.bogus end, "Kernel has no field or method 'bogus'")
  end)

  -- with CUDADEV_CPU_FORK=0 launches run in this process, where a fault ends it (the valgrind run sets it)
  local fork_it = os.getenv("CUDADEV_CPU_FORK") == "0"
    and function(name) return pending(name .. " (CUDADEV_CPU_FORK=0: a fault would end this process)") end or it

  fork_it("a faulting kernel is an error and the device stays usable", function()
    -- an integer is accepted for a pointer parameter (outside a sandbox): address 5 faults in the launch
    local ok, err = pcall(k, { dim = 1 }, 5, 1)
    assert.is_false(ok)
    assert.are.same({ "cpu.launch", "CUDA_ERROR_ILLEGAL_ADDRESS", false },
      { err.api, err.name, err.sticky })
    assert.are.equal("kernel 'k' crashed on the cpu device: SIGSEGV (segmentation fault) at address 0x5 "
      .. "(block (0,0,0), thread (0,0,0))", err.message)
    k({ dim = 4 }, x, 4)
    assert.are.same({ 0, 1, 2, 3 }, x:totable())
  end)
end)

-- ------------------------------------------------------------------------------------------------ metatables

describe("a value given another type's metatable with the debug library", function()
  local _, k
  before_each(function() _, k = kernels() end)
  teardown(function() _, k = nil, nil end)

  -- Gives v the metatable of `other` for the test; the original comes back afterwards, so that the value
  -- is released as what it is (a leak would fail the valgrind run).
  -- (busted keeps one finally per test: each call registers one that gives back every metatable so far)
  local originals = {}
  local function disguised(v, other)
    originals[#originals + 1] = { v, getmetatable(v) }
    finally(function()
      for i = #originals, 1, -1 do
        debug.setmetatable(originals[i][1], originals[i][2])
        originals[i] = nil
      end
    end)
    return debug.setmetatable(v, getmetatable(other))
  end

  it("an Array with the Kernel metatable is not called", function()
    local fake = disguised(cd.empty(4), k)
    expect_error(function() fake({ dim = 1 }, cd.empty(1), 1) end, "bad argument #1 to 'fake' (not a Kernel (its metatable was replaced))")
    expect_error(function() return fake.name end, "bad argument #1 to 'index' (not a Kernel (its metatable was replaced))")
    expect_error(function() return tostring(fake) end, "bad argument #1 to '?' (not a Kernel (its metatable was replaced))")
  end)

  it("a Kernel or a Stream with the Array metatable is no Array", function()
    local _, _, v = kernels()
    for _, fake in ipairs({ disguised(v, cd.empty(1)), disguised(cd.stream("cpu"), cd.empty(1)) }) do
      expect_error(function() return fake[1] end, "bad argument #1 to 'index' (not an Array (its metatable was replaced))")
      expect_error(function() return #fake end, "bad argument #1 to 'len' (not an Array (its metatable was replaced))")
      expect_error(function() cd.copy(fake, cd.empty(1)) end, "bad argument #1 to 'copy' (not an Array (its metatable was replaced))")
      expect_error(function() cd.zeros(1):copy_from(fake) end,
        "bad argument #1 to 'copy_from' (not an Array (its metatable was replaced))")
    end
  end)

  it("a Stream with the Array metatable is no pointer argument", function()
    local fake = disguised(cd.stream("cpu"), cd.empty(1))
    -- refused (NOTE [magic]); how the message names it is open: today "got an Array", from its metatable
    helper.assert_error_contains(function() k({ dim = 1 }, fake, 1) end, "bad argument #1 to 'k' ('x': expected float *, got ")
  end)

  it("a table with the Array metatable is no Array", function()
    local t = setmetatable({}, getmetatable(cd.empty(1)))
    -- was: "cudadev.Array expected, got cudadev.Array"
    expect_error(function() return t[1] end, "bad argument #1 to 'index' (not an Array (its metatable was replaced))")
    expect_error(function() return #t end, "bad argument #1 to 'len' (not an Array (its metatable was replaced))")
    expect_error(function() t[1] = 5 end, "bad argument #1 to 'newindex' (not an Array (its metatable was replaced))")
    expect_error(function() cd.copy(t, cd.empty(1)) end, "bad argument #1 to 'copy' (not an Array (its metatable was replaced))")
    expect_error(function() k({ dim = 1 }, t, 1) end, "bad argument #1 to 'k' ('x': expected float *, got table)")
  end)

  it("a table with the Stream, Device or Kernel metatable is none of them", function()
    -- was: "cudadev.Stream expected, got cudadev.Stream" and so on
    local ts = setmetatable({}, getmetatable(cd.stream("cpu")))
    expect_error(function() ts:synchronize() end, "bad argument #1 to 'index' (not a Stream (its metatable was replaced))")
    local td = setmetatable({}, getmetatable(cd.device("cpu")))
    expect_error(function() return td.name end, "bad argument #1 to 'index' (not a Device (its metatable was replaced))")
    local tk = setmetatable({}, getmetatable(k))
    expect_error(function() tk({ dim = 1 }, cd.empty(1), 1) end, "bad argument #1 to 'tk' (not a Kernel (its metatable was replaced))")
  end)

  it("a Stream with the Event metatable is no Event", function()
    local fake = disguised(cd.stream("cpu"), cd.event("cpu"))
    -- was: the stream's handle is used as an event handle (the cpu backend refuses it; a CUDA driver
    -- would be handed a CUstream as a CUevent)
    expect_error(function() fake:query() end, "bad argument #1 to 'index' (not an Event (its metatable was replaced))")
  end)

  -- NOTE [magic] once covered Arrays and Kernels only: a userdata of another layout was read as a Stream,
  -- Event, Device or Module.
  local function wrong(name, meta_expr, use, expected)
    crash_it(name, "no NOTE [magic] tag check for this type: the userdata was read as the wrong struct",
      ("local M = cd.compile(SRC, { device = 'cpu' })\nlocal fake = debug.setmetatable(cd.empty(4), %s)\n%s"):format(meta_expr, use),
      expected)
  end
  wrong("an Array with the Stream metatable, synchronized", "getmetatable(cd.stream('cpu'))", "fake:synchronize()",
    "bad argument #1 to 'index' (not a Stream (its metatable was replaced))")
  wrong("an Array with the Stream metatable, printed", "getmetatable(cd.stream('cpu'))", "return tostring(fake)",
    "bad argument #1 to '?' (not a Stream (its metatable was replaced))")
  wrong("an Array with the Stream metatable, collected", "getmetatable(cd.stream('cpu'))",
    "fake = nil; collectgarbage(); error('collected')", "collected")
  wrong("an Array with the Event metatable, queried", "getmetatable(cd.event('cpu'))", "fake:query()",
    "bad argument #1 to 'index' (not an Event (its metatable was replaced))")
  wrong("an Array with the Event metatable, collected", "getmetatable(cd.event('cpu'))",
    "fake = nil; collectgarbage(); error('collected')", "collected")
  wrong("an Array with the Device metatable, read", "getmetatable(cd.device('cpu'))", "return fake.name",
    "bad argument #1 to 'index' (not a Device (its metatable was replaced))")
  wrong("an Array with the Module metatable, indexed", "getmetatable(M)", "return fake.k",
    "bad argument #1 to 'index' (not a Module (its metatable was replaced))")
  wrong("an Array with the Module metatable, collected", "getmetatable(M)",
    "fake = nil; collectgarbage(); error('collected')", "collected")
  crash_it("an Event with the Stream metatable, synchronized",
    "no NOTE [magic] tag check for Streams: the Event is read as a Stream (free(): invalid pointer)",
    "local fake = debug.setmetatable(cd.event('cpu'), getmetatable(cd.stream('cpu'))); fake:synchronize()",
    "bad argument #1 to 'index' (not a Stream (its metatable was replaced))")
  crash_it("a file handle with the Stream metatable, synchronized",
    "no NOTE [magic] tag check for Streams: a luaL_Stream is read as a Stream (free(): invalid pointer)",
    "local fake = debug.setmetatable(io.tmpfile(), getmetatable(cd.stream('cpu'))); fake:synchronize()",
    "bad argument #1 to 'index' (not a Stream (its metatable was replaced))")
end)

-- ------------------------------------------------------------------------------------------------ stale

describe("objects made before dev:reset()", function()
  local m, k, a, s, e
  before_each(function()
    m = cd.compile(SRC, { device = "cpu" })
    k, a, s, e = m.k, cd.zeros(4), cd.stream("cpu"), cd.event("cpu")
    cd.device("cpu"):reset()
  end)
  after_each(function()
    m, k, a, s, e, mod = nil, nil, nil, nil, nil, nil
    collectgarbage()
  end)

  it("say they are stale", function()
    expect_error(function() return a[1] end, "bad argument #1 to 'index' (stale Array: device was reset)")
    expect_error(function() cd.copy(cd.zeros(4), a) end, "bad argument #2 to 'copy' (stale Array: device was reset)")
    expect_error(function() a:free() end, "bad argument #1 to 'free' (stale Array: device was reset)")
    expect_error(function() s:synchronize() end, "bad argument #1 to 'synchronize' (stale Stream: device was reset)")
    expect_error(function() cd.set_stream(s) end, "bad argument #1 to 'set_stream' (stale Stream: device was reset)")
    expect_error(function() e:record() end, "bad argument #1 to 'record' (stale Event: device was reset)")
    expect_error(function() return m.k end, "bad argument #1 to 'index' (stale Module: device was reset)")
    expect_error(function() k({ dim = 4 }, cd.zeros(4), 4) end, "stale Kernel: device was reset")
    assert.are.equal("Array(float32[...] on cpu, stale)", tostring(a))
  end)

  it("a stale stream given as an option", function()
    -- was: check_opt_value tests only for a destroyed stream; the stale handle is used
    expect_error(function() cd.zeros(1, { stream = s }) end, "bad option 'stream' to 'zeros' (stale Stream: device was reset)")
  end)

  it("a stale kernel's attributes and occupancy", function()
    -- was: check_kernel does not compare generations; the function handle of the reset context is used
    expect_error(function() return k.attributes end, "bad argument #1 to 'index' (stale Kernel: device was reset)")
    expect_error(function() return k:occupancy(32) end, "bad argument #1 to 'index' (stale Kernel: device was reset)")
  end)

  it("give their memory back when they are collected, on the cpu device too", function()
    -- was: on cpu, reset only bumps the generation, and releasing a stale object skips the backend
    -- (as after a CUDA context reset, which freed everything): every array, stream and event made before a
    -- cpu reset leaks (an array its whole memory)
    local function shmem()
      for line in io.lines("/proc/self/status") do
        local kib = line:match("^RssShmem:%s+(%d+)")
        if kib then return tonumber(kib) end
      end
      return 0
    end
    m, k, a, s, e = nil, nil, nil, nil, nil
    collectgarbage()
    collectgarbage()
    local before = shmem()
    for _ = 1, 8 do
      cd.zeros(1 << 20, "f32", { device = "cpu" })   -- 4 MiB, touched, dropped at once
      cd.device("cpu"):reset()
    end
    collectgarbage()
    collectgarbage()
    assert.is_true(shmem() - before < 4096, ("%d KiB of array memory not given back"):format(shmem() - before))
  end)

  it("do not stop new work", function()
    local k2 = cd.compile(SRC, { device = "cpu" }).k
    local b = cd.zeros(4)
    k2({ dim = 4 }, b, 4)
    assert.are.same({ 0, 1, 2, 3 }, b:totable())
  end)
end)

-- ------------------------------------------------------------------------------------------------ other devices

describe("objects of another device", function()
  helper.gpu_it("are refused where the work is on another device", function()
    local _, k = kernels()
    local gs, ge = cd.stream("cuda:0"), cd.event("cuda:0")
    expect_error(function() cd.zeros(4, { device = "cpu", stream = gs }) end,
      "bad argument #2 to 'zeros' (stream is on cuda:0 but the array on cpu)")
    expect_error(function() k({ dim = 4 }, cd.zeros(4, { device = "cuda:0" }), 4) end,
      "bad argument #1 to 'k' ('x': array is on cuda:0 but the kernel runs on cpu; move it with a:to(\"cpu\"))")
    expect_error(function() k({ dim = 4, device = "cuda:0" }, cd.zeros(4), 4) end,
      "bad launch configuration for 'k' (the kernel was compiled for cpu, not cuda:0; compile it with device = \"cuda:0\")")
    expect_error(function() k({ dim = 4, stream = gs }, cd.zeros(4), 4) end, "stream is on cuda:0 but the work is on cpu")
    expect_error(function() cd.stream("cpu"):wait_event(ge) end,
      "bad argument #1 to 'wait_event' (event and stream belong to different kinds of device)")
    expect_error(function() cd.event("cpu"):record(gs) end, "stream is on cuda:0 but the work is on cpu")
    expect_error(function() cd.elapsed_time(cd.event("cpu"):record(), ge:record()) end,
      "bad argument #2 to 'elapsed_time' (events on different devices (cpu and cuda:0))")
  end)
end)

-- the shared kernels are dropped once the file ran: the suite checks that no object outlives its file
teardown(function() mod = nil end)
