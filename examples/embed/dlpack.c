/*
 * embed_dlpack: a host program that exchanges tensors with Lua scripts through DLPack (src/cudadev_dlpack.h),
 * both ways, without copying (examples/embed; built by CMake, run by spec/97-dlpack_spec.lua).
 *
 *   make build && build/embed_dlpack [device]      (device: "cpu", the default, or "cuda:0")
 *
 * Host to Lua: tensors of the host's own memory (malloc'd, on the cpu device) with a deleter that counts its
 * calls, pushed with cudadev_push_dlpack / cudadev_push_dlpack_versioned; the script reads and writes them in
 * place, and the deleter runs once, when the last Array over the memory is collected (or at lua_close). Every
 * dtype cudadev has; the tensors cudadev refuses (dtype codes, vector lanes, device types, strides, versions),
 * each refusal printed, no deleter called. Lua to host: an Array of `device` exported with cudadev_to_dlpack (and
 * the versioned form) from one lua_State and imported into another, as two frameworks would; the writes of each
 * are seen by the other, the memory outlives the exporter's Array and its lua_State until the consumer's deleter.
 * Exit status 0 when every check passed; the last line is then "embed_dlpack: ok".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>

#include "cudadev_dlpack.h"

static int failures;

#define CHECK(cond, ...)                      \
  do {                                        \
    if (!(cond)) {                            \
      failures++;                             \
      printf("FAILED (line %d): ", __LINE__); \
      printf(__VA_ARGS__);                    \
      printf("\n");                           \
    }                                         \
  } while (0)

/* ---------------------------------------------------------------- the host's tensors */
typedef struct host_tensor {
  DLManagedTensor legacy;
  DLManagedTensorVersioned versioned;
  int64_t shape[8], strides[8];
  void *data;
  int deleted; /* deleter calls */
} host_tensor;

static void delete_legacy(DLManagedTensor *self) { ((host_tensor *)self->manager_ctx)->deleted++; }
static void delete_versioned(DLManagedTensorVersioned *self) { ((host_tensor *)self->manager_ctx)->deleted++; }

/* A tensor over data (the caller's) of the given type and shape, compact (strides NULL) */
static host_tensor *make_tensor(void *data, uint8_t code, uint8_t bits, int ndim, const int64_t *shape) {
  host_tensor *h = calloc(1, sizeof *h);
  h->data = data;
  memcpy(h->shape, shape, (size_t)ndim * sizeof *shape);
  DLTensor t = {data, {kDLCPU, 0}, ndim, {code, bits, 1}, h->shape, NULL, 0};
  h->legacy = (DLManagedTensor){t, h, delete_legacy};
  h->versioned = (DLManagedTensorVersioned){{1, 1}, h, delete_versioned, 0, t};
  return h;
}

/* ---------------------------------------------------------------- Lua states */
static lua_State *new_state(void) {
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  luaL_requiref(L, "cudadev", luaopen_cudadev, 1);
  lua_setglobal(L, "cd");
  return L;
}

/* Runs a chunk; prints its error, as the script's */
static int run(lua_State *L, const char *code) {
  if (luaL_dostring(L, code) != LUA_OK) {
    printf("script error: %s\n", lua_tostring(L, -1));
    lua_pop(L, 1);
    failures++;
    return 1;
  }
  return 0;
}

/* cudadev_push_dlpack(_versioned) under pcall, the Array set as global `name`; returns the error or NULL */
static int push_cf(lua_State *L) {
  void *t = lua_touserdata(L, 1);
  if (lua_toboolean(L, 3))
    cudadev_push_dlpack_versioned(L, t);
  else
    cudadev_push_dlpack(L, t);
  lua_setglobal(L, lua_tostring(L, 2));
  return 0;
}

static char errbuf[512];

static const char *push(lua_State *L, void *t, int versioned, const char *name) {
  lua_pushcfunction(L, push_cf);
  lua_pushlightuserdata(L, t);
  lua_pushstring(L, name);
  lua_pushboolean(L, versioned);
  if (lua_pcall(L, 3, 0, 0) == LUA_OK) return NULL;
  snprintf(errbuf, sizeof errbuf, "%s", lua_tostring(L, -1));
  lua_pop(L, 1);
  return errbuf;
}

