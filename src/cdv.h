/*
 * cdv.h: cudadev's internal header. Every C file of the module includes it; nothing here is exported.
 *
 * The layers (see STYLE.md):
 *   loader.c      raw symbols of libcuda and NVRTC, opened lazily with dlopen (syms.h lists them)
 *   backend.h     the operations a device kind implements; backend_cuda.c and backend_cpu.c fill it
 *   device.c ...  one file per Lua type, calling the backend of the object's device
 */
#ifndef CDV_H
#define CDV_H

#include <stddef.h>
#include <stdint.h>
#include <lua.h>
#include <lauxlib.h>

#define CDV_VERSION "0.1.0"

#if defined(__x86_64__)
#define CDV_HOST_ARCH "x86_64"
#elif defined(__aarch64__)
#define CDV_HOST_ARCH "aarch64"
#else
#define CDV_HOST_ARCH "unknown"
#endif

/* ---------------------------------------------------------------- dtypes */
typedef enum cdv_dtype {
  CDV_F16, CDV_F32, CDV_F64,
  CDV_I8, CDV_I16, CDV_I32, CDV_I64,
  CDV_U8, CDV_U16, CDV_U32, CDV_U64,
  CDV_BOOL, CDV_NDTYPES
} cdv_dtype;

typedef struct cdv_dtype_info {
  const char *name;   /* "float32" */
  const char *short_name; /* "f32" */
  unsigned char size;
  unsigned char is_float, is_signed;
} cdv_dtype_info;

extern const cdv_dtype_info cdv_dtypes[CDV_NDTYPES];

/* ---------------------------------------------------------------- errors */
/* A failure reported by a backend or a driver call, before it becomes a cudadev.Error (error.c). */
typedef struct cdv_err {
  const char *api;        /* "cuMemAlloc", "nvrtcCompileProgram", "cpu.launch" ... (static string) */
  int code;               /* CUresult / nvrtcResult / errno; 0 when unset */
  char name[64];          /* "CUDA_ERROR_OUT_OF_MEMORY" */
  char message[512];      /* the driver's explanation */
  int sticky;             /* the context is corrupted (error.c classifies CUresult codes) */
  char *log;              /* compile log (malloc'd, owned by the receiver) or NULL */
} cdv_err;

/* Fill e from a printf-style message; returns -1 so backends can `return cdv_fail(...)`. */
int cdv_fail(cdv_err *e, const char *api, int code, const char *name, const char *fmt, ...);

/* ---------------------------------------------------------------- devices */
typedef struct cdv_backend cdv_backend;

typedef struct cdv_device {
  const cdv_backend *be;
  int index;              /* position in the process-wide registry; cpu is 0 */
  int ordinal;            /* CUDA ordinal, -1 for cpu */
  char alias[64];         /* "cpu", "cuda:0", or a mapped alias */
  char name[256];
  int arch;               /* 90 for sm_90, 0 for cpu */
  int is_cpu, is_primary, is_uva, is_mempool_supported;
  int sm_count, warp_size, max_threads_per_block;
  int max_block[3], max_grid[3];
  size_t max_shared_per_block, max_shared_optin;
  size_t total_memory;
  char uuid[48];          /* "GPU-xxxxxxxx-..." (40 characters; "" on cpu) */
  char pci_bus_id[32];    /* "0000:00:00.0" ("" on cpu) */
  void *ctx;              /* CUcontext (NULL until first needed, and on cpu) */
  int handle;             /* CUdevice */
  unsigned generation;    /* bumped by reset: objects made before it are stale */
  int sticky;             /* NOTE [sticky faults]: a fault poisoned the context */
  int unmapped;           /* a mapped context whose alias was released: listed and resolved no more */
  uintptr_t canary;       /* a mapped context: a tiny allocation of ours in it (NOTE [adopted contexts]) */
  int gone;               /* a mapped context that its owner destroyed: nothing on it calls the driver again */
  cdv_err fault;          /* the sticky error and where it first surfaced */
  char fault_where[128];
  void *backend_data;     /* per-backend state (cpu: thread pool, ...) */
} cdv_device;

/* ---------------------------------------------------------------- kernels */
/* A compile request, device-independent; the backend of the target turns it into an image. */
typedef struct cdv_compile_req {
  const char *source; size_t source_len;
  const char *name;                         /* file name used in messages, "kernel.cu" */
  int nopts; const char *const *opts;       /* compiler options */
  int nheaders; const char *const *header_names; const char *const *header_srcs;   /* sorted by name, so
                                            * cache keys do not follow Lua's table order (module.c) */
  int nincludes; const char *const *include_paths;
  int nentries; const char *const *entries; /* kernels to expose: "saxpy", "axpy<float>" */
  const unsigned char *is_expr;             /* per entry: 1 = C++ name expression to lower; 0 = extern "C" symbol;
                                            * 2 = a global variable (NOTE [module globals] in module.c) */
  int arch;                                 /* CUDA: 90 for sm_90; ignored by cpu */
  int want_ptx, want_cubin;                 /* CUDA targets asked for */
} cdv_compile_req;

