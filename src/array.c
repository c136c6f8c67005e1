/*
 * array.c: cudadev.Array, an N-d block of elements on one device (host memory for cpu), with creation,
 * element access, copies in every direction, views, fill and lifetime.
 *
 * NOTE [array memory] in cdv.h: memory is a refcounted cdv_block shared by an array and its views; the
 * block remembers the last stream that used it so a free never lands under queued work.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdv.h"

static const char *const create_opts[] = {"device", "stream", "pinned", "ipc", "managed", NULL};
static const char *const copy_opts[] = {"stream", NULL};
static const char *const copy_range_opts[] = {"count", "dst_offset", "src_offset", "stream", NULL};

#define MAX_BYTES ((int64_t)1 << 56) /* far above any device; keeps size arithmetic from overflowing */

/* ------------------------------------------------------------ float16 */

uint16_t cdv_f32_to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000, mant = x & 0x7fffff;
  int exp = (int)((x >> 23) & 0xff) - 127 + 15;
  if (((x >> 23) & 0xff) == 0xff) return (uint16_t)(sign | 0x7c00 | (mant ? 0x200 : 0)); /* inf, nan */
  if (exp >= 31) return (uint16_t)(sign | 0x7c00); /* overflow */
  if (exp <= 0) { /* subnormal */
    if (exp < -10) return (uint16_t)sign;
    mant |= 0x800000;
    uint32_t shift = (uint32_t)(14 - exp);
    uint32_t h = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) h++;
    return (uint16_t)(sign | h);
  }
  uint32_t h = sign | ((uint32_t)exp << 10) | (mant >> 13), rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++; /* round to nearest even; may carry into exp */
  return (uint16_t)h;
}

float cdv_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, x;
  if (exp == 0x1f)
    x = sign | 0x7f800000 | (mant << 13);
  else if (exp != 0)
    x = sign | ((exp + 112) << 23) | (mant << 13);
  else if (mant == 0)
    x = sign;
  else { /* subnormal: normalise */
    int e = -1;
    do {
      e++;
      mant <<= 1;
    } while (!(mant & 0x400));
    x = sign | ((uint32_t)(112 - e) << 23) | ((mant & 0x3ff) << 13);
  }
  float f;
  memcpy(&f, &x, 4);
  return f;
}

/* ------------------------------------------------------------ element conversion */

/* The two parts of a complex element at p (unaligned: a view may start anywhere). */
static void complex_parts(cdv_dtype t, const void *p, double *re, double *im) {
  if (t == CDV_C64) {
    float f[2];
    memcpy(f, p, 8);
    *re = f[0], *im = f[1];
  } else {
    double d[2];
    memcpy(d, p, 16);
    *re = d[0], *im = d[1];
  }
}

static void push_elem(lua_State *L, cdv_dtype t, const void *p) {
  if (cdv_dtypes[t].is_complex) { /* a pair {re, im}: Lua has no complex numbers */
    double re, im;
    complex_parts(t, p, &re, &im);
    lua_createtable(L, 2, 0);
    lua_pushnumber(L, re);
    lua_rawseti(L, -2, 1);
    lua_pushnumber(L, im);
    lua_rawseti(L, -2, 2);
    return;
  }
  switch (t) {
    case CDV_F16: {
      uint16_t h;
      memcpy(&h, p, 2);
      lua_pushnumber(L, cdv_f16_to_f32(h));
      break;
    }
    case CDV_F32: {
      float v;
      memcpy(&v, p, 4);
      lua_pushnumber(L, v);
      break;
    }
    case CDV_F64: {
      double v;
      memcpy(&v, p, 8);
      lua_pushnumber(L, v);
      break;
    }
    case CDV_I8: lua_pushinteger(L, *(const int8_t *)p); break;
    case CDV_U8: lua_pushinteger(L, *(const uint8_t *)p); break;
    case CDV_I16: {
      int16_t v;
      memcpy(&v, p, 2);
      lua_pushinteger(L, v);
      break;
    }
    case CDV_U16: {
      uint16_t v;
      memcpy(&v, p, 2);
      lua_pushinteger(L, v);
      break;
    }
    case CDV_I32: {
      int32_t v;
      memcpy(&v, p, 4);
      lua_pushinteger(L, v);
      break;
    }
    case CDV_U32: {
      uint32_t v;
      memcpy(&v, p, 4);
      lua_pushinteger(L, v);
      break;
    }
    case CDV_I64: {
      int64_t v;
      memcpy(&v, p, 8);
      lua_pushinteger(L, v);
      break;
    }
    case CDV_U64: { /* exact: the Lua integer of the same 64 bits, negative above 2^63 - 1 (math.ult compares it),
                       as the reductions answer (doc/compute.md) */
      uint64_t v;
      memcpy(&v, p, 8);
      lua_pushinteger(L, (lua_Integer)v);
      break;
    }
    case CDV_BOOL: lua_pushboolean(L, *(const uint8_t *)p != 0); break;
    default: lua_pushnil(L);
  }
}

static const int64_t int_min[CDV_NDTYPES] = {
    [CDV_I8] = INT8_MIN, [CDV_I16] = INT16_MIN, [CDV_I32] = INT32_MIN, [CDV_I64] = INT64_MIN};
static const uint64_t int_max[CDV_NDTYPES] = {
    [CDV_I8] = INT8_MAX,  [CDV_I16] = INT16_MAX,  [CDV_I32] = INT32_MAX,  [CDV_I64] = INT64_MAX,
    [CDV_U8] = UINT8_MAX, [CDV_U16] = UINT16_MAX, [CDV_U32] = UINT32_MAX, [CDV_U64] = UINT64_MAX};

/* Converts the Lua value at idx into element p of type t. Returns NULL, or a message for the caller to
 * wrap in its own "bad argument" (pushed on the stack). */
/* Whether the value at idx is one element {re, im} of complex dtype t: a table of two numbers. */
static int is_pair(lua_State *L, int idx, cdv_dtype t) {
  if (!cdv_dtypes[t].is_complex || !lua_istable(L, idx) || lua_rawlen(L, idx) != 2) return 0;
  idx = lua_absindex(L, idx);
  int t1 = lua_rawgeti(L, idx, 1), t2 = lua_rawgeti(L, idx, 2); /* both pushed: the pop takes two */
  lua_pop(L, 2);
  int ok = t1 == LUA_TNUMBER && t2 == LUA_TNUMBER;
  return ok;
}

/* A complex element from a number (imaginary part 0) or a pair {re, im}. */
static const char *to_complex(lua_State *L, int idx, cdv_dtype t, void *p) {
  double re, im = 0;
  if (is_pair(L, idx, t)) {
    lua_rawgeti(L, idx, 1);
    lua_rawgeti(L, idx, 2);
    re = lua_tonumber(L, -2), im = lua_tonumber(L, -1);
    lua_pop(L, 2);
  } else if (lua_type(L, idx) == LUA_TNUMBER)
    re = lua_tonumber(L, idx);
  else
    return lua_pushfstring(L, "number or {re, im} pair expected, got %s", cdv_typename(L, idx));
  if (t == CDV_C64) {
    float f[2] = {(float)re, (float)im};
    memcpy(p, f, 8);
  } else {
    double d[2] = {re, im};
    memcpy(p, d, 16);
  }
  return NULL;
}

static const char *to_elem(lua_State *L, int idx, cdv_dtype t, void *p) {
  int ty = lua_type(L, idx);
  if (cdv_dtypes[t].is_complex) return to_complex(L, idx, t, p);
  if (t == CDV_BOOL) {
    if (ty == LUA_TBOOLEAN)
      *(uint8_t *)p = (uint8_t)lua_toboolean(L, idx);
    else if (ty == LUA_TNUMBER && (lua_tonumber(L, idx) == 0 || lua_tonumber(L, idx) == 1))
      *(uint8_t *)p = lua_tonumber(L, idx) != 0;
    else
      return lua_pushfstring(L, "boolean expected, got %s", cdv_typename(L, idx));
    return NULL;
  }
  if (ty != LUA_TNUMBER) return lua_pushfstring(L, "number expected, got %s", cdv_typename(L, idx));
  if (cdv_dtypes[t].is_float) {
    double v = lua_tonumber(L, idx);
    if (t == CDV_F64)
      memcpy(p, &v, 8);
    else if (t == CDV_F32) {
      float f = (float)v;
      memcpy(p, &f, 4);
    } else {
      uint16_t h = cdv_f32_to_f16((float)v);
      memcpy(p, &h, 2);
    }
    return NULL;
  }
  int isint = 0;
  lua_Integer v = lua_tointegerx(L, idx, &isint);
  uint64_t u;
  if (isint) {
    if (cdv_dtypes[t].is_signed ? (v < int_min[t] || (v > 0 && (uint64_t)v > int_max[t]))
                                : (v < 0 || (uint64_t)v > int_max[t]))
      return lua_pushfstring(L, "value %I out of range for %s", v, cdv_dtypes[t].name);
    u = (uint64_t)v;
  } else {
    double d = lua_tonumber(L, idx);
    if (t != CDV_U64 || !(d >= 9223372036854775808.0 && d < 18446744073709551616.0) || d != floor(d))
      return lua_pushfstring(L, "number %s has no %s representation", lua_tostring(L, idx), cdv_dtypes[t].name);
    u = (uint64_t)d;
  }
  switch (cdv_dtypes[t].size) { /* little-endian: the low bytes of u are the value */
    case 1: {
      uint8_t b = (uint8_t)u;
      memcpy(p, &b, 1);
      break;
    }
    case 2: {
      uint16_t b = (uint16_t)u;
      memcpy(p, &b, 2);
      break;
    }
    case 4: {
      uint32_t b = (uint32_t)u;
      memcpy(p, &b, 4);
      break;
    }
    default: memcpy(p, &u, 8);
  }
  return NULL;
}

static void check_elem(lua_State *L, int idx, int arg, cdv_dtype t, void *p) {
  const char *msg = to_elem(L, idx, t, p);
  if (msg != NULL) luaL_argerror(L, arg, msg);
}

/* ------------------------------------------------------------ blocks */

static void oom(lua_State *L, cdv_device *d, size_t bytes) {
  size_t free_b = 0, total = 0;
  cdv_err e;
  char req[32], fr[32];
  d->be->mem_info(d, &free_b, &total, &e);
  if (d->be->host_memory) free_b = cdv_cpu_available(); /* free_memory is 0 on cpu: the host's available memory */
  luaL_error(L, "out of memory on %s (requested %s, free %s)", d->alias, cdv_fmt_bytes(req, sizeof req, (double)bytes),
             cdv_fmt_bytes(fr, sizeof fr, (double)free_b));
}

static int is_oom(const cdv_err *e) { return strcmp(e->name, "CUDA_ERROR_OUT_OF_MEMORY") == 0 || e->code == 2; }

/* Pinned host memory comes from the pinned pool and goes back to it (NOTE [pinned pool]); device memory from
 * the blocks kept for reuse on the stream (NOTE [block cache]), else the backend, in the cache's classes. */
static int mem_alloc(cdv_state *st, cdv_device *d, int kind, size_t bytes, void *stream, void **ptr, cdv_err *e) {
  if (kind == CDV_MEM_PINNED) return cdv_pinned_alloc(d, bytes, ptr, e);
  if (kind != CDV_MEM_DEVICE) return d->be->mem_alloc(d, bytes, kind, stream, ptr, e);
  size_t c = cdv_array_class(d, bytes);
  if ((*ptr = cdv_block_take(st, d, c, stream)) != NULL) return 0;
  return d->be->mem_alloc(d, c, kind, stream, ptr, e);
}

/* Allocates a block; on out of memory collects garbage (which may free blocks), retries once, then
 * raises `out of memory on cuda:0 (requested X, free Y)`. */
static cdv_block *block_alloc(lua_State *L, cdv_state *st, cdv_device *d, int kind, size_t bytes, void *stream) {
  size_t charged = cdv_footprint(d, kind, bytes);
  cdv_state *quota = cdv_quota_check(L, st, d, charged); /* (see NOTE [state limits]) raises when over */
  cdv_block *b = calloc(1, sizeof *b);
  cdv_err e;
  if (b == NULL) luaL_error(L, "not enough host memory");
  cdv_device_use(L, d);
  if (bytes > 0 && mem_alloc(st, d, kind, bytes, stream, &b->ptr, &e) != 0) {
    if (!is_oom(&e)) {
      free(b);
      cdv_raise(L, d, &e);
    }
    lua_gc(L, LUA_GCCOLLECT);
    cdv_gc_collected(L, st); /* NOTE [collector pacing] */
    cdv_block_release(st, d, NULL, 1, &e); /* the dropped arrays' blocks too: NOTE [block cache] */
    d->be->synchronize(d, &e);
    if (mem_alloc(st, d, kind, bytes, stream, &b->ptr, &e) != 0) {
      free(b);
      if (!is_oom(&e)) cdv_raise(L, d, &e); /* a named limit (the cpu device's vm.max_map_count) */
      oom(L, d, bytes);
    }
  }
  b->refs = 1;
  cdv_live_add(CDV_LIVE_BLOCK, 1);
  b->kind = kind;
  b->dev = d;
  b->bytes = bytes;
  b->generation = d->generation;
  b->last_dev = d;
  b->last_stream = stream;
  b->quota = quota;
  b->charged = charged;
  b->owner = st;
  if (d->be->mem_slack != NULL && b->ptr != NULL) { /* NOTE [tail canary] */
    size_t slack = d->be->mem_slack(d, b->ptr, bytes);
    b->slack = slack < CDV_CANARY_MAX ? slack : CDV_CANARY_MAX;
    cdv_canary_fill(b);
  }
  cdv_state_ref(st); /* (see NOTE [state record]) the block counts against it until freed */
  st->live_arrays++;
  if (quota != NULL) quota->quota_used += charged;
  cdv_mem_account(d, (int64_t)bytes, 1);
  cdv_gc_account(st, bytes, 0); /* NOTE [collector pacing] */
  return b;
}

