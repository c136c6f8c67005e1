/*
 * backend_cpu.c: the cpu device. Arrays are host memory, streams and events are synchronous, and kernels are
 * the same CUDA C sources compiled by the host C++ compiler (cpu_compile.c) and run with CUDA's thread model
 * (cpu_run.c).
 *
 * NOTE [cpu streams]: work is executed when it is enqueued, so every stream is always idle and in order;
 * waiting on an event is a no-op and an event records the CLOCK_MONOTONIC time of its record call. Stream
 * and event handles are small heap objects (distinct, non-NULL); NULL is the default stream.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include "cpu.h"

#define STREAM_MAGIC 0x63707553u   /* "Supc" */
#define EVENT_MAGIC 0x63707545u    /* "Epuc" */

static const char *const INVALID_VALUE = "CUDA_ERROR_INVALID_VALUE";
static const char *const INVALID_HANDLE = "CUDA_ERROR_INVALID_HANDLE";

static int no_op(cdv_device *d, cdv_err *e)
{
  (void)d, (void)e;
  return 0;
}

/* mem_info: the API reports free_memory 0 on cpu; total is the physical memory. */
static int cpu_mem_info(cdv_device *d, size_t *free_b, size_t *total_b, cdv_err *e)
{
  (void)d, (void)e;
  long pages = sysconf(_SC_PHYS_PAGES), pg = sysconf(_SC_PAGESIZE);
  *free_b = 0;
  *total_b = pages > 0 && pg > 0 ? (size_t)pages * (size_t)pg : 0;
  return 0;
}

/* ---------------------------------------------------------------- memory */
/* NOTE [cpu memory]: every allocation is its own MAP_SHARED|MAP_ANONYMOUS mapping, so that a launch run in a
 * forked child (NOTE [fault containment] in cpu_run.c) writes memory the parent sees. A side table remembers
 * each mapping's length and kind: munmap needs the length, and a pointer that is not ours is an error rather
 * than a crash. Each allocation costs one memory mapping (the kernel allows about 65000 per process). */
typedef struct alloc {
  void *p;
  size_t len;
  int kind;
} alloc;

static pthread_mutex_t allocs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  alloc *v;
  size_t cap, used;   /* used: live entries and tombstones */
} allocs;
#define TOMB ((void *)1)

static size_t alloc_slot(const void *p, size_t cap)
{
  return (size_t)(((uintptr_t)p >> 12) * 0x9E3779B97F4A7C15ull) & (cap - 1);
}

/* The entry of p (open addressing, linear probing), or NULL. */
static alloc *alloc_find(const void *p)
{
  if (!allocs.cap)
    return NULL;
  for (size_t i = alloc_slot(p, allocs.cap);; i = (i + 1) & (allocs.cap - 1)) {
    if (allocs.v[i].p == p)
      return &allocs.v[i];
    if (!allocs.v[i].p)
      return NULL;
  }
}

static int alloc_insert(void *p, size_t len, int kind)
{
  if ((allocs.used + 1) * 2 > allocs.cap) {
    /* rebuild without tombstones, at a size for the live entries (so churn does not grow the table) */
    size_t live = 1, cap = 256;
    for (size_t i = 0; i < allocs.cap; i++)
      live += allocs.v[i].p && allocs.v[i].p != TOMB;
    while (cap < 4 * live)
      cap *= 2;
    alloc *v = calloc(cap, sizeof *v), *old = allocs.v;
    if (!v)
      return -1;
    size_t oldcap = allocs.cap;
    allocs.v = v, allocs.cap = cap, allocs.used = 0;
    for (size_t i = 0; i < oldcap; i++)
      if (old[i].p && old[i].p != TOMB)
        alloc_insert(old[i].p, old[i].len, old[i].kind);
    free(old);
  }
  size_t i = alloc_slot(p, allocs.cap);
  while (allocs.v[i].p && allocs.v[i].p != TOMB)
    i = (i + 1) & (allocs.cap - 1);
  allocs.used += allocs.v[i].p == NULL;
  allocs.v[i] = (alloc){p, len, kind};
  return 0;
}

