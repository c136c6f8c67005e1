-- The cpu device's checked memory mode (issue 30; doc/cpu-device.md, "Checked memory mode"; NOTE [checked memory] in
-- src/cpu_checked.c): with CUDADEV_CPU_CHECK=memory or cd.compile's {cpu_check = "memory"}, every load and store
-- of a kernel through its pointers is checked against the Arrays of the launch, as compute-sanitizer's memcheck
-- does on a GPU. Every off-by-one size from 1 to 4097 elements is caught for float32, float64 and int8, loads and
-- stores; the conformance suite runs checked without a false alarm.
local helper = require "spec.helper"
local cd = require "cudadev"

local CPU = { device = "cpu" }
local CHECKED = { device = "cpu", cpu_check = "memory" }
local fork_it = os.getenv("CUDADEV_CPU_FORK") == "0"
  and function(name) return pending(name .. " (CUDADEV_CPU_FORK=0: the case is about contained launches)") end or it

-- one kernel per dtype that loads x[n] (one past the end) and one that stores y[n], in the thread n
local PAIR = [[
extern "C" __global__ void load_NAME(unsigned n, const T *x, T *out) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i == n) out[0] = x[i];
}
extern "C" __global__ void store_NAME(unsigned n, T *y) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i == n) y[i] = (T)1;
}
]]
local SWEEP = PAIR:gsub("NAME", "float32"):gsub("T ", "float "):gsub("%(T%)", "(float)")
  .. PAIR:gsub("NAME", "float64"):gsub("T ", "double "):gsub("%(T%)", "(double)")
  .. PAIR:gsub("NAME", "int8"):gsub("T ", "signed char "):gsub("%(T%)", "(signed char)")

