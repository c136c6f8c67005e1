/*
 * loader.c: opens libcuda and NVRTC with dlopen on first use and resolves the entry points listed in syms.h;
 * libnccl (nccl_abi.h), libcublas (cublas_abi.h), libcufft and KISS FFT (fft_abi.h) and cd.mpi's shim (mpi_api.h) the
 * same way. The front end
 * never calls dlopen or dlsym itself (NOTE [layers]): it calls the tables filled here.
 *
 * Nothing happens at `require` time: the first call of cdv_cuda_load() / cdv_nvrtc_load() opens the library,
 * under pthread_once because several lua_States in several threads share it. A library is never dlclose'd:
 * the driver keeps threads and handlers that outlive any one lua_State, and function pointers copied out of
 * cdv_cu must stay valid for the life of the process. When a library cannot be found, the reason lists every
 * name that was tried with dlerror's text (cudarc's habit), so the user sees where we looked.
 */
#define _GNU_SOURCE /* dlinfo */
#include <dlfcn.h>
#include <glob.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend.h"
#include "syms.h"
#include "nccl_abi.h"
#include "cublas_abi.h"
#include "lapacke_abi.h"
#include "cusolver_abi.h"
#include "fft_abi.h"
#include "mpi_api.h"

struct cdv_cu_syms cdv_cu;
struct cdv_nvrtc_syms cdv_nvrtc;

/* The name tables: each library's exported (versioned) names and where each pointer goes. */
typedef struct cdv_sym {
  const char *name;
  size_t offset;
} cdv_sym;
#define CDV_CU_ENTRY(fn) {CDV_XSTR(fn), offsetof(struct cdv_cu_syms, fn)},
#define CDV_NVRTC_ENTRY(fn) {CDV_XSTR(fn), offsetof(struct cdv_nvrtc_syms, fn)},
static const cdv_sym cu_table[] = {CDV_CU_SYMS(CDV_CU_ENTRY)};
static const cdv_sym nvrtc_table[] = {CDV_NVRTC_SYMS(CDV_NVRTC_ENTRY)};
#define COUNT(a) (sizeof(a) / sizeof(a)[0])
/* cdv_X_why() and cdv_X_path(): why library X is not usable, and the file that opened; each loads it first */
#define LIB_WHY(x)                          \
  const char *cdv_##x##_why(void) {         \
    pthread_once(&x##_once, x##_load_once); \
    return x##_lib.why;                     \
  }
#define LIB_PATH(x)                         \
  const char *cdv_##x##_path(void) {        \
    pthread_once(&x##_once, x##_load_once); \
    return x##_lib.path;                    \
  }

/* What loading one library left behind. */
typedef struct lib_state {
  void *handle;
  char path[512]; /* the name that opened */
  int ntried;
  char why[8192]; /* "" once loaded */
  size_t why_len;
  CUresult init; /* libcuda: cuInit's result */
} lib_state;

static lib_state cuda_lib, nvrtc_lib;
static pthread_once_t cuda_once = PTHREAD_ONCE_INIT, nvrtc_once = PTHREAD_ONCE_INIT;

/* Append to a reason, truncating: a long list of attempts must never overflow. */
static void why_add(lib_state *l, const char *fmt, ...) {
  if (l->why_len >= sizeof l->why - 1) return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(l->why + l->why_len, sizeof l->why - l->why_len, fmt, ap);
  va_end(ap);
  if (n > 0) l->why_len += (size_t)n;
  if (l->why_len > sizeof l->why - 1) l->why_len = sizeof l->why - 1;
}

/* dlopen one candidate unless an earlier one opened; a failure joins the list of names tried. */
static void try_open(lib_state *l, const char *path) {
  if (l->handle) return;
  l->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (l->handle) {
    snprintf(l->path, sizeof l->path, "%s", path);
    return;
  }
  const char *err = dlerror();
  why_add(l, "%s%s (%s)", l->ntried++ ? ", " : "tried ", path, err ? err : "unknown error");
}

/* The loader loop: every name of a table, NULL where the library lacks it (NOTE [missing symbols]).
 * POSIX guarantees that a void * from dlsym converts to a function pointer; memcpy avoids the cast warning. */
