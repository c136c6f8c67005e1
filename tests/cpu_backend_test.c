/*
 * cpu_backend_test.c: exercises the cpu device backend without Lua.
 *
 * Build and run from the repository root:
 *   { printf 'const char cdv_cpu_prelude[] = {'; xxd -i < lua/cudadev/cpu_prelude.hpp; printf ', 0x00};\n'; } \
 *       > /tmp/cpu_prelude_embed.c
 *   gcc -std=gnu11 -O2 -Wall -Wextra -Wshadow -fvisibility=hidden -Isrc \
 *       -o /tmp/cpu_backend_test tests/cpu_backend_test.c src/backend_cpu.c src/cpu_compile.c src/cpu_run.c \
 *       src/cpu_fiber.c src/diskcache.c src/util.c /tmp/cpu_prelude_embed.c -ldl -lpthread -lm
 *   (add -DCDV_CPU_UCONTEXT to test the ucontext fallback of the fiber switch)
 *   /tmp/cpu_backend_test            # CDV_TEST_QUICK=1: small sizes (e.g. with -DCDV_CPU_UCONTEXT);
 *                                    # CDV_TEST_ONLY=saxpy,reduce: some tests only
 *
 * It links the backend's files and util.c (cdv_fail, cdv_image_free), plus stubs below for what the rest of
 * cudadev provides (the CUDA hooks, which fail as they do without a driver).
 * The kernel cache goes to $CUDADEV_CACHE_DIR, else /tmp/cdv-cpu-test-cache.
 */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include "cpu.h"

/* ---------------------------------------------------------------- stubs */
int cdv_cuda_host_register(void *p, size_t n, cdv_err *e) {
  (void)p, (void)n;
  return cdv_fail(e, "cuMemHostRegister", 0, "CUDA_ERROR_NOT_INITIALIZED", "no CUDA driver");
}

int cdv_cuda_host_unregister(void *p) {
  (void)p;
  return 0;
}

static int fake_driver; /* 1: cdv_cuda_load says a driver is there, and the register hook above fails */

int cdv_cuda_load(void) { return fake_driver ? 0 : -1; }

/* ---------------------------------------------------------------- helpers */
static int failures, checks;
static cdv_device cpu = {.be = &cdv_backend_cpu, .ordinal = -1, .alias = "cpu"};
static const cdv_backend *be = &cdv_backend_cpu;
static int quick;

#define CHECK(cond, ...)                            \
  do {                                              \
    checks++;                                       \
    if (!(cond)) {                                  \
      failures++;                                   \
      printf("  FAIL %s:%d: ", __FILE__, __LINE__); \
      printf(__VA_ARGS__);                          \
      printf("\n");                                 \
    }                                               \
  } while (0)

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void set_fork(int on) { setenv("CUDADEV_CPU_FORK", on ? "1" : "0", 1); }

static void *dalloc(size_t bytes) {
  void *p = NULL;
  cdv_err e;
  if (be->mem_alloc(&cpu, bytes, CDV_MEM_DEVICE, NULL, &p, &e)) {
    printf("  alloc failed: %s\n", e.message);
    exit(1);
  }
  return p;
}

static void dfree(void *p) {
  cdv_err e;
  if (be->mem_free(&cpu, p, CDV_MEM_DEVICE, NULL, &e)) printf("  free failed: %s\n", e.message);
}

typedef struct mod {
  cdv_image img;
  void *m;
  void *fn[8];
} mod;

/* Compile and load src, resolving each entry; prints and returns -1 on failure (e filled). */
static int build(mod *m, const char *src, int n, const char *const *entries, const unsigned char *expr, int nopts,
                 const char *const *opts, cdv_err *e) {
  unsigned char zeros[8] = {0};
  cdv_compile_req req = {.source = src,
                         .source_len = strlen(src),
                         .name = "kernel.cu",
                         .nopts = nopts,
                         .opts = opts,
                         .nentries = n,
                         .entries = entries,
                         .is_expr = expr ? expr : zeros};
  memset(m, 0, sizeof *m);
  if (be->compile(&cpu, &req, &m->img, e)) return -1;
  if (be->module_load(&cpu, &m->img, &m->m, e)) return -1;
  for (int i = 0; i < n; i++)
    if (be->module_function(&cpu, m->m, m->img.lowered[i], &m->fn[i], e)) return -1;
  return 0;
}

static void *kernel1(mod *m, const char *src, const char *entry) {
  cdv_err e;
  if (build(m, src, 1, &entry, NULL, 0, NULL, &e)) {
    printf("  FAIL building %s: %s: %s: %s\n%s\n", entry, e.api, e.name, e.message, e.log ? e.log : "");
    failures++;
    return NULL;
  }
  return m->fn[0];
}

static int launch(void *fn, unsigned gx, unsigned bx, unsigned shared, void **args, cdv_err *e) {
  unsigned g[3] = {gx, 1, 1}, b[3] = {bx, 1, 1};
  return be->launch(&cpu, fn, g, b, shared, NULL, args, NULL, e);
}

static int launch_ok(void *fn, unsigned gx, unsigned bx, unsigned shared, void **args) {
  cdv_err e;
  int rc = launch(fn, gx, bx, shared, args, &e);
  if (rc) printf("  launch failed: %s: %s: %s\n", e.api, e.name, e.message);
  return rc;
}

/* ---------------------------------------------------------------- memory, streams, events */
static void test_memory(void) {
  printf("memory\n");
  cdv_err e;
  float *f = dalloc(1000 * sizeof(float));
  float one = 1.0f;
  CHECK(be->memset(&cpu, f, &one, 4, 1000, NULL, &e) == 0, "memset 4");
  int ok = 1;
  for (int i = 0; i < 1000; i++) ok &= f[i] == 1.0f;
  CHECK(ok, "pattern fill of 1000 floats");
  unsigned short h = 0xabcd;
  CHECK(be->memset(&cpu, (char *)f + 2, &h, 2, 7, NULL, &e) == 0, "memset 2 at odd offset");
  unsigned short *hs = (unsigned short *)f; /* 1.0f is 0x0000 0x3f80 in little-endian halves */
  CHECK(hs[0] == 0 && hs[1] == 0xabcd && hs[7] == 0xabcd && hs[8] == 0 && hs[9] == 0x3f80, "2-byte pattern");
  double dv = -2.5;
  double *d = dalloc(333 * sizeof(double));
  CHECK(be->memset(&cpu, d, &dv, 8, 333, NULL, &e) == 0 && d[0] == -2.5 && d[332] == -2.5, "memset 8");
  CHECK(be->memset(&cpu, d, &dv, 3, 1, NULL, &e) == -1 && strstr(e.message, "element size 3"), "bad element size: %s",
        e.message);
  CHECK(be->memcpy(&cpu, f, &cpu, d, &cpu, 64, NULL, &e) == 0 && !memcmp(f, d, 64), "memcpy");
  cdv_device gpu = {.alias = "cuda:0"};
  CHECK(be->memcpy(&cpu, f, &gpu, d, &cpu, 64, NULL, &e) == -1 &&
            !strcmp(e.message, "the cpu backend cannot copy to cuda:0"),
        "copy to a gpu refused: %s", e.message);
  void *p;
  CHECK(be->mem_alloc(&cpu, 4096, CDV_MEM_PINNED, NULL, &p, &e) == 0 &&
            be->mem_free(&cpu, p, CDV_MEM_PINNED, NULL, &e) == 0,
        "pinned without a driver is plain host memory: %s", e.message);
  fake_driver = 1;
  CHECK(be->mem_alloc(&cpu, 4096, CDV_MEM_PINNED, NULL, &p, &e) == -1 && !strcmp(e.api, "cuMemHostRegister"),
        "pinned with a driver whose register fails gives the hook's error: %s", e.api);
  fake_driver = 0;
  int local;
  CHECK(be->mem_free(&cpu, &local, CDV_MEM_DEVICE, NULL, &e) == -1 &&
            strstr(e.message, "was not allocated by the cpu device"),
        "free of a foreign pointer: %s", e.message);
  void *z = dalloc(0);
  CHECK(z != NULL, "zero-byte allocation gives a pointer");
  dfree(z);
  for (int i = 0; i < 2000; i++) { /* grow and shrink the side table */
    void *q = dalloc(64);
    dfree(q);
  }
  dfree(f);
  dfree(d);
  size_t fr, tot;
  CHECK(be->mem_info(&cpu, &fr, &tot, &e) == 0 && fr == 0 && tot > ((size_t)1 << 28), "mem_info: free 0, total %zu",
        tot);
}

