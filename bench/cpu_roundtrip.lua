-- bench/cpu_roundtrip.lua: what a cpu launch's round trip costs, in a loop of 10,000 small launches (NOTE [launch
-- handshake] in src/cpu_run.c). The launch mode is the environment's (CUDADEV_CPU_FORK=0: in-process).
--   lua5.4 bench/cpu_roundtrip.lua back    launches back to back: both sides of a contained launch spin
--   lua5.4 bench/cpu_roundtrip.lua apart   a kernel of about 100 us and 200 us of host work between launches:
--                                          past their spin budgets, both sides sleep and are woken
-- Prints `<mode> <back|apart> <us per launch>`, the median of 3 loops (apart: the host's work not counted).
local cd = require "cudadev"
local now = require("system").monotime
cd.set_device(cd.device("cpu"))
local what, N = arg[1] or "back", tonumber(arg[2] or 10000)
local m = cd.compile([[
extern "C" __global__ void small(float *x) { x[threadIdx.x] += 1.0f; }
extern "C" __global__ void busy(int n, float *x) { float v = x[0]; for (int i = 0; i < n; i++) v = v * 0.999f + 1.0f; x[0] = v; }
]])
local x = cd.zeros(32, "float32")
local cfg = { grid = 1, block = 32 }
local function launch() m.small(cfg, x) end
local gap = 0
if what == "apart" then
  cfg = { grid = 1, block = 1 }
  launch = function()
    m.busy(cfg, 30000, x)
    local g0 = now()
    while now() - g0 < 200e-6 do end
    gap = gap + (now() - g0)
  end
end
for _ = 1, 100 do launch() end
local t = {}
for r = 1, 3 do
  gap = 0
  local t0 = now()
  for _ = 1, N do launch() end
  t[r] = ((now() - t0) - gap) / N * 1e6
end
table.sort(t)
print(("%s %s %.2f"):format(os.getenv("CUDADEV_CPU_FORK") == "0" and "in-process" or "contained", what, t[2]))
