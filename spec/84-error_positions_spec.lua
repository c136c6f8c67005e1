-- Errors point at the caller's line (NOTE [error positions] in extra.lua): a public function called wrongly
-- raises at the user's own file and line, naming the function the user called, whether it is written in C or in
-- Lua, and whether the error comes from the Lua part itself or from a C function it calls (reshape under
-- cd.load, an Array's __index on a freed array, a compile under a generated kernel). Each case below is one
-- line, so the line an error must name is the line the case is defined on. Runs on the cpu device.
local helper = require "spec.helper"
local cd = require "cudadev"

local D = { device = "cpu" }

-- The error of fn, which must be raised at fn's own line of this file and hold no internal position.
local function check(fn, fname)
  local ok, err = pcall(fn)
  assert(not ok, "expected an error from " .. fname)
  local text = type(err) == "string" and err or tostring(err)
  local info = debug.getinfo(fn, "S")
  local at = ("%s:%d: "):format(info.short_src, info.linedefined)
  assert(info.short_src:match("84%-error_positions_spec%.lua$"), info.short_src)
  assert(text:sub(1, #at) == at, ("%s: expected the error at\n  %s\nbut got\n  %s"):format(fname, at, text))
  assert(not text:find("[cudadev]", 1, true) and not text:find("cudadev%.%l+:%d"),
    ("%s: an internal position in\n  %s"):format(fname, text))
  assert(text:find("'" .. fname .. "'", #at + 1, true) or text:find(fname .. ":", #at + 1, true)
    or cd.type(err) == "Error" and text:find(fname, #at + 1, true),
    ("%s: the function is not named in\n  %s"):format(fname, text))
  return text:sub(#at + 1), err
end

local function npy(dict, data)
  local total = 10 + #dict + 1
  local header = dict .. string.rep(" ", (64 - total % 64) % 64) .. "\n"
  return "\x93NUMPY\1\0" .. string.pack("<I2", #header) .. header .. data
end

describe("errors of public functions", function()
  local path = os.tmpname()
  local freed, a, ew, red, m
  setup(function()
    freed = cd.zeros(4, "float32", D)
    freed:free()
    a = cd.arange(6, "float32", D)
    ew = cd.elementwise("T x", "T y", "y = x * 2", { name = "twice" })
    red = cd.reduction("T x", "T y", "x", "a + b", "y = a", 0, { name = "total" })
    m = cd.compile('extern "C" __global__ void k(float *x, int n, int z) {}', D)
  end)
  teardown(function()
    os.remove(path)
    freed, a, ew, red, m = nil, nil, nil, nil, nil
    collectgarbage()
  end)

  it("name the user's line for functions written in Lua", function()
    helper.write_file(path, "1234567")
    local cases = {
      { "sum", function() local _ = freed:sum() end, "bad argument #1 to 'sum' (attempt to use a freed array)" },
      { "mean", function() local _ = freed:mean() end, "bad argument #1 to 'mean' (attempt to use a freed array)" },
      { "max", function() local _ = cd.max(freed) end, "bad argument #1 to 'max' (attempt to use a freed array)" },
      { "operator +", function() local _ = a + freed end, "bad argument #2 to 'operator +' (attempt to use a freed array)" },
      { "operator -", function() local _ = -freed end, "bad argument #1 to 'operator -' (attempt to use a freed array)" },
      { "add", function() local _ = cd.add(1, freed) end, "bad argument #2 to 'add' (attempt to use a freed array)" },
      { "where", function() local _ = cd.where(freed, 1, 2) end, "bad argument #1 to 'where' (attempt to use a freed array)" },
      { "copy", function() local _ = freed:copy() end, "bad argument #1 to 'copy' (attempt to use a freed array)" },
      { "contiguous", function() local _ = freed:contiguous() end, nil },
      { "twice", function() local _ = ew(freed) end, "bad argument #1 to 'twice' (attempt to use a freed array)" },
      { "total", function() local _ = red(a, { axis = 3 }) end,
        "bad option 'axis' to 'total' (axis 3 is out of range for an array of 1 dimension: 1..1, or -1..-1)" },
      { "sum", function() local _ = a:sum(3) end, nil },
      { "operator +", function() local _ = a + cd.zeros(4, "float32", D) end,
        "operator +: shapes {6} and {4} cannot be broadcast together (dimension 1 is 6 and 4)" },
      { "uniform", function() local _ = cd.random.uniform("x", D) end, nil },
      { "randint", function() local _ = cd.random.randint(0, 10, -1, D) end, nil },
      { "randint", function() local _ = cd.random.randint(0, 1000, 4, "int8", D) end, nil },
      { "seed", function() cd.random.seed("x") end, "bad argument #1 to 'seed' (integer expected, got string)" },
      { "arange", function() local _ = cd.arange("x") end, nil },
      { "linspace", function() local _ = cd.linspace(0, 1, -1) end, nil },
      { "elementwise", function() local _ = cd.elementwise("T x", "T y", 5) end, nil },
      { "fromfile", function() local _ = cd.fromfile(path, "float64", D) end, nil },
      { "fromfile", function() local _ = cd.fromfile(path, "int8", { 5 }, D) end, nil },
      { "load", function() local _ = cd.load(path) end, nil },
      { "load", function() local _ = cd.load(5) end, "bad argument #1 to 'load' (file name expected, got number)" },
      { "save", function() cd.save(path, 5) end, "bad argument #2 to 'save' (Array expected, got number)" },
      { "tofile", function() a:tofile(5) end, "bad argument #2 to 'tofile' (file name expected, got number)" },
      { "wait_streams", function() cd.wait_streams(5, {}) end, nil },
      { "synchronize_devices", function() cd.synchronize_devices(5) end, nil },
    }
    for _, c in ipairs(cases) do
      local text = check(c[2], c[1])
      if c[3] then assert.are.equal(c[3], text) end
    end
  end)

  it("name the user's line when a C function under a Lua one fails", function()
    -- 7 bytes are no whole float64s: cd.array refuses them under fromfile
    helper.write_file(path, "1234567")
    assert.are.equal("fromfile: bad argument #1 to 'array' (string of 7 bytes is not a whole number of float64)",
      (check(function() local _ = cd.fromfile(path, "float64", D) end, "fromfile")))
    -- a device that does not exist: cd.array refuses it under cd.load, and an Array output that is a number
    helper.write_file(path, npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", "\0\0\0\0"))
    local text = check(function() local _ = cd.load(path, { device = "cuda:99" }) end, "load")
    local want = "load: bad option 'device' to 'array' (no device 'cuda:99'"
    assert.are.equal(want, text:sub(1, #want))
    assert.are.equal("bad option 'devic' to 'load' (unknown option)",
      (check(function() local _ = cd.load(path, { devic = "cpu" }) end, "load")))
    assert.are.equal("bad option 'out' to 'sum' (Array expected, got number)",
      (check(function() local _ = a:sum({ axis = 1, out = 5 }) end, "sum")))
    -- a generated kernel that does not compile: the cudadev.Error's where is the line of the call
    local bad = cd.elementwise("T x", "T y", "y = x +* ;", { name = "broken" })
    local _, err = check(function() local _ = bad(a) end, "broken")
    assert.are.equal("Error", cd.type(err))
    assert.are.equal(debug.getinfo(1, "S").short_src, err.where:match("^(.*):%d+$"))
    -- called by pcall itself, it has no Lua caller: no position, as a C function's error has none
    local ok, perr = pcall(bad, a)
    assert.is_false(ok)
    assert.are.same({ "Error", "" }, { cd.type(perr), perr.where })
  end)

  it("name the user's line for functions written in C", function()
    check(function() local _ = a:reshape({ 5 }) end, "reshape")
    check(function() local _ = cd.empty(-1) end, "empty")
    check(function() local _ = freed:tobytes() end, "tobytes")
    check(function() local _ = a:transpose(1, 2) end, "transpose")
    assert.are.equal("bad argument #1 to 'transpose' (2 axes given for an array of 1 dimension)",
      (check(function() local _ = a:transpose({ 1, 2 }) end, "transpose")))
  end)

  it("name the user's line for every function of the module and every Array method given a freed array", function()
    -- in a child (a call that succeeds may change the device or the profiler), from a chunk of one line a call,
    -- as a script writes them: cd.NAME(freed, freed) and freed:NAME(1); any call whose error is not at its line,
    -- names an internal chunk or not the function is printed
    local out = helper.run_child([==[
      local freed = cd.zeros(4, "float32", { device = "cpu" })
      freed:free()
      local ALIAS = { amax = "max", amin = "min" } -- (and arccos for acos: NumPy's names of one function)
      local function check(fn, key)
        local ok, err = pcall(fn)
        if ok then return end
        local text = type(err) == "string" and err or tostring(err)
        local alias = ALIAS[key] or key:gsub("^arc", "a")
        local function names(k) return text:find("'" .. k .. "'", 1, true) or text:find(k .. ":", 1, true) end
        local at = ("sweep:%d: "):format(debug.getinfo(fn, "S").linedefined)
        if text:sub(1, #at) ~= at or text:find("[cudadev]", 1, true) or text:find("cudadev%.%l+:%d")
          or not (names(key) or names(alias)) then
          print(key .. ": " .. text)
        end
      end
      local SKIP = { detect = true, now = true, type = true, profile_start = true, profile_stop = true }
      local lines, names = { "local check, freed, cd = ..." }, {}
      for k, v in pairs(cd) do
        if type(v) == "function" and k:match("^%l") and not SKIP[k] then names[#names + 1] = k end
      end
      table.sort(names)
      for _, k in ipairs(names) do lines[#lines + 1] = ("check(function() local _ = cd.%s(freed, freed) end, %q)"):format(k, k) end
      names = {}
      for k in pairs(getmetatable(freed).methods) do if k:match("^%l") and k ~= "tostring" then names[#names + 1] = k end end
      table.sort(names)
      for _, k in ipairs(names) do lines[#lines + 1] = ("check(function() local _ = freed:%s(1) end, %q)"):format(k, k) end
      assert(load(table.concat(lines, "\n"), "=sweep"))(check, freed, cd)
      print(#lines - 1 .. " calls")
    ]==])
    assert.are.equal("", (out:gsub("^%d+ calls\nexit 0\n$", "")))
    assert(tonumber(out:match("^(%d+) calls")) > 150, out)
  end)

  it("say that a kernel's first argument is its launch configuration", function()
    local x = cd.zeros(4, "float32", D)
    assert.are.equal(
      "bad argument #1 to 'k' (launch configuration expected (a table or a LaunchConfig), got cudadev.Array)",
      (check(function() m.k(x, 1000, 0) end, "k")))
    assert.are.equal("wrong number of arguments to 'k' (expected 3, got 2)",
      (check(function() m.k({ dim = 4 }, x, 1000) end, "k")))
  end)
end)
