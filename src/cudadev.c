/*
 * cudadev.c: luaopen_cudadev, the per-state record, and the pure-Lua conveniences built into the
 * library (the files of lua/cudadev, embedded at build time so an embedding host needs one artefact).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cdv.h"
#include "cudadev.h"

struct cdv_embedded { const char *name; const char *data; size_t len; };
extern const struct cdv_embedded cdv_embedded_files[];

/* The registry key of the state record: this variable's address, a light userdata, so the lookup hashes a
 * pointer instead of interning a C string (cdv_get_state runs several times per allocation). */
static const char STATE_KEY = 0;

long cdv_live[CDV_LIVE_N];   /* NOTE [live objects] */

/* cd._live() -> {Array=, Stream=, Event=, Module=, Kernel=, Graph=, blocks=, total=} */
static int l_live(lua_State *L) {
  static const char *const names[CDV_LIVE_N] = {"Array", "blocks", "Stream", "Event", "Module", "Kernel", "Graph"};
  long total = 0;
  lua_createtable(L, 0, CDV_LIVE_N + 1);
  for (int i = 0; i < CDV_LIVE_N; i++) {
    long n = __atomic_load_n(&cdv_live[i], __ATOMIC_RELAXED);
    lua_pushinteger(L, n);
    lua_setfield(L, -2, names[i]);
    if (i != CDV_LIVE_BLOCK) total += n;
  }
  lua_pushinteger(L, total);
  lua_setfield(L, -2, "total");
  return 1;
}

/* NOTE [test hooks] (cdv.h): process-wide, read under a lock by every copy that could be staged. */
static cdv_hooks hooks;
static pthread_mutex_t hooks_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t hooks_once = PTHREAD_ONCE_INIT;

static size_t env_count(const char *name) {
  const char *v = getenv(name);
  char *end;
  unsigned long long n = v != NULL ? strtoull(v, &end, 10) : 0;
  return v != NULL && *v != '\0' && *end == '\0' && n < ((size_t)1 << 40) ? (size_t)n : 0;
}

static void hooks_from_env(void) {
  hooks.staging_chunk = env_count("CUDADEV_STAGING_CHUNK");
  size_t t = env_count("CUDADEV_STAGING_THREADS");
  hooks.staging_threads = t < 256 ? (int)t : 256;
  const char *fake = getenv("CUDADEV_FAKE_PINNED");
  hooks.fake_pinned = fake != NULL && strcmp(fake, "1") == 0;
}

cdv_hooks cdv_get_hooks(void) {
  pthread_once(&hooks_once, hooks_from_env);
  pthread_mutex_lock(&hooks_lock);
  cdv_hooks h = hooks;
  pthread_mutex_unlock(&hooks_lock);
  return h;
}

static void push_hooks(lua_State *L, const cdv_hooks *h) {
  lua_createtable(L, 0, 3);
  lua_pushinteger(L, (lua_Integer)h->staging_chunk);
  lua_setfield(L, -2, "staging_chunk");
  lua_pushinteger(L, h->staging_threads);
  lua_setfield(L, -2, "staging_threads");
  lua_pushboolean(L, h->fake_pinned);
  lua_setfield(L, -2, "fake_pinned");
}

/* An integer field of the hooks table, 0 to max. */
static lua_Integer hook_count(lua_State *L, const char *k, lua_Integer def, lua_Integer max) {
  if (cdv_opt_field(L, 1, k) == LUA_TNIL) {
    lua_pop(L, 1);
    return def;
  }
  int isint;
  lua_Integer v = lua_tointegerx(L, -1, &isint);
  if (!isint || v < 0 || v > max)
    luaL_argerror(L, 1, lua_pushfstring(L, "'%s' must be an integer from 0 to %I", k, max));
  lua_pop(L, 1);
  return v;
}

/* cd._hooks([{staging_chunk=, staging_threads=, fake_pinned=}]) -> the settings before the call */
static int l_hooks(lua_State *L) {
  static const char *const known[] = {"staging_chunk", "staging_threads", "fake_pinned", NULL};
  cdv_hooks old = cdv_get_hooks(), h = old;
  if (!lua_isnoneornil(L, 1)) {
    if (cdv_get_state(L)->sandbox) return luaL_error(L, "test hooks are not available in this sandbox");
    cdv_check_options(L, 1, known, "_hooks");
    h.staging_chunk = (size_t)hook_count(L, "staging_chunk", (lua_Integer)h.staging_chunk, (lua_Integer)1 << 40);
    h.staging_threads = (int)hook_count(L, "staging_threads", h.staging_threads, 256);
    h.fake_pinned = cdv_check_boolean_field(L, 1, "fake_pinned", h.fake_pinned, "_hooks");
    pthread_mutex_lock(&hooks_lock);
    hooks = h;
    pthread_mutex_unlock(&hooks_lock);
  }
  push_hooks(L, &old);
  return 1;
}

/* NOTE [objects made in finalizers]: lua_close runs the finalizers of every object, and an object made by one
 * of them (a RAII wrapper's __gc that allocates a scratch Array) is never finalized: Lua stops marking objects
 * for finalization once it closes. Its resource would leak. An object made while a finalizer runs (lua_gc
 * answers -1 then) or while the collector is stopped is therefore remembered, weakly, in a registry table, and
 * when the state's own finalizer runs (the last of lua_close: it was set first) each one still remembered is
 * finalized by hand (every __gc of the module may run twice: a released object is closed). After that, the
 * state refuses to make any. */
