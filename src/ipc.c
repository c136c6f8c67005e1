/*
 * ipc.c: device memory and events shared between processes of one machine: a:ipc_handle(), cd.open_ipc,
 * e:ipc_handle(), cd.open_ipc_event, and the {ipc = true} arrays that can be shared.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cdv.h"

/* NOTE [ipc]: CUDA's legacy IPC handles (cuIpcGetMemHandle / cuIpcOpenMemHandle, cuIpcGetEventHandle /
 * cuIpcOpenEventHandle) need nothing but the 64 bytes of the handle in the other process: any channel that carries
 * a string will do (an argument, a pipe, a file). They name a whole allocation made by cuMemAlloc, not memory from
 * a stream-ordered pool, a granule segment of cudadev's (NOTE [granules]) nor a block cudadev keeps for reuse (NOTE
 * [block cache]); a pool can be exported too, but its importer needs the pool's file descriptor, which only a Unix
 * socket passes between processes. So an array
 * that another process may open is asked for at creation, {ipc = true}: its memory is one cuMemAlloc of its own,
 * freed with cuMemFree when the array (and its views) die, never cached. a:ipc_handle() works on it and its views;
 * cd.open_ipc maps the allocation (cuIpcOpenMemHandle) into an Array that keeps the mapping until it dies
 * (cuIpcCloseMemHandle from its release). Events made with cd.event({ipc = true}) carry CU_EVENT_INTERPROCESS (and
 * no timing, which the driver refuses for them). The cpu device shares nothing: its operations are NULL (NOTE
 * [optional operations]) and each use says so. A sandbox has no IPC (see NOTE [state limits]; the memory would escape
 * its quota and the handle its process).
 *
 * A handle is text, so that it passes through a command line or an environment variable unchanged:
 *   cudadev-ipc:1:array:<pid>:<device uuid>:<dtype>:<shape, dims joined by ','>:<byte offset>:<128 hex digits>
 *   cudadev-ipc:1:event:<pid>:<device uuid>:<128 hex digits>
 * Every field is checked when it is opened, before the driver sees it; the pid tells a handle of this very process
 * (which CUDA cannot open) and one from a process that has exited (whose memory went with it) from the others; the
 * uuid finds the device, whatever its ordinal is in this process; the size the driver reports for the mapping must
 * hold the shape at its offset. */
#define IPC_PREFIX "cudadev-ipc"
#define IPC_VERSION "1"

typedef struct ipc_mem {
  cdv_device *d;
  unsigned generation;
  void *base; /* the allocation, or its mapping here */
  int opened; /* 0: ours ({ipc = true}); 1: another process's, mapped */
} ipc_mem;

/* the Array's release (see NOTE [array memory]; the work queued on it is done): cuMemFree or cuIpcCloseMemHandle, unless
 * the context that had it is gone; never raises */
static void ipc_release(void *ud, void *ptr) {
  ipc_mem *m = ud;
  (void)ptr;
  cdv_err e;
  if (cdv_still_owned(m->d, m->generation) && m->d->be->activate(m->d, &e) == 0) {
    if (m->opened)
      m->d->be->ipc_mem_close(m->d, m->base, &e);
    else
      m->d->be->ipc_free(m->d, m->base, &e);
  }
  free(m);
}

static void no_sandbox(lua_State *L) {
  if (cdv_get_state(L)->sandbox) luaL_error(L, "ipc is not available in this sandbox");
}

static const char *cannot_share(lua_State *L, cdv_device *d, const char *what) {
  return lua_pushfstring(L, "%s cannot share %s between processes: use a cuda device", d->alias, what);
}

/* An Array of d over nothing yet (borrowed NULL: it frees nothing), so that a failure to make it leaves no memory
 * behind; adopt then gives it the memory, which its release frees (NOTE [array memory]). */
static cdv_array *push_closed(lua_State *L, cdv_device *d, cdv_dtype t, int ndim, const int64_t *shape) {
  return cdv_push_host_array(L, d, t, ndim, shape, NULL, NULL, NULL);
}

static void adopt(cdv_array *a, ipc_mem *m, size_t offset) {
  a->block->ptr = (char *)m->base + offset;
  a->data = a->block->ptr;
  a->block->release = ipc_release;
  a->block->release_ud = m;
  a->block->borrowed = 0;
}

