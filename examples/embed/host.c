/*
 * embed_host: a program that embeds Lua with cudadev, through src/cudadev.h only (examples/embed; built by
 * CMake, run by spec/75-embed_spec.lua).
 *
 * The host owns a buffer of N float32: device memory in a CUDA context of its own when a GPU is present
 * (the driver opened with dlopen: this program does not link libcuda), else host memory for the cpu device.
 * That host memory is a MAP_SHARED mapping rather than malloc's: the cpu device runs each launch in a forked
 * child by default (NOTE [fault containment] in src/cpu_run.c), and only shared memory carries the child's
 * writes back (with malloc'd memory, set CUDADEV_CPU_FORK=0 to run launches in-process).
 * On a GPU the host adopts its context under the alias "host". It hands the buffer to a Lua script as the
 * Array `buf` (no copy; the Array owns it through a release callback) and its stream as `host_stream`; the script
 * fills the buffer and launches a kernel on it; the host checks the result in C. The release callback must
 * run exactly once, at lua_close.
 *
 *   make build && build/embed_host     (from the repository root; the source is examples/embed/host.c)
 *
 *   embed_host             the run above
 *   embed_host --sandbox   the same host with a sandboxed state (a memory quota, an allow-list of compile
 *                          options): the script tries what the sandbox refuses and prints each refusal; a
 *                          host callback raises a cudadev.Error; the host keeps running and says so
 *   embed_host --api-checks   each C entry point called with NULL or invalid arguments: one error line each
 *   embed_host --teardown-first   the first run, then the host destroys its stream and its CUDA context
 *                          before lua_close, with the script's objects alive: using one raises, and lua_close
 *                          is quiet (NOTE [adopted contexts] in src/backend_cuda.c)
 * Set CUDADEV_DEVICE=cpu to use the cpu device on a GPU machine. Exit status 0 when every check passed.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <sys/mman.h>
#include <stdlib.h>
#include <string.h>

#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>

#include "cudadev.h"

#define N 1024

/* ---------------------------------------------------------------- the bits of the driver API we use */
typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef unsigned long long CUdeviceptr;

static struct {
  CUresult (*init)(unsigned);
  CUresult (*device_count)(int *);
  CUresult (*device_get)(CUdevice *, int);
  CUresult (*ctx_create)(CUcontext *, unsigned, CUdevice);
  CUresult (*ctx_destroy)(CUcontext);
  CUresult (*ctx_push)(CUcontext);
  CUresult (*ctx_pop)(CUcontext *);
  CUresult (*mem_alloc)(CUdeviceptr *, size_t);
  CUresult (*mem_free)(CUdeviceptr);
  CUresult (*memcpy_dtoh)(void *, CUdeviceptr, size_t);
  CUresult (*stream_create)(CUstream *, unsigned);
  CUresult (*stream_destroy)(CUstream);
  CUresult (*stream_synchronize)(CUstream);
} cu;

/* libcuda by dlopen; 0 when a GPU can be used. The versioned names are the ones every driver exports. */
static int open_cuda(void) {
  const char *want = getenv("CUDADEV_DEVICE");
  if (want != NULL && strcmp(want, "cpu") == 0) return -1;
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) return -1;
  static const struct {
    void **fn;
    const char *name;
  } syms[] = {{(void **)&cu.init, "cuInit"},
              {(void **)&cu.device_count, "cuDeviceGetCount"},
              {(void **)&cu.device_get, "cuDeviceGet"},
              {(void **)&cu.ctx_create, "cuCtxCreate_v2"},
              {(void **)&cu.ctx_destroy, "cuCtxDestroy_v2"},
              {(void **)&cu.ctx_push, "cuCtxPushCurrent_v2"},
              {(void **)&cu.ctx_pop, "cuCtxPopCurrent_v2"},
              {(void **)&cu.mem_alloc, "cuMemAlloc_v2"},
              {(void **)&cu.mem_free, "cuMemFree_v2"},
              {(void **)&cu.memcpy_dtoh, "cuMemcpyDtoH_v2"},
              {(void **)&cu.stream_create, "cuStreamCreate"},
              {(void **)&cu.stream_destroy, "cuStreamDestroy_v2"},
              {(void **)&cu.stream_synchronize, "cuStreamSynchronize"}};
  for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++)
    if ((*syms[i].fn = dlsym(lib, syms[i].name)) == NULL) return -1;
  int n = 0;
  if (cu.init(0) != 0 || cu.device_count(&n) != 0 || n == 0) return -1;
  return 0;
}