void cdv_block_used(cdv_block *b, cdv_device *d, void *stream) {
  b->last_dev = d;
  b->last_stream = stream;
}

/* Host code is about to touch host memory that a GPU stream may still be copying: wait for it. Managed memory
 * waits for its whole device (NOTE [managed memory] in managed.c). */
static int host_wait(cdv_block *b, cdv_err *e) {
  if (b->kind == CDV_MEM_MANAGED) return cdv_managed_wait(b, e);
  if (b->last_dev == NULL || b->last_dev->be->done_when_queued || b->last_dev->sticky) return 0;
  if (b->last_dev->generation != b->generation) return 0;
  if (!cdv_stream_alive(b->last_stream)) return 0; /* destroyed after its work finished */
  return b->last_dev->be->stream_synchronize(b->last_dev, b->last_stream, e);
}

/* The elements of an array in host memory, once every stream that may still copy into or out of it is done
 * (cd.mpi hands them to MPI). Raises when the wait fails. */
char *cdv_array_host_data(lua_State *L, cdv_array *a) {
  cdv_err e;
  if (host_wait(a->block, &e) != 0) cdv_raise(L, a->block->last_dev, &e);
  return a->data;
}
int cdv_host_wait(cdv_block *b, cdv_err *e) { return host_wait(b, e); }

/* Drops one reference; the last one frees the memory, ordered after the last stream that used it.
 * Never raises (it runs from __gc): failures are reported through *e and the return value. */
static int block_unref(cdv_block *b, cdv_err *e) {
  if (--b->refs > 0) return 0;
  int rc = 0;
  cdv_device *d = b->dev;
  if (b->release == NULL && !b->borrowed) cdv_mem_account(d, -(int64_t)b->bytes, -1);
  if (b->quota != NULL) b->quota->quota_used -= b->charged;
  if (b->owner != NULL) b->owner->live_arrays--;
  if (b->owner != NULL) cdv_gc_account(b->owner, b->bytes, 1);
  if (b->release != NULL) { /* the host's memory: hand it back once the work queued on it is done */
    cdv_device *ld = b->last_dev;
    void *ls = cdv_stream_alive(b->last_stream) ? b->last_stream : NULL; /* NOTE [stream lifetime] */
    if (ld != NULL && cdv_still_owned(ld, b->generation)) rc = ld->be->stream_synchronize(ld, ls, e);
    b->release(b->release_ud, b->ptr);
  } else if (b->borrowed || b->ptr == NULL) {
  } else if (!cdv_still_owned(d, b->generation)) {
    /* the context is gone or poisoned: its memory went with it, so the driver is not called */
  } else {
    void *stream = cdv_stream_alive(b->last_stream) ? b->last_stream : NULL; /* NOTE [stream lifetime] */
    if (b->last_dev != d) { /* used last from another device's stream: wait there, free in order here */
      rc = host_wait(b, e);
      stream = NULL;
    }
    if (rc == 0 && b->kind == CDV_MEM_PINNED)
      cdv_pinned_free(d, b->ptr, b->bytes); /* idle now: reusable */
    else if (rc == 0 && b->kind == CDV_MEM_DEVICE && b->generation == d->generation) /* NOTE [block cache] */
      rc = cdv_block_put(b->owner, d, b->ptr, cdv_array_class(d, b->bytes), stream, e);
    else if (rc == 0)
      rc = d->be->mem_free(d, b->ptr, b->kind, stream, e);
  }
  cdv_live_add(CDV_LIVE_BLOCK, -1);
  if (b->owner != NULL) cdv_state_unref(b->owner);
  free(b);
  return rc;
}

int cdv_block_unref(cdv_block *b, cdv_err *e) { return block_unref(b, e); }

/* ------------------------------------------------------------ Array values */

static cdv_array *check_any(lua_State *L, int arg) {
  return cdv_check_udata(L, arg, CDV_ARRAY, CDV_ARRAY_MAGIC, sizeof(cdv_array));
}

cdv_array *cdv_check_array(lua_State *L, int arg) {
  cdv_array *a = check_any(L, arg);
  if (a->block == NULL) cdv_self_error(L, arg, "attempt to use a freed array"); /* NOTE [self errors] */
  if (a->block->generation != a->block->dev->generation) cdv_self_error(L, arg, "stale Array: device was reset");
  return a;
}

static size_t nbytes(const cdv_array *a) { return (size_t)a->size * cdv_dtypes[a->dtype].size; }

/* A shape argument is an integer or a table; checked on its own where a missing shape must be named before
 * a missing value (cd.full, new_full). */
static void expect_shape(lua_State *L, int arg) {
  luaL_argexpected(L, lua_type(L, arg) == LUA_TNUMBER || lua_istable(L, arg), arg, "integer or table shape");
}

/* Checks a shape (integer or table of integers) into shape[]; returns ndim. */
static int check_shape(lua_State *L, int arg, int64_t *shape, cdv_dtype t) {
  int ndim;
  if (lua_type(L, arg) == LUA_TTABLE) {
    lua_Unsigned n = lua_rawlen(L, arg);
    if (n > CDV_MAXDIM) luaL_argerror(L, arg, lua_pushfstring(L, "at most %d dimensions, got %d", CDV_MAXDIM, (int)n));
    ndim = (int)n;
    for (int i = 0; i < ndim; i++) {
      lua_rawgeti(L, arg, i + 1);
      int isint;
      lua_Integer v = lua_tointegerx(L, -1, &isint);
      if (!isint || v < 0)
        luaL_argerror(
            L, arg,
            lua_pushfstring(L, "dimension %d must be a non-negative integer, got %s", i + 1, cdv_value_text(L, -1)));
      lua_pop(L, 1);
      shape[i] = v;
    }
  } else if (lua_type(L, arg) == LUA_TNUMBER) {
    ndim = 1;
    shape[0] = cdv_check_count(L, arg, "size");
  } else {
    expect_shape(L, arg); /* raises */
    return 0;
  }
  /* (NOTE [arrays inside their blocks]) a 0 anywhere makes no elements ({2^62, 2^62, 0} as reshape takes it) */
  if (cdv_shape_count(ndim, shape, cdv_dtypes[t].size, NULL, NULL) != 0) luaL_argerror(L, arg, "array is too large");
  return ndim;
}

int cdv_check_shape(lua_State *L, int arg, int64_t *shape, cdv_dtype t) { return check_shape(L, arg, shape, t); }

/* The size of a shape: new_shaped checked that it fits (NOTE [arrays inside their blocks]), but a
 * dimension of 0 makes the size 0 whatever the others are, and {2^62, 2^62, 0} must not be multiplied out in
 * order (signed overflow before the 0). */
static void set_shape(cdv_array *a, int ndim, const int64_t *shape) {
  a->ndim = ndim;
  a->size = 1;
  int zero = 0;
  for (int i = 0; i < ndim; i++) {
    a->shape[i] = shape[i];
    zero |= shape[i] == 0;
  }
  for (int i = 0; i < ndim && !zero; i++) a->size *= shape[i];
  if (zero) a->size = 0;
  uint64_t st = 1; /* C order (NOTE [strided views]); unsigned: {0, 2^62, 2^62} wraps, and has no elements */
  for (int i = ndim - 1; i >= 0; i--) {
    a->strides[i] = (int64_t)st;
    st *= shape[i] ? (uint64_t)shape[i] : 1;
  }
}

/* NOTE [strided views]: an Array is `data` (its element 0) plus, per dimension, a stride in elements (not
 * NumPy's bytes: DLPack's unit, PyTorch's stride()), which may be negative (a reversed slice) or anything where
 * the dimension has one element. Element (i1, ..., in) (0-based) is at data + sum(ik * strides[k]) * itemsize.
 * Every array made by allocation, reshape or view(dtype) is C-ordered ("contiguous"), which is the fast path
 * everywhere; transpose, .T and stepped or axis slices make other strides. Whatever needs contiguous memory
 * either handles strides (element access, host reads through gather(): totable, tostring, tobytes, astype;
 * fill and copy_from through the views.lua functions in the Array metatable: a generated elementwise kernel,
 * which takes strided operands) or refuses with a message naming a:contiguous() (kernel launch arguments,
 * cd.copy, reshape, view to another element size, the embedding API). */

/* Calls the function views.lua keeps in the Array metatable under `field` with the nargs values on top of the
 * stack, for nres results (see NOTE [strided views]; strided work runs as generated kernels). */
static void call_views(lua_State *L, const char *field, int nargs, int nres) {
  luaL_getmetatable(L, CDV_ARRAY);
  lua_pushstring(L, field);
  if (lua_rawget(L, -2) != LUA_TFUNCTION)
    luaL_error(L, "the array is not contiguous: copy it with a:contiguous() first");
  lua_remove(L, -2);
  lua_insert(L, -1 - nargs);
  lua_call(L, nargs, nres);
}

/* The lowest and highest element offsets of a's elements from a->data (a has elements). */
static void elem_span(const cdv_array *a, int64_t *lo, int64_t *hi) {
  *lo = *hi = 0;
  for (int i = 0; i < a->ndim; i++) {
    int64_t d = (a->shape[i] - 1) * a->strides[i];
    if (d < 0)
      *lo += d;
    else
      *hi += d;
  }
}

/* The byte offset of position k (0-based) along a dimension of stride `stride`: 0 in an array of no elements,
 * whose strides may be as large as its shape (a non-empty array's offsets lie inside its memory). */
static ptrdiff_t elem_offset(const cdv_array *a, int64_t k, int64_t stride) {
  return a->size == 0 ? 0 : (ptrdiff_t)(k * stride) * (ptrdiff_t)cdv_dtypes[a->dtype].size;
}

/* Copies the elements of a strided layout at src into dst in C order; returns dst past the last one. */
static char *gather(char *dst, const char *src, int ndim, const int64_t *shape, const int64_t *strides, size_t is) {
  if (ndim == 0) {
    memcpy(dst, src, is);
    return dst + is;
  }
  if (ndim == 1 && strides[0] == 1) {
    memcpy(dst, src, (size_t)shape[0] * is);
    return dst + (size_t)shape[0] * is;
  }
  for (int64_t i = 0; i < shape[0]; i++)
    dst = gather(dst, src + (ptrdiff_t)(i * strides[0]) * (ptrdiff_t)is, ndim - 1, shape + 1, strides + 1, is);
  return dst;
}

/* Raises `bad argument #arg to 'f' (WHAT is not contiguous: copy it with a:contiguous() first)` where an
 * operation needs C-ordered memory (NOTE [strided views]). */
static void need_contiguous(lua_State *L, const cdv_array *a, int arg, const char *what) {
  if (cdv_array_contiguous(a)) return;
  cdv_self_error(L, arg, lua_pushfstring(L, "%s is not contiguous: copy it with a:contiguous() first", what));
}

/* NOTE [arrays inside their blocks]: no Array describes memory it does not own. Every Array is made by one
 * constructor, in two steps: new_shaped (a closed Array of a checked shape: its element count and byte count fit,
 * else "too large", before anything is allocated) and attach (its block and element 0, then every element its
 * shape, strides and offset can address checked to lie inside the block, else it is released and refused). Before,
 * cd.matmul(cd.zeros({2^32, 0}), cd.zeros({0, 2^32})) made a {2^32, 2^32} Array of size 0 (the product wrapped) over
 * no memory, whose c[i][j] read and wrote absolute addresses. cd._inside(a) reads the invariant (the fuzzer asks it
 * of every live Array after each call); doc/hardening.md lists the places that compute sizes and their checks. */

/* The element and byte counts of a shape of elements of `itemsize` bytes: 0, or -1 when they pass MAX_BYTES or
 * overflow. A dimension of 0 makes both 0 whatever the others are ({2^62, 2^62, 0} has no elements). */
int cdv_shape_count(int ndim, const int64_t *shape, size_t itemsize, int64_t *count, size_t *bytes) {
  int64_t n = 1;
  int over = 0;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0) return -1;
    if (shape[i] == 0) {
      n = 0;
      over = 0;
      break;
    }
    over |= __builtin_mul_overflow(n, shape[i], &n);
  }
  int64_t b;
  if (over || __builtin_mul_overflow(n, (int64_t)itemsize, &b) || b > MAX_BYTES) return -1;
  if (count != NULL) *count = n;
  if (bytes != NULL) *bytes = (size_t)b;
  return 0;
}

/* "float32 array of shape {2, 3} is too large (more than 2^56 bytes)" pushed, when that shape is too large;
 * else NULL */
const char *cdv_shape_problem(lua_State *L, cdv_dtype t, int ndim, const int64_t *shape) {
  if (cdv_shape_count(ndim, shape, cdv_dtypes[t].size, NULL, NULL) == 0) return NULL;
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_addstring(&b, cdv_dtypes[t].name);
  luaL_addstring(&b, " array of shape {");
  for (int i = 0; i < ndim; i++) {
    lua_pushfstring(L, i ? ", %I" : "%I", (lua_Integer)shape[i]);
    luaL_addvalue(&b);
  }
  luaL_addstring(&b, "} is too large (more than 2^56 bytes)");
  luaL_pushresult(&b);
  return lua_tostring(L, -1);
}