/* mmap (MAP_SHARED|MAP_ANONYMOUS), plus cuMemHostRegister through cdv_cuda_host_register for pinned memory.
 * Without a CUDA driver nothing can read page-locked memory, and pinned memory is plain memory: the pinned pool
 * and the staged copies (NOTE [pinned pool], NOTE [staged copies]) then run on the cpu device as they would with
 * a GPU. The side table keeps the kind that was made, so only registered memory is unregistered. */
static int cpu_mem_alloc(cdv_device *d, size_t bytes, int kind, void *stream, void **ptr, cdv_err *e)
{
  (void)d, (void)stream;
  if (kind == CDV_MEM_PINNED && cdv_cuda_load() != 0)
    kind = CDV_MEM_HOST;
  long pg = sysconf(_SC_PAGESIZE);
  size_t len = ((bytes ? bytes : 1) + (size_t)pg - 1) & ~((size_t)pg - 1);
  if (len < bytes)
    return cdv_fail(e, "cpu.mem_alloc", ENOMEM, "CUDA_ERROR_OUT_OF_MEMORY", "cannot allocate %zu bytes", bytes);
  void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return cdv_fail(e, "cpu.mem_alloc", errno, "CUDA_ERROR_OUT_OF_MEMORY", "out of host memory allocating %zu "
                    "bytes (%s)", bytes, strerror(errno));
  if (kind == CDV_MEM_PINNED) {
    if (cdv_cuda_host_register(p, len, e)) {
      munmap(p, len);
      return -1;
    }
    /* The driver may mark registered memory MADV_DONTFORK (it matters for private mappings, whose pages a
     * fork would copy under the DMA engine). Ours is shared, so a forked launch must still see it. */
    madvise(p, len, MADV_DOFORK);
  }
  pthread_mutex_lock(&allocs_lock);
  int rc = alloc_insert(p, len, kind);
  pthread_mutex_unlock(&allocs_lock);
  if (rc) {
    if (kind == CDV_MEM_PINNED)
      cdv_cuda_host_unregister(p);
    munmap(p, len);
    return cdv_fail(e, "cpu.mem_alloc", ENOMEM, "CUDA_ERROR_OUT_OF_MEMORY", "out of host memory");
  }
  *ptr = p;
  return 0;
}

/* munmap, after cuMemHostUnregister (cdv_cuda_host_unregister) for pinned memory */
static int cpu_mem_free(cdv_device *d, void *ptr, int kind, void *stream, cdv_err *e)
{
  (void)d, (void)kind, (void)stream;
  if (!ptr)
    return 0;
  pthread_mutex_lock(&allocs_lock);
  alloc *a = alloc_find(ptr), found = {0};
  if (a) {
    found = *a;
    a->p = TOMB;
  }
  pthread_mutex_unlock(&allocs_lock);
  if (!found.p)
    return cdv_fail(e, "cpu.mem_free", EINVAL, INVALID_VALUE, "pointer %p was not allocated by the cpu device", ptr);
  if (found.kind == CDV_MEM_PINNED)
    cdv_cuda_host_unregister(found.p);
  if (munmap(found.p, found.len))
    return cdv_cpu_fail_errno(e, "cpu.mem_free", errno, "munmap of %p failed", found.p);
  return 0;
}

int cdv_cpu_alloc_containing(const void *p, void **base, size_t *len)
{
  int rc = -1;
  pthread_mutex_lock(&allocs_lock);
  const alloc *a = alloc_find(p);
  for (size_t i = 0; !a && i < allocs.cap; i++)   /* p inside an allocation (a view): a scan */
    if (allocs.v[i].p && allocs.v[i].p != TOMB && (const char *)p > (const char *)allocs.v[i].p &&
        (const char *)p < (const char *)allocs.v[i].p + allocs.v[i].len)
      a = &allocs.v[i];
  if (a) {
    *base = a->p, *len = a->len;
    rc = 0;
  }
  pthread_mutex_unlock(&allocs_lock);
  return rc;
}

static int on_host(const cdv_device *dev)
{
  return !dev || dev->is_cpu || dev->be == &cdv_backend_cpu;
}

