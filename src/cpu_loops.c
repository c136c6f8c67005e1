/*
 * cpu_loops.c: the cpu device's built-in operations as loops compiled with the library (the backend's loop and
 * reduce operations), so that a + b, a:sum() or cd.sqrt(a) need no host compiler run.
 *
 * NOTE [cpu loops]: ops.lua's generated kernels (NOTE [generated kernels]) compute every built-in operation as
 *   z = (out type)(result's calc type)(expr of x, y in the calc type C)
 * with each operand first converted to C. These loops do the same in three steps over chunks of the output's
 * elements: each operand is converted into a buffer of C (a cast loop per dtype pair, strided), the operation
 * runs over the buffers (a loop per operation and calc type, contiguous, which gcc vectorises), and the result
 * is converted into the output (strided). An operand already of type C and contiguous is read in place, and a
 * contiguous output of the result's type is written in place. The expressions are ops.lua's, written again in
 * C (C's conversions, integer promotions and libm are the host compiler's for the kernels too, float16 goes
 * through float as cpu_prelude.hpp's __half does); spec/26-compute_spec.lua compares both paths over generated
 * inputs and edge values. Reductions (NOTE [reduction passes]) repeat the kernels' order of folding exactly: 256
 * lanes per block of a split, each folding every 256th element, then the tree, then the partials' pass, so a
 * float sum gives the kernel's bits. An operation this file does not have answers 1, and ops.lua compiles it.
 */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cpu.h"

/* The expressions are ops.lua's, written for every calc type: an unsigned y < 0 is false there too. */
#pragma GCC diagnostic ignored "-Wtype-limits"
#pragma GCC diagnostic ignored "-Wsign-compare"

/* cdv_dtypes is the front end's (args.c); a backend file has its own */
static const unsigned char dt_size[CDV_NDTYPES] = {
    [CDV_F16] = 2, [CDV_F32] = 4, [CDV_F64] = 8, [CDV_I8] = 1,  [CDV_I16] = 2, [CDV_I32] = 4,
    [CDV_I64] = 8, [CDV_U8] = 1,  [CDV_U16] = 2, [CDV_U32] = 4, [CDV_U64] = 8, [CDV_BOOL] = 1};
static const unsigned char dt_float[CDV_NDTYPES] = {[CDV_F16] = 1, [CDV_F32] = 1, [CDV_F64] = 1};
static const unsigned char dt_signed[CDV_NDTYPES] = {
    [CDV_F16] = 1, [CDV_F32] = 1, [CDV_F64] = 1, [CDV_I8] = 1, [CDV_I16] = 1, [CDV_I32] = 1, [CDV_I64] = 1};

#define CHUNK 1024 /* elements per step: the buffers stay in the L1 cache */
#define LANES 256 /* the reduction kernels' block (RBLOCK in ops.lua) */

/* ---------------------------------------------------------------- float16, as cpu_prelude.hpp's __half */
static uint16_t f2h(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u, mant = x & 0x7fffffu;
  int e = (int)((x >> 23) & 0xffu) - 127 + 15;
  if (((x >> 23) & 0xffu) == 0xffu) return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u | (mant >> 13) : 0u));
  if (e >= 31) return (uint16_t)(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return (uint16_t)sign;
    mant |= 0x800000u;
    uint32_t shift = (uint32_t)(14 - e), h = mant >> shift, rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) ++h;
    return (uint16_t)(sign | h);
  }
  uint32_t h = ((uint32_t)e << 10) | (mant >> 13), rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return (uint16_t)(sign | h);
}

static float h2f(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, b;
  float f;
  if (e == 0x1fu)
    b = sign | 0x7f800000u | (m << 13);
  else if (e == 0) {
    if (!m) {
      memcpy(&f, &sign, 4);
      return f;
    }
    float v = (float)m * (1.0f / 16777216.0f); /* m * 2^-24 */
    return sign ? -v : v;
  } else
    b = sign | ((e + 112u) << 23) | (m << 13);
  memcpy(&f, &b, 4);
  return f;
}

/* ---------------------------------------------------------------- casts: one loop per dtype pair */
/* The C type of each dtype but float16 (its bits, converted through float), as an X-macro: X(dtype, type) */
#define DTYPES(X)      \
  X(CDV_F32, float)    \
  X(CDV_F64, double)   \
  X(CDV_I8, int8_t)    \
  X(CDV_I16, int16_t)  \
  X(CDV_I32, int32_t)  \
  X(CDV_I64, int64_t)  \
  X(CDV_U8, uint8_t)   \
  X(CDV_U16, uint16_t) \
  X(CDV_U32, uint32_t) \
  X(CDV_U64, uint64_t) \
  X(CDV_BOOL, cbool)

typedef void (*cast_fn)(int64_t n, char *dst, int64_t ds, const char *src, int64_t ss);

typedef uint16_t half_bits;
typedef bool cbool; /* bool is a macro: not for names made with ## */

/* What an element is read as (STORE_x) and made of (NORM_x): a bool element is a byte, and any byte but 0 is true
 * (a bool array may hold other bytes: a:view("bool") of uint8, a file); reading it as _Bool would be undefined. */
#define STORE_float float
#define STORE_double double
#define STORE_int8_t int8_t
#define STORE_int16_t int16_t
#define STORE_int32_t int32_t
#define STORE_int64_t int64_t
#define STORE_uint8_t uint8_t
#define STORE_uint16_t uint16_t
#define STORE_uint32_t uint32_t
#define STORE_uint64_t uint64_t
#define STORE_cbool uint8_t
#define STORE_half_bits half_bits
#define NORM_float(v) (v)
#define NORM_double(v) (v)
#define NORM_int8_t(v) (v)
#define NORM_int16_t(v) (v)
#define NORM_int32_t(v) (v)
#define NORM_int64_t(v) (v)
#define NORM_uint8_t(v) (v)
#define NORM_uint16_t(v) (v)
#define NORM_uint32_t(v) (v)
#define NORM_uint64_t(v) (v)
#define NORM_cbool(v) ((v) != 0)
#define NORM_half_bits(v) (v)