/* NULL when every element of a (shape, strides, element 0 at data) lies inside [b->ptr, b->ptr + b->bytes), else
 * why not (a static text). An array of no elements addresses nothing. */
static const char *layout_problem(const cdv_array *a, const cdv_block *b, const char *data) {
  int64_t count, lo = 0, hi = 0, is = (int64_t)cdv_dtypes[a->dtype].size;
  if (cdv_shape_count(a->ndim, a->shape, (size_t)is, &count, NULL) != 0) return "its shape is too large";
  if (count != a->size) return "its size is not the product of its shape";
  if (count == 0) return NULL;
  for (int i = 0; i < a->ndim; i++) {
    int64_t d;
    if (__builtin_mul_overflow(a->shape[i] - 1, a->strides[i], &d) ||
        __builtin_add_overflow(d < 0 ? lo : hi, d, d < 0 ? &lo : &hi))
      return "its strides reach past any block";
  }
  /* byte offsets from the block's start; uintptr_t: the block of an ipc array being made has no memory yet */
  int64_t off = (int64_t)((uintptr_t)data - (uintptr_t)b->ptr), first, last;
  if (__builtin_mul_overflow(lo, is, &first) || __builtin_add_overflow(first, off, &first) ||
      __builtin_add_overflow(hi, 1, &last) || __builtin_mul_overflow(last, is, &last) ||
      __builtin_add_overflow(last, off, &last))
    return "its strides reach past any block";
  if (first < 0) return "an element lies before its block";
  if ((uint64_t)last > b->bytes) return "an element lies past the end of its block";
  return NULL;
}

/* The first step of the constructor (NOTE [arrays inside their blocks]): a closed Array (no block until the memory
 * exists) of dtype t, shape and strides (NULL: C order) pushed; a shape that is too large raises first. */
static cdv_array *new_shaped(lua_State *L, cdv_dtype t, int ndim, const int64_t *shape, const int64_t *strides) {
  const char *why = cdv_shape_problem(L, t, ndim, shape);
  if (why != NULL) lua_error(L);
  cdv_array *a = lua_newuserdatauv(L, sizeof *a, 0);
  memset(a, 0, sizeof *a);
  a->magic = CDV_ARRAY_MAGIC;
  a->dtype = t;
  set_shape(a, ndim, shape);
  if (strides != NULL) memcpy(a->strides, strides, (size_t)ndim * sizeof *strides);
  luaL_setmetatable(L, CDV_ARRAY);
  cdv_track_late(L, -1); /* NOTE [objects made in finalizers] */
  return a;
}

/* The second step: a takes a reference of b (counted by the caller) with element 0 at data, if every element it
 * addresses lies inside b; else the reference is dropped and the Array refused. */
static void attach(lua_State *L, cdv_array *a, cdv_block *b, char *data) {
  a->block = b;
  a->data = data;
  cdv_live_add(CDV_LIVE_ARRAY, 1);
  const char *why = layout_problem(a, b, data);
  if (why == NULL) return;
  cdv_err e; /* the reference goes back as a's release would give it (NOTE [array memory]); never used memory */
  a->block = NULL;
  a->data = NULL;
  cdv_live_add(CDV_LIVE_ARRAY, -1);
  block_unref(b, &e);
  luaL_error(L, "%s array would describe memory it does not own (%s)", cdv_dtypes[a->dtype].name, why);
}

/* cd._inside(a, ...) -> true, or false, why and the position of the first Array that is not: the invariant of NOTE
 * [arrays inside their blocks], asked by the fuzzer of every live Array after each call (one call for all). A freed
 * Array describes no memory; a value that is no Array (by its tag: NOTE [magic]) is passed over, whatever its
 * metatable says. Internal (not in the manual). */
static int l_inside(lua_State *L) {
  for (int i = 1; i <= lua_gettop(L); i++) {
    cdv_array *a = cdv_test_magic(L, i, sizeof *a, CDV_ARRAY_MAGIC);
    const char *why = a != NULL && a->block != NULL ? layout_problem(a, a->block, a->data) : NULL;
    if (why == NULL) continue;
    lua_pushboolean(L, 0);
    lua_pushstring(L, why);
    lua_pushinteger(L, i);
    return 3;
  }
  lua_pushboolean(L, 1);
  return 1;
}

static cdv_array *push_array(lua_State *L, cdv_state *st, cdv_device *d, cdv_dtype t, int ndim, const int64_t *shape,
                             int kind, cdv_stream *s) {
  size_t bytes; /* a shape too large is refused by new_shaped */
  if (cdv_shape_count(ndim, shape, cdv_dtypes[t].size, NULL, &bytes) == 0)
    cdv_gc_before_alloc(L, st, d, bytes); /* before the new userdata: NOTE [collector pacing] */
  cdv_array *a = new_shaped(L, t, ndim, shape, NULL);
  void *stream = s != NULL ? cdv_stream_for(L, d, s) : cdv_state_stream(L, st, d)->handle;
  cdv_block *b = block_alloc(L, st, d, kind, nbytes(a), stream);
  attach(L, a, b, b->ptr);
  return a;
}

cdv_array *cdv_push_array(lua_State *L, cdv_device *d, cdv_dtype t, int ndim, const int64_t *shape, int kind,
                          cdv_stream *s) {
  return push_array(L, cdv_get_state(L), d, t, ndim, shape, kind, s);
}

/* Memory the host owns (cudadev_push_array): no allocation, no quota, no statistics. */
cdv_array *cdv_push_host_array(lua_State *L, cdv_device *d, cdv_dtype t, int ndim, const int64_t *shape, void *ptr,
                               void (*release)(void *ud, void *ptr), void *ud) {
  cdv_array *a = new_shaped(L, t, ndim, shape, NULL);
  cdv_block *b = calloc(1, sizeof *b);
  if (b == NULL) luaL_error(L, "not enough host memory");
  b->refs = 1;
  cdv_live_add(CDV_LIVE_BLOCK, 1);
  b->kind = CDV_MEM_DEVICE;
  b->dev = b->last_dev = d;
  b->ptr = ptr;
  b->bytes = nbytes(a);
  b->generation = d->generation;
  b->release = release;
  b->release_ud = ud;
  b->borrowed = release == NULL;
  attach(L, a, b, ptr);
  return a;
}

typedef struct create_args {
  cdv_device *dev;
  cdv_stream *stream;
  int kind;
  int ipc; /* {ipc = true}: NOTE [ipc] in ipc.c */
} create_args;

/* Reads {device=, stream=, pinned=} at arg (may be none). */
static create_args check_create_opts(lua_State *L, cdv_state *st, int arg, const char *fname) {
  create_args c = {NULL, NULL, CDV_MEM_DEVICE, 0};
  if (lua_isnoneornil(L, arg)) { /* no options: the default device (the common case, without the lookups) */
    c.dev = cdv_state_device(L, st);
    return c;
  }
  cdv_check_options(L, arg, create_opts, fname);
  int pinned = cdv_check_boolean_field(L, arg, "pinned", 0, fname);
  c.ipc = cdv_check_boolean_field(L, arg, "ipc", 0, fname);
  if (c.ipc && pinned) cdv_opt_error(L, "ipc", fname, "an ipc array is device memory, not pinned host memory");
  int managed = cdv_managed_option(L, arg, pinned, fname); /* NOTE [managed memory] */
  if (c.ipc && managed) cdv_opt_error(L, "ipc", fname, "an ipc array is device memory of its own, not managed memory");
  c.dev = cdv_opt_device_field(L, arg, fname);
  c.stream = cdv_opt_stream_field(L, arg, fname);
  if (c.dev == NULL) c.dev = c.stream ? c.stream->dev : pinned ? cdv_cpu() : cdv_state_device(L, st);
  if (pinned && !c.dev->be->host_memory)
    luaL_argerror(L, arg, lua_pushfstring(L, "pinned arrays live in host memory, not on %s", c.dev->alias));
  if (c.stream && c.stream->dev != c.dev)
    luaL_argerror(L, arg,
                  lua_pushfstring(L, "stream is on %s but the array on %s", c.stream->dev->alias, c.dev->alias));
  /* page-locking needs the driver; without one a pinned request is plain host memory (is_pinned false), unless
   * the fake_pinned hook asks for the pinned pool's plain memory (NOTE [test hooks]) */
  if (pinned && (cdv_cuda_load() == 0 || cdv_get_hooks().fake_pinned)) c.kind = CDV_MEM_PINNED;
  if (managed) c.kind = CDV_MEM_MANAGED;
  return c;
}

/* the array the options ask for: an {ipc = true} one is an allocation of its own (NOTE [ipc] in ipc.c) */
static cdv_array *push_created(lua_State *L, cdv_state *st, const create_args *c, cdv_dtype t, int ndim,
                               const int64_t *shape, const char *fname) {
  if (!c->ipc) return push_array(L, st, c->dev, t, ndim, shape, c->kind, c->stream);
  cdv_ipc_push_array(L, c->dev, t, ndim, shape, fname);
  return lua_touserdata(L, -1);
}

/* (shape at `shape`, then [dtype] [, opts] from `next`): the dtype may be left out before an options
 * table. Returns the new array (pushed) and the stream it was made on. */
static cdv_array *create(lua_State *L, int shape_arg, int next, const char *fname, cdv_stream **s) {
  int64_t shape[CDV_MAXDIM];
  int o = lua_istable(L, next) ? next : next + 1;
  cdv_dtype t = o == next ? CDV_F32 : cdv_check_dtype(L, next, CDV_F32);
  int ndim = check_shape(L, shape_arg, shape, t);
  cdv_state *st = cdv_get_state(L);
  create_args c = check_create_opts(L, st, o, fname);
  if (s != NULL) *s = c.stream;
  return push_created(L, st, &c, t, ndim, shape, fname);
}

static void fill(lua_State *L, cdv_array *a, const void *pattern, cdv_stream *s);

static int l_empty(lua_State *L) {
  create(L, 1, 2, "empty", NULL);
  return 1;
}

static void fill_value(lua_State *L, cdv_array *a, int vidx, int arg, cdv_stream *s) {
  uint64_t pattern[2] = {0, 0}; /* room for a complex128 */
  check_elem(L, vidx, arg, a->dtype, pattern);
  fill(L, a, pattern, s);
}

static int l_zeros(lua_State *L) {
  cdv_stream *s;
  cdv_array *a = create(L, 1, 2, "zeros", &s);
  uint64_t zero[2] = {0, 0}; /* room for a complex128 */
  fill(L, a, zero, s);
  return 1;
}

static int l_ones(lua_State *L) {
  cdv_stream *s;
  cdv_array *a = create(L, 1, 2, "ones", &s);
  lua_pushinteger(L, 1);
  fill_value(L, a, lua_gettop(L), 1, s);
  lua_pop(L, 1);
  return 1;
}

/* cd.full(shape, value [, dtype] [, opts]) */
static int l_full(lua_State *L) {
  cdv_stream *s;
  expect_shape(L, 1);
  luaL_checkany(L, 2);
  cdv_array *a = create(L, 1, 3, "full", &s);
  fill_value(L, a, 2, 2, s);
  return 1;
}

/* ------------------------------------------------------------ copies */

/* Copies go through the backend of the GPU side when there is one (cpu<->cpu through the cpu backend); a
 * GPU-to-GPU copy runs on either side's stream. Returns that device and the stream's handle (s NULL: the
 * current stream), for src (NULL: Lua values, in host memory) to dst. */
static cdv_device *copy_device(lua_State *L, cdv_array *dst, cdv_array *src, cdv_stream *s, void **stream) {
  cdv_device *dd = dst->block->dev, *sd = src != NULL ? src->block->dev : cdv_cpu(),
             *d = !dd->be->host_memory ? dd : sd;
  if (s != NULL && !s->dev->be->host_memory && (s->dev == dd || s->dev == sd)) d = s->dev;
  *stream = cdv_stream_for(L, d, s);
  return d;
}

/* Host memory that is not page-locked (a Lua table or string, src == NULL, is too). */
static int pageable(const cdv_array *a) {
  return a == NULL || (a->block->dev->be->host_memory && a->block->kind != CDV_MEM_PINNED);
}

/* Activates d, the copy's device, and waits until host code may touch the host sides of a copy from src (NULL:
 * Lua values) to dst. */
static void copy_prepare(lua_State *L, cdv_device *d, cdv_array *dst, cdv_array *src) {
  cdv_err e;
  cdv_device_use(L, d);
  if (dst->block->dev->be->host_memory && host_wait(dst->block, &e) != 0) cdv_raise(L, dst->block->last_dev, &e);
  if (src != NULL && src->block->dev->be->host_memory && host_wait(src->block, &e) != 0)
    cdv_raise(L, src->block->last_dev, &e);
}

/* Copies n bytes between two blocks' memory on stream s (NULL: the current stream). Copies that touch
 * pageable host memory complete before returning, the large ones staged (NOTE [staged copies]); device and
 * pinned copies stay asynchronous. */
