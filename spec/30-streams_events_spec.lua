-- Streams and events (API.md "Streams and events"): creation and options, queries, waits, the current
-- stream of a device and its scopes, event timing. Runs on the cpu device everywhere; the CUDA ones are in
-- gpu_it blocks.
local helper = require "spec.helper"
local cd = require "cudadev"

local expect_error = helper.assert_error_matches

describe("cd.stream", function()
  it("creates a Stream on the default device", function()
    local s = cd.stream()
    assert.are.equal("Stream", cd.type(s))
    assert.are.equal(cd.get_device(), s.device)
    assert.are.equal(0, s.priority)
    assert.is_false(s.is_default)
  end)

  it("takes a device and options", function()
    local s = cd.stream("cpu", { priority = 0, blocking = true })
    assert.are.equal(cd.device("cpu"), s.device)
    assert.are.equal(0, s.priority)
    local t = cd.stream(cd.device("cpu"))
    assert.are.equal(cd.device("cpu"), t.device)
    local u = cd.stream({ blocking = false })
    assert.are.equal(cd.get_device(), u.device)
  end)

  it("prints its device and priority", function()
    local s = cd.stream("cpu")
    assert.is_truthy(tostring(s):match("^Stream%(cpu 0x%x+ priority 0%)$") or
      tostring(s):match("^Stream%(cpu %S+ priority 0%)$"))
  end)

  it("rejects unknown options", function()
    expect_error(function() cd.stream({ prio = 1 }) end,
      "bad argument #1 to 'stream' (unknown option 'prio' (expected priority, blocking))")
    expect_error(function() cd.stream("cpu", { blocking = true, sync = true }) end,
      "bad argument #2 to 'stream' (unknown option 'sync' (expected priority, blocking))")
  end)

  it("checks the types of its options", function()
    expect_error(function() cd.stream({ blocking = 1 }) end,
      "bad option 'blocking' to 'stream' (boolean expected, got number)")
    expect_error(function() cd.stream({ priority = "high" }) end,
      "bad option 'priority' to 'stream' (integer expected, got string)")
  end)

  it("rejects an unknown device", function()
    assert.has_error(function() cd.stream("nowhere") end)
    local ok, err = pcall(function() cd.stream("nowhere") end)
    assert.is_false(ok)
    assert.is_truthy(helper.error_text(err):match("^bad argument #1 to 'stream' %(no device 'nowhere' %("))
  end)

  it("query is true when idle; synchronize returns nothing", function()
    local s = cd.stream("cpu")
    assert.is_true(s:query())
    assert.are.equal(0, select("#", s:synchronize()))
    assert.is_true(s:query())
  end)

  it("wait_event and wait_stream return the stream", function()
    local s, t = cd.stream("cpu"), cd.stream("cpu")
    local e = cd.event("cpu"):record(t)
    assert.is_true(rawequal(s, s:wait_event(e)))
    assert.is_true(rawequal(s, s:wait_stream(t)))
    s:synchronize()
    assert.is_true(s:query())
  end)

  it("record_event records a new event, or the one given", function()
    local s = cd.stream("cpu")
    local e = s:record_event()
    assert.are.equal("Event", cd.type(e))
    assert.are.equal(s.device, e.device)
    e:synchronize()
    assert.is_true(e:query())
    local mine = cd.event("cpu")
    assert.is_true(rawequal(mine, s:record_event(mine)))
  end)

  it("checks its arguments", function()
    local s = cd.stream("cpu")
    expect_error(function() s:wait_event(s) end, "bad argument #1 to 'wait_event' (cudadev.Event expected, got cudadev.Stream)")
    expect_error(function() s:wait_stream(cd.event("cpu")) end,
      "bad argument #1 to 'wait_stream' (cudadev.Stream expected, got cudadev.Event)")
    expect_error(function() return s.bogus end, "Stream has no field or method 'bogus'")
  end)

  it("a destroyed stream says so", function()
    local s = cd.stream("cpu")
    s:destroy()
    assert.are.equal("Stream(destroyed)", tostring(s))
    expect_error(function() s:query() end, "bad argument #1 to 'query' (attempt to use a destroyed stream)")
    expect_error(function() cd.set_stream(s) end, "bad argument #1 to 'set_stream' (attempt to use a destroyed stream)")
  end)

  it("a <close> stream is destroyed at scope end", function()
    local kept
    do
      local s <close> = cd.stream("cpu")
      kept = s
    end
    assert.are.equal("Stream(destroyed)", tostring(kept))
  end)

  helper.gpu_it("on a GPU: priority, blocking, query and synchronize", function()
    local s = cd.stream("cuda:0", { priority = -1, blocking = true })
    assert.are.equal(cd.device("cuda:0"), s.device)
    assert.are.equal(-1, s.priority)
    s:synchronize()
    assert.is_true(s:query())
  end)

  helper.gpu_it("an event of another device kind is refused", function()
    local s = cd.stream("cuda:0")
    expect_error(function() s:wait_event(cd.event("cpu")) end,
      "bad argument #1 to 'wait_event' (event and stream belong to different kinds of device)")
  end)
end)

