/*
 * array_loops.c: ops.lua's way to a backend's built-in loops (NOTE [cpu loops] in cpu_loops.c), as fields of
 * the Array metatable, out of a sandboxed script's reach (NOTE [protected metatables]):
 *   __loop(op, calc, calc2, res, bits, out, x, xdtype [, y, ydtype [, c, cdtype]]) -> true, or false: compile it
 *     (calc2: the calc type of y when it is not calc's, nil otherwise)
 *   __reduce(op, acc, x, out, outer, K, inner, nsplit) -> true, or false: compile it
 *   __pair(x, y [, out]) and __like(x, dtype): the binary fast path's checks and allocation (NOTE [binary fast
 *     path] in ops.lua); __same(t, idx) and __sig(t, n): cd.fuse's checks of its arguments (NOTE [fuse])
 * An operand is an Array (broadcast to out's shape) or a number or boolean, passed to the loop as one element of
 * the given dtype, converted as a kernel's scalar parameter is (kernel.c). Both answer false when the device's
 * backend has no loops or loops are off (CUDADEV_CPU_LOOPS=0, cd._cpu_loops(false): the generated kernels then
 * run, which spec/26 compares against).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdv.h"

_Static_assert(CDV_LOOP_MAXDIM == CDV_MAXDIM, "a loop's operand has a stride per dimension of an Array");

#define NAME(N, n) #n,
static const char *const loop_names[] = {CDV_LOOP_OPS(NAME) NULL};
static const char *const red_names[] = {CDV_RED_OPS(NAME) NULL};

static int loops_on = -1; /* -1: not yet read from CUDADEV_CPU_LOOPS; the process's (states on other threads read it) */

static int enabled(void) {
  int on = __atomic_load_n(&loops_on, __ATOMIC_RELAXED);
  if (on < 0) {
    const char *v = getenv("CUDADEV_CPU_LOOPS");
    on = !(v != NULL && (strcmp(v, "0") == 0 || strcmp(v, "off") == 0));
    __atomic_store_n(&loops_on, on, __ATOMIC_RELAXED);
  }
  return on;
}

/* An Array of d's memory that host code may touch now; NULL when it is not (the caller compiles instead). */
static cdv_array *host_array(lua_State *L, int idx, cdv_device *d) {
  cdv_array *a = cdv_check_array(L, idx);
  cdv_err e;
  if (a->block->dev != d) return NULL;
  if (cdv_host_wait(a->block, &e) != 0) cdv_raise(L, a->block->last_dev, &e);
  return a;
}

/* A scalar operand: the Lua value as one element of dtype t, as kernel.c's put_int and put_float give it. */
static void scalar_operand(lua_State *L, int idx, cdv_dtype t, char *buf) {
  if (cdv_dtypes[t].is_float) {
    lua_Number v = lua_isboolean(L, idx) ? lua_toboolean(L, idx) : luaL_checknumber(L, idx);
    float f = (float)v;
    uint16_t h = cdv_f32_to_f16(f);
    memcpy(buf, t == CDV_F64 ? (void *)&v : t == CDV_F32 ? (void *)&f : (void *)&h, cdv_dtypes[t].size);
    return;
  }
  lua_Integer v = lua_isboolean(L, idx) ? lua_toboolean(L, idx) : luaL_checkinteger(L, idx);
  if (t == CDV_BOOL) v = v != 0;
  memcpy(buf, &v, cdv_dtypes[t].size); /* little-endian: the low bytes are the value */
}

