/*
 * sig_test.c: tests of the kernel-signature parser (src/sig.c). Standalone: no Lua, no CUDA.
 *
 *   gcc -std=gnu11 -Wall -Wextra -Isrc tests/sig_test.c src/sig.c -o /tmp/sig_test && /tmp/sig_test
 *   valgrind --leak-check=full --error-exitcode=1 /tmp/sig_test
 *
 * Prints one line per failed check and a summary; exits 1 when any check failed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sig.h"

static int checks, failures;
static const char *current; /* the running case */

static void check(int ok, int line, const char *what) {
  checks++;
  if (!ok) {
    failures++;
    fprintf(stderr, "sig_test.c:%d: [%s] failed: %s\n", line, current, what);
  }
}

static void check_str(const char *got, const char *want, int line) {
  checks++;
  if (strcmp(got, want) != 0) {
    failures++;
    fprintf(stderr, "sig_test.c:%d: [%s] got \"%s\"\n    expected \"%s\"\n", line, current, got, want);
  }
}

#define CHECK(c) check((c) != 0, __LINE__, #c)
#define CHECK_STR(got, want) check_str((got), (want), __LINE__)

/* ------------------------------------------------------------ helpers */

static cdv_sigs parse_n(const char *src, size_t len, int line) {
  cdv_sigs s;
  char err[256];
  if (cdv_sig_parse(src, len, &s, err, sizeof err) != 0) {
    check(0, line, err);
    s.n = 0, s.v = NULL;
  }
  return s;
}
#define PARSE(src) parse_n((src), strlen(src), __LINE__)

/* parse must fail with exactly this message */
static void parse_err(const char *src, const char *want, int line) {
  cdv_sigs s;
  char err[256];
  int r = cdv_sig_parse(src, strlen(src), &s, err, sizeof err);
  check(r != 0, line, "parse fails");
  check(s.n == 0 && s.v == NULL, line, "no kernels after a failed parse");
  if (r != 0) check_str(err, want, line);
  cdv_sigs_free(&s);
}
#define PARSE_ERR(src, want) parse_err((src), (want), __LINE__)

static const cdv_sig *find(const cdv_sigs *s, const char *name) {
  for (int i = 0; i < s->n; i++)
    if (strcmp(s->v[i].name, name) == 0) return &s->v[i];
  return NULL;
}

static void param_is(const cdv_param *p, const char *type, const char *name, cdv_pkind kind, int size, int align,
                     int line) {
  if (p == NULL) {
    check(0, line, "parameter exists");
    return;
  }
  check_str(p->type, type, line);
  check_str(p->name, name, line);
  check_str(cdv_pkind_name(p->kind), cdv_pkind_name(kind), line);
  check(p->size == size, line, "size");
  check(p->align == align, line, "align");
}
static const cdv_param *param_at(const cdv_sig *g, int i) { return g && i < g->nparams ? &g->params[i] : NULL; }
#define PARAM(sig, i, type, name, kind, size, align) \
  param_is(param_at((sig), (i)), type, name, kind, size, align, __LINE__)

/* the pointee of pointer parameter i */
static void pointee_is(const cdv_sig *g, int i, cdv_pkind elem, int depth, int pconst, int psize, int line) {
  if (g == NULL || i >= g->nparams) {
    check(0, line, "parameter exists");
    return;
  }
  const cdv_param *p = &g->params[i];
  check(p->kind == CDV_P_PTR, line, "is a pointer");
  check_str(cdv_pkind_name(p->elem), cdv_pkind_name(elem), line);
  check(p->depth == depth, line, "depth");
  check(p->pointee_const == pconst, line, "pointee_const");
  check(p->pointee_size == psize, line, "pointee_size");
}
#define POINTEE(sig, i, elem, depth, pconst, psize) pointee_is((sig), (i), (elem), (depth), (pconst), (psize), __LINE__)

static void resolve_err(const cdv_sigs *s, const char *expr, const char *want, int line) {
  cdv_sig r;
  char err[512];
  int rc = cdv_sig_resolve(s, expr, &r, err, sizeof err);
  check(rc != 0, line, "resolve fails");
  if (rc != 0) check_str(err, want, line);
  check(r.params == NULL && r.nparams == 0, line, "nothing left after a failed resolve");
  cdv_sig_clear(&r);
}
#define RESOLVE_ERR(s, expr, want) resolve_err((s), (expr), (want), __LINE__)

static cdv_sig resolve_ok(const cdv_sigs *s, const char *expr, int line) {
  cdv_sig r;
  char err[512];
  if (cdv_sig_resolve(s, expr, &r, err, sizeof err) != 0) check(0, line, err);
  return r;
}
#define RESOLVE(s, expr) resolve_ok((s), (expr), __LINE__)

/* ------------------------------------------------------------ finding kernels */

static void t_saxpy(void) {
  cdv_sigs s = PARSE(
      "extern \"C\" __global__ void saxpy(float a, const float *x, float *y, size_t n) {\n"
      "  size_t i = blockIdx.x * blockDim.x + threadIdx.x;\n"
      "  if (i < n) y[i] = a * x[i] + y[i];\n"
      "}\n");
  CHECK(s.n == 1);
  const cdv_sig *g = find(&s, "saxpy");
  CHECK(g && g->extern_c && g->ntparams == 0 && g->nparams == 4 && g->line == 1);
  PARAM(g, 0, "float", "a", CDV_P_F32, 4, 4);
  PARAM(g, 1, "const float *", "x", CDV_P_PTR, 8, 8);
  POINTEE(g, 1, CDV_P_F32, 1, 1, 4);
  PARAM(g, 2, "float *", "y", CDV_P_PTR, 8, 8);
  POINTEE(g, 2, CDV_P_F32, 1, 0, 4);
  PARAM(g, 3, "size_t", "n", CDV_P_U64, 8, 8);
  cdv_sigs_free(&s);
}

static void t_comments_strings(void) {
  cdv_sigs s = PARSE(
      "// __global__ void c1(int);\n"
      "/* __global__ void c2(int);\n   still a comment */\n"
      "const char *a = \"__global__ void s1(int)\", *b = \"\\\" __global__ void s2(int)\";\n"
      "const char c = '\"', d = '\\'';\n"
      "const char *r = R\"x(__global__ void raw(int) )\" )x\";\n"
      "// a comment continued \\\n __global__ void c3(int);\n"
      "__global__ void real(int /* __global__ void c4(int) */ n); // __global__\n");
  CHECK(s.n == 1);
  const cdv_sig *g = find(&s, "real");
  CHECK(g && g->nparams == 1 && g->line == 9);
  PARAM(g, 0, "int", "n", CDV_P_I32, 4, 4);
  cdv_sigs_free(&s);
}

static void t_preprocessor(void) {
  cdv_sigs s = PARSE(
      "#include <cuda_fp16.h>\n"
      "#define KERNEL(name) __global__ void name(float *x)\n"
      "#define LONG(a) \\\n  __global__ void in_define(int a) \\\n  { }\n"
      "  #  define SPACED __global__ void spaced(int)\n"
      "/* comment */ #define AFTER_COMMENT __global__ void after(int)\n"
      "#define OPEN \"/*\"\n"
      "KERNEL(macro_made) { }\n"
      "__global__ void k(int n);\n");
  CHECK(s.n == 1);
  CHECK(find(&s, "k") != NULL && find(&s, "k")->line == 10);
  cdv_sigs_free(&s);
}

