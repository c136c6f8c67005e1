/*
 * fft_abi.h: the few values and entry points of cuFFT (cd.fft on a CUDA device) and of KISS FFT (cd.fft's complex64
 * on the cpu device) that fft.c uses. Neither header is included and neither library is linked: loader.c opens them
 * with dlopen on first use (NOTE [cufft library], NOTE [kiss fft] in loader.c), so the module loads, and the other
 * transforms work, where one is missing.
 *
 * NOTE [cufft abi]: declared from cuFFT's documented C ABI (cufft.h of CUDA 11 to 13: libcufft.so.10 to .12, the
 * same calls): cufftHandle is an int, cufftResult and cufftType are C enums passed as int (CUFFT_C2C 0x29, R2C
 * 0x2a, C2R 0x2c, Z2Z 0x69, D2Z 0x6a, Z2D 0x6c; CUFFT_FORWARD -1, CUFFT_INVERSE 1), cufftComplex is two floats
 * and cufftDoubleComplex two doubles (the complex dtypes' layout), the stream a CUstream passed as void *.
 */
#ifndef CDV_FFT_ABI_H
#define CDV_FFT_ABI_H

#include <stddef.h>

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

#define CDV_FFT_FIELD(ret, name, params) ret(*name) params;
struct cdv_cufft_syms {
  CDV_CUFFT_SYMS(CDV_FFT_FIELD)
};
extern struct cdv_cufft_syms cdv_cufft; /* filled once by cdv_cufft_load(); read-only afterwards */

/* NOTE [kiss abi]: KISS FFT 131 (kiss_fft.h of Debian's libkissfft-dev, kiss_fft_scalar float): kiss_fft_cpx is two
 * floats, a config is an opaque pointer from kiss_fft_alloc (malloc'd by the library's non-SIMD build: free()
 * releases it), kiss_fft transforms nfft points, unnormalised both ways. */
typedef struct cdv_kiss_cpx {
  float r, i;
} cdv_kiss_cpx;
#define CDV_KISS_SYMS(X)                                                            \
  X(void *, kiss_fft_alloc, (int nfft, int inverse_fft, void *mem, size_t *lenmem)) \
  X(void, kiss_fft, (void *cfg, const cdv_kiss_cpx *fin, cdv_kiss_cpx *fout))
struct cdv_kiss_syms {
  CDV_KISS_SYMS(CDV_FFT_FIELD)
};
extern struct cdv_kiss_syms cdv_kiss; /* filled once by cdv_kissfft_load() */

/* loader.c: 0 when the library is open with every entry point; why not (every name tried); the name that opened */
int cdv_cufft_load(void);
const char *cdv_cufft_why(void);
const char *cdv_cufft_path(void);
int cdv_kissfft_load(void);
const char *cdv_kissfft_why(void);
const char *cdv_kissfft_path(void);

#endif
