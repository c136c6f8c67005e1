-- The pinned host pool and staged copies (README "Memory"; NOTE [pinned pool] in src/memory.c, NOTE [staged
-- copies] in src/staging.c). Without a GPU the test hooks (cd._hooks, NOTE [test hooks] in src/cdv.h) make
-- pinned=true give the pool's plain memory and stage every copy between pageable and pinned host memory in
-- small pieces, so the pool and the staging pipeline run here as they do with a GPU; the gpu_it blocks check
-- the same through the driver, with the sizes that are staged for real.
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

-- the settings every describe starts from, whatever the environment set (CUDADEV_STAGING_CHUNK=... busted is a
-- stress of its own)
local DEFAULTS = { staging_chunk = 0, staging_threads = 0, fake_pinned = false }
local function hooks(t)
  local h = {}
  for k, v in pairs(DEFAULTS) do h[k] = v end
  for k, v in pairs(t) do h[k] = v end
  cd._hooks(h)
end

-- The cpu describes run on the cpu device also where a GPU is the default device.
local previous_device
local function on_cpu() previous_device = cd.get_device(); cd.set_device("cpu") end
local function back() cd.set_device(previous_device) end

describe("the pinned pool", function()
  before_each(function()
    on_cpu()
    hooks({ fake_pinned = true })
    cd.empty_cache()
  end)
  after_each(back)

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
      hooks({})
      local s0 = stats()
      local a = cd.zeros(100, { pinned = true })
      assert.is_false(a.is_pinned)
      a:free()
      assert.are.same(s0, stats())
    end)
  end
end)

