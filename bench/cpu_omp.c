/*
 * bench/cpu_omp.c: the OpenMP side of bench/cpu. The algorithms of bench/cpu_bench.lua's CUDA kernels, written
 * as a C programmer would write them for the host: one `parallel for` over the blocks (tiles) of the CUDA
 * version, the block's threads as plain loops the compiler may vectorise, the same arithmetic in the same order.
 *
 * Output: `name median_ms checksum` lines; `info key value` lines. Built by bench/cpu with gcc -O3 -fopenmp.
 */
#define _GNU_SOURCE
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <linux/futex.h>

#define REPS 7

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *t, int n) {
  qsort(t, (size_t)n, sizeof *t, cmp);
  return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

/* body REPS times after setup each time (setup untimed); the checksum is read after the last */
#define TIME(name, sum, setup, body)                                 \
  do {                                                               \
    double t_[REPS];                                                 \
    for (int r_ = 0; r_ < REPS; r_++) {                              \
      setup;                                                         \
      double t0_ = now_ms();                                         \
      body;                                                          \
      t_[r_] = now_ms() - t0_;                                       \
    }                                                                \
    printf("%s %.4f %.6g\n", name, median(t_, REPS), (double)(sum)); \
    fflush(stdout);                                                  \
  } while (0)

/* ---------------------------------------------------------------- saxpy: y = a*x + y, 2^24 floats */
static void saxpy(int n, float a, const float *x, float *y) {
#pragma omp parallel for schedule(static)
  for (int i = 0; i < n; i++) y[i] = a * x[i] + y[i];
}

/* ---------------------------------------------------------------- block reductions: 1024 elements a block */
/* shared memory: 256 threads sum 4 elements each (stride 256), then a tree halving the active threads */
static void reduce_shared(int n, const float *x, float *part) {
  int nb = n / 1024;
#pragma omp parallel for schedule(static)
  for (int b = 0; b < nb; b++) {
    float s[256];
    const float *p = x + (size_t)b * 1024;
    for (int t = 0; t < 256; t++) s[t] = p[t] + p[t + 256] + p[t + 512] + p[t + 768];
    for (int h = 128; h > 0; h >>= 1)
      for (int t = 0; t < h; t++) s[t] += s[t + h];
    part[b] = s[0];
  }
}

/* warp shuffles: each warp of 32 reduces by shfl_down (16, 8, 4, 2, 1), lane 0's sums of the 8 warps in
 * shared memory, then warp 0 reduces those 8 the same way */
static void reduce_warp(int n, const float *x, float *part) {
  int nb = n / 1024;
#pragma omp parallel for schedule(static)
  for (int b = 0; b < nb; b++) {
    float v[256], ws[8];
    const float *p = x + (size_t)b * 1024;
    for (int t = 0; t < 256; t++) v[t] = p[t] + p[t + 256] + p[t + 512] + p[t + 768];
    for (int w = 0; w < 8; w++) {
      float *l = v + 32 * w;
      for (int o = 16; o > 0; o >>= 1)
        for (int t = 0; t < o; t++) /* lanes >= o read lanes past the warp: their values are not used */
          l[t] += l[t + o];
      ws[w] = l[0];
    }
    for (int o = 4; o > 0; o >>= 1)
      for (int t = 0; t < o; t++) ws[t] += ws[t + o];
    part[b] = ws[0];
  }
}

/* NVIDIA's reduction kernel 0 (interleaved addressing: thread t adds t + h when t is a multiple of 2h) */
static void reduce_diverge(int n, const float *x, float *part) {
  int nb = n / 1024;
#pragma omp parallel for schedule(static)
  for (int b = 0; b < nb; b++) {
    float s[256];
    const float *p = x + (size_t)b * 1024;
    for (int t = 0; t < 256; t++) s[t] = p[t] + p[t + 256] + p[t + 512] + p[t + 768];
    for (int h = 1; h < 256; h *= 2)
      for (int t = 0; t < 256; t += 2 * h) s[t] += s[t + h];
    part[b] = s[0];
  }
}

/* ---------------------------------------------------------------- pathfinder: minimum-path sums row by row */
/* a: the first row's sums in, b: scratch; returns the buffer holding the last row's */
static int *pyramid(int rows, int cols, const int *wall, int *a, int *b) {
  for (int r = 1; r < rows; r++) {
#pragma omp parallel for schedule(static)
    for (int c = 0; c < cols; c++) {
      int w = c > 0 ? c - 1 : 0, e = c < cols - 1 ? c + 1 : cols - 1;
      int m = a[w] < a[c] ? a[w] : a[c];
      m = m < a[e] ? m : a[e];
      b[c] = wall[(size_t)r * cols + c] + m;
    }
    int *t = a;
    a = b, b = t;
  }
  return a;
}

/* ---------------------------------------------------------------- lud: blocked LU without pivoting, 16x16 tiles */
/* the operations of bench/cpu_bench.lua's three kernels, in their order for each element */
#define LB 16
static void lud_init(float *m, int n) {
#pragma omp parallel for schedule(static)
  for (int i = 0; i < n * n; i++) {
    int r = i / n, c = i % n;
    m[i] = r == c ? (float)n : (float)((r * 7 + c * 3) % 10) / 10.0f;
  }
}

static void lud_diagonal(float *m, int n, int k) {
  float s[LB][LB];
  int off = k * LB;
  for (int i = 0; i < LB; i++) memcpy(s[i], m + (size_t)(off + i) * n + off, sizeof s[i]);
  for (int i = 0; i < LB - 1; i++) {
    for (int t = i + 1; t < LB; t++) {
      for (int j = 0; j < i; j++) s[t][i] -= s[t][j] * s[j][i];
      s[t][i] /= s[i][i];
    }
    for (int t = i + 1; t < LB; t++)
      for (int j = 0; j < i + 1; j++) s[i + 1][t] -= s[i + 1][j] * s[j][t];
  }
  for (int i = 1; i < LB; i++) memcpy(m + (size_t)(off + i) * n + off, s[i], sizeof s[i]);
}

static void lud_perimeter(float *m, int n, int k, int nblocks) {
  int off = k * LB;
#pragma omp parallel for schedule(static)
  for (int b = 0; b < nblocks; b++) {
    float dia[LB][LB], row[LB][LB], col[LB][LB];
    int j = (k + 1 + b) * LB;
    for (int i = 0; i < LB; i++) {
      memcpy(dia[i], m + (size_t)(off + i) * n + off, sizeof dia[i]);
      memcpy(row[i], m + (size_t)(off + i) * n + j, sizeof row[i]);
      memcpy(col[i], m + (size_t)(j + i) * n + off, sizeof col[i]);
    }
    for (int tx = 0; tx < LB; tx++)
      for (int i = 1; i < LB; i++)
        for (int q = 0; q < i; q++) row[i][tx] -= dia[i][q] * row[q][tx];
    for (int t = 0; t < LB; t++)
      for (int i = 0; i < LB; i++) {
        for (int q = 0; q < i; q++) col[t][i] -= col[t][q] * dia[q][i];
        col[t][i] /= dia[i][i];
      }
    for (int i = 0; i < LB; i++) {
      if (i > 0) memcpy(m + (size_t)(off + i) * n + j, row[i], sizeof row[i]);
      memcpy(m + (size_t)(j + i) * n + off, col[i], sizeof col[i]);
    }
  }
}

static void lud_internal(float *m, int n, int k, int nblocks) {
  int off = k * LB;
#pragma omp parallel for collapse(2) schedule(static)
  for (int by = 0; by < nblocks; by++)
    for (int bx = 0; bx < nblocks; bx++)
      for (int ty = 0; ty < LB; ty++)
        for (int tx = 0; tx < LB; tx++) {
          int gi = (k + 1 + by) * LB + ty, gj = (k + 1 + bx) * LB + tx;
          float sum = 0;
          for (int q = 0; q < LB; q++) sum += m[(size_t)gi * n + off + q] * m[(size_t)(off + q) * n + gj];
          m[(size_t)gi * n + gj] -= sum;
        }
}

static void lud(float *m, int n) {
  int nb = n / LB;
  for (int k = 0; k < nb; k++) {
    lud_diagonal(m, n, k);
    if (k < nb - 1) {
      lud_perimeter(m, n, k, nb - 1 - k);
      lud_internal(m, n, k, nb - 1 - k);
    }
  }
}

/* ---------------------------------------------------------------- tiled matrix multiply, 16x16 tiles */
static void matmul(int n, const float *A, const float *B, float *C) {
  int nt = n / 16;
#pragma omp parallel for collapse(2) schedule(static)
  for (int bi = 0; bi < nt; bi++)
    for (int bj = 0; bj < nt; bj++) {
      float c[16][16] = {{0}};
      for (int kt = 0; kt < nt; kt++)
        for (int i = 0; i < 16; i++)
          for (int k = 0; k < 16; k++) {
            float a = A[(size_t)(bi * 16 + i) * n + kt * 16 + k];
            const float *brow = B + (size_t)(kt * 16 + k) * n + bj * 16;
            for (int j = 0; j < 16; j++) c[i][j] += a * brow[j];
          }
      for (int i = 0; i < 16; i++) memcpy(C + (size_t)(bi * 16 + i) * n + bj * 16, c[i], sizeof c[i]);
    }
}

/* ---------------------------------------------------------------- stencil: 16x16 tiles, iters Jacobi steps each */
static void stencil(int n, int iters, const float *in, float *out) {
  int nt = n / 16;
#pragma omp parallel for collapse(2) schedule(static)
  for (int by = 0; by < nt; by++)
    for (int bx = 0; bx < nt; bx++) {
      float t[2][16][16];
      for (int y = 0; y < 16; y++)
        for (int x = 0; x < 16; x++) t[0][y][x] = in[(size_t)(by * 16 + y) * n + bx * 16 + x];
      int cur = 0;
      for (int it = 0; it < iters; it++) {
        for (int y = 0; y < 16; y++)
          for (int x = 0; x < 16; x++) {
            float v = t[cur][y][x];
            if (x > 0 && x < 15 && y > 0 && y < 15)
              v = v + 0.2f * (t[cur][y - 1][x] + t[cur][y + 1][x] + t[cur][y][x - 1] + t[cur][y][x + 1] - 4.0f * v);
            t[cur ^ 1][y][x] = v;
          }
        cur ^= 1;
      }
      for (int y = 0; y < 16; y++)
        for (int x = 0; x < 16; x++) out[(size_t)(by * 16 + y) * n + bx * 16 + x] = t[cur][y][x];
    }
}

/* ---------------------------------------------------------------- wavefront (Needleman-Wunsch), 16x16 tiles */
/* score is (n+1)x(n+1), row 0 and column 0 preset; ref is n x n. Tiles along each anti-diagonal in parallel. */
static void nw_tile(int n, int ti, int tj, const int *ref, int *score, int penalty) {
  int w = n + 1;
  for (int i = 1; i <= 16; i++)
    for (int j = 1; j <= 16; j++) {
      size_t r = (size_t)(ti * 16 + i), c = (size_t)(tj * 16 + j);
      int d = score[(r - 1) * w + c - 1] + ref[(r - 1) * n + c - 1];
      int u = score[(r - 1) * w + c] - penalty, l = score[r * w + c - 1] - penalty;
      int m = d > u ? d : u;
      score[r * w + c] = m > l ? m : l;
    }
}

static void nw(int n, const int *ref, int *score, int penalty) {
  int nt = n / 16;
  for (int d = 0; d < 2 * nt - 1; d++) {
    int lo = d < nt ? 0 : d - nt + 1, hi = d < nt ? d : nt - 1;
#pragma omp parallel for schedule(static)
    for (int ti = lo; ti <= hi; ti++) nw_tile(n, ti, d - ti, ref, score, penalty);
  }
}

static void nw_reset(int n, int *score, int penalty) {
  int w = n + 1;
  memset(score, 0, (size_t)w * w * sizeof *score);
  for (int i = 0; i <= n; i++) score[(size_t)i * w] = score[i] = -i * penalty;
}

/* The floor under a contained launch (NOTE [launch worker] in src/cpu_run.c): one byte to a forked process
 * over a unix socket and one byte back, the median of 7 loops of 2000, in microseconds. */
static void pingpong(void) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) return;
  pid_t pid = fork();
  if (pid == 0) {
    char c;
    close(sv[0]);
    while (read(sv[1], &c, 1) == 1 && write(sv[1], &c, 1) == 1)
      ;
    _exit(0);
  }
  close(sv[1]);
  double t[REPS];
  char c = 'x';
  for (int r = 0; r < REPS; r++) {
    double t0 = now_ms();
    for (int i = 0; i < 2000; i++)
      if (write(sv[0], &c, 1) != 1 || read(sv[0], &c, 1) != 1) return;
    t[r] = (now_ms() - t0) / 2000 * 1e3;
  }
  close(sv[0]);
  printf("pingpong_us %.2f\n", median(t, REPS));
}

