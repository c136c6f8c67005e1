/*
 * memory.c: memory statistics per device (PyTorch's caching-allocator counters) and giving cached
 * memory back.
 *
 * The counters are kept by array.c through cdv_mem_account, process-wide per device (memory is a
 * device resource, not a lua_State's). `reserved` is what the device's stream-ordered pool holds
 * (NOTE [caching pool] in backend_cuda.c): allocated memory plus freed memory kept for reuse.
 */
#include <pthread.h>
#include <string.h>

#include "cdv.h"
#include "syms.h"

typedef struct memstat { int64_t allocated, max_allocated, active_blocks; } memstat;

static memstat stats[CDV_MAXDEV];
static pthread_mutex_t stats_lock = PTHREAD_MUTEX_INITIALIZER;

void cdv_mem_account(cdv_device *d, int64_t bytes, int blocks) {
  pthread_mutex_lock(&stats_lock);
  memstat *s = &stats[d->index];
  s->allocated += bytes;
  s->active_blocks += blocks;
  if (s->allocated > s->max_allocated) s->max_allocated = s->allocated;
  pthread_mutex_unlock(&stats_lock);
}

static memstat get(cdv_device *d) {
  pthread_mutex_lock(&stats_lock);
  memstat s = stats[d->index];
  pthread_mutex_unlock(&stats_lock);
  return s;
}

/* cuMemPoolGetAttribute(RESERVED_MEM_CURRENT) of the device's default pool; without a pool, what is
 * allocated is all that is reserved. */
static int64_t reserved(lua_State *L, cdv_device *d) {
  cuuint64_t v = 0;
  CUmemoryPool pool;
  cdv_err e;
  if (d->is_cpu || !d->is_mempool_supported) return get(d).allocated;
  if (CDV_CU(&e, cuDeviceGetDefaultMemPool, &pool, (CUdevice)d->handle) ||
      CDV_CU(&e, cuMemPoolGetAttribute, pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v))
    cdv_raise(L, d, &e);
  return (int64_t)v;
}

static int l_memory_stats(lua_State *L) {
  cdv_device *d = cdv_opt_device(L, 1);
  memstat s = get(d);
  int64_t r = reserved(L, d);
  lua_createtable(L, 0, 6);
  lua_pushinteger(L, s.allocated);
  lua_setfield(L, -2, "allocated");
  lua_pushinteger(L, s.max_allocated);
  lua_setfield(L, -2, "max_allocated");
  lua_pushinteger(L, r);
  lua_setfield(L, -2, "reserved");
  lua_pushinteger(L, s.active_blocks);
  lua_setfield(L, -2, "active_blocks");
  lua_pushinteger(L, r > s.allocated ? r - s.allocated : 0);
  lua_setfield(L, -2, "held_bytes");
  /* the driver's pool does not count the blocks it keeps: held memory is reported in bytes only */
  return 1;
}

static int l_memory_allocated(lua_State *L) {
  lua_pushinteger(L, get(cdv_opt_device(L, 1)).allocated);
  return 1;
}

static int l_max_memory_allocated(lua_State *L) {
  lua_pushinteger(L, get(cdv_opt_device(L, 1)).max_allocated);
  return 1;
}

static int l_memory_reserved(lua_State *L) {
  lua_pushinteger(L, reserved(L, cdv_opt_device(L, 1)));
  return 1;
}

static int l_reset_peak(lua_State *L) {
  cdv_device *d = cdv_opt_device(L, 1);
  pthread_mutex_lock(&stats_lock);
  stats[d->index].max_allocated = stats[d->index].allocated;
  pthread_mutex_unlock(&stats_lock);
  return 0;
}

/* cd.empty_cache([device]): collect garbage (dropped arrays free their blocks), wait for the device so
 * the stream-ordered frees have happened, then cuMemPoolTrimTo(pool, 0) gives the cache back. */
static int l_empty_cache(lua_State *L) {
  cdv_device *d = cdv_opt_device(L, 1);
  cdv_err e;
  lua_gc(L, LUA_GCCOLLECT);
  if (d->is_cpu || !d->is_mempool_supported || d->ctx == NULL) return 0;
  cdv_device_use(L, d);
  CUmemoryPool pool;
  if (d->be->synchronize(d, &e) || CDV_CU(&e, cuDeviceGetDefaultMemPool, &pool, (CUdevice)d->handle) ||
      CDV_CU(&e, cuMemPoolTrimTo, pool, 0))
    return cdv_raise(L, d, &e);
  return 0;
}

static const luaL_Reg functions[] = {
  {"memory_stats", l_memory_stats},
  {"memory_allocated", l_memory_allocated},
  {"max_memory_allocated", l_max_memory_allocated},
  {"memory_reserved", l_memory_reserved},
  {"reset_peak_memory_stats", l_reset_peak},
  {"empty_cache", l_empty_cache},
  {NULL, NULL}
};

int cdv_memory_open(lua_State *L) {
  luaL_setfuncs(L, functions, 0);
  return 0;
}