/* dst[i * ds] = (TO)src[i * ss], strides in bytes; the contiguous case apart, for the vectoriser */
#define CAST(TO, FROM, CONV)                                                                      \
  static void cast_##TO##_##FROM(int64_t n, char *dst, int64_t ds, const char *src, int64_t ss) { \
    if (ds == (int64_t)sizeof(TO) && ss == (int64_t)sizeof(FROM)) {                               \
      TO *d = (TO *)(void *)dst;                                                                  \
      const STORE_##FROM *s = (const STORE_##FROM *)(const void *)src;                            \
      for (int64_t i = 0; i < n; i++) d[i] = CONV((FROM)NORM_##FROM(s[i]));                       \
      return;                                                                                     \
    }                                                                                             \
    for (int64_t i = 0; i < n; i++) {                                                             \
      STORE_##FROM v;                                                                             \
      memcpy(&v, src + i * ss, sizeof v);                                                         \
      TO r = CONV((FROM)NORM_##FROM(v));                                                          \
      memcpy(dst + i * ds, &r, sizeof r);                                                         \
    }                                                                                             \
  }
#define PLAIN(v) (v)
#define TO_HALF(v) f2h((float)(v))
#define HALF_TO_HALF(v) (v)

#define CAST_FROM(FROM_DT, FROM) \
  CAST(float, FROM, PLAIN)       \
  CAST(double, FROM, PLAIN)      \
  CAST(int8_t, FROM, PLAIN)      \
  CAST(int16_t, FROM, PLAIN)     \
  CAST(int32_t, FROM, PLAIN)     \
  CAST(int64_t, FROM, PLAIN)     \
  CAST(uint8_t, FROM, PLAIN)     \
  CAST(uint16_t, FROM, PLAIN)    \
  CAST(uint32_t, FROM, PLAIN)    \
  CAST(uint64_t, FROM, PLAIN)    \
  CAST(cbool, FROM, PLAIN)       \
  CAST(half_bits, FROM, TO_HALF)
DTYPES(CAST_FROM)
/* from float16: through float, as __half's operator float */
#define HALF_THEN(v) (h2f(v))
CAST(float, half_bits, HALF_THEN)
CAST(double, half_bits, HALF_THEN)
CAST(int8_t, half_bits, HALF_THEN)
CAST(int16_t, half_bits, HALF_THEN)
CAST(int32_t, half_bits, HALF_THEN)
CAST(int64_t, half_bits, HALF_THEN)
CAST(uint8_t, half_bits, HALF_THEN)
CAST(uint16_t, half_bits, HALF_THEN)
CAST(uint32_t, half_bits, HALF_THEN)
CAST(uint64_t, half_bits, HALF_THEN)
CAST(cbool, half_bits, HALF_THEN)
CAST(half_bits, half_bits, HALF_TO_HALF)

#define ROW(FROM)                                                                                       \
  {                                                                                                     \
    [CDV_F16] = cast_half_bits_##FROM, [CDV_F32] = cast_float_##FROM, [CDV_F64] = cast_double_##FROM,   \
    [CDV_I8] = cast_int8_t_##FROM, [CDV_I16] = cast_int16_t_##FROM, [CDV_I32] = cast_int32_t_##FROM,    \
    [CDV_I64] = cast_int64_t_##FROM, [CDV_U8] = cast_uint8_t_##FROM, [CDV_U16] = cast_uint16_t_##FROM,  \
    [CDV_U32] = cast_uint32_t_##FROM, [CDV_U64] = cast_uint64_t_##FROM, [CDV_BOOL] = cast_cbool_##FROM, \
  }
/* casts[from][to] */
static const cast_fn casts[CDV_NDTYPES][CDV_NDTYPES] = {
    [CDV_F16] = ROW(half_bits), [CDV_F32] = ROW(float),    [CDV_F64] = ROW(double),   [CDV_I8] = ROW(int8_t),
    [CDV_I16] = ROW(int16_t),   [CDV_I32] = ROW(int32_t),  [CDV_I64] = ROW(int64_t),  [CDV_U8] = ROW(uint8_t),
    [CDV_U16] = ROW(uint16_t),  [CDV_U32] = ROW(uint32_t), [CDV_U64] = ROW(uint64_t), [CDV_BOOL] = ROW(cbool),
};

/* ---------------------------------------------------------------- the operations, per calc type */
/* z[i] = (R)(expr of x = a[i], y = b[i]); bits: the promoted dtype's width (the shifts') */
typedef void (*op_fn)(int64_t n, const void *a, const void *b, const void *c, void *z, int bits);

/* z may be x itself (a:add_(b)): not restrict */
/* element i of p, a bool's byte read as one (any but 0 is true: see STORE_cbool); _Generic evaluates only the branch
 * of p's element type, so no bool is loaded from memory as a _Bool */
#define LD(p, i) _Generic((p)[0], bool : ((const unsigned char *)(const void *)(p))[i] != 0, default : (p)[i])

#define OP2W(name, T_, W_, R, expr)                                                                 \
  static void name(int64_t n, const void *av, const void *bv, const void *cv, void *zv, int bits) { \
    typedef T_ T;                                                                                   \
    typedef W_ W;                                                                                   \
    const T *a = av, *b = bv;                                                                       \
    R *z = zv;                                                                                      \
    (void)cv, (void)bits;                                                                           \
    for (int64_t i = 0; i < n; i++) {                                                               \
      T x = LD(a, i), y = LD(b, i);                                                                 \
      (void)x, (void)y, (void)sizeof(W);                                                            \
      z[i] = (R)(expr);                                                                             \
    }                                                                                               \
  }
#define OP2(name, T, R, expr) OP2W(name, T, T, R, expr)

/* the calc types: (suffix, type, its wrapping unsigned type) */
#define INTS(M, ...)                    \
  M(i, int32_t, uint32_t, __VA_ARGS__)  \
  M(u, uint32_t, uint32_t, __VA_ARGS__) \
  M(l, int64_t, uint64_t, __VA_ARGS__)  \
  M(q, uint64_t, uint64_t, __VA_ARGS__)
#define SINTS(M, ...)                  \
  M(i, int32_t, uint32_t, __VA_ARGS__) \
  M(l, int64_t, uint64_t, __VA_ARGS__)
#define UINTS(M, ...)                   \
  M(u, uint32_t, uint32_t, __VA_ARGS__) \
  M(q, uint64_t, uint64_t, __VA_ARGS__)
/* floats: (suffix, type, libm suffix) */
#define FLOATS(M, ...)        \
  M(f, float, f, __VA_ARGS__) \
  M(d, double, , __VA_ARGS__)

#define CAT3(a, b, c) a##b##c
#define FN(f, s) CAT3(f, s, )

/* same-type results */
#define I_SAME(s, T, W, name, expr) OP2W(name##_##s, T, W, T, expr)
#define F_SAME(s, T, L, name, expr) OP2(name##_##s, T, T, expr)

INTS(I_SAME, add, (W)x + (W)y)
INTS(I_SAME, sub, (W)x - (W)y)
INTS(I_SAME, mul, (W)x *(W)y)
FLOATS(F_SAME, add, x + y)
FLOATS(F_SAME, sub, x - y)
FLOATS(F_SAME, mul, x *y)
FLOATS(F_SAME, div, x / y)
OP2(add_b, bool, bool, x || y)
OP2(mul_b, bool, bool, x &&y)

UINTS(I_SAME, floordiv, y == 0 ? 0 : x / y)
SINTS(I_SAME, floordiv, y == 0 ? 0 : y == -1 ? (T)((W)0 - (W)x) : (x / y - ((x % y != 0) && ((x < 0) != (y < 0)))))
UINTS(I_SAME, mod, y == 0 ? 0 : x % y)
SINTS(I_SAME, mod, (y == 0 || y == -1) ? 0 : ((x % y != 0) && ((x % y < 0) != (y < 0))) ? x % y + y : x % y)
/* float // and %: ops.lua's _cdv_divmod (NumPy's npy_divmod) */
#define DIVMOD(s, T, L, name, unused)                \
  static inline T divmod_##s(T x, T y, T *mod) {     \
    T m = FN(fmod, L)(x, y);                         \
    if (!y) {                                        \
      *mod = m;                                      \
      return x / y;                                  \
    }                                                \
    T d = (x - m) / y;                               \
    if (m) {                                         \
      if ((y < 0) != (m < 0)) {                      \
        m += y;                                      \
        d -= 1;                                      \
      }                                              \
    } else                                           \
      m = FN(copysign, L)((T)0, y);                  \
    T q;                                             \
    if (d) {                                         \
      q = FN(floor, L)(d);                           \
      if (d - q > (T)0.5) q += 1;                    \
    } else                                           \
      q = FN(copysign, L)((T)0, x / y);              \
    *mod = m;                                        \
    return q;                                        \
  }                                                  \
  static inline T remainder_##s(T x, T y) {          \
    T m;                                             \
    divmod_##s(x, y, &m);                            \
    return m;                                        \
  }                                                  \
  OP2(floordiv_##s, T, T, divmod_##s(x, y, &(T){0})) \
  OP2(mod_##s, T, T, remainder_##s(x, y))
FLOATS(DIVMOD, , )
/* _cdv_ipow of ops.lua's HELPERS, in the wrapping type where T's products overflow */
#define IPOW(s, T, W, name, unused)                                        \
  static inline T ipow_##s(T x, T y) {                                     \
    if (y < 0) return x == 1 ? 1 : x == (T)-1 ? ((y & 1) ? (T)-1 : 1) : 0; \
    T r = 1;                                                               \
    for (; y; y >>= 1, x = (T)((W)x * (W)x))                               \
      if (y & 1) r = (T)((W)r * (W)x);                                     \
    return r;                                                              \
  }                                                                        \
  OP2(pow_##s, T, T, ipow_##s(x, y))
INTS(IPOW, , )
OP2(pow_f, float, float, powf(x, y))
OP2(pow_d, double, double, pow(x, y))
#define MINMAX(s, T, W, name, unused)   \
  OP2(minimum_##s, T, T, x < y ? x : y) \
  OP2(maximum_##s, T, T, x > y ? x : y)
INTS(MINMAX, , )
MINMAX(b, bool, bool, , )
#define FMINMAX(s, T, L, name, unused)              \
  OP2(minimum_##s, T, T, (x != x || x < y) ? x : y) \
  OP2(maximum_##s, T, T, (x != x || x > y) ? x : y)
FLOATS(FMINMAX, , )
/* atan2 and hypot: a float calc type its own libm function; integers and bool in double */
#define FBIN(s, T, L, name, unused)        \
  OP2(atan2_##s, T, T, FN(atan2, L)(x, y)) \
  OP2(hypot_##s, T, T, FN(hypot, L)(x, y))
FLOATS(FBIN, , )
#define DBIN(s, T, W, name, unused)                      \
  OP2(atan2_##s, T, double, atan2((double)x, (double)y)) \
  OP2(hypot_##s, T, double, hypot((double)x, (double)y))
INTS(DBIN, , )
DBIN(b, bool, bool, , )
#define BITS(s, T, W, name, unused)                        \
  OP2(band_##s, T, T, x &y)                                \
  OP2(bor_##s, T, T, x | y)                                \
  OP2(bxor_##s, T, T, x ^ y)                               \
  OP2(shl_##s, T, T, (y < 0 || y >= bits) ? 0 : (W)x << y) \
  OP2(shr_##s, T, T, (y < 0 || y >= bits) ? (x < 0 ? -1 : 0) : x >> y)
INTS(BITS, , )
OP2(band_b, bool, bool, x &&y)
OP2(bor_b, bool, bool, x || y)
OP2(bxor_b, bool, bool, x != y)
#define CMP(s, T, ...)         \
  OP2(eq_##s, T, bool, x == y) \
  OP2(ne_##s, T, bool, x != y) \
  OP2(lt_##s, T, bool, x < y)  \
  OP2(le_##s, T, bool, x <= y) \
  OP2(gt_##s, T, bool, x > y)  \
  OP2(ge_##s, T, bool, x >= y)
INTS(CMP, )
FLOATS(CMP, )
CMP(b, bool, )

/* unary: x = a[i] */
#define FUNARY(s, T, L, name, unused) OP2(name##_##s, T, T, FN(name, L)(x))
/* clang-format off */
#define MATH_FNS(M, s, T, L)                                                                                  \
  M(s, T, L, exp, ) M(s, T, L, exp2, ) M(s, T, L, expm1, ) M(s, T, L, log, ) M(s, T, L, log2, )            \
  M(s, T, L, log10, ) M(s, T, L, log1p, ) M(s, T, L, sqrt, ) M(s, T, L, cbrt, ) M(s, T, L, sin, )           \
  M(s, T, L, cos, ) M(s, T, L, tan, ) M(s, T, L, asin, ) M(s, T, L, acos, ) M(s, T, L, atan, )              \
  M(s, T, L, sinh, ) M(s, T, L, cosh, ) M(s, T, L, tanh, ) M(s, T, L, asinh, ) M(s, T, L, acosh, )          \
  M(s, T, L, atanh, ) M(s, T, L, floor, ) M(s, T, L, ceil, ) M(s, T, L, trunc, ) M(s, T, L, rint, )         \
  M(s, T, L, erf, ) M(s, T, L, erfc, )
/* clang-format on */
MATH_FNS(FUNARY, f, float, f)
MATH_FNS(FUNARY, d, double, )
#define FUN_OTHER(s, T, L, unused1, unused2)            \
  OP2(abs_##s, T, T, FN(fabs, L)(x))                    \
  OP2(negative_##s, T, T, -x)                           \
  OP2(sign_##s, T, T, x != x ? x : (x > 0) - (x < 0))   \
  OP2(square_##s, T, T, x *x)                           \
  OP2(isnan_##s, T, bool, x != x)                       \
  OP2(isinf_##s, T, bool, x == x && (x - x) != (x - x)) \
  OP2(isfinite_##s, T, bool, (x - x) == (x - x))        \
  OP2(logical_not_##s, T, bool, !x)
FLOATS(FUN_OTHER, , )
#define IUN_OTHER(s, T, W, unused1, unused2) \
  OP2(negative_##s, T, T, (T)(0 - (W)x))     \
  OP2(square_##s, T, T, (W)x *(W)x)          \
  OP2(isnan_##s, T, bool, false)             \
  OP2(isinf_##s, T, bool, false)             \
  OP2(isfinite_##s, T, bool, true)           \
  OP2(logical_not_##s, T, bool, !x)          \
  OP2(invert_##s, T, T, ~x)
INTS(IUN_OTHER, , )
OP2(abs_i, int32_t, int32_t, x < 0 ? (int32_t)(0 - (uint32_t)x) : x)
OP2(abs_l, int64_t, int64_t, x < 0 ? (int64_t)(0 - (uint64_t)x) : x)
OP2(abs_u, uint32_t, uint32_t, x)
OP2(abs_q, uint64_t, uint64_t, x)
OP2(abs_b, bool, bool, x)
OP2(sign_i, int32_t, int32_t, (x > 0) - (x < 0))
OP2(sign_l, int64_t, int64_t, (x > 0) - (x < 0))
OP2(sign_u, uint32_t, uint32_t, x > 0)
OP2(sign_q, uint64_t, uint64_t, x > 0)
OP2(sign_b, bool, bool, x)
OP2(square_b, bool, bool, x &&x) /* x * x of a bool */
OP2(isnan_b, bool, bool, false)
OP2(isinf_b, bool, bool, false)
OP2(isfinite_b, bool, bool, true)
OP2(logical_not_b, bool, bool, !x)
OP2(invert_b, bool, bool, !x)
/* floor, ceil and trunc of integers and bool keep the value */
#define KEEP(s, T, ...) OP2(keep_##s, T, T, x)
INTS(KEEP, )
KEEP(b, bool, )

/* a signed and an unsigned 64-bit integer compared exactly: ops.lua's _cdv_cmp (NOTE [exact comparisons]) */
static inline int cmp_su(int64_t s, uint64_t u) { return (s < 0 || (uint64_t)s < u) ? -1 : (uint64_t)s > u; }
static inline int cmp_us(uint64_t u, int64_t s) { return -cmp_su(s, u); }
#define MIXED(s, TX, TY, CMPF)     \
  MIXED1(eq_##s, TX, TY, CMPF, ==) \
  MIXED1(ne_##s, TX, TY, CMPF, !=) \
  MIXED1(lt_##s, TX, TY, CMPF, <)  \
  MIXED1(le_##s, TX, TY, CMPF, <=) \
  MIXED1(gt_##s, TX, TY, CMPF, >)  \
  MIXED1(ge_##s, TX, TY, CMPF, >=)
#define MIXED1(name, TX, TY, CMPF, OPR)                                                             \
  static void name(int64_t n, const void *av, const void *bv, const void *cv, void *zv, int bits) { \
    const TX *a = av;                                                                               \
    const TY *b = bv;                                                                               \
    bool *z = zv;                                                                                   \
    (void)cv, (void)bits;                                                                           \
    for (int64_t i = 0; i < n; i++) z[i] = CMPF(a[i], b[i]) OPR 0;                                  \
  }
MIXED(su, int64_t, uint64_t, cmp_su)
MIXED(us, uint64_t, int64_t, cmp_us)
/* [op - CDV_LOOP_EQ][x signed 0, unsigned 1] */
static const op_fn mixed_ops[6][2] = {{eq_su, eq_us}, {ne_su, ne_us}, {lt_su, lt_us},
                                      {le_su, le_us}, {gt_su, gt_us}, {ge_su, ge_us}};

/* where: a the condition (bool), b and c the values in the calc type */
#define WHERE(s, T, ...)                                                                                 \
  static void where_##s(int64_t n, const void *av, const void *bv, const void *cv, void *zv, int bits) { \
    const bool *restrict a = av;                                                                         \
    const T *restrict b = bv, *restrict c = cv;                                                          \
    T *restrict z = zv;                                                                                  \
    (void)bits;                                                                                          \
    for (int64_t i = 0; i < n; i++) z[i] = LD(a, i) ? LD(b, i) : LD(c, i);                               \
  }
INTS(WHERE, )
FLOATS(WHERE, )
WHERE(b, bool, )

/* One row of a table indexed [op][calc dtype]: the functions of op for each calc dtype (the loops' and the
 * reducers' tables share it). */
#define DTYPE_ROW(index, i, u, l, q, f, d, b) \
  [index] = {[CDV_I32] = i, [CDV_U32] = u, [CDV_I64] = l, [CDV_U64] = q, [CDV_F32] = f, [CDV_F64] = d, [CDV_BOOL] = b}
#define CALC_ROW(name, ...) DTYPE_ROW(CDV_LOOP_##name, __VA_ARGS__)
#define ALL7(name, op) CALC_ROW(name, op##_i, op##_u, op##_l, op##_q, op##_f, op##_d, op##_b)
#define INTS4(name, op, f, d, b) CALC_ROW(name, op##_i, op##_u, op##_l, op##_q, f, d, b)
#define FLT(name, op) CALC_ROW(name, NULL, NULL, NULL, NULL, op##_f, op##_d, NULL)

static const op_fn ops[CDV_LOOP_NOPS][CDV_NDTYPES] = {
    INTS4(ADD, add, add_f, add_d, add_b),
    INTS4(SUB, sub, sub_f, sub_d, NULL),
    INTS4(MUL, mul, mul_f, mul_d, mul_b),
    FLT(DIV, div), /* integer division is the generated kernel's (a zero divisor) */
    INTS4(FLOORDIV, floordiv, floordiv_f, floordiv_d, NULL),
    INTS4(MOD, mod, mod_f, mod_d, NULL),
    INTS4(POW, pow, pow_f, pow_d, NULL),
    ALL7(MINIMUM, minimum),
    ALL7(MAXIMUM, maximum),
    ALL7(ATAN2, atan2),
    ALL7(HYPOT, hypot),
    INTS4(BAND, band, NULL, NULL, band_b),
    INTS4(BOR, bor, NULL, NULL, bor_b),
    INTS4(BXOR, bxor, NULL, NULL, bxor_b),
    INTS4(SHL, shl, NULL, NULL, NULL),
    INTS4(SHR, shr, NULL, NULL, NULL),
    ALL7(EQ, eq),
    ALL7(NE, ne),
    ALL7(LT, lt),
    ALL7(LE, le),
    ALL7(GT, gt),
    ALL7(GE, ge),
    FLT(EXP, exp),
    FLT(EXP2, exp2),
    FLT(EXPM1, expm1),
    FLT(LOG, log),
    FLT(LOG2, log2),
    FLT(LOG10, log10),
    FLT(LOG1P, log1p),
    FLT(SQRT, sqrt),
    FLT(CBRT, cbrt),
    FLT(SIN, sin),
    FLT(COS, cos),
    FLT(TAN, tan),
    FLT(ASIN, asin),
    FLT(ACOS, acos),
    FLT(ATAN, atan),
    FLT(SINH, sinh),
    FLT(COSH, cosh),
    FLT(TANH, tanh),
    FLT(ASINH, asinh),
    FLT(ACOSH, acosh),
    FLT(ATANH, atanh),
    CALC_ROW(FLOOR, keep_i, keep_u, keep_l, keep_q, floor_f, floor_d, keep_b),
    CALC_ROW(CEIL, keep_i, keep_u, keep_l, keep_q, ceil_f, ceil_d, keep_b),
    CALC_ROW(TRUNC, keep_i, keep_u, keep_l, keep_q, trunc_f, trunc_d, keep_b),
    FLT(RINT, rint),
    FLT(ERF, erf),
    FLT(ERFC, erfc),
    ALL7(ABS, abs),
    INTS4(NEGATIVE, negative, negative_f, negative_d, NULL),
    ALL7(SIGN, sign),
    ALL7(SQUARE, square),
    ALL7(ISNAN, isnan),
    ALL7(ISINF, isinf),
    ALL7(ISFINITE, isfinite),
    ALL7(LOGICAL_NOT, logical_not),
    INTS4(INVERT, invert, NULL, NULL, invert_b),
    ALL7(WHERE, where),
};

/* ---------------------------------------------------------------- strided iteration */
/* Merges dimensions that every operand walks as one (stride[d] == stride[d + 1] * shape[d + 1]) and drops
 * dimensions of extent 1, so a contiguous call is one row. */
static int coalesce(int nd, int64_t *shape, cdv_loop_operand *ops_, int nops) {
  int m = 0;
  for (int d = 0; d < nd; d++) {
    if (shape[d] == 1) continue;
    int merge = m > 0;
    for (int k = 0; merge && k < nops; k++)
      if (ops_[k].stride[m - 1] != ops_[k].stride[d] * shape[d]) merge = 0;
    if (merge) {
      shape[m - 1] *= shape[d];
      for (int k = 0; k < nops; k++) ops_[k].stride[m - 1] = ops_[k].stride[d];
      continue;
    }
    shape[m] = shape[d];
    for (int k = 0; k < nops; k++) ops_[k].stride[m] = ops_[k].stride[d];
    m++;
  }
  if (m == 0) { /* one element */
    shape[0] = 1;
    for (int k = 0; k < nops; k++) ops_[k].stride[0] = 0;
    m = 1;
  }
  return m;
}

typedef struct buffers {
  _Alignas(64) char in[3][CHUNK * 8];
  _Alignas(64) char res[CHUNK * 8];
} buffers;

/* One row: n elements of each operand from its pointer p[k] with its last stride. */
static void run_row(const cdv_loop *l, op_fn f, char *const *p, const int64_t *st, int64_t n, buffers *b) {
  size_t rs = dt_size[l->res];
  for (int64_t i0 = 0; i0 < n; i0 += CHUNK) {
    int64_t m = n - i0 < CHUNK ? n - i0 : CHUNK;
    const void *x[3] = {NULL, NULL, NULL};
    for (int k = 0; k < l->nin; k++) {
      cdv_dtype want = l->op == CDV_LOOP_WHERE && k == 0 ? CDV_BOOL : k == 1 ? l->calc2 : l->calc;
      size_t es = dt_size[l->in[k].dtype];
      char *src = p[k + 1] + i0 * st[k + 1] * (int64_t)es;
      if (l->in[k].dtype == want && st[k + 1] == 1)
        x[k] = src;
      else {
        casts[l->in[k].dtype][want](m, b->in[k], (int64_t)dt_size[want], src, st[k + 1] * (int64_t)es);
        x[k] = b->in[k];
      }
    }
    if (l->nin == 1) x[1] = x[0]; /* a unary operation reads y too, unused */
    size_t os = dt_size[l->out.dtype];
    char *dst = p[0] + i0 * st[0] * (int64_t)os;
    if (l->out.dtype == l->res && st[0] == 1)
      f(m, x[0], x[1], x[2], dst, l->bits);
    else {
      f(m, x[0], x[1], x[2], b->res, l->bits);
      casts[l->res][l->out.dtype](m, dst, st[0] * (int64_t)os, b->res, (int64_t)rs);
    }
  }
}

static int copy_rows(cdv_loop *l, int nd, const int64_t *shape, buffers *b, op_fn f) {
  cdv_loop_operand *all[4] = {&l->out, &l->in[0], &l->in[1], &l->in[2]};
  int nops = l->nin + 1;
  int64_t idx[CDV_LOOP_MAXDIM] = {0};
  char *p[4];
  int64_t st[4];
  for (int k = 0; k < nops; k++) st[k] = all[k]->stride[nd - 1];
  for (;;) {
    for (int k = 0; k < nops; k++) {
      int64_t off = 0;
      for (int d = 0; d < nd - 1; d++) off += idx[d] * all[k]->stride[d];
      p[k] = all[k]->data + off * (int64_t)dt_size[all[k]->dtype];
    }
    if (f == NULL) { /* a copy: the same dtype, no calc type */
      size_t es = dt_size[l->out.dtype];
      casts[l->in[0].dtype][l->out.dtype](shape[nd - 1], p[0], st[0] * (int64_t)es, p[1], st[1] * (int64_t)es);
    } else
      run_row(l, f, p, st, shape[nd - 1], b);
    int d = nd - 2;
    while (d >= 0 && ++idx[d] == shape[d]) idx[d--] = 0;
    if (d < 0) return 0;
  }
}

int cdv_cpu_loop(cdv_device *d, const cdv_loop *req, void *stream, cdv_err *e) {
  (void)d, (void)stream;
  op_fn f = NULL;
  if (req->calc2 != req->calc) { /* only int64 against uint64, compared */
    int su = req->calc == CDV_I64 && req->calc2 == CDV_U64, us = req->calc == CDV_U64 && req->calc2 == CDV_I64;
    if (req->op < CDV_LOOP_EQ || req->op > CDV_LOOP_GE || !(su || us) || req->res != CDV_BOOL) return 1;
    f = mixed_ops[req->op - CDV_LOOP_EQ][us];
  } else if (req->op != CDV_LOOP_COPY) {
    if (req->op < 0 || req->op >= CDV_LOOP_NOPS || (f = ops[req->op][req->calc]) == NULL) return 1;
  } else if (req->in[0].dtype != req->out.dtype)
    return 1;
  cdv_loop l = *req;
  int64_t shape[CDV_LOOP_MAXDIM];
  for (int k = 0; k < l.nd; k++) {
    shape[k] = l.shape[k];
    if (shape[k] == 0) return 0;
  }
  cdv_loop_operand tmp[4] = {l.out, l.in[0], l.in[1], l.in[2]};
  int nd = coalesce(l.nd, shape, tmp, l.nin + 1);
  l.out = tmp[0], l.in[0] = tmp[1], l.in[1] = tmp[2], l.in[2] = tmp[3];
  buffers *b = aligned_alloc(64, sizeof *b);
  if (b == NULL) return cdv_fail(e, "cpu.loop", 12, "ENOMEM", "out of memory");
  copy_rows(&l, nd, shape, b, f);
  free(b);
  return 0;
}

/* ---------------------------------------------------------------- reductions (NOTE [reduction passes]) */
typedef int (*red_fn)(const cdv_reduce *q, const void *ident, void *fin);

/* The kernels' fold of one output's K elements: nsplit blocks of LANES lanes, lane t folding the block's
 * elements t, t + LANES, ... in order, then the tree; with nsplit > 1 the blocks' values folded the same way.
 * LOAD(buf, src, m, k) converts m elements (stride inner) into buf. fin[o] gets each output's value. */
#define REDUCER(name, R, RED, LOAD)                                                \
  static int name(const cdv_reduce *q, const void *identp, void *finv) {           \
    R ident, *fin = finv, *part = NULL;                                            \
    memcpy(&ident, identp, sizeof ident);                                          \
    int64_t K = q->K, inner = q->inner, ns = q->nsplit, chunk = (K + ns - 1) / ns; \
    size_t es = dt_size[q->in];                                                    \
    _Alignas(64) R lanes[LANES];                                                   \
    _Alignas(64) R buf[CHUNK];                                                     \
    if (ns > 1 && (part = malloc((size_t)ns * sizeof *part)) == NULL) return -1;   \
    for (int64_t o = 0; o < q->outer * inner; o++) {                               \
      int64_t ou = o / inner, io = o % inner;                                      \
      for (int64_t s = 0; s < ns; s++) {                                           \
        int64_t k0 = s * chunk, k1 = K - k0 < chunk ? K : k0 + chunk;              \
        for (int t = 0; t < LANES; t++) lanes[t] = ident;                          \
        for (int64_t k = k0; k < k1; k += CHUNK) {                                 \
          int64_t m = k1 - k < CHUNK ? k1 - k : CHUNK;                             \
          const char *src = q->x + ((ou * K + k) * inner + io) * (int64_t)es;      \
          LOAD(buf, src, m, k);                                                    \
          for (int64_t r = 0; r < m; r += LANES) {                                 \
            int lim = m - r < LANES ? (int)(m - r) : LANES;                        \
            for (int t = 0; t < lim; t++) {                                        \
              R a = lanes[t], b = buf[r + t];                                      \
              lanes[t] = RED;                                                      \
            }                                                                      \
          }                                                                        \
        }                                                                          \
        for (int w = LANES / 2; w > 0; w >>= 1)                                    \
          for (int t = 0; t < w; t++) {                                            \
            R a = lanes[t], b = lanes[t + w];                                      \
            lanes[t] = RED;                                                        \
          }                                                                        \
        if (ns == 1)                                                               \
          fin[o] = lanes[0];                                                       \
        else                                                                       \
          part[s] = lanes[0];                                                      \
      }                                                                            \
      if (ns == 1) continue;                                                       \
      for (int t = 0; t < LANES; t++) {                                            \
        lanes[t] = ident;                                                          \
        for (int64_t k = t; k < ns; k += LANES) {                                  \
          R a = lanes[t], b = part[k];                                             \
          lanes[t] = RED;                                                          \
        }                                                                          \
      }                                                                            \
      for (int w = LANES / 2; w > 0; w >>= 1)                                      \
        for (int t = 0; t < w; t++) {                                              \
          R a = lanes[t], b = lanes[t + w];                                        \
          lanes[t] = RED;                                                          \
        }                                                                          \
      fin[o] = lanes[0];                                                           \
    }                                                                              \
    free(part);                                                                    \
    return 0;                                                                      \
  }

#define LOAD_CAST(buf, src, m, k) casts[q->in][q->acc](m, (char *)buf, (int64_t)sizeof *buf, src, inner * (int64_t)es)

/* sum and mean (a + b), prod (a * b): integers in their wrapping type */
REDUCER(sum_l, int64_t, (int64_t)((uint64_t)a + (uint64_t)b), LOAD_CAST)
REDUCER(sum_q, uint64_t, a + b, LOAD_CAST)
REDUCER(sum_f, float, a + b, LOAD_CAST)
REDUCER(sum_d, double, a + b, LOAD_CAST)
REDUCER(prod_l, int64_t, (int64_t)((uint64_t)a *(uint64_t)b), LOAD_CAST)
REDUCER(prod_q, uint64_t, a *b, LOAD_CAST)
REDUCER(prod_f, float, a *b, LOAD_CAST)
REDUCER(prod_d, double, a *b, LOAD_CAST)
/* min and max: NaN wins */
#define RMINMAX(s, T, ...)                      \
  REDUCER(min_##s, T, a < b ? a : b, LOAD_CAST) \
  REDUCER(max_##s, T, a > b ? a : b, LOAD_CAST)
INTS(RMINMAX, )
RMINMAX(b, bool, )
#define RFMINMAX(s, T, ...)                                                     \
  REDUCER(min_##s, T, (a != a) ? a : (b != b) ? b : (a < b ? a : b), LOAD_CAST) \
  REDUCER(max_##s, T, (a != a) ? a : (b != b) ? b : (a > b ? a : b), LOAD_CAST)
FLOATS(RFMINMAX, )
REDUCER(all_b, bool, a &&b, LOAD_CAST)
REDUCER(any_b, bool, a || b, LOAD_CAST)

/* argmin and argmax: the value in the calc type and its position k along the reduced axis; _cdv_pick of
 * ops.lua (NaN first, then the extreme, then the lower position) */
#define LOAD_ARG(buf, src, m, k)                                                                \
  do {                                                                                          \
    casts[q->in][q->acc](m, (char *)&buf[0].v, (int64_t)sizeof *buf, src, inner * (int64_t)es); \
    for (int64_t j = 0; j < m; j++) buf[j].i = k + j;                                           \
  } while (0)
#define PICK(s, T, CMP)                                                                                    \
  ((a.v != a.v || b.v != b.v) ? ((a.v != a.v && b.v != b.v) ? (a.i <= b.i ? a : b) : (a.v != a.v ? a : b)) \
   : (b.v CMP a.v)            ? b                                                                          \
   : (a.v CMP b.v)            ? a                                                                          \
                              : (a.i <= b.i ? a : b))
#define RARG(s, T, ...)                                \
  typedef struct vi_##s {                              \
    T v;                                               \
    int64_t i;                                         \
  } vi_##s;                                            \
  REDUCER(argmin_##s, vi_##s, PICK(s, T, <), LOAD_ARG) \
  REDUCER(argmax_##s, vi_##s, PICK(s, T, >), LOAD_ARG)
INTS(RARG, )
FLOATS(RARG, )
RARG(b, bool, )

#define RED_ROW(name, ...) DTYPE_ROW(CDV_RED_##name, __VA_ARGS__)
static const red_fn reducers[CDV_RED_NOPS][CDV_NDTYPES] = {
    RED_ROW(SUM, NULL, NULL, sum_l, sum_q, sum_f, sum_d, NULL),
    RED_ROW(PROD, NULL, NULL, prod_l, prod_q, prod_f, prod_d, NULL),
    RED_ROW(MEAN, NULL, NULL, NULL, NULL, sum_f, sum_d, NULL),
    RED_ROW(MIN, min_i, min_u, min_l, min_q, min_f, min_d, min_b),
    RED_ROW(MAX, max_i, max_u, max_l, max_q, max_f, max_d, max_b),
    RED_ROW(ARGMIN, argmin_i, argmin_u, argmin_l, argmin_q, argmin_f, argmin_d, argmin_b),
    RED_ROW(ARGMAX, argmax_i, argmax_u, argmax_l, argmax_q, argmax_f, argmax_d, argmax_b),
    RED_ROW(ALL, NULL, NULL, NULL, NULL, NULL, NULL, all_b),
    RED_ROW(ANY, NULL, NULL, NULL, NULL, NULL, NULL, any_b),
};

/* The identity of op in the acc dtype, as ops.lua's (extreme() for min and max: of the input's dtype). */
static void identity(const cdv_reduce *q, int arg, char *out) {
  int64_t i = 0;
  double f = 0;
  int is_float = dt_float[q->in], high = q->op == CDV_RED_MIN || q->op == CDV_RED_ARGMIN;
  if (q->op == CDV_RED_PROD || q->op == CDV_RED_ALL)
    i = 1;
  else if (q->op != CDV_RED_SUM && q->op != CDV_RED_MEAN && q->op != CDV_RED_ANY) {
    int bits = dt_size[q->in] * 8;
    if (is_float)
      f = high ? INFINITY : -INFINITY;
    else if (q->in == CDV_BOOL)
      i = high;
    else if (!dt_signed[q->in])
      i = high ? -1 : 0; /* (calc)~0ull */
    else
      i = bits == 64 ? (high ? INT64_MAX : INT64_MIN)
          : high     ? ((int64_t)1 << (bits - 1)) - 1
                     : -((int64_t)1 << (bits - 1));
  }
  if (is_float && f != 0)
    casts[CDV_F64][q->acc](1, out, 0, (const char *)&f, 0);
  else
    casts[CDV_I64][q->acc](1, out, 0, (const char *)&i, 0);
  if (arg) { /* {v, INT64_MAX}: the struct's index after the value, at 8 bytes */
    int64_t big = INT64_MAX;
    memcpy(out + 8, &big, 8);
  }
}

int cdv_cpu_reduce(cdv_device *d, const cdv_reduce *q, void *stream, cdv_err *e) {
  (void)d, (void)stream;
  red_fn f = q->op >= 0 && q->op < CDV_RED_NOPS ? reducers[q->op][q->acc] : NULL;
  if (f == NULL) return 1;
  int arg = q->op == CDV_RED_ARGMIN || q->op == CDV_RED_ARGMAX;
  int64_t nout = q->outer * q->inner;
  size_t rs = arg ? 16 : dt_size[q->acc];
  _Alignas(16) char ident[16] = {0};
  identity(q, arg, ident);
  char *fin = malloc((size_t)nout * rs + 1);
  if (fin == NULL) return cdv_fail(e, "cpu.reduce", 12, "ENOMEM", "out of memory");
  if (f(q, ident, fin)) {
    free(fin);
    return cdv_fail(e, "cpu.reduce", 12, "ENOMEM", "out of memory");
  }
  if (arg)
    for (int64_t o = 0; o < nout; o++) {
      int64_t i;
      memcpy(&i, fin + o * 16 + 8, 8);
      i += 1; /* 1-based, as Lua counts */
      memcpy(q->y + o * 8, &i, 8);
    }
  else {
    if (q->op == CDV_RED_MEAN) /* y = (out)(a / (acc)K) */
      for (int64_t o = 0; o < nout; o++) {
        if (q->acc == CDV_F32)
          ((float *)(void *)fin)[o] /= (float)q->K;
        else
          ((double *)(void *)fin)[o] /= (double)q->K;
      }
    casts[q->acc][q->out](nout, q->y, dt_size[q->out], fin, (int64_t)rs);
  }
  free(fin);
  return 0;
}
