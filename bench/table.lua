-- bench/table.lua DIR: joins what bench/run collected in DIR (c1.txt and c2.txt from c_driver, before and
-- after lua.txt from lua_bench.lua; py.txt from py_peers.py) into one Markdown table on stdout. Every row is
-- cudadev against the C driver API of the same run; the C value is the mean of the two C runs, and their
-- spread tells how much of a ratio is noise.
local dir = assert(arg[1], "usage: lua5.4 bench/table.lua DIR")

-- `name value unit` lines (or `framework name value unit` for py.txt); `info key value...` lines.
local function read(file, peers)
  local vals, info = {}, {}
  local f = io.open(dir .. "/" .. file)
  if not f then return vals, info end
  for line in f:lines() do
    local k, v = line:match("^info (%S+) (.+)$")
    if k then
      info[k] = v
    elseif peers then
      local fw, name, value = line:match("^(%S+) (%S+) (%S+) %S+$")
      if fw and tonumber(value) then vals[fw .. " " .. name] = tonumber(value) end
    else
      local name, value = line:match("^(%S+) (%S+) %S+$")
      if name and tonumber(value) then vals[name] = tonumber(value) end
    end
  end
  f:close()
  return vals, info
end

local c1, info = read("c1.txt")
local c2 = read("c2.txt")
local lua, luainfo = read("lua.txt")
local py = read("py.txt", true)
local ab = read("ab.txt")   -- bench/launch_ab: C and cudadev launches interleaved in one process

-- ratio = cudadev / C. `goal(r, cudadev, row)` returns the goal's text and whether it is met.
local function at_most(x)
  return function(r) return ("≤ %.2f× C"):format(x), r <= x end
end
local function at_least(x)
  return function(r) return ("≥ %.2f× C"):format(x), r >= x end
end
local function within(p)
  return function(r) return ("within %d%% of C"):format(p), math.abs(r - 1) <= p / 100 end
end
local function torch_or_less(_, v)
  local t = py["torch alloc_free_1mib"]
  if not t then return "≤ torch (no torch value)", nil end
  return "≤ torch", v <= t
end

-- a time against CuPy's for the same call: cudadev's speed (CuPy's time / cudadev's) at least x
local function vs_cupy(key, x)
  return function(_, v)
    local c = py["cupy " .. key]
    if not c then return ("≥ %.2f× CuPy's speed (no CuPy value)"):format(x), nil end
    return ("≥ %.2f× CuPy's speed (%.2f×)"):format(x, c / v), c / v >= x
  end
end
-- against the faster of CuPy and PyTorch (both call cuBLAS, as cd.matmul does)
local function vs_best(key, x)
  return function(_, v)
    local c, t = py["cupy " .. key], py["torch " .. key]
    local best = c and t and math.min(c, t) or c or t
    if not best then return ("≥ %.2f× the best peer's speed (no peer value)"):format(x), nil end
    return ("≥ %.2f× the best peer's speed (%.2f×)"):format(x, best / v), best / v >= x
  end
end
-- a + b's memory traffic (2 reads, 1 write) against the C D2D copy's (a read and a write per byte copied)
local function vs_copy(x)
  return function(_, v)
    local a, b = c1.d2d, c2.d2d
    local d = a and b and (a + b) / 2 or a or b
    if not d then return ("≥ %.0f%% of C's copy traffic (no C value)"):format(x * 100), nil end
    return ("≥ %.0f%% of C's copy traffic (%.0f%%)"):format(x * 100, v / (2 * d) * 100), v >= x * 2 * d
  end
end

