/*
 * cudadev.c: luaopen_cudadev, the per-state record, and the pure-Lua conveniences built into the
 * library (the files of lua/cudadev, embedded at build time so an embedding host needs one artefact).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cdv.h"
#include "cudadev.h"

struct cdv_embedded {
  const char *name;
  const char *data;
  size_t len;
};
extern const struct cdv_embedded cdv_embedded_files[];

/* NOTE [state record]: each lua_State has one record (cdv_state) of cudadev's per-state settings and caches:
 * the sandbox and its limits, the default device, the current streams, the blocks kept for reuse. It is C
 * memory, not a Lua value, so that a script cannot delete or replace it, even with the debug library (a record
 * in the registry could be removed, and cudadev would then have made a fresh, unsandboxed one). The state finds
 * it through an anchor: a small userdata in the registry that points at the record and that the record points
 * back at; cdv_get_state checks both directions, and the registry table's address (which no script can change),
 * before it trusts the anchor. The record also sits in a process-wide table (`records`, under a lock) keyed by
 * that address, which is what makes it fail closed: when the anchor is gone or not the record's, a new record
 * for the same state inherits the options of every record still listed for that address (a sandboxed state stays
 * sandboxed, with its limits), and those records leave the table.
 * The record is freed when nothing needs it: the anchor holds one reference, each block the state allocated one
 * (blocks remember the state whose quota and cache they count against), and each Kernel one (its launch path
 * reads the state's record). The anchor's finalizer releases its reference only at lua_close: on the main
 * thread with no function running below it, while the registry still holds it. lua_close unwinds every call
 * first, while a script's code always has a frame of its own; at any other time (a script removed the anchor from
 * the registry and the collector found it) the anchor is put back and its finalizer armed again. */
static const char ANCHOR_KEY = 0;
#define STATE_ANCHOR_MAGIC 0x63647653746174ULL /* "cdvStat" (NOTE [magic]) */
typedef struct state_anchor {
  uint64_t magic;
  cdv_state *st; /* NULL once released */
  int closed; /* released by lua_close: the state makes no record again (NOTE [objects made in finalizers]) */
} state_anchor;

static pthread_mutex_t records_lock = PTHREAD_MUTEX_INITIALIZER;
static cdv_state **records;
static int nrecords, caprecords;

long cdv_live[CDV_LIVE_N]; /* NOTE [live objects] */

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

/* cd._cpu_worker_forks() -> the cpu launch workers this process forked (NOTE [maps for the worker], for the
 * specs) */
unsigned long cdv_cpu_worker_forks(void);
static int l_cpu_worker_forks(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)cdv_cpu_worker_forks());
  return 1;
}

/* cd.now() -> seconds of CLOCK_MONOTONIC, a double: wall time for scripts (os.clock is CPU time). cd.time
 * (extra.lua) and the REPL's :time read it. */
static int l_now(lua_State *L) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  lua_pushnumber(L, (lua_Number)ts.tv_sec + (lua_Number)ts.tv_nsec * 1e-9);
  return 1;
}

/* cd._doc_files() -> {["doc/NAME.md"] = text}: the manual built into the library (cmake/embed.cmake), which
 * the REPL's help() and :doc read, so that they work wherever the library goes. */
static int l_doc_files(lua_State *L) {
  lua_newtable(L);
  for (const struct cdv_embedded *f = cdv_embedded_files; f->name != NULL; f++) {
    if (strncmp(f->name, "doc/", 4) != 0) continue;
    lua_pushlstring(L, f->data, f->len);
    lua_setfield(L, -2, f->name);
  }
  return 1;
}

/* NOTE [test hooks] (cdv.h): process-wide, read under a lock by every copy that could be staged. */
static cdv_hooks hooks;
static pthread_mutex_t hooks_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t hooks_once = PTHREAD_ONCE_INIT;

static size_t env_count(const char *name) {
  const char *v = getenv(name);
  char *end;
  unsigned long long n = v != NULL ? strtoull(v, &end, 10) : 0;
  return v != NULL && *v != '\0' && *end == '\0' && n < ((size_t)1 << 40) ? (size_t)n : 0;
}

static void hooks_from_env(void) {
  hooks.staging_chunk = env_count("CUDADEV_STAGING_CHUNK");
  size_t t = env_count("CUDADEV_STAGING_THREADS");
  hooks.staging_threads = t < 256 ? (int)t : 256;
  const char *fake = getenv("CUDADEV_FAKE_PINNED");
  hooks.fake_pinned = fake != NULL && strcmp(fake, "1") == 0;
}

