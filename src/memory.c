/*
 * memory.c: memory statistics per device (PyTorch's caching-allocator counters), the pinned host pool
 * (PyCUDA's PageLockedMemoryPool) and giving cached memory back.
 *
 * The counters are kept by array.c through cdv_mem_account, process-wide per device (memory is a
 * device resource, not a lua_State's). `reserved` is what the device's stream-ordered pool (NOTE [caching pool] in
 * backend_cuda.c) and its granule segments (NOTE [granules]) hold: allocated memory plus freed memory kept for reuse.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cdv.h"

/* ------------------------------------------------------------ the pinned host pool */
/* NOTE [pinned pool]: page-locking is slow (pinning or unpinning a few MiB costs milliseconds: the driver
 * locks and maps every page), so pinned host memory is pinned once and kept: a freed block goes to the free list of its size
 * class, and the next request of that class takes it back. There are four classes per power of two (2^k
 * times 1, 1.25, 1.5 and 1.75, at least a page), so at most a quarter more than asked is pinned and requests
 * of nearby sizes share blocks: PyCUDA's pool bins sizes with the same two mantissa bits. Powers of two alone
 * would waste up to half of a scarce resource (a 257 MiB array would pin 512 MiB); fixed 2 MiB granules would
 * give every size its own list, so a program whose sizes vary would keep pinning. Blocks are never split or
 * merged, and the most recently freed block of a class is reused first.
 * The pool is process-wide behind one mutex: pinned memory serves every context and every lua_State, and a
 * block has one owner at a time. A block comes back idle: array.c waits for the stream that used it last,
 * staging.c for its last piece. Cached blocks go back to the backend on cd.empty_cache() (no argument) or
 * cd.empty_cache("cpu") (pinned arrays are the cpu device's), before a CUDA context is reset (the pinning may
 * belong to it), and when pinning new memory fails. */
#define PINNED_MIN_LOG2 12 /* one page */
#define PINNED_CLASSES 256 /* bins up to 2^75 bytes: every size_t */

typedef struct pinned_entry {
  cdv_device *dev;
  void *ptr;
  struct pinned_entry *next;
} pinned_entry;

static struct {
  pinned_entry *bins[PINNED_CLASSES]; /* cached blocks, by class */
  int64_t allocated, reserved, active_blocks, held_blocks, hits, misses;
} pinned;
static pthread_mutex_t pinned_lock = PTHREAD_MUTEX_INITIALIZER;

/* The class of a request of `bytes` (> 0): the bytes pinned for it (0 when that overflows) and its bin. */
static size_t pinned_class(size_t bytes, int *bin) {
  if (bytes <= (size_t)1 << PINNED_MIN_LOG2) {
    *bin = 0;
    return (size_t)1 << PINNED_MIN_LOG2;
  }
  int k = 63 - __builtin_clzll((unsigned long long)(bytes - 1)); /* 2^k < bytes <= 2^(k+1) */
  size_t step = (size_t)1 << (k - 2), c = (bytes + step - 1) & ~(step - 1);
  *bin = 4 * (k - PINNED_MIN_LOG2) + (int)(c / step) - 4; /* c / step is 5 to 8 */
  return c;
}

size_t cdv_pinned_class(size_t bytes) {
  int bin;
  return pinned_class(bytes, &bin);
}

static size_t bin_bytes(int bin) {
  if (bin == 0) return (size_t)1 << PINNED_MIN_LOG2;
  int k = PINNED_MIN_LOG2 + (bin - 1) / 4;
  return (size_t)((bin - 1) % 4 + 5) << (k - 2);
}

/* Unlinks the cached blocks of d (of every device when d is NULL) into one list, with the lock held. */
static pinned_entry *take_cached(cdv_device *d) {
  pinned_entry *out = NULL;
  for (int bin = 0; bin < PINNED_CLASSES; bin++) {
    for (pinned_entry **p = &pinned.bins[bin]; *p != NULL;) {
      pinned_entry *x = *p;
      if (d != NULL && x->dev != d) {
        p = &x->next;
        continue;
      }
      *p = x->next;
      x->next = out;
      out = x;
      pinned.held_blocks--;
      pinned.reserved -= (int64_t)bin_bytes(bin);
    }
  }
  return out;
}