static void t_if0(void) {
  cdv_sigs s = PARSE(
      "#if 0\n"
      "__global__ void dead1(int);\n"
      "#ifdef X\n__global__ void dead2(int);\n#endif\n"
      "/* #endif */ __global__ void dead3(int);\n"
      "#endif\n"
      "#if 0 // old\n__global__ void dead4(int);\n#else\n__global__ void live1(int);\n#endif\n"
      "#if 0\n__global__ void dead5(int);\n#elif defined(Y)\n__global__ void live2(int);\n#endif\n"
      "#if 01\n__global__ void live3(int);\n#endif\n"
      "#ifdef Z\n__global__ void live4(int);\n#endif\n");
  CHECK(s.n == 4);
  CHECK(find(&s, "live1") && find(&s, "live2") && find(&s, "live3") && find(&s, "live4"));
  CHECK(find(&s, "live1") && find(&s, "live1")->line == 11);
  cdv_sigs_free(&s);
}

static void t_extern_c(void) {
  cdv_sigs s = PARSE(
      "extern \"C\" __global__ void a(int);\n"
      "extern \"C\" {\n"
      "  __global__ void b(int);\n"
      "  namespace ns { __global__ void c(int); }\n"
      "  extern \"C++\" { __global__ void d(int); }\n"
      "  __global__ void e(int);\n"
      "}\n"
      "__global__ void f(int);\n");
  CHECK(s.n == 6);
  CHECK(find(&s, "a") && find(&s, "a")->extern_c);
  CHECK(find(&s, "b") && find(&s, "b")->extern_c);
  CHECK(find(&s, "ns::c") && find(&s, "ns::c")->extern_c);
  CHECK(find(&s, "d") && !find(&s, "d")->extern_c);
  CHECK(find(&s, "e") && find(&s, "e")->extern_c);
  CHECK(find(&s, "f") && !find(&s, "f")->extern_c);
  cdv_sigs_free(&s);
}

static void t_attributes(void) {
  cdv_sigs s = PARSE(
      "__global__ void __launch_bounds__(256, 2) a(int x) {}\n"
      "__global__ __launch_bounds__(128) void b(int x) {}\n"
      "static __global__ void c(int x) {}\n"
      "__global__ void __attribute__((noinline)) d(int x) {}\n"
      "__global__ __attribute__((visibility(\"default\"))) void e(int x);\n"
      "__global__ void __maxnreg__(32) __cluster_dims__(2, 1, 1) f(int x) {}\n"
      "[[deprecated]] __global__ void g(int x __attribute__((unused)));\n"
      "__global__ void __launch_bounds__(MAX_THREADS(4), (2)) h(int x);\n"
      "void __global__ i(int x);\n");
  const char *names[] = {"a", "b", "c", "d", "e", "f", "g", "h", "i"};
  CHECK(s.n == 9);
  for (int i = 0; i < 9; i++) {
    const cdv_sig *g = find(&s, names[i]);
    CHECK(g && g->nparams == 1);
    PARAM(g, 0, "int", "x", CDV_P_I32, 4, 4);
  }
  cdv_sigs_free(&s);
}

static void t_templates(void) {
  cdv_sigs s = PARSE(
      "template <typename T, int N = 4, class U>\n"
      "__global__ void k(T *x, const U *y, T a, int n) {}\n"
      "template <template <typename> class TT, typename, unsigned int M = (3 > 2)> __global__ void j(int);\n");
  const cdv_sig *g = find(&s, "k");
  CHECK(g && g->ntparams == 3 && g->line == 2);
  CHECK(g && strcmp(g->tparams[0], "T") == 0 && strcmp(g->tparams[1], "N") == 0 && strcmp(g->tparams[2], "U") == 0);
  PARAM(g, 0, "T *", "x", CDV_P_PTR, 8, 8);
  POINTEE(g, 0, CDV_P_STRUCT, 1, 0, 0);
  PARAM(g, 1, "const U *", "y", CDV_P_PTR, 8, 8);
  PARAM(g, 2, "T", "a", CDV_P_STRUCT, 0, 0);
  PARAM(g, 3, "int", "n", CDV_P_I32, 4, 4);
  g = find(&s, "j");
  CHECK(g && g->ntparams == 3);
  CHECK(g && strcmp(g->tparams[0], "TT") == 0 && strcmp(g->tparams[1], "") == 0 && strcmp(g->tparams[2], "M") == 0);
  cdv_sigs_free(&s);
}

static void t_specialisations(void) {
  cdv_sigs s = PARSE(
      "template <typename T> __global__ void k(T *x, int n);\n"
      "template <> __global__ void k<float>(float *x, int n) {}\n"
      "template <> __global__ void k(double *x, int n) {}\n"
      "template __global__ void k<int>(int *, int);\n"
      "extern template __global__ void k<char>(char *, int);\n"
      "template <typename T> __global__ void k(T *y, int m) {}\n");
  CHECK(s.n == 1);
  const cdv_sig *g = find(&s, "k");
  CHECK(g && g->ntparams == 1 && g->nparams == 2 && g->line == 6);
  PARAM(g, 0, "T *", "y", CDV_P_PTR, 8, 8); /* the definition's names */
  PARAM(g, 1, "int", "m", CDV_P_I32, 4, 4);
  cdv_sigs_free(&s);
}

static void t_namespaces(void) {
  cdv_sigs s = PARSE(
      "namespace a {\n"
      "  namespace b { __global__ void k1(int); }\n"
      "  __global__ void k2(int);\n"
      "  namespace { __global__ void k3(int); }\n"
      "  inline namespace v1 { __global__ void k4(int); }\n"
      "  struct S { int x; void f() { } };\n"
      "}\n"
      "namespace c::d { __global__ void k5(int); }\n"
      "namespace a::inline v2::e { __global__ void k6(int); }\n"
      "__global__ void top(int);\n"
      "namespace a { __global__ void decl(float *); }\n"
      "__global__ void a::decl(float *p) { }\n");
  const char *names[] = {"a::b::k1", "a::k2", "a::k3", "a::k4", "c::d::k5", "a::e::k6", "top", "a::decl"};
  CHECK(s.n == 8);
  for (int i = 0; i < 8; i++) CHECK(find(&s, names[i]) != NULL);
  const cdv_sig *g = find(&s, "a::decl");
  PARAM(g, 0, "float *", "p", CDV_P_PTR, 8, 8);
  cdv_sigs_free(&s);
}

static void t_empty_lists(void) {
  cdv_sigs s = PARSE("__global__ void a() {}\n__global__ void b(void) {}\n__global__ void c( /* nothing */ );\n");
  CHECK(s.n == 3);
  for (int i = 0; i < s.n; i++) CHECK(s.v[i].nparams == 0 && s.v[i].params == NULL);
  cdv_sigs_free(&s);
}

static void t_defaults(void) {
  cdv_sigs s = PARSE(
      "__global__ void k(int n = 4, float x = (1 > 2) ? 1.f : 2.f, int m = a < b, "
      "Foo<int, 2> f = {1, 2}, int z = g(1, 2), int w = 1'000) {}\n");
  const cdv_sig *g = find(&s, "k");
  CHECK(g && g->nparams == 6);
  PARAM(g, 0, "int", "n", CDV_P_I32, 4, 4);
  PARAM(g, 1, "float", "x", CDV_P_F32, 4, 4);
  PARAM(g, 2, "int", "m", CDV_P_I32, 4, 4);
  PARAM(g, 3, "Foo<int, 2>", "f", CDV_P_STRUCT, 0, 0);
  PARAM(g, 4, "int", "z", CDV_P_I32, 4, 4);
  PARAM(g, 5, "int", "w", CDV_P_I32, 4, 4);
  cdv_sigs_free(&s);
}

