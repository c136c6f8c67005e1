/*
 * backend_cuda_ipc.c: the CUDA backend's host functions on a stream and its interprocess memory and events
 * (NOTE [stream callbacks] in async.c, NOTE [ipc] in ipc.c). The caller made the device's context current.
 *
 * Like backend_cuda.c, nothing here touches a lua_State: each returns 0, or -1 with *e filled.
 */
#include <string.h>

#include "backend.h"
#include "syms.h"

#define DEVPTR(p) ((CUdeviceptr)(uintptr_t)(p))

/* cuLaunchHostFunc. A stream being captured would put the function into the graph, which calls it at every launch
 * of the graph, after the one call that frees its node: refused. */
int cdv_cuda_host_func(cdv_device *d, void *stream, void (*fn)(void *), void *ud, cdv_err *e) {
  (void)d;
  CUstreamCaptureStatus cap = CU_STREAM_CAPTURE_STATUS_NONE;
  if (CDV_HAVE_CU(cuStreamIsCapturing) && CDV_CU(e, cuStreamIsCapturing, (CUstream)stream, &cap)) return -1;
  if (cap != CU_STREAM_CAPTURE_STATUS_NONE)
    return cdv_fail(e, "cuLaunchHostFunc", CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
                    "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
                    "a stream callback cannot be captured into a graph (add it after cd.capture ends)");
  return CDV_CU(e, cuLaunchHostFunc, (CUstream)stream, fn, ud);
}

/* cuMemAlloc: an allocation of its own, never the stream-ordered pool's, which the legacy IPC handles cannot name */
int cdv_cuda_ipc_alloc(cdv_device *d, size_t bytes, void **ptr, cdv_err *e) {
  (void)d;
  CUdeviceptr p = 0;
  *ptr = NULL;
  if (CDV_CU(e, cuMemAlloc, &p, bytes == 0 ? 1 : bytes)) return -1; /* an empty array is shared too */
  *ptr = (void *)(uintptr_t)p;
  return 0;
}

/* cuMemFree */
int cdv_cuda_ipc_free(cdv_device *d, void *ptr, cdv_err *e) {
  (void)d;
  return CDV_CU(e, cuMemFree, DEVPTR(ptr));
}

/* cuIpcGetMemHandle */
int cdv_cuda_ipc_mem_get(cdv_device *d, void *ptr, unsigned char handle[64], cdv_err *e) {
  (void)d;
  CUipcMemHandle h;
  memset(&h, 0, sizeof h);
  if (CDV_CU(e, cuIpcGetMemHandle, &h, DEVPTR(ptr))) return -1;
  memcpy(handle, h.reserved, 64);
  return 0;
}

/* cuIpcOpenMemHandle (peer access turned on when the memory is another device's), then cuMemGetAddressRange for the
 * size of what it mapped */
int cdv_cuda_ipc_mem_open(cdv_device *d, const unsigned char handle[64], void **ptr, size_t *bytes, cdv_err *e) {
  (void)d;
  CUipcMemHandle h;
  CUdeviceptr p = 0, base = 0;
  memcpy(h.reserved, handle, 64);
  *ptr = NULL;
  *bytes = 0;
  if (CDV_CU(e, cuIpcOpenMemHandle, &p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)) return -1;
  if (CDV_CU(e, cuMemGetAddressRange, &base, bytes, p)) {
    cdv_cu.cuIpcCloseMemHandle(p);
    return -1;
  }
  *ptr = (void *)(uintptr_t)p;
  return 0;
}

/* cuIpcCloseMemHandle */
int cdv_cuda_ipc_mem_close(cdv_device *d, void *ptr, cdv_err *e) {
  (void)d;
  return CDV_CU(e, cuIpcCloseMemHandle, DEVPTR(ptr));
}

/* cuEventCreate(CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING): the driver wants both */
int cdv_cuda_ipc_event_create(cdv_device *d, int blocking, void **ev, cdv_err *e) {
  (void)d;
  CUevent h = NULL;
  unsigned flags = CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING | (blocking ? CU_EVENT_BLOCKING_SYNC : 0);
  if (CDV_CU(e, cuEventCreate, &h, flags)) return -1;
  *ev = h;
  return 0;
}

/* cuIpcGetEventHandle */
int cdv_cuda_ipc_event_get(cdv_device *d, void *ev, unsigned char handle[64], cdv_err *e) {
  (void)d;
  CUipcEventHandle h;
  memset(&h, 0, sizeof h);
  if (CDV_CU(e, cuIpcGetEventHandle, &h, (CUevent)ev)) return -1;
  memcpy(handle, h.reserved, 64);
  return 0;
}

/* cuIpcOpenEventHandle: an event of this process that cuEventDestroy releases */
int cdv_cuda_ipc_event_open(cdv_device *d, const unsigned char handle[64], void **ev, cdv_err *e) {
  (void)d;
  CUipcEventHandle h;
  CUevent out = NULL;
  memcpy(h.reserved, handle, 64);
  if (CDV_CU(e, cuIpcOpenEventHandle, &out, h)) return -1;
  *ev = out;
  return 0;
}
