-- bench/sort_sweep.lua WORK PHASE: cudadev's side of bench/sort_sweep (issue 28: sort, argsort and cumsum on a GPU).
--   PHASE check: sort, argsort and cumsum of float32, int32, float64, int64 and uint8 at 1, 1000, 2^20 + 7 and 2^24
--     elements (repeated values: argsort's stability shows), checked on the device (sorted, a[argsort] == sort,
--     argsort a permutation, equal neighbours in position order) and saved to WORK as .npy for
--     bench/sort_sweep_peers.py to compare with NumPy (all but the 2^24 ones of other dtypes than float32).
--   PHASE time: sort and argsort of 2^24 uniform float32 and cumsum of 2^26, timed by events around the call
--     (allocation of the result included, as bench/arrays.lua), median of 20 after 3 warm-ups, for each tuning
--     of the grid (NOTE [sort tuning] in lua/cudadev/sorting.lua; SORT_SWEEP_GRID="tune;tune;..." replaces the
--     radix grid, SORT_SWEEP_SCANS="4,8,16" the scan widths (default 16)), against CuPy's lines in WORK/peers.txt;
--     then the sort's histogram alone (cd._sort_hist) of the 2^24 float32, in the default and with hpart=1.
local cd = require "cudadev"
local work, phase = arg[1], arg[2]
local fmt = string.format
-- SORT_SWEEP_MAX: the largest size, for a dry run elsewhere (the cpu device)
local MAX = math.tointeger(tonumber(os.getenv("SORT_SWEEP_MAX") or "")) or 1 << 26
local function size(n) return math.min(n, MAX) end

local function data(dt, n)
  if dt == "uint8" then return cd.random.randint({ n }, 0, 256, "uint8") end
  local i = cd.random.randint({ n }, -50000, 50000, dt:match("^int") and dt or "int32")
  if dt:match("^float") then return i:astype(dt) / 8 end   -- eighths: exact, and repeated
  return i
end

-- the device checks of s = sort(a) and p = argsort(a); nil, or what is wrong
local function check_sort(a, s, p)
  local n = a.size
  if s.size ~= n or p.size ~= n or p.dtype ~= "int64" or s.dtype ~= a.dtype then return "shape or dtype" end
  if not cd.take(a, p):eq(s):all() then return "a[argsort] ~= sort" end
  local hits = cd.zeros(n, "int32")
  cd.put(hits, p, 1)
  if hits:sum() ~= n then return "argsort is no permutation" end
  if n < 2 then return nil end
  local lo, hi = s:slice(1, n - 1), s:slice(2, n)
  if not lo:le(hi):all() then return "sort is not ascending" end
  if cd.logical_and(lo:eq(hi), p:slice(1, n - 1):ge(p:slice(2, n))):any() then return "argsort is not stable" end
  return nil
end

if phase == "check" then
  cd.random.seed(28)
  local bad = 0
  for _, dt in ipairs({ "float32", "int32", "float64", "int64", "uint8" }) do
    for _, n0 in ipairs({ 1, 1000, (1 << 20) + 7, 1 << 24 }) do
      local n = size(n0)
      local a = data(dt, n)
      local s, p, c = cd.sort(a), cd.argsort(a), cd.cumsum(a)
      cd.synchronize()
      local why = check_sort(a, s, p)
      if why then
        bad = bad + 1
        print(fmt("CHECK FAIL %s %d: %s", dt, n, why))
      end
      if n0 < (1 << 24) or dt == "float32" then
        local stem = fmt("%s/%s_%d_", work, dt, n0)
        cd.save(stem .. "a.npy", a)
        cd.save(stem .. "p.npy", p)
        cd.save(stem .. "c.npy", c)
      end
    end
  end
  -- cumsum of 2^26 float32 (the timed size) against NumPy's as well
  local big = cd.random.uniform({ size(1 << 26) })
  cd.save(work .. "/big_a.npy", big)
  cd.save(work .. "/big_c.npy", cd.cumsum(big))
  print(fmt("device checks: %d of 20 failed", bad))
  os.exit(bad == 0 and 0 or 1)
end

