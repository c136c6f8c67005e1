-- Devices (API.md "Devices"): discovery, Device values, the default device and its scopes, and how
-- CUDADEV_DEVICE / CUDA_DEVICE choose the initial default. Runs on the cpu device everywhere; what needs
-- a GPU is in gpu_it blocks.
local helper = require "spec.helper"
local cd = require "cudadev"

local expect_error = helper.assert_error_matches

-- The reason a missing CUDA device gives inside "no device '...' (no CUDA device: REASON)".
local function no_cuda_reason()
  local _, why = cd.is_available()
  if why == "the CUDA driver reports no device" then return "the driver reports none" end
  return why
end

-- The text cd.device(spec) gives for a device that does not exist, on this machine.
local function no_device_text(spec)
  if spec ~= "cuda" and not spec:find("^cuda:") then return helper.unknown_device_text(spec) end
  local n = cd.device_count()
  if n == 0 then return ("no device '%s' (no CUDA device: %s)"):format(spec, no_cuda_reason()) end
  return ("no device '%s' (%d CUDA device%s: cuda:0%s)"):format(spec, n, n == 1 and "" or "s",
    n > 1 and (" to cuda:" .. (n - 1)) or "")
end

-- A test about a machine without CUDA: pending, with the reason, where there is a GPU.
local function cpu_only_it(name, fn)
  if helper.cuda_available then return pending(name .. " (needs a machine without CUDA)") end
  return it(name, fn)
end

-- Runs `code` with lua5.4 in a child process with the given environment assignments and this process's
-- package.cpath, so the child loads the same cudadev; returns what it wrote to stdout.
local function child(env, code)
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(("package.cpath = %q\nlocal cd = require 'cudadev'\n"):format(package.cpath), code)
  f:close()
  local p = assert(io.popen(("env %s lua5.4 %s 2>&1"):format(env, path), "r"))
  local out = p:read("a")
  p:close()
  os.remove(path)
  return out
end

-- Restores the default device after each test that changes it.
local function keep_default_device()
  local saved
  before_each(function() saved = cd.get_device() end)
  after_each(function() cd.set_device(saved) end)
end

describe("cd.is_available", function()
  it("returns a boolean, and a string reason exactly when it is false", function()
    local ok, why = cd.is_available()
    assert.is_boolean(ok)
    if ok then assert.is_nil(why) else assert.is_string(why) end
    assert.are.equal(helper.cuda_available, ok)
  end)

  it("names every library it tried when there is no driver", function()
    local out = child("CUDADEV_LIBCUDA=/nonexistent/libcuda.so.1",
      "local ok, why = cd.is_available(); io.write(tostring(ok), '|', why, '|', cd.device_count())")
    assert.are.equal("false|no CUDA driver: tried /nonexistent/libcuda.so.1 (/nonexistent/libcuda.so.1: "
      .. "cannot open shared object file: No such file or directory)|0", out)
  end)

  it("without a driver, the default device is cpu and devices() holds only cpu", function()
    local out = child("CUDADEV_LIBCUDA=/nonexistent/libcuda.so.1 CUDADEV_DEVICE= CUDA_DEVICE=",
      "io.write(cd.get_device().alias, '|', #cd.devices(), '|', #cd.cuda_devices())")
    assert.are.equal("cpu|1|0", out)
  end)
end)

