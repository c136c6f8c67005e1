/*
 * cpu_run.c: runs a cpu kernel launch: every thread of every block, with CUDA's semantics.
 *
 * Blocks are handed out to worker threads through an atomic counter (dynamic scheduling). A block runs
 * entirely on one worker: in loop mode (a module without barriers or warp intrinsics) one fiber calls the
 * kernel for each thread in turn; in fiber mode every CUDA thread gets its own fiber, and a barrier or a
 * warp operation switches to the next runnable thread (see NOTE [fiber scheduling]).
 *
 * NOTE [fault containment]: by default a launch runs in a forked child (fork after fflush(NULL)). Arrays are
 * MAP_SHARED (backend_cpu.c), and so is each module's writable data (NOTE [shared module data] there), so the
 * child's writes are the parent's. The child runs all blocks with its own threads, flushes stdout and
 * _exits; a status page shared with the parent carries the first failure (assert, __trap, a fault signal
 * with its address, block and thread). The parent waitpid()s and turns a signal or a failure into an error
 * for that launch; the process lives on. What a child's writes cannot reach: memory the child allocates,
 * and memory not allocated by this backend (a host buffer wrapped as an array, a global of the host
 * program). A launch with a pointer argument into such memory therefore runs in-process (plan_args); one
 * that reaches it only through pointers stored in memory is not detected, and its writes there are lost.
 * CUDADEV_CPU_FORK=0 runs every launch in-process, on a persistent pool of workers: faster, and what gdb
 * wants, but a fault then kills the process (asserts, __trap and deadlocks are still errors).
 *
 * NOTE [cpu grid sync]: a cooperative launch (cooperative = true) runs every block at once, each on a worker
 * thread of its own (the cpu device's "multiprocessors" are its worker threads; coop_limit counts blocks
 * as cpu_occupancy does, at most MAX_WORKERS), so grid.sync() can wait for all of them. Within a block,
 * grid.sync() is a barrier like __syncthreads (every live thread of the block waits there); when the last
 * thread of a block arrives, its worker waits at the launch's grid barrier (a mutex and condition variable)
 * for the other blocks, then releases its threads. A block that ends while others wait at grid.sync() is a
 * deadlock (on a GPU it would hang), reported like a barrier that not all threads reach. grid.sync() in a
 * launch that is not cooperative is refused when reached (a GPU's grid group is then invalid).
 */
#define _GNU_SOURCE
/* A preempted in-process block leaves the kernel with siglongjmp from a fiber's stack to its worker thread's own
 * (NOTE [preempting a block]), which _FORTIFY_SOURCE's __longjmp_chk refuses as a jump into a deeper frame
 * (it aborts the process when the target stack lies below the current one): this file is built without it. */
#undef _FORTIFY_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include "cpu.h"

#define MAX_WORKERS 256
#define SPAN_MAX 64 /* launches of more workers take their blocks from one counter */
#define CHUNK_MAX 1024 /* blocks a worker takes at once (see cdv_cpu_launch) */
#define VMA_BUDGET 24000 /* mappings fiber stacks may add without guard markers (max_map_count 65530) */
#define ALTSTACK_SIZE (64 * 1024)
#define EXIT_FAILED 3 /* a child that recorded a failure */
#define FAIL_OOM 100 /* internal failure kind: out of memory inside the child */
#define FAIL_INTERRUPT 101 /* internal failure kind: cdv_cpu_interrupt() (NOTE [interrupting a launch]) */
#define MAX_CHILDREN 64 /* forked launches a SIGINT is forwarded to */
#define MAX_PREFAULT 16 /* arrays prefaulted per launch */
#define RETRACK_SECONDS 10 /* the most a block's re-run may take: NOTE [naming the thread] */
#define PREFAULT_LIMIT ((size_t)1 << 30)
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

enum { F_RUN, F_BAR, F_WARP, F_DONE };

static unsigned interrupts; /* cdv_cpu_interrupt() calls: NOTE [interrupting a launch] */
static int in_worker; /* this process is the launch worker: NOTE [launch worker] */
static void child_altstack(void);

/* The first failure of a launch; in a MAP_SHARED page when the launch runs in a child. */
typedef struct status {
  int claimed;
  int kind, signo, overflow, where; /* where: 0 none, 1 block, 2 block and thread */
  uintptr_t addr;
  unsigned block[3], thread[3];
  int done;
  char text[1024];
} status;

typedef struct launch {
  const cdv_cpu_func *fn;
  unsigned grid[3], block[3], nthreads, shared;
  void **args;
  uint64_t nblocks, next;
  unsigned chunk;
  int spans; /* blocks taken from spans[] (NOTE [block affinity]), else from next */
  struct {
    _Alignas(64) uint64_t next; /* a line each: 16 workers took their blocks from two shared lines */
  } span[SPAN_MAX]; /* the next block of each worker's stretch of the grid */
  int fibers, in_child, aborted, nworkers;
  int coop; /* (see NOTE [cpu grid sync]) one block per worker; the grid barrier below */
  pthread_mutex_t gm;
  pthread_cond_t gc;
  uint64_t garrived, gexited; /* blocks waiting at grid.sync(), blocks that have ended */
  unsigned ggen; /* completed grid barriers */
  int gdead; /* a block ended while others wait: nobody leaves the barrier */
  status *st;
  unsigned intr0; /* the interrupt count when the launch began */
  struct {
    char *p;
    size_t n;
  } pre[MAX_PREFAULT]; /* arrays to map in a child before it runs (NOTE [prefaulting]) */
  int npre;
  size_t pre_total;
  const cdv_cpu_func *plain; /* the kernel when fn is its fast path: NOTE [naming the thread] */
  int retrack; /* this launch re-runs a block to name its thread: quiet, with a time limit */
  status *result; /* where run_forked leaves a copy of the final status, or NULL */
  double timeout; /* seconds a contained launch may run, 0 for no limit: NOTE [launch time limit] */
  const cdv_launch_opts *opts; /* the host's (NULL: the defaults), read by the host only */
  const unsigned long long *extents; /* the opts' extents, for checked kernels (NOTE [checked memory]), or NULL */
} launch;

typedef struct worker worker;
/* One cache line (x86-64): a pass touches the records of hundreds of threads, so a record that straddled two
 * lines would double the misses (measured: a 256-thread block reduction ran 20% slower from a 16-byte
 * aligned array). */
typedef struct __attribute__((aligned(64))) fiber {
  cdv_cpu_fctx fc;
  worker *w;
  cdv_cpu_fhdr *hdr;
  char *region;
  unsigned char state, kind;
  int src;
  unsigned mask;
  unsigned long long val, res;
} fiber;

struct worker {
  cdv_cpu_ctx ctx; /* first: the operations receive &ctx and cast back */
  launch *L;
  fiber *f;
  int nf;
  fiber *cur;
  cdv_cpu_fctx sched; /* the worker's own stack while its fibers run */
  int *rq, rq_len, rq_pos; /* the threads to run in the current pass */
  int nbar, nwarp, ndone, ngrid; /* ngrid: of the nbar threads at a barrier, those at grid.sync() */
  uint64_t lo, hi; /* loop mode: the blocks of the current chunk (NOTE [chunked loop mode]) */
  uint32_t warps_waiting;
  int aborted;
};

static long page_size(void) {
  static long pg;
  if (!pg) pg = sysconf(_SC_PAGESIZE);
  return pg;
}

int cdv_cpu_fail_errno(cdv_err *e, const char *api, int err, const char *fmt, ...) {
  char what[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  const char *name = NULL;
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 32)
  name = strerrorname_np(err);
#endif
  return cdv_fail(e, api, err, name ? name : "ERRNO", "%s: %s", what, strerror(err));
}

int cdv_cpu_worker_count(void) {
  static int n;
  if (n) return n;
  const char *env = getenv("CUDADEV_CPU_THREADS");
  int k = env ? atoi(env) : 0;
  if (k <= 0) {
    cpu_set_t set;
    k = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : (int)sysconf(_SC_NPROCESSORS_ONLN);
  }
  n = k < 1 ? 1 : k > MAX_WORKERS ? MAX_WORKERS : k;
  return n;
}

/* ---------------------------------------------------------------- per-thread resources */
/* NOTE [dynamic shared memory]: each OS thread owns one buffer of CDV_CPU_MAX_DYN_SHARED bytes (reserved,
 * committed as touched) for the dynamic shared memory of the blocks it runs. It never moves, because a
 * namespace-scope `extern __shared__` becomes a thread_local pointer initialised once per thread. */
static pthread_key_t dsm_key;
static pthread_once_t dsm_once = PTHREAD_ONCE_INIT;
static __thread void *tls_dsm;
static __thread worker *tls_worker; /* for the fault handler */
/* the way out of this thread's blocks of an in-process launch, and a count that is not 0 while it must not be
 * taken (a grid barrier's lock, a failure being written): see NOTE [preempting a block] */
static __thread sigjmp_buf *tls_jump;
static __thread volatile sig_atomic_t tls_nopreempt;

static void dsm_release(void *p) { munmap(p, CDV_CPU_MAX_DYN_SHARED); }

static void dsm_key_init(void) { pthread_key_create(&dsm_key, dsm_release); }

