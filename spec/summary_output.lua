-- busted output handler, sized for a person watching a long run (issue 30):
--   * one progress line per spec file as it ends, with a count: `[12/41] spec/20-arrays_spec.lua  58 passed,
--     0 failed, 3 skipped  (4.2 s)` (busted's own handlers print a `+` or `.` per test: minutes of dots);
--   * the name of each test that failed or erred, under its file's line (a run cut short by a time limit, as a
--     device call's is, still says which), and the failures and errors in full, as busted prints them, at the end;
--   * each reason for a skip (a pending test, e.g. gpu_it on a machine with no GPU) once, with its count, where
--     busted prints every pending test with its reason;
--   * then one plain closing line that CI and people read the same way everywhere:
--     busted: 12 passed, 0 failed, 3 skipped
-- (failed counts failures and errors; skipped counts pending tests).
--
-- It also checks, after every spec file, that the file left no cudadev object alive (issue #7): once the
-- file's tests ran and the collector ran, cd._live() must be back where it was before the file. A file that
-- leaves objects behind counts as one failure, and its counts are printed before the closing line.

-- cd._live() after a full collection, or nil when cudadev cannot be loaded (it is loaded by the specs'
-- own search paths: the first file's start is before any spec required it)
local function live_now()
  local ok, cd = pcall(require, "cudadev")
  if not ok or type(cd._live) ~= "function" then return nil end
  collectgarbage()
  collectgarbage()
  return cd._live()
end

local function live_diff(before, after)
  local parts = {}
  for k, v in pairs(after) do
    if k ~= "total" and v ~= (before[k] or 0) then parts[#parts + 1] = ("%s %+d"):format(k, v - (before[k] or 0)) end
  end
  table.sort(parts)
  return table.concat(parts, ", ")
end

-- A pending test's reason: its message's first line, else what its name ends with in parentheses (spec/helper.lua's
-- gpu_it and the like name a skipped test "what it tests (why it is skipped)"), else its name.
local function reason_of(p)
  local m = p.message
  if type(m) == "string" and m ~= "" then return (m:match("^[^\n]*")) end
  local name = p.name or "?"
  for i in name:gmatch("() %(") do
    if name:sub(i + 1):match("^%b()$") then return name:sub(i + 2, -2) end
  end
  return name
end

local function counts(h)
  return h.successesCount, h.failuresCount + h.errorsCount, h.pendingsCount
end

return function(options)
  local busted = require "busted"
  -- busted's plain handler does the failure texts; its per-test dots are replaced by the per-file lines below
  options.deferPrint = true
  local handler = require("busted.outputHandlers.plainTerminal")(options)
  local nfiles, done, file_start, at_start, pendings, bad_at = 0, 0, 0, { 0, 0, 0 }, {}, { 0, 0 }

  local subscribe = handler.subscribe
  handler.subscribe = function(self, opts)
    subscribe(self, opts)
    local before, leaks = nil, {}
    -- first of the suite's end: the plain handler's summary then lists no pending test (grouped below)
    busted.subscribe({ "suite", "end" }, function()
      pendings, handler.pendings = handler.pendings, {}
      return nil, true
    end, { priority = 1 })
    busted.subscribe({ "suite", "start" }, function(root)
      nfiles = 0
      for _, c in ipairs(busted.children(root)) do
        if c.descriptor == "file" then nfiles = nfiles + 1 end
      end
      return nil, true
    end)
    busted.subscribe({ "file", "start" }, function()
      before = live_now()
      file_start, at_start, bad_at = busted.monotime(), { counts(handler) }, { #handler.failures, #handler.errors }
      return nil, true
    end)
    busted.subscribe({ "file", "end" }, function(file)
      local name = file and file.name or "?"
      local after = live_now()
      if before and after and after.total ~= before.total then
        leaks[#leaks + 1] = ("%s left cudadev objects alive: %s"):format(name, live_diff(before, after))
      end
      done = done + 1
      local p, f, s = counts(handler)
      io.write(("[%d/%d] %-40s %4d passed, %d failed, %d skipped  (%.1f s)\n"):format(done, nfiles, name,
        p - at_start[1], f - at_start[2], s - at_start[3], busted.monotime() - file_start))
      for k, list in ipairs { handler.failures, handler.errors } do
        for i = bad_at[k] + 1, #list do io.write(("    %s: %s\n"):format(k == 1 and "failed" or "error", list[i].name)) end
      end
      io.flush()
      return nil, true
    end)
    -- registered after the terminal handler's own summary, so this line comes last
    busted.subscribe({ "suite", "end" }, function()
      local groups, order = {}, {}
      for _, p in ipairs(pendings) do
        local r = reason_of(p)
        if not groups[r] then order[#order + 1] = r end
        groups[r] = (groups[r] or 0) + 1
      end
      if #order > 0 then io.write("\nskipped, by reason:\n") end
      for _, r in ipairs(order) do io.write(("  %5d  %s\n"):format(groups[r], r)) end
      handler.pendings = pendings
      for _, l in ipairs(leaks) do io.write(l, "\n") end
      io.write(("busted: %d passed, %d failed, %d skipped\n"):format(handler.successesCount,
        handler.failuresCount + handler.errorsCount + #leaks, handler.pendingsCount))
      io.flush()
      return nil, true
    end)
  end
  return handler
end
