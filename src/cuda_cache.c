/*
 * cuda_cache.c: compiled CUDA modules kept on disk, so that the first compile of a source in a new process
 * reads a file instead of running NVRTC.
 *
 * NOTE [cuda kernel cache]: NVRTC takes 20 to 90 ms per compile in every new process, and loading libnvrtc
 * at all about 28 ms more (200,000 relocations); reading an entry back takes tens of microseconds. Entries
 * live in $CUDADEV_CACHE_DIR/cuda, else $XDG_CACHE_HOME/cudadev/cuda, else ~/.cache/cudadev/cuda
 * (CUDADEV_CACHE=0 turns the cache off), each named by a SHA-256 over everything that changes NVRTC's output:
 * a format version, NVRTC itself (NOTE [nvrtc identity]), the driver version, the toolkit include folders
 * NVRTC is given (NOTE [toolkit includes]), the standard headers we give it and which of them it gets (NOTE [nvrtc
 * standard headers]), the architecture and the targets asked for, the file name, the source, the options, the
 * include paths, the headers (by name, so the order of the Lua table does not matter), the entries and which
 * of them are name expressions, and the path and bytes of every file the source and the headers include from
 * disk (diskcache.c's include scan: "..." next to the source file, as NVRTC looks there, then the -I options
 * and include paths). An entry holds a header that repeats the key and names the entries, the lowered name of
 * each entry (so templates named by name expressions hit too), the cubin and/or PTX, and the compile log; it
 * is sealed with a trailer and published by rename (diskcache.h). Reading it back checks the trailer, every
 * length against the bytes, and the key and the entries against the request; an entry that fails any check
 * is a miss, compiled and written again. Failed compiles are never stored: their error comes from NVRTC every
 * time. The directory and the entries are trusted only as NOTE [cache trust] (diskcache.c) says; one that is
 * refused is skipped like one that cannot be created or written: quietly (disk_errors counts it and
 * disk_last_error says why in cd.kernel_cache_stats()): the cache saves time and never fails a compile.
 * module.c consults it around the backend's compile, before the target is resolved, because resolving the
 * default target asks NVRTC which architectures it supports, which would load it. Why the last lookup missed
 * (or could not be made) is kept for disk_last_miss: a kernel that misses in every new process says why. The cpu device keeps its
 * own cache of objects (NOTE [cpu kernel cache]) and does not come here.
 *
 * NOTE [nvrtc identity]: a hit must not load NVRTC, yet NVRTC's version belongs in the key. The process that
 * loads it records, in <dir>/nvrtc-<h>.id (sealed like an entry), its version and the file the dynamic
 * linker opened with that file's device, inode, size and modification time; h hashes what steers the search
 * for the library (CUDADEV_LIBNVRTC, LD_LIBRARY_PATH, CUDA_HOME, CUDA_PATH and the identity of
 * /etc/ld.so.cache). A later process with the same search inputs reads the record and checks the file with
 * one stat; a changed environment, library or linker cache finds no record (or a stale one), and loads NVRTC
 * to write it again. The record's text is what joins the key.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <sys/stat.h>
#include "backend.h"
#include "diskcache.h"

#define FORMAT "cdv-cuda-cache-1"
#define ENTRY_MAGIC "CDVCUD01"
#define IDENT_MAGIC "CDVNVR01"
#define ENTRY_FORMAT 1u
#define HAS_PTX 1u
#define HAS_CUBIN 2u

/* ---------------------------------------------------------------- counters */
static long stats[CDV_DISK_NSTATS];
static pthread_mutex_t error_lock = PTHREAD_MUTEX_INITIALIZER;
static char last_error[512], last_miss[512];

static void count(int what) { __atomic_add_fetch(&stats[what], 1, __ATOMIC_RELAXED); }

/* An operation on the cache failed and compiling goes on without it: counted, and its text kept. */
__attribute__((format(printf, 1, 2))) static void disk_error(const char *fmt, ...) {
  count(CDV_DISK_ERRORS);
  va_list ap;
  va_start(ap, fmt);
  pthread_mutex_lock(&error_lock);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  pthread_mutex_unlock(&error_lock);
  va_end(ap);
}

