/*
 * dlpack.c: tensors exchanged with other frameworks through DLPack (src/cudadev_dlpack.h), without a copy:
 * the C API (cudadev_push_dlpack, cudadev_to_dlpack and their versioned forms) and the Lua side (a:__dlpack,
 * a:__dlpack_device, cd.from_dlpack). doc/interop.md is the manual.
 *
 * NOTE [dlpack ownership]: an imported tensor becomes an Array over the producer's memory through the same block
 * as cudadev_push_array's host memory with a release callback (cdv_push_host_array): the callback calls the
 * tensor's deleter once, when the block's last reference goes (the Array and its views freed or collected, or
 * lua_close), after the work queued on it. An exported tensor holds a reference of its own on the Array's block
 * (not on the Array userdata, which a lua_State must keep, and the consumer may call the deleter after
 * lua_close): freeing the Array drops the Array's reference only, and the consumer's deleter drops the last one.
 * In Lua a tensor travels as a light userdata, as a PyCapsule does in Python: whoever holds it owns it once,
 * until it is given to cd.from_dlpack (which takes it, refused or not) or its deleter is called.
 *
 * NOTE [dlpack streams]: the DLPack protocol's handshake. A consumer calls x:__dlpack(stream) with the stream it
 * will use (the Python protocol's integers: 1 the legacy default stream, 2 the per-thread default stream, a
 * handle above 2, -1 no synchronisation; or a cudadev Stream); the producer makes that stream wait for the work
 * queued on the tensor, with an event (cuEventRecord on the array's last stream, cuStreamWaitEvent on the
 * consumer's), not with a host wait. cd.from_dlpack asks x:__dlpack_device() first and passes its current stream
 * on that device. The C API has no stream to wait on: cudadev_to_dlpack finishes the Array's work on the host.
 *
 * NOTE [dlpack strides]: imports accept only compact row-major tensors (a stride of a dimension of extent 1 is
 * free, as DLPack allows) and refuse the others by name; exports give the Array's own strides (in elements, as
 * DLPack's are: NOTE [strided views]), so a view (a.T, a stepped slice) goes out as the view it is. Importing
 * strided tensors as views is left to do: import_problem's check is the place.
 */
#include <stdlib.h>
#include <string.h>

#include "cdv.h"
#include "cudadev_dlpack.h"

/* ------------------------------------------------------------ dtypes */

static const struct {
  uint8_t code, bits;
  cdv_dtype t;
} dtype_map[] = {
    {kDLFloat, 16, CDV_F16},   {kDLFloat, 32, CDV_F32},     {kDLFloat, 64, CDV_F64}, {kDLInt, 8, CDV_I8},
    {kDLInt, 16, CDV_I16},     {kDLInt, 32, CDV_I32},       {kDLInt, 64, CDV_I64},   {kDLUInt, 8, CDV_U8},
    {kDLUInt, 16, CDV_U16},    {kDLUInt, 32, CDV_U32},      {kDLUInt, 64, CDV_U64},  {kDLBool, 8, CDV_BOOL},
    {kDLComplex, 64, CDV_C64}, {kDLComplex, 128, CDV_C128},
};

/* The names the DLPack specification gives its type codes (1.1), for refusals. */
static const char *code_name(uint8_t code) {
  static const char *const names[] = {"int",
                                      "uint",
                                      "float",
                                      "opaque handle",
                                      "bfloat",
                                      "complex",
                                      "bool",
                                      "float8_e3m4",
                                      "float8_e4m3",
                                      "float8_e4m3b11fnuz",
                                      "float8_e4m3fn",
                                      "float8_e4m3fnuz",
                                      "float8_e5m2",
                                      "float8_e5m2fnuz",
                                      "float8_e8m0fnu",
                                      "float6_e2m3fn",
                                      "float6_e3m2fn",
                                      "float4_e2m1fn"};
  return code < sizeof names / sizeof names[0] ? names[code] : NULL;
}