/* Operand idx (an Array or a scalar of the dtype at idx + 1) read at each index of out's shape. */
static int operand(lua_State *L, int idx, const cdv_array *out, cdv_loop_operand *o, char *scalar) {
  cdv_device *d = out->block->dev;
  memset(o->stride, 0, sizeof o->stride);
  if (lua_type(L, idx) == LUA_TNUMBER || lua_isboolean(L, idx)) {
    o->dtype = (cdv_dtype)cdv_check_dtype(L, idx + 1, CDV_F32);
    scalar_operand(L, idx, o->dtype, scalar);
    o->data = scalar;
    return 1;
  }
  cdv_array *a = host_array(L, idx, d);
  if (a == NULL || cdv_dtypes[a->dtype].is_complex) return 0; /* complex: the generated kernels (no loops) */
  if (a->ndim > out->ndim) return luaL_error(L, "__loop: operand %d has more dimensions than the output", idx);
  o->dtype = a->dtype;
  o->data = a->data;
  for (int i = 0; i < a->ndim; i++) {
    int j = out->ndim - a->ndim + i;
    if (a->shape[i] == out->shape[j])
      o->stride[j] = a->shape[i] == 1 ? 0 : a->strides[i];
    else if (a->shape[i] != 1)
      return luaL_error(L, "__loop: operand %d does not broadcast to the output's shape", idx);
  }
  return 1;
}

static int array_loop(lua_State *L) {
  cdv_loop l;
  memset(&l, 0, sizeof l);
  l.op = luaL_checkoption(L, 1, NULL, loop_names);
  l.calc = (cdv_dtype)cdv_check_dtype(L, 2, CDV_F32);
  l.calc2 = lua_isnil(L, 3) ? l.calc : (cdv_dtype)cdv_check_dtype(L, 3, CDV_F32);
  l.res = (cdv_dtype)cdv_check_dtype(L, 4, CDV_F32);
  l.bits = (int)luaL_checkinteger(L, 5);
  cdv_array *out = cdv_check_array(L, 6);
  cdv_device *d = out->block->dev;
  if (!enabled() || d->be->loop == NULL || host_array(L, 6, d) == NULL || cdv_dtypes[out->dtype].is_complex ||
      cdv_dtypes[l.calc].is_complex || cdv_dtypes[l.calc2].is_complex || cdv_dtypes[l.res].is_complex)
    return lua_pushboolean(L, 0), 1; /* complex operations have no precompiled loops: the generated kernels */
  l.nd = out->ndim;
  memcpy(l.shape, out->shape, sizeof l.shape);
  l.out.dtype = out->dtype;
  l.out.data = out->data;
  for (int i = 0; i < out->ndim; i++) l.out.stride[i] = out->shape[i] == 1 ? 0 : out->strides[i];
  _Alignas(8) char scalars[3][8];
  for (l.nin = 0; l.nin < 3 && !lua_isnoneornil(L, 7 + 2 * l.nin); l.nin++)
    if (!operand(L, 7 + 2 * l.nin, out, &l.in[l.nin], scalars[l.nin])) return lua_pushboolean(L, 0), 1;
  if (l.nin == 0 || (l.op == CDV_LOOP_WHERE) != (l.nin == 3) || (l.nin == 3 && l.op != CDV_LOOP_WHERE))
    return luaL_error(L, "__loop: %d operands for '%s'", l.nin, loop_names[l.op]);
  cdv_err e;
  int rc = d->be->loop(d, &l, NULL, &e);
  if (rc < 0) return cdv_raise(L, d, &e);
  lua_pushboolean(L, rc == 0);
  return 1;
}

static int array_reduce(lua_State *L) {
  cdv_reduce r;
  r.op = luaL_checkoption(L, 1, NULL, red_names);
  r.acc = (cdv_dtype)cdv_check_dtype(L, 2, CDV_F32);
  cdv_array *x = cdv_check_array(L, 3), *out = cdv_check_array(L, 4);
  cdv_device *d = x->block->dev;
  if (!enabled() || d->be->reduce == NULL || cdv_dtypes[r.acc].is_complex || cdv_dtypes[x->dtype].is_complex ||
      cdv_dtypes[out->dtype].is_complex)
    return lua_pushboolean(L, 0), 1; /* (as array_loop's) complex: the generated kernels */
  r.outer = luaL_checkinteger(L, 5), r.K = luaL_checkinteger(L, 6), r.inner = luaL_checkinteger(L, 7);
  r.nsplit = luaL_checkinteger(L, 8);
  int64_t n, nout;
  if (r.outer < 0 || r.K < 0 || r.inner < 0 || r.nsplit < 1 || __builtin_mul_overflow(r.outer, r.inner, &nout) ||
      __builtin_mul_overflow(nout, r.K, &n) || n != x->size || nout != out->size || !cdv_array_contiguous(x) ||
      !cdv_array_contiguous(out))
    return luaL_error(L, "__reduce: the geometry does not match the arrays");
  int arg = r.op == CDV_RED_ARGMIN || r.op == CDV_RED_ARGMAX;
  if ((arg && out->dtype != CDV_I64) || host_array(L, 3, d) == NULL || host_array(L, 4, d) == NULL)
    return lua_pushboolean(L, 0), 1;
  r.in = x->dtype, r.out = out->dtype, r.x = x->data, r.y = out->data;
  cdv_err e;
  int rc = nout == 0 ? 0 : d->be->reduce(d, &r, NULL, &e);
  if (rc < 0) return cdv_raise(L, d, &e);
  lua_pushboolean(L, rc == 0);
  return 1;
}

