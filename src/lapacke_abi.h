/*
 * lapacke_abi.h: the LAPACKE entry points cudadev uses (linalg_cpu.c's cd.linalg on the cpu device). LAPACKE's
 * header is never included and liblapacke is never linked: loader.c opens it with dlopen on first use (NOTE
 * [lapacke library]), so the module loads, and the cpu device runs everything else, where LAPACKE is missing.
 *
 * NOTE [lapacke abi]: declared from LAPACK 3.x's lapacke.h (Debian's liblapacke-dev, read, not included):
 * lapack_int is a 32-bit int in the LP64 library Debian ships (libopenblas64 would be ILP64, under other names);
 * matrix_layout LAPACK_ROW_MAJOR is 101, so a row-major cudadev matrix is passed as it is, its row length as
 * the leading dimension. Each routine returns info: 0, -i for a bad i-th argument, or the routine's positive
 * failure (a zero pivot, a minor that is not positive, no convergence).
 */
#ifndef CDV_LAPACKE_ABI_H
#define CDV_LAPACKE_ABI_H

enum { LAPACK_ROW_MAJOR = 101 };

/* X(return type, exported name, parameter list) for each routine, float (s) then double (d). */
#define CDV_LAPACKE_TYPED(X, T, p)                                                                  \
  X(int, LAPACKE_##p##getrf, (int layout, int m, int n, T *a, int lda, int *ipiv))                  \
  X(int, LAPACKE_##p##getrs,                                                                        \
    (int layout, char trans, int n, int nrhs, const T *a, int lda, const int *ipiv, T *b, int ldb)) \
  X(int, LAPACKE_##p##potrf, (int layout, char uplo, int n, T *a, int lda))                         \
  X(int, LAPACKE_##p##geqrf, (int layout, int m, int n, T *a, int lda, T *tau))                     \
  X(int, LAPACKE_##p##orgqr, (int layout, int m, int n, int k, T *a, int lda, const T *tau))        \
  X(int, LAPACKE_##p##syevd, (int layout, char jobz, char uplo, int n, T *a, int lda, T *w))        \
  X(int, LAPACKE_##p##gesdd, (int layout, char jobz, int m, int n, T *a, int lda, T *s, T *u, int ldu, T *vt, int ldvt))
#define CDV_LAPACKE_SYMS(X) CDV_LAPACKE_TYPED(X, float, s) CDV_LAPACKE_TYPED(X, double, d)

#define CDV_LAPACKE_FIELD(ret, name, params) ret(*name) params;
struct cdv_lapacke_syms {
  CDV_LAPACKE_SYMS(CDV_LAPACKE_FIELD)
};
extern struct cdv_lapacke_syms cdv_lapacke; /* filled once by cdv_lapacke_load(); read-only afterwards */

/* loader.c: NOTE [lapacke library] */
int cdv_lapacke_load(void); /* 0 when LAPACKE is open with every entry point */
const char *cdv_lapacke_why(void); /* why not: the package to install and every name tried */
const char *cdv_lapacke_path(void);

#endif
