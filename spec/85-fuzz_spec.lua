-- The API fuzzer (spec/fuzz.lua, issue #7) as part of the suite: 10^5 random calls of every public function,
-- method, field and metamethod, in a child process (a crash is reported with the seed and the call, and does
-- not take the suite down). The process must not crash, every error must be a string or a cudadev.Error,
-- Arrays must describe themselves consistently, and when the run's objects are dropped collectgarbage()
-- must bring cd._live() back to where it started. Issue 27: the edge sizes (0, 1, 2^31 +- 1, 2^32, 2^62, 2^63 - 1) go
-- into shapes, counts, axes and indexes, and every live Array is checked to lie inside its block after every call.
--   CUDADEV_FUZZ_CALLS (default 100000) and CUDADEV_FUZZ_SEED (default 1) change the run; longer runs:
--   lua5.4 spec/fuzz.lua --calls 1000000 --seed 7
local fuzz = require "spec.fuzz"

local calls = math.tointeger(tonumber(os.getenv("CUDADEV_FUZZ_CALLS") or "")) or 100000
local seed = math.tointeger(tonumber(os.getenv("CUDADEV_FUZZ_SEED") or "")) or 1

-- the module this suite loads (build/?.so, or build-asan/?.so under `make asan`), for the child to load too
local function cpath()
  for entry in package.cpath:gmatch("[^;]+") do
    if entry:find("build", 1, true) then return entry end
  end
  return "build/?.so"
end

describe("the API fuzzer", function()
  it(("survives %d random calls (seed %d)"):format(calls, seed), function()
    local ok, output = fuzz.supervise({ calls = calls, seed = seed, cpath = cpath() })
    -- the report's first lines (calls, launches, errors raised, findings; edge-size calls and invariant checks) show
    -- in the test output either way
    io.write("\n", (output:match("fuzz: seed[^\n]*\n[^\n]*") or output), "\n")
    assert(ok, "\n" .. output .. ("\nrepeat with: lua5.4 spec/fuzz.lua --calls %d --seed %d --cpath '%s'"):format(
      calls, seed, cpath()))
    -- issue 27: the edge sizes were drawn, and every live Array was checked to lie inside its block after each call
    local edge_calls, checks = output:match("fuzz: edge sizes in (%d+) calls, (%d+) invariant checks")
    assert(edge_calls and tonumber(edge_calls) > calls // 20 and tonumber(checks) >= calls, "\n" .. output)
  end)

  it("gives the same run for the same seed", function()
    -- in child processes, as the long run: on a GPU host this process keeps its CUDA devices to itself
    local function counts(output) return output:match("fuzz: seed 3, (%d+ calls %(%d+ launches%)).-: (.*); ") end
    local ok1, out1 = fuzz.supervise({ calls = 300, seed = 3, cpath = cpath() })
    local ok2, out2 = fuzz.supervise({ calls = 300, seed = 3, cpath = cpath() })
    assert(ok1 and ok2, out1 .. "\n" .. out2)
    local c1, r1 = counts(out1)
    assert.is_truthy(c1, out1)
    assert.are.same({ c1, r1 }, { counts(out2) })
  end)
end)
