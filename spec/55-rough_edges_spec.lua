-- The rough edges a new user hits first (issue 16): messages that say what exists and what to do, the same
-- form of message for the same misuse on every type, a wall-clock timer, and a:astype.
local helper = require "spec.helper"
local cd = require "cudadev"

local expect_error = helper.assert_error_matches
local sh = helper.shell_quote

describe("device specs", function()
  it("a string of no spec form lists the devices and guesses the one meant", function()
    local gpu = cd.device_count() > 0
    expect_error(function() cd.device("gpu") end,
      "bad argument #1 to 'device' (" .. helper.unknown_device_text("gpu", gpu and "cuda" or nil) .. ")")
    expect_error(function() cd.device("CPU") end,
      "bad argument #1 to 'device' (" .. helper.unknown_device_text("CPU", "cpu") .. ")")
    expect_error(function() cd.device("cuda0") end,
      "bad argument #1 to 'device' (" .. helper.unknown_device_text("cuda0", gpu and "cuda:0" or nil) .. ")")
    expect_error(function() cd.zeros(2, { device = "Cpu" }) end,
      "bad option 'device' to 'zeros' (" .. helper.unknown_device_text("Cpu", "cpu") .. ")")
  end)

  if cd.device_count() == 0 then
    it("without CUDA, the text says so and where to ask why", function()
      expect_error(function() cd.device("gpu") end,
        "bad argument #1 to 'device' (no device 'gpu' (devices: \"cpu\"; no CUDA device, cd.is_available() says why))")
      expect_error(function() cd.device("CPU") end,
        "bad argument #1 to 'device' (no device 'CPU' (did you mean \"cpu\"? devices: \"cpu\"; no CUDA device, " ..
        "cd.is_available() says why))")
    end)
  end

  helper.gpu_it("with CUDA, the text lists the CUDA devices and names \"cuda\"", function()
    local text = helper.unknown_device_text("GPU0", "cuda:0")
    assert.truthy(text:find('"cpu", "cuda:0"', 1, true), text)
    assert.truthy(text:find('; "cuda" is the current CUDA device)', 1, true), text)
    expect_error(function() cd.device("GPU0") end, "bad argument #1 to 'device' (" .. text .. ")")
  end)

  -- PyCUDA's file name, as well as ours
  helper.multi_gpu_it("the default device comes from ~/.cuda_device too; ~/.cuda-device comes first", function()
    local home = os.tmpname()
    os.remove(home)
    assert(os.execute("mkdir " .. sh(home)))
    local function write(name, text)
      local f = assert(io.open(home .. "/" .. name, "w"))
      f:write(text)
      f:close()
    end
    local env = "env -u CUDADEV_DEVICE -u CUDA_DEVICE HOME=" .. sh(home)
    write(".cuda_device", "1\n")
    local one = helper.run_child("print(cd.get_device().alias)", env)
    write(".cuda-device", "0\n")
    local both = helper.run_child("print(cd.get_device().alias)", env)
    os.execute("rm -rf " .. sh(home))
    assert.are.equal("cuda:1\nexit 0\n", one)
    assert.are.equal("cuda:0\nexit 0\n", both)
  end)
end)

describe("copies", function()
  it("a dtype mismatch suggests astype", function()
    expect_error(function() cd.copy(cd.zeros(2), cd.zeros(2, "f64")) end,
      "bad argument #2 to 'copy' (dtype mismatch: float64 into float32 (convert the source first: " ..
      "src:astype(\"float32\")))")
  end)

  it("copy_from of another size says both sizes", function()
    expect_error(function() cd.zeros(2):copy_from(cd.zeros(3)) end,
      "bad argument #1 to 'copy_from' (size mismatch: the source has 3 elements, the array 2)")
    expect_error(function() cd.zeros(3):copy_from({ 1, 2 }) end,
      "bad argument #1 to 'copy_from' (size mismatch: the source has 2 elements, the array 3)")
  end)
end)

