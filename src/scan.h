/*
 * scan.h: the source scanner (scan.c), below both backends. No Lua, no driver.
 *
 * NOTE [source scanner]: one scanner of CUDA C text serves the cpu compiler and the include scan of both
 * kernel caches; a kernel cache's key never depends on a backend's compiler.
 */
#ifndef CDV_SCAN_H
#define CDV_SCAN_H

#include <ctype.h>
#include <stddef.h>
#include "diskcache.h" /* cdv_strlist, cdv_list_includes */

static inline int cdv_is_ident0(int c) { return isalpha(c) || c == '_' || c == '$'; }
static inline int cdv_is_ident1(int c) { return isalnum(c) || c == '_' || c == '$'; }

enum { CDV_T_IDENT, CDV_T_NUM, CDV_T_PUNCT };
typedef struct cdv_tok {
  size_t off, len;
  int kind, line, bol; /* bol: first token of its line */
} cdv_tok;

typedef struct cdv_toks {
  cdv_tok *v;
  int n, cap;
} cdv_toks;

/* A copy of s in which comments, string and character literals are blanked (newlines kept), so offsets and
 * line numbers still match the original; NULL when out of memory. */
char *cdv_scan_strip(const char *s, size_t n);
/* Tokens of a blanked text appended to t; -1 when out of memory. */
int cdv_scan_tokenize(const char *s, size_t n, cdv_toks *t);
int cdv_tok_is(const char *s, const cdv_tok *k, const char *w);
/* The #include at the '#' token t[i] ("q<name>" or "a<name>", read from the original text) added to includes. */
void cdv_scan_include(const char *orig, size_t n, const cdv_toks *t, int i, cdv_strlist *includes);
/* Is identifier k a block barrier or warp intrinsic (__syncthreads, __shfl..., cooperative groups)? */
int cdv_scan_barrier_word(const char *s, const cdv_tok *k);

#endif
