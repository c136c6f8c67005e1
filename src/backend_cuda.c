/*
 * backend_cuda.c: the `cuda` backend. Every operation of struct cdv_backend for a CUDA device, through the
 * driver API that loader.c resolves (syms.h), and kernel compilation through NVRTC.
 *
 * Each operation first makes the device's context current (cuda_activate), so the Lua layer never has to
 * think about which context a thread holds. Failures become a cdv_err named after the documented driver call
 * ("cuMemAlloc", not "cuMemAlloc_v2"); no function here touches a lua_State.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "backend.h"
#include "syms.h"

#define DPTR(p) ((CUdeviceptr)(uintptr_t)(p))
#define INVALID CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE" /* code and name for cdv_fail */

static char *dup_str(const char *s) {
  size_t n = strlen(s) + 1;
  char *p = malloc(n);
  if (p) memcpy(p, s, n);
  return p;
}

/* ---------------------------------------------------------------- errors */
/* The codes of NOTE [sticky faults] (error.c): after them the context is corrupted. cuda.h says of each that
 * "the process is left in an inconsistent state and any further CUDA work will return the same error" (for a
 * device assert, that the context must be destroyed). Enum names present in every CUDA 12 and 13 cuda.h; the
 * two that later 12.x headers added are written as numbers so that older toolkits still compile this. */
int cdv_cuda_is_sticky(int code) {
  switch (code) {
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_NVLINK_UNCORRECTABLE:
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_MPS_CLIENT_TERMINATED:
    case CUDA_ERROR_EXTERNAL_DEVICE:
    case 226: /* CUDA_ERROR_CONTAINED: an error contained by the GPU (bad NVLink peer access, some hardware faults) */
    case 721: /* CUDA_ERROR_TENSOR_MEMORY_LEAK: a kernel exited without freeing tensor memory */ return 1;
    default: return 0;
  }
}

/* NOTE [lifetimes]: the codes with which a finalizer's failure says nothing (error.c's cdv_warn_release): the
 * process or the host is tearing CUDA down, so there is nothing left to free. */
int cdv_cuda_is_teardown(int code) {
  return code == CUDA_ERROR_DEINITIALIZED || code == CUDA_ERROR_CONTEXT_IS_DESTROYED ||
         code == CUDA_ERROR_INVALID_CONTEXT;
}

/* cuGetErrorName + cuGetErrorString: the driver's own NAME and explanation for a CUresult. The toolkit's stub
 * libcuda answers every call, these two included, with CUDA_ERROR_STUB_LIBRARY, so that one is named here. */
int cdv_cu_error(cdv_err *e, const char *api, CUresult r) {
  const char *name = NULL, *msg = NULL;
  char unknown[32];
  if (cdv_cu.cuGetErrorName && cdv_cu.cuGetErrorName(r, &name) != CUDA_SUCCESS) name = NULL;
  if (cdv_cu.cuGetErrorString && cdv_cu.cuGetErrorString(r, &msg) != CUDA_SUCCESS) msg = NULL;
  if (!name && r == CUDA_ERROR_STUB_LIBRARY) {
    name = "CUDA_ERROR_STUB_LIBRARY";
    msg = "the libcuda that was loaded is the toolkit's stub, not a driver (is lib64/stubs on the library path?)";
  }
  snprintf(unknown, sizeof unknown, "CUDA_ERROR_%d", (int)r);
  cdv_fail(e, api, (int)r, name ? name : unknown, "%s", msg ? msg : "unrecognized error code");
  e->sticky = cdv_cuda_is_sticky((int)r);
  return -1;
}

/* nvrtcGetErrorString gives only the NAME ("NVRTC_ERROR_COMPILATION"); this is the explanation. */
static const char *nvrtc_explain(nvrtcResult r) {
  switch (r) {
    case NVRTC_ERROR_OUT_OF_MEMORY: return "out of host memory";
    case NVRTC_ERROR_PROGRAM_CREATION_FAILURE: return "the program could not be created";
    case NVRTC_ERROR_INVALID_INPUT: return "invalid input";
    case NVRTC_ERROR_INVALID_PROGRAM: return "invalid program";
    case NVRTC_ERROR_INVALID_OPTION: return "invalid compiler option";
    case NVRTC_ERROR_COMPILATION: return "compilation failed";
    case NVRTC_ERROR_BUILTIN_OPERATION_FAILURE: return "NVRTC's builtins failed (is libnvrtc-builtins present?)";
    case NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID: return "the name expression is not valid";
    case NVRTC_ERROR_INTERNAL_ERROR: return "internal NVRTC error";
    default: return "NVRTC call failed";
  }
}

int cdv_nvrtc_error(cdv_err *e, const char *api, nvrtcResult r) {
  const char *name = cdv_nvrtc.nvrtcGetErrorString ? cdv_nvrtc.nvrtcGetErrorString(r) : NULL;
  return cdv_fail(e, api, (int)r, name ? name : "NVRTC_ERROR_UNKNOWN", "%s", nvrtc_explain(r));
}

/* A host allocation of the compile path failed. */
static int nvrtc_oom(cdv_err *e, const char *api) { return cdv_nvrtc_error(e, api, NVRTC_ERROR_OUT_OF_MEMORY); }

/* ---------------------------------------------------------------- contexts */
static pthread_mutex_t retain_lock = PTHREAD_MUTEX_INITIALIZER;

/* cuDevicePrimaryCtxRetain: we share the device's primary context with everything else in the process (the
 * runtime API, PyTorch) instead of creating our own, and retain it once per device, on first use. The lock
 * keeps two threads from both retaining it; after that the pointer never changes (a reset keeps the handle). */
