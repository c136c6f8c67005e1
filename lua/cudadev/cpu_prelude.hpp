// cpu_prelude.hpp: CUDA's programming model on the host, for cudadev's cpu device.
//
// cudadev compiles a kernel source for the cpu device as one C++17 translation unit: this prelude, the
// user's source, and one extern "C" trampoline per kernel. The library embeds this file as the C string
// cdv_cpu_prelude. NOTE [cpu kernel ABI] in src/cpu.h: the structs and constants marked "ABI" below must
// match src/cpu.h.
//
// Not provided (refused at compile time with the construct's name): inline PTX asm, textures and surfaces,
// multi-grid sync, clusters, tensor-core intrinsics, dynamic parallelism. Cooperative groups: thread blocks,
// tiles (with cg::reduce) and the grid of a cooperative launch; no coalesced or dynamically sized groups. Rounding-mode suffixes
// (_rz, _ru, _rd) of arithmetic intrinsics round to nearest; fast-math intrinsics are the accurate functions.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <climits>
#include <cfloat>
#include <cmath>
#include <math.h>
#include <stdlib.h>
#include <time.h>
#include <limits>
#include <type_traits>
#include <utility>

// assert: glibc's assert() calls __assert_fail, which would print and abort the process. Renaming it before
// <assert.h> is read makes every assert, also one from a later #include <assert.h>, land in cdv_assert_fail.
#define __assert_fail cdv_assert_fail
#include <assert.h>

// exit: a kernel that calls exit() ends its launch process (the forked child). exit() would first run the
// atexit handlers it inherited from the parent, the CUDA driver's among them, which crash in a forked child
// on a GPU host; _exit ends the child at once, so the launch reports the exit status, not a SIGSEGV.
#include <unistd.h>
#define exit(code) _exit(code)

// What NVRTC defines, so sources take their device code paths. __CUDA_ARCH__ is 700: the cpu device has
// Volta's programming model (independent threads, *_sync intrinsics, double atomicAdd, __nanosleep), and
// code written for newer GPUs keeps its portable fallbacks (the guide's `#if __CUDA_ARCH__ < 600` atomicAdd
// for double would otherwise clash with the one below).
#define __CUDACC__ 1
#define __CUDACC_RTC__ 1
#define __CUDA_ARCH__ 700
#define __CUDADEV_CPU__ 1

// ---------------------------------------------------------------- qualifiers
#define __global__
#define __device__
#define __host__
#define __noinline__ __attribute__((noinline))
#define __forceinline__ inline __attribute__((always_inline))
#define __inline_hint__ inline
#define __launch_bounds__(...)
#define __maxnreg__(...)
#define __cluster_dims__(...)
#define __grid_constant__
#define __constant__
#define __managed__
#define __align__(n) __attribute__((aligned(n)))
#define __builtin_align__(n) __attribute__((aligned(n)))
#define __device_builtin__
#define __cudart_builtin__
#define CUDART_CB
// Shared memory is per block and a block runs entirely on one OS thread (all its fibers included), so a
// thread-local variable is per block. At block scope thread_local implies static, so `static __shared__`
// is fine too. `extern __shared__ T a[];` is rewritten by the compiler driver into a pointer to the
// block's dynamic shared memory.
#define __shared__ thread_local

// ---------------------------------------------------------------- vector types
struct dim3;
#define CDV_VEC(T, N, A2, A4)                                                                              \
  struct N##1 { T x; };                                                                                    \
  struct __attribute__((aligned(A2))) N##2 { T x, y; };                                                    \
  struct N##3 { T x, y, z; };                                                                              \
  struct __attribute__((aligned(A4))) N##4 { T x, y, z, w; };                                              \
  static inline N##1 make_##N##1(T x) { N##1 r; r.x = x; return r; }                                       \
  static inline N##2 make_##N##2(T x, T y) { N##2 r; r.x = x; r.y = y; return r; }                         \
  static inline N##3 make_##N##3(T x, T y, T z) { N##3 r; r.x = x; r.y = y; r.z = z; return r; }          \
  static inline N##4 make_##N##4(T x, T y, T z, T w) { N##4 r; r.x = x; r.y = y; r.z = z; r.w = w; return r; }
CDV_VEC(signed char, char, 2, 4)
CDV_VEC(unsigned char, uchar, 2, 4)
CDV_VEC(short, short, 4, 8)
CDV_VEC(unsigned short, ushort, 4, 8)
CDV_VEC(int, int, 8, 16)
CDV_VEC(unsigned int, uint, 8, 16)
CDV_VEC(long, long, 2 * sizeof(long), 16)
CDV_VEC(unsigned long, ulong, 2 * sizeof(long), 16)
CDV_VEC(long long, longlong, 16, 16)
CDV_VEC(unsigned long long, ulonglong, 16, 16)
CDV_VEC(float, float, 8, 16)
CDV_VEC(double, double, 16, 16)
#undef CDV_VEC

struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return uint3{x, y, z}; }
};

// ---------------------------------------------------------------- ABI (src/cpu.h)
#define CDV_CPU_ABI 3
#define CDV_CPU_MAX_PARAMS 128
#define CDV_CPU_STACK_LOG2 18
#define CDV_CPU_FHDR_SLOT 64
enum { CDV_CPU_RUN_THREAD = 0, CDV_CPU_RUN_BLOCK = 1 };
enum { CDV_CPU_BAR_SYNC = 0, CDV_CPU_BAR_COUNT = 1, CDV_CPU_BAR_AND = 2, CDV_CPU_BAR_OR = 3, CDV_CPU_BAR_GRID = 4,
       CDV_CPU_BAR_GRID_VALID = 5 };
enum { CDV_CPU_WARP_SYNC = 0, CDV_CPU_WARP_SHFL = 1, CDV_CPU_WARP_VOTE = 2 };
enum { CDV_CPU_FAIL_ASSERT = 1, CDV_CPU_FAIL_TRAP = 2, CDV_CPU_FAIL_MEMORY = 6 };

extern "C" {
struct cdv_cpu_ctx {
  uint3 bix;
  dim3 bdim, gdim;
  unsigned nthreads;
  void *dyn_shared;
  int (*barrier)(cdv_cpu_ctx *c, int kind, int pred);
  unsigned long long (*warp)(cdv_cpu_ctx *c, int kind, unsigned mask, unsigned long long v, int src);
  void (*fail)(cdv_cpu_ctx *c, int kind, const char *text, const char *file, unsigned line);
  const unsigned long long *extent;  // per parameter: the bytes of the Array passed, ~0 unknown (or NULL)
};
struct cdv_cpu_fhdr {
  uint3 tix;
  unsigned tid;
  cdv_cpu_ctx *ctx;
  void *fiber;
};
struct cdv_cpu_sig {
  unsigned n;
  unsigned w[CDV_CPU_MAX_PARAMS];   // size | alignment << 20 | is-pointer << 31
};
__attribute__((visibility("default"))) extern const int cdv_cpu_abi;
__attribute__((visibility("default"))) extern const int cdv_cpu_ctx_size;
__attribute__((visibility("default"))) extern const int cdv_cpu_fhdr_size;
const int cdv_cpu_abi = CDV_CPU_ABI;
const int cdv_cpu_ctx_size = (int)sizeof(cdv_cpu_ctx);
const int cdv_cpu_fhdr_size = (int)sizeof(cdv_cpu_fhdr);
}

// Every CUDA thread runs on a fiber stack aligned to 2^CDV_CPU_STACK_LOG2 bytes whose header sits near the
// top: the stack pointer alone finds it (NOTE [fiber stacks] in src/cpu.h). The asm is not volatile, so the
// compiler may compute it once per function.
static inline __attribute__((always_inline)) cdv_cpu_fhdr *cdv_hdr()
{
  uintptr_t sp;
#if defined(__x86_64__)
  __asm__("movq %%rsp, %0" : "=r"(sp));
#elif defined(__aarch64__)
  __asm__("mov %0, sp" : "=r"(sp));
#else
  sp = (uintptr_t)__builtin_frame_address(0);
#endif
  const uintptr_t size = (uintptr_t)1 << CDV_CPU_STACK_LOG2;
  uintptr_t base = sp & ~(size - 1);
  return (cdv_cpu_fhdr *)(base + size - CDV_CPU_FHDR_SLOT - ((base >> 12) & 0xFFC0));
}
static inline cdv_cpu_ctx *cdv_ctx() { return cdv_hdr()->ctx; }

#define threadIdx (static_cast<const uint3 &>(cdv_hdr()->tix))
#define blockIdx (static_cast<const uint3 &>(cdv_ctx()->bix))
#define blockDim (static_cast<const dim3 &>(cdv_ctx()->bdim))
#define gridDim (static_cast<const dim3 &>(cdv_ctx()->gdim))
static constexpr int warpSize = 32;

static inline void *cdv_dyn_shared() { return cdv_ctx()->dyn_shared; }

