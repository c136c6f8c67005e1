/*
 * scan.c: the source scanner of CUDA C text, below both backends (it knows neither): comments and literals
 * blanked with offsets and lines kept, tokens (identifiers, pp-numbers, single punctuation characters), the
 * #include directives of a text and whether it uses a block barrier or a warp intrinsic. The cpu compiler
 * (cpu_compile.c: refused constructs, kernel paths, extern __shared__) and the include scan of both kernel
 * caches (diskcache.c for cuda_cache.c and the cpu cache) read sources with it.
 *
 * sig.c keeps a lexer of its own: it reads parameter lists, which needs string and character literals as
 * tokens, "::" and "..." as one token, #if 0 groups skipped and line splices inside tokens; moving it onto
 * these tokens is issue 15's remaining part (NOTE [source scanner]).
 */
#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "scan.h"

/* Is the '"' at s[i] the start of a raw string literal (R"delim( ... )delim", with an optional u8/u/U/L)? */
static int raw_string_at(const char *s, size_t n, size_t i) {
  if (i == 0 || s[i - 1] != 'R') return 0;
  size_t p = i - 1; /* the R; what precedes it must be a prefix or not part of an identifier */
  if (p > 0 && (isalnum((unsigned char)s[p - 1]) || s[p - 1] == '_')) {
    size_t q = p;
    while (q > 0 && (isalnum((unsigned char)s[q - 1]) || s[q - 1] == '_')) q--;
    size_t plen = p - q;
    if (!((plen == 2 && !strncmp(s + q, "u8", 2)) || (plen == 1 && strchr("uUL", s[q])))) return 0;
  }
  size_t d = i + 1;
  while (d < n && d - i <= 17 && s[d] != '(' && s[d] != '"' && s[d] != '\n') d++;
  return d < n && s[d] == '(';
}

/* The offset just past the raw string literal that starts at s[i]. */
static size_t raw_string_end(const char *s, size_t n, size_t i) {
  const char *delim = s + i + 1;
  size_t dl = (size_t)((const char *)memchr(delim, '(', n - i - 1) - delim);
  for (size_t k = i + 2 + dl; k < n; k++)
    if (s[k] == ')' && k + 1 + dl < n && !memcmp(s + k + 1, delim, dl) && s[k + 1 + dl] == '"') return k + dl + 2;
  return n;
}

/* Is the "'" at s[i] a C++14 digit separator (1'000'000) rather than the start of a character literal? */
static int digit_separator(const char *s, size_t n, size_t i) {
  if (i == 0 || i + 1 >= n || !isalnum((unsigned char)s[i - 1]) || !isxdigit((unsigned char)s[i + 1])) return 0;
  size_t q = i;
  while (q > 0 && (isalnum((unsigned char)s[q - 1]) || s[q - 1] == '_' || s[q - 1] == '\'' || s[q - 1] == '.')) q--;
  return isdigit((unsigned char)s[q]);
}

/* A copy of s in which comments, string and character literals are blanked (newlines kept), so offsets and
 * line numbers still match the original. */
char *cdv_scan_strip(const char *s, size_t n) {
  char *o = malloc(n + 1);
  if (!o) return NULL;
  memcpy(o, s, n);
  o[n] = 0;
  size_t i = 0;
#define BLANK(k) (o[k] = (o[k] == '\n' ? '\n' : ' '))
  while (i < n) {
    char c = s[i];
    if (c == '/' && i + 1 < n && s[i + 1] == '/') {
      while (i < n && !(s[i] == '\n' && (i == 0 || s[i - 1] != '\\'))) BLANK(i), i++;
    } else if (c == '/' && i + 1 < n && s[i + 1] == '*') {
      BLANK(i), BLANK(i + 1), i += 2;
      while (i < n && !(s[i] == '*' && i + 1 < n && s[i + 1] == '/')) BLANK(i), i++;
      if (i < n) BLANK(i), BLANK(i + 1), i += 2;
    } else if (c == '"' && raw_string_at(s, n, i)) {
      size_t end = raw_string_end(s, n, i);
      while (i < end) BLANK(i), i++;
    } else if (c == '"' || (c == '\'' && !digit_separator(s, n, i))) {
      /* string or character literal ("'" between digits is a C++14 digit separator) */
      BLANK(i), i++;
      while (i < n && s[i] != c && s[i] != '\n') {
        if (s[i] == '\\' && i + 1 < n) BLANK(i), i++;
        BLANK(i), i++;
      }
      if (i < n && s[i] == c) BLANK(i), i++;
    } else {
      i++;
    }
  }
#undef BLANK
  return o;
}