/* cudadev_to_dlpack(_versioned) of global `name`, under pcall */
static int export_cf(lua_State *L) {
  lua_getglobal(L, lua_tostring(L, 1));
  lua_pushlightuserdata(
      L, lua_toboolean(L, 2) ? (void *)cudadev_to_dlpack_versioned(L, -1) : (void *)cudadev_to_dlpack(L, -1));
  return 1;
}

static void *export_global(lua_State *L, const char *name, int versioned) {
  lua_pushcfunction(L, export_cf);
  lua_pushstring(L, name);
  lua_pushboolean(L, versioned);
  if (lua_pcall(L, 2, 1, 0) != LUA_OK) {
    printf("export of %s failed: %s\n", name, lua_tostring(L, -1));
    lua_pop(L, 1);
    failures++;
    return NULL;
  }
  void *p = lua_touserdata(L, -1);
  lua_pop(L, 1);
  return p;
}

static void *global_ptr(lua_State *L, const char *name) {
  cudadev_array_info info;
  lua_getglobal(L, name);
  int ok = cudadev_to_array(L, -1, &info);
  lua_pop(L, 1);
  return ok ? info.ptr : NULL;
}

static long live_blocks(lua_State *L) {
  run(L, "_blocks = cd._live().blocks");
  lua_getglobal(L, "_blocks");
  long n = (long)lua_tointeger(L, -1);
  lua_pop(L, 1);
  return n;
}