static void test_streams(void) {
  printf("streams and events\n");
  cdv_err e;
  void *s, *a, *b, *nt;
  int idle = 0, lo = 1, hi = 1;
  float ms = -1;
  CHECK(be->stream_create(&cpu, 0, 1, &s, &e) == 0 && s, "stream_create");
  CHECK(be->stream_query(&cpu, s, &idle, &e) == 0 && idle, "stream idle");
  CHECK(be->stream_priority_range(&cpu, &lo, &hi, &e) == 0 && lo == 0 && hi == 0, "priority range 0,0");
  CHECK(be->event_create(&cpu, 1, 0, &a, &e) == 0 && be->event_create(&cpu, 1, 0, &b, &e) == 0, "events");
  CHECK(be->event_create(&cpu, 0, 0, &nt, &e) == 0, "non-timing event");
  CHECK(be->event_elapsed(&cpu, a, b, &ms, &e) == -1 && !strcmp(e.name, "CUDA_ERROR_INVALID_HANDLE") &&
            !strcmp(e.message, "the start event was never recorded"),
        "elapsed before record: %s", e.message);
  CHECK(be->event_record(&cpu, a, s, &e) == 0, "record a");
  usleep(2000);
  CHECK(be->event_record(&cpu, b, NULL, &e) == 0, "record b");
  CHECK(be->event_elapsed(&cpu, a, b, &ms, &e) == 0 && ms >= 1.5f && ms < 1000, "elapsed %.3f ms", ms);
  CHECK(be->event_record(&cpu, nt, s, &e) == 0, "record nt");
  CHECK(be->event_elapsed(&cpu, a, nt, &ms, &e) == -1 &&
            !strcmp(e.message, "the end event was created with timing disabled"),
        "non-timing elapsed: %s", e.message);
  CHECK(be->stream_wait_event(&cpu, s, a, &e) == 0, "wait_event");
  CHECK(be->stream_destroy(&cpu, NULL, &e) == -1, "the default stream is not destroyed");
  be->event_destroy(&cpu, a, &e), be->event_destroy(&cpu, b, &e), be->event_destroy(&cpu, nt, &e);
  CHECK(be->stream_destroy(&cpu, s, &e) == 0, "stream_destroy");
}

/* ---------------------------------------------------------------- kernels */
static const char saxpy_src[] =
    "extern \"C\" __global__ void saxpy(int n, float a, const float *__restrict__ x, float *__restrict__ y) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = a * x[i] + y[i];\n"
    "}\n";

static const char reduce_src[] =
    "extern \"C\" __global__ void reduce256(const float *in, float *out, int n) {\n"
    "  __shared__ float s[256];\n"
    "  unsigned t = threadIdx.x, i = blockIdx.x * blockDim.x + t;\n"
    "  s[t] = i < (unsigned)n ? in[i] : 0.0f;\n"
    "  __syncthreads();\n"
    "  for (unsigned k = blockDim.x / 2; k > 0; k >>= 1) {\n"
    "    if (t < k) s[t] += s[t + k];\n"
    "    __syncthreads();\n"
    "  }\n"
    "  if (t == 0) out[blockIdx.x] = s[0];\n"
    "}\n";

__attribute__((noinline)) static void plain_saxpy(int n, float a, const float *x, float *y) {
  for (int i = 0; i < n; i++) y[i] = a * x[i] + y[i];
}

__attribute__((noinline)) static float plain_sum(const float *x, int n) {
  float s = 0;
  for (int i = 0; i < n; i++) s += x[i];
  return s;
}

static double best_of(int reps, void *fn, unsigned gx, unsigned bx, void **args, int *rc) {
  double best = 1e9;
  for (int r = 0; r < reps; r++) {
    double t0 = now();
    *rc |= launch_ok(fn, gx, bx, 0, args);
    double t = now() - t0;
    best = t < best ? t : best;
  }
  return best;
}

static void test_saxpy(void) {
  printf("saxpy\n");
  mod m;
  void *fn = kernel1(&m, saxpy_src, "saxpy");
  if (!fn) return;
  CHECK(((cdv_cpu_func *)fn)->flags == CDV_CPU_FLAG_SIMD && ((cdv_cpu_func *)fn)->fis,
        "saxpy runs on the simd path (no fibers: NOTE [fast paths])");
  int n = quick ? 1 << 16 : 1 << 24;
  float *x = dalloc((size_t)n * 4), *y = dalloc((size_t)n * 4), a = 2.0f;
  for (int i = 0; i < n; i++) x[i] = (float)(i % 1000), y[i] = 1.0f;
  void *args[] = {&n, &a, &x, &y};
  int rc = 0;
  set_fork(1);
  rc |= launch_ok(fn, (unsigned)(n + 255) / 256, 256, 0, args);
  int ok = 1;
  for (int i = 0; i < n; i++) ok &= y[i] == 2.0f * (float)(i % 1000) + 1.0f;
  CHECK(rc == 0 && ok, "saxpy 2^%d correct (forked launch)", quick ? 16 : 24);
  int reps = getenv("CDV_TEST_REPS") ? atoi(getenv("CDV_TEST_REPS")) : 3;
  double tf = best_of(reps, fn, (unsigned)(n + 255) / 256, 256, args, &rc);
  set_fork(0);
  double ti = best_of(reps, fn, (unsigned)(n + 255) / 256, 256, args, &rc);
  double tp = 1e9;
  for (int r = 0; r < 3; r++) {
    double t0 = now();
    plain_saxpy(n, a, x, y);
    double t = now() - t0;
    tp = t < tp ? t : tp;
  }
  CHECK(rc == 0, "timed launches");
  printf("  saxpy n=%d: forked %.2f ms, in-process %.2f ms, plain C loop (1 thread) %.2f ms: ratio %.2f / %.2f\n", n,
         tf * 1e3, ti * 1e3, tp * 1e3, tf / tp, ti / tp);
  dfree(x), dfree(y);
}

