/*
 * nccl.c: cd.nccl and cudadev.Comm, NCCL communicators (CuPy's cupy.cuda.nccl, torch.distributed's nccl
 * backend): collectives and point-to-point transfers between the GPUs of one process or of many.
 *
 * libnccl is opened with dlopen on first use (NOTE [nccl library] in loader.c; nccl_abi.h declares what we call),
 * so without it the module loads, the cpu device works, cd.nccl.is_available() says why, and every call that
 * needs the library raises a cudadev.Error listing the names tried. Arguments are checked before NCCL sees them:
 * arrays on the communicator's device, dtypes NCCL has, sizes the collective needs, the stream's device, in-place
 * forms exactly as NCCL defines them. After each call ncclCommGetAsyncError is asked, so that a failure of the
 * queued work (a peer that died, a network error) surfaces at the next call, with NCCL's text.
 *
 * NOTE [nccl groups]: one thread that drives several communicators (the comms of cd.nccl.comms, one per GPU of
 * this process) must issue one call per communicator between ncclGroupStart and ncclGroupEnd: outside a group
 * the first call waits for its peers, which the same thread has not called yet. cd.nccl.group(fn, ...) is that
 * bracket, as CuPy's nccl.groupStart/groupEnd and PyTorch's AutoNcclGroup: the end also runs when fn raises
 * (NCCL cannot take back what was queued; the communicators may then need comm:abort()). Inside a group the
 * calls only record work; errors of the group surface at its end.
 */
#include <limits.h>
#include <string.h>

#include "cdv.h"
#include "nccl_abi.h"

static const char *const op_names[] = {"sum", "prod", "max", "min", "avg", NULL};
static const cdv_ncclRedOp_t op_values[] = {cdv_ncclSum, cdv_ncclProd, cdv_ncclMax, cdv_ncclMin, cdv_ncclAvg};

typedef struct nccl_comm {
  uint64_t magic; /* CDV_COMM_MAGIC (NOTE [magic]) */
  cdv_ncclComm_t comm; /* NULL until made, and once destroyed or aborted */
  cdv_device *dev;
  unsigned generation;
  int rank, size;
  int aborted;
} nccl_comm;

/* The calls of this thread between ncclGroupStart and ncclGroupEnd (NCCL's groups are per thread too). */
static _Thread_local int group_depth;

/* ---------------------------------------------------------------- errors */
static const char *result_name(cdv_ncclResult_t r) {
  static const char *const names[] = {"ncclSuccess",       "ncclUnhandledCudaError", "ncclSystemError",
                                      "ncclInternalError", "ncclInvalidArgument",    "ncclInvalidUsage",
                                      "ncclRemoteError",   "ncclInProgress",         "ncclTimeout"};
  return (unsigned)r < sizeof names / sizeof names[0] ? names[r] : "ncclUnknownResult";
}

/* Raises a cudadev.Error for a failed NCCL call: NCCL's text for the code (ncclGetErrorString), then its last
 * error message (ncclGetLastError) when it has one, then `hint`. */
static int nccl_raise(lua_State *L, cdv_device *d, const char *api, cdv_ncclResult_t r, cdv_ncclComm_t comm,
                      const char *hint) {
  cdv_err e;
  const char *text = cdv_nccl.ncclGetErrorString ? cdv_nccl.ncclGetErrorString(r) : NULL;
  const char *last = cdv_nccl.ncclGetLastError ? cdv_nccl.ncclGetLastError(comm) : NULL;
  cdv_fail(&e, api, (int)r, result_name(r), "%s%s%s%s", text ? text : "NCCL error", last && *last ? ": " : "",
           last && *last ? last : "", hint ? hint : "");
  return cdv_raise(L, d, &e);
}

static int nccl_missing(lua_State *L, const char *symbol) {
  cdv_err e;
  cdv_fail(&e, symbol, 0, "NCCL_SYMBOL_NOT_FOUND", "%s does not export %s (NCCL is too old)", cdv_nccl_path(), symbol);
  return cdv_raise(L, NULL, &e);
}

