/*
 * managed.c: managed (unified) memory for Arrays: the `managed = true` option of the constructors, a:prefetch,
 * a:advise, and the wait before host code touches such memory. doc/interop.md is the manual.
 *
 * NOTE [managed memory]: a managed block is memory of its device (cuMemAllocManaged(CU_MEM_ATTACH_GLOBAL), freed
 * with cuMemFree) that the host reads and writes at the same addresses, the driver migrating pages on demand. It is
 * a kind of block (CDV_MEM_MANAGED) that flows through the backends' mem_alloc and mem_free like the others; the
 * cpu backend gives ordinary host memory for it, and its prefetch and advice do nothing. Element access, tobytes,
 * totable and printing read a managed block in place (cdv_host_reachable), without a staging copy, once the host
 * may touch it: a device whose managed memory the CPU may not touch while any kernel runs (no
 * CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: older GPUs, Windows) needs the whole device idle, so host access
 * waits for the device (cdv_managed_wait), not for the array's last stream only. a:prefetch(device) moves the
 * pages ahead of use on a stream (cuMemPrefetchAsync, CUDA 12.2's form that takes a CUmemLocation; the host is
 * "cpu"), a:advise passes cuMemAdvise's hints. A managed array exported through DLPack is kDLCUDAManaged.
 */
#include <string.h>

#include "cdv.h"

int cdv_managed_option(lua_State *L, int arg, int pinned, const char *fname) {
  int managed = cdv_check_boolean_field(L, arg, "managed", 0, fname);
  if (managed && pinned)
    cdv_opt_error(L, "managed", fname,
                  "pinned and managed exclude each other (managed memory is reachable from the "
                  "host already)");
  return managed;
}

/* Host code is about to touch a managed block: its device idle, and the device of its last stream when another. */
int cdv_managed_wait(cdv_block *b, cdv_err *e) {
  cdv_device *d = b->dev, *ld = b->last_dev;
  if (!d->be->done_when_queued && cdv_still_owned(d, b->generation) && d->be->synchronize(d, e) != 0) return -1;
  if (ld != NULL && ld != d && !ld->be->done_when_queued && !ld->sticky && cdv_stream_alive(b->last_stream))
    return ld->be->stream_synchronize(ld, b->last_stream, e);
  return 0;
}

/* The live managed Array at 1 */
static cdv_array *check_managed(lua_State *L, const char *fname) {
  cdv_array *a = cdv_check_array(L, 1);
  if (a->block->kind != CDV_MEM_MANAGED)
    cdv_self_error(L, 1, lua_pushfstring(L, "%s needs a managed array (made with {managed = true})", fname));
  return a;
}

/* The device at arg as a prefetch or advice target of a: NULL for the host */
static cdv_device *target(lua_State *L, int arg, cdv_array *a) {
  cdv_device *to = cdv_check_device(L, arg), *d = a->block->dev;
  if (to->be->host_memory) return NULL; /* the host: NOTE [backend properties] */
  if (d->be->host_memory)
    luaL_argerror(L, arg,
                  lua_pushfstring(L, "a managed array of %s is host memory: only 'cpu' can hold it, not %s", d->alias,
                                  to->alias));
  return to;
}

static const char *const prefetch_opts[] = {"stream", NULL};

/* a:prefetch(device [, {stream=}]) -> a; the pages move to device ("cpu": the host) on the stream (default: the
 * current stream of a's device) */
static int array_prefetch(lua_State *L) {
  cdv_array *a = check_managed(L, "prefetch");
  cdv_device *to = target(L, 2, a);
  cdv_check_options(L, 3, prefetch_opts, "prefetch");
  cdv_stream *s = cdv_opt_stream_field(L, 3, "prefetch");
  a = check_managed(L, "prefetch"); /* the checks above allocated: a finalizer may have freed it */
  cdv_device *d = a->block->dev;
  if (s != NULL && s->dev != d)
    cdv_opt_error(L, "stream", "prefetch",
                  lua_pushfstring(L, "stream is on %s but the array on %s", s->dev->alias, d->alias));
  void *stream = cdv_stream_for(L, d, s);
  cdv_err e;
  cdv_device_use(L, d);
  if (d->be->mem_prefetch(d, a->data, (size_t)a->size * cdv_dtypes[a->dtype].size, to, stream, &e) != 0)
    cdv_raise(L, d, &e);
  cdv_block_used(a->block, d, stream);
  lua_settop(L, 1);
  return 1;
}

/* a:advise(advice [, device]) -> a: cuMemAdvise's hints by name; the device ("cpu": the host) for those that
 * name one */
static int array_advise(lua_State *L) {
  static const char *const names[] = {"read_mostly",
                                      "unset_read_mostly",
                                      "preferred_location",
                                      "unset_preferred_location",
                                      "accessed_by",
                                      "unset_accessed_by",
                                      NULL};
  static const int advice[] = {CDV_ADVISE_READ_MOSTLY,        CDV_ADVISE_UNSET_READ_MOSTLY,
                               CDV_ADVISE_PREFERRED_LOCATION, CDV_ADVISE_UNSET_PREFERRED_LOCATION,
                               CDV_ADVISE_ACCESSED_BY,        CDV_ADVISE_UNSET_ACCESSED_BY};
  cdv_array *a = check_managed(L, "advise");
  const char *name = luaL_checkstring(L, 2);
  int i = 0;
  while (names[i] != NULL && strcmp(names[i], name) != 0) i++;
  if (names[i] == NULL)
    luaL_argerror(L, 2,
                  lua_pushfstring(L,
                                  "unknown advice '%s' (read_mostly, unset_read_mostly, preferred_location, "
                                  "unset_preferred_location, accessed_by, unset_accessed_by)",
                                  name));
  int needs_device = advice[i] == CDV_ADVISE_PREFERRED_LOCATION || advice[i] == CDV_ADVISE_ACCESSED_BY ||
                     advice[i] == CDV_ADVISE_UNSET_ACCESSED_BY;
  if (needs_device && lua_isnoneornil(L, 3))
    luaL_argerror(L, 3, lua_pushfstring(L, "'%s' needs a device ('cpu' for the host)", name));
  cdv_device *to = needs_device ? target(L, 3, a) : NULL;
  a = check_managed(L, "advise");
  cdv_device *d = a->block->dev;
  cdv_err e;
  cdv_device_use(L, d);
  if (d->be->mem_advise(d, a->data, (size_t)a->size * cdv_dtypes[a->dtype].size, advice[i], to, &e) != 0)
    cdv_raise(L, d, &e);
  lua_settop(L, 1);
  return 1;
}

int cdv_managed_open(lua_State *L) {
  static const luaL_Reg methods[] = {{"prefetch", array_prefetch}, {"advise", array_advise}, {NULL, NULL}};
  cdv_array_add_methods(L, methods);
  return 0;
}