[[noreturn]] static inline void cdv_fail_here(int kind, const char *text, const char *file, unsigned line)
{
  cdv_cpu_ctx *c = cdv_ctx();
  c->fail(c, kind, text, file, line);
  __builtin_unreachable();
}
// (noreturn comes with glibc's declaration, which clang wants to be the only one to say it)
extern "C" void cdv_assert_fail(const char *expr, const char *file, unsigned int line, const char *func) noexcept
{
  (void)func;
  cdv_fail_here(CDV_CPU_FAIL_ASSERT, expr, file, line);
}
// NOTE [naming the thread] (src/cpu_run.c): a fast path's loop need not keep the thread's index in the header,
// so an assert or a trap puts the one it sees (threadIdx: in a loop of NOTE [fast paths], the loop's own) there
// as it fails. Expanded where it is written; costs nothing until it fails.
[[noreturn]] static inline void cdv_fail_at(int kind, const char *text, const char *file, unsigned line, uint3 t)
{
  cdv_hdr()->tix = t;
  cdv_fail_here(kind, text, file, line);
}
#undef __assert_fail
#define __assert_fail(expr, file, line, func) cdv_fail_at(CDV_CPU_FAIL_ASSERT, expr, file, line, threadIdx)
#define __trap() cdv_fail_at(CDV_CPU_FAIL_TRAP, "__trap() called", __FILE__, __LINE__, threadIdx)
#define __brkpt() cdv_fail_at(CDV_CPU_FAIL_TRAP, "__brkpt() called", __FILE__, __LINE__, threadIdx)

// ---------------------------------------------------------------- barriers and warps
static inline void __syncthreads() { cdv_cpu_ctx *c = cdv_ctx(); c->barrier(c, CDV_CPU_BAR_SYNC, 1); }
static inline int __syncthreads_count(int p) { cdv_cpu_ctx *c = cdv_ctx(); return c->barrier(c, CDV_CPU_BAR_COUNT, p); }
static inline int __syncthreads_and(int p) { cdv_cpu_ctx *c = cdv_ctx(); return c->barrier(c, CDV_CPU_BAR_AND, p); }
static inline int __syncthreads_or(int p) { cdv_cpu_ctx *c = cdv_ctx(); return c->barrier(c, CDV_CPU_BAR_OR, p); }
static inline void __barrier_sync(unsigned) { __syncthreads(); }

static inline unsigned cdv_laneid() { return cdv_hdr()->tid & 31u; }
// The lanes that exist in this thread's warp (the last warp of a block may be partial).
static inline unsigned cdv_warp_lanes()
{
  cdv_cpu_fhdr *h = cdv_hdr();
  unsigned first = h->tid & ~31u, n = h->ctx->nthreads - first;
  return n >= 32 ? 0xffffffffu : ((1u << n) - 1u);
}
static inline unsigned __activemask() { return cdv_warp_lanes(); }
static inline unsigned long long cdv_warp(int kind, unsigned mask, unsigned long long v, int src)
{
  cdv_cpu_ctx *c = cdv_ctx();
  return c->warp(c, kind, mask, v, src);
}
static inline void __syncwarp(unsigned mask = 0xffffffffu) { cdv_warp(CDV_CPU_WARP_SYNC, mask, 0, -1); }

// src: the absolute lane to read, or -1 for the caller's own value (CUDA's rule for lanes out of range).
template <class T> static inline T cdv_shfl(unsigned mask, T v, int src)
{
  static_assert(sizeof(T) <= 8, "warp shuffles move at most 8 bytes");
  unsigned long long bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  bits = cdv_warp(CDV_CPU_WARP_SHFL, mask, bits, src);
  T r;
  std::memcpy(&r, &bits, sizeof(T));
  return r;
}
static inline int cdv_width(int width) { return (width >= 1 && width <= 32 && !(width & (width - 1))) ? width : 32; }
enum { CDV_SHFL_IDX, CDV_SHFL_UP, CDV_SHFL_DOWN, CDV_SHFL_XOR };
// The absolute lane a shuffle of this kind reads for lane, or -1 for the caller's own value (CUDA's rule for
// lanes out of range); arg is the source lane, the delta or the lane mask.
static inline int cdv_shfl_src(int kind, int lane, long long arg, int width)
{
  int w = cdv_width(width);
  if (kind == CDV_SHFL_IDX) return (lane & ~(w - 1)) + ((int)arg & (w - 1));
  // NOTE [shuffle delta]: the delta's low five bits, as PTX's shfl.sync takes them (b[4:0]): on an H200 a
  // shuffle down by 33 moved by 1, and one by 2^32 - 1 by 31 (spec/94's far_shfl); past its width, a lane's own
  int b = (int)((unsigned)arg & 31u);
  if (kind == CDV_SHFL_UP) return (lane & (w - 1)) >= b ? lane - b : -1;
  if (kind == CDV_SHFL_DOWN) return (lane & (w - 1)) + b < w ? lane + b : -1;
  int src = lane ^ ((int)arg & 31);
  return (src & ~(w - 1)) > (lane & ~(w - 1)) ? -1 : src;
}
template <class T> static inline T __shfl_sync(unsigned mask, T v, int src_lane, int width = 32)
{
  return cdv_shfl(mask, v, cdv_shfl_src(CDV_SHFL_IDX, (int)cdv_laneid(), src_lane, width));
}
template <class T> static inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32)
{
  return cdv_shfl(mask, v, cdv_shfl_src(CDV_SHFL_UP, (int)cdv_laneid(), delta, width));
}
template <class T> static inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32)
{
  return cdv_shfl(mask, v, cdv_shfl_src(CDV_SHFL_DOWN, (int)cdv_laneid(), delta, width));
}
template <class T> static inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32)
{
  return cdv_shfl(mask, v, cdv_shfl_src(CDV_SHFL_XOR, (int)cdv_laneid(), lane_mask, width));
}
// NOTE [warp fission] (src/cpu_fission.c): a warp operation between two regions of a fission function. The
// region before stores the value of each thread that takes part in xs (and 1 in xp); the region after reads
// its source lane's, by cdv_shfl's group rule: the lane must have taken part and be in the mask. xp NULL:
// every thread of the block took part.
// Values of 4 bytes or less go through xs4, so that the reading loop is a gather of 32-bit values (vectorised).
template <class T> static inline void cdv_xput(unsigned long long *xs, unsigned *xs4, unsigned long t, T v)
{
  static_assert(sizeof(T) <= 8, "warp shuffles move at most 8 bytes");
  if (sizeof(T) <= 4) {
    unsigned b = 0;
    std::memcpy(&b, &v, sizeof(T));
    xs4[t] = b;
  } else {
    unsigned long long b = 0;
    std::memcpy(&b, &v, sizeof(T));
    xs[t] = b;
  }
}
// NOTE [exchange slack]: the exchange arrays have CDV_XSLACK slots before thread 0 and after the last thread, so
// that a shuffle up or down (by a delta below 32: NOTE [shuffle delta]) may load thread t - delta or t + delta
// whatever t is, and keep or drop the value after (a select): two plain loads at a fixed distance, which GCC
// vectorises where the gather of the general rule does not pay (reduce_warp in bench/cpu: 24 ms to 7.5 ms on
// 2 cores). The slack is zeroed once, and xp wholly, so that nothing read there is undefined (valgrind runs the
// cpu specs).
// NOTE [power-of-two modulus]: `x % m` in the fission regions, with x a name, is written cdv_umod(x, m): for
// unsigned operands, x & (m - 1) when m is a power of two (the same value), else x % m. m is mostly one value
// for the whole block (`tid % (2 * s) == 0` in NVIDIA's reduction kernel 0, s the barrier loop's counter), so
// GCC takes the test out of the thread loop, and the loop of & vectorises where the one of % (a division per
// thread) did not. Signed operands keep their %.
template <class A, class B> static inline auto cdv_umod(A a, B m) -> decltype(a % m)
{
  using C = decltype(a % m);
  if constexpr (std::is_unsigned<C>::value) {
    const C d = (C)m;
    return (d & (d - 1)) == 0 ? (C)((C)a & (d - 1)) : (C)((C)a % d);
  } else {
    return a % m;
  }
}
// NOTE [modulus stride] (src/cpu_fission.c): the step of a region's loop over x that visits the threads whose x is
// a multiple of m: m when it is 1 or more (at most 65536, past any block's x), else 1 (every thread, the if decides).
template <class M> static inline unsigned cdv_mstride(M m)
{
  return m >= (M)1 ? (m < (M)65536 ? (unsigned)m : 65536u) : 1u;
}