static void *thread_dsm(void) {
  if (!tls_dsm) {
    void *p =
        mmap(NULL, CDV_CPU_MAX_DYN_SHARED, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return NULL;
    pthread_once(&dsm_once, dsm_key_init);
    pthread_setspecific(dsm_key, p);
    tls_dsm = p;
  }
  return tls_dsm;
}

/* Fiber stacks per worker slot (NOTE [fiber stacks]). They are reserved by the launching process, before a
 * fork, so a child inherits the reservation and pays only for the pages it touches. A slot's table of
 * regions has room for the largest block and never moves: an in-process launch may read it while a forked
 * launch on another thread adds regions. The slot's fiber records and run queue are mapped with it, private:
 * a launch process allocates nothing with malloc, which a fork from a threaded host may have left locked
 * (AddressSanitizer's allocator does: its ASan build hung in a forked launch). */
static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;
static struct slot {
  char **r;
  size_t n;
  fiber *f; /* CDV_CPU_MAX_THREADS records, and as many run queue entries in rq */
  int *rq;
} slots[MAX_WORKERS];

/* The slot's tables: fiber records first (page-aligned, so cache-line aligned), then regions and run queue. */
static int slot_tables(struct slot *sl) {
  size_t nf = CDV_CPU_MAX_THREADS * sizeof(fiber), nr = CDV_CPU_MAX_THREADS * sizeof(char *);
  char *m = mmap(NULL, nf + nr + CDV_CPU_MAX_THREADS * sizeof(int), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return -1;
  sl->f = (fiber *)m, sl->r = (char **)(m + nf), sl->rq = (int *)(m + nf + nr);
  return 0;
}

static int reserve_stacks(int nslots, size_t need, cdv_err *e) {
  for (int s = 0; s < nslots; s++) {
    struct slot *sl = &slots[s];
    if (sl->n >= need) continue;
    if (!sl->r && slot_tables(sl))
      return cdv_fail(e, "cpu.launch", ENOMEM, "CUDA_ERROR_OUT_OF_MEMORY", "out of host memory");
    char **r = sl->r;
    char *base = cdv_cpu_stacks_map(need - sl->n);
    if (!base) return cdv_cpu_fail_errno(e, "cpu.launch", errno, "cannot reserve %zu fiber stacks", need - sl->n);
    for (size_t i = sl->n; i < need; i++) r[i] = base + (i - sl->n) * CDV_CPU_STACK;
    sl->n = need;
  }
  return 0;
}

/* ---------------------------------------------------------------- failures */
static int claim(status *st) {
  int z = 0;
  return __atomic_compare_exchange_n(&st->claimed, &z, 1, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}

static void note_where(status *st, const worker *w, const fiber *f) {
  memcpy(st->block, w->ctx.block_idx, sizeof st->block);
  st->where = 1;
  if (f && f->hdr->thread_idx[0] != ~0u) { /* ~0u: a fast path that does not track threads (NOTE [fast paths]) */
    memcpy(st->thread, f->hdr->thread_idx, sizeof st->thread);
    st->where = 2;
  }
}

/* Record a failure (the first one wins); fiber: the thread it happened in, or NULL. */
static void record(worker *w, fiber *f, int kind, const char *fmt, ...) {
  status *st = w->L->st;
  tls_nopreempt++; /* before the claim: a preemption between would leave it claimed and empty */
  if (!claim(st)) {
    tls_nopreempt--;
    return;
  }
  st->kind = kind;
  note_where(st, w, f);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(st->text, sizeof st->text, fmt, ap);
  va_end(ap);
  __atomic_store_n(&st->claimed, 2, __ATOMIC_SEQ_CST); /* complete: stop_launch may end the child now */
  tls_nopreempt--;
}

/* Ends a launch child from a fiber's stack. Not _exit: before a call to a noreturn function ASan unpoisons the stack
 * it believes the thread is on (__asan_handle_no_return), from the stack pointer up to the thread's own stack top;
 * on a fiber's stack that span is hundreds of GiB, so it refuses with "ASan is ignoring requested
 * __asan_handle_no_return ... False positive error reports may follow" (once per process: one per failed launch
 * under `make check`). The process ends here, so nothing needs unpoisoning: exit_group directly, which the compiler
 * does not know as noreturn. */
static void child_exit(int code) {
  syscall(SYS_exit_group, code);
  _exit(code); /* not reached */
}

/* Stop the launch after a recorded failure. In a child, the child ends now (the parent reads the status);
 * in-process, the failing fiber is abandoned (it is re-initialised before it runs again) and the worker
 * takes no more blocks. Called on a fiber (f) or on the worker's own stack (f == NULL). */
static void stop_launch(worker *w, fiber *f) {
  if (w->L->in_child) {
    /* another thread of the child may be writing the failure it claimed (several blocks left a dead grid barrier
     * at once): ending the child now would leave the parent an empty message. Wait a little for it. */
    for (int i = 0; i < 1000 && __atomic_load_n(&w->L->st->claimed, __ATOMIC_SEQ_CST) == 1; i++)
      nanosleep(&(struct timespec){0, 100000}, NULL);
    fflush(NULL);
    child_exit(EXIT_FAILED);
  }
  w->aborted = 1;
  __atomic_store_n(&w->L->aborted, 1, __ATOMIC_SEQ_CST);
  if (w->L->coop) { /* the blocks waiting at grid.sync() leave it (NOTE [cpu grid sync]) */
    tls_nopreempt++;
    pthread_mutex_lock(&w->L->gm);
    pthread_cond_broadcast(&w->L->gc);
    pthread_mutex_unlock(&w->L->gm);
    tls_nopreempt--;
  }
  if (f) cdv_cpu_fiber_switch(&f->fc, &w->sched);
}

/* ---------------------------------------------------------------- the grid barrier (NOTE [cpu grid sync]) */
/* The block of w has reached grid.sync(): wait until every block has. 0 when released; -1 when the launch
 * stopped (another block failed, or ended without reaching the barrier: then this records the deadlock). */
static int grid_wait(worker *w) {
  launch *L = w->L;
  tls_nopreempt++; /* the lock and the condition variable's state: NOTE [preempting a block] */
  pthread_mutex_lock(&L->gm);
  unsigned gen = L->ggen;
  L->garrived++;
  if (L->garrived + L->gexited == L->nblocks) {
    if (L->gexited)
      L->gdead = 1;
    else
      L->garrived = 0, L->ggen++;
    pthread_cond_broadcast(&L->gc);
  }
  while (gen == L->ggen && !L->gdead && !__atomic_load_n(&L->aborted, __ATOMIC_SEQ_CST))
    pthread_cond_wait(&L->gc, &L->gm);
  int ok = gen != L->ggen, dead = !ok && L->gdead;
  uint64_t ended = L->gexited;
  pthread_mutex_unlock(&L->gm);
  tls_nopreempt--;
  if (ok) return 0;
  if (dead)
    record(w, NULL, CDV_CPU_FAIL_DEADLOCK,
           "%llu block%s ended without reaching grid.sync(), where the others wait "
           "(a grid.sync() that not all blocks reach)",
           (unsigned long long)ended, ended == 1 ? "" : "s");
  stop_launch(w, NULL);
  return -1;
}

/* The block of w has ended: a grid barrier that waits for it now never completes. */
static void grid_exit(launch *L) {
  tls_nopreempt++;
  pthread_mutex_lock(&L->gm);
  L->gexited++;
  if (L->garrived && L->garrived + L->gexited == L->nblocks) {
    L->gdead = 1;
    pthread_cond_broadcast(&L->gc);
  }
  pthread_mutex_unlock(&L->gm);
  tls_nopreempt--;
}

/* ---------------------------------------------------------------- fiber scheduling */
/* NOTE [fiber scheduling]: a block's fibers run in passes. A pass resumes every runnable thread in order;
 * a thread runs until it reaches a barrier or a warp operation (or returns) and then switches directly to
 * the next thread of the pass, the last one back to the worker. Between passes the worker completes what can
 * be completed: a warp operation once every live lane named in its mask waits at one (lanes of a warp are
 * consecutive linear thread ids; exited lanes do not count), then __syncthreads once every live thread waits
 * there. A pass that leaves threads waiting with nothing to complete is a deadlock, reported as an error
 * (e.g. a barrier inside a branch that not all threads take). Threads switch only there: a thread that spins
 * on a flag another thread of its block sets, without a barrier in between, never gives way.
 *
 * A suspended thread's frames are cold (hundreds of stacks per worker), and resuming it walks them one
 * dependent return at a time. So while switching to the next thread of the pass, start loading the frames of
 * the one after it, and the record of the one after that (measured: a 256-thread block reduction takes about
 * 15% less time). */
/* always_inline: a function made of prefetches alone looks free of effects to GCC's IPA, which then deletes
 * the calls (the first measurement of this helper was of nothing). */
static inline __attribute__((always_inline)) void prefetch_ahead(const worker *w) {
  int p = w->rq_pos;
  if (p + 2 < w->rq_len) __builtin_prefetch(&w->f[w->rq[p + 2]]);
  if (p < w->rq_len) {
    const fiber *f = &w->f[w->rq[p]];
#if defined(__x86_64__) && !defined(CDV_CPU_UCONTEXT)
    const char *sp = f->fc.sp;
    for (int k = 0; k < 4; k++) __builtin_prefetch(sp + 64 * k);
#endif
    __builtin_prefetch(f->hdr);
  }
}

static void switch_out(worker *w, fiber *f) {
  if (w->rq_pos < w->rq_len) {
    fiber *n = &w->f[w->rq[w->rq_pos++]];
    w->cur = n;
    prefetch_ahead(w);
    cdv_cpu_fiber_switch(&f->fc, &n->fc);
  } else {
    w->cur = NULL;
    cdv_cpu_fiber_switch(&f->fc, &w->sched);
  }
}

static void fiber_main(void *arg) {
  fiber *f = arg;
  worker *w = f->w;
  w->L->fn->entry(&w->ctx, w->L->args, CDV_CPU_RUN_THREAD); /* loop mode: chunk_main */
  f->state = F_DONE;
  w->ndone++;
  switch_out(w, f);
}

static void fiber_start(worker *w, int i, void (*fn)(void *)) {
  fiber *f = &w->f[i];
  const unsigned *bd = w->ctx.block_dim;
  f->state = F_RUN;
  f->hdr->thread_idx[0] = (unsigned)i % bd[0];
  f->hdr->thread_idx[1] = (unsigned)i / bd[0] % bd[1];
  f->hdr->thread_idx[2] = (unsigned)i / (bd[0] * bd[1]);
  f->hdr->tid = (unsigned)i;
  f->hdr->ctx = &w->ctx;
  f->hdr->fiber = f;
  cdv_cpu_fiber_init(&f->fc, f->region + page_size(), f->hdr, fn, f);
}

static unsigned long long barrier_result(int kind, int count, int n) {
  return kind == CDV_CPU_BAR_COUNT ? (unsigned long long)count
         : kind == CDV_CPU_BAR_AND ? count == n
         : kind == CDV_CPU_BAR_OR  ? count > 0
                                   : 0;
}

/* Every live thread waits at __syncthreads: release them all (in order) with their results. */
static void release_barrier(worker *w) {
  int n = (int)w->ctx.nthreads, count = 0;
  for (int i = 0; i < n; i++) count += w->f[i].state == F_BAR && w->f[i].val;
  for (int i = 0; i < n; i++)
    if (w->f[i].state == F_BAR) {
      w->f[i].res = barrier_result(w->f[i].kind, count, w->nbar);
      w->f[i].state = F_RUN;
      w->rq[w->rq_len++] = i;
    }
  w->nbar = w->ngrid = 0;
}

/* Complete the warp operation of the lanes in g (bits relative to the warp at base). */
static void resolve_group(worker *w, int base, uint32_t g) {
  uint32_t ballot = 0;
  for (int l = 0; l < 32; l++)
    if ((g >> l & 1u) && w->f[base + l].val) ballot |= 1u << l;
  for (int l = 0; l < 32; l++) {
    if (!(g >> l & 1u)) continue;
    fiber *f = &w->f[base + l];
    int s = f->src;
    if (f->kind == CDV_CPU_WARP_SHFL)
      f->res = (s >= 0 && s < 32 && (g >> s & 1u)) ? w->f[base + s].val : f->val;
    else if (f->kind == CDV_CPU_WARP_VOTE)
      f->res = ballot | (unsigned long long)g << 32;
    else
      f->res = 0;
    f->state = F_RUN;
    w->nwarp--;
    w->rq[w->rq_len++] = base + l;
  }
}

/* Do the lanes of g all name g (their masks over the live lanes, and themselves)? Lanes waiting at different
 * warp operations, e.g. odd lanes at `__shfl_down_sync(0xaaaaaaaau, ...)` in an if and even lanes at a
 * full-mask shuffle after it, name different groups: each operation completes when its own lanes arrive. */
static int same_group(const worker *w, int base, uint32_t g, uint32_t alive) {
  for (uint32_t m = g; m; m &= m - 1) {
    int l = __builtin_ctz(m);
    if (((w->f[base + l].mask & alive) | 1u << l) != g) return 0;
  }
  return 1;
}

/* Complete every warp operation whose participants have all arrived; returns whether any was. */
static int resolve_warps(worker *w) {
  int progress = 0, n = (int)w->ctx.nthreads;
  for (uint32_t ww = w->warps_waiting; ww; ww &= ww - 1) {
    int wi = __builtin_ctz(ww), base = wi * 32, cnt = n - base < 32 ? n - base : 32;
    uint32_t waiting = 0, alive = 0;
    for (int l = 0; l < cnt; l++) {
      alive |= (uint32_t)(w->f[base + l].state != F_DONE) << l;
      waiting |= (uint32_t)(w->f[base + l].state == F_WARP) << l;
    }
    for (uint32_t pending = waiting; pending;) {
      int l = __builtin_ctz(pending);
      uint32_t g = (w->f[base + l].mask & alive) | 1u << l;
      if ((g & waiting) == g && same_group(w, base, g, alive)) {
        resolve_group(w, base, g);
        waiting &= ~g, pending &= ~g, progress = 1;
      } else {
        pending &= ~(1u << l);
      }
    }
    if (!waiting) w->warps_waiting &= ~(1u << wi);
  }
  return progress;
}

static int deadlock(worker *w) {
  record(w, NULL, CDV_CPU_FAIL_DEADLOCK,
         "%d thread%s wait at __syncthreads while %d wait at a warp "
         "operation and %d have exited (a barrier or warp operation that not all threads reach)",
         w->nbar, w->nbar == 1 ? "" : "s", w->nwarp, w->ndone);
  stop_launch(w, NULL);
  return -1;
}

static int run_fibers(worker *w) {
  int n = (int)w->ctx.nthreads;
  for (int i = 0; i < n; i++) {
    fiber_start(w, i, fiber_main);
    w->rq[i] = i;
  }
  w->rq_len = n, w->nbar = w->nwarp = w->ndone = w->ngrid = 0, w->warps_waiting = 0;
  for (;;) {
    if (w->rq_len > 0) {
      w->rq_pos = 1;
      w->cur = &w->f[w->rq[0]];
      cdv_cpu_fiber_switch(&w->sched, &w->cur->fc);
      if (w->aborted) return -1;
    }
    w->rq_len = 0;
    if (w->nwarp && resolve_warps(w)) continue;
    if (w->ndone == n) return 0;
    if (w->nbar && w->nbar + w->ndone == n) {
      if (w->ngrid && grid_wait(w)) /* the block's part of grid.sync() is done: wait for the grid */
        return -1;
      release_barrier(w);
      continue;
    }
    return deadlock(w);
  }
}

/* ---------------------------------------------------------------- operations called by kernel code */
/* Outside fiber mode only a block of one thread may wait (there is nobody to wait for). */
static void no_fibers(worker *w, const char *what) {
  record(w, w->cur, CDV_CPU_FAIL_NOSYNC, "%s", what);
  stop_launch(w, w->cur);
}

static int op_barrier(cdv_cpu_ctx *c, int kind, int pred) {
  worker *w = (worker *)c;
  fiber *f = w->cur;
  if (kind == CDV_CPU_BAR_GRID_VALID) return w->L->coop;
  if (kind == CDV_CPU_BAR_GRID && !w->L->coop) {
    record(w, f, CDV_CPU_FAIL_TRAP,
           "grid.sync() in a launch that is not cooperative (launch it with "
           "cooperative = true)");
    stop_launch(w, f);
    abort(); /* not reached: stop_launch leaves this fiber for good */
  }
  if (!w->L->fibers) {
    if (c->nthreads > 1) no_fibers(w, kind == CDV_CPU_BAR_GRID ? "grid.sync()" : "__syncthreads");
    if (kind == CDV_CPU_BAR_GRID && grid_wait(w)) /* a block of one thread: it is the whole block */
      cdv_cpu_fiber_switch(&f->fc, &w->sched);
    return (int)barrier_result(kind, pred != 0, 1);
  }
  f->state = F_BAR, f->kind = (unsigned char)kind, f->val = pred != 0;
  w->ngrid += kind == CDV_CPU_BAR_GRID;
  w->nbar++;
  switch_out(w, f);
  return (int)f->res;
}

static unsigned long long op_warp(cdv_cpu_ctx *c, int kind, unsigned mask, unsigned long long v, int src) {
  worker *w = (worker *)c;
  fiber *f = w->cur;
  if (!w->L->fibers) {
    if (c->nthreads > 1) no_fibers(w, "a warp intrinsic");
    return kind == CDV_CPU_WARP_SHFL ? v : kind == CDV_CPU_WARP_VOTE ? (v != 0) | 1ull << 32 : 0;
  }
  f->state = F_WARP, f->kind = (unsigned char)kind, f->mask = mask, f->val = v, f->src = src;
  w->nwarp++;
  w->warps_waiting |= 1u << (f->hdr->tid >> 5);
  switch_out(w, f);
  return f->res;
}

static void op_fail(cdv_cpu_ctx *c, int kind, const char *text, const char *file, unsigned line) {
  worker *w = (worker *)c;
  if (kind == CDV_CPU_FAIL_MEMORY) /* NOTE [checked memory] in cpu_checked.c: line is the parameter */
    record(w, w->cur, kind, "%u|%s", line, text ? text : "");
  else
    record(w, w->cur, kind, "%s:%u: %s", file ? file : "?", line, text ? text : "");
  stop_launch(w, w->cur);
  abort(); /* not reached: stop_launch leaves this fiber for good */
}

/* ---------------------------------------------------------------- workers */
static void set_block(worker *w, uint64_t b) {
  const unsigned *g = w->L->grid;
  w->ctx.block_idx[0] = (unsigned)(b % g[0]);
  w->ctx.block_idx[1] = (unsigned)(b / g[0] % g[1]);
  w->ctx.block_idx[2] = (unsigned)(b / ((uint64_t)g[0] * g[1]));
}

/* NOTE [chunked loop mode]: in loop mode (no fibers per thread: the loop and the fast paths of NOTE [fast paths]
 * in cpu_compile.c) one fiber runs a whole chunk of blocks [lo, hi), setting the block index before each, where
 * it used to be started afresh for every block and switched to and from twice (a saxpy over 2^24 floats in
 * blocks of 256 spent about 3 ms of its 6.4 there). A failure inside a block leaves the fiber as before
 * (op_fail, stop_launch: the block recorded is the one in ctx), and a preemption leaves it from anywhere
 * (NOTE [preempting a block]); the worker starts the fiber afresh for its next chunk either way. */
static void chunk_main(void *arg) {
  fiber *f = arg;
  worker *w = f->w;
  const launch *L = w->L;
  unsigned *bi = w->ctx.block_idx;
  set_block(w, w->lo);
  for (uint64_t b = w->lo; b < w->hi; b++) { /* the next index by carries, not three divisions */
    L->fn->entry(&w->ctx, L->args, CDV_CPU_RUN_BLOCK);
    if (++bi[0] == L->grid[0]) {
      bi[0] = 0;
      if (++bi[1] == L->grid[1]) bi[1] = 0, bi[2]++;
    }
  }
  f->state = F_DONE;
  w->cur = NULL;
  cdv_cpu_fiber_switch(&f->fc, &w->sched);
}

/* (see NOTE [chunked loop mode]) blocks [lo, hi) in loop mode, on one fiber; -1 when one failed */
static int run_chunk(worker *w, uint64_t lo, uint64_t hi) {
  fiber_start(w, 0, chunk_main);
  w->cur = &w->f[0];
  w->lo = lo, w->hi = hi;
  cdv_cpu_fiber_switch(&w->sched, &w->f[0].fc);
  return w->aborted ? -1 : 0;
}

static int run_block(worker *w, uint64_t b) {
  set_block(w, b);
  if (w->L->fibers) return run_fibers(w);
  return run_chunk(w, b, b + 1); /* a cooperative launch's block in loop mode */
}

static int worker_init(worker *w, launch *L, int slot) {
  memset(w, 0, sizeof *w);
  w->L = L;
  memcpy(w->ctx.block_dim, L->block, sizeof L->block);
  memcpy(w->ctx.grid_dim, L->grid, sizeof L->grid);
  w->ctx.nthreads = L->nthreads;
  w->ctx.dyn_shared = thread_dsm();
  w->ctx.barrier = op_barrier;
  w->ctx.warp = op_warp;
  w->ctx.fail = op_fail;
  w->ctx.extent = L->extents;
  w->nf = L->fibers ? (int)L->nthreads : 1;
  w->f = slots[slot].f; /* reserved by reserve_stacks */
  w->rq = slots[slot].rq;
  if (!w->ctx.dyn_shared) return -1;
  memset(w->f, 0, (size_t)w->nf * sizeof *w->f);
  memset(w->rq, 0, (size_t)w->nf * sizeof *w->rq);
  for (int i = 0; i < w->nf; i++) {
    w->f[i].w = w;
    w->f[i].region = slots[slot].r[i];
    w->f[i].hdr = cdv_cpu_stack_hdr(w->f[i].region);
  }
  return 0;
}

static void prefault_share(const launch *L, int slot);

static void runner(int slot, int on);

/* (see NOTE [preempting a block]) worker_run's landing after a preemption: the block was abandoned where it
 * was; the launch ends as interrupted. SIGURG is unblocked again (the handler that jumped had it blocked; no mask
 * is saved by sigsetjmp, whose cost was 1.3 us a launch here). */
static void preempted(worker *w, int slot) {
  sigset_t urg;
  sigemptyset(&urg);
  sigaddset(&urg, SIGURG);
  pthread_sigmask(SIG_UNBLOCK, &urg, NULL);
  tls_jump = NULL;
  runner(slot, 0);
  record(w, NULL, FAIL_INTERRUPT, "interrupted");
  stop_launch(w, NULL);
  tls_worker = NULL;
}

/* NOTE [block affinity]: each worker of a launch has a stretch of the grid, its nworkers-th, and takes its
 * chunks from there first, then from the others' stretches in turn (a worker that is late or never joins,
 * NOTE [joining a launch], leaves its stretch to the others). A pool thread has the same slot in every launch,
 * so when a program launches over the same arrays again, each worker meets the blocks whose data its core
 * touched last time, as OpenMP's static schedule does; from one counter, every launch dealt the blocks out
 * anew. Cooperative launches (a block a worker) and launches of more than SPAN_MAX workers keep the one
 * counter. */
static uint64_t span_start(const launch *L, int v) {
  uint64_t per = L->nblocks / (uint64_t)L->nworkers, rest = L->nblocks % (uint64_t)L->nworkers;
  return per * (uint64_t)v + ((uint64_t)v < rest ? (uint64_t)v : rest);
}

static void spans_init(launch *L) {
  L->spans = !L->coop && L->nworkers > 1 && L->nworkers <= SPAN_MAX && L->next == 0;
  for (int v = 0; L->spans && v < L->nworkers; v++) L->span[v].next = span_start(L, v);
}

/* NOTE [guided chunks]: in loop mode a worker takes a share of what is left at once: half of what is left of its
 * own stretch (NOTE [block affinity]), or a twice-the-workers-th of the rest of the grid when there is one
 * counter, never fewer blocks than the launch's chunk nor more than GUIDED_MAX of them (or CHUNK_MAX); from
 * another's stretch the launch's chunk. Every take is a locked add, which waits until the stores of the blocks
 * before it have left the core's store buffer: in bench/cpu's wavefront (blocks of 16 threads whose last region
 * stores 256 ints over 16 rows) 90% of worker_run's samples sat on that add, 6% of the run on one worker (2%
 * after), with a take every 2-4 blocks (chunks of a sixteenth of a worker's share). Halving keeps the last
 * pieces small, so a late worker still evens out; the cap bounds what a worker holds, which the others cannot
 * take over, while the machine gives its core to another process (4 chunks: a quarter of its share where the
 * grid has 16 chunks a worker, as cdv_cpu_launch cuts it). */
#define GUIDED_MAX 4
static uint64_t guided(const launch *L, uint64_t left, uint64_t share) {
  uint64_t c = L->fibers || L->coop ? 0 : left / share, most = (uint64_t)L->chunk * GUIDED_MAX;
  if (most > CHUNK_MAX) most = CHUNK_MAX;
  return c < L->chunk ? L->chunk : c > most ? most : c;
}

/* The next chunk [*b, *end) for the worker in slot; 0 when none is left. */
static int take_blocks(launch *L, int slot, uint64_t *b, uint64_t *end) {
  if (!L->spans) {
    uint64_t seen = __atomic_load_n(&L->next, __ATOMIC_RELAXED);
    uint64_t c = seen < L->nblocks ? guided(L, L->nblocks - seen, 2 * (uint64_t)L->nworkers) : L->chunk;
    *b = __atomic_fetch_add(&L->next, c, __ATOMIC_RELAXED);
    *end = *b + c < L->nblocks ? *b + c : L->nblocks;
    return *b < L->nblocks;
  }
  for (int k = 0; k < L->nworkers; k++) {
    int v = (slot + k) % L->nworkers;
    uint64_t hi = span_start(L, v + 1), seen = __atomic_load_n(&L->span[v].next, __ATOMIC_RELAXED);
    if (seen >= hi) continue;
    uint64_t c = k == 0 ? guided(L, hi - seen, 2) : L->chunk; /* NOTE [guided chunks] */
    *b = __atomic_fetch_add(&L->span[v].next, c, __ATOMIC_RELAXED);
    if (*b < hi) {
      *end = *b + c < hi ? *b + c : hi;
      return 1;
    }
  }
  return 0;
}

static void worker_run(launch *L, int slot) {
  worker w;
  sigjmp_buf jump;
  int preemptible = !L->in_child; /* NOTE [preempting a block] */
  if (worker_init(&w, L, slot)) {
    record(&w, NULL, FAIL_OOM, "out of host memory");
    stop_launch(&w, NULL);
  } else {
    tls_worker = &w;
    if (preemptible && sigsetjmp(jump, 0) != 0) {
      preempted(&w, slot);
      return;
    }
    if (preemptible) {
      tls_jump = &jump;
      runner(slot, 1);
    }
    if (L->in_child && L->npre) prefault_share(L, slot);
    while (!__atomic_load_n(&L->aborted, __ATOMIC_RELAXED)) {
      if (__atomic_load_n(&interrupts, __ATOMIC_RELAXED) != L->intr0) { /* NOTE [interrupting a launch] */
        record(&w, NULL, FAIL_INTERRUPT, "interrupted");
        stop_launch(&w, NULL);
        break;
      }
      uint64_t b, end;
      if (!take_blocks(L, slot, &b, &end)) break;
      if (!L->fibers && !L->coop) /* NOTE [chunked loop mode] */
        run_chunk(&w, b, end);
      else
        for (; b < end; b++)
          if (run_block(&w, b)) break;
      if (L->coop) { /* one block per worker (NOTE [cpu grid sync]) */
        if (!w.aborted) grid_exit(L);
        break;
      }
    }
    if (preemptible) {
      runner(slot, 0);
      tls_jump = NULL;
    }
    tls_worker = NULL;
  }
}

/* ---------------------------------------------------------------- pointer arguments */
/* NOTE [prefaulting]: a forked child does not inherit the page tables of shared mappings (Linux skips them
 * at fork), so its first touch of every page of every array faults. One fault per 4 KiB page adds up: a
 * saxpy over two 64 MiB arrays spent several times its run time faulting in a child. So the parent lists
 * the allocations that pointer arguments point into (the object exports which parameters are pointers),
 * and the child's workers map them with MADV_POPULATE_WRITE, each its share, before running blocks: one
 * system call instead of a fault per page (Linux 5.14 and later; elsewhere the faults happen as before).
 * Arrays beyond PREFAULT_LIMIT in total are left to fault on demand, in case a kernel reads little of them. */
static void plan_prefault(launch *L, void *base, size_t len) {
  for (int k = 0; k < L->npre; k++)
    if (L->pre[k].p == base) return;
  if (L->npre < MAX_PREFAULT && L->pre_total + len <= PREFAULT_LIMIT) {
    L->pre[L->npre].p = base, L->pre[L->npre].n = len;
    L->npre++, L->pre_total += len;
  }
}

/* Look at the pointer arguments before forking: arrays of this backend are prefaulted; a pointer into other
 * mapped memory (a host buffer wrapped as an array, say) returns 1, because the child's writes there would be
 * lost (NOTE [fault containment]): such a launch runs in-process. An unmapped pointer keeps the fork, so
 * that using it is a contained fault. Pointers stored inside structs or arrays are not looked at. */
static int plan_args(launch *L) {
  const cdv_cpu_sig *sig = L->fn->sig;
  long pg = page_size();
  for (unsigned i = 0; sig && L->args && i < sig->n; i++) {
    unsigned w = sig->w[i];
    void *v, *base;
    size_t len;
    unsigned char vec;
    if (!CDV_CPU_PARAM_PTR(w) || CDV_CPU_PARAM_SIZE(w) != sizeof v || !L->args[i]) continue;
    memcpy(&v, L->args[i], sizeof v);
    if (!v) continue;
    if (cdv_cpu_alloc_containing(v, &base, &len) == 0)
      plan_prefault(L, base, len);
    else if (mincore((void *)((uintptr_t)v & ~(uintptr_t)(pg - 1)), (size_t)pg, &vec) == 0)
      return 1;
  }
  return 0;
}

/* The slot'th of nworkers equal shares of the listed arrays, populated. */
static void prefault_share(const launch *L, int slot) {
  size_t pg = (size_t)page_size(), nw = (size_t)L->nworkers;
  size_t lo = L->pre_total / nw * (size_t)slot / pg * pg;
  size_t hi = slot + 1 == L->nworkers ? L->pre_total : L->pre_total / nw * (size_t)(slot + 1) / pg * pg;
  size_t off = 0;
  for (int k = 0; k < L->npre; off += L->pre[k].n, k++) {
    size_t a = lo > off ? lo : off, b = hi < off + L->pre[k].n ? hi : off + L->pre[k].n;
    if (a < b) madvise(L->pre[k].p + (a - off), b - a, MADV_POPULATE_WRITE);
  }
}

/* ---------------------------------------------------------------- in-process launches: a persistent pool */
static pthread_mutex_t run_lock = PTHREAD_MUTEX_INITIALIZER; /* one in-process launch at a time */
static struct pool {
  pthread_mutex_t m;
  pthread_cond_t go, done;
  int nthreads, want;
  launch *L;
  /* lines apart: the helpers that wait spin on gen while those that leave write busy (NOTE [joining a launch]) */
  _Alignas(64) unsigned gen;
  _Alignas(64) unsigned busy, open, sleeping;
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, NULL, 0, 0, 0, 0};

/* Worker threads take no asynchronous signals: those belong to the host's threads. */
static void block_async_signals(void) {
  sigset_t s;
  sigfillset(&s);
  int sync_sigs[] = {SIGSEGV, SIGBUS,  SIGFPE, SIGILL,
                     SIGABRT, SIGTRAP, SIGSYS, SIGURG}; /* SIGURG: NOTE [preempting a block] */
  for (size_t i = 0; i < sizeof sync_sigs / sizeof sync_sigs[0]; i++) sigdelset(&s, sync_sigs[i]);
  pthread_sigmask(SIG_SETMASK, &s, NULL);
}

/* (see NOTE [launch handshake]) how long a side spins for the other's answer before it sleeps: a budget of its
 * own that halves after a spin the answer did not end and doubles after one it did, between these bounds */
#define LW_SPIN_MIN 4000L
#define LW_SPIN_MAX 50000L
#define LW_WAIT_MAX 200000L /* the handshake's bound (lw_wait), which learns how long launches take: lw_learn */
static int lw_spin(const unsigned *w, unsigned old, long *budget);
static int spin_until(const unsigned *w, unsigned v, int eq, long *budget, long max);

/* NOTE [joining a launch]: the helpers are woken for every launch, but the launch waits only for those that
 * joined it before the calling thread had run out of blocks; then it closes (pool.open = 0) and one that comes
 * later goes back to its spin or sleep. Waiting for every woken helper made a launch of a few short blocks cost
 * a wake-up of each (15 to 30 us in-process, over 100 us in the launch worker on a busy 2-core VM) where its
 * blocks took well under a microsecond. Any worker may take blocks from any worker's stretch (see NOTE [block
 * affinity]), so a helper that never joins leaves none behind; its share of the prefaulting (NOTE
 * [prefaulting]) is then done by the first touches instead.
 * Joining and leaving take no lock: a helper counts itself in pool.busy, then looks whether the launch is open
 * (both sequentially consistent, against the closing side's store of open and load of busy: one of the two
 * sees the other), and counts itself out when done; the calling thread, its blocks run, closes the launch and
 * spins on busy (lw_spin's bounds), sleeping on pool.done only past its budget, where the last helper out
 * wakes it. Through pool.m, every helper took the lock twice a launch and the calling thread slept on a
 * condition variable until the last one was done: in perf of a loop of empty launches of 16 blocks, most of
 * the time was futex wake-ups and waits (OpenMP's empty parallel loop, its threads active: 0.7 us). With NOTE
 * [guided chunks], bench/cpu's wavefront in-process on the 2-core VM (3 runs each, at nice -15 beside other
 * work): 15.2-16.5 ms before, 12.2-12.8 ms after, OpenMP with active threads 4.3-5.2 ms. gen is
 * advanced before open is set, so a helper that finds the launch open reads its generation, which stays
 * while the helper is counted in busy. A helper beyond the launch's want (pool.want, written before gen) does
 * not count itself at all: in a launch of 3 blocks on 16 cores, 13 helpers would write busy's line twice for
 * nothing, and the calling thread would wait for them. Returns the generation the helper has seen. */
static unsigned pool_join(int slot) {
  unsigned g = __atomic_load_n(&pool.gen, __ATOMIC_SEQ_CST);
  if (slot > __atomic_load_n(&pool.want, __ATOMIC_RELAXED)) return g;
  __atomic_add_fetch(&pool.busy, 1, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(&pool.open, __ATOMIC_SEQ_CST)) {
    g = __atomic_load_n(&pool.gen, __ATOMIC_SEQ_CST);
    if (slot <= __atomic_load_n(&pool.want, __ATOMIC_RELAXED)) worker_run(pool.L, slot);
  }
  if (__atomic_sub_fetch(&pool.busy, 1, __ATOMIC_SEQ_CST) == 0 && __atomic_load_n(&pool.sleeping, __ATOMIC_SEQ_CST)) {
    pthread_mutex_lock(&pool.m);
    pthread_cond_signal(&pool.done);
    pthread_mutex_unlock(&pool.m);
  }
  return g;
}

/* NOTE [pool spin]: a helper that has finished a launch watches pool.gen for a while (lw_spin's adaptive budget,
 * 4 to 50 us, as in NOTE [launch handshake]) before it sleeps on pool.go, as OpenMP's threads spin between parallel
 * regions. A program of many short launches (bench/cpu's wavefront: 255 launches of up to 128 blocks of 16
 * threads) otherwise met sleeping helpers at every launch: their wake-up came after the calling thread had run
 * most of the blocks alone (NOTE [joining a launch]): 14.3 ms on 16 cores, 17.5 on 2. pool.gen is written
 * under pool.m, atomically, for the spinners that read it without the lock. */
static void *pool_main(void *arg) {
  int slot = (int)(intptr_t)arg;
  unsigned seen = 0; /* helpers start before the first launch is posted (gen 0) */
  long spin = 0; /* lw_spin's budget: NOTE [pool spin] */
  block_async_signals();
  if (in_worker) child_altstack();
  for (;;) {
    if (!lw_spin(&pool.gen, seen, &spin)) { /* NOTE [pool spin] */
      pthread_mutex_lock(&pool.m);
      while (__atomic_load_n(&pool.gen, __ATOMIC_SEQ_CST) == seen) pthread_cond_wait(&pool.go, &pool.m);
      pthread_mutex_unlock(&pool.m);
    }
    seen = pool_join(slot);
  }
  return NULL;
}

/* (see NOTE [joining a launch]) the calling thread's side of a launch on the pool */
static void run_pool(launch *L, int nw) {
  static long spin; /* spin_until's budget for the helpers' last blocks; one in-process launch at a time */
  pthread_mutex_lock(&pool.m);
  if (pool.gen == 0 && pool.nthreads == 0) {
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    for (int i = 1; i < cdv_cpu_worker_count(); i++) {
      pthread_t t;
      if (pthread_create(&t, &a, pool_main, (void *)(intptr_t)i)) break;
      pool.nthreads++;
    }
    pthread_attr_destroy(&a);
  }
  __atomic_store_n(&pool.want, nw - 1 < pool.nthreads ? nw - 1 : pool.nthreads, __ATOMIC_RELAXED); /* before gen */
  pool.L = L;
  __atomic_add_fetch(&pool.gen, 1, __ATOMIC_SEQ_CST); /* spinners read it without the lock: NOTE [pool spin] */
  __atomic_store_n(&pool.open, 1, __ATOMIC_SEQ_CST);
  pthread_cond_broadcast(&pool.go);
  pthread_mutex_unlock(&pool.m);
  worker_run(L, 0);
  __atomic_store_n(&pool.open, 0, __ATOMIC_SEQ_CST);
  if (spin_until(&pool.busy, 0, 1, &spin, LW_SPIN_MAX)) return;
  pthread_mutex_lock(&pool.m);
  __atomic_store_n(&pool.sleeping, 1, __ATOMIC_SEQ_CST);
  while (__atomic_load_n(&pool.busy, __ATOMIC_SEQ_CST)) pthread_cond_wait(&pool.done, &pool.m);
  __atomic_store_n(&pool.sleeping, 0, __ATOMIC_SEQ_CST);
  pthread_mutex_unlock(&pool.m);
}

/* ---------------------------------------------------------------- interrupts */
/* NOTE [interrupting a launch]: a launch that never ends must give way to Ctrl-C.
 * - A forked launch: while the parent waits for the child, SIGINT has a handler of ours that kills every
 *   launch child (SIGINT, whose default action ends it) and then does what the handler before it did (lua's
 *   sets a hook that raises "interrupted!"; with the default action, the process ends after the child, as it
 *   would have without us; an ignored SIGINT is left ignored). A SIGINT sent to the process alone (kill -INT
 *   pid) thus ends the launch with an error, not only one sent to the process group. The handler is installed
 *   by the first launch that waits and put back by the last, when it is still ours.
 * - cdv_cpu_interrupt() (called by cudadev_interrupt(), so by luacuda's Ctrl-C) does the same to the children
 *   and counts an interrupt: in-process launches (CUDADEV_CPU_FORK=0) stop where they are and end with an
 *   error (NOTE [preempting a block]), so a long grid and a block that never ends both give way. (A SIGINT
 *   reaches them only through a host that calls it, as luacuda does: arming our handler around every
 *   in-process launch would cost it two system calls.)
 * Only async-signal-safe work happens in the handler.
 *
 * NOTE [preempting a block]: a thread that runs blocks of an in-process launch registers itself (runners)
 * and keeps a way out (tls_jump, set by sigsetjmp in worker_run). cdv_cpu_interrupt() sends each registered
 * thread SIGURG, whose handler, when the thread is in such a launch and the interrupt count has moved since
 * it began, siglongjmps out of the kernel: the block is abandoned mid-way (its fibers are set up afresh at
 * the next launch), the launch records an interrupt, and the others stop taking blocks. Not while it holds
 * the launch's grid barrier lock or writes a failure (tls_nopreempt): it then stops at the next block. What
 * the kernel's own code held (a stdio lock, say) stays held, which is why this is only for in-process
 * launches, which are for gdb and speed; contained launches end their process instead. SIGURG, whose default
 * is to be ignored, goes on to the handler before ours when it arrives for anything else. */
static pid_t children[MAX_CHILDREN];
static pthread_mutex_t intr_lock = PTHREAD_MUTEX_INITIALIZER;
static int intr_users, intr_default;
static struct sigaction intr_prev;

/* Thread ids (kernel tids: a stale one gets a SIGURG that on_preempt passes on, where a stale pthread_t would be
 * undefined) of the threads running blocks of an in-process launch, 0 for none. A line each and no count of
 * them: every worker writes its own twice a launch, and 16 of them took turns on one line (NOTE [joining a
 * launch]). */
static struct { _Alignas(64) pid_t tid; } runner_tid[MAX_WORKERS];
static struct sigaction preempt_prev;

/* This thread's kernel id, asked of the kernel once: gettid() is a system call, and on this VM it was most of an
 * empty in-process launch (1.6 us with it in every launch, 0.24 us without). Forgotten in the child of a fork
 * (its one thread has another id). */
static __thread pid_t tls_tid;
static void tid_forget(void) { tls_tid = 0; }
static pid_t my_tid(void) {
  if (!tls_tid) tls_tid = gettid();
  return tls_tid;
}

/* (see NOTE [preempting a block]) this thread runs, or no longer runs, blocks in slot of an in-process launch */
static void runner(int slot, int on) { __atomic_store_n(&runner_tid[slot].tid, on ? my_tid() : 0, __ATOMIC_SEQ_CST); }

/* is this thread a runner? Asked before the handler touches thread-local storage, whose first use in a thread
 * may allocate (cudadev is dlopen'ed): a SIGURG meant for the host may land on any of its threads. */
static int is_runner(void) {
  pid_t me = gettid();
  for (int i = 0; i < MAX_WORKERS; i++)
    if (__atomic_load_n(&runner_tid[i].tid, __ATOMIC_SEQ_CST) == me) return 1;
  return 0;
}

static void on_preempt(int sig, siginfo_t *si, void *uc) {
  worker *w = is_runner() ? tls_worker : NULL;
  if (w && tls_jump && !tls_nopreempt && __atomic_load_n(&interrupts, __ATOMIC_SEQ_CST) != w->L->intr0)
    siglongjmp(*tls_jump, 1);
  if (preempt_prev.sa_flags & SA_SIGINFO)
    preempt_prev.sa_sigaction(sig, si, uc);
  else if (preempt_prev.sa_handler != SIG_DFL && preempt_prev.sa_handler != SIG_IGN)
    preempt_prev.sa_handler(sig);
}

static void preempt_install(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_preempt;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGURG, &sa, &preempt_prev);
  pthread_atfork(NULL, NULL, tid_forget); /* before the first runner() */
}

void cdv_cpu_interrupt(void) {
  __atomic_add_fetch(&interrupts, 1, __ATOMIC_SEQ_CST);
  for (int i = 0; i < MAX_CHILDREN; i++) {
    pid_t p = __atomic_load_n(&children[i], __ATOMIC_SEQ_CST);
    if (p > 0) kill(p, SIGINT);
  }
  /* this thread last: its SIGURG stays pending until the signal handler that called us has returned (see NOTE
   * [preempting a block]) */
  pid_t me = gettid(), pid = getpid();
  int self = 0;
  for (int i = 0; i < MAX_WORKERS; i++) {
    pid_t t = __atomic_load_n(&runner_tid[i].tid, __ATOMIC_SEQ_CST);
    if (t == me)
      self = 1;
    else if (t > 0)
      tgkill(pid, t, SIGURG);
  }
  if (self) {
    sigset_t urg;
    sigemptyset(&urg);
    sigaddset(&urg, SIGURG);
    pthread_sigmask(SIG_BLOCK, &urg, NULL);
    tgkill(pid, me, SIGURG);
  }
}

static void on_interrupt(int sig, siginfo_t *si, void *uc) {
  int saved = errno;
  cdv_cpu_interrupt();
  if (intr_prev.sa_flags & SA_SIGINFO)
    intr_prev.sa_sigaction(sig, si, uc);
  else if (intr_prev.sa_handler == SIG_DFL)
    intr_default = 1;
  else if (intr_prev.sa_handler != SIG_IGN)
    intr_prev.sa_handler(sig);
  errno = saved;
}

static int add_child(pid_t pid) {
  for (int i = 0; i < MAX_CHILDREN; i++) {
    pid_t z = 0;
    if (__atomic_compare_exchange_n(&children[i], &z, pid, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) return i;
  }
  return -1;
}

static void interrupt_arm(void) {
  pthread_mutex_lock(&intr_lock);
  if (intr_users++ == 0) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_interrupt;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGURG); /* a preempted block leaves after the handlers before ours have run */
    sigaction(SIGINT, &sa, &intr_prev);
    if (!(intr_prev.sa_flags & SA_SIGINFO) && intr_prev.sa_handler == SIG_IGN)
      sigaction(SIGINT, &intr_prev, NULL); /* ignored stays ignored */
  }
  pthread_mutex_unlock(&intr_lock);
}

static void interrupt_disarm(void) {
  pthread_mutex_lock(&intr_lock);
  if (--intr_users == 0) {
    struct sigaction cur; /* put back in one call, the common case (a launch pays for each: NOTE [launch handshake]) */
    sigaction(SIGINT, &intr_prev, &cur);
    if (!((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_interrupt))
      sigaction(SIGINT, &cur, NULL); /* no longer ours: theirs stays */
    if (intr_default) { /* SIGINT's default action, delayed until the child was gone */
      intr_default = 0;
      raise(SIGINT);
    }
  }
  pthread_mutex_unlock(&intr_lock);
}

/* ---------------------------------------------------------------- forked launches */
/* NOTE [forks under ASan]: AddressSanitizer's allocator (GCC 12's) is not made safe across fork: a host thread
 * that was refilling its cache at the fork leaves the size class locked in the child, and the child's next
 * thread deadlocks as it starts (its start allocates). A host with threads of its own (embed_threads) hung
 * one run in three. So under ASan a launch process starts no thread: the launch worker runs every block on
 * its one thread and has no watchdog thread (the socket's end still ends it when idle), a child forked per
 * launch the same, and cooperative launches, which need a thread per block, run in this process. Found by
 * looking for ASan's entry point, so an instrumented build and a preloaded runtime both count. */
static int under_asan(void) {
  static int v = -1;
  int x = __atomic_load_n(&v, __ATOMIC_RELAXED);
  if (x < 0) __atomic_store_n(&v, x = dlsym(RTLD_DEFAULT, "__asan_init") != NULL, __ATOMIC_RELAXED);
  return x;
}

static status *child_status;
static launch *child_launch;

/* (see NOTE [fault containment]) in the child, a fault records its signal, address, block and thread, then lets
 * the default action end the child (returning re-executes the faulting instruction). Only async-signal-safe
 * work here. Threads of several blocks may fault at once: the one that claims the status writes it while the
 * others wait, and only then is the default action put back. (With SA_RESETHAND, a second thread's fault
 * ended the child before the first had written anything: a message without its address and thread.) */
static void on_fault(int sig, siginfo_t *si, void *uc) {
  (void)uc;
  status *st = child_status;
  worker *w = tls_worker;
  if (st && claim(st)) {
    st->kind = CDV_CPU_FAIL_SIGNAL;
    st->signo = sig;
    st->addr = (uintptr_t)si->si_addr;
    if (w) { /* a stack overflow: the guard page of the running thread's stack (of any, outside a thread) */
      note_where(st, w, w->cur);
      for (int i = 0; i < w->nf; i++)
        if (!w->cur || w->cur == &w->f[i])
          st->overflow |= st->addr - (uintptr_t)w->f[i].region < (uintptr_t)page_size();
    }
    __atomic_store_n(&st->claimed, 2, __ATOMIC_SEQ_CST); /* complete */
  }
  for (int i = 0; st && i < 1000 && __atomic_load_n(&st->claimed, __ATOMIC_SEQ_CST) == 1; i++)
    nanosleep(&(struct timespec){0, 100000}, NULL);
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigaction(sig, &dfl, NULL);
  if (sig == SIGABRT || sig == SIGTRAP || sig == SIGSYS)
    raise(sig); /* not re-executed by returning: raise it again under the default action */
}

static void child_signals(void) {
  static const int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS};
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK; /* blocked while handled: a fault in the handler ends the child */
  sigemptyset(&sa.sa_mask);
  sigset_t unblock;
  sigemptyset(&unblock);
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
    sigaction(sigs[i], &sa, NULL);
    sigaddset(&unblock, sigs[i]);
  }
  /* interrupting the host (Ctrl-C) also ends the launch; the host's own handlers are for the host */
  static const int dfl[] = {SIGINT, SIGTERM, SIGQUIT, SIGHUP, SIGPIPE, SIGUSR1, SIGUSR2, SIGALRM};
  for (size_t i = 0; i < sizeof dfl / sizeof dfl[0]; i++) signal(dfl[i], dfl[i] == SIGPIPE ? SIG_IGN : SIG_DFL);
  sigaddset(&unblock, SIGALRM); /* (NOTE [launch time limit]) its default action ends the process */
  pthread_sigmask(SIG_UNBLOCK, &unblock, NULL);
}