static void copy_bytes(lua_State *L, cdv_array *dst, size_t doff, cdv_array *src, size_t soff, size_t n,
                       cdv_stream *s) {
  void *stream;
  cdv_device *d = copy_device(L, dst, src, s, &stream);
  cdv_err e;
  if (n == 0) return;
  copy_prepare(L, d, dst, src);
  size_t piece = pageable(dst) != pageable(src) ? cdv_stage_piece(d, n) : 0;
  if (piece && pageable(src))
    cdv_stage_h2d(L, d, stream, dst->data + doff, dst->block->dev, src->data + soff, n, piece);
  else if (piece)
    cdv_stage_d2h(L, d, stream, dst->data + doff, src->data + soff, src->block->dev, n, piece);
  else if (d->be->memcpy(d, dst->data + doff, dst->block->dev, src->data + soff, src->block->dev, n, stream, &e))
    cdv_raise(L, d, &e);
  cdv_block_used(dst->block, d, stream);
  cdv_block_used(src->block, d, stream);
  if (piece == 0 &&
      (((pageable(dst) || pageable(src)) && !d->be->done_when_queued) || cdv_get_state(L)->launch_blocking))
    if (d->be->stream_synchronize(d, stream, &e) != 0) cdv_raise(L, d, &e);
}

static void copy_lua(lua_State *L, int arg, cdv_array *dst, int64_t doff, int64_t soff, int64_t count, int64_t srcn,
                     cdv_stream *s);

static int64_t opt_count_field(lua_State *L, int o, const char *k, int64_t def) {
  int64_t v = def;
  if (cdv_opt_field(L, o, k) != LUA_TNIL) {
    int isint;
    lua_Integer x = lua_tointegerx(L, -1, &isint);
    if (!isint || x < 0) luaL_argerror(L, o, lua_pushfstring(L, "'%s' must be a non-negative integer", k));
    v = x;
  }
  lua_pop(L, 1);
  return v;
}

static void check_same_dtype(lua_State *L, int arg, const cdv_array *src, const cdv_array *dst) {
  if (src->dtype != dst->dtype)
    luaL_argerror(
        L, arg,
        lua_pushfstring(L, "dtype mismatch: %s into %s (convert the source first: src:astype(\"%s\"))",
                        cdv_dtypes[src->dtype].name, cdv_dtypes[dst->dtype].name, cdv_dtypes[dst->dtype].name));
}

/* Copies elements soff .. soff + count - 1 of the source at arg (an Array, or a Lua table or string of srcn
 * elements) to dst from element doff. */
static void copy_source(lua_State *L, int arg, cdv_array *dst, int64_t doff, int64_t soff, int64_t count, int64_t srcn,
                        cdv_stream *s) {
  size_t is = cdv_dtypes[dst->dtype].size;
  if (lua_istable(L, arg) || lua_type(L, arg) == LUA_TSTRING) {
    copy_lua(L, arg, dst, doff, soff, count, srcn, s);
    return;
  }
  cdv_array *src = cdv_check_array(L, arg);
  check_same_dtype(L, arg, src, dst);
  copy_bytes(L, dst, (size_t)doff * is, src, (size_t)soff * is, (size_t)count * is, s);
}

static int64_t lua_source_count(lua_State *L, int arg, cdv_dtype t);

/* cd.copy(dst, src [, {count=, dst_offset=, src_offset=, stream=}]): offsets and count in elements */
static int l_copy(lua_State *L) {
  cdv_array *dst = cdv_check_array(L, 1);
  luaL_checkany(L, 2);
  cdv_check_options(L, 3, copy_range_opts, "copy");
  int64_t doff = opt_count_field(L, 3, "dst_offset", 0), soff = opt_count_field(L, 3, "src_offset", 0);
  cdv_stream *s = cdv_opt_stream_field(L, 3, "copy");
  if (!cdv_array_contiguous(dst)) /* (see NOTE [strided views]) offsets and counts address C-ordered memory */
    luaL_argerror(L, 1, "the destination is not contiguous: write a view with dst:copy_from(src)");
  if (lua_isuserdata(L, 2)) need_contiguous(L, cdv_check_array(L, 2), 2, "the source");
  int64_t srcn = lua_isuserdata(L, 2) ? cdv_check_array(L, 2)->size : lua_source_count(L, 2, dst->dtype);
  if (soff > srcn)
    luaL_argerror(L, 3, lua_pushfstring(L, "'src_offset' %I is past the end of the source (%I elements)", soff, srcn));
  if (doff > dst->size)
    luaL_argerror(
        L, 3, lua_pushfstring(L, "'dst_offset' %I is past the end of the destination (%I elements)", doff, dst->size));
  int64_t count = opt_count_field(L, 3, "count", srcn - soff);
  /* compared with what is left, never summed: offset + count may overflow */
  if (count > srcn - soff) {
    char last[24];
    snprintf(last, sizeof last, "%llu", (unsigned long long)soff + (unsigned long long)count);
    luaL_argerror(L, 2, lua_pushfstring(L, "source of %I elements has no elements %I to %s", srcn, soff + 1, last));
  }
  if (count > dst->size - doff)
    luaL_argerror(L, 2,
                  lua_pushfstring(L, "array of %I %s cannot hold %I elements", dst->size - doff,
                                  cdv_dtypes[dst->dtype].name, count));
  copy_source(L, 2, dst, doff, soff, count, srcn, s);
  lua_settop(L, 1);
  return 1;
}

/* a:copy_from(src [, {stream=}]): src has exactly a's number of elements */
static int array_copy_from(lua_State *L) {
  cdv_array *dst = cdv_check_array(L, 1);
  luaL_checkany(L, 2);
  cdv_check_options(L, 3, copy_opts, "copy_from");
  cdv_stream *s = cdv_opt_stream_field(L, 3, "copy_from");
  int64_t srcn = lua_isuserdata(L, 2) ? cdv_check_array(L, 2)->size : lua_source_count(L, 2, dst->dtype);
  if (srcn != dst->size)
    luaL_argerror(L, 2, lua_pushfstring(L, "size mismatch: the source has %I elements, the array %I", srcn, dst->size));
  cdv_array *src = lua_isuserdata(L, 2) ? cdv_check_array(L, 2) : NULL;
  if (cdv_array_contiguous(dst) && (src == NULL || cdv_array_contiguous(src))) {
    copy_source(L, 2, dst, 0, 0, srcn, srcn, s);
    lua_settop(L, 1);
    return 1;
  }
  /* (see NOTE [strided views]) checked here, copied by views.lua (a table or string through a contiguous temporary) */
  lua_settop(L, 3);
  if (src != NULL) check_same_dtype(L, 2, src, dst);
  if (src == NULL) {
    cdv_array *t = cdv_push_array(L, dst->block->dev, dst->dtype, dst->ndim, dst->shape, CDV_MEM_DEVICE,
                                  s != NULL && s->dev == dst->block->dev ? s : NULL);
    copy_source(L, 2, t, 0, 0, srcn, srcn, s);
    lua_replace(L, 2);
  }
  lua_pushvalue(L, 1);
  lua_pushvalue(L, 2);
  if (s != NULL)
    lua_getfield(L, 3, "stream");
  else
    lua_pushnil(L);
  call_views(L, "__views_copy", 3, 0);
  lua_settop(L, 1);
  return 1;
}

/* a:to(device [, {stream=}]) -> a itself when already there, else a copy on that device */
static int array_to(lua_State *L) {
  cdv_array *a = cdv_check_array(L, 1);
  cdv_device *d = cdv_check_device(L, 2);
  cdv_check_options(L, 3, copy_opts, "to");
  cdv_stream *s = cdv_opt_stream_field(L, 3, "to");
  if (d == a->block->dev) {
    lua_settop(L, 1);
    return 1;
  }
  if (!cdv_array_contiguous(a)) { /* (see NOTE [strided views]) a contiguous copy where a is, then moved */
    lua_settop(L, 3);
    lua_pushvalue(L, 1);
    if (s != NULL && s->dev == a->block->dev)
      lua_getfield(L, 3, "stream");
    else
      lua_pushnil(L);
    call_views(L, "__views_contiguous", 2, 1);
    lua_replace(L, 1);
    a = cdv_check_array(L, 1);
  }
  cdv_stream *alloc_s = s != NULL && s->dev == d ? s : NULL;
  cdv_array *b = cdv_push_array(L, d, a->dtype, a->ndim, a->shape, CDV_MEM_DEVICE, alloc_s);
  copy_bytes(L, b, 0, a, 0, nbytes(a), s);
  return 1;
}

/* NOTE [pinned reads]: a finalizer may run at any Lua allocation, and one that frees an Array (a RAII wrapper's
 * __gc calling a:free()) must not take the memory from under a reader that still uses it (a:totable() builds its
 * tables from the array's own memory on the cpu device; a GPU read allocates a host copy before it copies).
 * Such a reader first pins the block: an ArrayPin userdata on the stack, marked to-be-closed, holds one
 * reference to it, and the reader works on a snapshot of the Array (its own cdv_array, with the block and the
 * data pointer), never on the Array again. A free while pinned only drops the Array's reference; the pin's
 * release, when the reader returns or raises, frees the block. The pin is allocated before the reference is
 * taken, and the Array is checked again after that allocation, since the allocation may run the finalizer. */
typedef struct array_pin {
  cdv_block *b;
} array_pin;
#define CDV_ARRAY_PIN "cudadev.ArrayPin"

static int pin_release(lua_State *L) { /* __close and __gc; never raises */
  array_pin *p = luaL_testudata(L, 1, CDV_ARRAY_PIN);
  cdv_block *b = p != NULL ? p->b : NULL;
  cdv_err e;
  if (b == NULL) return 0;
  p->b = NULL;
  cdv_device *d = b->dev;
  if (block_unref(b, &e) != 0) cdv_warn_release(L, "freeing an array", d, &e);
  return 0;
}

/* Pins the block of the live Array at arg and fills *snap with it (NOTE [pinned reads]); pushes the pin.
 * Returns 1, or 0 when the allocations here ran a finalizer that freed the array (nothing pinned). */
static int pin_array(lua_State *L, int arg, cdv_array *snap) {
  arg = lua_absindex(L, arg);
  array_pin *p = lua_newuserdatauv(L, sizeof *p, 0);
  p->b = NULL;
  luaL_setmetatable(L, CDV_ARRAY_PIN);
  lua_toclose(L, -1);
  *snap = *check_any(L, arg); /* again: the allocations above may have run a finalizer that freed it */
  if (snap->block == NULL) return 0;
  p->b = snap->block;
  p->b->refs++;
  return 1;
}

/* Reads a's elements into host memory (the array's own memory when it is on the host). `a` is a pinned
 * snapshot (NOTE [pinned reads]): the copy to the host allocates. */
static const char *host_view(lua_State *L, cdv_array *a) {
  cdv_err e;
  int contiguous = cdv_array_contiguous(a);
  size_t is = cdv_dtypes[a->dtype].size;
  const char *src = a->data;
  if (cdv_host_reachable(a->block)) {
    if (host_wait(a->block, &e) != 0) cdv_raise(L, a->block->last_dev, &e);
    if (contiguous) return a->data;
  } else if (contiguous) {
    cdv_array *h = cdv_push_array(L, cdv_cpu(), a->dtype, a->ndim, a->shape, CDV_MEM_DEVICE, NULL);
    copy_bytes(L, h, 0, a, 0, nbytes(a), NULL);
    return h->data; /* anchored by the temporary on the stack */
  } else { /* (see NOTE [strided views]) the span the elements lie in comes over whole, then is gathered */
    int64_t lo, hi, n;
    elem_span(a, &lo, &hi);
    n = hi - lo + 1;
    cdv_array *h = cdv_push_array(L, cdv_cpu(), a->dtype, 1, &n, CDV_MEM_DEVICE, NULL);
    cdv_array span = *a;
    span.data = a->data + (ptrdiff_t)lo * (ptrdiff_t)is;
    copy_bytes(L, h, 0, &span, 0, (size_t)n * is, NULL);
    src = h->data - (ptrdiff_t)lo * (ptrdiff_t)is;
  }
  cdv_array *c = cdv_push_array(L, cdv_cpu(), a->dtype, a->ndim, a->shape, CDV_MEM_DEVICE, NULL);
  gather(c->data, src, a->ndim, a->shape, a->strides, is);
  return c->data;
}

/* ------------------------------------------------------------ Lua tables and strings as sources */

#define LEAF_BATCH 32 /* NOTE [table batches] */

static int64_t lua_source_count(lua_State *L, int arg, cdv_dtype t) {
  if (lua_type(L, arg) == LUA_TSTRING) {
    size_t len = lua_rawlen(L, arg), is = cdv_dtypes[t].size;
    if (len % is != 0)
      luaL_argerror(L, arg,
                    lua_pushfstring(L, "string of %d bytes is not a whole number of %s", (int)len, cdv_dtypes[t].name));
    return (int64_t)(len / is);
  }
  if (!lua_istable(L, arg)) luaL_typeerror(L, arg, "Array, table or string");
  /* nested tables count their leaves; the elements are read LEAF_BATCH at a time (NOTE [table batches]) */
  arg = lua_absindex(L, arg);
  int64_t n = 0;
  lua_Unsigned len = lua_rawlen(L, arg);
  luaL_checkstack(L, LEAF_BATCH + 4, "table nested too deeply");
  for (lua_Unsigned i = 1; i <= len; i += LEAF_BATCH) {
    int top = lua_gettop(L), m = len - i + 1 < LEAF_BATCH ? (int)(len - i + 1) : LEAF_BATCH;
    char ty[LEAF_BATCH];
    for (int j = 0; j < m; j++) ty[j] = (char)lua_rawgeti(L, arg, (lua_Integer)(i + (lua_Unsigned)j));
    for (int j = 0; j < m; j++)
      n += ty[j] == LUA_TTABLE && !is_pair(L, top + 1 + j, t) ? lua_source_count(L, top + 1 + j, t) : 1;
    lua_settop(L, top);
  }
  return n;
}