/* Tokens of the blanked text: identifiers, pp-numbers, and single punctuation characters. */
int cdv_scan_tokenize(const char *s, size_t n, cdv_toks *t) {
  int line = 1, bol = 1;
  size_t i = 0;
  while (i < n) {
    unsigned char c = (unsigned char)s[i];
    if (c == '\n') {
      line++, bol = 1, i++;
      continue;
    }
    if (isspace(c) || (c == '\\' && i + 1 < n && s[i + 1] == '\n')) {
      i++;
      continue;
    }
    cdv_tok k = {i, 1, CDV_T_PUNCT, line, bol};
    if (cdv_is_ident0(c)) {
      while (i + k.len < n && cdv_is_ident1((unsigned char)s[i + k.len])) k.len++;
      k.kind = CDV_T_IDENT;
    } else if (isdigit(c) || (c == '.' && i + 1 < n && isdigit((unsigned char)s[i + 1]))) {
      while (i + k.len < n) {
        char d = s[i + k.len];
        if (cdv_is_ident1((unsigned char)d) || d == '.' || d == '\'' ||
            ((d == '+' || d == '-') && strchr("eEpP", s[i + k.len - 1])))
          k.len++;
        else
          break;
      }
      k.kind = CDV_T_NUM;
    }
    if (t->n == t->cap) {
      int cap = t->cap ? t->cap * 2 : 1024;
      cdv_tok *v = realloc(t->v, (size_t)cap * sizeof *v);
      if (!v) return -1;
      t->v = v, t->cap = cap;
    }
    t->v[t->n++] = k;
    i += k.len;
    bol = 0;
  }
  return 0;
}

int cdv_tok_is(const char *s, const cdv_tok *k, const char *w) {
  size_t n = strlen(w);
  return k->len == n && !memcmp(s + k->off, w, n);
}

/* Identifiers whose use needs fibers (threads that can wait for each other). */
static const struct {
  const char *word;
  int prefix;
} barrier_words[] = {{"__syncthreads", 1},
                     {"__syncwarp", 1},
                     {"__shfl", 1},
                     {"__ballot", 1},
                     {"__any", 0},
                     {"__all", 0},
                     {"__any_sync", 0},
                     {"__all_sync", 0},
                     {"__uni_sync", 0},
                     {"__match_", 1},
                     {"__reduce_", 1},
                     {"__barrier_sync", 0},
                     {"cooperative_groups", 0},
                     {"this_thread_block", 0},
                     {"tiled_partition", 0},
                     {"coalesced_threads", 0},
                     {"this_grid", 0},
                     {"grid_group", 0},
                     {NULL, 0}};

/* Is the identifier k one of barrier_words (see NOTE [kernel paths]; its kernel needs fibers)? */
int cdv_scan_barrier_word(const char *s, const cdv_tok *k) {
  for (int i = 0; barrier_words[i].word; i++) {
    size_t n = strlen(barrier_words[i].word);
    if ((barrier_words[i].prefix ? k->len >= n : k->len == n) && !memcmp(s + k->off, barrier_words[i].word, n))
      return 1;
  }
  return 0;
}

/* Record an #include directive starting at the '#' token t[i]; the name is read from the original text. */
void cdv_scan_include(const char *orig, size_t n, const cdv_toks *t, int i, cdv_strlist *includes) {
  if (i + 1 >= t->n || !cdv_tok_is(orig, &t->v[i + 1], "include")) return;
  size_t p = t->v[i + 1].off + t->v[i + 1].len;
  while (p < n && (orig[p] == ' ' || orig[p] == '\t')) p++;
  if (p >= n || (orig[p] != '"' && orig[p] != '<')) return;
  char close = orig[p] == '"' ? '"' : '>';
  size_t q = p + 1;
  while (q < n && orig[q] != close && orig[q] != '\n') q++;
  if (q >= n || orig[q] != close || q == p + 1) return;
  char tmp[PATH_MAX];
  snprintf(tmp, sizeof tmp, "%c%.*s", close == '"' ? 'q' : 'a', (int)(q - p - 1), orig + p + 1);
  cdv_sl_add(includes, tmp);
}

/* diskcache.h: the include scan of both kernel caches reads #include directives with this scanner;
 * *barriers (an int, when given) is set when the text uses a barrier word. */
int cdv_list_includes(void *barriers, const char *path, const char *text, size_t n, cdv_strlist *includes) {
  (void)path;
  char *s = cdv_scan_strip(text, n);
  cdv_toks t = {0};
  cdv_strlist found = {0};
  if (!s || cdv_scan_tokenize(s, n, &t)) {
    free(s), free(t.v);
    return -1;
  }
  int seen = 0;
  for (int i = 0; i < t.n; i++) {
    const cdv_tok *k = &t.v[i];
    if (k->bol && cdv_tok_is(s, k, "#"))
      cdv_scan_include(text, n, &t, i, &found);
    else if (k->kind == CDV_T_IDENT && cdv_scan_barrier_word(s, k))
      seen = 1;
  }
  free(s);
  free(t.v);
  if (found.oom) {
    cdv_sl_free(&found);
    return -1;
  }
  if (barriers) *(int *)barriers |= seen;
  *includes = found;
  return 0;
}