static int retain(cdv_device *d, cdv_err *e) {
  if (__atomic_load_n(&d->ctx, __ATOMIC_ACQUIRE)) return 0;
  if (cdv_cuda_load() != 0) return cdv_cuda_unavailable(e);
  int rc = 0;
  pthread_mutex_lock(&retain_lock);
  if (!d->ctx) {
    CUcontext c = NULL;
    rc = CDV_CU(e, cuDevicePrimaryCtxRetain, &c, (CUdevice)d->handle);
    if (rc == 0) __atomic_store_n(&d->ctx, (void *)c, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&retain_lock);
  return rc;
}

/* cuCtxGetCurrent + cuCtxSetCurrent: make d's context current on this thread unless it already is. The check
 * is a thread-local read inside the driver, cheap enough for every operation to start with it. */
static int cuda_activate(cdv_device *d, cdv_err *e) {
  if (retain(d, e)) return -1;
  CUcontext cur = NULL;
  if (CDV_CU(e, cuCtxGetCurrent, &cur)) return -1;
  return cur == (CUcontext)d->ctx ? 0 : CDV_CU(e, cuCtxSetCurrent, (CUcontext)d->ctx);
}

/* NOTE [adopted contexts]: a context mapped with cd.map_cuda_device or cudadev_adopt_context belongs to the
 * program that made it, which may destroy it while Lua objects made on it are alive: a host that tears its
 * CUDA state down and then calls lua_close. The driver does not check the handles of a destroyed context:
 * cuCtxSetCurrent on one succeeds, and the next call through its streams reads freed memory (embed_host
 * --teardown-first crashed so, in glibc's free, about two runs in five). So a mapped context gets a canary:
 * 256 bytes of our own in it, whose address the driver looks up in its tables (cuPointerGetAttribute), never
 * through a handle. While the canary's context is the mapped one, the context lives; when the lookup fails the
 * context is gone, the device is marked so, and nothing made on it calls the driver again: finalizers skip
 * their release (the memory went with the context) and other uses raise. The check is made by every finalizer
 * and by every operation but launches on mapped devices (cdv_device_use); primary contexts have no canary. */
int cdv_cuda_context_alive(cdv_device *d) {
  if (d->gone) return 0;
  if (d->canary == 0) return 1;
  CUcontext c = NULL;
  CUresult r = cdv_cu.cuPointerGetAttribute
                   ? cdv_cu.cuPointerGetAttribute(&c, CU_POINTER_ATTRIBUTE_CONTEXT, (CUdeviceptr)d->canary)
                   : CUDA_ERROR_NOT_FOUND;
  if (r == CUDA_SUCCESS && c == (CUcontext)d->ctx) return 1;
  d->gone = 1;
  return 0;
}

/* The canary is made and freed with the mapped context pushed and popped: the thread's own stays current. */
int cdv_cuda_adopt(cdv_device *d, cdv_err *e) {
  CUdeviceptr p = 0;
  CUcontext prev;
  if (CDV_CU(e, cuCtxPushCurrent, (CUcontext)d->ctx)) return -1;
  int rc = CDV_CU(e, cuMemAlloc, &p, 256);
  cdv_cu.cuCtxPopCurrent(&prev);
  if (rc == 0) d->canary = (uintptr_t)p;
  return rc;
}

void cdv_cuda_unadopt(cdv_device *d) {
  CUcontext prev;
  if (d->canary != 0 && cdv_cuda_context_alive(d) && cdv_cu.cuCtxPushCurrent((CUcontext)d->ctx) == CUDA_SUCCESS) {
    cdv_cu.cuMemFree((CUdeviceptr)d->canary);
    cdv_cu.cuCtxPopCurrent(&prev);
  }
  d->canary = 0;
}

/* cuStreamGetCtx: a handle a host hands over as a stream of d (cudadev_push_stream) must be one of d's context.
 * The driver reads what the handle points to, so this catches a stream of another device or context, a
 * destroyed one it still recognises, and an event or context passed by mistake; not an arbitrary pointer. */
int cdv_cuda_stream_of(cdv_device *d, void *stream, cdv_err *e) {
  CUcontext c = NULL;
  if (cuda_activate(d, e)) return -1;
  if (CDV_CU(e, cuStreamGetCtx, (CUstream)stream, &c)) return -1;
  if (c != (CUcontext)d->ctx)
    return cdv_fail(e, "cuStreamGetCtx", 1, "CUDA_ERROR_INVALID_HANDLE", "the stream belongs to another context");
  return 0;
}

/* cuCtxSynchronize: wait for all work of the device's context. */
static int cuda_synchronize(cdv_device *d, cdv_err *e) {
  return cuda_activate(d, e) ? -1 : CDV_CU(e, cuCtxSynchronize);
}

/* cuMemGetInfo: free and total memory as the device's context sees them. */
static int cuda_mem_info(cdv_device *d, size_t *free_b, size_t *total_b, cdv_err *e) {
  return cuda_activate(d, e) ? -1 : CDV_CU(e, cuMemGetInfo, free_b, total_b);
}

/* ---------------------------------------------------------------- memory */
/* NOTE [caching pool]: on devices with memory pools, device memory (of over 32 MiB: smaller arrays take NOTE
 * [granules]) comes from the device's default pool with the stream-ordered cuMemAllocAsync / cuMemFreeAsync. By default
 * the pool hands freed memory back to the system at every synchronisation; raising its release threshold to UINT64_MAX
 * keeps it cached, which makes the pool a caching allocator: about 2.5 us per 1 MiB alloc+free, like PyTorch's, against
 * about 84 us for cuMemAlloc + cuMemFree. memory.c's empty_cache gives the cache back with cuMemPoolTrimTo. The
 * threshold is set once per device (a flag per CUdevice; setting it twice is harmless, so the flag needs no lock). */
static int pool_ready[CDV_CUDA_MAXDEV];

/* cuDeviceGetDefaultMemPool + cuMemPoolSetAttribute(CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), before the device's first
 * allocation and before a capture begins: the driver refuses to set it while a stream is capturing, and with
 * granules (NOTE [granules]) a graph's allocations may be the pool's first. */
int cdv_cuda_pool_prepare(cdv_device *d, cdv_err *e) {
  int h = d->handle, slot = h >= 0 && h < CDV_CUDA_MAXDEV;
  if (slot && __atomic_load_n(&pool_ready[h], __ATOMIC_ACQUIRE)) return 0;
  CUmemoryPool pool;
  cuuint64_t threshold = UINT64_MAX;
  if (CDV_CU(e, cuDeviceGetDefaultMemPool, &pool, (CUdevice)h)) return -1;
  if (CDV_CU(e, cuMemPoolSetAttribute, pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold)) return -1;
  if (slot) __atomic_store_n(&pool_ready[h], 1, __ATOMIC_RELEASE);
  return 0;
}

/* dev:reset(): cuDevicePrimaryCtxReset destroys the primary context (its memory, streams, modules) and
 * with it the handle we retained: later calls on that handle fail with CONTEXT_IS_DESTROYED. So the handle is
 * forgotten and the device's primary context retained anew (and made current), and the memory pool's release
 * threshold raised again. Returns -1 when the reset failed (nothing changed), -2 when the reset happened but
 * the new context could not be had: after a sticky fault the driver keeps reporting it (NOTE [sticky faults]). */
int cdv_cuda_reset(cdv_device *d, cdv_err *e) { /* the caller has let queued work finish */
  if (CDV_CU(e, cuDevicePrimaryCtxReset, (CUdevice)d->handle)) return -1;
  cdv_cuda_granule_reset(d);
  if (d->handle >= 0 && d->handle < CDV_CUDA_MAXDEV) __atomic_store_n(&pool_ready[d->handle], 0, __ATOMIC_RELEASE);
  /* The thread may still have the destroyed context current, and the first call after the reset can report the
   * fault that poisoned it once more: the thread's context is cleared and the retain tried a second time. */
  int rc = -1;
  for (int attempt = 0; attempt < 2 && rc != 0; attempt++) {
    pthread_mutex_lock(&retain_lock);
    __atomic_store_n(&d->ctx, NULL, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&retain_lock);
    cdv_cu.cuCtxSetCurrent(NULL);
    rc = cuda_activate(d, e);
  }
  return rc ? -2 : 0;
}

static int push_any(int *pushed, cdv_err *e);
static void pop_any(int pushed);

/* Pinned memory lives in the pinned pool (memory.c) for the whole process, so it is allocated in the context
 * that lives as long (push_any's), never in a mapped context its owner may destroy (NOTE [adopted contexts]). */
static int pinned_alloc(size_t bytes, void **ptr, cdv_err *e) {
  int pushed;
  if (push_any(&pushed, e)) return -1;
  int rc = CDV_CU(e, cuMemHostAlloc, ptr, bytes, CU_MEMHOSTALLOC_PORTABLE);
  pop_any(pushed);
  return rc;
}

static int pinned_free(void *ptr, cdv_err *e) {
  int pushed;
  if (push_any(&pushed, e)) return -1;
  int rc = CDV_CU(e, cuMemFreeHost, ptr);
  pop_any(pushed);
  return rc;
}

static int bad_kind(cdv_err *e, const char *api, int kind) {
  return cdv_fail(e, api, INVALID, "memory kind %d is not device or pinned", kind);
}

/* Granules of our own (NOTE [granules]), else cuMemAllocAsync on `stream` (NOTE [caching pool]); when the pool is out
 * of memory, the granule segments nothing uses any more go back and it is asked again. */
static int pool_alloc(cdv_device *d, size_t bytes, void *stream, void **ptr, cdv_err *e) {
  if (cdv_cuda_pool_prepare(d, e)) return -1;
  int rc = cdv_cuda_granule_alloc(d, bytes, stream, ptr, e);
  if (rc <= 0) return rc;
  CUdeviceptr p = 0;
  rc = CDV_CU(e, cuMemAllocAsync, &p, bytes, (CUstream)stream);
  if (rc != 0 && e->code == CUDA_ERROR_OUT_OF_MEMORY) {
    cdv_err ignored;
    cdv_cuda_granule_trim(d, 0, &ignored);
    rc = CDV_CU(e, cuMemAllocAsync, &p, bytes, (CUstream)stream);
  }
  if (rc == 0) *ptr = (void *)(uintptr_t)p;
  return rc;
}

/* The pool's or our granules (pool_alloc), cuMemAlloc without a pool; pinned: cuMemHostAlloc(PORTABLE).
 * Zero bytes give NULL: an empty array owns no memory, and the driver rejects a zero size. */
static int cuda_mem_alloc(cdv_device *d, size_t bytes, int kind, void *stream, void **ptr, cdv_err *e) {
  *ptr = NULL;
  if (bytes == 0) return 0;
  if (kind == CDV_MEM_PINNED) return pinned_alloc(bytes, ptr, e);
  if (cuda_activate(d, e)) return -1;
  if (kind != CDV_MEM_DEVICE && kind != CDV_MEM_MANAGED) return bad_kind(e, "cuda.mem_alloc", kind);
  if (kind == CDV_MEM_DEVICE && d->is_mempool_supported) return pool_alloc(d, bytes, stream, ptr, e);
  CUdeviceptr p = 0;
  int rc = kind == CDV_MEM_MANAGED
               ? CDV_CU(e, cuMemAllocManaged, &p, bytes, CU_MEM_ATTACH_GLOBAL) /* NOTE [managed memory] */
               : CDV_CU(e, cuMemAlloc, &p, bytes);
  if (rc == 0) *ptr = (void *)(uintptr_t)p;
  return rc;
}

/* Back to our granules (NOTE [granules]) or cuMemFreeAsync on `stream` (ordered after the work queued there), or
 * cuMemFree; pinned: cuMemFreeHost. */
static int cuda_mem_free(cdv_device *d, void *ptr, int kind, void *stream, cdv_err *e) {
  if (!ptr) return 0;
  if (kind == CDV_MEM_PINNED) return pinned_free(ptr, e);
  if (cuda_activate(d, e)) return -1;
  if (kind == CDV_MEM_MANAGED) return CDV_CU(e, cuMemFree, DPTR(ptr)); /* cuMemFree waits for work using it */
  if (kind != CDV_MEM_DEVICE) return bad_kind(e, "cuda.mem_free", kind);
  if (!d->is_mempool_supported) return CDV_CU(e, cuMemFree, DPTR(ptr));
  int rc = cdv_cuda_granule_free(d, ptr, stream, e);
  return rc <= 0 ? rc : CDV_CU(e, cuMemFreeAsync, DPTR(ptr), (CUstream)stream);
}

/* Two CUDA sides on one physical device share its address space: a plain device-to-device copy does. */
static int same_device(const cdv_device *a, const cdv_device *b) { return a == b || a->handle == b->handle; }

/* cuMemcpyHtoDAsync / cuMemcpyDtoHAsync / cuMemcpyDtoDAsync / cuMemcpyPeerAsync, by where each side lives, all
 * on `stream` (NULL: the legacy default stream). The caller synchronises when it promised a synchronous copy. */
static int cuda_memcpy(cdv_device *d, void *dst, cdv_device *dst_dev, const void *src, cdv_device *src_dev, size_t n,
                       void *stream, cdv_err *e) {
  CUstream s = (CUstream)stream;
  if (n == 0) return 0;
  if (cuda_activate(d, e)) return -1;
  if (src_dev->be->host_memory && dst_dev->be->host_memory) { /* not ours to do, but keep the stream's order if asked */
    if (CDV_CU(e, cuStreamSynchronize, s)) return -1;
    memcpy(dst, src, n);
    return 0;
  }
  if (src_dev->be->host_memory) return CDV_CU(e, cuMemcpyHtoDAsync, DPTR(dst), src, n, s);
  if (dst_dev->be->host_memory) return CDV_CU(e, cuMemcpyDtoHAsync, dst, DPTR(src), n, s);
  if (same_device(dst_dev, src_dev)) return CDV_CU(e, cuMemcpyDtoDAsync, DPTR(dst), DPTR(src), n, s);
  if (retain(dst_dev, e) || retain(src_dev, e)) return -1;
  return CDV_CU(e, cuMemcpyPeerAsync, DPTR(dst), (CUcontext)dst_dev->ctx, DPTR(src), (CUcontext)src_dev->ctx, n, s);
}

/* NOTE [8-byte fill]: the driver has no 64-bit memset and this layer compiles no kernels. When both 32-bit
 * halves are equal (0, -1, ...) one cuMemsetD32Async of 2 * count words does it. Otherwise the first elements
 * are seen as rows of two 32-bit words: cuMemsetD2D32Async with pitch 8 and width 1 fills the low words (at
 * dst), a second one the high words (at dst + 4); the low word comes first on a little-endian machine. That
 * 2-D fill writes 4 bytes a row and runs at a few GB/s (32 MiB took 5.3 ms on an H100, against 0.02 ms for a
 * 32-bit fill), so it only seeds FILL_SEED elements; cuMemcpyDtoDAsync then doubles the filled prefix until
 * the buffer is full: log2(count / FILL_SEED) copies at copy-engine speed, all on the stream, no host wait. */
#define FILL_SEED 4096

static int memset64(cdv_err *e, CUdeviceptr p, const void *pattern, size_t count, CUstream s) {
  uint32_t w[2];
  memcpy(w, pattern, sizeof w);
  if (w[0] == w[1]) return CDV_CU(e, cuMemsetD32Async, p, w[0], 2 * count, s);
  size_t done = count < FILL_SEED ? count : FILL_SEED;
  if (CDV_CU(e, cuMemsetD2D32Async, p, 8, w[0], 1, done, s)) return -1;
  if (CDV_CU(e, cuMemsetD2D32Async, p + 4, 8, w[1], 1, done, s)) return -1;
  for (; done < count; done *= 2) {
    size_t n = count - done < done ? count - done : done;
    if (CDV_CU(e, cuMemcpyDtoDAsync, p + 8 * done, p, 8 * n, s)) return -1;
  }
  return 0;
}

/* cuMemsetD8Async / cuMemsetD16Async / cuMemsetD32Async by element size; 8 bytes: NOTE [8-byte fill]. */
static int cuda_memset(cdv_device *d, void *dst, const void *pattern, size_t elsize, size_t count, void *stream,
                       cdv_err *e) {
  CUstream s = (CUstream)stream;
  uint8_t v8;
  uint16_t v16;
  uint32_t v32;
  if (count == 0) return 0;
  if (cuda_activate(d, e)) return -1;
  switch (elsize) {
    case 1: memcpy(&v8, pattern, 1); return CDV_CU(e, cuMemsetD8Async, DPTR(dst), v8, count, s);
    case 2: memcpy(&v16, pattern, 2); return CDV_CU(e, cuMemsetD16Async, DPTR(dst), v16, count, s);
    case 4: memcpy(&v32, pattern, 4); return CDV_CU(e, cuMemsetD32Async, DPTR(dst), v32, count, s);
    case 8: return memset64(e, DPTR(dst), pattern, count, s);
    default: return cdv_fail(e, "cuda.memset", INVALID, "element size %zu is not 1, 2, 4 or 8", elsize);
  }
}

/* ---------------------------------------------------------------- streams and events */
/* cuStreamCreateWithPriority; a non-blocking stream does not wait for the legacy default stream. */
static int cuda_stream_create(cdv_device *d, int priority, int blocking, void **s, cdv_err *e) {
  CUstream st = NULL;
  unsigned flags = blocking ? CU_STREAM_DEFAULT : CU_STREAM_NON_BLOCKING;
  if (cuda_activate(d, e) || CDV_CU(e, cuStreamCreateWithPriority, &st, flags, priority)) return -1;
  *s = st;
  return 0;
}

/* cuStreamDestroy; the default stream (NULL) is not ours to destroy. */
static int cuda_stream_destroy(cdv_device *d, void *s, cdv_err *e) {
  if (!s) return 0;
  cdv_cuda_granule_stream_gone(d, s);
  return cuda_activate(d, e) ? -1 : CDV_CU(e, cuStreamDestroy, (CUstream)s);
}

/* cuStreamSynchronize */
static int cuda_stream_synchronize(cdv_device *d, void *s, cdv_err *e) {
  return cuda_activate(d, e) ? -1 : CDV_CU(e, cuStreamSynchronize, (CUstream)s);
}

/* A query's CUDA_ERROR_NOT_READY is an answer ("busy"), not a failure. */
static int query_result(cdv_err *e, const char *api, CUresult r, int *done) {
  *done = r == CUDA_SUCCESS;
  return r == CUDA_SUCCESS || r == CUDA_ERROR_NOT_READY ? 0 : cdv_cu_error(e, api, r);
}

/* cuStreamQuery: idle = 1 when all its work is done. */
static int cuda_stream_query(cdv_device *d, void *s, int *idle, cdv_err *e) {
  *idle = 0;
  if (cuda_activate(d, e)) return -1;
  if (!CDV_HAVE_CU(cuStreamQuery)) return cdv_sym_missing(e, "cuStreamQuery", CDV_XSTR(cuStreamQuery), "libcuda");
  return query_result(e, "cuStreamQuery", cdv_cu.cuStreamQuery((CUstream)s), idle);
}

/* cuStreamWaitEvent: later work on s waits for ev, on the device, without blocking the host. */
static int cuda_stream_wait_event(cdv_device *d, void *s, void *ev, cdv_err *e) {
  return cuda_activate(d, e) ? -1 : CDV_CU(e, cuStreamWaitEvent, (CUstream)s, (CUevent)ev, 0);
}

/* cuCtxGetStreamPriorityRange: numerically lower is more urgent, so greatest <= least. */
static int cuda_stream_priority_range(cdv_device *d, int *least, int *greatest, cdv_err *e) {
  return cuda_activate(d, e) ? -1 : CDV_CU(e, cuCtxGetStreamPriorityRange, least, greatest);
}

/* cuEventCreate; events without timing are cheaper to record and wait for. */
static int cuda_event_create(cdv_device *d, int timing, int blocking, void **ev, cdv_err *e) {
  CUevent h = NULL;
  unsigned flags = (timing ? 0 : CU_EVENT_DISABLE_TIMING) | (blocking ? CU_EVENT_BLOCKING_SYNC : 0);
  if (cuda_activate(d, e) || CDV_CU(e, cuEventCreate, &h, flags)) return -1;
  *ev = h;
  return 0;
}

/* cuEventDestroy */
static int cuda_event_destroy(cdv_device *d, void *ev, cdv_err *e) {
  return cuda_activate(d, e) ? -1 : CDV_CU(e, cuEventDestroy, (CUevent)ev);
}

/* cuEventRecord */
static int cuda_event_record(cdv_device *d, void *ev, void *s, cdv_err *e) {
  return cuda_activate(d, e) ? -1 : CDV_CU(e, cuEventRecord, (CUevent)ev, (CUstream)s);
}

/* cuEventQuery: done = 1 when the work before the record has completed. */
static int cuda_event_query(cdv_device *d, void *ev, int *done, cdv_err *e) {
  *done = 0;
  if (cuda_activate(d, e)) return -1;
  if (!CDV_HAVE_CU(cuEventQuery)) return cdv_sym_missing(e, "cuEventQuery", CDV_XSTR(cuEventQuery), "libcuda");
  return query_result(e, "cuEventQuery", cdv_cu.cuEventQuery((CUevent)ev), done);
}

/* cuEventSynchronize */
static int cuda_event_synchronize(cdv_device *d, void *ev, cdv_err *e) {
  return cuda_activate(d, e) ? -1 : CDV_CU(e, cuEventSynchronize, (CUevent)ev);
}

/* cuEventElapsedTime: milliseconds between two recorded timing events. */
static int cuda_event_elapsed(cdv_device *d, void *start, void *end, float *ms, cdv_err *e) {
  return cuda_activate(d, e) ? -1 : CDV_CU(e, cuEventElapsedTime, ms, (CUevent)start, (CUevent)end);
}

/* ---------------------------------------------------------------- compile (NVRTC) */
/* What the options make NVRTC produce: the architecture option we add (or "" when the user set one) and
 * whether a cubin comes out (sm_XX) or only PTX (compute_XX). */
typedef struct nvrtc_target {
  char option[48];
  int cubin;
} nvrtc_target;

/* The user's own -arch / --gpu-architecture wins; a cubin comes out only for a real sm_XX. */
static int user_arch(const cdv_compile_req *req, int *is_sm) {
  for (int i = 0; i < req->nopts; i++) {
    const char *o = req->opts[i];
    if (strncmp(o, "--gpu-architecture", 18) != 0 && strncmp(o, "-arch", 5) != 0) continue;
    if (!strchr(o, '=') && i + 1 < req->nopts) o = req->opts[i + 1]; /* "-arch" "sm_90" */
    *is_sm = strstr(o, "sm_") != NULL;
    return 1;
  }
  return 0;
}

/* The one NVRTC architecture query: nvrtcGetNumSupportedArchs + nvrtcGetSupportedArchs, asked once per process
 * (loading NVRTC): the sm_XX this NVRTC can emit; none when it cannot say. */
static int nvrtc_archs[256], nvrtc_narchs;

static void load_archs(void) {
  int n = 0;
  if (cdv_nvrtc_load() != 0 || !cdv_nvrtc.nvrtcGetNumSupportedArchs || !cdv_nvrtc.nvrtcGetSupportedArchs) return;
  if (cdv_nvrtc.nvrtcGetNumSupportedArchs(&n) != NVRTC_SUCCESS || n <= 0 || n > 256) return;
  if (cdv_nvrtc.nvrtcGetSupportedArchs(nvrtc_archs) == NVRTC_SUCCESS) nvrtc_narchs = n;
}

static int supported_archs(const int **archs) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, load_archs);
  *archs = nvrtc_archs;
  return nvrtc_narchs;
}

