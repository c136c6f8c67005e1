/*
 * cpu_scan.c: reading a kernel source for the cpu device (cpu_compile.h names the stages): the constructs it
 * cannot run, the functions and what they mention (NOTE [kernel paths]), `extern __shared__` rewrites and
 * #includes.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <limits.h>
#include "cpu_compile.h"

/* ---------------------------------------------------------------- source scan (scan.c's tokens) */
/* Constructs the cpu device cannot run; prefix: the word starts an identifier ("tex2D" covers tex2DLod). */
static const struct refusal {
  const char *word;
  int prefix;
  const char *what;
} refusals[] = {{"asm", 0, "inline PTX asm"},
                {"__asm__", 0, "inline PTX asm"},
                {"__asm", 0, "inline PTX asm"},
                {"tex1D", 1, "texture fetch"},
                {"tex2D", 1, "texture fetch"},
                {"tex3D", 1, "texture fetch"},
                {"texCubemap", 1, "texture fetch"},
                {"tex1Dfetch", 0, "texture fetch"},
                {"cudaTextureObject_t", 0, "texture object"},
                {"surf1D", 1, "surface access"},
                {"surf2D", 1, "surface access"},
                {"surf3D", 1, "surface access"},
                {"surfCubemap", 1, "surface access"},
                {"cudaSurfaceObject_t", 0, "surface object"},
                {"cudaLaunchCooperativeKernel", 0, "grid-wide synchronization"},
                {"this_multi_grid", 0, "multi-grid synchronization"},
                {"this_cluster", 0, "thread block cluster"},
                {"cluster_group", 0, "thread block cluster"},
                {"mma_sync", 0, "tensor core intrinsic"},
                {"__hmma", 1, "tensor core intrinsic"},
                {"__imma", 1, "tensor core intrinsic"},
                {"__bmma", 1, "tensor core intrinsic"},
                {"wgmma", 1, "tensor core intrinsic"},
                {"load_matrix_sync", 0, "tensor core intrinsic"},
                {"store_matrix_sync", 0, "tensor core intrinsic"},
                {NULL, 0, NULL}};

static const struct refusal *word_in(const struct refusal *tab, const char *s, const cdv_tok *k) {
  for (int i = 0; tab[i].word; i++) {
    size_t n = strlen(tab[i].word);
    if ((tab[i].prefix ? k->len >= n : k->len == n) && !memcmp(s + k->off, tab[i].word, n)) return &tab[i];
  }
  return NULL;
}

/* A construct refused because of the tokens around it ("texture<", "wmma::", "<<<"). */
static const char *refused_sequence(const char *s, const cdv_toks *t, int i, const char **word) {
  const cdv_tok *k = &t->v[i], *n1 = i + 1 < t->n ? &t->v[i + 1] : NULL, *n2 = i + 2 < t->n ? &t->v[i + 2] : NULL;
  if ((cdv_tok_is(s, k, "texture") || cdv_tok_is(s, k, "surface")) && n1 && cdv_tok_is(s, n1, "<"))
    return *word = cdv_tok_is(s, k, "texture") ? "texture<" : "surface<", "texture reference";
  if (cdv_tok_is(s, k, "wmma") && n1 && cdv_tok_is(s, n1, ":")) return *word = "wmma::", "tensor core intrinsic";
  if (cdv_tok_is(s, k, "<") && n1 && n2 && cdv_tok_is(s, n1, "<") && cdv_tok_is(s, n2, "<") && n1->off == k->off + 1 &&
      n2->off == k->off + 2)
    return *word = "<<<", "dynamic parallelism (a kernel launch inside a kernel)";
  return NULL;
}

void cdv_cpu_scan_free(scanres *r) {
  for (int i = 0; i < r->nrw; i++) free(r->rw[i].text);
  free(r->rw);
  cdv_sl_free(&r->includes);
  for (int i = 0; i < r->nfn; i++) free(r->fn[i].name), free(r->fn[i].idents);
  free(r->fn);
  memset(r, 0, sizeof *r);
}

/* Skip a balanced parenthesised group starting at t[i] == "("; returns the index after it. */
int cdv_cpu_skip_parens(const char *s, const cdv_toks *t, int i) {
  int depth = 0;
  for (; i < t->n; i++) {
    if (cdv_tok_is(s, &t->v[i], "("))
      depth++;
    else if (cdv_tok_is(s, &t->v[i], ")") && --depth == 0)
      return i + 1;
  }
  return i;
}

