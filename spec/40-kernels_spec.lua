-- Kernels (API.md "Kernels", without the disk cache): compiling CUDA C, Modules and Kernels, launches
-- checked against the kernel's parameter list, launch configurations, compile errors, the in-memory cache,
-- attributes and occupancy. The same source strings run on every device: "cpu" (the host compiler) and
-- "cuda:0" when there is a GPU.
local helper = require "spec.helper"
local cd = require "cudadev"

local expect_error = helper.assert_error_matches

local SAXPY = [[
extern "C" __global__ void saxpy(float a, size_t n, const float *x, float *y)
{
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
]]

local AXPY = [[
template <typename T>
__global__ void axpy(T a, const T *x, T *y, int n)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
]]

-- each block reverses its own segment through dynamic shared memory
local REVERSE = [[
extern "C" __global__ void reverse_blocks(float *d)
{
  extern __shared__ float s[];
  unsigned t = threadIdx.x, base = blockIdx.x * blockDim.x;
  s[t] = d[base + t];
  __syncthreads();
  d[base + t] = s[blockDim.x - 1 - t];
}
]]

local FILL2D = [[
extern "C" __global__ void fill2d(int *out, int w, int h)
{
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < w && y < h) out[y * w + x] = y * 1000 + x;
}
]]

local MAYBE = [[
extern "C" __global__ void copy_or_mark(float *out, const float *in, int n)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in ? in[i] : -1.0f;
}
]]

local SCALED = [[
#include "scale.h"
extern "C" __global__ void scaled(int *x, int n)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * SCALE;
}
]]

local WITH_VALUE = [[
extern "C" __global__ void add_value(int *x, int n)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += VALUE;
}
]]

local BAD = [[
extern "C" __global__ void broken(float *x)
{
  x[0] = undefined_thing;
}
]]

local function range(n, f)
  local t = {}
  for i = 1, n do t[i] = f and f(i) or i end
  return t
end

-- wall-clock seconds (the host compiler runs in a child process, which os.clock does not count)
local function now()
  local p = assert(io.popen("date +%s.%N"))
  local t = tonumber(p:read("l"))
  p:close()
  return t
end

describe("compile options", function()
  it("reject unknown keys", function()
    expect_error(function() cd.compile(SAXPY, { nmae = "x.cu" }) end,
      "bad argument #2 to 'compile' (unknown option 'nmae' (expected name, options, headers, include_paths, "
        .. "name_expressions, device, arch, target, timeout, cpu_check))")
  end)

  it("check list options", function()
    expect_error(function() cd.compile(SAXPY, { options = "-O3" }) end,
      "bad option 'options' to 'compile' (table of strings expected, got string)")
    expect_error(function() cd.compile(SAXPY, { name_expressions = { "a", 2 } }) end,
      "bad option 'name_expressions' to 'compile' (item 2: string expected, got number)")
    expect_error(function() cd.compile(SAXPY, { headers = { "x.h" } }) end,
      "bad option 'headers' to 'compile' (expected {[\"name.h\"] = source text})")
    expect_error(function() cd.compile(SAXPY, { headers = "x.h" }) end,
      "bad option 'headers' to 'compile' (table expected, got string)")
  end)

  it("check arch and target", function()
    expect_error(function() cd.compile(SAXPY, { arch = "bogus" }) end,
      "bad option 'arch' to 'compile' (expected \"sm_XY\" or an integer such as 90, got bogus)")
    expect_error(function() cd.compile(SAXPY, { device = "cpu", arch = "sm_90" }) end,
      "bad option 'arch' to 'compile' (arch targets CUDA devices; leave it out to compile for cpu)")
    expect_error(function() cd.compile(SAXPY, { device = "cpu", target = "elf" }) end,
      "bad option 'target' to 'compile' (expected \"cubin\", \"ptx\" or both in a table)")
  end)

  it("reject a source with a NUL byte, and a source that is not a string", function()
    expect_error(function() cd.compile("__global__ void k() {}\0") end,
      "bad argument #1 to 'compile' (source contains a NUL byte)")
    expect_error(function() cd.compile({}) end, "bad argument #1 to 'compile' (string expected, got table)")
  end)
end)