/* NVRTC emits cubin only for the architectures it lists; others get PTX for the driver to JIT. */
int cdv_cubin_supported(int arch) {
  const int *archs;
  int n = supported_archs(&archs);
  for (int i = 0; i < n; i++)
    if (archs[i] == arch) return 1;
  return 0;
}

/* sm_XX when a cubin is wanted and NVRTC can emit one (and has nvrtcGetCUBIN), else compute_XX for PTX. An
 * architecture newer than this NVRTC knows gets PTX for the newest one it knows below it, which the driver
 * JIT-compiles for the device; one older than all of them is an error that says what NVRTC supports. */
static int pick_target(const cdv_compile_req *req, int arch, nvrtc_target *t, cdv_err *e) {
  const int *archs;
  int n = supported_archs(&archs), exact = n == 0, below = 0, lo = 1 << 30, hi = 0;
  int want_cubin = req->want_cubin || !req->want_ptx;
  for (int i = 0; i < n; i++) {
    exact |= archs[i] == arch;
    if (archs[i] < arch && archs[i] > below) below = archs[i];
    if (archs[i] < lo) lo = archs[i];
    if (archs[i] > hi) hi = archs[i];
  }
  t->cubin = n > 0 && exact && want_cubin && cdv_nvrtc.nvrtcGetCUBIN != NULL;
  if (!exact && !below) {
    int major = 0, minor = 0;
    cdv_nvrtc_version(&major, &minor);
    return cdv_fail(e, "nvrtcCompileProgram", NVRTC_ERROR_INVALID_OPTION, "NVRTC_ERROR_INVALID_OPTION",
                    "NVRTC %d.%d cannot compile for sm_%d (it supports sm_%d to sm_%d)", major, minor, arch, lo, hi);
  }
  snprintf(t->option, sizeof t->option, "--gpu-architecture=%s_%d", t->cubin ? "sm" : "compute", exact ? arch : below);
  return 0;
}

