/*
 * libembed_torch.so: Lua and cudadev inside a shared library that a Python program loads with ctypes, to hand
 * its PyTorch (or CuPy, JAX...) tensors to Lua scripts through DLPack and take the scripts' arrays back, without a
 * copy (examples/embed; tests/dlpack_torch.py is the Python side, and the check run on the GPU host).
 *
 *   make build && python3 tests/dlpack_torch.py --no-torch   (the ctypes side, with a tensor Python makes)
 *   python3 tests/dlpack_torch.py        (after make build: PyTorch's tensors too, on cuda:0 and cpu)
 *
 * The API, for ctypes (every function returns at once; none raises):
 *   void *edl_open(void)                            a lua_State with the standard libraries and cudadev as `cd`
 *   int edl_run(void *state, const char *code, void *tensor, int versioned, void **out, char *msg, size_t n)
 *       tensor (a DLManagedTensor *, a DLManagedTensorVersioned * when versioned; NULL: none) becomes the global
 *       `t` (the script owns it from then on: cudadev calls its deleter when `t` and its views are collected, or
 *       at edl_close; refused, it is deleted at once, as cd.from_dlpack does); then `code` runs. When it returns
 *       an Array and out is not NULL, *out is a new tensor over it (the same form), the consumer's to delete;
 *       any other first result is written to msg as tostring gives it. 0 on success; 1 with the error in msg.
 *   void edl_close(void *state)                     lua_close
 */
#include <stdio.h>
#include <string.h>

#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>

#include "cudadev_dlpack.h"

#define EDL_API __attribute__((visibility("default")))

EDL_API void *edl_open(void);
EDL_API int edl_run(void *state, const char *code, void *tensor, int versioned, void **out, char *msg, size_t n);
EDL_API void edl_close(void *state);

EDL_API void *edl_open(void) {
  lua_State *L = luaL_newstate();
  if (L == NULL) return NULL;
  luaL_openlibs(L);
  luaL_requiref(L, "cudadev", luaopen_cudadev, 1);
  lua_setglobal(L, "cd");
  return L;
}

EDL_API void edl_close(void *state) {
  if (state != NULL) lua_close(state);
}

/* (tensor, versioned, code, want_out) -> out pointer or nil, message: run under pcall */
static int run(lua_State *L) {
  void *t = lua_touserdata(L, 1);
  int versioned = lua_toboolean(L, 2);
  if (t != NULL) { /* cd.from_dlpack takes it: refused, its deleter runs (NOTE [dlpack ownership]) */
    lua_getglobal(L, "cd");
    lua_getfield(L, -1, "from_dlpack");
    lua_pushlightuserdata(L, t);
    lua_createtable(L, 0, 1);
    lua_pushboolean(L, versioned);
    lua_setfield(L, -2, "versioned");
    lua_call(L, 2, 1);
    lua_setglobal(L, "t");
    lua_pop(L, 1);
  }
  if (luaL_loadstring(L, lua_tostring(L, 3)) != LUA_OK) return lua_error(L);
  lua_call(L, 0, 1);
  cudadev_array_info info;
  if (lua_toboolean(L, 4) && cudadev_to_array(L, -1, &info)) {
    lua_pushlightuserdata(L, versioned ? (void *)cudadev_to_dlpack_versioned(L, -1) : (void *)cudadev_to_dlpack(L, -1));
    lua_pushliteral(L, "");
  } else {
    lua_pushnil(L);
    luaL_tolstring(L, -2, NULL);
  }
  return 2;
}

EDL_API int edl_run(void *state, const char *code, void *tensor, int versioned, void **out, char *msg, size_t n) {
  lua_State *L = state;
  if (out != NULL) *out = NULL;
  if (L == NULL || code == NULL) {
    if (msg != NULL && n > 0) snprintf(msg, n, "edl_run: %s is NULL", L == NULL ? "state" : "code");
    return 1;
  }
  lua_pushcfunction(L, run);
  lua_pushlightuserdata(L, tensor);
  lua_pushboolean(L, versioned);
  lua_pushstring(L, code);
  lua_pushboolean(L, out != NULL);
  int rc = lua_pcall(L, 4, 2, 0) != LUA_OK;
  const char *text = lua_tostring(L, -1);
  if (msg != NULL && n > 0) snprintf(msg, n, "%s", text != NULL ? text : "(error object is not a string)");
  if (rc == 0 && out != NULL) *out = lua_touserdata(L, -2);
  lua_settop(L, 0);
  return rc;
}
