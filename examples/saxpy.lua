-- examples/saxpy.lua: out = a*x + y, the saxpy of cuda-python's NVRTC walkthrough ("CUDA Python" on NVIDIA's
-- developer blog), step for step: the kernel as a string, compiled at run time, inputs made on the host and
-- copied over on a stream, the launch, the copy back, and a check against the host. cudadev does the
-- bookkeeping the walkthrough spells out (context, PTX, module, argument pointers, error codes).
--
--   make build && build/luacuda examples/saxpy.lua [N]     N elements: default 2^24 on a GPU, 2^20 on the cpu device
--   CUDADEV_DEVICE=cpu build/luacuda examples/saxpy.lua    the same script on the cpu device
--
-- Exits 1 when the result is wrong; exits 0, saying why, when there is neither a GPU nor a working compiler
-- for cpu kernels.
local cd = require "cudadev"

-- The kernel, as in the walkthrough: CUDA C in a string, 0-based indices inside.
local saxpy_src = [[
extern "C" __global__
void saxpy(float a, float *x, float *y, float *out, size_t n)
{
  size_t tid = blockIdx.x * blockDim.x + threadIdx.x;
  if (tid < n) {
    out[tid] = a * x[tid] + y[tid];
  }
}
]]

-- The default device: a GPU when there is one, else cpu (or whatever CUDADEV_DEVICE names).
local dev = cd.get_device()

-- The cpu device compiles kernels with the host's C++ compiler. Probing with an empty kernel tells "no
-- compiler here" (skip) apart from a real error in saxpy's compile (fail).
local ok, err = pcall(cd.compile, 'extern "C" __global__ void probe() {}')
if not ok then
  if dev.is_cpu then
    local _, why = cd.is_available()
    print(("saxpy: skipped: no CUDA device (%s), and the cpu device cannot compile kernels: %s")
      :format(why, tostring(err)))
    os.exit(0)
  end
  error(err, 0)
end

local n = dev.is_cpu and 1 << 20 or 1 << 24
if arg[1] then
  n = math.tointeger(tonumber(arg[1])) or error("usage: build/luacuda examples/saxpy.lua [number of elements]", 0)
end
local a = 2.0

-- nvrtcCreateProgram + nvrtcCompileProgram + cuModuleLoadData + cuModuleGetFunction, in one call. Like the
-- walkthrough we turn fused multiply-add off; the architecture is the device's own (it hard-coded
-- compute_75). A compile error would raise a cudadev.Error carrying NVRTC's log.
local saxpy = cd.compile(saxpy_src, { name = "saxpy.cu", options = { "--fmad=false" } }).saxpy

-- All the work goes to one stream, as in the walkthrough: made current, it is where copies, fills and
-- launches go when they name none.
local stream = cd.stream()
cd.set_stream(stream)

-- Host inputs: random, never zeros (zeros hide unwritten or misindexed outputs). Pinned memory lets the
-- copies run asynchronously on the stream. Filled a slice at a time: one Lua table of 2^24 numbers would
-- take 256 MiB.
local function random_host_array(count)
  local h = cd.empty(count, "float32", { pinned = true })
  local chunk = {}
  for off = 0, count - 1, 65536 do
    local m = math.min(65536, count - off)
    for i = 1, m do chunk[i] = math.random() end
    cd.copy(h, chunk, { dst_offset = off, count = m })
  end
  return h
end
local hx, hy = random_host_array(n), random_host_array(n)

-- cuMemAlloc + cuMemcpyHtoDAsync: a:to(dev) makes a copy on the device (on cpu it is the array itself).
local x, y = hx:to(dev), hy:to(dev)
local out = cd.empty(n, "float32")
out:fill(0 / 0)   -- poisoned with NaN: an element the kernel misses cannot pass the check

-- The launch: 512 threads a block and enough blocks to cover n (the walkthrough's 32768 x 512 = 2^24).
-- The arguments are checked against the kernel's parameter list before anything is launched.
local cfg = { grid = (n + 511) // 512, block = 512 }
saxpy(cfg, a, x, y, out, n)   -- warm-up: the first launch pays for loading

-- The kernel time, measured with events recorded on the stream around a second launch.
local start, stop = cd.event(), cd.event()
out:fill(0 / 0)
start:record()
saxpy(cfg, a, x, y, out, n)
stop:record()

-- cuMemcpyDtoHAsync + cuStreamSynchronize.
local hout = cd.empty(n, "float32", { pinned = true })
cd.copy(hout, out)
stream:synchronize()
local ms = start:elapsed(stop)

-- The check: every element against a*x + y computed by Lua in double precision, as max relative error.
-- Slices keep the tables small.
local worst, first_bad = 0, nil
for off = 1, n, 65536 do
  local last = math.min(off + 65535, n)
  local xs, ys, os_ = hx:slice(off, last):totable(), hy:slice(off, last):totable(), hout:slice(off, last):totable()
  for i = 1, #xs do
    local ref = a * xs[i] + ys[i]
    local err = math.abs(os_[i] - ref) / math.max(math.abs(ref), 1e-30)
    if not (err <= 1e-6) then   -- NaN compares false: an unwritten element lands here
      first_bad = first_bad or ("out[%d] = %s, expected %s"):format(off + i - 1, os_[i], ref)
      err = math.huge
    end
    if err > worst then worst = err end
  end
end

-- saxpy reads x and y and writes out: 12 bytes an element.
print(("saxpy n=%d on %s (%s): max relative error %.2e %s, kernel %.3f ms (%.1f GB/s)"):format(n, dev.alias,
  dev.name, worst, first_bad and "FAILED" or "ok", ms, 12 * n / (ms * 1e-3) / 1e9))
if first_bad then
  io.stderr:write("saxpy: wrong result: ", first_bad, "\n")
  os.exit(1)
end
