/*
 * linalg_cpu.c: the C side of cd.linalg on the cpu device (lua/cudadev/linalg.lua is the public side): LAPACKE's
 * routines over batches of row-major matrices (linalg_host.h), LAPACKE opened at run time (NOTE [lapacke
 * library] in loader.c), so the module loads and the cpu device works where it is missing.
 *
 * These are internal: cd._linalg, which linalg.lua takes away. linalg.lua has already checked shapes and dtypes
 * and hands over fresh C-contiguous float32 or float64 arrays of 3 dimensions {batch, rows, columns} (vectors
 * {batch, n}), which the routines overwrite; the checks here only keep a wrong call from touching memory
 * outside an array. A failing matrix comes back as its 1-based place in the batch and LAPACK's info, for
 * linalg.lua to word as NumPy's LinAlgError; only LAPACKE's own failures (out of memory) raise here.
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>

#include "cdv.h"
#include "lapacke_abi.h"

#define LA_T float
#define LA_(name) name##_f32
#define LA_P(routine) cdv_lapacke.LAPACKE_s##routine
#include "linalg_host.h"
#undef LA_T
#undef LA_
#undef LA_P
#define LA_T double
#define LA_(name) name##_f64
#define LA_P(routine) cdv_lapacke.LAPACKE_d##routine
#include "linalg_host.h"
#undef LA_T
#undef LA_
#undef LA_P

/* Raises why LAPACKE is not usable: the package to install and every library name tried. */
static void need_lapacke(lua_State *L) {
  if (cdv_lapacke_load() != 0) luaL_error(L, "%s", cdv_lapacke_why());
}

/* Argument arg as an idle, C-contiguous Array in host memory of dtype t (t < 0: float32 or float64) and nd
 * dimensions, each below INT_MAX (LAPACK's int); its elements. nil is NULL where optional. */
static void *host_matrix(lua_State *L, int arg, int t, int nd, int64_t *shape, int optional) {
  if (optional && lua_isnoneornil(L, arg)) return NULL;
  cdv_array *a = cdv_check_array(L, arg);
  if (!a->block->dev->be->host_memory) luaL_argerror(L, arg, "array in host memory expected");
  if (t < 0 ? a->dtype != CDV_F32 && a->dtype != CDV_F64 : (int)a->dtype != t) luaL_argerror(L, arg, "wrong dtype");
  if (a->ndim != nd || !cdv_array_contiguous(a)) luaL_argerror(L, arg, "contiguous array of the right rank expected");
  for (int i = 0; i < nd; i++) {
    if (a->shape[i] > INT_MAX && i > 0) luaL_argerror(L, arg, "a dimension is larger than LAPACK takes");
    shape[i] = a->shape[i];
  }
  cdv_device_check(L, a->block->dev);
  return cdv_array_host_data(L, a);
}

static cdv_dtype dtype_of(lua_State *L, int arg) { return cdv_check_array(L, arg)->dtype; }

/* Checks that dims a[i] == b[j] for the pairs given. */
static void same(lua_State *L, int64_t x, int64_t y) {
  if (x != y) luaL_error(L, "_linalg: shapes do not match (%I and %I)", (lua_Integer)x, (lua_Integer)y);
}

/* The routine's outcome: nothing when every matrix passed, else the failing matrix's place and LAPACK's info (a
 * negative info is a matrix LAPACK would not take: gesdd and syevd refuse one with NaN, NumPy's "did not
 * converge"); LAPACKE's out-of-memory (info -1010 or -1011) raises. */
static int outcome(lua_State *L, const char *routine, int64_t bad, int info) {
  if (bad == 0) return 0;
  if (info == -1010 || info == -1011) return luaL_error(L, "%s: not enough host memory for LAPACK's work", routine);
  lua_pushinteger(L, bad);
  lua_pushinteger(L, info);
  return 2;
}

/* An int array of n for the pivots (a userdata, so an error in between frees it). */
static int *pivots(lua_State *L, int64_t n) { return lua_newuserdatauv(L, sizeof(int) * (size_t)(n > 0 ? n : 1), 0); }