static void add_toks(buf *b, const char *orig, const cdv_toks *t, int from, int to) {
  for (int i = from; i < to; i++) {
    if (i > from) buf_adds(b, " ");
    buf_add(b, orig + t->v[i].off, t->v[i].len);
  }
}

/* `extern __shared__ T name[];` (tokens a..semi) becomes a pointer to the block's dynamic shared memory:
 * `T *const name = (T *)cdv_dyn_shared();`. At namespace scope it becomes a static thread_local pointer,
 * initialised once per OS thread, which is right because each OS thread's buffer never moves
 * (NOTE [dynamic shared memory] in cpu_run.c). Alignment attributes are dropped: the buffer is 64-byte
 * aligned. The replacement keeps the declaration's newlines so later line numbers do not move. */
static int rewrite_extern_shared(const char *orig, const cdv_toks *t, int a, int semi, int ns_scope, scanres *r) {
  int keep[512], m = 0;
  for (int i = a; i < semi && m < 512;) {
    if (cdv_tok_is(orig, &t->v[i], "extern") || cdv_tok_is(orig, &t->v[i], "__shared__")) {
      i++;
    } else if ((cdv_tok_is(orig, &t->v[i], "__align__") || cdv_tok_is(orig, &t->v[i], "alignas") ||
                cdv_tok_is(orig, &t->v[i], "__attribute__")) &&
               i + 1 < semi && cdv_tok_is(orig, &t->v[i + 1], "(")) {
      i = cdv_cpu_skip_parens(orig, t, i + 1);
    } else {
      keep[m++] = i++;
    }
  }
  int lb = -1;
  for (int j = 0; j < m; j++)
    if (cdv_tok_is(orig, &t->v[keep[j]], "[")) {
      lb = j;
      break;
    }
  if (lb < 1 || t->v[keep[lb - 1]].kind != CDV_T_IDENT)
    return 0; /* not an array declaration we understand: leave it to the compiler */
  int rb = lb;
  while (rb < m && !cdv_tok_is(orig, &t->v[keep[rb]], "]")) rb++;
  buf spec = {0}, rest = {0}, out = {0};
  for (int j = 0; j < lb - 1; j++) add_toks(&spec, orig, t, keep[j], keep[j] + 1), buf_adds(&spec, " ");
  for (int j = rb + 1; j < m; j++) add_toks(&rest, orig, t, keep[j], keep[j] + 1);
  const cdv_tok *name = &t->v[keep[lb - 1]];
  buf_adds(&out, ns_scope ? "static thread_local " : "");
  const char *sp = spec.p ? spec.p : "", *rs = rest.p ? rest.p : "";
  if (rest.n)
    buf_addf(&out, "%s(*const %.*s)%s = (%s(*)%s)cdv_dyn_shared();", sp, (int)name->len, orig + name->off, rs, sp, rs);
  else
    buf_addf(&out, "%s*const %.*s = (%s*)cdv_dyn_shared();", sp, (int)name->len, orig + name->off, sp);
  size_t off = t->v[a].off, len = t->v[semi].off + 1 - off;
  for (size_t k = 0; k < len; k++)
    if (orig[off + k] == '\n') buf_adds(&out, "\n");
  free(spec.p);
  free(rest.p);
  rewrite *rw = out.oom ? NULL : realloc(r->rw, (size_t)(r->nrw + 1) * sizeof *rw);
  if (!rw) {
    free(out.p);
    return -1;
  }
  r->rw = rw;
  r->rw[r->nrw++] = (rewrite){off, len, out.p};
  return 0;
}

/* Is the '{' at t[i] the brace of a namespace or linkage block (so the scope inside stays namespace scope)? */
int cdv_cpu_ns_brace(const char *s, const cdv_toks *t, int i) {
  int j = i - 1;
  while (j >= 0 && (t->v[j].kind == CDV_T_IDENT || cdv_tok_is(s, &t->v[j], ":")) &&
         !cdv_tok_is(s, &t->v[j], "namespace") && !cdv_tok_is(s, &t->v[j], "extern"))
    j--;
  return j >= 0 && (cdv_tok_is(s, &t->v[j], "namespace") || (cdv_tok_is(s, &t->v[j], "extern") && j == i - 1));
}

