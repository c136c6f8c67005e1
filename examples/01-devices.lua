-- examples/01-devices.lua: which devices there are, what they say about themselves, and how a script
-- chooses the one its work goes to. Runs anywhere: without a GPU there is still the cpu device.
--
--   make build && build/luacuda examples/01-devices.lua
--   CUDADEV_DEVICE=cpu build/luacuda examples/01-devices.lua     (choose the default device from outside)
local cd = require "cudadev"

-- A probe, not an error: false and the reason when there is no usable driver or device.
local ok, why = cd.is_available()
print("CUDA available:", ok, why or "")
print("CUDA devices:", cd.device_count())

-- The start-up summary, in the manner of Warp's banner.
cd.detect()

-- Every device, "cpu" first. Every object prints something useful.
for _, d in ipairs(cd.devices()) do
  print(d)
  print(("  alias=%s ordinal=%d arch=%d is_cpu=%s sm_count=%d total_memory=%.1f GiB"):format(
    d.alias, d.ordinal, d.arch, d.is_cpu, d.sm_count, d.total_memory / 2^30))
end

-- CUDA devices say more: identity, memory, and any CU_DEVICE_ATTRIBUTE_* by its lowercase name.
for _, d in ipairs(cd.cuda_devices()) do
  local free, total = d:memory_info()
  print(("%s: uuid %s, PCI %s, %.1f of %.1f GiB free, memory pools %s, %d threads per block at most"):format(
    d.alias, d.uuid, d.pci_bus_id, free / 2^30, total / 2^30, d.is_mempool_supported and "yes" or "no",
    d:attribute("max_threads_per_block")))
end

-- The default device is where arrays, streams and compiled kernels go when no device is named. It comes
-- from CUDADEV_DEVICE, else CUDA_DEVICE, else ~/.cuda-device, else the first CUDA device, else cpu.
local default = cd.get_device()
print("default device:", default.alias)

-- A device can be named many ways; two values for the same device compare equal.
assert(cd.device("cpu") == cd.devices()[1])
if cd.device_count() > 0 then assert(cd.device(0) == cd.device("cuda:0")) end

-- with_device runs a function with another default device and restores the previous one afterwards,
-- also when the function raises an error. It returns what the function returns.
local inside = cd.with_device("cpu", function() return cd.get_device().alias end)
print("inside with_device:", inside)
local ok_call, err = pcall(cd.with_device, "cpu", function() error("something failed in here") end)
print("the error came through:", ok_call, err)
assert(cd.get_device() == default, "with_device restores the default device")

-- scope is the same as a to-be-closed value: the previous device comes back when the block ends.
do
  local _ <close> = cd.scope("cpu")
  print("inside the scope:", cd.get_device().alias)
end
assert(cd.get_device() == default)
print("after the scope:", cd.get_device().alias)

-- A device that does not exist is an error that says why.
print(pcall(cd.device, "cuda:99"))

-- Wait for all queued work on every device (there is none yet).
cd.synchronize()
