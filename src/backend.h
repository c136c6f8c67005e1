/*
 * backend.h: the backend contract, the layer between the Lua types and the device kinds. No Lua here, and no
 * driver header: a backend (backend_cpu.c + cpu_*.c, backend_cuda.c + backend_cuda_optional.c), the pieces
 * they share (util.c, diskcache.c, cuda_cache.c, sig.c) and their tests (tests/) include this, never cdv.h.
 *
 * NOTE [layers]: four layers, each allowed to see only what is below it, and the build enforces it
 * (CMakeLists.txt, "the layers"): the backend objects are compiled without Lua's include directory, so a
 * backend file that includes cdv.h or lua.h does not compile; the front-end objects (the Lua types, cdv.h)
 * are compiled without the CUDA toolkit's include directory, so a front-end file that includes syms.h, cuda.h
 * or nvrtc.h does not compile. The ctest `layers` compiles a probe of each violation and passes only when
 * both fail.
 *   loader     syms.h + loader.c: the driver's and NVRTC's entry points, resolved lazily
 *   backends   this header; backend_cuda*.c (may include syms.h), backend_cpu.c + cpu_*.c (cpu.h)
 *   front end  cdv.h + one C file per Lua type: asks the device's backend (d->be) for operations and
 *              properties (NOTE [backend properties], NOTE [optional operations]), never for its kind
 *   entry      cudadev.c, cudadev.h (the public C API, embed.c), luacuda.c
 */
#ifndef CDV_BACKEND_H
#define CDV_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#if defined(__x86_64__)
#define CDV_HOST_ARCH "x86_64"
#elif defined(__aarch64__)
#define CDV_HOST_ARCH "aarch64"
#else
#define CDV_HOST_ARCH "unknown"
#endif

/* ---------------------------------------------------------------- dtypes */
typedef enum cdv_dtype {
  CDV_F16,
  CDV_F32,
  CDV_F64,
  CDV_I8,
  CDV_I16,
  CDV_I32,
  CDV_I64,
  CDV_U8,
  CDV_U16,
  CDV_U32,
  CDV_U64,
  CDV_BOOL,
  CDV_C64, /* complex64: two float32, real part first (NumPy's and cuFFT's layout) */
  CDV_C128, /* complex128: two float64 */
  CDV_NDTYPES
} cdv_dtype;

typedef struct cdv_dtype_info {
  const char *name; /* "float32" */
  const char *short_name; /* "f32" */
  unsigned char size;
  unsigned char is_float, is_signed;
  unsigned char is_complex; /* is_float is 0 for these: their elements are pairs, read by their own code */
} cdv_dtype_info;

extern const cdv_dtype_info cdv_dtypes[CDV_NDTYPES];

/* ---------------------------------------------------------------- errors */
/* A failure reported by a backend or a driver call, before it becomes a cudadev.Error (error.c). */
typedef struct cdv_err {
  const char *api; /* "cuMemAlloc", "nvrtcCompileProgram", "cpu.launch" ... (static string) */
  int code; /* CUresult / nvrtcResult / errno; 0 when unset */
  char name[64]; /* "CUDA_ERROR_OUT_OF_MEMORY" */
  char message[512]; /* the driver's explanation */
  int sticky; /* the context is corrupted (error.c classifies CUresult codes) */
  char *log; /* compile log (malloc'd, owned by the receiver) or NULL */
} cdv_err;

/* Fill e from a printf-style message; returns -1 so backends can `return cdv_fail(...)`. */
int cdv_fail(cdv_err *e, const char *api, int code, const char *name, const char *fmt, ...);

/* NOTE [launch limits]: what a launch asks of a backend beyond its geometry and arguments. The CUDA backend
 * has no use for either: a GPU launch returns at once (what bounds a GPU kernel is in doc/kernels.md), and a
 * GPU fault has no address in its text. The cpu device stops a contained launch past its time limit (NOTE
 * [launch time limit] in cpu_run.c) and words a fault of a sandboxed state without addresses. */
typedef struct cdv_launch_opts {
  double timeout; /* seconds: > 0 a limit, 0 none, < 0 the default ($CUDADEV_CPU_TIMEOUT) */
  int sandbox; /* the launching state is sandboxed: error texts name parameters and offsets, not addresses */
  int nparams;
  const char *const *param_names; /* the kernel's nparams parameter names ("" where unknown), or NULL */
  /* per parameter, the bytes of the Array passed, CDV_EXTENT_NONE for other arguments (a cpu kernel compiled in
   * checked mode checks its accesses against them: NOTE [checked memory] in cpu_checked.c), or NULL */
  const unsigned long long *extents;
} cdv_launch_opts;
#define CDV_EXTENT_NONE (~0ull)