typedef struct cdv_image {
  char *ptx; size_t ptx_len;        /* NUL-terminated PTX, or NULL */
  char *cubin; size_t cubin_len;    /* cubin bytes, or NULL */
  char *path;                       /* cpu: the shared object on disk */
  char *log;                        /* compiler log ("" when empty) */
  char **lowered;                   /* per entry: the symbol module_function looks up */
  int nentries;
} cdv_image;

void cdv_image_free(cdv_image *img);

typedef struct cdv_func_info {
  int num_regs, max_threads_per_block;
  size_t shared_size_bytes, const_size_bytes, local_size_bytes;
  const char *cpu_path;   /* the cpu device's "loop" or "fibers" (NOTE [kernel paths]); NULL elsewhere */
} cdv_func_info;

/* ---------------------------------------------------------------- the backend interface */
/* Every operation returns 0 on success or -1 with *e filled. `stream` is a backend stream handle:
 * NULL means the device's default stream. No operation raises a Lua error or touches a lua_State. */
enum { CDV_MEM_DEVICE = 0, CDV_MEM_PINNED = 1, CDV_MEM_HOST = 2,
       CDV_MEM_MANAGED = 3 };   /* NOTE [managed memory] (managed.c): memory of d the host reaches too */

struct cdv_backend {
  const char *kind;                              /* "cpu" or "cuda" */
  int reset_frees;                               /* a reset takes everything made before it (NOTE [stale release]) */
  int has_contexts;                              /* its devices have a context, made when first needed (d->ctx) */
  /* NOTE [backend properties]: what the Lua layer must know of a device kind, asked as properties instead of
   * "is it the cpu?". host_memory: its arrays live in host memory that host code may read and write directly
   * (once the last stream using it is done: array.c's host_wait); so it also takes pinned arrays, and a copy
   * between it and another kind runs on the other kind's backend. done_when_queued: work it queues on its
   * streams has finished when the call returns, so the host never waits for it before touching memory. */
  int host_memory;
  int done_when_queued;
  /* 1 when this backend's copies from and to pageable host memory are faster through pinned staging buffers
   * (its DMA engines read and write only page-locked memory); 0 when its copies are host memcpys.
   * NOTE [staged copies] in staging.c. */
  int stage_pageable;
  int (*activate)(cdv_device *d, cdv_err *e);    /* create/make current the context */
  int (*synchronize)(cdv_device *d, cdv_err *e);
  int (*mem_info)(cdv_device *d, size_t *free_b, size_t *total_b, cdv_err *e);
  /* memory: kind is CDV_MEM_DEVICE (memory of d) or CDV_MEM_PINNED (page-locked host memory) */
  int (*mem_alloc)(cdv_device *d, size_t bytes, int kind, void *stream, void **ptr, cdv_err *e);
  int (*mem_free)(cdv_device *d, void *ptr, int kind, void *stream, cdv_err *e);
  /* copy n bytes; dst_dev/src_dev tell where each side lives (either may be cpu). Called on the backend
   * of the non-cpu side when there is one (cdv_copy_device picks it). */
  int (*memcpy)(cdv_device *d, void *dst, cdv_device *dst_dev, const void *src, cdv_device *src_dev,
                size_t n, void *stream, cdv_err *e);
  /* set count elements of elsize bytes (1, 2, 4 or 8) to *pattern */
  int (*memset)(cdv_device *d, void *dst, const void *pattern, size_t elsize, size_t count,
                void *stream, cdv_err *e);
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
  /* kernels; compile may get d == NULL (CUDA: compile for req->arch with no GPU) */
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
  int (*launch)(cdv_device *d, void *fn, const unsigned grid[3], const unsigned block[3], unsigned shared,
                void *stream, void **args, cdv_err *e);
  /* NOTE [cooperative launch]: the same launch with every block resident at once (grid-wide sync works);
   * coop_limit says how many blocks of that size fit at once: per_sm blocks on each of sms multiprocessors
   * (-1 with *e when the device cannot launch cooperatively). */
  int (*launch_cooperative)(cdv_device *d, void *fn, const unsigned grid[3], const unsigned block[3],
                            unsigned shared, void *stream, void **args, cdv_err *e);
  int (*coop_limit)(cdv_device *d, void *fn, int block, size_t shared, int *per_sm, int *sms, cdv_err *e);
  /* NOTE [big shared memory]: let fn take `bytes` of dynamic shared memory per launch (more than the default
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
  /* The device's stream-ordered pool (where d->is_mempool_supported): the bytes it reserves now, and giving
   * back what it keeps beyond what is allocated (after the caller waited for the device). */
  int (*pool_reserved)(cdv_device *d, uint64_t *bytes, cdv_err *e);
  int (*pool_trim)(cdv_device *d, cdv_err *e);
  /* NOTE [managed memory] (managed.c): CDV_MEM_MANAGED memory of d moved towards `to` (NULL: the host) on stream,
   * and advice about it (CDV_ADVISE_*) for `to` (NULL: the host). The cpu device's managed memory is ordinary
   * memory: both succeed and do nothing. */
  int (*mem_prefetch)(cdv_device *d, void *ptr, size_t bytes, cdv_device *to, void *stream, cdv_err *e);
  int (*mem_advise)(cdv_device *d, void *ptr, size_t bytes, int advice, cdv_device *to, cdv_err *e);
};
enum { CDV_ADVISE_READ_MOSTLY = 1, CDV_ADVISE_UNSET_READ_MOSTLY, CDV_ADVISE_PREFERRED_LOCATION,
       CDV_ADVISE_UNSET_PREFERRED_LOCATION, CDV_ADVISE_ACCESSED_BY, CDV_ADVISE_UNSET_ACCESSED_BY };

