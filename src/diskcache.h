/*
 * diskcache.h: what the two kernel caches on disk share. The cpu device caches its compiled objects
 * (NOTE [cpu kernel cache], cpu_compile.c), the CUDA backend its modules (NOTE [cuda kernel cache],
 * cuda_cache.c); both name an entry by a SHA-256 over everything that changes the output, keep it under one
 * directory, seal it with an integrity trailer, publish it by rename, and read the files a source includes
 * from disk into the key. diskcache.c holds those pieces.
 */
#ifndef CDV_DISKCACHE_H
#define CDV_DISKCACHE_H

#include <stddef.h>
#include <stdint.h>
#include "backend.h"

/* ---------------------------------------------------------------- SHA-256 (FIPS 180-4) */
typedef struct cdv_sha256 {
  uint32_t h[8];
  uint64_t len;
  unsigned char blk[64];
  size_t nblk;
} cdv_sha256;

void cdv_sha256_init(cdv_sha256 *s);
void cdv_sha256_add(cdv_sha256 *s, const void *data, size_t n);
void cdv_sha256_str(cdv_sha256 *s, const char *str); /* with its NUL: ("ab","c") and ("a","bc") differ */
void cdv_sha256_done(cdv_sha256 *s, unsigned char out[32]);

/* ---------------------------------------------------------------- lists of strings */
typedef struct cdv_strlist {
  char **v; /* NULL-terminated once anything was added */
  int n, cap, oom; /* oom: an addition failed (the list holds what came before it) */
} cdv_strlist;

void cdv_sl_addn(cdv_strlist *l, const char *s, size_t n);
void cdv_sl_add(cdv_strlist *l, const char *s);
void cdv_sl_free(cdv_strlist *l);

/* ---------------------------------------------------------------- files and the directory */
#define CDV_MAX_FILE_BYTES ((size_t)64 << 20)

/* NOTE [cache trust] (diskcache.c). Errors of cdv_open_file besides the system's, worded by cdv_cache_strerror. */
#define CDV_ENOTREG (-1001) /* not a regular file (a FIFO, a device, a directory) */
#define CDV_EOWNER (-1002) /* an entry owned by another user */
#define CDV_ESYMLINK (-1003) /* an entry that is a symbolic link */
#define CDV_OPEN_ENTRY 1 /* a cache entry: no symbolic link, owned by this user */
int cdv_open_file(const char *path, int how); /* read-only, never blocks; a regular file only; -1, errno */
const char *cdv_cache_strerror(int err);
char *cdv_read_file(const char *path, size_t *n); /* the bytes (+ a NUL), at most about 64 MiB; NULL, errno */
void cdv_remove_tree(const char *path); /* rm -r, not following symbolic links */
int cdv_mkdirs(const char *path); /* mkdir -p with mode 0700; -1 and errno */

/* $CUDADEV_CACHE_DIR, else $XDG_CACHE_HOME/cudadev, else $HOME/.cache/cudadev, then "/sub" when sub is not
 * NULL; "" when none of the three variables is set. Nothing is created. */
void cdv_cache_dir(const char *sub, char *out, size_t n);

/* 0 when dir (created 0700 first when create) may hold cache entries (NOTE [cache trust]); -1 when it cannot be
 * created or does not exist, -2 when it is refused (recorded for cdv_cache_refusal); why says which. */
int cdv_cache_trust_dir(const char *dir, int create, char *why, size_t n);
/* A fresh directory of this process, 0700 with a random name under $TMPDIR (else /tmp), removed at exit; the
 * same one for every call of the process. -1 with why. */
int cdv_cache_private_dir(char *out, size_t n, char *why, size_t nwhy);

/* ---------------------------------------------------------------- sealed entries */
/* An entry is its bytes followed by a 32-byte trailer: an 8-byte magic naming the kind of entry, the size of
 * the bytes (8 bytes, little-endian) and the first 16 bytes of their SHA-256. An entry whose trailer does not
 * match its bytes (truncated, modified, or written by something else) is not used. */
#define CDV_TRAILER_SIZE 32

void cdv_cache_trailer(const char magic[8], const void *data, size_t n, unsigned char t[CDV_TRAILER_SIZE]);
/* The bytes of the entry at path without the trailer (NUL-terminated), or NULL with errno: EBADMSG when the
 * file is there but not whole. The entry is opened as cdv_open_file(path, CDV_OPEN_ENTRY) and has no size limit. */
char *cdv_cache_read(const char *path, const char magic[8], size_t *n);
/* 0 when the entry at path is whole, checked in pieces (any size); -1 with errno as for cdv_cache_read. */
int cdv_cache_check(const char *path, const char magic[8]);
/* Append the trailer (over the whole file) to the file tmp (in the directory of path) and rename it to path; -1 and errno. */
int cdv_cache_seal(const char *tmp, const char *path, const char magic[8]);
/* Write data and its trailer to a new temporary file in dir and rename it to path (in dir); -1 and errno. */
int cdv_cache_write(const char *dir, const char *path, const char magic[8], const void *data, size_t n);

/* ---------------------------------------------------------------- files included from disk */
/* The #include directives of a file's text, each as 'q' (quoted) or 'a' (angled) followed by the name. The
 * one reader of them is the source scanner (scan.c, NOTE [source scanner]), which blanks comments and literals
 * first; `barriers` (an int *, or NULL) is set when the text uses barriers or warp intrinsics. */
int cdv_list_includes(void *barriers, const char *path, const char *text, size_t n, cdv_strlist *includes);

typedef struct cdv_incscan {
  const cdv_compile_req *req; /* includes that name one of its headers are not looked for on disk */
  const cdv_strlist *idirs; /* include directories, searched in order */
  cdv_sha256 *key; /* receives the path and the bytes of each file found */
  void *barriers; /* passed to cdv_list_includes for each file found */
  cdv_strlist seen; /* files already read (free it with cdv_sl_free) */
  int incomplete; /* set when a limit (files, depth, memory) left includes unread */
  char special[512]; /* the first include found that is neither a regular file nor a directory
                                  * (a FIFO or a device would block or never end the compiler), "" if none */
} cdv_incscan;

int cdv_header_index(const cdv_compile_req *req, const char *name); /* the request's header of that name, or -1 */
/* the directories NVRTC searches for the request before the toolkit's: its -I and --include-path options, then its
 * include_paths (cuda_cache.c) */
void cdv_cuda_include_dirs(const cdv_compile_req *req, cdv_strlist *dirs);

/* Resolve each include of incs (from a file in dir; NULL: look only on the include directories) as the
 * compilers do, a quoted one next to the including file first, and read each file found once into the key,
 * following its own includes; an absolute name is read where it says. Files that are on none of these paths
 * (system headers) are not looked at. */
void cdv_include_scan(cdv_incscan *is, const char *dir, const cdv_strlist *incs);
/* NOTE [nvrtc standard headers] (nvrtc_std.c): into key, the names of the standard headers NVRTC is given for req
 * (dirs: cdv_cuda_include_dirs), and through is the files on those directories that they include */
void cdv_nvrtc_std_key(const cdv_compile_req *req, const cdv_strlist *dirs, cdv_incscan *is, cdv_sha256 *key);

/* The value of option `name` in opts[*i]: "-Xval", "-X=val", or the next token (*i moves on to it); NULL if
 * opts[*i] is not that option. joined: "-Xval" is accepted. */
const char *cdv_opt_value(const char *const *opts, int nopts, int *i, const char *name, int joined);

#endif