static void test_reduce(void) {
  printf("block reduction (256 threads, __syncthreads in a loop)\n");
  mod m;
  void *fn = kernel1(&m, reduce_src, "reduce256");
  if (!fn) return;
  CHECK(((cdv_cpu_func *)fn)->flags == (CDV_CPU_FLAG_FIBERS | CDV_CPU_FLAG_FISSION) && ((cdv_cpu_func *)fn)->fis,
        "reduce256 runs on the fission path (fibers when its block would not fit)");
  int n = quick ? 1 << 16 : 1 << 24, nb = (n + 255) / 256;
  float *in = dalloc((size_t)n * 4), *out = dalloc((size_t)nb * 4);
  double expect = 0;
  for (int i = 0; i < n; i++) in[i] = (float)(i % 7) * 0.5f, expect += in[i];
  void *args[] = {&in, &out, &n};
  int rc = 0;
  for (int fk = 1; fk >= 0; fk--) {
    set_fork(fk);
    memset(out, 0, (size_t)nb * 4);
    rc |= launch_ok(fn, (unsigned)nb, 256, 0, args);
    double got = 0;
    int blocks_ok = 1;
    for (int b = 0; b < nb; b++) {
      got += out[b];
      double want = 0;
      for (int k = 0; k < 256 && b < 4; k++) want += in[b * 256 + k];
      blocks_ok &= b >= 4 || fabs(want - out[b]) < 1e-3;
    }
    CHECK(rc == 0 && blocks_ok && fabs(got - expect) < 1e-6 * expect, "reduction of 2^%d floats (%s): %.1f vs %.1f",
          quick ? 16 : 24, fk ? "forked" : "in-process", got, expect);
  }
  set_fork(1);
  int reps = getenv("CDV_TEST_REPS") ? atoi(getenv("CDV_TEST_REPS")) : 3;
  double tf = best_of(reps, fn, (unsigned)nb, 256, args, &rc);
  set_fork(0);
  double ti = best_of(reps, fn, (unsigned)nb, 256, args, &rc);
  double tp = 1e9;
  volatile float sink;
  for (int r = 0; r < 3; r++) {
    double t0 = now();
    sink = plain_sum(in, n);
    double t = now() - t0;
    tp = t < tp ? t : tp;
  }
  (void)sink;
  printf("  reduce n=%d: forked %.2f ms, in-process %.2f ms, plain C loop (1 thread) %.2f ms: ratio %.1f / %.1f\n", n,
         tf * 1e3, ti * 1e3, tp * 1e3, tf / tp, ti / tp);
  dfree(in), dfree(out);
}

static void test_scan(void) {
  printf("prefix scan (Hillis-Steele, double-buffered shared memory)\n");
  static const char src[] =
      "extern \"C\" __global__ void scan256(const int *in, int *out) {\n"
      "  __shared__ int buf[2][256];\n"
      "  int t = threadIdx.x, base = blockIdx.x * blockDim.x, p = 0;\n"
      "  buf[0][t] = in[base + t];\n"
      "  __syncthreads();\n"
      "  for (int off = 1; off < (int)blockDim.x; off <<= 1) {\n"
      "    int v = buf[p][t];\n"
      "    if (t >= off) v += buf[p][t - off];\n"
      "    buf[1 - p][t] = v;\n"
      "    p = 1 - p;\n"
      "    __syncthreads();\n"
      "  }\n"
      "  out[base + t] = buf[p][t];\n"
      "}\n";
  mod m;
  void *fn = kernel1(&m, src, "scan256");
  if (!fn) return;
  int nb = 64, n = nb * 256;
  int *in = dalloc((size_t)n * 4), *out = dalloc((size_t)n * 4);
  for (int i = 0; i < n; i++) in[i] = (i * 7) % 11 - 3;
  void *args[] = {&in, &out};
  set_fork(1);
  int rc = launch_ok(fn, (unsigned)nb, 256, 0, args), ok = 1;
  for (int b = 0; b < nb; b++) {
    int acc = 0;
    for (int t = 0; t < 256; t++) acc += in[b * 256 + t], ok &= out[b * 256 + t] == acc;
  }
  CHECK(rc == 0 && ok, "inclusive scan of %d blocks", nb);
  /* the same scan with its barriers in a header found on an include path: the scan of included files must
   * see them, or the kernel would run without fibers */
  mkdir("/tmp/cdv-test-include", 0700);
  FILE *h = fopen("/tmp/cdv-test-include/block_scan.h", "w");
  fputs(
      "#pragma once\n__device__ int block_scan(int *buf, int v) {\n  int t = threadIdx.x;\n  buf[t] = v;\n"
      "  for (int off = 1; off < (int)blockDim.x; off <<= 1) {\n    __syncthreads();\n"
      "    int x = t >= off ? buf[t - off] : 0;\n    __syncthreads();\n    buf[t] += x;\n  }\n"
      "  __syncthreads();\n  return buf[t];\n}\n",
      h);
  fclose(h);
  static const char src2[] =
      "#include \"block_scan.h\"\n"
      "extern \"C\" __global__ void scan_hdr(const int *in, int *out) {\n"
      "  __shared__ int buf[256];\n"
      "  out[blockIdx.x * blockDim.x + threadIdx.x] = block_scan(buf, in[blockIdx.x * blockDim.x + threadIdx.x]);\n"
      "}\n";
  const char *k = "scan_hdr", *inc[] = {"/tmp/cdv-test-include"};
  unsigned char zero = 0;
  cdv_compile_req req = {.source = src2,
                         .source_len = strlen(src2),
                         .name = "kernel.cu",
                         .nincludes = 1,
                         .include_paths = inc,
                         .nentries = 1,
                         .entries = &k,
                         .is_expr = &zero};
  cdv_err e;
  memset(out, 0, (size_t)n * 4);
  rc = be->compile(&cpu, &req, &m.img, &e) || be->module_load(&cpu, &m.img, &m.m, &e) ||
       be->module_function(&cpu, m.m, m.img.lowered[0], &m.fn[0], &e) ||
       launch(m.fn[0], (unsigned)nb, 256, 0, args, &e);
  ok = 1;
  for (int b = 0; b < nb; b++) {
    int acc = 0;
    for (int t = 0; t < 256; t++) acc += in[b * 256 + t], ok &= out[b * 256 + t] == acc;
  }
  CHECK(rc == 0 && ok && ((cdv_cpu_func *)m.fn[0])->flags == CDV_CPU_FLAG_FIBERS,
        "barriers in a header on an include path: %s", rc ? e.message : "ok");
  dfree(in), dfree(out);
}

