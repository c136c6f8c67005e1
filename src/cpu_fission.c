/*
 * cpu_fission.c: writing a kernel's fast function for the cpu device, simd or fission (NOTE [fast paths]).
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <limits.h>
#include "cpu_compile.h"

/* ---------------------------------------------------------------- fast paths: simd and fission */
/* NOTE [fast paths]: for a kernel whose code the scan can read, cpu_fission.c writes a second function from
 * its body that runs every thread of a block itself, so the host compiler sees the block as loops over
 * threads with threadIdx a loop variable (no fiber, no thread header in memory):
 * - simd: a kernel without barriers (its path was loop). One loop over the block's threads around the body;
 *   blockIdx, blockDim, gridDim and threadIdx are local copies, and a second instance of the function is told
 *   (when the runtime checked it) that blockIdx.x * blockDim.x + blockDim.x fits an int, so an index computed
 *   the usual way is known not to wrap and the loop vectorises (with -fno-trapping-math: a guarded body
 *   becomes masked loads and stores).
 * - fission: a kernel whose barriers are `__syncthreads();` statements at the top level of its body or of
 *   the body of a `for`/`while`/`do` loop or an if's branch that is itself at such a level (a barrier loop;
 *   its header is run once for the block: CUDA requires a barrier loop to be uniform; NOTE [barrier if]). The body is cut at the barriers into regions,
 *   each a loop over the block's threads (loop fission, as MCUDA, CuPBoP and POCL do). A local declared in one
 *   region and used in another lives in a per-thread array (a VLA on the block's stack, `name[t]`), unless it
 *   is thread-affine (fis_remat_ok): an integer or pointer whose initialiser reads only threadIdx, blockIdx,
 *   blockDim, gridDim, integer or pointer parameters, integer literals and earlier such locals, through casts
 *   and integer arithmetic (no load, no call, no float: computed again it is the same value), and that the
 *   body never changes, aliases, passes to a call that may take a reference, or names outside a region. Such
 *   a local is declared again at the top of each region that uses it (rematerialised), so the host compiler
 *   sees `tx = threadIdx.x`, `row = blockIdx.y * 16 + ty` as affine in the thread loop and vectorises it
 *   instead of loading `tx[t]`. A thread that returned is skipped by later regions. `__shared__`, static
 *   and constexpr locals move to the top; a `__shared__` (thread_local) one is then reached through a
 *   reference made once (fis_tls_refs), not through __tls_get_addr in every thread's iteration. In
 *   fission regions the threads' x is unsigned (GCC splits a loop at `if (t < h)`) and the thread index
 *   that subscripts the per-thread arrays is 64-bit (so `c[t]` is affine in x and the region vectorises).
 * Anything the transformation does not understand leaves the kernel on its old path: a barrier elsewhere
 * (in a nested block, a switch, a device function), other sync words (__syncthreads_count, cooperative
 * groups, warp operations other than those NOTE [warp fission] takes), goto, labels, lambdas, try, preprocessor lines other than
 * #pragma, a barrier loop whose header reads threadIdx or whose counter a region writes,
 * break/continue in a region of a barrier loop, a cross-region local that is a reference, auto, an array with
 * an initialiser or declared with a constructor call, a name declared twice. The generated function is
 * checked by the host compiler: if the translation unit fails to compile, it is compiled again without the
 * fast paths (so a kernel that compiled before still does). The runtime takes the fission path only when the
 * per-thread arrays of a block fit (<trampoline>_fis_row bytes a thread, CDV_CPU_FIS_STACK in all), else the
 * fibers. Paths: k.cpu_path "simd" / "fission". */

#define FIS_MAX_ITEMS 512
#define FIS_MAX_DECL 128
#define FIS_MAX_GUARDS 16
#define FIS_MAX_FLAGS 64

typedef struct fitem { /* one statement of a sequence */
  int kind; /* 0 plain, 1 barrier, 2 barrier loop, 3 warp if (or its else), 4 warp operation */
  int a, b; /* tokens [a, b) */
  int hdr_a, hdr_b; /* barrier loop: the header's tokens between the parentheses; body [a, b) inside braces;
                     * warp if: its condition (hdr_a -1 for an else) */
  int kw; /* barrier loop: the token of for/while; warp if: of if/else */
  int seg; /* plain: its region; warp if: the condition's; warp operation: the region before it */
  int seg2; /* warp operation: the region after it */
  int flag, neg; /* warp if: its per-thread flag, and 1 for the else */
  int call, eq, op; /* warp operation: the call's token, the assignment's first token, which (fis_warp_word) */
  int arg[5], nargs; /* warp operation: the first token of each argument; arg[nargs] the closing parenthesis */
  int dow; /* barrier loop: a do loop (its header is the condition after while) */
  int ce, decl; /* warp operation: the token after the call; 1 when the statement declares what it sets */
} fitem;

typedef struct fdecl {
  int name; /* token of the name */
  int stmt_a, stmt_b; /* its declaration statement */
  int seg; /* the region it is declared in */
  int priv, hoist; /* a per-thread array; moved to the top as it is */
  int uniform; /* a barrier loop's counter */
  int remat; /* private but thread-affine: declared again in each region that uses it (NOTE [fast paths]) */
  int bsc; /* private but one value for the whole block: one scalar (NOTE [block scalars]) */
  int loose; /* bsc whose statements sit among others, read in loops' headers only (NOTE [loose counters]) */
  int init_a, init_b; /* remat: its initialiser's tokens */
} fdecl;

typedef struct fgen {
  const char *s, *o; /* stripped and original text */
  const cdv_toks *t;
  fitem it[FIS_MAX_ITEMS];
  int nit;
  fdecl d[FIS_MAX_DECL];
  int nd;
  int nseg, nbar, ret, fail;
  int *seg_of; /* per token: its region, -1 outside regions, -2 a barrier loop's header */
  int nflag, nwarp; /* flags of warp ifs, warp operations (see NOTE [warp fission]) */
  int guard[FIS_MAX_GUARDS], gneg[FIS_MAX_GUARDS], ng; /* the warp ifs around the regions being written */
  int ifdepth; /* warp ifs open while reading the body (at most FIS_MAX_GUARDS deep) */
  const char *fname;
  int alias[8], nalias; /* names of macros that are __syncthreads() (cdv_cpu_barrier_macro) */
  int lb, rb; /* the kernel body's braces */
  int lp, rp; /* the parameter list's parentheses */
  unsigned char seg_bsc[FIS_MAX_ITEMS * 2 + 1]; /* a region of block-scalar statements only: run once */
  unsigned char loose_done[FIS_MAX_ITEMS * 2 + 1]; /* the region's loose statements are written (NOTE [loose
                                                    * counters]) */
  int chunked; /* the region open loops over chunks of 32 threads (NOTE [warp skip]) */
  size_t dup_at; /* where the loop over a chunk's threads begins in the output, to be written twice (NOTE [full
                  * warps]); 0 when not */
  char why[160]; /* what kept the kernel off its fast path, with its line (k.cpu_reason), "" if nothing yet */
  const char *wsplit, *wguard; /* a chain written out (NOTE [warp chains]): text between the next warp operation's
                                * two regions, and the flag whose truth skips its statement */
} fgen;

static int ftok(const fgen *g, int i, const char *w) {
  return i >= 0 && i < g->t->n && cdv_tok_is(g->s, &g->t->v[i], w);
}

/* The index after the statement that starts at i (end: the end of its sequence), or -1. */
/* k.cpu_reason: the first construct that keeps the kernel off its fast path, at token i; returns -1. */
static int fis_no(fgen *g, int i, const char *what) {
  if (!g->why[0] && i >= 0 && i < g->t->n)
    snprintf(g->why, sizeof g->why, "%s (line %d)", what, g->t->v[i].line);
  else if (!g->why[0])
    snprintf(g->why, sizeof g->why, "%s", what);
  return -1;
}

static int stmt_end(fgen *g, int i, int end) {
  if (i >= end) return -1;
  if (ftok(g, i, "{")) {
    for (int d = 0; i < end; i++) {
      d += ftok(g, i, "{") - ftok(g, i, "}");
      if (d == 0) return i + 1;
    }
    return -1;
  }
  if (ftok(g, i, "if") || ftok(g, i, "for") || ftok(g, i, "while") || ftok(g, i, "switch")) {
    int k = i + 1;
    if (ftok(g, k, "constexpr")) k++;
    if (!ftok(g, k, "(")) return -1;
    k = cdv_cpu_skip_parens(g->s, g->t, k);
    k = stmt_end(g, k, end);
    if (k > 0 && ftok(g, i, "if") && ftok(g, k, "else")) k = stmt_end(g, k + 1, end);
    return k;
  }
  if (ftok(g, i, "do")) {
    int k = stmt_end(g, i + 1, end);
    if (k < 0 || !ftok(g, k, "while") || !ftok(g, k + 1, "(")) return -1;
    k = cdv_cpu_skip_parens(g->s, g->t, k + 1);
    return ftok(g, k, ";") ? k + 1 : -1;
  }
  for (int d = 0; i < end; i++) {
    if (ftok(g, i, "(") || ftok(g, i, "[") || ftok(g, i, "{"))
      d++;
    else if (ftok(g, i, ")") || ftok(g, i, "]") || ftok(g, i, "}"))
      d--;
    else if (d == 0 && ftok(g, i, ";"))
      return i + 1;
    if (d < 0) return -1;
  }
  return -1;
}

/* NOTE [warp fission]: warp shuffles and votes in fission functions. A statement `lhs = op(args);` or
 * `lhs += op(args);` (any compound assignment) whose right side is one of these calls (or a cast of it to a
 * type of identifiers and *: `(unsigned)__ballot_sync(...)`), and `__syncwarp();`,
 * are split points like `__syncthreads();`: the region before stores every thread's value (the shuffled
 * value, or the vote's predicate) into a per-thread exchange array, and the region after reads its source
 * lane's there with the group rule of the fiber path (cdv_xshfl, cdv_xvote in the prelude: a lane that did not
 * reach the operation, or is not in the mask, gives the reader its own value). Such statements may also sit in
 * the braces of an `if` (and its `else`) at a level fission takes: a warp if, whose condition each thread
 * evaluates into a per-thread flag, and whose regions skip the threads whose flags say otherwise (CUDA asks a
 * shuffle's lanes to agree, not the block's threads, so the condition need not be uniform; an if that
 * holds a __syncthreads stays on the fibers). A loop whose body holds warp operations but no __syncthreads
 * runs its header once for the block like a barrier loop, so that header must not read a per-thread value.
 * The fiber path still finds warp operations that not all lanes of the mask reach (a deadlock); this path
 * does not, as it does not find a misplaced __syncthreads either. */
static const char *const fis_warp_words[] = {"__shfl_sync",   "__shfl_up_sync", "__shfl_down_sync", "__shfl_xor_sync",
                                             "__ballot_sync", "__any_sync",     "__all_sync",       NULL};

/* 1 + the index of the warp operation named at token i in fis_warp_words, or 0. */
static int fis_warp_word(const fgen *g, int i) {
  if (i < 0 || i >= g->t->n || g->t->v[i].kind != CDV_T_IDENT) return 0;
  for (int w = 0; fis_warp_words[w]; w++)
    if (ftok(g, i, fis_warp_words[w])) return w + 1;
  return 0;
}

static int same_tok(const fgen *g, int i, int j);

/* __syncthreads, or a macro that is it (`#define SYNC() __syncthreads()`) */
static int fis_sync_word(const fgen *g, int i) {
  if (ftok(g, i, "__syncthreads")) return 1;
  for (int k = 0; k < g->nalias; k++)
    if (same_tok(g, i, g->alias[k])) return 1;
  return 0;
}

static int has_barrier(const fgen *g, int a, int b) {
  for (int i = a; i < b; i++)
    if (fis_sync_word(g, i) || ftok(g, i, "__syncwarp") || fis_warp_word(g, i)) return 1;
  return 0;
}

static int fis_assigns(const fgen *g, int i);

static int has_sync(const fgen *g, int a, int b) {
  for (int i = a; i < b; i++)
    if (fis_sync_word(g, i)) return 1;
  return 0;
}

/* `__syncwarp();` or `__syncwarp(mask);` at [a, e): a split point (NOTE [warp fission]) */
static int fis_syncwarp(fgen *g, int a, int e) {
  return ftok(g, a, "__syncwarp") && ftok(g, a + 1, "(") && cdv_cpu_skip_parens(g->s, g->t, a + 1) == e - 1 &&
         ftok(g, e - 1, ";");
}

static const char *const decl_storage[] = {"static", "__shared__", "thread_local", "constexpr", "extern", NULL};

/* The token of the assignment of the statement [a, c) before a warp operation at c: its first '=' at the top
 * level that assigns; -1 when none. */
static int fis_warp_eq(fgen *g, int a, int c) {
  for (int i = a, d = 0; i < c; i++) {
    d += ftok(g, i, "(") + ftok(g, i, "[") + ftok(g, i, "{") - ftok(g, i, ")") - ftok(g, i, "]") - ftok(g, i, "}");
    if (d == 0 && ftok(g, i, "=") && fis_assigns(g, i)) return i;
  }
  return -1;
}

/* May the warp operation [c, ce) of the statement [eq + 1, e) (eq its assignment) be taken out of it? Not when
 * an operator around it may skip it (?:, &&, ||) or the statement assigns twice or holds a top-level comma:
 * the exchange runs for every thread before the rest of the statement (NOTE [warp fission]). */
static int fis_warp_around(fgen *g, int eq, int c, int ce, int e) {
  const cdv_tok *v = g->t->v;
  for (int i = eq + 1, d = 0; i < e - 1; i++) {
    if (i == c) i = ce;
    if (i >= e - 1) break;
    d += ftok(g, i, "(") + ftok(g, i, "[") - ftok(g, i, ")") - ftok(g, i, "]");
    int glued = v[i + 1].off == v[i].off + 1;
    if (ftok(g, i, "?") || (ftok(g, i, "=") && fis_assigns(g, i)) || ftok(g, i, "{") || (d == 0 && ftok(g, i, ",")) ||
        (glued && ((ftok(g, i, "&") && ftok(g, i + 1, "&")) || (ftok(g, i, "|") && ftok(g, i + 1, "|")))))
      return 0;
  }
  return 1;
}

/* Is [a, eq) the type and name of a declaration a warp operation may initialise: identifiers and stars, the
 * name last, no reference and no storage class (issue 29: `float v = __shfl_down_sync(m, x, 1) + y;`)? 1 when
 * it is, 0 when it declares nothing, -1 when it declares what fission cannot take. */
static int fis_warp_decl(fgen *g, int a, int eq) {
  int idents = 0, adjacent = 0;
  for (int i = a; i < eq; i++) {
    if (g->t->v[i].kind == CDV_T_IDENT) {
      idents++;
      adjacent |= i + 1 < eq && g->t->v[i + 1].kind == CDV_T_IDENT;
      if (cdv_cpu_word_of(g->s, &g->t->v[i], decl_storage)) return -1;
    }
  }
  if (!adjacent && !(idents >= 2 && ftok(g, eq - 2, "*"))) return 0;
  for (int i = a; i < eq; i++)
    if (g->t->v[i].kind != CDV_T_IDENT && !ftok(g, i, "*")) return -1;
  return g->t->v[eq - 1].kind == CDV_T_IDENT ? 1 : -1;
}

/* A warp operation statement at [a, e) (NOTE [warp fission]) as an item; -1 when it is not one. */
static int fis_warp_op(fgen *g, int a, int e) {
  int c = -1;
  for (int i = a; i < e; i++)
    if (fis_warp_word(g, i) || ftok(g, i, "__syncthreads") || ftok(g, i, "__syncwarp")) {
      if (c >= 0 || !fis_warp_word(g, i)) return -1;
      c = i;
    }
  if (c < 2 || !ftok(g, c + 1, "(") || !ftok(g, e - 1, ";")) return -1;
  /* `lhs = op(...)`, `lhs += (type)op(...) * k`, `T v = op(...) + y;` (issue 29) */
  int ce = cdv_cpu_skip_parens(g->s, g->t, c + 1), eq = fis_warp_eq(g, a, c);
  if (ce > e - 1 || eq < a || !fis_warp_around(g, eq, c, ce, e)) return -1;
  int decl = fis_warp_decl(g, a, eq);
  if (decl < 0) return -1;
  const cdv_tok *v = g->t->v;
  while (!decl && eq > a && v[eq - 1].kind == CDV_T_PUNCT && v[eq - 1].off + 1 == v[eq].off && !ftok(g, eq - 1, ")") &&
         !ftok(g, eq - 1, "]"))
    eq--; /* a compound assignment: +=, <<=, ... */
  if (eq == a) return -1;
  fitem x = {.kind = 4, .a = a, .b = e, .kw = a};
  x.call = c, x.eq = eq, x.op = fis_warp_word(g, c), x.ce = ce, x.decl = decl;
  x.arg[0] = c + 2;
  for (int i = c + 2, d = 0; i < ce - 2; i++) {
    d += ftok(g, i, "(") + ftok(g, i, "[") + ftok(g, i, "{") - ftok(g, i, ")") - ftok(g, i, "]") - ftok(g, i, "}");
    if (d == 0 && ftok(g, i, ",")) {
      if (++x.nargs == 4) return -1;
      x.arg[x.nargs] = i + 1;
    }
  }
  x.arg[++x.nargs] = ce - 1;
  int shfl = x.op <= 4;
  if ((shfl && x.nargs != 3 && x.nargs != 4) || (!shfl && x.nargs != 2) || g->nit == FIS_MAX_ITEMS) return -1;
  for (int k = 0; k < x.nargs; k++)
    if (x.arg[k] >= x.arg[k + 1] - (k + 1 < x.nargs)) return -1; /* an empty argument */
  g->it[g->nit++] = x;
  g->nbar++, g->nwarp++;
  return 0;
}

static int fis_seq(fgen *g, int a, int b);
static int fis_barrier_if(fgen *g, int i, int e);
static int fis_barrier_do(fgen *g, int i, int e);

/* `if (c) { ... } [else { ... }]` at [i, e) whose braces hold warp operations (NOTE [warp fission]). */
static int fis_warp_if(fgen *g, int i, int e) {
  for (int k = i; k < e; k++)
    if (ftok(g, k, "__syncthreads")) return -1;
  if (!ftok(g, i + 1, "(") || g->nflag == FIS_MAX_FLAGS) return -1;
  int rp = cdv_cpu_skip_parens(g->s, g->t, i + 1) - 1;
  if (rp <= i + 2 || !ftok(g, rp + 1, "{") ||
      (g->t->v[i + 2].kind == CDV_T_IDENT && g->t->v[i + 3].kind == CDV_T_IDENT))
    return -1; /* an empty condition, no braces, a declaration */
  int e1 = stmt_end(g, rp + 1, e), flag = g->nflag++;
  if (e1 < 0 || g->ifdepth == FIS_MAX_GUARDS) return -1; /* unbalanced; nested too deep for the guards */
  g->ifdepth++;
  for (int part = 0; part < 2; part++) {
    int lb = part ? e1 + 1 : rp + 1, end = part ? e : e1;
    if (part && e1 == e) break;
    if ((part && !(ftok(g, e1, "else") && ftok(g, lb, "{") && stmt_end(g, lb, e) == e)) || g->nit == FIS_MAX_ITEMS)
      return -1;
    int me = g->nit++;
    g->it[me] = (fitem){.kind = 3, .a = end - 1, .hdr_a = part ? -1 : i + 2, .hdr_b = rp, .kw = part ? e1 : i};
    g->it[me].flag = flag, g->it[me].neg = part;
    if (fis_seq(g, lb + 1, end - 1)) return -1;
    g->it[me].b = g->nit; /* as for a loop: the index of the item after its body's items */
  }
  g->ifdepth--;
  return 0;
}

