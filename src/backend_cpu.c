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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include "cpu.h"

#define STREAM_MAGIC 0x63707553u /* "Supc" */
#define EVENT_MAGIC 0x63707545u /* "Epuc" */

static const char *const INVALID_VALUE = "CUDA_ERROR_INVALID_VALUE";
static const char *const INVALID_HANDLE = "CUDA_ERROR_INVALID_HANDLE";

static int no_op(cdv_device *d, cdv_err *e) {
  (void)d, (void)e;
  return 0;
}

/* NOTE [cpu memory limit]: CUDADEV_CPU_MEMORY (bytes, or a number with K, M, G or T) makes the cpu device a
 * device of that much memory: total_memory reports it, and a mapping that would take the device's arrays past
 * it is refused as out of memory, as a full GPU refuses (a test of out-of-memory paths; a fuzzer or a script
 * kept from filling the machine: Linux refuses only a mapping larger than the memory it could find, and a
 * process whose arrays fill the memory is ended by the out-of-memory killer). mapped_bytes counts the mappings
 * of arrays and slabs, guards included. */
static size_t mapped_bytes;

/* The limit in bytes, 0 for none; (size_t)-1 when the variable is not a size (mem_limit_text keeps it for the
 * message). Read once; digits and one K, M, G or T, so that no locale changes what it means. */
static size_t mem_limit_v;
static char mem_limit_text[64];
static pthread_once_t mem_limit_once = PTHREAD_ONCE_INIT;

static void mem_limit_read(void) {
  const char *s = getenv("CUDADEV_CPU_MEMORY");
  if (!s || !*s) return;
  snprintf(mem_limit_text, sizeof mem_limit_text, "%s", s);
  unsigned long long x = 0, shift = 0;
  const char *p = s;
  while (*p >= '0' && *p <= '9' && x <= (1ull << 50)) x = x * 10 + (unsigned long long)(*p++ - '0');
  const char *units = "KMGT", *u = *p ? strchr(units, *p) : NULL;
  if (u) shift = 10 * (unsigned long long)(u - units + 1), p++;
  mem_limit_v = p == s || *p || x == 0 || x > (1ull << 50) || (shift && x > (1ull << (60 - shift)))
                    ? (size_t)-1
                    : (size_t)(x << shift);
}

static size_t mem_limit(void) {
  pthread_once(&mem_limit_once, mem_limit_read);
  return mem_limit_v;
}

/* Take n bytes of the device's memory for a new mapping (NOTE [cpu memory limit]); -1 with e set when they are
 * not there. mem_unreserve gives them back. */
static int mem_reserve(size_t n, cdv_err *e) {
  size_t limit = mem_limit();
  if (limit == (size_t)-1)
    return cdv_fail(e, "cpu.mem_alloc", EINVAL, INVALID_VALUE,
                    "CUDADEV_CPU_MEMORY='%s' is not a size: write bytes, or a number with K, M, G or T (4G)",
                    mem_limit_text);
  size_t was = __atomic_fetch_add(&mapped_bytes, n, __ATOMIC_RELAXED);
  if (limit && (was + n < was || was + n > limit)) {
    __atomic_fetch_sub(&mapped_bytes, n, __ATOMIC_RELAXED);
    return cdv_fail(e, "cpu.mem_alloc", ENOMEM, "CUDA_ERROR_OUT_OF_MEMORY",
                    "out of memory on the cpu device: %zu bytes asked, %zu of its %zu in use "
                    "(CUDADEV_CPU_MEMORY)",
                    n, was, limit);
  }
  return 0;
}

static void mem_unreserve(size_t n) { __atomic_fetch_sub(&mapped_bytes, n, __ATOMIC_RELAXED); }

/* mem_info: the API reports free_memory 0 on cpu; total is the physical memory, or CUDADEV_CPU_MEMORY's. */
static int cpu_mem_info(cdv_device *d, size_t *free_b, size_t *total_b, cdv_err *e) {
  (void)d, (void)e;
  long pages = sysconf(_SC_PHYS_PAGES), pg = sysconf(_SC_PAGESIZE);
  size_t limit = mem_limit();
  *free_b = 0;
  *total_b = pages > 0 && pg > 0 ? (size_t)pages * (size_t)pg : 0;
  if (limit && limit != (size_t)-1) *total_b = limit;
  return 0;
}

/* The host memory available for new allocations, as the kernel estimates it (MemAvailable in /proc/meminfo;
 * else the free pages), or what CUDADEV_CPU_MEMORY leaves: what the cpu device's out-of-memory message
 * reports, since free_memory is 0 on cpu. */
size_t cdv_cpu_available(void) {
  size_t limit = mem_limit(), used = __atomic_load_n(&mapped_bytes, __ATOMIC_RELAXED);
  if (limit && limit != (size_t)-1) return limit > used ? limit - used : 0; /* NOTE [cpu memory limit] */
  FILE *f = fopen("/proc/meminfo", "r");
  char line[128];
  unsigned long long kib = 0;
  int found = 0;
  while (f != NULL && !found && fgets(line, sizeof line, f) != NULL)
    found = sscanf(line, "MemAvailable: %llu kB", &kib) == 1;
  if (f != NULL) fclose(f);
  if (found) return (size_t)kib * 1024;
  long pages = sysconf(_SC_AVPHYS_PAGES), pg = sysconf(_SC_PAGESIZE);
  return pages > 0 && pg > 0 ? (size_t)pages * (size_t)pg : 0;
}

