-- The sandbox (cudadev_options.sandbox, doc/sandbox.md) against a script that has the debug library, issue 14:
-- the state's record out of a script's reach, NVRTC's file reads, protected metatables, the quota counting what
-- allocations hold, the cap on live arrays, and no raw handles in tostring. Each case runs a script in a fresh
-- sandboxed lua_State (cd._sandbox), in this process, so the ASan and valgrind passes see it too.
local helper = require "spec.helper"
local cd = require "cudadev"

-- runs script sandboxed; returns its first result (as a string), or raises the script's error
local function sandboxed(script, opts)
  local ok, res = cd._sandbox(script, opts)
  if not ok then error(res, 0) end
  return res
end

-- script must fail with exactly `expected` (without the "sandboxed:N: " position)
local function refused(script, expected, opts)
  local ok, res = cd._sandbox(script, opts)
  assert(not ok, "expected a refusal, the script returned " .. tostring(res))
  assert.are.equal(expected, (tostring(res):gsub("^sandboxed:%d+: ", "")))
end

-- NVRTC compiles here for sm_90 (no GPU needed); the refusals need no NVRTC, the compiles that pass do
local nvrtc = pcall(cd.compile, 'extern "C" __global__ void k(float *x) { x[0] = 1; }', { arch = "sm_90" })
local function nvrtc_it(name, fn)
  if not nvrtc then return pending(name .. " (NVRTC is not available)") end
  return it(name, fn)
end

local RAW = "raw addresses are not available in this sandbox"

