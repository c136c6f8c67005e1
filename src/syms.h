/*
 * syms.h: the raw entry points of libcuda and NVRTC, resolved lazily by loader.c (PyTorch's stub pattern).
 *
 * Nothing links against libcuda or libnvrtc, so the module loads on a machine with no GPU. Each list below is
 * an X-macro that generates three things from one place: the struct of function pointers (typed from the
 * toolkit's own prototypes with __typeof__), the name table and the loader loop.
 *
 * NOTE [versioned symbols]: cuda.h maps many names to versioned exports (`#define cuMemAlloc cuMemAlloc_v2`,
 * `cuCtxCreate` -> `cuCtxCreate_v4`, `cuGraphInstantiate` -> `cuGraphInstantiateWithFlags`). A list entry is
 * written with the plain name; used as a macro argument it is expanded, so the struct member, the prototype
 * and the string looked up with dlsym are all the versioned name, the one a program linked against libcuda
 * would call. `cdv_cu.cuMemAlloc(...)` expands the same way. We never define
 * CUDA_API_PER_THREAD_DEFAULT_STREAM: a NULL stream is the legacy default stream.
 *
 * NOTE [missing symbols]: a name the library does not export is stored as NULL and does not fail the load; it
 * fails when used, by name (CDV_CU / CDV_NVRTC below check the pointer). Optional entry points such as
 * cuFuncGetParamInfo (12.4), cuMemAllocAsync (11.2) or the graph calls therefore only limit what an old driver
 * can do. Two entries that expand to the same export must not both be listed (cuGraphInstantiate is
 * cuGraphInstantiateWithFlags).
 */
#ifndef CDV_SYMS_H
#define CDV_SYMS_H

#include <cuda.h>
#include <cudaProfiler.h>
#include <nvrtc.h>
#include "backend.h"
#ifdef CDV_LAYER_FRONT
#error "syms.h belongs to the loader and the CUDA backend: the front end asks the backend (NOTE [layers])"
#endif

#define CDV_STR_(x) #x
#define CDV_XSTR(x) CDV_STR_(x) /* stringify after macro expansion: cuMemAlloc -> "cuMemAlloc_v2" */

/* ---------------------------------------------------------------- libcuda */
/* one entry a line, left alone by clang-format, which reflowed these lists differently on each run */
// clang-format off
#define CDV_CU_SYMS(X) \
  /* initialisation, errors, version, profiler */ \
  X(cuInit) \
  X(cuDriverGetVersion) \
  X(cuGetErrorName) \
  X(cuGetErrorString) \
  X(cuProfilerStart) \
  X(cuProfilerStop) \
  /* devices */ \
  X(cuDeviceGet) \
  X(cuDeviceGetCount) \
  X(cuDeviceGetName) \
  X(cuDeviceGetAttribute) \
  X(cuDeviceTotalMem) \
  X(cuDeviceGetUuid) \
  X(cuDeviceGetPCIBusId) \
  X(cuDeviceGetDefaultMemPool) \
  X(cuDeviceCanAccessPeer) \
  /* contexts */ \
  X(cuDevicePrimaryCtxRetain) \
  X(cuDevicePrimaryCtxRelease) \
  X(cuDevicePrimaryCtxReset) \
  X(cuDevicePrimaryCtxGetState) \
  X(cuCtxGetCurrent) \
  X(cuCtxSetCurrent) \
  X(cuCtxPushCurrent) \
  X(cuCtxPopCurrent) \
  X(cuCtxSynchronize) \
  X(cuCtxGetDevice) \
  X(cuCtxCreate) \
  X(cuCtxDestroy) \
  X(cuCtxGetStreamPriorityRange) \
  /* peer access */ \
  X(cuCtxEnablePeerAccess) \
  X(cuCtxDisablePeerAccess) \
  X(cuMemPoolSetAccess) \
  X(cuMemPoolGetAccess) \
  /* memory */ \
  X(cuMemAlloc) \
  X(cuMemFree) \
  X(cuMemAllocAsync) \
  X(cuMemFreeAsync) \
  X(cuMemPoolSetAttribute) \
  X(cuMemPoolGetAttribute) \
  X(cuMemPoolTrimTo) \
  X(cuMemCreate) \
  X(cuMemRelease) \
  X(cuMemAddressReserve) \
  X(cuMemAddressFree) \
  X(cuMemMap) \
  X(cuMemUnmap) \
  X(cuMemSetAccess) \
  X(cuMemGetAllocationGranularity) \
  X(cuMemHostAlloc) \
  X(cuMemFreeHost) \
  X(cuMemHostRegister) \
  X(cuMemHostUnregister) \
  X(cuMemGetInfo) \
  X(cuPointerGetAttribute) \
  X(cuMemGetAddressRange) \
  X(cuIpcGetMemHandle) \
  X(cuIpcOpenMemHandle) \
  X(cuIpcCloseMemHandle) \
  X(cuIpcGetEventHandle) \
  X(cuIpcOpenEventHandle) \
  X(cuMemAllocManaged) \
  X(cuMemPrefetchAsync) \
  X(cuMemAdvise) \
  /* managed memory (managed.c) */ \
  X(cuMemcpy) \
  X(cuMemcpyAsync) \
  X(cuMemcpyHtoD) \
  X(cuMemcpyHtoDAsync) \
  X(cuMemcpyDtoH) \
  X(cuMemcpyDtoHAsync) \
  X(cuMemcpyDtoD) \
  X(cuMemcpyDtoDAsync) \
  X(cuMemcpyPeer) \
  X(cuMemcpyPeerAsync) \
  X(cuMemsetD8Async) \
  X(cuMemsetD16Async) \
  X(cuMemsetD32Async) \
  X(cuMemsetD2D32Async) \
  /* streams */ \
  X(cuStreamCreate) \
  X(cuStreamCreateWithPriority) \
  X(cuStreamDestroy) \
  X(cuStreamSynchronize) \
  X(cuStreamQuery) \
  X(cuStreamWaitEvent) \
  X(cuStreamGetPriority) \
  X(cuLaunchHostFunc) \
  X(cuStreamGetCtx) \
  X(cuStreamBeginCapture) \
  X(cuStreamEndCapture) \
  X(cuStreamIsCapturing) \
  X(cuThreadExchangeStreamCaptureMode) \
  /* events */ \
  X(cuEventCreate) \
  X(cuEventDestroy) \
  X(cuEventRecord) \
  X(cuEventQuery) \
  X(cuEventSynchronize) \
  X(cuEventElapsedTime) \
  /* modules and functions */ \
  X(cuModuleLoadData) \
  X(cuModuleLoadDataEx) \
  X(cuModuleUnload) \
  X(cuModuleGetFunction) \
  X(cuModuleGetGlobal) \
  X(cuFuncGetAttribute) \
  X(cuFuncSetAttribute) \
  X(cuFuncGetParamInfo) \
  X(cuLaunchKernel) \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor) \
  X(cuOccupancyMaxPotentialBlockSize) \
  X(cuLaunchCooperativeKernel) \
  /* graphs (cuGraphInstantiate expands to cuGraphInstantiateWithFlags) */ \
  X(cuGraphInstantiateWithFlags) \
  X(cuGraphLaunch) \
  X(cuGraphExecDestroy) \
  X(cuGraphDestroy) \
  X(cuGraphGetNodes)