/* Split the statements of [a, b) into items; barrier loops recursively. 0, or -1: not for fission. */
/* A barrier loop's item at [kw, e) whose body is the statement [body, e): braced or not. */
static int fis_barrier_body(fgen *g, int kw, int ha, int hb, int body, int e) {
  if (g->nit == FIS_MAX_ITEMS) return -1;
  int braced = ftok(g, body, "{"), me = g->nit++;
  if (braced && !ftok(g, e - 1, "}")) return -1;
  g->it[me] = (fitem){.kind = 2, .hdr_a = ha, .hdr_b = hb, .kw = kw};
  g->it[me].neg = !braced; /* a body of one statement, without braces (NOTE [warp fission]) */
  g->nbar++;
  if (fis_seq(g, body + braced, e - braced)) return -1;
  g->it[me].b = g->nit; /* for a loop: b is the index of the item after its body's items */
  g->it[me].a = e - 1; /* and a its closing brace */
  return 0;
}

/* NOTE [barrier if]: `if (C) S [else S2]` whose branches hold __syncthreads(). CUDA requires every thread of
 * the block to reach the same barriers, so C is the same for the whole block (as a barrier loop's header is):
 * it is read once for the block, as thread 0 sees it, like a barrier loop's header (threadIdx in C: fibers).
 * Each branch is an item like a barrier loop's body whose header runs once; `else if` chains nest. */
static int fis_barrier_if(fgen *g, int i, int e) {
  if (!ftok(g, i + 1, "(")) return -1;
  int rp = cdv_cpu_skip_parens(g->s, g->t, i + 1) - 1, e1 = stmt_end(g, rp + 1, e);
  if (rp <= i + 2 || e1 < 0 || fis_barrier_body(g, i, i + 2, rp, rp + 1, e1)) return -1;
  if (e1 == e) return 0;
  if (!ftok(g, e1, "else") || stmt_end(g, e1 + 1, e) != e) return -1;
  return fis_barrier_body(g, e1, e1, e1, e1 + 1, e); /* "else {": an empty header */
}

/* `do { ... } while (C);` holding barriers or warp operations: a barrier loop whose condition, read once for the
 * block, is C. */
static int fis_barrier_do(fgen *g, int i, int e) {
  int close = stmt_end(g, i + 1, e);
  if (close < 0 || !ftok(g, i + 1, "{") || !ftok(g, close, "while") || !ftok(g, close + 1, "(")) return -1;
  int rp = cdv_cpu_skip_parens(g->s, g->t, close + 1) - 1, me = g->nit;
  if (rp + 2 != e || rp <= close + 2 || fis_barrier_body(g, i, close + 2, rp, i + 1, close)) return -1;
  g->it[me].dow = 1;
  return 0;
}

static int fis_seq(fgen *g, int a, int b) {
  for (int i = a; i < b;) {
    if (g->t->v[i].bol && ftok(g, i, "#")) { /* a #pragma: a plain item of its own */
      int e = cdv_cpu_pp_line_end(g->s, g->t, i);
      if (!ftok(g, i + 1, "pragma") || e > b || g->nit == FIS_MAX_ITEMS) return -1;
      g->it[g->nit++] = (fitem){.kind = 0, .a = i, .b = e};
      i = e;
      continue;
    }
    int e = stmt_end(g, i, b);
    if (e < 0 || g->nit == FIS_MAX_ITEMS) return -1;
    if ((fis_sync_word(g, i) && ftok(g, i + 1, "(") && ftok(g, i + 2, ")") && ftok(g, i + 3, ";") && e == i + 4) ||
        (fis_sync_word(g, i) && !ftok(g, i, "__syncthreads") && ftok(g, i + 1, ";") && e == i + 2) ||
        fis_syncwarp(g, i, e)) {
      g->it[g->nit++] = (fitem){.kind = 1, .a = i, .b = e, .kw = i};
      g->nbar++;
    } else if (!has_barrier(g, i, e)) {
      g->it[g->nit++] = (fitem){.kind = 0, .a = i, .b = e};
    } else if ((ftok(g, i, "for") || ftok(g, i, "while")) && ftok(g, i + 1, "(")) {
      int hb = cdv_cpu_skip_parens(g->s, g->t, i + 1); /* after ')' */
      if (e != stmt_end(g, hb, b) || fis_barrier_body(g, i, i + 2, hb - 1, hb, e)) return -1;
    } else if (ftok(g, i, "if") && has_sync(g, i, e)) {
      if (fis_barrier_if(g, i, e)) return -1;
    } else if (ftok(g, i, "do")) { /* with barriers, or warp operations only (a warp loop: NOTE [warp fission]) */
      if (fis_barrier_do(g, i, e)) return -1;
    } else if (ftok(g, i, "if")) {
      if (fis_warp_if(g, i, e)) return -1;
    } else if (fis_warp_op(g, i, e)) {
      return fis_no(g, i, "a barrier in a nested block, a switch or an expression");
    }
    i = e;
  }
  return 0;
}

static const char *const decl_not_first[] = {
    "return", "break", "continue", "delete", "throw",     "goto",     "else",     "case",  "default", "do",
    "sizeof", "new",   "typedef",  "using",  "namespace", "struct",   "class",    "union", "enum",    "static_assert",
    "if",     "for",   "while",    "switch", "operator",  "template", "typename", NULL};

/* Note the declarations of the plain statement [a, b) in region seg. -1: a declaration fission cannot take. */
static int fis_decl(fgen *g, int a, int b, int seg) {
  if (g->t->v[a].kind != CDV_T_IDENT || cdv_cpu_word_of(g->s, &g->t->v[a], decl_not_first)) return 0;
  int p = a, idents = 0, storage = 0, dyn = 0;
  for (; p < b; p++) {
    const cdv_tok *k = &g->t->v[p];
    if (k->kind == CDV_T_IDENT)
      idents++, storage |= cdv_cpu_word_of(g->s, k, decl_storage);
    else if (!(ftok(g, p, "*") || ftok(g, p, "&") || ftok(g, p, ":")))
      break;
  }
  for (int i = a; i < b; i++) dyn |= ftok(g, i, "cdv_dyn_shared");
  if (idents < 2 || p >= b || g->t->v[p - 1].kind != CDV_T_IDENT ||
      !(ftok(g, p, "=") || ftok(g, p, ",") || ftok(g, p, ";") || ftok(g, p, "[") || ftok(g, p, "(") || ftok(g, p, "{")))
    return 0; /* not a declaration: an expression statement */
  /* the declarators: split at top-level commas */
  for (int i = p - 1, d = 0; i < b; i++) {
    if (ftok(g, i, "(") || ftok(g, i, "[") || ftok(g, i, "{"))
      d++;
    else if (ftok(g, i, ")") || ftok(g, i, "]") || ftok(g, i, "}"))
      d--;
    int first = i == p - 1;
    if (!first && !(d == 0 && ftok(g, i, ","))) continue;
    int n = first ? i : i + 1;
    while (n < b && (ftok(g, n, "*") || ftok(g, n, "&"))) n++;
    if (n >= b || g->t->v[n].kind != CDV_T_IDENT || g->nd == FIS_MAX_DECL) return -1;
    g->d[g->nd++] = (fdecl){n, a, b, seg, 0, storage || dyn, 0, 0, 0, 0, 0, 0};
  }
  return 0;
}

static const char *const not_decl_prev[] = {"return", "case",  "else",      "do",       "sizeof", "new",
                                            "delete", "throw", "co_return", "co_yield", NULL};

/* Does the name at i look declared there (after a type name, or a * or & after one)? */
static int fis_declares(const fgen *g, int i) {
  const cdv_toks *t = g->t;
  /* after ( or , a declaration (`for (T *p = ...`, `if (T &r = ...`) has an initialiser: (n & tid) and
   * f(a, n * tid) are expressions (issue 29: `(n & tid)` after a barrier was read as declaring tid) */
  int init = (ftok(g, i + 1, "=") && !ftok(g, i + 2, "=")) || (ftok(g, i + 1, ":") && !ftok(g, i + 2, ":"));
  return (i > 0 && t->v[i - 1].kind == CDV_T_IDENT && !cdv_cpu_word_of(g->s, &t->v[i - 1], not_decl_prev)) ||
         (i > 2 && (ftok(g, i - 1, "*") || ftok(g, i - 1, "&")) && t->v[i - 2].kind == CDV_T_IDENT &&
          (t->v[i - 3].kind == CDV_T_IDENT || ftok(g, i - 3, ";") || ftok(g, i - 3, "{") || ftok(g, i - 3, "}") ||
           ((ftok(g, i - 3, "(") || ftok(g, i - 3, ",")) && init)));
}

/* Is the name at i a member or qualified (x.name, p->name, ns::name)? Not after a lone ':' (c ? a : name, issue
 * 29: pathfinder's `tx - 1 < l ? l : tx - 1` kept the per-thread array's name, and its function did not compile). */
static int fis_member(const fgen *g, int i) {
  return ftok(g, i - 1, ".") || (ftok(g, i - 1, ":") && ftok(g, i - 2, ":")) ||
         (ftok(g, i - 1, ">") && ftok(g, i - 2, "-"));
}

/* Is the name at i one the kernel declares, a local or a parameter (so no macro, whose body may not be one
 * operand)? */
static int fis_own_name(const fgen *g, int i) {
  for (int d = 0; d < g->nd; d++)
    if (same_tok(g, i, g->d[d].name)) return 1;
  for (int p = g->lp + 1; p < g->rp; p++)
    if (same_tok(g, i, p) && (ftok(g, p + 1, ",") || ftok(g, p + 1, ")"))) return 1;
  return 0;
}

/* (see NOTE [power-of-two modulus] in cpu_prelude.hpp) `name % m` at i, with name a local or parameter, m one
 * too, a number or a parenthesised group within [i, b), and nothing before the name that binds tighter than %:
 * the token after m, else -1. */
static int fis_umod(const fgen *g, int i, int b) {
  const cdv_tok *v = g->t->v;
  if (v[i].kind != CDV_T_IDENT || fis_member(g, i) || !ftok(g, i + 1, "%") || i + 2 >= b ||
      (ftok(g, i + 2, "=") && v[i + 2].off == v[i + 1].off + 1))
    return -1;
  static const char *const before[] = {"(", "=", ",", "[", "?", ":", "<", ">", "|", "^", "{", ";", NULL};
  int ok = 0;
  for (int k = 0; before[k] && !ok; k++) ok = ftok(g, i - 1, before[k]);
  if (!ok || (ftok(g, i - 1, ":") && ftok(g, i - 2, ":")) || !fis_own_name(g, i)) return -1;
  int r = i + 2;
  if (ftok(g, r, "(")) return cdv_cpu_skip_parens(g->s, g->t, r) <= b ? cdv_cpu_skip_parens(g->s, g->t, r) : -1;
  if ((v[r].kind != CDV_T_IDENT && v[r].kind != CDV_T_NUM) || r + 1 > b ||
      (v[r].kind == CDV_T_IDENT && !fis_own_name(g, r)))
    return -1;
  if (ftok(g, r + 1, ".") || ftok(g, r + 1, "[") || ftok(g, r + 1, "(") || (ftok(g, r + 1, "-") && ftok(g, r + 2, ">")))
    return -1;
  return r + 1;
}

/* Write token range [a, b) with the substitutions of region seg (-2: a barrier loop's header). */
static void fis_emit(fgen *g, buf *o, int a, int b, int seg) {
  for (int i = a; i < b; i++) {
    const cdv_tok *k = &g->t->v[i];
    if (i > a)
      buf_add(o, g->o + g->t->v[i - 1].off + g->t->v[i - 1].len, k->off - (g->t->v[i - 1].off + g->t->v[i - 1].len));
    int member = i > 0 && fis_member(g, i);
    int um = seg >= 0 && g->nbar && !member ? fis_umod(g, i, b) : -1;
    if (um > 0) { /* (see NOTE [power-of-two modulus]) */
      buf_adds(o, "cdv_umod(");
      fis_emit(g, o, i, i + 1, seg);
      buf_adds(o, ", ");
      fis_emit(g, o, i + 2, um, seg);
      buf_adds(o, ")");
      i = um - 1;
      continue;
    }
    if (k->kind == CDV_T_IDENT && !member) {
      if (cdv_tok_is(g->s, k, "return") && seg >= 0) {
        buf_addf(o, g->ret ? "{ cdv_done[cdv_t] = 1; goto cdv_end%d; }" : "goto cdv_end%d", seg);
        if (g->ret && ftok(g, i + 1, ";")) i++;
        continue;
      }
      int pv = 0;
      for (int d = 0; d < g->nd && !pv; d++)
        pv = g->d[d].priv && !g->d[d].remat && !g->d[d].bsc && k->len == g->t->v[g->d[d].name].len &&
             !memcmp(g->s + k->off, g->s + g->t->v[g->d[d].name].off, k->len);
      if (pv) {
        buf_add(o, g->o + k->off, k->len);
        buf_adds(o, seg >= 0 ? "[cdv_t]" : "[0]");
        continue;
      }
    }
    buf_add(o, g->o + k->off, k->len);
  }
}

/* fis_emit on one line (the line numbers of the code after it stay). */
static void fis_emit_line(fgen *g, buf *o, int a, int b, int seg) {
  for (int i = a; i < b; i++) {
    if (i > a && g->t->v[i].off > g->t->v[i - 1].off + g->t->v[i - 1].len) buf_adds(o, " ");
    fis_emit(g, o, i, i + 1, seg);
  }
}

/* The declaration of remat declarator d again: its statement's type, its stars, its name and initialiser. */
static void fis_remat_decl(fgen *g, buf *o, int d, int seg) {
  const fdecl *x = &g->d[d];
  int first = x->name, star = x->name;
  for (int k = 0; k < g->nd; k++)
    if (g->d[k].stmt_a == x->stmt_a && g->d[k].name < first) first = g->d[k].name;
  while (first > x->stmt_a && (ftok(g, first - 1, "*") || ftok(g, first - 1, "&"))) first--;
  while (star > x->stmt_a && ftok(g, star - 1, "*")) star--;
  buf_adds(o, " ");
  fis_emit_line(g, o, x->stmt_a, first, -3);
  buf_adds(o, " ");
  for (int i = star; i < x->name; i++) buf_adds(o, "*");
  fis_emit_line(g, o, x->name, x->init_b, seg);
  buf_adds(o, "; ");
}

/* The end of the declarator whose name is token n, in a declaration statement ending at b: the ',' or ';'
 * after its initialiser. */
static int fis_decl_end(const fgen *g, int n, int b) {
  int e = n + 1;
  for (int depth = 0; e < b && !(depth == 0 && (ftok(g, e, ",") || ftok(g, e, ";"))); e++)
    depth += ftok(g, e, "(") + ftok(g, e, "[") + ftok(g, e, "{") - ftok(g, e, ")") - ftok(g, e, "]") - ftok(g, e, "}");
  return e;
}

/* A privatised declaration statement [a, b): its declarators with initialisers become assignments, its remat
 * declarators declarations. */
static void fis_emit_assign(fgen *g, buf *o, int a, int b, int seg) {
  for (int d = 0; d < g->nd; d++) {
    if (g->d[d].stmt_a != a) continue;
    int n = g->d[d].name, e = fis_decl_end(g, n, b);
    if (g->d[d].remat) {
      fis_remat_decl(g, o, d, seg);
    } else if (ftok(g, n + 1, "=")) {
      fis_emit(g, o, n, e, seg);
      buf_adds(o, "; ");
    }
  }
}

/* The per-thread array of declaration d (at the function's top); row 1: its size as a type-id; row 2: a scalar. */
static int fis_hoisted(fgen *g, buf *o, int d, int row) {
  const fdecl *x = &g->d[d];
  int n = x->name, a = x->stmt_a, star_lo = n;
  while (star_lo > a && (ftok(g, star_lo - 1, "*") || ftok(g, star_lo - 1, "&"))) star_lo--;
  /* the type: the tokens before the statement's first declarator, without const or volatile */
  int first = g->d[d].name;
  for (int k = 0; k < g->nd; k++)
    if (g->d[k].stmt_a == a && g->d[k].name < first) first = g->d[k].name;
  while (first > a && (ftok(g, first - 1, "*") || ftok(g, first - 1, "&"))) first--;
  for (int i = a; i < first; i++)
    if (ftok(g, i, "auto") || ftok(g, i, "&")) return -1;
  for (int i = a; i < first; i++) /* const int x: an int array; const float *p: a const float * array */
    if ((!ftok(g, i, "const") && !ftok(g, i, "volatile") && !ftok(g, i, "register")) || star_lo < n)
      buf_add(o, g->o + g->t->v[i].off, g->t->v[i].len), buf_adds(o, " ");
  for (int i = star_lo; i < n; i++)
    if (ftok(g, i, "&"))
      return -1;
    else
      buf_adds(o, "*");
  if (row != 1) buf_add(o, g->o + g->t->v[n].off, g->t->v[n].len);
  buf_adds(o, row == 1 ? "[1]" : row ? "" : "[cdv_nt]");
  int e = n + 1;
  if (ftok(g, e, "[")) { /* an array: its dimensions follow; an initialiser is refused */
    while (ftok(g, e, "[")) {
      int d2 = 0, s = e;
      for (; e < x->stmt_b; e++) {
        d2 += ftok(g, e, "[") - ftok(g, e, "]");
        if (d2 == 0) break;
      }
      fis_emit(g, o, s, ++e, -3);
    }
    if (ftok(g, e, "=")) return -1;
  } else if (ftok(g, e, "(") || ftok(g, e, "{")) {
    return -1;
  }
  return 0;
}

static int same_tok(const fgen *g, int i, int j) {
  const cdv_tok *a = &g->t->v[i], *b = &g->t->v[j];
  return a->kind == CDV_T_IDENT && a->len == b->len && !memcmp(g->s + a->off, g->s + b->off, a->len);
}