static void resolve(void *handle, const cdv_sym *table, size_t n, void *syms) {
  for (size_t i = 0; i < n; i++) {
    void *p = dlsym(handle, table[i].name);
    memcpy((char *)syms + table[i].offset, &p, sizeof p);
  }
}

static void why_clear(lib_state *l) {
  l->why_len = 0;
  l->why[0] = '\0';
}

/* ---------------------------------------------------------------- libcuda */
static void cuda_open(void) {
  const char *env = getenv("CUDADEV_LIBCUDA");
  why_add(&cuda_lib, "no CUDA driver: ");
  if (env && *env) {
    try_open(&cuda_lib, env);
  } else {
    try_open(&cuda_lib, "libcuda.so.1");
    try_open(&cuda_lib, "libcuda.so");
  }
}

/* Drivers older than the header lack some versioned names whose prototype and meaning did not change;
 * only those fall back to the plain export. cuEventElapsedTime_v2 (CUDA 12.8) is one. */
static void cuda_fallbacks(void) {
  if (!cdv_cu.cuEventElapsedTime) {
    void *p = dlsym(cuda_lib.handle, "cuEventElapsedTime");
    memcpy(&cdv_cu.cuEventElapsedTime, &p, sizeof p);
  }
}

/* cuInit(0) once per process; its failure (no device, stub library, driver/kernel mismatch) is the reason. */
static void cuda_init(void) {
  if (!cdv_cu.cuInit) {
    cuda_lib.init = CUDA_ERROR_NOT_FOUND;
    why_add(&cuda_lib, "%s does not export cuInit", cuda_lib.path);
    return;
  }
  cuda_lib.init = cdv_cu.cuInit(0);
  if (cuda_lib.init == CUDA_SUCCESS) return;
  cdv_err e;
  cdv_cu_error(&e, "cuInit", cuda_lib.init);
  why_add(&cuda_lib, "cuInit failed: %s: %s (%s)", e.name, e.message, cuda_lib.path);
}

static void cuda_load_once(void) {
  cuda_lib.init = CUDA_ERROR_NOT_INITIALIZED;
  cuda_open();
  if (!cuda_lib.handle) return;
  resolve(cuda_lib.handle, cu_table, COUNT(cu_table), &cdv_cu);
  cuda_fallbacks();
  why_clear(&cuda_lib);
  cuda_init();
}

int cdv_cuda_load(void) {
  pthread_once(&cuda_once, cuda_load_once);
  return cuda_lib.handle && cuda_lib.init == CUDA_SUCCESS ? 0 : -1;
}

LIB_WHY(cuda)

/* cuInit's own error when the driver opened, else the list of names tried. */
int cdv_cuda_unavailable(cdv_err *e) {
  if (cdv_cuda_load() == 0) return cdv_fail(e, "cuInit", 0, "CUDA_ERROR_UNKNOWN", "driver unavailable");
  if (cuda_lib.handle && cuda_lib.init != CUDA_ERROR_NOT_FOUND) return cdv_cu_error(e, "cuInit", cuda_lib.init);
  return cdv_fail(e, "dlopen", 0, "CUDA_DRIVER_NOT_FOUND", "%s", cuda_lib.why);
}

/* ---------------------------------------------------------------- NVRTC */
/* Newest first: a newer NVRTC knows every architecture an older one does. */
static const char *const nvrtc_sonames[] = {
    "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so.11.1", "libnvrtc.so.11.0", "libnvrtc.so",
};

/* The toolkit folders, without duplicates ($CUDA_HOME is often /usr/local/cuda). */
static int nvrtc_dirs(const char *dirs[3]) {
  const char *cand[3] = {getenv("CUDA_HOME"), getenv("CUDA_PATH"), "/usr/local/cuda"};
  int n = 0;
  for (int i = 0; i < 3; i++) {
    if (!cand[i] || !*cand[i]) continue;
    int dup = 0;
    for (int j = 0; j < n; j++) dup |= strcmp(dirs[j], cand[i]) == 0;
    if (!dup) dirs[n++] = cand[i];
  }
  return n;
}

