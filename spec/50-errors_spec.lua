-- The error conventions (API.md "Conventions"): cd.type, cudadev.Error values and how they print,
-- misuse raising Lua errors in Lua's own tone, probes returning false and a reason.
local helper = require "spec.helper"
local cd = require "cudadev"

local expect_error = helper.assert_error_matches

local BAD = [[
extern "C" __global__ void broken(float *x)
{
  x[0] = undefined_thing;
}
]]

describe("cd.type", function()
  it("names every cudadev type", function()
    assert.are.equal("Device", cd.type(cd.device("cpu")))
    assert.are.equal("Stream", cd.type(cd.stream("cpu")))
    assert.are.equal("Event", cd.type(cd.event("cpu")))
    assert.are.equal("Array", cd.type(cd.zeros(1)))
    assert.are.equal("Error", cd.type(setmetatable({}, cd.Error)))
  end)

  it("names a freed Array, a destroyed Stream and Event still by their type", function()
    local a, s, e = cd.zeros(1), cd.stream("cpu"), cd.event("cpu")
    a:free()
    s:destroy()
    e:destroy()
    assert.are.equal("Array", cd.type(a))
    assert.are.equal("Stream", cd.type(s))
    assert.are.equal("Event", cd.type(e))
  end)

  it("is nil for everything else", function()
    for _, v in ipairs({ 1, 1.5, "Array", true, {}, print, io.stdout, coroutine.create(print),
                         setmetatable({}, { __name = "cudadev.Array" }) }) do
      assert.is_nil(cd.type(v), tostring(v))
    end
    assert.is_nil(cd.type(nil))
    assert.is_nil(cd.type(cd))
  end)

  it("needs an argument", function()
    expect_error(function() cd.type() end, "bad argument #1 to 'type' (value expected)")
  end)

  helper.gpu_it("names a Graph", function()
    local s = cd.stream("cuda:0")
    local a = cd.zeros(4, { device = "cuda:0", stream = s })
    s:synchronize()
    local g = cd.capture(s, function() a:fill(1) end)
    assert.are.equal("Graph", cd.type(g))
  end)
end)

describe("cudadev.Error", function()
  local function E(t) return setmetatable(t, cd.Error) end

  it("prints as where api: NAME: message", function()
    assert.are.equal("x.lua:3: cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY: out of memory",
      tostring(E { where = "x.lua:3", api = "cuMemAlloc", name = "CUDA_ERROR_OUT_OF_MEMORY", message = "out of memory" }))
  end)

  it("leaves out an empty where and an empty name", function()
    assert.are.equal("cpu.launch: kernel failed", tostring(E { where = "", api = "cpu.launch", name = "", message = "kernel failed" }))
    assert.are.equal("cuInit: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected",
      tostring(E { api = "cuInit", name = "CUDA_ERROR_NO_DEVICE", message = "no CUDA-capable device is detected" }))
  end)

  it("appends the compile log on its own lines", function()
    assert.are.equal("k.lua:1: nvrtcCompileProgram: NVRTC_ERROR_COMPILATION: compilation failed\nline 1: error\nline 2",
      tostring(E { where = "k.lua:1", api = "nvrtcCompileProgram", name = "NVRTC_ERROR_COMPILATION",
                   message = "compilation failed", log = "line 1: error\nline 2" }))
    assert.are.equal("a: b: c", tostring(E { where = "a", api = "b", message = "c", log = "" }))
  end)

  it("has the __name cudadev.Error", function()
    assert.are.equal("cudadev.Error", cd.Error.__name)
  end)
end)

helper.each_device(function(dev)
  describe("a failing compile on " .. dev, function()
    local function failure(opts)
      local ok, err = pcall(cd.compile, BAD, opts)
      assert.is_false(ok)
      return err
    end

    it("raises a cudadev.Error with every field", function()
      local err = failure({ device = dev, options = { "-DA=1", "-DB=2" } })
      assert.are.equal("Error", cd.type(err))
      assert.are.equal(cd.Error, getmetatable(err))
      for _, f in ipairs({ "api", "name", "message", "where", "log" }) do
        assert.are.equal("string", type(err[f]), f)
      end
      assert.are.equal("integer", math.type(err.code))
      assert.are.equal("boolean", type(err.sticky))
      assert.is_false(err.sticky)
      assert.are.same({ "-DA=1", "-DB=2" }, err.options)
      assert.are.equal(dev, err.device)
      assert.is_truthy(err.log:find("undefined_thing", 1, true))
    end)

    it("carries an empty options list when none were given", function()
      assert.are.same({}, failure({ device = dev }).options)
    end)

    it("prints its fields and the log", function()
      local err = failure({ device = dev })
      local text = tostring(err)
      assert.are.equal((err.where ~= "" and err.where .. ": " or "") .. err.api .. ": "
        .. (err.name ~= "" and err.name .. ": " or "") .. err.message .. "\n" .. err.log, text)
      assert.is_truthy(text:find("undefined_thing", 1, true))
    end)

    it("leaves the device usable", function()
      failure({ device = dev })
      local a = cd.full(3, 2, "int32", { device = dev })
      assert.are.same({ 2, 2, 2 }, a:totable())
      assert.is_false(cd.device(dev).is_sticky)
    end)
  end)
end)

describe("misuse", function()
  it("raises plain Lua errors, not cudadev.Error values", function()
    local ok, err = pcall(function() cd.empty(-1) end)
    assert.is_false(ok)
    assert.are.equal("string", type(err))
    assert.is_nil(cd.type(err))
  end)

  it("is worded in Lua's own tone: lowercase, no final period", function()
    local msgs = {}
    for _, f in ipairs({
      function() cd.empty(-1) end,
      function() cd.zeros(2, { blok = 256 }) end,
      function() local a = cd.zeros(1); a:free(); return a[1] end,
      function() return cd.zeros(2)[3] end,
      function() cd.stream({ prio = 1 }) end,
      function() cd.copy(cd.empty(2), cd.empty(4)) end,
    }) do
      local ok, err = pcall(f)
      assert.is_false(ok)
      msgs[#msgs + 1] = helper.error_text(err)
    end
    for _, m in ipairs(msgs) do
      assert.is_falsy(m:match("%.$"), m)
      assert.is_truthy(m:match("^bad argument #%d+ to '[%w_]+' %([a-z]") or m:match("^calling '[%w_]+' on bad self"), m)
    end
  end)
end)
