/*
 * diskcache.c: the pieces the kernel caches on disk share (diskcache.h): SHA-256, lists of strings, reading
 * files, the cache directory, sealed entries published by rename and the scan of files included from disk.
 * NOTE [cpu kernel cache] (cpu_compile.c) and NOTE [cuda kernel
 * cache] (cuda_cache.c) say what each cache keeps and why.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
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

static void sha_block(cdv_sha256 *s, const unsigned char *p) {
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
  for (int i = 0; i < 8; i++) s->h[i] += a[i];
}

void cdv_sha256_init(cdv_sha256 *s) {
  static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  memcpy(s->h, h0, sizeof h0);
  s->len = 0;
  s->nblk = 0;
}

void cdv_sha256_add(cdv_sha256 *s, const void *data, size_t n) {
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

void cdv_sha256_str(cdv_sha256 *s, const char *str) { cdv_sha256_add(s, str ? str : "", strlen(str ? str : "") + 1); }

void cdv_sha256_done(cdv_sha256 *s, unsigned char out[32]) {
  uint64_t bits = s->len * 8;
  unsigned char pad = 0x80, zero = 0, len[8];
  cdv_sha256_add(s, &pad, 1);
  while (s->nblk != 56) cdv_sha256_add(s, &zero, 1);
  for (int i = 0; i < 8; i++) len[i] = (unsigned char)(bits >> (56 - 8 * i));
  cdv_sha256_add(s, len, 8);
  for (int i = 0; i < 32; i++) out[i] = (unsigned char)(s->h[i / 4] >> (24 - 8 * (i % 4)));
}

/* ---------------------------------------------------------------- lists of strings */
void cdv_sl_addn(cdv_strlist *l, const char *s, size_t n) {
  if (l->oom) return;
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

void cdv_sl_add(cdv_strlist *l, const char *s) { cdv_sl_addn(l, s, strlen(s)); }

void cdv_sl_free(cdv_strlist *l) {
  for (int i = 0; i < l->n; i++) free(l->v[i]);
  free(l->v);
  memset(l, 0, sizeof *l);
}

/* ---------------------------------------------------------------- files and the directory */
/* NOTE [cache trust]: a file is opened without blocking (a FIFO or a device at its name must not hang the
 * caller) and used only when it is a regular file; an entry (CDV_OPEN_ENTRY) is also never reached through a
 * symbolic link and must belong to this user. The fd, or -1 with errno (cdv_cache_strerror words it). */
int cdv_open_file(const char *path, int how) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | (how & CDV_OPEN_ENTRY ? O_NOFOLLOW : 0));
  struct stat st;
  int err = fd < 0 ? errno : fstat(fd, &st) ? errno : 0;
  if (!err && !S_ISREG(st.st_mode))
    err = CDV_ENOTREG;
  else if (!err && (how & CDV_OPEN_ENTRY) && st.st_uid != geteuid())
    err = CDV_EOWNER;
  if (err && fd >= 0) close(fd);
  if (fd < 0 && err == ELOOP && (how & CDV_OPEN_ENTRY)) err = CDV_ESYMLINK;
  if (!err) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  errno = err;
  return err ? -1 : fd;
}

const char *cdv_cache_strerror(int err) {
  switch (err) {
    case CDV_ENOTREG: return "it is not a regular file";
    case CDV_EOWNER: return "it is owned by another user";
    case CDV_ESYMLINK: return "it is a symbolic link (not followed)";
    default: return strerror(err);
  }
}

/* Read all of fd into a buffer sized by fstat with a byte to spare, so the read that finds the end needs no
 * growth (it grows if the file grows meanwhile), up to max bytes; closes fd. */
