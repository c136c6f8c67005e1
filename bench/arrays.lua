-- bench/arrays.lua PEERS_FILE: cudadev's side of bench/arrays_run (issue 17's and 28's array rows, without the rest of
-- bench/run): a + b and a:sum() of 2^26 float32 on cuda:0, timed by events around the call (allocation of the
-- result included), median of 30 after 3 warm-ups, results checked; then the table against the peers' lines
-- (bench/arrays_peers.py, run before in the same call) with the ratios of the goals.
local cd = require "cudadev"
local dev = cd.get_device()
local n = math.tointeger(tonumber(os.getenv("ARRAYS_N") or "")) or 1 << 26   -- ARRAYS_N: a quick try elsewhere
local peers = {}
for line in io.lines(arg[1]) do
  local k, v = line:match("^RESULT (%S+) (%S+)")
  if k then peers[k] = tonumber(v) or v end
end

local e0, e1 = cd.event(), cd.event()
local function timed(fn)
  local t = {}
  for r = -2, 30 do
    e0:record()
    fn()
    e1:record()
    e1:synchronize()
    if r > 0 then t[#t + 1] = e0:elapsed(e1) * 1e3 end
  end
  table.sort(t)
  return t[#t // 2 + 1]
end

-- the data of bench/lua_bench.lua: i % 1024 and (i * 7) % 1000 / 8, exact in float32, with a known sum
local a = (cd.arange(n, "int32") % 1024):astype("float32")
local b = ((cd.arange(n, "int32") * 7) % 1000):astype("float32") / 8
local c = a + b
for _, i in ipairs { 1, 2, 1025, n // 2 + 3, n } do
  assert(c[i] == a[i] + b[i] and a[i] == (i - 1) % 1024, "a + b is wrong at element " .. i)
end
local expect = 523776.0 * (n // 1024)
assert(math.abs(a:sum() - expect) <= 1e-5 * expect, "a:sum() is wrong")
local o = cd.empty({}, "float32")
local add = timed(function() return a + b end)
local add_out = timed(function() return cd.add(a, b, { out = c }) end)
local sum = timed(function() return a:sum({ out = o }) end)
assert(math.abs(o[1] - expect) <= 1e-5 * expect and c[n] == a[n] + b[n], "a:sum({out=}) or cd.add is wrong")
local copy = timed(function() cd.copy(c, a) end)
assert(c[n] == a[n])

local function cell(v) return v and ("%.1f"):format(v) or "—" end
local function verdict(ok) return ok and "**PASS**" or "**MISS**" end
print(("## cudadev arrays: %s, %s, n = %d"):format(dev.name, os.date("!%Y-%m-%d %H:%M UTC"), n))
print()
print(("float32 arrays on %s, µs by events (median of 30), allocation of results included. PyTorch %s, CuPy %s."):format(dev.alias, 
  peers.torch_version or "—", peers.cupy_version or "—"))
print()
print("| measure | cudadev | CuPy | PyTorch | goal |")
print("|---|---|---|---|---|")
local cp_add, cp_sum = peers.cupy_add, peers.cupy_sum
print(("| a + b, µs | %s | %s | %s | ≥ 0.90× CuPy's speed (%s) %s |"):format(cell(add), cell(cp_add), cell(peers.torch_add),
  cp_add and ("%.2f×"):format(cp_add / add) or "—", cp_add and verdict(cp_add / add >= 0.9) or ""))
local traffic, ctraffic = 12 * n / add / 1e3, peers.torch_copy and 8 * n / peers.torch_copy / 1e3
print(("| a + b memory traffic, GB/s | %.0f | — | C copy (cudaMemcpyAsync, through PyTorch) %s | ≥ 85%% of the C copy's (%s) %s |"):format(
  traffic, ctraffic and ("%.0f"):format(ctraffic) or "—", ctraffic and ("%.0f%%"):format(100 * traffic / ctraffic) or "—",
  ctraffic and verdict(traffic >= 0.85 * ctraffic) or ""))
print(("| cd.add(a, b, {out=}), µs | %s | — | — | info |"):format(cell(add_out)))
print(("| a:sum(), µs | %s | %s | %s | ≥ 0.90× CuPy's speed (%s) %s |"):format(cell(sum), cell(cp_sum), cell(peers.torch_sum),
  cp_sum and ("%.2f×"):format(cp_sum / sum) or "—", cp_sum and verdict(cp_sum / sum >= 0.9) or ""))
print(("| cd.copy 256 MiB device to device, µs | %s | — | %s (copy_) | info |"):format(cell(copy), cell(peers.torch_copy)))

-- issue 28's rows: a:std() of the same 2^26 float32 (one pass: NOTE [one-pass variance]) and cd.matmul of 256
-- stacked 256 x 256 float32 matrices (one cublasGemmStridedBatchedEx: NOTE [batched matmul]), against CuPy's
-- ca.std() and cp.matmul and PyTorch's a.std() and torch.matmul (each answer stays on the GPU, as o here)
do
  local sd_expect = math.sqrt((1024 * 1024 - 1) / 12)   -- a's values are 0..1023, each n/1024 times
  local std = timed(function() return a:std({ out = o }) end)
  assert(math.abs(o[1] - sd_expect) <= 1e-4 * sd_expect, "a:std() is wrong: " .. o[1])
  cd.random.seed(28)
  local x = cd.random.uniform({ 256, 256, 256 }, "float32")
  local y = cd.random.uniform({ 256, 256, 256 }, "float32")
  local bmm = timed(function() return cd.matmul(x, y) end)
  local z, z2 = cd.matmul(x, y), cd.matmul(x[256], y[256])
  assert(cd.abs(z[256] - z2):max() <= 1e-3 and cd.abs(z[1] - cd.matmul(x[1], y[1])):max() <= 1e-3, "batched matmul is wrong")
  local cp_std, best = peers.cupy_std, peers.cupy_bmm and peers.torch_bmm and math.min(peers.cupy_bmm, peers.torch_bmm)
    or peers.cupy_bmm or peers.torch_bmm
  print(("| a:std(), µs | %s | %s | %s | ≥ 0.90× CuPy's speed (%s) %s |"):format(cell(std), cell(cp_std), cell(peers.torch_std),
    cp_std and ("%.2f×"):format(cp_std / std) or "—", cp_std and verdict(cp_std / std >= 0.9) or ""))
  print(("| cd.matmul of {256, 256, 256} float32 stacks, µs | %s | %s | %s | ≥ 0.95× the best peer's speed (%s) %s |"):format(
    cell(bmm), cell(peers.cupy_bmm), cell(peers.torch_bmm), best and ("%.2f×"):format(best / bmm) or "—",
    best and verdict(best / bmm >= 0.95) or ""))
end
-- issue 28's rows: sort and argsort of 2^24 uniform float32 (NOTE [radix sort]), cumsum of 2^26 (NOTE [scan
-- passes]), a[mask] selecting about half of 2^26, concatenate of two 2^25 (its traffic against the C copy's)
local function ratio_row(what, mine, theirs, goal)
  print(("| %s, µs | %s | %s | — | ≥ %.2f× CuPy's speed (%s) %s |"):format(what, cell(mine), cell(theirs), goal,
    theirs and ("%.2f×"):format(theirs / mine) or "—", theirs and verdict(theirs / mine >= goal) or ""))
end
local ns = math.max(n >> 2, 2)
cd.random.seed(1)
local u = cd.random.uniform(ns, "float32")
local su = cd.sort(u)
assert(su:slice(2, ns):ge(su:slice(1, ns - 1)):all(), "cd.sort is wrong")
local pu = cd.argsort(u)
assert(cd.take(u, pu:slice(1, 5)):eq(su:slice(1, 5)):all(), "cd.argsort is wrong")
ratio_row(("cd.sort of %d float32"):format(ns), timed(function() return cd.sort(u) end), peers.cupy_sort, 0.9)
ratio_row(("cd.argsort of %d float32"):format(ns), timed(function() return cd.argsort(u) end), peers.cupy_argsort, 0.9)
local big = cd.random.uniform(n, "float32")
local cs = cd.cumsum(a)
assert(math.abs(cs[n] - expect) <= 1e-2 * expect, "cd.cumsum is wrong")   -- float32 sums of 2^26
ratio_row("cd.cumsum", timed(function() return cd.cumsum(big) end), peers.cupy_cumsum, 0.9)
local mask = big:gt(0.5)
assert(big[mask].size == cd.count_nonzero(mask), "a[mask] is wrong")
ratio_row("a[mask] (about half)", timed(function() return big[mask] end), peers.cupy_mask, 0.9)
local h1, h2 = big:slice(1, n // 2), big:slice(n // 2 + 1, n)
local cat = timed(function() return cd.concatenate({ h1, h2 }) end)
local ctraffic2 = peers.torch_copy and 8 * n / peers.torch_copy / 1e3
local ctr = 8 * n / cat / 1e3
print(("| cd.concatenate of two halves, µs (GB/s) | %s (%.0f) | %s | C copy %s GB/s | ≥ 85%% of the C copy's traffic (%s) %s |"):format(
  cell(cat), ctr, cell(peers.cupy_concat), ctraffic2 and ("%.0f"):format(ctraffic2) or "—",
  ctraffic2 and ("%.0f%%"):format(100 * ctr / ctraffic2) or "—", ctraffic2 and verdict(ctr >= 0.85 * ctraffic2) or ""))

-- issue 31's rows: x * y + z and ((x - y) ^ 2):sum() of 2^26 float32 (a, b and c above), fused by cd.fuse, against
-- the unfused expressions and cupy.fuse / torch.compile; the first fused call of a new process with a warm disk
-- cache (the trace, the kernel from the disk cache, the launch and its end), in a child process
do
  local fx = cd.fuse(function(p, q, r) return p * q + r end)
  local fs = cd.fuse(function(p, q) return ((p - q) ^ 2):sum() end)
  local got, want = fx(a, b, c), a * b + c
  assert(cd.array_equal(got, want), "fused x * y + z is wrong")
  local sq = fs(a, b)
  assert(math.abs(sq - ((a - b) ^ 2):sum()) <= 1e-5 * sq, "fused ((x - y) ^ 2):sum() is wrong")
  local unf = timed(function() return a * b + c end)
  local fus = timed(function() return fx(a, b, c) end)
  local unf2 = timed(function() return ((a - b) ^ 2):sum() end)
  local fus2 = timed(function() return fs(a, b) end)
  local function fuse_row(what, f, u, cpf, tc, goal_u)
    print(("| %s, µs | %s (unfused %s) | cupy.fuse %s | torch.compile %s | ≥ %.1f× unfused (%.2f×) %s, ≥ 1.0× cupy.fuse (%s) %s |"):format(
      what, cell(f), cell(u), cell(cpf), cell(tc), goal_u, u / f, verdict(u / f >= goal_u),
      cpf and ("%.2f×"):format(cpf / f) or "—", cpf and verdict(cpf / f >= 1.0) or ""))
  end
  fuse_row("cd.fuse x * y + z", fus, unf, peers.cupy_fuse_axpy, peers.torch_compile_axpy, 1.4)
  fuse_row("cd.fuse ((x - y) ^ 2):sum()", fus2, unf2, peers.cupy_fuse_sq, peers.torch_compile_sq, 2.0)
  local script = [[
local cd = require "cudadev"
local x = cd.full(1024, 2, "float32")
local f = cd.fuse(function(p, q, r) return p * q + r end)
cd.synchronize()
local t0 = cd.now()
local r = f(x, x, x)
cd.synchronize()
io.write(("%.3f"):format((cd.now() - t0) * 1e3))
]]
  local path = os.tmpname()
  local fh = io.open(path, "w")
  fh:write(script)
  fh:close()
  local cache = os.tmpname()
  os.remove(cache)
  local root = io.popen("pwd"):read("l")
  local cmd = ("CUDADEV_CACHE_DIR=%s LUA_CPATH_5_4='%s/build/?.so;;' LUA_CPATH='%s/build/?.so;;' lua5.4 %s"):format(
    cache, root, root, path)
  local function run() local p = io.popen(cmd) local v = p:read("a") p:close() return tonumber(v) end
  run()                                   -- cold: fills the disk cache
  local warm = math.huge
  for _ = 1, 3 do warm = math.min(warm, run() or math.huge) end
  os.remove(path)
  os.execute("rm -rf " .. cache)
  print(("| cd.fuse first call of a new process, warm disk cache, ms | %.2f | — | — | ≤ 2 ms %s |"):format(warm,
    verdict(warm <= 2)))
end

-- a row of issue 32's: cudadev's time against the faster of CuPy's and PyTorch's, goal ≥ 0.95× its speed
local function best_row(what, t, cp, tt)
  local best = cp and tt and math.min(cp, tt) or cp or tt
  print(("| %s, µs | %s | %s | %s | ≥ 0.95× the best peer's speed (%s) %s |"):format(what, cell(t), cell(cp),
    cell(tt), best and ("%.2f×"):format(best / t) or "—", best and verdict(best / t >= 0.95) or ""))
end

-- issue 32's rows: cd.linalg on cuSOLVER (NOTE [linalg layouts] in lua/cudadev/linalg.lua) against CuPy's and
-- PyTorch's linalg (bench/arrays_peers.py, the same sizes and dtypes, the same kind of well-conditioned data):
-- solve of one 4096 x 4096 float32 system, of a batch of 1024 32 x 32 float32 systems (NOTE [fused small solve]),
-- cholesky of a 4096 x 4096 float64 positive definite matrix (and the transposed copy it makes, a.T:copy() of a
-- 4096 x 4096 float64, alone), svd of a 1024 x 1024 float32 matrix; each timed with its info read back (NumPy's
-- errors need it; CuPy reads it too), results checked
do
  local L = cd.linalg
  cd.random.seed(32)
  local N = 4096
  local A = cd.random.uniform({ N, N }, "float32") + cd.eye(N, N, 0, "float32") * N
  local bv = cd.random.uniform({ N }, "float32")
  local x = L.solve(A, bv)
  assert(cd.abs(cd.matmul(A, x) - bv):max() <= 1e-3, "solve 4096 is wrong")
  local t_solve = timed(function() return L.solve(A, bv) end)
  local Ab = cd.random.uniform({ 1024, 32, 32 }, "float32") + cd.eye(32, 32, 0, "float32") * 32
  local bb = cd.random.uniform({ 1024, 32, 1 }, "float32")
  local xb = L.solve(Ab, bb)
  assert(cd.abs(cd.matmul(Ab, xb) - bb):max() <= 1e-4, "batched solve is wrong")
  local t_bsolve = timed(function() return L.solve(Ab, bb) end)
  local R = cd.random.uniform({ N, N }, "float64")
  local S = cd.matmul(R, R.T) + cd.eye(N, N, 0, "float64") * N
  -- the copy of a transposed matrix that cholesky makes (NOTE [tiled transpose] in views.lua), alone
  local RT = R.T:copy()
  assert(RT.is_contiguous and cd.array_equal(RT, R.T), "a.T:copy() is wrong")
  local t_tcopy = timed(function() return R.T:copy() end)
  local F = L.cholesky(S)
  assert(cd.abs(cd.matmul(F, F.T) - S):max() <= 1e-8 * N * N, "cholesky is wrong")
  local t_chol = timed(function() return L.cholesky(S) end)
  local M = cd.random.uniform({ 1024, 1024 }, "float32")
  local u, s, vh = L.svd(M)
  assert(cd.abs(cd.matmul(u * s:reshape({ 1, 1024 }), vh) - M):max() <= 1e-2, "svd is wrong")
  local t_svd = timed(function() return L.svd(M) end)
  best_row("cd.linalg.solve 4096² float32, b {4096}", t_solve, peers.cupy_solve, peers.torch_solve)
  best_row("cd.linalg.solve {1024, 32, 32} float32, b {1024, 32, 1}", t_bsolve, peers.cupy_bsolve, peers.torch_bsolve)
  best_row("a.T:copy() 4096² float64 (CuPy's ascontiguousarray(a.T), PyTorch's a.T.contiguous())", t_tcopy,
    peers.cupy_tcopy, peers.torch_tcopy)
  best_row("cd.linalg.cholesky 4096² float64", t_chol, peers.cupy_chol, peers.torch_chol)
  best_row("cd.linalg.svd 1024² float32 (U, S, Vh)", t_svd, peers.cupy_svd, peers.torch_svd)
end

-- issue 32's FFT rows: cd.fft on cuFFT (src/fft.c, plans cached) against CuPy's and PyTorch's FFTs
-- (bench/arrays_peers.py, the same sizes and dtypes): fft of 2^24 complex64, rfft of 2^24 float32, fft2 of
-- 4096² complex64, each result's allocation included; each checked by its inverse or its first element
do
  local F = cd.fft
  cd.random.seed(33)
  local NF = 1 << 24
  local xr = cd.random.uniform({ NF }, "float32")
  local xc = xr:astype("complex64")
  local back = F.ifft(F.fft(xc))
  assert(cd.abs(back - xc):max() <= 1e-4, "fft/ifft of 2^24 is wrong")
  local t_fft = timed(function() return F.fft(xc) end)
  local y = F.rfft(xr)
  local s0 = xr:astype("float64"):sum()
  assert(y.shape[1] == NF // 2 + 1 and math.abs(y[1][1] - s0) <= 1e-4 * s0, "rfft of 2^24 is wrong")
  local t_rfft = timed(function() return F.rfft(xr) end)
  local X = cd.random.uniform({ 4096, 4096 }, "float32"):astype("complex64")
  assert(cd.abs(F.ifft2(F.fft2(X)) - X):max() <= 1e-4, "fft2 of 4096² is wrong")
  local t_fft2 = timed(function() return F.fft2(X) end)
  best_row("cd.fft.fft 2^24 complex64", t_fft, peers.cupy_fft, peers.torch_fft)
  best_row("cd.fft.rfft 2^24 float32", t_rfft, peers.cupy_rfft, peers.torch_rfft)
  best_row("cd.fft.fft2 4096² complex64", t_fft2, peers.cupy_fft2, peers.torch_fft2)
end