static void t_qualifiers(void) {
  cdv_sigs s = PARSE(
      "__global__ void k(const float *__restrict__ a, float *__restrict b, float *restrict c,\n"
      "  float const *d, const float *const e, volatile int *f, const volatile unsigned g,\n"
      "  __restrict__ float *h, float *const *i, const float **j, __grid_constant__ const Params p,\n"
      "  register int r) {}\n");
  const cdv_sig *g = find(&s, "k");
  CHECK(g && g->nparams == 12);
  PARAM(g, 0, "const float *", "a", CDV_P_PTR, 8, 8);
  POINTEE(g, 0, CDV_P_F32, 1, 1, 4);
  PARAM(g, 1, "float *", "b", CDV_P_PTR, 8, 8);
  PARAM(g, 2, "float *", "c", CDV_P_PTR, 8, 8);
  PARAM(g, 3, "float const *", "d", CDV_P_PTR, 8, 8);
  POINTEE(g, 3, CDV_P_F32, 1, 1, 4);
  PARAM(g, 4, "const float *const", "e", CDV_P_PTR, 8, 8);
  POINTEE(g, 4, CDV_P_F32, 1, 1, 4);
  PARAM(g, 5, "volatile int *", "f", CDV_P_PTR, 8, 8);
  POINTEE(g, 5, CDV_P_I32, 1, 0, 4);
  PARAM(g, 6, "const volatile unsigned", "g", CDV_P_U32, 4, 4);
  PARAM(g, 7, "float *", "h", CDV_P_PTR, 8, 8);
  PARAM(g, 8, "float *const *", "i", CDV_P_PTR, 8, 8);
  POINTEE(g, 8, CDV_P_STRUCT, 2, 1, 8); /* points to a const pointer */
  PARAM(g, 9, "const float **", "j", CDV_P_PTR, 8, 8);
  POINTEE(g, 9, CDV_P_STRUCT, 2, 0, 8); /* points to a non-const pointer to const */
  PARAM(g, 10, "const Params", "p", CDV_P_STRUCT, 0, 0);
  PARAM(g, 11, "int", "r", CDV_P_I32, 4, 4);
  cdv_sigs_free(&s);
}

static void t_integer_spellings(void) {
  static const struct {
    const char *type;
    cdv_pkind kind;
  } cases[] = {
      {"char", CDV_P_I8},
      {"signed char", CDV_P_I8},
      {"unsigned char", CDV_P_U8},
      {"short", CDV_P_I16},
      {"short int", CDV_P_I16},
      {"signed short", CDV_P_I16},
      {"unsigned short int", CDV_P_U16},
      {"int", CDV_P_I32},
      {"signed", CDV_P_I32},
      {"signed int", CDV_P_I32},
      {"unsigned", CDV_P_U32},
      {"unsigned int", CDV_P_U32},
      {"long", CDV_P_I64},
      {"long int", CDV_P_I64},
      {"unsigned long", CDV_P_U64},
      {"unsigned long int", CDV_P_U64},
      {"long long", CDV_P_I64},
      {"long long int", CDV_P_I64},
      {"signed long long", CDV_P_I64},
      {"unsigned long long", CDV_P_U64},
      {"long unsigned int", CDV_P_U64},
      {"int long", CDV_P_I64},
      {"bool", CDV_P_BOOL},
      {"float", CDV_P_F32},
      {"double", CDV_P_F64},
      {"long double", CDV_P_STRUCT},
      {"__int128", CDV_P_STRUCT},
      {"wchar_t", CDV_P_I32},
      {"char16_t", CDV_P_U16},
      {"char32_t", CDV_P_U32},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char src[128];
    snprintf(src, sizeof src, "__global__ void k(%s v);", cases[i].type);
    cdv_sigs s = PARSE(src);
    const cdv_sig *g = find(&s, "k");
    int sz = cases[i].kind == CDV_P_STRUCT                                                            ? 0
             : cases[i].kind == CDV_P_BOOL || cases[i].kind == CDV_P_I8 || cases[i].kind == CDV_P_U8  ? 1
             : cases[i].kind == CDV_P_I16 || cases[i].kind == CDV_P_U16                               ? 2
             : cases[i].kind == CDV_P_I64 || cases[i].kind == CDV_P_U64 || cases[i].kind == CDV_P_F64 ? 8
                                                                                                      : 4;
    PARAM(g, 0, cases[i].type, "v", cases[i].kind, sz, sz);
    cdv_sigs_free(&s);
  }
}

static void t_named_scalars(void) {
  cdv_sigs s = PARSE(
      "__global__ void k(int8_t a, int16_t b, int32_t c, int64_t d, uint8_t e, uint16_t f,\n"
      "  uint32_t g, uint64_t h, size_t i, ssize_t j, ptrdiff_t k, intptr_t l, uintptr_t m,\n"
      "  std::size_t n, ::int32_t o, cuda::std::uint64_t p, __half q, half r, __nv_bfloat16 s,\n"
      "  nv_bfloat16 t, cudaTextureObject_t u, mylib::size_t v);\n");
  const cdv_sig *g = find(&s, "k");
  static const cdv_pkind kinds[] = {CDV_P_I8,   CDV_P_I16,  CDV_P_I32, CDV_P_I64,   CDV_P_U8,  CDV_P_U16,
                                    CDV_P_U32,  CDV_P_U64,  CDV_P_U64, CDV_P_I64,   CDV_P_I64, CDV_P_I64,
                                    CDV_P_U64,  CDV_P_U64,  CDV_P_I32, CDV_P_U64,   CDV_P_F16, CDV_P_F16,
                                    CDV_P_BF16, CDV_P_BF16, CDV_P_U64, CDV_P_STRUCT};
  CHECK(g && g->nparams == 22);
  for (int i = 0; g && i < g->nparams && i < 22; i++) {
    CHECK(g->params[i].kind == kinds[i]);
    CHECK(g->params[i].name[0] == 'a' + i && g->params[i].name[1] == '\0');
  }
  if (g) CHECK_STR(g->params[14].type, "::int32_t");
  if (g) CHECK_STR(g->params[15].type, "cuda::std::uint64_t");
  if (g) CHECK(g->params[16].size == 2 && g->params[18].size == 2 && g->params[21].size == 0);
  cdv_sigs_free(&s);
}

