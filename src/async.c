/*
 * async.c: what lets Lua code overlap its waits for the device: per-coroutine device and stream scopes, stream
 * host callbacks (s:add_callback, cd.poll) and s:await / e:await, which yield the running coroutine until the
 * work is done.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cdv.h"

/* ------------------------------------------------------------ NOTE [coroutine scopes] */

/* NOTE [coroutine scopes]: cd.scope, cd.with_device and cd.with_stream opened inside a coroutine change that
 * coroutine's settings only: a yield inside them keeps them for the coroutine and leaves its resumer's untouched,
 * so two coroutines that interleave each see their own device and stream after every resume. Each coroutine that
 * opened a scope has a record, a table in a weak-keyed registry table indexed by the thread: [0] is the index of
 * its default device, [i + 1] its current Stream on the device of index i; nil is "the state's" (what the main
 * thread sets, and what the coroutine sees where it has opened no scope). The main thread's scopes change the
 * state's settings, as before. cd.set_device / cd.set_stream change the coroutine's record where the record holds
 * that setting (inside one of its scopes), else the state's. A coroutine resumed by another one sees the state's
 * settings, not its resumer's scopes: Lua tells a C function neither who resumed the running coroutine nor when
 * a coroutine is resumed. st->coscopes says that some coroutine made a record: until then the lookups cost
 * nothing; after that, a lookup from a coroutine reads its record first (two table reads). */
static const char COSCOPES_KEY = 'c';

int cdv_coscope_push(lua_State *L, int idx, int create) {
  if (idx == 0) {
    if (lua_pushthread(L)) { /* the main thread: the state's settings */
      lua_pop(L, 1);
      return 0;
    }
  } else {
    idx = lua_absindex(L, idx);
    lua_State *co = lua_tothread(L, idx);
    if (co == NULL) return 0;
    lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
    int main_thread = lua_tothread(L, -1) == co;
    lua_pop(L, 1);
    if (main_thread) return 0;
    lua_pushvalue(L, idx);
  }
  if (create)
    cdv_weak_registry_table(L, &COSCOPES_KEY);
  else if (lua_rawgetp(L, LUA_REGISTRYINDEX, &COSCOPES_KEY) != LUA_TTABLE) {
    lua_pop(L, 2);
    return 0;
  }
  lua_pushvalue(L, -2);
  if (lua_rawget(L, -2) != LUA_TTABLE) {
    lua_pop(L, 1);
    if (!create) {
      lua_pop(L, 2);
      return 0;
    }
    lua_newtable(L);
    lua_pushvalue(L, -3);
    lua_pushvalue(L, -2);
    lua_rawset(L, -4);
  }
  if (create) cdv_get_state(L)->coscopes = 1;
  lua_replace(L, -3); /* thread, table, record -> record */
  lua_pop(L, 1);
  return 1;
}

/* ------------------------------------------------------------ NOTE [stream callbacks] */

/* NOTE [stream callbacks]: s:add_callback(fn) queues a host function on the stream (cuLaunchHostFunc). The driver
 * calls it on a thread of its own once the work queued before it is done, and Lua may not run there: the host
 * function only moves the callback's node to the state's list of completed callbacks (a mutex guards it). The Lua
 * functions run on the Lua thread, oldest first, when the state next synchronizes or asks (cd.synchronize,
 * cd.synchronize_device, dev:synchronize, s:synchronize, s:query, e:synchronize, e:query, s:await, e:await) and at
 * cd.poll(). An error in one is reported as a warning, as Lua reports an error in a finalizer ("error in stream
 * callback (...)"), and the next ones still run. The queue lives in a registry userdata; its finalizer (the state
 * closing) waits for the devices that still have callbacks queued, so that the driver has called every host
 * function before the queue is marked closed; the nodes completed but not run are dropped without being called,
 * and a node that the driver completes after that (a poisoned context never does) frees itself. On a device whose
 * work is done when queued (the cpu device) a callback is completed at once and runs at the next of those points. */
typedef struct cb_queue cb_queue;
typedef struct cb_node {
  cb_queue *q;
  int ref; /* the Lua function, in the registry */
  int dev; /* the index of the device it was queued on */
  struct cb_node *next;
} cb_node;

struct cb_queue {
  pthread_mutex_t lock;
  int refs; /* the registry's box, and each node alive */
  int closed;
  cb_node *head, *tail; /* completed, not run yet */
  int pending[CDV_MAXDEV]; /* queued on each device, not completed yet */
};

typedef struct cb_box {
  uint64_t magic;
  cb_queue *q;
} cb_box;
#define CB_BOX_MAGIC 0x63647643624271ULL /* "cdvCbBq" (NOTE [magic]) */
static const char CALLBACKS_KEY = 'q';

/* the last reference frees the queue; called with the lock held, which it releases */
static void queue_unref_unlock(cb_queue *q) {
  int last = --q->refs == 0;
  pthread_mutex_unlock(&q->lock);
  if (last) {
    pthread_mutex_destroy(&q->lock);
    free(q);
  }
}

