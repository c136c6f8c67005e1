/*
 * embed_threads: four host threads, each with its own lua_State, use cudadev at the same time on one
 * device (the default device: the GPU when there is one, else cpu). Each state has its own memory quota;
 * each thread allocates, copies (table -> device, device -> device, device -> table, pinned host -> device,
 * with pinned blocks from the process-wide pool), compiles (one
 * module shared by all threads through the kernel cache, one of its own) and launches on a stream of its
 * own, checks every value in Lua, and checks in C that its quota is given back. Run by
 * spec/75-embed_spec.lua; exit status 0 when every thread passed.
 *
 *   make build && build/embed_threads     (from the repository root)
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>

#include "cudadev.h"

#define THREADS 4
#define ROUNDS 10

static const char script[] =
    "local cd = require 'cudadev'\n"
    "local id, rounds = ...\n"
    "local src = [[\n"
    "extern \"C\" __global__ void iota(float *x, float v, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) x[i] = v + i;\n"
    "}]]\n"
    "local mine = src:gsub('iota', 'iota' .. id):gsub('v %+ i', 'v * 2 + i')\n"
    "local dev = cd.get_device()\n"
    "local kernels, why = true, nil\n"
    "local ok, shared = pcall(cd.compile, src)\n"
    "if not ok then\n"
    "  if dev.is_cpu and cd.type(shared) == 'Error' and (shared.log or '') == '' then\n"
    "    kernels, why = false, tostring(shared):match('^[^\\n]*')\n"
    "  else error(shared, 0) end\n"
    "end\n"
    "local own = kernels and cd.compile(mine)\n"
    "local s = cd.stream()\n"
    "for r = 1, rounds do\n"
    "  local n = 1000 + 37 * id + r\n"
    "  local t = {}\n"
    "  for i = 1, n do t[i] = id * 10000 + r + i end\n"
    "  local a = cd.array(t)\n"
    "  local b = cd.empty_like(a)\n"
    "  cd.copy(b, a)\n"
    "  local back = b:totable()\n"
    "  for i = 1, n do assert(back[i] == t[i], ('copy: element %d is %s, want %s'):format(i, back[i], t[i])) end\n"
    "  local p = cd.empty(n, {pinned = true})   -- pinned blocks: one pool for every state\n"
    "  cd.copy(p, t)\n"
    "  b:zero()\n"
    "  b:copy_from(p)\n"
    "  p:free()\n"
    "  back = b:totable()\n"
    "  for i = 1, n do assert(back[i] == t[i], ('pinned: element %d is %s, want %s'):format(i, back[i], t[i])) end\n"
    "  if kernels then\n"
    "    shared.iota({dim = n, stream = s}, a, r, n)\n"
    "    own['iota' .. id]({dim = n, stream = s}, b, id, n)\n"
    "    s:synchronize()\n"
    "    local x, y = a:totable(), b:totable()\n"
    "    for i = 1, n do\n"
    "      assert(x[i] == r + i - 1, ('kernel: element %d is %s, want %s'):format(i, x[i], r + i - 1))\n"
    "      assert(y[i] == id * 2 + i - 1, ('own kernel: element %d is %s'):format(i, y[i]))\n"
    "    end\n"
    "  end\n"
    "  a:free()\n"
    "end\n"
    "local limit = (id + 1) * 2^18                   -- float32 elements in this state's quota\n"
    "local ok2, err = pcall(cd.empty, limit + 1)\n"
    "assert(not ok2 and tostring(err):find(('quota of %d.0 MiB exceeded'):format(id + 1), 1, true), tostring(err))\n"
    "return ('%d rounds of allocations, copies%s on %s; quota %d MiB enforced'):format(rounds,\n"
    "  kernels and ' and two kernels' or ' (kernels skipped: ' .. why .. ')', dev.alias, id + 1)\n";

typedef struct job {
  int id, ok;
  char msg[600];
} job;

static pthread_barrier_t start;

static int traceback(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (msg == NULL) msg = luaL_tolstring(L, 1, NULL);
  luaL_traceback(L, L, msg, 1);
  return 1;
}

/* under lua_pcall: open the state with its quota, run the script */
static int body(lua_State *L) {
  job *j = lua_touserdata(L, 1);
  luaL_openlibs(L);
  cudadev_set_memory_quota(L, (size_t)(j->id + 1) << 20);
  luaL_requiref(L, "cudadev", luaopen_cudadev, 1);
  lua_pop(L, 1);
  lua_pushcfunction(L, traceback);
  int handler = lua_gettop(L);
  if (luaL_loadbuffer(L, script, sizeof script - 1, "=thread") != LUA_OK) return lua_error(L);
  lua_pushinteger(L, j->id);
  lua_pushinteger(L, ROUNDS);
  if (lua_pcall(L, 2, 1, handler) != LUA_OK) return lua_error(L);
  return 1;
}

static void *worker(void *arg) {
  job *j = arg;
  pthread_barrier_wait(&start); /* every thread starts at once: luaopen_cudadev included */
  lua_State *L = luaL_newstate();
  lua_pushcfunction(L, body);
  lua_pushlightuserdata(L, j);
  if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
    snprintf(j->msg, sizeof j->msg, "%s", lua_tostring(L, -1));
  } else {
    lua_gc(L, LUA_GCCOLLECT);
    size_t used = cudadev_memory_quota_used(L);
    j->ok = used == 0;
    snprintf(j->msg, sizeof j->msg, used == 0 ? "%s" : "%s, but %zu bytes of quota still in use", lua_tostring(L, -1),
             used);
  }
  lua_close(L);
  return NULL;
}

int main(void) {
  pthread_t t[THREADS];
  job jobs[THREADS];
  int failures = 0;
  pthread_barrier_init(&start, NULL, THREADS);
  for (int i = 0; i < THREADS; i++) {
    memset(&jobs[i], 0, sizeof jobs[i]);
    jobs[i].id = i;
    pthread_create(&t[i], NULL, worker, &jobs[i]);
  }
  for (int i = 0; i < THREADS; i++) {
    pthread_join(t[i], NULL);
    printf("thread %d: %s: %s\n", i, jobs[i].ok ? "ok" : "FAILED", jobs[i].msg);
    failures += !jobs[i].ok;
  }
  printf("embed_threads: %s\n", failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}
