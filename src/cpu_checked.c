/*
 * cpu_checked.c: the checked memory mode of the cpu device (issue 30): a kernel source rewritten so that its
 * pointers check every access against the Arrays passed to the launch.
 *
 * NOTE [checked memory]: with CUDADEV_CPU_CHECK=memory (read when a kernel is compiled) or cd.compile's
 * {cpu_check = "memory"}, the translation unit defines CDV_CPU_CHECKED and the source is rewritten here:
 * - every pointer parameter `const float *__restrict__ x` of a function defined or declared at namespace scope
 *   (kernels and __device__ functions; of templates, only the __global__ ones) becomes `cdv_chk<const float> x`,
 *   a pointer class of the prelude that carries the bytes of the Array it came from and the parameter's position;
 * - every pointer local `float *p = x + i;` (one `*`, at the start of a statement or a for's initialiser, all its
 *   declarators pointers) becomes `cdv_chk<float> p = x + i;`, so arithmetic keeps the range;
 * - `reinterpret_cast` becomes cdv_rcast, which keeps the range of a checked pointer (a float4 load from a float
 *   Array is checked for its 16 bytes);
 * - an access through a checked name followed by an assignment (`y[i] = v`, `y[i] += v`, `y[i]++`, `*p = v`,
 *   `p->m = v`) is marked a store (`y.cdv_store()[i] = v`), and `&y[i]` an access; the others are loads.
 * The launch passes each Array argument's byte size (cdv_launch_opts.extents, ctx->extent in the kernel); the
 * first access outside [start, start + bytes) calls ctx->fail with CDV_CPU_FAIL_MEMORY, which ends the launch as
 * an assert does, with the kernel, the parameter's position and name, load or store, the element, the bytes
 * past the end (or before the start), the block and the thread.
 * Not checked: pointers not passed as Arrays (nil, integers), shared and local memory, a pointer after a
 * conversion to a raw one (a C-style or static_cast, a call of a template function, a struct member, `void *`,
 * `T **`), members of structs and classes, atomics given `p + i` (atomicAdd(&p[i], v) is checked), and a store
 * through a reference (`f(y[i])` that writes, `T &r = y[i]; r = v` report as loads). Checked kernels take the
 * plain loop and fiber paths (no simd or fission; NOTE [fast paths]): the checks are the price of the mode.
 */
#include <stdarg.h>
#include <string.h>
#include "cpu_compile.h"

/* Words that start a statement that declares nothing (so `return a * b;` is no declaration). */
static const char *const not_types[] = {
    "return",   "case",    "goto",  "delete",   "throw",    "typedef",       "using",     "else",
    "do",       "if",      "while", "for",      "switch",   "sizeof",        "new",       "break",
    "continue", "default", "asm",   "template", "operator", "static_assert", "co_return", NULL};
/* Words before a parenthesis at namespace scope that open no parameter list. */
static const char *const not_functions[] = {
    "__attribute__", "__launch_bounds__", "__align__",  "alignas", "decltype",
    "sizeof",        "static_assert",     "__declspec", "defined", "__builtin_align__",
    "__maxnreg__",   "__cluster_dims__",  NULL};

typedef struct edit {
  size_t off, len;
  int seq; /* edits at one offset stay in the order they were made */
  char *text;
} edit;

typedef struct chk {
  const char *s; /* the blanked text */
  const cdv_toks *t;
  edit *rw;
  int nrw, cap, oom;
  cdv_strlist names; /* checked names of the function being read */
  cdv_strlist templates; /* function templates that are no kernels: their arguments go in raw */
} chk;

static int is(const chk *c, int i, const char *w) { return i >= 0 && i < c->t->n && cdv_tok_is(c->s, &c->t->v[i], w); }
static int ident(const chk *c, int i) { return i >= 0 && i < c->t->n && c->t->v[i].kind == CDV_T_IDENT; }