describe("device discovery", function()
  it("device_count() is an integer that matches cuda_devices()", function()
    local n = cd.device_count()
    assert.is_true(math.type(n) == "integer" and n >= 0)
    assert.are.equal(n, #cd.cuda_devices())
    if not helper.cuda_available then assert.are.equal(0, n) end
  end)

  it("devices() lists cpu first, then the CUDA devices", function()
    local all, cuda = cd.devices(), cd.cuda_devices()
    assert.are.equal(#cuda + 1, #all)
    assert.are.equal("cpu", all[1].alias)
    assert.is_true(all[1].is_cpu)
    for i, d in ipairs(cuda) do
      assert.are.equal(d, all[i + 1])
      assert.is_true(d.is_cuda)
      assert.are.equal("Device", cd.type(d))
    end
  end)

  cpu_only_it("cuda_devices() is empty without CUDA", function()
    assert.are.same({}, cd.cuda_devices())
  end)

  helper.gpu_it("cuda_devices() are cuda:0, cuda:1, ... in ordinal order", function()
    for i, d in ipairs(cd.cuda_devices()) do
      assert.are.equal("cuda:" .. (i - 1), d.alias)
      assert.are.equal(i - 1, d.ordinal)
    end
  end)
end)

describe("cd.device", function()
  it("resolves \"cpu\"", function()
    local d = cd.device("cpu")
    assert.are.equal("Device", cd.type(d))
    assert.are.equal("cpu", d.alias)
  end)

  it("accepts a Device and returns it", function()
    local d = cd.device("cpu")
    assert.are.equal(d, cd.device(d))
  end)

  it("with no argument is the default device", function()
    assert.are.equal(cd.get_device(), cd.device())
  end)

  cpu_only_it("rejects an ordinal when there is no CUDA device", function()
    expect_error(function() cd.device(0) end, "bad argument #1 to 'device' (" .. no_device_text("cuda:0") .. ")")
  end)

  cpu_only_it("rejects \"cuda:0\" and \"cuda\" when there is no CUDA device", function()
    expect_error(function() cd.device("cuda:0") end,
      "bad argument #1 to 'device' (" .. no_device_text("cuda:0") .. ")")
    expect_error(function() cd.device("cuda") end,
      "bad argument #1 to 'device' (" .. no_device_text("cuda") .. ")")
  end)

  helper.gpu_it("rejects an ordinal past the last device, listing the ones there are", function()
    local n = cd.device_count()
    expect_error(function() cd.device(n) end,
      "bad argument #1 to 'device' (" .. no_device_text("cuda:" .. n) .. ")")
    expect_error(function() cd.device("cuda:" .. n) end,
      "bad argument #1 to 'device' (" .. no_device_text("cuda:" .. n) .. ")")
  end)

  it("rejects an unknown alias, a negative and a fractional ordinal", function()
    expect_error(function() cd.device("gpu") end, "bad argument #1 to 'device' (" ..
      helper.unknown_device_text("gpu", cd.device_count() > 0 and "cuda" or nil) .. ")")
    expect_error(function() cd.device(-1) end, "bad argument #1 to 'device' (" .. no_device_text("cuda:-1") .. ")")
    expect_error(function() cd.device(1.5) end, "bad argument #1 to 'device' (" .. no_device_text("cuda:1.5") .. ")")
  end)

  it("rejects a value that is no device spec", function()
    expect_error(function() cd.device({}) end,
      "bad argument #1 to 'device' (device expected (\"cpu\", \"cuda:N\", an ordinal or a Device), got table)")
    expect_error(function() cd.device(true) end,
      "bad argument #1 to 'device' (device expected (\"cpu\", \"cuda:N\", an ordinal or a Device), got boolean)")
  end)

  -- "cuda" is the device whose context is current, so cuda:0 is made current first: a spec that ran before this
  -- one may have left another device's context current (spec/65 on a host of two GPUs did)
  helper.gpu_it("resolves 0, \"cuda:0\" and \"cuda\" to the same device", function()
    cd.with_device("cuda:0", function()
      local d = cd.device(0)
      assert.are.equal(d, cd.device("cuda:0"))
      assert.are.equal(d, cd.device("cuda"))
      assert.is_true(rawequal(d, cd.device("cuda:0")))
    end)
  end)
end)

describe("Device fields (cpu)", function()
  local d = cd.device("cpu")

  it("describe the host", function()
    assert.are.equal("cpu", d.alias)
    assert.is_truthy(d.name:match("^host CPU %(.+%)$"))
    assert.are.equal(-1, d.ordinal)
    assert.are.equal(0, d.arch)
    assert.is_true(d.is_cpu)
    assert.is_false(d.is_cuda)
    assert.is_boolean(d.is_uva)
    assert.is_false(d.is_cubin_supported)
    assert.is_boolean(d.is_mempool_supported)
    assert.is_boolean(d.is_primary)
    assert.is_true(d.has_context)
  end)

  it("have no uuid or PCI bus id", function()
    assert.is_nil(d.uuid)
    assert.is_nil(d.pci_bus_id)
  end)

  it("report memory: total_memory > 0, free_memory 0", function()
    assert.is_true(math.type(d.total_memory) == "integer" and d.total_memory > 0)
    assert.are.equal(0, d.free_memory)
    local free, total = d:memory_info()
    assert.is_true(math.type(free) == "integer")
    assert.are.equal(d.total_memory, total)
  end)

  it("include the current stream", function()
    assert.are.equal("Stream", cd.type(d.stream))
    assert.are.equal(cd.get_stream("cpu"), d.stream)
  end)

  it("reject an unknown field", function()
    expect_error(function() return d.bogus end, "Device has no field or method 'bogus'")
  end)

  it("have no CUDA attributes", function()
    expect_error(function() d:attribute("multiprocessor_count") end,
      "the cpu device has no CUDA attribute 'multiprocessor_count'")
  end)

  it("reject an unknown attribute name", function()
    expect_error(function() d:attribute("bogus") end,
      "bad argument #1 to 'attribute' (unknown attribute 'bogus' (any CU_DEVICE_ATTRIBUTE_* name, lowercase, "
        .. "without the prefix))")
  end)
end)

describe("Device values", function()
  it("for the same device compare equal, and are the same value", function()
    local a, b = cd.device("cpu"), cd.devices()[1]
    assert.is_true(a == b)
    assert.is_true(rawequal(a, b))
  end)

  it("do not equal other values", function()
    local d = cd.device("cpu")
    assert.is_false(d == "cpu")
    assert.is_false(d == cd.get_stream("cpu"))
  end)

  helper.gpu_it("for different devices are unequal", function()
    assert.is_false(cd.device("cpu") == cd.device("cuda:0"))
  end)

  it("print as Device(cpu \"name\" memory)", function()
    local d = cd.device("cpu")
    assert.are.equal(('Device(cpu "%s" %.1f GiB)'):format(d.name, d.total_memory / 2^30), tostring(d))
  end)

  helper.gpu_it("print as Device(cuda:0 \"name\" sm_XY memory)", function()
    local d = cd.device("cuda:0")
    assert.are.equal(('Device(cuda:0 "%s" sm_%d %.1f GiB)'):format(d.name, d.arch, d.total_memory / 2^30),
      tostring(d))
  end)
end)

describe("CUDA Device fields", function()
  helper.gpu_it("describe the GPU", function()
    local d = cd.device("cuda:0")
    assert.are.equal("cuda:0", d.alias)
    assert.are.equal(0, d.ordinal)
    assert.is_true(d.arch >= 50)
    assert.is_false(d.is_cpu)
    assert.is_true(d.is_cuda)
    assert.is_true(d.is_primary)
    assert.is_truthy(d.uuid:match("^GPU%-%x+%-%x+%-%x+%-%x+%-%x+$"))
    assert.is_truthy(d.pci_bus_id:match("^%x+:%x+:%x+%.%x$"))
    assert.is_true(d.sm_count > 0)
    assert.is_true(d.total_memory > 0)
    local free, total = d:memory_info()
    assert.are.equal(d.total_memory, total)
    assert.is_true(free > 0 and free <= total)
    assert.is_true(d.free_memory > 0)
    assert.are.equal(d.sm_count, d:attribute("multiprocessor_count"))
    assert.is_boolean(d.is_cubin_supported)
  end)
end)

describe("the default device", function()
  keep_default_device()

  it("get_device() returns a Device", function()
    assert.are.equal("Device", cd.type(cd.get_device()))
  end)

  cpu_only_it("is cpu when there is no CUDA device", function()
    assert.are.equal(cd.device("cpu"), cd.get_device())
  end)

  it("set_device changes it", function()
    cd.set_device("cpu")
    assert.are.equal(cd.device("cpu"), cd.get_device())
    cd.set_device(cd.device("cpu"))
    assert.are.equal("cpu", cd.get_device().alias)
  end)

  it("set_device rejects an unknown device and keeps the default", function()
    local before = cd.get_device()
    expect_error(function() cd.set_device("nope") end,
      "bad argument #1 to 'set_device' (" .. no_device_text("nope") .. ")")
    assert.are.equal(before, cd.get_device())
  end)

  helper.gpu_it("set_device(\"cuda:0\") switches to the GPU and creates its context", function()
    cd.set_device("cuda:0")
    assert.are.equal(cd.device("cuda:0"), cd.get_device())
    assert.is_true(cd.get_device().has_context)
    cd.set_device("cpu")
    assert.are.equal(cd.device("cpu"), cd.get_device())
  end)
end)

describe("cd.with_device", function()
  keep_default_device()

  it("calls fn with the arguments and returns all its results", function()
    local a, b, c, n = cd.with_device("cpu", function(x, y, z)
      return x + 1, y, z, select("#", x, y, z)
    end, 1, nil, "three")
    assert.are.equal(2, a)
    assert.is_nil(b)
    assert.are.equal("three", c)
    assert.are.equal(3, n)
  end)

  it("makes the device the default inside fn", function()
    local inside = cd.with_device("cpu", function() return cd.get_device() end)
    assert.are.equal(cd.device("cpu"), inside)
  end)

  it("passes an error value through unchanged", function()
    local e = { reason = "mine" }
    local ok, err = pcall(cd.with_device, "cpu", function() error(e) end)
    assert.is_false(ok)
    assert.is_true(rawequal(e, err))
    ok, err = pcall(cd.with_device, "cpu", function() error("plain", 0) end)
    assert.is_false(ok)
    assert.are.equal("plain", err)
  end)

  it("rejects an unknown device, naming with_device, without calling fn", function()
    local called = false
    expect_error(function() cd.with_device("nope", function() called = true end) end,
      "bad argument #1 to 'with_device' (" .. no_device_text("nope") .. ")")
    assert.is_false(called)
  end)

  it("requires a function", function()
    expect_error(function() cd.with_device("cpu", 42) end,
      "bad argument #2 to 'with_device' (function expected, got number)")
  end)

  helper.gpu_it("restores the previous default on return, on error, and nests", function()
    cd.set_device("cpu")
    local inner, outer
    cd.with_device("cuda:0", function()
      outer = cd.get_device()
      cd.with_device("cpu", function() inner = cd.get_device() end)
      assert.are.equal(cd.device("cuda:0"), cd.get_device())
    end)
    assert.are.equal(cd.device("cuda:0"), outer)
    assert.are.equal(cd.device("cpu"), inner)
    assert.are.equal(cd.device("cpu"), cd.get_device())
    local e = setmetatable({}, { __tostring = function() return "boom" end })
    local ok, err = pcall(cd.with_device, "cuda:0", function()
      cd.with_device("cpu", function() error(e) end)
    end)
    assert.is_false(ok)
    assert.is_true(rawequal(e, err))
    assert.are.equal(cd.device("cpu"), cd.get_device())
  end)
end)

describe("cd.scope", function()
  keep_default_device()

  it("sets the default device until the variable goes out of scope", function()
    local before = cd.get_device()
    do
      local _ <close> = cd.scope("cpu")
      assert.are.equal(cd.device("cpu"), cd.get_device())
      do
        local _ <close> = cd.scope(cd.device("cpu"))
        assert.are.equal(cd.device("cpu"), cd.get_device())
      end
    end
    assert.are.equal(before, cd.get_device())
  end)

  it("rejects an unknown device without changing the default", function()
    local before = cd.get_device()
    expect_error(function() local _ <close> = cd.scope("nope") end,
      "bad argument #1 to 'scope' (" .. no_device_text("nope") .. ")")
    assert.are.equal(before, cd.get_device())
  end)

  helper.gpu_it("restores the previous device at scope end and on error", function()
    cd.set_device("cpu")
    do
      local _ <close> = cd.scope("cuda:0")
      assert.are.equal(cd.device("cuda:0"), cd.get_device())
    end
    assert.are.equal(cd.device("cpu"), cd.get_device())
    local ok = pcall(function()
      local _ <close> = cd.scope("cuda:0")
      error("inside")
    end)
    assert.is_false(ok)
    assert.are.equal(cd.device("cpu"), cd.get_device())
  end)
end)

describe("synchronization", function()
  it("cd.synchronize() waits for every device and returns nothing", function()
    assert.are.equal(0, select("#", cd.synchronize()))
  end)

  it("cd.synchronize_device and dev:synchronize() work on cpu", function()
    assert.are.equal(0, select("#", cd.synchronize_device("cpu")))
    assert.are.equal(0, select("#", cd.synchronize_device()))
    assert.are.equal(0, select("#", cd.device("cpu"):synchronize()))
  end)

  helper.gpu_it("cd.synchronize_device(\"cuda:0\") works", function()
    cd.synchronize_device("cuda:0")
    cd.device("cuda:0"):synchronize()
  end)
end)

describe("cd.detect", function()
  local function capture(fn)
    local lines, print0 = {}, print
    _G.print = function(...)
      local t = table.pack(...)
      for i = 1, t.n do t[i] = tostring(t[i]) end
      lines[#lines + 1] = table.concat(t, "\t")
    end
    local ok, r = pcall(fn)
    _G.print = print0
    assert(ok, r)
    return r, table.concat(lines, "\n")
  end

  it("prints a summary and returns whether a CUDA device exists", function()
    local r, out = capture(cd.detect)
    assert.is_boolean(r)
    assert.are.equal(helper.cuda_available, r)
    assert.are.equal("cudadev " .. cd.version, out:match("^[^\n]*"))
    assert.is_truthy(out:find('\n   Devices:\n     "cpu"     : "' .. cd.device("cpu").name .. '"', 1, true))
    assert.is_truthy(out:find('\n   Default device: "' .. cd.get_device().alias .. '"', 1, true))
    if not r then
      assert.is_truthy(out:find("\n   CUDA not available: " .. select(2, cd.is_available()), 1, true))
    end
  end)

  helper.gpu_it("lists each CUDA device with its arch", function()
    local _, out = capture(cd.detect)
    for _, d in ipairs(cd.cuda_devices()) do
      assert.is_truthy(out:find(('"%s"'):format(d.alias), 1, true))
      assert.is_truthy(out:find(("sm_%d"):format(d.arch), 1, true))
    end
  end)
end)

describe("the initial default device", function()
  local code = "local ok, d = pcall(cd.get_device); io.write(ok and d.alias or d)"

  it("is CUDADEV_DEVICE when set to cpu", function()
    assert.are.equal("cpu", child("CUDADEV_DEVICE=cpu", code))
  end)

  it("rejects a CUDADEV_DEVICE that names no device", function()
    local hint = helper.cuda_available and "use cpu or cuda:N" or "no CUDA device is present; use cpu"
    assert.are.equal(("CUDADEV_DEVICE='bogus' names no device (%s)"):format(hint),
      child("CUDADEV_DEVICE=bogus", code))
    assert.are.equal(("CUDADEV_DEVICE='cuda:63' names no device (%s)"):format(hint),
      child("CUDADEV_DEVICE=cuda:63", code))
  end)

  it("rejects a CUDA_DEVICE that is not an ordinal of a device", function()
    local hint = helper.cuda_available and "use cpu or cuda:N" or "no CUDA device is present; use cpu"
    assert.are.equal(("CUDA_DEVICE='cpu' names no device (%s)"):format(hint),
      child("CUDADEV_DEVICE= CUDA_DEVICE=cpu", code))
  end)

  it("prefers CUDADEV_DEVICE over CUDA_DEVICE", function()
    assert.are.equal("cpu", child("CUDADEV_DEVICE=cpu CUDA_DEVICE=63", code))
  end)

  it("does not load the driver at require time", function()
    -- a bad CUDADEV_DEVICE is only reported when the default device is first needed
    assert.are.equal("loaded", child("CUDADEV_DEVICE=bogus", "io.write(cd.version and 'loaded')"))
  end)

  cpu_only_it("is cpu without CUDA when nothing is set", function()
    assert.are.equal("cpu", child("CUDADEV_DEVICE= CUDA_DEVICE= HOME=/nonexistent", code))
  end)

  helper.gpu_it("is the first CUDA device when nothing is set", function()
    assert.are.equal("cuda:0", child("CUDADEV_DEVICE= CUDA_DEVICE= HOME=/nonexistent", code))
  end)

  helper.gpu_it("follows CUDADEV_DEVICE=cuda:0 and CUDA_DEVICE=0", function()
    assert.are.equal("cuda:0", child("CUDADEV_DEVICE=cuda:0", code))
    assert.are.equal("cuda:0", child("CUDADEV_DEVICE= CUDA_DEVICE=0", code))
    assert.are.equal("cpu", child("CUDADEV_DEVICE=cpu CUDA_DEVICE=0", code))
  end)
end)