static void t_vectors(void) {
  static const struct {
    const char *type;
    cdv_pkind lane;
    int n, size, align;
  } cases[] = {
      {"float4", CDV_P_F32, 4, 16, 16},    {"float3", CDV_P_F32, 3, 12, 4},
      {"float2", CDV_P_F32, 2, 8, 8},      {"float1", CDV_P_F32, 1, 4, 4},
      {"double2", CDV_P_F64, 2, 16, 16},   {"double3", CDV_P_F64, 3, 24, 8},
      {"double4", CDV_P_F64, 4, 32, 16},   {"double4_32a", CDV_P_F64, 4, 32, 32},
      {"long4_16a", CDV_P_I64, 4, 32, 16}, {"int4", CDV_P_I32, 4, 16, 16},
      {"uint2", CDV_P_U32, 2, 8, 8},       {"int3", CDV_P_I32, 3, 12, 4},
      {"char2", CDV_P_I8, 2, 2, 2},        {"char3", CDV_P_I8, 3, 3, 1},
      {"uchar4", CDV_P_U8, 4, 4, 4},       {"short3", CDV_P_I16, 3, 6, 2},
      {"ushort4", CDV_P_U16, 4, 8, 8},     {"long2", CDV_P_I64, 2, 16, 16},
      {"ulong1", CDV_P_U64, 1, 8, 8},      {"longlong2", CDV_P_I64, 2, 16, 16},
      {"longlong3", CDV_P_I64, 3, 24, 8},  {"ulonglong4", CDV_P_U64, 4, 32, 16},
      {"__half2", CDV_P_F16, 2, 4, 4},     {"__nv_bfloat162", CDV_P_BF16, 2, 4, 4},
      {"dim3", CDV_P_U32, 3, 12, 4},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char src[128];
    snprintf(src, sizeof src, "__global__ void k(%s v, %s *p);", cases[i].type, cases[i].type);
    cdv_sigs s = PARSE(src);
    const cdv_sig *g = find(&s, "k");
    PARAM(g, 0, cases[i].type, "v", CDV_P_VEC, cases[i].size, cases[i].align);
    CHECK(g && g->params[0].elem == cases[i].lane && g->params[0].nelem == cases[i].n);
    POINTEE(g, 1, CDV_P_STRUCT, 1, 0, cases[i].size);
    cdv_sigs_free(&s);
  }
  /* near misses are structs */
  cdv_sigs s = PARSE("__global__ void k(float5 a, float44 b, int4_32a c, floatx4 d);");
  for (int i = 0; i < 4; i++) CHECK(s.n == 1 && s.v[0].params[i].kind == CDV_P_STRUCT);
  cdv_sigs_free(&s);
}

static void t_pointers(void) {
  cdv_sigs s = PARSE(
      "__global__ void k(float **a, int ***b, void *c, const void *const d, char *e, bool *f,\n"
      "  struct Node *g, Foo<int> *h, __half *i, double2 **j, float* *k);\n");
  const cdv_sig *g = find(&s, "k");
  CHECK(g && g->nparams == 11);
  PARAM(g, 0, "float **", "a", CDV_P_PTR, 8, 8);
  POINTEE(g, 0, CDV_P_STRUCT, 2, 0, 8);
  PARAM(g, 1, "int ***", "b", CDV_P_PTR, 8, 8);
  POINTEE(g, 1, CDV_P_STRUCT, 3, 0, 8);
  POINTEE(g, 2, CDV_P_STRUCT, 1, 0, 0);
  PARAM(g, 3, "const void *const", "d", CDV_P_PTR, 8, 8);
  POINTEE(g, 3, CDV_P_STRUCT, 1, 1, 0);
  POINTEE(g, 4, CDV_P_I8, 1, 0, 1);
  POINTEE(g, 5, CDV_P_BOOL, 1, 0, 1);
  PARAM(g, 6, "struct Node *", "g", CDV_P_PTR, 8, 8);
  POINTEE(g, 6, CDV_P_STRUCT, 1, 0, 0);
  PARAM(g, 7, "Foo<int> *", "h", CDV_P_PTR, 8, 8);
  POINTEE(g, 8, CDV_P_F16, 1, 0, 2);
  POINTEE(g, 9, CDV_P_STRUCT, 2, 0, 8);
  PARAM(g, 10, "float **", "k", CDV_P_PTR, 8, 8);
  cdv_sigs_free(&s);
}

static void t_references(void) {
  PARSE_ERR("__global__ void ok(int);\n\n__global__ void k(int n,\n  float &x);\n",
            "line 4: kernel 'k': parameter 'x' is a reference (kernel arguments are passed by value)");
  PARSE_ERR("__global__ void k(float &&);",
            "line 1: kernel 'k': parameter 1 is a reference (kernel arguments are passed by value)");
  PARSE_ERR("namespace ns { __global__ void k(int a, const Foo<int> & f); }",
            "line 1: kernel 'ns::k': parameter 'f' is a reference (kernel arguments are passed by value)");
  PARSE_ERR("__global__ void k(float (&a)[4]);",
            "line 1: kernel 'k': parameter 'a' is a reference (kernel arguments are passed by value)");
  /* a reference inside a template argument or a function pointer's parameters is not the parameter's */
  cdv_sigs s = PARSE("__global__ void k(Foo<int &> a, void (*cb)(int &), decltype(x & y) z);");
  CHECK(s.n == 1 && s.v[0].nparams == 3);
  if (s.n == 1) PARAM(&s.v[0], 0, "Foo<int &>", "a", CDV_P_STRUCT, 0, 0);
  if (s.n == 1) PARAM(&s.v[0], 1, "void (*)(int &)", "cb", CDV_P_PTR, 8, 8);
  if (s.n == 1) PARAM(&s.v[0], 2, "decltype (x &y)", "z", CDV_P_STRUCT, 0, 0);
  cdv_sigs_free(&s);
}

static void t_arrays(void) {
  cdv_sigs s = PARSE("__global__ void k(float x[], const int y[16], double m[3][4], float *z[2], int w[N + 1]);");
  const cdv_sig *g = find(&s, "k");
  CHECK(g && g->nparams == 5);
  PARAM(g, 0, "float *", "x", CDV_P_PTR, 8, 8);
  POINTEE(g, 0, CDV_P_F32, 1, 0, 4);
  PARAM(g, 1, "const int *", "y", CDV_P_PTR, 8, 8);
  POINTEE(g, 1, CDV_P_I32, 1, 1, 4);
  PARAM(g, 2, "double (*)[4]", "m", CDV_P_PTR, 8, 8);
  POINTEE(g, 2, CDV_P_STRUCT, 1, 0, 0);
  PARAM(g, 3, "float **", "z", CDV_P_PTR, 8, 8);
  POINTEE(g, 3, CDV_P_STRUCT, 2, 0, 8);
  PARAM(g, 4, "int *", "w", CDV_P_PTR, 8, 8);
  cdv_sigs_free(&s);
}

static void t_function_pointers(void) {
  cdv_sigs s = PARSE(
      "__global__ void k(int (*op)(int, int), void (*)(float *), float (*const f)(void),\n"
      "  void cb(int), float (*rows)[8], int (Foo::*pm));");
  const cdv_sig *g = find(&s, "k");
  CHECK(g && g->nparams == 6);
  PARAM(g, 0, "int (*)(int, int)", "op", CDV_P_PTR, 8, 8);
  PARAM(g, 1, "void (*)(float *)", "", CDV_P_PTR, 8, 8);
  PARAM(g, 2, "float (*const)(void)", "f", CDV_P_PTR, 8, 8);
  PARAM(g, 3, "void (int)", "cb", CDV_P_PTR, 8, 8);
  PARAM(g, 4, "float (*)[8]", "rows", CDV_P_PTR, 8, 8);
  PARAM(g, 5, "int (Foo::*)", "pm", CDV_P_PTR, 8, 8);
  cdv_sigs_free(&s);
}

