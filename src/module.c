/*
 * module.c: cudadev.Module (compiled code loaded on a device) and cudadev.Kernel (one function of it,
 * with its checked, allocation-free launch).
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

#include "cdv.h"
#include "sig.h"
#include "syms.h"

/* ------------------------------------------------------------ the in-memory cache */

typedef struct cdv_module {
  uint64_t key[2];
  cdv_device *dev;            /* NULL: compiled for an arch with no device (not loaded) */
  unsigned generation;
  int arch;
  cdv_image img;
  void *handle;               /* backend module */
  int nentries;
  char **entries;             /* the names kernels are looked up by ("saxpy", "axpy<float>") */
  int nglobals, nauto;        /* nauto: the globals the scanner found (the first ones), not named by expressions */
  char **globals;             /* NOTE [module globals]: the names get_global takes ("table", "ns::counter"); their
                               * lowered names follow the kernels' in img.lowered */
  cdv_sigs sigs;
  int have_sigs;
  char sig_error[256];        /* why the source's kernels could not be read, when they could not */
  int refs;                   /* Module values + the cache list */
  struct cdv_module *next;
} cdv_module_t;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static cdv_module_t *cache;
static long memory_hits, memory_misses;

static void module_ref(cdv_module_t *m) {
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

static void module_unref(cdv_module_t *m) {
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
typedef struct hasher { uint64_t a, b; } hasher;

static void hash_bytes(hasher *h, const void *p, size_t n) {
  const unsigned char *s = p;
  for (size_t i = 0; i < n; i++) {
    h->a = (h->a ^ s[i]) * 0x100000001b3ULL;
    h->b = (h->b ^ s[i]) * 0x100000001b3ULL + 0x9e3779b97f4a7c15ULL;
  }
  unsigned char sep = 0xff;  /* separates fields so "ab"+"c" differs from "a"+"bc" */
  h->a = (h->a ^ sep) * 0x100000001b3ULL;
  h->b = (h->b ^ n) * 0x100000001b3ULL;
}

static void hash_str(hasher *h, const char *s) { hash_bytes(h, s ? s : "", s ? strlen(s) : 0); }

/* ------------------------------------------------------------ compile options */

static const char *const compile_opts[] = {"name", "options", "headers", "include_paths", "name_expressions",
                                           "device", "arch", "target", NULL};

typedef struct strlist { int n; const char **v; } strlist;

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
    if (cdv_has_nul(L, -1))   /* NOTE [C strings] */
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
      if (cdv_has_nul(L, -2) || cdv_has_nul(L, -1))   /* NOTE [C strings] */
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
    while (lua_next(L, tab)) {   /* sorted by name as they come: table order differs between processes, */
      int j = i++;                 /* and the cache keys (in memory, cpu and CUDA on disk) must not */
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
  if (t == LUA_TNUMBER) arch = (int)lua_tointeger(L, -1);
  else if (t == LUA_TSTRING) {
    const char *s = lua_tostring(L, -1);
    if (sscanf(s, "sm_%d", &arch) != 1 && sscanf(s, "compute_%d", &arch) != 1) arch = -1;
  } else if (t != LUA_TNIL) arch = -1;
  if (arch < 0 || (t != LUA_TNIL && (arch < 10 || arch > 1000)))
    luaL_error(L, "bad option 'arch' to 'compile' (expected \"sm_XY\" or an integer such as 90, got %s)",
               luaL_tolstring(L, -1, NULL));
  lua_pop(L, 1);
  return arch;
}

static void parse_target(lua_State *L, int o, int *ptx, int *cubin) {
  *ptx = *cubin = 0;
  int t = cdv_opt_field(L, o, "target");
  int top = lua_gettop(L);
  int n = t == LUA_TTABLE ? (int)lua_rawlen(L, top) : 1;
  for (int i = 1; i <= n; i++) {
    if (t == LUA_TTABLE) lua_rawgeti(L, top, i);
    else lua_pushvalue(L, top);
    const char *s = lua_tostring(L, -1);
    if (t == LUA_TNIL) *cubin = *ptx = -1;   /* default: cubin when supported, else PTX */
    else if (s && strcmp(s, "ptx") == 0) *ptx = 1;
    else if (s && strcmp(s, "cubin") == 0) *cubin = 1;
    else luaL_error(L, "bad option 'target' to 'compile' (expected \"cubin\", \"ptx\" or both in a table)");
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
}

/* ------------------------------------------------------------ NVRTC's supported architectures */

static int nvrtc_archs[128], nvrtc_narchs;

static void load_archs(void) {
  int n = 0;
  if (cdv_nvrtc_load() != 0 || cdv_nvrtc.nvrtcGetNumSupportedArchs == NULL) return;
  if (cdv_nvrtc.nvrtcGetNumSupportedArchs(&n) == NVRTC_SUCCESS && n > 0 && n <= 128 &&
      cdv_nvrtc.nvrtcGetSupportedArchs(nvrtc_archs) == NVRTC_SUCCESS)
    nvrtc_narchs = n;
}

/* NVRTC emits cubin only for the architectures it lists; others get PTX for the driver to JIT. */
int cdv_cubin_supported(int arch) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, load_archs);
  for (int i = 0; i < nvrtc_narchs; i++)
    if (nvrtc_archs[i] == arch) return 1;
  return 0;
}

/* ------------------------------------------------------------ Module values */

typedef struct module_ud { uint64_t magic; cdv_module_t *m; } module_ud;   /* CDV_MODULE_MAGIC (NOTE [magic]) */

static module_ud *check_module_ud(lua_State *L, int arg) {
  return cdv_check_udata(L, arg, CDV_MODULE, CDV_MODULE_MAGIC, sizeof(module_ud));
}

static cdv_module_t *check_module(lua_State *L, int arg) {
  module_ud *u = check_module_ud(L, arg);
  if (u->m == NULL) luaL_argerror(L, arg, "attempt to use a released module");
  if (u->m->dev && u->m->generation != u->m->dev->generation) luaL_argerror(L, arg, "stale Module: device was reset");
  return u->m;
}

static void push_module(lua_State *L, cdv_module_t *m) {
  module_ud *u = lua_newuserdatauv(L, sizeof *u, 1);
  u->magic = CDV_MODULE_MAGIC;
  u->m = NULL;
  luaL_setmetatable(L, CDV_MODULE);
  cdv_track_late(L, -1);   /* NOTE [objects made in finalizers] */
  lua_newtable(L);                 /* Kernel values by name: one launch plan per kernel */
  lua_setiuservalue(L, -2, 1);
  module_ref(m);
  u->m = m;
  cdv_live_add(CDV_LIVE_MODULE, 1);
}

static cdv_module_t *cache_find(const uint64_t key[2]) {
  pthread_mutex_lock(&cache_lock);
  cdv_module_t *m = cache;
  while (m != NULL && (m->key[0] != key[0] || m->key[1] != key[1] || (m->dev && m->generation != m->dev->generation)))
    m = m->next;
  if (m != NULL) memory_hits++;
  else memory_misses++;
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
    if (g->is_template ? strlen(g->name) == base && strncmp(g->name, e, base) == 0 : strcmp(g->name, e) == 0)
      return 1;
  }
  return 0;
}

static void add_name(char ***v, int *n, const char *s) {
  for (int j = 0; j < *n; j++)
    if (strcmp((*v)[j], s) == 0) return;
  if (((*v)[(*n)++] = strdup(s)) == NULL) abort();
}

/* Entries: every non-template kernel the parser found (extern "C" ones by symbol, others lowered as a
 * name expression), then the name expressions asked for; globals (NOTE [module globals]) apart, those the
 * scanner found first unless with_auto is 0. */
static void make_entries(cdv_module_t *m, const strlist *exprs, int with_auto, unsigned char **is_expr) {
  int cap = m->sigs.n + exprs->n, gcap = m->sigs.nglobals + exprs->n;
  m->entries = calloc((size_t)cap + 1, sizeof *m->entries);
  m->globals = calloc((size_t)gcap + 1, sizeof *m->globals);
  *is_expr = calloc((size_t)(cap + gcap) + 1, 1);
  if (m->entries == NULL || m->globals == NULL || *is_expr == NULL) abort();
  for (int i = 0; m->have_sigs && i < m->sigs.n; i++)
    if (m->sigs.v[i].ntparams == 0) {
      (*is_expr)[m->nentries] = !m->sigs.v[i].extern_c;
      m->entries[m->nentries++] = strdup(m->sigs.v[i].name);
    }
  for (int i = 0; with_auto && m->have_sigs && i < m->sigs.nglobals; i++)
    if (!m->sigs.globals[i].is_template) add_name(&m->globals, &m->nglobals, m->sigs.globals[i].name);
  m->nauto = m->nglobals;
  for (int i = 0; i < exprs->n; i++) {
    if (m->have_sigs && names_global(&m->sigs, exprs->v[i])) {
      add_name(&m->globals, &m->nglobals, expr_name(exprs->v[i]));
      continue;
    }
    int n = m->nentries;
    add_name(&m->entries, &m->nentries, exprs->v[i]);
    if (m->nentries > n) (*is_expr)[n] = 1;
  }
  for (int i = 0; i < m->nglobals; i++) (*is_expr)[m->nentries + i] = 2;
}

