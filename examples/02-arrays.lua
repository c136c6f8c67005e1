-- examples/02-arrays.lua: arrays on the default device: dtypes, creation, element access, tables, views,
-- fill, printing and lifetime. The same script works on a GPU and on the cpu device.
--
--   make build && build/luacuda examples/02-arrays.lua
local cd = require "cudadev"

print("arrays go to the default device:", cd.get_device().alias)

-- Creation. float32 unless a dtype is given; short names ("i32", "f64") work too.
local zeros = cd.zeros(8)
local ones = cd.ones({ 2, 3 }, "int32")          -- a shape is an integer or a table
local sevens = cd.full(5, 7, "f64")
local halves = cd.full(3, 0.1, "float16")        -- float16 rounds: 0.1 becomes 0.0999756
local flags = cd.array({ true, false, true }, "bool")
local v = cd.array({ 1.5, 2.5, 3.5 })            -- from a table
local m = cd.array({ { 1, 2, 3 }, { 4, 5, 6 } }, "int16")   -- nested tables give the shape
local raw = cd.empty(4, "uint8")                 -- uninitialised: fill it before reading
local on_host = cd.zeros(4, { device = "cpu" })  -- any device can be named
local like = cd.full_like(m, 9)                  -- same shape, dtype and device as m
local square = m:new_zeros({ 2, 2 })             -- same dtype and device, another shape
for _, a in ipairs { zeros, ones, sevens, halves, flags, v, m, on_host, like, square } do print(a) end
raw:fill(255)

-- Fields. `shape` is a fresh table each time; #a is the number of elements.
print(("m: dtype %s, shape %s, ndim %d, size %d (#m = %d), %d bytes of %d, on %s, pinned %s"):format(m.dtype,
  table.concat(m.shape, "x"), m.ndim, m.size, #m, m.nbytes, m.itemsize, m.device.alias, m.is_pinned))

-- Element access is 1-based and bounds-checked. On a GPU each access is a synchronous one-element copy:
-- convenient for a few values, slow for many (use totable or a copy for those).
v[1] = 10
print("v[1], v[3]:", v[1], v[3])
print("m[2] is row 2, a view:", m[2])
m[2][3] = 60                                     -- writes through the row view into m
print("m[2][3]:", m[2][3])

-- totable gives nested Lua tables shaped like the array.
local t = m:totable()
assert(t[2][3] == 60 and #t == 2 and #t[1] == 3)

-- Misuse raises errors in Lua's own tone.
print(pcall(function() return v[4] end))
print(pcall(function() ones[1][1] = 2.5 end))   -- int32 holds no 2.5
print(pcall(cd.zeros, 4, { blok = 1 }))          -- options tables reject unknown keys

-- Views share memory with their base (and keep it alive): slices (inclusive, 1-based), reshapes and
-- reinterpretations of the bytes as another dtype.
local w = cd.array({ 1, 2, 3, 4, 5, 6 })
local middle = w:slice(2, 4)                     -- elements 2, 3 and 4
local grid = w:reshape({ 2, 3 })                 -- -1 infers one dimension: w:reshape({-1, 3})
local bits = w:view("int32")                     -- the float32 bytes read as int32
middle:fill(0)
print(w)
print(grid)
print(bits)                                      -- 1.0f is 1065353216 as an int32
assert(grid[2][1] == 0 and w[2] == 0 and w[5] == 5)

-- fill and zero work on views too, and return the array, so they chain.
print(grid[1]:fill(-1))
print(w:zero())

-- Printing: small arrays show their values, long dimensions are elided, large arrays show a header only.
print(cd.ones(1000, "int8"))
print(w:tostring())

-- Lifetime: the collector frees arrays, but device memory is worth giving back sooner. free() releases
-- now; a to-be-closed variable releases at the end of its block.
do
  local scratch <close> = cd.empty(1 << 20)
  scratch:zero()
end                                              -- scratch's memory is released here
w:free()
print(w, middle)                                 -- the view keeps the memory alive
print(pcall(function() return w[1] end))