/* ---------------------------------------------------------------- devices */
typedef struct cdv_backend cdv_backend;

typedef struct cdv_device {
  const cdv_backend *be;
  int index; /* position in the process-wide registry; cpu is 0 */
  int ordinal; /* CUDA ordinal, -1 for cpu */
  char alias[64]; /* "cpu", "cuda:0", or a mapped alias */
  char name[256];
  int arch; /* 90 for sm_90, 0 for cpu */
  int is_primary, is_uva, is_mempool_supported; /* no is_cpu: NOTE [backend properties] */
  int sm_count, warp_size, max_threads_per_block;
  int max_block[3], max_grid[3];
  size_t max_shared_per_block, max_shared_optin;
  size_t total_memory;
  char uuid[48]; /* "GPU-xxxxxxxx-..." (40 characters; "" on cpu) */
  char pci_bus_id[32]; /* "0000:00:00.0" ("" on cpu) */
  void *ctx; /* CUcontext (NULL until first needed, and on cpu) */
  int handle; /* CUdevice */
  unsigned generation; /* bumped by reset: objects made before it are stale */
  int sticky; /* (see NOTE [sticky faults]) a fault poisoned the context */
  int unmapped; /* a mapped context whose alias was released: listed and resolved no more */
  uintptr_t canary; /* a mapped context: a tiny allocation of ours in it (NOTE [adopted contexts]) */
  int gone; /* a mapped context that its owner destroyed: nothing on it calls the driver again */
  cdv_err fault; /* the sticky error and where it first surfaced */
  char fault_where[128];
  void *backend_data; /* per-backend state (cpu: thread pool, ...) */
} cdv_device;

/* ---------------------------------------------------------------- kernels */
/* A compile request, device-independent; the backend of the target turns it into an image. */
typedef struct cdv_compile_req {
  const char *source;
  size_t source_len;
  const char *name; /* file name used in messages, "kernel.cu" */
  int nopts;
  const char *const *opts; /* compiler options */
  int nheaders;
  const char *const *header_names;
  const char *const *header_srcs; /* sorted by name, so
                                            * cache keys do not follow Lua's table order (module.c) */
  int nincludes;
  const char *const *include_paths;
  int nentries;
  const char *const *entries; /* kernels to expose: "saxpy", "axpy<float>" */
  const unsigned char *is_expr; /* per entry: 1 = C++ name expression to lower; 0 = extern "C" symbol;
                                            * 2 = a global variable (NOTE [module globals] in module.c) */
  int arch; /* CUDA: 90 for sm_90; ignored by cpu */
  int want_ptx, want_cubin; /* CUDA targets asked for */
  int check; /* cpu: cd.compile's cpu_check, 1 "memory", -1 "none", 0 not given (NOTE [checked memory]) */
} cdv_compile_req;

typedef struct cdv_image {
  char *ptx;
  size_t ptx_len; /* NUL-terminated PTX, or NULL */
  char *cubin;
  size_t cubin_len; /* cubin bytes, or NULL */
  char *path; /* cpu: the shared object on disk */
  char *log; /* compiler log ("" when empty) */
  char **lowered; /* per entry: the symbol module_function looks up */
  int nentries;
} cdv_image;

void cdv_image_free(cdv_image *img);

typedef struct cdv_func_info {
  int num_regs, max_threads_per_block;
  size_t shared_size_bytes, const_size_bytes, local_size_bytes;
  const char *cpu_path; /* the cpu device's "loop" or "fibers" (NOTE [kernel paths]); NULL elsewhere */
  const char *cpu_reason; /* what keeps it off the cpu device's fastest path, with its line; NULL on it */
} cdv_func_info;

/* ---------------------------------------------------------------- built-in loops (NOTE [cpu loops]) */
/* The operations of ops.lua a backend may run without a compile: elementwise (x = in[0], y = in[1]; where: the
 * condition, x, y) and reductions. X(NAME, name): name is ops.lua's. */