static void t_unknown_types(void) {
  cdv_sigs s = PARSE(
      "__global__ void k(Params p, struct S s, const Foo<int, 3> f, enum E e, MyInt n, T,\n"
      "  Outer::Inner i, typename Foo<T>::type t, unsigned Foo);\n");
  const cdv_sig *g = find(&s, "k");
  CHECK(g && g->nparams == 9);
  PARAM(g, 0, "Params", "p", CDV_P_STRUCT, 0, 0);
  PARAM(g, 1, "struct S", "s", CDV_P_STRUCT, 0, 0);
  PARAM(g, 2, "const Foo<int, 3>", "f", CDV_P_STRUCT, 0, 0);
  PARAM(g, 3, "enum E", "e", CDV_P_STRUCT, 0, 0);
  PARAM(g, 4, "MyInt", "n", CDV_P_STRUCT, 0, 0);
  PARAM(g, 5, "T", "", CDV_P_STRUCT, 0, 0);
  PARAM(g, 6, "Outer::Inner", "i", CDV_P_STRUCT, 0, 0);
  PARAM(g, 7, "typename Foo<T>::type", "t", CDV_P_STRUCT, 0, 0);
  PARAM(g, 8, "unsigned", "Foo", CDV_P_U32, 4, 4);
  cdv_sigs_free(&s);
}

static void t_unnamed(void) {
  cdv_sigs s = PARSE(
      "__global__ void k(float *, const int, size_t, const size_t, unsigned long long, int[], "
      "std::size_t);");
  const cdv_sig *g = find(&s, "k");
  CHECK(g && g->nparams == 7);
  PARAM(g, 0, "float *", "", CDV_P_PTR, 8, 8);
  PARAM(g, 1, "const int", "", CDV_P_I32, 4, 4);
  PARAM(g, 2, "size_t", "", CDV_P_U64, 8, 8);
  PARAM(g, 3, "const size_t", "", CDV_P_U64, 8, 8);
  PARAM(g, 4, "unsigned long long", "", CDV_P_U64, 8, 8);
  PARAM(g, 5, "int *", "", CDV_P_PTR, 8, 8);
  PARAM(g, 6, "std::size_t", "", CDV_P_U64, 8, 8);
  cdv_sigs_free(&s);
}

static void t_multiline(void) {
  cdv_sigs s = PARSE(
      "\n\ntemplate <typename T>\n"
      "__global__\n"
      "void\n"
      "__launch_bounds__(\n  256\n)\n"
      "scale(   T *  __restrict__   out ,   // output\n"
      "         const T\n  *  in, /* input */\n"
      "#ifdef WITH_N\n"
      "         int n,\n"
      "#endif\n"
      "         T    factor  )\n{\n}\n");
  const cdv_sig *g = find(&s, "scale");
  CHECK(g && g->line == 4 && g->nparams == 4);
  PARAM(g, 0, "T *", "out", CDV_P_PTR, 8, 8);
  PARAM(g, 1, "const T *", "in", CDV_P_PTR, 8, 8);
  PARAM(g, 2, "int", "n", CDV_P_I32, 4, 4); /* conditionals are not evaluated: both branches count */
  PARAM(g, 3, "T", "factor", CDV_P_STRUCT, 0, 0);
  cdv_sigs_free(&s);
}

static void t_declared_then_defined(void) {
  cdv_sigs s = PARSE(
      "extern \"C\" __global__ void k(float *, int);\n"
      "__global__ void other(int);\n"
      "extern \"C\" __global__ void k(float *data, int n) { }\n"
      "extern \"C\" __global__ void k(float *again, int n);\n");
  CHECK(s.n == 2);
  CHECK(s.n == 2 && strcmp(s.v[0].name, "k") == 0); /* the first position is kept */
  const cdv_sig *g = find(&s, "k");
  CHECK(g && g->extern_c && g->line == 3);
  PARAM(g, 0, "float *", "data", CDV_P_PTR, 8, 8);
  PARAM(g, 1, "int", "n", CDV_P_I32, 4, 4);
  cdv_sigs_free(&s);
}

static void t_macro_arguments(void) {
  cdv_sigs s = PARSE(
      "DECLARE(__global__ void hidden(int));\n"
      "INSTANTIATE(k, (__global__ void h2(int)))\n"
      "static_assert(sizeof(int) == 4, \"__global__ void h3(int)\");\n"
      "__global__ void seen(int);\n"
      "__global__;\n"
      "__global__ void (*not_a_kernel);\n");
  CHECK(s.n == 1 && find(&s, "seen") != NULL);
  cdv_sigs_free(&s);
}

static void t_variadic_and_void(void) {
  PARSE_ERR("__global__ void k(int n, ...);",
            "line 1: kernel 'k' takes a variable argument list, which cuda does not allow");
  PARSE_ERR("\n__global__ void k(void x);", "line 2: kernel 'k': parameter 'x' has type void");
  PARSE_ERR("__global__ void k(int a, void);", "line 1: kernel 'k': parameter 2 has type void");
  PARSE_ERR("__global__ void k(int a, , int b);", "line 1: kernel 'k': parameter 2 is empty");
}

static void t_limits(void) {
  char src[512], want[256];
  memset(src, 0, sizeof src);
  strcpy(src, "__global__ void ");
  memset(src + strlen(src), 'x', 200);
  strcat(src, "(int);");
  snprintf(want, sizeof want, "line 1: kernel name '%.40s...' is too long (at most 127 bytes)", src + 16);
  PARSE_ERR(src, want);
  PARSE_ERR(
      "template <class A, class B, class C, class D, class E, class F, class G, class H, class I, class J,\n"
      "class K, class L, class M, class N, class O, class P, class Q> __global__ void k(int);",
      "line 2: kernel 'k' has more than 16 template parameters");
  /* a type longer than the field is cut with "..." */
  cdv_sigs s = PARSE(
      "__global__ void k(Some<Very, Long, Template, Instantiation, That, Does, Not, Fit, "
      "In, Ninety, Six, Bytes, Or, More> *p);");
  CHECK(s.n == 1 && strlen(s.v[0].params[0].type) == 95);
  CHECK(s.n == 1 && strcmp(s.v[0].params[0].type + 92, "...") == 0);
  CHECK(s.n == 1 && s.v[0].params[0].kind == CDV_P_PTR);
  cdv_sigs_free(&s);
}

static void t_line_numbers(void) {
  cdv_sigs s = PARSE(
      "/* one\n two\n three */\n"
      "#define X \\\n  continued\n"
      "const char *s = \"a\\\nb\";\n"
      "__global__ void k7(int);\r\n"
      "\r\n"
      "__global__ void \\\nk9(int);\n");
  CHECK(find(&s, "k7") && find(&s, "k7")->line == 8); /* the string's splice is a line */
  CHECK(find(&s, "k9") && find(&s, "k9")->line == 10);
  cdv_sigs_free(&s);
}

static void t_not_terminated(void) {
  /* len stops before the end of the text: nothing past it is read (valgrind and ASan would see it) */
  const char text[] = "__global__ void a(int x); /* __global__ void b(int y); */ __global__ void c(float z);";
  size_t cut = strlen("__global__ void a(int x); /* __global__ void b");
  char *heap = malloc(cut);
  memcpy(heap, text, cut);
  cdv_sigs s = parse_n(heap, cut, __LINE__);
  CHECK(s.n == 1 && find(&s, "a") != NULL);
  cdv_sigs_free(&s);
  /* every prefix of a kernel declaration */
  const char *decl =
      "extern \"C\" { namespace n { template <typename T, int N = 3> __global__ void "
      "__launch_bounds__(64) k(const T *x, float4 v, int (*f)(int), char c = 'x') { } } }";
  size_t len = strlen(decl);
  for (size_t i = 0; i <= len; i++) {
    char *p = malloc(i ? i : 1);
    memcpy(p, decl, i);
    cdv_sigs t;
    char err[256];
    cdv_sig_parse(p, i, &t, err, sizeof err);
    cdv_sigs_free(&t);
    free(p);
  }
  free(heap);
  CHECK(1);
}

