#!/usr/bin/env lua5.4
-- spec/fuzz.lua: a Lua-level fuzzer for cudadev's API (issue #7).
--
-- Random calls of every public function, method, field and metamethod (cd.*, Array, Stream, Event, Device,
-- Module, Kernel and Graph values) with arguments drawn from a pool: numbers (NaN, infinities, huge,
-- negative, integers at the edges), strings ("" and garbage), tables (nested, shape-like, option tables with
-- bad keys), booleans, nil, functions, and live, freed, destroyed and stale objects of every kind (arrays of
-- every dtype and shape, 0-size and 0-d ones and views among them, streams, events, devices, modules,
-- kernels compiled once at the start on the cpu device). Issue #14 adds reads of an Array that pending finalizers
-- free meanwhile, with_stream / with_device in coroutines that fail or yield (the resumer's settings must be
-- unchanged after), and kernels whose parameter lists are written with macros. Every call runs inside pcall. The process must
-- never crash; an error must be a string or a cudadev.Error; an Array must describe itself consistently;
-- every live Array must lie inside its block (issue 27: cd._inside asked of them all after every call, NOTE
-- [arrays inside their blocks]), with the edge sizes 0, 1, 2^31 - 1, 2^31, 2^31 + 1, 2^32, 2^62 and 2^63 - 1 put
-- in every position of the functions that take a shape, a count, an axis or an index;
-- and when the run ends and its objects are dropped, collectgarbage() must bring cd._live() back to where it
-- started. Suspicious error texts (an argument number the call did not have, "got userdata", a raw Lua
-- error from inside the library, ...) are collected as findings and listed, once each.
--
-- The run is seeded and reproducible: a failure names the seed and the call's index and prints the call.
--
--   lua5.4 spec/fuzz.lua [--calls N] [--seed S] [--seconds T] [--cpath PATH] [--unsafe] [--verbose] [--help]
--     runs the fuzzer in a child process (so that a crash is reported, not suffered): when the child dies
--     it is run again with every call logged, and the last call before the crash is printed (a crash in
--     a finalizer shows at whatever call the garbage collector interrupted).
--   lua5.4 spec/fuzz.lua --worker ...      the fuzzing itself, in this process
--   local fuzz = require "spec.fuzz"; fuzz.run{calls =, seed =, ...} / fuzz.supervise{...}
--
-- Exit status: 0 when there was no failure, 1 on failures, 2 when the fuzzed process crashed.
--
-- Known crashes are avoided by default, so that a run gets past them and finds new ones; each is listed in
-- KNOWN below with its defect, and --unsafe fuzzes them too. Remove an entry once its defect is fixed.
local M = {}

-- ------------------------------------------------------------------------------------------------ knobs

-- Known defects that crash the process (or corrupt memory); the generator stays away from them unless
-- --unsafe is given. Each names the predicate that recognises the call.
local KNOWN = {
  -- not a defect: a raw address that is mapped but is no array makes the launch run in this process (NOTE
  -- [fault containment], plan_args in cpu_run.c), where the kernel's stores land in this process's memory
  raw_pointer = "an integer address at or above 64 KiB given for a pointer parameter (it may be mapped here: the "
    .. "launch then runs in-process)",
}

local LAUNCH_THREADS = 1 << 16   -- launches that would run more threads than this are shrunk (time)
local POOL_CAP = 24              -- objects kept per kind

-- ------------------------------------------------------------------------------------------------ random