static void raise_compile_error(lua_State *L, cdv_device *d, cdv_err *e, const strlist *opts, const char *name) {
  cdv_push_error(L, d, e);
  lua_createtable(L, opts->n, 0);
  for (int i = 0; i < opts->n; i++) {
    lua_pushstring(L, opts->v[i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, "options");
  lua_pushvalue(L, 1);                  /* the source and its file name, so a REPL can show the lines the log cites */
  lua_setfield(L, -2, "source");
  lua_pushstring(L, name);
  lua_setfield(L, -2, "source_name");
  lua_error(L);
}

/* The default target (want_cubin < 0): cubin when NVRTC can emit one for the arch, else PTX. Asks NVRTC,
 * which loads it: NOTE [cuda kernel cache] calls this only after the disk missed. NULL, or why not. */
static const char *resolve_target(cdv_compile_req *req, char *msg, size_t n) {
  int cub = cdv_cubin_supported(req->arch);
  if (req->want_cubin == 1 && !cub) {
    snprintf(msg, n, "bad option 'target' to 'compile' (NVRTC cannot emit cubin for sm_%d; use target = \"ptx\")",
             req->arch);
    return msg;
  }
  if (req->want_cubin < 0) {
    req->want_cubin = cub;
    req->want_ptx = !cub;
  }
  return NULL;
}

/* The image for req: the backend's compile, through the disk for CUDA (NOTE [cuda kernel cache]; the cpu
 * backend keeps its objects on disk itself, NOTE [cpu kernel cache]). 0, -1 with *e, or 1 with the reason
 * in msg when the target asked for cannot be had. */
static int compile_image(const cdv_backend *be, cdv_device *d, cdv_compile_req *req, cdv_image *img, cdv_err *e,
                         char *msg, size_t n) {
  if (be != &cdv_backend_cuda) return be->compile(d, req, img, e);
  cdv_cuda_entry ce;
  int keyed = cdv_cuda_cache_key(req, &ce) == 0;
  if (keyed && cdv_cuda_cache_get(&ce, req, img) == 0) return 0;
  if (resolve_target(req, msg, n)) return 1;
  int rc = be->compile(d, req, img, e);
  if (rc == 0 && keyed) cdv_cuda_cache_put(&ce, req, img);   /* a failed compile is never stored */
  return rc;
}

/* The module's entries (make_entries) into req, then compile_image. */
static int compile_entries(const cdv_backend *be, cdv_device *d, cdv_module_t *m, cdv_compile_req *req,
                           const strlist *exprs, int with_auto, cdv_err *e, char *msg, size_t n) {
  unsigned char *is_expr;
  make_entries(m, exprs, with_auto, &is_expr);
  const char **all = malloc(sizeof *all * (size_t)(m->nentries + m->nglobals + 1));   /* kernels, then globals */
  if (all == NULL) abort();
  for (int i = 0; i < m->nentries; i++) all[i] = m->entries[i];
  for (int i = 0; i < m->nglobals; i++) all[m->nentries + i] = m->globals[i];
  req->nentries = m->nentries + m->nglobals;
  req->entries = all;
  req->is_expr = is_expr;
  int rc = compile_image(be, d, req, &m->img, e, msg, n);
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
    if (cdv_has_nul(L, -1)) cdv_opt_error(L, "name", "compile", "contains a NUL byte");   /* NOTE [C strings] */
    name = lua_tostring(L, -1);
  }
  strlist opts = check_strlist(L, 2, "options"), incs = check_strlist(L, 2, "include_paths");
  cdv_check_compile_options(L, opts.n, opts.v);   /* NOTE [state limits]: the embedding host's allow-list */
  strlist exprs = check_strlist(L, 2, "name_expressions");
  const char **hnames, **htexts;
  int nh = check_headers(L, 2, &hnames, &htexts);
  int arch = parse_arch(L, 2), want_ptx, want_cubin, given_dev = 0;
  parse_target(L, 2, &want_ptx, &want_cubin);
  cdv_device *d = cdv_opt_device_field(L, 2, "compile");
  given_dev = d != NULL;
  if (d == NULL) d = cdv_default_device(L);
  if (arch && d->is_cpu && given_dev)
    return luaL_error(L, "bad option 'arch' to 'compile' (arch targets CUDA devices; leave it out to compile for cpu)");
  if (arch && d->is_cpu) d = NULL;          /* compile only: there is no GPU to load it on */
  if (d != NULL && d->is_cpu && cdv_get_state(L)->sandbox)   /* a cpu kernel is native host code */
    return luaL_error(L, "compiling kernels for the cpu device is not available in this sandbox");
  if (!arch && d != NULL) arch = d->arch;
  strlist nvopts = opts;   /* what NVRTC gets */
  if (cdv_get_state(L)->sandbox) {   /* NOTE [sandboxed includes]: before any cache is asked */
    cdv_compile_req chk = {src, srclen, name, opts.n, opts.v, nh, hnames, htexts, incs.n, incs.v,
                           0, NULL, NULL, arch, 0, 0};
    cdv_check_includes(L, &chk);
    nvopts.v = lua_newuserdatauv(L, sizeof(char *) * (size_t)(opts.n + 2), 0);
    memcpy(nvopts.v, opts.v, sizeof(char *) * (size_t)opts.n);
    nvopts.v[nvopts.n++] = "--no-source-include";
    nvopts.v[nvopts.n] = NULL;
  }
  const cdv_backend *be = d != NULL ? d->be : &cdv_backend_cuda;
  if (d != NULL) cdv_device_use(L, d);

  hasher h = {0xcbf29ce484222325ULL, 0x84222325cbf29ce4ULL};
  hash_str(&h, be->kind);
  hash_bytes(&h, src, srclen);
  hash_str(&h, name);
  for (int i = 0; i < nvopts.n; i++) hash_str(&h, nvopts.v[i]);
  hash_str(&h, "\1");
  for (int i = 0; i < incs.n; i++) hash_str(&h, incs.v[i]);
  hash_str(&h, "\1");
  for (int i = 0; i < nh; i++) { hash_str(&h, hnames[i]); hash_str(&h, htexts[i]); }
  hash_str(&h, "\1");
  for (int i = 0; i < exprs.n; i++) hash_str(&h, exprs.v[i]);
  int tail[5] = {arch, want_ptx, want_cubin, d ? d->index : -1, d ? (int)d->generation : 0};
  hash_bytes(&h, tail, sizeof tail);
  uint64_t key[2] = {h.a, h.b};
  cdv_module_t *m = cache_find(key);
  if (m != NULL) {
    push_module(L, m);
    return 1;
  }

  m = calloc(1, sizeof *m);
  if (m == NULL) return luaL_error(L, "not enough memory");
  m->have_sigs = cdv_sig_parse(src, srclen, &m->sigs, m->sig_error, sizeof m->sig_error) == 0;
  cdv_compile_req req = {src, srclen, name, nvopts.n, nvopts.v, nh, hnames, htexts, incs.n, incs.v,
                         0, NULL, NULL, arch, want_ptx, want_cubin};
  cdv_err e;
  char bad_target[160];
  memset(&e, 0, sizeof e);
  int rc = compile_entries(be, d, m, &req, &exprs, 1, &e, bad_target, sizeof bad_target);
  if (rc < 0 && m->nauto > 0 && e.log != NULL &&
      (strstr(e.log, "__nv_name_map") != NULL || strstr(e.log, "<cudadev entries>") != NULL)) {
    /* NOTE [module globals]: a variable the scanner found in a branch the preprocessor drops (it reads both
     * branches of an #ifdef) cannot be named: compile again with only the globals named by expressions */
    free(e.log);
    memset(&e, 0, sizeof e);
    clear_entries(m);
    rc = compile_entries(be, d, m, &req, &exprs, 0, &e, bad_target, sizeof bad_target);
  }
  if (rc > 0) {
    m->refs = 1;
    module_unref(m);
    return luaL_error(L, "%s", bad_target);
  }
  if (rc == 0 && d != NULL) rc = be->module_load(d, &m->img, &m->handle, &e);
  if (rc != 0) {
    m->dev = NULL;
    m->refs = 1;
    module_unref(m);
    raise_compile_error(L, d, &e, &opts, name);
  }
  memcpy(m->key, key, sizeof key);
  m->dev = d;
  m->generation = d ? d->generation : 0;
  m->arch = arch;
  push_module(L, cache_insert(m));
  return 1;
}

static int module_gc(lua_State *L) {   /* __gc and __close */
  module_ud *u = cdv_test_magic(L, 1, sizeof *u, CDV_MODULE_MAGIC);
  if (u == NULL) return 0;   /* __gc never raises (NOTE [magic]) */
  if (u->m != NULL) {
    module_unref(u->m);
    cdv_live_add(CDV_LIVE_MODULE, -1);
  }
  u->m = NULL;
  return 0;
}

static int push_kernel(lua_State *L, int mod_idx, cdv_module_t *m, const char *name);

/* m:get(name) -> Kernel; one Kernel (and launch plan) per name per Module value */
static int module_get(lua_State *L) {
  cdv_module_t *m = check_module(L, 1);
  const char *name = cdv_check_cstring(L, 2, "kernel name");   /* NOTE [C strings] */
  lua_getiuservalue(L, 1, 1);
  if (lua_getfield(L, -1, name) != LUA_TNIL) return 1;
  lua_pop(L, 1);
  push_kernel(L, 1, m, name);
  lua_pushvalue(L, -1);
  lua_setfield(L, -3, name);
  return 1;
}

/* "a, b, c" (pushed), or "none" for an empty list: the names an error offers instead */
static const char *push_joined(lua_State *L, int n, char **v) {
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
  module_unref(ud);
}

static int no_device_error(lua_State *L, cdv_module_t *m) {
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
  int no_source = !m->have_sigs && m->sig_error[0] == '\0' && m->nglobals == 0;   /* cd.load_module: ask the driver */
  if (idx < 0 && !no_source) {
    return luaL_error(L, "module has no global '%s' (globals: %s)", name, push_joined(L, m->nglobals, m->globals));
  }
  if (m->dev == NULL) return no_device_error(L, m);
  int at = m->nentries + idx;
  const char *symbol = idx >= 0 && m->img.lowered && at < m->img.nentries ? m->img.lowered[at] : key;
  void *ptr = NULL;
  size_t bytes = 0, item = cdv_dtypes[t].size;
  cdv_err e;
  cdv_device_use(L, m->dev);
  if (m->dev->be->module_global == NULL)
    return luaL_error(L, "the %s device has no module globals", m->dev->be->kind);
  if (m->dev->be->module_global(m->dev, m->handle, symbol, &ptr, &bytes, &e) != 0) return cdv_raise(L, m->dev, &e);
  if (ndim < 0) {
    if (bytes % item != 0)
      return luaL_argerror(L, 3, lua_pushfstring(L, "'%s' is %I bytes, not a whole number of %s (%d bytes each); "
                                                 "give a shape", key, (lua_Integer)bytes, cdv_dtypes[t].name, (int)item));
    ndim = 1;
    shape[0] = (int64_t)(bytes / item);
  } else {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    if ((uint64_t)n * item > bytes)
      return luaL_argerror(L, 4, lua_pushfstring(L, "a shape of %I %s is %I bytes, more than the %I bytes of '%s'",
                                                 (lua_Integer)n, cdv_dtypes[t].name, (lua_Integer)((uint64_t)n * item),
                                                 (lua_Integer)bytes, key));
  }
  module_ref(m);
  cdv_push_host_array(L, m->dev, t, ndim, shape, ptr, global_release, m);
  return 1;
}

static void push_lstring(lua_State *L, const char *p, size_t n) {
  if (p != NULL) lua_pushlstring(L, p, n);
  else lua_pushnil(L);
}

static int module_index(lua_State *L) {
  cdv_module_t *m = check_module(L, 1);
  const char *k = cdv_check_cstring(L, 2, "kernel name");   /* NOTE [C strings] */
  if (cdv_push_method(L)) return 1;
  if (strcmp(k, "ptx") == 0) push_lstring(L, m->img.ptx, m->img.ptx_len);
  else if (strcmp(k, "cubin") == 0) push_lstring(L, m->img.cubin, m->img.cubin_len);
  else if (strcmp(k, "log") == 0) lua_pushstring(L, m->img.log ? m->img.log : "");
  else if (strcmp(k, "arch") == 0) lua_pushinteger(L, m->arch);
  else if (strcmp(k, "device") == 0) {
    if (m->dev) cdv_push_device(L, m->dev);
    else lua_pushnil(L);
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
  if (u->m == NULL) lua_pushliteral(L, "Module(released)");
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

/* PTX's .entry names: what a module loaded from PTX offers */
static void ptx_entries(cdv_module_t *m) {
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
      if (v == NULL) abort();
      m->entries = v;
    }
    m->entries[m->nentries++] = strndup(p, n);
  }
}

/* PTX's module-scope variables, ".global" and ".const" (".visible" or ".weak" before them, not ".extern"), by
 * their lowered names: the globals of a module loaded from PTX (NOTE [module globals]) */
static void ptx_globals(cdv_module_t *m) {
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
      if (v == NULL) abort();
      m->globals = v;
    }
    m->globals[m->nglobals++] = strndup(q + start, len - start);
  }
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
  if (d->is_cpu) return luaL_error(L, "load_module loads CUDA code; the target device is cpu");
  int is_elf = n >= 4 && memcmp(img, "\177ELF", 4) == 0;
  if (!is_elf && strstr(img, ".entry") == NULL && strstr(img, ".version") == NULL)
    return luaL_argerror(L, 1, "neither PTX text nor a cubin (ELF) image");
  cdv_device_use(L, d);
  cdv_module_t *m = calloc(1, sizeof *m);
  char *copy = malloc(n + 1);
  if (m == NULL || copy == NULL) abort();
  memcpy(copy, img, n);
  copy[n] = '\0';
  if (is_elf) { m->img.cubin = copy; m->img.cubin_len = n; }
  else { m->img.ptx = copy; m->img.ptx_len = n; ptx_entries(m); ptx_globals(m); }
  cdv_err e;
  m->refs = 1;
  if (d->be->module_load(d, &m->img, &m->handle, &e) != 0) {
    module_unref(m);
    return cdv_raise(L, d, &e);
  }
  m->dev = d;
  m->generation = d->generation;
  m->arch = d->arch;
  push_module(L, m);
  module_unref(m);   /* the Module value holds the only reference: loaded modules are not cached */
  return 1;
}

