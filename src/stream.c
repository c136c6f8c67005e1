/*
 * stream.c: cudadev.Stream and the per-state current stream of each device (Numba / PyTorch
 * semantics). A device's default stream is a Stream whose handle is NULL: the legacy default stream on
 * CUDA, the in-order host queue on cpu.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cdv.h"

/* NOTE [stream lifetime] in cdv.h: the set of live stream handles (few: a linear scan is enough). */
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static void **live;
static int nlive, live_cap;

void cdv_stream_register(void *h) {
  if (h == NULL) return;
  pthread_mutex_lock(&live_lock);
  if (nlive == live_cap) {
    int cap = live_cap ? 2 * live_cap : 16;
    void **v = realloc(live, sizeof *v * (size_t)cap);
    if (v != NULL) {
      live = v;
      live_cap = cap;
    }
  }
  if (nlive < live_cap) live[nlive++] = h;
  pthread_mutex_unlock(&live_lock);
}

void cdv_stream_unregister(void *h) {
  pthread_mutex_lock(&live_lock);
  for (int i = 0; i < nlive; i++)
    if (live[i] == h) {
      live[i] = live[--nlive];
      break;
    }
  pthread_mutex_unlock(&live_lock);
}

int cdv_stream_alive(void *h) {
  int found = h == NULL;
  pthread_mutex_lock(&live_lock);
  for (int i = 0; i < nlive && !found; i++) found = live[i] == h;
  pthread_mutex_unlock(&live_lock);
  return found;
}

static const char *const stream_opts[] = {"priority", "blocking", NULL};

/* A Stream value on d with no handle yet (the default stream until one is set); not owned. */
cdv_stream *cdv_new_stream(lua_State *L, cdv_device *d) {
  cdv_stream *s = lua_newuserdatauv(L, sizeof *s, 0);
  memset(s, 0, sizeof *s);
  s->magic = CDV_STREAM_MAGIC;
  s->dev = d;
  s->generation = d->generation;
  luaL_setmetatable(L, CDV_STREAM);
  cdv_track_late(L, -1); /* NOTE [objects made in finalizers] */
  return s;
}

/* Anchors the current streams so the collector keeps them while the state points at them. */
static void anchor(lua_State *L, cdv_device *d, int idx) {
  idx = lua_absindex(L, idx);
  luaL_getsubtable(L, LUA_REGISTRYINDEX, "cudadev.current_streams"); /* made anew if a script removed it */
  lua_pushvalue(L, idx);
  lua_rawseti(L, -2, d->index);
  lua_pop(L, 1);
}

cdv_stream *cdv_current_stream(lua_State *L, cdv_device *d) { return cdv_state_stream(L, cdv_get_state(L), d); }

/* The slot is trusted only while the anchor table holds that very userdata: a script with the debug library can
 * replace the table, and then the Stream may have been collected under the slot (ASan: the fuzzer's sandboxed
 * states). The pointer is compared, never followed, before that. */
static int anchored_stream(lua_State *L, cdv_device *d, const cdv_stream *s) {
  if (s == NULL) return 0;
  luaL_getsubtable(L, LUA_REGISTRYINDEX, "cudadev.current_streams");
  int ok = lua_rawgeti(L, -1, d->index) == LUA_TUSERDATA && lua_touserdata(L, -1) == (const void *)s;
  lua_pop(L, 2);
  return ok;
}

void cdv_set_current_slot(cdv_state *st, cdv_device *d, cdv_stream *s) {
  st->cur_stream[d->index] = s;
  st->cur_set[d->index] = s != NULL;
  st->cur_handle[d->index] = s != NULL ? s->handle : NULL;
  st->cur_generation[d->index] = s != NULL ? s->generation : 0;
}

/* (see NOTE [coroutine scopes]) the running coroutine's own stream for d, pushed (1), or 0 (nothing pushed). One that
 * was destroyed or made before a reset is the default stream, as in cdv_state_stream. */
static int push_scoped(lua_State *L, cdv_device *d) {
  if (!cdv_coscope_push(L, 0, 0)) return 0;
  if (lua_rawgeti(L, -1, d->index + 1) == LUA_TNIL) {
    lua_pop(L, 2);
    return 0;
  }
  cdv_stream *s = cdv_test_magic(L, -1, sizeof *s, CDV_STREAM_MAGIC);
  if (s == NULL || s->dev != d || s->generation != d->generation) {
    lua_pop(L, 1);
    cdv_new_stream(L, d);
    lua_pushvalue(L, -1);
    lua_rawseti(L, -3, d->index + 1);
  }
  lua_remove(L, -2);
  return 1;
}

