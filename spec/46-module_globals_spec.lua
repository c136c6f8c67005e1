-- Module globals (API.md "Kernels"; NOTE [module globals] in src/module.c): m:get_global(name [, dtype [, shape]])
-- views a __constant__ / __device__ variable as an Array, m.globals lists them. The same sources run on every
-- device ("cpu", and "cuda:0" when there is one); what needs NVRTC alone (no GPU) compiles for sm_90 and is
-- pending without NVRTC; what is specific to the GPU (cuModuleGetGlobal, stream order of __constant__ copies)
-- is a gpu_it.
local helper = require "spec.helper"
local cd = require "cudadev"

local expect_error = helper.assert_error_matches

-- A lookup table in constant memory, a counter in global memory inside a namespace, a static (internal
-- linkage) variable with an initialiser, two declarators in one declaration, a variable template, a
-- declaration that is not a definition, and device functions that the scanner must not take for variables.
local GLOBALS = [[
__constant__ float table[16];
namespace ns { __device__ int counter; }
static __device__ int hidden = 7;
__device__ float a = 1.5f, b[3] = {1, 2, 3};
template <typename T> __device__ T tv;
extern __device__ int declared_elsewhere;
__device__ float twice(float x) { return 2.0f * x; }
struct S { __device__ int f() const { return 1; } };

extern "C" __global__ void lookup(const int *idx, float *out, int n)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = twice(table[idx[i] & 15]) + hidden;
}

extern "C" __global__ void count(int n)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&ns::counter, 1);
}

extern "C" __global__ void sum_through(const float *p, float *out, int n)
{
  float s = 0.0f;
  for (int i = 0; i < n; i++) s += p[i];
  *out = s;
}
]]

local NAMES = { "table", "ns::counter", "hidden", "a", "b" }

local nvrtc_it = helper.nvrtc_it

describe("module globals, compiled by NVRTC for sm_90 without a GPU", function()
  nvrtc_it("m.globals lists the namespace-scope variables in source order, then the name expressions", function()
    local m = cd.compile(GLOBALS, { arch = "sm_90", target = "ptx", name_expressions = { "tv<double>" } })
    assert.are.same({ "table", "ns::counter", "hidden", "a", "b", "tv<double>" }, m.globals)
    assert.are.same({ "lookup", "count", "sum_through" }, m.kernels)
  end)

  nvrtc_it("every global is in the PTX under its lowered name, the unused ones too", function()
    local m = cd.compile(GLOBALS, { arch = "sm_90", target = "ptx", name_expressions = { "&tv<double>" } })
    for _, decl in ipairs { ".const .align 4 .b8 table[64];", ".global .align 4 .u32 _ZN2ns7counterE;",
      ".global .align 4 .u32 hidden = 7;", ".global .align 4 .f32 a = 0f3FC00000;", ".global .align 8 .f64 _Z2tvIdE;" } do
      assert.is_truthy(m.ptx:find(decl, 1, true), decl)
    end
    assert.are.equal("tv<double>", m.globals[6])   -- the '&' of a name expression is not part of the name
  end)

  nvrtc_it("a module with no device has no memory to view", function()
    -- with the cpu device as the default, an arch compile is not loaded anywhere (a GPU default would load it)
    local m = cd.with_device("cpu", cd.compile, GLOBALS, { arch = "sm_90" })
    expect_error(function() return m:get_global("table") end,
      'module was compiled for sm_90 with no device to run on (compile with device = "cuda:N")')
  end)
end)

