/*
 * cuda_backend_test.c: smoke test of the loader and the cuda backend, in C, without Lua.
 *
 * Build and run from the repository root (no GPU needed; NVRTC from the toolkit is enough):
 *   mkdir -p build && gcc -std=gnu11 -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
 *     -I/usr/local/cuda/include -Isrc tests/cuda_backend_test.c src/loader.c \
 *     src/backend_cuda.c src/util.c -ldl -lpthread -o build/cuda_backend_test && build/cuda_backend_test
 * On a machine with a GPU add -DWITH_GPU: it also allocates, copies, fills, launches and times on cuda:0,
 * and `build/cuda_backend_test fault` checks that an illegal address is reported as a sticky fault.
 * Each check prints PASS or FAIL; the exit status is the number of failures.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "backend.h"
#include "syms.h"

static int failures;

static void check(int ok, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("%s ", ok ? "PASS" : "FAIL");
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  fflush(stdout);
  failures += !ok;
}

static void show_err(const char *what, const cdv_err *e) {
  printf("  %s -> %s: %s: %s%s\n", what, e->api, e->name, e->message, e->sticky ? " [sticky]" : "");
}

#ifdef WITH_GPU
static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}
#endif

/* ---------------------------------------------------------------- kernels */
static const char saxpy_src[] =
    "#include \"scale.h\"\n"
    "extern \"C\" __global__ void saxpy(float a, const float *x, float *y, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = a * x[i] + y[i];\n"
    "}\n"
    "template <typename T> __global__ void axpy(T a, const T *x, T *y, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = SCALE * a * x[i] + y[i];\n"
    "}\n"
    "extern \"C\" __global__ void poke(int *p) { *p = 1; }\n";

static const char *const header_names[] = {"scale.h"};
static const char *const header_srcs[] = {"#define SCALE 1\n"};
static const char *const entries[] = {"saxpy", "axpy<float>", "poke"};
static const unsigned char is_expr[] = {0, 1, 0};

static cdv_compile_req saxpy_req(int arch) {
  cdv_compile_req r;
  memset(&r, 0, sizeof r);
  r.source = saxpy_src;
  r.source_len = sizeof saxpy_src - 1;
  r.name = "saxpy.cu";
  r.nheaders = 1;
  r.header_names = header_names;
  r.header_srcs = header_srcs;
  r.nentries = 3;
  r.entries = entries;
  r.is_expr = is_expr;
  r.arch = arch;
  r.want_ptx = r.want_cubin = 1;
  return r;
}

/* ---------------------------------------------------------------- loader */
/* In a child, so the parent's own once-only load is untouched: what `var=lib` leads to. */
static void child_load(const char *var, const char *lib, int (*load)(void), const char *(*why)(void), int expect_rc,
                       const char *expect) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    setenv(var, lib, 1);
    int rc = load();
    printf("  %s=%s: rc %d, why \"%s\"\n", var, lib, rc, why());
    fflush(stdout);
    _exit(rc == expect_rc && strstr(why(), expect) ? 0 : 1);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  check(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s=%s: rc %d, reason containing '%s'", var, lib, expect_rc, expect);
}

static void test_driver(void) {
  child_load("CUDADEV_LIBCUDA", "/nonexistent/libcuda.so.1", cdv_cuda_load, cdv_cuda_why, -1,
             "no CUDA driver: tried /nonexistent/libcuda.so.1 (/nonexistent/libcuda.so.1: cannot open");
  if (access("/usr/local/cuda/lib64/stubs/libcuda.so", R_OK) == 0)
    child_load("CUDADEV_LIBCUDA", "/usr/local/cuda/lib64/stubs/libcuda.so", cdv_cuda_load, cdv_cuda_why, -1,
               "cuInit failed: CUDA_ERROR_STUB_LIBRARY");
#ifdef WITH_GPU
  check(cdv_cuda_load() == 0, "cdv_cuda_load() opens the driver and cuInit succeeds (%s)", cdv_cuda_why());
  check(cdv_cuda_driver_version() > 0, "cdv_cuda_driver_version() = %d", cdv_cuda_driver_version());
#else
  int rc = cdv_cuda_load();
  const char *why = cdv_cuda_why();
  printf("  cdv_cuda_why(): %s\n", why);
  check(rc != 0, "cdv_cuda_load() fails without a driver");
  check(strstr(why, "no CUDA driver: tried libcuda.so.1 (") && strstr(why, "), libcuda.so ("),
        "the reason lists libcuda.so.1 and libcuda.so with dlerror's text");
  check(cdv_cuda_driver_version() == 0, "cdv_cuda_driver_version() is 0");
  cdv_device d;
  cdv_err e;
  memset(&d, 0, sizeof d);
  check(cdv_cuda_fill_device(&d, 0, &e) == -1 && strcmp(e.name, "CUDA_DRIVER_NOT_FOUND") == 0 &&
            strcmp(e.message, why) == 0,
        "cdv_cuda_fill_device fails with the reason");
  show_err("cdv_cuda_fill_device", &e);
  char page[64];
  check(cdv_cuda_host_register(page, sizeof page, &e) == -1 && strcmp(e.api, "dlopen") == 0,
        "cdv_cuda_host_register fails with the reason");
  check(cdv_cuda_host_unregister(page) == -1, "cdv_cuda_host_unregister returns -1 quietly");
#endif
}

