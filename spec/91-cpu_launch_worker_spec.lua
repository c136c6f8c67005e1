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
