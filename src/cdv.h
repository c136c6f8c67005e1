/*
 * cdv.h: cudadev's internal header. Every C file of the module includes it; nothing here is exported.
 *
 * The layers (NOTE [layers] in backend.h; doc/DESIGN.md):
 *   loader.c      raw symbols of libcuda and NVRTC, opened lazily with dlopen (syms.h lists them)
 *   backend.h     the operations a device kind implements; backend_cuda.c and backend_cpu.c fill it
 *   device.c ...  one file per Lua type, calling the backend of the object's device (this header)
 */
#ifndef CDV_H
#define CDV_H

#include <stddef.h>
#include <stdint.h>
#include <lua.h>
#include <lauxlib.h>

#include "backend.h" /* the contract below the Lua types: NOTE [layers] */
#ifdef CDV_LAYER_BACKEND
#error "cdv.h is the front end's header: a backend file includes backend.h (NOTE [layers])"
#endif

#define CDV_VERSION "0.1.0"

/* ---------------------------------------------------------------- device registry (device.c) */
int cdv_device_count_all(void); /* registry size (cpu + CUDA devices + mapped) */
cdv_device *cdv_device_at(int index);
cdv_device *cdv_cpu(void);
cdv_device *cdv_device_add(const cdv_device *proto); /* a mapped context; NULL when full */
/* (see NOTE [layers]) the registry is the one front-end place that names backends: the backend that compiles for an
 * sm_XX architecture with no device to load the code on (cd.compile{arch=}) */
const cdv_backend *cdv_arch_backend(void);
int cdv_cuda_count(void); /* CUDA devices (0 without a driver) */

/* per-lua_State state (registry userdata): default device, current streams, embedding options */
typedef struct cdv_stream cdv_stream;
#define CDV_MAXDEV 64
#define CDV_BLOCK_SLOTS 32
typedef struct cdv_held_block {
  cdv_device *dev;
  unsigned generation; /* the device's when the block was freed */
  void *ptr;
  size_t bytes; /* its size class */
  void *stream; /* the stream its free was ordered on */
} cdv_held_block;
typedef struct cdv_state {
  int default_device; /* registry index; -1 until first needed */
  cdv_stream *cur_stream[CDV_MAXDEV]; /* current stream per device (anchored in the registry) */
  /* NOTE [current stream cache]: what a launch needs of the current stream, copied out of the Stream when the
   * slot is set (cdv_set_current_slot) and cleared by the Stream's release, which compares addresses only. The
   * launch fast path reads these and never follows cur_stream: a script with the debug library can nil a
   * metatable's __gc, and then a collected Stream is freed without telling the slot (its handle stays valid:
   * a stream whose __gc never runs is never destroyed). */
  void *cur_handle[CDV_MAXDEV];
  unsigned cur_generation[CDV_MAXDEV];
  unsigned char cur_set[CDV_MAXDEV];
  /* NOTE [collector pacing] (memory.c): this state's bytes of arrays, and when the collector runs next */
  size_t gc_live; /* bytes of the state's live blocks (dropped arrays included until collected) */
  size_t gc_debt; /* bytes allocated, net of frees, since the last step */
  size_t gc_since_full; /* the same since the last full collection */
  size_t gc_step; /* gc_debt at which the next step runs (0: not yet set) */
  size_t gc_base; /* gc_live after the last full collection */
  size_t gc_full; /* gc_live past which the next one runs */
  int gc_held_over; /* a collection at the threshold left the device over it: wait a step before the next */
  int sandbox;
  size_t quota, quota_used; /* device-memory quota for the state (0 = none) */
  int launch_blocking; /* CUDA_LAUNCH_BLOCKING=1 */
  int interruptible; /* NOTE [interruptible waits] (embed.c) */
  int coscopes; /* a coroutine opened a scope: NOTE [coroutine scopes] (async.c) */
  /* NOTE [launch keys]: the launch configuration's key names, interned in this state (anchored in the
   * registry), as lua_topointer gives them. Lua interns short strings, so a key read from a config table is
   * one of these exactly when its string object is: the launch path compares one pointer (lua_topointer,
   * about 15 instructions) where the type and the text pointer cost 41 a key. */
  const void *key_grid, *key_block, *key_dim, *key_shared, *key_stream, *key_device, *key_cooperative, *key_timeout;
  /* NOTE [block cache] (memory.c): device blocks this state freed, kept for reuse, oldest first */
  int nheld;
  int closing; /* the state is closing: freed blocks go straight back */
  cdv_held_block held[CDV_BLOCK_SLOTS];
  /* NOTE [state record] (cudadev.c): the record is C memory, found by the state's registry table */
  const void *reg; /* lua_topointer(L, LUA_REGISTRYINDEX): the state's identity */
  void *anchor; /* the registry's userdata that finds it (NULL once released) */
  int refs; /* the state itself, each block it owns, each Kernel */
  int released; /* its state closed: no longer found by reg */
  size_t max_arrays, live_arrays; /* (see NOTE [state limits]) allocations the state may hold at once */
  char **allowed_options; /* cudadev_options.allowed_compile_options (NULL: any) */
  char **include_dirs; /* cudadev_options.include_dirs, resolved (NULL: the toolkit's) */
} cdv_state;