static void test_nvrtc_load(void) {
  int major = 0, minor = 0;
  child_load("CUDADEV_LIBNVRTC", "/nonexistent/libnvrtc.so", cdv_nvrtc_load, cdv_nvrtc_why, -1,
             "no NVRTC: tried /nonexistent/libnvrtc.so (");
  child_load("CUDADEV_LIBNVRTC", "/usr/local/cuda/lib64/libnvrtc.so.13", cdv_nvrtc_load, cdv_nvrtc_why, 0, "");
  check(cdv_nvrtc_load() == 0, "cdv_nvrtc_load() (why: \"%s\")", cdv_nvrtc_why());
  int rc = cdv_nvrtc_version(&major, &minor);
  check(rc == 0 && major >= 11, "NVRTC version %d.%d", major, minor);
}

/* ---------------------------------------------------------------- compile */
static void test_compile_saxpy(void) {
  cdv_compile_req r = saxpy_req(90);
  cdv_image img;
  cdv_err e;
  int rc = cdv_cuda_compile_uncached(NULL, &r, &img, &e);
  if (rc) show_err("compile", &e);
  check(rc == 0, "compile saxpy.cu with no device for arch 90");
  check(
      img.ptx && strstr(img.ptx, ".entry saxpy") && strstr(img.ptx, ".target sm_90") && img.ptx_len == strlen(img.ptx),
      "PTX for sm_90 (%zu bytes) with .entry saxpy", img.ptx_len);
  check(img.cubin && img.cubin_len > 4 &&
            memcmp(img.cubin,
                   "\x7f"
                   "ELF",
                   4) == 0,
        "cubin for sm_90 (%zu bytes, ELF)", img.cubin_len);
  check(img.nentries == 3 && strcmp(img.lowered[0], "saxpy") == 0, "extern \"C\" entry keeps its name");
  check(img.lowered && strncmp(img.lowered[1], "_Z4axpyIfEv", 11) == 0, "axpy<float> lowers to %s",
        img.lowered ? img.lowered[1] : "?");
  check(img.log != NULL, "log is filled (\"%s\")", img.log ? img.log : "(null)");
  cdv_image_free(&img);
  cdv_image_free(&img);

  r.want_cubin = 0;
  rc = cdv_cuda_compile_uncached(NULL, &r, &img, &e);
  check(rc == 0 && img.ptx && !img.cubin && strstr(img.ptx, ".target sm_90"), "PTX only when only PTX is asked for");
  cdv_image_free(&img);
}

static void test_compile_options(void) {
  static const char src[] =
      "#include \"inc.h\"\n"
      "extern \"C\" __global__ void k(float *y) { y[0] = FROM_INC * FROM_OPT; }\n";
  char dir[] = "/tmp/cdv_inc_XXXXXX", path[256];
  const char *incs[1] = {dir}, *opts[2] = {"-DFROM_OPT=3", "--std=c++17"};
  const char *ents[1] = {"k"};
  if (!mkdtemp(dir)) {
    check(0, "mkdtemp");
    return;
  }
  snprintf(path, sizeof path, "%s/inc.h", dir);
  FILE *f = fopen(path, "w");
  fputs("#define FROM_INC 2\n", f);
  fclose(f);
  cdv_compile_req r;
  memset(&r, 0, sizeof r);
  r.source = src;
  r.source_len = sizeof src - 1;
  r.name = "opts.cu";
  r.nopts = 2, r.opts = opts, r.nincludes = 1, r.include_paths = incs;
  r.nentries = 1, r.entries = ents, r.arch = 80, r.want_cubin = 1;
  cdv_image img;
  cdv_err e;
  int rc = cdv_cuda_compile_uncached(NULL, &r, &img, &e);
  if (rc) show_err("compile", &e);
  check(rc == 0 && img.cubin && !img.ptx, "include path and -D options reach NVRTC (cubin only, sm_80)");
  cdv_image_free(&img);
  unlink(path);
  rmdir(dir);

  const char *user[1] = {"--gpu-architecture=compute_75"};
  r.nopts = 1, r.opts = user, r.nincludes = 0;
  r.source = "extern \"C\" __global__ void k(float *y) { y[0] = 1; }";
  r.source_len = strlen(r.source);
  rc = cdv_cuda_compile_uncached(NULL, &r, &img, &e);
  check(rc == 0 && !img.cubin && img.ptx && strstr(img.ptx, ".target sm_75"), "the user's compute_75 wins: PTX only");
  cdv_image_free(&img);
}