static int l_kernel_cache_stats(lua_State *L) {
  pthread_mutex_lock(&cache_lock);
  long hits = memory_hits, misses = memory_misses, entries = 0;
  for (cdv_module_t *m = cache; m != NULL; m = m->next) entries++;
  pthread_mutex_unlock(&cache_lock);
  lua_createtable(L, 0, 11);
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
  cdv_cpu_cache_dir_used(dir, sizeof dir);   /* NOTE [cache trust] */
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
  pthread_mutex_lock(&cache_lock);
  cdv_module_t *m = cache;
  cache = NULL;
  pthread_mutex_unlock(&cache_lock);
  while (m != NULL) {
    cdv_module_t *next = m->next;
    module_unref(m);
    m = next;
  }
  return 0;
}

/* ------------------------------------------------------------ Kernel values and the launch plan */

typedef struct kparam {
  cdv_pkind kind, elem;
  unsigned size;
  int nelem;
  size_t off;
  int64_t lo, hi;               /* integers: the range of the C type (Lua integers are signed: u64 stops at 2^63-1) */
  unsigned elem_size;           /* pointers: the element size an Array must have, 0 when any will do */
} kparam;

typedef struct kernel {
  uint64_t magic;               /* CDV_KERNEL_MAGIC (NOTE [magic]) */
  cdv_module_t *m;              /* one reference of its own (the Module value stays in the user value) */
  cdv_device *dev;
  unsigned generation;
  void *fn;
  int nparams, has_sig, block_hint;
  int reads_tables;             /* a vector parameter: its table is read with lua_getfield (NOTE [pinned reads]) */
  kparam *p;
  void **argv;                  /* kernelParams: argv[i] points at p[i]'s bytes in buf */
  char *buf;
  cdv_sig sig;
  cdv_state *st;                /* the state's record, for the launch path (one per lua_State and its threads) */
  uint64_t serial;              /* unique in the process: what a LaunchConfig remembers it was resolved for */
  size_t shared_ok;             /* dynamic shared memory its launches may take now (NOTE [big shared memory]) */
  int coop_threads, coop_max;   /* the last block size checked for a cooperative launch, and the blocks that */
  int coop_sms;                 /* fit at once with it and coop_shared bytes (0 threads: none checked yet), */
  size_t coop_shared;           /* on coop_sms multiprocessors (NOTE [cooperative launch]) */
  char name[128];
} kernel;