/* The options NVRTC gets: the user's, -I for each include path, then the architecture. */
typedef struct nvrtc_opts {
  const char **v;
  char **inc; /* the "-I..." strings we formatted */
  int n, ninc;
} nvrtc_opts;

static void opts_free(nvrtc_opts *o) {
  for (int i = 0; i < o->ninc; i++) free(o->inc[i]);
  free(o->inc);
  free(o->v);
}

/* NOTE [toolkit includes]: the toolkit's include folder, where cuda_fp16.h and friends live: NVRTC 13 does not
 * search it by itself, and CuPy adds it too. CUDA 13 moved CCCL (cuda/std, cub, thrust, nv) out of it into
 * include/cccl, which cooperative_groups.h, curand_kernel.h and cuda/atomic include from: that folder is added
 * as well whenever it exists (a CUDA 12 toolkit keeps CCCL in include/ and has none). Found once: $CUDA_HOME,
 * $CUDA_PATH, then /usr/local/cuda. Both options are part of the disk cache's key (NOTE [cuda kernel cache]). */
static char toolkit_include[512], toolkit_cccl[520];

static void find_toolkit_include(void) {
  const char *roots[] = {getenv("CUDA_HOME"), getenv("CUDA_PATH"), "/usr/local/cuda"};
  for (size_t i = 0; i < sizeof roots / sizeof roots[0]; i++) {
    char probe[600];
    if (roots[i] == NULL || !*roots[i]) continue;
    snprintf(probe, sizeof probe, "%s/include/cuda_fp16.h", roots[i]);
    if (access(probe, R_OK) == 0) {
      snprintf(toolkit_include, sizeof toolkit_include, "-I%.500s/include", roots[i]);
      snprintf(probe, sizeof probe, "%s/include/cccl/cuda/std", roots[i]);
      if (access(probe, R_OK | X_OK) == 0) snprintf(toolkit_cccl, sizeof toolkit_cccl, "%s/cccl", toolkit_include);
      return;
    }
  }
}

