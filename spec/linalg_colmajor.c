/*
 * spec/linalg_colmajor.c: a test helper of spec/38-linalg_spec.lua, built by it with the host's C compiler into a Lua
 * module: LAPACK's column-major routines (LAPACKE with LAPACK_COL_MAJOR, opened with dlopen as linalg_cpu.c does)
 * called with the arguments linalg_cuda.c gives cuSOLVER, so that linalg.lua's column-major adapter (NOTE [linalg
 * layouts]) runs on the cpu device. Each function takes the dtype (true: float64), then LAPACKE's arguments with
 * matrices as addresses (a.ptr), and returns LAPACK's info.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

enum { COL_MAJOR = 102 };
static void *lib;

#define ADDR(i) ((void *)(intptr_t)luaL_checkinteger(L, i))
#define INT(i) ((int)luaL_checkinteger(L, i))
#define CHAR(i) (luaL_checkstring(L, i)[0])

/* The routine "LAPACKE_" + s or d + name, as a function pointer of type T. */
#define ROUTINE(T, name)                               \
  T f;                                                 \
  do {                                                 \
    char sym[64] = "LAPACKE_";                         \
    strcat(sym, lua_toboolean(L, 1) ? "d" : "s");      \
    strcat(sym, name);                                 \
    void *p = dlsym(lib, sym);                         \
    if (p == NULL) return luaL_error(L, "no %s", sym); \
    memcpy(&f, &p, sizeof p);                          \
  } while (0)

typedef int (*getrf_t)(int, int, int, void *, int, void *);
typedef int (*getrs_t)(int, char, int, int, void *, int, void *, void *, int);
typedef int (*potrf_t)(int, char, int, void *, int);
typedef int (*geqrf_t)(int, int, int, void *, int, void *);
typedef int (*orgqr_t)(int, int, int, int, void *, int, void *);
typedef int (*syevd_t)(int, char, char, int, void *, int, void *);
typedef int (*gesvd_t)(int, char, char, int, int, void *, int, void *, void *, int, void *, int, void *);

static int getrf(lua_State *L) {
  ROUTINE(getrf_t, "getrf");
  lua_pushinteger(L, f(COL_MAJOR, INT(2), INT(3), ADDR(4), INT(5), ADDR(6)));
  return 1;
}
static int getrs(lua_State *L) {
  ROUTINE(getrs_t, "getrs");
  lua_pushinteger(L, f(COL_MAJOR, CHAR(2), INT(3), INT(4), ADDR(5), INT(6), ADDR(7), ADDR(8), INT(9)));
  return 1;
}
static int potrf(lua_State *L) {
  ROUTINE(potrf_t, "potrf");
  lua_pushinteger(L, f(COL_MAJOR, CHAR(2), INT(3), ADDR(4), INT(5)));
  return 1;
}
static int geqrf(lua_State *L) {
  ROUTINE(geqrf_t, "geqrf");
  lua_pushinteger(L, f(COL_MAJOR, INT(2), INT(3), ADDR(4), INT(5), ADDR(6)));
  return 1;
}
static int orgqr(lua_State *L) {
  ROUTINE(orgqr_t, "orgqr");
  lua_pushinteger(L, f(COL_MAJOR, INT(2), INT(3), INT(4), ADDR(5), INT(6), ADDR(7)));
  return 1;
}
static int syevd(lua_State *L) {
  ROUTINE(syevd_t, "syevd");
  lua_pushinteger(L, f(COL_MAJOR, CHAR(2), CHAR(3), INT(4), ADDR(5), INT(6), ADDR(7)));
  return 1;
}
/* gesvd(dtype, jobu, jobvt, m, n, a, lda, s, u, ldu, vt, ldvt): superb (LAPACKE's extra output) is ours */
static int gesvd(lua_State *L) {
  ROUTINE(gesvd_t, "gesvd");
  double superb[512];
  if (INT(4) > 512 || INT(5) > 512) return luaL_error(L, "gesvd: matrices of up to 512 only");
  lua_pushinteger(L, f(COL_MAJOR, CHAR(2), CHAR(3), INT(4), INT(5), ADDR(6), INT(7), ADDR(8), ADDR(9), INT(10),
                       ADDR(11), INT(12), superb));
  return 1;
}

int luaopen_linalg_colmajor(lua_State *L) {
  static const luaL_Reg fns[] = {{"getrf", getrf}, {"getrs", getrs}, {"potrf", potrf}, {"geqrf", geqrf},
                                 {"orgqr", orgqr}, {"syevd", syevd}, {"gesvd", gesvd}, {NULL, NULL}};
  const char *path = luaL_checkstring(L, 1);
  lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) return luaL_error(L, "%s", dlerror());
  luaL_newlib(L, fns);
  return 1;
}
