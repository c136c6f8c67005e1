-- Interop, issue 20 (doc/interop.md): DLPack both ways and managed memory.
--   Lua     a:__dlpack([stream [, versioned]]) gives a light userdata; cd.from_dlpack takes one, or any value with
--           __dlpack (called with the consumer's stream, asked from its __dlpack_device); memory is shared.
--   C       build/embed_dlpack (examples/embed/dlpack.c) pushes the host's tensors (every dtype, byte_offset,
--           refusals) and moves Arrays between two lua_States with cudadev_to_dlpack, counting deleter calls.
--   Python  tests/dlpack_torch.py loads build/libembed_torch.so with ctypes: the plumbing here (--no-torch), PyTorch
--           on the GPU host.
--   managed {managed = true}, a.managed, a:prefetch, a:advise, element access in place.
local helper = require "spec.helper"
local cd = require "cudadev"

local expect_error = helper.assert_error_matches
local exists, sh = helper.file_exists, helper.shell_quote
local BUILD = os.getenv("CUDADEV_BUILD") or io.popen("pwd"):read("l") .. "/build"

local DTYPES = { "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                 "uint64", "bool" }

local function blocks()
  collectgarbage()
  collectgarbage()
  return cd._live().blocks
end

local run, has_line = helper.run_command, helper.has_line

-- A producer of our own, as another library's tensor type would be: it hands out an Array's tensor and notes
-- the stream its consumer asked for.
local function producer(a)
  local p = { calls = 0 }
  function p.__dlpack(self, stream, versioned)
    self.calls, self.stream, self.versioned = self.calls + 1, stream, versioned
    return a:__dlpack(stream, versioned)
  end
  function p.__dlpack_device() return a:__dlpack_device() end
  return p
end

local function lua_cases(dev)
  local on = dev == "cpu" and it or helper.gpu_it

  on("from_dlpack(a) shares a's memory for every dtype on " .. dev, function()
    local base = blocks()
    for _, t in ipairs(DTYPES) do
      local a = cd.zeros({2, 3}, t, { device = dev })
      local b = cd.from_dlpack(a)
      assert.are.equal(a.ptr, b.ptr)
      assert.are.equal(t, b.dtype)
      assert.are.same({2, 3}, b.shape)
      assert.are.equal(dev, b.device.alias)
      b[2][3] = t == "bool" and true or 7
      assert.are.equal(t == "bool" and true or 7, a[2][3])
    end
    assert.are.equal(base, blocks())
  end)

  on("a light userdata round trip keeps the memory after a is freed, until the consumer's Array goes, on " .. dev,
    function()
      local base = blocks()
      local a = cd.array({1, 2, 3, 4}, "int32", { device = dev })
      local p = a:__dlpack()
      assert.are.equal("userdata", type(p))
      assert.are.equal(base + 1, blocks())
      a:free()
      local b = cd.from_dlpack(p)
      assert.are.same({1, 2, 3, 4}, b:totable())
      b = nil
      assert.are.equal(base, blocks())
    end)

  on("the versioned form round trips on " .. dev, function()
    local a = cd.full({3}, 1.5, "float64", { device = dev })
    local b = cd.from_dlpack(a:__dlpack(nil, true), { versioned = true })
    assert.are.same({1.5, 1.5, 1.5}, b:totable())
    local p = producer(a)
    local c = cd.from_dlpack(p, { versioned = true })
    assert.are.equal(true, p.versioned)
    assert.are.equal(a.ptr, c.ptr)
  end)

  on("from_dlpack asks a producer's __dlpack_device, then its __dlpack with the consumer's stream, on " .. dev,
    function()
      local a = cd.array({0, 1, 2, 3, 4}, "int64", { device = dev })
      local p = producer(a)
      local b = cd.from_dlpack(p)
      assert.are.equal(1, p.calls)
      assert.are.equal(a.ptr, b.ptr)
      if dev == "cpu" then
        assert.is_nil(p.stream)   -- the cpu device has no stream: nil, as the protocol asks for CPU tensors
      else
        assert.are.equal(1, p.stream)   -- the current stream is the legacy default stream: 1
        local s = cd.stream(dev)
        b = cd.from_dlpack(p, { stream = s })
        assert.are.equal(s.handle, p.stream)
        assert.are.same({0, 1, 2, 3, 4}, b:totable())
      end
    end)
end

describe("DLPack in Lua", function()
  lua_cases("cpu")
  lua_cases("cuda:0")

  it("exports a strided view with its own strides (an import of it is refused, not read in the wrong order)", function()
    local a = cd.array({ { 1, 2, 3 }, { 4, 5, 6 } })
    helper.assert_error_matches(function() cd.from_dlpack(a.T) end,
      "bad argument #1 to 'from_dlpack' (strided tensors are not supported (strides {1, 3} for shape {3, 2}; " ..
      "compact row-major is {2, 1}): make the tensor contiguous first)")
    assert.are.same({ { 1, 4 }, { 2, 5 }, { 3, 6 } }, cd.from_dlpack(a.T:contiguous()):totable())
  end)

  it("a:__dlpack_device() of cpu arrays is kDLCPU 0, pinned ones too", function()
    assert.are.same({1, 0}, { cd.zeros(2, { device = "cpu" }):__dlpack_device() })
    assert.are.same({1, 0}, { cd.zeros(2, { pinned = true }):__dlpack_device() })
  end)

  helper.gpu_it("a:__dlpack_device() of cuda:0 arrays is kDLCUDA 0, of managed ones kDLCUDAManaged 0", function()
    assert.are.same({2, 0}, { cd.zeros(2, { device = "cuda:0" }):__dlpack_device() })
    assert.are.same({13, 0}, { cd.zeros(2, { device = "cuda:0", managed = true }):__dlpack_device() })
  end)

  helper.gpu_it("the consumer's stream waits for the producer's: a kernel's result read through the import", function()
    local s = cd.stream("cuda:0")
    local m = cd.compile([[extern "C" __global__ void slow(float *x, int n, long long spin) {
      long long t0 = clock64(); while (clock64() - t0 < spin) {}
      int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = i + 1; }]], { device = "cuda:0" })
    local a = cd.zeros(1 << 16, "float32", { device = "cuda:0", stream = s })
    m.slow({ dim = #a, stream = s }, a, #a, 20000000)
    local s2 = cd.stream("cuda:0")
    local b = cd.from_dlpack(a, { stream = s2 })   -- s2 waits for s by an event, not the host
    local h = b:to("cpu", { stream = s2 })          -- read on s2: without the wait, it would race the kernel
    assert.are.equal(1, h[1])
    assert.are.equal(65536, h[65536])
  end)

  it("refuses what is no tensor, and a __dlpack that gives none", function()
    expect_error(function() cd.from_dlpack(42) end,
      "bad argument #1 to 'from_dlpack' (light userdata (a DLPack tensor) or a value with __dlpack expected, got number)")
    expect_error(function() cd.from_dlpack({}) end,
      "bad argument #1 to 'from_dlpack' (light userdata (a DLPack tensor) or a value with __dlpack expected, got table)")
    expect_error(function() cd.from_dlpack({ __dlpack = function() return 1 end }) end,
      "bad argument #1 to 'from_dlpack' (__dlpack returned number, not a light userdata)")
    expect_error(function() cd.from_dlpack(cd.zeros(1), { versoined = true }) end,
      "bad argument #2 to 'from_dlpack' (unknown option 'versoined' (expected stream, versioned))")
  end)

  it("refuses streams the protocol does not have, and streams on the cpu device", function()
    local a = cd.zeros(2, { device = "cpu" })
    expect_error(function() a:__dlpack(0) end,
      "bad argument #1 to '__dlpack' (cpu has no streams to wait on: pass nil (or -1))")
    expect_error(function() a:__dlpack("x") end,
      "bad argument #1 to '__dlpack' (nil, integer or Stream expected, got string)")
    cd.from_dlpack(a:__dlpack(-1))   -- -1: no synchronisation asked
    local b = cd.zeros(2)
    b:free()
    expect_error(function() b:__dlpack() end, "bad argument #1 to '__dlpack' (attempt to use a freed array)")
  end)

  helper.gpu_it("refuses stream 0 and negative streams on cuda:0", function()
    local a = cd.zeros(2, { device = "cuda:0" })
    expect_error(function() a:__dlpack(0) end,
      "bad argument #1 to '__dlpack' (stream 0 is not a DLPack stream (1: the legacy default stream, 2: the " ..
      "per-thread default stream, a handle, -1: no synchronisation))")
  end)

  it("gives and takes no raw address in a sandbox", function()
    local ok, res = cd._sandbox("return cd.zeros(2):__dlpack()")
    assert.is_false(ok)
    assert.are.equal("raw addresses are not available in this sandbox", (tostring(res):gsub("^sandboxed:%d+: ", "")))
    ok, res = cd._sandbox("return cd.from_dlpack(cd.zeros(2))")
    assert.is_false(ok)
    assert.are.equal("raw addresses are not available in this sandbox", (tostring(res):gsub("^sandboxed:%d+: ", "")))
  end)
end)

describe("DLPack from C (build/embed_dlpack)", function()
  local function host_it(name, gpu, fn)
    if not exists(BUILD .. "/embed_dlpack") then return pending(name .. " (build/embed_dlpack was not built)") end
    return (gpu and helper.gpu_it or it)(name, fn)
  end

  for _, dev in ipairs({ "cpu", "cuda:0" }) do
    host_it("exchanges tensors both ways on " .. dev .. ", each deleter called once", dev ~= "cpu", function()
      local out, code = run(sh(BUILD .. "/embed_dlpack") .. " " .. dev)
      assert.are.equal(0, code, out)
      has_line(out, "script: t = Array(float32[2,3] on cpu: {{0, 1, 2}, {3, 4, 5}})")
      has_line(out, "host: same pointer, the script's write seen: data[5] = 50; deleter calls with a view alive: 0")
      has_line(out, "host: deleter calls after the view was collected: 1")
      has_line(out, "script: byte_offset 8: Array(int64[3] on cpu: {20, 30, 40})")
      has_line(out, "script: strides {99, 1} of shape {1, 3}: Array(float32[1,3] on cpu: {{7, 8, 9}})")
      has_line(out, "script: dtypes: float16=0.0 float32=0.0 float64=0.0 int8=0 int16=0 int32=0 int64=0 uint8=0 " ..
                    "uint16=0 uint32=0 uint64=0 bool=false")
      has_line(out, "host: every dtype's deleter called once: yes")
      has_line(out, "refused (bfloat16): cudadev_push_dlpack: DLPack dtype bfloat16 (type code 4) has no cudadev dtype")
      has_line(out, "refused (complex32): cudadev_push_dlpack: DLPack dtype complex32 (type code 5) has no cudadev dtype")
      has_line(out, "refused (float8_e4m3fn): cudadev_push_dlpack: DLPack dtype float8_e4m3fn (type code 10) has no " ..
                    "cudadev dtype")
      has_line(out, "refused (float4 lanes): cudadev_push_dlpack: vector types are not supported (float32 with 4 lanes)")
      has_line(out, "refused (int12): cudadev_push_dlpack: DLPack dtype int12 has no cudadev dtype")
      has_line(out, "refused (code 42): cudadev_push_dlpack: unknown DLPack type code 42")
      has_line(out, "refused (kDLROCM): cudadev_push_dlpack: DLPack device type kDLROCM (10) is not supported")
      has_line(out, "refused (kDLOpenCL): cudadev_push_dlpack: DLPack device type kDLOpenCL (4) is not supported")
      has_line(out, "refused (device 99): cudadev_push_dlpack: unknown DLPack device type 99")
      assert.truthy(out:find("\nrefused (cuda:7): cudadev_push_dlpack: kDLCUDA device 7: no device 'cuda:7'", 1, true), out)
      has_line(out, "refused (strides): cudadev_push_dlpack: strided tensors are not supported (strides {1, 2} for " ..
                    "shape {2, 2}; compact row-major is {2, 1}): make the tensor contiguous first")
      has_line(out, "refused (ndim 9): cudadev_push_dlpack: ndim must be 0 to 8, got 9")
      has_line(out, "refused (negative extent): cudadev_push_dlpack: dimension 1 has a negative extent (-1)")
      has_line(out, "refused (NULL data): cudadev_push_dlpack: data is NULL")
      has_line(out, "refused (version 2.1): cudadev_push_dlpack_versioned: DLPack version 2.1 is not supported " ..
                    "(cudadev reads major version 1)")
      has_line(out, "refused (read-only): cudadev_push_dlpack_versioned: read-only tensors are not supported " ..
                    "(cudadev arrays are writable: copy it first)")
      has_line(out, "refused (NULL): cudadev_push_dlpack: tensor is NULL")
      has_line(out, "host: deleter calls of the refused tensor: 0")
      has_line(out, "script: bad argument #1 to 'cudadev.from_dlpack' (DLPack dtype bfloat16 (type code 4) has no " ..
                    "cudadev dtype)")
      has_line(out, "host: deleter calls after cd.from_dlpack refused it: 1")
      has_line(out, "host: after lua_close, the versioned tensor's deleter calls: 1, the strided one's: 1")
      has_line(out, ("export: ndim 2 shape {3, 2} strides {2, 1} dtype 0/16/1 device %s byte_offset 0, same " ..
                     "pointer: yes"):format(dev == "cpu" and "1:0" or "2:0"))
      has_line(out, ("B: y = Array(int16[3,2] on %s: {{1, 2}, {3, 4}, {5, 6}})"):format(dev))
      has_line(out, ("A: x after B wrote = Array(int16[3,2] on %s: {{1, 2}, {3, 4}, {5, 60}})"):format(dev))
      has_line(out, ("B: y after A wrote and freed x = Array(int16[3,2] on %s: {{10, 2}, {3, 4}, {5, 60}})"):format(dev))
      has_line(out, "host: blocks live after A freed x: 2 (A's, held by the export, and B's Array over it)")
      has_line(out, "host: blocks held once B collected y: 0")
      has_line(out, "export versioned: version 1.1 flags 0 dtype 2/64")
      has_line(out, ("B: w after A closed = Array(float64[4] on %s: {2.5, 2.5, 2.5, 2.5})"):format(dev))
      has_line(out, "B: blocks live at the end: 0")
      has_line(out, "embed_dlpack: ok")
    end)
  end
end)

describe("DLPack from Python (tests/dlpack_torch.py, build/libembed_torch.so)", function()
  local have_python = select(2, run("python3 -c 'import ctypes'")) == 0
  local have_torch = have_python and select(2, run("python3 -c 'import torch'")) == 0
  local function py_it(name, needs, why, fn)
    if not exists(BUILD .. "/libembed_torch.so") then return pending(name .. " (build/libembed_torch.so was not built)") end
    if not needs then return pending(name .. " (" .. why .. ")") end
    return it(name, fn)
  end

  py_it("ctypes hands a tensor made in Python to a script and takes one back", have_python, "no python3",
    function()
      local out, code = run("CUDADEV_EMBED_TORCH=" .. sh(BUILD .. "/libembed_torch.so") ..
                            " python3 tests/dlpack_torch.py --no-torch")
      assert.are.equal(0, code, out)
      has_line(out, "ok: the deleter was called once when the Array was collected")
      has_line(out, "dlpack_torch: ok")
    end)

  local torch_it = helper.cuda_available and py_it or function(name) return pending(name .. " (no CUDA device)") end
  torch_it("PyTorch tensors both ways on cuda:0 and cpu: same address, same values, writes seen", have_torch,
    "no PyTorch", function()
      local out, code = run("CUDADEV_EMBED_TORCH=" .. sh(BUILD .. "/libembed_torch.so") .. " python3 tests/dlpack_torch.py")
      assert.are.equal(0, code, out)
      assert.is_nil(out:find("FAILED", 1, true), out)
      has_line(out, "dlpack_torch: ok")
    end)
end)

describe("managed memory", function()
  it("{managed = true} on the cpu device is ordinary memory, read and written in place", function()
    local _ <close> = cd.scope("cpu")   -- a GPU host's default device is cuda:0
    local a = cd.zeros(4, "float32", { managed = true })
    assert.is_true(a.managed)
    assert.is_false(cd.zeros(4).managed)
    assert.are.equal("Array(float32[4] on cpu managed: {0, 0, 0, 0})", tostring(a))
    a[2] = 5
    assert.are.equal(5, a[2])
    assert.are.equal(a, a:prefetch("cpu"))
    for _, adv in ipairs({ "read_mostly", "unset_read_mostly", "unset_preferred_location" }) do
      assert.are.equal(a, a:advise(adv))
    end
    for _, adv in ipairs({ "preferred_location", "accessed_by", "unset_accessed_by" }) do
      assert.are.equal(a, a:advise(adv, "cpu"))
    end
    assert.is_true(cd.array({1, 2}, "int8", { managed = true }).managed)
    assert.is_true(cd.from_dlpack(a).ptr == a.ptr)
  end)

  it("refuses misuse by name", function()
    local a = cd.zeros(4, { managed = true })
    expect_error(function() cd.zeros(4):prefetch("cpu") end,
      "bad argument #1 to 'prefetch' (prefetch needs a managed array (made with {managed = true}))")
    expect_error(function() cd.zeros(4):advise("read_mostly") end,
      "bad argument #1 to 'advise' (advise needs a managed array (made with {managed = true}))")
    expect_error(function() a:advise("read_mostlly") end,
      "bad argument #1 to 'advise' (unknown advice 'read_mostlly' (read_mostly, unset_read_mostly, " ..
      "preferred_location, unset_preferred_location, accessed_by, unset_accessed_by))")
    expect_error(function() a:advise("accessed_by") end,
      "bad argument #2 to 'advise' ('accessed_by' needs a device ('cpu' for the host))")
    expect_error(function() a:prefetch("cpu", { steam = 1 }) end,
      "bad argument #2 to 'prefetch' (unknown option 'steam' (expected stream))")
    expect_error(function() cd.zeros(4, { managed = true, pinned = true }) end,
      "bad option 'managed' to 'zeros' (pinned and managed exclude each other (managed memory is reachable from " ..
      "the host already))")
    expect_error(function() cd.zeros(4, { managed = 1 }) end,
      "bad option 'managed' to 'zeros' (boolean expected, got number)")
  end)

  helper.gpu_it("{managed = true} on cuda:0: cuMemAllocManaged, kernels and the host use it in place", function()
    local a = cd.zeros(1024, "float32", { device = "cuda:0", managed = true })
    assert.is_true(a.managed)
    assert.truthy(tostring(a):find("on cuda:0 managed", 1, true))
    local m = cd.compile([[extern "C" __global__ void inc(float *x, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] += i; }]], { device = "cuda:0" })
    a:prefetch("cuda:0")
    m.inc({ dim = #a }, a, #a)
    assert.are.equal(1023, a[1024])   -- read in place, after the device is idle
    a[1] = 42                         -- written in place
    a:advise("read_mostly"):advise("preferred_location", "cuda:0"):advise("accessed_by", "cpu")
    a:advise("unset_read_mostly"):advise("unset_preferred_location"):advise("unset_accessed_by", "cpu")
    a:prefetch("cpu", { stream = cd.stream("cuda:0") })
    m.inc({ dim = #a }, a, #a)
    assert.are.equal(42, a[1])
    assert.are.equal(2046, a[1024])
    local b = cd.from_dlpack(a)
    assert.is_true(b.managed)
    assert.are.equal(a.ptr, b.ptr)
    assert.are.equal(2046, b:totable()[1024])
  end)
end)
