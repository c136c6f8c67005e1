/*
 * fft.c: the transforms under cd.fft (lua/cudadev/fft.lua). getmetatable(a).__fft(kind, inverse, x, y, n) runs
 * one unnormalised 1-d transform of length n on every row of x (its last axis) into the rows of y; fft.lua moves
 * axes, pads, scales and groups the axes of the n-d transforms (NOTE [fft passes]). kind "c2c": x and y complex,
 * rows of n; "r2c": x real, y complex, rows of n and n/2 + 1; "c2r": x complex (rows of n/2 + 1, Hermitian: the
 * imaginary parts of its first and, for an even n, last element are not read), y real (rows of n). x and y are
 * contiguous, on one device, of one precision (float32 with complex64, float64 with complex128), and never the
 * same memory. For c2c, n may be a list of 1 to 3 lengths {n1, ..., nk} (cuFFT's rank limit): the k-d transform
 * over the last k axes of x and y, whose lengths they are, on every block of n1 * ... * nk elements.
 *
 * On a CUDA device the transform is cuFFT's, on the caller's current stream (NOTE [cufft library] in loader.c, NOTE
 * [cufft plans]). On the cpu device complex64 is KISS FFT's (NOTE [kiss fft] in loader.c) and complex128 a
 * transform of ours (NOTE [host double fft]).
 */
#define _GNU_SOURCE
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdv.h"
#include "fft_abi.h"

enum { FFT_C2C, FFT_R2C, FFT_C2R };
static const char *const kind_names[] = {"c2c", "r2c", "c2r", NULL};

/* The cpu device's complex64 transforms use KISS FFT's complex transform only (NOTE [kiss fft] in loader.c):
 * kiss_fftr takes even lengths only, so the real transforms go through it too (r2c: the first n/2 + 1 outputs;
 * c2r: the Hermitian spectrum completed first). */
typedef cdv_kiss_cpx kcpx;

/* ---------------------------------------------------------------- the host's double transform */
/* NOTE [host double fft]: complex128 on the cpu device. Debian has no double KISS FFT, so this is ours: an
 * iterative radix-2 transform for lengths that are powers of two, Bluestein's chirp-z (a convolution done with
 * radix-2 transforms of a power of two m >= 2n - 1) for the others. Twiddles come from cos/sin of each angle,
 * not from a recurrence, and the chirp's k^2 is reduced modulo 2n first, so the error stays near NumPy's (about
 * 1e-15 relative). The inverse is conj(forward(conj(x))). */
typedef struct zcpx {
  double r, i;
} zcpx;

static zcpx zmul(zcpx a, zcpx b) { return (zcpx){a.r * b.r - a.i * b.i, a.r * b.i + a.i * b.r}; }

typedef struct zplan {
  size_t n, m; /* m: the radix-2 length (n itself for a power of two) */
  zcpx *tw; /* m/2 twiddles exp(-2 pi i k / m) */
  zcpx *w; /* Bluestein: n chirps exp(-pi i k^2 / n) */
  zcpx *bf; /* Bluestein: the forward transform of the conjugate chirp, m long */
  zcpx *work; /* m */
} zplan;

static void radix2(const zplan *p, zcpx *a) {
  size_t m = p->m;
  for (size_t i = 1, j = 0; i < m; i++) { /* bit reversal */
    size_t bit = m >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) {
      zcpx t = a[i];
      a[i] = a[j], a[j] = t;
    }
  }
  for (size_t len = 2; len <= m; len <<= 1) {
    size_t half = len / 2, step = m / len;
    for (size_t s = 0; s < m; s += len)
      for (size_t k = 0; k < half; k++) {
        zcpx u = a[s + k], v = zmul(a[s + k + half], p->tw[k * step]);
        a[s + k] = (zcpx){u.r + v.r, u.i + v.i};
        a[s + k + half] = (zcpx){u.r - v.r, u.i - v.i};
      }
  }
}

static void zplan_free(zplan *p) {
  free(p->tw);
  free(p->w);
  free(p->bf);
  free(p->work);
}