/* {ipc = true} of cd.empty / zeros / ones / full (array.c): one cuMemAlloc of its own (NOTE [ipc]) */
void cdv_ipc_push_array(lua_State *L, cdv_device *d, cdv_dtype t, int ndim, const int64_t *shape, const char *fname) {
  no_sandbox(L);
  if (d->be->ipc_alloc == NULL) cdv_opt_error(L, "ipc", fname, cannot_share(L, d, "memory"));
  cdv_device_use(L, d);
  cdv_array *a = push_closed(L, d, t, ndim, shape);
  ipc_mem *m = calloc(1, sizeof *m);
  if (m == NULL) luaL_error(L, "not enough memory");
  *m = (ipc_mem){d, d->generation, NULL, 0};
  cdv_err e;
  if (d->be->ipc_alloc(d, a->block->bytes, &m->base, &e) != 0) {
    free(m);
    cdv_raise(L, d, &e);
  }
  adopt(a, m, 0);
}

/* ------------------------------------------------------------ handles as text */

static void add_hex(luaL_Buffer *b, const unsigned char h[64]) {
  static const char digits[] = "0123456789abcdef";
  for (int i = 0; i < 64; i++) {
    luaL_addchar(b, digits[h[i] >> 4]);
    luaL_addchar(b, digits[h[i] & 15]);
  }
}

static void add_head(lua_State *L, luaL_Buffer *b, const char *kind, cdv_device *d) {
  luaL_buffinit(L, b);
  lua_pushfstring(L, IPC_PREFIX ":" IPC_VERSION ":%s:%d:%s:", kind, (int)getpid(), d->uuid);
  luaL_addvalue(b);
}

/* a:ipc_handle() -> the handle string of an {ipc = true} array or a view of one (NOTE [ipc]) */
int cdv_array_ipc_handle(lua_State *L) {
  cdv_array *a = cdv_check_array(L, 1);
  cdv_device *d = a->block->dev;
  no_sandbox(L);
  if (d->be->ipc_mem_get == NULL) return cdv_self_error(L, 1, cannot_share(L, d, "memory"));
  if (a->block->release != ipc_release)
    return cdv_self_error(L, 1,
                          "the array was not made with ipc = true (memory from the pool or the block cache "
                          "cannot be shared): make it with {ipc = true}");
  ipc_mem *m = a->block->release_ud;
  if (m->opened)
    return cdv_self_error(L, 1, "the array was opened from an ipc handle: the process that made it shares it");
  unsigned char h[64];
  cdv_device_use(L, d);
  cdv_try(L, d, d->be->ipc_mem_get(d, m->base, h, &e_));
  luaL_Buffer b;
  add_head(L, &b, "array", d);
  lua_pushfstring(L, "%s:", cdv_dtypes[a->dtype].name);
  luaL_addvalue(&b);
  for (int i = 0; i < a->ndim; i++) {
    lua_pushfstring(L, i ? ",%I" : "%I", (lua_Integer)a->shape[i]);
    luaL_addvalue(&b);
  }
  lua_pushfstring(L, ":%I:", (lua_Integer)(a->data - (char *)m->base));
  luaL_addvalue(&b);
  add_hex(&b, h);
  luaL_pushresult(&b);
  return 1;
}

/* e:ipc_handle() -> the handle string of an event made with {ipc = true} */
int cdv_event_ipc_handle(lua_State *L) {
  cdv_event *ev = cdv_check_event(L, 1);
  cdv_device *d = ev->dev;
  no_sandbox(L);
  if (d->be->ipc_event_get == NULL) return cdv_self_error(L, 1, cannot_share(L, d, "events"));
  if (ev->ipc == 2)
    return cdv_self_error(L, 1, "the event was opened from an ipc handle: the process that made it shares it");
  if (ev->ipc != 1)
    return cdv_self_error(L, 1, "the event was not made with ipc = true: make it with cd.event({ipc = true})");
  unsigned char h[64];
  cdv_device_use(L, d);
  cdv_try(L, d, d->be->ipc_event_get(d, ev->handle, h, &e_));
  luaL_Buffer b;
  add_head(L, &b, "event", d);
  add_hex(&b, h);
  luaL_pushresult(&b);
  return 1;
}

/* ------------------------------------------------------------ parsing and opening */

#define MAXFIELDS 10

typedef struct parsed {
  int nf;
  const char *f[MAXFIELDS];
  size_t len[MAXFIELDS];
  long pid;
  unsigned char handle[64];
} parsed;

static int bad_handle(lua_State *L, const char *why) { return luaL_argerror(L, 1, why); }

