/*
 * c_driver.c: the baseline of bench/run. The same measurements as bench/lua_bench.lua, made with the CUDA
 * driver API and NVRTC called directly, so every cudadev number can be read as a ratio against what a C
 * program gets from the same GPU in the same run.
 *
 * Output: one `name value unit` line per measurement on stdout, `info key value...` lines for the table's
 * heading; errors go to stderr with the failing call, and the exit status is 1 (2: no CUDA device).
 *
 * Nothing is linked against libcuda or libnvrtc: both are dlopen'd, as cudadev does, so this builds with the
 * toolkit's headers alone. Entry points are looked up by the name cuda.h maps them to (cuMemAlloc ->
 * cuMemAlloc_v2), the export a program linked with -lcuda would call (see src/syms.h, NOTE [versioned
 * symbols]). CUDA_API_PER_THREAD_DEFAULT_STREAM stays undefined: stream 0 is the legacy default stream,
 * the one cudadev uses when no stream is given.
 *
 * Method (/work/.library/device/METHOD.md): warm up first; host-side costs (launches, allocation, compile,
 * pageable copies) by the monotonic clock, with the synchronisation inside the timed region; device work
 * (the saxpy kernel, pinned and device copies) by events; the median of several repetitions; saxpy on random
 * inputs, output poisoned with NaN before every run and checked against a double-precision host result.
 *
 * Build: gcc -O2 -I<cuda include> bench/c_driver.c -ldl -o c_driver
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <nvrtc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define STR_(x) #x
#define XSTR(x) STR_(x) /* after expansion: cuMemAlloc -> "cuMemAlloc_v2" */

/* one entry a line, left alone by clang-format, which reflowed these lists differently on each run */
// clang-format off
#define CU_SYMS(X) \
  X(cuInit) \
  X(cuDriverGetVersion) \
  X(cuGetErrorName) \
  X(cuGetErrorString) \
  X(cuDeviceGetCount) \
  X(cuDeviceGet) \
  X(cuDeviceGetName) \
  X(cuDeviceGetAttribute) \
  X(cuDevicePrimaryCtxRetain) \
  X(cuCtxSetCurrent) \
  X(cuCtxSynchronize) \
  X(cuModuleLoadData) \
  X(cuModuleGetFunction) \
  X(cuLaunchKernel) \
  X(cuMemAlloc) \
  X(cuMemFree) \
  X(cuMemAllocAsync) \
  X(cuMemFreeAsync) \
  X(cuDeviceGetDefaultMemPool) \
  X(cuMemPoolSetAttribute) \
  X(cuMemHostAlloc) \
  X(cuMemFreeHost) \
  X(cuMemcpyHtoD) \
  X(cuMemcpyDtoH) \
  X(cuMemcpyHtoDAsync) \
  X(cuMemcpyDtoHAsync) \
  X(cuMemcpyDtoDAsync) \
  X(cuMemsetD32Async) \
  X(cuStreamSynchronize) \
  X(cuEventCreate) \
  X(cuEventRecord) \
  X(cuEventSynchronize) \
  X(cuEventElapsedTime) \
  X(cuMemcpyPeerAsync) \
  X(cuCtxEnablePeerAccess) \
  X(cuDeviceCanAccessPeer) \
  X(cuStreamCreate) \
  X(cuStreamDestroy) \
  X(cuStreamBeginCapture) \
  X(cuStreamEndCapture) \
  X(cuGraphInstantiate) \
  X(cuGraphLaunch) \
  X(cuGraphExecDestroy) \
  X(cuGraphDestroy)
// clang-format on

