/*
 * error.c: cudadev.Error, the value raised when a CUDA, NVRTC or host-compiler call fails, and the
 * sticky-fault bookkeeping of devices.
 *
 * An Error is a table with the metatable cudadev.Error, so scripts can read its fields and `pcall`
 * returns something printable: fields api, code, name, message, sticky, where (and log, options for
 * compiles); tostring gives "where api: NAME: message" followed by the log.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "cdv.h"

/* NOTE [sticky faults]: after an illegal address, a kernel assert, a misaligned access or a launch
 * failure, the CUDA context is corrupted: every later call in it fails. We record the first such error
 * on the device (with where it surfaced) and answer every later use of the device with it, instead of
 * letting each call fail with a different, confusing code. dev:reset() resets the primary context, but
 * the driver (CUDA 13, H100) keeps answering with the fault afterwards, as CUDA documents for these errors
 * ("to continue using CUDA, the process must be terminated and relaunched"): reset then says so and the
 * device stays unusable; work that may fault belongs in a child process (spec/90 does that). */
static void mark_sticky(cdv_device *d, const cdv_err *e, const char *where) {
  if (d == NULL || d->sticky) return;
  d->sticky = 1;
  d->fault = *e;
  d->fault.log = NULL;
  snprintf(d->fault_where, sizeof d->fault_where, "%.127s", where);
}

static void set_string(lua_State *L, const char *k, const char *v) {
  lua_pushstring(L, v);
  lua_setfield(L, -2, k);
}

/* Pushes a cudadev.Error built from e; takes ownership of e->log. */
void cdv_push_error(lua_State *L, cdv_device *d, cdv_err *e) {
  luaL_where(L, 1);
  const char *w = lua_tostring(L, -1);
  char where[256];
  size_t wl = strlen(w);
  /* luaL_where gives "file:line: "; the field holds it without the separator */
  snprintf(where, sizeof where, "%.*s", (int)(wl >= 2 ? wl - 2 : wl), w);
  lua_pop(L, 1);
  if (e->sticky) mark_sticky(d, e, where);
  lua_createtable(L, 0, 8);
  set_string(L, "api", e->api ? e->api : "cudadev");
  lua_pushinteger(L, e->code);
  lua_setfield(L, -2, "code");
  set_string(L, "name", e->name);
  set_string(L, "message", e->message);
  lua_pushboolean(L, e->sticky);
  lua_setfield(L, -2, "sticky");
  set_string(L, "where", where);
  if (d != NULL) {
    set_string(L, "device", d->alias);
  }
  if (e->log != NULL) {
    set_string(L, "log", e->log);
    free(e->log);
    e->log = NULL;
  }
  luaL_setmetatable(L, CDV_ERROR);
}

int cdv_raise(lua_State *L, cdv_device *d, cdv_err *e) {
  cdv_push_error(L, d, e);
  return lua_error(L);
}

static const char *field(lua_State *L, int t, const char *k) {
  lua_getfield(L, t, k);
  const char *s = lua_tostring(L, -1);
  lua_pop(L, 1); /* the table still anchors the string */
  return s;
}

/* __tostring: "where api: NAME: message" then the log, as cuda.core and PyCUDA print them */
static int error_tostring(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  const char *where = field(L, 1, "where"), *api = field(L, 1, "api");
  const char *name = field(L, 1, "name"), *msg = field(L, 1, "message");
  const char *log = field(L, 1, "log");
  if (where && *where) {
    luaL_addstring(&b, where);
    luaL_addstring(&b, ": ");
  }
  if (api) {
    luaL_addstring(&b, api);
    luaL_addstring(&b, ": ");
  }
  if (name && *name) {
    luaL_addstring(&b, name);
    luaL_addstring(&b, ": ");
  }
  luaL_addstring(&b, msg ? msg : "?");
  if (log && *log) {
    luaL_addchar(&b, '\n');
    luaL_addstring(&b, log);
  }
  luaL_pushresult(&b);
  return 1;
}

void cdv_warn(lua_State *L, const char *fmt, ...) {
  char msg[640];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  lua_warning(L, "cudadev: ", 1);
  lua_warning(L, msg, 0);
}

/* A finalizer's failure, as a warning (never raised: NOTE [lifetimes]). When the process or the host is
 * tearing CUDA down (the driver deinitialised, the context destroyed under us), there is nothing to free
 * and nothing to say: objects left alive at exit must not make noise. */
void cdv_warn_release(lua_State *L, const char *what, cdv_device *d, const cdv_err *e) {
  if (cdv_cuda_is_teardown(e->code)) return;
  cdv_warn(L, "%s on %s: %s", what, d ? d->alias : "?", e->message);
}

/* Raises the recorded sticky fault of d (never returns). */
int cdv_raise_sticky(lua_State *L, cdv_device *d) {
  cdv_err e = d->fault;
  snprintf(e.message, sizeof e.message,
           "%.60s is unusable after a sticky fault first seen at %.120s in %.60s: "
           "%.160s (CUDA recovers from it only in a new process)",
           d->alias, d->fault_where, d->fault.api, d->fault.message);
  e.sticky = 1;
  e.log = NULL;
  return cdv_raise(L, NULL, &e);
}

int cdv_error_open(lua_State *L) {
  static const luaL_Reg meta[] = {{"__tostring", error_tostring}, {NULL, NULL}};
  cdv_new_class(L, CDV_ERROR, meta, NULL, NULL); /* NOTE [class registration]; __name is "cudadev.Error" */
  lua_setfield(L, -2, "Error"); /* module.Error = the metatable */
  return 0;
}
