/*
 * cudadev.c: luaopen_cudadev, the per-state record, and the pure-Lua conveniences built into the
 * library (the files of lua/cudadev, embedded at build time so an embedding host needs one artefact).
 */
#include <stdlib.h>
#include <string.h>

#include "cdv.h"
#include "cudadev.h"

struct cdv_embedded { const char *name; const char *data; size_t len; };
extern const struct cdv_embedded cdv_embedded_files[];

static const char STATE_KEY[] = "cudadev.state";

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

/* The state record lives in the registry as a userdata, so it dies with the lua_State. */
cdv_state *cdv_get_state(lua_State *L) {
  if (lua_getfield(L, LUA_REGISTRYINDEX, STATE_KEY) == LUA_TUSERDATA) {
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
  lua_setfield(L, LUA_REGISTRYINDEX, STATE_KEY);
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
  lua_pushcfunction(L, l_live);
  lua_setfield(L, -2, "_live");
  lua_pushliteral(L, CDV_VERSION);
  lua_setfield(L, -2, "version");
  load_embedded(L);
  return 1;
}