/* Why the last compile did not come from the disk (disk_last_miss). */
__attribute__((format(printf, 1, 2))) static void miss_reason(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  pthread_mutex_lock(&error_lock);
  vsnprintf(last_miss, sizeof last_miss, fmt, ap);
  pthread_mutex_unlock(&error_lock);
  va_end(ap);
}

static int disabled(void) {
  const char *v = getenv("CUDADEV_CACHE");
  return v && (!strcmp(v, "0") || !strcasecmp(v, "off") || !strcasecmp(v, "no") || !strcasecmp(v, "false"));
}

void cdv_cuda_cache_stats(long out[CDV_DISK_NSTATS], char *dir, size_t ndir, char *last, size_t nlast, char *miss,
                          size_t nmiss) {
  for (int i = 0; i < CDV_DISK_NSTATS; i++) out[i] = __atomic_load_n(&stats[i], __ATOMIC_RELAXED);
  if (disabled())
    dir[0] = '\0';
  else
    cdv_cache_dir("cuda", dir, ndir);
  pthread_mutex_lock(&error_lock);
  snprintf(last, nlast, "%s", last_error);
  snprintf(miss, nmiss, "%s", last_miss);
  pthread_mutex_unlock(&error_lock);
}

/* ---------------------------------------------------------------- NOTE [nvrtc identity] */
static pthread_mutex_t ident_lock = PTHREAD_MUTEX_INITIALIZER;
static char ident_memo[2048]; /* once known, for the life of the process */

/* "device inode size mtime" of a file, "" when it cannot be stat'ed */
static void file_ident(const char *path, char *out, size_t n) {
  struct stat st;
  if (stat(path, &st) != 0)
    out[0] = '\0';
  else
    snprintf(out, n, "%llu %llu %lld %lld.%09ld", (unsigned long long)st.st_dev, (unsigned long long)st.st_ino,
             (long long)st.st_size, (long long)st.st_mtim.tv_sec, (long)st.st_mtim.tv_nsec);
}

/* The record's file: named by a hash of what steers the dynamic linker's search for the library. */
static int ident_path(const char *dir, char *out, size_t n) {
  static const char *const vars[] = {"CUDADEV_LIBNVRTC", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH"};
  cdv_sha256 s;
  char ld[128];
  unsigned char h[32];
  cdv_sha256_init(&s);
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) cdv_sha256_str(&s, getenv(vars[i]));
  file_ident("/etc/ld.so.cache", ld, sizeof ld);
  cdv_sha256_str(&s, ld);
  cdv_sha256_done(&s, h);
  return snprintf(out, n, "%s/nvrtc-%02x%02x%02x%02x%02x%02x%02x%02x.id", dir, h[0], h[1], h[2], h[3], h[4], h[5], h[6],
                  h[7]) < (int)n
             ? 0
             : -1;
}

/* The record's text ("nvrtc M.m\n<file>\n<its identity>\n") when the file it names is unchanged. */
static int read_ident(const char *path, char *out, size_t n) {
  size_t len;
  char *text = cdv_cache_read(path, IDENT_MAGIC, &len);
  char *file = text ? strchr(text, '\n') : NULL, *id = file ? strchr(file + 1, '\n') : NULL, now[128], want[130];
  int ok = id && len < n && strncmp(text, "nvrtc ", 6) == 0;
  if (ok) {
    *id = '\0';
    file_ident(file + 1, now, sizeof now);
    *id = '\n';
    snprintf(want, sizeof want, "%s\n", now);
    ok = now[0] && strcmp(id + 1, want) == 0;
  }
  if (ok) memcpy(out, text, len + 1);
  free(text);
  return ok ? 0 : -1;
}

/* Load NVRTC and describe it: nvrtcVersion and the file it came from (this is the 28 ms). */
static int probe_ident(char *out, size_t n) {
  int major, minor;
  if (cdv_nvrtc_version(&major, &minor) != 0) return -1;
  const char *file = cdv_nvrtc_file();
  char id[128];
  file_ident(file, id, sizeof id);
  if (!file[0] || !id[0]) return -1;
  return snprintf(out, n, "nvrtc %d.%d\n%s\n%s\n", major, minor, file, id) < (int)n ? 0 : -1;
}