/* clang-format off */
#define CDV_LOOP_OPS(X)                                                                                          \
  X(ADD, add) X(SUB, sub) X(MUL, mul) X(DIV, div) X(FLOORDIV, floordiv) X(MOD, mod) X(POW, pow)              \
  X(MINIMUM, minimum) X(MAXIMUM, maximum) X(ATAN2, atan2) X(HYPOT, hypot) X(BAND, band) X(BOR, bor)        \
  X(BXOR, bxor) X(SHL, shl) X(SHR, shr) X(EQ, eq) X(NE, ne) X(LT, lt) X(LE, le) X(GT, gt) X(GE, ge)        \
  X(EXP, exp) X(EXP2, exp2) X(EXPM1, expm1) X(LOG, log) X(LOG2, log2) X(LOG10, log10) X(LOG1P, log1p)     \
  X(SQRT, sqrt) X(CBRT, cbrt) X(SIN, sin) X(COS, cos) X(TAN, tan) X(ASIN, asin) X(ACOS, acos)             \
  X(ATAN, atan) X(SINH, sinh) X(COSH, cosh) X(TANH, tanh) X(ASINH, asinh) X(ACOSH, acosh)                 \
  X(ATANH, atanh) X(FLOOR, floor) X(CEIL, ceil) X(TRUNC, trunc) X(RINT, rint) X(ERF, erf) X(ERFC, erfc)   \
  X(ABS, abs) X(NEGATIVE, negative) X(SIGN, sign) X(SQUARE, square) X(ISNAN, isnan) X(ISINF, isinf)       \
  X(ISFINITE, isfinite) X(LOGICAL_NOT, logical_not) X(INVERT, invert) X(WHERE, where) X(COPY, copy)
#define CDV_RED_OPS(X) \
  X(SUM, sum) X(PROD, prod) X(MEAN, mean) X(MIN, min) X(MAX, max) X(ARGMIN, argmin) X(ARGMAX, argmax) X(ALL, all) X(ANY, any)
/* clang-format on */
#define CDV_LOOP_ENUM(N, n) CDV_LOOP_##N,
#define CDV_RED_ENUM(N, n) CDV_RED_##N,
enum { CDV_LOOP_OPS(CDV_LOOP_ENUM) CDV_LOOP_NOPS };
enum { CDV_RED_OPS(CDV_RED_ENUM) CDV_RED_NOPS };
#define CDV_LOOP_MAXDIM 8 /* CDV_MAXDIM of cdv.h */

typedef struct cdv_loop_operand {
  char *data; /* the element at index 0 */
  cdv_dtype dtype;
  int64_t stride[CDV_LOOP_MAXDIM]; /* in elements, per dimension of the output (0 where broadcast) */
} cdv_loop_operand;

/* out[idx] = (out)(res)(op of the inputs converted to calc), over shape; bits: the promoted dtype's width */
typedef struct cdv_loop {
  int op, nin, nd, bits;
  cdv_dtype calc, calc2, res; /* calc2: the one y converts to (calc but for exact comparisons of int64 and uint64) */
  int64_t shape[CDV_LOOP_MAXDIM];
  cdv_loop_operand out, in[3];
} cdv_loop;

/* y (contiguous, outer * inner elements of out) = op over the K elements of x (contiguous, read as
 * {outer, K, inner}) converted to acc, folded as nsplit blocks (NOTE [reduction passes]) */
typedef struct cdv_reduce {
  int op;
  cdv_dtype in, acc, out;
  const char *x;
  char *y;
  int64_t outer, K, inner, nsplit;
} cdv_reduce;

/* ---------------------------------------------------------------- the backend interface */
/* Every operation returns 0 on success or -1 with *e filled. `stream` is a backend stream handle:
 * NULL means the device's default stream. No operation raises a Lua error or touches a lua_State. */
enum {
  CDV_MEM_DEVICE = 0,
  CDV_MEM_PINNED = 1,
  CDV_MEM_HOST = 2,
  CDV_MEM_MANAGED = 3
}; /* NOTE [managed memory] (managed.c): memory of d the host reaches too */

