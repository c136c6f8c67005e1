/*
 * blas.c: matrix multiply, cd.matmul(a, b [, opts]) and a:matmul(b [, opts]).
 *
 * On a CUDA device the product is cuBLAS's (cublasGemmEx), with cuBLAS opened at run time by loader.c like
 * libcuda and NVRTC (NOTE [cublas library], NOTE [cublas abi] in cublas_abi.h); on a device whose memory the host
 * reads directly (the cpu device, NOTE [backend properties]) it is a blocked, multithreaded kernel of ours
 * (blas_host.h, NOTE [host gemm]).
 *
 * NOTE [row-major gemm]: cudadev's arrays are row-major and cuBLAS is column-major. A row-major m x n matrix is
 * the column-major n x m matrix of its transpose, so C = op(A) op(B) is computed as C^T = op(B)^T op(A)^T:
 * the operands are swapped, each keeps its own transposition flag, and every leading dimension is the row
 * length of the array as stored.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cdv.h"
#include "cublas_abi.h"

/* ---------------------------------------------------------------- the host kernel */
#define CDV_GEMM_MAX_THREADS 32
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#define CDV_GEMM_CLONES __attribute__((target_clones("arch=x86-64-v3", "default"), noinline))
#else
#define CDV_GEMM_CLONES __attribute__((noinline))
#endif

/* Threads for an m x n x k product: one per CPU we may use, but only where each gets at least a few million
 * multiply-adds and some rows (a thread's start costs tens of microseconds). */
static int cdv_gemm_threads(int64_t m, int64_t n, int64_t k, int mr) {
  cpu_set_t set; /* the CPUs this process may run on (taskset, cgroups), not every CPU of the machine */
  long cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : sysconf(_SC_NPROCESSORS_ONLN);
  double work = (double)m * (double)n * (double)k;
  int64_t by_work = (int64_t)(work / (1 << 22)) + 1, by_rows = (m + mr - 1) / mr;
  int64_t nt = cpus > 0 ? cpus : 1;
  if (nt > by_work) nt = by_work;
  if (nt > by_rows) nt = by_rows;
  if (nt > CDV_GEMM_MAX_THREADS) nt = CDV_GEMM_MAX_THREADS;
  return nt < 1 ? 1 : (int)nt;
}

#define HG_T float
#define HG_VL 8
#define HG_(name) name##_f32
#include "blas_host.h"
#undef HG_T
#undef HG_VL
#undef HG_
#define HG_T double
#define HG_VL 4
#define HG_(name) name##_f64
#include "blas_host.h"
#undef HG_T
#undef HG_VL
#undef HG_

/* float16 on the host: through float32 copies (the product is accumulated in float32, as cuBLAS does). */
static int gemm_f16(const uint16_t *a, int transa, const uint16_t *b, int transb, uint16_t *c, int64_t m, int64_t n,
                    int64_t k, float alpha, float beta) {
  size_t na = (size_t)(m * k), nb = (size_t)(k * n), nc = (size_t)(m * n);
  float *fa = malloc(sizeof(float) * (na + nb + nc + 1));
  if (fa == NULL) return -1;
  float *fb = fa + na, *fc = fb + nb;
  for (size_t i = 0; i < na; i++) fa[i] = cdv_f16_to_f32(a[i]);
  for (size_t i = 0; i < nb; i++) fb[i] = cdv_f16_to_f32(b[i]);
  if (beta != 0)
    for (size_t i = 0; i < nc; i++) fc[i] = cdv_f16_to_f32(c[i]);
  int rc = gemm_f32(fa, transa, fb, transb, fc, m, n, k, alpha, beta);
  if (rc == 0)
    for (size_t i = 0; i < nc; i++) c[i] = cdv_f32_to_f16(fc[i]);
  free(fa);
  return rc;
}

/* ---------------------------------------------------------------- cuBLAS, opened at run time */
/* 0 when cuBLAS is open with every entry point used; else -1 and *e says what was tried (loader.c). */
static int cublas_load(cdv_err *e) {
  if (cdv_cublas_load() == 0) return 0;
  return cdv_fail(e, "dlopen", 0, "CUBLAS_NOT_FOUND", "%s", cdv_cublas_why());
}

