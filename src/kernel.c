/*
 * kernel.c: cudadev.Kernel, one function of a Module, with its checked, allocation-free launch (NOTE [launch
 * plan] in module.c), its attributes and its occupancy. A Kernel keeps its Module value in its user value and
 * holds a reference of its own on the module's record (module.h), so a Module closed by hand does not unload
 * the code under it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdv.h"
#include "sig.h"
#include "mangle.h"
#include "module.h"

/* ------------------------------------------------------------ Kernel values and the launch plan */

typedef struct kparam {
  cdv_pkind kind, elem;
  unsigned size;
  int nelem;
  size_t off;
  int64_t lo, hi; /* integers: the range of the C type (Lua integers are signed: u64 stops at 2^63-1) */
  unsigned elem_size; /* pointers: the element size an Array must have, 0 when any will do */
  cdv_block *watch; /* pointers: this launch's Array block with a canary (NOTE [tail canary]), or NULL */
} kparam;

typedef struct kernel {
  uint64_t magic; /* CDV_KERNEL_MAGIC (NOTE [magic]) */
  cdv_module_t *m; /* one reference of its own (the Module value stays in the user value) */
  cdv_device *dev;
  unsigned generation;
  void *fn;
  int nparams, has_sig, block_hint;
  int reads_tables; /* a vector parameter: its table is read with lua_getfield (NOTE [pinned reads]) */
  kparam *p;
  void **argv; /* kernelParams: argv[i] points at p[i]'s bytes in buf */
  char *buf;
  cdv_sig sig;
  cdv_state *st; /* the state's record, for the launch path (one per lua_State and its threads) */
  uint64_t serial; /* unique in the process: what a LaunchConfig remembers it was resolved for */
  size_t shared_ok; /* dynamic shared memory its launches may take now (NOTE [big shared memory]) */
  int coop_threads, coop_max; /* the last block size checked for a cooperative launch, and the blocks that */
  int coop_sms; /* fit at once with it and coop_shared bytes (0 threads: none checked yet), */
  size_t coop_shared; /* on coop_sms multiprocessors (NOTE [cooperative launch]) */
  double timeout; /* its module's cd.compile timeout, -1 for none (NOTE [launch limits]) */
  const char **pnames; /* its parameters' names, into sig (for the backend's messages) */
  unsigned long long *extents; /* per parameter, this launch's Array's bytes (NOTE [checked memory]) */
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
    case CDV_P_I8:
      p->lo = INT8_MIN;
      p->hi = INT8_MAX;
      break;
    case CDV_P_I16:
      p->lo = INT16_MIN;
      p->hi = INT16_MAX;
      break;
    case CDV_P_I32:
      p->lo = INT32_MIN;
      p->hi = INT32_MAX;
      break;
    case CDV_P_I64:
      p->lo = INT64_MIN;
      p->hi = INT64_MAX;
      break;
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
    snprintf(msg, msglen,
             "'%.100s' has %d parameter%s in the compiled kernel but %d in its source as cudadev "
             "reads it (%.100s): cudadev does not expand macros in a kernel's parameter list; write the "
             "parameters out",
             k->name, n, n == 1 ? "" : "s", k->nparams, sig_text(sig, k->name));
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
      snprintf(msg, msglen,
               "parameter %d ('%.60s') of '%.100s' is %.90s (%u bytes) in the source but %zu bytes "
               "in the compiled kernel",
               i + 1, sp->name, k->name, sp->type, p->size, asz);
      return msg;
    }
    if (p->size == 0 && asz > MAX_PARAM_BYTES) { /* before it is narrowed */
      snprintf(msg, msglen,
               "parameter %d ('%.60s') of '%.100s' is %zu bytes%s; a kernel's parameters may take "
               "at most %d bytes together (CUDA's limit): pass large data in an Array",
               i + 1, sp->name, k->name, asz, asz == CDV_PARAM_HUGE ? " or more" : "", MAX_PARAM_BYTES);
      return msg;
    }
    if (p->size == 0) p->size = (unsigned)asz;
    if (p->size == 0)
      return "a parameter of unknown type (a struct passed by value) needs a driver that reports parameter sizes";
    size_t align = sp->align > 0 ? (size_t)sp->align : p->size >= 8 ? 8 : p->size;
    off = (off + align - 1) / align * align;
    p->off = off;
    off += p->size;
  }
  if (off > MAX_PARAM_BYTES) {
    snprintf(msg, msglen,
             "the parameters of '%.100s' take %zu bytes; a kernel's parameters may take at most %d "
             "bytes together (CUDA's limit): pass large data in an Array",
             k->name, off, MAX_PARAM_BYTES);
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
  if (open == NULL || (brace != NULL && brace < open)) return 0; /* no parameters */
  const char *close = strchr(open, ')');
  if (close == NULL) return -1;
  int n = 0;
  for (const char *q = open; q < close && (q = strstr(q, ".param")) != NULL && q < close; q += 6) n++;
  sig->params = calloc((size_t)n + 1, sizeof *sig->params);
  if (sig->params == NULL) return -1;
  static const struct {
    const char *ptx;
    cdv_pkind kind;
    const char *c;
  } types[] = {{".u64", CDV_P_PTR, "u64 (pointer or integer)"},
               {".b64", CDV_P_PTR, "b64 (pointer or integer)"},
               {".s64", CDV_P_I64, "s64"},
               {".u32", CDV_P_U32, "u32"},
               {".b32", CDV_P_U32, "b32"},
               {".s32", CDV_P_I32, "s32"},
               {".f32", CDV_P_F32, "f32"},
               {".f64", CDV_P_F64, "f64"},
               {".u16", CDV_P_U16, "u16"},
               {".b16", CDV_P_U16, "b16"},
               {".s16", CDV_P_I16, "s16"},
               {".u8", CDV_P_U8, "u8"},
               {".s8", CDV_P_I8, "s8"}};
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
      if (t == sizeof types / sizeof types[0]) {
        free(sig->params);
        sig->params = NULL;
        return -1;
      }
      pa->kind = types[t].kind;
      pa->elem = CDV_P_STRUCT; /* a pointee of unknown type: any Array */
      snprintf(pa->type, sizeof pa->type, "%s", types[t].c);
    }
    const char *nm = end; /* the parameter's name: the identifier before the separator (or '[') */
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