static int field_is(const parsed *p, int i, const char *s) {
  return p->len[i] == strlen(s) && memcmp(p->f[i], s, p->len[i]) == 0;
}

/* a decimal integer of at most 18 digits filling the field, else -1 */
static int64_t field_int(const parsed *p, int i) {
  if (p->len[i] == 0 || p->len[i] > 18) return -1;
  int64_t v = 0;
  for (size_t k = 0; k < p->len[i]; k++) {
    if (p->f[i][k] < '0' || p->f[i][k] > '9') return -1;
    v = v * 10 + (p->f[i][k] - '0');
  }
  return v;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Splits and checks the fields every handle has (prefix, version, kind, pid, uuid, the hex digits last); the caller
 * checks the rest. `kind` is the one expected, `other` the function that opens the other kind. */
static void parse(lua_State *L, parsed *p, const char *kind, int nfields, const char *other) {
  size_t n;
  const char *s = luaL_checklstring(L, 1, &n);
  memset(p, 0, sizeof *p);
  if (n < sizeof IPC_PREFIX || memcmp(s, IPC_PREFIX ":", sizeof IPC_PREFIX) != 0)
    bad_handle(L, "not a cudadev ipc handle (one starts with '" IPC_PREFIX ":')");
  size_t start = 0;
  for (size_t i = 0; i <= n && p->nf <= MAXFIELDS; i++)
    if (i == n || s[i] == ':') {
      if (p->nf == MAXFIELDS) bad_handle(L, "malformed ipc handle (too many fields)");
      p->f[p->nf] = s + start;
      p->len[p->nf++] = i - start;
      start = i + 1;
    }
  if (p->nf > 2 && !field_is(p, 1, IPC_VERSION))
    bad_handle(L, lua_pushfstring(L, "ipc handle of version '%s', this cudadev reads version " IPC_VERSION,
                                  lua_pushlstring(L, p->f[1], p->len[1] > 16 ? 16 : p->len[1])));
  if (p->nf > 3 && !field_is(p, 2, kind)) {
    if (field_is(p, 2, "array") || field_is(p, 2, "event"))
      bad_handle(L, lua_pushfstring(L, "the handle is an %s's: open it with %s",
                                    field_is(p, 2, "array") ? "array" : "event", other));
    bad_handle(L, "malformed ipc handle (unknown kind)");
  }
  if (p->nf > nfields || (p->nf == nfields && p->len[p->nf - 1] > 128))
    bad_handle(L, "malformed ipc handle (too long)");
  if (p->nf < nfields || p->len[p->nf - 1] < 128) bad_handle(L, "truncated ipc handle");
  const char *hex = p->f[p->nf - 1];
  for (int i = 0; i < 64; i++) {
    int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) bad_handle(L, "malformed ipc handle (the handle's bytes are not hexadecimal)");
    p->handle[i] = (unsigned char)(hi << 4 | lo);
  }
  int64_t pid = field_int(p, 3);
  if (pid <= 0 || pid > 0x7fffffff) bad_handle(L, "malformed ipc handle (bad process id)");
  p->pid = (long)pid;
  if (p->len[4] < 4 || p->len[4] >= sizeof((cdv_device *)0)->uuid || memcmp(p->f[4], "GPU-", 4) != 0)
    bad_handle(L, "malformed ipc handle (bad device uuid)");
}

/* The device to open on: {device = } when given (a kind that cannot open the handle refused: NOTE [optional
 * operations]), else the CUDA device whose uuid the handle names; the process checks first (NOTE [ipc]). */
static cdv_device *open_device(lua_State *L, const parsed *p, const char *fname, int events) {
  static const char *const opts[] = {"device", NULL};
  cdv_check_options(L, 2, opts, fname);
  cdv_device *d = lua_isnoneornil(L, 2) ? NULL : cdv_opt_device_field(L, 2, fname);
  if (d != NULL && (events ? d->be->ipc_event_open == NULL : d->be->ipc_mem_open == NULL))
    cdv_opt_error(L, "device", fname, cannot_share(L, d, events ? "events" : "memory"));
  no_sandbox(L);
  if (p->pid == (long)getpid())
    luaL_argerror(L, 1,
                  "the handle was made by this process, and CUDA opens only another process's: use the "
                  "original");
  if (kill((pid_t)p->pid, 0) != 0 && errno == ESRCH)
    luaL_argerror(L, 1,
                  lua_pushfstring(L,
                                  "the handle comes from process %d, which has exited (what it shared "
                                  "went with it)",
                                  (int)p->pid));
  for (int i = 0; i < cdv_device_count_all() && d == NULL; i++) {
    cdv_device *c = cdv_device_at(i);
    if (c->is_primary && strlen(c->uuid) == p->len[4] && memcmp(c->uuid, p->f[4], p->len[4]) == 0) d = c;
  }
  if (d == NULL)
    luaL_error(L,
               "the ipc handle's device %s is not a device of this process (see CUDA_VISIBLE_DEVICES): pass "
               "{device = ...}",
               lua_pushlstring(L, p->f[4], p->len[4]));
  cdv_device_use(L, d);
  return d;
}