/* ---------------------------------------------------------------- host to Lua */
static void host_to_lua(void) {
  lua_State *L = new_state();
  float data[6] = {0, 1, 2, 3, 4, 5};
  host_tensor *h = make_tensor(data, kDLFloat, 32, 2, (int64_t[]){2, 3});
  CHECK(push(L, &h->legacy, 0, "t") == NULL, "push: %s", errbuf);
  CHECK(global_ptr(L, "t") == data, "the Array's pointer is not the tensor's");
  run(L,
      "print('script: t = ' .. tostring(t))\n"
      "t[2][3] = 50\n"
      "row = t[1]   -- a view keeps the memory\n"
      "t = nil collectgarbage() collectgarbage()");
  printf("host: same pointer, the script's write seen: data[5] = %g; deleter calls with a view alive: %d\n", data[5],
         h->deleted);
  CHECK(data[5] == 50 && h->deleted == 0, "write or early deleter");
  run(L, "row = nil collectgarbage() collectgarbage()");
  printf("host: deleter calls after the view was collected: %d\n", h->deleted);
  CHECK(h->deleted == 1, "deleter not called exactly once");
  free(h);

  /* byte_offset, through the versioned form; the deleter at lua_close */
  int64_t words[4] = {10, 20, 30, 40};
  h = make_tensor(words, kDLInt, 64, 1, (int64_t[]){3});
  h->versioned.dl_tensor.byte_offset = 8;
  CHECK(push(L, &h->versioned, 1, "v") == NULL, "push versioned: %s", errbuf);
  run(L,
      "print('script: byte_offset 8: ' .. tostring(v))\n"
      "v[3] = 41");
  CHECK(words[3] == 41, "versioned write not seen");

  /* strides that say compact row-major (a dimension of 1 has any stride) */
  float one[3] = {7, 8, 9};
  host_tensor *s = make_tensor(one, kDLFloat, 32, 2, (int64_t[]){1, 3});
  s->strides[0] = 99, s->strides[1] = 1;
  s->legacy.dl_tensor.strides = s->strides;
  CHECK(push(L, &s->legacy, 0, "s") == NULL, "compact strides refused: %s", errbuf);
  run(L, "print('script: strides {99, 1} of shape {1, 3}: ' .. tostring(s))");

  /* every dtype cudadev has */
  static const struct {
    uint8_t code, bits;
  } types[] = {{kDLFloat, 16}, {kDLFloat, 32}, {kDLFloat, 64}, {kDLInt, 8},   {kDLInt, 16},  {kDLInt, 32},
               {kDLInt, 64},   {kDLUInt, 8},   {kDLUInt, 16},  {kDLUInt, 32}, {kDLUInt, 64}, {kDLBool, 8}};
  uint64_t zero = 0;
  host_tensor *each[12];
  run(L, "names = {}");
  for (int i = 0; i < 12; i++) {
    each[i] = make_tensor(&zero, types[i].code, types[i].bits, 1, (int64_t[]){1});
    CHECK(push(L, &each[i]->legacy, 0, "e") == NULL, "dtype %d/%d: %s", types[i].code, types[i].bits, errbuf);
    run(L, "names[#names + 1] = e.dtype .. '=' .. tostring(e[1]); e = nil");
  }
  run(L, "print('script: dtypes: ' .. table.concat(names, ' ')) collectgarbage() collectgarbage()");
  int all = 1;
  for (int i = 0; i < 12; i++) all &= each[i]->deleted == 1, free(each[i]);
  printf("host: every dtype's deleter called once: %s\n", all ? "yes" : "no");
  CHECK(all, "dtype deleters");

  /* refusals: the tensor stays the host's (no deleter call) */
  float f[4] = {0};
  host_tensor *r = make_tensor(f, kDLFloat, 32, 1, (int64_t[]){4});
  DLTensor good = r->legacy.dl_tensor;
  struct {
    const char *what;
    void (*change)(DLTensor *);
  } bad[] = {{"bfloat16", NULL},        {"complex32", NULL}, {"float8_e4m3fn", NULL}, {"float4 lanes", NULL},
             {"int12", NULL},           {"code 42", NULL},   {"kDLROCM", NULL},       {"kDLOpenCL", NULL},
             {"device 99", NULL},       {"cuda:7", NULL},    {"strides", NULL},       {"ndim 9", NULL},
             {"negative extent", NULL}, {"NULL data", NULL}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    DLTensor *t = &r->legacy.dl_tensor;
    *t = good;
    switch (i) {
      case 0: t->dtype = (DLDataType){4, 16, 1}; break;
      case 1: t->dtype = (DLDataType){5, 32, 1}; break; /* complex64 and complex128 are cudadev dtypes */
      case 2: t->dtype = (DLDataType){10, 8, 1}; break;
      case 3: t->dtype = (DLDataType){kDLFloat, 32, 4}; break;
      case 4: t->dtype = (DLDataType){kDLInt, 12, 1}; break;
      case 5: t->dtype = (DLDataType){42, 8, 1}; break;
      case 6: t->device = (DLDevice){(DLDeviceType)10, 0}; break;
      case 7: t->device = (DLDevice){(DLDeviceType)4, 0}; break;
      case 8: t->device = (DLDevice){(DLDeviceType)99, 0}; break;
      case 9: t->device = (DLDevice){kDLCUDA, 7}; break;
      case 10:
        t->ndim = 2, r->shape[0] = 2, r->shape[1] = 2, r->strides[0] = 1, r->strides[1] = 2;
        t->strides = r->strides;
        break;
      case 11: t->ndim = 9; break;
      case 12: r->shape[0] = -1; break;
      case 13: t->data = NULL; break;
    }
    const char *why = push(L, &r->legacy, 0, "x");
    printf("refused (%s): %s\n", bad[i].what, why ? why : "(accepted)");
    CHECK(why != NULL, "%s accepted", bad[i].what);
    r->shape[0] = 4;
  }
  r->versioned.version.major = 2;
  const char *why = push(L, &r->versioned, 1, "x");
  printf("refused (version 2.1): %s\n", why ? why : "(accepted)");
  r->versioned.version.major = 1;
  r->versioned.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
  why = push(L, &r->versioned, 1, "x");
  printf("refused (read-only): %s\n", why ? why : "(accepted)");
  why = push(L, NULL, 0, "x");
  printf("refused (NULL): %s\n", why ? why : "(accepted)");
  printf("host: deleter calls of the refused tensor: %d\n", r->deleted);
  CHECK(r->deleted == 0, "a refused tensor's deleter ran");
  /* a script that is given a tensor as a light userdata owns it: cd.from_dlpack takes it even when it refuses it */
  r->legacy.dl_tensor.dtype = (DLDataType){kDLBfloat, 16, 1};
  lua_pushlightuserdata(L, &r->legacy);
  lua_setglobal(L, "p");
  run(L, "print('script: ' .. select(2, pcall(cd.from_dlpack, p))) p = nil");
  printf("host: deleter calls after cd.from_dlpack refused it: %d\n", r->deleted);
  CHECK(r->deleted == 1, "cd.from_dlpack did not delete the tensor it refused");
  free(r);

  lua_close(L);
  printf("host: after lua_close, the versioned tensor's deleter calls: %d, the strided one's: %d\n", h->deleted,
         s->deleted);
  CHECK(h->deleted == 1 && s->deleted == 1, "deleters at lua_close");
  free(h);
  free(s);
}

