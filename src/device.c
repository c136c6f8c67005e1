/*
 * device.c: cudadev.Device, the process-wide device registry, the per-state default device and the
 * device-selection functions (Warp's device model, PyCUDA's device choice).
 *
 * Devices are process-wide C structs (contexts are process-wide); a Device value is a small userdata
 * that points at one, cached per lua_State so that two Device values for one device are the same value.
 */
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cdv.h"

#define MAXDEV CDV_MAXDEV

/* NOTE [registry storage]: a device lives as long as the process (contexts are process-wide, and Device values,
 * arrays and streams of every lua_State point at it), so the registry's devices are static slots, never
 * allocated and never freed: building the registry or adding a mapped device cannot fail for want of memory (it
 * was abort() on a failed calloc), and a full registry is the one refusal ("too many devices"). */
static cdv_device slots[MAXDEV];
static cdv_device *registry[MAXDEV];
static int ndevices, ncuda;
static pthread_once_t registry_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;

static void init_cpu(cdv_device *d) {
  d->be = &cdv_backend_cpu;
  d->ordinal = -1;
  snprintf(d->alias, sizeof d->alias, "cpu");
  snprintf(d->name, sizeof d->name, "host CPU (%s)", CDV_HOST_ARCH);
  d->warp_size = 32;
  d->max_threads_per_block = 1024;
  d->max_block[0] = d->max_block[1] = 1024;
  d->max_block[2] = 64;
  d->max_grid[0] = 0x7fffffff;
  d->max_grid[1] = d->max_grid[2] = 65535;
  d->max_shared_per_block = 48 * 1024;
  d->max_shared_optin = 1024 * 1024;
  d->is_uva = 1;
  size_t free_b = 0, total = 0;
  cdv_err e;
  if (d->be->mem_info(d, &free_b, &total, &e) == 0) d->total_memory = total;
}

/* NOTE [fork]: the CUDA driver's state belongs to the process that initialised it; a child made by
 * fork() must not touch it (calls would fail or hang). A fork handler marks the child, and every use of
 * a CUDA device there is refused with a clear message. The cpu device keeps working. */
static volatile int forked;

static void mark_forked(void) { forked = 1; }

/* Builds the registry once per process: cpu first, then every CUDA device the driver reports. The
 * driver is opened here, lazily, not at require time. */
static void registry_init(void) {
  pthread_atfork(NULL, NULL, mark_forked);
  cdv_device *cpu = &slots[0];
  init_cpu(cpu);
  registry[ndevices++] = cpu;
  int n = cdv_cuda_device_count();
  for (int i = 0; i < n && ndevices < MAXDEV; i++) {
    cdv_device *d = &slots[ndevices];
    cdv_err e;
    d->be = &cdv_backend_cuda;
    if (cdv_cuda_fill_device(d, i, &e) != 0) {
      memset(d, 0, sizeof *d); /* the slot stays free for the next one */
      continue;
    }
    d->index = ndevices;
    registry[ndevices++] = d;
    ncuda++;
  }
}

int cdv_device_count_all(void) {
  pthread_once(&registry_once, registry_init);
  return ndevices;
}

cdv_device *cdv_device_at(int index) { return index >= 0 && index < cdv_device_count_all() ? registry[index] : NULL; }

cdv_device *cdv_cpu(void) { return cdv_device_at(0); }

const cdv_backend *cdv_arch_backend(void) { return &cdv_backend_cuda; }

int cdv_cuda_count(void) {
  cdv_device_count_all();
  return ncuda;
}

/* Adds a mapped device (map_cuda_device) in the next static slot (NOTE [registry storage]); returns NULL when
 * the registry is full. */
cdv_device *cdv_device_add(const cdv_device *proto) {
  cdv_device_count_all();
  pthread_mutex_lock(&registry_lock);
  cdv_device *d = NULL;
  if (ndevices < MAXDEV) {
    d = &slots[ndevices];
    *d = *proto;
    d->index = ndevices;
    registry[ndevices++] = d;
  }
  pthread_mutex_unlock(&registry_lock);
  return d;
}

