/*
 * blas_host.h: the cpu device's matrix multiply for one element type, included by blas.c once per type with
 * HG_T (the element type), HG_VL (elements per 32-byte vector) and HG_(name) (the type's suffix) defined.
 *
 * NOTE [host gemm]: the classic packed, cache-blocked GEMM (the structure of GotoBLAS/BLIS, written here from
 * that published description): C is walked in NC-column slabs; for each KC-deep slice of K, the KC x NC block
 * of op(B) is packed into NR-column panels (kept in L3), then each MC x KC block of op(A) is packed into
 * MR-row panels (kept in L2), and the micro-kernel computes an MR x NR tile of C in registers from one A
 * panel and one B panel (its operands stream from L1). Packing also reads op(A) and op(B) through row and
 * column strides, so transposed operands cost nothing extra, and pads the edges with zeros, so the
 * micro-kernel always computes a full tile and only the write-back looks at the edges. The micro-kernel uses
 * GCC's vector extensions and is compiled twice (target_clones): for x86-64-v3 (AVX2 + FMA) and for the
 * baseline ISA, the right one chosen at load time. Rows of C are split over threads (each packs its own
 * panels: no synchronisation between them). beta == 0 never reads C (NaN there does not propagate), as BLAS.
 */
#define HG_MR 6
#define HG_NR (2 * HG_VL)
#define HG_KC 256
#define HG_MC 120 /* a multiple of HG_MR */
#define HG_NC 2048 /* a multiple of HG_NR */

typedef HG_T HG_(vec) __attribute__((vector_size(HG_VL * sizeof(HG_T))));

/* op(X)[i][p] lives at x[i * rs + p * cs]: panels of `r` rows (r = MR for A; for B, transposed, NR columns),
 * p running fastest over the panel's rows, zero past the edge. */
static void HG_(pack)(HG_T *restrict dst, const HG_T *restrict x, int64_t rs, int64_t cs, int64_t rows, int64_t depth,
                      int r) {
  for (int64_t i0 = 0; i0 < rows; i0 += r) {
    int64_t ri = rows - i0 < r ? rows - i0 : r;
    for (int64_t p = 0; p < depth; p++) {
      const HG_T *src = x + i0 * rs + p * cs;
      int64_t i = 0;
      for (; i < ri; i++) dst[i] = src[i * rs];
      for (; i < r; i++) dst[i] = 0;
      dst += r;
    }
  }
}

/* The MR x NR tile of A panel * B panel over kc, into t (row-major, NR wide). */
CDV_GEMM_CLONES static void HG_(micro)(int64_t kc, const HG_T *restrict ap, const HG_T *restrict bp, HG_T *restrict t) {
  HG_(vec) c[HG_MR][2];
  memset(c, 0, sizeof c);
  for (int64_t p = 0; p < kc; p++) {
    HG_(vec) b0, b1;
    memcpy(&b0, bp, sizeof b0);
    memcpy(&b1, bp + HG_VL, sizeof b1);
#pragma GCC unroll 6
    for (int i = 0; i < HG_MR; i++) {
      HG_T a = ap[i];
      c[i][0] += a * b0;
      c[i][1] += a * b1;
    }
    ap += HG_MR;
    bp += HG_NR;
  }
  memcpy(t, c, sizeof c);
}

typedef struct HG_(job) {
  int64_t m0, m1, n, k; /* this job's rows of C: [m0, m1) */
  const HG_T *a, *b;
  int64_t ars, acs, brs, bcs; /* op(A)[i][p] = a[i * ars + p * acs], op(B)[p][j] = b[p * brs + j * bcs] */
  HG_T *c; /* m x n, row-major */
  HG_T alpha, beta;
  int failed; /* no memory for the panels */
} HG_(job);