/* The options NVRTC gets for them: which = 0 the include folder, 1 its cccl folder ("" when none). */
const char *cdv_nvrtc_toolkit_include(int which) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, find_toolkit_include);
  return which ? toolkit_cccl : toolkit_include;
}

static int opts_build(const cdv_compile_req *req, const nvrtc_target *t, nvrtc_opts *o, cdv_err *e) {
  const char *tk = cdv_nvrtc_toolkit_include(0), *cccl = cdv_nvrtc_toolkit_include(1);
  memset(o, 0, sizeof *o);
  o->v = calloc((size_t)req->nopts + (size_t)req->nincludes + 3, sizeof *o->v);
  o->inc = calloc((size_t)req->nincludes + 1, sizeof *o->inc);
  if (!o->v || !o->inc) return nvrtc_oom(e, "nvrtcCompileProgram");
  for (int i = 0; i < req->nopts; i++) o->v[o->n++] = req->opts[i];
  for (int i = 0; i < req->nincludes; i++) {
    size_t len = strlen(req->include_paths[i]) + 3;
    if (!(o->inc[o->ninc] = malloc(len))) return nvrtc_oom(e, "nvrtcCompileProgram");
    snprintf(o->inc[o->ninc], len, "-I%s", req->include_paths[i]);
    o->v[o->n++] = o->inc[o->ninc++];
  }
  if (tk[0]) o->v[o->n++] = tk; /* after the caller's: theirs win (NOTE [toolkit includes]) */
  if (cccl[0]) o->v[o->n++] = cccl;
  if (t->option[0]) o->v[o->n++] = t->option;
  return 0;
}

/* The name expression NVRTC gets for entry i: a kernel's as written; a global's address, "&ns::table", as
 * NVRTC wants for variables (NOTE [module globals] in module.c). */
static const char *name_expr(const cdv_compile_req *req, int i, char *buf, size_t n) {
  if (req->is_expr[i] != 2) return req->entries[i];
  snprintf(buf, n, "&%s", req->entries[i]);
  return buf;
}

/* nvrtcCreateProgram with the request's headers and the standard ones (NOTE [nvrtc standard headers]), then
 * nvrtcAddNameExpression for each C++ entry. The source is copied so it is NUL-terminated whatever the
 * caller's buffer is. */
static int program_create(const cdv_compile_req *req, nvrtcProgram *prog, cdv_err *e) {
  const char **names = NULL, **srcs = NULL;
  char *src = malloc(req->source_len + 1);
  int nh = src ? cdv_nvrtc_std_headers(req, &names, &srcs) : -1;
  if (nh < 0) return free(src), nvrtc_oom(e, "nvrtcCreateProgram");
  memcpy(src, req->source, req->source_len);
  src[req->source_len] = '\0';
  int rc = CDV_NVRTC(e, nvrtcCreateProgram, prog, src, req->name ? req->name : "kernel.cu", nh, srcs, names);
  free(src);
  free(names);
  free(srcs);
  for (int i = 0; rc == 0 && i < req->nentries; i++) {
    char expr[512];
    if (req->is_expr && req->is_expr[i])
      rc = CDV_NVRTC(e, nvrtcAddNameExpression, *prog, name_expr(req, i, expr, sizeof expr));
  }
  return rc;
}

/* nvrtcGetProgramLogSize + nvrtcGetProgramLog: the whole log, "" when there is none. */
static char *program_log(nvrtcProgram prog) {
  size_t n = 0;
  char *log = NULL;
  if (cdv_nvrtc.nvrtcGetProgramLogSize && cdv_nvrtc.nvrtcGetProgramLog &&
      cdv_nvrtc.nvrtcGetProgramLogSize(prog, &n) == NVRTC_SUCCESS && n > 1 && (log = malloc(n))) {
    if (cdv_nvrtc.nvrtcGetProgramLog(prog, log) == NVRTC_SUCCESS) {
      log[n - 1] = '\0';
      return log;
    }
    free(log);
  }
  return dup_str("");
}

/* nvrtcGetPTXSize + nvrtcGetPTX (ptx_len excludes the NUL), nvrtcGetCUBINSize + nvrtcGetCUBIN. */
static int fetch_code(nvrtcProgram prog, int cubin, char **buf, size_t *len, cdv_err *e) {
  size_t n = 0;
  int rc = cubin ? CDV_NVRTC(e, nvrtcGetCUBINSize, prog, &n) : CDV_NVRTC(e, nvrtcGetPTXSize, prog, &n);
  if (rc) return -1;
  if (!(*buf = malloc(n + 1))) return nvrtc_oom(e, cubin ? "nvrtcGetCUBIN" : "nvrtcGetPTX");
  rc = cubin ? CDV_NVRTC(e, nvrtcGetCUBIN, prog, *buf) : CDV_NVRTC(e, nvrtcGetPTX, prog, *buf);
  (*buf)[n] = '\0';
  *len = cubin || n == 0 ? n : n - 1;
  return rc;
}

/* nvrtcGetLoweredName for each C++ entry, copied before the program (which owns the strings) is destroyed;
 * an extern "C" entry's symbol is its own name. */
static int fetch_lowered(nvrtcProgram prog, const cdv_compile_req *req, cdv_image *out, cdv_err *e) {
  out->nentries = req->nentries;
  if (req->nentries && !(out->lowered = calloc((size_t)req->nentries, sizeof *out->lowered)))
    return nvrtc_oom(e, "nvrtcGetLoweredName");
  for (int i = 0; i < req->nentries; i++) {
    const char *sym = req->entries[i];
    char expr[512];
    if (req->is_expr && req->is_expr[i] &&
        CDV_NVRTC(e, nvrtcGetLoweredName, prog, name_expr(req, i, expr, sizeof expr), &sym))
      return -1;
    if (!(out->lowered[i] = dup_str(sym))) return nvrtc_oom(e, "nvrtcGetLoweredName");
  }
  return 0;
}

/* A cubin when the target allows one and it was asked for (or nothing was); PTX when asked, or when no cubin
 * came out, so the image can always be loaded. */