static char *read_fd(int fd, size_t max, size_t *n) {
  struct stat st;
  size_t cap = fstat(fd, &st) == 0 && st.st_size > 0 ? (size_t)st.st_size + 2 : 4096, len = 0;
  if (cap > max + 1) cap = max + 1;
  char *p = malloc(cap);
  int err = p ? 0 : ENOMEM;
  while (!err && len < max) {
    if (len + 1 == cap) {
      size_t ncap = cap * 2 > max + 1 ? max + 1 : cap * 2;
      char *q = realloc(p, ncap);
      if (!q) {
        err = ENOMEM;
        break;
      }
      p = q, cap = ncap;
    }
    ssize_t k = read(fd, p + len, cap - 1 - len);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) err = errno;
    if (k <= 0) break;
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

char *cdv_read_file(const char *path, size_t *n) {
  int fd = cdv_open_file(path, 0);
  return fd < 0 ? NULL : read_fd(fd, CDV_MAX_FILE_BYTES, n);
}

int cdv_mkdirs(const char *path) {
  char tmp[PATH_MAX];
  snprintf(tmp, sizeof tmp, "%s", path);
  for (char *p = tmp + 1; *p; p++)
    if (*p == '/') {
      *p = 0;
      if (mkdir(tmp, 0700) && errno != EEXIST) return -1;
      *p = '/';
    }
  return mkdir(tmp, 0700) && errno != EEXIST ? -1 : 0;
}

void cdv_cache_dir(const char *sub, char *out, size_t n) {
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

/* ---------------------------------------------------------------- NOTE [cache trust] */
/* An entry of either cache is code that runs in this process (a cpu object's constructors run at dlopen, a
 * cubin runs on the GPU with this process's memory), so the cache trusts nothing another user could have
 * written. A cache directory is used only when:
 *   - it is a directory, not a symbolic link, owned by this user (the effective uid) and not writable by its
 *     group or by others (cudadev creates it 0700);
 *   - every directory above it, after symbolic links in the path the user gave are resolved (realpath), is
 *     owned by this user or by root and is not writable by group or others, unless it has the sticky bit
 *     (/tmp): there others cannot rename or remove what is ours. Nobody else can then replace a directory on
 *     the way, so the checked path can be used by name afterwards.
 * An entry is opened with O_NOFOLLOW | O_NONBLOCK and used only when it is a regular file owned by this user
 * (cdv_open_file): a symbolic link, a FIFO or a device at its name is a miss, replaced by the next write.
 * The trailer's hash is not keyed: integrity against accidents (truncation, a crash mid-write), while the
 * directory rule above is what keeps others out. A refused directory is recorded (cdv_cache_refusal, in
 * cd.kernel_cache_stats().disk_refused); the cpu device then compiles into a fresh private directory
 * (cdv_cache_private_dir), the CUDA cache is skipped. */
static pthread_mutex_t refusal_lock = PTHREAD_MUTEX_INITIALIZER;
static char refusal[PATH_MAX + 256];

void cdv_cache_refusal(char *out, size_t n) {
  pthread_mutex_lock(&refusal_lock);
  snprintf(out, n, "%s", refusal);
  pthread_mutex_unlock(&refusal_lock);
}

__attribute__((format(printf, 4, 5))) static int refuse(char *why, size_t n, const char *dir, const char *fmt, ...) {
  char reason[PATH_MAX + 64];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(reason, sizeof reason, fmt, ap);
  va_end(ap);
  snprintf(why, n, "the kernel cache directory '%s' is not used: %s", dir, reason);
  pthread_mutex_lock(&refusal_lock);
  snprintf(refusal, sizeof refusal, "%s", why);
  pthread_mutex_unlock(&refusal_lock);
  errno = EACCES;
  return -2;
}

/* A directory above the cache directory: owned by us or root, and not writable by others unless sticky. */
static int check_above(int fd, const char *dir, const char *above, char *why, size_t n) {
  struct stat st;
  if (fstat(fd, &st)) return refuse(why, n, dir, "cannot inspect '%s' above it: %s", above, strerror(errno));
  if (st.st_uid != 0 && st.st_uid != geteuid())
    return refuse(why, n, dir, "'%s' above it is owned by another user (uid %u)", above, (unsigned)st.st_uid);
  if ((st.st_mode & 022) && !(st.st_mode & S_ISVTX))
    return refuse(why, n, dir, "'%s' above it is writable by other users (mode %04o)", above,
                  (unsigned)(st.st_mode & 07777));
  return 0;
}

int cdv_cache_trust_dir(const char *dir, int create, char *why, size_t n) {
  char parent[PATH_MAX], real[PATH_MAX];
  if (create && cdv_mkdirs(dir)) {
    snprintf(why, n, "cannot create the kernel cache directory '%s': %s", dir, strerror(errno));
    return -1;
  }
  if (snprintf(parent, sizeof parent, "%s", dir) >= (int)sizeof parent)
    return refuse(why, n, dir, "its name is too long");
  size_t len = strlen(parent);
  while (len > 1 && parent[len - 1] == '/') parent[--len] = 0;
  char *slash = strrchr(parent, '/');
  const char *leaf = slash ? slash + 1 : parent;
  if (!*leaf || !strcmp(leaf, ".") || !strcmp(leaf, ".."))
    return refuse(why, n, dir, "it must end in a directory name");
  if (slash == parent)
    snprintf(real, sizeof real, "/");
  else if (!realpath(slash ? (*slash = 0, parent) : ".", real)) {
    snprintf(why, n, "cannot create the kernel cache directory '%s': %s", dir, strerror(errno));
    return -1;
  }
  int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC), rc = fd < 0 ? refuse(why, n, dir, "cannot open '/'") : 0;
  if (rc == 0) rc = check_above(fd, dir, "/", why, n);
  for (char *p = real + 1; rc == 0 && *p;) { /* each directory of the resolved path, from the root down */
    char *end = strchr(p, '/');
    if (end) *end = 0;
    int next = openat(fd, p, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    close(fd);
    fd = next;
    rc = fd < 0 ? refuse(why, n, dir, "'%s' above it changed while it was checked", real)
                : check_above(fd, dir, real, why, n);
    if (end)
      *end = '/', p = end + 1;
    else
      break;
  }
  struct stat st;
  int leaf_fd = rc == 0 ? openat(fd, leaf, O_PATH | O_NOFOLLOW | O_CLOEXEC) : -1;
  if (rc == 0 && (leaf_fd < 0 || fstat(leaf_fd, &st))) {
    if (errno == ENOENT)
      snprintf(why, n, "the kernel cache directory '%s' does not exist", dir), rc = -1;
    else
      rc = refuse(why, n, dir, "%s", strerror(errno));
  } else if (rc == 0 && S_ISLNK(st.st_mode)) {
    rc = refuse(why, n, dir, "it is a symbolic link");
  } else if (rc == 0 && !S_ISDIR(st.st_mode)) {
    rc = refuse(why, n, dir, "it is not a directory");
  } else if (rc == 0 && st.st_uid != geteuid()) {
    rc = refuse(why, n, dir, "it is owned by another user (uid %u)", (unsigned)st.st_uid);
  } else if (rc == 0 && (st.st_mode & 022)) {
    rc = refuse(why, n, dir, "it is writable by other users (mode %04o)", (unsigned)(st.st_mode & 07777));
  }
  if (leaf_fd >= 0) close(leaf_fd);
  if (fd >= 0) close(fd);
  return rc;
}

static int remove_cb(const char *p, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  remove(p);
  return 0;
}

void cdv_remove_tree(const char *path) { nftw(path, remove_cb, 16, FTW_DEPTH | FTW_PHYS); }

static pthread_mutex_t private_lock = PTHREAD_MUTEX_INITIALIZER;
static char private_dir[PATH_MAX];
static pid_t private_pid;

/* The private directory goes with the process that made it (not with a forked child that exits). */
__attribute__((destructor)) static void remove_private_dir(void) {
  if (private_dir[0] && private_pid == getpid()) cdv_remove_tree(private_dir);
}

/* NOTE [stale private directories]: a private directory is removed at exit, but a process that is killed (a
 * server's worker, a launch that took the host down) leaves it, and a host that serves requests can leave many.
 * Each private directory therefore holds a file "owner": the pid of its process and that process's start time
 * (field 22 of /proc/PID/stat, so that a reused pid is not taken for the owner). The first fallback of a
 * process removes, in the same place, the directories cudadev-XXXXXX whose owner is gone, and only those it
 * can tell are ours: a directory (not a symbolic link) of this uid, mode 0700, whose owner file is a regular
 * file of this uid. A directory without one (made by an older cudadev, or just made) is left. Everything is
 * done relative to opened directories (openat, unlinkat, O_NOFOLLOW), so a link planted inside leads nowhere;
 * in a sticky /tmp nobody else can rename what is ours meanwhile. */
#define OWNER_FILE "owner"

/* The start time of process pid (in clock ticks since boot), 0 when it does not exist, -1 when unknown. */
static long long start_time(pid_t pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT || errno == ESRCH ? 0 : -1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return n == 0 ? 0 : -1;
  buf[n] = 0;
  char *p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
  long long t = -1;
  for (int field = 2; p && *p; p++) /* field 2 ends at p; the start time is field 22 */
    if (*p == ' ' && ++field == 22) {
      t = strtoll(p + 1, NULL, 10);
      break;
    }
  return t;
}

/* Removes the entries of the directory fd (closed here) and below, never following a link. */
static void remove_below(int fd, int depth) {
  DIR *d = fdopendir(fd);
  if (!d) {
    close(fd);
    return;
  }
  struct dirent *de;
  while ((de = readdir(d))) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
    struct stat st;
    if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW)) continue;
    if (S_ISDIR(st.st_mode) && depth < 16) {
      int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub >= 0) remove_below(sub, depth + 1);
      unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR);
    } else if (!S_ISDIR(st.st_mode))
      unlinkat(dirfd(d), de->d_name, 0);
  }
  closedir(d);
}