describe("the current stream", function()
  it("is the device's default stream to begin with", function()
    local s = cd.get_stream("cpu")
    assert.are.equal("Stream", cd.type(s))
    assert.is_true(s.is_default)
    assert.are.equal("Stream(cpu default)", tostring(s))
    assert.are.equal(cd.device("cpu"), s.device)
    assert.are.equal(cd.get_stream(cd.get_device()), cd.get_stream())
  end)

  it("set_stream changes it for the stream's device", function()
    local default = cd.get_stream("cpu")
    local s = cd.stream("cpu")
    cd.set_stream(s)
    assert.are.equal(s, cd.get_stream("cpu"))
    assert.is_true(rawequal(s, cd.get_stream("cpu")))
    cd.set_stream(default)
    assert.are.equal(default, cd.get_stream("cpu"))
    assert.is_true(cd.get_stream("cpu").is_default)
  end)

  it("set_stream requires a Stream", function()
    expect_error(function() cd.set_stream("cpu") end, "bad argument #1 to 'set_stream' (cudadev.Stream expected, got string)")
  end)

  it("with_stream makes it current inside fn, returns fn's results and restores it", function()
    local default = cd.get_stream("cpu")
    local s = cd.stream("cpu")
    local inside, x, y = cd.with_stream(s, function(a, b) return cd.get_stream("cpu"), a, b end, 1, 2)
    assert.are.equal(s, inside)
    assert.are.equal(1, x)
    assert.are.equal(2, y)
    assert.are.equal(default, cd.get_stream("cpu"))
  end)

  it("with_stream restores the previous stream on error; the error passes through", function()
    local default = cd.get_stream("cpu")
    local s = cd.stream("cpu")
    local e = {}
    local ok, err = pcall(cd.with_stream, s, function() error(e) end)
    assert.is_false(ok)
    assert.is_true(rawequal(e, err))
    assert.are.equal(default, cd.get_stream("cpu"))
  end)

  it("with_stream nests", function()
    local default = cd.get_stream("cpu")
    local s, t = cd.stream("cpu"), cd.stream("cpu")
    cd.with_stream(s, function()
      cd.with_stream(t, function() assert.are.equal(t, cd.get_stream("cpu")) end)
      assert.are.equal(s, cd.get_stream("cpu"))
    end)
    assert.are.equal(default, cd.get_stream("cpu"))
  end)

  it("with_stream requires a function", function()
    expect_error(function() cd.with_stream(cd.stream("cpu"), 1) end,
      "bad argument #2 to 'with_stream' (function expected, got number)")
  end)

  it("is what Device.stream reports", function()
    local s = cd.stream("cpu")
    cd.with_stream(s, function() assert.are.equal(s, cd.device("cpu").stream) end)
  end)

  it("work given no stream goes to the current stream", function()
    local s = cd.stream("cpu")
    cd.with_stream(s, function()
      local a = cd.zeros(16, "int32", { device = "cpu" })
      a:fill(3)
      s:synchronize()
      assert.are.same(3, a[16])
    end)
  end)

  helper.gpu_it("is per device", function()
    local s, cpu_stream = cd.stream("cuda:0"), cd.get_stream("cpu")
    cd.with_stream(s, function()
      assert.are.equal(s, cd.get_stream("cuda:0"))
      assert.are.equal(cpu_stream, cd.get_stream("cpu"))
    end)
    assert.is_true(cd.get_stream("cuda:0").is_default)
  end)
end)

