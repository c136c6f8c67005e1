/*
 * cusolver_abi.h: the cuSOLVER dense entry points cudadev uses (linalg_cuda.c's cd.linalg on a CUDA device).
 * cuSOLVER's header is never included and libcusolver is never linked: loader.c opens it with dlopen on first use
 * (NOTE [cusolver library]), so the module loads, and everything else runs, where it is missing.
 *
 * NOTE [cusolver abi]: declared from cuSOLVER's documented C ABI (cusolverDn.h of CUDA 11 to 13, read, not
 * included): cusolverStatus_t, cublasFillMode_t (CUBLAS_FILL_MODE_LOWER 0, UPPER 1), cublasOperation_t
 * (CUBLAS_OP_N 0, CUBLAS_OP_T 1, in cublas_abi.h), cusolverEigMode_t (NOVECTOR 0, VECTOR 1) and cudaDataType_t
 * (the 64-bit API's cusolverDnX*, in every libcusolver the loader opens: CUDA 11.1 on) are C enums, passed as int;
 * gesvd's jobu and jobvt are signed chars. Every routine is column-major (NOTE [linalg layouts] in
 * lua/cudadev/linalg.lua says how row-major arrays are handed over), works on the handle's stream and reports its
 * outcome in devInfo, in device memory.
 */
#ifndef CDV_CUSOLVER_ABI_H
#define CDV_CUSOLVER_ABI_H

#include <stddef.h>
#include <stdint.h>

typedef struct cdv_cusolver_context *cdv_cusolver_handle; /* cusolverDnHandle_t: opaque */
typedef struct cdv_syevj_params *cdv_syevj_info; /* syevjInfo_t: opaque (the defaults: eigenvalues sorted) */
typedef struct cdv_gesvdj_params *cdv_gesvdj_info; /* gesvdjInfo_t: opaque (tolerance, sweeps) */
typedef struct cdv_dn_params *cdv_dn_params; /* cusolverDnParams_t: the 64-bit API's options (defaults) */

enum {
  CUBLAS_FILL_MODE_LOWER = 0,
  CUBLAS_FILL_MODE_UPPER = 1,
  CUSOLVER_EIG_MODE_NOVECTOR = 0,
  CUSOLVER_EIG_MODE_VECTOR = 1,
  CDV_CUDA_R_32F = 0, /* cudaDataType_t (library_types.h) */
  CDV_CUDA_R_64F = 1
};