/* 1 when the directory fd's owner file names a process that is gone. */
static int owner_gone(int fd) {
  int f = openat(fd, OWNER_FILE, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (f < 0) return 0;
  char buf[64];
  struct stat st;
  ssize_t n = fstat(f, &st) || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ? -1 : read(f, buf, sizeof buf - 1);
  close(f);
  long pid;
  long long t;
  if (n <= 0 || (buf[n] = 0, sscanf(buf, "%ld %lld", &pid, &t) != 2) || pid <= 0) return 0;
  long long now = start_time((pid_t)pid);
  return now == 0 || (now > 0 && now != t);
}

/* (see NOTE [stale private directories]) the private directories in place whose process is gone */
static void remove_stale_private(const char *place) {
  if (start_time(getpid()) <= 0) return; /* no /proc: nothing can be told */
  int pfd = open(place, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR *d = pfd < 0 ? NULL : fdopendir(pfd);
  if (!d) {
    if (pfd >= 0) close(pfd);
    return;
  }
  struct dirent *de;
  while ((de = readdir(d))) {
    struct stat st;
    if (strncmp(de->d_name, "cudadev-", 8) || strlen(de->d_name) != 14) continue;
    int fd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) continue;
    if (!fstat(fd, &st) && st.st_uid == geteuid() && (st.st_mode & 07777) == 0700 && owner_gone(fd)) {
      remove_below(fd, 0);
      unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR);
    } else
      close(fd);
  }
  closedir(d);
}

