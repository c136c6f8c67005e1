/*
 * staging.c: copies between pageable host memory and a device through reusable pinned buffers, overlapped
 * (NOTE [staged copies]), and the host memcpy they use, split over a few threads when it is large.
 *
 * NOTE [staged copies]: a DMA engine reads and writes page-locked memory only. Given pageable memory, the
 * driver copies it through small pinned buffers of its own, one at a time: 6.7 GB/s from a malloc'd buffer on
 * an H100 host, against 55 GB/s from pinned memory. So a large copy between pageable host memory (a plain host
 * array, a Lua string or table) and memory a backend's copies reach directly (backend->stage_pageable) goes
 * through buffers of the pinned pool (NOTE [pinned pool]), in pieces, pipelined on the copy's stream:
 *   host to device: the host fills buffer k (cdv_host_copy, or the conversion of a Lua table) while the DMAs
 *     of the pieces before it run; an event recorded after each piece tells when its buffer is free again;
 *   device to host: up to STAGE_NBUF pieces are queued ahead; the host waits for piece i's event, copies it
 *     out, and queues piece i + STAGE_NBUF into the buffer it freed.
 * Sizes: copies under STAGE_MIN go direct, since the pipeline has fixed costs (a copy call, an event and a
 * wait per piece, a buffer to take from the pool); bench/staging_sweep.lua measures where staging starts to
 * pay, and which piece size and thread count are best. A copy is cut into STAGE_NBUF pieces or more, of
 * STAGE_PIECE_MIN to STAGE_BUF bytes (64 KiB multiples), so mid-sized copies overlap too; every buffer is
 * STAGE_BUF bytes whatever the piece, so the pool keeps one class, at most STAGE_NBUF buffers per concurrent
 * copy. Four buffers rather than two absorb the jitter of the host side (a page fault, a late helper thread).
 * Semantics are those of a pageable copy: it is complete when it returns (the host side may be reused or
 * read at once), and it runs on the stream it was given (else the current one), after the work queued there.
 * An error in the middle (a table element that does not convert, a failing driver call, an interrupt)
 * closes the stage, a to-be-closed value on the Lua stack: it waits for the pieces in flight (the whole
 * stream), destroys the events and gives the buffers back to the pool, and the error goes on as usual. The
 * pieces sent before it stay copied.
 * Host side: one thread copies 10 to 20 GB/s (19 on a 2-core EPYC VM, two threads 37), less than the DMA's
 * 55, so cdv_host_copy splits a large copy over up to COPY_THREADS_DEFAULT threads (the caller and persistent
 * helpers), never more than the cores it may run on; parts are at least COPY_PART_MIN bytes, so small pieces
 * stay on the calling thread. NOTE [test
 * hooks] in cdv.h change the piece size (staging every copy, the cpu device's too, which is how the specs test
 * all of this without a GPU) and the number of threads.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cdv.h"

#define STAGE_MIN ((size_t)1 << 20)
#define STAGE_BUF ((size_t)8 << 20)
#define STAGE_PIECE_MIN ((size_t)512 << 10)
#define STAGE_NBUF 4
#define COPY_PART_MIN ((size_t)1 << 20)
#define COPY_THREADS_DEFAULT \
  8 /* bench/staging_sweep.lua on an H100 host (16 cores), 256 MiB, GB/s H2D / D2H:
                                  * 1 thread 8.2 / 7.1, 2: 16.0 / 14.0, 4: 25.6 / 23.7, 8: 35.1 / 35.8 */
#define COPY_THREADS_MAX 64
#define STAGE_TYPE "cudadev.Stage" /* internal: never reaches Lua code */

