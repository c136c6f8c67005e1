-- Issue #29: the fast paths checked with kernels nobody chose (spec/cpu_random_kernels.lua): each generated
-- kernel runs on its fast path and on the fibers with the same inputs and must give the same integers, and, where
-- there is a GPU (.ci/gpu-session), on cuda:0 too.
-- CUDADEV_RANDOM_SEED and CUDADEV_RANDOM_KERNELS change the fixed seed and count (CI keeps the defaults).
local helper = require "spec.helper"
local cd = require "cudadev"
local gen = require "spec.cpu_random_kernels"

local CPU = { device = "cpu" }
local SEED = tonumber(os.getenv("CUDADEV_RANDOM_SEED") or "") or 29
local COUNT = tonumber(os.getenv("CUDADEV_RANDOM_KERNELS") or "") or 48

-- The integers launch l of module m gives on device dev, from the same inputs on every device.
local function run(m, l, dev)
  local n = 3 * l.nt
  local input = {}
  for i = 1, n do input[i] = (i * 2654435761) % 4294967296 end
  local out = cd.zeros(n, "uint32", dev)
  m[l.name]({ grid = 3, block = l.block, shared = l.shared }, cd.array(input, "uint32", dev), out, 2)
  return out:totable()
end

local function count_paths(paths)
  local line = {}
  for p, c in pairs(paths) do line[#line + 1] = p .. " " .. c end
  table.sort(line)
  return table.concat(line, ", ")
end

describe("random kernels on the cpu fast paths", function()
  it(("give what the fibers give (seed %d, %d kernels)"):format(SEED, COUNT), function()
    local src, entries, launches = gen.gen(SEED, COUNT)
    local fast = cd.compile("#define FORCE\n" .. src, { device = "cpu", name_expressions = entries })
    local ref = cd.compile("#define FORCE if (0) __syncwarp();\n" .. src, { device = "cpu", name_expressions = entries })
    local paths = {}
    for _, l in ipairs(launches) do
      local p = fast[l.name].cpu_path
      paths[p] = (paths[p] or 0) + 1
      assert.are.equal("fibers", ref[l.name].cpu_path, l.name)
      assert.are.same(run(ref, l, CPU), run(fast, l, CPU),
        l.name .. " on " .. p .. " (" .. tostring(fast[l.name].cpu_reason) .. ")")
    end
    io.stderr:write(("random kernels: %d, paths: %s\n"):format(COUNT, count_paths(paths)))
    -- seed 29's 48 kernels: what the fast paths took when this count was written (a regression lowers it); the
    -- one on the fibers calls an inlined helper whose local fission reads as declared twice (k20<128>)
    if SEED == 29 and COUNT == 48 then
      assert.is_true((paths.fission or 0) + (paths.simd or 0) >= 47, count_paths(paths))
    end
  end)

  helper.gpu_it(("give on cuda:0 what they give on the cpu (seed %d, %d kernels)"):format(SEED, COUNT), function()
    local src, entries, launches = gen.gen(SEED, COUNT)
    local gpu = cd.compile("#define FORCE\n" .. src, { device = "cuda:0", name_expressions = entries })
    local fast = cd.compile("#define FORCE\n" .. src, { device = "cpu", name_expressions = entries })
    local GPU = { device = "cuda:0" }
    for _, l in ipairs(launches) do
      assert.are.same(run(gpu, l, GPU), run(fast, l, CPU), l.name .. " on " .. fast[l.name].cpu_path)
    end
    io.stderr:write(("random kernels on cuda:0: %d, no mismatch\n"):format(COUNT))
  end)
end)
