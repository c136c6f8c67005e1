-- The cpu device's fast paths (issue #18; doc/cpu-device.md, "Kernel paths"; NOTE [fast paths] in
-- src/cpu_compile.c): a barrier-free kernel written out as a loop over its block's threads ("simd"), a kernel
-- with barriers at the top level of its body or of a loop split at its barriers into such loops ("fission"),
-- and the fallback to fibers wherever the transformation does not apply. Every kernel here is compiled twice:
-- once as it is, once with FORCE defined as a dead __syncwarp(), which puts it on the fiber path; both must
-- compute the same.
local helper = require "spec.helper"
local cd = require "cudadev"

local CPU = { device = "cpu" }
local worker_it = helper.worker_it

local SRC = [[
struct Pair { int a, b; };

extern "C" __global__ void guarded(int n, float a, const float *x, float *y)
{
  FORCE
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  y[i] = a * x[i] + y[i];
}

extern "C" __global__ void tree(const float *x, float *out)
{
  FORCE
  __shared__ float s[128];
  unsigned t = threadIdx.x;
  s[t] = x[blockIdx.x * 128 + t];
  __syncthreads();
  for (unsigned h = 64; h > 0; h >>= 1) {
    if (t < h) s[t] += s[t + h];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = s[0];
}

// 8x4 threads; a per-thread accumulator and indices live across barriers inside a loop
extern "C" __global__ void tiles(int n, const float *A, float *out)
{
  FORCE
  __shared__ float tile[4][8];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * 4 + ty, col = blockIdx.x * 8 + tx;
  float acc = 0.0f, last;
  for (int k = 0; k < n; k += 8) {
    tile[ty][tx] = A[row * n + k + tx] * (float)(col + 1);
    __syncthreads();
#pragma unroll
    for (int j = 0; j < 8; j++) acc += tile[ty][j];
    last = tile[ty][7 - tx];
    __syncthreads();
  }
  out[row * n + col] = acc + last;
}

// threads past n leave before the barrier; divergent branches on both sides of it
extern "C" __global__ void diverge(int n, const int *in, int *out)
{
  FORCE
  __shared__ int s[64];
  int t = threadIdx.x;
  if (t >= n) return;
  int v = in[t];
  if (v % 3 == 0) v = -v; else if (v % 3 == 1) v *= 2;
  s[t] = v;
  __syncthreads();
  int w = s[(t + 1) % n];
  if (w < 0) { out[t] = w - v; return; }
  out[t] = w + v;
}

extern "C" __global__ void count(const int *in, int *out)
{
  FORCE
  __shared__ int hits;
  if (threadIdx.x == 0) hits = 0;
  __syncthreads();
  if (in[blockIdx.x * blockDim.x + threadIdx.x] > 10) atomicAdd(&hits, 1);
  atomicAdd(&out[0], in[blockIdx.x * blockDim.x + threadIdx.x]);
  __syncthreads();
  if (threadIdx.x == 0) out[1 + blockIdx.x] = hits;
}

extern "C" __global__ void dyn(float *x)
{
  FORCE
  extern __shared__ float buf[];
  unsigned t = threadIdx.x, n = blockDim.x;
  buf[t] = x[t];
  __syncthreads();
  x[t] = buf[n - 1 - t] + (float)t;
}

extern "C" __global__ void nested(float *x)
{
  FORCE
  __shared__ float s[32];
  s[threadIdx.x] = x[threadIdx.x];
  if (x[0] > -1.0f) { __syncthreads(); }
  x[threadIdx.x] = s[31 - threadIdx.x];
}

extern "C" __global__ void counter_written(float *x)
{
  FORCE
  __shared__ float s[32];
  for (int i = 0; i < 4; i++) {
    s[threadIdx.x] = x[threadIdx.x] + (float)i;
    __syncthreads();
    x[threadIdx.x] = s[(threadIdx.x + 1) % 32];
    i += 1;
    __syncthreads();
  }
}

extern "C" __global__ void loop_break(float *x)
{
  FORCE
  __shared__ float s[32];
  for (int i = 0; i < 4; i++) {
    s[threadIdx.x] = x[threadIdx.x];
    __syncthreads();
    if (x[0] > 1000.0f) break;
    x[threadIdx.x] = s[(threadIdx.x + 3) % 32] + 1.0f;
    __syncthreads();
  }
}

// 1024 threads with 32 floats each across a barrier: 128 KiB, more than a fission block may keep
extern "C" __global__ void big(float *x)
{
  FORCE
  __shared__ float s[1024];
  float v[32];
  for (int j = 0; j < 32; j++) v[j] = x[threadIdx.x] * (float)j;
  s[threadIdx.x] = v[31];
  __syncthreads();
  float r = 0.0f;
  for (int j = 0; j < 32; j++) r += v[j];
  // only what this block wrote: past it, shared memory holds whatever an earlier launch of this worker left
  x[threadIdx.x] = r + s[blockDim.x - 1 - threadIdx.x];
}

// a local of a type the kernel's own body defines lives across the barrier: the written-out function does not
// compile, and the kernel is compiled again without it
extern "C" __global__ void local_type(int *x)
{
  FORCE
  __shared__ int s[32];
  struct Local { int a; };
  Local p;
  p.a = x[threadIdx.x] * 2;
  s[threadIdx.x] = p.a;
  __syncthreads();
  x[threadIdx.x] = s[31 - threadIdx.x] + p.a;
}

extern "C" __global__ void pairs(Pair *p)
{
  FORCE
  __shared__ Pair s[16];
  Pair mine = p[threadIdx.x];
  s[threadIdx.x] = mine;
  __syncthreads();
  p[threadIdx.x].a = s[15 - threadIdx.x].b + mine.a;
}
]]

local function seq(n, f)
  local t = {}
  for i = 1, n do t[i] = f(i) end
  return t
end

-- run kernel name on both modules with fresh copies of the inputs; returns the outputs of both
local function run_both(fast, ref, name, cfg, make)
  local outs = {}
  for i, m in ipairs { fast, ref } do
    local args = make()
    m[name](cfg, table.unpack(args))
    outs[i] = {}
    for k, a in ipairs(args) do
      if type(a) ~= "number" then outs[i][k] = a:totable() end
    end
  end
  return outs[1], outs[2]
end

describe("cpu fast paths (k.cpu_path simd and fission)", function()
  local fast, ref
  setup(function()
    fast = cd.compile("#define FORCE\n" .. SRC, CPU)
    ref = cd.compile("#define FORCE if (0) __syncwarp();\n" .. SRC, CPU)
  end)
  teardown(function() fast, ref = nil, nil end)

  local function both(name, cfg, make) return run_both(fast, ref, name, cfg, make) end

  it("names the path each kernel takes", function()
    local want = { guarded = "simd", tree = "fission", tiles = "fission", diverge = "fission", count = "fission",
      dyn = "fission", nested = "fibers", counter_written = "fibers", loop_break = "fibers", big = "fission",
      local_type = "fibers", pairs = "fission" }
    for name, path in pairs(want) do
      assert.are.equal(path, fast[name].cpu_path, name)
      assert.are.equal("fibers", ref[name].cpu_path, name)
    end
  end)

  it("a guarded barrier-free kernel with an early return gives what the fibers give", function()
    local a, b = both("guarded", { grid = 5, block = 128 }, function()
      return { 600, 1.5, cd.array(seq(640, function(i) return i * 0.25 end), "float32", CPU),
        cd.array(seq(640, function(i) return (i % 13) - 6 end), "float32", CPU) }
    end)
    assert.are.same(b, a)
    assert.are.equal((600 * 0.25) * 1.5 + (600 % 13 - 6), a[4][600])
    assert.are.equal(640 % 13 - 6, a[4][640])   -- past n: untouched
  end)

  it("a shared-memory tree reduction with a barrier loop gives what the fibers give", function()
    local a, b = both("tree", { grid = 3, block = 128 }, function()
      return { cd.array(seq(384, function(i) return i % 17 end), "float32", CPU), cd.zeros(3, "float32", CPU) }
    end)
    assert.are.same(b, a)
    local s = 0
    for i = 1, 128 do s = s + i % 17 end
    assert.are.equal(s, a[2][1])
  end)

  it("per-thread values live across barriers in a loop of a 2-D block", function()
    local n = 16
    local a, b = both("tiles", { grid = { 2, 4 }, block = { 8, 4 } }, function()
      return { n, cd.array(seq(n * n, function(i) return (i * 7) % 11 end), "float32", CPU),
        cd.zeros(n * n, "float32", CPU) }
    end)
    assert.are.same(b, a)
  end)

  it("threads that returned before a barrier, and divergent branches, give what the fibers give", function()
    local a, b = both("diverge", { grid = 1, block = 64 }, function()
      return { 50, cd.array(seq(64, function(i) return i * 5 - 100 end), "int32", CPU), cd.zeros(64, "int32", CPU) }
    end)
    assert.are.same(b, a)
    assert.are.equal(0, a[3][51])   -- a thread that returned wrote nothing
  end)

  it("atomics on shared and global memory give what the fibers give", function()
    local a, b = both("count", { grid = 4, block = 64 }, function()
      return { cd.array(seq(256, function(i) return i % 23 end), "int32", CPU), cd.zeros(5, "int32", CPU) }
    end)
    assert.are.same(b, a)
  end)

  it("dynamic shared memory gives what the fibers give", function()
    local a, b = both("dyn", { grid = 1, block = 96, shared = 96 * 4 }, function()
      return { cd.array(seq(96, function(i) return i end), "float32", CPU) }
    end)
    assert.are.same(b, a)
    assert.are.equal(96, a[1][1])
  end)

  it("kernels fission does not take (a barrier under an if, a loop counter changed, a break) run on fibers",
    function()
      for _, name in ipairs { "nested", "counter_written", "loop_break" } do
        local a, b = both(name, { grid = 1, block = 32 }, function()
          return { cd.array(seq(32, function(i) return i * 3 end), "float32", CPU) }
        end)
        assert.are.same(b, a)
      end
    end)

  it("a block whose per-thread arrays would not fit runs on fibers and gives the same", function()
    local a, b = both("big", { grid = 1, block = 1024 }, function()
      return { cd.array(seq(1024, function(i) return i % 10 end), "float32", CPU) }
    end)
    assert.are.same(b, a)
    -- and with fewer threads the same kernel runs on the fission path
    local a2, b2 = both("big", { grid = 1, block = 32 }, function()
      return { cd.array(seq(1024, function(i) return i % 10 end), "float32", CPU) }
    end)
    assert.are.same(b2, a2)
  end)

  it("a written-out kernel that does not compile leaves the kernel on fibers, still right", function()
    local a, b = both("local_type", { grid = 1, block = 32 }, function()
      return { cd.array(seq(32, function(i) return i end), "int32", CPU) }
    end)
    assert.are.same(b, a)
    assert.are.equal(32 * 2 + 2, a[1][1])
  end)

  it("struct values live across a barrier", function()
    local a, b = both("pairs", { grid = 1, block = 16 }, function()
      return { cd.array(seq(32, function(i) return i end), "int32", CPU) }
    end)
    assert.are.same(b, a)
  end)

  it("CUDADEV_CPU_FAST=0 compiles no fast path", function()
    local out = helper.run_child([==[
local m = cd.compile('extern "C" __global__ void k(int *p) { p[threadIdx.x] = 1; }', { device = "cpu" })
print(m.k.cpu_path)
]==], "CUDADEV_CPU_FAST=0 CUDADEV_CACHE_DIR=" .. os.tmpname() .. ".d")
    assert.are.equal("loop\nexit 0\n", out)
  end)

  worker_it("a fault on the fast paths is contained and names its thread", function()
    local m = cd.compile([[
#include <assert.h>
extern "C" __global__ void crash(int *p) { if (threadIdx.x == 5) *(volatile int *)0 = 1; }
extern "C" __global__ void checks(int *p)
{
  __shared__ int s[32];
  s[threadIdx.x] = p[threadIdx.x];
  __syncthreads();
  assert(s[threadIdx.x] != 9);
}
]], { device = "cpu", name = "fast.cu" })
    assert.are.equal("simd", m.crash.cpu_path)
    assert.are.equal("fission", m.checks.cpu_path)
    local ok, err = pcall(m.crash, { grid = 2, block = 32 }, cd.zeros(1, "int32", CPU))
    assert.is_false(ok)
    -- both blocks fault at once on two workers: which one claims the message is a race; its thread is not
    assert.is_truthy(err.message:match("^kernel 'crash' crashed on the cpu device: SIGSEGV %(segmentation fault%) at "
      .. "address 0x0 %(block %([01],0,0%), thread %(5,0,0%)%)$"), err.message)
    ok, err = pcall(m.checks, { grid = 1, block = 32 }, cd.array(seq(32, function(i) return i end), "int32", CPU))
    assert.is_false(ok)
    assert.are.equal("kernel 'checks' failed an assertion: fast.cu:8: s[threadIdx.x] != 9 (block (0,0,0), "
      .. "thread (8,0,0))", err.message)
  end)
end)

-- Rematerialised locals (NOTE [fast paths]): a local whose initialiser reads only threadIdx, blockIdx, blockDim,
-- gridDim, integer or pointer parameters, integer literals and other such locals, and that the body never
-- changes, is declared again in each region that uses it instead of living in a per-thread array; every other
-- local that crosses a barrier stays in one.
local REMAT = [[
__device__ void bump(int &v) { v += 100; }

// 8x4 threads: indices, a row pointer and an offset from threadIdx and blockIdx cross barriers in and out of a loop
extern "C" __global__ void affine(int n, const float *x, float *out)
{
  FORCE
  __shared__ float s[4][8];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * 4 + ty, col = blockIdx.x * 8 + tx;
  unsigned t = ty * 8 + tx, lane = t & 7u, w = t >> 3;
  const float *p = x + (size_t)row * n;
  size_t o = (size_t)row * n + col;
  s[ty][tx] = p[col];
  __syncthreads();
  float acc = 0.0f;
  for (int k = 0; k < 3; k++) {
    acc += s[ty][(tx + k) % 8] * (float)(lane + 1) + (float)w;
    __syncthreads();
    s[ty][tx] = acc;
    __syncthreads();
  }
  out[o] = acc + p[(col + 1) % n] + (float)(row == 0 && n > 0);
}

// locals that cross barriers and must stay per-thread
extern "C" __global__ void kept(int n, const int *in, int *out)
{
  FORCE
  __shared__ int s[32];
  __shared__ int base;
  int t = threadIdx.x;
  int a = t + 1;           // changed after a use
  int b = t * 2;           // changed in a later region
  int e = t * 3;           // passed by reference
  int f = t + 5;           // a reference bound to it
  int g = t + 7;           // its address taken
  bump(e);
  int &r = f;
  r += 1000;
  int *pg = &g;
  *pg += 2000;
  if (t == 0) base = in[0];
  s[t] = in[t];
  __syncthreads();
  int c = s[t ^ 1] + t;    // reads shared memory
  int d = base + t;        // reads a shared scalar
  out[t] = a;
  a = a * 3;
  b += s[(t + 1) % 32];
  __syncthreads();
  out[32 + t] = a + b + c + d + e + f + g;
  for (int k = 0; k < 2; k++) {
    int n{3};              // the loop body's own n
    int m = n * t;         // reads it, not the parameter
    __syncthreads();
    out[64 + 32 * k + t] = m + (t < 32 && k >= 0);
    __syncthreads();
  }
}

// a 4x2x3 block: a thread index from all three dimensions crosses the barriers of a tree loop
extern "C" __global__ void cube(const int *in, int *out)
{
  FORCE
  __shared__ int s[24];
  int t = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  int acc = in[blockIdx.x * 24 + t];
  s[t] = acc;
  __syncthreads();
  for (unsigned h = 16; h > 0; h >>= 1) {
    if (t < h && t + h < 24) s[t] += s[t + h];
    __syncthreads();
  }
  acc += s[0] * (int)threadIdx.z;
  out[blockIdx.x * 24 + t] = acc;
}

// a parameter the body changes: fission does not take the kernel
extern "C" __global__ void param_written(int n, int *out)
{
  FORCE
  __shared__ int s[32];
  int t = threadIdx.x;
  n += t;
  s[t] = n;
  __syncthreads();
  out[t] = s[31 - t] + n;
}
]]

describe("cpu fission: thread-affine locals declared again in each region", function()
  local fast, ref
  setup(function()
    fast = cd.compile("#define FORCE\n" .. REMAT, CPU)
    ref = cd.compile("#define FORCE if (0) __syncwarp();\n" .. REMAT, CPU)
  end)
  teardown(function() fast, ref = nil, nil end)

  local function both(name, cfg, make) return run_both(fast, ref, name, cfg, make) end

  it("names the path each kernel takes (a && b reads no address: fission)", function()
    assert.are.equal("fission", fast.affine.cpu_path)
    assert.are.equal("fission", fast.kept.cpu_path)
    assert.are.equal("fibers", fast.param_written.cpu_path)
  end)

  it("indices, pointers and offsets from threadIdx and blockIdx give what the fibers and Lua give", function()
    local n, rows = 16, 12
    local a, b = both("affine", { grid = { 2, 3 }, block = { 8, 4 } }, function()
      return { n, cd.array(seq(n * rows, function(i) return (i * 7) % 11 - 3 end), "float32", CPU),
        cd.zeros(n * rows, "float32", CPU) }
    end)
    assert.are.same(b, a)
    -- Lua: each block of 8x4 threads
    local x = seq(n * rows, function(i) return (i * 7) % 11 - 3 end)
    local want = {}
    for by = 0, 2 do
      for bx = 0, 1 do
        local s, acc = {}, {}
        for ty = 0, 3 do
          for tx = 0, 7 do
            s[ty * 8 + tx] = x[(by * 4 + ty) * n + bx * 8 + tx + 1]
            acc[ty * 8 + tx] = 0
          end
        end
        for k = 0, 2 do
          for ty = 0, 3 do
            for tx = 0, 7 do
              local t = ty * 8 + tx
              acc[t] = acc[t] + s[ty * 8 + (tx + k) % 8] * ((t & 7) + 1) + (t >> 3)
            end
          end
          for t = 0, 31 do s[t] = acc[t] end
        end
        for ty = 0, 3 do
          for tx = 0, 7 do
            local row, col = by * 4 + ty, bx * 8 + tx
            want[row * n + col + 1] = acc[ty * 8 + tx] + x[row * n + (col + 1) % n + 1] + (row == 0 and 1 or 0)
          end
        end
      end
    end
    assert.are.same(want, a[3])
  end)

  it("locals changed, passed by reference, aliased, or read from shared memory stay per-thread", function()
    local input = seq(32, function(i) return (i - 1) * 5 - 7 end)
    local a, b = both("kept", { grid = 1, block = 32 }, function()
      return { 32, cd.array(input, "int32", CPU), cd.zeros(128, "int32", CPU) }
    end)
    assert.are.same(b, a)
    local want = {}
    for t = 0, 31 do
      local function in_(i) return input[i + 1] end
      want[t + 1] = t + 1
      local av, bv = 3 * (t + 1), 2 * t + in_((t + 1) % 32)
      local c, d = in_(t ~ 1) + t, in_(0) + t
      want[33 + t] = av + bv + c + d + (3 * t + 100) + (t + 1005) + (t + 2007)
      want[65 + t] = 3 * t + 1
      want[97 + t] = 3 * t + 1
    end
    assert.are.same(want, a[3])
  end)

  it("a 3-D block's thread index crosses a barrier loop and gives what the fibers and Lua give", function()
    assert.are.equal("fission", fast.cube.cpu_path)
    local input = seq(48, function(i) return (i * 13) % 29 - 9 end)
    local a, b = both("cube", { grid = 2, block = { 4, 2, 3 } }, function()
      return { cd.array(input, "int32", CPU), cd.zeros(48, "int32", CPU) }
    end)
    assert.are.same(b, a)
    local want = {}
    for blk = 0, 1 do
      local total = 0
      for t = 0, 23 do total = total + input[blk * 24 + t + 1] end
      for t = 0, 23 do want[blk * 24 + t + 1] = input[blk * 24 + t + 1] + total * (t // 8) end
    end
    assert.are.same(want, a[2])
  end)

  it("a parameter the body changes runs on fibers and gives the same", function()
    local a, b = both("param_written", { grid = 1, block = 32 }, function()
      return { 10, cd.zeros(32, "int32", CPU) }
    end)
    assert.are.same(b, a)
    assert.are.same(seq(32, function() return 51 end), a[2])
  end)

  it("the written-out function keeps only what must be per-thread in arrays", function()
    local dir = os.tmpname()
    local wrap, copy = dir .. ".cxx", dir .. ".cpp"
    local f = assert(io.open(wrap, "w"))
    f:write('#!/bin/sh\nfor a in "$@"; do case "$a" in *.cpp) cp "$a" "' .. copy .. '";; esac; done\n'
      .. 'exec ${CXX:-c++} "$@"\n')
    f:close()
    os.execute("chmod +x '" .. wrap .. "'")
    local out = helper.run_child(("local m = cd.compile(%q, { device = 'cpu' })\nprint(m.affine.cpu_path)\n")
      :format("#define FORCE\n" .. REMAT), "CUDADEV_CXX='" .. wrap .. "' CUDADEV_CACHE_DIR=" .. dir .. ".d")
    os.remove(wrap)
    assert.are.equal("fission\nexit 0\n", out)
    local cpp = assert(io.open(copy)):read("a")
    os.remove(copy)
    for _, name in ipairs { "tx", "ty", "row", "col", "t", "lane", "w", "p", "o" } do
      assert.is_nil(cpp:match("[%w_] %**" .. name .. "%[cdv_nt%]"), name)
    end
    for _, decl in ipairs { "float acc[cdv_nt]", "int a[cdv_nt]", "int b[cdv_nt]", "int c[cdv_nt]", "int d[cdv_nt]",
      "int e[cdv_nt]", "int f[cdv_nt]", "int g[cdv_nt]", "int m[cdv_nt]" } do
      assert.is_truthy(cpp:find(decl, 1, true), decl)
    end
  end)
end)