cdv_stream *cdv_state_stream(lua_State *L, cdv_state *st, cdv_device *d) {
  if (st->coscopes && push_scoped(L, d)) {
    cdv_stream *scoped = lua_touserdata(L, -1); /* the coroutine's record holds it */
    lua_pop(L, 1);
    return scoped;
  }
  cdv_stream *s = st->cur_stream[d->index];
  if (!anchored_stream(L, d, s)) cdv_set_current_slot(st, d, s = NULL);
  if (s == NULL || s->dev == NULL || s->generation != d->generation) {
    s = cdv_new_stream(L, d); /* the default stream */
    anchor(L, d, -1);
    lua_pop(L, 1);
    cdv_set_current_slot(st, d, s);
  }
  return s;
}

void cdv_push_current_stream(lua_State *L, cdv_device *d) {
  cdv_state *st = cdv_get_state(L);
  if (st->coscopes && push_scoped(L, d)) return;
  cdv_state_stream(L, st, d);
  luaL_getsubtable(L, LUA_REGISTRYINDEX, "cudadev.current_streams");
  if (lua_rawgeti(L, -1, d->index) != LUA_TUSERDATA || lua_touserdata(L, -1) != st->cur_stream[d->index]) {
    lua_pop(L, 1); /* a script emptied the table (the debug library): the default stream again */
    cdv_set_current_slot(st, d, NULL);
    cdv_state_stream(L, st, d);
    lua_rawgeti(L, -1, d->index);
  }
  lua_remove(L, -2);
}

static cdv_stream *check_any(lua_State *L, int arg) {
  return cdv_check_udata(L, arg, CDV_STREAM, CDV_STREAM_MAGIC, sizeof(cdv_stream));
}

/* A Stream destroyed, or made before its device was reset; NULL when it can be used. A LaunchConfig holds a
 * Stream and asks again at each launch. */
const char *cdv_stream_unusable(const cdv_stream *s) {
  if (s->dev == NULL) return "attempt to use a destroyed stream";
  if (s->generation != s->dev->generation) return "stale Stream: device was reset";
  return NULL;
}

/* NOTE [checked values] in cdv.h */
const char *cdv_stream_problem(lua_State *L, int idx, cdv_stream **out) {
  void *p;
  const char *why = cdv_udata_problem(L, idx, CDV_STREAM, CDV_STREAM_MAGIC, sizeof **out, &p);
  *out = p;
  return why != NULL ? why : cdv_stream_unusable(*out);
}

cdv_stream *cdv_check_stream(lua_State *L, int arg) {
  cdv_stream *s;
  const char *why = cdv_stream_problem(L, arg, &s);
  if (why != NULL) cdv_self_error(L, arg, why); /* NOTE [self errors] */
  return s;
}

cdv_stream *cdv_opt_stream_field(lua_State *L, int t, const char *fname) {
  cdv_stream *s = NULL;
  if (cdv_opt_field(L, t, "stream") != LUA_TNIL) {
    const char *why = cdv_stream_problem(L, -1, &s);
    if (why != NULL) cdv_opt_error(L, "stream", fname, why);
  }
  lua_pop(L, 1);
  return s;
}

/* The backend handle for work on d: the given stream (which must be on d), else d's current stream. */
void *cdv_stream_for(lua_State *L, cdv_device *d, cdv_stream *s) {
  if (s == NULL) return cdv_current_stream(L, d)->handle;
  if (s->dev != d) luaL_error(L, "stream is on %s but the work is on %s", s->dev->alias, d->alias);
  return s->handle;
}

