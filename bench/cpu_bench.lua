-- bench/cpu_bench.lua: the cudadev side of bench/cpu. The CUDA C kernels whose algorithms bench/cpu_omp.c writes
-- with OpenMP, run on cudadev's cpu device, timed the same way (median of REPS runs after one warm-up, the
-- launch synchronous on the cpu device, a wall clock around it), with the same checksums.
--
-- lua5.4 bench/cpu_bench.lua kernels            `name median_ms checksum` lines, `info key value` lines
-- lua5.4 bench/cpu_bench.lua launch HEAP_MIB    `launch_us <HEAP_MIB> median_us` after growing the Lua heap
-- The launch mode (contained or in-process) is the environment's: CUDADEV_CPU_FORK=0 runs in-process.
local cd = require "cudadev"
local system = require "system"
local now = system.monotime

local REPS = 7
local mode, arg2 = arg[1] or "kernels", tonumber(arg[2] or "0")
local dev = cd.device("cpu")
cd.set_device(dev)

local function median(t)
  table.sort(t)
  local n = #t
  return n % 2 == 1 and t[(n + 1) // 2] or (t[n // 2] + t[n // 2 + 1]) / 2
end

-- body REPS times, each after setup (untimed); prints the median and the checksum read after the last
local function time(name, setup, body, sum)
  local t = {}
  for r = 1, REPS do
    if setup then setup() end
    local t0 = now()
    body()
    t[r] = (now() - t0) * 1e3
  end
  print(("%s %.4f %.6g"):format(name, median(t), sum()))
  io.stdout:flush()
end

local function PB_SMALL(h) return 256 - 2 * h end   -- the columns a pyramid block finishes

local function path_of(k)
  local ok, v = pcall(function() return k.cpu_path end)   -- older builds have no such field
  return ok and v or "?"
end

if mode == "launch" then
  local m = cd.compile('extern "C" __global__ void empty() {}\n')
  local k = m.empty
  local heap = {}
  for i = 1, arg2 do   -- arg2 MiB of Lua heap, in 1 MiB strings that differ
    heap[i] = string.rep(string.char(65 + i % 26), (1 << 20) - 32) .. i
  end
  local cfg = {grid = 1, block = 1}
  for _ = 1, 20 do k(cfg) end
  local per = {}
  for r = 1, REPS do
    local n = 200
    local t0 = now()
    for _ = 1, n do k(cfg) end
    per[r] = (now() - t0) / n * 1e6
  end
  print(("launch_us %d %.2f"):format(arg2, median(per)))
  print("info heap_kib " .. math.floor(collectgarbage("count")))
  heap = nil
  return
end

local SRC = [[
// the inputs, as bench/cpu_omp.c makes them
extern "C" __global__ void init(int which, int n, float *f, float *g, int *r)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  if (which == 0) { f[i] = (float)(i % 1000) / 1000.0f; g[i] = (float)(i % 7); }
  if (which == 1) { f[i] = (float)(i % 17) / 16.0f; g[i] = (float)(i % 13) / 12.0f; }
  if (which == 2) f[i] = (float)((i * 7) % 101);
  if (which == 3) r[i] = (int)((i * 2654435761u) >> 28) % 21 - 10;
}

// issue 29: kernels written as public benchmarks write them, with C++ linkage (no extern "C")
// Rodinia's pathfinder, its pyramid: a block of 256 threads advances `height` rows of the minimum-path sum over its
// window of columns; each row's second barrier sits inside an if in the loop (the last row has none)
#define PB 256
__global__ void pyramid(const int *wall, const int *src, int *dst, int cols, int row0, int height)
{
  __shared__ int prev[PB], result[PB];
  int tx = threadIdx.x;
  int small = PB - 2 * height;
  int blkX = small * blockIdx.x - height;
  int xidx = blkX + tx;
  int validL = blkX < 0 ? -blkX : 0;
  int validR = blkX + PB > cols ? cols - 1 - blkX : PB - 1;
  if (xidx >= 0 && xidx < cols) prev[tx] = src[xidx];
  __syncthreads();
  bool computed = false;
  for (int i = 0; i < height; i++) {
    computed = false;
    if (tx >= i + 1 && tx <= PB - i - 2 && tx >= validL && tx <= validR) {
      computed = true;
      int w = tx - 1 < validL ? validL : tx - 1, e = tx + 1 > validR ? validR : tx + 1;
      int m = min(prev[w], min(prev[tx], prev[e]));
      result[tx] = m + wall[(size_t)cols * (row0 + i) + xidx];
    }
    __syncthreads();
    if (i < height - 1) {
      if (computed) prev[tx] = result[tx];
      __syncthreads();
    }
  }
  if (computed) dst[xidx] = result[tx];
}

// Rodinia's lud, one step k of a blocked LU decomposition without pivoting (16x16 tiles) in three kernels: the
// diagonal tile, the perimeter (its row's tiles and its column's), the trailing tiles
#define LB 16
__global__ void lud_init(float *m, int n)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x, r = i / n, c = i % n;
  if (i < n * n) m[i] = r == c ? (float)n : (float)((r * 7 + c * 3) % 10) / 10.0f;
}
__global__ void lud_diagonal(float *m, int n, int k)
{
  __shared__ float s[LB][LB];
  int tx = threadIdx.x, off = k * LB;
  for (int i = 0; i < LB; i++) s[i][tx] = m[(off + i) * n + off + tx];
  __syncthreads();
  for (int i = 0; i < LB - 1; i++) {
    if (tx > i) {
      for (int j = 0; j < i; j++) s[tx][i] -= s[tx][j] * s[j][i];
      s[tx][i] /= s[i][i];
    }
    __syncthreads();
    if (tx > i)
      for (int j = 0; j < i + 1; j++) s[i + 1][tx] -= s[i + 1][j] * s[j][tx];
    __syncthreads();
  }
  for (int i = 1; i < LB; i++) m[(off + i) * n + off + tx] = s[i][tx];
}
__global__ void lud_perimeter(float *m, int n, int k)
{
  __shared__ float dia[LB][LB], row[LB][LB], col[LB][LB];
  int tx = threadIdx.x, off = k * LB, j = (k + 1 + blockIdx.x) * LB;
  if (tx < LB) {
    for (int i = 0; i < LB; i++) dia[i][tx] = m[(off + i) * n + off + tx];
    for (int i = 0; i < LB; i++) row[i][tx] = m[(off + i) * n + j + tx];
  } else {
    for (int i = 0; i < LB; i++) col[i][tx - LB] = m[(j + i) * n + off + tx - LB];
  }
  __syncthreads();
  if (tx < LB) { // the row's tile: L11 * U12 = A12, column tx
    for (int i = 1; i < LB; i++)
      for (int q = 0; q < i; q++) row[i][tx] -= dia[i][q] * row[q][tx];
  } else { // the column's tile: L21 * U11 = A21, row tx - LB
    int t = tx - LB;
    for (int i = 0; i < LB; i++) {
      for (int q = 0; q < i; q++) col[t][i] -= col[t][q] * dia[q][i];
      col[t][i] /= dia[i][i];
    }
  }
  __syncthreads();
  if (tx < LB)
    for (int i = 1; i < LB; i++) m[(off + i) * n + j + tx] = row[i][tx];
  else
    for (int i = 0; i < LB; i++) m[(j + i) * n + off + tx - LB] = col[i][tx - LB];
}
__global__ void lud_internal(float *m, int n, int k)
{
  __shared__ float prow[LB][LB], pcol[LB][LB];
  int tx = threadIdx.x, ty = threadIdx.y, off = k * LB;
  int gi = (k + 1 + blockIdx.y) * LB + ty, gj = (k + 1 + blockIdx.x) * LB + tx;
  prow[ty][tx] = m[(off + ty) * n + gj];
  pcol[ty][tx] = m[gi * n + off + tx];
  __syncthreads();
  float sum = 0;
  for (int q = 0; q < LB; q++) sum += pcol[ty][q] * prow[q][tx];
  m[gi * n + gj] -= sum;
}

// NVIDIA's reduction sample, kernel 0: interleaved addressing, a divergent if in the barrier loop
__global__ void reduce_diverge(const float *x, float *part)
{
  __shared__ float sdata[256];
  unsigned int tid = threadIdx.x;
  unsigned int i = blockIdx.x * 1024 + threadIdx.x;
  sdata[tid] = x[i] + x[i + 256] + x[i + 512] + x[i + 768];
  __syncthreads();
  for (unsigned int s = 1; s < blockDim.x; s *= 2) {
    if (tid % (2 * s) == 0) sdata[tid] += sdata[tid + s];
    __syncthreads();
  }
  if (tid == 0) part[blockIdx.x] = sdata[0];
}

extern "C" __global__ void saxpy(int n, float a, const float *x, float *y)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

// the README's saxpy as a user copies it: a size_t index, launched with {dim = n} (issue 29)
extern "C" __global__ void saxpy_readme(float a, const float *x, float *y, size_t n)
{
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

extern "C" __global__ void reduce_shared(const float *x, float *part)
{
  __shared__ float s[256];
  unsigned t = threadIdx.x;
  const float *p = x + (size_t)blockIdx.x * 1024;
  s[t] = p[t] + p[t + 256] + p[t + 512] + p[t + 768];
  __syncthreads();
  for (unsigned h = 128; h > 0; h >>= 1) {
    if (t < h) s[t] += s[t + h];
    __syncthreads();
  }
  if (t == 0) part[blockIdx.x] = s[0];
}

extern "C" __global__ void reduce_warp(const float *x, float *part)
{
  __shared__ float ws[8];
  unsigned t = threadIdx.x, lane = t & 31, w = t >> 5;
  const float *p = x + (size_t)blockIdx.x * 1024;
  float v = p[t] + p[t + 256] + p[t + 512] + p[t + 768];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  if (lane == 0) ws[w] = v;
  __syncthreads();
  if (w == 0) {
    v = lane < 8 ? ws[lane] : 0.0f;
    for (int o = 4; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    if (lane == 0) part[blockIdx.x] = v;
  }
}

extern "C" __global__ void matmul(int n, const float *A, const float *B, float *C)
{
  __shared__ float As[16][16], Bs[16][16];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * 16 + ty, col = blockIdx.x * 16 + tx;
  float c = 0.0f;
  for (int kt = 0; kt < n / 16; kt++) {
    As[ty][tx] = A[(size_t)row * n + kt * 16 + tx];
    Bs[ty][tx] = B[(size_t)(kt * 16 + ty) * n + col];
    __syncthreads();
    for (int k = 0; k < 16; k++) c += As[ty][k] * Bs[k][tx];
    __syncthreads();
  }
  C[(size_t)row * n + col] = c;
}

extern "C" __global__ void stencil(int n, int iters, const float *in, float *out)
{
  __shared__ float t[2][16][16];
  int x = threadIdx.x, y = threadIdx.y;
  size_t g = (size_t)(blockIdx.y * 16 + y) * n + blockIdx.x * 16 + x;
  t[0][y][x] = in[g];
  __syncthreads();
  int cur = 0;
  for (int it = 0; it < iters; it++) {
    float v = t[cur][y][x];
    if (x > 0 && x < 15 && y > 0 && y < 15)
      v = v + 0.2f * (t[cur][y - 1][x] + t[cur][y + 1][x] + t[cur][y][x - 1] + t[cur][y][x + 1] - 4.0f * v);
    t[cur ^ 1][y][x] = v;
    __syncthreads();
    cur ^= 1;
  }
  out[g] = t[cur][y][x];
}

// one launch per anti-diagonal d of 16x16 tiles; block b takes tile (lo + b, d - lo - b); 16 threads a tile,
// one column each, sweeping the tile's anti-diagonals with a barrier between them
extern "C" __global__ void wavefront(int n, int d, int lo, const int *ref, int *score, int penalty)
{
  __shared__ int s[17][17];
  int tx = threadIdx.x, ti = lo + blockIdx.x, tj = d - ti, w = n + 1;
  size_t r0 = (size_t)ti * 16, c0 = (size_t)tj * 16;
  s[0][tx + 1] = score[r0 * w + c0 + tx + 1];
  s[tx + 1][0] = score[(r0 + tx + 1) * w + c0];
  if (tx == 0) s[0][0] = score[r0 * w + c0];
  __syncthreads();
  for (int m = 0; m < 31; m++) {
    int i = m - tx + 1, j = tx + 1;
    if (i >= 1 && i <= 16) {
      int dg = s[i - 1][j - 1] + ref[(r0 + i - 1) * n + c0 + j - 1];
      int u = s[i - 1][j] - penalty, l = s[i][j - 1] - penalty;
      int mx = dg > u ? dg : u;
      s[i][j] = mx > l ? mx : l;
    }
    __syncthreads();
  }
  for (int i = 1; i <= 16; i++) score[(r0 + i) * w + c0 + tx + 1] = s[i][tx + 1];
}
]]

local m = cd.compile(SRC, {name = "bench_cpu.cu"})
-- the cpu device's worker threads: CUDADEV_CPU_THREADS, else one per core this process may run on
local nproc = io.popen("nproc 2>/dev/null"):read("l")
print("info threads " .. (os.getenv("CUDADEV_CPU_THREADS") or nproc or "?"))
print("info fork " .. (os.getenv("CUDADEV_CPU_FORK") == "0" and "in-process" or "contained"))

local dummy_f, dummy_i = cd.empty(1, "float32"), cd.empty(1, "int32")
local function init(which, n, f, g, r)
  m.init({grid = (n + 255) // 256, block = 256}, which, n, f or dummy_f, g or dummy_f, r or dummy_i)
end

local N = 1 << 24
local x, y = cd.empty(N, "float32"), cd.empty(N, "float32")
init(0, N, x, y)
local part = cd.empty(N // 1024, "float32")
local function partsum()
  local s, t = 0.0, part:totable()
  for i = 1, #t do s = s + t[i] end
  return s
end

local saxpy = m.saxpy
local scfg = {grid = N // 256, block = 256}
saxpy(scfg, N, 2.0, x, y)
print("info path saxpy " .. path_of(saxpy))
time("saxpy", nil, function() saxpy(scfg, N, 2.0, x, y) end, function() return y[12346] end)
local readme = m.saxpy_readme
readme({dim = N}, 2.0, x, y, N)
print("info path saxpy_readme " .. path_of(readme))
time("saxpy_readme", nil, function() readme({dim = N}, 2.0, x, y, N) end, function() return y[12346] end)

for _, name in ipairs {"reduce_shared", "reduce_warp", "reduce_diverge"} do
  local k = m[name]
  local cfg = {grid = N // 1024, block = 256}
  k(cfg, x, part)
  print("info path " .. name .. " " .. path_of(k))
  time(name, nil, function() k(cfg, x, part) end, partsum)
end
x:free(); y:free()

-- pathfinder: ROWS rows of COLS, HEIGHT rows a launch; the first row is where the sums start
do
  local ROWS, COLS, HEIGHT = 201, 1 << 16, 20
  local wall = cd.empty(ROWS * COLS, "int32")
  init(3, ROWS * COLS, nil, nil, wall)
  local a, b = cd.empty(COLS, "int32"), cd.empty(COLS, "int32")
  local k = m.pyramid
  local last
  local function run()
    local src, dst = a, b
    for t = 0, ROWS - 2, HEIGHT do
      local h = math.min(HEIGHT, ROWS - 1 - t)
      k({grid = (COLS + PB_SMALL(h) - 1) // PB_SMALL(h), block = 256}, wall, src, dst, COLS, t + 1, h)
      src, dst = dst, src
    end
    last = src
  end
  local function reset() cd.copy(a, wall, {count = COLS}) end
  reset()
  run()
  print("info path pyramid " .. path_of(k))
  time("pyramid", reset, run, function()
    local s, v = 0, last:totable()
    for i = 1, #v do s = s + v[i] end
    return s
  end)
end

-- lud: an LN x LN matrix, LN / 16 steps of three kernels each
do
  local LN = 512
  local lm = cd.empty(LN * LN, "float32")
  local nb = LN // 16
  local function reset() m.lud_init({grid = LN * LN // 256, block = 256}, lm, LN) end
  local function run()
    for k = 0, nb - 1 do
      m.lud_diagonal({grid = 1, block = 16}, lm, LN, k)
      if k < nb - 1 then
        m.lud_perimeter({grid = nb - 1 - k, block = 32}, lm, LN, k)
        m.lud_internal({grid = {nb - 1 - k, nb - 1 - k}, block = {16, 16}}, lm, LN, k)
      end
    end
  end
  reset()
  run()
  print("info path lud " .. path_of(m.lud_diagonal) .. "/" .. path_of(m.lud_perimeter) .. "/" .. path_of(m.lud_internal))
  time("lud", reset, run, function()
    local s, v = 0.0, lm:totable()
    for i = 1, #v do s = s + v[i] end
    return s
  end)
end

local M = 512
local A, B, C = cd.empty(M * M, "float32"), cd.empty(M * M, "float32"), cd.empty(M * M, "float32")
init(1, M * M, A, B)
local mcfg = {grid = {M // 16, M // 16}, block = {16, 16}}
m.matmul(mcfg, M, A, B, C)
print("info path matmul " .. path_of(m.matmul))
time("matmul", nil, function() m.matmul(mcfg, M, A, B, C) end, function() return C[M * M // 2 + 8] end)

local S, ITERS = 2048, 8
local inp, outp = cd.empty(S * S, "float32"), cd.empty(S * S, "float32")
init(2, S * S, inp)
local tcfg = {grid = {S // 16, S // 16}, block = {16, 16}}
m.stencil(tcfg, S, ITERS, inp, outp)
print("info path stencil " .. path_of(m.stencil))
time("stencil", nil, function() m.stencil(tcfg, S, ITERS, inp, outp) end, function() return outp[S * 100 + 38] end)

local W, P = 2048, 10
local ref, score = cd.empty(W * W, "int32"), cd.empty((W + 1) * (W + 1), "int32")
local score0 = cd.zeros((W + 1) * (W + 1), "int32")
do
  init(3, W * W, nil, nil, ref)
  local s = {}
  for i = 0, W do s[i + 1] = -i * P end
  local row = cd.array(s, "int32")
  cd.copy(score0, row, {count = W + 1})
  for i = 0, W do score0[i * (W + 1) + 1] = -i * P end
end
local wf = m.wavefront
local nt = W // 16
local function nw()
  local cfg = {grid = 1, block = 16}
  for d = 0, 2 * nt - 2 do
    local lo, hi = d < nt and 0 or d - nt + 1, d < nt and d or nt - 1
    cfg.grid = hi - lo + 1
    wf(cfg, W, d, lo, ref, score, P)
  end
end
score:copy_from(score0)
nw()
print("info path wavefront " .. path_of(wf))
time("wavefront", function() score:copy_from(score0) end, nw, function() return score[(W + 1) * (W + 1)] end)