static void test_warps(void) {
  printf("warp shuffles and votes\n");
  static const char src[] =
      "__device__ float warp_sum(float v) {\n"
      "  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);\n"
      "  return v;\n"
      "}\n"
      "extern \"C\" __global__ void warp_reduce(const float *in, float *out, int n) {\n"
      "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
      "  float v = warp_sum(i < n ? in[i] : 0.0f);\n"
      "  if ((threadIdx.x & 31) == 0) atomicAdd(out, v);\n"
      "}\n"
      "extern \"C\" __global__ void warp_misc(int *out) {\n"
      "  int lane = threadIdx.x & 31;\n"
      "  unsigned full = __activemask();\n"
      "  int o = threadIdx.x * 8;\n"
      "  out[o] = (int)__ballot_sync(full, lane & 1);\n"
      "  out[o + 1] = __shfl_xor_sync(full, lane, 1);\n"
      "  out[o + 2] = __shfl_up_sync(full, lane, 3);\n"
      "  out[o + 3] = __shfl_sync(full, lane * 10, 5);\n"
      "  out[o + 4] = __any_sync(full, lane == 7) + 2 * __all_sync(full, lane < 100) + 4 * __all_sync(full, lane < "
      "3);\n"
      "  out[o + 5] = __syncthreads_count(threadIdx.x % 3 == 0);\n"
      "  out[o + 6] = __syncthreads_and(1) + 2 * __syncthreads_or(threadIdx.x == 40);\n"
      "  double d = __shfl_down_sync(full, (double)lane * 0.5, 2, 8);\n"
      "  out[o + 7] = (int)(d * 2);\n"
      "}\n"
      "#include <cooperative_groups.h>\n"
      "#include <cooperative_groups/reduce.h>\n"
      "namespace cg = cooperative_groups;\n"
      "extern \"C\" __global__ void cg_reduce(const float *in, float *out, int n) {\n"
      "  cg::thread_block block = cg::this_thread_block();\n"
      "  cg::thread_block_tile<32> tile = cg::tiled_partition<32>(block);\n"
      "  __shared__ float partial[32];\n"
      "  int i = blockIdx.x * blockDim.x + block.thread_rank();\n"
      "  float v = cg::reduce(tile, i < n ? in[i] : 0.0f, cg::plus<float>());\n"
      "  if (tile.thread_rank() == 0) partial[tile.meta_group_rank()] = v;\n"
      "  block.sync();\n"
      "  if (tile.meta_group_rank() == 0) {\n"
      "    v = tile.thread_rank() < tile.meta_group_size() ? partial[tile.thread_rank()] : 0.0f;\n"
      "    v = cg::reduce(tile, v, cg::plus<float>());\n"
      "    if (tile.thread_rank() == 0) atomicAdd(out, v);\n"
      "  }\n"
      "}\n";
  const char *entries[] = {"warp_reduce", "warp_misc", "cg_reduce"};
  mod m;
  cdv_err e;
  if (build(&m, src, 3, entries, NULL, 0, NULL, &e)) {
    CHECK(0, "build: %s %s", e.message, e.log ? e.log : "");
    return;
  }
  int n = 100000, nb = (n + 255) / 256;
  float *in = dalloc((size_t)n * 4), *out = dalloc(4);
  double expect = 0;
  for (int i = 0; i < n; i++) in[i] = (float)(i % 5), expect += in[i];
  *out = 0;
  void *args[] = {&in, &out, &n};
  set_fork(1);
  int rc = launch_ok(m.fn[0], (unsigned)nb, 256, 0, args);
  CHECK(rc == 0 && fabs(*out - expect) < 1e-3 * expect, "warp-shuffle reduction %.0f vs %.0f", *out, expect);
  *out = 0;
  rc = launch_ok(m.fn[2], (unsigned)nb, 256, 0, args);
  CHECK(rc == 0 && fabs(*out - expect) < 1e-3 * expect, "cooperative groups reduction %.0f vs %.0f", *out, expect);
  int *o = dalloc(48 * 8 * 4);
  void *args2[] = {&o};
  rc = launch_ok(m.fn[1], 1, 48, 0, args2); /* 48 threads: the second warp has 16 lanes */
  int ok = 1;
  for (int t = 0; t < 48; t++) {
    int lane = t & 31, *r = o + t * 8, w8 = (lane & 7);
    int up = lane >= 3 ? lane - 3 : lane;
    int down = w8 + 2 < 8 ? lane + 2 : lane;
    int want[8] = {t < 32 ? (int)0xaaaaaaaau : 0xaaaa, lane ^ 1, up, 50, 1 + 2, 16, 1 + 2, down};
    for (int k = 0; k < 8; k++)
      if (r[k] != want[k]) {
        if (ok) printf("  thread %d field %d: got %d want %d\n", t, k, r[k], want[k]);
        ok = 0;
      }
  }
  CHECK(rc == 0 && ok, "ballot, xor/up/idx shuffles, any/all, __syncthreads_count/and/or, width-8 double shuffle");
  dfree(in), dfree(out), dfree(o);
}

static void test_histogram(void) {
  printf("histogram (shared and global atomicAdd)\n");
  static const char src[] =
      "extern \"C\" __global__ void hist(const unsigned char *data, int n, unsigned *bins) {\n"
      "  __shared__ unsigned local[256];\n"
      "  for (int b = threadIdx.x; b < 256; b += blockDim.x) local[b] = 0;\n"
      "  __syncthreads();\n"
      "  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)\n"
      "    atomicAdd(&local[data[i]], 1u);\n"
      "  __syncthreads();\n"
      "  for (int b = threadIdx.x; b < 256; b += blockDim.x) atomicAdd(&bins[b], local[b]);\n"
      "}\n";
  mod m;
  void *fn = kernel1(&m, src, "hist");
  if (!fn) return;
  int n = 1 << 20;
  unsigned char *d = dalloc((size_t)n);
  unsigned *bins = dalloc(256 * 4), want[256] = {0};
  unsigned r = 12345;
  for (int i = 0; i < n; i++) {
    r = r * 1103515245u + 12345u;
    d[i] = (unsigned char)(r >> 16);
    want[d[i]]++;
  }
  memset(bins, 0, 1024);
  void *args[] = {&d, &n, &bins};
  set_fork(1);
  int rc = launch_ok(fn, 64, 128, 0, args);
  CHECK(rc == 0 && !memcmp(bins, want, sizeof want), "256-bin histogram of 2^20 bytes");
  dfree(d), dfree(bins);
}

static void test_templates(void) {
  printf("templates through name expressions\n");
  static const char src[] =
      "template <typename T> __global__ void axpy(T a, const T *x, T *y, int n) {\n"
      "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
      "  if (i < n) y[i] += a * x[i];\n"
      "}\n"
      "namespace ns {\n"
      "template <typename T, int K> __global__ void fill(T *p, int n) {\n"
      "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
      "  if (i < n) p[i] = (T)(K * i);\n"
      "}\n"
      "}\n"
      "struct pair { int a; double b; };\n"
      "extern \"C\" __global__ void vec4(float4 v, pair q, float *out) {\n"
      "  out[threadIdx.x] = v.x + v.y + v.z + v.w + q.a + (float)q.b;\n"
      "}\n";
  const char *entries[] = {"axpy<float>", "axpy<double>", "ns::fill<int,4>", "vec4"};
  unsigned char expr[] = {1, 1, 1, 0};
  mod m;
  cdv_err e;
  if (build(&m, src, 4, entries, expr, 0, NULL, &e)) {
    CHECK(0, "build: %s %s", e.message, e.log ? e.log : "");
    return;
  }
  CHECK(!strcmp(((cdv_cpu_func *)m.fn[0])->name, "axpy<float>"), "kernel name kept: %s",
        ((cdv_cpu_func *)m.fn[0])->name);
  int n = 1000;
  double *x = dalloc(n * 8), *y = dalloc(n * 8), a = 0.5;
  int *p = dalloc(n * 4);
  for (int i = 0; i < n; i++) x[i] = i, y[i] = 1;
  void *args[] = {&a, &x, &y, &n}, *args2[] = {&p, &n};
  set_fork(1);
  int rc = launch_ok(m.fn[1], 4, 256, 0, args) | launch_ok(m.fn[2], 4, 256, 0, args2);
  int ok = 1;
  for (int i = 0; i < n; i++) ok &= y[i] == 1 + 0.5 * i && p[i] == 4 * i;
  CHECK(rc == 0 && ok, "axpy<double> and ns::fill<int,4>");
  /* struct arguments from a buffer with no particular alignment, as a caller may pack them */
  _Alignas(16) unsigned char packed[64];
  float v4[4] = {1, 2, 3, 4};
  struct {
    int a;
    double b;
  } q = {10, 0.5};
  float *o = dalloc(64);
  memcpy(packed + 4, v4, 16);
  memcpy(packed + 20, &q, sizeof q);
  void *args3[] = {packed + 4, packed + 20, &o};
  size_t off, sz;
  CHECK(be->param_info(&cpu, m.fn[3], 0, &off, &sz) == 0 && off == 0 && sz == 16 &&
            be->param_info(&cpu, m.fn[3], 1, &off, &sz) == 0 && off == 16 && sz == 16 &&
            be->param_info(&cpu, m.fn[3], 2, &off, &sz) == 0 && off == 32 && sz == 8,
        "param_info of float4, struct, pointer");
  CHECK(launch_ok(m.fn[3], 1, 4, 0, args3) == 0 && o[3] == 20.5f, "misaligned float4 and struct arguments: %g", o[3]);
  dfree(o);
  dfree(x), dfree(y), dfree(p);
}