static void t_unterminated(void) {
  const char *srcs[] = {"__global__ void a(int",
                        "/* __global__",
                        "\"__global__ void s(int)",
                        "'",
                        "R\"x(__global__ void r(int)",
                        "#if 0\n__global__ void d(int);\n",
                        "__global__ void t(Foo<int",
                        "template <typename T",
                        "namespace a { namespace b {",
                        "__global__ void k(int) {{{{",
                        "}}}} __global__ void z(int);",
                        "\\",
                        "#",
                        "#define X \\",
                        "__global__ void k(int (*f)(int",
                        "R\"",
                        "u8\"",
                        "L'",
                        "1'",
                        "..",
                        ":"};
  for (size_t i = 0; i < sizeof srcs / sizeof srcs[0]; i++) {
    cdv_sigs s;
    char err[256];
    cdv_sig_parse(srcs[i], strlen(srcs[i]), &s, err, sizeof err);
    cdv_sigs_free(&s);
  }
  cdv_sigs s = PARSE("}}}} __global__ void z(int);");
  CHECK(s.n == 1 && find(&s, "z") != NULL);
  cdv_sigs_free(&s);
}

static char *repeat(const char *head, const char *unit, int n, const char *tail) {
  size_t hl = strlen(head), ul = strlen(unit), tl = strlen(tail);
  char *p = malloc(hl + ul * (size_t)n + tl + 1), *q = p;
  memcpy(q, head, hl), q += hl;
  for (int i = 0; i < n; i++) memcpy(q, unit, ul), q += ul;
  memcpy(q, tail, tl + 1);
  return p;
}

static void t_deep_nesting(void) {
  /* neither braces, parentheses, angle brackets nor namespaces recurse */
  const char *units[] = {"{", "(", "<", "[", "namespace a { ", "extern \"C\" { ", "template <"};
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
    char *src = repeat("", units[i], 200000, " __global__ void k(int);");
    cdv_sigs s;
    char err[256];
    cdv_sig_parse(src, strlen(src), &s, err, sizeof err);
    cdv_sigs_free(&s);
    free(src);
  }
  char *src = repeat("__global__ void k(", "Foo<(", 100000, "int x);");
  cdv_sigs s;
  char err[256];
  cdv_sig_parse(src, strlen(src), &s, err, sizeof err);
  cdv_sigs_free(&s);
  free(src);
  /* nested namespaces: the name grows past its field */
  src = repeat("", "namespace abcdefgh { ", 20, "__global__ void k(int); ");
  PARSE_ERR(src, "line 1: kernel name 'abcdefgh::abcdefgh::abcdefgh::abcdefgh::...' is too long (at most 127 bytes)");
  free(src);
  src = repeat("", "namespace a { ", 30, "__global__ void k(int); __global__ void k2(int); } __global__ void k3(int);");
  s = PARSE(src);
  CHECK(s.n == 3 && s.v[2].name[0] == 'a' && strlen(s.v[2].name) == 29 * 3 + 2);
  cdv_sigs_free(&s);
  free(src);
}

static void t_many_kernels(void) {
  /* 20000 kernels declared, then overloaded, then defined: the lookup of earlier declarations grows */
  int n = 20000;
  size_t cap = (size_t)n * 120, len = 0;
  char *src = malloc(cap);
  for (int pass = 0; pass < 3; pass++)
    for (int i = 0; i < n; i++)
      len += (size_t)snprintf(src + len, cap - len,
                              pass == 0   ? "__global__ void k%d(float *);\n"
                              : pass == 1 ? "__global__ void k%d(double *);\n"
                                          : "__global__ void k%d(float *p%d) { }\n",
                              i, i);
  cdv_sigs s = parse_n(src, len, __LINE__);
  CHECK(s.n == 2 * n);
  int named = 0;
  for (int i = 0; i < s.n; i++) {
    char want[32];
    snprintf(want, sizeof want, "k%d", i % n);
    named += strcmp(s.v[i].name, want) == 0;
    if (i < n) {
      snprintf(want, sizeof want, "p%d", i);
      named += strcmp(s.v[i].params[0].name, want) == 0 && s.v[i].line == 2 * n + i + 1;
    }
  }
  CHECK(named == 3 * n);
  cdv_sigs_free(&s);
  free(src);
}

static void t_garbage(void) {
  cdv_sigs s;
  char err[64];
  CHECK(cdv_sig_parse("", 0, &s, err, sizeof err) == 0 && s.n == 0);
  cdv_sigs_free(&s);
  CHECK(cdv_sig_parse(NULL, 0, &s, err, sizeof err) == 0 && s.n == 0);
  cdv_sigs_free(&s);
  CHECK(cdv_sig_parse(NULL, 5, &s, err, sizeof err) != 0);
  cdv_sigs_free(&s);
  CHECK(cdv_sig_parse("__global__ void k(int &r);", 26, &s, NULL, 0) != 0); /* no room for a message */
  cdv_sigs_free(&s);
  const char bin[] = "__global__\0void\xff\xfe k(\x01 int\0 n);\0\0{";
  CHECK(cdv_sig_parse(bin, sizeof bin, &s, err, sizeof err) == 0);
  cdv_sigs_free(&s);
  unsigned seed = 12345;
  const char *alphabet =
      "__global__ void k ( ) { } < > , ; * & [ ] :: template typename extern \"C\" namespace "
      "int float4 T = # \n / * ' \\ R\" ... const";
  size_t an = strlen(alphabet);
  for (int round = 0; round < 3000; round++) {
    char buf[400];
    size_t n = (size_t)(seed % sizeof buf);
    for (size_t i = 0; i < n; i++) {
      seed = seed * 1103515245u + 12345u;
      buf[i] = alphabet[(seed >> 8) % an];
    }
    if (cdv_sig_parse(buf, n, &s, err, sizeof err) == 0) {
      for (int i = 0; i < s.n; i++) {
        cdv_sig r;
        char name[160];
        snprintf(name, sizeof name, "%s<int, float4>", s.v[i].name);
        cdv_sig_resolve(&s, s.v[i].name, &r, err, sizeof err);
        cdv_sig_clear(&r);
        cdv_sig_resolve(&s, name, &r, err, sizeof err);
        cdv_sig_clear(&r);
      }
    }
    cdv_sigs_free(&s);
    seed = seed * 1103515245u + 12345u;
  }
  CHECK(1);
}

/* ------------------------------------------------------------ resolve */

static const char *template_src =
    "template <typename T>\n"
    "__global__ void axpy(T a, const T *x, T *y, size_t n) { }\n"
    "namespace ns {\n"
    "template <typename T, int N>\n"
    "__global__ void k(T *out, const T (*tile)[N], Vec<T, N> v) { }\n"
    "}\n"
    "template <typename T, typename U = T *, int N = 4>\n"
    "__global__ void def(T a, U b, Tile<N> t) { }\n"
    "template <typename... Ts>\n"
    "__global__ void pack(int n, Ts... xs, Tuple<Ts...> all) { }\n"
    "template <typename T>\n"
    "__global__ void ref(T x) { }\n"
    "extern \"C\" __global__ void saxpy(float a, float *x) { }\n"
    "namespace lib { extern \"C\" __global__ void cfun(int a) { } }\n"
    "__global__ void over(int a) { }\n"
    "__global__ void over(float a) { }\n"
    "template <typename T> __global__ void over(T *a) { }\n"
    "template <typename T = float> __global__ void alldef(T a) { }\n";