/* ---------------------------------------------------------------- Lua to Lua, as two frameworks */
static void lua_to_lua(const char *device) {
  lua_State *A = new_state(), *B = new_state();
  char code[512];
  long base = live_blocks(A);
  snprintf(code, sizeof code, "x = cd.array({1, 2, 3, 4, 5, 6}, 'int16', {device = '%s'}):reshape({3, 2})", device);
  run(A, code);
  DLManagedTensor *m = export_global(A, "x", 0);
  if (m == NULL) return;
  DLTensor *t = &m->dl_tensor;
  printf(
      "export: ndim %d shape {%lld, %lld} strides {%lld, %lld} dtype %d/%d/%d device %d:%d byte_offset %llu, "
      "same pointer: %s\n",
      (int)t->ndim, (long long)t->shape[0], (long long)t->shape[1], (long long)t->strides[0], (long long)t->strides[1],
      t->dtype.code, t->dtype.bits, t->dtype.lanes, (int)t->device.device_type, (int)t->device.device_id,
      (unsigned long long)t->byte_offset, t->data == global_ptr(A, "x") ? "yes" : "no");
  CHECK(push(B, m, 0, "y") == NULL, "import into B: %s", errbuf);
  CHECK(global_ptr(B, "y") == global_ptr(A, "x"), "B's Array is not over A's memory");
  run(B, "print('B: y = ' .. tostring(y)) y[3][2] = 60");
  run(A,
      "print('A: x after B wrote = ' .. tostring(x)) x[1][1] = 10\n"
      "x:free() x = nil collectgarbage() collectgarbage()");
  run(B, "print('B: y after A wrote and freed x = ' .. tostring(y)) collectgarbage() collectgarbage()");
  printf("host: blocks live after A freed x: %ld (A's, held by the export, and B's Array over it)\n",
         live_blocks(A) - base);
  run(B, "y = nil collectgarbage() collectgarbage()"); /* B's release calls m's deleter */
  printf("host: blocks held once B collected y: %ld\n", live_blocks(A) - base);
  CHECK(live_blocks(A) == base, "the export's block was not freed");

  /* the versioned form, and a consumer that calls the deleter after the exporter's lua_close */
  snprintf(code, sizeof code, "z = cd.full({4}, 2.5, 'float64', {device = '%s'})", device);
  run(A, code);
  DLManagedTensorVersioned *v = export_global(A, "z", 1);
  if (v == NULL) return;
  printf("export versioned: version %u.%u flags %llu dtype %d/%d\n", v->version.major, v->version.minor,
         (unsigned long long)v->flags, v->dl_tensor.dtype.code, v->dl_tensor.dtype.bits);
  CHECK(push(B, v, 1, "w") == NULL, "versioned import into B: %s", errbuf);
  run(B, "print('B: w = ' .. tostring(w))");
  lua_close(A);
  run(B, "print('B: w after A closed = ' .. tostring(w)) w = nil collectgarbage() collectgarbage()");
  run(B, "print('B: blocks live at the end: ' .. cd._live().blocks)");
  lua_close(B);
}

int main(int argc, char **argv) {
  const char *device = argc > 1 ? argv[1] : "cpu";
  setvbuf(stdout, NULL, _IOLBF, 0);
  host_to_lua();
  lua_to_lua(device);
  if (failures) {
    printf("embed_dlpack: %d check(s) failed\n", failures);
    return 1;
  }
  printf("embed_dlpack: ok\n");
  return 0;
}