/* the host function: on the driver's thread, never touches Lua */
static void cb_completed(void *ud) {
  cb_node *n = ud;
  cb_queue *q = n->q;
  pthread_mutex_lock(&q->lock);
  q->pending[n->dev]--;
  if (q->closed) {
    free(n);
    queue_unref_unlock(q);
    return;
  }
  n->next = NULL;
  if (q->tail != NULL)
    q->tail->next = n;
  else
    q->head = n;
  q->tail = n;
  pthread_mutex_unlock(&q->lock);
}

static int box_gc(lua_State *L) {
  cb_box *b = cdv_test_magic(L, 1, sizeof *b, CB_BOX_MAGIC);
  if (b == NULL || b->q == NULL) return 0; /* __gc never raises */
  cb_queue *q = b->q;
  b->q = NULL;
  int waiting[CDV_MAXDEV];
  pthread_mutex_lock(&q->lock);
  memcpy(waiting, q->pending, sizeof waiting);
  pthread_mutex_unlock(&q->lock);
  for (int i = 0; i < CDV_MAXDEV; i++) { /* let the driver call the host functions still queued */
    cdv_device *d = waiting[i] > 0 ? cdv_device_at(i) : NULL;
    cdv_err e;
    if (d != NULL && d->ctx != NULL && cdv_still_owned(d, d->generation)) d->be->synchronize(d, &e);
  }
  pthread_mutex_lock(&q->lock);
  q->closed = 1;
  cb_node *n = q->head;
  q->head = q->tail = NULL;
  while (n != NULL) { /* completed and never run: dropped, not called */
    cb_node *next = n->next;
    luaL_unref(L, LUA_REGISTRYINDEX, n->ref);
    free(n);
    q->refs--;
    n = next;
  }
  queue_unref_unlock(q);
  return 0;
}

/* the state's queue, pushed (its box); made when `create`, else NULL (nothing pushed) when there is none */
static cb_queue *push_queue(lua_State *L, int create) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &CALLBACKS_KEY) == LUA_TUSERDATA) {
    cb_box *b = cdv_test_magic(L, -1, sizeof *b, CB_BOX_MAGIC);
    if (b != NULL && b->q != NULL) return b->q;
  }
  lua_pop(L, 1);
  if (!create) return NULL;
  cb_box *b = lua_newuserdatauv(L, sizeof *b, 0);
  b->magic = CB_BOX_MAGIC;
  b->q = NULL; /* closed until the queue exists */
  luaL_setmetatable(L, "cudadev.CallbackQueue");
  cdv_track_late(L, -1); /* NOTE [objects made in finalizers] */
  cb_queue *q = calloc(1, sizeof *q);
  if (q == NULL) luaL_error(L, "not enough memory");
  pthread_mutex_init(&q->lock, NULL);
  q->refs = 1;
  b->q = q;
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &CALLBACKS_KEY);
  return q;
}

/* the text of an error value, as Lua words a finalizer's */
static const char *error_text(lua_State *L, int idx) {
  if (lua_type(L, idx) == LUA_TSTRING || lua_type(L, idx) == LUA_TNUMBER) return lua_tostring(L, idx);
  return lua_pushfstring(L, "error object is a %s value", luaL_typename(L, idx));
}

/* Runs the completed callbacks one at a time (a callback that drains again takes the next ones). Returns how many
 * ran. */
static int drain(lua_State *L) {
  int ran = 0, top = lua_gettop(L);
  cb_queue *q = push_queue(L, 0); /* the box stays on the stack while the callbacks run */
  while (q != NULL) {
    pthread_mutex_lock(&q->lock);
    cb_node *n = q->head;
    if (n != NULL && (q->head = n->next) == NULL) q->tail = NULL;
    if (n == NULL) {
      pthread_mutex_unlock(&q->lock);
      break;
    }
    int ref = n->ref;
    free(n);
    q->refs--; /* the box holds one: never the last */
    pthread_mutex_unlock(&q->lock);
    lua_rawgeti(L, LUA_REGISTRYINDEX, ref);
    luaL_unref(L, LUA_REGISTRYINDEX, ref);
    ran++;
    if (lua_pcall(L, 0, 0, 0) != LUA_OK) {
      cdv_warn(L, "error in stream callback (%s)", error_text(L, -1));
      lua_settop(L, top + 1);
    }
  }
  lua_settop(L, top);
  return ran;
}

void cdv_callbacks_drain(lua_State *L) { drain(L); }

/* cd.poll() -> the number of callbacks it ran */
static int l_poll(lua_State *L) {
  lua_pushinteger(L, drain(L));
  return 1;
}