/* Load NVRTC, describe it and write the record for the next process (which then need not load it). */
static int probe_and_record(const char *dir, const char *path, char *out, size_t n) {
  if (probe_ident(out, n) != 0) return -1;
  if (cdv_mkdirs(dir) != 0 || cdv_cache_write(dir, path, IDENT_MAGIC, out, strlen(out)) != 0)
    disk_error("cannot write the NVRTC record '%s': %s", path, strerror(errno));
  return 0;
}

/* NVRTC's identity for the key: the memo, else the record in dir, else a probe. */
static int nvrtc_identity(const char *dir, char *out, size_t n) {
  char path[PATH_MAX];
  int rc = 0;
  pthread_mutex_lock(&ident_lock);
  if (!ident_memo[0] && ident_path(dir, path, sizeof path) != 0) {
    rc = -1;
  } else if (!ident_memo[0]) {
    if (read_ident(path, ident_memo, sizeof ident_memo) != 0)
      rc = probe_and_record(dir, path, ident_memo, sizeof ident_memo);
    if (rc != 0) ident_memo[0] = '\0';
  }
  snprintf(out, n, "%s", ident_memo);
  pthread_mutex_unlock(&ident_lock);
  return rc;
}

/* ---------------------------------------------------------------- the key */
static void hash_bytes(cdv_sha256 *s, const void *p, size_t n) {
  char len[32];
  snprintf(len, sizeof len, "%zu", n);
  cdv_sha256_str(s, len);
  cdv_sha256_add(s, p, n);
}

static void hash_list(cdv_sha256 *s, const char *what, int n, const char *const *v) {
  char head[64];
  snprintf(head, sizeof head, "%s %d", what, n);
  cdv_sha256_str(s, head);
  for (int i = 0; i < n; i++) cdv_sha256_str(s, v[i]);
}

/* Where NVRTC looks for includes: -I / --include-path options, then include_paths (the order opts_build uses). */
void cdv_cuda_include_dirs(const cdv_compile_req *req, cdv_strlist *dirs) {
  for (int i = 0; i < req->nopts; i++) {
    const char *v = cdv_opt_value(req->opts, req->nopts, &i, "-I", 1);
    if (v || (v = cdv_opt_value(req->opts, req->nopts, &i, "--include-path", 0))) cdv_sl_add(dirs, v);
  }
  for (int i = 0; i < req->nincludes; i++) cdv_sl_add(dirs, req->include_paths[i]);
}

/* One text's includes, scanned from dir (diskcache.c). */
static void scan_text_includes(cdv_incscan *is, const char *dir, const char *name, const char *text, size_t n) {
  cdv_strlist incs = {0};
  if (cdv_list_includes(NULL, name, text, n, &incs) == 0)
    cdv_include_scan(is, dir, &incs);
  else
    is->incomplete = 1;
  cdv_sl_free(&incs);
}

/* The files the source and the headers include from disk; "..." is looked for next to the source file. */
static int hash_includes(cdv_sha256 *s, const cdv_compile_req *req) {
  const char *name = req->name ? req->name : "kernel.cu", *slash = strrchr(name, '/');
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - name) : 1, slash ? name : ".");
  if (slash == name) snprintf(dir, sizeof dir, "/");
  cdv_strlist dirs = {0};
  cdv_cuda_include_dirs(req, &dirs);
  cdv_incscan is = {req, &dirs, s, NULL, {0}, dirs.oom, ""};
  scan_text_includes(&is, dir, name, req->source, req->source_len);
  for (int i = 0; i < req->nheaders; i++) {
    const char *h = req->header_srcs[i];
    scan_text_includes(&is, dir, req->header_names[i], h, strlen(h));
  }
  cdv_nvrtc_std_key(req, &dirs, &is, s); /* NOTE [nvrtc standard headers] */
  int rc = is.incomplete || is.special[0] ? -1 : 0;
  cdv_sl_free(&is.seen);
  cdv_sl_free(&dirs);
  return rc;
}