/* Each thread of the child handles its faults on an alternate stack, so a stack overflow is reported too. */
static void child_altstack(void) {
  stack_t ss;
  ss.ss_sp = mmap(NULL, ALTSTACK_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ss.ss_size = ALTSTACK_SIZE;
  ss.ss_flags = 0;
  if (ss.ss_sp != MAP_FAILED) sigaltstack(&ss, NULL);
}

static void *child_thread(void *arg) {
  child_altstack();
  worker_run(child_launch, (int)(intptr_t)arg);
  return NULL;
}

/* NOTE [launch time limit]: a contained launch may have a time limit (the launch's timeout, else its
 * module's cd.compile timeout, else $CUDADEV_CPU_TIMEOUT; resolved in cdv_cpu_launch). The process that runs
 * it (the launch worker or a child of its own) arms ITIMER_REAL with it and disarms it when the blocks are
 * done, before it says so; SIGALRM's default action then ends that process wherever a kernel is (a loop that
 * never ends, a deadlock of its own making), as a fault would: the host sees it end by SIGALRM, reports the
 * limit, and the next launch forks a fresh worker. The process, not the host, keeps the time: the host
 * waits as before (a spin, then a blocking read), with no clock of its own to poll. An in-process launch
 * (CUDADEV_CPU_FORK=0, or one whose arguments keep it in the process: NOTE [fault containment]) has no time
 * limit: its blocks run on the host's threads, and stopping them where they are could leave a lock of the
 * host's held (stdio's, malloc's) for ever after. cdv_cpu_interrupt() can still stop it, at that risk. */
static void limit_arm(double seconds) { /* child_signals made SIGALRM's action the default, unblocked */
  struct itimerval it;
  memset(&it, 0, sizeof it);
  it.it_value.tv_sec = (time_t)seconds;
  it.it_value.tv_usec = (suseconds_t)((seconds - (double)(time_t)seconds) * 1e6);
  if (!it.it_value.tv_sec && !it.it_value.tv_usec) it.it_value.tv_usec = 1;
  setitimer(ITIMER_REAL, &it, NULL);
}

static void limit_disarm(void) {
  struct itimerval it;
  memset(&it, 0, sizeof it);
  setitimer(ITIMER_REAL, &it, NULL);
}

__attribute__((noreturn)) static void child_main(launch *L, int nw) {
#ifdef __linux__
  prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the launching thread */
#endif
  child_status = L->st;
  child_launch = L;
  L->in_child = 1;
  child_signals();
  child_altstack();
  if (L->retrack) { /* (see NOTE [naming the thread]) what the block prints was printed by the launch */
    int fd = open("/dev/null", O_WRONLY);
    if (fd >= 0) dup2(fd, 1), dup2(fd, 2), close(fd);
    alarm(RETRACK_SECONDS);
  } else if (L->timeout > 0) {
    limit_arm(L->timeout); /* NOTE [launch time limit] */
  }
  pthread_t th[MAX_WORKERS];
  int started = 1;
  if (under_asan() && !L->coop) nw = 1; /* NOTE [forks under ASan] (cooperative launches do not come here) */
  for (; started < nw; started++)
    if (pthread_create(&th[started], NULL, child_thread, (void *)(intptr_t)started))
      break; /* fewer workers: the block counter shares the work among those that exist */
  if (started < nw && L->coop) { /* but every block of a cooperative launch needs its own */
    if (claim(L->st)) {
      L->st->kind = FAIL_OOM;
      snprintf(L->st->text, sizeof L->st->text, "%d", started);
    }
    fflush(NULL);
    _exit(EXIT_FAILED);
  }
  worker_run(L, 0);
  for (int i = 1; i < started; i++) pthread_join(th[i], NULL);
  fflush(NULL);
  L->st->done = 1;
  _exit(0);
}

static const char *signal_text(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV (segmentation fault)";
    case SIGBUS: return "SIGBUS (bus error)";
    case SIGFPE: return "SIGFPE (arithmetic exception, e.g. an integer division by zero)";
    case SIGILL: return "SIGILL (illegal instruction)";
    case SIGABRT: return "SIGABRT (aborted)";
    case SIGTRAP: return "SIGTRAP (trace/breakpoint trap)";
    case SIGKILL: return "SIGKILL (killed)";
    case SIGTERM: return "SIGTERM (terminated)";
    case SIGINT: return "SIGINT (interrupted)";
    case SIGSYS: return "SIGSYS (bad system call)";
    default: return NULL;
  }
}

