-- spec/conformance_kernels.lua: the CUDA C++ sources of the cross-device conformance suite
-- (spec/60-conformance_spec.lua). Each group is one compile per device: the same string goes to NVRTC for a
-- GPU and to the host compiler for the cpu device, so a group is also a unit of compile time.
--
-- Every kernel here is correct CUDA: no data races (shared memory is separated by barriers, accumulations
-- go through atomics), every __syncthreads is reached by all threads of the block (threads past the end
-- of the data take part with a neutral value, or leave only after the last barrier, or leave as a whole
-- block), and warp intrinsics use the full mask only where all 32 lanes are active (blocks are multiples
-- of 32 threads and no lane has returned).
--
-- Sources are [==[ ]==] strings because CUDA code is full of "]]".
local K = {}

-- Element-wise kernels, index arithmetic, scalar parameter types, __device__ helpers, early returns.
K.basic = { source = [==[
extern "C" __global__ void saxpy(int n, float a, const float *__restrict__ x, const float *__restrict__ y,
                                 float *__restrict__ out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i] + y[i];
}

extern "C" __global__ void vadd_i32(int n, const int *a, const int *b, int *c) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

extern "C" __global__ void vadd_i64(int n, const long long *a, const long long *b, long long *c) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

extern "C" __global__ void vadd_u8(int n, const unsigned char *a, const unsigned char *b, unsigned char *c) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = (unsigned char)(a[i] + b[i]);   // modulo 256
}

// __device__ helpers calling each other; `helpers` has C++ linkage, so it is found as a name expression.
__device__ unsigned gcd_u32(unsigned a, unsigned b) {
  while (b != 0u) {
    unsigned t = a % b;
    a = b;
    b = t;
  }
  return a;
}

__device__ int collatz_steps(unsigned long long v) {
  int steps = 0;
  while (v != 1ull) {
    v = (v & 1ull) ? 3ull * v + 1ull : v >> 1;
    ++steps;
  }
  return steps;
}

__device__ __forceinline__ unsigned combine(unsigned a, unsigned b) {
  return gcd_u32(a, b) * 1000u + (unsigned)collatz_steps(a);
}

__global__ void helpers(int n, const unsigned *a, const unsigned *b, unsigned *out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = combine(a[i], b[i]);
}

extern "C" __global__ void grid_stride(long long n, const unsigned *in, unsigned *out) {
  long long stride = (long long)blockDim.x * gridDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = in[i] * 2654435761u + (unsigned)i;   // modulo 2^32
}

// 2-D grid: every element records which block and thread wrote it, and the grid's height.
extern "C" __global__ void grid2d(int w, int h, int *out) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < w && y < h) {
    int blk = blockIdx.y * gridDim.x + blockIdx.x;
    int thr = threadIdx.y * blockDim.x + threadIdx.x;
    out[y * w + x] = (blk * 1000 + thr) * 10 + (int)gridDim.y;
  }
}

// 3-D blocks on a 3-D grid.
extern "C" __global__ void block3d(int nx, int ny, int nz, int *out) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  int z = blockIdx.z * blockDim.z + threadIdx.z;
  if (x < nx && y < ny && z < nz) {
    int thr = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
    int blk = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    out[(z * ny + y) * nx + x] = blk * 1000 + thr;
  }
}

// bool, char and unsigned char parameters by value.
extern "C" __global__ void flags(int n, const signed char *in, int *out, bool negate, char offset,
                                 unsigned char mask) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    int v = in[i];
    if (negate) v = -v;
    out[i] = (v + offset) ^ (int)mask;
  }
}

// double precision: Horner's rule through a __device__ helper, and sqrt.
__device__ double horner(const double *c, int m, double x) {
  double r = c[m - 1];
  for (int k = m - 2; k >= 0; --k) r = r * x + c[k];
  return r;
}

extern "C" __global__ void dpoly(int n, const double *coef, int m, const double *x, double *out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = horner(coef, m, x[i]) + sqrt(x[i]);
}

