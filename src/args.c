/*
 * args.c: argument checking shared by the Lua-facing files, so every function words its complaints the
 * same way: Lua's own "bad argument #N to 'f' (...)".
 */
#include <stdio.h>
#include <string.h>

#include "cdv.h"

const cdv_dtype_info cdv_dtypes[CDV_NDTYPES] = {
    [CDV_F16] = {"float16", "f16", 2, 1, 1},      [CDV_F32] = {"float32", "f32", 4, 1, 1},
    [CDV_F64] = {"float64", "f64", 8, 1, 1},      [CDV_I8] = {"int8", "i8", 1, 0, 1},
    [CDV_I16] = {"int16", "i16", 2, 0, 1},        [CDV_I32] = {"int32", "i32", 4, 0, 1},
    [CDV_I64] = {"int64", "i64", 8, 0, 1},        [CDV_U8] = {"uint8", "u8", 1, 0, 0},
    [CDV_U16] = {"uint16", "u16", 2, 0, 0},       [CDV_U32] = {"uint32", "u32", 4, 0, 0},
    [CDV_U64] = {"uint64", "u64", 8, 0, 0},       [CDV_BOOL] = {"bool", "bool", 1, 0, 0},
    [CDV_C64] = {"complex64", "c64", 8, 0, 1, 1}, [CDV_C128] = {"complex128", "c128", 16, 0, 1, 1},
};

/* NOTE [C strings]: a Lua string may hold NUL bytes, which a C string ends at: "float32\0junk" would be read as
 * "float32" and accepted. Every name that becomes a C string (dtypes, kernel names, compile options, header
 * names, include paths, option keys) is refused when it holds one. */
int cdv_has_nul(lua_State *L, int idx) {
  size_t n;
  const char *s = lua_tolstring(L, idx, &n);
  return s != NULL && memchr(s, '\0', n) != NULL;
}

const char *cdv_check_cstring(lua_State *L, int arg, const char *what) {
  const char *s = luaL_checkstring(L, arg);
  if (cdv_has_nul(L, arg)) luaL_argerror(L, arg, lua_pushfstring(L, "%s contains a NUL byte", what));
  return s;
}

int cdv_check_dtype(lua_State *L, int arg, cdv_dtype def) {
  if (lua_isnoneornil(L, arg)) return def;
  const char *s = cdv_check_cstring(L, arg, "dtype");
  for (int t = 0; t < CDV_NDTYPES; t++)
    if (strcmp(s, cdv_dtypes[t].name) == 0 || strcmp(s, cdv_dtypes[t].short_name) == 0) return t;
  return luaL_argerror(L, arg, lua_pushfstring(L, "unknown dtype '%s' (expected float32, int32, ...)", s));
}

/* An option table may only hold known keys: `{blok=256}` is a typo to report, not to ignore. */
void cdv_check_options(lua_State *L, int arg, const char *const *known, const char *fname) {
  (void)fname;
  if (lua_isnoneornil(L, arg)) return;
  luaL_checktype(L, arg, LUA_TTABLE);
  lua_pushnil(L);
  while (lua_next(L, arg) != 0) {
    lua_pop(L, 1);
    const char *k = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    if (k != NULL && cdv_has_nul(L, -1)) /* (see NOTE [C strings]) "stream\0x" is no "stream" */
      luaL_argerror(L, arg, lua_pushfstring(L, "option name '%s' contains a NUL byte", k));
    int ok = 0;
    for (int i = 0; k != NULL && known[i] != NULL && !ok; i++) ok = strcmp(k, known[i]) == 0;
    if (!ok) {
      luaL_Buffer b;
      luaL_buffinit(L, &b);
      for (int i = 0; known[i] != NULL; i++) {
        if (i) luaL_addstring(&b, ", ");
        luaL_addstring(&b, known[i]);
      }
      luaL_pushresult(&b);
      const char *list = lua_tostring(L, -1);
      if (k != NULL) luaL_argerror(L, arg, lua_pushfstring(L, "unknown option '%s' (expected %s)", k, list));
      luaL_argerror(L, arg, lua_pushfstring(L, "option keys must be strings (expected %s)", list));
    }
  }
}

int cdv_opt_field(lua_State *L, int t, const char *k) {
  if (!lua_istable(L, t)) {
    lua_pushnil(L);
    return LUA_TNIL;
  }
  return lua_getfield(L, t, k);
}

int cdv_check_boolean_field(lua_State *L, int t, const char *k, int def, const char *fname) {
  int ty = cdv_opt_field(L, t, k);
  int v = def;
  if (ty == LUA_TBOOLEAN)
    v = lua_toboolean(L, -1);
  else if (ty != LUA_TNIL)
    luaL_error(L, "bad option '%s' to '%s' (boolean expected, got %s)", k, fname, cdv_typename(L, -1));
  lua_pop(L, 1);
  return v;
}