static int fetch_outputs(nvrtcProgram prog, const cdv_compile_req *req, const nvrtc_target *t, cdv_image *out,
                         cdv_err *e) {
  int cubin = t->cubin && (req->want_cubin || !req->want_ptx);
  if (cubin && fetch_code(prog, 1, &out->cubin, &out->cubin_len, e)) return -1;
  if ((req->want_ptx || !cubin) && fetch_code(prog, 0, &out->ptx, &out->ptx_len, e)) return -1;
  return fetch_lowered(prog, req, out, e);
}

/* A failed nvrtcCompileProgram: the message names the file, e->log carries the whole log. */
static int compile_failed(cdv_err *e, const cdv_compile_req *req, nvrtcResult r, const char *log) {
  const char *file = req->name ? req->name : "kernel.cu";
  cdv_nvrtc_error(e, "nvrtcCompileProgram", r);
  if (r == NVRTC_ERROR_COMPILATION)
    snprintf(e->message, sizeof e->message, "compilation of %s failed", file);
  else
    snprintf(e->message, sizeof e->message, "compilation of %s failed: %s", file, nvrtc_explain(r));
  e->log = dup_str(log ? log : "");
  return -1;
}

/* nvrtcCompileProgram, then the log (always), the outputs and the lowered names. */
static int program_compile(nvrtcProgram prog, const cdv_compile_req *req, const nvrtc_target *t, const nvrtc_opts *o,
                           cdv_image *out, cdv_err *e) {
  if (!cdv_nvrtc.nvrtcCompileProgram)
    return cdv_sym_missing(e, "nvrtcCompileProgram", "nvrtcCompileProgram", "libnvrtc");
  nvrtcResult r = cdv_nvrtc.nvrtcCompileProgram(prog, o->n, o->v);
  out->log = program_log(prog);
  if (r != NVRTC_SUCCESS) return compile_failed(e, req, r, out->log);
  return fetch_outputs(prog, req, t, out, e);
}

/* Keep only the log of a failed compile: the caller frees out with cdv_image_free either way. */
static void keep_log_only(cdv_image *out) {
  char *log = out->log;
  out->log = NULL;
  cdv_image_free(out);
  out->log = log ? log : dup_str("");
}

/* The architecture option: the user's own when given, else from req->arch, else d's architecture. */
static int choose_target(const cdv_device *d, const cdv_compile_req *req, nvrtc_target *t, cdv_err *e) {
  int arch = req->arch ? req->arch : d ? d->arch : 0, is_sm = 0;
  if (user_arch(req, &is_sm)) {
    t->cubin = is_sm && cdv_nvrtc.nvrtcGetCUBIN != NULL;
    return 0;
  }
  if (arch <= 0)
    return cdv_fail(e, "nvrtcCompileProgram", NVRTC_ERROR_INVALID_OPTION, "NVRTC_ERROR_INVALID_OPTION",
                    "no target architecture: give arch or a device");
  return pick_target(req, arch, t, e);
}

/* Compile req with NVRTC for req->arch, else d's architecture; d may be NULL (no GPU needed). Fills out
 * (ptx/cubin as asked, lowered names, log). On failure out holds the log alone; free it either way. */
/* The default target (want_cubin < 0): cubin when NVRTC can emit one for the arch, else PTX. Asks NVRTC,
 * which loads it: NOTE [cuda kernel cache] calls this only after the disk missed. NULL, or why not. */
static const char *resolve_target(cdv_compile_req *req, char *msg, size_t n) {
  int cub = cdv_cubin_supported(req->arch);
  if (req->want_cubin == 1 && !cub) {
    snprintf(msg, n, "bad option 'target' to 'compile' (NVRTC cannot emit cubin for sm_%d; use target = \"ptx\")",
             req->arch);
    return msg;
  }
  if (req->want_cubin < 0) {
    req->want_cubin = cub;
    req->want_ptx = !cub;
  }
  return NULL;
}

/* (see NOTE [cuda kernel cache]) the compile operation asks the disk (cuda_cache.c) before NVRTC, and stores what
 * NVRTC made; -2 with e->message when the target asked for cannot be had (module.c says it as a bad option). */

static int cuda_compile(cdv_device *d, const cdv_compile_req *req, cdv_image *out, cdv_err *e) {
  cdv_cuda_entry ce;
  char msg[160];
  cdv_compile_req r = *req;
  if (r.arch <= 0 && d != NULL) r.arch = d->arch; /* no arch given: the device's, for the key and the target */
  int keyed = cdv_cuda_cache_key(&r, &ce) == 0;
  if (keyed && cdv_cuda_cache_get(&ce, &r, out) == 0) return 0;
  if (resolve_target(&r, msg, sizeof msg)) {
    cdv_fail(e, "compile", 0, "", "%s", msg);
    return -2;
  }
  int rc = cdv_cuda_compile_uncached(d, &r, out, e);
  if (rc == 0 && keyed) cdv_cuda_cache_put(&ce, &r, out); /* a failed compile is never stored */
  return rc;
}

int cdv_cuda_compile_uncached(cdv_device *d, const cdv_compile_req *req, cdv_image *out, cdv_err *e) {
  nvrtc_target t = {"", 0};
  nvrtc_opts o = {NULL, NULL, 0, 0};
  nvrtcProgram prog = NULL;
  memset(out, 0, sizeof *out);
  int rc = cdv_nvrtc_load() != 0 ? cdv_nvrtc_unavailable(e) : choose_target(d, req, &t, e);
  if (rc == 0) rc = opts_build(req, &t, &o, e);
  if (rc == 0) rc = program_create(req, &prog, e);
  if (rc == 0) rc = program_compile(prog, req, &t, &o, out, e);
  if (prog) cdv_nvrtc.nvrtcDestroyProgram(&prog);
  opts_free(&o);
  if (rc) keep_log_only(out);
  return rc;
}

/* nvrtcVersion */
int cdv_nvrtc_version(int *major, int *minor) {
  cdv_err e;
  *major = *minor = 0;
  if (cdv_nvrtc_load() != 0) return -1;
  return CDV_NVRTC(&e, nvrtcVersion, major, minor);
}

/* ---------------------------------------------------------------- modules and kernels */
/* Put a JIT log after the driver's explanation, and keep the whole of it in e->log. */
static void attach_jit_log(cdv_err *e, const char *log) {
  if (!log[0]) return;
  size_t len = strlen(e->message);
  snprintf(e->message + len, sizeof e->message - len, ": %s", log);
  e->log = dup_str(log);
}

