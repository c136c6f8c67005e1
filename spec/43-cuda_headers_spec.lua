-- Real CUDA code runs unchanged (issue 13): the toolkit's headers through NVRTC in both layouts (CUDA 13 keeps
-- CCCL in include/cccl, CUDA 12 in include; NOTE [toolkit includes] in src/backend_cuda.c), a CUB kernel read
-- back from the disk cache by a new process without NVRTC (and cd.kernel_cache_stats().disk_last_miss saying why
-- a compile missed), the cpu device naming a toolkit header it cannot serve, cpu refusals and compile errors
-- that cite the user's own lines (#line) and name the host compiler (NOTE [host compiler errors]).
--
-- Then kernels of the kinds people bring, written here in the style of public samples and checked against
-- references computed in Lua: a cooperative-groups tiled-partition reduction (the CUDA Programming Guide's
-- thread_block_tile examples, cuda-samples' reductionMultiBlockCG), a CUB BlockReduce (CUB's
-- example_block_reduce.cu), cuRAND's device API (the cuRAND guide's device API examples: curand_init per thread
-- and a Monte Carlo estimate of pi), and libcu++'s cuda::atomic_ref (a histogram). What NVRTC alone can check
-- (compiling for sm_90) runs without a GPU; launches run on every device that can serve the headers, the GPU
-- ones pending without a GPU.
local helper = require "spec.helper"
local cd = require "cudadev"

local sh = helper.shell_quote

local nvrtc_it = helper.nvrtc_it

local function toolkit_root()
  for _, root in ipairs({ os.getenv("CUDA_HOME"), os.getenv("CUDA_PATH"), "/usr/local/cuda" }) do
    if root and root ~= "" and helper.file_exists(root .. "/include/cuda_fp16.h") then return root end
  end
end

local function tmpdir()
  local p = assert(io.popen("mktemp -d " .. sh((os.getenv("TMPDIR") or "/tmp") .. "/cdv-headers.XXXXXX")))
  local d = p:read("l")
  p:close()
  return d
end

local function lines_of(cmd)
  local t, p = {}, assert(io.popen(cmd))
  for l in p:lines() do t[#t + 1] = l end
  p:close()
  return t
end

-- A child lua5.4 with this cudadev and a cache directory of its own; returns what it printed.
local function child(code, env)
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(("package.cpath = %q\npackage.path = %q\nlocal cd = require 'cudadev'\n"):format(package.cpath,
    package.path), code)
  f:close()
  local p = assert(io.popen(("env -u CUDADEV_CACHE %s lua5.4 %s 2>&1"):format(env or "", sh(path))))
  local out = p:read("a")
  p:close()
  os.remove(path)
  return out
end

-- ---------------------------------------------------------------- the kernels

-- Each 32-thread tile sums its values with shfl_down and adds the tile's sum to *total; each 16-thread tile
-- also stores its sum with cg::reduce, by block and tile (meta_group_rank).
local CG_TILES = [[
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;

extern "C" __global__ void tile_sums(const int *x, int n, int *total, int *per_tile)
{
  cg::thread_block block = cg::this_thread_block();
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = i < n ? x[i] : 0;

  cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
  int s = v;
  for (int d = warp.size() / 2; d > 0; d /= 2) s += warp.shfl_down(s, d);
  if (warp.thread_rank() == 0) atomicAdd(total, s);

  cg::thread_block_tile<16> half = cg::tiled_partition<16>(block);
  int h = cg::reduce(half, v, cg::plus<int>());
  if (half.thread_rank() == 0) per_tile[blockIdx.x * half.meta_group_size() + half.meta_group_rank()] = h;
  block.sync();
}
]]

-- One sum per block of 128 (the last block partial, through valid_items), with a fallback the cpu device
-- compiles instead of CUB (the way a source can serve both).
local CUB_SUMS = [[
#ifndef __CUDADEV_CPU__
#include <cub/block/block_reduce.cuh>
#endif

extern "C" __global__ void block_sums(const int *x, int n, int *out)
{
  int i = blockIdx.x * 128 + threadIdx.x;
  int v = i < n ? x[i] : 0;
  int valid = n - blockIdx.x * 128 < 128 ? n - blockIdx.x * 128 : 128;
#ifndef __CUDADEV_CPU__
  typedef cub::BlockReduce<int, 128> Reduce;
  __shared__ typename Reduce::TempStorage tmp;
  int s = Reduce(tmp).Sum(v, valid);
#else
  __shared__ int part[128];
  part[threadIdx.x] = threadIdx.x < valid ? v : 0;
  __syncthreads();
  for (int d = 64; d > 0; d /= 2) {
    if (threadIdx.x < d) part[threadIdx.x] += part[threadIdx.x + d];
    __syncthreads();
  }
  int s = part[0];
#endif
  if (threadIdx.x == 0) out[blockIdx.x] = s;
}
]]

-- Philox draws: thread id gets subsequence id of the seed; per values each, and one curand_uniform.
-- XORWOW Monte Carlo: each thread counts its points inside the quarter circle.
local CURAND = [[
#include <curand_kernel.h>

extern "C" __global__ void philox_draws(unsigned long long seed, int per, unsigned *out, float *u)
{
  int id = blockIdx.x * blockDim.x + threadIdx.x;
  curandStatePhilox4_32_10_t st;
  curand_init(seed, id, 0, &st);
  for (int k = 0; k < per; k++) out[id * per + k] = curand(&st);
  curand_init(seed, id, 0, &st);
  u[id] = curand_uniform(&st);
}

extern "C" __global__ void pi_hits(unsigned long long seed, int per, unsigned *hits)
{
  int id = blockIdx.x * blockDim.x + threadIdx.x;
  curandState st;
  curand_init(seed, id, 0, &st);
  unsigned in = 0;
  for (int k = 0; k < per; k++) {
    float x = curand_uniform(&st), y = curand_uniform(&st);
    in += x * x + y * y <= 1.0f;
  }
  hits[id] = in;
}
]]

local ATOMIC_HISTOGRAM = [[
#include <cuda/atomic>

extern "C" __global__ void histogram(const unsigned char *x, int n, unsigned *bins)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  cuda::atomic_ref<unsigned, cuda::thread_scope_device> bin(bins[x[i] & 15]);
  bin.fetch_add(1u, cuda::memory_order_relaxed);
}
]]

