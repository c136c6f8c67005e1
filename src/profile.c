/*
 * profile.c: profiling from Lua. cd.profile_start() / cd.profile_stop() / cd.profiling(fn, ...) tell the CUDA
 * profiler (Nsight Systems, Nsight Compute with --profile-from-start off) which part of a script to record;
 * cd.range(name, fn, ...), cd.range_push(name) and cd.range_pop() mark NVTX ranges on its timeline.
 *
 * NOTE [profiling no-ops]: both halves cost nothing and never fail when nobody listens. The profiler calls go
 * through the driver (cuProfilerStart/Stop: the backend's profiler operation) and do nothing without a driver or when the default device
 * is the cpu device. NVTX is the toolkit's header-only NVTX3: its first call looks for a tool injected through
 * NVTX_INJECTION64_PATH (Nsight sets it) and, without one, every later call returns at once. A build without
 * the NVTX3 headers (CMake defines CDV_HAVE_NVTX when it finds them) keeps the functions as no-ops.
 *
 * cd.profiling and cd.range call fn with lua_pcallk, so fn may yield (the continuation finishes the job), and
 * they stop the profiler / close the range before an error goes on, unchanged.
 */
#include <string.h>

#include "cdv.h"

#ifdef CDV_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

/* cuProfilerStart / cuProfilerStop in the default device's context; 1 when the profiler was told, 0 for a
 * no-op (NOTE [profiling no-ops]). quiet: a failure is not raised (stopping after fn failed). */
static int profiler(lua_State *L, int start, int quiet) {
  if (cdv_cuda_load() != 0) return 0;
  cdv_device *d = cdv_default_device(L);
  if (d->be->profiler == NULL) return 0; /* NOTE [optional operations] */
  cdv_err e;
  if (quiet) {
    if (d->sticky || d->be->activate(d, &e) != 0) return 0;
    return d->be->profiler(d, start, &e) == 0;
  }
  cdv_device_use(L, d);
  if (d->be->profiler(d, start, &e) != 0) cdv_raise(L, d, &e);
  return 1;
}

/* cd.profile_start() -> true when the CUDA profiler was told, false for a no-op */
static int l_profile_start(lua_State *L) {
  lua_pushboolean(L, profiler(L, 1, 0));
  return 1;
}

/* cd.profile_stop() -> the same */
static int l_profile_stop(lua_State *L) {
  lua_pushboolean(L, profiler(L, 0, 0));
  return 1;
}

/* The name of a range: a string without NUL bytes (NVTX takes a C string). */
static const char *check_name(lua_State *L, int arg) {
  if (lua_type(L, arg) != LUA_TSTRING)
    luaL_argerror(L, arg, lua_pushfstring(L, "range name must be a string, got %s", cdv_typename(L, arg)));
  size_t n;
  const char *s = lua_tolstring(L, arg, &n);
  if (strlen(s) != n) luaL_argerror(L, arg, "range name must not contain NUL bytes");
  return s;
}

static void range_push(const char *name) {
#ifdef CDV_HAVE_NVTX
  nvtxRangePushA(name);
#else
  (void)name;
#endif
}

static void range_pop(void) {
#ifdef CDV_HAVE_NVTX
  nvtxRangePop();
#endif
}

/* cd.range_push(name): opens a nested NVTX range on the calling thread */
static int l_range_push(lua_State *L) {
  range_push(check_name(L, 1));
  return 0;
}

/* cd.range_pop(): closes the innermost one */
static int l_range_pop(lua_State *L) {
  (void)L;
  range_pop();
  return 0;
}

/* After fn (returned, or raised: status): close what was opened, then fn's results or its error. */
enum { WRAP_PROFILING = 1, WRAP_RANGE = 2 };
static int wrap_finish(lua_State *L, int status, lua_KContext what) {
  if (what == WRAP_RANGE)
    range_pop();
  else
    profiler(L, 0, status != LUA_OK && status != LUA_YIELD);
  if (status != LUA_OK && status != LUA_YIELD) return lua_error(L); /* the error value, as fn raised it */
  return lua_gettop(L);
}

/* fn (at 1) with the arguments after it; the stack is left with its results only */
static int wrap_call(lua_State *L, lua_KContext what) {
  return wrap_finish(L, lua_pcallk(L, lua_gettop(L) - 1, LUA_MULTRET, 0, what, wrap_finish), what);
}

/* cd.profiling(fn, ...) -> fn(...)'s results, with the profiler on around it */
static int l_profiling(lua_State *L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  profiler(L, 1, 0);
  return wrap_call(L, WRAP_PROFILING);
}

/* cd.range(name, fn, ...) -> fn(...)'s results, inside the NVTX range `name` */
static int l_range(lua_State *L) {
  const char *name = check_name(L, 1);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  range_push(name);
  lua_remove(L, 1);
  return wrap_call(L, WRAP_RANGE);
}

int cdv_profile_open(lua_State *L) {
  static const luaL_Reg fns[] = {{"profile_start", l_profile_start},
                                 {"profile_stop", l_profile_stop},
                                 {"profiling", l_profiling},
                                 {"range", l_range},
                                 {"range_push", l_range_push},
                                 {"range_pop", l_range_pop},
                                 {NULL, NULL}};
  luaL_setfuncs(L, fns, 0);
  return 0;
}
