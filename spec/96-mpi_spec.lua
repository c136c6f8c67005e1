-- cd.mpi (doc/mpi.md): jobs of 2 and 3 ranks under `mpirun --oversubscribe`, each rank a build/luacuda on the cpu
-- device; one script per job checks everything it can (bcast of values and arrays, allreduce of every op on every
-- numeric dtype against sums computed here, send/recv, the errors of mismatched arguments on every rank), and
-- prints one line per rank when all of it held. A job is bounded by `timeout`: a hang fails the spec, not CI.
-- Pending with the reason where mpirun, build/luacuda or build/cudadev_mpi.so is missing. The ASan and valgrind
-- passes leave this file out (Makefile): its ranks are processes of their own, built in build/, that neither pass
-- instruments.
local helper = require "spec.helper"
local cd = require "cudadev"

local root = io.popen("pwd"):read("l")
local sh = helper.shell_quote

local function have(cmd) return os.execute("command -v " .. cmd .. " >/dev/null 2>&1") == true end
local why_not
if not have("mpirun") then why_not = "mpirun is not installed (apt-get install openmpi-bin libopenmpi-dev)"
elseif not helper.file_exists(root .. "/build/luacuda") then why_not = "build/luacuda was not built (make build)"
elseif not helper.file_exists(root .. "/build/cudadev_mpi.so") then
  why_not = "build/cudadev_mpi.so was not built (MPI not found by CMake: apt-get install libopenmpi-dev)"
end

local function mpi_it(name, fn)
  if why_not then return pending(name .. " (" .. why_not .. ")") end
  return it(name, fn)
end

-- runs cmd with a time bound; returns its output (stdout and stderr), exit code
local function run(cmd)
  local p = io.popen("(" .. cmd .. ") 2>&1")
  local out = p:read("a")
  local _, _, code = p:close()
  return out, code
end