#define CDV_DEFAULT_MAX_ARRAYS ((size_t)1 << 20) /* (see NOTE [state limits]) cudadev_options.max_arrays 0 */
cdv_state *cdv_get_state(lua_State *L);
/* The record without creating one, for finalizers (never raises; NULL when there is none) */
cdv_state *cdv_peek_state(lua_State *L);
void cdv_state_ref(cdv_state *st);
void cdv_state_unref(cdv_state *st); /* the last reference frees the record of a closed state */
/* (see NOTE [objects made in finalizers]) called on each new userdata that holds a resource, after its metatable is set
 * and before the resource is acquired (it raises once the state is closing) */
void cdv_track_late(lua_State *L, int idx);
void *cdv_registry_udata(lua_State *L, const char *key, size_t size, uint64_t magic, lua_CFunction gc,
                         const char *name); /* cudadev.c */

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
#define CDV_EVENT "cudadev.Event"
#define CDV_ARRAY "cudadev.Array"
#define CDV_MODULE "cudadev.Module"
#define CDV_KERNEL "cudadev.Kernel"
#define CDV_GRAPH "cudadev.Graph"
#define CDV_LAUNCH_CONFIG "cudadev.LaunchConfig"
#define CDV_ERROR "cudadev.Error"
#define CDV_COMM "cudadev.Comm"

struct cdv_stream {
  uint64_t magic; /* CDV_STREAM_MAGIC (NOTE [magic]) */
  cdv_device *dev;
  void *handle; /* backend stream; NULL = the device's default stream */
  unsigned generation;
  int priority, owned; /* owned: destroyed with the userdata */
};

typedef struct cdv_event {
  uint64_t magic; /* CDV_EVENT_MAGIC (NOTE [magic]) */
  cdv_device *dev;
  void *handle;
  unsigned generation;
  int timing;
  int ipc; /* (see NOTE [ipc]) 1 made with ipc = true (exportable), 2 opened from another process */
} cdv_event;

/* NOTE [array memory]: an allocation is a refcounted block shared by an array and its views, so a view
 * keeps memory alive after its base is freed or collected. The block remembers the last stream that used
 * it, so that a free is ordered after the work queued on that stream. */
typedef struct cdv_block {
  int refs;
  int kind; /* CDV_MEM_* */
  cdv_device *dev; /* where the memory lives (cpu for host memory) */
  void *ptr;
  size_t bytes;
  unsigned generation;
  cdv_device *last_dev; /* the device of the last stream that used the block */
  void *last_stream; /* that stream's handle (NULL: default) */
  void (*release)(void *ud, void *ptr); /* memory owned by a host (embedding); NULL when ours */
  void *release_ud;
  int borrowed; /* host memory we must not free */
  cdv_state *quota; /* the state whose quota counts the block (NULL: none); NOTE [state limits] */
  size_t charged; /* what the quota counts for it: what the allocation really holds (cdv_footprint) */
  cdv_state *owner; /* the state that allocated it, whose cache keeps it when freed (NOTE [block cache]) */
  size_t slack; /* bytes of canary after its last byte (NOTE [tail canary]; 0: none) */
} cdv_block;

