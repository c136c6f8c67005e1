-- luacuda, the interpreter and its interactive loop, tested as a person uses them:
--   * lua-compatible command lines through io.popen (options, arg, stdin, LUA_INIT, exit codes, busted);
--   * the interactive loop fed through a pipe (expressions, multi-line input, commands, errors);
--   * the interactive loop in a real terminal: tmux runs build/luacuda in a pseudo-terminal and the tests
--     type keys and read the screen (`tmux capture-pane -p`), polling with a timeout rather than sleeping;
--   * the pieces of lua/cudadev/repl.lua (pretty printing, completion, error display) in-process.
-- Tests that need build/luacuda, tmux or libedit are pending, with the reason, where those are missing.
local helper = require "spec.helper"
local cd = require "cudadev"
local repl = require "cudadev.repl"

local root = io.popen("pwd"):read("l")
local LUACUDA = os.getenv("LUACUDA") or root .. "/build/luacuda"   -- LUACUDA=... tests another build

local exists, sh = helper.file_exists, helper.shell_quote

local function shell_ok(cmd) return os.execute(cmd .. " >/dev/null 2>&1") == true end

local function slurp(path)
  local f = io.open(path, "rb")
  if not f then return "" end
  local s = f:read("a")
  f:close()
  return s
end

local have_luacuda = exists(LUACUDA)
local have_tmux = shell_ok("command -v tmux")
local have_libedit = have_luacuda and shell_ok("ldd " .. sh(LUACUDA) .. " | grep -q libedit")
local cpu_compiles = pcall(cd.compile, 'extern "C" __global__ void k(float *x) { x[0] = 1; }', { device = "cpu" })

local function pending_unless(cond, reason, name, fn)
  if not cond then return pending(("%s (%s)"):format(name, reason)) end
  return it(name, fn)
end

local function luacuda_it(name, fn)
  return pending_unless(have_luacuda, "build/luacuda was not built", name, fn)
end

local function tmux_it(name, fn, needs_editing)
  if not have_luacuda then return pending(name .. " (build/luacuda was not built)") end
  if not have_tmux then return pending(name .. " (tmux is not installed: apt-get install tmux)") end
  if needs_editing and not have_libedit then
    return pending(name .. " (luacuda was built without libedit: apt-get install libedit-dev and rebuild)")
  end
  return it(name, fn)
end

local sleep, now do
  local ok, system = pcall(require, "system")   -- luasystem, which busted uses
  sleep = ok and system.sleep or function(s) os.execute(("sleep %.2f"):format(s)) end
  now = ok and system.gettime or os.time
end

-- writes text to path (default: a new temporary file); returns the path
local function write_file(text, path)
  path = path or os.tmpname()
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
  return path
end

-- Runs build/luacuda with shell-quoted args; input (a string) is its stdin (else nothing).
-- Returns stdout, stderr, exit code.
local function run(args, input, env)
  local errf, inf = os.tmpname(), write_file(input or "")
  local cmd = ("cd %s && %s %s %s <%s 2>%s"):format(sh(root), env or "", sh(LUACUDA), args or "", sh(inf), sh(errf))
  local p = io.popen(cmd, "r")
  local out = p:read("a")
  local _, _, code = p:close()
  local err = slurp(errf)
  os.remove(errf)
  os.remove(inf)
  return out, err, code
end

local function contains(text, fragment)
  assert(text:find(fragment, 1, true), ("expected to find:\n  %s\nin:\n%s"):format(fragment, text))
end

local function matches(text, pattern)
  assert(text:find(pattern), ("expected to match:\n  %s\nin:\n%s"):format(pattern, text))
end