describe("staged copies on the cpu device (test hooks: small pieces)", function()
  before_each(function()
    on_cpu()
    hooks({ fake_pinned = true, staging_chunk = 24 })   -- 24 bytes: 3 float64, 6 float32, 24 int8
    cd.empty_cache()
  end)
  after_each(back)

  for _, dtype in ipairs(DTYPES) do
    it(("convert a table of %s straight into the staging buffers, in pieces that do not divide it"):format(dtype),
      function()
        for _, n in ipairs { 1, 11, 24, 25 } do
          local t = values(dtype, n)
          local p = cd.zeros(n, dtype, { pinned = true })
          cd.copy(p, t)
          assert.are.same(t, p:totable(), ("%d elements"):format(n))
          p:free()
        end
      end)
  end

  it("convert tables around the 32-element batches (NOTE [table batches]), floats and not, checked as before",
    function()
      for _, chunk in ipairs { 24, 4096, 0 } do   -- pieces smaller than a batch, larger, and direct
        cd._hooks({ staging_chunk = chunk })
        for _, dtype in ipairs { "float32", "float64", "int32" } do
          for _, n in ipairs { 31, 32, 33, 64, 65, 100 } do
            local t = values(dtype, n)
            local p = cd.zeros(n, dtype, { pinned = true })
            cd.copy(p, t)
            assert.are.same(t, p:totable(), ("%s, %d elements, pieces of %d bytes"):format(dtype, n, chunk))
            cd.copy(p, t, { src_offset = 30, dst_offset = 1, count = n - 31 })
            local got = p:totable()
            for i = 1, n - 31 do assert.are.equal(t[30 + i], got[1 + i], ("%s, %d elements, offsets"):format(dtype, n)) end
            assert.are.equal(t[1], got[1])
            p:free()
          end
        end
        local p = cd.zeros(70, "float32", { pinned = true })
        local t = values("float32", 70)
        t[40] = "x"
        expect_error(function() cd.copy(p, t) end, "bad argument #2 to 'copy' (element 40: number expected, got string)")
        t[40] = 1
        t[33] = "1.5"   -- a string that reads as a number is still not one
        expect_error(function() cd.copy(p, t) end, "bad argument #2 to 'copy' (element 33: number expected, got string)")
        t[33] = 2
        local rows = { values("float32", 33), values("float32", 37, 33) }
        p:copy_from(rows)
        assert.are.same(values("float32", 70), p:totable())
        p:free()
      end
    end)

  it("copy exact multiples of the piece, and nested tables", function()
    local p = cd.zeros(12, "float32", { pinned = true })   -- two pieces of 6
    p:copy_from({ { 1, 2, 3 }, { 4, { 5, 6, 7 } }, 8, { 9, 10, 11, 12 } })
    assert.are.same({ 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12 }, p:totable())
    local q = cd.array({ { 1, 2 }, { 3, 4 } }, "int64", { pinned = true })
    cd.copy(q, { { 5, 6 }, { 7, 8 } })
    assert.are.same({ { 5, 6 }, { 7, 8 } }, q:totable())
  end)

  it("copy a range of a table, and check every element as the whole copy would", function()
    local p = cd.zeros(20, "int32", { pinned = true })
    cd.copy(p, values("int32", 30), { src_offset = 7, dst_offset = 3, count = 15 })
    local want = {}
    for i = 1, 20 do want[i] = (i > 3 and i <= 18) and (i + 4) % 100 - 50 or 0 end
    assert.are.same(want, p:totable())
    for _, chunk in ipairs { 24, 0 } do   -- staged, then direct
      cd._hooks({ staging_chunk = chunk })
      expect_error(function() cd.copy(p, { 1, "x", 3, 4 }, { src_offset = 2 }) end,
        "bad argument #2 to 'copy' (element 2: number expected, got string)")
      expect_error(function() cd.copy(p, { 1, 2, 3, true }, { count = 2 }) end,
        "bad argument #2 to 'copy' (element 4: number expected, got boolean)")
    end
  end)

  it("copy strings with offsets", function()
    local p = cd.zeros(10, "int16", { pinned = true })
    cd.copy(p, string.pack("<i2i2i2i2i2i2i2i2", 1, 2, 3, 4, 5, 6, 7, 8), { src_offset = 1, dst_offset = 2, count = 6 })
    assert.are.same({ 0, 0, 2, 3, 4, 5, 6, 7, 0, 0 }, p:totable())
    p:copy_from(("\255\127"):rep(10))
    assert.are.same({ 32767, 32767, 32767, 32767, 32767, 32767, 32767, 32767, 32767, 32767 }, p:totable())
  end)

  it("copy pageable arrays into pinned ones and back, with offsets", function()
    local h = cd.array(values("float64", 17), "float64")
    local p = cd.zeros(20, "float64", { pinned = true })
    cd.copy(p, h, { src_offset = 1, dst_offset = 2, count = 16 })   -- host to "device": 6 pieces, the last of 1
    local want = { 0, 0 }
    for i = 2, 17 do want[#want + 1] = h[i] end
    want[19], want[20] = 0, 0
    assert.are.same(want, p:totable())
    local back = cd.full(21, -1, "float64")
    cd.copy(back, p, { src_offset = 2, dst_offset = 5, count = 16 })   -- "device" to host
    for i = 1, 21 do
      assert.are.equal((i > 5 and i <= 21) and h[i - 4] or -1, back[i], ("element %d"):format(i))
    end
    local whole = cd.zeros(20, "float64")
    whole:copy_from(p)
    assert.are.same(p:totable(), whole:totable())
  end)

  it("copy on a stream", function()
    local s = cd.stream("cpu")
    local p = cd.zeros(9, "uint16", { pinned = true })
    cd.copy(p, values("uint16", 9), { stream = s })
    local h = cd.zeros(9, "uint16")
    cd.copy(h, p, { stream = s })
    assert.are.same(values("uint16", 9), h:totable())
  end)

  it("lend the buffers from the pinned pool and give them back", function()
    local p = cd.zeros(100, "int32", { pinned = true })   -- 17 pieces of 6: four buffers of 4 KiB
    local s0 = stats()
    cd.copy(p, values("int32", 100))
    assert.are.same({ allocated = 0, reserved = 4 * 4096, held_bytes = 4 * 4096, active_blocks = 0, held_blocks = 4,
      hits = 0, misses = 4 }, delta(s0, stats()))
    local h = cd.zeros(100, "int32")
    cd.copy(h, p)
    cd.copy(p, values("int32", 5))   -- one piece: one buffer
    assert.are.same({ allocated = 0, reserved = 4 * 4096, held_bytes = 4 * 4096, active_blocks = 0, held_blocks = 4,
      hits = 5, misses = 4 }, delta(s0, stats()))
    assert.are.same(values("int32", 100), h:totable())
  end)

  it("stop at an element that does not convert, leaving no buffer out and the pieces before it copied", function()
    local p = cd.zeros(20, "int32", { pinned = true })
    local t = values("int32", 20)
    t[15] = "x"
    local s0 = stats()
    expect_error(function() cd.copy(p, t) end, "bad argument #2 to 'copy' (element 15: number expected, got string)")
    local d = delta(s0, stats())
    assert.are.same({ 0, 0 }, { d.active_blocks, d.allocated })
    local got, want = p:totable(), values("int32", 20)
    for i = 13, 20 do want[i] = 0 end   -- pieces of 6: elements 1 to 12 were sent, 13 and 14 were not
    assert.are.same(want, got)
  end)

  it("finish at any depth of the Lua stack, in coroutines too", function()
    -- Lua 5.4.4's lua_settop closed a to-be-closed slot through a stack pointer that the __close call could
    -- move; staging.c closes its stage with lua_closeslot. Run in a child: the bug was a crash.
    assert.are.equal("5,6,7,8\nexit 0\n", helper.run_child([[
      cd._hooks({ fake_pinned = true, staging_chunk = 8 })
      local p = cd.zeros(4, "int32", { pinned = true })
      local function at(k, ...)
        if k == 0 then
          cd.copy(p, { 1, 2, 3, 4 })
          return cd.copy(p, "\5\0\0\0\6\0\0\0", { dst_offset = 2 })
        end
        return at(k - 1, k, ...)
      end
      for k = 0, 300 do
        at(k)
        coroutine.wrap(function(...) cd.copy(p, { 5, 6, 7, 8 }) end)(table.unpack(p:totable(), 1, k))
      end
      io.write(table.concat(p:totable(), ","), "\n")
    ]]))
  end)

  it("split large host copies over threads", function()
    cd._hooks({ staging_chunk = 3 * MiB, staging_threads = 3 })
    local n = 7 * MiB + 5   -- three pieces: 3 MiB (three parts of 1 MiB), 3 MiB, 1 MiB + 5 (one part)
    local parts = {}
    for i = 0, n // 8 do parts[#parts + 1] = ("%07d|"):format(i) end
    local s = table.concat(parts):sub(1, n)
    local p = cd.empty(n, "uint8", { pinned = true })
    cd.copy(p, s)
    local h = cd.empty(n + 3, "uint8")
    cd.copy(h, p, { dst_offset = 3 })
    local function check(i)   -- byte i (1-based) of s
      assert.are.equal(s:byte(i), p[i], ("pinned byte %d"):format(i))
      assert.are.equal(s:byte(i), h[i + 3], ("host byte %d"):format(i))
    end
    for i = 1, n, 4093 do check(i) end
    for _, mib in ipairs { 1, 2, 3, 4, 5, 6, 7 } do
      for i = mib * MiB - 2, math.min(mib * MiB + 2, n) do check(i) end
    end
    for i = n - 8, n do check(i) end
  end)
end)

describe("the pinned pool and staged copies on a GPU", function()
  before_each(function()
    hooks({})
    if helper.cuda_available then cd.empty_cache() end
  end)

  -- int32 host array of n elements whose element i is i, filled 2^16 at a time
  local function iota_host(n)
    local h = cd.empty(n, "int32", { device = "cpu" })
    local t = {}
    for off = 0, n - 1, 65536 do
      local m = math.min(65536, n - off)
      for i = 1, m do t[i] = off + i end
      for i = m + 1, #t do t[i] = nil end
      cd.copy(h, t, { dst_offset = off })
    end
    return h
  end

  -- element i of a is i + shift at sampled places, both ends and every piece boundary of 512 KiB
  local function check_iota(a, n, shift, first)
    first = first or 1
    local at = { first, first + n - 1 }
    for i = first, first + n - 1, 9973 do at[#at + 1] = i end
    for b = 131072, n, 131072 do
      for i = b - 1, b + 2 do if i >= 1 and i <= n then at[#at + 1] = first + i - 1 end end
    end
    for _, i in ipairs(at) do assert.are.equal(i - first + 1 + shift, a[i], ("element %d"):format(i)) end
  end

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

  helper.gpu_it("copy large pageable arrays both ways through the staging buffers, with offsets", function()
    local n = 4 * MiB + 3   -- 16 MiB + 12 bytes: four pieces of 4 MiB + 64 KiB, the last shorter
    local h = iota_host(n)
    local g = cd.full(n + 5, -1, "int32", { device = "cuda:0" })
    local s0 = stats()
    cd.copy(g, h, { dst_offset = 5 })
    assert.are.equal(-1, g[5])
    check_iota(g, n, 0, 6)
    local back = cd.full(n + 7, -1, "int32", { device = "cpu" })
    cd.copy(back, g, { src_offset = 5, dst_offset = 2, count = n })
    assert.are.equal(-1, back[2])
    check_iota(back, n, 0, 3)
    local d = delta(s0, stats())
    assert.are.equal(0, d.active_blocks)
    assert.are.equal(4, d.misses)   -- four buffers of 8 MiB, pinned once
    assert.are.equal(4, d.hits)     -- and lent again to the copy back
    local t = g:slice(6, 6 + 262143):totable()   -- 1 MiB back into a table, staged on the way
    assert.are.equal(262144, t[262144])
  end)

  helper.gpu_it("copy a Lua string and a Lua table straight through the staging buffers", function()
    local s = ("\1\2\3\4\5\6\7\8"):rep(MiB // 4)   -- 2 MiB
    local g = cd.zeros(2 * MiB, "uint8", { device = "cuda:0" })
    local s0 = stats()
    g:copy_from(s)
    for _, i in ipairs { 1, 8, 9, 65536, MiB + 7, 2 * MiB } do assert.are.equal((i - 1) % 8 + 1, g[i]) end
    local t = {}
    for i = 1, 262145 do t[i] = i * 0.5 end   -- 1 MiB + 4 bytes of float32
    local f = cd.array(t, "float32", { device = "cuda:0" })
    for _, i in ipairs { 1, 65536, 65537, 131072, 262145 } do assert.are.equal(i * 0.5, f[i]) end
    assert.is_true(delta(s0, stats()).hits + delta(s0, stats()).misses >= 2)
  end)

  helper.gpu_it("a bad element in the middle of a staged table copy leaves nothing behind", function()
    local n = 524288   -- 2 MiB of int32: pieces of 512 KiB (131072 elements)
    local t = {}
    for i = 1, n do t[i] = i end
    t[300000] = "x"
    local g = cd.zeros(n, "int32", { device = "cuda:0" })
    local s0 = stats()
    expect_error(function() cd.copy(g, t) end, "bad argument #2 to 'copy' (element 300000: number expected, got string)")
    assert.are.equal(0, delta(s0, stats()).active_blocks)
    assert.are.same({ 1, 262144, 0 }, { g[1], g[262144], g[262145] })   -- two pieces were sent
  end)

  helper.gpu_it("small copies stay direct", function()
    local g = cd.zeros(1000, "float32", { device = "cuda:0" })
    local s0 = stats()
    g:copy_from(cd.full(1000, 3, "float32", { device = "cpu" }))
    cd.copy(g, { 1, 2, 3 })
    assert.are.same({ 1, 2, 3, 3 }, { g[1], g[2], g[3], g[4] })
    assert.are.same({ 0, 0 }, { delta(s0, stats()).hits, delta(s0, stats()).misses })
  end)

  helper.gpu_it("staged copies on a stream are complete when they return", function()
    local s = cd.stream("cuda:0")
    local n = 2 * MiB
    local h = iota_host(n)
    local g = cd.empty(n, "int32", { device = "cuda:0", stream = s })
    cd.copy(g, h, { stream = s })
    h:fill(0)   -- the source may be reused at once
    local back = cd.empty(n, "int32", { device = "cpu" })
    cd.copy(back, g, { stream = s })
    check_iota(back, n, 0)   -- read at once, no synchronize
  end)

  helper.gpu_it("force small pieces through the driver", function()
    cd._hooks({ staging_chunk = 4104 })   -- 1026 int32 a piece
    local n = 100003
    local h = iota_host(n)
    local g = cd.zeros(n, "int32", { device = "cuda:0" })
    cd.copy(g, h)
    local back = cd.zeros(n, "int32", { device = "cpu" })
    back:copy_from(g)
    local t = back:totable()
    for i = 1, n do if t[i] ~= i then assert.are.equal(i, t[i], ("element %d"):format(i)) end end
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