/* ---------------------------------------------------------------- the host's resources */
typedef struct host {
  int gpu;
  CUcontext ctx;
  CUstream stream;
  void *buf; /* device pointer (gpu) or malloc'd memory */
  int releases; /* release_buffer calls */
} host;

static host H;

/* The Array's release callback: called once, when the last Array over the buffer goes. */
static void release_buffer(void *ud, void *ptr) {
  host *h = ud;
  h->releases++;
  if (!h->gpu) {
    munmap(ptr, N * sizeof(float));
  } else if (h->ctx != NULL) { /* NULL: the host tore its context down before lua_close (--teardown-first), and
                                  * the buffer went with it: there is nothing left to free. (This once fell through
                                  * to munmap, which unmapped whatever the process had placed at that address since:
                                  * the intermittent "double free or corruption" of --teardown-first.) */
    CUcontext prev;
    if (cu.ctx_push(h->ctx) == 0) {
      cu.mem_free((CUdeviceptr)(uintptr_t)ptr);
      cu.ctx_pop(&prev);
    }
  }
}

/* the buffer's N floats, into out */
static int read_buffer(const void *ptr, float *out) {
  if (!H.gpu) {
    memcpy(out, ptr, N * sizeof *out);
    return 0;
  }
  CUcontext prev;
  int rc = cu.ctx_push(H.ctx) != 0 || cu.stream_synchronize(H.stream) != 0 ||
           cu.memcpy_dtoh(out, (CUdeviceptr)(uintptr_t)ptr, N * sizeof *out) != 0;
  cu.ctx_pop(&prev);
  return rc ? -1 : 0;
}

/* ---------------------------------------------------------------- callbacks the script calls */
/* host.checksum(a): reads a float32 Array from C (cudadev_check_array) and sums it on the host */
static int host_checksum(lua_State *L) {
  cudadev_array_info a;
  cudadev_check_array(L, 1, &a);
  if (strcmp(a.dtype, "float32") != 0 || a.size != N)
    return cudadev_error(L, "checksum wants %d float32, got %d %s", N, (int)a.size, a.dtype);
  float v[N];
  if (read_buffer(a.ptr, v) != 0) return cudadev_error(L, "cannot read the buffer on %s", a.device);
  double sum = 0;
  for (int i = 0; i < N; i++) sum += v[i];
  lua_pushnumber(L, sum);
  lua_pushfstring(L, "%s[%d] on %s", a.dtype, (int)a.shape[0], a.device);
  return 2;
}

/* host.wrap(what): the second half of the buffer as a borrowed 2-d Array (the host keeps it alive: no
 * release callback), or, for "bad dtype" / "bad device", the error cudadev_push_array raises */
static int host_wrap(lua_State *L) {
  const char *what = luaL_checkstring(L, 1);
  int64_t shape[2] = {N / 64, 32};
  const char *dev = H.gpu ? "host" : "cpu";
  if (strcmp(what, "bad dtype") == 0)
    cudadev_push_array(L, H.buf, "float33", 1, shape, dev, NULL, NULL);
  else if (strcmp(what, "bad device") == 0)
    cudadev_push_array(L, H.buf, "float32", 1, shape, "cuda:7", NULL, NULL);
  else
    cudadev_push_array(L, (float *)H.buf + N / 2, "f32", 2, shape, dev, NULL, NULL);
  return 1;
}

/* host.is_array(v): cudadev_to_array, which never raises */
static int host_is_array(lua_State *L) {
  cudadev_array_info a;
  lua_pushboolean(L, cudadev_to_array(L, 1, &a));
  return 1;
}

/* host.fail(why): a host callback that fails, as cudadev errors do (api "host") */
static int host_fail(lua_State *L) { return cudadev_error(L, "%s", luaL_checkstring(L, 1)); }