/* memmove: the cpu backend only copies between host buffers (a copy with a GPU side is the CUDA backend's) */
static int cpu_memcpy(cdv_device *d, void *dst, cdv_device *dst_dev, const void *src, cdv_device *src_dev,
                      size_t n, void *stream, cdv_err *e)
{
  (void)d, (void)stream;
  if (!on_host(dst_dev) || !on_host(src_dev))
    return cdv_fail(e, "cpu.memcpy", EINVAL, INVALID_VALUE, "the cpu backend cannot copy %s %s",
                    on_host(dst_dev) ? "from" : "to", on_host(dst_dev) ? src_dev->alias : dst_dev->alias);
  if (n && (!dst || !src))
    return cdv_fail(e, "cpu.memcpy", EINVAL, INVALID_VALUE, "copy of %zu bytes with a NULL pointer", n);
  if (n && dst != src)
    memmove(dst, src, n);
  return 0;
}

/* A pattern fill: one element, then doubling copies (no alignment assumption about dst). */
static int cpu_memset(cdv_device *d, void *dst, const void *pattern, size_t elsize, size_t count, void *stream,
                      cdv_err *e)
{
  (void)d, (void)stream;
  if (elsize != 1 && elsize != 2 && elsize != 4 && elsize != 8)
    return cdv_fail(e, "cpu.memset", EINVAL, INVALID_VALUE, "element size %zu is not 1, 2, 4 or 8", elsize);
  if (!count)
    return 0;
  if (!dst || !pattern)
    return cdv_fail(e, "cpu.memset", EINVAL, INVALID_VALUE, "fill of %zu elements with a NULL pointer", count);
  if (count > SIZE_MAX / elsize)
    return cdv_fail(e, "cpu.memset", EINVAL, INVALID_VALUE, "fill of %zu elements overflows", count);
  unsigned char *p = dst;
  size_t total = elsize * count, done = elsize;
  if (elsize == 1) {
    memset(p, *(const unsigned char *)pattern, total);
    return 0;
  }
  memcpy(p, pattern, elsize);
  while (done < total) {
    size_t k = done < total - done ? done : total - done;
    memcpy(p + done, p, k);
    done += k;
  }
  return 0;
}

/* ---------------------------------------------------------------- streams and events (NOTE [cpu streams]) */
typedef struct cpu_stream {
  unsigned magic;
  int priority;
} cpu_stream;

typedef struct cpu_event {
  unsigned magic;
  int timing, recorded;
  struct timespec t;
} cpu_event;

static int check_stream(const void *s, cdv_err *e)
{
  if (s && ((const cpu_stream *)s)->magic != STREAM_MAGIC)
    return cdv_fail(e, "cpu.stream", 400, INVALID_HANDLE, "invalid stream handle");
  return 0;
}

static int check_event(const void *ev, cdv_err *e)
{
  if (!ev || ((const cpu_event *)ev)->magic != EVENT_MAGIC)
    return cdv_fail(e, "cpu.event", 400, INVALID_HANDLE, "invalid event handle");
  return 0;
}

static int cpu_stream_create(cdv_device *d, int priority, int blocking, void **s, cdv_err *e)
{
  (void)d, (void)blocking;
  cpu_stream *st = malloc(sizeof *st);
  if (!st)
    return cdv_fail(e, "cpu.stream_create", ENOMEM, "CUDA_ERROR_OUT_OF_MEMORY", "out of host memory");
  st->magic = STREAM_MAGIC;
  st->priority = priority;
  *s = st;
  return 0;
}

static int cpu_stream_destroy(cdv_device *d, void *s, cdv_err *e)
{
  (void)d;
  if (!s)
    return cdv_fail(e, "cpu.stream_destroy", 400, INVALID_HANDLE, "the default stream cannot be destroyed");
  if (check_stream(s, e))
    return -1;
  ((cpu_stream *)s)->magic = 0;
  free(s);
  return 0;
}

static int cpu_stream_synchronize(cdv_device *d, void *s, cdv_err *e)
{
  (void)d;
  return check_stream(s, e);
}

static int cpu_stream_query(cdv_device *d, void *s, int *idle, cdv_err *e)
{
  (void)d;
  *idle = 1;
  return check_stream(s, e);
}