size_t cdv_stage_piece(const cdv_device *d, size_t n) {
  cdv_hooks h = cdv_get_hooks();
  if (n == 0) return 0;
  if (h.staging_chunk) return h.staging_chunk < 8 ? 8 : h.staging_chunk & ~(size_t)7; /* whole elements */
  if (!d->be->stage_pageable || n < STAGE_MIN) return 0;
  size_t p = (n / STAGE_NBUF + 0xffff) & ~(size_t)0xffff;
  return p < STAGE_PIECE_MIN ? STAGE_PIECE_MIN : p > STAGE_BUF ? STAGE_BUF : p;
}

/* ------------------------------------------------------------ the multi-threaded host copy */

static struct {
  pthread_mutex_t lock;
  pthread_cond_t work, done;
  int helpers, quit, registered; /* helper threads started; they run until the process exits (stop_helpers) */
  pthread_t threads[COPY_THREADS_MAX];
  char *dst;
  const char *src;
  size_t n, part;
  int parts, next, finished;
} cp = {.lock = PTHREAD_MUTEX_INITIALIZER, .work = PTHREAD_COND_INITIALIZER, .done = PTHREAD_COND_INITIALIZER};
static pthread_mutex_t cp_owner = PTHREAD_MUTEX_INITIALIZER; /* one split copy at a time */

/* Claims and copies parts of the posted copy until none is left; called and returns with cp.lock held. */
static void copy_parts(void) {
  while (cp.next < cp.parts) {
    size_t off = (size_t)cp.next++ * cp.part, len = cp.n - off < cp.part ? cp.n - off : cp.part;
    char *dst = cp.dst + off;
    const char *src = cp.src + off;
    pthread_mutex_unlock(&cp.lock);
    memcpy(dst, src, len);
    pthread_mutex_lock(&cp.lock);
    if (++cp.finished == cp.parts) pthread_cond_signal(&cp.done);
  }
}

static void *copy_helper(void *arg) {
  (void)arg;
  pthread_mutex_lock(&cp.lock);
  while (!cp.quit) {
    if (cp.next < cp.parts)
      copy_parts();
    else
      pthread_cond_wait(&cp.work, &cp.lock);
  }
  pthread_mutex_unlock(&cp.lock);
  return NULL;
}

/* atexit: the helpers end (a copy still running finishes its parts on its own thread), so that no thread runs
 * our code after main returns and none is left for valgrind to report. */
static void stop_helpers(void) {
  pthread_mutex_lock(&cp.lock);
  int n = cp.helpers;
  cp.quit = 1;
  pthread_cond_broadcast(&cp.work);
  pthread_mutex_unlock(&cp.lock);
  for (int i = 0; i < n; i++) pthread_join(cp.threads[i], NULL);
}

/* Threads for a copy of n bytes: the hook's number, else COPY_THREADS_DEFAULT, at most the cores. */
static int copy_threads(size_t n) {
  static int cores; /* counted once; a race only counts them twice */
  int t = cdv_get_hooks().staging_threads, c = __atomic_load_n(&cores, __ATOMIC_RELAXED);
  if (c == 0) {
    cpu_set_t set;
    c = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : (int)sysconf(_SC_NPROCESSORS_ONLN);
    c = c < 1 ? 1 : c;
    __atomic_store_n(&cores, c, __ATOMIC_RELAXED);
  }
  if (t == 0) t = c < COPY_THREADS_DEFAULT ? c : COPY_THREADS_DEFAULT;
  if (t > COPY_THREADS_MAX) t = COPY_THREADS_MAX;
  return n / COPY_PART_MIN < (size_t)t ? (int)(n / COPY_PART_MIN) : t;
}

/* Starts helpers until there are `want` (with cp.lock held); returns how many there are. */
static int start_helpers(int want) {
  if (!cp.registered && want > 0) {
    if (atexit(stop_helpers) != 0) return 0;
    cp.registered = 1;
  }
  while (cp.helpers < want && !cp.quit && pthread_create(&cp.threads[cp.helpers], NULL, copy_helper, NULL) == 0)
    cp.helpers++;
  return cp.helpers;
}

/* memcpy; a large copy is cut into page-aligned parts that the caller and the helpers copy together. A
 * second thread copying while a split copy runs copies alone rather than wait. */