#define CDV_PARAM_HUGE ((size_t)0xfffff)

extern const cdv_backend cdv_backend_cuda;
extern const cdv_backend cdv_backend_cpu;

/* CUDA-only entry points of backend_cuda.c that are not per-device operations. */
int cdv_cuda_host_register(void *p, size_t n, cdv_err *e);   /* cuMemHostRegister; -1 and *e when no driver */
int cdv_cuda_reset(cdv_device *d, cdv_err *e);   /* cuDevicePrimaryCtxReset, then the context retained anew */
int cdv_cuda_host_unregister(void *p);                       /* cuMemHostUnregister; never raises */
int cdv_cuda_fill_device(cdv_device *d, int ordinal, cdv_err *e); /* name, arch, limits, uuid, memory... */
int cdv_cuda_attribute(cdv_device *d, int attr, int *value, cdv_err *e); /* cuDeviceGetAttribute */
int cdv_cuda_driver_version(void);                           /* cuDriverGetVersion, 0 without a driver */
int cdv_nvrtc_version(int *major, int *minor);               /* 0 on success */
const char *cdv_nvrtc_toolkit_include(int which);  /* "-I<toolkit>/include" (0), ".../include/cccl" (1), or "" */
int cdv_cuda_is_sticky(int curesult);                        /* NOTE [sticky faults] */
int cdv_cuda_context_alive(cdv_device *d);   /* a mapped context still exists (NOTE [adopted contexts]) */
int cdv_cuda_adopt(cdv_device *d, cdv_err *e);                /* the canary of a mapped context, made current */
void cdv_cuda_unadopt(cdv_device *d);                         /* its canary freed (the context lives on) */
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
int cdv_cuda_stream_of(cdv_device *d, void *stream, cdv_err *e);
int cdv_cuda_mem_prefetch(cdv_device *d, void *ptr, size_t bytes, cdv_device *to, void *stream, cdv_err *e);
int cdv_cuda_mem_advise(cdv_device *d, void *ptr, size_t bytes, int advice, cdv_device *to, cdv_err *e);   /* cuStreamGetCtx: -1 unless a stream of d */

/* ---------------------------------------------------------------- CUDA modules on disk (cuda_cache.c) */
/* NOTE [cuda kernel cache]: one compile's place in the cache. cdv_cuda_cache_key fills it (and is -1 when the
 * cache is off, has no directory, or cannot know every input: then get misses and put does nothing). */
typedef struct cdv_cuda_entry {
  int on;
  unsigned char key[16];
  char dir[4096];               /* <cache>/cuda */
  char path[4200];              /* <dir>/<32 hex digits>.mod */
} cdv_cuda_entry;

int cdv_cuda_cache_key(const cdv_compile_req *req, cdv_cuda_entry *ce);
int cdv_cuda_cache_get(const cdv_cuda_entry *ce, const cdv_compile_req *req, cdv_image *out);  /* 0: a hit */
void cdv_cuda_cache_put(const cdv_cuda_entry *ce, const cdv_compile_req *req, const cdv_image *img);
enum { CDV_DISK_HITS, CDV_DISK_MISSES, CDV_DISK_WRITES, CDV_DISK_ERRORS, CDV_DISK_NSTATS };
/* the counters, the directory ("" when the cache is off), the last error's text and why the last compile did
 * not come from the disk ("" when none) */
void cdv_cuda_cache_stats(long out[CDV_DISK_NSTATS], char *dir, size_t ndir, char *last, size_t nlast, char *miss,
                          size_t nmiss);
int cdv_cuda_cache_selftest(const char *dir, char *why, size_t n);   /* cd._selftest.disk_cache */
void cdv_cpu_cache_dir_used(char *out, size_t n);   /* the cpu kernel cache's directory, "" before a compile */
void cdv_cache_refusal(char *out, size_t n);        /* NOTE [cache trust]: the last directory refused, "" if none */
int cdv_cache_trust_selftest(const char *dir, char *why, size_t n);   /* cd._selftest.cache_trust */

/* ---------------------------------------------------------------- loader (loader.c) */
int cdv_cuda_load(void);                 /* 0 when libcuda is open and cuInit succeeded */
const char *cdv_cuda_why(void);          /* why it is not: every name that was tried */
int cdv_nvrtc_load(void);
const char *cdv_nvrtc_why(void);
const char *cdv_nvrtc_file(void);        /* the file NVRTC was loaded from (loads it); "" when it cannot be */