-- the registry's keys whose value is cudadev's anchor of the state record (its metatable is protected)
local FIND_ANCHOR = [[
  local reg = debug.getregistry()
  local function anchors()
    local keys = {}
    for k, v in pairs(reg) do
      if type(v) == "userdata" and getmetatable(v) == "cudadev.StateAnchor" then keys[#keys + 1] = k end
    end
    return keys
  end
]]

describe("the sandbox's record of the state", function()
  it("is found by a script with the debug library (the test's premise)", function()
    assert.are.equal("1", sandboxed(FIND_ANCHOR .. "return #anchors()"))
  end)

  it("stays sandboxed when a script removes the record from the registry", function()
    refused(FIND_ANCHOR .. [[
      for _, k in ipairs(anchors()) do reg[k] = nil end
      collectgarbage(); collectgarbage()
      return cd.stream('cpu').handle]], RAW)
  end)

  it("puts the record back into the registry once the collector finds it removed", function()
    assert.are.equal("1 true", sandboxed(FIND_ANCHOR .. [[
      local k = anchors()[1]
      reg[k] = nil
      collectgarbage(); collectgarbage()
      return #anchors() .. " " .. tostring(reg[k] ~= nil)]]))
  end)

  it("keeps the sandbox and its quota when a script puts another value in the record's place", function()
    local script = FIND_ANCHOR .. [[
      for _, k in ipairs(anchors()) do reg[k] = %s end
      local ok, e = pcall(cd.empty, 1 << 20)
      assert(not ok and e:find('device memory quota of 64.0 KiB exceeded', 1, true), e)
      return cd.stream('cpu').handle]]
    refused(script:format("cd.zeros(1)"), RAW, { memory_quota = 64 * 1024 })
    refused(script:format("{}"), RAW, { memory_quota = 64 * 1024 })
    refused(script:format("io.stdout"), RAW, { memory_quota = 64 * 1024 })
  end)

  it("releases nothing when a script calls the record's finalizer itself", function()
    refused(FIND_ANCHOR .. [[
      local k1 = anchors()[1]
      local a = reg[k1]
      local gc = debug.getmetatable(a).__gc
      gc(a); gc(cd.zeros(1)); gc(io.stdout); pcall(gc)
      local keep = cd.zeros(100)
      keep:fill(1)
      assert(keep[100] == 1)
      return cd.stream('cpu').handle]], RAW)
  end)

  it("keeps working when a script empties cudadev's tables in the registry", function()
    assert.are.equal("Stream(cpu default) cpu 1.0", sandboxed([[
      local reg = debug.getregistry()
      local s = cd.stream('cpu')
      cd.set_stream(s)
      reg['cudadev.current_streams'] = nil
      reg['cudadev.device_values'] = nil
      reg['cudadev.launch_keys'] = nil
      collectgarbage(); collectgarbage()
      local a = cd.zeros(3)
      a:fill(1)
      return tostring(cd.get_stream('cpu')) .. ' ' .. cd.device('cpu').alias .. ' ' .. a[3] ]]))
  end)

  it("is refused to a sandboxed script: _sandbox cannot start an unsandboxed state", function()
    refused("return cd._sandbox('return 1')", "_sandbox is not available in this sandbox")
  end)
end)

describe("the metatables of a sandboxed state", function()
  it("answer getmetatable with the type's name, for every type a script can hold", function()
    assert.are.equal("cudadev.Array cudadev.Device cudadev.Stream cudadev.Event cudadev.LaunchConfig cudadev.Scope",
      sandboxed([[
      local vals = {cd.zeros(1), cd.device('cpu'), cd.stream('cpu'), cd.event('cpu'), cd.launch_config{grid = 1, block = 1},
                    cd.scope('cpu')}
      local names = {}
      for i = 1, #vals do names[i] = tostring(getmetatable(vals[i])) end
      return table.concat(names, ' ')]]))
  end)

  it("cannot be changed: getmetatable(a).__gc = nil fails", function()
    refused("getmetatable(cd.zeros(4)).__gc = nil", "attempt to index a string value")
    refused("local mt = getmetatable(cd.stream('cpu')); mt.__close = nil", "attempt to index a string value (local 'mt')")
  end)

  nvrtc_it("protect Module and Error values too", function()
    assert.are.equal("cudadev.Module cudadev.Error cannot change a protected metatable", sandboxed([[
      local m = cd.compile('extern "C" __global__ void k(float *x) { x[0] = 1; }', {arch = 'sm_90'})
      local _, err = pcall(cd.compile, 'this is not C', {arch = 'sm_90'})
      local ok, why = pcall(setmetatable, err, nil)
      return tostring(getmetatable(m)) .. ' ' .. tostring(getmetatable(err)) .. ' ' .. why]]))
  end)

  it("stay readable outside a sandbox", function()
    assert.are.equal("table", type(getmetatable(cd.zeros(1))))
  end)
end)

describe("tostring in a sandbox", function()
  it("shows no raw handle of a Stream, nor of the Stream of a LaunchConfig", function()
    assert.are.equal("Stream(cpu priority 0)|Stream(cpu default)|LaunchConfig(grid=1, block=1, " ..
      "stream=Stream(cpu priority 0))", sandboxed([[
      local s = cd.stream('cpu')
      return tostring(s) .. '|' .. tostring(cd.get_stream('cpu')) .. '|' ..
        tostring(cd.launch_config{grid = 1, block = 1, stream = s})]]))
    assert.truthy(tostring(cd.stream("cpu")):find("0x", 1, true))   -- outside a sandbox, it does
  end)

  it("shows no address of a value without a __tostring of its own (a device scope)", function()
    assert.are.equal("cudadev.Scope", sandboxed("return tostring(cd.scope('cpu'))"))
  end)
end)

describe("the limits of a sandboxed state", function()
  it("count what an allocation holds: whole pages on the cpu device", function()
    refused([[
      local keep = {}
      for i = 1, 16 do keep[i] = cd.empty(1, 'u8', {device = 'cpu'}) end
      keep[17] = cd.empty(1, 'u8', {device = 'cpu'})]],
      "device memory quota of 64.0 KiB exceeded on cpu (requested 4.0 KiB, in use 64.0 KiB)",
      { memory_quota = 64 * 1024 })
  end)

  helper.gpu_it("count device memory in the block cache's 512-byte classes on a GPU", function()
    refused([[
      local keep = {}
      for i = 1, 8 do keep[i] = cd.empty(1, 'u8', {device = 'cuda:0'}) end
      keep[9] = cd.empty(1, 'u8', {device = 'cuda:0'})]],
      "device memory quota of 4.0 KiB exceeded on cuda:0 (requested 512 B, in use 4.0 KiB)",
      { memory_quota = 4096 })
  end)

  helper.gpu_it("let a sandboxed script compile with the toolkit's headers and launch on a GPU", function()
    assert.are.equal("Stream(cuda:0 priority 0) 3.0", sandboxed([[
      local s = cd.stream('cuda:0')
      local m = cd.compile('#include <cuda_fp16.h>\nextern "C" __global__ void k(float *x) { x[0] = __half2float(__float2half(3.0f)); }',
        {device = 'cuda:0'})
      local a = cd.zeros(1, 'f32', {device = 'cuda:0'})
      m.k({grid = 1, block = 1, stream = s}, a)
      s:synchronize()
      return tostring(s) .. ' ' .. a[1] ]]))
  end)

  it("cap the live arrays of a state, views not counted, and give the count back on free and collection", function()
    assert.are.equal("too many live arrays in this state (the limit is 100; free some, or raise max_arrays in " ..
      "cudadev_options)|ok", sandboxed([[
      local keep = {}
      for i = 1, 99 do keep[i] = cd.zeros(i % 3) end
      local v = keep[98]:reshape({2, 1})   -- a view: not an allocation
      keep[100] = cd.zeros(1)
      local ok, e = pcall(cd.zeros, 1)
      keep[1]:free()
      keep[1] = cd.zeros(1)             -- a free gives one back
      keep[2] = nil
      keep[2] = cd.zeros(1)             -- so does the collector
      return e:gsub('^[^:]*:%d+: ', '') .. (ok and '|allowed' or '|ok')]], { max_arrays = 100 }))
  end)

  it("leave room for many arrays by default (max_arrays 0: 1 << 20; reaching it takes a million arrays)", function()
    assert.are.equal("ok", sandboxed("local t = {} for i = 1, 2000 do t[i] = cd.empty(0) end return 'ok'"))
  end)
end)

describe("the includes of a sandboxed compile", function()
  local function compile(src, opts)
    return ("return cd.compile(%q, %s)"):format(src, opts or "{arch = 'sm_90'}")
  end
  local K = '\nextern "C" __global__ void k(float *x) { x[0] = 1; }\n'

  it("refuse an absolute path, before NVRTC opens it", function()
    refused(compile('#include "/etc/hostname"' .. K),
      "bad argument #1 to 'compile' (#include \"/etc/hostname\" is not available in this sandbox: an absolute path)")
  end)

  it("refuse a path with '..'", function()
    refused(compile('#include <cuda/../../../etc/hostname>' .. K),
      "bad argument #1 to 'compile' (#include <cuda/../../../etc/hostname> is not available in this sandbox: a path " ..
      "out of its directory ('..'))")
  end)

  it("refuse a file name written as a macro", function()
    refused(compile('#define F "/etc/hostname"\n#include F' .. K),
      "bad argument #1 to 'compile' (#include F is not available in this sandbox: write the file name in quotes or " ..
      "<>, not a macro)")
  end)

  it("find a directive however it is spelled: comments, line splices, digraphs, trigraphs, include_next", function()
    local want = "bad argument #1 to 'compile' (#include \"/etc/hostname\" is not available in this sandbox: an " ..
      "absolute path)"
    refused(compile('# /* c */ in\\\nclude /* c */ "/etc/hostname"' .. K), want)
    refused(compile('%:include "/etc/hostname"' .. K), want)
    refused(compile('??=include "/etc/hostname"' .. K), want)
    refused(compile('int a; \\  \n#include "/etc/hostname"' .. K), want)
    refused(compile('// #include "/etc/hostname"' .. K), want)   -- even commented out
    refused(compile('#include_next "/etc/hostname"' .. K), (want:gsub("#include", "#include_next")))
    refused(compile('#if __has_include(</etc/shadow>)\n#endif' .. K),
      "bad argument #1 to 'compile' (__has_include(</etc/shadow>) is not available in this sandbox: an absolute path)")
  end)

  it("check the given headers too, naming the header", function()
    refused(compile('#include "a.h"' .. K, "{arch = 'sm_90', headers = {['a.h'] = '#include \"../b.h\"'}}"),
      "bad option 'headers' to 'compile' (header 'a.h': #include \"../b.h\" is not available in this sandbox: a " ..
      "path out of its directory ('..'))")
  end)

  it("refuse include_paths and -I options outside the allowed directories", function()
    refused(compile(K, "{arch = 'sm_90', include_paths = {'/etc'}}"),
      "bad option 'include_paths' to 'compile' (item 1: '/etc' is outside the include directories of this sandbox)")
    refused(compile(K, "{arch = 'sm_90', include_paths = {'/usr/local/cuda/include/../../../etc'}}"),
      "bad option 'include_paths' to 'compile' (item 1: '/usr/local/cuda/include/../../../etc' is outside the " ..
      "include directories of this sandbox)")
    refused(compile(K, "{arch = 'sm_90', options = {'-I/etc'}}"),
      "bad option 'options' to 'compile' (include path '/etc' is outside the include directories of this sandbox)")
  end)

  it("refuse compile options that name files", function()
    for _, o in ipairs({ "--time=/tmp/t.csv", "--pre-include=/etc/hostname", "-include=/etc/hostname",
                         "--create-pch=/tmp/x.pch", "--pch", "--fdevice-time-trace=/tmp/t.json",
                         "--jobserver-auth=3,4", "-Xptxas=-v" }) do
      refused(compile(K, ("{arch = 'sm_90', options = {%q}}"):format(o)),
        ("bad option 'options' to 'compile' (compile option '%s' is not available in this sandbox)"):format(o))
    end
  end)

  describe("in a directory the host allows", function()
    local dir
    before_each(function()
      dir = os.tmpname()
      os.remove(dir)
      assert(os.execute("mkdir -p " .. helper.shell_quote(dir .. "/sub")))
      local f = assert(io.open(dir .. "/ok.h", "w"))
      f:write("#define FROM_OK 1\n")
      f:close()
      f = assert(io.open(dir .. "/secret.txt", "w"))
      f:write("SECRET_TOKEN_4711\n")
      f:close()
      os.execute("mkfifo " .. helper.shell_quote(dir .. "/fifo.h"))
      os.execute("ln -s /etc/hostname " .. helper.shell_quote(dir .. "/link.h"))
    end)
    after_each(function() os.execute("rm -rf " .. helper.shell_quote(dir)) end)

    it("refuse a FIFO, a directory, and a link that leads out (NVRTC would block on a FIFO)", function()
      local opts = ("{arch = 'sm_90', include_paths = {%q}}"):format(dir)
      refused(compile('#include "fifo.h"' .. K, opts),
        ("bad argument #1 to 'compile' (#include \"fifo.h\" is not available in this sandbox: '%s/fifo.h' is not a " ..
         "regular file)"):format(dir), { include_dirs = { dir } })
      refused(compile('#include "sub"' .. K, opts),
        ("bad argument #1 to 'compile' (#include \"sub\" is not available in this sandbox: '%s/sub' is not a " ..
         "regular file)"):format(dir), { include_dirs = { dir } })
      local host = io.open("/etc/hostname") and "/etc/hostname"
      if host then
        local real = io.popen("realpath /etc/hostname"):read("l")
        refused(compile('#include "link.h"' .. K, opts),
          ("bad argument #1 to 'compile' (#include \"link.h\" is not available in this sandbox: '%s' is outside its " ..
           "include directories)"):format(real), { include_dirs = { dir } })
      end
    end)

    it("refuse the directory unless the host allows it", function()
      refused(compile('#include "ok.h"' .. K, ("{arch = 'sm_90', include_paths = {%q}}"):format(dir)),
        ("bad option 'include_paths' to 'compile' (item 1: '%s' is outside the include directories of this " ..
         "sandbox)"):format(dir))
    end)

    nvrtc_it("compile what the host allows", function()
      -- an arch compile is loaded on the default device when that is a GPU
      local def = cd.get_device()
      local loaded = def.is_cuda and ("Module(%s sm_90 cubin: k)"):format(def.alias) or "Module(not loaded sm_90 cubin: k)"
      assert.are.equal(loaded,
        sandboxed(compile('#include "ok.h"\n#if FROM_OK' .. K .. '#endif', ("{arch = 'sm_90', include_paths = {%q}}")
          :format(dir)), { include_dirs = { dir } }))
      assert.are.equal(loaded,
        sandboxed(compile('#include <cuda_fp16.h>' .. K)))   -- the toolkit's headers, by default
    end)

    nvrtc_it("do not read a file next to the source's name (the content of a private file stays out of the log)", function()
      local ok, res = cd._sandbox(compile('#include "secret.txt"' .. K, ("{arch = 'sm_90', name = %q}")
        :format(dir .. "/k.cu")))
      assert.is_false(ok)
      assert.truthy(res:find('cannot open source file "secret.txt"', 1, true), res)
      assert.falsy(res:find("SECRET_TOKEN_4711", 1, true), res)
    end)
  end)
end)

-- NOTE [faults without addresses] (src/cpu_run.c): a host compiles its kernels, then runs scripts sandboxed
-- (the prelude runs before cudadev_set_sandbox); a fault's text names a parameter and an offset, no address.
describe("the error texts of a sandboxed state", function()
  local PRELUDE = [[m = cd.compile('extern "C" __global__ void st(int *x, long long i) { x[i] = -1; }\n'
    .. 'extern "C" __global__ void st2(int *a, int *x, long long i) { x[i] = a[0]; }', { device = "cpu" })]]

  -- the text of the error of `call` (Lua, with b: 1024 i32 on the cpu device), which must raise one
  local function fault(call)
    local text = sandboxed(([[
local b = cd.full(1024, 8, "i32", { device = "cpu" })
local ok, err = pcall(function() %s end)
assert(not ok, "no fault")
return tostring(err)
]]):format(call), { prelude = PRELUDE })
    assert.is_nil(text:find("0x", 1, true), text)
    return (text:gsub("^sandboxed:%d+: ", ""))
  end

  local SEGV = "cpu.launch: CUDA_ERROR_ILLEGAL_ADDRESS: kernel '%s' crashed on the cpu device: SIGSEGV (segmentation "
    .. "fault) %s (block (0,0,0), thread (0,0,0))"

  helper.worker_it("name the parameter and the offset of a fault before or past an array, never an address",
    function()
      assert.are.equal(SEGV:format("st", "at byte offset -4 of parameter 'x' (4096 bytes long)"),
        fault("m.st({ dim = 1 }, b, -1)"))
      assert.are.equal(SEGV:format("st", "at byte offset 4496 of parameter 'x' (4096 bytes long)"),
        fault("m.st({ dim = 1 }, b, 1124)"))
      -- a view: the parameter that points closest below the fault, with its own offset and length
      assert.are.equal(SEGV:format("st2", "at byte offset 2400 of parameter 'x' (2048 bytes long)"),
        fault("m.st2({ dim = 1 }, b, b:slice(513, 1024), 600)"))
      assert.are.equal(SEGV:format("st", "away from every array"), fault("m.st({ dim = 1 }, b, 1 << 40)"))
      -- outside a sandbox the same fault still gives the addresses
      local m = cd.compile('extern "C" __global__ void st(int *x, long long i) { x[i] = -1; }', { device = "cpu" })
      local ok, err = pcall(m.st, { dim = 1 }, cd.full(1024, 8, "i32", { device = "cpu" }), -1)
      assert.is_false(ok)
      assert.is_truthy(err.message:find(" at address 0x%x+, 4 bytes before the array at 0x%x+ %(4096 bytes%)"),
        err.message)
    end)

  it("name a value by its type where its text would be its address (a table, a function)", function()
    for _, c in ipairs({
      { "cd.launch_config{ [{}] = 1 }", "bad argument #1 to 'launch_config' (unknown key 'table' (expected grid, block, "
        .. "dim, shared, stream, device, cooperative, timeout))" },
      { "local a = cd.zeros(4, 'i32', { device = 'cpu' }) a[{}] = 1", "bad argument #2 to 'newindex' (a table is not "
        .. "an index (use a number, an integer or bool Array, or a:slice(i, j)))" },
      { "local a = cd.zeros(4, 'i32', { device = 'cpu' }) return a[print]",
        "bad argument #2 to 'index' (index function out of range 1..4)" },
      { "cd.zeros({ {} }, 'i32', { device = 'cpu' })",
        "bad argument #1 to 'zeros' (dimension 1 must be a non-negative integer, got table)" },
      { "cd.compile('x', { arch = {} })",
        "bad option 'arch' to 'compile' (expected \"sm_XY\" or an integer such as 90, got table)" },
      { "cd.elementwise('float32 x', 'float32 y', 'y = x', { [{}] = 1 })",
        "bad option 'table' to 'elementwise' (unknown option)" },
    }) do
      local ok, err = cd._sandbox(c[1])
      assert.is_false(ok)
      assert.are.equal(c[2], (err:gsub("^sandboxed:%d+: ", "")))
    end
  end)

  it("of cd._sandbox's prelude: a string, run before the sandbox is on", function()
    assert.are.equal("true\tfalse", sandboxed("return tostring(pre_ok) .. '\\t' .. tostring(pcall(cd.compile, "
      .. "'extern \"C\" __global__ void k() {}', { device = 'cpu' }))",
      { prelude = "pre_ok = pcall(cd.compile, 'extern \"C\" __global__ void k() {}', { device = 'cpu' })" }))
    helper.assert_error_matches(function() cd._sandbox("return 1", { prelude = {} }) end,
      "bad option 'prelude' to '_sandbox' (string expected)")
    assert.are.same({ false, "prelude:1: boom" }, { cd._sandbox("return 1", { prelude = "error('boom')" }) })
  end)
end)
