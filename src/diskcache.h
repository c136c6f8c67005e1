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
#include "cdv.h"

/* ---------------------------------------------------------------- SHA-256 (FIPS 180-4) */
typedef struct cdv_sha256 {
  uint32_t h[8];
  uint64_t len;
  unsigned char blk[64];
  size_t nblk;
} cdv_sha256;

void cdv_sha256_init(cdv_sha256 *s);
void cdv_sha256_add(cdv_sha256 *s, const void *data, size_t n);
void cdv_sha256_str(cdv_sha256 *s, const char *str);   /* with its NUL: ("ab","c") and ("a","bc") differ */
void cdv_sha256_done(cdv_sha256 *s, unsigned char out[32]);

/* ---------------------------------------------------------------- lists of strings */
typedef struct cdv_strlist {
  char **v;            /* NULL-terminated once anything was added */
  int n, cap, oom;     /* oom: an addition failed (the list holds what came before it) */
} cdv_strlist;

void cdv_sl_addn(cdv_strlist *l, const char *s, size_t n);
void cdv_sl_add(cdv_strlist *l, const char *s);
void cdv_sl_free(cdv_strlist *l);

/* ---------------------------------------------------------------- files and the directory */
#define CDV_MAX_FILE_BYTES ((size_t)64 << 20)

char *cdv_read_file(const char *path, size_t *n);   /* the bytes (+ a NUL), at most about 64 MiB; NULL, errno */
int cdv_mkdirs(const char *path);                   /* mkdir -p with mode 0700; -1 and errno */

/* $CUDADEV_CACHE_DIR, else $XDG_CACHE_HOME/cudadev, else $HOME/.cache/cudadev, then "/sub" when sub is not
 * NULL; "" when none of the three variables is set. Nothing is created. */
void cdv_cache_dir(const char *sub, char *out, size_t n);

/* ---------------------------------------------------------------- sealed entries */
/* An entry is its bytes followed by a 32-byte trailer: an 8-byte magic naming the kind of entry, the size of
 * the bytes (8 bytes, little-endian) and the first 16 bytes of their SHA-256. An entry whose trailer does not
 * match its bytes (truncated, modified, or written by something else) is not used. */
#define CDV_TRAILER_SIZE 32

void cdv_cache_trailer(const char magic[8], const void *data, size_t n, unsigned char t[CDV_TRAILER_SIZE]);
/* The bytes of the entry at path without the trailer (NUL-terminated), or NULL with errno: EBADMSG when the
 * file is there but not whole. */
char *cdv_cache_read(const char *path, const char magic[8], size_t *n);
/* Append the trailer to the file tmp (in the directory of path) and rename it to path; -1 and errno. */
int cdv_cache_seal(const char *tmp, const char *path, const char magic[8]);
/* Write data and its trailer to a new temporary file in dir and rename it to path (in dir); -1 and errno. */
int cdv_cache_write(const char *dir, const char *path, const char magic[8], const void *data, size_t n);

/* ---------------------------------------------------------------- files included from disk */
/* The #include directives of a file's text, each as 'q' (quoted) or 'a' (angled) followed by the name. The
 * one reader of them is the cpu compiler's source scanner (cpu_compile.c), which blanks comments and literals
 * first; `barriers` (an int *, or NULL) is set when the text uses barriers or warp intrinsics. */
int cdv_list_includes(void *barriers, const char *path, const char *text, size_t n, cdv_strlist *includes);

typedef struct cdv_incscan {
  const cdv_compile_req *req;    /* includes that name one of its headers are not looked for on disk */
  const cdv_strlist *idirs;      /* include directories, searched in order */
  cdv_sha256 *key;               /* receives the path and the bytes of each file found */
  void *barriers;                /* passed to cdv_list_includes for each file found */
  cdv_strlist seen;              /* files already read (free it with cdv_sl_free) */
  int incomplete;                /* set when a limit (files, depth, memory) left includes unread */
} cdv_incscan;

int cdv_header_index(const cdv_compile_req *req, const char *name);   /* the request's header of that name, or -1 */

/* Resolve each include of incs (from a file in dir; NULL: look only on the include directories) as the
 * compilers do, a quoted one next to the including file first, and read each file found once into the key,
 * following its own includes; an absolute name is read where it says. Files that are on none of these paths
 * (system headers) are not looked at. */
void cdv_include_scan(cdv_incscan *is, const char *dir, const cdv_strlist *incs);

/* The value of option `name` in opts[*i]: "-Xval", "-X=val", or the next token (*i moves on to it); NULL if
 * opts[*i] is not that option. joined: "-Xval" is accepted. */
const char *cdv_opt_value(const char *const *opts, int nopts, int *i, const char *name, int joined);

#endif
