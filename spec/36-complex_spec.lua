-- The complex dtypes, issue 32 (doc/fft.md, NOTE [complex dtypes] in lua/cudadev/ops.lua): complex64 and complex128
-- created from {re, im} pairs and numbers, read back as pairs, converted, saved, shared by DLPack; the operators,
-- abs/real/imag/conj/angle, eq/ne, sum and mean, NumPy's promotion; every other operation refuses them by name.
-- Each case runs on the cpu device (`it`) and on cuda:0 (`gpu_it`, pending without a GPU). The expected values are
-- NumPy 2's (python3 -c "import numpy as np; ...", checked when these were written).
local helper = require "spec.helper"
local cd = require "cudadev"

local expect_error = helper.assert_error_matches

-- a pair {re, im} within tol of the expected one
local function near(got, re, im, tol)
  tol = tol or 1e-6
  assert(type(got) == "table", "a {re, im} pair expected, got " .. type(got))
  assert(math.abs(got[1] - re) <= tol and math.abs(got[2] - im) <= tol,
    ("expected {%g, %g}, got {%g, %g}"):format(re, im, got[1], got[2]))
end

-- every element of a complex Array, as pairs
local function pairs_of(a) return a:totable() end

local function cases(dev)
  local on = dev == "cpu" and it or helper.gpu_it
  local opts = { device = dev }

  describe("on " .. dev, function()
    on("cd.array takes {re, im} pairs and numbers; a[i] and totable give pairs", function()
      local a = cd.array({ { 1, 2 }, { 3, -4 }, 5 }, "complex64", opts)
      assert.same({ "complex64", 3, 8, 24 }, { a.dtype, a.size, a.itemsize, a.nbytes })
      assert.same({ 1, 2 }, a[1])
      assert.same({ 5, 0 }, a[3])
      assert.same({ { 1, 2 }, { 3, -4 }, { 5, 0 } }, pairs_of(a))
      local m = cd.array({ { { 1, 2 }, { 3, 4 } }, { { 5, 6 }, { 7, 8 } } }, "c128", opts)
      assert.same({ 2, 2 }, m.shape)
      assert.same({ 7, 8 }, m:totable()[2][2])
      a[2] = { 0.5, 0.25 }
      assert.same({ 0.5, 0.25 }, a[2])
      a[1] = 9
      assert.same({ 9, 0 }, a[1])
      assert.equal("Array(complex64[3] on " .. dev .. ": {9+0j, 0.5+0.25j, 5+0j})", tostring(a))
    end)

    on("zeros, ones, full and the like-constructors make complex arrays, complex128's 16-byte fill included", function()
      assert.same({ { 0, 0 }, { 0, 0 } }, pairs_of(cd.zeros(2, "complex128", opts)))
      assert.same({ { 1, 0 }, { 1, 0 } }, pairs_of(cd.ones(2, "complex64", opts)))
      -- 7 elements: the doubling copies of the 16-byte fill cover 1, 2, 4 and the last 3
      local f = cd.full(7, { 1.5, -2 }, "complex128", opts)
      for i = 1, 7 do assert.same({ 1.5, -2 }, f[i]) end
      assert.same({ 3, 0 }, cd.full_like(f, 3)[7])
      assert.same({ 0, 0 }, cd.zeros_like(f)[4])
      local v = cd.zeros({ 2, 3 }, "complex128", opts)
      v:fill({ 2, 3 })
      assert.same({ 2, 3 }, v:totable()[2][3])
    end)

    on("astype converts to and from the real dtypes as NumPy does", function()
      local a = cd.array({ { 1.5, 2 }, { -3, 4 }, { 0, 0 }, { 0, 1 } }, "complex64", opts)
      assert.same({ 1.5, -3, 0, 0 }, helper.values(a:astype("float64")))   -- the real part
      assert.same({ 1, -3, 0, 0 }, helper.values(a:astype("int32")))
      assert.same({ true, true, false, true }, helper.values(a:astype("bool")))   -- either part nonzero
      assert.same({ { 1.5, 2 }, { -3, 4 }, { 0, 0 }, { 0, 1 } }, pairs_of(a:astype("complex128")))
      assert.same({ { 1, 0 }, { -2, 0 } }, pairs_of(cd.array({ 1, -2 }, "int64", opts):astype("complex64")))
      assert.same({ { 1, 0 }, { 0, 0 } }, pairs_of(cd.array({ true, false }, "bool", opts):astype("complex128")))
      assert.same({ { 0.5, 0 } }, pairs_of(cd.array({ 0.5 }, "float16", opts):astype("complex64")))
    end)

    on("+ - * / and unary minus, with arrays and Lua numbers", function()
      local a = cd.array({ { 1, 2 }, { 3, -4 } }, "complex64", opts)
      local b = cd.array({ { 2, -1 }, { 0.5, 0.5 } }, "complex64", opts)
      assert.same({ { 3, 1 }, { 3.5, -3.5 } }, pairs_of(a + b))
      assert.same({ { -1, 3 }, { 2.5, -4.5 } }, pairs_of(a - b))
      assert.same({ { 4, 3 }, { 3.5, -0.5 } }, pairs_of(a * b))
      local q = a / b   -- (1+2j)/(2-1j) = 1j; (3-4j)/(0.5+0.5j) = -1-7j
      near(q[1], 0, 1)
      near(q[2], -1, -7)
      assert.same({ { -1, -2 }, { -3, 4 } }, pairs_of(-a))
      assert.same({ { 2.5, 2 }, { 4.5, -4 } }, pairs_of(a + 1.5))
      assert.same({ { 2, 4 }, { 6, -8 } }, pairs_of(2 * a))
      assert.same({ { -1, 2 }, { 1, -4 } }, pairs_of(a - cd.array({ 2, 2 }, "float32", opts)))
      local z = cd.array({ { 1, 1 } }, "complex128", opts) / cd.array({ 0 }, "float64", opts)   -- NumPy: inf+infj
      assert.same({ math.huge, math.huge }, z[1])
    end)

    on("promotes as NumPy 2 does", function()
      local c64 = cd.zeros(1, "complex64", opts)
      for other, want in pairs({ float16 = "complex64", float32 = "complex64", float64 = "complex128",
                                 int8 = "complex64", uint8 = "complex64", int16 = "complex64", uint16 = "complex64",
                                 int32 = "complex128", int64 = "complex128", uint32 = "complex128",
                                 uint64 = "complex128", bool = "complex64", complex64 = "complex64",
                                 complex128 = "complex128" }) do
        local x = cd.zeros(1, other, opts)
        assert.equal(want, (x + c64).dtype, other .. " + complex64")
        assert.equal(want, (c64 * x).dtype, "complex64 * " .. other)
      end
      assert.equal("complex128", (cd.zeros(1, "complex128", opts) + cd.zeros(1, "float32", opts)).dtype)
      assert.equal("complex64", (c64 + 1).dtype)     -- a Lua number is weak (NEP 50)
      assert.equal("complex64", (c64 / 2.5).dtype)
      assert.equal("complex64", (cd.zeros(1, "float32", opts) / c64).dtype)
    end)

    on("abs, real, imag, conj and angle; of real arrays too", function()
      local a = cd.array({ { 3, 4 }, { -1, 0 }, { 0, -2 } }, "complex128", opts)
      assert.same({ 5, 1, 2 }, helper.values(cd.abs(a)))
      assert.equal("float64", cd.abs(a).dtype)
      assert.equal("float32", cd.abs(a:astype("complex64")).dtype)
      assert.same({ 3, -1, 0 }, helper.values(cd.real(a)))
      assert.same({ 4, 0, -2 }, helper.values(a:imag()))
      assert.same({ { 3, -4 }, { -1, -0.0 }, { 0, 2 } }, pairs_of(cd.conj(a)))
      assert.same(pairs_of(cd.conj(a)), pairs_of(a:conjugate()))
      local ang = helper.values(cd.angle(a))
      assert.near(math.atan(4, 3), ang[1], 1e-15)
      assert.near(math.pi, ang[2], 1e-15)
      assert.near(-math.pi / 2, ang[3], 1e-15)
      local r = cd.array({ -2, 3 }, "int32", opts)
      assert.same({ "int32", "int32", "int32", "float64" }, { cd.real(r).dtype, cd.imag(r).dtype, cd.conj(r).dtype,
                                                             cd.angle(r).dtype })
      assert.same({ 0, 0 }, helper.values(cd.imag(r)))
      assert.same({ -2, 3 }, helper.values(cd.conj(r)))
      assert.near(math.pi, cd.angle(r)[1], 1e-15)
      assert.equal("float16", cd.angle(cd.array({ 1 }, "int8", opts)).dtype)
    end)

    on("eq and ne compare both parts; sum and mean add them", function()
      local a = cd.array({ { 1, 2 }, { 3, 4 }, { 5, 6 } }, "complex64", opts)
      local b = cd.array({ { 1, 2 }, { 3, -4 }, 5 }, "complex64", opts)
      assert.same({ true, false, false }, helper.values(a:eq(b)))
      assert.same({ false, true, true }, helper.values(a:ne(b)))
      assert.same({ false, false, false }, helper.values(a:eq(5)))
      assert.same({ 9, 12 }, a:sum())
      assert.same({ 3, 4 }, a:mean())
      local m = cd.array({ { { 1, 1 }, { 2, 2 } }, { { 3, 3 }, { 4, -4 } } }, "complex128", opts)
      assert.same({ { 4, 4 }, { 6, -2 } }, m:sum(1):totable())
      assert.same({ { 1.5, 1.5 }, { 3.5, -0.5 } }, m:mean(2):totable())
      assert.same({ 0, 0 }, cd.zeros(0, "complex64", opts):sum())
    end)

    on("every other operation refuses the complex dtypes by name", function()
      local a = cd.ones(2, "complex64", opts)
      local list = "the complex dtypes have + - * /, unary -, eq, ne, abs, real, imag, conj, angle, sum, mean and cd.fft"
      expect_error(function() return cd.exp(a) end, "exp: complex64 arrays are not supported (" .. list .. ")")
      expect_error(function() return a:max() end, "max: complex64 arrays are not supported (" .. list .. ")")
      expect_error(function() return a:lt(a) end, "lt: complex64 arrays are not supported (" .. list .. ")")
      expect_error(function() return a % 2 end, "operator %: complex64 arrays are not supported (" .. list .. ")")
      expect_error(function() return cd.ones(2, "float64", opts) // a end,
        "operator //: complex128 arrays are not supported (" .. list .. ")")
      expect_error(function() a[1] = "x" end,
        "bad argument #3 to 'newindex' (number or {re, im} pair expected, got string)")
    end)
  end)
