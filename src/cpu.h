/*
 * cpu.h: private header of the cpu device backend (backend_cpu.c, cpu_compile.c and its stages, which
 * cpu_compile.h lists, cpu_run.c, cpu_fiber.c).
 *
 * NOTE [cpu kernel ABI]: a cpu kernel is a shared object compiled from the user's CUDA C source with
 * lua/cudadev/cpu_prelude.hpp in front of it. The prelude repeats the structs and constants below in C++;
 * the two must agree. Every compiled object exports cdv_cpu_abi, cdv_cpu_ctx_size and cdv_cpu_fhdr_size,
 * and module_load refuses an object whose values differ from these (a stale cache entry, for instance).
 * Per kernel it exports the trampoline (cdv_cpu_entry), "<trampoline>_name" and "<trampoline>_sig"; per
 * object, cdv_cpu_flags.
 * Bump CDV_CPU_ABI whenever the layout or the meaning of anything here changes.
 */
#ifndef CDV_CPU_H
#define CDV_CPU_H

#include <stdint.h>
#include "backend.h"

#define CDV_CPU_ABI 3

/* Limits of the cpu device (device.c may publish them as the device's attributes). */
#define CDV_CPU_MAX_THREADS 1024 /* threads per block */
#define CDV_CPU_MAX_BLOCK_Z 64
#define CDV_CPU_MAX_GRID_X 0x7fffffffu
#define CDV_CPU_MAX_GRID_YZ 65535u
#define CDV_CPU_MAX_DYN_SHARED (1u << 20) /* dynamic shared memory per block */
#define CDV_CPU_WARP 32
#define CDV_CPU_MAX_STATIC_SHARED \
  ((size_t)64 << 20) /* an object's __shared__ (TLS) bytes: NOTE [static shared limit] */

/* NOTE [fiber stacks]: every CUDA thread runs on a fiber whose stack is a CDV_CPU_STACK-aligned region of
 * CDV_CPU_STACK bytes: a guard page at the bottom (a guard marker where Linux has MADV_GUARD_INSTALL, else
 * an mprotect'ed page), the stack, and a cdv_cpu_fhdr near the top. Kernel code
 * finds its header (threadIdx, the block's context) from the stack pointer alone, with a mask, so no
 * thread-local variable is read per access. The header's distance from the top is "coloured" by the
 * region's index (64 bytes times the index modulo 1024): with equal offsets, the hot tops of hundreds of
 * stacks 256 KiB apart fall into the same few cache sets, and a switch between fibers cost 3 to 4 times
 * more (measured: 24 ns against 8 ns per switch for 256 fibers). A thread can use at least 188 KiB. */
#define CDV_CPU_STACK_LOG2 18
#define CDV_CPU_STACK ((size_t)1 << CDV_CPU_STACK_LOG2) /* 256 KiB */
#define CDV_CPU_FHDR_SLOT 64
#define CDV_CPU_STACK_COLOURS ((size_t)1024 * 64)

/* entry modes (the third argument of a trampoline) */
enum { CDV_CPU_RUN_THREAD = 0, CDV_CPU_RUN_BLOCK = 1 };
/* barrier kinds */
enum {
  CDV_CPU_BAR_SYNC = 0,
  CDV_CPU_BAR_COUNT = 1,
  CDV_CPU_BAR_AND = 2,
  CDV_CPU_BAR_OR = 3,
  CDV_CPU_BAR_GRID = 4, /* grid.sync(): every thread of every block (NOTE [cpu grid sync]) */
  CDV_CPU_BAR_GRID_VALID = 5
}; /* grid.is_valid(): whether the launch is cooperative; waits for nothing */
/* warp operation kinds */
enum { CDV_CPU_WARP_SYNC = 0, CDV_CPU_WARP_SHFL = 1, CDV_CPU_WARP_VOTE = 2 };
/* failure kinds reported by kernel code (ctx->fail) or found by the runtime */
enum {
  CDV_CPU_FAIL_ASSERT = 1,
  CDV_CPU_FAIL_TRAP = 2,
  CDV_CPU_FAIL_NOSYNC = 3,
  CDV_CPU_FAIL_DEADLOCK = 4,
  CDV_CPU_FAIL_SIGNAL = 5,
  CDV_CPU_FAIL_MEMORY = 6 /* NOTE [checked memory] in cpu_checked.c: text "what|where", line the parameter */
};
/* module flags (cdv_cpu_flags in the object) */
#define CDV_CPU_FLAG_FIBERS 1 /* the source uses barriers or warp intrinsics: run threads on fibers */
#define CDV_CPU_FLAG_SIMD 2 /* a kernel's "<trampoline>_fis" runs a barrier-free block: NOTE [fast paths] */
#define CDV_CPU_FLAG_FISSION 4 /* a kernel's "<trampoline>_fis" runs a block split at its barriers */
#define CDV_CPU_FIS_STACK ((size_t)64 << 10) /* the most bytes of per-thread arrays a fission block may have */

