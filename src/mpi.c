/*
 * mpi.c: the C side of cd.mpi (lua/cudadev/mpi.lua is the public side): cudadev_mpi.so's table (loader.c
 * finds and opens it: NOTE [mpi shim] in mpi_api.h), MPI's start on first use and its end at exit, and the byte
 * and element moves that mpi.lua builds its collectives from. These are internal (cd._mpi, which mpi.lua takes away); the
 * arguments were checked there, and are checked again here only as far as memory safety needs.
 */
#define _GNU_SOURCE /* on_exit */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cdv.h"
#include "mpi_api.h"

static pthread_mutex_t mpi_lock = PTHREAD_MUTEX_INITIALIZER;
static const cdv_mpi_api *api; /* NULL until the shim opened */
static const char *load_why = ""; /* why it could not be opened ("" until tried) */
static int started, world_rank, world_size, node_rank;
static pid_t start_pid;

/* Opens the shim once (loader.c: NOTE [mpi shim]). Called with mpi_lock held. */
static void load_shim(void) {
  if (api == NULL) api = cdv_mpi_load(&load_why);
}

/* The process ends: MPI_Finalize when we started MPI. A process that ends with a failure (an uncaught error in
 * luacuda or lua) while other ranks run calls MPI_Abort instead, which ends the whole job: the other ranks may be
 * waiting in a collective for this one and would otherwise wait forever (mpi4py's `python -m mpi4py`). A forked
 * child (the cpu device's launches end with _exit, but a host's fork may not) leaves MPI to its parent. */
static void at_exit(int status, void *arg) {
  (void)arg;
  if (getpid() != start_pid) return;
  if (status != 0 && world_size > 1) api->abort(status);
  api->finalize();
}

static int mpi_error(lua_State *L, const char *msg) { return luaL_error(L, "%s", msg); }

/* _mpi.load() -> true | false, reason: the shim opens (MPI is not started) */
static int l_load(lua_State *L) {
  pthread_mutex_lock(&mpi_lock);
  load_shim();
  pthread_mutex_unlock(&mpi_lock);
  if (api != NULL) {
    lua_pushboolean(L, 1);
    return 1;
  }
  lua_pushboolean(L, 0);
  lua_pushstring(L, load_why);
  return 2;
}

/* NOTE [mpi start]: MPI starts on the first call that needs it (MPI_Init_thread, MPI_THREAD_MULTIPLE asked), once
 * per process whatever the number of lua_States; a host that started MPI itself keeps it: we neither finalise nor
 * abort it. Raises when the shim cannot open or MPI cannot start. */
static void start(lua_State *L) {
  if (__atomic_load_n(&started, __ATOMIC_ACQUIRE)) return;
  if (cdv_get_state(L)->sandbox) luaL_error(L, "MPI is not available in this sandbox");
  char msg[2048 + 64] = "";
  pthread_mutex_lock(&mpi_lock);
  load_shim();
  int ok = started;
  if (!ok && api != NULL) {
    int ours = 0;
    if (api->init(&ours, &world_rank, &world_size, &node_rank, msg, sizeof msg) == 0) {
      if (ours) {
        start_pid = getpid();
        on_exit(at_exit, NULL);
      }
      __atomic_store_n(&started, 1, __ATOMIC_RELEASE);
      ok = 1;
    }
  } else if (!ok)
    snprintf(msg, sizeof msg, "MPI is not available (%s)", load_why);
  pthread_mutex_unlock(&mpi_lock);
  if (!ok) luaL_error(L, "%s", msg);
}

/* _mpi.init() -> rank, size, local rank */
static int l_init(lua_State *L) {
  start(L);
  lua_pushinteger(L, world_rank);
  lua_pushinteger(L, world_size);
  lua_pushinteger(L, node_rank);
  return 3;
}

static int l_barrier(lua_State *L) {
  char msg[512];
  start(L);
  if (api->barrier(msg, sizeof msg) != 0) return mpi_error(L, msg);
  return 0;
}