static void test_compile_archs(void) {
  cdv_compile_req r = saxpy_req(500);
  cdv_image img;
  cdv_err e;
  int rc = cdv_cuda_compile_uncached(NULL, &r, &img, &e);
  const char *target = img.ptx ? strstr(img.ptx, ".target ") : NULL;
  check(rc == 0 && !img.cubin && target, "an arch newer than NVRTC knows gets PTX for the newest below it (%.14s)",
        target ? target : "none");
  cdv_image_free(&img);

  r.arch = 20;
  rc = cdv_cuda_compile_uncached(NULL, &r, &img, &e);
  check(rc == -1 && strstr(e.message, "cannot compile for sm_20"), "an arch older than NVRTC supports is refused");
  show_err("arch 20", &e);
  cdv_image_free(&img);

  r.arch = 0;
  rc = cdv_cuda_compile_uncached(NULL, &r, &img, &e);
  check(rc == -1 && strstr(e.message, "no target architecture") && img.log && !img.log[0] && !img.ptx,
        "no device and no arch is refused (out->log is \"\")");
  cdv_image_free(&img);
}

static void test_compile_errors(void) {
  static const char bad[] = "extern \"C\" __global__ void k(float *y) { y[0] = undefined_thing; }\n";
  cdv_compile_req r;
  memset(&r, 0, sizeof r);
  r.source = bad, r.source_len = sizeof bad - 1, r.name = "bad.cu", r.arch = 90;
  cdv_image img;
  cdv_err e;
  int rc = cdv_cuda_compile_uncached(NULL, &r, &img, &e);
  check(rc == -1 && e.code == NVRTC_ERROR_COMPILATION && strcmp(e.name, "NVRTC_ERROR_COMPILATION") == 0 &&
            strcmp(e.api, "nvrtcCompileProgram") == 0 && strcmp(e.message, "compilation of bad.cu failed") == 0,
        "a compile error is NVRTC_ERROR_COMPILATION");
  show_err("bad.cu", &e);
  check(e.log && strstr(e.log, "undefined_thing") && strstr(e.log, "error"), "e->log holds the log:\n%s", e.log);
  check(img.log && strcmp(img.log, e.log) == 0 && !img.ptx && !img.cubin && !img.lowered, "out keeps the log only");
  free(e.log);
  cdv_image_free(&img);

  const char *opts[1] = {"--no-such-option"};
  r.source = "extern \"C\" __global__ void k() {}", r.source_len = strlen(r.source);
  r.nopts = 1, r.opts = opts;
  rc = cdv_cuda_compile_uncached(NULL, &r, &img, &e);
  check(rc == -1 && strcmp(e.name, "NVRTC_ERROR_INVALID_OPTION") == 0, "an unknown option is %s: %s", e.name,
        e.message);
  free(e.log);
  cdv_image_free(&img);

  static const char *const ents[1] = {"nosuch<int>"};
  static const unsigned char ex[1] = {1};
  r.nopts = 0, r.nentries = 1, r.entries = ents, r.is_expr = ex;
  rc = cdv_cuda_compile_uncached(NULL, &r, &img, &e);
  check(rc == -1, "a name expression naming nothing fails (%s: %s)", e.api, e.name);
  free(e.log);
  cdv_image_free(&img);
}

/* Several threads load NVRTC and compile at once: the loader's once-only open must hold. */
static void *compile_thread(void *arg) {
  cdv_compile_req r = saxpy_req(90);
  cdv_image img;
  cdv_err e;
  *(int *)arg = cdv_nvrtc_load() == 0 && cdv_cuda_compile_uncached(NULL, &r, &img, &e) == 0 && img.cubin;
  cdv_image_free(&img);
  return NULL;
}

static void test_threads(void) {
  pthread_t t[4];
  int ok[4] = {0}, all = 1;
  for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, compile_thread, &ok[i]);
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL), all &= ok[i];
  check(all, "4 threads compile at once");
}

static void test_misc(void) {
  cdv_err e;
  check(cdv_cuda_is_sticky(CUDA_ERROR_ILLEGAL_ADDRESS) && cdv_cuda_is_sticky(CUDA_ERROR_ASSERT) &&
            cdv_cuda_is_sticky(CUDA_ERROR_LAUNCH_FAILED) && cdv_cuda_is_sticky(CUDA_ERROR_MISALIGNED_ADDRESS) &&
            !cdv_cuda_is_sticky(CUDA_ERROR_OUT_OF_MEMORY) && !cdv_cuda_is_sticky(CUDA_ERROR_NOT_READY) &&
            !cdv_cuda_is_sticky(CUDA_ERROR_INVALID_VALUE),
        "sticky classification");
  int rc = cdv_fail(&e, "cpu.launch", 12, "ENOMEM", "no %s for %d", "memory", 7);
  check(rc == -1 && strcmp(e.message, "no memory for 7") == 0 && e.code == 12 && !e.sticky && !e.log &&
            strcmp(e.api, "cpu.launch") == 0 && strcmp(e.name, "ENOMEM") == 0,
        "cdv_fail formats");
#ifndef WITH_GPU
  CUdeviceptr p; /* no driver: every pointer of cdv_cu is NULL, so a call fails by name instead of crashing */
  rc = CDV_CU(&e, cuMemAlloc, &p, 16);
  check(rc == -1 && strcmp(e.api, "cuMemAlloc") == 0 && strstr(e.message, "cuMemAlloc_v2") &&
            strcmp(e.name, "CUDA_ERROR_NOT_FOUND") == 0,
        "a missing entry point fails by name: %s: %s: %s", e.api, e.name, e.message);
#endif
  cdv_cu_error(&e, "cuMemAlloc", CUDA_ERROR_ILLEGAL_ADDRESS);
  check(e.sticky && e.code == 700 && strcmp(e.api, "cuMemAlloc") == 0, "cdv_cu_error: %s: %s", e.name, e.message);
}