/* A failure the kernel or the scheduler reported (not a signal). */
static int reported_error(const char *k, const status *st, const char *where, cdv_err *e) {
  const char *api = "cpu.launch", *failed = "CUDA_ERROR_LAUNCH_FAILED";
  switch (st->kind) {
    case CDV_CPU_FAIL_ASSERT:
      return cdv_fail(e, api, 710, "CUDA_ERROR_ASSERT", "kernel '%s' failed an assertion: %s%s", k, st->text, where);
    case CDV_CPU_FAIL_TRAP: return cdv_fail(e, api, 719, failed, "kernel '%s' trapped: %s%s", k, st->text, where);
    case CDV_CPU_FAIL_NOSYNC:
      return cdv_fail(e, api, 719, failed,
                      "kernel '%s' used %s, which the cpu device did not find in its source "
                      "(hidden in a header it could not read?)%s",
                      k, st->text, where);
    case CDV_CPU_FAIL_DEADLOCK:
      return cdv_fail(e, api, 719, failed, "kernel '%s' deadlocked on the cpu device: %s%s", k, st->text, where);
    case FAIL_INTERRUPT:
      return cdv_fail(e, api, 719, failed,
                      "kernel '%s' was interrupted before it finished (in this process: its running "
                      "blocks were stopped where they were)",
                      k);
    default: return cdv_fail(e, api, 2, "CUDA_ERROR_OUT_OF_MEMORY", "kernel '%s': out of host memory", k);
  }
}