static int cublas_status(cdv_err *e, const char *api, int status) {
  static const char *const names[] = {[0] = "CUBLAS_STATUS_SUCCESS",           [1] = "CUBLAS_STATUS_NOT_INITIALIZED",
                                      [3] = "CUBLAS_STATUS_ALLOC_FAILED",      [7] = "CUBLAS_STATUS_INVALID_VALUE",
                                      [8] = "CUBLAS_STATUS_ARCH_MISMATCH",     [11] = "CUBLAS_STATUS_MAPPING_ERROR",
                                      [13] = "CUBLAS_STATUS_EXECUTION_FAILED", [14] = "CUBLAS_STATUS_INTERNAL_ERROR",
                                      [15] = "CUBLAS_STATUS_NOT_SUPPORTED",    [16] = "CUBLAS_STATUS_LICENSE_ERROR"};
  if (status == 0) return 0;
  const char *name = status > 0 && status < (int)(sizeof names / sizeof *names) && names[status]
                         ? names[status]
                         : "CUBLAS_STATUS_UNKNOWN";
  const char *text = cdv_cublas.cublasGetStatusString ? cdv_cublas.cublasGetStatusString(status) : NULL;
  return cdv_fail(e, api, status, name, "%s", text ? text : "cuBLAS failed");
}

/* ---------------------------------------------------------------- cuBLAS handles */
/* NOTE [cublas handles]: one cuBLAS handle per device per lua_State, made at the first matmul on the device
 * and destroyed when the state closes (a handle is not thread-safe, and states may run in different threads).
 * They live in a userdata of the registry whose finalizer destroys them. A handle belongs to its device's
 * context: after a reset (a new context) or once the context is gone or poisoned it is forgotten, never
 * destroyed (the driver would be called on a dead context), and a new one is made. Each call sets the handle's
 * stream to the Array's, so cuBLAS's work is ordered with the rest of that stream. */
#define BLAS_KEY "cudadev.cublas_handles"
#define BLAS_MAGIC 0x63647642686e64ULL /* "cdvBhnd" (NOTE [magic]) */
typedef struct blas_handles {
  uint64_t magic;
  struct {
    cdv_cublas_handle h;
    cdv_device *dev;
    unsigned generation;
  } slot[CDV_MAXDEV];
} blas_handles;

static int handles_gc(lua_State *L) {
  blas_handles *hs = cdv_test_magic(L, 1, sizeof *hs, BLAS_MAGIC);
  if (hs == NULL) return 0;
  for (int i = 0; i < CDV_MAXDEV; i++) {
    cdv_device *d = hs->slot[i].dev;
    cdv_cublas_handle h = hs->slot[i].h;
    hs->slot[i].h = NULL;
    if (h == NULL || !cdv_still_owned(d, hs->slot[i].generation) || d->gone) continue;
    cdv_err e;
    if (d->be->activate(d, &e) != 0 || cublas_status(&e, "cublasDestroy", cdv_cublas.cublasDestroy_v2(h)) != 0)
      cdv_warn_release(L, "cuBLAS handle", d, &e); /* __gc never raises */
  }
  return 0;
}

/* The state's handle for d (current context), made when missing or stale. */
static cdv_cublas_handle blas_handle(lua_State *L, cdv_device *d) {
  cdv_err e;
  if (cublas_load(&e) != 0) cdv_raise(L, d, &e);
  blas_handles *hs =
      cdv_registry_udata(L, BLAS_KEY, sizeof(blas_handles), BLAS_MAGIC, handles_gc, "cudadev.CublasHandles");
  if (d->index < 0 || d->index >= CDV_MAXDEV) luaL_error(L, "matmul: %s has no cuBLAS slot", d->alias);
  if (hs->slot[d->index].h != NULL && hs->slot[d->index].dev == d && hs->slot[d->index].generation == d->generation)
    return hs->slot[d->index].h;
  hs->slot[d->index].h = NULL; /* stale: its context is gone (NOTE [cublas handles]) */
  cdv_cublas_handle h = NULL;
  if (cublas_status(&e, "cublasCreate", cdv_cublas.cublasCreate_v2(&h)) != 0) cdv_raise(L, d, &e);
  if (cublas_status(&e, "cublasSetMathMode", cdv_cublas.cublasSetMathMode(h, CUBLAS_DEFAULT_MATH)) != 0) {
    cdv_cublas.cublasDestroy_v2(h);
    cdv_raise(L, d, &e);
  }
  hs->slot[d->index].h = h;
  hs->slot[d->index].dev = d;
  hs->slot[d->index].generation = d->generation;
  return h;
}