/* Does the identifier at i change (an assignment, ++, --, or its address taken)? */
static int fis_writes(const fgen *g, int i) {
  const cdv_tok *k = &g->t->v[i];
  int adj1 = i + 2 < g->t->n && g->t->v[i + 2].off == g->t->v[i + 1].off + 1;
  if (ftok(g, i + 1, "=") && !ftok(g, i + 2, "=")) return 1;
  if (adj1 && ftok(g, i + 2, "=") &&
      (ftok(g, i + 1, "+") || ftok(g, i + 1, "-") || ftok(g, i + 1, "*") || ftok(g, i + 1, "/") ||
       ftok(g, i + 1, "%") || ftok(g, i + 1, "|") || ftok(g, i + 1, "^") || ftok(g, i + 1, "&")))
    return 1;
  if (adj1 && ((ftok(g, i + 1, "+") && ftok(g, i + 2, "+")) || (ftok(g, i + 1, "-") && ftok(g, i + 2, "-")))) return 1;
  if ((ftok(g, i + 1, "<") && ftok(g, i + 2, "<") && ftok(g, i + 3, "=")) ||
      (ftok(g, i + 1, ">") && ftok(g, i + 2, ">") && ftok(g, i + 3, "=")))
    return 1;
  if (i >= 2 && g->t->v[i - 1].off == g->t->v[i - 2].off + 1 &&
      ((ftok(g, i - 1, "+") && ftok(g, i - 2, "+")) || (ftok(g, i - 1, "-") && ftok(g, i - 2, "-"))))
    return 1;
  (void)k;
  if (!ftok(g, i - 1, "&") || ftok(g, i + 1, "[") || ftok(g, i + 1, ".") || ftok(g, i + 1, "-")) return 0;
  /* a & b and a && b take no address: & after an operand (not a cast's parenthesis) */
  if (i >= 2 && ftok(g, i - 2, "&") && g->t->v[i - 1].off == g->t->v[i - 2].off + 1) return 0;
  if (i >= 2 && (g->t->v[i - 2].kind == CDV_T_NUM || ftok(g, i - 2, "]") ||
                 (g->t->v[i - 2].kind == CDV_T_IDENT && !cdv_cpu_word_of(g->s, &g->t->v[i - 2], decl_not_first) &&
                  !cdv_cpu_word_of(g->s, &g->t->v[i - 2], not_decl_prev))))
    return 0;
  return 1;
}

/* Is the break/continue at k inside a loop or switch of the plain item [a, b)? */
static int fis_nested(fgen *g, int a, int b, int k) {
  for (int j = a; j < k; j++)
    if (ftok(g, j, "for") || ftok(g, j, "while") || ftok(g, j, "do") || ftok(g, j, "switch")) {
      int e = stmt_end(g, j, b);
      if (e < 0 || e > k) return 1;
    }
  return 0;
}

static void fis_gap(fgen *g, buf *o, int i) /* the text between token i - 1 and token i */
{
  if (i > 0 && i < g->t->n)
    buf_add(o, g->o + g->t->v[i - 1].off + g->t->v[i - 1].len,
            g->t->v[i].off - (g->t->v[i - 1].off + g->t->v[i - 1].len));
}

static void fis_newlines(fgen *g, buf *o, int a, int b) /* the newlines of tokens [a, b) */
{
  for (size_t p = g->t->v[a].off; p < g->t->v[b - 1].off + g->t->v[b - 1].len; p++)
    if (g->o[p] == '\n') buf_adds(o, "\n");
}

/* (see NOTE [fast paths]) Rematerialisation. Integer words a remat type or a cast may use. */
static const char *const fis_int_words[] = {"const",    "unsigned",  "signed",  "int",       "long",     "short",
                                            "char",     "bool",      "size_t",  "ptrdiff_t", "int8_t",   "int16_t",
                                            "int32_t",  "int64_t",   "uint8_t", "uint16_t",  "uint32_t", "uint64_t",
                                            "intptr_t", "uintptr_t", "uint",    NULL};

static int fis_int_word(const fgen *g, int i) {
  return g->t->v[i].kind == CDV_T_IDENT && cdv_cpu_word_of(g->s, &g->t->v[i], fis_int_words);
}

/* Is [a, b) a cast's parenthesised type: (int), (const float *)? */
static int fis_cast(const fgen *g, int a, int b) {
  int words = 0;
  for (int i = a + 1; i < b - 1; i++)
    if (g->t->v[i].kind == CDV_T_IDENT)
      words++;
    else if (!ftok(g, i, "*"))
      return 0;
  return words > 0;
}

/* Is parameter token p (between lp and rp) an integer or a pointer (no reference, no template)? */
static int fis_param_ok(const fgen *g, int lp, int p) {
  int a = p, ptr = 0;
  while (a - 1 > lp && !ftok(g, a - 1, ",")) a--;
  for (int i = a; i < p; i++)
    if (ftok(g, i, "*"))
      ptr = 1;
    else if (g->t->v[i].kind != CDV_T_IDENT)
      return 0;
  for (int i = a; i < p && !ptr; i++)
    if (!fis_int_word(g, i)) return 0;
  return 1;
}

static const char *const fis_by_value[] = {"if",        "while",     "for",        "switch",    "return",
                                           "min",       "max",       "abs",        "atomicAdd", "atomicSub",
                                           "atomicMin", "atomicMax", "atomicExch", "atomicAnd", "atomicOr",
                                           "atomicXor", "atomicCAS", "printf",     NULL};

/* Is [a, e) an expression of integer literals, threadIdx (not for bsc 1), blockIdx, blockDim, gridDim, integer
 * or pointer parameters (the body writes none: fis_kernel) and earlier remat locals of d (bsc 1: block-scalar
 * candidates and barrier loops' counters instead; bsc 2: barrier loops' counters as well), with integer
 * arithmetic and casts: no memory, no call, no float, no assignment? */
static int fis_int_expr(fgen *g, int a, int e, int d, int bsc, int lp, int rp, int lb, int rb) {
  for (int i = a; i < e; i++) {
    const cdv_tok *k = &g->t->v[i];
    if (k->kind == CDV_T_NUM) {
      int hex = k->len > 1 && g->s[k->off] == '0' && (g->s[k->off + 1] == 'x' || g->s[k->off + 1] == 'X');
      for (size_t c = 0; c < k->len; c++) {
        char ch = g->s[k->off + c];
        if (ch == '.' || (!hex && (ch == 'e' || ch == 'E' || ch == 'f' || ch == 'F')) || ch == 'p' || ch == 'P' ||
            ch == '\'')
          return 0;
      }
      continue;
    }
    if (k->kind == CDV_T_IDENT) {
      if (ftok(g, i - 1, ".")) { /* threadIdx.x and the like */
        if (!(ftok(g, i, "x") || ftok(g, i, "y") || ftok(g, i, "z"))) return 0;
        continue;
      }
      if ((ftok(g, i, "threadIdx") && bsc != 1) || ftok(g, i, "blockIdx") || ftok(g, i, "blockDim") ||
          ftok(g, i, "gridDim")) {
        if (!ftok(g, i + 1, ".")) return 0;
        continue;
      }
      if (fis_int_word(g, i)) continue; /* a cast, (size_t)x or size_t(x) */
      int ok = 0;
      for (int p = lp + 1; p < rp && !ok; p++)
        if (same_tok(g, i, p) && (ftok(g, p + 1, ",") || ftok(g, p + 1, ")") || ftok(g, p + 1, "[")))
          ok = !ftok(g, p + 1, "[") && fis_param_ok(g, lp, p);
      for (int j = lb + 1; j < rb && ok; j++) /* a parameter a block of the body declares again */
        ok = !(same_tok(g, i, j) && fis_declares(g, j));
      for (int d2 = 0; d2 < g->nd && !ok; d2++)
        ok = (bsc == 1 ? g->d[d2].bsc || g->d[d2].uniform : (d2 < d && g->d[d2].remat) || (bsc && g->d[d2].uniform)) &&
             same_tok(g, i, g->d[d2].name);
      if (!ok || ftok(g, i + 1, "(")) return 0;
      continue;
    }
    if (k->kind != CDV_T_PUNCT) return 0;
    int adj_prev = i > a && k->off == g->t->v[i - 1].off + g->t->v[i - 1].len,
        adj_next = i + 1 < e && g->t->v[i + 1].off == k->off + k->len;
    if (ftok(g, i, "(") || ftok(g, i, ")") || ftok(g, i, "/") || ftok(g, i, "%") || ftok(g, i, "^") ||
        ftok(g, i, "~") || ftok(g, i, "?") || ftok(g, i, ":") || ftok(g, i, "|"))
      continue;
    if (ftok(g, i, ".")) {
      if (!(ftok(g, i - 1, "threadIdx") || ftok(g, i - 1, "blockIdx") || ftok(g, i - 1, "blockDim") ||
            ftok(g, i - 1, "gridDim")))
        return 0;
      continue;
    }
    if (ftok(g, i, "+") || ftok(g, i, "-")) { /* not ++, -- or -> */
      const char *pm = ftok(g, i, "+") ? "+" : "-";
      if ((adj_next && (ftok(g, i + 1, pm) || ftok(g, i + 1, ">"))) || (adj_prev && ftok(g, i - 1, pm))) return 0;
      continue;
    }
    if (ftok(g, i, "=")) { /* only in ==, !=, <=, >= */
      if ((adj_prev && (ftok(g, i - 1, "=") || ftok(g, i - 1, "!") || ftok(g, i - 1, "<") || ftok(g, i - 1, ">"))) ||
          (adj_next && ftok(g, i + 1, "=") && !(adj_prev && ftok(g, i - 1, "="))))
        continue;
      return 0;
    }
    if (ftok(g, i, "<") || ftok(g, i, ">") || ftok(g, i, "!")) continue;
    if (ftok(g, i, "*") || ftok(g, i, "&")) { /* binary only: no load, no address */
      if (ftok(g, i, "&") && ((adj_next && ftok(g, i + 1, "&")) || (adj_prev && ftok(g, i - 1, "&")))) continue;
      int prev = i - 1;
      if (prev < a) return 0;
      if (ftok(g, prev, ")")) {
        int o2 = prev;
        for (int dd = 0; o2 >= a; o2--) {
          dd += ftok(g, o2, ")") - ftok(g, o2, "(");
          if (dd == 0) break;
        }
        if (o2 < a || fis_cast(g, o2, prev + 1)) return 0;
        continue;
      }
      if (g->t->v[prev].kind == CDV_T_NUM) continue;
      if (g->t->v[prev].kind == CDV_T_IDENT && !fis_int_word(g, prev)) continue;
      if (ftok(g, i, "*") && fis_int_word(g, prev) && ftok(g, i + 1, ")")) continue; /* (int *)p */
      return 0;
    }
    return 0; /* [ { -> , ; a string, ... */
  }
  return 1;
}

/* Is the parenthesis at o2 the operand's of a cast, (float)(name)? 1: a cast, -1: a parenthesis before it that is
 * not, 0: none. */
static int fis_cast_before(const fgen *g, int o2, int lb) {
  int cast = 0;
  if (ftok(g, o2 - 1, ")"))
    for (int c = o2 - 1, dd2 = 0; c > lb && !cast; c--) {
      dd2 += ftok(g, c, ")") - ftok(g, c, "(");
      if (dd2 == 0) cast = fis_cast(g, c, o2) ? 1 : -1;
    }
  return cast;
}

/* May the use of a name at token i bind a reference to it, int &r = name, or write it in ways fis_writes does not
 * see: in parentheses of its own, `(c) = t;`, `f((c));`, `&(c)`, or (tern) as an operand of ?:,
 * `(k ? c : d) = t;`? */
static int fis_aliased(const fgen *g, int i, int lb, int tern) {
  if (ftok(g, i - 1, "=") && ftok(g, i - 3, "&")) return 1; /* int &r = name */
  if (tern && (ftok(g, i - 1, "?") || (ftok(g, i - 1, ":") && !ftok(g, i - 2, ":")) ||
               (ftok(g, i + 1, ":") && !ftok(g, i + 2, ":"))))
    return 1;
  /* (name), "+r"(name); not f(name), if (name), a[k](name), f<T>(name) or (float)(name) */
  return ftok(g, i - 1, "(") && ftok(g, i + 1, ")") && g->t->v[i - 2].kind != CDV_T_IDENT && !ftok(g, i - 2, "]") &&
         !ftok(g, i - 2, ">") && fis_cast_before(g, i - 1, lb) < 1;
}

/* The '(' of the call whose whole argument the name at i is (`f(..., name, ...)`, `(*p)(name)`), else -1. */
static int fis_call_paren(const fgen *g, int i, int lb) {
  if (!(ftok(g, i - 1, "(") || ftok(g, i - 1, ",")) || !(ftok(g, i + 1, ")") || ftok(g, i + 1, ","))) return -1;
  int o2 = i - 1, dd = 0;
  for (; o2 > lb; o2--)
    if (ftok(g, o2, ")"))
      dd++;
    else if (ftok(g, o2, "(") && dd-- == 0)
      break;
    else if (dd == 0 && (ftok(g, o2, ";") || ftok(g, o2, "{") || ftok(g, o2, "}")))
      return -1;
  return ftok(g, o2, "(") ? o2 : -1;
}

/* Does some `f(...)` of the source (f: the name at token f) list a parameter that is a non-const reference, a
 * single & after a type and no const before it (`__device__ void twice(int &v)`)? A call `f(a & b)` reads as
 * one too: the kernel then keeps its fibers, which is safe. */
static int fis_takes_ref(const fgen *g, int f) {
  if (f < 0 || g->t->v[f].kind != CDV_T_IDENT || cdv_cpu_word_of(g->s, &g->t->v[f], fis_by_value)) return 0;
  for (int i = 0; i + 1 < g->t->n; i++) {
    if (i == f || !same_tok(g, i, f) || !ftok(g, i + 1, "(")) continue;
    int e = cdv_cpu_skip_parens(g->s, g->t, i + 1) - 1, cnst = 0;
    for (int j = i + 2, depth = 0; j < e; j++) {
      depth += ftok(g, j, "(") - ftok(g, j, ")");
      if (depth == 0 && ftok(g, j, ",")) cnst = 0;
      cnst |= ftok(g, j, "const");
      int glued = ftok(g, j + 1, "&") || ftok(g, j - 1, "&");
      if (ftok(g, j, "&") && !glued && !cnst &&
          (g->t->v[j - 1].kind == CDV_T_IDENT || ftok(g, j - 1, ">") || ftok(g, j - 1, "*")))
        return 1;
    }
  }
  return 0;
}

/* May the use of a local at token i bind a reference to it or write it unseen (fis_aliased), or be an argument of
 * a call, which may bind a reference? */
static int fis_by_ref(const fgen *g, int i, int lb) {
  if (fis_aliased(g, i, lb, 1)) return 1;
  int o2 = fis_call_paren(g, i, lb); /* an argument of a call may bind a reference */
  if (o2 < 0) return 0;
  int cast = fis_cast_before(g, o2, lb);
  return (g->t->v[o2 - 1].kind == CDV_T_IDENT && !cdv_cpu_word_of(g->s, &g->t->v[o2 - 1], fis_by_value)) ||
         ftok(g, o2 - 1, ">") || (ftok(g, o2 - 1, ")") && cast < 1) || ftok(g, o2 - 1, "]");
}

/* Can private declarator d be computed again where it is used? Its initialiser reads only threadIdx, blockIdx,
 * blockDim, gridDim, integer or pointer parameters (the body writes none: fis_kernel), integer literals and
 * earlier remat locals, with integer arithmetic and casts (no memory, no call, no float: a value computed again
 * must be the same); its type is an integer or a pointer; and the body never changes it, binds a reference to
 * it, passes it to a call, or uses it outside regions (a barrier loop's header, a hoisted declaration). */
static int fis_remat_ok(fgen *g, int d, int lp, int rp, int lb, int rb) {
  fdecl *x = &g->d[d];
  int n = x->name, e = fis_decl_end(g, n, x->stmt_b), ptr = 0;
  if (!x->priv || x->uniform || x->hoist || !ftok(g, n + 1, "=")) return 0;
  x->init_a = n + 2, x->init_b = e;
  /* the type: integer words, or any words and a star */
  int first = n;
  for (int k = 0; k < g->nd; k++)
    if (g->d[k].stmt_a == x->stmt_a && g->d[k].name < first) first = g->d[k].name;
  while (first > x->stmt_a && (ftok(g, first - 1, "*") || ftok(g, first - 1, "&"))) first--;
  for (int i = n - 1; i >= x->stmt_a && ftok(g, i, "*"); i--) ptr = 1;
  if (ftok(g, n - 1, "&")) return 0;
  for (int i = x->stmt_a; i < first; i++)
    if (g->t->v[i].kind != CDV_T_IDENT || ftok(g, i, "auto") || (!ptr && !fis_int_word(g, i))) return 0;
  if (!fis_int_expr(g, x->init_a, e, d, 0, lp, rp, lb, rb)) return 0;
  /* its uses */
  for (int i = lb + 1; i < rb; i++) {
    if (i == n || !same_tok(g, i, n) || ftok(g, i - 1, ".") || (ftok(g, i - 1, ">") && ftok(g, i - 2, "-")) ||
        (ftok(g, i - 1, ":") && ftok(g, i - 2, ":")))
      continue;
    if (g->seg_of[i] < 0 || fis_writes(g, i)) return 0;
    for (int d2 = 0; d2 < g->nd; d2++)
      if (g->d[d2].hoist && i >= g->d[d2].stmt_a && i < g->d[d2].stmt_b) return 0;
    if (fis_by_ref(g, i, lb)) return 0;
  }
  return 1;
}

/* NOTE [block scalars]: a private local that every thread of the block holds the same value of lives in one
 * scalar, not a per-thread array, and the statements that set it run once for the block. The double buffer of
 * a stencil (`int cur = 0;` ... `__syncthreads(); cur ^= 1;` at the end of a barrier loop) is the case: as
 * `cur[t]`, every `t[cur][y][x]` of the next region became a gather, and the region did not vectorise
 * (stencil in bench/cpu: 3x OpenMP). A candidate is a private integer local (no pointer, array or reference)
 * whose every write is a whole statement `name = e;`, `name op= e;`, `++name;` or `name++;` (or a
 * declaration), with e of literals, parameters, blockIdx, blockDim, gridDim, candidates and barrier loops'
 * counters only (fis_int_expr: no threadIdx, no memory, no call), in a region of such statements only (or, for
 * one read in loops' headers only, among others: NOTE [loose counters]), that no warp if encloses; and that
 * no use binds a reference to or takes the address of. Such a region is written without a thread loop: each
 * thread would have stored the same values, so storing them once is the same. Reads may be anywhere, a
 * barrier loop's header included. The region runs even when every thread has returned, so in a kernel with
 * a return its statements divide by nothing (`q = n / d;` after `if (d == 0) return;` would trap). */
static int fis_bsc_stmt(fgen *g, const fitem *x, int lp, int rp) {
  int a = x->a, b = x->b;
  if (!ftok(g, b - 1, ";")) return 0;
  for (int i = a; i < b && g->ret; i++) /* it runs even when every thread has returned: nothing that may trap */
    if (ftok(g, i, "/") || ftok(g, i, "%")) return 0;
  for (int d = 0; d < g->nd; d++) /* a declaration: all its declarators candidates, their initialisers pure */
    if (g->d[d].stmt_a == a) {
      for (int d2 = 0; d2 < g->nd; d2++) {
        int n = g->d[d2].name;
        if (g->d[d2].stmt_a != a) continue;
        if (!g->d[d2].bsc) return 0;
        if (ftok(g, n + 1, "=") && !fis_int_expr(g, n + 2, fis_decl_end(g, n, b), -1, 1, lp, rp, g->lb, g->rb))
          return 0;
      }
      return 1;
    }
  int n = a, e = b - 1;
  if (ftok(g, a, "+") || ftok(g, a, "-")) n = a + 2, e = b - 1; /* ++name; */
  int cand = 0;
  for (int d = 0; d < g->nd && !cand; d++) cand = g->d[d].bsc && same_tok(g, n, g->d[d].name);
  if (!cand || !fis_writes(g, n)) return 0;
  if (n > a) return n + 2 == b;
  int op = n + 1; /* past =, op=, <<=, >>=, ++ or -- */
  while (op < e && g->t->v[op].kind == CDV_T_PUNCT && !ftok(g, op - 1, "=")) op++;
  if (ftok(g, n + 1, "+") && ftok(g, n + 2, "+")) return n + 3 == e;
  if (ftok(g, n + 1, "-") && ftok(g, n + 2, "-")) return n + 3 == e;
  return op < e && fis_int_expr(g, op, e, -1, 1, lp, rp, g->lb, g->rb);
}