/* `NCCL(L, d, comm, ncclAllReduce, args...)`: the call, raising on failure; a missing entry point fails by name */
#define NCCL(L, d, comm, fn, ...)                                           \
  do {                                                                      \
    if (cdv_nccl.fn == NULL) nccl_missing((L), #fn);                        \
    cdv_ncclResult_t r_ = cdv_nccl.fn(__VA_ARGS__);                         \
    if (r_ != cdv_ncclSuccess) nccl_raise((L), (d), #fn, r_, (comm), NULL); \
  } while (0)

/* The library, or a cudadev.Error naming every file tried (NOTE [nccl library]); refused in a sandbox, where a
 * script must not open the network sockets NCCL's bootstrap listens on. */
static void nccl_ready(lua_State *L) {
  if (cdv_get_state(L)->sandbox) luaL_error(L, "cd.nccl is not available in this sandbox");
  if (cdv_nccl_load() != 0) {
    cdv_err e;
    cdv_fail(&e, "dlopen", 0, "NCCL_NOT_FOUND", "%s", cdv_nccl_why());
    cdv_raise(L, NULL, &e);
  }
}

/* NCCL's calls that set the device (cudaSetDevice: init, group end, destroy) leave the device's primary context
 * current; the thread's own context is put back, for a host that made another one current. */
static void *ctx_save(void) { return cdv_cuda_current_context(); }

static void ctx_restore(void *c) { cdv_cuda_set_current_context(c); }

/* ---------------------------------------------------------------- Comm values */
static nccl_comm *check_any(lua_State *L, int arg) {
  return cdv_check_udata(L, arg, CDV_COMM, CDV_COMM_MAGIC, sizeof(nccl_comm));
}

static nccl_comm *check_comm(lua_State *L, int arg) {
  nccl_comm *c = check_any(L, arg);
  if (c->comm == NULL) /* NOTE [self errors] */
    cdv_self_error(L, arg,
                   c->aborted ? "attempt to use an aborted communicator" : "attempt to use a destroyed communicator");
  if (c->generation != c->dev->generation) cdv_self_error(L, arg, "stale Comm: device was reset");
  return c;
}

/* A closed Comm on d, pushed (acquired by the caller: a failure leaves nothing half-made). */
static nccl_comm *new_comm(lua_State *L, cdv_device *d) {
  nccl_comm *c = lua_newuserdatauv(L, sizeof *c, 0);
  memset(c, 0, sizeof *c);
  c->magic = CDV_COMM_MAGIC;
  c->dev = d;
  c->generation = d->generation;
  luaL_setmetatable(L, CDV_COMM);
  cdv_track_late(L, -1); /* NOTE [objects made in finalizers] */
  return c;
}

/* The communicator is made: its rank and size as NCCL reports them. */
static void opened(lua_State *L, nccl_comm *c, cdv_ncclComm_t comm, int rank, int size) {
  c->comm = comm;
  c->rank = rank;
  c->size = size;
  if (cdv_nccl.ncclCommUserRank) NCCL(L, c->dev, comm, ncclCommUserRank, comm, &c->rank);
  if (cdv_nccl.ncclCommCount) NCCL(L, c->dev, comm, ncclCommCount, comm, &c->size);
}

/* Gives the communicator back: ncclCommDestroy, or ncclCommAbort when abort. A stale one (its context reset)
 * is forgotten: NCCL's resources went with the context. Raises on failure when raise, else warns. */
static void release(lua_State *L, nccl_comm *c, int abort, int raise) {
  cdv_ncclComm_t comm = c->comm;
  if (comm == NULL) return;
  c->comm = NULL;
  c->aborted = abort;
  if (!cdv_still_owned(c->dev, c->generation)) return;
  cdv_ncclResult_t (*fn)(cdv_ncclComm_t) = abort ? cdv_nccl.ncclCommAbort : cdv_nccl.ncclCommDestroy;
  const char *api = abort ? "ncclCommAbort" : "ncclCommDestroy";
  if (fn == NULL) {
    if (raise) nccl_missing(L, api);
    return;
  }
  void *saved = ctx_save();
  cdv_ncclResult_t r = fn(comm);
  ctx_restore(saved);
  if (r == cdv_ncclSuccess) return;
  if (raise) nccl_raise(L, c->dev, api, r, NULL, NULL);
  cdv_warn(L, "%s on %s: %s", api, c->dev->alias,
           cdv_nccl.ncclGetErrorString ? cdv_nccl.ncclGetErrorString(r) : result_name(r));
}

static int comm_gc(lua_State *L) {
  nccl_comm *c = cdv_test_magic(L, 1, sizeof *c, CDV_COMM_MAGIC);
  if (c != NULL) release(L, c, 0, 0); /* __gc never raises (NOTE [magic]) */
  return 0;
}

static int comm_close(lua_State *L) {
  release(L, check_any(L, 1), 0, 0);
  return 0;
}

/* comm:destroy(): ncclCommDestroy; a second destroy is an error, as a second a:free() (NOTE [self errors]) */
static int comm_destroy(lua_State *L) {
  release(L, check_comm(L, 1), 0, 1);
  return 0;
}

/* comm:abort(): ncclCommAbort, which also stops the work it has queued (a peer that will never come) */
static int comm_abort(lua_State *L) {
  release(L, check_comm(L, 1), 1, 1);
  return 0;
}

static int comm_tostring(lua_State *L) {
  nccl_comm *c = check_any(L, 1);
  if (c->comm == NULL)
    lua_pushstring(L, c->aborted ? "Comm(aborted)" : "Comm(destroyed)");
  else
    lua_pushfstring(L, "Comm(rank %d of %d on %s)", c->rank, c->size, c->dev->alias);
  return 1;
}

static int comm_index(lua_State *L) {
  check_any(L, 1);
  if (lua_type(L, 2) == LUA_TSTRING && cdv_push_method(L)) return 1; /* methods check the comm themselves */
  nccl_comm *c = check_comm(L, 1);
  const char *k = luaL_checkstring(L, 2);
  if (strcmp(k, "rank") == 0)
    lua_pushinteger(L, c->rank);
  else if (strcmp(k, "size") == 0)
    lua_pushinteger(L, c->size);
  else if (strcmp(k, "device") == 0)
    cdv_push_device(L, c->dev);
  else
    return luaL_error(L, "Comm has no field or method '%s'", k);
  return 1;
}

/* ---------------------------------------------------------------- argument checks */
/* An array of the communicator's device. */
static cdv_array *check_buffer(lua_State *L, int arg, const nccl_comm *c) {
  cdv_array *a = cdv_check_array(L, arg);
  cdv_device *d = a->block->dev;
  if (d == c->dev) return a;
  if (d->be->host_memory)
    luaL_argerror(L, arg,
                  lua_pushfstring(L, "array on %s: NCCL moves CUDA device memory (a:to(\"%s\") copies it there)",
                                  d->alias, c->dev->alias));
  luaL_argerror(L, arg, lua_pushfstring(L, "array on %s but the communicator is on %s", d->alias, c->dev->alias));
  return NULL;
}

/* NCCL's type for a dtype, or -1 (int16, uint16 and bool have none). */
static int nccl_type(cdv_dtype t) {
  switch (t) {
    case CDV_F16: return cdv_ncclFloat16;
    case CDV_F32: return cdv_ncclFloat32;
    case CDV_F64: return cdv_ncclFloat64;
    case CDV_I8: return cdv_ncclInt8;
    case CDV_U8: return cdv_ncclUint8;
    case CDV_I32: return cdv_ncclInt32;
    case CDV_U32: return cdv_ncclUint32;
    case CDV_I64: return cdv_ncclInt64;
    case CDV_U64: return cdv_ncclUint64;
    default: return -1;
  }
}

/* The type a reduction runs on; a dtype NCCL lacks is refused by name. */
static cdv_ncclDataType_t reduce_type(lua_State *L, int arg, const cdv_array *a) {
  int t = nccl_type(a->dtype);
  if (t < 0)
    luaL_argerror(L, arg,
                  lua_pushfstring(L, "NCCL cannot reduce %s: it has no such type (a:astype(\"%s\") converts)",
                                  cdv_dtypes[a->dtype].name, a->dtype == CDV_BOOL ? "uint8" : "int32"));
  return (cdv_ncclDataType_t)t;
}

/* The type and count a transfer moves: NCCL's own type, or the bytes of a dtype it lacks (the data is not read). */
static cdv_ncclDataType_t move_type(const cdv_array *a, size_t *count) {
  int t = nccl_type(a->dtype);
  *count = (size_t)a->size * (t < 0 ? cdv_dtypes[a->dtype].size : 1);
  return t < 0 ? cdv_ncclUint8 : (cdv_ncclDataType_t)t;
}

static void same_dtype(lua_State *L, int arg, const cdv_array *send, const cdv_array *recv) {
  if (send->dtype != recv->dtype)
    luaL_argerror(
        L, arg,
        lua_pushfstring(L, "recv is %s but send is %s", cdv_dtypes[recv->dtype].name, cdv_dtypes[send->dtype].name));
}

/* `what` (send or recv, at arg) must hold `want` elements: `why` says how that number comes. */
static void want_size(lua_State *L, int arg, const cdv_array *a, const char *what, int64_t want, const char *why) {
  if (a->size != want)
    luaL_argerror(
        L, arg,
        lua_pushfstring(L, "%s has %I elements but needs %I: %s", what, (lua_Integer)a->size, (lua_Integer)want, why));
}

/* send and recv may share memory only in the in-place form NCCL defines: recv's first byte `inplace` bytes
 * before send's (0: the same buffer; all_gather: send is recv's slice of this rank), or send's first byte
 * `-inplace` before recv's (reduce_scatter). */
static void check_overlap(lua_State *L, int arg, const cdv_array *send, const cdv_array *recv, ptrdiff_t inplace,
                          const char *form) {
  const char *s = send->data, *r = recv->data;
  size_t sn = (size_t)send->size * cdv_dtypes[send->dtype].size, rn = (size_t)recv->size * cdv_dtypes[recv->dtype].size;
  if (sn == 0 || rn == 0 || s + sn <= r || r + rn <= s) return;
  if (s - r == inplace) return;
  luaL_argerror(L, arg, lua_pushfstring(L, "send and recv overlap: in place, %s", form));
}

static cdv_ncclRedOp_t check_op(lua_State *L, int arg) {
  if (lua_type(L, arg) != LUA_TSTRING)
    luaL_argerror(L, arg,
                  lua_pushfstring(L, "reduction \"sum\", \"prod\", \"max\", \"min\" or \"avg\" expected, got %s",
                                  cdv_typename(L, arg)));
  const char *s = lua_tostring(L, arg);
  for (int i = 0; op_names[i] != NULL; i++)
    if (strcmp(s, op_names[i]) == 0) return op_values[i];
  luaL_argerror(L, arg,
                lua_pushfstring(L, "unknown reduction '%s' (\"sum\", \"prod\", \"max\", \"min\" or \"avg\")", s));
  return cdv_ncclSum;
}

/* A rank of the communicator (root or peer). */
static int check_rank(lua_State *L, int arg, const nccl_comm *c, const char *what) {
  int isint;
  lua_Integer v = lua_tointegerx(L, arg, &isint);
  if (!isint || lua_type(L, arg) != LUA_TNUMBER) /* not the string "0" */
    luaL_argerror(L, arg, lua_pushfstring(L, "%s rank (an integer) expected, got %s", what, cdv_typename(L, arg)));
  if (v < 0 || v >= c->size)
    luaL_argerror(L, arg, lua_pushfstring(L, "%s rank %I out of range (0 to %d)", what, v, c->size - 1));
  return (int)v;
}

/* The stream argument's handle (nil: the current stream of the communicator's device), the last argument
 * checked: the device's context is then made current (raising when the device is unusable). */
static void *stream_arg(lua_State *L, int arg, const nccl_comm *c) {
  void *h;
  if (lua_isnoneornil(L, arg))
    h = cdv_current_stream(L, c->dev)->handle;
  else {
    cdv_stream *s = cdv_check_stream(L, arg);
    if (s->dev != c->dev)
      luaL_argerror(L, arg,
                    lua_pushfstring(L, "stream is on %s but the communicator is on %s", s->dev->alias, c->dev->alias));
    h = s->handle;
  }
  cdv_device_use(L, c->dev);
  return h;
}

/* After a call was queued: the arrays' memory is freed after the stream's work (NOTE [array memory]); NCCL's
 * asynchronous error, if any, is raised; CUDA_LAUNCH_BLOCKING=1 waits for the work (not inside a group, whose
 * work starts only at its end). */
static void queued(lua_State *L, nccl_comm *c, void *stream, cdv_array *a, cdv_array *b) {
  cdv_block_used(a->block, c->dev, stream);
  if (b != NULL) cdv_block_used(b->block, c->dev, stream);
  cdv_ncclResult_t async = cdv_ncclSuccess;
  if (cdv_nccl.ncclCommGetAsyncError != NULL) {
    NCCL(L, c->dev, c->comm, ncclCommGetAsyncError, c->comm, &async);
    if (async != cdv_ncclSuccess && async != cdv_ncclInProgress)
      nccl_raise(L, c->dev, "ncclCommGetAsyncError", async, c->comm,
                 " (the communicator is unusable: comm:abort() releases it)");
  }
  if (group_depth == 0 && cdv_get_state(L)->launch_blocking)
    cdv_try(L, c->dev, cdv_wait_stream(L, c->dev, stream, &e_));
}

/* ---------------------------------------------------------------- collectives */
#define SAME_ARRAY "pass the same array as send and recv"

/* The communicator (self) and the send and recv arrays (arguments 2 and 3) of a collective. */
static nccl_comm *two_buffers(lua_State *L, cdv_array **s, cdv_array **r) {
  nccl_comm *c = check_comm(L, 1);
  *s = check_buffer(L, 2, c);
  *r = check_buffer(L, 3, c);
  same_dtype(L, 3, *s, *r);
  return c;
}

/* The call was queued: returns its result array (argument `result`). */
static int issued(lua_State *L, nccl_comm *c, void *stream, cdv_array *a, cdv_array *b, int result) {
  queued(L, c, stream, a, b);
  lua_settop(L, result);
  return 1;
}

/* comm:all_reduce(send, recv, op [, stream]) wraps ncclAllReduce; returns recv */
static int comm_all_reduce(lua_State *L) {
  cdv_array *s, *r;
  nccl_comm *c = two_buffers(L, &s, &r);
  cdv_ncclDataType_t t = reduce_type(L, 2, s);
  want_size(L, 3, r, "recv", s->size, "as many as send");
  cdv_ncclRedOp_t op = check_op(L, 4);
  check_overlap(L, 3, s, r, 0, SAME_ARRAY);
  void *stream = stream_arg(L, 5, c);
  NCCL(L, c->dev, c->comm, ncclAllReduce, s->data, r->data, (size_t)s->size, t, op, c->comm, stream);
  return issued(L, c, stream, s, r, 3);
}

/* comm:broadcast(send, recv, root [, stream]) wraps ncclBroadcast (send is read on the root only); returns recv */
static int comm_broadcast(lua_State *L) {
  cdv_array *s, *r;
  nccl_comm *c = two_buffers(L, &s, &r);
  want_size(L, 3, r, "recv", s->size, "as many as send");
  int root = check_rank(L, 4, c, "root");
  check_overlap(L, 3, s, r, 0, SAME_ARRAY);
  size_t count;
  cdv_ncclDataType_t t = move_type(s, &count);
  void *stream = stream_arg(L, 5, c);
  NCCL(L, c->dev, c->comm, ncclBroadcast, s->data, r->data, count, t, root, c->comm, stream);
  return issued(L, c, stream, s, r, 3);
}

/* comm:reduce(send, recv, op, root [, stream]) wraps ncclReduce (recv is written on the root only); returns recv */
static int comm_reduce(lua_State *L) {
  cdv_array *s, *r;
  nccl_comm *c = two_buffers(L, &s, &r);
  cdv_ncclDataType_t t = reduce_type(L, 2, s);
  want_size(L, 3, r, "recv", s->size, "as many as send");
  cdv_ncclRedOp_t op = check_op(L, 4);
  int root = check_rank(L, 5, c, "root");
  check_overlap(L, 3, s, r, 0, SAME_ARRAY);
  void *stream = stream_arg(L, 6, c);
  NCCL(L, c->dev, c->comm, ncclReduce, s->data, r->data, (size_t)s->size, t, op, root, c->comm, stream);
  return issued(L, c, stream, s, r, 3);
}

/* comm:all_gather(send, recv [, stream]) wraps ncclAllGather: recv holds size × send, rank i's at i × #send */
static int comm_all_gather(lua_State *L) {
  cdv_array *s, *r;
  nccl_comm *c = two_buffers(L, &s, &r);
  want_size(L, 3, r, "recv", (int64_t)c->size * s->size, "size × #send");
  check_overlap(L, 3, s, r, (ptrdiff_t)c->rank * (ptrdiff_t)(s->size * cdv_dtypes[s->dtype].size),
                "send must be recv's slice of this rank");
  size_t count;
  cdv_ncclDataType_t t = move_type(s, &count);
  void *stream = stream_arg(L, 4, c);
  NCCL(L, c->dev, c->comm, ncclAllGather, s->data, r->data, count, t, c->comm, stream);
  return issued(L, c, stream, s, r, 3);
}

/* comm:reduce_scatter(send, recv, op [, stream]) wraps ncclReduceScatter: send holds size × recv; rank i gets the
 * reduction of block i */
static int comm_reduce_scatter(lua_State *L) {
  cdv_array *s, *r;
  nccl_comm *c = two_buffers(L, &s, &r);
  cdv_ncclDataType_t t = reduce_type(L, 2, s);
  want_size(L, 2, s, "send", (int64_t)c->size * r->size, "size × #recv");
  cdv_ncclRedOp_t op = check_op(L, 4);
  check_overlap(L, 3, s, r, -(ptrdiff_t)c->rank * (ptrdiff_t)(r->size * cdv_dtypes[r->dtype].size),
                "recv must be send's slice of this rank");
  void *stream = stream_arg(L, 5, c);
  NCCL(L, c->dev, c->comm, ncclReduceScatter, s->data, r->data, (size_t)r->size, t, op, c->comm, stream);
  return issued(L, c, stream, s, r, 3);
}

/* comm:send(a, peer [, stream]) / comm:recv(a, peer [, stream]) wrap ncclSend / ncclRecv; return a */
static int point_to_point(lua_State *L, int is_send) {
  nccl_comm *c = check_comm(L, 1);
  cdv_array *a = check_buffer(L, 2, c);
  int peer = check_rank(L, 3, c, "peer");
  size_t count;
  cdv_ncclDataType_t t = move_type(a, &count);
  void *stream = stream_arg(L, 4, c);
  if (is_send)
    NCCL(L, c->dev, c->comm, ncclSend, a->data, count, t, peer, c->comm, stream);
  else
    NCCL(L, c->dev, c->comm, ncclRecv, a->data, count, t, peer, c->comm, stream);
  return issued(L, c, stream, a, NULL, 2);
}

static int comm_send(lua_State *L) { return point_to_point(L, 1); }
static int comm_recv(lua_State *L) { return point_to_point(L, 0); }

/* ---------------------------------------------------------------- cd.nccl */
/* cd.nccl.is_available() -> true, or false and why (every file tried) */
static int l_is_available(lua_State *L) {
  if (cdv_get_state(L)->sandbox) {
    lua_pushboolean(L, 0);
    lua_pushliteral(L, "cd.nccl is not available in this sandbox");
    return 2;
  }
  if (cdv_nccl_load() != 0) {
    lua_pushboolean(L, 0);
    lua_pushstring(L, cdv_nccl_why());
    return 2;
  }
  lua_pushboolean(L, 1);
  return 1;
}

/* cd.nccl.version() -> "2.28.9", the library's path (ncclGetVersion) */
static int l_version(lua_State *L) {
  int v = 0;
  nccl_ready(L);
  NCCL(L, NULL, NULL, ncclGetVersion, &v);
  if (v >= 10000)
    lua_pushfstring(L, "%d.%d.%d", v / 10000, v / 100 % 100, v % 100); /* NCCL_VERSION past 2.8 */
  else
    lua_pushfstring(L, "%d.%d.%d", v / 1000, v / 100 % 10, v % 100);
  lua_pushstring(L, cdv_nccl_path());
  return 2;
}

/* cd.nccl.unique_id() -> the 128 bytes of a new ncclUniqueId, as a string (ncclGetUniqueId) */
static int l_unique_id(lua_State *L) {
  cdv_ncclUniqueId id;
  nccl_ready(L);
  memset(&id, 0, sizeof id);
  NCCL(L, NULL, NULL, ncclGetUniqueId, &id);
  lua_pushlstring(L, id.internal, sizeof id.internal);
  return 1;
}

/* A CUDA device for a communicator: `d` from argument arg (given says whether it was written). */
static void want_cuda(lua_State *L, int arg, const cdv_device *d, int given, const char *what) {
  if (!d->be->host_memory) return; /* NCCL moves device memory: NOTE [backend properties] */
  luaL_argerror(L, arg,
                given ? lua_pushfstring(L, "NCCL needs a CUDA device, got cpu%s", what)
                      : "NCCL needs a CUDA device; the default device is cpu");
}

/* cd.nccl.comm(nranks, id, rank [, device]) wraps ncclCommInitRank: this process's rank of nranks, all made with
 * the same id; it returns once every rank has joined */
static int l_comm(lua_State *L) {
  lua_Integer nranks = luaL_checkinteger(L, 1);
  if (nranks < 1 || nranks > INT_MAX)
    luaL_argerror(L, 1, lua_pushfstring(L, "number of ranks must be at least 1, got %I", nranks));
  size_t len;
  const char *id = luaL_checklstring(L, 2, &len);
  if (len != CDV_NCCL_UNIQUE_ID_BYTES)
    luaL_argerror(L, 2,
                  lua_pushfstring(L, "unique id of %d bytes expected (cd.nccl.unique_id()), got %d bytes",
                                  CDV_NCCL_UNIQUE_ID_BYTES, (int)len));
  lua_Integer rank = luaL_checkinteger(L, 3);
  if (rank < 0 || rank >= nranks)
    luaL_argerror(L, 3, lua_pushfstring(L, "rank %I out of range (0 to %I)", rank, nranks - 1));
  cdv_device *d = cdv_opt_device(L, 4);
  want_cuda(L, 4, d, !lua_isnoneornil(L, 4), "");
  nccl_ready(L);
  cdv_device_use(L, d); /* its context current: NCCL takes the current device */
  nccl_comm *c = new_comm(L, d);
  cdv_ncclUniqueId uid;
  memcpy(uid.internal, id, sizeof uid.internal);
  cdv_ncclComm_t comm = NULL;
  if (cdv_nccl.ncclCommInitRank == NULL) nccl_missing(L, "ncclCommInitRank");
  void *saved = ctx_save();
  cdv_ncclResult_t r = cdv_nccl.ncclCommInitRank(&comm, (int)nranks, uid, (int)rank);
  ctx_restore(saved);
  if (r != cdv_ncclSuccess) nccl_raise(L, d, "ncclCommInitRank", r, NULL, NULL);
  opened(L, c, comm, (int)rank, (int)nranks);
  return 1;
}

/* cd.nccl.comms(devices) wraps ncclCommInitAll: one communicator per device of the list, rank i on devices[i],
 * all of this process (NOTE [nccl groups] says how to call them) */
static int l_comms(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_Integer n = luaL_len(L, 1);
  if (n < 1) luaL_argerror(L, 1, "list of CUDA devices expected, got an empty table");
  if (n > CDV_MAXDEV) luaL_argerror(L, 1, lua_pushfstring(L, "at most %d devices, got %I", CDV_MAXDEV, n));
  cdv_device *devs[CDV_MAXDEV];
  int ordinals[CDV_MAXDEV];
  for (int i = 0; i < (int)n; i++) {
    lua_geti(L, 1, i + 1);
    const char *why = cdv_device_problem(L, -1, &devs[i]);
    if (why != NULL) luaL_argerror(L, 1, lua_pushfstring(L, "element %d: %s", i + 1, why));
    lua_pop(L, 1);
    if (devs[i]->be->host_memory)
      luaL_argerror(L, 1, lua_pushfstring(L, "element %d: NCCL needs CUDA devices, got cpu", i + 1));
    if (!devs[i]->is_primary)
      luaL_argerror(L, 1,
                    lua_pushfstring(L,
                                    "element %d: %s is a mapped context; ncclCommInitAll takes devices by "
                                    "ordinal (use cd.nccl.comm)",
                                    i + 1, devs[i]->alias));
    for (int j = 0; j < i; j++)
      if (devs[j] == devs[i])
        luaL_argerror(L, 1,
                      lua_pushfstring(L, "element %d repeats %s (one communicator per device)", i + 1, devs[i]->alias));
    ordinals[i] = devs[i]->ordinal;
  }
  nccl_ready(L);
  for (int i = 0; i < (int)n; i++) cdv_device_use(L, devs[i]);
  lua_createtable(L, (int)n, 0);
  nccl_comm *made[CDV_MAXDEV];
  for (int i = 0; i < (int)n; i++) {
    made[i] = new_comm(L, devs[i]);
    lua_rawseti(L, -2, i + 1);
  }
  cdv_ncclComm_t comms[CDV_MAXDEV];
  if (cdv_nccl.ncclCommInitAll == NULL) nccl_missing(L, "ncclCommInitAll");
  void *saved = ctx_save();
  cdv_ncclResult_t r = cdv_nccl.ncclCommInitAll(comms, (int)n, ordinals);
  ctx_restore(saved);
  if (r != cdv_ncclSuccess) nccl_raise(L, NULL, "ncclCommInitAll", r, NULL, NULL);
  for (int i = 0; i < (int)n; i++) made[i]->comm = comms[i]; /* each released with the table, whatever follows */
  for (int i = 0; i < (int)n; i++) opened(L, made[i], comms[i], i, (int)n);
  return 1;
}

/* The group's end as a to-be-closed value, so that it runs when fn raises (see NOTE [nccl groups]) */
#define GROUP_MAGIC 0x6364764e477270ULL /* "cdvNGrp" */
typedef struct group_scope {
  uint64_t magic;
  int open;
} group_scope;

/* Ends the group once; *r gets ncclGroupEnd's result. */
static int group_end(group_scope *g, cdv_ncclResult_t *r) {
  if (!g->open) return 0;
  g->open = 0;
  group_depth--;
  void *saved = ctx_save();
  *r = cdv_nccl.ncclGroupEnd();
  ctx_restore(saved);
  return 1;
}

static int group_close(lua_State *L) { /* fn raised: its error goes on, the group's end only warns */
  group_scope *g = cdv_test_magic(L, 1, sizeof *g, GROUP_MAGIC);
  cdv_ncclResult_t r = cdv_ncclSuccess;
  if (g != NULL && group_end(g, &r) && r != cdv_ncclSuccess)
    cdv_warn(L, "ncclGroupEnd after an error in the group: %s", cdv_nccl.ncclGetErrorString(r));
  return 0;
}

/* cd.nccl.group(fn, ...) calls fn(...) between ncclGroupStart and ncclGroupEnd; returns fn's results */
static int l_group(lua_State *L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  int nargs = lua_gettop(L) - 1;
  nccl_ready(L);
  group_scope *g = lua_newuserdatauv(L, sizeof *g, 0);
  g->magic = GROUP_MAGIC;
  g->open = 0; /* closed until the group started */
  if (luaL_newmetatable(L, "cudadev.NcclGroup")) {
    lua_pushcfunction(L, group_close);
    lua_setfield(L, -2, "__close");
    lua_pushcfunction(L, group_close);
    lua_setfield(L, -2, "__gc");
  }
  lua_setmetatable(L, -2);
  lua_insert(L, 1); /* the scope at 1, fn at 2 */
  lua_toclose(L, 1);
  NCCL(L, NULL, NULL, ncclGroupStart);
  g->open = 1;
  group_depth++;
  int n = cdv_call_scoped(L, nargs); /* NOTE [scoped calls] */
  cdv_ncclResult_t r = cdv_ncclSuccess;
  if (group_end(g, &r) && r != cdv_ncclSuccess) nccl_raise(L, NULL, "ncclGroupEnd", r, NULL, NULL);
  return n;
}

static const luaL_Reg methods[] = {{"all_reduce", comm_all_reduce},
                                   {"broadcast", comm_broadcast},
                                   {"reduce", comm_reduce},
                                   {"all_gather", comm_all_gather},
                                   {"reduce_scatter", comm_reduce_scatter},
                                   {"send", comm_send},
                                   {"recv", comm_recv},
                                   {"abort", comm_abort},
                                   {"destroy", comm_destroy},
                                   {NULL, NULL}};

static const luaL_Reg functions[] = {{"is_available", l_is_available},
                                     {"version", l_version},
                                     {"unique_id", l_unique_id},
                                     {"comm", l_comm},
                                     {"comms", l_comms},
                                     {"group", l_group},
                                     {NULL, NULL}};

int cdv_nccl_open(lua_State *L) {
  static const luaL_Reg meta[] = {
      {"__tostring", comm_tostring}, {"__gc", comm_gc}, {"__close", comm_close}, {NULL, NULL}};
  cdv_new_class(L, CDV_COMM, meta, methods, comm_index); /* NOTE [class registration] */
  lua_pop(L, 1);
  luaL_newlib(L, functions);
  lua_setfield(L, -2, "nccl");
  return 0;
}