/* For linalg_cuda.c's batched LU (cuBLAS's getrfBatched/getrsBatched): the same handle, the same status words. */
cdv_cublas_handle cdv_blas_handle(lua_State *L, cdv_device *d) { return blas_handle(L, d); }
int cdv_cublas_status(cdv_err *e, const char *api, int status) { return cublas_status(e, api, status); }

/* ---------------------------------------------------------------- cd.matmul */
static const char *const matmul_opts[] = {"out", "alpha", "beta", "transa", "transb", "stream", NULL};

static const char *shape_text(lua_State *L, const cdv_array *a) {
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_addchar(&b, '{');
  for (int i = 0; i < a->ndim; i++) {
    if (i) luaL_addstring(&b, ", ");
    lua_pushfstring(L, "%I", (lua_Integer)a->shape[i]);
    luaL_addvalue(&b);
  }
  luaL_addchar(&b, '}');
  luaL_pushresult(&b);
  return lua_tostring(L, -1);
}

/* NOTE [matmul contiguity]: the product reads every operand as one dense row-major block, read as it is or
 * transposed (BLAS's op): transa/transb give the product a transposed operand without a copy, and so does a
 * transposed view of a dense array (a.T of a matrix, a:swapaxes(-1, -2) of a stack, as CuPy takes them), read
 * as the dense array it views with the other op. Any other strided view (NOTE [strided views]) is first copied
 * by a:contiguous() on the product's stream (as CuPy copies it): its elements are not where the product reads
 * them and past its end may lie memory it does not own. */
static int is_dense(const cdv_array *a) { return cdv_array_contiguous(a); }

/* x's C-ordered copy, x:contiguous({stream = opts.stream}) (NOTE [matmul contiguity]), left on the stack. */
static cdv_array *contiguous_copy(lua_State *L, int x_idx, int opts) {
  lua_getfield(L, x_idx, "contiguous");
  lua_pushvalue(L, x_idx);
  lua_createtable(L, 0, 1);
  if (lua_istable(L, opts)) {
    lua_getfield(L, opts, "stream");
    lua_setfield(L, -2, "stream");
  }
  lua_call(L, 2, 1);
  return cdv_check_array(L, -1);
}

/* The block the product reads for operand x (NOTE [matmul contiguity]): x itself when dense (0 returned); when x
 * is a transposed view of a dense array, that array in *st, whose last two dimensions are x's swapped (1
 * returned: the product transposes it once more); -1 when x is neither. */
static int dense_operand(const cdv_array *x, cdv_array *st) {
  if (is_dense(x)) return 0;
  if (x->ndim < 2) return -1;
  int i = x->ndim - 2, j = x->ndim - 1;
  *st = *x;
  st->shape[i] = x->shape[j], st->shape[j] = x->shape[i];
  st->strides[i] = x->strides[j], st->strides[j] = x->strides[i];
  return is_dense(st) ? 1 : -1;
}

static double opt_number(lua_State *L, int o, const char *k, double def) {
  if (cdv_opt_field(L, o, k) == LUA_TNIL) {
    lua_pop(L, 1);
    return def;
  }
  if (lua_type(L, -1) != LUA_TNUMBER)
    cdv_opt_error(L, k, "matmul", lua_pushfstring(L, "number expected, got %s", cdv_typename(L, -1)));
  double v = lua_tonumber(L, -1);
  lua_pop(L, 1);
  return v;
}