describe("luacuda (command line)", function()
  luacuda_it("-v prints the version, with Lua's", function()
    local out, _, code = run("-v")
    assert.are.equal(0, code)
    matches(out, "^luacuda " .. cd.version:gsub("%.", "%%.") .. " %(cudadev%) with Lua 5%.4")
  end)

  luacuda_it("binds the module to the global cuda, the same value require returns", function()
    local out = run([[-e "print(cuda == require 'cudadev', cuda.version, cuda.type(cuda.get_device()))"]])
    assert.are.equal("true\t" .. cd.version .. "\tDevice\n", out)
  end)

  luacuda_it("runs a script with arg and ... as lua does", function()
    local script = write_file("print(select('#', ...), ...)\nprint(arg[-1], arg[0], arg[1], arg[2])\n")
    local out, _, code = run("-W " .. sh(script) .. " a b")
    os.remove(script)
    assert.are.equal(0, code)
    assert.are.equal(("2\ta\tb\n-W\t%s\ta\tb\n"):format(script), out)
  end)

  luacuda_it("runs a shebang script", function()
    local script = write_file("#!/usr/bin/env luacuda\nprint('shebang ok', cuda ~= nil)\n")
    local out = run(sh(script))
    os.remove(script)
    assert.are.equal("shebang ok\ttrue\n", out)
  end)

  luacuda_it("reads the script from stdin with '-', and when stdin is not a terminal", function()
    assert.are.equal("from stdin\t1\n", (run("- x", "print('from stdin', #arg)")))
    assert.are.equal("piped\n", (run("", "print('piped')")))
  end)

  luacuda_it("-l loads a module into a global, -l g=mod under another name", function()
    assert.are.equal("function\n", (run([[-l r=cudadev.repl -e "print(type(r.pretty))"]])))
  end)

  luacuda_it("honours LUA_INIT, and -E ignores it", function()
    assert.are.equal("init\nrun\n", (run([[-e "print('run')"]], nil, "LUA_INIT=\"print('init')\"")))
    assert.are.equal("run\n", (run([[-E -e "print('run')"]], nil, "LUA_INIT=\"print('init')\"")))
  end)

  luacuda_it("-W turns warnings on", function()
    local _, err = run([[-W -e "warn('careful')"]])
    contains(err, "Lua warning: careful")
  end)

  luacuda_it("exits with 1 and a traceback on an error, and with what os.exit says", function()
    local _, err, code = run([[-e "error('boom')"]])
    assert.are.equal(1, code)
    matches(err, "luacuda: %(command line%):1: boom\nstack traceback:")
    local _, _, code2 = run([[-e "os.exit(3)"]])
    assert.are.equal(3, code2)
    -- an error of cudadev's: its traceback starts at the line the message names, not in cudadev's own frames
    local _, err2 = run([[-e "local cd = require 'cudadev'; local x = cd.zeros(3) + cd.zeros(2)"]])
    matches(err2, "luacuda: %(command line%):1: operator %+: shapes {3} and {2} cannot be broadcast together " ..
      "%(dimension 1 is 3 and 2%)\nstack traceback:\n\t%(command line%):1: in main chunk")
    assert.is_nil(err2:find("[cudadev]", 1, true))
  end)

  luacuda_it("rejects an unknown option with lua's usage text", function()
    local _, err, code = run("-z")
    assert.are.equal(1, code)
    contains(err, "unrecognized option '-z'")
    contains(err, "usage: ")
    contains(err, "-q        no banner in interactive mode")
  end)

  luacuda_it("-h and --help print the usage on stdout and exit 0", function()
    for _, opt in ipairs({ "-h", "--help" }) do
      local out, err, code = run(opt)
      assert.are.equal(0, code, err)
      assert.are.equal("", err)
      matches(out, "^usage: ")
      contains(out, "  -h, --help  show this text and exit\n")
      contains(out, "-q        no banner in interactive mode")
    end
  end)

  luacuda_it("runs busted: luacuda /usr/bin/busted", function()
    local busted = io.popen("command -v busted"):read("l")
    assert.is_truthy(busted, "busted is not on PATH")
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir " .. sh(dir)))
    write_file([[describe("under luacuda", function()
  it("sees the built-in module", function() assert.are.equal(cuda, require "cudadev") end)
end)]], dir .. "/t_spec.lua")
    local p = io.popen(("cd %s && %s %s -o TAP t_spec.lua 2>&1"):format(sh(dir), sh(LUACUDA), sh(busted)))
    local out = p:read("a")
    local _, _, code = p:close()
    os.execute("rm -rf " .. sh(dir))
    assert.are.equal(0, code, out)
    contains(out, "ok 1 - under luacuda sees the built-in module")
  end)
end)