struct cdv_backend {
  const char *kind; /* "cpu" or "cuda" */
  int reset_frees; /* a reset takes everything made before it (NOTE [stale release]) */
  int has_contexts; /* its devices have a context, made when first needed (d->ctx) */
  /* NOTE [backend properties]: what the Lua layer must know of a device kind, asked as properties instead of
   * "is it the cpu?". host_memory: its arrays live in host memory that host code may read and write directly
   * (once the last stream using it is done: array.c's host_wait); so it also takes pinned arrays, and a copy
   * between it and another kind runs on the other kind's backend. done_when_queued: work it queues on its
   * streams has finished when the call returns, so the host never waits for it before touching memory. */
  int host_memory;
  int done_when_queued;
  /* native_code: its kernels compile to native host code: no sm_XX architecture, no PTX or cubin image to
   * load (load_module), and not in a sandbox (a kernel could do anything the process can). */
  int native_code;
  /* 1 when this backend's copies from and to pageable host memory are faster through pinned staging buffers
   * (its DMA engines read and write only page-locked memory); 0 when its copies are host memcpys.
   * NOTE [staged copies] in staging.c. */
  int stage_pageable;
  /* (see NOTE [tail canary] in memory.c) tail_room: the bytes an array must leave free at the end of a block of
   * the block cache's class cls (NULL: none); mem_slack: how many bytes after an array of `bytes` at ptr belong to its allocation (0 when
   * the memory is not this backend's); NULL: the device keeps no canary */
  size_t (*tail_room)(size_t cls);
  size_t (*mem_slack)(cdv_device *d, const void *ptr, size_t bytes);
  int (*activate)(cdv_device *d, cdv_err *e); /* create/make current the context */
  int (*synchronize)(cdv_device *d, cdv_err *e);
  int (*mem_info)(cdv_device *d, size_t *free_b, size_t *total_b, cdv_err *e);
  /* memory: kind is CDV_MEM_DEVICE (memory of d) or CDV_MEM_PINNED (page-locked host memory) */
  int (*mem_alloc)(cdv_device *d, size_t bytes, int kind, void *stream, void **ptr, cdv_err *e);
  int (*mem_free)(cdv_device *d, void *ptr, int kind, void *stream, cdv_err *e);
  /* copy n bytes; dst_dev/src_dev tell where each side lives (either may be cpu). Called on the backend
   * of the non-cpu side when there is one (cdv_copy_device picks it). */
  int (*memcpy)(cdv_device *d, void *dst, cdv_device *dst_dev, const void *src, cdv_device *src_dev, size_t n,
                void *stream, cdv_err *e);
  /* set count elements of elsize bytes (1, 2, 4 or 8) to *pattern */
  int (*memset)(cdv_device *d, void *dst, const void *pattern, size_t elsize, size_t count, void *stream, cdv_err *e);
  int (*stream_create)(cdv_device *d, int priority, int blocking, void **s, cdv_err *e);
  int (*stream_destroy)(cdv_device *d, void *s, cdv_err *e);
  int (*stream_synchronize)(cdv_device *d, void *s, cdv_err *e);
  int (*stream_query)(cdv_device *d, void *s, int *idle, cdv_err *e);
  int (*stream_wait_event)(cdv_device *d, void *s, void *ev, cdv_err *e);
  int (*stream_priority_range)(cdv_device *d, int *least, int *greatest, cdv_err *e);
  int (*event_create)(cdv_device *d, int timing, int blocking, void **ev, cdv_err *e);
  int (*event_destroy)(cdv_device *d, void *ev, cdv_err *e);
  int (*event_record)(cdv_device *d, void *ev, void *s, cdv_err *e);
  int (*event_query)(cdv_device *d, void *ev, int *done, cdv_err *e);
  int (*event_synchronize)(cdv_device *d, void *ev, cdv_err *e);
  int (*event_elapsed)(cdv_device *d, void *start, void *end, float *ms, cdv_err *e);
  /* kernels; compile may get d == NULL (CUDA: compile for req->arch with no GPU); each backend keeps its own
   * compiled code on disk (NOTE [cuda kernel cache], NOTE [cpu kernel cache]); -2 with e->message when the
   * request asks for what the backend cannot give (a cubin NVRTC cannot emit) */
  int (*compile)(cdv_device *d, const cdv_compile_req *req, cdv_image *out, cdv_err *e);
  int (*module_load)(cdv_device *d, const cdv_image *img, void **mod, cdv_err *e);
  int (*module_unload)(cdv_device *d, void *mod, cdv_err *e);
  int (*module_function)(cdv_device *d, void *mod, const char *symbol, void **fn, cdv_err *e);
  /* the address and size of a global variable (an entry with is_expr 2) by its lowered name */
  int (*module_global)(cdv_device *d, void *mod, const char *symbol, void **ptr, size_t *bytes, cdv_err *e);
  int (*func_info)(cdv_device *d, void *fn, cdv_func_info *out, cdv_err *e);
  /* size and offset of parameter i as the compiler laid it out; returns 1 when unknown (cpu, old driver) or
   * i is past the last parameter. A size of CDV_PARAM_HUGE means that size or more (the cpu object's field). */
  int (*param_info)(cdv_device *d, void *fn, int i, size_t *offset, size_t *size);
  int (*occupancy)(cdv_device *d, void *fn, int block, size_t shared, int *blocks_per_sm, cdv_err *e);
  /* opts: NOTE [launch limits]; NULL for the defaults */
  int (*launch)(cdv_device *d, void *fn, const unsigned grid[3], const unsigned block[3], unsigned shared, void *stream,
                void **args, const cdv_launch_opts *opts, cdv_err *e);
  /* (see NOTE [cooperative launch]) the same launch with every block resident at once (grid-wide sync works);
   * coop_limit says how many blocks of that size fit at once: per_sm blocks on each of sms multiprocessors
   * (-1 with *e when the device cannot launch cooperatively). */
  int (*launch_cooperative)(cdv_device *d, void *fn, const unsigned grid[3], const unsigned block[3], unsigned shared,
                            void *stream, void **args, const cdv_launch_opts *opts, cdv_err *e);
  int (*coop_limit)(cdv_device *d, void *fn, int block, size_t shared, int *per_sm, int *sms, cdv_err *e);
  /* (see NOTE [big shared memory]) let fn take `bytes` of dynamic shared memory per launch (more than the default
   * 48 KiB: CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES); *allowed is what it may take now (never lowered).
   * NULL when every size up to the device's limit works without it. */
  int (*allow_shared)(cdv_device *d, void *fn, size_t bytes, size_t *allowed, cdv_err *e);