static int overlaps(const cdv_array *x, const cdv_array *y) {
  size_t nx = (size_t)x->size * cdv_dtypes[x->dtype].size, ny = (size_t)y->size * cdv_dtypes[y->dtype].size;
  return nx && ny && x->data < y->data + ny && y->data < x->data + nx;
}

/* NOTE [batched matmul]: operands of more than 2 dimensions are stacks of matrices (NumPy's matmul): the
 * dimensions before the last two are batch dimensions, broadcast together as NumPy broadcasts them, and a 1-d or
 * 2-d operand is the same matrix for every batch. Each operand gets an element stride per batch dimension (0
 * where it is broadcast); neighbouring dimensions whose strides chain in all three arrays are merged, and the
 * last one left is one strided-batched product (cublasGemmStridedBatchedEx on GPUs, a loop on the host). Only
 * batch shapes that broadcast both ways at once ({2, 1, m, k} @ {1, 3, k, n}) leave more than one dimension,
 * which is looped around it. */
typedef struct batch_plan {
  int bnd; /* broadcast batch dimensions, and their sizes (the result's leading dimensions) */
  int64_t shape[CDV_MAXDIM];
  int nb; /* dimensions after merging (those of one element dropped), each with its count and strides */
  int64_t count[CDV_MAXDIM], sa[CDV_MAXDIM], sb[CDV_MAXDIM], sc[CDV_MAXDIM];
} batch_plan;

/* Element strides of x's batch dimensions aligned to the last of bnd (0 where x has none or broadcasts one). */
static void batch_strides(const cdv_array *x, int bnd, const int64_t *shape, int64_t *st) {
  int nbx = x->ndim > 2 ? x->ndim - 2 : 0;
  int64_t acc = x->ndim >= 2 ? x->shape[x->ndim - 1] * x->shape[x->ndim - 2] : x->ndim == 1 ? x->shape[0] : 1;
  for (int i = bnd - 1; i >= 0; i--) {
    int j = i - (bnd - nbx);
    int64_t d = j >= 0 ? x->shape[j] : 1;
    st[i] = d == 1 && shape[i] != 1 ? 0 : acc;
    acc *= d;
  }
}

/* The broadcast batch shape of a and b, or an error naming both shapes; then the merged dimensions. */
static void plan_batches(lua_State *L, const cdv_array *a, const cdv_array *b, int64_t mn, batch_plan *p) {
  int nba = a->ndim > 2 ? a->ndim - 2 : 0, nbb = b->ndim > 2 ? b->ndim - 2 : 0;
  p->bnd = nba > nbb ? nba : nbb;
  for (int i = 0; i < p->bnd; i++) {
    int ja = i - (p->bnd - nba), jb = i - (p->bnd - nbb);
    int64_t da = ja >= 0 ? a->shape[ja] : 1, db = jb >= 0 ? b->shape[jb] : 1;
    if (da != db && da != 1 && db != 1) {
      const char *sa = shape_text(L, a), *sb = shape_text(L, b);
      luaL_error(L, "matmul: the batch dimensions of %s and %s cannot be broadcast together (%I and %I)", sa, sb,
                 (lua_Integer)da, (lua_Integer)db);
    }
    p->shape[i] = da == 1 ? db : da;
  }
  int64_t sa[CDV_MAXDIM], sb[CDV_MAXDIM], acc = mn;
  batch_strides(a, p->bnd, p->shape, sa);
  batch_strides(b, p->bnd, p->shape, sb);
  p->nb = 0;
  for (int i = p->bnd - 1; i >= 0; i--) /* saturated: a result that large is refused before it is used */
    if (__builtin_mul_overflow(acc, p->shape[i], &acc)) acc = INT64_MAX;
  for (int i = 0; i < p->bnd; i++) {
    acc /= p->shape[i] ? p->shape[i] : 1;
    if (p->shape[i] == 1) continue;
    int q = p->nb - 1;
    if (q >= 0 && p->sa[q] == sa[i] * p->shape[i] && p->sb[q] == sb[i] * p->shape[i] && p->sc[q] == acc * p->shape[i]) {
      p->count[q] *= p->shape[i]; /* chains with the previous dimension: one dimension of both their sizes */
      p->sa[q] = sa[i], p->sb[q] = sb[i], p->sc[q] = acc;
      continue;
    }
    p->count[p->nb] = p->shape[i], p->sa[p->nb] = sa[i], p->sb[p->nb] = sb[i], p->sc[p->nb] = acc;
    p->nb++;
  }
  if (p->nb == 0) p->count[0] = 1, p->sa[0] = p->sb[0] = p->sc[0] = 0, p->nb = 1;
}

