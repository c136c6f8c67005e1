-- What the README and the examples tell a new user to type works as written, on the cpu device:
--   * each ```lua block of README.md, pasted line by line into build/luacuda (its interactive loop);
--   * each command of README.md's ```sh blocks that runs a script (build/luacuda ..., LUA_CPATH=... lua5.4 ...);
--   * the command in the header of every example (the line `make build && COMMAND`), run from the repository
--     root. An example whose header says it needs a CUDA device is pending without one.
-- The build is already made (make test builds first), so `make build && ` is not run again.
local helper = require "spec.helper"
local manual = require "spec.manual"

local sh = helper.shell_quote
local ls = manual.ls
local function slurp(path) return assert(manual.slurp(path), "cannot read " .. path) end

-- Runs a shell command from the repository root (on the cpu device unless on_default_device); returns its
-- output and whether it exited 0. The commands run the plain build as a user would, so the AddressSanitizer
-- runtime that `make asan` preloads into lua5.4 is not preloaded into them (a forked cpu launch of the
-- multithreaded embed_threads hangs under it, which is why `make asan` skips spec/75 too).
local function run(cmd, input_path, on_default_device)
  local full = ("env -u LD_PRELOAD %stimeout 300 sh -c %s%s 2>&1; echo \"exit $?\""):format(
    on_default_device and "" or "CUDADEV_DEVICE=cpu ", sh(cmd),
    input_path and (" < " .. sh(input_path)) or "")
  local p = io.popen(full, "r")
  local out = p:read("a")
  p:close()
  local code = tonumber(out:match("exit (%d+)\n$"))
  return out:gsub("exit %d+\n$", ""), code == 0
end

-- The fenced blocks of a markdown text in a language: a list of texts.
local function blocks(text, lang)
  local out = {}
  for body in text:gmatch("\n```" .. lang .. "\n(.-)\n```") do out[#out + 1] = body end
  return out
end

-- The script-running commands of README's sh blocks (without their trailing # comments).
local function readme_commands(text)
  local out = {}
  for _, b in ipairs(blocks(text, "sh")) do
    for line in (b .. "\n"):gmatch("([^\n]*)\n") do
      local cmd = line:gsub("%s+#.*$", "")
      if cmd:match("^build/luacuda ") or cmd:match("^LUA_CPATH=") or cmd:match("^CUDADEV_DEVICE=cpu build/") then
        out[#out + 1] = cmd
      end
    end
  end
  return out
end

-- An example's header: its leading comment lines (-- or a /* */ block).
local function header(text)
  if text:match("^/%*") then return text:match("^(/%*.-%*/)") or "" end
  local lines = {}
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    if not line:match("^%-%-") then break end
    lines[#lines + 1] = line
  end
  return table.concat(lines, "\n")
end

-- The command after `make build && ` in a header line, up to two spaces or a comment, without [optional] args.
local function header_command(h)
  local rest = h:match("make build && ([^\n]+)")
  if not rest then return nil end
  rest = rest:gsub("%s%s.*$", ""):gsub("%s*%[[^%]]*%]", ""):gsub("%s+$", "")
  return rest
end

local have_luacuda = helper.file_exists("build/luacuda")
local function luacuda_it(name, fn)
  if not have_luacuda then return pending(name .. " (build/luacuda was not built)") end
  return it(name, fn)
end

describe("README.md", function()
  local readme = slurp("README.md")

  it("links the manual on its first screen", function()
    local first = readme:sub(1, (select(2, readme:find("\n## First steps", 1, true))) or #readme)
    assert.truthy(first:find("(doc/manual.md)", 1, true), "README's first screen does not link doc/manual.md")
  end)

  for i, snippet in ipairs(blocks(readme, "lua")) do
    luacuda_it(("lua snippet %d works pasted line by line into build/luacuda"):format(i), function()
      local path = os.tmpname()
      local f = assert(io.open(path, "w"))
      f:write(snippet, "\nprint('snippet done')\n")
      f:close()
      local out, ok = run("build/luacuda -i -q", path)
      os.remove(path)
      assert(ok, out)
      assert.falsy(out:match("stdin:%d+:"), "an error in the REPL:\n" .. out)
      assert.falsy(out:find("traceback", 1, true), out)
      assert.truthy(out:find("snippet done", 1, true), out)
    end)
  end

  local cmds = readme_commands(readme)
  it("says how to run a script", function()
    assert(#cmds >= 2, "no `build/luacuda script` and `LUA_CPATH=... lua5.4 script` commands in README's sh blocks")
  end)
  for _, cmd in ipairs(cmds) do
    luacuda_it("runs: " .. cmd, function()
      local out, ok = run(cmd)
      assert(ok, cmd .. "\n" .. out)
    end)
  end
end)

describe("examples", function()
  local files = ls("examples/*.lua")
  for _, p in ipairs(ls("examples/embed/*.c")) do files[#files + 1] = p end

  for _, path in ipairs(files) do
    local h = header(slurp(path))
    local cmd = header_command(h)
    local name = ("%s: its header's command works from the repository root"):format(path)
    if not cmd then
      it(name, function() error(path .. ": no `make build && COMMAND` line in its header comment") end)
    elseif h:lower():find("needs a cuda device", 1, true) then
      helper.gpu_it(name .. " (" .. cmd .. ")", function()
        local out, ok = run(cmd, nil, true)
        assert(ok, cmd .. "\n" .. out)
      end)
    else
      luacuda_it(name .. " (" .. cmd .. ")", function()
        local out, ok = run(cmd)
        assert(ok, cmd .. "\n" .. out)
      end)
    end
  end

  it("finds a header command in the forms the examples use", function()
    assert.equal("build/luacuda examples/saxpy.lua",
                 header_command("--   make build && build/luacuda examples/saxpy.lua [N]     N elements"))
    assert.equal("build/embed_host", header_command(" *   make build && build/embed_host     (from the root)"))
    assert.is_nil(header_command("--   lua5.4 examples/x.lua"))
  end)
end)