/* The owner file of the private directory dir (NOTE [stale private directories]). */
static void write_owner(const char *dir) {
  char path[PATH_MAX], line[64];
  long long t = start_time(getpid());
  if (t <= 0 || snprintf(path, sizeof path, "%s/" OWNER_FILE, dir) >= (int)sizeof path) return;
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return;
  int n = snprintf(line, sizeof line, "%ld %lld\n", (long)getpid(), t);
  if (write(fd, line, (size_t)n) != n) unlinkat(AT_FDCWD, path, 0);
  close(fd);
}

int cdv_cache_private_dir(char *out, size_t n, char *why, size_t nwhy) {
  pthread_mutex_lock(&private_lock);
  if (!private_dir[0] || private_pid != getpid()) {
    const char *t = getenv("TMPDIR"), *places[] = {t && *t ? t : "/tmp", "/tmp"};
    private_dir[0] = 0;
    for (int i = 0; i < 2 && !private_dir[0]; i++) {
      char tmpl[PATH_MAX];
      if (snprintf(tmpl, sizeof tmpl, "%s/cudadev-XXXXXX", places[i]) >= (int)sizeof tmpl || !mkdtemp(tmpl)) {
        snprintf(why, nwhy, "cannot create a private kernel cache directory in '%s': %s", places[i], strerror(errno));
        continue;
      }
      if (cdv_cache_trust_dir(tmpl, 0, why, nwhy) == 0) {
        snprintf(private_dir, sizeof private_dir, "%s", tmpl), private_pid = getpid();
        write_owner(tmpl);
        remove_stale_private(places[i]);
      } else
        rmdir(tmpl);
    }
  }
  int rc = private_dir[0] ? 0 : -1;
  if (rc == 0) snprintf(out, n, "%s", private_dir);
  pthread_mutex_unlock(&private_lock);
  return rc;
}