  /* NOTE [optional operations]: features a device kind may not have at all (the cpu device has no peers and
   * no graphs) are operations left NULL; the Lua-facing file asks for the operation and, when it is missing,
   * says by name that the feature belongs to another kind of device, instead of testing the kind itself.
   * Peer access: may `peer` map `target`'s memory; turn the access on or off (the caller made both contexts
   * and peer's current; twice is not a failure); the same for memory from target's stream-ordered pool. */
  int (*peer_supported)(cdv_device *target, cdv_device *peer, int *can, cdv_err *e);
  int (*peer_set)(cdv_device *target, cdv_device *peer, int on, cdv_err *e);
  int (*mempool_access_get)(cdv_device *target, cdv_device *peer, int *on, cdv_err *e);
  int (*mempool_access_set)(cdv_device *target, cdv_device *peer, int on, cdv_err *e);
  /* Graphs by stream capture: begin; end (keep = 0: discard what was captured) giving an executable graph
   * and its node count; launch one on a stream; destroy one. */
  int (*capture_begin)(cdv_device *d, void *stream, cdv_err *e);
  int (*capture_end)(cdv_device *d, void *stream, int keep, void **exec, int *nodes, cdv_err *e);
  int (*graph_launch)(cdv_device *d, void *exec, void *stream, cdv_err *e);
  int (*graph_destroy)(cdv_device *d, void *exec, cdv_err *e);
  /* NOTE [stream callbacks] (async.c): fn(ud) called by the backend, on a thread of its own, once the work queued
   * on `stream` before it is done (cuLaunchHostFunc). A kind whose work is done when queued needs none. */
  int (*host_func)(cdv_device *d, void *stream, void (*fn)(void *), void *ud, cdv_err *e);
  /* NOTE [ipc] (ipc.c): memory and events other processes of the machine open. ipc_alloc / ipc_free: an allocation
   * of its own (cuMemAlloc / cuMemFree, never the pool's); mem_get: its 64-byte handle; mem_open / mem_close: map
   * another process's allocation (its base and size) and unmap it; event_create: an interprocess event (no
   * timing); event_get / event_open: an event's handle and the event it names. */
  int (*ipc_alloc)(cdv_device *d, size_t bytes, void **ptr, cdv_err *e);
  int (*ipc_free)(cdv_device *d, void *ptr, cdv_err *e);
  int (*ipc_mem_get)(cdv_device *d, void *ptr, unsigned char handle[64], cdv_err *e);
  int (*ipc_mem_open)(cdv_device *d, const unsigned char handle[64], void **ptr, size_t *bytes, cdv_err *e);
  int (*ipc_mem_close)(cdv_device *d, void *ptr, cdv_err *e);
  int (*ipc_event_create)(cdv_device *d, int blocking, void **ev, cdv_err *e);
  int (*ipc_event_get)(cdv_device *d, void *ev, unsigned char handle[64], cdv_err *e);
  int (*ipc_event_open)(cdv_device *d, const unsigned char handle[64], void **ev, cdv_err *e);
  /* The device's stream-ordered pool (where d->is_mempool_supported): the bytes it reserves now, and giving
   * back what it keeps beyond what is allocated (after the caller waited for the device). */
  int (*pool_reserved)(cdv_device *d, uint64_t *bytes, cdv_err *e);
  int (*pool_trim)(cdv_device *d, cdv_err *e);
  /* A device attribute by the driver's number (cdv_attrs.h's table); the multiprocessor's resources that
   * k:occupancy() divides (threads, 32-bit registers, shared memory; each left as it was when unknown); reset
   * (destroy the device's context and everything in it; -2 when it was reset but no new context could be
   * made; the caller has let queued work finish); tell the profiler to start or stop recording; check that a
   * host's stream handle is a stream of d. */
  int (*attribute)(cdv_device *d, int attr, int *value, cdv_err *e);
  void (*sm_resources)(cdv_device *d, int *max_threads, int *regs, size_t *shared);
  int (*reset)(cdv_device *d, cdv_err *e);
  int (*profiler)(cdv_device *d, int start, cdv_err *e);
  int (*stream_of)(cdv_device *d, void *stream, cdv_err *e);
  /* NOTE [managed memory] (managed.c): CDV_MEM_MANAGED memory of d moved towards `to` (NULL: the host) on stream,
   * and advice about it (CDV_ADVISE_*) for `to` (NULL: the host). The cpu device's managed memory is ordinary
   * memory: both succeed and do nothing. */
  int (*mem_prefetch)(cdv_device *d, void *ptr, size_t bytes, cdv_device *to, void *stream, cdv_err *e);
  int (*mem_advise)(cdv_device *d, void *ptr, size_t bytes, int advice, cdv_device *to, cdv_err *e);
  /* (NOTE [cpu loops]) a built-in operation without a compile, done when it returns; 1 when the backend has no
   * loop for that operation and types (the caller compiles it). NULL where the backend has none at all. */
  int (*loop)(cdv_device *d, const cdv_loop *l, void *stream, cdv_err *e);
  int (*reduce)(cdv_device *d, const cdv_reduce *r, void *stream, cdv_err *e);
};
enum {
  CDV_ADVISE_READ_MOSTLY = 1,
  CDV_ADVISE_UNSET_READ_MOSTLY,
  CDV_ADVISE_PREFERRED_LOCATION,
  CDV_ADVISE_UNSET_PREFERRED_LOCATION,
  CDV_ADVISE_ACCESSED_BY,
  CDV_ADVISE_UNSET_ACCESSED_BY
};

