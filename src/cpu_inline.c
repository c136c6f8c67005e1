/*
 * cpu_inline.c: device functions that hold barriers, written into the kernel that calls them, so that fission
 * can take the kernel (NOTE [inlined helpers]; cpu_compile.h names the stages).
 */
#define _GNU_SOURCE
#include "cpu_compile.h"

/* NOTE [inlined helpers]: a kernel that calls a device function holding a barrier or a warp operation
 * (`__device__ void sync_step(float *s, int t) { ...; __syncthreads(); }`) ran on the fibers: fission cuts a
 * kernel's own body at its barriers, and a call hides them. Before fission reads the kernel, each such call
 * that is a statement of its own (`sync_step(s, t);`) is replaced by the helper's body, as a compiler inlines:
 * each parameter becomes a local initialised by its argument (`float *cdv_i1_s = (s);`, evaluated once, at
 * the call, as C++ does), and the names the body declares and its parameters are renamed for the call
 * (cdv_i<call>_<name>) so that they meet none of the kernel's. The body goes in without braces of its own
 * (fission takes barriers at the levels of the kernel's body, not in a nested block), and in braces where the
 * call is the statement of an if, a loop or an else. The replacement stays on the call's line, so the
 * compilers' lines do not move. Only simple helpers are taken: one definition in the source, returning void,
 * no template, parameters that are values or pointers (a reference, an array or a default keeps the fibers),
 * a body without return, goto, labels, preprocessor lines, static or __shared__ locals (one per call would
 * be one per call site) and calls of other such helpers, and no name the body reads from outside that the
 * kernel declares too (the kernel's name would hide it). Otherwise the kernel keeps its fibers, and
 * k.cpu_reason names the helper and why. Macros holding barriers (other than `#define SYNC() __syncthreads()`,
 * NOTE [barrier if]) are not expanded here. */

typedef struct ictx {
  const char *s, *o; /* stripped and original text */
  const cdv_toks *t;
  char *why;
  size_t nwhy;
} ictx;

static int itok(const ictx *c, int i, const char *w) {
  return i >= 0 && i < c->t->n && cdv_tok_is(c->s, &c->t->v[i], w);
}

static int same_ident(const ictx *c, int i, int j) {
  const cdv_tok *a = &c->t->v[i], *b = &c->t->v[j];
  return a->kind == CDV_T_IDENT && b->kind == CDV_T_IDENT && a->len == b->len &&
         !memcmp(c->s + a->off, c->s + b->off, a->len);
}

/* A name in " a b c "? */
static int in_list(const ictx *c, int i, const char *list) {
  const cdv_tok *k = &c->t->v[i];
  if (k->kind != CDV_T_IDENT || !list) return 0;
  for (const char *p = strstr(list, " "); p && p[1]; p = strchr(p + 1, ' '))
    if (!strncmp(p + 1, c->s + k->off, k->len) && p[1 + k->len] == ' ') return 1;
  return 0;
}

static int member(const ictx *c, int i) { /* x.name, p->name, ns::name */
  return itok(c, i - 1, ".") || (itok(c, i - 1, ">") && itok(c, i - 2, "-")) ||
         (itok(c, i - 1, ":") && itok(c, i - 2, ":"));
}

static int refuse(ictx *c, const char *helper_at, int call, const char *what) {
  snprintf(c->why, c->nwhy, "calls '%s', which reaches a barrier or warp operation, %s (line %d)", helper_at, what,
           c->t->v[call].line);
  return 2;
}

/* Does the identifier at i look declared there: after a type word, or a * after one? */
static const char *const not_type[] = {"return", "case", "else", "do",    "sizeof", "new",    "delete",
                                       "throw",  "goto", "if",   "while", "for",    "switch", NULL};
static int declared(const ictx *c, int i) {
  const cdv_tok *v = c->t->v;
  if (v[i].kind != CDV_T_IDENT || member(c, i) || i < 1) return 0;
  if (!(itok(c, i + 1, "=") || itok(c, i + 1, ";") || itok(c, i + 1, ",") || itok(c, i + 1, "[") ||
        itok(c, i + 1, ")") || itok(c, i + 1, ":") || itok(c, i + 1, "(") || itok(c, i + 1, "{")))
    return 0;
  int j = i - 1;
  while (j > 0 && (itok(c, j, "*") || itok(c, j, "&"))) j--;
  return v[j].kind == CDV_T_IDENT && !cdv_cpu_word_of(c->s, &v[j], not_type);
}

/* The text between tokens i - 1 and i on one line: comments dropped, literals kept (the stripped text blanks
 * both; a comment begins with '/'). */
