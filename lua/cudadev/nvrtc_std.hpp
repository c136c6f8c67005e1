// nvrtc_std.hpp: the C and C++ standard headers that CUDA code includes, for NVRTC, which ships none
// (`catastrophic error: cannot open source file "stdio.h"`). NOTE [nvrtc standard headers] in src/nvrtc_std.c.
//
// Each line "//// NAME" starts the text of header NAME; this comment, before the first, is no header. They
// declare what device code can use and NVRTC does not already declare by itself: printf, malloc/free,
// memcpy/memset and the C math functions are NVRTC's built-ins; these add the std:: names of them, the
// integer types, the limits, assert, and small <type_traits>, <utility> and <limits>. Host-only names (FILE,
// fopen, ...) are not declared: NVRTC's error names the identifier. The integer types are CCCL's under NVRTC
// (int64_t is long long), so <cuda/std/cstdint> and these can be included together. The cpu device never sees
// this file: g++ reads the system's headers. Version (part of the kernel cache's key with these bytes): 1
//// stddef.h
#pragma once
#ifndef NULL
#define NULL 0
#endif
#ifndef offsetof // NVRTC has no __builtin_offsetof: the address of the member of an object at 0
#define offsetof(type, member) ((size_t) & reinterpret_cast<const volatile char &>((((type *)0)->member)))
#endif
typedef decltype(nullptr) nullptr_t;
struct alignas(16) max_align_t {
  long long __cdv_a;
  double __cdv_b;
};
//// cstddef
#pragma once
#include <stddef.h>
namespace std {
using ::max_align_t;
using ::nullptr_t;
using ::ptrdiff_t;
using ::size_t;
enum class byte : unsigned char {};
}
//// stdint.h
#pragma once
#include <limits.h>
// as <limits.h>: CCCL's definitions first where they can be had; the types below are the same as its
#if __cplusplus >= 201703L && defined(__has_include)
#if __has_include(<cuda/std/cstdint>)
#include <cuda/std/cstdint>
#endif
#endif
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
typedef int8_t int_least8_t, int_fast8_t;
typedef int16_t int_least16_t, int_fast16_t;
typedef int32_t int_least32_t, int_fast32_t;
typedef int64_t int_least64_t, int_fast64_t, intptr_t, intmax_t;
typedef uint8_t uint_least8_t, uint_fast8_t;
typedef uint16_t uint_least16_t, uint_fast16_t;
typedef uint32_t uint_least32_t, uint_fast32_t;
typedef uint64_t uint_least64_t, uint_fast64_t, uintptr_t, uintmax_t;
#ifndef INT8_MIN
#define INT8_MIN (-127 - 1)
#define INT16_MIN (-32767 - 1)
#define INT32_MIN (-2147483647 - 1)
#define INT64_MIN (-9223372036854775807LL - 1)
#define INT8_MAX 127
#define INT16_MAX 32767
#define INT32_MAX 2147483647
#define INT64_MAX 9223372036854775807LL
#define UINT8_MAX 255
#define UINT16_MAX 65535
#define UINT32_MAX 4294967295U
#define UINT64_MAX 18446744073709551615ULL
#define INT_LEAST8_MIN INT8_MIN
#define INT_LEAST16_MIN INT16_MIN
#define INT_LEAST32_MIN INT32_MIN
#define INT_LEAST64_MIN INT64_MIN
#define INT_LEAST8_MAX INT8_MAX
#define INT_LEAST16_MAX INT16_MAX
#define INT_LEAST32_MAX INT32_MAX
#define INT_LEAST64_MAX INT64_MAX
#define UINT_LEAST8_MAX UINT8_MAX
#define UINT_LEAST16_MAX UINT16_MAX
#define UINT_LEAST32_MAX UINT32_MAX
#define UINT_LEAST64_MAX UINT64_MAX
#define INT_FAST8_MIN INT8_MIN
#define INT_FAST16_MIN INT16_MIN
#define INT_FAST32_MIN INT32_MIN
#define INT_FAST64_MIN INT64_MIN
#define INT_FAST8_MAX INT8_MAX
#define INT_FAST16_MAX INT16_MAX
#define INT_FAST32_MAX INT32_MAX
#define INT_FAST64_MAX INT64_MAX
#define UINT_FAST8_MAX UINT8_MAX
#define UINT_FAST16_MAX UINT16_MAX
#define UINT_FAST32_MAX UINT32_MAX
#define UINT_FAST64_MAX UINT64_MAX
#define INTPTR_MIN INT64_MIN
#define INTPTR_MAX INT64_MAX
#define UINTPTR_MAX UINT64_MAX
#define INTMAX_MIN INT64_MIN
#define INTMAX_MAX INT64_MAX
#define UINTMAX_MAX UINT64_MAX
#define PTRDIFF_MIN INT64_MIN
#define PTRDIFF_MAX INT64_MAX
#define SIZE_MAX UINT64_MAX
#define INT8_C(c) c
#define INT16_C(c) c
#define INT32_C(c) c
#define INT64_C(c) c##LL
#define UINT8_C(c) c
#define UINT16_C(c) c
#define UINT32_C(c) c##U
#define UINT64_C(c) c##ULL
#define INTMAX_C(c) c##LL
#define UINTMAX_C(c) c##ULL
#endif
//// cstdint
#pragma once
#include <stdint.h>
namespace std {
using ::int8_t;
using ::int16_t;
using ::int32_t;
using ::int64_t;
using ::uint8_t;
using ::uint16_t;
using ::uint32_t;
using ::uint64_t;
using ::int_least8_t;
using ::int_least16_t;
using ::int_least32_t;
using ::int_least64_t;
using ::uint_least8_t;
using ::uint_least16_t;
using ::uint_least32_t;
using ::uint_least64_t;
using ::int_fast8_t;
using ::int_fast16_t;
using ::int_fast32_t;
using ::int_fast64_t;
using ::uint_fast8_t;
using ::uint_fast16_t;
using ::uint_fast32_t;
using ::uint_fast64_t;
using ::intptr_t;
using ::uintptr_t;
using ::intmax_t;
using ::uintmax_t;
}
//// limits.h
#pragma once
// CCCL's <cuda/std/climits> defines these values under NVRTC without asking whether they are defined: where it
// can be included (C++17 and later, the toolkit's cccl folder on the path), its definitions serve, so that a
// later <cuda/std/...> (CUB includes them) redefines nothing; each group below only fills in what is missing.
#if __cplusplus >= 201703L && defined(__has_include)
#if __has_include(<cuda/std/climits>)
#include <cuda/std/climits>
#endif
#endif
#ifndef CHAR_BIT
#define CHAR_BIT 8
#endif
#ifndef SCHAR_MIN
#define SCHAR_MIN (-127 - 1)
#define SCHAR_MAX 127
#define UCHAR_MAX 255
#endif
#ifndef CHAR_MIN
#if '\xff' < 0
#define CHAR_MIN SCHAR_MIN
#define CHAR_MAX SCHAR_MAX
#else
#define CHAR_MIN 0
#define CHAR_MAX UCHAR_MAX
#endif
#endif
#ifndef SHRT_MIN
#define SHRT_MIN (-32767 - 1)
#define SHRT_MAX 32767
#define USHRT_MAX 65535
#endif
#ifndef INT_MIN
#define INT_MIN (-2147483647 - 1)
#define INT_MAX 2147483647
#define UINT_MAX 4294967295U
#endif
#ifndef LLONG_MIN
#define LLONG_MIN (-9223372036854775807LL - 1)
#define LLONG_MAX 9223372036854775807LL
#define ULLONG_MAX 18446744073709551615ULL
#endif
#ifndef LONG_MIN
#ifdef __LP64__
#define LONG_MIN (-9223372036854775807L - 1)
#define LONG_MAX 9223372036854775807L
#define ULONG_MAX 18446744073709551615UL
#else
#define LONG_MIN (-2147483647L - 1)
#define LONG_MAX 2147483647L
#define ULONG_MAX 4294967295UL
#endif
#endif
#ifndef MB_LEN_MAX
#define MB_LEN_MAX 16
#endif
//// climits
#pragma once
#include <limits.h>
//// float.h
#pragma once
#ifndef FLT_RADIX
#define FLT_RADIX 2
#define FLT_EVAL_METHOD 0
#define DECIMAL_DIG 17
#define FLT_DECIMAL_DIG 9
#define DBL_DECIMAL_DIG 17
#define FLT_MANT_DIG 24
#define DBL_MANT_DIG 53
#define FLT_DIG 6
#define DBL_DIG 15
#define FLT_MIN_EXP (-125)
#define DBL_MIN_EXP (-1021)
#define FLT_MIN_10_EXP (-37)
#define DBL_MIN_10_EXP (-307)
#define FLT_MAX_EXP 128
#define DBL_MAX_EXP 1024
#define FLT_MAX_10_EXP 38
#define DBL_MAX_10_EXP 308
#define FLT_MAX 3.40282347e+38F
#define DBL_MAX 1.7976931348623157e+308
#define FLT_MIN 1.17549435e-38F
#define DBL_MIN 2.2250738585072014e-308
#define FLT_EPSILON 1.19209290e-07F
#define DBL_EPSILON 2.2204460492503131e-16
#define FLT_TRUE_MIN 1.40129846e-45F
#define DBL_TRUE_MIN 4.9406564584124654e-324
#endif
//// cfloat
#pragma once
#include <float.h>
//// stdio.h
#pragma once
// printf is NVRTC's own (device printf); FILE, fopen and the other host functions stay undeclared
#include <stddef.h>
#ifndef EOF
#define EOF (-1)
#endif
//// cstdio
#pragma once
#include <stdio.h>
namespace std {
using ::printf;
using ::size_t;
}
//// stdlib.h
#pragma once
// malloc, free (the device heap), abs, labs and llabs are NVRTC's own
#include <stddef.h>
#ifndef EXIT_SUCCESS
#define EXIT_SUCCESS 0
#define EXIT_FAILURE 1
#endif
//// cstdlib
#pragma once
#include <stdlib.h>
namespace std {
using ::abs;
using ::free;
using ::labs;
using ::llabs;
using ::malloc;
using ::size_t;
}
//// string.h
#pragma once
// memcpy and memset are NVRTC's own
#include <stddef.h>
//// cstring
#pragma once
#include <string.h>
namespace std {
using ::memcpy;
using ::memset;
using ::size_t;
}
//// math.h
#pragma once
// the functions are NVRTC's own (float and double overloads); the constants glibc's <math.h> gives
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#define NAN __int_as_float(0x7fffffff)
#define HUGE_VALF INFINITY
#define HUGE_VAL __longlong_as_double(0x7ff0000000000000LL)
#endif
#ifndef M_PI
#define M_E 2.7182818284590452354
#define M_LOG2E 1.4426950408889634074
#define M_LOG10E 0.43429448190325182765
#define M_LN2 0.69314718055994530942
#define M_LN10 2.30258509299404568402
#define M_PI 3.14159265358979323846
#define M_PI_2 1.57079632679489661923
#define M_PI_4 0.78539816339744830962
#define M_1_PI 0.31830988618379067154
#define M_2_PI 0.63661977236758134308
#define M_2_SQRTPI 1.12837916709551257390
#define M_SQRT2 1.41421356237309504880
#define M_SQRT1_2 0.70710678118654752440
#endif
//// cmath
#pragma once
#include <math.h>
namespace std {
using ::abs;
using ::acos;
using ::acosh;
using ::asin;
using ::asinh;
using ::atan;
using ::atan2;
using ::atanh;
using ::cbrt;
using ::ceil;
using ::copysign;
using ::cos;
using ::cosh;
using ::erf;
using ::erfc;
using ::exp;
using ::exp2;
using ::expm1;
using ::fabs;
using ::fdim;
using ::floor;
using ::fma;
using ::fmax;
using ::fmin;
using ::fmod;
using ::frexp;
using ::hypot;
using ::ilogb;
using ::isfinite;
using ::isinf;
using ::isnan;
using ::ldexp;
using ::lgamma;
using ::llrint;
using ::llround;
using ::log;
using ::log10;
using ::log1p;
using ::log2;
using ::logb;
using ::lrint;
using ::lround;
using ::modf;
using ::nearbyint;
using ::nextafter;
using ::pow;
using ::remainder;
using ::rint;
using ::round;
using ::scalbn;
using ::signbit;
using ::sin;
using ::sinh;
using ::sqrt;
using ::tan;
using ::tanh;
using ::tgamma;
using ::trunc;
using ::sqrtf;
using ::expf;
using ::logf;
using ::powf;
using ::fabsf;
using ::floorf;
using ::ceilf;
using ::sinf;
using ::cosf;
using ::tanhf;
using ::fmaf;
using ::fminf;
using ::fmaxf;
}
//// assert.h
// no include guard: each inclusion follows NDEBUG anew, as the C standard asks
#undef assert
#ifdef NDEBUG
#define assert(e) ((void)0)
#else
#define assert(e) ((e) ? (void)0 : __assertfail(#e, __FILE__, __LINE__, __func__, sizeof(char)))
#endif
//// cassert
#include <assert.h>
//// type_traits
#pragma once
#include <stddef.h>
namespace std {
template <class T, T v>
struct integral_constant {
  static constexpr T value = v;
  typedef T value_type;
  typedef integral_constant type;
  __host__ __device__ constexpr operator value_type() const noexcept { return value; }
  __host__ __device__ constexpr value_type operator()() const noexcept { return value; }
};
template <bool B>
using bool_constant = integral_constant<bool, B>;
typedef bool_constant<true> true_type;
typedef bool_constant<false> false_type;

template <class T, class U> struct is_same : false_type {};
template <class T> struct is_same<T, T> : true_type {};
template <bool B, class T = void> struct enable_if {};
template <class T> struct enable_if<true, T> { typedef T type; };
template <bool B, class T, class F> struct conditional { typedef T type; };
template <class T, class F> struct conditional<false, T, F> { typedef F type; };
template <class T> struct type_identity { typedef T type; };

template <class T> struct remove_const { typedef T type; };
template <class T> struct remove_const<const T> { typedef T type; };
template <class T> struct remove_volatile { typedef T type; };
template <class T> struct remove_volatile<volatile T> { typedef T type; };
template <class T> struct remove_cv { typedef typename remove_volatile<typename remove_const<T>::type>::type type; };
template <class T> struct remove_reference { typedef T type; };
template <class T> struct remove_reference<T &> { typedef T type; };
template <class T> struct remove_reference<T &&> { typedef T type; };
template <class T> struct remove_cvref { typedef typename remove_cv<typename remove_reference<T>::type>::type type; };
template <class T> struct remove_pointer { typedef T type; };
template <class T> struct remove_pointer<T *> { typedef T type; };
template <class T> struct remove_pointer<T *const> { typedef T type; };
template <class T> struct remove_pointer<T *volatile> { typedef T type; };
template <class T> struct remove_pointer<T *const volatile> { typedef T type; };
template <class T> struct remove_extent { typedef T type; };
template <class T> struct remove_extent<T[]> { typedef T type; };
template <class T, size_t N> struct remove_extent<T[N]> { typedef T type; };
template <class T> struct add_const { typedef const T type; };
template <class T> struct add_volatile { typedef volatile T type; };
template <class T> struct add_cv { typedef const volatile T type; };
template <class T> struct add_pointer { typedef typename remove_reference<T>::type *type; };
template <class T> struct add_lvalue_reference { typedef T &type; };
template <> struct add_lvalue_reference<void> { typedef void type; };
template <class T> struct add_rvalue_reference { typedef T &&type; };
template <> struct add_rvalue_reference<void> { typedef void type; };

template <class T> struct is_const : false_type {};
template <class T> struct is_const<const T> : true_type {};
template <class T> struct is_volatile : false_type {};
template <class T> struct is_volatile<volatile T> : true_type {};
template <class T> struct is_lvalue_reference : false_type {};
template <class T> struct is_lvalue_reference<T &> : true_type {};
template <class T> struct is_rvalue_reference : false_type {};
template <class T> struct is_rvalue_reference<T &&> : true_type {};
template <class T> struct is_reference : bool_constant<is_lvalue_reference<T>::value || is_rvalue_reference<T>::value> {};
template <class T> struct __cdv_is_pointer : false_type {};
template <class T> struct __cdv_is_pointer<T *> : true_type {};
template <class T> struct is_pointer : __cdv_is_pointer<typename remove_cv<T>::type> {};
template <class T> struct is_array : false_type {};
template <class T> struct is_array<T[]> : true_type {};
template <class T, size_t N> struct is_array<T[N]> : true_type {};
template <class T> struct is_void : is_same<void, typename remove_cv<T>::type> {};
template <class T> struct is_null_pointer : is_same<decltype(nullptr), typename remove_cv<T>::type> {};

template <class T> struct __cdv_integral : false_type {};
template <> struct __cdv_integral<bool> : true_type {};
template <> struct __cdv_integral<char> : true_type {};
template <> struct __cdv_integral<signed char> : true_type {};
template <> struct __cdv_integral<unsigned char> : true_type {};
template <> struct __cdv_integral<wchar_t> : true_type {};
template <> struct __cdv_integral<char16_t> : true_type {};
template <> struct __cdv_integral<char32_t> : true_type {};
template <> struct __cdv_integral<short> : true_type {};
template <> struct __cdv_integral<unsigned short> : true_type {};
template <> struct __cdv_integral<int> : true_type {};
template <> struct __cdv_integral<unsigned int> : true_type {};
template <> struct __cdv_integral<long> : true_type {};
template <> struct __cdv_integral<unsigned long> : true_type {};
template <> struct __cdv_integral<long long> : true_type {};
template <> struct __cdv_integral<unsigned long long> : true_type {};
template <class T> struct is_integral : __cdv_integral<typename remove_cv<T>::type> {};
template <class T> struct __cdv_floating : false_type {};
template <> struct __cdv_floating<float> : true_type {};
template <> struct __cdv_floating<double> : true_type {};
template <> struct __cdv_floating<long double> : true_type {};
template <class T> struct is_floating_point : __cdv_floating<typename remove_cv<T>::type> {};
template <class T> struct is_arithmetic : bool_constant<is_integral<T>::value || is_floating_point<T>::value> {};
template <class T>
struct is_fundamental : bool_constant<is_arithmetic<T>::value || is_void<T>::value || is_null_pointer<T>::value> {};
template <class T, bool = is_arithmetic<T>::value> struct __cdv_signed : bool_constant<T(-1) < T(0)> {};
template <class T> struct __cdv_signed<T, false> : false_type {};
template <class T> struct is_signed : __cdv_signed<T> {};
template <class T, bool = is_arithmetic<T>::value> struct __cdv_unsigned : bool_constant<T(0) < T(-1)> {};
template <class T> struct __cdv_unsigned<T, false> : false_type {};
template <class T> struct is_unsigned : __cdv_unsigned<T> {};
template <class T> struct is_enum : bool_constant<__is_enum(T)> {};
template <class T> struct is_class : bool_constant<__is_class(T)> {};
template <class T> struct is_union : bool_constant<__is_union(T)> {};
template <class T> struct is_trivially_copyable : bool_constant<__is_trivially_copyable(T)> {};
template <class B, class D> struct is_base_of : bool_constant<__is_base_of(B, D)> {};
template <class F, class T> struct is_convertible : bool_constant<__is_convertible_to(F, T)> {};
template <class T> struct underlying_type { typedef __underlying_type(T) type; };

template <class T> struct __cdv_decay_fn { typedef T type; };
template <class R, class... A> struct __cdv_decay_fn<R(A...)> { typedef R (*type)(A...); };
template <class T> struct decay {
  typedef typename remove_reference<T>::type U;
  typedef typename conditional<is_array<U>::value, typename remove_extent<U>::type *,
                               typename __cdv_decay_fn<typename remove_cv<U>::type>::type>::type type;
};

template <class T> struct __cdv_sign_pair { typedef T s; typedef T u; };
template <> struct __cdv_sign_pair<char> { typedef signed char s; typedef unsigned char u; };
template <> struct __cdv_sign_pair<signed char> { typedef signed char s; typedef unsigned char u; };
template <> struct __cdv_sign_pair<unsigned char> { typedef signed char s; typedef unsigned char u; };
template <> struct __cdv_sign_pair<short> { typedef short s; typedef unsigned short u; };
template <> struct __cdv_sign_pair<unsigned short> { typedef short s; typedef unsigned short u; };
template <> struct __cdv_sign_pair<int> { typedef int s; typedef unsigned u; };
template <> struct __cdv_sign_pair<unsigned> { typedef int s; typedef unsigned u; };
template <> struct __cdv_sign_pair<long> { typedef long s; typedef unsigned long u; };
template <> struct __cdv_sign_pair<unsigned long> { typedef long s; typedef unsigned long u; };
template <> struct __cdv_sign_pair<long long> { typedef long long s; typedef unsigned long long u; };
template <> struct __cdv_sign_pair<unsigned long long> { typedef long long s; typedef unsigned long long u; };
template <class T> struct make_signed { typedef typename __cdv_sign_pair<T>::s type; };
template <class T> struct make_unsigned { typedef typename __cdv_sign_pair<T>::u type; };

template <class... T> struct common_type {};
template <class T> struct common_type<T> { typedef typename decay<T>::type type; };
template <class T, class U> struct common_type<T, U> {
  typedef typename decay<decltype(true ? static_cast<T (*)()>(0)() : static_cast<U (*)()>(0)())>::type type;
};
template <class T, class U, class... R> struct common_type<T, U, R...>
    : common_type<typename common_type<T, U>::type, R...> {};

template <class... B> struct conjunction : true_type {};
template <class B> struct conjunction<B> : B {};
template <class B, class... R> struct conjunction<B, R...> : conditional<bool(B::value), conjunction<R...>, B>::type {};
template <class... B> struct disjunction : false_type {};
template <class B> struct disjunction<B> : B {};
template <class B, class... R> struct disjunction<B, R...> : conditional<bool(B::value), B, disjunction<R...>>::type {};
template <class B> struct negation : bool_constant<!bool(B::value)> {};

template <class...> using void_t = void;
template <bool B, class T = void> using enable_if_t = typename enable_if<B, T>::type;
template <bool B, class T, class F> using conditional_t = typename conditional<B, T, F>::type;
template <class T> using remove_const_t = typename remove_const<T>::type;
template <class T> using remove_volatile_t = typename remove_volatile<T>::type;
template <class T> using remove_cv_t = typename remove_cv<T>::type;
template <class T> using remove_reference_t = typename remove_reference<T>::type;
template <class T> using remove_cvref_t = typename remove_cvref<T>::type;
template <class T> using remove_pointer_t = typename remove_pointer<T>::type;
template <class T> using remove_extent_t = typename remove_extent<T>::type;
template <class T> using add_const_t = typename add_const<T>::type;
template <class T> using add_pointer_t = typename add_pointer<T>::type;
template <class T> using add_lvalue_reference_t = typename add_lvalue_reference<T>::type;
template <class T> using add_rvalue_reference_t = typename add_rvalue_reference<T>::type;
template <class T> using decay_t = typename decay<T>::type;
template <class T> using make_signed_t = typename make_signed<T>::type;
template <class T> using make_unsigned_t = typename make_unsigned<T>::type;
template <class T> using underlying_type_t = typename underlying_type<T>::type;
template <class... T> using common_type_t = typename common_type<T...>::type;
template <class T> using type_identity_t = typename type_identity<T>::type;

#if __cplusplus >= 201703L
template <class T, class U> inline constexpr bool is_same_v = is_same<T, U>::value;
template <class T> inline constexpr bool is_const_v = is_const<T>::value;
template <class T> inline constexpr bool is_volatile_v = is_volatile<T>::value;
template <class T> inline constexpr bool is_reference_v = is_reference<T>::value;
template <class T> inline constexpr bool is_lvalue_reference_v = is_lvalue_reference<T>::value;
template <class T> inline constexpr bool is_rvalue_reference_v = is_rvalue_reference<T>::value;
template <class T> inline constexpr bool is_pointer_v = is_pointer<T>::value;
template <class T> inline constexpr bool is_array_v = is_array<T>::value;
template <class T> inline constexpr bool is_void_v = is_void<T>::value;
template <class T> inline constexpr bool is_null_pointer_v = is_null_pointer<T>::value;
template <class T> inline constexpr bool is_integral_v = is_integral<T>::value;
template <class T> inline constexpr bool is_floating_point_v = is_floating_point<T>::value;
template <class T> inline constexpr bool is_arithmetic_v = is_arithmetic<T>::value;
template <class T> inline constexpr bool is_fundamental_v = is_fundamental<T>::value;
template <class T> inline constexpr bool is_signed_v = is_signed<T>::value;
template <class T> inline constexpr bool is_unsigned_v = is_unsigned<T>::value;
template <class T> inline constexpr bool is_enum_v = is_enum<T>::value;
template <class T> inline constexpr bool is_class_v = is_class<T>::value;
template <class T> inline constexpr bool is_union_v = is_union<T>::value;
template <class T> inline constexpr bool is_trivially_copyable_v = is_trivially_copyable<T>::value;
template <class B, class D> inline constexpr bool is_base_of_v = is_base_of<B, D>::value;
template <class F, class T> inline constexpr bool is_convertible_v = is_convertible<F, T>::value;
template <class... B> inline constexpr bool conjunction_v = conjunction<B...>::value;
template <class... B> inline constexpr bool disjunction_v = disjunction<B...>::value;
template <class B> inline constexpr bool negation_v = negation<B>::value;
#endif
}
//// utility
#pragma once
#include <type_traits>
namespace std {
#if !__NV_BUILTIN_MOVE_FORWARD // NVRTC declares std::move and std::forward itself unless -builtin-move-forward=false
template <class T>
__host__ __device__ constexpr typename remove_reference<T>::type &&move(T &&t) noexcept {
  return static_cast<typename remove_reference<T>::type &&>(t);
}
template <class T>
__host__ __device__ constexpr T &&forward(typename remove_reference<T>::type &t) noexcept {
  return static_cast<T &&>(t);
}
template <class T>
__host__ __device__ constexpr T &&forward(typename remove_reference<T>::type &&t) noexcept {
  return static_cast<T &&>(t);
}
#endif
template <class T> __host__ __device__ typename add_rvalue_reference<T>::type declval() noexcept;
template <class T>
__host__ __device__ void swap(T &a, T &b) noexcept {
  T t = static_cast<T &&>(a);
  a = static_cast<T &&>(b);
  b = static_cast<T &&>(t);
}
template <class T, size_t N>
__host__ __device__ void swap(T (&a)[N], T (&b)[N]) noexcept {
  for (size_t i = 0; i < N; i++) swap(a[i], b[i]);
}
template <class T, class U = T>
__host__ __device__ T exchange(T &obj, U &&v) {
  T old = static_cast<T &&>(obj);
  obj = static_cast<U &&>(v);
  return old;
}
template <class T1, class T2>
struct pair {
  typedef T1 first_type;
  typedef T2 second_type;
  T1 first;
  T2 second;
  __host__ __device__ constexpr pair() : first(), second() {}
  __host__ __device__ constexpr pair(const T1 &a, const T2 &b) : first(a), second(b) {}
  template <class U1, class U2>
  __host__ __device__ constexpr pair(const pair<U1, U2> &p) : first(p.first), second(p.second) {}
};
template <class T1, class T2>
__host__ __device__ constexpr pair<typename decay<T1>::type, typename decay<T2>::type> make_pair(T1 &&a, T2 &&b) {
  return pair<typename decay<T1>::type, typename decay<T2>::type>(static_cast<T1 &&>(a), static_cast<T2 &&>(b));
}
template <class T1, class T2>
__host__ __device__ constexpr bool operator==(const pair<T1, T2> &a, const pair<T1, T2> &b) {
  return a.first == b.first && a.second == b.second;
}
template <class T1, class T2>
__host__ __device__ constexpr bool operator!=(const pair<T1, T2> &a, const pair<T1, T2> &b) {
  return !(a == b);
}
template <class T, T... I> struct integer_sequence {
  typedef T value_type;
  __host__ __device__ static constexpr size_t size() noexcept { return sizeof...(I); }
};
template <size_t... I> using index_sequence = integer_sequence<size_t, I...>;
// NVRTC has no __make_integer_seq: 0..N-1 built by halves, so the depth of instantiation is log2(N)
template <class S1, class S2> struct __cdv_seq_join;
template <class T, T... A, T... B> struct __cdv_seq_join<integer_sequence<T, A...>, integer_sequence<T, B...>> {
  typedef integer_sequence<T, A..., (sizeof...(A) + B)...> type;
};
template <class T, size_t N> struct __cdv_seq {
  typedef typename __cdv_seq_join<typename __cdv_seq<T, N / 2>::type, typename __cdv_seq<T, N - N / 2>::type>::type type;
};
template <class T> struct __cdv_seq<T, 0> { typedef integer_sequence<T> type; };
template <class T> struct __cdv_seq<T, 1> { typedef integer_sequence<T, 0> type; };
template <class T, T N> using make_integer_sequence = typename __cdv_seq<T, N>::type;
template <size_t N> using make_index_sequence = make_integer_sequence<size_t, N>;
template <class... T> using index_sequence_for = make_index_sequence<sizeof...(T)>;
}
//// limits
#pragma once
#include <limits.h>
#include <float.h>
namespace std {
enum float_round_style { round_indeterminate = -1, round_toward_zero, round_to_nearest, round_toward_infinity,
                         round_toward_neg_infinity };
enum float_denorm_style { denorm_indeterminate = -1, denorm_absent, denorm_present };
// what every numeric_limits has; the specializations below change the members that differ
struct __cdv_limits_base {
  static constexpr bool is_specialized = false, is_signed = false, is_integer = false, is_exact = false;
  static constexpr bool has_infinity = false, has_quiet_NaN = false, has_signaling_NaN = false;
  static constexpr float_denorm_style has_denorm = denorm_absent;
  static constexpr bool has_denorm_loss = false, is_iec559 = false, is_bounded = false, is_modulo = false;
  static constexpr bool traps = false, tinyness_before = false;
  static constexpr float_round_style round_style = round_toward_zero;
  static constexpr int digits = 0, digits10 = 0, max_digits10 = 0, radix = 0;
  static constexpr int min_exponent = 0, min_exponent10 = 0, max_exponent = 0, max_exponent10 = 0;
};
template <class T> struct numeric_limits : __cdv_limits_base {
  __host__ __device__ static constexpr T min() noexcept { return T(); }
  __host__ __device__ static constexpr T max() noexcept { return T(); }
  __host__ __device__ static constexpr T lowest() noexcept { return T(); }
  __host__ __device__ static constexpr T epsilon() noexcept { return T(); }
  __host__ __device__ static constexpr T round_error() noexcept { return T(); }
  __host__ __device__ static constexpr T infinity() noexcept { return T(); }
  __host__ __device__ static constexpr T quiet_NaN() noexcept { return T(); }
  __host__ __device__ static constexpr T signaling_NaN() noexcept { return T(); }
  __host__ __device__ static constexpr T denorm_min() noexcept { return T(); }
};
template <class T> struct numeric_limits<const T> : numeric_limits<T> {};
template <class T> struct numeric_limits<volatile T> : numeric_limits<T> {};
template <class T> struct numeric_limits<const volatile T> : numeric_limits<T> {};

// an integer type: lo and hi its range, d its value bits
template <class T, T lo, T hi, int d>
struct __cdv_int_limits : __cdv_limits_base {
  static constexpr bool is_specialized = true, is_signed = lo < T(0), is_integer = true, is_exact = true;
  static constexpr bool is_bounded = true, is_modulo = !is_signed;
  static constexpr int digits = d, digits10 = d * 301 / 1000, radix = 2;
  __host__ __device__ static constexpr T min() noexcept { return lo; }
  __host__ __device__ static constexpr T max() noexcept { return hi; }
  __host__ __device__ static constexpr T lowest() noexcept { return lo; }
  __host__ __device__ static constexpr T epsilon() noexcept { return T(0); }
  __host__ __device__ static constexpr T round_error() noexcept { return T(0); }
  __host__ __device__ static constexpr T infinity() noexcept { return T(0); }
  __host__ __device__ static constexpr T quiet_NaN() noexcept { return T(0); }
  __host__ __device__ static constexpr T signaling_NaN() noexcept { return T(0); }
  __host__ __device__ static constexpr T denorm_min() noexcept { return T(0); }
};
template <> struct numeric_limits<bool> : __cdv_int_limits<bool, false, true, 1> {
  static constexpr bool is_modulo = false;
  static constexpr int digits10 = 0;
};
template <> struct numeric_limits<char> : __cdv_int_limits<char, CHAR_MIN, CHAR_MAX, CHAR_MIN < 0 ? 7 : 8> {};
template <> struct numeric_limits<signed char> : __cdv_int_limits<signed char, SCHAR_MIN, SCHAR_MAX, 7> {};
template <> struct numeric_limits<unsigned char> : __cdv_int_limits<unsigned char, 0, UCHAR_MAX, 8> {};
template <> struct numeric_limits<short> : __cdv_int_limits<short, SHRT_MIN, SHRT_MAX, 15> {};
template <> struct numeric_limits<unsigned short> : __cdv_int_limits<unsigned short, 0, USHRT_MAX, 16> {};
template <> struct numeric_limits<int> : __cdv_int_limits<int, INT_MIN, INT_MAX, 31> {};
template <> struct numeric_limits<unsigned int> : __cdv_int_limits<unsigned int, 0, UINT_MAX, 32> {};
template <> struct numeric_limits<long> : __cdv_int_limits<long, LONG_MIN, LONG_MAX, sizeof(long) * 8 - 1> {};
template <>
struct numeric_limits<unsigned long> : __cdv_int_limits<unsigned long, 0, ULONG_MAX, sizeof(long) * 8> {};
template <> struct numeric_limits<long long> : __cdv_int_limits<long long, LLONG_MIN, LLONG_MAX, 63> {};
template <>
struct numeric_limits<unsigned long long> : __cdv_int_limits<unsigned long long, 0, ULLONG_MAX, 64> {};

struct __cdv_float_limits : __cdv_limits_base {
  static constexpr bool is_specialized = true, is_signed = true, has_infinity = true, has_quiet_NaN = true;
  static constexpr bool has_signaling_NaN = true, is_iec559 = true, is_bounded = true;
  static constexpr float_denorm_style has_denorm = denorm_present;
  static constexpr float_round_style round_style = round_to_nearest;
  static constexpr int radix = 2;
};
// float and double differ in their constants alone: P is the prefix of their <float.h> names. Infinity and NaN
// come from their bits (NVRTC has no __builtin_huge_valf), so those are device functions, not constexpr.
#define __CDV_FLOAT_LIMITS(T, P, MAXD10, FROM_BITS, INF, QNAN, SNAN)                                    \
  template <> struct numeric_limits<T> : __cdv_float_limits {                                          \
    static constexpr int digits = P##_MANT_DIG, digits10 = P##_DIG, max_digits10 = MAXD10;             \
    static constexpr int min_exponent = P##_MIN_EXP, min_exponent10 = P##_MIN_10_EXP;                 \
    static constexpr int max_exponent = P##_MAX_EXP, max_exponent10 = P##_MAX_10_EXP;                 \
    __host__ __device__ static constexpr T min() noexcept { return P##_MIN; }                          \
    __host__ __device__ static constexpr T max() noexcept { return P##_MAX; }                          \
    __host__ __device__ static constexpr T lowest() noexcept { return -P##_MAX; }                      \
    __host__ __device__ static constexpr T epsilon() noexcept { return P##_EPSILON; }                  \
    __host__ __device__ static constexpr T round_error() noexcept { return T(0.5); }                   \
    __host__ __device__ static constexpr T denorm_min() noexcept { return P##_TRUE_MIN; }              \
    __device__ static T infinity() noexcept { return FROM_BITS(INF); }                                 \
    __device__ static T quiet_NaN() noexcept { return FROM_BITS(QNAN); }                               \
    __device__ static T signaling_NaN() noexcept { return FROM_BITS(SNAN); }                           \
  };
__CDV_FLOAT_LIMITS(float, FLT, 9, __int_as_float, 0x7f800000, 0x7fc00000, 0x7fa00000)
__CDV_FLOAT_LIMITS(double, DBL, 17, __longlong_as_double, 0x7ff0000000000000LL, 0x7ff8000000000000LL,
                   0x7ff4000000000000LL)
#undef __CDV_FLOAT_LIMITS
}
