-- The pinned host pool (README "Memory"; NOTE [pinned pool] in src/memory.c). Without a GPU the test hook
-- fake_pinned (cd._hooks, NOTE [test hooks] in src/cdv.h) makes pinned=true give the pool's plain memory, so
-- the pool runs here as it does with a GPU; the gpu_it blocks check the same through the driver.
local helper = require "spec.helper"
local cd = require "cudadev"

local expect_error = helper.assert_error_matches
local MiB = 1 << 20

local DTYPES = { "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
  "uint64", "bool" }

-- n values that every dtype holds exactly, different from their neighbours where the dtype allows
local function values(dtype, n, first)
  local t = {}
  for i = 1, n do
    local k = (first or 0) + i
    if dtype == "bool" then t[i] = k % 3 ~= 0
    elseif dtype:match("^float") then t[i] = k % 1000 / 4 - 100
    elseif dtype:match("^int") then t[i] = k % 100 - 50
    else t[i] = k % 200 end
  end
  return t
end

local function stats() return cd.pinned_memory_stats() end

-- after - before, field by field
local function delta(before, after)
  local d = {}
  for k, v in pairs(after) do d[k] = v - before[k] end
  return d
end

local function live()
  collectgarbage()
  collectgarbage()
  return cd._live()
end

-- every test leaves the objects it made behind it, and the hooks as they were
local saved_hooks, live_before
before_each(function()
  saved_hooks = cd._hooks()
  live_before = live()
end)
after_each(function()
  cd._hooks(saved_hooks)
  assert.are.same(live_before, live())
end)

