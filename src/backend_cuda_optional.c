/*
 * backend_cuda_optional.c: the CUDA backend's optional operations (struct cdv_backend's "a backend may leave
 * these NULL" part): peer and memory-pool access between devices, graphs made by stream capture, the
 * statistics and trimming of a device's stream-ordered pool, and the device behind a context that a host
 * hands over. The cpu device has none of them; peer.c and graph.c ask the
 * device's backend for the operation and say by name that it is missing (memory.c skips the pool's), so none
 * of them includes the driver's headers (NOTE [optional operations] in cdv.h).
 *
 * Like backend_cuda.c, nothing here touches a lua_State: each returns 0, or -1 with *e filled.
 */
#include <string.h>

#include "backend.h"
#include "syms.h"

/* cuDeviceCanAccessPeer(&can, peer, target): can `peer` map `target`'s memory */
int cdv_cuda_peer_supported(cdv_device *target, cdv_device *peer, int *can, cdv_err *e) {
  *can = 0;
  return CDV_CU(e, cuDeviceCanAccessPeer, can, (CUdevice)peer->handle, (CUdevice)target->handle);
}

/* cuCtxEnablePeerAccess / cuCtxDisablePeerAccess on target's context, in peer's (the caller made both contexts
 * exist and peer's current). Enabling twice and disabling when off are not failures. */
int cdv_cuda_peer_set(cdv_device *target, cdv_device *peer, int on, cdv_err *e) {
  (void)peer;
  CUresult r = on ? cdv_cu.cuCtxEnablePeerAccess((CUcontext)target->ctx, 0)
                  : cdv_cu.cuCtxDisablePeerAccess((CUcontext)target->ctx);
  if (r == CUDA_SUCCESS || r == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED || r == CUDA_ERROR_PEER_ACCESS_NOT_ENABLED)
    return 0;
  return cdv_cu_error(e, on ? "cuCtxEnablePeerAccess" : "cuCtxDisablePeerAccess", r);
}

/* cuMemPoolGetAccess on target's default pool for peer's location */
int cdv_cuda_mempool_access_get(cdv_device *target, cdv_device *peer, int *on, cdv_err *e) {
  CUmemoryPool pool;
  CUmemAccess_flags flags = CU_MEM_ACCESS_FLAGS_PROT_NONE;
  CUmemLocation loc = {CU_MEM_LOCATION_TYPE_DEVICE, peer->handle};
  if (CDV_CU(e, cuDeviceGetDefaultMemPool, &pool, (CUdevice)target->handle) ||
      CDV_CU(e, cuMemPoolGetAccess, &flags, pool, &loc))
    return -1;
  *on = flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  return 0;
}

/* The access of device `handle` to memory: read and write when on, none otherwise. */
CUmemAccessDesc cdv_cuda_access_desc(int handle, int on) {
  CUmemAccessDesc desc;
  memset(&desc, 0, sizeof desc);
  desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  desc.location.id = handle;
  desc.flags = on ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE : CU_MEM_ACCESS_FLAGS_PROT_NONE;
  return desc;
}

/* cuMemPoolSetAccess: peer may (or may no longer) use memory of target's default pool, and of its granules */
int cdv_cuda_mempool_access_set(cdv_device *target, cdv_device *peer, int on, cdv_err *e) {
  CUmemoryPool pool;
  CUmemAccessDesc desc = cdv_cuda_access_desc(peer->handle, on);
  if (CDV_CU(e, cuDeviceGetDefaultMemPool, &pool, (CUdevice)target->handle) ||
      CDV_CU(e, cuMemPoolSetAccess, pool, &desc, 1))
    return -1;
  return cdv_cuda_granule_access(target, peer, on, e); /* NOTE [granules] */
}