void cdv_host_copy(void *dst, const void *src, size_t n) {
  int t = copy_threads(n);
  if (t < 2 || pthread_mutex_trylock(&cp_owner) != 0) {
    memcpy(dst, src, n);
    return;
  }
  pthread_mutex_lock(&cp.lock);
  int helpers = start_helpers(t - 1);
  if (helpers + 1 < t) t = helpers + 1;
  cp.dst = dst;
  cp.src = src;
  cp.n = n;
  cp.part = (n / (size_t)t + 4095) & ~(size_t)4095;
  cp.parts = (int)((n + cp.part - 1) / cp.part);
  cp.next = cp.finished = 0;
  pthread_cond_broadcast(&cp.work);
  copy_parts();
  while (cp.finished < cp.parts) pthread_cond_wait(&cp.done, &cp.lock);
  pthread_mutex_unlock(&cp.lock);
  pthread_mutex_unlock(&cp_owner);
}

/* ------------------------------------------------------------ stages */

struct cdv_stage {
  cdv_device *d; /* the device whose backend copies (memcpy, events) */
  cdv_device *host; /* the cpu device: its pinned pool lends the buffers */
  void *stream;
  char *dev; /* the side d's copies reach: device memory (or pinned memory, under the hooks) */
  cdv_device *dev_dev;
  size_t n, piece, bufsize, queued;
  unsigned sent; /* pieces queued */
  int nbuf, open, slot;
  void *buf[STAGE_NBUF], *ev[STAGE_NBUF];
  int busy[STAGE_NBUF]; /* a piece is in flight through this buffer and its event is recorded */
};

/* Gives everything back. After an error, pieces may be in flight: the stream is waited for (the device when
 * that fails; what fails then has stopped). Never raises. */
static void stage_release(cdv_stage *st, int in_flight) {
  cdv_device *d = st->d;
  cdv_err e;
  if (!st->open) return;
  st->open = 0;
  if (in_flight && d->be->stream_synchronize(d, st->stream, &e) != 0) d->be->synchronize(d, &e);
  for (int k = 0; k < STAGE_NBUF; k++) {
    if (st->ev[k] != NULL) d->be->event_destroy(d, st->ev[k], &e);
    cdv_pinned_free(st->host, st->buf[k], st->bufsize);
    st->ev[k] = st->buf[k] = NULL;
  }
}

static int stage_close(lua_State *L) { /* __close and __gc: reached with the stage open only on an error */
  stage_release(luaL_checkudata(L, 1, STAGE_TYPE), 1);
  return 0;
}

cdv_stage *cdv_stage_open(lua_State *L, cdv_device *d, void *stream, char *dev, cdv_device *dev_dev, size_t n,
                          size_t piece) {
  cdv_stage *st = lua_newuserdatauv(L, sizeof *st, 0);
  memset(st, 0, sizeof *st);
  if (luaL_newmetatable(L, STAGE_TYPE)) {
    lua_pushcfunction(L, stage_close);
    lua_setfield(L, -2, "__close");
    lua_pushcfunction(L, stage_close);
    lua_setfield(L, -2, "__gc");
  }
  lua_setmetatable(L, -2);
  lua_toclose(L, -1);
  size_t pieces = (n + piece - 1) / piece;
  st->d = d;
  st->host = cdv_cpu();
  st->stream = stream;
  st->dev = dev;
  st->dev_dev = dev_dev;
  st->n = n;
  st->piece = piece;
  st->bufsize = piece < STAGE_PIECE_MIN || piece > STAGE_BUF ? piece : STAGE_BUF; /* the hooks' sizes */
  st->nbuf = pieces < STAGE_NBUF ? (int)pieces : STAGE_NBUF;
  st->slot = lua_gettop(L);
  st->open = 1;
  return st;
}

