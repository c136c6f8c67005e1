/*
 * embed.c: the embedding API of cudadev.h and what it needs inside the library: per-state options
 * (sandbox, memory quota, allowed compile options), host objects as Lua values (contexts, memory,
 * streams), reading Arrays from C, host errors, and interruptible waits.
 *
 * NOTE [state limits]: an embedding host sets limits per lua_State, before luaopen_cudadev, in the
 * state record (cdv_state). The checks live where the work is: array.c asks cdv_quota_check before an
 * allocation and gives the bytes back when the block is freed (the block remembers the state it counts
 * against: every block dies before its state, since lua_close runs all finalizers before freeing
 * anything); module.c asks cdv_check_compile_options and refuses cpu compiles in a sandbox; array.c
 * (a.ptr), stream.c (s.handle), module.c (integers as pointers, load_module) and peer.c (map_cuda_device
 * with a context pointer) refuse raw addresses in a sandbox. The quota counts what an allocation really holds
 * (cdv_footprint), and every state has a cap on the allocations it holds at once (max_arrays, by default
 * CDV_DEFAULT_MAX_ARRAYS): on the cpu device each is a mapping, and the process has about 65k. The lists
 * (allowed compile options, include directories) are C copies in the record, out of a script's reach
 * (NOTE [state record]); NOTE [sandboxed includes] (sandbox.c) says what a sandbox lets NVRTC read.
 *
 * NOTE [interruptible waits]: a REPL (luacuda) wants Ctrl-C to stop a wait for the GPU, not only a Lua
 * loop. In a state marked interruptible, synchronize on a device, stream or event polls the backend's
 * query with short sleeps (20 us growing to 1 ms) and raises "interrupted!" once cudadev_interrupt() was
 * called (from a signal handler: it only sets a sig_atomic_t). The work already queued keeps running; we
 * stop waiting for it. After the poll, the blocking call runs anyway: it returns at once and reports a
 * failure the query may have missed. A CUDA device has no query for "all work of the context", so its wait
 * runs cuCtxSynchronize on a helper thread and polls for that thread's answer; an interrupted wait leaves
 * the helper to finish on its own. States that are not interruptible (the default) wait with the
 * backend's blocking call, on the calling thread.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cdv.h"
#include "cpu.h"
#include "cudadev.h"

CUDADEV_API const char *cudadev_version(void) { return CDV_VERSION; }

/* ------------------------------------------------------------ options */

CUDADEV_API void cudadev_set_sandbox(lua_State *L, int on) {
  cdv_get_state(L)->sandbox = on != 0;
  if (on) cdv_protect_metatables(L); /* (see NOTE [protected metatables]) those already made */
}

CUDADEV_API void cudadev_set_memory_quota(lua_State *L, size_t bytes) { cdv_get_state(L)->quota = bytes; }

CUDADEV_API void cudadev_set_interruptible(lua_State *L, int on) { cdv_get_state(L)->interruptible = on != 0; }

CUDADEV_API size_t cudadev_memory_quota_used(lua_State *L) { return cdv_get_state(L)->quota_used; }

CUDADEV_API void cudadev_set_max_arrays(lua_State *L, size_t n) { cdv_get_state(L)->max_arrays = n; }

static void free_list(char **v) {
  for (size_t i = 0; v != NULL && v[i] != NULL; i++) free(v[i]);
  free(v);
}

void cdv_free_state_options(cdv_state *st) {
  free_list(st->allowed_options);
  free_list(st->include_dirs);
  st->allowed_options = st->include_dirs = NULL;
}

/* A copy of a NULL-terminated list (NULL for NULL); with `resolve`, each entry as realpath gives it, and those
 * realpath cannot resolve left out (a directory that does not exist allows nothing). NULL when out of memory. */
static char **copy_list(const char *const *v, int resolve, int *oom) {
  size_t n = 0;
  *oom = 0;
  if (v == NULL) return NULL;
  while (v[n] != NULL) n++;
  char **out = calloc(n + 1, sizeof *out);
  if (out == NULL) goto fail;
  for (size_t i = 0, k = 0; i < n; i++) {
    char *c = resolve ? realpath(v[i], NULL) : strdup(v[i]);
    if (c == NULL && (!resolve || errno == ENOMEM)) goto fail;
    if (c != NULL) out[k++] = c;
  }
  return out;
fail:
  free_list(out);
  *oom = 1;
  return NULL;
}