#define CDV_MAXDIM 8
/* NOTE [magic]: the hot paths recognise their userdata by a tag in the first field, which is cheaper than
 * a metatable lookup and also refuses a userdata that was given another type's metatable with the debug
 * library (which would otherwise be read as the wrong struct). */
#define CDV_ARRAY_MAGIC 0x63647641727261ULL /* "cdvArra" */
#define CDV_KERNEL_MAGIC 0x6364764b65726eULL /* "cdvKern" */
#define CDV_STREAM_MAGIC 0x63647653747265ULL /* "cdvStre" */
#define CDV_EVENT_MAGIC 0x63647645766e74ULL /* "cdvEvnt" */
#define CDV_DEVICE_MAGIC 0x63647644657669ULL /* "cdvDevi" */
#define CDV_MODULE_MAGIC 0x6364764d6f6475ULL /* "cdvModu" */
#define CDV_GRAPH_MAGIC 0x63647647726170ULL /* "cdvGrap" */
#define CDV_SCOPE_MAGIC 0x63647653636f70ULL /* "cdvScop"; + 1 for access scopes (peer.c) */
#define CDV_LCFG_MAGIC 0x6364764c436667ULL /* "cdvLCfg" */
#define CDV_COMM_MAGIC 0x6364764e63636cULL /* "cdvNccl" */

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

/* (see NOTE [magic] and NOTE [checked values]) every cudadev userdata starts with its type's tag. A checked
 * value comes with a `problem` function that returns NULL and the value when the value at idx is usable,
 * else pushes and returns why not; the caller words it as an argument (luaL_argerror), an option ("bad
 * option 'stream' to 'zeros' (why)") or a launch configuration key, so every error names what the user
 * wrote, never a stack slot. */
const char *cdv_udata_problem(lua_State *L, int idx, const char *tname, uint64_t magic, size_t size, void **out);
void *cdv_check_udata(lua_State *L, int arg, const char *tname, uint64_t magic, size_t size);
int cdv_push_method(lua_State *L); /* NOTE [method lookup] */
void cdv_set_index(lua_State *L, int mt, lua_CFunction index);
/* (see NOTE [class registration]) the metatable tname (left on the stack) with meta, and methods behind index */
void cdv_new_class(lua_State *L, const char *tname, const luaL_Reg *meta, const luaL_Reg *methods, lua_CFunction index);
const char *cdv_typename(lua_State *L, int idx); /* __name of its metatable, else the basic type */
const char *cdv_value_text(lua_State *L, int idx); /* luaL_tolstring, without addresses in a sandbox (pushed) */
int cdv_opt_error(lua_State *L, const char *key, const char *fname, const char *why); /* raises */
int cdv_self_error(lua_State *L, int arg, const char *why); /* raises; NOTE [self errors] */

typedef struct cdv_array {
  uint64_t magic; /* CDV_ARRAY_MAGIC (NOTE [magic]) */
  cdv_block *block; /* NULL when freed */
  char *data; /* element 0 (block->ptr + offset; a negative stride puts others before it) */
  cdv_dtype dtype;
  int ndim;
  int64_t shape[CDV_MAXDIM];
  int64_t size; /* elements */
  int64_t strides[CDV_MAXDIM]; /* in elements, may be negative or 0: NOTE [strided views] in array.c */
} cdv_array;
/* C order (row-major) with no gaps (see NOTE [strided views]); inline: every pointer argument of a launch asks */
static inline int cdv_array_contiguous(const cdv_array *a) {
  if (a->size == 0) return 1;
  int64_t want = 1;
  for (int i = a->ndim - 1; i >= 0; i--) {
    if (a->shape[i] != 1 && a->strides[i] != want) return 0;
    want *= a->shape[i];
  }
  return 1;
}