/* Gives the cached blocks back to their backend's mem_free, outside the lock (unpinning is slow). Every block
 * is freed; the first failure is the one reported. */
int cdv_pinned_trim(cdv_device *d, cdv_err *e) {
  pthread_mutex_lock(&pinned_lock);
  pinned_entry *list = take_cached(d);
  pthread_mutex_unlock(&pinned_lock);
  int rc = 0;
  while (list != NULL) {
    pinned_entry *x = list;
    cdv_err later;
    list = x->next;
    if (x->dev->be->mem_free(x->dev, x->ptr, CDV_MEM_PINNED, NULL, rc ? &later : e) != 0) rc = -1;
    free(x);
  }
  return rc;
}

/* A cached block of the class when there is one (a hit), else the backend's mem_alloc(CDV_MEM_PINNED); when
 * that fails with blocks of d cached, they are given back and it is tried once more. */
int cdv_pinned_alloc(cdv_device *d, size_t bytes, void **ptr, cdv_err *e) {
  int bin;
  size_t c = bytes ? pinned_class(bytes, &bin) : 0;
  *ptr = NULL;
  if (bytes == 0) return 0;
  if (c < bytes) return cdv_fail(e, "cdv_pinned_alloc", 2, "CUDA_ERROR_OUT_OF_MEMORY", "cannot pin %zu bytes", bytes);
  pthread_mutex_lock(&pinned_lock);
  pinned_entry **p = &pinned.bins[bin];
  while (*p != NULL && (*p)->dev != d) p = &(*p)->next;
  pinned_entry *x = *p;
  if (x != NULL) {
    *p = x->next;
    pinned.held_blocks--;
    pinned.hits++;
    pinned.active_blocks++;
    pinned.allocated += (int64_t)c;
  }
  pthread_mutex_unlock(&pinned_lock);
  if (x != NULL) {
    *ptr = x->ptr;
    free(x);
    return 0;
  }
  int rc = d->be->mem_alloc(d, c, CDV_MEM_PINNED, NULL, ptr, e);
  if (rc != 0) { /* the cache may hold what is missing */
    cdv_err ignored;
    cdv_pinned_trim(d, &ignored);
    rc = d->be->mem_alloc(d, c, CDV_MEM_PINNED, NULL, ptr, e);
  }
  if (rc != 0) return -1;
  pthread_mutex_lock(&pinned_lock);
  pinned.misses++;
  pinned.active_blocks++;
  pinned.allocated += (int64_t)c;
  pinned.reserved += (int64_t)c;
  pthread_mutex_unlock(&pinned_lock);
  return 0;
}

/* Keeps an idle block for reuse (gives it back at once when there is no memory for its list entry). */
void cdv_pinned_free(cdv_device *d, void *ptr, size_t bytes) {
  int bin;
  if (ptr == NULL || bytes == 0) return;
  size_t c = pinned_class(bytes, &bin);
  pinned_entry *x = malloc(sizeof *x);
  pthread_mutex_lock(&pinned_lock);
  pinned.active_blocks--;
  pinned.allocated -= (int64_t)c;
  if (x != NULL) {
    x->dev = d;
    x->ptr = ptr;
    x->next = pinned.bins[bin];
    pinned.bins[bin] = x;
    pinned.held_blocks++;
  } else {
    pinned.reserved -= (int64_t)c;
  }
  pthread_mutex_unlock(&pinned_lock);
  cdv_err e;
  if (x == NULL) d->be->mem_free(d, ptr, CDV_MEM_PINNED, NULL, &e);
}

/* cd.pinned_memory_stats() -> {allocated=, reserved=, held_bytes=, active_blocks=, held_blocks=, hits=, misses=}:
 * bytes as pinned (class sizes); hits are requests served from the cache, misses those that pinned memory. */