/* cuModuleLoadDataEx with an error-log buffer, so a JIT failure says why. */
static int load_image(const void *image, CUmodule *m, cdv_err *e) {
  char log[8192] = "";
  CUjit_option keys[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *vals[2] = {log, (void *)(uintptr_t)sizeof log};
  if (CDV_CU(e, cuModuleLoadDataEx, m, image, 2, keys, vals) == 0) return 0;
  log[sizeof log - 1] = '\0';
  attach_jit_log(e, log);
  return -1;
}

/* The cubin when there is one; its PTX when that cubin is for another GPU (or there is no cubin). */
static int cuda_module_load(cdv_device *d, const cdv_image *img, void **mod, cdv_err *e) {
  CUmodule m = NULL;
  if (cuda_activate(d, e)) return -1;
  if (!img->cubin && !img->ptx)
    return cdv_fail(e, "cuModuleLoadDataEx", CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE",
                    "the image has neither cubin nor PTX");
  int rc = load_image(img->cubin ? (const void *)img->cubin : (const void *)img->ptx, &m, e);
  int other_gpu = rc && (e->code == CUDA_ERROR_NO_BINARY_FOR_GPU || e->code == CUDA_ERROR_INVALID_IMAGE);
  if (other_gpu && img->cubin && img->ptx) {
    free(e->log);
    rc = load_image(img->ptx, &m, e);
  }
  if (rc == 0) *mod = m;
  return rc;
}

/* cuModuleUnload */
static int cuda_module_unload(cdv_device *d, void *mod, cdv_err *e) {
  return cuda_activate(d, e) ? -1 : CDV_CU(e, cuModuleUnload, (CUmodule)mod);
}

/* cuModuleGetFunction; the message names the symbol that was not found. */
static int cuda_module_function(cdv_device *d, void *mod, const char *symbol, void **fn, cdv_err *e) {
  CUfunction f = NULL;
  if (cuda_activate(d, e)) return -1;
  if (CDV_CU(e, cuModuleGetFunction, &f, (CUmodule)mod, symbol)) {
    size_t len = strlen(e->message);
    snprintf(e->message + len, sizeof e->message - len, " ('%s')", symbol);
    return -1;
  }
  *fn = f;
  return 0;
}

/* cuModuleGetGlobal: a __constant__ / __device__ variable's address and size (NOTE [module globals]). */
static int cuda_module_global(cdv_device *d, void *mod, const char *symbol, void **ptr, size_t *bytes, cdv_err *e) {
  CUdeviceptr p = 0;
  size_t n = 0;
  if (cuda_activate(d, e)) return -1;
  if (CDV_CU(e, cuModuleGetGlobal, &p, &n, (CUmodule)mod, symbol)) {
    size_t len = strlen(e->message);
    snprintf(e->message + len, sizeof e->message - len, " ('%s')", symbol);
    return -1;
  }
  *ptr = (void *)(uintptr_t)p;
  *bytes = n;
  return 0;
}

/* cuFuncGetAttribute for registers, block limit and the static memory sizes. */
static int cuda_func_info(cdv_device *d, void *fn, cdv_func_info *out, cdv_err *e) {
  static const CUfunction_attribute attrs[5] = {
      CU_FUNC_ATTRIBUTE_NUM_REGS,         CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
      CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES,
  };
  int v[5];
  if (cuda_activate(d, e)) return -1;
  for (int i = 0; i < 5; i++)
    if (CDV_CU(e, cuFuncGetAttribute, &v[i], attrs[i], (CUfunction)fn)) return -1;
  out->num_regs = v[0];
  out->max_threads_per_block = v[1];
  out->shared_size_bytes = (size_t)v[2];
  out->const_size_bytes = (size_t)v[3];
  out->local_size_bytes = (size_t)v[4];
  return 0;
}

/* cuFuncGetParamInfo (driver 12.4+); 1 when the driver cannot say or i is past the last parameter, so the
 * caller falls back to parsing the signature, or knows the count. */
static int cuda_param_info(cdv_device *d, void *fn, int i, size_t *offset, size_t *size) {
  cdv_err e;
  if (i < 0 || cuda_activate(d, &e) || !CDV_HAVE_CU(cuFuncGetParamInfo)) return 1;
  return cdv_cu.cuFuncGetParamInfo((CUfunction)fn, (size_t)i, offset, size) == CUDA_SUCCESS ? 0 : 1;
}

/* cuOccupancyMaxActiveBlocksPerMultiprocessor */
static int cuda_occupancy(cdv_device *d, void *fn, int block, size_t shared, int *blocks_per_sm, cdv_err *e) {
  return cuda_activate(d, e)
             ? -1
             : CDV_CU(e, cuOccupancyMaxActiveBlocksPerMultiprocessor, blocks_per_sm, (CUfunction)fn, block, shared);
}

/* cuLaunchKernel with the arguments as an array of pointers to each value (no `extra`). */
static int cuda_launch(cdv_device *d, void *fn, const unsigned grid[3], const unsigned block[3], unsigned shared,
                       void *stream, void **args, const cdv_launch_opts *opts, cdv_err *e) {
  (void)opts; /* NOTE [launch limits] */
  return cuda_activate(d, e) ? -1
                             : CDV_CU(e, cuLaunchKernel, (CUfunction)fn, grid[0], grid[1], grid[2], block[0], block[1],
                                      block[2], shared, (CUstream)stream, args, NULL);
}

/* cuLaunchCooperativeKernel: every block resident at once (NOTE [cooperative launch] in cdv.h) */
static int cuda_launch_cooperative(cdv_device *d, void *fn, const unsigned grid[3], const unsigned block[3],
                                   unsigned shared, void *stream, void **args, const cdv_launch_opts *opts,
                                   cdv_err *e) {
  (void)opts; /* NOTE [launch limits] */
  return cuda_activate(d, e) ? -1
                             : CDV_CU(e, cuLaunchCooperativeKernel, (CUfunction)fn, grid[0], grid[1], grid[2], block[0],
                                      block[1], block[2], shared, (CUstream)stream, args);
}

/* CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, then cuOccupancyMaxActiveBlocksPerMultiprocessor per SM */
static int cuda_coop_limit(cdv_device *d, void *fn, int block, size_t shared, int *per_sm, int *sms, cdv_err *e) {
  int ok = 0;
  if (cdv_cuda_attribute(d, CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, &ok, e)) return -1;
  if (!ok)
    return cdv_fail(e, "cuLaunchCooperativeKernel", CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED",
                    "%s cannot launch cooperative kernels (CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH is 0)", d->alias);
  *sms = d->sm_count;
  return cuda_occupancy(d, fn, block, shared, per_sm, e);
}

/* NOTE [big shared memory] in cdv.h: cuFuncGetAttribute, and cuFuncSetAttribute only to raise the limit */
static int cuda_allow_shared(cdv_device *d, void *fn, size_t bytes, size_t *allowed, cdv_err *e) {
  int cur = 0;
  if (cuda_activate(d, e) ||
      CDV_CU(e, cuFuncGetAttribute, &cur, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (CUfunction)fn))
    return -1;
  if ((size_t)cur < bytes) {
    if (CDV_CU(e, cuFuncSetAttribute, (CUfunction)fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)bytes))
      return -1;
    cur = (int)bytes;
  }
  *allowed = (size_t)cur;
  return 0;
}

/* ---------------------------------------------------------------- pinned host memory */
static CUcontext any_ctx;
static pthread_once_t any_once = PTHREAD_ONCE_INIT;
static CUresult any_result = CUDA_ERROR_NOT_INITIALIZED;

static void any_retain(void) {
  any_result = cdv_cu.cuDevicePrimaryCtxRetain ? cdv_cu.cuDevicePrimaryCtxRetain(&any_ctx, 0) : CUDA_ERROR_NOT_FOUND;
}

/* Pinned memory (cuMemHostAlloc, cuMemHostRegister and their frees) needs a current context, and the cpu
 * backend has none: device 0's primary context is pushed for the call unless it is current already (retained
 * once, for the process, the same one cuda:0 uses). With PORTABLE, every context can use the memory; its
 * lifetime is that context's, which is why it is never another (NOTE [adopted contexts]). */
static int push_any(int *pushed, cdv_err *e) {
  CUcontext cur = NULL;
  *pushed = 0;
  if (CDV_CU(e, cuCtxGetCurrent, &cur)) return -1;
  pthread_once(&any_once, any_retain);
  if (any_result != CUDA_SUCCESS) /* device 0 cannot be had (busy, exclusive): the current context, if any */
    return cur ? 0 : cdv_cu_error(e, "cuDevicePrimaryCtxRetain", any_result);
  if (cur == any_ctx) return 0;
  if (CDV_CU(e, cuCtxPushCurrent, any_ctx)) return -1;
  *pushed = 1;
  return 0;
}

static void pop_any(int pushed) {
  CUcontext c;
  if (pushed && cdv_cu.cuCtxPopCurrent) cdv_cu.cuCtxPopCurrent(&c);
}

/* cuMemHostRegister(PORTABLE): page-locks memory the cpu backend mapped, for every context. */
int cdv_cuda_host_register(void *p, size_t n, cdv_err *e) {
  int pushed;
  if (cdv_cuda_load() != 0) return cdv_cuda_unavailable(e);
  if (push_any(&pushed, e)) return -1;
  int rc = CDV_CU(e, cuMemHostRegister, p, n, CU_MEMHOSTREGISTER_PORTABLE);
  pop_any(pushed);
  return rc;
}

