/*
 * cublas_abi.h: the few types, values and entry points of cuBLAS that cudadev uses (blas.c's cd.matmul on a
 * CUDA device). cuBLAS's header is never included and libcublas is never linked: loader.c opens it with dlopen
 * on first use (NOTE [cublas library]), the way it opens libcuda, NVRTC and NCCL, so the module loads and the
 * cpu device multiplies where there is no cuBLAS.
 *
 * NOTE [cublas abi]: the entry points below are declared from cuBLAS's documented C ABI (cuBLAS 11 and later:
 * libcublas.so.11 to .13), checked against NVIDIA's cuBLAS documentation: cublasStatus_t, cublasOperation_t
 * (CUBLAS_OP_N 0, CUBLAS_OP_T 1), cublasMath_t (CUBLAS_DEFAULT_MATH 0: no TF32 for float32, the default of CuPy
 * and PyTorch), cudaDataType (CUDA_R_32F 0, CUDA_R_64F 1, CUDA_R_16F 2), cublasComputeType_t (CUBLAS_COMPUTE_32F
 * 68, CUBLAS_COMPUTE_64F 70) and cublasGemmAlgo_t (CUBLAS_GEMM_DEFAULT -1) are C enums, passed as int.
 * cublasGemmEx and cublasGemmStridedBatchedEx (NOTE [batched matmul] in blas.c) have taken a cublasComputeType_t
 * since cuBLAS 11. Pointer mode stays the default (alpha and beta on the host). cublas{S,D}get{rf,rs}Batched
 * (cd.linalg's batches of small systems, linalg_cuda.c) take device arrays of matrix pointers; getrf's info is
 * in device memory, getrs's on the host (it reports bad arguments only).
 */
#ifndef CDV_CUBLAS_ABI_H
#define CDV_CUBLAS_ABI_H

typedef struct cdv_cublas_context *cdv_cublas_handle; /* cublasHandle_t: opaque */

enum {
  CUBLAS_OP_N = 0,
  CUBLAS_OP_T = 1,
  CUBLAS_DEFAULT_MATH = 0,
  CUBLAS_GEMM_DEFAULT = -1,
  CUDA_R_32F = 0,
  CUDA_R_64F = 1,
  CUDA_R_16F = 2,
  CUBLAS_COMPUTE_32F = 68,
  CUBLAS_COMPUTE_64F = 70
};

/* The entry points: X(return type, exported name, parameter list), each a member of cdv_cublas_syms of the same
 * name. Every one but cublasGetStatusString (cuBLAS 11.4, optional: NULL when missing) must be there for the
 * library to count as loaded. The stream is a CUstream, passed as void *. */
#define CDV_CUBLAS_SYMS(X)                                                                                          \
  X(int, cublasCreate_v2, (cdv_cublas_handle * handle))                                                             \
  X(int, cublasDestroy_v2, (cdv_cublas_handle handle))                                                              \
  X(int, cublasSetStream_v2, (cdv_cublas_handle handle, void *stream))                                              \
  X(int, cublasSetMathMode, (cdv_cublas_handle handle, int mode))                                                   \
  X(int, cublasGemmEx,                                                                                              \
    (cdv_cublas_handle handle, int transa, int transb, int m, int n, int k, const void *alpha, const void *A,       \
     int Atype, int lda, const void *B, int Btype, int ldb, const void *beta, void *C, int Ctype, int ldc,          \
     int computeType, int algo))                                                                                    \
  X(int, cublasGemmStridedBatchedEx,                                                                                \
    (cdv_cublas_handle handle, int transa, int transb, int m, int n, int k, const void *alpha, const void *A,       \
     int Atype, int lda, long long strideA, const void *B, int Btype, int ldb, long long strideB, const void *beta, \
     void *C, int Ctype, int ldc, long long strideC, int batchCount, int computeType, int algo))                    \
  X(int, cublasSgetrfBatched,                                                                                       \
    (cdv_cublas_handle handle, int n, float *const a[], int lda, int *ipiv, int *info, int batch))                  \
  X(int, cublasDgetrfBatched,                                                                                       \
    (cdv_cublas_handle handle, int n, double *const a[], int lda, int *ipiv, int *info, int batch))                 \
  X(int, cublasSgetrsBatched,                                                                                       \
    (cdv_cublas_handle handle, int trans, int n, int nrhs, const float *const a[], int lda, const int *ipiv,        \
     float *const b[], int ldb, int *info, int batch))                                                              \
  X(int, cublasDgetrsBatched,                                                                                       \
    (cdv_cublas_handle handle, int trans, int n, int nrhs, const double *const a[], int lda, const int *ipiv,       \
     double *const b[], int ldb, int *info, int batch))                                                             \
  X(const char *, cublasGetStatusString, (int status))

#define CDV_CUBLAS_FIELD(ret, name, params) ret(*name) params;
struct cdv_cublas_syms {
  CDV_CUBLAS_SYMS(CDV_CUBLAS_FIELD)
};
extern struct cdv_cublas_syms cdv_cublas; /* filled once by cdv_cublas_load(); read-only afterwards */

/* loader.c: NOTE [cublas library] */
int cdv_cublas_load(void); /* 0 when libcublas is open and has every entry point but the optional one */
const char *cdv_cublas_why(void); /* why not: "no cuBLAS: " and every name tried, or the entry point it lacks */
const char *cdv_cublas_path(void); /* the name that opened ("" when none) */

#endif
