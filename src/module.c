/*
 * module.c: cudadev.Module (compiled code loaded on a device), cd.compile, cd.load_module and the kernel cache.
 * cudadev.Kernel (one function of a Module, with its checked, allocation-free launch) is kernel.c; the record
 * both share is module.h.
 *
 * NOTE [kernel cache]: compiling is expensive (NVRTC: 50-90 ms for saxpy), so compiled and loaded
 * modules are kept in a process-wide table keyed by everything that changes the output plus the
 * device and its generation. A repeat compile finds the entry and neither recompiles nor reloads.
 * A compile that misses it asks the disk (NOTE [cuda kernel cache], cuda_cache.c) before NVRTC.
 *
 * NOTE [launch plan]: the parameter list comes from the source (sig.c), is laid out once per Kernel
 * into an argument buffer and a kernelParams array that points into it; a launch converts each Lua
 * argument straight into the buffer and calls the backend. Nothing is allocated per launch.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cdv.h"
#include "sig.h"
#include "module.h"

/* ------------------------------------------------------------ the in-memory cache */

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static cdv_module_t *cache;
static long memory_hits, memory_misses;

void cdv_module_ref(cdv_module_t *m) {
  pthread_mutex_lock(&cache_lock);
  m->refs++;
  pthread_mutex_unlock(&cache_lock);
}

/* The entries, the globals and the image (a compile that is tried again, and the last reference). */
static void clear_entries(cdv_module_t *m) {
  for (int i = 0; i < m->nentries; i++) free(m->entries[i]);
  for (int i = 0; i < m->nglobals; i++) free(m->globals[i]);
  free(m->entries);
  free(m->globals);
  m->entries = m->globals = NULL;
  m->nentries = m->nglobals = m->nauto = 0;
  cdv_image_free(&m->img);
}

void cdv_module_unref(cdv_module_t *m) {
  pthread_mutex_lock(&cache_lock);
  int last = --m->refs == 0;
  pthread_mutex_unlock(&cache_lock);
  if (!last) return;
  /* modules are never unloaded while a Kernel may run: the cache holds one reference until cleared,
   * and a cleared module is unloaded only when the last Module value goes */
  if (m->handle != NULL && m->dev && cdv_still_owned(m->dev, m->generation)) {
    cdv_err e;
    m->dev->be->module_unload(m->dev, m->handle, &e);
  }
  clear_entries(m);
  if (m->have_sigs) cdv_sigs_free(&m->sigs);
  free(m);
}

/* FNV-1a over every input, twice with different bases: a 128-bit key (collisions are not a concern
 * for a cache of a process's own compiles). */
typedef struct hasher {
  uint64_t a, b;
} hasher;

static void hash_bytes(hasher *h, const void *p, size_t n) {
  const unsigned char *s = p;
  for (size_t i = 0; i < n; i++) {
    h->a = (h->a ^ s[i]) * 0x100000001b3ULL;
    h->b = (h->b ^ s[i]) * 0x100000001b3ULL + 0x9e3779b97f4a7c15ULL;
  }
  unsigned char sep = 0xff; /* separates fields so "ab"+"c" differs from "a"+"bc" */
  h->a = (h->a ^ sep) * 0x100000001b3ULL;
  h->b = (h->b ^ n) * 0x100000001b3ULL;
}

static void hash_str(hasher *h, const char *s) { hash_bytes(h, s ? s : "", s ? strlen(s) : 0); }

/* ------------------------------------------------------------ compile options */

static const char *const compile_opts[] = {"name",   "options", "headers", "include_paths", "name_expressions",
                                           "device", "arch",    "target",  "timeout",       "cpu_check",
                                           NULL};

typedef struct strlist {
  int n;
  const char **v;
} strlist;

/* A list of strings at opts[k]; leaves the table (which anchors the strings) and the list on the stack. */
static strlist check_strlist(lua_State *L, int o, const char *k) {
  strlist l = {0, NULL};
  int t = cdv_opt_field(L, o, k);
  if (t != LUA_TNIL && t != LUA_TTABLE)
    luaL_error(L, "bad option '%s' to 'compile' (table of strings expected, got %s)", k, cdv_typename(L, -1));
  int tab = lua_gettop(L);
  l.n = t == LUA_TTABLE ? (int)lua_rawlen(L, tab) : 0;
  l.v = lua_newuserdatauv(L, sizeof(char *) * (size_t)(l.n + 1), 0);
  for (int i = 0; i < l.n; i++) {
    if (lua_rawgeti(L, tab, i + 1) != LUA_TSTRING)
      luaL_error(L, "bad option '%s' to 'compile' (item %d: string expected, got %s)", k, i + 1, cdv_typename(L, -1));
    if (cdv_has_nul(L, -1)) /* NOTE [C strings] */
      luaL_error(L, "bad option '%s' to 'compile' (item %d contains a NUL byte)", k, i + 1);
    l.v[i] = lua_tostring(L, -1);
    lua_pop(L, 1);
  }
  return l;
}