/* What one product needs besides the batch: operands, sizes, scalars. */
typedef struct gemm_call {
  const cdv_array *a, *b, *out;
  int transa, transb;
  int64_t m, n, k;
  double alpha, beta;
} gemm_call;

/* count products on the host, the j-th at element offsets oa + j sa, ob + j sb, oc + j sc. */
static int host_batch(const gemm_call *g, int64_t oa, int64_t ob, int64_t oc, int64_t count, int64_t sa, int64_t sb,
                      int64_t sc) {
  size_t es = cdv_dtypes[g->a->dtype].size;
  for (int64_t j = 0; j < count; j++) {
    const char *pa = g->a->data + (size_t)(oa + j * sa) * es, *pb = g->b->data + (size_t)(ob + j * sb) * es;
    char *pc = g->out->data + (size_t)(oc + j * sc) * es;
    cdv_dtype t = g->a->dtype;
    int rc = t == CDV_F32   ? gemm_f32((const float *)pa, g->transa, (const float *)pb, g->transb, (float *)pc, g->m,
                                       g->n, g->k, (float)g->alpha, (float)g->beta)
             : t == CDV_F64 ? gemm_f64((const double *)pa, g->transa, (const double *)pb, g->transb, (double *)pc, g->m,
                                       g->n, g->k, g->alpha, g->beta)
                            : gemm_f16((const uint16_t *)pa, g->transa, (const uint16_t *)pb, g->transb, (uint16_t *)pc,
                                       g->m, g->n, g->k, (float)g->alpha, (float)g->beta);
    if (rc != 0) return rc;
  }
  return 0;
}

/* count products with cuBLAS (NOTE [row-major gemm]): cublasGemmEx for one, cublasGemmStridedBatchedEx for more. */
static int cuda_batch(const gemm_call *g, cdv_cublas_handle h, cdv_err *e, int64_t oa, int64_t ob, int64_t oc,
                      int64_t count, int64_t sa, int64_t sb, int64_t sc) {
  const cdv_array *a = g->a, *b = g->b;
  cdv_dtype t = a->dtype;
  size_t es = cdv_dtypes[t].size;
  /* leading dimensions: the stored row lengths */
  int lda = (int)(a->ndim == 1 ? a->shape[0] : a->shape[a->ndim - 1]),
      ldb = (int)(b->ndim == 1 ? 1 : b->shape[b->ndim - 1]);
  if (lda < 1) lda = 1;
  if (ldb < 1) ldb = 1;
  float af = (float)g->alpha, bf = (float)g->beta;
  int dt = t == CDV_F64 ? CUDA_R_64F : t == CDV_F32 ? CUDA_R_32F : CUDA_R_16F;
  int ct = t == CDV_F64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
  const void *pal = t == CDV_F64 ? (const void *)&g->alpha : &af, *pbe = t == CDV_F64 ? (const void *)&g->beta : &bf;
  const char *pa = a->data + (size_t)oa * es, *pb = b->data + (size_t)ob * es;
  char *pc = g->out->data + (size_t)oc * es;
  int opa = g->transa ? CUBLAS_OP_T : CUBLAS_OP_N, opb = g->transb ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (count == 1)
    return cublas_status(e, "cublasGemmEx",
                         cdv_cublas.cublasGemmEx(h, opb, opa, (int)g->n, (int)g->m, (int)g->k, pal, pb, dt, ldb, pa, dt,
                                                 lda, pbe, pc, dt, (int)g->n, ct, CUBLAS_GEMM_DEFAULT));
  return cublas_status(e, "cublasGemmStridedBatchedEx",
                       cdv_cublas.cublasGemmStridedBatchedEx(
                           h, opb, opa, (int)g->n, (int)g->m, (int)g->k, pal, pb, dt, ldb, (long long)sb, pa, dt, lda,
                           (long long)sa, pbe, pc, dt, (int)g->n, (long long)sc, (int)count, ct, CUBLAS_GEMM_DEFAULT));
}

