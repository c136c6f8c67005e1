-- Device memory of up to 32 MiB in 2 MiB granules of cudadev's own (NOTE [granules] in
-- src/backend_cuda_granules.c): what the device reserves follows what is live, blocks never overlap, a block freed on
-- one stream is not handed to another before the work that used it has run, and cd.empty_cache gives it all back.
-- CUDA devices only: the cpu device's memory is its own mappings (NOTE [cpu memory]).
local helper = require "spec.helper"
local cd = require "cudadev"

local MiB = 1 << 20

describe("granules", function()
  -- issue 28's sweep: `c = a + b` left to the collector, float32 of 2^10 to 2^20 elements, in a new process (the
  -- suite's own arrays would share its segments). Reserved after the loop is within twice the three live arrays, or
  -- within one 2 MiB granule where that is more (bench/arrays_sweep's goal; the driver's pool held 32 MiB at each size).
  helper.gpu_it("c = a + b in a loop reserves within twice the live bytes, or one granule", function()
    local out = helper.run_child([[
      for k = 10, 20, 2 do
        local n = 1 << k
        local a, b = cd.ones(n, "float32"), cd.ones(n, "float32")
        local c = a + b
        for _ = 1, 300 do c = a + b end
        cd.synchronize()
        assert(c[n] == 2)
        print(k, cd.memory_reserved(), 3 * n * 4)
        a, b, c = nil, nil, nil
        collectgarbage()
        cd.empty_cache()
      end
    ]])
    assert.is_truthy(out:find("exit 0\n", 1, true), out)
    local rows = 0
    for k, reserved, live in out:gmatch("(%d+)\t(%d+)\t(%d+)\n") do
      reserved, live = tonumber(reserved), tonumber(live)
      local bound = math.max(2 * live, 2 * MiB)
      assert.is_true(reserved <= bound, ("2^%s float32: %d bytes reserved for %d live (at most %d)"):format(k,
        reserved, live, bound))
      rows = rows + 1
    end
    assert.are.equal(6, rows, out)
  end)

  -- 300 arrays of sizes from 4 bytes to 6 MiB (slabs of every class and segments of their own), each filled with
  -- its own value, half freed and made again: every array still holds its value, so no two share memory.
  helper.gpu_it("arrays of every size class hold their own values while others come and go", function()
    local sizes, arrays = helper.lcg_values(300, 24), {}
    local function make(i)
      local n = 1 + math.floor((sizes[i] + 1) / 2 * (i % 3 == 0 and 1.5 * MiB or 40000))
      arrays[i] = cd.full(n, i, "float32", { device = "cuda:0" })
    end
    local function check()
      for i, a in ipairs(arrays) do
        assert.are.same({ i, i, i }, { a:min(), a:max(), a[a.size] }, "array " .. i)
      end
    end
    for i = 1, #sizes do make(i) end
    check()
    for i = 1, #sizes, 2 do arrays[i]:free() end
    for i = 1, #sizes, 2 do make(i) end
    check()
  end)

  -- x's block is freed on s1 after a kernel that writes x late; the 32 blocks freed on s1 after it push it out of the
  -- state's cache (CDV_BLOCK_SLOTS, NOTE [block cache]) into the allocator, with no synchronisation; y is made on s2
  -- at once, of x's size class: y must not get x's memory before that kernel has run, or the late write lands in y.
  helper.gpu_it("a block freed on one stream is not reused on another before its work has run", function()
    local m = cd.compile([[
      extern "C" __global__ void late_write(float *x, long long cycles, float v) {
        long long t0 = clock64();
        while (clock64() - t0 < cycles) {}
        x[threadIdx.x] = v;
      }]], { device = "cuda:0" })
    local s1, s2 = cd.stream("cuda:0"), cd.stream("cuda:0")
    for _ = 1, 3 do
      local x = cd.zeros(256, "float32", { device = "cuda:0", stream = s1 })
      m.late_write({ grid = 1, block = 256, stream = s1 }, x, 100000000, 5)   -- about 50 ms
      x:free()
      local others = {}
      for i = 1, 33 do others[i] = cd.empty(4096 + i, "float32", { device = "cuda:0", stream = s1 }) end
      for i = 1, 33 do others[i]:free() end
      assert.is_false(s1:query(), "late_write ended before the test could race it")
      local y = cd.full(256, 7, "float32", { device = "cuda:0", stream = s2 })
      cd.synchronize()
      assert.are.same(helper.values(cd.full(256, 7, "float32", { device = "cpu" })), helper.values(y:to("cpu")))
    end
    s1:destroy()
    s2:destroy()
  end)

  helper.gpu_it("cd.empty_cache gives back the segments of freed arrays", function()
    collectgarbage()
    cd.empty_cache("cuda:0")
    local before = cd.memory_reserved("cuda:0")
    local keep = {}
    for i = 1, 40 do keep[i] = cd.empty((i % 4 + 1) * 60000, "float32", { device = "cuda:0" }) end
    assert.is_true(cd.memory_reserved("cuda:0") > before)
    keep = nil
    collectgarbage()
    cd.empty_cache("cuda:0")
    assert.are.equal(before, cd.memory_reserved("cuda:0"))
  end)

  -- Arrays made while a stream is captured come from the driver's pool (graph memory), and the graph runs. An array
  -- made on another stream inside the capture takes the granules, whose search asks about the event of a block freed
  -- on a third stream (pushed out of the state's cache by 32 more): a query that a thread-local capture forbids, and
  -- that invalidated it, unless the thread's capture mode is relaxed (NOTE [granules]).
  helper.gpu_it("a captured graph that allocates, and allocates on another stream, still replays", function()
    local s, s2, s3 = cd.stream("cuda:0"), cd.stream("cuda:0"), cd.stream("cuda:0")
    local a = cd.ones(1000, "float32", { device = "cuda:0", stream = s })
    local out = cd.zeros(1000, "float32", { device = "cuda:0", stream = s })
    local x = cd.ones(1000, "float32", { device = "cuda:0", stream = s3 })
    x:free()
    local others = {}
    for i = 1, 33 do others[i] = cd.empty(4096 + i, "float32", { device = "cuda:0", stream = s3 }) end
    for i = 1, 33 do others[i]:free() end
    local side
    local g = cd.capture(s, function()
      side = cd.empty(1000, "float32", { device = "cuda:0", stream = s2 })
      local t = a + a
      cd.add(t, a, { out = out })
    end)
    g:launch(s)
    s:synchronize()
    assert.are.equal(3000, out:sum())
    assert.are.equal(1000, side.size)
  end)

  -- A peer let into cuda:0's pool reads cuda:0's small arrays (segments of our own) as it reads the pool's.
  helper.multi_gpu_it("a peer with mempool access reads small arrays of the device", function()
    if not cd.is_mempool_access_supported("cuda:0", "cuda:1") then return end
    local was = cd.is_mempool_access_enabled("cuda:0", "cuda:1")
    cd.set_mempool_access_enabled("cuda:0", "cuda:1", true)
    local x = cd.full(1000, 3, "float32", { device = "cuda:0" })   -- a slab's block
    local m = cd.compile([[
      extern "C" __global__ void twice(const float *x, float *y, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) y[i] = 2 * x[i];
      }]], { device = "cuda:1" })
    local y = cd.zeros(1000, "float32", { device = "cuda:1" })
    m.twice({ grid = 4, block = 256 }, x, y, 1000)
    cd.synchronize("cuda:1")
    assert.are.equal(6000, y:sum())
    cd.set_mempool_access_enabled("cuda:0", "cuda:1", was)
  end)
end)