/* ---------------------------------------------------------------- the scripts */
static const char kernel_src[] =
    "extern \"C\" __global__ void axpb(float *x, float a, float b, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) x[i] = a * x[i] + b;\n"
    "}\n";

/* x[i] = i, then x = 2x + 1 with the kernel (or in Lua while the cpu device cannot compile yet) */
static const char plain_script[] =
    "local cd = require 'cudadev'\n"
    "local n, src = ...\n"
    "local t = {}\n"
    "for i = 1, n do t[i] = i - 1 end\n"
    "buf:copy_from(t)\n"
    "print('script: buf = ' .. tostring(buf))\n"
    "print('script: host_stream = ' .. tostring(host_stream))\n"
    "local ok, m = pcall(cd.compile, src, {device = buf.device})\n"
    "if ok then\n"
    "  m.axpb({dim = n, stream = host_stream}, buf, 2.0, 1.0, n)\n"
    "  host_stream:synchronize()\n"
    "  print('script: kernel ran on ' .. buf.device.alias)\n"
    "elseif buf.device.is_cpu and cd.type(m) == 'Error' and (m.log or '') == '' then\n"
    "  print('script: kernel part skipped: the cpu device cannot compile here (' .. tostring(m):match('^[^\\n]*') .. "
    "')')\n"
    "  local v = buf:totable()\n"
    "  for i = 1, n do v[i] = 2 * v[i] + 1 end\n"
    "  buf:copy_from(v)\n"
    "else\n"
    "  error(m, 0)\n"
    "end\n"
    "local sum, what = host.checksum(buf)\n"
    "print(('script: host.checksum(buf) = %.0f (%s)'):format(sum, what))\n"
    "local half = host.wrap('half')\n"
    "print(('script: borrowed half: %s, half[1][1] = %g, half[16][32] = %g'):format(\n"
    "  table.concat(half.shape, 'x'), half[1][1], half[16][32]))\n"
    "half = nil\n"
    "collectgarbage()   -- a borrowed Array going away leaves the memory alone\n"
    "print('script: is_array(buf), is_array({}): ', host.is_array(buf), host.is_array({}))\n"
    "for _, what in ipairs({'bad dtype', 'bad device'}) do\n"
    "  local ok, err = pcall(host.wrap, what)\n"
    "  print('script: ' .. what .. ': ' .. tostring(err))\n"
    "end\n"
    "local ok2, err = pcall(host.fail, 'frame 7 is not ready')\n"
    "print('script: host callback raised ' .. cd.type(err) .. ': ' .. tostring(err))\n";

static const char sandbox_script[] =
    "local cd = require 'cudadev'\n"
    "local n, src = ...\n"
    "local refused = 0\n"
    "local function try(what, f, ...)\n"
    "  local ok, err = pcall(f, ...)\n"
    "  if ok then error('the sandbox allowed ' .. what, 0) end\n"
    "  local msg = type(err) == 'string' and err:gsub('^[^:]*:%d+: ', '') or tostring(err)\n"
    "  print(('sandbox: refused %s: %s'):format(what, msg))\n"
    "  refused = refused + 1\n"
    "end\n"
    "try('a raw address', function() return buf.ptr end)\n"
    "try('a stream handle', function() return host_stream.handle end)\n"
    "try('load_module', cd.load_module, '.version 8.0\\n.target sm_90\\n.address_size 64\\n.visible .entry k() { ret; "
    "}')\n"
    "try('a cpu kernel', cd.compile, src, {device = 'cpu'})\n"
    "try('a disallowed compile option', cd.compile, src, {options = {'-G'}})\n"
    "try('map_cuda_device with a pointer', cd.map_cuda_device, 'mine', 0x1234)\n"
    "try('memory beyond the quota', cd.empty, 64 * 1024)\n"
    "try('the debug library', function() return debug.getregistry() end)\n"
    "try('a metatable change', function() getmetatable(buf).__gc = nil end)\n"
    "local a = cd.zeros(24 * 1024)                 -- 96 KiB of the 128 KiB quota\n"
    "a:free()\n"
    "local b = cd.zeros(24 * 1024)                 -- fits again: the free gave the bytes back\n"
    "b = nil\n"
    "local c = cd.zeros(24 * 1024)                 -- fits: the collector gives b's bytes back\n"
    "c:free()\n"
    "print('sandbox: allowed: arrays within the quota, and again after frees')\n"
    "if not buf.device.is_cpu then\n"
    "  local m = cd.compile(src, {device = buf.device, options = {'--use_fast_math', '-DSCALE=2'}})\n"
    "  print('sandbox: allowed: compiling on ' .. buf.device.alias .. ' with allowed options')\n"
    "  try('an integer as a pointer', m.axpb, {dim = 1}, 12345, 2.0, 1.0, 1)\n"
    "end\n"
    "local ok, err = pcall(host.fail, 'frame 7 is not ready')\n"
    "print('sandbox: host callback raised ' .. cd.type(err) .. ': ' .. tostring(err))\n"
    "buf:fill(3)\n"
    "return refused\n";