/* ---------------------------------------------------------------- memory */
/* NOTE [cpu memory]: arrays are MAP_SHARED memory (anonymous, or a memfd while a launch worker lives: NOTE [maps
 * for the worker] in cpu_run.c), so that a launch run in a forked child (NOTE [fault containment] in cpu_run.c)
 * writes memory the parent sees. Two layouts:
 * - an array of more than SMALL_MAX bytes is a mapping of its own, [guard page][data][guard page], its data
 *   pushed to the end of the pages (at a multiple of BIG_ALIGN) so that running off its end faults at once; a
 *   write up to a page before its start faults too, or lands in its own unused head, never in a neighbour.
 *   A guard is a guard marker where Linux has them for shared memory (MADV_GUARD_INSTALL, 6.15 and later; no
 *   extra mapping), else an mprotect'ed page (two more mappings per array).
 * - an array of SMALL_MAX bytes or fewer is a block of a slab: SLAB bytes, SLAB-aligned, guarded at both ends,
 *   cut into blocks of one size class (ALIGN << k). Blocks of a slab share pages: a write past a small array
 *   lands in the next small array of the slab, which no guard catches (see doc/cpu-device.md, "what the cpu
 *   device catches"). The pool is what makes a million live small arrays possible: one mapping each would
 *   stop at the kernel's vm.max_map_count (65530 by default) mappings per process.
 * Pinned memory registered with a CUDA driver keeps a plain page-aligned mapping (the driver wants pages).
 * A side table remembers each mapping (an array's data pointer, or a slab's base), so that a pointer that is
 * not ours is an error rather than a crash, and a fault's address can be told relative to the nearest array
 * (cdv_cpu_alloc_describe). */
#define SMALL_MAX 2048
#define ALIGN 256 /* cuMemAlloc's alignment, kept by small arrays */
#define BIG_ALIGN 16 /* the largest dtype's: an overrun of over 15 bytes faults */
#define NCLASS 4 /* 256, 512, 1024, 2048 */
#define SLAB ((size_t)2 << 20)
#define KIND_SLAB (-1)

typedef struct slab {
  char *base;
  int cls;
  unsigned nblocks, nfree, hint;
  struct slab *next, *prev; /* the class's slabs with a free block */
  uint64_t bits[]; /* 1: the block is allocated */
} slab;

typedef struct alloc {
  void *p; /* the array's data, or the slab's base */
  size_t len; /* bytes of data a kernel may use (a multiple of BIG_ALIGN), or SLAB */
  size_t bytes; /* as requested */
  char *map; /* the mapping, guards included */
  size_t maplen;
  int kind; /* CDV_MEM_*, or KIND_SLAB */
  slab *s;
} alloc;

static pthread_mutex_t allocs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  alloc *v;
  size_t cap, used; /* used: live entries and tombstones */
} allocs;
static slab *avail[NCLASS];
#define TOMB ((void *)1)

static size_t alloc_slot(const void *p, size_t cap) {
  return (size_t)(((uintptr_t)p >> 8) * 0x9E3779B97F4A7C15ull) & (cap - 1);
}

/* The entry of p (open addressing, linear probing), or NULL. */
static alloc *alloc_find(const void *p) {
  if (!allocs.cap) return NULL;
  for (size_t i = alloc_slot(p, allocs.cap);; i = (i + 1) & (allocs.cap - 1)) {
    if (allocs.v[i].p == p) return &allocs.v[i];
    if (!allocs.v[i].p) return NULL;
  }
}

static int alloc_insert(const alloc *a) {
  if ((allocs.used + 1) * 2 > allocs.cap) {
    /* rebuild without tombstones, at a size for the live entries (so churn does not grow the table) */
    size_t live = 1, cap = 256;
    for (size_t i = 0; i < allocs.cap; i++) live += allocs.v[i].p && allocs.v[i].p != TOMB;
    while (cap < 4 * live) cap *= 2;
    alloc *v = calloc(cap, sizeof *v), *old = allocs.v;
    if (!v) return -1;
    size_t oldcap = allocs.cap;
    allocs.v = v, allocs.cap = cap, allocs.used = 0;
    for (size_t i = 0; i < oldcap; i++)
      if (old[i].p && old[i].p != TOMB) alloc_insert(&old[i]);
    free(old);
  }
  size_t i = alloc_slot(a->p, allocs.cap);
  while (allocs.v[i].p && allocs.v[i].p != TOMB) i = (i + 1) & (allocs.cap - 1);
  allocs.used += allocs.v[i].p == NULL;
  allocs.v[i] = *a;
  return 0;
}

static size_t page(void) {
  static size_t pg;
  if (!pg) pg = (size_t)sysconf(_SC_PAGESIZE);
  return pg;
}

#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102
#endif

/* A guard page at p: a marker when the kernel has them for shared memory (probed once), else PROT_NONE. */
static void guard(char *p) {
  static int markers = -1;
  if (markers != 0 && madvise(p, page(), MADV_GUARD_INSTALL) == 0) {
    markers = 1;
    return;
  }
  markers = 0;
  mprotect(p, page(), PROT_NONE);
}

/* An mmap failure's error: the mapping limit by name when the process is at it, else out of memory. */
static int map_failed(cdv_err *e, int err, size_t bytes) {
  long max = 0, n = 0;
  FILE *f = fopen("/proc/sys/vm/max_map_count", "r");
  if (f) {
    if (fscanf(f, "%ld", &max) != 1) max = 0;
    fclose(f);
  }
  if (err == ENOMEM && max > 0 && (f = fopen("/proc/self/maps", "r"))) {
    int c;
    while ((c = getc(f)) != EOF) n += c == '\n';
    fclose(f);
  }
  if (max > 0 && n >= max - 16)
    return cdv_fail(e, "cpu.mem_alloc", ENOMEM, "ENOMEM",
                    "cannot map %zu bytes: the process has %ld memory "
                    "mappings and the kernel allows %ld (vm.max_map_count: raise it with `sysctl -w "
                    "vm.max_map_count=N`, or keep fewer arrays of over %d bytes alive)",
                    bytes, n, max, SMALL_MAX);
  return cdv_fail(e, "cpu.mem_alloc", err, "CUDA_ERROR_OUT_OF_MEMORY",
                  "out of host memory allocating %zu bytes "
                  "(%s)",
                  bytes, strerror(err));
}

