/*
 * cudadev_dlpack.h: tensors exchanged with other frameworks (PyTorch, CuPy, JAX, Warp, cuda.core) through
 * DLPack, without a copy. Part of cudadev's public C API (cudadev.h); doc/interop.md describes each function.
 *
 * The structs below are cudadev's own declarations of the ABI that the DLPack specification documents
 * (version 1.1: https://dmlc.github.io/dlpack/latest/c_api.html), field for field, so that a host needs no
 * other header. A host that already includes the specification's own dlpack.h includes it BEFORE this file:
 * its types are then used (its include guard, DLPACK_DLPACK_H_, is tested), and the layouts are the same.
 *
 * Ownership, in short (NOTE [dlpack ownership] in src/dlpack.c):
 *   cudadev_push_dlpack: cudadev borrows the tensor; its deleter is called exactly once, when the last Array
 *     using the memory (the pushed Array and its views) is freed or collected, or at lua_close. When the push
 *     raises, the deleter is not called: the tensor stays the caller's.
 *   cudadev_to_dlpack: the consumer owns the returned tensor and calls its deleter exactly once when done; until
 *     then the Array's memory stays allocated (even when the script frees or drops the Array, or the state is
 *     closed). Call the deleter on the thread that runs the state (or after lua_close), never while another
 *     thread is inside a call into that state.
 */
#ifndef CUDADEV_DLPACK_H
#define CUDADEV_DLPACK_H

#include <stdint.h>
#include "cudadev.h"

#ifndef DLPACK_DLPACK_H_
/* DLPack 1.1's ABI (see above). Only the enumerators cudadev reads are named here; the others are refused by
 * their number and the name the specification gives them (src/dlpack.c). */
typedef struct {
  uint32_t major, minor;
} DLPackVersion;

typedef enum { kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLCUDAManaged = 13 } DLDeviceType;

typedef struct {
  DLDeviceType device_type;
  int32_t device_id;
} DLDevice;

typedef enum { kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4, kDLComplex = 5, kDLBool = 6 } DLDataTypeCode;

typedef struct {
  uint8_t code, bits;
  uint16_t lanes;
} DLDataType;

typedef struct {
  void *data; /* the allocation's start; the first element is at data + byte_offset */
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t *shape; /* ndim extents */
  int64_t *strides; /* ndim strides in elements, or NULL: compact row-major */
  uint64_t byte_offset;
} DLTensor;

typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void *manager_ctx;
  void (*deleter)(struct DLManagedTensor *self); /* may be NULL */
} DLManagedTensor;

#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)

typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void *manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned *self); /* may be NULL */
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The tensor as an Array, without copying (borrowed: see above). Every dtype cudadev has; bfloat16, complex,
 * float8 and the other codes, vector lanes and non-native widths are refused by name. Devices: kDLCPU -> cpu,
 * kDLCUDA -> cuda:<device_id>, kDLCUDAHost (pinned) -> cpu (a pinned Array), kDLCUDAManaged -> cuda:0 (a managed
 * Array). byte_offset is honoured; strides must be compact row-major (NULL, or what NULL means), others are
 * refused. The versioned form refuses a major version other than 1 and read-only tensors. Pushes the Array.
 * Raises (the tensor then stays the caller's). */
CUDADEV_API void cudadev_push_dlpack(lua_State *L, struct DLManagedTensor *t);
CUDADEV_API void cudadev_push_dlpack_versioned(lua_State *L, struct DLManagedTensorVersioned *t);

/* The live Array at idx as a new tensor that keeps its memory alive until the consumer calls its deleter. The
 * work queued on the Array is finished first (the tensor is ready on any stream). kDLCPU for the cpu device
 * (pinned arrays too), kDLCUDA with the CUDA ordinal, kDLCUDAManaged for managed arrays; compact row-major
 * strides (never NULL), byte_offset 0. Raises. */
CUDADEV_API struct DLManagedTensor *cudadev_to_dlpack(lua_State *L, int idx);
CUDADEV_API struct DLManagedTensorVersioned *cudadev_to_dlpack_versioned(lua_State *L, int idx);

#ifdef __cplusplus
}
#endif
#endif