/* Buffer k once the piece last sent through it has landed; pinned and given an event on first use. */
static char *take_buffer(lua_State *L, cdv_stage *st, int k) {
  cdv_err e;
  if (st->busy[k]) {
    if (cdv_wait_event(L, st->d, st->ev[k], &e) != 0) cdv_raise(L, st->d, &e);
    st->busy[k] = 0;
  }
  if (st->buf[k] == NULL) {
    if (cdv_pinned_alloc(st->host, st->bufsize, &st->buf[k], &e) != 0) cdv_raise(L, st->host, &e);
    if (st->d->be->event_create(st->d, 0, 0, &st->ev[k], &e) != 0) cdv_raise(L, st->d, &e);
  }
  return st->buf[k];
}

/* Queues the next piece (len bytes at offset `queued`) through its buffer, towards the device side or from it,
 * and records the buffer's event after it. */
static void queue_piece(lua_State *L, cdv_stage *st, size_t len, int to_dev) {
  cdv_device *d = st->d;
  int k = (int)(st->sent % (unsigned)st->nbuf);
  char *buf = st->buf[k], *dev = st->dev + st->queued;
  cdv_err e;
  int rc = to_dev ? d->be->memcpy(d, dev, st->dev_dev, buf, st->host, len, st->stream, &e)
                  : d->be->memcpy(d, buf, st->host, dev, st->dev_dev, len, st->stream, &e);
  if (rc == 0) rc = d->be->event_record(d, st->ev[k], st->stream, &e);
  if (rc != 0) cdv_raise(L, d, &e);
  st->busy[k] = 1;
  st->queued += len;
  st->sent++;
}

char *cdv_stage_next(lua_State *L, cdv_stage *st, size_t *len) {
  size_t left = st->n - st->queued;
  *len = left < st->piece ? left : st->piece;
  return *len ? take_buffer(L, st, (int)(st->sent % (unsigned)st->nbuf)) : NULL;
}

void cdv_stage_send(lua_State *L, cdv_stage *st, size_t len) { queue_piece(L, st, len, 1); }

void cdv_stage_finish(lua_State *L, cdv_stage *st) {
  for (int k = 0; k < st->nbuf; k++)
    if (st->buf[k] != NULL) take_buffer(L, st, k); /* waits for the last pieces */
  int slot = st->slot;
  stage_release(st, 0);
  /* lua_closeslot, then the pop: Lua 5.4.4's lua_settop closes a slot with a stack pointer that the __close
   * call may have moved (a bug fixed in 5.4.5); lua_closeslot looks the slot up again */
  lua_closeslot(L, slot);
  lua_settop(L, slot - 1);
}

void cdv_stage_h2d(lua_State *L, cdv_device *d, void *stream, char *dst, cdv_device *dst_dev, const char *src, size_t n,
                   size_t piece) {
  cdv_stage *st = cdv_stage_open(L, d, stream, dst, dst_dev, n, piece);
  size_t len;
  char *buf;
  while ((buf = cdv_stage_next(L, st, &len)) != NULL) {
    cdv_host_copy(buf, src + st->queued, len);
    cdv_stage_send(L, st, len);
  }
  cdv_stage_finish(L, st);
}

void cdv_stage_d2h(lua_State *L, cdv_device *d, void *stream, char *dst, const char *src, cdv_device *src_dev, size_t n,
                   size_t piece) {
  cdv_stage *st = cdv_stage_open(L, d, stream, (char *)src, src_dev, n, piece);
  size_t len;
  for (int k = 0; k < st->nbuf && cdv_stage_next(L, st, &len) != NULL; k++) queue_piece(L, st, len, 0);
  for (size_t off = 0; off < n; off += len) {
    int k = (int)((off / piece) % (size_t)st->nbuf);
    len = n - off < piece ? n - off : piece;
    cdv_host_copy(dst + off, take_buffer(L, st, k), len);
    size_t next;
    if (cdv_stage_next(L, st, &next) != NULL) queue_piece(L, st, next, 0);
  }
  cdv_stage_finish(L, st);
}