/* headers {["name.h"] = text} into parallel name/text lists (userdata left on the stack) */
static int check_headers(lua_State *L, int o, const char ***names, const char ***texts) {
  int t = cdv_opt_field(L, o, "headers"), n = 0;
  if (t != LUA_TNIL && t != LUA_TTABLE)
    luaL_error(L, "bad option 'headers' to 'compile' (table expected, got %s)", cdv_typename(L, -1));
  int tab = lua_gettop(L);
  if (t == LUA_TTABLE) {
    lua_pushnil(L);
    while (lua_next(L, tab)) {
      if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING)
        luaL_error(L, "bad option 'headers' to 'compile' (expected {[\"name.h\"] = source text})");
      if (cdv_has_nul(L, -2) || cdv_has_nul(L, -1)) /* NOTE [C strings] */
        luaL_error(L, "bad option 'headers' to 'compile' (the %s of header '%s' contains a NUL byte)",
                   cdv_has_nul(L, -2) ? "name" : "text", lua_tostring(L, -2));
      n++;
      lua_pop(L, 1);
    }
  }
  const char **v = lua_newuserdatauv(L, sizeof(char *) * (size_t)(2 * n + 1), 0);
  int i = 0;
  if (t == LUA_TTABLE) {
    lua_pushnil(L);
    while (lua_next(L, tab)) { /* sorted by name as they come: table order differs between processes, */
      int j = i++; /* and the cache keys (in memory, cpu and CUDA on disk) must not */
      for (; j > 0 && strcmp(v[j - 1], lua_tostring(L, -2)) > 0; j--) {
        v[j] = v[j - 1];
        v[n + j] = v[n + j - 1];
      }
      v[j] = lua_tostring(L, -2);
      v[n + j] = lua_tostring(L, -1);
      lua_pop(L, 1);
    }
  }
  *names = v;
  *texts = v + n;
  return n;
}

static int parse_arch(lua_State *L, int o) {
  int t = cdv_opt_field(L, o, "arch"), arch = 0;
  if (t == LUA_TNUMBER)
    arch = (int)lua_tointeger(L, -1);
  else if (t == LUA_TSTRING) {
    const char *s = lua_tostring(L, -1);
    if (sscanf(s, "sm_%d", &arch) != 1 && sscanf(s, "compute_%d", &arch) != 1) arch = -1;
  } else if (t != LUA_TNIL)
    arch = -1;
  if (arch < 0 || (t != LUA_TNIL && (arch < 10 || arch > 1000)))
    luaL_error(L, "bad option 'arch' to 'compile' (expected \"sm_XY\" or an integer such as 90, got %s)",
               cdv_value_text(L, -1));
  lua_pop(L, 1);
  return arch;
}

/* cpu_check: 1 "memory", -1 "none", 0 not given (NOTE [checked memory] in cpu_checked.c; GPUs ignore it) */
static int parse_cpu_check(lua_State *L, int o) {
  int t = cdv_opt_field(L, o, "cpu_check"), check = 0;
  const char *s = t == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
  if (s && !strcmp(s, "memory"))
    check = 1;
  else if (s && !strcmp(s, "none"))
    check = -1;
  else if (t != LUA_TNIL)
    luaL_error(L, "bad option 'cpu_check' to 'compile' (expected \"memory\" or \"none\", got %s)",
               cdv_value_text(L, -1));
  lua_pop(L, 1);
  return check;
}