/* ------------------------------------------------------------ per-state default device */

static cdv_device *cuda_by_ordinal(int ordinal) {
  for (int i = 1; i < cdv_device_count_all(); i++)
    if (registry[i]->is_primary && registry[i]->ordinal == ordinal) return registry[i];
  return NULL;
}

static cdv_device *by_alias(const char *s) {
  for (int i = 0; i < cdv_device_count_all(); i++)
    if (strcmp(registry[i]->alias, s) == 0) return registry[i];
  return NULL;
}

/* The device whose context is current on this thread, else the first CUDA device: what "cuda" means. */
static cdv_device *current_cuda(void) {
  void *ctx;
  if (cdv_cuda_count() == 0) return NULL;
  if ((ctx = cdv_cuda_current_context()) != NULL)
    for (int i = 1; i < ndevices; i++)
      if (registry[i]->ctx == ctx) return registry[i];
  return cuda_by_ordinal(0);
}

static const char *no_device(lua_State *L, const char *spec) {
  int n = cdv_cuda_count();
  if (n == 0)
    return lua_pushfstring(L, "no device '%s' (no CUDA device: %s)", spec,
                           cdv_cuda_load() == 0 ? "the driver reports none" : cdv_cuda_why());
  return lua_pushfstring(L, "no device '%s' (%d CUDA device%s: cuda:0%s%s)", spec, n, n == 1 ? "" : "s",
                         n > 1 ? " to cuda:" : "", n > 1 ? lua_pushfstring(L, "%d", n - 1) : "");
}

/* A spec as compare_spec reads it: lowercase, letters and digits only, "gpu" read as "cuda". */
static void spec_key(const char *s, char *out, size_t n) {
  size_t j = 0;
  if (strncasecmp(s, "gpu", 3) == 0) {
    snprintf(out, n, "cuda");
    j = strlen(out);
    s += 3;
  }
  for (; *s && j + 1 < n; s++)
    if (isalnum((unsigned char)*s)) out[j++] = (char)tolower((unsigned char)*s);
  out[j] = '\0';
}

/* NOTE [device specs]: a string of no spec form at all ("gpu", "CPU", "cuda0", a mistyped alias) is answered
 * with the devices that exist and the one it most likely meant, not with the driver search that a missing
 * "cuda:N" gets (no_device): `no device 'CPU' (did you mean "cpu"? devices: "cpu", "cuda:0"; "cuda" is the
 * current CUDA device)`. */
static const char *unknown_spec(lua_State *L, const char *spec) {
  char want[64], key[64];
  const char *guess = NULL;
  int n = cdv_cuda_count(), listed = 0;
  luaL_Buffer b;
  spec_key(spec, want, sizeof want);
  if (n > 0 && strcmp(want, "cuda") == 0) guess = "cuda";
  for (int i = 0; guess == NULL && *want && i < cdv_device_count_all(); i++) {
    spec_key(registry[i]->alias, key, sizeof key);
    if (!registry[i]->unmapped && strcmp(key, want) == 0) guess = registry[i]->alias;
  }
  luaL_buffinit(L, &b);
  lua_pushfstring(L, "no device '%s' (", spec);
  luaL_addvalue(&b);
  if (guess != NULL) {
    lua_pushfstring(L, "did you mean \"%s\"? ", guess);
    luaL_addvalue(&b);
  }
  luaL_addstring(&b, "devices: ");
  for (int i = 0; i < cdv_device_count_all(); i++) {
    if (registry[i]->unmapped) continue;
    if (listed++ == 8) {
      luaL_addstring(&b, ", ...");
      break;
    }
    lua_pushfstring(L, "%s\"%s\"", listed > 1 ? ", " : "", registry[i]->alias);
    luaL_addvalue(&b);
  }
  luaL_addstring(&b,
                 n > 0 ? "; \"cuda\" is the current CUDA device)" : "; no CUDA device, cd.is_available() says why)");
  luaL_pushresult(&b);
  return lua_tostring(L, -1);
}