/* Each soname through the dynamic linker's own search (LD_LIBRARY_PATH, ld.so.cache), then in each toolkit. */
static void nvrtc_open(void) {
  const char *env = getenv("CUDADEV_LIBNVRTC");
  why_add(&nvrtc_lib, "no NVRTC: ");
  if (env && *env) {
    try_open(&nvrtc_lib, env);
    return;
  }
  const char *dirs[3];
  int ndirs = nvrtc_dirs(dirs);
  for (size_t i = 0; i < COUNT(nvrtc_sonames) && !nvrtc_lib.handle; i++) {
    try_open(&nvrtc_lib, nvrtc_sonames[i]);
    for (int j = 0; j < ndirs; j++) {
      char path[1024];
      snprintf(path, sizeof path, "%s/lib64/%s", dirs[j], nvrtc_sonames[i]);
      try_open(&nvrtc_lib, path);
    }
  }
}

static void nvrtc_load_once(void) {
  nvrtc_open();
  if (!nvrtc_lib.handle) return;
  resolve(nvrtc_lib.handle, nvrtc_table, COUNT(nvrtc_table), &cdv_nvrtc);
  why_clear(&nvrtc_lib);
}

int cdv_nvrtc_load(void) {
  pthread_once(&nvrtc_once, nvrtc_load_once);
  return nvrtc_lib.handle ? 0 : -1;
}

LIB_WHY(nvrtc)

/* dlinfo(RTLD_DI_LINKMAP): the file the dynamic linker opened for NVRTC, for NOTE [nvrtc identity]. */
const char *cdv_nvrtc_file(void) {
  struct link_map *lm = NULL;
  if (cdv_nvrtc_load() != 0 || dlinfo(nvrtc_lib.handle, RTLD_DI_LINKMAP, &lm) != 0 || !lm || !lm->l_name) return "";
  return lm->l_name;
}

int cdv_nvrtc_unavailable(cdv_err *e) { return cdv_fail(e, "dlopen", 0, "NVRTC_NOT_FOUND", "%s", cdv_nvrtc_why()); }

/* ---------------------------------------------------------------- NCCL */
/* NOTE [nccl library]: libnccl (src/nccl.c's communicators) is opened like libcuda, on first use and never at
 * `require`: CUDADEV_LIBNCCL when set (that file alone), else libnccl.so.2 and libnccl.so through the dynamic
 * linker's own search (LD_LIBRARY_PATH, ld.so.cache), then in each CUDA toolkit's lib64 and lib folders (the
 * toolkit's tarball ships NCCL in lib), then where Python installs NVIDIA's wheel (nvidia-nccl-cu*, which
 * PyTorch depends on): site-packages/nvidia/nccl/lib of the active virtual environment, of virtual environments
 * under /opt (the GPU hosts' /opt/torch/.venv), of the system's and the user's Python. Python itself is never
 * run. A library that opens but lacks one of the core entry points is no NCCL; the reason then names it. */
struct cdv_nccl_syms cdv_nccl;

#define CDV_NCCL_ENTRY(ret, name, params) {#name, offsetof(struct cdv_nccl_syms, name)},
static const cdv_sym nccl_table[] = {CDV_NCCL_SYMS(CDV_NCCL_ENTRY)};
static lib_state nccl_lib;
static pthread_once_t nccl_once = PTHREAD_ONCE_INIT;

/* Each file matching a pattern; a pattern that matches nothing joins the list of names tried. */
static void try_glob(lib_state *l, const char *pattern) {
  glob_t g;
  if (l->handle) return;
  if (glob(pattern, 0, NULL, &g) != 0) {
    why_add(l, "%s%s (no such file)", l->ntried++ ? ", " : "tried ", pattern);
    return;
  }
  for (size_t i = g.gl_pathc; i-- > 0 && !l->handle;) try_open(l, g.gl_pathv[i]); /* the newest Python first */
  globfree(&g);
}