static void t_resolve_plain(void) {
  cdv_sigs s = PARSE(template_src);
  cdv_sig r = RESOLVE(&s, "saxpy");
  CHECK_STR(r.name, "saxpy");
  CHECK(r.extern_c && r.nparams == 2 && r.line == 13);
  PARAM(&r, 1, "float *", "x", CDV_P_PTR, 8, 8);
  cdv_sig_clear(&r);
  CHECK(r.params == NULL && r.nparams == 0);
  r = RESOLVE(&s, "cfun"); /* C linkage: found without its namespace */
  CHECK(r.nparams == 1 && r.extern_c);
  cdv_sig_clear(&r);
  r = RESOLVE(&s, "lib::cfun");
  CHECK(r.nparams == 1);
  cdv_sig_clear(&r);
  r = RESOLVE(&s, "  ::saxpy ");
  CHECK(r.nparams == 2);
  CHECK_STR(r.name, "saxpy");
  cdv_sig_clear(&r);
  cdv_sigs_free(&s);
}

static void t_resolve_template(void) {
  cdv_sigs s = PARSE(template_src);
  cdv_sig r = RESOLVE(&s, "axpy<float>");
  CHECK_STR(r.name, "axpy<float>");
  CHECK(r.nparams == 4 && r.ntparams == 1 && r.line == 2 && !r.extern_c);
  PARAM(&r, 0, "float", "a", CDV_P_F32, 4, 4);
  PARAM(&r, 1, "const float *", "x", CDV_P_PTR, 8, 8);
  POINTEE(&r, 1, CDV_P_F32, 1, 1, 4);
  PARAM(&r, 2, "float *", "y", CDV_P_PTR, 8, 8);
  PARAM(&r, 3, "size_t", "n", CDV_P_U64, 8, 8);
  cdv_sig_clear(&r);
  r = RESOLVE(&s, "&axpy< unsigned  long long >");
  CHECK_STR(r.name, "axpy<unsigned long long>");
  PARAM(&r, 0, "unsigned long long", "a", CDV_P_U64, 8, 8);
  POINTEE(&r, 2, CDV_P_U64, 1, 0, 8);
  cdv_sig_clear(&r);
  r = RESOLVE(&s, "axpy<float4>");
  PARAM(&r, 0, "float4", "a", CDV_P_VEC, 16, 16);
  POINTEE(&r, 1, CDV_P_STRUCT, 1, 1, 16);
  cdv_sig_clear(&r);
  r = RESOLVE(&s, "axpy<__half>");
  PARAM(&r, 0, "__half", "a", CDV_P_F16, 2, 2);
  cdv_sig_clear(&r);
  r = RESOLVE(&s, "axpy<float *>");
  PARAM(&r, 0, "float *", "a", CDV_P_PTR, 8, 8);
  PARAM(&r, 1, "const float **", "x", CDV_P_PTR, 8, 8);
  cdv_sig_clear(&r);
  cdv_sigs_free(&s);
}

static void t_resolve_nontype(void) {
  cdv_sigs s = PARSE(template_src);
  cdv_sig r = RESOLVE(&s, "ns::k<int, 4>");
  CHECK_STR(r.name, "ns::k<int, 4>");
  CHECK(r.nparams == 3);
  PARAM(&r, 0, "int *", "out", CDV_P_PTR, 8, 8);
  PARAM(&r, 1, "const int (*)[4]", "tile", CDV_P_PTR, 8, 8);
  PARAM(&r, 2, "Vec<int, 4>", "v", CDV_P_STRUCT, 0, 0);
  cdv_sig_clear(&r);
  /* arguments split at top-level commas only */
  r = RESOLVE(&s, "ns::k<Pair<int, float>, (3 > 2) ? 8 : 16>");
  PARAM(&r, 0, "Pair<int, float> *", "out", CDV_P_PTR, 8, 8);
  PARAM(&r, 2, "Vec<Pair<int, float>, (3> 2) ? 8 : 16>", "v", CDV_P_STRUCT, 0, 0);
  cdv_sig_clear(&r);
  cdv_sigs_free(&s);
}

static void t_resolve_defaults(void) {
  cdv_sigs s = PARSE(template_src);
  cdv_sig r = RESOLVE(&s, "def<double>");
  CHECK(r.nparams == 3);
  PARAM(&r, 0, "double", "a", CDV_P_F64, 8, 8);
  PARAM(&r, 1, "double *", "b", CDV_P_PTR, 8, 8); /* U = T * */
  PARAM(&r, 2, "Tile<4>", "t", CDV_P_STRUCT, 0, 0);
  cdv_sig_clear(&r);
  r = RESOLVE(&s, "def<int, short, 2>");
  PARAM(&r, 1, "short", "b", CDV_P_I16, 2, 2);
  PARAM(&r, 2, "Tile<2>", "t", CDV_P_STRUCT, 0, 0);
  cdv_sig_clear(&r);
  r = RESOLVE(&s, "alldef<>");
  PARAM(&r, 0, "float", "a", CDV_P_F32, 4, 4);
  cdv_sig_clear(&r);
  cdv_sigs_free(&s);
}

static void t_resolve_packs(void) {
  cdv_sigs s = PARSE(template_src);
  cdv_sig r = RESOLVE(&s, "pack<float, int *, char>");
  CHECK(r.nparams == 5);
  PARAM(&r, 0, "int", "n", CDV_P_I32, 4, 4);
  PARAM(&r, 1, "float", "xs", CDV_P_F32, 4, 4);
  PARAM(&r, 2, "int *", "xs", CDV_P_PTR, 8, 8);
  PARAM(&r, 3, "char", "xs", CDV_P_I8, 1, 1);
  PARAM(&r, 4, "Tuple<float, int *, char>", "all", CDV_P_STRUCT, 0, 0);
  cdv_sig_clear(&r);
  r = RESOLVE(&s, "pack<>");
  CHECK(r.nparams == 2);
  PARAM(&r, 1, "Tuple<>", "all", CDV_P_STRUCT, 0, 0);
  cdv_sig_clear(&r);
  cdv_sigs_free(&s);
}