#define CDV_CUSOLVER_TYPED(X, T, p)                                                                                   \
  X(int, cusolverDn##p##getrf_bufferSize, (cdv_cusolver_handle h, int m, int n, T *a, int lda, int *lwork))           \
  X(int, cusolverDn##p##getrf, (cdv_cusolver_handle h, int m, int n, T *a, int lda, T *work, int *ipiv, int *info))   \
  X(int, cusolverDn##p##getrs,                                                                                        \
    (cdv_cusolver_handle h, int trans, int n, int nrhs, const T *a, int lda, const int *ipiv, T *b, int ldb,          \
     int *info))                                                                                                      \
  X(int, cusolverDn##p##potrfBatched, (cdv_cusolver_handle h, int uplo, int n, T **a, int lda, int *info, int batch)) \
  X(int, cusolverDn##p##geqrf_bufferSize, (cdv_cusolver_handle h, int m, int n, T *a, int lda, int *lwork))           \
  X(int, cusolverDn##p##geqrf,                                                                                        \
    (cdv_cusolver_handle h, int m, int n, T *a, int lda, T *tau, T *work, int lwork, int *info))                      \
  X(int, cusolverDn##p##orgqr_bufferSize,                                                                             \
    (cdv_cusolver_handle h, int m, int n, int k, const T *a, int lda, const T *tau, int *lwork))                      \
  X(int, cusolverDn##p##orgqr,                                                                                        \
    (cdv_cusolver_handle h, int m, int n, int k, T *a, int lda, const T *tau, T *work, int lwork, int *info))         \
  X(int, cusolverDn##p##syevd_bufferSize,                                                                             \
    (cdv_cusolver_handle h, int jobz, int uplo, int n, const T *a, int lda, const T *w, int *lwork))                  \
  X(int, cusolverDn##p##syevd,                                                                                        \
    (cdv_cusolver_handle h, int jobz, int uplo, int n, T *a, int lda, T *w, T *work, int lwork, int *info))           \
  X(int, cusolverDn##p##syevjBatched_bufferSize,                                                                      \
    (cdv_cusolver_handle h, int jobz, int uplo, int n, const T *a, int lda, const T *w, int *lwork,                   \
     cdv_syevj_info params, int batch))                                                                               \
  X(int, cusolverDn##p##syevjBatched,                                                                                 \
    (cdv_cusolver_handle h, int jobz, int uplo, int n, T *a, int lda, T *w, T *work, int lwork, int *info,            \
     cdv_syevj_info params, int batch))                                                                               \
  X(int, cusolverDn##p##gesvd_bufferSize, (cdv_cusolver_handle h, int m, int n, int *lwork))                          \
  X(int, cusolverDn##p##gesvd,                                                                                        \
    (cdv_cusolver_handle h, signed char jobu, signed char jobvt, int m, int n, T *a, int lda, T *s, T *u, int ldu,    \
     T *vt, int ldvt, T *work, int lwork, T *rwork, int *info))                                                       \
  X(int, cusolverDn##p##gesvdj_bufferSize,                                                                            \
    (cdv_cusolver_handle h, int jobz, int econ, int m, int n, const T *a, int lda, const T *s, const T *u, int ldu,   \
     const T *v, int ldv, int *lwork, cdv_gesvdj_info params))                                                        \
  X(int, cusolverDn##p##gesvdj,                                                                                       \
    (cdv_cusolver_handle h, int jobz, int econ, int m, int n, T *a, int lda, T *s, T *u, int ldu, T *v, int ldv,      \
     T *work, int lwork, int *info, cdv_gesvdj_info params))                                                          \
  X(int, cusolverDn##p##gesvdjBatched_bufferSize,                                                                     \
    (cdv_cusolver_handle h, int jobz, int m, int n, const T *a, int lda, const T *s, const T *u, int ldu, const T *v, \
     int ldv, int *lwork, cdv_gesvdj_info params, int batch))                                                         \
  X(int, cusolverDn##p##gesvdjBatched,                                                                                \
    (cdv_cusolver_handle h, int jobz, int m, int n, T *a, int lda, T *s, T *u, int ldu, T *v, int ldv, T *work,       \
     int lwork, int *info, cdv_gesvdj_info params, int batch))

#define CDV_CUSOLVER_SYMS(X)                                                                                          \
  X(int, cusolverDnCreate, (cdv_cusolver_handle * h))                                                                 \
  X(int, cusolverDnDestroy, (cdv_cusolver_handle h))                                                                  \
  X(int, cusolverDnSetStream, (cdv_cusolver_handle h, void *stream))                                                  \
  X(int, cusolverDnCreateSyevjInfo, (cdv_syevj_info * info))                                                          \
  X(int, cusolverDnDestroySyevjInfo, (cdv_syevj_info info))                                                           \
  X(int, cusolverDnCreateGesvdjInfo, (cdv_gesvdj_info * info))                                                        \
  X(int, cusolverDnDestroyGesvdjInfo, (cdv_gesvdj_info info))                                                         \
  X(int, cusolverDnXgesvdjSetTolerance, (cdv_gesvdj_info info, double tol))                                           \
  X(int, cusolverDnXgesvdjSetMaxSweeps, (cdv_gesvdj_info info, int sweeps))                                           \
  X(int, cusolverDnXgesvdjSetSortEig, (cdv_gesvdj_info info, int sort))                                               \
  X(int, cusolverDnCreateParams, (cdv_dn_params * p))                                                                 \
  X(int, cusolverDnDestroyParams, (cdv_dn_params p))                                                                  \
  X(int, cusolverDnXpotrf_bufferSize,                                                                                 \
    (cdv_cusolver_handle h, cdv_dn_params p, int uplo, int64_t n, int type_a, const void *a, int64_t lda, int type_c, \
     size_t *device_bytes, size_t *host_bytes))                                                                       \
  X(int, cusolverDnXpotrf,                                                                                            \
    (cdv_cusolver_handle h, cdv_dn_params p, int uplo, int64_t n, int type_a, void *a, int64_t lda, int type_c,       \
     void *device_work, size_t device_bytes, void *host_work, size_t host_bytes, int *info))                          \
  CDV_CUSOLVER_TYPED(X, float, S) CDV_CUSOLVER_TYPED(X, double, D)

#define CDV_CUSOLVER_FIELD(ret, name, params) ret(*name) params;
struct cdv_cusolver_syms {
  CDV_CUSOLVER_SYMS(CDV_CUSOLVER_FIELD)
};
extern struct cdv_cusolver_syms cdv_cusolver; /* filled once by cdv_cusolver_load(); read-only afterwards */

/* loader.c: NOTE [cusolver library] */
int cdv_cusolver_load(void); /* 0 when libcusolver is open with every entry point */
const char *cdv_cusolver_why(void); /* why not: every name tried, or the entry point it lacks */
const char *cdv_cusolver_path(void);

#endif
