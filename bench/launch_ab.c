/*
 * launch_ab.c: launch cost of cudadev against the raw driver API in ONE process, interleaved.
 *
 * bench/c_driver.c and bench/lua_bench.lua are separate processes, and their launch costs differ from run
 * to run by more than the 5-10% the goals are about (CPU placement, clocks, the GPU's queue state): an
 * empty launch measured at 3.95 µs ±6% in C. This program takes that noise out of the ratio. It embeds Lua,
 * loads cudadev (build/cudadev.so), compiles the benchmark kernels through it, and loads the same image
 * again with cuModuleLoadData in the same (primary) context for its own C launches. Then it takes turns,
 * REPS rounds in a rotating order, each turn N launches and one synchronize, and prints each side's median:
 *   NAME_ab_c          C: cuLaunchKernel + cuCtxSynchronize
 *   NAME_ab_c_ctx      C with a cuCtxGetCurrent before each launch, as cudadev's backend makes (info: what
 *                      the context check costs)
 *   NAME_ab_lua        cudadev: a Lua loop k(cfg, ...) with cfg a table made once + dev:synchronize()
 *   NAME_ab_lua_lc     the same with cfg a LaunchConfig (cd.launch_config, NOTE [launch configs])
 *   NAME_ab_lua_floor  the floor of any Lua binding: a Lua loop calling a C function of this program that does
 *                      nothing but the same cuLaunchKernel (no argument, no check; info: what is left for
 *                      cudadev's own code is the distance between this side and lua_lc)
 * for NAME launch_empty and launch_5arg, and launch_sync: an empty launch followed each time by a synchronize
 * (cuCtxSynchronize; dev:synchronize() in Lua), N / 10 of them a turn. Both sides launch on the legacy default
 * stream, as a C program that names no stream does.
 *
 * Usage: launch_ab CPATH   (CPATH: where cudadev.so is, as a Lua cpath pattern: build/?.so)
 * libcuda is dlopen'd here too (cudadev has it loaded already; this takes a second reference).
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { REPS = 15, N = 20000 };

static CUresult (*p_cuCtxSynchronize)(void);
static CUresult (*p_cuModuleLoadData)(CUmodule *, const void *);
static CUresult (*p_cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
static CUresult (*p_cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                    CUstream, void **, void **);
static CUresult (*p_cuMemAlloc)(CUdeviceptr *, size_t);
static CUresult (*p_cuCtxGetCurrent)(CUcontext *);

static void die(const char *what, const char *why) {
  fprintf(stderr, "launch_ab: %s: %s\n", what, why);
  exit(1);
}

static void check(CUresult r, const char *call) {
  if (r != CUDA_SUCCESS) {
    char code[32];
    snprintf(code, sizeof code, "CUresult %d", (int)r);
    die(call, code);
  }
}

static void *sym(void *h, const char *name) {
  void *p = dlsym(h, name);
  if (p == NULL) die("dlsym", name);
  return p;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v) {
  qsort(v, REPS, sizeof *v, cmp);
  return v[REPS / 2];
}

/* The benchmark kernels through cudadev; the globals the Lua side times, and the images for C. */
static const char SETUP[] =
    "local cpath = ...\n"
    "package.cpath = cpath .. ';' .. package.cpath\n"
    "local cd = require 'cudadev'\n"
    "local dev = cd.device(0)\n"
    "cd.set_device(dev)\n"
    "local me = cd.compile('extern \"C\" __global__ void empty() {}\\n', { name = 'empty.cu' })\n"
    "local m5 = cd.compile([[\n"
    "extern \"C\" __global__ void args5(float *p, int i, float f, size_t n, float *q)\n"
    "{\n"
    "  if (i < 0) p[n] = f * q[0];   /* never taken: the launch is what is measured */\n"
    "}\n"
    "]], { name = 'args5.cu' })\n"
    "local empty, args5 = me.empty, m5.args5\n"
    "local p, q = cd.empty(262144), cd.empty(262144)\n"
    "local cfg = { grid = 1, block = 1 }   -- made once, as a program launching in a loop would\n"
    "local lc = cd.launch_config(cfg)\n"
    "function lua_empty(n) for _ = 1, n do empty(cfg) end dev:synchronize() end\n"
    "function lua_5arg(n) for _ = 1, n do args5(cfg, p, 1, 2.5, 1024, q) end dev:synchronize() end\n"
    "function lua_empty_lc(n) for _ = 1, n do empty(lc) end dev:synchronize() end\n"
    "function lua_5arg_lc(n) for _ = 1, n do args5(lc, p, 1, 2.5, 1024, q) end dev:synchronize() end\n"
    "function lua_sync(n) for _ = 1, n do empty(cfg) dev:synchronize() end end\n"
    "function lua_sync_lc(n) for _ = 1, n do empty(lc) dev:synchronize() end end\n"
    "function lua_empty_floor(n) for _ = 1, n do raw_empty() end dev:synchronize() end\n"
    "function lua_5arg_floor(n) for _ = 1, n do raw_5arg() end dev:synchronize() end\n"
    "function lua_sync_floor(n) for _ = 1, n do raw_empty() dev:synchronize() end end\n"
    "dev:synchronize()\n"
    "return me.cubin or me.ptx, m5.cubin or m5.ptx, dev.name\n";