/* ---------------------------------------------------------------- main */
static int traceback(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (msg == NULL) msg = luaL_tolstring(L, 1, NULL);
  luaL_traceback(L, L, msg, 1);
  return 1;
}

/* Everything that touches Lua runs here, under lua_pcall: the cudadev_* calls that raise are safe. */
static int setup(lua_State *L) {
  int sandbox = (int)lua_toboolean(L, 1);
  luaL_openlibs(L);
  if (sandbox) {
    /* The sandbox (doc/sandbox.md, the threat model in cudadev.h) limits what cudadev lets a script do; the rest
     * of the state is the host's to trim. The debug library goes: with it a script reads and rewrites any
     * metatable, upvalue and registry entry, so it can stop finalizers (our release_buffer would never be called)
     * and undo what other libraries protect. package.loadlib and the C searchers load native code; io and os
     * reach files and processes. A real host would also bound CPU time (lua_sethook) and memory (lua_Alloc). */
    static const char *const removed[] = {"debug", "io", "os", NULL};
    for (int i = 0; removed[i] != NULL; i++) {
      lua_pushnil(L);
      lua_setglobal(L, removed[i]);
    }
    lua_getglobal(L, "package");
    lua_pushnil(L);
    lua_setfield(L, -2, "loadlib");
    lua_pushliteral(L, "");
    lua_setfield(L, -2, "cpath");
    lua_pop(L, 1);
    static const char *const allowed[] = {"-O3", "--use_fast_math", "-D*", NULL};
    cudadev_options o = {.sandbox = 1, .memory_quota = 128 * 1024, .allowed_compile_options = allowed};
    cudadev_set_options(L, &o);
  }
  luaL_requiref(L, "cudadev", luaopen_cudadev, 1);
  lua_pop(L, 1);
  const char *dev = "cpu";
  if (H.gpu) {
    cudadev_adopt_context(L, "host", H.ctx); /* the host's context, as the device "host" */
    lua_pop(L, 1);
    dev = "host";
  }
  int64_t shape[1] = {N};
  cudadev_push_array(L, H.buf, "float32", 1, shape, dev, release_buffer, &H);
  lua_setglobal(L, "buf");
  cudadev_push_stream(L, H.stream, dev);
  lua_setglobal(L, "host_stream");
  static const luaL_Reg fns[] = {
      {"checksum", host_checksum}, {"fail", host_fail}, {"wrap", host_wrap}, {"is_array", host_is_array}, {NULL, NULL}};
  luaL_newlib(L, fns);
  lua_setglobal(L, "host");
  return 0;
}

static int run(lua_State *L, const char *script, const char *name, int nresults) {
  lua_pushcfunction(L, traceback);
  int h = lua_gettop(L);
  if (luaL_loadbuffer(L, script, strlen(script), name) != LUA_OK) {
    fprintf(stderr, "embed_host: %s\n", lua_tostring(L, -1));
    return -1;
  }
  lua_pushinteger(L, N);
  lua_pushstring(L, kernel_src);
  if (lua_pcall(L, 2, nresults, h) != LUA_OK) {
    fprintf(stderr, "embed_host: script failed: %s\n", lua_tostring(L, -1));
    return -1;
  }
  return 0;
}