/* _mpi.min_int(v) -> the least v of all ranks */
static int l_min_int(lua_State *L) {
  long long v = (long long)luaL_checkinteger(L, 1);
  char msg[512];
  start(L);
  if (api->min_int(&v, msg, sizeof msg) != 0) return mpi_error(L, msg);
  lua_pushinteger(L, (lua_Integer)v);
  return 1;
}

static int check_rank(lua_State *L, int arg) {
  lua_Integer r = luaL_checkinteger(L, arg);
  luaL_argcheck(L, r >= 0 && r < world_size, arg, "rank out of range");
  return (int)r;
}

/* _mpi.bcast_bytes(s, root) -> the root's s: its length first, then its bytes (the others pass nil) */
static int l_bcast_bytes(lua_State *L) {
  char msg[512];
  start(L);
  int root = check_rank(L, 2);
  long long n = 0;
  const char *s = NULL;
  if (world_rank == root) {
    size_t len;
    s = luaL_checklstring(L, 1, &len);
    n = (long long)len;
  }
  if (api->bcast(&n, sizeof n, root, msg, sizeof msg) != 0) return mpi_error(L, msg);
  if (world_rank == root) {
    if (api->bcast((void *)s, (size_t)n, root, msg, sizeof msg) != 0) return mpi_error(L, msg);
    lua_settop(L, 1);
    return 1;
  }
  luaL_Buffer b;
  char *dst = luaL_buffinitsize(L, &b, (size_t)n);
  if (api->bcast(dst, (size_t)n, root, msg, sizeof msg) != 0) return mpi_error(L, msg);
  luaL_pushresultsize(&b, (size_t)n);
  return 1;
}

/* _mpi.host_problem(x) -> nil when x is a live Array in host memory, else why it cannot take part (never raises) */
static int l_host_problem(lua_State *L) {
  cdv_array *a = cdv_test_magic(L, 1, sizeof *a, CDV_ARRAY_MAGIC);
  if (a == NULL)
    lua_pushfstring(L, "Array expected, got %s", cdv_typename(L, 1));
  else if (a->block == NULL)
    lua_pushliteral(L, "attempt to use a freed array");
  else if (a->block->generation != a->block->dev->generation)
    lua_pushliteral(L, "stale Array: device was reset");
  else if (!a->block->dev->be->host_memory)
    lua_pushfstring(L, "Array on %s: copy it to the cpu device first, or use cd.mpi.nccl_comm", a->block->dev->alias);
  else
    lua_pushnil(L);
  return 1;
}

/* a's elements, a being a live array in host memory (raises otherwise); nothing after this may run Lua code */
static char *host_elements(lua_State *L, int arg, size_t *n) {
  cdv_array *a = cdv_check_array(L, arg);
  if (!a->block->dev->be->host_memory) luaL_argerror(L, arg, "Array not in host memory");
  *n = (size_t)a->size * cdv_dtypes[a->dtype].size;
  return cdv_array_host_data(L, a);
}

/* _mpi.bcast_array(a, root): the root's elements into every rank's a (same dtype and shape: mpi.lua checked) */
static int l_bcast_array(lua_State *L) {
  char msg[512];
  start(L);
  int root = check_rank(L, 2);
  size_t n;
  char *p = host_elements(L, 1, &n);
  if (api->bcast(p, n, root, msg, sizeof msg) != 0) return mpi_error(L, msg);
  lua_settop(L, 1);
  return 1;
}

/* _mpi.allreduce_array(a, op): a reduced over the ranks, in place (op: CDV_MPI_SUM ...). NOTE [half reductions]:
 * MPI has no float16; those arrays are reduced as float32 (widened, reduced, rounded once), as NCCL's sum of
 * halves accumulates wider. */