static int hash_request(cdv_sha256 *s, const cdv_compile_req *req) {
  char misc[160];
  snprintf(misc, sizeof misc, "driver %d arch %d ptx %d cubin %d", cdv_cuda_driver_version(), req->arch, req->want_ptx,
           req->want_cubin);
  cdv_sha256_str(s, misc);
  cdv_sha256_str(s, cdv_nvrtc_toolkit_include(0)); /* NOTE [toolkit includes] */
  cdv_sha256_str(s, cdv_nvrtc_toolkit_include(1));
  cdv_sha256_str(s, cdv_nvrtc_std_digest()); /* NOTE [nvrtc standard headers] */
  cdv_sha256_str(s, req->name ? req->name : "kernel.cu");
  hash_bytes(s, req->source, req->source_len);
  hash_list(s, "options", req->nopts, req->opts);
  hash_list(s, "include_paths", req->nincludes, req->include_paths);
  cdv_sha256_str(s, "headers"); /* in name order: the request's headers are sorted (module.c) */
  for (int i = 0; i < req->nheaders; i++) {
    cdv_sha256_str(s, req->header_names[i]);
    hash_bytes(s, req->header_srcs[i], strlen(req->header_srcs[i]));
  }
  hash_list(s, "entries", req->nentries, req->entries);
  for (int i = 0; i < req->nentries; i++) {
    int k = req->is_expr ? req->is_expr[i] : 0;
    cdv_sha256_str(s, k == 2 ? "global" : k ? "expr" : "symbol");
  }
  return hash_includes(s, req);
}

int cdv_cuda_cache_key(const cdv_compile_req *req, cdv_cuda_entry *ce) {
  char ident[2048];
  unsigned char h[32];
  cdv_sha256 s;
  ce->on = 0;
  if (disabled()) return miss_reason("the cache is off (CUDADEV_CACHE=%s)", getenv("CUDADEV_CACHE")), -1;
  cdv_cache_dir("cuda", ce->dir, sizeof ce->dir);
  if (!ce->dir[0])
    return miss_reason("no cache directory (none of CUDADEV_CACHE_DIR, XDG_CACHE_HOME, HOME is set)"), -1;
  char why[PATH_MAX + 256];
  if (cdv_cache_trust_dir(ce->dir, 1, why, sizeof why) != 0) { /* (see NOTE [cache trust]) no cache, not a failure */
    disk_error("%s", why);
    return miss_reason("the cache directory is not trusted: %s", why), -1;
  }
  if (nvrtc_identity(ce->dir, ident, sizeof ident) != 0) /* no NVRTC: the compile says why */
    return miss_reason("NVRTC could not be identified for the key"), -1;
  cdv_sha256_init(&s);
  cdv_sha256_str(&s, FORMAT);
  cdv_sha256_str(&s, ident);
  if (hash_request(&s, req) != 0)
    return miss_reason("the files %s includes could not all be read into the key (at most 512 files, 32 levels)",
                       req->name ? req->name : "kernel.cu"),
           -1;
  cdv_sha256_done(&s, h);
  memcpy(ce->key, h, sizeof ce->key);
  char hex[33];
  for (int i = 0; i < 16; i++) snprintf(hex + 2 * i, 3, "%02x", h[i]);
  ce->on = snprintf(ce->path, sizeof ce->path, "%s/%s.mod", ce->dir, hex) < (int)sizeof ce->path;
  return ce->on ? 0 : -1;
}

/* ---------------------------------------------------------------- the entry's bytes */
/* key (16), format, entry count, flags (HAS_PTX | HAS_CUBIN), 0 (4 bytes each), the lengths of the PTX, the
 * cubin and the log (8 bytes each), then each entry's name and lowered name (4-byte length + bytes), then the
 * PTX, cubin and log bytes. Integers are little-endian. The trailer follows (cdv_cache_write). */
typedef struct wr {
  unsigned char *p;
  size_t at;
} wr;

static void put_uint(wr *w, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; i++) w->p[w->at++] = (unsigned char)(v >> (8 * i));
}

static void put_bytes(wr *w, const void *p, size_t n) {
  if (n) memcpy(w->p + w->at, p, n);
  w->at += n;
}

static void put_str(wr *w, const char *s) {
  put_uint(w, strlen(s), 4);
  put_bytes(w, s, strlen(s));
}