enum { CDV_XSLACK = 32 };
static inline void cdv_xinit(unsigned long long *xs, unsigned *xs4, unsigned char *xp, unsigned long nt)
{
  std::memset(xs, 0, CDV_XSLACK * sizeof *xs);
  std::memset(xs + CDV_XSLACK + nt, 0, CDV_XSLACK * sizeof *xs);
  std::memset(xs4, 0, CDV_XSLACK * sizeof *xs4);
  std::memset(xs4 + CDV_XSLACK + nt, 0, CDV_XSLACK * sizeof *xs4);
  std::memset(xp, 0, nt + 2 * CDV_XSLACK);
}
// t: the thread's index in the block; t32: the same as a 32-bit value computed from the region's own loop
// counters, so that the lane arithmetic of a vectorised loop stays 32-bit (from the 64-bit t, GCC widens and
// narrows every vector: 9.0 ms to 7.5 ms in reduce_warp).
template <class T>
static inline T cdv_xshfl(const unsigned long long *xs, const unsigned *xs4, const unsigned char *xp, unsigned long t,
                          unsigned t32, unsigned long nt, int kind, unsigned mask, long long arg, int width)
{
  T r;
  if ((kind == CDV_SHFL_DOWN || kind == CDV_SHFL_UP) && width == 32) { // see NOTE [exchange slack]
    unsigned dd = (unsigned)arg & 31u, lane = t32 & 31u; // see NOTE [shuffle delta]
    unsigned src_lane = kind == CDV_SHFL_DOWN ? lane + dd : lane - dd;
    // bitwise, not &&: no branch in the loop for GCC to turn into masked loads
    unsigned in = kind == CDV_SHFL_DOWN ? (src_lane < 32) & (t32 + dd < (unsigned)nt) : (lane >= dd);
    if (mask != ~0u) in &= (mask >> (src_lane & 31u)) & 1u;
    unsigned long s = kind == CDV_SHFL_DOWN ? t + dd : t - dd;
    if (xp) in &= xp[s] != 0;
    if (sizeof(T) <= 4) {
      unsigned a = xs4[s], b = xs4[t], v = in ? a : b;
      std::memcpy(&r, &v, sizeof(T));
    } else {
      unsigned long long a = xs[s], b = xs[t], v = in ? a : b;
      std::memcpy(&r, &v, sizeof(T));
    }
    return r;
  }
  // selects, not branches, so that the region's loop over the threads vectorises (a gather)
  // 64-bit indexes: affine in the region's thread index, and fit for a gather
  long base = (long)(t & ~31ul), s = cdv_shfl_src(kind, (int)(t & 31u), arg, width);
  long src = s >= 0 && s < 32 ? base + s : (long)t;
  src = src < (long)nt ? src : (long)t;
  unsigned ok = ((mask >> (src & 31)) & 1u) | (src == (long)t);
  if (xp) ok &= xp[src] != 0;
  if (sizeof(T) <= 4) { // an int index: AVX2's gather of 32-bit values takes 32-bit indexes
    unsigned b = xs4[ok ? (int)src : (int)t];
    std::memcpy(&r, &b, sizeof(T));
  } else {
    unsigned long long b = xs[ok ? src : t];
    std::memcpy(&r, &b, sizeof(T));
  }
  return r;
}
// NOTE [warp chains] (src/cpu_fission.c): one step of a chain on a whole warp's 32 values a (every lane takes
// part, the mask is full): each lane's operand is its source lane's value before the step, or its own where
// cdv_shfl_src gives none (the same lanes, for the kinds and widths a chain takes), then f(a[i], operand) as the
// statement `v op= shuffle` does it. K, B (the offset's low five bits) and W are constants: the selects fold
// away and the two loops are loads at fixed distances and vector operations.
static constexpr int cdv_wsrc(int kind, int lane, int b, int w)
{
  return kind == CDV_SHFL_UP     ? ((lane & (w - 1)) >= b ? lane - b : lane)
         : kind == CDV_SHFL_DOWN ? ((lane & (w - 1)) + b < w ? lane + b : lane)
                                 : (((lane ^ b) & ~(w - 1)) > (lane & ~(w - 1)) ? lane : lane ^ b);
}
// M: the lanes to update (NOTE [dead lanes]); the others keep their values.
template <int K, int B, int W, unsigned M = 0xffffffffu, class T, class F>
static inline __attribute__((always_inline)) void cdv_wstep(T *a, F f)
{
  static_assert(K != CDV_SHFL_IDX && B >= 0 && B < 32 && W >= 1 && W <= 32 && !(W & (W - 1)), "a chain's step");
  T s[32];
#pragma GCC unroll 32
  for (int i = 0; i < 32; i++) s[i] = a[cdv_wsrc(K, i, B, W)];
#pragma GCC unroll 32
  for (int i = 0; i < 32; i++)
    if ((M >> i) & 1u) f(a[i], s[i]);
}
// The lanes in M of a chain's values a back to v; the others are not read (see NOTE [dead lanes]).
template <unsigned M, class T> static inline __attribute__((always_inline)) void cdv_wstore(T *v, const T *a)
{
#pragma GCC unroll 32
  for (int i = 0; i < 32; i++)
    if ((M >> i) & 1u) v[i] = a[i];
}
// NOTE [warp skip]: a region inside a warp if loops over the threads of each row of x in chunks of 32 (a warp,
// for blocks of rows of a multiple of 32 threads), and skips a chunk whole when none of its threads runs the
// region: the regions of `if (w == 0)` over 256 threads test 8 chunks, not 256 threads, and what remains is
// a loop of 32 with a fixed bound. want: the flag value the region runs for (0 in an else). The flags are
// zeroed when the block starts, so that a chunk's flags are defined where some of its threads never evaluated
// them (nested ifs).
static inline int cdv_fany(const unsigned char *fl, unsigned long t0, unsigned n, unsigned char want)
{
  // flags are 0 or 1: a byte of w ^ flip is nonzero where that thread runs the region
  unsigned long long flip = want ? 0 : 0x0101010101010101ull, any = 0;
  if (n == 32) {
    unsigned long long w[4];
    std::memcpy(w, fl + t0, sizeof w);
    return ((w[0] ^ flip) | (w[1] ^ flip) | (w[2] ^ flip) | (w[3] ^ flip)) != 0;
  }
  for (unsigned i = 0; i < n; i++) any |= fl[t0 + i] == want;
  return any != 0;
}
// NOTE [full warps] (src/cpu_fission.c): do all 32 flags of a chunk say the thread runs the region?
static inline bool cdv_fall(const unsigned char *fl, unsigned long t0, unsigned char want)
{
  const unsigned long long all = want ? 0x0101010101010101ull : 0ull;
  unsigned long long w[4];
  std::memcpy(w, fl + t0, sizeof w);
  return ((w[0] ^ all) | (w[1] ^ all) | (w[2] ^ all) | (w[3] ^ all)) == 0;
}
// A vote as cdv_vote gives it: the ballot in the low half, the lanes that took part in the high half.
static inline unsigned long long cdv_xvote(const unsigned *xs4, const unsigned char *xp, unsigned t, unsigned nt,
                                           unsigned mask)
{
  unsigned base = t & ~31u, n = nt - base < 32 ? nt - base : 32, g = 1u << (t & 31u), ballot = 0;
  for (unsigned l = 0; l < n; l++)
    if ((!xp || xp[base + l]) && (mask >> l & 1u)) g |= 1u << l;
  for (unsigned l = 0; l < n; l++)
    if ((g >> l & 1u) && xs4[base + l]) ballot |= 1u << l;
  return ballot | (unsigned long long)g << 32;
}
static inline unsigned cdv_xballot(unsigned long long r) { return (unsigned)r; }
static inline int cdv_xany(unsigned long long r) { return (unsigned)r != 0; }
static inline int cdv_xall(unsigned long long r) { return (unsigned)r == (unsigned)(r >> 32); }
template <class T> static inline T __shfl(T v, int s, int w = 32) { return __shfl_sync(0xffffffffu, v, s, w); }
template <class T> static inline T __shfl_up(T v, unsigned d, int w = 32) { return __shfl_up_sync(0xffffffffu, v, d, w); }
template <class T> static inline T __shfl_down(T v, unsigned d, int w = 32) { return __shfl_down_sync(0xffffffffu, v, d, w); }
template <class T> static inline T __shfl_xor(T v, int m, int w = 32) { return __shfl_xor_sync(0xffffffffu, v, m, w); }

// A vote returns the ballot in the low half and the lanes that took part in the high half.
static inline unsigned long long cdv_vote(unsigned mask, int pred) { return cdv_warp(CDV_CPU_WARP_VOTE, mask, pred != 0, -1); }
static inline unsigned __ballot_sync(unsigned mask, int pred) { return (unsigned)cdv_vote(mask, pred); }
static inline int __any_sync(unsigned mask, int pred) { return (unsigned)cdv_vote(mask, pred) != 0; }
static inline int __all_sync(unsigned mask, int pred)
{
  unsigned long long r = cdv_vote(mask, pred);
  return (unsigned)r == (unsigned)(r >> 32);
}
static inline int __uni_sync(unsigned mask, int pred)
{
  unsigned long long r = cdv_vote(mask, pred);
  return (unsigned)r == 0 || (unsigned)r == (unsigned)(r >> 32);
}
static inline unsigned __ballot(int pred) { return __ballot_sync(0xffffffffu, pred); }
static inline int __any(int pred) { return __any_sync(0xffffffffu, pred); }
static inline int __all(int pred) { return __all_sync(0xffffffffu, pred); }