/* _linalg.solve(a {B,n,n}, b {B,n,k}) -> nil | bad, info: b <- a^-1 b (a overwritten) */
static int l_solve(lua_State *L) {
  need_lapacke(L);
  int64_t sa[3], sb[3];
  void *a = host_matrix(L, 1, -1, 3, sa, 0), *b = host_matrix(L, 2, dtype_of(L, 1), 3, sb, 0);
  same(L, sa[0], sb[0]), same(L, sa[1], sa[2]), same(L, sa[1], sb[1]);
  int *ipiv = pivots(L, sa[1]), info = 0;
  int64_t bad = dtype_of(L, 1) == CDV_F32 ? solve_f32(a, b, sa[0], (int)sa[1], (int)sb[2], ipiv, &info)
                                          : solve_f64(a, b, sa[0], (int)sa[1], (int)sb[2], ipiv, &info);
  return outcome(L, "getrs", bad, info);
}

/* _linalg.slogdet(a {B,n,n}, sign {B}, logabs {B}) (a overwritten) */
static int l_slogdet(lua_State *L) {
  need_lapacke(L);
  int64_t sa[3], ss[1], sl[1];
  cdv_dtype t = dtype_of(L, 1);
  void *a = host_matrix(L, 1, -1, 3, sa, 0), *s = host_matrix(L, 2, t, 1, ss, 0), *l = host_matrix(L, 3, t, 1, sl, 0);
  same(L, sa[0], ss[0]), same(L, sa[0], sl[0]), same(L, sa[1], sa[2]);
  int *ipiv = pivots(L, sa[1]), info = 0;
  int64_t bad = t == CDV_F32 ? slogdet_f32(a, s, l, sa[0], (int)sa[1], ipiv, &info)
                             : slogdet_f64(a, s, l, sa[0], (int)sa[1], ipiv, &info);
  return outcome(L, "getrf", bad, info);
}

/* _linalg.cholesky(a {B,n,n}, lower) -> nil | bad, info: a <- its factor */
static int l_cholesky(lua_State *L) {
  need_lapacke(L);
  int64_t sa[3];
  void *a = host_matrix(L, 1, -1, 3, sa, 0);
  same(L, sa[1], sa[2]);
  int lower = lua_toboolean(L, 2), info = 0;
  int64_t bad = dtype_of(L, 1) == CDV_F32 ? cholesky_f32(a, sa[0], (int)sa[1], lower, &info)
                                          : cholesky_f64(a, sa[0], (int)sa[1], lower, &info);
  return outcome(L, "potrf", bad, info);
}

/* _linalg.qr(a {B,m,n}, tau {B,k} [, r {B,rr,n}]): a <- geqrf's factors, r <- R's first rr rows */
static int l_qr(lua_State *L) {
  need_lapacke(L);
  int64_t sa[3], st[2], sr[3] = {0, 0, 0};
  cdv_dtype t = dtype_of(L, 1);
  void *a = host_matrix(L, 1, -1, 3, sa, 0), *tau = host_matrix(L, 2, t, 2, st, 0), *r = host_matrix(L, 3, t, 3, sr, 1);
  same(L, sa[0], st[0]), same(L, st[1], sa[1] < sa[2] ? sa[1] : sa[2]);
  if (r != NULL) same(L, sr[0], sa[0]), same(L, sr[2], sa[2]);
  int info = 0;
  int64_t bad = t == CDV_F32 ? qr_f32(a, tau, r, sa[0], (int)sa[1], (int)sa[2], (int)sr[1], &info)
                             : qr_f64(a, tau, r, sa[0], (int)sa[1], (int)sa[2], (int)sr[1], &info);
  return outcome(L, "geqrf", bad, info);
}

/* _linalg.orgqr(a {B,m,n}, tau {B,k}, q {B,m,qc}): q <- Q's first qc columns (k <= qc <= m) */
static int l_orgqr(lua_State *L) {
  need_lapacke(L);
  int64_t sa[3], st[2], sq[3];
  cdv_dtype t = dtype_of(L, 1);
  void *a = host_matrix(L, 1, -1, 3, sa, 0), *tau = host_matrix(L, 2, t, 2, st, 0), *q = host_matrix(L, 3, t, 3, sq, 0);
  int64_t k = sa[1] < sa[2] ? sa[1] : sa[2];
  same(L, sa[0], st[0]), same(L, st[1], k), same(L, sq[0], sa[0]), same(L, sq[1], sa[1]);
  if (sq[2] < k || sq[2] > sa[1]) luaL_argerror(L, 3, "q has the wrong number of columns");
  int info = 0;
  int64_t bad = t == CDV_F32 ? orgqr_f32(a, tau, q, sa[0], (int)sa[1], (int)sa[2], (int)sq[2], &info)
                             : orgqr_f64(a, tau, q, sa[0], (int)sa[1], (int)sa[2], (int)sq[2], &info);
  return outcome(L, "orgqr", bad, info);
}