static unsigned char *pack(const unsigned char key[16], const cdv_compile_req *req, const cdv_image *img, size_t *n) {
  size_t size = 16 + 16 + 24 + img->ptx_len + img->cubin_len + strlen(img->log ? img->log : "");
  for (int i = 0; i < req->nentries; i++) size += 8 + strlen(req->entries[i]) + strlen(img->lowered[i]);
  wr w = {malloc(size), 0};
  if (!w.p) return NULL;
  put_bytes(&w, key, 16);
  put_uint(&w, ENTRY_FORMAT, 4);
  put_uint(&w, (uint64_t)req->nentries, 4);
  put_uint(&w, (img->ptx ? HAS_PTX : 0) | (img->cubin ? HAS_CUBIN : 0), 4);
  put_uint(&w, 0, 4);
  put_uint(&w, img->ptx_len, 8);
  put_uint(&w, img->cubin_len, 8);
  put_uint(&w, strlen(img->log ? img->log : ""), 8);
  for (int i = 0; i < req->nentries; i++) {
    put_str(&w, req->entries[i]);
    put_str(&w, img->lowered[i]);
  }
  put_bytes(&w, img->ptx, img->ptx_len);
  put_bytes(&w, img->cubin, img->cubin_len);
  put_bytes(&w, img->log, strlen(img->log ? img->log : ""));
  *n = w.at;
  return w.p;
}

/* A reader that never goes past the end: once a read does not fit, bad is set and every read gives nothing. */
typedef struct rd {
  const unsigned char *p;
  size_t n, at;
  int bad;
} rd;

static const unsigned char *take(rd *r, uint64_t len) {
  if (r->bad || len > r->n - r->at) {
    r->bad = 1;
    return NULL;
  }
  r->at += (size_t)len;
  return r->p + r->at - len;
}

static uint64_t take_uint(rd *r, int bytes) {
  const unsigned char *q = take(r, (uint64_t)bytes);
  uint64_t v = 0;
  for (int i = 0; q && i < bytes; i++) v |= (uint64_t)q[i] << (8 * i);
  return v;
}

/* A copy with a NUL after it, or NULL (a string that holds a NUL is refused when nul_free). */
static char *take_copy(rd *r, uint64_t len, int nul_free) {
  const unsigned char *q = take(r, len);
  char *s = q && (!nul_free || !memchr(q, 0, (size_t)len)) ? malloc((size_t)len + 1) : NULL;
  if (s) {
    memcpy(s, q, (size_t)len);
    s[len] = '\0';
  }
  r->bad |= s == NULL;
  return s;
}

static int unpack_entries(rd *r, const cdv_compile_req *req, cdv_image *out) {
  out->lowered = calloc((size_t)req->nentries + 1, sizeof *out->lowered);
  if (!out->lowered) return -1;
  out->nentries = req->nentries;
  for (int i = 0; i < req->nentries; i++) {
    char *name = take_copy(r, take_uint(r, 4), 1);
    int same = name && strcmp(name, req->entries[i]) == 0;
    free(name);
    if (!same || !(out->lowered[i] = take_copy(r, take_uint(r, 4), 1))) return -1;
  }
  return 0;
}

/* The image in data, when it is the entry for this key and these entries; -1 otherwise (free out either way). */
static int unpack(const unsigned char *data, size_t n, const unsigned char key[16], const cdv_compile_req *req,
                  cdv_image *out) {
  rd r = {data, n, 0, 0};
  const unsigned char *k = take(&r, 16);
  uint64_t format = take_uint(&r, 4), nentries = take_uint(&r, 4), flags = take_uint(&r, 4), zero = take_uint(&r, 4);
  uint64_t lp = take_uint(&r, 8), lc = take_uint(&r, 8), ll = take_uint(&r, 8);
  if (r.bad || memcmp(k, key, 16) || format != ENTRY_FORMAT || nentries != (uint64_t)req->nentries || zero ||
      (flags & ~(uint64_t)(HAS_PTX | HAS_CUBIN)) || (!(flags & HAS_PTX) && lp) || (!(flags & HAS_CUBIN) && lc) ||
      !flags)
    return -1;
  if (unpack_entries(&r, req, out)) return -1;
  if (flags & HAS_PTX) out->ptx = take_copy(&r, lp, 0), out->ptx_len = (size_t)lp;
  if (flags & HAS_CUBIN) out->cubin = take_copy(&r, lc, 0), out->cubin_len = (size_t)lc;
  out->log = take_copy(&r, ll, 0);
  return r.bad || r.at != n ? -1 : 0;
}