cdv_hooks cdv_get_hooks(void) {
  pthread_once(&hooks_once, hooks_from_env);
  pthread_mutex_lock(&hooks_lock);
  cdv_hooks h = hooks;
  pthread_mutex_unlock(&hooks_lock);
  return h;
}

static void push_hooks(lua_State *L, const cdv_hooks *h) {
  lua_createtable(L, 0, 3);
  lua_pushinteger(L, (lua_Integer)h->staging_chunk);
  lua_setfield(L, -2, "staging_chunk");
  lua_pushinteger(L, h->staging_threads);
  lua_setfield(L, -2, "staging_threads");
  lua_pushboolean(L, h->fake_pinned);
  lua_setfield(L, -2, "fake_pinned");
}

/* An integer field of the hooks table, 0 to max. */
static lua_Integer hook_count(lua_State *L, const char *k, lua_Integer def, lua_Integer max) {
  if (cdv_opt_field(L, 1, k) == LUA_TNIL) {
    lua_pop(L, 1);
    return def;
  }
  int isint;
  lua_Integer v = lua_tointegerx(L, -1, &isint);
  if (!isint || v < 0 || v > max)
    luaL_argerror(L, 1, lua_pushfstring(L, "'%s' must be an integer from 0 to %I", k, max));
  lua_pop(L, 1);
  return v;
}

/* cd._hooks([{staging_chunk=, staging_threads=, fake_pinned=}]) -> the settings before the call */
static int l_hooks(lua_State *L) {
  static const char *const known[] = {"staging_chunk", "staging_threads", "fake_pinned", NULL};
  cdv_hooks old = cdv_get_hooks(), h = old;
  if (!lua_isnoneornil(L, 1)) {
    if (cdv_get_state(L)->sandbox) return luaL_error(L, "test hooks are not available in this sandbox");
    cdv_check_options(L, 1, known, "_hooks");
    h.staging_chunk = (size_t)hook_count(L, "staging_chunk", (lua_Integer)h.staging_chunk, (lua_Integer)1 << 40);
    h.staging_threads = (int)hook_count(L, "staging_threads", h.staging_threads, 256);
    h.fake_pinned = cdv_check_boolean_field(L, 1, "fake_pinned", h.fake_pinned, "_hooks");
    pthread_mutex_lock(&hooks_lock);
    hooks = h;
    pthread_mutex_unlock(&hooks_lock);
  }
  push_hooks(L, &old);
  return 1;
}

/* NOTE [objects made in finalizers]: lua_close runs the finalizers of every object, and an object made by one
 * of them (a RAII wrapper's __gc that allocates a scratch Array) is never finalized: Lua stops marking objects
 * for finalization once it closes. Its resource would leak. An object made while a finalizer runs (lua_gc
 * answers -1 then) or while the collector is stopped is therefore remembered, weakly, in a registry table, and
 * when the state's own finalizer runs (the last of lua_close: it was set first) each one still remembered is
 * finalized by hand (every __gc of the module may run twice: a released object is closed). After that, the
 * state refuses to make any. */
static const char LATE_KEY = 'l';

void cdv_track_late(lua_State *L, int idx) {
  if (lua_gc(L, LUA_GCISRUNNING) == 1) return; /* the common case: no finalizer running */
  idx = lua_absindex(L, idx);
  cdv_state *st = cdv_peek_state(L);
  if (st == NULL || st->closing)
    luaL_error(L, "the Lua state is closing: %s values cannot be made now", cdv_typename(L, idx));
  cdv_weak_registry_table(L, &LATE_KEY);
  lua_pushvalue(L, idx);
  lua_pushboolean(L, 1);
  lua_rawset(L, -3);
  lua_pop(L, 1);
}

/* A userdata of the registry under key, kept until the state closes, when its finalizer gc releases what it holds
 * (cuBLAS's handles, cuFFT's plans): the one there, or a new zeroed one whose first field, a uint64_t, is magic
 * (NOTE [magic]), named name for messages. */