static int cpu_stream_wait_event(cdv_device *d, void *s, void *ev, cdv_err *e)
{
  (void)d;
  return check_stream(s, e) || check_event(ev, e) ? -1 : 0;
}

static int cpu_stream_priority_range(cdv_device *d, int *least, int *greatest, cdv_err *e)
{
  (void)d, (void)e;
  *least = *greatest = 0;
  return 0;
}

static int cpu_event_create(cdv_device *d, int timing, int blocking, void **ev, cdv_err *e)
{
  (void)d, (void)blocking;
  cpu_event *x = calloc(1, sizeof *x);
  if (!x)
    return cdv_fail(e, "cpu.event_create", ENOMEM, "CUDA_ERROR_OUT_OF_MEMORY", "out of host memory");
  x->magic = EVENT_MAGIC;
  x->timing = timing != 0;
  *ev = x;
  return 0;
}

static int cpu_event_destroy(cdv_device *d, void *ev, cdv_err *e)
{
  (void)d;
  if (check_event(ev, e))
    return -1;
  ((cpu_event *)ev)->magic = 0;
  free(ev);
  return 0;
}

/* clock_gettime(CLOCK_MONOTONIC): the stream has done all earlier work by now */
static int cpu_event_record(cdv_device *d, void *ev, void *s, cdv_err *e)
{
  (void)d;
  if (check_event(ev, e) || check_stream(s, e))
    return -1;
  cpu_event *x = ev;
  clock_gettime(CLOCK_MONOTONIC, &x->t);
  x->recorded = 1;
  return 0;
}

static int cpu_event_query(cdv_device *d, void *ev, int *done, cdv_err *e)
{
  (void)d;
  *done = 1;
  return check_event(ev, e);
}

static int cpu_event_synchronize(cdv_device *d, void *ev, cdv_err *e)
{
  (void)d;
  return check_event(ev, e);
}

/* cuEventElapsedTime's rules: both events recorded, both with timing (CUDA_ERROR_INVALID_HANDLE otherwise) */
static int cpu_event_elapsed(cdv_device *d, void *start, void *end, float *ms, cdv_err *e)
{
  (void)d;
  if (check_event(start, e) || check_event(end, e))
    return -1;
  const cpu_event *a = start, *b = end;
  if (!a->timing || !b->timing)
    return cdv_fail(e, "cpu.event_elapsed", 400, INVALID_HANDLE, "the %s event was created with timing disabled",
                    !a->timing ? "start" : "end");
  if (!a->recorded || !b->recorded)
    return cdv_fail(e, "cpu.event_elapsed", 400, INVALID_HANDLE, "the %s event was never recorded",
                    !a->recorded ? "start" : "end");
  *ms = (float)((double)(b->t.tv_sec - a->t.tv_sec) * 1e3 + (double)(b->t.tv_nsec - a->t.tv_nsec) / 1e6);
  return 0;
}

/* ---------------------------------------------------------------- modules */
typedef struct cpu_module {
  void *handle;
  int flags;
  cdv_cpu_func *funcs;
} cpu_module;

/* Objects this process has loaded: loading one again needs neither the integrity check nor dlopen. */
typedef struct loaded {
  char *path;
  void *handle;
  int flags;
  struct loaded *next;
} loaded;

static pthread_mutex_t modules_lock = PTHREAD_MUTEX_INITIALIZER;
static loaded *loaded_objects;

static int cpu_compile(cdv_device *d, const cdv_compile_req *req, cdv_image *out, cdv_err *e)
{
  (void)d;
  return cdv_cpu_compile(req, out, e);
}

/* NOTE [shared module data]: a forked launch must change the module's globals (__device__ and __constant__
 * variables, static counters) for the parent too. After dlopen, the writable part of each writable PT_LOAD
 * segment past the RELRO area (which the loader made read-only) is copied into a MAP_SHARED mapping that
 * mremap puts at the same address. Nothing runs code of the object before this is done. */
typedef struct share_ctx {
  ElfW(Addr) base;
  int rc, found;
} share_ctx;