template <class T> static inline unsigned __match_any_sync(unsigned mask, T v)
{
  unsigned r = 0, m = mask & cdv_warp_lanes();
  for (int j = 0; j < 32; ++j)
    if ((m >> j) & 1u) {
      T o = __shfl_sync(mask, v, j);
      if (std::memcmp(&o, &v, sizeof(T)) == 0) r |= 1u << j;
    }
  return r;
}
template <class T> static inline unsigned __match_all_sync(unsigned mask, T v, int *pred)
{
  unsigned same = __match_any_sync(mask, v), m = mask & cdv_warp_lanes();
  *pred = same == m;
  return same == m ? m : 0u;
}
template <class T, class Op> static inline T cdv_reduce_sync(unsigned mask, T v, Op op)
{
  unsigned m = mask & cdv_warp_lanes();
  T r = v;
  bool first = true;
  for (int j = 0; j < 32; ++j)
    if ((m >> j) & 1u) {
      T o = __shfl_sync(mask, v, j);
      r = first ? o : op(r, o);
      first = false;
    }
  return r;
}
static inline unsigned __reduce_add_sync(unsigned m, unsigned v) { return cdv_reduce_sync(m, v, [](unsigned a, unsigned b) { return a + b; }); }
static inline int __reduce_add_sync(unsigned m, int v) { return cdv_reduce_sync(m, v, [](int a, int b) { return (int)((unsigned)a + (unsigned)b); }); }
static inline unsigned __reduce_min_sync(unsigned m, unsigned v) { return cdv_reduce_sync(m, v, [](unsigned a, unsigned b) { return a < b ? a : b; }); }
static inline int __reduce_min_sync(unsigned m, int v) { return cdv_reduce_sync(m, v, [](int a, int b) { return a < b ? a : b; }); }
static inline unsigned __reduce_max_sync(unsigned m, unsigned v) { return cdv_reduce_sync(m, v, [](unsigned a, unsigned b) { return a > b ? a : b; }); }
static inline int __reduce_max_sync(unsigned m, int v) { return cdv_reduce_sync(m, v, [](int a, int b) { return a > b ? a : b; }); }
static inline unsigned __reduce_and_sync(unsigned m, unsigned v) { return cdv_reduce_sync(m, v, [](unsigned a, unsigned b) { return a & b; }); }
static inline unsigned __reduce_or_sync(unsigned m, unsigned v) { return cdv_reduce_sync(m, v, [](unsigned a, unsigned b) { return a | b; }); }
static inline unsigned __reduce_xor_sync(unsigned m, unsigned v) { return cdv_reduce_sync(m, v, [](unsigned a, unsigned b) { return a ^ b; }); }

// ---------------------------------------------------------------- cooperative groups (block level)
// Thread blocks and tiles of up to 32 threads; grid and cluster groups are refused at compile time.
namespace cooperative_groups {
struct thread_block {
  void sync() const { __syncthreads(); }
  static void barrier_sync() { __syncthreads(); }
  unsigned thread_rank() const { return cdv_hdr()->tid; }
  unsigned size() const { return cdv_ctx()->nthreads; }
  unsigned num_threads() const { return size(); }
  dim3 group_index() const { return blockIdx; }
  dim3 thread_index() const { return threadIdx; }
  dim3 group_dim() const { return blockDim; }
  dim3 dim_threads() const { return blockDim; }
};
static inline thread_block this_thread_block() { return thread_block(); }
// The grid of a cooperative launch (cooperative = true): sync() waits for every thread of every block, each
// block running on its own worker thread (NOTE [cpu grid sync] in src/cpu_run.c).
struct grid_group {
  void sync() const { cdv_cpu_ctx *c = cdv_ctx(); c->barrier(c, CDV_CPU_BAR_GRID, 1); }
  static void barrier_sync() { grid_group().sync(); }
  bool is_valid() const { cdv_cpu_ctx *c = cdv_ctx(); return c->barrier(c, CDV_CPU_BAR_GRID_VALID, 0) != 0; }
  unsigned long long num_blocks() const
  {
    const cdv_cpu_ctx *c = cdv_ctx();
    return (unsigned long long)c->gdim.x * c->gdim.y * c->gdim.z;
  }
  unsigned long long block_rank() const
  {
    const cdv_cpu_ctx *c = cdv_ctx();
    return ((unsigned long long)c->bix.z * c->gdim.y + c->bix.y) * c->gdim.x + c->bix.x;
  }
  unsigned long long size() const { return num_blocks() * cdv_ctx()->nthreads; }
  unsigned long long num_threads() const { return size(); }
  unsigned long long thread_rank() const { return block_rank() * cdv_ctx()->nthreads + cdv_hdr()->tid; }
  dim3 group_dim() const { return gridDim; }
  dim3 dim_blocks() const { return gridDim; }
  dim3 block_index() const { return blockIdx; }
  dim3 group_index() const { return blockIdx; }
};
static inline grid_group this_grid() { return grid_group(); }
template <unsigned N> struct thread_block_tile {
  static_assert(N >= 1 && N <= 32 && !(N & (N - 1)), "tile sizes are powers of two up to 32");
  static unsigned base() { return cdv_laneid() & ~(N - 1); }
  static unsigned mask() { return (N == 32 ? 0xffffffffu : ((1u << N) - 1u) << base()) & cdv_warp_lanes(); }
  void sync() const { __syncwarp(mask()); }
  unsigned thread_rank() const { return cdv_laneid() & (N - 1); }
  static constexpr unsigned size() { return N; }
  static constexpr unsigned num_threads() { return N; }
  unsigned meta_group_rank() const { return cdv_hdr()->tid / N; }
  unsigned meta_group_size() const { return (cdv_ctx()->nthreads + N - 1) / N; }
  template <class T> T shfl(T v, int src) const { return __shfl_sync(mask(), v, src, (int)N); }
  template <class T> T shfl_down(T v, unsigned d) const { return __shfl_down_sync(mask(), v, d, (int)N); }
  template <class T> T shfl_up(T v, unsigned d) const { return __shfl_up_sync(mask(), v, d, (int)N); }
  template <class T> T shfl_xor(T v, int m) const { return __shfl_xor_sync(mask(), v, m, (int)N); }
  int any(int p) const { return __any_sync(mask(), p); }
  int all(int p) const { return __all_sync(mask(), p); }
  unsigned ballot(int p) const { return (__ballot_sync(mask(), p) >> base()) & (N == 32 ? 0xffffffffu : (1u << N) - 1u); }
};
template <unsigned N, class G> static inline thread_block_tile<N> tiled_partition(const G &) { return thread_block_tile<N>(); }
template <class G> static inline void sync(const G &g) { g.sync(); }
template <class T> struct plus { T operator()(T a, T b) const { return a + b; } };
template <class T> struct less { T operator()(T a, T b) const { return b < a ? b : a; } };
template <class T> struct greater { T operator()(T a, T b) const { return a < b ? b : a; } };
template <class T> struct bit_and { T operator()(T a, T b) const { return a & b; } };
template <class T> struct bit_or { T operator()(T a, T b) const { return a | b; } };
template <class T> struct bit_xor { T operator()(T a, T b) const { return a ^ b; } };
template <unsigned N, class T, class Op> static inline T reduce(const thread_block_tile<N> &g, T v, Op op)
{
  for (unsigned o = N / 2; o > 0; o >>= 1) v = op(v, g.shfl_xor(v, (int)o));
  return v;
}
}  // namespace cooperative_groups

// ---------------------------------------------------------------- fences, clocks, sleeping
static inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline long long cdv_clock()
{
#if defined(__x86_64__) || defined(__i386__)
  return (long long)__builtin_ia32_rdtsc();
#else
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
#endif
}
// <time.h> is already read, so the macro cannot break its declaration of the host's clock().
#define clock() ((clock_t)cdv_clock())
static inline long long clock64() { return cdv_clock(); }
static inline void __nanosleep(unsigned ns)
{
  struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
  nanosleep(&ts, nullptr);
}
static inline void __prof_trigger(int) {}

// ---------------------------------------------------------------- atomics
// CUDA's atomics are relaxed; sequential consistency costs nothing more on x86 and keeps the usual
// "__threadfence then atomic" patterns correct elsewhere.
#define CDV_MO __ATOMIC_SEQ_CST
template <class T, class Op> static inline T cdv_atomic_update(T *a, Op op)
{
  T old, nv;
  __atomic_load(a, &old, __ATOMIC_RELAXED);
  do {
    nv = op(old);
  } while (!__atomic_compare_exchange(a, &old, &nv, true, CDV_MO, __ATOMIC_RELAXED));
  return old;
}
#define CDV_ATOMIC_INT(T)                                                                                   \
  static inline T atomicAdd(T *a, T v) { return __atomic_fetch_add(a, v, CDV_MO); }                         \
  static inline T atomicExch(T *a, T v) { return __atomic_exchange_n(a, v, CDV_MO); }                       \
  static inline T atomicMin(T *a, T v) { return cdv_atomic_update(a, [v](T o) { return v < o ? v : o; }); } \
  static inline T atomicMax(T *a, T v) { return cdv_atomic_update(a, [v](T o) { return v > o ? v : o; }); } \
  static inline T atomicAnd(T *a, T v) { return __atomic_fetch_and(a, v, CDV_MO); }                         \
  static inline T atomicOr(T *a, T v) { return __atomic_fetch_or(a, v, CDV_MO); }                           \
  static inline T atomicXor(T *a, T v) { return __atomic_fetch_xor(a, v, CDV_MO); }                         \
  static inline T atomicCAS(T *a, T cmp, T v)                                                               \
  {                                                                                                         \
    __atomic_compare_exchange_n(a, &cmp, v, false, CDV_MO, CDV_MO);                                         \
    return cmp;                                                                                             \
  }