/* ------------------------------------------------------------ NOTE [binary fast path] in ops.lua */
/* A live, current Array at idx, or NULL (never raises: the general path words the errors). */
static cdv_array *plain_array(lua_State *L, int idx) {
  cdv_array *a = cdv_test_magic(L, idx, sizeof *a, CDV_ARRAY_MAGIC);
  if (a == NULL || a->block == NULL || a->block->generation != a->block->dev->generation) return NULL;
  return cdv_array_contiguous(a) ? a : NULL;
}

static int same_shape(const cdv_array *a, const cdv_array *b) {
  if (a->ndim != b->ndim) return 0;
  for (int i = 0; i < a->ndim; i++)
    if (a->shape[i] != b->shape[i]) return 0;
  return 1;
}

/* __pair(x, y [, out]) -> device, its generation, x's dtype, y's dtype, n [, out's dtype]: what the binary fast
 * path needs to know, in one call where it read a dozen fields (each an __index call: x.device, x.shape, ...,
 * half the host time of a small cd.add(a, b, {out = c}) on the cpu device). Nothing unless x and y are live,
 * contiguous Arrays of one device and shape, and out, when given, one of that device and shape (or of that size,
 * 1-d, when x is 1-d). */
static int array_pair(lua_State *L) {
  cdv_array *x = plain_array(L, 1), *y = x ? plain_array(L, 2) : NULL;
  if (y == NULL || y->block->dev != x->block->dev || !same_shape(x, y)) return 0;
  cdv_array *o = NULL;
  if (!lua_isnoneornil(L, 3)) {
    o = plain_array(L, 3);
    if (o == NULL || o->block->dev != x->block->dev ||
        !(same_shape(o, x) || (x->ndim == 1 && o->ndim == 1 && o->size == x->size)))
      return 0;
  }
  cdv_device *d = x->block->dev;
  cdv_push_device(L, d);
  lua_pushinteger(L, d->generation);
  lua_pushstring(L, cdv_dtypes[x->dtype].name);
  lua_pushstring(L, cdv_dtypes[y->dtype].name);
  lua_pushinteger(L, x->size);
  if (o == NULL) return 5;
  lua_pushstring(L, cdv_dtypes[o->dtype].name);
  return 6;
}

/* __same(t, idx) -> device, its generation, n, the first Array: for cd.fuse's kept launches (NOTE [fuse]), the
 * Arrays t[idx[1]], t[idx[2]], ... checked in one call as __pair checks two; nothing unless they are all live,
 * contiguous Arrays of one device and shape (and idx names at least one). */
