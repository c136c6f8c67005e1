-- Fault containment (issue #7, API.md "Errors and recovery"). On the cpu device a kernel that faults
-- (a segmentation fault, a failed assert, __trap, a stack overflow, abort, exit) is an error of that launch
-- and the process lives on: these run everywhere. On a GPU a faulting kernel (a store to a huge offset,
-- __trap(), a misaligned access) poisons the device: the fault is a sticky cudadev.Error, every later use of
-- the device raises the same clear error, other devices keep working, and dev:reset() makes every object
-- of before stale and new work succeed. Each GPU fault runs in a child process of its own (gpu_it).
local helper = require "spec.helper"
local cd = require "cudadev"

local expect_error = helper.assert_error_matches

-- Runs `code` in a child lua5.4 that loads the same cudadev as this process (with `cd` set), with the
-- environment assignments `env` ("" for none); returns its output (stdout and stderr) and how it ended.
local function child(code, env)
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(("package.path = %q\npackage.cpath = %q\nlocal cd = require 'cudadev'\n"):format(package.path, package.cpath),
    code, "\n")
  f:close()
  local p = assert(io.popen(("env %s lua5.4 %s 2>&1"):format(env or "", path), "r"))
  local out = p:read("a")
  local _, how, status = p:close()
  os.remove(path)
  return out, how .. " " .. tostring(status), path
end

-- The lines "KEY value" a child printed, as a table.
local function fields(out)
  local t = {}
  for k, v in out:gmatch("([%w_]+)=([^\n]*)") do t[k] = v end
  return t
end

-- ------------------------------------------------------------------------------------------------ cpu

local CPU_SRC = [[
extern "C" __global__ void store_far(int *p, long long off) { volatile int *q = p; q[off] = 1; }
extern "C" __global__ void store_null(int *p) { *(volatile int *)0 = 1; }
extern "C" __global__ void checks(int *p, int n)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = i + 1;
  assert(i != 5);
}
extern "C" __global__ void traps(int *p) { if (threadIdx.x == 3) __trap(); }
extern "C" __global__ void divides(int *p) { volatile int z = p[0]; p[1] = 7 / z; }
extern "C" __global__ void aborts(int *p) { abort(); }
extern "C" __global__ void exits(int *p) { exit(0); }
extern "C" __global__ void recurses(int *p, int n)
{
  volatile char b[4096];
  b[n & 4095] = 1;
  if (n > 0) recurses(p, n - 1);
  p[0] = b[0];
}
extern "C" __global__ void fill(int *p, int n, int v)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = v;
}
]]

-- With CUDADEV_CPU_FORK=0 launches run in this process, where a fault ends it (the valgrind run sets it):
-- the faults that need a launch process of their own are pending then.
local fork_it = os.getenv("CUDADEV_CPU_FORK") == "0"
  and function(name) return pending(name .. " (CUDADEV_CPU_FORK=0: a fault would end this process)") end or it