describe("cd._hooks", function()
  it("returns the settings before the call, and changes only the fields given", function()
    local before = cd._hooks()
    assert.are.same({ "fake_pinned", "staging_chunk", "staging_threads" },
      (function() local k = {} for name in pairs(before) do k[#k + 1] = name end table.sort(k) return k end)())
    assert.are.same(before, cd._hooks({ staging_chunk = 64 }))
    assert.are.equal(64, cd._hooks().staging_chunk)
    assert.are.equal(before.fake_pinned, cd._hooks().fake_pinned)
  end)

  it("checks its options", function()
    expect_error(function() cd._hooks({ staging_chunks = 1 }) end,
      "bad argument #1 to '_hooks' (unknown option 'staging_chunks' (expected staging_chunk, staging_threads, " ..
      "fake_pinned))")
    expect_error(function() cd._hooks({ staging_chunk = -1 }) end,
      "bad argument #1 to '_hooks' ('staging_chunk' must be an integer from 0 to 1099511627776)")
    expect_error(function() cd._hooks({ staging_threads = 1.5 }) end,
      "bad argument #1 to '_hooks' ('staging_threads' must be an integer from 0 to 256)")
    expect_error(function() cd._hooks({ fake_pinned = 1 }) end,
      "bad option 'fake_pinned' to '_hooks' (boolean expected, got number)")
  end)
end)

describe("the pinned pool", function()
  before_each(function()
    cd._hooks({ fake_pinned = true })
    cd.empty_cache()
  end)

  it("reports its statistics", function()
    local s = stats()
    local keys = {}
    for k, v in pairs(s) do
      keys[#keys + 1] = k
      assert.are.equal("integer", math.type(v), k)
    end
    table.sort(keys)
    assert.are.same({ "active_blocks", "allocated", "held_blocks", "held_bytes", "hits", "misses", "reserved" }, keys)
    assert.are.equal(0, s.held_bytes)
    assert.are.equal(0, s.held_blocks)
    assert.are.equal(s.allocated, s.reserved)
  end)

  it("gives a freed block to the next request of its size class", function()
    local s0 = stats()
    local a = cd.empty(1250, "float32", { pinned = true })   -- 5000 bytes: the 5 KiB class
    local ptr = a.ptr
    assert.is_true(a.is_pinned)
    assert.are.same({ allocated = 5120, reserved = 5120, held_bytes = 0, active_blocks = 1, held_blocks = 0,
      hits = 0, misses = 1 }, delta(s0, stats()))
    a:free()
    assert.are.same({ allocated = 0, reserved = 5120, held_bytes = 5120, active_blocks = 0, held_blocks = 1,
      hits = 0, misses = 1 }, delta(s0, stats()))
    local b = cd.zeros(5100, "uint8", { pinned = true })      -- another size, the same class
    assert.are.equal(ptr, b.ptr)
    assert.are.same({ allocated = 5120, reserved = 5120, held_bytes = 0, active_blocks = 1, held_blocks = 0,
      hits = 1, misses = 1 }, delta(s0, stats()))
    local c = cd.empty(1500, "float32", { pinned = true })   -- 6000 bytes: the next class
    assert.are_not.equal(ptr, c.ptr)
    assert.are.same({ allocated = 5120 + 6144, reserved = 5120 + 6144, held_bytes = 0, active_blocks = 2,
      held_blocks = 0, hits = 1, misses = 2 }, delta(s0, stats()))
    b:free()
    c:free()
  end)

  it("pins four size classes per power of two, at least a page", function()
    for _, case in ipairs { { 1, 4096 }, { 4096, 4096 }, { 4097, 5120 }, { 8192, 8192 }, { 10000, 10240 },
      { MiB, MiB }, { MiB + 1, MiB + MiB // 4 }, { 3 * MiB + 1, 3 * MiB + MiB // 2 }, { 7 * MiB, 7 * MiB } } do
      local s0 = stats()
      local a = cd.empty(case[1], "uint8", { pinned = true })
      assert.are.equal(case[2], delta(s0, stats()).allocated, ("a request of %d bytes"):format(case[1]))
      a:free()
    end
  end)

  it("reuses the most recently freed block of a class first", function()
    local a, b = cd.empty(100, { pinned = true }), cd.empty(100, { pinned = true })
    local pa, pb = a.ptr, b.ptr
    a:free()
    b:free()
    assert.are.equal(pb, cd.empty(100, { pinned = true }).ptr)
    assert.are.equal(pa, cd.empty(100, { pinned = true }).ptr)
  end)

  it("takes a block back only when the last view of it is gone", function()
    local s0 = stats()
    local a = cd.array(values("int32", 10), "int32", { pinned = true })
    local v = a:slice(3, 6)
    a:free()
    assert.are.equal(1, delta(s0, stats()).active_blocks)
    assert.are.same({ 3 - 50, 4 - 50, 5 - 50, 6 - 50 }, v:totable())
    v = nil
    collectgarbage()
    collectgarbage()
    assert.are.same({ 0, 1 }, { delta(s0, stats()).active_blocks, delta(s0, stats()).held_blocks })
  end)

  it("makes no block for an empty pinned array", function()
    local s0 = stats()
    local a = cd.empty(0, { pinned = true })
    assert.is_true(a.is_pinned)
    assert.are.same({}, a:totable())
    a:free()
    assert.are.same({ allocated = 0, reserved = 0, held_bytes = 0, active_blocks = 0, held_blocks = 0, hits = 0,
      misses = 0 }, delta(s0, stats()))
  end)

  it("gives the cached blocks back on empty_cache() and empty_cache('cpu')", function()
    cd.empty(100, { pinned = true }):free()
    local kept = cd.empty(5000, { pinned = true })
    assert.are.equal(2, stats().held_blocks + stats().active_blocks)
    cd.empty_cache("cpu")
    local s = stats()
    assert.are.same({ 0, 0, 1, 20480 }, { s.held_blocks, s.held_bytes, s.active_blocks, s.reserved })
    kept:free()
    cd.empty(100, { pinned = true })   -- dropped at once: empty_cache collects it first
    cd.empty_cache()
    s = stats()
    assert.are.same({ 0, 0, 0, 0 }, { s.held_blocks, s.held_bytes, s.active_blocks, s.reserved })
  end)

  it("pinned arrays made like others come from the pool too", function()
    local a = cd.zeros(1000, "int16", { pinned = true })
    local s0 = stats()
    local b = a:new_full(1000, 7)
    local c = cd.empty_like(a)
    assert.is_true(b.is_pinned and c.is_pinned)
    assert.are.equal(2, delta(s0, stats()).active_blocks)
    assert.are.equal(7, b[1000])
  end)

  if not helper.cuda_available then
    it("is left alone by pinned=true without a driver and without the hook", function()
      cd._hooks({ fake_pinned = false })
      local s0 = stats()
      local a = cd.zeros(100, { pinned = true })
      assert.is_false(a.is_pinned)
      a:free()
      assert.are.same(s0, stats())
    end)
  end
end)

describe("the pinned pool on a GPU", function()
  before_each(function()
    if helper.cuda_available then cd.empty_cache() end
  end)

  helper.gpu_it("pinned arrays are page-locked blocks of the pool, reused", function()
    local s0 = stats()
    local a = cd.empty(MiB, "float32", { pinned = true })
    local ptr = a.ptr
    a:free()
    local b = cd.full(MiB, 2.5, "float32", { pinned = true })
    assert.is_true(b.is_pinned)
    assert.are.equal(ptr, b.ptr)
    assert.are.same({ 1, 1 }, { delta(s0, stats()).hits, delta(s0, stats()).misses })
    local g = b:to("cuda:0")
    b:fill(0)
    b:copy_from(g)
    assert.are.equal(2.5, b[MiB])
  end)

  helper.gpu_it("empty_cache('cuda:0') keeps the pinned blocks; empty_cache() gives them back", function()
    cd.empty(MiB, { pinned = true }):free()
    assert.are.equal(1, stats().held_blocks)
    cd.empty_cache("cuda:0")
    assert.are.equal(1, stats().held_blocks)
    cd.empty_cache()
    assert.are.same({ 0, 0 }, { stats().held_blocks, stats().held_bytes })
  end)
end)
