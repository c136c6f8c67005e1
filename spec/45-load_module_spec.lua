-- cd.load_module: code compiled elsewhere (here: PTX and cubin from cd.compile for the device's arch),
-- loaded on a CUDA device. PTX keeps checked launches (parameters read from its .entry); a cubin has no
-- parameter list to check against and says so.
local helper = require "spec.helper"
local cd = require "cudadev"

local src = [[extern "C" __global__ void axpb(float a, const float *x, float *y, size_t n, float b) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + b;
}]]

describe("load_module", function()
  it("refuses what is neither PTX nor a cubin", function()
    helper.assert_error_matches(function() cd.load_module("hello", { device = "cpu" }) end,
      "load_module loads CUDA code; the target device is cpu")
  end)

  helper.gpu_it("loads PTX and launches with checked arguments", function()
    local dev = cd.device("cuda:0")
    local ptx = cd.compile(src, { arch = dev.arch, target = "ptx", device = dev }).ptx
    local m = cd.load_module(ptx, { device = dev })
    assert.are.same({ "axpb" }, m.kernels)
    local k = m.axpb
    assert.are.equal(5, k.num_params)
    local x = cd.array({ 1, 2, 3, 4 }, "float32", { device = dev })
    local y = cd.empty(4, "float32", { device = dev }):fill(0 / 0)
    k({ dim = 4 }, 2.0, x, y, 4, 0.5)
    assert.are.same({ 2.5, 4.5, 6.5, 8.5 }, y:totable())
    helper.assert_error_contains(function() k({ dim = 4 }, "two", x, y, 4, 0.5) end,
      "bad argument #1 to 'axpb'")
  end)

  helper.gpu_it("loads a cubin, whose kernels cannot be checked", function()
    local dev = cd.device("cuda:0")
    local cubin = cd.compile(src, { target = "cubin", device = dev }).cubin
    local m = cd.load_module(cubin, { device = dev })
    helper.assert_error_contains(function() return m.axpb end, "cannot read the parameter list of 'axpb'")
  end)
end)