/* A count or size: an integer >= 0 (integral floats such as 2^20 are accepted: Lua makes them floats). */
int64_t cdv_check_count(lua_State *L, int arg, const char *what) {
  int isnum = 0;
  lua_Integer v = lua_tointegerx(L, arg, &isnum);
  if (!isnum) {
    if (lua_type(L, arg) == LUA_TNUMBER)
      luaL_argerror(L, arg, lua_pushfstring(L, "%s must be an integer, got %s", what, lua_tostring(L, arg)));
    luaL_typeerror(L, arg, "integer");
  }
  if (v < 0) luaL_argerror(L, arg, lua_pushfstring(L, "%s must not be negative, got %I", what, v));
  return v;
}

const char *cdv_fmt_bytes(char *buf, size_t n, double bytes) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    u++;
  }
  if (u == 0)
    snprintf(buf, n, "%.0f B", bytes);
  else
    snprintf(buf, n, "%.1f %s", bytes, units[u]);
  return buf;
}

/* ---- userdata and option values (NOTE [magic], NOTE [checked values] in cdv.h) */

const char *cdv_typename(lua_State *L, int idx) {
  int t = luaL_getmetafield(L, idx, "__name");
  const char *n = t == LUA_TSTRING ? lua_tostring(L, -1) : luaL_typename(L, idx); /* anchored elsewhere */
  if (t != LUA_TNIL) lua_pop(L, 1);
  return n;
}

/* A value as error text, pushed: luaL_tolstring's, except that in a sandboxed state a value whose text would
 * be its address (a table, a function, a thread, a userdata without __tostring) is named by its type (NOTE
 * [faults without addresses]: no address in a sandbox's error texts). */
const char *cdv_value_text(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  int t = lua_type(L, idx);
  int by_address =
      t == LUA_TTABLE || t == LUA_TFUNCTION || t == LUA_TTHREAD || t == LUA_TUSERDATA || t == LUA_TLIGHTUSERDATA;
  if (by_address && cdv_get_state(L)->sandbox) {
    if (luaL_getmetafield(L, idx, "__tostring") != LUA_TNIL)
      lua_pop(L, 1);
    else
      return lua_pushstring(L, cdv_typename(L, idx));
  }
  return luaL_tolstring(L, idx, NULL);
}

/* NOTE [checked values]: a userdata of type tname, recognised by its tag (NOTE [magic]); a value that
 * carries tname's metatable without being one (set with the debug library) is told apart from a value of
 * another type, so the message never reads "cudadev.Array expected, got cudadev.Array". */
const char *cdv_udata_problem(lua_State *L, int idx, const char *tname, uint64_t magic, size_t size, void **out) {
  *out = cdv_test_magic(L, idx, size, magic);
  if (*out != NULL) return NULL;
  int ours = 0;
  if (lua_getmetatable(L, idx)) {
    luaL_getmetatable(L, tname);
    ours = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
  }
  const char *short_name = strchr(tname, '.') ? strchr(tname, '.') + 1 : tname;
  if (ours)
    return lua_pushfstring(L, "not %s %s (its metatable was replaced)", strchr("AEIOU", short_name[0]) ? "an" : "a",
                           short_name);
  return lua_pushfstring(L, "%s expected, got %s", tname, cdv_typename(L, idx));
}

void *cdv_check_udata(lua_State *L, int arg, const char *tname, uint64_t magic, size_t size) {
  void *p;
  const char *why = cdv_udata_problem(L, arg, tname, magic, size, &p);
  if (why != NULL) luaL_argerror(L, arg, why);
  return p;
}

/* NOTE [self errors]: an object that can no longer be used (freed, destroyed, released, stale) is argument #1
 * of the method called on it, in every type's words: `bad argument #1 to 'free' (attempt to use a freed array)`,
 * `bad argument #1 to 'destroy' (attempt to use a destroyed stream)`. luaL_argerror would say "calling 'free'
 * on bad self", and a type whose __index checked the object first would name 'index' instead of the method:
 * each __index finds methods before it checks, and the checks word the error here. */
int cdv_self_error(lua_State *L, int arg, const char *why) {
  lua_Debug ar;
  if (arg != 1 || !lua_getstack(L, 0, &ar)) return luaL_argerror(L, arg, why);
  lua_getinfo(L, "n", &ar);
  if (ar.namewhat == NULL || strcmp(ar.namewhat, "method") != 0 || ar.name == NULL) return luaL_argerror(L, arg, why);
  return luaL_error(L, "bad argument #1 to '%s' (%s)", ar.name, why);
}

int cdv_opt_error(lua_State *L, const char *key, const char *fname, const char *why) {
  return luaL_error(L, "bad option '%s' to '%s' (%s)", key, fname, why);
}

/* NOTE [method lookup]: a type's __index is a closure over its methods table (cdv_set_index), so finding a
 * method is one raw lookup of the key already on the stack: a registry lookup of the metatable by name and two
 * lookups by C string cost ten times that (each C string is interned again, with a strcmp), and `a:free()` or
 * `s:synchronize()` pay it on every call. Pushes the method and returns 1, else pushes nothing and returns 0. */