static int l_pinned_memory_stats(lua_State *L) {
  pthread_mutex_lock(&pinned_lock);
  int64_t v[] = {pinned.allocated,     pinned.reserved,    pinned.reserved - pinned.allocated,
                 pinned.active_blocks, pinned.held_blocks, pinned.hits,
                 pinned.misses};
  pthread_mutex_unlock(&pinned_lock);
  static const char *const names[] = {"allocated",   "reserved", "held_bytes", "active_blocks",
                                      "held_blocks", "hits",     "misses"};
  lua_createtable(L, 0, (int)(sizeof v / sizeof v[0]));
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
    lua_pushinteger(L, v[i]);
    lua_setfield(L, -2, names[i]);
  }
  return 1;
}

/* ------------------------------------------------------------ statistics and empty_cache */

/* NOTE [block cache]: the driver's pool (NOTE [caching pool] in backend_cuda.c) caches device memory, but
 * asking it costs a cuMemAllocAsync and a cuMemFreeAsync per array: 1.1 us of the 2.2 us that a 1 MiB
 * cd.empty + free took on the H100, where PyTorch's caching allocator answers a repeat in about 2 us in all.
 * So each lua_State keeps the last CDV_BLOCK_SLOTS device blocks it freed, as PyTorch keeps its free blocks,
 * and an allocation of the same size class, device and stream takes one back without calling the backend.
 * Reuse on the stream the block was freed on is what the driver's pool itself does without waiting: the
 * free was ordered after the work that used the block on that stream, and anything the new owner queues
 * there comes after it. A block freed on another stream is not reused here; the backend's pool decides.
 * Classes are multiples of 512 bytes (what is asked for is rounded up to it); blocks larger than
 * BLOCK_MAX_BYTES are not kept (their allocation costs nothing next to their use, and a kept one would hold
 * memory that only its exact size could reuse). When the slots are full, the oldest block goes back.
 * The cache is the state's, not the process's: a lua_State runs on one thread at a time, so it needs no
 * lock, and it never frees on another state's stream while that state destroys the stream. Blocks go back
 * to the backend on out of memory (array.c, before its retry), on cd.empty_cache, before one of the state's
 * streams is destroyed (those kept for it), before a reset, when a mapped device is unmapped, and when the
 * state closes; a block whose context is gone (a reset, a host's teardown) is forgotten, not freed, and one
 * made before a reset is never handed out again. held_blocks in memory_stats counts the kept blocks of
 * every state; the driver's pool keeps more, as address ranges rather than blocks, which held_bytes
 * includes. */
#define BLOCK_MAX_BYTES ((size_t)64 << 20)
#define BLOCK_ALIGN ((size_t)512)

typedef struct memstat {
  int64_t allocated, max_allocated, active_blocks;
  int64_t held_blocks, held_bytes; /* NOTE [block cache], every state's */
} memstat;

/* Every lua_State of the process counts into these, each field an atomic of its own: a mutex cost about 550
 * of the 4500 instructions of a 1 MiB cd.empty + free, for counters that need no common snapshot. */
static memstat stats[CDV_MAXDEV];

static int64_t stat_add(int64_t *field, int64_t v) { return __atomic_add_fetch(field, v, __ATOMIC_RELAXED); }
static int64_t stat_get(int64_t *field) { return __atomic_load_n(field, __ATOMIC_RELAXED); }

static void held_account(cdv_device *d, int64_t bytes, int blocks) {
  stat_add(&stats[d->index].held_blocks, blocks);
  stat_add(&stats[d->index].held_bytes, bytes);
}

size_t cdv_block_class(size_t bytes) {
  return bytes > SIZE_MAX - (BLOCK_ALIGN - 1) ? bytes : (bytes + BLOCK_ALIGN - 1) & ~(BLOCK_ALIGN - 1);
}

/* The class an array of `bytes` on d takes: the block cache's, or one with room for d's canary (NOTE [tail
 * canary]). */
size_t cdv_array_class(const cdv_device *d, size_t bytes) {
  size_t c = cdv_block_class(bytes), room = d->be->tail_room ? d->be->tail_room(c) : 0;
  return c - bytes >= room || bytes > SIZE_MAX - room ? c : cdv_block_class(bytes + room);
}