typedef struct cdv_module cdv_module; /* module.c */

/* device.c */
int cdv_device_open(lua_State *L);
void cdv_push_device(lua_State *L, cdv_device *d);
cdv_device *cdv_check_device(lua_State *L, int arg); /* any device spec */
cdv_device *cdv_opt_device(lua_State *L, int arg); /* nil -> default device */
const char *cdv_device_problem(lua_State *L, int idx, cdv_device **out); /* NOTE [checked values] */
cdv_device *cdv_opt_device_field(lua_State *L, int t, const char *fname); /* option 'device' of table t, or NULL */
cdv_device *cdv_default_device(lua_State *L);
cdv_device *cdv_state_device(lua_State *L, cdv_state *st); /* the same, st being L's */
int cdv_device_new(lua_State *L); /* cd.device(spec) */
void cdv_device_use(lua_State *L, cdv_device *d); /* activate, raise on failure/sticky */
void cdv_device_check(lua_State *L, cdv_device *d); /* the same checks, no activation */

/* stream.c */
int cdv_stream_open(lua_State *L);
cdv_stream *cdv_check_stream(lua_State *L, int arg);
cdv_stream *cdv_new_stream(lua_State *L, cdv_device *d); /* pushed; handle NULL, not owned */
const char *cdv_stream_problem(lua_State *L, int idx, cdv_stream **out); /* NOTE [checked values] */
const char *cdv_stream_unusable(const cdv_stream *s); /* why a Stream can no longer be used, or NULL */
cdv_stream *cdv_opt_stream_field(lua_State *L, int t, const char *fname); /* option 'stream' of table t, or NULL */
cdv_stream *cdv_current_stream(lua_State *L, cdv_device *d); /* never NULL */
void cdv_set_current_slot(cdv_state *st, cdv_device *d, cdv_stream *s); /* NOTE [current stream cache] */
cdv_stream *cdv_state_stream(lua_State *L, cdv_state *st, cdv_device *d); /* the same, st being L's */
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
int cdv_event_new(lua_State *L); /* cd.event([device] [, opts]) */
cdv_event *cdv_new_event(lua_State *L); /* pushed, closed (no handle, dev NULL) until the caller fills it */

/* async.c: NOTE [coroutine scopes], NOTE [stream callbacks], s:await / e:await */
int cdv_async_open(lua_State *L);
/* pushes the scope record of the thread at idx (0: the running one; made when `create`) and returns 1; returns 0
 * and pushes nothing for the main thread, or when there is none and !create */
int cdv_coscope_push(lua_State *L, int idx, int create);
void cdv_callbacks_drain(lua_State *L); /* runs the callbacks whose work is done (never raises for theirs) */
int cdv_stream_add_callback(lua_State *L); /* s:add_callback(fn) */
int cdv_stream_await(lua_State *L); /* s:await() */
int cdv_event_await(lua_State *L); /* e:await() */

/* ipc.c: NOTE [ipc] */
int cdv_ipc_open(lua_State *L);
/* {ipc = true} of fname (cd.empty, zeros, ones, full): pushes the Array */
void cdv_ipc_push_array(lua_State *L, cdv_device *d, cdv_dtype t, int ndim, const int64_t *shape, const char *fname);
int cdv_event_ipc_handle(lua_State *L); /* e:ipc_handle() */
int cdv_array_ipc_handle(lua_State *L); /* a:ipc_handle() */

/* array.c */
int cdv_array_open(lua_State *L);
cdv_array *cdv_check_array(lua_State *L, int arg); /* live (not freed, not stale) */
void cdv_array_loops_open(lua_State *L); /* array_loops.c: NOTE [cpu loops] */
cdv_array *cdv_push_array(lua_State *L, cdv_device *d, cdv_dtype t, int ndim, const int64_t *shape, int kind,
                          cdv_stream *s);
int cdv_check_dtype(lua_State *L, int arg, cdv_dtype def);
int cdv_check_shape(lua_State *L, int arg, int64_t *shape, cdv_dtype t); /* integer or table; returns ndim */
void cdv_block_used(cdv_block *b, cdv_device *d, void *stream);
/* for references held outside an Array (a DLPack export: NOTE [dlpack ownership]): drop one reference (never
 * raises); cdv_host_wait waits until host code may touch the block */
