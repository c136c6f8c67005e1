-- examples/07-arrays.lua: computing with arrays as in NumPy or CuPy: random data, arithmetic, reductions, a
-- matrix multiply, sorting, scans and selection, and a .npy file that NumPy reads. Runs on the default device: cuda:0 when there is a GPU,
-- else the cpu device (CUDADEV_DEVICE=cpu chooses the cpu device anyway).
--
--   make build && build/luacuda examples/07-arrays.lua
local cd = require "cudadev"

print("device:", cd.get_device().alias)

-- Random data (the same numbers on every device for the same seed) and ranges.
cd.random.seed(42)
local x = cd.random.uniform({ 4, 3 })            -- float32 in [0, 1), shape {4, 3}
local noise = cd.random.normal({ 4, 3 }, 0, 0.1)
local steps = cd.arange(12):reshape({ 4, 3 })    -- 0, 1, ..., 11: int64, as NumPy's arange of integers
print("x =", x)
print("steps =", steps)

-- Arithmetic: operators with arrays and numbers, broadcasting of trailing dimensions, math functions.
local y = 2 * x + noise - 1                       -- a new array per operation, as in NumPy
local row = cd.array({ 10, 20, 30 })             -- shape {3}: added to every row of a {4, 3} array
local z = cd.sqrt(cd.abs(y)) + row
print("z =", z)
y:mul_(0.5)                                       -- in place: no new array
print("y > 0:", y:gt(0))                          -- comparisons give bool arrays
print("where y > 0, y, else 0:", cd.where(y:gt(0), y, 0))

-- Reductions: a Lua number over everything, an Array along an axis (1-based, as Lua counts).
print("sum of x:", x:sum(), " mean:", x:mean(), " max:", x:max())
print("column sums of x:", x:sum(1))
print("row with the largest sum (1-based):", x:sum(2):argmax())

-- Matrix multiply: NumPy's a @ b is cd.matmul(a, b) or a:matmul(b) (cuBLAS on a GPU).
local w = cd.random.uniform({ 3, 2 })
local h = x:matmul(w)                              -- {4, 3} @ {3, 2} -> {4, 2}
print("x @ w =", h)
local gram = cd.matmul(x, x, { transa = true })    -- x^T x, {3, 3}, without copying a transpose
print("x^T x =", gram)

-- Sorting, scans, selection and joining, as NumPy's (positions 1-based, as Lua counts).
local v = x:reshape({ 12 })
print("sorted:", cd.sort(v))
print("order (1-based):", cd.argsort(v))
print("running sum:", cd.cumsum(v))
print("elements above 0.5:", v[v:gt(0.5)], " how many:", cd.count_nonzero(v:gt(0.5)))
print("the last element:", v[-1], " first and third:", v[cd.array({ 1, 3 }, "int64")])
print("x and steps joined by columns:", cd.concatenate({ x, steps:astype("float32") }, 2))

-- Types convert explicitly, as NumPy's astype.
print("as float64:", h:astype("float64"))

-- Files: .npy both ways (numpy.load reads what cd.save writes).
local tmp = os.tmpname()                           -- made empty by os.tmpname; removed below
local path = tmp .. ".npy"
cd.save(path, h)
local back = cd.load(path)
print(("saved and loaded %s: shape {%s}, equal: %s"):format(back.dtype, table.concat(back.shape, ", "),
  tostring(back:eq(h):all())))
print("in Python: numpy.load(" .. ("%q"):format(path) .. ")")
os.remove(path)
os.remove(tmp)

-- More of NumPy's everyday functions (issue 28): statistics, several axes at once, views, rounding, products.
print("std of x:", x:std(), " sample variance per column:", x:var({ axis = 1, ddof = 1 }))
local cube = cd.arange(24, "float64"):reshape({ 2, 3, 4 })
print("sum over axes 1 and 3:", cube:sum({ axis = { 1, 3 } }))
print("x clipped to [0.25, 0.75]:", cd.clip(x, 0.25, 0.75))
print("rounded half to even:", cd.round(cd.array({ 0.5, 1.5, 2.5 })))
print("eye(3) + the flipped identity:", cd.eye(3) + cd.flip(cd.eye(3), 1))
print("broadcast_to (a stride-0 view):", cd.broadcast_to(cd.array({ 1, 2, 3 }), { 2, 3 }))
local stack = cd.random.uniform({ 5, 4, 3 })       -- five 4 x 3 matrices
print("batched matmul {5, 4, 3} @ {3, 2}:", table.concat(cd.matmul(stack, w).shape, " x "))
print("x close to itself plus 1e-9:", cd.allclose(x, x + 1e-9))