static void nccl_open(void) {
  static const char *const wheel = "lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2";
  const char *env = getenv("CUDADEV_LIBNCCL");
  char path[1024];
  why_add(&nccl_lib, "no NCCL: ");
  if (env && *env) {
    try_open(&nccl_lib, env);
    return;
  }
  try_open(&nccl_lib, "libnccl.so.2");
  try_open(&nccl_lib, "libnccl.so");
  const char *dirs[3];
  int ndirs = nvrtc_dirs(dirs);
  for (int j = 0; j < ndirs && !nccl_lib.handle; j++) {
    snprintf(path, sizeof path, "%s/lib64/libnccl.so.2", dirs[j]);
    try_open(&nccl_lib, path);
    snprintf(path, sizeof path, "%s/lib/libnccl.so.2", dirs[j]);
    try_open(&nccl_lib, path);
  }
  const char *venv = getenv("VIRTUAL_ENV"), *home = getenv("HOME");
  if (venv && *venv) {
    snprintf(path, sizeof path, "%s/%s", venv, wheel);
    try_glob(&nccl_lib, path);
  }
  snprintf(path, sizeof path, "/opt/*/.venv/%s", wheel);
  try_glob(&nccl_lib, path);
  try_glob(&nccl_lib, "/usr/local/lib/python3*/dist-packages/nvidia/nccl/lib/libnccl.so.2");
  try_glob(&nccl_lib, "/usr/lib/python3/dist-packages/nvidia/nccl/lib/libnccl.so.2");
  if (home && *home) {
    snprintf(path, sizeof path, "%s/.local/%s", home, wheel);
    try_glob(&nccl_lib, path);
  }
}

static void nccl_load_once(void) {
  /* what every communicator needs; the rest fails by name when used (NOTE [missing symbols]) */
  static const char *const core[] = {"ncclGetErrorString", "ncclGetUniqueId", "ncclCommInitRank", "ncclCommDestroy",
                                     "ncclAllReduce",      "ncclGroupStart",  "ncclGroupEnd"};
  nccl_open();
  if (!nccl_lib.handle) return;
  resolve(nccl_lib.handle, nccl_table, COUNT(nccl_table), &cdv_nccl);
  why_clear(&nccl_lib);
  for (size_t i = 0; i < COUNT(core); i++)
    if (dlsym(nccl_lib.handle, core[i]) == NULL) {
      why_add(&nccl_lib, "no NCCL: %s does not export %s", nccl_lib.path, core[i]);
      return;
    }
}

int cdv_nccl_load(void) {
  pthread_once(&nccl_once, nccl_load_once);
  return nccl_lib.handle && nccl_lib.why_len == 0 ? 0 : -1;
}

LIB_WHY(nccl)

LIB_PATH(nccl)

/* ---------------------------------------------------------------- cuBLAS */
/* NOTE [cublas library]: libcublas (blas.c's cd.matmul on a CUDA device, NOTE [cublas abi]) is opened like
 * libcuda, on first use and never at `require`: CUDADEV_LIBCUBLAS alone when set; else libcublas.so.13, .12 and
 * libcublas.so in turn, each through the dynamic linker's own search, then in $CUDA_HOME/lib64 (when it is not
 * /usr/local/cuda), then in /usr/local/cuda/lib64. When none opens, the reason ends by naming
 * CUDADEV_LIBCUBLAS; a library that opens but lacks an entry point other than cublasGetStatusString is no
 * cuBLAS, and the reason names what it lacks. */
struct cdv_cublas_syms cdv_cublas;

#define CDV_CUBLAS_ENTRY(ret, name, params) {#name, offsetof(struct cdv_cublas_syms, name)},
static const cdv_sym cublas_table[] = {CDV_CUBLAS_SYMS(CDV_CUBLAS_ENTRY)};
static lib_state cublas_lib;
static pthread_once_t cublas_once = PTHREAD_ONCE_INIT;

/* A CUDA toolkit library (cuBLAS, cuFFT): env alone when set; else each of the n sonames through the dynamic
 * linker's search, then in $CUDA_HOME/lib64 (when it is not /usr/local/cuda), then in /usr/local/cuda/lib64. */
static void toolkit_open(lib_state *l, const char *env_name, const char *const *sonames, size_t n, const char *what) {
  const char *env = getenv(env_name), *home = getenv("CUDA_HOME");
  why_add(l, "no %s: ", what);
  if (env && *env) {
    try_open(l, env);
  } else {
    for (size_t i = 0; i < n; i++) {
      char path[1024];
      try_open(l, sonames[i]);
      if (home && *home && strcmp(home, "/usr/local/cuda") != 0) {
        snprintf(path, sizeof path, "%s/lib64/%s", home, sonames[i]);
        try_open(l, path);
      }
      snprintf(path, sizeof path, "/usr/local/cuda/lib64/%s", sonames[i]);
      try_open(l, path);
    }
  }
  if (!l->handle) why_add(l, "; set %s to the path of %s", env_name, sonames[n - 1]);
}