static kernel *check_kernel(lua_State *L, int arg) {
  kernel *k = cdv_check_udata(L, arg, CDV_KERNEL, CDV_KERNEL_MAGIC, sizeof(kernel));
  if (k->fn == NULL) luaL_argerror(L, arg, "attempt to use a released kernel");
  if (k->generation != k->dev->generation) luaL_argerror(L, arg, "stale Kernel: device was reset");
  return k;
}


/* What put_int and put_pointer check, worked out once: an integer kind's range, a pointer's element size. */
static void plan_ranges(kparam *p) {
  cdv_pkind t = p->kind == CDV_P_VEC ? p->elem : p->kind;
  switch (t) {
    case CDV_P_I8: p->lo = INT8_MIN; p->hi = INT8_MAX; break;
    case CDV_P_I16: p->lo = INT16_MIN; p->hi = INT16_MAX; break;
    case CDV_P_I32: p->lo = INT32_MIN; p->hi = INT32_MAX; break;
    case CDV_P_I64: p->lo = INT64_MIN; p->hi = INT64_MAX; break;
    case CDV_P_U8: p->hi = UINT8_MAX; break;
    case CDV_P_U16: p->hi = UINT16_MAX; break;
    case CDV_P_U32: p->hi = UINT32_MAX; break;
    case CDV_P_U64: p->hi = INT64_MAX; break;
    default: break;
  }
  /* an Array for "float *" must hold 4-byte elements; char and void pointers, and structs, take any */
  if (p->kind == CDV_P_PTR && p->elem <= CDV_P_BOOL && p->elem != CDV_P_I8 && p->elem != CDV_P_U8)
    p->elem_size = (unsigned)cdv_pkind_size(p->elem);
}

/* CUDA's limit on a kernel's parameters (32764 bytes on sm_70 and later with CUDA 12.1 and later; 4096 before),
 * held on every device so that a kernel runs on the cpu device exactly when it may run on a GPU. */
#define MAX_PARAM_BYTES 32764

/* "k(PARAMS)": the parameter list as the source reader saw it, for messages (a static buffer) */
static const char *sig_text(const cdv_sig *sig, const char *name) {
  static _Thread_local char buf[200];
  size_t at = (size_t)snprintf(buf, sizeof buf, "%.60s(", name);
  for (int i = 0; i < sig->nparams && at < sizeof buf; i++)
    at += (size_t)snprintf(buf + at, sizeof buf - at, "%s%s%s%s", i ? ", " : "", sig->params[i].type,
                           sig->params[i].name[0] ? " " : "", sig->params[i].name);
  if (at < sizeof buf) snprintf(buf + at, sizeof buf - at, ")");
  return buf;
}

/* Lays the parameters out in one buffer: argv, then each value at its alignment (NOTE [launch plan]). */
static const char *build_plan(kernel *k, const cdv_sig *sig, char *msg, size_t msglen) {
  size_t off = 0;
  k->nparams = sig ? sig->nparams : 0;
  k->p = calloc((size_t)k->nparams + 1, sizeof *k->p);
  if (k->p == NULL) return "not enough memory";
  /* NOTE [verified signatures]: the source reader does not expand macros, so a parameter list written with one
   * (`#define PARAMS float *x, int n` then `k(PARAMS)`) reads as one parameter of unknown type. A launch with a
   * parameter list that is not the compiled kernel's would read past the argument buffer, so where the compiled
   * object knows its parameters (the cpu object's table, cuFuncGetParamInfo on drivers 12.4+) their number and
   * sizes must be the source's; where it does not, a parameter of unknown size is refused below. */
  size_t xoff, xsz;
  int first_known = k->nparams > 0 && k->dev->be->param_info(k->dev, k->fn, 0, &xoff, &xsz) == 0;
  if (k->dev->be->param_info(k->dev, k->fn, k->nparams, &xoff, &xsz) == 0 ||
      (first_known && k->dev->be->param_info(k->dev, k->fn, k->nparams - 1, &xoff, &xsz) != 0)) {
    int n = k->nparams;
    while (n < 4096 && k->dev->be->param_info(k->dev, k->fn, n, &xoff, &xsz) == 0) n++;
    while (n > 0 && k->dev->be->param_info(k->dev, k->fn, n - 1, &xoff, &xsz) != 0) n--;
    snprintf(msg, msglen, "'%.100s' has %d parameter%s in the compiled kernel but %d in its source as cudadev "
             "reads it (%.100s): cudadev does not expand macros in a kernel's parameter list; write the "
             "parameters out", k->name, n, n == 1 ? "" : "s", k->nparams, sig_text(sig, k->name));
    return msg;
  }
  for (int i = 0; i < k->nparams; i++) {
    const cdv_param *sp = &sig->params[i];
    kparam *p = &k->p[i];
    size_t asz = 0, aoff = 0;
    p->kind = sp->kind;
    k->reads_tables |= sp->kind == CDV_P_VEC;
    p->elem = sp->elem;
    p->nelem = sp->nelem;
    p->size = sp->size ? (unsigned)sp->size : (unsigned)cdv_pkind_size(sp->kind);
    plan_ranges(p);
    int known = k->dev->be->param_info(k->dev, k->fn, i, &aoff, &asz) == 0;
    if (known && p->size && asz != p->size) {
      snprintf(msg, msglen, "parameter %d ('%.60s') of '%.100s' is %.90s (%u bytes) in the source but %zu bytes "
               "in the compiled kernel", i + 1, sp->name, k->name, sp->type, p->size, asz);
      return msg;
    }
    if (p->size == 0 && asz > MAX_PARAM_BYTES) {   /* before it is narrowed */
      snprintf(msg, msglen, "parameter %d ('%.60s') of '%.100s' is %zu bytes%s; a kernel's parameters may take "
               "at most %d bytes together (CUDA's limit): pass large data in an Array", i + 1, sp->name, k->name,
               asz, asz == CDV_PARAM_HUGE ? " or more" : "", MAX_PARAM_BYTES);
      return msg;
    }
    if (p->size == 0) p->size = (unsigned)asz;
    if (p->size == 0) return "a parameter of unknown type (a struct passed by value) needs a driver that reports parameter sizes";
    size_t align = sp->align > 0 ? (size_t)sp->align : p->size >= 8 ? 8 : p->size;
    off = (off + align - 1) / align * align;
    p->off = off;
    off += p->size;
  }
  if (off > MAX_PARAM_BYTES) {
    snprintf(msg, msglen, "the parameters of '%.100s' take %zu bytes; a kernel's parameters may take at most %d "
             "bytes together (CUDA's limit): pass large data in an Array", k->name, off, MAX_PARAM_BYTES);
    return msg;
  }
  k->buf = calloc(1, off + 16);
  k->argv = calloc((size_t)k->nparams + 1, sizeof *k->argv);
  if (k->buf == NULL || k->argv == NULL) return "not enough memory";
  for (int i = 0; i < k->nparams; i++) k->argv[i] = k->buf + k->p[i].off;
  return NULL;
}

/* A kernel loaded from PTX has no source, but its .entry lists the parameters with their PTX types:
 * .u64/.b64 are taken as pointers (an Array, nil, or an address), the others by their width and kind,
 * `.align A .b8 x[N]` as an N-byte struct. Fills sig (params malloc'd; cdv_sig_clear frees them). */