/* The region of each plain item k that may run once (every statement a block-scalar one), as seg_bsc. */
static void fis_bsc_regions(fgen *g, int lp, int rp) {
  memset(g->seg_bsc, 1, (size_t)g->nseg);
  for (int k = 0; k < g->nit; k++) {
    const fitem *x = &g->it[k];
    if (x->kind == 0 && !fis_bsc_stmt(g, x, lp, rp)) g->seg_bsc[x->seg] = 0;
    if (x->kind == 3 && x->hdr_a >= 0) g->seg_bsc[x->seg] = 0;
    if (x->kind == 4) g->seg_bsc[x->seg] = g->seg_bsc[x->seg2] = 0;
    for (int j = k + 1; x->kind == 3 && j < x->b; j++) { /* guarded by a warp if */
      if (g->it[j].kind == 0 || g->it[j].kind == 3 || g->it[j].kind == 4) g->seg_bsc[g->it[j].seg] = 0;
      if (g->it[j].kind == 4) g->seg_bsc[g->it[j].seg2] = 0;
    }
  }
}

/* NOTE [loose counters]: a candidate of NOTE [block scalars] whose statements sit in regions with other
 * statements, and that nothing reads but loops' headers and its own statements, is a block scalar too: the
 * counter of a do or while loop of warp operations (`int c = 0; do { v += __shfl_xor_sync(~0u, v, 1); v ^= t;
 * c++; } while (c < 2);`) was each thread's own, so its header read a per-thread value and the kernel ran on
 * the fibers (6 of the 48 random kernels of spec/94). Its statements, at the top level of their region's
 * sequence (no warp if around them), run once for the block, before the region's loop over the threads
 * (fis_loose_at): each thread would have stored the same value, nothing in the region reads it, and the
 * headers that do run outside the regions. Not in a kernel with a return (a thread that returned would not
 * have changed its counter). */

/* Is item k inside a warp if (see NOTE [warp fission])? */
static int fis_in_warp_if(const fgen *g, int k) {
  for (int j = 0; j < k; j++)
    if (g->it[j].kind == 3 && k < g->it[j].b) return 1;
  return 0;
}

/* The plain item whose statement holds token i, or g->nit. */
static int fis_item_of(const fgen *g, int i) {
  int k = 0;
  while (k < g->nit && !(g->it[k].kind == 0 && i >= g->it[k].a && i < g->it[k].b)) k++;
  return k;
}

/* Does item k, in a region that is not all block-scalar statements, set candidates only, as a block-scalar
 * statement outside warp ifs (see NOTE [loose counters])? */
static int fis_loose_stmt(fgen *g, int k) {
  return k < g->nit && fis_bsc_stmt(g, &g->it[k], g->lp, g->rp) && !fis_in_warp_if(g, k);
}

/* Is candidate d still one? (see NOTE [block scalars] and NOTE [loose counters]) */
static int fis_bsc_ok(fgen *g, int d) {
  fdecl *x = &g->d[d];
  if (x->seg < 0) return 0;
  int loose = !g->seg_bsc[x->seg], read = 0; /* read: outside loops' headers */
  if (loose && !fis_loose_stmt(g, fis_item_of(g, x->name))) return 0;
  for (int i = g->lb + 1; i < g->rb; i++) {
    if (i == x->name || !same_tok(g, i, x->name) || ftok(g, i - 1, ".") ||
        (ftok(g, i - 1, ">") && ftok(g, i - 2, "-")) || (ftok(g, i - 1, ":") && ftok(g, i - 2, ":")))
      continue;
    if (g->seg_of[i] == -1 || fis_by_ref(g, i, g->lb)) return 0;
    for (int d2 = 0; d2 < g->nd; d2++)
      if (g->d[d2].hoist && i >= g->d[d2].stmt_a && i < g->d[d2].stmt_b) return 0;
    if (!fis_writes(g, i)) {
      read |= g->seg_of[i] != -2;
      continue;
    }
    int k = fis_item_of(g, i); /* a write: the name of a block-scalar statement */
    if (k == g->nit || (i != g->it[k].a && i != g->it[k].a + 2)) return 0;
    if (!g->seg_bsc[g->it[k].seg]) {
      if (!fis_loose_stmt(g, k)) return 0;
      loose = 1;
    }
  }
  if (loose && (read || g->ret)) return 0;
  x->loose = loose;
  return 1;
}

/* Is item k a statement of a loose counter (NOTE [loose counters]), to run before its region's loop? */
static int fis_loose_item(const fgen *g, int k) {
  const fitem *x = &g->it[k];
  if (x->kind != 0 || g->seg_bsc[x->seg]) return 0;
  int n = ftok(g, x->a, "+") || ftok(g, x->a, "-") ? x->a + 2 : x->a;
  for (int d = 0; d < g->nd; d++)
    if (g->d[d].bsc && g->d[d].loose && (g->d[d].stmt_a == x->a || same_tok(g, n, g->d[d].name))) return 1;
  return 0;
}

static void fis_block_scalars(fgen *g, int lp, int rp) {
  for (int d = 0; d < g->nd; d++) {
    fdecl *x = &g->d[d];
    int n = x->name, first = n;
    x->bsc = x->priv && !x->remat && !x->hoist && !x->uniform && x->seg >= 0 && !ftok(g, n - 1, "*") &&
             !ftok(g, n - 1, "&") && (ftok(g, n + 1, "=") || ftok(g, n + 1, ",") || ftok(g, n + 1, ";"));
    for (int k = 0; k < g->nd; k++)
      if (g->d[k].stmt_a == x->stmt_a && g->d[k].name < first) first = g->d[k].name;
    while (first > x->stmt_a && (ftok(g, first - 1, "*") || ftok(g, first - 1, "&"))) first--;
    for (int i = x->stmt_a; i < first && x->bsc; i++) x->bsc = fis_int_word(g, i);
  }
  for (int changed = 1; changed;) {
    changed = 0;
    fis_bsc_regions(g, lp, rp);
    for (int d = 0; d < g->nd; d++)
      if (g->d[d].bsc && !fis_bsc_ok(g, d)) g->d[d].bsc = 0, g->d[d].loose = 0, changed = 1;
  }
  fis_bsc_regions(g, lp, rp);
}

/* Is token i written in region seg? A warp operation's value is, besides its own region, named again in the
 * decltype of the region after it (NOTE [warp fission]). */
static int fis_in_region(const fgen *g, int i, int seg) {
  if (g->seg_of[i] == seg) return 1;
  for (int k = 0; g->nwarp && k < g->nit; k++) /* per token of every region: no walk without warp operations */
    if (g->it[k].kind == 4 && g->it[k].seg2 == seg && i >= g->it[k].arg[1] && i < g->it[k].arg[2]) return 1;
  return 0;
}

/* The remat declarations region seg uses and did not declare (with those they read), in source order. */
static void fis_remat_at(fgen *g, buf *o, int seg) {
  char need[FIS_MAX_DECL] = {0};
  for (int d = 0; d < g->nd; d++) {
    if (!g->d[d].remat || g->d[d].seg == seg) continue;
    for (int i = g->lb + 1; i < g->rb && !need[d]; i++)
      need[d] = fis_in_region(g, i, seg) && i != g->d[d].name && same_tok(g, i, g->d[d].name) && !ftok(g, i - 1, ".") &&
                !(ftok(g, i - 1, ">") && ftok(g, i - 2, "-")) && !(ftok(g, i - 1, ":") && ftok(g, i - 2, ":"));
  }
  for (int d = g->nd - 1; d >= 0; d--)
    for (int i = g->d[d].init_a; need[d] && i < g->d[d].init_b; i++)
      for (int d2 = 0; d2 < d; d2++)
        if (g->d[d2].remat && same_tok(g, i, g->d[d2].name) && !ftok(g, i - 1, ".")) need[d2] = 1;
  for (int d = 0; d < g->nd; d++)
    if (need[d]) fis_remat_decl(g, o, d, seg);
}

/* The loops over the z and y of the block's threads, and the head of the loop over x up to its '{'; in warp ifs
 * (or when chunked) a loop over chunks of 32 threads of x around it. [sa, sb): the step of x, cdv_mstride of
 * those tokens (NOTE [modulus stride]), or 1 when sa < 0. */
static void fis_stride_m(fgen *g, buf *o, int sa, int sb, int seg);

static void fis_loops(fgen *g, buf *o, int chunked, int sa, int sb, int seg) {
  /* fission: an unsigned x, so that GCC splits a region's loop at `if (t < h)` (t = threadIdx.x unsigned) */
  buf_adds(o,
           " for (unsigned cdv_z = 0; cdv_z < cdv_bdim.z; ++cdv_z) for (unsigned cdv_y = 0; cdv_y < "
           "cdv_bdim.y; ++cdv_y) for (");
  if (chunked || g->ng) {
    buf_adds(o,
             "unsigned cdv_xw = 0; cdv_xw < cdv_bdim.x; cdv_xw += 32u) { const unsigned long cdv_t0 = ((unsigned "
             "long)cdv_z * cdv_bdim.y + cdv_y) * cdv_bdim.x + cdv_xw; (void)cdv_t0; const unsigned cdv_xn = "
             "cdv_bdim.x - cdv_xw < 32u ? cdv_bdim.x - cdv_xw : 32u; ");
    /* in warp ifs: a chunk none of whose threads takes them is skipped whole (NOTE [warp skip]) */
    for (int k = 0; k < g->ng; k++)
      buf_addf(o, "%s!cdv_fany(cdv_fl%d, cdv_t0, cdv_xn, %d)%s", k ? " || " : "if (", g->guard[k], !g->gneg[k],
               k + 1 == g->ng ? ") continue; " : "");
    if (g->ng) /* a whole warp all of whose threads take the warp ifs around (NOTE [full warps]) */
      buf_adds(o, g->ret ? "const bool cdv_full = false; " : "const bool cdv_full = cdv_xn == 32u && !(cdv_t0 & 31u)");
    for (int k = 0; k < g->ng && !g->ret; k++)
      buf_addf(o, " && cdv_fall(cdv_fl%d, cdv_t0, %d)%s", g->guard[k], !g->gneg[k], k + 1 == g->ng ? "; " : "");
    if (g->ng && !g->ret && !chunked) g->dup_at = o->n;
    buf_adds(o, chunked ? "unsigned cdv_m = 0; for (unsigned cdv_x = cdv_xw; cdv_x < cdv_xw + cdv_xn; ++cdv_x) { "
                        : "for (unsigned cdv_x = cdv_xw; cdv_x < cdv_xw + cdv_xn; ++cdv_x) { ");
  } else if (sa >= 0) {
    buf_adds(o, "unsigned cdv_x = 0; cdv_x < cdv_bdim.x; cdv_x += cdv_mstride(");
    fis_stride_m(g, o, sa, sb, seg);
    buf_adds(o, ")) { ");
  } else {
    buf_adds(o, g->nbar ? "unsigned cdv_x = 0; cdv_x < cdv_bdim.x; ++cdv_x) { "
                        : "int cdv_x = 0; cdv_x < (int)cdv_bdim.x; ++cdv_x) { ");
  }
}

/* The thread of cdv_x in the loops of fis_loops: its indices, and `continue` when it returned or is outside the
 * warp ifs around. */
static void fis_thread(fgen *g, buf *o, int hdr, int checks) {
  /* fission: a 64-bit thread index, so that `name[cdv_t]` of a per-thread array is affine in x (an unsigned
   * int one may wrap, and GCC gives up on the loop's data references) */
  buf_adds(o, g->nbar ? "const unsigned long cdv_t = ((unsigned long)cdv_z * cdv_bdim.y + cdv_y) * cdv_bdim.x + "
                        "cdv_x; "
                      : "const unsigned cdv_t = (cdv_z * cdv_bdim.y + cdv_y) * cdv_bdim.x + (unsigned)cdv_x; ");
  buf_adds(o, "(void)cdv_t; const uint3 cdv_tix = {(unsigned)cdv_x, cdv_y, cdv_z}; (void)cdv_tix; ");
  if (g->nwarp) /* cdv_xshfl's 32-bit thread index (see NOTE [exchange slack]) */
    buf_adds(o,
             "const unsigned cdv_t32 = (cdv_z * cdv_bdim.y + cdv_y) * cdv_bdim.x + (unsigned)cdv_x; (void)cdv_t32; ");
  if (hdr) buf_adds(o, "cdv_h->tix = cdv_tix; cdv_h->tid = cdv_t; ");
  if (g->ret && checks) buf_adds(o, "if (cdv_done[cdv_t]) continue; ");
  for (int k = 0; k < g->ng && checks; k++) /* the threads of the warp ifs around (see NOTE [warp fission]) */
    buf_addf(o, "%s%scdv_fl%d[cdv_t]%s", k ? " || " : "if (!cdv_full && (", g->gneg[k] ? "" : "!", g->guard[k],
             k + 1 == g->ng ? ")) continue; " : "");
}

/* (see NOTE [loose counters]) The loose statements of region seg, once, on one line. */
static void fis_loose_at(fgen *g, buf *o, int seg) {
  if (seg < 0 || g->loose_done[seg]) return;
  g->loose_done[seg] = 1;
  for (int k = 0; k < g->nit; k++) {
    if (g->it[k].seg != seg || !fis_loose_item(g, k)) continue;
    buf t = {0};
    int decl = 0;
    for (int d = 0; d < g->nd; d++) decl |= g->d[d].stmt_a == g->it[k].a;
    if (decl)
      fis_emit_assign(g, &t, g->it[k].a, g->it[k].b, seg);
    else
      fis_emit(g, &t, g->it[k].a, g->it[k].b, seg);
    for (size_t i = 0; i < t.n; i++)
      if (t.p[i] == '\n') t.p[i] = ' ';
    buf_adds(o, " ");
    if (t.n) buf_add(o, t.p, t.n);
    o->oom |= t.oom;
    free(t.p);
  }
}

static void fis_open(fgen *g, buf *o, int seg, int hdr) {
  fis_loose_at(g, o, seg);
  fis_loops(g, o, 0, -1, -1, seg);
  fis_thread(g, o, hdr, 1);
  g->chunked = g->ng > 0;
  buf_addf(o, "{ /* region %d */", seg);
  fis_remat_at(g, o, seg);
}

/* NOTE [full warps]: a region inside warp ifs (NOTE [warp skip]) tests each thread's flags, and its warp
 * operations read who took part (cdv_xp), so its loop over a chunk's threads did not vectorise: the second
 * stage of bench/cpu's reduce_warp (`if (w == 0) { ... shuffles ... }`, 32 threads of 256) cost as much as the
 * first stage's shuffles over all 256 threads. A chunk that is a whole warp (32 threads from a multiple of 32:
 * a warp's operations read only its own lanes) all of whose flags say it takes the ifs (cdv_full, cdv_fall) has
 * every lane take part, so the loop over its threads is written twice, under `if (cdv_full)` and its else,
 * the same text but for the first copy's label and line breaks: in the first GCC knows cdv_full, the flag
 * tests fold away, and its warp operations are told that every lane took part (no cdv_xp). Not where a
 * thread returned (its lanes may be missing). In a valid kernel a mask names only lanes that take part, so
 * cdv_xp changes a result only where one names a lane that does not (the fibers' rule: the reader's own value);
 * the chunk is a whole warp so that such a kernel, too, reads what it read before. On 2 idle cores, A/B in
 * turn: reduce_warp 8.0 ms a launch of 2^24 floats before, 5.9 ms after (OpenMP 1.6-1.9). */
static void fis_full(fgen *g, buf *o, int seg) {
  size_t at = g->dup_at, n = o->n - at;
  char *t = malloc(n + 1), lab[32];
  g->dup_at = 0;
  if (!t) {
    o->oom = 1;
    return;
  }
  memcpy(t, o->p + at, n);
  t[n] = 0;
  o->n = at;
  buf_adds(o, "if (cdv_full) { ");
  int ll = snprintf(lab, sizeof lab, "cdv_end%d", seg);
  for (size_t i = 0; i < n;) {
    if (t[i] == '\n' && t[i + 1] == '#') { /* a directive (#line) of the second copy: the first has none */
      const char *nl = strchr(t + i + 1, '\n');
      i = nl ? (size_t)(nl - t) : n;
    } else if (t[i] == '\n') {
      buf_adds(o, " "), i++; /* the line numbers of what follows stay */
    } else if (!strncmp(t + i, lab, (size_t)ll) && !isdigit((unsigned char)t[i + ll])) {
      buf_adds(o, lab), buf_adds(o, "_w"), i += (size_t)ll;
    } else {
      size_t r = strcspn(t + i + 1, "\nc") + 1;
      buf_add(o, t + i, r), i += r;
    }
  }
  buf_adds(o, "} else { ");
  buf_add(o, t, n);
  buf_adds(o, "} ");
  free(t);
}

static void fis_close(fgen *g, buf *o, int seg) {
  buf_addf(o, " } cdv_end%d: __attribute__((unused)); } ", seg);
  if (g->dup_at) fis_full(g, o, seg);
  buf_adds(o, g->chunked ? "} " : "");
  g->chunked = 0;
}

static void fis_walk(fgen *g, buf *o, int from, int to, int hdr);
static void fis_line(fgen *g, buf *o, int i, const char *fname);

/* (see NOTE [warp fission]) Emit the warp if or warp operation at item k; the next item's index. cur: the region
 * left open (the one after a warp operation). */
