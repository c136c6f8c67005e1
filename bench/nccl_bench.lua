-- bench/nccl_bench.lua: all-reduce bus bandwidth of cd.nccl, one process driving every GPU of the host
-- (cd.nccl.comms, one grouped ncclAllReduce per GPU), as nccl-tests' all_reduce_perf and bench/nccl_torch.py
-- measure it: float32, in place, sum; bus bandwidth = 2(n-1)/n × bytes / time.
--
--   build/luacuda bench/nccl_bench.lua [BYTES [SAMPLES]]     default 1 GiB per GPU, 20 samples
--
-- The result is checked first (each GPU holds rank + 1; the sum must be n(n+1)/2 everywhere); then, after
-- warm-up, each sample times PER_SAMPLE back-to-back all-reduces (launched, then all GPUs synchronized) and the
-- median sample is reported. Prints "needs 2+ GPUs" and exits 0 with fewer; the last line is machine-readable:
--   RESULT cudadev busbw=<GB/s> time_ms=<ms> gpus=<n> bytes=<bytes> nccl=<version> ok=<true|false>
-- bench/nccl_run runs it beside the PyTorch twin with NCCL_NVLS_ENABLE=0 (NVLink multicast stays off).
local cd = require "cudadev"

local bytes = math.tointeger(tonumber(arg and arg[1] or "")) or (1 << 30)
local samples = math.tointeger(tonumber(arg and arg[2] or "")) or 20
local PER_SAMPLE, WARMUP = 5, 5

local ngpu = cd.device_count()
if ngpu < 2 then
  print(("nccl_bench: needs 2+ GPUs (found %d)"):format(ngpu))
  return
end
local ok, why = cd.nccl.is_available()
if not ok then
  print("nccl_bench: no NCCL: " .. why)
  return
end

local count = bytes // 4
local comms = cd.nccl.comms(cd.cuda_devices())
local xs = {}
for i, c in ipairs(comms) do xs[i] = cd.full(count, c.rank + 1, "float32", { device = c.device }) end

local function all_reduce()
  cd.nccl.group(function()
    for i, c in ipairs(comms) do c:all_reduce(xs[i], xs[i], "sum") end
  end)
end

-- the check: every element of every GPU holds n(n+1)/2
all_reduce()
cd.synchronize()
local want = ngpu * (ngpu + 1) // 2
local correct = true
for i = 1, ngpu do
  local lo, hi = xs[i]:min(), xs[i]:max()
  if lo ~= want or hi ~= want then
    correct = false
    print(("nccl_bench: WRONG on rank %d: min %s, max %s, expected %d"):format(i - 1, tostring(lo), tostring(hi), want))
  end
end

-- timed on zeros (values do not change NCCL's speed, and stay finite)
for i = 1, ngpu do xs[i]:zero() end
for _ = 1, WARMUP do all_reduce() end
cd.synchronize()
local times = {}
for s = 1, samples do
  local t0 = cd.now()
  for _ = 1, PER_SAMPLE do all_reduce() end
  cd.synchronize()
  times[s] = (cd.now() - t0) / PER_SAMPLE
end
table.sort(times)
local median = samples % 2 == 1 and times[(samples + 1) // 2] or (times[samples // 2] + times[samples // 2 + 1]) / 2
local nbytes = count * 4
local algbw = nbytes / median / 1e9
local busbw = algbw * 2 * (ngpu - 1) / ngpu
local version, path = cd.nccl.version()
print(("nccl_bench: cudadev cd.nccl all_reduce float32 %.2f GiB on %d GPUs (one process): median %.3f ms of %d "
  .. "samples (min %.3f, max %.3f), algbw %.1f GB/s, busbw %.1f GB/s, NCCL %s (%s), %s"):format(nbytes / 2^30, ngpu,
  median * 1e3, samples, times[1] * 1e3, times[samples] * 1e3, algbw, busbw, version, path,
  correct and "checked" or "WRONG RESULT"))
print(("RESULT cudadev busbw=%.2f time_ms=%.4f gpus=%d bytes=%d nccl=%s ok=%s"):format(busbw, median * 1e3, ngpu,
  nbytes, version, tostring(correct)))
for _, c in ipairs(comms) do c:destroy() end
if not correct then os.exit(1) end
