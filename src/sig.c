/*
 * sig.c: kernel signatures read from CUDA C++ source (see sig.h).
 *
 * Three passes over flat arrays, none recursive, so no input can exhaust the stack:
 *   1. lex: the source becomes tokens (identifiers, numbers, literals, punctuation), with comments,
 *      preprocessor lines and `#if 0` blocks gone: the source scanner's C++ token stream (cdv_scan_lex,
 *      NOTE [token streams] in scan.h). Tokens point into the text they came from, so tokens of different
 *      texts mix freely (resolve splices template arguments into types).
 *   2. scan: one walk over the tokens keeps a stack of braces (namespace, extern "C", other) and, at
 *      each __global__ outside parentheses, reads the declaration around it.
 *   3. parameters: a parameter list is split at top-level commas and each parameter is classified.
 *      resolve re-lexes the stored parameter list text and runs the same code with template arguments.
 */
#include "sig.h"
#include "scan.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ errors and small helpers */

static int fail(char *err, size_t errlen, const char *fmt, ...) {
  if (err != NULL && errlen > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return -1;
}

#define OOM "out of memory"

/* Copy at most cap-1 bytes of s[0..n) and terminate. */
static void copy_str(char *dst, size_t cap, const char *s, size_t n) {
  if (n >= cap) n = cap - 1;
  memcpy(dst, s, n);
  dst[n] = '\0';
}

/* Grow a heap array to hold at least need items (doubling); 0 or -1 when out of memory or too big. */
static int grow(void *pp, int *cap, int need, size_t item) {
  if (need <= *cap) return 0;
  if (need > INT_MAX / 2) return -1;
  int ncap = *cap < 16 ? 16 : *cap;
  while (ncap < need) ncap *= 2;
  void *p = realloc(*(void **)pp, (size_t)ncap * item);
  if (p == NULL) return -1;
  *(void **)pp = p;
  *cap = ncap;
  return 0;
}

/* ------------------------------------------------------------ tokens */

enum { T_IDENT = CDV_T_IDENT, T_NUM = CDV_T_NUM, T_STR = CDV_T_STR, T_CHAR = CDV_T_CHAR, T_PUNCT = CDV_T_PUNCT };

typedef struct tok {
  const char *p;
  unsigned len;
  int line;
  int kind;
} tok;

typedef struct tvec {
  tok *v;
  int n, cap;
} tvec;

static int tvec_push(tvec *tv, tok t) {
  if (grow(&tv->v, &tv->cap, tv->n + 1, sizeof(tok)) != 0) return -1;
  tv->v[tv->n++] = t;
  return 0;
}

static int tis(const tok *t, const char *s) {
  size_t n = strlen(s);
  return t->len == n && memcmp(t->p, s, n) == 0;
}

static int tid(const tok *t, const char *s) { return t->kind == T_IDENT && tis(t, s); }

static int tpunct(const tok *t, char c) { return t->kind == T_PUNCT && t->len == 1 && t->p[0] == c; }

static int tin(const tok *t, const char *const *list) {
  if (t->kind != T_IDENT) return 0;
  for (; *list != NULL; list++)
    if (tis(t, *list)) return 1;
  return 0;
}

static int topen(const tok *t) { return tpunct(t, '(') || tpunct(t, '[') || tpunct(t, '{'); }
static int tclose(const tok *t) { return tpunct(t, ')') || tpunct(t, ']') || tpunct(t, '}'); }

/* Index just past the bracket group opening at t[open], counting (), [] and {} together so that a
 * mismatched closer still ends the group; n when it never closes. */
static int group_end(const tok *t, int open, int n) {
  int depth = 0;
  for (int i = open; i < n; i++) {
    if (topen(&t[i]))
      depth++;
    else if (tclose(&t[i]) && --depth <= 0)
      return i + 1;
  }
  return n;
}

/* Index of the '>' that closes the '<' at t[open] (brackets hide what they hold), or -1. */
static int angle_end(const tok *t, int open, int n) {
  int depth = 0, angle = 0;
  for (int i = open; i < n; i++) {
    if (topen(&t[i]))
      depth++;
    else if (tclose(&t[i]))
      depth -= depth > 0;
    else if (depth == 0 && tpunct(&t[i], '<'))
      angle++;
    else if (depth == 0 && tpunct(&t[i], '>') && --angle == 0)
      return i;
  }
  return -1;
}

static const char *const builtin_types[] = {
    "void",     "bool",       "_Bool",   "char",    "short",    "int",      "long",     "float", "double", "signed",
    "unsigned", "__signed__", "wchar_t", "char8_t", "char16_t", "char32_t", "__int128", "auto",  NULL};
static const char *const cv_quals[] = {"const", "volatile", NULL};
/* dropped from parameters: they change nothing about how an argument is passed */
static const char *const dropped_quals[] = {"__restrict__",      "__restrict", "restrict",
                                            "__grid_constant__", "register",   NULL};
/* identifiers that take a parenthesised argument and are not the declared name */
static const char *const attr_calls[] = {"__launch_bounds__",
                                         "__maxnreg__",
                                         "__cluster_dims__",
                                         "__block_size__",
                                         "__attribute__",
                                         "__declspec",
                                         "alignas",
                                         "_Alignas",
                                         "__align__",
                                         "__builtin_align__",
                                         "decltype",
                                         "__decltype",
                                         "typeof",
                                         "__typeof__",
                                         "noexcept",
                                         "throw",
                                         "_Pragma",
                                         "__pragma",
                                         "asm",
                                         "__asm__",
                                         "sizeof",
                                         "alignof",
                                         NULL};
static const char *const tag_words[] = {"struct", "class", "union", "enum", "typename", "template", NULL};

/* ------------------------------------------------------------ string building */

/* A string builder over a fixed buffer (truncating) or the heap (growing). */
typedef struct sbuf {
  char *p;
  size_t n, cap;
  int heap, trunc, oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
  if (b->heap && b->n + n + 1 > b->cap && !b->oom) {
    size_t ncap = b->cap ? b->cap : 64;
    while (ncap < b->n + n + 1) ncap *= 2;
    char *p = realloc(b->p, ncap);
    if (p == NULL)
      b->oom = 1;
    else
      b->p = p, b->cap = ncap;
  }
  if (b->cap == 0) return;
  if (b->n + n + 1 > b->cap) {
    n = b->cap - 1 - b->n;
    b->trunc = 1;
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = '\0';
}

/* Whether a space goes between two tokens when a type is written out: "const float *", "float **",
 * "Foo<int, 4>", "std::size_t", "void (*)(int)". The text lexes back to the same tokens. */
static int need_space(const tok *a, const tok *b) {
  int aw = a->kind != T_PUNCT, bw = b->kind != T_PUNCT;
  if (aw && bw) return 1;
  if (tis(a, "::") || tis(b, "::")) return 0;
  if (tpunct(b, ',') || tpunct(b, ')') || tpunct(b, ']') || tpunct(b, '>') || tpunct(b, '[')) return 0;
  if (tpunct(a, '(') || tpunct(a, '[') || tpunct(a, '<')) return 0;
  if (tpunct(b, '<')) return !(aw || tpunct(a, '>'));
  if (tis(b, "...")) return tpunct(a, '.');
  if (tpunct(b, '*') || tpunct(b, '&')) return !(tpunct(a, '*') || tpunct(a, '&'));
  if (tpunct(a, '*') || tpunct(a, '&')) return !(bw || tpunct(b, '(') || tpunct(b, ')'));
  if (tpunct(b, '(')) return !tpunct(a, ')');
  return 1;
}

static void sb_tok(sbuf *b, const tok *prev, const tok *t) {
  if (prev != NULL && need_space(prev, t)) sb_put(b, " ", 1);
  sb_put(b, t->p, t->len);
}

/* t[0..n), the first spaced after prev (NULL: nothing before it) */
static void sb_toks(sbuf *b, const tok *prev, const tok *t, int n) {
  for (int i = 0; i < n; i++) sb_tok(b, i ? &t[i - 1] : prev, &t[i]);
}

/* Write into a fixed buffer; a text that does not fit ends in "...". */
static sbuf sb_fixed(char *buf, size_t cap) {
  sbuf b = {buf, 0, cap, 0, 0, 0};
  buf[0] = '\0';
  return b;
}

static void sb_finish_fixed(sbuf *b) {
  if (b->trunc && b->cap > 4) memcpy(b->p + b->cap - 4, "...", 4);
}

/* ------------------------------------------------------------ lexer */

/* The tokens of src[0..len) (the scanner's C++ token stream, NOTE [token streams] in scan.h) appended to out,
 * each pointing into src; -1 when out of memory. */
static int lex(const char *src, size_t len, tvec *out) {
  cdv_toks t = {0};
  int rc = cdv_scan_lex(src, len, &t);
  for (int i = 0; rc == 0 && i < t.n; i++) {
    tok k = {src + t.v[i].off, (unsigned)t.v[i].len, t.v[i].line, t.v[i].kind};
    rc = tvec_push(out, k);
  }
  free(t.v);
  return rc;
}

/* ------------------------------------------------------------ classifying a type */

typedef struct tinfo {
  cdv_pkind kind;
  int size, align;
  cdv_pkind elem;
  int nelem, is_void;
} tinfo;

int cdv_pkind_size(cdv_pkind k) {
  switch (k) {
    case CDV_P_I8:
    case CDV_P_U8:
    case CDV_P_BOOL: return 1;
    case CDV_P_I16:
    case CDV_P_U16:
    case CDV_P_F16:
    case CDV_P_BF16: return 2;
    case CDV_P_I32:
    case CDV_P_U32:
    case CDV_P_F32: return 4;
    case CDV_P_I64:
    case CDV_P_U64:
    case CDV_P_F64:
    case CDV_P_PTR: return 8;
    default: return 0;
  }
}

static int is_scalar(cdv_pkind k) { return k != CDV_P_PTR && k != CDV_P_VEC && k != CDV_P_STRUCT; }

static tinfo info_of(cdv_pkind k) {
  tinfo ti = {k, cdv_pkind_size(k), cdv_pkind_size(k), k, 0, 0};
  return ti;
}

static tinfo vec_of(cdv_pkind lane, int lanes, int size, int align) {
  tinfo ti = {CDV_P_VEC, size, align, lane, lanes, 0};
  return ti;
}

/* Scalars known by name: <stdint.h>, <stddef.h>, cuda_fp16.h, cuda_bf16.h and the driver's handle types. */
static const struct {
  const char *name;
  cdv_pkind kind;
} named_scalars[] = {
    {"int8_t", CDV_P_I8},
    {"int16_t", CDV_P_I16},
    {"int32_t", CDV_P_I32},
    {"int64_t", CDV_P_I64},
    {"uint8_t", CDV_P_U8},
    {"uint16_t", CDV_P_U16},
    {"uint32_t", CDV_P_U32},
    {"uint64_t", CDV_P_U64},
    {"size_t", CDV_P_U64},
    {"ssize_t", CDV_P_I64},
    {"ptrdiff_t", CDV_P_I64},
    {"intptr_t", CDV_P_I64},
    {"uintptr_t", CDV_P_U64},
    {"intmax_t", CDV_P_I64},
    {"uintmax_t", CDV_P_U64},
    {"uint", CDV_P_U32},
    {"ushort", CDV_P_U16},
    {"ulong", CDV_P_U64},
    {"__half", CDV_P_F16},
    {"half", CDV_P_F16},
    {"__nv_bfloat16", CDV_P_BF16},
    {"nv_bfloat16", CDV_P_BF16},
    {"cudaTextureObject_t", CDV_P_U64},
    {"cudaSurfaceObject_t", CDV_P_U64},
    {"CUdeviceptr", CDV_P_U64},
    {"CUtexObject", CDV_P_U64},
    {"CUsurfObject", CDV_P_U64},
};

/* Lane types of CUDA's vector types (vector_types.h): char1 ... double4. */
static const struct {
  const char *name;
  cdv_pkind lane;
} vec_lanes[] = {
    {"char", CDV_P_I8},      {"uchar", CDV_P_U8},      {"short", CDV_P_I16}, {"ushort", CDV_P_U16},
    {"int", CDV_P_I32},      {"uint", CDV_P_U32},      {"long", CDV_P_I64},  {"ulong", CDV_P_U64},
    {"longlong", CDV_P_I64}, {"ulonglong", CDV_P_U64}, {"float", CDV_P_F32}, {"double", CDV_P_F64},
};

/* A CUDA vector type by name; 0 when t is not one. Alignment as vector_types.h declares it: 2 lanes
 * align to their size, 3 lanes to one lane, 4 lanes to their size up to 16 (double4_32a asks for 32). */
static int vector_type(const tok *t, tinfo *ti) {
  if (tis(t, "__half2") || tis(t, "half2")) return *ti = vec_of(CDV_P_F16, 2, 4, 4), 1;
  if (tis(t, "__nv_bfloat162") || tis(t, "nv_bfloat162")) return *ti = vec_of(CDV_P_BF16, 2, 4, 4), 1;
  if (tis(t, "dim3")) return *ti = vec_of(CDV_P_U32, 3, 12, 4), 1;
  for (size_t i = 0; i < sizeof vec_lanes / sizeof vec_lanes[0]; i++) {
    size_t bn = strlen(vec_lanes[i].name), n = t->len;
    if (n < bn + 1 || memcmp(t->p, vec_lanes[i].name, bn) != 0) continue;
    const char *r = t->p + bn;
    int lanes = r[0] - '0', es = cdv_pkind_size(vec_lanes[i].lane), align;
    if (lanes < 1 || lanes > 4) continue;
    if (n == bn + 1)
      align = lanes == 3 ? es : lanes * es > 16 ? 16 : lanes * es;
    else if (n == bn + 5 && lanes == 4 && es == 8 && memcmp(r + 1, "_16a", 4) == 0)
      align = 16;
    else if (n == bn + 5 && lanes == 4 && es == 8 && memcmp(r + 1, "_32a", 4) == 0)
      align = 32;
    else
      continue;
    *ti = vec_of(vec_lanes[i].lane, lanes, lanes * es, align);
    return 1;
  }
  return 0;
}

static tinfo named_type(const tok *t) {
  tinfo ti = info_of(CDV_P_STRUCT);
  for (size_t i = 0; i < sizeof named_scalars / sizeof named_scalars[0]; i++)
    if (tis(t, named_scalars[i].name)) return info_of(named_scalars[i].kind);
  vector_type(t, &ti);
  return ti;
}

/* A type spelled with keywords only: "unsigned long int", "short", "signed char", "long double" ... */
static tinfo builtin_type(const tok *t, int n) {
  int u = 0, s = 0, sh = 0, lg = 0, in = 0, ch = 0, others = 0;
  const tok *o = NULL;
  for (int i = 0; i < n; i++) {
    const tok *x = &t[i];
    if (tin(x, cv_quals)) continue;
    if (tis(x, "unsigned"))
      u++;
    else if (tis(x, "signed") || tis(x, "__signed__"))
      s++;
    else if (tis(x, "short"))
      sh++;
    else if (tis(x, "long"))
      lg++;
    else if (tis(x, "int"))
      in++;
    else if (tis(x, "char"))
      ch++;
    else
      o = x, others++;
  }
  tinfo bad = info_of(CDV_P_STRUCT);
  if ((u && s) || others > 1) return bad;
  if (o != NULL) {
    if (tis(o, "double") && !(u || s || sh || in || ch) && lg <= 1) return info_of(lg ? CDV_P_STRUCT : CDV_P_F64);
    if (u || s || sh || lg || in || ch) return bad;
    if (tis(o, "void")) return bad.is_void = 1, bad;
    if (tis(o, "bool") || tis(o, "_Bool")) return info_of(CDV_P_BOOL);
    if (tis(o, "float")) return info_of(CDV_P_F32);
    if (tis(o, "wchar_t")) return info_of(CDV_P_I32);
    if (tis(o, "char8_t")) return info_of(CDV_P_U8);
    if (tis(o, "char16_t")) return info_of(CDV_P_U16);
    if (tis(o, "char32_t")) return info_of(CDV_P_U32);
    return bad; /* __int128, auto */
  }
  if (ch) return (sh || lg || in || ch > 1) ? bad : info_of(u ? CDV_P_U8 : CDV_P_I8);
  if (sh) return (lg || sh > 1) ? bad : info_of(u ? CDV_P_U16 : CDV_P_I16);
  if (lg) return lg > 2 ? bad : info_of(u ? CDV_P_U64 : CDV_P_I64); /* LP64: long is 8 bytes */
  return in > 1 ? bad : info_of(u ? CDV_P_U32 : CDV_P_I32);
}

/* The type named by t[0..n), the part of a declaration before any '*': keywords, or one name that
 * may be qualified by std:: or cuda::std:: ("std::size_t"). Anything else is a struct to us. */
static tinfo base_type(const tok *t, int n) {
  int words = 0, builtins = 0, state = 0; /* state: 0 start, 1 after a name, 2 after "::" */
  const tok *last = NULL, *prev = NULL;
  for (int i = 0; i < n; i++) {
    const tok *x = &t[i];
    if (tin(x, cv_quals) || tid(x, "typename")) continue;
    if (tin(x, tag_words)) return info_of(CDV_P_STRUCT);
    words++;
    builtins += tin(x, builtin_types);
    if (tis(x, "::")) {
      if (state == 2 || (state == 1 && !(tid(prev, "std") || tid(prev, "cuda"))))
        state = -1;
      else if (state >= 0)
        state = 2;
    } else if (x->kind == T_IDENT && state != 1 && state >= 0) {
      state = 1;
    } else {
      state = -1;
    }
    prev = last = x;
  }
  if (words > 0 && builtins == words) return builtin_type(t, n);
  if (state == 1 && last != NULL) return named_type(last);
  return info_of(CDV_P_STRUCT);
}

/* Where things sit at the top level of t[0..n) (outside brackets and template arguments). */
typedef struct layout {
  int paren; /* first '(' or -1 */
  int array; /* first '[' or -1 */
  int amp; /* a '&' (a reference) */
} layout;

static layout layout_of(const tok *t, int n) {
  layout l = {-1, -1, 0};
  int depth = 0, angle = 0;
  for (int i = 0; i < n; i++) {
    const tok *x = &t[i];
    if (topen(x)) {
      /* decltype(x) names a type: its parentheses declare nothing */
      int named = i > 0 && tin(&t[i - 1], attr_calls);
      if (depth == 0 && angle == 0 && tpunct(x, '(') && l.paren < 0 && !named) l.paren = i;
      if (depth == 0 && angle == 0 && tpunct(x, '[') && l.array < 0) l.array = i;
      depth++;
    } else if (tclose(x)) {
      depth -= depth > 0;
    } else if (depth == 0) {
      if (tpunct(x, '<'))
        angle++;
      else if (tpunct(x, '>'))
        angle -= angle > 0;
      else if (tpunct(x, '&') && angle == 0)
        l.amp = 1;
    }
  }
  return l;
}

/* Whether the top level of t[a..b) holds a const, and the positions of its top-level '*'s. */
static int top_const(const tok *t, int a, int b) {
  int depth = 0, angle = 0;
  for (int i = a; i < b; i++) {
    if (topen(&t[i]))
      depth++;
    else if (tclose(&t[i]))
      depth -= depth > 0;
    else if (depth == 0 && tpunct(&t[i], '<'))
      angle++;
    else if (depth == 0 && tpunct(&t[i], '>'))
      angle -= angle > 0;
    else if (depth == 0 && angle == 0 && tid(&t[i], "const"))
      return 1;
  }
  return 0;
}

/* The k-th top-level '*' of t[0..n) (k from 0), or n; count of them in *nstars when k < 0. */
static int top_star(const tok *t, int n, int k, int *nstars) {
  int depth = 0, angle = 0, seen = 0;
  for (int i = 0; i < n; i++) {
    if (topen(&t[i]))
      depth++;
    else if (tclose(&t[i]))
      depth -= depth > 0;
    else if (depth == 0 && tpunct(&t[i], '<'))
      angle++;
    else if (depth == 0 && tpunct(&t[i], '>'))
      angle -= angle > 0;
    else if (depth == 0 && angle == 0 && tpunct(&t[i], '*') && seen++ == k)
      return i;
  }
  if (nstars != NULL) *nstars = seen;
  return n;
}

enum { C_OK, C_REF, C_VOID };

static void set_ptr(cdv_param *p, int depth, cdv_pkind elem, int pointee_size, int pointee_const) {
  p->kind = CDV_P_PTR;
  p->size = p->align = 8;
  p->depth = depth;
  p->elem = elem;
  p->pointee_size = pointee_size;
  p->pointee_const = pointee_const;
}

/* Whether the parentheses at t[po] hold a declarator ("(*fn)", "(&r)", "(C::*pm)") rather than the
 * parameters of a function type ("void (int *)"). */
static int declarator_parens(const tok *t, int po, int n) {
  if (po + 1 >= n) return 0;
  const tok *a = &t[po + 1];
  return tpunct(a, '*') || tpunct(a, '&') || tpunct(a, '^') ||
         (a->kind == T_IDENT && po + 2 < n && tis(&t[po + 2], "::"));
}

/* A declarator in parentheses: "void (*)(int)" (a function pointer), "float (*)[4]" (a pointer to
 * arrays); a function type "void (int)" decays to a pointer. */
static int paren_type(const tok *t, int n, int po, cdv_param *p) {
  int ge = group_end(t, po, n), stars = 0;
  if (po + 1 < n && tpunct(&t[po + 1], '&')) return C_REF;
  if (declarator_parens(t, po, n)) top_star(t + po + 1, ge - po - 1, -1, &stars);
  set_ptr(p, stars ? stars : 1, CDV_P_STRUCT, stars > 1 ? 8 : 0, 0);
  return C_OK;
}

/* Classify a parameter type (its name already removed): kind, size, alignment, pointee. */
static int classify(const tok *t, int n, cdv_param *p) {
  layout l = layout_of(t, n);
  if (l.amp) return C_REF;
  if (l.paren >= 0 && (l.array < 0 || l.paren < l.array)) return paren_type(t, n, l.paren, p);
  int end = l.array >= 0 ? l.array : n, stars = 0, arrays = 0;
  for (int i = end; i < n; i = group_end(t, i, n)) arrays += tpunct(&t[i], '[');
  int first = top_star(t, end, 0, NULL);
  top_star(t, end, -1, &stars);
  tinfo bi = base_type(t, first);
  int depth = stars + (arrays > 0);
  if (depth == 0) {
    if (bi.is_void) return C_VOID;
    p->kind = bi.kind, p->size = bi.size, p->align = bi.align, p->elem = bi.elem, p->nelem = bi.nelem;
    return C_OK;
  }
  /* the cv-qualifiers of what the outermost pointer points to: after the last '*' for a decayed array,
   * else between the last two */
  int seg = arrays ? stars : stars - 1;
  int a = seg == 0 ? 0 : top_star(t, end, seg - 1, NULL) + 1, b = top_star(t, end, seg, NULL);
  cdv_pkind elem = depth == 1 && arrays <= 1 && is_scalar(bi.kind) ? bi.kind : CDV_P_STRUCT;
  int psize = arrays > 1 ? 0 : depth == 1 ? bi.size : 8;
  set_ptr(p, depth, elem, psize, top_const(t, a, b));
  return C_OK;
}

/* The written type of t[0..n) with arrays decayed: "float [10]" is "float *", "float [2][3]" is
 * "float (*)[3]". */
static void type_text(const tok *t, int n, char *buf, size_t cap) {
  static const tok star = {"*", 1, 0, T_PUNCT}, lp = {"(", 1, 0, T_PUNCT}, rp = {")", 1, 0, T_PUNCT};
  layout l = layout_of(t, n);
  sbuf b = sb_fixed(buf, cap);
  if (l.array < 0 || (l.paren >= 0 && l.paren < l.array)) {
    sb_toks(&b, NULL, t, n);
  } else {
    int second = group_end(t, l.array, n);
    const tok *prev = l.array > 0 ? &t[l.array - 1] : NULL;
    sb_toks(&b, NULL, t, l.array);
    if (second >= n) {
      sb_tok(&b, prev, &star);
    } else {
      sb_tok(&b, prev, &lp);
      sb_tok(&b, &lp, &star);
      sb_tok(&b, &star, &rp);
      sb_toks(&b, &rp, t + second, n - second);
    }
  }
  sb_finish_fixed(&b);
}

/* ------------------------------------------------------------ parameters */

/* Whether t[0..k) holds something other than cv-qualifiers, so that t[k] can be a name, not the type. */
static int type_before(const tok *t, int k) {
  for (int i = 0; i < k; i++)
    if (!tin(&t[i], cv_quals)) return 1;
  return 0;
}

static int can_name(const tok *t) {
  return t->kind == T_IDENT && !tin(t, builtin_types) && !tin(t, cv_quals) && !tin(t, tag_words) && !tin(t, attr_calls);
}

/* The declared name in the parenthesised declarator t[po..ge): "(*fn)", "(*const fn[3])", "(C::*pm)". */
static int name_in_parens(const tok *t, int po, int ge) {
  int depth = 0, name = -1;
  for (int i = po; i < ge; i++) {
    if (topen(&t[i]))
      depth++;
    else if (tclose(&t[i]))
      depth--;
    else if (depth == 1 && can_name(&t[i]) && !(i + 1 < ge && tis(&t[i + 1], "::")))
      name = i;
  }
  return name;
}

/* Index of the declared name in the parameter t[0..n), or -1 when it has none ("float *", "size_t"). */
static int find_name(const tok *t, int n) {
  layout l = layout_of(t, n);
  if (l.paren >= 0 && (l.array < 0 || l.paren < l.array)) {
    int po = l.paren;
    if (declarator_parens(t, po, n)) return name_in_parens(t, po, group_end(t, po, n));
    /* a function type "void cb(int)" */
    if (po >= 1 && can_name(&t[po - 1]) && type_before(t, po - 1) && !(po >= 2 && tis(&t[po - 2], "::"))) return po - 1;
    return -1;
  }
  int last = (l.array >= 0 ? l.array : n) - 1;
  if (last < 1 || !can_name(&t[last])) return -1;
  const tok *before = &t[last - 1];
  if (tis(before, "::") || tin(before, tag_words) || tpunct(before, '.')) return -1;
  return type_before(t, last) ? last : -1;
}

/* Template arguments bound to template parameters, for resolve. */
typedef struct binding {
  const tok *name; /* NULL: unnamed parameter */
  int pack;
  int span0, nspans; /* its arguments: spans[span0 ..], one unless a pack */
} binding;

typedef struct binds {
  binding *b;
  int n;
  int *off, *cnt; /* spans: tokens bt[off .. off+cnt) */
  tvec *bt;
} binds;

/* What reading a parameter list needs; the scratch vectors are reused from list to list. */
typedef struct pctx {
  char *err;
  size_t errlen;
  const char *kernel; /* name for messages */
  int line; /* >0: messages name this line (resolve reads text that has no lines) */
  const binds *bd; /* template arguments, or NULL */
  tvec f, x; /* scratch: a filtered parameter, a substituted one */
  cdv_param *v; /* the list being built */
  int n, cap;
} pctx;

static void pctx_free(pctx *c) {
  free(c->f.v);
  free(c->x.v);
  free(c->v);
}

static int pfail(pctx *c, int line, const char *fmt, const char *a, int idx) {
  char what[96];
  if (a != NULL && a[0] != '\0')
    snprintf(what, sizeof what, "'%s'", a);
  else
    snprintf(what, sizeof what, "%d", idx);
  char msg[160];
  snprintf(msg, sizeof msg, fmt, what);
  return fail(c->err, c->errlen, "line %d: kernel '%s': %s", c->line > 0 ? c->line : line, c->kernel, msg);
}

/* Keep t[0..n) but qualifiers and attributes that do not change how the argument is passed. */
static int filter_param(pctx *c, const tok *t, int n) {
  c->f.n = 0;
  for (int i = 0; i < n; i++) {
    if (tin(&t[i], dropped_quals)) continue;
    if (i + 1 < n && tpunct(&t[i + 1], '(') &&
        (tid(&t[i], "__attribute__") || tid(&t[i], "__align__") || tid(&t[i], "alignas") || tid(&t[i], "__declspec"))) {
      i = group_end(t, i + 1, n) - 1;
      continue;
    }
    if (i + 1 < n && tpunct(&t[i], '[') && tpunct(&t[i + 1], '[')) { /* [[attribute]] */
      i = group_end(t, i, n) - 1;
      continue;
    }
    if (tvec_push(&c->f, t[i]) != 0) return fail(c->err, c->errlen, OOM);
  }
  return 0;
}

/* Read one parameter t[0..n) (its default argument already cut off) into the list. */
static int finish_param(pctx *c, const tok *t, int n, int line) {
  int idx = c->n + 1;
  if (filter_param(c, t, n) != 0) return -1;
  tok *f = c->f.v;
  int m = c->f.n;
  if (m == 0) return pfail(c, line, "parameter %s is empty", NULL, idx);
  if (m == 1 && tis(&f[0], "..."))
    return fail(c->err, c->errlen, "line %d: kernel '%s' takes a variable argument list, which cuda does not allow",
                c->line > 0 ? c->line : line, c->kernel);
  if (grow(&c->v, &c->cap, c->n + 1, sizeof(cdv_param)) != 0) return fail(c->err, c->errlen, OOM);
  cdv_param *p = &c->v[c->n];
  memset(p, 0, sizeof *p);
  int k = find_name(f, m);
  if (k >= 0) {
    copy_str(p->name, sizeof p->name, f[k].p, f[k].len);
    memmove(&f[k], &f[k + 1], (size_t)(m - k - 1) * sizeof(tok));
    m--;
  }
  int r = classify(f, m, p);
  if (r == C_REF)
    return pfail(c, line, "parameter %s is a reference (kernel arguments are passed by value)", p->name, idx);
  if (r == C_VOID) return pfail(c, line, "parameter %s has type void", p->name, idx);
  type_text(f, m, p->type, sizeof p->type);
  c->n++;
  return 0;
}

/* The binding of an identifier, unless it is a member ("::T", ".T"), or NULL. */
static const binding *bound(const binds *bd, const tok *t, int i) {
  if (t[i].kind != T_IDENT || (i > 0 && (tis(&t[i - 1], "::") || tpunct(&t[i - 1], '.')))) return NULL;
  for (int j = 0; j < bd->n; j++)
    if (bd->b[j].name != NULL && bd->b[j].name->len == t[i].len && memcmp(bd->b[j].name->p, t[i].p, t[i].len) == 0)
      return &bd->b[j];
  return NULL;
}

static int push_span(const binds *bd, int s, tvec *out) {
  for (int k = 0; k < bd->cnt[s]; k++) {
    tok y = bd->bt->v[bd->off[s] + k]; /* a copy: out may be bd->bt, which the push can move */
    if (tvec_push(out, y) != 0) return -1;
  }
  return 0;
}

/* Append t[0..n) to out with template parameters replaced by their arguments; only the first nb
 * bindings count. Inside an expansion of a parameter pack, elem picks the pack's element and "..." goes;
 * elsewhere (elem < 0) a pack stands for all its elements, separated by commas. -1: out of memory. */
static int subst(const binds *bd, int nb, const tok *t, int n, int elem, tvec *out) {
  static const tok comma = {",", 1, 0, T_PUNCT};
  binds lim = *bd;
  lim.n = nb;
  for (int i = 0; i < n; i++) {
    const binding *b = bound(&lim, t, i);
    int r = 0;
    if (elem >= 0 && tis(&t[i], "...")) continue;
    if (b == NULL)
      r = tvec_push(out, t[i]);
    else if (!b->pack)
      r = push_span(bd, b->span0, out);
    else if (elem >= 0)
      r = elem < b->nspans ? push_span(bd, b->span0 + elem, out) : 0;
    else {
      for (int e = 0; e < b->nspans && r == 0; e++)
        r = (e ? tvec_push(out, comma) : 0) || push_span(bd, b->span0 + e, out);
      if (i + 1 < n && tis(&t[i + 1], "...")) i++;
    }
    if (r != 0) return -1;
  }
  return 0;
}

/* Whether tokens [s, e) hold a "..." outside brackets and angle brackets: "Ts... xs" or "typename... Ts" does,
 * "Tuple<Ts...> t" does not. */
static int top_level_ellipsis(const tok *t, int s, int e) {
  int depth = 0, angle = 0, found = 0;
  for (int i = s; i < e; i++) {
    if (topen(&t[i]))
      depth++;
    else if (tclose(&t[i]))
      depth -= depth > 0;
    else if (depth == 0 && tpunct(&t[i], '<'))
      angle++;
    else if (depth == 0 && tpunct(&t[i], '>'))
      angle -= angle > 0;
    else if (depth == 0 && angle == 0 && tis(&t[i], "..."))
      found = 1;
  }
  return found;
}

/* A parameter with template arguments: "Ts... xs" becomes one parameter per element of the pack. */
static int expand_param(pctx *c, const tok *t, int n, int line) {
  int packlen = -1, expands = top_level_ellipsis(t, 0, n); /* "Tuple<Ts...> t" is one parameter */
  for (int i = 0; expands && i < n; i++) {
    const binding *b = bound(c->bd, t, i);
    if (b == NULL || !b->pack) continue;
    if (packlen >= 0 && packlen != b->nspans)
      return pfail(c, line, "parameter %s expands packs of different lengths", NULL, c->n + 1);
    packlen = b->nspans;
  }
  if (packlen < 0) {
    c->x.n = 0;
    if (subst(c->bd, c->bd->n, t, n, -1, &c->x) != 0) return fail(c->err, c->errlen, OOM);
    return finish_param(c, c->x.v, c->x.n, line);
  }
  for (int e = 0; e < packlen; e++) {
    c->x.n = 0;
    if (subst(c->bd, c->bd->n, t, n, e, &c->x) != 0) return fail(c->err, c->errlen, OOM);
    if (finish_param(c, c->x.v, c->x.n, line) != 0) return -1;
  }
  return 0;
}

/* Read the parameter list t[0..n) (inside the parentheses) into c->v[0..c->n). */
static int parse_params(pctx *c, const tok *t, int n) {
  c->n = 0;
  if (n == 0 || (n == 1 && tid(&t[0], "void"))) return 0;
  int s = 0, depth = 0, angle = 0, eq = -1;
  for (int i = 0; i <= n; i++) {
    if (i == n || (depth == 0 && angle == 0 && tpunct(&t[i], ','))) {
      int end = eq < 0 ? i : eq, line = s < n ? t[s].line : t[n - 1].line;
      int r = c->bd ? expand_param(c, t + s, end - s, line) : finish_param(c, t + s, end - s, line);
      if (r != 0) return -1;
      s = i + 1, eq = -1, depth = angle = 0;
    } else if (topen(&t[i])) {
      depth++;
    } else if (tclose(&t[i])) {
      depth -= depth > 0;
    } else if (depth == 0 && eq < 0) {
      /* template arguments hide commas; after '=' a '<' is a comparison: "int n = a < b" */
      if (tpunct(&t[i], '<'))
        angle++;
      else if (tpunct(&t[i], '>'))
        angle -= angle > 0;
      else if (tpunct(&t[i], '=') && angle == 0)
        eq = i;
    }
  }
  return 0;
}

/* ------------------------------------------------------------ template parameter lists */

enum { TP_TYPE, TP_VALUE, TP_TEMPLATE };

typedef struct tparam {
  const tok *name; /* NULL when unnamed */
  int kind, pack;
  int def, ndef; /* default argument: tokens [def, def+ndef) of the clause, ndef 0 when none */
} tparam;

static tparam one_tparam(const tok *t, int s, int e, int eq, int end) {
  tparam tp = {NULL, TP_VALUE, 0, 0, 0};
  if (tid(&t[s], "typename") || tid(&t[s], "class"))
    tp.kind = TP_TYPE;
  else if (tid(&t[s], "template"))
    tp.kind = TP_TEMPLATE;
  tp.pack = top_level_ellipsis(t, s, e);
  if (can_name(&t[e - 1]) && type_before(t + s, e - 1 - s)) tp.name = &t[e - 1];
  if (eq >= 0) tp.def = eq + 1, tp.ndef = end - eq - 1;
  return tp;
}

/* Split the template parameter list t[0..n) (inside the angle brackets); fills at most max entries
 * and returns how many there are. */
static int parse_tclause(const tok *t, int n, tparam *tp, int max) {
  int count = 0, s = 0, depth = 0, angle = 0, eq = -1;
  for (int i = 0; i <= n; i++) {
    if (i == n || (depth == 0 && angle == 0 && tpunct(&t[i], ','))) {
      int e = eq < 0 ? i : eq;
      if (e > s && count < max) tp[count] = one_tparam(t, s, e, eq, i);
      count += e > s;
      s = i + 1, eq = -1;
    } else if (topen(&t[i])) {
      depth++;
    } else if (tclose(&t[i])) {
      depth -= depth > 0;
    } else if (depth == 0 && tpunct(&t[i], '<')) {
      angle++;
    } else if (depth == 0 && tpunct(&t[i], '>')) {
      angle -= angle > 0;
    } else if (depth == 0 && angle == 0 && eq < 0 && tpunct(&t[i], '=')) {
      eq = i;
    }
  }
  return count;
}

/* ------------------------------------------------------------ finding kernels */

/* One open brace: what to restore when it closes. */
typedef struct scope {
  int pdepth, extern_c, code_depth;
  size_t prefix_len;
} scope;

typedef struct parser {
  const tok *t;
  int n;
  char *err;
  size_t errlen;
  scope *sc; /* every open brace, so that deep nesting costs heap, not stack */
  int nsc, capsc;
  sbuf prefix; /* the enclosing named namespaces: "a::b" */
  int pdepth; /* open '(' and '[': a __global__ inside them is a macro argument */
  int extern_c; /* inside extern "C" { } */
  int code_depth; /* open braces that are not namespaces or linkage blocks: 0 at namespace scope */
  int gcap;
  int pre_stmt, pre_pos, pre_flags; /* global_at's look at the declaration so far, kept while stmt stays */
  int stmt; /* first token of the current declaration */
  cdv_sigs *out;
  int cap;
  unsigned *hash; /* of each kernel's name */
  int hcap;
  int *slots; /* open addressing on hash, to find a redeclaration: kernel index + 1, 0 empty */
  int nslots; /* a power of two, more than twice the kernels */
  pctx pc;
} parser;

/* What a declaration says before its __global__. */
typedef struct prefix_info {
  int extern_c;
  int ts, te; /* its template parameter list: tokens [ts, te), ts < 0 when none */
} prefix_info;

static void scope_names(parser *ps, int q, int j) {
  const tok *t = ps->t;
  int skip = q > ps->stmt && tid(&t[q - 1], "inline"); /* inline namespaces: names may leave them out */
  for (int m = q + 1; m <= j; m++) {
    if (tid(&t[m], "inline"))
      skip = 1;
    else if (t[m].kind != T_IDENT)
      continue;
    else if (skip)
      skip = 0;
    else {
      if (ps->prefix.n > 0) sb_put(&ps->prefix, "::", 2);
      sb_put(&ps->prefix, t[m].p, t[m].len);
    }
  }
}

/* '{' at t[i]: a namespace ("namespace a::b {", anonymous ones add no name), extern "C" or "C++", or
 * anything else (a body, a class, an initialiser). */
static int open_brace(parser *ps, int i) {
  if (grow(&ps->sc, &ps->capsc, ps->nsc + 1, sizeof(scope)) != 0) return fail(ps->err, ps->errlen, OOM);
  scope s = {ps->pdepth, ps->extern_c, ps->code_depth, ps->prefix.n};
  ps->sc[ps->nsc++] = s;
  const tok *t = ps->t;
  int j = i - 1, k = j, q = -1;
  if (j - 1 >= ps->stmt && t[j].kind == T_STR && tid(&t[j - 1], "extern")) {
    ps->extern_c = tis(&t[j], "\"C\"");
    return 0;
  }
  while (k >= ps->stmt && (t[k].kind == T_IDENT || tis(&t[k], "::"))) k--;
  for (int m = k + 1; m <= j; m++)
    if (tid(&t[m], "namespace")) q = m;
  if (q >= 0)
    scope_names(ps, q, j);
  else
    ps->code_depth++;
  return ps->prefix.oom ? fail(ps->err, ps->errlen, OOM) : 0;
}

static void close_brace(parser *ps) {
  if (ps->nsc == 0) return; /* a stray '}' */
  scope s = ps->sc[--ps->nsc];
  ps->pdepth = s.pdepth; /* also ends a '(' left open inside the braces */
  ps->extern_c = s.extern_c;
  ps->code_depth = s.code_depth;
  ps->prefix.n = s.prefix_len;
  if (ps->prefix.p != NULL) ps->prefix.p[s.prefix_len] = '\0';
}

/* The tokens of the declaration before its __global__ at t[g]: extern "C", a template parameter list.
 * -1 for an explicit specialisation (template<>) or instantiation (template without <): the primary
 * template describes those. */
static int read_prefix(parser *ps, int g, prefix_info *d) {
  const tok *t = ps->t;
  for (int k = ps->stmt; k < g; k++) {
    if (tid(&t[k], "extern") && k + 1 < g && t[k + 1].kind == T_STR) {
      d->extern_c = tis(&t[k + 1], "\"C\"");
    } else if (tid(&t[k], "template")) {
      if (k + 1 >= g || !tpunct(&t[k + 1], '<')) return -1;
      int m = angle_end(t, k + 1, g);
      if (m < 0 || m == k + 2) return -1;
      d->ts = k + 2, d->te = m, k = m;
    }
  }
  return 0;
}

/* The declared name of a kernel in t[a..e): the last identifier before a '(' that is not an attribute
 * ("void __launch_bounds__(256, 2) k(float *x)"), or -1. A specialisation "k<float>(...)" has none. */
static int declared_name(const tok *t, int a, int e) {
  int cand = -1;
  for (int k = a; k < e;) {
    if (topen(&t[k])) {
      k = group_end(t, k, e);
    } else if (t[k].kind == T_IDENT && k + 1 < e && tpunct(&t[k + 1], '(')) {
      if (!tin(&t[k], attr_calls) && !tin(&t[k], builtin_types)) cand = k;
      k = group_end(t, k + 1, e);
    } else {
      k++;
    }
  }
  return cand;
}

static unsigned name_hash(const char *s) {
  unsigned h = 2166136261u;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
  return h;
}

/* A declaration and a later definition of one kernel: same name, both templates or neither, and the
 * same parameter kinds (names and spellings may differ). Other matches by name are overloads. */
static int same_kernel(const cdv_sig *a, const cdv_sig *b) {
  if (strcmp(a->name, b->name) != 0 || (a->ntparams > 0) != (b->ntparams > 0) || a->nparams != b->nparams) return 0;
  for (int i = 0; i < a->nparams; i++) {
    const cdv_param *x = &a->params[i], *y = &b->params[i];
    if (x->kind != y->kind || x->elem != y->elem || x->depth != y->depth || x->nelem != y->nelem ||
        x->pointee_const != y->pointee_const)
      return 0;
  }
  return 1;
}

/* The earlier declaration of the kernel s with name hash h, or -1. */
static int find_same(const parser *ps, const cdv_sig *s, unsigned h) {
  unsigned mask = (unsigned)ps->nslots - 1;
  for (unsigned i = h & mask; ps->nslots > 0 && ps->slots[i] != 0; i = (i + 1) & mask) {
    int k = ps->slots[i] - 1;
    if (ps->hash[k] == h && same_kernel(&ps->out->v[k], s)) return k;
  }
  return -1;
}

static void slot_insert(parser *ps, int k) {
  unsigned mask = (unsigned)ps->nslots - 1, i = ps->hash[k] & mask;
  while (ps->slots[i] != 0) i = (i + 1) & mask;
  ps->slots[i] = k + 1;
}

/* Room in the table for one more kernel. */
static int reserve_slot(parser *ps) {
  int n = ps->out->n;
  if (2 * (n + 1) < ps->nslots) return 0;
  if (ps->nslots > INT_MAX / 4) return -1;
  int ns = ps->nslots ? 2 * ps->nslots : 64;
  int *slots = calloc((size_t)ns, sizeof(int));
  if (slots == NULL) return -1;
  free(ps->slots);
  ps->slots = slots, ps->nslots = ns;
  for (int k = 0; k < n; k++) slot_insert(ps, k);
  return 0;
}

/* Add *s (taking what it owns), or merge it into an earlier declaration of the same kernel; the
 * definition's parameter names and template parameters win. */
static int add_sig(parser *ps, cdv_sig *s, int is_def) {
  unsigned h = name_hash(s->name);
  int k = find_same(ps, s, h);
  if (k >= 0) {
    cdv_sig *o = &ps->out->v[k];
    int ext = o->extern_c | s->extern_c;
    if (is_def) {
      cdv_sig_clear(o);
      *o = *s;
    } else {
      cdv_sig_clear(s);
    }
    o->extern_c = ext;
    return 0;
  }
  int n = ps->out->n;
  if (grow(&ps->out->v, &ps->cap, n + 1, sizeof(cdv_sig)) != 0 ||
      grow(&ps->hash, &ps->hcap, n + 1, sizeof(unsigned)) != 0 || reserve_slot(ps) != 0) {
    cdv_sig_clear(s);
    return fail(ps->err, ps->errlen, OOM);
  }
  ps->out->v[n] = *s;
  ps->hash[n] = h;
  ps->out->n++;
  slot_insert(ps, n);
  return 0;
}

static int sig_tparams(parser *ps, const prefix_info *d, cdv_sig *s) {
  tparam tp[CDV_SIG_MAXTPARAMS];
  int ntp = parse_tclause(ps->t + d->ts, d->te - d->ts, tp, CDV_SIG_MAXTPARAMS);
  if (ntp > CDV_SIG_MAXTPARAMS)
    return fail(ps->err, ps->errlen, "line %d: kernel '%s' has more than %d template parameters", s->line, s->name,
                CDV_SIG_MAXTPARAMS);
  for (int i = 0; i < ntp; i++) {
    const tok *nm = tp[i].name;
    if (nm != NULL && nm->len >= sizeof s->tparams[i])
      return fail(ps->err, ps->errlen, "line %d: kernel '%s': template parameter name '%.40s...' is too long", s->line,
                  s->name, nm->p);
    if (nm != NULL) copy_str(s->tparams[i], sizeof s->tparams[i], nm->p, nm->len);
  }
  s->ntparams = ntp;
  return 0;
}

/* The text resolve reads again: "<template parameters>\0<parameters>\0". */
static char *decl_text(const tok *t, const prefix_info *d, int p0, int p1) {
  sbuf b = {NULL, 0, 0, 1, 0, 0};
  if (d->ts >= 0) sb_toks(&b, NULL, t + d->ts, d->te - d->ts);
  sb_put(&b, "\0", 1);
  sb_toks(&b, NULL, t + p0, p1 - p0);
  sb_put(&b, "\0", 1);
  if (b.oom) {
    free(b.p);
    return NULL;
  }
  return b.p;
}

/* Record the kernel declared by t[q..cand] (its possibly qualified name) with parameters t[p0..p1). */
static int record(parser *ps, int g, int q, int cand, int p0, int p1, const prefix_info *d, int is_def) {
  const tok *t = ps->t;
  cdv_sig s;
  memset(&s, 0, sizeof s);
  s.extern_c = d->extern_c;
  s.line = t[g].line;
  sbuf nb = sb_fixed(s.name, sizeof s.name);
  if (ps->prefix.n > 0) sb_put(&nb, ps->prefix.p, ps->prefix.n), sb_put(&nb, "::", 2);
  for (int k = q; k <= cand; k++) sb_put(&nb, t[k].p, t[k].len);
  if (nb.trunc)
    return fail(ps->err, ps->errlen, "line %d: kernel name '%.40s...' is too long (at most %d bytes)", s.line, s.name,
                (int)sizeof s.name - 1);
  if (d->ts >= 0 && sig_tparams(ps, d, &s) != 0) return -1;
  ps->pc.kernel = s.name;
  if (parse_params(&ps->pc, t + p0, p1 - p0) != 0) return -1;
  s.decl = decl_text(t, d, p0, p1);
  if (s.decl == NULL) return fail(ps->err, ps->errlen, OOM);
  s.params = ps->pc.v, s.nparams = ps->pc.n; /* the sig takes the list */
  ps->pc.v = NULL, ps->pc.n = ps->pc.cap = 0;
  return add_sig(ps, &s, is_def);
}

/* Read the declaration around the __global__ at t[g]. Returns the index of the token that ends it
 * (';', '{' or '}', left for the scan), or -1 on error. Declarations that are not kernels we can
 * describe (specialisations, macros) are passed over. */
static int kernel_at(parser *ps, int g) {
  const tok *t = ps->t;
  int e = g + 1, depth = 0;
  for (; e < ps->n; e++) {
    if (depth == 0 && (tpunct(&t[e], ';') || tpunct(&t[e], '{') || tpunct(&t[e], '}'))) break;
    if (topen(&t[e]))
      depth++;
    else if (tclose(&t[e]))
      depth -= depth > 0;
  }
  prefix_info d = {ps->extern_c, -1, -1};
  if (read_prefix(ps, g, &d) != 0) return e;
  int cand = declared_name(t, g + 1, e);
  if (cand < 0) return e;
  int pe = group_end(t, cand + 1, e) - 1; /* the ')' */
  if (pe < cand + 2 || !tpunct(&t[pe], ')')) return e;
  int q = cand;
  while (q - 2 > g && tis(&t[q - 1], "::") && t[q - 2].kind == T_IDENT) q -= 2; /* "ns::k" */
  int is_def = e < ps->n && tpunct(&t[e], '{');
  return record(ps, g, q, cand, cand + 2, pe, &d, is_def) != 0 ? -1 : e;
}

#define MAX_DECL_TOKENS 4096 /* tokens (a bracketed group counts as one) a global's declaration may span */
#define MAX_GLOBALS 4096 /* globals recorded (each is compared with those before it) */

/* Record the global variable named by t[nm] (qualified with the enclosing namespaces) unless it is there. */
static int record_global(parser *ps, const tok *nm, int is_template) {
  cdv_sigs *o = ps->out;
  cdv_global g;
  memset(&g, 0, sizeof g);
  g.is_template = is_template, g.line = nm->line;
  sbuf nb = sb_fixed(g.name, sizeof g.name);
  if (ps->prefix.n > 0) sb_put(&nb, ps->prefix.p, ps->prefix.n), sb_put(&nb, "::", 2);
  sb_put(&nb, nm->p, nm->len);
  if (nb.trunc || o->nglobals >= MAX_GLOBALS) return 0; /* left out: too long to name, or one too many */
  for (int k = 0; k < o->nglobals; k++)
    if (strcmp(o->globals[k].name, g.name) == 0) return 0;
  if (grow(&o->globals, &ps->gcap, o->nglobals + 1, sizeof g) != 0) return fail(ps->err, ps->errlen, OOM);
  o->globals[o->nglobals++] = g;
  return 0;
}

/* The declaration around the __constant__ / __device__ / __managed__ at t[g], at namespace scope. A variable
 * (no '(' before its declarator ends) has each declarator's name recorded: the identifier before '[', '=',
 * '{', ',' or ';' (initialisers and brackets skipped, '<' '>' nesting template arguments). Returns the index
 * of its ';' for the scan to go on from, 0 when it is not a variable definition (a function, an extern
 * declaration), -1 on error. */
static int is_space_word(const tok *x) {
  return tid(x, "__constant__") || tid(x, "__device__") || tid(x, "__managed__") || tid(x, "__global__");
}

static int global_at(parser *ps, int g) {
  const tok *t = ps->t;
  enum { F_SKIP = 1, F_TEMPLATE = 2 };
  /* what the declaration says before t[g], read on from where the last look stopped (linear in the source) */
  if (ps->pre_stmt != ps->stmt || ps->pre_pos < ps->stmt) ps->pre_stmt = ps->pre_pos = ps->stmt, ps->pre_flags = 0;
  for (int k = ps->pre_pos; k < g; k++) {
    if (tid(&t[k], "extern") || tid(&t[k], "typedef") || tid(&t[k], "using")) ps->pre_flags |= F_SKIP;
    if (tid(&t[k], "template")) ps->pre_flags |= F_TEMPLATE;
  }
  ps->pre_pos = g;
  if (ps->pre_flags & F_SKIP) return 0;
  int is_template = (ps->pre_flags & F_TEMPLATE) != 0;
  int angle = 0, named = 0, steps = 0;
  /* a bounded look that stops at the next memory-space word (which gets its own): runs of them, or of
   * declarations with no end, must not make the scan quadratic */
  for (int i = g + 1; i < ps->n && steps++ < MAX_DECL_TOKENS; i++) {
    const tok *x = &t[i];
    if (tid(x, "extern") || tid(x, "typedef") || is_space_word(x)) return 0;
    if (tpunct(x, '<'))
      angle++;
    else if (tpunct(x, '>'))
      angle -= angle > 0;
    else if (angle > 0 && topen(x))
      i = group_end(t, i, ps->n) - 1;
    else if (angle > 0)
      continue;
    else if (tpunct(x, '(') || tpunct(x, '}'))
      return named ? i : 0; /* a function (or not C++ we follow) */
    else if (tpunct(x, '[') || tpunct(x, '=') || tpunct(x, '{') || tpunct(x, ',') || tpunct(x, ';')) {
      if (t[i - 1].kind == T_IDENT && i - 1 > g && !named) {
        if (record_global(ps, &t[i - 1], is_template) != 0) return -1;
        named = 1;
      }
      if (tpunct(x, ';')) return named ? i : 0;
      if (tpunct(x, ','))
        named = 0;
      else if (topen(x))
        i = group_end(t, i, ps->n) - 1;
      else { /* '=': the initialiser, to the ',' or ';' that ends it */
        while (i + 1 < ps->n && !tpunct(&t[i + 1], ',') && !tpunct(&t[i + 1], ';') && steps++ < MAX_DECL_TOKENS) {
          i++;
          if (topen(&t[i])) i = group_end(t, i, ps->n) - 1;
        }
      }
    }
  }
  return 0;
}

static int scan(parser *ps) {
  const tok *t = ps->t;
  for (int i = 0; i < ps->n;) {
    const tok *x = &t[i];
    if (tpunct(x, '(') || tpunct(x, '[')) {
      ps->pdepth++;
    } else if (tpunct(x, ')') || tpunct(x, ']')) {
      ps->pdepth -= ps->pdepth > 0;
    } else if (tpunct(x, '{')) {
      if (open_brace(ps, i) != 0) return -1;
      ps->stmt = i + 1;
    } else if (tpunct(x, '}')) {
      close_brace(ps);
      ps->stmt = i + 1;
    } else if (tpunct(x, ';')) {
      if (ps->pdepth == 0) ps->stmt = i + 1;
    } else if (ps->pdepth == 0 && tid(x, "__global__")) {
      int e = kernel_at(ps, i);
      if (e < 0) return -1;
      i = e;
      continue;
    } else if (ps->pdepth == 0 && ps->code_depth == 0 && is_space_word(x) && !tid(x, "__global__")) {
      int e = global_at(ps, i);
      if (e < 0) return -1;
      if (e > 0) {
        i = e;
        continue;
      }
    }
    i++;
  }
  return 0;
}

int cdv_sig_parse(const char *src, size_t len, cdv_sigs *out, char *err, size_t errlen) {
  if (err != NULL && errlen > 0) err[0] = '\0';
  if (out == NULL) return fail(err, errlen, "no place for the kernels given");
  out->n = 0;
  out->v = NULL;
  out->nglobals = 0;
  out->globals = NULL;
  if (src == NULL && len > 0) return fail(err, errlen, "no source given");
  if (len > INT_MAX) return fail(err, errlen, "source too large (%zu bytes)", len);
  tvec toks = {NULL, 0, 0};
  parser ps;
  memset(&ps, 0, sizeof ps);
  ps.err = err, ps.errlen = errlen, ps.out = out;
  ps.prefix.heap = 1;
  ps.pc.err = err, ps.pc.errlen = errlen;
  int r = lex(src != NULL ? src : "", len, &toks) != 0 ? fail(err, errlen, OOM) : 0;
  if (r == 0) {
    ps.t = toks.v, ps.n = toks.n;
    r = scan(&ps);
  }
  free(toks.v);
  free(ps.sc);
  free(ps.prefix.p);
  free(ps.hash);
  free(ps.slots);
  pctx_free(&ps.pc);
  if (r != 0) cdv_sigs_free(out);
  return r;
}

void cdv_sig_clear(cdv_sig *s) {
  if (s == NULL) return;
  free(s->params);
  free(s->decl);
  memset(s, 0, sizeof *s);
}

void cdv_sigs_free(cdv_sigs *s) {
  if (s == NULL) return;
  for (int i = 0; i < s->n; i++) cdv_sig_clear(&s->v[i]);
  free(s->v);
  free(s->globals);
  s->v = NULL;
  s->globals = NULL;
  s->n = s->nglobals = 0;
}

/* ------------------------------------------------------------ resolve */

typedef struct rctx {
  tvec ex; /* the name expression */
  tvec td, tp; /* the kernel's template and function parameter lists */
  tvec bt; /* template arguments: the expression's, then defaults */
  int *off, *cnt; /* argument spans in bt */
  binding b[CDV_SIG_MAXTPARAMS];
  tparam tps[CDV_SIG_MAXTPARAMS];
  int ntp;
  sbuf name, disp; /* "ns::k", "ns::k<int, 4>" */
  pctx pc;
} rctx;

static void rctx_free(rctx *r) {
  free(r->ex.v);
  free(r->td.v);
  free(r->tp.v);
  free(r->bt.v);
  free(r->off);
  free(r->cnt);
  free(r->name.p);
  free(r->disp.p);
  pctx_free(&r->pc);
}

/* The parts of a name expression "&ns::k<int, 4>": the name tokens and the template arguments. */
typedef struct expr {
  int q0, qe;
  int has_args, a0, a1;
} expr;

static int parse_expr(const tvec *ex, expr *x) {
  const tok *t = ex->v;
  int n = ex->n, i = 0;
  if (i < n && tpunct(&t[i], '&')) i++;
  if (i < n && tis(&t[i], "::")) i++;
  x->q0 = i;
  if (i >= n || t[i].kind != T_IDENT) return -1;
  for (i++; i + 1 < n && tis(&t[i], "::") && t[i + 1].kind == T_IDENT; i += 2) {}
  x->qe = i;
  x->has_args = 0;
  if (i == n) return 0;
  if (!tpunct(&t[i], '<') || angle_end(t, i, n) != n - 1) return -1;
  x->has_args = 1, x->a0 = i + 1, x->a1 = n - 1;
  return 0;
}

/* Split the template arguments t[a..b) at top-level commas into the first spans of r->bt; returns how
 * many, or -1 (an empty argument, or out of memory: *oom says which). */
static int split_args(rctx *r, const tok *t, int a, int b, int *oom) {
  int nargs = a < b, depth = 0, angle = 0;
  for (int i = a; i < b; i++) {
    if (topen(&t[i]))
      depth++;
    else if (tclose(&t[i]))
      depth -= depth > 0;
    else if (depth == 0 && tpunct(&t[i], '<'))
      angle++;
    else if (depth == 0 && tpunct(&t[i], '>'))
      angle -= angle > 0;
    else if (depth == 0 && angle == 0 && tpunct(&t[i], ','))
      nargs++;
  }
  r->off = malloc(sizeof(int) * (size_t)(nargs + CDV_SIG_MAXTPARAMS));
  r->cnt = malloc(sizeof(int) * (size_t)(nargs + CDV_SIG_MAXTPARAMS));
  *oom = r->off == NULL || r->cnt == NULL;
  if (*oom) return -1;
  int k = 0;
  r->off[0] = 0;
  depth = angle = 0;
  for (int i = a; i < b; i++) {
    if (depth == 0 && angle == 0 && tpunct(&t[i], ',')) {
      r->cnt[k] = r->bt.n - r->off[k];
      r->off[++k] = r->bt.n;
      continue;
    }
    if (topen(&t[i]))
      depth++;
    else if (tclose(&t[i]))
      depth -= depth > 0;
    else if (depth == 0 && tpunct(&t[i], '<'))
      angle++;
    else if (depth == 0 && tpunct(&t[i], '>'))
      angle -= angle > 0;
    if (tvec_push(&r->bt, t[i]) != 0) return *oom = 1, -1;
  }
  if (nargs > 0) r->cnt[k] = r->bt.n - r->off[k];
  for (k = 0; k < nargs; k++)
    if (r->cnt[k] == 0) return -1;
  return nargs;
}

/* Bind the template parameters to the arguments, defaults filling in for missing ones (a default may
 * use the parameters before it: "typename U = T"). */
static int bind_args(rctx *r, binds *bd, int nargs, const cdv_sig *sig, char *err, size_t errlen) {
  int ai = 0, ns = nargs, need = 0, most = 0, packs = 0;
  for (int i = 0; i < r->ntp; i++) {
    most += !r->tps[i].pack;
    if (!r->tps[i].pack && r->tps[i].ndef == 0) need = most; /* arguments are positional */
    packs += r->tps[i].pack;
  }
  if (nargs > most && !packs)
    return fail(err, errlen, "too many template arguments for kernel '%s' (line %d): it takes %d, got %d", sig->name,
                sig->line, most, nargs);
  for (int i = 0; i < r->ntp; i++) {
    const tparam *tp = &r->tps[i];
    binding *b = &r->b[i];
    b->name = tp->name, b->pack = tp->pack, b->nspans = 1;
    if (tp->pack) {
      b->span0 = ai, b->nspans = nargs - ai, ai = nargs;
    } else if (ai < nargs) {
      b->span0 = ai++;
    } else if (tp->ndef > 0) {
      int start = r->bt.n;
      if (subst(bd, i, r->td.v + tp->def, tp->ndef, -1, &r->bt) != 0) return fail(err, errlen, OOM);
      r->off[ns] = start, r->cnt[ns] = r->bt.n - start, b->span0 = ns++;
    } else {
      return fail(err, errlen, "too few template arguments for kernel '%s' (line %d): it needs %d, got %d", sig->name,
                  sig->line, need, nargs);
    }
    bd->n = i + 1;
  }
  return 0;
}

static int name_matches(const cdv_sig *sig, const char *name) {
  if (strcmp(sig->name, name) == 0) return 1;
  const char *base = strrchr(sig->name, ':');
  return sig->extern_c && strcmp(base ? base + 1 : sig->name, name) == 0; /* C linkage ignores namespaces */
}

/* "no kernel 'x' in the source (it has: a, b)" */
static int unknown_kernel(const cdv_sigs *s, const char *name, char *err, size_t errlen) {
  if (s->n == 0) return fail(err, errlen, "no kernel '%s' in the source (it has no __global__ function)", name);
  if (err == NULL || errlen == 0) return -1;
  sbuf b = sb_fixed(err, errlen);
  sb_put(&b, "no kernel '", 11);
  sb_put(&b, name, strlen(name));
  sb_put(&b, "' in the source (it has: ", 25);
  for (int i = 0; i < s->n && !b.trunc; i++) {
    if (i > 0 && strcmp(s->v[i].name, s->v[i - 1].name) == 0) continue; /* overloads, side by side */
    if (i > 0) sb_put(&b, ", ", 2);
    sb_put(&b, s->v[i].name, strlen(s->v[i].name));
  }
  sb_put(&b, ")", 1);
  sb_finish_fixed(&b);
  return -1;
}

static const char *sig_decl(const cdv_sig *sig, int which) {
  static const char none[2] = {0, 0};
  const char *d = sig->decl != NULL ? sig->decl : none;
  return which == 0 ? d : d + strlen(d) + 1;
}

/* The kernel's template parameter list, lexed and split, into r->td and r->tps. */
static int read_tparams(rctx *r, const cdv_sig *sig) {
  const char *d = sig_decl(sig, 0);
  if (lex(d, strlen(d), &r->td) != 0) return -1;
  r->ntp = parse_tclause(r->td.v, r->td.n, r->tps, CDV_SIG_MAXTPARAMS);
  if (r->ntp > CDV_SIG_MAXTPARAMS) r->ntp = CDV_SIG_MAXTPARAMS;
  return 0;
}

/* "kernel 'axpy' is a template (line 3): compile it with name_expressions = {"axpy<float>"}", with
 * float for each type parameter and 1 for each value that has no default. */
static int template_needed(rctx *r, const cdv_sig *sig, char *err, size_t errlen) {
  if (read_tparams(r, sig) != 0) return fail(err, errlen, OOM);
  char ex[256];
  sbuf b = sb_fixed(ex, sizeof ex);
  sb_put(&b, sig->name, strlen(sig->name));
  sb_put(&b, "<", 1);
  for (int i = 0, k = 0; i < r->ntp; i++) {
    const tparam *tp = &r->tps[i];
    if (tp->pack || tp->ndef > 0) continue;
    if (k++ > 0) sb_put(&b, ", ", 2);
    const char *a = tp->kind == TP_VALUE ? "1" : "float";
    sb_put(&b, a, strlen(a));
  }
  sb_put(&b, ">", 1);
  sb_finish_fixed(&b);
  return fail(err, errlen, "kernel '%s' is a template (line %d): compile it with name_expressions = {\"%s\"}",
              sig->name, sig->line, ex);
}

/* The one kernel a name designates; NULL with a message otherwise. */
static const cdv_sig *find_kernel(rctx *r, const cdv_sigs *s, int has_args, char *err, size_t errlen) {
  const cdv_sig *hit = NULL, *other = NULL, *wrong = NULL;
  const char *name = r->name.p;
  for (int i = 0; i < s->n; i++) {
    const cdv_sig *sig = &s->v[i];
    if (!name_matches(sig, name)) continue;
    if ((sig->ntparams > 0) != has_args)
      wrong = wrong ? wrong : sig;
    else if (hit == NULL)
      hit = sig;
    else if (other == NULL)
      other = sig;
  }
  if (other != NULL)
    fail(err, errlen, "kernel '%s' is overloaded (lines %d and %d): its arguments cannot be checked", name, hit->line,
         other->line);
  else if (hit == NULL && wrong != NULL && has_args)
    fail(err, errlen, "kernel '%s' is not a template (line %d): name it without template arguments", wrong->name,
         wrong->line);
  else if (hit == NULL && wrong != NULL)
    template_needed(r, wrong, err, errlen);
  else if (hit == NULL)
    unknown_kernel(s, name, err, errlen);
  return other == NULL ? hit : NULL;
}

static int instantiate(rctx *r, const cdv_sig *sig, const expr *x, cdv_sig *out, char *err, size_t errlen) {
  int oom = 0;
  if (read_tparams(r, sig) != 0) return fail(err, errlen, OOM);
  int nargs = split_args(r, r->ex.v, x->a0, x->a1, &oom);
  if (nargs < 0)
    return oom ? fail(err, errlen, OOM)
               : fail(err, errlen, "bad kernel name '%s' (an empty template argument)", r->disp.p);
  binds bd = {r->b, 0, r->off, r->cnt, &r->bt};
  if (bind_args(r, &bd, nargs, sig, err, errlen) != 0) return -1;
  const char *pd = sig_decl(sig, 1);
  if (lex(pd, strlen(pd), &r->tp) != 0) return fail(err, errlen, OOM);
  r->pc.err = err, r->pc.errlen = errlen, r->pc.kernel = r->disp.p, r->pc.line = sig->line, r->pc.bd = &bd;
  if (parse_params(&r->pc, r->tp.v, r->tp.n) != 0) return -1;
  out->params = r->pc.v, out->nparams = r->pc.n;
  r->pc.v = NULL;
  return 0;
}

static int resolve(rctx *r, const cdv_sigs *s, const char *name_or_expr, cdv_sig *out, char *err, size_t errlen) {
  expr x;
  memset(&x, 0, sizeof x); /* parse_expr fills it; zeroed so the optimiser sees no path that reads it unset */
  if (lex(name_or_expr, strlen(name_or_expr), &r->ex) != 0) return fail(err, errlen, OOM);
  if (parse_expr(&r->ex, &x) != 0)
    return fail(err, errlen, "bad kernel name '%s' (expected a name such as \"saxpy\" or \"axpy<float>\")",
                name_or_expr);
  r->name.heap = r->disp.heap = 1;
  sb_toks(&r->name, NULL, r->ex.v + x.q0, x.qe - x.q0);
  int d0 = x.q0; /* without '&' or a leading "::" */
  sb_toks(&r->disp, NULL, r->ex.v + d0, r->ex.n - d0);
  if (r->name.oom || r->disp.oom) return fail(err, errlen, OOM);
  const cdv_sig *sig = find_kernel(r, s, x.has_args, err, errlen);
  if (sig == NULL) return -1;
  copy_str(out->name, sizeof out->name, r->disp.p, r->disp.n);
  out->extern_c = sig->extern_c;
  out->ntparams = sig->ntparams;
  memcpy(out->tparams, sig->tparams, sizeof out->tparams);
  out->line = sig->line;
  if (x.has_args) return instantiate(r, sig, &x, out, err, errlen);
  if (sig->nparams > 0) {
    out->params = malloc(sizeof(cdv_param) * (size_t)sig->nparams);
    if (out->params == NULL) return fail(err, errlen, OOM);
    memcpy(out->params, sig->params, sizeof(cdv_param) * (size_t)sig->nparams);
  }
  out->nparams = sig->nparams;
  return 0;
}

int cdv_sig_resolve(const cdv_sigs *s, const char *name_or_expr, cdv_sig *out, char *err, size_t errlen) {
  if (err != NULL && errlen > 0) err[0] = '\0';
  if (out != NULL) memset(out, 0, sizeof *out);
  if (s == NULL || name_or_expr == NULL || out == NULL) return fail(err, errlen, "no kernel name given");
  rctx r;
  memset(&r, 0, sizeof r);
  int rc = resolve(&r, s, name_or_expr, out, err, errlen);
  rctx_free(&r);
  if (rc != 0) cdv_sig_clear(out);
  return rc;
}

const char *cdv_pkind_name(cdv_pkind k) {
  static const char *const names[] = {"pointer", "int8",   "int16",  "int32",   "int64",    "uint8",
                                      "uint16",  "uint32", "uint64", "float16", "bfloat16", "float32",
                                      "float64", "bool",   "vector", "struct"};
  return (unsigned)k < sizeof names / sizeof names[0] ? names[k] : "unknown";
}