#ifdef WITH_GPU
/* ---------------------------------------------------------------- GPU */
/* the host side of a copy: a backend whose memory is host memory (NOTE [backend properties]) */
static const cdv_backend host_side = {.kind = "cpu", .host_memory = 1};
static cdv_device gpu, cpu_dev = {.be = &host_side, .ordinal = -1, .alias = "cpu"};
#define TRY(what, call)     \
  do {                      \
    cdv_err e_;             \
    if ((call) != 0) {      \
      show_err(what, &e_);  \
      check(0, "%s", what); \
      return;               \
    }                       \
  } while (0)
#define CALL(call) ((call) == 0 ? 0 : (show_err(#call, &e), -1))

static void test_device(void) {
  cdv_err e;
  check(cdv_cuda_fill_device(&gpu, 0, &e) == 0, "fill cuda:0");
  printf("  %s \"%s\" sm_%d, %d SMs, warp %d, %d threads/block, block %dx%dx%d, grid %dx%dx%d\n", gpu.alias, gpu.name,
         gpu.arch, gpu.sm_count, gpu.warp_size, gpu.max_threads_per_block, gpu.max_block[0], gpu.max_block[1],
         gpu.max_block[2], gpu.max_grid[0], gpu.max_grid[1], gpu.max_grid[2]);
  printf("  shared %zu (opt-in %zu), memory %zu, uuid %s, pci %s, uva %d, mempool %d\n", gpu.max_shared_per_block,
         gpu.max_shared_optin, gpu.total_memory, gpu.uuid, gpu.pci_bus_id, gpu.is_uva, gpu.is_mempool_supported);
  check(gpu.ctx == NULL, "filling a device creates no context");
  check(strlen(gpu.uuid) == 40 && strncmp(gpu.uuid, "GPU-", 4) == 0, "uuid looks like nvidia-smi's");
  int v = 0;
  int rc = cdv_cuda_attribute(&gpu, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &v, &e);
  check(rc == 0 && v == gpu.sm_count, "attribute MULTIPROCESSOR_COUNT = %d", v);
  check(gpu.be->activate(&gpu, &e) == 0 && gpu.ctx && gpu.be->activate(&gpu, &e) == 0, "activate twice");
  CUcontext cur = NULL;
  cdv_cu.cuCtxGetCurrent(&cur);
  check(cur == gpu.ctx, "the primary context is current");
  size_t fr = 0, tot = 0;
  rc = gpu.be->mem_info(&gpu, &fr, &tot, &e);
  check(rc == 0 && tot > 0 && fr <= tot, "mem_info: %zu MiB free of %zu", fr >> 20, tot >> 20);
  int least = 0, greatest = 0;
  rc = gpu.be->stream_priority_range(&gpu, &least, &greatest, &e);
  check(rc == 0 && greatest <= least, "priority range %d..%d", least, greatest);
}

/* Fill n elements of elsize with pattern and read them back. */
static int fill_and_check(void *dptr, size_t elsize, uint64_t pattern, size_t n, void *stream) {
  cdv_err e;
  unsigned char *host = malloc(n * elsize);
  int ok = CALL(gpu.be->memset(&gpu, dptr, &pattern, elsize, n, stream, &e)) == 0 &&
           CALL(gpu.be->memcpy(&gpu, host, &cpu_dev, dptr, &gpu, n * elsize, stream, &e)) == 0 &&
           CALL(gpu.be->stream_synchronize(&gpu, stream, &e)) == 0;
  for (size_t i = 0; ok && i < n; i++) ok = memcmp(host + i * elsize, &pattern, elsize) == 0;
  free(host);
  return ok;
}