#define CDV_PARAM_HUGE ((size_t)0xfffff)

extern const cdv_backend cdv_backend_cuda;
extern const cdv_backend cdv_backend_cpu;

/* CUDA-only entry points of backend_cuda.c that are not per-device operations. */
int cdv_cuda_host_register(void *p, size_t n, cdv_err *e); /* cuMemHostRegister; -1 and *e when no driver */
int cdv_cuda_host_unregister(void *p); /* cuMemHostUnregister; never raises */
int cdv_cuda_fill_device(cdv_device *d, int ordinal, cdv_err *e); /* name, arch, limits, uuid, memory... */
int cdv_cuda_driver_version(void); /* cuDriverGetVersion, 0 without a driver */
int cdv_nvrtc_version(int *major, int *minor); /* 0 on success */
const char *cdv_nvrtc_toolkit_include(int which); /* "-I<toolkit>/include" (0), ".../include/cccl" (1), or "" */
/* NOTE [nvrtc standard headers] (nvrtc_std.c): the request's headers followed by the standard ones it may use,
 * in two arrays the caller frees (not their strings); the count, or -1 when out of memory. The SHA-256 of their
 * text (hex), for the cache key. */
int cdv_nvrtc_std_headers(const cdv_compile_req *req, const char ***names, const char ***srcs);
const char *cdv_nvrtc_std_digest(void);
int cdv_cuda_is_sticky(int curesult); /* NOTE [sticky faults] */
/* the CUDA backend's attribute, reset and stream_of operations, also callable directly (tests/) */
int cdv_cuda_attribute(cdv_device *d, int attr, int *value, cdv_err *e); /* cuDeviceGetAttribute */
int cdv_cuda_reset(cdv_device *d, cdv_err *e); /* cuDevicePrimaryCtxReset, then the context retained anew */
int cdv_cuda_stream_of(cdv_device *d, void *stream, cdv_err *e); /* cuStreamGetCtx: -1 unless a stream of d */
int cdv_cuda_mem_prefetch(cdv_device *d, void *ptr, size_t bytes, cdv_device *to, void *stream, cdv_err *e);
int cdv_cuda_mem_advise(cdv_device *d, void *ptr, size_t bytes, int advice, cdv_device *to, cdv_err *e);
/* backend_cuda_ipc.c: the CUDA backend's host_func and ipc_* operations (NOTE [ipc], NOTE [stream callbacks]) */
int cdv_cuda_host_func(cdv_device *d, void *stream, void (*fn)(void *), void *ud, cdv_err *e);
int cdv_cuda_ipc_alloc(cdv_device *d, size_t bytes, void **ptr, cdv_err *e);
int cdv_cuda_ipc_free(cdv_device *d, void *ptr, cdv_err *e);
int cdv_cuda_ipc_mem_get(cdv_device *d, void *ptr, unsigned char handle[64], cdv_err *e);
int cdv_cuda_ipc_mem_open(cdv_device *d, const unsigned char handle[64], void **ptr, size_t *bytes, cdv_err *e);
int cdv_cuda_ipc_mem_close(cdv_device *d, void *ptr, cdv_err *e);
int cdv_cuda_ipc_event_create(cdv_device *d, int blocking, void **ev, cdv_err *e);
int cdv_cuda_ipc_event_get(cdv_device *d, void *ev, unsigned char handle[64], cdv_err *e);
int cdv_cuda_ipc_event_open(cdv_device *d, const unsigned char handle[64], void **ev, cdv_err *e);
int cdv_cuda_attribute_id(const char *name); /* d:attribute's name ("warp_size"): its number, -1 when unknown */
/* the CUDA compile operation without the disk cache and the target check (tests/cuda_backend_test.c) */
int cdv_cuda_compile_uncached(cdv_device *d, const cdv_compile_req *req, cdv_image *out, cdv_err *e);
int cdv_cuda_is_teardown(int code); /* the driver deinitialised or the context destroyed (NOTE [lifetimes]) */
int cdv_cuda_device_count(void); /* cuDeviceGetCount; 0 without a driver */
void *cdv_cuda_current_context(void); /* cuCtxGetCurrent; NULL when none */
void cdv_cuda_set_current_context(void *ctx); /* cuCtxSetCurrent when ctx is not NULL; never raises */
int cdv_cuda_context_alive(cdv_device *d); /* a mapped context still exists (NOTE [adopted contexts]) */
int cdv_cuda_adopt(cdv_device *d, cdv_err *e); /* the canary of a mapped context, made current */
void cdv_cuda_unadopt(cdv_device *d); /* its canary freed (the context lives on) */
/* the CUdevice of context *ctx (NULL: the current one, stored in *ctx; none current leaves it NULL) */
int cdv_cuda_context_device(void **ctx, int *device, cdv_err *e);
/* backend_cuda_optional.c: the CUDA backend's NOTE [optional operations] */
int cdv_cuda_peer_supported(cdv_device *target, cdv_device *peer, int *can, cdv_err *e);
int cdv_cuda_peer_set(cdv_device *target, cdv_device *peer, int on, cdv_err *e);
int cdv_cuda_mempool_access_get(cdv_device *target, cdv_device *peer, int *on, cdv_err *e);
int cdv_cuda_mempool_access_set(cdv_device *target, cdv_device *peer, int on, cdv_err *e);
int cdv_cuda_capture_begin(cdv_device *d, void *stream, cdv_err *e);
int cdv_cuda_capture_end(cdv_device *d, void *stream, int keep, void **exec, int *nodes, cdv_err *e);
int cdv_cuda_graph_launch(cdv_device *d, void *exec, void *stream, cdv_err *e);
int cdv_cuda_graph_destroy(cdv_device *d, void *exec, cdv_err *e);
int cdv_cuda_pool_reserved(cdv_device *d, uint64_t *bytes, cdv_err *e);
int cdv_cuda_pool_trim(cdv_device *d, cdv_err *e);
int cdv_cuda_pool_prepare(cdv_device *d, cdv_err *e); /* the pool keeps what is freed (NOTE [caching pool]) */
/* backend_cuda_granules.c: device memory of up to 32 MiB in segments of our own (NOTE [granules]). alloc and free
 * return 1 when the memory is not theirs to serve (the pool's), 0 when done, -1 with *e filled */