/* 0, or -1 when out of memory (p is then freed). */
static int zplan_make(zplan *p, size_t n) {
  memset(p, 0, sizeof *p);
  p->n = n;
  int pow2 = (n & (n - 1)) == 0;
  size_t m = 1;
  while (m < (pow2 ? n : 2 * n - 1)) m <<= 1;
  p->m = m;
  p->tw = malloc(sizeof(zcpx) * (m / 2 + 1));
  p->work = malloc(sizeof(zcpx) * m);
  if (!pow2) p->w = malloc(sizeof(zcpx) * n), p->bf = malloc(sizeof(zcpx) * m);
  if (p->tw == NULL || p->work == NULL || (!pow2 && (p->w == NULL || p->bf == NULL))) {
    zplan_free(p);
    return -1;
  }
  for (size_t k = 0; k < m / 2; k++) {
    double a = -2.0 * M_PI * (double)k / (double)m;
    p->tw[k] = (zcpx){cos(a), sin(a)};
  }
  if (pow2) return 0;
  for (size_t k = 0; k < n; k++) {
    double a = -M_PI * (double)((uint64_t)k * k % (2 * (uint64_t)n)) / (double)n;
    p->w[k] = (zcpx){cos(a), sin(a)};
  }
  memset(p->bf, 0, sizeof(zcpx) * m);
  p->bf[0] = (zcpx){1, 0};
  for (size_t k = 1; k < n; k++) p->bf[k] = p->bf[m - k] = (zcpx){p->w[k].r, -p->w[k].i};
  radix2(p, p->bf);
  return 0;
}

/* out = the forward transform of in (n each; they may be the same memory). */
static void zplan_forward(const zplan *p, const zcpx *in, zcpx *out) {
  size_t n = p->n, m = p->m;
  zcpx *a = p->work;
  if (p->w == NULL) {
    memcpy(a, in, sizeof(zcpx) * n);
    radix2(p, a);
    memcpy(out, a, sizeof(zcpx) * n);
    return;
  }
  for (size_t k = 0; k < n; k++) a[k] = zmul(in[k], p->w[k]);
  memset(a + n, 0, sizeof(zcpx) * (m - n));
  radix2(p, a);
  for (size_t k = 0; k < m; k++) { /* the convolution's inverse transform: conj, forward, conj, / m */
    zcpx v = zmul(a[k], p->bf[k]);
    a[k] = (zcpx){v.r, -v.i};
  }
  radix2(p, a);
  for (size_t k = 0; k < n; k++) out[k] = zmul((zcpx){a[k].r / (double)m, -a[k].i / (double)m}, p->w[k]);
}

/* out = the transform of in (they may be the same memory) */
static void zplan_run(const zplan *p, const zcpx *in, zcpx *out, int inverse) {
  if (!inverse) {
    zplan_forward(p, in, out);
    return;
  }
  for (size_t k = 0; k < p->n; k++) out[k] = (zcpx){in[k].r, -in[k].i};
  zplan_forward(p, out, out);
  for (size_t k = 0; k < p->n; k++) out[k].i = -out[k].i;
}

/* ---------------------------------------------------------------- rows on the host */
/* One precision's 1-d complex transform of n, forward or inverse, made once per call and run per row. */
typedef struct host_fft {
  int dbl;
  void *kcfg; /* float: KISS's config */
  zplan z; /* double, and float through zbuf (KISS_MAX_FACTOR) */
  zcpx *zbuf;
  size_t n;
} host_fft;

/* KISS FFT transforms a prime factor p of the length with p operations an element (its generic butterfly): a
 * length with a large prime factor, 1000003 say, would take many minutes. Such float lengths go through the
 * double transform (Bluestein's, O(n log n) for any length) and are rounded back to float. */
#define KISS_MAX_FACTOR 61

static size_t largest_factor(size_t n) {
  size_t f = 1;
  for (size_t p = 2; p * p <= n; p++)
    while (n % p == 0) n /= p, f = p;
  return n > f ? n : f;
}

static int host_fft_make(host_fft *h, int dbl, size_t n, int inverse) {
  memset(h, 0, sizeof *h);
  h->dbl = dbl, h->n = n;
  if (!dbl && largest_factor(n) > KISS_MAX_FACTOR) {
    h->zbuf = malloc(sizeof(zcpx) * n);
    if (h->zbuf == NULL) return -1;
  } else if (!dbl) {
    h->kcfg = cdv_kiss.kiss_fft_alloc((int)n, inverse, NULL, NULL);
    return h->kcfg != NULL ? 0 : -1;
  }
  if (zplan_make(&h->z, n) == 0) return 0;
  free(h->zbuf);
  h->zbuf = NULL;
  return -1;
}