helper.each_device(function(dev)
  describe("module globals on " .. dev, function()
    local function compile(opts)
      opts = opts or {}
      opts.device = dev
      return cd.compile(GLOBALS, opts)
    end

    it("m.globals, and a default view of uint8 over the variable's bytes", function()
      local m = compile()
      assert.are.same(NAMES, m.globals)
      local t = m:get_global("table")
      assert.are.same({ "uint8", 64, dev }, { t.dtype, t.size, t.device.alias })
      local h = m:get_global("hidden")
      assert.are.same({ 7, 0, 0, 0 }, h:totable())
    end)

    it("a dtype divides the bytes into elements; a shape must fit", function()
      local m = compile()
      assert.are.same({ 16 }, m:get_global("table", "float32").shape)
      assert.are.same({ 4, 4 }, m:get_global("table", "float32", { 4, 4 }).shape)
      assert.are.same({ 2, 3 }, m:get_global("table", "int16", { 2, 3 }).shape)   -- a part of it
      assert.are.same({ 1.0, 2.0, 3.0 }, m:get_global("b", "float32"):totable())
      assert.are.equal(1.5, m:get_global("a", "float32"):totable()[1])
      expect_error(function() return m:get_global("b", "float64") end,
        "bad argument #2 to 'get_global' ('b' is 12 bytes, not a whole number of float64 (8 bytes each); give a shape)")
      expect_error(function() return m:get_global("table", "float64", { 3, 3 }) end,
        "bad argument #3 to 'get_global' (a shape of 9 float64 is 72 bytes, more than the 64 bytes of 'table')")
      expect_error(function() return m:get_global("table", "float33") end,
        "bad argument #2 to 'get_global' (unknown dtype 'float33' (expected float32, int32, ...))")
    end)

    it("an unknown name is an error that lists the module's globals", function()
      local m = compile()
      expect_error(function() return m:get_global("tabel") end,
        "module has no global 'tabel' (globals: table, ns::counter, hidden, a, b)")
      expect_error(function() return m:get_global("declared_elsewhere") end,
        "module has no global 'declared_elsewhere' (globals: table, ns::counter, hidden, a, b)")
      expect_error(function() return m:get_global("lookup") end,
        "module has no global 'lookup' (globals: table, ns::counter, hidden, a, b)")
      local none = cd.compile('extern "C" __global__ void k() {}', { device = dev })
      assert.are.same({}, none.globals)
      expect_error(function() return none:get_global("x") end, "module has no global 'x' (globals: none)")
    end)

    it("a __constant__ table filled from Lua is what the next launch reads, and changes between launches", function()
      local m = compile()
      local t = m:get_global("table", "float32")
      local idx = cd.array({ 0, 1, 2, 15, 16, 31 }, "int32", { device = dev })
      local out = cd.zeros(6, "float32", { device = dev })
      local v = {}
      for i = 1, 16 do v[i] = i * 0.5 end
      cd.copy(t, cd.array(v, "float32"))
      m.lookup({ grid = 1, block = 32 }, idx, out, 6)
      assert.are.same({ 8, 9, 10, 23, 8, 23 }, out:totable())   -- 2 * table[i & 15] + 7
      t:fill(-1)
      m.lookup({ grid = 1, block = 32 }, idx, out, 6)
      assert.are.same({ 5, 5, 5, 5, 5, 5 }, out:totable())
      t:copy_from(cd.array(v, "float32", { device = dev }))
      m.lookup({ grid = 1, block = 32 }, idx, out, 6)
      assert.are.same({ 8, 9, 10, 23, 8, 23 }, out:totable())
    end)

    it("a kernel's writes to a __device__ variable (a C++ name) are what the view reads", function()
      local m = compile()
      local c = m:get_global("ns::counter", "int32")
      assert.are.same({ 0 }, c:totable())
      m.count({ grid = 4, block = 64 }, 200)
      assert.are.same({ 200 }, c:totable())
      c:zero()
      m.count({ grid = 1, block = 64 }, 33)
      assert.are.same({ 33 }, c:totable())
      assert.are.same({ 33 }, m:get_global("::ns::counter", "int32"):totable())
    end)

    it("a variable template's instance, named by a name expression", function()
      local m = compile { name_expressions = { "tv<double>", "tv<int>" } }
      assert.are.same({ "table", "ns::counter", "hidden", "a", "b", "tv<double>", "tv<int>" }, m.globals)
      local d = m:get_global("tv<double>", "float64")
      d:fill(2.25)
      assert.are.same({ 2.25 }, d:totable())
      assert.are.same({ 1 }, m:get_global("tv<int>", "int32").shape)
    end)

    it("a variable in a branch the preprocessor drops is left out; name expressions still name the others", function()
      local src = [[
#ifdef WITH_SCRATCH
__device__ float scratch[8];
#endif
__constant__ int lut[4];
extern "C" __global__ void k(int *o) { o[threadIdx.x] = lut[threadIdx.x]; }
]]
      assert.are.same({}, cd.compile(src, { device = dev }).globals)
      assert.are.same({ "scratch", "lut" }, cd.compile(src, { device = dev, options = { "-DWITH_SCRATCH" } }).globals)
      local m = cd.compile(src, { device = dev, name_expressions = { "lut" } })
      assert.are.same({ "lut" }, m.globals)
      local lut = m:get_global("lut", "int32")
      cd.copy(lut, cd.array({ 5, 6, 7, 8 }, "int32"))
      local o = cd.zeros(4, "int32", { device = dev })
      m.k({ grid = 1, block = 4 }, o)
      assert.are.same({ 5, 6, 7, 8 }, o:totable())
    end)

    it("a view is a kernel argument, a copy source and destination, and works on a stream", function()
      local m = compile()
      local b = m:get_global("b", "float32")
      local out = cd.zeros(1, "float32", { device = dev })
      m.sum_through({ grid = 1, block = 1 }, b, out, 3)
      assert.are.same({ 6 }, out:totable())
      local s = cd.stream(dev)
      cd.copy(b, cd.array({ 10, 20, 30 }, "float32", { device = dev }), { stream = s })
      m.sum_through({ grid = 1, block = 1, stream = s }, b, out, 3)
      local back = cd.zeros(3, "float32", { device = dev })
      cd.copy(back, b, { stream = s })
      s:synchronize()
      assert.are.same({ 60 }, out:totable())
      assert.are.same({ 10, 20, 30 }, back:totable())
      assert.are.same({ 20, 30 }, b:slice(2, 3):totable())
    end)

    it("a view keeps its module loaded after the Module value and the cache let go of it", function()
      local m = compile()
      local t = m:get_global("table", "int32")
      m = nil
      cd.clear_kernel_cache()
      collectgarbage()
      collectgarbage()
      t:fill(42)
      assert.are.equal(42, t:totable()[16])
      local s = t:slice(3, 4)
      t:free()
      collectgarbage()
      assert.are.same({ 42, 42 }, s:totable())
    end)
  end)
end)

