/*
 * peer.c: peer and memory-pool access between CUDA devices (Warp's semantics), custom contexts mapped to
 * aliases, and the multi-device helpers.
 *
 * These are CUDA-only by nature: the backend's peer operations (NOTE [optional operations]), which the cpu
 * device leaves out.
 *
 * NOTE [peer access]: access is directional: set_peer_access_enabled(target, peer, true) lets kernels
 * and copies running on `peer` read and write `target`'s memory (cuCtxEnablePeerAccess called in peer's
 * context on target's context). Memory from a stream-ordered pool (all device arrays where the device
 * supports pools, see NOTE [caching pool]) is governed separately, by the pool's access descriptors
 * (cuMemPoolSetAccess): that is the mempool-access family. The driver keeps no queryable record of
 * context peer access, so we keep one, per process.
 */
#include <pthread.h>
#include <string.h>

#include "cdv.h"

static unsigned char peer_on[CDV_MAXDEV][CDV_MAXDEV]; /* [target][peer] */
static pthread_mutex_t peer_lock = PTHREAD_MUTEX_INITIALIZER;

static cdv_device *check_cuda(lua_State *L, int arg) {
  cdv_device *d = cdv_check_device(L, arg);
  if (d->be->peer_supported == NULL)
    luaL_argerror(L, arg, lua_pushfstring(L, "peer access is between CUDA devices, not %s", d->be->kind));
  return d;
}

/* the backend's peer_supported (cuDeviceCanAccessPeer): can `peer` map `target`'s memory */
static int supported(lua_State *L, cdv_device *target, cdv_device *peer) {
  int can = 0;
  cdv_err e;
  if (target->handle == peer->handle) return 1;
  if (peer->be->peer_supported(target, peer, &can, &e)) cdv_raise(L, peer, &e);
  return can;
}

static int enabled(cdv_device *target, cdv_device *peer) {
  if (target->handle == peer->handle) return 1;
  pthread_mutex_lock(&peer_lock);
  int on = peer_on[target->index][peer->index];
  pthread_mutex_unlock(&peer_lock);
  return on;
}

static int unsupported(lua_State *L, cdv_device *target, cdv_device *peer, const char *what) {
  return luaL_error(L,
                    "%s access from %s to %s is not supported (the driver reports no peer path between "
                    "\"%s\" and \"%s\"; copies still work, staged through the host)",
                    what, peer->alias, target->alias, peer->name, target->name);
}

/* the backend's peer_set (cuCtxEnablePeerAccess / cuCtxDisablePeerAccess), in peer's context; twice is a no-op */
static void set_peer(lua_State *L, cdv_device *target, cdv_device *peer, int on) {
  cdv_err e;
  if (target->handle == peer->handle || enabled(target, peer) == on) return;
  if (on && !supported(L, target, peer)) unsupported(L, target, peer, "peer");
  if (!on && !supported(L, target, peer)) return;
  cdv_device_use(L, target); /* the target's context must exist to be named */
  cdv_device_use(L, peer);
  if (peer->be->peer_set(target, peer, on, &e)) cdv_raise(L, peer, &e);
  pthread_mutex_lock(&peer_lock);
  peer_on[target->index][peer->index] = (unsigned char)on;
  pthread_mutex_unlock(&peer_lock);
}

static int mempool_supported(lua_State *L, cdv_device *target, cdv_device *peer) {
  return target->is_mempool_supported && peer->is_mempool_supported && supported(L, target, peer);
}

/* the backend's mempool_access_get (cuMemPoolGetAccess on target's default pool for peer's location) */
static int mempool_enabled(lua_State *L, cdv_device *target, cdv_device *peer) {
  if (target->handle == peer->handle) return 1;
  if (!target->is_mempool_supported || !peer->is_mempool_supported) return 0;
  int on = 0;
  cdv_err e;
  if (target->be->mempool_access_get(target, peer, &on, &e)) cdv_raise(L, target, &e);
  return on;
}