static int ptx_signature(const char *ptx, const char *name, cdv_sig *sig) {
  size_t nl = strlen(name);
  const char *p = ptx;
  while ((p = strstr(p, ".entry")) != NULL) {
    p += 6;
    while (*p == ' ' || *p == '\t') p++;
    if (strncmp(p, name, nl) == 0 && (p[nl] == '(' || p[nl] == ' ' || p[nl] == '\n' || p[nl] == '\r')) break;
  }
  if (p == NULL) return -1;
  const char *open = strchr(p, '('), *brace = strchr(p, '{');
  memset(sig, 0, sizeof *sig);
  snprintf(sig->name, sizeof sig->name, "%s", name);
  sig->extern_c = 1;
  if (open == NULL || (brace != NULL && brace < open)) return 0;   /* no parameters */
  const char *close = strchr(open, ')');
  if (close == NULL) return -1;
  int n = 0;
  for (const char *q = open; q < close && (q = strstr(q, ".param")) != NULL && q < close; q += 6) n++;
  sig->params = calloc((size_t)n + 1, sizeof *sig->params);
  if (sig->params == NULL) return -1;
  static const struct { const char *ptx; cdv_pkind kind; const char *c; } types[] = {
    {".u64", CDV_P_PTR, "u64 (pointer or integer)"}, {".b64", CDV_P_PTR, "b64 (pointer or integer)"},
    {".s64", CDV_P_I64, "s64"}, {".u32", CDV_P_U32, "u32"}, {".b32", CDV_P_U32, "b32"}, {".s32", CDV_P_I32, "s32"},
    {".f32", CDV_P_F32, "f32"}, {".f64", CDV_P_F64, "f64"}, {".u16", CDV_P_U16, "u16"}, {".b16", CDV_P_U16, "b16"},
    {".s16", CDV_P_I16, "s16"}, {".u8", CDV_P_U8, "u8"}, {".s8", CDV_P_I8, "s8"}};
  const char *q = open;
  for (int i = 0; i < n; i++) {
    q = strstr(q, ".param") + 6;
    const char *end = strpbrk(q, ",)");
    cdv_param *pa = &sig->params[i];
    size_t bytes = 0;
    const char *b8 = strstr(q, ".b8");
    const char *br = strchr(q, '[');
    if (b8 != NULL && b8 < end && br != NULL && br < end && sscanf(br, "[%zu]", &bytes) == 1) {
      pa->kind = CDV_P_STRUCT;
      pa->size = (int)bytes;
      snprintf(pa->type, sizeof pa->type, "%zu-byte struct", bytes);
    } else {
      size_t t = 0;
      while (t < sizeof types / sizeof types[0] && !(strstr(q, types[t].ptx) && strstr(q, types[t].ptx) < end)) t++;
      if (t == sizeof types / sizeof types[0]) { free(sig->params); sig->params = NULL; return -1; }
      pa->kind = types[t].kind;
      pa->elem = CDV_P_STRUCT;   /* a pointee of unknown type: any Array */
      snprintf(pa->type, sizeof pa->type, "%s", types[t].c);
    }
    const char *nm = end;   /* the parameter's name: the identifier before the separator (or '[') */
    if (br != NULL && br < end) nm = br;
    const char *st = nm;
    while (st > q && (st[-1] == '_' || st[-1] == '$' || (st[-1] >= '0' && st[-1] <= '9') ||
                      ((st[-1] | 32) >= 'a' && (st[-1] | 32) <= 'z')))
      st--;
    snprintf(pa->name, sizeof pa->name, "%.*s", (int)(nm - st), st);
    q = end;
  }
  sig->nparams = n;
  return 0;
}

static int push_kernel(lua_State *L, int mod_idx, cdv_module_t *m, const char *name) {
  if (m->dev == NULL) return no_device_error(L, m);
  int idx = -1;
  for (int i = 0; i < m->nentries && idx < 0; i++)
    if (strcmp(m->entries[i], name) == 0) idx = i;
  cdv_sig sig;
  char err[512];
  memset(&sig, 0, sizeof sig);
  int have = m->have_sigs && cdv_sig_resolve(&m->sigs, name, &sig, err, sizeof err) == 0;
  if (!m->have_sigs && m->img.ptx != NULL && m->sig_error[0] == '\0')   /* cd.load_module of PTX */
    have = ptx_signature(m->img.ptx, name, &sig) == 0;
  int cubin_only = !m->have_sigs && m->img.ptx == NULL;   /* cd.load_module of a cubin: look the name up */
  if (idx < 0 && !cubin_only && (m->have_sigs || m->img.ptx == NULL)) {
    if (have) cdv_sig_clear(&sig);
    if (m->have_sigs && strstr(err, "template") != NULL) return luaL_error(L, "%s", err);
    return luaL_error(L, "module has no kernel '%s' (kernels: %s)", name, push_joined(L, m->nentries, m->entries));
  }
  kernel *k = lua_newuserdatauv(L, sizeof *k, 1);
  memset(k, 0, sizeof *k);
  k->magic = CDV_KERNEL_MAGIC;
  luaL_setmetatable(L, CDV_KERNEL);       /* closed (fn NULL) until everything below succeeded */
  lua_pushvalue(L, mod_idx);
  lua_setiuservalue(L, -2, 1);
  k->sig = sig;                           /* owned by k from here: freed by __gc */
  k->has_sig = have;
  cdv_track_late(L, -1);   /* NOTE [objects made in finalizers] */
  module_ref(m);   /* a Module closed by hand must not unload the code under its Kernels */
  k->m = m;
  k->dev = m->dev;
  k->generation = m->generation;
  k->st = cdv_get_state(L);
  cdv_state_ref(k->st);   /* NOTE [state record]: its launch path reads the record */
  static uint64_t serials;
  k->serial = __atomic_add_fetch(&serials, 1, __ATOMIC_RELAXED);
  snprintf(k->name, sizeof k->name, "%s", name);
  cdv_err e;
  void *fn = NULL;
  const char *symbol = idx >= 0 && m->img.lowered && m->img.lowered[idx] ? m->img.lowered[idx] : name;
  cdv_device_use(L, m->dev);
  /* a source the reader refused (a kernel name over 127 bytes...) gave the cpu device no entry to look up:
   * say why before the lookup fails with "not found" */
  if (!have && m->sig_error[0] != '\0')
    return luaL_error(L, "cannot read the parameter list of '%s': %s", name, m->sig_error);
  if (m->dev->be->module_function(m->dev, m->handle, symbol, &fn, &e) != 0) return cdv_raise(L, m->dev, &e);
  k->fn = fn;
  if (!have) {
    k->fn = NULL;
    return luaL_error(L, "cannot read the parameter list of '%s': %s", name,
                      m->have_sigs ? err : m->img.ptx == NULL && m->img.cubin != NULL && m->sig_error[0] == 0
                      ? "a module loaded from a cubin has no source (load it from PTX or compile it with cd.compile)"
                      : m->sig_error[0] ? m->sig_error : "no source");
  }
  const char *msg = build_plan(k, &k->sig, err, sizeof err);
  if (msg != NULL) {
    k->fn = NULL;
    return luaL_error(L, "%s", msg);
  }
  cdv_live_add(CDV_LIVE_KERNEL, 1);
  return 1;
}

static int kernel_gc(lua_State *L) {
  kernel *k = cdv_test_magic(L, 1, sizeof *k, CDV_KERNEL_MAGIC);
  if (k == NULL) return 0;   /* __gc never raises (NOTE [magic]) */
  if (k->fn != NULL) cdv_live_add(CDV_LIVE_KERNEL, -1);
  free(k->p);
  free(k->buf);
  free(k->argv);
  k->p = NULL;
  k->buf = NULL;
  k->argv = NULL;
  if (k->has_sig) cdv_sig_clear(&k->sig);
  k->has_sig = 0;
  k->fn = NULL;
  if (k->m != NULL) module_unref(k->m);
  k->m = NULL;
  if (k->st != NULL) cdv_state_unref(k->st);
  k->st = NULL;
  return 0;
}

/* ---- argument conversion (the launch's hot path: no allocation, no table access) */

static int arg_error(lua_State *L, kernel *k, int i, const char *got) {
  const cdv_param *sp = &k->sig.params[i];
  return luaL_error(L, "bad argument #%d to '%s' ('%s': expected %s, got %s)", i + 1, k->name,
                    sp->name[0] ? sp->name : "?", sp->type, got);
}

static const char *got_value(lua_State *L, int idx) {
  if (lua_type(L, idx) == LUA_TNUMBER) return lua_pushfstring(L, "%s", lua_tostring(L, idx));
  if (cdv_test_magic(L, idx, sizeof(cdv_array), CDV_ARRAY_MAGIC)) return "an Array";
  return lua_type(L, idx) == LUA_TUSERDATA ? cdv_typename(L, idx) : luaL_typename(L, idx);
}

/* put_int and put_float write a value of parameter p (for a vector, of its lane kind t) */
static void put_int(lua_State *L, kernel *k, int i, int idx, char *dst, const kparam *p, unsigned size) {
  int isint;
  lua_Integer v = lua_tointegerx(L, idx, &isint);
  if (!isint || v < p->lo || v > p->hi) arg_error(L, k, i, got_value(L, idx));
  switch (size) {   /* little-endian: the low bytes are the value */
    case 1: *dst = (char)v; break;
    case 2: { int16_t x = (int16_t)v; memcpy(dst, &x, 2); break; }
    case 4: { int32_t x = (int32_t)v; memcpy(dst, &x, 4); break; }
    default: memcpy(dst, &v, 8);
  }
}