describe("a faulting kernel on the cpu device", function()
  local m, a
  before_each(function()
    m = m or cd.compile(CPU_SRC, { device = "cpu", name = "faults.cu" })
    a = cd.zeros(16, "i32", { device = "cpu" })
  end)
  teardown(function() m, a = nil, nil end)   -- the suite checks that no object outlives its file

  -- the launch's cudadev.Error; checks what every contained fault has in common
  local function fault(k, cfg, ...)
    local ok, err = pcall(m[k], cfg, ...)
    assert.is_false(ok, "the launch returned normally")
    assert.are.equal("Error", cd.type(err))
    assert.are.equal("cpu.launch", err.api)
    assert.is_false(err.sticky)
    assert.are.equal("cpu", err.device)
    return err
  end

  -- after each fault: the process and the device are fine, and work goes on
  local function still_works()
    assert.is_false(cd.device("cpu").is_sticky)
    local b = cd.zeros(8, "i32", { device = "cpu" })
    m.fill({ dim = 8 }, b, 8, 42)
    assert.are.same({ 42, 42, 42, 42, 42, 42, 42, 42 }, b:totable())
    cd.synchronize_device("cpu")
    cd.stream("cpu"):synchronize()
  end

  -- the store goes to 0x1000, below the lowest address Linux maps (vm.mmap_min_addr): 1 GiB past the array was
  -- unmapped alone, but in the whole suite another mapping sat there and the store landed in it
  fork_it("a store to an unmapped address is CUDA_ERROR_ILLEGAL_ADDRESS, and the process lives", function()
    local err = fault("store_far", { dim = 1 }, a, (0x1000 - a.ptr) // 4)
    assert.are.same({ "CUDA_ERROR_ILLEGAL_ADDRESS", 700 }, { err.name, err.code })
    assert.are.equal("kernel 'store_far' crashed on the cpu device: SIGSEGV (segmentation fault) at address 0x1000 "
      .. "(block (0,0,0), thread (0,0,0))", err.message)
    still_works()
  end)

  fork_it("a store through a null pointer names the address 0x0", function()
    local err = fault("store_null", { dim = 1 }, a)
    assert.are.equal("kernel 'store_null' crashed on the cpu device: SIGSEGV (segmentation fault) at address 0x0 "
      .. "(block (0,0,0), thread (0,0,0))", err.message)
    still_works()
  end)

  -- every block's thread 7 stores through a null pointer at once: the first fault is written whole, whichever
  -- block it was, before the child ends (was: a second thread's fault under SA_RESETHAND ended the child before
  -- the first had written its address and thread)
  fork_it("threads of many blocks that fault at once: one of them is named, with its address", function()
    local k = cd.compile('extern "C" __global__ void all_fault(int *p) {\n'
      .. '  if (threadIdx.x == 7) *(volatile int *)0 = 1;\n}', { device = "cpu" }).all_fault
    for _ = 1, 30 do
      local ok, err = pcall(k, { grid = 64, block = 32 }, a)
      assert.is_false(ok)
      assert.is_truthy(err.message:match("^kernel 'all_fault' crashed on the cpu device: SIGSEGV %(segmentation "
        .. "fault%) at address 0x0 %(block %(%d+,0,0%), thread %(7,0,0%)%)$"), err.message)
    end
    still_works()
  end)

  fork_it("an integer given for a pointer that is no address faults like a bad pointer", function()
    local err = fault("fill", { dim = 4 }, 16, 4, 1)
    assert.are.same({ "CUDA_ERROR_ILLEGAL_ADDRESS", 700 }, { err.name, err.code })
    still_works()
  end)

  it("a failed assert is CUDA_ERROR_ASSERT with the condition, its line and the thread", function()
    local err = fault("checks", { grid = 2, block = 4 }, a, 16)
    assert.are.same({ "CUDA_ERROR_ASSERT", 710 }, { err.name, err.code })
    assert.are.equal("kernel 'checks' failed an assertion: faults.cu:7: i != 5 (block (1,0,0), thread (1,0,0))",
      err.message)
    -- what threads wrote before the launch ended stays written: those of the failing block before it, and its
    -- own store before its assert (block 0 runs on another worker thread and may not have started: not checked)
    assert.are.same({ 5, 6 }, { a[5], a[6] })
    still_works()
  end)

  it("__trap() is CUDA_ERROR_LAUNCH_FAILED naming the thread", function()
    local err = fault("traps", { grid = 1, block = 8 }, a)
    assert.are.same({ "CUDA_ERROR_LAUNCH_FAILED", 719 }, { err.name, err.code })
    assert.are.equal("kernel 'traps' trapped: faults.cu:9: __trap() called (block (0,0,0), thread (3,0,0))", err.message)
    still_works()
  end)

  fork_it("an integer division by zero is SIGFPE", function()
    local err = fault("divides", { dim = 1 }, a)
    assert.are.equal("kernel 'divides' crashed on the cpu device: SIGFPE (arithmetic exception, e.g. an integer "
      .. "division by zero) (block (0,0,0), thread (0,0,0))", err.message)
    still_works()
  end)

  fork_it("abort() and exit() end only the launch", function()
    assert.are.equal("kernel 'aborts' crashed on the cpu device: SIGABRT (aborted) (block (0,0,0), thread (0,0,0))",
      fault("aborts", { dim = 1 }, a).message)
    assert.are.equal("kernel 'exits' ended the launch process with exit status 0 (exit() called from a kernel?)",
      fault("exits", { dim = 1 }, a).message)
    still_works()
  end)

  fork_it("a stack overflow says so", function()
    local err = fault("recurses", { dim = 1 }, a, 100000)
    assert.are.equal("CUDA_ERROR_ILLEGAL_ADDRESS", err.name)
    assert.is_truthy(err.message:match("^kernel 'recurses' crashed on the cpu device: stack overflow %(a thread used "
      .. "more than %d+ KiB of stack%) %(block %(0,0,0%), thread %(0,0,0%)%)$"), err.message)
    still_works()
  end)

  fork_it("many faults in a row, on a stream of its own, leave everything usable", function()
    local s = cd.stream("cpu")
    for _ = 1, 20 do
      assert.is_false(pcall(m.store_null, { dim = 1, stream = s }, a))
      assert.is_false(pcall(m.checks, { dim = 8, stream = s }, a, 8))
    end
    s:synchronize()
    local e = cd.event("cpu"):record(s)
    e:synchronize()
    m.fill({ dim = 16, stream = s }, a, 16, 3)
    s:synchronize()
    assert.are.equal(3, a[16])
    still_works()
  end)

  it("with CUDADEV_CPU_FORK=0 (in-process launches), an assert and __trap are still errors", function()
    local out, how = child(([[
      local m = cd.compile(%q, { device = "cpu", name = "faults.cu" })
      local a = cd.zeros(16, "i32", { device = "cpu" })
      local ok1, e1 = pcall(m.checks, { grid = 2, block = 4 }, a, 16)
      local ok2, e2 = pcall(m.traps, { grid = 1, block = 8 }, a)
      m.fill({ dim = 16 }, a, 16, 9)
      print("assert=" .. tostring(ok1) .. " " .. e1.name .. " " .. e1.message)
      print("trap=" .. tostring(ok2) .. " " .. e2.name .. " " .. e2.message)
      print("after=" .. a[16])
    ]]):format(CPU_SRC), "CUDADEV_CPU_FORK=0")
    assert.are.equal("exit 0", how, out)
    local f = fields(out)
    assert.are.equal("false CUDA_ERROR_ASSERT kernel 'checks' failed an assertion: faults.cu:7: i != 5 "
      .. "(block (1,0,0), thread (1,0,0))", f.assert)
    assert.are.equal("false CUDA_ERROR_LAUNCH_FAILED kernel 'traps' trapped: faults.cu:9: __trap() called "
      .. "(block (0,0,0), thread (3,0,0))", f.trap)
    assert.are.equal("9", f.after)
  end)
end)

-- ------------------------------------------------------------------------------------------------ GPU

local GPU_SRC = [[
extern "C" __global__ void store_far(int *p)
{
  volatile int *q = p;
  q[1ull << 40] = 1;                       // 4 TiB past the array
}
extern "C" __global__ void traps(int *p)
{
  if (threadIdx.x == 0) __trap();
}
extern "C" __global__ void misaligned(int *p)
{
  volatile int *q = (volatile int *)((char *)p + 1);
  *q = 1;
}
extern "C" __global__ void fill(int *p, int n, int v)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = v;
}
]]