static void host_fft_free(host_fft *h) {
  if (h->kcfg != NULL)
    free(h->kcfg);
  else
    zplan_free(&h->z);
  free(h->zbuf);
}

/* in and out: n complex elements of the precision (not the same memory) */
static void host_fft_run(const host_fft *h, const void *in, void *out, int inverse) {
  if (h->dbl) {
    zplan_run(&h->z, in, out, inverse);
  } else if (h->zbuf != NULL) {
    const kcpx *fin = in;
    kcpx *fout = out;
    for (size_t k = 0; k < h->n; k++) h->zbuf[k] = (zcpx){fin[k].r, fin[k].i};
    zplan_run(&h->z, h->zbuf, h->zbuf, inverse);
    for (size_t k = 0; k < h->n; k++) fout[k] = (kcpx){(float)h->zbuf[k].r, (float)h->zbuf[k].i};
  } else {
    cdv_kiss.kiss_fft(h->kcfg, in, out);
  }
}

/* The i-th element of a complex row of the precision, as doubles, and back. */
static zcpx cget(int dbl, const char *row, size_t i) {
  if (dbl) return ((const zcpx *)row)[i];
  const kcpx *k = (const kcpx *)row + i;
  return (zcpx){k->r, k->i};
}

static void cset(int dbl, char *row, size_t i, zcpx v) {
  if (dbl)
    ((zcpx *)row)[i] = v;
  else
    ((kcpx *)row)[i] = (kcpx){(float)v.r, (float)v.i};
}

/* Every row: c2c straight into y; r2c through a complex copy of the row; c2r through the full spectrum. */
static int host_rows(int kind, int inverse, int dbl, const char *x, char *y, size_t n, size_t rows) {
  host_fft h;
  if (host_fft_make(&h, dbl, n, inverse) != 0) return -1;
  size_t cs = dbl ? 16 : 8, rs = dbl ? 8 : 4, half = n / 2 + 1;
  char *a = kind == FFT_C2C ? NULL : malloc(2 * n * cs), *b = a ? a + n * cs : NULL;
  if (kind != FFT_C2C && a == NULL) {
    host_fft_free(&h);
    return -1;
  }
  for (size_t r = 0; r < rows; r++) {
    if (kind == FFT_C2C) {
      host_fft_run(&h, x + r * n * cs, y + r * n * cs, inverse);
      continue;
    }
    if (kind == FFT_R2C) {
      const char *row = x + r * n * rs;
      for (size_t i = 0; i < n; i++)
        cset(dbl, a, i, (zcpx){dbl ? ((const double *)row)[i] : ((const float *)row)[i], 0});
      host_fft_run(&h, a, b, 0);
      memcpy(y + r * half * cs, b, half * cs);
      continue;
    }
    const char *row = x + r * half * cs; /* c2r: X[n - k] = conj(X[k]); the DC's and Nyquist's imaginary parts are 0 */
    for (size_t k = 0; k < half; k++) {
      zcpx v = cget(dbl, row, k);
      if (k == 0 || 2 * k == n) v.i = 0;
      cset(dbl, a, k, v);
      if (k > 0 && 2 * k < n) cset(dbl, a, n - k, (zcpx){v.r, -v.i});
    }
    host_fft_run(&h, a, b, 1);
    for (size_t i = 0; i < n; i++) {
      double v = cget(dbl, b, i).r;
      if (dbl)
        ((double *)(y + r * n * rs))[i] = v;
      else
        ((float *)(y + r * n * rs))[i] = (float)v;
    }
  }
  free(a);
  host_fft_free(&h);
  return 0;
}

/* In place in y, in each of `blocks` blocks of n * stride complex elements: the transform of length n along the
 * axis whose elements are `stride` apart, each column gathered into a buffer, transformed and put back. */