static void test_dynamic_shared(void) {
  printf("extern __shared__ (function and namespace scope)\n");
  static const char src[] =
      "extern __shared__ float gsm[];\n"
      "extern \"C\" __global__ void reverse_block(int *d) {\n"
      "  extern __shared__ __align__(16) int s[];\n"
      "  int t = threadIdx.x, base = blockIdx.x * blockDim.x;\n"
      "  s[t] = d[base + t];\n"
      "  __syncthreads();\n"
      "  d[base + t] = s[blockDim.x - 1 - t];\n"
      "}\n"
      "extern \"C\" __global__ void scale_rev(float *d, float f) {\n"
      "  int t = threadIdx.x, base = blockIdx.x * blockDim.x;\n"
      "  gsm[t] = d[base + t] * f;\n"
      "  __syncthreads();\n"
      "  d[base + t] = gsm[blockDim.x - 1 - t];\n"
      "}\n";
  const char *entries[] = {"reverse_block", "scale_rev"};
  mod m;
  cdv_err e;
  if (build(&m, src, 2, entries, NULL, 0, NULL, &e)) {
    CHECK(0, "build: %s %s", e.message, e.log ? e.log : "");
    return;
  }
  int *d = dalloc(8 * 128 * 4);
  float *f = dalloc(8 * 128 * 4), k = 2;
  for (int i = 0; i < 8 * 128; i++) d[i] = i, f[i] = (float)i;
  void *a1[] = {&d}, *a2[] = {&f, &k};
  int rc = 0;
  for (int fk = 1; fk >= 0; fk--) {
    set_fork(fk);
    rc |= launch_ok(m.fn[0], 8, 128, 128 * 4, a1) | launch_ok(m.fn[1], 8, 128, 128 * 4, a2);
  }
  int ok = 1; /* reversed twice, scaled twice */
  for (int i = 0; i < 8 * 128; i++) ok &= d[i] == i && f[i] == 4.0f * (float)i;
  CHECK(rc == 0 && ok, "dynamic shared memory, forked and in-process");
  dfree(d), dfree(f);
}

/* Launch with stdout captured into a string. */
static char *captured(void *fn, unsigned gx, unsigned bx, void **args, int *rc) {
  fflush(stdout);
  int saved = dup(1);
  FILE *t = tmpfile();
  dup2(fileno(t), 1);
  cdv_err e;
  *rc = launch(fn, gx, bx, 0, args, &e);
  fflush(stdout);
  dup2(saved, 1);
  close(saved);
  long n = ftell(t) > 0 ? ftell(t) : lseek(fileno(t), 0, SEEK_END);
  char *s = calloc(1, (size_t)n + 1);
  lseek(fileno(t), 0, SEEK_SET);
  if (n > 0 && read(fileno(t), s, (size_t)n) < 0) s[0] = 0;
  fclose(t);
  return s;
}

static void test_printf(void) {
  printf("printf\n");
  static const char src[] =
      "extern \"C\" __global__ void hello(int v) {\n"
      "  if (threadIdx.x < 2) printf(\"hello from block %d thread %d v=%d\\n\", blockIdx.x, threadIdx.x, v);\n"
      "}\n";
  mod m;
  void *fn = kernel1(&m, src, "hello");
  if (!fn) return;
  int v = 42, rc;
  void *args[] = {&v};
  for (int fk = 1; fk >= 0; fk--) {
    set_fork(fk);
    char *out = captured(fn, 2, 32, args, &rc);
    printf("  %s output: %s", fk ? "forked" : "in-process", out);
    CHECK(rc == 0 && strstr(out, "hello from block 1 thread 1 v=42\n") && strstr(out, "block 0 thread 0"),
          "printf output reaches stdout");
    free(out);
  }
}

static void expect_error(const char *what, int rc, const cdv_err *e, const char *name, const char *msg) {
  printf("  %s -> %s: %s: %s\n", what, e->api, e->name, e->message);
  CHECK(rc == -1 && !strcmp(e->name, name) && strstr(e->message, msg), "%s: expected %s containing '%s'", what, name,
        msg);
}

static void test_faults(void) {
  printf("fault containment\n");
  static const char src[] =
      "#include <assert.h>\n"
      "extern \"C\" __global__ void crash(int *p, int *bad) {\n"
      "  if (blockIdx.x == 3 && threadIdx.x == 5) bad[threadIdx.x] = 1;\n"
      "  p[blockIdx.x] = 1;\n"
      "}\n"
      "extern \"C\" __global__ void check(const int *v, int n) {\n"
      "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
      "  if (i < n) assert(v[i] < 100);\n"
      "}\n"
      "extern \"C\" __global__ void trapk(int *p) {\n"
      "  __syncthreads();\n"
      "  if (threadIdx.x == 1) __trap();\n"
      "  p[threadIdx.x] = 1;\n"
      "}\n"
      "extern \"C\" __global__ void deadlock(int *p) {\n"
      "  if (threadIdx.x < 16) __syncthreads(); else __syncwarp();\n"
      "  p[threadIdx.x] = 1;\n"
      "}\n"
      "extern \"C\" __global__ void deep(int *out) {\n"
      "  volatile char big[1 << 20];\n"
      "  for (int i = 0; i < (1 << 20); i += 4096) big[i] = (char)i;\n"
      "  out[0] = big[4096];\n"
      "}\n"
      "extern \"C\" __global__ void divide(int *p, int z) { p[threadIdx.x] = 10 / z; }\n";
  const char *entries[] = {"crash", "check", "trapk", "deadlock", "deep", "divide"};
  mod m;
  cdv_err e;
  if (build(&m, src, 6, entries, NULL, 0, NULL, &e)) {
    CHECK(0, "build: %s %s", e.message, e.log ? e.log : "");
    return;
  }
  int *p = dalloc(4096), *bad = (int *)16, *v = dalloc(100 * 4), n = 100, zero = 0;
  for (int i = 0; i < 100; i++) v[i] = i == 37 ? 500 : i;
  void *a_crash[] = {&p, &bad}, *a_check[] = {&v, &n}, *a_p[] = {&p}, *a_div[] = {&p, &zero};
  set_fork(1);
  expect_error("segfault", launch(m.fn[0], 8, 32, 0, a_crash, &e), &e, "CUDA_ERROR_ILLEGAL_ADDRESS",
               "kernel 'crash' crashed on the cpu device: SIGSEGV (segmentation fault) at address 0x24 (block (3,0,0), "
               "thread (5,0,0))");
  CHECK(e.sticky == 0 && !strcmp(e.api, "cpu.launch"), "not sticky, api cpu.launch");
  expect_error("assert", launch(m.fn[1], 4, 32, 0, a_check, &e), &e, "CUDA_ERROR_ASSERT",
               "kernel 'check' failed an assertion: kernel.cu:8: v[i] < 100 (block (1,0,0), thread (5,0,0))");
  expect_error("__trap", launch(m.fn[2], 1, 32, 0, a_p, &e), &e, "CUDA_ERROR_LAUNCH_FAILED",
               "kernel 'trapk' trapped: kernel.cu:12: __trap() called (block (0,0,0), thread (1,0,0))");
  expect_error("deadlock", launch(m.fn[3], 1, 32, 0, a_p, &e), &e, "CUDA_ERROR_LAUNCH_FAILED",
               "kernel 'deadlock' deadlocked on the cpu device: 16 threads wait at __syncthreads while 16 wait");
  expect_error("stack overflow", launch(m.fn[4], 1, 1, 0, a_p, &e), &e, "CUDA_ERROR_ILLEGAL_ADDRESS",
               "stack overflow (a thread used more than");
  expect_error("division by zero", launch(m.fn[5], 1, 4, 0, a_div, &e), &e, "CUDA_ERROR_LAUNCH_FAILED", "SIGFPE");
  n = 30;
  CHECK(launch_ok(m.fn[1], 1, 32, 0, a_check) == 0, "the process lives on and launches again");
  set_fork(0);
  n = 100;
  expect_error("in-process assert", launch(m.fn[1], 4, 32, 0, a_check, &e), &e, "CUDA_ERROR_ASSERT", "v[i] < 100");
  expect_error("in-process __trap", launch(m.fn[2], 1, 32, 0, a_p, &e), &e, "CUDA_ERROR_LAUNCH_FAILED",
               "__trap() called");
  expect_error("in-process deadlock", launch(m.fn[3], 1, 32, 0, a_p, &e), &e, "CUDA_ERROR_LAUNCH_FAILED", "deadlocked");
  n = 30;
  CHECK(launch_ok(m.fn[1], 1, 32, 0, a_check) == 0, "in-process launches work after failures");
  set_fork(1);
  dfree(p), dfree(v);
}