/* The lists are copied into the state's record (C memory a script cannot reach: NOTE [state record]). */
static void set_list(lua_State *L, int which, const char *const *list) {
  cdv_state *st = cdv_get_state(L);
  int oom;
  char **v = copy_list(list, which, &oom), ***slot = which ? &st->include_dirs : &st->allowed_options;
  if (oom) luaL_error(L, "not enough memory");
  free_list(*slot);
  *slot = v;
}

CUDADEV_API void cudadev_set_allowed_compile_options(lua_State *L, const char *const *options) {
  set_list(L, 0, options);
}

CUDADEV_API void cudadev_set_include_dirs(lua_State *L, const char *const *dirs) { set_list(L, 1, dirs); }

CUDADEV_API void cudadev_set_options(lua_State *L, const cudadev_options *o) {
  static const cudadev_options defaults = {0, 0, NULL, 0, NULL, 0};
  if (o == NULL) o = &defaults;
  cudadev_set_memory_quota(L, o->memory_quota);
  cudadev_set_allowed_compile_options(L, o->allowed_compile_options);
  cudadev_set_interruptible(L, o->interruptible);
  cudadev_set_include_dirs(L, o->include_dirs);
  cudadev_set_max_arrays(L, o->max_arrays);
  cudadev_set_sandbox(L, o->sandbox);
}

/* (see NOTE [state limits]) an allocation really holds its size class (the block cache's, or the pinned pool's),
 * and the cpu device maps whole pages for it. */
size_t cdv_footprint(const cdv_device *d, int kind, size_t bytes) {
  if (bytes == 0) return 0;
  size_t c = kind == CDV_MEM_PINNED   ? cdv_pinned_class(bytes)
             : kind == CDV_MEM_DEVICE ? cdv_array_class(d, bytes)
                                      : bytes;
  if (c < bytes) return SIZE_MAX; /* no class holds it: the allocation fails anyway */
  if (d->be->host_memory || kind == CDV_MEM_PINNED) { /* NOTE [backend properties] */
    static size_t pg; /* a benign race: every thread writes the same value */
    if (pg == 0) pg = (size_t)sysconf(_SC_PAGESIZE);
    c = c > SIZE_MAX - (pg - 1) ? SIZE_MAX : (c + pg - 1) & ~(pg - 1);
  }
  return c;
}

/* (see NOTE [state limits]) a cap on the allocations a state holds at once (each is at least one mapping of the
 * process on the cpu device, whose count the kernel limits: vm.max_map_count, about 65k), then the quota */
cdv_state *cdv_quota_check(lua_State *L, cdv_state *st, cdv_device *d, size_t bytes) {
  size_t max_arrays = st->max_arrays ? st->max_arrays : CDV_DEFAULT_MAX_ARRAYS;
  if (st->live_arrays >= max_arrays) {
    lua_gc(L, LUA_GCCOLLECT); /* arrays nobody holds any more go */
    if (st->live_arrays >= max_arrays)
      luaL_error(L,
                 "too many live arrays in this state (the limit is %I; free some, or raise max_arrays in "
                 "cudadev_options)",
                 (lua_Integer)max_arrays);
  }
  if (st->quota == 0) return NULL;
  if (st->quota_used + bytes > st->quota || st->quota_used + bytes < bytes) {
    lua_gc(L, LUA_GCCOLLECT); /* arrays nobody holds any more give their bytes back */
    if (st->quota_used + bytes > st->quota || st->quota_used + bytes < bytes) {
      char q[32], r[32], u[32];
      luaL_error(L, "device memory quota of %s exceeded on %s (requested %s, in use %s)",
                 cdv_fmt_bytes(q, sizeof q, (double)st->quota), d->alias, cdv_fmt_bytes(r, sizeof r, (double)bytes),
                 cdv_fmt_bytes(u, sizeof u, (double)st->quota_used));
    }
  }
  return st;
}

static int option_allowed(char **list, const char *opt) {
  for (size_t i = 0; list[i] != NULL; i++) {
    size_t len = strlen(list[i]);
    if (strcmp(list[i], opt) == 0 || (len > 0 && list[i][len - 1] == '*' && strncmp(list[i], opt, len - 1) == 0))
      return 1;
  }
  return 0;
}

