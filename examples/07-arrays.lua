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