/* Where fill_from_table puts the leaves of a table: leaves first .. last - 1 into the window p .. end, which a
 * staged copy (stage) sends and replaces when it is full; the others are converted, which checks them as a
 * copy of the whole table would, and dropped. k counts the leaves seen, up to stop. */
typedef struct leaf_sink {
  char *base, *p, *end;
  int64_t k, first, last, stop;
  cdv_stage *stage;
} leaf_sink;

/* The window is full (or not open yet): send what it holds, open the stage's next buffer. */
static void next_window(lua_State *L, leaf_sink *k) {
  size_t len;
  if (k->p != k->base) cdv_stage_send(L, k->stage, (size_t)(k->p - k->base));
  k->base = k->p = cdv_stage_next(L, k->stage, &len);
  k->end = k->p + len;
}

/* Converts the leaf at stack index idx (absolute) into the sink. */
static void sink_leaf(lua_State *L, int idx, leaf_sink *k, cdv_dtype dt, int arg) {
  uint64_t dropped[2];
  int keep = k->k >= k->first && k->k < k->last;
  if (keep && k->p == k->end) next_window(L, k);
  const char *msg = to_elem(L, idx, dt, keep ? (void *)k->p : dropped);
  ++k->k;
  if (msg != NULL) luaL_argerror(L, arg, lua_pushfstring(L, "element %I: %s", k->k, msg));
  if (keep) k->p += cdv_dtypes[dt].size;
}

/* NOTE [table batches]: reading a table through the C API costs a push per element and a pop; the pop
 * (lua_settop) costs as much as the push, so the elements are pushed LEAF_BATCH at a time and popped together.
 * A batch of numbers bound for a float32 or float64 window with room for all of them is stored without
 * sink_leaf's checks (a number is always representable): that is most of what a table of numbers holds. Both
 * halve the cost per element. Any other batch goes through sink_leaf element by element. */
static void fill_from_table(lua_State *L, int t, cdv_dtype dt, leaf_sink *k, int arg) {
  lua_Unsigned len = lua_rawlen(L, t);
  luaL_checkstack(L, LEAF_BATCH + 4, "table nested too deeply");
  int flt = dt == CDV_F32 || dt == CDV_F64;
  for (lua_Unsigned i = 1; i <= len && k->k < k->stop; i += LEAF_BATCH) {
    int top = lua_gettop(L), m = len - i + 1 < LEAF_BATCH ? (int)(len - i + 1) : LEAF_BATCH;
    char tys[LEAF_BATCH]; /* lua_rawgeti says the type: no lua_type call per element */
    int numbers = flt && k->k >= k->first && k->k + m <= k->last && k->k + m <= k->stop &&
                  (size_t)(k->end - k->p) >= (size_t)m * cdv_dtypes[dt].size;
    for (int j = 0; j < m; j++)
      numbers &= (tys[j] = (char)lua_rawgeti(L, t, (lua_Integer)(i + (lua_Unsigned)j))) == LUA_TNUMBER;
    if (numbers) { /* the whole batch is numbers that all go into the window: the common case, in a tight loop */
      char *p = k->p;
      for (int j = 1; j <= m; j++) {
        double v = lua_tonumberx(L, top + j, NULL);
        if (dt == CDV_F32) {
          float f = (float)v;
          memcpy(p, &f, 4);
          p += 4;
        } else {
          memcpy(p, &v, 8);
          p += 8;
        }
      }
      k->p = p;
      k->k += m;
      lua_settop(L, top);
      continue;
    }
    for (int j = 1; j <= m && k->k < k->stop; j++) { /* else element by element, checked */
      if (tys[j - 1] == LUA_TTABLE && !is_pair(L, top + j, dt))
        fill_from_table(L, top + j, dt, k, arg);
      else
        sink_leaf(L, top + j, k, dt, arg);
    }
    lua_settop(L, top);
  }
}

/* Fills host array h with the elements of the Lua table or string at idx (h->size of them). */
static void fill_host(lua_State *L, int idx, cdv_array *h, int arg) {
  if (lua_type(L, idx) == LUA_TSTRING) {
    if (nbytes(h) > 0) memcpy(h->data, lua_tostring(L, idx), nbytes(h)); /* a 0-byte array has no memory */
    return;
  }
  leaf_sink k = {h->data, h->data, h->data + nbytes(h), 0, 0, h->size, h->size, NULL};
  fill_from_table(L, idx, h->dtype, &k, arg);
}

/* The leaves soff .. soff + count - 1 of the table at arg (of srcn leaves), converted straight into the
 * buffers of an open stage. */
static void stage_table(lua_State *L, int arg, cdv_dtype t, int64_t soff, int64_t count, int64_t srcn, cdv_stage *st) {
  leaf_sink k = {NULL, NULL, NULL, 0, soff, soff + count, srcn, st};
  fill_from_table(L, arg, t, &k, arg);
  if (k.p != k.base) cdv_stage_send(L, st, (size_t)(k.p - k.base));
  cdv_stage_finish(L, st);
}

/* copy_source for a Lua table or string: staged (NOTE [staged copies]) when it is large and dst is memory the
 * copy's backend reaches by DMA; else converted into a temporary host array, which is then copied. */
static void copy_lua(lua_State *L, int arg, cdv_array *dst, int64_t doff, int64_t soff, int64_t count, int64_t srcn,
                     cdv_stream *s) {
  size_t is = cdv_dtypes[dst->dtype].size, n = (size_t)count * is;
  void *stream;
  cdv_device *d = copy_device(L, dst, NULL, s, &stream);
  size_t piece = pageable(dst) ? 0 : cdv_stage_piece(d, n);
  arg = lua_absindex(L, arg);
  if (piece == 0) {
    int64_t shape[1] = {srcn};
    cdv_array *h = cdv_push_array(L, cdv_cpu(), dst->dtype, 1, shape, CDV_MEM_DEVICE, NULL);
    fill_host(L, arg, h, arg);
    copy_bytes(L, dst, (size_t)doff * is, h, (size_t)soff * is, n, s);
    lua_pop(L, 1);
    return;
  }
  copy_prepare(L, d, dst, NULL);
  char *to = dst->data + (size_t)doff * is;
  if (lua_type(L, arg) == LUA_TSTRING)
    cdv_stage_h2d(L, d, stream, to, dst->block->dev, lua_tostring(L, arg) + (size_t)soff * is, n, piece);
  else
    stage_table(L, arg, dst->dtype, soff, count, srcn, cdv_stage_open(L, d, stream, to, dst->block->dev, n, piece));
  cdv_block_used(dst->block, d, stream);
}

/* Infers the shape of a nested table: every row of one level must have the same length. */
static int table_shape(lua_State *L, int t, int64_t *shape, int depth, int arg, cdv_dtype dt) {
  if (depth >= CDV_MAXDIM) luaL_argerror(L, arg, "table nested too deeply");
  shape[depth] = (int64_t)lua_rawlen(L, t);
  if (shape[depth] == 0) return depth + 1; /* an empty row: a dimension of 0 */
  if (lua_rawgeti(L, t, 1) != LUA_TTABLE || is_pair(L, -1, dt)) { /* a complex dtype's {re, im} is a leaf */
    lua_pop(L, 1);
    for (int64_t i = 2; i <= shape[depth]; i++) { /* a leaf row: no nested rows beside its numbers */
      if (lua_rawgeti(L, t, i) == LUA_TTABLE && !is_pair(L, -1, dt))
        luaL_argerror(L, arg, lua_pushfstring(L, "ragged nested table (row %I differs from row 1)", i));
      lua_pop(L, 1);
    }
    return depth + 1;
  }
  int ndim = table_shape(L, lua_gettop(L), shape, depth + 1, arg, dt);
  lua_pop(L, 1);
  for (int64_t i = 2; i <= shape[depth]; i++) { /* ragged rows are an error, not a silent reshape */
    int64_t sub[CDV_MAXDIM];
    int ok = lua_rawgeti(L, t, i) == LUA_TTABLE;
    if (ok) ok = table_shape(L, lua_gettop(L), sub, depth + 1, arg, dt) == ndim;
    for (int j = depth + 1; ok && j < ndim; j++) ok = sub[j] == shape[j];
    if (!ok) luaL_argerror(L, arg, lua_pushfstring(L, "ragged nested table (row %I differs from row 1)", i));
    lua_pop(L, 1);
  }
  return ndim;
}

/* cd.array(table_or_string [, dtype] [, opts]) */
static int l_array(lua_State *L) {
  int o = lua_istable(L, 2) ? 2 : 3;
  cdv_dtype t = o == 2 ? CDV_F32 : cdv_check_dtype(L, 2, CDV_F32);
  int64_t shape[CDV_MAXDIM];
  int ndim;
  if (lua_type(L, 1) == LUA_TSTRING) {
    ndim = 1;
    shape[0] = lua_source_count(L, 1, t);
  } else {
    luaL_checktype(L, 1, LUA_TTABLE);
    ndim = table_shape(L, 1, shape, 0, 1, t);
  }
  cdv_state *st = cdv_get_state(L);
  create_args c = check_create_opts(L, st, o, "array");
  cdv_array *a = push_created(L, st, &c, t, ndim, shape, "array");
  if (c.dev->be->host_memory)
    fill_host(L, 1, a, 1);
  else
    copy_lua(L, 1, a, 0, 0, a->size, a->size, c.stream);
  return 1;
}

/* ------------------------------------------------------------ like-constructors */

static void like(lua_State *L, cdv_array *a, int shape_arg) {
  int64_t shape[CDV_MAXDIM];
  int ndim = a->ndim;
  if (shape_arg)
    ndim = check_shape(L, shape_arg, shape, a->dtype);
  else
    memcpy(shape, a->shape, sizeof shape);
  cdv_block *b = a->block;
  cdv_push_array(L, b->dev, a->dtype, ndim, shape, b->kind, NULL);
}

/* The *_like and new_* constructors: like(a [, shape]), then left empty (value_arg 0), zeroed (-1) or
 * filled with the value at value_arg. */
static int make_like(lua_State *L, int shape_arg, int value_arg) {
  cdv_array *a = cdv_check_array(L, 1);
  if (shape_arg) /* the shape is named first when both are missing */
    expect_shape(L, shape_arg);
  if (value_arg > 0) luaL_checkany(L, value_arg);
  like(L, a, shape_arg);
  uint64_t zero[2] = {0, 0}; /* room for a complex128 */
  if (value_arg < 0)
    fill(L, check_any(L, -1), zero, NULL);
  else if (value_arg > 0)
    fill_value(L, check_any(L, -1), value_arg, value_arg, NULL);
  return 1;
}

static int l_empty_like(lua_State *L) { return make_like(L, 0, 0); }
static int l_zeros_like(lua_State *L) { return make_like(L, 0, -1); }
static int l_full_like(lua_State *L) { return make_like(L, 0, 2); }
static int array_new_empty(lua_State *L) { return make_like(L, 2, 0); }
static int array_new_zeros(lua_State *L) { return make_like(L, 2, -1); }
static int array_new_full(lua_State *L) { return make_like(L, 2, 3); }

/* ------------------------------------------------------------ fill */

/* complex128's 16-byte elements: no backend fills that width. The first element is set as two 8-byte words,
 * then copied over the rest on the same stream, the filled prefix doubling each time (as NOTE [8-byte fill]). */
static int fill16(cdv_device *d, char *p, const void *pattern, size_t count, void *stream, cdv_err *e) {
  if (d->be->memset(d, p, pattern, 8, 1, stream, e) != 0 ||
      d->be->memset(d, p + 8, (const char *)pattern + 8, 8, 1, stream, e) != 0)
    return -1;
  for (size_t done = 1; done < count; done *= 2) {
    size_t k = done < count - done ? done : count - done;
    if (d->be->memcpy(d, p + done * 16, d, p, d, k * 16, stream, e) != 0) return -1;
  }
  return 0;
}

static void fill(lua_State *L, cdv_array *a, const void *pattern, cdv_stream *s) {
  cdv_device *d = a->block->dev;
  void *stream = cdv_stream_for(L, d, s);
  cdv_err e;
  if (a->size == 0) return;
  cdv_device_use(L, d);
  if (d->be->host_memory && host_wait(a->block, &e) != 0) cdv_raise(L, a->block->last_dev, &e);
  size_t es = cdv_dtypes[a->dtype].size;
  if ((es == 16 ? fill16(d, a->data, pattern, (size_t)a->size, stream, &e)
                : d->be->memset(d, a->data, pattern, es, (size_t)a->size, stream, &e)) != 0)
    cdv_raise(L, d, &e);
  cdv_block_used(a->block, d, stream);
}

/* Fills the Array at idx with the element at pattern; a strided view through a 0-d array assigned to it. */
static void fill_at(lua_State *L, int idx, const void *pattern) {
  cdv_array *a = cdv_check_array(L, idx);
  if (cdv_array_contiguous(a)) {
    fill(L, a, pattern, NULL);
    return;
  }
  idx = lua_absindex(L, idx);
  cdv_array *one = cdv_push_array(L, a->block->dev, a->dtype, 0, NULL, CDV_MEM_DEVICE, NULL);
  fill(L, one, pattern, NULL);
  lua_pushvalue(L, idx);
  lua_insert(L, -2);
  call_views(L, "__views_assign", 2, 0);
}