/* ---------------------------------------------------------------- sealed entries */
void cdv_cache_trailer(const char magic[8], const void *data, size_t n, unsigned char t[CDV_TRAILER_SIZE]) {
  cdv_sha256 s;
  unsigned char h[32];
  cdv_sha256_init(&s);
  cdv_sha256_add(&s, data, n);
  cdv_sha256_done(&s, h);
  memcpy(t, magic, 8);
  for (int i = 0; i < 8; i++) t[8 + i] = (unsigned char)((uint64_t)n >> (8 * i));
  memcpy(t + 16, h, 16);
}

/* The SHA-256 of the first len bytes of fd (from its start), read in pieces: an object of any size is
 * checked whole without holding it in memory. 0, or -1 with errno (EBADMSG when the file is shorter). */
static int hash_fd(int fd, uint64_t len, unsigned char h[32]) {
  static const size_t piece = 1 << 16;
  char *p = malloc(piece);
  if (!p) return errno = ENOMEM, -1;
  cdv_sha256 s;
  cdv_sha256_init(&s);
  uint64_t at = 0;
  int err = 0;
  while (!err && at < len) {
    ssize_t k = pread(fd, p, len - at < piece ? (size_t)(len - at) : piece, (off_t)at);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      err = k < 0 ? errno : EBADMSG;
      break;
    }
    cdv_sha256_add(&s, p, (size_t)k);
    at += (uint64_t)k;
  }
  free(p);
  if (err) return errno = err, -1;
  cdv_sha256_done(&s, h);
  return 0;
}

/* The trailer of the len bytes of fd (its start), built as cdv_cache_trailer builds it. */
static int trailer_fd(int fd, uint64_t len, const char magic[8], unsigned char t[CDV_TRAILER_SIZE]) {
  unsigned char h[32];
  if (hash_fd(fd, len, h)) return -1;
  memcpy(t, magic, 8);
  for (int i = 0; i < 8; i++) t[8 + i] = (unsigned char)(len >> (8 * i));
  memcpy(t + 16, h, 16);
  return 0;
}

int cdv_cache_check(const char *path, const char magic[8]) {
  int fd = cdv_open_file(path, CDV_OPEN_ENTRY);
  if (fd < 0) return -1;
  struct stat st;
  unsigned char want[CDV_TRAILER_SIZE], got[CDV_TRAILER_SIZE];
  int ok = fstat(fd, &st) == 0 && st.st_size > CDV_TRAILER_SIZE;
  uint64_t len = ok ? (uint64_t)st.st_size - CDV_TRAILER_SIZE : 0;
  ok = ok && pread(fd, got, CDV_TRAILER_SIZE, (off_t)len) == CDV_TRAILER_SIZE &&
       trailer_fd(fd, len, magic, want) == 0 && !memcmp(want, got, CDV_TRAILER_SIZE);
  int err = errno;
  close(fd);
  errno = ok ? 0 : err == ENOMEM ? ENOMEM : EBADMSG;
  return ok ? 0 : -1;
}