/* The cudadev dtype of t, or NULL with why pushed. */
static const char *dtype_problem(lua_State *L, DLDataType t, cdv_dtype *out) {
  const char *name = code_name(t.code);
  if (name == NULL) return lua_pushfstring(L, "unknown DLPack type code %d", (int)t.code);
  if (t.lanes != 1)
    return lua_pushfstring(L, "vector types are not supported (%s%d with %d lanes)", name, (int)t.bits, (int)t.lanes);
  for (size_t i = 0; i < sizeof dtype_map / sizeof dtype_map[0]; i++)
    if (dtype_map[i].code == t.code && dtype_map[i].bits == t.bits) {
      *out = dtype_map[i].t;
      return NULL;
    }
  if (t.code <= kDLFloat || t.code == kDLBool)
    return lua_pushfstring(L, "DLPack dtype %s%d has no cudadev dtype", name, (int)t.bits);
  if (t.code == kDLBfloat || t.code == kDLComplex) /* the others' names say their width */
    return lua_pushfstring(L, "DLPack dtype %s%d (type code %d) has no cudadev dtype", name, (int)t.bits, (int)t.code);
  return lua_pushfstring(L, "DLPack dtype %s (type code %d) has no cudadev dtype", name, (int)t.code);
}

static DLDataType dl_dtype(cdv_dtype t) {
  DLDataType r = {kDLFloat, 32, 1};
  for (size_t i = 0; i < sizeof dtype_map / sizeof dtype_map[0]; i++)
    if (dtype_map[i].t == t) r.code = dtype_map[i].code, r.bits = dtype_map[i].bits;
  return r;
}

/* ------------------------------------------------------------ import */

typedef struct import {
  cdv_device *dev;
  int kind; /* CDV_MEM_*: the block's, for a.is_pinned and a.managed */
  cdv_dtype dtype;
  int ndim;
  int64_t shape[CDV_MAXDIM];
  char *data; /* data + byte_offset */
} import;

/* The device of a tensor's DLDevice, or NULL with why pushed. */
static const char *device_problem(lua_State *L, DLDevice dev, import *im) {
  static const char *const others[] = {[4] = "kDLOpenCL",  [7] = "kDLVulkan",    [8] = "kDLMetal",   [9] = "kDLVPI",
                                       [10] = "kDLROCM",   [11] = "kDLROCMHost", [12] = "kDLExtDev", [14] = "kDLOneAPI",
                                       [15] = "kDLWebGPU", [16] = "kDLHexagon",  [17] = "kDLMAIA",   [18] = "kDLTrn"};
  int type = (int)dev.device_type;
  im->kind = CDV_MEM_DEVICE;
  if (type == kDLCPU || type == kDLCUDAHost) {
    im->dev = cdv_cpu();
    if (type == kDLCUDAHost) im->kind = CDV_MEM_PINNED;
    return NULL;
  }
  if (type == kDLCUDA || type == kDLCUDAManaged) {
    /* managed memory is reachable from every device: it belongs to the state's default device when that is a
     * CUDA device, else to cuda:0 */
    cdv_device *def = cdv_default_device(L);
    if (type == kDLCUDAManaged && !def->be->host_memory) {
      im->dev = def;
      im->kind = CDV_MEM_MANAGED;
      return NULL;
    }
    lua_pushinteger(L, type == kDLCUDA ? dev.device_id : 0);
    const char *why = cdv_device_problem(L, -1, &im->dev);
    if (why != NULL)
      return lua_pushfstring(L, "%s device %d: %s", type == kDLCUDA ? "kDLCUDA" : "kDLCUDAManaged", (int)dev.device_id,
                             why);
    lua_pop(L, 1);
    if (type == kDLCUDAManaged) im->kind = CDV_MEM_MANAGED;
    return NULL;
  }
  const char *name = type >= 0 && type < (int)(sizeof others / sizeof others[0]) ? others[type] : NULL;
  if (name != NULL) return lua_pushfstring(L, "DLPack device type %s (%d) is not supported", name, type);
  return lua_pushfstring(L, "unknown DLPack device type %d", type);
}

static void push_extents(luaL_Buffer *b, int n, const int64_t *v) {
  lua_State *L = b->L;
  luaL_addchar(b, '{');
  for (int i = 0; i < n; i++) {
    if (i) luaL_addstring(b, ", ");
    lua_pushinteger(L, v[i]);
    luaL_addvalue(b);
  }
  luaL_addchar(b, '}');
}