/* A fresh slab of class c, entered in the table and in avail[c]; NULL with e set. Called with allocs_lock. */
static slab *slab_new(int c, cdv_err *e) {
  size_t pg = page(), size = (size_t)ALIGN << c, nb = (SLAB - 2 * pg) / size;
  if (mem_reserve(SLAB, e)) return NULL;
  slab *s = calloc(1, sizeof *s + (nb + 63) / 64 * sizeof(uint64_t));
  if (!s) {
    mem_unreserve(SLAB);
    cdv_fail(e, "cpu.mem_alloc", ENOMEM, "CUDA_ERROR_OUT_OF_MEMORY", "out of host memory");
    return NULL;
  }
  /* SLAB-aligned: a block's slab is found from its address. Reserve twice, map into the aligned half. */
  char *r = mmap(NULL, 2 * SLAB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0), *b = MAP_FAILED;
  int err = errno;
  if (r != MAP_FAILED) {
    char *a = (char *)(((uintptr_t)r + SLAB - 1) & ~(uintptr_t)(SLAB - 1));
    b = cdv_cpu_map_shared(a, SLAB, 1); /* NOTE [maps for the worker] */
    err = errno;
    if (a > r) munmap(r, (size_t)(a - r));
    munmap(a + SLAB, (size_t)(r + 2 * SLAB - (a + SLAB)));
    if (b == MAP_FAILED) munmap(a, SLAB);
  }
  if (b == MAP_FAILED) {
    free(s);
    mem_unreserve(SLAB);
    map_failed(e, err, SLAB);
    return NULL;
  }
  guard(b);
  guard(b + SLAB - pg);
  s->base = b, s->cls = c, s->nblocks = s->nfree = (unsigned)nb;
  if (nb % 64) s->bits[nb / 64] = ~0ull << (nb % 64);
  alloc a = {b, SLAB, SLAB, b, SLAB, KIND_SLAB, s};
  if (alloc_insert(&a)) {
    cdv_cpu_unmap_shared(b, SLAB);
    mem_unreserve(SLAB);
    free(s);
    cdv_fail(e, "cpu.mem_alloc", ENOMEM, "CUDA_ERROR_OUT_OF_MEMORY", "out of host memory");
    return NULL;
  }
  s->next = avail[c];
  if (avail[c]) avail[c]->prev = s;
  avail[c] = s;
  return s;
}

static char *block_at(const slab *s, unsigned i) { return s->base + page() + ((size_t)i << s->cls) * ALIGN; }

static void avail_remove(slab *s) {
  if (s->prev)
    s->prev->next = s->next;
  else
    avail[s->cls] = s->next;
  if (s->next) s->next->prev = s->prev;
  s->next = s->prev = NULL;
}

/* A block of the pool for bytes (at most SMALL_MAX). Called with allocs_lock. */
static void *small_alloc(size_t bytes, cdv_err *e) {
  int c = 0;
  while (((size_t)ALIGN << c) < bytes) c++;
  slab *s = avail[c] ? avail[c] : slab_new(c, e);
  if (!s) return NULL;
  unsigned words = (s->nblocks + 63) / 64, w = s->hint;
  while (s->bits[w] == ~0ull) /* nfree > 0: a clear bit exists (the bits past the last block are set) */
    w = (w + 1) % words;
  unsigned bit = (unsigned)__builtin_ctzll(~s->bits[w]);
  s->bits[w] |= 1ull << bit;
  s->hint = w;
  if (--s->nfree == 0) avail_remove(s);
  return block_at(s, w * 64 + bit);
}

/* The slab block p starts, with its index; NULL when p is not one. Called with allocs_lock. */
static slab *block_of(const void *p, unsigned *index, int exact) {
  alloc *a = alloc_find((void *)((uintptr_t)p & ~(uintptr_t)(SLAB - 1)));
  if (!a || a->kind != KIND_SLAB) return NULL;
  slab *s = a->s;
  size_t size = (size_t)ALIGN << s->cls;
  if ((const char *)p < block_at(s, 0) || (const char *)p >= block_at(s, s->nblocks)) return NULL;
  size_t off = (size_t)((const char *)p - block_at(s, 0));
  if (exact && off % size) return NULL;
  unsigned i = (unsigned)(off / size);
  if (!(s->bits[i / 64] >> (i % 64) & 1)) return NULL;
  *index = i;
  return s;
}

/* Called with allocs_lock; the slab goes when it is empty and its class has another with room. */
static void small_free(slab *s, unsigned i) {
  s->bits[i / 64] &= ~(1ull << (i % 64));
  if (s->nfree++ == 0) {
    s->next = avail[s->cls];
    if (avail[s->cls]) avail[s->cls]->prev = s;
    avail[s->cls] = s;
  }
  if (s->nfree == s->nblocks && (avail[s->cls] != s || s->next)) {
    avail_remove(s);
    alloc_find(s->base)->p = TOMB;
    cdv_cpu_unmap_shared(s->base, SLAB);
    mem_unreserve(SLAB);
    free(s);
  }
}

/* A mapping of its own with a guard page at each end, the data at its end (NOTE [cpu memory]); pinned: a
 * plain page-aligned mapping, registered. */
