/*
 * scan.c: the source scanner of CUDA C text, below both backends (it knows neither): comments and literals
 * blanked with offsets and lines kept, tokens (identifiers, pp-numbers, single punctuation characters), the
 * #include directives of a text and whether it uses a block barrier or a warp intrinsic. The cpu compiler
 * (cpu_compile.c: refused constructs, kernel paths, extern __shared__) and the include scan of both kernel
 * caches (diskcache.c for cuda_cache.c and the cpu cache) read sources with it.
 * The signature reader (sig.c) reads the other token stream, cdv_scan_lex (NOTE [token streams]).
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

static int toks_push(cdv_toks *t, cdv_tok k) {
  if (t->n == t->cap) {
    int cap = t->cap ? t->cap * 2 : 64;
    cdv_tok *v = realloc(t->v, (size_t)cap * sizeof *v);
    if (!v) return -1;
    t->v = v, t->cap = cap;
  }
  t->v[t->n++] = k;
  return 0;
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
    if (toks_push(t, k) != 0) return -1;
    i += k.len;
    bol = 0;
  }
  return 0;
}

/* ---------------------------------------------------------------- the C++ token stream (NOTE [token streams]) */
typedef struct lexer {
  const char *src, *p, *end;
  int line;
  cdv_toks *out;
} lexer;

static int is_id0(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$' || c >= 0x80;
}
static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
static int is_id(unsigned char c) { return is_id0(c) || is_digit(c); }
static int is_blank(unsigned char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }

/* Length of a backslash-newline (a line splice) at p, else 0. */
static int splice_at(const lexer *lx, const char *p) {
  if (p >= lx->end || *p != '\\') return 0;
  if (p + 1 < lx->end && p[1] == '\n') return 2;
  if (p + 2 < lx->end && p[1] == '\r' && p[2] == '\n') return 3;
  return 0;
}

/* Past a block comment starting at lx->p ("/" "*"); an unterminated one runs to the end. */
static void skip_block_comment(lexer *lx) {
  const char *p = lx->p + 2;
  while (p < lx->end && !(*p == '*' && p + 1 < lx->end && p[1] == '/')) lx->line += *p++ == '\n';
  lx->p = p < lx->end ? p + 2 : lx->end;
}

/* To the newline ending a // comment (left for the caller); a line splice continues the comment. */
static void skip_line_comment(lexer *lx) {
  const char *p = lx->p;
  while (p < lx->end && *p != '\n') {
    int s = splice_at(lx, p);
    if (s)
      lx->line++, p += s;
    else
      p++;
  }
  lx->p = p;
}

/* Past a quoted literal opening at lx->p; an unterminated one stops at the end of its line. */
static void skip_quoted(lexer *lx) {
  char q = *lx->p;
  const char *p = lx->p + 1;
  while (p < lx->end && *p != q && *p != '\n') {
    int s = splice_at(lx, p);
    if (s)
      lx->line++, p += s;
    else
      p += (*p == '\\' && p + 1 < lx->end && p[1] != '\n') ? 2 : 1;
  }
  lx->p = p < lx->end && *p == q ? p + 1 : p;
}

/* Past a raw string R"delim( ... )delim" whose quote is at lx->p; 0, or -1 when it is not one. */
static int skip_raw(lexer *lx) {
  const char *d = lx->p + 1, *p = d;
  while (p < lx->end && p - d <= 16 && *p != '(') {
    if (*p == ' ' || *p == ')' || *p == '\\' || *p == '"' || *p == '\n' || *p == '\t') return -1;
    p++;
  }
  if (p >= lx->end || *p != '(') return -1;
  size_t dn = (size_t)(p - d);
  for (p++; p < lx->end; p++) {
    if (*p == ')' && (size_t)(lx->end - p) > dn + 1 && memcmp(p + 1, d, dn) == 0 && p[dn + 1] == '"') {
      lx->p = p + dn + 2;
      return 0;
    }
    lx->line += *p == '\n';
  }
  lx->p = lx->end;
  return 0;
}

/* Skip blanks and line splices within a line. */
static void skip_blanks(lexer *lx) {
  for (;;) {
    int s = splice_at(lx, lx->p);
    if (s)
      lx->line++, lx->p += s;
    else if (lx->p < lx->end && is_blank((unsigned char)*lx->p))
      lx->p++;
    else
      return;
  }
}

/* The directive word after '#' (lx->p just past it): "if", "endif" ...; empty when none. */
static size_t directive_word(lexer *lx, const char **w) {
  skip_blanks(lx);
  *w = lx->p;
  while (lx->p < lx->end && is_id((unsigned char)*lx->p)) lx->p++;
  return (size_t)(lx->p - *w);
}

/* To the newline ending a preprocessor line; splices continue it, comments inside may span lines,
 * and quotes are skipped so that "/" "*" inside a string starts no comment. */
static void skip_directive_rest(lexer *lx) {
  while (lx->p < lx->end && *lx->p != '\n') {
    const char *p = lx->p;
    int s = splice_at(lx, p);
    if (s)
      lx->line++, lx->p += s;
    else if (*p == '/' && p + 1 < lx->end && p[1] == '*')
      skip_block_comment(lx);
    else if (*p == '/' && p + 1 < lx->end && p[1] == '/')
      skip_line_comment(lx);
    else if (*p == '"' || *p == '\'')
      skip_quoted(lx);
    else
      lx->p++;
  }
}

static int word_is(const char *w, size_t n, const char *s) { return strlen(s) == n && memcmp(w, s, n) == 0; }

/* Lines of an `#if 0` group, up to its #else, #elif or #endif (code there never compiles, and often
 * holds old kernels). Only comments are honoured, so a directive inside a comment counts for nothing. */
