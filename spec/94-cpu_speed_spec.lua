-- The cpu device's fast paths (issue #18; doc/cpu-device.md, "Kernel paths"; NOTE [fast paths] in
-- src/cpu_fission.c): a barrier-free kernel written out as a loop over its block's threads ("simd"), a kernel
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
// (see NOTE [uniform guard]) blocks where the guard holds for all threads, for some, for none; an else; a guard
// that differs between neighbouring threads; declarations before the if that must run once per thread
extern "C" __global__ void guard_else(int n, int m, int *y)
{
  FORCE
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned q = (unsigned)i * 3u + 1u;
  if (i < n) y[i] = (int)q;
  else if (i < m) y[i] = -1;
  else y[i] = -2;
  y[i] += 100;
}

extern "C" __global__ void guard_odd(int *y)
{
  FORCE
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (threadIdx.x & 1) return;
  y[i] = i + 1;
}

extern "C" __global__ void guard_effects(int n, int *counter, int *y)
{
  FORCE
  int i = atomicAdd(counter, 1);
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j < n) y[j] = i >= 0;
  int k = j++;
  if (k < n) y[k] += 1;
}
// (see NOTE [monotone guard]) guards that two probes decide: a size_t index, a block partly past n; a 32-bit
// index that wraps inside a block and one that changes sign there, which the loop over every thread decides (FORCE
// comes last: before the index's type it would keep the probes off)
extern "C" __global__ void guard_size_t(float a, const float *x, float *y, size_t n)
{
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
  FORCE; // last: the probes read the declaration before the guard
}
extern "C" __global__ void guard_wrap(unsigned off, unsigned n, int *y)
{
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x + off;
  if (i < n) y[i] = (int)i + 1;
  FORCE; // last: the probes read the declaration before the guard
}
extern "C" __global__ void guard_sign(int off, size_t n, int *y)
{
  int i = off + threadIdx.x + blockIdx.x * blockDim.x;
  if (i >= n) return;
  y[i] = i * 2 + 1;
  FORCE; // last: the probes read the declaration before the guard
}
// (see NOTE [no wrap hint]) a thread loop that GCC vectorises, with the header stores of a tracked loop
extern "C" __global__ void int2_pairs(const int2 *in, int2 *out, uchar4 *bytes)
{
  FORCE
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int2 p = in[i];
  out[i] = make_int2(p.x + p.y, p.x - p.y);
  bytes[i] = make_uchar4(p.x & 255, p.y & 255, (p.x >> 8) & 255, (unsigned char)threadIdx.x);
}
// (see NOTE [warp fission]) shuffles of every kind and width, votes, a partial last warp, lanes that returned,
// a warp if with an else, a loop of shuffles without braces
extern "C" __global__ void warp_ops(int n, const double *in, double *out, unsigned *votes)
{
  FORCE
  unsigned t = threadIdx.x, lane = t & 31;
  double v = in[blockIdx.x * blockDim.x + t];
  if (t >= n) return;
  double a = v, b = v, c = v, d = v;
  a = __shfl_sync(0xffffffffu, a, 3);
  b += __shfl_up_sync(0xffffffffu, b, 2, 8);
  c *= __shfl_down_sync(0xffffffffu, c, 5);
  d -= __shfl_xor_sync(0xffffffffu, d, 9, 16);
  unsigned bal;
  bal = __ballot_sync(0xffffffffu, v > 10.0);
  int any, all;
  any = __any_sync(0xffffffffu, lane == 7);
  all = __all_sync(0xffffffffu, v >= 0.0);
  if (lane < 16) {
    for (int o = 8; o > 0; o >>= 1) v += __shfl_down_sync(0x0000ffffu, v, o, 16);
  } else {
    v = -v;
    v = __shfl_sync(0xffff0000u, v, 16);
  }
  size_t i = blockIdx.x * blockDim.x + t;
  out[5 * i] = a, out[5 * i + 1] = b, out[5 * i + 2] = c, out[5 * i + 3] = d, out[5 * i + 4] = v;
  votes[3 * i] = bal, votes[3 * i + 1] = any, votes[3 * i + 2] = all;
}

// a warp-shuffle reduction of a block (the bench's reduce_warp, any block size)
extern "C" __global__ void warp_sum(const float *x, float *part)
{
  FORCE
  __shared__ float ws[32];
  unsigned t = threadIdx.x, lane = t & 31, w = t >> 5, nw = (blockDim.x + 31) / 32;
  float v = x[blockIdx.x * blockDim.x + t];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  if (lane == 0) ws[w] = v;
  __syncthreads();
  if (w == 0) {
    v = lane < nw ? ws[lane] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    if (lane == 0) part[blockIdx.x] = v;
  }
}

// (see NOTE [exchange slack], NOTE [warp skip]) shuffles up and down of width 32 by deltas 0, 1, 2, 5, 16, 31
// and one of 32 or more, on the first and last lanes, a partial last warp, ints, floats and doubles, a mask with
// holes in a warp if, and a warp if with an else whose warps cross the rows of a 2-D block
extern "C" __global__ void warp_slack(unsigned far, int *o, double *od)
{
  FORCE
  unsigned t = threadIdx.y * blockDim.x + threadIdx.x, lane = t & 31, w = t >> 5;
  size_t g = (size_t)blockIdx.x * blockDim.x * blockDim.y + t;
  int v = (int)(t * 7 + blockIdx.x * 1000);
  int a, b, c, d, e = -1, s = v;
  a = __shfl_down_sync(0xffffffffu, v, 1);
  b = __shfl_up_sync(0xffffffffu, v, 31);
  c = __shfl_down_sync(0xffffffffu, v, far);
  d = __shfl_up_sync(0xffffffffu, v, 0);
  float f;
  f = __shfl_down_sync(0xffffffffu, v * 0.5f, 16);
  double dv;
  dv = __shfl_up_sync(0xffffffffu, v * 0.25, 5);
  if (lane & 1) {
    e = __shfl_down_sync(0xaaaaaaaau, v, 2);
  }
  if (w == 1) {
    s += __shfl_down_sync(0xffffffffu, s, 2);
  } else {
    s -= __shfl_up_sync(0xffffffffu, s, 1);
  }
  o[6 * g] = a, o[6 * g + 1] = b, o[6 * g + 2] = c, o[6 * g + 3] = d, o[6 * g + 4] = e, o[6 * g + 5] = s;
  od[2 * g] = f, od[2 * g + 1] = dv;
}

// a loop of shuffles whose bound is a thread's own value runs on the fibers
extern "C" __global__ void warp_own_bound(int *x)
{
  FORCE
  int k = (threadIdx.x >> 5) + 1, v = threadIdx.x;
  for (int o = 0; o < k; o++) v += __shfl_xor_sync(0xffffffffu, v, 1);
  x[threadIdx.x] = v;
}
// a shuffled value computed from locals that fission declares again in each region (thread-affine)
extern "C" __global__ void warp_affine(int *x)
{
  FORCE;
  int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  int v = 0;
  v = __shfl_sync(0xffffffffu, lane * 3 + w, 5);
  x[threadIdx.x] = v + lane;
}
]]

local function seq(n, f)
  local t = {}
  for i = 1, n do t[i] = f(i) end
  return t
end

-- src compiled as it is (fast paths) and with FORCE a dead __syncwarp() (the fiber path)
local function compile_pair(src)
  return cd.compile("#define FORCE\n" .. src, CPU), cd.compile("#define FORCE if (0) __syncwarp();\n" .. src, CPU)
end