/* (see NOTE [dlpack strides]) NULL, or compact row-major (free for extents of 1, and for tensors of no element). */
static const char *strides_problem(lua_State *L, const DLTensor *t, int64_t size) {
  int64_t want[CDV_MAXDIM], step = 1;
  int ok = 1;
  if (t->strides == NULL || size == 0) return NULL;
  for (int i = t->ndim - 1; i >= 0; i--) {
    want[i] = step;
    ok &= t->shape[i] == 1 || t->strides[i] == step;
    step *= t->shape[i];
  }
  if (ok) return NULL;
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_addstring(&b, "strided tensors are not supported (strides ");
  push_extents(&b, t->ndim, t->strides);
  luaL_addstring(&b, " for shape ");
  push_extents(&b, t->ndim, t->shape);
  luaL_addstring(&b, "; compact row-major is ");
  push_extents(&b, t->ndim, want);
  luaL_addstring(&b, "): make the tensor contiguous first");
  luaL_pushresult(&b);
  return lua_tostring(L, -1);
}

/* What the tensor is as an Array, or NULL with why pushed. Reads the tensor only. */
static const char *import_problem(lua_State *L, const DLTensor *t, import *im) {
  const char *why;
  if ((why = dtype_problem(L, t->dtype, &im->dtype)) != NULL) return why;
  if (t->ndim < 0 || t->ndim > CDV_MAXDIM)
    return lua_pushfstring(L, "ndim must be 0 to %d, got %d", CDV_MAXDIM, (int)t->ndim);
  if (t->ndim > 0 && t->shape == NULL) return lua_pushfstring(L, "shape is NULL with ndim %d", (int)t->ndim);
  int64_t size = 0;
  for (int i = 0; i < t->ndim; i++) {
    if (t->shape[i] < 0) return lua_pushfstring(L, "dimension %d has a negative extent (%I)", i + 1, t->shape[i]);
    im->shape[i] = t->shape[i];
  }
  /* (NOTE [arrays inside their blocks]) a 0 anywhere makes no elements */
  if (cdv_shape_count(t->ndim, im->shape, cdv_dtypes[im->dtype].size, &size, NULL) != 0) return "tensor is too large";
  if ((why = strides_problem(L, t, size)) != NULL) return why;
  if (t->data == NULL && size > 0) return lua_pushliteral(L, "data is NULL");
  if ((why = device_problem(L, t->device, im)) != NULL) return why;
  im->ndim = t->ndim;
  im->data = (char *)t->data + t->byte_offset;
  return NULL;
}

static void release_legacy(void *ud, void *ptr) {
  (void)ptr;
  DLManagedTensor *t = ud;
  if (t->deleter != NULL) t->deleter(t);
}

static void release_versioned(void *ud, void *ptr) {
  (void)ptr;
  DLManagedTensorVersioned *t = ud;
  if (t->deleter != NULL) t->deleter(t);
}

/* The tensor's problem as an Array, or NULL; the versioned one's header is checked first (a major version
 * other than 1 may lay the rest out differently: nothing else of it is read). */
static const char *tensor_problem(lua_State *L, void *p, int versioned, import *im) {
  if (p == NULL) return lua_pushliteral(L, "tensor is NULL");
  if (!versioned) return import_problem(L, &((DLManagedTensor *)p)->dl_tensor, im);
  DLManagedTensorVersioned *v = p;
  if (v->version.major != 1)
    return lua_pushfstring(L, "DLPack version %d.%d is not supported (cudadev reads major version 1)",
                           (int)v->version.major, (int)v->version.minor);
  if (v->flags & DLPACK_FLAG_BITMASK_READ_ONLY)
    return lua_pushliteral(L, "read-only tensors are not supported (cudadev arrays are writable: copy it first)");
  return import_problem(L, &v->dl_tensor, im);
}

/* Pushes the Array over the tensor p, its deleter called when the block goes (NOTE [dlpack ownership]). */
static void push_import(lua_State *L, const import *im, void *p, int versioned) {
  cdv_array *a = cdv_push_host_array(L, im->dev, im->dtype, im->ndim, im->shape, im->data,
                                     versioned ? release_versioned : release_legacy, p);
  a->block->kind = im->kind;
}

static void push_checked(lua_State *L, const char *api, void *p, int versioned) {
import im;
  const char *why = tensor_problem(L, p, versioned, &im);
  if (why != NULL) luaL_error(L, "%s: %s", api, why);
  push_import(L, &im, p, versioned);
}

CUDADEV_API void cudadev_push_dlpack(lua_State *L, struct DLManagedTensor *t) {
  push_checked(L, "cudadev_push_dlpack", t, 0);
}