// Threads past the end take part in the block's only barrier and return after it.
namespace conf {
__global__ void reverse_in_block(int n, const int *in, int *out) {
  __shared__ int s[128];
  int t = threadIdx.x;
  int i = blockIdx.x * blockDim.x + t;
  s[t] = i < n ? in[i] : -1;
  __syncthreads();
  if (i >= n) return;
  out[i] = s[blockDim.x - 1 - t] * 3 + t;
}
}  // namespace conf

// Whole blocks return before a barrier: legal, because no thread of such a block reaches it.
extern "C" __global__ void active_blocks(int nactive, const int *in, int *out) {
  __shared__ int s[64];
  if (blockIdx.x >= (unsigned)nactive) return;
  int t = threadIdx.x;
  s[t] = in[blockIdx.x * 64 + t];
  __syncthreads();
  out[blockIdx.x * 64 + t] = s[(t + 1) % 64] - s[t];
}
]==] }

-- Shared memory: reductions (static, dynamic, a tree with barriers in the loop), a scan, a transpose, a
-- matrix multiply, stencils.
K.shared = { source = [==[
extern "C" __global__ void __launch_bounds__(256) block_sum_static(unsigned n, const float *in, float *partial) {
  __shared__ float s[256];
  unsigned t = threadIdx.x;
  unsigned i = blockIdx.x * 512u + t;          // each thread adds two elements while loading
  float v = 0.0f;
  if (i < n) v = in[i];
  if (i + 256u < n) v += in[i + 256u];
  s[t] = v;
  __syncthreads();
  for (unsigned stride = 128; stride > 0; stride >>= 1) {
    if (t < stride) s[t] += s[t + stride];
    __syncthreads();
  }
  if (t == 0) partial[blockIdx.x] = s[0];
}

extern "C" __global__ void block_sum_dynamic(unsigned n, const float *in, float *partial) {
  extern __shared__ float sdata[];
  unsigned t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  sdata[t] = i < n ? in[i] : 0.0f;
  __syncthreads();
  for (unsigned stride = blockDim.x / 2; stride > 0; stride >>= 1) {
    if (t < stride) sdata[t] += sdata[t + stride];
    __syncthreads();
  }
  if (t == 0) partial[blockIdx.x] = sdata[0];
}

// Interleaved-addressing tree over two arrays carved out of one dynamic shared allocation.
extern "C" __global__ void tree_sum_max(unsigned n, const int *in, long long *sums, int *maxs) {
  extern __shared__ long long smem[];
  long long *ssum = smem;
  int *smax = (int *)(smem + blockDim.x);
  unsigned t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  int v = i < n ? in[i] : (-2147483647 - 1);
  ssum[t] = i < n ? (long long)v * 1000003LL : 0LL;
  smax[t] = v;
  __syncthreads();
  for (unsigned s = 1; s < blockDim.x; s *= 2) {
    if (t % (2 * s) == 0) {
      ssum[t] += ssum[t + s];
      smax[t] = max(smax[t], smax[t + s]);
    }
    __syncthreads();
  }
  if (t == 0) {
    sums[blockIdx.x] = ssum[0];
    maxs[blockIdx.x] = smax[0];
  }
}

// Hillis-Steele inclusive scan of one block, double-buffered, a barrier in every step.
#define SCAN_BLOCK 512
extern "C" __global__ void scan_block(unsigned n, const int *in, int *out, int *block_sums) {
  __shared__ int buf[2][SCAN_BLOCK];
  unsigned t = threadIdx.x, i = blockIdx.x * SCAN_BLOCK + t;
  int cur = 0;
  buf[cur][t] = i < n ? in[i] : 0;
  __syncthreads();
  for (unsigned off = 1; off < SCAN_BLOCK; off <<= 1) {
    int v = buf[cur][t];
    if (t >= off) v += buf[cur][t - off];
    buf[1 - cur][t] = v;
    cur = 1 - cur;
    __syncthreads();
  }
  if (i < n) out[i] = buf[cur][t];
  if (block_sums != nullptr && t == SCAN_BLOCK - 1) block_sums[blockIdx.x] = buf[cur][t];
}

// Adds the scanned sums of the blocks before (launched with SCAN_BLOCK threads per block).
extern "C" __global__ void scan_add(unsigned n, const int *scanned_sums, int *out) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && blockIdx.x > 0) out[i] += scanned_sums[blockIdx.x - 1];
}

// 32x32 tiles padded to 33 columns (no bank conflicts), 32x8 threads, 4 rows each.
#define TILE 32
#define TILE_ROWS 8
extern "C" __global__ void transpose(int rows, int cols, const float *in, float *out) {
  __shared__ float tile[TILE][TILE + 1];
  int x = blockIdx.x * TILE + threadIdx.x;
  int y = blockIdx.y * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += TILE_ROWS)
    if (x < cols && y + j < rows) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * cols + x];
  __syncthreads();
  x = blockIdx.y * TILE + threadIdx.x;
  y = blockIdx.x * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += TILE_ROWS)
    if (x < rows && y + j < cols) out[(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
}

// C (MxN) = A (MxK) * B (KxN), 16x16 tiles, sizes that are not multiples of 16.
#define MM 16
extern "C" __global__ void matmul(int M, int N, int K, const float *A, const float *B, float *C) {
  __shared__ float As[MM][MM];
  __shared__ float Bs[MM][MM];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * MM + ty, col = blockIdx.x * MM + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += MM) {
    As[ty][tx] = (row < M && k0 + tx < K) ? A[row * K + k0 + tx] : 0.0f;
    Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(k0 + ty) * N + col] : 0.0f;
    __syncthreads();
    for (int k = 0; k < MM; ++k) acc += As[ty][k] * Bs[k][tx];
    __syncthreads();
  }
  if (row < M && col < N) C[row * N + col] = acc;
}

