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