/* ---------------------------------------------------------------- --api-checks */
/* What a host gets wrong when it calls cudadev.h: each entry point with the NULL or invalid arguments a C caller
 * can pass, under lua_pcall as cudadev.h asks; one line per case, `name: the error raised` or `name: returned N`.
 * On a GPU the host's stream is also handed over as a stream of cuda:0 (another context: refused) and of its own
 * context adopted as "host" (accepted). */
static int null_dtype(lua_State *L) {
  int64_t n = 4;
  static float buf[4];
  cudadev_push_array(L, buf, NULL, 1, &n, "cpu", NULL, NULL);
  return 0;
}

static int bad_ndim(lua_State *L) {
  static float buf[4];
  cudadev_push_array(L, buf, "float32", 9, NULL, "cpu", NULL, NULL);
  return 0;
}

static int null_shape(lua_State *L) {
  static float buf[4];
  cudadev_push_array(L, buf, "float32", 1, NULL, "cpu", NULL, NULL);
  return 0;
}

static int cpu_stream(lua_State *L) {
  static int not_a_stream;
  cudadev_push_stream(L, &not_a_stream, "cpu");
  return 0;
}

static int unknown_device(lua_State *L) {
  cudadev_push_stream(L, NULL, "nope:3");
  return 0;
}

static int null_info(lua_State *L) {
  int64_t n = 4;
  static float buf[4];
  cudadev_push_array(L, buf, "float32", 1, &n, "cpu", NULL, NULL);
  cudadev_check_array(L, -1, NULL);
  return 0;
}

static int null_info_to(lua_State *L) {
  int64_t n = 4;
  static float buf[4];
  cudadev_push_array(L, buf, "float32", 1, &n, "cpu", NULL, NULL);
  lua_pushinteger(L, cudadev_to_array(L, -1, NULL));
  return 1;
}

static int null_fmt(lua_State *L) { return cudadev_error(L, NULL); }

static int null_alias(lua_State *L) {
  cudadev_adopt_context(L, NULL, NULL);
  return 0;
}

static int other_context_stream(lua_State *L) { /* the host's stream as a stream of cuda:0: another context */
  cudadev_push_stream(L, H.stream, "cuda:0");
  return 0;
}

static int own_context_stream(lua_State *L) { /* the same stream on its own context, adopted: accepted */
  cudadev_adopt_context(L, "host", H.ctx);
  lua_pop(L, 1);
  cudadev_push_stream(L, H.stream, "host");
  lua_pushinteger(L, 1);
  return 1;
}

static void api_check(lua_State *L, const char *name, lua_CFunction f) {
  lua_pushcfunction(L, f);
  if (lua_pcall(L, 0, 1, 0) != LUA_OK)
    printf("%s: %s\n", name, luaL_tolstring(L, -1, NULL));
  else
    printf("%s: returned %s\n", name, luaL_tolstring(L, -1, NULL));
  lua_settop(L, 0);
}

static int api_checks(void) {
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  luaL_requiref(L, "cudadev", luaopen_cudadev, 1);
  lua_settop(L, 0);
  api_check(L, "push_array with a NULL dtype", null_dtype);
  api_check(L, "push_array with 9 dimensions", bad_ndim);
  api_check(L, "push_array with a NULL shape", null_shape);
  api_check(L, "push_stream of a handle on cpu", cpu_stream);
  api_check(L, "push_stream on an unknown device", unknown_device);
  api_check(L, "check_array with a NULL info", null_info);
  api_check(L, "to_array with a NULL info", null_info_to);
  api_check(L, "error with a NULL format", null_fmt);
  api_check(L, "adopt_context with a NULL alias", null_alias);
  if (H.gpu) {
    api_check(L, "push_stream of another context's stream", other_context_stream);
    api_check(L, "push_stream of the adopted context's stream", own_context_stream);
  }
  lua_close(L);
  printf("embed_host: api checks done\n");
  return 0;
}