/* ---------------------------------------------------------------- lookups and writes */
int cdv_cuda_cache_get(const cdv_cuda_entry *ce, const cdv_compile_req *req, cdv_image *out) {
  size_t n;
  if (!ce->on) return -1;
  memset(out, 0, sizeof *out);
  char *data = cdv_cache_read(ce->path, ENTRY_MAGIC, &n);
  int rc = data ? unpack((const unsigned char *)data, n, ce->key, req, out) : -1;
  int err = errno;
  if (rc)
    miss_reason(!data && (err == ENOENT || err == ENOTDIR) ? "no entry '%s' yet (a first compile of these inputs)"
                : !data                                    ? "the entry '%s' could not be read"
                                                           : "the entry '%s' does not match the compile",
                ce->path);
  errno = err;
  if (!data && errno == EBADMSG)
    disk_error("the kernel cache entry '%s' is damaged (truncated or modified)", ce->path);
  else if (!data && errno != ENOENT && errno != ENOTDIR)
    disk_error("cannot read the kernel cache entry '%s': %s", ce->path, cdv_cache_strerror(errno));
  else if (data && rc)
    disk_error("the kernel cache entry '%s' does not match the compile", ce->path);
  free(data);
  if (rc) cdv_image_free(out);
  count(rc ? CDV_DISK_MISSES : CDV_DISK_HITS);
  return rc;
}

void cdv_cuda_cache_put(const cdv_cuda_entry *ce, const cdv_compile_req *req, const cdv_image *img) {
  size_t n;
  if (!ce->on) return;
  unsigned char *data = pack(ce->key, req, img, &n);
  if (!data)
    disk_error("not enough memory to write the kernel cache entry '%s'", ce->path);
  else if (cdv_mkdirs(ce->dir) != 0)
    disk_error("cannot create the kernel cache directory '%s': %s", ce->dir, strerror(errno));
  else if (cdv_cache_write(ce->dir, ce->path, ENTRY_MAGIC, data, n) != 0)
    disk_error("cannot write the kernel cache entry '%s': %s", ce->path, strerror(errno));
  else
    count(CDV_DISK_WRITES);
  free(data);
}

/* ---------------------------------------------------------------- cd._selftest.disk_cache */
/* get and put on a made-up image, without NVRTC: it reads back as written; every truncation, every flipped
 * byte, every sealed prefix (a valid trailer over bytes cut short) and a byte too many are misses; so are the
 * entry under another key, for another entry count or another entry name; an unwritable directory is a
 * counted error and nothing else. Counters move as they would for real compiles. */
static int same_image(const cdv_image *a, const cdv_image *b) {
  int same = a->ptx_len == b->ptx_len && a->cubin_len == b->cubin_len && a->nentries == b->nentries &&
             !memcmp(a->ptx, b->ptx, a->ptx_len) && !memcmp(a->cubin, b->cubin, a->cubin_len) &&
             !strcmp(a->log, b->log);
  for (int i = 0; same && i < a->nentries; i++) same = !strcmp(a->lowered[i], b->lowered[i]);
  return same;
}

static int write_raw(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  int ok = f && fwrite(p, 1, n, f) == n;
  return (f && fclose(f) == 0 && ok) ? 0 : -1;
}

/* A lookup that must miss; also frees what it read. */
static int misses(const cdv_cuda_entry *ce, const cdv_compile_req *req) {
  cdv_image got;
  int rc = cdv_cuda_cache_get(ce, req, &got);
  cdv_image_free(&got);
  return rc != 0;
}

static const char *damaged_entries_miss(const cdv_cuda_entry *ce, const cdv_compile_req *req, char *file, size_t len) {
  for (size_t k = 0; k < len; k++)
    if (write_raw(ce->path, file, k) || !misses(ce, req)) return "a truncated entry was used";
  for (size_t k = 0; k < len; k++) {
    file[k] ^= 0x20;
    int bad = write_raw(ce->path, file, len) || !misses(ce, req);
    file[k] ^= 0x20;
    if (bad) return "an entry with a flipped byte was used";
  }
  size_t payload = len - CDV_TRAILER_SIZE;
  for (size_t k = 0; k <= payload + 1; k++) {
    if (k == payload) continue;
    char *p = malloc(payload + 1);
    if (!p) return "not enough memory";
    memcpy(p, file, payload);
    p[payload] = 'x';
    int bad = cdv_cache_write(ce->dir, ce->path, ENTRY_MAGIC, p, k) || !misses(ce, req);
    free(p);
    if (bad)
      return k < payload ? "a sealed prefix of an entry was used" : "a sealed entry with a byte too many was used";
  }
  return NULL;
}