/* ---------------------------------------------------------------- device registry (device.c) */
int cdv_device_count_all(void);              /* registry size (cpu + CUDA devices + mapped) */
cdv_device *cdv_device_at(int index);
cdv_device *cdv_cpu(void);
size_t cdv_cpu_available(void);   /* backend_cpu.c: host memory available now (MemAvailable), in bytes */
cdv_device *cdv_device_add(const cdv_device *proto);      /* a mapped context; NULL when full */
int cdv_cubin_supported(int arch);                       /* NVRTC can emit cubin for sm_<arch> */
int cdv_cuda_count(void);                    /* CUDA devices (0 without a driver) */

/* per-lua_State state (registry userdata): default device, current streams, embedding options */
typedef struct cdv_stream cdv_stream;
#define CDV_MAXDEV 64
#define CDV_BLOCK_SLOTS 32
typedef struct cdv_held_block {
  cdv_device *dev;
  unsigned generation;                       /* the device's when the block was freed */
  void *ptr;
  size_t bytes;                              /* its size class */
  void *stream;                              /* the stream its free was ordered on */
} cdv_held_block;
typedef struct cdv_state {
  int default_device;                        /* registry index; -1 until first needed */
  cdv_stream *cur_stream[CDV_MAXDEV];        /* current stream per device (anchored in the registry) */
  size_t gc_pressure;                        /* device bytes allocated since the last GC step */
  int sandbox;
  size_t quota, quota_used;                  /* device-memory quota for the state (0 = none) */
  int launch_blocking;                       /* CUDA_LAUNCH_BLOCKING=1 */
  int interruptible;                         /* NOTE [interruptible waits] (embed.c) */
  /* NOTE [launch keys]: the launch configuration's key names, interned in this state (anchored in the
   * registry). Lua interns short strings, so a key read from a config table is one of these exactly when
   * its text pointer is: the launch path compares pointers, not text. */
  const char *key_grid, *key_block, *key_dim, *key_shared, *key_stream, *key_device, *key_cooperative;
  /* NOTE [block cache] (memory.c): device blocks this state freed, kept for reuse, oldest first */
  int nheld;
  int closing;                               /* the state is closing: freed blocks go straight back */
  cdv_held_block held[CDV_BLOCK_SLOTS];
  /* NOTE [state record] (cudadev.c): the record is C memory, found by the state's registry table */
  const void *reg;                           /* lua_topointer(L, LUA_REGISTRYINDEX): the state's identity */
  void *anchor;                              /* the registry's userdata that finds it (NULL once released) */
  int refs;                                  /* the state itself, each block it owns, each Kernel */
  int released;                              /* its state closed: no longer found by reg */
  size_t max_arrays, live_arrays;            /* NOTE [state limits]: allocations the state may hold at once */
  char **allowed_options;                    /* cudadev_options.allowed_compile_options (NULL: any) */
  char **include_dirs;                       /* cudadev_options.include_dirs, resolved (NULL: the toolkit's) */
} cdv_state;

#define CDV_DEFAULT_MAX_ARRAYS ((size_t)1 << 20)   /* NOTE [state limits]: cudadev_options.max_arrays 0 */
cdv_state *cdv_get_state(lua_State *L);
/* The record without creating one, for finalizers (never raises; NULL when there is none) */
cdv_state *cdv_peek_state(lua_State *L);
void cdv_state_ref(cdv_state *st);
void cdv_state_unref(cdv_state *st);          /* the last reference frees the record of a closed state */
/* NOTE [objects made in finalizers]: called on each new userdata that holds a resource, after its metatable is set
 * and before the resource is acquired (it raises once the state is closing) */
void cdv_track_late(lua_State *L, int idx);

/* NOTE [stale release]: a reset of a CUDA device destroys its context, and with it the memory, streams,
 * events, modules and graphs made before: releasing such a stale object must not call the driver on a dead
 * handle. The cpu device's reset destroys nothing, so its stale objects still give their resources back.
 * A sticky fault poisons the context: nothing is given back until a reset. */
static inline int cdv_still_owned(cdv_device *d, unsigned generation) {
  return !d->sticky && (generation == d->generation || !d->be->reset_frees) &&
         (d->canary == 0 || cdv_cuda_context_alive(d));
}

/* ---------------------------------------------------------------- Lua types */
#define CDV_DEVICE "cudadev.Device"
#define CDV_STREAM "cudadev.Stream"
#define CDV_EVENT  "cudadev.Event"
#define CDV_ARRAY  "cudadev.Array"
#define CDV_MODULE "cudadev.Module"
#define CDV_KERNEL "cudadev.Kernel"
#define CDV_GRAPH  "cudadev.Graph"
#define CDV_LAUNCH_CONFIG "cudadev.LaunchConfig"
#define CDV_ERROR  "cudadev.Error"

struct cdv_stream {
  uint64_t magic;         /* CDV_STREAM_MAGIC (NOTE [magic]) */
  cdv_device *dev;
  void *handle;           /* backend stream; NULL = the device's default stream */
  unsigned generation;
  int priority, owned;    /* owned: destroyed with the userdata */
};

typedef struct cdv_event {
  uint64_t magic;         /* CDV_EVENT_MAGIC (NOTE [magic]) */
  cdv_device *dev;
  void *handle;
  unsigned generation;
  int timing;
} cdv_event;