/* Runs every batch of plan p: the outer dimensions (all but the last) looped, the last one batched. */
static int run_batches(const gemm_call *g, const batch_plan *p, cdv_cublas_handle h, cdv_err *e) {
  int64_t idx[CDV_MAXDIM] = {0}, outer = 1;
  int last = p->nb - 1;
  for (int i = 0; i < last; i++) outer *= p->count[i];
  for (int64_t o = 0; o < outer; o++) {
    int64_t oa = 0, ob = 0, oc = 0;
    for (int i = 0; i < last; i++) oa += idx[i] * p->sa[i], ob += idx[i] * p->sb[i], oc += idx[i] * p->sc[i];
    int rc = h == NULL ? host_batch(g, oa, ob, oc, p->count[last], p->sa[last], p->sb[last], p->sc[last])
                       : cuda_batch(g, h, e, oa, ob, oc, p->count[last], p->sa[last], p->sb[last], p->sc[last]);
    if (rc != 0) return rc;
    for (int i = last - 1; i >= 0 && ++idx[i] == p->count[i]; i--) idx[i] = 0;
  }
  return 0;
}

/* The out= option, checked against the result's dtype, shape and the inputs; NULL when not given. */
static cdv_array *check_out(lua_State *L, const cdv_array *a, const cdv_array *b, cdv_array *out, int ndim,
                            const int64_t *shape) {
  if (out == NULL) return NULL;
  cdv_device *d = a->block->dev;
  if (out->block->dev != d)
    luaL_error(L, "matmul: out is on %s but the inputs on %s", out->block->dev->alias, d->alias);
  if (out->dtype != a->dtype)
    luaL_error(L, "matmul: out is %s but the result is %s", cdv_dtypes[out->dtype].name, cdv_dtypes[a->dtype].name);
  int same = out->ndim == ndim;
  for (int i = 0; same && i < ndim; i++) same = out->shape[i] == shape[i];
  if (!same) {
    cdv_array r = *out;
    r.ndim = ndim;
    memcpy(r.shape, shape, sizeof r.shape);
    const char *so = shape_text(L, out), *sr = shape_text(L, &r);
    luaL_error(L, "matmul: out has shape %s but the result has shape %s", so, sr);
  }
  if (!is_dense(out)) luaL_error(L, "matmul: out is not contiguous; give a contiguous out");
  if (overlaps(out, a) || overlaps(out, b)) luaL_error(L, "matmul: out overlaps an input; give an out of its own");
  return out;
}

/* cd.matmul(a, b [, {out=, alpha=, beta=, transa=, transb=, stream=}]) -> out = alpha op(a) op(b) + beta out
 * (NumPy's matmul: 1-d, 2-d and stacks of matrices (NOTE [batched matmul]), with BLAS's alpha, beta and
 * transpositions of the last two dimensions). */