static int fis_warp_walk(fgen *g, buf *o, int k, int hdr, int *cur) {
  fitem *x = &g->it[k];
  if (x->kind == 3) {
    if (x->hdr_a >= 0) { /* the condition, per thread */
      fis_open(g, o, x->seg, hdr);
      buf_addf(o, " cdv_fl%d[cdv_t] = !!(", x->flag);
      fis_emit(g, o, x->hdr_a, x->hdr_b, x->seg);
      buf_adds(o, ");");
      fis_close(g, o, x->seg);
    }
    g->guard[g->ng] = x->flag, g->gneg[g->ng++] = x->neg;
    fis_line(g, o, x->kw + (x->neg ? 1 : 0), g->fname);
    fis_walk(g, o, k + 1, x->b, hdr);
    g->ng--;
    fis_line(g, o, x->a, g->fname);
    return x->b;
  }
  static const char *const kinds[] = {"CDV_SHFL_IDX", "CDV_SHFL_UP", "CDV_SHFL_DOWN", "CDV_SHFL_XOR"};
  static const char *const votes[] = {"cdv_xballot", "cdv_xany", "cdv_xall"};
  int *a = x->arg, shfl = x->op <= 4;
  /* every thread takes part when none returned and no warp if is around: no record of who did */
  const char *xp = g->ret  ? "cdv_xp"
                   : g->ng ? "(cdv_full ? (const unsigned char *)0 : cdv_xp)" /* see NOTE [full warps] */
                           : "(const unsigned char *)0";
  if (g->ret || g->ng) buf_adds(o, " __builtin_memset(cdv_xp, 0, cdv_nt);");
  fis_open(g, o, x->seg, hdr);
  buf_adds(o, g->ret || g->ng ? " cdv_xp[cdv_t] = 1; cdv_xput(cdv_xs, cdv_xs4, cdv_t, "
                              : " cdv_xput(cdv_xs, cdv_xs4, cdv_t, ");
  buf_adds(o, shfl ? "(" : "(int)((");
  fis_emit(g, o, a[1], a[2] - 1 + (x->nargs == 2), x->seg);
  buf_adds(o, shfl ? "));" : ") != 0));");
  fis_close(g, o, x->seg);
  if (g->wsplit) buf_adds(o, g->wsplit), g->wsplit = NULL; /* see NOTE [warp chains] */
  fis_open(g, o, *cur = x->seg2, hdr);
  fis_line(g, o, x->a, g->fname);
  if (g->wguard) buf_addf(o, " if (!%s)", g->wguard), g->wguard = NULL;
  int priv = 0; /* a declaration whose name lives in a per-thread array: an assignment to it */
  for (int d = 0; x->decl && d < g->nd; d++) priv |= g->d[d].stmt_a == x->a && g->d[d].priv;
  fis_emit(g, o, priv ? x->eq - 1 : x->a, x->call, x->seg2);
  if (shfl) {
    buf_adds(o, " cdv_xshfl<cdv_bare<decltype(");
    fis_emit(g, o, a[1], a[2] - 1, x->seg2);
    buf_addf(o, ")>>(cdv_xs, cdv_xs4, %s, cdv_t, cdv_t32, cdv_nt, %s, (", xp, kinds[x->op - 1]);
  } else {
    buf_addf(o, " %s(cdv_xvote(cdv_xs4, %s, cdv_t, cdv_nt, (", votes[x->op - 5], xp);
  }
  fis_emit(g, o, a[0], a[1] - 1, x->seg2); /* the mask */
  if (shfl) {
    buf_adds(o, "), (");
    fis_emit(g, o, a[2], a[3] - (x->nargs == 4), x->seg2);
    buf_adds(o, "), (");
    if (x->nargs == 4)
      fis_emit(g, o, a[3], a[4], x->seg2);
    else
      buf_adds(o, "32");
  }
  buf_adds(o, shfl ? ")) " : "))) ");
  fis_emit(g, o, x->ce, x->b, x->seg2); /* the rest of the statement: `+ y;` */
  return k + 1;
}

/* The closing parenthesis of the condition of the if that is item k, when it is a fission region's only
 * statement and has no else; -1 when it is not one. */
static int fis_lone_if(fgen *g, int k) {
  const fitem *x = &g->it[k];
  if (!g->nbar || x->kind != 0 || !ftok(g, x->a, "if") || !ftok(g, x->a + 1, "(")) return -1;
  for (int j = 0; j < g->nit; j++) /* the region's only statement */
    if (j != k && ((g->it[j].kind == 0 && g->it[j].seg == x->seg) || (g->it[j].kind == 4 && g->it[j].seg2 == x->seg)))
      return -1;
  int rp = cdv_cpu_skip_parens(g->s, g->t, x->a + 1) - 1;
  return rp + 1 < x->b && stmt_end(g, rp + 1, x->b) == x->b ? rp : -1; /* not with an else */
}

/* NOTE [sparse if]: a region that is one `if (C) S` with no else, whose C compares with == at its top level
 * (no &&, ||, ?:) and reads only threadIdx, blockIdx, blockDim, gridDim, parameters, thread-affine locals,
 * barrier loops' counters (no region writes one) and literals (fis_int_expr: no memory, no call), is taken as
 * few of its threads: `if (lane == 0) ws[w] = v;`,
 * `if (threadIdx.x == 0) out[blockIdx.x] = s[0];`. Each chunk of 32 threads first gathers C of its threads
 * into a mask (a loop GCC vectorises), then runs S for the threads of its set bits only. Evaluating C for
 * all of them before any S is the same as the loop over threads: C has no effect and reads nothing S may
 * write. In reduce_warp of bench/cpu the lane == 0 region was 17% of the kernel's time as a scalar loop over
 * 256 threads. The token of C's closing parenthesis, or -1. */
static int fis_sparse(fgen *g, int k) {
  const fitem *x = &g->it[k];
  int rp = fis_lone_if(g, k), eq = 0;
  if (rp < 0) return -1;
  for (int i = x->a + 2, depth = 0; i < rp; i++) {
    depth += ftok(g, i, "(") + ftok(g, i, "[") - ftok(g, i, ")") - ftok(g, i, "]");
    int glued = i + 1 < rp && g->t->v[i + 1].off == g->t->v[i].off + 1;
    if (depth == 0 && glued && ftok(g, i, "=") && ftok(g, i + 1, "=")) eq = 1;
    if (ftok(g, i, "?") ||
        (glued && ((ftok(g, i, "&") && ftok(g, i + 1, "&")) || (ftok(g, i, "|") && ftok(g, i + 1, "|")))))
      return -1;
  }
  return eq && fis_int_expr(g, x->a + 2, rp, g->nd, 2, g->lp, g->rp, g->lb, g->rb) ? rp : -1;
}

/* NOTE [modulus stride]: a region that is one `if (X % M == 0) S` (or `0 == X % M`) with no else, X threadIdx.x
 * or a thread-affine local set to it alone (of 32 bits or more: it holds the index exactly), M a name, a number
 * or a parenthesised group of one value for the block (fis_int_expr: literals, parameters, blockIdx, blockDim,
 * gridDim, block scalars and barrier loops' counters; no threadIdx), runs its loop over x in steps of M
 * (cdv_mstride: M when it is 1 or more, else 1), from 0: a thread whose X is not a multiple of a positive M
 * does not take the if, and the region holds nothing else. The if stays in the loop's body and decides as
 * written (M of 0 or below, an X % M of a negative M, a step past the block: the threads visited are a superset
 * of those that take it). NVIDIA's reduction kernel 0, `if (tid % (2 * s) == 0) sdata[tid] += sdata[tid + s];`
 * in a barrier loop (reduce_diverge in bench/cpu), visited 256 threads at each of 8 levels where OpenMP's
 * loop visits the 255 that add (2^24 floats on the shared 2-core VM, A/B in turn: 20.5 ms a launch before,
 * 8.0 ms after, OpenMP's loop 6.5 ms). So does `if (lane == 0) S` (or `0 == lane`) with lane such a local set to
 * `X & C`, C a literal 2^n - 1, in steps of C + 1 (the threads whose X & C is 0), or to `X % M`: the idiom after a
 * warp's reduction, `if (lane == 0) ws[w] = v;`, cost reduce_warp of bench/cpu a test per thread of the block
 * (see NOTE [sparse if]), 520 instructions a block of 256 threads under callgrind, of 4435 in all (3475 after). */
static int fis_index_local(fgen *g, int k, int ca);
static int fis_chain_lit(const fgen *g, int i, unsigned long long *v);

/* A literal zero at token i: 0, 0u, 0UL... */
static int fis_zero(const fgen *g, int i) {
  const cdv_tok *v = &g->t->v[i];
  if (v->kind != CDV_T_NUM || g->s[v->off] != '0') return 0;
  for (size_t c = 1; c < v->len; c++)
    if (!strchr("uUlL", g->s[v->off + c])) return 0;
  return 1;
}

/* Is [a, e) threadIdx.x, or a thread-affine local of item k set to threadIdx.x alone (NOTE [modulus stride])? */
static int fis_is_x(fgen *g, int k, int a, int e) {
  if (e == a + 3) return ftok(g, a, "threadIdx") && ftok(g, a + 1, ".") && ftok(g, a + 2, "x");
  int d = e == a + 1 && g->t->v[a].kind == CDV_T_IDENT ? fis_index_local(g, k, a) : -1;
  return d >= 0 && g->d[d].remat && g->d[d].init_b == g->d[d].init_a + 3 &&
         fis_is_x(g, k, g->d[d].init_a, g->d[d].init_b);
}

/* (see NOTE [modulus stride]) The declaration of the local at token i (item k's) when it is thread-affine and set to
 * `X & C` (C a literal 2^n - 1: the lanes of a warp, `lane = t & 31`) or `X % M`, X as fis_is_x takes it; else -1. */
static int fis_lane_local(fgen *g, int k, int i) {
  int d = fis_index_local(g, k, i);
  if (d < 0 || !g->d[d].remat) return -1;
  int a = g->d[d].init_a, e = g->d[d].init_b, op = a + 1 + 2 * ftok(g, a + 1, ".");
  unsigned long long c;
  if (op + 2 != e || !fis_is_x(g, k, a, op)) return -1;
  if (ftok(g, op, "%") && !ftok(g, op + 1, "=")) return d;
  return ftok(g, op, "&") && !ftok(g, op + 1, "&") && !ftok(g, op + 1, "=") && fis_chain_lit(g, op + 1, &c) &&
                 !ftok(g, op + 1, "warpSize") && c < 65536 && !(c & (c + 1))
             ? d
             : -1;
}

/* (see NOTE [modulus stride]) The step of the loop over x for M at [sa, sb): M, or C + 1 where fis_stride took
 * `X & C` (the token before C is its &). */
static void fis_stride_m(fgen *g, buf *o, int sa, int sb, int seg) {
  fis_emit(g, o, sa, sb, seg);
  if (ftok(g, sa - 1, "&")) buf_adds(o, " + 1u");
}

/* (see NOTE [modulus stride]) The first token of M of the region's lone if at item k; *me: the token after M; -1
 * when the if is not one. */
static int fis_stride(fgen *g, int k, int *me) {
  const fitem *x = &g->it[k];
  int rp = g->ng ? -1 : fis_lone_if(g, k), a = x->a + 2, e = rp;
  if (rp < 0 || e - a < 4) return -1;
  if (fis_zero(g, a) && ftok(g, a + 1, "=") && ftok(g, a + 2, "=")) /* 0 == X % M */
    a += 3;
  else if (fis_zero(g, e - 1) && ftok(g, e - 2, "=") && ftok(g, e - 3, "=") && !ftok(g, e - 4, "=")) /* X % M == 0 */
    e -= 3;
  else
    return -1;
  int lane = e == a + 1 && g->t->v[a].kind == CDV_T_IDENT ? fis_lane_local(g, k, a) : -1;
  if (lane >= 0) /* `lane == 0`, lane set to `X & (2^n - 1)` or `X % M` */
    a = g->d[lane].init_a, e = g->d[lane].init_b;
  int pct = a + 1 + 2 * ftok(g, a + 1, ".");
  if (lane >= 0 && ftok(g, pct, "&")) return (*me = e), pct + 1; /* fis_stride_m: M is the literal + 1 */
  if (!ftok(g, pct, "%") || ftok(g, pct + 1, "=") || !fis_is_x(g, k, a, pct)) return -1;
  int ma = pct + 1, mb = ftok(g, ma, "(") ? cdv_cpu_skip_parens(g->s, g->t, ma) : ma + 1;
  if (mb != e || (mb == ma + 1 && g->t->v[ma].kind != CDV_T_IDENT && g->t->v[ma].kind != CDV_T_NUM)) return -1;
  if (!fis_int_expr(g, ma, mb, -1, 1, g->lp, g->rp, g->lb, g->rb)) return -1;
  *me = mb;
  return ma;
}

/* Emit the region of item x in steps of M at [ma, mb) (see NOTE [modulus stride]). */
static void fis_stride_walk(fgen *g, buf *o, const fitem *x, int ma, int mb, int hdr) {
  fis_gap(g, o, x->a);
  fis_loops(g, o, 0, ma, mb, x->seg);
  fis_thread(g, o, hdr, 1);
  buf_addf(o, "{ /* region %d */", x->seg);
  fis_remat_at(g, o, x->seg);
  fis_emit(g, o, x->a, x->b, x->seg);
  buf_addf(o, " } cdv_end%d: __attribute__((unused)); } ", x->seg);
}

/* Emit the sparse if of item x (see NOTE [sparse if]); rp: its condition's closing parenthesis. */
static void fis_sparse_walk(fgen *g, buf *o, const fitem *x, int rp, int hdr) {
  fis_gap(g, o, x->a);
  fis_loops(g, o, 1, -1, -1, x->seg);
  fis_thread(g, o, hdr, 1);
  buf_adds(o, "{");
  fis_remat_at(g, o, x->seg);
  buf_adds(o, " cdv_m |= (unsigned)!!(");
  fis_emit(g, o, x->a + 2, rp, x->seg);
  buf_adds(o,
           ") << (cdv_x - cdv_xw); } } for (; cdv_m; cdv_m &= cdv_m - 1u) { const unsigned cdv_x = cdv_xw + "
           "(unsigned)__builtin_ctz(cdv_m); ");
  fis_thread(g, o, hdr, 0);
  buf_addf(o, "{ /* region %d */", x->seg);
  fis_remat_at(g, o, x->seg);
  fis_emit(g, o, rp + 1, x->b, x->seg);
  buf_addf(o, " } cdv_end%d: __attribute__((unused)); } } ", x->seg);
}

/* NOTE [warp chains]: a loop of warp shuffles whose body is one statement `v op= __shfl_down_sync(FULL, v, o);`
 * (or up or xor, with a width or not) and whose header runs its counter o through constants (`for (int o = 16;
 * o > 0; o >>= 1)`, `o = warpSize / 2`, `o /= 2`, `o *= 2`, ...): the regions of NOTE [warp fission] store and
 * gather every thread's value once per step, two passes over the block each; reduce_warp in bench/cpu spent
 * most of its time there. Such a chain reads and writes nothing but v, so when every warp of the block is whole
 * and takes part (a block of a multiple of 32 threads, no thread returned, and the warp ifs around either take
 * a whole warp or none of it), each warp's 32 values are loaded once, the steps run on them with the offsets
 * written out (cdv_wstep in the prelude: each lane combines with the lane its shuffle reads, or with its own
 * value where CUDA gives it its own, in the order `v op= operand` does), and they are stored once. Every lane
 * gets the value it gets on the fibers and on the GPU, bit for bit: no lane's result is dropped, so what the
 * kernel reads after the chain need not be known. Otherwise (a partial warp, a lane that left) the loop runs
 * as NOTE [warp fission] writes it. The mask must be a literal full mask; anything else keeps that path too.
 * The same chain written out by hand, statements one after the other with constant offsets (`v += __shfl_down_sync(
 * ~0u, v, 16); v += __shfl_down_sync(~0u, v, 8); ...`, the same value, operator, kind and width), is taken the
 * same way; where the block is not fit, the statements run as NOTE [warp fission] writes them, the last one's
 * statement skipped where the chain ran (its region goes on with the statements after it: fis_chain_written). */
typedef struct fchain {
  int v; /* the value's token */
  int opa, opb; /* the operator of its compound assignment, without '=': tokens [opa, opb) */
  int kind; /* CDV_SHFL_UP, _DOWN or _XOR of the prelude: 1, 2, 3 */
  int width, n, off[32]; /* the shuffle's width; the counter's values, one a step */
} fchain;

/* A literal at token i (decimal, hex or octal, with u and l suffixes) or warpSize: 1 and *v when it is one. */
static int fis_chain_lit(const fgen *g, int i, unsigned long long *v) {
  const cdv_tok *k = &g->t->v[i];
  char t[32], *end;
  if (ftok(g, i, "warpSize")) return *v = 32, 1;
  if (k->kind != CDV_T_NUM || k->len >= sizeof t) return 0;
  memcpy(t, g->s + k->off, k->len), t[k->len] = 0;
  errno = 0;
  *v = strtoull(t, &end, 0);
  return end != t && !errno && strspn(end, "uUlL") == strlen(end);
}

/* A constant [a, b) in [0, 2^31): a literal, or two joined by /, *, << or >> (`warpSize / 2`); 1 and *v. */
static int fis_chain_num(const fgen *g, int a, int b, long long *v) {
  unsigned long long x, y;
  if (b <= a || !fis_chain_lit(g, a, &x) || x > INT_MAX) return 0;
  if (b == a + 1) return *v = (long long)x, 1;
  if (!fis_chain_lit(g, b - 1, &y) || y > INT_MAX) return 0;
  int two = b == a + 4 && g->t->v[a + 2].off == g->t->v[a + 1].off + 1;
  if (b == a + 3 && ftok(g, a + 1, "/") && y)
    x /= y;
  else if (b == a + 3 && ftok(g, a + 1, "*"))
    x *= y;
  else if (two && ftok(g, a + 1, ">") && ftok(g, a + 2, ">") && y < 32)
    x >>= y;
  else if (two && ftok(g, a + 1, "<") && ftok(g, a + 2, "<") && y < 32)
    x <<= y;
  else
    return 0;
  return x <= INT_MAX ? (*v = (long long)x, 1) : 0;
}

/* The operator of [a, b), glued punctuation only, as a string in op (at most 3 characters); 1 when it is one. */
static int fis_chain_op(const fgen *g, int a, int b, char op[4]) {
  if (b <= a || b - a > 3) return 0;
  for (int i = a; i < b; i++) {
    if (g->t->v[i].kind != CDV_T_PUNCT || g->t->v[i].len != 1 || (i > a && g->t->v[i].off != g->t->v[i - 1].off + 1))
      return 0;
    op[i - a] = g->s[g->t->v[i].off];
  }
  op[b - a] = 0;
  return 1;
}

/* The next value of the counter for the step `O op= n` or `O = O op n` at [a, b) (O at a); -1 when it is not one. */
static long long fis_chain_step(const fgen *g, int a, int b, long long o) {
  int eq = a + 1;
  while (eq < b && !ftok(g, eq, "=")) eq++;
  char op[4];
  long long n;
  if (eq >= b) return -1;
  if (eq == a + 1) { /* O = O op n */
    int e = a + 3;
    while (e < b && g->t->v[e].kind == CDV_T_PUNCT) e++;
    if (!same_tok(g, a, a + 2) || !fis_chain_op(g, a + 3, e, op) || !fis_chain_num(g, e, b, &n)) return -1;
  } else if (!fis_chain_op(g, a + 1, eq, op) || !fis_chain_num(g, eq + 1, b, &n)) {
    return -1;
  }
  if (!strcmp(op, "/") && n) return o / n;
  if (!strcmp(op, "*") && o * n <= INT_MAX) return o * n;
  if (!strcmp(op, ">>") && n < 32) return o >> n;
  if (!strcmp(op, "<<") && n < 32 && (o << n) <= INT_MAX) return o << n;
  return -1;
}

/* Does `o rel n` hold? rel: the operator's text. */
static int fis_chain_holds(const char *rel, long long o, long long n) {
  return !strcmp(rel, ">")    ? o > n
         : !strcmp(rel, ">=") ? o >= n
         : !strcmp(rel, "<")  ? o < n
         : !strcmp(rel, "<=") ? o <= n
                              : o != n;
}

/* The counter's token and values of the header of loop x, `for (T O = init; O rel n; step)`, into c; -1 when it
 * is not of that shape, runs no step or more than 32. */
