/*
 * linalg_cuda.c: the C side of cd.linalg on a CUDA device (lua/cudadev/linalg.lua is the public side): cuSOLVER's
 * dense routines over batches of column-major matrices, and cuBLAS's batched LU for many small systems; cuSOLVER
 * opened at run time (NOTE [cusolver library] in loader.c), like cuBLAS.
 *
 * These are internal: cd._linalg.cuda, which linalg.lua takes away. linalg.lua hands over fresh C-contiguous
 * float32 or float64 arrays of 3 dimensions {batch, columns, rows}: read as column-major, each matrix is rows x
 * columns with the row count as leading dimension (NOTE [linalg layouts] in linalg.lua says what it passes for each
 * function). The routines run on the device's current stream, in order with the rest of its work; each matrix's
 * devInfo goes to its place in an int32 array `info` that linalg.lua reads back and words as NumPy does.
 * Workspaces are Arrays of cudadev's allocator, marked used on the stream (cdv_block_used), so their memory is
 * freed only once the stream is past them.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "cdv.h"
#include "cublas_abi.h"
#include "cusolver_abi.h"

static int cusolver_status(cdv_err *e, const char *api, int status) {
  static const char *const names[] = {"CUSOLVER_STATUS_SUCCESS",
                                      "CUSOLVER_STATUS_NOT_INITIALIZED",
                                      "CUSOLVER_STATUS_ALLOC_FAILED",
                                      "CUSOLVER_STATUS_INVALID_VALUE",
                                      "CUSOLVER_STATUS_ARCH_MISMATCH",
                                      "CUSOLVER_STATUS_MAPPING_ERROR",
                                      "CUSOLVER_STATUS_EXECUTION_FAILED",
                                      "CUSOLVER_STATUS_INTERNAL_ERROR",
                                      "CUSOLVER_STATUS_MATRIX_TYPE_NOT_SUPPORTED",
                                      "CUSOLVER_STATUS_NOT_SUPPORTED"};
  if (status == 0) return 0;
  const char *name =
      status > 0 && status < (int)(sizeof names / sizeof *names) ? names[status] : "CUSOLVER_STATUS_UNKNOWN";
  return cdv_fail(e, api, status, name, "cuSOLVER failed");
}

/* ---------------------------------------------------------------- cuSOLVER handles */
/* NOTE [cusolver handles]: as cuBLAS's (NOTE [cublas handles] in blas.c): one handle per device per lua_State,
 * made at the first call on the device, destroyed when the state closes, forgotten (never destroyed) once its
 * context is gone; each call sets its stream. */
#define SOLVER_KEY "cudadev.cusolver_handles"
#define SOLVER_MAGIC 0x63647653686e64ULL /* "cdvShnd" (NOTE [magic]) */
typedef struct solver_handles {
  uint64_t magic;
  struct {
    cdv_cusolver_handle h;
    cdv_device *dev;
    unsigned generation;
  } slot[CDV_MAXDEV];
} solver_handles;

static int solver_handles_gc(lua_State *L) {
  solver_handles *hs = cdv_test_magic(L, 1, sizeof *hs, SOLVER_MAGIC);
  if (hs == NULL) return 0;
  for (int i = 0; i < CDV_MAXDEV; i++) {
    cdv_device *d = hs->slot[i].dev;
    cdv_cusolver_handle h = hs->slot[i].h;
    hs->slot[i].h = NULL;
    if (h == NULL || !cdv_still_owned(d, hs->slot[i].generation) || d->gone) continue;
    cdv_err e;
    if (d->be->activate(d, &e) != 0 || cusolver_status(&e, "cusolverDnDestroy", cdv_cusolver.cusolverDnDestroy(h)) != 0)
      cdv_warn_release(L, "cuSOLVER handle", d, &e); /* __gc never raises */
  }
  return 0;
}

static solver_handles *handle_table(lua_State *L) {
  solver_handles *hs = NULL;
  if (lua_getfield(L, LUA_REGISTRYINDEX, SOLVER_KEY) == LUA_TUSERDATA)
    hs = cdv_test_magic(L, -1, sizeof *hs, SOLVER_MAGIC);
  lua_pop(L, 1);
  if (hs != NULL) return hs;
  hs = lua_newuserdatauv(L, sizeof *hs, 0);
  memset(hs, 0, sizeof *hs);
  hs->magic = SOLVER_MAGIC;
  lua_createtable(L, 0, 2);
  lua_pushcfunction(L, solver_handles_gc);
  lua_setfield(L, -2, "__gc");
  lua_pushliteral(L, "cudadev.CusolverHandles");
  lua_setfield(L, -2, "__name");
  lua_setmetatable(L, -2);
  cdv_track_late(L, -1); /* NOTE [objects made in finalizers] */
  lua_setfield(L, LUA_REGISTRYINDEX, SOLVER_KEY);
  return hs;
}

