-- cd.linalg: NumPy's numpy.linalg (solve, inv, det, slogdet, cholesky, qr, eigh, eigvalsh, svd, lstsq, norm,
-- pinv) on float32 and float64 arrays of 2 dimensions or stacks of them (every dimension before the last two is a
-- batch dimension, as in NumPy). Built into the library; run once by luaopen_cudadev with the module table, the
-- Array metatable and the parts' internals.
--
-- NOTE [linalg layers]: this file is NumPy's layer: shapes, batching, dtypes, options and NumPy's errors. The
-- factorizations are LAPACK's, reached through cd._linalg (taken away below): .cpu is linalg_cpu.c's LAPACKE
-- (opened at run time, NOTE [lapacke library]), .cuda linalg_cuda.c's cuSOLVER (NOTE [cusolver library]), which G
-- below gives the cpu routines' contract (NOTE [linalg layouts]). Each routine gets fresh C-contiguous copies of 3
-- dimensions {batch, rows, columns}, which it overwrites, and answers which matrix of the batch failed, if one did,
-- with LAPACK's info; that failure is raised here in NumPy's words (numpy.linalg.LinAlgError's), naming the
-- argument. What LAPACK does not do (inv, det, lstsq, pinv, norm) is built here from the routines and the array
-- operations. Results keep the input's dtype (float32 in, float32 out); integer and bool inputs compute in float64.
local cd, _, internal = ...
local C = rawget(cd, "_linalg")
cd._linalg = nil
local raise, typename = internal.raise, internal.typename   -- extra.lua's, there already
-- ops.lua's, there once loading is done (it runs after this file); tail calls, so the error levels are theirs
local function argerror(...) return internal.argerror(...) end
local function check_opts(...) return internal.check_opts(...) end
local fmt, concat = string.format, table.concat

local linalg = {}
cd.linalg = linalg

local EPS = { float32 = 2 ^ -23, float64 = 2 ^ -52 }

local function is_array(v) return cd.type(v) == "Array" end

local function shape_text(s) return "{" .. concat(s, ", ") .. "}" end

local function swapT(x) return cd.swapaxes(x, -1, -2) end

-- ------------------------------------------------------------------------------------------ CUDA devices
-- NOTE [linalg layouts]: cuSOLVER is column-major, and a row-major {rows, cols} buffer read column-major is the
-- transpose. The table G gives CUDA devices the cpu routines' contract (row-major matrices, overwritten in place,
-- `bad, info` for a failed matrix) over linalg_cuda.c's column-major routines:
--   solve    getrf of the buffer as it is (a^T), then getrs with op T (a x = b); b goes in transposed. A batch of
--            small matrices takes cuBLAS's batched getrf/getrs instead (one launch, not one per matrix), and n and k
--            up to 32 our own kernel, row-major, nothing transposed (NOTE [fused small solve]).
--   slogdet  getrf of a^T (det a^T = det a): the diagonal and the pivots, reduced on the device.
--   cholesky potrf "lower" of the buffer (a's upper triangle, read column-major) is U read row-major, and of a's
--            transpose copied (a's lower triangle) L^T: NOTE [cholesky fill]. The other triangle is zeroed after.
--   qr       geqrf of a's transpose copied (the buffer then holds a column-major), R read back transposed; orgqr on
--            the reflectors' first k columns, Q read back transposed.
--   eigh     syevd "upper" of the buffer reads a's lower triangle (a is symmetric); the eigenvectors come back
--            as rows, transposed after.
--   svd      gesvdj (one-sided Jacobi, PyTorch's default driver: about twice gesvd's speed) of the buffer as it
--            is, a^T = U' S V'^T: U' read row-major is NumPy's Vh, and gesvdj's V' (V, not V^T) read row-major is
--            V'^T, NumPy's U transposed. A batch where a matrix does not converge (info k + 1, or S not finite) is
--            done again with gesvd, from a copy of the buffer kept for that, as PyTorch falls back. gesvd takes
--            m >= n only: a row-major a with rows <= cols goes as it is (U' read row-major is Vh, V'^T read
--            row-major is U, no transposes), a taller a through its transpose's SVD (U = Vh2^T, Vh = U2^T).
local G = {}

local function dev_of(x) return { device = x.device } end
local routines   -- below

-- the first matrix whose info is not 0 and that info, or nil (one reduction; the host reads info only then)
local function first_bad(info)
  if info.size == 0 or not info:ne(0):any() then return nil end
  local t = info:to("cpu")
  for i = 1, t.size do if t[i] ~= 0 then return i, t[i] end end
end

-- x's elements replaced by y's (y of x's size, any shape; a view is copied contiguous first)
local function put_back(x, y) x:copy_from(y.is_contiguous and y or y:contiguous()) end

-- info starts at 0: a routine that has nothing to do (an empty matrix) writes none
local function ints(shape, x) return cd.zeros(shape, "int32", dev_of(x)) end

-- NOTE [fused small solve]: small systems (n <= 32 and k <= 32, one or a batch) are solved by one generated kernel
-- (ops.lua's NOTE [generated kernels]; n and k are its compile-time constants) in place of cuBLAS's batched getrf and
-- getrs, which took five kernels and two transposes of b (on an H200, 1024 x 32 x 32 float32 with b {1024, 32, 1}:
-- getrf 44 us, two trsm 22 + 13, laswp 9). One warp per matrix; lane i holds row i of a (and of b) in registers, read
-- through shared memory (so the loads are whole lines) at an odd row stride (so the lanes' reads miss each other's
-- banks). LU with partial pivoting, the pivot chosen as LAPACK's getrf chooses it (the first row of the largest |a|
-- among the rows not yet pivots; a NaN counts as the largest, so a NaN matrix answers NaN rather than picking a row
-- twice), without moving rows: a lane remembers the step at which its row became the pivot. The pivot row is broadcast
-- by shuffles; each row keeps L's entries where a's columns were eliminated (as getrf leaves them). Then b, 8 columns
-- at a time: L's steps in order, back substitution in pivot order, and each lane writes its solution row where its step
-- says: row-major, straight into y's layout. b in chunks, not whole: unrolled for all of k, the float64 kernel for n =
-- k = 32 took nvcc 21 s to build for sm_90 (244 registers), in chunks 3.5 s (184). The kernel only reads a and b, so
-- linalg.solve and inv hand them over uncopied where they are contiguous in the dtype (G.fused): the profile of the
-- batch above had 11.5 us of copies of them (astype) before the solve. A zero pivot is recorded as getrf's info (the
-- step, 1-based) and skipped, as getrf goes on past it. The first failed matrix and its info reach the host as one
-- 64-bit word: the kernel takes the largest of ((B - m) << 32 | info) over failed matrices m (0-based), so the word is
-- 0 when none failed, one read.
local FUSED_MAX, FUSED_WARPS = 32, 4
local FUSED = [==[
typedef @T@ T;
#define N @N@
#define K @K@
#define KC (K < 8 ? K : 8)
#define SA (N | 1)
#define SB (KC | 1)
#define SH (N * SA > N * SB ? N * SA : N * SB)
#define FULL 0xffffffffu

// columns c0.. of the warp's n rows (of `cols` in g) into s at row stride STRIDE (odd), coalesced, then lane's row
// of them into v; past `cols` 0
template <int C, int STRIDE> __device__ __forceinline__ void cdv_rows_in(const T *g, int cols, int c0, T *s, T *v,
                                                                        int lane) {
#pragma unroll
  for (int i = lane; i < N * C; i += 32) {
    int row = i / C, col = c0 + i % C;
    s[row * STRIDE + i % C] = col < cols ? g[row * cols + col] : (T)0;
  }
  __syncwarp();
#pragma unroll
  for (int c = 0; c < C; c++) v[c] = lane < N ? s[lane * STRIDE + c] : (T)0;
  __syncwarp();
}

// the pivot lane of step j
__device__ __forceinline__ int cdv_pivot(int step, int j) { return __ffs(__ballot_sync(FULL, step == j)) - 1; }

// The first lane of the largest |v| among the candidates (cand; a NaN counts as inf). The key is |v|'s bits plus 1
// (a non-negative float orders as its bits), 0 for the others: one warp max (redux.sync on sm_80 and later, two for
// 64 bits) and a ballot, where (value, lane) pairs took five rounds of two or three dependent shuffles.
__device__ __forceinline__ unsigned long long cdv_key(float v) {
  return (v != v ? 0x7f800000u : __float_as_uint(fabsf(v))) + 1ull;   // NVRTC has no INFINITY: its bits
}
__device__ __forceinline__ unsigned long long cdv_key(double v) {
  return (v != v ? 0x7ff0000000000000ull : (unsigned long long)__double_as_longlong(fabs(v))) + 1ull;
}
__device__ __forceinline__ int cdv_argmax(T v, bool cand) {
  unsigned long long key = cand ? cdv_key(v) : 0ull, top;
#if __CUDA_ARCH__ >= 800 || defined(__CUDADEV_CPU__)
  if (sizeof(T) == 4) {   // the key fits in 32 bits
    top = __reduce_max_sync(FULL, (unsigned)key);
  } else {
    unsigned hi = __reduce_max_sync(FULL, (unsigned)(key >> 32));
    unsigned lo = __reduce_max_sync(FULL, (unsigned)(key >> 32) == hi ? (unsigned)key : 0u);
    top = (unsigned long long)hi << 32 | lo;
  }
#else
  top = key;
  for (int o = 16; o > 0; o >>= 1) {
    unsigned long long w = __shfl_xor_sync(FULL, top, o);
    top = w > top ? w : top;
  }
#endif
  return __ffs(__ballot_sync(FULL, key == top)) - 1;
}

extern "C" __global__ void @NAME@(const T *a, const T *b, long long bstride, T *y, long long *first, long long B) {
  __shared__ T sh[@W@][SH];
  int lane = threadIdx.x & 31;
  long long m = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  if (m >= B) return;   // whole warps: the block is whole warps
  T *s = sh[threadIdx.x >> 5];
  T r[N];   // this lane's row of a, then of U (from its step on) and L (before it)
  cdv_rows_in<N, SA>(a + m * N * N, N, 0, s, r, lane);
  int step = lane < N ? -1 : N;   // -1: a row not yet a pivot; N: no row
  int info = 0;
#pragma unroll
  for (int j = 0; j < N; j++) {
    // the pivot: the largest |a| of column j among the rows not yet pivots, the first such row on ties
    int p = cdv_argmax(r[j], step < 0);
    T d = __shfl_sync(FULL, r[j], p);
    if (lane == p) step = j;
    if (d == (T)0) {   // the rest of column j is zero, L's entries with it (uniform across the warp)
      if (info == 0) info = j + 1;
      continue;
    }
    T l = r[j] / d;
    if (step < 0) r[j] = l;   // L's entry, where column j was
#pragma unroll
    for (int c = j + 1; c < N; c++) {
      T u = __shfl_sync(FULL, r[c], p);
      if (step < 0) r[c] -= l * u;
    }
  }
  // the right sides, KC columns at a time (the code unrolled for KC, not K): L's steps in order, then back
  // substitution, where the pivot of step j (U's row j) solves its x_j, which the earlier pivots' rows take out
  const T *bm = b + m * bstride;
  T *ym = y + m * N * K;
#pragma unroll 1
  for (int c0 = 0; c0 < K; c0 += KC) {
    T rb[KC];
    cdv_rows_in<KC, SB>(bm, K, c0, s, rb, lane);
#pragma unroll
    for (int j = 0; j < N - 1; j++) {
      int p = cdv_pivot(step, j);
#pragma unroll
      for (int c = 0; c < KC; c++) {
        T u = __shfl_sync(FULL, rb[c], p);
        if (step > j && step < N) rb[c] -= r[j] * u;
      }
    }
#pragma unroll
    for (int j = N - 1; j >= 0; j--) {
      int p = cdv_pivot(step, j);
      T d = __shfl_sync(FULL, r[j], p);
#pragma unroll
      for (int c = 0; c < KC; c++) {
        T x = __shfl_sync(FULL, rb[c], p) / d;
        if (step == j) rb[c] = x;
        else if (step < j) rb[c] -= r[j] * x;
      }
    }
    if (lane < N) {
#pragma unroll
      for (int c = 0; c < KC; c++) s[step * SB + c] = rb[c];
    }
    __syncwarp();
#pragma unroll
    for (int i = lane; i < N * KC; i += 32)
      if (c0 + i % KC < K) ym[(i / KC) * K + c0 + i % KC] = s[(i / KC) * SB + i % KC];
    __syncwarp();
  }
  if (lane == 0 && info != 0) atomicMax(first, ((B - m) << 32) | info);
}
]==]

local function fused_kernel(dev, dt, n, k)
  local ctype = dt == "float32" and "float" or "double"
  return internal.kernel_for(dev, fmt("linalg_solve|%s|%d|%d", dt, n, k), function()
    local name = fmt("cdv_solve_%s_%d_%d", dt, n, k)
    local src = FUSED:gsub("@(%u+)@", { T = ctype, N = tostring(n), K = tostring(k), W = tostring(FUSED_WARPS),
      NAME = name })
    return src, name
  end)
end

-- Whether G.solve of a {..., n, n} and b {..., n, k} (or {n}) runs the fused kernel, which only reads a and b: then
-- linalg.solve hands them over uncopied where it can (a contiguous, b contiguous and not broadcast but as a
-- whole). Any a and b: the shapes are checked after.
function G.fused(a, b)
  if not (is_array(a) and is_array(b)) or a.size == 0 or b.size == 0 or a.ndim < 2 or b.ndim < 1 then return false end
  local n, k = a.shape[a.ndim], b.ndim == 1 and 1 or b.shape[b.ndim]
  return n <= FUSED_MAX and k <= FUSED_MAX and routines(a) == G
end

-- G.solve's fused way: b's matrices {n, k} at bstride elements apart (0: one for all), the answers into y
local function fused_solve(x, y, B, n, k, b, bstride)
  local first = cd.zeros({ 1 }, "int64", dev_of(x))
  local block = 32 * FUSED_WARPS
  fused_kernel(x.device, x.dtype, n, k)({ grid = (B + FUSED_WARPS - 1) // FUSED_WARPS, block = block }, x, b, bstride,
    y, first, B)
  local w = first[1]
  if w ~= 0 then return B - (w >> 32) + 1, w & 0xffffffff end
end

-- y's answers; with b (which linalg.solve gives when G.fused said so, and then the fused kernel runs), b's matrices
-- at bstride apart are the right sides and x is only read, else y's are, overwritten
function G.solve(x, y, b, bstride)
  local B, n, k = y.shape[1], y.shape[2], y.shape[3]
  if B > 0 and n > 0 and k > 0 and n <= FUSED_MAX and k <= FUSED_MAX then
    return fused_solve(x, y, B, n, k, b or y, b and bstride or n * k)
  end
  local D = C.cuda
  local ipiv, info = ints({ B, n }, x), ints({ B }, x)
  local yt = swapT(y):copy()
  if B > 1 and n <= 64 then
    D.solve_batched(x, ipiv, yt, info)
  else
    D.getrf(x, ipiv, info)
    local bad, code = first_bad(info)
    if bad then return bad, code end
    D.getrs(x, ipiv, yt, info, true)
  end
  local bad, code = first_bad(info)
  if bad then return bad, code end
  put_back(y, swapT(yt))
end

function G.slogdet(x, sign, logabs)
  local B, n = x.shape[1], x.shape[2]
  if n == 0 then sign:fill(1); logabs:fill(0); return end
  local ipiv, info = ints({ B, n }, x), ints({ B }, x)
  C.cuda.getrf(x, ipiv, info)
  local d = x:reshape({ B, n * n }):slice(1, n * n, n + 1, 2)   -- the diagonal of each LU
  local swaps = ipiv:ne(cd.arange(1, n + 1, 1, "int32", dev_of(x))):astype("int64"):sum({ axis = 2 })
  local flip = (1 - (swaps % 2) * 2):astype(x.dtype)
  put_back(sign, cd.sign(d):prod({ axis = 2 }) * flip)
  put_back(logabs, cd.log(cd.abs(d)):sum({ axis = 2 }))
end

-- NOTE [cholesky fill]: cuSOLVER's potrf (and Xpotrf) is fast for the "lower" fill mode only: on an H200, 4096 x
-- 4096 float64, "lower" ran one kernel (getrf_wo_pivot) in 2158 us where "upper" took 5144 (PyTorch, which asks
-- "lower" of a column-major copy, 2128; CuPy, which asks "upper", 4894). So the lower factor is computed from a's
-- transpose (x, copied so by the caller: one pass, as the copy it replaces), whose U is L^T. Returns the factor
-- (bad, info for a failed matrix): a new array, as tril/triu make one; L is the tril of x's transpose, made on CUDA
-- devices by the tiled kernel in one pass that does not read the tiles above the diagonal (NOTE [tiled transpose]
-- in views.lua).
function G.cholesky(x, lower)
  local info = ints({ x.shape[1] }, x)
  C.cuda.potrf(x, info, false)
  local bad, code = first_bad(info)
  if bad then return bad, code end
  return nil, nil, lower and cd.tril(swapT(x)) or cd.triu(x)
end

-- qr leaves the column-major reflectors in x's buffer (as {B, n, m}), which orgqr reads
function G.qr(x, tau, R)
  local B, m, n = x.shape[1], x.shape[2], x.shape[3]
  local xt = swapT(x):copy()
  local info = ints({ B }, x)
  C.cuda.geqrf(xt, tau, info)
  local bad, code = first_bad(info)
  if bad then return bad, code end
  if R then put_back(R, cd.triu(swapT(xt):slice(1, R.shape[2], 1, 2))) end
  put_back(x, xt:reshape({ B, m, n }))
end

function G.orgqr(x, tau, Q)
  local B, m, n, qc = x.shape[1], x.shape[2], x.shape[3], Q.shape[3]
  local k = math.min(m, n)
  local first = x:reshape({ B, n, m }):slice(1, k, 1, 2)
  local qb = qc > k and cd.concatenate({ first, cd.zeros({ B, qc - k, m }, x.dtype, dev_of(x)) }, 2) or first:copy()
  local info = ints({ B }, x)
  C.cuda.orgqr(qb, tau, info)
  local bad, code = first_bad(info)
  if bad then return bad, code end
  put_back(Q, swapT(qb))
end

function G.eigh(x, w, vectors, lower)
  local info = ints({ x.shape[1] }, x)
  C.cuda.syevd(x, w, info, vectors, lower)
  local bad, code = first_bad(info)
  if bad then return bad, code end
  if vectors then put_back(x, swapT(x)) end
end

-- gesvd, the fallback (NOTE [linalg layouts]); x is destroyed
local function gesvd(x, s, u, vt, full, info)
  local B, m, n = x.shape[1], x.shape[2], x.shape[3]
  if m <= n then
    C.cuda.gesvd(x, s, vt, u, info, full)
  else
    local u2 = u and cd.empty({ B, n, n }, x.dtype, dev_of(x))
    local vt2 = u and cd.empty({ B, full and m or n, m }, x.dtype, dev_of(x))
    C.cuda.gesvd(swapT(x):copy(), s, vt2, u2, info, full)   -- the wide case for a^T: its Vh first
    if u then
      put_back(u, swapT(vt2))
      put_back(vt, swapT(u2))
    end
  end
  return first_bad(info)
end

function G.svd(x, s, u, vt, full)
  local B, m, n = x.shape[1], x.shape[2], x.shape[3]
  local info = ints({ B }, x)
  local v = u and cd.empty({ B, full and m or math.min(m, n), m }, x.dtype, dev_of(x))
  C.cuda.gesvdj(x:copy(), s, vt, v, info, full)   -- x is kept for the fallback
  -- a NaN or inf matrix may "converge" to NaN: gesvd then answers for it as it did before gesvdj
  if first_bad(info) or not cd.isfinite(s):all() then return gesvd(x, s, u, vt, full, ints({ B }, x)) end
  if u then put_back(u, swapT(v)) end
end

-- The routines of x's device (NOTE [linalg layers]): LAPACKE's on the cpu device, G's on CUDA devices; G's for
-- every device under cd._selftest.linalg_through (linalg_cuda.c), which spec/38 uses to check G without a GPU.
function routines(x)
  if C.through then return G end
  return x.device.is_cpu and C.cpu or G
end

-- The dtype linalg computes a's elements in: float32 and float64 as they are, integers and bool in float64.
local function work_dtype(a, fname, n)
  local dt = a.dtype
  if dt == "float32" or dt == "float64" then return dt end
  if dt == "float16" then
    argerror(fname, n, "array type float16 is unsupported in linalg; convert with a:astype(\"float32\")", 2)
  end
  return "float64"
end

-- A fresh C-contiguous copy of a in dtype dt, which a routine may overwrite.
local function fresh(a, dt)
  local x = a:astype(dt)
  if rawequal(x, a) or not x.is_contiguous then x = x:copy() end
  return x
end

-- a checked as a matrix or a stack of them: its batch shape, rows and columns.
local function matrix_shape(a, fname, n, square)
  if not is_array(a) then argerror(fname, n, "Array expected, got " .. typename(a), 2) end
  if a.ndim < 2 then
    argerror(fname, n, fmt("%d-dimensional array given; the array must be at least two-dimensional", a.ndim), 2)
  end
  local s = a.shape
  local rows, cols = s[#s - 1], s[#s]
  if square and rows ~= cols then
    argerror(fname, n, fmt("last 2 dimensions of the array must be square (got %d x %d)", rows, cols), 2)
  end
  local batch, count = {}, 1
  for i = 1, #s - 2 do
    batch[i] = s[i]
    count = count * s[i]
  end
  return batch, count, rows, cols
end

-- {batch..., extra...}
local function with(batch, ...)
  local s = { table.unpack(batch) }
  for _, d in ipairs({ ... }) do s[#s + 1] = d end
  return s
end

local function new(shape, dt, like) return cd.empty(shape, dt, { device = like.device }) end

-- a's working copy as {count, rows, cols}, its dtype (dt, or a's own), and the pieces of its shape; with `read`
-- (the routine only reads it), a itself where it is contiguous in dt.
local function matrices(a, fname, n, square, dt, read)
  local batch, count, rows, cols = matrix_shape(a, fname, n, square)
  dt = dt or work_dtype(a, fname, n)
  local x = read and a.dtype == dt and a.is_contiguous and a or fresh(a, dt)
  return x:reshape({ count, rows, cols }), dt, batch, count, rows, cols
end

-- The dtype of a computation on a and b, as NumPy's linalg takes it: float32 when both are, else float64.
local function common_dtype(a, b, fname)
  local da = is_array(a) and work_dtype(a, fname, 1)
  local db = is_array(b) and work_dtype(b, fname, 2)
  return (da == "float64" or db == "float64") and "float64" or da or db
end

-- A failed matrix's place in words: nothing for a single matrix.
local function which(bad, count) return count > 1 and fmt(" (matrix %d of the batch)", bad) or "" end

-- The value of a stack-or-matrix result: a Lua number for a single matrix (batch {}), else the array.
local function scalar_or(x, batch)
  if #batch == 0 then return x[1] end
  return x:reshape(batch)
end

-- the options table at argument n: nil or a table (not an Array), checked against the allowed keys
local function options(v, allowed, fname, n)
  if v == nil then return {} end
  if type(v) ~= "table" or is_array(v) then argerror(fname, n, "options table expected, got " .. typename(v), 2) end
  return check_opts(v, allowed, fname, n)
end

-- ------------------------------------------------------------------------------------------ solve, inv
-- b broadcast to a's batch as {count, n, k}: NumPy 2's rule, a 1-d b is one vector for every matrix. With `read`
-- (G.fused: the routine reads b and writes the answers elsewhere), an empty {count, n, k} for the answers, k, and b
-- itself with the stride of its matrices, where b is contiguous and one matrix for all or one each.
local function right_side(a, b, dt, batch, count, n, fname, read)
  if not is_array(b) then argerror(fname, 2, "Array expected, got " .. typename(b), 3) end
  if b.ndim == 0 then argerror(fname, 2, "0-dimensional array given; b must be 1-d or at least 2-d", 3) end
  local s = b.shape
  if s[b.ndim == 1 and 1 or b.ndim - 1] ~= n then
    argerror(fname, 2, fmt("b of shape %s does not match a of %d x %d (b needs %d rows)", shape_text(s), n, n, n), 3)
  end
  local k = b.ndim == 1 and 1 or s[#s]
  local bshape = b.ndim == 1 and { n, 1 } or s
  local bb = (b.dtype == dt and b or b:astype(dt)):reshape(bshape)   -- (astype copies, and so does the end)
  local bbatch = {}
  for i = 1, #bshape - 2 do bbatch[i] = bshape[i] end
  -- the batch shapes broadcast together; a's must be the result (a is not copied per b)
  local ok = #bbatch <= #batch
  for i = 1, #bbatch do
    local da, db = batch[#batch - #bbatch + i], bbatch[i]
    if ok and db ~= da and db ~= 1 then ok = false end
  end
  if not ok then
    argerror(fname, 2, fmt("the batch dimensions of b %s do not match those of a %s", shape_text(s),
      shape_text(with(batch, n, n))), 3)
  end
  local nb = 1
  for i = 1, #bbatch do nb = nb * bbatch[i] end
  if read and bb.is_contiguous and (nb == 1 or nb == count) then   -- b as it is, one for all or one each
    return new({ count, n, k }, dt, a), k, bb, nb == 1 and 0 or n * k
  end
  local out = cd.broadcast_to(bb, with(batch, n, k)):copy()
  return out:reshape({ count, n, k }), k
end

local function singular(fname, bad, count)
  raise(fmt("bad argument #1 to '%s' (singular matrix%s; a has no inverse: cd.linalg.lstsq and cd.linalg.pinv " ..
    "take singular matrices)", fname, which(bad, count)), 3)
end

-- cd.linalg.solve(a, b) -> x with a x = b: a {..., n, n}; b {..., n, k} or {n} (NumPy 2: one vector)
function linalg.solve(a, b)
  local read = G.fused(a, b)
  local x, dt, batch, count, n = matrices(a, "solve", 1, true, common_dtype(a, b, "solve"), read)
  local r = routines(x)
  local y, k, src, stride = right_side(a, b, dt, batch, count, n, "solve", read)
  local bad = r.solve(x, y, src, stride)
  if bad then singular("solve", bad, count) end
  if b.ndim == 1 then return y:reshape(with(batch, n)) end
  return y:reshape(with(batch, n, k))
end

-- cd.linalg.inv(a) -> a^-1 (the solve of a x = I)
function linalg.inv(a)
  local read = G.fused(a, a)
  local x, dt, batch, count, n = matrices(a, "inv", 1, true, nil, read)
  local r = routines(x)
  local eye = cd.eye(n, n, 0, dt, { device = a.device })
  -- the fused kernel reads the one identity for every matrix
  local y = read and new({ count, n, n }, dt, x) or cd.broadcast_to(eye, { count, n, n }):copy()
  local bad = r.solve(x, y, read and eye or nil, 0)
  if bad then singular("inv", bad, count) end
  return y:reshape(with(batch, n, n))
end

-- ------------------------------------------------------------------------------------------ det, slogdet
local function slogdet_parts(a, fname)
  local x, dt, batch, count, n = matrices(a, fname, 1, true)
  local r = routines(x)
  local sign, logabs = new({ count }, dt, x), new({ count }, dt, x)
  r.slogdet(x, sign, logabs)
  return sign, logabs, batch
end

-- cd.linalg.slogdet(a) -> sign, log|det a| (numbers for a matrix, arrays for a stack); a singular a is sign 0
-- and logabsdet -inf, as NumPy's
function linalg.slogdet(a)
  local sign, logabs, batch = slogdet_parts(a, "slogdet")
  return scalar_or(sign, batch), scalar_or(logabs, batch)
end

-- cd.linalg.det(a) -> det a, sign * exp(logabsdet) as NumPy computes it
function linalg.det(a)
  local sign, logabs, batch = slogdet_parts(a, "det")
  return scalar_or(sign * cd.exp(logabs), batch)
end

-- ------------------------------------------------------------------------------------------ cholesky
-- cd.linalg.cholesky(a [, {upper=}]) -> L with a = L L^T (or U with a = U^T U); only a's lower (upper) triangle
-- is read, as NumPy's
function linalg.cholesky(a, opts)
  local o = options(opts, { upper = true }, "cholesky", 2)
  if o.upper ~= nil and type(o.upper) ~= "boolean" then
    argerror("cholesky", 2, "'upper' must be a boolean, got " .. typename(o.upper), 1)
  end
  local lower = not o.upper
  -- G takes the lower factor from a's transpose (NOTE [cholesky fill]), which a GPU copies as it makes the
  -- factor, by the tiled kernel (NOTE [tiled transpose] in views.lua)
  local rt = is_array(a) and routines(a)
  local t = lower and rt == G and a.ndim >= 2
  local x, _, batch, count, n = matrices(t and swapT(a) or a, "cholesky", 1, true)
  local bad, info, r = rt.cholesky(x, lower)
  if bad then
    raise(fmt("bad argument #1 to 'cholesky' (matrix is not positive definite%s: its leading minor of order %d is " ..
      "not positive)", which(bad, count), info), 2)
  end
  return (r or x):reshape(with(batch, n, n))
end

-- ------------------------------------------------------------------------------------------ qr
local QR_MODES = { reduced = true, complete = true, r = true }

-- cd.linalg.qr(a [, mode]) -> Q, R (mode "reduced", the default, or "complete"), or R alone (mode "r")
function linalg.qr(a, mode)
  mode = mode == nil and "reduced" or mode
  if not QR_MODES[mode] then
    argerror("qr", 2, fmt("mode must be \"reduced\", \"complete\" or \"r\", got %s",
      type(mode) == "string" and fmt("%q", mode) or typename(mode)), 1)
  end
  local x, dt, batch, count, m, n = matrices(a, "qr", 1, false)
  local r = routines(x)
  local k = math.min(m, n)
  local rr = mode == "complete" and m or k
  local tau, R = new({ count, k }, dt, x), new({ count, rr, n }, dt, x)
  r.qr(x, tau, R)
  R = R:reshape(with(batch, rr, n))
  if mode == "r" then return R end
  local qc = mode == "complete" and m or k
  local Q = new({ count, m, qc }, dt, x)
  r.orgqr(x, tau, Q)
  return Q:reshape(with(batch, m, qc)), R
end

-- ------------------------------------------------------------------------------------------ eigh, eigvalsh
local function uplo_lower(UPLO, fname)
  if UPLO == nil or UPLO == "L" then return true end
  if UPLO == "U" then return false end
  argerror(fname, 2, fmt("UPLO must be \"L\" or \"U\", got %s", type(UPLO) == "string" and fmt("%q", UPLO)
    or typename(UPLO)), 2)
end

local function eig(a, UPLO, fname, vectors)
  local lower = uplo_lower(UPLO, fname)
  local x, dt, batch, count, n = matrices(a, fname, 1, true)
  local w = new({ count, n }, dt, x)
  local bad = routines(x).eigh(x, w, vectors, lower)
  if bad then raise(fmt("%s: eigenvalues did not converge%s", fname, which(bad, count)), 3) end
  return w:reshape(with(batch, n)), x:reshape(with(batch, n, n))
end

-- cd.linalg.eigh(a [, UPLO]) -> w, v: the eigenvalues ascending and the eigenvectors as v's columns (a v = v w)
function linalg.eigh(a, UPLO) return eig(a, UPLO, "eigh", true) end

-- cd.linalg.eigvalsh(a [, UPLO]) -> w
function linalg.eigvalsh(a, UPLO) return (eig(a, UPLO, "eigvalsh", false)) end

-- ------------------------------------------------------------------------------------------ svd
local function svd_parts(a, full, uv, fname)
  local x, dt, batch, count, m, n = matrices(a, fname, 1, false)
  local k = math.min(m, n)
  local s = new({ count, k }, dt, x)
  local u, vt
  if uv then
    u, vt = new({ count, m, full and m or k }, dt, x), new({ count, full and n or k, n }, dt, x)
  end
  local bad = routines(x).svd(x, s, u, vt, full)
  if bad then raise(fmt("%s: SVD did not converge%s", fname, which(bad, count)), 3) end
  s = s:reshape(with(batch, k))
  if not uv then return s end
  return u:reshape(with(batch, m, full and m or k)), s, vt:reshape(with(batch, full and n or k, n))
end

local function check_boolean(o, key, fname, n)
  if o[key] ~= nil and type(o[key]) ~= "boolean" then
    argerror(fname, n, fmt("'%s' must be a boolean, got %s", key, typename(o[key])), 2)
  end
end

-- cd.linalg.svd(a [, {full_matrices=true, compute_uv=true, hermitian=false}]) -> U, S, Vh with a = U diag(S) Vh,
-- S descending; S alone when compute_uv is false. hermitian is accepted as NumPy's hint; the general SVD runs.
function linalg.svd(a, opts)
  local o = options(opts, { full_matrices = true, compute_uv = true, hermitian = true }, "svd", 2)
  for _, key in ipairs({ "full_matrices", "compute_uv", "hermitian" }) do check_boolean(o, key, "svd", 2) end
  return svd_parts(a, o.full_matrices ~= false, o.compute_uv ~= false, "svd")
end

-- ------------------------------------------------------------------------------------------ lstsq, pinv
-- 1 / s where s > cutoff, else 0 (the singular values LAPACK's gelsd and NumPy's pinv treat as zero)
local function inverse_above(s, cutoff) return cd.where(s:gt(cutoff), 1 / s, 0) end

local function check_number(v, key, fname, n)
  if v ~= nil and type(v) ~= "number" then
    argerror(fname, n, fmt("'%s' must be a number, got %s", key, typename(v)), 2)
  end
end

-- cd.linalg.lstsq(a, b [, rcond]) -> x, residuals, rank, s: the least-squares solution of a x = b (a {m, n}, b
-- {m} or {m, k}) through the SVD, singular values at most rcond * max(s) taken as zero (rcond's default, as
-- NumPy's rcond=None: eps * max(m, n)); residuals the squared norms of b - a x's columns when rank is n < m, else
-- empty; rank an integer; s a's singular values.
function linalg.lstsq(a, b, rcond)
  if not is_array(a) then argerror("lstsq", 1, "Array expected, got " .. typename(a), 1) end
  if a.ndim ~= 2 then argerror("lstsq", 1, fmt("%d-dimensional array given; a must be two-dimensional", a.ndim), 1) end
  if not is_array(b) then argerror("lstsq", 2, "Array expected, got " .. typename(b), 1) end
  local m, n = a.shape[1], a.shape[2]
  if (b.ndim ~= 1 and b.ndim ~= 2) or b.shape[1] ~= m then
    argerror("lstsq", 2, fmt("b of shape %s does not match a of %d x %d (b needs %d rows, 1 or 2 dimensions)",
      shape_text(b.shape), m, n, m), 1)
  end
  check_number(rcond, "rcond", "lstsq", 3)
  local dt = common_dtype(a, b, "lstsq")
  local u, s, vt = svd_parts(a:astype(dt), false, true, "lstsq")
  local k = math.min(m, n)
  rcond = rcond or EPS[dt] * math.max(m, n)
  local smax = k > 0 and s:max() or 0
  local sinv = inverse_above(s, rcond * smax)
  local rank = k > 0 and math.tointeger(s:gt(rcond * smax):sum()) or 0
  local bm = b:astype(dt):reshape({ m, b.ndim == 1 and 1 or b.shape[2] })
  local c = cd.matmul(u.T, bm) * sinv:reshape({ k, 1 })
  local x = cd.matmul(vt.T, c)
  local res
  if rank == n and m > n then
    local d = bm - cd.matmul(a:astype(dt), x)
    res = (d * d):sum({ axis = 1 })
  else
    res = new({ 0 }, dt, x)
  end
  if b.ndim == 1 then x = x:reshape({ n }) end
  return x, res, rank, s
end

-- cd.linalg.pinv(a [, {rcond=, rtol=, hermitian=}]) -> a's pseudo-inverse (of each matrix of a stack) from its
-- SVD, singular values at most rcond * max(s) dropped: rcond 1e-15 by default, as NumPy 2's; rtol, NumPy 2's
-- other name, replaces it. hermitian is accepted as NumPy's hint; the general SVD runs.
function linalg.pinv(a, opts)
  local o = options(opts, { rcond = true, rtol = true, hermitian = true }, "pinv", 2)
  check_number(o.rcond, "rcond", "pinv", 2)
  check_boolean(o, "hermitian", "pinv", 2)
  check_number(o.rtol, "rtol", "pinv", 2)
  if o.rcond ~= nil and o.rtol ~= nil then argerror("pinv", 2, "give rcond or rtol, not both", 1) end
  local batch, _, m, n = matrix_shape(a, "pinv", 1, false)
  local dt = work_dtype(a, "pinv", 1)
  local rcond = o.rcond or o.rtol or 1e-15
  local u, s, vt = svd_parts(a, false, true, "pinv")
  local k = math.min(m, n)
  if k == 0 then return cd.zeros(with(batch, n, m), dt, { device = a.device }) end
  local cutoff = s:max({ axis = -1, keepdims = true }) * rcond
  local sinv = inverse_above(s, cutoff)
  -- V diag(1/s) U^T: V's columns scaled, then the product with U^T
  local v = cd.swapaxes(vt, -1, -2) * sinv:reshape(with(batch, 1, k))
  return cd.matmul(v, cd.swapaxes(u, -1, -2):contiguous())
end

-- ------------------------------------------------------------------------------------------ norm
local INF = math.huge

-- The 1-based axis ax of an array of nd dimensions, negative from the end, as 1..nd.
local function norm_axis(ax, nd, n)
  if math.type(ax) ~= "integer" then argerror("norm", n, "axis must be an integer or a table of two, got " ..
    typename(ax), 3) end
  local v = ax < 0 and nd + 1 + ax or ax
  if v < 1 or v > nd then
    argerror("norm", n, fmt("axis %d is out of range for an array of %d dimensions (1..%d, or -1..-%d)", ax, nd, nd,
      nd), 3)
  end
  return v
end

-- a Lua number or an array, as a float of dtype dt
local function sqrt_of(v) return type(v) == "number" and math.sqrt(v) or cd.sqrt(v) end

-- A vector norm of x (float) along axis ax (nil: all of x, a 1-d array).
local function vector_norm(x, ord, ax)
  local red = ax and { axis = ax } or nil
  if ord == nil or ord == 2 then return sqrt_of((x * x):sum(red)) end
  if ord == INF then return cd.abs(x):max(red) end
  if ord == -INF then return cd.abs(x):min(red) end
  if ord == 0 then return x:ne(0):astype(x.dtype):sum(red) end
  if ord == 1 then return cd.abs(x):sum(red) end
  return (cd.abs(x) ^ ord):sum(red) ^ (1 / ord)
end

-- x with axes r, c last (for the SVD's norms), contiguous
local function axes_last(x, r, c)
  local perm = {}
  for i = 1, x.ndim do if i ~= r and i ~= c then perm[#perm + 1] = i end end
  perm[#perm + 1], perm[#perm + 2] = r, c
  return x:transpose(perm):contiguous()
end

-- A matrix norm of x (float) over axes r, c (1-based, distinct).
local function matrix_norm(x, ord, r, c)
  if ord == 2 or ord == -2 or ord == "nuc" then   -- float16 refused by the SVD, as NumPy's
    local s = svd_parts(axes_last(x, r, c), false, false, "norm")
    local red = { axis = -1 }
    local v = ord == 2 and s:max(red) or ord == -2 and s:min(red) or s:sum(red)
    return v
  end
  if ord == nil or ord == "fro" then return cd.sqrt((x * x):sum({ axis = { r, c } })) end
  if ord == 1 or ord == -1 then
    local cols = cd.abs(x):sum({ axis = r })
    local cc = c > r and c - 1 or c
    return ord == 1 and cols:max({ axis = cc }) or cols:min({ axis = cc })
  end
  if ord == INF or ord == -INF then
    local rows = cd.abs(x):sum({ axis = c })
    local rr = r > c and r - 1 or r
    return ord == INF and rows:max({ axis = rr }) or rows:min({ axis = rr })
  end
  argerror("norm", 2, fmt("invalid norm order %s for matrices", tostring(ord)), 3)
end

-- v (a number or an array) with x's reduced axes kept as size 1
local function keep(v, x, axes)
  local s = {}
  for i, d in ipairs(x.shape) do s[i] = axes[i] and 1 or d end
  if type(v) == "number" then return cd.full(s, v, x.dtype, { device = x.device }) end
  return v:reshape(s)
end

-- cd.linalg.norm(x [, ord [, axis [, keepdims]]]) or norm(x, {ord=, axis=, keepdims=}): NumPy's norm. ord: nil,
-- "fro", "nuc", math.huge, -math.huge, 0, 1, -1, 2, -2 or any number for vectors; axis (1-based as every cudadev
-- axis): an integer (vector norms) or a table of two (matrix norms); nil takes a 1-d x as a vector, a 2-d x as a
-- matrix, and without ord any x as one long vector. A whole-array result is a Lua number unless keepdims.
function linalg.norm(x, ord, axis, keepdims)
  if type(ord) == "table" and not is_array(ord) then
    if axis ~= nil or keepdims ~= nil then argerror("norm", 3, "options are given in the table of argument #2", 1) end
    local o = check_opts(ord, { ord = true, axis = true, keepdims = true }, "norm", 2)
    ord, axis, keepdims = o.ord, o.axis, o.keepdims
  end
  if not is_array(x) then argerror("norm", 1, "Array expected, got " .. typename(x), 1) end
  if ord ~= nil and type(ord) ~= "number" and ord ~= "fro" and ord ~= "nuc" then
    argerror("norm", 2, "ord must be a number, \"fro\" or \"nuc\", got " .. (type(ord) == "string" and fmt("%q", ord)
      or typename(ord)), 1)
  end
  if keepdims ~= nil and type(keepdims) ~= "boolean" then
    argerror("norm", 4, "keepdims must be a boolean, got " .. typename(keepdims), 1)
  end
  if x.dtype ~= "float32" and x.dtype ~= "float64" and x.dtype ~= "float16" then x = x:astype("float64") end
  local nd = x.ndim
  local axes = {}
  if axis == nil then
    if ord == nil then   -- any x as one vector: sqrt(sum(x^2))
      local v = sqrt_of((x * x):sum())
      for i = 1, nd do axes[i] = true end
      return keepdims and keep(v, x, axes) or v
    end
    if nd ~= 1 and nd ~= 2 then argerror("norm", 1, "improper number of dimensions to norm (1 or 2 with ord)", 1) end
    axis = nd == 1 and 1 or { 1, 2 }
  end
  local v
  if type(axis) == "table" then
    if #axis ~= 2 then argerror("norm", 3, "axis must be an integer or a table of two", 1) end
    local r, c = norm_axis(axis[1], nd, 3), norm_axis(axis[2], nd, 3)
    if r == c then argerror("norm", 3, "duplicate axes given", 1) end
    axes[r], axes[c] = true, true
    v = matrix_norm(x, ord, r, c)
  else
    local ax = norm_axis(axis, nd, 3)
    if type(ord) == "string" then argerror("norm", 2, fmt("invalid norm order %q for vectors", ord), 1) end
    axes[ax] = true
    v = vector_norm(x, ord, nd == 1 and nil or ax)
  end
  if keepdims then return keep(v, x, axes) end
  if is_array(v) and v.ndim == 0 then return v[1] end
  return v
end