static void gap(const ictx *c, buf *o, int i) {
  size_t p = c->t->v[i - 1].off + c->t->v[i - 1].len, q = c->t->v[i].off;
  while (p < q) {
    if (c->s[p] == c->o[p]) {
      buf_adds(o, c->o[p] == '\n' || c->o[p] == '\r' ? " " : (char[2]){c->o[p], 0});
      p++;
      continue;
    }
    size_t r = p + 1;
    if (c->o[p] == '/' && c->o[p + 1] == '/') { /* a comment, blanked (its spaces are alike in both texts) */
      while (r < q && c->o[r] != '\n') r++;
    } else if (c->o[p] == '/' && c->o[p + 1] == '*') {
      while (r + 1 < q && !(c->o[r] == '*' && c->o[r + 1] == '/')) r++;
      r += 2;
    } else { /* a literal: kept */
      while (r < q && c->s[r] != c->o[r]) r++;
      buf_add(o, c->o + p, r - p);
      p = r;
      continue;
    }
    buf_adds(o, " ");
    p = r;
  }
}

/* Tokens [a, b) on one line, the names in ren (token indices of their declarations, n of them) renamed
 * cdv_i<call>_<name>. */
static void put(const ictx *c, buf *o, int a, int b, const int *ren, int n, int call) {
  for (int i = a; i < b; i++) {
    if (i > a) gap(c, o, i);
    int r = 0;
    for (int k = 0; k < n && !r && !member(c, i); k++) r = same_ident(c, i, ren[k]);
    if (r) buf_addf(o, "cdv_i%d_", call);
    buf_add(o, c->o + c->t->v[i].off, c->t->v[i].len);
  }
}

typedef struct helper {
  int name, lp, rp, lb, rb; /* tokens: its name, parameter list, body */
  int par[16], npar; /* each parameter's first token; par[npar]: rp */
} helper;

static const char *const prefix_ok[] = {
    "__device__", "__forceinline__", "__noinline__", "inline", "__inline__", "static",
    "void",       "__host__",        "extern",       NULL};

/* The definition of the helper named at token h: the one '{' at namespace scope after its name; 0 or 2 (why). */
static int find_helper(ictx *c, int h, int call, helper *x) {
  const cdv_toks *t = c->t;
  char want[128], fn[128];
  snprintf(want, sizeof want, "%.*s", (int)(t->v[h].len < 127 ? t->v[h].len : 127), c->s + t->v[h].off);
  int found = 0;
  for (int i = 0; i < t->n; i++) {
    if (t->v[i].bol && itok(c, i, "#")) {
      i = cdv_cpu_pp_line_end(c->s, t, i) - 1;
    } else if (itok(c, i, "{") && !cdv_cpu_ns_brace(c->s, t, i)) {
      if (cdv_cpu_function_name(c->s, t, i, fn, sizeof fn) && !strcmp(fn, want)) found++, x->lb = i;
      int d = 1, j = i + 1;
      for (; j < t->n && d > 0; j++) d += itok(c, j, "{") - itok(c, j, "}");
      i = j - 1;
    }
  }
  if (found != 1) return refuse(c, want, call, "not one function defined in the source");
  int d = 1, j = x->lb + 1; /* its closing brace */
  for (; j < t->n && d > 0; j++) d += itok(c, j, "{") - itok(c, j, "}");
  x->rb = j - 1, x->rp = x->lb - 1;
  if (!itok(c, x->rp, ")")) return refuse(c, want, call, "with words between its parameters and its body");
  x->lp = x->rp;
  for (int dd = 0; x->lp >= 0; x->lp--) {
    dd += itok(c, x->lp, ")") - itok(c, x->lp, "(");
    if (dd == 0) break;
  }
  x->name = x->lp - 1;
  int v = 0, k = x->name - 1;
  for (; k >= 0 && t->v[k].kind == CDV_T_IDENT; k--) {
    if (!cdv_cpu_word_of(c->s, &t->v[k], prefix_ok)) return refuse(c, want, call, "not a void __device__ function");
    v |= itok(c, k, "void");
  }
  if (!v || itok(c, k, ">") || itok(c, k, ":")) return refuse(c, want, call, "not a void __device__ function");
  return 0;
}

