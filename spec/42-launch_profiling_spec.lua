-- Launches beyond the common case (doc/launch-profiling.md): dynamic shared memory above 48 KiB, cooperative
-- launches with grid-wide sync, and profiling (cd.profile_start/stop, cd.profiling, NVTX ranges). The same
-- kernels run on "cpu" and, when there is a GPU, on "cuda:0", checked against host references.
local helper = require "spec.helper"
local cd = require "cudadev"

local expect_error = helper.assert_error_matches

-- Every thread of a block fills all `words` floats of the dynamic shared memory, then reads them back
-- reversed: out[block * blockDim + t] = sum over its share of the words, which the host recomputes.
local BIG_SHARED = [[
extern "C" __global__ void big_shared(const float *x, float *out, int words)
{
  extern __shared__ float s[];
  for (int i = threadIdx.x; i < words; i += blockDim.x) s[i] = x[i] * (blockIdx.x + 1);
  __syncthreads();
  float t = 0;
  for (int i = threadIdx.x; i < words; i += blockDim.x) t += s[words - 1 - i];
  out[blockIdx.x * blockDim.x + threadIdx.x] = t;
}
]]

local function big_shared_reference(x, words, blocks, threads)
  local ref = {}
  for b = 0, blocks - 1 do
    for t = 0, threads - 1 do
      local sum = 0
      for i = t, words - 1, threads do sum = sum + x[words - i] * (b + 1) end
      ref[b * threads + t + 1] = sum
    end
  end
  return ref
end

