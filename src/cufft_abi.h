/*
 * cufft_abi.h: the few values and entry points of cuFFT that cudadev uses (fft.c's cd.fft on a CUDA device).
 * cuFFT's header is never included and libcufft is never linked: fft.c opens it with dlopen on first use (NOTE
 * [cufft library] in fft.c), as loader.c opens cuBLAS, so the module loads and the cpu device transforms where
 * there is no cuFFT.
 *
 * NOTE [cufft abi]: declared from cuFFT's documented C ABI (cufft.h of CUDA 11 to 13: libcufft.so.10 to .12, the
 * same calls): cufftHandle is an int, cufftResult and cufftType are C enums passed as int (CUFFT_C2C 0x29, R2C
 * 0x2a, C2R 0x2c, Z2Z 0x69, D2Z 0x6a, Z2D 0x6c; CUFFT_FORWARD -1, CUFFT_INVERSE 1), cufftComplex is two floats
 * and cufftDoubleComplex two doubles (the complex dtypes' layout), the stream a CUstream passed as void *.
 */
#ifndef CDV_CUFFT_ABI_H
#define CDV_CUFFT_ABI_H

enum {
  CUFFT_C2C = 0x29,
  CUFFT_R2C = 0x2a,
  CUFFT_C2R = 0x2c,
  CUFFT_Z2Z = 0x69,
  CUFFT_D2Z = 0x6a,
  CUFFT_Z2D = 0x6c,
  CUFFT_FORWARD = -1,
  CUFFT_INVERSE = 1
};

/* The entry points: X(return type, exported name, parameter list); every one must be there. */
#define CDV_CUFFT_SYMS(X)                                                                                     \
  X(int, cufftPlanMany,                                                                                       \
    (int *plan, int rank, int *n, int *inembed, int istride, int idist, int *onembed, int ostride, int odist, \
     int type, int batch))                                                                                    \
  X(int, cufftSetStream, (int plan, void *stream))                                                            \
  X(int, cufftDestroy, (int plan))                                                                            \
  X(int, cufftExecC2C, (int plan, void *idata, void *odata, int direction))                                   \
  X(int, cufftExecR2C, (int plan, void *idata, void *odata))                                                  \
  X(int, cufftExecC2R, (int plan, void *idata, void *odata))                                                  \
  X(int, cufftExecZ2Z, (int plan, void *idata, void *odata, int direction))                                   \
  X(int, cufftExecD2Z, (int plan, void *idata, void *odata))                                                  \
  X(int, cufftExecZ2D, (int plan, void *idata, void *odata))

#define CDV_CUFFT_FIELD(ret, name, params) ret(*name) params;
struct cdv_cufft_syms {
  CDV_CUFFT_SYMS(CDV_CUFFT_FIELD)
};

#endif
