-- spec/helper.lua: what every spec file shares, so one suite runs on any machine.
--   local helper = require "spec.helper"
--   helper.gpu_it("launches saxpy", function() ... end)       -- pending, with the reason, without a GPU
--   helper.multi_gpu_it("copies peer to peer", function() ... end)
--   helper.each_device(function(dev) it("fills on " .. dev, function() ... end) end)
--   helper.assert_error_matches(function() a:free() end, "attempt to use a freed array")
local busted = require "busted"
local assert = require "luassert"
local cd = require "cudadev"

local helper = {}

local available, why = cd.is_available()
helper.cuda_available = available == true
helper.no_cuda_reason = "no CUDA device: " .. tostring(why)

-- Registers `it(name, fn)`, or, when `skip` is a string, a pending test whose name ends with that reason.
-- Only tail calls lead from the spec file to busted, so busted records the spec's file and line, not ours.
local function it_unless(skip, name, fn)
  if skip then
    return busted.pending(("%s (%s)"):format(name, skip))
  end
  return busted.it(name, fn)
end

-- A test that needs the cpu launch worker: pending when launches run in this process (CUDADEV_CPU_FORK=0, the
-- valgrind pass), where there is no worker and a fault would end this process.
function helper.worker_it(name, fn)
  return it_unless(os.getenv("CUDADEV_CPU_FORK") == "0" and "CUDADEV_CPU_FORK=0: launches run in this process",
    name, fn)
end

-- A test that needs a CUDA device.
function helper.gpu_it(name, fn)
  return it_unless(not helper.cuda_available and helper.no_cuda_reason, name, fn)
end

-- A test that needs NVRTC (a compile for sm_90 without a GPU): pending with the reason where NVRTC is missing.
-- The probe compiles once, at the first such test.
local nvrtc_why
function helper.nvrtc_it(name, fn)
  if nvrtc_why == nil then
    local ok, err = pcall(cd.compile, 'extern "C" __global__ void probe() {}', { arch = "sm_90" })
    nvrtc_why = not ok and "no NVRTC: " .. tostring(err):gsub("\n.*", "") or false
  end
  return it_unless(nvrtc_why, name, fn)
end