static int big_alloc(size_t bytes, int kind, alloc *a, cdv_err *e) {
  size_t pg = page(), data = (bytes + pg - 1) & ~(pg - 1), guards = kind == CDV_MEM_PINNED ? 0 : 2 * pg;
  if (data < bytes || data + guards < data)
    return cdv_fail(e, "cpu.mem_alloc", ENOMEM, "CUDA_ERROR_OUT_OF_MEMORY", "cannot allocate %zu bytes", bytes);
  if (mem_reserve(data + guards, e)) return -1;
  char *m = kind == CDV_MEM_PINNED ? mmap(NULL, data, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0)
                                   : cdv_cpu_map_shared(NULL, data + guards, 1); /* NOTE [maps for the worker] */
  if (m == MAP_FAILED) {
    int err = errno;
    mem_unreserve(data + guards);
    return map_failed(e, err, bytes);
  }
  size_t len = (bytes + BIG_ALIGN - 1) & ~(size_t)(BIG_ALIGN - 1);
  *a = (alloc){m, data, bytes, m, data, kind, NULL};
  if (kind == CDV_MEM_PINNED) {
    if (cdv_cuda_host_register(m, data, e)) {
      munmap(m, data);
      mem_unreserve(data);
      return -1;
    }
    /* The driver may mark registered memory MADV_DONTFORK (it matters for private mappings, whose pages a
     * fork would copy under the DMA engine). Ours is shared, so a forked launch must still see it. */
    madvise(m, data, MADV_DOFORK);
    return 0;
  }
  guard(m);
  guard(m + pg + data);
  a->p = m + pg + data - len, a->len = len, a->maplen = data + guards;
  return 0;
}

/* An array's own mapping goes: pinned memory is plain (NOTE [launch worker]), others were made by
 * cdv_cpu_map_shared (NOTE [maps for the worker]). */
static int unmap(const alloc *a) {
  if (a->kind != CDV_MEM_PINNED) return cdv_cpu_unmap_shared(a->map, a->maplen);
  int rc = munmap(a->map, a->maplen);
  cdv_cpu_maps_changed();
  return rc;
}

/* Small host arrays from the pool, others a mapping each (NOTE [cpu memory]), plus cuMemHostRegister through
 * cdv_cuda_host_register for pinned memory. Without a CUDA driver nothing can read page-locked memory, and
 * pinned memory is plain memory: the pinned pool and the staged copies (NOTE [pinned pool], NOTE [staged
 * copies]) then run on the cpu device as they would with a GPU. The side table keeps the kind that was made,
 * so only registered memory is unregistered. */
static int cpu_mem_alloc(cdv_device *d, size_t bytes, int kind, void *stream, void **ptr, cdv_err *e) {
  (void)d, (void)stream;
  if ((kind == CDV_MEM_PINNED && cdv_cuda_load() != 0) || kind == CDV_MEM_MANAGED) /* NOTE [managed memory] */
    kind = CDV_MEM_HOST;
  if (kind != CDV_MEM_PINNED && bytes <= SMALL_MAX) {
    pthread_mutex_lock(&allocs_lock);
    *ptr = small_alloc(bytes, e);
    pthread_mutex_unlock(&allocs_lock);
    return *ptr ? 0 : -1;
  }
  alloc a = {0};
  if (big_alloc(bytes, kind, &a, e)) return -1;
  pthread_mutex_lock(&allocs_lock);
  int rc = alloc_insert(&a);
  pthread_mutex_unlock(&allocs_lock);
  if (rc) {
    if (kind == CDV_MEM_PINNED) cdv_cuda_host_unregister(a.map);
    unmap(&a);
    mem_unreserve(a.maplen);
    return cdv_fail(e, "cpu.mem_alloc", ENOMEM, "CUDA_ERROR_OUT_OF_MEMORY", "out of host memory");
  }
  if (kind == CDV_MEM_PINNED) cdv_cpu_maps_changed(); /* NOTE [launch worker]; others: cdv_cpu_map_shared */
  *ptr = a.p;
  return 0;
}

/* munmap, after cuMemHostUnregister (cdv_cuda_host_unregister) for pinned memory; a small block goes back to
 * its slab */
static int cpu_mem_free(cdv_device *d, void *ptr, int kind, void *stream, cdv_err *e) {
  (void)d, (void)kind, (void)stream;
  if (!ptr) return 0;
  pthread_mutex_lock(&allocs_lock);
  alloc *a = alloc_find(ptr), found = {0};
  unsigned i;
  slab *s = NULL;
  if (a && a->kind != KIND_SLAB) {
    found = *a;
    a->p = TOMB;
  } else if ((s = block_of(ptr, &i, 1)) != NULL) {
    small_free(s, i);
  }
  pthread_mutex_unlock(&allocs_lock);
  if (s) return 0;
  if (!found.p)
    return cdv_fail(e, "cpu.mem_free", EINVAL, INVALID_VALUE, "pointer %p was not allocated by the cpu device", ptr);
  if (found.kind == CDV_MEM_PINNED) cdv_cuda_host_unregister(found.map);
  if (unmap(&found)) return cdv_cpu_fail_errno(e, "cpu.mem_free", errno, "munmap of %p failed", found.map);
  mem_unreserve(found.maplen);
  return 0;
}

int cdv_cpu_alloc_containing(const void *p, void **base, size_t *len) {
  int rc = -1;
  unsigned i;
  pthread_mutex_lock(&allocs_lock);
  slab *s = block_of(p, &i, 0);
  const alloc *a = s ? NULL : alloc_find(p);
  if (a && a->kind == KIND_SLAB) a = NULL;
  for (size_t k = 0; !s && !a && k < allocs.cap; k++) /* p inside an allocation (a view): a scan */
    if (allocs.v[k].p && allocs.v[k].p != TOMB && allocs.v[k].kind != KIND_SLAB &&
        (const char *)p > (const char *)allocs.v[k].p &&
        (const char *)p < (const char *)allocs.v[k].p + allocs.v[k].len)
      a = &allocs.v[k];
  if (s) {
    *base = block_at(s, i), *len = (size_t)ALIGN << s->cls;
    rc = 0;
  } else if (a) {
    *base = a->p, *len = a->len;
    rc = 0;
  }
  pthread_mutex_unlock(&allocs_lock);
  return rc;
}