end

describe("complex dtypes", function()
  cases("cpu")
  cases("cuda:0")

  it(".npy files hold them as NumPy's <c8 and <c16, and load back", function()
    local path = os.tmpname()
    for _, d in ipairs({ "complex64", "complex128" }) do
      local a = cd.array({ { 1, 2 }, { -3, 0.5 } }, d)
      cd.save(path, a)
      local bytes = helper.read_file(path)
      assert.truthy(bytes:find(d == "complex64" and "'descr': '<c8'" or "'descr': '<c16'", 1, true))
      local fmt = d == "complex64" and "<ffff" or "<dddd"
      local v = { string.unpack(fmt, bytes, #bytes - (d == "complex64" and 16 or 32) + 1) }
      assert.same({ 1, 2, -3, 0.5 }, { v[1], v[2], v[3], v[4] })
      local b = cd.load(path)
      assert.equal(d, b.dtype)
      assert.same(a:totable(), b:totable())
    end
    os.remove(path)
  end)

  it("DLPack shares them with type code 5 (kDLComplex)", function()
    local a = cd.array({ { 1, 2 }, { 3, 4 } }, "complex128")
    local b = cd.from_dlpack(a:__dlpack())
    assert.equal("complex128", b.dtype)
    b[1] = { 7, 8 }
    assert.same({ 7, 8 }, a[1])
    assert.equal("complex64", cd.from_dlpack(a:astype("complex64"):__dlpack()).dtype)
  end)

  -- the GPU's compiler takes the struct and its operators (NOTE [complex dtypes]): checked without a GPU, from the
  -- text ops.lua gives its kernels, with every use the generated kernels make of it (a __shared__ array of it too)
  helper.nvrtc_it("the complex kernels' prelude compiles with NVRTC for sm_90, without a warning", function()
    local prelude = helper.read_file("lua/cudadev/ops.lua"):match("local COMPLEX = %[%[\n(.-)%]%]")
    assert(prelude, "no COMPLEX prelude in lua/cudadev/ops.lua")
    local m = cd.compile(prelude .. [[
#include <cuda_fp16.h>
extern "C" __global__ void uses(const complex64 *a, const complex128 *b, complex128 *z, float *f, bool *q, __half *h,
                                long long n) {
  __shared__ complex64 s[256];
  long long i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  complex64 x = a[i];
  complex128 y = b[i];
  s[threadIdx.x] = x * x + (complex64)1.5f - x / x;
  __syncthreads();
  z[i] = (complex128)x / y + y * (complex128)s[threadIdx.x] - (complex128)(long long)3 + (complex128)true;
  f[i] = (float)x + _cdv_abs(x) + _cdv_angle(x) + (float)y;
  q[i] = (bool)x && x == x && y != (complex128)x;
  h[i] = (__half)x;
  z[i] = _cdv_conj(-z[i]) + (complex128)h[i] + (complex128)(complex64)0 + (complex128)(s[0] / (complex64)n);
}
]], { arch = "sm_90" })
    assert.truthy(m.ptx or m.cubin)
    assert.is_nil((m.log or ""):find("warning"), m.log)
  end)

  it("a table of two numbers inside the outer one is an element; the outer one is a row", function()
    assert.same({ 2 }, cd.array({ 1, 2 }, "complex64").shape)
    assert.same({ 1 }, cd.array({ { 1, 2 } }, "complex64").shape)
    assert.same({ 1, 3 }, cd.array({ { 1, 2, 3 } }, "complex64").shape)
    expect_error(function() return cd.array({ { 1, 2 }, { 1, 2, 3 } }, "complex64") end,
      "bad argument #1 to 'array' (ragged nested table (row 2 differs from row 1))")
  end)
end)