int cdv_push_method(lua_State *L) {
  lua_pushvalue(L, 2);
  if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TNIL) return 1;
  lua_pop(L, 1);
  return 0;
}

/* NOTE [class registration]: every Lua type's metatable is made by cdv_new_class: luaL_newmetatable (which
 * sets __name, for error messages and tostring), the metamethods of meta, and, with a methods list, the methods
 * table as mt.methods and `index` (a closure over it, NOTE [method lookup]) as __index, and the type's field
 * names as mt.fields (NOTE [class fields]). The metatable is left on the stack, as luaL_newmetatable leaves it. */
/* NOTE [class fields]: a type's field names are read at build time from the C code that answers them (its
 * __index function's `strcmp(key, "name") == 0` tests; for a table type, the keys cdv_push_<type> sets) by
 * cmake/gen_fields.cmake, and cdv_new_class sets them as mt.fields, a sequence of strings. The REPL completes
 * from mt.fields and mt.methods (repl.fields is made from them), so a new field needs no second list. */
static const struct {
  const char *tname, *names; /* names: space-separated */
} class_fields[] = {
#include "cdv_fields.h"
};

static void set_fields(lua_State *L, const char *tname) {
  for (size_t i = 0; i < sizeof class_fields / sizeof class_fields[0]; i++) {
    if (strcmp(class_fields[i].tname, tname) != 0) continue;
    lua_newtable(L);
    int n = 0;
    for (const char *p = class_fields[i].names; *p;) {
      size_t len = strcspn(p, " ");
      lua_pushlstring(L, p, len);
      lua_rawseti(L, -2, ++n);
      p += len + (p[len] == ' ');
    }
    lua_setfield(L, -2, "fields");
    return;
  }
}

void cdv_new_class(lua_State *L, const char *tname, const luaL_Reg *meta, const luaL_Reg *methods,
                   lua_CFunction index) {
  luaL_newmetatable(L, tname);
  set_fields(L, tname); /* NOTE [class fields] */
  if (meta != NULL) luaL_setfuncs(L, meta, 0);
  if (methods != NULL) {
    lua_newtable(L);
    luaL_setfuncs(L, methods, 0);
    cdv_set_index(L, -2, index);
  }
}

/* The methods table at the top (popped) becomes mt.methods, and `index`, a closure over it, mt.__index. */
void cdv_set_index(lua_State *L, int mt, lua_CFunction index) {
  mt = lua_absindex(L, mt);
  lua_pushvalue(L, -1);
  lua_setfield(L, mt, "methods");
  lua_pushcclosure(L, index, 1);
  lua_setfield(L, mt, "__index");
}

/* Pushes the registry's table at `key` (a C address), weak-keyed, made when missing. */
void cdv_weak_registry_table(lua_State *L, const void *key) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, key) == LUA_TTABLE) return;
  lua_pop(L, 1);
  lua_newtable(L);
  lua_createtable(L, 0, 1);
  lua_pushliteral(L, "k");
  lua_setfield(L, -2, "__mode");
  lua_setmetatable(L, -2);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, key);
}

/* NOTE [scoped calls]: cd.with_device, cd.with_stream, cd.with_peer_access and cd.with_mempool_access keep the
 * setting to restore in a to-be-closed slot (slot 1), so an error restores it as it unwinds, and its traceback
 * passes through untouched (no pcall in between). Inside a coroutine that is not enough: an error that leaves
 * the coroutine through coroutine.resume does not unwind its stack, and Lua closes the slot only when the
 * coroutine is closed (coroutine.close; coroutine.wrap does it at once), so the setting would stay on for the
 * code that resumed it. There the function is called under pcall, the slot is closed, and the error is raised
 * again, unchanged. with_device and with_stream keep their settings per coroutine (NOTE [coroutine scopes] in
 * async.c), so a yield inside them is allowed: the pcall is a lua_pcallk whose continuation finishes the call
 * when the coroutine is resumed. The peer-access scopes change a process-wide setting that a suspended
 * coroutine would leave on for its resumer: a yield inside them is refused ("attempt to yield across a C-call
 * boundary", Lua's own message), after the setting is restored. */
static int scoped_k(lua_State *L, int status, lua_KContext ctx) {
  (void)ctx;
  if (status != LUA_OK && status != LUA_YIELD) {
    lua_closeslot(L, 1); /* restore now: the error may leave the coroutine */
    return lua_error(L);
  }
  return lua_gettop(L) - 1;
}

static int call_scoped(lua_State *L, int nargs, lua_KFunction k) {
  int main_thread = lua_pushthread(L);
  lua_pop(L, 1);
  if (main_thread) {
    lua_call(L, nargs, LUA_MULTRET);
    return lua_gettop(L) - 1;
  }
  return scoped_k(L, lua_pcallk(L, nargs, LUA_MULTRET, 0, 0, k), 0);
}

int cdv_call_scoped(lua_State *L, int nargs) { return call_scoped(L, nargs, NULL); }
int cdv_call_scoped_k(lua_State *L, int nargs) { return call_scoped(L, nargs, scoped_k); }