/* (see NOTE [mangled names] in mangle.c) The entry whose mangled name is name: NVRTC's lowered name on a CUDA
 * device, the name mangle.c writes from its parameter list on the cpu device; -1 when none. */
static int mangled_entry(cdv_module_t *m, const char *name) {
  if (strncmp(name, "_Z", 2) != 0) return -1;
  for (int i = 0; i < m->nentries; i++) {
    if (m->img.lowered && m->img.lowered[i] && strcmp(m->img.lowered[i], name) == 0) return i;
    if (!m->have_sigs) continue;
    cdv_sig s;
    char err[256], mangled[512];
    const char *types[64];
    memset(&s, 0, sizeof s);
    int ok = cdv_sig_resolve(&m->sigs, m->entries[i], &s, err, sizeof err) == 0 && !s.extern_c && s.ntparams == 0 &&
             s.nparams <= 64;
    for (int j = 0; ok && j < s.nparams; j++) types[j] = s.params[j].type;
    ok = ok && cdv_mangle(s.name, s.nparams, types, mangled, sizeof mangled) == 0 && strcmp(mangled, name) == 0;
    cdv_sig_clear(&s);
    if (ok) return i;
  }
  return -1;
}

int cdv_push_kernel(lua_State *L, int mod_idx, cdv_module_t *m, const char *name, double timeout) {
  if (m->dev == NULL) return cdv_module_no_device(L, m);
  int idx = -1;
  for (int i = 0; i < m->nentries && idx < 0; i++)
    if (strcmp(m->entries[i], name) == 0) idx = i;
  if (idx < 0 && (idx = mangled_entry(m, name)) >= 0) name = m->entries[idx]; /* m["_Z6kernelPfi"] */
  cdv_sig sig;
  char err[512];
  memset(&sig, 0, sizeof sig);
  int have = m->have_sigs && cdv_sig_resolve(&m->sigs, name, &sig, err, sizeof err) == 0;
  if (!m->have_sigs && m->img.ptx != NULL && m->sig_error[0] == '\0') /* cd.load_module of PTX */
    have = ptx_signature(m->img.ptx, name, &sig) == 0;
  int cubin_only = !m->have_sigs && m->img.ptx == NULL; /* cd.load_module of a cubin: look the name up */
  if (idx < 0 && !cubin_only && (m->have_sigs || m->img.ptx == NULL)) {
    if (have) cdv_sig_clear(&sig);
    if (m->have_sigs && strstr(err, "template") != NULL) return luaL_error(L, "%s", err);
    return luaL_error(L, "module has no kernel '%s' (kernels: %s)", name, cdv_push_joined(L, m->nentries, m->entries));
  }
  kernel *k = lua_newuserdatauv(L, sizeof *k, 1);
  memset(k, 0, sizeof *k);
  k->magic = CDV_KERNEL_MAGIC;
  luaL_setmetatable(L, CDV_KERNEL); /* closed (fn NULL) until everything below succeeded */
  lua_pushvalue(L, mod_idx);
  lua_setiuservalue(L, -2, 1);
  k->sig = sig; /* owned by k from here: freed by __gc */
  k->has_sig = have;
  cdv_track_late(L, -1); /* NOTE [objects made in finalizers] */
  cdv_module_ref(m); /* a Module closed by hand must not unload the code under its Kernels */
  k->m = m;
  k->dev = m->dev;
  k->generation = m->generation;
  k->st = cdv_get_state(L);
  cdv_state_ref(k->st); /* (see NOTE [state record]) its launch path reads the record */
  static uint64_t serials;
  k->serial = __atomic_add_fetch(&serials, 1, __ATOMIC_RELAXED);
  k->timeout = timeout;
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
    return luaL_error(
        L, "cannot read the parameter list of '%s': %s", name,
        m->have_sigs ? err
        : m->img.ptx == NULL && m->img.cubin != NULL && m->sig_error[0] == 0
            ? "a module loaded from a cubin has no source (load it from PTX or compile it with cd.compile)"
        : m->sig_error[0] ? m->sig_error
                          : "no source");
  }
  const char *msg = build_plan(k, &k->sig, err, sizeof err);
  if (msg == NULL && !(k->pnames = calloc((size_t)k->nparams + 1, sizeof *k->pnames))) msg = "not enough memory";
  if (msg == NULL && !(k->extents = calloc((size_t)k->nparams + 1, sizeof *k->extents))) msg = "not enough memory";
  if (msg != NULL) {
    k->fn = NULL;
    return luaL_error(L, "%s", msg);
  }
  for (int i = 0; i < k->nparams; i++) k->pnames[i] = k->sig.params[i].name;
  cdv_live_add(CDV_LIVE_KERNEL, 1);
  return 1;
}