// 1-D 3-point stencil, halo cells in shared memory, edges clamped.
#define ST_BLOCK 128
extern "C" __global__ void stencil1d(int n, const float *in, float *out) {
  __shared__ float s[ST_BLOCK + 2];
  int t = threadIdx.x, i = blockIdx.x * ST_BLOCK + t, last = n - 1;
  s[t + 1] = in[min(i, last)];
  if (t == 0) s[0] = in[min(max(i - 1, 0), last)];
  if (t == ST_BLOCK - 1) s[ST_BLOCK + 1] = in[min(i + 1, last)];
  __syncthreads();
  if (i < n) out[i] = 0.25f * s[t] + 0.5f * s[t + 1] + 0.25f * s[t + 2];
}

// 2-D 5-point Laplacian on 16x16 tiles with a one-cell halo, edges clamped.
#define S2 16
extern "C" __global__ void laplace2d(int w, int h, const int *in, int *out) {
  __shared__ int tile[S2 + 2][S2 + 2];
  int tx = threadIdx.x, ty = threadIdx.y;
  int x0 = blockIdx.x * S2 - 1, y0 = blockIdx.y * S2 - 1;
  for (int k = ty * S2 + tx; k < (S2 + 2) * (S2 + 2); k += S2 * S2) {
    int lx = k % (S2 + 2), ly = k / (S2 + 2);
    int gx = min(max(x0 + lx, 0), w - 1), gy = min(max(y0 + ly, 0), h - 1);
    tile[ly][lx] = in[gy * w + gx];
  }
  __syncthreads();
  int x = x0 + 1 + tx, y = y0 + 1 + ty;
  if (x < w && y < h)
    out[y * w + x] = 4 * tile[ty + 1][tx + 1] - tile[ty][tx + 1] - tile[ty + 2][tx + 1] - tile[ty + 1][tx] -
                     tile[ty + 1][tx + 2];
}
]==] }