/* NOTE [array memory]: an allocation is a refcounted block shared by an array and its views, so a view
 * keeps memory alive after its base is freed or collected. The block remembers the last stream that used
 * it, so that a free is ordered after the work queued on that stream. */
typedef struct cdv_block {
  int refs;
  int kind;               /* CDV_MEM_* */
  cdv_device *dev;        /* where the memory lives (cpu for host memory) */
  void *ptr;
  size_t bytes;
  unsigned generation;
  cdv_device *last_dev;   /* the device of the last stream that used the block */
  void *last_stream;      /* that stream's handle (NULL: default) */
  void (*release)(void *ud, void *ptr);   /* memory owned by a host (embedding); NULL when ours */
  void *release_ud;
  int borrowed;           /* host memory we must not free */
  cdv_state *quota;       /* the state whose quota counts the block (NULL: none); NOTE [state limits] */
  size_t charged;         /* what the quota counts for it: what the allocation really holds (cdv_footprint) */
  cdv_state *owner;       /* the state that allocated it, whose cache keeps it when freed (NOTE [block cache]) */
} cdv_block;

#define CDV_MAXDIM 8
/* NOTE [magic]: the hot paths recognise their userdata by a tag in the first field, which is cheaper than
 * a metatable lookup and also refuses a userdata that was given another type's metatable with the debug
 * library (which would otherwise be read as the wrong struct). */
#define CDV_ARRAY_MAGIC 0x63647641727261ULL    /* "cdvArra" */
#define CDV_KERNEL_MAGIC 0x6364764b65726eULL   /* "cdvKern" */
#define CDV_STREAM_MAGIC 0x63647653747265ULL   /* "cdvStre" */
#define CDV_EVENT_MAGIC 0x63647645766e74ULL    /* "cdvEvnt" */
#define CDV_DEVICE_MAGIC 0x63647644657669ULL   /* "cdvDevi" */
#define CDV_MODULE_MAGIC 0x6364764d6f6475ULL   /* "cdvModu" */
#define CDV_GRAPH_MAGIC 0x63647647726170ULL    /* "cdvGrap" */
#define CDV_SCOPE_MAGIC 0x63647653636f70ULL    /* "cdvScop"; + 1 for access scopes (peer.c) */
#define CDV_LCFG_MAGIC 0x6364764c436667ULL     /* "cdvLCfg" */

/* luaL_setmetatable, safe when a script (with the debug library) put something else than a table at the type's
 * name in the registry: the value then gets no metatable (no methods, no finalizer), never a bad pointer */
static inline void cdv_setmetatable(lua_State *L, const char *tname) {
  if (luaL_getmetatable(L, tname) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_pushnil(L);
  }
  lua_setmetatable(L, -2);
}
#define luaL_setmetatable(L, tname) cdv_setmetatable((L), (tname))

/* the full userdata at idx when it is at least size bytes and starts with magic, else NULL */
static inline void *cdv_test_magic(lua_State *L, int idx, size_t size, uint64_t magic) {
  /* two API calls, not three: lua_touserdata is NULL for what is not a userdata, and a light userdata's raw
   * length is 0, so only a full userdata of at least `size` bytes has its tag read */
  void *p = lua_touserdata(L, idx);
  if (p == NULL || lua_rawlen(L, idx) < size) return NULL;
  return *(const uint64_t *)p == magic ? p : NULL;
}

/* NOTE [magic] + NOTE [checked values]: every cudadev userdata starts with its type's tag. A checked
 * value comes with a `problem` function that returns NULL and the value when the value at idx is usable,
 * else pushes and returns why not; the caller words it as an argument (luaL_argerror), an option ("bad
 * option 'stream' to 'zeros' (why)") or a launch configuration key, so every error names what the user
 * wrote, never a stack slot. */
const char *cdv_udata_problem(lua_State *L, int idx, const char *tname, uint64_t magic, size_t size, void **out);
void *cdv_check_udata(lua_State *L, int arg, const char *tname, uint64_t magic, size_t size);
int cdv_push_method(lua_State *L);                               /* NOTE [method lookup] */
void cdv_set_index(lua_State *L, int mt, lua_CFunction index);
const char *cdv_typename(lua_State *L, int idx);    /* __name of its metatable, else the basic type */
int cdv_opt_error(lua_State *L, const char *key, const char *fname, const char *why);   /* raises */
int cdv_self_error(lua_State *L, int arg, const char *why);      /* raises; NOTE [self errors] */

typedef struct cdv_array {
  uint64_t magic;         /* CDV_ARRAY_MAGIC (NOTE [magic]) */
  cdv_block *block;       /* NULL when freed */
  char *data;             /* first element (block->ptr + offset) */
  cdv_dtype dtype;
  int ndim;
  int64_t shape[CDV_MAXDIM];
  int64_t size;           /* elements */
} cdv_array;

typedef struct cdv_module cdv_module;     /* module.c */