int cdv_cuda_granule_alloc(cdv_device *d, size_t bytes, void *stream, void **ptr, cdv_err *e);
int cdv_cuda_granule_free(cdv_device *d, void *ptr, void *stream, cdv_err *e);
uint64_t cdv_cuda_granule_reserved(cdv_device *d);
int cdv_cuda_granule_trim(cdv_device *d, int synced, cdv_err *e); /* synced: the device has finished its work */
void cdv_cuda_granule_stream_gone(cdv_device *d, void *stream);
int cdv_cuda_granule_access(cdv_device *target, cdv_device *peer, int on, cdv_err *e);
void cdv_cuda_granule_reset(cdv_device *d);
void cdv_cuda_sm_resources(cdv_device *d, int *max_threads, int *regs, size_t *shared);
int cdv_cuda_profiler(cdv_device *d, int start, cdv_err *e);

/* ---------------------------------------------------------------- CUDA modules on disk (cuda_cache.c) */
/* (see NOTE [cuda kernel cache]) one compile's place in the cache. cdv_cuda_cache_key fills it (and is -1 when the
 * cache is off, has no directory, or cannot know every input: then get misses and put does nothing). */
typedef struct cdv_cuda_entry {
  int on;
  unsigned char key[16];
  char dir[4096]; /* <cache>/cuda */
  char path[4200]; /* <dir>/<32 hex digits>.mod */
} cdv_cuda_entry;