/* Its parameters: values or pointers (identifiers and stars, the name last); 0 or 2 (why). */
static int helper_params(ictx *c, helper *x, int call, const char *nm) {
  x->npar = 0;
  int a = x->lp + 1;
  if (a == x->rp || (a + 1 == x->rp && itok(c, a, "void"))) {
    x->par[0] = x->rp;
    return 0;
  }
  for (int i = a; i <= x->rp; i++) {
    if (i < x->rp && !itok(c, i, ",")) {
      if (c->t->v[i].kind != CDV_T_IDENT && !itok(c, i, "*"))
        return refuse(c, nm, call, "a parameter that is not a value or a pointer");
      continue;
    }
    if (x->npar == 15 || i - a < 2 || c->t->v[i - 1].kind != CDV_T_IDENT)
      return refuse(c, nm, call, "a parameter that is not a value or a pointer");
    x->par[x->npar++] = a;
    a = i + 1;
  }
  x->par[x->npar] = x->rp + 1;
  return 0;
}

static const char *const body_no[] = {"return", "goto", "static",  "__shared__", "thread_local",
                                      "extern", "asm",  "__asm__", "this",       NULL};

/* Its body: nothing inlining would change (NOTE [inlined helpers]); ren: the names to rename. 0 or 2 (why). */
static int helper_body(ictx *c, const helper *x, int call, const char *nm, const char *sync, int *ren, int *nren) {
  for (int k = 0; k < x->npar; k++) ren[(*nren)++] = x->par[k + 1] - 2; /* the parameter's name */
  for (int i = x->lb + 1; i < x->rb; i++) {
    const cdv_tok *k = &c->t->v[i];
    if (k->bol && itok(c, i, "#")) return refuse(c, nm, call, "with a preprocessor line");
    if (k->kind != CDV_T_IDENT) continue;
    if (cdv_cpu_word_of(c->s, k, body_no)) {
      char w[96];
      snprintf(w, sizeof w, "with '%.*s'", (int)(k->len < 60 ? k->len : 60), c->s + k->off);
      return refuse(c, nm, call, w);
    }
    if (in_list(c, i, sync) && !member(c, i)) return refuse(c, nm, call, "which calls another such function");
    if (itok(c, i + 1, ":") && !itok(c, i + 2, ":") &&
        (itok(c, i - 1, ";") || itok(c, i - 1, "{") || itok(c, i - 1, "}")) && !itok(c, i, "default"))
      return refuse(c, nm, call, "with a label");
    if (declared(c, i)) {
      if (*nren == 256) return refuse(c, nm, call, "with too many locals");
      ren[(*nren)++] = i;
    }
  }
  return 0;
}

/* Does the kernel [klp, krb) declare a name the helper's body reads from outside (a global it would hide)? */
static int hidden(ictx *c, const helper *x, const int *ren, int nren, int klp, int krb, int call, const char *nm) {
  for (int i = x->lb + 1; i < x->rb; i++) {
    if (c->t->v[i].kind != CDV_T_IDENT || member(c, i)) continue;
    int own = 0;
    for (int k = 0; k < nren && !own; k++) own = same_ident(c, i, ren[k]);
    for (int j = klp + 1; !own && j < krb; j++)
      if (same_ident(c, i, j) && declared(c, j)) {
        char w[160];
        snprintf(w, sizeof w, "reading '%.*s', which the kernel declares too",
                 (int)(c->t->v[i].len < 60 ? c->t->v[i].len : 60), c->s + c->t->v[i].off);
        return refuse(c, nm, call, w);
      }
  }
  return 0;
}

/* The call statement `h(args);` at [h, e) written as the helper's body into o. 0, or 2 (why). */
static int inline_call(ictx *c, buf *o, int h, int e, int klp, int krb, int ncall, const char *sync) {
  char nm[128];
  snprintf(nm, sizeof nm, "%.*s", (int)(c->t->v[h].len < 127 ? c->t->v[h].len : 127), c->s + c->t->v[h].off);
  helper x = {0};
  int ren[256], nren = 0, rc;
  if ((rc = find_helper(c, h, h, &x)) || (rc = helper_params(c, &x, h, nm)) ||
      (rc = helper_body(c, &x, h, nm, sync, ren, &nren)) || (rc = hidden(c, &x, ren, nren, klp, krb, h, nm)))
    return rc;
  int arg[17], nargs = 0; /* the call's arguments: arg[k] the first token, arg[nargs] the ')' + 1 */
  arg[0] = h + 2;
  for (int i = h + 2, d = 0; i < e - 2; i++) {
    d += itok(c, i, "(") + itok(c, i, "[") + itok(c, i, "{") - itok(c, i, ")") - itok(c, i, "]") - itok(c, i, "}");
    if (d == 0 && itok(c, i, ",")) {
      if (nargs == 15) return refuse(c, nm, h, "with too many arguments");
      arg[++nargs] = i + 1;
    }
  }
  nargs += e - 2 > h + 2;
  arg[nargs] = e - 1;
  if (nargs != x.npar) return refuse(c, nm, h, "with arguments that are not its parameters");
  /* a statement of a sequence takes no braces; the statement of an if, a loop or an else does */
  int braces = !(itok(c, h - 1, ";") || itok(c, h - 1, "{") || itok(c, h - 1, "}"));
  buf_adds(o, braces ? "{ " : "");
  for (int k = 0; k < x.npar; k++) {
    int nmtok = x.par[k + 1] - 2;
    put(c, o, x.par[k], nmtok, ren, 0, ncall);
    buf_adds(o, " ");
    put(c, o, nmtok, nmtok + 1, ren, nren, ncall);
    buf_adds(o, " = (");
    put(c, o, arg[k], arg[k + 1] - 1, ren, 0, ncall);
    buf_adds(o, "); ");
  }
  if (x.lb + 1 < x.rb) put(c, o, x.lb + 1, x.rb, ren, nren, ncall);
  buf_adds(o, braces ? " }" : "");
  return 0;
}

