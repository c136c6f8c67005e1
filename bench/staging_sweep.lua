-- bench/staging_sweep.lua: the numbers behind NOTE [staged copies] (src/staging.c), on this machine's first GPU.
-- Not part of bench/run; run it by hand after `make build`:
--   LUA_CPATH='build/?.so;;' lua5.4 bench/staging_sweep.lua
-- 1. H2D and D2H of a 256 MiB pageable host array, by piece size and host-copy threads (cd._hooks: a piece size
--    stages every copy in pieces of that size; 0 is the default sizing).
-- 2. Copies of 256 KiB to 64 MiB with the default sizing (direct under 1 MiB), against the same copies forced
--    through the staging buffers in four pieces: where staging starts to pay is the threshold, STAGE_MIN.
-- GB/s by the wall clock, the median of 5 after a warm-up; the copy is complete when cd.copy returns.
local cd = require "cudadev"
assert(cd.is_available())   -- else the reason
local has_system, system = pcall(require, "system")
assert(has_system and system.monotime, "needs luasystem (system.monotime)")
local now = system.monotime
local dev = cd.device("cuda:0")
cd.set_device(dev)
local MiB = 1 << 20

local function median(t)
  table.sort(t)
  return t[(#t + 1) // 2]
end

-- GB/s of cd.copy(dst, src) for n bytes
local function rate(dst, src, n)
  local t = {}
  for r = 0, 5 do
    local t0 = now()
    cd.copy(dst, src)
    dev:synchronize()
    if r > 0 then t[r] = n / (now() - t0) / 1e9 end
  end
  return median(t)
end

local saved = cd._hooks()
local n = 256 * MiB
local host = cd.full(n // 4, 1.25, "float32", { device = "cpu" })
local gpu = cd.empty(n // 4, "float32")
print("## 256 MiB, GB/s: H2D / D2H")
print("| piece \\ threads | 1 | 2 | 4 | 8 |")
print("|---|---|---|---|---|")
for _, piece in ipairs { 0, 1 * MiB, 2 * MiB, 4 * MiB, 8 * MiB, 16 * MiB } do
  local row = { piece == 0 and "default" or ("%d MiB"):format(piece // MiB) }
  for _, threads in ipairs { 1, 2, 4, 8 } do
    cd._hooks({ staging_chunk = piece, staging_threads = threads })
    row[#row + 1] = ("%.1f / %.1f"):format(rate(gpu, host, n), rate(host, gpu, n))
  end
  print("| " .. table.concat(row, " | ") .. " |")
end
host:free()
gpu:free()

print("\n## by size, GB/s: H2D / D2H (default threads)")
print("| bytes | default sizing | forced, 4 pieces |")
print("|---|---|---|")
for _, size in ipairs { 256 << 10, 512 << 10, MiB, 2 * MiB, 4 * MiB, 16 * MiB, 64 * MiB } do
  local h, g = cd.full(size // 4, 1.25, "float32", { device = "cpu" }), cd.empty(size // 4, "float32")
  cd._hooks({ staging_chunk = 0, staging_threads = 0 })
  local direct = ("%.1f / %.1f"):format(rate(g, h, size), rate(h, g, size))
  cd._hooks({ staging_chunk = size // 4 })
  local forced = ("%.1f / %.1f"):format(rate(g, h, size), rate(h, g, size))
  print(("| %d KiB | %s | %s |"):format(size >> 10, direct, forced))
  h:free()
  g:free()
end
cd._hooks(saved)