/* NOTE [faults without addresses]: a sandboxed state's error texts carry no address (a host that shows them
 * to its users would show its memory layout): a fault names the kernel's parameter whose array it is nearest
 * and the offset from what that parameter points to, " at byte offset 4400 of parameter 'x' (4096 bytes
 * long)" (its bytes from there to the end of its array), or says that no argument's array is near. Parameters
 * are matched by their pointer values (the object's list of parameters says which are pointers); the
 * closest one at or below the fault wins, so a view names itself. */
static int fault_param(const launch *L, uintptr_t addr, uintptr_t lo, uintptr_t hi, uintptr_t *at) {
  const cdv_cpu_sig *sig = L->fn->sig;
  int best = -1;
  for (unsigned i = 0; sig && L->args && i < sig->n; i++) {
    uintptr_t p;
    if (!CDV_CPU_PARAM_PTR(sig->w[i]) || !L->args[i]) continue;
    memcpy(&p, L->args[i], sizeof p);
    if (p < lo || p >= hi) continue;
    int closer = best < 0 || (p <= addr ? *at > addr || p > *at : *at > addr && p < *at);
    if (closer) best = (int)i, *at = p;
  }
  return best;
}

static void fault_place_sandboxed(const launch *L, uintptr_t addr, char *out, size_t n) {
  uintptr_t lo, hi, p = 0;
  int small, i = cdv_cpu_alloc_near(addr, &lo, &hi, &small) ? fault_param(L, addr, lo, hi, &p) : -2;
  const cdv_launch_opts *o = L->opts;
  if (i == -2) {
    snprintf(out, n, " away from every array");
  } else if (i < 0) {
    snprintf(out, n, " near an array that is not one of its arguments");
  } else if (i < o->nparams && o->param_names && o->param_names[i][0]) {
    snprintf(out, n, " at byte offset %lld of parameter '%s' (%llu bytes long)", (long long)(addr - p),
             o->param_names[i], (unsigned long long)(hi - p));
  } else {
    snprintf(out, n, " at byte offset %lld of parameter %d (%llu bytes long)", (long long)(addr - p), i + 1,
             (unsigned long long)(hi - p));
  }
}

/* A signal that ended the child: what the fault handler saw, if it ran. */
static int signal_error(const launch *L, const status *st, int sig, const char *where, cdv_err *e) {
  const char *k = L->fn->name;
  if (sig == SIGINT && !st->claimed)
    return cdv_fail(e, "cpu.launch", 719, "CUDA_ERROR_LAUNCH_FAILED",
                    "kernel '%s' was interrupted (SIGINT) before "
                    "it finished",
                    k);
  if (st->overflow)
    return cdv_fail(e, "cpu.launch", 700, "CUDA_ERROR_ILLEGAL_ADDRESS",
                    "kernel '%s' crashed on the cpu device: "
                    "stack overflow (a thread used more than %zu KiB of stack)%s",
                    k, (CDV_CPU_STACK - CDV_CPU_STACK_COLOURS - (size_t)page_size()) / 1024, where);
  char sigbuf[32], at[200] = "";
  const char *t = signal_text(sig);
  if (!t) snprintf(sigbuf, sizeof sigbuf, "signal %d", sig), t = sigbuf;
  int addr = st->claimed && (sig == SIGSEGV || sig == SIGBUS);
  if (addr && L->opts && L->opts->sandbox) { /* NOTE [faults without addresses] */
    fault_place_sandboxed(L, st->addr, at, sizeof at);
  } else if (addr) { /* and where that is relative to the nearest array (NOTE [cpu memory] in backend_cpu.c) */
    char near[150];
    cdv_cpu_alloc_describe(st->addr, near, sizeof near);
    snprintf(at, sizeof at, " at address 0x%lx%s", (unsigned long)st->addr, near);
  }
  return cdv_fail(e, "cpu.launch", addr ? 700 : 719, addr ? "CUDA_ERROR_ILLEGAL_ADDRESS" : "CUDA_ERROR_LAUNCH_FAILED",
                  "kernel '%s' crashed on the cpu device: %s%s%s", k, t, at, where);
}

static int run_forked(launch *L, int nw, size_t stacks, cdv_err *e);

/* NOTE [naming the thread]: the loops of NOTE [fast paths] (cpu_compile.c) keep the thread's index in the
 * fiber header only where code they call reads it (entry_cand 2, or CUDADEV_CPU_FAST=tracked): that store per
 * thread kept loops from vectorising (a guarded saxpy took 14.6 ms tracked, 7.9 untracked). A failure still
 * names its thread:
 * - a failed assert, __trap() and __brkpt() pass the threadIdx they see (the loop's own, in a fast function)
 *   to the prelude's cdv_fail_at, which writes it into the header as it fails: nothing on the normal path;
 * - a signal (SIGSEGV, SIGFPE, ...) in a contained launch of a fast function is known by its block only. The
 *   host then runs that one block again on the kernel's own path (the trampoline's loop, which tracks its
 *   threads), with the same arguments, in a child forked for it (retrack): when that child ends with the same
 *   signal, the thread it names is the launch's; otherwise (it finished, failed differently, or ran past
 *   RETRACK_SECONDS) the message names the block only, as before. CUDA leaves memory undefined after a fault,
 *   so what the re-run writes is no harm; what it prints goes to /dev/null (the launch printed it already).
 *   A tracked fast function re-runs its block too: its stores of the index are plain stores, which the host
 *   compiler may move past a faulting access of a vectorised loop (a segfault at thread 5 was named thread 0);
 *   its own thread stays when the re-run does not fault the same way.
 * In-process launches (CUDADEV_CPU_FORK=0) end the process at a signal: nothing to re-run there. */
static void retrack(const launch *L, status *st) {
  launch R;
  status out;
  cdv_err e;
  memset(&R, 0, sizeof R);
  memset(&out, 0, sizeof out);
  memset(&e, 0, sizeof e);
  R.fn = L->plain;
  memcpy(R.grid, L->grid, sizeof R.grid);
  memcpy(R.block, L->block, sizeof R.block);
  R.nthreads = L->nthreads, R.shared = L->shared, R.args = L->args;
  R.next = st->block[0] + (uint64_t)L->grid[0] * (st->block[1] + (uint64_t)L->grid[1] * st->block[2]);
  R.nblocks = R.next + 1, R.chunk = 1, R.nworkers = 1;
  R.fibers = (R.fn->flags & CDV_CPU_FLAG_FIBERS) && R.nthreads > 1;
  R.intr0 = __atomic_load_n(&interrupts, __ATOMIC_RELAXED);
  R.retrack = 1, R.result = &out;
  pthread_mutex_init(&R.gm, NULL);
  pthread_cond_init(&R.gc, NULL);
  if (run_forked(&R, 1, R.fibers ? R.nthreads : 1, &e) && out.claimed == 2 && out.kind == CDV_CPU_FAIL_SIGNAL &&
      out.signo == st->signo && out.where == 2 && !memcmp(out.block, st->block, sizeof out.block)) {
    memcpy(st->thread, out.thread, sizeof st->thread);
    st->where = 2;
  }
  free(e.log);
  pthread_cond_destroy(&R.gc);
  pthread_mutex_destroy(&R.gm);
}

/* (see NOTE [checked memory] in cpu_checked.c) a checked kernel's access outside its Array: the kernel's text is
 * "<parameter index>|<access> of element <i>|<how far outside>", into which the parameter's name goes. */
static int memory_error(const launch *L, const status *st, const char *where, cdv_err *e) {
  unsigned i = 0;
  int n = 0;
  sscanf(st->text, "%u|%n", &i, &n);
  const char *what = st->text + n, *bar = strchr(what, '|');
  const char *name = L->opts && i < (unsigned)L->opts->nparams && L->opts->param_names ? L->opts->param_names[i] : "";
  char param[160];
  if (name && name[0])
    snprintf(param, sizeof param, "parameter #%u '%s'", i + 1, name);
  else
    snprintf(param, sizeof param, "parameter #%u", i + 1);
  return cdv_fail(e, "cpu.launch", 700, "CUDA_ERROR_ILLEGAL_ADDRESS", "kernel '%s' out-of-bounds %.*s of %s: %s%s",
                  L->fn->name, bar ? (int)(bar - what) : (int)strlen(what), what, param, bar ? bar + 1 : "", where);
}

/* The error of a failed launch, from its status (and, for a child that died without a word, its signal). */
static int launch_error(const launch *L, const status *st, int signo, cdv_err *e) {
  status named;
  if (L->plain && st->claimed == 2 && st->kind == CDV_CPU_FAIL_SIGNAL && st->where) {
    named = *st; /* NOTE [naming the thread] */
    retrack(L, &named);
    st = &named;
  }
  char where[96] = "";
  if (st->where == 2)
    snprintf(where, sizeof where, " (block (%u,%u,%u), thread (%u,%u,%u))", st->block[0], st->block[1], st->block[2],
             st->thread[0], st->thread[1], st->thread[2]);
  else if (st->where == 1)
    snprintf(where, sizeof where, " (block (%u,%u,%u))", st->block[0], st->block[1], st->block[2]);
  int rc, sig = st->claimed && st->kind == CDV_CPU_FAIL_SIGNAL ? st->signo : signo;
  if (st->claimed && st->kind == CDV_CPU_FAIL_MEMORY)
    rc = memory_error(L, st, where, e);
  else if (st->claimed && st->kind != CDV_CPU_FAIL_SIGNAL)
    rc = reported_error(L->fn->name, st, where, e);
  else if (sig)
    rc = signal_error(L, st, sig, where, e);
  else
    rc = cdv_fail(e, "cpu.launch", 719, "CUDA_ERROR_LAUNCH_FAILED",
                  "kernel '%s' ended the cpu device's launch "
                  "process abnormally",
                  L->fn->name);
  e->sticky = 0; /* the host process and its memory are intact: nothing to poison */
  return rc;
}

/* The error of a launch whose process ended before it finished: waited (its wait status ws is known) or not. */
static int ended_error(const launch *L, const status *st, int waited, int ws, cdv_err *e) {
  if (waited && WIFSIGNALED(ws) && WTERMSIG(ws) == SIGALRM && L->timeout > 0 && !st->claimed) {
    cdv_fail(e, "cpu.launch", 702, "CUDA_ERROR_LAUNCH_TIMEOUT",
             "kernel '%s' ran past its time limit of %g s on the cpu device and was stopped (the launch's timeout, "
             "else cd.compile's, else CUDADEV_CPU_TIMEOUT)",
             L->fn->name, L->timeout); /* NOTE [launch time limit] */
    return -1;
  }
  if (waited && WIFEXITED(ws) && WEXITSTATUS(ws) != EXIT_FAILED && !st->claimed)
    return cdv_fail(e, "cpu.launch", 719, "CUDA_ERROR_LAUNCH_FAILED",
                    "kernel '%s' ended the launch process "
                    "with exit status %d (exit() called from a kernel?)",
                    L->fn->name, WEXITSTATUS(ws));
  return launch_error(L, st, waited && WIFSIGNALED(ws) ? WTERMSIG(ws) : 0, e);
}