/* one entry a line, left alone by clang-format, which reflowed these lists differently on each run */
// clang-format off
#define NVRTC_SYMS(X) \
  X(nvrtcVersion) \
  X(nvrtcGetErrorString) \
  X(nvrtcCreateProgram) \
  X(nvrtcDestroyProgram) \
  X(nvrtcCompileProgram) \
  X(nvrtcGetProgramLogSize) \
  X(nvrtcGetProgramLog) \
  X(nvrtcGetPTXSize) \
  X(nvrtcGetPTX) \
  X(nvrtcGetCUBINSize) \
  X(nvrtcGetCUBIN) \
  X(nvrtcGetNumSupportedArchs) \
  X(nvrtcGetSupportedArchs)
// clang-format on

#define FIELD(fn) __typeof__(&fn) fn;
static struct { CU_SYMS(FIELD) } cu;
static struct { NVRTC_SYMS(FIELD) } nv;

/* ------------------------------------------------------------------ loading */

/* The first of names that opens; when none does, the reason lists every name with dlerror's text. */
static void *open_first(const char *what, const char *const *names) {
  char tried[4096] = "";
  for (int i = 0; names[i]; i++) {
    if (!*names[i]) continue;
    void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (h) return h;
    const char *err = dlerror();
    size_t used = strlen(tried);
    snprintf(tried + used, sizeof tried - used, "%s%s", used ? "; " : "", err ? err : names[i]);
  }
  if (strcmp(what, "libcuda") == 0) { /* no driver: bench/run reports it as no device */
    fprintf(stderr, "no CUDA device: cannot open libcuda (tried: %s)\n", tried);
    exit(2);
  }
  fprintf(stderr, "c_driver: cannot open %s (tried: %s)\n", what, tried);
  exit(1);
}

/* The versioned export first; a driver older than the header may only have the plain name. */
static void *sym(void *h, const char *lib, const char *name) {
  void *p = dlsym(h, name);
  if (!p) {
    char plain[128];
    snprintf(plain, sizeof plain, "%s", name);
    char *v = strstr(plain, "_v");
    if (v && v[2] >= '0' && v[2] <= '9') {
      *v = '\0';
      p = dlsym(h, plain);
    }
  }
  if (!p) {
    fprintf(stderr, "c_driver: %s does not export %s\n", lib, name);
    exit(1);
  }
  return p;
}

/* The libraries cudadev would open (src/loader.c): CUDADEV_LIBCUDA / CUDADEV_LIBNVRTC when set, else by soname,
 * NVRTC also in the toolkit's lib64. */
static void load(void) {
  const char *env = getenv("CUDADEV_LIBCUDA"), *nvenv = getenv("CUDADEV_LIBNVRTC"), *home = getenv("CUDA_HOME");
  char home13[512] = "", home12[512] = "";
  if (home && *home) {
    snprintf(home13, sizeof home13, "%s/lib64/libnvrtc.so.13", home);
    snprintf(home12, sizeof home12, "%s/lib64/libnvrtc.so.12", home);
  }
  const char *const cuda_names[] = {env ? env : "", "libcuda.so.1", "libcuda.so", NULL};
  const char *const nvrtc_names[] = {nvenv ? nvenv : "",
                                     "libnvrtc.so.13",
                                     "libnvrtc.so.12",
                                     home13,
                                     home12,
                                     "/usr/local/cuda/lib64/libnvrtc.so.13",
                                     "/usr/local/cuda/lib64/libnvrtc.so.12",
                                     "libnvrtc.so",
                                     NULL};
  void *hc = open_first("libcuda", cuda_names);
#define LOAD_CU(fn) *(void **)&cu.fn = sym(hc, "libcuda", XSTR(fn));
  CU_SYMS(LOAD_CU)
  void *hn = open_first("NVRTC", nvrtc_names);
#define LOAD_NV(fn) *(void **)&nv.fn = sym(hn, "libnvrtc", XSTR(fn));
  NVRTC_SYMS(LOAD_NV)
}

/* ------------------------------------------------------------------ checked calls */

