-- Many devices (Warp's device guide, "scoped devices"): increment an array on every device 1000 times,
-- each device in its own scope, then copy between two GPUs with and without peer access and time it.
-- Runs unchanged on one GPU, on two or more, and on the cpu device alone (CUDADEV_DEVICE=cpu).
--
--   make build && build/luacuda examples/multi_gpu.lua
--   CUDADEV_DEVICE=cpu build/luacuda examples/multi_gpu.lua
local cd = require "cudadev"

local devices = cd.cuda_devices()
if #devices == 0 or os.getenv("CUDADEV_DEVICE") == "cpu" then devices = { cd.device("cpu") } end

local src = [[extern "C" __global__ void inc(float *a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] += 1.0f;
}]]

local n = devices[1].is_cpu and 1 << 12 or 1 << 20
local steps = devices[1].is_cpu and 100 or 1000
local arrays = {}
for _, d in ipairs(devices) do
  local _ <close> = cd.scope(d)              -- everything below lands on d: compile, allocate, launch
  local inc = cd.compile(src).inc
  local a = cd.zeros(n)
  for _ = 1, steps do inc({ dim = n }, a, n) end
  arrays[d.alias] = a
end
cd.synchronize()                             -- all devices
for alias, a in pairs(arrays) do
  local first, last = a[1], a[n]
  assert(first == steps and last == steps, alias .. ": wrong result " .. first .. ", " .. last)
  print(("%-8s incremented %d elements %d times: a[1] = %g, a[n] = %g"):format(alias, n, steps, first, last))
end

if #cd.cuda_devices() < 2 then
  print("peer copy: needs two CUDA devices, found " .. #cd.cuda_devices())
  return
end

-- A 256 MiB device-to-device copy from cuda:0 to cuda:1: direct with peer access, staged without.
local d0, d1 = cd.device("cuda:0"), cd.device("cuda:1")
local bytes = 256 << 20
local src_a = cd.full(bytes // 4, 1.25, "float32", { device = d0 })
local dst_a = cd.empty(bytes // 4, "float32", { device = d1 })
local function timed_copy()
  local s = cd.get_stream(d1)
  cd.copy(dst_a, src_a, { stream = s })      -- warm-up
  local e1, e2 = cd.event(d1), cd.event(d1)
  e1:record(s)
  for _ = 1, 5 do cd.copy(dst_a, src_a, { stream = s }) end
  e2:record(s)
  e2:synchronize()
  return 5 * bytes / (e1:elapsed(e2) / 1000) / 1e9
end
print(("peer access supported: %s"):format(cd.is_peer_access_supported(d1, d0)))
print(("copy cuda:0 -> cuda:1 without peer access: %.1f GB/s"):format(timed_copy()))
if cd.is_peer_access_supported(d0, d1) then
  -- arrays come from each device's stream-ordered pool: the direct path needs access to the pools too
  local pools = cd.is_mempool_access_supported(d0, d1) and cd.is_mempool_access_supported(d1, d0)
  cd.with_peer_access(d0, d1, true, function()
    cd.with_peer_access(d1, d0, true, function()
      if pools then
        cd.with_mempool_access(d0, d1, true, function()
          cd.with_mempool_access(d1, d0, true, function()
            print(("copy cuda:0 -> cuda:1 with peer access:    %.1f GB/s"):format(timed_copy()))
          end)
        end)
      else
        print(("copy cuda:0 -> cuda:1 with peer access:    %.1f GB/s"):format(timed_copy()))
      end
    end)
  end)
end
assert(dst_a[bytes // 4] == 1.25)