static void parse_target(lua_State *L, int o, int *ptx, int *cubin) {
  *ptx = *cubin = 0;
  int t = cdv_opt_field(L, o, "target");
  int top = lua_gettop(L);
  int n = t == LUA_TTABLE ? (int)lua_rawlen(L, top) : 1;
  for (int i = 1; i <= n; i++) {
    if (t == LUA_TTABLE)
      lua_rawgeti(L, top, i);
    else
      lua_pushvalue(L, top);
    const char *s = lua_tostring(L, -1);
    if (t == LUA_TNIL)
      *cubin = *ptx = -1; /* default: cubin when supported, else PTX */
    else if (s && strcmp(s, "ptx") == 0)
      *ptx = 1;
    else if (s && strcmp(s, "cubin") == 0)
      *cubin = 1;
    else
      luaL_error(L, "bad option 'target' to 'compile' (expected \"cubin\", \"ptx\" or both in a table)");
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
}

/* ------------------------------------------------------------ Module values */

typedef struct module_ud {
  uint64_t magic;
  cdv_module_t *m;
  double timeout; /* cd.compile's timeout for its kernels' launches, -1 when not given (NOTE [launch limits]) */
} module_ud; /* CDV_MODULE_MAGIC (NOTE [magic]) */

static module_ud *check_module_ud(lua_State *L, int arg) {
  return cdv_check_udata(L, arg, CDV_MODULE, CDV_MODULE_MAGIC, sizeof(module_ud));
}

static cdv_module_t *check_module(lua_State *L, int arg) {
  module_ud *u = check_module_ud(L, arg);
  if (u->m == NULL) luaL_argerror(L, arg, "attempt to use a released module");
  if (u->m->dev && u->m->generation != u->m->dev->generation) luaL_argerror(L, arg, "stale Module: device was reset");
  return u->m;
}

static module_ud *push_module(lua_State *L, cdv_module_t *m) {
  module_ud *u = lua_newuserdatauv(L, sizeof *u, 1);
  u->magic = CDV_MODULE_MAGIC;
  u->m = NULL;
  u->timeout = -1;
  luaL_setmetatable(L, CDV_MODULE);
  cdv_track_late(L, -1); /* NOTE [objects made in finalizers] */
  lua_newtable(L); /* Kernel values by name: one launch plan per kernel */
  lua_setiuservalue(L, -2, 1);
  cdv_module_ref(m);
  u->m = m;
  cdv_live_add(CDV_LIVE_MODULE, 1);
  return u;
}

static cdv_module_t *cache_find(const uint64_t key[2]) {
  pthread_mutex_lock(&cache_lock);
  cdv_module_t *m = cache;
  while (m != NULL && (m->key[0] != key[0] || m->key[1] != key[1] || (m->dev && m->generation != m->dev->generation)))
    m = m->next;
  if (m != NULL)
    memory_hits++;
  else
    memory_misses++;
  pthread_mutex_unlock(&cache_lock);
  return m;
}

static cdv_module_t *cache_insert(cdv_module_t *m) {
  pthread_mutex_lock(&cache_lock);
  m->refs++;
  m->next = cache;
  cache = m;
  pthread_mutex_unlock(&cache_lock);
  return m;
}

/* NOTE [module globals]: a Module's globals (m:get_global, m.globals) are its namespace-scope __constant__,
 * __device__ and __managed__ variables, found by the source scanner (sig.c) as kernels are, and the name
 * expressions that name one of them (a variable template's instance, "table<float>"). The scanner is the one
 * source that serves both devices before anything is compiled: NVRTC lists no variables (only lowered names
 * of the expressions it is given), and the cpu device's object hides every symbol but its trampolines. Each
 * global is an entry of the compile with is_expr 2, after the kernels: NVRTC gets "&name" as a name
 * expression, which also keeps an unused variable in the module, and its lowered name is what
 * cuModuleGetGlobal looks up; the cpu device compiles an accessor for it that returns its address and size
 * (cpu_compile.c). The view get_global returns borrows that memory, and its block holds a reference to the
 * module (module_ref), so the code and the variable stay loaded while any view of it (a slice too) lives. */

/* A name expression without its leading '&', "::" and blanks: how a global is named. */
static const char *expr_name(const char *e) {
  while (*e == '&' || *e == ' ') e++;
  if (e[0] == ':' && e[1] == ':') e += 2;
  return e;
}

/* Does the name expression e name one of the source's globals (or an instance of a variable template)? */
static int names_global(const cdv_sigs *sg, const char *e) {
  e = expr_name(e);
  size_t base = strcspn(e, "< ");
  for (int i = 0; i < sg->nglobals; i++) {
    const cdv_global *g = &sg->globals[i];
    if (g->is_template ? strlen(g->name) == base && strncmp(g->name, e, base) == 0 : strcmp(g->name, e) == 0) return 1;
  }
  return 0;
}

/* NOTE [no abort]: library code never aborts the host's process. An allocation that fails here returns -1;
 * the caller gives back what it made and raises "not enough memory", as cudadev.c and array.c do. */
static int add_name(char ***v, int *n, const char *s) {
  for (int j = 0; j < *n; j++)
    if (strcmp((*v)[j], s) == 0) return 0;
  if (((*v)[*n] = strdup(s)) == NULL) return -1;
  (*n)++;
  return 0;
}

/* Entries: every non-template kernel the parser found (extern "C" ones by symbol, others lowered as a
 * name expression), then the name expressions asked for; globals (NOTE [module globals]) apart, those the
 * scanner found first unless with_auto is 0. */
static int make_entries(cdv_module_t *m, const strlist *exprs, int with_auto, unsigned char **is_expr) {
  int cap = m->sigs.n + exprs->n, gcap = m->sigs.nglobals + exprs->n;
  m->entries = calloc((size_t)cap + 1, sizeof *m->entries);
  m->globals = calloc((size_t)gcap + 1, sizeof *m->globals);
  *is_expr = calloc((size_t)(cap + gcap) + 1, 1);
  if (m->entries == NULL || m->globals == NULL || *is_expr == NULL) return -1; /* NOTE [no abort] */
  for (int i = 0; m->have_sigs && i < m->sigs.n; i++)
    if (m->sigs.v[i].ntparams == 0) {
      (*is_expr)[m->nentries] = !m->sigs.v[i].extern_c;
      if ((m->entries[m->nentries] = strdup(m->sigs.v[i].name)) == NULL) return -1;
      m->nentries++;
    }
  for (int i = 0; with_auto && m->have_sigs && i < m->sigs.nglobals; i++)
    if (!m->sigs.globals[i].is_template && add_name(&m->globals, &m->nglobals, m->sigs.globals[i].name) != 0) return -1;
  m->nauto = m->nglobals;
  for (int i = 0; i < exprs->n; i++) {
    if (m->have_sigs && names_global(&m->sigs, exprs->v[i])) {
      if (add_name(&m->globals, &m->nglobals, expr_name(exprs->v[i])) != 0) return -1;
      continue;
    }
    int n = m->nentries;
    if (add_name(&m->entries, &m->nentries, exprs->v[i]) != 0) return -1;
    if (m->nentries > n) (*is_expr)[n] = 1;
  }
  for (int i = 0; i < m->nglobals; i++) (*is_expr)[m->nentries + i] = 2;
  return 0;
}

static void raise_compile_error(lua_State *L, cdv_device *d, cdv_err *e, const strlist *opts, const char *name) {
  cdv_push_error(L, d, e);
  lua_createtable(L, opts->n, 0);
  for (int i = 0; i < opts->n; i++) {
    lua_pushstring(L, opts->v[i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, "options");
  lua_pushvalue(L, 1); /* the source and its file name, so a REPL can show the lines the log cites */
  lua_setfield(L, -2, "source");
  lua_pushstring(L, name);
  lua_setfield(L, -2, "source_name");
  lua_error(L);
}

/* ------------------------------------------------------------ progress on long compiles */

/* NOTE [compile notice]: a cold cpu compile runs the host C++ compiler for a second or more, with nothing printed,
 * which looks like a hang. With CUDADEV_VERBOSE=1 (luacuda sets it unless it is set), a compile still running after
 * half a second prints one line on stderr, and one more when it ends. A thread waits for the deadline, so a
 * compile that finishes in time (a disk-cache hit) prints nothing and costs one thread start. */
typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done, printed;
  struct timespec t0;
  char what[200];
} notice;

static double since(const struct timespec *t0) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) * 1e-9;
}