void *cdv_registry_udata(lua_State *L, const char *key, size_t size, uint64_t magic, lua_CFunction gc,
                         const char *name) {
  void *p = NULL;
  if (lua_getfield(L, LUA_REGISTRYINDEX, key) == LUA_TUSERDATA) p = cdv_test_magic(L, -1, size, magic);
  lua_pop(L, 1);
  if (p != NULL) return p;
  p = lua_newuserdatauv(L, size, 0);
  memset(p, 0, size);
  memcpy(p, &magic, sizeof magic);
  lua_createtable(L, 0, 2);
  lua_pushcfunction(L, gc);
  lua_setfield(L, -2, "__gc");
  lua_pushstring(L, name);
  lua_setfield(L, -2, "__name");
  lua_setmetatable(L, -2);
  cdv_track_late(L, -1); /* NOTE [objects made in finalizers] */
  lua_setfield(L, LUA_REGISTRYINDEX, key);
  return p;
}

static int call_gc(lua_State *L) {
  if (luaL_getmetafield(L, 1, "__gc") != LUA_TNIL) {
    lua_insert(L, 1);
    lua_call(L, 1, 0);
  }
  return 0;
}

/* The state closes: the objects made in finalizers are finalized by hand (NOTE [objects made in finalizers]). */
static void finalize_late(lua_State *L) {
  int top = lua_gettop(L);
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &LATE_KEY) == LUA_TTABLE) {
    int t = lua_gettop(L);
    lua_pushnil(L);
    while (lua_next(L, t) != 0) {
      lua_pop(L, 1);
      lua_pushcfunction(L, call_gc);
      lua_pushvalue(L, -2);
      if (lua_pcall(L, 1, 0, 0) != LUA_OK) lua_pop(L, 1); /* __gc never raises; nothing to report to */
    }
  }
  lua_settop(L, top);
}

/* takes st out of the table (records_lock held) */
static void unlist(cdv_state *st) {
  for (int i = 0; i < nrecords; i++)
    if (records[i] == st) {
      records[i] = records[--nrecords];
      break;
    }
}

void cdv_state_ref(cdv_state *st) { __atomic_add_fetch(&st->refs, 1, __ATOMIC_RELAXED); }

void cdv_state_unref(cdv_state *st) {
  if (__atomic_sub_fetch(&st->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
  pthread_mutex_lock(&records_lock);
  unlist(st);
  pthread_mutex_unlock(&records_lock);
  cdv_free_state_options(st);
  free(st);
}

/* (see NOTE [state record]) the close of the state gives the kept blocks back (errors are moot: the state is
 * going). The anchor was made before any object of the module, so its finalizer runs after theirs; a block
 * freed later still goes back, and what still holds the record keeps it. */
static void release_record(state_anchor *a) {
  cdv_state *st = a->st;
  cdv_err e;
  a->st = NULL;
  st->anchor = NULL;
  cdv_block_release(st, NULL, NULL, 1, &e);
  st->closing = 1;
  pthread_mutex_lock(&records_lock);
  st->released = 1;
  pthread_mutex_unlock(&records_lock);
  cdv_state_unref(st);
}

static int anchor_gc(lua_State *L) {
  state_anchor *a = cdv_test_magic(L, 1, sizeof *a, STATE_ANCHOR_MAGIC);
  if (a == NULL || a->st == NULL || a->st->anchor != a) return 0; /* __gc never raises */
  if (a->st->released || a->st->reg != lua_topointer(L, LUA_REGISTRYINDEX)) { /* a record made since replaced it */
    cdv_state *st = a->st;
    a->st = NULL;
    st->anchor = NULL;
    cdv_state_unref(st);
    return 0;
  }
  lua_Debug ar;
  int main = lua_pushthread(L);
  lua_pop(L, 1);
  int held = lua_rawgetp(L, LUA_REGISTRYINDEX, &ANCHOR_KEY) == LUA_TUSERDATA && lua_touserdata(L, -1) == a;
  lua_pop(L, 1);
  if (main && held && !lua_getstack(L, 1, &ar)) { /* lua_close */
    a->st->closing = 1; /* what the late objects' finalizers make is refused */
    finalize_late(L);
    a->closed = 1;
    release_record(a);
    return 0;
  }
  if (!held) { /* removed from the registry by a script: back it goes, its finalizer armed again */
    lua_pushvalue(L, 1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &ANCHOR_KEY);
    if (lua_getmetatable(L, 1)) lua_setmetatable(L, 1);
  }
  return 0;
}

/* the record that the registry's anchor names, when the anchor is genuine and the record this state's */
static cdv_state *anchored(lua_State *L) {
  cdv_state *st = NULL;
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &ANCHOR_KEY) == LUA_TUSERDATA) {
    state_anchor *a = cdv_test_magic(L, -1, sizeof *a, STATE_ANCHOR_MAGIC);
    if (a != NULL && a->st != NULL && a->st->anchor == a && a->st->reg == lua_topointer(L, LUA_REGISTRYINDEX))
      st = a->st;
  }
  lua_pop(L, 1);
  return st;
}