-- The lines of `out` that match `pattern`: what our script printed, without the lines a host's MPI stack may add on
-- its own (PMIx's plugin warnings, say), in their order.
local function lines_like(out, pattern)
  local keep = {}
  for line in out:gmatch("[^\n]*\n") do
    if line:match(pattern) then keep[#keep + 1] = line end
  end
  return table.concat(keep)
end

-- An mpirun job of n ranks running `script`, on the cpu device, bounded. mpirun refuses root unless told (CI
-- runs as root); the ranks' output is what they print, in any order.
local BOUND = 60
local function job(n, script)
  local path = os.tmpname()
  helper.write_file(path, script)
  local out, code = run(("cd %s && env -u LD_PRELOAD CUDADEV_DEVICE=cpu OMPI_ALLOW_RUN_AS_ROOT=1 "
    .. "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 timeout -k 5 %d "
    .. "mpirun --oversubscribe -n %d build/luacuda %s"):format(sh(root), BOUND, n, sh(path)))
  os.remove(path)
  return out, code
end

-- the checks every rank runs; `check` raises with the line that failed
local SCRIPT = [==[
local cd, mpi = cuda, cuda.mpi
local r, n = mpi.rank(), mpi.size()
local cpu = { device = "cpu" }
local function check(ok, what) if not ok then error(("rank %d: %s"):format(r, what), 2) end end
local function same(t, u)
  if #t ~= #u then return false end
  for i = 1, #t do if t[i] ~= u[i] then return false end end
  return true
end
local function raises(fn, text)
  local ok, err = pcall(fn)
  err = tostring(err):gsub("^[^:]*:%d+: ", "")   -- the position of the call
  check(not ok and err == text, "expected the error " .. text .. ", got " .. tostring(err))
end

-- values: nil, booleans, integers, floats, strings, nested tables; the root's value on every rank
local v = mpi.bcast(r == 0 and { 1, 2.5, "three", true, nested = { x = false, [7] = "y" }, [10] = -7 } or "ignored")
check(math.type(v[1]) == "integer" and v[1] == 1 and v[2] == 2.5 and v[3] == "three" and v[4] == true, "bcast value")
check(v.nested.x == false and v.nested[7] == "y" and v[10] == -7, "bcast nested table")
check(mpi.bcast(nil, n - 1) == nil, "bcast nil")
check(mpi.bcast(r == n - 1 and "from the last" or nil, n - 1) == "from the last", "bcast from the last rank")
check(mpi.bcast(r == 0 and 2^53 + 1 or 0) == 2^53 + 1, "bcast integer exact")

-- arrays: in place (dtype and shape alike), and a new cpu array where a rank passes nil
local a = r == n - 1 and cd.array({ 4, -5, 6 }, "int16", cpu) or cd.zeros(3, "int16", cpu)
check(mpi.bcast(a, n - 1) == a and same(a:totable(), { 4, -5, 6 }), "bcast array in place")
local b = mpi.bcast(r == 0 and cd.array({ { 1.5, 2 }, { 3, 4 } }, "float64", cpu) or nil)
check(b.dtype == "float64" and same(b.shape, { 2, 2 }) and b:totable()[2][2] == 4 and b.device.is_cpu, "bcast new array")
check(mpi.bcast(cd.zeros(0, "float32", cpu)).size == 0, "bcast empty array")

-- allreduce: every op, every numeric dtype, against what this rank computes from every rank's values
local function vals(k) return { (k + 1) % 3 + 1, (k + 2) % 4 + 1, k + 1, 2, (k * 5) % 7 } end
local fold = {
  sum = function(x, y) return x + y end, prod = function(x, y) return x * y end,
  max = math.max, min = math.min,
}
for _, dt in ipairs({ "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16",
                      "uint32", "uint64" }) do
  for _, op in ipairs({ "sum", "prod", "max", "min" }) do
    local want = vals(0)
    for k = 1, n - 1 do
      local vk = vals(k)
      for i = 1, #want do want[i] = fold[op](want[i], vk[i]) end
    end
    local x = cd.array(vals(r), dt, cpu)
    check(mpi.allreduce(x, op) == x, "allreduce returns its array")
    local got = x:totable()
    for i = 1, #want do
      check(got[i] == want[i], ("allreduce %s %s [%d]: %s, not %s"):format(dt, op, i, got[i], want[i]))
    end
  end
end
local bools = cd.array({ r == 0, true, false }, "bool", cpu)
check(same(mpi.allreduce(bools, "sum"):totable(), { true, true, false }), "allreduce bool sum (any)")
bools = cd.array({ r == 0, true, false }, "bool", cpu)
check(same(mpi.allreduce(bools, "prod"):totable(), { n == 1, true, false }), "allreduce bool prod (all)")

-- send/recv around a ring: values, and arrays received in place or as new ones
local right, left = (r + 1) % n, (r - 1) % n
local function pass(x, tag)
  if r == 0 then
    mpi.send(x, right, tag)
    return mpi.recv(nil, left, tag)
  end
  local got = mpi.recv(nil, left, tag)
  mpi.send(x, right, tag)
  return got
end
local got = pass({ from = r, list = { 1, 2, 3 } }, 3)
check(got.from == left and same(got.list, { 1, 2, 3 }), "send/recv value")
got = pass(cd.array({ r, r + 1 }, "uint32", cpu), 4)
check(got.dtype == "uint32" and same(got:totable(), { left, left + 1 }), "send/recv new array")
if r == 0 then
  mpi.send(cd.array({ 1, 2, 3 }, "float32", cpu), right)
  mpi.recv(nil, left)
else
  local into = cd.zeros(3, "float32", cpu)
  check(mpi.recv(into, left) == into and same(into:totable(), { 1, 2, 3 }), "recv in place")
  mpi.send(into, right)
end

-- errors: every rank raises the same message, naming the rank whose argument is wrong, and the job goes on
local mine = cd.zeros(n > 1 and r == 1 and 4 or 3, "float32", cpu)
if n > 1 then
  raises(function() mpi.allreduce(mine, "sum") end,
    "bad argument #1 to 'allreduce' (rank 1: Array float32[4] does not match rank 0's float32[3])")
  raises(function() mpi.bcast(mine, 0) end,
    "bad argument #1 to 'bcast' (rank 1: Array float32[4] does not match the root's float32[3])")
  raises(function() mpi.allreduce(cd.zeros(3, "float32", cpu), r == n - 1 and "max" or "sum") end,
    ("bad argument #2 to 'allreduce' (rank %d: op \"max\" does not match rank 0's \"sum\")"):format(n - 1))
  raises(function() mpi.bcast(cd.zeros(3, r == 1 and "int32" or "float32", cpu)) end,
    "bad argument #1 to 'bcast' (rank 1: Array int32[3] does not match the root's float32[3])")
  if r == 0 then
    mpi.send(cd.zeros(3, "float32", cpu), 1, 9)
  elseif r == 1 then
    raises(function() mpi.recv(cd.zeros(4, "float32", cpu), 0, 9) end,
      "bad argument #1 to 'recv' (Array float32[4] does not match the float32[3] that rank 0 sent)")
  end
  if r == 0 then
    raises(function() mpi.send(print, 1, 10) end, "bad argument #1 to 'send' (cannot send a function)")
  elseif r == 1 then
    raises(function() mpi.recv(nil, 0, 10) end, "recv: rank 0 could not send (cannot send a function)")
  end
end
raises(function() mpi.allreduce(mine, "avg") end,
  "bad argument #2 to 'allreduce' (rank 0: op must be \"sum\", \"prod\", \"max\" or \"min\", got \"avg\")")
raises(function() mpi.bcast(r == 0 and { f = print } or nil) end,
  "bad argument #1 to 'bcast' (rank 0: cannot send a function inside a table)")
local loop = {}
loop.self = loop
raises(function() mpi.bcast(loop) end, "bad argument #1 to 'bcast' (rank 0: cannot send a table that contains itself)")
raises(function() mpi.bcast(1, n) end,
  ("bad argument #2 to 'bcast' (rank %d out of range (the job has %d rank%s))"):format(n, n, n == 1 and "" or "s"))
raises(function() mpi.send(1, 0, 40000) end, "bad argument #3 to 'send' (tag must be an integer from 0 to 32767, got 40000)")
raises(function() mpi.recv(5, 0) end, "bad argument #1 to 'recv' (Array or nil expected, got number)")
local nccl = rawget(cd, "nccl")
if type(nccl) ~= "table" or not (type(nccl.is_available) ~= "function" or nccl.is_available()) then
  local ok, err = pcall(mpi.nccl_comm)
  err = tostring(err):gsub("^[^:]*:%d+: ", "")
  check(not ok and err:find("nccl_comm: rank 0: NCCL is not available (", 1, true) == 1, "nccl_comm: " .. tostring(err))
end
mpi.barrier()
print(("rank %d of %d ok"):format(r, n))
]==]

describe("cd.mpi", function()
  it("is_available says whether cudadev_mpi.so opens, without starting MPI", function()
    local ok, why = cd.mpi.is_available()
    if helper.file_exists(root .. "/build/cudadev_mpi.so") then
      assert.are.equal(true, ok, why)
    else
      assert.are.equal(false, ok)
      assert.are.equal("string", type(why))
    end
  end)

  mpi_it("is_available is false, with every path tried, where cudadev_mpi.so cannot open", function()
    local out = run(("cd %s && CUDADEV_MPI_SHIM=/nonexistent/cudadev_mpi.so build/luacuda -e %s")
      :format(sh(root), sh("print(cuda.mpi.is_available()) print(pcall(cuda.mpi.rank))")))
    out = lines_like(out, "^false\t")
    assert.are.equal("false\t/nonexistent/cudadev_mpi.so: cannot open shared object file: No such file or directory\n"
      .. "false\tMPI is not available (/nonexistent/cudadev_mpi.so: cannot open shared object file: No such file "
      .. "or directory)\n", out)
  end)

  mpi_it("runs alone as a job of one rank (MPI started on first use, finalised at exit)", function()
    local path = os.tmpname()
    helper.write_file(path, SCRIPT)
    local out, code = run(("cd %s && env -u LD_PRELOAD CUDADEV_DEVICE=cpu timeout -k 5 %d build/luacuda %s")
      :format(sh(root), BOUND, sh(path)))
    os.remove(path)
    assert.are.equal(0, code, out)
    assert.are.equal("rank 0 of 1 ok\n", lines_like(out, "^rank "), out)
  end)

  for _, n in ipairs({ 2, 3 }) do
    mpi_it(("bcast, allreduce, send/recv and their errors under mpirun -n %d"):format(n), function()
      local out, code = job(n, SCRIPT)
      assert.are.equal(0, code, out)
      for r = 0, n - 1 do
        assert.truthy(out:find(("rank %d of %d ok\n"):format(r, n), 1, true), out)
      end
    end)
  end

  mpi_it("a rank that raises ends the job with its message, while the others wait in a collective", function()
    local t0 = cd.now()
    local out, code = job(3, [[
      if cuda.mpi.rank() == 1 then error("rank 1 gives up") end
      cuda.mpi.bcast(cuda.zeros(4, "float32", { device = "cpu" }), 0)
      print("not reached")
    ]])
    assert.are_not.equal(0, code, out)
    assert.are_not.equal(124, code, out)   -- timeout's status: the job hung
    assert.truthy(out:find("rank 1 gives up", 1, true), out)
    assert.falsy(out:find("not reached", 1, true), out)
    assert.truthy(cd.now() - t0 < BOUND, out)
  end)

  mpi_it("nccl_comm says NCCL is missing on every rank, before any rank waits", function()
    local out, code = job(2, [[
      local nccl = rawget(cuda, "nccl")
      if type(nccl) == "table" and (type(nccl.is_available) ~= "function" or nccl.is_available()) then
        print("NCCL is here") return
      end
      local ok, err = pcall(cuda.mpi.nccl_comm)
      print(cuda.mpi.rank(), ok, (err:gsub("%(.*", "(...)")))
    ]])
    assert.are.equal(0, code, out)
    if not out:find("NCCL is here", 1, true) then
      assert.truthy(out:find("0\tfalse\tnccl_comm: rank 0: NCCL is not available (...)\n", 1, true), out)
      assert.truthy(out:find("1\tfalse\tnccl_comm: rank 0: NCCL is not available (...)\n", 1, true), out)
    end
  end)

  -- issue 21: one rank per GPU, the ranks' communicator made by cd.mpi.nccl_comm (device = local rank), every
  -- collective and a send/recv ring checked against values each rank computes on the host
  local RANKS_SCRIPT = [==[
local cd, mpi = cuda, cuda.mpi
local r, n = mpi.rank(), mpi.size()
local c = mpi.nccl_comm()
local D = { device = c.device.alias }
local N = 8
local function check(ok, what) if not ok then error(("rank %d: %s"):format(r, what), 2) end end
local function vals(k) local t = {} for i = 1, N do t[i] = (k + 1) * i end return t end
for _, op in ipairs { "sum", "prod", "max", "min", "avg" } do
  local out = cd.empty(N, "float64", D)
  c:all_reduce(cd.array(vals(r), "float64", D), out, op)
  cd.synchronize()
  for i = 1, N do
    local e = (op == "prod") and 1 or 0
    for k = 0, n - 1 do
      local v = (k + 1) * i
      if op == "prod" then e = e * v elseif op == "max" then e = math.max(e, v)
      elseif op == "min" then e = (k == 0) and v or math.min(e, v) else e = e + v end
    end
    if op == "avg" then e = e / n end
    check(math.abs(out[i] - e) <= 1e-12 * math.abs(e), ("all_reduce %s [%d]: %s, not %s"):format(op, i, out[i], e))
  end
end
local b = cd.array(vals(r), "float32", D)
c:broadcast(b, b, n - 1)
local g = cd.empty(N * n, "int32", D)
c:all_gather(cd.full(N, r + 1, "int32", D), g)
local rs = cd.empty(N, "float32", D)
c:reduce_scatter(cd.full(N * n, r + 1, "float32", D), rs, "sum")
local red = cd.zeros(N, "float64", D)
c:reduce(cd.full(N, r + 1, "float64", D), red, "sum", 0)
local sbuf, rbuf = cd.full(N, r, "float64", D), cd.zeros(N, "float64", D)
cd.nccl.group(function() c:send(sbuf, (r + 1) % n) c:recv(rbuf, (r - 1) % n) end)
cd.synchronize()
for i = 1, N do
  check(b[i] == n * i, "broadcast")
  check(rs[i] == n * (n + 1) / 2, "reduce_scatter")
  check(rbuf[i] == (r - 1) % n, "send/recv")
  check(r ~= 0 or red[i] == n * (n + 1) / 2, "reduce")
  for k = 0, n - 1 do check(g[k * N + i] == k + 1, "all_gather") end
end
print(("rank %d of %d on %s: all_reduce of every op, broadcast, reduce, all_gather, reduce_scatter, send/recv ok")
  :format(r, n, c.device.alias))
]==]
  local multi_it = why_not and function(name) pending(name .. " (" .. why_not .. ")") end or helper.multi_gpu_it
  multi_it("mpirun with one rank per GPU: every collective through cd.mpi.nccl_comm, against host values", function()
    local n = cd.device_count()
    local path = os.tmpname()
    helper.write_file(path, RANKS_SCRIPT)
    local out, code = run(("cd %s && env -u LD_PRELOAD OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
      .. "timeout -k 5 %d mpirun -n %d build/luacuda %s"):format(sh(root), BOUND, n, sh(path)))
    os.remove(path)
    assert.are.equal(0, code, out)
    for r = 0, n - 1 do
      assert.truthy(out:find(("rank %d of %d on cuda:%d: all_reduce of every op, broadcast, reduce, all_gather, "
        .. "reduce_scatter, send/recv ok\n"):format(r, n, r), 1, true), out)
    end
  end)

  local gpu_it = why_not and function(name) pending(name .. " (" .. why_not .. ")") end or helper.gpu_it
  gpu_it("nccl_comm alone (one rank) makes a communicator of one on cuda:0", function()
    local out, code = run(("cd %s && env -u LD_PRELOAD timeout -k 5 %d build/luacuda -e %s"):format(sh(root), BOUND,
      sh("local c = cuda.mpi.nccl_comm() print(c.rank, c.size, c.device.alias)")))
    assert.are.equal(0, code, out)
    assert.are.equal("0\t1\tcuda:0\n", out)
  end)
end)