static void *notice_wait(void *arg) {
  notice *n = arg;
  struct timespec at;
  clock_gettime(CLOCK_REALTIME, &at);
  at.tv_nsec += 500000000L;
  if (at.tv_nsec >= 1000000000L) at.tv_sec++, at.tv_nsec -= 1000000000L;
  pthread_mutex_lock(&n->mu);
  while (!n->done && pthread_cond_timedwait(&n->cv, &n->mu, &at) == 0) {}
  if (!n->done) {
    fprintf(stderr, "cudadev: compiling %s (the first time only: the result is cached) ...\n", n->what);
    n->printed = 1;
  }
  pthread_mutex_unlock(&n->mu);
  return NULL;
}

static int verbose(void) {
  const char *v = getenv("CUDADEV_VERBOSE");
  return v != NULL && *v != '\0' && strcmp(v, "0") != 0;
}

/* be->compile with NOTE [compile notice] */
static int compile_noticed(const cdv_backend *be, cdv_device *d, cdv_compile_req *req, cdv_image *img, cdv_err *e) {
  notice n = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
  pthread_t t;
  int timed = verbose();
  if (timed) {
    char target[16];
    snprintf(target, sizeof target, "sm_%d", req->arch);
    snprintf(n.what, sizeof n.what, "'%s' for %s%s", req->name ? req->name : "kernel.cu", d ? d->alias : target,
             be->native_code ? " with the host C++ compiler" : "");
    clock_gettime(CLOCK_MONOTONIC, &n.t0);
    timed = pthread_create(&t, NULL, notice_wait, &n) == 0;
  }
  int rc = be->compile(d, req, img, e);
  if (!timed) return rc;
  pthread_mutex_lock(&n.mu);
  n.done = 1;
  pthread_cond_signal(&n.cv);
  pthread_mutex_unlock(&n.mu);
  pthread_join(t, NULL);
  if (n.printed)
    fprintf(stderr, "cudadev: %s %s in %.1f s\n", rc == 0 ? "compiled" : "failed to compile", n.what, since(&n.t0));
  return rc;
}

/* The module's entries (make_entries) into req, then the backend's compile. 0, -1 with *e, or 1 with the reason
 * in msg when the target asked for cannot be had. */
static int compile_entries(const cdv_backend *be, cdv_device *d, cdv_module_t *m, cdv_compile_req *req,
                           const strlist *exprs, int with_auto, cdv_err *e, char *msg, size_t n) {
  unsigned char *is_expr = NULL;
  const char **all = NULL;
  if (make_entries(m, exprs, with_auto, &is_expr) != 0 ||
      (all = malloc(sizeof *all * (size_t)(m->nentries + m->nglobals + 1))) == NULL) { /* kernels, then globals */
    free(is_expr); /* (see NOTE [no abort]) the entries made so far go with m */
    return cdv_fail(e, "compile", 0, "", "not enough memory");
  }
  for (int i = 0; i < m->nentries; i++) all[i] = m->entries[i];
  for (int i = 0; i < m->nglobals; i++) all[m->nentries + i] = m->globals[i];
  req->nentries = m->nentries + m->nglobals;
  req->entries = all;
  req->is_expr = is_expr;
  int rc = compile_noticed(be, d, req, &m->img, e); /* (see NOTE [cuda kernel cache]) the backend's cache first */
  if (rc == -2) { /* the request asks for what the backend cannot give: a plain error, not a compile's */
    snprintf(msg, n, "%s", e->message);
    rc = 1;
  }
  req->entries = NULL;
  req->is_expr = NULL;
  free(is_expr);
  free(all);
  return rc;
}

