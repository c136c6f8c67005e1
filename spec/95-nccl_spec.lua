-- NCCL communicators (cd.nccl, issue 19): libnccl opened at run time (the module and the cpu device work without
-- it), the arguments checked before NCCL sees them, one-rank communicators on one GPU, and every collective across
-- all the GPUs of the process where there are two or more.
--
-- On a host without a GPU, what calls into a real libnccl runs in a child process (which valgrind does not follow):
-- NCCL's own allocations are not cudadev's (an empty group leaves NCCL a job it never frees), and the library is
-- opened once per process, so each CUDADEV_LIBNCCL case needs a process of its own. The child keeps LD_PRELOAD:
-- under `make asan` it loads the instrumented build, which needs the sanitizer's runtime first.
local helper = require "spec.helper"
local cd = require "cudadev"

local function child(code, env)
  return helper.run_child(code, "env " .. (env or ""))
end

-- Whether the default search finds a libnccl on this host (in a child: opening it here is for GPU hosts only).
local found_here = child("print(cd.nccl.is_available())"):match("^true") ~= nil

local OPS = { "sum", "prod", "max", "min", "avg" }

-- NCCL on the GPU(s): pending with the reason without a GPU or without NCCL
local nccl_ok, nccl_why = false, helper.no_cuda_reason
if helper.cuda_available then
  nccl_ok, nccl_why = cd.nccl.is_available()
end
local function nccl_it(name, fn)
  if not nccl_ok then return pending(("%s (%s)"):format(name, tostring(nccl_why))) end
  return it(name, fn)
end
local function multi_nccl_it(name, fn)
  if not nccl_ok then return pending(("%s (%s)"):format(name, tostring(nccl_why))) end
  return helper.multi_gpu_it(name, fn)
end

describe("cd.nccl without NCCL", function()
  it("loads, keeps the cpu device working, and says why NCCL is not there", function()
    local out = child([[
      print(cd.nccl.is_available())
      print(cd.zeros(3, "int32", { device = "cpu" }) + 2)
      local ok, err = pcall(cd.nccl.unique_id)
      print(ok, cd.type(err), err.api, err.name)
      print(err.message)
    ]], "CUDADEV_LIBNCCL=/nonexistent/libnccl.so.2")
    local why = "no NCCL: tried /nonexistent/libnccl.so.2 (/nonexistent/libnccl.so.2: cannot open shared object "
      .. "file: No such file or directory)"
    assert.are.equal("false\t" .. why .. "\nArray(int32[3] on cpu: {2, 2, 2})\nfalse\tError\tdlopen\tNCCL_NOT_FOUND\n"
      .. why .. "\nexit 0\n", out)
  end)

  it("names a library that is not NCCL by the entry point it lacks", function()
    local out = child("print(cd.nccl.is_available())", "CUDADEV_LIBNCCL=libm.so.6")
    assert.are.equal("false\tno NCCL: libm.so.6 does not export ncclGetErrorString\nexit 0\n", out)
  end)

  local list_it = found_here and function(name) return pending(name .. " (the default search finds NCCL here)") end or it
  list_it("lists every name the default search tried", function()
    local out = child("print(select(2, cd.nccl.is_available()))",
      "-u CUDADEV_LIBNCCL CUDA_HOME=/nonexistent-toolkit VIRTUAL_ENV=/nonexistent-venv")
    for _, fragment in ipairs({ "no NCCL: tried libnccl.so.2 (", ", libnccl.so (",
                                ", /nonexistent-toolkit/lib64/libnccl.so.2 (", ", /nonexistent-toolkit/lib/libnccl.so.2 (",
                                ", /nonexistent-venv/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2 (no such file)",
                                ", /opt/*/.venv/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2 (" }) do
      assert(out:find(fragment, 1, true), fragment .. " is not in:\n" .. out)
    end
  end)

  it("is refused in a sandbox", function()
    local ok, res = cd._sandbox("local ok, why = cd.nccl.is_available(); return tostring(ok) .. ': ' .. why")
    assert.is_true(ok)
    assert.are.equal("false: cd.nccl is not available in this sandbox", res)
    ok, res = cd._sandbox("return cd.nccl.unique_id()")
    assert.is_false(ok)
    assert.truthy(tostring(res):find("cd.nccl is not available in this sandbox", 1, true), tostring(res))
  end)
end)