-- splitmix64 on Lua integers (wrap-around arithmetic): the same sequence on every platform and Lua build.
local function new_rng(seed)
  local state = seed
  local r = {}
  function r.next()
    state = state + 0x9E3779B97F4A7C15
    local z = state
    z = (z ~ (z >> 30)) * 0xBF58476D1CE4E5B9
    z = (z ~ (z >> 27)) * 0x94D049BB133111EB
    return z ~ (z >> 31)
  end
  function r.int(n) return (r.next() >> 1) % n + 1 end              -- 1..n
  function r.range(lo, hi) return lo + r.int(hi - lo + 1) - 1 end
  function r.chance(p) return (r.next() >> 11) * (1.0 / 9007199254740992.0) < p end
  function r.pick(t) return t[r.int(#t)] end
  function r.float() return (r.next() >> 11) * (1.0 / 9007199254740992.0) end
  -- t = { {weight, value}, ... }
  function r.weighted(t)
    local total = 0
    for i = 1, #t do total = total + t[i][1] end
    local x = r.float() * total
    for i = 1, #t do
      x = x - t[i][1]
      if x < 0 then return t[i][2] end
    end
    return t[#t][2]
  end
  return r
end

local function sorted_keys(t)
  local ks = {}
  for k in pairs(t) do if type(k) == "string" then ks[#ks + 1] = k end end
  table.sort(ks)
  return ks
end

-- ------------------------------------------------------------------------------------------------ the sources

-- Compiled once at the start, on cpu; the calls of cd.compile in the loop only ever hit the cache (or fail
-- in the argument checks), so that no compiler runs inside the loop.
local KSRC = [[
struct pair { int a; float b; };
__device__ int fz_global[8];
extern "C" __global__ void fz_fill(float *x, int n)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = (float)i;
}
extern "C" __global__ void fz_scalars(char c, short s, int i, long long l, unsigned char uc, unsigned short us,
                                      unsigned u, unsigned long long ul, float f, double d, bool b, int *out)
{
  if (out && blockIdx.x == 0 && threadIdx.x == 0) out[0] = i + (b ? 1 : 0);
}
extern "C" __global__ void fz_vec(float4 f, int2 i, double2 d, float *out)
{
  if (out && blockIdx.x == 0 && threadIdx.x == 0) out[0] = f.x + f.w + (float)i.y + (float)d.x;
}
extern "C" __global__ void fz_shared(float *x, int n)
{
  extern __shared__ float s[];
  unsigned t = threadIdx.x;
  int i = blockIdx.x * blockDim.x + t;
  s[t] = i < n ? x[i] : 0.0f;
  __syncthreads();
  if (i < n) x[i] = s[blockDim.x - 1 - t];
}
extern "C" __global__ void fz_fault(int mode, int *p)
{
  if (mode == 1) __trap();
  if (mode == 2) assert(mode == 0);
  if (mode == 3 && p) p[1 << 28] = 1;
}
extern "C" __global__ void fz_struct(pair p, int *out) { if (out) out[0] = p.a; }
extern "C" __global__ void fz_misc(__half h, unsigned long long *p, const double *q, signed char c) { }
template <typename T>
__global__ void fz_axpy(T a, const T *x, T *y, int n)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
]]
local KEXPRS = { "fz_axpy<float>", "fz_axpy<double>", "fz_axpy<int>" }
local SMALL_SRC = 'extern "C" __global__ void fz_one(int *x) { x[0] = 1; }\n'
-- parameter lists written with macros (NOTE [verified signatures]): the first is refused when its kernel is
-- looked up, the second is taken at the sizes the compiled kernel gives
local MACRO_SRC = [[
#define FZ_PARAMS float *x, int n
#define FZ_REAL float
extern "C" __global__ void fz_macro(FZ_PARAMS) { if (threadIdx.x < n) x[threadIdx.x] = 1; }
extern "C" __global__ void fz_macro_type(FZ_REAL a, FZ_REAL *x) { x[0] = a; }
]]

-- ------------------------------------------------------------------------------------------------ the run

local DTYPES = { "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                 "uint64", "bool", "f16", "f32", "f64", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64" }

local FIELDS = {
  Array = { "dtype", "shape", "ndim", "size", "nbytes", "itemsize", "device", "is_pinned", "ptr" },
  Device = { "alias", "name", "ordinal", "arch", "is_cpu", "is_cuda", "is_uva", "is_cubin_supported",
             "is_mempool_supported", "is_primary", "uuid", "pci_bus_id", "total_memory", "free_memory", "sm_count",
             "warp_size", "max_threads_per_block", "has_context", "is_sticky", "stream" },
  Stream = { "device", "priority", "is_default", "handle" },
  Event = { "device", "timing" },
  Module = { "ptx", "cubin", "log", "arch", "device", "kernels", "fz_fill", "fz_struct", "nope" },
  Kernel = { "name", "num_params", "params", "param_names", "attributes", "device", "module" },
  Error = { "api", "code", "name", "message", "sticky", "where", "log", "device" },
  Graph = { "launch", "free", "device", "num_nodes" },
  LaunchConfig = { "grid", "block", "dim", "shared", "stream", "device", "nope" },
}

local OPTION_KEYS = {
  create = { "device", "stream", "pinned" },
  copy = { "count", "dst_offset", "src_offset", "stream" },
  stream = { "priority", "blocking" },
  event = { "timing", "blocking" },
  compile = { "name", "options", "headers", "include_paths", "name_expressions", "device", "arch", "target" },
  load = { "device" },
  launch = { "grid", "block", "dim", "shared", "stream", "device" },
}

-- What the arguments of each function mostly are (the rest of the time they are anything at all).
local HINTS = {
  empty = { "shape", "dtype", "opts_create" }, zeros = { "shape", "dtype", "opts_create" },
  ones = { "shape", "dtype", "opts_create" }, full = { "shape", "value", "dtype", "opts_create" },
  array = { "nested", "dtype", "opts_create" }, empty_like = { "array" }, zeros_like = { "array" },
  full_like = { "array", "value" }, copy = { "array", "source", "opts_copy" },
  stream = { "devspec", "opts_stream" }, event = { "devspec", "opts_event" }, device = { "devspec" },
  set_device = { "devspec" }, scope = { "devspec" }, synchronize_device = { "devspec" }, get_stream = { "devspec" },
  memory_stats = { "devspec" }, memory_allocated = { "devspec" }, max_memory_allocated = { "devspec" },
  memory_reserved = { "devspec" }, reset_peak_memory_stats = { "devspec" }, empty_cache = { "devspec" },
  with_device = { "devspec", "fn", "any" }, with_stream = { "stream", "fn", "any" }, set_stream = { "stream" },
  elapsed_time = { "event", "event" }, compile = { "source", "opts_compile" }, type = { "any" },
  capture = { "stream", "fn" }, launch_config = { "opts_launch" }, load_module = { "string", "opts_load" }, map_cuda_device = { "string", "any" },
  unmap_cuda_device = { "string" }, is_peer_access_supported = { "devspec", "devspec" },
  is_peer_access_enabled = { "devspec", "devspec" }, set_peer_access_enabled = { "devspec", "devspec", "boolean" },
  with_peer_access = { "devspec", "devspec", "boolean", "fn" }, is_mempool_access_supported = { "devspec", "devspec" },
  is_mempool_access_enabled = { "devspec", "devspec" }, set_mempool_access_enabled = { "devspec", "devspec", "boolean" },
  with_mempool_access = { "devspec", "devspec", "boolean", "fn" }, for_each_device = { "fn", "devlist" },
  synchronize_devices = { "devlist" }, wait_streams = { "stream", "streamlist" },
  -- shapes, counts, axes and indexes, where the edge sizes go (issue 27)
  matmul = { "mm_a", "mm_b", "opts_matmul" }, arange = { "edge", "edge", "edge", "dtype" },
  linspace = { "edge", "edge", "edge", "dtype" }, fromfile = { "string", "dtype", "shape" },
  open_ipc = { "ipc_handle" }, ["random.uniform"] = { "shape" }, ["random.normal"] = { "shape" },
  ["random.randint"] = { "edge", "edge", "shape" }, ["random.set_state"] = { "edge", "edge" },
}
for _, r in ipairs({ "sum", "prod", "max", "min", "mean", "amax", "amin", "argmax", "argmin", "all", "any" }) do
  HINTS[r] = { "array", "axis_opts" }
end

local METHOD_HINTS = {
  Array = {
    copy_from = { "source", "opts_stream_only" }, to = { "devspec", "opts_stream_only" },
    slice = { "index", "index", "index", "axis" }, transpose = { "axis", "axis", "axis" }, matmul = { "mm_b", "opts_matmul" },
    sum = { "axis_opts" }, prod = { "axis_opts" }, max = { "axis_opts" }, min = { "axis_opts" }, mean = { "axis_opts" },
    argmax = { "axis_opts" }, argmin = { "axis_opts" }, all = { "axis_opts" }, any = { "axis_opts" },
    reshape = { "reshape" }, view = { "dtype" }, fill = { "value" }, new_empty = { "shape" }, new_zeros = { "shape" },
    new_full = { "shape", "value" },
  },
  Stream = { wait_event = { "event" }, wait_stream = { "stream" }, record_event = { "event" } },
  Event = { record = { "stream" }, wait = { "stream" }, elapsed = { "event" } },
  Device = { attribute = { "attrname" } },
  Kernel = { occupancy = { "blocksize", "count" }, suggest_block_size = { "count" } },
  Module = { get = { "kname" }, get_global = { "gname", "dtype", "shape" } },
}

-- Calls that are seldom made: they make every object stale, or drop the caches.
local RARE = { reset = 0.02, clear_kernel_cache = 0.1, empty_cache = 0.2, set_device = 0.5 }

function M.run(opts)
  opts = opts or {}
  local calls = opts.calls or 10000
  local seed = opts.seed or 1
  local seconds = opts.seconds
  local unsafe = opts.unsafe
  local logf = opts.log          -- a file: every call is written to it (and flushed) before it is made
  local out = opts.out
  if out == nil then out = io.stdout end
  local cd = opts.cd or require "cudadev"
  local r = new_rng(seed)
  local inprocess = os.getenv("CUDADEV_CPU_FORK") == "0"   -- a fault would kill us: no faulting launches

  local report = { seed = seed, calls = 0, errors = 0, ok = 0, failures = {}, findings = {}, finding_list = {},
                   slow = {}, launches = 0, edge_calls = 0, inside_checks = 0 }

  local function fail(i, what, desc)
    report.failures[#report.failures + 1] = ("call %d (seed %d): %s\n    %s"):format(i, seed, what, desc or "")
  end

  -- ---------------------------------------------------------------------------------------------- set-up
  collectgarbage()
  collectgarbage()
  local live0 = cd._live and cd._live() or nil
  local saved_print = print
  local printed = 0
  print = function() printed = printed + 1 end     -- cd.detect and callbacks print: count, do not show
  local default_device = cd.get_device()
  local cpu = cd.device("cpu")

  local pool = { Array = {}, Stream = {}, Event = {}, Device = {}, Module = {}, Kernel = {}, Error = {},
                 LaunchConfig = {}, Other = {} }
  local function keep(kind, v)
    local p = pool[kind]
    if #p < POOL_CAP then p[#p + 1] = v else p[r.int(POOL_CAP)] = v end
  end

  local module = cd.compile(KSRC, { device = "cpu", name_expressions = KEXPRS })
  local small = cd.compile(SMALL_SRC, { device = "cpu" })
  local empty_module = cd.compile("", { device = "cpu" })
  keep("Module", module)
  keep("Module", small)
  keep("Module", empty_module)
  local kernel_names = {}
  for _, name in ipairs(module.kernels) do
    local ok, k = pcall(module.get, module, name)
    if ok then
      keep("Kernel", k)
      kernel_names[#kernel_names + 1] = name
    end
  end
  keep("Kernel", small.fz_one)
  -- the compile calls the loop may make without compiling anything: exactly these
  local compiled = {
    { KSRC, { device = "cpu", name_expressions = KEXPRS } }, { SMALL_SRC, { device = "cpu" } }, { SMALL_SRC, nil },
    { "", { device = "cpu" } }, { "", {} }, { SMALL_SRC, {} }, { SMALL_SRC, { device = cpu } },
  }
  for _, c in ipairs(compiled) do cd.compile(c[1], c[2]) end

  keep("Device", cpu)
  for _, d in ipairs(cd.devices()) do keep("Device", d) end
  for _, dt in ipairs({ "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                        "uint64", "bool" }) do
    keep("Array", cd.zeros(r.range(1, 9), dt))
  end
  keep("Array", cd.zeros(0))
  keep("Array", cd.zeros({}))
  keep("Array", cd.zeros({ 2, 0, 3 }, "i16"))
  keep("Array", cd.ones({ 2, 3, 4 }, "f64"))
  keep("Array", cd.zeros(8, { pinned = true }))
  keep("Array", cd.full(6, 5, "i32"):slice(2, 4))
  keep("Array", cd.zeros(16, "u8"):view("f32"))
  keep("Array", cd.zeros(12):reshape({ 3, -1 }))
  local freed = cd.zeros(3)
  freed:free()
  keep("Array", freed)
  keep("Stream", cd.get_stream("cpu"))
  keep("Stream", cd.stream("cpu"))
  keep("Stream", cd.stream("cpu", { priority = -1, blocking = true }))
  local destroyed = cd.stream("cpu")
  destroyed:destroy()
  keep("Stream", destroyed)
  keep("LaunchConfig", cd.launch_config { dim = 4 })
  keep("LaunchConfig", cd.launch_config { grid = { 2, 2 }, block = { 8, 4 }, shared = 256 })
  keep("LaunchConfig", cd.launch_config { dim = 7, stream = cd.stream("cpu"), device = "cpu" })
  local lc_stream = cd.stream("cpu")
  keep("LaunchConfig", cd.launch_config { grid = 1, block = 1, stream = lc_stream })
  lc_stream:destroy()   -- a config whose stream is gone
  keep("Event", cd.event("cpu"))
  keep("Event", cd.event("cpu", { timing = false }))
  keep("Event", cd.event("cpu"):record())
  local gone = cd.event("cpu")
  gone:destroy()
  keep("Event", gone)
  local ok0, err0 = pcall(cd.compile, "garbage(", { device = "cpu" })
  if not ok0 and cd.type(err0) == "Error" then keep("Error", err0) end
  keep("Error", setmetatable({ api = "x", message = "y" }, cd.Error))
  keep("Other", io.stdout)
  keep("Other", coroutine.create(function() end))
  keep("Other", cd.scope(cpu))
  -- values with a cudadev metatable that are not what it says: the kinds that are recognised (NOTE [magic])
  keep("Other", setmetatable({}, getmetatable(cd.zeros(1))))
  keep("Other", setmetatable({}, getmetatable(cd.stream("cpu"))))
  keep("Other", setmetatable({}, getmetatable(cpu)))
  keep("Other", setmetatable({}, getmetatable(module)))
  keep("Other", setmetatable({}, getmetatable(pool.Kernel[1])))
  local disguised = {}   -- userdata given another type's metatable: their own is given back at the end
  local function disguise(v, as)
    disguised[#disguised + 1] = { v, getmetatable(v) }
    keep("Other", debug.setmetatable(v, getmetatable(as)))
  end
  disguise(cd.zeros(2), pool.Kernel[1])
  disguise(cd.stream("cpu"), cd.zeros(1))
  disguise(cd.zeros(2), cd.stream("cpu"))
  disguise(cd.zeros(2), cd.event("cpu"))
  disguise(cd.event("cpu"), cd.stream("cpu"))
  disguise(cd.zeros(2), cpu)
  disguise(cd.zeros(2), module)

  local functions = {}
  for _, name in ipairs(sorted_keys(cd)) do
    if type(cd[name]) == "function" then functions[#functions + 1] = name end
  end
  local function_of = {}   -- cd.random's functions are fuzzed as "random.NAME", cd.linalg's as "linalg.NAME"
  for _, ns in ipairs({ "random", "linalg" }) do
    for _, name in ipairs(type(cd[ns]) == "table" and sorted_keys(cd[ns]) or {}) do
      if type(cd[ns][name]) == "function" then
        functions[#functions + 1] = ns .. "." .. name
        function_of[ns .. "." .. name] = cd[ns][name]
      end
    end
  end
  local methods = {}
  for _, kind in ipairs({ "Array", "Stream", "Event", "Device", "Module", "Kernel" }) do
    local mt = getmetatable(pool[kind][1])
    methods[kind] = mt and type(mt.methods) == "table" and sorted_keys(mt.methods) or {}
  end
  local metas = {}
  for _, kind in ipairs({ "Array", "Stream", "Event", "Device", "Module", "Kernel" }) do
    metas[kind] = getmetatable(pool[kind][1])
  end

  -- ---------------------------------------------------------------------------------------------- values

  local NUMBERS = {
    0, 1, -1, 2, 3, 4, 5, 7, 8, 16, 31, 32, 33, 64, 100, 255, 256, 1023, 1024, 1025, 4096, 65535, 65536,
    (1 << 31) - 1, 1 << 31, -(1 << 31), 1 << 32, 1 << 40, 1 << 53, (1 << 53) + 1, 1 << 62, (1 << 62) + 1,
    math.maxinteger, math.mininteger, math.maxinteger - 1, math.mininteger + 1,
    0.5, 1.5, -0.0, -2.5, 1e-310, 1e300, -1e300, 2^31, 2^32, 2^53, 2^63, 2^64, -2^63, 0 / 0, 1 / 0, -1 / 0,
  }
  local STRINGS = { "", "cpu", "cuda", "cuda:0", "cuda:1", "cuda:-1", "cuda:", "f32", "float64", "int8", "u64", "bool",
                    "bogus", "\0", "cpu\0", "ptx", "cubin", "sm_90", "compute_80", "fz_fill", "fz_axpy<float>",
                    "k", "1", "-1", "0x10", "nan", "inf", "%s%d%n", ("x"):rep(300), "max_threads_per_block",
                    "warp_size", "device", "stream", "dim", "grid", "block" }
  local callbacks = {
    function(...) return ... end,
    function() error("fuzz: raised by a callback", 0) end,
    function() return nil end,
    function(...) return select("#", ...) end,
    function() cd.synchronize(); return true end,
    print, cd.type, type,   -- C functions too (not cd.empty or tostring: their arguments would pass unchecked, see avoid)
  }

  local gen   -- forward

  local function garbage_string()
    local n = r.weighted({ { 6, r.int(8) }, { 3, r.int(64) }, { 1, 0 } })
    local t = {}
    for i = 1, n do t[i] = string.char(r.int(256) - 1) end
    return table.concat(t)
  end

  local function number()
    if r.chance(0.6) then return r.pick(NUMBERS) end
    if r.chance(0.5) then return r.range(-10, 70) end
    return (r.float() - 0.5) * 2 ^ r.range(-20, 70)
  end

  local function small_int() return r.weighted({ { 8, r.range(0, 9) }, { 2, r.range(10, 64) }, { 1, r.pick(NUMBERS) } }) end

  -- the edge sizes (issue 27): a call that gets one counts as an edge-size call
  local EDGES = { 0, 1, (1 << 31) - 1, 1 << 31, (1 << 31) + 1, 1 << 32, 1 << 62, math.maxinteger }
  local edge_used = false
  local function edge()
    edge_used = true
    return r.pick(EDGES)
  end
  -- a shape of 1 to 3 edge sizes, mostly with a 0 somewhere (the other dimensions then may be as large as they like)
  local function edge_shape()
    local t = {}
    for j = 1, r.range(1, 3) do t[j] = r.chance(0.7) and edge() or r.range(0, 3) end
    if r.chance(0.7) then t[r.int(#t)] = 0 end
    return t
  end

  local edge_arrays = {}   -- arrays of edge shapes ({2^32, 0}), made at the start, handed out as often as others
  local function object(kind)
    if kind == "Array" and #edge_arrays > 0 and r.chance(0.1) then
      edge_used = true
      return edge_arrays[r.int(#edge_arrays)]
    end
    local p = pool[kind]
    if #p == 0 then return nil end
    return p[r.int(#p)]
  end
  -- matmul's operands: {e, 0} and then {0, e'} of the same dtype, whose product has e * e' elements
  local edge_rows, edge_cols, mm_dtype = {}, {}, nil
  local function mm_a()
    mm_dtype = r.chance(0.6) and r.pick({ "float32", "float64" }) or nil
    local rows = mm_dtype and edge_rows[mm_dtype]
    if rows then
      edge_used = true
      return r.pick(rows)
    end
    return object("Array")
  end
  local function mm_b()
    local cols = mm_dtype and r.chance(0.8) and edge_cols[mm_dtype]
    if cols then
      edge_used = true
      return r.pick(cols)
    end
    return object("Array")
  end
  -- made again after a reset, which leaves every Array stale
  local function make_edge_arrays()
    edge_arrays, edge_rows, edge_cols = {}, {}, {}
    for _, dt in ipairs({ "float32", "float64" }) do
      for _, e in ipairs({ (1 << 31) - 1, (1 << 31) + 1, 1 << 32, 1 << 62, math.maxinteger }) do
        for k, shp in ipairs({ { e, 0 }, { 0, e } }) do   -- (a build before issue 27 refused {2^62, 0})
          local ok, a = pcall(cd.zeros, shp, dt, { device = "cpu" })
          if ok then
            edge_arrays[#edge_arrays + 1] = a
            local side = k == 1 and edge_rows or edge_cols
            side[dt] = side[dt] or {}
            table.insert(side[dt], a)
          end
        end
      end
    end
  end
  make_edge_arrays()

  local function shape()
    return r.weighted({
      { 4, small_int() },
      { 2, r.chance(0.8) and edge_shape() or edge() },
      { 4, (function() local t = {} for i = 1, r.range(0, 3) do t[i] = r.range(0, 6) end return t end)() },
      { 1, (function() local t = {} for i = 1, r.range(1, 10) do t[i] = small_int() end return t end)() },
      { 1, r.pick({ { 2^40, 2^40 }, { 1 << 62, 4 }, { math.maxinteger }, { -1 }, { 0 / 0 }, { 1.5 }, { "2" }, { true },
                    { 1, 2, 3, 4, 5, 6, 7, 8, 9 }, 2^62, -3, 0 / 0, "4" }) },
      { 1, gen(2) },
    })
  end

  local function dtype()
    return r.weighted({ { 8, r.pick(DTYPES) }, { 1, r.pick({ "float128", "F32", "", "int", 5 }) }, { 1, gen(2) } })
  end

  local function devspec()
    return r.weighted({ { 5, "cpu" }, { 3, cpu }, { 1, r.pick({ "cuda", "cuda:0", 0, 1, -1, "nope", "", 0 / 0, 1.5 }) },
                        { 1, object("Device") }, { 1, gen(2) } })
  end

  local function value()
    return r.weighted({ { 6, r.range(-3, 300) }, { 3, number() }, { 2, r.chance(0.5) }, { 1, gen(2) } })
  end

  local function nested(depth)
    depth = depth or 0
    local n = r.weighted({ { 1, 0 }, { 6, r.range(1, 5) }, { 1, r.range(6, 40) } })
    local t = {}
    local rows = depth < 3 and r.chance(0.3)
    local width = r.range(0, 4)
    for i = 1, n do
      if rows then
        local row = {}
        local w = r.chance(0.9) and width or r.range(0, 5)   -- mostly rectangular, sometimes ragged
        for j = 1, w do row[j] = r.chance(0.95) and r.range(-5, 100) or gen(2) end
        if r.chance(0.1) then row = nested(depth + 1) end
        t[i] = row
      else
        t[i] = r.chance(0.95) and r.range(-5, 100) or gen(2)
      end
    end
    return t
  end

  local option_value   -- forward

  local function options(kind)
    if r.chance(0.1) then return nil end
    local keys = OPTION_KEYS[kind]
    local t = {}
    for _ = 1, r.range(0, #keys) do
      local k = r.pick(keys)
      t[k] = option_value(k)
    end
    if r.chance(0.1) then t[r.pick({ "blok", "devcie", "", "x" })] = gen(2) end
    if r.chance(0.03) then t[r.pick({ 1, true, 2.5 })] = gen(2) end
    return t
  end

  local function launch_config()
    local c = {}
    local form = r.weighted({ { 6, "dim" }, { 4, "grid" }, { 1, "random" } })
    local function dims(max)
      if r.chance(0.8) then return r.range(1, max) end
      if r.chance(0.7) then
        local t = {}
        for i = 1, r.range(1, 3) do t[i] = r.range(1, 4) end
        return t
      end
      return r.chance(0.5) and number() or gen(2)
    end
    if form == "dim" then c.dim = dims(300)
    elseif form == "grid" then
      c.grid, c.block = dims(8), dims(128)
    else
      for _ = 1, r.range(0, 4) do c[r.pick(OPTION_KEYS.launch)] = gen(2) end
    end
    if r.chance(0.15) then c.shared = r.chance(0.7) and r.pick({ 0, 4, 64, 4096, 1 << 20 }) or number() end
    if r.chance(0.1) then c.stream = r.chance(0.8) and object("Stream") or gen(2) end
    if r.chance(0.05) then c.device = devspec() end
    if r.chance(0.03) then c[r.pick({ "blok", 1, "Dim" })] = 1 end
    return c
  end

  function option_value(k)
    if r.chance(0.15) then return gen(2) end
    if k == "device" then return devspec()
    elseif k == "stream" then return object("Stream")
    elseif k == "pinned" or k == "blocking" or k == "timing" then return r.chance(0.5)
    elseif k == "priority" then return r.pick({ 0, -1, 1, -5, 1000, 5000, 0.5 })
    elseif k == "count" or k == "dst_offset" or k == "src_offset" then
      return r.weighted({ { 6, r.range(0, 8) }, { 2, number() }, { 1, r.pick({ math.maxinteger, (1 << 62) + 7 }) },
                          { 1, edge() } })
    elseif k == "name" then return r.pick({ "kernel.cu", "x.cu", 5, {} })
    elseif k == "options" or k == "include_paths" or k == "name_expressions" then
      return r.pick({ {}, { 5 }, "x", { "-DX" }, { "fz_axpy<float>" } })
    elseif k == "headers" then return r.pick({ {}, { "x.h" }, { ["a.h"] = 5 }, "x" })
    elseif k == "arch" then return r.pick({ 90, "sm_90", "bogus", 0, 0 / 0, 5 })
    elseif k == "target" then return r.pick({ "ptx", "cubin", { "ptx" }, "elf", {} })
    elseif k == "dim" or k == "grid" or k == "block" then return r.range(1, 64)
    elseif k == "shared" then return r.pick({ 0, 64, -1 })
    end
    return gen(2)
  end

  -- compile arguments: a source and options that were compiled at the start, or options with one that is
  -- certainly refused before anything is compiled
  local function compile_args()
    if r.chance(0.5) then
      local c = r.pick(compiled)
      return { c[1], c[2] }
    end
    local src = r.weighted({ { 5, r.pick({ KSRC, SMALL_SRC, MACRO_SRC, "" }) }, { 1, "a\0b" }, { 1, gen(2) } })
    local o = options("compile") or {}
    local bad = r.pick({ { "blok", 1 }, { "name", {} }, { "options", { 5 } }, { "headers", "x" }, { "arch", "bogus" },
                         { "target", "elf" }, { "device", "nope" }, { "include_paths", 5 }, { "name_expressions", { {} } },
                         { 1, 1 } })
    o[bad[1]] = bad[2]
    return { src, o }
  end

  local kinds = {
    shape = shape, dtype = dtype, devspec = devspec, value = value, nested = function() return nested() end,
    array = function() return object("Array") end, stream = function() return object("Stream") end,
    event = function() return object("Event") end, any = function() return gen(1) end,
    fn = function() return r.pick(callbacks) end, boolean = function() return r.chance(0.5) end,
    string = function() return r.chance(0.7) and r.pick(STRINGS) or garbage_string() end,
    source = function() return r.weighted({ { 5, object("Array") }, { 3, nested() }, { 1, garbage_string() }, { 1, gen(2) } }) end,
    opts_create = function() return options("create") end, opts_copy = function() return options("copy") end,
    opts_stream = function() return options("stream") end, opts_event = function() return options("event") end,
    opts_load = function() return options("load") end, opts_compile = function() return options("compile") end,
    opts_stream_only = function() return r.chance(0.5) and { stream = object("Stream") } or options("copy") end,
    opts_launch = function() return r.chance(0.9) and launch_config() or gen(1) end,
    index = function() return r.weighted({ { 6, r.range(-6, 10) }, { 1, number() }, { 1, edge() }, { 1, -edge() },
                                           { 1, gen(2) } }) end,
    edge = function() return r.weighted({ { 6, edge() }, { 1, -edge() }, { 1, r.range(-3, 10) }, { 1, number() } }) end,
    axis = function() return r.weighted({ { 6, r.range(-4, 4) }, { 1, edge() }, { 1, -edge() }, { 1, gen(2) } }) end,
    axis_opts = function()
      local ax = r.weighted({ { 6, r.range(-4, 4) }, { 1, edge() }, { 1, -edge() } })
      if r.chance(0.4) then return ax end
      return { axis = r.chance(0.8) and ax or nil, keepdims = r.chance(0.5), out = r.chance(0.1) and object("Array") or nil }
    end,
    opts_matmul = function()
      if r.chance(0.3) then return nil end
      return { transa = r.chance(0.3), transb = r.chance(0.3), out = r.chance(0.2) and object("Array") or nil,
               alpha = r.chance(0.1) and number() or nil, beta = r.chance(0.1) and number() or nil }
    end,
    mm_a = function() return mm_a() end, mm_b = function() return mm_b() end,
    gname = function() return r.chance(0.8) and "fz_global" or r.pick(STRINGS) end,
    ipc_handle = function()   -- a well-formed handle of this cudadev's format but for its shape and offset
      local dims = {}
      for j = 1, r.range(0, 3) do dims[j] = r.chance(0.6) and edge() or r.range(0, 4) end
      return ("cudadev-ipc:1:array:%d:GPU-00000000-0000-0000-0000-000000000000:%s:%s:%d:%s"):format(
        r.pick({ 1, 999999 }), r.pick({ "float32", "int8", "float64" }), table.concat(dims, ","),
        r.chance(0.5) and edge() or 0, ("0"):rep(128))
    end,
    reshape = function()
      if r.chance(0.7) then
        local t = {}
        for i = 1, r.range(0, 4) do t[i] = r.weighted({ { 5, r.range(0, 6) }, { 2, -1 }, { 1, number() }, { 1, edge() } }) end
        return t
      end
      return shape()
    end,
    attrname = function() return r.pick({ "warp_size", "max_threads_per_block", "nope", "", 5 }) end,
    blocksize = function() return r.weighted({ { 5, r.range(1, 1024) }, { 1, number() } }) end,
    count = function() return r.weighted({ { 5, r.range(0, 4096) }, { 1, number() }, { 1, edge() }, { 1, gen(2) } }) end,
    kname = function() return r.chance(0.8) and r.pick(kernel_names) or r.pick(STRINGS) end,
    devlist = function() return r.pick({ nil, {}, { "cpu" }, { cpu, "cpu" }, { "nope" }, 5, { 5 } }) end,
    streamlist = function() return r.pick({ {}, { object("Stream") }, { object("Stream"), object("Stream") }, 5, { 5 } }) end,
  }

  -- anything at all
  function gen(depth)
    depth = depth or 0
    local choice = r.weighted({
      { 22, "number" }, { 8, "string" }, { depth < 2 and 10 or 2, "table" }, { 3, "boolean" }, { 6, "nil" },
      { 2, "function" }, { 16, "Array" }, { 5, "Stream" }, { 5, "Event" }, { 4, "Device" }, { 3, "Kernel" },
      { 2, "Module" }, { 1, "Error" }, { 1, "LaunchConfig" }, { 2, "Other" }, { 2, "options" },
    })
    if choice == "number" then return number()
    elseif choice == "string" then return r.chance(0.7) and r.pick(STRINGS) or garbage_string()
    elseif choice == "table" then
      return r.weighted({ { 3, {} }, { 3, nested() }, { 2, shape() }, { 1, launch_config() },
                          { 1, { gen(depth + 1), gen(depth + 1) } }, { 1, { x = 1, y = 2, z = 3, w = 4 } } })
    elseif choice == "boolean" then return r.chance(0.5)
    elseif choice == "nil" then return nil
    elseif choice == "function" then return r.pick(callbacks)
    elseif choice == "options" then return options(r.pick({ "create", "copy", "stream", "event", "compile", "launch" }))
    end
    return object(choice)
  end

  -- ---------------------------------------------------------------------------------------------- avoid

  -- elements a creation call asks for, when its shape argument says (0 when it cannot be told)
  local CREATORS = { ["cd.empty"] = 1, ["cd.zeros"] = 1, ["cd.ones"] = 1, ["cd.full"] = 1,
                     ["Array:new_empty"] = 2, ["Array:new_zeros"] = 2, ["Array:new_full"] = 2,
                     ["cd.random.uniform"] = 1, ["cd.random.normal"] = 1, ["cd.random.randint"] = 3 }
  local function elements(v)
    local n = math.tointeger(v)
    if n then return n end
    if type(v) ~= "table" then return 0 end
    local p = 1.0
    for j = 1, rawlen(v) do
      local x = math.tointeger(rawget(v, j))
      if not x then return 0 end
      p = p * x
    end
    return p
  end

  -- true when the call would hit a crash of KNOWN, or allocate (and fill) gigabytes that the machine may
  -- well have: slow, and no test of anything. The generator then makes another call.
  local REDUCTIONS = {}
  for _, f in ipairs({ "sum", "prod", "max", "min", "mean", "amax", "amin", "argmax", "argmin", "all", "any" }) do
    REDUCTIONS[f] = true
  end
  local function huge(n) return n > (1 << 22) and n < 2^44 end
  -- the largest extent of an Array argument (1 for anything else)
  local function widest(a)
    if cd.type(a) ~= "Array" then return 1 end
    local ok, shp = pcall(function() return a.shape end)
    local w = 1
    for _, d in ipairs(ok and shp or {}) do w = math.max(w, d) end
    return w
  end
  local function avoid(name, args)
    local at = CREATORS[name]
    if at then
      local n = elements(args[at])
      if huge(n) then return true end
    end
    -- the edge sizes make arange, linspace and matmul ask for gigabytes too: {2^31 - 1, 0} x {0, 1}
    if name == "cd.arange" or name == "cd.linspace" then
      local a, b, c = tonumber(args[1]), tonumber(args[2]), tonumber(args[3])
      local n = name == "cd.linspace" and (c or 50) or not b and (a or 0) or (b - (a or 0)) / (c or 1)
      if n ~= n or huge(math.abs(n)) then return true end
    end
    if (name == "cd.matmul" or name == "Array:matmul") and huge(1.0 * widest(args[1]) * widest(args[2])) then
      return true
    end
    -- a reduction drops the 0 of {2^31 - 1, 0}: its output may have 2^31 - 1 elements
    if REDUCTIONS[name:gsub("^cd%.", ""):gsub("^Array:", "")] and huge(1.0 * widest(args[1])) then return true end
    -- an empty array may have huge dimensions before its 0 ({2^32, 0}): totable makes a table per row
    if name == "Array:totable" and cd.type(args[1]) == "Array" then
      local ok, shp = pcall(function() return args[1].shape end)
      if ok then
        local rows = 1.0
        for _, d in ipairs(shp) do
          if d == 0 then break end
          rows = rows * d
        end
        if rows > (1 << 20) then return true end
      end
    end
    return false
  end

  -- ---------------------------------------------------------------------------------------------- describing

  local describe
  local function describe_value(v, depth)
    local t = type(v)
    if t == "string" then
      if #v > 40 then return ("(%q):rep..(%d bytes)"):format(v:sub(1, 12), #v) end
      return ("%q"):format(v):gsub("\\\n", "\\n")
    elseif t == "number" then
      if v ~= v then return "0/0" end
      if v == 1 / 0 then return "1/0" end
      if v == -1 / 0 then return "-1/0" end
      if math.type(v) == "integer" then
        if v == math.mininteger then return "math.mininteger" end
        return tostring(v)
      end
      return ("%.17g"):format(v)
    elseif t == "table" then
      local ty = cd.type(v)
      if ty == "Error" then return "<Error>" end
      if getmetatable(v) ~= nil then return "<table with a metatable>" end
      if depth > 2 then return "{...}" end
      local parts, n = {}, 0
      for i = 1, rawlen(v) do
        n = n + 1
        if n > 12 then parts[#parts + 1] = "..." break end
        parts[#parts + 1] = describe_value(rawget(v, i), depth + 1)
      end
      local ks = {}
      for k in pairs(v) do
        if not (math.type(k) == "integer" and k >= 1 and k <= rawlen(v)) then ks[#ks + 1] = k end
      end
      table.sort(ks, function(a, b) return tostring(a) < tostring(b) end)
      for _, k in ipairs(ks) do
        local key = type(k) == "string" and k:match("^[%a_][%w_]*$") and k or ("[" .. describe_value(k, 3) .. "]")
        parts[#parts + 1] = key .. " = " .. describe_value(v[k], depth + 1)
      end
      return "{ " .. table.concat(parts, ", ") .. " }"
    elseif t == "userdata" then
      local ok, s = pcall(tostring, v)
      s = ok and s or "?"
      if #s > 60 then s = s:sub(1, 57) .. "..." end
      return ("<%s>"):format(s)
    end
    return "<" .. t .. ">"
  end
  function describe(name, args, n)
    local parts = {}
    for i = 1, n do parts[i] = describe_value(args[i], 0) end
    return ("%s(%s)"):format(name, table.concat(parts, ", "))
  end

  -- ---------------------------------------------------------------------------------------------- checks

  local function note(sig, i, desc, msg)
    if report.findings[sig] then
      report.findings[sig].count = report.findings[sig].count + 1
      return
    end
    local f = { sig = sig, call = i, desc = desc, msg = msg, count = 1 }
    report.findings[sig] = f
    report.finding_list[#report.finding_list + 1] = f
  end

  local function normalise(msg)
    return (msg:gsub("^[^\n]-:%d+: ", ""):gsub("0x%x+", "ADDR"):gsub("%-?%d[%d.e+]*", "N"):gsub("'[^']*'", "'S'")
      :gsub("%('S': expected [^,]+, got", "('S': expected T, got"))
  end

  -- via: "callback" when the call ran a function of ours (its errors pass through), "helper" when the call is
  -- a helper of ours that indexes its argument (o[k], #o: its own "attempt to index" is no finding)
  local function check_error(i, name, err, nargs, desc, via)
    local t = type(err)
    if t == "string" then
      local text = err:gsub("^%[string \".-\"%]:%d+: ", ""):gsub("^[^%s:]+:%d+: ", "")
      local generic = normalise(text:gsub("^bad argument #%-?%d+ to '[^']*'", "bad argument"))
      local argn = text:match("^bad argument #(%-?%d+)")
      if argn and (tonumber(argn) < 1 or tonumber(argn) > nargs + 1) then
        note(name:gsub(" .*", "") .. ": an argument number past the arguments given", i, desc, text)
      end
      if text:find("(null)", 1, true) then note("(null) in " .. generic, i, desc, text) end
      if text:find("got userdata", 1, true) then note("\"got userdata\" where the type has a name: " .. generic, i, desc, text) end
      local a, b = text:match("%((%S+) expected, got (%S+)%)")
      if a and a == b then note("\"X expected, got X\": " .. generic, i, desc, text) end
      local raw = text:find("attempt to index") or text:find("attempt to call") or text:find("attempt to perform") or
        text:find("attempt to compare") or text:find("attempt to concatenate")
      if raw and via ~= "callback" and (text:find("[cudadev]", 1, true) or via ~= "helper") then
        note(name .. ": a raw Lua error from inside cudadev: " .. normalise(text), i, desc, text)
      end
      if #text == 0 then fail(i, "an empty error message", desc) end
      return
    end
    if cd.type(err) == "Error" then
      for _, f in ipairs({ "api", "name", "message", "where" }) do
        if type(err[f]) ~= "string" then fail(i, ("a cudadev.Error whose %s is a %s"):format(f, type(err[f])), desc) end
      end
      if math.type(err.code) ~= "integer" then fail(i, "a cudadev.Error whose code is no integer", desc) end
      if type(err.sticky) ~= "boolean" then fail(i, "a cudadev.Error whose sticky is no boolean", desc) end
      local ok, s = pcall(tostring, err)
      if not ok or type(s) ~= "string" then fail(i, "a cudadev.Error that does not print", desc) end
      return
    end
    fail(i, ("an error value of type %s: %s"):format(t, tostring(err)), desc)
  end

  -- an Array must describe itself consistently: size = product of shape, nbytes = size * itemsize
  local function check_array(i, a, desc)
    local ok, shp, size, nbytes, itemsize = pcall(function() return a.shape, a.size, a.nbytes, a.itemsize end)
    if not ok then return end
    local p = 1.0
    for _, d in ipairs(shp) do p = p * d end
    if p ~= size or size * itemsize ~= nbytes or size < 0 then
      fail(i, ("an Array whose shape {%s} does not give its size %s (%s bytes)"):format(table.concat(shp, ", "),
        tostring(size), tostring(nbytes)), desc)
    end
  end

  local dropped = setmetatable({}, { __mode = "k" })
  -- NOTE [arrays inside their blocks]: after every call, every live Array the run holds lies inside its block
  -- (cd._inside, one call for all); a build without cd._inside is judged by its sizes (what the matmul case broke)
  local inside = cd._inside or function(...)
    for j = 1, select("#", ...) do
      local a = select(j, ...)
      local ok, shp, size, nb = pcall(function() return a.shape, a.size, a.nbytes end)
      if ok then
        local p = 1.0
        for _, d in ipairs(shp) do p = p * d end
        if p ~= size or nb ~= size * a.itemsize then return false, "its size is not the product of its shape", j end
      end
    end
    return true
  end
  -- (a result is checked before it is kept; one that fails is reported once and dropped from the pool, so that
  -- the calls after it neither report it again nor read it: its tostring in their description may crash the run)
  local function check_inside(i, desc, ...)
    local live = { ... }
    for _, a in ipairs(pool.Array) do live[#live + 1] = a end
    for _, a in ipairs(edge_arrays) do live[#live + 1] = a end
    report.inside_checks = report.inside_checks + #live
    local ok, why, j = inside(table.unpack(live))
    while not ok do
      local bad = live[j]
      local shp = pcall(function() return bad.shape end) and bad.shape or {}
      local what = ("an Array of shape {%s} describes memory it does not own: %s"):format(table.concat(shp, ", "),
        tostring(why))
      fail(i, what, desc)
      io.stderr:write(("fuzz: FAILURE at call %d (seed %d): %s\n    %s\n"):format(i, seed, what, desc))
      for _, p in ipairs({ pool.Array, edge_arrays }) do
        for k = #p, 1, -1 do if p[k] == bad then table.remove(p, k) end end
      end
      dropped[bad] = true
      table.remove(live, j)
      ok, why, j = inside(table.unpack(live))
    end
  end

  local function take_results(i, desc, ...)
    for j = 1, select("#", ...) do
      local v = select(j, ...)
      local ty = cd.type(v)
      if ty == "Array" and dropped[v] then   -- outside its block (check_inside): not kept
      elseif ty == "Array" then
        check_array(i, v, desc)
        keep("Array", v)
      elseif ty and pool[ty] and ty ~= "Error" then keep(ty, v)
      end
    end
  end

  -- ---------------------------------------------------------------------------------------------- calls

  local clock = os.clock
  local t_start = clock()

  local function call(i, name, f, args, n, via)
    if avoid(name, args) then
      edge_used = false
      return false
    end
    local desc = describe(name, args, n)
    if logf then
      logf:write(("#%d %s\n"):format(i, desc))
      logf:flush()
    end
    local t0 = clock()
    local res = table.pack(pcall(f, table.unpack(args, 1, n)))
    if res[1] and name == "Array:__dlpack" and type(res[2]) == "userdata" then
      -- a DLPack tensor (a light userdata) is the caller's to consume: cudadev takes it back (NOTE [dlpack ownership])
      -- (refused or not: a strided view's tensor is refused, and its deleter called)
      pcall(cd.from_dlpack, res[2], { versioned = n >= 3 and args[3] ~= nil and args[3] ~= false })
      res.n = 1
    end
    local dt = clock() - t0
    if dt > 2 then report.slow[#report.slow + 1] = ("call %d took %.1f s: %s"):format(i, dt, desc) end
    report.calls = report.calls + 1
    if name == "cd.reset" or name == "Device:reset" then make_edge_arrays() end
    if edge_used then report.edge_calls = report.edge_calls + 1 end
    edge_used = false
    local made = {}
    for j = 2, res[1] and res.n or 1 do
      if cd.type(res[j]) == "Array" then made[#made + 1] = res[j] end
    end
    check_inside(i, desc, table.unpack(made))
    if res[1] then
      report.ok = report.ok + 1
      -- an Array over a module global is not the cpu backend's memory: a launch given it (or a view of it) runs in
      -- this process (KNOWN.raw_pointer), where a random kernel's fault would end the run. Checked, not kept.
      if name ~= "Module:get_global" then take_results(i, desc, table.unpack(res, 2, res.n)) end
    else
      report.errors = report.errors + 1
      check_error(i, name, res[2], n, desc, via)
    end
    return true
  end

  local function hinted_args(hint, nfree)
    local args, n = {}, 0
    if hint and r.chance(0.75) then
      n = #hint
      if r.chance(0.5) then n = r.range(0, #hint) end
      for j = 1, n do args[j] = r.chance(0.88) and kinds[hint[j]]() or gen(1) end
    else
      n = r.weighted({ { 2, 0 }, { 4, 1 }, { 4, 2 }, { 3, 3 }, { 1, 4 }, { 1, nfree or 5 } })
      for j = 1, n do args[j] = gen(1) end
    end
    if r.chance(0.05) then
      n = n + 1
      args[n] = gen(1)
    end
    return args, n
  end

  local function kernel_args(k)
    local ok, params = pcall(function() return k.params end)
    if not ok or type(params) ~= "table" then return {}, r.range(0, 3) end
    local args = {}
    for j, ty in ipairs(params) do
      local a
      if r.chance(0.1) then a = gen(1)
      elseif ty:find("%*$") then
        a = r.weighted({ { 8, object("Array") }, { 1, nil }, { inprocess and 0 or 1, r.pick({ 0, 5, 4096 }) } })
      elseif ty == "bool" then a = r.chance(0.5)
      elseif ty:find("float%d") or ty:find("int%d") or ty:find("double%d") then
        local v = {}
        for c = 1, 4 do v[c] = r.range(-3, 3) end
        a = r.chance(0.8) and v or { x = 1, y = 2, z = r.pick({ 3, "a" }), w = 4 }
      elseif ty == "float" or ty == "double" or ty == "__half" then a = r.chance(0.8) and r.range(-5, 5) + 0.5 or number()
      elseif ty == "int" and r.chance(0.3) then a = r.range(0, 4096)
      else a = r.weighted({ { 6, r.range(-2, 100) }, { 1, number() } })
      end
      args[j] = a
    end
    if not unsafe then   -- KNOWN.raw_pointer
      for j, ty in ipairs(params) do
        local a = args[j]
        if ty:find("%*$") and math.type(a) == "integer" and (a >= 65536 or a < 0) then args[j] = 5 end
      end
    end
    local n = #params
    if r.chance(0.05) then n = n + r.pick({ -1, 1 }) end
    if n < 0 then n = 0 end
    return args, n
  end

  -- rough thread count of a configuration: big valid ones are shrunk, so a launch never takes long
  local function threads(c)
    local function total(v)
      if math.tointeger(v) then return math.tointeger(v) end
      if type(v) == "table" then
        local p = 1
        for j = 1, 3 do
          local x = math.tointeger(rawget(v, j) or 1)
          if not x then return 0 end
          p = p * math.max(x, 0)
        end
        return p
      end
      return 0
    end
    if type(c) ~= "table" then return 0 end
    local dim, grid, block = rawget(c, "dim"), rawget(c, "grid"), rawget(c, "block")
    if dim ~= nil then return total(dim) end
    return total(grid) * math.max(total(block), 1)
  end

  local function launch(i)
    -- in-process launches (CUDADEV_CPU_FORK=0) of random kernels would write out of bounds in this process
    if inprocess and not unsafe then return false end
    local k = object("Kernel")
    if k == nil then return false end
    local args, n = kernel_args(k)
    local cfg = r.chance(0.95) and launch_config() or gen(1)
    if threads(cfg) > LAUNCH_THREADS then cfg = { dim = r.range(1, 256) } end
    if r.chance(0.2) then   -- the same, made once (NOTE [launch configs]); a refused one is launched as a table
      local made, lc = pcall(cd.launch_config, cfg)
      if made then cfg = lc end
    elseif r.chance(0.05) then   -- one the calls made: they too are shrunk when big
      local lc = object("LaunchConfig")
      if lc and threads({ dim = lc.dim, grid = lc.grid, block = lc.block }) <= LAUNCH_THREADS then cfg = lc end
    end
    local ok, name = pcall(function() return k.name end)
    if ok and name == "fz_fault" then
      if args[1] == 3 and inprocess then args[1] = 1 end
      if r.chance(0.7) then args[1] = r.range(0, inprocess and 2 or 3) end
    end
    local a = { cfg }
    for j = 1, n do a[j + 1] = args[j] end
    report.launches = report.launches + 1
    if r.chance(0.5) then return call(i, "launch " .. (ok and tostring(name) or "?"), k, a, n + 1) end
    table.insert(a, 1, k)
    return call(i, "Kernel:launch " .. (ok and tostring(name) or "?"), metas.Kernel.methods.launch, a, n + 2)
  end

  local function call_function(i)
    local name = r.pick(functions)
    if RARE[name] and not r.chance(RARE[name]) then return false end
    local f = function_of[name] or cd[name]
    local args, n
    if name == "compile" and r.chance(0.9) then
      args, n = compile_args(), 2
    else
      args, n = hinted_args(HINTS[name])
    end
    local via = (name:find("^with_") or name == "for_each_device" or name == "capture") and "callback" or nil
    return call(i, "cd." .. name, f, args, n, via)
  end

  local function call_method(i)
    local kind = r.pick({ "Array", "Array", "Array", "Stream", "Event", "Device", "Module", "Kernel" })
    local names = methods[kind]
    if #names == 0 then return false end
    local mname = r.pick(names)
    if RARE[mname] and not r.chance(RARE[mname]) then return false end
    if kind == "Kernel" and mname == "launch" then return false end   -- launches are made by launch()
    local f = metas[kind].methods[mname]
    local hint = METHOD_HINTS[kind] and METHOD_HINTS[kind][mname]
    local mm_self = kind == "Array" and mname == "matmul" and r.chance(0.9) and mm_a()   -- before mm_b
    local args, n = hinted_args(hint, 3)
    local self = mm_self or r.chance(0.9) and object(kind) or gen(1)
    table.insert(args, 1, self)
    return call(i, kind .. ":" .. mname, f, args, n + 1)
  end

  local function get(o, k) return o[k] end
  local function set(o, k, v) o[k] = v end

  local function read_field(i)
    local kind = r.pick({ "Array", "Array", "Stream", "Event", "Device", "Module", "Kernel", "Error", "LaunchConfig",
                          "Other" })
    local o = object(kind)
    local key
    if FIELDS[kind] and r.chance(0.7) then key = r.pick(FIELDS[kind])
    elseif kind == "Array" and r.chance(0.6) then key = r.chance(0.8) and r.range(-1, 10) or edge()
    else key = r.chance(0.5) and r.pick(STRINGS) or gen(1) end
    return call(i, "index " .. kind, get, { o, key }, 2, "helper")
  end

  local function write_field(i)
    local o = r.chance(0.8) and object("Array") or r.chance(0.3) and object("LaunchConfig") or gen(1)
    local key = r.weighted({ { 6, r.range(0, 10) }, { 2, r.pick(FIELDS.Array) }, { 1, number() }, { 1, gen(1) } })
    return call(i, "newindex", set, { o, key, value() }, 3, "helper")
  end

  local function metamethod(i)
    local kind = r.pick({ "Array", "Array", "Stream", "Event", "Device", "Module", "Kernel", "LaunchConfig", "Other" })
    local o = object(kind)
    local op = r.pick({ "tostring", "len", "eq", "close", "gc", "type", "name" })
    if op == "tostring" then return call(i, "tostring", tostring, { o }, 1)
    elseif op == "len" then return call(i, "len", function(x) return #x end, { o }, 1, "helper")
    elseif op == "eq" then return call(i, "eq", function(x, y) return x == y end, { o, gen(1) }, 2, "helper")
    elseif op == "type" then return call(i, "cd.type", cd.type, { o }, 1)
    elseif op == "name" then return call(i, "tostring", tostring, { gen(1) }, 1)
    end
    -- __close / __gc called by hand, on its own kind or on another value
    local which = r.pick({ "Array", "Stream", "Event", "Module", "Kernel" })
    local mt = metas[which]
    local mm = mt and mt["__" .. op]
    if mm == nil then return false end
    return call(i, "__" .. op, mm, { r.chance(0.8) and o or gen(1) }, 1)
  end

  -- NOTE [pinned reads]: finalizers that free the array being read (and take its memory back with an array of the
  -- same size), while the collector runs all the time; the read must neither crash nor read freed memory (ASan)
  local junk = setmetatable({}, { __mode = "v" })
  local function finalizer_read(i)
    local a = object("Array")
    local ok, nb = pcall(function() return a.nbytes end)
    if not ok then return false end
    for _ = 1, r.range(1, 8) do
      setmetatable({}, { __gc = function()
        if pcall(a.free, a) then junk[#junk + 1] = select(2, pcall(cd.empty, nb, "uint8", { device = "cpu" })) end
      end })
    end
    local op = r.pick({ "totable", "tostring", "index", "slice", "copy" })
    local f = op == "totable" and function(x) return x:totable() end or op == "tostring" and tostring
      or op == "index" and function(x) return x[1] end or op == "slice" and function(x) return x:slice(1) end
      or function(x) return cd.copy(cd.empty_like(x), x) end
    collectgarbage("incremental", 0, 100, 0)
    local made = call(i, "read while a finalizer frees: " .. op, f, { a }, 1, "helper")
    collectgarbage("incremental", 200, 100, 13)
    return made
  end

  -- NOTE [scoped calls]: with_stream / with_device inside a coroutine whose function fails, yields or returns:
  -- whatever happens, the resumer's stream and default device are what they were
  local function coroutine_with(i)
    local ok0, s0 = pcall(cd.get_stream, "cpu")
    local d0 = cd.get_device()
    local how = r.pick({ "error", "yield", "return" })
    local function body()
      if how == "error" then error("fz coroutine error", 0) elseif how == "yield" then coroutine.yield(1) end
      return 1
    end
    local stream = r.chance(0.5) and (object("Stream") or gen(1))
    local dev = not stream and devspec()
    local co = coroutine.create(function()
      if stream then return cd.with_stream(stream, body) end
      return cd.with_device(dev, body)
    end)
    local made = call(i, "coroutine with_" .. (stream and "stream" or "device") .. " that " .. how .. "s",
      coroutine.resume, { co }, 1, "helper")
    local ok1, s1 = pcall(cd.get_stream, "cpu")
    if ok0 ~= ok1 or (ok0 and s0 ~= s1) or cd.get_device() ~= d0 then
      fail(i, "a coroutine's with_stream / with_device left its setting on for the resumer", how)
    end
    return made
  end

  local actions = {
    { 40, call_function }, { 26, call_method }, { 10, read_field }, { 3, write_field }, { 6, metamethod },
    { 1, dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "spec/") .. "fuzz_sandbox.lua")
         .action(cd, r, call, fail, function(edges, checks)
           edge_used = edge_used or edges > 0
           report.inside_checks = report.inside_checks + checks
         end) },   -- sandboxed states that have the debug library (issue 14)
    { 8, launch }, { 1, finalizer_read }, { 1, coroutine_with }, { 1, function()
      collectgarbage(r.chance(0.2) and "collect" or "step")
      return false
    end },
  }

  -- ---------------------------------------------------------------------------------------------- the loop

  local i = 0
  local wall0 = os.time()
  local deadline = seconds and (wall0 + seconds) or nil
  while i < calls do
    local act = r.weighted(actions)
    local made = act(i + 1)
    if made then i = i + 1 end
    if deadline and i % 256 == 0 and os.time() >= deadline then break end
  end
  report.cpu_seconds = clock() - t_start
  report.seconds = os.time() - wall0

  -- ---------------------------------------------------------------------------------------------- the end

  for _, d in ipairs(disguised) do debug.setmetatable(d[1], d[2]) end
  pcall(cd.set_device, default_device)
  -- a stream the fuzzer made and set current stays anchored as the device's current stream: destroy it, so
  -- that the device's default stream takes its place
  for _, d in ipairs(cd.devices()) do
    pcall(function()
      local s = cd.get_stream(d)
      if not s.is_default then s:destroy() end
    end)
  end
  pool, disguised, module, small, empty_module, freed, destroyed, gone, err0 = nil, nil, nil, nil, nil, nil, nil, nil, nil
  edge_arrays, edge_rows, edge_cols = {}, nil, nil
  print = saved_print
  collectgarbage()
  collectgarbage()
  if live0 then
    local live1 = cd._live()
    local diffs = {}
    for _, k in ipairs(sorted_keys(live1)) do
      if live1[k] ~= live0[k] then diffs[#diffs + 1] = ("%s %d -> %d"):format(k, live0[k] or 0, live1[k]) end
    end
    if #diffs > 0 then
      fail(report.calls, "after the run and collectgarbage(), cd._live() is not back where it started: "
        .. table.concat(diffs, ", "), "(the whole run)")
    end
  end
  report.printed = printed
  if out then M.print_report(report, out, opts.verbose, opts.brief) end
  return report
end

function M.print_report(report, out, verbose, brief)
  out:write(("fuzz: seed %d, %d calls (%d launches) in %d s (%.1f s CPU): %d returned, %d raised; %d findings, "
    .. "%d failures\n"):format(report.seed, report.calls, report.launches, report.seconds or 0, report.cpu_seconds or 0,
      report.ok, report.errors, #report.finding_list, #report.failures))
  out:write(("fuzz: edge sizes in %d calls, %d invariant checks (every live Array inside its block)\n"):format(
    report.edge_calls, report.inside_checks))
  for _, f in ipairs(brief and {} or report.finding_list) do
    out:write(("  finding (%dx) %s\n    first at call %d: %s\n    %s\n"):format(f.count, f.sig, f.call, f.desc,
      f.msg:sub(1, 300)))
  end
  for _, s in ipairs(report.slow) do out:write("  slow: " .. s .. "\n") end
  for _, f in ipairs(report.failures) do out:write("  FAILURE " .. f .. "\n") end
  if verbose then
    out:write("  known crashes avoided (--unsafe fuzzes them):\n")
    for _, k in ipairs(sorted_keys(KNOWN)) do out:write(("    %s: %s\n"):format(k, KNOWN[k])) end
  end
  out:flush()
end

-- ------------------------------------------------------------------------------------------------ supervising

local function script_path()
  local src = debug.getinfo(1, "S").source
  return src:sub(1, 1) == "@" and src:sub(2) or "spec/fuzz.lua"
end

local function shell_quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

-- Runs the fuzzer in a child lua5.4 (opts: calls, seed, seconds, cpath, unsafe, lua, verbose); returns
-- ok, the child's output, and on a crash the last call it made.
function M.supervise(opts)
  local lua = opts.lua or "lua5.4"
  local args = { "--worker", "--calls", opts.calls or 10000, "--seed", opts.seed or 1 }
  if opts.seconds then args[#args + 1] = "--seconds"; args[#args + 1] = opts.seconds end
  if opts.cpath then args[#args + 1] = "--cpath"; args[#args + 1] = opts.cpath end
  if opts.unsafe then args[#args + 1] = "--unsafe" end
  if opts.verbose then args[#args + 1] = "--verbose" end
  if opts.brief then args[#args + 1] = "--brief" end
  -- The child works in an empty directory of its own: random calls of cd.save, a:tofile and friends take
  -- random relative paths, and their files must not land in the repository. Its paths are made absolute.
  local pwd = io.popen("pwd"):read("l")
  local dir = os.tmpname()
  os.remove(dir)
  args[#args + 1] = "--root"; args[#args + 1] = pwd
  -- The child's memory is limited: an allocation the generator did not see coming (cd.arange(2^31): 16 GiB)
  -- fails as out of memory instead of filling the machine's (under AddressSanitizer the out-of-memory killer
  -- ended the suite in CI). The cpu device gets a size of its own (NOTE [cpu memory limit]), and the address
  -- space a limit too, unless AddressSanitizer runs, whose shadow memory needs terabytes of it.
  local gib = opts.max_memory_gib or 8
  local limit = ("CUDADEV_CPU_MEMORY=%dM "):format(math.floor(gib * 1024))
  if not (os.getenv("LD_PRELOAD") or ""):find("asan") then
    limit = ("ulimit -v %d 2>/dev/null; exec env %s"):format(math.floor(gib * 1024 * 1024), limit)
  end
  -- The fuzzer works on the cpu device: on a GPU host the CUDA driver is hidden from the child (a library
  -- that does not exist stands for it), so that a random dev:reset() or kernel fault never reaches a GPU.
  -- opts.cuda (--cuda on the command line) fuzzes the CUDA devices too.
  local hide = opts.cuda and "" or "env CUDADEV_LIBCUDA=/nonexistent/libcuda.so.1 "
  local function command(extra)
    local script = script_path()
    if script:sub(1, 1) ~= "/" then script = pwd .. "/" .. script end
    local parts = { ("mkdir -p %s && cd %s && "):format(shell_quote(dir), shell_quote(dir)) .. limit .. hide .. lua,
      shell_quote(script) }
    for _, a in ipairs(args) do parts[#parts + 1] = shell_quote(a) end
    for _, a in ipairs(extra or {}) do parts[#parts + 1] = shell_quote(a) end
    return table.concat(parts, " ") .. " 2>&1"
  end
  local function clean() os.execute("rm -rf " .. shell_quote(dir)) end
  local p = assert(io.popen(command(), "r"))
  local output = p:read("a")
  local _, how, status = p:close()
  local reported = output:find("fuzz: seed", 1, true) ~= nil   -- the worker got to its report
  if how == "exit" and status == 0 and reported then clean(); return true, output end
  if how == "exit" and status == 1 and reported then clean(); return false, output end
  -- a crash (a signal, or a sanitizer that ended the process, exit 1 without a report)
  -- a crash: again, logging every call, to name the one that crashed
  local log = os.tmpname()
  local p2 = assert(io.popen(command({ "--log", log }), "r"))
  local output2 = p2:read("a")
  p2:close()
  clean()
  local last
  for line in io.lines(log) do last = line end
  os.remove(log)
  local msg = ("%s\nfuzz: the process died (%s %s) at seed %s; the second run (logging every call) %s\n"
    .. "  last call: %s\n"):format(output, how, tostring(status), tostring(opts.seed or 1),
      output2:find("^fuzz:") and "did not crash: the crash depends on more than the seed" or "crashed too",
      last or "(none logged)")
  return false, msg, last
end

-- ------------------------------------------------------------------------------------------------ command line

local USAGE = [[
usage: lua5.4 spec/fuzz.lua [options]        (from the repository root)
  --calls N       calls to make (default 10000)
  --seed S        the seed (default 1): the same seed makes the same calls
  --seconds T     stop after T seconds, whatever the number of calls
  --cpath PATH    where cudadev.so is (default build/?.so; build-asan/?.so with the ASan runtime preloaded)
  --unsafe        also make the calls of the known crashes (KNOWN in this file)
  --verbose       list the known crashes that were avoided
  --cuda          let the child see the CUDA driver (default: hidden, so only the cpu device is fuzzed)
  --brief         the report's first line and failures only, no findings
  --log FILE      write every call to FILE before making it (the supervisor does this after a crash)
  --root DIR      the repository, for a worker run elsewhere (the supervisor runs it in an empty directory)
  --worker        fuzz in this process (default: in a child process, which is rerun with --log when it dies)
Exit status: 0 without failures, 1 with failures, 2 when the fuzzed process died.
]]

local function main(argv)
  local opts = { calls = 10000, seed = 1 }
  local worker, logpath = false, nil
  local i = 1
  while i <= #argv do
    local a = argv[i]
    if a == "--calls" then opts.calls = math.tointeger(tonumber(argv[i + 1])); i = i + 1
    elseif a == "--seed" then opts.seed = math.tointeger(tonumber(argv[i + 1])); i = i + 1
    elseif a == "--seconds" then opts.seconds = tonumber(argv[i + 1]); i = i + 1
    elseif a == "--cpath" then opts.cpath = argv[i + 1]; i = i + 1
    elseif a == "--log" then logpath = argv[i + 1]; i = i + 1
    elseif a == "--root" then opts.root = argv[i + 1]; i = i + 1
    elseif a == "--unsafe" then opts.unsafe = true
    elseif a == "--cuda" then opts.cuda = true
    elseif a == "--verbose" then opts.verbose = true
    elseif a == "--brief" then opts.brief = true
    elseif a == "--worker" then worker = true
    elseif a == "--help" or a == "-h" then
      io.stdout:write(USAGE)
      os.exit(0)
    else
      io.stderr:write(("fuzz: unknown argument %s\n"):format(a), USAGE)
      os.exit(2)
    end
    i = i + 1
  end
  if not opts.calls or not opts.seed then
    io.stderr:write("fuzz: --calls and --seed take integers\n")
    os.exit(2)
  end
  if not worker then
    local ok, output = M.supervise(opts)
    io.stdout:write(output)
    os.exit(ok and 0 or (output:find("the process died") and 2 or 1))
  end
  -- --root: the repository, when the supervisor runs this worker in a directory of its own
  local root = opts.root and opts.root .. "/" or ""
  local cpath = opts.cpath or "build/?.so"
  if cpath:sub(1, 1) ~= "/" then cpath = root .. cpath end
  package.path = ("%slua/?.lua;%slua/?/init.lua;%s?.lua;"):format(root, root, root) .. package.path
  package.cpath = cpath .. ";" .. package.cpath
  if logpath then opts.log = assert(io.open(logpath, "w")) end
  local report = M.run(opts)
  if opts.log then opts.log:close() end
  os.exit(#report.failures == 0 and 0 or 1, true)   -- close the state: its objects are finalized, as in a script
end

if arg and arg[0] and arg[0]:find("fuzz%.lua$") and not package.loaded["spec.fuzz"] then
  main(arg)
end

M.KNOWN = KNOWN
return M