/* the dims of the shape field (joined by ','; empty for a 0-d array) into shape; returns ndim; *bytes the size */
static int parse_shape(lua_State *L, const parsed *p, cdv_dtype t, int64_t *shape, uint64_t *bytes) {
  int ndim = 0;
  *bytes = cdv_dtypes[t].size;
  for (size_t k = 0, start = 0; p->len[6] > 0 && k <= p->len[6]; k++)
    if (k == p->len[6] || p->f[6][k] == ',') {
      parsed one = {.nf = 1, .f = {p->f[6] + start}, .len = {k - start}};
      int64_t v = field_int(&one, 0);
      if (v < 0 || ndim == CDV_MAXDIM || (v != 0 && *bytes > ((uint64_t)1 << 48) / (uint64_t)v))
        bad_handle(L, "malformed ipc handle (bad shape)");
      shape[ndim++] = v;
      *bytes *= (uint64_t)v;
      start = k + 1;
    }
  return ndim;
}

/* cd.open_ipc(handle [, {device = }]) -> an Array over another process's {ipc = true} array (NOTE [ipc]) */
static int l_open_ipc(lua_State *L) {
  parsed p;
  parse(L, &p, "array", 9, "cd.open_ipc_event");
  int t = -1;
  for (int i = 0; i < CDV_NDTYPES && t < 0; i++)
    if (field_is(&p, 5, cdv_dtypes[i].name)) t = i;
  if (t < 0) bad_handle(L, "malformed ipc handle (unknown dtype)");
  int64_t shape[CDV_MAXDIM];
  uint64_t bytes;
  int ndim = parse_shape(L, &p, (cdv_dtype)t, shape, &bytes);
  int64_t offset = field_int(&p, 7);
  if (offset < 0) bad_handle(L, "malformed ipc handle (bad offset)");
  cdv_device *d = open_device(L, &p, "open_ipc", 0);
  cdv_array *a = push_closed(L, d, (cdv_dtype)t, ndim, shape);
  ipc_mem *m = calloc(1, sizeof *m);
  if (m == NULL) luaL_error(L, "not enough memory");
  *m = (ipc_mem){d, d->generation, NULL, 1};
  size_t mapped = 0;
  cdv_err e;
  if (d->be->ipc_mem_open(d, p.handle, &m->base, &mapped, &e) != 0) {
    free(m);
    cdv_raise(L, d, &e);
  }
  adopt(a, m, 0); /* from here the Array unmaps it when it dies */
  if ((uint64_t)offset > mapped || bytes > mapped - (uint64_t)offset)
    luaL_error(L, "the ipc handle describes %I bytes at offset %I, but the shared allocation holds %I bytes",
               (lua_Integer)bytes, (lua_Integer)offset, (lua_Integer)mapped);
  adopt(a, m, (size_t)offset);
  return 1;
}

/* cd.open_ipc_event(handle [, {device = }]) -> an Event of another process's {ipc = true} event */
static int l_open_ipc_event(lua_State *L) {
  parsed p;
  parse(L, &p, "event", 6, "cd.open_ipc");
  cdv_device *d = open_device(L, &p, "open_ipc_event", 1);
  cdv_event *ev = cdv_new_event(L);
  cdv_try(L, d, d->be->ipc_event_open(d, p.handle, &ev->handle, &e_));
  ev->dev = d;
  ev->generation = d->generation;
  ev->ipc = 2;
  cdv_live_add(CDV_LIVE_EVENT, 1);
  return 1;
}

int cdv_ipc_open(lua_State *L) {
  lua_pushcfunction(L, l_open_ipc);
  lua_setfield(L, -2, "open_ipc");
  lua_pushcfunction(L, l_open_ipc_event);
  lua_setfield(L, -2, "open_ipc_event");
  return 0;
}
