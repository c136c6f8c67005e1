/*
 * nccl_abi.h: the few types, values and entry points of libnccl that cudadev uses, declared here from NCCL's
 * documented ABI (nccl.h of NCCL 2.x: the values below have not changed since 2.0, ncclAvg came in 2.10,
 * ncclCommGetAsyncError in 2.4, ncclGetLastError in 2.13). NCCL's own header is never included and libnccl is
 * never linked: loader.c opens it with dlopen on first use (NOTE [nccl library]), so the module loads and the
 * cpu device works where there is no NCCL.
 */
#ifndef CDV_NCCL_ABI_H
#define CDV_NCCL_ABI_H

#include <stddef.h>

typedef struct cdv_ncclComm *cdv_ncclComm_t; /* ncclComm_t: opaque */
typedef void *cdv_ncclStream_t; /* cudaStream_t, the same handle as a CUstream */

#define CDV_NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[CDV_NCCL_UNIQUE_ID_BYTES];
} cdv_ncclUniqueId; /* passed by value */

/* ncclResult_t */
typedef enum {
  cdv_ncclSuccess = 0,
  cdv_ncclUnhandledCudaError = 1,
  cdv_ncclSystemError = 2,
  cdv_ncclInternalError = 3,
  cdv_ncclInvalidArgument = 4,
  cdv_ncclInvalidUsage = 5,
  cdv_ncclRemoteError = 6,
  cdv_ncclInProgress = 7,
  cdv_ncclTimeout = 8
} cdv_ncclResult_t;

/* ncclRedOp_t (an int-sized enum) */
typedef enum { cdv_ncclSum = 0, cdv_ncclProd = 1, cdv_ncclMax = 2, cdv_ncclMin = 3, cdv_ncclAvg = 4 } cdv_ncclRedOp_t;

/* ncclDataType_t; NCCL has no 16-bit integers and no bool */
typedef enum {
  cdv_ncclInt8 = 0,
  cdv_ncclUint8 = 1,
  cdv_ncclInt32 = 2,
  cdv_ncclUint32 = 3,
  cdv_ncclInt64 = 4,
  cdv_ncclUint64 = 5,
  cdv_ncclFloat16 = 6,
  cdv_ncclFloat32 = 7,
  cdv_ncclFloat64 = 8
} cdv_ncclDataType_t;

/* The entry points: X(return type, name, parameter list). Each becomes a member of cdv_nccl_syms with the
 * same name, resolved by that name (NOTE [missing symbols] in syms.h: one NCCL lacks fails when used). */
#define CDV_NCCL_SYMS(X)                                                                                               \
  X(cdv_ncclResult_t, ncclGetVersion, (int *version))                                                                  \
  X(const char *, ncclGetErrorString, (cdv_ncclResult_t result))                                                       \
  X(const char *, ncclGetLastError, (cdv_ncclComm_t comm))                                                             \
  X(cdv_ncclResult_t, ncclGetUniqueId, (cdv_ncclUniqueId * id))                                                        \
  X(cdv_ncclResult_t, ncclCommInitRank, (cdv_ncclComm_t * comm, int nranks, cdv_ncclUniqueId id, int rank))            \
  X(cdv_ncclResult_t, ncclCommInitAll, (cdv_ncclComm_t * comms, int ndev, const int *devlist))                         \
  X(cdv_ncclResult_t, ncclCommDestroy, (cdv_ncclComm_t comm))                                                          \
  X(cdv_ncclResult_t, ncclCommAbort, (cdv_ncclComm_t comm))                                                            \
  X(cdv_ncclResult_t, ncclCommGetAsyncError, (cdv_ncclComm_t comm, cdv_ncclResult_t * err))                            \
  X(cdv_ncclResult_t, ncclCommCount, (cdv_ncclComm_t comm, int *count))                                                \
  X(cdv_ncclResult_t, ncclCommUserRank, (cdv_ncclComm_t comm, int *rank))                                              \
  X(cdv_ncclResult_t, ncclAllReduce,                                                                                   \
    (const void *send, void *recv, size_t count, cdv_ncclDataType_t type, cdv_ncclRedOp_t op, cdv_ncclComm_t comm,     \
     cdv_ncclStream_t stream))                                                                                         \
  X(cdv_ncclResult_t, ncclBroadcast,                                                                                   \
    (const void *send, void *recv, size_t count, cdv_ncclDataType_t type, int root, cdv_ncclComm_t comm,               \
     cdv_ncclStream_t stream))                                                                                         \
  X(cdv_ncclResult_t, ncclReduce,                                                                                      \
    (const void *send, void *recv, size_t count, cdv_ncclDataType_t type, cdv_ncclRedOp_t op, int root,                \
     cdv_ncclComm_t comm, cdv_ncclStream_t stream))                                                                    \
  X(cdv_ncclResult_t, ncclAllGather,                                                                                   \
    (const void *send, void *recv, size_t sendcount, cdv_ncclDataType_t type, cdv_ncclComm_t comm,                     \
     cdv_ncclStream_t stream))                                                                                         \
  X(cdv_ncclResult_t, ncclReduceScatter,                                                                               \
    (const void *send, void *recv, size_t recvcount, cdv_ncclDataType_t type, cdv_ncclRedOp_t op, cdv_ncclComm_t comm, \
     cdv_ncclStream_t stream))                                                                                         \
  X(cdv_ncclResult_t, ncclSend,                                                                                        \
    (const void *send, size_t count, cdv_ncclDataType_t type, int peer, cdv_ncclComm_t comm, cdv_ncclStream_t stream)) \
  X(cdv_ncclResult_t, ncclRecv,                                                                                        \
    (void *recv, size_t count, cdv_ncclDataType_t type, int peer, cdv_ncclComm_t comm, cdv_ncclStream_t stream))       \
  X(cdv_ncclResult_t, ncclGroupStart, (void))                                                                          \
  X(cdv_ncclResult_t, ncclGroupEnd, (void))

#define CDV_NCCL_FIELD(ret, name, params) ret(*name) params;
struct cdv_nccl_syms {
  CDV_NCCL_SYMS(CDV_NCCL_FIELD)
};
extern struct cdv_nccl_syms cdv_nccl; /* filled once by cdv_nccl_load(); read-only afterwards */

/* loader.c: NOTE [nccl library] */
int cdv_nccl_load(void); /* 0 when libnccl is open and has the entry points every use needs */
const char *cdv_nccl_why(void); /* why not: every name tried, or the entry point it lacks */
const char *cdv_nccl_path(void); /* the name that opened ("" when none) */

#endif