/* cd.stream([device] [, {priority=, blocking=}]) wraps cuStreamCreateWithPriority */
static int l_stream(lua_State *L) {
  int o = lua_istable(L, 1) ? 1 : 2;
  cdv_device *d = o == 1 ? cdv_default_device(L) : cdv_opt_device(L, 1);
  cdv_check_options(L, o, stream_opts, "stream");
  int prio = 0;
  if (cdv_opt_field(L, o, "priority") != LUA_TNIL) {
    int isint;
    lua_Integer p = lua_tointegerx(L, -1, &isint);
    if (!isint)
      return cdv_opt_error(L, "priority", "stream",
                           lua_pushfstring(L, "integer expected, got %s", cdv_typename(L, -1)));
    if (p < -1000 || p > 1000) /* the driver clamps to its range; far outside it is a mistake */
      return cdv_opt_error(L, "priority", "stream",
                           lua_pushfstring(L, "integer from -1000 to 1000 expected, got %I", p));
    prio = (int)p;
  }
  lua_pop(L, 1);
  int blocking = cdv_check_boolean_field(L, o, "blocking", 0, "stream");
  cdv_device_use(L, d);
  cdv_stream *s = cdv_new_stream(L, d);
  cdv_try(L, d, d->be->stream_create(d, prio, blocking, &s->handle, &e_));
  cdv_stream_register(s->handle);
  cdv_live_add(CDV_LIVE_STREAM, 1);
  s->owned = 1;
  s->priority = prio;
  return 1;
}

/* __gc/__close and :destroy(): waits for the stream's work (arrays may still name it: NOTE [stream
 * lifetime]), then cuStreamDestroy. */
static void release(lua_State *L, cdv_stream *s) {
  cdv_state *st = cdv_peek_state(L); /* from __gc too: never made anew here (NOTE [state record]) */
  if (st != NULL) /* every slot that names it, whatever its device says now (NOTE [current stream cache]) */
    for (int i = 0; i < CDV_MAXDEV; i++)
      if (st->cur_stream[i] == s) {
        st->cur_stream[i] = NULL;
        st->cur_set[i] = 0;
        st->cur_handle[i] = NULL;
      }
  if (s->owned && s->dev != NULL && cdv_still_owned(s->dev, s->generation)) {
    cdv_err e; /* the blocks kept for reuse on it are freed on it first (NOTE [block cache]) */
    if (s->dev->be->stream_synchronize(s->dev, s->handle, &e) != 0 ||
        (st != NULL && cdv_block_release(st, s->dev, s->handle, 0, &e) != 0) ||
        s->dev->be->stream_destroy(s->dev, s->handle, &e) != 0)
      cdv_warn_release(L, "destroying a stream", s->dev, &e);
  }
  if (s->owned) {
    cdv_stream_unregister(s->handle);
    cdv_live_add(CDV_LIVE_STREAM, -1);
  }
  if (s->handle != NULL) s->dev = NULL; /* later use says the stream was destroyed (a host's too) */
  s->owned = 0;
  s->handle = NULL;
}

static int stream_release(lua_State *L) {
  release(L, check_any(L, 1));
  return 0;
}

/* s:destroy(): a second destroy is an error, as a second a:free() (NOTE [self errors]); __close is quiet */
static int stream_destroy(lua_State *L) {
  release(L, cdv_check_stream(L, 1));
  return 0;
}

static int stream_gc(lua_State *L) {
  cdv_stream *s = cdv_test_magic(L, 1, sizeof *s, CDV_STREAM_MAGIC);
  if (s != NULL) release(L, s); /* __gc never raises (NOTE [magic]) */
  return 0;
}

static int stream_synchronize(lua_State *L) {
  cdv_stream *s = cdv_check_stream(L, 1);
  cdv_device_use(L, s->dev);
  cdv_try(L, s->dev, cdv_wait_stream(L, s->dev, s->handle, &e_)); /* NOTE [interruptible waits] */
  cdv_callbacks_drain(L); /* NOTE [stream callbacks] */
  return 0;
}

static int stream_query(lua_State *L) {
  cdv_stream *s = cdv_check_stream(L, 1);
  int idle = 1;
  cdv_device_use(L, s->dev);
  cdv_try(L, s->dev, s->dev->be->stream_query(s->dev, s->handle, &idle, &e_));
  cdv_callbacks_drain(L); /* NOTE [stream callbacks] */
  lua_pushboolean(L, idle);
  return 1;
}

static int stream_wait_event(lua_State *L) {
  cdv_stream *s = cdv_check_stream(L, 1);
  cdv_event *ev = cdv_check_event(L, 2);
  if (ev->dev->be != s->dev->be) return luaL_argerror(L, 2, "event and stream belong to different kinds of device");
  cdv_device_use(L, s->dev);
  cdv_try(L, s->dev, s->dev->be->stream_wait_event(s->dev, s->handle, ev->handle, &e_));
  lua_settop(L, 1);
  return 1;
}