/* Resolves a spec string; NULL with a message pushed when there is no such device. */
static cdv_device *resolve_string(lua_State *L, const char *s) {
  cdv_device *d = NULL;
  if (strcmp(s, "cuda") == 0)
    d = current_cuda();
  else if (strncmp(s, "cuda:", 5) == 0) {
    char *end;
    long o = strtol(s + 5, &end, 10);
    if (*end == '\0' && end != s + 5 && o >= 0 && o < MAXDEV) d = cuda_by_ordinal((int)o);
    if (d == NULL) d = by_alias(s);
  } else if ((d = by_alias(s)) == NULL) {
    unknown_spec(L, s); /* NOTE [device specs] */
    return NULL;
  }
  if (d == NULL) no_device(L, s);
  return d;
}

/* A Device value: the registry's device behind a tag (NOTE [magic]). */
typedef struct device_ud {
  uint64_t magic;
  cdv_device *d;
} device_ud;

static cdv_device *resolve(lua_State *L, int arg, int *ok) {
  *ok = 1;
  switch (lua_type(L, arg)) {
    case LUA_TSTRING: {
      size_t n;
      const char *spec = lua_tolstring(L, arg, &n);
      if (strlen(spec) != n) { /* "cpu\0x" is no "cpu" */
        *ok = 0;
        lua_pushliteral(L, "device name contains a NUL byte");
        return NULL;
      }
      cdv_device *d = resolve_string(L, spec);
      *ok = d != NULL;
      return d;
    }
    case LUA_TNUMBER: {
      int isint;
      lua_Integer o = lua_tointegerx(L, arg, &isint);
      cdv_device *d = isint && o >= 0 && o < MAXDEV ? cuda_by_ordinal((int)o) : NULL;
      if (d == NULL) no_device(L, lua_pushfstring(L, "cuda:%s", lua_tostring(L, arg)));
      *ok = d != NULL;
      return d;
    }
    case LUA_TUSERDATA: {
      device_ud *p = cdv_test_magic(L, arg, sizeof *p, CDV_DEVICE_MAGIC);
      if (p != NULL) return p->d;
    } /* fall through */
    default:
      *ok = 0;
      lua_pushfstring(L, "device expected (\"cpu\", \"cuda:N\", an ordinal or a Device), got %s", cdv_typename(L, arg));
      return NULL;
  }
}

/* NOTE [checked values] in cdv.h: any device spec */
const char *cdv_device_problem(lua_State *L, int idx, cdv_device **out) {
  int ok;
  *out = resolve(L, idx, &ok);
  return ok ? NULL : lua_tostring(L, -1);
}

cdv_device *cdv_check_device(lua_State *L, int arg) {
  cdv_device *d;
  const char *why = cdv_device_problem(L, arg, &d);
  if (why != NULL) luaL_argerror(L, arg, why);
  return d;
}

cdv_device *cdv_opt_device_field(lua_State *L, int t, const char *fname) {
  cdv_device *d = NULL;
  if (cdv_opt_field(L, t, "device") != LUA_TNIL) {
    const char *why = cdv_device_problem(L, -1, &d);
    if (why != NULL) cdv_opt_error(L, "device", fname, why);
  }
  lua_pop(L, 1);
  return d;
}

/* First CUDA device whose context can be created (a busy exclusive-process device is skipped, as PyCUDA
 * tries each in turn), else cpu. */
static cdv_device *first_usable(void) {
  for (int i = 1; i < cdv_device_count_all(); i++) {
    cdv_err e;
    if (registry[i]->is_primary && registry[i]->be->activate(registry[i], &e) == 0) return registry[i];
  }
  return cdv_cpu();
}