static void put_float(lua_State *L, kernel *k, int i, int idx, char *dst, cdv_pkind t) {
  if (lua_type(L, idx) != LUA_TNUMBER) arg_error(L, k, i, got_value(L, idx));   /* no strings, as C would not */
  lua_Number v = lua_tonumberx(L, idx, NULL);
  switch (t) {
    case CDV_P_F64: memcpy(dst, &v, 8); break;
    case CDV_P_F32: { float f = (float)v; memcpy(dst, &f, 4); break; }
    default: {   /* f16 / bf16 through a one-element conversion */
      float f = (float)v;
      uint32_t x;
      memcpy(&x, &f, 4);
      uint16_t h = t == CDV_P_BF16 ? (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16) : cdv_f32_to_f16(f);
      memcpy(dst, &h, 2);
    }
  }
}

/* The launch path finds the state record in the Kernel (not the registry) and recognises Kernels and Arrays
 * by NOTE [magic]. */

/* An Array for a pointer parameter must be reachable from the launch device. */
static void put_pointer(lua_State *L, kernel *k, int i, int idx, char *dst, void *stream) {
  void *ptr = NULL;
  cdv_array *a = cdv_test_magic(L, idx, sizeof *a, CDV_ARRAY_MAGIC);
  if (a != NULL) {
    if (a->block == NULL) arg_error(L, k, i, "a freed Array");
    cdv_block *b = a->block;
    if (b->generation != b->dev->generation) arg_error(L, k, i, "a stale Array (device was reset)");
    if (b->dev != k->dev && !(b->kind == CDV_MEM_PINNED && !k->dev->is_cpu) &&
        !(b->dev->is_cpu && k->dev->is_cpu) && !cdv_peer_reachable(L, b->dev, k->dev, b->dev->is_mempool_supported)) {
      luaL_error(L, "bad argument #%d to '%s' ('%s': array is on %s but the kernel runs on %s; move it with "
                 "a:to(\"%s\")%s)", i + 1, k->name, k->sig.params[i].name, b->dev->alias, k->dev->alias,
                 k->dev->alias, !b->dev->is_cpu && !k->dev->is_cpu ? lua_pushfstring(L, ", or let %s reach it with cd.set_%s_access_enabled(\"%s\", \"%s\", true)", k->dev->alias, b->dev->is_mempool_supported ? "mempool" : "peer", b->dev->alias, k->dev->alias) : "");
    }
    if (k->p[i].elem_size && k->p[i].elem_size != cdv_dtypes[a->dtype].size)
      arg_error(L, k, i, lua_pushfstring(L, "an Array of %s", cdv_dtypes[a->dtype].name));
    if (!cdv_array_contiguous(a))   /* a kernel indexes a pointer as C-ordered memory: NOTE [strided views] */
      arg_error(L, k, i, "a non-contiguous Array; pass a:contiguous()");
    ptr = a->data;
    cdv_block_used(b, k->dev, stream);
  } else if (lua_isnil(L, idx)) {
    ptr = NULL;
  } else if (lua_isinteger(L, idx) && !k->st->sandbox) {
    ptr = (void *)(intptr_t)lua_tointeger(L, idx);
  } else {
    arg_error(L, k, i, got_value(L, idx));
  }
  memcpy(dst, &ptr, sizeof ptr);
}

static void put_vec(lua_State *L, kernel *k, int i, int idx, char *dst) {
  static const char *const names[] = {"x", "y", "z", "w"};
  kparam *p = &k->p[i];
  if (!lua_istable(L, idx)) arg_error(L, k, i, got_value(L, idx));
  unsigned es = (unsigned)cdv_pkind_size(p->elem);
  for (int j = 0; j < p->nelem; j++) {
    if (lua_getfield(L, idx, names[j]) == LUA_TNIL) {
      lua_pop(L, 1);
      lua_rawgeti(L, idx, j + 1);
    }
    int top = lua_gettop(L);
    if (p->elem == CDV_P_F32 || p->elem == CDV_P_F64 || p->elem == CDV_P_F16) put_float(L, k, i, top, dst + j * es, p->elem);
    else put_int(L, k, i, top, dst + j * es, p, es);
    lua_pop(L, 1);
  }
}

static void put_arg(lua_State *L, kernel *k, int i, int idx, void *stream) {
  char *dst = k->buf + k->p[i].off;
  switch (k->p[i].kind) {
    case CDV_P_PTR: put_pointer(L, k, i, idx, dst, stream); break;
    case CDV_P_F16: case CDV_P_BF16: case CDV_P_F32: case CDV_P_F64: put_float(L, k, i, idx, dst, k->p[i].kind); break;
    case CDV_P_BOOL:
      if (!lua_isboolean(L, idx)) arg_error(L, k, i, got_value(L, idx));
      *dst = (char)lua_toboolean(L, idx);
      break;
    case CDV_P_VEC: put_vec(L, k, i, idx, dst); break;
    case CDV_P_STRUCT: {
      size_t n;
      const char *s = lua_type(L, idx) == LUA_TSTRING ? lua_tolstring(L, idx, &n) : NULL;
      if (s == NULL || n != k->p[i].size)
        arg_error(L, k, i, lua_pushfstring(L, "%s (pass a string of exactly %d bytes, e.g. from string.pack)",
                                            got_value(L, idx), (int)k->p[i].size));
      memcpy(dst, s, n);
      break;
    }
    default: put_int(L, k, i, idx, dst, &k->p[i], k->p[i].size);
  }
}

/* ---- launch configuration (NOTE [launch configs] in launch_config.c) */

static int cfg_error(lua_State *L, kernel *k, const char *msg) { return cdv_launch_config_error(L, k->name, msg); }

static int suggest_block(lua_State *L, kernel *k, size_t shared);

/* NOTE [big shared memory]: a kernel may take up to the device's opt-in limit of dynamic shared memory per
 * block (227 KiB on an H100), less its static shared memory, but the driver refuses more than 48 KiB until
 * CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES allows it. k->shared_ok is what the kernel may take now:
 * a launch asking more comes here once per kernel and larger size (the launch path compares, nothing more),
 * which checks the limit and raises the attribute (never lowers it: Kernel values of one module share the
 * function). A LaunchConfig memo (resolve_config) implies the size was allowed for that kernel already.
 * Returns 0 when `shared` is allowed now, else the message (pushed) saying the limit. */
static const char *allow_shared(lua_State *L, kernel *k, size_t shared) {
  cdv_device *d = k->dev;
  cdv_func_info fi;
  cdv_err e;
  memset(&fi, 0, sizeof fi);
  cdv_device_use(L, d);
  if (d->be->func_info(d, k->fn, &fi, &e) != 0) cdv_raise(L, d, &e);
  size_t limit = fi.shared_size_bytes < d->max_shared_optin ? d->max_shared_optin - fi.shared_size_bytes : 0;
  if (shared > limit) {
    if (fi.shared_size_bytes == 0) return lua_pushfstring(L, "'shared' must be 0 to %I bytes", (lua_Integer)limit);
    return lua_pushfstring(L, "'shared' must be 0 to %I bytes (%s allows %I per block, less the kernel's %I bytes of "
                           "static shared memory)", (lua_Integer)limit, d->alias, (lua_Integer)d->max_shared_optin,
                           (lua_Integer)fi.shared_size_bytes);
  }
  size_t allowed = limit;
  if (d->be->allow_shared != NULL && d->be->allow_shared(d, k->fn, shared, &allowed, &e) != 0) cdv_raise(L, d, &e);
  k->shared_ok = allowed < limit ? allowed : limit;
  return NULL;
}

/* NOTE [cooperative launch]: every block of a cooperative launch must be resident at once (grid.sync()
 * waits for all of them), so the grid is checked against what the occupancy allows, before the driver
 * (which would say only CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE). The answer is kept per block size and
 * shared size, so a table launched again asks the driver nothing. */
static void check_cooperative(lua_State *L, kernel *k, const unsigned grid[3], const unsigned block[3],
                              size_t shared) {
  cdv_device *d = k->dev;
  int threads = (int)(block[0] * block[1] * block[2]);
  if (k->coop_threads != threads || k->coop_shared != shared) {
    int per_sm = 0, sms = 0;
    cdv_err e;
    cdv_device_use(L, d);
    if (d->be->coop_limit(d, k->fn, threads, shared, &per_sm, &sms, &e) != 0) cdv_raise(L, d, &e);
    k->coop_threads = threads, k->coop_shared = shared, k->coop_max = per_sm * sms;
    k->coop_sms = sms;
  }
  uint64_t n = (uint64_t)grid[0] * grid[1] * grid[2];
  if (n > (uint64_t)k->coop_max)
    cfg_error(L, k, lua_pushfstring(L, "cooperative launch of %I blocks exceeds the %d blocks that fit on %s at once "
                                    "(%d per SM x %d SMs)", (lua_Integer)n, k->coop_max, d->alias,
                                    k->coop_sms ? k->coop_max / k->coop_sms : 0, k->coop_sms));
}

