-- Issue 20 (h20b's part): stream host callbacks (s:add_callback, cd.poll), s:await / e:await, cd.with_device,
-- cd.with_stream and cd.scope across coroutine yields (NOTE [coroutine scopes] in src/async.c), and memory and
-- events shared between processes (a:ipc_handle, cd.open_ipc, e:ipc_handle, cd.open_ipc_event: NOTE [ipc] in
-- src/ipc.c). The cpu cases run everywhere; the GPU cases (helper.gpu_it) spawn a second lua5.4 process for IPC.
local helper = require "spec.helper"
local cd = require "cudadev"

local sh = helper.shell_quote

-- Runs `code` in a child lua5.4 (with this cudadev: this process's package.cpath); `flags` go to lua5.4 (-W: Lua
-- warnings on). Returns what it wrote to stdout and stderr, and whether it exited 0.
local function child(code, flags)
  local path = os.tmpname()
  helper.write_file(path, ("package.cpath = %q\nlocal cd = require 'cudadev'\n"):format(package.cpath) .. code)
  local p = assert(io.popen(("lua5.4 %s %s 2>&1; echo \"exit $?\""):format(flags or "", sh(path))))
  local out = p:read("a")
  p:close()
  os.remove(path)
  local code_ = tonumber(out:match("exit (%d+)\n$"))
  return (out:gsub("exit %d+\n$", "")), code_ == 0
end

-- the error message of f(...) (which must fail), without the "file:line: " position
local function err_of(f, ...)
  local ok, e = pcall(f, ...)
  assert(not ok, "expected an error")
  return (tostring(e):gsub("^[^:\n]*:%d+: ", ""))
end

-- this process's id (what /proc/self names is the process that opens it)
local function my_pid()
  return tonumber(helper.read_file("/proc/self/stat"):match("^(%d+)"))
end

-- the id of a process that has exited
local function dead_pid()
  local p = io.popen("sh -c 'echo $$'")
  local pid = tonumber(p:read("a"))
  p:close()
  return pid
end

local HEX = ("0f"):rep(64)
local UUID = "GPU-00000000-0000-0000-0000-000000000000"
local function array_handle(fields)
  fields = fields or {}
  return table.concat({ "cudadev-ipc", fields.version or "1", fields.kind or "array", fields.pid or "1",
    fields.uuid or UUID, fields.dtype or "float32", fields.shape or "2,3", fields.offset or "0", fields.hex or HEX }, ":")
end

-- ------------------------------------------------------------------------------ NOTE [stream callbacks]

describe("s:add_callback", function()
  it("runs the callbacks in order on the Lua thread at cd.poll, not when they are added", function()
    local s, order = cd.stream("cpu"), {}
    for i = 1, 3 do
      assert.are.equal(s, s:add_callback(function() order[#order + 1] = i end))
    end
    assert.are.same({}, order)   -- the cpu stream's work is done, but nothing runs before a drain point
    assert.are.equal(3, cd.poll())
    assert.are.same({ 1, 2, 3 }, order)
    assert.are.equal(0, cd.poll())
    s:destroy()
  end)

  it("runs them at the calls that synchronize or ask, and at await", function()
    local s, e, ran = cd.stream("cpu"), cd.event("cpu"), 0
    local function add() s:add_callback(function() ran = ran + 1 end) end
    local calls = {
      function() s:synchronize() end, function() s:query() end, function() e:synchronize() end,
      function() e:query() end, function() cd.synchronize() end, function() cd.synchronize_device("cpu") end,
      function() cd.device("cpu"):synchronize() end, function() s:await() end, function() e:await() end,
    }
    e:record(s)
    for i, call in ipairs(calls) do
      add()
      call()
      assert.are.equal(i, ran)
    end
    s:destroy()
  end)

  it("reports an error in a callback as a warning, as Lua reports one in a finalizer; the next ones still run", function()
    local out, ok = child([[
      local s = cd.stream("cpu")
      s:add_callback(function() io.write("one ") end)
      s:add_callback(function() error("boom", 0) end)
      s:add_callback(function() error({}) end)
      s:add_callback(function() io.write("four ") end)
      io.write(cd.poll(), "\n")
    ]], "-W")
    assert.is_true(ok, out)
    assert.truthy(out:find("one four 4\n", 1, true), out)
    assert.truthy(out:find("Lua warning: cudadev: error in stream callback (boom)", 1, true), out)
    assert.truthy(out:find("Lua warning: cudadev: error in stream callback (error object is a table value)", 1, true), out)
  end)

  it("a callback may add callbacks and poll: each runs once, oldest first", function()
    local s, order = cd.stream("cpu"), {}
    s:add_callback(function()
      order[#order + 1] = "a"
      s:add_callback(function() order[#order + 1] = "c" end)
      cd.poll()
    end)
    s:add_callback(function() order[#order + 1] = "b" end)
    cd.poll()
    cd.poll()
    assert.are.same({ "a", "b", "c" }, order)
    s:destroy()
  end)

  it("callbacks still pending when the state closes are released, never called", function()
    -- a state of its own in this process, so that ASan and valgrind see the release
    local ok, res = cd._sandbox([[
      local cd = require "cudadev"
      local s = cd.stream("cpu")
      for i = 1, 3 do s:add_callback(function() error("called after close") end) end
      cd.get_stream("cpu"):add_callback(function() error("called after close") end)
      return "closing"
    ]])
    assert.are.same({ true, "closing" }, { ok, res })
    local out, exited = child([[
      cd.stream("cpu"):add_callback(function() io.write("CALLED") end)
      io.write("end\n")
    ]], "-W")
    assert.is_true(exited, out)
    assert.are.equal("end\n", out)
  end)

  it("checks its arguments", function()
    local s = cd.stream("cpu")
    assert.are.equal("bad argument #1 to 'add_callback' (function expected, got number)",
      err_of(function() s:add_callback(42) end))
    s:destroy()
    assert.are.equal("bad argument #1 to 'add_callback' (attempt to use a destroyed stream)",
      err_of(function() s:add_callback(print) end))
  end)
end)

-- ------------------------------------------------------------------------------ NOTE [await]

describe("s:await and e:await", function()
  it("outside a coroutine synchronize and return the object", function()
    local s = cd.stream("cpu")
    local e = s:record_event()
    assert.are.equal(s, s:await())
    assert.are.equal(e, e:await())
    assert.are.equal(cd.get_stream("cpu"), cd.get_stream("cpu"):await())
    s:destroy()
  end)

  it("inside a coroutine return at once, without yielding, when the work is done", function()
    local s = cd.stream("cpu")
    local co = coroutine.create(function() return s:await(), s:record_event():await() end)
    local ok, a, b = coroutine.resume(co)
    assert.is_true(ok)
    assert.are.equal(s, a)
    assert.are.equal("cudadev.Event", getmetatable(b).__name)
    assert.are.equal("dead", coroutine.status(co))
    s:destroy()
  end)

  it("refuse a destroyed stream or event", function()
    local s, e = cd.stream("cpu"), cd.event("cpu")
    s:destroy()
    e:destroy()
    assert.are.equal("bad argument #1 to 'await' (attempt to use a destroyed stream)", err_of(function() s:await() end))
    assert.are.equal("bad argument #1 to 'await' (attempt to use a destroyed event)", err_of(function() e:await() end))
  end)
end)

-- ------------------------------------------------------------------------------ NOTE [coroutine scopes]

-- A round-robin scheduler: resumes each coroutine in turn until all are dead (calling each_round() after each
-- round); returns their results.
local function run_all(cos, each_round)
  local results, live = {}, #cos
  while live > 0 do
    live = 0
    for i, co in ipairs(cos) do
      if coroutine.status(co) == "suspended" then
        local ok, res = coroutine.resume(co)
        assert(ok, res)
        if coroutine.status(co) == "dead" then results[i] = res else live = live + 1 end
      end
    end
    if each_round then each_round() end
  end
  return results
end

describe("with_device, with_stream and scope across yields", function()

  it("two coroutines with a stream each, interleaving, see their own stream after every resume", function()
    local main_stream = cd.get_stream("cpu")
    local seen = {}
    local function worker(name)
      local s = cd.stream("cpu")
      return coroutine.create(function()
        return cd.with_stream(s, function()
          local ok = true
          for step = 1, 4 do
            local e = s:record_event()
            coroutine.yield()   -- the other one runs here
            e:await()
            ok = ok and cd.get_stream("cpu") == s
            seen[#seen + 1] = name .. step
          end
          s:destroy()
          return ok
        end)
      end)
    end
    local results = run_all({ worker("a"), worker("b") })
    assert.are.same({ true, true }, results)
    assert.are.same({ "a1", "b1", "a2", "b2", "a3", "b3", "a4", "b4" }, seen)
    assert.are.equal(main_stream, cd.get_stream("cpu"))
  end)

  it("the resumer keeps its own stream and device while a coroutine is suspended inside its scopes", function()
    local s = cd.stream("cpu")
    local before_s, before_d = cd.get_stream("cpu"), cd.get_device()
    local co = coroutine.create(function()
      return cd.with_device("cpu", function()
        return cd.with_stream(s, function()
          coroutine.yield(cd.get_stream("cpu") == s, cd.get_device() == cd.device("cpu"))
          return cd.get_stream("cpu") == s, cd.get_device() == cd.device("cpu")
        end)
      end)
    end)
    assert.are.same({ true, true, true }, { coroutine.resume(co) })
    assert.are.equal(before_s, cd.get_stream("cpu"))
    assert.are.equal(before_d, cd.get_device())
    local s2 = cd.stream("cpu")
    cd.with_stream(s2, function()   -- the state's stream changes while the coroutine is suspended
      assert.are.same({ true, true, true }, { coroutine.resume(co) })
      assert.are.equal(s2, cd.get_stream("cpu"))
    end)
    assert.are.equal(before_s, cd.get_stream("cpu"))
    s:destroy()
    s2:destroy()
  end)

  it("an error after a yield restores the coroutine's scope and passes through unchanged", function()
    local s, before = cd.stream("cpu"), cd.get_stream("cpu")
    local co = coroutine.create(function()
      local ok, err = pcall(cd.with_stream, s, function()
        coroutine.yield()
        error({ code = 9 })
      end)
      return ok, err.code, cd.get_stream("cpu") == before
    end)
    assert.is_true((coroutine.resume(co)))
    assert.are.same({ true, false, 9, true }, { coroutine.resume(co) })
    co = coroutine.create(function() cd.with_stream(s, function() coroutine.yield() error("late", 0) end) end)
    coroutine.resume(co)
    assert.are.same({ false, "late" }, { coroutine.resume(co) })
    assert.are.equal(before, cd.get_stream("cpu"))
    s:destroy()
  end)

  it("cd.set_stream inside a coroutine's scope changes the coroutine's stream; outside, the state's", function()
    local s1, s2, s3, before = cd.stream("cpu"), cd.stream("cpu"), cd.stream("cpu"), cd.get_stream("cpu")
    local co = coroutine.wrap(function()
      cd.with_stream(s1, function()
        cd.set_stream(s2)
        coroutine.yield(cd.get_stream("cpu") == s2)
      end)
      coroutine.yield(cd.get_stream("cpu") == before)   -- the scope closed: the state's again
      cd.set_stream(s3)   -- no scope of its own: the state's, as before issue 20
      return cd.get_stream("cpu") == s3
    end)
    assert.is_true(co())
    assert.are.equal(before, cd.get_stream("cpu"))
    assert.is_true(co())
    assert.is_true(co())
    assert.are.equal(s3, cd.get_stream("cpu"))
    cd.set_stream(before)
    s1:destroy()
    s2:destroy()
    s3:destroy()
  end)

  it("a to-be-closed cd.scope in a coroutine is the coroutine's; nested scopes restore in order", function()
    local d0, before = cd.get_device(), cd.get_stream("cpu")
    local s1, s2 = cd.stream("cpu"), cd.stream("cpu")
    local co = coroutine.wrap(function()
      local _ <close> = cd.scope("cpu")
      coroutine.yield(cd.get_device() == cd.device("cpu"))
      cd.with_stream(s1, function()
        cd.with_stream(s2, function() coroutine.yield(cd.get_stream("cpu") == s2) end)
        coroutine.yield(cd.get_stream("cpu") == s1)
      end)
      return cd.get_stream("cpu") == before
    end)
    assert.is_true(co())
    assert.are.equal(d0, cd.get_device())
    assert.is_true(co())
    assert.is_true(co())
    assert.is_true(co())
    assert.are.equal(d0, cd.get_device())
    assert.are.equal(before, cd.get_stream("cpu"))
    s1:destroy()
    s2:destroy()
  end)

  it("a stream destroyed while it is a suspended coroutine's is the default stream when it resumes", function()
    local s = cd.stream("cpu")
    local co = coroutine.wrap(function()
      return cd.with_stream(s, function()
        coroutine.yield()
        return cd.get_stream("cpu").is_default
      end)
    end)
    co()
    s:destroy()
    assert.is_true(co())
  end)

  it("a coroutine resumed by another one sees the state's settings, not its resumer's scope", function()
    local s, before = cd.stream("cpu"), cd.get_stream("cpu")
    local inner = coroutine.wrap(function() return cd.get_stream("cpu") end)
    local got = coroutine.wrap(function() return cd.with_stream(s, inner) end)()
    assert.are.equal(before, got)
    s:destroy()
  end)
end)

-- ------------------------------------------------------------------------------ NOTE [ipc] on the cpu device

describe("ipc on the cpu device and malformed handles", function()
  it("is refused on the cpu device, naming it", function()
    assert.are.equal("bad option 'ipc' to 'zeros' (cpu cannot share memory between processes: use a cuda device)",
      err_of(function() cd.zeros(4, { device = "cpu", ipc = true }) end))
    assert.are.equal("bad option 'ipc' to 'array' (cpu cannot share memory between processes: use a cuda device)",
      err_of(function() cd.array({ 1, 2 }, { device = "cpu", ipc = true }) end))
    local a = cd.zeros(4, { device = "cpu" })
    assert.are.equal("bad argument #1 to 'ipc_handle' (cpu cannot share memory between processes: use a cuda device)",
      err_of(function() a:ipc_handle() end))
    assert.are.equal("bad option 'ipc' to 'event' (cpu cannot share events between processes: use a cuda device)",
      err_of(function() cd.event("cpu", { ipc = true }) end))
    local e = cd.event("cpu")
    assert.are.equal("bad argument #1 to 'ipc_handle' (cpu cannot share events between processes: use a cuda device)",
      err_of(function() e:ipc_handle() end))
    assert.is_false(e.is_ipc)
    assert.are.equal("bad option 'device' to 'open_ipc' (cpu cannot share memory between processes: use a cuda device)",
      err_of(function() cd.open_ipc(array_handle(), { device = "cpu" }) end))
    assert.are.equal("bad option 'device' to 'open_ipc_event' (cpu cannot share events between processes: use a cuda "
      .. "device)", err_of(function() cd.open_ipc_event(array_handle({ kind = "event" }):gsub(":float32:2,3:0", ""),
        { device = "cpu" }) end))
  end)

  it("checks the options before the device", function()
    assert.are.equal("bad option 'ipc' to 'zeros' (an ipc array is device memory, not pinned host memory)",
      err_of(function() cd.zeros(4, { ipc = true, pinned = true }) end))
    assert.are.equal("bad option 'timing' to 'event' (an ipc event cannot time: leave timing out)",
      err_of(function() cd.event("cpu", { ipc = true, timing = true }) end))
    assert.are.equal("bad argument #2 to 'open_ipc' (unknown option 'devcie' (expected device))",
      err_of(function() cd.open_ipc(array_handle(), { devcie = "cpu" }) end))
  end)

  it("refuses malformed and truncated handles with a clear message", function()
    local function says(h, why, fname)
      assert.are.equal(("bad argument #1 to '%s' (%s)"):format(fname or "open_ipc", why),
        err_of(function()
          if fname == "open_ipc_event" then return cd.open_ipc_event(h) end
          return cd.open_ipc(h)
        end))
    end
    assert.are.equal("bad argument #1 to 'open_ipc' (string expected, got table)", err_of(function() cd.open_ipc({}) end))
    says(42, "not a cudadev ipc handle (one starts with 'cudadev-ipc:')")
    says("hello", "not a cudadev ipc handle (one starts with 'cudadev-ipc:')")
    says("", "not a cudadev ipc handle (one starts with 'cudadev-ipc:')")
    local h = array_handle()
    for n = #"cudadev-ipc:", #h - 1 do says(h:sub(1, n), "truncated ipc handle") end
    says(h .. "00", "malformed ipc handle (too long)")
    says(h .. ":00", "malformed ipc handle (too long)")
    says(h .. (":x"):rep(12), "malformed ipc handle (too many fields)")
    says(array_handle({ version = "2" }), "ipc handle of version '2', this cudadev reads version 1")
    says(array_handle({ kind = "blob" }), "malformed ipc handle (unknown kind)")
    says(array_handle({ kind = "event" }), "the handle is an event's: open it with cd.open_ipc_event")
    says(array_handle(), "the handle is an array's: open it with cd.open_ipc", "open_ipc_event")
    says(array_handle({ hex = HEX:sub(1, 127) .. "z" }), "malformed ipc handle (the handle's bytes are not hexadecimal)")
    says(array_handle({ pid = "0" }), "malformed ipc handle (bad process id)")
    says(array_handle({ pid = "12x" }), "malformed ipc handle (bad process id)")
    says(array_handle({ pid = "1\0" }), "malformed ipc handle (bad process id)")
    says(array_handle({ uuid = "CUDA-0" }), "malformed ipc handle (bad device uuid)")
    says(array_handle({ dtype = "float128" }), "malformed ipc handle (unknown dtype)")
    says(array_handle({ shape = "2,x" }), "malformed ipc handle (bad shape)")
    says(array_handle({ shape = "1,2,3,4,5,6,7,8,9" }), "malformed ipc handle (bad shape)")
    says(array_handle({ shape = "99999999999,99999999999" }), "malformed ipc handle (bad shape)")
    says(array_handle({ offset = "-4" }), "malformed ipc handle (bad offset)")
  end)

  it("refuses a handle of this very process and one from a process that has exited", function()
    local mine = my_pid()
    assert.are.equal("bad argument #1 to 'open_ipc' (the handle was made by this process, and CUDA opens only "
      .. "another process's: use the original)", err_of(function() cd.open_ipc(array_handle({ pid = tostring(mine) })) end))
    local gone = dead_pid()
    assert.are.equal(("bad argument #1 to 'open_ipc' (the handle comes from process %d, which has exited (what it "
      .. "shared went with it))"):format(gone), err_of(function() cd.open_ipc(array_handle({ pid = tostring(gone) })) end))
    assert.are.equal(("bad argument #1 to 'open_ipc_event' (the handle comes from process %d, which has exited (what "
      .. "it shared went with it))"):format(gone), err_of(function()
        cd.open_ipc_event(table.concat({ "cudadev-ipc", "1", "event", tostring(gone), UUID, HEX }, ":"))
      end))
  end)

  it("names a device this process does not have", function()
    assert.are.equal("the ipc handle's device " .. UUID .. " is not a device of this process (see "
      .. "CUDA_VISIBLE_DEVICES): pass {device = ...}", err_of(function() cd.open_ipc(array_handle()) end))
  end)

  it("is not available in a sandbox", function()
    for _, script in ipairs({ "return cd.zeros(3, {ipc = true})",
                              ("return cd.open_ipc(%q)"):format(array_handle()) }) do
      local ok, res = cd._sandbox('local cd = require "cudadev"\n' .. script)
      assert.is_false(ok)
      assert.are.equal("ipc is not available in this sandbox", (tostring(res):gsub("^sandboxed:%d+: ", "")))
    end
  end)
end)

-- ------------------------------------------------------------------------------ on the GPU

describe("on a CUDA device", function()
  local SPIN = [[
    extern "C" __global__ void spin(long long cycles, float *x, float v) {
      long long t0 = clock64();
      while (clock64() - t0 < cycles) {}
      x[threadIdx.x] = v + threadIdx.x;
    }]]
  local spin
  local function spin_kernel()
    spin = spin or cd.compile(SPIN, { device = "cuda:0" }).spin
    return spin
  end
  local LONG = 400000000   -- a few hundred milliseconds at the H100's clock
  teardown(function() spin = nil end)   -- the file leaves no Kernel alive (spec/summary_output.lua counts them)

  -- a new stream on cuda:0 busy with a long kernel that then writes v + i into x[i + 1]; returns both
  local function busy(v)
    local s = cd.stream("cuda:0")
    local x = cd.zeros(32, { device = "cuda:0", stream = s })
    spin_kernel()({ grid = 1, block = 32, stream = s }, LONG, x, v)
    return s, x
  end

  helper.gpu_it("IPC: a child process opens an {ipc = true} array, reads it and writes it; the parent sees the writes",
    function()
    local a = cd.array({ 1, 2, 3, 4 }, "int32", { device = "cuda:0", ipc = true })
    cd.synchronize()
    local h = a:ipc_handle()
    assert.truthy(h:match("^cudadev%-ipc:1:array:%d+:GPU%-[%x%-]+:int32:4:0:" .. ("%x"):rep(128) .. "$"), h)
    local out, ok = child(([[
      local b = cd.open_ipc(%q)
      io.write(tostring(b.device), " ", table.concat(b:totable(), ","), "\n")
      b:copy_from({ 10, 20, 30, 40 })
      cd.synchronize()
      b = nil
      collectgarbage()
    ]]):format(h))
    assert.is_true(ok, out)
    assert.are.equal("Device(cuda:0", out:match("^(Device%(cuda:0)"))
    assert.truthy(out:find(" 1,2,3,4\n", 1, true), out)
    assert.are.same({ 10, 20, 30, 40 }, a:totable())
    -- a view: the handle carries its offset and shape
    local v = a:slice(2, 3)
    local vh = v:ipc_handle()
    assert.truthy(vh:find(":int32:2:4:", 1, true), vh)
    out, ok = child(("io.write(table.concat(cd.open_ipc(%q):totable(), ','))"):format(vh))
    assert.is_true(ok, out)
    assert.are.equal("20,30", out)
  end)

  helper.gpu_it("IPC: refuses an array not made with ipc = true, and this process's own handle", function()
    local a = cd.zeros(4, { device = "cuda:0" })
    assert.are.equal("bad argument #1 to 'ipc_handle' (the array was not made with ipc = true (memory from the pool "
      .. "or the block cache cannot be shared): make it with {ipc = true})", err_of(function() a:ipc_handle() end))
    local b = cd.zeros(4, { device = "cuda:0", ipc = true })
    assert.are.equal("bad argument #1 to 'open_ipc' (the handle was made by this process, and CUDA opens only "
      .. "another process's: use the original)", err_of(function() cd.open_ipc(b:ipc_handle()) end))
  end)

  helper.gpu_it("IPC: a handle from a process that has exited is refused, naming the process", function()
    local out, ok = child([[io.write(cd.zeros(4, { device = "cuda:0", ipc = true }):ipc_handle())]])
    assert.is_true(ok, out)
    local pid = assert(tonumber(out:match("^cudadev%-ipc:1:array:(%d+):")), out)
    assert.are.equal(("bad argument #1 to 'open_ipc' (the handle comes from process %d, which has exited (what it "
      .. "shared went with it))"):format(pid), err_of(function() cd.open_ipc(out) end))
  end)

  helper.gpu_it("IPC: a handle whose shape does not fit the shared allocation is refused, the mapping released", function()
    local a = cd.zeros(4, { device = "cuda:0", ipc = true })
    local h = a:ipc_handle():gsub(":float32:4:0:", ":float32:1000000:0:")
    local out, ok = child(([[
      local ok, err = pcall(cd.open_ipc, %q)
      io.write(tostring(ok), " ", tostring(err))
    ]]):format(h))
    assert.is_true(ok, out)
    assert.truthy(out:find("false the ipc handle describes 4000000 bytes at offset 0, but the shared allocation holds %d+ bytes"), out)
  end)

  helper.gpu_it("IPC events: the child waits on the parent's event, then reads what the parent's kernel wrote", function()
    local k = spin_kernel()
    local x = cd.zeros(32, { device = "cuda:0", ipc = true })
    cd.synchronize()
    local s = cd.stream("cuda:0")
    local e = cd.event("cuda:0", { ipc = true })
    assert.is_true(e.is_ipc)
    assert.is_false(e.timing)
    k({ grid = 1, block = 32, stream = s }, LONG, x, 100)
    e:record(s)
    local out, ok = child(([[
      local ev = cd.open_ipc_event(%q)
      local x = cd.open_ipc(%q)
      ev:synchronize()
      io.write(tostring(ev.is_ipc), " ", tostring(x[1]), " ", tostring(x[32]))   -- io.write would print 100.0 as 100
      local ok, err = pcall(function() return ev:ipc_handle() end)
      io.write(" ", (err:gsub("^[^:]*:%%d+: ", "")))   -- without the chunk's position
    ]]):format(e:ipc_handle(), x:ipc_handle()))
    assert.is_true(ok, out)
    assert.are.equal("true 100.0 131.0 bad argument #1 to 'ipc_handle' (the event was opened from an ipc handle: "
      .. "the process that made it shares it)", out)
    s:destroy()
  end)

  helper.gpu_it("callbacks run after the kernel before them, at the next synchronisation", function()
    local k = spin_kernel()
    local s, x = busy(7)
    local got
    s:add_callback(function() got = x[1] end)
    assert.are.equal(0, cd.poll())   -- the kernel still runs
    assert.is_nil(got)
    s:synchronize()
    assert.are.equal(7, got)
    -- on the default stream too
    k({ grid = 1, block = 32 }, 1000, x, 8)
    cd.get_stream("cuda:0"):add_callback(function() got = x[2] end)
    cd.synchronize()
    assert.are.equal(9, got)
    s:destroy()
  end)

  helper.gpu_it("a callback cannot be captured into a graph", function()
    local s = cd.stream("cuda:0")
    local ok, err = pcall(cd.capture, s, function() s:add_callback(print) end)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("a stream callback cannot be captured into a graph", 1, true), tostring(err))
    s:destroy()
  end)

  helper.gpu_it("await on a long kernel yields the stream and a growing delay, then returns the stream", function()
    local k = spin_kernel()
    local s, x = busy(3)
    local co = coroutine.create(function() return s:await() end)
    local delays = {}
    while true do
      local ok, a, delay = coroutine.resume(co)
      assert.is_true(ok, a)
      if coroutine.status(co) == "dead" then
        assert.are.equal(s, a)
        break
      end
      assert.are.equal(s, a)
      delays[#delays + 1] = delay
    end
    assert.is_true(#delays > 3, "the coroutine yielded " .. #delays .. " times")
    assert.are.equal(20e-6, delays[1])
    assert.are.equal(40e-6, delays[2])
    for i = 2, #delays do
      assert.is_true(delays[i] >= delays[i - 1] and delays[i] <= 2e-3, "delays " .. table.concat(delays, " "))
    end
    assert.is_true(s:query())
    assert.are.equal(3, x[1])
    -- an event too
    k({ grid = 1, block = 32, stream = s }, LONG, x, 4)
    local e = s:record_event()
    local n = 0
    co = coroutine.create(function() return e:await() end)
    repeat
      local ok, got = coroutine.resume(co)
      assert.is_true(ok, got)
      assert.are.equal(e, got)
      n = n + 1
    until coroutine.status(co) == "dead"
    assert.is_true(n > 1, "the coroutine never yielded")
    assert.are.equal(4, x[1])
    s:destroy()
  end)

  helper.gpu_it("a scheduler: two coroutines with a device and a stream each overlap their waits", function()
    local k = spin_kernel()
    local d0 = cd.get_device()
    local seen = {}
    local function worker(dev, v)
      return coroutine.create(function()
        return cd.with_device(dev, function()
          local s = cd.stream()
          return cd.with_stream(s, function()
            local x = cd.zeros(32)
            for i = 1, 3 do
              if dev == "cuda:0" then k({ grid = 1, block = 32 }, LONG // 4, x, v + i) else coroutine.yield() end
              s:await()
              seen[#seen + 1] = dev
              assert(cd.get_device() == cd.device(dev), "wrong device after a resume")
              assert(cd.get_stream() == s, "wrong stream after a resume")
            end
            local r = dev == "cuda:0" and x[1] or v
            s:destroy()
            return r
          end)
        end)
      end)
    end
    local results = run_all({ worker("cuda:0", 10), worker("cpu", 20) }, function()
      assert.are.equal(d0, cd.get_device())   -- the scheduler's own device throughout
    end)
    assert.are.same({ 13, 20 }, results)
    assert.are.equal(6, #seen)
    assert.are.equal("cpu", seen[1])   -- the cpu worker went on while the GPU one waited for its kernel
  end)
end)