/* The state's handle for d, on stream (NOTE [cusolver handles]); d is current. */
static cdv_cusolver_handle solver_handle(lua_State *L, cdv_device *d, void *stream) {
  cdv_err e;
  if (cdv_cusolver_load() != 0) {
    cdv_fail(&e, "dlopen", 0, "CUSOLVER_NOT_FOUND", "%s", cdv_cusolver_why());
    cdv_raise(L, d, &e);
  }
  solver_handles *hs = handle_table(L);
  if (d->index < 0 || d->index >= CDV_MAXDEV) luaL_error(L, "linalg: %s has no cuSOLVER slot", d->alias);
  cdv_cusolver_handle h = hs->slot[d->index].h;
  if (h == NULL || hs->slot[d->index].dev != d || hs->slot[d->index].generation != d->generation) {
    hs->slot[d->index].h = NULL; /* stale: its context is gone */
    h = NULL;
    if (cusolver_status(&e, "cusolverDnCreate", cdv_cusolver.cusolverDnCreate(&h)) != 0) cdv_raise(L, d, &e);
    hs->slot[d->index].h = h;
    hs->slot[d->index].dev = d;
    hs->slot[d->index].generation = d->generation;
  }
  if (cusolver_status(&e, "cusolverDnSetStream", cdv_cusolver.cusolverDnSetStream(h, stream)) != 0) cdv_raise(L, d, &e);
  return h;
}

/* ---------------------------------------------------------------- arguments */
/* One call's matrices: the device, its stream and handle, the dtype. */
typedef struct call {
  cdv_device *d;
  void *stream;
  cdv_cusolver_handle h;
  int f64;
  size_t es;
} call;

/* Argument arg as a C-contiguous Array of nd dimensions on the call's device, of dtype t (-1: float32 or
 * float64), each dimension but the batch below INT_MAX; its shape into shape, its elements returned. */
static char *device_matrix(lua_State *L, int arg, int t, int nd, int64_t *shape, cdv_device *d) {
  cdv_array *a = cdv_check_array(L, arg);
  if (a->block->dev != d || a->block->dev->be->host_memory)
    luaL_argerror(L, arg, "array on the call's device expected");
  if (t < 0 ? a->dtype != CDV_F32 && a->dtype != CDV_F64 : (int)a->dtype != t) luaL_argerror(L, arg, "wrong dtype");
  if (a->ndim != nd || !cdv_array_contiguous(a)) luaL_argerror(L, arg, "contiguous array of the right rank expected");
  for (int i = 0; i < nd; i++) {
    if (i > 0 && a->shape[i] > INT_MAX) luaL_argerror(L, arg, "a dimension is larger than cuSOLVER takes");
    shape[i] = a->shape[i];
  }
  return a->data;
}

/* The call for argument 1 (the matrices): its device made current, its stream and handle. */
static call begin(lua_State *L) {
  cdv_array *a = cdv_check_array(L, 1);
  call c = {a->block->dev, NULL, NULL, a->dtype == CDV_F64, cdv_dtypes[a->dtype].size};
  cdv_device_use(L, c.d);
  c.stream = cdv_stream_for(L, c.d, NULL);
  c.h = solver_handle(L, c.d, c.stream);
  return c;
}

/* Marks the arrays at 1..n used on the call's stream and returns 0. */
static int done(lua_State *L, const call *c, int n) {
  for (int i = 1; i <= n; i++)
    if (lua_type(L, i) == LUA_TUSERDATA) cdv_block_used(cdv_check_array(L, i)->block, c->d, c->stream);
  cdv_err e;
  if (cdv_get_state(L)->launch_blocking && c->d->be->stream_synchronize(c->d, c->stream, &e) != 0)
    cdv_raise(L, c->d, &e);
  return 0;
}

static void check(lua_State *L, const call *c, const char *api, int status) {
  cdv_err e;
  if (cusolver_status(&e, api, status) != 0) cdv_raise(L, c->d, &e);
}

/* A device workspace of at least bytes bytes, 8-aligned (an Array left on the stack, freed stream-ordered). */
static void *workspace_bytes(lua_State *L, const call *c, size_t bytes) {
  int64_t n = (int64_t)(bytes / 8) + 1;
  cdv_array *w = cdv_push_array(L, c->d, CDV_U64, 1, &n, CDV_MEM_DEVICE, NULL);
  cdv_block_used(w->block, c->d, c->stream);
  return w->data;
}

/* A workspace of lwork elements of the call's dtype. */
static void *workspace(lua_State *L, const call *c, int lwork) {
  return workspace_bytes(L, c, (size_t)(lwork > 0 ? lwork : 1) * c->es);
}

static void same(lua_State *L, int64_t x, int64_t y) {
  if (x != y) luaL_error(L, "_linalg: shapes do not match (%I and %I)", (lua_Integer)x, (lua_Integer)y);
}

/* Arguments 1 to 3 as most routines take them: the matrices (a {B, x, y}), one vector of the same dtype per matrix
 * (v {B, z}) and the info array ({B}); their shapes into sa and sv. */