/* What depends on the kernel: its device, its limits, and for `dim` the block size chosen for it (once per
 * kernel). Fills grid and block. A table is checked at every launch; a LaunchConfig remembers the last kernel
 * it was checked for, by serial (an address could be a new kernel's), and only its stream is checked again. */
static void resolve_config(lua_State *L, kernel *k, const cdv_launch_config *c, unsigned grid[3], unsigned block[3]) {
  const char *why = c->stream != NULL ? cdv_stream_unusable(c->stream) : NULL;
  if (why != NULL) cfg_error(L, k, lua_pushfstring(L, "'stream': %s", why));
  if (c->memo_kernel == k->serial) {
    memcpy(grid, c->memo_grid, sizeof c->memo_grid);
    memcpy(block, c->memo_block, sizeof c->memo_block);
    return;
  }
  cdv_device *d = k->dev;
  if (c->device != NULL && c->device != d)
    cfg_error(L, k, lua_pushfstring(L, "the kernel was compiled for %s, not %s; compile it with device = \"%s\"",
                                    d->alias, c->device->alias, c->device->alias));
  if ((uint64_t)c->shared > k->shared_ok) {   /* NOTE [big shared memory]; a LaunchConfig did not know the device */
    const char *limit = allow_shared(L, k, (size_t)c->shared);
    if (limit != NULL) cfg_error(L, k, limit);
  }
  const uint64_t *g = c->grid, *b = c->block;
  uint64_t gd[3], bd[3];
  if (c->has_dim) {   /* total threads: choose the block, round the grid up; the kernel checks bounds */
    if (k->block_hint == 0) k->block_hint = suggest_block(L, k, (size_t)c->shared);
    unsigned bs = (unsigned)k->block_hint;
    int nd = c->dim[2] > 1 ? 3 : c->dim[1] > 1 ? 2 : 1;
    unsigned bx = nd == 1 ? bs : nd == 2 ? 16 : 8, by = nd == 1 ? 1 : nd == 2 ? bs / 16 : 8, bz = nd == 3 ? bs / 64 : 1;
    if (by == 0) by = 1;
    if (bz == 0) bz = 1;
    bd[0] = c->dim[0] < bx ? c->dim[0] : bx;
    bd[1] = c->dim[1] < by ? c->dim[1] : by;
    bd[2] = c->dim[2] < bz ? c->dim[2] : bz;
    for (int j = 0; j < 3; j++) gd[j] = (c->dim[j] + bd[j] - 1) / bd[j];
    g = gd;
    b = bd;
  }
  uint64_t threads = b[0] * b[1] * b[2];
  if (threads > (uint64_t)d->max_threads_per_block)
    cfg_error(L, k, lua_pushfstring(L, "a block of %I threads exceeds the device limit of %d", (lua_Integer)threads,
                                    d->max_threads_per_block));
  for (int j = 0; j < 3; j++) {
    if (b[j] > (uint64_t)d->max_block[j])
      cfg_error(L, k, lua_pushfstring(L, "block dimension %c of %I exceeds the device limit of %d", "xyz"[j],
                                      (lua_Integer)b[j], d->max_block[j]));
    if (g[j] > (uint64_t)d->max_grid[j])
      cfg_error(L, k, lua_pushfstring(L, "grid dimension %c of %I exceeds the device limit of %d", "xyz"[j],
                                      (lua_Integer)g[j], d->max_grid[j]));
    grid[j] = (unsigned)g[j];
    block[j] = (unsigned)b[j];
  }
  if (c->cooperative) check_cooperative(L, k, grid, block, (size_t)c->shared);
  if (c->magic == CDV_LCFG_MAGIC) {   /* a LaunchConfig's memo is the one part of it that changes */
    cdv_launch_config *memo = (cdv_launch_config *)c;
    memcpy(memo->memo_grid, grid, sizeof memo->memo_grid);
    memcpy(memo->memo_block, block, sizeof memo->memo_block);
    memo->memo_kernel = k->serial;
  }
}

/* The end of a launch with cooperative = true (NOTE [cooperative launch]), out of the common path. */
static __attribute__((noinline)) int launch_cooperative(lua_State *L, kernel *k, const cdv_launch_config *c,
                                                        const unsigned grid[3], const unsigned block[3], void *stream) {
  cdv_device *d = k->dev;
  cdv_err e;
  if (d->be->launch_cooperative(d, k->fn, grid, block, (unsigned)c->shared, stream, k->argv, &e) != 0)
    return cdv_raise(L, d, &e);
  if (k->st->launch_blocking && d->be->stream_synchronize(d, stream, &e) != 0) return cdv_raise(L, d, &e);
  return 0;
}

/* k:launch(config, ...) / k(config, ...): checks everything, then one backend call (NOTE [launch plan]) */
static int launch(lua_State *L) {
  kernel *k = cdv_test_magic(L, 1, sizeof *k, CDV_KERNEL_MAGIC);
  if (k == NULL || k->fn == NULL) k = check_kernel(L, 1);   /* the slow path words the error */
  cdv_device *d = k->dev;
  if (k->generation != d->generation) return luaL_error(L, "stale Kernel: device was reset");
  int nargs = lua_gettop(L) - 2;
  if (nargs != k->nparams)
    return luaL_error(L, "wrong number of arguments to '%s' (expected %d, got %d)", k->name, k->nparams,
                      nargs < 0 ? 0 : nargs);
  cdv_state *st = k->st;
  cdv_launch_config tmp;
  const cdv_launch_config *c = cdv_get_launch_config(L, 2, st, k->name, d->max_shared_optin, &tmp);
  unsigned grid[3], block[3];
  resolve_config(L, k, c, grid, block);
  cdv_stream *cur = st->cur_stream[d->index];
  if (cur == NULL || cur->dev != d || cur->generation != d->generation) cur = cdv_current_stream(L, d);
  void *stream = c->stream ? cdv_stream_for(L, d, c->stream) : cur->handle;
  for (int i = 0; i < k->nparams; i++) put_arg(L, k, i, i + 3, stream);
  /* NOTE [pinned reads]: a vector's table is read with lua_getfield, whose __index may run Lua that frees an Array
   * put before it (or a finalizer may): the pointers are checked again, so no freed memory reaches the kernel */
  if (k->reads_tables)
    for (int i = 0; i < k->nparams; i++)
      if (k->p[i].kind == CDV_P_PTR) put_arg(L, k, i, i + 3, stream);
  cdv_device_check(L, d);   /* the backend's launch makes the context current: one driver call, not two */
  cdv_err e;
  if (__builtin_expect(c->cooperative, 0)) return launch_cooperative(L, k, c, grid, block, stream);
  if (d->be->launch(d, k->fn, grid, block, (unsigned)c->shared, stream, k->argv, &e) != 0) return cdv_raise(L, d, &e);
  if (st->launch_blocking && d->be->stream_synchronize(d, stream, &e) != 0) return cdv_raise(L, d, &e);
  return 0;
}


/* ---- attributes and occupancy */

static int kernel_occupancy_blocks(lua_State *L, kernel *k, int block, size_t shared) {
  int n = 0;
  cdv_err e;
  /* more than the kernel may take: no block fits (the driver would count with the 48 KiB default) */
  if (shared > k->shared_ok && allow_shared(L, k, shared) != NULL) {
    lua_pop(L, 1);
    return 0;
  }
  cdv_device_use(L, k->dev);
  if (k->dev->be->occupancy(k->dev, k->fn, block, shared, &n, &e) != 0) cdv_raise(L, k->dev, &e);
  return n;
}

/* The block size with the most resident threads per SM (ties go to the smaller block, which spreads
 * small grids over more SMs), as cuOccupancyMaxPotentialBlockSize would choose. */
static int suggest_block(lua_State *L, kernel *k, size_t shared) {
  int best = 32, best_threads = -1;
  for (int b = 32; b <= k->dev->max_threads_per_block; b += 32) {
    int t = kernel_occupancy_blocks(L, k, b, shared) * b;
    if (t > best_threads) { best = b; best_threads = t; }
  }
  return best;
}

static int kernel_suggest_block_size(lua_State *L) {
  kernel *k = check_kernel(L, 1);
  size_t shared = lua_isnoneornil(L, 2) ? 0 : (size_t)cdv_check_count(L, 2, "shared");
  lua_pushinteger(L, suggest_block(L, k, shared));
  return 1;
}