static int array_fill(lua_State *L) {
  cdv_array *a = cdv_check_array(L, 1);
  uint64_t pattern[2] = {0, 0}; /* room for a complex128 */
  luaL_checkany(L, 2);
  check_elem(L, 2, 2, a->dtype, pattern);
  fill_at(L, 1, pattern);
  lua_settop(L, 1);
  return 1;
}

static int array_zero(lua_State *L) {
  uint64_t zero[2] = {0, 0}; /* room for a complex128 */
  fill_at(L, 1, zero);
  lua_settop(L, 1);
  return 1;
}

/* ------------------------------------------------------------ views */

/* A view of a's memory from byte_off on; strides NULL: C order (NOTE [strided views]). */
static cdv_array *push_view(lua_State *L, cdv_array *a, ptrdiff_t byte_off, cdv_dtype t, int ndim, const int64_t *shape,
                            const int64_t *strides) {
  cdv_array *v = new_shaped(L, t, ndim, shape, strides);
  /* the allocation may have run a finalizer that freed a (NOTE [pinned reads]) */
  if (a->block == NULL) luaL_error(L, "attempt to use a freed array");
  a->block->refs++;
  attach(L, v, a->block, a->data + byte_off);
  return v;
}

static int64_t check_pos(lua_State *L, int arg, int64_t n, int64_t def) {
  if (lua_isnoneornil(L, arg)) return def;
  int isint;
  lua_Integer i = lua_tointegerx(L, arg, &isint);
  if (!isint) luaL_typeerror(L, arg, "integer");
  if (i < 0) i = i + 1 + n; /* negative positions count from the end, as in string.sub (n + 1 overflows at 2^63 - 1) */
  return i;
}

/* An axis argument (1-based, negative from the end) of an array of ndim dimensions, as a 0-based index. */
static int check_axis(lua_State *L, int arg, int ndim) {
  int isint;
  lua_Integer ax = lua_tointegerx(L, arg, &isint);
  if (!isint) luaL_typeerror(L, arg, "integer axis");
  if (ax < 0) ax += ndim + 1;
  if (ax < 1 || ax > ndim)
    luaL_argerror(L, arg, lua_pushfstring(L, "axis %s out of range 1..%d", lua_tostring(L, arg), ndim));
  return (int)ax - 1;
}

/* a:slice(i [, j [, step [, axis]]]): positions i, i + step, ... up to j (inclusive, 1-based) along axis
 * (default 1), a view; a negative step walks down from i (default n) to j (default 1). NOTE [strided views] */
static int array_slice(lua_State *L) {
  cdv_array *a = cdv_check_array(L, 1);
  if (a->ndim == 0) return luaL_error(L, "cannot slice a 0-d array");
  int isint, ax = lua_isnoneornil(L, 5) ? 0 : check_axis(L, 5, a->ndim);
  lua_Integer step = lua_isnoneornil(L, 4) ? 1 : lua_tointegerx(L, 4, &isint);
  if (!lua_isnoneornil(L, 4) && !isint) luaL_typeerror(L, 4, "integer");
  if (step == 0) luaL_argerror(L, 4, "step must not be zero");
  int64_t n = a->shape[ax], i, j, count;
  if (step > 0) {
    i = check_pos(L, 2, n, 1);
    j = check_pos(L, 3, n, n);
    if (i < 1 || i - 1 > n) luaL_argerror(L, 2, lua_pushfstring(L, "index %I out of range 1..%I", i, n));
    if (j < i - 1 || j > n) luaL_argerror(L, 3, lua_pushfstring(L, "index %I out of range %I..%I", j, i - 1, n));
    count = j >= i ? (j - i) / step + 1 : 0;
  } else {
    i = check_pos(L, 2, n, n);
    j = check_pos(L, 3, n, 1);
    if (i < 0 || i > n) luaL_argerror(L, 2, lua_pushfstring(L, "index %I out of range 0..%I", i, n));
    if (j < 1 || j - 1 > i) luaL_argerror(L, 3, lua_pushfstring(L, "index %I out of range 1..%I", j, i + 1));
    count = i >= j ? (i - j) / (step == LUA_MININTEGER ? LUA_MAXINTEGER : -step) + 1 : 0;
  }
  int64_t shape[CDV_MAXDIM], strides[CDV_MAXDIM];
  memcpy(shape, a->shape, sizeof shape);
  memcpy(strides, a->strides, sizeof strides);
  shape[ax] = count;
  /* |step| < n here, so only an empty array's stride (which addresses nothing) can overflow: {2^62, 2^62, 0} */
  if (count > 1 && __builtin_mul_overflow(a->strides[ax], step, &strides[ax])) strides[ax] = a->strides[ax];
  ptrdiff_t off = count > 0 ? elem_offset(a, i - 1, a->strides[ax]) : 0; /* an empty view points at a's start */
  push_view(L, a, off, a->dtype, a->ndim, shape, strides);
  return 1;
}

/* The view of a with its dimensions in the order perm (0-based). */
static void push_permuted(lua_State *L, cdv_array *a, const int *perm) {
  int64_t shape[CDV_MAXDIM], strides[CDV_MAXDIM];
  for (int k = 0; k < a->ndim; k++) {
    shape[k] = a->shape[perm[k]];
    strides[k] = a->strides[perm[k]];
  }
  push_view(L, a, 0, a->dtype, a->ndim, shape, strides);
}

/* a:transpose([axes]) with axes a table {2, 1, 3} or the axes as arguments (1-based, negative from the
 * end); none reverses the dimensions (NumPy's transpose). A view. NOTE [strided views] */
static int array_transpose(lua_State *L) {
  cdv_array *a = cdv_check_array(L, 1);
  int perm[CDV_MAXDIM], seen[CDV_MAXDIM] = {0}, nd = a->ndim, tbl = lua_istable(L, 2), given;
  given = tbl ? (int)(lua_rawlen(L, 2) > (lua_Unsigned)CDV_MAXDIM + 1 ? CDV_MAXDIM + 1 : lua_rawlen(L, 2))
              : lua_gettop(L) - 1;
  if (given == 0) {
    for (int k = 0; k < nd; k++) perm[k] = nd - 1 - k;
  } else {
    if (given != nd)
      luaL_argerror(L, 2,
                    lua_pushfstring(L, "%d %s given for an array of %d dimension%s", given,
                                    given == 1 ? "axis" : "axes", nd, nd == 1 ? "" : "s"));
    for (int k = 0; k < nd; k++) {
      int arg = 2 + (tbl ? 0 : k);
      if (tbl) {
        lua_rawgeti(L, 2, k + 1);
        lua_Integer v0 = lua_tointegerx(L, -1, NULL), v = v0 < 0 ? v0 + nd + 1 : v0;
        int isint = lua_isinteger(L, -1);
        lua_pop(L, 1);
        if (!isint) luaL_argerror(L, 2, lua_pushfstring(L, "axis %d is not an integer", k + 1));
        if (v < 1 || v > nd) luaL_argerror(L, 2, lua_pushfstring(L, "axis %I out of range 1..%d", v0, nd));
        perm[k] = (int)v - 1;
      } else
        perm[k] = check_axis(L, arg, nd);
      if (seen[perm[k]]++) luaL_argerror(L, arg, lua_pushfstring(L, "axis %d repeated", perm[k] + 1));
    }
  }
  push_permuted(L, a, perm);
  return 1;
}

/* getmetatable(a).__flat_base(a): a contiguous 1-d view from a's element 0 to its highest element, which the
 * generated kernels take with a's strides (NOTE [strided views]); elements a negative stride puts before element
 * 0 are reached with negative indices, inside the same block. */
static int array_flat_base(lua_State *L) {
  cdv_array *a = cdv_check_array(L, 1);
  int64_t lo, hi, n = 0;
  if (a->size > 0) {
    elem_span(a, &lo, &hi);
    n = hi + 1;
  }
  push_view(L, a, 0, a->dtype, 1, &n, NULL);
  return 1;
}

/* The product of shape[0..ndim) without shape[skip] into *out; 0 when it overflows int64 (a dimension of
 * 0 makes it 0 whatever the others are). */
static int shape_product(const int64_t *shape, int ndim, int skip, int64_t *out) {
  int64_t p = 1;
  int zero = 0, overflow = 0;
  for (int i = 0; i < ndim; i++) {
    if (i == skip) continue;
    if (shape[i] == 0)
      zero = 1;
    else if (__builtin_mul_overflow(p, shape[i], &p))
      overflow = 1;
  }
  *out = zero ? 0 : p;
  return zero || !overflow;
}

/* a:reshape(shape): one dimension may be -1 (inferred) */
static int array_reshape(lua_State *L) {
  cdv_array *a = cdv_check_array(L, 1);
  int64_t shape[CDV_MAXDIM];
  int ndim, infer = -1;
  int64_t known;
  if (lua_type(L, 2) == LUA_TNUMBER) {
    lua_createtable(L, 1, 0);
    lua_pushvalue(L, 2);
    lua_rawseti(L, -2, 1);
    lua_replace(L, 2);
  }
  luaL_checktype(L, 2, LUA_TTABLE);
  ndim = (int)lua_rawlen(L, 2);
  if (ndim > CDV_MAXDIM) luaL_argerror(L, 2, "too many dimensions");
  for (int i = 0; i < ndim; i++) {
    lua_rawgeti(L, 2, i + 1);
    int isint;
    shape[i] = lua_tointegerx(L, -1, &isint);
    lua_pop(L, 1);
    if (isint && shape[i] == -1 && infer < 0)
      infer = i;
    else if (!isint || shape[i] < 0)
      luaL_argerror(L, 2, lua_pushfstring(L, "bad dimension %d", i + 1));
  }
  if (!shape_product(shape, ndim, infer, &known)) luaL_argerror(L, 2, "array is too large");
  if (infer >= 0) shape[infer] = known ? a->size / known : 0;
  int64_t size;
  if (!shape_product(shape, ndim, -1, &size)) luaL_argerror(L, 2, "array is too large");
  if (size != a->size)
    luaL_argerror(L, 2, lua_pushfstring(L, "cannot reshape %I elements into a shape of %I", a->size, size));
  if (!cdv_array_contiguous(a)) { /* NumPy's reshape copies what no view can show (NOTE [strided views]) */
    lua_pushvalue(L, 1);
    lua_pushnil(L);
    call_views(L, "__views_contiguous", 2, 1);
    lua_replace(L, 1);
    a = cdv_check_array(L, 1);
  }
  push_view(L, a, 0, a->dtype, ndim, shape, NULL);
  return 1;
}

/* getmetatable(a).__as_strided(a, shape, strides): the view of a's memory from a's element 0 with that shape and
 * those strides (in elements, 0 for a broadcast dimension), for ops_numpy.lua's views (cd.broadcast_to,
 * cd.expand_dims, a:squeeze()). Refused unless every element it shows is one of the span a's own elements cover,
 * so no view reaches memory a does not own (NOTE [strided views]). */