/* cd.compile(source [, opts]) -> Module (NOTE [kernel cache]) */
static int l_compile(lua_State *L) {
  size_t srclen;
  const char *src = luaL_checklstring(L, 1, &srclen);
  if (memchr(src, '\0', srclen) != NULL) return luaL_argerror(L, 1, "source contains a NUL byte");
  cdv_check_options(L, 2, compile_opts, "compile");
  const char *name = "kernel.cu";
  if (cdv_opt_field(L, 2, "name") != LUA_TNIL) {
    if (lua_type(L, -1) != LUA_TSTRING)
      cdv_opt_error(L, "name", "compile", lua_pushfstring(L, "string expected, got %s", cdv_typename(L, -1)));
    if (cdv_has_nul(L, -1)) cdv_opt_error(L, "name", "compile", "contains a NUL byte"); /* NOTE [C strings] */
    name = lua_tostring(L, -1);
  }
  strlist opts = check_strlist(L, 2, "options"), incs = check_strlist(L, 2, "include_paths");
  cdv_check_compile_options(L, opts.n, opts.v); /* (see NOTE [state limits]) the embedding host's allow-list */
  strlist exprs = check_strlist(L, 2, "name_expressions");
  const char **hnames, **htexts;
  int nh = check_headers(L, 2, &hnames, &htexts);
  int arch = parse_arch(L, 2), want_ptx, want_cubin, given_dev = 0;
  parse_target(L, 2, &want_ptx, &want_cubin);
  int check = parse_cpu_check(L, 2);
  cdv_device *d = cdv_opt_device_field(L, 2, "compile");
  given_dev = d != NULL;
  double timeout = -1; /* NOTE [launch limits] */
  if (cdv_opt_field(L, 2, "timeout") != LUA_TNIL && (timeout = cdv_seconds(L, -1, NULL)) < 0)
    cdv_opt_error(L, "timeout", "compile", lua_tostring(L, -1));
  if (d == NULL) d = cdv_default_device(L);
  if (arch && d->be->native_code && given_dev) /* NOTE [backend properties] */
    return luaL_error(L, "bad option 'arch' to 'compile' (arch targets CUDA devices; leave it out to compile for %s)",
                      d->alias);
  if (arch && d->be->native_code) d = NULL; /* compile only: there is no GPU to load it on */
  if (d != NULL && d->be->native_code && cdv_get_state(L)->sandbox) /* a cpu kernel is native host code */
    return luaL_error(L, "compiling kernels for the cpu device is not available in this sandbox");
  if (!arch && d != NULL) arch = d->arch;
  strlist nvopts = opts; /* what NVRTC gets */
  if (cdv_get_state(L)->sandbox) { /* (see NOTE [sandboxed includes]) before any cache is asked */
    cdv_compile_req chk = {src,    srclen, name, opts.n, opts.v, nh, hnames, htexts, incs.n,
                           incs.v, 0,      NULL, NULL,   arch,   0,  0,      check};
    cdv_check_includes(L, &chk);
    nvopts.v = lua_newuserdatauv(L, sizeof(char *) * (size_t)(opts.n + 2), 0);
    memcpy(nvopts.v, opts.v, sizeof(char *) * (size_t)opts.n);
    nvopts.v[nvopts.n++] = "--no-source-include";
    nvopts.v[nvopts.n] = NULL;
  }
  const cdv_backend *be = d != NULL ? d->be : cdv_arch_backend(); /* compile only, for an sm_XX */
  if (d != NULL) cdv_device_use(L, d);

  hasher h = {0xcbf29ce484222325ULL, 0x84222325cbf29ce4ULL};
  hash_str(&h, be->kind);
  hash_bytes(&h, src, srclen);
  hash_str(&h, name);
  for (int i = 0; i < nvopts.n; i++) hash_str(&h, nvopts.v[i]);
  hash_str(&h, "\1");
  for (int i = 0; i < incs.n; i++) hash_str(&h, incs.v[i]);
  hash_str(&h, "\1");
  for (int i = 0; i < nh; i++) {
    hash_str(&h, hnames[i]);
    hash_str(&h, htexts[i]);
  }
  hash_str(&h, "\1");
  for (int i = 0; i < exprs.n; i++) hash_str(&h, exprs.v[i]);
  hash_str(&h, getenv("CUDADEV_CPU_CHECK")); /* read by the cpu compile: NOTE [checked memory] */
  int tail[6] = {arch, want_ptx, want_cubin, d ? d->index : -1, d ? (int)d->generation : 0, check};
  hash_bytes(&h, tail, sizeof tail);
  uint64_t key[2] = {h.a, h.b};
  cdv_module_t *m = cache_find(key);
  if (m != NULL) {
    push_module(L, m)->timeout = timeout; /* a Module value's own: the cached record is shared */
    return 1;
  }

  m = calloc(1, sizeof *m);
  if (m == NULL) return luaL_error(L, "not enough memory");
  m->have_sigs = cdv_sig_parse(src, srclen, &m->sigs, m->sig_error, sizeof m->sig_error) == 0;
  cdv_compile_req req = {src,    srclen, name, nvopts.n, nvopts.v, nh,       hnames,     htexts, incs.n,
                         incs.v, 0,      NULL, NULL,     arch,     want_ptx, want_cubin, check};
  cdv_err e;
  char bad_target[sizeof e.message];
  memset(&e, 0, sizeof e);
  int rc = compile_entries(be, d, m, &req, &exprs, 1, &e, bad_target, sizeof bad_target);
  if (rc < 0 && m->nauto > 0 && e.log != NULL &&
      (strstr(e.log, "__nv_name_map") != NULL || strstr(e.log, "<cudadev entries>") != NULL)) {
    /* (see NOTE [module globals]) a variable the scanner found in a branch the preprocessor drops (it reads both
     * branches of an #ifdef) cannot be named: compile again with only the globals named by expressions */
    free(e.log);
    memset(&e, 0, sizeof e);
    clear_entries(m);
    rc = compile_entries(be, d, m, &req, &exprs, 0, &e, bad_target, sizeof bad_target);
  }
  if (rc > 0) {
    m->refs = 1;
    cdv_module_unref(m);
    return luaL_error(L, "%s", bad_target);
  }
  if (rc == 0 && d != NULL) rc = be->module_load(d, &m->img, &m->handle, &e);
  if (rc != 0) {
    m->dev = NULL;
    m->refs = 1;
    cdv_module_unref(m);
    raise_compile_error(L, d, &e, &opts, name);
  }
  memcpy(m->key, key, sizeof key);
  m->dev = d;
  m->generation = d ? d->generation : 0;
  m->arch = arch;
  push_module(L, cache_insert(m))->timeout = timeout;
  return 1;
}

static int module_gc(lua_State *L) { /* __gc and __close */
  module_ud *u = cdv_test_magic(L, 1, sizeof *u, CDV_MODULE_MAGIC);
  if (u == NULL) return 0; /* __gc never raises (NOTE [magic]) */
  if (u->m != NULL) {
    cdv_module_unref(u->m);
    cdv_live_add(CDV_LIVE_MODULE, -1);
  }
  u->m = NULL;
  return 0;
}