static void test_device_globals(void) {
  printf("__device__ globals and host memory seen after forked launches\n");
  static const char src[] =
      "__device__ int counter;\n"
      "__constant__ int kMul = 3;\n"
      "extern \"C\" __global__ void bump() { atomicAdd(&counter, kMul); }\n"
      "extern \"C\" __global__ void read_counter(int *out) { *out = counter; }\n";
  const char *entries[] = {"bump", "read_counter"};
  mod m;
  cdv_err e;
  if (build(&m, src, 2, entries, NULL, 0, NULL, &e)) {
    CHECK(0, "build: %s", e.message);
    return;
  }
  int *out = dalloc(4);
  void *none[] = {NULL}, *a[] = {&out};
  set_fork(1);
  int rc = launch_ok(m.fn[0], 4, 64, 0, none) | launch_ok(m.fn[1], 1, 1, 0, a);
  CHECK(rc == 0 && *out == 768, "counter after a forked launch: %d (768 expected)", *out);
  /* a host buffer this backend did not allocate: the launch runs in-process, so the write is seen */
  static int host_buf[1];
  int *hp = host_buf;
  void *a2[] = {&hp};
  rc = launch_ok(m.fn[1], 1, 1, 0, a2);
  CHECK(rc == 0 && host_buf[0] == 768, "write into host memory not allocated by the backend: %d", host_buf[0]);
  dfree(out);
}

static void test_indexing(void) {
  printf("3-D grids and blocks\n");
  static const char src[] =
      "extern \"C\" __global__ void ids(int *out) {\n"
      "  int bx = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);\n"
      "  int tx = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);\n"
      "  int nt = blockDim.x * blockDim.y * blockDim.z;\n"
      "  out[bx * nt + tx] = bx * 1000 + tx;\n"
      "}\n";
  mod m;
  void *fn = kernel1(&m, src, "ids");
  if (!fn) return;
  unsigned g[3] = {2, 3, 4}, b[3] = {8, 4, 2};
  int n = 24 * 64, *out = dalloc((size_t)n * 4);
  void *args[] = {&out};
  cdv_err e;
  int rc = be->launch(&cpu, fn, g, b, 0, NULL, args, NULL, &e), ok = 1;
  for (int i = 0; i < n; i++) ok &= out[i] == (i / 64) * 1000 + i % 64;
  CHECK(rc == 0 && ok, "every (block, thread) pair once");
  dfree(out);
}

static void test_compile_errors(void) {
  printf("compile-time checks\n");
  mod m;
  cdv_err e;
  const char *k = "k";
  static const char asm_src[] =
      "extern \"C\" __global__ void k(int *p) {\n"
      "  // a comment that mentions asm(\"nop\") is fine\n"
      "  const char *s = \"asm volatile\"; (void)s;\n"
      "  int lane; asm volatile(\"mov.u32 %0, %%laneid;\" : \"=r\"(lane));\n"
      "  p[0] = lane;\n"
      "}\n";
  expect_error("asm", build(&m, asm_src, 1, &k, NULL, 0, NULL, &e), &e, "CUDA_ERROR_NOT_SUPPORTED",
               "kernel.cu:4: inline PTX asm is not supported on the cpu device");
  CHECK(!strcmp(e.api, "cpu.compile") && e.log && strstr(e.log, "laneid"), "the compiler's log comes along");
  free(e.log);
  static const char tex_src[] =
      "extern \"C\" __global__ void k(cudaTextureObject_t t, float *p) { p[0] = tex2D<float>(t, 0, 0); }\n";
  expect_error("texture", build(&m, tex_src, 1, &k, NULL, 0, NULL, &e), &e, "CUDA_ERROR_NOT_SUPPORTED",
               "kernel.cu:1: texture object 'cudaTextureObject_t' is not supported on the cpu device");
  static const char grid_src[] =
      "#include <cooperative_groups.h>\nnamespace cg = cooperative_groups;\n"
      "extern \"C\" __global__ void k() { cg::grid_group g = cg::this_grid(); g.sync(); }\n"
      "extern \"C\" __global__ void k2() { cg::this_multi_grid().sync(); }\n";
  /* grid-wide sync runs in cooperative launches (NOTE [cpu grid sync]); the multi-device grid does not */
  expect_error("multi-grid sync", build(&m, grid_src, 1, &k, NULL, 0, NULL, &e), &e, "CUDA_ERROR_NOT_SUPPORTED",
               "this_multi_grid");
  static const char wmma_src[] =
      "#include <mma.h>\nusing namespace nvcuda;\n\n__global__ void k() { wmma::fragment<int> f; }\n";
  /* the header that declares wmma is named first (a toolkit header the cpu device cannot serve) */
  expect_error("wmma", build(&m, wmma_src, 1, &k, NULL, 0, NULL, &e), &e, "CUDA_ERROR_NOT_SUPPORTED",
               "kernel.cu:1: CUDA toolkit header <mma.h> is not available on the cpu device");
  static const char wmma2_src[] = "using namespace nvcuda;\n\n\n__global__ void k() { wmma::fragment<int> f; }\n";
  expect_error("wmma without its header", build(&m, wmma2_src, 1, &k, NULL, 0, NULL, &e), &e,
               "CUDA_ERROR_NOT_SUPPORTED", "kernel.cu:4: tensor core intrinsic 'wmma::'");
  const char *bad_opts[] = {"-arch=sm_90", "--frobnicate"};
  expect_error("unknown option", build(&m, saxpy_src, 1, (const char *[]){"saxpy"}, NULL, 2, bad_opts, &e), &e,
               "NVRTC_ERROR_INVALID_OPTION", "unsupported compile option '--frobnicate' on the cpu device");
  static const char bad_src[] = "extern \"C\" __global__ void k(int *p) {\n  p[0] = undeclared_thing;\n}\n";
  int rc = build(&m, bad_src, 1, &k, NULL, 0, NULL, &e);
  expect_error("compiler error", rc, &e, "HOST_COMPILER_ERROR", "compilation of kernel.cu failed");
  CHECK(!strcmp(e.api, "c++") && e.log && strstr(e.log, "kernel.cu:2") && m.img.log &&
            strstr(m.img.log, "undeclared_thing"),
        "compiler log in e->log and out->log");
  free(e.log);
  /* refused constructs matter only where the host compiler fails: not in a branch the cpu device does not
   * take, not in asm the host understands; and the programming guide's double atomicAdd does not clash */
  static const char ok_src[] =
      "#if __CUDA_ARCH__ < 600\n"
      "__device__ double atomicAdd(double *a, double v) { return v; }\n"
      "#endif\n"
      "extern \"C\" __global__ void k(int *p) {\n"
      "#ifdef __CUDADEV_CPU__\n"
      "  int lane = threadIdx.x & 31;\n"
      "#else\n"
      "  int lane; asm volatile(\"mov.u32 %0, %%laneid;\" : \"=r\"(lane));\n"
      "#endif\n"
      "  asm volatile(\"\" ::: \"memory\");\n"
      "  p[lane] = lane + 1;\n"
      "}\n";
  int orc = build(&m, ok_src, 1, &k, NULL, 0, NULL, &e);
  CHECK(orc == 0, "asm in an inactive branch, a host-compatible asm, __CUDA_ARCH__ guards: %s", orc ? e.message : "ok");
  if (orc == 0) {
    int *p = dalloc(32 * 4);
    void *args[] = {&p};
    CHECK(launch_ok(m.fn[0], 1, 32, 0, args) == 0 && p[31] == 32, "and it runs");
    dfree(p);
  }
  setenv("CUDADEV_CXX", "/nonexistent/g++", 1);
  expect_error("missing compiler", build(&m, saxpy_src, 1, (const char *[]){"saxpy"}, NULL, 0, NULL, &e), &e, "ENOENT",
               "no host C++ compiler found: '/nonexistent/g++' (from $CUDADEV_CXX) not found");
  unsetenv("CUDADEV_CXX");
  /* options NVRTC users pass: GPU-only ones are ignored, -D is honoured, two-token forms work */
  static const char def_src[] = "extern \"C\" __global__ void k(int *p) { p[0] = VALUE * SCALE; }\n";
  const char *opts[] = {"-arch",
                        "sm_90",
                        "--gpu-architecture=compute_80",
                        "-lineinfo",
                        "--fmad=false",
                        "-DVALUE=6",
                        "-D",
                        "SCALE=7",
                        "-std=c++14",
                        "--use_fast_math",
                        "-default-device",
                        "-rdc=true"};
  rc = build(&m, def_src, 1, &k, NULL, 12, opts, &e);
  CHECK(rc == 0, "GPU options accepted: %s", rc ? e.message : "");
  if (rc == 0) {
    int *p = dalloc(4);
    void *args[] = {&p};
    CHECK(launch_ok(m.fn[0], 1, 1, 0, args) == 0 && *p == 42, "-D macros reach the source: %d", *p);
    dfree(p);
  }
  /* headers given with the source, CUDA headers, math and half precision compile */
  static const char hdr_src[] =
      "#include <cuda_runtime.h>\n#include <cuda_fp16.h>\n#include <math_constants.h>\n#include \"my/util.h\"\n"
      "extern \"C\" __global__ void k(float *p) {\n"
      "  __half h = __float2half(1.5f); h = __hadd(h, h);\n"
      "  float x = __expf(0.0f) + rsqrtf(4.0f) + __saturatef(2.0f) + fminf(1.0f, 2.0f) + (float)__popc(0xffu);\n"
      "  x += __int_as_float(__float_as_int(1.0f)) + twice(1.0f) + __half2float(h) + (float)__brev(1u) * 0.0f;\n"
      "  x += __fdividef(1.0f, 4.0f) + __fmaf_rn(2.0f, 3.0f, 1.0f) + (float)min(3, 4) + max(1.0f, 2.0f) + CUDART_PI_F "
      "* 0.0f;\n"
      "  float2 v = make_float2(1, 2); dim3 d(2); x += v.y + (float)d.y + (float)__clz(1) + (float)__ffs(8);\n"
      "  p[threadIdx.x] = x + (float)(clock64() > 0) + sqrtf(16.0f);\n"
      "}\n";
  const char *hn[] = {"my/util.h"},
             *hs[] = {"#pragma once\n__device__ inline float twice(float x) { return 2 * x; }\n"};
  unsigned char zero = 0;
  cdv_compile_req req = {.source = hdr_src,
                         .source_len = strlen(hdr_src),
                         .name = "kernel.cu",
                         .nheaders = 1,
                         .header_names = hn,
                         .header_srcs = hs,
                         .nentries = 1,
                         .entries = &k,
                         .is_expr = &zero};
  rc = be->compile(&cpu, &req, &m.img, &e);
  CHECK(rc == 0, "headers, CUDA header stubs, intrinsics: %s\n%s", rc ? e.message : "", rc && e.log ? e.log : "");
  if (rc == 0 && be->module_load(&cpu, &m.img, &m.m, &e) == 0 &&
      be->module_function(&cpu, m.m, m.img.lowered[0], &m.fn[0], &e) == 0) {
    float *p = dalloc(4);
    void *args[] = {&p};
    /* 1 + 0.5 + 1 + 1 + 8 + 1 + 2 + 3 + 0 + 0.25 + 7 + 3 + 2 + 2 + 1 + 31 + 4 + 1 + 4 */
    CHECK(launch_ok(m.fn[0], 1, 1, 0, args) == 0 && fabsf(*p - 72.75f) < 1e-4f, "intrinsics compute %.3f", *p);
    dfree(p);
  }
}

