/*
 * diskcache.c: the pieces the kernel caches on disk share (diskcache.h): SHA-256, lists of strings, reading
 * files, the cache directory, sealed entries published by rename and the scan of files included from disk.
 * NOTE [cpu kernel cache] (cpu_compile.c) and NOTE [cuda kernel
 * cache] (cuda_cache.c) say what each cache keeps and why.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include "diskcache.h"

#define MAX_SCANNED_FILES 512
#define MAX_INCLUDE_DEPTH 32

/* ---------------------------------------------------------------- SHA-256 (FIPS 180-4) */
static const uint32_t sha_k[64] = {
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha_block(cdv_sha256 *s, const unsigned char *p)
{
  uint32_t w[64], a[8];
  for (int i = 0; i < 16; i++)
    w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
  for (int i = 16; i < 64; i++) {
    uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  memcpy(a, s->h, sizeof a);
  for (int i = 0; i < 64; i++) {
    uint32_t ch = (a[4] & a[5]) ^ (~a[4] & a[6]);
    uint32_t t1 = a[7] + (ROR(a[4], 6) ^ ROR(a[4], 11) ^ ROR(a[4], 25)) + ch + sha_k[i] + w[i];
    uint32_t t2 = (ROR(a[0], 2) ^ ROR(a[0], 13) ^ ROR(a[0], 22)) + ((a[0] & a[1]) ^ (a[0] & a[2]) ^ (a[1] & a[2]));
    memmove(a + 1, a, 7 * sizeof a[0]);
    a[4] += t1;
    a[0] = t1 + t2;
  }
  for (int i = 0; i < 8; i++)
    s->h[i] += a[i];
}

void cdv_sha256_init(cdv_sha256 *s)
{
  static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  memcpy(s->h, h0, sizeof h0);
  s->len = 0;
  s->nblk = 0;
}

void cdv_sha256_add(cdv_sha256 *s, const void *data, size_t n)
{
  const unsigned char *p = data;
  s->len += n;
  while (n) {
    size_t k = 64 - s->nblk < n ? 64 - s->nblk : n;
    memcpy(s->blk + s->nblk, p, k);
    s->nblk += k, p += k, n -= k;
    if (s->nblk == 64) {
      sha_block(s, s->blk);
      s->nblk = 0;
    }
  }
}

void cdv_sha256_str(cdv_sha256 *s, const char *str)
{
  cdv_sha256_add(s, str ? str : "", strlen(str ? str : "") + 1);
}

void cdv_sha256_done(cdv_sha256 *s, unsigned char out[32])
{
  uint64_t bits = s->len * 8;
  unsigned char pad = 0x80, zero = 0, len[8];
  cdv_sha256_add(s, &pad, 1);
  while (s->nblk != 56)
    cdv_sha256_add(s, &zero, 1);
  for (int i = 0; i < 8; i++)
    len[i] = (unsigned char)(bits >> (56 - 8 * i));
  cdv_sha256_add(s, len, 8);
  for (int i = 0; i < 32; i++)
    out[i] = (unsigned char)(s->h[i / 4] >> (24 - 8 * (i % 4)));
}

/* ---------------------------------------------------------------- lists of strings */
void cdv_sl_addn(cdv_strlist *l, const char *s, size_t n)
{
  if (l->oom)
    return;
  if (l->n + 2 > l->cap) {
    int cap = l->cap ? l->cap * 2 : 16;
    char **v = realloc(l->v, (size_t)cap * sizeof *v);
    if (!v) {
      l->oom = 1;
      return;
    }
    l->v = v, l->cap = cap;
  }
  if (!(l->v[l->n] = strndup(s, n))) {
    l->oom = 1;
    return;
  }
  l->v[++l->n] = NULL;
}

void cdv_sl_add(cdv_strlist *l, const char *s)
{
  cdv_sl_addn(l, s, strlen(s));
}

void cdv_sl_free(cdv_strlist *l)
{
  for (int i = 0; i < l->n; i++)
    free(l->v[i]);
  free(l->v);
  memset(l, 0, sizeof *l);
}

/* ---------------------------------------------------------------- files and the directory */
/* Read into a buffer sized by fstat with a byte to spare, so the read that finds the end needs no growth
 * (it grows if the file grows meanwhile), up to CDV_MAX_FILE_BYTES. */
char *cdv_read_file(const char *path, size_t *n)
{
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return NULL;
  struct stat st;
  size_t cap = fstat(fd, &st) == 0 && st.st_size > 0 ? (size_t)st.st_size + 2 : 4096, len = 0;
  if (cap > CDV_MAX_FILE_BYTES + 1)
    cap = CDV_MAX_FILE_BYTES + 1;
  char *p = malloc(cap);
  int err = p ? 0 : ENOMEM;
  while (!err && len < CDV_MAX_FILE_BYTES) {
    if (len + 1 == cap) {
      size_t ncap = cap * 2 > CDV_MAX_FILE_BYTES + 1 ? CDV_MAX_FILE_BYTES + 1 : cap * 2;
      char *q = realloc(p, ncap);
      if (!q) {
        err = ENOMEM;
        break;
      }
      p = q, cap = ncap;
    }
    ssize_t k = read(fd, p + len, cap - 1 - len);
    if (k < 0 && errno == EINTR)
      continue;
    if (k < 0)
      err = errno;
    if (k <= 0)
      break;
    len += (size_t)k;
  }
  close(fd);
  if (err) {
    free(p);
    errno = err;
    return NULL;
  }
  p[len] = 0;
  *n = len;
  return p;
}

int cdv_mkdirs(const char *path)
{
  char tmp[PATH_MAX];
  snprintf(tmp, sizeof tmp, "%s", path);
  for (char *p = tmp + 1; *p; p++)
    if (*p == '/') {
      *p = 0;
      if (mkdir(tmp, 0700) && errno != EEXIST)
        return -1;
      *p = '/';
    }
  return mkdir(tmp, 0700) && errno != EEXIST ? -1 : 0;
}

void cdv_cache_dir(const char *sub, char *out, size_t n)
{
  const char *d = getenv("CUDADEV_CACHE_DIR"), *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
  const char *slash = sub ? "/" : "", *s = sub ? sub : "";
  if (d && *d)
    snprintf(out, n, "%s%s%s", d, slash, s);
  else if (x && *x)
    snprintf(out, n, "%s/cudadev%s%s", x, slash, s);
  else if (h && *h)
    snprintf(out, n, "%s/.cache/cudadev%s%s", h, slash, s);
  else
    out[0] = 0;
}

/* ---------------------------------------------------------------- sealed entries */
void cdv_cache_trailer(const char magic[8], const void *data, size_t n, unsigned char t[CDV_TRAILER_SIZE])
{
  cdv_sha256 s;
  unsigned char h[32];
  cdv_sha256_init(&s);
  cdv_sha256_add(&s, data, n);
  cdv_sha256_done(&s, h);
  memcpy(t, magic, 8);
  for (int i = 0; i < 8; i++)
    t[8 + i] = (unsigned char)((uint64_t)n >> (8 * i));
  memcpy(t + 16, h, 16);
}

char *cdv_cache_read(const char *path, const char magic[8], size_t *n)
{
  size_t len;
  char *data = cdv_read_file(path, &len);
  if (!data)
    return NULL;
  unsigned char t[CDV_TRAILER_SIZE];
  int ok = len > CDV_TRAILER_SIZE;
  if (ok) {
    cdv_cache_trailer(magic, data, len - CDV_TRAILER_SIZE, t);
    ok = !memcmp(t, data + len - CDV_TRAILER_SIZE, CDV_TRAILER_SIZE);
  }
  if (!ok) {
    free(data);
    errno = EBADMSG;
    return NULL;
  }
  *n = len - CDV_TRAILER_SIZE;
  data[*n] = 0;
  return data;
}

/* The trailer after the bytes already written to fd, then the rename that makes the entry visible whole:
 * readers see the old entry, no entry, or the new one, never a part. On failure tmp is removed. */
static int finish(int fd, const char *tmp, const char *path, const unsigned char t[CDV_TRAILER_SIZE])
{
  int ok = fd >= 0 && write(fd, t, CDV_TRAILER_SIZE) == (ssize_t)CDV_TRAILER_SIZE;
  if (fd >= 0 && close(fd))
    ok = 0;
  if (ok && rename(tmp, path) == 0)
    return 0;
  int err = errno;
  unlink(tmp);
  errno = err;
  return -1;
}

int cdv_cache_seal(const char *tmp, const char *path, const char magic[8])
{
  size_t n;
  char *data = cdv_read_file(tmp, &n);
  if (!data)
    return -1;
  unsigned char t[CDV_TRAILER_SIZE];
  cdv_cache_trailer(magic, data, n, t);
  free(data);
  return finish(open(tmp, O_WRONLY | O_APPEND | O_CLOEXEC), tmp, path, t);
}

int cdv_cache_write(const char *dir, const char *path, const char magic[8], const void *data, size_t n)
{
  char tmp[PATH_MAX];
  if (snprintf(tmp, sizeof tmp, "%s/.tmp-XXXXXX", dir) >= (int)sizeof tmp) {
    errno = ENAMETOOLONG;
    return -1;
  }
  int fd = mkostemp(tmp, O_CLOEXEC);
  if (fd < 0)
    return -1;
  unsigned char t[CDV_TRAILER_SIZE];
  cdv_cache_trailer(magic, data, n, t);
  for (size_t at = 0; at < n;) {
    ssize_t k = write(fd, (const char *)data + at, n - at);
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0) {
      int err = k < 0 ? errno : EIO;
      close(fd);
      unlink(tmp);
      errno = err;
      return -1;
    }
    at += (size_t)k;
  }
  return finish(fd, tmp, path, t);
}

/* ---------------------------------------------------------------- files included from disk */
int cdv_header_index(const cdv_compile_req *req, const char *name)
{
  for (int i = 0; i < req->nheaders; i++)
    if (req->header_names[i] && !strcmp(req->header_names[i], name))
      return i;
  return -1;
}

static void scan_includes(cdv_incscan *is, const char *dir, const cdv_strlist *incs, int depth);

/* Read an on-disk file once: its path and text join the key, its includes are followed. */
static void scan_disk_file(cdv_incscan *is, const char *path, int depth)
{
  for (int i = 0; i < is->seen.n; i++)
    if (!strcmp(is->seen.v[i], path))
      return;
  if (is->seen.n >= MAX_SCANNED_FILES) {
    is->incomplete = 1;
    return;
  }
  size_t n;
  char *text = cdv_read_file(path, &n);
  if (!text) {
    is->incomplete |= errno == ENOMEM;
    return;
  }
  cdv_sl_add(&is->seen, path);
  cdv_sha256_str(is->key, path);
  cdv_sha256_add(is->key, text, n);
  cdv_strlist incs = {0};
  if (cdv_list_includes(is->barriers, path, text, n, &incs) == 0) {
    char d[PATH_MAX];
    snprintf(d, sizeof d, "%s", path);
    char *slash = strrchr(d, '/');
    if (slash)
      *slash = 0;
    else
      snprintf(d, sizeof d, ".");
    scan_includes(is, d, &incs, depth + 1);
  } else {
    is->incomplete = 1;
  }
  is->incomplete |= is->seen.oom;
  cdv_sl_free(&incs);
  free(text);
}

static void scan_includes(cdv_incscan *is, const char *dir, const cdv_strlist *incs, int depth)
{
  if (depth > MAX_INCLUDE_DEPTH) {
    is->incomplete |= incs->n > 0;
    return;
  }
  for (int i = 0; i < incs->n; i++) {
    const char *name = incs->v[i] + 1;
    char path[PATH_MAX];
    struct stat st;
    if (cdv_header_index(is->req, name) >= 0)
      continue;
    if (name[0] == '/') {
      if (stat(name, &st) == 0 && S_ISREG(st.st_mode))
        scan_disk_file(is, name, depth);
      continue;
    }
    if (dir && incs->v[i][0] == 'q') {
      int len = snprintf(path, sizeof path, "%s/%s", dir, name);
      if (len < (int)sizeof path && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
        scan_disk_file(is, path, depth);
        continue;
      }
    }
    for (int k = 0; k < is->idirs->n; k++) {
      int len = snprintf(path, sizeof path, "%s/%s", is->idirs->v[k], name);
      if (len < (int)sizeof path && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
        scan_disk_file(is, path, depth);
        break;
      }
    }
  }
}

void cdv_include_scan(cdv_incscan *is, const char *dir, const cdv_strlist *incs)
{
  scan_includes(is, dir, incs, 0);
}

const char *cdv_opt_value(const char *const *opts, int nopts, int *i, const char *name, int joined)
{
  const char *o = opts[*i];
  size_t n = strlen(name);
  if (strncmp(o, name, n) != 0)
    return NULL;
  if (o[n] == '=')
    return o + n + 1;
  if (o[n] && joined)
    return o + n + strspn(o + n, " ");   /* "-D FOO" given as one option */
  if (o[n])
    return NULL;
  if (*i + 1 >= nopts)
    return "";
  return opts[++*i];
}
