-- busted output handler: busted's usual terminal output, then one plain closing line that CI and people can
-- read the same way everywhere:
--   busted: 12 passed, 0 failed, 3 skipped
-- (failed counts failures and errors; skipped counts pending tests, e.g. gpu_it on a machine with no GPU).
return function(options)
  local busted = require "busted"
  local term = require "term"
  local isatty = io.type(io.stdout) == "file" and term.isatty(io.stdout)
  local handler = require("busted.outputHandlers." .. (isatty and "utfTerminal" or "plainTerminal"))(options)

  local subscribe = handler.subscribe
  handler.subscribe = function(self, opts)
    subscribe(self, opts)
    -- registered after the terminal handler's own summary, so this line comes last
    busted.subscribe({ "suite", "end" }, function()
      io.write(("busted: %d passed, %d failed, %d skipped\n"):format(handler.successesCount,
        handler.failuresCount + handler.errorsCount, handler.pendingsCount))
      io.flush()
      return nil, true
    end)
  end
  return handler
end