CUDADEV_API void cudadev_push_dlpack_versioned(lua_State *L, struct DLManagedTensorVersioned *t) {
  push_checked(L, "cudadev_push_dlpack_versioned", t, 1);
}

/* ------------------------------------------------------------ export */

typedef struct export {
  union {
    DLManagedTensor legacy;
    DLManagedTensorVersioned versioned;
  } t;
  int64_t shape[CDV_MAXDIM], strides[CDV_MAXDIM];
  cdv_block *block; /* one reference of its own (NOTE [dlpack ownership]) */
}
export;

/* The consumer's deleter: drops the export's reference (the last one frees the memory, ordered after its last
 * stream). No lua_State here, so a failure to free cannot be reported; it is dropped. */
static void export_done(export *x) {
  cdv_err e;
  if (x == NULL) return;
  cdv_block_unref(x->block, &e);
  free(x);
}

static void delete_legacy(DLManagedTensor *self) { export_done(self->manager_ctx); }
static void delete_versioned(DLManagedTensorVersioned *self) { export_done(self->manager_ctx); }

static DLDevice dl_device(const cdv_array *a) {
  cdv_block *b = a->block;
  if (b->kind == CDV_MEM_MANAGED && !b->dev->be->host_memory) return (DLDevice){kDLCUDAManaged, 0};
  if (b->dev->be->host_memory) return (DLDevice){kDLCPU, 0};
  return (DLDevice){kDLCUDA, b->dev->ordinal};
}

/* Fills the tensor of a new export of a (see NOTE [dlpack strides]; the Array's strides, never NULL). */
static void fill_tensor(DLTensor *t, export *x, const cdv_array *a) {
  for (int i = 0; i < a->ndim; i++) {
    x->shape[i] = a->shape[i];
    x->strides[i] = a->strides[i];
  }
  t->data = a->size > 0 ? a->data : NULL;
  t->device = dl_device(a);
  t->ndim = a->ndim;
  t->dtype = dl_dtype(a->dtype);
  t->shape = x->shape;
  t->strides = x->strides;
  t->byte_offset = 0;
}

/* A new tensor over the Array a, holding a reference to its block; the caller synchronised as the protocol
 * asks. Raises only when out of memory (before anything is held). */
static void *export_array(lua_State *L, cdv_array *a, int versioned) {
  export *x = calloc(1, sizeof *x);
  if (x == NULL) luaL_error(L, "not enough memory");
  x->block = a->block;
  x->block->refs++;
  if (versioned) {
    x->t.versioned.version = (DLPackVersion){1, 1};
    x->t.versioned.manager_ctx = x;
    x->t.versioned.deleter = delete_versioned;
    fill_tensor(&x->t.versioned.dl_tensor, x, a);
    return &x->t.versioned;
  }
  x->t.legacy.manager_ctx = x;
  x->t.legacy.deleter = delete_legacy;
  fill_tensor(&x->t.legacy.dl_tensor, x, a);
  return &x->t.legacy;
}

/* The C API: the Array's work finished on the host (NOTE [dlpack streams]). */
static void *to_dlpack(lua_State *L, int idx, int versioned) {
  cdv_array *a = cdv_check_array(L, idx);
  cdv_err e;
  if (cdv_host_wait(a->block, &e) != 0) cdv_raise(L, a->block->last_dev, &e);
  return export_array(L, a, versioned);
}

CUDADEV_API struct DLManagedTensor *cudadev_to_dlpack(lua_State *L, int idx) { return to_dlpack(L, idx, 0); }

CUDADEV_API struct DLManagedTensorVersioned *cudadev_to_dlpack_versioned(lua_State *L, int idx) {
  return to_dlpack(L, idx, 1);
}

/* ------------------------------------------------------------ Lua */

static void no_sandbox(lua_State *L) {
  if (cdv_get_state(L)->sandbox) luaL_error(L, "raw addresses are not available in this sandbox");
}

/* (see NOTE [dlpack streams]) the consumer's stream at arg (nil, a protocol integer or a Stream) on d; returns 0 and
 * its handle, or 1 when no synchronisation is asked (-1, and always on a device whose work is done when queued). */