-- Atomics: every result here is independent of the order the atomics happen in.
K.atomics = { source = [==[
#define NBINS 256
extern "C" __global__ void histogram_shared(unsigned n, const unsigned char *data, unsigned *hist) {
  __shared__ unsigned local[NBINS];
  for (unsigned b = threadIdx.x; b < NBINS; b += blockDim.x) local[b] = 0u;
  __syncthreads();
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    atomicAdd(&local[data[i]], 1u);
  __syncthreads();
  for (unsigned b = threadIdx.x; b < NBINS; b += blockDim.x)
    if (local[b] != 0u) atomicAdd(&hist[b], local[b]);
}

extern "C" __global__ void histogram_global(int n, const int *keys, const int *weights, int *hist, int *wsum) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    atomicAdd(&hist[keys[i]], 1);
    atomicAdd(&wsum[keys[i]], weights[i]);
  }
}

extern "C" __global__ void minmax(int n, const int *in, int *mx, int *mn, unsigned *umx, unsigned *umn,
                                  long long *lmx) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    int v = in[i];
    atomicMax(&mx[i % 8], v);
    atomicMin(&mn[i % 8], v);
    atomicMax(umx, (unsigned)v);
    atomicMin(umn, (unsigned)v);
    atomicMax(lmx, (long long)v * (long long)(i + 1));
  }
}

// Custom read-modify-write operations built on atomicCAS (32 and 64 bit).
__device__ unsigned atomic_mulmod(unsigned *addr, unsigned v, unsigned p) {
  unsigned old = *addr, assumed;
  do {
    assumed = old;
    old = atomicCAS(addr, assumed, (unsigned)(((unsigned long long)assumed * v) % p));
  } while (old != assumed);
  return old;
}

__device__ float atomic_max_float(float *addr, float v) {
  int *a = (int *)addr;
  int old = *a, assumed;
  do {
    assumed = old;
    if (__int_as_float(assumed) >= v) break;
    old = atomicCAS(a, assumed, __float_as_int(v));
  } while (old != assumed);
  return __int_as_float(old);
}

__device__ double atomic_add_double_cas(double *addr, double v) {
  unsigned long long *a = (unsigned long long *)addr;
  unsigned long long old = *a, assumed;
  do {
    assumed = old;
    double next = __longlong_as_double((long long)assumed) + v;
    old = atomicCAS(a, assumed, (unsigned long long)__double_as_longlong(next));
  } while (old != assumed);
  return __longlong_as_double((long long)old);
}

extern "C" __global__ void cas_ops(int n, const unsigned *u, const float *f, const double *d, unsigned p,
                                   unsigned *prod, float *fmx, double *dsum) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    atomic_mulmod(&prod[i % 4], u[i], p);
    atomic_max_float(fmx, f[i]);
    atomic_add_double_cas(dsum, d[i]);
  }
}

// Floating-point atomicAdd on integer-valued data: every partial sum is exact, so any order gives the same.
extern "C" __global__ void float_bins(int n, const float *vals, const int *bins, float *sums, double *total) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    atomicAdd(&sums[bins[i]], vals[i]);
    atomicAdd(total, (double)vals[i]);
  }
}

extern "C" __global__ void count_big(int n, const unsigned long long *vals, unsigned long long threshold,
                                     unsigned long long *count, unsigned long long *sum) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && vals[i] >= threshold) {
    atomicAdd(count, 1ull);
    atomicAdd(sum, vals[i]);
  }
}

// res: [0] or, [1] and, [2] xor, [3] sub, [4] inc (wraps at limit), [5] dec (wraps at limit).
// atomicExch on distinct slots returns each slot's previous value.
extern "C" __global__ void bit_atomics(int n, const unsigned *in, unsigned limit, unsigned *res, unsigned *slots,
                                       unsigned *olds) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    unsigned v = in[i];
    atomicOr(&res[0], 1u << (v % 32u));
    atomicAnd(&res[1], ~(1u << (v % 29u)));
    atomicXor(&res[2], v);
    atomicSub(&res[3], v % 1000u);
    atomicInc(&res[4], limit);
    atomicDec(&res[5], limit);
    olds[i] = atomicExch(&slots[i], v);
  }
}
]==] }