-- The child: faults cuda:0 with `kernel`, then reports (one "key=value" per line): the fault, the next use
-- of the device, the cpu device, the objects of before after dev:reset(), and new work.
local GPU_CHILD = [[
local kernel = %q
local dev = cd.device("cuda:0")
local m = cd.compile(%q, { device = "cuda:0", name = "faults.cu" })
local a = cd.full(16, 5, "i32", { device = "cuda:0" })
local s = cd.stream("cuda:0")
local e = cd.event("cuda:0")
local kf = m.fill
local host = cd.full(4, 6, "i32", { device = "cpu" })
local function text(err) return (type(err) == "string" and err or tostring(err)):gsub("\n", " ") end

-- the fault surfaces at the launch or at the synchronize after it
local ok, err = pcall(function() m[kernel]({ dim = 32 }, a); dev:synchronize() end)
print("fault_ok=" .. tostring(ok))
print("fault_type=" .. tostring(cd.type(err)))
print("fault_name=" .. tostring(type(err) == "table" and err.name))
print("fault_api=" .. tostring(type(err) == "table" and err.api))
print("fault_message=" .. tostring(type(err) == "table" and err.message))
print("fault_sticky=" .. tostring(type(err) == "table" and err.sticky))
print("fault_device=" .. tostring(type(err) == "table" and err.device))
print("is_sticky=" .. tostring(dev.is_sticky))

-- every later use of the device: the same error, saying it is sticky and where it first surfaced
for i, use in ipairs({
  function() return cd.zeros(4, { device = "cuda:0" }) end,
  function() return a[1] end,
  function() s:synchronize() end,
  function() m.fill({ dim = 16 }, a, 16, 1) end,
  function() cd.synchronize() end,
}) do
  local ok2, err2 = pcall(use)
  print(("again%%d_ok=%%s"):format(i, tostring(ok2)))
  print(("again%%d_name=%%s"):format(i, tostring(type(err2) == "table" and err2.name)))
  print(("again%%d_sticky=%%s"):format(i, tostring(type(err2) == "table" and err2.sticky)))
  print(("again%%d_message=%%s"):format(i, type(err2) == "table" and err2.message or text(err2)))
end

-- the cpu device still works, with arrays of before and new kernels
local cm = cd.compile(%q, { device = "cpu" })
local c = cd.zeros(4, "i32", { device = "cpu" })
cm.fill({ dim = 4 }, c, 4, 8)
print("cpu_old=" .. table.concat(host:totable(), ","))
print("cpu_new=" .. table.concat(c:totable(), ","))

-- reset: the driver keeps the fault (CUDA: only a new process recovers); reset says so, the cpu device works on
local okr, errr = pcall(dev.reset, dev)
print("reset_ok=" .. tostring(okr))
print("reset_error=" .. (okr and "" or text(errr)))
print("is_sticky_after=" .. tostring(dev.is_sticky))
local ok4, err4 = pcall(function() return cd.zeros(4, { device = "cuda:0" }) end)
print("after_reset_ok=" .. tostring(ok4))
cm.fill({ dim = 4 }, c, 4, 5)
print("cpu_after_reset=" .. table.concat(c:totable(), ","))
print("done=yes")
]]