/* k:occupancy(block [, shared]) -> {blocks_per_sm=, occupancy=, limited_by=} (PyCUDA's OccupancyRecord) */
static int kernel_occupancy(lua_State *L) {
  kernel *k = check_kernel(L, 1);
  int block = (int)cdv_check_count(L, 2, "block");
  size_t shared = lua_isnoneornil(L, 3) ? 0 : (size_t)cdv_check_count(L, 3, "shared");
  if (block < 1 || block > k->dev->max_threads_per_block)
    return luaL_argerror(L, 2, lua_pushfstring(L, "block must be 1 to %d threads", k->dev->max_threads_per_block));
  int n = kernel_occupancy_blocks(L, k, block, shared);
  int max_threads = 2048, regs_per_sm = 65536, warp = k->dev->warp_size ? k->dev->warp_size : 32;
  size_t smem_per_sm = k->dev->max_shared_optin;
  cdv_err e;
  if (!k->dev->is_cpu) {
    int v;
    if (cdv_cuda_attribute(k->dev, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, &v, &e) == 0) max_threads = v;
    if (cdv_cuda_attribute(k->dev, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, &v, &e) == 0) regs_per_sm = v;
    if (cdv_cuda_attribute(k->dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, &v, &e) == 0) smem_per_sm = (size_t)v;
  }
  cdv_func_info fi;
  memset(&fi, 0, sizeof fi);
  if (k->dev->be->func_info(k->dev, k->fn, &fi, &e) != 0) return cdv_raise(L, k->dev, &e);
  int warps = (block + warp - 1) / warp;
  int by_warps = max_threads / (warps * warp);
  int by_regs = fi.num_regs ? regs_per_sm / (fi.num_regs * warps * warp) : 1 << 30;
  size_t smem = shared + fi.shared_size_bytes;
  int by_smem = smem ? (int)(smem_per_sm / smem) : 1 << 30;
  const char *limit = k->dev->is_cpu ? "cpu" : by_regs <= by_warps && by_regs <= by_smem ? "regs"
                    : by_smem <= by_warps ? "smem" : "warps";
  lua_createtable(L, 0, 3);
  lua_pushinteger(L, n);
  lua_setfield(L, -2, "blocks_per_sm");
  lua_pushnumber(L, max_threads ? (double)(n * warps * warp) / max_threads : 0);
  lua_setfield(L, -2, "occupancy");
  lua_pushstring(L, limit);
  lua_setfield(L, -2, "limited_by");
  return 1;
}

/* The backend's cdv_func_info of the kernel; raises on failure. */
static void kernel_func_info(lua_State *L, kernel *k, cdv_func_info *fi) {
  cdv_err e;
  memset(fi, 0, sizeof *fi);
  cdv_device_use(L, k->dev);
  if (k->dev->be->func_info(k->dev, k->fn, fi, &e) != 0) cdv_raise(L, k->dev, &e);
}

static int push_attributes(lua_State *L, kernel *k) {
  cdv_func_info fi;
  kernel_func_info(L, k, &fi);
  lua_createtable(L, 0, 5);
  lua_pushinteger(L, fi.num_regs);
  lua_setfield(L, -2, "num_regs");
  lua_pushinteger(L, (lua_Integer)fi.shared_size_bytes);
  lua_setfield(L, -2, "shared_size_bytes");
  lua_pushinteger(L, (lua_Integer)fi.const_size_bytes);
  lua_setfield(L, -2, "const_size_bytes");
  lua_pushinteger(L, (lua_Integer)fi.local_size_bytes);
  lua_setfield(L, -2, "local_size_bytes");
  lua_pushinteger(L, fi.max_threads_per_block);
  lua_setfield(L, -2, "max_threads_per_block");
  return 1;
}

/* k.cpu_path: how the cpu device runs the kernel's threads (NOTE [kernel paths] in cpu_compile.c); nil elsewhere */
static int push_cpu_path(lua_State *L, kernel *k) {
  cdv_func_info fi;
  kernel_func_info(L, k, &fi);
  if (fi.cpu_path) lua_pushstring(L, fi.cpu_path);
  else lua_pushnil(L);
  return 1;
}

static int kernel_index(lua_State *L) {
  kernel *k = check_kernel(L, 1);
  const char *key = luaL_checkstring(L, 2);
  if (cdv_push_method(L)) return 1;
  if (strcmp(key, "name") == 0) lua_pushstring(L, k->name);
  else if (strcmp(key, "num_params") == 0) lua_pushinteger(L, k->nparams);
  else if (strcmp(key, "params") == 0 || strcmp(key, "param_names") == 0) {
    int names = key[5] == '_';
    lua_createtable(L, k->nparams, 0);
    for (int i = 0; i < k->nparams; i++) {
      lua_pushstring(L, names ? k->sig.params[i].name : k->sig.params[i].type);
      lua_rawseti(L, -2, i + 1);
    }
  } else if (strcmp(key, "attributes") == 0) return push_attributes(L, k);
  else if (strcmp(key, "cpu_path") == 0) return push_cpu_path(L, k);
  else if (strcmp(key, "device") == 0) cdv_push_device(L, k->dev);
  else if (strcmp(key, "module") == 0) lua_getiuservalue(L, 1, 1);
  else return luaL_error(L, "Kernel has no field or method '%s'", key);
  return 1;
}

static int kernel_tostring(lua_State *L) {
  kernel *k = cdv_check_udata(L, 1, CDV_KERNEL, CDV_KERNEL_MAGIC, sizeof(kernel));
  if (k->fn == NULL) {
    lua_pushliteral(L, "Kernel(released)");
    return 1;
  }
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  lua_pushfstring(L, "Kernel(%s(", k->name);
  luaL_addvalue(&b);
  for (int i = 0; i < k->nparams; i++) {
    if (i) luaL_addstring(&b, ", ");
    luaL_addstring(&b, k->sig.params[i].type);
    if (k->sig.params[i].name[0]) {
      if (k->sig.params[i].type[strlen(k->sig.params[i].type) - 1] != '*') luaL_addchar(&b, ' ');
      luaL_addstring(&b, k->sig.params[i].name);
    }
  }
  lua_pushfstring(L, ") on %s)", k->dev->alias);
  luaL_addvalue(&b);
  luaL_pushresult(&b);
  return 1;
}

static int l_type(lua_State *L) {
  static const char *const types[][2] = {{CDV_DEVICE, "Device"}, {CDV_STREAM, "Stream"}, {CDV_EVENT, "Event"},
                                         {CDV_ARRAY, "Array"},   {CDV_MODULE, "Module"}, {CDV_KERNEL, "Kernel"},
                                         {CDV_GRAPH, "Graph"},   {CDV_ERROR, "Error"},
                                         {CDV_LAUNCH_CONFIG, "LaunchConfig"}};
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
static const luaL_Reg kernel_methods[] = {
  {"occupancy", kernel_occupancy}, {"suggest_block_size", kernel_suggest_block_size}, {NULL, NULL}};
static const luaL_Reg functions[] = {
  {"compile", l_compile},
  {"load_module", l_load_module},
  {"kernel_cache_stats", l_kernel_cache_stats},
  {"clear_kernel_cache", l_clear_kernel_cache},
  {"type", l_type},
  {NULL, NULL}
};

int cdv_module_open(lua_State *L) {
  luaL_newmetatable(L, CDV_MODULE);
  static const luaL_Reg mmeta[] = {{"__gc", module_gc}, {"__close", module_gc},
                                   {"__tostring", module_tostring}, {NULL, NULL}};
  luaL_setfuncs(L, mmeta, 0);
  luaL_newlib(L, module_methods);
  cdv_set_index(L, -2, module_index);
  lua_pop(L, 1);
  luaL_newmetatable(L, CDV_KERNEL);
  static const luaL_Reg kmeta[] = {{"__gc", kernel_gc}, {"__tostring", kernel_tostring}, {NULL, NULL}};
  luaL_setfuncs(L, kmeta, 0);
  luaL_newlib(L, kernel_methods);
  lua_pushcfunction(L, launch);
  lua_setfield(L, -2, "launch");
  cdv_set_index(L, -2, kernel_index);
  lua_pushcfunction(L, launch);
  lua_setfield(L, -2, "__call");
  lua_pop(L, 1);
  luaL_setfuncs(L, functions, 0);
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, l_disk_cache_selftest);
  lua_setfield(L, -2, "disk_cache");
  lua_pushcfunction(L, l_cache_trust_selftest);
  lua_setfield(L, -2, "cache_trust");
  lua_setfield(L, -2, "_selftest");
  return 0;
}