static void cu_fail(CUresult r, const char *call, int line) {
  const char *name = NULL, *msg = NULL;
  cu.cuGetErrorName(r, &name);
  cu.cuGetErrorString(r, &msg);
  fprintf(stderr, "c_driver: %s failed: %s: %s (c_driver.c:%d)\n", call, name ? name : "?", msg ? msg : "?", line);
  exit(1);
}
#define CU(call)                                          \
  do {                                                    \
    CUresult r_ = cu.call;                                \
    if (r_ != CUDA_SUCCESS) cu_fail(r_, #call, __LINE__); \
  } while (0)

static void nv_fail(nvrtcResult r, const char *call, int line) {
  fprintf(stderr, "c_driver: %s failed: %s (c_driver.c:%d)\n", call, nv.nvrtcGetErrorString(r), line);
  exit(1);
}
#define NV(call)                                           \
  do {                                                     \
    nvrtcResult r_ = nv.call;                              \
    if (r_ != NVRTC_SUCCESS) nv_fail(r_, #call, __LINE__); \
  } while (0)

static void *xmalloc(size_t n) {
  void *p = malloc(n);
  if (!p) {
    fprintf(stderr, "c_driver: out of host memory (%zu bytes)\n", n);
    exit(1);
  }
  return p;
}

/* ------------------------------------------------------------------ measuring */

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static CUevent ev0, ev1;

/* Milliseconds between ev0 and ev1, once ev1 has happened. */
static double event_ms(void) {
  float ms = 0;
  CU(cuEventSynchronize(ev1));
  CU(cuEventElapsedTime(&ms, ev0, ev1));
  return ms;
}

/* A reproducible stream of floats in [0, 1) (xorshift64*): random inputs, never zeros. */
static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static float frand(void) {
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return (float)((rng * 0x2545f4914f6cdd1dULL) >> 40) * (1.0f / 16777216.0f);
}

/* ------------------------------------------------------------------ kernels (the same text as lua_bench.lua) */

static const char EMPTY_SRC[] = "extern \"C\" __global__ void empty() {}\n";
static const char ARGS5_SRC[] =
    "extern \"C\" __global__ void args5(float *p, int i, float f, size_t n, float *q)\n"
    "{\n"
    "  if (i < 0) p[n] = f * q[0];   /* never taken: the launch is what is measured */\n"
    "}\n";
static const char SAXPY_SRC[] =
    "extern \"C\" __global__\n"
    "void saxpy(float a, float *x, float *y, float *out, size_t n)\n"
    "{\n"
    "  size_t tid = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (tid < n) {\n"
    "    out[tid] = a * x[tid] + y[tid];\n"
    "  }\n"
    "}\n";

/* cudadev's choice of target (backend_cuda.c, pick_target): a cubin for sm_<arch> when NVRTC lists the
 * architecture, else PTX for the newest one below it, which the driver compiles on load. */
static void arch_option(int arch, char *opt, size_t n, int *cubin) {
  int count = 0, archs[256], below = 0;
  NV(nvrtcGetNumSupportedArchs(&count));
  if (count <= 0 || count > 256) {
    fprintf(stderr, "c_driver: NVRTC reports %d architectures\n", count);
    exit(1);
  }
  NV(nvrtcGetSupportedArchs(archs));
  *cubin = 0;
  for (int i = 0; i < count; i++) {
    if (archs[i] == arch) *cubin = 1;
    if (archs[i] < arch && archs[i] > below) below = archs[i];
  }
  if (!*cubin && !below) {
    fprintf(stderr, "c_driver: NVRTC cannot compile for sm_%d\n", arch);
    exit(1);
  }
  snprintf(opt, n, "--gpu-architecture=%s_%d", *cubin ? "sm" : "compute", *cubin ? arch : below);
}

/* NVRTC compile + cuModuleLoadData: what cudadev's first cd.compile of a source does. */
static CUmodule compile(const char *src, const char *name, int arch) {
  char opt[64];
  int cubin;
  arch_option(arch, opt, sizeof opt, &cubin);
  const char *opts[] = {opt};
  nvrtcProgram prog;
  NV(nvrtcCreateProgram(&prog, src, name, 0, NULL, NULL));
  nvrtcResult r = nv.nvrtcCompileProgram(prog, 1, opts);
  if (r != NVRTC_SUCCESS) {
    size_t n = 0;
    nv.nvrtcGetProgramLogSize(prog, &n);
    char *log = xmalloc(n + 1);
    log[0] = '\0';
    nv.nvrtcGetProgramLog(prog, log);
    fprintf(stderr, "c_driver: nvrtcCompileProgram(%s, %s) failed: %s\n%s\n", name, opt, nv.nvrtcGetErrorString(r),
            log);
    exit(1);
  }
  size_t size = 0;
  char *image;
  if (cubin) {
    NV(nvrtcGetCUBINSize(prog, &size));
    image = xmalloc(size);
    NV(nvrtcGetCUBIN(prog, image));
  } else {
    NV(nvrtcGetPTXSize(prog, &size));
    image = xmalloc(size);
    NV(nvrtcGetPTX(prog, image));
  }
  NV(nvrtcDestroyProgram(&prog));
  CUmodule m;
  CU(cuModuleLoadData(&m, image));
  free(image);
  return m;
}

static CUfunction function(CUmodule m, const char *name) {
  CUfunction f;
  CU(cuModuleGetFunction(&f, m, name));
  return f;
}

/* ------------------------------------------------------------------ the measurements */

#define REPS 5
#define LAUNCHES 100000

/* µs per launch: LAUNCHES back to back on the legacy default stream, then one synchronize. */
static double launch_cost(CUfunction f, void **args) {
  double t[REPS];
  for (int i = 0; i < 1000; i++) CU(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL)); /* warm-up */
  CU(cuCtxSynchronize());
  for (int r = 0; r < REPS; r++) {
    double t0 = now();
    for (int i = 0; i < LAUNCHES; i++) CU(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    CU(cuCtxSynchronize());
    t[r] = (now() - t0) / LAUNCHES * 1e6;
  }
  return median(t, REPS);
}

/* µs per launch followed by cuCtxSynchronize (what dev:synchronize() calls). */
static double launch_sync_cost(CUfunction f) {
  enum { N = 10000 };
  double t[REPS];
  for (int i = 0; i < 100; i++) {
    CU(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
    CU(cuCtxSynchronize());
  }
  for (int r = 0; r < REPS; r++) {
    double t0 = now();
    for (int i = 0; i < N; i++) {
      CU(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
      CU(cuCtxSynchronize());
    }
    t[r] = (now() - t0) / N * 1e6;
  }
  return median(t, REPS);
}

/* saxpy on 2^24 random floats: kernel time by events (median of 20), every run on a NaN-poisoned output,
 * the last one checked element by element against a float64 host result. */
static double saxpy_time(CUfunction f) {
  enum { RUNS = 20 };
  const size_t n = (size_t)1 << 24, bytes = n * sizeof(float);
  float a = 2.0f, *x = xmalloc(bytes), *y = xmalloc(bytes), *out = xmalloc(bytes);
  for (size_t i = 0; i < n; i++) {
    x[i] = frand();
    y[i] = frand();
  }
  CUdeviceptr dx, dy, dout;
  CU(cuMemAlloc(&dx, bytes));
  CU(cuMemAlloc(&dy, bytes));
  CU(cuMemAlloc(&dout, bytes));
  CU(cuMemcpyHtoD(dx, x, bytes));
  CU(cuMemcpyHtoD(dy, y, bytes));
  void *args[] = {&a, &dx, &dy, &dout, (void *)&n};
  unsigned block = 256, grid = (unsigned)((n + block - 1) / block);
  double t[RUNS];
  for (int r = -3; r < RUNS; r++) { /* three warm-up runs */
    CU(cuMemsetD32Async(dout, 0x7fc00000u, n, NULL)); /* quiet NaN */
    CU(cuEventRecord(ev0, NULL));
    CU(cuLaunchKernel(f, grid, 1, 1, block, 1, 1, 0, NULL, args, NULL));
    CU(cuEventRecord(ev1, NULL));
    double ms = event_ms();
    if (r >= 0) t[r] = ms * 1e3;
  }
  CU(cuMemcpyDtoH(out, dout, bytes));
  double worst = 0;
  size_t bad = n;
  for (size_t i = 0; i < n; i++) {
    double ref = (double)a * x[i] + y[i], diff = out[i] - ref;
    double err = (diff < 0 ? -diff : diff) / (ref > 1e-30 ? ref : 1e-30); /* ref > 0: inputs in [0, 1) */
    if (!(err <= 1e-6)) { /* NaN (an element never written) fails too */
      bad = i;
      break;
    }
    if (err > worst) worst = err;
  }
  if (bad < n) {
    fprintf(stderr, "c_driver: saxpy is wrong at element %zu: %g, expected %g\n", bad, out[bad],
            (double)a * x[bad] + y[bad]);
    exit(1);
  }
  printf("info saxpy_max_rel_err %.3g\n", worst);
  CU(cuMemFree(dx));
  CU(cuMemFree(dy));
  CU(cuMemFree(dout));
  free(x);
  free(y);
  free(out);
  return median(t, RUNS);
}

/* µs per 1 MiB cuMemAlloc + cuMemFree. */
static double alloc_cost(void) {
  enum { N = 1000 };
  double t[REPS];
  CUdeviceptr p;
  for (int i = 0; i < 10; i++) {
    CU(cuMemAlloc(&p, 1 << 20));
    CU(cuMemFree(p));
  }
  for (int r = 0; r < REPS; r++) {
    double t0 = now();
    for (int i = 0; i < N; i++) {
      CU(cuMemAlloc(&p, 1 << 20));
      CU(cuMemFree(p));
    }
    t[r] = (now() - t0) / N * 1e6;
  }
  return median(t, REPS);
}

/* µs per 1 MiB cuMemAllocAsync + cuMemFreeAsync from the default pool, its release threshold raised so freed
 * memory stays cached (what cudadev does: NOTE [caching pool] in backend_cuda.c). */
static double alloc_async_cost(CUdevice dev) {
  enum { N = 10000 };
  double t[REPS];
  CUmemoryPool pool;
  cuuint64_t threshold = UINT64_MAX;
  CUdeviceptr p;
  CU(cuDeviceGetDefaultMemPool(&pool, dev));
  CU(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold));
  for (int i = 0; i < 100; i++) {
    CU(cuMemAllocAsync(&p, 1 << 20, NULL));
    CU(cuMemFreeAsync(p, NULL));
  }
  CU(cuStreamSynchronize(NULL));
  for (int r = 0; r < REPS; r++) {
    double t0 = now();
    for (int i = 0; i < N; i++) {
      CU(cuMemAllocAsync(&p, 1 << 20, NULL));
      CU(cuMemFreeAsync(p, NULL));
    }
    CU(cuStreamSynchronize(NULL));
    t[r] = (now() - t0) / N * 1e6;
  }
  return median(t, REPS);
}

#define COPY_BYTES ((size_t)256 << 20)
#define COPY_REPS 10
enum { H2D, D2H, D2D };

/* GB/s (10^9 bytes copied per second) of one 256 MiB async copy on the legacy stream, timed by events. */
static double copy_rate(int kind, CUdeviceptr d1, CUdeviceptr d2, void *h1, void *h2) {
  double t[COPY_REPS];
  for (int r = -1; r < COPY_REPS; r++) { /* one warm-up copy */
    CU(cuEventRecord(ev0, NULL));
    if (kind == H2D)
      CU(cuMemcpyHtoDAsync(d1, h1, COPY_BYTES, NULL));
    else if (kind == D2H)
      CU(cuMemcpyDtoHAsync(h2, d1, COPY_BYTES, NULL));
    else
      CU(cuMemcpyDtoDAsync(d2, d1, COPY_BYTES, NULL));
    CU(cuEventRecord(ev1, NULL));
    double ms = event_ms();
    if (r >= 0) t[r] = COPY_BYTES / (ms * 1e-3) / 1e9;
  }
  return median(t, COPY_REPS);
}

static void check_same(const void *want, const void *got, const char *what) {
  if (memcmp(want, got, COPY_BYTES) != 0) {
    fprintf(stderr, "c_driver: %s copied wrong bytes\n", what);
    exit(1);
  }
}

static void copies(void) {
  float *h1, *h2;
  CUdeviceptr d1, d2;
  /* page-locked, as cd.empty(n, {pinned = true}) is (cudadev registers its own mapping instead) */
  CU(cuMemHostAlloc((void **)&h1, COPY_BYTES, CU_MEMHOSTALLOC_PORTABLE));
  CU(cuMemHostAlloc((void **)&h2, COPY_BYTES, CU_MEMHOSTALLOC_PORTABLE));
  CU(cuMemAlloc(&d1, COPY_BYTES));
  CU(cuMemAlloc(&d2, COPY_BYTES));
  size_t n = COPY_BYTES / sizeof(float);
  for (size_t i = 0; i < n; i++) h1[i] = frand();

  printf("h2d_pinned %.2f GB/s\n", copy_rate(H2D, d1, d2, h1, h2));
  memset(h2, 0xff, COPY_BYTES);
  printf("d2h_pinned %.2f GB/s\n", copy_rate(D2H, d1, d2, h1, h2));
  check_same(h1, h2, "the pinned round trip");
  CU(cuMemsetD32Async(d2, 0x7fc00000u, n, NULL));
  printf("d2d %.2f GB/s\n", copy_rate(D2D, d1, d2, h1, h2));
  memset(h2, 0xff, COPY_BYTES);
  CU(cuMemcpyDtoH(h2, d2, COPY_BYTES));
  check_same(h1, h2, "the device-to-device copy");

  /* Pageable: plain malloc'd memory (every page touched) and the synchronous cuMemcpyHtoD. It may return
   * before the last DMA has landed, so the synchronize is inside the timed region. */
  float *page = xmalloc(COPY_BYTES);
  memcpy(page, h1, COPY_BYTES);
  double t[REPS];
  for (int r = -1; r < REPS; r++) {
    double t0 = now();
    CU(cuMemcpyHtoD(d1, page, COPY_BYTES));
    CU(cuCtxSynchronize());
    if (r >= 0) t[r] = COPY_BYTES / (now() - t0) / 1e9;
  }
  printf("h2d_pageable %.2f GB/s\n", median(t, REPS));

  /* Pageable the other way: cuMemcpyDtoH into the malloc'd buffer, complete when it returns. */
  memset(page, 0xff, COPY_BYTES);
  for (int r = -1; r < REPS; r++) {
    double t0 = now();
    CU(cuMemcpyDtoH(page, d1, COPY_BYTES));
    if (r >= 0) t[r] = COPY_BYTES / (now() - t0) / 1e9;
  }
  check_same(h1, page, "the pageable round trip");
  printf("d2h_pageable %.2f GB/s\n", median(t, REPS));
  free(page);
  CU(cuMemFree(d1));
  CU(cuMemFree(d2));
  CU(cuMemFreeHost(h1));
  CU(cuMemFreeHost(h2));
}

/* A graph of GRAPH_KERNELS empty-kernel launches, captured on a stream of our own, against as many launches:
 * µs per cuGraphLaunch + cuStreamSynchronize and per GRAPH_KERNELS cuLaunchKernel + cuStreamSynchronize (the
 * median of REPS rounds of GRAPH_ROUNDS), and the launches' time over the graph's. lua_bench.lua makes the
 * same graph with cd.capture. */
#define GRAPH_KERNELS 100
#define GRAPH_ROUNDS 200

static double graph_round(CUfunction f, CUstream s, CUgraphExec exec) {
  double t[REPS];
  for (int r = -1; r < REPS; r++) { /* one warm-up round */
    double t0 = now();
    for (int i = 0; i < GRAPH_ROUNDS; i++) {
      if (exec)
        CU(cuGraphLaunch(exec, s));
      else
        for (int k = 0; k < GRAPH_KERNELS; k++) CU(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
      CU(cuStreamSynchronize(s));
    }
    if (r >= 0) t[r] = (now() - t0) / GRAPH_ROUNDS * 1e6;
  }
  return median(t, REPS);
}

static void graph(CUfunction f) {
  CUstream s;
  CUgraph g;
  CUgraphExec exec;
  CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  for (int k = 0; k < GRAPH_KERNELS; k++) CU(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
  CU(cuStreamEndCapture(s, &g));
  CU(cuGraphInstantiate(&exec, g, 0));
  double launches = graph_round(f, s, NULL), replay = graph_round(f, s, exec);
  printf("graph_launches_100 %.2f us\n", launches);
  printf("graph_replay_100 %.2f us\n", replay);
  printf("graph_speedup %.3f x\n", launches / replay);
  CU(cuGraphExecDestroy(exec));
  CU(cuGraphDestroy(g));
  CU(cuStreamDestroy(s));
}

/* GB/s of a 256 MiB copy from device 0 to device 1 (cuMemcpyPeerAsync, on device 1's context's legacy
 * stream, timed by events there), before and after peer access is enabled both ways. The same copy as
 * cd.copy between two GPUs; bench/lua_bench.lua measures that in the same order. */
static void peer_copies(CUcontext ctx0, int count) {
  if (count < 2) return;
  CUdevice dev1;
  CUcontext ctx1;
  CUdeviceptr a, b;
  CUevent e0, e1;
  int can01 = 0, can10 = 0;
  CU(cuDeviceGet(&dev1, 1));
  CU(cuDevicePrimaryCtxRetain(&ctx1, dev1));
  CU(cuCtxSetCurrent(ctx0));
  CU(cuMemAlloc(&a, COPY_BYTES));
  CU(cuMemsetD32Async(a, 0x3fa00000u, COPY_BYTES / 4, NULL)); /* 1.25f: never time on zeros */
  CU(cuCtxSynchronize());
  CU(cuCtxSetCurrent(ctx1));
  CU(cuMemAlloc(&b, COPY_BYTES));
  CU(cuEventCreate(&e0, CU_EVENT_DEFAULT));
  CU(cuEventCreate(&e1, CU_EVENT_DEFAULT));
  CU(cuDeviceCanAccessPeer(&can01, 0, 1));
  CU(cuDeviceCanAccessPeer(&can10, 1, 0));
  for (int access = 0; access <= 1; access++) {
    if (access) {
      if (!can01 || !can10) break;
      CU(cuCtxEnablePeerAccess(ctx0, 0)); /* ctx1 (current) may reach ctx0's memory */
      CU(cuCtxSetCurrent(ctx0));
      CU(cuCtxEnablePeerAccess(ctx1, 0));
      CU(cuCtxSetCurrent(ctx1));
    }
    double t[COPY_REPS];
    for (int r = -1; r < COPY_REPS; r++) {
      CU(cuEventRecord(e0, NULL));
      CU(cuMemcpyPeerAsync(b, ctx1, a, ctx0, COPY_BYTES, NULL));
      CU(cuEventRecord(e1, NULL));
      CU(cuEventSynchronize(e1));
      float ms = 0;
      CU(cuEventElapsedTime(&ms, e0, e1));
      if (r >= 0) t[r] = COPY_BYTES / (ms * 1e-3) / 1e9;
    }
    printf("%s %.2f GB/s\n", access ? "peer_access" : "peer_noaccess", median(t, COPY_REPS));
  }
  CU(cuMemFree(b));
  CU(cuCtxSetCurrent(ctx0));
  CU(cuMemFree(a));
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0); /* lines reach bench/run as they are made, even if a later step fails */
  load();
  CUresult r = cu.cuInit(0);
  int count = 0;
  if (r == CUDA_SUCCESS) r = cu.cuDeviceGetCount(&count);
  if (r != CUDA_SUCCESS || count == 0) {
    const char *name = NULL;
    cu.cuGetErrorName(r, &name);
    fprintf(stderr, "no CUDA device: %s\n",
            r != CUDA_SUCCESS ? (name ? name : "cuInit failed") : "the driver reports none");
    return 2;
  }
  CUdevice dev;
  CUcontext ctx;
  char name[256];
  int major = 0, minor = 0, driver = 0, nvmaj = 0, nvmin = 0, pools = 0;
  CU(cuDeviceGet(&dev, 0));
  CU(cuDeviceGetName(name, sizeof name, dev));
  CU(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
  CU(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
  CU(cuDeviceGetAttribute(&pools, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, dev));
  CU(cuDriverGetVersion(&driver));
  NV(nvrtcVersion(&nvmaj, &nvmin));
  CU(cuDevicePrimaryCtxRetain(&ctx, dev)); /* the context cudadev uses too */
  CU(cuCtxSetCurrent(ctx));
  int arch = major * 10 + minor;
  printf("info gpu %s\n", name);
  printf("info arch sm_%d\n", arch);
  printf("info driver %d.%d\n", driver / 1000, driver % 1000 / 10);
  printf("info nvrtc %d.%d\n", nvmaj, nvmin);
  CU(cuEventCreate(&ev0, CU_EVENT_DEFAULT));
  CU(cuEventCreate(&ev1, CU_EVENT_DEFAULT));

  /* Compile in lua_bench.lua's order: empty and args5 first (the first compile also loads NVRTC's builtins),
   * then saxpy, timed. One sample, as cudadev's first compile is one: a source's first compile in a process
   * is slower than its repeats (48 against 33 ms, seen with NVRTC 13.0), so repeats would not compare. */
  CUfunction empty = function(compile(EMPTY_SRC, "empty.cu", arch), "empty");
  CUfunction args5 = function(compile(ARGS5_SRC, "args5.cu", arch), "args5");
  double t0 = now();
  CUfunction saxpy = function(compile(SAXPY_SRC, "saxpy.cu", arch), "saxpy");
  printf("compile %.0f us\n", (now() - t0) * 1e6);

  printf("launch_empty %.3f us\n", launch_cost(empty, NULL));
  CUdeviceptr p, q;
  CU(cuMemAlloc(&p, 1 << 20));
  CU(cuMemAlloc(&q, 1 << 20));
  int i5 = 1;
  float f5 = 2.5f;
  size_t n5 = 1024;
  void *args[] = {&p, &i5, &f5, &n5, &q};
  printf("launch_5arg %.3f us\n", launch_cost(args5, args));
  printf("launch_sync %.3f us\n", launch_sync_cost(empty));
  graph(empty);
  printf("saxpy_kernel %.2f us\n", saxpy_time(saxpy));
  printf("alloc_free_1mib %.3f us\n", alloc_cost());
  if (pools) printf("alloc_free_async_1mib %.3f us\n", alloc_async_cost(dev));
  copies();
  peer_copies(ctx, count);
  CU(cuCtxSetCurrent(ctx));
  CU(cuMemFree(p));
  CU(cuMemFree(q));
  CU(cuCtxSynchronize());
  return 0;
}