/* Event-timed milliseconds of one fill, and of the raw 2-D 32-bit fill (NOTE [8-byte fill]) for comparison. */
static float time_fill(void *p, size_t elsize, const void *pat, size_t count, void *s, int raw2d) {
  cdv_err e;
  void *ev0, *ev1;
  float ms = -1;
  gpu.be->event_create(&gpu, 1, 0, &ev0, &e);
  gpu.be->event_create(&gpu, 1, 0, &ev1, &e);
  gpu.be->memset(&gpu, p, pat, elsize, count, s, &e); /* warm up */
  gpu.be->event_record(&gpu, ev0, s, &e);
  if (raw2d)
    cdv_cu.cuMemsetD2D32Async((CUdeviceptr)(uintptr_t)p, 8, 7, 1, count, (CUstream)s);
  else
    gpu.be->memset(&gpu, p, pat, elsize, count, s, &e);
  gpu.be->event_record(&gpu, ev1, s, &e);
  gpu.be->event_synchronize(&gpu, ev1, &e);
  gpu.be->event_elapsed(&gpu, ev0, ev1, &ms, &e);
  gpu.be->event_destroy(&gpu, ev0, &e);
  gpu.be->event_destroy(&gpu, ev1, &e);
  return ms;
}

static void fill_timings(void *p, size_t n, void *s) {
  uint64_t pat = 0x0123456789ABCDEFull;
  uint32_t w = 7;
  for (size_t count = 1024; count <= n; count *= 16)
    printf("  fill %8zu x 8 bytes: 32-bit %.4f ms, 8-byte %.4f ms, one 2-D half %.4f ms\n", count,
           time_fill(p, 4, &w, 2 * count, s, 0), time_fill(p, 8, &pat, count, s, 0),
           time_fill(p, 8, &pat, count, s, 1));
}

static void test_memset(void) {
  cdv_err e;
  void *p = NULL, *s = NULL;
  size_t n = (size_t)1 << 22;
  TRY("stream_create", gpu.be->stream_create(&gpu, 0, 0, &s, &e_));
  TRY("mem_alloc", gpu.be->mem_alloc(&gpu, n * 8, CDV_MEM_DEVICE, s, &p, &e_));
  check(fill_and_check(p, 1, 0xAB, n, s), "memset 1-byte");
  check(fill_and_check(p, 2, 0xBEEF, n, s), "memset 2-byte");
  check(fill_and_check(p, 4, 0xDEADBEEF, n, s), "memset 4-byte");
  check(fill_and_check(p, 8, 0x1234567812345678ull, n, s), "memset 8-byte, equal halves");
  check(fill_and_check(p, 8, 0x0123456789ABCDEFull, n, s), "memset 8-byte, different halves");
  check(fill_and_check((char *)p + 8, 8, 0x3FF0000000000000ull, 3, s), "memset 8-byte, 3 elements (1.0)");
  check(gpu.be->memset(&gpu, p, &n, 3, 1, s, &e) == -1, "memset element size 3 is refused");
  check(fill_and_check(p, 8, 0xFFFFFFFF00000000ull, 4097, s), "memset 8-byte, 4097 elements (seed + 1)");
  check(fill_and_check(p, 8, 0x00000000FFFFFFFFull, 12289, s), "memset 8-byte, 12289 elements (3 seeds + 1)");
  fill_timings(p, n, s);
  TRY("mem_free", gpu.be->mem_free(&gpu, p, CDV_MEM_DEVICE, s, &e_));
  TRY("stream_destroy", gpu.be->stream_destroy(&gpu, s, &e_));
}