-- Runs fn() with cd.compile also compiling with NVRTC for sm_90 every source whose file name matches pattern, after
-- clearing the kernel cache: the CUDA side of generated kernels, checked where there is no GPU. Returns the names
-- compiled so and the failures ("name: error").
function helper.nvrtc_compiles(pattern, fn)
  local compile, names, failures = cd.compile, {}, {}
  cd.clear_kernel_cache()
  cd.compile = function(src, o)
    if o.name:match(pattern) then
      names[#names + 1] = o.name
      local ok, err = pcall(compile, src, { arch = "sm_90", name = o.name })
      if not ok then failures[#failures + 1] = o.name .. ": " .. tostring(err):sub(1, 300) end
    end
    return compile(src, o)
  end
  local ok, err = pcall(fn)
  cd.compile = compile
  if not ok then error(err, 0) end
  return names, failures
end

-- A test that needs two CUDA devices (peer access, multi-device streams).
function helper.multi_gpu_it(name, fn)
  local n = helper.cuda_available and cd.device_count() or 0
  return it_unless(n < 2 and ("needs 2 CUDA devices, found %d"):format(n), name, fn)
end

-- The devices that conformance specs run on: "cpu", then "cuda:0" when there is one. fn(spec) registers
-- the tests for one device; the same expectations must hold on each.
helper.devices = { "cpu" }
if helper.cuda_available then helper.devices[2] = "cuda:0" end

function helper.each_device(fn)
  for _, dev in ipairs(helper.devices) do fn(dev) end
end

-- n deterministic values in [-1, 1) from seed (a small LCG: the same on every run and device).
function helper.lcg_values(n, seed)
  local t, x = {}, seed
  for i = 1, n do
    x = (x * 1103515245 + 12345) % 2147483648
    t[i] = x / 1073741824 - 1
  end
  return t
end

-- The text of "no device 'SPEC' (...)" for a string of no spec form ("gpu", "CPU", "nope"), with the device it
-- guesses when there is one (NOTE [device specs] in src/device.c).
function helper.unknown_device_text(spec, guess)
  local names = {}
  for i, d in ipairs(cd.devices()) do
    if i > 8 then names[#names] = names[#names] .. ", ..."; break end
    names[#names + 1] = '"' .. d.alias .. '"'
  end
  return ("no device '%s' (%sdevices: %s; %s)"):format(spec, guess and ('did you mean "' .. guess .. '"? ') or "",
    table.concat(names, ", "), cd.device_count() > 0 and '"cuda" is the current CUDA device'
      or "no CUDA device, cd.is_available() says why")
end

-- an Array's values as one flat Lua table, in C order (a:totable() unnested)
local function flat(t, out)
  if type(t) ~= "table" then out[#out + 1] = t return out end
  for _, v in ipairs(t) do flat(v, out) end
  return out
end
function helper.values(a) return flat(a:totable(), {}) end

-- `s` as one word for /bin/sh, in single quotes
function helper.shell_quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

-- a file's bytes, and writing bytes to a file (both raise when the file cannot be opened)
function helper.read_file(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

function helper.write_file(path, s)
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
end

-- whether a file can be opened for reading
function helper.file_exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end


-- Runs `code` in a child lua5.4 with this cudadev (as `cd`), its environment prefixed with `env` ("VAR=value ...")
-- when given: a crash there fails the test instead of the suite. Returns stdout and stderr, then "exit N\n".
function helper.run_child(code, env)
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(("package.cpath = %q\nlocal cd = require 'cudadev'\n"):format(package.cpath), code)
  f:close()
  local p = assert(io.popen(("%s lua5.4 %s 2>&1; echo \"exit $?\""):format(env or "", path)))
  local out = p:read("a")
  p:close()
  os.remove(path)
  return out
end

-- The text of an error value: strings lose the "chunk:line: " prefix that error() and luaL_error add
-- ("spec/x_spec.lua:12: ", "[string \"...\"]:1: "); objects (cudadev.Error) go through tostring.
function helper.error_text(err)
  if type(err) ~= "string" then
    return tostring(err)
  end
  local text, n = err:gsub('^%[string ".-"%]:%d+: ', "", 1)
  if n == 0 then text = err:gsub("^[^%s:]+:%d+: ", "", 1) end
  return text
end

local function raised(fn, ...)
  local ok, err = pcall(fn, ...)
  assert(not ok, "expected an error, but the call returned normally")
  return helper.error_text(err), err
end

-- fn must raise exactly `expected` (after the position prefix is removed). Returns the raw error value.
function helper.assert_error_matches(fn, expected)
  local text, err = raised(fn)
  assert.are.equal(expected, text)
  return err
end

-- fn must raise an error whose text contains `fragment` (plain text, not a pattern). Returns the raw error.
function helper.assert_error_contains(fn, fragment)
  local text, err = raised(fn)
  assert(text:find(fragment, 1, true),
    ("expected an error containing:\n  %s\nbut got:\n  %s"):format(fragment, text))
  return err
end

-- Runs a shell command (from the current directory, the repository root), stdin closed. Returns stdout and stderr
-- together, and the exit status.
function helper.run_command(cmd)
  local p = io.popen(("%s 2>&1 </dev/null"):format(cmd))
  local out = p:read("a")
  local _, _, code = p:close()
  return out, code
end

-- out must hold `line` as a whole line (for programs judged by what they print)
function helper.has_line(out, line)
  for l in out:gmatch("[^\n]*") do if l == line then return true end end
  error(("expected the line\n  %s\nin:\n%s"):format(line, out), 2)
end

return helper
