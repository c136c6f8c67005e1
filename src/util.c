/*
 * util.c: small helpers every layer shares: filling a cdv_err, freeing a compiled image, recognising
 * cudadev userdata (NOTE [magic]).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cdv.h"

/* Fill e from a printf-style message; -1 lets a backend write `return cdv_fail(...)`. */
int cdv_fail(cdv_err *e, const char *api, int code, const char *name, const char *fmt, ...) {
  if (!e) return -1;
  e->api = api ? api : "";
  e->code = code;
  snprintf(e->name, sizeof e->name, "%s", name ? name : "");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->message, sizeof e->message, fmt, ap);
  va_end(ap);
  e->sticky = 0;
  e->log = NULL;
  return -1;
}

/* Free every field and leave img empty, so a second call is harmless. */
void cdv_image_free(cdv_image *img) {
  if (!img) return;
  free(img->ptx);
  free(img->cubin);
  free(img->path);
  free(img->log);
  for (int i = 0; img->lowered && i < img->nentries; i++) free(img->lowered[i]);
  free(img->lowered);
  memset(img, 0, sizeof *img);
}

const char *cdv_typename(lua_State *L, int idx) {
  int t = luaL_getmetafield(L, idx, "__name");
  const char *n = t == LUA_TSTRING ? lua_tostring(L, -1) : luaL_typename(L, idx);   /* anchored elsewhere */
  if (t != LUA_TNIL) lua_pop(L, 1);
  return n;
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

int cdv_opt_error(lua_State *L, const char *key, const char *fname, const char *why) {
  return luaL_error(L, "bad option '%s' to '%s' (%s)", key, fname, why);
}
