/*
 * linalg_host.h: cd.linalg's LAPACKE calls for one element type over a batch of row-major matrices, included by
 * linalg_cpu.c once per type with LA_T (the element type), LA_(name) (the type's suffix) and LA_P(routine) (the
 * LAPACKE routine of that type) defined. Each function runs batch matrices stored one after another and returns
 * 0, or the 1-based matrix of the batch whose routine failed with *info its LAPACK info (a positive info is
 * LAPACK's own failure: a zero pivot, a minor that is not positive, no convergence; a negative one is a bad
 * argument or LAPACKE's out-of-memory, -1010 and -1011, which linalg_cpu.c raises). Leading dimensions are the
 * row lengths (NOTE [lapacke abi]), at least 1 as LAPACKE checks even for empty matrices.
 */
#define LA_LD(x) ((x) > 1 ? (int)(x) : 1)

/* b_i <- a_i^-1 b_i (getrf, then getrs), a_i n x n overwritten by its LU, b_i n x k; ipiv holds n. */
static int64_t LA_(solve)(LA_T *a, LA_T *b, int64_t batch, int n, int k, int *ipiv, int *info) {
  for (int64_t i = 0; i < batch; i++) {
    LA_T *ai = a + i * (int64_t)n * n, *bi = b + i * (int64_t)n * k;
    *info = LA_P(getrf)(LAPACK_ROW_MAJOR, n, n, ai, LA_LD(n), ipiv);
    if (*info == 0 && k > 0) *info = LA_P(getrs)(LAPACK_ROW_MAJOR, 'N', n, k, ai, LA_LD(n), ipiv, bi, LA_LD(k));
    if (*info != 0) return i + 1;
  }
  return 0;
}

/* sign_i and log|det a_i| from a_i's LU (a_i overwritten); a zero pivot is sign 0 and -inf, as NumPy's slogdet. */
static int64_t LA_(slogdet)(LA_T *a, LA_T *sign, LA_T *logabs, int64_t batch, int n, int *ipiv, int *info) {
  for (int64_t i = 0; i < batch; i++) {
    LA_T *ai = a + i * (int64_t)n * n;
    *info = LA_P(getrf)(LAPACK_ROW_MAJOR, n, n, ai, LA_LD(n), ipiv);
    if (*info < 0) return i + 1;
    LA_T s = 1, l = 0;
    for (int j = 0; j < n && *info == 0; j++) {
      LA_T d = ai[(int64_t)j * n + j];
      if (ipiv[j] != j + 1) s = -s; /* each row exchange flips the sign */
      if (d < 0) s = -s, d = -d;
      l += log(d);
    }
    sign[i] = *info > 0 ? 0 : s;
    logabs[i] = *info > 0 ? -(LA_T)INFINITY : l;
  }
  *info = 0;
  return 0;
}

/* a_i <- its Cholesky factor, lower (L L^T) or upper (U^T U), the other triangle zeroed (LAPACK leaves it). */
static int64_t LA_(cholesky)(LA_T *a, int64_t batch, int n, int lower, int *info) {
  for (int64_t i = 0; i < batch; i++) {
    LA_T *ai = a + i * (int64_t)n * n;
    *info = LA_P(potrf)(LAPACK_ROW_MAJOR, lower ? 'L' : 'U', n, ai, LA_LD(n));
    if (*info != 0) return i + 1;
    for (int r = 0; r < n; r++)
      for (int c = 0; c < n; c++)
        if (lower ? c > r : c < r) ai[(int64_t)r * n + c] = 0;
  }
  return 0;
}

/* a_i (m x n) <- geqrf's reflectors and R; tau_i holds min(m, n); r_i (rr x n, when r) <- R's first rr rows. */
static int64_t LA_(qr)(LA_T *a, LA_T *tau, LA_T *r, int64_t batch, int m, int n, int rr, int *info) {
  int k = m < n ? m : n;
  for (int64_t i = 0; i < batch; i++) {
    LA_T *ai = a + i * (int64_t)m * n;
    *info = LA_P(geqrf)(LAPACK_ROW_MAJOR, m, n, ai, LA_LD(n), tau + i * k);
    if (*info != 0) return i + 1;
    if (r == NULL) continue;
    LA_T *ri = r + i * (int64_t)rr * n;
    for (int row = 0; row < rr; row++)
      for (int c = 0; c < n; c++) ri[(int64_t)row * n + c] = c >= row && row < m ? ai[(int64_t)row * n + c] : 0;
  }
  return 0;
}

/* q_i (m x qc) <- the first qc columns of Q from qr's reflectors in a_i (m x n) and tau_i (orgqr). */
static int64_t LA_(orgqr)(const LA_T *a, const LA_T *tau, LA_T *q, int64_t batch, int m, int n, int qc, int *info) {
  int k = m < n ? m : n;
  for (int64_t i = 0; i < batch; i++) {
    const LA_T *ai = a + i * (int64_t)m * n;
    LA_T *qi = q + i * (int64_t)m * qc;
    for (int row = 0; row < m; row++)
      for (int c = 0; c < qc; c++) qi[(int64_t)row * qc + c] = c < k ? ai[(int64_t)row * n + c] : 0;
    *info = LA_P(orgqr)(LAPACK_ROW_MAJOR, m, qc, k, qi, LA_LD(qc), tau + i * k);
    if (*info != 0) return i + 1;
  }
  return 0;
}

/* w_i <- a_i's eigenvalues, ascending; a_i <- its eigenvectors as columns when vectors, else overwritten. */
static int64_t LA_(eigh)(LA_T *a, LA_T *w, int64_t batch, int n, int vectors, int lower, int *info) {
  for (int64_t i = 0; i < batch; i++) {
    *info = LA_P(syevd)(LAPACK_ROW_MAJOR, vectors ? 'V' : 'N', lower ? 'L' : 'U', n, a + i * (int64_t)n * n, LA_LD(n),
                        w + i * n);
    if (*info != 0) return i + 1;
  }
  return 0;
}

/* s_i <- a_i's singular values, descending; u_i, vt_i (when given) <- U (m x uc) and V^T (vr x n), uc = vr = m and n
 * for full matrices, min(m, n) otherwise (gesdd; a_i overwritten). */
static int64_t LA_(svd)(LA_T *a, LA_T *s, LA_T *u, LA_T *vt, int64_t batch, int m, int n, int full, int *info) {
  int k = m < n ? m : n, uc = full ? m : k, vr = full ? n : k;
  char job = u == NULL ? 'N' : full ? 'A' : 'S';
  LA_T dummy[1];
  for (int64_t i = 0; i < batch; i++) {
    LA_T *ui = u ? u + i * (int64_t)m * uc : dummy, *vi = vt ? vt + i * (int64_t)vr * n : dummy;
    *info = LA_P(gesdd)(LAPACK_ROW_MAJOR, job, m, n, a + i * (int64_t)m * n, LA_LD(n), s + i * k, ui, LA_LD(uc), vi,
                        LA_LD(n));
    if (*info != 0) return i + 1;
  }
  return 0;
}
#undef LA_LD