char *cdv_cache_read(const char *path, const char magic[8], size_t *n) {
  size_t len;
  int fd = cdv_open_file(path, CDV_OPEN_ENTRY);
  char *data = fd < 0 ? NULL : read_fd(fd, SIZE_MAX - 1, &len); /* sealed whole: no size limit */
  if (!data) return NULL;
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
static int finish(int fd, const char *tmp, const char *path, const unsigned char t[CDV_TRAILER_SIZE]) {
  int ok = fd >= 0 && write(fd, t, CDV_TRAILER_SIZE) == (ssize_t)CDV_TRAILER_SIZE;
  if (fd >= 0 && close(fd)) ok = 0;
  if (ok && rename(tmp, path) == 0) return 0;
  int err = errno;
  unlink(tmp);
  errno = err;
  return -1;
}

int cdv_cache_seal(const char *tmp, const char *path, const char magic[8]) {
  int fd = open(tmp, O_RDWR | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  struct stat st;
  unsigned char t[CDV_TRAILER_SIZE];
  int err = fd < 0                                           ? errno
            : fstat(fd, &st)                                 ? errno
            : !S_ISREG(st.st_mode)                           ? CDV_ENOTREG
            : trailer_fd(fd, (uint64_t)st.st_size, magic, t) ? errno
                                                             : 0; /* the whole object, whatever its size */
  if (err) {
    if (fd >= 0) close(fd);
    errno = err;
    return -1;
  }
  return finish(fd, tmp, path, t);
}

int cdv_cache_write(const char *dir, const char *path, const char magic[8], const void *data, size_t n) {
  char tmp[PATH_MAX];
  if (snprintf(tmp, sizeof tmp, "%s/.tmp-XXXXXX", dir) >= (int)sizeof tmp) {
    errno = ENAMETOOLONG;
    return -1;
  }
  int fd = mkostemp(tmp, O_CLOEXEC);
  if (fd < 0) return -1;
  unsigned char t[CDV_TRAILER_SIZE];
  cdv_cache_trailer(magic, data, n, t);
  for (size_t at = 0; at < n;) {
    ssize_t k = write(fd, (const char *)data + at, n - at);
    if (k < 0 && errno == EINTR) continue;
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
int cdv_header_index(const cdv_compile_req *req, const char *name) {
  for (int i = 0; i < req->nheaders; i++)
    if (req->header_names[i] && !strcmp(req->header_names[i], name)) return i;
  return -1;
}

static void scan_includes(cdv_incscan *is, const char *dir, const cdv_strlist *incs, int depth);

/* Read an on-disk file once: its path and text join the key, its includes are followed. */
static void scan_disk_file(cdv_incscan *is, const char *path, int depth) {
  for (int i = 0; i < is->seen.n; i++)
    if (!strcmp(is->seen.v[i], path)) return;
  if (is->seen.n >= MAX_SCANNED_FILES) {
    is->incomplete = 1;
    return;
  }
  size_t n;
  char *text = cdv_read_file(path, &n); /* never blocks: a FIFO put there meanwhile is not read */
  if (!text) {
    is->incomplete |= errno == ENOMEM || errno == CDV_ENOTREG;
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

/* Whether path names a file the compiler would take (a directory is passed over, as the compilers do); a
 * FIFO, a device or a socket is noted in is->special, and not read. */
static int found(cdv_incscan *is, const char *path) {
  struct stat st;
  if (stat(path, &st) != 0 || S_ISDIR(st.st_mode)) return 0;
  if (!S_ISREG(st.st_mode) && !is->special[0]) snprintf(is->special, sizeof is->special, "%s", path);
  return 1;
}

static void scan_includes(cdv_incscan *is, const char *dir, const cdv_strlist *incs, int depth) {
  if (depth > MAX_INCLUDE_DEPTH) {
    is->incomplete |= incs->n > 0;
    return;
  }
  for (int i = 0; i < incs->n; i++) {
    const char *name = incs->v[i] + 1;
    char path[PATH_MAX];
    if (cdv_header_index(is->req, name) >= 0) continue;
    if (name[0] == '/') {
      if (found(is, name)) scan_disk_file(is, name, depth);
      continue;
    }
    if (dir && incs->v[i][0] == 'q') {
      int len = snprintf(path, sizeof path, "%s/%s", dir, name);
      if (len < (int)sizeof path && found(is, path)) {
        scan_disk_file(is, path, depth);
        continue;
      }
    }
    for (int k = 0; k < is->idirs->n; k++) {
      int len = snprintf(path, sizeof path, "%s/%s", is->idirs->v[k], name);
      if (len < (int)sizeof path && found(is, path)) {
        scan_disk_file(is, path, depth);
        break;
      }
    }
  }
}

void cdv_include_scan(cdv_incscan *is, const char *dir, const cdv_strlist *incs) { scan_includes(is, dir, incs, 0); }

const char *cdv_opt_value(const char *const *opts, int nopts, int *i, const char *name, int joined) {
  const char *o = opts[*i];
  size_t n = strlen(name);
  if (strncmp(o, name, n) != 0) return NULL;
  if (o[n] == '=') return o + n + 1;
  if (o[n] && joined) return o + n + strspn(o + n, " "); /* "-D FOO" given as one option */
  if (o[n]) return NULL;
  if (*i + 1 >= nopts) return "";
  return opts[++*i];
}

/* ---------------------------------------------------------------- cd._selftest.cache_trust */
/* NOTE [cache trust] in this process (so memcheck sees it; spec/48 also runs every case end to end in child
 * processes): in dir (an existing directory of ours, by its real path), a directory made here is trusted; a
 * world-writable one, one under a world-writable one and a symbolic link are refused with their reasons; a
 * FIFO and a symbolic link at an entry's name are refused without blocking; an entry over a megabyte is
 * sealed and checked whole, and a change to its last byte is found; the private directory is one, trusted. */
static const char *trust_is(const char *dir, const char *leaf, int want, const char *reason, char *why, size_t n) {
  char path[PATH_MAX], text[PATH_MAX + 256];
  snprintf(path, sizeof path, "%s/%s", dir, leaf);
  int rc = cdv_cache_trust_dir(path, 0, why, n);
  snprintf(text, sizeof text, "the kernel cache directory '%s' is not used: %s", path, reason ? reason : "");
  if (rc != want || (reason && strcmp(why, text))) return "a cache directory was judged wrongly";
  return NULL;
}

static const char *entry_is(const char *path, int err) {
  size_t n;
  if (cdv_cache_check(path, "CDVTEST1") == 0 || errno != err) return "an entry was checked wrongly";
  char *data = cdv_cache_read(path, "CDVTEST1", &n);
  free(data);
  return data || errno != err ? "an entry was read wrongly" : NULL;
}

static const char *big_entry(const char *dir) {
  char tmp[PATH_MAX], path[PATH_MAX];
  snprintf(tmp, sizeof tmp, "%s/ok/big.tmp", dir);
  snprintf(path, sizeof path, "%s/ok/big", dir);
  size_t len = ((size_t)1 << 20) + 7;
  char *p = malloc(len);
  FILE *f = fopen(tmp, "wb");
  for (size_t i = 0; p && i < len; i++) p[i] = (char)(i * 131 + (i >> 16));
  int ok = p && f && fwrite(p, 1, len, f) == len;
  ok =
      f && fclose(f) == 0 && ok && cdv_cache_seal(tmp, path, "CDVTEST1") == 0 && cdv_cache_check(path, "CDVTEST1") == 0;
  size_t n = 0;
  char *back = ok ? cdv_cache_read(path, "CDVTEST1", &n) : NULL;
  ok = back && n == len && !memcmp(back, p, len);
  free(back);
  free(p);
  int fd = ok ? open(path, O_WRONLY | O_CLOEXEC) : -1;
  ok = fd >= 0 && pwrite(fd, "!", 1, (off_t)len - 1) == 1;
  if (fd >= 0) close(fd);
  if (!ok) return "an entry over a megabyte was not sealed and read back whole";
  return cdv_cache_check(path, "CDVTEST1") == -1 && errno == EBADMSG ? NULL : "a change to the last byte was not found";
}

int cdv_cache_trust_selftest(const char *dir, char *why, size_t n) {
  char p[PATH_MAX], q[PATH_MAX], w[PATH_MAX + 256], reason[PATH_MAX + 64];
  const char *bad = NULL;
#define AT(s) (snprintf(p, sizeof p, "%s/%s", dir, s), p)
  if (mkdir(AT("ww"), 0700) || chmod(p, 0777) || mkdir(AT("ww/sub"), 0700) || symlink("ok", AT("link")))
    bad = "cannot make the fixtures";
  if (!bad && (cdv_cache_trust_dir(AT("ok"), 1, w, sizeof w) != 0)) bad = "a directory made 0700 was not trusted";
  if (!bad) bad = trust_is(dir, "ww", -2, "it is writable by other users (mode 0777)", w, sizeof w);
  snprintf(reason, sizeof reason, "'%s/ww' above it is writable by other users (mode 0777)", dir);
  if (!bad) bad = trust_is(dir, "ww/sub", -2, reason, w, sizeof w);
  if (!bad) bad = trust_is(dir, "link", -2, "it is a symbolic link", w, sizeof w);
  if (!bad) bad = trust_is(dir, "absent", -1, NULL, w, sizeof w);
  if (!bad && (mkfifo(AT("ok/fifo"), 0600) || symlink("fifo", AT("ok/link")))) bad = "cannot make the fixtures";
  if (!bad) bad = entry_is(AT("ok/fifo"), CDV_ENOTREG);
  if (!bad) bad = entry_is(AT("ok/link"), CDV_ESYMLINK);
  if (!bad) bad = big_entry(dir);
  if (!bad && (cdv_cache_private_dir(p, sizeof p, w, sizeof w) || cdv_cache_private_dir(q, sizeof q, w, sizeof w) ||
               strcmp(p, q) || cdv_cache_trust_dir(p, 0, w, sizeof w)))
    bad = "the private directory is not one trusted directory";
#undef AT
  if (bad) snprintf(why, n, "%s (%s)", bad, w);
  return bad ? -1 : 0;
}