/* Room for one element of the largest size after an array that lives in the pool, where the next block is
 * another array's (NOTE [tail canary] in memory.c); an array of its own mapping ends at its guard page. */
static size_t cpu_tail_room(size_t cls) { return cls <= SMALL_MAX ? BIG_ALIGN : 0; }

/* The bytes after an array of `bytes` at ptr that its allocation holds (its canary: NOTE [tail canary] in
 * memory.c); 0 when ptr does not start an allocation of ours. */
static size_t cpu_mem_slack(cdv_device *d, const void *ptr, size_t bytes) {
  (void)d;
  unsigned i;
  const char *end = NULL;
  pthread_mutex_lock(&allocs_lock);
  slab *s = block_of(ptr, &i, 1);
  const alloc *a = s ? NULL : alloc_find(ptr);
  if (s)
    end = block_at(s, i) + ((size_t)ALIGN << s->cls);
  else if (a && a->kind != KIND_SLAB)
    end = (const char *)a->p + a->len;
  pthread_mutex_unlock(&allocs_lock);
  return end && (size_t)(end - (const char *)ptr) > bytes ? (size_t)(end - (const char *)ptr) - bytes : 0;
}

/* The array nearest addr (within a MiB): [*lo, *hi), *small when it is a small array's block; 0 when none. */
int cdv_cpu_alloc_near(uintptr_t addr, uintptr_t *lo, uintptr_t *hi, int *small) {
  uintptr_t best = (uintptr_t)1 << 20;
  *lo = *hi = 0, *small = 0;
  pthread_mutex_lock(&allocs_lock);
  for (size_t k = 0; k < allocs.cap; k++) {
    const alloc *a = &allocs.v[k];
    if (!a->p || a->p == TOMB) continue;
    uintptr_t b = (uintptr_t)a->p, e = b + a->bytes, sz = a->bytes;
    int sm = 0;
    if (a->kind == KIND_SLAB) { /* the block at or next to addr: the first or last one beyond the slab */
      const slab *s = a->s;
      uintptr_t first = (uintptr_t)block_at(s, 0), size = (uintptr_t)ALIGN << s->cls;
      uintptr_t i = addr <= first ? 0 : (addr - first) / size;
      if (i >= s->nblocks) i = s->nblocks - 1;
      if (!(s->bits[i / 64] >> (i % 64) & 1)) continue;
      b = first + i * size, e = b + size, sz = size, sm = 1;
    }
    uintptr_t dist = addr < b ? b - addr : addr >= e ? addr - e + 1 : 0;
    if (dist < best || (dist == 0 && best == 0)) best = dist, *lo = b, *hi = b + sz, *small = sm;
  }
  pthread_mutex_unlock(&allocs_lock);
  return *hi != 0;
}

/* Where addr is relative to the nearest array (within a MiB), for a fault's message; "" when none is near. */
void cdv_cpu_alloc_describe(uintptr_t addr, char *out, size_t n) {
  uintptr_t lo, hi;
  int small;
  out[0] = 0;
  if (!cdv_cpu_alloc_near(addr, &lo, &hi, &small)) return;
  const char *what = small ? "the small array" : "the array";
  if (addr < lo)
    snprintf(out, n, ", %lu bytes before %s at 0x%lx (%lu bytes)", (unsigned long)(lo - addr), what, (unsigned long)lo,
             (unsigned long)(hi - lo));
  else if (addr >= hi)
    snprintf(out, n, ", %lu bytes past the end of %s at 0x%lx (%lu bytes)", (unsigned long)(addr - hi), what,
             (unsigned long)lo, (unsigned long)(hi - lo));
  else
    snprintf(out, n, ", inside %s at 0x%lx (%lu bytes)", what, (unsigned long)lo, (unsigned long)(hi - lo));
}

static int on_host(const cdv_device *dev) { return !dev || dev->be == &cdv_backend_cpu; }

/* memmove: the cpu backend only copies between host buffers (a copy with a GPU side is the CUDA backend's) */
static int cpu_memcpy(cdv_device *d, void *dst, cdv_device *dst_dev, const void *src, cdv_device *src_dev, size_t n,
                      void *stream, cdv_err *e) {
  (void)d, (void)stream;
  if (!on_host(dst_dev) || !on_host(src_dev))
    return cdv_fail(e, "cpu.memcpy", EINVAL, INVALID_VALUE, "the cpu backend cannot copy %s %s",
                    on_host(dst_dev) ? "from" : "to", on_host(dst_dev) ? src_dev->alias : dst_dev->alias);
  if (n && (!dst || !src))
    return cdv_fail(e, "cpu.memcpy", EINVAL, INVALID_VALUE, "copy of %zu bytes with a NULL pointer", n);
  if (n && dst != src) memmove(dst, src, n);
  return 0;
}