describe("cd.event", function()
  it("creates a timing Event on the default device", function()
    local e = cd.event()
    assert.are.equal("Event", cd.type(e))
    assert.are.equal(cd.get_device(), e.device)
    assert.is_true(e.timing)
    assert.are.equal("Event(" .. cd.get_device().alias .. ")", tostring(e))
  end)

  it("takes a device and options", function()
    local e = cd.event("cpu", { timing = false, blocking = true })
    assert.are.equal(cd.device("cpu"), e.device)
    assert.is_false(e.timing)
    assert.are.equal("Event(cpu no timing)", tostring(e))
    assert.is_false(cd.event({ timing = false }).timing)
  end)

  it("rejects unknown options and bad values", function()
    expect_error(function() cd.event({ timer = true }) end,
      "bad argument #1 to 'event' (unknown option 'timer' (expected timing, blocking, ipc))")
    expect_error(function() cd.event("cpu", { timing = "yes" }) end,
      "bad option 'timing' to 'event' (boolean expected, got string)")
  end)

  it("record, query, synchronize and wait return the event", function()
    local e = cd.event("cpu")
    local s = cd.stream("cpu")
    assert.is_true(rawequal(e, e:record()))
    assert.is_true(rawequal(e, e:record(s)))
    assert.is_true(rawequal(e, e:synchronize()))
    assert.is_true(e:query())
    assert.is_true(rawequal(e, e:wait()))
    assert.is_true(rawequal(e, e:wait(s)))
  end)

  it("rejects a stream of another device for record", function()
    if not helper.cuda_available then
      expect_error(function() cd.event("cpu"):record(cd.event("cpu")) end,
        "bad argument #1 to 'record' (cudadev.Stream expected, got cudadev.Event)")
      return
    end
    expect_error(function() cd.event("cpu"):record(cd.stream("cuda:0")) end,
      "stream is on cuda:0 but the work is on cpu")
  end)

  it("elapsed gives non-negative milliseconds between two recorded events", function()
    local s = cd.stream("cpu")
    local e1, e2 = cd.event("cpu"), cd.event("cpu")
    e1:record(s)
    cd.zeros(1 << 16, { stream = s }):fill(1)
    e2:record(s)
    e2:synchronize()
    local ms = e1:elapsed(e2)
    assert.are.equal("number", type(ms))
    assert.is_true(ms >= 0)
    assert.are.equal(ms, cd.elapsed_time(e1, e2))
  end)

  it("elapsed refuses events created with timing=false", function()
    local t, n = cd.event("cpu"), cd.event("cpu", { timing = false })
    t:record()
    n:record()
    n:synchronize()
    expect_error(function() t:elapsed(n) end, "bad argument #1 to 'elapsed' (event was created with timing=false)")
    expect_error(function() n:elapsed(t) end, "calling 'elapsed' on bad self (event was created with timing=false)")
    expect_error(function() cd.elapsed_time(t, n) end,
      "bad argument #2 to 'elapsed_time' (event was created with timing=false)")
    expect_error(function() cd.elapsed_time(n, t) end,
      "bad argument #1 to 'elapsed_time' (event was created with timing=false)")
  end)

  it("a destroyed event says so", function()
    local e = cd.event("cpu")
    e:destroy()
    assert.are.equal("Event(destroyed)", tostring(e))
    expect_error(function() cd.elapsed_time(e, cd.event("cpu")) end,
      "bad argument #1 to 'elapsed_time' (attempt to use a destroyed event)")
    expect_error(function() return e.timing end, "bad argument #1 to 'index' (attempt to use a destroyed event)")
  end)

  it("rejects unknown fields", function()
    expect_error(function() return cd.event("cpu").bogus end, "Event has no field or method 'bogus'")
  end)

  helper.gpu_it("times GPU work", function()
    local s = cd.stream("cuda:0")
    local e1, e2 = cd.event("cuda:0"), cd.event("cuda:0")
    e1:record(s)
    cd.zeros(1 << 24, { stream = s }):fill(1)
    e2:record(s)
    e2:synchronize()
    assert.is_true(e2:query())
    local ms = cd.elapsed_time(e1, e2)
    assert.is_true(ms > 0)
    assert.are.equal(ms, e1:elapsed(e2))
  end)

  helper.gpu_it("elapsed refuses events of different devices", function()
    local a, b = cd.event("cpu"):record(), cd.event("cuda:0"):record()
    b:synchronize()
    expect_error(function() cd.elapsed_time(a, b) end,
      "bad argument #2 to 'elapsed_time' (events on different devices (cpu and cuda:0))")
  end)

  helper.gpu_it("orders work across two GPU streams", function()
    local s1, s2 = cd.stream("cuda:0"), cd.stream("cuda:0")
    local a = cd.zeros(1 << 22, "int32", { device = "cuda:0", stream = s1 })
    local b = cd.zeros(1 << 22, "int32", { device = "cuda:0", stream = s2 })
    s2:synchronize()
    a:fill(7)                             -- on the current stream of cuda:0
    cd.get_stream("cuda:0"):synchronize()
    cd.with_stream(s1, function() a:fill(5) end)
    s2:wait_stream(s1)
    cd.copy(b, a, { stream = s2 })
    s2:synchronize()
    assert.are.equal(5, b[1 << 22])
  end)
end)

-- Last in the file: a failure here may leave the current streams of this state inconsistent.
describe("a second luaopen_cudadev in one state", function()
  it("keeps the current streams", function()
    -- busted's insulation, hot reloading and some hosts unload package.loaded.cudadev and require it again
    local s = cd.stream("cpu")
    local default = cd.get_stream("cpu")
    cd.set_stream(s)
    package.loaded.cudadev = nil
    local again = require "cudadev"
    package.loaded.cudadev = cd
    local ok, current = pcall(again.get_stream, "cpu")
    cd.set_stream(default)
    assert.is_true(ok, current)
    assert.are.equal(s, current)
    assert.are.equal(cd.device("cpu"), again.device("cpu"))
  end)
end)
