/*
 * launch_config.c: launch configurations. A kernel launch takes its configuration as a table,
 * k({grid = g, block = b}, ...), or as a cudadev.LaunchConfig made once with cd.launch_config{...}
 * (cuda.core's LaunchConfig, Numba's kernel[grid, block]).
 *
 * NOTE [launch configs]: reading a table costs one lua_next per key, and Lua cannot tell us that a table
 * is unchanged since the last launch, so a table is read again at every launch: about 650 instructions of
 * the 1450 that an empty launch costs outside the driver (bench/launch_callgrind). A LaunchConfig is read
 * once and cannot be changed, so a launch with one skips all of that. Both forms go through the same
 * parser and give the same errors; what depends on the kernel is checked at every launch (module.c).
 */
#include <stdint.h>
#include <string.h>

#include "cdv.h"

/* (NOTE [launch limits]) the number of seconds at idx (0 for no limit), or -1 with the complaint pushed (about
 * key, when not NULL) */
double cdv_seconds(lua_State *L, int idx, const char *key) {
  double t = lua_tonumber(L, idx);
  if (lua_type(L, idx) == LUA_TNUMBER && t >= 0 && t <= 1e9) return t; /* also refuses NaN */
  const char *got = cdv_value_text(L, idx);
  if (key)
    lua_pushfstring(L, "'%s' must be a number of seconds from 0 (no limit) to 1e9, got %s", key, got);
  else
    lua_pushfstring(L, "a number of seconds from 0 (no limit) to 1e9 expected, got %s", got);
  return -1;
}

/* errors while reading a configuration: for a launch, about the kernel; for cd.launch_config, argument 1 */
int cdv_launch_config_error(lua_State *L, const char *kname, const char *msg) {
  if (kname == NULL) return luaL_argerror(L, 1, msg);
  return luaL_error(L, "bad launch configuration for '%s' (%s)", kname, msg);
}

/* an integer or {x, y, z} into v[3] (missing components are 1) */
static void dims(lua_State *L, const char *kname, int idx, const char *key, uint64_t v[3], uint64_t max) {
  v[0] = v[1] = v[2] = 1;
  int isint;
  lua_Integer x = lua_tointegerx(L, idx, &isint);
  if (isint && x >= 1 && (uint64_t)x <= max) { /* the common case first: one integer */
    v[0] = (uint64_t)x;
    return;
  }
  if (lua_type(L, idx) == LUA_TTABLE) {
    int n = (int)lua_rawlen(L, idx);
    if (n < 1 || n > 3) cdv_launch_config_error(L, kname, lua_pushfstring(L, "'%s' must have 1 to 3 components", key));
    for (int j = 0; j < n; j++) {
      lua_rawgeti(L, idx, j + 1);
      int ok;
      lua_Integer c = lua_tointegerx(L, -1, &ok);
      if (!ok || c < 1 || (uint64_t)c > max)
        cdv_launch_config_error(
            L, kname,
            lua_pushfstring(L, "'%s' component %d must be an integer from 1 to %I", key, j + 1, (lua_Integer)max));
      v[j] = (uint64_t)c;
      lua_pop(L, 1);
    }
    return;
  }
  cdv_launch_config_error(
      L, kname,
      lua_pushfstring(L, "'%s' must be a positive integer or {x, y, z}, got %s", key, cdv_value_text(L, idx)));
}

