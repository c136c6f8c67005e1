/*
 * graph.c: cudadev.Graph, CUDA graphs made by stream capture: cd.capture(stream, fn, ...) runs fn with
 * the stream capturing (and current, so launches and copies that name no stream land in it), then
 * instantiates what was captured; g:launch([stream]) replays it.
 *
 * Graphs are a CUDA feature: the backend's capture and graph operations (NOTE [optional operations]), which
 * the cpu device leaves out. The arrays a graph's kernels use must outlive the graph, as with PyTorch's CUDA
 * graphs.
 */
#include <string.h>

#include "cdv.h"

typedef struct graph {
  uint64_t magic; /* CDV_GRAPH_MAGIC (NOTE [magic]) */
  void *exec; /* the backend's executable graph (CUgraphExec) */
  cdv_device *dev;
  unsigned generation;
  int nodes;
} graph;

static graph *check_any(lua_State *L, int arg) {
  return cdv_check_udata(L, arg, CDV_GRAPH, CDV_GRAPH_MAGIC, sizeof(graph));
}

static graph *check_graph(lua_State *L, int arg) {
  graph *g = check_any(L, arg);
  if (g->exec == NULL) cdv_self_error(L, arg, "attempt to use a released graph"); /* NOTE [self errors] */
  if (g->generation != g->dev->generation) cdv_self_error(L, arg, "stale Graph: device was reset");
  return g;
}

/* cd.capture(stream, fn, ...) -> Graph (the backend's capture_begin and capture_end: cuStreamBeginCapture,
 * cuStreamEndCapture, cuGraphInstantiate) */
static int l_capture(lua_State *L) {
  cdv_stream *s = cdv_check_stream(L, 1);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  cdv_device *d = s->dev;
  cdv_err e;
  if (d->be->capture_begin == NULL)
    return luaL_argerror(L, 1, "graphs are a CUDA feature: capture a stream of a CUDA device");
  if (s->handle == NULL) return luaL_argerror(L, 1, "the default stream cannot be captured: use cd.stream()");
  graph *g = lua_newuserdatauv(L, sizeof *g, 0);
  memset(g, 0, sizeof *g);
  g->magic = CDV_GRAPH_MAGIC;
  luaL_setmetatable(L, CDV_GRAPH);
  cdv_track_late(L, -1); /* NOTE [objects made in finalizers] */
  lua_insert(L, 1); /* graph, stream, fn, args... */
  cdv_device_use(L, d);
  if (d->be->capture_begin(d, s->handle, &e)) return cdv_raise(L, d, &e);
  /* fn runs with the stream current; its error is rethrown after the capture is ended */
  lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  lua_getfield(L, -1, "cudadev");
  lua_getfield(L, -1, "with_stream");
  lua_replace(L, -3);
  lua_pop(L, 1);
  lua_insert(L, 2); /* graph, with_stream, stream, fn, args... */
  int status = lua_pcall(L, lua_gettop(L) - 2, 0, 0);
  void *exec = NULL;
  int nodes = 0;
  int rc = d->be->capture_end(d, s->handle, status == LUA_OK, &exec, &nodes, &e);
  if (status != LUA_OK) return lua_error(L);
  if (rc != 0) return cdv_raise(L, d, &e);
  g->exec = exec;
  g->dev = d;
  g->generation = d->generation;
  g->nodes = nodes;
  cdv_live_add(CDV_LIVE_GRAPH, 1);
  lua_settop(L, 1);
  return 1;
}

/* g:launch([stream]): the backend's graph_launch, cuGraphLaunch (default: the current stream of the graph's
 * device) */
static int graph_launch(lua_State *L) {
  graph *g = check_graph(L, 1);
  cdv_stream *s = lua_isnoneornil(L, 2) ? NULL : cdv_check_stream(L, 2);
  void *h = cdv_stream_for(L, g->dev, s);
  cdv_err e;
  cdv_device_use(L, g->dev);
  if (g->dev->be->graph_launch(g->dev, g->exec, h, &e)) return cdv_raise(L, g->dev, &e);
  if (cdv_get_state(L)->launch_blocking && g->dev->be->stream_synchronize(g->dev, h, &e) != 0)
    return cdv_raise(L, g->dev, &e);
  lua_settop(L, 1);
  return 1;
}

static void release(lua_State *L, graph *g) {
  if (g->exec != NULL && cdv_still_owned(g->dev, g->generation)) {
    cdv_err e;
    if (g->dev->be->graph_destroy(g->dev, g->exec, &e)) cdv_warn_release(L, "destroying a graph", g->dev, &e);
  }
  if (g->exec != NULL) cdv_live_add(CDV_LIVE_GRAPH, -1);
  g->exec = NULL;
}

static int graph_release(lua_State *L) {
  release(L, check_any(L, 1));
  return 0;
}

/* g:free(): a second free is an error, as a second a:free() (NOTE [self errors]); __close is quiet */
static int graph_free(lua_State *L) {
  release(L, check_graph(L, 1));
  return 0;
}

static int graph_gc(lua_State *L) {
  graph *g = cdv_test_magic(L, 1, sizeof *g, CDV_GRAPH_MAGIC);
  if (g != NULL) release(L, g); /* __gc never raises (NOTE [magic]) */
  return 0;
}

static int graph_tostring(lua_State *L) {
  graph *g = check_any(L, 1);
  if (g->exec == NULL)
    lua_pushliteral(L, "Graph(released)");
  else
    lua_pushfstring(L, "Graph(%s, %d nodes)", g->dev->alias, g->nodes);
  return 1;
}

static int graph_index(lua_State *L) {
  check_any(L, 1);
  const char *k = luaL_checkstring(L, 2);
  if (cdv_push_method(L)) return 1; /* g:launch, g:free: the methods check the graph themselves */
  graph *g = check_graph(L, 1);
  if (strcmp(k, "device") == 0)
    cdv_push_device(L, g->dev);
  else if (strcmp(k, "num_nodes") == 0)
    lua_pushinteger(L, g->nodes);
  else
    return luaL_error(L, "Graph has no field or method '%s'", k);
  return 1;
}

int cdv_graph_open(lua_State *L) {
  static const luaL_Reg meta[] = {
      {"__gc", graph_gc}, {"__close", graph_release}, {"__tostring", graph_tostring}, {NULL, NULL}};
  static const luaL_Reg methods[] = {{"launch", graph_launch}, {"free", graph_free}, {NULL, NULL}};
  cdv_new_class(L, CDV_GRAPH, meta, methods, graph_index); /* NOTE [class registration] */
  lua_pop(L, 1);
  lua_pushcfunction(L, l_capture);
  lua_setfield(L, -2, "capture");
  return 0;
}