static int l_allreduce_array(lua_State *L) {
  char msg[512];
  start(L);
  lua_Integer op = luaL_checkinteger(L, 2);
  luaL_argcheck(L, op >= 0 && op < CDV_MPI_NOPS, 2, "bad op");
  cdv_array *a = cdv_check_array(L, 1);
  size_t n, count = (size_t)a->size;
  char *p = host_elements(L, 1, &n);
  int rc;
  if (a->dtype == CDV_F16) {
    float *w = malloc(count ? count * sizeof *w : 1);
    if (w == NULL) return luaL_error(L, "not enough memory");
    uint16_t *h = (uint16_t *)(void *)p;
    for (size_t i = 0; i < count; i++) w[i] = cdv_f16_to_f32(h[i]);
    rc = api->allreduce(w, count, CDV_F32, (int)op, msg, sizeof msg);
    if (rc == 0)
      for (size_t i = 0; i < count; i++) h[i] = cdv_f32_to_f16(w[i]);
    free(w);
  } else
    rc = api->allreduce(p, count, a->dtype, (int)op, msg, sizeof msg);
  if (rc != 0) return mpi_error(L, msg);
  lua_settop(L, 1);
  return 1;
}

static int check_tag(lua_State *L, int arg) {
  lua_Integer t = luaL_checkinteger(L, arg);
  luaL_argcheck(L, t >= 0 && t <= 32767, arg, "tag out of range");
  return (int)t;
}

/* _mpi.send_bytes(s, dest, tag) */
static int l_send_bytes(lua_State *L) {
  char msg[512];
  size_t n;
  const char *s = luaL_checklstring(L, 1, &n);
  start(L);
  if (api->send(s, n, check_rank(L, 2), check_tag(L, 3), msg, sizeof msg) != 0) return mpi_error(L, msg);
  return 0;
}

/* _mpi.recv_bytes(n, source, tag) -> the n bytes sent */
static int l_recv_bytes(lua_State *L) {
  char msg[512];
  size_t n = (size_t)cdv_check_count(L, 1, "length");
  start(L);
  int source = check_rank(L, 2), tag = check_tag(L, 3);
  luaL_Buffer b;
  char *dst = luaL_buffinitsize(L, &b, n);
  if (api->recv(dst, n, source, tag, msg, sizeof msg) != 0) return mpi_error(L, msg);
  luaL_pushresultsize(&b, n);
  return 1;
}

/* _mpi.send_array(a, dest, tag) / _mpi.recv_array(a, source, tag): a's bytes, as one message (or pieces);
 * recv_array returns a */
static int array_message(lua_State *L, int receive) {
  char msg[512];
  start(L);
  int rank = check_rank(L, 2), tag = check_tag(L, 3);
  size_t n;
  char *p = host_elements(L, 1, &n);
  if ((receive ? api->recv(p, n, rank, tag, msg, sizeof msg) : api->send(p, n, rank, tag, msg, sizeof msg)) != 0)
    return mpi_error(L, msg);
  lua_settop(L, 1);
  return receive;
}

static int l_send_array(lua_State *L) { return array_message(L, 0); }
static int l_recv_array(lua_State *L) { return array_message(L, 1); }

int cdv_mpi_open(lua_State *L) {
  static const luaL_Reg fns[] = {{"load", l_load},
                                 {"init", l_init},
                                 {"barrier", l_barrier},
                                 {"min_int", l_min_int},
                                 {"bcast_bytes", l_bcast_bytes},
                                 {"host_problem", l_host_problem},
                                 {"bcast_array", l_bcast_array},
                                 {"allreduce_array", l_allreduce_array},
                                 {"send_bytes", l_send_bytes},
                                 {"recv_bytes", l_recv_bytes},
                                 {"send_array", l_send_array},
                                 {"recv_array", l_recv_array},
                                 {NULL, NULL}};
  luaL_newlib(L, fns);
  lua_setfield(L, -2, "_mpi");
  return 0;
}