static void test_cache(void) {
  printf("kernel cache\n");
  cdv_err e;
  mod m;
  const char *k = "saxpy";
  build(&m, saxpy_src, 1, &k, NULL, 0, NULL, &e);
  double t0 = now();
  int rc = build(&m, saxpy_src, 1, &k, NULL, 0, NULL, &e);
  double t1 = now();
  CHECK(rc == 0, "memoised compile");
  printf("  repeat compile+load in the same process: %.3f ms\n", (t1 - t0) * 1e3);
  CHECK(t1 - t0 < 0.05, "a repeat compile is free");
  printf("  cache entry: %s\n", m.img.path);
  /* A damaged entry (one this process has not loaded: truncating a mapped object would fault the process,
   * which is why the cache only ever renames whole files into place) is refused by module_load and rebuilt by
   * the next compile that does not find it in memory. */
  char src[256], path[4096];
  snprintf(src, sizeof src, "extern \"C\" __global__ void k%ld(int *p) { p[0] = 1; }\n",
           (long)time(NULL) ^ (long)getpid());
  const char *kn = strstr(src, "void ") + 5;
  char name[32];
  snprintf(name, sizeof name, "%.*s", (int)strcspn(kn, "("), kn);
  const char *names[] = {name};
  unsigned char zero = 0;
  cdv_compile_req dreq = {
      .source = src, .source_len = strlen(src), .name = "kernel.cu", .nentries = 1, .entries = names, .is_expr = &zero};
  cdv_image img;
  rc = be->compile(&cpu, &dreq, &img, &e);
  CHECK(rc == 0, "compile %s: %s", name, rc ? e.message : "");
  snprintf(path, sizeof path, "%s", img.path);
  struct stat st;
  stat(path, &st);
  CHECK(truncate(path, st.st_size / 2) == 0, "truncate");
  void *mm;
  expect_error("load of a truncated object", be->module_load(&cpu, &img, &mm, &e), &e, "CUDA_ERROR_INVALID_IMAGE",
               "is damaged");
  cdv_cpu_cache_forget();
  t0 = now();
  rc = be->compile(&cpu, &dreq, &img, &e);
  t1 = now();
  struct stat st2;
  stat(path, &st2);
  CHECK(rc == 0 && st2.st_size == st.st_size && be->module_load(&cpu, &img, &mm, &e) == 0,
        "rebuilt after damage (%.0f ms) and loads", (t1 - t0) * 1e3);
  cdv_cpu_cache_forget();
  t0 = now();
  rc = build(&m, saxpy_src, 1, &k, NULL, 0, NULL, &e);
  t1 = now();
  CHECK(rc == 0, "disk hit");
  printf("  compile served from disk (no memo): %.2f ms\n", (t1 - t0) * 1e3);
  snprintf(path, sizeof path, "%s", m.img.path);
  const char *opt[] = {"-DUNUSED=1"};
  cdv_compile_req req = {.source = saxpy_src,
                         .source_len = strlen(saxpy_src),
                         .name = "kernel.cu",
                         .nopts = 1,
                         .opts = opt,
                         .nentries = 1,
                         .entries = &k,
                         .is_expr = &zero};
  cdv_image img2;
  rc = be->compile(&cpu, &req, &img2, &e);
  CHECK(rc == 0 && strcmp(img2.path, path) != 0, "an option changes the key");
}

