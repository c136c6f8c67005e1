/*
 * cudadev.h: the public C API of cudadev, for hosts that embed Lua and want their scripts to drive the GPU.
 * Everything else in the library is hidden (-fvisibility=hidden).
 *
 * A host typically:
 *   lua_State *L = luaL_newstate();
 *   luaL_openlibs(L);
 *   cudadev_options o = {.sandbox = 1, .memory_quota = 256 << 20};   (optional, before luaopen_cudadev)
 *   cudadev_set_options(L, &o);
 *   luaL_requiref(L, "cudadev", luaopen_cudadev, 1);
 *   cudadev_push_array(L, my_dev_ptr, "float32", 1, &n, "cuda:0", NULL, NULL);   (the host's buffer)
 *   lua_setglobal(L, "buf");
 *
 * Functions marked "raises" report misuse the way the Lua C API does (luaL_error, or a cudadev.Error):
 * call them from a C function that Lua runs, or under lua_pcall, as with luaL_checkinteger. The option
 * setters never raise. Each lua_State has its own options; several states may use cudadev at the same
 * time from different threads (one thread per state at a time, as Lua requires).
 *
 * The sandbox's threat model (doc/sandbox.md): a sandboxed state's script, even one that has the debug library,
 * gets and gives no raw address (pointers, stream handles, contexts; none in tostring), runs no native host code
 * (no cd.load_module, no cpu kernels), makes NVRTC (which runs in the host process) read no file outside the
 * allowed include directories (include_dirs; the toolkit's by default) nor take options that name files, holds
 * at most memory_quota bytes as its allocations really hold them and at most max_arrays allocations, and cannot
 * read or change the metatables of cudadev values. Its sandbox record is C memory keyed by the state, out of the
 * script's reach: a record found removed or replaced is made again with the same limits. The rest is the host's:
 * remove from the state what the script must not have (debug, package.loadlib and the C searchers, io, os, as
 * needed), bound its CPU time (lua_sethook with a count; interruptible for waits on the GPU), its host memory (a
 * lua_Alloc with a budget) and its GPU time. With the debug library a script can still stop finalizers, its own
 * and cudadev's: memory it held stays allocated, and a host's release callback is not called; a host that relies
 * on those, or runs scripts one after another in one process, removes debug (examples/embed/host.c does).
 */
#ifndef CUDADEV_H
#define CUDADEV_H

#include <stddef.h>
#include <stdint.h>
#include <lua.h>

#if defined(_WIN32)
#define CUDADEV_API __declspec(dllexport)
#else
#define CUDADEV_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Opens the module: `luaL_requiref(L, "cudadev", luaopen_cudadev, 1)`. */
CUDADEV_API int luaopen_cudadev(lua_State *L);

/* `require "cudadev.repl"` before `require "cudadev"`: Lua's all-in-one loader finds this in cudadev.so; it
 * requires "cudadev" first, then opens the REPL's module (built into the library). */
CUDADEV_API int luaopen_cudadev_repl(lua_State *L);

/* "0.1.0" */
CUDADEV_API const char *cudadev_version(void);

/* ---------------------------------------------------------------- per-state options */
/* Set before luaopen_cudadev, so that no script runs without them (they may be changed later from C).
 * They raise only when Lua runs out of memory. cudadev_set_options(L, NULL) restores the defaults. */
typedef struct cudadev_options {
  /* No raw addresses (a.ptr, s.handle, integers as pointer arguments, map_cuda_device with a context
   * pointer, handles in tostring), no cd.load_module, no kernel compilation for the cpu device (it runs
   * native host code), CUDA compiles that read only allowed files (include_dirs), protected metatables. */
  int sandbox;
  /* Bytes of memory that the state's arrays may hold at once, on all devices together, the cpu device's
   * host memory included (0: no limit), each allocation counted as what it really holds (its size class;
   * whole pages on the cpu device). An allocation beyond it raises `device memory quota of X exceeded
   * on cuda:0 (requested Y, in use Z)` once a garbage collection found nothing to give back; freed and
   * collected arrays give their bytes back. Staging copies (printing a GPU array, a[i], a:totable(),
   * copies from Lua tables) count while they exist. Arrays over host memory (cudadev_push_array) do not. */
  size_t memory_quota;
  /* NULL-terminated list of the compile options scripts may pass to cd.compile (NULL: any). An entry
   * ending in '*' allows every option that starts with what precedes it ("-D*", "--gpu-architecture=*").
   * The list is copied. */
  const char *const *allowed_compile_options;
  /* Waits for a device, stream or event (synchronize) poll and can be cut short by cudadev_interrupt. */
  int interruptible;
  /* NULL-terminated list of the directories whose files a sandboxed state's CUDA compiles may #include and
   * name in include_paths (NULL: the CUDA toolkit's include directories only). Resolved (realpath) and copied
   * when set; a directory that does not exist allows nothing. Outside a sandbox, any. */
  const char *const *include_dirs;
  /* Arrays that own memory which the state may hold at once (views do not count; 0: 1 << 20, 1048576). Each
   * allocation of the cpu device is a mapping of the process, and the process has about 65k
   * (vm.max_map_count): a script that holds more makes unrelated allocations fail. Beyond it, allocations raise
   * `too many live arrays in this state (the limit is N; ...)` once a garbage collection freed nothing. */
  size_t max_arrays;
} cudadev_options;