static cdv_device *from_env(lua_State *L, const char *var, const char *v, int ordinal_only) {
  char *end;
  long o = strtol(v, &end, 10);
  int top = lua_gettop(L);
  cdv_device *d = NULL;
  if (*end == '\0' && end != v)
    d = o >= 0 && o < MAXDEV ? cuda_by_ordinal((int)o) : NULL;
  else if (!ordinal_only)
    d = resolve_string(L, v);
  lua_settop(L, top);
  if (d == NULL)
    luaL_error(L, "%s='%s' names no device (%s)", var, v,
               cdv_cuda_count() ? "use cpu or cuda:N" : "no CUDA device is present; use cpu");
  return d;
}

/* NOTE [default device]: CUDADEV_DEVICE (any spec), else CUDA_DEVICE (an ordinal), else the integer in
 * ~/.cuda-device, else the one in ~/.cuda_device (PyCUDA's name for the same file), else the first CUDA
 * device whose context can be created, else cpu. Decided on first need, so that `require` never touches the
 * driver. */
static cdv_device *initial_default(lua_State *L) {
  const char *v = getenv("CUDADEV_DEVICE");
  if (v != NULL && *v) return from_env(L, "CUDADEV_DEVICE", v, 0);
  if ((v = getenv("CUDA_DEVICE")) != NULL && *v) return from_env(L, "CUDA_DEVICE", v, 1);
  const char *home = getenv("HOME");
  static const char *const files[] = {".cuda-device", ".cuda_device"};
  for (int k = 0; home != NULL && k < 2; k++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", home, files[k]);
    FILE *f = fopen(path, "r");
    int o;
    if (f != NULL) {
      int got = fscanf(f, "%d", &o);
      fclose(f);
      if (got == 1 && cuda_by_ordinal(o) != NULL) return cuda_by_ordinal(o);
    }
  }
  return first_usable();
}

cdv_device *cdv_default_device(lua_State *L) { return cdv_state_device(L, cdv_get_state(L)); }

/* (see NOTE [coroutine scopes]) the running coroutine's own default device (its index), or -1 */
static int scoped_device(lua_State *L) {
  int i = -1, isint;
  if (!cdv_coscope_push(L, 0, 0)) return -1;
  lua_rawgeti(L, -1, 0);
  lua_Integer v = lua_tointegerx(L, -1, &isint);
  if (isint && v >= 0 && v < cdv_device_count_all() && !registry[v]->unmapped) i = (int)v;
  lua_pop(L, 2);
  return i;
}

cdv_device *cdv_state_device(lua_State *L, cdv_state *st) {
  int i;
  if (st->coscopes && (i = scoped_device(L)) >= 0) return registry[i];
  if (st->default_device < 0) st->default_device = initial_default(L)->index;
  return registry[st->default_device];
}

cdv_device *cdv_opt_device(lua_State *L, int arg) {
  return lua_isnoneornil(L, arg) ? cdv_default_device(L) : cdv_check_device(L, arg);
}

static void context_gone(lua_State *L, cdv_device *d) {
  luaL_error(L,
             "%s: its CUDA context was destroyed by the program that made it; objects made on it can no "
             "longer be used",
             d->alias);
}

/* The checks of cdv_device_use without making the context current, for hot paths whose backend call
 * activates the context itself (every cuda backend operation does). */
void cdv_device_check(lua_State *L, cdv_device *d) {
  if (forked && d->be->has_contexts) /* (see NOTE [fork]) a context is the driver's state */
    luaL_error(L,
               "%s cannot be used in a child process made by fork() (the CUDA driver belongs to the "
               "parent); use the cpu device here, or start a new process",
               d->alias);
  if (d->sticky) cdv_raise_sticky(L, d);
  if (d->gone) context_gone(L, d);
}

/* Every operation on a device goes through here: a sticky fault answers with the recorded error, and
 * the context is created and made current only now, when work needs it. A mapped context is first checked
 * to be alive (NOTE [adopted contexts]). */
void cdv_device_use(lua_State *L, cdv_device *d) {
  cdv_err e;
  if (d->canary != 0 && !cdv_cuda_context_alive(d)) context_gone(L, d);
  cdv_device_check(L, d);
  if (d->be->activate(d, &e) != 0) cdv_raise(L, d, &e);
}

