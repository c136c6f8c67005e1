/*
 * backend_cuda_granules.c: device memory of up to GRANULE_LIMIT bytes in segments of cudadev's own, granule by
 * granule (NOTE [granules]), in front of the driver's stream-ordered pool (NOTE [caching pool] in backend_cuda.c).
 * The caller made the device's context current. Like backend_cuda.c, nothing here touches a lua_State.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "syms.h"

/* NOTE [granules]: the driver's stream-ordered pool reserves device memory in chunks of its own choosing: on an
 * H200 (driver 580) 32 MiB at the first 4 KiB allocation, so `c = a + b` in a loop over arrays of 4 KiB to 4 MiB
 * held 2.7 to 2731 times the live bytes (issue 28); a pool made with cuMemPoolCreate did the same. PyTorch's
 * allocator takes 2 MiB blocks for small tensors and rounds larger ones up to 2 MiB. So allocations of up to
 * GRANULE_LIMIT bytes come from segments made with the virtual memory calls (cuMemCreate, cuMemAddressReserve,
 * cuMemMap, cuMemSetAccess), whose size is a multiple of the device's granule (2 MiB, the smallest physical
 * allocation there is):
 * - up to half a granule, a power-of-two class of at least 512 bytes, carved out of a one-granule segment of
 *   that class (a slab, handed out front to back); larger, a segment of its own rounded up to granules;
 * - a freed block keeps the stream it was freed on and an event recorded there, after the work that used it:
 *   an allocation on that stream takes it back at once, as the pool does; one on another stream once the event
 *   has completed. A free on a capturing stream records no event: that stream alone reuses the block (and a
 *   trim after a synchronisation gives it back);
 * - the segments none of whose blocks is in use, and whose blocks' frees have run (their events), go back to the
 *   driver on cd.empty_cache (after the device's synchronisation, memory.c) and when cuMemCreate or the pool runs
 *   out. Events even after a synchronisation: another thread may have freed a block since, and cuMemUnmap does
 *   not wait for queued work;
 * - the device itself reads and writes them, and so does each device its pool lets in (cuMemPoolGetAccess when a
 *   segment is made; cuMemSetAccess on every segment when cd.set_mempool_access_enabled changes it);
 * - only for primary contexts of devices with memory pools and virtual memory management, and never for a
 *   capturing stream (a graph's allocations stay the pool's graph memory); a mapped context keeps the pool;
 * - a thread capturing a stream (cd.capture) may allocate on other streams: the calls here that a capture forbids
 *   (cuEventQuery invalidated the capture on an H200) run with the thread's capture mode relaxed, as PyTorch's
 *   allocator relaxes it around cudaMalloc.
 * memory.c's `reserved` adds the segments' bytes to the pool's. Everything is per CUdevice behind its mutex:
 * several lua_States may allocate on one device from several threads. */
#define GRANULE_LIMIT ((size_t)32 << 20) /* the pool's chunk: larger allocations waste less there */
#define CLASS_MIN_LOG2 9
#define NCLASS 12 /* 512 bytes to 1 MiB */
#define MAXDEV CDV_CUDA_MAXDEV
#define SCAN 64 /* freed blocks an allocation looks at (the lock is held) */
#define QUERIES 8 /* events it asks about before it takes fresh memory */
#define GONE ((void *)(intptr_t)-1) /* the stream of a block freed on a stream since destroyed */

typedef struct segment {
  CUdeviceptr base;
  size_t size;
  CUmemGenericAllocationHandle h;
  int cls; /* the slab's class, -1: one block of its own */
  unsigned slots, fresh, used; /* blocks it holds, the first never handed out, those in use */
  int keep; /* trim's mark */
} segment;

typedef struct freed {
  CUdeviceptr ptr;
  segment *seg;
  void *stream;
  CUevent ev; /* NULL: freed while the stream was capturing, or the record failed */
  struct freed *next;
} freed;