static int host_columns(int inverse, int dbl, char *y, size_t n, size_t stride, size_t blocks) {
  host_fft h;
  if (host_fft_make(&h, dbl, n, inverse) != 0) return -1;
  size_t cs = dbl ? 16 : 8;
  char *a = malloc(2 * n * cs);
  if (a == NULL) {
    host_fft_free(&h);
    return -1;
  }
  char *b = a + n * cs;
  for (size_t blk = 0; blk < blocks; blk++)
    for (size_t t = 0; t < stride; t++) {
      char *col = y + (blk * n * stride + t) * cs;
      for (size_t i = 0; i < n; i++) memcpy(a + i * cs, col + i * stride * cs, cs);
      host_fft_run(&h, a, b, inverse);
      for (size_t i = 0; i < n; i++) memcpy(col + i * stride * cs, b + i * cs, cs);
    }
  free(a);
  host_fft_free(&h);
  return 0;
}

/* The c2c transform over the last rank axes (lengths n) of `total` elements: the last axis's rows from x into y,
 * then each earlier axis in place in y, last to first, as the 1-d passes did before (NOTE [fft passes]). */
static int host_nd(int inverse, int dbl, const char *x, char *y, const size_t *n, int rank, size_t total) {
  if (host_rows(FFT_C2C, inverse, dbl, x, y, n[rank - 1], total / n[rank - 1]) != 0) return -1;
  size_t stride = n[rank - 1];
  for (int j = rank - 2; j >= 0; stride *= n[j], j--)
    if (host_columns(inverse, dbl, y, n[j], stride, total / (n[j] * stride)) != 0) return -1;
  return 0;
}

/* ---------------------------------------------------------------- cuFFT plans */
/* NOTE [cufft plans]: a cuFFT plan is made for one rank and lengths (cufftPlanMany: rank 1 to 3, contiguous
 * blocks), type and batch, in the context current when it is made, and costs a good part of a millisecond; CuPy
 * keeps them in a cache, and so does each lua_State here: up to PLANS plans, keyed by device (and its context's
 * generation), rank, lengths, type and batch, the least recently used destroyed when a new one needs the room. The
 * stream is not part of the key: cufftSetStream before every execution puts the work on the caller's current
 * stream. Each plan's work area is cuFFT's own allocation (cufftPlanMany's auto-allocation), outside cudadev's
 * pool, released by cufftDestroy. The cache is a userdata of the registry whose finalizer destroys the plans when
 * the state closes; a plan of a context that is gone (a reset, a closed device) is forgotten, never destroyed, as
 * NOTE [cublas handles] does with cuBLAS's handles. */
#define PLANS 16
#define PLANS_KEY "cudadev.cufft_plans"
#define PLANS_MAGIC 0x6364764666667470ULL /* "cdvFftp" (NOTE [magic]) */
typedef struct plan_slot {
  cdv_device *dev; /* NULL: free */
  unsigned generation;
  int rank, n[3], type, batch, plan; /* n: rank lengths, the rest 0 */
  uint64_t used; /* the cache's clock at its last use */
} plan_slot;

typedef struct plan_cache {
  uint64_t magic, clock;
  plan_slot slot[PLANS];
} plan_cache;

/* Empties slot s: cufftDestroy of its plan in its device's context, unless that context is gone. */
static void plan_destroy(lua_State *L, plan_slot *s) {
  cdv_device *d = s->dev;
  s->dev = NULL;
  if (d == NULL || !cdv_still_owned(d, s->generation) || d->gone) return; /* its context is gone: forgotten */
  cdv_err e;
  int rc;
  if (d->be->activate(d, &e) == 0 && (rc = cdv_cufft.cufftDestroy(s->plan)) != 0)
    cdv_fail(&e, "cufftDestroy", rc, "CUFFT_ERROR", "cuFFT could not destroy a plan (cufftResult %d)", rc);
  else
    return;
  cdv_warn_release(L, "cuFFT plan", d, &e); /* __gc never raises */
}

static int plans_gc(lua_State *L) {
  plan_cache *c = cdv_test_magic(L, 1, sizeof *c, PLANS_MAGIC);
  if (c == NULL) return 0;
  for (int i = 0; i < PLANS; i++) plan_destroy(L, &c->slot[i]);
  return 0;
}

static plan_cache *plans(lua_State *L) {
  return cdv_registry_udata(L, PLANS_KEY, sizeof(plan_cache), PLANS_MAGIC, plans_gc, "cudadev.CufftPlans");
}