static const char *other_requests_miss(const cdv_cuda_entry *ce, const cdv_compile_req *req) {
  cdv_cuda_entry other = *ce;
  other.key[0] ^= 1;
  if (!misses(&other, req)) return "an entry was used for another key";
  cdv_compile_req fewer = *req;
  fewer.nentries--;
  if (!misses(ce, &fewer)) return "an entry was used for a request with fewer entries";
  const char *names[2] = {req->entries[0], "axpy<double>"};
  cdv_compile_req renamed = *req;
  renamed.entries = names;
  if (!misses(ce, &renamed)) return "an entry was used for a request with other entries";
  return NULL;
}

static const char *unwritable_is_quiet(const cdv_cuda_entry *ce, const cdv_compile_req *req, const cdv_image *img) {
  cdv_cuda_entry bad = *ce;
  long before[CDV_DISK_NSTATS], after[CDV_DISK_NSTATS];
  char dir[8], last[8], miss[8];
  if (snprintf(bad.dir, sizeof bad.dir, "%s/sub", ce->path) >= (int)sizeof bad.dir || /* under a file */
      snprintf(bad.path, sizeof bad.path, "%s/x.mod", bad.dir) >= (int)sizeof bad.path)
    return "the directory name is too long";
  cdv_cuda_cache_stats(before, dir, sizeof dir, last, sizeof last, miss, sizeof miss);
  cdv_cuda_cache_put(&bad, req, img);
  cdv_cuda_cache_stats(after, dir, sizeof dir, last, sizeof last, miss, sizeof miss);
  if (after[CDV_DISK_ERRORS] != before[CDV_DISK_ERRORS] + 1 || after[CDV_DISK_WRITES] != before[CDV_DISK_WRITES])
    return "writing into an unwritable directory was not a counted error";
  return misses(&bad, req) ? NULL : "an entry was found in an unwritable directory";
}

int cdv_cuda_cache_selftest(const char *dir, char *why, size_t n) {
  const char *entries[2] = {"saxpy", "axpy<float>"};
  unsigned char is_expr[2] = {0, 1};
  char ptx[] = ".version 8.0\n.entry saxpy", cubin[] = "\177ELF\0\1\2 a cubin with NULs\0", log[] = "warning: a log";
  char low0[] = "saxpy", low1[] = "_Z4axpyIfEvT_PKS0_PS0_i", *lowered[2] = {low0, low1};
  cdv_image img = {ptx, sizeof ptx - 1, cubin, sizeof cubin, NULL, log, lowered, 2}, got;
  cdv_compile_req req = {.nentries = 2, .entries = entries, .is_expr = is_expr};
  cdv_cuda_entry ce = {.on = 1};
  memcpy(ce.key, "0123456789abcdef", 16);
  snprintf(ce.dir, sizeof ce.dir, "%s", dir);
  snprintf(ce.path, sizeof ce.path, "%s/selftest.mod", dir);
  const char *bad = NULL;
  size_t len = 0;
  char *file = NULL;
  cdv_cuda_cache_put(&ce, &req, &img);
  if (!(file = cdv_read_file(ce.path, &len)) || len <= CDV_TRAILER_SIZE)
    bad = "the entry was not written";
  else if (cdv_cuda_cache_get(&ce, &req, &got) != 0 || !same_image(&got, &img))
    bad = "the entry did not read back as written";
  if (!bad) cdv_image_free(&got);
  if (!bad) bad = damaged_entries_miss(&ce, &req, file, len);
  if (!bad && write_raw(ce.path, file, len) == 0) bad = other_requests_miss(&ce, &req);
  if (!bad) bad = unwritable_is_quiet(&ce, &req, &img);
  free(file);
  unlink(ce.path);
  if (bad) snprintf(why, n, "%s", bad);
  return bad ? -1 : 0;
}