/* NOTE [refused constructs]: the first construct the cpu device cannot run is noted with its line. It is
 * reported only if the host compiler then fails (it does on PTX asm, textures, wmma...), so that such code in
 * a preprocessor branch the cpu device does not take (#ifdef __CUDADEV_CPU__ ... #else ... #endif), or an
 * asm statement the host understands too (asm volatile("" ::: "memory")), is no obstacle. The file and line
 * are those the compilers would report: `#line N "file"` (and gcc's `# N "file"`) directives move them. */
static void note_refusal(const char *fname, int line, const char *s, const cdv_toks *t, int i, scanres *r) {
  const cdv_tok *k = &t->v[i];
  const struct refusal *f;
  const char *what, *word;
  char w[64];
  if (r->refusal[0]) return;
  if (k->kind == CDV_T_IDENT && (f = word_in(refusals, s, k))) {
    what = f->what;
    snprintf(w, sizeof w, "%.*s", (int)k->len, s + k->off);
    word = w;
  } else if (!(what = refused_sequence(s, t, i, &word))) {
    return;
  }
  if (!strcmp(what, "inline PTX asm"))
    snprintf(r->refusal, sizeof r->refusal, "%s:%d: inline PTX asm is not supported on the cpu device", fname, line);
  else
    snprintf(r->refusal, sizeof r->refusal, "%s:%d: %s '%s' is not supported on the cpu device", fname, line, what,
             word);
}

/* Where the lines of a file are said to come from: `#line N ["file"]` or `# N ["file"]` at t[i] (a '#' that
 * starts its line) makes the next line N of that file. The name is read from the original text (the scanner
 * blanked literals); it is kept when it has no quote or backslash to undo. */
typedef struct linemap {
  int delta; /* reported line = physical line + delta */
  char file[256];
} linemap;

static void note_line_directive(const char *orig, size_t size, const char *s, const cdv_toks *t, int i, linemap *lm) {
  int j = i + 1;
  if (j < t->n && cdv_tok_is(s, &t->v[j], "line") && t->v[j].line == t->v[i].line) j++;
  if (j >= t->n || t->v[j].kind != CDV_T_NUM || t->v[j].line != t->v[i].line) return;
  long n = 0;
  for (size_t k = 0; k < t->v[j].len && n >= 0 && n <= INT_MAX / 20; k++)
    n = isdigit((unsigned char)s[t->v[j].off + k]) ? n * 10 + (s[t->v[j].off + k] - '0') : -1;
  if (n <= 0 || n > INT_MAX / 2) return;
  lm->delta = (int)n - (t->v[i].line + 1);
  size_t p = t->v[j].off + t->v[j].len, q;
  while (p < size && (orig[p] == ' ' || orig[p] == '\t')) p++;
  if (p >= size || orig[p] != '"') return;
  for (q = p + 1; q < size && !strchr("\"\\\n", orig[q]); q++)
    ;
  if (q < size && orig[q] == '"' && q - p - 1 < sizeof lm->file)
    snprintf(lm->file, sizeof lm->file, "%.*s", (int)(q - p - 1), orig + p + 1);
}

/* `extern ... __shared__ ... ;` starting at t[i]: rewritten (rewrite_extern_shared); -1 when out of memory. */
static int note_extern(const char *orig, const char *s, const cdv_toks *t, int i, int ns_scope, scanres *r) {
  int semi = i, sh = 0;
  while (semi < t->n && !cdv_tok_is(s, &t->v[semi], ";") && !cdv_tok_is(s, &t->v[semi], "{") &&
         !cdv_tok_is(s, &t->v[semi], "}") && semi - i < 512)
    sh |= cdv_tok_is(s, &t->v[semi], "__shared__"), semi++;
  if (sh && semi < t->n && cdv_tok_is(s, &t->v[semi], ";")) return rewrite_extern_shared(orig, t, i, semi, ns_scope, r);
  return 0;
}

/* NOTE [kernel paths]: which kernels need fibers is decided per kernel, not per source. A kernel whose code
 * can reach no barrier, warp intrinsic or cooperative group runs its block's threads as a loop on one stack
 * (CDV_CPU_RUN_BLOCK), which the host compiler can optimise as one function; the others run each thread on a
 * fiber. The source's functions are found by their bodies at namespace scope: the name before the parameter
 * list of a `{` that follows `name(...)` (qualifiers, attributes, a trailing return type and a constructor's
 * initialiser list in between are allowed). A function needs fibers when its body uses one of sync_words or
 * mentions (by name: overloads and members share it) a function or a macro that does, to a fixpoint. A kernel
 * takes the loop path only when its name is found that way and needs nothing: a sync word in a class body or
 * another brace region that is not a function, or in a file read from an include path, gives every kernel of
 * the source fibers, as does a kernel the scan cannot find (a macro-made one, say). A mistake towards the loop
 * path is not silent: a barrier reached in loop mode fails the launch ("which the cpu device did not find in
 * its source"). The path is exported per trampoline as "<trampoline>_flags" and shown as k.cpu_path. */