static int fis_chain_header(const fgen *g, const fitem *x, fchain *c) {
  int s1 = x->hdr_a, s2, p = x->hdr_a, e;
  while (s1 < x->hdr_b && !ftok(g, s1, ";")) s1++;
  for (s2 = s1 + 1; s2 < x->hdr_b && !ftok(g, s2, ";");) s2++;
  while (p < s1 && !ftok(g, p, "=")) p++;
  if (s2 >= x->hdr_b || p >= s1 || p - 1 <= x->hdr_a) return -1;
  for (int i = x->hdr_a; i < p; i++)
    if (g->t->v[i].kind != CDV_T_IDENT) return -1; /* a declaration: the counter is not read after the loop */
  int o = p - 1;
  long long v, n;
  char rel[4];
  for (e = s1 + 2; e < s2 && g->t->v[e].kind == CDV_T_PUNCT;) e++;
  if (!fis_chain_num(g, p + 1, s1, &v) || !same_tok(g, s1 + 1, o) || !fis_chain_op(g, s1 + 2, e, rel) ||
      !fis_chain_num(g, e, s2, &n) || !same_tok(g, s2 + 1, o))
    return -1;
  if (strcmp(rel, ">") && strcmp(rel, ">=") && strcmp(rel, "<") && strcmp(rel, "<=") && strcmp(rel, "!=")) return -1;
  for (c->n = 0; fis_chain_holds(rel, v, n);) {
    if (c->n == 32) return -1;
    c->off[c->n++] = (int)v;
    if ((v = fis_chain_step(g, s2 + 1, x->hdr_b, v)) < 0) return -1;
  }
  return c->n ? o : -1;
}

/* Is the mask [a, b) a literal full mask: 0xffffffff (any suffix), ~0 or -1? */
static int fis_chain_full(const fgen *g, int a, int b) {
  unsigned long long m;
  if (b == a + 1) return fis_chain_lit(g, a, &m) && m == 0xffffffffull && !ftok(g, a, "warpSize");
  return b == a + 2 && fis_chain_lit(g, a + 1, &m) && !ftok(g, a + 1, "warpSize") &&
         ((ftok(g, a, "~") && m == 0) || (ftok(g, a, "-") && m == 1));
}

/* Is the name at i a per-thread scalar, written name[cdv_t] in regions (fis_emit's rule)? */
static int fis_chain_scalar(const fgen *g, int i) {
  int pv = 0;
  for (int d = 0; d < g->nd; d++) {
    if (!same_tok(g, i, g->d[d].name)) continue;
    if (ftok(g, g->d[d].name + 1, "[")) return 0;
    pv |= g->d[d].priv && !g->d[d].remat && !g->d[d].bsc;
  }
  return pv;
}

/* Is warp operation y a step of a chain (NOTE [warp chains]): `v op= __shfl_K_sync(full mask, v, O[, w]);`, O the
 * token o (a loop's counter), or a constant when o < 0 (its value in *off)? Its parts in c when it is. */
static int fis_chain_shfl(const fgen *g, const fitem *y, int o, fchain *c, long long *off) {
  if (y->kind != 4 || y->decl || y->op < 2 || y->op > 4) return 0;
  const int *a = y->arg, call = y->call;
  c->v = y->a, c->opa = y->eq, c->opb = call - 1, c->kind = y->op - 1, c->width = 32;
  if (!same_tok(g, c->v, y->a) || (o >= 0 && same_tok(g, c->v, o)) || y->eq != y->a + 1 || !ftok(g, call - 1, "=") ||
      c->opb <= c->opa || !ftok(g, y->ce, ";") || y->ce + 1 != y->b || !fis_chain_scalar(g, c->v))
    return 0;
  char op[4];
  long long w = 32;
  int oe = y->nargs == 4 ? a[3] - 1 : a[3];
  if (!fis_chain_op(g, c->opa, call, op) || !fis_chain_full(g, a[0], a[1] - 1) || a[2] - 1 != a[1] + 1 ||
      !same_tok(g, a[1], c->v) ||
      (o >= 0 ? oe != a[2] + 1 || !same_tok(g, a[2], o) : !fis_chain_num(g, a[2], oe, off)) ||
      (y->nargs == 4 && (!fis_chain_num(g, a[3], a[4], &w) || w < 1 || w > 32 || (w & (w - 1)))))
    return 0;
  c->width = (int)w;
  return 1;
}

/* Is loop item k a warp chain (NOTE [warp chains])? Its parts in c when it is. */
static int fis_chain(const fgen *g, int k, fchain *c) {
  const fitem *x = &g->it[k];
  if (g->ret || x->kind != 2 || x->dow || !ftok(g, x->kw, "for") || x->b != k + 2) return 0;
  int o = fis_chain_header(g, x, c);
  return o >= 0 && fis_chain_shfl(g, &g->it[k + 1], o, c, NULL);
}

/* The number of warp operations from item k on (before item to) that are a chain written out by hand, at least
 * 2 (`v += __shfl_down_sync(~0u, v, 16); v += __shfl_down_sync(~0u, v, 8); ...`: NOTE [warp chains]), its parts
 * in c; 0 when they are not. */
static int fis_chain_run(const fgen *g, int k, int to, fchain *c) {
  int n = 0;
  long long off;
  fchain d;
  for (; !g->ret && k + n < to && n < 32 && fis_chain_shfl(g, &g->it[k + n], -1, n ? &d : c, &off); n++) {
    if (n && (!same_tok(g, d.v, c->v) || d.kind != c->kind || d.width != c->width || d.opb - d.opa != c->opb - c->opa))
      break;
    for (int i = 0; n && i < d.opb - d.opa; i++) /* the same operator (fis_chain_op: one character a token) */
      if (g->s[g->t->v[d.opa + i].off] != g->s[g->t->v[c->opa + i].off]) return n > 1 ? n : 0;
    c->off[n] = (int)off, c->n = n + 1;
  }
  return n > 1 ? n : 0;
}

/* NOTE [dead lanes]: a chain (NOTE [warp chains]) computes every lane, but after a warp's reduction only lane 0's
 * value is read (`if (lane == 0) ws[w] = v;`), and a tree down by 16, 8, 4, 2, 1 needs 16 + 8 + 4 + 2 + 1 of its
 * 5 x 32 operations for that lane. fis_chain_live reads the kernel after the chain: when every read of v there
 * sits in the S of `if (L == 0) S` (L a local fis_lane_local takes, set to `threadIdx.x & C` or `% M` with C + 1 or M a
 * power of two, or such an expression itself, `(threadIdx.x & 31) == 0`: the lanes whose x is a multiple of it, in
 * blocks whose x is a multiple of 32; an else is read as the rest is) or follows a whole statement `v = e;` (e not
 * reading v) in the same braces or braces inside them (those threads gave v a new value; one at the chain's own level
 * gives it for every thread that ran the chain), the steps are written backwards from those lanes: each step updates
 * the lanes a later step or a read needs (cdv_wstep's mask), and only the lanes read are stored back (cdv_wstore); the
 * others hold values nobody reads. Not in a barrier loop or if (the chain runs again, and reads before it count), nor
 * with v's address taken or a reference bound to it, or a case label or goto in the kernel; blocks whose x is not a
 * multiple of 32 run every lane. A lane read gets what it gets on the GPU, in the same order. reduce_warp of bench/cpu
 * under callgrind (2^16 floats, one thread): 3727 instructions a block of 256 threads before, 2832 after (GCC
 * vectorised the loop over the warps, lane i of 8 warps a vector, so the 32 lanes' loads and stores were the cost); on
 * 2 cores, A/B in turn: 4.1-4.8 ms a launch of 2^24 floats before, 3.5 after (OpenMP 2.1). */

/* The lane a step of kind (1 up, 2 down, 3 xor) by b reads for lane i, its own where CUDA gives it its own: the
 * rule of cdv_wsrc in the prelude, for the masks of NOTE [dead lanes]. */
static int fis_chain_src(int kind, int i, int b, int w) {
  if (kind == 1) return (i & (w - 1)) >= b ? i - b : i;
  if (kind == 2) return (i & (w - 1)) + b < w ? i + b : i;
  return ((i ^ b) & ~(w - 1)) > (i & ~(w - 1)) ? i : i ^ b;
}

/* (see NOTE [dead lanes]) The lanes for which `if (L == 0)` at token i holds, when it is one; *e: the end of its
 * statement (without its else). 0 when not. L: a local fis_lane_local takes, or what such a local may be set to
 * (`(threadIdx.x & 31) == 0`, `t % 32 == 0`), with a literal C or M. */
static unsigned fis_lane0_if(fgen *g, int k, int i, int *e) {
  if (!ftok(g, i, "if") || !ftok(g, i + 1, "(")) return 0;
  int rp = cdv_cpu_skip_parens(g->s, g->t, i + 1) - 1, a = i + 2, b = rp;
  if (b - a < 4) return 0;
  if (fis_zero(g, a) && ftok(g, a + 1, "=") && ftok(g, a + 2, "=")) /* 0 == L */
    a += 3;
  else if (fis_zero(g, b - 1) && ftok(g, b - 2, "=") && ftok(g, b - 3, "=") && !ftok(g, b - 4, "=")) /* L == 0 */
    b -= 3;
  else
    return 0;
  if (ftok(g, a, "(") && cdv_cpu_skip_parens(g->s, g->t, a) == b) a++, b--; /* (X & C) */
  int d = b == a + 1 && g->t->v[a].kind == CDV_T_IDENT ? fis_lane_local(g, k, a) : -1;
  if (d >= 0) a = g->d[d].init_a, b = g->d[d].init_b;
  int op = a + 1 + 2 * ftok(g, a + 1, ".");
  unsigned long long m;
  if (op + 2 != b || !fis_is_x(g, k, a, op) || !(ftok(g, op, "&") || ftok(g, op, "%")) || ftok(g, op + 1, "=") ||
      ftok(g, op + 1, "&") || !fis_chain_lit(g, op + 1, &m))
    return 0;
  m += ftok(g, op, "&");
  if (!m || (m & (m - 1))) return 0;
  if ((*e = stmt_end(g, rp + 1, g->rb)) < 0) return 0; /* an else is read on as the rest of the kernel is */
  unsigned lanes = 0;
  for (unsigned j = 0; j < 32; j++) lanes |= (unsigned)(j % (m < 32 ? m : 32) == 0) << j;
  return lanes;
}

/* (see NOTE [dead lanes]) Is the name v at i, after loop item k, where it is written whole (`v = e;` at the start
 * of a statement, e not reading v)? The statement's end when it is, else -1. */
static int fis_chain_kill(fgen *g, int i, int v) {
  if (!(ftok(g, i - 1, ";") || ftok(g, i - 1, "{") || ftok(g, i - 1, "}")) || !ftok(g, i + 1, "=") ||
      !fis_assigns(g, i + 1))
    return -1;
  int e = stmt_end(g, i, g->rb);
  for (int j = i + 2; e > 0 && j < e; j++)
    if (same_tok(g, j, v)) return -1;
  return e;
}

/* (see NOTE [dead lanes]) The lanes of v, the value of the chain at item k (a loop, or the first of the chain's
 * statements), that the kernel reads from token from on; ~0u when every lane's may be. */
static unsigned fis_chain_live(fgen *g, int k, int v, int from) {
  for (int j = 0; j < k; j++)
    if (g->it[j].kind == 2 && g->it[j].b > k) return ~0u; /* in a barrier loop or if */
  for (int i = g->lb + 1; i < g->rb; i++)
    if ((same_tok(g, i, v) && (ftok(g, i - 1, "&") || (ftok(g, i - 1, "=") && ftok(g, i - 3, "&")))) ||
        ftok(g, i, "case") || ftok(g, i, "default") || ftok(g, i, "goto"))
      return ~0u; /* its address, a reference to it, a jump into a block */
  unsigned live = 0;
  unsigned char killed[64] = {0};
  int depth = 0, par = 0;
  for (int i = from, e; i < g->rb; i++) {
    par += ftok(g, i, "(") - ftok(g, i, ")");
    if (ftok(g, i, "{") && ++depth == 64) return ~0u;
    if (ftok(g, i, "{")) killed[depth] = killed[depth - 1];
    if (ftok(g, i, "}")) depth = depth > 0 ? depth - 1 : (killed[0] = 0); /* out of the chain's braces */
    unsigned lanes = fis_lane0_if(g, k, i, &e);
    if (lanes) {
      live |= lanes, i = e - 1;
    } else if (same_tok(g, i, v) && !fis_member(g, i) && !killed[depth]) {
      if (par || (e = fis_chain_kill(g, i, v)) < 0) return ~0u;
      if (depth == 0) return live; /* every thread that ran the chain */
      killed[depth] = 1, i = e - 1;
    }
  }
  return live;
}

/* (see NOTE [warp chains]) The chain c, whose first item is k and after which the kernel goes on at token from,
 * on whole warps: `bool wq = <the block is fit>; if (wq) { ... }`. */
static void fis_chain_fast(fgen *g, buf *o, const fchain *cp, int k, int from, const char *wq) {
  const fchain c = *cp;
  const fitem *y = &g->it[k + (g->it[k].kind == 2)]; /* the (first) warp operation */
  buf_addf(o, " bool %s = !(cdv_nt & 31u);", wq);
  if (g->ng) /* each warp if takes a whole warp or none of it */
    buf_addf(o, " for (unsigned long cdv_wb = 0; %s && cdv_wb < cdv_nt; cdv_wb += 32u) %s = true", wq, wq);
  for (int j = 0; j < g->ng; j++)
    buf_addf(o, " && (!cdv_fany(cdv_fl%d, cdv_wb, 32u, %d) || cdv_fall(cdv_fl%d, cdv_wb, %d))", g->guard[j],
             !g->gneg[j], g->guard[j], !g->gneg[j]);
  buf_adds(o, g->ng ? ";" : "");
  buf_addf(o, " if (%s) { for (unsigned long cdv_wb = 0; cdv_wb < cdv_nt; cdv_wb += 32u) {", wq);
  for (int j = 0; j < g->ng; j++)
    buf_addf(o, "%scdv_fall(cdv_fl%d, cdv_wb, %d)%s", j ? " && " : " if (!(", g->guard[j], !g->gneg[j],
             j + 1 == g->ng ? ")) continue;" : "");
  buf_adds(o, " const unsigned long cdv_t = cdv_wb; auto *const cdv_wv = &(");
  fis_emit(g, o, c.v, c.v + 1, y->seg);
  buf_adds(o,
           "); cdv_bare<decltype(*cdv_wv)> cdv_wa[32]; __builtin_memcpy(cdv_wa, cdv_wv, sizeof cdv_wa); const auto "
           "cdv_wf = [](auto &cdv_l, const auto cdv_r) { cdv_l ");
  fis_emit(g, o, c.opa, c.opb + 1, -2);
  buf_adds(o, " cdv_r; };");
  static const char *const kinds[] = {"", "CDV_SHFL_UP", "CDV_SHFL_DOWN", "CDV_SHFL_XOR"};
  unsigned need[32] = {0}, live = fis_chain_live(g, k, c.v, from);
  for (int j = c.n - 1; j >= 0; j--) { /* the lanes each step must update (NOTE [dead lanes]) */
    need[j] = live;
    for (int i = 0; i < 32; i++)
      if (need[j] >> i & 1u) live |= 1u << fis_chain_src(c.kind, i, c.off[j] & 31, c.width);
  }
  if (need[c.n - 1] != ~0u) buf_adds(o, " if (!(cdv_bdim.x & 31u)) {");
  for (int j = 0; need[c.n - 1] != ~0u && j < c.n; j++)
    buf_addf(o, " cdv_wstep<%s, %d, %d, 0x%xu>(cdv_wa, cdv_wf);", kinds[c.kind], c.off[j] & 31, c.width, need[j]);
  if (need[c.n - 1] != ~0u) buf_addf(o, " cdv_wstore<0x%xu>(cdv_wv, cdv_wa); } else {", need[c.n - 1]);
  for (int j = 0; j < c.n; j++)
    buf_addf(o, " cdv_wstep<%s, %d, %d>(cdv_wa, cdv_wf);", kinds[c.kind], c.off[j] & 31, c.width);
  buf_adds(o, " __builtin_memcpy(cdv_wv, cdv_wa, sizeof cdv_wa);");
  buf_adds(o, need[c.n - 1] != ~0u ? " }" : "");
  buf_adds(o, " } }");
}

/* (see NOTE [warp chains]) Before the loop item k as fis_walk writes it: when it is a chain, the chain's steps
 * on whole warps, under a test of the block, and `else` before the loop; 1 when written (the caller closes the
 * brace after the loop). */
static int fis_chain_open(fgen *g, buf *o, int k) {
  fchain c;
  if (!fis_chain(g, k, &c)) return 0;
  const fitem *x = &g->it[k];
  buf_adds(o, " {");
  fis_chain_fast(g, o, &c, k, x->neg ? g->it[k + 1].b : x->a + 1, "cdv_wq");
  buf_adds(o, " else");
  return 1;
}

/* (see NOTE [warp chains]) A chain written out by hand from warp operation k (n of them, fis_chain_run): on
 * whole warps under the block's test, else as NOTE [warp fission] writes them, the last one's statement skipped
 * where the chain ran (its region goes on with the statements after it). The index of the last item. */
static int fis_chain_written(fgen *g, buf *o, int k, int n, const fchain *c, int hdr, int *cur) {
  char wq[32];
  snprintf(wq, sizeof wq, "cdv_wq%d", k);
  fis_chain_fast(g, o, c, k, g->it[k + n - 1].b, wq);
  buf_adds(o, " else {");
  for (int j = 0; j < n - 1; j++) {
    fis_warp_walk(g, o, k + j, hdr, cur);
    fis_close(g, o, *cur), *cur = -1;
  }
  g->wsplit = " }", g->wguard = wq; /* the else ends between the last one's two regions */
  fis_warp_walk(g, o, k + n - 1, hdr, cur);
  return k + n;
}