typedef struct cdv_cpu_ctx cdv_cpu_ctx;
/* What kernel code sees of the block it runs in (one per worker thread). */
struct cdv_cpu_ctx {
  unsigned block_idx[3], block_dim[3], grid_dim[3];
  unsigned nthreads;
  void *dyn_shared; /* extern __shared__ memory: stable per OS thread, CDV_CPU_MAX_DYN_SHARED bytes */
  int (*barrier)(cdv_cpu_ctx *c, int kind, int pred);
  unsigned long long (*warp)(cdv_cpu_ctx *c, int kind, unsigned mask, unsigned long long v, int src);
  void (*fail)(cdv_cpu_ctx *c, int kind, const char *text, const char *file, unsigned line);
  /* (see NOTE [checked memory] in cpu_checked.c) per parameter, the bytes of the Array passed (CDV_EXTENT_NONE: not
   * an Array); NULL when the launch gives none. Read by checked kernels only. */
  const unsigned long long *extent;
};

/* At the top of every fiber stack (see NOTE [fiber stacks]). */
typedef struct cdv_cpu_fhdr {
  unsigned thread_idx[3];
  unsigned tid; /* linear thread id in the block */
  cdv_cpu_ctx *ctx;
  void *fiber; /* the runtime's record of this fiber */
} cdv_cpu_fhdr;

typedef void (*cdv_cpu_entry)(cdv_cpu_ctx *c, void **args, int mode);

/* A kernel's parameters, exported by the object as "<trampoline>_sig". */
#define CDV_CPU_MAX_PARAMS 128
#define CDV_CPU_PARAM_SIZE(w) ((w)&0xfffffu)
#define CDV_CPU_PARAM_ALIGN(w) (((w) >> 20) & 0x7ffu)
#define CDV_CPU_PARAM_PTR(w) ((w) >> 31)
typedef struct cdv_cpu_sig {
  unsigned n;
  unsigned w[CDV_CPU_MAX_PARAMS]; /* size | alignment << 20 | is-pointer << 31 */
} cdv_cpu_sig;

/* A kernel handle as module_function returns it. */
typedef struct cdv_cpu_func {
  cdv_cpu_entry entry;
  int flags; /* CDV_CPU_FLAG_* of its module */
  const cdv_cpu_sig *sig; /* NULL when the object does not say */
  cdv_cpu_entry fis; /* NOTE [fast paths] in cpu_fission.c: the whole block in one call, or NULL */
  unsigned long fis_row; /* its per-thread bytes */
  const char *why; /* "<trampoline>_why": what keeps it off its fast path (k.cpu_reason), or NULL */
  char name[128]; /* the entry as written ("saxpy", "axpy<float>"), for messages */
  struct cdv_cpu_func *next;
} cdv_cpu_func;

/* ---------------------------------------------------------------- backend_cpu.c */
/* The allocation of this backend that contains p: 0 and its extent, or -1. */
int cdv_cpu_alloc_containing(const void *p, void **base, size_t *len);
/* ", N bytes past the end of the array at 0x... (M bytes)" for a fault at addr, or "" when no array is near */
void cdv_cpu_alloc_describe(uintptr_t addr, char *out, size_t n);
int cdv_cpu_alloc_near(uintptr_t addr, uintptr_t *lo, uintptr_t *hi, int *small); /* the array addr is nearest */