int cdv_cpu_inline(const char *src, size_t n, const char *kernel, const char *sync, char **out, size_t *nout, char *why,
                   size_t nwhy) {
  *out = NULL, *nout = 0;
  if (!sync || !sync[0]) return 0;
  char *s = cdv_scan_strip(src, n);
  cdv_toks t = {0};
  if (!s || cdv_scan_tokenize(s, n, &t)) {
    free(s), free(t.v);
    return -1;
  }
  ictx c = {s, src, &t, why, nwhy};
  int klb = -1, found = 0, rc = 0, ncall = 0;
  char fn[128];
  for (int i = 0; i < t.n; i++) { /* the kernel's body, at namespace scope */
    if (t.v[i].bol && itok(&c, i, "#")) {
      i = cdv_cpu_pp_line_end(s, &t, i) - 1;
    } else if (itok(&c, i, "{") && !cdv_cpu_ns_brace(s, &t, i)) {
      if (cdv_cpu_function_name(s, &t, i, fn, sizeof fn) && !strcmp(fn, kernel)) found++, klb = i;
      int d = 1, j = i + 1;
      for (; j < t.n && d > 0; j++) d += itok(&c, j, "{") - itok(&c, j, "}");
      i = j - 1;
    }
  }
  buf o = {0};
  if (found != 1 || !itok(&c, klb - 1, ")")) goto done; /* fission says why */
  int krb = klb + 1, klp = klb - 1;
  for (int d = 1; krb < t.n && d > 0; krb++) d += itok(&c, krb, "{") - itok(&c, krb, "}");
  krb--;
  for (int d = 0; klp >= 0; klp--) {
    d += itok(&c, klp, ")") - itok(&c, klp, "(");
    if (d == 0) break;
  }
  size_t done_to = 0;
  for (int i = klb + 1; i < krb && rc == 0; i++) {
    if (!in_list(&c, i, sync) || member(&c, i)) continue;
    int e = itok(&c, i + 1, "(") ? cdv_cpu_skip_parens(s, &t, i + 1) + 1 : -1;
    char nm[128];
    snprintf(nm, sizeof nm, "%.*s", (int)(t.v[i].len < 127 ? t.v[i].len : 127), s + t.v[i].off);
    if (e < 0 || !itok(&c, e - 1, ";") || itok(&c, i - 1, "=") ||
        !(itok(&c, i - 1, ";") || itok(&c, i - 1, "{") || itok(&c, i - 1, "}") || itok(&c, i - 1, ")") ||
          itok(&c, i - 1, "else") || itok(&c, i - 1, "do"))) {
      rc = refuse(&c, nm, i, "inside an expression");
      break;
    }
    buf_add(&o, src + done_to, t.v[i].off - done_to);
    if ((rc = inline_call(&c, &o, i, e, klp, krb, ++ncall, sync))) break;
    done_to = t.v[e - 1].off + 1;
    for (size_t p = t.v[i].off; p < done_to; p++) /* the call's newlines, so that later lines stay */
      if (src[p] == '\n') buf_adds(&o, "\n");
    i = e - 1;
  }
  if (rc == 0 && ncall) {
    buf_add(&o, src + done_to, n - done_to);
    if (o.oom)
      rc = -1;
    else
      *out = o.p, *nout = o.n, o.p = NULL, rc = 1;
  }
done:
  free(o.p);
  free(s);
  free(t.v);
  return rc;
}
