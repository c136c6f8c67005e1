-- Issue #29: the fast paths checked with kernels nobody chose (spec/cpu_random_kernels.lua): each generated
-- kernel runs on its fast path and on the fibers with the same inputs and must give the same integers.
-- CUDADEV_RANDOM_SEED and CUDADEV_RANDOM_KERNELS change the fixed seed and count (CI keeps the defaults).
local cd = require "cudadev"
local gen = require "spec.cpu_random_kernels"

local CPU = { device = "cpu" }
local SEED = tonumber(os.getenv("CUDADEV_RANDOM_SEED") or "") or 29
local COUNT = tonumber(os.getenv("CUDADEV_RANDOM_KERNELS") or "") or 48

describe("random kernels on the cpu fast paths", function()
  it(("give what the fibers give (seed %d, %d kernels)"):format(SEED, COUNT), function()
    local src, entries, launches = gen.gen(SEED, COUNT)
    local fast = cd.compile("#define FORCE\n" .. src, { device = "cpu", name_expressions = entries })
    local ref = cd.compile("#define FORCE if (0) __syncwarp();\n" .. src, { device = "cpu", name_expressions = entries })
    local paths = {}
    for _, l in ipairs(launches) do
      local grid, n = 3, 3 * l.nt
      local input = {}
      for i = 1, n do input[i] = (i * 2654435761) % 4294967296 end
      local outs = {}
      for k, m in ipairs { fast, ref } do
        local out = cd.zeros(n, "uint32", CPU)
        m[l.name]({ grid = grid, block = l.block, shared = l.shared }, cd.array(input, "uint32", CPU), out, 2)
        outs[k] = out:totable()
      end
      local p = fast[l.name].cpu_path
      paths[p] = (paths[p] or 0) + 1
      assert.are.equal("fibers", ref[l.name].cpu_path, l.name)
      assert.are.same(outs[2], outs[1], l.name .. " on " .. p .. " (" .. tostring(fast[l.name].cpu_reason) .. ")")
    end
    local line = {}
    for p, c in pairs(paths) do line[#line + 1] = p .. " " .. c end
    table.sort(line)
    io.stderr:write(("random kernels: %d, paths: %s\n"):format(COUNT, table.concat(line, ", ")))
  end)
end)