/* ---------------------------------------------------------------- cpu_object.c */
/* 0 when the object at path may be loaded: NOTE [no static initialisers], NOTE [static shared limit] */
int cdv_cpu_object_check(const char *path, cdv_err *e);

/* ---------------------------------------------------------------- cpu_compile.c */
int cdv_cpu_compile(const cdv_compile_req *req, cdv_image *out, cdv_err *e);
int cdv_cpu_cache_verify(const char *path, cdv_err *e); /* 0 when the cached object is whole */
/* $var as seconds (a decimal number, 0 for no limit; dflt when unset or empty), or -1 with *e (api's) for a
 * value that is not one */
double cdv_cpu_env_seconds(const char *var, double dflt, const char *api, cdv_err *e);

/* ---------------------------------------------------------------- cpu_loops.c (NOTE [cpu loops]) */
int cdv_cpu_loop(cdv_device *d, const cdv_loop *l, void *stream, cdv_err *e);
int cdv_cpu_reduce(cdv_device *d, const cdv_reduce *r, void *stream, cdv_err *e);

/* ---------------------------------------------------------------- cpu_run.c */
int cdv_cpu_launch(const cdv_cpu_func *f, const unsigned grid[3], const unsigned block[3], unsigned shared, void **args,
                   int cooperative, const cdv_launch_opts *opts, cdv_err *e);
int cdv_cpu_coop_max(unsigned nthreads); /* blocks of nthreads a cooperative launch may have (NOTE [cpu grid sync]) */
int cdv_cpu_worker_count(void);
/* backend_cpu.c maps or unmaps memory a launch may reach that the worker cannot be given (a module, pinned
 * memory): NOTE [launch worker] in cpu_run.c */
void cdv_cpu_maps_changed(void);
/* mmap and munmap of an array's mapping or a slab that the live launch worker gets too, without a fork (NOTE
 * [maps for the worker] in cpu_run.c); guards: its first and last pages are guard pages */
void *cdv_cpu_map_shared(void *fixed, size_t len, int guards);
int cdv_cpu_unmap_shared(void *p, size_t len);
/* launch workers forked by this process (for the specs: cd._cpu_worker_forks) */
unsigned long cdv_cpu_worker_forks(void);
/* Ends running launches (async-signal-safe): NOTE [interrupting a launch] in cpu_run.c */
void cdv_cpu_interrupt(void);
/* errno-based failure: "what: strerror" with the errno's name */
int cdv_cpu_fail_errno(cdv_err *e, const char *api, int err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* ---------------------------------------------------------------- cpu_fiber.c */
/* A suspended execution context. The x86-64 switch saves the callee-saved registers on the fiber's own
 * stack and keeps only the stack pointer here; other architectures use ucontext. */
#if defined(__x86_64__) && !defined(CDV_CPU_UCONTEXT)
typedef struct cdv_cpu_fctx {
  void *sp;
} cdv_cpu_fctx;
#else
#include <ucontext.h>
typedef struct cdv_cpu_fctx {
  ucontext_t uc;
} cdv_cpu_fctx;
#endif

/* Prepare f to call fn(arg) on the stack that ends (grows down from) at top; stack_lo is its lowest byte. */
void cdv_cpu_fiber_init(cdv_cpu_fctx *f, void *stack_lo, void *top, void (*fn)(void *), void *arg);
/* Save the running context into from and resume to. */
void cdv_cpu_fiber_switch(cdv_cpu_fctx *from, cdv_cpu_fctx *to);

/* Stack regions (NOTE [fiber stacks]); n regions, each CDV_CPU_STACK bytes and aligned to it. */
char *cdv_cpu_stacks_map(size_t n);
cdv_cpu_fhdr *cdv_cpu_stack_hdr(char *region);
int cdv_cpu_stack_vmas(void); /* memory mappings each region adds: 0 with guard markers, else 2 */

#endif