static void t_resolve_errors(void) {
  cdv_sigs s = PARSE(template_src);
  RESOLVE_ERR(&s, "axpy", "kernel 'axpy' is a template (line 2): compile it with name_expressions = {\"axpy<float>\"}");
  RESOLVE_ERR(&s, "ns::k",
              "kernel 'ns::k' is a template (line 5): compile it with name_expressions = {\"ns::k<float, 1>\"}");
  RESOLVE_ERR(&s, "def", "kernel 'def' is a template (line 8): compile it with name_expressions = {\"def<float>\"}");
  RESOLVE_ERR(&s, "alldef",
              "kernel 'alldef' is a template (line 18): compile it with name_expressions = {\"alldef<>\"}");
  RESOLVE_ERR(&s, "saxpy<float>", "kernel 'saxpy' is not a template (line 13): name it without template arguments");
  RESOLVE_ERR(&s, "over", "kernel 'over' is overloaded (lines 15 and 16): its arguments cannot be checked");
  RESOLVE_ERR(&s, "ref<int &>",
              "line 12: kernel 'ref<int &>': parameter 'x' is a reference (kernel arguments are passed by value)");
  RESOLVE_ERR(&s, "ref<void>", "line 12: kernel 'ref<void>': parameter 'x' has type void");
  RESOLVE_ERR(&s, "ns::k<int>", "too few template arguments for kernel 'ns::k' (line 5): it needs 2, got 1");
  RESOLVE_ERR(&s, "axpy<int, int>", "too many template arguments for kernel 'axpy' (line 2): it takes 1, got 2");
  RESOLVE_ERR(&s, "axpy<int, >", "bad kernel name 'axpy<int,>' (an empty template argument)");
  RESOLVE_ERR(&s, "nope",
              "no kernel 'nope' in the source (it has: axpy, ns::k, def, pack, ref, saxpy, lib::cfun, over, alldef)");
  RESOLVE_ERR(&s, "k",
              "no kernel 'k' in the source (it has: axpy, ns::k, def, pack, ref, saxpy, lib::cfun, over, "
              "alldef)");
  const char *bad[] = {"",     "   ",    "axpy<",   "axpy<float>>", "axpy<float> x", "1axpy",
                       "ns::", "a::::b", "<float>", "axpy(float)",  "axpy<float>::x"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char want[128];
    snprintf(want, sizeof want, "bad kernel name '%s' (expected a name such as \"saxpy\" or \"axpy<float>\")", bad[i]);
    RESOLVE_ERR(&s, bad[i], want);
  }
  cdv_sig r;
  char err[8]; /* a short buffer truncates the message */
  CHECK(cdv_sig_resolve(&s, "nope", &r, err, sizeof err) != 0 && strcmp(err, "no k...") == 0);
  CHECK(cdv_sig_resolve(&s, "nope", &r, NULL, 0) != 0);
  CHECK(cdv_sig_resolve(NULL, "x", &r, NULL, 0) != 0 && cdv_sig_resolve(&s, NULL, &r, NULL, 0) != 0);
  cdv_sigs_free(&s);
  cdv_sigs empty = {0, NULL, 0, NULL};
  RESOLVE_ERR(&empty, "k", "no kernel 'k' in the source (it has no __global__ function)");
}

static void t_resolve_overloaded_template(void) {
  cdv_sigs s = PARSE(template_src);
  cdv_sig r = RESOLVE(&s, "over<float>"); /* one template among the overloads */
  PARAM(&r, 0, "float *", "a", CDV_P_PTR, 8, 8);
  cdv_sig_clear(&r);
  cdv_sigs_free(&s);
}

static void t_resolve_declared_template(void) {
  cdv_sigs s = PARSE(
      "template <typename T> __global__ void k(T *, int);\n"
      "template <typename U> __global__ void k(U *data, int n) { }\n");
  CHECK(s.n == 1);
  cdv_sig r = RESOLVE(&s, "k<double>");
  PARAM(&r, 0, "double *", "data", CDV_P_PTR, 8, 8);
  CHECK(r.ntparams == 1 && strcmp(r.tparams[0], "U") == 0);
  cdv_sig_clear(&r);
  cdv_sigs_free(&s);
}

static void t_resolve_members_kept(void) {
  /* only whole identifiers that are template parameters are replaced: not members, not longer names */
  cdv_sigs s = PARSE(
      "template <typename T> __global__ void k(typename T::value_type *a, Outer::T b, TT c, "
      "T_t d, T e);");
  cdv_sig r = RESOLVE(&s, "k<Foo>");
  CHECK(r.nparams == 5);
  PARAM(&r, 0, "typename Foo::value_type *", "a", CDV_P_PTR, 8, 8);
  PARAM(&r, 1, "Outer::T", "b", CDV_P_STRUCT, 0, 0);
  PARAM(&r, 2, "TT", "c", CDV_P_STRUCT, 0, 0);
  PARAM(&r, 3, "T_t", "d", CDV_P_STRUCT, 0, 0);
  PARAM(&r, 4, "Foo", "e", CDV_P_STRUCT, 0, 0);
  cdv_sig_clear(&r);
  cdv_sigs_free(&s);
}

static void t_kind_names(void) {
  CHECK_STR(cdv_pkind_name(CDV_P_PTR), "pointer");
  CHECK_STR(cdv_pkind_name(CDV_P_I32), "int32");
  CHECK_STR(cdv_pkind_name(CDV_P_U64), "uint64");
  CHECK_STR(cdv_pkind_name(CDV_P_F16), "float16");
  CHECK_STR(cdv_pkind_name(CDV_P_BF16), "bfloat16");
  CHECK_STR(cdv_pkind_name(CDV_P_F64), "float64");
  CHECK_STR(cdv_pkind_name(CDV_P_BOOL), "bool");
  CHECK_STR(cdv_pkind_name(CDV_P_VEC), "vector");
  CHECK_STR(cdv_pkind_name(CDV_P_STRUCT), "struct");
  CHECK_STR(cdv_pkind_name((cdv_pkind)99), "unknown");
}

/* ------------------------------------------------------------ main */

static const struct {
  const char *name;
  void (*fn)(void);
} cases[] = {
    {"saxpy", t_saxpy},
    {"comments and strings", t_comments_strings},
    {"preprocessor lines", t_preprocessor},
    {"#if 0 blocks", t_if0},
    {"extern \"C\"", t_extern_c},
    {"attributes", t_attributes},
    {"templates", t_templates},
    {"specialisations", t_specialisations},
    {"namespaces", t_namespaces},
    {"empty parameter lists", t_empty_lists},
    {"default arguments", t_defaults},
    {"qualifiers", t_qualifiers},
    {"integer spellings", t_integer_spellings},
    {"named scalars", t_named_scalars},
    {"vector types", t_vectors},
    {"pointers", t_pointers},
    {"references", t_references},
    {"arrays", t_arrays},
    {"function pointers", t_function_pointers},
    {"unknown types", t_unknown_types},
    {"unnamed parameters", t_unnamed},
    {"multi-line declarations", t_multiline},
    {"declared then defined", t_declared_then_defined},
    {"macro arguments", t_macro_arguments},
    {"variadic and void", t_variadic_and_void},
    {"limits", t_limits},
    {"line numbers", t_line_numbers},
    {"not NUL-terminated", t_not_terminated},
    {"unterminated input", t_unterminated},
    {"deep nesting", t_deep_nesting},
    {"many kernels", t_many_kernels},
    {"garbage", t_garbage},
    {"resolve plain names", t_resolve_plain},
    {"resolve templates", t_resolve_template},
    {"resolve non-type parameters", t_resolve_nontype},
    {"resolve defaults", t_resolve_defaults},
    {"resolve packs", t_resolve_packs},
    {"resolve errors", t_resolve_errors},
    {"resolve an overloaded template", t_resolve_overloaded_template},
    {"resolve a declared template", t_resolve_declared_template},
    {"resolve keeps members", t_resolve_members_kept},
    {"kind names", t_kind_names},
};

int main(void) {
  int n = (int)(sizeof cases / sizeof cases[0]);
  for (int i = 0; i < n; i++) {
    current = cases[i].name;
    cases[i].fn();
  }
  printf("sig_test: %d cases, %d checks, %d failed\n", n, checks, failures);
  return failures ? 1 : 0;
}