/* m:get(name) -> Kernel; one Kernel (and launch plan) per name per Module value */
static int module_get(lua_State *L) {
  cdv_module_t *m = check_module(L, 1);
  const char *name = cdv_check_cstring(L, 2, "kernel name"); /* NOTE [C strings] */
  lua_getiuservalue(L, 1, 1);
  if (lua_getfield(L, -1, name) != LUA_TNIL) return 1;
  lua_pop(L, 1);
  cdv_push_kernel(L, 1, m, name, check_module_ud(L, 1)->timeout);
  lua_pushvalue(L, -1);
  lua_setfield(L, -3, name);
  return 1;
}

/* "a, b, c" (pushed), or "none" for an empty list: the names an error offers instead */
const char *cdv_push_joined(lua_State *L, int n, char **v) {
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (int i = 0; i < n; i++) {
    if (i) luaL_addstring(&b, ", ");
    luaL_addstring(&b, v[i]);
  }
  luaL_pushresult(&b);
  return n ? lua_tostring(L, -1) : "none";
}

/* A global view's block gives its module reference back (NOTE [module globals]): after the work queued on the
 * view is done, as block_unref waits for it before calling this. */
static void global_release(void *ud, void *ptr) {
  (void)ptr;
  cdv_module_unref(ud);
}

int cdv_module_no_device(lua_State *L, cdv_module_t *m) {
  return luaL_error(L, "module was compiled for sm_%d with no device to run on (compile with device = \"cuda:N\")",
                    m->arch);
}

/* m:get_global(name [, dtype [, shape]]) -> an Array viewing a __constant__ / __device__ variable, through
 * cuModuleGetGlobal on CUDA and the object's accessor on cpu (NOTE [module globals]). */
static int module_get_global(lua_State *L) {
  cdv_module_t *m = check_module(L, 1);
  const char *name = luaL_checkstring(L, 2), *key = expr_name(name);
  cdv_dtype t = cdv_check_dtype(L, 3, CDV_U8);
  int64_t shape[CDV_MAXDIM];
  int ndim = lua_isnoneornil(L, 4) ? -1 : cdv_check_shape(L, 4, shape, t), idx = -1;
  for (int i = 0; i < m->nglobals && idx < 0; i++)
    if (strcmp(m->globals[i], key) == 0) idx = i;
  int no_source = !m->have_sigs && m->sig_error[0] == '\0' && m->nglobals == 0; /* cd.load_module: ask the driver */
  if (idx < 0 && !no_source) {
    return luaL_error(L, "module has no global '%s' (globals: %s)", name, cdv_push_joined(L, m->nglobals, m->globals));
  }
  if (m->dev == NULL) return cdv_module_no_device(L, m);
  int at = m->nentries + idx;
  const char *symbol = idx >= 0 && m->img.lowered && at < m->img.nentries ? m->img.lowered[at] : key;
  void *ptr = NULL;
  size_t bytes = 0, item = cdv_dtypes[t].size;
  cdv_err e;
  cdv_device_use(L, m->dev);
  if (m->dev->be->module_global == NULL) return luaL_error(L, "the %s device has no module globals", m->dev->be->kind);
  if (m->dev->be->module_global(m->dev, m->handle, symbol, &ptr, &bytes, &e) != 0) return cdv_raise(L, m->dev, &e);
  if (ndim < 0) {
    if (bytes % item != 0)
      return luaL_argerror(L, 3,
                           lua_pushfstring(L,
                                           "'%s' is %I bytes, not a whole number of %s (%d bytes each); "
                                           "give a shape",
                                           key, (lua_Integer)bytes, cdv_dtypes[t].name, (int)item));
    ndim = 1;
    shape[0] = (int64_t)(bytes / item);
  } else {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    if ((uint64_t)n * item > bytes)
      return luaL_argerror(
          L, 4,
          lua_pushfstring(L, "a shape of %I %s is %I bytes, more than the %I bytes of '%s'", (lua_Integer)n,
                          cdv_dtypes[t].name, (lua_Integer)((uint64_t)n * item), (lua_Integer)bytes, key));
  }
  cdv_module_ref(m);
  cdv_push_host_array(L, m->dev, t, ndim, shape, ptr, global_release, m);
  return 1;
}

static void push_lstring(lua_State *L, const char *p, size_t n) {
  if (p != NULL)
    lua_pushlstring(L, p, n);
  else
    lua_pushnil(L);
}

static int module_index(lua_State *L) {
  cdv_module_t *m = check_module(L, 1);
  const char *k = cdv_check_cstring(L, 2, "kernel name"); /* NOTE [C strings] */
  if (cdv_push_method(L)) return 1;
  if (strcmp(k, "ptx") == 0)
    push_lstring(L, m->img.ptx, m->img.ptx_len);
  else if (strcmp(k, "cubin") == 0)
    push_lstring(L, m->img.cubin, m->img.cubin_len);
  else if (strcmp(k, "log") == 0)
    lua_pushstring(L, m->img.log ? m->img.log : "");
  else if (strcmp(k, "arch") == 0)
    lua_pushinteger(L, m->arch);
  else if (strcmp(k, "device") == 0) {
    if (m->dev)
      cdv_push_device(L, m->dev);
    else
      lua_pushnil(L);
  } else if (strcmp(k, "kernels") == 0 || strcmp(k, "globals") == 0) {
    int g = k[0] == 'g', n = g ? m->nglobals : m->nentries;
    char **v = g ? m->globals : m->entries;
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
      lua_pushstring(L, v[i]);
      lua_rawseti(L, -2, i + 1);
    }
  } else {
    lua_settop(L, 2);
    return module_get(L);
  }
  return 1;
}