/* ------------------------------------------------------------ Device values */

void cdv_push_device(lua_State *L, cdv_device *d) {
  luaL_getsubtable(L, LUA_REGISTRYINDEX, "cudadev.device_values"); /* made anew if a script removed it */
  if (lua_rawgeti(L, -1, d->index) == LUA_TNIL) {
    lua_pop(L, 1);
    device_ud *p = lua_newuserdatauv(L, sizeof *p, 0);
    *p = (device_ud){CDV_DEVICE_MAGIC, d};
    luaL_setmetatable(L, CDV_DEVICE);
    lua_pushvalue(L, -1);
    lua_rawseti(L, -3, d->index);
  }
  lua_remove(L, -2);
}

static cdv_device *self(lua_State *L) {
  return ((device_ud *)cdv_check_udata(L, 1, CDV_DEVICE, CDV_DEVICE_MAGIC, sizeof(device_ud)))->d;
}

static int device_tostring(lua_State *L) {
  cdv_device *d = self(L);
  char mem[32];
  if (d->ordinal < 0) /* the cpu device */
    lua_pushfstring(L, "Device(cpu \"%s\" %s)", d->name, cdv_fmt_bytes(mem, sizeof mem, (double)d->total_memory));
  else
    lua_pushfstring(L, "Device(%s \"%s\" sm_%d %s)", d->alias, d->name, d->arch,
                    cdv_fmt_bytes(mem, sizeof mem, (double)d->total_memory));
  return 1;
}

static int device_eq(lua_State *L) {
  device_ud *a = cdv_test_magic(L, 1, sizeof *a, CDV_DEVICE_MAGIC),
            *b = cdv_test_magic(L, 2, sizeof *b, CDV_DEVICE_MAGIC);
  lua_pushboolean(L, a && b && a->d == b->d);
  return 1;
}

static int device_synchronize(lua_State *L) {
  cdv_device *d = self(L);
  cdv_device_use(L, d);
  cdv_try(L, d, cdv_wait_device(L, d, &e_)); /* NOTE [interruptible waits] */
  cdv_callbacks_drain(L); /* NOTE [stream callbacks] */
  return 0;
}

static int device_memory_info(lua_State *L) {
  cdv_device *d = self(L);
  size_t free_b = 0, total = 0;
  if (d->be->has_contexts) cdv_device_use(L, d);
  cdv_try(L, d, d->be->mem_info(d, &free_b, &total, &e_));
  lua_pushinteger(L, (lua_Integer)free_b);
  lua_pushinteger(L, (lua_Integer)total);
  return 2;
}

static int device_attribute(lua_State *L) {
  cdv_device *d = self(L);
  const char *name = luaL_checkstring(L, 2);
  int id = cdv_cuda_attribute_id(name), v = 0;
  if (id >= 0) {
    if (d->be->attribute == NULL) /* NOTE [optional operations] */
      return luaL_error(L, "the %s device has no CUDA attribute '%s'", d->be->kind, name);
    cdv_try(L, d, d->be->attribute(d, id, &v, &e_));
    lua_pushinteger(L, v);
    return 1;
  }
  return luaL_argerror(L, 2,
                       lua_pushfstring(L,
                                       "unknown attribute '%s' (any CU_DEVICE_ATTRIBUTE_* "
                                       "name, lowercase, without the prefix)",
                                       name));
}

static int push_optstring(lua_State *L, const char *s) {
  if (*s)
    lua_pushstring(L, s);
  else
    lua_pushnil(L);
  return 1;
}