static int consumer_stream(lua_State *L, int arg, cdv_device *d, void **handle) {
  *handle = NULL;
  if (lua_isnoneornil(L, arg)) return d->be->done_when_queued;
  if (lua_type(L, arg) == LUA_TUSERDATA) {
    cdv_stream *s;
    const char *why = cdv_stream_problem(L, arg, &s);
    if (why != NULL) luaL_argerror(L, arg, why);
    if (s->dev != d)
      luaL_argerror(L, arg, lua_pushfstring(L, "stream is on %s but the array on %s", s->dev->alias, d->alias));
    *handle = s->handle;
    return d->be->done_when_queued;
  }
  int isint;
  lua_Integer v = lua_tointegerx(L, arg, &isint);
  if (!isint) luaL_typeerror(L, arg, "nil, integer or Stream");
  if (v == -1) return 1;
  if (d->be->done_when_queued)
    luaL_argerror(L, arg, lua_pushfstring(L, "%s has no streams to wait on: pass nil (or -1)", d->alias));
  if (v == 0 || v < -1)
    luaL_argerror(L, arg,
                  lua_pushfstring(L,
                                  "stream %I is not a DLPack stream (1: the legacy default stream, 2: the "
                                  "per-thread default stream, a handle, -1: no synchronisation)",
                                  v));
  *handle = v == 1 ? NULL : (void *)(intptr_t)v;
  return 0;
}

/* The consumer's stream waits for the work queued on b (NOTE [dlpack streams]); on another device's stream,
 * the host waits instead. */
static void handshake(lua_State *L, cdv_block *b, void *consumer) {
  cdv_device *ld = b->last_dev, *d = b->dev;
  cdv_err e;
  if (ld == NULL || ld->be->done_when_queued || ld->generation != b->generation || ld->sticky) return;
  void *ls = cdv_stream_alive(b->last_stream) ? b->last_stream : NULL;
  if (ld != d) {
    if (cdv_host_wait(b, &e) != 0) cdv_raise(L, ld, &e);
    return;
  }
  if (ls == consumer) return; /* one stream: already in order */
  void *ev = NULL;
  cdv_device_use(L, d);
  if (d->be->event_create(d, 0, 0, &ev, &e) != 0) cdv_raise(L, d, &e);
  int rc = d->be->event_record(d, ev, ls, &e);
  if (rc == 0) rc = d->be->stream_wait_event(d, consumer, ev, &e);
  cdv_err e2; /* destroying a recorded event is deferred by the driver until it completes */
  d->be->event_destroy(d, ev, rc == 0 ? &e : &e2);
  if (rc != 0) cdv_raise(L, d, &e);
}

/* a:__dlpack([stream [, versioned]]) -> a light userdata: a DLManagedTensor * (a DLManagedTensorVersioned * with
 * versioned true) that the caller owns (NOTE [dlpack ownership]) */
static int array_dlpack(lua_State *L) {
  cdv_array *a = cdv_check_array(L, 1);
  no_sandbox(L);
  void *consumer;
  int nosync = consumer_stream(L, 2, a->block->dev, &consumer);
  int versioned = lua_toboolean(L, 3);
  a = cdv_check_array(L, 1); /* the checks above allocated: a finalizer may have freed it */
  if (!nosync) handshake(L, a->block, consumer);
  lua_pushlightuserdata(L, export_array(L, a, versioned));
  return 1;
}

/* a:__dlpack_device() -> device_type, device_id (kDLCPU 1, kDLCUDA 2, kDLCUDAManaged 13) */
static int array_dlpack_device(lua_State *L) {
  DLDevice dev = dl_device(cdv_check_array(L, 1));
  lua_pushinteger(L, dev.device_type);
  lua_pushinteger(L, dev.device_id);
  return 2;
}

static const char *const from_opts[] = {"stream", "versioned", NULL};

/* The protocol integer of a consumer stream handle (NULL: the legacy default stream, 1). */
static void push_stream_int(lua_State *L, void *h) { lua_pushinteger(L, h == NULL ? 1 : (lua_Integer)(intptr_t)h); }

/* Calls x:__dlpack(stream [, true]) with the consumer's stream on x's device (x:__dlpack_device(), when x has it)
 * and leaves its result at the top. */