int cdv_cuda_cache_key(const cdv_compile_req *req, cdv_cuda_entry *ce);
int cdv_cuda_cache_get(const cdv_cuda_entry *ce, const cdv_compile_req *req, cdv_image *out); /* 0: a hit */
void cdv_cuda_cache_put(const cdv_cuda_entry *ce, const cdv_compile_req *req, const cdv_image *img);
enum { CDV_DISK_HITS, CDV_DISK_MISSES, CDV_DISK_WRITES, CDV_DISK_ERRORS, CDV_DISK_NSTATS };
/* the counters, the directory ("" when the cache is off), the last error's text and why the last compile did
 * not come from the disk ("" when none) */
void cdv_cuda_cache_stats(long out[CDV_DISK_NSTATS], char *dir, size_t ndir, char *last, size_t nlast, char *miss,
                          size_t nmiss);
int cdv_cuda_cache_selftest(const char *dir, char *why, size_t n); /* cd._selftest.disk_cache */
void cdv_cpu_cache_dir_used(char *out, size_t n); /* the cpu kernel cache's directory, "" before a compile */
void cdv_cpu_cache_forget(void); /* drop the in-memory memo, failures included (disk entries stay) */
long cdv_cpu_compiler_runs(void); /* the host compiler's runs for kernels (NOTE [cpu loops]) */
void cdv_cache_refusal(char *out, size_t n); /* (see NOTE [cache trust]) the last directory refused, "" if none */
int cdv_cache_trust_selftest(const char *dir, char *why, size_t n); /* cd._selftest.cache_trust */

/* ---------------------------------------------------------------- loader (loader.c) */
int cdv_cuda_load(void); /* 0 when libcuda is open and cuInit succeeded */
const char *cdv_cuda_why(void); /* why it is not: every name that was tried */
int cdv_nvrtc_load(void);
const char *cdv_nvrtc_why(void);
const char *cdv_nvrtc_file(void); /* the file NVRTC was loaded from (loads it); "" when it cannot be */

/* ---------------------------------------------------------------- backend functions the front end calls */
size_t cdv_cpu_available(void); /* backend_cpu.c: host memory available now (MemAvailable), in bytes */
int cdv_cubin_supported(int arch); /* backend_cuda.c: NVRTC can emit cubin for sm_<arch> (the one arch query) */

#endif