-- Warp intrinsics (32-wide warps) and block-wide votes.
K.warp = { source = [==[
#define FULL_MASK 0xffffffffu

__device__ int warp_sum_down(int v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(FULL_MASK, v, off);
  return v;
}

// Lane 0 of each warp gets its warp's sum; warp 0 then reduces the warp sums of the block.
extern "C" __global__ void shfl_down_reduce(unsigned n, const int *in, int *warp_sums, int *block_sums) {
  __shared__ int ws[32];
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned lane = threadIdx.x % 32u, warp = threadIdx.x / 32u;
  int v = warp_sum_down(i < n ? in[i] : 0);
  if (lane == 0) {
    warp_sums[i / 32u] = v;
    ws[warp] = v;
  }
  __syncthreads();
  if (warp == 0) {
    int w = warp_sum_down(lane < blockDim.x / 32u ? ws[lane] : 0);
    if (lane == 0) block_sums[blockIdx.x] = w;
  }
}

// Butterfly: every lane ends with the warp's sum (int and float) and maximum.
extern "C" __global__ void shfl_xor_allreduce(const int *in, const float *fin, int *sums, int *maxs, float *fsums,
                                              int *warp_size) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  int s = in[i], m = in[i];
  float f = fin[i];
  for (int mask = warpSize / 2; mask > 0; mask >>= 1) {
    s += __shfl_xor_sync(FULL_MASK, s, mask);
    m = max(m, __shfl_xor_sync(FULL_MASK, m, mask));
    f += __shfl_xor_sync(FULL_MASK, f, mask);
  }
  sums[i] = s;
  maxs[i] = m;
  fsums[i] = f;
  if (i == 0) *warp_size = warpSize;
}

// Warp-level stream compaction: the ballot of a predicate, each selected lane's rank by __popc.
extern "C" __global__ void ballot_compact(unsigned n, const int *in, unsigned *masks, int *ranks, int *counts,
                                          int *firsts, int *lzs) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x, lane = threadIdx.x & 31u;
  bool pred = i < n && in[i] % 3 == 0;
  unsigned m = __ballot_sync(FULL_MASK, pred);
  unsigned below = (1u << lane) - 1u;
  ranks[i] = pred ? __popc(m & below) : -1;
  if (lane == 0) {
    masks[i / 32u] = m;
    counts[i / 32u] = __popc(m);
    firsts[i / 32u] = __ffs((int)m);
    lzs[i / 32u] = __clz((int)m);
  }
}

// Inclusive warp scan by __shfl_up_sync; __shfl_sync gathers from a permuted lane and, with width 8,
// broadcasts the first lane of each 8-lane segment.
extern "C" __global__ void warp_scan(const int *in, int *incl, int *gathered, int *seg) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x, lane = threadIdx.x & 31u;
  int v = in[i];
  for (unsigned off = 1; off < 32u; off <<= 1) {
    int u = __shfl_up_sync(FULL_MASK, v, off);
    if (lane >= off) v += u;
  }
  incl[i] = v;
  gathered[i] = __shfl_sync(FULL_MASK, in[i], (int)((lane * 7u + 3u) & 31u));
  seg[i] = __shfl_sync(FULL_MASK, in[i], 0, 8);
}

// The odd lanes shuffle among themselves in an if, then every lane shuffles with the full mask: each shuffle
// completes with its own lanes (the mask 0xaaaaaaaa names the odd lanes only).
extern "C" __global__ void warp_groups(const int *in, int *odd, int *diff) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x, lane = threadIdx.x & 31u;
  int v = in[i], o = -1;
  if (lane & 1u) {
    o = __shfl_down_sync(0xaaaaaaaau, v, 2);
  }
  v -= __shfl_up_sync(FULL_MASK, v, 1);
  odd[i] = o;
  diff[i] = v;
}

extern "C" __global__ void vote(const int *in, int *any_out, int *all_out) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x, lane = threadIdx.x & 31u;
  int v = in[i];
  int a = __any_sync(FULL_MASK, v > 100) ? 1 : 0;
  int b = __all_sync(FULL_MASK, v > 0) ? 1 : 0;
  if (lane == 0) {
    any_out[i / 32u] = a;
    all_out[i / 32u] = b;
  }
}

extern "C" __global__ void block_votes(unsigned n, const int *in, int *counts, int *ands, int *ors) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  int pred = i < n && in[i] > 0;
  int c = __syncthreads_count(pred);
  int a = __syncthreads_and(pred);
  int o = __syncthreads_or(pred);
  if (threadIdx.x == 0) {
    counts[blockIdx.x] = c;
    ands[blockIdx.x] = a != 0;
    ors[blockIdx.x] = o != 0;
  }
}
]==] }

