/*
 * scan.h: the source scanner (scan.c), below both backends. No Lua, no driver.
 *
 * NOTE [source scanner]: one scanner of CUDA C text serves the cpu compiler, the include scan of both kernel
 * caches and the signature reader (sig.c); a kernel cache's key never depends on a backend's compiler.
 *
 * NOTE [token streams]: the scanner gives two token streams of one token type. cdv_scan_strip + cdv_scan_tokenize
 * read a blanked copy (comments and literals gone, offsets kept): identifiers, pp-numbers and one-character
 * punctuation, with '#' lines kept, for the cpu compiler and the include scan. cdv_scan_lex reads the text as
 * the compiler will: string and character literals (with encoding prefixes and raw strings) are tokens, "::"
 * and "..." are one token, preprocessor lines and `#if 0` groups are skipped, line splices are honoured, and
 * identifiers may hold UTF-8 bytes; sig.c reads parameter lists from it.
 */
#ifndef CDV_SCAN_H
#define CDV_SCAN_H

#include <ctype.h>
#include <stddef.h>
#include "diskcache.h" /* cdv_strlist, cdv_list_includes */

static inline int cdv_is_ident0(int c) { return isalpha(c) || c == '_' || c == '$'; }
static inline int cdv_is_ident1(int c) { return isalnum(c) || c == '_' || c == '$'; }

enum { CDV_T_IDENT, CDV_T_NUM, CDV_T_PUNCT, CDV_T_STR, CDV_T_CHAR }; /* STR and CHAR: cdv_scan_lex only */
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
/* The C++ token stream of s[0..n) (NOTE [token streams]) appended to t; -1 when out of memory. */
int cdv_scan_lex(const char *s, size_t n, cdv_toks *t);
int cdv_tok_is(const char *s, const cdv_tok *k, const char *w);
/* The #include at the '#' token t[i] ("q<name>" or "a<name>", read from the original text) added to includes. */
void cdv_scan_include(const char *orig, size_t n, const cdv_toks *t, int i, cdv_strlist *includes);
/* Is identifier k a block barrier or warp intrinsic (__syncthreads, __shfl..., cooperative groups)? */
int cdv_scan_barrier_word(const char *s, const cdv_tok *k);

#endif