/* The same round trip through a futex word in a shared page, both sides always sleeping (what NOTE [launch
 * handshake] in src/cpu_run.c does once its spin is over): the parent bumps the word to odd and waits for even. */
static void futexpong(void) {
  unsigned *w = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (w == MAP_FAILED) return;
  pid_t pid = fork();
  if (pid == 0) {
    for (unsigned v = 0;; v += 2) {
      while (__atomic_load_n(w, __ATOMIC_SEQ_CST) == v) syscall(SYS_futex, w, FUTEX_WAIT, v, NULL, NULL, 0);
      if (__atomic_load_n(w, __ATOMIC_SEQ_CST) == ~0u) _exit(0);
      __atomic_store_n(w, v + 2, __ATOMIC_SEQ_CST);
      syscall(SYS_futex, w, FUTEX_WAKE, 1, NULL, NULL, 0);
    }
  }
  double t[REPS];
  unsigned v = 0;
  for (int r = 0; r < REPS; r++) {
    double t0 = now_ms();
    for (int i = 0; i < 2000; i++, v += 2) {
      __atomic_store_n(w, v + 1, __ATOMIC_SEQ_CST);
      syscall(SYS_futex, w, FUTEX_WAKE, 1, NULL, NULL, 0);
      while (__atomic_load_n(w, __ATOMIC_SEQ_CST) == v + 1) syscall(SYS_futex, w, FUTEX_WAIT, v + 1, NULL, NULL, 0);
    }
    t[r] = (now_ms() - t0) / 2000 * 1e3;
  }
  __atomic_store_n(w, ~0u, __ATOMIC_SEQ_CST);
  syscall(SYS_futex, w, FUTEX_WAKE, 1, NULL, NULL, 0);
  printf("futexpong_us %.2f\n", median(t, REPS));
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "pingpong")) {
    pingpong();
    return 0;
  }
  if (argc > 1 && !strcmp(argv[1], "futexpong")) {
    futexpong();
    return 0;
  }
  printf("info threads %d\n", omp_get_max_threads());
  const int N = 1 << 24;
  float *x = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * N), *part = malloc(sizeof(float) * (N / 1024));
  for (int i = 0; i < N; i++) x[i] = (float)(i % 1000) / 1000.0f, y[i] = (float)(i % 7);
  saxpy(N, 2.0f, x, y);
  TIME("saxpy", y[12345], (void)0, saxpy(N, 2.0f, x, y));
  saxpy(N, 2.0f, x, y); /* the same loop as the README's kernel, warmed as bench/cpu_bench.lua warms it */
  TIME("saxpy_readme", y[12345], (void)0, saxpy(N, 2.0f, x, y));
  double s = 0;
  reduce_shared(N, x, part);
  for (int b = 0; b < N / 1024; b++) s += part[b];
  TIME("reduce_shared", s, (void)0, reduce_shared(N, x, part));
  reduce_warp(N, x, part);
  s = 0;
  for (int b = 0; b < N / 1024; b++) s += part[b];
  TIME("reduce_warp", s, (void)0, reduce_warp(N, x, part));

  reduce_diverge(N, x, part);
  s = 0;
  for (int b = 0; b < N / 1024; b++) s += part[b];
  TIME("reduce_diverge", s, (void)0, reduce_diverge(N, x, part));

  const int ROWS = 201, COLS = 1 << 16;
  int *wall = malloc(sizeof(int) * ROWS * COLS), *pa = malloc(sizeof(int) * COLS), *pb = malloc(sizeof(int) * COLS);
  for (int i = 0; i < ROWS * COLS; i++) wall[i] = (int)((i * 2654435761u) >> 28) % 21 - 10;
  int *last = pa;
  memcpy(pa, wall, sizeof(int) * COLS);
  last = pyramid(ROWS, COLS, wall, pa, pb);
  long long ps = 0;
  for (int c = 0; c < COLS; c++) ps += last[c];
  TIME("pyramid", ps, memcpy(pa, wall, sizeof(int) * COLS), last = pyramid(ROWS, COLS, wall, pa, pb));

  const int LN = 512;
  float *lm = malloc(sizeof(float) * LN * LN);
  lud_init(lm, LN);
  lud(lm, LN);
  double ls = 0;
  for (int i = 0; i < LN * LN; i++) ls += lm[i];
  TIME("lud", ls, lud_init(lm, LN), lud(lm, LN));

  const int M = 512;
  float *A = malloc(sizeof(float) * M * M), *B = malloc(sizeof(float) * M * M), *C = malloc(sizeof(float) * M * M);
  for (int i = 0; i < M * M; i++) A[i] = (float)(i % 17) / 16.0f, B[i] = (float)(i % 13) / 12.0f;
  matmul(M, A, B, C);
  TIME("matmul", C[M * M / 2 + 7], (void)0, matmul(M, A, B, C));

  const int S = 2048, ITERS = 8;
  float *in = malloc(sizeof(float) * S * S), *out = malloc(sizeof(float) * S * S);
  for (int i = 0; i < S * S; i++) in[i] = (float)((i * 7) % 101);
  stencil(S, ITERS, in, out);
  TIME("stencil", out[S * 100 + 37], (void)0, stencil(S, ITERS, in, out));

  const int W = 2048, P = 10;
  int *ref = malloc(sizeof(int) * W * W), *score = malloc(sizeof(int) * (W + 1) * (W + 1));
  for (int i = 0; i < W * W; i++) ref[i] = (int)((i * 2654435761u) >> 28) % 21 - 10;
  nw_reset(W, score, P);
  nw(W, ref, score, P);
  TIME("wavefront", score[(size_t)(W + 1) * (W + 1) - 1], nw_reset(W, score, P), nw(W, ref, score, P));
  return 0;
}