void cdv_check_compile_options(lua_State *L, int n, const char *const *opts) {
  char **list = cdv_get_state(L)->allowed_options;
  if (n == 0 || list == NULL) return;
  for (int i = 0; i < n; i++) {
    if (option_allowed(list, opts[i])) continue;
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (size_t j = 0; list[j] != NULL; j++) {
      if (j > 0) luaL_addstring(&b, ", ");
      luaL_addstring(&b, list[j]);
    }
    if (list[0] == NULL) luaL_addstring(&b, "none");
    luaL_pushresult(&b);
    luaL_error(L, "bad option 'options' to 'compile' (compile option '%s' is not allowed here; allowed: %s)", opts[i],
               lua_tostring(L, -1));
  }
}

/* ------------------------------------------------------------ interruptible waits */

static volatile sig_atomic_t interrupt_requested;

CUDADEV_API void cudadev_interrupt(void) {
  interrupt_requested = 1;
  cdv_cpu_interrupt(); /* and a cpu launch in progress: NOTE [interrupting a launch] in cpu_run.c */
}
CUDADEV_API void cudadev_clear_interrupt(void) { interrupt_requested = 0; }

typedef int (*query_fn)(cdv_device *d, void *h, int *done, cdv_err *e);

/* (see NOTE [interruptible waits]) 0 when the query says done, -1 with *e when it failed; raises on interrupt */
static int poll_until_done(lua_State *L, cdv_device *d, query_fn query, void *h, cdv_err *e) {
  long ns = 20 * 1000;
  for (;;) {
    int done = 0;
    if (query(d, h, &done, e) != 0) return -1;
    if (done) return 0;
    if (interrupt_requested) {
      interrupt_requested = 0;
      /* the interrupt is delivered here, as this error: a hook the host armed for the same Ctrl-C must not
       * fire inside luaL_error (a collection there runs finalizers, which are calls) and replace it */
      lua_sethook(L, NULL, 0, 0);
      luaL_error(L, "interrupted! (the work queued on %s keeps running)", d->alias);
    }
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL); /* a signal ends the sleep early */
    if (ns < 1000 * 1000) ns *= 2;
  }
}

int cdv_wait_stream(lua_State *L, cdv_device *d, void *stream, cdv_err *e) {
  if (cdv_get_state(L)->interruptible && d->be->stream_query != NULL &&
      poll_until_done(L, d, d->be->stream_query, stream, e) != 0)
    return -1;
  return d->be->stream_synchronize(d, stream, e);
}

int cdv_wait_event(lua_State *L, cdv_device *d, void *event, cdv_err *e) {
  if (cdv_get_state(L)->interruptible && d->be->event_query != NULL &&
      poll_until_done(L, d, d->be->event_query, event, e) != 0)
    return -1;
  return d->be->event_synchronize(d, event, e);
}

/* A device-wide wait has no query (the driver has no cuCtxQuery, and we do not know every stream of the
 * context), so a helper thread makes the blocking call while we poll its flag. When the wait is
 * interrupted, the helper is abandoned: it finishes the call on its own and frees the record. */
typedef struct device_wait {
  pthread_mutex_t lock;
  cdv_device *d;
  int done, abandoned, rc;
  cdv_err e;
} device_wait;

static void *device_wait_thread(void *arg) {
  device_wait *w = arg;
  cdv_err e;
  memset(&e, 0, sizeof e);
  int rc = w->d->be->synchronize(w->d, &e);
  pthread_mutex_lock(&w->lock);
  w->rc = rc;
  w->e = e;
  w->done = 1;
  int abandoned = w->abandoned;
  pthread_mutex_unlock(&w->lock);
  if (abandoned) {
    free(e.log);
    pthread_mutex_destroy(&w->lock);
    free(w);
  }
  return NULL;
}

static int device_wait_query(cdv_device *d, void *h, int *done, cdv_err *e) {
  device_wait *w = h;
  (void)d;
  pthread_mutex_lock(&w->lock);
  *done = w->done;
  pthread_mutex_unlock(&w->lock);
  if (*done && w->rc != 0) *e = w->e;
  return *done ? w->rc : 0;
}