/* s:add_callback(fn) -> s: fn() runs once the work queued on s so far is done (NOTE [stream callbacks]) */
int cdv_stream_add_callback(lua_State *L) {
  cdv_stream *s = cdv_check_stream(L, 1);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  cdv_device *d = s->dev;
  if (!d->be->done_when_queued && d->be->host_func == NULL)
    return luaL_error(L, "stream callbacks are not available on %s", d->alias);
  cdv_device_use(L, d);
  cb_queue *q = push_queue(L, 1);
  lua_pushvalue(L, 2);
  int ref = luaL_ref(L, LUA_REGISTRYINDEX);
  cb_node *n = malloc(sizeof *n);
  if (n == NULL) {
    luaL_unref(L, LUA_REGISTRYINDEX, ref);
    return luaL_error(L, "not enough memory");
  }
  *n = (cb_node){q, ref, d->index, NULL};
  pthread_mutex_lock(&q->lock);
  q->refs++;
  q->pending[d->index]++;
  pthread_mutex_unlock(&q->lock);
  cdv_err e;
  if (d->be->done_when_queued)
    cb_completed(n); /* the work before it is done already */
  else if (d->be->host_func(d, s->handle, cb_completed, n, &e) != 0) {
    pthread_mutex_lock(&q->lock);
    q->pending[d->index]--;
    q->refs--;
    pthread_mutex_unlock(&q->lock);
    free(n);
    luaL_unref(L, LUA_REGISTRYINDEX, ref);
    return cdv_raise(L, d, &e);
  }
  lua_settop(L, 1);
  return 1;
}

/* ------------------------------------------------------------ s:await / e:await */

/* NOTE [await]: s:await() and e:await() inside a coroutine that can yield poll the stream or event (cuStreamQuery,
 * cuEventQuery) and, while the work is not done, yield the object and a suggested delay in seconds before the next
 * poll: 20 microseconds, doubling at each poll that finds the work running, up to 2 milliseconds. A scheduler
 * resumes the coroutine when it likes (at once, or after the delay when it has nothing else to do); each resume
 * polls again. Outside a coroutine (the main thread, or a C call that cannot be yielded across) they synchronize,
 * which an interruptible state can interrupt. When the work is done they run the completed callbacks (NOTE [stream
 * callbacks]) and return the object. A stream destroyed or an event destroyed while a coroutine awaits it ends the
 * wait (destroying a stream waits for its work; a destroyed event has nothing left to wait for); a device reset,
 * likewise. */
enum { AWAIT_STREAM = 0, AWAIT_EVENT = 1, AWAIT_STEPS = 7 };

/* 1 when the work is done (or the object died since the first poll), 0 when it runs; raises on a failure */
static int await_done(lua_State *L, int kind, int first) {
  cdv_device *d;
  void *h;
  int done = 1;
  cdv_err e;
  if (kind == AWAIT_STREAM) {
    cdv_stream *s;
    if (first)
      s = cdv_check_stream(L, 1);
    else if (cdv_stream_problem(L, 1, &s) != NULL)
      return 1;
    d = s->dev;
    h = s->handle;
  } else {
    cdv_event *ev = first ? cdv_check_event(L, 1) : cdv_test_magic(L, 1, sizeof *ev, CDV_EVENT_MAGIC);
    if (ev == NULL || ev->dev == NULL || ev->generation != ev->dev->generation) return 1;
    d = ev->dev;
    h = ev->handle;
  }
  cdv_device_use(L, d);
  int rc = kind == AWAIT_STREAM ? d->be->stream_query(d, h, &done, &e) : d->be->event_query(d, h, &done, &e);
  if (rc != 0) cdv_raise(L, d, &e);
  return done;
}

static int await_k(lua_State *L, int status, lua_KContext ctx);

/* yields the object and the delay of poll number `step` (NOTE [await]) */
static int yield_poll(lua_State *L, int kind, int step) {
  lua_settop(L, 1);
  lua_pushvalue(L, 1);
  lua_pushnumber(L, step < AWAIT_STEPS ? 20e-6 * (double)(1 << step) : 2e-3);
  return lua_yieldk(L, 2, (lua_KContext)(kind | (step < AWAIT_STEPS ? step + 1 : step) << 1), await_k);
}

static int await_k(lua_State *L, int status, lua_KContext ctx) {
  (void)status;
  lua_settop(L, 1); /* what resume passed is not ours */
  if (!await_done(L, (int)(ctx & 1), 0)) return yield_poll(L, (int)(ctx & 1), (int)(ctx >> 1));
  drain(L);
  return 1;
}

static int await(lua_State *L, int kind) {
  lua_settop(L, 1);
  if (!await_done(L, kind, 1)) {
    if (lua_isyieldable(L)) return yield_poll(L, kind, 0);
    cdv_err e;
    if (kind == AWAIT_STREAM) {
      cdv_stream *s = cdv_check_stream(L, 1);
      if (cdv_wait_stream(L, s->dev, s->handle, &e) != 0) cdv_raise(L, s->dev, &e); /* NOTE [interruptible waits] */
    } else {
      cdv_event *ev = cdv_check_event(L, 1);
      if (cdv_wait_event(L, ev->dev, ev->handle, &e) != 0) cdv_raise(L, ev->dev, &e);
    }
  }
  drain(L);
  return 1;
}

int cdv_stream_await(lua_State *L) { return await(L, AWAIT_STREAM); }
int cdv_event_await(lua_State *L) { return await(L, AWAIT_EVENT); }

int cdv_async_open(lua_State *L) {
  luaL_newmetatable(L, "cudadev.CallbackQueue");
  lua_pushcfunction(L, box_gc);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
  lua_pushcfunction(L, l_poll);
  lua_setfield(L, -2, "poll");
  return 0;
}