int cdv_block_unref(cdv_block *b, cdv_err *e);
int cdv_host_wait(cdv_block *b, cdv_err *e); /* host memory: wait for the GPU stream that last used it */
/* memory the host owns as an Array (embed.c): borrowed when release is NULL, else release(ud, ptr) frees it */
cdv_array *cdv_push_host_array(lua_State *L, cdv_device *d, cdv_dtype t, int ndim, const int64_t *shape, void *ptr,
                               void (*release)(void *ud, void *ptr), void *ud);
char *cdv_array_host_data(lua_State *L, cdv_array *a); /* a in host memory: its elements, once idle */
/* (see NOTE [arrays inside their blocks]) a shape's element and byte counts: 0, or -1 when too large */
int cdv_shape_count(int ndim, const int64_t *shape, size_t itemsize, int64_t *count, size_t *bytes);
/* "float32 array of shape {...} is too large (...)" pushed when the shape is too large, else NULL */
const char *cdv_shape_problem(lua_State *L, cdv_dtype t, int ndim, const int64_t *shape);
uint16_t cdv_f32_to_f16(float f);
float cdv_f16_to_f32(uint16_t h);

/* module.c */
int cdv_module_open(lua_State *L);

/* dlpack.c: cd.from_dlpack, a:__dlpack, a:__dlpack_device (NOTE [dlpack ownership]) */
int cdv_dlpack_open(lua_State *L);
void cdv_array_add_methods(lua_State *L, const luaL_Reg *methods); /* more Array methods (dlpack.c, managed.c) */

/* managed.c: (see NOTE [managed memory]) a:prefetch, a:advise; the `managed` option of the constructors (raises on
 * misuse); host access to a managed block waits for its device */
int cdv_managed_open(lua_State *L);
int cdv_managed_option(lua_State *L, int arg, int pinned, const char *fname);
int cdv_managed_wait(cdv_block *b, cdv_err *e);
/* host code may read and write the block's memory directly (after array.c's host_wait) */
#define cdv_host_reachable(b) ((b)->dev->be->host_memory || (b)->kind == CDV_MEM_MANAGED)

/* mpi.c: cd._mpi, the C side of cd.mpi (lua/cudadev/mpi.lua); NOTE [mpi shim] in mpi_api.h */
int cdv_mpi_open(lua_State *L);

/* graph.c */
int cdv_graph_open(lua_State *L);

/* nccl.c: cd.nccl and cudadev.Comm */
int cdv_nccl_open(lua_State *L);
/* blas.c: cd.matmul, a:matmul (NOTE [host gemm], NOTE [cublas abi]) */
int cdv_blas_open(lua_State *L);
/* linalg_cpu.c: cd._linalg.cpu, LAPACKE for lua/cudadev/linalg.lua (NOTE [lapacke abi]) */
int cdv_linalg_cpu_open(lua_State *L);
#define CDV_LINALG_KEY "cudadev.linalg_routines" /* the registry's reference to cd._linalg */
/* linalg_cuda.c: cd._linalg.cuda, cuSOLVER and cuBLAS's batched LU for linalg.lua (NOTE [cusolver abi]) */
int cdv_linalg_cuda_open(lua_State *L);
/* blas.c: the state's cuBLAS handle of d (NOTE [cublas handles]); a failed cuBLAS status as *e */
struct cdv_cublas_context *cdv_blas_handle(lua_State *L, cdv_device *d);
int cdv_cublas_status(cdv_err *e, const char *api, int status);
int cdv_fft_open(lua_State *L); /* fft.c: getmetatable(a).__fft for cd.fft (fft.lua) */

/* profile.c: cd.profile_start/stop, cd.profiling, NVTX ranges (NOTE [profiling no-ops]) */
int cdv_profile_open(lua_State *L);