/* Load the compiled module on gpu and run saxpy and axpy<float> over n elements, timed with events. */
static void run_saxpy(void *mod, const cdv_image *img) {
  cdv_err e;
  int n = 1 << 20;
  size_t bytes = (size_t)n * sizeof(float);
  float *x = malloc(bytes), *y = malloc(bytes), a = 2.0f;
  for (int i = 0; i < n; i++) x[i] = (float)i, y[i] = 1.0f;
  void *fn, *fn2, *dx, *dy, *s, *ev0, *ev1;
  TRY("module_function saxpy", gpu.be->module_function(&gpu, mod, img->lowered[0], &fn, &e_));
  TRY("module_function axpy", gpu.be->module_function(&gpu, mod, img->lowered[1], &fn2, &e_));
  TRY("stream_create", gpu.be->stream_create(&gpu, -1, 1, &s, &e_));
  TRY("event_create", gpu.be->event_create(&gpu, 1, 0, &ev0, &e_));
  TRY("event_create", gpu.be->event_create(&gpu, 1, 1, &ev1, &e_));
  TRY("mem_alloc x", gpu.be->mem_alloc(&gpu, bytes, CDV_MEM_DEVICE, s, &dx, &e_));
  TRY("mem_alloc y", gpu.be->mem_alloc(&gpu, bytes, CDV_MEM_DEVICE, s, &dy, &e_));
  TRY("memcpy HtoD", gpu.be->memcpy(&gpu, dx, &gpu, x, &cpu_dev, bytes, s, &e_));
  TRY("memcpy HtoD", gpu.be->memcpy(&gpu, dy, &gpu, y, &cpu_dev, bytes, s, &e_));
  void *args[4] = {&a, &dx, &dy, &n};
  unsigned grid[3] = {(unsigned)(n + 255) / 256, 1, 1}, block[3] = {256, 1, 1};
  TRY("event_record", gpu.be->event_record(&gpu, ev0, s, &e_));
  TRY("launch saxpy", gpu.be->launch(&gpu, fn, grid, block, 0, s, args, NULL, &e_));
  TRY("launch axpy<float>", gpu.be->launch(&gpu, fn2, grid, block, 0, s, args, NULL, &e_));
  TRY("event_record", gpu.be->event_record(&gpu, ev1, s, &e_));
  TRY("memcpy DtoH", gpu.be->memcpy(&gpu, y, &cpu_dev, dy, &gpu, bytes, s, &e_));
  TRY("stream_synchronize", gpu.be->stream_synchronize(&gpu, s, &e_));
  int bad = 0, idle = 0, done = 0;
  for (int i = 0; i < n; i++) bad += y[i] != 4.0f * (float)i + 1.0f;
  check(bad == 0, "saxpy then axpy<float>: y = 4x + 1 (%d wrong of %d)", bad, n);
  float ms = -1;
  int rc = gpu.be->event_elapsed(&gpu, ev0, ev1, &ms, &e);
  check(rc == 0 && ms >= 0, "two launches over 1M floats: %.3f ms", ms);
  check(gpu.be->stream_query(&gpu, s, &idle, &e) == 0 && idle, "stream_query: idle after synchronize");
  check(gpu.be->event_query(&gpu, ev1, &done, &e) == 0 && done, "event_query: done");
  gpu.be->mem_free(&gpu, dx, CDV_MEM_DEVICE, s, &e);
  gpu.be->mem_free(&gpu, dy, CDV_MEM_DEVICE, s, &e);
  gpu.be->event_destroy(&gpu, ev0, &e);
  gpu.be->event_destroy(&gpu, ev1, &e);
  gpu.be->stream_destroy(&gpu, s, &e);
  free(x);
  free(y);
}

static void test_kernels(void) {
  cdv_compile_req r = saxpy_req(0);
  cdv_image img;
  cdv_err e;
  void *mod = NULL, *fn = NULL;
  TRY("compile for the device", gpu.be->compile(&gpu, &r, &img, &e_));
  check(img.cubin != NULL, "compile with d and arch 0 targets sm_%d (cubin %zu bytes)", gpu.arch, img.cubin_len);
  TRY("module_load", gpu.be->module_load(&gpu, &img, &mod, &e_));
  TRY("module_function", gpu.be->module_function(&gpu, mod, "saxpy", &fn, &e_));
  size_t off[5] = {0}, sz[5] = {0};
  int np = 0;
  while (np < 5 && gpu.be->param_info(&gpu, fn, np, &off[np], &sz[np]) == 0) np++;
  check(np == 4 && off[1] == 8 && sz[1] == 8 && sz[0] == 4 && sz[3] == 4,
        "param_info: %d params (%zu@%zu %zu@%zu %zu@%zu %zu@%zu)", np, sz[0], off[0], sz[1], off[1], sz[2], off[2],
        sz[3], off[3]);
  cdv_func_info fi;
  int rc = gpu.be->func_info(&gpu, fn, &fi, &e);
  check(rc == 0 && fi.num_regs > 0, "func_info: %d regs, %d threads max", fi.num_regs, fi.max_threads_per_block);
  int bps = 0;
  rc = gpu.be->occupancy(&gpu, fn, 256, 0, &bps, &e);
  check(rc == 0 && bps > 0, "occupancy: %d blocks of 256 per SM", bps);
  rc = gpu.be->module_function(&gpu, mod, "nosuch", &fn, &e);
  check(rc == -1 && strstr(e.message, "'nosuch'"), "unknown kernel: %s: %s", e.name, e.message);
  run_saxpy(mod, &img);
  TRY("module_unload", gpu.be->module_unload(&gpu, mod, &e_));

  cdv_image ptx_only = img; /* the PTX path, JIT-compiled by the driver */
  ptx_only.cubin = NULL;
  check(gpu.be->module_load(&gpu, &ptx_only, &mod, &e) == 0, "module_load of PTX");
  gpu.be->module_unload(&gpu, mod, &e);
  cdv_image_free(&img);

  cdv_image junk;
  memset(&junk, 0, sizeof junk);
  junk.ptx = ".version 99.0\n.target sm_90\n.address_size 64\n.visible .entry k() { ret; }\n";
  rc = gpu.be->module_load(&gpu, &junk, &mod, &e);
  check(rc == -1 && e.log, "bad PTX is refused with the JIT log: %s: %s", e.name, e.message);
  free(e.log);
}