typedef struct mats {
  char *a, *v, *info;
} mats;
static mats matrices_vector_info(lua_State *L, const call *c, int64_t *sa, int64_t *sv) {
  int64_t si[1];
  mats m;
  m.a = device_matrix(L, 1, -1, 3, sa, c->d);
  m.v = device_matrix(L, 2, cdv_check_array(L, 1)->dtype, 2, sv, c->d);
  m.info = device_matrix(L, 3, CDV_I32, 1, si, c->d);
  same(L, sv[0], sa[0]), same(L, si[0], sa[0]);
  return m;
}

#define SOLVER(c, name, ...) \
  ((c).f64 ? cdv_cusolver.cusolverDnD##name(__VA_ARGS__) : cdv_cusolver.cusolverDnS##name(__VA_ARGS__))

/* ---------------------------------------------------------------- the routines */
/* _linalg.cuda.getrf(a {B,n,n}, ipiv {B,n} int32, info {B} int32): each a_i <- its LU with pivots */
static int l_getrf(lua_State *L) {
  call c = begin(L);
  int64_t sa[3], sp[2], si[1];
  char *a = device_matrix(L, 1, -1, 3, sa, c.d), *p = device_matrix(L, 2, CDV_I32, 2, sp, c.d);
  char *info = device_matrix(L, 3, CDV_I32, 1, si, c.d);
  same(L, sa[1], sa[2]), same(L, sp[0], sa[0]), same(L, sp[1], sa[1]), same(L, si[0], sa[0]);
  int n = (int)sa[1], lwork = 0;
  if (sa[0] == 0 || n == 0) return done(L, &c, 3);
  check(L, &c, "cusolverDnXgetrf_bufferSize", SOLVER(c, getrf_bufferSize, c.h, n, n, (void *)a, n, &lwork));
  void *w = workspace(L, &c, lwork);
  for (int64_t i = 0; i < sa[0]; i++)
    check(
        L, &c, "cusolverDnXgetrf",
        SOLVER(c, getrf, c.h, n, n, (void *)(a + (size_t)(i * n * n) * c.es), n, w, (int *)p + i * n, (int *)info + i));
  return done(L, &c, 3);
}

/* _linalg.cuda.getrs(a {B,n,n}, ipiv, b {B,k,n}, info, transposed): b_i <- op(a_i)^-1 b_i from getrf's LU */
static int l_getrs(lua_State *L) {
  call c = begin(L);
  int64_t sa[3], sp[2], sb[3], si[1];
  char *a = device_matrix(L, 1, -1, 3, sa, c.d), *p = device_matrix(L, 2, CDV_I32, 2, sp, c.d);
  char *b = device_matrix(L, 3, cdv_check_array(L, 1)->dtype, 3, sb, c.d);
  char *info = device_matrix(L, 4, CDV_I32, 1, si, c.d);
  same(L, sb[0], sa[0]), same(L, sb[2], sa[1]), same(L, sp[0], sa[0]), same(L, si[0], sa[0]);
  int n = (int)sa[1], k = (int)sb[1], op = lua_toboolean(L, 5) ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (sa[0] == 0 || n == 0 || k == 0) return done(L, &c, 4);
  for (int64_t i = 0; i < sa[0]; i++)
    check(L, &c, "cusolverDnXgetrs",
          SOLVER(c, getrs, c.h, op, n, k, (void *)(a + (size_t)(i * n * n) * c.es), n, (int *)p + i * n,
                 (void *)(b + (size_t)(i * n * k) * c.es), n, (int *)info + i));
  return done(L, &c, 4);
}

/* The device array of the B matrix pointers base + i * stride bytes (an Array left on the stack). */
static void *pointers(lua_State *L, const call *c, char *base, int64_t batch, size_t stride) {
  cdv_array *ptrs = cdv_push_array(L, c->d, CDV_U64, 1, &batch, CDV_MEM_DEVICE, NULL);
  void **host = malloc(sizeof(void *) * (size_t)batch);
  if (host == NULL) luaL_error(L, "linalg: not enough host memory for %I matrix pointers", (lua_Integer)batch);
  for (int64_t i = 0; i < batch; i++) host[i] = base + (size_t)i * stride;
  cdv_err e;
  /* a pageable source: the copy has read it when the call returns; the wait keeps that true on every driver */
  int rc = c->d->be->memcpy(c->d, ptrs->data, c->d, host, cdv_cpu(), sizeof(void *) * (size_t)batch, c->stream, &e);
  if (rc == 0) rc = c->d->be->stream_synchronize(c->d, c->stream, &e);
  free(host);
  if (rc != 0) cdv_raise(L, c->d, &e);
  cdv_block_used(ptrs->block, c->d, c->stream);
  return ptrs->data;
}

/* _linalg.cuda.solve_batched(a {B,n,n}, ipiv {B,n}, b {B,k,n}, info {B}): cuBLAS's batched getrf, then getrs
 * with a transposed (a is given as a^T: NOTE [linalg layouts]) */
static int l_solve_batched(lua_State *L) {
  call c = begin(L);
  int64_t sa[3], sp[2], sb[3], si[1];
  char *a = device_matrix(L, 1, -1, 3, sa, c.d), *p = device_matrix(L, 2, CDV_I32, 2, sp, c.d);
  char *b = device_matrix(L, 3, cdv_check_array(L, 1)->dtype, 3, sb, c.d);
  char *info = device_matrix(L, 4, CDV_I32, 1, si, c.d);
  same(L, sb[0], sa[0]), same(L, sb[2], sa[1]), same(L, sp[0], sa[0]), same(L, si[0], sa[0]);
  if (sa[0] > INT_MAX) luaL_error(L, "linalg: a batch larger than cuBLAS takes (%d)", INT_MAX);
  int n = (int)sa[1], k = (int)sb[1], batch = (int)sa[0];
  if (batch == 0 || n == 0 || k == 0) return done(L, &c, 4);
  cdv_cublas_handle bh = cdv_blas_handle(L, c.d);
  cdv_err e;
  if (cdv_cublas_status(&e, "cublasSetStream", cdv_cublas.cublasSetStream_v2(bh, c.stream)) != 0) cdv_raise(L, c.d, &e);
  void *pa = pointers(L, &c, a, batch, (size_t)n * n * c.es), *pb = pointers(L, &c, b, batch, (size_t)n * k * c.es);
  int rc = c.f64 ? cdv_cublas.cublasDgetrfBatched(bh, n, pa, n, (int *)p, (int *)info, batch)
                 : cdv_cublas.cublasSgetrfBatched(bh, n, pa, n, (int *)p, (int *)info, batch);
  if (cdv_cublas_status(&e, "cublasXgetrfBatched", rc) != 0) cdv_raise(L, c.d, &e);
  /* a singular matrix's getrs gives inf or NaN, not a failure: linalg.lua reads getrf's info and raises */
  int hinfo = 0;
  rc = c.f64 ? cdv_cublas.cublasDgetrsBatched(bh, CUBLAS_OP_T, n, k, pa, n, (int *)p, pb, n, &hinfo, batch)
             : cdv_cublas.cublasSgetrsBatched(bh, CUBLAS_OP_T, n, k, pa, n, (int *)p, pb, n, &hinfo, batch);
  if (cdv_cublas_status(&e, "cublasXgetrsBatched", rc) != 0) cdv_raise(L, c.d, &e);
  if (hinfo != 0) luaL_error(L, "cublasXgetrsBatched: argument %d refused", -hinfo);
  return done(L, &c, 4);
}

/* cusolverDnXpotrf, the 64-bit API, as PyTorch's cholesky calls it (bench/arrays_run on an H200, 4096 x 4096
 * float64: PyTorch 2159 us, cudadev's legacy cusolverDn<t>potrf 4971), over the B matrices n x n at a; one device
 * and one host workspace serve them all. */
static void xpotrf(lua_State *L, const call *c, char *a, int64_t batch, int64_t n, int uplo, int *info) {
  int type = c->f64 ? CDV_CUDA_R_64F : CDV_CUDA_R_32F;
  size_t dbytes = 0, hbytes = 0;
  cdv_dn_params params = NULL;
  check(L, c, "cusolverDnCreateParams", cdv_cusolver.cusolverDnCreateParams(&params));
  int rc = cdv_cusolver.cusolverDnXpotrf_bufferSize(c->h, params, uplo, n, type, a, n, type, &dbytes, &hbytes);
  cdv_cusolver.cusolverDnDestroyParams(params); /* before the allocations, which may raise */
  check(L, c, "cusolverDnXpotrf_bufferSize", rc);
  void *dwork = workspace_bytes(L, c, dbytes);
  void *hwork = lua_newuserdatauv(L, hbytes > 0 ? hbytes : 1, 0); /* kept on the stack past the calls */
  check(L, c, "cusolverDnCreateParams", cdv_cusolver.cusolverDnCreateParams(&params));
  rc = 0;
  for (int64_t i = 0; i < batch && rc == 0; i++)
    rc = cdv_cusolver.cusolverDnXpotrf(c->h, params, uplo, n, type, a + (size_t)(i * n * n) * c->es, n, type, dwork,
                                       dbytes, hwork, hbytes, info + i);
  cdv_cusolver.cusolverDnDestroyParams(params);
  check(L, c, "cusolverDnXpotrf", rc);
}

/* _linalg.cuda.potrf(a {B,n,n}, info, upper): a_i's Cholesky factor in the triangle asked for; a stack of matrices
 * of up to POTRF_BATCHED x POTRF_BATCHED in one potrfBatched call, larger ones through xpotrf */
#define POTRF_BATCHED 64
static int l_potrf(lua_State *L) {
  call c = begin(L);
  int64_t sa[3], si[1];
  char *a = device_matrix(L, 1, -1, 3, sa, c.d), *info = device_matrix(L, 2, CDV_I32, 1, si, c.d);
  same(L, sa[1], sa[2]), same(L, si[0], sa[0]);
  int n = (int)sa[1], uplo = lua_toboolean(L, 3) ? CUBLAS_FILL_MODE_UPPER : CUBLAS_FILL_MODE_LOWER;
  if (sa[0] == 0 || n == 0) return done(L, &c, 2);
  if (sa[0] > 1 && sa[0] <= INT_MAX && n <= POTRF_BATCHED) {
    void *pa = pointers(L, &c, a, sa[0], (size_t)n * n * c.es);
    check(L, &c, "cusolverDnXpotrfBatched", SOLVER(c, potrfBatched, c.h, uplo, n, pa, n, (int *)info, (int)sa[0]));
    return done(L, &c, 2);
  }
  xpotrf(L, &c, a, sa[0], n, uplo, (int *)info);
  return done(L, &c, 2);
}

/* _linalg.cuda.geqrf(a {B,n,m}, tau {B,k}, info): each m x n a_i <- its reflectors and R */
static int l_geqrf(lua_State *L) {
  call c = begin(L);
  int64_t sa[3], st[2];
  mats x = matrices_vector_info(L, &c, sa, st);
  char *a = x.a, *tau = x.v, *info = x.info;
  int m = (int)sa[2], n = (int)sa[1], k = m < n ? m : n, lwork = 0;
  same(L, st[1], k);
  if (sa[0] == 0 || k == 0) return done(L, &c, 3);
  check(L, &c, "cusolverDnXgeqrf_bufferSize", SOLVER(c, geqrf_bufferSize, c.h, m, n, (void *)a, m, &lwork));
  void *w = workspace(L, &c, lwork);
  for (int64_t i = 0; i < sa[0]; i++)
    check(L, &c, "cusolverDnXgeqrf",
          SOLVER(c, geqrf, c.h, m, n, (void *)(a + (size_t)(i * m * n) * c.es), m,
                 (void *)(tau + (size_t)(i * k) * c.es), w, lwork, (int *)info + i));
  return done(L, &c, 3);
}

/* _linalg.cuda.orgqr(q {B,qc,m}, tau {B,k}, info): each m x qc q_i (geqrf's reflectors in its first k columns)
 * <- Q's first qc columns */
static int l_orgqr(lua_State *L) {
  call c = begin(L);
  int64_t sq[3], st[2];
  mats x = matrices_vector_info(L, &c, sq, st);
  char *q = x.a, *tau = x.v, *info = x.info;
  int m = (int)sq[2], qc = (int)sq[1], k = (int)st[1], lwork = 0;
  if (k > qc || qc > m) luaL_argerror(L, 1, "q has the wrong number of columns");
  if (sq[0] == 0 || m == 0 || qc == 0) return done(L, &c, 3);
  check(L, &c, "cusolverDnXorgqr_bufferSize",
        SOLVER(c, orgqr_bufferSize, c.h, m, qc, k, (void *)q, m, (void *)tau, &lwork));
  void *w = workspace(L, &c, lwork);
  for (int64_t i = 0; i < sq[0]; i++)
    check(L, &c, "cusolverDnXorgqr",
          SOLVER(c, orgqr, c.h, m, qc, k, (void *)(q + (size_t)(i * m * qc) * c.es), m,
                 (void *)(tau + (size_t)(i * k) * c.es), w, lwork, (int *)info + i));
  return done(L, &c, 3);
}

/* A stack of matrices of up to 32 x 32 (syevjBatched's limit): one Jacobi call for all, its defaults (eigenvalues
 * sorted ascending, machine precision); info_i n + 1 when matrix i did not converge. */
#define SYEVJ_BATCHED 32
static void syevj_batched(lua_State *L, const call *c, char *a, char *w, char *info, int n, int batch, int jobz,
                          int uplo) {
  cdv_syevj_info params = NULL;
  int lwork = 0;
  check(L, c, "cusolverDnCreateSyevjInfo", cdv_cusolver.cusolverDnCreateSyevjInfo(&params));
  int rc = SOLVER(*c, syevjBatched_bufferSize, c->h, jobz, uplo, n, (void *)a, n, (void *)w, &lwork, params, batch);
  cdv_cusolver.cusolverDnDestroySyevjInfo(params); /* before the allocation, which may raise */
  check(L, c, "cusolverDnXsyevjBatched_bufferSize", rc);
  void *work = workspace(L, c, lwork);
  check(L, c, "cusolverDnCreateSyevjInfo", cdv_cusolver.cusolverDnCreateSyevjInfo(&params));
  rc = SOLVER(*c, syevjBatched, c->h, jobz, uplo, n, (void *)a, n, (void *)w, work, lwork, (int *)info, params, batch);
  cdv_cusolver.cusolverDnDestroySyevjInfo(params); /* the work is queued: cuSOLVER keeps what it needs */
  check(L, c, "cusolverDnXsyevjBatched", rc);
}

/* _linalg.cuda.syevd(a {B,n,n}, w {B,n}, info, vectors, upper): eigenvalues ascending, eigenvectors in a_i */
static int l_syevd(lua_State *L) {
  call c = begin(L);
  int64_t sa[3], sw[2];
  mats x = matrices_vector_info(L, &c, sa, sw);
  char *a = x.a, *w = x.v, *info = x.info;
  same(L, sa[1], sa[2]), same(L, sw[1], sa[1]);
  int n = (int)sa[1], lwork = 0;
  int jobz = lua_toboolean(L, 4) ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
  int uplo = lua_toboolean(L, 5) ? CUBLAS_FILL_MODE_UPPER : CUBLAS_FILL_MODE_LOWER;
  if (sa[0] == 0 || n == 0) return done(L, &c, 3);
  if (sa[0] > 1 && sa[0] <= INT_MAX && n <= SYEVJ_BATCHED) {
    syevj_batched(L, &c, a, w, info, n, (int)sa[0], jobz, uplo);
    return done(L, &c, 3);
  }
  check(L, &c, "cusolverDnXsyevd_bufferSize",
        SOLVER(c, syevd_bufferSize, c.h, jobz, uplo, n, (void *)a, n, (void *)w, &lwork));
  void *work = workspace(L, &c, lwork);
  for (int64_t i = 0; i < sa[0]; i++)
    check(L, &c, "cusolverDnXsyevd",
          SOLVER(c, syevd, c.h, jobz, uplo, n, (void *)(a + (size_t)(i * n * n) * c.es), n,
                 (void *)(w + (size_t)(i * n) * c.es), work, lwork, (int *)info + i));
  return done(L, &c, 3);
}

/* The arguments of gesvd and gesvdj: a {B,n,m}, s {B,k}, u and v (nil, or both {B,x,y}), info {B}; the shapes
 * checked here are the batch's and u's and v's presence. */
typedef struct svd_args {
  int64_t sa[3], ss[2], su[3], sv[3], si[1];
  char *a, *s, *u, *v, *info;
} svd_args;
static svd_args svd_arguments(lua_State *L, const call *c) {
  svd_args x = {{0}, {0}, {0}, {0}, {0}, NULL, NULL, NULL, NULL, NULL};
  cdv_dtype t = cdv_check_array(L, 1)->dtype;
  x.a = device_matrix(L, 1, -1, 3, x.sa, c->d), x.s = device_matrix(L, 2, t, 2, x.ss, c->d);
  x.u = lua_isnil(L, 3) ? NULL : device_matrix(L, 3, t, 3, x.su, c->d);
  x.v = lua_isnil(L, 4) ? NULL : device_matrix(L, 4, t, 3, x.sv, c->d);
  x.info = device_matrix(L, 5, CDV_I32, 1, x.si, c->d);
  same(L, x.ss[0], x.sa[0]), same(L, x.si[0], x.sa[0]);
  if ((x.u == NULL) != (x.v == NULL)) luaL_argerror(L, 4, "u and v go together");
  if (x.u != NULL) same(L, x.su[0], x.sa[0]), same(L, x.sv[0], x.sa[0]);
  return x;
}

/* x's s has ks values a matrix, its u (if any) is {B, mu, m} and its v {B, nv, n}. */
static void svd_shapes(lua_State *L, const svd_args *x, int64_t ks, int64_t mu, int64_t nv) {
  same(L, x->ss[1], ks);
  if (x->u != NULL)
    same(L, x->su[1], mu), same(L, x->su[2], x->sa[2]), same(L, x->sv[1], nv), same(L, x->sv[2], x->sa[1]);
}

/* _linalg.cuda.gesvd(a {B,n,m}, s {B,n}, u {B,mu,m} | nil, vt {B,n,n} | nil, info, full): each m x n a_i, m >= n
 * (cuSOLVER's gesvd takes no wide matrix), <- U S V^T: u_i m x mu (mu = m when full, else n), vt_i n x n */
static int l_gesvd(lua_State *L) {
  call c = begin(L);
  svd_args x = svd_arguments(L, &c);
  char *a = x.a, *s = x.s, *u = x.u, *vt = x.v, *info = x.info;
  int64_t B = x.sa[0];
  int m = (int)x.sa[2], n = (int)x.sa[1], full = lua_toboolean(L, 6), lwork = 0;
  int mu = full ? m : n;
  if (m < n) luaL_argerror(L, 1, "gesvd takes m >= n");
  svd_shapes(L, &x, n, mu, n);
  signed char job = u == NULL ? 'N' : full ? 'A' : 'S';
  if (B == 0 || n == 0) return done(L, &c, 5);
  check(L, &c, "cusolverDnXgesvd_bufferSize", SOLVER(c, gesvd_bufferSize, c.h, m, n, &lwork));
  void *work = workspace(L, &c, lwork);
  for (int64_t i = 0; i < B; i++) {
    void *ui = u ? u + (size_t)(i * m * mu) * c.es : NULL, *vi = vt ? vt + (size_t)(i * n * n) * c.es : NULL;
    check(L, &c, "cusolverDnXgesvd",
          SOLVER(c, gesvd, c.h, job, job == 'N' ? 'N' : 'A', m, n, (void *)(a + (size_t)(i * m * n) * c.es), m,
                 (void *)(s + (size_t)(i * n) * c.es), ui, m, vi, n, work, lwork, NULL, (int *)info + i));
  }
  return done(L, &c, 5);
}

/* gesvdj's options as PyTorch sets them: the dtype's machine epsilon as tolerance, at most GESVDJ_SWEEPS sweeps
 * (cuSOLVER's default is 100); a matrix that does not converge reports info min(m, n) + 1, and linalg.lua redoes
 * the batch with gesvd. */
#define GESVDJ_SWEEPS 400

static cdv_gesvdj_info gesvdj_params(lua_State *L, const call *c) {
  cdv_gesvdj_info p = NULL;
  check(L, c, "cusolverDnCreateGesvdjInfo", cdv_cusolver.cusolverDnCreateGesvdjInfo(&p));
  int rc = cdv_cusolver.cusolverDnXgesvdjSetTolerance(p, c->f64 ? 0x1p-52 : 0x1p-23);
  if (rc == 0) rc = cdv_cusolver.cusolverDnXgesvdjSetMaxSweeps(p, GESVDJ_SWEEPS);
  if (rc == 0) rc = cdv_cusolver.cusolverDnXgesvdjSetSortEig(p, 1); /* gesvdjBatched's default is unsorted */
  if (rc != 0) cdv_cusolver.cusolverDnDestroyGesvdjInfo(p);
  check(L, c, "cusolverDnXgesvdjSet", rc);
  return p;
}

/* A stack of square matrices, or of any shape when full, of up to 32 x 32 (gesvdjBatched's limit, which
 * computes the full U and V only): one Jacobi call for all, as PyTorch does; u and v hold B full matrices each. */
#define GESVDJ_BATCHED 32
static void gesvdj_batched(lua_State *L, const call *c, const svd_args *x, int jobz, char *u, char *v) {
  int m = (int)x->sa[2], n = (int)x->sa[1], batch = (int)x->sa[0], lwork = 0;
  cdv_gesvdj_info p = gesvdj_params(L, c);
  int rc = SOLVER(*c, gesvdjBatched_bufferSize, c->h, jobz, m, n, (void *)x->a, m, (void *)x->s, (void *)u, m,
                  (void *)v, n, &lwork, p, batch);
  cdv_cusolver.cusolverDnDestroyGesvdjInfo(p); /* before the allocation, which may raise */
  check(L, c, "cusolverDnXgesvdjBatched_bufferSize", rc);
  void *work = workspace(L, c, lwork);
  p = gesvdj_params(L, c);
  rc = SOLVER(*c, gesvdjBatched, c->h, jobz, m, n, (void *)x->a, m, (void *)x->s, (void *)u, m, (void *)v, n, work,
              lwork, (int *)x->info, p, batch);
  cdv_cusolver.cusolverDnDestroyGesvdjInfo(p);
  check(L, c, "cusolverDnXgesvdjBatched", rc);
}

/* One gesvdj call a matrix, one workspace for all; u and v hold one matrix each (m x mu, n x nv) or, when x has
 * none, one economy matrix for every call. */
static void gesvdj_looped(lua_State *L, const call *c, const svd_args *x, int jobz, int econ, char *u, char *v) {
  int m = (int)x->sa[2], n = (int)x->sa[1], k = m < n ? m : n, lwork = 0;
  size_t ustride = x->u ? (size_t)m * (econ ? k : m) : 0, vstride = x->v ? (size_t)n * (econ ? k : n) : 0;
  if (u == NULL) {
    u = workspace_bytes(L, c, (size_t)m * k * c->es);
    v = workspace_bytes(L, c, (size_t)n * k * c->es);
  }
  cdv_gesvdj_info p = gesvdj_params(L, c);
  int rc = SOLVER(*c, gesvdj_bufferSize, c->h, jobz, econ, m, n, (void *)x->a, m, (void *)x->s, (void *)u, m, (void *)v,
                  n, &lwork, p);
  cdv_cusolver.cusolverDnDestroyGesvdjInfo(p); /* before the allocation, which may raise */
  check(L, c, "cusolverDnXgesvdj_bufferSize", rc);
  void *work = workspace(L, c, lwork);
  p = gesvdj_params(L, c);
  for (int64_t i = 0; i < x->sa[0] && rc == 0; i++)
    rc = SOLVER(*c, gesvdj, c->h, jobz, econ, m, n, (void *)(x->a + (size_t)(i * m * n) * c->es), m,
                (void *)(x->s + (size_t)(i * k) * c->es), (void *)(u + i * ustride * c->es), m,
                (void *)(v + i * vstride * c->es), n, work, lwork, (int *)x->info + i, p);
  cdv_cusolver.cusolverDnDestroyGesvdjInfo(p); /* the work is queued: cuSOLVER keeps what it needs */
  check(L, c, "cusolverDnXgesvdj", rc);
}

/* _linalg.cuda.gesvdj(a {B,n,m}, s {B,k}, u {B,mu,m} | nil, v {B,nv,n} | nil, info, full): each m x n a_i, any
 * shape, <- U S V^T by one-sided Jacobi, PyTorch's default driver (bench/arrays_run on the H200, 1024 x 1024
 * float32: PyTorch 54241 us, cudadev's gesvd 106020): u_i m x mu and v_i n x nv (V, not V^T), mu = m and nv = n
 * when full, else both k = min(m, n); a_i is destroyed. Without u and v, cuSOLVER still writes vectors (PyTorch
 * passes buffers too): workspaces take them. A stack of small matrices goes in one gesvdjBatched call. */
static int l_gesvdj(lua_State *L) {
  call c = begin(L);
  svd_args x = svd_arguments(L, &c);
  char *u = x.u, *v = x.v;
  int64_t *sa = x.sa;
  int m = (int)sa[2], n = (int)sa[1], k = m < n ? m : n, econ = u == NULL || !lua_toboolean(L, 6);
  int mu = econ ? k : m, nv = econ ? k : n, jobz = u ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
  svd_shapes(L, &x, k, mu, nv);
  if (sa[0] == 0 || k == 0) return done(L, &c, 5);
  int batched = sa[0] > 1 && sa[0] <= INT_MAX && m <= GESVDJ_BATCHED && n <= GESVDJ_BATCHED && (!econ || m == n);
  if (batched && u == NULL) { /* m == n: gesvdjBatched writes the full vectors of every matrix */
    u = workspace_bytes(L, &c, (size_t)sa[0] * m * m * c.es);
    v = workspace_bytes(L, &c, (size_t)sa[0] * n * n * c.es);
  }
  if (batched)
    gesvdj_batched(L, &c, &x, jobz, u, v);
  else
    gesvdj_looped(L, &c, &x, jobz, econ, u, v);
  return done(L, &c, 5);
}

/* _linalg.cuda.cusolver() -> the path cuSOLVER opened from, or nil and why not (every name tried) */
static int l_cusolver(lua_State *L) {
  if (cdv_cusolver_load() != 0) {
    luaL_pushfail(L);
    lua_pushstring(L, cdv_cusolver_why());
    return 2;
  }
  lua_pushstring(L, cdv_cusolver_path());
  return 1;
}

/* cd._selftest.linalg_through(routines | nil): with a table, linalg.lua runs every array, the cpu device's too,
 * through its column-major adapter G over `routines` in place of this file's (see NOTE [linalg layouts]; spec/38 gives
 * it LAPACK's column-major routines, so the adapter is checked where there is no GPU); with nil, as before. */
static int l_linalg_through(lua_State *L) {
  if (cdv_get_state(L)->sandbox) return luaL_error(L, "_selftest is not available in this sandbox");
  if (!lua_isnil(L, 1)) luaL_checktype(L, 1, LUA_TTABLE);
  if (lua_getfield(L, LUA_REGISTRYINDEX, CDV_LINALG_KEY) != LUA_TTABLE) return luaL_error(L, "no cd._linalg");
  int t = lua_gettop(L);
  if (lua_getfield(L, t, "cuda_saved") == LUA_TNIL) { /* the first redirection keeps this file's table */
    lua_getfield(L, t, "cuda");
    lua_setfield(L, t, "cuda_saved");
  }
  lua_pop(L, 1);
  if (lua_isnil(L, 1))
    lua_getfield(L, t, "cuda_saved");
  else
    lua_pushvalue(L, 1);
  lua_setfield(L, t, "cuda");
  lua_pushboolean(L, !lua_isnil(L, 1));
  lua_setfield(L, t, "through");
  return 0;
}

int cdv_linalg_cuda_open(lua_State *L) {
  static const luaL_Reg fns[] = {{"getrf", l_getrf},       {"getrs", l_getrs}, {"solve_batched", l_solve_batched},
                                 {"potrf", l_potrf},       {"geqrf", l_geqrf}, {"orgqr", l_orgqr},
                                 {"syevd", l_syevd},       {"gesvd", l_gesvd}, {"gesvdj", l_gesvdj},
                                 {"cusolver", l_cusolver}, {NULL, NULL}};
  luaL_getsubtable(L, -1, "_linalg");
  lua_newtable(L);
  luaL_setfuncs(L, fns, 0);
  lua_setfield(L, -2, "cuda");
  lua_pop(L, 1);
  if (lua_getfield(L, -1, "_selftest") == LUA_TTABLE) {
    lua_pushcfunction(L, l_linalg_through);
    lua_setfield(L, -2, "linalg_through");
  }
  lua_pop(L, 1);
  return 0;
}