static int remap_shared(uintptr_t a, size_t len)
{
  void *t = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (t == MAP_FAILED)
    return -1;
  memcpy(t, (void *)a, len);
  if (mremap(t, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)a) == MAP_FAILED) {
    munmap(t, len);
    return -1;
  }
  return 0;
}

static int share_segments(struct dl_phdr_info *info, size_t size, void *data)
{
  (void)size;
  share_ctx *c = data;
  if (info->dlpi_addr != c->base)
    return 0;
  uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE), relro_end = 0;
  for (int i = 0; i < info->dlpi_phnum; i++)
    if (info->dlpi_phdr[i].p_type == PT_GNU_RELRO)
      relro_end = (info->dlpi_addr + info->dlpi_phdr[i].p_vaddr + info->dlpi_phdr[i].p_memsz) & ~(pg - 1);
  for (int i = 0; i < info->dlpi_phnum && c->rc == 0; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_W))
      continue;
    uintptr_t start = (info->dlpi_addr + ph->p_vaddr) & ~(pg - 1);
    uintptr_t end = (info->dlpi_addr + ph->p_vaddr + ph->p_memsz + pg - 1) & ~(pg - 1);
    if (start < relro_end)
      start = relro_end;
    if (start < end)
      c->rc = remap_shared(start, end - start);
  }
  c->found = 1;
  return 1;
}

static int share_data(void *h, cdv_err *e)
{
  struct link_map *lm = NULL;
  if (dlinfo(h, RTLD_DI_LINKMAP, &lm) || !lm)
    return cdv_fail(e, "cpu.module_load", 0, "CUDA_ERROR_INVALID_IMAGE", "cannot inspect the kernel object: %s",
                    dlerror());
  share_ctx c = {lm->l_addr, 0, 0};
  dl_iterate_phdr(share_segments, &c);
  if (c.rc || !c.found)
    return cdv_fail(e, "cpu.module_load", errno, "CUDA_ERROR_INVALID_IMAGE", "cannot share the data of the "
                    "kernel object %s", lm->l_name);
  return 0;
}

/* An object built for another layout of NOTE [cpu kernel ABI] (cpu.h) must not run. */
static int check_abi(void *h, const char *path, cdv_err *e)
{
  const int *abi = dlsym(h, "cdv_cpu_abi"), *cs = dlsym(h, "cdv_cpu_ctx_size"), *hs = dlsym(h, "cdv_cpu_fhdr_size");
  if (!abi || !cs || !hs || *abi != CDV_CPU_ABI || *cs != (int)sizeof(cdv_cpu_ctx) ||
      *hs != (int)sizeof(cdv_cpu_fhdr))
    return cdv_fail(e, "cpu.module_load", 0, "CUDA_ERROR_INVALID_IMAGE", "the kernel object '%s' was built for "
                    "another version of the cpu device", path);
  return 0;
}

/* dlopen(RTLD_NOW | RTLD_LOCAL) of a cached object not loaded yet, after checking that it is whole
 * (cdv_cpu_cache_verify); its data is then made shared. Called with modules_lock held. */
static loaded *load_object(const char *path, cdv_err *e)
{
  for (loaded *l = loaded_objects; l; l = l->next)
    if (!strcmp(l->path, path))
      return l;
  if (cdv_cpu_cache_verify(path, e))
    return NULL;
  loaded *l = calloc(1, sizeof *l);
  if (!l || !(l->path = strdup(path))) {
    free(l);
    cdv_fail(e, "cpu.module_load", ENOMEM, "CUDA_ERROR_OUT_OF_MEMORY", "out of host memory");
    return NULL;
  }
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  int rc = h ? 0 : cdv_fail(e, "cpu.module_load", 0, "CUDA_ERROR_INVALID_IMAGE", "cannot load the kernel object: %s",
                            dlerror());
  if (rc == 0)
    rc = check_abi(h, path, e);
  if (rc == 0)
    rc = share_data(h, e);
  if (rc) {
    free(l->path);
    free(l);
    return NULL;   /* no dlclose: a failed object stays mapped, harmlessly (see cpu_module_unload) */
  }
  const int *flags = dlsym(h, "cdv_cpu_flags");
  l->handle = h;
  l->flags = flags ? *flags : CDV_CPU_FLAG_FIBERS;
  l->next = loaded_objects;
  loaded_objects = l;
  return l;
}

