-- The cpu launch worker's cost in hosts that serve requests (issue 30; NOTE [launch worker] in src/cpu_run.c):
-- what a fork of the worker costs a process allowed many descriptors, and the private cache directories that
-- killed processes leave.
local helper = require "spec.helper"

-- A child lua5.4 run under strace -f, its descriptor limit raised to the hard limit: the close() calls of all its
-- processes, and the limit. Pending reasons come back as a string.
local function traced_closes(code)
  if not helper.run_command("command -v strace"):find("strace") then return nil, "no strace" end
  local path = os.tmpname()
  helper.write_file(path, ("package.cpath = %q\nlocal cd = require 'cudadev'\n"):format(package.cpath) .. code)
  local log = path .. ".strace"
  local out = helper.run_command(("ulimit -n $(ulimit -Hn); ulimit -n; strace -f -qq -e trace=close -o %s lua5.4 %s")
    :format(helper.shell_quote(log), helper.shell_quote(path)))
  local text = helper.read_file(log)
  os.remove(path)
  os.remove(log)
  local _, closes = text:gsub("close%(", "")
  return closes, tonumber(out:match("^(%d+)")), out
end

describe("the launch worker in a process allowed many descriptors", function()
  helper.worker_it("closes the host's descriptors with close_range, not a close() each up to the limit", function()
    local closes, limit, out = traced_closes([[
local m = cd.compile('extern "C" __global__ void k(int *p) { p[0] += 1; }', { device = "cpu" })
local a = cd.zeros(1, "int32", { device = "cpu" })
m.k({ grid = 1, block = 1 }, a)
print("value", a[1])
]])
    if not closes then return pending(limit) end
    if limit < 4096 then return pending("a hard descriptor limit of " .. limit) end
    assert(out:find("value\t1", 1, true), out)
    assert(closes < 2000, ("%d close() calls for a limit of %d descriptors"):format(closes, limit))
  end)
end)

-- NOTE [maps for the worker] (src/cpu_run.c)
describe("arrays made between launches", function()
  local cd = require "cudadev"
  local CPU = { device = "cpu" }
  local SRC = 'extern "C" __global__ void k(float *p, int n) '
    .. '{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) p[i] += 1; }'

  helper.worker_it("reach the live launch worker: a loop of new arrays and launches forks no new worker", function()
    local m = cd.compile(SRC, CPU)
    local a = cd.zeros(4096, "float32", CPU)
    local function step(i)
      local b = a * 2 + 1 -- the operations' results: new arrays (their modules load at the first step)
      m.k({ grid = 16, block = 256 }, b, 4096)
      local big = cd.full(100000 + i, i, "int32", CPU) -- a mapping of its own, a new size each time
      m.k({ grid = 1, block = 1 }, big, 0)
      return b:sum(), big[100000 + i]
    end
    step(0)
    local forks = cd._cpu_worker_forks()
    for i = 1, 40 do
      local s, last = step(i)
      assert.are.same({ 4096 * 2, i }, { s, last })
      if i % 10 == 0 then collectgarbage() end -- their mappings go too
    end
    assert.are.equal(forks, cd._cpu_worker_forks())
  end)

  helper.worker_it("a kernel's writes to an array made after the worker reach the host, and its guard pages fault",
    function()
      local m = cd.compile(SRC, CPU)
      m.k({ grid = 1, block = 1 }, cd.zeros(1, "float32", CPU), 1) -- the worker exists
      local forks = cd._cpu_worker_forks()
      local small, big = cd.zeros(8, "float32", CPU), cd.zeros(5000, "float32", CPU)
      m.k({ grid = 1, block = 8 }, small, 8)
      m.k({ grid = 20, block = 256 }, big, 5000)
      assert.are.same({ 1, 1, 1, 1, 1, 1, 1, 1 }, helper.values(small))
      assert.are.same({ 1, 1, 5000 }, { big[1], big[5000], big:sum() })
      assert.are.equal(forks, cd._cpu_worker_forks())
      -- a store past the end of the new array faults in its guard page, as in a worker forked after it
      local st = cd.compile('extern "C" __global__ void st(float *p, int i) { p[i] = 1; }', CPU)
      st.st({ grid = 1, block = 1 }, big, 0) -- loads the module (a fresh worker), then a new array to give it
      forks = cd._cpu_worker_forks()
      big = cd.zeros(1024, "float32", CPU) -- 4096 bytes: its end is a page's
      local ok, err = pcall(st.st, { grid = 1, block = 1 }, big, 1024 + 100)
      assert.are.equal(forks, cd._cpu_worker_forks())
      assert.is_false(ok)
      assert.are.equal("CUDA_ERROR_ILLEGAL_ADDRESS", err.name)
      assert.is_truthy(err.message:find("400 bytes past the end of the array at", 1, true), err.message)
    end)
end)