/* device.c */
int cdv_device_open(lua_State *L);
void cdv_push_device(lua_State *L, cdv_device *d);
cdv_device *cdv_check_device(lua_State *L, int arg);        /* any device spec */
cdv_device *cdv_opt_device(lua_State *L, int arg);          /* nil -> default device */
const char *cdv_device_problem(lua_State *L, int idx, cdv_device **out);   /* NOTE [checked values] */
cdv_device *cdv_opt_device_field(lua_State *L, int t, const char *fname);  /* option 'device' of table t, or NULL */
cdv_device *cdv_default_device(lua_State *L);
cdv_device *cdv_state_device(lua_State *L, cdv_state *st);   /* the same, st being L's */
int cdv_device_new(lua_State *L);                          /* cd.device(spec) */
void cdv_device_use(lua_State *L, cdv_device *d);           /* activate, raise on failure/sticky */
void cdv_device_check(lua_State *L, cdv_device *d);         /* the same checks, no activation */

/* stream.c */
int cdv_stream_open(lua_State *L);
cdv_stream *cdv_check_stream(lua_State *L, int arg);
cdv_stream *cdv_new_stream(lua_State *L, cdv_device *d);   /* pushed; handle NULL, not owned */
const char *cdv_stream_problem(lua_State *L, int idx, cdv_stream **out);   /* NOTE [checked values] */
const char *cdv_stream_unusable(const cdv_stream *s);   /* why a Stream can no longer be used, or NULL */
cdv_stream *cdv_opt_stream_field(lua_State *L, int t, const char *fname);  /* option 'stream' of table t, or NULL */
cdv_stream *cdv_current_stream(lua_State *L, cdv_device *d);  /* never NULL */
cdv_stream *cdv_state_stream(lua_State *L, cdv_state *st, cdv_device *d);   /* the same, st being L's */
void cdv_push_current_stream(lua_State *L, cdv_device *d);
/* NOTE [stream lifetime]: arrays remember the last stream that used them by its raw handle; a stream
 * is synchronised before it is destroyed, and these tell whether a remembered handle still names a live
 * stream (a dead one has no pending work, so the default stream stands in for it). */
void cdv_stream_register(void *handle);
void cdv_stream_unregister(void *handle);
int cdv_stream_alive(void *handle);
void *cdv_stream_for(lua_State *L, cdv_device *d, cdv_stream *s); /* handle, checking s is on d */

/* event.c */
int cdv_event_open(lua_State *L);
cdv_event *cdv_check_event(lua_State *L, int arg);
int cdv_event_new(lua_State *L);                            /* cd.event([device] [, opts]) */

/* array.c */
int cdv_array_open(lua_State *L);
cdv_array *cdv_check_array(lua_State *L, int arg);          /* live (not freed, not stale) */
cdv_array *cdv_push_array(lua_State *L, cdv_device *d, cdv_dtype t, int ndim, const int64_t *shape,
                          int kind, cdv_stream *s);
int cdv_check_dtype(lua_State *L, int arg, cdv_dtype def);
int cdv_check_shape(lua_State *L, int arg, int64_t *shape, cdv_dtype t);   /* integer or table; returns ndim */
void cdv_block_used(cdv_block *b, cdv_device *d, void *stream);
/* for references held outside an Array (a DLPack export: NOTE [dlpack ownership]): wait until host code may touch
 * b, drop one reference (never raise) */
int cdv_block_host_wait(cdv_block *b, cdv_err *e);
int cdv_block_unref(cdv_block *b, cdv_err *e);
/* memory the host owns as an Array (embed.c): borrowed when release is NULL, else release(ud, ptr) frees it */
cdv_array *cdv_push_host_array(lua_State *L, cdv_device *d, cdv_dtype t, int ndim, const int64_t *shape, void *ptr,
                               void (*release)(void *ud, void *ptr), void *ud);
uint16_t cdv_f32_to_f16(float f);
float cdv_f16_to_f32(uint16_t h);

/* module.c */
int cdv_module_open(lua_State *L);

/* dlpack.c: cd.from_dlpack, a:__dlpack, a:__dlpack_device (NOTE [dlpack ownership]) */
int cdv_dlpack_open(lua_State *L);
void cdv_array_add_methods(lua_State *L, const luaL_Reg *methods);   /* more Array methods (dlpack.c, managed.c) */

/* managed.c: NOTE [managed memory]: a:prefetch, a:advise; the `managed` option of the constructors (raises on
 * misuse); host access to a managed block waits for its device */
int cdv_managed_open(lua_State *L);
int cdv_managed_option(lua_State *L, int arg, int pinned, const char *fname);
int cdv_managed_wait(cdv_block *b, cdv_err *e);
/* host code may read and write the block's memory directly (after array.c's host_wait) */
#define cdv_host_reachable(b) ((b)->dev->be->host_memory || (b)->kind == CDV_MEM_MANAGED)

/* graph.c */
int cdv_graph_open(lua_State *L);

/* profile.c: cd.profile_start/stop, cd.profiling, NVTX ranges (NOTE [profiling no-ops]) */
int cdv_profile_open(lua_State *L);

/* launch_config.c: a launch configuration, as a table or a LaunchConfig made once (NOTE [launch configs]).
 * What it says is checked here; what depends on the kernel (its device's limits, the block size chosen for
 * `dim`) is checked at each launch, in module.c. */