static void test_launch_checks(void) {
  printf("launch configuration checks\n");
  mod m;
  void *fn = kernel1(&m, saxpy_src, "saxpy");
  if (!fn) return;
  cdv_err e;
  unsigned g[3] = {1, 1, 1}, b[3] = {2048, 1, 1}, g0[3] = {0, 1, 1}, b1[3] = {32, 1, 1};
  expect_error("2048 threads", be->launch(&cpu, fn, g, b, 0, NULL, NULL, NULL, &e), &e, "CUDA_ERROR_INVALID_VALUE",
               "exceeds the cpu device's limits");
  expect_error("empty grid", be->launch(&cpu, fn, g0, b1, 0, NULL, NULL, NULL, &e), &e, "CUDA_ERROR_INVALID_VALUE",
               "must be at least 1");
  expect_error("shared", be->launch(&cpu, fn, g, b1, 1u << 21, NULL, NULL, NULL, &e), &e, "CUDA_ERROR_INVALID_VALUE",
               "exceeds the cpu device's limit");
  cdv_func_info fi;
  int bps;
  CHECK(be->func_info(&cpu, fn, &fi, &e) == 0 && fi.max_threads_per_block == 1024 && fi.num_regs == 0, "func_info");
  CHECK(be->occupancy(&cpu, fn, 256, 0, &bps, &e) == 0 && bps == 8, "occupancy 256 -> %d", bps);
  size_t off[4], sz[4];
  int rc = 0;
  for (int i = 0; i < 4; i++) rc |= be->param_info(&cpu, fn, i, &off[i], &sz[i]);
  CHECK(rc == 0 && off[0] == 0 && sz[0] == 4 && off[1] == 4 && off[2] == 8 && sz[2] == 8 && off[3] == 16,
        "param_info: saxpy(int, float, const float *, float *) at 0, 4, 8, 16");
  CHECK(be->param_info(&cpu, fn, 4, &off[0], &sz[0]) == 1, "param_info past the last parameter");
}

typedef struct thr {
  void *fn;
  int fork, rc, ok;
} thr;

static void *thread_main(void *arg) {
  thr *t = arg;
  if (!t->fn) { /* compile concurrently: a kernel of its own per thread */
    char def[64];
    snprintf(def, sizeof def, "-DSCALE=%d", t->fork + 2);
    const char *opts[] = {def}, *k = "scaled";
    static const char src[] = "extern \"C\" __global__ void scaled(int *p) { p[threadIdx.x] = SCALE; }\n";
    mod m;
    cdv_err e;
    int *p = dalloc(64 * 4);
    void *args[] = {&p};
    t->rc = build(&m, src, 1, &k, NULL, 1, opts, &e) || launch(m.fn[0], 1, 64, 0, args, &e);
    t->ok = t->rc == 0 && p[63] == t->fork + 2;
    dfree(p);
    return NULL;
  }
  int n = 1 << 16;
  float *x = dalloc((size_t)n * 4), *y = dalloc((size_t)n * 4), a = 1.0f;
  for (int i = 0; i < n; i++) x[i] = 1, y[i] = 0;
  void *args[] = {&n, &a, &x, &y};
  unsigned g[3] = {(unsigned)n / 256, 1, 1}, b[3] = {256, 1, 1};
  cdv_err e;
  for (int r = 0; r < 20; r++) t->rc |= be->launch(&cpu, t->fn, g, b, 0, NULL, args, NULL, &e);
  t->ok = 1;
  for (int i = 0; i < n; i++) t->ok &= y[i] == 20.0f;
  dfree(x), dfree(y);
  return NULL;
}

static void test_threads(void) {
  printf("launches from several host threads\n");
  mod m;
  void *fn = kernel1(&m, saxpy_src, "saxpy");
  if (!fn) return;
  for (int fk = 1; fk >= 0; fk--) {
    set_fork(fk); /* the variable is read by every launch, so all threads run the same mode */
    pthread_t th[4];
    thr t[4];
    for (int i = 0; i < 4; i++) {
      t[i] = (thr){fn, fk, 0, 0};
      pthread_create(&th[i], NULL, thread_main, &t[i]);
    }
    int ok = 1;
    for (int i = 0; i < 4; i++) {
      pthread_join(th[i], NULL);
      ok &= t[i].rc == 0 && t[i].ok;
    }
    CHECK(ok, "4 threads x 20 %s launches", fk ? "forked" : "in-process");
  }
  pthread_t th[4];
  thr t[4];
  int ok = 1;
  for (int i = 0; i < 4; i++) {
    t[i] = (thr){NULL, (int)(time(NULL) % 1000) * 10 + i, 0, 0};
    pthread_create(&th[i], NULL, thread_main, &t[i]);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    ok &= t[i].rc == 0 && t[i].ok;
  }
  CHECK(ok, "4 threads compiling and launching different kernels at once");
  set_fork(1);
}

static void test_fork_cost(void) {
  printf("cost of a launch\n");
  static const char src[] = "extern \"C\" __global__ void empty() {}\n";
  mod m;
  void *fn = kernel1(&m, src, "empty");
  if (!fn) return;
  void *none[] = {NULL};
  int reps = 200, rc = 0, maps = 0;
  FILE *f = fopen("/proc/self/maps", "r");
  for (int c; f && (c = getc(f)) != EOF;) maps += c == '\n';
  if (f) fclose(f);
  FILE *sf = fopen("/proc/self/statm", "r");
  long size = 0, rss = 0;
  if (sf && fscanf(sf, "%ld %ld", &size, &rss) != 2) rss = 0;
  if (sf) fclose(sf);
  printf("  (this process: %d memory mappings, %ld MiB resident)\n", maps, rss * sysconf(_SC_PAGESIZE) >> 20);
  for (int fk = 1; fk >= 0; fk--) {
    set_fork(fk);
    launch_ok(fn, 1, 1, 0, none);
    double t0 = now();
    for (int i = 0; i < reps; i++) rc |= launch_ok(fn, 1, 1, 0, none);
    double t = (now() - t0) / reps;
    printf("  empty kernel <<<1,1>>> %s: %.1f us per launch\n", fk ? "forked" : "in-process", t * 1e6);
    launch_ok(fn, 64, 64, 0, none);
    t0 = now();
    for (int i = 0; i < reps; i++) rc |= launch_ok(fn, 64, 64, 0, none);
    t = (now() - t0) / reps;
    printf("  empty kernel <<<64,64>>> %s: %.1f us per launch\n", fk ? "forked" : "in-process", t * 1e6);
  }
  CHECK(rc == 0, "empty launches");
  set_fork(1);
}

int main(void) {
  if (!getenv("CUDADEV_CACHE_DIR")) setenv("CUDADEV_CACHE_DIR", "/tmp/cdv-cpu-test-cache", 1);
  quick = getenv("CDV_TEST_QUICK") != NULL;
  printf("cpu backend test: %d worker threads, cache %s\n", cdv_cpu_worker_count(), getenv("CUDADEV_CACHE_DIR"));
  static const struct {
    const char *name;
    void (*fn)(void);
  } tests[] = {{"memory", test_memory},
               {"streams", test_streams},
               {"compile", test_compile_errors},
               {"saxpy", test_saxpy},
               {"reduce", test_reduce},
               {"scan", test_scan},
               {"warps", test_warps},
               {"histogram", test_histogram},
               {"templates", test_templates},
               {"shared", test_dynamic_shared},
               {"printf", test_printf},
               {"faults", test_faults},
               {"globals", test_device_globals},
               {"indexing", test_indexing},
               {"cache", test_cache},
               {"checks", test_launch_checks},
               {"threads", test_threads},
               {"cost", test_fork_cost}};
  const char *only = getenv("CDV_TEST_ONLY"); /* a comma-separated list of test names */
  for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++)
    if (!only || strstr(only, tests[i].name)) {
      tests[i].fn();
      fflush(stdout);
    }
  printf("%d checks, %d failures\n", checks, failures);
  return failures != 0;
}