typedef struct gpool {
  pthread_mutex_t lock;
  int state; /* 0: not yet asked, 1: on, -1: off (read without the lock: atomic) */
  int top; /* the largest class that has one (classes are 2^(CLASS_MIN_LOG2 + cls) bytes) */
  size_t granule;
  segment **segs; /* sorted by base */
  int nsegs, capsegs;
  segment *current[NCLASS]; /* the slab of each class that has fresh blocks */
  freed *lists[NCLASS + 1]; /* the last one: blocks of their own */
  CUevent *events; /* spare */
  int nevents, capevents;
  uint64_t reserved;
} gpool;

static gpool *pools[MAXDEV]; /* by CUdevice, made at first use, kept for the process */
static pthread_mutex_t pools_lock = PTHREAD_MUTEX_INITIALIZER;

static gpool *pool_existing(int handle) {
  return handle >= 0 && handle < MAXDEV ? __atomic_load_n(&pools[handle], __ATOMIC_ACQUIRE) : NULL;
}

static gpool *pool_of(int handle) {
  gpool *p = pool_existing(handle);
  if (p != NULL || handle < 0 || handle >= MAXDEV) return p;
  pthread_mutex_lock(&pools_lock);
  if ((p = pools[handle]) == NULL && (p = calloc(1, sizeof *p)) != NULL) {
    pthread_mutex_init(&p->lock, NULL);
    __atomic_store_n(&pools[handle], p, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&pools_lock);
  return p;
}

static int pool_state(gpool *p) { return __atomic_load_n(&p->state, __ATOMIC_RELAXED); }

/* Locks p and relaxes the thread's capture mode (NOTE [granules]); unlock restores it. */
static CUstreamCaptureMode lock(gpool *p) {
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  if (CDV_HAVE_CU(cuThreadExchangeStreamCaptureMode)) cdv_cu.cuThreadExchangeStreamCaptureMode(&mode);
  pthread_mutex_lock(&p->lock);
  return mode;
}

static void unlock(gpool *p, CUstreamCaptureMode mode) {
  pthread_mutex_unlock(&p->lock);
  if (CDV_HAVE_CU(cuThreadExchangeStreamCaptureMode)) cdv_cu.cuThreadExchangeStreamCaptureMode(&mode);
}

static int no_host_memory(cdv_err *e, const char *what) {
  return cdv_fail(e, "cuda.granules", 12, "ENOMEM", "not enough host memory for %s", what);
}

static CUmemAllocationProp device_prop(int handle) {
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = handle;
  return prop;
}

static int have_vmm(void) {
  return CDV_HAVE_CU(cuMemCreate) && CDV_HAVE_CU(cuMemRelease) && CDV_HAVE_CU(cuMemAddressReserve) &&
         CDV_HAVE_CU(cuMemAddressFree) && CDV_HAVE_CU(cuMemMap) && CDV_HAVE_CU(cuMemUnmap) &&
         CDV_HAVE_CU(cuMemSetAccess) && CDV_HAVE_CU(cuMemGetAllocationGranularity) && CDV_HAVE_CU(cuEventQuery) &&
         CDV_HAVE_CU(cuMemPoolGetAccess) && CDV_HAVE_CU(cuDeviceGetDefaultMemPool);
}

/* Whether the device takes granules: asked once (the lock held). A granule that is not a power of two from 4 KiB to
 * 2^(CLASS_MIN_LOG2 + NCLASS) bytes does not fit the classes: then the pool keeps everything. */
static int enabled(cdv_device *d, gpool *p) {
  if (p->state != 0) return p->state > 0;
  int vmm = 0;
  size_t g = 0;
  CUmemAllocationProp prop = device_prop(d->handle);
  cdv_err e;
  __atomic_store_n(&p->state, -1, __ATOMIC_RELAXED);
  if (!have_vmm() ||
      CDV_CU(&e, cuDeviceGetAttribute, &vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
             (CUdevice)d->handle) ||
      !vmm || CDV_CU(&e, cuMemGetAllocationGranularity, &g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM))
    return 0;
  if (g < 4096 || (g & (g - 1)) != 0 || g > (size_t)1 << (CLASS_MIN_LOG2 + NCLASS)) return 0;
  p->granule = g;
  p->top = 63 - __builtin_clzll((unsigned long long)g) - 1 - CLASS_MIN_LOG2;
  __atomic_store_n(&p->state, 1, __ATOMIC_RELAXED);
  return 1;
}

/* ------------------------------------------------------------ segments */

/* The device and every device its default pool lets in (cuMemPoolGetAccess) may read and write [va, va + size). */
static int set_access(int handle, CUdeviceptr va, size_t size, cdv_err *e) {
  CUmemAccessDesc desc[MAXDEV];
  CUmemoryPool pool;
  int count = 0;
  size_t n = 0;
  if (CDV_CU(e, cuDeviceGetCount, &count) || CDV_CU(e, cuDeviceGetDefaultMemPool, &pool, (CUdevice)handle)) return -1;
  for (int i = 0; i < count && i < MAXDEV; i++) {
    CUmemAccess_flags flags = CU_MEM_ACCESS_FLAGS_PROT_NONE;
    CUmemLocation loc = {CU_MEM_LOCATION_TYPE_DEVICE, i};
    if (i != handle &&
        (cdv_cu.cuMemPoolGetAccess(&flags, pool, &loc) != CUDA_SUCCESS || flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE))
      continue;
    desc[n++] = cdv_cuda_access_desc(i, 1);
  }
  return CDV_CU(e, cuMemSetAccess, va, size, desc, n);
}

/* Undoes the first `made` steps of making a segment (1: cuMemCreate, 2: cuMemAddressReserve, 3: cuMemMap), the
 * last first, and frees it; the first failure is the one reported. */
static int segment_undo(segment *s, int made, cdv_err *e) {
  cdv_err later;
  int rc = 0;
  if (made >= 3 && CDV_CU(e, cuMemUnmap, s->base, s->size)) rc = -1;
  if (made >= 2 && CDV_CU(rc ? &later : e, cuMemAddressFree, s->base, s->size)) rc = -1;
  if (made >= 1 && CDV_CU(rc ? &later : e, cuMemRelease, s->h)) rc = -1;
  free(s);
  return rc;
}

/* The index of the first segment whose base is above va. */
static int upper_bound(const gpool *p, CUdeviceptr va) {
  int lo = 0, hi = p->nsegs;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (p->segs[mid]->base <= va)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static segment *segment_of(const gpool *p, CUdeviceptr va) {
  int i = upper_bound(p, va) - 1;
  return i >= 0 && va - p->segs[i]->base < p->segs[i]->size ? p->segs[i] : NULL;
}

static int insert(gpool *p, segment *s, cdv_err *e) {
  if (p->nsegs == p->capsegs) {
    int cap = p->capsegs ? 2 * p->capsegs : 16;
    segment **g = realloc(p->segs, sizeof *g * (size_t)cap);
    if (g == NULL) return no_host_memory(e, "a segment");
    p->segs = g, p->capsegs = cap;
  }
  int i = upper_bound(p, s->base);
  memmove(&p->segs[i + 1], &p->segs[i], sizeof *p->segs * (size_t)(p->nsegs++ - i));
  p->segs[i] = s;
  return 0;
}

/* A new mapped segment of `size` bytes for class cls (-1: one block). */
static segment *segment_new(cdv_device *d, gpool *p, size_t size, int cls, cdv_err *e) {
  segment *s = calloc(1, sizeof *s);
  CUmemAllocationProp prop = device_prop(d->handle);
  cdv_err later;
  int made = 0;
  if (s == NULL) {
    no_host_memory(e, "a segment");
    return NULL;
  }
  s->size = size, s->cls = cls, s->slots = cls >= 0 ? (unsigned)(size >> (CLASS_MIN_LOG2 + cls)) : 1;
  if (CDV_CU(e, cuMemCreate, &s->h, size, &prop, 0) ||
      (made = 1, CDV_CU(e, cuMemAddressReserve, &s->base, size, p->granule, 0, 0)) ||
      (made = 2, CDV_CU(e, cuMemMap, s->base, size, 0, s->h, 0)) ||
      (made = 3, set_access(d->handle, s->base, size, e)) || insert(p, s, e)) {
    segment_undo(s, made, &later);
    return NULL;
  }
  p->reserved += size;
  return s;
}

/* ------------------------------------------------------------ events */

static int event_take(gpool *p, CUevent *ev, cdv_err *e) {
  if (p->nevents > 0) {
    *ev = p->events[--p->nevents];
    return 0;
  }
  return CDV_CU(e, cuEventCreate, ev, CU_EVENT_DISABLE_TIMING);
}

static void event_put(gpool *p, CUevent ev) {
  if (ev == NULL) return;
  if (p->nevents == p->capevents) {
    int cap = p->capevents ? 2 * p->capevents : 64;
    CUevent *g = realloc(p->events, sizeof *g * (size_t)cap);
    if (g == NULL) {
      cdv_cu.cuEventDestroy(ev);
      return;
    }
    p->events = g, p->capevents = cap;
  }
  p->events[p->nevents++] = ev;
}

/* The work before the free has run (a free without an event never says so). */
static int done(const freed *f) { return f->ev != NULL && cdv_cu.cuEventQuery(f->ev) == CUDA_SUCCESS; }

/* ------------------------------------------------------------ giving back */

/* Drops the freed blocks of the segments not marked keep; their events go back to the spares unless they died
 * with their context. */
static void drop_freed(gpool *p, int events_live) {
  for (int l = 0; l <= NCLASS; l++) {
    for (freed **q = &p->lists[l]; *q != NULL;) {
      freed *f = *q;
      if (f->seg->keep) {
        q = &f->next;
        continue;
      }
      *q = f->next;
      if (events_live) event_put(p, f->ev);
      free(f);
    }
  }
}

/* Gives back the segments none of whose blocks is in use or was freed by work still queued (their events); a block
 * freed without an event counts as done when `synced` (the caller synchronised the device). The first failure is
 * the one reported. */
static int trim(gpool *p, int synced, cdv_err *e) {
  for (int i = 0; i < p->nsegs; i++) p->segs[i]->keep = p->segs[i]->used > 0;
  for (int l = 0; l <= NCLASS; l++)
    for (freed *f = p->lists[l]; f != NULL; f = f->next)
      if (!f->seg->keep && (f->ev != NULL ? !done(f) : !synced)) f->seg->keep = 1;
  drop_freed(p, 1);
  int rc = 0, n = 0;
  for (int i = 0; i < p->nsegs; i++) {
    segment *s = p->segs[i];
    cdv_err later;
    if (s->keep) {
      p->segs[n++] = s;
      continue;
    }
    if (s->cls >= 0 && p->current[s->cls] == s) p->current[s->cls] = NULL;
    p->reserved -= s->size;
    if (segment_undo(s, 3, rc ? &later : e)) rc = -1;
  }
  p->nsegs = n;
  return rc;
}

/* ------------------------------------------------------------ allocation */

/* The class of `bytes` (> 0), -1 for a block of its own. */
static int class_of(const gpool *p, size_t bytes) {
  if (bytes <= (size_t)1 << CLASS_MIN_LOG2) return 0;
  int cls = 64 - __builtin_clzll((unsigned long long)(bytes - 1)) - CLASS_MIN_LOG2;
  return cls <= p->top ? cls : -1;
}

/* A freed block of the list (of `size` bytes when a block of its own) that the stream may take: one freed on it,
 * else one whose free has run (looking at SCAN blocks and asking about QUERIES events at most). */
static freed **reusable(freed **list, size_t size, void *stream) {
  freed **ready = NULL;
  int asked = 0, seen = 0;
  for (freed **q = list; *q != NULL && seen < SCAN; q = &(*q)->next, seen++) {
    if (size != 0 && (*q)->seg->size != size) continue;
    if ((*q)->stream == stream) return q;
    if (ready == NULL && asked < QUERIES && (*q)->ev != NULL) {
      asked++;
      if (done(*q)) ready = q;
    }
  }
  return ready;
}

/* A new segment; when the device is out of memory, the idle segments and the pool's cache go back first. */
static segment *grow(cdv_device *d, gpool *p, size_t size, int cls, cdv_err *e) {
  segment *s = segment_new(d, p, size, cls, e);
  if (s != NULL || e->code != CUDA_ERROR_OUT_OF_MEMORY) return s;
  cdv_err ignored;
  CUmemoryPool pool;
  trim(p, 0, &ignored);
  if (cdv_cu.cuDeviceGetDefaultMemPool(&pool, (CUdevice)d->handle) == CUDA_SUCCESS) cdv_cu.cuMemPoolTrimTo(pool, 0);
  return segment_new(d, p, size, cls, e);
}

static int take(cdv_device *d, gpool *p, size_t bytes, void *stream, void **ptr, cdv_err *e) {
  int cls = class_of(p, bytes);
  size_t size = cls >= 0 ? (size_t)1 << (CLASS_MIN_LOG2 + cls) : (bytes + p->granule - 1) & ~(p->granule - 1);
  freed **q = reusable(&p->lists[cls >= 0 ? cls : NCLASS], cls >= 0 ? 0 : size, stream);
  if (q != NULL) {
    freed *f = *q;
    *q = f->next;
    *ptr = (void *)(uintptr_t)f->ptr;
    f->seg->used++;
    event_put(p, f->ev);
    free(f);
    return 0;
  }
  segment *s = cls >= 0 ? p->current[cls] : NULL;
  if (s == NULL || s->fresh == s->slots) {
    if ((s = grow(d, p, cls >= 0 ? p->granule : size, cls, e)) == NULL) return -1;
    if (cls >= 0) p->current[cls] = s;
  }
  *ptr = (void *)(uintptr_t)(s->base + (CUdeviceptr)s->fresh++ * (cls >= 0 ? size : 0));
  s->used++;
  return 0;
}

static int capturing(void *stream) {
  CUstreamCaptureStatus cap = CU_STREAM_CAPTURE_STATUS_NONE;
  return !CDV_HAVE_CU(cuStreamIsCapturing) || cdv_cu.cuStreamIsCapturing((CUstream)stream, &cap) != CUDA_SUCCESS ||
         cap != CU_STREAM_CAPTURE_STATUS_NONE;
}

int cdv_cuda_granule_alloc(cdv_device *d, size_t bytes, void *stream, void **ptr, cdv_err *e) {
  gpool *p = bytes > 0 && bytes <= GRANULE_LIMIT && d->is_primary ? pool_of(d->handle) : NULL;
  if (p == NULL || pool_state(p) < 0 || capturing(stream)) return 1;
  CUstreamCaptureMode mode = lock(p);
  int rc = enabled(d, p) ? take(d, p, bytes, stream, ptr, e) : 1;
  unlock(p, mode);
  return rc;
}

/* Keeps a freed block for reuse, after an event recorded on the stream it was freed on. Without an event (a
 * capture, or a failed record, reported) only that stream reuses it, and a synchronised trim gives it back. */
static int put(gpool *p, segment *s, CUdeviceptr ptr, void *stream, cdv_err *e) {
  freed *f = calloc(1, sizeof *f);
  int rc = 0;
  if (f == NULL) return no_host_memory(e, "a freed block's entry"); /* the block stays in use */
  if (!capturing(stream) && (event_take(p, &f->ev, e) || CDV_CU(e, cuEventRecord, f->ev, (CUstream)stream))) {
    event_put(p, f->ev);
    f->ev = NULL;
    rc = -1;
  }
  int l = s->cls >= 0 ? s->cls : NCLASS;
  f->ptr = ptr, f->seg = s, f->stream = stream, f->next = p->lists[l];
  p->lists[l] = f;
  s->used--;
  return rc;
}

int cdv_cuda_granule_free(cdv_device *d, void *ptr, void *stream, cdv_err *e) {
  gpool *p = d->is_primary ? pool_existing(d->handle) : NULL;
  if (p == NULL || pool_state(p) <= 0) return 1;
  CUstreamCaptureMode mode = lock(p);
  segment *s = segment_of(p, (CUdeviceptr)(uintptr_t)ptr);
  int rc = s != NULL ? put(p, s, (CUdeviceptr)(uintptr_t)ptr, stream, e) : 1;
  unlock(p, mode);
  return rc;
}

/* ------------------------------------------------------------ the rest of the pool's life */

uint64_t cdv_cuda_granule_reserved(cdv_device *d) {
  gpool *p = pool_existing(d->handle);
  if (p == NULL) return 0;
  pthread_mutex_lock(&p->lock); /* calls nothing that a capture forbids */
  uint64_t v = p->reserved;
  pthread_mutex_unlock(&p->lock);
  return v;
}

/* synced: the device's work has finished (a mapped context's synchronisation is not that of its primary context,
 * whose granules these are) */
int cdv_cuda_granule_trim(cdv_device *d, int synced, cdv_err *e) {
  gpool *p = pool_existing(d->handle);
  if (p == NULL) return 0;
  CUstreamCaptureMode mode = lock(p);
  int rc = trim(p, synced && d->is_primary, e);
  unlock(p, mode);
  return rc;
}

/* Blocks freed on a stream being destroyed: a new stream may get its handle, and must not reuse them unordered. */
void cdv_cuda_granule_stream_gone(cdv_device *d, void *stream) {
  gpool *p = pool_existing(d->handle);
  if (p == NULL) return;
  pthread_mutex_lock(&p->lock); /* calls nothing that a capture forbids */
  for (int l = 0; l <= NCLASS; l++)
    for (freed *f = p->lists[l]; f != NULL; f = f->next)
      if (f->stream == stream) f->stream = GONE;
  pthread_mutex_unlock(&p->lock);
}

/* peer may (or may no longer) read and write target's segments (cuMemSetAccess on each): the caller has just let it
 * into target's pool or out of it; segments made later ask the pool. */
int cdv_cuda_granule_access(cdv_device *target, cdv_device *peer, int on, cdv_err *e) {
  gpool *p = pool_existing(target->handle);
  if (p == NULL || peer->handle == target->handle) return 0;
  CUstreamCaptureMode mode = lock(p);
  CUmemAccessDesc desc = cdv_cuda_access_desc(peer->handle, on);
  int rc = 0;
  for (int i = 0; i < p->nsegs && rc == 0; i++)
    rc = CDV_CU(e, cuMemSetAccess, p->segs[i]->base, p->segs[i]->size, &desc, 1);
  unlock(p, mode);
  return rc;
}

/* After cuDevicePrimaryCtxReset: the events died with the context and the arrays made before it are never freed
 * (cdv_still_owned), but the segments outlive it (an H200 kept them), so every one goes back. */
void cdv_cuda_granule_reset(cdv_device *d) {
  gpool *p = pool_existing(d->handle);
  if (p == NULL) return;
  CUstreamCaptureMode mode = lock(p);
  for (int i = 0; i < p->nsegs; i++) p->segs[i]->keep = 0;
  drop_freed(p, 0);
  for (int i = 0; i < p->nsegs; i++) {
    cdv_err ignored;
    segment_undo(p->segs[i], 3, &ignored);
  }
  memset(p->current, 0, sizeof p->current);
  p->nsegs = 0, p->nevents = 0, p->reserved = 0;
  unlock(p, mode);
}