typedef struct cdv_launch_config {
  uint64_t magic;            /* CDV_LCFG_MAGIC in a LaunchConfig (NOTE [magic]) */
  uint64_t grid[3], block[3], dim[3];
  int64_t shared;
  int has_dim, has_grid, has_block;
  int cooperative;           /* cooperative = true: every block resident at once (NOTE [cooperative launch]) */
  cdv_stream *stream;        /* NULL: the device's current stream; a LaunchConfig's user value keeps it alive */
  cdv_device *device;        /* NULL: the kernel's */
  uint64_t memo_kernel;      /* a LaunchConfig: the serial of the last kernel it was resolved for, and the */
  unsigned memo_grid[3], memo_block[3];   /* geometry that gave (module.c) */
} cdv_launch_config;
/* The configuration at idx: a LaunchConfig as it is, or a table parsed into *tmp. Errors read "bad launch
 * configuration for 'kname' (...)"; max_shared is the kernel's device limit on dynamic shared memory. */
const cdv_launch_config *cdv_get_launch_config(lua_State *L, int idx, const cdv_state *st, const char *kname,
                                               size_t max_shared, cdv_launch_config *tmp);
int cdv_launch_config_error(lua_State *L, const char *kname, const char *msg);
int cdv_launch_config_open(lua_State *L);

/* memory.c */
int cdv_memory_open(lua_State *L);
void cdv_mem_account(cdv_device *d, int64_t bytes, int blocks);   /* array.c reports allocs and frees */
/* NOTE [block cache]: device blocks a state freed, kept for reuse on the same stream. class rounds a size up to
 * the cache's classes; take returns a kept block of d of that class freed on `stream` (NULL: none); put keeps
 * a freed block (giving the oldest back when full); release gives back those of d (NULL: every device's) freed
 * on one stream, or all of them (freed, or forgotten when their context is gone). */
size_t cdv_block_class(size_t bytes);
void *cdv_block_take(cdv_state *st, cdv_device *d, size_t bytes, void *stream);
int cdv_block_put(cdv_state *st, cdv_device *d, void *ptr, size_t bytes, void *stream, cdv_err *e);
int cdv_block_release(cdv_state *st, cdv_device *d, void *stream, int all, cdv_err *e);
/* NOTE [pinned pool]: page-locked host memory of d (the cpu device) by size class, reused instead of pinned
 * and unpinned per allocation. alloc calls d's mem_alloc(CDV_MEM_PINNED) on a miss (after giving the cached
 * blocks back when that fails); free keeps the block (its memory must be idle); trim gives the cached blocks
 * of d (NULL: of every device) back to the backend. Thread-safe: every lua_State of the process shares it. */
int cdv_pinned_alloc(cdv_device *d, size_t bytes, void **ptr, cdv_err *e);
void cdv_pinned_free(cdv_device *d, void *ptr, size_t bytes);
int cdv_pinned_trim(cdv_device *d, cdv_err *e);

/* staging.c: NOTE [staged copies] */
/* The piece size of a copy of n bytes by device d between pageable host memory and memory d's copies reach
 * directly, or 0 when the copy goes direct (small, or d's copies are host memcpys). */
size_t cdv_stage_piece(const cdv_device *d, size_t n);
/* Complete, synchronous copies of n bytes on `stream` of d, in pieces through pinned buffers: from pageable
 * src to dst (on dst_dev), and from src (on src_dev) to pageable dst. Raise on failure, leaving nothing behind. */
void cdv_stage_h2d(lua_State *L, cdv_device *d, void *stream, char *dst, cdv_device *dst_dev, const char *src,
                   size_t n, size_t piece);
void cdv_stage_d2h(lua_State *L, cdv_device *d, void *stream, char *dst, const char *src, cdv_device *src_dev,
                   size_t n, size_t piece);
/* The same H2D copy filled by the caller (a Lua table): open pushes a to-be-closed stage; next waits for a free
 * buffer and returns it with the length of the next piece (0: all sent); send queues its first len bytes;
 * finish waits for the last piece and pops the stage. An error in between closes the stage: it waits for the
 * pieces in flight and gives the buffers back. */
typedef struct cdv_stage cdv_stage;
cdv_stage *cdv_stage_open(lua_State *L, cdv_device *d, void *stream, char *dst, cdv_device *dst_dev, size_t n,
                          size_t piece);
char *cdv_stage_next(lua_State *L, cdv_stage *st, size_t *len);
void cdv_stage_send(lua_State *L, cdv_stage *st, size_t len);
void cdv_stage_finish(lua_State *L, cdv_stage *st);
/* memcpy, split over a few threads when n is large (NOTE [staged copies]) */
void cdv_host_copy(void *dst, const void *src, size_t n);

/* NOTE [test hooks]: process-wide settings for the specs and the benchmark (cd._hooks, cudadev.c), first read
 * from the environment: staging_chunk (CUDADEV_STAGING_CHUNK, bytes; 0: the sizes of NOTE [staged copies]) stages
 * every copy between pageable host memory and a device, the cpu device too, in pieces of that size (rounded down
 * to whole 8-byte words); staging_threads (CUDADEV_STAGING_THREADS; 0: the default) sets the threads of
 * cdv_host_copy; fake_pinned (CUDADEV_FAKE_PINNED=1) makes pinned=true without a CUDA driver give plain memory
 * from the pinned pool, reported as pinned. */