static int device_index(lua_State *L) {
  cdv_device *d = self(L);
  const char *k = luaL_checkstring(L, 2);
  if (strcmp(k, "alias") == 0)
    lua_pushstring(L, d->alias);
  else if (strcmp(k, "name") == 0)
    lua_pushstring(L, d->name);
  else if (strcmp(k, "ordinal") == 0)
    lua_pushinteger(L, d->ordinal);
  else if (strcmp(k, "arch") == 0)
    lua_pushinteger(L, d->arch);
  else if (strcmp(k, "is_cpu") == 0)
    lua_pushboolean(L, strcmp(d->be->kind, "cpu") == 0); /* reports the kind */
  else if (strcmp(k, "is_cuda") == 0)
    lua_pushboolean(L, strcmp(d->be->kind, "cuda") == 0);
  else if (strcmp(k, "is_uva") == 0)
    lua_pushboolean(L, d->is_uva);
  else if (strcmp(k, "is_cubin_supported") == 0)
    lua_pushboolean(L, cdv_cubin_supported(d->arch));
  else if (strcmp(k, "is_mempool_supported") == 0)
    lua_pushboolean(L, d->is_mempool_supported);
  else if (strcmp(k, "is_primary") == 0)
    lua_pushboolean(L, d->is_primary);
  else if (strcmp(k, "uuid") == 0)
    return push_optstring(L, d->uuid);
  else if (strcmp(k, "pci_bus_id") == 0)
    return push_optstring(L, d->pci_bus_id);
  else if (strcmp(k, "total_memory") == 0)
    lua_pushinteger(L, (lua_Integer)d->total_memory);
  else if (strcmp(k, "free_memory") == 0) {
    size_t free_b = 0, total = 0;
    if (d->be->has_contexts) {
      cdv_device_use(L, d);
      cdv_try(L, d, d->be->mem_info(d, &free_b, &total, &e_));
    }
    lua_pushinteger(L, (lua_Integer)free_b);
  } else if (strcmp(k, "sm_count") == 0)
    lua_pushinteger(L, d->sm_count);
  else if (strcmp(k, "warp_size") == 0)
    lua_pushinteger(L, d->warp_size);
  else if (strcmp(k, "max_threads_per_block") == 0)
    lua_pushinteger(L, d->max_threads_per_block);
  else if (strcmp(k, "has_context") == 0)
    lua_pushboolean(L, !d->be->has_contexts || d->ctx != NULL);
  else if (strcmp(k, "is_sticky") == 0)
    lua_pushboolean(L, d->sticky);
  else if (strcmp(k, "generation") == 0)
    lua_pushinteger(L, d->generation);
  else if (strcmp(k, "stream") == 0) {
    cdv_push_current_stream(L, d);
  } else {
    if (!cdv_push_method(L)) return luaL_error(L, "Device has no field or method '%s'", k);
  }
  return 1;
}

/* ------------------------------------------------------------ module functions */

static int l_is_available(lua_State *L) {
  if (cdv_cuda_load() != 0) {
    lua_pushboolean(L, 0);
    lua_pushstring(L, cdv_cuda_why());
    return 2;
  }
  if (cdv_cuda_count() == 0) {
    lua_pushboolean(L, 0);
    lua_pushliteral(L, "the CUDA driver reports no device");
    return 2;
  }
  lua_pushboolean(L, 1);
  return 1;
}

static int l_device_count(lua_State *L) {
  lua_pushinteger(L, cdv_cuda_count());
  return 1;
}

static int push_devices(lua_State *L, int from) {
  lua_newtable(L);
  for (int i = from, n = 1; i < cdv_device_count_all(); i++) {
    if (registry[i]->unmapped) continue;
    cdv_push_device(L, registry[i]);
    lua_rawseti(L, -2, n++);
  }
  return 1;
}

static int l_devices(lua_State *L) { return push_devices(L, 0); }
static int l_cuda_devices(lua_State *L) { return push_devices(L, 1); }

int cdv_device_new(lua_State *L) {
  cdv_push_device(L, lua_isnoneornil(L, 1) ? cdv_default_device(L) : cdv_check_device(L, 1));
  return 1;
}

static int l_get_device(lua_State *L) {
  cdv_push_device(L, cdv_default_device(L));
  return 1;
}

