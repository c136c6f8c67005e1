-- bench/arrays_sweep.lua PEERS_FILE: issue 28's sweep, cudadev's side (bench/arrays_run runs it after
-- bench/arrays_sweep_peers.py, in the same call). For 2^10 to 2^26 float32: `c = a + b` in a loop, each result left
-- to the collector, and cd.add(a, b, {out = c}), timed on the host per operation (allocation included, the device
-- synchronised once at the end of each run: the time a loop of them takes), best of 3 runs; then the device memory
-- reserved after the a + b loop against the live arrays' bytes (a, b and c). One table row per size, with CuPy's and
-- PyTorch's times from the peers' file. Goals: at most CuPy's time, reserved within twice the live bytes (or within
-- 2 MiB, the driver pool's granule and PyTorch's smallest segment, where twice the live bytes is less).
-- SWEEP_MAX=20 stops at 2^20 (a quick try, or the cpu device: CUDADEV_DEVICE=cpu).
local cd = require "cudadev"
local dev = cd.get_device()
local peers = {}
for line in io.lines(arg[1]) do
  local k, v = line:match("^RESULT (%S+) (%S+)")
  if k then peers[k] = tonumber(v) or v end
end
local top = math.tointeger(tonumber(os.getenv("SWEEP_MAX") or "")) or 26

local function per_op(fn, iters)
  local best = math.huge
  for _ = 1, 3 do
    dev:synchronize()
    local t0 = cd.now()
    for _ = 1, iters do fn() end
    dev:synchronize()
    best = math.min(best, (cd.now() - t0) / iters * 1e6)
  end
  return best
end

local function cell(v, f) return v and (f or "%.1f"):format(v) or "—" end
print(("## c = a + b and cd.add(a, b, {out = c}): %s, %s"):format(dev.name, os.date("!%Y-%m-%d %H:%M UTC")))
print()
print(("float32 on %s, host µs per operation (loop of N, synchronised at the end, best of 3). PyTorch %s, CuPy %s."):format(
  dev.alias, peers.torch_version or "—", peers.cupy_version or "—"))
print()
print("| n | a + b | out= | CuPy a + b | CuPy out= | PyTorch a + b | PyTorch out= | goal: each form ≤ CuPy's | reserved / live | PyTorch reserved / live |")
print("|---|---|---|---|---|---|---|---|---|---|")
for l = 10, top, 2 do
  local n = 1 << l
  local iters = math.max(20, math.min(2000, (1 << 30) // (12 * n)))
  cd.empty_cache(dev)
  local a, b = cd.full(n, 1.5, "float32"), cd.full(n, 2.25, "float32")
  local c = a + b
  local add = per_op(function() c = a + b end, iters)
  assert(c[n] == 3.75 and c[1] == 3.75, "a + b is wrong")
  local reserved = cd.memory_reserved(dev) / (3 * 4 * n)
  local out = { out = c }
  local add_out = per_op(function() cd.add(a, b, out) end, iters)
  assert(c[n] == 3.75, "cd.add(out=) is wrong")
  local cp, cpo = peers["cupy_add_" .. l], peers["cupy_out_" .. l]
  -- each form against CuPy's same form; the ratio is the worse of the two (CuPy's time over ours)
  local ratio = cp and cpo and math.min(cp / add, cpo / add_out)
  local goal = ratio and ((ratio >= 1 and "**PASS**" or "**MISS**") .. (" %.2f×"):format(ratio)) or "—"
  print(("| 2^%d | %s | %s | %s | %s | %s | %s | %s | %s %s | %s |"):format(l, cell(add), cell(add_out), cell(cp), cell(cpo),
    cell(peers["torch_add_" .. l]), cell(peers["torch_out_" .. l]), goal, cell(reserved, "%.2f"),
    (reserved <= 2 or reserved * 12 * n <= 2 << 20) and "**PASS**" or "**MISS**", cell(peers["torch_reserved_" .. l], "%.2f")))
  a, b, c, out = nil, nil, nil, nil
end