static int run_forked(launch *L, int nw, size_t stacks, cdv_err *e) {
  status *st = mmap(NULL, sizeof *st, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (st == MAP_FAILED) return cdv_cpu_fail_errno(e, "cpu.launch", errno, "cannot map the launch status page");
  L->st = st;
  pthread_mutex_lock(&slots_lock); /* held across fork: the child must not see the tables mid-update */
  int rc = reserve_stacks(nw, stacks, e), armed = 0;
  pid_t pid = -1;
  if (rc == 0) {
    fflush(NULL);
    interrupt_arm();
    armed = 1;
    pid = fork();
    if (pid == 0) child_main(L, nw);
  }
  int err = errno, child = pid > 0 ? add_child(pid) : -1;
  pthread_mutex_unlock(&slots_lock);
  if (rc == 0 && pid < 0)
    rc = cdv_cpu_fail_errno(e, "cpu.launch", err, "cannot fork the launch process of kernel '%s'", L->fn->name);
  if (rc == 0) {
    int ws = 0;
    pid_t w;
    while ((w = waitpid(pid, &ws, 0)) < 0 && errno == EINTR)
      ;
    if (child >= 0) __atomic_store_n(&children[child], 0, __ATOMIC_SEQ_CST);
    int ok = w < 0 ? st->done : WIFEXITED(ws) && WEXITSTATUS(ws) == 0 && st->done;
    if (!ok) rc = ended_error(L, st, w >= 0, ws, e);
  }
  if (L->result) *L->result = *st;
  munmap(st, sizeof *st);
  if (armed) interrupt_disarm();
  return rc;
}

/* A cooperative launch in this process: a thread of its own per block (NOTE [cpu grid sync]); the pool's
 * threads may be fewer. */
struct coop_arg {
  launch *L;
  int slot;
};

static void *coop_thread(void *arg) {
  struct coop_arg *a = arg;
  block_async_signals();
  worker_run(a->L, a->slot);
  return NULL;
}

static void run_coop_inprocess(launch *L, int nw) {
  pthread_t th[MAX_WORKERS];
  struct coop_arg args[MAX_WORKERS];
  int started = 1;
  for (; started < nw; started++) {
    args[started].L = L, args[started].slot = started;
    if (pthread_create(&th[started], NULL, coop_thread, &args[started])) break;
  }
  if (started < nw) { /* too few threads: the blocks that started leave grid.sync() as after a failure */
    status *st = L->st;
    if (claim(st)) st->kind = FAIL_OOM;
    __atomic_store_n(&L->aborted, 1, __ATOMIC_SEQ_CST);
    pthread_mutex_lock(&L->gm);
    pthread_cond_broadcast(&L->gc);
    pthread_mutex_unlock(&L->gm);
  } else {
    worker_run(L, 0);
  }
  for (int i = 1; i < started; i++) pthread_join(th[i], NULL);
}

/* ---------------------------------------------------------------- the launch worker */
/* NOTE [launch worker]: fork() copies the page tables of the whole host process, so a fork per launch cost
 * 0.26 ms with an empty Lua heap and 53 ms at 1.3 GiB. Contained launches therefore go to one persistent
 * launch worker: a process forked from the host at the first contained launch, which waits for a launch
 * record in a shared page, runs it and answers there (NOTE [launch handshake]); its cost does not grow with
 * the heap.
 * - What it sees: everything the host had mapped when it was forked. Arrays and the writable data of modules
 *   are MAP_SHARED (NOTE [cpu memory], NOTE [shared module data] in backend_cpu.c), so its writes are the
 *   host's, as a forked child's were; code and constant data are the same bytes at the same addresses.
 *   Memory the host maps afterwards does not reach it by itself: an array's mapping or a slab made or
 *   unmapped since is given to the worker with the next launch (NOTE [maps for the worker]). For a module
 *   loaded or unloaded, and pinned memory, backend_cpu.c calls cdv_cpu_maps_changed(); a launch that finds
 *   that count changed since the worker was forked ends the worker and forks a fresh one first. So a loop of
 *   launches and temporaries forks once its modules are loaded. The worker also starts afresh when the
 *   host's stdout or stderr is another file than when it was forked (kernels' printf goes there).
 * - The message: the launch record (grid, block, the entry point, arrays to prefault) and the argument
 *   bytes, copied into a MAP_SHARED page made before the first worker, with the status of NOTE [fault
 *   containment]. A kernel whose object does not list its parameters, or whose arguments do not fit, is
 *   launched the old way, in a child forked for it.
 * - Failures: an assert, __trap, a deadlock or a fault ends the worker as it ended a launch child (the status
 *   page says why; the host waitpid()s it), so the error is the same Lua error as before; the next
 *   contained launch forks a new worker. A worker found dead before it took the message (Ctrl-C to the
 *   process group while idle) is replaced and the launch sent again, once. The worker ends when the host
 *   does: its socket's end when idle, a watchdog thread that sees its parent change while a kernel runs
 *   (not PR_SET_PDEATHSIG: that follows the thread that forked it, which may end while others launch).
 * - The worker closes every file descriptor but stdin, stdout, stderr and its socket: a long-lived copy of a
 *   pipe's write end would keep the host's readers from ever seeing its end. It runs blocks on a pool of
 *   threads of its own (the host's pool threads do not exist in it), each with an alternate signal stack.
 * - One contained launch at a time goes to the worker (lw_lock); launches of other host threads wait.
 * CUDADEV_CPU_FORK=each forks a child per launch, as before (for comparison); =0 runs in-process.
 *
 * NOTE [launch handshake]: how a launch reaches the worker and its end reaches the host. A byte each way on
 * the socket cost 30 us a launch on a 2-core VM (a one-byte ping-pong between two processes: 34 us; each
 * side's wake-up is a trip through the scheduler), so the socket now carries only descriptors (NOTE [maps for
 * the worker]) and says when the other side is gone:
 * - The page holds two counters: req (launches the host posted) and done (the last one the worker finished),
 *   on cache lines of their own. The host writes the record, then req + 1; the worker runs it, then sets done.
 * - The side that waits spins on the other's counter first (lw_spin), then sets its sleeping flag (hsleep,
 *   wsleep) and sleeps in FUTEX_WAIT on the counter (a shared futex: the page is MAP_SHARED between the two
 *   processes), which the kernel enters only while the counter still holds the old value. The side that posts
 *   stores its counter, then reads the other's flag and calls FUTEX_WAKE only when it is set: both are
 *   sequentially consistent, so of a sleeper that set its flag and a poster that looks at it one sees the
 *   other, and the kernel's compare closes the gap between the flag and the sleep (no lost wake-up). The
 *   counter is the truth: a wake-up that finds it unchanged sleeps again. (Issue 30: the socket's read() and
 *   send() were about 12 us of each round trip under load; measured before and after in doc/cpu-device.md.)
 * - The spin is bounded by a budget of each side's own, between LW_SPIN_MIN (4 us) and LW_SPIN_MAX (50 us):
 *   it doubles when the answer came while spinning and halves when it did not (the handshake's own waits up to
 *   LW_WAIT_MAX, 200 us, and after a sleep the budget is set from how long the answer took: lw_learn), so a loop of
 *   short launches on free cores never sleeps (an empty launch: 7 us, two thirds of it the system calls of out_ids and
 *   of arming the SIGINT handler), while long kernels, or a machine too busy to run both sides at once, cost a spin of
 *   a few us before each sleep. Never sched_yield() in the spin: measured with a busy loop beside it, it gave the core
 *   to the busy loop for a whole time slice (2 ms launches). The spin is a pause loop that reads the clock (vDSO) every
 *   64 turns.
 * - Death: a futex does not end with a process, so a sleeper wakes every LW_NAP_HOST ms (the host, while a
 *   launch runs) or LW_NAP_IDLE ms (the worker, waiting for the next launch) and peeks at the socket, whose
 *   end (recv returns 0) means the other process is gone (the worker's exit after a fault, abort, assert,
 *   time limit or interrupt; a kill; the host's end). A failed launch's error therefore comes up to 1 ms
 *   later than the worker's end. A worker forked anew starts from the req value read before the fork, so a
 *   launch posted before it first looks is not missed; the flags are cleared before each fork. */
#define LW_ARGS 16384 /* argument bytes a message carries */
#define LW_OPS 1024 /* maps and unmaps a message carries: NOTE [maps for the worker] */
#define LW_FDS 64 /* of which maps (descriptors held open until then) */

typedef struct lw_page {
  /* (see NOTE [launch handshake]) the host's line and the worker's, apart: neither's spin reads a line that
   * the other writes before it has news */
  _Alignas(64) unsigned req; /* launches the host posted (the host writes) */
  int hsleep; /* the host blocks in read() for this launch's end: the worker writes a byte */
  _Alignas(64) unsigned done; /* the last launch the worker finished (the worker writes) */
  int wsleep; /* the worker blocks in read() for the next launch: the host writes a byte */
  _Alignas(64) status st;
  int started; /* the worker took the message */
  launch L; /* fn, args and st rewritten by the worker */
  cdv_cpu_func fn;
  unsigned nargs, off[CDV_CPU_MAX_PARAMS];
  int has_extents;
  unsigned long long extents[CDV_CPU_MAX_PARAMS]; /* NOTE [checked memory] in cpu_checked.c */
  unsigned nops; /* maps to take before the launch: NOTE [maps for the worker] */
  struct lw_op {
    char *p;
    size_t len;
    int map; /* 1: map the next descriptor received there; 0: unmap */
    int guards;
  } ops[LW_OPS];
  _Alignas(64) unsigned char args[LW_ARGS];
} lw_page;

static pthread_mutex_t lw_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  pid_t pid;
  int sock;
  unsigned gen; /* maps_gen when it was forked */
  dev_t out_dev[2];
  ino_t out_ino[2];
  lw_page *pg;
  long spin; /* the host's spin budget: NOTE [launch handshake] */
} lw = {0, -1, 0, {0, 0}, {0, 0}, NULL, 0};
static unsigned maps_gen;
static unsigned long lw_forks; /* workers forked: cd._cpu_worker_forks */

void cdv_cpu_maps_changed(void) { __atomic_add_fetch(&maps_gen, 1, __ATOMIC_SEQ_CST); }
unsigned long cdv_cpu_worker_forks(void) { return __atomic_load_n(&lw_forks, __ATOMIC_RELAXED); }

/* NOTE [maps for the worker]: an array made after the worker was forked used to end the worker (a fork per
 * launch in a loop whose temporaries outgrow the block cache, 3 forks a request in a server: issue 30). While
 * a worker lives, a new array's or slab's mapping is therefore a memfd (MAP_SHARED of a descriptor, the same
 * shared memory as MAP_ANONYMOUS), and the mapping and its unmapping are queued here: the next launch sends the
 * descriptors over the worker's socket (SCM_RIGHTS) and the list in the page, and the worker maps each at the
 * host's address (MAP_FIXED_NOREPLACE, guard pages mprotect'ed) or unmaps it before it runs the launch. The
 * host closes its descriptors once sent: a mapping keeps its memory. With no worker alive a mapping is plain
 * anonymous memory, as before: the next worker is forked with it. What still forks a fresh worker: a queue
 * fuller than LW_OPS (LW_FDS maps), a descriptor that cannot be made (EMFILE), an address the worker uses for something of
 * its own (its threads' stacks), pinned memory and modules (cdv_cpu_maps_changed). maps_lock covers the mmap
 * or munmap and its queueing together (a later mapping at an unmapped address is queued after the unmap) and
 * the worker's fork (one made before the fork is the worker's already). */
static pthread_mutex_t maps_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  struct lw_op v[LW_OPS];
  int fd[LW_OPS]; /* the memfd of a map, -1 for an unmap */
  int n, nfd;
  int live; /* a worker lives: mappings are queued for it */
  int full; /* one could not be queued: the worker must start afresh */
} pend;

/* Drops the queue (maps_lock held): no worker, or a fresh one that has everything. */
static void pend_clear(int live) {
  for (int i = 0; i < pend.n; i++)
    if (pend.fd[i] >= 0) close(pend.fd[i]);
  pend.n = pend.nfd = 0, pend.full = 0, pend.live = live;
}

/* (maps_lock held) a map (fd, a memfd) or an unmap (fd -1) for the worker */
static void pend_add(char *p, size_t len, int fd, int guards) {
  if (pend.n == LW_OPS || (fd >= 0 && pend.nfd == LW_FDS)) {
    if (fd >= 0) close(fd);
    pend.full = 1;
    return;
  }
  pend.v[pend.n] = (struct lw_op){p, len, fd >= 0, guards};
  pend.fd[pend.n++] = fd;
  pend.nfd += fd >= 0;
}

void *cdv_cpu_map_shared(void *fixed, size_t len, int guards) {
  pthread_mutex_lock(&maps_lock);
  int fd = pend.live && !pend.full ? memfd_create("cudadev-array", MFD_CLOEXEC) : -1;
  if (fd >= 0 && ftruncate(fd, (off_t)len)) close(fd), fd = -1;
  int flags = MAP_SHARED | (fixed ? MAP_FIXED : 0) | (fd < 0 ? MAP_ANONYMOUS : 0);
  void *m = mmap(fixed, len, PROT_READ | PROT_WRITE, flags, fd, 0);
  int err = errno;
  if (m == MAP_FAILED && fd >= 0) close(fd);
  if (m != MAP_FAILED && pend.live && fd < 0)
    pend.full = 1; /* no descriptor to give: the worker starts afresh */
  else if (m != MAP_FAILED && pend.live)
    pend_add(m, len, fd, guards);
  pthread_mutex_unlock(&maps_lock);
  errno = err;
  return m;
}

int cdv_cpu_unmap_shared(void *p, size_t len) {
  pthread_mutex_lock(&maps_lock);
  int rc = munmap(p, len), err = errno;
  if (rc == 0 && pend.live) pend_add(p, len, -1, 0);
  pthread_mutex_unlock(&maps_lock);
  errno = err;
  return rc;
}

/* The worker is gone: the next one is forked with every mapping (NOTE [maps for the worker]). */
static void lw_gone(void) {
  pthread_mutex_lock(&maps_lock);
  pend_clear(0);
  pthread_mutex_unlock(&maps_lock);
}

/* (see NOTE [maps for the worker]) the queue into the page and its descriptors onto the socket; -1 when the
 * worker must start afresh instead. lw_lock held. */
static int lw_send_maps(int sock, lw_page *pg) {
  pthread_mutex_lock(&maps_lock);
  int rc = pend.full ? -1 : 0, nfd = 0, fds[LW_FDS];
  for (int i = 0; i < pend.n; i++) {
    pg->ops[i] = pend.v[i];
    if (pend.fd[i] >= 0) fds[nfd++] = pend.fd[i];
  }
  pg->nops = rc ? 0 : (unsigned)pend.n;
  if (rc == 0 && nfd) {
    char c = 'M', ctl[CMSG_SPACE(sizeof fds)];
    struct iovec iov = {&c, 1};
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfd)};
    memset(ctl, 0, sizeof ctl);
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET, cm->cmsg_type = SCM_RIGHTS, cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfd);
    memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)nfd);
    ssize_t r;
    while ((r = sendmsg(sock, &msg, MSG_NOSIGNAL)) < 0 && errno == EINTR)
      ;
    rc = r == 1 ? 0 : -1;
  }
  pend_clear(1);
  pthread_mutex_unlock(&maps_lock);
  return rc;
}

