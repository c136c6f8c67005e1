/*
 * event.c: cudadev.Event (Numba / PyTorch semantics): markers recorded on a stream, used for timing and
 * for making one stream wait for another.
 */
#include <string.h>

#include "cdv.h"

static const char *const event_opts[] = {"timing", "blocking", "ipc", NULL};

static cdv_event *check_any(lua_State *L, int arg) {
  return cdv_check_udata(L, arg, CDV_EVENT, CDV_EVENT_MAGIC, sizeof(cdv_event));
}

cdv_event *cdv_check_event(lua_State *L, int arg) {
  cdv_event *ev = check_any(L, arg);
  if (ev->dev == NULL) cdv_self_error(L, arg, "attempt to use a destroyed event"); /* NOTE [self errors] */
  if (ev->generation != ev->dev->generation) cdv_self_error(L, arg, "stale Event: device was reset");
  return ev;
}

/* A closed Event, pushed: no handle, dev NULL until the caller has one (a failure leaves nothing half-made). */
cdv_event *cdv_new_event(lua_State *L) {
  cdv_event *ev = lua_newuserdatauv(L, sizeof *ev, 0);
  memset(ev, 0, sizeof *ev);
  ev->magic = CDV_EVENT_MAGIC;
  luaL_setmetatable(L, CDV_EVENT);
  cdv_track_late(L, -1); /* NOTE [objects made in finalizers] */
  return ev;
}

/* cd.event([device] [, {timing=true, blocking=false, ipc=false}]) wraps cuEventCreate; ipc = true: an interprocess
 * event, which cannot time (NOTE [ipc] in ipc.c) */
int cdv_event_new(lua_State *L) {
  int o = lua_istable(L, 1) ? 1 : 2;
  cdv_device *d = o == 1 ? cdv_default_device(L) : cdv_opt_device(L, 1);
  cdv_check_options(L, o, event_opts, "event");
  int ipc = cdv_check_boolean_field(L, o, "ipc", 0, "event");
  int timing = cdv_check_boolean_field(L, o, "timing", !ipc, "event");
  int blocking = cdv_check_boolean_field(L, o, "blocking", 0, "event");
  if (ipc && timing) return cdv_opt_error(L, "timing", "event", "an ipc event cannot time: leave timing out");
  if (ipc && d->be->ipc_event_create == NULL)
    return cdv_opt_error(L, "ipc", "event",
                         lua_pushfstring(L, "%s cannot share events between processes: use a cuda device", d->alias));
  cdv_device_use(L, d);
  cdv_event *ev = cdv_new_event(L);
  cdv_try(L, d,
          ipc ? d->be->ipc_event_create(d, blocking, &ev->handle, &e_)
              : d->be->event_create(d, timing, blocking, &ev->handle, &e_));
  ev->dev = d;
  ev->generation = d->generation;
  ev->timing = timing;
  ev->ipc = ipc;
  cdv_live_add(CDV_LIVE_EVENT, 1);
  return 1;
}

static void release(lua_State *L, cdv_event *ev) {
  cdv_device *d = ev->dev;
  if (d != NULL) cdv_live_add(CDV_LIVE_EVENT, -1);
  if (d != NULL && cdv_still_owned(d, ev->generation)) {
    cdv_err e;
    if (d->be->event_destroy(d, ev->handle, &e) != 0) cdv_warn_release(L, "destroying an event", d, &e);
  }
  ev->dev = NULL;
  ev->handle = NULL;
}

static int event_release(lua_State *L) {
  release(L, check_any(L, 1));
  return 0;
}

/* e:destroy(): a second destroy is an error, as a second a:free() (NOTE [self errors]); __close is quiet */
static int event_destroy(lua_State *L) {
  release(L, cdv_check_event(L, 1));
  return 0;
}

static int event_gc(lua_State *L) {
  cdv_event *ev = cdv_test_magic(L, 1, sizeof *ev, CDV_EVENT_MAGIC);
  if (ev != NULL) release(L, ev); /* __gc never raises (NOTE [magic]) */
  return 0;
}

static cdv_stream *opt_stream(lua_State *L, int arg) {
  return lua_isnoneornil(L, arg) ? NULL : cdv_check_stream(L, arg);
}

/* e:record([stream]) wraps cuEventRecord (default: the current stream of the event's device) */
static int event_record(lua_State *L) {
  cdv_event *ev = cdv_check_event(L, 1);
  void *s = cdv_stream_for(L, ev->dev, opt_stream(L, 2));
  cdv_device_use(L, ev->dev);
  cdv_try(L, ev->dev, ev->dev->be->event_record(ev->dev, ev->handle, s, &e_));
  lua_settop(L, 1);
  return 1;
}

