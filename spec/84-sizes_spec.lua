-- No Array can describe memory it does not own (issue 27): every Array is made by one constructor
-- (NOTE [arrays inside their blocks] in src/array.c), which refuses a shape whose element or byte count
-- overflows and checks that every element its shape, strides and offset can address lies inside its block.
-- cd._inside(a) reads that invariant for the fuzzer (spec/fuzz.lua). The places that compute a size from numbers
-- a user chose, and the check each has, are listed in doc/hardening.md.
local helper = require "spec.helper"
local cd = require "cudadev"

local expect_error = helper.assert_error_matches
local BIG = 1 << 32

describe("an Array's shape", function()
  -- before the fix the product of {2^32, 2^32} wrapped to 0: an Array of size 0 at address 0 whose c[i][j] read
  -- and wrote the absolute address 4 * ((i - 1) * 2^32 + j - 1)
  it("of a matmul whose element count overflows is refused on the cpu device", function()
    local a, b = cd.zeros({ BIG, 0 }, { device = "cpu" }), cd.zeros({ 0, BIG }, { device = "cpu" })
    expect_error(function() return cd.matmul(a, b) end,
      "matmul: float32 array of shape {4294967296, 4294967296} is too large (more than 2^56 bytes)")
    expect_error(function() return a:matmul(b) end,
      "matmul: float32 array of shape {4294967296, 4294967296} is too large (more than 2^56 bytes)")
    local at, bt = cd.zeros({ 0, BIG }, "f64", { device = "cpu" }), cd.zeros({ BIG, 0 }, "f64", { device = "cpu" })
    expect_error(function() return cd.matmul(at, bt, { transa = true, transb = true }) end,
      "matmul: float64 array of shape {4294967296, 4294967296} is too large (more than 2^56 bytes)")
  end)

  it("of a matmul with a 0 beside huge dimensions is still made when it has no elements", function()
    local c = cd.matmul(cd.zeros({ BIG, 0 }, { device = "cpu" }), cd.zeros({ 0, 0 }, { device = "cpu" }))
    assert.are.same({ BIG, 0 }, c.shape)
    assert.are.equal(0, c.size)
    assert.is_true(cd._inside(c))
  end)

  helper.gpu_it("of a matmul whose element count overflows is refused on a GPU (before cuBLAS)", function()
    local a, b = cd.zeros({ BIG, 0 }, { device = "cuda:0" }), cd.zeros({ 0, BIG }, { device = "cuda:0" })
    expect_error(function() return cd.matmul(a, b) end,
      "matmul: float32 array of shape {4294967296, 4294967296} is too large (more than 2^56 bytes)")
  end)

  -- before the fix the last dimension's bytes (2^61 * 8) wrapped to 0 and the view said {0, 0}
  it("of a view as another dtype whose last dimension overflows is refused", function()
    local a = cd.zeros({ 0, 1 << 61 }, "f64", { device = "cpu" })
    expect_error(function() return a:view("u8") end, "bad argument #1 to 'view' (array is too large)")
    assert.are.same({ 0, 1 << 43 }, cd.zeros({ 0, 1 << 40 }, "f64", { device = "cpu" }):view("u8").shape)
  end)
end)

describe("an Array made over memory it is handed", function()
  -- DLPack import and IPC open make their Arrays through the same constructor: an edge shape with a 0 comes back
  -- as it went, inside its block
  local function round_trip(dev)
    for _, a in ipairs({ cd.zeros({ BIG, 0 }, { device = dev }), cd.zeros({ 0, 1 << 62 }, "f64", { device = dev }),
                         cd.ones({ 3, 4 }, { device = dev }) }) do
      local b = cd.from_dlpack(a)
      assert.are.same(a.shape, b.shape)
      assert.is_true(cd._inside(a, b))
    end
  end
  it("from DLPack on the cpu device keeps an edge shape and lies inside its block", function() round_trip("cpu") end)
  helper.gpu_it("from DLPack on a GPU keeps an edge shape and lies inside its block", function() round_trip("cuda:0") end)
  helper.gpu_it("with ipc = true on a GPU: an edge shape with a 0 is made, an overflowing one refused", function()
    local a = cd.zeros({ BIG, 0 }, { device = "cuda:0", ipc = true })
    assert.is_true(cd._inside(a))
    expect_error(function() return cd.zeros({ BIG, BIG }, { device = "cuda:0", ipc = true }) end,
      "bad argument #1 to 'zeros' (array is too large)")
  end)
end)