static int array_same(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  luaL_checktype(L, 2, LUA_TTABLE);
  lua_Integer m = (lua_Integer)lua_rawlen(L, 2);
  cdv_array *first = NULL;
  for (lua_Integer j = 1; j <= m; j++) {
    lua_rawgeti(L, 2, j);
    lua_Integer i = lua_tointeger(L, -1);
    lua_pop(L, 1);
    lua_rawgeti(L, 1, i);
    cdv_array *a = plain_array(L, -1);
    if (a == NULL || (first != NULL && (a->block->dev != first->block->dev || !same_shape(a, first)))) return 0;
    if (first == NULL)
      first = a;
    else
      lua_pop(L, 1); /* the first stays on the stack: it is the last result */
  }
  if (first == NULL) return 0;
  cdv_device *d = first->block->dev;
  cdv_push_device(L, d);
  lua_pushinteger(L, d->generation);
  lua_pushinteger(L, first->size);
  lua_rotate(L, -4, -1); /* the first Array after them */
  return 4;
}

/* __sig(t, n) -> the key of a fused call's arguments t[1..n] (NOTE [fuse]): "dtype:ndim" of an Array, "integer",
 * "float" or "boolean", joined by commas; nothing when one is something else, or a freed or stale Array (the
 * caller words the error). One call where the key took three per argument (cd.type, a.dtype, a.ndim). */
static int array_sig(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_Integer n = luaL_checkinteger(L, 2);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (lua_Integer i = 1; i <= n; i++) {
    int t = lua_rawgeti(L, 1, i);
    cdv_array *a = t == LUA_TUSERDATA ? cdv_test_magic(L, -1, sizeof *a, CDV_ARRAY_MAGIC) : NULL;
    const char *part = t == LUA_TBOOLEAN      ? "boolean"
                       : t != LUA_TNUMBER     ? NULL
                       : lua_isinteger(L, -1) ? "integer"
                                              : "float";
    lua_pop(L, 1);
    if (i > 1) luaL_addchar(&b, ',');
    if (a != NULL && a->block != NULL && a->block->generation == a->block->dev->generation) {
      char s[48];
      snprintf(s, sizeof s, "%s:%d", cdv_dtypes[a->dtype].name, a->ndim);
      luaL_addstring(&b, s);
    } else if (part != NULL)
      luaL_addstring(&b, part);
    else
      return 0;
  }
  luaL_pushresult(&b);
  return 1;
}

/* __like(x, dtype) -> a new contiguous Array of x's shape and device, of dtype, on the state's stream there: what
 * cd.empty(x.shape, dtype, {device = x.device}) makes, without the shape table and the options. */
static int array_like(lua_State *L) {
  cdv_array *x = cdv_check_array(L, 1);
  cdv_dtype t = (cdv_dtype)cdv_check_dtype(L, 2, CDV_F32);
  int64_t shape[CDV_MAXDIM];
  memcpy(shape, x->shape, sizeof shape);
  cdv_push_array(L, x->block->dev, t, x->ndim, shape, CDV_MEM_DEVICE, NULL);
  return 1;
}

/* cd._cpu_loops([on]) -> whether loops were on: false sends every built-in operation to the generated kernels.
 * The switch is the process's: a sandboxed script may not turn it (its neighbours' operations would compile). */
static int l_cpu_loops(lua_State *L) {
  if (cdv_get_state(L)->sandbox) return luaL_error(L, "_cpu_loops is not available in this sandbox");
  int was = enabled();
  if (!lua_isnoneornil(L, 1)) __atomic_store_n(&loops_on, lua_toboolean(L, 1), __ATOMIC_RELAXED);
  lua_pushboolean(L, was);
  return 1;
}

/* with the module table on top */
void cdv_array_loops_open(lua_State *L) {
  luaL_getmetatable(L, CDV_ARRAY);
  lua_pushcfunction(L, array_loop);
  lua_setfield(L, -2, "__loop");
  lua_pushcfunction(L, array_reduce);
  lua_setfield(L, -2, "__reduce");
  lua_pushcfunction(L, array_pair);
  lua_setfield(L, -2, "__pair");
  lua_pushcfunction(L, array_like);
  lua_setfield(L, -2, "__like");
  lua_pushcfunction(L, array_same);
  lua_setfield(L, -2, "__same");
  lua_pushcfunction(L, array_sig);
  lua_setfield(L, -2, "__sig");
  lua_pop(L, 1);
  lua_pushcfunction(L, l_cpu_loops);
  lua_setfield(L, -2, "_cpu_loops");
}