local rows = {
  { "empty kernel launch", "launch_empty", "launch_empty", "µs", peers = "launch_empty" },
  { "5-argument launch", "launch_5arg", "launch_5arg", "µs", peers = "launch_5arg" },
  { "empty kernel launch, LaunchConfig, one process (A/B)", ab = "launch_empty", side = "lua_lc", "µs", at_most(1.05) },
  { "5-argument launch, LaunchConfig, one process (A/B)", ab = "launch_5arg", side = "lua_lc", "µs", at_most(1.10) },
  { "empty kernel launch, config table, one process (A/B)", ab = "launch_empty", side = "lua", "µs" },
  { "5-argument launch, config table, one process (A/B)", ab = "launch_5arg", side = "lua", "µs" },
  -- what the current-context check that every backend call starts with costs, measured in C
  { "C: cuCtxGetCurrent + empty launch, one process (A/B)", ab = "launch_empty", side = "c_ctx", "µs" },
  -- the floor of any Lua binding: a Lua loop calling a C function that only calls cuLaunchKernel
  { "Lua floor: a bare C function's empty launch, one process (A/B)", ab = "launch_empty", side = "lua_floor", "µs" },
  { "Lua floor: a bare C function's 5-argument launch, one process (A/B)", ab = "launch_5arg", side = "lua_floor", "µs" },
  { "launch + synchronize", "launch_sync", "launch_sync", "µs", peers = "launch_sync" },
  { "launch + synchronize, LaunchConfig, one process (A/B)", ab = "launch_sync", side = "lua_lc", "µs", at_most(1.05) },
  { "launch + synchronize, config table, one process (A/B)", ab = "launch_sync", side = "lua", "µs" },
  { "Lua floor: a bare C function's launch + synchronize, one process (A/B)", ab = "launch_sync", side = "lua_floor", "µs" },
  { "100 launches + synchronize", "graph_launches_100", "graph_launches_100", "µs" },
  { "graph of 100 launches + synchronize", "graph_replay_100", "graph_replay_100", "µs" },
  -- cudadev's own speedup, graph against launches in the same run; the C column is C's, for scale
  { "graph of 100 small kernels vs 100 launches, speedup", "graph_speedup", "graph_speedup", "×",
    function(_, v) return "speedup ≥ 3×", v >= 3 end, own = true },
  { "saxpy 2^24 kernel (events)", "saxpy_kernel", "saxpy_kernel", "µs", within(2), peers = "saxpy_kernel" },
  { "alloc+free 1 MiB (C: cuMemAlloc)", "alloc_free_1mib", "alloc_free_1mib", "µs", torch_or_less,
    peers = "alloc_free_1mib" },
  { "alloc+free 1 MiB (C: cuMemAllocAsync pool)", "alloc_free_async_1mib", "alloc_free_1mib", "µs" },
  { "H2D pinned 256 MiB", "h2d_pinned", "h2d_pinned", "GB/s", at_least(0.97), peers = "h2d_pinned" },
  { "D2H pinned 256 MiB", "d2h_pinned", "d2h_pinned", "GB/s", at_least(0.97), peers = "d2h_pinned" },
  { "D2D 256 MiB", "d2d", "d2d", "GB/s", at_least(0.97), peers = "d2d" },
  { "H2D pageable 256 MiB", "h2d_pageable", "h2d_pageable", "GB/s", at_least(2.0), peers = "h2d_pageable" },
  { "H2D from a Lua string 256 MiB (C: pageable)", "h2d_pageable", "h2d_string", "GB/s", at_least(2.0) },
  { "H2D from a Lua table of 2^22 numbers (C: pageable 256 MiB; peers: a Python list)", "h2d_pageable", "h2d_table",
    "GB/s", at_least(2.0), peers = "h2d_list" },
  { "D2H pageable 256 MiB", "d2h_pageable", "d2h_pageable", "GB/s", at_least(2.0) },
  { "peer copy 256 MiB, no peer access", "peer_noaccess", "peer_noaccess", "GB/s", at_least(0.95) },
  { "peer copy 256 MiB, peer access", "peer_access", "peer_access", "GB/s", at_least(0.95) },
  { "compile saxpy, first in process", "compile", "compile_first", "µs" },
  { "compile saxpy, repeat (kernel cache)", "compile", "compile_repeat", "µs" },
  { "compile saxpy, first in a new process, warm disk cache", nil, "compile_warm_disk", "µs",
    function(_, v) return "≤ 2000 µs", v <= 2000 end },
  { "a + b, 2^26 float32 (events)", nil, "add_2p26", "µs", vs_cupy("add_2p26", 0.9), peers = "add_2p26" },
  { "a + b, 2^26 float32: memory traffic", nil, "add_2p26_traffic", "GB/s", vs_copy(0.85) },
  { "a:sum(), 2^26 float32 (events)", nil, "sum_2p26", "µs", vs_cupy("sum_2p26", 0.9), peers = "sum_2p26" },
  { "cd.random.uniform, 2^26 float32 (events)", nil, "uniform_2p26", "µs", vs_cupy("uniform_2p26", 0.9),
    peers = "uniform_2p26" },
  { "cd.matmul 4096² float32, no TF32 (events)", nil, "matmul_4096", "µs", vs_best("matmul_4096", 0.95),
    peers = "matmul_4096" },
  { "cd.matmul 8192² float32, no TF32 (events)", nil, "matmul_8192", "µs", vs_best("matmul_8192", 0.95),
    peers = "matmul_8192" },
  { "cd.matmul 8192² float16 (events)", nil, "matmul_8192_f16", "µs", vs_best("matmul_8192_f16", 0.95),
    peers = "matmul_8192_f16" },
  { "first a + b in a new process, warm disk cache", nil, "ew_first_warm_disk", "µs",
    function(_, v) return "≤ 2000 µs", v <= 2000 end },
  { "Lua memory over 10^5 launches", nil, "launch_alloc_kb", "KB",
    function(_, v) return "< 1 KB (none per launch)", v < 1 end },
}