/* Which launches go where: 0 in-process, 1 the launch worker, 2 a child per launch. Read once. */
static int fork_mode(void) {
  static int v = -1;
  int x = __atomic_load_n(&v, __ATOMIC_RELAXED);
  if (x < 0) {
    const char *env = getenv("CUDADEV_CPU_FORK");
    x = env && strcmp(env, "0") == 0 ? 0 : env && strcmp(env, "each") == 0 ? 2 : 1;
    __atomic_store_n(&v, x, __ATOMIC_RELAXED);
  }
  return x;
}

/* (see NOTE [launch handshake]) how often a sleeping side looks whether the other is gone, in ms: the host while a
 * launch runs (a worker that dies is seen this late at most), the worker while it waits for a launch */
#define LW_NAP_HOST 1
#define LW_NAP_IDLE 100

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

/* (see NOTE [launch handshake]) spins until (*w == v) is eq, for *budget ns at most; 1 when it came. The budget
 * doubles after a spin that ended so and halves after one that did not, within LW_SPIN_MIN and max. */
static int spin_until(const unsigned *w, unsigned v, int eq, long *budget, long max) {
  if (*budget < LW_SPIN_MIN || *budget > max) *budget = max;
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (unsigned i = 1;; i++) {
    if ((__atomic_load_n(w, __ATOMIC_SEQ_CST) == v) == eq) {
      *budget = *budget * 2 < max ? *budget * 2 : max;
      return 1;
    }
    cpu_relax();
    if (!(i & 63)) {
      clock_gettime(CLOCK_MONOTONIC, &t);
      if ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) >= *budget) {
        *budget = *budget / 2 > LW_SPIN_MIN ? *budget / 2 : LW_SPIN_MIN;
        return 0;
      }
    }
  }
}

/* (see NOTE [launch handshake]) after a sleep: an answer that came within LW_WAIT_MAX of t0 sets the budget to half as
 * long again as it took, so that a spin catches the next one like it. Halving alone never learnt back a run of
 * launches longer than the budget: on the 2-core VM the host slept at 2 of 3 launches of bench/cpu's wavefront,
 * its budget at the 4 us floor, each launch paying the worker's wake-up call and its own (contained 42.8 ms on one
 * worker thread, in-process 22.0; 20.0 after). */
static void lw_learn(const struct timespec *t0, long *budget) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  long took = (t.tv_sec - t0->tv_sec) * 1000000000L + (t.tv_nsec - t0->tv_nsec), want = took + took / 2;
  if (took < LW_WAIT_MAX) *budget = want < LW_SPIN_MIN ? LW_SPIN_MIN : want > LW_WAIT_MAX ? LW_WAIT_MAX : want;
}

/* (see NOTE [launch handshake]) spins until *w is no longer old, for *budget ns at most; 1 when it moved */
static int lw_spin(const unsigned *w, unsigned old, long *budget) { return spin_until(w, old, 0, budget, LW_SPIN_MAX); }

/* Descriptors the worker received (NOTE [maps for the worker]), in order, not yet mapped. */
static int lw_stash[LW_FDS], lw_nstash;

/* A byte from sock into *c; the descriptors that come with it go to lw_stash (a plain read() would close
 * them). */
static ssize_t lw_recv(int sock, char *c) {
  char ctl[CMSG_SPACE(sizeof(int) * LW_FDS)];
  struct iovec iov = {c, 1};
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
  ssize_t r = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  for (struct cmsghdr *cm = r > 0 ? CMSG_FIRSTHDR(&msg) : NULL; cm; cm = CMSG_NXTHDR(&msg, cm))
    if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
      int n = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int)), fd;
      for (int i = 0; i < n; i++) {
        memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof fd);
        if (lw_nstash < LW_FDS)
          lw_stash[lw_nstash++] = fd;
        else
          close(fd);
      }
    }
  return r;
}

/* The other end of sock is closed: its process is gone (a descriptor the host sent and the worker has not taken
 * is no sign of life or death: only the end is). */