/* Resolves an opened library's table into syms; a library lacking an entry point (but `optional`) is not
 * loaded, and the reason names what it lacks. */
static void resolve_all(lib_state *l, const cdv_sym *table, size_t n, void *syms, const char *what,
                        const char *optional) {
  if (!l->handle) return;
  resolve(l->handle, table, n, syms);
  why_clear(l);
  for (size_t i = 0; i < n; i++) {
    void *p;
    memcpy(&p, (char *)syms + table[i].offset, sizeof p);
    if (p == NULL && (optional == NULL || strcmp(table[i].name, optional) != 0)) {
      why_add(l, "no %s: %s does not export %s", what, l->path, table[i].name);
      return;
    }
  }
}

static void cublas_load_once(void) {
  static const char *const sonames[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so"};
  toolkit_open(&cublas_lib, "CUDADEV_LIBCUBLAS", sonames, COUNT(sonames), "cuBLAS");
  resolve_all(&cublas_lib, cublas_table, COUNT(cublas_table), &cdv_cublas, "cuBLAS", "cublasGetStatusString");
}

int cdv_cublas_load(void) {
  pthread_once(&cublas_once, cublas_load_once);
  return cublas_lib.handle && cublas_lib.why_len == 0 ? 0 : -1;
}

LIB_WHY(cublas)

LIB_PATH(cublas)

/* ---------------------------------------------------------------- LAPACKE */
/* NOTE [lapacke library]: LAPACKE (linalg_cpu.c's cd.linalg on the cpu device, NOTE [lapacke abi]) is opened
 * on first use, never at `require`: CUDADEV_LIBLAPACKE alone when set; else Debian's liblapacke.so.3, then
 * liblapacke.so, then OpenBLAS (libopenblas.so.0 carries a LAPACKE of its own). When none opens, the reason
 * names the Debian package and every name tried. */
struct cdv_lapacke_syms cdv_lapacke;

#define CDV_LAPACKE_ENTRY(ret, name, params) {#name, offsetof(struct cdv_lapacke_syms, name)},
static const cdv_sym lapacke_table[] = {CDV_LAPACKE_SYMS(CDV_LAPACKE_ENTRY)};
static lib_state lapacke_lib;
static pthread_once_t lapacke_once = PTHREAD_ONCE_INIT;

static void lapacke_load_once(void) {
  static const char *const sonames[] = {"liblapacke.so.3", "liblapacke.so", "libopenblas.so.0"};
  const char *env = getenv("CUDADEV_LIBLAPACKE");
  why_add(&lapacke_lib, "no LAPACKE (install Debian's liblapacke, or set CUDADEV_LIBLAPACKE to its path): ");
  if (env && *env)
    try_open(&lapacke_lib, env);
  else
    for (size_t i = 0; i < COUNT(sonames); i++) try_open(&lapacke_lib, sonames[i]);
  resolve_all(&lapacke_lib, lapacke_table, COUNT(lapacke_table), &cdv_lapacke, "LAPACKE", NULL);
  if (lapacke_lib.why_len != 0) return;
  /* NaN in a matrix: LAPACKE refuses it (info -i) unless told not to look; NumPy hands it to LAPACK, which gives
   * NaN results (getrf, geqrf), a failed minor (potrf) or no convergence (syevd, gesdd): as NumPy, it is not looked
   * for (LAPACKE 3.6 and later; an older one keeps looking, and linalg.lua words its refusal) */
  void (*nancheck)(int) = NULL;
  void *sym = dlsym(lapacke_lib.handle, "LAPACKE_set_nancheck");
  memcpy(&nancheck, &sym, sizeof sym);
  if (nancheck != NULL) nancheck(0);
}

int cdv_lapacke_load(void) {
  pthread_once(&lapacke_once, lapacke_load_once);
  return lapacke_lib.handle && lapacke_lib.why_len == 0 ? 0 : -1;
}

LIB_WHY(lapacke)

LIB_PATH(lapacke)

/* ---------------------------------------------------------------- cuSOLVER */
/* NOTE [cusolver library]: libcusolver (linalg_cuda.c's cd.linalg on a CUDA device, NOTE [cusolver abi]) is
 * opened as cuBLAS is (NOTE [cublas library]), on first use: CUDADEV_LIBCUSOLVER alone when set; else
 * libcusolver.so.12 (CUDA 13 and 12.x's later releases), .11 (CUDA 11 and 12) and libcusolver.so, each through the
 * dynamic linker's search, then in $CUDA_HOME/lib64 and /usr/local/cuda/lib64. */
struct cdv_cusolver_syms cdv_cusolver;

#define CDV_CUSOLVER_ENTRY(ret, name, params) {#name, offsetof(struct cdv_cusolver_syms, name)},
static const cdv_sym cusolver_table[] = {CDV_CUSOLVER_SYMS(CDV_CUSOLVER_ENTRY)};
static lib_state cusolver_lib;
static pthread_once_t cusolver_once = PTHREAD_ONCE_INIT;

static void cusolver_load_once(void) {
  static const char *const sonames[] = {"libcusolver.so.12", "libcusolver.so.11", "libcusolver.so"};
  toolkit_open(&cusolver_lib, "CUDADEV_LIBCUSOLVER", sonames, COUNT(sonames), "cuSOLVER");
  resolve_all(&cusolver_lib, cusolver_table, COUNT(cusolver_table), &cdv_cusolver, "cuSOLVER", NULL);
}

int cdv_cusolver_load(void) {
  pthread_once(&cusolver_once, cusolver_load_once);
  return cusolver_lib.handle && cusolver_lib.why_len == 0 ? 0 : -1;
}

LIB_WHY(cusolver)

LIB_PATH(cusolver)
/* ---------------------------------------------------------------- cuFFT and KISS FFT */
/* NOTE [cufft library]: libcufft (fft.c's cd.fft on a CUDA device, NOTE [cufft abi]) is opened as cuBLAS is (NOTE
 * [cublas library]): CUDADEV_LIBCUFFT alone when set; else libcufft.so.12 (CUDA 12 and 13), .11 and libcufft.so,
 * each by the dynamic linker's search, in $CUDA_HOME/lib64 and in /usr/local/cuda/lib64; every entry point must be
 * there. */
struct cdv_cufft_syms cdv_cufft;
#define CDV_FFT_ENTRY(ret, name, params) {#name, offsetof(struct cdv_cufft_syms, name)},
static const cdv_sym cufft_table[] = {CDV_CUFFT_SYMS(CDV_FFT_ENTRY)};
#undef CDV_FFT_ENTRY
static lib_state cufft_lib;
static pthread_once_t cufft_once = PTHREAD_ONCE_INIT;

static void cufft_load_once(void) {
  static const char *const sonames[] = {"libcufft.so.12", "libcufft.so.11", "libcufft.so"};
  toolkit_open(&cufft_lib, "CUDADEV_LIBCUFFT", sonames, COUNT(sonames), "cuFFT");
  resolve_all(&cufft_lib, cufft_table, COUNT(cufft_table), &cdv_cufft, "cuFFT", NULL);
}

int cdv_cufft_load(void) {
  pthread_once(&cufft_once, cufft_load_once);
  return cufft_lib.handle && cufft_lib.why_len == 0 ? 0 : -1;
}

LIB_WHY(cufft)

LIB_PATH(cufft)

/* NOTE [kiss fft]: the cpu device's complex64 transforms are KISS FFT's (NOTE [kiss abi]), Debian's
 * libkissfft-float131, opened on first use so that the module loads, and the cpu device works, where it is missing:
 * CUDADEV_LIBKISSFFT alone when set; else libkissfft-float.so.131 and libkissfft-float.so. A transform that needs it
 * then fails naming the package and every name tried. */
struct cdv_kiss_syms cdv_kiss;
#define CDV_FFT_ENTRY(ret, name, params) {#name, offsetof(struct cdv_kiss_syms, name)},
static const cdv_sym kissfft_table[] = {CDV_KISS_SYMS(CDV_FFT_ENTRY)};
#undef CDV_FFT_ENTRY
static lib_state kissfft_lib;
static pthread_once_t kissfft_once = PTHREAD_ONCE_INIT;

static void kissfft_load_once(void) {
  const char *env = getenv("CUDADEV_LIBKISSFFT");
  why_add(&kissfft_lib, "no KISS FFT for the cpu device's complex64 transforms: ");
  if (env && *env) {
    try_open(&kissfft_lib, env);
  } else {
    try_open(&kissfft_lib, "libkissfft-float.so.131");
    try_open(&kissfft_lib, "libkissfft-float.so");
  }
  if (!kissfft_lib.handle)
    why_add(&kissfft_lib,
            "; install Debian's libkissfft-float131 (apt-get install libkissfft-float131), or set "
            "CUDADEV_LIBKISSFFT to the library's path");
  resolve_all(&kissfft_lib, kissfft_table, COUNT(kissfft_table), &cdv_kiss, "KISS FFT", NULL);
}

int cdv_kissfft_load(void) {
  pthread_once(&kissfft_once, kissfft_load_once);
  return kissfft_lib.handle && kissfft_lib.why_len == 0 ? 0 : -1;
}

LIB_WHY(kissfft)

LIB_PATH(kissfft)

/* ---------------------------------------------------------------- cd.mpi's shim */
/* cudadev_mpi.so (NOTE [mpi shim] in mpi_api.h): opened RTLD_GLOBAL, since OpenMPI's own plugins resolve
 * libmpi's symbols globally; CUDADEV_MPI_SHIM alone when set; else beside the file that holds this code
 * (build/cudadev.so, or build/luacuda, which links the module in), then where `make install` put it. Never
 * dlclosed: MPI lives until the process ends. The reason lists each failure, "; " between them. */
static lib_state mpi_lib;
static const cdv_mpi_api *mpi_api;
static pthread_once_t mpi_once = PTHREAD_ONCE_INIT;

#ifdef CDV_HAVE_MPI
static void try_shim(const char *path) {
  if (mpi_api != NULL) return;
  void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
  const char *err = h == NULL ? dlerror() : NULL;
  const cdv_mpi_api *(*get)(void) = NULL;
  if (h != NULL) {
    void *p = dlsym(h, CDV_MPI_SHIM_SYMBOL);
    memcpy(&get, &p, sizeof p);
    if (get == NULL)
      err = "no " CDV_MPI_SHIM_SYMBOL " in it";
    else if (get()->version != CDV_MPI_API_VERSION)
      err = "made for another version of cudadev";
    else {
      mpi_api = get();
      return;
    }
  }
  if (h == NULL)
    why_add(&mpi_lib, "%s%s", mpi_lib.why_len ? "; " : "", err ? err : "unknown error");
  else
    why_add(&mpi_lib, "%s%s: %s", mpi_lib.why_len ? "; " : "", path, err);
}
#endif

static void mpi_load_once(void) {
#ifndef CDV_HAVE_MPI
  why_add(&mpi_lib, "this cudadev was built without MPI (install libopenmpi-dev, then rebuild)");
#else
  const char *env = getenv("CUDADEV_MPI_SHIM");
  if (env != NULL && *env != '\0') {
    try_shim(env);
    return;
  }
  Dl_info info;
  if (dladdr((void *)mpi_load_once, &info) != 0 && info.dli_fname != NULL) {
    char path[1024];
    const char *slash = strrchr(info.dli_fname, '/');
    int dir = slash != NULL ? (int)(slash - info.dli_fname) : 1;
    snprintf(path, sizeof path, "%.*s/cudadev_mpi.so", dir, slash != NULL ? info.dli_fname : ".");
    try_shim(path);
  }
#ifdef CDV_MPI_SHIM_INSTALLED
  try_shim(CDV_MPI_SHIM_INSTALLED);
#endif
#endif
}

const cdv_mpi_api *cdv_mpi_load(const char **why) {
  pthread_once(&mpi_once, mpi_load_once);
  if (why != NULL) *why = mpi_lib.why;
  return mpi_api;
}

/* ---------------------------------------------------------------- missing entry points */
/* CUDA_ERROR_NOT_FOUND is the driver's own code for "named symbol not found". */
int cdv_sym_missing(cdv_err *e, const char *api, const char *symbol, const char *lib) {
  const char *path = strcmp(lib, "libcuda") == 0 ? cuda_lib.path : nvrtc_lib.path;
  return cdv_fail(e, api, CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "%s does not export %s (%s is too old)",
                  *path ? path : lib, symbol, strcmp(lib, "libcuda") == 0 ? "the driver" : "NVRTC");
}