describe("a size computed from numbers a user chose", function()
  -- before the fix stop - start wrapped to -1 and the range was an empty array
  it("of arange whose integer bounds are more than 2^63 apart is refused", function()
    expect_error(function() return cd.arange(math.mininteger, math.maxinteger) end, "arange: too many elements")
    expect_error(function() return cd.arange(math.maxinteger, math.mininteger, -1) end, "arange: too many elements")
    assert.are.same({ 0 }, cd.arange(math.maxinteger, math.mininteger).shape)
    assert.are.same({ 3 }, cd.arange(math.maxinteger - 3, math.maxinteger).shape)
  end)
end)

describe("a count of results a user chose", function()
  -- the API fuzzer (seed 1, under ASan) asked for 2^63 - 1 parts of an empty array: the table of parts took all
  -- the host's memory (ASan: allocator is out of memory trying to allocate 0x800000000 bytes)
  it("of cd.split's sections is refused past 2^24, and an empty axis still splits into a few empty parts", function()
    local e = cd.empty(0, "float16", { device = "cpu" })
    helper.assert_error_matches(function() return cd.split(e, math.maxinteger) end,
      "bad argument #2 to 'split' (9223372036854775807 sections would make 9223372036854775807 Arrays (at most 16777216))")
    local parts = cd.split(e, 5)
    assert.are.equal(5, #parts)
    for _, p in ipairs(parts) do assert.are.equal(0, p.size) end
  end)
end)

describe("a slice of an array whose dimension is 2^63 - 1", function()
  -- found by the fuzzer's edge sizes under UBSan: n + 1 and i + 1 overflowed (signed overflow) for such a dimension
  -- of an empty array, and a step times the stride of {2^62, 2^62, 0}
  it("takes positions counted from the end and steps without overflowing", function()
    local M = math.maxinteger
    local a = cd.zeros({ M, 0 }, { device = "cpu" })
    assert.are.same({ M, 0 }, a:slice(1, -1).shape)
    assert.are.same({ 1, 0 }, a:slice(-1).shape)
    assert.are.same({ 0, 0 }, a:slice(1, 0).shape)
    assert.are.same({ M, 0 }, a:slice(M, 1, -1).shape)
    expect_error(function() return a:slice(1, M, 1, 2) end, "bad argument #2 to 'slice' (index 9223372036854775807 out of range 0..0)")
    local b = cd.zeros({ 1 << 62, 1 << 62, 0 }, { device = "cpu" })
    assert.are.same({ 1 << 62, (1 << 61) - 1, 0 }, b:slice(1, -3, 2, 2).shape)
    assert.are.same({ 1537228672809129302, 1 << 62, 0 }, b:slice(1, -1, 3, 1).shape)
    assert.is_true(cd._inside(a:slice(2, -2, 3), b:slice(1, -1, 3, 1)))
  end)
end)

describe("cd.random's argument numbers", function()
  -- found by the fuzzer's edge-size calls: the dtype was always named argument #4, the options #5, even where the
  -- bounds were left out and it was the second
  it("name the argument the dtype or the options were given at", function()
    expect_error(function() return cd.random.uniform(4, true) end, "bad argument #2 to 'uniform' (unknown dtype 'boolean')")
    expect_error(function() return cd.random.normal({ 2 }, "nope", {}) end,
      "bad argument #2 to 'normal' (unknown dtype 'nope')")
    expect_error(function() return cd.random.uniform(4, "f32", 5) end,
      "bad argument #3 to 'uniform' (options table expected, got number)")
    expect_error(function() return cd.random.uniform(4, 0, 1, "nope") end,
      "bad argument #4 to 'uniform' (unknown dtype 'nope')")
    expect_error(function() return cd.random.randint(0, 5, 4, "f32x") end,
      "bad argument #4 to 'randint' (unknown dtype 'f32x')")
    expect_error(function() return cd.random.randint(0, 5, 4, "i32", 7) end,
      "bad argument #5 to 'randint' (options table expected, got number)")
  end)
end)

describe("cd._inside", function()
  it("holds for arrays, views, slices, transposes and freed arrays, all in one call", function()
    local a = cd.zeros({ 4, 5, 6 }, "i16", { device = "cpu" })
    local made = { a, a:slice(4, 1, -2), a:transpose(), a:slice(2, 5, 2, 2), a[3], a[2][5], a:reshape({ 20, 6 }),
                   a:view("u8"), getmetatable(a).__flat_base(a:slice(4, 1, -1)), cd.zeros({ BIG, 0 }), cd.zeros({}),
                   a:slice(5, 4, 1) }
    for i, v in ipairs(made) do
      local ok, why = cd._inside(v)
      assert(ok == true, ("array %d: %s"):format(i, tostring(why)))
    end
    assert.is_true(cd._inside(table.unpack(made)))
    local f = cd.zeros(3)
    f:free()
    assert.is_true(cd._inside(f))
    assert.is_true(cd._inside(5, "x", nil, {}, a))   -- what is no Array is passed over
  end)
end)