assert(phase == "time", "usage: sort_sweep.lua WORK check|time")
local peers = {}
for line in io.lines(work .. "/peers.txt") do
  local k, v = line:match("^RESULT (%S+) (%S+)")
  if k then peers[k] = tonumber(v) or v end
end
local e0, e1 = cd.event(), cd.event()
local function timed(fn)
  local t = {}
  for r = -2, 20 do
    e0:record()
    fn()
    e1:record()
    e1:synchronize()
    if r > 0 then t[#t + 1] = e0:elapsed(e1) * 1e3 end
  end
  table.sort(t)
  return t[#t // 2 + 1]
end
local function ratio(ours, theirs) return theirs and fmt("%.2fx", theirs / ours) or "-" end

cd.random.seed(1)
local u = cd.random.uniform({ size(1 << 24) })
local big = cd.random.uniform({ size(1 << 26) })
local default = cd._sort_tune()
local grid = {}
for g in (os.getenv("SORT_SWEEP_GRID") or table.concat({
  default,
  "hpart=1",   -- one copy of the histogram's counts, as before: 32 lanes adding into one word wait in turn
  "hpart=2", "hpart=4",
  "hist=8", "hist=16", "hpart=1,hist=16",
  "status=64",   -- 64-bit look-back words, as before: twice the zero-fill and the look-back's loads
  "look=4", "rank=match", "occ=2",
  "block=512,items=12,pitems=8", "block=256,items=12,pitems=8,occ=4", "block=384,items=15,pitems=10",
}, ";")):gmatch("[^;]+") do grid[#grid + 1] = g end

print("default tuning: " .. default)
print(fmt("%-56s %10s %8s %10s %8s", "radix tuning (over the default)", "sort us", "vs CuPy", "argsort us", "vs CuPy"))
print(fmt("%-56s %10s %8s %10s %8s", "CuPy " .. tostring(peers.cupy_version), peers.cupy_sort or "-", "", peers.cupy_argsort or "-", ""))
for _, g in ipairs(grid) do
  cd._sort_tune(default)
  local ok, err = pcall(function()
    local tune = cd._sort_tune(g)
    local s, p = cd.sort(u), cd.argsort(u)
    local why = check_sort(u, s, p)
    if why then error(why, 0) end
    local ts, ta = timed(function() return cd.sort(u) end), timed(function() return cd.argsort(u) end)
    print(fmt("%-56s %10.1f %8s %10.1f %8s", g == default and "(default)" or g, ts, ratio(ts, peers.cupy_sort), ta,
      ratio(ta, peers.cupy_argsort)))
    return tune
  end)
  if not ok then print(fmt("%-56s FAILED: %s", g, tostring(err):sub(1, 200))) end
end

-- the histogram alone (one read of the keys: about 20 us at 2^24 on an H200's bandwidth), in the default and
-- with one copy of the counts
for _, g in ipairs({ default, "hpart=1" }) do
  cd._sort_tune(default)
  cd._sort_tune(g)
  local t = timed(function() return cd._sort_hist(u) end)
  print(fmt("%-56s %10.1f", "histogram only, " .. (g == default and "(default)" or g), t))
end
cd._sort_tune(default)

print(fmt("%-56s %10s %8s", "cumsum of 2^26 float32, scan=", "us", "vs CuPy"))
print(fmt("%-56s %10s", "CuPy", peers.cupy_cumsum or "-"))
for w in (os.getenv("SORT_SWEEP_SCANS") or "16"):gmatch("%d+") do
  cd._sort_tune(default)
  local ok, err = pcall(function()
    cd._sort_tune("scan=" .. w)
    local c = cd.cumsum(big)
    local last, want = c[c.size], big:astype("float64"):sum()
    if math.abs(last - want) > 1e-3 * want then error(fmt("last %.1f, want %.1f", last, want), 0) end
    local t = timed(function() return cd.cumsum(big) end)
    print(fmt("%-56s %10.1f %8s", "scan=" .. w, t, ratio(t, peers.cupy_cumsum)))
  end)
  if not ok then print(fmt("%-56s FAILED: %s", "scan=" .. w, tostring(err):sub(1, 200))) end
end
cd._sort_tune(default)
