-- bench/lua_bench.lua: the cudadev side of bench/run. The measurements of bench/c_driver.c, made the way a
-- Lua program would make them (cd.compile, k(cfg, ...) with the configuration table made once, cd.empty and
-- free, cd.copy, events), plus what only cudadev has: the repeat compile served by its kernel cache, the first
-- compile of a new process served by its disk cache, the Lua memory that launches allocate, and copies from a
-- Lua string.
--
-- Output: `name value unit` lines on stdout, `info key value` lines; errors on stderr, exit status 1
-- (2: no CUDA device). Method as in c_driver.c: host-side costs by a wall clock with the synchronisation
-- inside the timed region, device work by events, medians, saxpy on random data over a NaN-poisoned output.
local cd = require "cudadev"

local ok, why = cd.is_available()
if not ok then
  io.stderr:write("no CUDA device: ", tostring(why), "\n")
  os.exit(2)
end
local dev = cd.device("cuda:0")
cd.set_device(dev)

local REPS, LAUNCHES = 5, 100000

local function out(name, value, unit, fmt)
  print(("%s " .. (fmt or "%.3f") .. " %s"):format(name, value, unit))
end

local function fail(msg)
  io.stderr:write("lua_bench: ", msg, "\n")
  os.exit(1)
end

local function median(t)
  table.sort(t)
  local n = #t
  return n % 2 == 1 and t[(n + 1) // 2] or (t[n // 2] + t[n // 2 + 1]) / 2
end

-- Lua has no wall clock of its own; luasystem (a busted dependency, so present wherever the specs run) has a
-- monotonic one. Without it, the clock is read off events on an idle stream, synchronizing at each reading:
-- every reading below is taken at a point that synchronizes anyway. A chunk, so that the child processes of
-- the warm-cache compile read the same clock: load(CLOCK)(cd) returns the clock and its name.
local CLOCK = [[
local cd = ...
local has_system, system = pcall(require, "system")
if has_system and system.monotime then return system.monotime, "system.monotime" end
local origin = cd.event():record()
origin:synchronize()
return function()
  local e = cd.event():record()
  e:synchronize()
  return origin:elapsed(e) / 1e3
end, "events"
]]
local now, clock_name = load(CLOCK)(cd)
print("info clock " .. clock_name)

-- Runs the Lua chunk `child` in REPS new processes; each prints "microseconds disk_hits". Prints the median as
-- `name` and the hit count as info; a child that fails leaves the cell empty and says why (`what`) on stderr.
local function time_children(name, what, child)
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(child)
  f:close()
  local t, hits, err = {}, 0, nil
  for r = 1, REPS do
    local p = assert(io.popen(("%s %s 2>&1"):format(arg and arg[-1] or "lua5.4", path)))
    local text = p:read("a")
    p:close()
    local us, hit = text:match("^(%S+) (%d+)\n$")
    if not us then err = text break end
    t[r], hits = tonumber(us), hits + tonumber(hit)
  end
  os.remove(path)
  if err then   -- the other measurements go on; this one's cell stays empty
    io.stderr:write("lua_bench: the ", what, " child failed: ", err, "\n")
  else
    out(name, median(t), "us", "%.0f")
    print(("info %s_hits %d/%d"):format(name, hits, REPS))
  end
end

-- Timing events on the current (default) stream, where launches and copies go.
local e0, e1 = cd.event(), cd.event()
local function event_ms()
  e1:synchronize()
  return e0:elapsed(e1)
end

-- The kernels: the same text as c_driver.c.
local EMPTY_SRC = 'extern "C" __global__ void empty() {}\n'
local ARGS5_SRC = [[
extern "C" __global__ void args5(float *p, int i, float f, size_t n, float *q)
{
  if (i < 0) p[n] = f * q[0];   /* never taken: the launch is what is measured */
}
]]
local SAXPY_SRC = [[
extern "C" __global__
void saxpy(float a, float *x, float *y, float *out, size_t n)
{
  size_t tid = blockIdx.x * blockDim.x + threadIdx.x;
  if (tid < n) {
    out[tid] = a * x[tid] + y[tid];
  }
}
]]

---------------------------------------------------------------------------------------------------- compile
-- The first compile loads NVRTC and its builtins; c_driver.c also compiles these two before it times saxpy.
local empty = cd.compile(EMPTY_SRC, { name = "empty.cu" }).empty
local args5 = cd.compile(ARGS5_SRC, { name = "args5.cu" }).args5

local t0 = now()
local saxpy = cd.compile(SAXPY_SRC, { name = "saxpy.cu" }).saxpy
out("compile_first", (now() - t0) * 1e6, "us", "%.0f")

do
  local t = {}
  for r = 1, REPS do
    t0 = now()
    for _ = 1, 1000 do cd.compile(SAXPY_SRC, { name = "saxpy.cu" }) end
    t[r] = (now() - t0) / 1000 * 1e6
  end
  out("compile_repeat", median(t), "us")
end

-- µs of the first cd.compile of saxpy in a new process whose disk cache holds it (bench/run gives the run an
-- empty cache, which the compile_first above filled): each child makes its context first, then times the
-- compile alone with the same clock. Median of five processes; info says how many hit the disk.
do
  local child = ([==[
local cd = require "cudadev"
local dev = cd.device("cuda:0")
cd.set_device(dev)
cd.empty(1):free()   -- the context and the pool are not the compile's cost
dev:synchronize()
local now = load(%q)(cd)
local t0 = now()
cd.compile(%q, { name = "saxpy.cu" })
local t1 = now()
io.write(("%%.3f %%d\n"):format((t1 - t0) * 1e6, cd.kernel_cache_stats().disk_hits))
]==]):format(CLOCK, SAXPY_SRC)
  time_children("compile_warm_disk", "warm-cache compile", child)
end

---------------------------------------------------------------------------------------------------- launches
local cfg = { grid = 1, block = 1 }   -- made once, as a program launching in a loop would

-- µs per launch: LAUNCHES back to back on the default stream, then one synchronize.
local function launch_cost(k, ...)
  for _ = 1, 1000 do k(cfg, ...) end
  dev:synchronize()
  local t = {}
  for r = 1, REPS do
    t0 = now()
    for _ = 1, LAUNCHES do k(cfg, ...) end
    dev:synchronize()
    t[r] = (now() - t0) / LAUNCHES * 1e6
  end
  return median(t)
end

local p, q = cd.empty(262144), cd.empty(262144)
out("launch_empty", launch_cost(empty), "us")
out("launch_5arg", launch_cost(args5, p, 1, 2.5, 1024, q), "us")

do   -- µs per launch followed by dev:synchronize() (cuCtxSynchronize)
  local N, t = 10000, {}
  for _ = 1, 100 do
    empty(cfg)
    dev:synchronize()
  end
  for r = 1, REPS do
    t0 = now()
    for _ = 1, N do
      empty(cfg)
      dev:synchronize()
    end
    t[r] = (now() - t0) / N * 1e6
  end
  out("launch_sync", median(t), "us")
end

do   -- a graph of 100 empty-kernel launches made by cd.capture, against the 100 launches themselves, each followed
     -- by s:synchronize(): µs per round (the median of REPS runs of 200 rounds), and launches over graph
  local K, ROUNDS = 100, 200
  local s = cd.stream(dev)
  local scfg = { grid = 1, block = 1, stream = s }
  local g = cd.capture(s, function() for _ = 1, K do empty(cfg) end end)   -- s is current while capturing
  local function per_round(fn)
    local t = {}
    for r = 0, REPS do   -- one warm-up run
      t0 = now()
      for _ = 1, ROUNDS do
        fn()
        s:synchronize()
      end
      if r > 0 then t[r] = (now() - t0) / ROUNDS * 1e6 end
    end
    return median(t)
  end
  local launches = per_round(function() for _ = 1, K do empty(scfg) end end)
  local replay = per_round(function() g:launch(s) end)
  out("graph_launches_100", launches, "us", "%.2f")
  out("graph_replay_100", replay, "us", "%.2f")
  out("graph_speedup", launches / replay, "x")
  g:free()
end

do   -- Lua memory allocated by 10^5 launches, the collector stopped so that nothing hides it
  collectgarbage("collect")
  collectgarbage("stop")
  local before = collectgarbage("count")
  for _ = 1, 100000 do args5(cfg, p, 1, 2.5, 1024, q) end
  local after = collectgarbage("count")
  collectgarbage("restart")
  dev:synchronize()
  out("launch_alloc_kb", after - before, "KB", "%.2f")
end
p:free()
q:free()

---------------------------------------------------------------------------------------------------- saxpy
-- Fills a host array with uniform [0, 1) values, a chunk at a time (a 2^24-entry table would take 256 MiB).
local CHUNK = 1 << 16
local function fill_random(h)
  local t = {}
  for off = 0, h.size - 1, CHUNK do
    local m = math.min(CHUNK, h.size - off)
    for i = 1, m do t[i] = math.random() end
    for i = m + 1, #t do t[i] = nil end
    cd.copy(h, t, { dst_offset = off })
  end
end

do
  local n, a = 1 << 24, 2.0
  local hx, hy = cd.empty(n, "float32", { device = "cpu" }), cd.empty(n, "float32", { device = "cpu" })
  fill_random(hx)
  fill_random(hy)
  local x, y, o = hx:to(dev), hy:to(dev), cd.empty(n)
  local scfg = { grid = (n + 255) // 256, block = 256 }   -- c_driver.c's grid and block
  local t = {}
  for r = -2, 20 do   -- three warm-up runs, then 20 timed, each on an output poisoned with NaN
    o:fill(0 / 0)
    e0:record()
    saxpy(scfg, a, x, y, o, n)
    e1:record()
    local ms = event_ms()
    if r > 0 then t[r] = ms * 1e3 end
  end
  -- every element of the last run against a float64 host result; NaN (never written) fails the test
  local ho, worst = o:to("cpu"), 0
  for off = 1, n, CHUNK do
    local last = math.min(off + CHUNK - 1, n)
    local xs, ys, os_ = hx:slice(off, last):totable(), hy:slice(off, last):totable(), ho:slice(off, last):totable()
    for i = 1, #xs do
      local ref = a * xs[i] + ys[i]
      local err = math.abs(os_[i] - ref) / math.max(math.abs(ref), 1e-30)
      if not (err <= 1e-6) then
        fail(("saxpy is wrong at element %d: %s, expected %s"):format(off + i - 1, os_[i], ref))
      end
      if err > worst then worst = err end
    end
  end
  print(("info saxpy_max_rel_err %.3g"):format(worst))
  out("saxpy_kernel", median(t), "us", "%.2f")
  for _, arr in ipairs { hx, hy, x, y, o, ho } do arr:free() end
end

---------------------------------------------------------------------------------------------------- allocation
do   -- µs per 1 MiB cd.empty + free (cudadev's caching pool, stream-ordered)
  local N, t = 10000, {}
  for _ = 1, 100 do cd.empty(262144):free() end
  for r = 1, REPS do
    t0 = now()
    for _ = 1, N do
      local arr = cd.empty(262144)
      arr:free()
    end
    dev:synchronize()
    t[r] = (now() - t0) / N * 1e6
  end
  out("alloc_free_1mib", median(t), "us")
end

---------------------------------------------------------------------------------------------------- copies
local BYTES = 256 << 20
local NF = BYTES // 4
local COPY_REPS = 10

-- GB/s (10^9 bytes copied per second) of one 256 MiB cd.copy, timed by events.
local function copy_rate(dst, src)
  local t = {}
  for r = 0, COPY_REPS do   -- one warm-up copy
    e0:record()
    cd.copy(dst, src)
    e1:record()
    local ms = event_ms()
    if r > 0 then t[r] = BYTES / (ms * 1e-3) / 1e9 end
  end
  return median(t)
end

-- Host data that is not one repeated value: a fill plus random values at random places, and the places
-- that are compared after each round trip (4096 of them, both ends included).
local probes = { 1, NF }
for i = 3, 4096 do probes[i] = math.random(NF) end
local function seed(h)
  h:fill(1.25)
  for _, i in ipairs(probes) do h[i] = i % 1000 + 0.5 end
end
local function check(got, what)
  for _, i in ipairs(probes) do
    if got[i] ~= i % 1000 + 0.5 then fail(("%s copied wrong data at element %d: %s"):format(what, i, got[i])) end
  end
end

do
  local h1 = cd.empty(NF, "float32", { pinned = true })
  local h2 = cd.empty(NF, "float32", { pinned = true })
  local d1, d2 = cd.empty(NF), cd.empty(NF)
  seed(h1)
  out("h2d_pinned", copy_rate(d1, h1), "GB/s", "%.2f")
  h2:fill(0 / 0)
  out("d2h_pinned", copy_rate(h2, d1), "GB/s", "%.2f")
  check(h2, "the pinned round trip")
  d2:fill(0 / 0)
  out("d2d", copy_rate(d2, d1), "GB/s", "%.2f")
  h2:fill(0 / 0)
  cd.copy(h2, d2)
  check(h2, "the device-to-device copy")

  -- GB/s of copy() by the wall clock: the median of REPS after one warm-up; before(), when given, runs untimed
  -- before each copy.
  local function wall_rate(copy, before)
    local t = {}
    for r = 0, REPS do
      if before then before() end
      t0 = now()
      copy()
      if r > 0 then t[r] = BYTES / (now() - t0) / 1e9 end
    end
    return median(t)
  end

  -- Pageable: an ordinary cpu array. cd.copy returns once the copy is done; the synchronize matches
  -- c_driver.c's, after its cuMemcpyHtoD.
  local hp = cd.empty(NF, "float32", { device = "cpu" })
  seed(hp)
  d1:fill(0 / 0)
  local rate = wall_rate(function()
    cd.copy(d1, hp)
    dev:synchronize()
  end)
  h2:fill(0 / 0)
  cd.copy(h2, d1)
  check(h2, "the pageable copy")
  out("h2d_pageable", rate, "GB/s", "%.2f")

  -- Back into the pageable array: complete when cd.copy returns, as cuMemcpyDtoH is in c_driver.c.
  rate = wall_rate(function() cd.copy(hp, d1) end, function() hp:fill(0 / 0) end)
  check(hp, "the pageable copy back")
  out("d2h_pageable", rate, "GB/s", "%.2f")

  -- From a Lua string of 256 MiB (float32 k + 0.5 for k = 0 .. 16383, repeated); c_driver.c's line is its
  -- cuMemcpyHtoD from malloc'd memory.
  local parts = {}
  for k = 0, 16383 do parts[k + 1] = string.pack("<f", k + 0.5) end
  local str = table.concat(parts):rep(BYTES // 65536)
  parts = nil
  rate = wall_rate(function()
    cd.copy(d1, str)
    dev:synchronize()
  end)
  h2:fill(0 / 0)
  cd.copy(h2, d1)
  for _, i in ipairs(probes) do
    if h2[i] ~= (i - 1) % 16384 + 0.5 then fail(("the string copy copied wrong data at element %d: %s"):format(i, h2[i])) end
  end
  out("h2d_string", rate, "GB/s", "%.2f")
  str = nil

  -- From a Lua table of 2^22 numbers (16 MiB as float32; a table of 256 MiB would take 1 GiB of Lua memory),
  -- converted straight into the staging buffers; the rate is bytes of float32 per second, set against C's
  -- pageable cuMemcpyHtoD of 256 MiB. Each number is read through the Lua C API (lua_rawgeti to count the leaves,
  -- lua_rawgeti and lua_tonumberx to convert, popped 32 at a time: NOTE [table batches]), which bounds this row,
  -- not the copy.
  local NT = 1 << 22
  local tbl = {}
  for k = 1, NT do tbl[k] = (k - 1) % 16384 + 0.5 end
  d1:fill(0 / 0)
  local t_rates = {}
  for r = 0, 3 do
    local t0 = now()
    cd.copy(d1, tbl)
    dev:synchronize()
    if r > 0 then t_rates[r] = NT * 4 / (now() - t0) / 1e9 end
  end
  tbl = nil
  h2:fill(0 / 0)
  cd.copy(h2, d1)
  for _, i in ipairs { 1, 2, 16385, NT } do
    if h2[i] ~= (i - 1) % 16384 + 0.5 then fail(("the table copy copied wrong data at element %d: %s"):format(i, h2[i])) end
  end
  if h2[NT + 1] == h2[NT + 1] then fail("the table copy wrote past its 2^22 elements") end
  out("h2d_table", median(t_rates), "GB/s", "%.2f")
  for _, arr in ipairs { h1, h2, d1, d2, hp } do arr:free() end
end

------------------------------------------------------------------------------------------ computing with arrays
-- a + b, a:sum() and cd.random.uniform on 2^26 float32, then cd.matmul (issue 17's rows, against CuPy's and
-- PyTorch's same calls in py_peers.py), each timed by events around the call, allocation of the result included (as the
-- peers allocate theirs), median of 20 after 3 warm-ups; results checked. Then the first call of a generated
-- kernel in a new process whose disk cache holds it.
do
  local n = 1 << 26
  local function timed(fn)
    local t = {}
    for r = -2, 20 do
      e0:record()
      local res = fn()
      e1:record()
      local ms = event_ms()
      if r > 0 then t[r] = ms * 1e3 end
      res = nil
    end
    return median(t)
  end
  -- i % 1024 and (i * 7) % 1000 / 8: not zeros, exact in float32, with a known sum. The index is counted
  -- in int32 and converted after the modulo: a float32 arange is not exact past 2^24.
  local a = (cd.arange(n, "int32") % 1024):astype("float32")
  local b = ((cd.arange(n, "int32") * 7) % 1000):astype("float32") / 8
  local c = a + b
  for _, i in ipairs { 1, 2, 1025, n // 2 + 3, n } do
    if c[i] ~= a[i] + b[i] or a[i] ~= (i - 1) % 1024 then fail(("a + b is wrong at element %d"):format(i)) end
  end
  c = nil
  local us = timed(function() return a + b end)
  out("add_2p26", us, "us")
  out("add_2p26_traffic", 3 * 4 * n / (us * 1e-6) / 1e9, "GB/s", "%.1f")
  local expect = 523776.0 * (n // 1024)
  local got = a:sum()
  if math.abs(got - expect) > 1e-5 * expect then fail(("a:sum() gave %.17g, expected %.17g"):format(got, expect)) end
  local o = cd.empty({}, "float32")
  out("sum_2p26", timed(function() return a:sum({ out = o }) end), "us")
  local u = cd.random.uniform(n, "float32")
  local umin, umax, umean = u:min(), u:max(), u:mean()
  if umin < 0 or umax >= 1 or math.abs(umean - 0.5) > 1e-3 then
    fail(("cd.random.uniform gave min %g, max %g, mean %g"):format(umin, umax, umean))
  end
  u = nil
  out("uniform_2p26", timed(function() return cd.random.uniform(n, "float32") end), "us")

  -- cd.matmul (cuBLAS) on uniform [0, 1) square matrices, against `a @ b` and torch.matmul in py_peers.py: float32
  -- in full precision on every side (cuBLAS's default math mode, no TF32: CuPy's and PyTorch's default too),
  -- float16 accumulated in float32. Checked: sum(a b) = sum over k of (column k's sum of a) (row k's sum of b).
  for _, case in ipairs { { 4096, "float32", "matmul_4096" }, { 8192, "float32", "matmul_8192" },
                          { 8192, "float16", "matmul_8192_f16" } } do
    local m, dt, key = case[1], case[2], case[3]
    local x, y = cd.random.uniform({ m, m }, dt), cd.random.uniform({ m, m }, dt)
    local got = cd.matmul(x, y):astype("float64"):sum()
    local expect = (x:astype("float64"):sum(1) * y:astype("float64"):sum(2)):sum()
    if math.abs(got - expect) > (dt == "float16" and 1e-2 or 1e-4) * expect then
      fail(("cd.matmul %s gave a sum of %.17g, expected %.17g"):format(key, got, expect))
    end
    out(key, timed(function() return cd.matmul(x, y) end), "us")
    x, y = nil, nil
    collectgarbage()
  end
  a, b, o = nil, nil, nil
  collectgarbage()

  -- the first a + b of a new process, whose disk cache holds the kernel (this process compiled it)
  local child = ([==[
local cd = require "cudadev"
local dev = cd.device("cuda:0")
cd.set_device(dev)
local x, y = cd.ones(1024, "float32"), cd.ones(1024, "float32")
dev:synchronize()
local now = load(%q)(cd)
local t0 = now()
local z = x + y
local t1 = now()
assert(z[1024] == 2)
io.write(("%%.3f %%d\n"):format((t1 - t0) * 1e6, cd.kernel_cache_stats().disk_hits))
]==]):format(CLOCK)
  time_children("ew_first_warm_disk", "first-generated-kernel", child)
end

-------------------------------------------------------------------------------------------------- peer copy
-- 256 MiB from cuda:0 to cuda:1 with cd.copy on cuda:1's default stream, timed by events there, before and
-- after peer access is enabled both ways: c_driver.c's peer_copies, in the same order.
if cd.device_count() >= 2 then
  local d0, d1 = cd.device("cuda:0"), cd.device("cuda:1")
  local src = cd.full(NF, 1.25, "float32", { device = d0 })
  local dst = cd.empty(NF, "float32", { device = d1 })
  local e0, e1 = cd.event(d1), cd.event(d1)
  local function rate()
    local t = {}
    for r = 0, COPY_REPS do
      e0:record()
      cd.copy(dst, src)
      e1:record()
      e1:synchronize()
      if r > 0 then t[r] = BYTES / (e0:elapsed(e1) * 1e-3) / 1e9 end
    end
    return median(t)
  end
  out("peer_noaccess", rate(), "GB/s", "%.2f")
  if cd.is_peer_access_supported(d0, d1) and cd.is_peer_access_supported(d1, d0) then
    cd.set_peer_access_enabled(d0, d1, true)
    cd.set_peer_access_enabled(d1, d0, true)
    if cd.is_mempool_access_supported(d0, d1) then   -- cudadev's arrays come from the pools: their access too
      cd.set_mempool_access_enabled(d0, d1, true)
      cd.set_mempool_access_enabled(d1, d0, true)
    end
    out("peer_access", rate(), "GB/s", "%.2f")
  end
  assert(dst[NF] == 1.25, "the peer copy copied wrong values")
end
