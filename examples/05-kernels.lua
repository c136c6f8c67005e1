-- examples/05-kernels.lua: kernels from CUDA C source: compile options, headers, C++ templates, launching by
-- total threads (dim) or by grid and block, dynamic shared memory, attributes and occupancy, and the argument
-- checks that catch a bad launch before it reaches the device. On the cpu device the same sources are
-- compiled by the host's C++ compiler and run with CUDA's thread model.
--
--   make build && build/luacuda examples/05-kernels.lua
local cd = require "cudadev"

local dev = cd.get_device()
print("device:", dev.alias)

-- The cpu device needs a host C++ compiler; without one (and without a GPU) there is nothing to show.
local ok, err = pcall(cd.compile, 'extern "C" __global__ void probe() {}')
if not ok then
  print("05-kernels: skipped: " .. (dev.is_cpu and "no CUDA device, and the cpu device cannot compile kernels: "
    or "") .. tostring(err))
  os.exit(dev.is_cpu and 0 or 1)
end

-- 1. Options and headers. Headers are given as text, by the name the source includes; options are NVRTC's
-- (-D, -I, -std, ...). A repeat compile of the same source and options comes from the kernel cache.
local scale_src = [[
#include "scale.h"
extern "C" __global__ void scale(float *x, size_t n)
{
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) x[i] = SCALE * x[i];
}
]]
local m = cd.compile(scale_src, {
  name = "scale.cu",                                            -- the file name in messages
  options = { "-DSCALE=3.0f" },
  headers = { ["scale.h"] = "#ifndef SCALE\n#define SCALE 2.0f\n#endif\n" },
})
print(m, "kernels:", table.concat(m.kernels, ", "))
local scale = m.scale                                           -- the same as m:get("scale")
print(scale, "parameters:", table.concat(scale.params, ", "))

-- Launch by total threads: `dim` is the number of threads wanted; cudadev picks the block size and rounds
-- the grid up, so the kernel checks its bound (i < n).
local x = cd.array({ 1, 2, 3, 4, 5 })
scale({ dim = #x }, x, #x)
print("scaled by 3:", x)
assert(x[5] == 15)

-- 2. C++ templates: name each instantiation to compile; launch it by that name.
local axpy_src = [[
template <typename T>
__global__ void axpy(T a, const T *x, T *y, int n)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
]]
local t = cd.compile(axpy_src, { name_expressions = { "axpy<float>", "axpy<double>" } })
local xf, yf = cd.array({ 1, 2, 3 }), cd.array({ 10, 20, 30 })
t["axpy<float>"]({ grid = 1, block = 32 }, 2.0, xf, yf, 3)      -- explicit grid and block
local xd, yd = cd.array({ 1, 2, 3 }, "float64"), cd.full(3, 1, "float64")
t:get("axpy<double>")({ grid = 1, block = 32 }, 0.5, xd, yd, 3)
print(yf, yd)
assert(yf[3] == 36 and yd[3] == 2.5)

-- 3. Shared memory: a block-wise sum. `shared` is the dynamic shared memory per block in bytes, which the
-- kernel sees as its `extern __shared__` array; __syncthreads() orders the steps of the tree.
local sum_src = [[
extern "C" __global__ void block_sum(const float *x, float *sums, int n)
{
  extern __shared__ float buf[];
  int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  buf[t] = i < n ? x[i] : 0.0f;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (t < s) buf[t] += buf[t + s];
    __syncthreads();
  }
  if (t == 0) sums[blockIdx.x] = buf[0];
}
]]
local block_sum = cd.compile(sum_src).block_sum
local n, block = 1000, 128
local grid = (n + block - 1) // block
local values = {}
for i = 1, n do values[i] = i % 7 end                          -- small integers: float32 sums are exact
local xs, sums = cd.array(values), cd.empty(grid)
block_sum({ grid = grid, block = block, shared = block * 4 }, xs, sums, n)
local total, want = 0, 0
for _, s in ipairs(sums:totable()) do total = total + s end
for _, v in ipairs(values) do want = want + v end
print(("block sums %s, total %g (Lua says %g)"):format(sums, total, want))
assert(total == want)

-- What the compiler made of a kernel, and how many of its blocks fit on a multiprocessor.
local attr = block_sum.attributes
print(("block_sum: %d registers, %d bytes static shared, at most %d threads a block"):format(attr.num_regs,
  attr.shared_size_bytes, attr.max_threads_per_block))
local occ = block_sum:occupancy(block, block * 4)
print(("occupancy at %d threads: %d blocks per SM, %.0f%%, limited by %s; suggested block size %d"):format(block,
  occ.blocks_per_sm, occ.occupancy * 100, occ.limited_by, block_sum:suggest_block_size(block * 4)))

-- 4. Arguments are checked against the kernel's parameter list before anything is launched, so a mistake is
-- a Lua error naming the parameter, never a fault on the device.
local function try(what, ...)
  local ok_launch, msg = pcall(...)
  print(("%-27s %s"):format(what .. ":", ok_launch and "launched" or tostring(msg)))
end
try("n = -1", scale, { dim = 5 }, x, -1)
try("a float for an integer", scale, { dim = 5 }, x, 2.5)
try("a number for a pointer", scale, { dim = 5 }, 42.5, 5)
try("a float64 array for float*", scale, { dim = 5 }, cd.zeros(5, "float64"), 5)
try("one argument missing", scale, { dim = 5 }, x)
try("a misspelt config key", scale, { dimm = 5 }, x, 5)
try("a block too large", scale, { grid = 1, block = { 32, 32, 2 } }, x, 5)

-- A compile error is a cudadev.Error carrying the compiler's log.
local ok_compile, cerr = pcall(cd.compile, 'extern "C" __global__ void broken(float *x) { x[0] = undefined_name; }',
  { name = "broken.cu" })
print(ok_compile, cd.type(cerr), cerr.api, cerr.name)
print(cerr.log)