static void test_memory(void) {
  cdv_err e;
  void *p = (void *)1, *s = NULL;
  check(gpu.be->mem_alloc(&gpu, 0, CDV_MEM_DEVICE, NULL, &p, &e) == 0 && p == NULL, "zero bytes give NULL");
  TRY("stream_create", gpu.be->stream_create(&gpu, 0, 0, &s, &e_));
  /* NOTE [caching pool]: alloc + free of 1 MiB */
  for (int pool = 1; pool >= 0; pool--) {
    int saved = gpu.is_mempool_supported;
    gpu.is_mempool_supported = saved && pool;
    double t0 = now_us();
    for (int i = 0; i < 1000; i++) {
      if (CALL(gpu.be->mem_alloc(&gpu, 1 << 20, CDV_MEM_DEVICE, s, &p, &e)) ||
          CALL(gpu.be->mem_free(&gpu, p, CDV_MEM_DEVICE, s, &e)))
        break;
    }
    gpu.be->stream_synchronize(&gpu, s, &e);
    printf("  1 MiB alloc+free with %s: %.2f us\n", pool ? "cuMemAllocAsync (pool)" : "cuMemAlloc",
           (now_us() - t0) / 1000);
    gpu.is_mempool_supported = saved;
  }
  /* pinned: the cpu backend's way (mmap + register) and the cuda backend's own */
  size_t bytes = 64 << 20;
  char *host = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), *back = NULL;
  void *d1, *d2;
  check(cdv_cuda_host_register(host, bytes, &e) == 0, "cdv_cuda_host_register 64 MiB");
  TRY("mem_alloc", gpu.be->mem_alloc(&gpu, bytes, CDV_MEM_DEVICE, s, &d1, &e_));
  TRY("mem_alloc", gpu.be->mem_alloc(&gpu, bytes, CDV_MEM_DEVICE, s, &d2, &e_));
  TRY("pinned alloc", gpu.be->mem_alloc(&gpu, bytes, CDV_MEM_PINNED, s, (void **)&back, &e_));
  for (size_t i = 0; i < bytes; i++) host[i] = (char)(i * 7);
  double t0 = now_us();
  TRY("HtoD pinned", gpu.be->memcpy(&gpu, d1, &gpu, host, &cpu_dev, bytes, s, &e_));
  TRY("DtoD", gpu.be->memcpy(&gpu, d2, &gpu, d1, &gpu, bytes, s, &e_));
  TRY("DtoH pinned", gpu.be->memcpy(&gpu, back, &cpu_dev, d2, &gpu, bytes, s, &e_));
  TRY("synchronize", gpu.be->synchronize(&gpu, &e_));
  printf("  64 MiB pinned HtoD + DtoD + DtoH: %.0f us\n", now_us() - t0);
  check(memcmp(host, back, bytes) == 0, "pinned round trip through two device buffers");
  check(cdv_cuda_host_unregister(host) == 0, "cdv_cuda_host_unregister");
  gpu.be->mem_free(&gpu, back, CDV_MEM_PINNED, s, &e);
  gpu.be->mem_free(&gpu, d1, CDV_MEM_DEVICE, s, &e);
  gpu.be->mem_free(&gpu, d2, CDV_MEM_DEVICE, s, &e);
  munmap(host, bytes);
  int rc = gpu.be->mem_alloc(&gpu, (size_t)1 << 50, CDV_MEM_DEVICE, s, &p, &e);
  check(rc == -1 && e.code == CUDA_ERROR_OUT_OF_MEMORY && !e.sticky, "1 PiB: %s: %s (%s)", e.name, e.message, e.api);
  gpu.be->stream_destroy(&gpu, s, &e);
}

/* Two streams: the second waits on an event recorded on the first. */
static void test_streams(void) {
  cdv_err e;
  void *s1, *s2, *ev, *p;
  uint32_t v = 0x55555555, out = 0;
  TRY("stream_create", gpu.be->stream_create(&gpu, 0, 0, &s1, &e_));
  TRY("stream_create", gpu.be->stream_create(&gpu, 0, 0, &s2, &e_));
  TRY("event_create", gpu.be->event_create(&gpu, 0, 0, &ev, &e_));
  TRY("mem_alloc", gpu.be->mem_alloc(&gpu, 64 << 20, CDV_MEM_DEVICE, s1, &p, &e_));
  TRY("memset", gpu.be->memset(&gpu, p, &v, 4, 16 << 20, s1, &e_));
  TRY("event_record", gpu.be->event_record(&gpu, ev, s1, &e_));
  TRY("stream_wait_event", gpu.be->stream_wait_event(&gpu, s2, ev, &e_));
  TRY("memcpy", gpu.be->memcpy(&gpu, &out, &cpu_dev, (char *)p + (64 << 20) - 4, &gpu, 4, s2, &e_));
  TRY("stream_synchronize", gpu.be->stream_synchronize(&gpu, s2, &e_));
  check(out == v, "a stream waits for an event of another");
  float ms;
  int rc = gpu.be->event_elapsed(&gpu, ev, ev, &ms, &e);
  check(rc == -1, "elapsed on a non-timing event fails: %s", e.name);
  gpu.be->mem_free(&gpu, p, CDV_MEM_DEVICE, s2, &e);
  gpu.be->event_destroy(&gpu, ev, &e);
  gpu.be->stream_destroy(&gpu, s1, &e);
  gpu.be->stream_destroy(&gpu, s2, &e);
  check(gpu.be->synchronize(&gpu, &e) == 0, "device synchronize");
}