/* NOTE [tail canary]: on the cpu device a kernel's store one element past an array's end landed in the unused
 * rest of the array's own block (the block cache rounds sizes to 512 bytes) and went unseen, unless the size
 * was a multiple of 512 (then the guard page caught it). So the cpu backend asks for room after an array
 * (tail_room): a class that would leave fewer than 16 bytes (the largest element) after an array that lives
 * in a slab (NOTE [cpu memory] in backend_cpu.c), where the next block is another array's, is replaced by the
 * next one; an array of its own mapping ends at its guard page or leaves a multiple of its element size, so an
 * element one past its end either faults or lies wholly in the slack. The bytes after the array's last one, to
 * the end of its allocation (mem_slack, at most CDV_CANARY_MAX of them), hold a pattern, written when the
 * block is handed to the array. After each launch, kernel.c compares the pattern
 * after every Array argument's block (not a view's own end: the block's) and raises an error that names the
 * argument and the bytes past the end that changed, then writes the pattern again. A store that starts past
 * the end is thus caught whenever it lands in the slack (always for one element past the end; for a big
 * array, up to its guard page, which catches the rest), unless it writes the pattern's own bytes there. It
 * cannot name the thread (the launch is over when the pattern is read). Memory a host lends (cudadev_push_array, DLPack)
 * is not ours and has no canary. The cost is a compare of at most CDV_CANARY_MAX bytes per Array argument
 * per launch. The pattern depends on the byte's address, so a fill of one repeated byte does not match it. */
static const unsigned char canary[32] = {0xa5, 0x5c, 0xc3, 0x3a, 0x96, 0x69, 0xd2, 0x2d, 0xb4, 0x4b, 0xe1,
                                         0x1e, 0x87, 0x78, 0xcc, 0x33, 0xa5, 0x5c, 0xc3, 0x3a, 0x96, 0x69,
                                         0xd2, 0x2d, 0xb4, 0x4b, 0xe1, 0x1e, 0x87, 0x78, 0xcc, 0x33};

/* The pattern's bytes for the up to 16 bytes at p (twice over in canary[], so any start has 16 in a row). */
static const unsigned char *canary_at(const unsigned char *p) { return canary + ((uintptr_t)p & 15); }

void cdv_canary_fill(cdv_block *b) {
  unsigned char *p = (unsigned char *)b->ptr + b->bytes;
  for (size_t i = 0; i < b->slack; i += 16) memcpy(p + i, canary_at(p + i), b->slack - i < 16 ? b->slack - i : 16);
}

/* The first and last bytes past the end of b whose pattern changed (1), rewritten; 0 when none did. Compared 8
 * bytes at a time, inline (libc's memcmp per 16 bytes cost 80 ns an argument): this runs after every launch, for
 * each Array argument. */
int cdv_canary_check(cdv_block *b, size_t *first, size_t *last) {
  const unsigned char *p = (const unsigned char *)b->ptr + b->bytes;
  size_t n = b->slack, i = 0;
  for (uint64_t x, y; i + 8 <= n; i += 8) {
    memcpy(&x, p + i, 8), memcpy(&y, canary_at(p + i), 8);
    if (x != y) break;
  }
  while (i < n && p[i] == canary_at(p + i)[0]) i++;
  if (i == n) return 0;
  while (p[i] == canary_at(p + i)[0]) i++;
  while (p[n - 1] == canary_at(p + n - 1)[0]) n--;
  *first = i, *last = n - 1;
  cdv_canary_fill(b);
  return 1;
}

/* Takes slot i out of the state's cache (the order of the rest kept) and out of the counts. */
static cdv_held_block unhold(cdv_state *st, int i) {
  cdv_held_block h = st->held[i];
  memmove(&st->held[i], &st->held[i + 1], sizeof *st->held * (size_t)(--st->nheld - i));
  held_account(h.dev, -(int64_t)h.bytes, -1);
  return h;
}

/* Frees a block that leaves the cache, unless its context went away (then its memory went too). */
static int give_back(cdv_held_block *h, cdv_err *e) {
  if (!cdv_still_owned(h->dev, h->generation)) return 0;
  return h->dev->be->mem_free(h->dev, h->ptr, CDV_MEM_DEVICE, h->stream, e);
}