/* The table at idx into *c. Keys are compared as pointers (NOTE [launch keys]). */
static void parse(lua_State *L, int idx, const cdv_state *st, const char *kname, size_t max_shared,
                  cdv_launch_config *c) {
  /* each field (a memset of the whole record cost 28 instructions a launch) */
  c->magic = c->memo_kernel = 0; /* no memo (kernel serials start at 1) */
  for (int j = 0; j < 3; j++) c->grid[j] = c->block[j] = c->dim[j] = 1;
  c->has_dim = c->has_grid = c->has_block = c->cooperative = 0;
  c->shared = 0;
  c->stream = NULL;
  c->device = NULL;
  c->timeout = -1;
  lua_pushnil(L);
  while (lua_next(L, idx) != 0) {
    const void *key = lua_topointer(L, -2); /* NOTE [launch keys] */
    int v = lua_gettop(L);
    if (key == st->key_grid) {
      dims(L, kname, v, "grid", c->grid, 0x7fffffff);
      c->has_grid = 1;
    } else if (key == st->key_block) {
      dims(L, kname, v, "block", c->block, 0x7fffffff);
      c->has_block = 1;
    } else if (key == st->key_dim) {
      dims(L, kname, v, "dim", c->dim, (uint64_t)1 << 53);
      c->has_dim = 1;
    } else if (key == st->key_shared) {
      int isint;
      c->shared = lua_tointegerx(L, v, &isint);
      if (!isint || c->shared < 0 || (uint64_t)c->shared > max_shared)
        cdv_launch_config_error(L, kname,
                                lua_pushfstring(L, "'shared' must be 0 to %I bytes", (lua_Integer)max_shared));
    } else if (key == st->key_stream) {
      const char *why = cdv_stream_problem(L, v, &c->stream);
      if (why != NULL) cdv_launch_config_error(L, kname, lua_pushfstring(L, "'stream': %s", why));
    } else if (key == st->key_device) {
      const char *why = cdv_device_problem(L, v, &c->device);
      if (why != NULL) cdv_launch_config_error(L, kname, lua_pushfstring(L, "'device': %s", why));
    } else if (key == st->key_cooperative) {
      if (!lua_isboolean(L, v))
        cdv_launch_config_error(L, kname,
                                lua_pushfstring(L, "'cooperative' must be a boolean, got %s", luaL_typename(L, v)));
      c->cooperative = lua_toboolean(L, v);
    } else if (key == st->key_timeout) {
      c->timeout = cdv_seconds(L, v, "timeout");
      if (c->timeout < 0) cdv_launch_config_error(L, kname, lua_tostring(L, -1));
    } else {
      cdv_launch_config_error(L, kname,
                              lua_pushfstring(L,
                                              "unknown key '%s' (expected grid, block, dim, shared, "
                                              "stream, device, cooperative, timeout)",
                                              cdv_value_text(L, -2)));
    }
    lua_settop(L, v - 1);
  }
  if (c->has_dim && (c->has_grid || c->has_block))
    cdv_launch_config_error(L, kname, "give either 'dim' or 'grid' and 'block'");
  if (!c->has_dim && !(c->has_grid && c->has_block))
    cdv_launch_config_error(L, kname, "missing 'dim', or 'grid' and 'block'");
}

const cdv_launch_config *cdv_get_launch_config(lua_State *L, int idx, const cdv_state *st, const char *kname,
                                               size_t max_shared, cdv_launch_config *tmp) {
  const cdv_launch_config *c = cdv_test_magic(L, idx, sizeof *c, CDV_LCFG_MAGIC);
  if (c != NULL) return c;
  if (!lua_istable(L, idx))
    luaL_error(L, "bad argument #1 to '%s' (launch configuration expected (a table or a LaunchConfig), got %s)", kname,
               cdv_typename(L, idx));
  parse(L, idx, st, kname, max_shared, tmp);
  return tmp;
}

/* ------------------------------------------------------------ the LaunchConfig type */

/* cd.launch_config{grid=, block=} or {dim=}, with shared=, stream=, device=, cooperative= as a launch takes them */
static int l_launch_config(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 1);
  cdv_launch_config *c = lua_newuserdatauv(L, sizeof *c, 1);
  parse(L, 1, cdv_get_state(L), NULL, UINT32_MAX, c);
  c->magic = CDV_LCFG_MAGIC;
  if (c->stream != NULL) { /* the user value keeps the Stream alive; read raw, as parse did */
    lua_pushliteral(L, "stream");
    lua_rawget(L, 1);
    lua_setiuservalue(L, 2, 1);
  }
  luaL_setmetatable(L, CDV_LAUNCH_CONFIG);
  return 1;
}

static const cdv_launch_config *check_config(lua_State *L, int arg) {
  return cdv_check_udata(L, arg, CDV_LAUNCH_CONFIG, CDV_LCFG_MAGIC, sizeof(cdv_launch_config));
}

/* 7, or {7, 2} / {7, 2, 3} when more than one component is not 1 */
static void push_dims(lua_State *L, const uint64_t v[3]) {
  int n = v[2] > 1 ? 3 : v[1] > 1 ? 2 : 1;
  if (n == 1) {
    lua_pushinteger(L, (lua_Integer)v[0]);
    return;
  }
  lua_createtable(L, n, 0);
  for (int j = 0; j < n; j++) {
    lua_pushinteger(L, (lua_Integer)v[j]);
    lua_rawseti(L, -2, j + 1);
  }
}