local function num(v)
  if v == nil then return "—" end
  local a = math.abs(v)
  if a >= 100 then return ("%.0f"):format(v) end
  if a >= 10 then return ("%.1f"):format(v) end
  if a >= 0.1 or a == 0 then return ("%.2f"):format(v) end
  return ("%.3f"):format(v)
end

local out = {}
local function add(s) out[#out + 1] = s end

-- the driver's name for the device measured; nvidia-smi's when c_driver could not say
local smi = os.getenv("BENCH_GPU")
local gpu = info.gpu or (smi and smi ~= "" and smi) or "unknown GPU"
add(("## cudadev benchmark: %s, %s"):format(gpu, os.getenv("BENCH_DATE") or os.date("!%Y-%m-%d %H:%M UTC")))
add("")
add(("%s, driver %s, NVRTC %s. Times per operation (lower is better), rates in 10^9 bytes copied per second " ..
  "(higher is better); ratio = cudadev / C, both measured in this run. C is the mean of two runs of " ..
  "bench/c_driver.c, before and after cudadev's, with their spread; the A/B rows are bench/launch_ab.c, " ..
  "which times C's cuLaunchKernel loop and cudadev's Lua loops by turns in one process (median of 15 each), " ..
  "so process-to-process noise stays out of those ratios; the goals apply to them, with the configuration made " ..
  "once as a LaunchConfig (cuda.core's LaunchConfig); a config table is read again at every launch."):format(info.arch or "?",
  info.driver or "?", info.nvrtc or "?"))
add("")
add("| measure | C | cudadev | ratio | cupy | torch | cuda.core | goal |")
add("|---|---|---|---|---|---|---|---|")
local passed, missed, unknown = 0, 0, 0
for _, r in ipairs(rows) do
  local label, ckey, lkey, unit, goal = r[1], r[2], r[3], r[4], r[5]
  local a, b, v = ckey and c1[ckey], ckey and c2[ckey], lua[lkey]
  if r.ab then   -- both sides from launch_ab's one process: no second C run to show a spread
    label, unit, goal = r[1], r[2], r[3]
    ckey, a, b, v = r.ab, ab[r.ab .. "_ab_c"], nil, ab[r.ab .. "_ab_" .. r.side]
  end
  local c = a and b and (a + b) / 2 or a or b
  local ccell = num(c)
  if a and b and c ~= 0 then ccell = ("%s ±%.1f%%"):format(ccell, math.abs(a - b) / c * 50) end
  local ratio = c and v and c ~= 0 and v / c or nil
  local gcell = "info"
  if goal then
    local text, met
    if v and (ratio or not ckey or r.own) then text, met = goal(ratio, v, r) else text = goal(1, 0, r) end
    gcell = text .. (met == true and " **PASS**" or met == false and " **MISS**" or " n/a")
    if met == true then passed = passed + 1 elseif met == false then missed = missed + 1 else unknown = unknown + 1 end
  end
  local function peer(fw) return r.peers and num(py[fw .. " " .. r.peers]) or "—" end
  local rcell = not ratio and "—" or ratio < 0.01 and ("%.1e×"):format(ratio) or ("%.3f×"):format(ratio)
  add(("| %s, %s | %s | %s | %s | %s | %s | %s | %s |"):format(label, unit, ckey and ccell or "—", num(v), rcell,
    peer("cupy"), peer("torch"), peer("cuda.core"), gcell))
end
add("")
add(("Goals: %d PASS, %d MISS, %d without a value. saxpy max relative error: C %s, cudadev %s. Lua clock: %s.")
  :format(passed, missed, unknown, info.saxpy_max_rel_err or "?", luainfo.saxpy_max_rel_err or "?",
    luainfo.clock or "?"))
local failed = os.getenv("BENCH_FAILED")
if failed and failed ~= "" then
  add(("**Failed: %s** (bench-raw.txt has their errors); their cells are empty."):format(failed))
end
add("Peers: PyTorch has no raw-kernel launch (its launch cells stay empty) and its saxpy is torch.add(y, x, " ..
  "alpha=a), its own kernel; a peer that could not be imported has no column values.")
print(table.concat(out, "\n"))