CDV_ATOMIC_INT(int)
CDV_ATOMIC_INT(unsigned int)
CDV_ATOMIC_INT(unsigned long long)
CDV_ATOMIC_INT(long long)
#undef CDV_ATOMIC_INT
static inline int atomicSub(int *a, int v) { return __atomic_fetch_sub(a, v, CDV_MO); }
static inline unsigned atomicSub(unsigned *a, unsigned v) { return __atomic_fetch_sub(a, v, CDV_MO); }
static inline unsigned short atomicCAS(unsigned short *a, unsigned short cmp, unsigned short v)
{
  __atomic_compare_exchange_n(a, &cmp, v, false, CDV_MO, CDV_MO);
  return cmp;
}
static inline unsigned atomicInc(unsigned *a, unsigned v) { return cdv_atomic_update(a, [v](unsigned o) { return o >= v ? 0u : o + 1u; }); }
static inline unsigned atomicDec(unsigned *a, unsigned v) { return cdv_atomic_update(a, [v](unsigned o) { return (o == 0u || o > v) ? v : o - 1u; }); }
static inline float atomicAdd(float *a, float v) { return cdv_atomic_update(a, [v](float o) { return o + v; }); }
static inline double atomicAdd(double *a, double v) { return cdv_atomic_update(a, [v](double o) { return o + v; }); }
static inline float atomicExch(float *a, float v) { float r; __atomic_exchange(a, &v, &r, CDV_MO); return r; }
static inline float atomicMin(float *a, float v) { return cdv_atomic_update(a, [v](float o) { return fminf(o, v); }); }
static inline float atomicMax(float *a, float v) { return cdv_atomic_update(a, [v](float o) { return fmaxf(o, v); }); }
static inline double atomicMin(double *a, double v) { return cdv_atomic_update(a, [v](double o) { return fmin(o, v); }); }
static inline double atomicMax(double *a, double v) { return cdv_atomic_update(a, [v](double o) { return fmax(o, v); }); }
#define atomicAdd_block atomicAdd
#define atomicAdd_system atomicAdd
#define atomicSub_block atomicSub
#define atomicSub_system atomicSub
#define atomicExch_block atomicExch
#define atomicExch_system atomicExch
#define atomicMin_block atomicMin
#define atomicMin_system atomicMin
#define atomicMax_block atomicMax
#define atomicMax_system atomicMax
#define atomicInc_block atomicInc
#define atomicInc_system atomicInc
#define atomicDec_block atomicDec
#define atomicDec_system atomicDec
#define atomicCAS_block atomicCAS
#define atomicCAS_system atomicCAS
#define atomicAnd_block atomicAnd
#define atomicAnd_system atomicAnd
#define atomicOr_block atomicOr
#define atomicOr_system atomicOr
#define atomicXor_block atomicXor
#define atomicXor_system atomicXor

// ---------------------------------------------------------------- loads and stores with cache hints
template <class T> static inline T __ldg(const T *p) { return *p; }
template <class T> static inline T __ldcg(const T *p) { return *p; }
template <class T> static inline T __ldca(const T *p) { return *p; }
template <class T> static inline T __ldcs(const T *p) { return *p; }
template <class T> static inline T __ldlu(const T *p) { return *p; }
template <class T> static inline T __ldcv(const T *p) { return *p; }
template <class T> static inline void __stwb(T *p, T v) { *p = v; }
template <class T> static inline void __stcg(T *p, T v) { *p = v; }
template <class T> static inline void __stcs(T *p, T v) { *p = v; }
template <class T> static inline void __stwt(T *p, T v) { *p = v; }

// ---------------------------------------------------------------- integer intrinsics
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
static inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
static inline unsigned min(int a, unsigned b) { return min((unsigned)a, b); }
static inline unsigned max(int a, unsigned b) { return max((unsigned)a, b); }
static inline unsigned min(unsigned a, int b) { return min(a, (unsigned)b); }
static inline unsigned max(unsigned a, int b) { return max(a, (unsigned)b); }
static inline long min(long a, long b) { return a < b ? a : b; }
static inline long max(long a, long b) { return a > b ? a : b; }
static inline unsigned long min(unsigned long a, unsigned long b) { return a < b ? a : b; }
static inline unsigned long max(unsigned long a, unsigned long b) { return a > b ? a : b; }
static inline long long min(long long a, long long b) { return a < b ? a : b; }
static inline long long max(long long a, long long b) { return a > b ? a : b; }
static inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
static inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
static inline float min(float a, float b) { return fminf(a, b); }
static inline float max(float a, float b) { return fmaxf(a, b); }
static inline double min(double a, double b) { return fmin(a, b); }
static inline double max(double a, double b) { return fmax(a, b); }
static inline double min(float a, double b) { return fmin(a, b); }
static inline double max(float a, double b) { return fmax(a, b); }
static inline double min(double a, float b) { return fmin(a, b); }
static inline double max(double a, float b) { return fmax(a, b); }
static inline unsigned umin(unsigned a, unsigned b) { return min(a, b); }
static inline unsigned umax(unsigned a, unsigned b) { return max(a, b); }
static inline long long llmin(long long a, long long b) { return min(a, b); }
static inline long long llmax(long long a, long long b) { return max(a, b); }
static inline unsigned long long ullmin(unsigned long long a, unsigned long long b) { return min(a, b); }
static inline unsigned long long ullmax(unsigned long long a, unsigned long long b) { return max(a, b); }

static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
static inline int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }
static inline unsigned __brev(unsigned x)
{
  x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
  x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
  x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
  return __builtin_bswap32(x);
}
static inline unsigned long long __brevll(unsigned long long x)
{
  return ((unsigned long long)__brev((unsigned)x) << 32) | __brev((unsigned)(x >> 32));
}
static inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s)
{
  unsigned long long v = ((unsigned long long)y << 32) | x;
  unsigned r = 0;
  for (int i = 0; i < 4; ++i) r |= (unsigned)((v >> (((s >> (4 * i)) & 7u) * 8)) & 0xffu) << (8 * i);
  return r;
}
static inline unsigned __funnelshift_l(unsigned lo, unsigned hi, unsigned s)
{
  return (unsigned)(((((unsigned long long)hi << 32) | lo) << (s & 31u)) >> 32);
}
static inline unsigned __funnelshift_lc(unsigned lo, unsigned hi, unsigned s)
{
  s = s > 32u ? 32u : s;
  return (unsigned)(((((unsigned long long)hi << 32) | lo) << s) >> 32);
}
static inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned s)
{
  return (unsigned)((((unsigned long long)hi << 32) | lo) >> (s & 31u));
}
static inline unsigned __funnelshift_rc(unsigned lo, unsigned hi, unsigned s)
{
  s = s > 32u ? 32u : s;
  return (unsigned)((((unsigned long long)hi << 32) | lo) >> s);
}
static inline int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
static inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
static inline long long __mul64hi(long long a, long long b) { return (long long)(((__int128)a * b) >> 64); }
static inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b)
{
  return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
static inline int __mul24(int a, int b) { return (int)((unsigned)((a << 8) >> 8) * (unsigned)((b << 8) >> 8)); }
static inline unsigned __umul24(unsigned a, unsigned b) { return (a & 0xffffffu) * (b & 0xffffffu); }
static inline int __hadd(int a, int b) { return (int)(((long long)a + b) >> 1); }
static inline int __rhadd(int a, int b) { return (int)(((long long)a + b + 1) >> 1); }
static inline unsigned __uhadd(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a + b) >> 1); }
static inline unsigned __urhadd(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a + b + 1) >> 1); }
static inline unsigned __sad(int x, int y, unsigned z) { return z + (unsigned)(x > y ? x - y : y - x); }
static inline unsigned __usad(unsigned x, unsigned y, unsigned z) { return z + (x > y ? x - y : y - x); }
static inline int __dp4a(int a, int b, int c)
{
  for (int i = 0; i < 4; ++i) c += (int)(signed char)(a >> (8 * i)) * (int)(signed char)(b >> (8 * i));
  return c;
}
static inline unsigned __dp4a(unsigned a, unsigned b, unsigned c)
{
  for (int i = 0; i < 4; ++i) c += ((a >> (8 * i)) & 0xffu) * ((b >> (8 * i)) & 0xffu);
  return c;
}

// ---------------------------------------------------------------- bit casts and conversions
template <class To, class From> static inline To cdv_bits(From f)
{
  static_assert(sizeof(To) == sizeof(From), "bit cast between different sizes");
  To t;
  std::memcpy(&t, &f, sizeof t);
  return t;
}
static inline float __int_as_float(int x) { return cdv_bits<float>(x); }
static inline int __float_as_int(float x) { return cdv_bits<int>(x); }
static inline float __uint_as_float(unsigned x) { return cdv_bits<float>(x); }
static inline unsigned __float_as_uint(float x) { return cdv_bits<unsigned>(x); }
static inline double __longlong_as_double(long long x) { return cdv_bits<double>(x); }
static inline long long __double_as_longlong(double x) { return cdv_bits<long long>(x); }
static inline int __double2hiint(double x) { return (int)(cdv_bits<unsigned long long>(x) >> 32); }
static inline int __double2loint(double x) { return (int)cdv_bits<unsigned long long>(x); }
static inline double __hiloint2double(int hi, int lo)
{
  return cdv_bits<double>(((unsigned long long)(unsigned)hi << 32) | (unsigned)lo);
}
// Float to integer as the GPU does it: saturating, NaN gives 0.
template <class I> static inline I cdv_f2i(double x)
{
  if (x != x) return 0;
  if (x <= (double)std::numeric_limits<I>::min()) return std::numeric_limits<I>::min();
  if (x >= (double)std::numeric_limits<I>::max()) return std::numeric_limits<I>::max();
  return (I)x;
}
#define CDV_F2I(name, I)                                                                                    \
  static inline I __float2##name##_rn(float x) { return cdv_f2i<I>(rint(x)); }                              \
  static inline I __float2##name##_rz(float x) { return cdv_f2i<I>(trunc(x)); }                             \
  static inline I __float2##name##_ru(float x) { return cdv_f2i<I>(ceil(x)); }                              \
  static inline I __float2##name##_rd(float x) { return cdv_f2i<I>(floor(x)); }                             \
  static inline I __double2##name##_rn(double x) { return cdv_f2i<I>(rint(x)); }                            \
  static inline I __double2##name##_rz(double x) { return cdv_f2i<I>(trunc(x)); }                           \
  static inline I __double2##name##_ru(double x) { return cdv_f2i<I>(ceil(x)); }                            \
  static inline I __double2##name##_rd(double x) { return cdv_f2i<I>(floor(x)); }