static int config_index(lua_State *L) {
  const cdv_launch_config *c = check_config(L, 1);
  const char *key = luaL_checkstring(L, 2);
  if (strcmp(key, "grid") == 0 || strcmp(key, "block") == 0 || strcmp(key, "dim") == 0) {
    int has = key[0] == 'g' ? c->has_grid : key[0] == 'b' ? c->has_block : c->has_dim;
    if (has)
      push_dims(L, key[0] == 'g' ? c->grid : key[0] == 'b' ? c->block : c->dim);
    else
      lua_pushnil(L);
  } else if (strcmp(key, "shared") == 0)
    lua_pushinteger(L, c->shared);
  else if (strcmp(key, "cooperative") == 0)
    lua_pushboolean(L, c->cooperative);
  else if (strcmp(key, "timeout") == 0) {
    if (c->timeout >= 0)
      lua_pushnumber(L, c->timeout);
    else
      lua_pushnil(L);
  } else if (strcmp(key, "stream") == 0)
    lua_getiuservalue(L, 1, 1);
  else if (strcmp(key, "device") == 0) {
    if (c->device)
      cdv_push_device(L, c->device);
    else
      lua_pushnil(L);
  } else
    return luaL_error(L, "LaunchConfig has no field '%s'", key);
  return 1;
}

static int config_newindex(lua_State *L) {
  check_config(L, 1);
  return luaL_error(L, "a LaunchConfig cannot be changed; make another with cd.launch_config{...}");
}

/* LaunchConfig(grid=4, block=256) / LaunchConfig(dim={1024, 1024}, shared=4096, stream=Stream(...), device=cuda:0) */
static void add_dims(lua_State *L, luaL_Buffer *b, const char *sep, const char *key, const uint64_t v[3]) {
  int n = v[2] > 1 ? 3 : v[1] > 1 ? 2 : 1;
  if (n == 1)
    lua_pushfstring(L, "%s%s=%I", sep, key, (lua_Integer)v[0]);
  else if (n == 2)
    lua_pushfstring(L, "%s%s={%I, %I}", sep, key, (lua_Integer)v[0], (lua_Integer)v[1]);
  else
    lua_pushfstring(L, "%s%s={%I, %I, %I}", sep, key, (lua_Integer)v[0], (lua_Integer)v[1], (lua_Integer)v[2]);
  luaL_addvalue(b);
}

static int config_tostring(lua_State *L) {
  const cdv_launch_config *c = check_config(L, 1);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_addstring(&b, "LaunchConfig(");
  if (c->has_dim)
    add_dims(L, &b, "", "dim", c->dim);
  else {
    add_dims(L, &b, "", "grid", c->grid);
    add_dims(L, &b, ", ", "block", c->block);
  }
  if (c->shared) {
    lua_pushfstring(L, ", shared=%I", (lua_Integer)c->shared);
    luaL_addvalue(&b);
  }
  if (c->cooperative) luaL_addstring(&b, ", cooperative=true");
  if (c->timeout >= 0) {
    lua_pushfstring(L, ", timeout=%f", c->timeout);
    luaL_addvalue(&b);
  }
  if (c->stream) {
    luaL_addstring(&b, ", stream=");
    lua_getiuservalue(L, 1, 1);
    cdv_value_text(L, -1);
    lua_remove(L, -2);
    luaL_addvalue(&b);
  }
  if (c->device) {
    luaL_addstring(&b, ", device=");
    luaL_addstring(&b, c->device->alias);
  }
  luaL_addchar(&b, ')');
  luaL_pushresult(&b);
  return 1;
}

int cdv_launch_config_open(lua_State *L) {
  static const luaL_Reg meta[] = {
      {"__index", config_index}, {"__newindex", config_newindex}, {"__tostring", config_tostring}, {NULL, NULL}};
  cdv_new_class(L, CDV_LAUNCH_CONFIG, meta, NULL, NULL); /* NOTE [class registration] */
  lua_pop(L, 1);
  lua_pushcfunction(L, l_launch_config);
  lua_setfield(L, -2, "launch_config");
  return 0;
}