static void skip_if0(lexer *lx) {
  int depth = 0;
  while (lx->p < lx->end) {
    lx->line++, lx->p++; /* the newline ending the previous line */
    skip_blanks(lx);
    if (lx->p < lx->end && *lx->p == '#') {
      const char *w;
      lx->p++;
      size_t n = directive_word(lx, &w);
      if (word_is(w, n, "if") || word_is(w, n, "ifdef") || word_is(w, n, "ifndef"))
        depth++;
      else if (word_is(w, n, "endif") && depth > 0)
        depth--;
      else if (depth == 0 && (word_is(w, n, "endif") || word_is(w, n, "else") || word_is(w, n, "elif") ||
                              word_is(w, n, "elifdef") || word_is(w, n, "elifndef"))) {
        skip_directive_rest(lx);
        return;
      }
    }
    while (lx->p < lx->end && *lx->p != '\n') {
      const char *p = lx->p;
      if (*p == '/' && p + 1 < lx->end && p[1] == '*')
        skip_block_comment(lx);
      else if (*p == '/' && p + 1 < lx->end && p[1] == '/')
        skip_line_comment(lx);
      else
        lx->p++;
    }
  }
}

/* A preprocessor line, lx->p at its '#'. */
static void skip_directive(lexer *lx) {
  const char *w;
  lx->p++;
  size_t n = directive_word(lx, &w);
  int if0 = 0;
  if (word_is(w, n, "if")) {
    skip_blanks(lx);
    const char *p = lx->p;
    if0 = p < lx->end && *p == '0' && (p + 1 >= lx->end || !(is_id((unsigned char)p[1]) || p[1] == '.'));
  }
  skip_directive_rest(lx);
  if (if0) skip_if0(lx);
}

static int emit(lexer *lx, const char *start, int kind, int line, int bol) {
  cdv_tok t = {(size_t)(start - lx->src), (size_t)(lx->p - start), kind, line, bol};
  return toks_push(lx->out, t);
}

/* A string or character literal with an encoding prefix ("u8", "L", "R" ...) just read as an identifier. */
static int prefixed_literal(lexer *lx, const char *start) {
  size_t n = (size_t)(lx->p - start);
  if (lx->p >= lx->end || (*lx->p != '"' && *lx->p != '\'')) return 0;
  int raw = n > 0 && start[n - 1] == 'R' && *lx->p == '"';
  size_t pn = raw ? n - 1 : n; /* the encoding part */
  if (!(pn == 0 || word_is(start, pn, "u8") || word_is(start, pn, "u") || word_is(start, pn, "U") ||
        word_is(start, pn, "L")))
    return 0;
  if (raw && skip_raw(lx) == 0) return 1;
  if (raw && pn == 0) return 0; /* R'x' or a bad raw string: an identifier R and a literal */
  skip_quoted(lx);
  return 1;
}

static void lex_number(lexer *lx) {
  const char *p = lx->p;
  while (p < lx->end) {
    unsigned char c = (unsigned char)*p;
    char e = p[-1]; /* an exponent's sign belongs to the number: 1e+5, 0x1p-3 */
    if ((c == '+' || c == '-') && (e == 'e' || e == 'E' || e == 'p' || e == 'P'))
      p++;
    else if (is_id(c) || c == '.')
      p++;
    else if (c == '\'' && p + 1 < lx->end && is_id((unsigned char)p[1]))
      p += 2;
    else
      break;
  }
  lx->p = p;
}

/* One token or skipped stretch at lx->p; *bol says whether only blanks and comments precede it on its line. */
static int lex_one(lexer *lx, int *bol) {
  const char *p = lx->p, *end = lx->end, *start = p;
  unsigned char c = (unsigned char)*p;
  int line = lx->line, s = splice_at(lx, p);
  if (c == '\n') {
    lx->line++, lx->p++, *bol = 1;
  } else if (is_blank(c) || s) {
    lx->p += s ? s : 1;
    lx->line += s != 0;
  } else if (c == '/' && p + 1 < end && (p[1] == '/' || p[1] == '*')) {
    if (p[1] == '/')
      skip_line_comment(lx);
    else
      skip_block_comment(lx);
  } else if (c == '#' && *bol) {
    skip_directive(lx);
  } else {
    int first = *bol;
    *bol = 0;
    if (c == '"' || c == '\'') {
      skip_quoted(lx);
      return emit(lx, start, c == '"' ? CDV_T_STR : CDV_T_CHAR, line, first);
    }
    if (is_id0(c)) {
      while (lx->p < end && is_id((unsigned char)*lx->p)) lx->p++;
      if (prefixed_literal(lx, start)) return emit(lx, start, CDV_T_STR, line, first);
      return emit(lx, start, CDV_T_IDENT, line, first);
    }
    if (is_digit(c) || (c == '.' && p + 1 < end && is_digit((unsigned char)p[1]))) {
      lx->p++;
      lex_number(lx);
      return emit(lx, start, CDV_T_NUM, line, first);
    }
    if (c == ':' && p + 1 < end && p[1] == ':')
      lx->p += 2;
    else if (c == '.' && p + 2 < end && p[1] == '.' && p[2] == '.')
      lx->p += 3;
    else
      lx->p++;
    return emit(lx, start, CDV_T_PUNCT, line, first);
  }
  return 0;
}

/* (see NOTE [token streams]) the tokens of the C++ text s[0..n), appended to t; -1 when out of memory. */
int cdv_scan_lex(const char *s, size_t n, cdv_toks *t) {
  lexer lx = {s, s, s + n, 1, t};
  int bol = 1;
  while (lx.p < lx.end)
    if (lex_one(&lx, &bol) != 0) return -1;
  return 0;
}

/* ---------------------------------------------------------------- reading tokens */
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
