-- examples/10-fuse.lua: cd.fuse turns a Lua function over arrays into one generated kernel (CuPy's cupy.fuse): an
-- axpy with a Lua number as a parameter, a softplus with cd.where, and a mean squared error whose sum is fused into
-- the same pass. Checks each against the unfused expression. Runs on the default device: cuda:0 when there is a
-- GPU, else the cpu device (CUDADEV_DEVICE=cpu chooses the cpu device anyway).
--
--   make build && build/luacuda examples/10-fuse.lua
local cd = require "cudadev"

print("device:", cd.get_device().alias)
local n = 1 << 20
cd.random.seed(7)
local x, y = cd.random.normal(n), cd.random.normal(n)

-- one kernel instead of two, no temporary: a * x + y
local axpy = cd.fuse(function(a, u, v) return a * u + v end)
local r = axpy(2.5, x, y)
print("axpy", r[1], (2.5 * x + y)[1])
axpy(0.5, x, y, { out = y })                       -- in place; a new value of a costs no new trace

-- softplus, written with cd.where so that the choice is per element (Lua's `if` on a traced value is not traced)
local softplus = cd.fuse(function(u)
  return cd.where(u:gt(20), u, cd.log1p(cd.exp(u)))
end)
print("softplus", softplus(x):max(), cd.where(x:gt(20), x, cd.log1p(cd.exp(x))):max())

-- mean squared error: the difference, its square and the sum in one pass over x and y
local mse = cd.fuse(function(u, v) return ((u - v) ^ 2):sum() / n end)
print(("mse %.6f (unfused %.6f)"):format(mse(x, y), ((x - y) ^ 2):sum() / n))