/* sets the running coroutine's device where one of its scopes holds it (NOTE [coroutine scopes]), else the state's */
static void set_default(lua_State *L, cdv_device *d) {
  if (d->be->has_contexts) cdv_device_use(L, d); /* setting a CUDA device makes its context current */
  cdv_state *st = cdv_get_state(L);
  if (st->coscopes && cdv_coscope_push(L, 0, 0)) {
    int scoped = lua_rawgeti(L, -1, 0) != LUA_TNIL;
    lua_pop(L, 1);
    if (scoped) {
      lua_pushinteger(L, d->index);
      lua_rawseti(L, -2, 0);
    }
    lua_pop(L, 1);
    if (scoped) return;
  }
  st->default_device = d->index;
}

static int l_set_device(lua_State *L) {
  set_default(L, cdv_check_device(L, 1));
  return 0;
}

/* A Scope restores the previous default device when closed: `local _ <close> = cd.scope("cuda:1")`. Opened in a
 * coroutine, it sets the coroutine's own device (NOTE [coroutine scopes]); previous is then -1 for "the state's",
 * and the thread is the user value. */
typedef struct scope {
  uint64_t magic;
  int previous;
  int closed;
  int coroutine;
} scope;

static int scope_close(lua_State *L) {
  scope *s = cdv_check_udata(L, 1, "cudadev.Scope", CDV_SCOPE_MAGIC, sizeof(scope));
  if (!s->closed) {
    s->closed = 1;
    if (!s->coroutine) {
      cdv_get_state(L)->default_device = s->previous;
      return 0;
    }
    lua_getiuservalue(L, 1, 1);
    if (cdv_coscope_push(L, -1, 0)) {
      if (s->previous >= 0)
        lua_pushinteger(L, s->previous);
      else
        lua_pushnil(L);
      lua_rawseti(L, -2, 0);
    }
  }
  return 0;
}

static int l_scope(lua_State *L) {
  cdv_device *d = cdv_check_device(L, 1);
  scope *s = lua_newuserdatauv(L, sizeof *s, 1);
  s->magic = CDV_SCOPE_MAGIC;
  s->closed = 1; /* closed until the switch succeeded: a failed switch must not restore anything */
  s->coroutine = 0;
  luaL_setmetatable(L, "cudadev.Scope");
  if (cdv_coscope_push(L, 0, 1)) {
    int isint;
    lua_rawgeti(L, -1, 0);
    lua_Integer v = lua_tointegerx(L, -1, &isint);
    s->previous = isint && v >= 0 && v < cdv_device_count_all() ? (int)v : -1;
    lua_pop(L, 1);
    if (d->be->has_contexts) cdv_device_use(L, d);
    lua_pushinteger(L, d->index);
    lua_rawseti(L, -2, 0);
    lua_pop(L, 1);
    lua_pushthread(L);
    lua_setiuservalue(L, -2, 1);
    s->coroutine = 1;
  } else {
    s->previous = cdv_default_device(L)->index;
    set_default(L, d);
  }
  s->closed = 0;
  return 1;
}

/* with_device(spec, fn, ...): the scope is a to-be-closed slot, so Lua restores the device while the
 * error unwinds, and the error and its traceback pass through untouched (no pcall in between). */
static int l_with_device(lua_State *L) {
  cdv_check_device(L, 1);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  int nargs = lua_gettop(L) - 2;
  lua_pushcfunction(L, l_scope);
  lua_pushvalue(L, 1);
  lua_call(L, 1, 1);
  lua_insert(L, 1); /* scope at 1, spec at 2, fn at 3 */
  lua_toclose(L, 1);
  lua_remove(L, 2);
  return cdv_call_scoped_k(L, nargs); /* NOTE [scoped calls], NOTE [coroutine scopes] */
}

static int l_synchronize(lua_State *L) {
  for (int i = 0; i < cdv_device_count_all(); i++) {
    cdv_device *d = registry[i];
    if (d->be->has_contexts && d->ctx == NULL) continue; /* nothing can be queued on a context never made */
    cdv_device_use(L, d);
    cdv_try(L, d, cdv_wait_device(L, d, &e_)); /* NOTE [interruptible waits] */
  }
  cdv_callbacks_drain(L); /* NOTE [stream callbacks] */
  return 0;
}