static const char LATE_KEY = 'l';

void cdv_track_late(lua_State *L, int idx) {
  if (lua_gc(L, LUA_GCISRUNNING) == 1) return;   /* the common case: no finalizer running */
  idx = lua_absindex(L, idx);
  if (cdv_get_state(L)->closing)
    luaL_error(L, "the Lua state is closing: %s values cannot be made now", cdv_typename(L, idx));
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &LATE_KEY) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_newtable(L);
    lua_createtable(L, 0, 1);
    lua_pushliteral(L, "k");
    lua_setfield(L, -2, "__mode");
    lua_setmetatable(L, -2);
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &LATE_KEY);
  }
  lua_pushvalue(L, idx);
  lua_pushboolean(L, 1);
  lua_rawset(L, -3);
  lua_pop(L, 1);
}

static int call_gc(lua_State *L) {
  if (luaL_getmetafield(L, 1, "__gc") != LUA_TNIL) {
    lua_insert(L, 1);
    lua_call(L, 1, 0);
  }
  return 0;
}

/* The state closes: the objects made in finalizers are finalized (NOTE [objects made in finalizers]), then the
 * device blocks it kept for reuse go back (NOTE [block cache]). Its finalizer was set before any object of the
 * module existed, so it runs after theirs; a block freed later still goes back. */
static int state_gc(lua_State *L) {
  cdv_state *st = lua_touserdata(L, 1);
  cdv_err e;
  st->closing = 1;
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &LATE_KEY) == LUA_TTABLE) {
    int t = lua_gettop(L);
    lua_pushnil(L);
    while (lua_next(L, t) != 0) {
      lua_pop(L, 1);
      lua_pushcfunction(L, call_gc);
      lua_pushvalue(L, -2);
      if (lua_pcall(L, 1, 0, 0) != LUA_OK) lua_pop(L, 1);   /* __gc never raises; nothing to report to */
    }
  }
  lua_settop(L, 1);
  cdv_block_release(st, NULL, NULL, 1, &e);   /* errors are moot: the state is going */
  return 0;
}

/* The state record lives in the registry as a userdata, so it dies with the lua_State. */
cdv_state *cdv_get_state(lua_State *L) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &STATE_KEY) == LUA_TUSERDATA) {
    cdv_state *st = lua_touserdata(L, -1);
    lua_pop(L, 1);
    return st;
  }
  lua_pop(L, 1);
  cdv_state *st = lua_newuserdatauv(L, sizeof *st, 0);
  memset(st, 0, sizeof *st);
  st->default_device = -1;
  const char *lb = getenv("CUDA_LAUNCH_BLOCKING");
  st->launch_blocking = lb != NULL && strcmp(lb, "1") == 0;
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, state_gc);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &STATE_KEY);
  const char **keys[] = {&st->key_grid, &st->key_block, &st->key_dim, &st->key_shared, &st->key_stream, &st->key_device};
  static const char *const names[] = {"grid", "block", "dim", "shared", "stream", "device"};
  lua_createtable(L, 6, 0);   /* NOTE [launch keys]: anchors the interned names */
  for (int i = 0; i < 6; i++) {
    *keys[i] = lua_pushstring(L, names[i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, LUA_REGISTRYINDEX, "cudadev.launch_keys");
  return st;
}

/* Each embedded lua/cudadev/NAME.lua becomes package.preload["cudadev.NAME"]; "cudadev.extra" is run
 * now with the module table, to add the functions written in Lua. */
static void load_embedded(lua_State *L) {
  int mod = lua_gettop(L);
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  for (const struct cdv_embedded *f = cdv_embedded_files; f->name != NULL; f++) {
    if (strncmp(f->name, "cudadev.", 8) != 0) continue;   /* text resources such as the cpu prelude */
    if (luaL_loadbuffer(L, f->data, f->len, lua_pushfstring(L, "=[cudadev] %s", f->name)) != LUA_OK) lua_error(L);
    lua_remove(L, -2);
    if (strcmp(f->name, "cudadev.extra") == 0) {
      lua_pushvalue(L, mod);
      lua_call(L, 1, 0);
    } else lua_setfield(L, -2, f->name);
  }
  lua_settop(L, mod);
}

CUDADEV_API int luaopen_cudadev(lua_State *L) {
  luaL_checkversion(L);
  cdv_get_state(L);
  lua_newtable(L);
  cdv_error_open(L);
  cdv_device_open(L);
  cdv_stream_open(L);
  cdv_event_open(L);
  cdv_array_open(L);
  cdv_module_open(L);
  cdv_peer_open(L);
  cdv_memory_open(L);
  cdv_graph_open(L);
  cdv_launch_config_open(L);
  lua_pushcfunction(L, l_live);
  lua_setfield(L, -2, "_live");
  lua_pushcfunction(L, l_hooks);
  lua_setfield(L, -2, "_hooks");
  lua_pushliteral(L, CDV_VERSION);
  lua_setfield(L, -2, "version");
  load_embedded(L);
  return 1;
}