static int lw_peer_gone(int sock) {
  char c;
  ssize_t r = recv(sock, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* (see NOTE [launch handshake]) waits until *w is no longer old: a bounded spin, then FUTEX_WAIT on *w (shared
 * memory: not a private futex) with *sleeping set for the other side to see, waking every nap_ms to see whether
 * the other side's socket ended. 0 when it moved, -1 when the other side is gone. */
static int lw_wait(int sock, unsigned *w, unsigned old, int *sleeping, long *budget, long nap_ms) {
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  if (spin_until(w, old, 0, budget, LW_WAIT_MAX)) return 0;
  __atomic_store_n(sleeping, 1, __ATOMIC_SEQ_CST);
  int rc = 0;
  const struct timespec nap = {nap_ms / 1000, nap_ms % 1000 * 1000000L};
  while (!rc && __atomic_load_n(w, __ATOMIC_SEQ_CST) == old) {
    long r = syscall(SYS_futex, w, FUTEX_WAIT, old, &nap, NULL, 0);
    if (r < 0 && errno == ETIMEDOUT && lw_peer_gone(sock)) rc = -1;
  }
  __atomic_store_n(sleeping, 0, __ATOMIC_SEQ_CST);
  lw_learn(&t0, budget);
  return rc;
}

/* (see NOTE [launch handshake]) publishes *w = v and wakes the other side if it sleeps. A side that is gone is
 * found by the next wait. */
static void lw_post(unsigned *w, unsigned v, const int *sleeping) {
  __atomic_store_n(w, v, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(sleeping, __ATOMIC_SEQ_CST)) syscall(SYS_futex, w, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/* Arrays this worker populated before keep their page tables: NOTE [prefaulting] is for new ones. An unmap
 * (NOTE [maps for the worker]) forgets them all: a new array at the same address has no page tables yet. */
static struct {
  char *p;
  size_t n;
} done[256];
static int ndone;

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

/* (see NOTE [maps for the worker]) Where the host maps next is where the worker's own mappings would go too:
 * both processes place them top-down from the same holes. So the worker starts by fencing the holes: the top
 * FENCE_MAX bytes of each free range of its address space (PROT_NONE, MAP_NORESERVE: no memory), but the one
 * below the stack, which the host's mmap does not use. Its own mappings then go below the fences, the host's go
 * into them, where the worker maps them over the fence (MAP_FIXED: the range is known to be no mapping of its
 * own) and puts the fence back when the host unmaps them; an array the host had before the fork becomes a
 * fence too when it is unmapped. Another host mapping outside the fences (the host's own memory, freed since
 * the fork) must find the range free here (MAP_FIXED_NOREPLACE), else the worker is replaced. Read with read(): the worker allocates nothing with malloc (NOTE [fiber stacks]). */
#define FENCE_MAX ((size_t)64 << 30)
/* a process under ASan, after a long run, has hundreds of holes; one left unfenced gets host mappings that collide
 * with the worker's own, and each such collision forks a new worker */
#define MAX_FENCES 4096
static struct { char *lo, *hi; } fences[MAX_FENCES];
static int nfences;

/* The free ranges of /proc/self/maps below the stack, into fences[] (their top FENCE_MAX bytes). */
static void find_holes(void) {
  static char buf[1 << 16];
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  uintptr_t prev = 0;
  size_t have = 0;
  ssize_t r = 1;
  while (fd >= 0 && r > 0 && nfences < MAX_FENCES) {
    r = read(fd, buf + have, sizeof buf - 1 - have);
    have += r > 0 ? (size_t)r : 0;
    buf[have] = 0;
    char *line = buf, *nl;
    while ((nl = strchr(line, '\n')) && nfences < MAX_FENCES) {
      *nl = 0;
      uintptr_t lo = (uintptr_t)strtoull(line, NULL, 16), hi = (uintptr_t)strtoull(strchr(line, '-') + 1, NULL, 16);
      if (strstr(line, "[stack]"))
        r = 0, nl = line + strlen(line); /* the holes above are not the host's */
      else if (prev && lo > prev)
        fences[nfences].lo = (char *)(lo - prev > FENCE_MAX ? lo - FENCE_MAX : prev), fences[nfences++].hi = (char *)lo;
      prev = hi > prev ? hi : prev;
      line = nl + 1;
      if (!r) break;
    }
    have = (size_t)(buf + have - line);
    memmove(buf, line, have);
  }
  if (fd >= 0) close(fd);
}

/* A fence over [p, p + n) (NOTE [maps for the worker]); 0 when it is there. */
static int fence_at(char *p, size_t n, int flag) {
  return mmap(p, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | flag, -1, 0) == p ? 0 : -1;
}

static void lw_fence(void) {
  find_holes();
  int keep = 0;
  for (int i = 0; i < nfences; i++)
    if (fence_at(fences[i].lo, (size_t)(fences[i].hi - fences[i].lo), MAP_FIXED_NOREPLACE) == 0)
      fences[keep++] = fences[i];
  nfences = keep;
}

/* Whether [p, p + n) lies in one fence. */
static int fenced(const char *p, size_t n) {
  for (int i = 0; i < nfences; i++)
    if (p >= fences[i].lo && p + n <= fences[i].hi) return 1;
  return 0;
}

/* (see NOTE [maps for the worker]) the worker maps and unmaps what the host did since the last launch; -1 when
 * it cannot (the socket ended, or the address is taken here): it must be replaced. */
static int lw_take_maps(int sock, lw_page *pg) {
  unsigned need = 0;
  for (unsigned i = 0; i < pg->nops; i++) need += pg->ops[i].map;
  char c;
  while (lw_nstash < (int)need)
    if (lw_recv(sock, &c) <= 0 && errno != EINTR) return -1;
  size_t pgsz = (size_t)sysconf(_SC_PAGESIZE);
  int next = 0, rc = 0;
  for (unsigned i = 0; i < pg->nops && rc == 0; i++) {
    struct lw_op *o = &pg->ops[i];
    int in = fenced(o->p, o->len);
    if (!o->map) { /* the range was the host's array: it stays the host's, fenced (a fence of its own if new) */
      if (fence_at(o->p, o->len, MAP_FIXED))
        munmap(o->p, o->len);
      else if (!in && nfences < MAX_FENCES)
        fences[nfences].lo = o->p, fences[nfences++].hi = o->p + o->len;
      ndone = 0;
      continue;
    }
    int how = MAP_SHARED | (in ? MAP_FIXED : MAP_FIXED_NOREPLACE);
    void *m = mmap(o->p, o->len, PROT_READ | PROT_WRITE, how, lw_stash[next++], 0);
    if (m != o->p) { /* a kernel before 4.17 takes the flag as a hint: the address may differ */
      if (m != MAP_FAILED) munmap(m, o->len);
      rc = -1;
    } else if (o->guards) {
      mprotect(o->p, pgsz, PROT_NONE), mprotect(o->p + o->len - pgsz, pgsz, PROT_NONE);
    }
  }
  for (int i = 0; i < lw_nstash; i++) close(lw_stash[i]);
  lw_nstash = 0;
  pg->nops = 0;
  return rc;
}

/* The worker's copy of the message's launch (its own argument pointers, its own status pointer). */
static void lw_serve(lw_page *pg) {
  void *args[CDV_CPU_MAX_PARAMS];
  launch L = pg->L;
  for (unsigned i = 0; i < pg->nargs; i++) args[i] = pg->args + pg->off[i];
  L.fn = &pg->fn;
  L.args = pg->nargs ? args : NULL;
  L.extents = pg->has_extents ? pg->extents : NULL;
  L.st = &pg->st;
  L.in_child = 1;
  L.intr0 = __atomic_load_n(&interrupts, __ATOMIC_RELAXED); /* this process's count */
  child_status = L.st;
  child_launch = &L;
  int keep = 0;
  for (int k = 0; k < L.npre; k++) {
    int seen = 0;
    for (int d = 0; d < ndone && !seen; d++) seen = done[d].p == L.pre[k].p && done[d].n == L.pre[k].n;
    if (!seen && ndone < 256) done[ndone].p = L.pre[k].p, done[ndone].n = L.pre[k].n, ndone++;
    if (!seen) L.pre[keep++] = L.pre[k];
  }
  L.pre_total = 0;
  for (int k = L.npre = keep; k-- > 0;) L.pre_total += L.pre[k].n;
  cdv_err e;
  memset(&e, 0, sizeof e);
  size_t stacks = L.fibers ? L.nthreads : 1;
  pthread_mutex_lock(&slots_lock);
  int rc = reserve_stacks(L.nworkers, stacks, &e);
  pthread_mutex_unlock(&slots_lock);
  if (rc) {
    claim(L.st);
    L.st->kind = FAIL_OOM;
    fflush(NULL);
    _exit(EXIT_FAILED);
  }
  if (L.timeout > 0) limit_arm(L.timeout); /* NOTE [launch time limit] */
  if (L.nworkers > 1 && !under_asan()) /* one thread takes every block (NOTE [forks under ASan]) */
    run_pool(&L, L.nworkers);
  else
    worker_run(&L, 0);
  if (L.timeout > 0) limit_disarm();
  fflush(NULL);
  L.st->done = 1;
}

/* The worker never outlives the host: not PR_SET_PDEATHSIG, which would end it with the host thread that
 * happened to fork it while other threads still launch; a thread that looks for a new parent instead (the
 * socket's end covers an idle worker at once). */
static void *lw_watch(void *arg) {
  pid_t host = (pid_t)(intptr_t)arg;
  block_async_signals();
  for (;;) {
    if (getppid() != host) _exit(0);
    usleep(100000);
  }
  return NULL;
}

/* Every descriptor but stdin, stdout, stderr and sock (NOTE [launch worker]). close_range does it in two system
 * calls: a close() per descriptor up to the limit cost a worker in a server with 20,000 allowed descriptors
 * 20,000 calls (30-37 ms a fork). The loop is for kernels without close_range (before Linux 5.9). */
static void close_others(int sock) {
  if ((sock == 3 || syscall(SYS_close_range, 3u, (unsigned)sock - 1, 0u) == 0) &&
      syscall(SYS_close_range, (unsigned)sock + 1, ~0u, 0u) == 0)
    return;
  long maxfd = sysconf(_SC_OPEN_MAX);
  for (long fd = 3; fd < (maxfd > 0 ? maxfd : 65536); fd++)
    if (fd != sock) close((int)fd);
}

__attribute__((noreturn)) static void lw_main(int sock, lw_page *pg, pid_t host, unsigned last) {
  in_worker = 1;
  /* the host's locks as they were at fork: held by threads that do not exist here */
  pthread_mutex_t m0 = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t c0 = PTHREAD_COND_INITIALIZER;
  memcpy(&pool.m, &m0, sizeof m0), memcpy(&pool.go, &c0, sizeof c0), memcpy(&pool.done, &c0, sizeof c0);
  pool.nthreads = pool.want = 0, pool.busy = pool.open = pool.sleeping = pool.gen = 0, pool.L = NULL;
  memcpy(&slots_lock, &m0, sizeof m0), memcpy(&run_lock, &m0, sizeof m0);
  close_others(sock);
  lw_fence(); /* before the worker maps anything of its own */
  child_signals();
  child_altstack();
  if (!under_asan()) { /* NOTE [forks under ASan] */
    pthread_t watch;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&watch, &a, lw_watch, (void *)(intptr_t)host)) _exit(0);
    pthread_attr_destroy(&a);
  }
  long budget = LW_SPIN_MAX;
  for (;;) {
    if (lw_wait(sock, &pg->req, last, &pg->wsleep, &budget, LW_NAP_IDLE)) _exit(0); /* the host is gone or let it go */
    last = __atomic_load_n(&pg->req, __ATOMIC_SEQ_CST);
    if (pg->nops && lw_take_maps(sock, pg)) _exit(0); /* not started: the host forks a fresh worker for it */
    __atomic_store_n(&pg->started, 1, __ATOMIC_SEQ_CST);
    lw_serve(pg);
    lw_post(&pg->done, last, &pg->hsleep);
  }
}

static void out_ids(dev_t dev[2], ino_t ino[2]) {
  for (int i = 0; i < 2; i++) {
    struct stat sb;
    if (fstat(i + 1, &sb) == 0)
      dev[i] = sb.st_dev, ino[i] = sb.st_ino;
    else
      dev[i] = 0, ino[i] = 0;
  }
}

/* Let the worker go (lw_lock held). A worker that already died is reaped. */
static void lw_stop(void) {
  if (lw.pid <= 0) return;
  kill(lw.pid, SIGKILL);
  close(lw.sock);
  while (waitpid(lw.pid, NULL, 0) < 0 && errno == EINTR)
    ;
  lw.pid = 0, lw.sock = -1;
  lw_gone();
}

/* A process forked from this one (not the worker) has no worker: the host's is not its own to talk to. */
static void lw_forget(void) {
  if (lw.sock >= 0) close(lw.sock);
  lw.pid = 0, lw.sock = -1, lw.pg = NULL; /* the page stays the host's; this process maps its own */
  pthread_mutex_t m0 = PTHREAD_MUTEX_INITIALIZER;
  memcpy(&lw_lock, &m0, sizeof m0), memcpy(&maps_lock, &m0, sizeof m0);
  pend_clear(0);
}

static pthread_once_t lw_once = PTHREAD_ONCE_INIT;
static void lw_atfork(void) { pthread_atfork(NULL, NULL, lw_forget); }

static int lw_start(const launch *L, cdv_err *e) {
  pthread_once(&lw_once, lw_atfork);
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
    return cdv_cpu_fail_errno(e, "cpu.launch", errno, "cannot make the launch worker's socket");
  unsigned gen = __atomic_load_n(&maps_gen, __ATOMIC_SEQ_CST);
  fflush(NULL);
  pthread_mutex_lock(&slots_lock); /* held across fork: the worker must not see the tables mid-update */
  pthread_mutex_lock(&maps_lock); /* and every mapping made so far is its own: NOTE [maps for the worker] */
  lw_page *pg = lw.pg; /* lw_forget, run in the child by fork, forgets lw.pg */
  pg->nops = 0;
  pg->wsleep = pg->hsleep = 0;
  unsigned last = pg->req; /* read before the fork: the host may post the next launch before the worker runs */
  pid_t host = getpid(), pid = fork();
  if (pid == 0) {
    close(sv[0]);
    lw_main(sv[1], pg, host, last);
  }
  int err = errno;
  pend_clear(pid > 0);
  pthread_mutex_unlock(&maps_lock);
  pthread_mutex_unlock(&slots_lock);
  close(sv[1]);
  if (pid < 0) {
    close(sv[0]);
    return cdv_cpu_fail_errno(e, "cpu.launch", err, "cannot fork the launch process of kernel '%s'", L->fn->name);
  }
  lw.pid = pid, lw.sock = sv[0], lw.gen = gen;
  __atomic_add_fetch(&lw_forks, 1, __ATOMIC_RELAXED);
  out_ids(lw.out_dev, lw.out_ino);
  return 0;
}

/* The arguments into the message; 0 when they do not fit or the object does not list its parameters. */
static int lw_pack(const launch *L, lw_page *pg) {
  const cdv_cpu_sig *sig = L->fn->sig;
  if (!sig || (sig->n && !L->args) || sig->n > CDV_CPU_MAX_PARAMS) return 0;
  size_t off = 0;
  for (unsigned i = 0; i < sig->n; i++) {
    size_t n = CDV_CPU_PARAM_SIZE(sig->w[i]);
    off = (off + 15) & ~(size_t)15;
    if (off + n > LW_ARGS || !L->args[i]) return 0;
    memcpy(pg->args + off, L->args[i], n);
    pg->off[i] = (unsigned)off;
    off += n;
  }
  pg->nargs = sig->n;
  pg->has_extents = L->extents != NULL;
  if (L->extents) memcpy(pg->extents, L->extents, sig->n * sizeof *L->extents);
  return 1;
}

/* 1 and the launch's result in *rc when the worker ran it; 0 when it must run the old way. */
static int run_worker(launch *L, cdv_err *e, int *rc) {
  pthread_mutex_lock(&lw_lock);
  if (!lw.pg) {
    lw_page *p = mmap(NULL, sizeof *p, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    lw.pg = p == MAP_FAILED ? NULL : p;
  }
  if (!lw.pg || !lw_pack(L, lw.pg)) { /* launched the old way */
    pthread_mutex_unlock(&lw_lock);
    return 0;
  }
  lw_page *pg = lw.pg;
  *rc = 0;
  for (int attempt = 0;; attempt++) {
    dev_t dev[2];
    ino_t ino[2];
    out_ids(dev, ino);
    if (lw.pid > 0 && (lw.gen != __atomic_load_n(&maps_gen, __ATOMIC_SEQ_CST) || memcmp(dev, lw.out_dev, sizeof dev) ||
                       memcmp(ino, lw.out_ino, sizeof ino)))
      lw_stop();
    if (lw.pid > 0 && lw_send_maps(lw.sock, pg)) /* NOTE [maps for the worker] */
      lw_stop();
    if (lw.pid <= 0 && lw_start(L, e)) {
      *rc = -1;
      break;
    }
    memset(&pg->st, 0, sizeof pg->st);
    pg->started = 0;
    pg->L = *L;
    pg->fn = *L->fn;
    fflush(NULL);
    interrupt_arm();
    int child = add_child(lw.pid);
    unsigned d0 = __atomic_load_n(&pg->done, __ATOMIC_SEQ_CST); /* NOTE [launch handshake] */
    lw_post(&pg->req, pg->req + 1, &pg->wsleep);
    int r = lw_wait(lw.sock, &pg->done, d0, &pg->hsleep, &lw.spin, LW_NAP_HOST);
    if (child >= 0) __atomic_store_n(&children[child], 0, __ATOMIC_SEQ_CST);
    if (r == 0 && pg->st.done) {
      interrupt_disarm();
      break;
    }
    /* the worker died: how, from its wait status */
    int ws = 0, started = __atomic_load_n(&pg->started, __ATOMIC_SEQ_CST);
    close(lw.sock);
    pid_t w;
    while ((w = waitpid(lw.pid, &ws, 0)) < 0 && errno == EINTR)
      ;
    lw.pid = 0, lw.sock = -1;
    lw_gone();
    if (!started && attempt == 0) { /* it died idle: a fresh one takes the launch */
      interrupt_disarm();
      continue;
    }
    *rc = ended_error(L, &pg->st, w >= 0, ws, e);
    interrupt_disarm();
    break;
  }
  pthread_mutex_unlock(&lw_lock);
  return 1;
}

static pthread_once_t preempt_once = PTHREAD_ONCE_INIT;

static int run_inprocess(launch *L, int nw, size_t stacks, cdv_err *e) {
  status st;
  memset(&st, 0, sizeof st);
  L->st = &st;
  pthread_once(&preempt_once, preempt_install); /* NOTE [preempting a block] */
  pthread_mutex_lock(&run_lock);
  pthread_mutex_lock(&slots_lock);
  int rc = reserve_stacks(nw, stacks, e);
  pthread_mutex_unlock(&slots_lock);
  if (rc == 0) {
    if (L->coop && nw > 1)
      run_coop_inprocess(L, nw);
    else if (nw > 1)
      run_pool(L, nw);
    else
      worker_run(L, 0);
  }
  pthread_mutex_unlock(&run_lock);
  if (rc == 0 && L->aborted) rc = launch_error(L, &st, 0, e);
  return rc;
}

/* ---------------------------------------------------------------- the launch */
static int check_config(const cdv_cpu_func *f, const unsigned g[3], const unsigned b[3], unsigned shared, cdv_err *e) {
  const char *api = "cpu.launch", *name = "CUDA_ERROR_INVALID_VALUE";
  if (!f || !f->entry) return cdv_fail(e, api, 400, "CUDA_ERROR_INVALID_HANDLE", "invalid kernel handle");
  if (!g[0] || !g[1] || !g[2] || !b[0] || !b[1] || !b[2])
    return cdv_fail(e, api, 1, name, "grid (%u,%u,%u) and block (%u,%u,%u) dimensions must be at least 1", g[0], g[1],
                    g[2], b[0], b[1], b[2]);
  uint64_t nt = (uint64_t)b[0] * b[1] * b[2];
  if (nt > CDV_CPU_MAX_THREADS || b[2] > CDV_CPU_MAX_BLOCK_Z)
    return cdv_fail(e, api, 1, name, "block (%u,%u,%u) exceeds the cpu device's limits (%d threads, z at most %d)",
                    b[0], b[1], b[2], CDV_CPU_MAX_THREADS, CDV_CPU_MAX_BLOCK_Z);
  if (g[0] > CDV_CPU_MAX_GRID_X || g[1] > CDV_CPU_MAX_GRID_YZ || g[2] > CDV_CPU_MAX_GRID_YZ)
    return cdv_fail(e, api, 1, name, "grid (%u,%u,%u) exceeds the cpu device's limits", g[0], g[1], g[2]);
  if (shared > CDV_CPU_MAX_DYN_SHARED)
    return cdv_fail(e, api, 1, name, "dynamic shared memory of %u bytes exceeds the cpu device's limit of %u", shared,
                    CDV_CPU_MAX_DYN_SHARED);
  return 0;
}

/* (see NOTE [cpu grid sync]) what limits a cooperative launch besides the occupancy model: a worker thread per
 * block, and the mappings of their fiber stacks. */
int cdv_cpu_coop_max(unsigned nthreads) {
  int vmas = cdv_cpu_stack_vmas() * (int)(nthreads ? nthreads : 1);
  int n = MAX_WORKERS;
  if (vmas && VMA_BUDGET / vmas < n) n = VMA_BUDGET / vmas > 0 ? VMA_BUDGET / vmas : 1;
  return n;
}

/* (see NOTE [launch time limit]) $CUDADEV_CPU_TIMEOUT, read once; -1 with *e when it is not a number */
static pthread_once_t timeout_once = PTHREAD_ONCE_INIT;
static double env_timeout;
static cdv_err env_timeout_err;
static void read_env_timeout(void) {
  env_timeout = cdv_cpu_env_seconds("CUDADEV_CPU_TIMEOUT", 0, "cpu.launch", &env_timeout_err);
}

static double launch_timeout(const cdv_launch_opts *opts, cdv_err *e) {
  if (opts && opts->timeout >= 0) return opts->timeout;
  pthread_once(&timeout_once, read_env_timeout);
  if (env_timeout < 0) *e = env_timeout_err;
  return env_timeout;
}

int cdv_cpu_launch(const cdv_cpu_func *f, const unsigned grid[3], const unsigned block[3], unsigned shared, void **args,
                   int cooperative, const cdv_launch_opts *opts, cdv_err *e) {
  if (check_config(f, grid, block, shared, e)) return -1;
  double timeout = launch_timeout(opts, e);
  if (timeout < 0) return -1;
  uint64_t nblocks = (uint64_t)grid[0] * grid[1] * grid[2];
  if (cooperative && nblocks > (uint64_t)cdv_cpu_coop_max(block[0] * block[1] * block[2]))
    return cdv_fail(e, "cpu.launch", 720, "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE",
                    "cooperative launch of %llu "
                    "blocks exceeds the %d that the cpu device runs at once",
                    (unsigned long long)nblocks, cdv_cpu_coop_max(block[0] * block[1] * block[2]));
  launch L;
  memset(&L, 0, sizeof L);
  L.fn = f;
  L.timeout = timeout;
  L.opts = opts;
  L.extents = opts ? opts->extents : NULL;
  cdv_cpu_func fast; /* NOTE [fast paths] in cpu_compile.c: when the block's per-thread arrays fit its stack */
  uint64_t nth = (uint64_t)block[0] * block[1] * block[2];
  if (f->fis && !cooperative && f->fis_row <= CDV_CPU_FIS_STACK && f->fis_row * nth <= CDV_CPU_FIS_STACK) {
    fast = *f;
    fast.entry = f->fis;
    fast.flags &= ~CDV_CPU_FLAG_FIBERS;
    L.fn = &fast;
    L.plain = f;
  }
  memcpy(L.grid, grid, sizeof L.grid);
  memcpy(L.block, block, sizeof L.block);
  L.nthreads = block[0] * block[1] * block[2];
  L.shared = shared;
  L.args = args;
  L.nblocks = (uint64_t)grid[0] * grid[1] * grid[2];
  L.fibers = (L.fn->flags & CDV_CPU_FLAG_FIBERS) && L.nthreads > 1;
  int nw = cdv_cpu_worker_count(), vmas = cdv_cpu_stack_vmas() * (int)L.nthreads;
  if (L.fibers && vmas && nw > VMA_BUDGET / vmas) /* stacks of old kernels are limited by mappings */
    nw = VMA_BUDGET / vmas > 0 ? VMA_BUDGET / vmas : 1;
  L.coop = cooperative;
  if (L.coop) /* a worker per block (NOTE [cpu grid sync]) */
    nw = (int)L.nblocks;
  if ((uint64_t)nw > L.nblocks) nw = (int)L.nblocks;
  /* chunks of blocks: 16 a worker (the last one late costs a sixteenth of a share), at most CHUNK_MAX blocks,
   * so that a worker streams through a contiguous stretch of each array. saxpy over 2^24 floats in blocks of
   * 256 on two workers: 3.5-3.6 ms with chunks of 64 blocks, 2.9 ms with 2048 (the cap was 64). */
  uint64_t per = L.nblocks / ((uint64_t)nw * 16);
  L.chunk = L.fibers || L.coop ? 1 : per < 1 ? 1 : per > CHUNK_MAX ? CHUNK_MAX : (unsigned)per;
  size_t stacks = L.fibers ? L.nthreads : 1;
  L.nworkers = nw;
  spans_init(&L);
  L.intr0 = __atomic_load_n(&interrupts, __ATOMIC_RELAXED);
  pthread_mutex_init(&L.gm, NULL);
  pthread_cond_init(&L.gc, NULL);
  int mode = fork_mode(), rc, asan = under_asan(); /* asked here, never first in a forked process (dlsym allocates) */
  if (mode == 0 || plan_args(&L) || (L.coop && asan)) /* NOTE [forks under ASan] */
    rc = run_inprocess(&L, nw, stacks, e);
  else if (!(mode == 1 && !L.coop && run_worker(&L, e, &rc))) /* NOTE [launch worker]; cooperative launches
                                                                  * keep a child of their own (NOTE [cpu grid sync]) */
    rc = run_forked(&L, nw, stacks, e);
  pthread_cond_destroy(&L.gc);
  pthread_mutex_destroy(&L.gm);
  return rc;
}