CDV_F2I(int, int)
CDV_F2I(uint, unsigned)
CDV_F2I(ll, long long)
CDV_F2I(ull, unsigned long long)
#undef CDV_F2I
#define CDV_I2F(name, I)                                                                                    \
  static inline float __##name##2float_rn(I x) { return (float)x; }                                         \
  static inline float __##name##2float_rz(I x) { return (float)x; }                                         \
  static inline float __##name##2float_ru(I x) { return (float)x; }                                         \
  static inline float __##name##2float_rd(I x) { return (float)x; }                                         \
  static inline double __##name##2double_rn(I x) { return (double)x; }                                      \
  static inline double __##name##2double_rz(I x) { return (double)x; }                                      \
  static inline double __##name##2double_ru(I x) { return (double)x; }                                      \
  static inline double __##name##2double_rd(I x) { return (double)x; }
CDV_I2F(int, int)
CDV_I2F(uint, unsigned)
CDV_I2F(ll, long long)
CDV_I2F(ull, unsigned long long)
#undef CDV_I2F
static inline float __double2float_rn(double x) { return (float)x; }
static inline float __double2float_rz(double x) { return (float)x; }
static inline float __double2float_ru(double x) { return (float)x; }
static inline float __double2float_rd(double x) { return (float)x; }

// ---------------------------------------------------------------- floating-point intrinsics
#define CDV_ROUNDINGS(body2, T, name)                                                                    \
  static inline T name##_rn(T a, T b) { return body2; }                                                     \
  static inline T name##_rz(T a, T b) { return body2; }                                                     \
  static inline T name##_ru(T a, T b) { return body2; }                                                     \
  static inline T name##_rd(T a, T b) { return body2; }
CDV_ROUNDINGS(a + b, float, __fadd)
CDV_ROUNDINGS(a - b, float, __fsub)
CDV_ROUNDINGS(a * b, float, __fmul)
CDV_ROUNDINGS(a / b, float, __fdiv)
CDV_ROUNDINGS(a + b, double, __dadd)
CDV_ROUNDINGS(a - b, double, __dsub)
CDV_ROUNDINGS(a * b, double, __dmul)
CDV_ROUNDINGS(a / b, double, __ddiv)
#undef CDV_ROUNDINGS
#define CDV_ROUNDINGS1(T, name, body)                                                                       \
  static inline T name##_rn(T x) { return body; }                                                           \
  static inline T name##_rz(T x) { return body; }                                                           \
  static inline T name##_ru(T x) { return body; }                                                           \
  static inline T name##_rd(T x) { return body; }
CDV_ROUNDINGS1(float, __frcp, 1.0f / x)
CDV_ROUNDINGS1(float, __fsqrt, sqrtf(x))
CDV_ROUNDINGS1(double, __drcp, 1.0 / x)
CDV_ROUNDINGS1(double, __dsqrt, sqrt(x))
#undef CDV_ROUNDINGS1
static inline float __frsqrt_rn(float x) { return 1.0f / sqrtf(x); }
#define CDV_FMA(T, name, f)                                                                                 \
  static inline T name##_rn(T a, T b, T c) { return f(a, b, c); }                                           \
  static inline T name##_rz(T a, T b, T c) { return f(a, b, c); }                                           \
  static inline T name##_ru(T a, T b, T c) { return f(a, b, c); }                                           \
  static inline T name##_rd(T a, T b, T c) { return f(a, b, c); }
CDV_FMA(float, __fmaf, fmaf)
CDV_FMA(float, __fmaf_ieee, fmaf)
CDV_FMA(double, __fma, fma)
#undef CDV_FMA
// glibc declares these names itself (without defining them), so they are spellings of the libm functions.
#define __expf expf
#define __exp10f exp10f
#define __logf logf
#define __log2f log2f
#define __log10f log10f
#define __sinf sinf
#define __cosf cosf
#define __tanf tanf
#define __sincosf sincosf
#define __powf powf
static inline float __fdividef(float a, float b) { return a / b; }
static inline float fdividef(float a, float b) { return a / b; }
static inline float __saturatef(float x) { return x > 0.0f ? (x < 1.0f ? x : 1.0f) : 0.0f; }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
static inline float rcbrtf(float x) { return 1.0f / cbrtf(x); }
static inline double rcbrt(double x) { return 1.0 / cbrt(x); }
static inline float sinpif(float x) { return sinf((float)M_PI * x); }
static inline float cospif(float x) { return cosf((float)M_PI * x); }
static inline double sinpi(double x) { return sin(M_PI * x); }
static inline double cospi(double x) { return cos(M_PI * x); }
static inline void sincospif(float x, float *s, float *c) { sincosf((float)M_PI * x, s, c); }
static inline void sincospi(double x, double *s, double *c) { sincos(M_PI * x, s, c); }
static inline float rhypotf(float x, float y) { return 1.0f / hypotf(x, y); }
static inline double rhypot(double x, double y) { return 1.0 / hypot(x, y); }
static inline float norm3df(float a, float b, float c) { return sqrtf(a * a + b * b + c * c); }
static inline float rnorm3df(float a, float b, float c) { return 1.0f / norm3df(a, b, c); }
static inline float norm4df(float a, float b, float c, float d) { return sqrtf(a * a + b * b + c * c + d * d); }
static inline float rnorm4df(float a, float b, float c, float d) { return 1.0f / norm4df(a, b, c, d); }
static inline double norm3d(double a, double b, double c) { return sqrt(a * a + b * b + c * c); }
static inline double rnorm3d(double a, double b, double c) { return 1.0 / norm3d(a, b, c); }
static inline double norm4d(double a, double b, double c, double d) { return sqrt(a * a + b * b + c * c + d * d); }
static inline double rnorm4d(double a, double b, double c, double d) { return 1.0 / norm4d(a, b, c, d); }
static inline float normf(int n, const float *a) { double s = 0; for (int i = 0; i < n; ++i) s += (double)a[i] * a[i]; return (float)sqrt(s); }
static inline float rnormf(int n, const float *a) { return 1.0f / normf(n, a); }
static inline double norm(int n, const double *a) { double s = 0; for (int i = 0; i < n; ++i) s += a[i] * a[i]; return sqrt(s); }
static inline double rnorm(int n, const double *a) { return 1.0 / norm(n, a); }
static inline double normcdf(double x) { return 0.5 * erfc(-x * M_SQRT1_2); }
static inline float normcdff(float x) { return (float)normcdf(x); }
// erfinv: Giles' single-precision approximation, refined by two Newton steps in double precision.
static inline double erfinv(double y)
{
  if (y <= -1.0) return y == -1.0 ? -HUGE_VAL : NAN;
  if (y >= 1.0) return y == 1.0 ? HUGE_VAL : NAN;
  double w = -log((1.0 - y) * (1.0 + y)), x;
  if (w < 5.0) {
    w -= 2.5;
    x = 2.81022636e-08; x = 3.43273939e-07 + x * w; x = -3.5233877e-06 + x * w; x = -4.39150654e-06 + x * w;
    x = 0.00021858087 + x * w; x = -0.00125372503 + x * w; x = -0.00417768164 + x * w;
    x = 0.246640727 + x * w; x = 1.50140941 + x * w;
  } else {
    w = sqrt(w) - 3.0;
    x = -0.000200214257; x = 0.000100950558 + x * w; x = 0.00134934322 + x * w; x = -0.00367342844 + x * w;
    x = 0.00573950773 + x * w; x = -0.0076224613 + x * w; x = 0.00943887047 + x * w;
    x = 1.00167406 + x * w; x = 2.83297682 + x * w;
  }
  x *= y;
  for (int i = 0; i < 2; ++i) x -= (erf(x) - y) / (2.0 / sqrt(M_PI) * exp(-x * x));
  return x;
}
static inline float erfinvf(float y) { return (float)erfinv(y); }
static inline double erfcinv(double y) { return erfinv(1.0 - y); }
static inline float erfcinvf(float y) { return (float)erfcinv(y); }
static inline double normcdfinv(double p) { return -M_SQRT2 * erfcinv(2.0 * p); }
static inline float normcdfinvf(float p) { return (float)normcdfinv(p); }
static inline double erfcx(double x)
{
  if (x < 25.0) return exp(x * x) * erfc(x);
  double r = 1.0 / (x * x);  // asymptotic series, where exp(x*x) would overflow
  return (1.0 / (x * sqrt(M_PI))) * (1.0 - 0.5 * r + 0.75 * r * r);
}
static inline float erfcxf(float x) { return (float)erfcx(x); }

