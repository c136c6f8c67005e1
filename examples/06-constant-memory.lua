-- examples/06-constant-memory.lua: a filter's weights in __constant__ memory, filled from Lua and read by
-- every thread of a 1-D convolution (the pattern of cudaMemcpyToSymbol + a __constant__ array in CUDA C).
-- m:get_global(name, dtype) views the variable as an Array: copy into it, fill it, read it back, pass it to
-- kernels. Weights written between launches are what the next launch reads. The result is checked against
-- the same convolution computed in Lua. Runs on the default device (a GPU, else the cpu device).
--
-- From a fresh clone:
--   make build && LUA_CPATH='build/?.so;;' lua5.4 examples/06-constant-memory.lua
local cd = require "cudadev"

local dev = cd.get_device()
print("device:", dev.alias)

local ok, err = pcall(cd.compile, 'extern "C" __global__ void probe() {}')
if not ok then
  print("06-constant-memory: skipped: " .. (dev.is_cpu and "no CUDA device, and the cpu device cannot compile "
    .. "kernels: " or "") .. tostring(err))
  os.exit(dev.is_cpu and 0 or 1)
end

local RADIUS = 8
local m = cd.compile(([[
#define RADIUS %d
__constant__ float weights[2 * RADIUS + 1];   // filled from Lua, read by every thread

extern "C" __global__ void convolve(const float *in, float *out, int n)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float s = 0.0f;
  for (int k = -RADIUS; k <= RADIUS; k++) {
    int j = min(max(i + k, 0), n - 1);   // clamp at the edges
    s += weights[k + RADIUS] * in[j];
  }
  out[i] = s;
}
]]):format(RADIUS), { name = "convolve.cu" })
print("globals:", table.concat(m.globals, ", "))

-- The input: a step with some noise, made reproducibly in Lua.
local n = 1 << 16
local signal, seed = {}, 12345
for i = 1, n do
  seed = (seed * 1103515245 + 12345) % 2147483648
  signal[i] = (i > n // 2 and 1.0 or 0.0) + (seed / 2147483648 - 0.5) * 0.1
end
local x = cd.array(signal, "float32")
local y = cd.empty(n, "float32")

-- The weights as a float32 Array over the variable: 2*RADIUS+1 elements.
local w = m:get_global("weights", "float32")
print("weights:", w.size, w.dtype, w.nbytes .. " bytes on " .. w.device.alias)

local function gaussian(sigma)
  local t, sum = {}, 0
  for k = -RADIUS, RADIUS do
    t[#t + 1] = math.exp(-(k * k) / (2 * sigma * sigma))
    sum = sum + t[#t]
  end
  for i = 1, #t do t[i] = t[i] / sum end
  return t
end

-- The same convolution in Lua, in float32 steps (string.pack rounds each product and sum to float32).
local function f32(v) return (string.unpack("f", string.pack("f", v))) end
local function reference(wt)
  local out = {}
  for i = 1, n do
    local s = 0.0
    for k = -RADIUS, RADIUS do
      local j = math.min(math.max(i + k, 1), n)
      s = f32(s + f32(wt[k + RADIUS + 1] * f32(signal[j])))
    end
    out[i] = s
  end
  return out
end

local function run(name, wt)
  cd.copy(w, cd.array(wt, "float32"))     -- into constant memory, before the launch that reads it
  m.convolve({ dim = n }, x, y, n)
  local got, want, worst = y:totable(), reference(wt), 0
  for i = 1, n do worst = math.max(worst, math.abs(got[i] - want[i])) end
  print(("%-14s y[n/2-4 .. n/2+4] = %s   max |device - lua| = %.2g"):format(name,
    table.concat({ ("%.3f"):format(got[n // 2 - 4]), ("%.3f"):format(got[n // 2]), ("%.3f"):format(got[n // 2 + 4]) },
      " "), worst))
  assert(worst < 1e-5, "the convolution differs from the Lua reference")
end

run("gaussian s=2", gaussian(2))
run("gaussian s=5", gaussian(5))   -- new weights between launches: the next launch reads them
local box = {}
for i = 1, 2 * RADIUS + 1 do box[i] = 1 / (2 * RADIUS + 1) end
run("box", box)
w:fill(0)
m.convolve({ dim = n }, x, y, n)
local biggest = 0
for _, v in ipairs(y:totable()) do biggest = math.max(biggest, math.abs(v)) end
print("zero weights:  max |y| =", biggest)
print("weights now:", table.concat(w:totable(), " ", 1, 3) .. " ...")