/* cuStreamBeginCapture, thread-local mode: only this thread's work on the stream is captured */
int cdv_cuda_capture_begin(cdv_device *d, void *stream, cdv_err *e) {
  if (d->is_mempool_supported && cdv_cuda_pool_prepare(d, e)) return -1;
  return CDV_CU(e, cuStreamBeginCapture, (CUstream)stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
}

/* cuStreamEndCapture, then (when keep) cuGraphInstantiate: *exec is the executable graph and *nodes its node
 * count. The captured graph itself is destroyed either way; keep = 0 ends a capture whose body failed. */
int cdv_cuda_capture_end(cdv_device *d, void *stream, int keep, void **exec, int *nodes, cdv_err *e) {
  (void)d;
  CUgraph cg = NULL;
  CUgraphExec ge = NULL;
  size_t n = 0;
  *exec = NULL;
  int rc = CDV_CU(e, cuStreamEndCapture, (CUstream)stream, &cg);
  if (rc == 0 && keep) {
    if (cdv_cu.cuGraphGetNodes) cdv_cu.cuGraphGetNodes(cg, NULL, &n);
    rc = CDV_CU(e, cuGraphInstantiate, &ge, cg, 0);
  }
  if (cg != NULL) cdv_cu.cuGraphDestroy(cg);
  *exec = ge;
  *nodes = (int)n;
  return rc;
}

/* cuGraphLaunch */
int cdv_cuda_graph_launch(cdv_device *d, void *exec, void *stream, cdv_err *e) {
  (void)d;
  return CDV_CU(e, cuGraphLaunch, (CUgraphExec)exec, (CUstream)stream);
}

/* cuGraphExecDestroy */
int cdv_cuda_graph_destroy(cdv_device *d, void *exec, cdv_err *e) {
  (void)d;
  return CDV_CU(e, cuGraphExecDestroy, (CUgraphExec)exec);
}

/* The CUDA device (CUdevice) of a context a host hands over: *ctx, or the calling thread's current context when
 * *ctx is NULL (cuCtxGetCurrent; *ctx is then set, and stays NULL when none is current). cuCtxGetDevice answers
 * for the current context only, so the context is pushed for the question and popped after. */
int cdv_cuda_context_device(void **ctx, int *device, cdv_err *e) {
  CUcontext c = (CUcontext)*ctx, prev = NULL;
  CUdevice dev = 0;
  if (c == NULL) {
    if (CDV_CU(e, cuCtxGetCurrent, &c)) return -1;
    *ctx = c;
    if (c == NULL) return 0;
  }
  if (CDV_CU(e, cuCtxPushCurrent, c)) return -1;
  int rc = CDV_CU(e, cuCtxGetDevice, &dev);
  cdv_cu.cuCtxPopCurrent(&prev);
  *device = (int)dev;
  return rc;
}

/* cuMemPoolGetAttribute(RESERVED_MEM_CURRENT) of the device's default pool */
int cdv_cuda_pool_reserved(cdv_device *d, uint64_t *bytes, cdv_err *e) {
  CUmemoryPool pool;
  cuuint64_t v = 0;
  if (CDV_CU(e, cuDeviceGetDefaultMemPool, &pool, (CUdevice)d->handle) ||
      CDV_CU(e, cuMemPoolGetAttribute, pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v))
    return -1;
  *bytes = (uint64_t)v + cdv_cuda_granule_reserved(d); /* NOTE [granules] */
  return 0;
}

/* cuMemPoolTrimTo(pool, 0): the default pool gives back every byte it keeps that no allocation uses, and so do our
 * granules (NOTE [granules]); the caller synchronised the device */
int cdv_cuda_pool_trim(cdv_device *d, cdv_err *e) {
  CUmemoryPool pool;
  if (cdv_cuda_granule_trim(d, 1, e) || CDV_CU(e, cuDeviceGetDefaultMemPool, &pool, (CUdevice)d->handle)) return -1;
  return CDV_CU(e, cuMemPoolTrimTo, pool, 0);
}

/* k:occupancy()'s multiprocessor resources: cuDeviceGetAttribute of MAX_THREADS_PER_MULTIPROCESSOR,
 * MAX_REGISTERS_PER_MULTIPROCESSOR and MAX_SHARED_MEMORY_PER_MULTIPROCESSOR; one that fails leaves its value. */
void cdv_cuda_sm_resources(cdv_device *d, int *max_threads, int *regs, size_t *shared) {
  cdv_err e;
  int v;
  if (cdv_cuda_attribute(d, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, &v, &e) == 0) *max_threads = v;
  if (cdv_cuda_attribute(d, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, &v, &e) == 0) *regs = v;
  if (cdv_cuda_attribute(d, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, &v, &e) == 0) *shared = (size_t)v;
}

/* cuProfilerStart / cuProfilerStop in d's context (the caller made it current) */
int cdv_cuda_profiler(cdv_device *d, int start, cdv_err *e) {
  (void)d;
  return start ? CDV_CU(e, cuProfilerStart) : CDV_CU(e, cuProfilerStop);
}

/* The number of CU_DEVICE_ATTRIBUTE_<NAME> for d:attribute("name") (lowercase, without the prefix; the table
 * is generated from cuda.h, cmake/gen_attrs.cmake), -1 for a name it does not have. */
int cdv_cuda_attribute_id(const char *name) {
  static const struct {
    const char *name;
    int value;
  } attrs[] = {
#include "cdv_attrs.h"
  };
  for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++)
    if (strcmp(attrs[i].name, name) == 0) return attrs[i].value;
  return -1;
}

/* (see NOTE [managed memory]) Where a prefetch or an advice points: a device's ordinal, or the host */
static CUmemLocation location(const cdv_device *to) {
  CUmemLocation l;
  memset(&l, 0, sizeof l);
  l.type = to == NULL || to->be != &cdv_backend_cuda ? CU_MEM_LOCATION_TYPE_HOST : CU_MEM_LOCATION_TYPE_DEVICE;
  l.id = to == NULL || to->be != &cdv_backend_cuda ? 0 : to->ordinal;
  return l;
}

/* cuMemPrefetchAsync (CUDA 12.2's form with a CUmemLocation, cuMemPrefetchAsync_v2) on d's stream; the caller
 * made d's context current */
int cdv_cuda_mem_prefetch(cdv_device *d, void *ptr, size_t bytes, cdv_device *to, void *stream, cdv_err *e) {
  (void)d;
  if (bytes == 0) return 0;
  return CDV_CU(e, cuMemPrefetchAsync, (CUdeviceptr)(uintptr_t)ptr, bytes, location(to), 0, (CUstream)stream);
}

/* cuMemAdvise (cuMemAdvise_v2, with a CUmemLocation); CDV_ADVISE_* are CU_MEM_ADVISE_*'s values */
int cdv_cuda_mem_advise(cdv_device *d, void *ptr, size_t bytes, int advice, cdv_device *to, cdv_err *e) {
  (void)d;
  if (bytes == 0) return 0;
  return CDV_CU(e, cuMemAdvise, (CUdeviceptr)(uintptr_t)ptr, bytes, (CUmem_advise)advice, location(to));
}