-- A reset of a healthy GPU: every object of before is stale, and new work succeeds (in a child: the reset
-- destroys the context this suite's other GPU objects live in).
local GPU_RESET_CHILD = [[
local dev = cd.device("cuda:0")
local m = cd.compile(%q, { device = "cuda:0", name = "faults.cu" })
local a, s, e, kf = cd.full(16, 5, "i32", { device = "cuda:0" }), cd.stream("cuda:0"), cd.event("cuda:0"), m.fill
kf({ dim = 16 }, a, 16, 6)
dev:synchronize()
print("before=" .. a[16])
dev:reset()
local function text(err) return (type(err) == "string" and err or tostring(err)):gsub("^.-:%%d+: ", "") end
for _, case in ipairs({
  { "array", function() return a[1] end },
  { "stream", function() s:synchronize() end },
  { "event", function() e:record() end },
  { "module", function() return m.fill end },
  { "kernel", function() kf({ dim = 4 }, cd.zeros(4, "i32", { device = "cuda:0" }), 4, 1) end },
}) do
  local ok, err = pcall(case[2])
  print(("stale_%%s=%%s"):format(case[1], ok and "no error" or text(err)))
end
local b = cd.full(4, 7, "i32", { device = "cuda:0" })
print("new_array=" .. table.concat(b:totable(), ","))
local m2 = cd.compile(%q, { device = "cuda:0" })
m2.fill({ dim = 4 }, b, 4, 9)
print("new_kernel=" .. table.concat(b:totable(), ","))
dev:synchronize()
print("done=yes")
]]

describe("dev:reset() of a healthy GPU", function()
  helper.gpu_it("makes every object of before stale, and new work succeeds", function()
    local out, how = child(GPU_RESET_CHILD:format(GPU_SRC, GPU_SRC))
    assert.are.equal("exit 0", how, out)
    local f = fields(out)
    assert.are.equal("6", f.before, out)
    assert.are.equal("bad argument #1 to 'index' (stale Array: device was reset)", f.stale_array, out)
    assert.are.equal("bad argument #1 to 'synchronize' (stale Stream: device was reset)", f.stale_stream, out)
    assert.are.equal("bad argument #1 to 'record' (stale Event: device was reset)", f.stale_event, out)
    assert.are.equal("bad argument #1 to 'index' (stale Module: device was reset)", f.stale_module, out)
    assert.are.equal("stale Kernel: device was reset", f.stale_kernel, out)
    assert.are.equal("7,7,7,7", f.new_array, out)
    assert.are.equal("9,9,9,9", f.new_kernel, out)
    assert.are.equal("yes", f.done, out)
  end)
end)

describe("a faulting kernel on a GPU", function()
  local function run(kernel)
    local out, how, path = child(GPU_CHILD:format(kernel, GPU_SRC, GPU_SRC))
    assert.are.equal("exit 0", how, out)
    return fields(out), out, path
  end

  local function check(kernel, names)
    local f, out = run(kernel)
    assert.are.equal("false", f.fault_ok, out)
    assert.are.equal("Error", f.fault_type, out)
    assert.is_truthy(names[f.fault_name], "fault " .. tostring(f.fault_name) .. "\n" .. out)
    assert.are.equal("true", f.fault_sticky, out)
    assert.are.equal("cuda:0", f.fault_device, out)
    assert.are.equal("true", f.is_sticky, out)
    for i = 1, 5 do
      assert.are.equal("false", f["again" .. i .. "_ok"], out)
      assert.are.equal(f.fault_name, f["again" .. i .. "_name"], out)
      assert.are.equal("true", f["again" .. i .. "_sticky"], out)
      local msg = f["again" .. i .. "_message"]
      local where, api, text = msg:match("^cuda:0 is unusable after a sticky fault first seen at (.-:%d+) in (%S+): "
        .. "(.*) %(CUDA recovers from it only in a new process%)$")
      assert.is_truthy(where, msg)
      assert.are.equal(f.fault_api, api, msg)
      assert.are.equal(f.fault_message, text, msg)
    end
    assert.are.equal("6,6,6,6", f.cpu_old, out)
    assert.are.equal("8,8,8,8", f.cpu_new, out)
    assert.are.equal("false", f.reset_ok, out)
    assert.is_truthy(f.reset_error:find("cuda:0 cannot be recovered in this process: after the reset the CUDA driver still "
      .. "reports the sticky fault (", 1, true), out)
    assert.is_truthy(f.reset_error:find("start a new process (the cpu device keeps working here)", 1, true), out)
    assert.are.equal("true", f.is_sticky_after, out)
    assert.are.equal("false", f.after_reset_ok, out)
    assert.are.equal("5,5,5,5", f.cpu_after_reset, out)
    assert.are.equal("yes", f.done, out)
  end

  helper.gpu_it("a store 4 TiB past an array: CUDA_ERROR_ILLEGAL_ADDRESS, sticky; reset recovers", function()
    check("store_far", { CUDA_ERROR_ILLEGAL_ADDRESS = true })
  end)

  helper.gpu_it("__trap(): a launch failure, sticky; reset recovers", function()
    -- the driver reports a trap as an unspecified launch failure (some architectures: an illegal instruction)
    check("traps", { CUDA_ERROR_LAUNCH_FAILED = true, CUDA_ERROR_ILLEGAL_INSTRUCTION = true })
  end)

  helper.gpu_it("a misaligned store: CUDA_ERROR_MISALIGNED_ADDRESS, sticky; reset recovers", function()
    check("misaligned", { CUDA_ERROR_MISALIGNED_ADDRESS = true })
  end)
end)

-- ------------------------------------------------------------------------------------------------ memory

describe("memory pressure on a GPU", function()
  -- in a child process: the device's memory is full for a moment, which nothing else in this run should see
  helper.gpu_it("allocating until the device is full is a plain out-of-memory error; freeing makes room again", function()
    local out, how = child([[
local dev = cd.device("cuda:0")
local held, err = {}, nil
for _ = 1, 4096 do                                   -- 256 MiB at a time: 1 TiB at most
  local ok, a = pcall(cd.empty, 1 << 28, "u8", { device = "cuda:0" })
  if not ok then err = a break end
  held[#held + 1] = a
end
print("held=" .. #held)
print("error=" .. tostring(err))
print("is_sticky=" .. tostring(dev.is_sticky))
held = nil
collectgarbage()
collectgarbage()
local n = 0
for _ = 1, 8 do                                      -- 8 GiB again, each array written and read back
  local a = cd.full(1 << 28, n + 1, "u8", { device = "cuda:0" })
  if a[1] == n + 1 and a[#a] == n + 1 then n = n + 1 end
end
print("again=" .. n)
cd.synchronize()
print("done=yes")
]])
    assert.are.equal("exit 0", how, out)
    local f = fields(out)
    local total_gib = cd.device("cuda:0").total_memory / 2^30
    assert.is_true(tonumber(f.held) * 0.25 > total_gib * 0.5, out)      -- most of the memory was taken
    assert.is_truthy(f.error:match("^out of memory on cuda:0 %(requested 256%.0 MiB, free [%d.]+ [KMG]?i?B%)$"), out)
    assert.are.equal("false", f.is_sticky, out)
    assert.are.equal("8", f.again, out)
    assert.are.equal("yes", f.done, out)
  end)

end)