/* poll_until_done's unwinding would lose the record: abandon it to the helper first (a to-be-closed value) */
static int device_wait_close(lua_State *L) {
  device_wait **pw = lua_touserdata(L, 1), *w;
  if (pw == NULL || lua_rawlen(L, 1) != sizeof *pw || (w = *pw) == NULL) return 0; /* the debug library */
  *pw = NULL;
  pthread_mutex_lock(&w->lock);
  int done = w->done;
  w->abandoned = !done;
  pthread_mutex_unlock(&w->lock);
  if (done) {
    pthread_mutex_destroy(&w->lock);
    free(w);
  }
  return 0;
}

int cdv_wait_device(lua_State *L, cdv_device *d, cdv_err *e) {
  if (!cdv_get_state(L)->interruptible) return d->be->synchronize(d, e);
  if (!d->be->has_contexts) { /* the cpu device's streams answer queries; its device wait is theirs */
    void *current = cdv_current_stream(L, d)->handle;
    if (d->be->stream_query != NULL && (poll_until_done(L, d, d->be->stream_query, current, e) != 0 ||
                                        (current != NULL && poll_until_done(L, d, d->be->stream_query, NULL, e) != 0)))
      return -1;
    return d->be->synchronize(d, e);
  }
  device_wait *w = calloc(1, sizeof *w);
  pthread_t t;
  pthread_attr_t attr;
  if (w == NULL) return d->be->synchronize(d, e);
  pthread_mutex_init(&w->lock, NULL);
  w->d = d;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int started = pthread_create(&t, &attr, device_wait_thread, w) == 0;
  pthread_attr_destroy(&attr);
  if (!started) {
    pthread_mutex_destroy(&w->lock);
    free(w);
    return d->be->synchronize(d, e);
  }
  device_wait **pw = lua_newuserdatauv(L, sizeof *pw, 0);
  *pw = w;
  lua_newtable(L); /* a small metatable of its own: __close abandons or frees the record */
  lua_pushcfunction(L, device_wait_close);
  lua_setfield(L, -2, "__close");
  lua_setmetatable(L, -2);
  lua_toclose(L, -1);
  int rc = poll_until_done(L, d, device_wait_query, w, e);
  lua_closeslot(L, -1);
  lua_pop(L, 1);
  return rc;
}

/* ------------------------------------------------------------ host objects */

/* Runs a checking function protected on one string, so that its "bad argument" becomes an error that
 * names the C entry point (the caller is C, not a Lua function with a name). Returns f's one result. */
static void check_protected(lua_State *L, const char *api, lua_CFunction f, const char *s) {
  lua_pushcfunction(L, f);
  lua_pushstring(L, s);
  if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
    const char *msg = lua_tostring(L, -1), *p;
    if (msg != NULL && strncmp(msg, "bad argument #1", 15) == 0 && (p = strchr(msg, '(')) != NULL) {
      size_t n = strlen(p + 1);
      lua_pushfstring(L, "%s: %s", api, lua_pushlstring(L, p + 1, n > 0 ? n - 1 : 0));
    } else {
      lua_pushfstring(L, "%s: %s", api, msg ? msg : "error");
    }
    lua_error(L);
  }
}

static int device_of(lua_State *L) {
  lua_pushlightuserdata(L, cdv_check_device(L, 1));
  return 1;
}

static int dtype_of(lua_State *L) {
  lua_pushinteger(L, cdv_check_dtype(L, 1, CDV_F32));
  return 1;
}

/* the device named `name` (NULL: the state's default device) */
static cdv_device *named_device(lua_State *L, const char *api, const char *name) {
  if (name == NULL) return cdv_default_device(L);
  check_protected(L, api, device_of, name);
  cdv_device *d = lua_touserdata(L, -1);
  lua_pop(L, 1);
  return d;
}

CUDADEV_API void cudadev_adopt_context(lua_State *L, const char *alias, void *cuda_context) {
  if (alias == NULL) luaL_error(L, "cudadev_adopt_context: alias is NULL");
  cdv_map_context(L, alias, 0, cuda_context);
}