// ---------------------------------------------------------------- half and bfloat16 (through float)
static inline unsigned short cdv_f2h(float f)
{
  unsigned x = cdv_bits<unsigned>(f), sign = (x >> 16) & 0x8000u, mant = x & 0x7fffffu;
  int e = (int)((x >> 23) & 0xffu) - 127 + 15;
  if (((x >> 23) & 0xffu) == 0xffu) return (unsigned short)(sign | 0x7c00u | (mant ? 0x200u | (mant >> 13) : 0u));
  if (e >= 31) return (unsigned short)(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return (unsigned short)sign;
    mant |= 0x800000u;
    unsigned shift = (unsigned)(14 - e), h = mant >> shift, rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) ++h;
    return (unsigned short)(sign | h);
  }
  unsigned h = ((unsigned)e << 10) | (mant >> 13), rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return (unsigned short)(sign | h);
}
static inline float cdv_h2f(unsigned short h)
{
  unsigned sign = (unsigned)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1fu) return cdv_bits<float>(sign | 0x7f800000u | (m << 13));
  if (e == 0) {
    if (!m) return cdv_bits<float>(sign);
    float v = (float)m * (1.0f / 16777216.0f);  // m * 2^-24
    return sign ? -v : v;
  }
  return cdv_bits<float>(sign | ((e + 112u) << 23) | (m << 13));
}
struct __half {
  unsigned short __x;
  __half() = default;
  __half(float f) : __x(cdv_f2h(f)) {}
  __half(double d) : __x(cdv_f2h((float)d)) {}
  __half(int i) : __x(cdv_f2h((float)i)) {}
  __half(unsigned i) : __x(cdv_f2h((float)i)) {}
  __half(long long i) : __x(cdv_f2h((float)i)) {}
  __half(unsigned long long i) : __x(cdv_f2h((float)i)) {}
  __half(short i) : __x(cdv_f2h((float)i)) {}
  __half(unsigned short i) : __x(cdv_f2h((float)i)) {}
  operator float() const { return cdv_h2f(__x); }
  __half &operator+=(__half o) { return *this = __half((float)*this + (float)o); }
  __half &operator-=(__half o) { return *this = __half((float)*this - (float)o); }
  __half &operator*=(__half o) { return *this = __half((float)*this * (float)o); }
  __half &operator/=(__half o) { return *this = __half((float)*this / (float)o); }
};
typedef __half half;
struct __half2 { __half x, y; };
typedef __half2 half2;
static inline __half cdv_hraw(unsigned short b) { __half h; h.__x = b; return h; }
static inline __half __float2half(float f) { return __half(f); }
static inline __half __float2half_rn(float f) { return __half(f); }
static inline __half __float2half_rz(float f) { return __half(f); }
static inline __half __double2half(double d) { return __half((float)d); }
static inline float __half2float(__half h) { return (float)h; }
static inline __half __int2half_rn(int i) { return __half((float)i); }
static inline int __half2int_rn(__half h) { return cdv_f2i<int>(rint((float)h)); }
static inline int __half2int_rz(__half h) { return cdv_f2i<int>(trunc((float)h)); }
static inline short __half_as_short(__half h) { return (short)h.__x; }
static inline unsigned short __half_as_ushort(__half h) { return h.__x; }
static inline __half __short_as_half(short s) { return cdv_hraw((unsigned short)s); }
static inline __half __ushort_as_half(unsigned short s) { return cdv_hraw(s); }
static inline __half __hadd(__half a, __half b) { return __half((float)a + (float)b); }
static inline __half __hsub(__half a, __half b) { return __half((float)a - (float)b); }
static inline __half __hmul(__half a, __half b) { return __half((float)a * (float)b); }
static inline __half __hdiv(__half a, __half b) { return __half((float)a / (float)b); }
static inline __half __hfma(__half a, __half b, __half c) { return __half(fmaf((float)a, (float)b, (float)c)); }
static inline __half __hneg(__half a) { return cdv_hraw((unsigned short)(a.__x ^ 0x8000u)); }
static inline __half __habs(__half a) { return cdv_hraw((unsigned short)(a.__x & 0x7fffu)); }
static inline __half __hmax(__half a, __half b) { return __half(fmaxf((float)a, (float)b)); }
static inline __half __hmin(__half a, __half b) { return __half(fminf((float)a, (float)b)); }
static inline bool __heq(__half a, __half b) { return (float)a == (float)b; }
static inline bool __hne(__half a, __half b) { return (float)a != (float)b; }
static inline bool __hlt(__half a, __half b) { return (float)a < (float)b; }
static inline bool __hle(__half a, __half b) { return (float)a <= (float)b; }
static inline bool __hgt(__half a, __half b) { return (float)a > (float)b; }
static inline bool __hge(__half a, __half b) { return (float)a >= (float)b; }
static inline bool __hisnan(__half a) { return (a.__x & 0x7fffu) > 0x7c00u; }
static inline int __hisinf(__half a) { return (a.__x & 0x7fffu) == 0x7c00u ? ((a.__x & 0x8000u) ? -1 : 1) : 0; }
static inline __half hsqrt(__half a) { return __half(sqrtf((float)a)); }
static inline __half hrsqrt(__half a) { return __half(1.0f / sqrtf((float)a)); }
static inline __half hexp(__half a) { return __half(expf((float)a)); }
static inline __half hlog(__half a) { return __half(logf((float)a)); }
static inline __half hsin(__half a) { return __half(sinf((float)a)); }
static inline __half hcos(__half a) { return __half(cosf((float)a)); }
static inline __half2 __halves2half2(__half a, __half b) { __half2 r; r.x = a; r.y = b; return r; }
static inline __half2 __floats2half2_rn(float a, float b) { return __halves2half2(__half(a), __half(b)); }
static inline __half2 __float2half2_rn(float a) { return __halves2half2(__half(a), __half(a)); }
static inline float2 __half22float2(__half2 h) { return make_float2((float)h.x, (float)h.y); }
static inline __half __low2half(__half2 h) { return h.x; }
static inline __half __high2half(__half2 h) { return h.y; }
static inline float __low2float(__half2 h) { return (float)h.x; }
static inline float __high2float(__half2 h) { return (float)h.y; }
static inline __half2 __hadd2(__half2 a, __half2 b) { return __halves2half2(__hadd(a.x, b.x), __hadd(a.y, b.y)); }
static inline __half2 __hsub2(__half2 a, __half2 b) { return __halves2half2(__hsub(a.x, b.x), __hsub(a.y, b.y)); }
static inline __half2 __hmul2(__half2 a, __half2 b) { return __halves2half2(__hmul(a.x, b.x), __hmul(a.y, b.y)); }
static inline __half2 __hfma2(__half2 a, __half2 b, __half2 c) { return __halves2half2(__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)); }
static inline __half atomicAdd(__half *a, __half v) { return cdv_atomic_update(a, [v](__half o) { return __hadd(o, v); }); }

struct __nv_bfloat16 {
  unsigned short __x;
  __nv_bfloat16() = default;
  __nv_bfloat16(float f)
  {
    unsigned x = cdv_bits<unsigned>(f);
    __x = (x & 0x7fffffffu) > 0x7f800000u ? (unsigned short)((x >> 16) | 0x40u)
                                           : (unsigned short)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
  }
  __nv_bfloat16(double d) : __nv_bfloat16((float)d) {}
  __nv_bfloat16(int i) : __nv_bfloat16((float)i) {}
  operator float() const { return cdv_bits<float>((unsigned)__x << 16); }
};
typedef __nv_bfloat16 nv_bfloat16;
static inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
static inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
static inline float __bfloat162float(__nv_bfloat16 b) { return (float)b; }

