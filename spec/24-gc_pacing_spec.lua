-- The collector sees the memory behind arrays (issue 28; NOTE [collector pacing] in src/memory.c): `c = a + b` in
-- a loop, each result left to the collector, keeps the device's memory within a small multiple of what is live,
-- in the generational mode lua5.4 runs in and in the incremental one; and the out= form allocates nothing and does
-- no more Lua work than a + b (NOTE [binary fast path] in lua/cudadev/ops.lua).
local helper = require "spec.helper"
local cd = require "cudadev"

local N = 1 << 22   -- 16 MiB of float32: the old pace stepped the collector at every one, and freed none

-- The most the device reserves while `c = a + b` runs `iters` times with nothing freed by hand, over the live bytes.
local function loop_ratio(dev, iters)
  cd.empty_cache(dev)
  local a, b = cd.ones(N, "float32", { device = dev }), cd.ones(N, "float32", { device = dev })
  local c = a + b
  local peak = cd.memory_reserved(dev)
  for _ = 1, iters do
    c = a + b
    peak = math.max(peak, cd.memory_reserved(dev))
  end
  assert.are.equal(2, c[N])
  local live = 3 * N * 4
  return peak / live, cd.memory_reserved(dev) / live
end

helper.each_device(function(dev)
  describe("collector pacing on " .. dev, function()
    for _, mode in ipairs { "generational", "incremental" } do
      it("c = a + b in a loop keeps reserved memory within 2.5 times the live arrays (" .. mode .. ")", function()
        local was = collectgarbage(mode)
        local peak, after = loop_ratio(dev, 40)
        collectgarbage(was)
        assert.is_true(peak <= 2.5, ("peak %.2f times the live bytes"):format(peak))
        assert.is_true(after <= 2.5, ("after the loop %.2f times the live bytes"):format(after))
      end)
    end

    it("arrays kept in a table are not collected, and stepping does not lose count", function()
      cd.empty_cache(dev)
      local base = cd.memory_allocated(dev)
      local keep = {}
      for i = 1, 64 do keep[i] = cd.full(1 << 16, i, "float32", { device = dev }) end
      assert.are.equal(base + 64 * (1 << 18), cd.memory_allocated(dev))
      for i = 1, 64 do assert.are.equal(i, keep[i][1 << 16]) end
    end)

    -- out= runs the checks of its option table and of the out array where a + b allocates: a few dozen more Lua
    -- instructions than a + b (the general path it took ran over a thousand), and less time (the best of 5 runs)
    it("cd.add(a, b, {out = c}) allocates nothing and costs no more than a + b", function()
      local a, b = cd.ones(1024, "float32", { device = dev }), cd.ones(1024, "float32", { device = dev })
      local c = a + b
      cd.add(a, b, { out = c })   -- both forms warm
      local function vm_instructions(fn)
        local count = 0
        debug.sethook(function() count = count + 1 end, "", 1)
        for _ = 1, 100 do fn() end
        debug.sethook()
        return count
      end
      local plus = vm_instructions(function() local _ = a + b end)
      local out = { out = c }
      collectgarbage()   -- a + b's results go now, not while out= runs
      collectgarbage()
      cd.reset_peak_memory_stats(dev)
      local before = cd.memory_stats(dev)
      local with_out = vm_instructions(function() cd.add(a, b, out) end)
      local after = cd.memory_stats(dev)
      assert.are.equal(before.allocated, after.allocated)
      assert.are.equal(before.active_blocks, after.active_blocks)
      assert.are.equal(before.allocated, after.max_allocated)
      assert.is_true(with_out <= plus + 100 * 50, ("out= ran %d Lua instructions, a + b %d"):format(with_out, plus))
      assert.are.equal(2, c[1024])
      local best_plus, best_out = math.huge, math.huge
      for _ = 1, 5 do
        local t0 = cd.now()
        for _ = 1, 2000 do local _ = a + b end
        local t1 = cd.now()
        for _ = 1, 2000 do cd.add(a, b, out) end
        best_plus, best_out = math.min(best_plus, t1 - t0), math.min(best_out, cd.now() - t1)
      end
      assert.is_true(best_out <= 1.1 * best_plus, ("out= took %.1f us, a + b %.1f"):format(best_out / 2e-3,
        best_plus / 2e-3))
    end)

    it("a + b and cd.add(a, b, {out = c}) check their operands in one call, not a field read each", function()
      -- (NOTE [binary fast path]) the calls, Lua and C, that one operation makes once its kernel is kept: reading
      -- x.device, x.shape, x.is_contiguous, ... was an __index call each, 39 calls for out= and 29 for a + b
      local a, b = cd.ones(1024, "float32", { device = dev }), cd.ones(1024, "float32", { device = dev })
      local c = a + b
      cd.add(a, b, { out = c })
      local out = { out = c }
      local function calls(fn)
        local n = 0
        debug.sethook(function() n = n + 1 end, "c")
        for _ = 1, 100 do fn() end
        debug.sethook()
        return n / 100
      end
      local with_out, plus = calls(function() cd.add(a, b, out) end), calls(function() local _ = a + b end)
      assert.is_true(with_out <= 14, ("out= made %.1f calls"):format(with_out))
      assert.is_true(plus <= 11, ("a + b made %.1f calls"):format(plus))
      assert.are.equal(2, c[1024])
      -- around the kept kernel: another out dtype, shape, a strided or freed out, a freed operand go the general way
      helper.assert_error_contains(function() cd.add(a, b, { out = cd.empty(1024, "int32", { device = dev }) }) end,
        "float32, which cannot be stored in an int32")
      helper.assert_error_contains(function() cd.add(a, b, { out = cd.empty(512, "float32", { device = dev }) }) end,
        "has shape {512} but the result has shape {1024}")
      local wide = cd.zeros(2048, "float32", { device = dev })
      cd.add(a, b, { out = wide:slice(1, 2048, 2) })
      assert.are.same({ 2, 0, 2 }, { wide[1], wide[2], wide[2047] })
      assert.are.equal(2, cd.add(a, b, { out = cd.empty({ 1024, 1 }, "float32", { device = dev }):reshape(1024) })[7])
      local freed = cd.empty(1024, "float32", { device = dev })
      freed:free()
      helper.assert_error_contains(function() cd.add(a, b, { out = freed }) end, "freed array")
      helper.assert_error_contains(function() return freed + b end, "freed array")
      assert.are.equal("float64", (a + cd.ones(1024, "float64", { device = dev })).dtype)
      -- the kept kernel (the cpu device's loops off: its generated kernel) at sizes that change, its launch
      -- configuration kept for the last one
      local loops = cd._cpu_loops(false)
      local ok, err = pcall(function()
        for _, n in ipairs({ 1000, 1000, 70000, 3, 70000 }) do
          local x, y = cd.arange(0, n, 1, "float32", { device = dev }), cd.full(n, 2, "float32", { device = dev })
          for _ = 1, 2 do
            assert.are.equal(n + 1, (x + y)[n])
            local o = cd.empty(n, "float32", { device = dev })
            assert.are.equal(2 * n - 2, cd.multiply(x, y, { out = o })[n])
          end
        end
      end)
      cd._cpu_loops(loops)
      assert(ok, err)
    end)
  end)
end)

-- A script run by lua5.4 with the environment given, in the checkout; its output.
local function run(env, script)
  local f = assert(io.open("build/gc_pacing_probe.lua", "w"))
  f:write('package.cpath = "build/?.so;" .. package.cpath\n', script)
  f:close()
  local p = io.popen(env .. " lua5.4 build/gc_pacing_probe.lua 2>&1")
  local out = p:read("a")
  p:close()
  os.remove("build/gc_pacing_probe.lua")
  return out
end

describe("CUDADEV_GC_THRESHOLD", function()
  it("takes a fraction from 0 to 1 and refuses anything else, naming the variable", function()
    local probe = 'print(pcall(require, "cudadev"))'
    assert.matches("^true", run("CUDADEV_GC_THRESHOLD=0.5", probe))
    assert.matches("^true", run("CUDADEV_GC_THRESHOLD=0", probe))
    assert.are.equal("false\tbad CUDADEV_GC_THRESHOLD '1.5' (a fraction of device memory from 0 to 1 expected; 0 " ..
      "turns the collection before the threshold off)\n", run("CUDADEV_GC_THRESHOLD=1.5", probe))
    assert.matches("bad CUDADEV_GC_THRESHOLD 'lots'", run("CUDADEV_GC_THRESHOLD=lots", probe), 1, true)
  end)

  -- 12 arrays of 16 MiB are live when collected (192 MiB of a 512 MiB cpu device), then dropped while 12 new ones
  -- are kept: the old ones are old, which minor collections leave, so only a full collection frees them. The pace
  -- allows twice what survived (384 MiB); a threshold of 0.5 collects before 256 MiB are passed.
  local script = [[
local cd = require "cudadev"
local keep = {}
for i = 1, 12 do keep[i] = cd.empty(1 << 22, "float32", { device = "cpu" }) end
cd.empty_cache("cpu")
keep = {}
local peak = 0
for i = 1, 12 do
  keep[i] = cd.empty(1 << 22, "float32", { device = "cpu" })
  peak = math.max(peak, cd.memory_allocated("cpu"))
end
print(peak >> 20)
]]
  helper.worker_it("collects before the device passes it (the cpu device of CUDADEV_CPU_MEMORY)", function()
    local env = "CUDADEV_DEVICE=cpu CUDADEV_CPU_MEMORY=512M CUDADEV_GC_THRESHOLD="
    local off, half = tonumber(run(env .. "0", script)), tonumber(run(env .. "0.5", script))
    assert.is_true(half <= 256, "peak " .. tostring(half) .. " MiB with the threshold at 0.5")
    assert.is_true(off > 256 and off <= 400, "peak " .. tostring(off) .. " MiB without a threshold")
  end)
end)