/* A pattern fill: one element, then doubling copies (no alignment assumption about dst). */
static int cpu_memset(cdv_device *d, void *dst, const void *pattern, size_t elsize, size_t count, void *stream,
                      cdv_err *e) {
  (void)d, (void)stream;
  if (elsize != 1 && elsize != 2 && elsize != 4 && elsize != 8)
    return cdv_fail(e, "cpu.memset", EINVAL, INVALID_VALUE, "element size %zu is not 1, 2, 4 or 8", elsize);
  if (!count) return 0;
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

static int check_stream(const void *s, cdv_err *e) {
  if (s && ((const cpu_stream *)s)->magic != STREAM_MAGIC)
    return cdv_fail(e, "cpu.stream", 400, INVALID_HANDLE, "invalid stream handle");
  return 0;
}

static int check_event(const void *ev, cdv_err *e) {
  if (!ev || ((const cpu_event *)ev)->magic != EVENT_MAGIC)
    return cdv_fail(e, "cpu.event", 400, INVALID_HANDLE, "invalid event handle");
  return 0;
}

static int cpu_stream_create(cdv_device *d, int priority, int blocking, void **s, cdv_err *e) {
  (void)d, (void)blocking;
  cpu_stream *st = malloc(sizeof *st);
  if (!st) return cdv_fail(e, "cpu.stream_create", ENOMEM, "CUDA_ERROR_OUT_OF_MEMORY", "out of host memory");
  st->magic = STREAM_MAGIC;
  st->priority = priority;
  *s = st;
  return 0;
}

static int cpu_stream_destroy(cdv_device *d, void *s, cdv_err *e) {
  (void)d;
  if (!s) return cdv_fail(e, "cpu.stream_destroy", 400, INVALID_HANDLE, "the default stream cannot be destroyed");
  if (check_stream(s, e)) return -1;
  ((cpu_stream *)s)->magic = 0;
  free(s);
  return 0;
}

static int cpu_stream_synchronize(cdv_device *d, void *s, cdv_err *e) {
  (void)d;
  return check_stream(s, e);
}

static int cpu_stream_query(cdv_device *d, void *s, int *idle, cdv_err *e) {
  (void)d;
  *idle = 1;
  return check_stream(s, e);
}

static int cpu_stream_wait_event(cdv_device *d, void *s, void *ev, cdv_err *e) {
  (void)d;
  return check_stream(s, e) || check_event(ev, e) ? -1 : 0;
}

static int cpu_stream_priority_range(cdv_device *d, int *least, int *greatest, cdv_err *e) {
  (void)d, (void)e;
  *least = *greatest = 0;
  return 0;
}

static int cpu_event_create(cdv_device *d, int timing, int blocking, void **ev, cdv_err *e) {
  (void)d, (void)blocking;
  cpu_event *x = calloc(1, sizeof *x);
  if (!x) return cdv_fail(e, "cpu.event_create", ENOMEM, "CUDA_ERROR_OUT_OF_MEMORY", "out of host memory");
  x->magic = EVENT_MAGIC;
  x->timing = timing != 0;
  *ev = x;
  return 0;
}

static int cpu_event_destroy(cdv_device *d, void *ev, cdv_err *e) {
  (void)d;
  if (check_event(ev, e)) return -1;
  ((cpu_event *)ev)->magic = 0;
  free(ev);
  return 0;
}

/* clock_gettime(CLOCK_MONOTONIC): the stream has done all earlier work by now */
static int cpu_event_record(cdv_device *d, void *ev, void *s, cdv_err *e) {
  (void)d;
  if (check_event(ev, e) || check_stream(s, e)) return -1;
  cpu_event *x = ev;
  clock_gettime(CLOCK_MONOTONIC, &x->t);
  x->recorded = 1;
  return 0;
}

static int cpu_event_query(cdv_device *d, void *ev, int *done, cdv_err *e) {
  (void)d;
  *done = 1;
  return check_event(ev, e);
}

static int cpu_event_synchronize(cdv_device *d, void *ev, cdv_err *e) {
  (void)d;
  return check_event(ev, e);
}

/* cuEventElapsedTime's rules: both events recorded, both with timing (CUDA_ERROR_INVALID_HANDLE otherwise) */
static int cpu_event_elapsed(cdv_device *d, void *start, void *end, float *ms, cdv_err *e) {
  (void)d;
  if (check_event(start, e) || check_event(end, e)) return -1;
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

static int cpu_compile(cdv_device *d, const cdv_compile_req *req, cdv_image *out, cdv_err *e) {
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

static int remap_shared(uintptr_t a, size_t len) {
  void *t = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (t == MAP_FAILED) return -1;
  memcpy(t, (void *)a, len);
  if (mremap(t, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)a) == MAP_FAILED) {
    munmap(t, len);
    return -1;
  }
  return 0;
}

static int share_segments(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  share_ctx *c = data;
  if (info->dlpi_addr != c->base) return 0;
  uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE), relro_end = 0;
  for (int i = 0; i < info->dlpi_phnum; i++)
    if (info->dlpi_phdr[i].p_type == PT_GNU_RELRO)
      relro_end = (info->dlpi_addr + info->dlpi_phdr[i].p_vaddr + info->dlpi_phdr[i].p_memsz) & ~(pg - 1);
  for (int i = 0; i < info->dlpi_phnum && c->rc == 0; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_W)) continue;
    uintptr_t start = (info->dlpi_addr + ph->p_vaddr) & ~(pg - 1);
    uintptr_t end = (info->dlpi_addr + ph->p_vaddr + ph->p_memsz + pg - 1) & ~(pg - 1);
    if (start < relro_end) start = relro_end;
    if (start < end) c->rc = remap_shared(start, end - start);
  }
  c->found = 1;
  return 1;
}

static int share_data(void *h, cdv_err *e) {
  struct link_map *lm = NULL;
  if (dlinfo(h, RTLD_DI_LINKMAP, &lm) || !lm)
    return cdv_fail(e, "cpu.module_load", 0, "CUDA_ERROR_INVALID_IMAGE", "cannot inspect the kernel object: %s",
                    dlerror());
  share_ctx c = {lm->l_addr, 0, 0};
  dl_iterate_phdr(share_segments, &c);
  if (c.rc || !c.found)
    return cdv_fail(e, "cpu.module_load", errno, "CUDA_ERROR_INVALID_IMAGE",
                    "cannot share the data of the "
                    "kernel object %s",
                    lm->l_name);
  return 0;
}