describe("cd.nccl where libnccl is found", function()
  local run_it = found_here and it or function(name) return pending(name .. " (no libnccl on this host)") end
  run_it("gives unique ids, a version, and groups that end also on error", function()
    local out = child([[
      local a, b = cd.nccl.unique_id(), cd.nccl.unique_id()
      print(#a, #b, a ~= b, type(a))
      local v, path = cd.nccl.version()
      print(v:match("^2%.%d+%.%d+$") ~= nil, type(path))
      print(cd.nccl.group(function(x, y) return x + y, "two" end, 1, 2))
      print(cd.nccl.group(function() return cd.nccl.group(function() return "nested" end) end))
      local ok, err = pcall(cd.nccl.group, function() error("inside", 0) end)
      print(ok, err)
      print(cd.nccl.group(function() return "after" end))
      local co = coroutine.wrap(function() return pcall(cd.nccl.group, function() error("in a coroutine", 0) end) end)
      print(co())
      print(cd.nccl.group(function() return "still fine" end))
    ]])
    assert.are.equal("128\t128\ttrue\tstring\ntrue\tstring\n3\ttwo\nnested\nfalse\tinside\nafter\n"
      .. "false\tin a coroutine\nstill fine\nexit 0\n", out)
  end)
end)

describe("cd.nccl arguments", function()
  local id = ("\0"):rep(128)

  it("checks the arguments of comm before NCCL is opened", function()
    helper.assert_error_matches(function() cd.nccl.comm(0, id, 0) end,
      "bad argument #1 to 'comm' (number of ranks must be at least 1, got 0)")
    helper.assert_error_matches(function() cd.nccl.comm(2, "short", 0) end,
      "bad argument #2 to 'comm' (unique id of 128 bytes expected (cd.nccl.unique_id()), got 5 bytes)")
    helper.assert_error_matches(function() cd.nccl.comm(2, id, 2) end,
      "bad argument #3 to 'comm' (rank 2 out of range (0 to 1))")
    helper.assert_error_matches(function() cd.nccl.comm(2, id, -1) end,
      "bad argument #3 to 'comm' (rank -1 out of range (0 to 1))")
    helper.assert_error_matches(function() cd.nccl.comm(1, id, 0.5) end,
      "bad argument #3 to 'comm' (number has no integer representation)")
    helper.assert_error_matches(function() cd.nccl.comm(1, id, 0, "cpu") end,
      "bad argument #4 to 'comm' (NCCL needs a CUDA device, got cpu)")
    helper.assert_error_matches(function() cd.nccl.comm(1, 42, 0) end,
      "bad argument #2 to 'comm' (unique id of 128 bytes expected (cd.nccl.unique_id()), got 2 bytes)")
    helper.assert_error_matches(function() cd.nccl.comm(1, {}, 0) end,
      "bad argument #2 to 'comm' (string expected, got table)")
  end)

  it("refuses a cpu default device", function()
    cd.with_device("cpu", function()
      helper.assert_error_matches(function() cd.nccl.comm(1, id, 0) end,
        "bad argument #4 to 'comm' (NCCL needs a CUDA device; the default device is cpu)")
    end)
  end)

  it("checks the list of comms", function()
    helper.assert_error_matches(function() cd.nccl.comms(42) end,
      "bad argument #1 to 'comms' (table expected, got number)")
    helper.assert_error_matches(function() cd.nccl.comms({}) end,
      "bad argument #1 to 'comms' (list of CUDA devices expected, got an empty table)")
    helper.assert_error_matches(function() cd.nccl.comms({ "cpu" }) end,
      "bad argument #1 to 'comms' (element 1: NCCL needs CUDA devices, got cpu)")
    helper.assert_error_matches(function() cd.nccl.comms({ true }) end,
      "bad argument #1 to 'comms' (element 1: device expected (\"cpu\", \"cuda:N\", an ordinal or a Device), got boolean)")
  end)

  it("wants a function for a group", function()
    helper.assert_error_matches(function() cd.nccl.group(42) end,
      "bad argument #1 to 'group' (function expected, got number)")
  end)

  it("refuses what is not a communicator as self", function()
    local methods = debug.getregistry()["cudadev.Comm"].methods
    for _, name in ipairs({ "all_reduce", "broadcast", "reduce", "all_gather", "reduce_scatter", "send", "recv",
                            "abort", "destroy" }) do
      local call = load(("local m, x = ...; return m.%s(x)"):format(name))   -- a named call, as Lua's messages need
      helper.assert_error_matches(function() call(methods, cd.zeros(1, "float32", { device = "cpu" })) end,
        ("bad argument #1 to '%s' (cudadev.Comm expected, got cudadev.Array)"):format(name))
    end
    assert.is_nil(cd.type(42))
  end)
end)

-- ---------------------------------------------------------------------------------------------- one GPU
local function one_rank(dev)
  return cd.nccl.comm(1, cd.nccl.unique_id(), 0, dev or "cuda:0")
end

local function on(c, t, dtype) return cd.array(t, dtype, { device = c.device }) end

describe("cd.nccl on one GPU", function()
  helper.gpu_it("finds libnccl on this GPU host (CUDADEV_LIBNCCL, the linker, a toolkit or a Python wheel)", function()
    local ok, why = cd.nccl.is_available()
    assert(ok, why)
    local v, path = cd.nccl.version()
    assert.truthy(v:match("^2%.%d+%.%d+$"), v)
    assert.is_string(path)
  end)

  nccl_it("makes a one-rank communicator with its fields", function()
    local c = one_rank()
    assert.are.equal(0, c.rank)
    assert.are.equal(1, c.size)
    assert.are.equal(cd.device("cuda:0"), c.device)
    assert.are.equal("Comm(rank 0 of 1 on cuda:0)", tostring(c))
    assert.are.equal("Comm", cd.type(c))
    helper.assert_error_matches(function() return c.nope end, "Comm has no field or method 'nope'")
    c:destroy()
    assert.are.equal("Comm(destroyed)", tostring(c))
  end)

  nccl_it("all_reduce: every op on float32, float64 and int32, in place and not", function()
    local c = one_rank()
    for _, dtype in ipairs({ "float32", "float64", "int32" }) do
      local host = dtype == "int32" and { 1, -2, 3, 7, 0 } or { 1.5, -2, 3, 0.25, 0 }
      for _, op in ipairs(OPS) do
        local x, y = on(c, host, dtype), on(c, { 9, 9, 9, 9, 9 }, dtype)
        assert.are.equal(y, c:all_reduce(x, y, op))
        assert.are.same(host, y:totable(), dtype .. " " .. op)   -- one rank: the reduction of one value is itself
        assert.are.equal(x, c:all_reduce(x, x, op))
        assert.are.same(host, x:totable(), dtype .. " " .. op .. " in place")
      end
    end
    c:destroy()
  end)

  nccl_it("broadcast, reduce, all_gather and reduce_scatter with one rank, on an explicit stream too", function()
    local c = one_rank()
    local s = cd.stream("cuda:0", { blocking = true })   -- ordered after the zero() of the current stream
    local x = on(c, { 1, 2, 3, 4 }, "float32")
    local y = cd.zeros(4, "float32", { device = "cuda:0" })
    c:broadcast(x, y, 0)
    assert.are.same({ 1, 2, 3, 4 }, y:totable())
    y:zero()
    c:reduce(x, y, "max", 0, s)
    s:synchronize()
    assert.are.same({ 1, 2, 3, 4 }, y:totable())
    y:zero()
    c:all_gather(x, y)
    assert.are.same({ 1, 2, 3, 4 }, y:totable())
    y:zero()
    c:reduce_scatter(x, y, "sum", s)
    s:synchronize()
    assert.are.same({ 1, 2, 3, 4 }, y:totable())
    c:all_gather(y, y)                        -- in place: send is recv's slice of rank 0, the whole of it
    c:reduce_scatter(y, y, "sum")             -- in place: recv is send's slice of rank 0
    assert.are.same({ 1, 2, 3, 4 }, y:totable())
    local h = on(c, { 1, -2, 300 }, "int16")  -- a dtype NCCL lacks travels as bytes where values are not read
    local h2 = cd.zeros(3, "int16", { device = "cuda:0" })
    c:broadcast(h, h2, 0)
    assert.are.same({ 1, -2, 300 }, h2:totable())
    c:destroy()
  end)

  nccl_it("group calls: several collectives and a send/recv to itself in one group", function()
    local c = one_rank()
    local x, y = on(c, { 5, 6 }, "float64"), cd.zeros(2, "float64", { device = "cuda:0" })
    local a, b = on(c, { 7, 8 }, "int32"), cd.zeros(2, "int32", { device = "cuda:0" })
    local r1, r2 = cd.nccl.group(function()
      c:all_reduce(x, y, "sum")
      c:all_reduce(x, x, "prod")
      c:send(a, 0)
      c:recv(b, 0)
      return "done", 2
    end)
    assert.are.equal("done", r1)
    assert.are.equal(2, r2)
    assert.are.same({ 5, 6 }, y:totable())
    assert.are.same({ 5, 6 }, x:totable())
    assert.are.same({ 7, 8 }, b:totable())
    local ok, err = pcall(cd.nccl.group, function() c:all_reduce(x, y, "sum"); error("stop", 0) end)
    assert.is_false(ok)
    assert.are.equal("stop", err)
    c:all_reduce(x, y, "max")                 -- the group was ended: the communicator goes on
    assert.are.same({ 5, 6 }, y:totable())
    c:destroy()
  end)

  nccl_it("cd.nccl.comms({\"cuda:0\"}) makes one communicator of rank 0", function()
    local comms = cd.nccl.comms({ "cuda:0" })
    assert.are.equal(1, #comms)
    assert.are.equal(0, comms[1].rank)
    assert.are.equal(1, comms[1].size)
    local x = on(comms[1], { 1, 2 }, "float32")
    cd.nccl.group(function()
      for _, c in ipairs(comms) do c:all_reduce(x, x, "sum") end
    end)
    assert.are.same({ 1, 2 }, x:totable())
    helper.assert_error_matches(function() cd.nccl.comms({ "cuda:0", cd.device("cuda:0") }) end,
      "bad argument #1 to 'comms' (element 2 repeats cuda:0 (one communicator per device))")
    for _, c in ipairs(comms) do c:destroy() end
  end)

  nccl_it("refuses wrong devices, sizes, dtypes, ops, ranks and overlaps before NCCL sees them", function()
    local c = one_rank()
    local x = on(c, { 1, 2, 3, 4 }, "float32")
    local host = cd.array({ 1, 2, 3, 4 }, "float32", { device = "cpu" })
    helper.assert_error_matches(function() c:all_reduce(host, x, "sum") end,
      "bad argument #1 to 'all_reduce' (array on cpu: NCCL moves CUDA device memory (a:to(\"cuda:0\") copies it there))")
    helper.assert_error_matches(function() c:all_reduce(x, cd.zeros(3, "float32", { device = "cuda:0" }), "sum") end,
      "bad argument #2 to 'all_reduce' (recv has 3 elements but needs 4: as many as send)")
    helper.assert_error_matches(function() c:all_reduce(x, cd.zeros(4, "float64", { device = "cuda:0" }), "sum") end,
      "bad argument #2 to 'all_reduce' (recv is float64 but send is float32)")
    local i16 = cd.zeros(4, "int16", { device = "cuda:0" })
    helper.assert_error_matches(function() c:all_reduce(i16, i16, "sum") end,
      "bad argument #1 to 'all_reduce' (NCCL cannot reduce int16: it has no such type (a:astype(\"int32\") converts))")
    local bools = cd.zeros(4, "bool", { device = "cuda:0" })
    helper.assert_error_matches(function() c:reduce(bools, bools, "max", 0) end,
      "bad argument #1 to 'reduce' (NCCL cannot reduce bool: it has no such type (a:astype(\"uint8\") converts))")
    helper.assert_error_matches(function() c:all_reduce(x, x, "add") end,
      "bad argument #3 to 'all_reduce' (unknown reduction 'add' (\"sum\", \"prod\", \"max\", \"min\" or \"avg\"))")
    helper.assert_error_matches(function() c:all_reduce(x, x) end,
      "bad argument #3 to 'all_reduce' (reduction \"sum\", \"prod\", \"max\", \"min\" or \"avg\" expected, got no value)")
    helper.assert_error_matches(function() c:broadcast(x, x, 1) end,
      "bad argument #3 to 'broadcast' (root rank 1 out of range (0 to 0))")
    helper.assert_error_matches(function() c:send(x, "0") end,
      "bad argument #2 to 'send' (peer rank (an integer) expected, got string)")
    helper.assert_error_matches(function() c:all_gather(x, cd.zeros(3, "float32", { device = "cuda:0" })) end,
      "bad argument #2 to 'all_gather' (recv has 3 elements but needs 4: size × #send)")
    helper.assert_error_matches(function() c:reduce_scatter(x, cd.zeros(2, "float32", { device = "cuda:0" }), "sum") end,
      "bad argument #1 to 'reduce_scatter' (send has 4 elements but needs 2: size × #recv)")
    helper.assert_error_matches(function() c:all_reduce(x:slice(1, 3), x:slice(2, 4), "sum") end,
      "bad argument #2 to 'all_reduce' (send and recv overlap: in place, pass the same array as send and recv)")
    helper.assert_error_matches(function() c:all_reduce(x, x, "sum", cd.stream("cpu")) end,
      "bad argument #4 to 'all_reduce' (stream is on cpu but the communicator is on cuda:0)")
    local freed = cd.zeros(4, "float32", { device = "cuda:0" })
    freed:free()
    helper.assert_error_matches(function() c:all_reduce(freed, x, "sum") end,
      "bad argument #1 to 'all_reduce' (attempt to use a freed array)")
    c:destroy()
  end)

  nccl_it("a destroyed or aborted communicator refuses use; <close> and the collector release it", function()
    local c = one_rank()
    local x = on(c, { 1 }, "float32")
    c:destroy()
    helper.assert_error_matches(function() c:all_reduce(x, x, "sum") end,
      "bad argument #1 to 'all_reduce' (attempt to use a destroyed communicator)")
    helper.assert_error_matches(function() c:destroy() end,
      "bad argument #1 to 'destroy' (attempt to use a destroyed communicator)")
    helper.assert_error_matches(function() return c.rank end,
      "bad argument #1 to 'index' (attempt to use a destroyed communicator)")
    local a = one_rank()
    a:abort()
    assert.are.equal("Comm(aborted)", tostring(a))
    helper.assert_error_matches(function() a:broadcast(x, x, 0) end,
      "bad argument #1 to 'broadcast' (attempt to use an aborted communicator)")
    do
      local scoped <close> = one_rank()
      scoped:all_reduce(x, x, "sum")
    end
    for _ = 1, 3 do one_rank() end
    collectgarbage()
    collectgarbage()
    assert.are.same({ 1 }, x:totable())
  end)
end)

-- ---------------------------------------------------------------------------------------------- all GPUs
-- rank r's values for an op: small integers, so that every dtype holds every result exactly; the ints' avg
-- divides exactly (the sum over r of base + r*n is n*base + n*n*(n-1)/2)
local BASE = { 1, -2, 3, 7, 0, 5 }
local function values(op, r, n)
  local t = {}
  for j, b in ipairs(BASE) do
    if op == "prod" then t[j] = ((j + r) % 2 == 0) and 2 or -1
    else t[j] = b + r * n end
  end
  return t
end

local function expected(op, n)
  local out = {}
  for j = 1, #BASE do
    local acc
    for r = 0, n - 1 do
      local v = values(op, r, n)[j]
      if acc == nil then acc = v
      elseif op == "sum" or op == "avg" then acc = acc + v
      elseif op == "prod" then acc = acc * v
      elseif op == "max" then acc = math.max(acc, v)
      else acc = math.min(acc, v) end
    end
    out[j] = op == "avg" and acc // n or acc
  end
  return out
end

local function close_enough(want, got, what)
  assert.are.equal(#want, #got, what)
  for j = 1, #want do
    assert(math.abs(want[j] - got[j]) <= 1e-5 * math.abs(want[j]) + 1e-6,
      ("%s: element %d is %s, expected %s"):format(what, j, tostring(got[j]), tostring(want[j])))
  end
end

describe("cd.nccl on every GPU of the process", function()
  local comms

  before_each(function()
    if nccl_ok and cd.device_count() >= 2 and not comms then comms = cd.nccl.comms(cd.cuda_devices()) end
  end)

  multi_nccl_it("makes one communicator per GPU, rank i on the i-th device", function()
    assert.are.equal(cd.device_count(), #comms)
    for i, c in ipairs(comms) do
      assert.are.equal(i - 1, c.rank)
      assert.are.equal(#comms, c.size)
      assert.are.equal(cd.cuda_devices()[i], c.device)
    end
  end)

  multi_nccl_it("all_reduce: every op on float32, float64 and int32 against host values", function()
    local n = #comms
    for _, dtype in ipairs({ "float32", "float64", "int32" }) do
      for _, op in ipairs(OPS) do
        local xs, ys = {}, {}
        for i, c in ipairs(comms) do
          xs[i] = on(c, values(op, i - 1, n), dtype)
          ys[i] = cd.zeros(#BASE, dtype, { device = c.device })
        end
        cd.nccl.group(function()
          for i, c in ipairs(comms) do c:all_reduce(xs[i], ys[i], op) end
        end)
        local want = expected(op, n)
        for i = 1, n do close_enough(want, ys[i]:totable(), ("%s %s on rank %d"):format(dtype, op, i - 1)) end
        cd.nccl.group(function()                -- in place
          for i, c in ipairs(comms) do c:all_reduce(xs[i], xs[i], op) end
        end)
        for i = 1, n do close_enough(want, xs[i]:totable(), ("%s %s in place on rank %d"):format(dtype, op, i - 1)) end
      end
    end
  end)

  multi_nccl_it("broadcast, reduce, all_gather and reduce_scatter against host values", function()
    local n, m = #comms, #BASE
    local xs, ys = {}, {}
    for i, c in ipairs(comms) do
      xs[i] = on(c, values("sum", i - 1, n), "float32")
      ys[i] = cd.zeros(m, "float32", { device = c.device })
    end
    cd.nccl.group(function()
      for i, c in ipairs(comms) do c:broadcast(xs[i], ys[i], n - 1) end
    end)
    for i = 1, n do assert.are.same(values("sum", n - 1, n), ys[i]:totable(), "broadcast on rank " .. (i - 1)) end

    cd.nccl.group(function()
      for i, c in ipairs(comms) do ys[i]:zero(); c:reduce(xs[i], ys[i], "sum", 0) end
    end)
    assert.are.same(expected("sum", n), ys[1]:totable())

    local gathered = {}
    for i, c in ipairs(comms) do gathered[i] = cd.zeros(n * m, "float32", { device = c.device }) end
    cd.nccl.group(function()
      for i, c in ipairs(comms) do c:all_gather(xs[i], gathered[i]) end
    end)
    local want = {}
    for r = 0, n - 1 do for _, v in ipairs(values("sum", r, n)) do want[#want + 1] = v end end
    for i = 1, n do assert.are.same(want, gathered[i]:totable(), "all_gather on rank " .. (i - 1)) end

    local big, part = {}, {}
    for i, c in ipairs(comms) do
      local t = {}
      for j = 1, n * m do t[j] = j + 100 * (i - 1) end
      big[i] = on(c, t, "float32")
      part[i] = cd.zeros(m, "float32", { device = c.device })
    end
    cd.nccl.group(function()
      for i, c in ipairs(comms) do c:reduce_scatter(big[i], part[i], "sum") end
    end)
    for i = 1, n do
      local w = {}
      for j = 1, m do
        local k, s = (i - 1) * m + j, 0
        for r = 0, n - 1 do s = s + k + 100 * r end
        w[j] = s
      end
      assert.are.same(w, part[i]:totable(), "reduce_scatter on rank " .. (i - 1))
    end

    local inplace = {}
    for i, c in ipairs(comms) do
      inplace[i] = cd.zeros(n * m, "float32", { device = c.device })
      inplace[i]:slice((i - 1) * m + 1, i * m):copy_from(xs[i])
    end
    cd.nccl.group(function()                  -- in place: send is recv's slice of this rank
      for i, c in ipairs(comms) do c:all_gather(inplace[i]:slice((i - 1) * m + 1, i * m), inplace[i]) end
    end)
    for i = 1, n do assert.are.same(want, inplace[i]:totable(), "all_gather in place on rank " .. (i - 1)) end
  end)

  multi_nccl_it("send and recv between ranks 0 and 1 in a group", function()
    local a0 = on(comms[1], { 1, 2, 3 }, "float64")
    local b1 = cd.zeros(3, "float64", { device = comms[2].device })
    local a1 = on(comms[2], { -4, -5, -6 }, "float64")
    local b0 = cd.zeros(3, "float64", { device = comms[1].device })
    cd.nccl.group(function()
      comms[1]:send(a0, 1)
      comms[1]:recv(b0, 1)
      comms[2]:send(a1, 0)
      comms[2]:recv(b1, 0)
    end)
    assert.are.same({ 1, 2, 3 }, b1:totable())
    assert.are.same({ -4, -5, -6 }, b0:totable())
  end)

  multi_nccl_it("refuses an array or a stream of another GPU", function()
    local other = cd.zeros(2, "float32", { device = comms[2].device })
    local mine = cd.zeros(2, "float32", { device = comms[1].device })
    helper.assert_error_matches(function() comms[1]:all_reduce(mine, other, "sum") end,
      ("bad argument #2 to 'all_reduce' (array on %s but the communicator is on %s)"):format(comms[2].device.alias,
        comms[1].device.alias))
    helper.assert_error_matches(function() comms[1]:all_reduce(mine, mine, "sum", cd.stream(comms[2].device)) end,
      ("bad argument #4 to 'all_reduce' (stream is on %s but the communicator is on %s)"):format(comms[2].device.alias,
        comms[1].device.alias))
  end)
end)