-- NOTE [stale private directories] (src/diskcache.c)
describe("the private cache directories of processes that are gone", function()
  local sh = helper.shell_quote
  local function run(cmd) assert(os.execute(cmd), cmd) end
  local function exists(path) return os.execute("test -e " .. sh(path) .. " -o -L " .. sh(path)) == true end
  -- a private directory as a process leaves it: an owner file, an object, a build directory with a file
  local function plant(dir, mode, owner)
    run(("mkdir -m %s %s %s && touch %s %s"):format(mode, sh(dir), sh(dir .. "/tmp-0123abcd-x"), sh(dir .. "/k.so"),
      sh(dir .. "/tmp-0123abcd-x/kernel.cpp")))
    if owner then helper.write_file(dir .. "/owner", owner) end
  end

  it("are removed at a fallback when they are ours, 0700 and their owner is gone; others stay", function()
    local base = helper.run_command("mktemp -d"):gsub("%s+$", "")
    local tmp = base .. "/tmp"
    run(("mkdir -m 0700 %s %s"):format(sh(tmp), sh(base .. "/elsewhere")))
    local dead = helper.run_command("sh -c 'echo $$'"):match("%d+") -- a process that has ended
    -- this process, by its pid and start time: alive
    local me = helper.read_file("/proc/self/stat")
    local pid, start = me:match("^(%d+)"), me:match("%)(.*)$"):match(("%S+%s+"):rep(19) .. "(%d+)")
    plant(tmp .. "/cudadev-dead01", "0700", dead .. " 12345\n")
    plant(tmp .. "/cudadev-reused", "0700", pid .. " " .. (start + 1) .. "\n") -- a live pid, another start
    plant(tmp .. "/cudadev-live01", "0700", pid .. " " .. start .. "\n")
    plant(tmp .. "/cudadev-old001", "0700", nil) -- no owner file: an older cudadev's, or one being made
    plant(tmp .. "/cudadev-open01", "0755", dead .. " 12345\n") -- not 0700: not one of ours
    plant(base .. "/elsewhere/cudadev-xxxxxx", "0700", dead .. " 12345\n")
    run(("ln -s %s %s"):format(sh(base .. "/elsewhere/cudadev-xxxxxx"), sh(tmp .. "/cudadev-link01")))
    helper.write_file(base .. "/file", "")
    local out = helper.run_child([[
local m = cd.compile('extern "C" __global__ void k(int *p) { p[0] = 7; }', { device = "cpu" })
local a = cd.zeros(1, "int32", { device = "cpu" })
m.k({ grid = 1, block = 1 }, a)
local dir = cd.kernel_cache_stats().cpu_disk_dir
local f = io.open(dir .. "/owner")
print("value", a[1], dir, f and f:read("l"))
]], ("TMPDIR=%s CUDADEV_CACHE_DIR=%s"):format(sh(tmp), sh(base .. "/file/cache")))
    local gone = {}
    for _, name in ipairs { "dead01", "reused", "live01", "old001", "open01", "link01" } do
      gone[name] = not exists(tmp .. "/cudadev-" .. name)
    end
    local link_target = exists(base .. "/elsewhere/cudadev-xxxxxx/k.so")
    local own, owner = out:match("value\t7\t(%S+)\t([^\n]*)")
    local own_left = own and exists(own)
    run("rm -rf " .. sh(base))
    assert.is_truthy(own, out)
    assert.are.same({ dead01 = true, reused = true, live01 = false, old001 = false, open01 = false, link01 = false },
      gone)
    assert.is_truthy(owner:match("^%d+ %d+$"), out) -- its own owner file: pid and start time
    assert.is_true(link_target, "the link's target was followed")
    assert.is_false(own_left, "the child's own private directory stayed")
  end)
end)