static void call_dlpack(lua_State *L, int opts, int versioned) {
  cdv_stream *s = cdv_opt_stream_field(L, opts, "from_dlpack");
  int top = lua_gettop(L);
  lua_getfield(L, 1, "__dlpack_device");
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    lua_pushnil(L);
  } else {
    lua_pushvalue(L, 1);
    lua_call(L, 1, 2);
    int type = (int)lua_tointeger(L, -2), id = (int)lua_tointeger(L, -1);
    lua_settop(L, top);
    if (type == kDLCUDA || type == kDLCUDAManaged) {
      cdv_device *d;
      lua_pushinteger(L, type == kDLCUDA ? id : 0);
      const char *why = cdv_device_problem(L, -1, &d);
      if (why != NULL) luaL_argerror(L, 1, lua_pushfstring(L, "__dlpack_device gave device %d: %s", id, why));
      lua_settop(L, top);
      if (s != NULL && s->dev != d)
        cdv_opt_error(L, "stream", "from_dlpack",
                      lua_pushfstring(L, "stream is on %s but the tensor on %s", s->dev->alias, d->alias));
      push_stream_int(L, s != NULL ? s->handle : cdv_current_stream(L, d)->handle);
    } else
      lua_pushnil(L);
  }
  lua_getfield(L, 1, "__dlpack");
  lua_insert(L, -2);
  lua_pushvalue(L, 1);
  lua_insert(L, -2);
  if (versioned) lua_pushboolean(L, 1);
  lua_call(L, versioned ? 3 : 2, 1);
}

/* Takes the tensor: refused, its deleter runs (NOTE [dlpack ownership]). */
static void consume(lua_State *L, void *p, int versioned) {
import im;
  const char *why = tensor_problem(L, p, versioned, &im);
  if (why != NULL) {
    lua_pushstring(L, why); /* the message outlives the deleter, which may free what it pointed into */
    if (p != NULL && versioned)
      release_versioned(p, NULL);
    else if (p != NULL)
      release_legacy(p, NULL);
    luaL_argerror(L, 1, lua_tostring(L, -1));
  }
  push_import(L, &im, p, versioned);
}

static int get_dlpack(lua_State *L) {
  int t = lua_type(L, 1); /* a table, or a userdata whose metatable has __index */
  if (t == LUA_TTABLE || (t == LUA_TUSERDATA && luaL_getmetafield(L, 1, "__index") != LUA_TNIL)) {
    lua_getfield(L, 1, "__dlpack");
    return 1;
  }
  return 0;
}

/* cd.from_dlpack(x [, {stream=, versioned=}]) -> an Array sharing x's memory. x: a light userdata (a
 * DLManagedTensor *, or a DLManagedTensorVersioned * with versioned true), or any value with a __dlpack method. */
static int l_from_dlpack(lua_State *L) {
  luaL_checkany(L, 1);
  cdv_check_options(L, 2, from_opts, "from_dlpack");
  int versioned = cdv_check_boolean_field(L, 2, "versioned", 0, "from_dlpack");
  no_sandbox(L);
  if (lua_type(L, 1) != LUA_TLIGHTUSERDATA) {
    /* x.__dlpack, asked under pcall: an __index that raises for unknown keys (a Stream's) means it has none */
    lua_pushcfunction(L, get_dlpack);
    lua_pushvalue(L, 1);
    if (lua_pcall(L, 1, 1, 0) != LUA_OK || lua_isnil(L, -1))
      luaL_typeerror(L, 1, "light userdata (a DLPack tensor) or a value with __dlpack");
    lua_pop(L, 1);
    call_dlpack(L, 2, versioned);
    if (lua_type(L, -1) != LUA_TLIGHTUSERDATA)
      luaL_argerror(L, 1, lua_pushfstring(L, "__dlpack returned %s, not a light userdata", cdv_typename(L, -1)));
    lua_replace(L, 1);
  }
  consume(L, lua_touserdata(L, 1), versioned);
  return 1;
}

void cdv_array_add_methods(lua_State *L, const luaL_Reg *methods) {
  luaL_getmetatable(L, CDV_ARRAY);
  lua_getfield(L, -1, "methods"); /* (see NOTE [method lookup]) the table Array's __index closes over */
  luaL_setfuncs(L, methods, 0);
  lua_pop(L, 2);
}

int cdv_dlpack_open(lua_State *L) {
  static const luaL_Reg methods[] = {
      {"__dlpack", array_dlpack}, {"__dlpack_device", array_dlpack_device}, {NULL, NULL}};
  cdv_array_add_methods(L, methods);
  lua_pushcfunction(L, l_from_dlpack);
  lua_setfield(L, -2, "from_dlpack");
  return 0;
}