/* An object built for another layout of NOTE [cpu kernel ABI] (cpu.h) must not run. */
static int check_abi(void *h, const char *path, cdv_err *e) {
  const int *abi = dlsym(h, "cdv_cpu_abi"), *cs = dlsym(h, "cdv_cpu_ctx_size"), *hs = dlsym(h, "cdv_cpu_fhdr_size");
  if (!abi || !cs || !hs || *abi != CDV_CPU_ABI || *cs != (int)sizeof(cdv_cpu_ctx) || *hs != (int)sizeof(cdv_cpu_fhdr))
    return cdv_fail(e, "cpu.module_load", 0, "CUDA_ERROR_INVALID_IMAGE",
                    "the kernel object '%s' was built for "
                    "another version of the cpu device",
                    path);
  return 0;
}

/* dlopen(RTLD_NOW | RTLD_LOCAL) of a cached object not loaded yet, after checking that it is whole
 * (cdv_cpu_cache_verify) and that loading it runs none of its code (NOTE [no static initialisers]); its data is then made shared. Called with modules_lock held. */
static loaded *load_object(const char *path, cdv_err *e) {
  for (loaded *l = loaded_objects; l; l = l->next)
    if (!strcmp(l->path, path)) return l;
  if (cdv_cpu_cache_verify(path, e) || cdv_cpu_object_check(path, e)) return NULL;
  loaded *l = calloc(1, sizeof *l);
  if (!l || !(l->path = strdup(path))) {
    free(l);
    cdv_fail(e, "cpu.module_load", ENOMEM, "CUDA_ERROR_OUT_OF_MEMORY", "out of host memory");
    return NULL;
  }
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  int rc =
      h ? 0
        : cdv_fail(e, "cpu.module_load", 0, "CUDA_ERROR_INVALID_IMAGE", "cannot load the kernel object: %s", dlerror());
  if (rc == 0) rc = check_abi(h, path, e);
  if (rc == 0) rc = share_data(h, e);
  if (rc) {
    free(l->path);
    free(l);
    return NULL; /* no dlclose: a failed object stays mapped, harmlessly (see cpu_module_unload) */
  }
  const int *flags = dlsym(h, "cdv_cpu_flags");
  l->handle = h;
  l->flags = flags ? *flags : CDV_CPU_FLAG_FIBERS;
  l->next = loaded_objects;
  loaded_objects = l;
  cdv_cpu_maps_changed(); /* NOTE [launch worker] */
  return l;
}