-- the error text of an access one past the end of an n-element Array (parameter #2, 256-thread blocks); a chunk,
-- so that the sweep's child process has it too
local PAST_END = [=[
local SIZES = { float32 = 4, float64 = 8, int8 = 1 }
return function(op, kernel, param, dtype, n)
  local size = SIZES[dtype]
  return ("kernel '%s' out-of-bounds %s of %d byte%s at element %d of "
    .. "parameter #2 '%s': %d byte%s past the end of its %d bytes (block (%d,0,0), thread (%d,0,0))"):format(kernel, op,
    size, size == 1 and "" or "s", n, param, size, size == 1 and "" or "s", n * size, n // 256, n % 256)
end, SIZES
]=]
local past_end, SIZES = load(PAST_END)()

-- the sweep: the sizes caught and the first wrong message
local SWEEP_CODE = [=[
local src, past_end, top, cd = ...
local m = cd.compile(src, { device = "cpu", cpu_check = "memory" })
local caught, wrong = 0, nil
for _, dtype in ipairs({ "float32", "float64", "int8" }) do
  local out = cd.zeros(1, dtype, { device = "cpu" })
  for n = 1, top do
    local x = cd.zeros(n, dtype, { device = "cpu" })
    local cfg = { grid = n // 256 + 1, block = 256 }
    for _, op in ipairs({ "load", "store" }) do
      local ok, err
      if op == "load" then
        ok, err = pcall(m["load_" .. dtype], cfg, n, x, out)
      else
        ok, err = pcall(m["store_" .. dtype], cfg, n, x)
      end
      if not ok and err.message == past_end(op, op .. "_" .. dtype, op == "load" and "x" or "y", dtype, n) then
        caught = caught + 1
      elseif not wrong then
        wrong = ("n = %d, %s of %s: %s"):format(n, op, dtype, ok and "no error" or tostring(err))
      end
    end
    x:free()
  end
end
return caught, wrong
]=]

-- fn must fail as a checked access does, with the message want
local function fails(fn, want)
  local ok, err = pcall(fn)
  assert.is_false(ok, "the launch returned normally")
  assert.are.same({ "cpu.launch", "CUDA_ERROR_ILLEGAL_ADDRESS", want }, { err.api, err.name, err.message })
end

describe("the checked memory mode of the cpu device", function()
  it("catches every off-by-one size from 1 to 4097 elements for float32, float64 and int8, loads and stores", function()
    -- in a child with launches in its own process: a failed contained launch ends the launch worker, and 24,582
    -- new workers would take minutes (the contained path has cases of its own below)
    local code = ("local past_end = load(%q)()\nprint(load(%q)(%q, past_end, 4097, cd))\n"):format(PAST_END, SWEEP_CODE,
      SWEEP)
    local out = helper.run_child(code, "CUDADEV_CPU_FORK=0")
    assert.are.equal("24582\tnil\nexit 0\n", out)
  end)

  fork_it("catches loads and stores one past the end in contained launches (the launch worker) too", function()
    local m = cd.compile(SWEEP, CHECKED)
    for _, n in ipairs({ 1, 255, 256, 257, 4097 }) do
      for dtype in pairs(SIZES) do
        local x, out = cd.zeros(n, dtype, CPU), cd.zeros(1, dtype, CPU)
        local cfg = { grid = n // 256 + 1, block = 256 }
        fails(function() m["load_" .. dtype](cfg, n, x, out) end,
          past_end("load", "load_" .. dtype, "x", dtype, n))
        fails(function() m["store_" .. dtype](cfg, n, x) end,
          past_end("store", "store_" .. dtype, "y", dtype, n))
      end
    end
  end)

  it("runs correct kernels unchanged and says why they are off their fast paths", function()
    local m, plain = cd.compile(SWEEP, CHECKED), cd.compile(SWEEP, CPU)
    local x, out = cd.arange(10, "float32", CPU), cd.zeros(1, "float32", CPU)
    m.load_float32({ grid = 1, block = 256 }, 9, x, out)
    assert.are.equal(9, out[1])
    m.store_float32({ grid = 1, block = 256 }, 3, x)
    assert.are.same({ 0, 1, 2, 1, 4, 5, 6, 7, 8, 9 }, x:totable())
    assert.are.equal("compiled in the checked memory mode (CUDADEV_CPU_CHECK, cpu_check)", m.load_float32.cpu_reason)
    assert.are_not.equal(m.load_float32.cpu_reason, plain.load_float32.cpu_reason)
  end)

  local SHAPES = [[
__device__ void put(float *p, int i, float v) { p[i] = v; }
extern "C" __global__ void dev_store(int n, float *y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i <= n) put(y, i, 2.0f);
}
extern "C" __global__ void local_ptr(int n, float *y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float *p = y + i, *q = y;
  if (i == n - 1) p[1] = q[0];
}
extern "C" __global__ void vec4(int n4, const float *x, float *out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n4) {
    float4 v = reinterpret_cast<const float4 *>(x)[i];
    out[i] = v.x + v.y + v.z + v.w;
  }
}
extern "C" __global__ void before(int n, const double *x, double *out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = x[i - 1];
}
extern "C" __global__ void star(int n, int *y) {
  int *p = y + threadIdx.x;
  if (threadIdx.x == n) *p = 5;
}
extern "C" __global__ void with_barrier(int n, float *y) {
  __shared__ float s[64];
  s[threadIdx.x] = threadIdx.x;
  __syncthreads();
  if (threadIdx.x == 63) y[n + 2] = s[0];
}
extern "C" __global__ void rmw(int n, unsigned *y) {
  if (threadIdx.x == 0) y[n] += 1;
}
extern "C" __global__ void atom(int n, unsigned *y) {
  if (threadIdx.x == 0) atomicAdd(&y[n], 1u);
}
]]
  local function message(kernel, what)
    return "kernel '" .. kernel .. "' out-of-bounds " .. what
  end

  it("follows a pointer into a __device__ function, a local, a reinterpret_cast and the fibers of a barrier", function()
    local m = cd.compile(SHAPES, CHECKED)
    local y, cfg = cd.zeros(10, "float32", CPU), { grid = 1, block = 32 }
    local tail = ": 4 bytes past the end of its 40 bytes (block (0,0,0), thread (%d,0,0))"
    fails(function() m.dev_store(cfg, 10, y) end,
      message("dev_store", "store of 4 bytes at element 10 of parameter #2 'y'" .. tail:format(10)))
    fails(function() m.local_ptr(cfg, 10, y) end,
      message("local_ptr", "store of 4 bytes at element 10 of parameter #2 'y'" .. tail:format(9)))
    fails(function() m.vec4(cfg, 3, y, cd.zeros(3, "float32", CPU)) end,
      message("vec4", "load of 16 bytes at element 2 of parameter #2 'x': 8 bytes past the end of its 40 bytes "
        .. "(block (0,0,0), thread (2,0,0))"))
    fails(function() m.before(cfg, 3, cd.zeros(3, "float64", CPU), cd.zeros(3, "float64", CPU)) end,
      message("before", "load of 8 bytes at element -1 of parameter #2 'x': 8 bytes before the start of its 24 bytes "
        .. "(block (0,0,0), thread (0,0,0))"))
    fails(function() m.star(cfg, 10, cd.zeros(10, "int32", CPU)) end,
      message("star", "store of 4 bytes at element 10 of parameter #2 'y'" .. tail:format(10)))
    fails(function() m.with_barrier({ grid = 1, block = 64 }, 10, y) end,
      message("with_barrier", "store of 4 bytes at element 12 of parameter #2 'y': 12 bytes past the end of its 40 "
        .. "bytes (block (0,0,0), thread (63,0,0))"))
    assert.are.equal("fibers", m.with_barrier.cpu_path)
    fails(function() m.rmw(cfg, 10, cd.zeros(10, "uint32", CPU)) end,
      message("rmw", "store of 4 bytes at element 10 of parameter #2 'y'" .. tail:format(0)))
    fails(function() m.atom(cfg, 10, cd.zeros(10, "uint32", CPU)) end,
      message("atom", "access of 4 bytes at element 10 of parameter #2 'y'" .. tail:format(0)))
  end)

  -- what the rewriter must leave compiling: a typedef'd pointer, a struct with a pointer member and a method, a
  -- function template taking a pointer (called with checked ones), pointer loops, a forward declaration, `return
  -- a * b`, a lambda, extern __shared__, nullptr, void and char pointers, casts of every kind, pointer differences,
  -- pointers to pointers, a function pointer
  local SHAPES2 = [=[
#include <cuda_runtime.h>
typedef float *fptr;
struct Pair { float *a; int n; __device__ float first() const { float *p = a; return p[0]; } };
template <class T> __device__ T ld(const T *p, int i) { return p[i]; }
__device__ float sum3(const float *__restrict__ p) { const float *q = p; float s = 0; for (const float *r = q; r < q + 3; ++r) s += *r; return s; }
extern "C" __global__ void fwd(int n, const float *x, float *y);
__device__ int twice(int a, int b) { return a * b; }
extern "C" __global__ void fwd(int n, const float *x, float *y) {
  extern __shared__ float dyn[];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float *const yy = y;
  auto f = [&](int k) { return x[k] * 2.0f; };
  if (i < n) {
    dyn[threadIdx.x] = ld(&x[0], i);
    yy[i] = f(i) + twice(2, 3) + (i + 3 <= n ? sum3(x + i) : 0.0f);
    float *p = nullptr;
    if (p == nullptr && !p) p = y;
    if (p != y) return;
    const void *v = x; (void)v;
    const char *bytes = reinterpret_cast<const char *>(x); (void)bytes;
    unsigned long long addr = reinterpret_cast<unsigned long long>(x); (void)addr;
    int *ip = (int *)y; (void)ip;
    const float *cp = static_cast<const float *>(y); (void)cp;
    ptrdiff_t d = (y + n) - y; (void)d;
    size_t k = i; y[k] = y[k] * 1.0f;
  }
}
extern "C" __global__ void pp(float **ptrs, void *raw, Pair pr, int (*fn)(int)) { (void)ptrs; (void)raw; (void)pr; (void)fn; }
template <typename T> __global__ void tk(int n, const T *in, T *out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = ld(in, i) + T(1);
}
]=]
  it("compiles what kernels write around pointers, with the results of the unchecked build", function()
    local got = {}
    for _, mode in ipairs({ "memory", "none" }) do
      local m = cd.compile(SHAPES2, { device = "cpu", cpu_check = mode, name_expressions = { "tk<float>", "tk<int>" } })
      local x, y, z = cd.arange(8, "float32", CPU), cd.zeros(8, "float32", CPU), cd.zeros(8, "float32", CPU)
      m.fwd({ grid = 1, block = 8, shared = 64 }, 8, x, y)
      m["tk<float>"]({ grid = 1, block = 8 }, 8, x, z)
      got[#got + 1] = { y:totable(), z:totable() }
    end
    assert.are.same({ { 9, 14, 19, 24, 29, 34, 18, 20 }, { 1, 2, 3, 4, 5, 6, 7, 8 } }, got[1])
    assert.are.same(got[2], got[1])
  end)

  it("checks a view against the view's own elements", function()
    local m = cd.compile(SWEEP, CHECKED)
    local base = cd.zeros(20, "float32", CPU)
    fails(function() m.store_float32({ grid = 1, block = 256 }, 5, base:slice(3, 7)) end,
      past_end("store", "store_float32", "y", "float32", 5))
  end)

  it("is a compile option: cpu_check = 'none' compiles unchecked even under CUDADEV_CPU_CHECK=memory", function()
    local out = helper.run_child([[
local src = 'extern "C" __global__ void k(int n, float *y) { if (threadIdx.x == 0) y[n] = 1; }'
local m, plain = cd.compile(src, { device = "cpu" }), cd.compile(src, { device = "cpu", cpu_check = "none" })
print(m.k.cpu_reason)
print(plain.k.cpu_reason)
local ok, err = pcall(m.k, { grid = 1, block = 1 }, 4, cd.zeros(4, "float32", { device = "cpu" }))
print(err.message)
]], "CUDADEV_CPU_CHECK=memory")
    assert.are.equal("compiled in the checked memory mode (CUDADEV_CPU_CHECK, cpu_check)\nnil\n"
      .. "kernel 'k' out-of-bounds store of 4 bytes at element 4 of parameter #2 'y': 4 bytes past the end of its 16 "
      .. "bytes (block (0,0,0), thread (0,0,0))\nexit 0\n", out)
  end)

  it("refuses a value of cpu_check or CUDADEV_CPU_CHECK that is no mode, by name", function()
    helper.assert_error_matches(function() cd.compile(SWEEP, { device = "cpu", cpu_check = "memcheck" }) end,
      "bad option 'cpu_check' to 'compile' (expected \"memory\" or \"none\", got memcheck)")
    local out = helper.run_child([[
local ok, err = pcall(cd.compile, 'extern "C" __global__ void k() {}', { device = "cpu" })
print(err.message)
]], "CUDADEV_CPU_CHECK=memcheck")
    assert.are.equal("CUDADEV_CPU_CHECK must be 'memory' or 'none', not 'memcheck'\nexit 0\n", out)
  end)

  it("compiles every group of the conformance suite checked", function()
    local K = dofile("spec/conformance_kernels.lua")
    for name, g in pairs(K) do
      local m = cd.compile(g.source, { device = "cpu", cpu_check = "memory", name_expressions = g.name_expressions })
      assert.is_not_nil(m, name)
    end
  end)

  it("runs spec/94's random kernels checked with the results of the unchecked fibers (no false alarm)", function()
    -- a macro before a declaration (`FORCE unsigned *const s = ...` of an extern __shared__ array) is no part of its
    -- type: the rewriter reads the type backwards from the `*`
    local gen = require "spec.cpu_random_kernels"
    local src, entries, launches = gen.gen(29, 48)
    src = "#define FORCE if (0) __syncwarp();\n" .. src
    local chk = cd.compile(src, { device = "cpu", cpu_check = "memory", name_expressions = entries })
    local ref = cd.compile(src, { device = "cpu", name_expressions = entries })
    for _, l in ipairs(launches) do
      local n = 3 * l.nt
      local input = {}
      for i = 1, n do input[i] = (i * 2654435761) % 4294967296 end
      local outs = {}
      for k, m in ipairs({ chk, ref }) do
        local out = cd.zeros(n, "uint32", CPU)
        m[l.name]({ grid = 3, block = l.block, shared = l.shared }, cd.array(input, "uint32", CPU), out, 2)
        outs[k] = out:totable()
      end
      assert.are.same(outs[2], outs[1], l.name)
    end
  end)

  it("runs the conformance suite checked with the same results as unchecked (no false alarm)", function()
    -- spec/60 under CUDADEV_CPU_CHECK=memory, beside a spec of one case that sees the mode on (spec/60 itself
    -- would pass unchecked too)
    local base = os.tmpname()
    local probe = base .. "_spec.lua"
    local f = assert(io.open(probe, "w"))
    f:write([=[
local cd = require "cudadev"
it("compiles checked", function()
  local m = cd.compile('extern "C" __global__ void k(float *x) { x[0] = 1; }', { device = "cpu" })
  assert.are.equal("compiled in the checked memory mode (CUDADEV_CPU_CHECK, cpu_check)", m.k.cpu_reason)
end)
]=])
    f:close()
    local busted = io.popen("command -v busted || echo /usr/bin/busted"):read("l")
    local p = io.popen("CUDADEV_CPU_CHECK=memory lua5.4 " .. busted .. " -o utfTerminal spec/60-conformance_spec.lua "
      .. probe .. " 2>&1")
    local out = p:read("a")
    p:close()
    os.remove(probe)
    os.remove(base)
    -- spec/60's 45 cases and the probe; a GPU host adds spec/60's cuda:0 cases
    local ok = tonumber(out:match("(%d+) successes / 0 failures / 0 errors"))
    assert.is_truthy(ok and ok >= 46, out)
  end)

  helper.gpu_it("is ignored on a GPU (compute-sanitizer is the tool there)", function()
    local m = cd.compile(SWEEP, { cpu_check = "memory" })
    local x, out = cd.arange(10, "float32"), cd.zeros(1, "float32")
    m.load_float32({ grid = 1, block = 256 }, 9, x, out)
    assert.are.equal(9, out[1])
  end)
end)