/* the backend's mempool_access_set (cuMemPoolSetAccess): peer may (or may no longer) use memory of target's
 * default pool */
static void set_mempool(lua_State *L, cdv_device *target, cdv_device *peer, int on) {
  if (target->handle == peer->handle || mempool_enabled(L, target, peer) == on) return;
  if (!mempool_supported(L, target, peer)) {
    if (on) unsupported(L, target, peer, "memory pool");
    return;
  }
  cdv_err e;
  cdv_device_use(L, target);
  if (target->be->mempool_access_set(target, peer, on, &e)) cdv_raise(L, target, &e);
}

/* Kernels on `peer` may use memory of `target` (from_pool: memory from target's stream-ordered pool). */
int cdv_peer_reachable(lua_State *L, cdv_device *target, cdv_device *peer, int from_pool) {
  if (target->be->peer_supported == NULL || peer->be->peer_supported == NULL) return 0;
  return from_pool ? mempool_enabled(L, target, peer) : enabled(target, peer);
}

/* The four questions of NOTE [peer access], by number: the is_* functions and the matrix share them. */
enum { Q_SUPPORTED, Q_ENABLED, Q_MEMPOOL_SUPPORTED, Q_MEMPOOL_ENABLED, Q_N };

static int query(lua_State *L, int q, cdv_device *t, cdv_device *p) {
  switch (q) {
    case Q_SUPPORTED: return supported(L, t, p);
    case Q_ENABLED: return enabled(t, p);
    case Q_MEMPOOL_SUPPORTED: return mempool_supported(L, t, p);
    default: return mempool_enabled(L, t, p);
  }
}

/* cd.is_peer_access_supported & co: the question is the closure's upvalue. A question about the cpu device is
 * answered false, as Warp's are: these are queries, and only setting access raises for cpu. */
static int l_query(lua_State *L) {
  cdv_device *t = cdv_check_device(L, 1), *p = cdv_check_device(L, 2); /* in order: errors name #1 first */
  lua_pushboolean(
      L, t->be->peer_supported && p->be->peer_supported && query(L, (int)lua_tointeger(L, lua_upvalueindex(1)), t, p));
  return 1;
}

/* cd.set_peer_access_enabled / cd.set_mempool_access_enabled: upvalue 1 says which (1: pools) */
static int l_set(lua_State *L) {
  cdv_device *t = check_cuda(L, 1), *p = check_cuda(L, 2);
  luaL_checktype(L, 3, LUA_TBOOLEAN);
  if (lua_tointeger(L, lua_upvalueindex(1)))
    set_mempool(L, t, p, lua_toboolean(L, 3));
  else
    set_peer(L, t, p, lua_toboolean(L, 3));
  return 0;
}

/* The scope of with_peer_access / with_mempool_access: restores the previous state when closed, on
 * error too (a to-be-closed slot, so the error passes through untouched). */
typedef struct access_scope {
  uint64_t magic;
  cdv_device *target, *peer;
  int previous, pool, closed;
} access_scope;

static int access_scope_close(lua_State *L) {
  access_scope *s = cdv_check_udata(L, 1, "cudadev.AccessScope", CDV_SCOPE_MAGIC + 1, sizeof(access_scope));
  if (s->closed) return 0;
  s->closed = 1;
  if (s->pool)
    set_mempool(L, s->target, s->peer, s->previous);
  else
    set_peer(L, s->target, s->peer, s->previous);
  return 0;
}