-- the C++ that cudadev writes for src (with FORCE empty), as the host compiler gets it; kernel's cpu_path must
-- be path (fission unless said)
local function written_out(src, kernel, path)
  local dir = os.tmpname()
  local wrap, copy = dir .. ".cxx", dir .. ".cpp"
  local f = assert(io.open(wrap, "w"))
  f:write('#!/bin/sh\nfor a in "$@"; do case "$a" in *.cpp) cp "$a" "' .. copy .. '";; esac; done\n'
    .. 'exec ${CXX:-c++} "$@"\n')
  f:close()
  os.execute("chmod +x '" .. wrap .. "'")
  local out = helper.run_child(("local m = cd.compile(%q, { device = 'cpu' })\nprint(m.%s.cpu_path)\n")
    :format("#define FORCE\n" .. src, kernel), "CUDADEV_CXX='" .. wrap .. "' CUDADEV_CACHE_DIR=" .. dir .. ".d")
  os.remove(wrap)
  assert.are.equal((path or "fission") .. "\nexit 0\n", out)
  local cpp = assert(io.open(copy)):read("a")
  os.remove(copy)
  os.remove(dir)
  os.execute("rm -rf '" .. dir .. ".d'")
  return cpp
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
  setup(function() fast, ref = compile_pair(SRC) end)
  teardown(function() fast, ref = nil, nil end)

  local function both(name, cfg, make) return run_both(fast, ref, name, cfg, make) end

  it("names the path each kernel takes", function()
    local want = { guarded = "simd", tree = "fission", tiles = "fission", diverge = "fission", count = "fission",
      dyn = "fission", nested = "fission", counter_written = "fibers", loop_break = "fibers", big = "fission",
      local_type = "fibers", pairs = "fission", guard_else = "simd", guard_odd = "simd", guard_effects = "simd",
      int2_pairs = "simd", guard_size_t = "simd", guard_wrap = "simd", guard_sign = "simd", warp_ops = "fission", warp_sum = "fission", warp_affine = "fission", warp_own_bound = "fibers",
      warp_slack = "fission" }
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

  it("a guard that holds for every thread of a block, some or none gives what the fibers give (NOTE [uniform guard])",
    function()
    -- blocks of 32: 0-2 all below n, 3 mixed, 4 all between n and m, 5 mixed, 6-7 past m
    local a, b = both("guard_else", { grid = 8, block = 32 }, function()
      return { 100, 180, cd.full(256, 7, "int32", CPU) }
    end)
    assert.are.same(b, a)
    for i = 1, 256 do
      local want = i <= 100 and (i - 1) * 3 + 1 + 100 or i <= 180 and 99 or 98
      assert.are.equal(want, a[3][i], i)
    end
    a, b = both("guard_odd", { grid = 3, block = 64 }, function() return { cd.zeros(192, "int32", CPU) } end)
    assert.are.same(b, a)
    assert.are.same({ 1, 0, 3, 0 }, { a[1][1], a[1][2], a[1][3], a[1][4] })
  end)

  it("a guard that two probes decide gives what the fibers give, and one whose index wraps or changes sign in a "
    .. "block is decided thread by thread (NOTE [monotone guard])", function()
    local a, b = both("guard_size_t", { grid = 3, block = 128 }, function()
      return { 2.0, cd.array(seq(384, function(i) return i end), "float32", CPU), cd.full(384, 1, "float32", CPU), 300 }
    end)
    assert.are.same(b, a)
    for i = 1, 384 do assert.are.equal(i <= 300 and 2 * i + 1 or 1, a[3][i], i) end
    a, b = both("guard_wrap", { grid = 2, block = 128 }, function()
      return { 0xffffffc0, 200, cd.zeros(200, "int32", CPU) }
    end)
    assert.are.same(b, a)
    for i = 1, 200 do assert.are.equal(i <= 192 and i or 0, a[3][i], i) end
    a, b = both("guard_sign", { grid = 2, block = 128 }, function()
      return { -64, 150, cd.zeros(192, "int32", CPU) }
    end)
    assert.are.same(b, a)
    for i = 1, 192 do assert.are.equal(i <= 150 and 2 * i - 1 or 0, a[3][i], i) end
  end)

  it("the README's saxpy decides its guard by two probes, not a loop over every thread (NOTE [monotone guard])",
    function()
    local cpp = written_out([[
extern "C" __global__ void saxpy(float a, const float *x, float *y, size_t n)
{
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
]], "saxpy", "simd")
    assert.truthy(cpp:find("cdv_mono = 1, cdv_all = cdv_g1, cdv_any = cdv_g0;", 1, true))
  end)

  it("declarations with side effects before the guard run once per thread", function()
    local a, b = both("guard_effects", { grid = 4, block = 32 }, function()
      return { 100, cd.zeros(1, "int32", CPU), cd.zeros(128, "int32", CPU) }
    end)
    assert.are.same(b, a)
    assert.are.equal(128, a[2][1])
    for i = 1, 128 do assert.are.equal(i <= 100 and 2 or 0, a[3][i], i) end
  end)

  it("int2 loads and stores in a vectorised thread loop give what the fibers give (NOTE [no wrap hint])",
    function()
    local n = 1536
    local a, b = both("int2_pairs", { grid = n // 256, block = 256 }, function()
      return { cd.array(seq(2 * n, function(i) return (i * 7919) % 2000000 - 1000000 end), "int32", CPU),
        cd.full(2 * n, -7, "int32", CPU), cd.zeros(4 * n, "uint8", CPU) }
    end)
    assert.are.same(b, a)
    local bad = 0
    for i = 0, n - 1 do
      local x, y = a[1][2 * i + 1], a[1][2 * i + 2]
      if a[2][2 * i + 1] ~= x + y or a[2][2 * i + 2] ~= x - y or a[3][4 * i + 4] ~= i % 256 then bad = bad + 1 end
    end
    assert.are.equal(0, bad)
  end)

  it("warp shuffles, votes and warp ifs on the fission path give what the fibers give (NOTE [warp fission])",
    function()
    -- 2 blocks of 80 threads: the third warp is partial; threads 70 to 79 return before the shuffles
    local a, b = both("warp_ops", { grid = 2, block = 80 }, function()
      return { 70, cd.array(seq(160, function(i) return (i * 37) % 23 - 3 end), "float64", CPU),
        cd.full(800, -1, "float64", CPU), cd.full(480, 7, "uint32", CPU) }
    end)
    assert.are.same(b, a)
    local x = function(i) return (i * 37) % 23 - 3 end   -- element i (1-based) of the input
    assert.are.equal(x(4), a[3][1])                       -- thread 0 reads lane 3
    assert.are.equal(x(12) + x(10), a[3][5 * 11 + 2])     -- thread 11: up by 2 within its group of 8
    assert.are.equal(2 * x(10), a[3][5 * 9 + 2])          -- thread 9: no lane 2 below in its group
    assert.are.equal(x(1) + x(1), a[3][5 * 0 + 2])        -- thread 0: no lane 2 below, its own value
    assert.are.equal(-1, a[3][5 * 75 + 1])                -- thread 75 returned: untouched
    local sum = 0
    for i = 1, 16 do sum = sum + x(i) end
    assert.are.equal(sum, a[3][5])                        -- lane 0's sum over the lanes 0 to 15
    assert.are.equal(1, a[4][2])
    a, b = both("warp_affine", { grid = 1, block = 64 }, function() return { cd.zeros(64, "int32", CPU) } end)
    assert.are.same(b, a)
    assert.are.same({ 15, 16, 15 + 31, 16 }, { a[1][1], a[1][2], a[1][32], a[1][33] })
    a, b = both("warp_sum", { grid = 3, block = 96 }, function()
      return { cd.array(seq(288, function(i) return i % 9 end), "float32", CPU), cd.zeros(3, "float32", CPU) }
    end)
    assert.are.same(b, a)
    for blk = 0, 2 do
      local s = 0
      for i = blk * 96 + 1, blk * 96 + 96 do s = s + i % 9 end
      assert.are.equal(s, a[2][blk + 1])
    end
  end)

  it("shuffles up and down of width 32 read their neighbours through the slack (NOTE [exchange slack])", function()
    -- 2 blocks of 24 x 3 threads: warps 0 and 1 cross the rows, warp 2 has 8 threads
    local nt, grid = 72, 2
    local a, b = both("warp_slack", { grid = grid, block = { 24, 3 } }, function()
      return { 33, cd.full(6 * nt * grid, -7, "int32", CPU), cd.full(2 * nt * grid, -7, "float64", CPU) }
    end)
    assert.are.same(b, a)
    local want, wantd = {}, {}
    for blk = 0, grid - 1 do
      local function v(t) return t * 7 + blk * 1000 end
      -- CUDA's rule for width 32: the source lane, if it is in the warp and its thread exists, else the lane's own
      local function down(t, d) return (t % 32 + d < 32 and t + d < nt) and v(t + d) or v(t) end
      local function up(t, d) return t % 32 >= d and v(t - d) or v(t) end
      for t = 0, nt - 1 do
        local lane, w = t % 32, t // 32
        local s = w == 1 and v(t) + down(t, 2) or v(t) - up(t, 1)
        local e = lane % 2 == 1 and down(t, 2) or -1
        -- far = 33: a shuffle by the delta's low five bits (NOTE [shuffle delta])
        for k, x in ipairs { down(t, 1), up(t, 31), down(t, 1), v(t), e, s } do want[6 * (blk * nt + t) + k] = x end
        wantd[2 * (blk * nt + t) + 1] = down(t, 16) * 0.5
        wantd[2 * (blk * nt + t) + 2] = up(t, 5) * 0.25
      end
    end
    assert.are.same(want, a[2])
    assert.are.same(wantd, a[3])
  end)

  it("warp ifs nest; deeper than the fission keeps guards for, a kernel runs on fibers", function()
    local function nested(depth)
      local open, close = {}, {}
      for d = 1, depth do
        open[d] = "if (lane >= 2) {"
        close[d] = "}"
      end
      return ([[
extern "C" __global__ void nest(int *x)
{
  FORCE
  int lane = threadIdx.x & 31, v = threadIdx.x;
  %s v += __shfl_xor_sync(0xfffffffcu, v, 1); %s
  x[threadIdx.x] = v;
}]]):format(table.concat(open, " "), table.concat(close))
    end
    for _, depth in ipairs { 2, 17 } do
      local f, r = compile_pair(nested(depth))
      assert.are.equal(depth == 2 and "fission" or "fibers", f.nest.cpu_path, depth)
      local xf, xr = cd.zeros(64, "int32", CPU), cd.zeros(64, "int32", CPU)
      f.nest({ grid = 1, block = 64 }, xf)
      r.nest({ grid = 1, block = 64 }, xr)
      assert.are.same(xr:totable(), xf:totable())
      assert.are.same({ 0, 1, 2 + 3, 2 + 3, 33, 34 + 35 }, { xf[1], xf[2], xf[3], xf[4], xf[34], xf[35] })
    end
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
  setup(function() fast, ref = compile_pair(REMAT) end)
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
    local cpp = written_out(REMAT, "affine")
    for _, name in ipairs { "tx", "ty", "row", "col", "t", "lane", "w", "p", "o" } do
      assert.is_nil(cpp:match("[%w_] %**" .. name .. "%[cdv_nt%]"), name)
    end
    for _, decl in ipairs { "float acc[cdv_nt]", "int a[cdv_nt]", "int b[cdv_nt]", "int c[cdv_nt]", "int d[cdv_nt]",
      "int e[cdv_nt]", "int f[cdv_nt]", "int g[cdv_nt]", "int m[cdv_nt]" } do
      assert.is_truthy(cpp:find(decl, 1, true), decl)
    end
  end)
end)

-- (see NOTE [block scalars]) a double buffer flipped once an iteration, a bound set once and read by a barrier
-- loop's header, a counter stepped by ++, a value set from the loop's counter: one scalar each for the block
local BSC = [[
extern "C" __global__ void buffers(int n, int iters, const int *in, int *out)
{
  FORCE
  __shared__ int b[2][64];
  int t = threadIdx.x;
  b[0][t] = in[blockIdx.x * 64 + t];
  __syncthreads();
  int cur = 0, steps;
  steps = iters * 2;
  unsigned seen = 0;
  int last = -1;
  for (int it = 0; it < steps; it += 2) {
    b[cur ^ 1][t] = b[cur][(t + 1) % 64] + b[cur][t];
    __syncthreads();
    cur ^= 1;
    ++seen;
    last = it + (int)blockIdx.x;
    __syncthreads();
  }
  out[blockIdx.x * 64 + t] = b[cur][t] + (int)seen * 1000 + n + last * 100000;
}

__device__ void twice(int &v) { v *= 2; }

// locals that look alike but must stay per-thread: written under a thread's condition, loaded from memory,
// their address taken, set in a region with other statements, set in a warp if, passed by reference, set from
// memory (each declared in a region of its own, which would otherwise run once)
extern "C" __global__ void not_scalars(const int *in, int *out)
{
  FORCE
  __shared__ int s[64];
  int t = threadIdx.x, v = 0;
  s[t] = t;
  __syncthreads();
  int odd = 0;
  __syncthreads();
  int addr = 5;
  __syncthreads();
  int mixed = 0;
  __syncthreads();
  int inwarp = 0;
  __syncthreads();
  int mem = in[0];
  __syncthreads();
  int byref = 1;
  __syncthreads();
  int late = 0;
  __syncthreads();
  late = in[1];
  __syncthreads();
  if (t & 1) twice(byref);
  if (t & 1) odd = 1;
  int *p = &addr;
  *p += t;
  __syncthreads();
  mixed = 3;
  s[t] += mixed;
  __syncthreads();
  if (t < 32) {
    inwarp += 1;
    v = __shfl_sync(0xffffffffu, t + 2, 0);
  }
  __syncthreads();
  out[t] = odd + 10 * mem + 100 * addr + 10000 * mixed + 100000 * inwarp + 1000000 * v + 0 * s[(t + 1) % 64] +
           10000000 * byref + 100000000 * late;
}
]]

describe("cpu fission: block scalars (NOTE [block scalars])", function()
  local fast, ref
  setup(function() fast, ref = compile_pair(BSC) end)
  teardown(function() fast, ref = nil, nil end)

  it("a double buffer's index, a bound and a counter give what the fibers and Lua give", function()
    assert.are.equal("fission", fast.buffers.cpu_path)
    local a, b = run_both(fast, ref, "buffers", { grid = 2, block = 64 }, function()
      return { 5, 3, cd.array(seq(128, function(i) return (i - 1) % 13 end), "int32", CPU), cd.zeros(128, "int32", CPU) }
    end)
    assert.are.same(b, a)
    local want = {}
    for blk = 0, 1 do
      local buf = {}
      for t = 0, 63 do buf[t] = (blk * 64 + t) % 13 end
      for _ = 1, 3 do
        local nxt = {}
        for t = 0, 63 do nxt[t] = buf[(t + 1) % 64] + buf[t] end
        buf = nxt
      end
      for t = 0, 63 do want[blk * 64 + t + 1] = buf[t] + 3000 + 5 + (4 + blk) * 100000 end
    end
    assert.are.same(want, a[4])
  end)

  it("locals written per thread, loaded, aliased, mixed or set in a warp if stay per-thread", function()
    assert.are.equal("fission", fast.not_scalars.cpu_path)
    local a, b = run_both(fast, ref, "not_scalars", { grid = 1, block = 64 }, function()
      return { cd.array({ 7, 3 }, "int32", CPU), cd.zeros(64, "int32", CPU) }
    end)
    assert.are.same(b, a)
    for t = 0, 63 do
      assert.are.equal(t % 2 + 70 + 100 * (5 + t) + 30000 + (t < 32 and 2100000 or 0) + 10000000 * (1 + t % 2)
        + 300000000, a[2][t + 1], t)
    end
  end)

  it("the written-out function has one scalar for each block scalar and arrays for the rest", function()
    local cpp = written_out(BSC, "buffers")
    for _, name in ipairs { "cur", "steps", "seen", "last" } do
      assert.is_nil(cpp:match("[%w_] %**" .. name .. "%[cdv_nt%]"), name)
    end
    for _, decl in ipairs { "int cur;", "int steps;", "unsigned seen;", "int last;", "int odd[cdv_nt]", "int mem[cdv_nt]",
      "int addr[cdv_nt]", "int mixed[cdv_nt]", "int inwarp[cdv_nt]", "int byref[cdv_nt]", "int late[cdv_nt]" } do
      assert.is_truthy(cpp:find(decl, 1, true), decl)
    end
  end)
end)

-- (see NOTE [sparse if]) ifs of == in a 2-D block whose rows are not a multiple of 32, after threads returned,
-- with a return in the statement, after a loop of shuffles in a warp if; and ifs that are not taken so (an
-- else, &&, a load in the condition)
local SPARSE = [[
extern "C" __global__ void sparse(const int *in, int *out)
{
  FORCE
  __shared__ int s[8][20];
  int tx = threadIdx.x, ty = threadIdx.y, t = ty * 20 + tx, lane = t & 31;
  size_t g = (size_t)blockIdx.x * 160 + t;
  s[ty][tx] = in[g];
  if (t % 9 == 4) return;
  __syncthreads();
  if ((tx * 3 + ty) % 7 == 2) out[g] = s[ty][tx] * 10;
  __syncthreads();
  if (tx == ty) { out[g] += 1; return; }
  __syncthreads();
  if (lane == 5) out[g] += 100;
  __syncthreads();
  if (tx == 1) out[g] += 1000; else out[g] += 2000;
  __syncthreads();
  if (tx == 2 && ty == 1) out[g] += 10000;
  __syncthreads();
  if (s[ty][tx] == 3) out[g] += 100000;
  __syncthreads();
  int v = t;
  if (t < 64) {
    for (int o = 1; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    if (lane == 7) out[g] += 1000000 * (v - 2 * t);
  }
}
]]

describe("cpu fission: sparse ifs (NOTE [sparse if])", function()
  local fast, ref
  setup(function() fast, ref = compile_pair(SPARSE) end)
  teardown(function() fast, ref = nil, nil end)

  it("ifs of == give what the fibers and Lua give", function()
    assert.are.equal("fission", fast.sparse.cpu_path)
    local a, b = run_both(fast, ref, "sparse", { grid = 2, block = { 20, 8 } }, function()
      return { cd.array(seq(320, function(i) return ((i - 1) * 7) % 11 end), "int32", CPU), cd.zeros(320, "int32", CPU) }
    end)
    assert.are.same(b, a)
    local want = {}
    for blk = 0, 1 do
      local done = {}
      for t = 0, 159 do
        local g, tx, ty, lane = blk * 160 + t, t % 20, t // 20, t % 32
        local x, o = (g * 7) % 11, 0
        done[t] = t % 9 == 4
        if not done[t] then
          if (tx * 3 + ty) % 7 == 2 then o = x * 10 end
          if tx == ty then o, done[t] = o + 1, true end
        end
        if not done[t] then
          if lane == 5 then o = o + 100 end
          o = o + (tx == 1 and 1000 or 2000)
          if tx == 2 and ty == 1 then o = o + 10000 end
          if x == 3 then o = o + 100000 end
        end
        want[g + 1] = o
      end
      for t = 0, 63 do   -- the warp if: lane 7 reads lane 8 when that thread reached the shuffle
        if not done[t] and t % 32 == 7 then
          local v = t + ((not done[t + 1]) and t + 1 or t)
          want[blk * 160 + t + 1] = want[blk * 160 + t + 1] + 1000000 * (v - 2 * t)
        end
      end
    end
    assert.are.same(want, a[2])
  end)

  it("the written-out function gathers a mask for each if of == only", function()
    local cpp = written_out(SPARSE, "sparse")
    local conds = {}
    for c in cpp:gmatch("cdv_m |= %(unsigned%)!!%((.-)%) << %(cdv_x %- cdv_xw%)") do conds[#conds + 1] = c end
    assert.are.same({ "(tx * 3 + ty) % 7 == 2", "tx == ty", "lane == 5", "lane == 7" }, conds)
  end)
end)

-- cases the block scalars, thread-affine locals and shuffles through the slack once got wrong: a block
-- scalar's division after every thread returned, locals written in parentheses, through a parenthesised
-- argument or address, and shuffles up by a delta of 2^31 or more
local HIDDEN = [[
__device__ void twice(int &v) { v *= 2; }

// a parameter passed to a function that takes it by reference: each thread's own copy changes
extern "C" __global__ void param_twice(int n, int *out)
{
  FORCE
  int t = threadIdx.x;
  if (t & 1) twice(n);
  out[t] = n;
}

extern "C" __global__ void param_twice_bar(int n, int *out)
{
  FORCE
  int t = threadIdx.x;
  if (t & 1) twice(n);
  __syncthreads();
  out[t] = n + (t == n ? 100 : 0);
}

extern "C" __global__ void div_after_return(int d, int *out)
{
  FORCE
  __shared__ int s[64];
  if (threadIdx.x >= d) return;
  s[threadIdx.x] = threadIdx.x;
  __syncthreads();
  int q;
  q = 100 / d;
  __syncthreads();
  out[threadIdx.x] = q + s[(threadIdx.x + 1) % d];
}

extern "C" __global__ void hidden_writes(int k, int *out)
{
  FORCE
  int t = threadIdx.x;
  __syncthreads();
  int a, b, c;
  a = k; b = k; c = k;
  __syncthreads();
  int r = k + 1, p = k + 2;
  __syncthreads();
  (a) = t;
  if (t & 1) twice((b));
  int *pc = &(c);
  *pc += t;
  (r) = 2 * t;
  if (t & 1) twice((p));
  __syncthreads();
  out[5 * t] = a, out[5 * t + 1] = b, out[5 * t + 2] = c, out[5 * t + 3] = r, out[5 * t + 4] = p;
}

// a parameter is each thread's own: one written in parentheses or through a reference keeps the kernel on fibers
extern "C" __global__ void param_alias(int n, int m, int *out)
{
  FORCE
  __shared__ int s[64];
  int t = threadIdx.x;
  (n) = n + t;
  int &r = m;
  r += 2 * t;
  s[t] = n + m;
  __syncthreads();
  out[t] = s[(t + 1) % blockDim.x] * 1000 + n + m;
}

extern "C" __global__ void shfl_up_far(int d, const int *in, int *out)
{
  FORCE
  int t = threadIdx.x;
  int v = in[t];
  v = __shfl_up_sync(0xffffffffu, v, d);
  out[t] = v;
}
]]

describe("cpu fission: writes and traps the fast paths must not miss", function()
  local fast, ref
  setup(function() fast, ref = compile_pair(HIDDEN) end)
  teardown(function() fast, ref = nil, nil end)

  it("a block scalar's division does not run once every thread has returned (NOTE [block scalars])", function()
    assert.are.equal("fission", fast.div_after_return.cpu_path)
    for _, d in ipairs { 0, 5 } do
      local a, b = run_both(fast, ref, "div_after_return", { grid = 1, block = 64 }, function()
        return { d, cd.zeros(64, "int32", CPU) }
      end)
      assert.are.same(b, a)
      assert.are.same(seq(64, function(i) return i <= d and 100 // d + i % d or 0 end), a[2])
    end
  end)

  it("locals written in parentheses, through a parenthesised argument or address stay per-thread", function()
    assert.are.equal("fission", fast.hidden_writes.cpu_path)
    local a, b = run_both(fast, ref, "hidden_writes", { grid = 1, block = 40 }, function()
      return { 3, cd.zeros(200, "int32", CPU) }
    end)
    assert.are.same(b, a)
    local want = {}
    for t = 0, 39 do
      for k, x in ipairs { t, t % 2 == 1 and 6 or 3, 3 + t, 2 * t, t % 2 == 1 and 10 or 5 } do want[5 * t + k] = x end
    end
    assert.are.same(want, a[2])
  end)

  it("a parameter written in parentheses or through a reference stays each thread's own", function()
    assert.are.equal("fibers", fast.param_alias.cpu_path)
    local a = run_both(fast, ref, "param_alias", { grid = 1, block = 8 }, function() return { 3, 5, cd.zeros(8, "int32", CPU) } end)
    assert.are.same(seq(8, function(i) return 3 * (i % 8) * 1000 + 8000 + 3 * i + 5 end), a[3])
  end)

  it("a parameter passed to a function that takes it by reference stays each thread's own", function()
    for _, name in ipairs { "param_twice", "param_twice_bar" } do
      assert.is_nil(({ simd = 1, fission = 1 })[fast[name].cpu_path], name)
      local a, b = run_both(fast, ref, name, { grid = 1, block = 8 }, function() return { 3, cd.zeros(8, "int32", CPU) } end)
      assert.are.same(b, a)
      -- odd threads double their n to 6 (so none has t == n), even ones keep 3
      assert.are.same(seq(8, function(i) return i % 2 == 0 and 6 or 3 end), a[2], name)
    end
  end)

  it("a shuffle up by a delta of 2^31 or more moves by its low five bits on both paths (NOTE [shuffle delta])",
    function()
    assert.are.equal("fission", fast.shfl_up_far.cpu_path)
    for _, d in ipairs { -1, -31, -2147483648 } do
      local a, b = run_both(fast, ref, "shfl_up_far", { grid = 1, block = 64 }, function()
        return { d, cd.array(seq(64, function(i) return i * 3 end), "int32", CPU), cd.zeros(64, "int32", CPU) }
      end)
      assert.are.same(b, a)
      local lo = d & 31   -- 31, 1, 0
      assert.are.same(seq(64, function(i) return 3 * ((i - 1) % 32 >= lo and i - lo or i) end), a[3], d)
    end
  end)
end)

-- What a shuffle delta of 32 or more does: PTX's shfl.sync takes the delta's low five bits (bval[4:0] =
-- b[4:0]), so a delta of 33 moves by 1 and one of 2^32 - 1 by 31 (an H200 did so); the cpu device follows
-- (NOTE [shuffle delta]), where it once gave each lane its own value.
local FAR_SHFL = [[
extern "C" __global__ void far_shfl(unsigned d, const int *in, int *out)
{
  FORCE
  int t = threadIdx.x, v = in[t];
  out[2 * t] = __shfl_down_sync(0xffffffffu, v, d);
  out[2 * t + 1] = __shfl_up_sync(0xffffffffu, v, d);
}
]]

-- the outputs far_shfl must give for delta d: in[t] is 3 * (t + 1)
local function far_want(d)
  local want, b = {}, d & 31
  for t = 0, 63 do
    local lane = t % 32
    want[2 * t + 1] = 3 * ((lane + b < 32 and t + b or t) + 1)
    want[2 * t + 2] = 3 * ((lane >= b and t - b or t) + 1)
  end
  return want
end
local FAR_DELTAS = { 31, 32, 33, 63, 0xffffffff, 0xffffffe1, 0x80000001 }

describe("shuffle deltas of 32 or more (NOTE [shuffle delta])", function()
  helper.gpu_it("on the GPU, shuffles up and down move by the delta's low five bits", function()
    local m = cd.compile("#define FORCE\n" .. FAR_SHFL, { device = "cuda:0" })
    for _, d in ipairs(FAR_DELTAS) do
      local x = cd.array(seq(64, function(i) return i * 3 end), "int32", { device = "cuda:0" })
      local o = cd.zeros(128, "int32", { device = "cuda:0" })
      m.far_shfl({ grid = 1, block = 64 }, d, x, o)
      assert.are.same(far_want(d), o:totable(), d)
    end
  end)

  it("on the cpu device, both paths do the same", function()
    local fast, ref = compile_pair(FAR_SHFL)
    assert.are.equal("fission", fast.far_shfl.cpu_path)
    for _, d in ipairs(FAR_DELTAS) do
      local a, b = run_both(fast, ref, "far_shfl", { grid = 1, block = 64 }, function()
        return { d, cd.array(seq(64, function(i) return i * 3 end), "int32", CPU), cd.zeros(128, "int32", CPU) }
      end)
      assert.are.same(far_want(d), a[3], d)
      assert.are.same(far_want(d), b[3], d)
    end
  end)
end)


-- Issue #29: kernels as CUDA code writes them, with C++ linkage (found by name or through name_expressions)
-- and templates, take the fast paths like extern "C" ones
local CXX = [[
template <typename T>
__global__ void axpy(T a, const T *x, T *y, int n)
{
  FORCE
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
__global__ void cxx_scale(int *y, int n)
{
  FORCE
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 3 * y[i] + i;
}
template <typename T, int B>
__global__ void block_sum(const T *x, T *out)
{
  FORCE
  __shared__ T s[B];
  int t = threadIdx.x;
  T mine = x[blockIdx.x * B + t];
  s[t] = mine;
  __syncthreads();
  for (int h = B / 2; h > 0; h /= 2) {
    if (t < h) s[t] += s[t + h];
    __syncthreads();
  }
  out[blockIdx.x * B + t] = s[0] + mine;
}
template <int B = 64> __global__ void defaulted(int *y) { FORCE y[threadIdx.x] += B; }
__global__ void and_after_barrier(unsigned *y, unsigned n)
{
  FORCE
  __shared__ unsigned s[64];
  unsigned tid = threadIdx.x;
  s[tid] = y[tid];
  __syncthreads();
  unsigned x = (n & tid);
  y[tid] = s[63 - tid] + x;
}
__global__ void warp_cast(unsigned *y)
{
  FORCE
  unsigned v = y[threadIdx.x];
  v += (unsigned)__shfl_xor_sync(0xffffffffu, v, 3);
  v ^= (unsigned int)__ballot_sync(0xffffffffu, v & 1u);
  y[threadIdx.x] = v;
}
__global__ void warp_decl(unsigned *y, unsigned k)
{
  FORCE
  __shared__ unsigned s[64];
  unsigned t = threadIdx.x, v = y[t];
  unsigned d = __shfl_down_sync(0xffffffffu, v, 1) + k;
  unsigned b = __ballot_sync(0xffffffffu, v & 1u);
  float f = (float)__shfl_xor_sync(0xffffffffu, v, 5, 16) * 0.5f;
  unsigned long long w = __shfl_sync(0xffffffffu, (unsigned long long)v << 20, t ^ 7u) >> 3;
  int all = __all_sync(0xffffffffu, v != 7u);
  s[t] = d;
  __syncthreads();
  y[t] = v + s[63 - t] * 3u + b + (unsigned)f + d + (unsigned)w + (unsigned)all;
}
// (see NOTE [power-of-two modulus]) NVIDIA's reduction kernel 0 on 96 threads, a modulus that is a power of two
// or not (k), a signed one, and one by a macro that is no single operand (left as it is)
#define MODM 2 + 2
__global__ void mod_diverge(const unsigned *x, unsigned *out, unsigned k)
{
  FORCE
  __shared__ unsigned s[96];
  unsigned tid = threadIdx.x;
  int st = (int)threadIdx.x - 50;
  s[tid] = x[tid];
  __syncthreads();
  for (unsigned h = 1; h < 96; h *= 2) {
    if (tid % (2 * h) == 0 && tid + h < 96) s[tid] += s[tid + h];
    __syncthreads();
  }
  out[tid] = s[0] + tid % k * 1000u + (unsigned)(st % 7) * 100000u + (tid % MODM) * 10u;
}
__global__ void ternary_after_barrier(const int *x, int *out, int lo)
{
  FORCE
  __shared__ int s[64];
  int t = threadIdx.x;
  s[t] = x[t];
  __syncthreads();
  int w = t - 1 < lo ? lo : t - 1;
  out[t] = s[w] + t;
}
__device__ void sync_step(unsigned *s, unsigned t, unsigned k)
{
  unsigned mine = s[t] * k; // the helper's own local, named like one of the kernel's
  __syncthreads();
  s[t] = mine + s[(t + 1) % 64];
  __syncthreads();
}
__device__ void ref_step(unsigned *s, unsigned &t) { __syncthreads(); s[t] += 1u; }
__global__ void helper_sync(unsigned *y, int n)
{
  FORCE
  __shared__ unsigned s[64];
  unsigned t = threadIdx.x, mine = y[t];
  s[t] = mine;
  __syncthreads();
  sync_step(s, t, 3u);
  for (int r = 0; r < n; r++) sync_step(s, t + 0u, (unsigned)r + mine % 2u);
  if (n > 1) sync_step(s, t, 7u); else { sync_step(s, t, 1u); }
  y[t] = s[t] + mine;
}
__global__ void helper_ref(unsigned *y)
{
  FORCE
  __shared__ unsigned s[64];
  unsigned t = threadIdx.x;
  s[t] = y[t];
  ref_step(s, t);
  y[t] = s[63 - t];
}
#define SYNC() __syncthreads()
#define SYNC_WORD __syncthreads()
__global__ void macro_sync(const int *x, int *out)
{
  FORCE
  __shared__ int s[96];
  int t = threadIdx.x, v = x[blockIdx.x * 96 + t];
  s[t] = v;
  SYNC();
  v += s[95 - t];
  SYNC();
  if (v >= 0) {
    s[t] = v;
    SYNC_WORD;
    v = s[(t + 5) % 96] * 2 + v;
  }
  out[blockIdx.x * 96 + t] = v;
}
__global__ void uniform_ifs(const int *x, int *out, int n, int mode)
{
  FORCE
  __shared__ int s[64];
  int t = threadIdx.x, g = blockIdx.x * 64 + t;
  int v = x[g];
  if (mode > 0) {
    s[t] = v * 2;
    __syncthreads();
    v += s[63 - t];
  } else if (mode < 0) {
    s[t] = v + 1;
    __syncthreads();
    v -= s[(t + 1) % 64];
  } else
    __syncthreads();
  __syncthreads();
  for (int r = 0; r < 2; r++) {
    for (int h = 32; h > 0; h /= 2) {
      if (n > 0) {
        s[t] = v;
        __syncthreads();
        if (t < h) v += s[t + h];
        __syncthreads();
      }
    }
  }
  int k = 0;
  do {
    s[t] = v + k;
    __syncthreads();
    v = s[(t + k + 1) % 64] - k;
    __syncthreads();
    k++;
  } while (k < n);
  out[g] = v;
}
]]

describe("cpu fast paths for C++ linkage and templates", function()
  local exprs = { "axpy<float>", "axpy<int>", "block_sum<int, 128>", "block_sum<float, 64>", "defaulted<>" }
  local fast, ref
  setup(function()
    fast = cd.compile("#define FORCE\n" .. CXX, { device = "cpu", name_expressions = exprs })
    ref = cd.compile("#define FORCE if (0) __syncwarp();\n" .. CXX, { device = "cpu", name_expressions = exprs })
  end)
  teardown(function() fast, ref = nil, nil end)

  local function both(name, cfg, make) return run_both(fast, ref, name, cfg, make) end

  it("names the path each kernel takes", function()
    local want = { ["axpy<float>"] = "simd", ["axpy<int>"] = "simd", cxx_scale = "simd",
      ["block_sum<int, 128>"] = "fission", ["block_sum<float, 64>"] = "fission",
      ["defaulted<>"] = "loop",   -- a template parameter's default: the entry does not name every argument
      uniform_ifs = "fission", macro_sync = "fission",
      and_after_barrier = "fission", warp_cast = "fission",
      warp_decl = "fission", helper_sync = "fission", helper_ref = "fibers",
      ternary_after_barrier = "fission", mod_diverge = "fission" }   -- a thread's own local after ?:'s ':' (its function did not compile)   -- (warp_decl: warp operations in declarations and larger expressions) (n & tid) takes no address (its written-out function failed before)   -- barriers in if/else if/else, nested loops and a do loop (NOTE [barrier if])
    for name, path in pairs(want) do
      assert.are.equal(path, fast[name].cpu_path, name)
      assert.are.equal("fibers", ref[name].cpu_path, name)
    end
  end)

  it("C++ kernels and template instances give what the fibers give", function()
    local a, b = both("axpy<float>", { grid = 3, block = 128 }, function()
      return { 2.5, cd.array(seq(300, function(i) return i % 13 end), "float32", CPU),
        cd.array(seq(300, function(i) return i % 7 end), "float32", CPU), 300 }
    end)
    assert.are.same(b, a)
    assert.are.equal(2.5 * (300 % 13) + 300 % 7, a[3][300])
    a, b = both("axpy<int>", { grid = 2, block = 64 }, function()
      return { 3, cd.array(seq(100, function(i) return i end), "int32", CPU), cd.zeros(100, "int32", CPU), 100 }
    end)
    assert.are.same(b, a)
    assert.are.equal(300, a[3][100])
    a, b = both("cxx_scale", { grid = 2, block = 96 }, function()
      return { cd.array(seq(150, function(i) return i end), "int32", CPU), 150 }
    end)
    assert.are.same(b, a)
    assert.are.equal(3 * 150 + 149, a[1][150])
    for _, k in ipairs { { "block_sum<int, 128>", 128, "int32" }, { "block_sum<float, 64>", 64, "float32" } } do
      local name, blk, dt = k[1], k[2], k[3]
      a, b = both(name, { grid = 3, block = blk }, function()
        return { cd.array(seq(3 * blk, function(i) return i % 11 end), dt, CPU), cd.zeros(3 * blk, dt, CPU) }
      end)
      assert.are.same(b, a)
      local s = 0
      for i = 1, blk do s = s + i % 11 end
      assert.are.equal(s + 1 % 11, a[2][1], name)
    end
  end)

  it("barriers in block-uniform ifs, nested loops and do loops give what the fibers give", function()
    for _, mode in ipairs { 1, -1, 0 } do
      for _, n in ipairs { 0, 3 } do
        local a, b = both("uniform_ifs", { grid = 3, block = 64 }, function()
          return { cd.array(seq(192, function(i) return (i * 7) % 23 end), "int32", CPU), cd.zeros(192, "int32", CPU),
            n, mode }
        end)
        assert.are.same(b, a, "mode " .. mode .. " n " .. n)
      end
    end
  end)

  it("a binary & with a local on its right, in parentheses after a barrier, gives what the fibers give", function()
    local a, b = both("and_after_barrier", { grid = 1, block = 64 }, function()
      return { cd.array(seq(64, function(i) return i * 3 end), "uint32", CPU), 0x2d }
    end)
    assert.are.same(b, a)
    assert.are.equal(64 * 3 + (0x2d & 0), a[1][1])
  end)

  it("warp operations behind a cast give what the fibers give", function()
    local a, b = both("warp_cast", { grid = 1, block = 64 }, function()
      return { cd.array(seq(64, function(i) return (i * 37) % 101 end), "uint32", CPU) }
    end)
    assert.are.same(b, a)
  end)

  it("a modulus in a fission region gives what the fibers give, by a power of two or not, signed or not "
    .. "(NOTE [power-of-two modulus])", function()
    local sum = 0
    for i = 1, 96 do sum = sum + i * 3 end
    for _, k in ipairs { 8, 6, 1 } do
      local a, b = both("mod_diverge", { grid = 1, block = 96 }, function()
        return { cd.array(seq(96, function(i) return i * 3 end), "uint32", CPU), cd.zeros(96, "uint32", CPU), k }
      end)
      assert.are.same(b, a, k)
      for t = 0, 95 do
        local st = t - 50
        local sm = math.fmod(st, 7) -- C's %: the sign of the dividend
        assert.are.equal((sum + (t % k) * 1000 + sm * 100000 + (t % 2 + 2) * 10) % 4294967296, a[2][t + 1], t)
      end
    end
    local cpp = written_out([[
__global__ void r0(const float *x, float *part)
{
  __shared__ float s[256];
  unsigned int tid = threadIdx.x;
  s[tid] = x[blockIdx.x * 256 + tid];
  __syncthreads();
  for (unsigned int h = 1; h < blockDim.x; h *= 2) {
    if (tid % (2 * h) == 0) s[tid] += s[tid + h];
    __syncthreads();
  }
  if (tid == 0) part[blockIdx.x] = s[0];
}
]], "r0")
    assert.truthy(cpp:find("cdv_umod(tid, (2 * h))", 1, true))
  end)

  it("a thread's own local as the last operand of ?: after a barrier gives what the fibers give", function()
    local a, b = both("ternary_after_barrier", { grid = 1, block = 64 }, function()
      return { cd.array(seq(64, function(i) return i * 10 end), "int32", CPU), cd.zeros(64, "int32", CPU), 3 }
    end)
    assert.are.same(b, a)
    assert.are.same({ 40, 41, 42, 43, 44, 55 }, { a[2][1], a[2][2], a[2][3], a[2][4], a[2][5], a[2][6] })
  end)

  it("warp operations in declarations and larger expressions give what the fibers give", function()
    local a, b = both("warp_decl", { grid = 1, block = 64 }, function()
      return { cd.array(seq(64, function(i) return (i * 37) % 101 end), "uint32", CPU), 1000 }
    end)
    assert.are.same(b, a)
  end)

  it("a device function holding barriers, written into its kernel, gives what the fibers give", function()
    for _, n in ipairs { 0, 1, 3 } do
      local a, b = both("helper_sync", { grid = 1, block = 64 }, function()
        return { cd.array(seq(64, function(i) return (i * 37) % 101 end), "uint32", CPU), n }
      end)
      assert.are.same(b, a, n)
    end
    assert.is_nil(fast.helper_sync.cpu_reason)
    -- a reference parameter: not written in, and k.cpu_reason says so
    assert.are.equal("calls 'ref_step', which reaches a barrier or warp operation, a parameter that is not a "
      .. "value or a pointer (line 116)", fast.helper_ref.cpu_reason)
    local a, b = both("helper_ref", { grid = 1, block = 64 }, function()
      return { cd.array(seq(64, function(i) return i end), "uint32", CPU) }
    end)
    assert.are.same(b, a)
  end)

  it("barriers behind a macro that is __syncthreads() give what the fibers give", function()
    local a, b = both("macro_sync", { grid = 2, block = 96 }, function()
      return { cd.array(seq(192, function(i) return (i * 5) % 17 end), "int32", CPU), cd.zeros(192, "int32", CPU) }
    end)
    assert.are.same(b, a)
  end)
end)

-- Issue #29: a {dim = n} launch on the cpu device picks a block that fills the thread loop (the vector loop of
-- the fast paths), not 32 threads
describe("cpu dim launches", function()
  it("suggest_block_size answers 256 on the cpu device, and a dim launch uses it", function()
    local m = cd.compile([[
__global__ void dims(unsigned *out, size_t n)
{
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = blockDim.x;
}
]], CPU)
    assert.are.equal(256, m.dims:suggest_block_size())
    local out = cd.zeros(1000, "uint32", CPU)
    m.dims({ dim = 1000 }, out, 1000)
    assert.are.equal(256, out[1])
    assert.are.equal(256, out[1000])
    assert.are.equal("simd", m.dims.cpu_path)
  end)
end)

-- (see NOTE [modulus stride]) ifs of a thread's x modulo one value for the block, each its region's only statement:
-- NVIDIA's reduction kernel 0 on rows of 100 threads (by a barrier loop's counter), by a parameter of any sign
-- (an int x by a negative m takes the multiples of |m|, an unsigned one only x = 0), by a local that is not x
-- alone (x + 1: no stride), and a sparse if that reads the barrier loop's counter (NOTE [sparse if])
local MSTRIDE = [[
extern "C" __global__ void mstride(int m, const int *in, int *out)
{
  FORCE
  __shared__ int s[2][100];
  unsigned tid = threadIdx.x;
  int itid = threadIdx.x, u = threadIdx.x + 1;
  size_t g = threadIdx.y * 100 + tid;
  s[threadIdx.y][tid] = in[g];
  __syncthreads();
  for (unsigned h = 1; h < blockDim.x; h *= 2) {
    if (tid % (2 * h) == 0) s[threadIdx.y][tid] += tid + h < blockDim.x ? s[threadIdx.y][tid + h] : 0;
    __syncthreads();
    if (tid == h) out[g] += 1000;
    __syncthreads();
  }
  if (itid % m == 0) out[g] += 1;
  __syncthreads();
  if (0 == threadIdx.x % m) out[g] += 10;
  __syncthreads();
  if (u % m == 0) out[g] += 100;
  __syncthreads();
  if (tid == 0) out[g] += s[threadIdx.y][0] * 10000;
}
]]

describe("cpu fission: modulus strides (NOTE [modulus stride])", function()
  local fast, ref
  setup(function() fast, ref = compile_pair(MSTRIDE) end)
  teardown(function() fast, ref = nil, nil end)

  it("ifs of x % m == 0 give what the fibers and Lua give, for m of either sign, past the block or not", function()
    assert.are.equal("fission", fast.mstride.cpu_path)
    for _, m in ipairs { 1, 3, 7, 100, 250, -3 } do
      local a, b = run_both(fast, ref, "mstride", { grid = 1, block = { 100, 2 } }, function()
        return { m, cd.array(seq(200, function(i) return (i * 7) % 11 end), "int32", CPU), cd.zeros(200, "int32", CPU) }
      end)
      assert.are.same(b, a, m)
      local want = {}
      for y = 0, 1 do
        local rowsum = 0
        for x = 0, 99 do rowsum = rowsum + ((y * 100 + x + 1) * 7) % 11 end
        for x = 0, 99 do
          local o = 0
          if x > 0 and x & (x - 1) == 0 and x < 100 then o = o + 1000 end   -- tid == h for h = 1, 2, 4 ... 64
          if math.fmod(x, m) == 0 then o = o + 1 end   -- C's int %
          if (m > 0 and x % m == 0) or x == 0 then o = o + 10 end   -- unsigned %: a negative m is 2^32 + m
          if math.fmod(x + 1, m) == 0 then o = o + 100 end
          if x == 0 then o = o + rowsum * 10000 end
          want[y * 100 + x + 1] = o
        end
      end
      assert.are.same(want, a[3], m)
    end
  end)

  it("the written-out function steps by m for x alone, and gathers masks for the other ifs of ==", function()
    local cpp = written_out(MSTRIDE, "mstride")
    local steps = {}
    for c in cpp:gmatch("cdv_x %+= cdv_mstride%((.-)%)%) {") do steps[#steps + 1] = c end
    assert.are.same({ "(2 * h)", "m", "m" }, steps)
    local conds = {}
    for c in cpp:gmatch("cdv_m |= %(unsigned%)!!%((.-)%) << %(cdv_x %- cdv_xw%)") do conds[#conds + 1] = c end
    assert.are.same({ "tid == h", "cdv_umod(u, m) == 0", "tid == 0" }, conds)
  end)
end)

-- (see NOTE [block index bound]) the fast paths' hinted instance runs blocks of x below 2^20 only: past it, an
-- unsigned index made with a constant wraps, and a test of blockIdx.x against 2^20 holds
describe("cpu fast paths: the block index bound (NOTE [block index bound])", function()
  it("blocks of x 2^20 and up give what CUDA gives", function()
    local m = cd.compile([[
extern "C" __global__ void big_grid(unsigned *out)
{
  __shared__ unsigned s[32];
  unsigned i = blockIdx.x * 4096u + threadIdx.x;
  s[threadIdx.x] = (blockIdx.x > 0xfffffu) + (i >> 12 == blockIdx.x) * 2u;
  __syncthreads();
  if (threadIdx.x == 0) out[blockIdx.x] = s[0] + s[31] * 4u;
}
extern "C" __global__ void big_grid_simd(unsigned *out)
{
  unsigned i = blockIdx.x * 4096u + threadIdx.x;
  if (threadIdx.x == 0) out[blockIdx.x] = (blockIdx.x > 0xfffffu) + (i >> 12 == blockIdx.x) * 2u;
}
]], CPU)
    assert.are.equal("fission", m.big_grid.cpu_path)
    assert.are.equal("simd", m.big_grid_simd.cpu_path)
    local n = (1 << 20) + 2
    for _, name in ipairs { "big_grid", "big_grid_simd" } do
      local out = cd.zeros(n, "uint32", CPU)
      m[name]({ grid = n, block = 32 }, out)
      local one = name == "big_grid" and 10 or 2   -- below 2^20: i >> 12 is the block (2, and 4 * 2 for s[31])
      assert.are.same({ one, one, one / 2, one / 2 },
        { out[1], out[1 << 20], out[(1 << 20) + 1], out[n] }, name)
    end
  end)
end)

-- (see NOTE [full warps]) warp ifs that whole warps take, one whose chunks of a row are not warps (rows of 48
-- threads: the chunk from thread 48 spans two warps, whose lanes of row 0 do not take it: the vote's mask leaves
-- them out), and one that part of every warp takes; shuffles and votes inside
local FULLW = [[
extern "C" __global__ void full_warps(const int *in, int *out)
{
  FORCE
  int t = threadIdx.y * blockDim.x + threadIdx.x, lane = t & 31, w = t >> 5, nt = blockDim.x * blockDim.y;
  size_t g = (size_t)blockIdx.x * nt + t;
  int v = in[g];
  unsigned row1 = 0;
  for (int l = 0; l < 32; l++)
    if (w * 32 + l < nt && (w * 32 + l) / (int)blockDim.x == 1) row1 |= 1u << l;
  if (w != 1) {
    v += __shfl_down_sync(0xffffffffu, v, 3);
    v += __ballot_sync(0xffffffffu, v & 1) & 0xff;
  }
  if (threadIdx.y == 1) {
    v += (int)(__ballot_sync(row1, v & 1) & 0xffffu) * 1000;
  }
  if (lane & 2) {
    v += __shfl_xor_sync(0xccccccccu, v, 1) * 100;
  }
  out[g] = v;
}
]]

describe("cpu fission: warp ifs over whole warps (NOTE [full warps])", function()
  local fast, ref
  setup(function() fast, ref = compile_pair(FULLW) end)
  teardown(function() fast, ref = nil, nil end)

  it("give what the fibers give, in rows of a multiple of 32 threads or not", function()
    assert.are.equal("fission", fast.full_warps.cpu_path)
    for _, block in ipairs { { 64, 2 }, { 48, 2 }, { 40, 4 }, { 128, 1 } } do
      local n = 2 * block[1] * block[2]
      local a, b = run_both(fast, ref, "full_warps", { grid = 2, block = block }, function()
        return { cd.array(seq(n, function(i) return (i * 37) % 101 end), "int32", CPU), cd.zeros(n, "int32", CPU) }
      end)
      assert.are.same(b, a, block[1] .. "x" .. block[2])
    end
  end)

  it("the written-out function runs a chunk that is a whole warp without its flags and who took part", function()
    local cpp = written_out(FULLW, "full_warps")
    local _, full = cpp:gsub("if %(cdv_full%) {", "")
    assert.are.equal(8, full)   -- two regions for each of the four warp operations
    assert.truthy(cpp:find("(cdv_full ? (const unsigned char *)0 : cdv_xp)", 1, true))
  end)
end)

-- (see NOTE [warp chains]) loops of shuffles that the fission function runs on whole warps at once: every lane's
-- result is written, not only lane 0's (lane 31 of a chain down adds its own value at each step); floats whose
-- sum changes with the order of its additions; an operator whose operands do not commute (-=, each lane's own
-- value first); widths; up (a scan) and xor; counters written as people write them; a chain in a warp if that
-- whole warps take, and in one that part of each warp takes with a full mask (the fibers' rule: a lane that did
-- not take part gives the reader its own value); a partial mask; blocks whose last warp is partial, and 2-d ones
local CHAINS = [[
extern "C" __global__ void chains(const float *x, const unsigned *in, float *fo, unsigned *io)
{
  FORCE
  unsigned t = threadIdx.y * blockDim.x + threadIdx.x, w = t >> 5;
  size_t g = (size_t)blockIdx.x * blockDim.x * blockDim.y + t;
  float v = x[g];
  unsigned a = in[g], b = a * 7u + 1u, c = a ^ 0x55u, d = a + 3u, e = a, f = a * 5u;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  for (int m = 1; m < 32; m *= 2) a -= __shfl_xor_sync(~0u, a, m);
  for (unsigned o = 1; o <= 16; o <<= 1) b += __shfl_up_sync(0xffffffff, b, o);
  for (int o = warpSize / 4; o > 0; o /= 2) c *= __shfl_down_sync(0xFFFFFFFFU, c, o, 16);
  if (w & 1) {
    for (int o = 8; o >= 1; o = o >> 1) d ^= __shfl_xor_sync(0xffffffffu, d, o, 8) * 3u;
  }
  if (w & 1) {
    for (int o = 4; o >= 1; o = o >> 1) d -= __shfl_xor_sync(0xffffffffu, d, o, 8);
  }
  if (t & 4) {
    for (int o = 16; o != 0; o >>= 1) e += __shfl_down_sync(0xf0f0f0f0u, e, o);
  }
  if ((t & 31) < 16) {
    for (int o = 1; o < 16; o <<= 1) f += __shfl_xor_sync(0x0000ffffu, f, o);
  }
  fo[g] = v;
  io[6 * g] = a, io[6 * g + 1] = b, io[6 * g + 2] = c, io[6 * g + 3] = d, io[6 * g + 4] = e, io[6 * g + 5] = f;
}

// chains written out by hand, one statement a step: v's read in lane 0 only (NOTE [dead lanes]), u's in every
// lane, with a statement between two of them; z's two statements differ in their operator (not one chain)
extern "C" __global__ void written(const float *x, float *out, float *w0)
{
  FORCE
  size_t g = (size_t)blockIdx.x * blockDim.x * blockDim.y + threadIdx.y * blockDim.x + threadIdx.x;
  unsigned lane = threadIdx.x & 31;
  float v = x[g], u = v * 0.5f, z = v * 0.25f;
  v += __shfl_down_sync(0xffffffff, v, 16);
  v += __shfl_down_sync(0xffffffff, v, 8);
  v += __shfl_down_sync(0xffffffff, v, 4);
  v += __shfl_down_sync(0xffffffff, v, 2);
  v += __shfl_down_sync(0xffffffff, v, 1);
  if (lane == 0) w0[g] = v;
  u += __shfl_xor_sync(~0u, u, 1);
  u += __shfl_xor_sync(~0u, u, 2);
  u *= 3.0f;
  u -= __shfl_xor_sync(~0u, u, 4, 8);
  u -= __shfl_xor_sync(~0u, u, 2, 8);
  z += __shfl_up_sync(~0u, z, 1);
  z -= __shfl_up_sync(~0u, z, 2);
  out[g] = u + z;
}

// the warp sum as CUDA code writes it: `#pragma unroll` last in its region, before the loop (its line swallowed
// the region's closing brace, and the kernel fell back to the fibers)
extern "C" __global__ void unrolled(const float *x, float *out)
{
  FORCE
  size_t g = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  float v = x[g];
#pragma unroll
  for (int offset = warpSize / 2; offset > 0; offset /= 2) {
    v += __shfl_down_sync(0xffffffff, v, offset);
  }
  if ((threadIdx.x & 31) == 0) out[g / 32] = v;
}

// loops of shuffles that are not chains, and a chain after a return: the loops as NOTE [warp fission] writes them
extern "C" __global__ void not_chains(const unsigned *in, unsigned *io, int n)
{
  FORCE
  unsigned t = threadIdx.x;
  size_t g = (size_t)blockIdx.x * blockDim.x + t;
  unsigned a = in[g], b = a + 1u, c = a + 2u, d = a + 3u, e = a + 4u;
  for (int k = 16; k > 0; k >>= 1) a += __shfl_down_sync(0xffffffffu, a, k) + 1u;
  for (int k = 16; k > 0; k >>= 1) b += __shfl_down_sync(0xffffffffu, c, k);
  for (int k = 1; k < n; k <<= 1) c += __shfl_xor_sync(0xffffffffu, c, k);
  for (int k = 8; k > 0; k >>= 1) d += __shfl_down_sync(0xffffffffu, d, k + 1);
  for (int k = 8; k > 0; k >>= 1) e += (unsigned)__shfl_down_sync(0xffffffffu, e, k);
  io[5 * g] = a, io[5 * g + 1] = b, io[5 * g + 2] = c, io[5 * g + 3] = d, io[5 * g + 4] = e;
}

extern "C" __global__ void chain_ret(const unsigned *in, unsigned *io, int n)
{
  FORCE
  unsigned t = threadIdx.x;
  size_t g = (size_t)blockIdx.x * blockDim.x + t;
  unsigned a = in[g];
  if (blockIdx.x == 1 || (n == 4 && (t & 8))) return;
  for (int k = 16; k > 0; k >>= 1) a += __shfl_down_sync(0xffffffffu, a, k);
  io[5 * g] = a;
}
]]

-- a chain in a warp if that part of each warp takes, with a full mask: not valid CUDA (the fibers find lanes of the
-- mask that do not take part), but fission gives what NOTE [warp fission] gives, a lane's own value for a lane that
-- did not take part, with the chain (e) as without it (f, not a chain: the sum has a second term)
local PARTIAL = [[
extern "C" __global__ void chain_partial(const unsigned *in, unsigned *io)
{
  size_t g = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  unsigned e = in[g], f = e;
  if (threadIdx.x & 36) {
    for (int o = 1; o < 32; o <<= 1) e += __shfl_xor_sync(0xffffffffu, e, o);
    for (int o = 1; o < 32; o <<= 1) f += __shfl_xor_sync(0xffffffffu, f, o) + 0u;
  }
  io[2 * g] = e, io[2 * g + 1] = f;
}
]]

-- the steps of cdv_wstep in the fission function of kernel in the C++ cpp
local function steps_of(cpp, kernel)
  local at = assert(cpp:find("void cdv_fis_cdv_k%d+_" .. kernel .. "%("), kernel)
  local _, n = cpp:sub(at, cpp:find("pop_macro", at, true)):gsub("cdv_wstep<", "")
  return n
end

describe("cpu fission: chains of shuffles on whole warps (NOTE [warp chains])", function()
  local fast, ref
  setup(function() fast, ref = compile_pair(CHAINS) end)
  teardown(function() fast, ref = nil, nil end)

  it("give every lane what the fibers give it, bit for bit", function()
    assert.are.equal("fission", fast.chains.cpu_path)
    for _, block in ipairs { { 64, 1 }, { 16, 4 }, { 96, 1 }, { 48, 1 }, { 40, 2 } } do
      local n = 2 * block[1] * block[2]
      local a, b = run_both(fast, ref, "chains", { grid = 2, block = block }, function()
        return { cd.array(seq(n, function(i) return (i % 9 == 0 and 3.0e7 or 0) + ((i * 37) % 101) * 1.0e-3 end),
          "float32", CPU), cd.array(seq(n, function(i) return (i * 2654435761) % 4294967296 end), "uint32", CPU),
          cd.zeros(n, "float32", CPU), cd.zeros(6 * n, "uint32", CPU) }
      end)
      assert.are.same(b, a, block[1] .. "x" .. block[2])
    end
  end)

  it("written out by hand give every lane what the fibers give it", function()
    assert.are.equal("fission", fast.written.cpu_path)
    for _, block in ipairs { { 64, 1 }, { 16, 4 }, { 48, 1 } } do
      local n = 2 * block[1] * block[2]
      local a, b = run_both(fast, ref, "written", { grid = 2, block = block }, function()
        return { cd.array(seq(n, function(i) return (i % 9 == 0 and 3.0e7 or 0) + ((i * 37) % 101) * 1.0e-3 end),
          "float32", CPU), cd.zeros(n, "float32", CPU), cd.zeros(n, "float32", CPU) }
      end)
      assert.are.same(b, a, block[1] .. "x" .. block[2])
    end
  end)

  it("take a chain after `#pragma unroll` on the fission path", function()
    assert.are.equal("fission", fast.unrolled.cpu_path)
    local a, b = run_both(fast, ref, "unrolled", { grid = 2, block = 96 }, function()
      return { cd.array(seq(192, function(i) return (i % 9 == 0 and 3.0e7 or 0) + i * 1.0e-3 end), "float32", CPU),
        cd.zeros(6, "float32", CPU) }
    end)
    assert.are.same(b, a)
  end)

  it("keep the loops that are not chains as they were, and give what the fibers give", function()
    assert.are.equal("fission", fast.not_chains.cpu_path)
    for _, name in ipairs { "not_chains", "chain_ret" } do
      for _, n in ipairs { 32, 4 } do
        local a, b = run_both(fast, ref, name, { grid = 3, block = 64 }, function()
          return { cd.array(seq(192, function(i) return i * 40503 end), "uint32", CPU), cd.zeros(5 * 192, "uint32", CPU),
            n }
        end)
        assert.are.same(b, a, name .. ", n = " .. n)
      end
    end
  end)

  it("run a warp if that part of a warp takes as NOTE [warp fission] does", function()
    local m = cd.compile(PARTIAL, CPU)
    assert.are.equal("fission", m.chain_partial.cpu_path)
    local io = cd.zeros(2 * 128, "uint32", CPU)
    m.chain_partial({ grid = 2, block = 64 }, cd.array(seq(128, function(i) return i * 40503 end), "uint32", CPU), io)
    local t = io:totable()
    for i = 1, #t, 2 do assert.are.equal(t[i + 1], t[i], "thread " .. (i - 1) // 2) end
  end)

  it("write the chains' steps out, one a step, and no step for the loops that are not chains", function()
    local cpp = written_out(CHAINS, "chains")
    assert.are.equal(5 + 5 + 5 + 4 + 3, steps_of(cpp, "chains"))
    assert.are.equal(5 + 5 + 2 + 2, steps_of(cpp, "written"))   -- v's twice: lane 0's, and every lane's
    assert.are.equal(5 + 5, steps_of(cpp, "unrolled"))   -- `(threadIdx.x & 31) == 0` reads lane 0 only
    assert.are.equal(0, steps_of(cpp, "not_chains"))
    assert.are.equal(0, steps_of(cpp, "chain_ret"))
    assert.are.equal(5, steps_of(written_out(PARTIAL, "chain_partial"), "chain_partial"))
  end)
end)

-- (see NOTE [dead lanes]) chains whose lanes the kernel reads after them in different ways: a only in lane 0 before
-- a new value for every thread (its other lanes are dead), b by every lane, c in lanes 0 and 16 (`x % 16 == 0`),
-- d after a new value that only some threads took, e in an if on lane 0 with an else; in blocks of rows of 16
-- threads, `threadIdx.x & 31` is 0 in lanes 0 and 16 of each warp
local DEAD = [[
extern "C" __global__ void dead(const unsigned *in, unsigned *out, unsigned *w0)
{
  FORCE
  size_t g = (size_t)blockIdx.x * blockDim.x * blockDim.y + threadIdx.y * blockDim.x + threadIdx.x;
  unsigned t = threadIdx.y * blockDim.x + threadIdx.x, lane = threadIdx.x & 31, half = threadIdx.x % 16;
  unsigned a = in[g], b = a * 3u, c = a ^ 7u, d = a + 5u, e = a * 9u;
  for (int o = 16; o > 0; o >>= 1) a += __shfl_down_sync(0xffffffffu, a, o);
  if (lane == 0) w0[g] = a;
  a = in[g] + 1u;
  for (int o = 16; o > 0; o >>= 1) b += __shfl_down_sync(0xffffffffu, b, o);
  if (lane == 0) w0[g] += b * 3u;
  for (int o = 16; o > 0; o >>= 1) c += __shfl_down_sync(0xffffffffu, c, o);
  if (half == 0) out[5 * g + 1] = c;
  for (int o = 16; o > 0; o >>= 1) d ^= __shfl_down_sync(0xffffffffu, d, o);
  if (t & 32) {
    d = 1u;
  }
  for (int o = 16; o > 0; o >>= 1) e += __shfl_down_sync(0xffffffffu, e, o);
  if (lane == 0) out[5 * g + 3] = e; else out[5 * g + 3] = e + 1u;
  out[5 * g] = b, out[5 * g + 2] = d, out[5 * g + 4] = a;
}
]]

describe("cpu fission: chains whose other lanes nobody reads (NOTE [dead lanes])", function()
  it("give what the fibers give to the lanes that are read, and skip the others' work", function()
    local fast, ref = compile_pair(DEAD)
    assert.are.equal("fission", fast.dead.cpu_path)
    for _, block in ipairs { { 64, 1 }, { 16, 4 }, { 96, 1 }, { 48, 1 } } do
      local n = 2 * block[1] * block[2]
      local a, b = run_both(fast, ref, "dead", { grid = 2, block = block }, function()
        return { cd.array(seq(n, function(i) return (i * 2654435761) % 4294967296 end), "uint32", CPU),
          cd.zeros(5 * n, "uint32", CPU), cd.zeros(n, "uint32", CPU) }
      end)
      assert.are.same(b, a, block[1] .. "x" .. block[2])
    end
    local cpp = written_out(DEAD, "dead")
    local masks = {}
    for m in cpp:gmatch("cdv_wstep<CDV_SHFL_DOWN, 1, 32, (0x%x+)u>") do masks[#masks + 1] = m end
    assert.are.same({ "0x1", "0x10001" }, masks)   -- a's chain and c's; b, d and e run every lane
  end)
end)

-- (see NOTE [modulus stride]) `if (lane == 0)` with lane a local set to `t & 31` (t threadIdx.x), `threadIdx.x & 7u`
-- or `t % 8`: the region's loop over x steps by 32, 8 and 8; blocks whose size is not a multiple of the step
local LANES = [[
extern "C" __global__ void lane_if(const int *in, int *out)
{
  FORCE
  __shared__ int s[256];
  unsigned t = threadIdx.x, lane = t & 31, q = threadIdx.x & 7u;
  int r = t % 8;
  size_t g = (size_t)blockIdx.x * blockDim.x + t;
  s[t] = in[g];
  __syncthreads();
  if (lane == 0) s[t] += 1000;
  __syncthreads();
  if (0 == q) s[t] += 20000 + s[(t + 1) % blockDim.x];
  __syncthreads();
  if (r == 0) s[t] += 300000;
  __syncthreads();
  out[g] = s[t];
}
]]

describe("cpu fission: `if (lane == 0)` visits the threads of a multiple of its step (NOTE [modulus stride])", function()
  it("gives what the fibers give, and steps the loop over x", function()
    local fast, ref = compile_pair(LANES)
    assert.are.equal("fission", fast.lane_if.cpu_path)
    for _, block in ipairs { 256, 100, 40 } do
      local a, b = run_both(fast, ref, "lane_if", { grid = 2, block = block }, function()
        return { cd.array(seq(2 * block, function(i) return i * 7 end), "int32", CPU), cd.zeros(2 * block, "int32", CPU) }
      end)
      assert.are.same(b, a, "block " .. block)
    end
    local cpp = written_out(LANES, "lane_if")
    for _, step in ipairs { "cdv_mstride(31 + 1u)", "cdv_mstride(7u + 1u)", "cdv_mstride(8)" } do
      assert.truthy(cpp:find(step, 1, true), step)
    end
  end)
end)

-- (see NOTE [loose counters]) the counters of a do loop and a while loop of warp operations, set among other
-- statements and read in the loops' headers only; a local set the same way but read in a region (r) stays each
-- thread's own; a kernel with a return keeps its counter per thread (the fibers)
local LOOSE = [[
extern "C" __global__ void loose(const unsigned *in, unsigned *out, int n)
{
  FORCE
  unsigned t = threadIdx.x, v = in[blockIdx.x * blockDim.x + t];
  int c = 0;
  do {
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    v ^= t;
    c++;
  } while (c < n);
  int q = n + 1;
  int r = 0;
  while (q > 0) {
    v = v * 3u + (unsigned)r;
    r += 2;
    v += __shfl_down_sync(0xffffffffu, v, 2);
    q -= 1;
  }
  out[blockIdx.x * blockDim.x + t] = v;
}
extern "C" __global__ void loose_ret(const unsigned *in, unsigned *out, int n)
{
  FORCE
  unsigned t = threadIdx.x, v = in[blockIdx.x * blockDim.x + t];
  if (blockIdx.x == 1) return;
  int c = 0;
  do {
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    v ^= t;
    c++;
  } while (c < n);
  out[blockIdx.x * blockDim.x + t] = v;
}
]]

describe("cpu fission: counters of loops of warp operations (NOTE [loose counters])", function()
  local fast, ref
  setup(function() fast, ref = compile_pair(LOOSE) end)
  teardown(function() fast, ref = nil, nil end)

  it("take fission and give what the fibers give; with a return, the fibers", function()
    assert.are.equal("fission", fast.loose.cpu_path)
    assert.are.equal("fibers", fast.loose_ret.cpu_path)
    assert.are.equal("a thread's own local in the header of a loop of warp operations (line 32)",
      fast.loose_ret.cpu_reason)
    for _, n in ipairs { 1, 2, 5 } do
      for _, name in ipairs { "loose", "loose_ret" } do
        local a, b = run_both(fast, ref, name, { grid = 3, block = 64 }, function()
          return { cd.array(seq(192, function(i) return (i * 2654435761) % 4294967296 end), "uint32", CPU),
            cd.zeros(192, "uint32", CPU), n }
        end)
        assert.are.same(b, a, name .. " " .. n)
      end
    end
  end)

  it("the written-out function has one scalar for each counter and an array for r", function()
    local cpp = written_out(LOOSE, "loose")
    for _, decl in ipairs { "int c;", "int q;", "int r[cdv_nt]" } do
      assert.is_truthy(cpp:find(decl, 1, true), decl)
    end
  end)
end)