static int l_matmul(lua_State *L) {
  cdv_array *a = cdv_check_array(L, 1), *b = cdv_check_array(L, 2);
  cdv_check_options(L, 3, matmul_opts, "matmul");
  cdv_array *out = NULL;
  if (cdv_opt_field(L, 3, "out") != LUA_TNIL) {
    void *p;
    const char *why = cdv_udata_problem(L, -1, CDV_ARRAY, CDV_ARRAY_MAGIC, sizeof(cdv_array), &p);
    if (why != NULL) cdv_opt_error(L, "out", "matmul", why);
    out = p;
    if (out->block == NULL) cdv_opt_error(L, "out", "matmul", "attempt to use a freed array");
    if (out->block->generation != out->block->dev->generation)
      cdv_opt_error(L, "out", "matmul", "stale Array: device was reset");
  }
  int out_idx = lua_gettop(L); /* out, or nil: stays on the stack */
  double alpha = opt_number(L, 3, "alpha", 1.0), beta = opt_number(L, 3, "beta", 0.0);
  int transa = cdv_check_boolean_field(L, 3, "transa", 0, "matmul");
  int transb = cdv_check_boolean_field(L, 3, "transb", 0, "matmul");
  cdv_stream *s = cdv_opt_stream_field(L, 3, "matmul");
  if (beta != 0 && out == NULL) cdv_opt_error(L, "beta", "matmul", "needs out: beta scales out's values");

  /* dtypes */
  cdv_dtype t = a->dtype;
  if (a->dtype != b->dtype)
    return luaL_error(L, "matmul: dtypes differ (%s and %s); convert one with a:astype(\"%s\")",
                      cdv_dtypes[a->dtype].name, cdv_dtypes[b->dtype].name,
                      cdv_dtypes[a->dtype > b->dtype ? a->dtype : b->dtype].name);
  if (t != CDV_F16 && t != CDV_F32 && t != CDV_F64)
    return luaL_error(L,
                      "matmul: %s arrays are not supported (float16, float32 or float64); convert with "
                      "a:astype(\"float32\")",
                      cdv_dtypes[t].name);
  /* shapes: a 1-d a is one row, a 1-d b one column, and that dimension is dropped from the result */
  cdv_array *ops[2] = {a, b};
  const cdv_array *reads[2] = {a, b}; /* the dense blocks the product reads */
  cdv_array stored[2];
  int flip[2] = {0, 0};
  const char *names[2] = {"a", "b"};
  for (int i = 0; i < 2; i++) {
    if (ops[i]->ndim < 1)
      return luaL_error(L,
                        "matmul: %s is 0-d; matmul takes arrays of 1 or more dimensions (multiply by a number "
                        "with *)",
                        names[i]);
    flip[i] = dense_operand(ops[i], &stored[i]);
    if (flip[i] < 0) { /* a strided view of no transposition: copied (a slice with a step, a 3-d a.T) */
      ops[i] = contiguous_copy(L, i + 1, 3);
      reads[i] = ops[i];
      flip[i] = 0;
    }
    if (flip[i]) reads[i] = &stored[i];
  }
  a = ops[0], b = ops[1]; /* (a copy's block is the one the product uses) */
  if (transa && a->ndim < 2) return cdv_opt_error(L, "transa", "matmul", "a must be 2-d to be transposed");
  if (transb && b->ndim < 2) return cdv_opt_error(L, "transb", "matmul", "b must be 2-d to be transposed");
  int na = a->ndim, nb = b->ndim;
  int64_t m = na == 1 ? 1 : transa ? a->shape[na - 1] : a->shape[na - 2];
  int64_t ka = na == 1 ? a->shape[0] : transa ? a->shape[na - 2] : a->shape[na - 1];
  int64_t kb = nb == 1 ? b->shape[0] : transb ? b->shape[nb - 1] : b->shape[nb - 2];
  int64_t n = nb == 1 ? 1 : transb ? b->shape[nb - 2] : b->shape[nb - 1];
  if (ka != kb) {
    const char *sa = shape_text(L, a), *sb = shape_text(L, b);
    return luaL_error(L, "matmul: shapes %s%s and %s%s do not match: a has %I columns but b has %I rows", sa,
                      transa ? " (transposed)" : "", sb, transb ? " (transposed)" : "", (lua_Integer)ka,
                      (lua_Integer)kb);
  }
  batch_plan plan = {0};
  int64_t mn; /* {2^32, 0} x {0, 2^32}: refused below (NOTE [arrays inside their blocks]), not wrapped here */
  if (__builtin_mul_overflow(m, n, &mn)) mn = INT64_MAX;
  plan_batches(L, a, b, mn, &plan);
  int64_t k = ka, shape[CDV_MAXDIM + 2];
  int ndim = 0;
  for (int i = 0; i < plan.bnd; i++) shape[ndim++] = plan.shape[i];
  if (na >= 2) shape[ndim++] = m;
  if (nb >= 2) shape[ndim++] = n;
  if (ndim > CDV_MAXDIM) return luaL_error(L, "matmul: the result would have more than %d dimensions", CDV_MAXDIM);
  /* devices */
  cdv_device *d = a->block->dev;
  if (b->block->dev != d)
    return luaL_error(L, "matmul: arrays are on %s and %s; move one with a:to(device)", d->alias, b->block->dev->alias);
  check_out(L, a, b, out, ndim, shape);
  /* a 0 beside two huge dimensions passes the checks above ({2^32, 0} x {0, 2^32}): NOTE [arrays inside their
   * blocks] */
  const char *too_large = cdv_shape_problem(L, t, ndim, shape);
  if (too_large != NULL) return luaL_error(L, "matmul: %s", too_large);
  void *stream = cdv_stream_for(L, d, s);
  if (out == NULL) {
    out = cdv_push_array(L, d, t, ndim, shape, CDV_MEM_DEVICE, s);
    out_idx = lua_gettop(L);
  }
  gemm_call g = {reads[0], reads[1], out, transa ^ flip[0], transb ^ flip[1], m, n, k, alpha, beta};
  cdv_err e;
  if (d->be->host_memory) { /* (see NOTE [backend properties]) the host computes on the arrays in place */
    cdv_device_check(L, d);
    if (cdv_host_wait(a->block, &e) != 0 || cdv_host_wait(b->block, &e) != 0 || cdv_host_wait(out->block, &e) != 0)
      return cdv_raise(L, NULL, &e);
    if (out->size > 0 && run_batches(&g, &plan, NULL, &e) != 0)
      return luaL_error(L, "matmul: not enough host memory for the product's panels");
  } else {
    if (m > INT_MAX || n > INT_MAX || k > INT_MAX || plan.count[plan.nb - 1] > INT_MAX)
      return luaL_error(L, "matmul: a dimension is larger than cuBLAS takes (%d)", INT_MAX);
    cdv_device_use(L, d);
    cdv_cublas_handle h = blas_handle(L, d);
    if (out->size > 0) {
      if (cublas_status(&e, "cublasSetStream", cdv_cublas.cublasSetStream_v2(h, stream)) != 0 ||
          run_batches(&g, &plan, h, &e) != 0)
        return cdv_raise(L, d, &e);
      if (cdv_get_state(L)->launch_blocking && d->be->stream_synchronize(d, stream, &e) != 0)
        return cdv_raise(L, d, &e);
    }
  }
  cdv_block_used(a->block, d, stream);
  cdv_block_used(b->block, d, stream);
  cdv_block_used(out->block, d, stream);
  lua_pushvalue(L, out_idx);
  return 1;
}