static void lua_loop(lua_State *L, const char *fn, int n) {
  lua_getglobal(L, fn);
  lua_pushinteger(L, n);
  if (lua_pcall(L, 1, 0, 0) != LUA_OK) die(fn, lua_tostring(L, -1));
}

static void c_loop(CUfunction f, void **args, int n, int with_ctx, int sync_each) {
  CUcontext cur;
  for (int i = 0; i < n; i++) {
    if (with_ctx) check(p_cuCtxGetCurrent(&cur), "cuCtxGetCurrent");
    check(p_cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL), "cuLaunchKernel");
    if (sync_each) check(p_cuCtxSynchronize(), "cuCtxSynchronize");
  }
  check(p_cuCtxSynchronize(), "cuCtxSynchronize");
}

/* raw_empty() / raw_5arg() in Lua: cuLaunchKernel of the function and arguments in the upvalues, nothing else */
static int raw_launch(lua_State *L) {
  check(p_cuLaunchKernel(lua_touserdata(L, lua_upvalueindex(1)), 1, 1, 1, 1, 1, 1, 0, NULL,
                         lua_touserdata(L, lua_upvalueindex(2)), NULL),
        "cuLaunchKernel");
  return 0;
}

static void set_raw(lua_State *L, const char *name, CUfunction f, void **args) {
  lua_pushlightuserdata(L, f);
  lua_pushlightuserdata(L, args);
  lua_pushcclosure(L, raw_launch, 2);
  lua_setglobal(L, name);
}

enum { SIDES = 5 };
static const char *const side_names[SIDES] = {"c", "c_ctx", "lua", "lua_lc", "lua_floor"};

static void run_side(lua_State *L, int side, const char *lua_fn, CUfunction f, void **args, int n, int sync_each) {
  char name[64];
  switch (side) {
    case 0: c_loop(f, args, n, 0, sync_each); break;
    case 1: c_loop(f, args, n, 1, sync_each); break;
    case 2: lua_loop(L, lua_fn, n); break;
    default: snprintf(name, sizeof name, "%s_%s", lua_fn, side == 3 ? "lc" : "floor"); lua_loop(L, name, n);
  }
}

/* REPS rounds of N launches per side, the order rotating each round; prints each side's median, in µs per
 * launch. */
static void ab(lua_State *L, const char *name, const char *lua_fn, CUfunction f, void **args, int sync_each) {
  double t[SIDES][REPS];
  int n = sync_each ? N / 10 : N;
  for (int side = 0; side < SIDES; side++) run_side(L, side, lua_fn, f, args, 1000, sync_each); /* warm-up */
  for (int r = 0; r < REPS; r++) {
    for (int j = 0; j < SIDES; j++) {
      int side = (r + j) % SIDES;
      double t0 = now();
      run_side(L, side, lua_fn, f, args, n, sync_each);
      t[side][r] = (now() - t0) / n * 1e6;
    }
  }
  for (int side = 0; side < SIDES; side++) printf("%s_ab_%s %.3f us\n", name, side_names[side], median(t[side]));
}

int main(int argc, char **argv) {
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  if (luaL_loadstring(L, SETUP) != LUA_OK) die("setup", lua_tostring(L, -1));
  lua_pushstring(L, argc > 1 ? argv[1] : "build/?.so");
  if (lua_pcall(L, 1, 3, 0) != LUA_OK) die("setup", lua_tostring(L, -1));
  const char *img_empty = lua_tostring(L, -3), *img_5 = lua_tostring(L, -2);
  printf("info gpu %s\n", lua_tostring(L, -1));

  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (h == NULL) die("dlopen libcuda.so.1", dlerror());
  p_cuCtxSynchronize = sym(h, "cuCtxSynchronize");
  p_cuModuleLoadData = sym(h, "cuModuleLoadData");
  p_cuModuleGetFunction = sym(h, "cuModuleGetFunction");
  p_cuLaunchKernel = sym(h, "cuLaunchKernel");
  p_cuMemAlloc = sym(h, "cuMemAlloc_v2");
  p_cuCtxGetCurrent = sym(h, "cuCtxGetCurrent");

  /* cudadev left the device's primary context current on this thread: C's modules load into it */
  CUmodule me, m5;
  CUfunction fe, f5;
  check(p_cuModuleLoadData(&me, img_empty), "cuModuleLoadData");
  check(p_cuModuleLoadData(&m5, img_5), "cuModuleLoadData");
  check(p_cuModuleGetFunction(&fe, me, "empty"), "cuModuleGetFunction");
  check(p_cuModuleGetFunction(&f5, m5, "args5"), "cuModuleGetFunction");
  CUdeviceptr p, q;
  check(p_cuMemAlloc(&p, 1 << 20), "cuMemAlloc");
  check(p_cuMemAlloc(&q, 1 << 20), "cuMemAlloc");
  int i = 1;
  float fl = 2.5f;
  size_t n = 1024;
  void *args5[] = {&p, &i, &fl, &n, &q};
  set_raw(L, "raw_empty", fe, NULL);
  set_raw(L, "raw_5arg", f5, args5);

  ab(L, "launch_empty", "lua_empty", fe, NULL, 0);
  ab(L, "launch_5arg", "lua_5arg", f5, args5, 0);
  ab(L, "launch_sync", "lua_sync", fe, NULL, 1);
  lua_close(L);
  return 0;
}
