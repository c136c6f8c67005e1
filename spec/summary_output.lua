-- busted output handler: busted's usual terminal output, then one plain closing line that CI and people can
-- read the same way everywhere:
--   busted: 12 passed, 0 failed, 3 skipped
-- (failed counts failures and errors; skipped counts pending tests, e.g. gpu_it on a machine with no GPU).
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

return function(options)
  local busted = require "busted"
  local term = require "term"
  local isatty = io.type(io.stdout) == "file" and term.isatty(io.stdout)
  local handler = require("busted.outputHandlers." .. (isatty and "utfTerminal" or "plainTerminal"))(options)

  local subscribe = handler.subscribe
  handler.subscribe = function(self, opts)
    subscribe(self, opts)
    local before, leaks = nil, {}
    busted.subscribe({ "file", "start" }, function()
      before = live_now()
      return nil, true
    end)
    busted.subscribe({ "file", "end" }, function(file)
      local after = live_now()
      if before and after and after.total ~= before.total then
        leaks[#leaks + 1] = ("%s left cudadev objects alive: %s"):format(file and file.name or "?", live_diff(before, after))
      end
      return nil, true
    end)
    -- registered after the terminal handler's own summary, so this line comes last
    busted.subscribe({ "suite", "end" }, function()
      for _, l in ipairs(leaks) do io.write(l, "\n") end
      io.write(("busted: %d passed, %d failed, %d skipped\n"):format(handler.successesCount,
        handler.failuresCount + handler.errorsCount + #leaks, handler.pendingsCount))
      io.flush()
      return nil, true
    end)
  end
  return handler
end