/* cd._selftest.cublas() -> the path cuBLAS was opened from, or nil and why not (every name tried); loads it.
 * In cd._selftest, not cd: the API fuzzer calls every function of cd, and loading cuBLAS (with cublasLt, half a
 * gigabyte) under valgrind is slow and trips memcheck on glibc's own RUNPATH parsing. */
static int l_cublas(lua_State *L) {
  cdv_err e;
  if (cdv_get_state(L)->sandbox) return luaL_error(L, "_selftest is not available in this sandbox");
  if (cublas_load(&e) != 0) {
    luaL_pushfail(L);
    lua_pushstring(L, e.message);
    return 2;
  }
  lua_pushstring(L, cdv_cublas_path());
  return 1;
}

int cdv_blas_open(lua_State *L) {
  lua_pushcfunction(L, l_matmul);
  lua_setfield(L, -2, "matmul");
  if (lua_getfield(L, -1, "_selftest") == LUA_TTABLE) {
    lua_pushcfunction(L, l_cublas);
    lua_setfield(L, -2, "cublas");
  }
  lua_pop(L, 1);
  luaL_getmetatable(L, CDV_ARRAY); /* a:matmul(b [, opts]): the same function, a being argument #1 */
  if (lua_getfield(L, -1, "methods") == LUA_TTABLE) {
    lua_pushcfunction(L, l_matmul);
    lua_setfield(L, -2, "matmul");
  }
  lua_pop(L, 2);
  return 0;
}