static int array_as_strided(lua_State *L) {
  cdv_array *a = cdv_check_array(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  luaL_checktype(L, 3, LUA_TTABLE);
  int ndim = (int)lua_rawlen(L, 2);
  if (ndim > CDV_MAXDIM || lua_rawlen(L, 3) != (lua_Unsigned)ndim) luaL_argerror(L, 2, "bad shape or strides");
  cdv_array v = *a;
  v.ndim = ndim;
  for (int i = 0; i < ndim; i++) {
    int ok1, ok2;
    lua_rawgeti(L, 2, i + 1);
    lua_rawgeti(L, 3, i + 1);
    v.shape[i] = lua_tointegerx(L, -2, &ok1);
    v.strides[i] = lua_tointegerx(L, -1, &ok2);
    lua_pop(L, 2);
    if (!ok1 || !ok2 || v.shape[i] < 0 || v.strides[i] < -(INT64_C(1) << 40) || v.strides[i] > (INT64_C(1) << 40))
      luaL_argerror(L, 2, "bad shape or strides");
  }
  int64_t size;
  if (!shape_product(v.shape, ndim, -1, &size)) luaL_argerror(L, 2, "array is too large");
  v.size = size;
  if (size > 0) {
    int64_t lo, hi, alo = 0, ahi = -1;
    elem_span(&v, &lo, &hi);
    if (a->size > 0) elem_span(a, &alo, &ahi);
    if (lo < alo || hi > ahi) luaL_argerror(L, 2, "the view reaches past the array's elements");
  }
  push_view(L, a, 0, a->dtype, ndim, v.shape, v.strides);
  return 1;
}

/* a:view(dtype): the same bytes as another dtype; the last dimension scales */
static int array_view(lua_State *L) {
  cdv_array *a = cdv_check_array(L, 1);
  cdv_dtype t = cdv_check_dtype(L, 2, a->dtype);
  int64_t shape[CDV_MAXDIM];
  memcpy(shape, a->shape, sizeof shape);
  int ndim = a->ndim ? a->ndim : 1;
  if (a->ndim == 0) shape[0] = 1;
  int64_t last; /* an empty array's last dimension may be 2^61 float64 (NOTE [arrays inside their blocks]) */
  if (__builtin_mul_overflow(shape[ndim - 1], (int64_t)cdv_dtypes[a->dtype].size, &last) || last > MAX_BYTES)
    luaL_argerror(L, 2, "array is too large");
  if (last % (int64_t)cdv_dtypes[t].size != 0)
    luaL_argerror(L, 2,
                  lua_pushfstring(L, "last dimension of %I bytes is not a whole number of %s", (lua_Integer)last,
                                  cdv_dtypes[t].name));
  shape[ndim - 1] = last / (int64_t)cdv_dtypes[t].size;
  if (!cdv_array_contiguous(a) && cdv_dtypes[t].size == cdv_dtypes[a->dtype].size) { /* the same layout */
    push_view(L, a, 0, t, a->ndim, a->shape, a->strides);
    return 1;
  }
  need_contiguous(L, a, 1, "the array");
  push_view(L, a, 0, t, ndim, shape, NULL);
  return 1;
}

/* ------------------------------------------------------------ conversion (a:astype) */

/* NOTE [astype]: a:astype(dtype) converts element by element as NumPy's astype does (casting="unsafe"), with
 * the cases C leaves undefined made definite: a float into an integer dtype truncates toward zero and
 * saturates at the dtype's range (NaN gives 0, as CUDA's __float2int_rz does); an integer into a narrower
 * integer dtype wraps (keeps the low bits); anything into bool is `value ~= 0` (NaN is true); bool is 0 or 1.
 * On a device whose arrays live in host memory (the cpu device) it runs on the host, in one C loop. On a GPU it
 * runs on the device: the generated kernel getmetatable(a).__astype_kernel (ops.lua, NOTE [astype kernel]) does
 * the same steps in the same order, so the bytes are the same (NaN payloads and float16 rounding included);
 * getmetatable(a).__astype_host is the host loop on any device (a GPU array's elements make a round trip), kept
 * for the specs that compare the two. */
typedef struct scalar {
  int is_float;
  double f, im; /* im: a complex element's imaginary part (f its real part), else 0 */
  uint64_t u;
} scalar; /* u: an integer's two's complement */

static scalar load_scalar(cdv_dtype t, const char *p) {
  scalar v = {0, 0, 0, 0};
  switch (t) {
    case CDV_C64:
    case CDV_C128:
      v.is_float = 1;
      complex_parts(t, p, &v.f, &v.im);
      break;
    case CDV_F16: {
      uint16_t h;
      memcpy(&h, p, 2);
      v.is_float = 1;
      v.f = cdv_f16_to_f32(h);
      break;
    }
    case CDV_F32: {
      float f;
      memcpy(&f, p, 4);
      v.is_float = 1;
      v.f = f;
      break;
    }
    case CDV_F64:
      memcpy(&v.f, p, 8);
      v.is_float = 1;
      break;
    case CDV_I8: v.u = (uint64_t)(int64_t) * (const int8_t *)p; break;
    case CDV_I16: {
      int16_t x;
      memcpy(&x, p, 2);
      v.u = (uint64_t)(int64_t)x;
      break;
    }
    case CDV_I32: {
      int32_t x;
      memcpy(&x, p, 4);
      v.u = (uint64_t)(int64_t)x;
      break;
    }
    case CDV_U16: {
      uint16_t x;
      memcpy(&x, p, 2);
      v.u = x;
      break;
    }
    case CDV_U32: {
      uint32_t x;
      memcpy(&x, p, 4);
      v.u = x;
      break;
    }
    case CDV_I64:
    case CDV_U64: memcpy(&v.u, p, 8); break;
    case CDV_BOOL: v.u = *(const uint8_t *)p != 0; break; /* any byte but 0 is true */
    default: v.u = *(const uint8_t *)p; /* uint8 */
  }
  return v;
}

/* A complex into a real dtype keeps its real part, as NumPy's astype does (with a ComplexWarning there); into
 * bool it is true when either part is nonzero. */
static void store_scalar(cdv_dtype t, char *p, scalar v, cdv_dtype from) {
  if (t == CDV_BOOL) {
    *(uint8_t *)p = v.is_float ? v.f != 0 || v.im != 0 : v.u != 0;
    return;
  }
  if (cdv_dtypes[t].is_complex) {
    double re = v.is_float ? v.f : cdv_dtypes[from].is_signed ? (double)(int64_t)v.u : (double)v.u;
    if (t == CDV_C64) {
      float f[2] = {(float)re, (float)v.im};
      memcpy(p, f, 8);
    } else {
      double d[2] = {re, v.im};
      memcpy(p, d, 16);
    }
    return;
  }
  if (cdv_dtypes[t].is_float) {
    double d = v.is_float ? v.f : cdv_dtypes[from].is_signed ? (double)(int64_t)v.u : (double)v.u;
    if (t == CDV_F64)
      memcpy(p, &d, 8);
    else if (t == CDV_F32) {
      float f = (float)d;
      memcpy(p, &f, 4);
    } else {
      uint16_t h = cdv_f32_to_f16((float)d);
      memcpy(p, &h, 2);
    }
    return;
  }
  uint64_t u = v.u;
  if (v.is_float) {
    double d = v.f;
    if (d != d)
      u = 0;
    else if (cdv_dtypes[t].is_signed)
      u = d <= (double)int_min[t] ? (uint64_t)int_min[t] : d >= (double)int_max[t] ? int_max[t] : (uint64_t)(int64_t)d;
    else
      u = d <= 0 ? 0 : d >= (double)int_max[t] ? int_max[t] : (uint64_t)d;
  }
  switch (cdv_dtypes[t].size) { /* little-endian: the low bytes of u are the value */
    case 1: {
      uint8_t b = (uint8_t)u;
      memcpy(p, &b, 1);
      break;
    }
    case 2: {
      uint16_t b = (uint16_t)u;
      memcpy(p, &b, 2);
      break;
    }
    case 4: {
      uint32_t b = (uint32_t)u;
      memcpy(p, &b, 4);
      break;
    }
    default: memcpy(p, &u, 8);
  }
}

/* The checked arguments of astype: a, its new dtype and the stream option. */
static cdv_array *astype_args(lua_State *L, cdv_dtype *t, cdv_stream **s) {
  cdv_array *a = cdv_check_array(L, 1);
  luaL_checkany(L, 2);
  *t = cdv_check_dtype(L, 2, a->dtype);
  cdv_check_options(L, 3, copy_opts, "astype");
  *s = cdv_opt_stream_field(L, 3, "astype");
  lua_settop(L, 3);
  return a;
}

/* getmetatable(a).__astype_host(a, dtype [, {stream=}]): astype by the host loop on any device (NOTE [astype]) */
static int array_astype_host(lua_State *L) {
  cdv_dtype t;
  cdv_stream *s;
  cdv_array *a = astype_args(L, &t, &s);
  const char *src = a->size > 0 ? host_view(L, a) : NULL; /* may push a temporary host copy */
  size_t is = cdv_dtypes[a->dtype].size, os = cdv_dtypes[t].size;
  luaL_Buffer b;
  char *out = luaL_buffinitsize(L, &b, (size_t)a->size * os);
  for (int64_t i = 0; i < a->size; i++)
    store_scalar(t, out + (size_t)i * os, load_scalar(a->dtype, src + (size_t)i * is), a->dtype);
  luaL_pushresultsize(&b, (size_t)a->size * os);
  int bytes = lua_gettop(L);
  cdv_stream *alloc_s = s != NULL && s->dev == a->block->dev ? s : NULL;
  cdv_array *r = cdv_push_array(L, a->block->dev, t, a->ndim, a->shape, CDV_MEM_DEVICE, alloc_s);
  if (a->size > 0) copy_lua(L, bytes, r, 0, 0, a->size, a->size, s);
  return 1;
}

/* a:astype(dtype [, {stream=}]) -> a converted copy on a's device (NOTE [astype]); a copy also when the
 * dtype is a's own, as NumPy's astype. A GPU's array is converted there, by the generated kernel. */
static int array_astype(lua_State *L) {
  cdv_dtype t;
  cdv_stream *s;
  cdv_array *a = astype_args(L, &t, &s);
  if (a->block->dev->be->host_memory || luaL_getmetafield(L, 1, "__astype_kernel") != LUA_TFUNCTION)
    return array_astype_host(L);
  lua_pushvalue(L, 1);
  lua_pushstring(L, cdv_dtypes[t].name);
  lua_pushvalue(L, 3);
  lua_call(L, 3, 1);
  return 1;
}

/* ------------------------------------------------------------ element access */

/* NOTE [array indices]: a[i] takes a number (1-based; negative counts from the end, as a:slice does: a[-1] is
 * the last element) here, and an integer or bool Array in Lua (sorting.lua's __views_index and
 * __views_setindex: a gather, a mask selection, a scatter); a table is refused with the forms that work, where
 * it used to read as an out-of-range index. */
static int index_key(lua_State *L, int nargs) {
  int t = lua_type(L, 2);
  if (t == LUA_TTABLE)
    return luaL_argerror(L, 2, "a table is not an index (use a number, an integer or bool Array, or a:slice(i, j))");
  if (t != LUA_TUSERDATA || luaL_testudata(L, 2, CDV_ARRAY) == NULL) return 0;
  call_views(L, nargs == 2 ? "__views_index" : "__views_setindex", nargs, nargs == 2 ? 1 : 0);
  return 1;
}

/* A position i of n as a 0-based offset: negative from the end; out of range stays out of range. */
static lua_Integer from_end(lua_Integer i, int64_t n) { return i < 0 && i >= -n ? i + n + 1 : i; }

/* Element i (1-based) of a 1-d array, or row i of an N-d array as a view. */
static int array_get(lua_State *L, cdv_array *a) {
  if (index_key(L, 2)) return 1;
  int isint;
  int64_t n = a->ndim ? a->shape[0] : 1;
  lua_Integer i = from_end(lua_tointegerx(L, 2, &isint), n);
  if (!isint || i < 1 || i > n)
    return luaL_argerror(L, 2, lua_pushfstring(L, "index %s out of range 1..%I", cdv_value_text(L, 2), n));
  size_t is = cdv_dtypes[a->dtype].size;
  ptrdiff_t off = elem_offset(a, i - 1, a->ndim ? a->strides[0] : 1); /* NOTE [strided views] */
  if (a->ndim > 1) {
    push_view(L, a, off, a->dtype, a->ndim - 1, a->shape + 1, a->strides + 1);
    return 1;
  }
  uint64_t v[2] = {0, 0}; /* room for a complex128 */
  cdv_array tmp = *a; /* a one-element window over the element, for copy_bytes */
  tmp.data = a->data + off;
  if (cdv_host_reachable(a->block)) {
    cdv_err e;
    if (host_wait(a->block, &e) != 0) cdv_raise(L, a->block->last_dev, &e);
    memcpy(v, tmp.data, is);
  } else { /* the host copy allocates: NOTE [pinned reads] */
    if (!pin_array(L, 1, &tmp)) cdv_check_array(L, 1); /* freed meanwhile: raises */
    tmp.data += off;
    cdv_array *h = cdv_push_array(L, cdv_cpu(), a->dtype, 0, NULL, CDV_MEM_DEVICE, NULL);
    copy_bytes(L, h, 0, &tmp, 0, is, NULL);
    memcpy(v, h->data, is);
  }
  push_elem(L, a->dtype, v);
  return 1;
}

static int array_newindex(lua_State *L) {
  cdv_array *a = cdv_check_array(L, 1);
  lua_settop(L, 3);
  if (index_key(L, 3)) return 0;
  if (lua_type(L, 2) != LUA_TNUMBER)
    return luaL_error(L, "cannot assign to field '%s' of an Array", cdv_value_text(L, 2));
  int isint;
  if (a->ndim > 1) return luaL_error(L, "cannot assign a row of a %d-d array (use a[i]:fill(v) or copy_from)", a->ndim);
  int64_t n = a->ndim ? a->shape[0] : 1;
  lua_Integer i = from_end(lua_tointegerx(L, 2, &isint), n);
  if (!isint || i < 1 || i > n)
    return luaL_argerror(L, 2, lua_pushfstring(L, "index %s out of range 1..%I", cdv_value_text(L, 2), n));
  uint64_t v[2] = {0, 0}; /* room for a complex128 */
  size_t is = cdv_dtypes[a->dtype].size;
  check_elem(L, 3, 3, a->dtype, v);
  ptrdiff_t off = elem_offset(a, i - 1, a->ndim ? a->strides[0] : 1); /* NOTE [strided views] */
  cdv_array tmp = *a;
  tmp.data = a->data + off;
  if (cdv_host_reachable(a->block)) {
    cdv_err e;
    if (host_wait(a->block, &e) != 0) cdv_raise(L, a->block->last_dev, &e);
    memcpy(tmp.data, v, is);
  } else { /* the host copy allocates: NOTE [pinned reads] */
    if (!pin_array(L, 1, &tmp)) cdv_check_array(L, 1); /* freed meanwhile: raises */
    tmp.data += off;
    cdv_array *h = cdv_push_array(L, cdv_cpu(), a->dtype, 0, NULL, CDV_MEM_DEVICE, NULL);
    memcpy(h->data, v, is);
    copy_bytes(L, &tmp, 0, h, 0, is, NULL);
  }
  return 0;
}

/* Pushes the nested table of shape[dim..] from p; returns the pointer after the last element read. */
static const char *push_nested(lua_State *L, cdv_dtype t, int ndim, const int64_t *shape, const char *p) {
  if (ndim == 0) {
    push_elem(L, t, p);
    return p + cdv_dtypes[t].size;
  }
  luaL_checkstack(L, 3, NULL);
  lua_createtable(L, shape[0] > INT32_MAX ? 0 : (int)shape[0], 0);
  for (int64_t i = 0; i < shape[0]; i++) {
    p = push_nested(L, t, ndim - 1, shape + 1, p);
    lua_rawseti(L, -2, i + 1);
  }
  return p;
}

/* The tables push_nested builds for an array of no elements: one per row of each dimension before the first
 * dimension of 0 (shape {3, 0} is {{}, {}, {}}), which is not bounded by the array's size. */
#define TOTABLE_MAX_EMPTY ((int64_t)1 << 24)

static void add_header(lua_State *L, luaL_Buffer *b, cdv_array *a);

static int array_totable(lua_State *L) {
  cdv_array a, *z = cdv_check_array(L, 1);
  int64_t tables = 1, rows = 1;
  for (int i = 0; z->size == 0 && i < z->ndim - 1 && z->shape[i] != 0 && tables <= TOTABLE_MAX_EMPTY; i++) {
    rows = z->shape[i] > TOTABLE_MAX_EMPTY / rows ? TOTABLE_MAX_EMPTY + 1 : rows * z->shape[i];
    tables += rows;
  }
  if (tables > TOTABLE_MAX_EMPTY) {
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    add_header(L, &b, z);
    luaL_pushresult(&b);
    return luaL_error(L, "totable of %s would build more than %I empty tables", lua_tostring(L, -1),
                      (lua_Integer)TOTABLE_MAX_EMPTY);
  }
  if (!pin_array(L, 1, &a)) cdv_check_array(L, 1); /* NOTE [pinned reads]; freed meanwhile: raises */
  const char *p = a.size > 0 ? host_view(L, &a) : NULL;
  push_nested(L, a.dtype, a.ndim, a.shape, p);
  return 1;
}

/* ------------------------------------------------------------ printing */

static void add_elem(luaL_Buffer *b, cdv_dtype t, const char *p) {
  char buf[64];
  if (cdv_dtypes[t].is_complex) { /* NumPy's 1+2j */
    double re, im;
    complex_parts(t, p, &re, &im);
    snprintf(buf, sizeof buf, t == CDV_C128 ? "%.10g%+.10gj" : "%.6g%+.6gj", re, im);
    luaL_addstring(b, buf);
  } else if (t == CDV_BOOL)
    luaL_addstring(b, *p ? "true" : "false");
  else if (cdv_dtypes[t].is_float) {
    double v; /* memcpy: a view may start inside an element, so p need not be aligned */
    if (t == CDV_F64)
      memcpy(&v, p, 8);
    else if (t == CDV_F32) {
      float f;
      memcpy(&f, p, 4);
      v = f;
    } else {
      uint16_t h;
      memcpy(&h, p, 2);
      v = cdv_f16_to_f32(h);
    }
    snprintf(buf, sizeof buf, t == CDV_F64 ? "%.10g" : "%.6g", v);
    luaL_addstring(b, buf);
  } else if (t == CDV_U64) { /* the value itself: its Lua integer is negative above 2^63 - 1 */
    uint64_t v;
    memcpy(&v, p, 8);
    snprintf(buf, sizeof buf, "%" PRIu64, v);
    luaL_addstring(b, buf);
  } else {
    lua_State *L = b->L;
    push_elem(L, t, p);
    luaL_addvalue(b);
  }
}

#define EDGE 3 /* elements shown at each end of a long dimension */

static void add_nested(luaL_Buffer *b, cdv_dtype t, int ndim, const int64_t *shape, const char *p, size_t stride) {
  if (ndim == 0) {
    add_elem(b, t, p);
    return;
  }
  size_t row = stride / (shape[0] ? (size_t)shape[0] : 1);
  luaL_addchar(b, '{');
  for (int64_t i = 0; i < shape[0]; i++) {
    if (shape[0] > 2 * EDGE + 1 && i == EDGE) {
      luaL_addstring(b, "..., ");
      i = shape[0] - EDGE - 1;
      continue;
    }
    add_nested(b, t, ndim - 1, shape + 1, p + (size_t)i * row, row);
    if (i + 1 < shape[0]) luaL_addstring(b, ", ");
  }
  luaL_addchar(b, '}');
}

static void add_header(lua_State *L, luaL_Buffer *b, cdv_array *a) {
  luaL_addstring(b, cdv_dtypes[a->dtype].name);
  luaL_addchar(b, '[');
  for (int i = 0; i < a->ndim; i++) {
    if (i) luaL_addchar(b, ',');
    lua_pushinteger(L, a->shape[i]);
    luaL_addvalue(b);
  }
  luaL_addstring(b, "] on ");
  luaL_addstring(b, a->block->dev->alias);
  if (a->block->kind == CDV_MEM_PINNED) luaL_addstring(b, " pinned");
  if (a->block->kind == CDV_MEM_MANAGED) luaL_addstring(b, " managed");
}

#define PRINT_MAX ((int64_t)1 << 20) /* larger arrays print their header only */

static int array_tostring(lua_State *L) {
  cdv_array *a = check_any(L, 1);
  if (a->block == NULL) {
    lua_pushliteral(L, "Array(freed)");
    return 1;
  }
  if (a->block->generation != a->block->dev->generation || a->block->dev->sticky) {
    lua_pushfstring(L, "Array(%s[...] on %s, %s)", cdv_dtypes[a->dtype].name, a->block->dev->alias,
                    a->block->dev->sticky ? "device faulted" : "stale");
    return 1;
  }
  int values = a->size <= PRINT_MAX;
  cdv_array snap;
  if (!pin_array(L, 1, &snap)) { /* (see NOTE [pinned reads]) the buffer and the host copy allocate */
    lua_pushliteral(L, "Array(freed)");
    return 1;
  }
  const char *p = values && snap.size > 0 ? host_view(L, &snap) : NULL;
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_addstring(&b, "Array(");
  add_header(L, &b, &snap);
  if (values) {
    luaL_addstring(&b, ": ");
    add_nested(&b, snap.dtype, snap.ndim, snap.shape, p, nbytes(&snap));
  }
  luaL_addchar(&b, ')');
  luaL_pushresult(&b);
  return 1;
}

/* ------------------------------------------------------------ lifetime */

/* One release for :free(), __gc and __close. __gc never raises: a failure is a warning. */
static int release(lua_State *L, cdv_array *a, int raise) {
  cdv_block *b = a->block;
  cdv_err e;
  a->block = NULL;
  a->data = NULL;
  if (b == NULL) return 0;
  cdv_live_add(CDV_LIVE_ARRAY, -1);
  cdv_device *d = b->dev;
  if (block_unref(b, &e) != 0) {
    if (raise) return cdv_raise(L, d, &e);
    cdv_warn_release(L, "freeing an array", d, &e);
  }
  return 0;
}

static int array_gc(lua_State *L) { /* never raises: a userdata given our metatable by hand is left alone */
  cdv_array *a = cdv_test_magic(L, 1, sizeof *a, CDV_ARRAY_MAGIC);
  return a != NULL ? release(L, a, 0) : 0;
}
static int array_close(lua_State *L) { return release(L, check_any(L, 1), 0); }

static int array_free(lua_State *L) {
  cdv_array *a = cdv_check_array(L, 1);
  return release(L, a, 1);
}

static int array_len(lua_State *L) {
  lua_pushinteger(L, cdv_check_array(L, 1)->size);
  return 1;
}

static int push_shape(lua_State *L, cdv_array *a) {
  lua_createtable(L, a->ndim, 0);
  for (int i = 0; i < a->ndim; i++) {
    lua_pushinteger(L, a->shape[i]);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

static int array_index(lua_State *L) {
  cdv_array *a = check_any(L, 1);
  if (lua_type(L, 2) != LUA_TSTRING) return array_get(L, cdv_check_array(L, 1));
  const char *k = lua_tostring(L, 2);
  if (cdv_push_method(L)) return 1; /* methods first: they check the array themselves */
  a = cdv_check_array(L, 1);
  if (strcmp(k, "dtype") == 0)
    lua_pushstring(L, cdv_dtypes[a->dtype].name);
  else if (strcmp(k, "shape") == 0)
    return push_shape(L, a);
  else if (strcmp(k, "ndim") == 0)
    lua_pushinteger(L, a->ndim);
  else if (strcmp(k, "size") == 0)
    lua_pushinteger(L, a->size);
  else if (strcmp(k, "nbytes") == 0)
    lua_pushinteger(L, (lua_Integer)nbytes(a));
  else if (strcmp(k, "itemsize") == 0)
    lua_pushinteger(L, cdv_dtypes[a->dtype].size);
  else if (strcmp(k, "device") == 0)
    cdv_push_device(L, a->block->dev);
  else if (strcmp(k, "is_pinned") == 0)
    lua_pushboolean(L, a->block->kind == CDV_MEM_PINNED);
  else if (strcmp(k, "is_contiguous") == 0)
    lua_pushboolean(L, cdv_array_contiguous(a));
  else if (strcmp(k, "strides") == 0) { /* (see NOTE [strided views]) in elements */
    lua_createtable(L, a->ndim, 0);
    for (int i = 0; i < a->ndim; i++) {
      lua_pushinteger(L, a->strides[i]);
      lua_rawseti(L, -2, i + 1);
    }
  } else if (strcmp(k, "T") == 0) {
    int perm[CDV_MAXDIM];
    for (int i = 0; i < a->ndim; i++) perm[i] = a->ndim - 1 - i;
    push_permuted(L, a, perm);
  } else if (strcmp(k, "managed") == 0)
    lua_pushboolean(L, a->block->kind == CDV_MEM_MANAGED);
  else if (strcmp(k, "ptr") == 0) {
    if (cdv_get_state(L)->sandbox) return luaL_error(L, "raw addresses are not available in this sandbox");
    lua_pushinteger(L, (lua_Integer)(intptr_t)a->data);
  } else
    return luaL_error(L, "Array has no field or method '%s'", k);
  return 1;
}

/* a:tobytes() -> the elements' bytes as a Lua string (NumPy's tobytes). Both Lua allocations (the host copy of a
 * device array, the string's buffer) come first: either may run a finalizer that frees `a`, so `a` is checked
 * again after them, and nothing between that check and the read can run Lua code. */
static int array_tobytes(lua_State *L) {
  cdv_array *a = cdv_check_array(L, 1);
  size_t n = nbytes(a);
  if (!cdv_array_contiguous(a)) { /* (see NOTE [strided views]) gathered in C order, as NumPy's tobytes */
    cdv_array snap;
    if (!pin_array(L, 1, &snap)) cdv_check_array(L, 1); /* NOTE [pinned reads]; freed meanwhile: raises */
    lua_pushlstring(L, host_view(L, &snap), n);
    return 1;
  }
  cdv_array *h = cdv_host_reachable(a->block)
                     ? NULL
                     : cdv_push_array(L, cdv_cpu(), a->dtype, a->ndim, a->shape, CDV_MEM_DEVICE, NULL);
  luaL_Buffer buf;
  char *dst = luaL_buffinitsize(L, &buf, n);
  a = cdv_check_array(L, 1);
  if (n == 0) { /* an empty array may have no memory at all (memcpy's pointers must not be NULL) */
  } else if (h != NULL) {
    copy_bytes(L, h, 0, a, 0, n, NULL);
    memcpy(dst, h->data, n);
  } else {
    cdv_err e;
    if (host_wait(a->block, &e) != 0) cdv_raise(L, a->block->last_dev, &e);
    memcpy(dst, a->data, n);
  }
  luaL_pushresultsize(&buf, n);
  return 1;
}

static const luaL_Reg methods[] = {{"copy_from", array_copy_from},
                                   {"tobytes", array_tobytes},
                                   {"to", array_to},
                                   {"totable", array_totable},
                                   {"tostring", array_tostring},
                                   {"slice", array_slice},
                                   {"transpose", array_transpose},
                                   {"reshape", array_reshape},
                                   {"view", array_view},
                                   {"astype", array_astype},
                                   {"fill", array_fill},
                                   {"zero", array_zero},
                                   {"free", array_free},
                                   {"ipc_handle", cdv_array_ipc_handle},
                                   {"new_empty", array_new_empty},
                                   {"new_zeros", array_new_zeros},
                                   {"new_full", array_new_full},
                                   {NULL, NULL}};

static const luaL_Reg functions[] = {{"empty", l_empty},
                                     {"zeros", l_zeros},
                                     {"ones", l_ones},
                                     {"full", l_full},
                                     {"array", l_array},
                                     {"empty_like", l_empty_like},
                                     {"zeros_like", l_zeros_like},
                                     {"full_like", l_full_like},
                                     {"copy", l_copy},
                                     {"_inside", l_inside},
                                     {NULL, NULL}};

int cdv_array_open(lua_State *L) {
  static const luaL_Reg pin_meta[] = {{"__close", pin_release}, {"__gc", pin_release}, {NULL, NULL}};
  cdv_new_class(L, CDV_ARRAY_PIN, pin_meta, NULL, NULL); /* NOTE [pinned reads] */
  lua_pop(L, 1);
  static const luaL_Reg meta[] = {{"__newindex", array_newindex},
                                  {"__len", array_len},
                                  {"__tostring", array_tostring},
                                  {"__gc", array_gc},
                                  {"__close", array_close},
                                  {"__flat_base", array_flat_base},
                                  {"__as_strided", array_as_strided},
                                  {"__astype_host", array_astype_host},
                                  {NULL, NULL}};
  cdv_new_class(L, CDV_ARRAY, meta, methods, array_index); /* NOTE [class registration] */
  lua_pop(L, 1);
  luaL_setfuncs(L, functions, 0);
  return 0;
}