static void *HG_(run)(void *arg) {
  HG_(job) *J = arg;
  int64_t n = J->n, k = J->k;
  HG_T *ap = aligned_alloc(64, sizeof(HG_T) * HG_MC * HG_KC);
  HG_T *bp = aligned_alloc(64, sizeof(HG_T) * HG_KC * HG_NC);
  if (ap == NULL || bp == NULL) {
    free(ap);
    free(bp);
    J->failed = 1;
    return NULL;
  }
  HG_T t[HG_MR * HG_NR];
  for (int64_t jc = 0; jc < n; jc += HG_NC) {
    int64_t nc = n - jc < HG_NC ? n - jc : HG_NC;
    for (int64_t pc = 0; pc < k; pc += HG_KC) {
      int64_t kc = k - pc < HG_KC ? k - pc : HG_KC;
      /* op(B)'s block, read as its transpose: NR columns of op(B) are a panel's "rows" */
      HG_(pack)(bp, J->b + pc * J->brs + jc * J->bcs, J->bcs, J->brs, nc, kc, HG_NR);
      int first = pc == 0;
      for (int64_t ic = J->m0; ic < J->m1; ic += HG_MC) {
        int64_t mc = J->m1 - ic < HG_MC ? J->m1 - ic : HG_MC;
        HG_(pack)(ap, J->a + ic * J->ars + pc * J->acs, J->ars, J->acs, mc, kc, HG_MR);
        for (int64_t jr = 0; jr < nc; jr += HG_NR) {
          int64_t ni = nc - jr < HG_NR ? nc - jr : HG_NR;
          for (int64_t ir = 0; ir < mc; ir += HG_MR) {
            int64_t mi = mc - ir < HG_MR ? mc - ir : HG_MR;
            HG_(micro)(kc, ap + ir * kc, bp + jr * kc, t);
            HG_T *c = J->c + (ic + ir) * n + jc + jr;
            for (int64_t i = 0; i < mi; i++, c += n) {
              const HG_T *ti = t + i * HG_NR;
              if (!first)
                for (int64_t j = 0; j < ni; j++) c[j] += J->alpha * ti[j];
              else if (J->beta == 0)
                for (int64_t j = 0; j < ni; j++) c[j] = J->alpha * ti[j];
              else
                for (int64_t j = 0; j < ni; j++) c[j] = J->alpha * ti[j] + J->beta * c[j];
            }
          }
        }
      }
    }
  }
  free(ap);
  free(bp);
  return NULL;
}

/* C = alpha op(A) op(B) + beta C; 0, or -1 when memory for the panels ran out. */
static int HG_(gemm)(const HG_T *a, int transa, const HG_T *b, int transb, HG_T *c, int64_t m, int64_t n, int64_t k,
                     HG_T alpha, HG_T beta) {
  if (m == 0 || n == 0) return 0;
  if (k == 0) { /* no product: C = beta C */
    for (int64_t i = 0; i < m * n; i++) c[i] = beta == 0 ? 0 : beta * c[i];
    return 0;
  }
  HG_(job)
  proto = {
      .n = n,
      .k = k,
      .a = a,
      .b = b,
      .c = c,
      .alpha = alpha,
      .beta = beta,
      .ars = transa ? 1 : k,
      .acs = transa ? m : 1, /* A stored m x k, or k x m when transposed */
      .brs = transb ? 1 : n,
      .bcs = transb ? k : 1, /* B stored k x n, or n x k */
  };
  HG_(job) jobs[CDV_GEMM_MAX_THREADS];
  int nt = cdv_gemm_threads(m, n, k, HG_MR);
  int64_t rows = (m + nt - 1) / nt;
  rows = (rows + HG_MR - 1) / HG_MR * HG_MR;
  pthread_t tid[CDV_GEMM_MAX_THREADS];
  int started[CDV_GEMM_MAX_THREADS] = {0};
  for (int i = 0; i < nt; i++) {
    jobs[i] = proto;
    jobs[i].m0 = (int64_t)i * rows < m ? (int64_t)i * rows : m;
    jobs[i].m1 = jobs[i].m0 + rows < m ? jobs[i].m0 + rows : m;
    if (i > 0 && jobs[i].m0 < jobs[i].m1) started[i] = pthread_create(&tid[i], NULL, HG_(run), &jobs[i]) == 0;
  }
  HG_(run)(&jobs[0]);
  int failed = jobs[0].failed;
  for (int i = 1; i < nt; i++) {
    if (started[i])
      pthread_join(tid[i], NULL);
    else if (jobs[i].m0 < jobs[i].m1)
      HG_(run)(&jobs[i]); /* no thread: this one does its rows */
    failed |= jobs[i].failed;
  }
  return failed ? -1 : 0;
}

#undef HG_MR
#undef HG_NR
#undef HG_KC
#undef HG_MC
#undef HG_NC