/* cuMemHostUnregister; never raises: the caller is freeing, and has nothing better to do with an error. */
int cdv_cuda_host_unregister(void *p) {
  cdv_err e;
  int pushed;
  if (cdv_cuda_load() != 0 || push_any(&pushed, &e)) return -1;
  int rc = CDV_CU(&e, cuMemHostUnregister, p);
  pop_any(pushed);
  return rc;
}

/* ---------------------------------------------------------------- device description */
/* cuDeviceGetCount: the CUDA devices the registry (device.c) lists; 0 without a driver */
int cdv_cuda_device_count(void) {
  int n = 0;
  if (cdv_cuda_load() != 0 || cdv_cu.cuDeviceGetCount(&n) != CUDA_SUCCESS) return 0;
  return n;
}

/* cuCtxGetCurrent: the context current on this thread, NULL when none (or no driver) */
void *cdv_cuda_current_context(void) {
  CUcontext ctx = NULL;
  if (cdv_cuda_load() != 0 || cdv_cu.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS) return NULL;
  return ctx;
}

void cdv_cuda_set_current_context(void *ctx) {
  if (ctx != NULL && cdv_cu.cuCtxSetCurrent != NULL) cdv_cu.cuCtxSetCurrent((CUcontext)ctx);
}

/* cuDeviceGetAttribute */
int cdv_cuda_attribute(cdv_device *d, int attr, int *value, cdv_err *e) {
  if (cdv_cuda_load() != 0) return cdv_cuda_unavailable(e);
  return CDV_CU(e, cuDeviceGetAttribute, value, (CUdevice_attribute)attr, (CUdevice)d->handle);
}

/* cuDeviceGetAttribute for everything the registry shows: architecture, limits, UVA, memory pools. */
static int fill_limits(cdv_device *d, cdv_err *e) {
  int major = 0, minor = 0, shared = 0, optin = 0;
  const struct {
    CUdevice_attribute a;
    int *v;
  } t[] = {
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &major},
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &minor},
      {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &d->sm_count},
      {CU_DEVICE_ATTRIBUTE_WARP_SIZE, &d->warp_size},
      {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &d->max_threads_per_block},
      {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, &d->max_block[0]},
      {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, &d->max_block[1]},
      {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, &d->max_block[2]},
      {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, &d->max_grid[0]},
      {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, &d->max_grid[1]},
      {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, &d->max_grid[2]},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, &shared},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, &optin},
      {CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, &d->is_uva},
      {CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, &d->is_mempool_supported},
  };
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
    if (CDV_CU(e, cuDeviceGetAttribute, t[i].v, t[i].a, (CUdevice)d->handle)) return -1;
  d->arch = major * 10 + minor;
  d->max_shared_per_block = (size_t)shared;
  d->max_shared_optin = (size_t)optin;
  return 0;
}

/* cuDeviceGetUuid, formatted as nvidia-smi does: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx. */
static int fill_uuid(cdv_device *d, cdv_err *e) {
  CUuuid u;
  if (CDV_CU(e, cuDeviceGetUuid, &u, (CUdevice)d->handle)) return -1;
  const unsigned char *b = (const unsigned char *)u.bytes;
  snprintf(d->uuid, sizeof d->uuid, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
           b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  return 0;
}

/* cuDeviceGet, cuDeviceGetName, cuDeviceTotalMem, cuDeviceGetPCIBusId and the attributes: all without a
 * context, which would cost hundreds of MiB and tens of milliseconds per device just to list it. */
int cdv_cuda_fill_device(cdv_device *d, int ordinal, cdv_err *e) {
  CUdevice dev;
  size_t total = 0;
  if (cdv_cuda_load() != 0) return cdv_cuda_unavailable(e);
  if (CDV_CU(e, cuDeviceGet, &dev, ordinal)) return -1;
  d->be = &cdv_backend_cuda;
  d->ordinal = ordinal;
  d->handle = (int)dev;
  d->is_primary = 1;
  snprintf(d->alias, sizeof d->alias, "cuda:%d", ordinal);
  if (CDV_CU(e, cuDeviceGetName, d->name, (int)sizeof d->name, dev)) return -1;
  if (fill_limits(d, e) || fill_uuid(d, e)) return -1;
  if (CDV_CU(e, cuDeviceTotalMem, &total, dev)) return -1;
  d->total_memory = total;
  return CDV_CU(e, cuDeviceGetPCIBusId, d->pci_bus_id, (int)sizeof d->pci_bus_id, dev);
}

/* cuDriverGetVersion (12080 for 12.8); it needs no cuInit, so a driver that failed to initialise still says. */
int cdv_cuda_driver_version(void) {
  int v = 0;
  cdv_cuda_load();
  if (!CDV_HAVE_CU(cuDriverGetVersion) || cdv_cu.cuDriverGetVersion(&v) != CUDA_SUCCESS) return 0;
  return v;
}

/* ---------------------------------------------------------------- the backend */
const cdv_backend cdv_backend_cuda = {
    .kind = "cuda",
    .reset_frees = 1,
    .has_contexts = 1,
    .stage_pageable = 1,
    .activate = cuda_activate,
    .synchronize = cuda_synchronize,
    .mem_info = cuda_mem_info,
    .mem_alloc = cuda_mem_alloc,
    .mem_free = cuda_mem_free,
    .memcpy = cuda_memcpy,
    .memset = cuda_memset,
    .stream_create = cuda_stream_create,
    .stream_destroy = cuda_stream_destroy,
    .stream_synchronize = cuda_stream_synchronize,
    .stream_query = cuda_stream_query,
    .stream_wait_event = cuda_stream_wait_event,
    .stream_priority_range = cuda_stream_priority_range,
    .event_create = cuda_event_create,
    .event_destroy = cuda_event_destroy,
    .event_record = cuda_event_record,
    .event_query = cuda_event_query,
    .event_synchronize = cuda_event_synchronize,
    .event_elapsed = cuda_event_elapsed,
    .compile = cuda_compile,
    .module_load = cuda_module_load,
    .module_unload = cuda_module_unload,
    .module_function = cuda_module_function,
    .module_global = cuda_module_global,
    .func_info = cuda_func_info,
    .param_info = cuda_param_info,
    .occupancy = cuda_occupancy,
    .launch = cuda_launch,
    .launch_cooperative = cuda_launch_cooperative,
    .coop_limit = cuda_coop_limit,
    .allow_shared = cuda_allow_shared,
    /* (see NOTE [optional operations]) backend_cuda_optional.c */
    .peer_supported = cdv_cuda_peer_supported,
    .peer_set = cdv_cuda_peer_set,
    .mempool_access_get = cdv_cuda_mempool_access_get,
    .mempool_access_set = cdv_cuda_mempool_access_set,
    .capture_begin = cdv_cuda_capture_begin,
    .capture_end = cdv_cuda_capture_end,
    .graph_launch = cdv_cuda_graph_launch,
    .graph_destroy = cdv_cuda_graph_destroy,
    .pool_reserved = cdv_cuda_pool_reserved,
    .pool_trim = cdv_cuda_pool_trim,
    .attribute = cdv_cuda_attribute,
    .sm_resources = cdv_cuda_sm_resources,
    .reset = cdv_cuda_reset,
    .profiler = cdv_cuda_profiler,
    .stream_of = cdv_cuda_stream_of,
    /* backend_cuda_ipc.c */
    .host_func = cdv_cuda_host_func,
    .ipc_alloc = cdv_cuda_ipc_alloc,
    .ipc_free = cdv_cuda_ipc_free,
    .ipc_mem_get = cdv_cuda_ipc_mem_get,
    .ipc_mem_open = cdv_cuda_ipc_mem_open,
    .ipc_mem_close = cdv_cuda_ipc_mem_close,
    .ipc_event_create = cdv_cuda_ipc_event_create,
    .ipc_event_get = cdv_cuda_ipc_event_get,
    .ipc_event_open = cdv_cuda_ipc_event_open,
    .mem_prefetch = cdv_cuda_mem_prefetch,
    .mem_advise = cdv_cuda_mem_advise,
};