cdv_state *cdv_peek_state(lua_State *L) { return anchored(L); }

/* (see NOTE [state record]) a new record for this state, failing closed over the ones still listed for it */
static cdv_state *new_record(lua_State *L) {
  const void *reg = lua_topointer(L, LUA_REGISTRYINDEX);
  /* a finalizer that runs after the state's own, at lua_close: nothing it made would ever be finalized */
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &ANCHOR_KEY) == LUA_TUSERDATA) {
    state_anchor *old = cdv_test_magic(L, -1, sizeof *old, STATE_ANCHOR_MAGIC);
    if (old != NULL && old->closed) luaL_error(L, "the Lua state is closing: cudadev values cannot be made now");
  }
  lua_pop(L, 1);
  state_anchor *a = lua_newuserdatauv(L, sizeof *a, 0); /* closed until the record exists */
  a->magic = STATE_ANCHOR_MAGIC;
  a->st = NULL;
  lua_createtable(L, 0, 2); /* its own, not one in the registry that a script could replace */
  lua_pushcfunction(L, anchor_gc);
  lua_setfield(L, -2, "__gc");
  lua_pushliteral(L, "cudadev.StateAnchor");
  lua_setfield(L, -2, "__metatable"); /* NOTE [protected metatables] */
  lua_setmetatable(L, -2);
  cdv_state *st = calloc(1, sizeof *st);
  if (st == NULL) luaL_error(L, "not enough memory");
  st->default_device = -1;
  const char *lb = getenv("CUDA_LAUNCH_BLOCKING");
  st->launch_blocking = lb != NULL && strcmp(lb, "1") == 0;
  st->reg = reg;
  st->refs = 1;
  st->anchor = a;
  a->st = st;
  pthread_mutex_lock(&records_lock);
  int grow = nrecords == caprecords;
  cdv_state **more = grow ? realloc(records, sizeof *records * (size_t)(caprecords ? 2 * caprecords : 16)) : records;
  if (more == NULL) {
    pthread_mutex_unlock(&records_lock);
    a->st = NULL;
    free(st);
    luaL_error(L, "not enough memory");
  }
  if (grow) caprecords = caprecords ? 2 * caprecords : 16;
  records = more;
  for (int i = 0; i < nrecords;) { /* the state's earlier records: their anchor is gone, or not theirs */
    cdv_state *old = records[i];
    if (old->reg != reg) {
      i++;
      continue;
    }
    if (old->sandbox) st->sandbox = 1; /* the strictest of each limit */
    if (old->quota != 0 && (st->quota == 0 || old->quota < st->quota)) st->quota = old->quota;
    if (old->max_arrays != 0 && (st->max_arrays == 0 || old->max_arrays < st->max_arrays))
      st->max_arrays = old->max_arrays;
    st->quota_used += old->quota_used; /* its blocks give back to it: counted twice, never less */
    st->live_arrays += old->live_arrays;
    if (st->allowed_options == NULL) {
      st->allowed_options = old->allowed_options;
      old->allowed_options = NULL;
    }
    if (st->include_dirs == NULL) {
      st->include_dirs = old->include_dirs;
      old->include_dirs = NULL;
    }
    old->reg = NULL;
    old->released = 1;
    records[i] = records[--nrecords];
  }
  records[nrecords++] = st;
  pthread_mutex_unlock(&records_lock);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &ANCHOR_KEY);
  const void **keys[] = {&st->key_grid,   &st->key_block,  &st->key_dim,         &st->key_shared,
                         &st->key_stream, &st->key_device, &st->key_cooperative, &st->key_timeout};
  static const char *const names[] = {"grid", "block", "dim", "shared", "stream", "device", "cooperative", "timeout"};
  lua_createtable(L, 8, 0); /* (see NOTE [launch keys]) anchors the interned names */
  for (int i = 0; i < 8; i++) {
    lua_pushstring(L, names[i]);
    *keys[i] = lua_topointer(L, -1);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, LUA_REGISTRYINDEX, "cudadev.launch_keys");
  return st;
}

cdv_state *cdv_get_state(lua_State *L) {
  cdv_state *st = anchored(L);
  return st != NULL ? st : new_record(L);
}

/* The parts of the module written in Lua, run at open in this order (the embedded files come sorted by name):
 * each gets the module table, the Array metatable (whose methods table it may extend) and a table the parts
 * share their internals through (ops.lua's kernel generation, which random.lua uses). */