local function ints(n, f)
  local t = {}
  for i = 1, n do t[i] = f(i) end
  return t
end

-- ---------------------------------------------------------------- NVRTC with the toolkit's headers

describe("toolkit headers through NVRTC (sm_90, no GPU)", function()
  for _, h in ipairs { "cooperative_groups.h", "curand_kernel.h", "cuda/atomic", "cub/block/block_reduce.cuh",
    "cuda/std/type_traits", "thrust/functional.h" } do
    nvrtc_it("#include <" .. h .. "> compiles", function()
      local m = cd.compile("#include <" .. h .. ">\nextern \"C\" __global__ void k(int *x) { x[0] = 1; }\n",
        { arch = "sm_90" })
      assert.are.same({ "k" }, m.kernels)
    end)
  end

  nvrtc_it("the sample-style kernels compile: cooperative groups, CUB, cuRAND, cuda::atomic_ref", function()
    for name, src in pairs { cg = CG_TILES, cub = CUB_SUMS, curand = CURAND, atomic = ATOMIC_HISTOGRAM } do
      local m = cd.compile(src, { arch = "sm_90", name = name .. ".cu" })
      assert.is_true(#m.kernels >= 1, name)
      assert.is_truthy(m.cubin or m.ptx, name)
    end
  end)

  nvrtc_it("a CUDA 12 layout (CCCL inside include/, no include/cccl) works too, under its own cache key", function()
    local root, real = tmpdir(), toolkit_root()
    finally(function() os.execute("rm -rf " .. sh(root)) end)
    os.execute("mkdir -p " .. sh(root .. "/include"))
    local in_cccl = {}
    for _, e in ipairs(lines_of("ls -A " .. sh(real .. "/include/cccl") .. " 2>/dev/null")) do in_cccl[e] = true end
    for _, e in ipairs(lines_of("ls -A " .. sh(real .. "/include"))) do
      if e ~= "cccl" and not in_cccl[e] then os.execute(("ln -s %s %s"):format(sh(real .. "/include/" .. e), sh(root .. "/include/" .. e))) end
    end
    for e in pairs(in_cccl) do
      os.execute(("ln -s %s %s"):format(sh(real .. "/include/cccl/" .. e), sh(root .. "/include/" .. e)))
    end
    assert.is_false(helper.file_exists(root .. "/include/cccl/cuda/std/type_traits"))
    assert.is_true(helper.file_exists(root .. "/include/cuda/std/type_traits"))
    local cache = tmpdir()
    finally(function() os.execute("rm -rf " .. sh(cache)) end)
    local code = ([[
      local m = cd.compile(%q, { arch = "sm_90" })
      local s = cd.kernel_cache_stats()
      print(m.kernels[1], s.disk_hits, s.disk_misses, s.disk_last_miss and s.disk_last_miss:match("^no entry") or s.disk_last_miss)
    ]]):format(CG_TILES)
    local dirs = ("CUDADEV_CACHE_DIR=%s "):format(sh(cache))
    assert.are.equal("tile_sums\t0\t1\tno entry\n", child(code, dirs .. "CUDA_HOME=" .. sh(root)))
    assert.are.equal("tile_sums\t0\t1\tno entry\n", child(code, dirs .. "CUDA_HOME=" .. sh(real)))   -- another key
    assert.are.equal("tile_sums\t1\t0\tnil\n", child(code, dirs .. "CUDA_HOME=" .. sh(root)))
    assert.are.equal("tile_sums\t1\t0\tnil\n", child(code, dirs .. "CUDA_HOME=" .. sh(real)))
  end)

  nvrtc_it("a CUB kernel (hundreds of headers) is read back by a new process without loading NVRTC", function()
    local cache = tmpdir()
    finally(function() os.execute("rm -rf " .. sh(cache)) end)
    local code = ([[
      local t0 = os.time()
      local clock = os.clock()
      local m = cd.compile(%q, { arch = "sm_90", name = "sums.cu" })
      local s = cd.kernel_cache_stats()
      local maps = io.open("/proc/self/maps"):read("a")
      io.stderr:write(("compile took %%.3f s of cpu\n"):format(os.clock() - clock))
      print(m.kernels[1], s.disk_hits, s.disk_misses, s.disk_writes, maps:find("libnvrtc", 1, true) and "nvrtc" or "no nvrtc",
        s.disk_last_miss)
    ]]):format(CUB_SUMS)
    local env = "CUDADEV_CACHE_DIR=" .. sh(cache)
    local first = child(code, env)
    local head = "block_sums\t0\t1\t1\tnvrtc\tno entry '" .. cache .. "/cuda/"
    local at = first:find(head, 1, true)
    assert.is_truthy(at, first)
    assert.is_truthy(first:sub(at + #head):match("^" .. ("%x"):rep(32) .. "%.mod' yet %(a first compile of these inputs%)\n$"),
      first)
    local second = child(code, env)
    assert.is_truthy(second:find("block_sums\t1\t0\t0\tno nvrtc\tnil\n", 1, true), second)
  end)

  nvrtc_it("disk_last_miss says the cache is off", function()
    local out = child([[
      cd.compile('extern "C" __global__ void k() {}', { arch = "sm_90" })
      print(cd.kernel_cache_stats().disk_last_miss)
    ]], "CUDADEV_CACHE=0")
    assert.are.equal("the cache is off (CUDADEV_CACHE=0)\n", out)
  end)
end)

-- ---------------------------------------------------------------- the cpu device

describe("the cpu device and toolkit headers", function()
  local function cpu_error(src, opts)
    opts = opts or {}
    opts.device = "cpu"
    local ok, err = pcall(cd.compile, src, opts)
    assert.is_false(ok)
    return err
  end

  for _, h in ipairs { "cub/block/block_reduce.cuh", "curand_kernel.h", "cuda/atomic", "thrust/sort.h" } do
    it("a toolkit header it cannot serve is a compile error naming <" .. h .. ">", function()
      local err = cpu_error("#include <" .. h .. ">\nextern \"C\" __global__ void k(int *x) { x[0] = 1; }\n")
      assert.are.same({ "cpu.compile", "CUDA_ERROR_NOT_SUPPORTED", "kernel.cu:1: CUDA toolkit header <" .. h
        .. "> is not available on the cpu device (it holds GPU code); leave it out with #ifndef __CUDADEV_CPU__" },
        { err.api, err.name, err.message })
      assert.is_truthy(err.log:find(h, 1, true))
    end)
  end

  it("the header's line is the one #line gives, in the file it names", function()
    local err = cpu_error('extern "C" __global__ void k(int *x) { x[0] = 1; }\n#line 40 "user.cu"\n\n'
      .. "#include <curand_kernel.h>\n", { name = "gen.cu" })
    assert.are.equal("user.cu:41: CUDA toolkit header <curand_kernel.h> is not available on the cpu device (it holds "
      .. "GPU code); leave it out with #ifndef __CUDADEV_CPU__", err.message)
  end)

  it("a kernel that leaves the header out with #ifndef __CUDADEV_CPU__ compiles and runs", function()
    local x = cd.array(ints(300, function(i) return i * 3 - 400 end), "int32", { device = "cpu" })
    local out = cd.zeros(3, "int32", { device = "cpu" })
    cd.compile(CUB_SUMS, { device = "cpu" }).block_sums({ grid = 3, block = 128 }, x, 300, out)
    local want = { 0, 0, 0 }
    for i = 1, 300 do want[(i - 1) // 128 + 1] = want[(i - 1) // 128 + 1] + i * 3 - 400 end
    assert.are.same(want, out:totable())
  end)
end)

describe("messages that point at the user's lines (cpu device)", function()
  local function refusal(src, name)
    local ok, err = pcall(cd.compile, src, { device = "cpu", name = name })
    assert.is_false(ok)
    assert.are.same({ "cpu.compile", "CUDA_ERROR_NOT_SUPPORTED" }, { err.api, err.name })
    return err.message
  end

  it("a refusal follows #line N \"file\"", function()
    assert.are.equal("sampler.cu:202: texture fetch 'tex1Dfetch' is not supported on the cpu device", refusal([[
#line 200 "sampler.cu"
extern "C" __global__ void k(float *out, int i)
{
  out[0] = tex1Dfetch<float>(0, i);
}
]], "generated.cu"))
  end)

  it("a refusal follows gcc's # N \"file\" and a #line without a file keeps the name", function()
    assert.are.equal("orig.cu:8: inline PTX asm is not supported on the cpu device", refusal([[
# 7 "orig.cu"
extern "C" __global__ void k(unsigned *out) { unsigned v;
  asm("mov.u32 %0, %%laneid;" : "=r"(v)); out[0] = v; }
]]))
    assert.are.equal("gen.cu:31: texture object 'cudaTextureObject_t' is not supported on the cpu device", refusal([[
extern "C" __global__ void k(float *out) { out[0] = 1; }
#line 30
extern "C" __global__ void t(float *out,
  cudaTextureObject_t tex) { out[0] = tex1Dfetch<float>(tex, 0); }
]], "gen.cu"))
  end)

  it("without #line the line is the physical one, as before", function()
    assert.are.equal("kernel.cu:3: texture fetch 'tex2D' is not supported on the cpu device", refusal([[
extern "C" __global__ void k(float *out, int i)
{
  out[0] = tex2D<float>(0, i, i);
}
]]))
  end)

  it("a compile error names the host compiler, not NVRTC, and cites the #line of the source", function()
    local ok, err = pcall(cd.compile, '#line 50 "user.cu"\nextern "C" __global__ void k(int *p) {\n  p[0] = '
      .. "undeclared_thing;\n}\n", { device = "cpu", name = "broken.cu" })
    assert.is_false(ok)
    assert.are.same({ "c++", "HOST_COMPILER_ERROR", 6 }, { err.api, err.name, err.code })
    assert.are.equal("compilation of broken.cu failed: user.cu:51:", err.message:match("^compilation of broken.cu failed: user.cu:51:"))
    assert.is_truthy(err.message:find("undeclared_thing", 1, true))
    assert.is_nil(tostring(err):find("NVRTC", 1, true))
  end)
end)

-- ---------------------------------------------------------------- sample-style kernels, run

helper.each_device(function(dev)
  describe("sample-style kernels on " .. dev, function()
    it("cooperative groups: tiled_partition<32> shfl_down sums and cg::reduce over 16-thread tiles", function()
      local n, block, grid = 1000, 128, 8
      local vals = ints(n, function(i) return (i * 7919) % 201 - 100 end)
      local x = cd.array(vals, "int32", { device = dev })
      local total = cd.zeros(1, "int32", { device = dev })
      local per = cd.full(grid * block // 16, -1, "int32", { device = dev })
      cd.compile(CG_TILES, { device = dev }).tile_sums({ grid = grid, block = block }, x, n, total, per)
      local want_total, want_per = 0, {}
      for t = 1, grid * block // 16 do want_per[t] = 0 end
      for i = 1, n do
        want_total = want_total + vals[i]
        local t = (i - 1) // 16 + 1
        want_per[t] = want_per[t] + vals[i]
      end
      assert.are.same({ want_total }, total:totable())
      assert.are.same(want_per, per:totable())
    end)

    it("a block reduction (CUB on GPUs, the fallback on cpu), partial last block", function()
      local n = 1000
      local vals = ints(n, function(i) return (i * 104729) % 1001 - 500 end)
      local out = cd.full(8, 12345, "int32", { device = dev })
      cd.compile(CUB_SUMS, { device = dev }).block_sums({ grid = 8, block = 128 }, cd.array(vals, "int32", { device = dev }), n, out)
      local want = { 0, 0, 0, 0, 0, 0, 0, 0 }
      for i = 1, n do want[(i - 1) // 128 + 1] = want[(i - 1) // 128 + 1] + vals[i] end
      assert.are.same(want, out:totable())
    end)
  end)
end)

describe("sample-style kernels that need the GPU", function()
  -- Philox4x32-10 as curand_philox4x32_x.h computes it (Random123's rounds and key schedule).
  local M32 = 0xffffffff
  local function philox(c, k)
    local x, y, z, w, k0, k1 = c[1], c[2], c[3], c[4], k[1], k[2]
    for _ = 1, 10 do
      local p0, p1 = 0xD2511F53 * x, 0xCD9E8D57 * z
      x, y, z, w = ((p1 >> 32) ~ y ~ k0) & M32, p1 & M32, ((p0 >> 32) ~ w ~ k1) & M32, p0 & M32
      k0, k1 = (k0 + 0x9E3779B9) & M32, (k1 + 0xBB67AE85) & M32
    end
    return { x, y, z, w }
  end

  it("the Lua Philox4x32-10 reference gives Random123's known answer", function()
    assert.are.same({ 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8 }, philox({ 0, 0, 0, 0 }, { 0, 0 }))
  end)

  helper.gpu_it("cuRAND device API: curand_init(seed, id, 0) Philox draws match the reference", function()
    local seed, per, threads = 0x123456789, 6, 256
    local m = cd.compile(CURAND, { device = "cuda:0" })
    local out = cd.zeros(threads * per, "uint32", { device = "cuda:0" })
    local u = cd.zeros(threads, "float32", { device = "cuda:0" })
    m.philox_draws({ grid = 2, block = 128 }, seed, per, out, u)
    local got, gu = out:totable(), u:totable()
    for id = 0, threads - 1 do
      for k = 0, per - 1 do
        local want = philox({ k // 4, 0, id, 0 }, { seed & M32, seed >> 32 })[k % 4 + 1]
        assert.are.equal(want, got[id * per + k + 1], ("thread %d draw %d"):format(id, k))
      end
      local first = got[id * per + 1]
      assert.is_true(gu[id + 1] > 0 and gu[id + 1] <= 1)
      assert.is_true(math.abs(gu[id + 1] - (first + 0.5) / 2 ^ 32) < 1e-6)
    end
  end)

  helper.gpu_it("cuRAND device API: a Monte Carlo estimate of pi (XORWOW) is within 0.01", function()
    local threads, per = 4096, 256
    local hits = cd.zeros(threads, "uint32", { device = "cuda:0" })
    cd.compile(CURAND, { device = "cuda:0" }).pi_hits({ grid = 32, block = 128 }, 2024, per, hits)
    local inside = 0
    for _, h in ipairs(hits:totable()) do inside = inside + h end
    assert.is_true(math.abs(4 * inside / (threads * per) - math.pi) < 0.01)
  end)

  helper.gpu_it("libcu++ cuda::atomic_ref: a 16-bin histogram matches the host's", function()
    local n = 100000
    local vals = ints(n, function(i) return (i * 2654435761) % 256 end)
    local bins = cd.zeros(16, "uint32", { device = "cuda:0" })
    cd.compile(ATOMIC_HISTOGRAM, { device = "cuda:0" }).histogram({ dim = n }, cd.array(vals, "uint8", { device = "cuda:0" }), n, bins)
    local want = ints(16, function() return 0 end)
    for i = 1, n do want[vals[i] % 16 + 1] = want[vals[i] % 16 + 1] + 1 end
    assert.are.same(want, bins:totable())
  end)
end)