/* A kept block of d of `bytes` (a class) freed on `stream`, the most recently freed first; NULL when none. */
void *cdv_block_take(cdv_state *st, cdv_device *d, size_t bytes, void *stream) {
  for (int i = st->nheld - 1; i >= 0; i--) {
    cdv_held_block *h = &st->held[i];
    if (h->dev == d && h->bytes == bytes && h->stream == stream && h->generation == d->generation)
      return unhold(st, i).ptr;
  }
  return NULL;
}

/* Keeps a freed block (its class size, the stream its free is ordered on); when the slots are full the oldest
 * kept block goes back to the backend instead. Blocks too large to keep, or freed while the state closes, go
 * back at once. */
int cdv_block_put(cdv_state *st, cdv_device *d, void *ptr, size_t bytes, void *stream, cdv_err *e) {
  cdv_held_block h = {d, d->generation, ptr, bytes, stream};
  if (bytes > BLOCK_MAX_BYTES || st->closing) return give_back(&h, e);
  cdv_held_block out = {NULL, 0, NULL, 0, NULL};
  if (st->nheld == CDV_BLOCK_SLOTS) out = unhold(st, 0);
  st->held[st->nheld++] = h;
  held_account(d, (int64_t)bytes, 1);
  return out.ptr ? give_back(&out, e) : 0;
}

/* Gives back the state's kept blocks of d (every device's when d is NULL): those freed on `stream`, or with
 * `all` every one. The first failure is the one reported. */
int cdv_block_release(cdv_state *st, cdv_device *d, void *stream, int all, cdv_err *e) {
  int rc = 0;
  for (int i = st->nheld - 1; i >= 0; i--) {
    cdv_held_block *h = &st->held[i];
    if ((d != NULL && h->dev != d) || (!all && h->stream != stream)) continue;
    cdv_held_block out = unhold(st, i);
    cdv_err later;
    if (give_back(&out, rc ? &later : e) != 0) rc = -1;
  }
  return rc;
}