static const char *const not_names[] = {"if", "for", "while", "switch", "return", "sizeof", "catch", NULL};
static const char *const attr_names[] = {"__attribute__",     "noexcept",  "throw",       "decltype", "alignas",
                                         "__launch_bounds__", "__align__", "__maxnreg__", "requires", NULL};

int cdv_cpu_word_of(const char *s, const cdv_tok *k, const char *const *list) {
  for (int i = 0; list[i]; i++)
    if (cdv_tok_is(s, k, list[i])) return 1;
  return 0;
}

/* The name of the function whose body opens at the '{' t[i], or 0 when it is not a function's. */
int cdv_cpu_function_name(const char *s, const cdv_toks *t, int i, char *out, size_t n) {
  int j = i - 1;
  for (;;) {
    while (j >= 0 && !cdv_tok_is(s, &t->v[j], ")")) {
      const cdv_tok *k = &t->v[j];
      if (k->kind == CDV_T_PUNCT && !strchr("&*:<>,-", s[k->off])) return 0;
      j--;
    }
    for (int depth = 0; j >= 0; j--) {
      if (cdv_tok_is(s, &t->v[j], ")"))
        depth++;
      else if (cdv_tok_is(s, &t->v[j], "(") && --depth == 0)
        break;
    }
    if (j <= 0 || t->v[j - 1].kind != CDV_T_IDENT || cdv_cpu_word_of(s, &t->v[j - 1], not_names)) return 0;
    const cdv_tok *k = &t->v[j - 1];
    int init_list = j >= 3 && (cdv_tok_is(s, &t->v[j - 2], ",") ||
                               (cdv_tok_is(s, &t->v[j - 2], ":") && !cdv_tok_is(s, &t->v[j - 3], ":")));
    if (cdv_cpu_word_of(s, k, attr_names) || init_list) {
      j -= 2;
      continue;
    }
    if (k->len >= n) return 0;
    memcpy(out, s + k->off, k->len);
    out[k->len] = 0;
    return 1;
  }
}

/* The index of the token after the preprocessor line that starts at t[i] (continuation lines included). */
int cdv_cpu_pp_line_end(const char *s, const cdv_toks *t, int i) {
  int j = i + 1;
  for (; j < t->n; j++) {
    if (!t->v[j].bol) continue;
    const cdv_tok *p = &t->v[j - 1];
    if (!memchr(s + p->off + p->len, '\\', t->v[j].off - (p->off + p->len))) break;
  }
  return j;
}

/* A function (or a macro, or a brace region with name "") and the identifiers of its body. */
static int add_kfunc(scanres *r, const char *name, const char *s, const cdv_toks *t, int from, int to) {
  kfunc *v = realloc(r->fn, (size_t)(r->nfn + 1) * sizeof *v);
  if (!v) return -1;
  r->fn = v;
  kfunc *f = &r->fn[r->nfn];
  memset(f, 0, sizeof *f);
  buf b = {0};
  buf_adds(&b, " ");
  for (int k = from; k < to; k++) {
    if (t->v[k].kind != CDV_T_IDENT) continue;
    f->sync |= cdv_scan_barrier_word(s, &t->v[k]);
    buf_add(&b, s + t->v[k].off, t->v[k].len);
    buf_adds(&b, " ");
  }
  f->name = strdup(name);
  f->idents = b.p;
  if (b.oom || !f->name || !f->idents) {
    free(f->name), free(b.p);
    return -1;
  }
  r->nfn++;
  return 0;
}