/* s:record_event([e]) -> e, recorded on s */
static int stream_record_event(lua_State *L) {
  cdv_check_stream(L, 1);
  if (!lua_isnoneornil(L, 2))
    cdv_check_event(L, 2);
  else {
    lua_settop(L, 1);
    lua_pushcfunction(L, cdv_event_new);
    lua_getfield(L, 1, "device");
    lua_call(L, 1, 1); /* the new event lands at 2 */
  }
  lua_getfield(L, 2, "record");
  lua_pushvalue(L, 2);
  lua_pushvalue(L, 1);
  lua_call(L, 2, 0);
  lua_settop(L, 2);
  return 1;
}

/* s:wait_stream(other): s waits for the work queued on other so far (an event in between) */
static int stream_wait_stream(lua_State *L) {
  cdv_check_stream(L, 1);
  cdv_check_stream(L, 2);
  lua_pushcfunction(L, stream_record_event);
  lua_pushvalue(L, 2);
  lua_call(L, 1, 1);
  lua_pushcfunction(L, stream_wait_event);
  lua_pushvalue(L, 1);
  lua_pushvalue(L, -3);
  lua_call(L, 2, 0);
  lua_settop(L, 1);
  return 1;
}

static int stream_tostring(lua_State *L) {
  cdv_stream *s = check_any(L, 1);
  if (s->dev == NULL)
    lua_pushliteral(L, "Stream(destroyed)");
  else if (s->handle == NULL)
    lua_pushfstring(L, "Stream(%s default)", s->dev->alias);
  else if (cdv_get_state(L)->sandbox) /* no raw handle in a sandbox (NOTE [state limits]) */
    lua_pushfstring(L, "Stream(%s priority %d)", s->dev->alias, s->priority);
  else
    lua_pushfstring(L, "Stream(%s %p priority %d)", s->dev->alias, s->handle, s->priority);
  return 1;
}

static int stream_index(lua_State *L) {
  check_any(L, 1);
  if (lua_type(L, 2) == LUA_TSTRING && cdv_push_method(L)) return 1; /* methods check the stream themselves */
  cdv_stream *s = cdv_check_stream(L, 1);
  const char *k = luaL_checkstring(L, 2);
  if (strcmp(k, "device") == 0)
    cdv_push_device(L, s->dev);
  else if (strcmp(k, "priority") == 0)
    lua_pushinteger(L, s->priority);
  else if (strcmp(k, "is_default") == 0)
    lua_pushboolean(L, s->handle == NULL);
  else if (strcmp(k, "handle") == 0) { /* a raw address: NOTE [state limits] in embed.c */
    if (cdv_get_state(L)->sandbox) return luaL_error(L, "raw addresses are not available in this sandbox");
    lua_pushinteger(L, (lua_Integer)(intptr_t)s->handle);
  } else
    return luaL_error(L, "Stream has no field or method '%s'", k);
  return 1;
}

static int stream_eq(lua_State *L) {
  cdv_stream *a = cdv_test_magic(L, 1, sizeof *a, CDV_STREAM_MAGIC),
             *b = cdv_test_magic(L, 2, sizeof *b, CDV_STREAM_MAGIC);
  lua_pushboolean(L, a && b && a->dev == b->dev && a->handle == b->handle);
  return 1;
}

static int l_get_stream(lua_State *L) {
  cdv_push_current_stream(L, cdv_opt_device(L, 1));
  return 1;
}

/* the state's current stream of its device (see NOTE [coroutine scopes]; the main thread's) */
static void set_global(lua_State *L, int idx) {
  cdv_stream *s = cdv_check_stream(L, idx);
  anchor(L, s->dev, idx);
  cdv_set_current_slot(cdv_get_state(L), s->dev, s);
}

/* cd.set_stream: the running coroutine's where one of its scopes holds it, else the state's */
static void set_current(lua_State *L, int idx) {
  cdv_stream *s = cdv_check_stream(L, idx);
  idx = lua_absindex(L, idx);
  if (cdv_get_state(L)->coscopes && cdv_coscope_push(L, 0, 0)) {
    int scoped = lua_rawgeti(L, -1, s->dev->index + 1) != LUA_TNIL;
    lua_pop(L, 1);
    if (scoped) {
      lua_pushvalue(L, idx);
      lua_rawseti(L, -2, s->dev->index + 1);
    }
    lua_pop(L, 1);
    if (scoped) return;
  }
  set_global(L, idx);
}