/* Emit items [from, to) of one sequence. */
static void fis_walk(fgen *g, buf *o, int from, int to, int hdr) {
  int cur = -1;
  for (int k = from; k < to;) {
    fitem *x = &g->it[k];
    if (x->kind == 0 && g->seg_bsc[x->seg]) { /* once for the block (see NOTE [block scalars]) */
      if (cur >= 0) fis_close(g, o, cur), cur = -1;
      fis_gap(g, o, x->a);
      int decl = 0;
      for (int d = 0; d < g->nd; d++) decl |= g->d[d].stmt_a == x->a;
      if (decl)
        fis_emit_assign(g, o, x->a, x->b, x->seg), fis_newlines(g, o, x->a, x->b);
      else
        fis_emit(g, o, x->a, x->b, x->seg);
      k++;
      continue;
    }
    int mb = 0, ma = x->kind == 0 && cur < 0 ? fis_stride(g, k, &mb) : -1;
    if (ma > 0) {
      fis_stride_walk(g, o, x, ma, mb, hdr);
      k++;
      continue;
    }
    int rp = x->kind == 0 && cur < 0 ? fis_sparse(g, k) : -1;
    if (rp > 0) {
      fis_sparse_walk(g, o, x, rp, hdr);
      k++;
      continue;
    }
    if (x->kind == 0) {
      if (cur < 0) fis_open(g, o, cur = x->seg, hdr);
      if (fis_loose_item(g, k)) { /* written before the region's loop (see NOTE [loose counters]) */
        fis_gap(g, o, x->a);
        fis_newlines(g, o, x->a, x->b);
        k++;
        continue;
      }
      int hoist = 0, priv = 0;
      for (int d = 0; d < g->nd; d++)
        if (g->d[d].stmt_a == x->a) hoist |= g->d[d].hoist, priv |= g->d[d].priv;
      fis_gap(g, o, x->a);
      if (hoist)
        fis_newlines(g, o, x->a, x->b);
      else if (priv)
        fis_emit_assign(g, o, x->a, x->b, x->seg), fis_newlines(g, o, x->a, x->b);
      else
        fis_emit(g, o, x->a, x->b, x->seg);
      if (ftok(g, x->a, "#")) /* a #pragma's line ends here, not at the region's closing brace after it */
        fis_line(g, o, x->a, g->fname);
      k++;
      continue;
    }
    if (cur >= 0) fis_close(g, o, cur), cur = -1;
    fchain ch;
    int run = x->kind == 4 ? fis_chain_run(g, k, to, &ch) : 0;
    if (run) { /* see NOTE [warp chains] */
      k = fis_chain_written(g, o, k, run, &ch, hdr, &cur);
      continue;
    }
    if (x->kind == 3 || x->kind == 4) {
      k = fis_warp_walk(g, o, k, hdr, &cur);
      continue;
    }
    if (x->kind == 1) {
      fis_gap(g, o, x->a);
      fis_newlines(g, o, x->a, x->b);
      k++;
    } else {
      int chain = fis_chain_open(g, o, k); /* see NOTE [warp chains] */
      fis_gap(g, o, x->kw);
      if (x->dow)
        buf_adds(o, "do {");
      else
        fis_emit(g, o, x->kw, x->hdr_b + 2 - x->neg, -2); /* for ( header ) {, if ( C ) {, else { */
      if (x->neg) buf_adds(o, " {");
      fis_walk(g, o, k + 1, x->b, hdr);
      if (!x->neg) fis_gap(g, o, x->a);
      buf_adds(o, "}");
      if (x->dow) buf_adds(o, " while ("), fis_emit(g, o, x->hdr_a, x->hdr_b, -2), buf_adds(o, ");");
      if (chain) buf_adds(o, " }");
      k = x->b;
    }
  }
  if (cur >= 0) fis_close(g, o, cur);
}

/* NOTE [uniform guard]: most barrier-free kernels begin `int i = blockIdx.x * blockDim.x + threadIdx.x;
 * if (i < n) ...` (or `if (i >= n) return;`). In the simd function's thread loop that guard becomes masked
 * loads and stores (AVX2's vmaskmov), which made saxpy's block 4x slower than the same loop without it on
 * AMD EPYC (14 against 3.9 ms over 2^24 floats), and GCC 12 does not split the loop at the condition itself.
 * But the guard has one value for every thread of all blocks but the last. So when a simd kernel's first
 * statement that is not a declaration is an `if` whose condition, and the declarations before it, have no
 * side effects (no assignment but a declarator's, no ++ or --, no call, no volatile, no braces), a first
 * loop over the block's threads evaluates the declarations and the condition only; when the condition held
 * for every thread the block runs the body with the if's statement unguarded, when for none with its else
 * (or nothing), and otherwise the body as written. Each thread still executes what CUDA would (the first
 * loop only reads what the thread reads anyway before the if). Bodies over FIS_GUARD_TOKENS tokens are not
 * copied (compile time). */
#define FIS_GUARD_TOKENS 4000

/* Is '=' at token i an assignment (not part of ==, !=, <=, >=)? */
static int fis_assigns(const fgen *g, int i) {
  const cdv_tok *v = g->t->v;
  int glued_prev = i > 0 && v[i - 1].off + v[i - 1].len == v[i].off;
  if (i + 1 < g->t->n && v[i].off + 1 == v[i + 1].off && ftok(g, i + 1, "=")) return 0; /* == */
  if (!glued_prev) return 1;
  if (ftok(g, i - 1, "=") || ftok(g, i - 1, "!")) return 0;
  if (ftok(g, i - 1, "<") || ftok(g, i - 1, ">")) /* <= and >=, but <<= and >>= assign */
    return i > 1 && v[i - 2].off + 1 == v[i - 1].off && same_tok(g, i - 2, i - 1);
  return 1;
}

static const char *const fis_impure[] = {"volatile", "new",    "delete",     "throw",        "asm",
                                         "__asm__",  "static", "__shared__", "thread_local", "extern",
                                         "return",   "goto",   "co_await",   "operator",     NULL};

/* Are tokens [a, b) free of side effects? decl: the item is a declaration whose declarators' '=' are allowed. */
static int fis_pure(const fgen *g, int a, int b, int decl) {
  const cdv_tok *v = g->t->v;
  for (int i = a; i < b; i++) {
    if (v[i].kind == CDV_T_IDENT && cdv_cpu_word_of(g->s, &v[i], fis_impure)) return 0;
    if (ftok(g, i, "{") || ftok(g, i, "}")) return 0;
    if ((ftok(g, i, "+") || ftok(g, i, "-")) && i + 1 < b && v[i].off + 1 == v[i + 1].off && same_tok(g, i, i + 1))
      return 0; /* ++ or -- */
    if (ftok(g, i, "(") && i > a &&
        (v[i - 1].kind == CDV_T_IDENT || ftok(g, i - 1, ">") || ftok(g, i - 1, ")") || ftok(g, i - 1, "]")))
      return 0; /* a call (or a function-style cast: refused alike) */
    if (ftok(g, i, "=") && fis_assigns(g, i)) {
      int own = 0;
      for (int d = 0; decl && d < g->nd && !own; d++) own = g->d[d].stmt_a == a && g->d[d].name + 1 == i;
      if (!own) return 0;
    }
  }
  return 1;
}

static void fis_line(fgen *g, buf *o, int i, const char *fname) {
  buf_addf(o, "\n#line %d ", g->t->v[i].line);
  cdv_cpu_add_cstring(o, fname);
  buf_adds(o, "\n");
}

/* Items [from, to) of the simd body as region seg, each under its own #line. */
static void fis_items(fgen *g, buf *o, int from, int to, int seg, const char *fname) {
  for (int k = from; k < to; k++) fis_line(g, o, g->it[k].a, fname), fis_emit(g, o, g->it[k].a, g->it[k].b, seg);
}

/* NOTE [monotone guard]: the first loop of NOTE [uniform guard] evaluates the guard for every thread of every
 * block: in the README's saxpy (`size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; if (i < n) ...`)
 * that loop of 64-bit compares was a third of the kernel's time on one core (14.2 ms a launch of 2^24 floats
 * against 9.6 ms without it), and it is why the size_t index cost more than the int one (the 32-bit loop is
 * cheaper, but not free). When the guard is `i OP E` (OP one of < <= > >=) with E of literals, integer
 * parameters, blockIdx, blockDim and gridDim only (fis_int_expr: one value for the block), and i a local of
 * an integer type declared before it as `U + threadIdx.x` or `threadIdx.x + U` (terms joined by + and - at
 * the top level, U without threadIdx), the guard is monotone in threadIdx.x: two probes, the block's first
 * and last x, tell whether it holds for all threads or none. The probes also check that i did not wrap or
 * change sign over the block (i at the last x is exactly i at the first plus blockDim.x - 1, both of one sign,
 * so a conversion for the comparison keeps the order); when it did, the loop over every thread decides as
 * before. The i of y and z is that of x (U names no threadIdx). */
static const char *const fis_index_words[] = {"const",    "unsigned",  "signed",    "int",     "long",
                                              "size_t",   "ptrdiff_t", "int32_t",   "int64_t", "uint32_t",
                                              "uint64_t", "intptr_t",  "uintptr_t", "uint",    NULL};

/* The declaration of the local named at token ca, declared once, before item k, with an initialiser, as a
 * scalar of an integer type of 32 bits or more (fis_index_words: no char or short, which would wrap a thread's
 * index); -1 when it is not one. Sets its init_a and init_b. */
static int fis_index_local(fgen *g, int k, int ca) {
  int d = -1;
  for (int j = 0; j < g->nd; j++)
    if (same_tok(g, ca, g->d[j].name) && g->d[j].stmt_a < g->it[k].a) d = j;
  if (d < 0 || !ftok(g, g->d[d].name + 1, "=") || ftok(g, g->d[d].name - 1, "*") || ftok(g, g->d[d].name - 1, "&"))
    return -1;
  for (int j = 0; j < g->nd; j++) /* declared once */
    if (j != d && same_tok(g, ca, g->d[j].name)) return -1;
  int first = g->d[d].name;
  for (int j = 0; j < g->nd; j++)
    if (g->d[j].stmt_a == g->d[d].stmt_a && g->d[j].name < first) first = g->d[j].name;
  while (first > g->d[d].stmt_a && (ftok(g, first - 1, "*") || ftok(g, first - 1, "&"))) first--;
  for (int i = g->d[d].stmt_a; i < first; i++)
    if (g->t->v[i].kind != CDV_T_IDENT || !cdv_cpu_word_of(g->s, &g->t->v[i], fis_index_words)) return -1;
  g->d[d].init_a = g->d[d].name + 2, g->d[d].init_b = fis_decl_end(g, g->d[d].name, g->d[d].stmt_b);
  return d;
}

/* Is [a, e) `U + threadIdx.x` or `threadIdx.x + U` with U of one value for the block (NOTE [monotone guard])? */
static int fis_affine_x(fgen *g, int a, int e) {
  int tx = -1;
  for (int i = a, d = 0; i < e; i++) {
    d += ftok(g, i, "(") + ftok(g, i, "[") - ftok(g, i, ")") - ftok(g, i, "]");
    if (ftok(g, i, "threadIdx")) {
      if (tx >= 0 || d != 0) return 0;
      tx = i;
    }
    if (d == 0 && g->t->v[i].kind == CDV_T_PUNCT && !ftok(g, i, "+") && !ftok(g, i, "-") && !ftok(g, i, "*") &&
        !ftok(g, i, "/") && !ftok(g, i, "%") && !ftok(g, i, ".") && !ftok(g, i, "(") && !ftok(g, i, ")"))
      return 0;
  }
  if (tx < 0 || !ftok(g, tx + 1, ".") || !ftok(g, tx + 2, "x")) return 0;
  int after = tx + 3;
  if (after < e && !ftok(g, after, "+") && !ftok(g, after, "-")) return 0;
  if (tx > a && !(ftok(g, tx - 1, "+") && tx - 1 > a &&
                  (g->t->v[tx - 2].kind != CDV_T_PUNCT || ftok(g, tx - 2, ")") || ftok(g, tx - 2, "]"))))
    return 0;
  return (tx == a || fis_int_expr(g, a, tx - 1, -1, 1, g->lp, g->rp, g->lb, g->rb)) &&
         (after == e || fis_int_expr(g, after + 1, e, -1, 1, g->lp, g->rp, g->lb, g->rb));
}

/* The declaration (before item k) of the guard `i OP E` at [ca, cb) (NOTE [monotone guard]); -1 when the guard
 * is not one. *le: OP is < or <= (the guard holds for the first threads). */
static int fis_mono_guard(fgen *g, int k, int ca, int cb, int *le) {
  int op = ca + 1;
  *le = ftok(g, op, "<");
  if (!(*le || ftok(g, op, ">")) || ftok(g, op + 1, "<") || ftok(g, op + 1, ">")) return -1;
  int e0 = op + 1 + ftok(g, op + 1, "=");
  if (e0 >= cb || !fis_int_expr(g, e0, cb, -1, 1, g->lp, g->rp, g->lb, g->rb)) return -1;
  int d = fis_index_local(g, k, ca);
  return d >= 0 && fis_affine_x(g, g->d[d].init_a, g->d[d].init_b) ? d : -1;
}

/* (see NOTE [monotone guard]) The probes: i and the guard at the block's first and last x; cdv_mono when they
 * decide. */
static void fis_mono_probe(fgen *g, buf *o, int d, int ca, int cb, int le) {
  const cdv_tok *nm = &g->t->v[g->d[d].name];
  buf_adds(o, " { const uint3 cdv_tix = {0u, 0u, 0u}; (void)cdv_tix;");
  fis_remat_decl(g, o, d, -3);
  buf_addf(o, "const auto cdv_i0 = %.*s; const bool cdv_g0 = (", (int)nm->len, g->o + nm->off);
  fis_emit_line(g, o, ca, cb, -3);
  buf_adds(o, "); { const uint3 cdv_tix = {cdv_bdim.x - 1u, 0u, 0u}; (void)cdv_tix;");
  fis_remat_decl(g, o, d, -3);
  buf_adds(o, "const bool cdv_g1 = (");
  fis_emit_line(g, o, ca, cb, -3);
  buf_addf(o,
           "); if ((unsigned long long)(long long)%.*s - (unsigned long long)(long long)cdv_i0 == cdv_bdim.x - 1ull && "
           "(cdv_i0 > 0 || cdv_i0 == 0) == (%.*s > 0 || %.*s == 0)) cdv_mono = 1, cdv_all = %s, cdv_any = %s; } }",
           (int)nm->len, g->o + nm->off, (int)nm->len, g->o + nm->off, (int)nm->len, g->o + nm->off,
           le ? "cdv_g1" : "cdv_g0", le ? "cdv_g0" : "cdv_g1");
}

/* (see NOTE [uniform guard]) Write the simd body versioned on its guard; 0 when it has none that qualifies. */
static int fis_guard(fgen *g, buf *o, int hdr, const char *fname) {
  int k = 0;
  for (; k < g->nit && !ftok(g, g->it[k].a, "if"); k++) {
    const fitem *x = &g->it[k];
    int decl = 0;
    for (int d = 0; d < g->nd; d++)
      if (g->d[d].stmt_a == x->a) {
        if (g->d[d].hoist) return 0;
        decl = 1;
      }
    if (x->kind != 0 || !decl || ftok(g, x->a, "#") || !fis_pure(g, x->a, x->b, 1)) return 0;
  }
  if (k == g->nit || g->it[g->nit - 1].b - g->it[0].a > FIS_GUARD_TOKENS) return 0;
  const fitem *x = &g->it[k];
  if (!ftok(g, x->a + 1, "(")) return 0; /* if constexpr */
  int rp = cdv_cpu_skip_parens(g->s, g->t, x->a + 1) - 1, e1 = stmt_end(g, rp + 1, x->b);
  if (!ftok(g, rp, ")") || !fis_pure(g, x->a + 2, rp, 0) || e1 < 0 || (e1 < x->b && !ftok(g, e1, "else"))) return 0;
  /* the condition's value for every thread: from two probes where it is monotone (NOTE [monotone guard]) */
  int le = 0, mono = fis_mono_guard(g, k, x->a + 2, rp, &le);
  buf_adds(o, " int cdv_any = 0, cdv_all = 1, cdv_mono = 0; (void)cdv_mono;");
  if (mono >= 0) fis_mono_probe(g, o, mono, x->a + 2, rp, le), buf_adds(o, " if (!cdv_mono) {");
  fis_open(g, o, 3, hdr);
  fis_items(g, o, 0, k, 3, fname);
  buf_adds(o, " { const bool cdv_g = ");
  fis_emit(g, o, x->a + 1, rp + 1, 3);
  buf_adds(o, "; cdv_any |= cdv_g; cdv_all &= cdv_g; }");
  fis_close(g, o, 3);
  if (mono >= 0) buf_adds(o, " }");
  /* all: the if's statement; none: its else; some: as written */
  buf_adds(o, "\nif (cdv_all) {");
  fis_open(g, o, 1, hdr);
  fis_items(g, o, 0, k, 1, fname);
  fis_line(g, o, rp + 1, fname), fis_emit(g, o, rp + 1, e1, 1);
  fis_items(g, o, k + 1, g->nit, 1, fname);
  fis_close(g, o, 1);
  buf_adds(o, "} else if (!cdv_any) {");
  fis_open(g, o, 2, hdr);
  fis_items(g, o, 0, k, 2, fname);
  if (e1 < x->b) fis_line(g, o, e1 + 1, fname), fis_emit(g, o, e1 + 1, x->b, 2);
  fis_items(g, o, k + 1, g->nit, 2, fname);
  fis_close(g, o, 2);
  buf_adds(o, "} else {");
  fis_open(g, o, 0, hdr);
  fis_items(g, o, 0, g->nit, 0, fname);
  fis_close(g, o, 0);
  buf_adds(o, "}");
  return 1;
}

/* Give regions their numbers and note declarations; seg_of per token. */
static int fis_number(fgen *g, int from, int to) {
  int cur = -1;
  for (int k = from; k < to;) {
    fitem *x = &g->it[k];
    if (x->kind == 0) {
      if (cur < 0) cur = g->nseg++;
      x->seg = cur;
      for (int i = x->a; i < x->b; i++) g->seg_of[i] = cur;
      if (!ftok(g, x->a, "#") && fis_decl(g, x->a, x->b, cur)) return -1;
      k++;
    } else if (x->kind == 1) {
      cur = -1, k++;
    } else if (x->kind == 3) { /* (see NOTE [warp fission]) */
      if (x->hdr_a >= 0) {
        x->seg = g->nseg++;
        for (int i = x->hdr_a; i < x->hdr_b; i++) g->seg_of[i] = x->seg;
      }
      cur = -1;
      if (fis_number(g, k + 1, x->b)) return -1;
      k = x->b;
    } else if (x->kind == 4) { /* the value before the split, the rest after it */
      x->seg = g->nseg++, x->seg2 = cur = g->nseg++;
      for (int i = x->a; i < x->b; i++) g->seg_of[i] = cur;
      for (int i = x->arg[1]; i < x->arg[2]; i++) g->seg_of[i] = x->seg;
      if (x->decl && fis_decl(g, x->a, x->b, x->seg2)) return -1; /* `T v = op(...);` declares v after the split */
      k++;
    } else {
      cur = -1;
      for (int i = x->hdr_a; i < x->hdr_b; i++)
        if (ftok(g, i, "threadIdx"))
          return fis_no(g, i, "threadIdx in the condition of a loop or if around a barrier"); /* run once */
        else
          g->seg_of[i] = -2;
      if (ftok(g, x->kw, "for")) { /* the counter a for header declares: uniform */
        int semi = x->hdr_a;
        while (semi < x->hdr_b && !ftok(g, semi, ";")) semi++;
        int nd0 = g->nd;
        if (semi > x->hdr_a && fis_decl(g, x->hdr_a, semi + 1, -2)) return -1;
        for (int d = nd0; d < g->nd; d++) g->d[d].uniform = 1, g->d[d].hoist = 0;
      }
      int b = x->b;
      if (fis_number(g, k + 1, b)) return -1;
      /* a region of the loop's body must not change its counters nor break out of the thread loop; a while or
       * do loop's condition (and an if's) reads thread 0's copy of a local, which a region may change (k++) */
      int counters = ftok(g, x->kw, "for");
      for (int j = k + 1; j < b; j++) {
        if (g->it[j].kind != 0) continue;
        for (int i = g->it[j].a; i < g->it[j].b; i++) {
          if ((ftok(g, i, "break") || ftok(g, i, "continue")) && !fis_nested(g, g->it[j].a, g->it[j].b, i))
            return fis_no(g, i, "break or continue in a loop with barriers");
          for (int i2 = x->hdr_a; counters && i2 < x->hdr_b; i2++)
            if (same_tok(g, i, i2) && fis_writes(g, i)) return fis_no(g, i, "a for loop's counter changed in its body");
        }
      }
      k = b;
    }
  }
  return 0;
}

