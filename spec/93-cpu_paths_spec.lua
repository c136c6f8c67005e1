-- The cpu device's speed (issue #18; doc/cpu-device.md, "Kernel paths and the launch worker"): which kernels
-- run their threads as a loop and which need fibers (k.cpu_path, NOTE [kernel paths] in src/cpu_compile.c),
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
    assert.are.equal("loop", m["add<3>"].cpu_path)   -- a template: no fast path
    assert.are.equal("fission", m.direct.cpu_path)   -- a barrier at the top level of its body
    assert.are.equal("fibers", m.through_macro.cpu_path)
    assert.are.equal("fission", m.shuffles.cpu_path)   -- a statement the warp fission takes (NOTE [warp fission])
    assert.are.equal("fibers", m.shuffle_in_expression.cpu_path)
  end)

  it("a barrier behind a macro or a chain of device functions gives fibers", function()
    assert.are.equal("fibers", m.through_macro.cpu_path)
    assert.are.equal("fibers", m.through_calls.cpu_path)
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
    -- the worker takes two messages a launch. os.clock counts this process's CPU time (the fork's copying).
    local cpu_s = os.clock() - t0
    heap = nil
    assert.is_true(cpu_s < 0.5, ("300 contained launches over a 256 MiB heap took %.3f s of CPU"):format(cpu_s))
    assert.is_true(os.time() - w0 < 30)
  end)
end)