// clang-format on

/* ---------------------------------------------------------------- NVRTC */
/* one entry a line, left alone by clang-format, which reflowed these lists differently on each run */
// clang-format off
#define CDV_NVRTC_SYMS(X) \
  X(nvrtcVersion) \
  X(nvrtcGetErrorString) \
  X(nvrtcGetNumSupportedArchs) \
  X(nvrtcGetSupportedArchs) \
  X(nvrtcCreateProgram) \
  X(nvrtcDestroyProgram) \
  X(nvrtcCompileProgram) \
  X(nvrtcGetPTXSize) \
  X(nvrtcGetPTX) \
  X(nvrtcGetCUBINSize) \
  X(nvrtcGetCUBIN) \
  X(nvrtcGetProgramLogSize) \
  X(nvrtcGetProgramLog) \
  X(nvrtcAddNameExpression) \
  X(nvrtcGetLoweredName)
// clang-format on

#define CDV_SYM_FIELD(fn) __typeof__(&fn) fn;
struct cdv_cu_syms {
  CDV_CU_SYMS(CDV_SYM_FIELD)
};
struct cdv_nvrtc_syms {
  CDV_NVRTC_SYMS(CDV_SYM_FIELD)
};

/* Filled once by cdv_cuda_load() / cdv_nvrtc_load(); read-only afterwards, so any thread may call through. */
extern struct cdv_cu_syms cdv_cu;
extern struct cdv_nvrtc_syms cdv_nvrtc;

/* ---------------------------------------------------------------- checked calls */
/* Fill e when a library could not be opened (every name tried) or cuInit failed; return -1. */
int cdv_cuda_unavailable(cdv_err *e);
int cdv_nvrtc_unavailable(cdv_err *e);
/* Fill e for an entry point the library does not export (NOTE [missing symbols]); return -1. */
int cdv_sym_missing(cdv_err *e, const char *api, const char *symbol, const char *lib);

/* Fill e from a failed CUresult or nvrtcResult (backend_cuda.c); return -1. */
int cdv_cu_error(cdv_err *e, const char *api, CUresult r);
int cdv_nvrtc_error(cdv_err *e, const char *api, nvrtcResult r);

#define CDV_CUDA_MAXDEV 256 /* CUdevice ordinals with a slot in the backend's per-device tables */
CUmemAccessDesc cdv_cuda_access_desc(int handle, int on); /* backend_cuda_optional.c */

static inline int cdv_cu_result(cdv_err *e, const char *api, CUresult r) {
  return r == CUDA_SUCCESS ? 0 : cdv_cu_error(e, api, r);
}

static inline int cdv_nvrtc_result(cdv_err *e, const char *api, nvrtcResult r) {
  return r == NVRTC_SUCCESS ? 0 : cdv_nvrtc_error(e, api, r);
}

/* `if (CDV_CU(e, cuMemAlloc, &p, n)) return -1;` calls cdv_cu.cuMemAlloc_v2 and names the failure by the
 * documented name ("cuMemAlloc"); a NULL pointer fails by name instead of crashing. The library must have been
 * loaded (cdv_cuda_load() == 0) before: a device only exists once it has. */
#define CDV_CU(e, fn, ...)                                                \
  (cdv_cu.fn == NULL ? cdv_sym_missing((e), #fn, CDV_XSTR(fn), "libcuda") \
                     : cdv_cu_result((e), #fn, cdv_cu.fn(__VA_ARGS__)))
#define CDV_NVRTC(e, fn, ...)                                                 \
  (cdv_nvrtc.fn == NULL ? cdv_sym_missing((e), #fn, CDV_XSTR(fn), "libnvrtc") \
                        : cdv_nvrtc_result((e), #fn, cdv_nvrtc.fn(__VA_ARGS__)))
#define CDV_HAVE_CU(fn) (cdv_cu.fn != NULL)

#endif