describe("the manual from the REPL", function()
  -- help(x.sum) showed `### cd.sum(...)` and nothing else: an entry whose heading has no text of its own
  it("help(f) of every function of cd and every Array method shows text, not only a heading", function()
    local bad = {}
    local function check(name, f)
      local t, err = repl.doc(f)
      local body = t and t:gsub("^[^\n]*\n", ""):gsub("%([^)]*%.md%)$", "")
      if not (body and body:match("%S")) then bad[#bad + 1] = name .. " (" .. tostring(err or "no text") .. ")" end
    end
    for k, f in pairs(debug.getregistry()["cudadev.Array"].methods) do
      if type(f) == "function" and not k:match("^_") then check("a:" .. k, f) end
    end
    for k, f in pairs(cd) do
      if type(f) == "function" and not k:match("^_") then check("cd." .. k, f) end
    end
    table.sort(bad)
    assert.are.same({}, bad)
  end)

  it("require \"cudadev.repl\" works before require \"cudadev\"", function()
    local p = io.popen(("cd %s && LUA_CPATH=%s lua5.4 -e %s 2>&1"):format(sh(root), sh(root .. "/build/?.so;;"),
      sh('local r = require "cudadev.repl"; print(type(r.complete), require("cudadev").type(require("cudadev").zeros(1)))')))
    local out = p:read("a")
    p:close()
    assert.are.equal("function\tArray\n", out)
  end)
end)

-- NOTE [compile notice] (src/module.c): a cold compile that takes over half a second says so on stderr, in luacuda
-- and with CUDADEV_VERBOSE=1; a script under plain Lua stays quiet. The kernel is long enough that g++ takes
-- seconds over it, far from the threshold.
describe("compile notices", function()
  local SLOW = [[
    local parts = { "__device__ float f0(float x) { return x; }" }
    for i = 1, 80 do
      parts[#parts + 1] = ("__device__ float f%d(float x) { return x * %d.5f + f%d(x - 1.0f); }"):format(i, i, i - 1)
    end
    parts[#parts + 1] = 'extern "C" __global__ void k(float *y) { y[threadIdx.x] = f80(y[threadIdx.x]); }'
    local cd = cuda or require "cudadev"
    cd.compile(table.concat(parts, "\n"), { device = "cpu", name = "slow.cu" })
    print("compiled")
  ]]
  local function cold(env_and_cmd)
    local dir = os.tmpname()
    os.remove(dir)
    local script = write_file(SLOW)
    local errf = os.tmpname()
    local p = io.popen(("cd %s && CUDADEV_CACHE_DIR=%s %s %s 2>%s"):format(sh(root), sh(dir), env_and_cmd, sh(script),
      sh(errf)))
    local out = p:read("a")
    p:close()
    local err = slurp(errf)
    os.execute("rm -rf " .. sh(dir) .. " " .. sh(script) .. " " .. sh(errf))
    return out, err
  end

  luacuda_it("luacuda prints a line when a compile starts taking long, and one when it ends", function()
    local out, err = cold("env -u CUDADEV_VERBOSE " .. sh(LUACUDA))
    contains(out, "compiled")
    matches(err, "^cudadev: compiling 'slow%.cu' for cpu with the host C%+%+ compiler %(the first time only: the "
      .. "result is cached%) %.%.%.\ncudadev: compiled 'slow%.cu' for cpu with the host C%+%+ compiler in %d+%.%d s\n$")
  end)

  it("a script prints nothing unless CUDADEV_VERBOSE=1", function()
    local lua = ("env -u CUDADEV_VERBOSE LUA_CPATH=%s lua5.4"):format(sh(root .. "/build/?.so;;"))
    local out, err = cold(lua)
    contains(out, "compiled")
    assert.are.equal("", err)
    out, err = cold("CUDADEV_VERBOSE=1 " .. lua:gsub("^env %-u CUDADEV_VERBOSE ", "env "))
    contains(err, "cudadev: compiling 'slow.cu' for cpu")
  end)
end)

describe("luacuda -i (input from a pipe)", function()
  luacuda_it("prints the values of expressions and continues incomplete statements", function()
    local out, err, code = run("-i -q", table.concat({
      "1234 + 4321",
      "x = {1, 'two', {three = 3}, f = false}",
      "x",
      "for i = 1, 3 do",
      "  io.write(i, ' ')",
      "end",
      "print()",
      "=7*6",
      "'a\\tstring'",
      "cuda.zeros(3)",
      "nil, 1",
    }, "\n") .. "\n")
    assert.are.equal(0, code, err)
    contains(out, "> 5555\n")
    contains(out, '> {1, "two", {three = 3}, f = false}\n')
    contains(out, "> >> >> 1 2 3 > \n")   -- io.write, then the prompt, then print's newline
    contains(out, "> 42\n")
    contains(out, '> "a\\tstring"\n')
    contains(out, "> Array(float32[3] on " .. cd.get_device().alias .. ": {0, 0, 0})\n")
    contains(out, "> nil\t1\n")
  end)

  luacuda_it("prints errors without the REPL's own frames", function()
    local out = run("-i -q", "error('boom')\nlocal function f() error('deep') end f()\n1 +\n+\n")
    contains(out, "> stdin:1: boom\n>")
    -- `local function f` at the prompt is kept for later lines (NOTE [REPL locals]): f is named as a function
    contains(out, "stdin:1: deep\nstack traceback:\n\t[C]: in function 'error'\n\tstdin:1: in function 'f'")
    assert.is_nil(out:find("cudadev.repl", 1, true))
    contains(out, "unexpected symbol near '+'")
  end)

  luacuda_it("prints a library error at the prompt at its line, without cudadev's own frames", function()
    local out = run("-i -q", "cd = require 'cudadev'\nx = cd.zeros(3) + cd.zeros(2)\n" ..
      "local f = cd.zeros(2); f:free(); print(f:sum())\n")
    contains(out, "> stdin:1: operator +: shapes {3} and {2} cannot be broadcast together (dimension 1 is 3 and 2)\n>")
    contains(out, "> stdin:1: bad argument #1 to 'sum' (attempt to use a freed array)\n>")
    assert.is_nil(out:find("[cudadev]", 1, true))
  end)

  luacuda_it("shows the banner unless -q", function()
    local out = run("-i", "")
    matches(out, "^luacuda " .. cd.version:gsub("%.", "%%.") .. " %(cudadev%)")
    contains(out, '"cpu"')
    contains(out, "Type :help for commands")
    assert.is_nil((run("-i -q", "")):find("Type :help", 1, true))
  end)

  luacuda_it("has :help, :devices, :mem, :time, :sync and :quit", function()
    local out = run("-i -q", ":help\n:devices\n:mem\n:time cuda.zeros(8):fill(2)\n:sync\n:nope\n:quit\nprint('after quit')\n")
    contains(out, ":time <code>")
    contains(out, '  "cpu"     host CPU')
    contains(out, "current stream: Stream(")
    matches(out, '"cpu"%s+host memory [%d.]+ [GMK]iB')
    contains(out, "Array(float32[8] on " .. cd.get_device().alias .. ": {2, 2, 2, ..., 2, 2, 2})\nwall ")
    if cd.get_device().is_cpu then   -- no "gpu" figure for the host (issue 16)
      matches(out, "wall [%d.]+ [mu]?s %(on cpu%)\n")
      assert.is_nil(out:find("gpu ", 1, true))
    else
      matches(out, "wall [%d.]+ [mu]?s, gpu [%d.]+ [mu]?s %(events on Stream%(")
    end
    matches(out, "> synchronized in [%d.]+ [mu]?s\n")
    contains(out, "unknown command ':nope' (:help lists them)")
    assert.is_nil(out:find("after quit", 1, true))
  end)

  luacuda_it("keeps the locals typed at the prompt for the lines after", function()
    local out, err, code = run("-i -q", table.concat({
      "local x = 41",
      "x + 1",
      "local a, b = 'A', 'B'",
      "a .. b",
      "local function fact(n) if n <= 1 then return 1 end local r = n * fact(n - 1) return r end",
      "fact(5)",
      "local n",
      "n == nil",
      "local k <const> = 7",
      "k * 6",
      "do local hidden = 1 end",
      "hidden",
      "local s = 'local y = 1'",
      "s",
    }, "\n") .. "\n")
    assert.are.equal(0, code, err)
    contains(out, "> > 42\n")
    contains(out, '> > "AB"\n')
    contains(out, "> > 120\n")
    contains(out, "> > true\n")
    contains(out, "> > 42\n> > nil\n")
    contains(out, '> > "local y = 1"\n')
  end)

  luacuda_it(":doc and help() show the manual's entry", function()
    local out = run("-i -q", ":doc cd.now\nhelp(cuda.time)\nhelp(cuda.zeros(1).astype)\n:doc astype\n:doc nothing_here\n:doc\n")
    contains(out, "> ### `cd.now()`\n\nSeconds of a monotonic wall clock")
    contains(out, "(doc/repl-install.md)\n")
    contains(out, "> ### `cd.time(fn, ...)`\n")
    assert.are.equal(2, select(2, out:gsub("### `a:astype%(dtype %[, opts%]%)`", "")), out)
    contains(out, "> no manual entry for 'nothing_here'\n")
    contains(out, "> usage: :doc <name> (for example :doc cd.zeros)\n")
  end)

  pending_unless(have_luacuda and cpu_compiles, "needs build/luacuda and the cpu device's compiler",
    "shows a compile error with the source lines its log cites", function()
      local out = run("-i -q", table.concat({
        "m = cuda.compile([[",
        'extern "C" __global__ void f(float *x) {',
        "  x[0] = undefined_thing;",
        "}]], {device = 'cpu', options = {'-DN=1'}})",
      }, "\n") .. "\n", "")
      contains(out, "options: -DN=1")
      matches(out, "kernel%.cu[:(]2[:)][^\n]*undefined_thing")
      contains(out, "\n     2 |   x[0] = undefined_thing;\n")
    end)
end)

-- ---------------------------------------------------------------- a real terminal
-- Each pane has a tmux server of its own (a private socket, our own configuration file): nothing of the
-- user's tmux is touched, and a server that is shutting down never meets the next test's. remain-on-exit
-- keeps a pane whose luacuda ended, so that its exit status can be read (and shown when a test fails).
local Pane = {}
Pane.__index = Pane
local panes = 0
local tmux_conf = os.tmpname()
do
  local f = assert(io.open(tmux_conf, "w"))
  -- a terminal type whose terminfo entry every Debian and Ubuntu system has: tmux's default (tmux-256color
  -- on newer versions) is missing on some hosts, and libedit then redraws as on a dumb terminal
  f:write('set -g remain-on-exit on\nset -g history-limit 5000\nset -g default-terminal "screen"\n')
  f:close()
end

function Pane:tmux(args)
  local p = io.popen("tmux -L " .. self.socket .. " -f " .. tmux_conf .. " " .. args .. " 2>&1")
  local out = p:read("a")
  local ok = p:close()
  return out, ok
end

local function start(env)
  panes = panes + 1
  local pane = setmetatable({ history = os.tmpname(),
                              socket = ("cudadev-spec-%d-%d-%d"):format(os.time(), math.random(1e6), panes) }, Pane)
  local cmd = ("cd %s && env LUACUDA_HISTORY=%s %s %s"):format(sh(root), sh(pane.history), env or "", sh(LUACUDA))
  local out, ok = pane:tmux("new-session -d -s repl -x 150 -y 50 " .. sh(cmd))
  assert(ok, "tmux could not start luacuda: " .. out)
  pane.pid = pane:tmux("display-message -p -t repl '#{pane_pid}'"):match("%d+")
  pane:wait_for("> ")
  return pane
end

function Pane:text() return (self:tmux("capture-pane -p -J -S -500 -t repl")) end

-- keys: a literal string (typed as text) or a key name (Enter, Tab, C-c, C-u, C-d)
function Pane:send(...)
  for _, k in ipairs({ ... }) do
    if k:match("^[A-Z][%w-]*$") or k:match("^C%-%a$") then self:tmux("send-keys -t repl " .. k)
    else self:tmux("send-keys -t repl -l " .. sh(k)) end
  end
end

-- polls the screen until it contains fragment (plain text), or fails after timeout seconds with the screen
function Pane:wait_for(fragment, timeout)
  local deadline = now() + (timeout or 10)
  local text
  repeat
    text = self:text()
    if text:find(fragment, 1, true) then return text end
    sleep(0.05)
  until now() > deadline
  error(("timed out waiting for %q on the screen:\n%s"):format(fragment, text), 2)
end

-- whether luacuda ended, and its exit status when tmux has seen it (a child that tmux has not reaped yet
-- is a zombie: ended, status unknown)
function Pane:ended()
  local dead, status = self:tmux("display-message -p -t repl '#{pane_dead} #{pane_dead_status}'"):match("^(%d) (%d*)")
  if dead == "1" then return true, tonumber(status) end
  local state = slurp("/proc/" .. self.pid .. "/status"):match("State:%s*(%a)")
  return state == nil or state == "Z", nil
end

local socket_dir = ("%s/tmux-%s"):format(os.getenv("TMUX_TMPDIR") or "/tmp", io.popen("id -u"):read("l"))

function Pane:close()
  self:tmux("kill-server")
  os.remove(self.history)
  os.remove(socket_dir .. "/" .. self.socket)   -- what a killed server leaves behind
end

describe("luacuda in a terminal (tmux)", function()
  local pane
  after_each(function()
    if pane then pane:close() end
    pane = nil
  end)
  teardown(function() os.remove(tmux_conf) end)

  tmux_it("starts with a banner: version, devices, the help hint", function()
    pane = start()
    local text = pane:wait_for("Type :help for commands")
    matches(text, "luacuda " .. cd.version:gsub("%.", "%%.") .. " %(cudadev%) with Lua 5%.4")
    contains(text, '  "cpu"     host CPU')
    for _, d in ipairs(cd.cuda_devices()) do contains(text, '"' .. d.alias .. '"') end
  end)

  tmux_it("prints expressions, continues multi-line input with >>", function()
    pane = start()
    pane:send("1234 + 4321", "Enter")
    pane:wait_for("> 1234 + 4321\n5555\n")
    pane:send("for i = 1, 3 do", "Enter")
    pane:wait_for(">> ")
    pane:send("io.write(i * 11, ' ')", "Enter", "end", "Enter")
    pane:wait_for(">> end\n11 22 33 ")
    pane:send("{cuda.get_device(), n = 1}", "Enter")
    pane:wait_for("{Device(")
  end)

  tmux_it("completes globals, fields and methods with Tab", function()
    pane = start()
    pane:send("cuda.dev", "Tab")
    pane:wait_for("> cuda.device")
    pane:send("Tab")
    local text = pane:wait_for("cuda.device_count")
    contains(text, "cuda.devices")
    -- typing on only once the command has finished: the first array on a GPU creates its context, and keys
    -- sent meanwhile are echoed by the terminal before libedit reads them
    pane:send("C-u", "a = cuda.zeros(4); print('made')", "Enter")
    pane:wait_for("\nmade\n")
    pane:send("a:fi", "Tab")
    pane:wait_for("> a:fill")
    pane:send("(7)", "Enter")
    pane:wait_for("{7, 7, 7, 7}")
    pane:send("a.dt", "Tab")
    pane:wait_for("> a.dtype")
    pane:send("Enter")
    pane:wait_for('"float32"')
  end, true)

  tmux_it("Ctrl-C stops a running loop and returns to the prompt", function()
    pane = start()
    pane:send("while true do end", "Enter")
    sleep(0.3)
    assert.is_nil(pane:text():find("interrupted", 1, true))
    pane:send("C-c")
    pane:wait_for("interrupted!")
    pane:send("6 * 7", "Enter")
    pane:wait_for("> 6 * 7\n42\n")
  end)

  tmux_it("Ctrl-C at the prompt drops the line being typed", function()
    pane = start()
    pane:send("this is not lua")
    pane:wait_for("> this is not lua")
    pane:send("C-c")
    pane:send("100 + 23", "Enter")
    local text = pane:wait_for("\n123\n")
    assert.is_nil(text:find("syntax error", 1, true))
    assert.is_nil(text:find("unexpected symbol", 1, true))
  end, true)

  tmux_it("runs the commands, :quit leaves, and the history is saved", function()
    pane = start()
    pane:send(":devices", "Enter")
    pane:wait_for("current stream: Stream(")
    pane:send(":mem", "Enter")
    pane:wait_for("host memory")
    pane:send(":time cuda.zeros(16)", "Enter")
    pane:wait_for(cd.get_device().is_cpu and "(on cpu)" or ", gpu ")
    pane:send(":sync", "Enter")
    pane:wait_for("synchronized in ")
    pane:send(":help", "Enter")
    pane:wait_for("Line editing: ")
    pane:send(":quit", "Enter")
    local deadline = now() + 10
    while not pane:ended() and now() <= deadline do sleep(0.05) end
    local ended, status = pane:ended()
    assert(ended, "luacuda did not leave on :quit:\n" .. pane:text())
    assert(status == nil or status == 0, "luacuda left with status " .. tostring(status))
    if have_libedit then contains(slurp(pane.history), ":devices") end
  end)

  -- the GPU side of Ctrl-C: a kernel that spins until a flag is set keeps a wait busy
  if not helper.cuda_available then
    pending("Ctrl-C stops a wait for the GPU (" .. helper.no_cuda_reason .. ")")
  else
    tmux_it("Ctrl-C stops a wait for the GPU; the work keeps running until released", function()
      pane = start()
      pane:send([[m = cuda.compile('extern "C" __global__ void spin(int *f) { while (*(volatile int *)f == 0) { } }')]],
        "Enter")
      -- the flag is zeroed before the launch: the spin runs on a non-blocking stream, unordered with the memset
      pane:send("f = cuda.zeros(1, 'int32'); cuda.synchronize(); s = cuda.stream()", "Enter")
      pane:send("m.spin({grid = 1, block = 1, stream = s}, f); print('launched')", "Enter")
      pane:wait_for("\nlaunched\n", 30)
      pane:send("s:synchronize()", "Enter")           -- a stream wait: polls cuStreamQuery
      sleep(0.5)
      assert.is_nil(pane:text():find("interrupted", 1, true))
      pane:send("C-c")
      pane:wait_for("interrupted! (the work queued on")
      pane:send(":sync", "Enter")                     -- a device wait: cuCtxSynchronize on a helper thread
      sleep(0.5)
      pane:send("C-c")
      local deadline = now() + 5
      while select(2, pane:text():gsub("interrupted!", "")) < 2 and now() < deadline do sleep(0.05) end
      assert.are.equal(2, select(2, pane:text():gsub("interrupted!", "")), pane:text())
      pane:send("f[1] = 1; s:synchronize(); print('released')", "Enter")
      pane:wait_for("\nreleased\n")
      pane:send(":sync", "Enter")
      pane:wait_for("synchronized in ")
    end)
  end
end)

-- ---------------------------------------------------------------- the Lua side, in-process
describe("cudadev.repl", function()
  it("pretty-prints tables with nesting, truncation and cycles", function()
    assert.are.equal('{1, 2, "x", a = true, ["b c"] = 2}', repl.pretty({ 1, 2, "x", a = true, ["b c"] = 2 }))
    assert.are.equal("{{{{{...}}}}}", repl.pretty({ { { { { { 1 } } } } } }))
    local t = { name = "loop" }
    t.self = t
    assert.are.equal('{name = "loop", self = <cycle>}', repl.pretty(t))
    local big = {}
    for i = 1, 100 do big[i] = i end
    local s = repl.pretty(big)
    assert.truthy(s:find("... (60 more)", 1, true), s)
    assert.truthy(s:find("\n", 1, true), "a long table is laid out one item per line")
    assert.are.equal('"' .. ("x"):rep(120) .. '"...(200 bytes)', repl.pretty(("x"):rep(200)))
    assert.are.equal('"a\\nb"', repl.pretty("a\nb"))
    assert.are.equal("{}", repl.pretty({}))
  end)

  it("prints cudadev objects by their own tostring, long arrays one row per line", function()
    local a = cd.zeros(4)
    assert.are.equal(tostring(a), repl.pretty(a))
    assert.are.equal("{" .. tostring(a) .. "}", repl.pretty({ a }))
    local m = cd.zeros({ 3, 40 })
    local s = repl.pretty(m)
    assert.are.equal(3, select(2, s:gsub("\n", "\n")) + 1, s)
    assert.are.equal(tostring(cd.get_device()), repl.pretty(cd.get_device()))
  end)

  it("completes globals, table fields, and the fields and methods of cudadev userdata", function()
    local env = { cuda = cd, a = cd.zeros(2), s = "text", t = { alpha = 1, beta = { gamma = 2 } } }
    assert.are.same({ "cuda.device", "cuda.device_count", "cuda.devices" }, repl.complete("cuda.device", "", env))
    assert.are.same({ "t.beta.gamma" }, repl.complete("t.beta.g", "", env))
    assert.are.same({ "a:fill" }, repl.complete("a:fi", "", env))
    assert.are.same({ "a.dtype" }, repl.complete("a.dt", "", env))
    local methods = repl.complete("a:", "", env)
    assert.truthy(#methods > 5)
    for _, m in ipairs(methods) do assert.is_nil(m:find("dtype", 1, true)) end   -- ':' offers methods only
    assert.are.same({ "s:upper" }, repl.complete("s:upp", "", env))
    assert.are.same({ "cuda" }, repl.complete("cud", "", env))
    assert.are.same({ "while" }, repl.complete("whi", "", env))
    assert.are.same({}, repl.complete("cuda.dev", 'print("', env))   -- inside a string
    assert.are.same({}, repl.complete("nothing.here", "", env))
  end)

  it("hides _-prefixed names unless asked, and keeps the separator typed", function()
    local env = { cuda = cd, a = cd.zeros(2), _secret = 1, t = { _x = 1, y = 2 } }
    for _, c in ipairs(repl.complete("cuda.", "", env)) do assert.is_nil(c:find("^cuda%._"), c) end
    assert.are.same({ "cuda._live" }, repl.complete("cuda._li", "", env))
    assert.are.same({ "t.y" }, repl.complete("t.", "", env))
    assert.are.same({ "t._x" }, repl.complete("t._", "", env))
    for _, c in ipairs(repl.complete("", "", env)) do assert.are_not.equal("_secret", c) end
    assert.are.same({ "_secret" }, repl.complete("_se", "", env))
    assert.are.same({ "a.fill" }, repl.complete("a.fi", "", env))   -- a method after '.': the function
    assert.are.same({ "a.free" }, repl.complete("a.fr", "", env))
    assert.are.same({ "a.dtype" }, repl.complete("a.dt", "", env))
  end)

  -- Line editing replaces the word typed with the candidates' longest common prefix: a candidate that does not
  -- begin with the word (x.sh offering x:shl_ beside x.shape) deleted what was typed (issue 30).
  it("offers only candidates that begin with the word typed, so Tab never deletes text", function()
    local env = { cuda = cd, x = cd.zeros(2), m = cd.zeros({ 2, 2 }), t = { alpha = 1 } }
    local words = { "x.", "x.sh", "x.s", "x.f", "x:", "x:sh", "m.T", "cuda.", "cuda.z", "cuda.random.", "t.", "x.i" }
    for _, w in ipairs(words) do
      local got = repl.complete(w, "", env)
      for _, c in ipairs(got) do
        assert.are.equal(w, c:sub(1, #w), ("completing %q offered %q"):format(w, c))
      end
    end
    local sh = repl.complete("x.sh", "", env)
    assert.truthy(#sh >= 2, table.concat(sh, " "))   -- x.shape and the methods named sh...
    assert.truthy(table.concat(sh, " "):find("x.shape", 1, true))
    for _, c in ipairs(repl.complete("x:", "", env)) do assert.is_nil(c:find("dtype", 1, true)) end
  end)

  it("rewrites top-level locals so they persist, and leaves the rest alone", function()
    local function rw(s) return (repl.rewrite_locals(s)) end
    assert.are.equal("x = 1", rw("local x = 1"))
    assert.are.same({ "a", "b" }, select(2, repl.rewrite_locals("local a, b = 1, 2")))
    assert.are.equal("a, b = 1, 2 print(a)", rw("local a, b = 1, 2 print(a)"))
    assert.are.equal("function f(n) local y = n return y end", rw("local function f(n) local y = n return y end"))
    assert.are.equal("n = nil", rw("local n"))
    assert.are.equal("c = 5", rw("local c <const> = 5"))
    assert.are.equal("local h <close> = nil", rw("local h <close> = nil"))
    assert.are.equal('do local z = 1 end w = "local q" -- local r', rw('do local z = 1 end local w = "local q" -- local r'))
    assert.are.equal("for i = 1, 2 do local k = i end m = [[local]]", rw("for i = 1, 2 do local k = i end local m = [[local]]"))
    assert.are.equal("if x then local u = 1 elseif y then local w = 2 end; v = 3",
      rw("if x then local u = 1 elseif y then local w = 2 end; local v = 3"))
    assert.are.equal("repeat local r = 1 until r; q = 1", rw("repeat local r = 1 until r; local q = 1"))
    assert.are.equal("t.local_y = 1", rw("t.local_y = 1"))
  end)

  it("finds the manual's entries by name and by function", function()
    local text = assert(repl.doc("cd.now"))
    assert.truthy(text:find("^### `cd%.now%(%)`\n"), text)
    assert.are.equal(text, repl.doc(cd.now))
    assert.are.equal(text, repl.doc("cuda.now"))
    assert.truthy(assert(repl.doc(cd.zeros(1).astype)):find("### `a:astype(dtype [, opts])`", 1, true))
    assert.are.same({ nil, "no manual entry for 'cd.nothing'" }, { repl.doc("cd.nothing") })
    assert.are.same({ nil, "no manual entry: help() takes a name (\"cd.zeros\") or a cudadev function" },
      { repl.doc(print) })
  end)

  it("runs for a host that gives nothing but lines: :time works there", function()
    local lines = { "1 + 1", ":time 2 * 3", "local q = 5", "q", "for i = 1, 2 do", "  q = q + i", "end", ":quit" }
    local history = {}
    local out = {}
    local stdout = io.stdout
    local fake = setmetatable({ write = function(self, ...) for _, s in ipairs({ ... }) do out[#out + 1] = s end return self end,
      flush = function() end }, {})
    io.stdout = fake   -- luacheck: ignore
    local ok, err = pcall(repl.run, { readline = function() return table.remove(lines, 1) end,
      add_history = function(entry) history[#history + 1] = entry end })
    io.stdout = stdout
    rawset(_G, "q", nil)
    assert(ok, err)
    local text = table.concat(out)
    assert.truthy(text:find("2\n", 1, true), text)
    assert.truthy(text:find("6\nwall ", 1, true), text)
    assert.is_nil(text:find("attempt to call", 1, true), text)
    assert.truthy(text:find("\n5\n", 1, true), text)
    -- a multi-line entry is one history item
    assert.are.same({ "1 + 1", ":time 2 * 3", "local q = 5", "q", "for i = 1, 2 do\n  q = q + i\nend", ":quit" }, history)
  end)

  it("offers the known field names of every cudadev type", function()
    for _, ty in ipairs({ "Device", "Array", "Stream", "Event", "Module", "Kernel", "Error" }) do
      assert.is_table(repl.fields[ty], ty)
    end
    local d = cd.get_device()
    for _, k in ipairs(repl.fields.Device) do
      if k ~= "free_memory" then assert(pcall(function() return d[k] end), "Device field " .. k) end
    end
    local a = cd.zeros(2)
    for _, k in ipairs(repl.fields.Array) do assert(pcall(function() return a[k] end), "Array field " .. k) end
  end)

  -- NOTE [class fields]: the names come from each type's metatable (mt.fields, read from the C code that answers
  -- them at build time), not from a list in repl.lua; these are names the old hand-kept list lacked
  it("completes every field the C code answers, read from the type's metatable", function()
    local env = { a = cd.zeros(2), ev = cd.event("cpu"), s = cd.stream("cpu") }
    assert.are.same({ "a.is_contiguous" }, repl.complete("a.is_con", "", env))
    assert.are.same({ "a.strides" }, repl.complete("a.stri", "", env))
    assert.are.same({ "a.managed" }, repl.complete("a.mana", "", env))
    assert.are.same({ "ev.is_ipc" }, repl.complete("ev.is_", "", env))
    assert.are.same({ "s.is_default" }, repl.complete("s.is_", "", env))
    for _, ty in ipairs({ "Graph", "LaunchConfig", "Comm" }) do assert.is_table(repl.fields[ty], ty) end
    assert.are.same({ "rank", "size", "device" }, repl.fields.Comm)
    assert.are.same({ "device", "num_nodes" }, repl.fields.Graph)   -- g:launch and g:free are methods
    assert.are.same(repl.fields.Array, getmetatable(env.a).fields)
    if cpu_compiles then
      local m = cd.compile('extern "C" __global__ void f(float *x) { x[0] = 1; }', { device = "cpu" })
      env.m, env.k = m, m.f
      assert.are.same({ "m.globals" }, repl.complete("m.glo", "", env))
      assert.are.same({ "k.cpu_path", "k.cpu_reason" }, repl.complete("k.cpu", "", env))   -- cpu_reason: issue 29
    end
  end)

  it("knows the same fields as the manual's reader of the C sources (spec/manual.lua)", function()
    local manual = require "spec.manual"
    local function set(list)
      local t = {}
      for _, k in ipairs(list or {}) do t[k] = true end
      return t
    end
    local found = 0
    for tname, fields in pairs(manual.c_fields()) do
      local ty = tname:match("^cudadev%.(%u%w*)$")
      if ty then
        assert.are.same(fields, set(repl.fields[ty]), ty)
        found = found + 1
      end
    end
    assert.truthy(found >= 9, found)
    local ok, err = pcall(cd.compile, "this is not C++", { device = "cpu", name = "fields.cu" })
    if not ok and type(err) == "table" then   -- a failed compile's Error carries every field
      local keys = {}
      for k in pairs(err) do keys[k] = true end
      assert.are.same(keys, set(repl.fields.Error))
    end
  end)

  local function compile_error(log, src)
    return setmetatable({ api = "nvrtcCompileProgram", code = 6, name = "NVRTC_ERROR_COMPILATION",
      message = "compilation of kernel.cu failed", sticky = false, where = "stdin:1", log = log,
      options = { "-DN=4" }, source = src, source_name = "kernel.cu" }, cd.Error)
  end

  it("shows a compile error with the source lines its log cites", function()
    local src = 'extern "C" __global__ void f(float *x) {\n  x[0] = y;\n}\n'
    local text = repl.format_error(compile_error('kernel.cu(2): error: identifier "y" is undefined\n\n' ..
      '1 error detected in the compilation of "kernel.cu".\n', src))
    assert.are.equal(table.concat({
      "stdin:1: nvrtcCompileProgram: NVRTC_ERROR_COMPILATION: compilation of kernel.cu failed",
      "options: -DN=4",
      'kernel.cu(2): error: identifier "y" is undefined',
      "     2 |   x[0] = y;",
      "",
      '1 error detected in the compilation of "kernel.cu".',
    }, "\n"), text)
  end)

  it("does not repeat a source line the log already quotes", function()
    local src = 'extern "C" __global__ void f(float *x) {\n  x[0] = y;\n}\n'
    local text = repl.format_error(compile_error('kernel.cu(2): error: identifier "y" is undefined\n' ..
      "    x[0] = y;\n           ^\n", src))
    assert.are.equal(1, select(2, text:gsub("x%[0%] = y;", "")), text)
  end)

  it("passes other errors through", function()
    assert.are.equal("plain message", repl.format_error("plain message"))
    assert.are.equal("(error object is a table value) {code = 1}", repl.format_error({ code = 1 }))
  end)

  it("builds a banner from the devices", function()
    local b = repl.banner("luacuda x")
    assert.truthy(b:find("^luacuda x\n"), b)
    assert.truthy(b:find('"cpu"', 1, true), b)
    if not helper.cuda_available then assert.truthy(b:find("CUDA not available: ", 1, true), b) end
  end)
end)