static int module_tostring(lua_State *L) {
  module_ud *u = check_module_ud(L, 1);
  if (u->m == NULL)
    lua_pushliteral(L, "Module(released)");
  else {
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    lua_pushfstring(L, "Module(%s", u->m->dev ? u->m->dev->alias : "not loaded");
    luaL_addvalue(&b);
    if (u->m->arch) {
      lua_pushfstring(L, " sm_%d %s", u->m->arch, u->m->img.cubin ? "cubin" : u->m->img.path ? "host" : "ptx");
      luaL_addvalue(&b);
    }
    luaL_addstring(&b, ": ");
    for (int i = 0; i < u->m->nentries; i++) {
      if (i) luaL_addstring(&b, ", ");
      luaL_addstring(&b, u->m->entries[i]);
    }
    luaL_addchar(&b, ')');
    luaL_pushresult(&b);
  }
  return 1;
}

/* PTX's .entry names: what a module loaded from PTX offers; -1 when out of memory (NOTE [no abort]) */
static int ptx_entries(cdv_module_t *m) {
  const char *p = m->img.ptx;
  int cap = 0;
  while (p && (p = strstr(p, ".entry")) != NULL) {
    p += 6;
    while (*p == ' ' || *p == '\t') p++;
    size_t n = strcspn(p, " \t\r\n(");
    if (n == 0) continue;
    if (m->nentries == cap) {
      cap = cap ? 2 * cap : 8;
      char **v = realloc(m->entries, sizeof *v * (size_t)cap);
      if (v == NULL) return -1;
      m->entries = v;
    }
    if ((m->entries[m->nentries] = strndup(p, n)) == NULL) return -1;
    m->nentries++;
  }
  return 0;
}

/* PTX's module-scope variables, ".global" and ".const" (".visible" or ".weak" before them, not ".extern"), by
 * their lowered names: the globals of a module loaded from PTX (NOTE [module globals]) */
static int ptx_globals(cdv_module_t *m) {
  int cap = 0;
  for (const char *p = m->img.ptx; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
    const char *q = p;
    while (strncmp(q, ".visible ", 9) == 0 || strncmp(q, ".weak ", 6) == 0) q = strchr(q, ' ') + 1;
    if (strncmp(q, ".global ", 8) != 0 && strncmp(q, ".const ", 7) != 0) continue;
    size_t len = strcspn(q, "[=;\n");
    if (q[len] == '\n' || q[len] == '\0') continue;
    while (len > 0 && q[len - 1] == ' ') len--;
    size_t start = len;
    while (start > 0 && q[start - 1] != ' ' && q[start - 1] != '\t') start--;
    if (start == len || q[start] == '.') continue;
    if (m->nglobals == cap) {
      cap = cap ? 2 * cap : 8;
      char **v = realloc(m->globals, sizeof *v * (size_t)cap);
      if (v == NULL) return -1;
      m->globals = v;
    }
    if ((m->globals[m->nglobals] = strndup(q + start, len - start)) == NULL) return -1;
    m->nglobals++;
  }
  return 0;
}

/* cd.load_module(ptx_or_cubin [, {device=}]): code compiled elsewhere (nvcc -ptx / -cubin) */
static int l_load_module(lua_State *L) {
  static const char *const known[] = {"device", NULL};
  size_t n;
  const char *img = luaL_checklstring(L, 1, &n);
  cdv_check_options(L, 2, known, "load_module");
  if (cdv_get_state(L)->sandbox) return luaL_error(L, "load_module is not available in this sandbox");
  cdv_device *d = cdv_opt_device_field(L, 2, "load_module");
  if (d == NULL) d = cdv_default_device(L);
  if (d->be->native_code) return luaL_error(L, "load_module loads CUDA code; the target device is %s", d->alias);
  int is_elf = n >= 4 && memcmp(img, "\177ELF", 4) == 0;
  if (!is_elf && strstr(img, ".entry") == NULL && strstr(img, ".version") == NULL)
    return luaL_argerror(L, 1, "neither PTX text nor a cubin (ELF) image");
  cdv_device_use(L, d);
  cdv_module_t *m = calloc(1, sizeof *m);
  char *copy = malloc(n + 1);
  if (m == NULL || copy == NULL) { /* NOTE [no abort] */
    free(m);
    free(copy);
    return luaL_error(L, "not enough memory");
  }
  memcpy(copy, img, n);
  copy[n] = '\0';
  m->refs = 1;
  if (is_elf) {
    m->img.cubin = copy;
    m->img.cubin_len = n;
  } else {
    m->img.ptx = copy;
    m->img.ptx_len = n;
    if (ptx_entries(m) != 0 || ptx_globals(m) != 0) {
      cdv_module_unref(m);
      return luaL_error(L, "not enough memory");
    }
  }
  cdv_err e;
  if (d->be->module_load(d, &m->img, &m->handle, &e) != 0) {
    cdv_module_unref(m);
    return cdv_raise(L, d, &e);
  }
  m->dev = d;
  m->generation = d->generation;
  m->arch = d->arch;
  push_module(L, m);
  cdv_module_unref(m); /* the Module value holds the only reference: loaded modules are not cached */
  return 1;
}