typedef struct cdv_hooks {
  size_t staging_chunk;
  int staging_threads;
  int fake_pinned;
} cdv_hooks;
cdv_hooks cdv_get_hooks(void);

/* embed.c: the embedding API's internal side */
/* NOTE [state limits]: raises when `bytes` more would exceed the state's quota (after a collection); returns
 * the state to charge (block->quota; the caller adds to quota_used), or NULL when there is no quota. */
cdv_state *cdv_quota_check(lua_State *L, cdv_state *st, cdv_device *d, size_t bytes);
/* what an allocation of `bytes` of that kind on d really holds: its class, whole pages on the cpu device */
size_t cdv_footprint(const cdv_device *d, int kind, size_t bytes);
size_t cdv_pinned_class(size_t bytes);        /* memory.c: NOTE [pinned pool]'s class of a request (> 0) */
void cdv_check_compile_options(lua_State *L, int n, const char *const *opts);   /* the allow-list; raises */
/* NOTE [sandboxed includes]: in a sandbox, refuses what NVRTC would read outside the allowed directories */
void cdv_check_includes(lua_State *L, const cdv_compile_req *req);
void cdv_free_state_options(cdv_state *st);   /* the lists of the options (the record's end) */
void cdv_protect_metatables(lua_State *L);    /* NOTE [protected metatables]: in a sandbox */
int cdv_sandbox_run(lua_State *L);            /* cd._sandbox(script [, options]) */
/* NOTE [interruptible waits]: synchronize on a device / stream / event; in an interruptible state they
 * poll and raise "interrupted!" on cudadev_interrupt(). -1 with *e on a backend failure. */
int cdv_wait_device(lua_State *L, cdv_device *d, cdv_err *e);
int cdv_wait_stream(lua_State *L, cdv_device *d, void *stream, cdv_err *e);
int cdv_wait_event(lua_State *L, cdv_device *d, void *event, cdv_err *e);

/* peer.c */
int cdv_peer_open(lua_State *L);
int cdv_peer_reachable(lua_State *L, cdv_device *target, cdv_device *peer, int from_pool); /* NOTE [peer access] */
/* map_cuda_device's work (NULL ctx: the current one); alias_arg: its argument position for errors, 0 from C */
cdv_device *cdv_map_context(lua_State *L, const char *alias, int alias_arg, void *ctx);

/* error.c */
int cdv_error_open(lua_State *L);
int cdv_raise(lua_State *L, cdv_device *d, cdv_err *e);     /* raise a cudadev.Error (never returns) */
void cdv_push_error(lua_State *L, cdv_device *d, cdv_err *e); /* the Error value; takes e->log */
int cdv_raise_sticky(lua_State *L, cdv_device *d);          /* NOTE [sticky faults] */
#define cdv_try(L, d, call) do { cdv_err e_; if ((call) != 0) cdv_raise((L), (d), &e_); } while (0)
void cdv_warn(lua_State *L, const char *fmt, ...);          /* lua_warning, never raises */
void cdv_warn_release(lua_State *L, const char *what, cdv_device *d, const cdv_err *e);

/* NOTE [live objects]: counts of objects holding a resource, process-wide, for cd._live() and for the
 * specs that check every spec returns them to where they started. */
enum { CDV_LIVE_ARRAY, CDV_LIVE_BLOCK, CDV_LIVE_STREAM, CDV_LIVE_EVENT, CDV_LIVE_MODULE, CDV_LIVE_KERNEL,
       CDV_LIVE_GRAPH, CDV_LIVE_N };
extern long cdv_live[CDV_LIVE_N];
#define cdv_live_add(kind, n) __atomic_add_fetch(&cdv_live[kind], (n), __ATOMIC_RELAXED)

/* options tables: reject unknown keys (`{blok=256}` is an error) */
void cdv_check_options(lua_State *L, int arg, const char *const *known, const char *fname);

/* args.c: argument helpers shared by the Lua types */
int64_t cdv_check_count(lua_State *L, int arg, const char *what);  /* integer >= 0 */
const char *cdv_fmt_bytes(char *buf, size_t n, double bytes);       /* "79.1 GiB" */
int cdv_opt_field(lua_State *L, int t, const char *k);
int cdv_has_nul(lua_State *L, int idx);   /* the string at idx holds a NUL byte (NOTE [C strings]) */
const char *cdv_check_cstring(lua_State *L, int arg, const char *what);   /* "<what> contains a NUL byte" */
/* NOTE [scoped calls]: calls the function below nargs arguments, the scope to restore being the to-be-closed
 * slot 1; returns the number of results (all the stack above slot 1) */
int cdv_call_scoped(lua_State *L, int nargs);  /* pushes t[k] when t is a table; type or LUA_TNIL */
int cdv_check_boolean_field(lua_State *L, int t, const char *k, int def, const char *fname);

#endif