static int with_access(lua_State *L, int pool) {
  cdv_device *t = check_cuda(L, 1), *p = check_cuda(L, 2);
  luaL_checktype(L, 3, LUA_TBOOLEAN);
  luaL_checktype(L, 4, LUA_TFUNCTION);
  int on = lua_toboolean(L, 3), nargs = lua_gettop(L) - 4;
  access_scope *s = lua_newuserdatauv(L, sizeof *s, 0);
  *s = (access_scope){CDV_SCOPE_MAGIC + 1, t, p, pool ? mempool_enabled(L, t, p) : enabled(t, p), pool, 1};
  luaL_setmetatable(L, "cudadev.AccessScope");
  lua_insert(L, 1);
  lua_toclose(L, 1);
  if (pool)
    set_mempool(L, t, p, on);
  else
    set_peer(L, t, p, on);
  s->closed = 0;
  for (int i = 0; i < 3; i++) lua_remove(L, 2); /* leave scope, fn, args... */
  return cdv_call_scoped(L, nargs); /* NOTE [scoped calls] */
}

static int l_with_peer(lua_State *L) { return with_access(L, 0); }
static int l_with_mempool(lua_State *L) { return with_access(L, 1); }

/* cd.peer_access_matrix() -> {supported = {[t] = {[p] = bool}}, enabled = ..., mempool_supported = ...,
 * mempool_enabled = ...} keyed by alias: row = target (whose memory), column = peer (who accesses) */
static int l_peer_matrix(lua_State *L) {
  static const char *const names[] = {"supported", "enabled", "mempool_supported", "mempool_enabled"};
  int n = cdv_device_count_all();
  lua_createtable(L, 0, 4);
  for (int k = 0; k < Q_N; k++) {
    lua_newtable(L);
    for (int i = 1; i < n; i++) {
      cdv_device *t = cdv_device_at(i);
      if (t->unmapped) continue;
      lua_newtable(L);
      for (int j = 1; j < n; j++) {
        cdv_device *p = cdv_device_at(j);
        if (p->unmapped) continue;
        lua_pushboolean(L, query(L, k, t, p));
        lua_setfield(L, -2, p->alias);
      }
      lua_setfield(L, -2, t->alias);
    }
    lua_setfield(L, -2, names[k]);
  }
  return 1;
}

/* ------------------------------------------------------------ custom contexts */

/* A bad alias: a bad argument #arg from Lua, a plain error from C (arg 0). */
static void alias_error(lua_State *L, int arg, const char *msg) {
  if (arg > 0) luaL_argerror(L, arg, msg);
  luaL_error(L, "%s", msg);
}

/* A context made by the host or the driver API becomes a device named alias (cuCtxGetCurrent when ctx is
 * NULL; cuCtxGetDevice finds its device). Pushes the Device. Shared by cd.map_cuda_device (alias_arg 1) and
 * the embedding API's cudadev_adopt_context (alias_arg 0). */
cdv_device *cdv_map_context(lua_State *L, const char *alias, int alias_arg, void *context) {
  cdv_err e;
  if (strlen(alias) >= sizeof(((cdv_device *)0)->alias)) alias_error(L, alias_arg, "alias too long");
  if (strcmp(alias, "cpu") == 0 || strcmp(alias, "cuda") == 0 || strncmp(alias, "cuda:", 5) == 0)
    alias_error(L, alias_arg, lua_pushfstring(L, "'%s' is reserved; choose another alias", alias));
  for (int i = 0; i < cdv_device_count_all(); i++)
    if (strcmp(cdv_device_at(i)->alias, alias) == 0)
      alias_error(L, alias_arg, lua_pushfstring(L, "alias '%s' is already mapped", alias));
  if (cdv_cuda_count() == 0) luaL_error(L, "map_cuda_device needs a CUDA driver (%s)", cdv_cuda_why());
  int dev = 0;
  if (cdv_cuda_context_device(&context, &dev, &e)) cdv_raise(L, NULL, &e);
  if (context == NULL) luaL_error(L, "no CUDA context is current on this thread (pass the context pointer)");
  cdv_device *base = NULL;
  for (int i = 1; i < cdv_device_count_all() && base == NULL; i++)
    if (cdv_device_at(i)->is_primary && cdv_device_at(i)->handle == dev) base = cdv_device_at(i);
  if (base == NULL) luaL_error(L, "the context belongs to no known device");
  cdv_device proto = *base;
  snprintf(proto.alias, sizeof proto.alias, "%s", alias);
  proto.ctx = context;
  proto.is_primary = 0;
  proto.sticky = 0;
  cdv_device *d = cdv_device_add(&proto);
  if (d == NULL) luaL_error(L, "too many devices (at most %d)", CDV_MAXDEV);
  if (cdv_cuda_adopt(d, &e) != 0) { /* NOTE [adopted contexts] */
    d->unmapped = 1;
    snprintf(d->alias, sizeof d->alias, "unmapped:%s", alias);
    cdv_raise(L, NULL, &e);
  }
  cdv_push_device(L, d);
  return d;
}