static int l_kernel_cache_stats(lua_State *L) {
  pthread_mutex_lock(&cache_lock);
  long hits = memory_hits, misses = memory_misses, entries = 0;
  for (cdv_module_t *m = cache; m != NULL; m = m->next) entries++;
  pthread_mutex_unlock(&cache_lock);
  lua_createtable(L, 0, 12);
  lua_pushinteger(L, hits);
  lua_setfield(L, -2, "memory_hits");
  lua_pushinteger(L, misses);
  lua_setfield(L, -2, "memory_misses");
  lua_pushinteger(L, entries);
  lua_setfield(L, -2, "memory_entries");
  static const char *const disk_names[CDV_DISK_NSTATS] = {"disk_hits", "disk_misses", "disk_writes", "disk_errors"};
  long disk[CDV_DISK_NSTATS];
  char dir[4096], last[512], miss[512];
  cdv_cuda_cache_stats(disk, dir, sizeof dir, last, sizeof last, miss, sizeof miss);
  for (int i = 0; i < CDV_DISK_NSTATS; i++) {
    lua_pushinteger(L, disk[i]);
    lua_setfield(L, -2, disk_names[i]);
  }
  if (dir[0]) {
    lua_pushstring(L, dir);
    lua_setfield(L, -2, "disk_dir");
  }
  if (last[0]) {
    lua_pushstring(L, last);
    lua_setfield(L, -2, "disk_last_error");
  }
  if (miss[0]) {
    lua_pushstring(L, miss);
    lua_setfield(L, -2, "disk_last_miss");
  }
  lua_pushinteger(L, cdv_cpu_compiler_runs()); /* NOTE [cpu loops] */
  lua_setfield(L, -2, "cpu_compiles");
  cdv_cpu_cache_dir_used(dir, sizeof dir); /* NOTE [cache trust] */
  if (dir[0]) {
    lua_pushstring(L, dir);
    lua_setfield(L, -2, "cpu_disk_dir");
  }
  cdv_cache_refusal(last, sizeof last);
  if (last[0]) {
    lua_pushstring(L, last);
    lua_setfield(L, -2, "disk_refused");
  }
  return 1;
}

/* cd._selftest.disk_cache(dir) -> true | false, why: the disk cache's reading and writing, without NVRTC.
 * It writes and damages a file in dir hundreds of times, so it is kept in a table, out of reach of code
 * that calls every function of the module (the API fuzzer), and out of sandboxes. */
static int l_disk_cache_selftest(lua_State *L) {
  char why[200];
  const char *dir = luaL_checkstring(L, 1);
  if (cdv_get_state(L)->sandbox) return luaL_error(L, "_selftest is not available in this sandbox");
  if (cdv_cuda_cache_selftest(dir, why, sizeof why) == 0) {
    lua_pushboolean(L, 1);
    return 1;
  }
  lua_pushboolean(L, 0);
  lua_pushstring(L, why);
  return 2;
}

/* cd._selftest.cache_trust(dir) -> true | false, why: NOTE [cache trust] in this process (diskcache.c). */
static int l_cache_trust_selftest(lua_State *L) {
  char why[4400];
  const char *dir = luaL_checkstring(L, 1);
  if (cdv_get_state(L)->sandbox) return luaL_error(L, "_selftest is not available in this sandbox");
  int ok = cdv_cache_trust_selftest(dir, why, sizeof why) == 0;
  lua_pushboolean(L, ok);
  if (!ok) lua_pushstring(L, why);
  return ok ? 1 : 2;
}

/* Drops the in-memory cache; modules still held by Module values stay loaded until collected. */
static int l_clear_kernel_cache(lua_State *L) {
  (void)L;
  cdv_cpu_cache_forget(); /* its objects by key, and the failures it remembers (NOTE [failed compiles]) */
  pthread_mutex_lock(&cache_lock);
  cdv_module_t *m = cache;
  cache = NULL;
  pthread_mutex_unlock(&cache_lock);
  while (m != NULL) {
    cdv_module_t *next = m->next;
    cdv_module_unref(m);
    m = next;
  }
  return 0;
}

static int l_type(lua_State *L) {
  static const char *const types[][2] = {
      {CDV_DEVICE, "Device"}, {CDV_STREAM, "Stream"}, {CDV_EVENT, "Event"},
      {CDV_ARRAY, "Array"},   {CDV_MODULE, "Module"}, {CDV_KERNEL, "Kernel"},
      {CDV_GRAPH, "Graph"},   {CDV_ERROR, "Error"},   {CDV_LAUNCH_CONFIG, "LaunchConfig"},
      {CDV_COMM, "Comm"}};
  luaL_checkany(L, 1);
  if (lua_getmetatable(L, 1)) {
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
      luaL_getmetatable(L, types[i][0]);
      int eq = lua_rawequal(L, -1, -2);
      lua_pop(L, 1);
      if (eq) {
        lua_pushstring(L, types[i][1]);
        return 1;
      }
    }
  }
  lua_pushnil(L);
  return 1;
}

static const luaL_Reg module_methods[] = {{"get", module_get}, {"get_global", module_get_global}, {NULL, NULL}};
static const luaL_Reg functions[] = {{"compile", l_compile},
                                     {"load_module", l_load_module},
                                     {"kernel_cache_stats", l_kernel_cache_stats},
                                     {"clear_kernel_cache", l_clear_kernel_cache},
                                     {"type", l_type},
                                     {NULL, NULL}};

int cdv_module_open(lua_State *L) {
  static const luaL_Reg mmeta[] = {
      {"__gc", module_gc}, {"__close", module_gc}, {"__tostring", module_tostring}, {NULL, NULL}};
  cdv_new_class(L, CDV_MODULE, mmeta, module_methods, module_index); /* NOTE [class registration] */
  lua_pop(L, 1);
  cdv_kernel_open(L);
  luaL_setfuncs(L, functions, 0);
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, l_disk_cache_selftest);
  lua_setfield(L, -2, "disk_cache");
  lua_pushcfunction(L, l_cache_trust_selftest);
  lua_setfield(L, -2, "cache_trust");
  lua_setfield(L, -2, "_selftest");
  return 0;
}