static int event_query(lua_State *L) {
  cdv_event *ev = cdv_check_event(L, 1);
  int done = 1;
  cdv_device_use(L, ev->dev);
  cdv_try(L, ev->dev, ev->dev->be->event_query(ev->dev, ev->handle, &done, &e_));
  cdv_callbacks_drain(L); /* NOTE [stream callbacks] */
  lua_pushboolean(L, done);
  return 1;
}

static int event_synchronize(lua_State *L) {
  cdv_event *ev = cdv_check_event(L, 1);
  cdv_device_use(L, ev->dev);
  cdv_try(L, ev->dev, cdv_wait_event(L, ev->dev, ev->handle, &e_)); /* NOTE [interruptible waits] */
  cdv_callbacks_drain(L); /* NOTE [stream callbacks] */
  lua_settop(L, 1);
  return 1;
}

/* e:wait([stream]): work queued later on the stream waits for the event (cuStreamWaitEvent) */
static int event_wait(lua_State *L) {
  cdv_event *ev = cdv_check_event(L, 1);
  cdv_stream *s = opt_stream(L, 2);
  cdv_device *d = s ? s->dev : ev->dev;
  if (d->be != ev->dev->be) return luaL_argerror(L, 2, "event and stream belong to different kinds of device");
  void *h = cdv_stream_for(L, d, s);
  cdv_device_use(L, d);
  cdv_try(L, d, d->be->stream_wait_event(d, h, ev->handle, &e_));
  lua_settop(L, 1);
  return 1;
}

/* milliseconds from a to b (cuEventElapsedTime) */
static int elapsed(lua_State *L, int a, int b) {
  cdv_event *e1 = cdv_check_event(L, a), *e2 = cdv_check_event(L, b);
  if (e1->dev != e2->dev)
    return luaL_argerror(L, b,
                         lua_pushfstring(L, "events on different devices (%s and %s)", e1->dev->alias, e2->dev->alias));
  if (!e1->timing || !e2->timing) return luaL_argerror(L, e1->timing ? b : a, "event was created with timing=false");
  float ms = 0;
  cdv_device_use(L, e1->dev);
  cdv_try(L, e1->dev, e1->dev->be->event_elapsed(e1->dev, e1->handle, e2->handle, &ms, &e_));
  lua_pushnumber(L, ms);
  return 1;
}

static int event_elapsed(lua_State *L) { return elapsed(L, 1, 2); }
static int l_elapsed_time(lua_State *L) { return elapsed(L, 1, 2); }

static int event_tostring(lua_State *L) {
  cdv_event *ev = check_any(L, 1);
  if (ev->dev == NULL)
    lua_pushliteral(L, "Event(destroyed)");
  else
    lua_pushfstring(L, "Event(%s%s)", ev->dev->alias, ev->timing ? "" : " no timing");
  return 1;
}

static int event_index(lua_State *L) {
  check_any(L, 1);
  if (lua_type(L, 2) == LUA_TSTRING && cdv_push_method(L)) return 1; /* methods check the event themselves */
  cdv_event *ev = cdv_check_event(L, 1);
  const char *k = luaL_checkstring(L, 2);
  if (strcmp(k, "device") == 0)
    cdv_push_device(L, ev->dev);
  else if (strcmp(k, "timing") == 0)
    lua_pushboolean(L, ev->timing);
  else if (strcmp(k, "is_ipc") == 0)
    lua_pushboolean(L, ev->ipc != 0);
  else
    return luaL_error(L, "Event has no field or method '%s'", k);
  return 1;
}

static const luaL_Reg methods[] = {{"record", event_record},
                                   {"query", event_query},
                                   {"synchronize", event_synchronize},
                                   {"wait", event_wait},
                                   {"elapsed", event_elapsed},
                                   {"destroy", event_destroy},
                                   {"await", cdv_event_await},
                                   {"ipc_handle", cdv_event_ipc_handle},
                                   {NULL, NULL}};

int cdv_event_open(lua_State *L) {
  static const luaL_Reg meta[] = {
      {"__tostring", event_tostring}, {"__gc", event_gc}, {"__close", event_release}, {NULL, NULL}};
  cdv_new_class(L, CDV_EVENT, meta, methods, event_index); /* NOTE [class registration] */
  lua_pop(L, 1);
  lua_pushcfunction(L, cdv_event_new);
  lua_setfield(L, -2, "event");
  lua_pushcfunction(L, l_elapsed_time);
  lua_setfield(L, -2, "elapsed_time");
  return 0;
}
