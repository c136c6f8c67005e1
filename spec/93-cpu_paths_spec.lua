-- The cpu device's speed (issue #18; doc/cpu-device.md, "Kernel paths and the launch worker"): which kernels
-- run their threads as a loop and which need fibers (k.cpu_path, NOTE [kernel paths] in src/cpu_scan.c),
-- and contained launches through one persistent launch worker instead of a fork per launch (NOTE [launch
-- worker] in src/cpu_run.c): what it sees, how it fails, and that its cost does not grow with the Lua heap.
local helper = require "spec.helper"
local cd = require "cudadev"

local CPU = { device = "cpu" }
local worker_it = helper.worker_it

local PATHS = [[
#define BARRIER() __syncthreads()
__device__ float twice(float v) { return 2.0f * v; }
__device__ float first_after_sync(const float *s) { BARRIER(); return s[0]; }
__device__ float indirect(const float *s) { return first_after_sync(s); }
extern "C" __global__ void plain(float *x) { x[threadIdx.x] = twice(x[threadIdx.x]); }
extern "C" __global__ void direct(float *x)
{
  __shared__ float s[64];
  s[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  x[threadIdx.x] = s[63 - threadIdx.x];
}
extern "C" __global__ void through_macro(float *x)
{
  __shared__ float s[64];
  s[threadIdx.x] = x[threadIdx.x];
  BARRIER();
  x[threadIdx.x] = s[0];
}
extern "C" __global__ void through_calls(float *x)
{
  __shared__ float s[64];
  if (threadIdx.x == 0) s[0] = 5.0f;
  x[threadIdx.x] = indirect(s);
}
extern "C" __global__ void shuffles(float *x)
{
  x[threadIdx.x] = __shfl_down_sync(0xffffffffu, x[threadIdx.x], 1);
}
extern "C" __global__ void shuffle_in_expression(float *x)
{
  x[threadIdx.x] = 2.0f * __shfl_down_sync(0xffffffffu, x[threadIdx.x], 1);
}
template <int N> __global__ void add(float *x) { x[threadIdx.x] += N; }
]]

describe("cpu kernel paths (k.cpu_path)", function()
  local m
  setup(function()
    m = cd.compile(PATHS, { device = "cpu", name_expressions = { "add<3>" } })
  end)
  teardown(function() m = nil end)   -- the suite checks that no object outlives its file

  it("a kernel that reaches no barrier or warp intrinsic runs as a loop, beside kernels that need fibers", function()
    assert.are.equal("simd", m.plain.cpu_path)       -- the loop, written out by NOTE [fast paths]
    assert.are.equal("simd", m["add<3>"].cpu_path)   -- a template instance: a fast path too (issue #29)
    assert.are.equal("fission", m.direct.cpu_path)   -- a barrier at the top level of its body
    assert.are.equal("fission", m.through_macro.cpu_path)   -- BARRIER() is __syncthreads() (issue #29)
    assert.are.equal("fission", m.shuffles.cpu_path)   -- a statement the warp fission takes (NOTE [warp fission])
    assert.are.equal("fission", m.shuffle_in_expression.cpu_path)   -- in a larger expression too (issue #29)
  end)

  it("a barrier behind a macro that is __syncthreads() takes fission; a chain of device functions gives fibers",
    function()
    assert.are.equal("fission", m.through_macro.cpu_path)   -- issue #29 (NOTE [barrier if])
    assert.are.equal("fibers", m.through_calls.cpu_path)
  end)

  it("k.cpu_reason names what keeps a kernel off its fast path, with its line; nil on simd and fission", function()
    assert.is_nil(m.plain.cpu_reason)
    assert.is_nil(m.direct.cpu_reason)
    assert.are.equal("calls 'indirect', which reaches a barrier or warp operation, inside an expression (line 24)",
      m.through_calls.cpu_reason)   -- a call that is no statement of its own is not written in (NOTE [inlined helpers])
    local m2 = cd.compile([[
__global__ void block(float *y)
{
  __shared__ float s[64];
  s[threadIdx.x] = y[threadIdx.x];
  { __syncthreads(); }
  y[threadIdx.x] = s[0];
}
__global__ void label(float *y)
{
  int i = threadIdx.x;
again:
  y[i] += 1;
  if (y[i] < 3) goto again;
}
]], CPU)
    assert.are.equal("fibers", m2.block.cpu_path)
    assert.are.equal("a barrier in a nested block, a switch or an expression (line 5)", m2.block.cpu_reason)
    assert.are.equal("loop", m2.label.cpu_path)
    assert.are.equal("a label (line 11)", m2.label.cpu_reason)
  end)

  it("every path computes what CUDA would", function()
    local x = cd.array((function() local t = {} for i = 1, 64 do t[i] = i end return t end)(), "float32", CPU)
    m.plain({ grid = 1, block = 64 }, x)
    assert.are.same({ 2, 4, 128 }, { x[1], x[2], x[64] })
    m.direct({ grid = 1, block = 64 }, x)
    assert.are.same({ 128, 126, 2 }, { x[1], x[2], x[64] })
    m["add<3>"]({ grid = 1, block = 64 }, x)
    assert.are.same({ 131, 129, 5 }, { x[1], x[2], x[64] })
    m.through_calls({ grid = 1, block = 64 }, x)
    assert.are.same({ 5, 5 }, { x[1], x[64] })
    m.shuffles({ grid = 1, block = 64 }, x)
    assert.are.equal(5, x[1])
  end)

  it("a sync word in a class body gives every kernel of the source fibers", function()
    local m2 = cd.compile([[
struct Block { __device__ void sync() { __syncthreads(); } };
extern "C" __global__ void k(int *p) { p[threadIdx.x] = 1; }
]], CPU)
    assert.are.equal("fibers", m2.k.cpu_path)
  end)

  it("kernels named like the trampoline's parameters (a, c, m) compile", function()
    local m3 = cd.compile([[
extern "C" __global__ void a(int *p) { p[0] += 1; }
extern "C" __global__ void c(int *p) { p[0] += 10; }
extern "C" __global__ void m(int *p) { p[0] += 100; }
]], CPU)
    local p = cd.zeros(1, "int32", CPU)
    m3.a({ grid = 1, block = 1 }, p); m3.c({ grid = 1, block = 1 }, p); m3.m({ grid = 1, block = 1 }, p)
    assert.are.equal(111, p[1])
  end)

  worker_it("a loop-path kernel that faults is contained", function()
    local m4 = cd.compile('extern "C" __global__ void k(int *p) { if (threadIdx.x == 7) *(volatile int *)0 = 1; }',
      CPU)
    assert.are.equal("simd", m4.k.cpu_path)
    local ok, err = pcall(m4.k, { grid = 2, block = 32 }, cd.zeros(1, "int32", CPU))
    assert.is_false(ok)
    -- both blocks fault: either may be the one named (spec/90 has many blocks that fault at once)
    assert.is_truthy(err.message:match("^kernel 'k' crashed on the cpu device: SIGSEGV %(segmentation fault%) at "
      .. "address 0x0 %(block %([01],0,0%), thread %(7,0,0%)%)$"), err.message)
  end)
end)

describe("the cpu launch worker", function()
  local SRC = [[
__device__ int counter;
extern "C" __global__ void bump(int *p, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) p[i] += 1; }
extern "C" __global__ void count() { atomicAdd(&counter, 1); }
extern "C" __global__ void read_counter(int *out) { *out = counter; }
extern "C" __global__ void crash(int *p) { *(volatile int *)0 = p[0]; }
]]

  worker_it("arrays and modules made after earlier launches reach it", function()
    local m = cd.compile(SRC, CPU)
    local a = cd.zeros(10000, "int32", CPU)
    m.bump({ grid = 40, block = 256 }, a, 10000)
    local b = cd.zeros(20000, "int32", CPU)   -- a new mapping after the worker started
    m.bump({ grid = 80, block = 256 }, b, 20000)
    m.bump({ grid = 40, block = 256 }, a, 10000)
    assert.are.same({ 2, 2, 1, 1 }, { a[1], a[10000], b[1], b[20000] })
    local m2 = cd.compile(SRC .. "\n// another module\n", CPU)   -- a new object after the worker started
    local c = cd.zeros(3000, "int32", CPU)
    m2.bump({ grid = 12, block = 256 }, c, 3000)
    assert.are.same({ 1, 1 }, { c[1], c[3000] })
  end)

  worker_it("a module's globals keep their values across launches and a fresh worker", function()
    local m = cd.compile(SRC .. "\n// globals\n", CPU)
    local out = cd.zeros(1, "int32", CPU)
    m.count({ grid = 2, block = 20 })
    m.read_counter({ grid = 1, block = 1 }, out)
    assert.are.equal(40, out[1])
    assert.is_false(pcall(m.crash, { grid = 1, block = 1 }, out))
    m.count({ grid = 1, block = 2 })
    m.read_counter({ grid = 1, block = 1 }, out)
    assert.are.equal(42, out[1])
  end)

  worker_it("a crash ends only that launch: the next one runs on a fresh worker with the same memory", function()
    local m = cd.compile(SRC .. "\n// crash\n", CPU)
    local a = cd.zeros(5000, "int32", CPU)
    m.bump({ grid = 20, block = 256 }, a, 5000)
    for _ = 1, 3 do
      local ok, err = pcall(m.crash, { grid = 1, block = 1 }, a)
      assert.is_false(ok)
      assert.are.equal("kernel 'crash' crashed on the cpu device: SIGSEGV (segmentation fault) at address 0x0 "
        .. "(block (0,0,0), thread (0,0,0))", err.message)
      m.bump({ grid = 20, block = 256 }, a, 5000)
    end
    assert.are.same({ 4, 4 }, { a[1], a[5000] })
  end)

  worker_it("the cost of a contained launch does not grow with the Lua heap (no fork per launch)", function()
    local m = cd.compile('extern "C" __global__ void empty() {}\n// heap\n', CPU)
    local heap = {}
    for i = 1, 256 do heap[i] = string.rep(string.char(65 + i % 26), (1 << 20) - 32) .. i end   -- 256 MiB
    local cfg = { grid = 1, block = 1 }
    m.empty(cfg)
    local t0 = os.clock()
    local w0 = os.time()
    for _ = 1, 300 do m.empty(cfg) end
    -- a fork per launch copies the page tables of 256 MiB each time: about 10 ms a launch, 3 s for 300;
    -- the worker takes a handshake a launch. os.clock counts this process's CPU time (the fork's copying).
    local cpu_s = os.clock() - t0
    heap = nil
    assert.is_true(cpu_s < 0.5, ("300 contained launches over a 256 MiB heap took %.3f s of CPU"):format(cpu_s))
    assert.is_true(os.time() - w0 < 30)
  end)
end)

-- NOTE [launch handshake] in src/cpu_run.c: a launch is a counter in shared memory that the other side spins on,
-- then sleeps on the socket for; the socket's end is still how either side sees the other die.
describe("the cpu launch worker's handshake", function()
  local SRC = [[
extern "C" __global__ void empty() {}
extern "C" __global__ void spin(volatile int *stop) { while (!stop[0]) {} }
extern "C" __global__ void put(int *p, int v) { p[threadIdx.x] = v + threadIdx.x; }
]]
  local function module() return cd.compile(SRC .. "\n// handshake\n", CPU) end

  -- the launch worker: the child process of this one that runs the same program (compilers are other programs)
  local function worker_pid()
    local f = assert(io.open("/proc/self/stat"))
    local me = f:read("l"):match("^(%d+)")
    f:close()
    local function cmdline(pid)
      local c = io.open("/proc/" .. pid .. "/cmdline", "rb")
      local s = c and c:read("a")
      if c then c:close() end
      return s
    end
    local mine = cmdline(me)
    for task in io.popen("ls /proc/" .. me .. "/task"):lines() do
      local c = io.open("/proc/" .. me .. "/task/" .. task .. "/children")
      for pid in (c and c:read("a") or ""):gmatch("%d+") do
        if cmdline(pid) == mine then c:close(); return pid end
      end
      if c then c:close() end
    end
  end

  worker_it("a worker killed while idle is replaced and the launch runs", function()
    local m = module()
    local a = cd.zeros(4, "int32", CPU)
    m.put({ grid = 1, block = 4 }, a, 10)
    for round = 1, 3 do
      local pid = assert(worker_pid(), "no launch worker")
      assert.is_true(os.execute("kill -KILL " .. pid))
      m.put({ grid = 1, block = 4 }, a, 10 * round)
      assert.are.same({ 10 * round, 10 * round + 3 }, { a[1], a[4] })
      assert.are_not.equal(pid, worker_pid())
    end
  end)

  worker_it("a worker killed while it runs a kernel ends that launch with an error, not a hang", function()
    local m = module()
    local stop = cd.zeros(1, "int32", CPU)
    m.empty({ grid = 1, block = 1 })
    local pid = assert(worker_pid(), "no launch worker")
    assert.is_true(os.execute("(sleep 0.3; kill -KILL " .. pid .. ") >/dev/null 2>&1 &"))
    local ok, err = pcall(m.spin, { grid = 1, block = 1 }, stop)
    assert.is_false(ok)
    assert.are.equal("kernel 'spin' crashed on the cpu device: SIGKILL (killed)", err.message)
    local a = cd.zeros(4, "int32", CPU)
    m.put({ grid = 1, block = 4 }, a, 7)
    assert.are.same({ 7, 10 }, { a[1], a[4] })
  end)

  worker_it("launches after pauses and launches that outlast the spin both end (the sleeping sides are woken)", function()
    local m = module()
    local a = cd.zeros(4, "int32", CPU)
    for i = 1, 20 do
      if i % 4 == 0 then os.execute("sleep 0.01") end   -- the worker has slept when the launch comes
      m.put({ grid = 1, block = 4 }, a, i)
      assert.are.equal(i + 3, a[4])
    end
    local big = cd.zeros(1 << 22, "int32", CPU)   -- about 1 ms: the host sleeps for its end
    for i = 1, 5 do
      m.put({ grid = 1, block = 4 }, a, i)
      big:fill(i)
      assert.are.equal(i, big[1 << 22])
    end
  end)

  -- A loose bound: on two free cores an empty launch takes about 7 us (NOTE [launch handshake]), a byte each way
  -- on the socket took 30 us and a fork per launch 260 us with an empty heap; on a loaded machine any of them
  -- may take 100 us, so this only catches a launch that falls back to a fork each time or waits for a whole
  -- time slice (2 ms): the best of 10 batches, each of 100 launches.
  worker_it("an empty contained launch costs under 200 us in the best of 10 batches", function()
    local m = module()
    local now = require("system").monotime
    local cfg = { grid = 1, block = 1 }
    for _ = 1, 50 do m.empty(cfg) end
    local best = math.huge
    for _ = 1, 10 do
      local t0 = now()
      for _ = 1, 100 do m.empty(cfg) end
      local t1 = now()
      best = math.min(best, (t1 - t0) / 100 * 1e6)
    end
    assert.is_true(best < 200, ("an empty contained launch took %.1f us in the best batch"):format(best))
  end)
end)

-- Issue #29: a C++ kernel found by its mangled name, as the driver API asks for it (NOTE [mangled names])
local MANGLED = [[
struct pt { float x, y; };
__global__ void kernel(float *x, int n) { x[threadIdx.x] += n; }
__global__ void add(float *a, float *b, const float *c, size_t n)
{
  if (threadIdx.x < n) a[threadIdx.x] = b[threadIdx.x] + c[threadIdx.x];
}
__global__ void mixed(const pt *p, pt *q, unsigned char u, long long v, const int *const *pp, const pt w) {}
extern "C" __global__ void plain_c(float *x) {}
template <typename T> __global__ void tmpl(T *x) {}
]]

describe("kernels by their mangled names", function()
  local function check(dev)
    local m = cd.compile(MANGLED, { device = dev, name_expressions = { "tmpl<float>" } })
    -- what g++ names them (nm of the same declarations)
    assert.are.equal("kernel", m["_Z6kernelPfi"].name)
    assert.are.equal("add", m["_Z3addPfS_PKfm"].name)   -- the second float * is a substitution
    assert.are.equal("mixed", m["_Z5mixedPK2ptPS_hxPKPKiS_"].name)
    local x = cd.zeros(4, "float32", { device = dev })
    m["_Z6kernelPfi"]({ grid = 1, block = 4 }, x, 3)
    assert.are.same({ 3, 3, 3, 3 }, x:totable())
    assert.has_error(function() return m._Z7plain_cPf end, "module has no kernel '_Z7plain_cPf' (kernels: kernel, add, "
      .. "mixed, plain_c, tmpl<float>)")   -- extern "C": its name is its symbol
  end
  it("on the cpu device", function() check("cpu") end)
  helper.gpu_it("on cuda:0, by NVRTC's lowered names", function() check("cuda:0") end)
end)