static int run_at_open(const char *name) {
  static const char *const parts[] = {"cudadev.extra",  "cudadev.fft",     "cudadev.files", "cudadev.fuse",
                                      "cudadev.linalg", "cudadev.mpi",     "cudadev.ops",   "cudadev.ops_numpy",
                                      "cudadev.random", "cudadev.sorting", "cudadev.views", NULL};
  for (int i = 0; parts[i] != NULL; i++)
    if (strcmp(name, parts[i]) == 0) return 1;
  return 0;
}

/* Each other embedded lua/cudadev/NAME.lua becomes package.preload["cudadev.NAME"]. */
static void load_embedded(lua_State *L) {
  int mod = lua_gettop(L);
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  lua_newtable(L); /* the parts' shared internals */
  for (const struct cdv_embedded *f = cdv_embedded_files; f->name != NULL; f++) {
    if (strncmp(f->name, "cudadev.", 8) != 0) continue; /* text resources such as the cpu prelude */
    if (luaL_loadbuffer(L, f->data, f->len, lua_pushfstring(L, "=[cudadev] %s", f->name)) != LUA_OK) lua_error(L);
    lua_remove(L, -2);
    if (run_at_open(f->name)) {
      lua_pushvalue(L, mod);
      luaL_getmetatable(L, CDV_ARRAY);
      lua_pushvalue(L, mod + 2);
      lua_call(L, 3, 0);
    } else
      lua_setfield(L, mod + 1, f->name);
  }
  /* NOTE [error positions] (extra.lua): the public functions written in Lua, wrapped once all are there */
  if (lua_getfield(L, mod + 2, "wrap_public") == LUA_TFUNCTION) {
    luaL_getmetatable(L, CDV_ARRAY);
    lua_call(L, 1, 0);
  }
  lua_settop(L, mod);
}

/* The REPL's module, when it is required before the module itself (cudadev.h): package.preload has
 * "cudadev.repl" only once luaopen_cudadev ran, so require found cudadev.so's luaopen_cudadev_repl instead. */
CUDADEV_API int luaopen_cudadev_repl(lua_State *L) {
  lua_getglobal(L, "require");
  lua_pushliteral(L, "cudadev");
  lua_call(L, 1, 0);
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  if (lua_getfield(L, -1, "cudadev.repl") != LUA_TFUNCTION) return luaL_error(L, "cudadev.repl is not built in");
  lua_pushliteral(L, "cudadev.repl");
  lua_call(L, 1, 1);
  return 1;
}

CUDADEV_API int luaopen_cudadev(lua_State *L) {
  luaL_checkversion(L);
  cdv_get_state(L); /* (see NOTE [state record]) the anchor is made before any object of the module */
  lua_newtable(L);
  cdv_error_open(L);
  cdv_device_open(L);
  cdv_stream_open(L);
  cdv_event_open(L);
  cdv_array_open(L);
  cdv_array_loops_open(L); /* NOTE [cpu loops] */
  cdv_module_open(L);
  cdv_blas_open(L); /* after module.c's cd._selftest, which it extends */
  cdv_linalg_cpu_open(L);
  cdv_linalg_cuda_open(L);
  cdv_fft_open(L); /* the same */
  cdv_peer_open(L);
  cdv_memory_open(L);
  cdv_graph_open(L);
  cdv_launch_config_open(L);
  cdv_profile_open(L);
  cdv_mpi_open(L);
  cdv_nccl_open(L);
  cdv_async_open(L);
  cdv_ipc_open(L);
  cdv_dlpack_open(L);
  cdv_managed_open(L);
  lua_pushcfunction(L, l_live);
  lua_setfield(L, -2, "_live");
  lua_pushcfunction(L, l_hooks);
  lua_setfield(L, -2, "_hooks");
  lua_pushcfunction(L, l_cpu_worker_forks);
  lua_setfield(L, -2, "_cpu_worker_forks");
  lua_pushcfunction(L, l_now);
  lua_setfield(L, -2, "now");
  lua_pushcfunction(L, l_doc_files);
  lua_setfield(L, -2, "_doc_files");
  lua_pushcfunction(L, cdv_sandbox_run);
  lua_setfield(L, -2, "_sandbox");
  lua_pushliteral(L, CDV_VERSION);
  lua_setfield(L, -2, "version");
  load_embedded(L);
  if (cdv_get_state(L)->sandbox) cdv_protect_metatables(L); /* NOTE [protected metatables] */
  return 1;
}