/* _linalg.eigh(a {B,n,n}, w {B,n}, vectors, lower) -> nil | bad, info: w <- eigenvalues, a <- eigenvectors */
static int l_eigh(lua_State *L) {
  need_lapacke(L);
  int64_t sa[3], sw[2];
  cdv_dtype t = dtype_of(L, 1);
  void *a = host_matrix(L, 1, -1, 3, sa, 0), *w = host_matrix(L, 2, t, 2, sw, 0);
  same(L, sa[1], sa[2]), same(L, sw[0], sa[0]), same(L, sw[1], sa[1]);
  int vectors = lua_toboolean(L, 3), lower = lua_toboolean(L, 4), info = 0;
  int64_t bad = t == CDV_F32 ? eigh_f32(a, w, sa[0], (int)sa[1], vectors, lower, &info)
                             : eigh_f64(a, w, sa[0], (int)sa[1], vectors, lower, &info);
  return outcome(L, "syevd", bad, info);
}

/* _linalg.svd(a {B,m,n}, s {B,k} [, u {B,m,uc}, vt {B,vr,n}], full) -> nil | bad, info */
static int l_svd(lua_State *L) {
  need_lapacke(L);
  int64_t sa[3], ss[2], su[3], sv[3];
  cdv_dtype t = dtype_of(L, 1);
  void *a = host_matrix(L, 1, -1, 3, sa, 0), *s = host_matrix(L, 2, t, 2, ss, 0);
  void *u = host_matrix(L, 3, t, 3, su, 1), *vt = host_matrix(L, 4, t, 3, sv, 1);
  int full = lua_toboolean(L, 5), info = 0;
  int64_t m = sa[1], n = sa[2], k = m < n ? m : n;
  same(L, ss[0], sa[0]), same(L, ss[1], k);
  if ((u == NULL) != (vt == NULL)) luaL_argerror(L, 4, "u and vt go together");
  if (u != NULL) {
    same(L, su[0], sa[0]), same(L, su[1], m), same(L, su[2], full ? m : k);
    same(L, sv[0], sa[0]), same(L, sv[1], full ? n : k), same(L, sv[2], n);
  }
  int64_t bad = t == CDV_F32 ? svd_f32(a, s, u, vt, sa[0], (int)m, (int)n, full, &info)
                             : svd_f64(a, s, u, vt, sa[0], (int)m, (int)n, full, &info);
  return outcome(L, "gesdd", bad, info);
}

/* _linalg.lapacke() -> the path LAPACKE opened from, or nil and why not (every name tried) */
static int l_lapacke(lua_State *L) {
  if (cdv_lapacke_load() != 0) {
    luaL_pushfail(L);
    lua_pushstring(L, cdv_lapacke_why());
    return 2;
  }
  lua_pushstring(L, cdv_lapacke_path());
  return 1;
}

int cdv_linalg_cpu_open(lua_State *L) {
  static const luaL_Reg fns[] = {{"solve", l_solve}, {"slogdet", l_slogdet}, {"cholesky", l_cholesky},
                                 {"qr", l_qr},       {"orgqr", l_orgqr},     {"eigh", l_eigh},
                                 {"svd", l_svd},     {"lapacke", l_lapacke}, {NULL, NULL}};
  luaL_getsubtable(L, -1, "_linalg");
  lua_pushvalue(L, -1); /* linalg_cuda.c's _selftest.linalg_through finds it there once linalg.lua took it away */
  lua_setfield(L, LUA_REGISTRYINDEX, CDV_LINALG_KEY);
  lua_newtable(L);
  luaL_setfuncs(L, fns, 0);
  lua_setfield(L, -2, "cpu");
  lua_pop(L, 1);
  return 0;
}