/* (see NOTE [kernel paths]) the functions, macros and other brace regions at namespace scope of one file. */
/* Is the #define at [i, end) (t[i] the '#') `#define NAME() __syncthreads()` or `#define NAME __syncthreads()`? */
int cdv_cpu_barrier_macro(const char *s, const cdv_toks *t, int i, int end) {
  int b = i + 3;
  if (end - i == 8 && cdv_tok_is(s, &t->v[b], "(") && t->v[b].off == t->v[i + 2].off + t->v[i + 2].len &&
      cdv_tok_is(s, &t->v[b + 1], ")"))
    b += 2;
  return end - b == 3 && cdv_tok_is(s, &t->v[b], "__syncthreads") && cdv_tok_is(s, &t->v[b + 1], "(") &&
         cdv_tok_is(s, &t->v[b + 2], ")");
}

static int note_functions(const char *s, const cdv_toks *t, scanres *r) {
  int depth = 0; /* braces of namespaces and linkage blocks */
  for (int i = 0; i < t->n; i++) {
    const cdv_tok *k = &t->v[i];
    if (k->bol && cdv_tok_is(s, k, "#")) {
      int end = cdv_cpu_pp_line_end(s, t, i);
      if (i + 2 < end && cdv_tok_is(s, &t->v[i + 1], "define") && t->v[i + 2].kind == CDV_T_IDENT) {
        char name[128];
        size_t len = t->v[i + 2].len < sizeof name - 1 ? t->v[i + 2].len : sizeof name - 1;
        memcpy(name, s + t->v[i + 2].off, len);
        name[len] = 0;
        if (add_kfunc(r, name, s, t, i + 3, end)) return -1;
        r->fn[r->nfn - 1].alias = cdv_cpu_barrier_macro(s, t, i, end);
      }
      i = end - 1;
    } else if (cdv_tok_is(s, k, "{") && cdv_cpu_ns_brace(s, t, i)) {
      depth++;
    } else if (cdv_tok_is(s, k, "}")) {
      depth -= depth > 0;
    } else if (cdv_tok_is(s, k, "{")) {
      char name[128];
      if (!cdv_cpu_function_name(s, t, i, name, sizeof name)) name[0] = 0;
      int j = i + 1;
      for (int d = 1; j < t->n && d > 0; j++) {
        if (t->v[j].bol && cdv_tok_is(s, &t->v[j], "#")) {
          j = cdv_cpu_pp_line_end(s, t, j) - 1;
          continue;
        }
        d += cdv_tok_is(s, &t->v[j], "{") - cdv_tok_is(s, &t->v[j], "}");
      }
      if (add_kfunc(r, name, s, t, i + 1, j)) return -1;
      i = j - 1;
    }
  }
  return 0;
}

/* Scan one file. full: note refused constructs and rewrite extern __shared__ (the user's own source and
 * headers); otherwise only look for barriers and includes (files found on include paths). */
int cdv_cpu_scan_text(const char *fname, const char *orig, size_t n, int full, scanres *r, cdv_err *e) {
  char *s = cdv_scan_strip(orig, n);
  cdv_toks t = {0};
  if (!s || cdv_scan_tokenize(s, n, &t)) {
    free(s), free(t.v);
    return oom(e);
  }
  int rc = 0, code_depth = 0, nsdepth = 0;
  unsigned char stack[256]; /* brace kinds: 1 = namespace-like */
  linemap lm = {0, ""};
  snprintf(lm.file, sizeof lm.file, "%s", fname);
  for (int i = 0; i < t.n && rc == 0; i++) {
    const cdv_tok *k = &t.v[i];
    if (k->bol && cdv_tok_is(s, k, "#")) {
      cdv_scan_include(orig, n, &t, i, &r->includes);
      note_line_directive(orig, n, s, &t, i, &lm);
    } else if (cdv_tok_is(s, k, "{")) {
      int ns = cdv_cpu_ns_brace(s, &t, i);
      if (nsdepth < 256) stack[nsdepth] = (unsigned char)ns;
      nsdepth++;
      code_depth += !ns;
    } else if (cdv_tok_is(s, k, "}")) {
      if (nsdepth > 0 && --nsdepth < 256) code_depth -= !stack[nsdepth];
    } else if (k->kind == CDV_T_IDENT && cdv_scan_barrier_word(s, k)) {
      r->fibers = 1;
    }
    if (full) {
      note_refusal(lm.file, k->line + lm.delta, s, &t, i, r);
      if (cdv_tok_is(s, k, "extern") && note_extern(orig, s, &t, i, code_depth == 0, r)) rc = oom(e);
    }
  }
  if (rc == 0 && full && note_functions(s, &t, r)) rc = oom(e);
  free(s);
  free(t.v);
  if (rc == 0 && r->includes.oom) rc = oom(e);
  return rc;
}