/* launch_config.c: a launch configuration, as a table or a LaunchConfig made once (NOTE [launch configs]).
 * What it says is checked here; what depends on the kernel (its device's limits, the block size chosen for
 * `dim`) is checked at each launch, in module.c. */
typedef struct cdv_launch_config {
  uint64_t magic; /* CDV_LCFG_MAGIC in a LaunchConfig (NOTE [magic]) */
  uint64_t grid[3], block[3], dim[3];
  int64_t shared;
  int has_dim, has_grid, has_block;
  int cooperative; /* cooperative = true: every block resident at once (NOTE [cooperative launch]) */
  cdv_stream *stream; /* NULL: the device's current stream; a LaunchConfig's user value keeps it alive */
  cdv_device *device; /* NULL: the kernel's */
  double timeout; /* seconds a contained cpu launch may run (0: none); -1 when not given (NOTE [launch limits]) */
  uint64_t memo_kernel; /* a LaunchConfig: the serial of the last kernel it was resolved for, and the */
  unsigned memo_grid[3], memo_block[3]; /* geometry that gave (module.c) */
} cdv_launch_config;
/* The configuration at idx: a LaunchConfig as it is, or a table parsed into *tmp. Errors read "bad launch
 * configuration for 'kname' (...)"; max_shared is the kernel's device limit on dynamic shared memory. */
const cdv_launch_config *cdv_get_launch_config(lua_State *L, int idx, const cdv_state *st, const char *kname,
                                               size_t max_shared, cdv_launch_config *tmp);
int cdv_launch_config_error(lua_State *L, const char *kname, const char *msg);
double cdv_seconds(lua_State *L, int idx, const char *key); /* seconds at idx, or -1 with a complaint pushed */
int cdv_launch_config_open(lua_State *L);

/* memory.c */
int cdv_memory_open(lua_State *L);
void cdv_mem_account(cdv_device *d, int64_t bytes, int blocks); /* array.c reports allocs and frees */
/* (see NOTE [collector pacing]) before an array of `bytes` on d is made: runs the collector when the state's
 * allocations call for it; gc_account counts a block of the state made (+bytes) or freed (-bytes); gc_collected
 * tells it of a full collection made elsewhere (out of memory, quota). */
void cdv_gc_before_alloc(lua_State *L, cdv_state *st, cdv_device *d, size_t bytes);
void cdv_gc_account(cdv_state *st, size_t bytes, int freed);
void cdv_gc_collected(lua_State *L, cdv_state *st);
/* (see NOTE [block cache]) device blocks a state freed, kept for reuse on the same stream. class rounds a size up to
 * the cache's classes; take returns a kept block of d of that class freed on `stream` (NULL: none); put keeps
 * a freed block (giving the oldest back when full); release gives back those of d (NULL: every device's) freed
 * on one stream, or all of them (freed, or forgotten when their context is gone). */
size_t cdv_block_class(size_t bytes);
size_t cdv_array_class(const cdv_device *d, size_t bytes); /* with room for d's canary: NOTE [tail canary] */
#define CDV_CANARY_MAX 1024 /* the most bytes of canary after an array (NOTE [tail canary]) */
void cdv_canary_fill(cdv_block *b);
int cdv_canary_check(cdv_block *b, size_t *first, size_t *last);
void *cdv_block_take(cdv_state *st, cdv_device *d, size_t bytes, void *stream);
int cdv_block_put(cdv_state *st, cdv_device *d, void *ptr, size_t bytes, void *stream, cdv_err *e);
int cdv_block_release(cdv_state *st, cdv_device *d, void *stream, int all, cdv_err *e);
/* (see NOTE [pinned pool]) page-locked host memory of d (the cpu device) by size class, reused instead of pinned
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
void cdv_stage_h2d(lua_State *L, cdv_device *d, void *stream, char *dst, cdv_device *dst_dev, const char *src, size_t n,
                   size_t piece);
void cdv_stage_d2h(lua_State *L, cdv_device *d, void *stream, char *dst, const char *src, cdv_device *src_dev, size_t n,
                   size_t piece);
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
/* (see NOTE [state limits]) raises when `bytes` more would exceed the state's quota (after a collection); returns
 * the state to charge (block->quota; the caller adds to quota_used), or NULL when there is no quota. */