static int cpu_module_load(cdv_device *d, const cdv_image *img, void **mod, cdv_err *e)
{
  (void)d;
  if (!img || !img->path)
    return cdv_fail(e, "cpu.module_load", 0, "CUDA_ERROR_INVALID_IMAGE", "the image has no cpu object (it was "
                    "compiled for a CUDA device)");
  cpu_module *m = calloc(1, sizeof *m);
  if (!m)
    return cdv_fail(e, "cpu.module_load", ENOMEM, "CUDA_ERROR_OUT_OF_MEMORY", "out of host memory");
  pthread_mutex_lock(&modules_lock);
  loaded *l = load_object(img->path, e);
  pthread_mutex_unlock(&modules_lock);
  if (!l) {
    free(m);
    return -1;
  }
  m->handle = l->handle;
  m->flags = l->flags;
  *mod = m;
  return 0;
}

/* The module object goes; the shared object stays loaded. dlclose is not safe: a Kernel, a graph or a launch
 * on another thread may still hold a trampoline address, the pool's threads hold TLS blocks of the object
 * (its __shared__ variables), and identical sources share one dlopen handle across modules. A process
 * loads each distinct kernel object once, so what stays mapped is bounded by the kernels it compiles. */
static int cpu_module_unload(cdv_device *d, void *mod, cdv_err *e)
{
  (void)d, (void)e;
  cpu_module *m = mod;
  if (!m)
    return 0;
  while (m->funcs) {
    cdv_cpu_func *f = m->funcs;
    m->funcs = f->next;
    free(f);
  }
  free(m);
  return 0;
}

/* dlsym of the trampoline and of its companions "<symbol>_name" (the entry as the user wrote it) and
 * "<symbol>_sig" (its parameters) */
static int cpu_module_function(cdv_device *d, void *mod, const char *symbol, void **fn, cdv_err *e)
{
  (void)d;
  cpu_module *m = mod;
  if (!m || !symbol)
    return cdv_fail(e, "cpu.module_function", 400, INVALID_HANDLE, "invalid module handle");
  void *entry = dlsym(m->handle, symbol);
  if (!entry)
    return cdv_fail(e, "cpu.module_function", 500, "CUDA_ERROR_NOT_FOUND", "kernel symbol '%s' not found in the "
                    "module", symbol);
  for (cdv_cpu_func *f = m->funcs; f; f = f->next)
    if (*(void **)&f->entry == entry) {
      *fn = f;
      return 0;
    }
  cdv_cpu_func *f = calloc(1, sizeof *f);
  if (!f)
    return cdv_fail(e, "cpu.module_function", ENOMEM, "CUDA_ERROR_OUT_OF_MEMORY", "out of host memory");
  char companion[256];
  snprintf(companion, sizeof companion, "%s_name", symbol);
  const char *name = dlsym(m->handle, companion);
  snprintf(f->name, sizeof f->name, "%s", name ? name : symbol);
  snprintf(companion, sizeof companion, "%s_sig", symbol);
  f->sig = dlsym(m->handle, companion);
  *(void **)&f->entry = entry;
  f->flags = m->flags;
  f->next = m->funcs;
  m->funcs = f;
  *fn = f;
  return 0;
}

/* A global's accessor (NOTE [module globals] in module.c; cpu_compile.c writes it): the variable's address in
 * the object, whose writable data every forked launch shares (NOTE [shared module data]), and its size. */
static int cpu_module_global(cdv_device *d, void *mod, const char *symbol, void **ptr, size_t *bytes, cdv_err *e)
{
  (void)d;
  cpu_module *m = mod;
  if (!m || !symbol)
    return cdv_fail(e, "cpu.module_global", 400, INVALID_HANDLE, "invalid module handle");
  void *(*get)(unsigned long *) = NULL;
  *(void **)&get = dlsym(m->handle, symbol);
  if (!get)
    return cdv_fail(e, "cpu.module_global", 500, "CUDA_ERROR_NOT_FOUND", "global symbol '%s' not found in the "
                    "module", symbol);
  unsigned long n = 0;
  *ptr = get(&n);
  *bytes = n;
  return 0;
}