CUDADEV_API void cudadev_set_options(lua_State *L, const cudadev_options *opts);
CUDADEV_API void cudadev_set_sandbox(lua_State *L, int on);
CUDADEV_API void cudadev_set_memory_quota(lua_State *L, size_t bytes);
CUDADEV_API void cudadev_set_allowed_compile_options(lua_State *L, const char *const *options);
CUDADEV_API void cudadev_set_interruptible(lua_State *L, int on);
CUDADEV_API void cudadev_set_include_dirs(lua_State *L, const char *const *dirs);
CUDADEV_API void cudadev_set_max_arrays(lua_State *L, size_t n);
/* Bytes the state's arrays hold now under its quota. */
CUDADEV_API size_t cudadev_memory_quota_used(lua_State *L);

/* Asks the wait in progress in an interruptible state to stop with the error "interrupted!" (the GPU work
 * already queued keeps running). Async-signal-safe: call it from a SIGINT handler. The request stays
 * pending until a wait sees it or cudadev_clear_interrupt is called. */
CUDADEV_API void cudadev_interrupt(void);
CUDADEV_API void cudadev_clear_interrupt(void);

/* ---------------------------------------------------------------- host objects */
/* Adopts a CUDA context the host made (a CUcontext; NULL: the one current on this thread) as a device named
 * alias, as cd.map_cuda_device does, sandbox or not. Pushes the Device. Raises. */
CUDADEV_API void cudadev_adopt_context(lua_State *L, const char *alias, void *cuda_context);

/* The host's memory as an Array, without copying. ptr is device memory of `device` (an alias: "cuda:0", an
 * adopted alias; "cpu" for host memory; NULL: the state's default device), dtype a cudadev dtype ("float32",
 * "f32", ...; NULL raises), shape ndim extents (ndim 0: a scalar). release NULL: borrowed, the host keeps the
 * memory alive for as long as the Array (and its views) exist. Otherwise the Array owns it: release(release_ud, ptr) is
 * called once, when the last Array using it is freed or collected, after the work queued on it is done.
 * Pushes the Array. Raises (when it raises, release is not called: the memory stays the host's).
 * On the cpu device, kernels run in a forked child by default and only write memory that child shares with
 * the host: give cpu kernels MAP_SHARED memory (mmap), or set CUDADEV_CPU_FORK=0 (launches in-process). */
CUDADEV_API void cudadev_push_array(lua_State *L, void *ptr, const char *dtype, int ndim, const int64_t *shape,
                                    const char *device, void (*release)(void *ud, void *ptr), void *release_ud);

/* A stream the host created (a CUstream; NULL: the device's default stream) as a Stream of `device`;
 * cudadev never destroys it. Pushes the Stream. Raises, also when the stream is not one of the device's context
 * (checked with cuStreamGetCtx), and for any handle but NULL on the cpu device. */
CUDADEV_API void cudadev_push_stream(lua_State *L, void *stream, const char *device);

#define CUDADEV_MAXDIM 8
typedef struct cudadev_array_info {
  void *ptr; /* the first element */
  const char *dtype; /* "float32" (static storage) */
  size_t itemsize; /* bytes per element */
  int ndim;
  int64_t shape[CUDADEV_MAXDIM];
  int64_t size; /* elements */
  size_t nbytes;
  const char *device; /* "cpu", "cuda:0", an alias (valid while the process runs) */
  int device_ordinal; /* CUDA ordinal; -1 for cpu */
  void *cuda_context; /* the device's CUcontext (NULL on cpu, or before the context exists) */
} cudadev_array_info;

/* Fills *info from the live Array at idx; raises when it is not one (or was freed, or is a non-contiguous view). */
CUDADEV_API void cudadev_check_array(lua_State *L, int idx, cudadev_array_info *info);
/* The same without raising: 1 when idx holds a live contiguous Array, else 0 (info untouched). */
CUDADEV_API int cudadev_to_array(lua_State *L, int idx, cudadev_array_info *info);

/* Raises a cudadev.Error from a host callback: api "host", message from the format (lua_pushfstring's
 * formats), where the calling Lua line. Use as `return cudadev_error(L, "no frame %d", i);`. */
CUDADEV_API int cudadev_error(lua_State *L, const char *fmt, ...);

#ifdef __cplusplus
}
#endif
#endif