static int kernel_gc(lua_State *L) {
  kernel *k = cdv_test_magic(L, 1, sizeof *k, CDV_KERNEL_MAGIC);
  if (k == NULL) return 0; /* __gc never raises (NOTE [magic]) */
  if (k->fn != NULL) cdv_live_add(CDV_LIVE_KERNEL, -1);
  free(k->p);
  free(k->buf);
  free(k->argv);
  free(k->pnames);
  free(k->extents);
  k->pnames = NULL;
  k->extents = NULL;
  k->p = NULL;
  k->buf = NULL;
  k->argv = NULL;
  if (k->has_sig) cdv_sig_clear(&k->sig);
  k->has_sig = 0;
  k->fn = NULL;
  if (k->m != NULL) cdv_module_unref(k->m);
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
  switch (size) { /* little-endian: the low bytes are the value */
    case 1: *dst = (char)v; break;
    case 2: {
      int16_t x = (int16_t)v;
      memcpy(dst, &x, 2);
      break;
    }
    case 4: {
      int32_t x = (int32_t)v;
      memcpy(dst, &x, 4);
      break;
    }
    default: memcpy(dst, &v, 8);
  }
}

static void put_float(lua_State *L, kernel *k, int i, int idx, char *dst, cdv_pkind t) {
  if (lua_type(L, idx) != LUA_TNUMBER) arg_error(L, k, i, got_value(L, idx)); /* no strings, as C would not */
  lua_Number v = lua_tonumberx(L, idx, NULL);
  switch (t) {
    case CDV_P_F64: memcpy(dst, &v, 8); break;
    case CDV_P_F32: {
      float f = (float)v;
      memcpy(dst, &f, 4);
      break;
    }
    default: { /* f16 / bf16 through a one-element conversion */
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
  k->p[i].watch = NULL;
  k->extents[i] = CDV_EXTENT_NONE;
  if (a != NULL) {
    if (a->block == NULL) arg_error(L, k, i, "a freed Array");
    cdv_block *b = a->block;
    if (b->generation != b->dev->generation) arg_error(L, k, i, "a stale Array (device was reset)");
    /* (see NOTE [backend properties]) a GPU reaches pinned host memory; host code reaches host memory */
    if (b->dev != k->dev && !(b->kind == CDV_MEM_PINNED && !k->dev->be->host_memory) &&
        !(b->dev->be->host_memory && k->dev->be->host_memory) &&
        !cdv_peer_reachable(L, b->dev, k->dev, b->dev->is_mempool_supported)) {
      luaL_error(L,
                 "bad argument #%d to '%s' ('%s': array is on %s but the kernel runs on %s; move it with "
                 "a:to(\"%s\")%s)",
                 i + 1, k->name, k->sig.params[i].name, b->dev->alias, k->dev->alias, k->dev->alias,
                 b->dev->be->peer_set && k->dev->be->peer_set
                     ? lua_pushfstring(L, ", or let %s reach it with cd.set_%s_access_enabled(\"%s\", \"%s\", true)",
                                       k->dev->alias, b->dev->is_mempool_supported ? "mempool" : "peer", b->dev->alias,
                                       k->dev->alias)
                     : "");
    }
    if (k->p[i].elem_size && k->p[i].elem_size != cdv_dtypes[a->dtype].size)
      arg_error(L, k, i, lua_pushfstring(L, "an Array of %s", cdv_dtypes[a->dtype].name));
    if (!cdv_array_contiguous(a)) /* a kernel indexes a pointer as C-ordered memory: NOTE [strided views] */
      arg_error(L, k, i, "a non-contiguous Array; pass a:contiguous()");
    ptr = a->data;
    k->extents[i] = (unsigned long long)a->size * cdv_dtypes[a->dtype].size;
    cdv_block_used(b, k->dev, stream);
    if (b->slack) k->p[i].watch = b;
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
    if (p->elem == CDV_P_F32 || p->elem == CDV_P_F64 || p->elem == CDV_P_F16)
      put_float(L, k, i, top, dst + j * es, p->elem);
    else
      put_int(L, k, i, top, dst + j * es, p, es);
    lua_pop(L, 1);
  }
}

static void put_arg(lua_State *L, kernel *k, int i, int idx, void *stream) {
  char *dst = k->buf + k->p[i].off;
  switch (k->p[i].kind) {
    case CDV_P_PTR: put_pointer(L, k, i, idx, dst, stream); break;
    case CDV_P_F16:
    case CDV_P_BF16:
    case CDV_P_F32:
    case CDV_P_F64: put_float(L, k, i, idx, dst, k->p[i].kind); break;
    case CDV_P_BOOL:
      if (!lua_isboolean(L, idx)) arg_error(L, k, i, got_value(L, idx));
      *dst = (char)lua_toboolean(L, idx);
      break;
    case CDV_P_VEC: put_vec(L, k, i, idx, dst); break;
    case CDV_P_STRUCT: {
      size_t n;
      const char *s = lua_type(L, idx) == LUA_TSTRING ? lua_tolstring(L, idx, &n) : NULL;
      if (s == NULL || n != k->p[i].size)
        arg_error(L, k, i,
                  lua_pushfstring(L, "%s (pass a string of exactly %d bytes, e.g. from string.pack)", got_value(L, idx),
                                  (int)k->p[i].size));
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
    return lua_pushfstring(L,
                           "'shared' must be 0 to %I bytes (%s allows %I per block, less the kernel's %I bytes of "
                           "static shared memory)",
                           (lua_Integer)limit, d->alias, (lua_Integer)d->max_shared_optin,
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
static void check_cooperative(lua_State *L, kernel *k, const unsigned grid[3], const unsigned block[3], size_t shared) {
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
    cfg_error(L, k,
              lua_pushfstring(L,
                              "cooperative launch of %I blocks exceeds the %d blocks that fit on %s at once "
                              "(%d per SM x %d SMs)",
                              (lua_Integer)n, k->coop_max, d->alias, k->coop_sms ? k->coop_max / k->coop_sms : 0,
                              k->coop_sms));
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
    cfg_error(L, k,
              lua_pushfstring(L, "the kernel was compiled for %s, not %s; compile it with device = \"%s\"", d->alias,
                              c->device->alias, c->device->alias));
  if ((uint64_t)c->shared > k->shared_ok) { /* NOTE [big shared memory]; a LaunchConfig did not know the device */
    const char *limit = allow_shared(L, k, (size_t)c->shared);
    if (limit != NULL) cfg_error(L, k, limit);
  }
  const uint64_t *g = c->grid, *b = c->block;
  uint64_t gd[3], bd[3];
  if (c->has_dim) { /* total threads: choose the block, round the grid up; the kernel checks bounds */
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
    cfg_error(L, k,
              lua_pushfstring(L, "a block of %I threads exceeds the device limit of %d", (lua_Integer)threads,
                              d->max_threads_per_block));
  for (int j = 0; j < 3; j++) {
    if (b[j] > (uint64_t)d->max_block[j])
      cfg_error(L, k,
                lua_pushfstring(L, "block dimension %c of %I exceeds the device limit of %d", "xyz"[j],
                                (lua_Integer)b[j], d -> max_block[j]));
    if (g[j] > (uint64_t)d->max_grid[j])
      cfg_error(L, k,
                lua_pushfstring(L, "grid dimension %c of %I exceeds the device limit of %d", "xyz"[j],
                                (lua_Integer)g[j], d -> max_grid[j]));
    grid[j] = (unsigned)g[j];
    block[j] = (unsigned)b[j];
  }
  if (c->cooperative) check_cooperative(L, k, grid, block, (size_t)c->shared);
  if (c->magic == CDV_LCFG_MAGIC) { /* a LaunchConfig's memo is the one part of it that changes */
    cdv_launch_config *memo = (cdv_launch_config *)c;
    memcpy(memo->memo_grid, grid, sizeof memo->memo_grid);
    memcpy(memo->memo_block, block, sizeof memo->memo_block);
    memo->memo_kernel = k->serial;
  }
}

/* (see NOTE [tail canary] in memory.c) after a launch on a device that keeps canaries: an error naming the first
 * Array argument whose block's canary changed; every changed one is written again, so a launch that failed
 * (whose own error wins) leaves none for the next. */
static int tail_check(kernel *k, cdv_err *e) {
  int rc = 0;
  for (int i = 0; i < k->nparams; i++) {
    cdv_block *b = k->p[i].watch;
    size_t first, last;
    if (b == NULL || !cdv_canary_check(b, &first, &last) || rc) continue;
    rc = cdv_fail(
        e, "cpu.launch", 700, "CUDA_ERROR_ILLEGAL_ADDRESS",
        "kernel '%s' wrote past the end of argument #%d ('%s', an array of %zu bytes): bytes %zu to %zu "
        "past its end changed (seen after the launch, in the canary kept there; which thread wrote is not known)",
        k->name, i + 1, k->sig.params[i].name, b->bytes, first, last);
  }
  return rc;
}

/* The backend's launch result, then the canaries of a device that keeps them (NOTE [tail canary]). */
static int launched(kernel *k, int rc, cdv_err *e) {
  if (k->dev->be->mem_slack == NULL) return rc;
  cdv_err later;
  return tail_check(k, rc ? &later : e) || rc ? -1 : 0;
}

/* The end of a launch with cooperative = true (NOTE [cooperative launch]), out of the common path. */
static __attribute__((noinline)) int launch_cooperative(lua_State *L, kernel *k, const cdv_launch_config *c,
                                                        const unsigned grid[3], const unsigned block[3], void *stream,
                                                        const cdv_launch_opts *o) {
  cdv_device *d = k->dev;
  cdv_err e;
  if (launched(k, d->be->launch_cooperative(d, k->fn, grid, block, (unsigned)c->shared, stream, k->argv, o, &e), &e))
    return cdv_raise(L, d, &e);
  if (k->st->launch_blocking && d->be->stream_synchronize(d, stream, &e) != 0) return cdv_raise(L, d, &e);
  return 0;
}

/* k:launch(config, ...) / k(config, ...): checks everything, then one backend call (NOTE [launch plan]) */
static int launch(lua_State *L) {
  kernel *k = cdv_test_magic(L, 1, sizeof *k, CDV_KERNEL_MAGIC);
  if (k == NULL || k->fn == NULL) k = check_kernel(L, 1); /* the slow path words the error */
  cdv_device *d = k->dev;
  if (k->generation != d->generation) return luaL_error(L, "stale Kernel: device was reset");
  int nargs = lua_gettop(L) - 2;
  cdv_state *st = k->st;
  cdv_launch_config tmp;
  /* the configuration first: k(x, n) without one would be told it has too few arguments */
  const cdv_launch_config *c = cdv_get_launch_config(L, 2, st, k->name, d->max_shared_optin, &tmp);
  if (nargs != k->nparams)
    return luaL_error(L, "wrong number of arguments to '%s' (expected %d, got %d)", k->name, k->nparams,
                      nargs < 0 ? 0 : nargs);
  unsigned grid[3], block[3];
  resolve_config(L, k, c, grid, block);
  void *stream; /* the current stream's handle without following its pointer: NOTE [current stream cache] */
  if (c->stream)
    stream = cdv_stream_for(L, d, c->stream);
  else if (st->cur_set[d->index] && st->cur_generation[d->index] == d->generation && !st->coscopes)
    stream = st->cur_handle[d->index]; /* (a coroutine's own scope: see NOTE [coroutine scopes]) */
  else
    stream = cdv_current_stream(L, d)->handle;
  for (int i = 0; i < k->nparams; i++) put_arg(L, k, i, i + 3, stream);
  /* (see NOTE [pinned reads]) a vector's table is read with lua_getfield, whose __index may run Lua that frees an Array
   * put before it (or a finalizer may): the pointers are checked again, so no freed memory reaches the kernel */
  if (k->reads_tables)
    for (int i = 0; i < k->nparams; i++)
      if (k->p[i].kind == CDV_P_PTR) put_arg(L, k, i, i + 3, stream);
  cdv_device_check(L, d); /* the backend's launch makes the context current: one driver call, not two */
  cdv_err e;
  cdv_launch_opts o = {c->timeout >= 0 ? c->timeout : k->timeout, st->sandbox, k->nparams, k->pnames, k->extents};
  if (__builtin_expect(c->cooperative, 0)) return launch_cooperative(L, k, c, grid, block, stream, &o);
  if (launched(k, d->be->launch(d, k->fn, grid, block, (unsigned)c->shared, stream, k->argv, &o, &e), &e))
    return cdv_raise(L, d, &e);
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
 * small grids over more SMs), as cuOccupancyMaxPotentialBlockSize would choose. A device without
 * multiprocessors (the cpu device) runs a block's threads as one loop, the vector loop of its fast paths
 * (NOTE [fast paths]): blocks of 32 waste it (saxpy with a {dim = 2^24} launch: 4.8 ms at 32, 3.3 ms at 256
 * on the machine), so ties go to the larger block there, up to 256 (per-thread arrays of fission grow
 * with the block, CDV_CPU_FIS_STACK in all). */
static int suggest_block(lua_State *L, kernel *k, size_t shared) {
  int best = 32, best_threads = -1, cpu = !k->dev->be->sm_resources;
  int most = cpu && k->dev->max_threads_per_block > 256 ? 256 : k->dev->max_threads_per_block;
  for (int b = 32; b <= most; b += 32) {
    int t = kernel_occupancy_blocks(L, k, b, shared) * b;
    if (t > best_threads || (cpu && t == best_threads)) {
      best = b;
      best_threads = t;
    }
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
  if (k->dev->be->sm_resources) k->dev->be->sm_resources(k->dev, &max_threads, &regs_per_sm, &smem_per_sm);
  cdv_func_info fi;
  memset(&fi, 0, sizeof fi);
  if (k->dev->be->func_info(k->dev, k->fn, &fi, &e) != 0) return cdv_raise(L, k->dev, &e);
  int warps = (block + warp - 1) / warp;
  int by_warps = max_threads / (warps * warp);
  int by_regs = fi.num_regs ? regs_per_sm / (fi.num_regs * warps * warp) : 1 << 30;
  size_t smem = shared + fi.shared_size_bytes;
  int by_smem = smem ? (int)(smem_per_sm / smem) : 1 << 30;
  /* a device kind without multiprocessors (NOTE [optional operations]) is limited by its own kind */
  const char *limit = !k->dev->be->sm_resources                   ? k->dev->be->kind
                      : by_regs <= by_warps && by_regs <= by_smem ? "regs"
                      : by_smem <= by_warps                       ? "smem"
                                                                  : "warps";
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

/* k.cpu_path: how the cpu device runs the kernel's threads (NOTE [kernel paths] in cpu_scan.c); nil elsewhere.
 * reason: k.cpu_reason, what keeps it off the fastest path (simd or fission), nil there and elsewhere */
static int push_cpu_path(lua_State *L, kernel *k, int reason) {
  cdv_func_info fi;
  kernel_func_info(L, k, &fi);
  const char *v = reason ? fi.cpu_reason : fi.cpu_path;
  if (v)
    lua_pushstring(L, v);
  else
    lua_pushnil(L);
  return 1;
}

static int kernel_index(lua_State *L) {
  kernel *k = check_kernel(L, 1);
  const char *key = luaL_checkstring(L, 2);
  if (cdv_push_method(L)) return 1;
  if (strcmp(key, "name") == 0)
    lua_pushstring(L, k->name);
  else if (strcmp(key, "num_params") == 0)
    lua_pushinteger(L, k->nparams);
  else if (strcmp(key, "params") == 0 || strcmp(key, "param_names") == 0) {
    int names = key[5] == '_';
    lua_createtable(L, k->nparams, 0);
    for (int i = 0; i < k->nparams; i++) {
      lua_pushstring(L, names ? k->sig.params[i].name : k->sig.params[i].type);
      lua_rawseti(L, -2, i + 1);
    }
  } else if (strcmp(key, "attributes") == 0)
    return push_attributes(L, k);
  else if (strcmp(key, "cpu_path") == 0 || strcmp(key, "cpu_reason") == 0)
    return push_cpu_path(L, k, key[4] == 'r');
  else if (strcmp(key, "device") == 0)
    cdv_push_device(L, k->dev);
  else if (strcmp(key, "module") == 0)
    lua_getiuservalue(L, 1, 1);
  else
    return luaL_error(L, "Kernel has no field or method '%s'", key);
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

static const luaL_Reg kernel_methods[] = {{"occupancy", kernel_occupancy},
                                          {"suggest_block_size", kernel_suggest_block_size},
                                          {"launch", launch},
                                          {NULL, NULL}};

/* The Kernel metatable (cdv_module_open calls this: cd.compile and friends make Kernels). */
void cdv_kernel_open(lua_State *L) {
  static const luaL_Reg kmeta[] = {
      {"__gc", kernel_gc}, {"__tostring", kernel_tostring}, {"__call", launch}, {NULL, NULL}};
  cdv_new_class(L, CDV_KERNEL, kmeta, kernel_methods, kernel_index); /* NOTE [class registration] */
  lua_pop(L, 1);
}