describe("module globals on the GPU", function()
  helper.gpu_it("cuModuleGetGlobal's pointer: the view is device memory of cuda:0 with the variable's size", function()
    local m = cd.compile(GLOBALS, { device = "cuda:0" })
    local t = m:get_global("table", "float32")
    assert.are.equal("cuda:0", t.device.alias)
    assert.are.equal(64, t.nbytes)
    assert.is_true(m.lookup.attributes.const_size_bytes >= 64)
  end)

  helper.gpu_it("a module loaded from PTX lists its variables by lowered name; one from a cubin asks the driver", function()
    local ptx = cd.compile(GLOBALS, { arch = "sm_90", target = "ptx" }).ptx
    local m = cd.load_module(ptx, { device = "cuda:0" })
    -- NVRTC (whole-program) defines the extern variable the kernel uses in its PTX, so the PTX lists it too
    assert.are.same({ "table", "hidden", "a", "b", "_ZN2ns7counterE", "declared_elsewhere" }, (function()
      local t = m.globals
      table.sort(t, function(x, y)
        local order = { table = 1, hidden = 2, a = 3, b = 4, _ZN2ns7counterE = 5, declared_elsewhere = 6 }
        return (order[x] or 9) < (order[y] or 9)
      end)
      return t
    end)())
    assert.are.equal(16, m:get_global("table", "float32").size)
    assert.are.same({ 7 }, m:get_global("hidden", "int32"):totable())
    local cubin = cd.compile(GLOBALS, { device = "cuda:0", target = "cubin" }).cubin
    local c = cd.load_module(cubin, { device = "cuda:0" })
    assert.are.same({}, c.globals)
    assert.are.same({ 1, 2, 3 }, c:get_global("b", "float32"):totable())
    local ok, err = pcall(c.get_global, c, "nope")
    assert.is_false(ok)
    assert.are.equal("cuModuleGetGlobal", err.api)
    assert.is_truthy(err.message:find("('nope')", 1, true))
  end)

  helper.gpu_it("__constant__ copies queued on a stream between launches are seen by each next launch", function()
    local m = cd.compile(GLOBALS, { device = "cuda:0" })
    local t = m:get_global("table", "float32")
    local s = cd.stream("cuda:0")
    local idx = cd.array({ 3 }, "int32", { device = "cuda:0" })
    local outs, srcs = {}, {}
    for k = 1, 64 do
      srcs[k] = cd.full(16, k, "float32", { pinned = true })
      outs[k] = cd.zeros(1, "float32", { device = "cuda:0" })
      cd.copy(t, srcs[k], { stream = s })                 -- asynchronous: pinned host memory
      m.lookup({ grid = 1, block = 1, stream = s }, idx, outs[k], 1)
    end
    s:synchronize()
    for k = 1, 64 do assert.are.same({ 2 * k + 7 }, outs[k]:totable()) end
  end)
end)