cdv_state *cdv_quota_check(lua_State *L, cdv_state *st, cdv_device *d, size_t bytes);
/* what an allocation of `bytes` of that kind on d really holds: its class, whole pages on the cpu device */
size_t cdv_footprint(const cdv_device *d, int kind, size_t bytes);
size_t cdv_pinned_class(size_t bytes); /* memory.c: NOTE [pinned pool]'s class of a request (> 0) */
void cdv_check_compile_options(lua_State *L, int n, const char *const *opts); /* the allow-list; raises */
/* (see NOTE [sandboxed includes]) in a sandbox, refuses what NVRTC would read outside the allowed directories */
void cdv_check_includes(lua_State *L, const cdv_compile_req *req);
void cdv_free_state_options(cdv_state *st); /* the lists of the options (the record's end) */
void cdv_protect_metatables(lua_State *L); /* (see NOTE [protected metatables]) in a sandbox */
int cdv_sandbox_run(lua_State *L); /* cd._sandbox(script [, options]) */
/* (see NOTE [interruptible waits]) synchronize on a device / stream / event; in an interruptible state they
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
int cdv_raise(lua_State *L, cdv_device *d, cdv_err *e); /* raise a cudadev.Error (never returns) */
void cdv_push_error(lua_State *L, cdv_device *d, cdv_err *e); /* the Error value; takes e->log */
int cdv_raise_sticky(lua_State *L, cdv_device *d); /* NOTE [sticky faults] */
#define cdv_try(L, d, call)                    \
  do {                                         \
    cdv_err e_;                                \
    if ((call) != 0) cdv_raise((L), (d), &e_); \
  } while (0)
void cdv_warn(lua_State *L, const char *fmt, ...); /* lua_warning, never raises */
void cdv_warn_release(lua_State *L, const char *what, cdv_device *d, const cdv_err *e);

/* NOTE [live objects]: counts of objects holding a resource, process-wide, for cd._live() and for the
 * specs that check every spec returns them to where they started. */
enum {
  CDV_LIVE_ARRAY,
  CDV_LIVE_BLOCK,
  CDV_LIVE_STREAM,
  CDV_LIVE_EVENT,
  CDV_LIVE_MODULE,
  CDV_LIVE_KERNEL,
  CDV_LIVE_GRAPH,
  CDV_LIVE_N
};
extern long cdv_live[CDV_LIVE_N];
#define cdv_live_add(kind, n) __atomic_add_fetch(&cdv_live[kind], (n), __ATOMIC_RELAXED)

/* options tables: reject unknown keys (`{blok=256}` is an error) */
void cdv_check_options(lua_State *L, int arg, const char *const *known, const char *fname);

/* args.c: argument helpers shared by the Lua types */
int64_t cdv_check_count(lua_State *L, int arg, const char *what); /* integer >= 0 */
const char *cdv_fmt_bytes(char *buf, size_t n, double bytes); /* "79.1 GiB" */
int cdv_opt_field(lua_State *L, int t, const char *k);
int cdv_has_nul(lua_State *L, int idx); /* the string at idx holds a NUL byte (NOTE [C strings]) */
const char *cdv_check_cstring(lua_State *L, int arg, const char *what); /* "<what> contains a NUL byte" */
/* (see NOTE [scoped calls]) calls the function below nargs arguments, the scope to restore being the to-be-closed
 * slot 1; returns the number of results (all the stack above slot 1) */
int cdv_call_scoped(lua_State *L, int nargs); /* pushes t[k] when t is a table; type or LUA_TNIL */
int cdv_call_scoped_k(lua_State *L, int nargs); /* cdv_call_scoped, a yield allowed (NOTE [coroutine scopes]) */
void cdv_weak_registry_table(lua_State *L, const void *key); /* pushed; made (weak keys) when missing */
int cdv_check_boolean_field(lua_State *L, int t, const char *k, int def, const char *fname);

#endif