static int l_synchronize_device(lua_State *L) {
  cdv_device *d = cdv_opt_device(L, 1);
  cdv_device_use(L, d);
  cdv_try(L, d, cdv_wait_device(L, d, &e_)); /* NOTE [interruptible waits] */
  cdv_callbacks_drain(L); /* NOTE [stream callbacks] */
  return 0;
}

/* dev:reset(): cuDevicePrimaryCtxReset on a CUDA device (also after a sticky fault, which it clears).
 * The context's memory, streams, events, modules and graphs are gone; the generation counter makes every
 * object made before the reset answer `stale <Type>: device was reset` instead of using a dead handle. */
static int device_reset(lua_State *L) {
  cdv_device *d = self(L);
  cdv_err e;
  if (forked && d->be->has_contexts) cdv_device_use(L, d); /* the fork message */
  if (d->be->has_contexts && !d->is_primary)
    return luaL_error(L, "%s is a mapped context: reset applies to a device's primary context", d->alias);
  cdv_block_release(cdv_get_state(L), d, NULL, 1, &e); /* NOTE [block cache]; a poisoned context's are forgotten */
  if (d->be->reset != NULL) { /* (see NOTE [optional operations]) a device kind without contexts has nothing to reset */
    if (d->ctx != NULL && !d->sticky) d->be->synchronize(d, &e); /* let queued work finish; errors are moot */
    cdv_pinned_trim(NULL, &e); /* (see NOTE [pinned pool]) cached blocks may be pinned through this context */
    int rc = d->be->reset(d, &e);
    if (rc == -2) d->generation++; /* reset, but no new context: the objects of before are gone anyway */
    if (rc == -2 && d->sticky)
      /* (see NOTE [sticky faults]) the driver keeps answering with the fault: CUDA documents that only a new
       * process recovers from a sticky error */
      return luaL_error(L,
                        "%s cannot be recovered in this process: after the reset the CUDA driver still reports "
                        "the sticky fault (%s: %s); start a new process (the cpu device keeps working here)",
                        d->alias, e.api, e.name);
    if (rc != 0) return cdv_raise(L, d, &e);
  }
  d->generation++;
  d->sticky = 0;
  memset(&d->fault, 0, sizeof d->fault);
  d->fault_where[0] = '\0';
  return 0;
}

static const luaL_Reg device_methods[] = {{"reset", device_reset},
                                          {"synchronize", device_synchronize},
                                          {"memory_info", device_memory_info},
                                          {"attribute", device_attribute},
                                          {NULL, NULL}};

static const luaL_Reg functions[] = {{"is_available", l_is_available},
                                     {"device_count", l_device_count},
                                     {"devices", l_devices},
                                     {"cuda_devices", l_cuda_devices},
                                     {"device", cdv_device_new},
                                     {"get_device", l_get_device},
                                     {"set_device", l_set_device},
                                     {"scope", l_scope},
                                     {"with_device", l_with_device},
                                     {"synchronize", l_synchronize},
                                     {"synchronize_device", l_synchronize_device},
                                     {NULL, NULL}};

int cdv_device_open(lua_State *L) {
  static const luaL_Reg meta[] = {{"__tostring", device_tostring}, {"__eq", device_eq}, {NULL, NULL}};
  cdv_new_class(L, CDV_DEVICE, meta, device_methods, device_index); /* NOTE [class registration] */
  lua_pop(L, 1);
  static const luaL_Reg scope_meta[] = {{"__close", scope_close}, {NULL, NULL}};
  cdv_new_class(L, "cudadev.Scope", scope_meta, NULL, NULL);
  lua_pop(L, 1);
  luaL_getsubtable(L, LUA_REGISTRYINDEX, "cudadev.device_values"); /* kept by a second luaopen */
  lua_pop(L, 1);
  luaL_setfuncs(L, functions, 0);
  return 0;
}