// ---------------------------------------------------------------- checked memory
// NOTE [checked memory] (src/cpu_checked.c): in checked mode the kernel's pointer parameters and pointer locals are
// cdv_chk<T>, a pointer that knows the Array it came from (its bytes [lo, hi)) and its parameter's position. Every
// element access through it (p[i], *p, p->m) is checked against that range; the first one outside fails the launch
// through ctx->fail. A cdv_chk made from a raw pointer (shared memory, a local array, a pointer not passed as an
// Array) has lo == 0 and checks nothing; a zero-initialised one is such a one too.
#ifdef CDV_CPU_CHECKED
[[noreturn]] __attribute__((noinline, cold)) static void cdv_chk_fail(uintptr_t lo, uintptr_t hi, uintptr_t a,
                                                                      unsigned size, int param, int store)
{
  // not on the stack: under ASan, a fiber stack keeps the poisoned shadow of frames an earlier failed launch left,
  // and snprintf's interceptor would take the stale shadow for an overflow of a buffer there
  static thread_local char t[256];
  long long off = (long long)(a - lo), elem = off >= 0 ? off / (long long)size : -((-off + size - 1) / size);
  unsigned long long len = hi - lo, out = off < 0 ? (unsigned long long)-off : a + size - hi;
  const char *op = store == 1 ? "store" : store == 2 ? "access" : "load";
  snprintf(t, sizeof t, "%s of %u byte%s at element %lld|%llu byte%s %s of its %llu bytes", op, size,
           size == 1 ? "" : "s", elem, out, out == 1 ? "" : "s", off < 0 ? "before the start" : "past the end", len);
  cdv_cpu_ctx *c = cdv_ctx();
  c->fail(c, CDV_CPU_FAIL_MEMORY, t, nullptr, (unsigned)param);
  __builtin_unreachable();
}
template <class T> struct cdv_chk;
template <class T> struct cdv_is_chk : std::false_type {};
template <class T> struct cdv_is_chk<cdv_chk<T>> : std::true_type {};
template <class T> struct cdv_chk {
  T *p;
  uintptr_t lo, hi;  // lo == 0: not checked
  int param;
  int store;  // what an access through this value is: 0 a load, 1 a store, 2 either (an address taken)
  cdv_chk() = default;
  cdv_chk(T *q) : p(q), lo(0), hi(0), param(0), store(0) {}
  cdv_chk(std::nullptr_t) : p(nullptr), lo(0), hi(0), param(0), store(0) {}
  cdv_chk(T *q, uintptr_t l, uintptr_t h, int i) : p(q), lo(l), hi(h), param(i), store(0) {}
  template <class U, class = typename std::enable_if<std::is_convertible<U *, T *>::value>::type>
  cdv_chk(const cdv_chk<U> &o) : p(o.p), lo(o.lo), hi(o.hi), param(o.param), store(0) {}
  cdv_chk with(T *q) const { return cdv_chk(q, lo, hi, param); }
  T *check(T *a, int how) const
  {
    if (lo) {
      constexpr unsigned size = sizeof(typename std::conditional<std::is_void<T>::value, char, T>::type);
      uintptr_t u = (uintptr_t)a;
      if (__builtin_expect(u < lo || u > hi || hi - u < size, 0)) cdv_chk_fail(lo, hi, u, size, param, how);
    }
    return a;
  }
  cdv_chk cdv_store() const { cdv_chk c = *this; c.store = 1; return c; }
  cdv_chk cdv_addr() const { cdv_chk c = *this; c.store = 2; return c; }
  template <class I, class = typename std::enable_if<std::is_integral<I>::value || std::is_enum<I>::value>::type>
  T &operator[](I i) const { return *check(p + i, store); }
  T &operator*() const { return *check(p, store); }
  T *operator->() const { return check(p, store); }
  operator T *() const { return p; }  // a raw pointer: unchecked from here (NOTE [checked memory])
  template <class U> explicit operator U *() const { return (U *)p; }
  template <class I, class = typename std::enable_if<std::is_integral<I>::value>::type>
  cdv_chk operator+(I i) const { return with(p + i); }
  template <class I, class = typename std::enable_if<std::is_integral<I>::value>::type>
  friend cdv_chk operator+(I i, const cdv_chk &c) { return c.with(c.p + i); }
  template <class I, class = typename std::enable_if<std::is_integral<I>::value>::type>
  cdv_chk operator-(I i) const { return with(p - i); }
  std::ptrdiff_t operator-(const cdv_chk &o) const { return p - o.p; }
  std::ptrdiff_t operator-(const T *o) const { return p - o; }
  template <class I> cdv_chk &operator+=(I i) { p += i; return *this; }
  template <class I> cdv_chk &operator-=(I i) { p -= i; return *this; }
  cdv_chk &operator++() { ++p; return *this; }
  cdv_chk &operator--() { --p; return *this; }
  cdv_chk operator++(int) { cdv_chk c = *this; ++p; return c; }
  cdv_chk operator--(int) { cdv_chk c = *this; --p; return c; }
  bool operator==(const cdv_chk &o) const { return p == o.p; }
  bool operator!=(const cdv_chk &o) const { return p != o.p; }
  bool operator<(const cdv_chk &o) const { return p < o.p; }
  bool operator<=(const cdv_chk &o) const { return p <= o.p; }
  bool operator>(const cdv_chk &o) const { return p > o.p; }
  bool operator>=(const cdv_chk &o) const { return p >= o.p; }
  bool operator==(const T *o) const { return p == o; }
  bool operator!=(const T *o) const { return p != o; }
  bool operator<(const T *o) const { return p < o; }
  bool operator<=(const T *o) const { return p <= o; }
  bool operator>(const T *o) const { return p > o; }
  bool operator>=(const T *o) const { return p >= o; }
};
// An argument of a function template that is no kernel (NOTE [checked memory]): a checked pointer goes in raw.
template <class T, class = typename std::enable_if<!cdv_is_chk<typename std::decay<T>::type>::value>::type>
static inline T &&cdv_raw(T &&v) { return static_cast<T &&>(v); }
template <class T> static inline T *cdv_raw(const cdv_chk<T> &c) { return c.p; }
// reinterpret_cast in a checked kernel (the rewriter renames it): a pointer cast of a checked pointer keeps its
// range (a float4 load from a float Array is checked for all its 16 bytes); anything else is the plain cast.
template <class To, class From, class = typename std::enable_if<!cdv_is_chk<typename std::decay<From>::type>::value>::type>
static inline To cdv_rcast(From &&f) { return reinterpret_cast<To>(f); }
template <class To, class T>
static inline typename std::enable_if<std::is_pointer<To>::value, cdv_chk<typename std::remove_pointer<To>::type>>::type
cdv_rcast(const cdv_chk<T> &f)
{
  return cdv_chk<typename std::remove_pointer<To>::type>(reinterpret_cast<To>(f.p), f.lo, f.hi, f.param);
}
template <class To, class T>
static inline typename std::enable_if<!std::is_pointer<To>::value, To>::type cdv_rcast(const cdv_chk<T> &f)
{
  return reinterpret_cast<To>(f.p);
}
#endif

// ---------------------------------------------------------------- trampolines
// One extern "C" trampoline per kernel calls cdv_run<KERNEL>: template argument deduction on the kernel's
// type unpacks the CUDA kernelParams array (args[i] points at the i-th argument), so no type is spelled.
// RUN_THREAD runs one thread (the runtime switches fibers between threads); RUN_BLOCK runs every thread of
// the block in a loop on one fiber, for kernels without barriers or warp intrinsics.
template <class T> using cdv_bare = typename std::remove_cv<typename std::remove_reference<T>::type>::type;

template <auto K, class... V> __attribute__((noinline, flatten)) void cdv_loop(cdv_cpu_ctx *c, V... v)
{
  cdv_cpu_fhdr *h = cdv_hdr();
  const unsigned bx = c->bdim.x, by = c->bdim.y, bz = c->bdim.z;
  unsigned tid = 0;
  for (unsigned z = 0; z < bz; ++z)
    for (unsigned y = 0; y < by; ++y)
      for (unsigned x = 0; x < bx; ++x) {
        h->tix.x = x;
        h->tix.y = y;
        h->tix.z = z;
        h->tid = tid++;
        K(v...);
      }
}
// An argument copied out of the caller's buffer, which need not be aligned for T (a float4, say).
template <class T> static inline T cdv_arg(const void *p)
{
  alignas(T) unsigned char b[sizeof(T)];
  std::memcpy(b, p, sizeof(T));
  return *reinterpret_cast<T *>(b);
}
// A parameter of type P from args[I]: cdv_parm<P>::raw is the type the caller passed (a checked
// pointer is passed as a raw one and takes its Array's extent from the launch: NOTE [checked memory]).
template <class P> struct cdv_parm {
  using raw = P;
  static P make(cdv_cpu_ctx *, const void *a, unsigned) { return cdv_arg<P>(a); }
};
#ifdef CDV_CPU_CHECKED
template <class T> struct cdv_parm<cdv_chk<T>> {
  using raw = T *;
  static cdv_chk<T> make(cdv_cpu_ctx *c, const void *a, unsigned i)
  {
    T *p = cdv_arg<T *>(a);
    unsigned long long n = c->extent ? c->extent[i] : ~0ull;
    if (n == ~0ull || !p) return cdv_chk<T>(p);
    return cdv_chk<T>(p, (uintptr_t)p, (uintptr_t)p + n, (int)i);
  }
};
#endif
template <auto K, class... P, std::size_t... I>
static inline void cdv_run2(void (*)(P...), cdv_cpu_ctx *c, void **a, int mode, std::index_sequence<I...>)
{
  (void)a;
  if (mode == CDV_CPU_RUN_THREAD)
    K(cdv_parm<cdv_bare<P>>::make(c, a[I], I)...);
  else
    cdv_loop<K, cdv_bare<P>...>(c, cdv_parm<cdv_bare<P>>::make(c, a[I], I)...);
}
template <auto K, class... P> static inline void cdv_run1(void (*k)(P...), cdv_cpu_ctx *c, void **a, int mode)
{
  cdv_run2<K>(k, c, a, mode, std::index_sequence_for<P...>{});
}
template <auto K> static inline void cdv_run(cdv_cpu_ctx *c, void **a, int mode) { cdv_run1<K>(K, c, a, mode); }
// NOTE [fast paths] (src/cpu_fission.c): K1 may assume blockIdx.x * blockDim.x + blockDim.x fits an int, and
// blockIdx.x < 2^20 (NOTE [block index bound]).
template <auto K1, auto K0> static inline void cdv_run_fis(cdv_cpu_ctx *c, void **a)
{
  if ((unsigned long long)c->bix.x * c->bdim.x <= 0x7ffffbffull && c->bix.x <= 0xfffffu)
    cdv_run1<K1>(K1, c, a, CDV_CPU_RUN_THREAD);
  else
    cdv_run1<K0>(K0, c, a, CDV_CPU_RUN_THREAD);
}

// The parameter list of a kernel as the runtime needs it (param_info, and which arguments are pointers).
template <class T> constexpr unsigned cdv_param_word()
{
  // a size that does not fit the 20-bit field is 0xfffff, "that or more" (CDV_PARAM_HUGE), never a wrapped one
  return (sizeof(T) < 0xfffffu ? (unsigned)sizeof(T) : 0xfffffu) | (unsigned)alignof(T) << 20 |
         (std::is_pointer<T>::value ? 1u << 31 : 0u);
}
template <class... P> constexpr cdv_cpu_sig cdv_sig_of(void (*)(P...))
{
  static_assert(sizeof...(P) <= CDV_CPU_MAX_PARAMS, "too many kernel parameters for the cpu device");
  return cdv_cpu_sig{(unsigned)sizeof...(P), {cdv_param_word<typename cdv_parm<cdv_bare<P>>::raw>()...}};
}