static int cpu_module_load(cdv_device *d, const cdv_image *img, void **mod, cdv_err *e) {
  (void)d;
  if (!img || !img->path)
    return cdv_fail(e, "cpu.module_load", 0, "CUDA_ERROR_INVALID_IMAGE",
                    "the image has no cpu object (it was "
                    "compiled for a CUDA device)");
  cpu_module *m = calloc(1, sizeof *m);
  if (!m) return cdv_fail(e, "cpu.module_load", ENOMEM, "CUDA_ERROR_OUT_OF_MEMORY", "out of host memory");
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
static int cpu_module_unload(cdv_device *d, void *mod, cdv_err *e) {
  (void)d, (void)e;
  cpu_module *m = mod;
  if (!m) return 0;
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
static int cpu_module_function(cdv_device *d, void *mod, const char *symbol, void **fn, cdv_err *e) {
  (void)d;
  cpu_module *m = mod;
  if (!m || !symbol) return cdv_fail(e, "cpu.module_function", 400, INVALID_HANDLE, "invalid module handle");
  void *entry = dlsym(m->handle, symbol);
  if (!entry)
    return cdv_fail(e, "cpu.module_function", 500, "CUDA_ERROR_NOT_FOUND",
                    "kernel symbol '%s' not found in the "
                    "module",
                    symbol);
  for (cdv_cpu_func *f = m->funcs; f; f = f->next)
    if (*(void **)&f->entry == entry) {
      *fn = f;
      return 0;
    }
  cdv_cpu_func *f = calloc(1, sizeof *f);
  if (!f) return cdv_fail(e, "cpu.module_function", ENOMEM, "CUDA_ERROR_OUT_OF_MEMORY", "out of host memory");
  char companion[256];
  snprintf(companion, sizeof companion, "%s_name", symbol);
  const char *name = dlsym(m->handle, companion);
  snprintf(f->name, sizeof f->name, "%s", name ? name : symbol);
  snprintf(companion, sizeof companion, "%s_sig", symbol);
  f->sig = dlsym(m->handle, companion);
  snprintf(companion, sizeof companion, "%s_flags", symbol);
  const int *flags = dlsym(m->handle, companion); /* NOTE [kernel paths] in cpu_scan.c */
  *(void **)&f->entry = entry;
  f->flags = flags ? *flags : m->flags;
  snprintf(companion, sizeof companion, "%s_fis", symbol); /* NOTE [fast paths] in cpu_fission.c */
  *(void **)&f->fis = dlsym(m->handle, companion);
  snprintf(companion, sizeof companion, "%s_fis_row", symbol);
  const unsigned long *row = dlsym(m->handle, companion);
  f->fis_row = row ? *row : 0;
  if (!row) f->fis = NULL;
  snprintf(companion, sizeof companion, "%s_why", symbol);
  f->why = dlsym(m->handle, companion);
  f->next = m->funcs;
  m->funcs = f;
  *fn = f;
  return 0;
}

/* A global's accessor (NOTE [module globals] in module.c; cpu_compile.c writes it): the variable's address in
 * the object, whose writable data every forked launch shares (NOTE [shared module data]), and its size. */
static int cpu_module_global(cdv_device *d, void *mod, const char *symbol, void **ptr, size_t *bytes, cdv_err *e) {
  (void)d;
  cpu_module *m = mod;
  if (!m || !symbol) return cdv_fail(e, "cpu.module_global", 400, INVALID_HANDLE, "invalid module handle");
  void *(*get)(unsigned long *) = NULL;
  *(void **)&get = dlsym(m->handle, symbol);
  if (!get)
    return cdv_fail(e, "cpu.module_global", 500, "CUDA_ERROR_NOT_FOUND",
                    "global symbol '%s' not found in the "
                    "module",
                    symbol);
  unsigned long n = 0;
  *ptr = get(&n);
  *bytes = n;
  return 0;
}

/* ---------------------------------------------------------------- kernels */
static int cpu_func_info(cdv_device *d, void *fn, cdv_func_info *out, cdv_err *e) {
  (void)d;
  if (!fn) return cdv_fail(e, "cpu.func_info", 400, INVALID_HANDLE, "invalid kernel handle");
  memset(out, 0, sizeof *out);
  out->max_threads_per_block = CDV_CPU_MAX_THREADS;
  const cdv_cpu_func *f = fn;
  out->cpu_path = f->fis && (f->flags & CDV_CPU_FLAG_FISSION) ? "fission"
                  : f->fis && (f->flags & CDV_CPU_FLAG_SIMD)  ? "simd"
                  : (f->flags & CDV_CPU_FLAG_FIBERS)          ? "fibers"
                                                              : "loop";
  if (!f->fis) /* k.cpu_reason: nil on simd and fission */
    out->cpu_reason = f->why ? f->why : "the source was compiled without its fast paths";
  return 0;
}

/* The layout CUDA gives a parameter buffer (each parameter at the next multiple of its alignment), from the
 * sizes and alignments the object exports; 1 (unknown) for an object without them or i out of range. */
static int cpu_param_info(cdv_device *d, void *fn, int i, size_t *offset, size_t *size) {
  (void)d;
  const cdv_cpu_sig *sig = fn ? ((cdv_cpu_func *)fn)->sig : NULL;
  if (!sig || i < 0 || (unsigned)i >= sig->n) return 1;
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
static int cpu_occupancy(cdv_device *d, void *fn, int block, size_t shared, int *blocks_per_sm, cdv_err *e) {
  (void)d;
  if (!fn) return cdv_fail(e, "cpu.occupancy", 400, INVALID_HANDLE, "invalid kernel handle");
  if (block < 1 || block > CDV_CPU_MAX_THREADS)
    return cdv_fail(e, "cpu.occupancy", 1, INVALID_VALUE, "block size %d is not between 1 and %d", block,
                    CDV_CPU_MAX_THREADS);
  *blocks_per_sm = shared > CDV_CPU_MAX_DYN_SHARED ? 0 : 2048 / block > 1 ? 2048 / block : 1;
  return 0;
}

static int cpu_launch(cdv_device *d, void *fn, const unsigned grid[3], const unsigned block[3], unsigned shared,
                      void *stream, void **args, const cdv_launch_opts *opts, cdv_err *e) {
  (void)d;
  if (check_stream(stream, e)) return -1;
  return cdv_cpu_launch(fn, grid, block, shared, args, 0, opts, e);
}

/* NOTE [cpu grid sync] (cpu_run.c): every block on a worker thread of its own */
static int cpu_launch_cooperative(cdv_device *d, void *fn, const unsigned grid[3], const unsigned block[3],
                                  unsigned shared, void *stream, void **args, const cdv_launch_opts *opts, cdv_err *e) {
  (void)d;
  if (check_stream(stream, e)) return -1;
  return cdv_cpu_launch(fn, grid, block, shared, args, 1, opts, e);
}

/* The occupancy model (cpu_occupancy) on every worker thread, within what cdv_cpu_coop_max allows. */
static int cpu_coop_limit(cdv_device *d, void *fn, int block, size_t shared, int *per_sm, int *sms, cdv_err *e) {
  if (cpu_occupancy(d, fn, block, shared, per_sm, e)) return -1;
  int cap = cdv_cpu_coop_max((unsigned)block);
  *sms = cdv_cpu_worker_count();
  if (*per_sm * *sms > cap) {
    *per_sm = cap / *sms;
    if (*per_sm == 0) *per_sm = 1, *sms = cap;
  }
  return 0;
}

/* (see NOTE [managed memory]) the cpu device's managed memory is its ordinary memory, already where it is used */
static int cpu_mem_prefetch(cdv_device *d, void *ptr, size_t bytes, cdv_device *to, void *stream, cdv_err *e) {
  (void)d, (void)ptr, (void)bytes, (void)to, (void)stream, (void)e;
  return 0;
}

static int cpu_mem_advise(cdv_device *d, void *ptr, size_t bytes, int advice, cdv_device *to, cdv_err *e) {
  (void)d, (void)ptr, (void)bytes, (void)advice, (void)to, (void)e;
  return 0;
}

const cdv_backend cdv_backend_cpu = {
    .kind = "cpu",
    .host_memory = 1, /* NOTE [backend properties] */
    .tail_room = cpu_tail_room, /* NOTE [tail canary] in memory.c */
    .mem_slack = cpu_mem_slack,
    .done_when_queued = 1,
    .native_code = 1,
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
    .launch_cooperative = cpu_launch_cooperative,
    .coop_limit = cpu_coop_limit,
    .mem_prefetch = cpu_mem_prefetch,
    .mem_advise = cpu_mem_advise,
    .loop = cdv_cpu_loop,
    .reduce = cdv_cpu_reduce,
};