describe("cd.type", function()
  it("names Module and Kernel", function()
    local m = cd.compile(SAXPY, { device = "cpu" })
    assert.are.equal("Module", cd.type(m))
    assert.are.equal("Kernel", cd.type(m:get("saxpy")))
  end)
end)

helper.each_device(function(dev)
  describe("on " .. dev, function()
    local function saxpy_module() return cd.compile(SAXPY, { device = dev }) end

    local function inputs(n)
      local xs, ys = range(n, function(i) return i - 1 end), range(n, function(i) return 1000 - i end)
      return cd.array(xs, { device = dev }), cd.array(ys, { device = dev }), xs, ys
    end

    local function expected(a, xs, ys)
      return range(#xs, function(i) return a * xs[i] + ys[i] end)
    end

    describe("Module", function()
      it("lists its kernels and gives them by name", function()
        local m = saxpy_module()
        assert.are.equal("Module", cd.type(m))
        assert.are.same({ "saxpy" }, m.kernels)
        local k = m:get("saxpy")
        assert.are.equal("Kernel", cd.type(k))
        assert.is_true(rawequal(k, m.saxpy))
        assert.is_true(rawequal(k, m["saxpy"]))
        assert.are.equal(cd.device(dev), m.device)
        assert.is_string(m.log)
      end)

      it("prints its device and kernels", function()
        local m = saxpy_module()
        if dev == "cpu" then
          assert.are.equal("Module(cpu: saxpy)", tostring(m))
        else
          assert.is_truthy(tostring(m):match("^Module%(" .. dev .. " sm_%d+ %a+: saxpy%)$"))
        end
      end)

      it("says which kernels it has when asked for another", function()
        local m = saxpy_module()
        expect_error(function() m:get("sxapy") end, "module has no kernel 'sxapy' (kernels: saxpy)")
        expect_error(function() return m.nope end, "module has no kernel 'nope' (kernels: saxpy)")
      end)

      it("holds PTX or cubin on a GPU and neither on cpu", function()
        local m = saxpy_module()
        if dev == "cpu" then
          assert.is_nil(m.ptx)
          assert.is_nil(m.cubin)
        else
          assert.is_true(m.ptx ~= nil or m.cubin ~= nil)
          if m.ptx then assert.is_truthy(m.ptx:find(".entry saxpy", 1, true)) end
        end
      end)
    end)

    describe("Kernel", function()
      it("knows its name and parameters", function()
        local k = saxpy_module():get("saxpy")
        assert.are.equal("saxpy", k.name)
        assert.are.equal(4, k.num_params)
        assert.are.same({ "float", "size_t", "const float *", "float *" }, k.params)
        assert.are.equal(cd.device(dev), k.device)
        assert.are.equal("Module", cd.type(k.module))
        assert.are.equal(("Kernel(saxpy(float a, size_t n, const float *x, float *y) on %s)"):format(dev),
          tostring(k))
        expect_error(function() return k.bogus end, "Kernel has no field or method 'bogus'")
      end)

      it("launches with dim and computes saxpy", function()
        local k = saxpy_module():get("saxpy")
        local n = 1000
        local x, y, xs, ys = inputs(n)
        k:launch({ dim = n }, 2.0, n, x, y)
        assert.are.same(expected(2, xs, ys), y:totable())
        assert.are.same(xs, x:totable())
      end)

      it("launches with grid and block, and when called", function()
        local k = saxpy_module():get("saxpy")
        local n = 4096 + 17
        local x, y, xs, ys = inputs(n)
        k({ grid = (n + 127) // 128, block = 128 }, 3, n, x, y)
        assert.are.same(expected(3, xs, ys), y:totable())
        k({ grid = { (n + 63) // 64, 1, 1 }, block = { 64, 1, 1 } }, -1, n, x, y)
        assert.are.same(range(n, function(i) return 2 * (xs[i]) + ys[i] end), y:totable())
      end)

      it("leaves elements past n alone", function()
        local k = saxpy_module():get("saxpy")
        local x, y, xs, ys = inputs(64)
        k({ dim = 64 }, 2, 10, x, y)
        local want = ys
        for i = 1, 10 do want[i] = 2 * xs[i] + ys[i] end
        assert.are.same(want, y:totable())
      end)

      it("launches 2-d grids from dim = {w, h}", function()
        local k = cd.compile(FILL2D, { device = dev }):get("fill2d")
        local w, h = 37, 21
        local out = cd.full(w * h, 99999, "int32", { device = dev })
        k({ dim = { w, h } }, out, w, h)
        local want = {}
        for y = 0, h - 1 do
          for x = 0, w - 1 do want[y * w + x + 1] = y * 1000 + x end
        end
        assert.are.same(want, out:totable())
        out:fill(99999)
        k({ grid = { 3, 3 }, block = { 16, 8 } }, out, w, h)
        assert.are.same(want, out:totable())
      end)

      it("uses dynamic shared memory per block", function()
        local k = cd.compile(REVERSE, { device = dev }):get("reverse_blocks")
        local d = cd.array(range(128, function(i) return i - 1 end), { device = dev })
        k({ grid = 4, block = 32, shared = 32 * 4 }, d)
        local want = {}
        for b = 0, 3 do
          for t = 0, 31 do want[b * 32 + t + 1] = b * 32 + (31 - t) end
        end
        assert.are.same(want, d:totable())
      end)

      it("keeps its module alive", function()
        local k = cd.compile(SAXPY, { device = dev }):get("saxpy")
        collectgarbage()
        collectgarbage()
        local x, y, xs, ys = inputs(100)
        k({ dim = 100 }, 4, 100, x, y)
        assert.are.same(expected(4, xs, ys), y:totable())
      end)

      it("takes nil for a pointer parameter (a null pointer)", function()
        local k = cd.compile(MAYBE, { device = dev }):get("copy_or_mark")
        local out, src = cd.zeros(8, { device = dev }), cd.array(range(8), { device = dev })
        k({ dim = 8 }, out, nil, 8)
        assert.are.same(range(8, function() return -1 end), out:totable())
        k({ dim = 8 }, out, src, 8)
        assert.are.same(range(8), out:totable())
      end)
    end)

    describe("compiling", function()
      it("instantiates templates named by name_expressions", function()
        local m = cd.compile(AXPY, { device = dev, name_expressions = { "axpy<float>", "axpy<double>" } })
        assert.are.same({ "axpy<float>", "axpy<double>" }, m.kernels)
        local kf, kd = m:get("axpy<float>"), m["axpy<double>"]
        assert.are.equal("axpy<float>", kf.name)
        assert.are.same({ "float", "const float *", "float *", "int" }, kf.params)
        assert.are.same({ "double", "const double *", "double *", "int" }, kd.params)
        local xf, yf = cd.array({ 1, 2, 3 }, "f32", { device = dev }), cd.array({ 10, 20, 30 }, "f32", { device = dev })
        kf({ dim = 3 }, 2, xf, yf, 3)
        assert.are.same({ 12, 24, 36 }, yf:totable())
        local xd, yd = cd.array({ 1 / 3, 1 }, "f64", { device = dev }), cd.array({ 0, 0 }, "f64", { device = dev })
        kd({ dim = 2 }, 3, xd, yd, 2)
        assert.are.same({ 3 * (1 / 3), 3 }, yd:totable())
        expect_error(function() kf({ dim = 3 }, 2, xd, yd, 3) end,
          "bad argument #2 to 'axpy<float>' ('x': expected const float *, got an Array of float64)")
      end)

      it("says how to name a template kernel asked for without arguments", function()
        local m = cd.compile(AXPY, { device = dev, name_expressions = { "axpy<float>" } })
        expect_error(function() m:get("axpy") end,
          "kernel 'axpy' is a template (line 2): compile it with name_expressions = {\"axpy<float>\"}")
      end)

      it("provides headers", function()
        local m = cd.compile(SCALED, { device = dev, headers = { ["scale.h"] = "#define SCALE 7\n" } })
        local x = cd.array({ 1, 2, 3 }, "int32", { device = dev })
        m.scaled({ dim = 3 }, x, 3)
        assert.are.same({ 7, 14, 21 }, x:totable())
      end)

      it("passes options to the compiler", function()
        local x = cd.array({ 1, 2, 3 }, "int32", { device = dev })
        cd.compile(WITH_VALUE, { device = dev, options = { "-DVALUE=3" } }).add_value({ dim = 3 }, x, 3)
        assert.are.same({ 4, 5, 6 }, x:totable())
        cd.compile(WITH_VALUE, { device = dev, options = { "-DVALUE=10" } }).add_value({ dim = 3 }, x, 3)
        assert.are.same({ 14, 15, 16 }, x:totable())
      end)

      it("raises a cudadev.Error with the log and options on a compile error", function()
        local ok, err = pcall(cd.compile, BAD, { device = dev, name = "broken.cu", options = { "-DVALUE=3" } })
        assert.is_false(ok)
        assert.are.equal("Error", cd.type(err))
        assert.are.equal("table", type(err))
        assert.is_string(err.api)
        assert.are_not.equal("", err.api)
        assert.is_string(err.name)
        assert.is_string(err.message)
        assert.are_not.equal("", err.message)
        assert.are.equal("integer", math.type(err.code))
        assert.is_false(err.sticky)
        assert.is_string(err.where)
        assert.is_truthy(err.log:find("undefined_thing", 1, true))
        assert.is_truthy(err.log:find("broken.cu", 1, true))
        assert.are.same({ "-DVALUE=3" }, err.options)
        if dev ~= "cpu" then
          assert.are.equal("nvrtcCompileProgram", err.api)
          assert.are.equal("NVRTC_ERROR_COMPILATION", err.name)
        end
        local head = (err.where ~= "" and err.where .. ": " or "") .. err.api .. ": "
          .. (err.name ~= "" and err.name .. ": " or "") .. err.message
        assert.are.equal(head .. "\n" .. err.log, tostring(err))
      end)

      it("records where the failing compile was called", function()
        local line
        local ok, err = pcall(function()
          line = debug.getinfo(1, "l").currentline + 1
          cd.compile(BAD, { device = dev })
        end)
        assert.is_false(ok)
        assert.are.equal(debug.getinfo(1, "S").short_src .. ":" .. line, err.where)
      end)

      it("does not cache a failed compile", function()
        local before = cd.kernel_cache_stats().memory_entries
        pcall(cd.compile, BAD, { device = dev })
        pcall(cd.compile, BAD, { device = dev })
        assert.are.equal(before, cd.kernel_cache_stats().memory_entries)
      end)

      it("a repeat compile hits the in-memory cache and is fast", function()
        local src = SAXPY .. ("// cache test %s %d %d\n"):format(dev, os.time(), math.random(1 << 30))
        local s0 = cd.kernel_cache_stats()
        local t0 = now()
        local m1 = cd.compile(src, { device = dev })
        local t1 = now()
        local s1 = cd.kernel_cache_stats()
        local m2 = cd.compile(src, { device = dev })
        local t2 = now()
        local s2 = cd.kernel_cache_stats()
        assert.are.equal(s0.memory_misses + 1, s1.memory_misses)
        assert.are.equal(s0.memory_hits, s1.memory_hits)
        assert.are.equal(s0.memory_entries + 1, s1.memory_entries)
        assert.are.equal(s1.memory_hits + 1, s2.memory_hits)
        assert.are.equal(s1.memory_misses, s2.memory_misses)
        assert.are.equal(s1.memory_entries, s2.memory_entries)
        assert.is_true(t2 - t1 < (t1 - t0) / 4, ("repeat compile took %.4f s, first %.4f s"):format(t2 - t1, t1 - t0))
        local x, y = cd.array({ 1, 2 }, { device = dev }), cd.zeros(2, { device = dev })
        m2.saxpy({ dim = 2 }, 1, 2, x, y)
        m1.saxpy({ dim = 2 }, 1, 2, x, y)
        assert.are.same({ 2, 4 }, y:totable())
      end)

      it("a different option is a different cache entry", function()
        local src = WITH_VALUE .. ("// cache key %s %d\n"):format(dev, math.random(1 << 30))
        local s0 = cd.kernel_cache_stats()
        cd.compile(src, { device = dev, options = { "-DVALUE=1" } })
        cd.compile(src, { device = dev, options = { "-DVALUE=2" } })
        local s1 = cd.kernel_cache_stats()
        assert.are.equal(s0.memory_misses + 2, s1.memory_misses)
        assert.are.equal(s0.memory_hits, s1.memory_hits)
      end)
    end)

    describe("argument checking", function()
      local k, x, y
      before_each(function()
        k = saxpy_module():get("saxpy")
        x, y = inputs(4)
      end)
      after_each(function() k, x, y = nil, nil, nil end)   -- the suite checks that no object outlives its file

      it("counts the arguments", function()
        expect_error(function() k({ dim = 4 }, 2.0) end, "wrong number of arguments to 'saxpy' (expected 4, got 1)")
        expect_error(function() k({ dim = 4 }) end, "wrong number of arguments to 'saxpy' (expected 4, got 0)")
        expect_error(function() k:launch({ dim = 4 }, 2, 4, x, y, 5) end,
          "wrong number of arguments to 'saxpy' (expected 4, got 5)")
      end)

      it("refuses a negative size_t", function()
        expect_error(function() k({ dim = 4 }, 2.0, -1, x, y) end,
          "bad argument #2 to 'saxpy' ('n': expected size_t, got -1)")
      end)

      it("refuses a fractional number for an integer", function()
        expect_error(function() k({ dim = 4 }, 2.0, 1.5, x, y) end,
          "bad argument #2 to 'saxpy' ('n': expected size_t, got 1.5)")
      end)

      it("refuses an integer out of the parameter's range", function()
        local m = cd.compile(AXPY, { device = dev, name_expressions = { "axpy<float>" } })
        local kf = m:get("axpy<float>")
        expect_error(function() kf({ dim = 4 }, 1, x, y, 2147483648) end,
          "bad argument #4 to 'axpy<float>' ('n': expected int, got 2147483648)")
        expect_error(function() kf({ dim = 4 }, 1, x, y, -2147483649) end,
          "bad argument #4 to 'axpy<float>' ('n': expected int, got -2147483649)")
      end)

      it("refuses a string or a boolean for a float", function()
        expect_error(function() k({ dim = 4 }, "2", 4, x, y) end,
          "bad argument #1 to 'saxpy' ('a': expected float, got string)")
        expect_error(function() k({ dim = 4 }, true, 4, x, y) end,
          "bad argument #1 to 'saxpy' ('a': expected float, got boolean)")
      end)

      it("refuses a freed Array", function()
        x:free()
        expect_error(function() k({ dim = 4 }, 2, 4, x, y) end,
          "bad argument #3 to 'saxpy' ('x': expected const float *, got a freed Array)")
      end)

      it("refuses an Array of another element size, and non-pointers", function()
        expect_error(function() k({ dim = 4 }, 2, 4, x, cd.zeros(4, "f64", { device = dev })) end,
          "bad argument #4 to 'saxpy' ('y': expected float *, got an Array of float64)")
        expect_error(function() k({ dim = 4 }, 2, 4, {}, y) end,
          "bad argument #3 to 'saxpy' ('x': expected const float *, got table)")
        expect_error(function() k({ dim = 4 }, 2, 4, x, "y") end,
          "bad argument #4 to 'saxpy' ('y': expected float *, got string)")
      end)

      it("checks everything before launching anything", function()
        local before = y:totable()
        expect_error(function() k({ dim = 4 }, 2, 4, x, cd.zeros(4, "f64", { device = dev })) end,
          "bad argument #4 to 'saxpy' ('y': expected float *, got an Array of float64)")
        assert.are.same(before, y:totable())
      end)
    end)

    describe("launch configuration", function()
      local k, x, y
      before_each(function()
        k = saxpy_module():get("saxpy")
        x, y = inputs(4)
      end)
      after_each(function() k, x, y = nil, nil, nil end)   -- the suite checks that no object outlives its file

      local function cfg_error(cfg, text)
        expect_error(function() k(cfg, 2, 4, x, y) end, "bad launch configuration for 'saxpy' (" .. text .. ")")
      end

      it("needs a table", function()
        expect_error(function() k(4, 2, 4, x, y) end,
          "bad argument #1 to 'saxpy' (launch configuration expected (a table or a LaunchConfig), got number)")
      end)

      it("needs dim, or grid and block, not both", function()
        cfg_error({}, "missing 'dim', or 'grid' and 'block'")
        cfg_error({ grid = 1 }, "missing 'dim', or 'grid' and 'block'")
        cfg_error({ block = 32 }, "missing 'dim', or 'grid' and 'block'")
        cfg_error({ dim = 4, grid = 1, block = 4 }, "give either 'dim' or 'grid' and 'block'")
      end)

      it("rejects unknown keys", function()
        cfg_error({ dim = 4, blok = 256 }, "unknown key 'blok' (expected grid, block, dim, shared, stream, device, cooperative, timeout)")
      end)

      it("rejects a zero or fractional grid", function()
        cfg_error({ grid = 0, block = 32 }, "'grid' must be a positive integer or {x, y, z}, got 0")
        cfg_error({ grid = 1.5, block = 32 }, "'grid' must be a positive integer or {x, y, z}, got 1.5")
        cfg_error({ grid = { 1, 0 }, block = 32 }, "'grid' component 2 must be an integer from 1 to 2147483647")
        cfg_error({ grid = {}, block = 32 }, "'grid' must have 1 to 3 components")
        cfg_error({ dim = 0 }, "'dim' must be a positive integer or {x, y, z}, got 0")
      end)

      it("rejects a block larger than the device allows", function()
        cfg_error({ grid = 1, block = { 32, 32, 2 } }, "a block of 2048 threads exceeds the device limit of 1024")
        cfg_error({ grid = 1, block = { 1, 1, 128 } }, "block dimension z of 128 exceeds the device limit of 64")
        cfg_error({ grid = 1, block = 2048 }, "a block of 2048 threads exceeds the device limit of 1024")
      end)

      it("rejects a grid larger than the device allows", function()
        cfg_error({ grid = { 1, 65536 }, block = 1 }, "grid dimension y of 65536 exceeds the device limit of 65535")
      end)

      it("accepts a stream of the kernel's device", function()
        local s = cd.stream(dev)
        k({ dim = 4, stream = s }, 1, 4, x, y)
        s:synchronize()
        assert.are.same({ 999, 999, 999, 999 }, y:totable())
      end)
    end)

    describe("LaunchConfig", function()
      local k, x, y, s
      before_each(function()
        k = saxpy_module():get("saxpy")
        x, y = inputs(4)
        s = cd.stream(dev)
      end)
      after_each(function() k, x, y, s = nil, nil, nil, nil end)

      it("is made once and launches as its table would, for any kernel", function()
        local c = cd.launch_config { dim = 4, stream = s }
        assert.are.equal("LaunchConfig", cd.type(c))
        k(c, 1, 4, x, y)
        k:launch(c, 1, 4, x, y)
        s:synchronize()
        assert.are.same({ 999, 1000, 1001, 1002 }, y:totable())
        local g = cd.launch_config { grid = { 2, 1 }, block = 2 }
        local k2 = saxpy_module():get("saxpy")
        for _ = 1, 3 do k2(g, 1, 4, x, y) end   -- the same config for a second kernel, and again
        cd.synchronize_device(dev)
        assert.are.same({ 999, 1003, 1007, 1011 }, y:totable())
      end)

      it("shows its fields and prints them", function()
        local c = cd.launch_config { grid = { 4, 2 }, block = 256, shared = 1024, device = dev }
        assert.are.same({ 4, 2 }, c.grid)
        assert.are.equal(256, c.block)
        assert.is_nil(c.dim)
        assert.are.equal(1024, c.shared)
        assert.are.equal(cd.device(dev), c.device)
        assert.is_nil(c.stream)
        assert.are.equal(("LaunchConfig(grid={4, 2}, block=256, shared=1024, device=%s)"):format(dev), tostring(c))
        local d = cd.launch_config { dim = 100, stream = s }
        assert.are.equal(s, d.stream)
        assert.are.equal("LaunchConfig(dim=100, stream=" .. tostring(s) .. ")", tostring(d))
        expect_error(function() return c.blok end, "LaunchConfig has no field 'blok'")
      end)

      it("cannot be changed", function()
        local c = cd.launch_config { dim = 4 }
        expect_error(function() c.dim = 8 end,
          "a LaunchConfig cannot be changed; make another with cd.launch_config{...}")
        assert.are.equal(4, c.dim)
      end)

      it("refuses what a launch would refuse, naming launch_config", function()
        local function made_error(cfg, text)
          expect_error(function() cd.launch_config(cfg) end, "bad argument #1 to 'launch_config' (" .. text .. ")")
        end
        made_error({ grid = 1 }, "missing 'dim', or 'grid' and 'block'")
        made_error({ dim = 4, blok = 256 }, "unknown key 'blok' (expected grid, block, dim, shared, stream, device, cooperative, timeout)")
        made_error({ grid = 0, block = 32 }, "'grid' must be a positive integer or {x, y, z}, got 0")
        made_error({ dim = 4, shared = -1 }, "'shared' must be 0 to 4294967295 bytes")
        made_error({ dim = 4, stream = 7 }, "'stream': cudadev.Stream expected, got number")
        expect_error(function() cd.launch_config(4) end,
          "bad argument #1 to 'launch_config' (table expected, got number)")
      end)

      it("is checked against each kernel's device when it launches", function()
        local cfg_error = function(c, text)
          expect_error(function() k(c, 2, 4, x, y) end, "bad launch configuration for 'saxpy' (" .. text .. ")")
        end
        cfg_error(cd.launch_config { grid = 1, block = 2048 }, "a block of 2048 threads exceeds the device limit of 1024")
        -- made without a device, the config learns the limit on dynamic shared memory from the kernel's
        helper.assert_error_contains(function() k(cd.launch_config { dim = 4, shared = 2 ^ 31 }, 2, 4, x, y) end,
          "bad launch configuration for 'saxpy' ('shared' must be 0 to ")
        if dev == "cpu" then
          cfg_error(cd.launch_config { dim = 4, shared = 2 ^ 31 }, "'shared' must be 0 to 1048576 bytes")
        end
        local other = "cpu"
        if dev == "cpu" then other = helper.cuda_available and "cuda:0" or nil end
        if other then
          cfg_error(cd.launch_config { dim = 4, device = other },
            ("the kernel was compiled for %s, not %s; compile it with device = \"%s\""):format(dev, other, other))
        end
        local gone = cd.stream(dev)
        local c = cd.launch_config { dim = 4, stream = gone }
        k(c, 1, 4, x, y)
        gone:destroy()
        cfg_error(c, "'stream': attempt to use a destroyed stream")
      end)
    end)

    describe("attributes and occupancy", function()
      local k
      before_each(function() k = saxpy_module():get("saxpy") end)
      after_each(function() k = nil end)

      it("attributes are integers with a thread limit", function()
        local a = k.attributes
        for _, f in ipairs({ "num_regs", "shared_size_bytes", "const_size_bytes", "local_size_bytes",
                             "max_threads_per_block" }) do
          assert.are.equal("integer", math.type(a[f]), f)
          assert.is_true(a[f] >= 0, f)
        end
        assert.is_true(a.max_threads_per_block >= 32 and a.max_threads_per_block <= 1024)
      end)

      it("occupancy(256) gives blocks per SM, a fraction and the limit", function()
        local o = k:occupancy(256)
        assert.are.equal("integer", math.type(o.blocks_per_sm))
        assert.is_true(o.blocks_per_sm >= 1)
        assert.are.equal("number", type(o.occupancy))
        assert.is_true(o.occupancy > 0 and o.occupancy <= 1)
        if dev == "cpu" then
          assert.are.equal("cpu", o.limited_by)
        else
          assert.is_truthy(({ regs = true, smem = true, warps = true })[o.limited_by])
        end
        assert.is_true(k:occupancy(256, 1024).blocks_per_sm <= o.blocks_per_sm)
      end)

      it("occupancy checks the block size", function()
        expect_error(function() k:occupancy(0) end, "bad argument #1 to 'occupancy' (block must be 1 to 1024 threads)")
        expect_error(function() k:occupancy(2048) end, "bad argument #1 to 'occupancy' (block must be 1 to 1024 threads)")
        expect_error(function() k:occupancy(-1) end, "bad argument #1 to 'occupancy' (block must not be negative, got -1)")
      end)

      it("suggest_block_size gives a whole number of warps", function()
        local b = k:suggest_block_size()
        assert.are.equal("integer", math.type(b))
        assert.is_true(b >= 32 and b <= 1024 and b % 32 == 0)
        local bs = k:suggest_block_size(4096)
        assert.is_true(bs >= 32 and bs <= 1024 and bs % 32 == 0)
      end)
    end)
  end)
end)

describe("kernels across devices", function()
  helper.gpu_it("refuses a cpu Array for a GPU kernel, and a launch on another device", function()
    local k = cd.compile(SAXPY, { device = "cuda:0" }):get("saxpy")
    local x, y = cd.zeros(4, { device = "cpu" }), cd.zeros(4, { device = "cuda:0" })
    expect_error(function() k({ dim = 4 }, 1, 4, x, y) end,
      "bad argument #3 to 'saxpy' ('x': array is on cpu but the kernel runs on cuda:0; move it with a:to(\"cuda:0\"))")
    local kc = cd.compile(SAXPY, { device = "cpu" }):get("saxpy")
    expect_error(function() kc({ dim = 4, device = "cuda:0" }, 1, 4, x, x) end,
      "bad launch configuration for 'saxpy' (the kernel was compiled for cpu, not cuda:0; compile it with device = \"cuda:0\")")
    expect_error(function() kc({ dim = 4, stream = cd.stream("cuda:0") }, 1, 4, x, x) end,
      "stream is on cuda:0 but the work is on cpu")
  end)

  helper.gpu_it("compiles for an arch with no device, which cannot be launched", function()
    -- with cpu as the default device and no device named, arch means "compile only"
    local m = cd.with_device("cpu", cd.compile, SAXPY, { arch = "sm_90", target = "ptx" })
    assert.is_nil(m.device)
    assert.is_truthy(m.ptx:find(".entry saxpy", 1, true))
    expect_error(function() m:get("saxpy") end,
      "module was compiled for sm_90 with no device to run on (compile with device = \"cuda:N\")")
  end)
end)
