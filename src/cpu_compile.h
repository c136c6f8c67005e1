/*
 * cpu_compile.h: what the stages of the cpu device's compiler share (internal; see cpu_compile.c's header
 * comment). The stages, each in its own file:
 * - cpu_scan.c: reading the kernel (refused constructs, functions and what they call, `extern __shared__`
 *   rewrites, includes);
 * - cpu_choose_path.c: choosing each entry's path (NOTE [kernel paths]) and writing its fast function;
 * - cpu_inline.c: device functions with barriers written into their kernels (NOTE [inlined helpers]);
 * - cpu_fission.c: writing the fast paths, simd and fission (NOTE [fast paths]);
 * - cpu_checked.c: the source rewritten for the checked memory mode (NOTE [checked memory]);
 * - cpu_compile.c: options, the translation unit, running the host compiler, the disk cache.
 */
#ifndef CDV_CPU_COMPILE_H
#define CDV_CPU_COMPILE_H
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cpu.h"
#include "scan.h"

/* ---------------------------------------------------------------- growable strings */
typedef struct buf {
  char *p;
  size_t n, cap;
  int oom;
} buf;

static inline void buf_add(buf *b, const char *s, size_t n) {
  if (b->oom) return;
  if (b->n + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + n + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
      b->oom = 1;
      return;
    }
    b->p = p, b->cap = cap;
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = 0;
}

static inline void buf_adds(buf *b, const char *s) { buf_add(b, s, strlen(s)); }

__attribute__((format(printf, 2, 3))) static inline void buf_addf(buf *b, const char *fmt, ...) {
  char tmp[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n < sizeof tmp) {
    buf_add(b, tmp, (size_t)n);
    return;
  }
  char *big = malloc((size_t)n + 1);
  if (!big) {
    b->oom = 1;
    return;
  }
  va_start(ap, fmt);
  vsnprintf(big, (size_t)n + 1, fmt, ap);
  va_end(ap);
  buf_add(b, big, (size_t)n);
  free(big);
}

static inline int oom(cdv_err *e) {
  return cdv_fail(e, "cpu.compile", ENOMEM, "CUDA_ERROR_OUT_OF_MEMORY", "out of host memory");
}

/* ---------------------------------------------------------------- the scan (cpu_scan.c) */
typedef struct rewrite {
  size_t off, len;
  char *text;
} rewrite;

typedef struct kfunc {
  char *name; /* "" for a brace region that is not a function's */
  char *idents; /* " a b c ": the identifiers of its body */
  int sync; /* it needs fibers: NOTE [kernel paths] */
  int alias; /* a macro that is __syncthreads() and nothing else: fission takes it (NOTE [barrier if]) */
} kfunc;

typedef struct scanres {
  int fibers;
  kfunc *fn; /* NOTE [kernel paths] (full scans only) */
  int nfn;
  rewrite *rw;
  int nrw;
  cdv_strlist includes; /* each entry: 'q' or 'a' (quoted, angled) followed by the name */
  char refusal[320]; /* the first construct the cpu device cannot run, "" if none */
} scanres;

/* Scan one file (fname for messages) into r: refusals, functions, rewrites, includes (full: all of it). */
int cdv_cpu_scan_text(const char *fname, const char *orig, size_t n, int full, scanres *r, cdv_err *e);
void cdv_cpu_scan_free(scanres *r);
/* Token helpers of the scan that the fast paths share. */
int cdv_cpu_skip_parens(const char *s, const cdv_toks *t, int i); /* the index after the group at t[i] == "(" */
int cdv_cpu_ns_brace(const char *s, const cdv_toks *t, int i); /* "{" t[i] opens a namespace or extern "C" */
int cdv_cpu_word_of(const char *s, const cdv_tok *k, const char *const *list); /* k is one of list */
int cdv_cpu_function_name(const char *s, const cdv_toks *t, int i, char *out, size_t n); /* "{" t[i] opens a function */
int cdv_cpu_pp_line_end(const char *s, const cdv_toks *t, int i); /* after the preprocessor line at t[i] */
int cdv_cpu_barrier_macro(const char *s, const cdv_toks *t, int i, int end);

/* ---------------------------------------------------------------- a compile */
typedef struct copts {
  cdv_strlist args; /* compiler arguments derived from the options */
  cdv_strlist idirs; /* -I directories (also searched by the include scan) */
  const char *std; /* "c++17" or "c++20" */
  int debug, fast_math, nowarn;
  int check; /* NOTE [checked memory] in cpu_checked.c */
} copts;

typedef struct job {
  const cdv_compile_req *req;
  copts co;
  scanres src; /* scan of the source */
  scanres *hdr; /* scans of the request's headers */
  char **hdr_text; /* headers with rewrites applied */
  size_t *hdr_len;
  char **syms;
  buf tu;
  cdv_strlist cmd; /* compiler argv up to the file names */
  char key[65];
  int fibers;
  int *entry_fibers; /* per entry: NOTE [kernel paths] */
  int *entry_fast; /* per entry (see NOTE [fast paths]): 0, CDV_CPU_FLAG_SIMD or CDV_CPU_FLAG_FISSION */
  int *fast_off; /* per entry: its fast function did not compile */
  int *entry_cand; /* per entry: 1 a candidate for a fast path, 2 one whose callees read the thread header */
  const char *refusal; /* NOTE [refused constructs] */
  char (*why)[160]; /* per entry: what keeps it off its fast path (k.cpu_reason), "" for nothing */
} job;

/* A C string literal of s added to b (cpu_compile.c). */
void cdv_cpu_add_cstring(buf *b, const char *s);

/* cpu_checked.c: src[0..n) rewritten for the checked memory mode (NOTE [checked memory]), or NULL (no memory) */
char *cdv_cpu_checked_source(const char *src, size_t n, size_t *outn);

/* cpu_choose_path.c */
int cdv_cpu_entry_paths(job *j, int wide);
int cdv_cpu_fast_paths(job *j, const char *src, size_t n, buf *b);

/* cpu_fission.c: the fast function of one kernel (NOTE [fast paths]). */
/* targs: a template's arguments followed by ", " ("float, "), NULL for a function that is not one. */
/* sync: " a b ", the functions that reach a barrier, which cpu_inline.c writes into the kernel. */
int cdv_cpu_fis_kernel(const char *fname, const char *src, size_t n, const char *name, const char *targs,
                       const char *sym, const char *sync, int hdr, buf *o, buf *rowo, char *why, size_t nwhy);

/* cpu_inline.c (NOTE [inlined helpers]): src with the kernel's calls of the functions in sync written out as
 * their bodies. 1: *out (malloc'd, *nout bytes); 0: no call to write out; 2: one that cannot be (why); -1: out of
 * memory. */
int cdv_cpu_inline(const char *src, size_t n, const char *kernel, const char *sync, char **out, size_t *nout, char *why,
                   size_t nwhy);
#endif
