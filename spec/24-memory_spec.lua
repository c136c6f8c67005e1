-- Device memory statistics and the blocks kept for reuse (API.md "Memory"; NOTE [block cache] in src/memory.c,
-- NOTE [caching pool] in src/backend_cuda.c). The same tests run on the cpu device and, with a GPU, on cuda:0.
local helper = require "spec.helper"
local cd = require "cudadev"

local MiB = 1 << 20
local SLOTS, MAX_KEPT = 32, 64 * MiB   -- CDV_BLOCK_SLOTS, BLOCK_MAX_BYTES

local function held(dev) return cd.memory_stats(dev).held_blocks end

local function fresh(dev)   -- nothing kept, nothing left for the collector
  cd.empty_cache(dev)
  assert.are.equal(0, held(dev))
end

helper.each_device(function(dev)
  describe("memory on " .. dev, function()
    local opts = { device = dev }

    it("memory_stats has the fields of API.md, and they add up", function()
      fresh(dev)
      local s = cd.memory_stats(dev)
      for _, k in ipairs { "allocated", "max_allocated", "reserved", "active_blocks", "held_blocks", "held_bytes" } do
        assert.are.equal("integer", math.type(s[k]), k)
      end
      local a = cd.empty(MiB // 4, opts)
      local after = cd.memory_stats(dev)
      assert.are.equal(s.allocated + MiB, after.allocated)
      assert.are.equal(s.active_blocks + 1, after.active_blocks)
      assert.is_true(after.max_allocated >= after.allocated)
      assert.is_true(after.reserved >= after.allocated)
      assert.are.equal(after.allocated, cd.memory_allocated(dev))
      assert.are.equal(after.max_allocated, cd.max_memory_allocated(dev))
      assert.are.equal(after.reserved, cd.memory_reserved(dev))
      a:free()
      local freed = cd.memory_stats(dev)
      assert.are.equal(s.allocated, freed.allocated)
      assert.are.equal(s.active_blocks, freed.active_blocks)
      assert.are.equal(1, freed.held_blocks)
      assert.is_true(freed.held_bytes >= MiB)
      assert.are.equal(freed.reserved - freed.allocated, freed.held_bytes)
      cd.reset_peak_memory_stats(dev)
      assert.are.equal(freed.allocated, cd.max_memory_allocated(dev))
    end)

    it("hands a freed block to the next array of its size class on its stream", function()
      fresh(dev)
      local a = cd.empty(1000, "float32", opts)   -- 4000 bytes: the 4096-byte class
      local p = a.ptr
      a:free()
      local b = cd.empty(1020, "float32", opts)   -- 4080 bytes: the same class
      assert.are.equal(p, b.ptr)
      assert.are.equal(0, held(dev))
      b:free()
      local c = cd.empty(1030, "float32", opts)   -- 4120 bytes: the next class
      assert.are_not.equal(p, c.ptr)
      assert.are.equal(1, held(dev))
      c:free()
      assert.are.equal(2, held(dev))
    end)

    it("does not hand a block freed on one stream to an array on another", function()
      fresh(dev)
      local s = cd.stream(dev)
      local a = cd.empty(MiB, { device = dev, stream = s })
      local p = a.ptr
      a:free()
      local b = cd.empty(MiB, opts)   -- the current stream
      assert.are_not.equal(p, b.ptr)
      local c = cd.empty(MiB, { device = dev, stream = s })
      assert.are.equal(p, c.ptr)
      b:free()
      c:free()
      assert.are.equal(2, held(dev))
      s:destroy()   -- the block kept for s goes back with it
      assert.are.equal(1, held(dev))
    end)

    it("keeps the last 32 blocks, gives the older ones back, and keeps none over 64 MiB", function()
      fresh(dev)
      local arrays = {}
      for i = 1, SLOTS + 8 do arrays[i] = cd.empty(1024 * i, opts) end   -- each its own class
      local ninth = arrays[9].ptr
      for _, a in ipairs(arrays) do a:free() end
      assert.are.equal(SLOTS, held(dev))
      local oldest = cd.empty(1024, opts)   -- the first 8 went back: a new block
      assert.are.equal(SLOTS, held(dev))
      local kept = cd.empty(1024 * 9, opts)
      assert.are.equal(ninth, kept.ptr)
      assert.are.equal(SLOTS - 1, held(dev))
      oldest:free()
      kept:free()
      fresh(dev)
      local big = cd.empty(MAX_KEPT + 512, "uint8", opts)
      big:free()
      assert.are.equal(0, held(dev))
    end)

    it("empty_cache and a reset give the kept blocks back", function()
      fresh(dev)
      cd.empty(MiB, opts):free()
      cd.empty(2 * MiB, opts):free()
      assert.are.equal(2, held(dev))
      cd.empty_cache(dev)
      assert.are.equal(0, held(dev))
      assert.are.equal(cd.memory_allocated(dev), cd.memory_reserved(dev) - cd.memory_stats(dev).held_bytes)
      if dev == "cpu" then   -- a GPU's reset is in spec/90, in a child process
        cd.empty(MiB, opts):free()
        assert.are.equal(1, held(dev))
        cd.device(dev):reset()
        assert.are.equal(0, held(dev))
      end
    end)

    it("a dropped array's block is kept once collected, and a loop that drops 1 MiB arrays stays small", function()
      fresh(dev)
      cd.reset_peak_memory_stats(dev)
      local base = cd.memory_allocated(dev)
      for _ = 1, 2000 do local _ = cd.empty(MiB // 4, opts) end   -- 2000 MiB in all, none freed by hand
      assert.is_true(cd.max_memory_allocated(dev) - base <= 64 * MiB,
        ("%d MiB were allocated at once"):format((cd.max_memory_allocated(dev) - base) // MiB))
      collectgarbage()
      collectgarbage()
      assert.are.equal(base, cd.memory_allocated(dev))
      assert.is_true(held(dev) >= 1)
    end)

    it("kept blocks hold values of before: empty does not clear, zeros does", function()
      fresh(dev)
      local a = cd.full(256, 7, "int32", opts)
      local p = a.ptr
      a:free()
      local e = cd.empty(256, "int32", opts)
      assert.are.equal(p, e.ptr)
      assert.are.equal(7, e[1])
      e:free()
      local z = cd.zeros(256, "int32", opts)
      assert.are.equal(p, z.ptr)
      assert.are.equal(0, z[1])
      assert.are.equal(0, z[256])
      z:free()
    end)
  end)
end)

describe("memory when a state closes", function()
  it("its kept blocks go back, and freeing at close is clean", function()
    assert.are.equal("1 0\nexit 0\n", helper.run_child([[
      cd.empty(1 << 20, { device = "cpu" }):free()
      io.write(cd.memory_stats("cpu").held_blocks, " ")
      local keep = {}
      for i = 1, 40 do keep[i] = cd.empty(4096 * i, { device = "cpu" }) end   -- freed at close, into the cache
      io.write(cd.memory_stats("cpu").active_blocks - 40, "\n")
      os.exit(0, true)
    ]], "CUDADEV_CPU_FORK=0"))
  end)
end)

describe("memory on a GPU", function()
  helper.gpu_it("dropping 1 MiB arrays for 100 GiB in all never runs out, and the kept block serves each next one", function()
    local before = cd.memory_allocated("cuda:0")
    for _ = 1, 100 * 1024 do local _ = cd.empty(MiB // 4, { device = "cuda:0" }) end
    collectgarbage()
    collectgarbage()
    assert.are.equal(before, cd.memory_allocated("cuda:0"))
    cd.empty_cache("cuda:0")
    assert.are.equal(0, held("cuda:0"))
  end)

  helper.gpu_it("a block kept for a stream goes to the next array on that stream, in order after its work", function()
    local s = cd.stream("cuda:0")
    local n = 1 << 20
    local k = cd.compile([[extern "C" __global__ void slow_fill(int *p, int n, int v) {
      long long t0 = clock64(); while (clock64() - t0 < 2000000) {}   // about a millisecond: the fill lands late
      for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] = v; }]],
      { device = "cuda:0" }).slow_fill
    local cfg = { grid = 64, block = 256, stream = s }
    local a = cd.empty(n, "int32", { device = "cuda:0", stream = s })
    local p = a.ptr
    k(cfg, a, n, 1)
    a:free()   -- ordered after the kernel on s; kept, not waited for
    local other = cd.empty(n, "int32", { device = "cuda:0" })   -- the current stream is not s
    assert.are_not.equal(p, other.ptr)
    local b = cd.empty(n, "int32", { device = "cuda:0", stream = s })
    assert.are.equal(p, b.ptr)
    k(cfg, b, n, 2)
    local h = b:to("cpu", { stream = s })
    s:synchronize()
    assert.are.equal(2, h[1])
    assert.are.equal(2, h[n])
    other:free()
    b:free()
    s:destroy()
  end)
end)