CUDADEV_API void cudadev_push_array(lua_State *L, void *ptr, const char *dtype, int ndim, const int64_t *shape,
                                    const char *device, void (*release)(void *ud, void *ptr), void *release_ud) {
  static const char api[] = "cudadev_push_array";
  if (ndim < 0 || ndim > CDV_MAXDIM) luaL_error(L, "%s: ndim must be 0 to %d, got %d", api, CDV_MAXDIM, ndim);
  if (dtype == NULL) luaL_error(L, "%s: dtype is NULL (give one: \"float32\", \"int32\", ...)", api);
  check_protected(L, api, dtype_of, dtype);
  cdv_dtype t = (cdv_dtype)lua_tointeger(L, -1);
  lua_pop(L, 1);
  int64_t size = 1;
  for (int i = 0; i < ndim; i++) {
    if (shape == NULL) luaL_error(L, "%s: shape is NULL with ndim %d", api, ndim);
    if (shape[i] < 0) luaL_error(L, "%s: dimension %d must be a non-negative integer", api, i + 1);
    if (shape[i] != 0 && size > ((int64_t)1 << 56) / cdv_dtypes[t].size / shape[i])
      luaL_error(L, "%s: array is too large", api);
    size *= shape[i];
  }
  if (ptr == NULL && size > 0) luaL_error(L, "%s: ptr is NULL", api);
  cdv_device *d = named_device(L, api, device);
  cdv_push_host_array(L, d, t, ndim, shape, ptr, release, release_ud);
}

CUDADEV_API void cudadev_push_stream(lua_State *L, void *stream, const char *device) {
  static const char api[] = "cudadev_push_stream";
  cdv_device *d = named_device(L, api, device);
  cdv_err e;
  /* a handle that is not a stream of d would be used by every copy and launch on it: checked once, here */
  if (stream != NULL && d->be->stream_of == NULL) /* NOTE [optional operations] */
    luaL_error(L, "%s: the %s device has no streams a host can make (pass NULL for its default stream)", api,
               d->be->kind);
  if (stream != NULL) {
    cdv_device_use(L, d);
    if (d->be->stream_of(d, stream, &e) != 0)
      luaL_error(L, "%s: %s is not a stream of %s (%s: %s)", api,
                 cdv_get_state(L)->sandbox ? "the handle" : lua_pushfstring(L, "%p", stream), d->alias, e.name,
                 e.message); /* no address in a sandbox's error texts */
  }
  /* a Stream that is not owned: __gc and :destroy() leave the host's stream alone */
  cdv_new_stream(L, d)->handle = stream;
}

static void fill_info(cdv_array *a, cudadev_array_info *info) {
  cdv_device *d = a->block->dev;
  memset(info, 0, sizeof *info);
  info->ptr = a->data;
  info->dtype = cdv_dtypes[a->dtype].name;
  info->itemsize = cdv_dtypes[a->dtype].size;
  info->ndim = a->ndim;
  for (int i = 0; i < a->ndim && i < CUDADEV_MAXDIM; i++) info->shape[i] = a->shape[i];
  info->size = a->size;
  info->nbytes = (size_t)a->size * info->itemsize;
  info->device = d->alias;
  info->device_ordinal = d->ordinal;
  info->cuda_context = d->ctx; /* NULL on the cpu device */
}

/* The info describes C-ordered memory: a strided view (NOTE [strided views]) is refused. */
CUDADEV_API void cudadev_check_array(lua_State *L, int idx, cudadev_array_info *info) {
  if (info == NULL) luaL_error(L, "cudadev_check_array: info is NULL");
  cdv_array *a = cdv_check_array(L, idx);
  if (!cdv_array_contiguous(a))
    luaL_error(L, "cudadev_check_array: the array is not contiguous: copy it with a:contiguous() first");
  fill_info(a, info);
}

CUDADEV_API int cudadev_to_array(lua_State *L, int idx, cudadev_array_info *info) {
  cdv_array *a = cdv_test_magic(L, idx, sizeof *a, CDV_ARRAY_MAGIC);
  if (info == NULL || a == NULL || a->block == NULL || a->block->generation != a->block->dev->generation) return 0;
  if (!cdv_array_contiguous(a)) return 0;
  fill_info(a, info);
  return 1;
}

CUDADEV_API int cudadev_error(lua_State *L, const char *fmt, ...) {
  cdv_err e;
  va_list ap;
  va_start(ap, fmt);
  const char *msg = fmt != NULL ? lua_pushvfstring(L, fmt, ap) : lua_pushliteral(L, "cudadev_error: fmt is NULL");
  va_end(ap);
  cdv_fail(&e, "host", 0, "", "%s", msg);
  lua_pop(L, 1);
  return cdv_raise(L, NULL, &e);
}