void cdv_mem_account(cdv_device *d, int64_t bytes, int blocks) {
  memstat *s = &stats[d->index];
  int64_t now = stat_add(&s->allocated, bytes), peak = stat_get(&s->max_allocated);
  stat_add(&s->active_blocks, blocks);
  while (now > peak &&
         !__atomic_compare_exchange_n(&s->max_allocated, &peak, now, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
}

static memstat get(cdv_device *d) {
  memstat *s = &stats[d->index];
  return (memstat){stat_get(&s->allocated), stat_get(&s->max_allocated), stat_get(&s->active_blocks),
                   stat_get(&s->held_blocks), stat_get(&s->held_bytes)};
}

/* The backend's pool_reserved, cuMemPoolGetAttribute(RESERVED_MEM_CURRENT) of the device's default pool and the
 * bytes of its granule segments (the blocks kept by NOTE [block cache] are allocated from them); without a pool,
 * what is allocated or kept is all that is reserved. */
static int64_t reserved(lua_State *L, cdv_device *d) {
  uint64_t v = 0;
  cdv_err e;
  if (d->be->pool_reserved == NULL || !d->is_mempool_supported) {
    memstat s = get(d);
    return s.allocated + s.held_bytes;
  }
  if (d->be->pool_reserved(d, &v, &e)) cdv_raise(L, d, &e);
  return (int64_t)v;
}

/* ------------------------------------------------------------ collector pacing */
/* NOTE [collector pacing]: an Array is a small userdata in front of memory the collector cannot see (device memory,
 * or the cpu device's mappings), and Lua paces itself by its own heap alone: `c = a + b` in a loop held 200 dropped
 * 16 MiB results at once on the cpu device, and the H100's pool reserved 26.5 GB after a loop over three live
 * 256 MiB arrays (issue 28). So each state counts the bytes of its arrays (gc_live, dropped ones included until
 * collected) and those allocated since the collector last ran (gc_debt, net of frees: a loop that frees what it
 * allocates never runs it), and before an array is made:
 * - a step (LUA_GCSTEP) once gc_debt reaches half the bytes that survived the last step plus a quarter of the Lua
 *   heap (at least STEP_MIN): device bytes count as Lua's own would, so the work stays in proportion to the
 *   allocation. In generational mode (lua.c's and luacuda's) a step is a minor collection, cheap, which frees what
 *   died young. It runs before the new userdata exists: the previous result of `c = a + b`, still in `c` at this
 *   step, is then young at it and free at the next one. (Stepping after the new userdata was made let every result
 *   survive two minor collections, old: no minor collection ever freed one.) The step is a basic one (size 0): with
 *   a size, a generational step becomes a major collection, as long as a full one, whenever the heap has doubled
 *   since the last; a basic step stays minor. In incremental mode a basic step is a slice of a cycle, and the full
 *   collection below keeps the bound.
 * - a full collection (LUA_GCCOLLECT) when gc_live would pass twice what survived the last full one (at least that
 *   plus a step, or what the last step left, up to a step more than that, plus a step: small arrays' steps are larger
 *   than what survives, and the previous result, alive at each step, made every step a full collection): old
 *   arrays, which minor collections do not look at, or an incremental collector that is behind. Memory stays within
 *   about twice what is live, with one full collection per doubling.
 * - a full collection, then the state's kept blocks of the device given back (NOTE [block cache]), when the
 *   allocation would take the device's allocated and kept bytes past CUDADEV_GC_THRESHOLD (0.8 unless set; 0: never)
 *   of its memory, or the state past that fraction of its quota, as PyTorch's garbage_collection_threshold frees its
 *   cache. When live arrays are above it, the next such collection waits for a step of new allocation instead of
 *   coming at every one.
 * An allocation that fails still collects and retries (array.c), as a quota about to be exceeded does (embed.c).
 * A stopped collector (collectgarbage("stop"), a finalizer running) is left alone. Everything is the state's own:
 * each lua_State of an embedding host paces itself. */
#define STEP_MIN ((size_t)64 << 10)
#ifndef STEP_PART
#define STEP_PART 2
#endif

static double gc_threshold = 0.8;
static int gc_threshold_bad; /* CUDADEV_GC_THRESHOLD is not a fraction: cdv_memory_open says so */
static pthread_once_t gc_threshold_once = PTHREAD_ONCE_INIT;

static void gc_threshold_from_env(void) {
  const char *v = getenv("CUDADEV_GC_THRESHOLD");
  char *end;
  if (v == NULL || *v == '\0') return;
  double t = strtod(v, &end);
  if (*end != '\0' || !(t >= 0 && t <= 1))
    gc_threshold_bad = 1;
  else
    gc_threshold = t;
}

static size_t max_size(size_t a, size_t b) { return a > b ? a : b; }

/* The next step's size, from what survived the last full collection and the Lua heap now. */
static void set_step(lua_State *L, cdv_state *st) {
  size_t heap = (size_t)lua_gc(L, LUA_GCCOUNT) << 10;
  st->gc_step = max_size(STEP_MIN, st->gc_base / STEP_PART + heap / 4);
  st->gc_debt = 0;
}

void cdv_gc_collected(lua_State *L, cdv_state *st) {
  st->gc_base = st->gc_live;
  set_step(L, st);
  st->gc_full = st->gc_live + max_size(st->gc_live, st->gc_step);
  st->gc_since_full = 0;
}

void cdv_gc_account(cdv_state *st, size_t bytes, int freed) {
  if (!freed) {
    st->gc_live += bytes;
    st->gc_debt += bytes;
    st->gc_since_full += bytes;
    return;
  }
  st->gc_live -= st->gc_live < bytes ? st->gc_live : bytes;
  st->gc_debt -= st->gc_debt < bytes ? st->gc_debt : bytes;
  st->gc_since_full -= st->gc_since_full < bytes ? st->gc_since_full : bytes;
}

static memstat get(cdv_device *d);

/* The allocation would take the state past the threshold of its quota, or else the device past that of its memory. */
static int over_threshold(cdv_state *st, cdv_device *d, size_t bytes) {
  if (gc_threshold <= 0) return 0;
  if (st->quota != 0) return (double)st->quota_used + (double)bytes > gc_threshold * (double)st->quota;
  memstat s = get(d);
  return d->total_memory > 0 &&
         (double)(s.allocated + s.held_bytes) + (double)bytes > gc_threshold * (double)d->total_memory;
}

void cdv_gc_before_alloc(lua_State *L, cdv_state *st, cdv_device *d, size_t bytes) {
  if (st->gc_step == 0) cdv_gc_collected(L, st); /* the state's first array */
  if (lua_gc(L, LUA_GCISRUNNING) != 1) return;
  if (st->gc_debt + bytes >= st->gc_step) {
    lua_gc(L, LUA_GCSTEP, 0);
    set_step(L, st);
    /* what the step left (the last result still held, at most a step of it) may grow by a step before the next */
    size_t kept = st->gc_live < st->gc_base + st->gc_step ? st->gc_live : st->gc_base + st->gc_step;
    st->gc_full = max_size(st->gc_full, kept + st->gc_step);
  }
  int over = over_threshold(st, d, bytes);
  if (!over) st->gc_held_over = 0;
  over = over && (!st->gc_held_over || st->gc_since_full >= st->gc_step);
  if (!over && st->gc_live + bytes <= st->gc_full) return;
  lua_gc(L, LUA_GCCOLLECT);
  cdv_gc_collected(L, st);
  if (!over) return;
  cdv_err e;
  if (!(d->be->has_contexts && d->ctx == NULL)) cdv_block_release(st, d, NULL, 1, &e); /* never raises */
  st->gc_held_over = over_threshold(st, d, bytes);
}

static int l_memory_stats(lua_State *L) {
  cdv_device *d = cdv_opt_device(L, 1);
  memstat s = get(d);
  int64_t r = reserved(L, d);
  lua_createtable(L, 0, 7);
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
  lua_pushinteger(L, s.held_blocks); /* (see NOTE [block cache]) the driver's pool does not count what it keeps */
  lua_setfield(L, -2, "held_blocks");
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
  __atomic_store_n(&stats[d->index].max_allocated, stat_get(&stats[d->index].allocated), __ATOMIC_RELAXED);
  return 0;
}

/* cd.empty_cache([device]): collect garbage (dropped arrays free their blocks), give the pinned blocks of the
 * device back (see NOTE [pinned pool]; they are the cpu device's; with no argument, every cached pinned block),
 * then the blocks kept for reuse (NOTE [block cache]), wait for the device so the stream-ordered frees have
 * happened, and the backend's pool_trim (cuMemPoolTrimTo(pool, 0)) gives the driver pool's cache back. */
static int l_empty_cache(lua_State *L) {
  int every = lua_isnoneornil(L, 1);
  cdv_device *d = cdv_opt_device(L, 1);
  cdv_err e;
  lua_gc(L, LUA_GCCOLLECT);
  cdv_gc_collected(L, cdv_get_state(L)); /* NOTE [collector pacing] */
  if (cdv_pinned_trim(every ? NULL : d, &e) != 0) return cdv_raise(L, cdv_cpu(), &e);
  if (d->be->has_contexts && d->ctx == NULL) return 0; /* nothing was allocated on it */
  cdv_device_use(L, d);
  if (cdv_block_release(cdv_get_state(L), d, NULL, 1, &e) != 0) return cdv_raise(L, d, &e);
  if (d->be->pool_trim == NULL || !d->is_mempool_supported) return 0;
  if (d->be->synchronize(d, &e) || d->be->pool_trim(d, &e)) return cdv_raise(L, d, &e);
  return 0;
}

static const luaL_Reg functions[] = {{"memory_stats", l_memory_stats},
                                     {"memory_allocated", l_memory_allocated},
                                     {"max_memory_allocated", l_max_memory_allocated},
                                     {"memory_reserved", l_memory_reserved},
                                     {"reset_peak_memory_stats", l_reset_peak},
                                     {"empty_cache", l_empty_cache},
                                     {"pinned_memory_stats", l_pinned_memory_stats},
                                     {NULL, NULL}};

int cdv_memory_open(lua_State *L) {
  pthread_once(&gc_threshold_once, gc_threshold_from_env);
  if (gc_threshold_bad)
    return luaL_error(L,
                      "bad CUDADEV_GC_THRESHOLD '%s' (a fraction of device memory from 0 to 1 expected; 0 turns the "
                      "collection before the threshold off)",
                      getenv("CUDADEV_GC_THRESHOLD"));
  luaL_setfuncs(L, functions, 0);
  return 0;
}
