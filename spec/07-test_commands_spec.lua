-- The test commands are sized for a person (issue 30): `make test` is the suite and the C tests, with a progress
-- line per spec file and each skip reason once with its count; `make check` is the sanitizer passes; .ci/run
-- runs both; the packaging builds only what it installs and states the licence.
local helper = require "spec.helper"
local manual = require "spec.manual"

local sh = helper.shell_quote
local function slurp(path) return assert(manual.slurp(path), "cannot read " .. path) end

local function capture(cmd)
  local p = io.popen(cmd .. " 2>&1; echo \"exit $?\"", "r")
  local out = p:read("a")
  p:close()
  return out:gsub("exit %d+\n$", ""), tonumber(out:match("exit (%d+)\n$"))
end

describe("the suite's output", function()
  local dir
  before_each(function()
    dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. sh(dir)))
  end)
  after_each(function() os.execute("rm -rf " .. sh(dir)) end)

  -- busted on two small spec files, with the repository's output handler
  local function run_busted(files)
    local names = {}
    for name, text in pairs(files) do
      local f = assert(io.open(dir .. "/" .. name, "w"))
      f:write(text)
      f:close()
      names[#names + 1] = sh(dir .. "/" .. name)
    end
    table.sort(names)
    return capture(("env -u LD_PRELOAD lua5.4 %s -o %s %s"):format(
      sh((os.getenv("BUSTED_BIN") or "/usr/bin/busted")), sh("spec/summary_output.lua"), table.concat(names, " ")))
  end

  it("prints a progress line per file with a count, and each skip reason once with its count", function()
    local out, code = run_busted {
      ["a_spec.lua"] = [[
        it("one", function() end)
        it("two", function() end)
        pending("needs a thing (no GPU here: driver missing)")
        pending("needs another thing (no GPU here: driver missing)")
      ]],
      ["b_spec.lua"] = [[
        it("three", function() end)
        pending("the odd one (a reason of its own)")
      ]],
    }
    assert.equal(0, code, out)
    assert.matches("%[1/2%] [^\n]*a_spec%.lua%s+2 passed, 0 failed, 2 skipped", out)
    assert.matches("%[2/2%] [^\n]*b_spec%.lua%s+1 passed, 0 failed, 1 skipped", out)
    assert.matches("skipped, by reason:\n%s+2  no GPU here: driver missing\n%s+1  a reason of its own\n", out)
    local _, n = out:gsub("no GPU here: driver missing", "")
    assert.equal(1, n, out)               -- once, not once per pending test
    assert.not_matches("Pending %->", out)
    assert.not_matches("%+%+%+", out)     -- no dot per test
    assert.matches("\nbusted: 3 passed, 0 failed, 3 skipped\n$", out)
  end)

  -- the failed tests' names come under their file's line as it ends: a run cut short (a device call's time limit)
  -- never reaches the full texts at the end
  it("still prints failures in full, and counts them", function()
    local out, code = run_busted { ["c_spec.lua"] = [[
      it("fails", function() assert.equal(1, 2) end)
      it("passes", function() end)
    ]] }
    assert.not_equal(0, code)
    assert.matches("%[1/1%] [^\n]*c_spec%.lua%s+1 passed, 1 failed, 0 skipped[^\n]*\n    failed: fails\n", out)
    assert.matches("Failure %->[^\n]*c_spec%.lua", out)
    assert.matches("\nbusted: 1 passed, 1 failed, 0 skipped\n$", out)
  end)
end)

describe("the make targets", function()
  -- make -n prints what a target would run without running it; but a line with $(MAKE) runs even then (and a
  -- check-asan line runs .ci/check.sh, whose status files a real pass of make check would find clobbered): MAKE=echo
  -- prints the sub-make's target instead of running it
  local function dry(target)
    local out, code = capture("env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS make -n " .. target ..
      " MAKE=echo BUSTED='lua5.4 busted' BUSTED_ARGS=")
    assert.equal(0, code, out)
    return out
  end

  it("make test runs the suite and the C tests, not the sanitizer passes", function()
    local out = dry("test")
    assert.matches("check%.sh suite", out)
    assert.matches("check%-ctest", out)
    assert.not_matches("check%-asan", out)
    assert.not_matches("check%-valgrind", out)
  end)

  it("make check runs the sanitizer passes", function()
    local out = dry("check")
    assert.matches("check%-asan", out)
    assert.matches("check%-valgrind", out)
    assert.not_matches("check%.sh suite", out)
  end)

  it("make demo installs only what the module needs and builds only the module and luacuda", function()
    local out = dry("demo")
    assert.matches("deps%.sh %-%-demo", out)
    assert.matches("%-%-target cudadev luacuda", out)
  end)

  it(".ci/run runs make test, then make check", function()
    local run = slurp(".ci/run")
    local t, c = run:find("\nmake test\n", 1, true), run:find("\nmake check\n", 1, true)
    assert.truthy(t and c and t < c, run)
  end)

  it("apt waits for another apt's lock instead of failing", function()
    assert.matches("DPkg::Lock::Timeout=%d+", slurp(".ci/deps.sh"))
  end)
end)

describe("packaging", function()
  it("states the MIT licence in LICENSE, the rockspec and the CMake package", function()
    assert.matches("^MIT License\n", slurp("LICENSE"))
    assert.matches('license = "MIT"', slurp("rockspec/cudadev-scm-1.rockspec"))
    assert.matches('set%(cudadev_LICENSE "MIT"%)', slurp("cmake/cudadevConfig.cmake"))
  end)

  it("luarocks make builds no C tests", function()
    assert.matches('CUDADEV_TESTS = "OFF"', slurp("rockspec/cudadev-scm-1.rockspec"))
  end)
end)