int main(int argc, char **argv) {
  int sandbox = argc > 1 && strcmp(argv[1], "--sandbox") == 0, failures = 0;
  /* --teardown-first: the host destroys its own CUDA context before lua_close, with the script's objects
   * (arrays on the adopted context, a wrapped stream, a module) still alive: lua_close must not crash, abort
   * or warn (Lua warnings are switched on to show any) */
  int teardown_first = argc > 1 && strcmp(argv[1], "--teardown-first") == 0;
  float v[N];
  H.gpu = open_cuda() == 0;
  if (H.gpu) {
    CUdevice d;
    CUcontext prev;
    CUdeviceptr p;
    if (cu.device_get(&d, 0) != 0 || cu.ctx_create(&H.ctx, 0, d) != 0 || cu.mem_alloc(&p, N * sizeof(float)) != 0 ||
        cu.stream_create(&H.stream, 1 /* CU_STREAM_NON_BLOCKING */) != 0) {
      fprintf(stderr, "embed_host: the CUDA driver failed to set up a context, a buffer and a stream\n");
      return 1;
    }
    cu.ctx_pop(&prev); /* cuCtxCreate made it current; cudadev makes it current as needed */
    H.buf = (void *)(uintptr_t)p;
  } else if ((H.buf = mmap(NULL, N * sizeof(float), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0)) ==
             MAP_FAILED) {
    return 1;
  }
  if (argc > 1 && strcmp(argv[1], "--api-checks") == 0) return api_checks(); /* the buffer is not used */
  printf("embed_host: %s buffer of %d float32 on %s%s\n", H.gpu ? "cuMemAlloc'd" : "mmap'd", N,
         H.gpu ? "the host's own CUDA context (adopted as \"host\")" : "the cpu device", sandbox ? ", sandboxed" : "");

  lua_State *L = luaL_newstate();
  lua_pushcfunction(L, setup);
  lua_pushboolean(L, sandbox);
  if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
    fprintf(stderr, "embed_host: setup failed: %s\n", lua_tostring(L, -1));
    return 1;
  }
  if (run(L, sandbox ? sandbox_script : plain_script, sandbox ? "=sandbox" : "=script", sandbox ? 1 : 0) != 0) {
    failures++;
  } else {
    /* the result, checked in C on the host's own pointer */
    if (read_buffer(H.buf, v) != 0) {
      printf("host: cannot read the buffer back\n");
      failures++;
    } else {
      int bad = -1;
      for (int i = 0; i < N && bad < 0; i++)
        if (v[i] != (sandbox ? 3.0f : 2.0f * (float)i + 1.0f)) bad = i;
      if (bad >= 0) {
        printf("host: check FAILED at %d: %g\n", bad, (double)v[bad]);
        failures++;
      } else {
        printf("host: check ok: buf[i] == %s for all %d elements\n", sandbox ? "3" : "2*i + 1", N);
      }
    }
    if (sandbox) {
      printf("host: still running after %d refusals; quota in use: %zu bytes\n", (int)lua_tointeger(L, -1),
             cudadev_memory_quota_used(L));
      lua_pop(L, 1);
    }
  }
  lua_pop(L, 1); /* the traceback handler */
  if (teardown_first && H.gpu) {
    lua_warning(L, "@on", 0);
    CUcontext prev;
    cu.ctx_push(H.ctx);
    cu.stream_destroy(H.stream);
    cu.ctx_pop(&prev);
    cu.ctx_destroy(H.ctx);
    H.ctx = NULL;
    printf("host: tore down its CUDA context before lua_close\n");
    fflush(stdout);
    /* the script's objects are still there: using one is an error that says why, not a crash */
    static const char after[] =
        "local ok, err = pcall(function() return buf:totable() end)\n"
        "print('script: after the teardown: ' .. tostring(err):gsub('^after:%d+: ', ''))";
    if (luaL_loadbuffer(L, after, strlen(after), "=after") != LUA_OK || lua_pcall(L, 0, 0, 0) != LUA_OK) {
      printf("host: the script after the teardown failed: %s\n", lua_tostring(L, -1));
      failures++;
    }
  }
  lua_close(L);
  if (H.releases != 1) {
    printf("host: release callback called %d times (want 1)\n", H.releases);
    failures++;
  } else {
    printf("host: release callback called once, at lua_close\n");
  }
  if (H.gpu && H.ctx != NULL) {
    CUcontext prev;
    cu.ctx_push(H.ctx);
    cu.stream_destroy(H.stream);
    cu.ctx_pop(&prev);
    cu.ctx_destroy(H.ctx);
  }
  printf("embed_host: %s\n", failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}