/* ---------------------------------------------------------------- kernels */
static int cpu_func_info(cdv_device *d, void *fn, cdv_func_info *out, cdv_err *e)
{
  (void)d;
  if (!fn)
    return cdv_fail(e, "cpu.func_info", 400, INVALID_HANDLE, "invalid kernel handle");
  memset(out, 0, sizeof *out);
  out->max_threads_per_block = CDV_CPU_MAX_THREADS;
  return 0;
}

/* The layout CUDA gives a parameter buffer (each parameter at the next multiple of its alignment), from the
 * sizes and alignments the object exports; 1 (unknown) for an object without them or i out of range. */
static int cpu_param_info(cdv_device *d, void *fn, int i, size_t *offset, size_t *size)
{
  (void)d;
  const cdv_cpu_sig *sig = fn ? ((cdv_cpu_func *)fn)->sig : NULL;
  if (!sig || i < 0 || (unsigned)i >= sig->n)
    return 1;
  size_t off = 0;
  for (int k = 0; k <= i; k++) {
    size_t a = CDV_CPU_PARAM_ALIGN(sig->w[k]) ? CDV_CPU_PARAM_ALIGN(sig->w[k]) : 1;
    off = (off + a - 1) / a * a;
    *offset = off, *size = CDV_CPU_PARAM_SIZE(sig->w[k]);
    off += *size;
  }
  return 0;
}

/* A model, not a measurement: a "multiprocessor" is one worker thread, which holds 2048 threads' worth of
 * blocks like a GPU SM; at least one block always fits (blocks of a worker run one after another). */
static int cpu_occupancy(cdv_device *d, void *fn, int block, size_t shared, int *blocks_per_sm, cdv_err *e)
{
  (void)d;
  if (!fn)
    return cdv_fail(e, "cpu.occupancy", 400, INVALID_HANDLE, "invalid kernel handle");
  if (block < 1 || block > CDV_CPU_MAX_THREADS)
    return cdv_fail(e, "cpu.occupancy", 1, INVALID_VALUE, "block size %d is not between 1 and %d", block,
                    CDV_CPU_MAX_THREADS);
  *blocks_per_sm = shared > CDV_CPU_MAX_DYN_SHARED ? 0 : 2048 / block > 1 ? 2048 / block : 1;
  return 0;
}

static int cpu_launch(cdv_device *d, void *fn, const unsigned grid[3], const unsigned block[3], unsigned shared,
                      void *stream, void **args, cdv_err *e)
{
  (void)d;
  if (check_stream(stream, e))
    return -1;
  return cdv_cpu_launch(fn, grid, block, shared, args, e);
}

const cdv_backend cdv_backend_cpu = {
  .kind = "cpu",
  .stage_pageable = 0,
  .activate = no_op,
  .synchronize = no_op,
  .mem_info = cpu_mem_info,
  .mem_alloc = cpu_mem_alloc,
  .mem_free = cpu_mem_free,
  .memcpy = cpu_memcpy,
  .memset = cpu_memset,
  .stream_create = cpu_stream_create,
  .stream_destroy = cpu_stream_destroy,
  .stream_synchronize = cpu_stream_synchronize,
  .stream_query = cpu_stream_query,
  .stream_wait_event = cpu_stream_wait_event,
  .stream_priority_range = cpu_stream_priority_range,
  .event_create = cpu_event_create,
  .event_destroy = cpu_event_destroy,
  .event_record = cpu_event_record,
  .event_query = cpu_event_query,
  .event_synchronize = cpu_event_synchronize,
  .event_elapsed = cpu_event_elapsed,
  .compile = cpu_compile,
  .module_load = cpu_module_load,
  .module_unload = cpu_module_unload,
  .module_function = cpu_module_function,
  .module_global = cpu_module_global,
  .func_info = cpu_func_info,
  .param_info = cpu_param_info,
  .occupancy = cpu_occupancy,
  .launch = cpu_launch,
};