-- A two-phase sum: each block reduces its grid-stride share into partial[block]; after grid.sync(), thread 0
-- of the grid adds the partials. Without a grid-wide barrier it would read partials not yet written.
local GRID_SUM = [[
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
extern "C" __global__ void grid_sum(const float *x, float *partial, float *out, int n)
{
  cg::grid_group grid = cg::this_grid();
  extern __shared__ float s[];
  float acc = 0;
  for (unsigned long long i = grid.thread_rank(); i < (unsigned long long)n; i += grid.size()) acc += x[i];
  s[threadIdx.x] = acc;
  __syncthreads();
  for (unsigned o = blockDim.x / 2; o > 0; o >>= 1) {
    if (threadIdx.x < o) s[threadIdx.x] += s[threadIdx.x + o];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
  grid.sync();
  if (grid.thread_rank() == 0) {
    float t = 0;
    for (unsigned b = 0; b < gridDim.x; b++) t += partial[b];
    out[0] = t;
  }
}
]]

-- No cooperative_groups header: a cooperative launch needs none (the grid sync does).
local FILL = [[
extern "C" __global__ void fill_rank(int *out)
{
  out[blockIdx.x * blockDim.x + threadIdx.x] = blockIdx.x * 1000 + threadIdx.x;
}
]]

local function sum_input(n)
  local t, ref = {}, 0
  for i = 1, n do
    t[i] = (i * 7) % 13
    ref = ref + t[i]
  end
  return t, ref
end

local function check_big_shared(dev, cfg_fn)
  local k = cd.compile(BIG_SHARED, { device = dev }).big_shared
  local words, blocks, threads = 100 * 1024 // 4, 2, 128
  local xt = {}
  for i = 1, words do xt[i] = i % 17 end
  local x = cd.array(xt, "float32", { device = dev })
  local out = cd.zeros(blocks * threads, "float32", { device = dev })
  k(cfg_fn({ grid = blocks, block = threads, shared = 100 * 1024 }), x, out, words)
  assert.are.same(big_shared_reference(xt, words, blocks, threads), out:totable())
  return k, x, out, words
end

local function check_grid_sum(dev, blocks, threads, cfg_fn)
  local k = cd.compile(GRID_SUM, { device = dev }).grid_sum
  local n = 20000
  local xt, ref = sum_input(n)
  local x = cd.array(xt, "float32", { device = dev })
  local partial, out = cd.zeros(blocks, "float32", { device = dev }), cd.zeros(1, "float32", { device = dev })
  k(cfg_fn({ grid = blocks, block = threads, shared = threads * 4, cooperative = true }), x, partial, out, n)
  assert.are.equal(ref, out:totable()[1])
end

local same = function(c) return c end

describe("dynamic shared memory above 48 KiB", function()
  it("a kernel takes 100 KiB on the cpu device, by table and by LaunchConfig", function()
    check_big_shared("cpu", same)
    check_big_shared("cpu", cd.launch_config)
  end)

  it("a dim launch takes 100 KiB on the cpu device", function()
    local k = cd.compile(BIG_SHARED, { device = "cpu" }).big_shared
    local x = cd.ones(25600, "float32", { device = "cpu" })
    local out = cd.zeros(64, "float32", { device = "cpu" })
    k({ dim = 64, shared = 100 * 1024 }, x, out, 25600)
    local first = out:totable()[1]   -- thread 0 of block 0 adds 25600 / blockDim ones
    assert.is_true(first >= 25600 / 1024 and (25600 / first) % 32 == 0)
  end)

  it("occupancy counts big shared memory and is 0 past the limit on the cpu device", function()
    local k = cd.compile(BIG_SHARED, { device = "cpu" }).big_shared
    assert.is_true(k:occupancy(128, 100 * 1024).blocks_per_sm >= 1)
    assert.are.equal(0, k:occupancy(128, 1024 * 1024 + 1).blocks_per_sm)
  end)

  it("more than the device allows is refused before the launch", function()
    local k = cd.compile(BIG_SHARED, { device = "cpu" }).big_shared
    local x, out = cd.zeros(4, "float32", { device = "cpu" }), cd.zeros(4, "float32", { device = "cpu" })
    expect_error(function() k({ grid = 1, block = 4, shared = 1024 * 1024 + 1 }, x, out, 4) end,
      "bad launch configuration for 'big_shared' ('shared' must be 0 to 1048576 bytes)")
    local lc = cd.launch_config { grid = 1, block = 4, shared = 1024 * 1024 + 1 }
    expect_error(function() k(lc, x, out, 4) end,
      "bad launch configuration for 'big_shared' ('shared' must be 0 to 1048576 bytes)")
  end)

  helper.gpu_it("a kernel takes 100 KiB on cuda:0, by table, LaunchConfig and dim", function()
    local k, x, out, words = check_big_shared("cuda:0", same)
    check_big_shared("cuda:0", cd.launch_config)
    k({ dim = 256, shared = 100 * 1024 }, x, out, words)   -- dim chooses the block with the shared size in mind
    assert.is_true(out:totable()[1] > 0)
    -- a smaller size after a larger one, and the largest the device allows
    local max = cd.device("cuda:0"):attribute("max_shared_memory_per_block_optin") - k.attributes.shared_size_bytes
    k({ grid = 2, block = 128, shared = 60 * 1024 }, x, out, 60 * 1024 // 4)
    assert.are.same(big_shared_reference(x:totable(), 60 * 1024 // 4, 2, 128), out:totable())
    local xt = {}   -- the input as large as the largest shared size, so the kernel reads only what exists
    for i = 1, max // 4 do xt[i] = i % 13 end
    local xm = cd.array(xt, "float32", { device = "cuda:0" })
    k({ grid = 2, block = 128, shared = max }, xm, out, max // 4)
    assert.are.same(big_shared_reference(xt, max // 4, 2, 128), out:totable())
  end)

  helper.gpu_it("occupancy with 100 KiB on cuda:0 is what fits in an SM's shared memory", function()
    local k = cd.compile(BIG_SHARED, { device = "cuda:0" }).big_shared
    local dev = cd.device("cuda:0")
    local per_sm = dev:attribute("max_shared_memory_per_multiprocessor")
    local r = k:occupancy(128, 100 * 1024)
    assert.is_true(r.blocks_per_sm >= 1 and r.blocks_per_sm <= per_sm // (100 * 1024))
    assert.are.equal(0, k:occupancy(128, dev:attribute("max_shared_memory_per_block_optin") + 1).blocks_per_sm)
  end)

  helper.gpu_it("the limit on cuda:0 is the opt-in size less the kernel's static shared memory", function()
    local k = cd.compile([[extern "C" __global__ void with_static(float *o, int n) {
      __shared__ float st[4096];
      extern __shared__ float dyn[];
      st[threadIdx.x] = 1; dyn[threadIdx.x] = 2; __syncthreads();
      o[threadIdx.x] = st[threadIdx.x] + dyn[n - 1 - threadIdx.x]; }]], { device = "cuda:0" }).with_static
    local optin = cd.device("cuda:0"):attribute("max_shared_memory_per_block_optin")
    local static = k.attributes.shared_size_bytes
    assert.are.equal(16384, static)
    local o = cd.zeros(32, "float32", { device = "cuda:0" })
    k({ grid = 1, block = 32, shared = optin - static }, o, 32)
    assert.are.same(cd.full(32, 3, "float32"):totable(), o:totable())
    expect_error(function() k({ grid = 1, block = 32, shared = optin - static + 1 }, o, 32) end,
      ("bad launch configuration for 'with_static' ('shared' must be 0 to %d bytes (cuda:0 allows %d per block, " ..
       "less the kernel's %d bytes of static shared memory))"):format(optin - static, optin, static))
  end)
end)

describe("cooperative launches", function()
  it("grid.sync() orders a two-phase sum on the cpu device", function()
    check_grid_sum("cpu", 8, 64, same)
    check_grid_sum("cpu", 8, 64, cd.launch_config)
    check_grid_sum("cpu", 3, 1, same)   -- blocks of one thread run without fibers
  end)

  it("grid.sync() works in launches that run in this process", function()
    local out = helper.run_child(([[
      local k = cd.compile(%q, { device = "cpu" }).grid_sum
      local t = {}
      for i = 1, 5000 do t[i] = i %% 5 end
      local x = cd.array(t, "float32", { device = "cpu" })
      local p, o = cd.zeros(6, "float32", { device = "cpu" }), cd.zeros(1, "float32", { device = "cpu" })
      k({ grid = 6, block = 32, shared = 128, cooperative = true }, x, p, o, 5000)
      io.write(string.format("%%g", o:totable()[1]), "\n")
    ]]):format(GRID_SUM), "CUDADEV_CPU_FORK=0")
    assert.are.equal("10000\nexit 0\n", out)
  end)

  it("grid group fields on the cpu device", function()
    local k = cd.compile([[
#include <cooperative_groups.h>
extern "C" __global__ void fields(long long *o) {
  auto g = cooperative_groups::this_grid();
  if (g.thread_rank() == 0) {
    o[0] = g.is_valid(); o[1] = g.size(); o[2] = g.num_blocks(); o[3] = g.dim_blocks().x;
  }
  if (threadIdx.x == 0) o[4 + g.block_rank()] = g.thread_rank();
}]], { device = "cpu" }).fields
    local o = cd.zeros(7, "int64", { device = "cpu" })
    k({ grid = 3, block = 16, cooperative = true }, o)
    assert.are.same({ 1, 48, 3, 3, 0, 16, 32 }, o:totable())
    k({ grid = 1, block = 16 }, o)
    assert.are.equal(0, o:totable()[1])   -- not a cooperative launch: the grid group is not valid
  end)

  it("grid.sync() in a launch that is not cooperative is an error on the cpu device", function()
    local k = cd.compile(GRID_SUM, { device = "cpu" }).grid_sum
    local x, p, o = cd.ones(64, "float32", { device = "cpu" }), cd.zeros(2, "float32", { device = "cpu" }),
      cd.zeros(1, "float32", { device = "cpu" })
    local ok, err = pcall(k, { grid = 1, block = 32, shared = 128 }, x, p, o, 64)   -- one block: one first thread
    assert.is_false(ok)
    assert.are.equal("CUDA_ERROR_LAUNCH_FAILED", err.name)
    assert.are.equal("kernel 'grid_sum' trapped: grid.sync() in a launch that is not cooperative (launch it with " ..
      "cooperative = true) (block (0,0,0), thread (0,0,0))", err.message)
  end)

  it("a block that ends while others wait at grid.sync() is a deadlock, not a hang, on the cpu device", function()
    local k = cd.compile([[
#include <cooperative_groups.h>
extern "C" __global__ void early(int *o) {
  if (blockIdx.x == 1) return;
  cooperative_groups::this_grid().sync();
  o[blockIdx.x] = 1;
}]], { device = "cpu" }).early
    local o = cd.zeros(4, "int32", { device = "cpu" })
    local ok, err = pcall(k, { grid = 4, block = 8, cooperative = true }, o)
    assert.is_false(ok)
    assert.are.equal("CUDA_ERROR_LAUNCH_FAILED", err.name)
    assert.matches("^kernel 'early' deadlocked on the cpu device: 1 block " ..
      "ended without reaching grid%.sync%(%), where the others wait %(a grid%.sync%(%) that not all blocks reach%) " ..
      "%(block %(%d,0,0%)%)$", err.message)
  end)

  it("a grid larger than fits at once is refused with the limit on the cpu device", function()
    local k = cd.compile(FILL, { device = "cpu" }).fill_rank
    local o = cd.zeros(4, "int32", { device = "cpu" })
    local ok, err = pcall(function() k({ grid = 100000, block = 1024, cooperative = true }, o) end)
    assert.is_false(ok)
    local total, per, sms = helper.error_text(err):match("^bad launch configuration for 'fill_rank' %(cooperative " ..
      "launch of 100000 blocks exceeds the (%d+) blocks that fit on cpu at once %((%d+) per SM x (%d+) SMs%)%)$")
    assert.is_truthy(total)
    assert.are.equal(tonumber(total), tonumber(per) * tonumber(sms))
    assert.is_true(tonumber(per) <= k:occupancy(1024).blocks_per_sm)
    local lc = cd.launch_config { grid = 100000, block = 1024, cooperative = true }
    assert.are.equal(helper.error_text(err), helper.error_text(select(2, pcall(k, lc, o))))
  end)

  it("cooperative is a boolean field of launch tables and LaunchConfigs", function()
    local lc = cd.launch_config { grid = 2, block = 32, cooperative = true }
    assert.is_true(lc.cooperative)
    assert.is_false(cd.launch_config({ grid = 2, block = 32 }).cooperative)
    assert.are.equal("LaunchConfig(grid=2, block=32, cooperative=true)", tostring(lc))
    expect_error(function() cd.launch_config { grid = 2, block = 32, cooperative = 1 } end,
      "bad argument #1 to 'launch_config' ('cooperative' must be a boolean, got number)")
    local k = cd.compile(FILL, { device = "cpu" }).fill_rank
    local o = cd.zeros(64, "int32", { device = "cpu" })
    expect_error(function() k({ grid = 2, block = 32, cooperative = "yes" }, o) end,
      "bad launch configuration for 'fill_rank' ('cooperative' must be a boolean, got string)")
    k({ grid = 2, block = 32, cooperative = false }, o)
    assert.are.equal(1031, o:totable()[64])
  end)

  helper.gpu_it("a cooperative launch runs a kernel without the cooperative_groups header on cuda:0", function()
    local k = cd.compile(FILL, { device = "cuda:0" }).fill_rank
    local o = cd.zeros(4 * 256, "int32", { device = "cuda:0" })
    k({ grid = 4, block = 256, cooperative = true }, o)
    local t = o:totable()
    assert.are.equal(0, t[1])
    assert.are.equal(3255, t[4 * 256])
    k(cd.launch_config { grid = 4, block = 256, cooperative = true }, o)
  end)

  helper.gpu_it("grid.sync() orders a two-phase sum on cuda:0", function()
    local dev = cd.device("cuda:0")
    check_grid_sum("cuda:0", dev.sm_count, 256, same)
    check_grid_sum("cuda:0", 2 * dev.sm_count, 128, cd.launch_config)
  end)

  helper.gpu_it("a grid larger than fits at once is refused with the limit on cuda:0", function()
    local k = cd.compile(FILL, { device = "cuda:0" }).fill_rank
    local dev = cd.device("cuda:0")
    local per = k:occupancy(256).blocks_per_sm
    local fit = per * dev.sm_count
    local o = cd.zeros((fit + 1) * 256, "int32", { device = "cuda:0" })
    k({ grid = fit, block = 256, cooperative = true }, o)   -- exactly what fits
    expect_error(function() k({ grid = fit + 1, block = 256, cooperative = true }, o) end,
      ("bad launch configuration for 'fill_rank' (cooperative launch of %d blocks exceeds the %d blocks that fit on " ..
       "cuda:0 at once (%d per SM x %d SMs))"):format(fit + 1, fit, per, dev.sm_count))
    -- with 100 KiB of shared memory fewer blocks fit
    local per_big = k:occupancy(256, 100 * 1024).blocks_per_sm
    expect_error(function() k({ grid = fit, block = 256, shared = 100 * 1024, cooperative = true }, o) end,
      ("bad launch configuration for 'fill_rank' (cooperative launch of %d blocks exceeds the %d blocks that fit on " ..
       "cuda:0 at once (%d per SM x %d SMs))"):format(fit, per_big * dev.sm_count, per_big, dev.sm_count))
  end)
end)

describe("profiling", function()
  local saved
  before_each(function() saved = cd.get_device() end)
  after_each(function() cd.set_device(saved) end)

  it("profile_start and profile_stop are no-ops on the cpu device", function()
    cd.set_device("cpu")
    assert.is_false(cd.profile_start())
    assert.is_false(cd.profile_stop())
  end)

  it("profiling returns fn's results and raises its error unchanged", function()
    cd.set_device("cpu")
    assert.are.same({ 1, nil, 3, n = 3 }, table.pack(cd.profiling(function(...) return ... end, 1, nil, 3)))
    local e = {}
    local ok, err = pcall(cd.profiling, function() error(e) end)
    assert.is_false(ok)
    assert.are.equal(e, err)
    expect_error(function() cd.profiling(42) end, "bad argument #1 to 'profiling' (function expected, got number)")
  end)

  it("range returns fn's results and raises its error unchanged", function()
    assert.are.same({ "a", 2, n = 2 }, table.pack(cd.range("step", function(x) return x, 2 end, "a")))
    local e = setmetatable({}, { __tostring = function() return "mine" end })
    local ok, err = pcall(cd.range, "step", function() error(e) end)
    assert.is_false(ok)
    assert.are.equal(e, err)
  end)

  it("range lets fn yield", function()
    local co = coroutine.wrap(function()
      return cd.range("r", function() return coroutine.yield(1) * 2 end)
    end)
    assert.are.equal(1, co())
    assert.are.equal(42, co(21))
  end)

  it("range names must be strings without NUL bytes", function()
    expect_error(function() cd.range(1, print) end, "bad argument #1 to 'range' (range name must be a string, got number)")
    expect_error(function() cd.range("a\0b", print) end, "bad argument #1 to 'range' (range name must not contain NUL bytes)")
    expect_error(function() cd.range("a") end, "bad argument #2 to 'range' (function expected, got no value)")
    expect_error(function() cd.range_push() end, "bad argument #1 to 'range_push' (range name must be a string, got no value)")
    expect_error(function() cd.range_push(cd.zeros(1, { device = "cpu" })) end,
      "bad argument #1 to 'range_push' (range name must be a string, got cudadev.Array)")
    expect_error(function() cd.range_push("x\0") end, "bad argument #1 to 'range_push' (range name must not contain NUL bytes)")
    cd.range_push("balanced")
    cd.range_pop()
  end)

  -- A tiny NVTX tool (written here, loaded by NVTX3 through NVTX_INJECTION64_PATH) logs what reaches it.
  local INJECTION = [[
#include <stdio.h>
#include <stdlib.h>
#include <nvtx3/nvToolsExt.h>
static FILE *out;
static int push(const char *m) { fprintf(out, "push %s\n", m); fflush(out); return 0; }
static int pop(void) { fprintf(out, "pop\n"); fflush(out); return 0; }
int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get) {
  const NvtxExportTableCallbacks *cb = (const NvtxExportTableCallbacks *)get(NVTX_ETID_CALLBACKS);
  NvtxFunctionTable t = 0;
  unsigned n = 0;
  out = fopen(getenv("CDV_NVTX_LOG"), "w");
  if (!out || !cb || !cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &t, &n)) return 0;
  *t[NVTX_CBID_CORE_RangePushA] = (NvtxFunctionPointer)push;
  *t[NVTX_CBID_CORE_RangePop] = (NvtxFunctionPointer)pop;
  return 1;
}
]]
  local nvtx_dir = "/usr/local/cuda/include"
  local have_nvtx = helper.file_exists(nvtx_dir .. "/nvtx3/nvToolsExt.h")
  local test = have_nvtx and it or function(name) pending(name .. " (no NVTX3 headers in " .. nvtx_dir .. ")") end
  test("ranges reach an injected NVTX tool, and close on error", function()
    local base = os.tmpname()
    local src, lib, log = base .. ".c", base .. ".so", base .. ".log"
    local f = assert(io.open(src, "w"))
    f:write(INJECTION)
    f:close()
    local built = os.execute(("cc -shared -fPIC -I%s -o %s %s"):format(nvtx_dir, lib, src))
    assert.is_truthy(built)
    local out = helper.run_child([[
      cd.range_push("outer")
      print(pcall(cd.range, "inner", error, "boom", 0))
      print(cd.range("second", function(a, b) return a + b end, 1, 2))
      cd.range_pop()
    ]], ("CDV_NVTX_LOG=%s NVTX_INJECTION64_PATH=%s"):format(log, lib))
    local logged = io.open(log):read("a")
    os.remove(src); os.remove(lib); os.remove(log); os.remove(base)
    assert.are.equal("false\tboom\n3\nexit 0\n", out)
    assert.are.equal("push outer\npush inner\npop\npush second\npop\npop\n", logged)
  end)

  helper.gpu_it("profile_start and profile_stop tell the profiler on cuda:0", function()
    cd.set_device("cuda:0")
    assert.is_true(cd.profile_start())
    assert.is_true(cd.profile_stop())
    assert.are.equal(7, cd.profiling(function(x) return x end, 7))
  end)
end)