describe("a:astype", function()
  helper.each_device(function(dev)
    it("converts to every dtype on the array's own device, " .. dev, function()
      local a = cd.array({ 1.5, -2.7, 300, 0 / 0, -1e30, 0 }, "f32", { device = dev })
      local b = a:astype("int8")
      assert.are.equal("int8", b.dtype)
      assert.are.equal(cd.device(dev), b.device)
      assert.are.same({ 1, -2, 127, 0, -128, 0 }, b:totable())   -- truncates, saturates, NaN is 0
      assert.are.same({ 255, 0, 7 }, cd.array({ -1, 256, 7 }, "i32", { device = dev }):astype("u8"):totable())   -- wraps
      assert.are.same({ false, true, true }, cd.array({ 0, 2, 0 / 0 }, "f64", { device = dev }):astype("bool"):totable())
      assert.are.same({ 1, 0 }, cd.array({ true, false }, "bool", { device = dev }):astype("f64"):totable())
      assert.are.same({ 1, 2.5, -3 }, cd.array({ 1, 2.5, -3 }, "f64", { device = dev }):astype("f16"):totable())
      assert.are.same({ math.maxinteger, math.mininteger, 0 },
        cd.array({ 1e300, -1e300, 0 }, "f64", { device = dev }):astype("i64"):totable())
      assert.are.same({ 0, 4294967295 }, cd.array({ -5, 1e20 }, "f64", { device = dev }):astype("u32"):totable())
      assert.are.same({ -1, 2 }, cd.array({ -1, 2 }, "i64", { device = dev }):astype("f32"):totable())
      local m = cd.array({ { 1, 2 }, { 3, 4 } }, "i16", { device = dev }):astype("float64")
      assert.are.same({ 2, 2 }, m.shape)
      assert.are.same({ { 1, 2 }, { 3, 4 } }, m:totable())
      local same = a:astype("f32")   -- a copy, as NumPy's astype
      same[1] = 9
      assert.are.equal(1.5, a[1])
      assert.are.equal(0, cd.empty(0, "u8", { device = dev }):astype("f64").size)
      cd.synchronize()
    end)
  end)

  -- NOTE [astype kernel]: the generated kernel (a:astype on a GPU) against the host loop (a:astype on the cpu
  -- device, before: on every device), byte for byte, over every dtype pair and the edge values of each rule
  helper.each_device(function(dev)
    it("the device kernel converts as the host loop, byte for byte, every dtype pair and edge value, " .. dev, function()
      local D = { device = dev }
      local mt = getmetatable(cd.zeros(1, "f32", D))
      local DTYPES = { "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
                       "float32", "float64" }
      local floats = { 0, -0.0, 0.5, -0.5, 1.5, -2.7, 1 / 3, 127.5, 128, -128.5, -129, 255.5, 256, -1, 32767.9, 32768,
                       -32769, 65504, 65519, 65520, 65535.5, 65536, 2049, 2 ^ 24 + 1, 2 ^ 31 - 0.5, 2 ^ 31, -2 ^ 31 - 1,
                       2 ^ 32, 2 ^ 53 + 1, 2 ^ 63, -2 ^ 63, 2 ^ 64, -2 ^ 64, 1e30, -1e30, 1e300, 6e-8, 1e-45, 5e-324,
                       1 / 0, -1 / 0, 0 / 0, -(0 / 0) }
      local ints = { 0, 1, -1, 127, 128, -128, -129, 255, 256, 32767, 32768, -32769, 65535, 65536, 65519, 65520, 2049,
                     2147483647, 2147483648, -2147483649, 4294967295, 4294967296, 2 ^ 24 + 1, (1 << 53) + 1,
                     (1 << 62) + 1, math.maxinteger, math.mininteger, -2 }
      local src = {
        bool = cd.array({ true, false, true }, "bool", D),
        -- NaNs with payloads (signalling ones too), as a file may hold them
        float64 = cd.array(cd.array(floats, "float64"):tobytes() .. string.pack("<I8I8", 0x7ff0000000000001,
          0xfff4000000000abc), "float64", D),
        int64 = cd.array(ints, "int64", D),
      }
      src.float32 = cd.array(mt.__astype_host(src.float64, "float32"):tobytes() .. string.pack("<I4I4", 0x7f800001, 0xff812345),
        "float32", D)
      src.float16 = cd.array(mt.__astype_host(src.float64, "float16"):tobytes() .. string.pack("<I2I2", 0x7c01, 0xfd55),
        "float16", D)
      for _, d in ipairs(DTYPES) do   -- each integer dtype: the int64 values wrapped into it
        if not src[d] then src[d] = mt.__astype_host(src.int64, d) end
      end
      for _, from in ipairs(DTYPES) do
        local a = src[from]
        for _, to in ipairs(DTYPES) do
          local want = mt.__astype_host(a, to):tobytes()
          assert.are.equal(want, mt.__astype_kernel(a, to):tobytes(), from .. " into " .. to)
          assert.are.equal(want, a:astype(to):tobytes(), from .. " into " .. to)   -- on a GPU: the kernel
        end
      end
      -- a strided view is converted as its contiguous copy
      local m = cd.arange(12, "int32", D):reshape({ 3, 4 }).T
      assert.are.same(m:contiguous():astype("float16"):totable(), mt.__astype_kernel(m, "float16"):totable())
      assert.are.same(m:contiguous():astype("float16"):totable(), m:astype("float16"):totable())
      assert.are.equal(0, mt.__astype_kernel(cd.empty(0, "u8", D), "f64").size)
      cd.synchronize()
    end)
  end)

  -- the kernel a GPU runs, compiled by NVRTC for sm_90 (no GPU needed; the cpu device's host compiler took it)
  helper.nvrtc_it("the astype kernel compiles under NVRTC for sm_90", function()
    local real, STOP, src = cd.compile, {}, nil
    cd._live()   -- forget the kernels kept from earlier tests: the source is generated again
    cd.compile = function(s, o)
      if type(o) == "table" and o.name == "cdv_astype.cu" then src = s error(STOP) end
      return real(s, o)
    end
    local ok, err = pcall(getmetatable(cd.zeros(1)).__astype_kernel, cd.zeros(2), "int8")
    cd.compile = real
    assert(not ok and err == STOP, tostring(err))
    local cok, cerr = pcall(cd.compile, src, { arch = "sm_90", name = "cdv_astype.cu" })
    assert(cok, tostring(cerr))
  end)

  it("checks its arguments", function()
    local a = cd.zeros(2)
    expect_error(function() a:astype() end, "bad argument #1 to 'astype' (value expected)")
    expect_error(function() a:astype("f31") end, "bad argument #1 to 'astype' (unknown dtype 'f31' (expected float32, int32, ...))")
    expect_error(function() a:astype("f64", { strem = 1 }) end, "bad argument #2 to 'astype' (unknown option 'strem' (expected stream))")
    a:free()
    expect_error(function() a:astype("f64") end, "bad argument #1 to 'astype' (attempt to use a freed array)")
  end)
end)

describe("the same misuse, the same message on every type", function()
  it("a second free or destroy names the function", function()
    local a = cd.zeros(2, { device = "cpu" })
    a:free()
    expect_error(function() a:free() end, "bad argument #1 to 'free' (attempt to use a freed array)")
    local s = cd.stream("cpu")
    s:destroy()
    expect_error(function() s:destroy() end, "bad argument #1 to 'destroy' (attempt to use a destroyed stream)")
    expect_error(function() s:synchronize() end, "bad argument #1 to 'synchronize' (attempt to use a destroyed stream)")
    local e = cd.event("cpu")
    e:destroy()
    expect_error(function() e:destroy() end, "bad argument #1 to 'destroy' (attempt to use a destroyed event)")
    expect_error(function() e:record() end, "bad argument #1 to 'record' (attempt to use a destroyed event)")
  end)

  it("closing after freeing is quiet", function()
    do
      local a <close> = cd.zeros(2, { device = "cpu" })
      local s <close> = cd.stream("cpu")
      local e <close> = cd.event("cpu")
      a:free()
      s:destroy()
      e:destroy()
    end
  end)

  helper.gpu_it("a second free of a Graph names the function", function()
    local s = cd.stream("cuda:0")
    local a = cd.zeros(4, { device = "cuda:0", stream = s })   -- as spec/50 makes its Graph
    s:synchronize()
    local g = cd.capture(s, function() a:fill(1) end)
    g:free()
    expect_error(function() g:free() end, "bad argument #1 to 'free' (attempt to use a released graph)")
    expect_error(function() g:launch() end, "bad argument #1 to 'launch' (attempt to use a released graph)")
  end)
end)

describe("queries about the cpu device", function()
  it("peer and pool access queries answer false instead of raising", function()
    assert.is_false(cd.is_peer_access_supported("cpu", "cpu"))
    assert.is_false(cd.is_peer_access_enabled("cpu", "cpu"))
    assert.is_false(cd.is_mempool_access_supported("cpu", "cpu"))
    assert.is_false(cd.is_mempool_access_enabled("cpu", "cpu"))
    if cd.device_count() > 0 then
      assert.is_false(cd.is_peer_access_supported("cpu", 0))
      assert.is_false(cd.is_peer_access_supported(0, "cpu"))
    end
    expect_error(function() cd.set_peer_access_enabled("cpu", "cpu", true) end,
      "bad argument #1 to 'set_peer_access_enabled' (peer access is between CUDA devices, not cpu)")
  end)
end)

describe("the cpu device out of memory", function()
  it("says how much host memory was available", function()
    -- 2^50 bytes: more than a 47-bit address space, so no host maps it (2^45 did map on a 128 GiB GPU host)
    local ok, err = pcall(cd.empty, 2 ^ 50, "u8", { device = "cpu" })
    assert.is_false(ok)
    local text = helper.error_text(err)
    local free = text:match("^out of memory on cpu %(requested 1024%.0 TiB, free ([%d.]+ [KMGT]?i?B)%)$")
    assert(free, text)
    assert.are_not.equal("0 B", free)
  end)
end)

describe("wall-clock time", function()
  it("cd.now is monotonic seconds as a float", function()
    local t0 = cd.now()
    assert.are.equal("float", math.type(t0))
    local t1 = cd.now()
    assert.is_true(t1 >= t0)
    os.execute("sleep 0.05")
    assert.is_true(cd.now() - t0 >= 0.04)
  end)

  it("cd.time returns the seconds, then the function's results", function()
    local dt, a, b = cd.time(function(x, y) os.execute("sleep 0.02"); return x + y, "two" end, 40, 2)
    assert.are.equal("float", math.type(dt))
    assert.is_true(dt >= 0.015 and dt < 5, tostring(dt))
    assert.are.equal(42, a)
    assert.are.equal("two", b)
    assert.are.equal(1, select("#", cd.time(function() end)))
    expect_error(function() cd.time(42) end, "bad argument #1 to 'time' (function expected, got number)")
    expect_error(function() cd.time(cd.zeros(1, { device = "cpu" })) end,
      "bad argument #1 to 'time' (function expected, got cudadev.Array)")
    expect_error(function() cd.time(function() error("inner", 0) end) end, "inner")
  end)
end)