static int l_set_stream(lua_State *L) {
  set_current(L, 1);
  return 0;
}

/* The stream scope restores the previous current stream of the device when closed: user value 1 is that stream
 * (nil in a coroutine's scope: the state's), user value 2 the coroutine whose record it changed (NOTE [coroutine
 * scopes]), nil for the state's. */
typedef struct stream_scope {
  uint64_t magic;
  int closed, dev;
} stream_scope;
#define STREAM_SCOPE_MAGIC (CDV_SCOPE_MAGIC + 2)

static int stream_scope_close(lua_State *L) {
  stream_scope *sc = cdv_check_udata(L, 1, "cudadev.StreamScope", STREAM_SCOPE_MAGIC, sizeof *sc);
  if (sc->closed) return 0;
  sc->closed = 1;
  lua_settop(L, 1); /* __close gets the error too */
  lua_getiuservalue(L, 1, 1);
  if (lua_getiuservalue(L, 1, 2) == LUA_TNIL)
    set_global(L, 2);
  else if (cdv_coscope_push(L, 3, 0)) {
    lua_pushvalue(L, 2);
    lua_rawseti(L, -2, sc->dev + 1);
  }
  return 0;
}

/* with_stream(s, fn, ...): like with_device, a to-be-closed slot restores the stream on error too */
static int l_with_stream(lua_State *L) {
  cdv_stream *s = cdv_check_stream(L, 1);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  int nargs = lua_gettop(L) - 2;
  stream_scope *sc = lua_newuserdatauv(L, sizeof *sc, 2);
  *sc = (stream_scope){STREAM_SCOPE_MAGIC, 1, s->dev->index}; /* closed until the stream is set */
  luaL_setmetatable(L, "cudadev.StreamScope");
  if (cdv_coscope_push(L, 0, 1)) { /* a coroutine: its own stream (NOTE [coroutine scopes]) */
    lua_rawgeti(L, -1, s->dev->index + 1);
    lua_setiuservalue(L, -3, 1);
    lua_pushvalue(L, 1);
    lua_rawseti(L, -2, s->dev->index + 1);
    lua_pop(L, 1);
    lua_pushthread(L);
    lua_setiuservalue(L, -2, 2);
  } else {
    cdv_push_current_stream(L, s->dev);
    lua_setiuservalue(L, -2, 1);
    set_global(L, 1);
  }
  sc->closed = 0;
  lua_insert(L, 1);
  lua_toclose(L, 1);
  lua_remove(L, 2);
  return cdv_call_scoped_k(L, nargs); /* NOTE [scoped calls], NOTE [coroutine scopes] */
}

static const luaL_Reg methods[] = {{"synchronize", stream_synchronize},
                                   {"query", stream_query},
                                   {"wait_event", stream_wait_event},
                                   {"wait_stream", stream_wait_stream},
                                   {"record_event", stream_record_event},
                                   {"destroy", stream_destroy},
                                   {"add_callback", cdv_stream_add_callback},
                                   {"await", cdv_stream_await},
                                   {NULL, NULL}};

static const luaL_Reg functions[] = {{"stream", l_stream},
                                     {"get_stream", l_get_stream},
                                     {"set_stream", l_set_stream},
                                     {"with_stream", l_with_stream},
                                     {NULL, NULL}};

int cdv_stream_open(lua_State *L) {
  static const luaL_Reg meta[] = {{"__tostring", stream_tostring},
                                  {"__gc", stream_gc},
                                  {"__close", stream_release},
                                  {"__eq", stream_eq},
                                  {NULL, NULL}};
  cdv_new_class(L, CDV_STREAM, meta, methods, stream_index); /* NOTE [class registration] */
  lua_pop(L, 1);
  static const luaL_Reg scope_meta[] = {{"__close", stream_scope_close}, {NULL, NULL}};
  cdv_new_class(L, "cudadev.StreamScope", scope_meta, NULL, NULL);
  lua_pop(L, 1);
  luaL_getsubtable(L, LUA_REGISTRYINDEX, "cudadev.current_streams"); /* cdv_state points into it */
  lua_pop(L, 1);
  luaL_setfuncs(L, functions, 0);
  return 0;
}