/* cd.map_cuda_device(alias [, context_ptr]); a sandbox may name the current context, not a raw pointer */
static int l_map_cuda_device(lua_State *L) {
  const char *alias = cdv_check_cstring(L, 1, "alias"); /* NOTE [C strings] */
  void *ctx = NULL;
  if (!lua_isnoneornil(L, 2)) {
    if (cdv_get_state(L)->sandbox)
      return luaL_error(L, "map_cuda_device with a context pointer is not available in this sandbox");
    ctx = (void *)(intptr_t)luaL_checkinteger(L, 2);
  }
  cdv_map_context(L, alias, 1, ctx);
  return 1;
}

/* cd.unmap_cuda_device(alias): the alias no longer resolves; objects made on it become stale */
static int l_unmap_cuda_device(lua_State *L) {
  const char *alias = cdv_check_cstring(L, 1, "alias"); /* NOTE [C strings] */
  for (int i = 1; i < cdv_device_count_all(); i++) {
    cdv_device *d = cdv_device_at(i);
    if (!d->is_primary && strcmp(d->alias, alias) == 0) {
      cdv_state *st = cdv_get_state(L);
      if (st->default_device == d->index) st->default_device = -1;
      cdv_err e; /* (see NOTE [block cache]) the kept blocks go back to the host's context, unless it is gone */
      cdv_block_release(st, d, NULL, 1, &e);
      d->generation++;
      d->unmapped = 1;
      cdv_cuda_unadopt(d);
      snprintf(d->alias, sizeof d->alias, "unmapped:%s", alias);
      return 0;
    }
  }
  return luaL_argerror(L, 1, lua_pushfstring(L, "no mapped device '%s'", alias));
}

static const luaL_Reg functions[] = {
    {"with_peer_access", l_with_peer},          {"with_mempool_access", l_with_mempool},
    {"peer_access_matrix", l_peer_matrix},      {"map_cuda_device", l_map_cuda_device},
    {"unmap_cuda_device", l_unmap_cuda_device}, {NULL, NULL}};

static const char *const query_names[Q_N] = {"is_peer_access_supported", "is_peer_access_enabled",
                                             "is_mempool_access_supported", "is_mempool_access_enabled"};
static const char *const set_names[2] = {"set_peer_access_enabled", "set_mempool_access_enabled"};

int cdv_peer_open(lua_State *L) {
  static const luaL_Reg scope_meta[] = {{"__close", access_scope_close}, {NULL, NULL}};
  cdv_new_class(L, "cudadev.AccessScope", scope_meta, NULL, NULL); /* NOTE [class registration] */
  lua_pop(L, 1);
  luaL_setfuncs(L, functions, 0);
  for (int q = 0; q < Q_N; q++) {
    lua_pushinteger(L, q);
    lua_pushcclosure(L, l_query, 1);
    lua_setfield(L, -2, query_names[q]);
  }
  for (int i = 0; i < 2; i++) {
    lua_pushinteger(L, i);
    lua_pushcclosure(L, l_set, 1);
    lua_setfield(L, -2, set_names[i]);
  }
  return 0;
}