static const char *cufft_result_name(int rc) {
  static const char *const names[] = {"CUFFT_SUCCESS",
                                      "CUFFT_INVALID_PLAN",
                                      "CUFFT_ALLOC_FAILED",
                                      "CUFFT_INVALID_TYPE",
                                      "CUFFT_INVALID_VALUE",
                                      "CUFFT_INTERNAL_ERROR",
                                      "CUFFT_EXEC_FAILED",
                                      "CUFFT_SETUP_FAILED",
                                      "CUFFT_INVALID_SIZE",
                                      "CUFFT_UNALIGNED_DATA",
                                      NULL,
                                      "CUFFT_INVALID_DEVICE",
                                      NULL,
                                      "CUFFT_NO_WORKSPACE",
                                      "CUFFT_NOT_IMPLEMENTED",
                                      NULL,
                                      "CUFFT_NOT_SUPPORTED"};
  return rc >= 0 && rc < (int)(sizeof names / sizeof *names) && names[rc] ? names[rc] : "CUFFT_ERROR";
}

static int cufft_status(cdv_err *e, const char *api, int rc) {
  if (rc == 0) return 0;
  return cdv_fail(e, api, rc, cufft_result_name(rc), "cuFFT failed (cufftResult %d)", rc);
}

/* The state's plan for d, made by cufftPlanMany in d's context when missing (NOTE [cufft plans]). n: 3 lengths,
 * those past rank 0. */
static int plan_for(lua_State *L, cdv_device *d, int rank, const int *n, int type, int batch) {
  plan_cache *c = plans(L);
  plan_slot *lru = &c->slot[0];
  for (int i = 0; i < PLANS; i++) {
    plan_slot *s = &c->slot[i];
    if (s->dev != NULL && !cdv_still_owned(s->dev, s->generation)) s->dev = NULL; /* stale: forgotten */
    if (s->dev == d && s->generation == d->generation && s->rank == rank && memcmp(s->n, n, sizeof s->n) == 0 &&
        s->type == type && s->batch == batch) {
      s->used = ++c->clock;
      return s->plan;
    }
    if (s->dev == NULL ? lru->dev != NULL : lru->dev != NULL && s->used < lru->used) lru = s;
  }
  plan_destroy(L, lru); /* (its device's context made current for that: d's again below) */
  cdv_device_use(L, d); /* a plan belongs to the context current when it is made */
  int plan = 0, dims[3] = {n[0], n[1], n[2]};
  cdv_err e;
  /* inembed and onembed NULL: contiguous blocks, n[rank - 1] the fastest axis, one block after the other */
  if (cufft_status(&e, "cufftPlanMany",
                   cdv_cufft.cufftPlanMany(&plan, rank, dims, NULL, 1, 0, NULL, 1, 0, type, batch)) != 0)
    cdv_raise(L, d, &e);
  *lru = (plan_slot){d, d->generation, rank, {n[0], n[1], n[2]}, type, batch, plan, ++c->clock};
  return plan;
}

/* Every row (a block of rank lengths) on d's stream: cufftSetStream, then cufftExec{C2C,R2C,C2R,Z2Z,D2Z,Z2D} by
 * precision and kind. */