/* Threads that first use a device at the same time: one retain, and each thread gets the context current. */
static cdv_device fresh;

static void *activate_thread(void *arg) {
  cdv_err e;
  CUcontext cur = NULL;
  void *p = NULL;
  uint32_t v = 42;
  int ok = fresh.be->activate(&fresh, &e) == 0 && cdv_cu.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == fresh.ctx &&
           fresh.be->mem_alloc(&fresh, 4096, CDV_MEM_DEVICE, NULL, &p, &e) == 0 &&
           fresh.be->memset(&fresh, p, &v, 4, 1024, NULL, &e) == 0 &&
           fresh.be->mem_free(&fresh, p, CDV_MEM_DEVICE, NULL, &e) == 0 && fresh.be->synchronize(&fresh, &e) == 0;
  *(int *)arg = ok;
  return NULL;
}

static void test_threads_gpu(void) {
  pthread_t t[8];
  int ok[8], all = 1;
  TRY("fill", cdv_cuda_fill_device(&fresh, 0, &e_));
  for (int i = 0; i < 8; i++) pthread_create(&t[i], NULL, activate_thread, &ok[i]);
  for (int i = 0; i < 8; i++) pthread_join(t[i], NULL), all &= ok[i];
  check(all && fresh.ctx == gpu.ctx, "8 threads activate a fresh device at once and share its primary context");
}

static void test_peer(void) {
  int count = 0;
  cdv_cu.cuDeviceGetCount(&count);
  if (count < 2) {
    printf("SKIP peer copy: %d device\n", count);
    return;
  }
  cdv_device g1;
  void *a, *b;
  uint32_t v = 0xC0FFEE, out = 0;
  memset(&g1, 0, sizeof g1);
  TRY("fill cuda:1", cdv_cuda_fill_device(&g1, 1, &e_));
  TRY("alloc 0", gpu.be->mem_alloc(&gpu, 4096, CDV_MEM_DEVICE, NULL, &a, &e_));
  TRY("alloc 1", g1.be->mem_alloc(&g1, 4096, CDV_MEM_DEVICE, NULL, &b, &e_));
  TRY("memset", gpu.be->memset(&gpu, a, &v, 4, 1024, NULL, &e_));
  TRY("peer", gpu.be->memcpy(&gpu, b, &g1, a, &gpu, 4096, NULL, &e_));
  TRY("back", g1.be->memcpy(&g1, &out, &cpu_dev, (char *)b + 4092, &g1, 4, NULL, &e_));
  TRY("sync", g1.be->synchronize(&g1, &e_));
  check(out == v, "peer copy cuda:0 -> cuda:1");
}

/* A write through a bad pointer: the launch or the next synchronize reports a sticky fault. */
static int test_fault(void) {
  cdv_compile_req r = saxpy_req(0);
  cdv_image img;
  cdv_err e;
  void *mod, *fn, *bad = (void *)(uintptr_t)0x10;
  if (cdv_cuda_fill_device(&gpu, 0, &e) || gpu.be->compile(&gpu, &r, &img, &e) ||
      gpu.be->module_load(&gpu, &img, &mod, &e) || gpu.be->module_function(&gpu, mod, "poke", &fn, &e))
    return show_err("setup", &e), 1;
  void *args[1] = {&bad};
  unsigned one[3] = {1, 1, 1};
  int rc = gpu.be->launch(&gpu, fn, one, one, 0, NULL, args, NULL, &e);
  if (rc == 0) rc = gpu.be->synchronize(&gpu, &e);
  show_err("poke(0x10)", &e);
  check(rc == -1 && e.sticky && e.code == CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal address is a sticky fault");
  void *p;
  rc = gpu.be->mem_alloc(&gpu, 16, CDV_MEM_DEVICE, NULL, &p, &e);
  show_err("after the fault", &e);
  check(rc == -1 && e.sticky, "the context stays poisoned");
  cdv_image_free(&img);
  return failures;
}
#endif

int main(int argc, char **argv) {
  (void)argc, (void)argv;
#ifdef WITH_GPU
  if (argc > 1 && strcmp(argv[1], "fault") == 0) return test_fault();
#endif
  test_driver();
  test_nvrtc_load();
  test_compile_saxpy();
  test_compile_options();
  test_compile_archs();
  test_compile_errors();
  test_threads();
  test_misc();
#ifdef WITH_GPU
  test_device();
  test_memset();
  test_kernels();
  test_memory();
  test_streams();
  test_threads_gpu();
  test_peer();
#endif
  printf("%s: %d failure%s\n", failures ? "FAIL" : "PASS", failures, failures == 1 ? "" : "s");
  return failures;
}