static const char *const fis_refused[] = {"goto",
                                          "asm",
                                          "__asm__",
                                          "try",
                                          "throw",
                                          "co_await",
                                          "co_return",
                                          "co_yield",
                                          "__syncthreads_count",
                                          "__syncthreads_and",
                                          "__syncthreads_or",
                                          "setjmp",
                                          NULL};

/* For each hoisted __shared__ or thread_local local: `auto *cdv_tlsN = &name;` passed through an empty asm
 * (else GCC computes the TLS address again where it is used), then a block with `auto &name = *cdv_tlsN;`
 * that the regions go in (fis_kernel closes it), so that the thread loops reach the variable through a
 * pointer in a register instead of asking for the thread's TLS block (__tls_get_addr in a dlopened object) in
 * every iteration, which also kept them from vectorising. 1 when it opened the block. */
static int fis_tls_refs(fgen *g, buf *o) {
  int n = 0;
  for (int pass = 0; pass < 2; pass++) {
    if (pass == 1 && n) buf_adds(o, "{ ");
    for (int d = 0; d < g->nd; d++) {
      const fdecl *x = &g->d[d];
      int tls = 0;
      for (int i = x->stmt_a; x->hoist && i < x->name; i++)
        tls |= ftok(g, i, "__shared__") || ftok(g, i, "thread_local");
      for (int i = x->stmt_a; tls && i < x->name; i++) tls = !ftok(g, i, "extern") && !ftok(g, i, "constexpr");
      if (!tls) continue;
      const cdv_tok *k = &g->t->v[x->name];
      if (pass == 0)
        buf_addf(o, "auto *cdv_tls%d = &%.*s; __asm__(\"\" : \"+r\"(cdv_tls%d)); ", d, (int)k->len, g->o + k->off, d),
            n++;
      else
        buf_addf(o, "auto &%.*s = *cdv_tls%d; ", (int)k->len, g->o + k->off, d);
    }
  }
  return n > 0;
}

/* Write the fast function of the kernel named name (cdv_fis_<sym>) into o; 1 simd, 2 fission, 0 not
 * possible, -1 out of memory. hdr: the body calls code that reads the thread header (threadIdx). rowo: the
 * per-thread bytes as an expression. */
/* The template parameters of the function whose name is token nm: *a, *b the tokens between `template <` and
 * its `>`; 0 when the function is no template, -1 when its template cannot be read (no parameters). */
static int fis_template(const fgen *g, int nm, int *a, int *b) {
  int i = nm - 1;
  while (i >= 0 && !ftok(g, i, ";") && !ftok(g, i, "{") && !ftok(g, i, "}") && !ftok(g, i, "template") &&
         !(g->t->v[i].bol && ftok(g, i, "#")))
    i--;
  if (i < 0 || !ftok(g, i, "template")) return 0;
  if (!ftok(g, i + 1, "<") || ftok(g, i + 2, ">")) return -1; /* template <>: a specialisation */
  int d = 0, j = i + 1;
  for (; j < nm; j++) {
    d += (ftok(g, j, "<") || ftok(g, j, "(")) - (ftok(g, j, ">") || ftok(g, j, ")"));
    if (d == 0) break;
  }
  if (j >= nm) return -1;
  for (int k = i + 2; k < j; k++) /* a default or a pack: the entry's arguments are not all the parameters */
    if (ftok(g, k, "=") || ftok(g, k, "...") || (ftok(g, k, ".") && ftok(g, k + 1, "."))) return -1;
  *a = i + 2, *b = j;
  return 1;
}

int cdv_cpu_fis_kernel(const char *fname, const char *src, size_t n, const char *name, const char *targs,
                       const char *sym, const char *sync, int hdr, buf *o, buf *rowo, char *why, size_t nwhy) {
  char *inl = NULL; /* the source with its helpers written into the kernel (NOTE [inlined helpers]) */
  size_t ninl = 0;
  int irc = cdv_cpu_inline(src, n, name, sync, &inl, &ninl, why, nwhy);
  if (irc != 0 && irc != 1) return irc < 0 ? -1 : 0;
  if (inl) src = inl, n = ninl;
  char *s = cdv_scan_strip(src, n);
  cdv_toks t = {0};
  if (!s || cdv_scan_tokenize(s, n, &t)) {
    free(s), free(t.v), free(inl);
    return -1;
  }
  fgen *g = calloc(1, sizeof *g);
  int *seg_of = calloc((size_t)t.n + 1, sizeof *seg_of);
  int rc = 0, lb = -1, found = 0;
  if (!g || !seg_of) {
    rc = -1;
    goto done;
  }
  g->s = s, g->o = src, g->t = &t, g->seg_of = seg_of, g->fname = fname;
  for (int i = 0; i <= t.n; i++) seg_of[i] = -1;
  /* the kernel's body: a '{' at namespace scope after "name(...)" */
  for (int i = 0, depth = 0; i < t.n; i++) {
    const cdv_tok *k = &t.v[i];
    if (k->bol && cdv_tok_is(s, k, "#")) {
      int end = cdv_cpu_pp_line_end(s, &t, i);
      if (i + 5 < end && cdv_tok_is(s, &t.v[i + 1], "define") && cdv_cpu_barrier_macro(s, &t, i, end) && g->nalias < 8)
        g->alias[g->nalias++] = i + 2;
      i = end - 1;
    } else if (cdv_tok_is(s, k, "{") && cdv_cpu_ns_brace(s, &t, i)) {
      depth++;
    } else if (cdv_tok_is(s, k, "}")) {
      depth -= depth > 0;
    } else if (cdv_tok_is(s, k, "{")) {
      char fn[128];
      if (cdv_cpu_function_name(s, &t, i, fn, sizeof fn) && !strcmp(fn, name)) found++, lb = i;
      int d = 1, j = i + 1;
      for (; j < t.n && d > 0; j++) d += cdv_tok_is(s, &t.v[j], "{") - cdv_tok_is(s, &t.v[j], "}");
      i = j - 1;
    }
  }
  if (found != 1 || !ftok(g, lb - 1, ")")) {
    fis_no(g, -1, found ? "the kernel is defined more than once" : "the kernel's body is not at namespace scope");
    goto done;
  }
  int rp = lb - 1, lp = rp;
  for (int d = 0; lp >= 0; lp--) {
    d += ftok(g, lp, ")") - ftok(g, lp, "(");
    if (d == 0) break;
  }
  if (lp <= 0 || !same_tok(g, lp - 1, lp - 1) || !cdv_tok_is(s, &t.v[lp - 1], name)) goto done;
  int rb = stmt_end(g, lb, t.n) - 1, ta = 0, tb = 0, tmpl = fis_template(g, lp - 1, &ta, &tb);
  if (rb < 0 || tmpl < 0 || tmpl != (targs != NULL)) { /* an entry names a template by its arguments */
    fis_no(g, lp, "a template parameter with a default or a pack");
    goto done;
  }
  for (int i = lb + 1; i < rb; i++) {
    const cdv_tok *k = &t.v[i];
    if (k->kind == CDV_T_IDENT &&
        (cdv_cpu_word_of(s, k, fis_refused) || (cdv_scan_barrier_word(s, k) && !cdv_tok_is(s, k, "__syncthreads") &&
                                                !cdv_tok_is(s, k, "__syncwarp") && !fis_warp_word(g, i)))) {
      char what[96];
      snprintf(what, sizeof what, "'%.*s'", k->len > 60 ? 60 : (int)k->len, s + k->off);
      fis_no(g, i, what);
      goto done;
    }
    if (cdv_tok_is(s, k, "]") && (ftok(g, i + 1, "(") || ftok(g, i + 1, "{"))) { /* a lambda, likely */
      fis_no(g, i, "a lambda");
      goto done;
    }
    if (cdv_tok_is(s, k, ":") && t.v[i - 1].kind == CDV_T_IDENT && !ftok(g, i - 1, "default") &&
        (ftok(g, i - 2, ";") || ftok(g, i - 2, "{") || ftok(g, i - 2, "}")) && !ftok(g, i + 1, ":")) {
      fis_no(g, i, "a label");
      goto done;
    }
    g->ret |= cdv_tok_is(s, k, "return");
    for (int p = lp + 1; p < rp; p++) /* a thread's own copy of a parameter: not when the body changes one */
      if (k->kind == CDV_T_IDENT && same_tok(g, i, p) &&
          (fis_writes(g, i) || ((ftok(g, p + 1, ",") || ftok(g, p + 1, ")")) &&
                                (fis_aliased(g, i, lb, 0) || fis_takes_ref(g, fis_call_paren(g, i, lb) - 1))))) {
        fis_no(g, i, "a parameter changed, aliased or passed by reference");
        goto done;
      } /* a name's alias (not for ?: operands, min-like `k < n ? k : n`, which a write through is
                    * rare), or passed to a function that may take it by reference: twice(n) */
  }
  if (fis_seq(g, lb + 1, rb) || fis_number(g, 0, g->nit)) {
    fis_no(g, lb, "a statement around a barrier or warp operation that fission does not take");
    goto done;
  }
  if (!g->nbar) g->ret = 0;
  /* which declarations cross regions */
  for (int d = 0; d < g->nd; d++) {
    fdecl *x = &g->d[d];
    if (x->uniform || x->hoist) continue;
    for (int i = lb + 1; i < rb; i++) {
      if (i == x->name || !same_tok(g, i, x->name) || seg_of[i] == x->seg || fis_member(g, i)) continue;
      int f = lb + 1; /* a region whose first mention of the name declares one of its own: not a use */
      while (f < i && !(same_tok(g, f, x->name) && seg_of[f] == seg_of[i])) f++;
      if (seg_of[i] < 0 || !fis_declares(g, f)) x->priv = 1;
    }
  }
  for (int d = 0; d < g->nd; d++) { /* a whole statement is private when one of its declarators is */
    for (int d2 = 0; d2 < g->nd; d2++)
      if (g->d[d2].stmt_a == g->d[d].stmt_a && g->d[d2].priv && !g->d[d].uniform) g->d[d].priv = 1;
  }
  g->lb = lb, g->rb = rb, g->lp = lp, g->rp = rp;
  for (int d = 0; d < g->nd; d++) /* in source order: a remat initialiser may read earlier ones */
    g->d[d].remat = fis_remat_ok(g, d, lp, rp, lb, rb);
  fis_block_scalars(g, lp, rp);
  for (int d = 0; d < g->nd; d++) { /* names fission changes must be declared once, before their uses */
    fdecl *x = &g->d[d];
    if (!x->priv && !x->hoist && !x->uniform) continue;
    int counters = x->uniform; /* loops' counters of one name: each stays in its own loop's header */
    for (int d2 = 0; d2 < g->nd; d2++)
      if (d2 != d && same_tok(g, g->d[d2].name, x->name)) counters &= g->d[d2].uniform;
    if (counters) continue;
    for (int p = lp + 1; p < rp; p++)
      if (same_tok(g, p, x->name)) {
        fis_no(g, x->name, "a local across a barrier named as a parameter");
        goto done;
      }
    for (int i = lb + 1; i < rb; i++) {
      if (i == x->name || !same_tok(g, i, x->name)) continue;
      if ((i < x->name && !fis_member(g, i)) || fis_declares(g, i)) {
        fis_no(g, i, "a local across a barrier declared twice or used before its declaration");
        goto done;
      }
    }
  }
  for (int k = 0; k < g->nit; k++) { /* (see NOTE [warp fission]) a warp loop's header reads no per-thread value */
    const fitem *x = &g->it[k];
    if (x->kind != 2 || has_sync(g, x->kw, x->a)) continue;
    for (int i = x->hdr_a; i < x->hdr_b; i++)
      for (int d = 0; d < g->nd; d++)
        if (g->d[d].priv && !g->d[d].bsc && same_tok(g, i, g->d[d].name) && !ftok(g, i - 1, ".")) {
          fis_no(g, i, "a thread's own local in the header of a loop of warp operations");
          goto done;
        }
  }
  /* the function */
  size_t o0 = o->n, r0 = rowo->n;
  /* threadIdx and the others are the function's locals (an assert still shows the source's spelling) */
  buf_adds(o,
           "\n#pragma push_macro(\"threadIdx\")\n#pragma push_macro(\"blockIdx\")\n#pragma push_macro(\"blockDim\")\n"
           "#pragma push_macro(\"gridDim\")\n#undef threadIdx\n#undef blockIdx\n#undef blockDim\n#undef gridDim\n"
           "#define threadIdx cdv_tix\n#define blockIdx cdv_bix\n#define blockDim cdv_bdim\n#define gridDim cdv_gdim");
  buf_adds(o, "\ntemplate <");
  if (tmpl) fis_emit(g, o, ta, tb, -3), buf_adds(o, ", ");
  buf_addf(o, "int cdv_F> static __attribute__((flatten)) void cdv_fis_%s", sym);
  fis_emit(g, o, lp, rp + 1, -3);
  buf_addf(o, "\n#line %d ", t.v[lb].line);
  cdv_cpu_add_cstring(o, fname);
  buf_adds(o,
           "\n{ cdv_cpu_fhdr *const cdv_h = cdv_hdr(); (void)cdv_h; cdv_cpu_ctx *const cdv_c = cdv_h->ctx; "
           "const uint3 cdv_bix = cdv_c->bix; const dim3 cdv_bdim = cdv_c->bdim, cdv_gdim = cdv_c->gdim; "
           "(void)cdv_bix, (void)cdv_gdim; const unsigned cdv_nt = cdv_c->nthreads; (void)cdv_nt; "
           "if (cdv_bdim.x > 1024u) __builtin_unreachable(); ");
  /* NOTE [no wrap hint]: the hint that blockIdx.x * blockDim.x does not wrap is given only when the thread loop
   * stores nothing into the header. GCC 12.2 -O3 -mavx2 miscompiles a vectorised thread loop that has both
   * the hint and the header stores: the last thread of every block of an int2 kernel wrote a wrong value (46
   * of 1500 in spec/60's vec_int; a 20-line C++ reproduction without cudadev shows the same, and it is right
   * without either one). spec/94's "int2 ..." case keeps it honest.
   * NOTE [block index bound]: the same instance may also assume blockIdx.x < 2^20 (cdv_run_fis checks both), so
   * that an unsigned 32-bit index made with a constant, `unsigned i = blockIdx.x * 1024 + threadIdx.x;` read as
   * x[i + 768] (NVIDIA's reduction kernels, reduce_diverge in bench/cpu), is known not to wrap over the block
   * and the region's loads are affine in x: without the bound GCC gave up on the loop's data references, and
   * reduce_diverge's first region ran as a scalar loop (bench/cpu on 2 idle cores: 4.8 ms of a 4.8 ms launch
   * against 1.5 ms with the bound). The blocks of x 2^20 and up of a larger grid take the instance without
   * hints. */
  if (!hdr) /* a fault names the block only: the header does not follow the threads */
    buf_adds(o,
             "if (cdv_F && (cdv_bix.x * cdv_bdim.x > 0x7ffffbffu || cdv_bix.x > 0xfffffu)) __builtin_unreachable(); "
             "cdv_h->tix = uint3{~0u, ~0u, ~0u}; ");
  if (g->ret) buf_adds(o, "unsigned char cdv_done[cdv_nt]; __builtin_memset(cdv_done, 0, cdv_nt); ");
  if (g->nwarp) /* padded and zeroed (see NOTE [exchange slack]) */
    buf_adds(o,
             "unsigned long long cdv_xsb[cdv_nt + 2 * CDV_XSLACK]; unsigned cdv_xs4b[cdv_nt + 2 * CDV_XSLACK]; "
             "unsigned char cdv_xpb[cdv_nt + 2 * CDV_XSLACK]; cdv_xinit(cdv_xsb, cdv_xs4b, cdv_xpb, cdv_nt); "
             "unsigned long long *const cdv_xs = cdv_xsb + CDV_XSLACK; unsigned *const cdv_xs4 = cdv_xs4b + "
             "CDV_XSLACK; unsigned char *const cdv_xp = cdv_xpb + CDV_XSLACK; ");
  for (int f = 0; f < g->nflag; f++) /* zeroed: cdv_fany reads a chunk's flags at once (see NOTE [warp skip]) */
    buf_addf(o, "unsigned char cdv_fl%d[cdv_nt]; __builtin_memset(cdv_fl%d, 0, cdv_nt); ", f, f);
  buf_addf(rowo, "%d", (g->ret ? 1 : 0) + (g->nwarp ? 13 : 0) + g->nflag);
  for (int d = 0; d < g->nd; d++) {
    fdecl *x = &g->d[d];
    if (x->hoist) {
      int first = 1;
      for (int d2 = 0; d2 < d; d2++) first &= g->d[d2].stmt_a != x->stmt_a;
      if (first) fis_emit(g, o, x->stmt_a, x->stmt_b, -3), buf_adds(o, " ");
    } else if (x->bsc) { /* one scalar (see NOTE [block scalars]) */
      if (fis_hoisted(g, o, d, 2)) goto done_undo;
      buf_adds(o, "; ");
    } else if (x->priv && !x->remat) {
      if (fis_hoisted(g, o, d, 0)) goto done_undo;
      buf_adds(o, "; ");
      buf_adds(rowo, " + sizeof(");
      if (fis_hoisted(g, rowo, d, 1)) goto done_undo;
      buf_adds(rowo, ")");
    }
  }
  int tls = fis_tls_refs(g, o); /* a __shared__ variable is thread_local: its address found once */
  if (g->nbar || !fis_guard(g, o, hdr, fname)) fis_walk(g, o, 0, g->nit, hdr);
  if (tls) buf_adds(o, " }");
  buf_adds(o,
           "\n}\n#pragma pop_macro(\"threadIdx\")\n#pragma pop_macro(\"blockIdx\")\n#pragma pop_macro(\"blockDim\")\n"
           "#pragma pop_macro(\"gridDim\")\n");
  if (tmpl) { /* the per-thread bytes of the instance: the template's types are known only there */
    buf_adds(o, "template <");
    fis_emit(g, o, ta, tb, -3);
    buf_addf(o, "> constexpr unsigned long cdv_fis_row_%s = %s;\n", sym, rowo->p + r0);
    rowo->n = r0;
    buf_addf(rowo, "cdv_fis_row_%s<%.*s>", sym, (int)strlen(targs) - 2, targs);
  }
  rc = g->nbar ? 2 : 1;
  goto done;
done_undo:
  rc = 0;
  fis_no(g, -1, "a local across a barrier whose type fission cannot copy");
  o->n = o0, rowo->n = r0;
  if (o->p) o->p[o0] = 0;
  if (rowo->p) rowo->p[r0] = 0;
done:
  if (rc == 0 && g) snprintf(why, nwhy, "%s", g->why[0] ? g->why : "a construct fission does not take");
  free(seg_of);
  free(g);
  free(s);
  free(t.v);
  free(inl);
  return rc;
}