-- Templates, instantiated through name_expressions.
K.templates = {
  name_expressions = { "scale<float>", "scale<int>", "unroll<4>", "block_reduce<int, 128>",
                       "block_reduce<double, 64>" },
  source = [==[
template <typename T>
__device__ T square(T v) { return v * v; }

template <typename T>
__global__ void scale(int n, T factor, const T *in, T *out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = factor * in[i];
}

template <int N>
__global__ void unroll(int n, const float *in, float *out) {
  int base = (blockIdx.x * blockDim.x + threadIdx.x) * N;
#pragma unroll
  for (int k = 0; k < N; ++k) {
    int j = base + k;
    if (j < n) out[j] = in[j] * (float)(k + 1) + (float)N;
  }
}

// Sum of squares per block; the shared array is sized by the template argument (launch with BLOCK threads).
template <typename T, int BLOCK>
__global__ void block_reduce(int n, const T *in, T *out) {
  __shared__ T s[BLOCK];
  int t = threadIdx.x, i = blockIdx.x * BLOCK + t;
  s[t] = i < n ? square(in[i]) : T(0);
  __syncthreads();
  for (int stride = BLOCK / 2; stride > 0; stride /= 2) {
    if (t < stride) s[t] += s[t + stride];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = s[0];
}
]==] }

-- Vector types and single-precision math functions.
K.vector_math = { source = [==[
extern "C" __global__ void vec_float(int n, const float4 *in, const float3 *in3, float2 offset, float *sums,
                                     float2 *pairs, float *norms) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float4 v = in[i];
    sums[i] = v.x + v.y + v.z + v.w;
    pairs[i] = make_float2(v.x * v.y + offset.x, v.z - v.w + offset.y);
    float3 p = in3[i];
    norms[i] = p.x * p.x + p.y * p.y + p.z * p.z;
  }
}

extern "C" __global__ void vec_int(int n, const int2 *in, int2 *out, uchar4 *bytes) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    int2 p = in[i];
    out[i] = make_int2(p.x + p.y, p.x - p.y);
    bytes[i] = make_uchar4(p.x & 255, p.y & 255, (p.x >> 8) & 255, (unsigned char)i);
  }
}

extern "C" __global__ void math_approx(int n, const float *x, const float *p, float *s, float *c, float *e,
                                       float *l, float *r) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float v = x[i], q = p[i];
    s[i] = sinf(v);
    c[i] = cosf(v);
    e[i] = expf(v);
    l[i] = logf(q);
    r[i] = rsqrtf(q);
  }
}

extern "C" __global__ void math_exact(int n, const float *a, const float *b, const float *c, float *sq,
                                      float *fm, float *dv) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    sq[i] = sqrtf(a[i]);
    fm[i] = fmaf(a[i], b[i], c[i]);
    dv[i] = a[i] / b[i];
  }
}
]==] }

-- __half, kept apart because it needs <cuda_fp16.h> (for NVRTC: on the toolkit's include path).
K.half = { cuda_headers = true, source = [==[
#include <cuda_fp16.h>

extern "C" __global__ void half_roundtrip(int n, const float *in, __half *h, float *back, __half *twice) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    __half x = __float2half(in[i]);          // round to nearest, ties to even
    h[i] = x;
    back[i] = __half2float(x);
    twice[i] = __float2half(__half2float(x) * 2.0f);
  }
}

extern "C" __global__ void half_param(int n, __half scale, const __half *in, float *out, __half *prod) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    out[i] = __half2float(in[i]) * __half2float(scale);
    prod[i] = __hmul(in[i], scale);
  }
}
]==] }

-- printf from a kernel: run in a child process so its standard output can be read.
K.printf = { source = [==[
extern "C" __global__ void say(int base, float f) {
  unsigned t = threadIdx.x, b = blockIdx.x;
  printf("conf-printf b=%u t=%u v=%d f=%.3f x=%x s=%s c=%c ll=%lld\n", b, t, base + (int)(b * blockDim.x + t),
         f * (float)t, 0xf0u + t, "ok", (char)('A' + t), (long long)base * 1000000007LL);
}
]==] }

return K