static int cufft_rows(lua_State *L, cdv_device *d, int kind, int inverse, int dbl, cdv_array *x, cdv_array *y, int rank,
                      const int *n, int batch, void *stream) {
  static const int types[2][3] = {{CUFFT_C2C, CUFFT_R2C, CUFFT_C2R}, {CUFFT_Z2Z, CUFFT_D2Z, CUFFT_Z2D}};
  int type = types[dbl][kind];
  int plan = plan_for(L, d, rank, n, type, batch);
  cdv_device_use(L, d);
  cdv_err e;
  int dir = inverse ? CUFFT_INVERSE : CUFFT_FORWARD, rc;
  if (cufft_status(&e, "cufftSetStream", cdv_cufft.cufftSetStream(plan, stream)) != 0) return cdv_raise(L, d, &e);
  switch (type) {
    case CUFFT_C2C: rc = cufft_status(&e, "cufftExecC2C", cdv_cufft.cufftExecC2C(plan, x->data, y->data, dir)); break;
    case CUFFT_R2C: rc = cufft_status(&e, "cufftExecR2C", cdv_cufft.cufftExecR2C(plan, x->data, y->data)); break;
    case CUFFT_C2R: rc = cufft_status(&e, "cufftExecC2R", cdv_cufft.cufftExecC2R(plan, x->data, y->data)); break;
    case CUFFT_Z2Z: rc = cufft_status(&e, "cufftExecZ2Z", cdv_cufft.cufftExecZ2Z(plan, x->data, y->data, dir)); break;
    case CUFFT_D2Z: rc = cufft_status(&e, "cufftExecD2Z", cdv_cufft.cufftExecD2Z(plan, x->data, y->data)); break;
    default: rc = cufft_status(&e, "cufftExecZ2D", cdv_cufft.cufftExecZ2D(plan, x->data, y->data)); break;
  }
  if (rc != 0) return cdv_raise(L, d, &e);
  if (cdv_get_state(L)->launch_blocking && d->be->stream_synchronize(d, stream, &e) != 0) return cdv_raise(L, d, &e);
  return 0;
}

/* ---------------------------------------------------------------- __fft */
/* __fft's fifth argument: a length, or for c2c a list of 1 to 3 (the last axes'); the rank, the lengths in n. */
static int check_lengths(lua_State *L, int idx, int kind, int64_t n[3]) {
  int rank = 1;
  if (lua_type(L, idx) != LUA_TTABLE) {
    n[0] = luaL_checkinteger(L, idx);
  } else {
    lua_Integer len = luaL_len(L, idx);
    if (len < 1 || len > 3 || (len > 1 && kind != FFT_C2C))
      luaL_error(L, "__fft: a %s transform takes %s, got %I", kind_names[kind],
                 kind == FFT_C2C ? "1 to 3 lengths" : "one length", len);
    rank = (int)len;
    for (int j = 0; j < rank; j++) {
      int isnum;
      lua_geti(L, idx, j + 1);
      n[j] = lua_tointegerx(L, -1, &isnum);
      lua_pop(L, 1);
      if (!isnum) luaL_error(L, "__fft: length %d is not an integer", j + 1);
    }
  }
  for (int j = 0; j < rank; j++)
    if (n[j] < 1 || n[j] > INT_MAX) luaL_error(L, "__fft: length %I out of range", (lua_Integer)n[j]);
  return rank;
}

/* x and y's shapes and dtypes as kind and the rank lengths n need them; the number of rows (blocks of the axes). */
static int64_t check_rows(lua_State *L, int kind, const cdv_array *x, const cdv_array *y, int rank, const int64_t *n,
                          int *dbl) {
  const cdv_dtype_info *tx = &cdv_dtypes[x->dtype], *ty = &cdv_dtypes[y->dtype];
  int want_x = kind == FFT_R2C ? 0 : 1, want_y = kind == FFT_C2R ? 0 : 1; /* complex? */
  if ((int)tx->is_complex != want_x || (int)ty->is_complex != want_y || (!want_x && !tx->is_float) ||
      (!want_y && !ty->is_float))
    luaL_error(L, "__fft: dtypes %s and %s do not fit %s", tx->name, ty->name, kind_names[kind]);
  *dbl = x->dtype == CDV_C128 || x->dtype == CDV_F64;
  if (*dbl != (y->dtype == CDV_C128 || y->dtype == CDV_F64) || x->dtype == CDV_F16 || y->dtype == CDV_F16)
    luaL_error(L, "__fft: dtypes %s and %s differ in precision", tx->name, ty->name);
  int64_t last = n[rank - 1], lx = kind == FFT_C2R ? last / 2 + 1 : last, ly = kind == FFT_R2C ? last / 2 + 1 : last;
  int fits = x->ndim >= rank && y->ndim == x->ndim && x->shape[x->ndim - 1] == lx && y->shape[y->ndim - 1] == ly;
  int64_t block = 1; /* the earlier axes' lengths */
  for (int j = 0; fits && j < rank - 1; j++) {
    int ax = x->ndim - rank + j;
    fits = x->shape[ax] == n[j] && y->shape[ax] == n[j];
    block *= n[j];
  }
  if (!fits || x->size / (lx * block) != y->size / (ly * block) || !cdv_array_contiguous(x) ||
      !cdv_array_contiguous(y) || x->block->dev != y->block->dev || x->data == y->data)
    luaL_error(L, "__fft: the arrays do not fit a %d-d %s transform ending in %I", rank, kind_names[kind],
               (lua_Integer)last);
  return y->size / (ly * block);
}