static void add_rw(chk *c, size_t off, size_t len, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void add_rw(chk *c, size_t off, size_t len, const char *fmt, ...) {
  if (c->nrw == c->cap) {
    int cap = c->cap ? 2 * c->cap : 64;
    edit *v = realloc(c->rw, (size_t)cap * sizeof *v);
    if (!v) {
      c->oom = 1;
      return;
    }
    c->rw = v, c->cap = cap;
  }
  char tmp[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  char *text = strdup(tmp);
  if (!text) {
    c->oom = 1;
    return;
  }
  c->rw[c->nrw] = (edit){off, len, c->nrw, text};
  c->nrw++;
}

/* The index after the type of a declaration starting at i (identifiers and "::"), i when there is none. */
static int type_end(const chk *c, int i) {
  int j = i;
  while (ident(c, j) || (is(c, j, ":") && is(c, j + 1, ":") && ident(c, j + 2))) j += is(c, j, ":") ? 2 : 1;
  return j;
}

static const char *const qualifiers[] = {"const", "volatile", "struct", "class", "enum", "typename", "union", NULL};
static const char *const builtins[] = {"void", "char",   "short",    "int",     "long",     "float",    "double",
                                       "bool", "signed", "unsigned", "wchar_t", "char16_t", "char32_t", NULL};

/* Where the pointee type before the `*` at j starts, read backwards from it: qualifiers, built-in type words and at
 * most one other name (`ns::T`), not both; whatever comes before is no part of it (a storage class, `static`, or a
 * macro that expands to a statement: `FORCE unsigned *const s = ...`). j when there is no type. */
static int type_start(const chk *c, int i, int j) {
  int k = j - 1, name = 0, builtin = 0;
  while (k >= i && ident(c, k)) {
    if (cdv_cpu_word_of(c->s, &c->t->v[k], builtins)) {
      if (name) break;
      builtin = 1;
    } else if (!cdv_cpu_word_of(c->s, &c->t->v[k], qualifiers)) {
      if (name || builtin || cdv_cpu_word_of(c->s, &c->t->v[k], not_types)) break;
      name = 1;
      while (k - 3 >= i - 1 && is(c, k - 1, ":") && is(c, k - 2, ":") && ident(c, k - 3)) k -= 3;
    }
    k--;
  }
  return k + 1;
}

/* The type tokens i..j-1 name void (alone or with qualifiers): cdv_chk<void> has no element to check. */
static int void_type(const chk *c, int i, int j) {
  for (int k = i; k < j; k++)
    if (!is(c, k, "void") && !is(c, k, "const") && !is(c, k, "volatile")) return 0;
  return 1;
}

/* After the `*` at i: qualifiers of the pointer itself; *cq set when one is const. The index after them. */
static int ptr_quals(const chk *c, int i, int *cq) {
  *cq = 0;
  while (is(c, i, "const") || is(c, i, "__restrict__") || is(c, i, "__restrict") || is(c, i, "restrict")) {
    *cq |= is(c, i, "const");
    i++;
  }
  return i;
}

/* A local's further declarators after the first one's name at n, up to the statement's ";": each must be a
 * pointer too (`float *p = x, *q;`), and with apply its `*` goes (each becomes a cdv_chk of the same type). 0, or -1
 * for a statement that mixes pointers and others, or a const pointer after the first. */
static int more_declarators(chk *c, int n, int apply) {
  int depth = 0;
  for (int k = n + 1; k < c->t->n; k++) {
    depth += is(c, k, "(") || is(c, k, "[") || is(c, k, "{");
    depth -= is(c, k, ")") || is(c, k, "]") || is(c, k, "}");
    if (depth < 0) return -1;
    if (depth == 0 && is(c, k, ";")) return 0;
    if (depth == 0 && is(c, k, ",")) {
      int cq, q = ptr_quals(c, k + 2, &cq);
      if (!is(c, k + 1, "*") || !ident(c, q) || cq) return -1;
      if (apply) add_rw(c, c->t->v[k + 1].off, c->t->v[q].off - c->t->v[k + 1].off, "%s", "");
      if (apply) cdv_sl_addn(&c->names, c->s + c->t->v[q].off, c->t->v[q].len);
    }
  }
  return -1;
}

/* `T *q name` at i..: the declarator rewritten to `cdv_chk<T> q name`; end: the token that may follow the name. The
 * index of the name (or of what follows the `*` for an unnamed parameter), or -1 for another declaration. */
static int pointer_decl(chk *c, int i, int local, const char *const *follow) {
  if (cdv_cpu_word_of(c->s, &c->t->v[i], not_types)) return -1;
  int j = type_end(c, i), cq;
  int from = type_start(c, i, j);
  if (from == j || !is(c, j, "*") || is(c, j + 1, "*") || void_type(c, from, j)) return -1;
  int n = ptr_quals(c, j + 1, &cq);
  int named = ident(c, n) && !cdv_cpu_word_of(c->s, &c->t->v[n], not_types);
  int after = named ? n + 1 : n;
  if (!named && local) return -1;
  int ok = 0;
  for (int k = 0; follow[k] && !ok; k++) ok = after >= c->t->n ? !strcmp(follow[k], "") : is(c, after, follow[k]);
  if (!ok || (is(c, after, "=") && is(c, after + 1, "=")) || (local && more_declarators(c, n, 0))) return -1;
  const cdv_tok *a = &c->t->v[from], *b = &c->t->v[j - 1];
  size_t stop = named ? c->t->v[n].off : c->t->v[j].off + 1;
  add_rw(c, a->off, stop - a->off, "cdv_chk<%.*s>%s ", (int)(b->off + b->len - a->off), c->s + a->off,
         cq ? " const" : "");
  if (named) cdv_sl_addn(&c->names, c->s + c->t->v[n].off, c->t->v[n].len);
  if (local) more_declarators(c, n, 1);
  return n;
}

/* The parameters of the list whose "(" is at i; the index after its ")". */
static int params(chk *c, int i) {
  static const char *const follow[] = {",", ")", "=", NULL};
  int end = cdv_cpu_skip_parens(c->s, c->t, i), start = i + 1, depth = 0;
  for (int k = i + 1; k < end; k++) {
    if (is(c, k, "(") || is(c, k, "[") || is(c, k, "{") || is(c, k, "<")) depth++;
    if (is(c, k, ")") || is(c, k, "]") || is(c, k, "}") || is(c, k, ">")) depth--;
    if ((depth == 0 && is(c, k, ",")) || k == end - 1) {
      if (k > start) pointer_decl(c, start, 0, follow);
      start = k + 1;
    }
  }
  return end;
}

static int in_list(const chk *c, const cdv_strlist *l, int i) {
  if (!ident(c, i)) return 0;
  for (int k = 0; k < l->n; k++)
    if (strlen(l->v[k]) == c->t->v[i].len && !memcmp(l->v[k], c->s + c->t->v[i].off, c->t->v[i].len)) return 1;
  return 0;
}
static int is_name(const chk *c, int i) { return in_list(c, &c->names, i); }

/* A call of a function template that is no kernel, its name at i: template argument deduction does not see
 * through cdv_chk, so each argument goes in as cdv_raw(argument), a raw pointer for a checked one (the template
 * itself is not checked: NOTE [checked memory]). */
static void raw_arguments(chk *c, int i) {
  int open = i + 1;
  if (is(c, open, "<"))
    for (int d = 0; open < c->t->n; open++) {
      d += is(c, open, "<") - is(c, open, ">");
      if (d == 0) break;
    }
  if (is(c, open, ">")) open++;
  if (!is(c, open, "(")) return;
  int end = cdv_cpu_skip_parens(c->s, c->t, open) - 1, start = open + 1, depth = 0;
  for (int k = open + 1; k <= end && start < end; k++) {
    depth += is(c, k, "(") || is(c, k, "[") || is(c, k, "{");
    depth -= (is(c, k, ")") && k != end) || is(c, k, "]") || is(c, k, "}");
    if ((depth == 0 && is(c, k, ",")) || k == end) {
      const cdv_tok *a = &c->t->v[start], *b = &c->t->v[k - 1];
      add_rw(c, a->off, 0, "cdv_raw(");
      add_rw(c, b->off + b->len, 0, ")");
      start = k + 1;
    }
  }
}

/* An assignment (or ++, --) starts at token i: what follows an access that stores. */
static int assigns(const chk *c, int i) {
  if (is(c, i, "=")) return !is(c, i + 1, "=");
  if ((is(c, i, "+") && is(c, i + 1, "+")) || (is(c, i, "-") && is(c, i + 1, "-"))) return 1;
  if ((is(c, i, "<") && is(c, i + 1, "<")) || (is(c, i, ">") && is(c, i + 1, ">"))) return is(c, i + 2, "=");
  if (i >= c->t->n || c->t->v[i].kind != CDV_T_PUNCT || !strchr("+-*/%&|^", c->s[c->t->v[i].off])) return 0;
  return is(c, i + 1, "=") && !is(c, i + 2, "=");
}

/* A checked name at i used as an access: mark it a store or an address where it is one. */
static void mark_access(chk *c, int i) {
  const cdv_tok *k = &c->t->v[i];
  int unary_amp = is(c, i - 1, "&") && (is(c, i - 2, "(") || is(c, i - 2, ",") || is(c, i - 2, "=") ||
                                        is(c, i - 2, "return") || is(c, i - 2, ";") || is(c, i - 2, "{"));
  const char *mark = NULL;
  if (is(c, i + 1, "[")) {
    int close = i + 1;
    for (int d = 0; close < c->t->n; close++) {
      d += is(c, close, "[") - is(c, close, "]");
      if (d == 0) break;
    }
    int pre = (is(c, i - 1, "+") && is(c, i - 2, "+")) || (is(c, i - 1, "-") && is(c, i - 2, "-"));
    if (close < c->t->n && (assigns(c, close + 1) || pre))
      mark = ".cdv_store()";
    else if (unary_amp)
      mark = ".cdv_addr()";
  } else if (is(c, i - 1, "*") &&
             (is(c, i - 2, ";") || is(c, i - 2, "{") || is(c, i - 2, "}") || is(c, i - 2, ")") ||
              is(c, i - 2, "else")) &&
             (assigns(c, i + 1) || (is(c, i + 1, "+") && is(c, i + 2, "+") && assigns(c, i + 3)))) {
    mark = ".cdv_store()";
  } else if (is(c, i + 1, "-") && is(c, i + 2, ">") && ident(c, i + 3) && assigns(c, i + 4)) {
    mark = ".cdv_store()";
  }
  if (mark) add_rw(c, k->off + k->len, 0, "%s", mark);
}

/* The body of a function, "{" at i: its pointer locals, casts and stores. The index after its "}". */
static int body(chk *c, int i) {
  static const char *const follow[] = {"=", ";", ",", NULL};
  int depth = 0, j = i;
  for (; j < c->t->n; j++) {
    const cdv_tok *k = &c->t->v[j];
    if (k->bol && is(c, j, "#")) {
      j = cdv_cpu_pp_line_end(c->s, c->t, j) - 1;
      continue;
    }
    depth += is(c, j, "{") - is(c, j, "}");
    if (depth == 0) break;
    int stmt =
        is(c, j - 1, "{") || is(c, j - 1, "}") || is(c, j - 1, ";") || (is(c, j - 1, "(") && is(c, j - 2, "for"));
    int n = stmt && ident(c, j) ? pointer_decl(c, j, 1, follow) : -1;
    if (n >= 0) {
      j = n;
    } else if (is(c, j, "reinterpret_cast")) {
      add_rw(c, k->off, k->len, "cdv_rcast");
    } else if (in_list(c, &c->templates, j) && !is(c, j - 1, ".") && !is(c, j - 1, ">")) {
      raw_arguments(c, j);
    } else if (is_name(c, j) && !is(c, j - 1, ".") && !(is(c, j - 1, ">") && is(c, j - 2, "-"))) {
      mark_access(c, j);
    }
  }
  return j;
}

/* Rewrites of src (the blanked copy s, tokens t) for checked mode, into r (NOTE [checked memory]). */
static int checked_rewrites(chk *c) {
  int nsdepth = 0, other = 0, in_template = 0, in_global = 0;
  for (int i = 0; i < c->t->n && !c->oom; i++) {
    const cdv_tok *k = &c->t->v[i];
    if (k->bol && is(c, i, "#")) {
      i = cdv_cpu_pp_line_end(c->s, c->t, i) - 1;
    } else if (is(c, i, "{") && !other && cdv_cpu_ns_brace(c->s, c->t, i)) {
      nsdepth++;
    } else if (is(c, i, "{")) {
      char name[128];
      if (!other && cdv_cpu_function_name(c->s, c->t, i, name, sizeof name)) {
        i = body(c, i);
        cdv_sl_free(&c->names);
        in_template = in_global = 0;
      } else {
        other++;
      }
    } else if (is(c, i, "}")) {
      if (other)
        other--;
      else
        nsdepth -= nsdepth > 0;
      in_template = in_global = 0;
    } else if (other) {
      continue;
    } else if (is(c, i, ";")) {
      in_template = in_global = 0;
      cdv_sl_free(&c->names);
    } else if (is(c, i, "template")) {
      in_template = 1;
    } else if (is(c, i, "__global__")) {
      in_global = 1;
    } else if (is(c, i, "(") && ident(c, i - 1) && !cdv_cpu_word_of(c->s, &c->t->v[i - 1], not_functions) &&
               (!in_template || in_global)) {
      cdv_sl_free(&c->names);
      i = params(c, i) - 1;
    } else if (is(c, i, "(") && ident(c, i - 1) && !cdv_cpu_word_of(c->s, &c->t->v[i - 1], not_functions)) {
      cdv_sl_addn(&c->templates, c->s + c->t->v[i - 1].off, c->t->v[i - 1].len);
      i = cdv_cpu_skip_parens(c->s, c->t, i) - 1;
    } else if (is(c, i, "<") && in_template && is(c, i - 1, "template")) {
      int d = 0; /* the template's own parameter list */
      for (; i < c->t->n; i++) {
        d += is(c, i, "<") - is(c, i, ">");
        if (d == 0) break;
      }
    }
  }
  return c->oom || c->names.oom || c->templates.oom ? -1 : 0;
}

static int by_offset(const void *a, const void *b) {
  const edit *x = a, *y = b;
  return x->off != y->off ? (x->off < y->off ? -1 : 1) : (x->seq > y->seq) - (x->seq < y->seq);
}

/* src[0..n) rewritten for checked mode (malloc'd, *outn its length), or NULL when out of memory. */
char *cdv_cpu_checked_source(const char *src, size_t n, size_t *outn) {
  char *s = cdv_scan_strip(src, n);
  cdv_toks t = {0};
  if (!s || cdv_scan_tokenize(s, n, &t)) {
    free(s);
    free(t.v);
    return NULL;
  }
  chk c = {s, &t, NULL, 0, 0, 0, {0}, {0}};
  int rc = checked_rewrites(&c);
  if (c.nrw) qsort(c.rw, (size_t)c.nrw, sizeof *c.rw, by_offset); /* a declaration's later `*`s come before its marks */
  buf b = {0};
  size_t at = 0;
  for (int i = 0; i < c.nrw && rc == 0; i++) {
    buf_add(&b, src + at, c.rw[i].off - at);
    buf_adds(&b, c.rw[i].text);
    at = c.rw[i].off + c.rw[i].len;
  }
  if (rc == 0) buf_add(&b, src + at, n - at);
  for (int i = 0; i < c.nrw; i++) free(c.rw[i].text);
  free(c.rw);
  cdv_sl_free(&c.names);
  cdv_sl_free(&c.templates);
  free(t.v);
  free(s);
  if (rc || b.oom || !b.p) {
    free(b.p);
    return rc || b.oom ? NULL : strdup("");
  }
  *outn = b.n;
  return b.p;
}