static int l_fft(lua_State *L) {
  int kind = luaL_checkoption(L, 1, NULL, kind_names), inverse = lua_toboolean(L, 2);
  cdv_array *x = cdv_check_array(L, 3), *y = cdv_check_array(L, 4);
  int64_t n[3] = {0, 0, 0};
  int rank = check_lengths(L, 5, kind, n), dbl;
  int64_t rows = check_rows(L, kind, x, y, rank, n, &dbl);
  cdv_device *d = x->block->dev;
  if (rows == 0) return 0;
  cdv_err e;
  if (d->be->host_memory) {
    if (!dbl && cdv_kissfft_load() != 0) return luaL_error(L, "fft: %s", cdv_kissfft_why());
    cdv_device_check(L, d);
    if (cdv_host_wait(x->block, &e) != 0 || cdv_host_wait(y->block, &e) != 0) return cdv_raise(L, NULL, &e);
    size_t hn[3] = {(size_t)n[0], (size_t)n[1], (size_t)n[2]};
    int rc = rank > 1 ? host_nd(inverse, dbl, x->data, y->data, hn, rank, (size_t)y->size)
                      : host_rows(kind, inverse, dbl, x->data, y->data, hn[0], (size_t)rows);
    if (rc != 0) return luaL_error(L, "fft: not enough host memory for a transform of %I", (lua_Integer)n[rank - 1]);
    return 0;
  }
  if (cdv_cufft_load() != 0) return luaL_error(L, "fft: %s", cdv_cufft_why());
  if (rows > INT_MAX) return luaL_error(L, "fft: %I transforms at once are more than cuFFT takes (%d)", rows, INT_MAX);
  void *stream = cdv_stream_for(L, d, NULL);
  /* A length of 1 changes neither the values nor the layout: it is left out of the plan (a rank-1 plan of 1 stays),
   * so cuFFT never sees a multi-d plan with a unit axis, and such shapes share plans. */
  int ni[3] = {0, 0, 0}, nr = 0;
  for (int j = 0; j < rank; j++)
    if (n[j] > 1 || (nr == 0 && j == rank - 1)) ni[nr++] = (int)n[j];
  cufft_rows(L, d, kind, inverse, dbl, x, y, nr, ni, (int)rows, stream);
  cdv_block_used(x->block, d, stream);
  cdv_block_used(y->block, d, stream);
  return 0;
}

/* cd._selftest.cufft() / cd._selftest.kissfft() -> the library opened, or nil and why not (every name tried).
 * In cd._selftest, not cd, as cd._selftest.cublas (blas.c). */
static int selftest_lib(lua_State *L, int (*load)(void), const char *(*why)(void), const char *(*path)(void)) {
  if (cdv_get_state(L)->sandbox) return luaL_error(L, "_selftest is not available in this sandbox");
  if (load() != 0) {
    luaL_pushfail(L);
    lua_pushstring(L, why());
    return 2;
  }
  lua_pushstring(L, path());
  return 1;
}
static int l_cufft(lua_State *L) { return selftest_lib(L, cdv_cufft_load, cdv_cufft_why, cdv_cufft_path); }
static int l_kissfft(lua_State *L) { return selftest_lib(L, cdv_kissfft_load, cdv_kissfft_why, cdv_kissfft_path); }

int cdv_fft_open(lua_State *L) {
  if (lua_getfield(L, -1, "_selftest") == LUA_TTABLE) {
    lua_pushcfunction(L, l_cufft);
    lua_setfield(L, -2, "cufft");
    lua_pushcfunction(L, l_kissfft);
    lua_setfield(L, -2, "kissfft");
  }
  lua_pop(L, 1);
  luaL_getmetatable(L, CDV_ARRAY);
  lua_pushcfunction(L, l_fft);
  lua_setfield(L, -2, "__fft");
  lua_pop(L, 1);
  return 0;
}
