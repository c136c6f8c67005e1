-- spec/numpy_diff.lua: the differential suite's generator and runner (spec/29-numpy_diff_spec.lua runs it).
-- Cases come from a fixed seed over every public array function, operator and method (ENTRIES: one table entry
-- a function; the elementwise ones and the fusable reductions twice, the second time through cd.fuse); each runs
-- through cudadev on the default device, and spec/numpy_diff.py runs the same case through
-- NumPy in one python3 process and compares values, dtypes, shapes, NaN positions and which cases raise.
--
--   local diff = require "spec.numpy_diff"
--   diff.run({python = "/usr/bin/python3", dir = tmpdir, seed = 28})
--     -> {cases = {...}, verdicts = {[id] = {ok = bool, kind =, detail =}}, kernels = n}
--   diff.covered() -> {["cd.add"] = true, ["Array:eq"] = true, ["operator +"] = true, ...}
--   diff.NOT_ARRAY -> the public names that are not array functions, each with the reason
--
-- An entry: { name, kind = generator, lua = function(args..., p) -> cudadev's answer, np = a Python expression of
-- the argument names (x, y, c), `p` (the case's parameters) and np, tol = ulps (0: exact) or "sum" }. Inputs are
-- built from raw bytes (cd.array(bytes, dtype)), so both sides see the same bits; NumPy gets each operand's base
-- array and a Python expression for the view cudadev took of it (b.T, b[::2]).
local cd = require "cudadev"
local fmt, concat = string.format, table.concat

local M = {}

-- ------------------------------------------------------------------------------------------ the PRNG
-- xorshift64 (Marsaglia's 13, 7, 17), so the cases depend on the seed only, not on Lua's math.random.
local function rng(seed)
  local s = (seed * 0x9E3779B97F4A7C15) ~ 0x2545F4914F6CDD1D
  if s == 0 then s = 1 end
  local r = {}
  function r.next()
    s = s ~ (s << 13); s = s ~ (s >> 7); s = s ~ (s << 17)
    return s
  end
  function r.int(n) return (r.next() >> 11) % n + 1 end        -- 1..n
  function r.unit() return (r.next() >> 11) / 2.0 ^ 53 end     -- [0, 1)
  function r.pick(t) return t[r.int(#t)] end
  function r.chance(p) return r.unit() < p end
  function r.shuffle(t)
    for i = #t, 2, -1 do local j = r.int(i); t[i], t[j] = t[j], t[i] end
    return t
  end
  return r
end
M.rng = rng

-- ------------------------------------------------------------------------------------------ values
M.DTYPES = { "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32",
             "float64" }
local FLOATS = { "float16", "float32", "float64" }
local PACK = { bool = "B", int8 = "i1", int16 = "i2", int32 = "i4", int64 = "i8", uint8 = "I1", uint16 = "I2",
               uint32 = "I4", uint64 = "I8", float16 = "f", float32 = "f", float64 = "d", complex64 = "ff",
               complex128 = "dd" }
-- the complex dtypes (issue 32): apart from DTYPES, so the entries drawn from DTYPES keep their cases; the entries
-- marked cplx draw from these (combos_for)
M.COMPLEX = { "complex64", "complex128" }
local PART = { complex64 = "float32", complex128 = "float64" }
local BITS = { int8 = 8, int16 = 16, int32 = 32, int64 = 64, uint8 = 8, uint16 = 16, uint32 = 32, uint64 = 64 }

local function kind(dt) return dt == "bool" and "b" or dt:sub(1, 1) end

local SPECIAL = { 0.0, -0.0, 1 / 0, -1 / 0, 0 / 0, 0.5, -0.5, 1.5, 2.5, -2.5 }
local BIG = { float16 = { 65504.0, -65504.0, 1000.0, 2.0 ^ -24, 2.0 ^ -14, 6e4 },
              float32 = { 1e30, -3e38, 1e-40, 2.0 ^ 24 + 1, 1e7 + 0.5, -1e-30 },
              float64 = { 1e300, -1e308, 5e-324, 2.0 ^ 53 + 1, 1e16, 2.0 ^ 63, -2.0 ^ 64 } }

local function int_value(r, dt)
  local bits, signed = BITS[dt], kind(dt) == "i"
  local p = r.int(10)
  if p <= 6 then return signed and r.int(13) - 7 or r.int(13) - 1 end
  local min = signed and (bits == 64 and math.mininteger or -(1 << (bits - 1))) or 0
  local max = bits == 64 and (signed and math.maxinteger or -1) or (signed and (1 << (bits - 1)) - 1 or (1 << bits) - 1)
  if p <= 8 then return r.pick({ min, max, min + 1, max - 1, 0, 1, signed and -1 or 2 }) end
  local v = r.next()
  if bits == 64 then return v end
  v = v & ((1 << bits) - 1)
  if signed and v >= 1 << (bits - 1) then v = v - (1 << bits) end
  return v
end

-- A value for dtype dt: mostly small, some edges and specials, some anywhere in the range.
local value
function value(r, dt)
  if PART[dt] then return value(r, PART[dt]), value(r, PART[dt]) end   -- a complex: its two parts
  if dt == "bool" then return r.int(2) - 1 end
  if kind(dt) ~= "f" then return int_value(r, dt) end
  local p = r.int(10)
  if p <= 4 then return (r.int(13) - 7) + 0.0 end
  if p <= 6 then return (r.int(41) - 21) / 4 end
  if p == 7 then return r.pick(SPECIAL) end
  if p == 8 then return r.pick(BIG[dt]) end
  return r.unit() * 200 - 100
end
M.value = value

local function prod(shape)
  local n = 1
  for _, d in ipairs(shape) do n = n * d end
  return n
end

-- A contiguous Array of dtype dt and this shape, of generated values; float16 goes through float32 (astype), its
-- bytes are what NumPy gets either way.
local function make(r, dt, shape, gen)
  local parts = {}
  for i = 1, prod(shape) do parts[i] = string.pack("<" .. PACK[dt], (gen or value)(r, dt)) end
  local bytes = concat(parts)
  local a = dt == "float16" and cd.array(bytes, "float32"):astype("float16") or cd.array(bytes, dt)
  return a:reshape(shape)
end
M.make = make

-- ------------------------------------------------------------------------------------------ operands
-- An operand: {value = the Array or Lua value cudadev gets, base = the Array NumPy rebuilds, view = Python of b}.
local function plain(a) return { value = a, base = a, view = "b" } end

local function reversed(shape)
  local t = {}
  for i = #shape, 1, -1 do t[#t + 1] = shape[i] end
  return t
end

-- The same shape as a strided view of a larger base: a transpose, a stepped slice or a reversed one.
local function strided(r, dt, shape)
  local n = #shape
  local how = r.int(3)
  if how == 1 and n >= 2 then
    local b = make(r, dt, reversed(shape))
    return { value = b:transpose(), base = b, view = "b.T" }
  end
  if n == 0 then return plain(make(r, dt, shape)) end
  local ax = r.int(n)
  local big = {}
  for i = 1, n do big[i] = shape[i] end
  local step = how == 2 and 2 or -1
  big[ax] = shape[ax] * math.abs(step)
  local b = make(r, dt, big)
  return { value = b:slice(nil, nil, step, ax), base = b, view = fmt("b[%s::%d]", (":,"):rep(ax - 1), step) }
end

local function operand(r, dt, shape, view_p)
  if r.chance(view_p or 0.2) then return strided(r, dt, shape) end
  return plain(make(r, dt, shape))
end

-- A Lua number NumPy takes as a weak Python scalar: small, an edge, out of a narrow dtype's range, a special.
local function scalar(r, as_float)
  if as_float or r.chance(0.3) then
    local p = r.int(6)
    if p == 1 then return r.pick(SPECIAL) end
    if p <= 3 then return (r.int(17) - 9) / 2 end
    return (r.int(13) - 7) + 0.0
  end
  local p = r.int(10)
  if p <= 7 then return r.int(13) - 7 end
  return r.pick({ 300, -200, 70000, 1 << 40, math.maxinteger, math.mininteger, 255, -129 })
end
M.scalar = scalar

-- ------------------------------------------------------------------------------------------ shapes
local SHAPES = { {}, { 1 }, { 5 }, { 0 }, { 3, 4 }, { 2, 3, 4 }, { 4, 1 }, { 7 } }
-- pairs that broadcast (and one that does not)
local BPAIRS = { { { 3, 1 }, { 1, 4 } }, { { 2, 3, 4 }, { 4 } }, { { 4 }, { 3, 1 } }, { { 2, 1, 3 }, { 5, 1 } },
                 { { 5 }, {} }, { { 0, 3 }, { 3 } }, { { 2 }, { 3 } } }

-- ------------------------------------------------------------------------------------------ generators
-- Each kind's generator: gen(r, combo, entry) -> {args = {{name =, operand}...}, p = {...}, py = {name = literal}}.
-- combo is one of the entry's dtype combinations (kernels are compiled per combination, so cases reuse them).
local GEN = {}

local function arg(name, o) o.name = name; return o end

-- x OP y: arrays of one shape, broadcast shapes, a scalar on either side
-- Kernels are compiled per dtypes and per operand form (a scalar, a broadcast, a strided view), so each
-- combination takes the plain form and one other (combo.form), and its cases vary shapes and values.
function GEN.binary(r, combo, e)
  local dx, dy = combo[1], combo[2]
  local form = r.chance(0.5) and "plain" or combo.form
  if form == "scalar_left" and e.method then form = "scalar" end
  local s = r.pick(SHAPES)
  if form == "plain" or form == "strided" then
    local p = form == "strided" and 1 or 0
    return { args = { arg("x", operand(r, dx, s, p)), arg("y", operand(r, dy, s, p)) } }
  elseif form == "broadcast" then
    local pair = combo.bpair
    return { args = { arg("x", plain(make(r, dx, pair[1]))), arg("y", plain(make(r, dy, pair[2]))) } }
  end
  local v = scalar(r, kind(dy) == "f")
  if form == "scalar" then
    return { args = { arg("x", operand(r, dx, s, 0)), arg("y", { value = v }) } }
  end
  return { args = { arg("x", { value = v }), arg("y", operand(r, dx, s, 0)) } }
end

-- a:add_(y): the same, the left operand an array of the broadcast shape
function GEN.inplace(r, combo)
  local s = r.pick(SHAPES)
  local y = r.chance(0.3) and { value = scalar(r, kind(combo[2]) == "f") } or operand(r, combo[2], s)
  return { args = { arg("x", operand(r, combo[1], s, 0.1)), arg("y", y) } }
end

function GEN.unary(r, combo)
  return { args = { arg("x", operand(r, combo[1], r.pick(SHAPES), combo.form == "strided" and 0.5 or 0)) } }
end

function GEN.where(r, combo)
  local s = r.pick(SHAPES)
  local c = operand(r, r.chance(0.8) and "bool" or combo[1], s)
  local y = r.chance(0.3) and { value = scalar(r, kind(combo[2]) == "f") } or operand(r, combo[2], s)
  return { args = { arg("c", c), arg("x", operand(r, combo[1], s)), arg("y", y) } }
end

-- reductions: everything (a Lua value), one axis as a number, or {axis=, keepdims=}
local RSHAPES = { { 5 }, { 3, 4 }, { 2, 3, 4 }, { 0 }, { 1 }, { 4, 0 }, {} }
function GEN.reduce(r, combo)
  local s = r.pick(RSHAPES)
  local x = operand(r, combo[1], s, 0.25)
  local p, py = {}, { axis = "None", keepdims = "False" }
  local form = #s == 0 and 1 or r.int(3)
  if form >= 2 then
    local ax = r.int(#s)
    if r.chance(0.3) then ax = ax - #s - 1 end      -- negative: counts from the last
    py.axis = tostring(ax > 0 and ax - 1 or ax)
    if form == 2 then p.arg = ax
    else
      local keep = r.chance(0.5)
      p.arg = { axis = ax, keepdims = keep }
      py.keepdims = keep and "True" or "False"
    end
  end
  return { args = { arg("x", x) }, p = p, py = py }
end

function GEN.astype(r, combo)
  return { args = { arg("x", operand(r, combo[1], r.pick(SHAPES), 0.2)) }, p = { dtype = combo[2] },
           py = { dtype = fmt("%q", combo[2]) } }
end

local MSHAPES = { { { 2, 3 }, { 3, 4 } }, { { 3 }, { 3, 2 } }, { { 4, 3 }, { 3 } }, { { 5 }, { 5 } },
                  { { 2, 2, 3 }, { 3, 2 } }, { { 1, 4 }, { 4, 1 } }, { { 3, 0 }, { 0, 2 } }, { { 2, 3 }, { 2, 3 } } }
function GEN.matmul(r, combo)
  local sh = r.pick(MSHAPES)
  local small = function(rr, dt) return dt == "bool" and rr.int(2) - 1 or kind(dt) == "f" and (rr.int(9) - 5) / 2
    or kind(dt) == "u" and rr.int(6) - 1 or rr.int(9) - 5 end
  local a, b = make(r, combo[1], sh[1], small), make(r, combo[2], sh[2], small)
  local x = r.chance(0.25) and #sh[1] == 2 and { value = a:transpose():contiguous():transpose(), base = a:transpose():contiguous(), view = "b.T" } or plain(a)
  return { args = { arg("x", x), arg("y", plain(b)) } }
end

-- views of one array: the parameters of a slice, a transpose, a reshape, a dtype view
function GEN.view(r, combo)
  local s = r.pick({ { 6 }, { 3, 4 }, { 2, 3, 4 }, { 0 }, { 4, 2 } })
  local x = operand(r, combo[1], s, 0.2)
  local n, ax = #s, r.int(#s)
  local ext = s[ax]
  local step = r.pick({ 1, 2, 3, -1, -2 })
  local i, j
  if step > 0 then
    i = r.int(ext + 1); j = math.min(ext, i - 1 + r.int(ext + 1))
  else
    i = ext > 0 and r.int(ext) or 0; j = i > 0 and r.int(i) or 1
  end
  local perm = {}
  for k = 1, n do perm[k] = k end
  r.shuffle(perm)
  local p = { i = i, j = j, step = step, axis = ax, perm = perm, shape = { prod(s) }, dtype = combo[2] }
  local pyperm = {}
  for k = 1, n do pyperm[k] = perm[k] - 1 end
  local stop = step > 0 and tostring(j) or (j >= 2 and tostring(j - 2) or "None")
  local py = { sl = fmt("(slice(None),) * %d + (slice(%d, %s, %d),)", ax - 1, i - 1, stop, step),
               perm = "(" .. concat(pyperm, ", ") .. (n == 1 and ",)" or ")"), dtype = fmt("%q", combo[2]) }
  return { args = { arg("x", x) }, p = p, py = py }
end

-- creation from Lua values: p = {shape =, dtype =, value =, data =}
local function nested(r, dt, shape, d)
  d = d or 1
  local t = {}
  if d > #shape then return nil end
  for i = 1, shape[d] do
    if d == #shape then
      local v = value(r, dt == "bool" and "int8" or dt)
      if dt == "bool" then v = v > 0 end
      if kind(dt) == "f" and v ~= v then v = 1.5 end      -- NaN in a table: kept out (Lua's tables hold it fine)
      if dt == "uint64" and v < 0 then v = 7 end
      t[i] = v
    else
      t[i] = nested(r, dt, shape, d + 1)
    end
  end
  return t
end

function GEN.create(r, combo, e)
  local dt = combo[1]
  local s = r.pick({ { 3 }, { 2, 3 }, { 0 }, { 2, 0 }, { 0, 3 }, { 1, 1, 2 }, {} })
  local v
  if dt == "bool" then v = r.chance(0.5)
  elseif kind(dt) == "f" then v = scalar(r, true)
  else v = kind(dt) == "u" and r.int(9) - 1 or r.int(13) - 7 end
  if #s == 0 and e.table then s = { 2 } end      -- cd.array takes a table
  local data = nested(r, dt, s)
  local like = operand(r, dt, s, 0.2)
  return { args = { arg("x", like) }, p = { shape = s, dtype = dt, value = v, data = data },
           py = { shape = M.py(s, true), dtype = fmt("%q", dt), value = M.py(v), data = M.py(data) } }
end

-- cd.arange / cd.linspace: bounds, steps and counts
function GEN.range(r, combo)
  local dt = combo[1]
  local ints = r.chance(0.5)
  local a = ints and r.int(11) - 6 or (r.int(21) - 11) / 4
  local b = a + (ints and r.int(15) - 3 or (r.int(41) - 11) / 4)
  local step = ints and r.pick({ 1, 2, 3, -1, -2 }) or r.pick({ 0.5, 0.25, 1.5, -0.5, 1 })
  local num = r.pick({ 0, 1, 2, 5, 7 })
  local endpoint = r.chance(0.7)
  return { args = {}, p = { a = a, b = b, step = step, num = num, endpoint = endpoint, dtype = dt },
           py = { a = M.py(a), b = M.py(b), step = M.py(step), num = M.py(num), endpoint = M.py(endpoint),
                  dtype = dt == "default" and "None" or fmt("%q", dt) } }
end

-- files: the path a case writes or reads
function GEN.file(r, combo, entry, ctx)
  local s = r.pick({ { 4 }, { 2, 3 }, { 0 }, {}, { 2, 0, 3 } })
  ctx.nfile = (ctx.nfile or 0) + 1
  local path = fmt("%s/f%d.%s", ctx.dir, ctx.nfile, entry.npy and "npy" or "bin")
  return { args = { arg("x", operand(r, combo[1], s, 0.2)) }, p = { path = path, shape = s, dtype = combo[1] },
           py = { path = fmt("%q", path), shape = M.py(s, true), dtype = fmt("%q", combo[1]) } }
end

-- one array and an axis (nil: the function's default), for sorts and scans
function GEN.axis(r, combo, e)
  local s = r.pick({ { 6 }, { 3, 4 }, { 2, 3, 4 }, { 0 }, { 1 }, { 4, 0 } })
  local p, py = {}, { axis = e.default_axis or "None" }
  if r.chance(0.6) then
    local ax = r.int(#s)
    if r.chance(0.3) then ax = ax - #s - 1 end
    p.axis, py.axis = ax, tostring(ax > 0 and ax - 1 or ax)
  end
  return { args = { arg("x", operand(r, combo[1], s, 0.2)) }, p = p, py = py }
end

-- cd.fft's 1-d transforms: an array, n (nil: the axis's length), an axis (nil: the last) and a norm
local FSHAPES = { { 8 }, { 5 }, { 1 }, { 3, 4 }, { 2, 3, 5 }, { 4, 6 }, { 7, 2 } }
local function fft_norm(r)
  local norm = r.pick({ false, "backward", "ortho", "forward" })
  return norm or nil, norm and fmt("%q", norm) or "None"
end
-- finite values of a moderate size: a transform adds every element into every output, so one infinity or NaN
-- makes NaNs wherever the algorithm's order of additions puts them, and the error is relative to the magnitudes
local finite
function finite(r, dt)
  if PART[dt] then return finite(r, PART[dt]), finite(r, PART[dt]) end
  if kind(dt) ~= "f" then return r.int(21) - 11 end
  return (r.int(41) - 21) / 4 + r.unit()
end
local function fft_input(r, combo, s)
  if r.chance(0.2) and #s >= 2 then   -- a transposed view
    local b = make(r, combo[1], reversed(s), finite)
    return { value = b:transpose(), base = b, view = "b.T" }
  end
  return plain(make(r, combo[1], s, finite))
end
function GEN.fft(r, combo, e)
  local s = r.pick(FSHAPES)
  local p, py = {}, { n = "None", axis = "-1" }
  if r.chance(0.5) then p.n = r.pick({ 1, 4, 6, 7, 9, 16 }); py.n = tostring(p.n) end
  if e[1] == "cd.fft.irfft" and not p.n and s[#s] == 1 then p.n, py.n = 2, "2" end   -- 2 (m - 1) is 0 points
  if r.chance(0.5) then
    local ax = r.int(#s)
    if r.chance(0.3) then ax = ax - #s - 1 end
    p.axis, py.axis = ax, tostring(ax > 0 and ax - 1 or ax)
    if e[1] == "cd.fft.irfft" and not p.n and s[ax > 0 and ax or #s + ax + 1] == 1 then p.n, py.n = 2, "2" end
  end
  p.norm, py.norm = fft_norm(r)
  return { args = { arg("x", fft_input(r, combo, s)) }, p = p, py = py }
end

-- the n-d ones: s and axes (nil: the function's defaults), a norm
function GEN.fftn(r, combo, e)
  local s = r.pick({ { 3, 4 }, { 2, 3, 5 }, { 4, 6 }, { 5, 2 }, { 2, 2, 2 } })
  local p, py = {}, { s = "None", axes = e[1]:match("2$") and "(-2, -1)" or "None" }
  if r.chance(0.5) then
    local ax = { r.int(#s) }
    local other = r.int(#s)
    if other ~= ax[1] then ax[2] = other end
    p.axes = ax
    local t = {}
    for i, a in ipairs(ax) do t[i] = tostring(a - 1) end
    py.axes = "(" .. concat(t, ", ") .. ",)"
  end
  if r.chance(0.4) then
    local n = p.axes and #p.axes or (e[1]:match("2$") and 2 or #s)
    p.s = {}
    for i = 1, n do p.s[i] = r.pick({ 2, 3, 4, 8 }) end
    py.s = M.py(p.s, true)
  end
  p.norm, py.norm = fft_norm(r)
  return { args = { arg("x", fft_input(r, combo, s)) }, p = p, py = py }
end

function GEN.freq(r)
  local n, d = r.pick({ 1, 2, 5, 8, 13 }), r.pick({ 1.0, 0.5, 0.1, 3.0 })
  return { args = {}, p = { n = n, d = d }, py = { n = M.py(n), d = M.py(d) } }
end

function GEN.fftshift(r, combo)
  local s = r.pick({ { 5 }, { 4 }, { 3, 4 }, { 2, 3, 5 }, { 0 } })
  local p, py = {}, { axes = "None" }
  if r.chance(0.5) and #s > 0 then
    local ax = r.int(#s)
    p.axes, py.axes = ax, tostring(ax - 1)
  end
  return { args = { arg("x", operand(r, combo[1], s, 0.2)) }, p = p, py = py }
end

-- two arrays of one shape and an axis: concatenate, stack
function GEN.join(r, combo)
  local s = r.pick({ { 3 }, { 2, 3 }, { 2, 0 }, { 1, 2, 3 } })
  local ax = r.int(#s)
  return { args = { arg("x", operand(r, combo[1], s, 0.2)), arg("y", operand(r, combo[2], s, 0.2)) },
           p = { axis = ax }, py = { axis = tostring(ax - 1) } }
end

-- an array and 1-based positions (distinct, some negative) into it, flattened or along an axis
function GEN.positions(r, combo, e)
  local s = r.pick({ { 6 }, { 3, 4 }, { 2, 3, 2 } })
  local flat = e.flat or r.chance(0.5)
  local ax = not flat and r.int(#s) or nil
  local n = ax and s[ax] or prod(s)
  local pos = {}
  for i = 1, n do pos[i] = i end
  r.shuffle(pos)
  local k = r.int(n)
  local idx = {}
  for i = 1, k do idx[i] = r.chance(0.3) and pos[i] - n - 1 or pos[i] end
  local x = e.contiguous and plain(make(r, combo[1], s)) or operand(r, combo[1], s, 0.2)
  local v = kind(combo[1]) == "f" and 2.5 or combo[1] == "bool" and true or 7
  return { args = { arg("x", x), arg("i", plain(cd.array(idx, "int64"))) },
           p = { axis = ax, v = v }, py = { axis = ax and tostring(ax - 1) or "None", v = M.py(v) } }
end

-- a sorted 1-d array and values to place in it
function GEN.search(r, combo)
  local n = r.pick({ 0, 1, 5, 9 })
  local x = plain(make(r, combo[1], { n }))
  local y = r.chance(0.3) and { value = combo[1]:match("^float") and 1.5 or 2 } or operand(r, combo[1], r.pick(SHAPES), 0.2)
  local side = r.pick({ "left", "right" })
  return { args = { arg("x", x), arg("y", y) }, p = { side = side }, py = { side = fmt("%q", side) } }
end

-- an array and two Lua bounds (either may be nil): clip
function GEN.clip(r, combo)
  local f = kind(combo[1]) == "f"
  local lo = r.chance(0.2) and nil or (f and (r.int(9) - 5) / 2 or r.int(5) - 1)
  local hi = (lo == nil or r.chance(0.8)) and (f and (r.int(9) + 1) / 2 or r.int(5) + 4) or nil
  return { args = { arg("x", operand(r, combo[1], r.pick(SHAPES), 0.2)) }, p = { lo = lo, hi = hi },
           py = { lo = M.py(lo), hi = M.py(hi) } }
end

-- an array of 1 to 3 dimensions and a diagonal or a number of decimals: diag, triu, tril, round
function GEN.diagonal(r, combo)
  local s = r.pick({ { 4 }, { 3, 4 }, { 2, 3, 3 }, { 0 }, { 3 } })
  local k = r.pick({ 0, 0, 1, -1, 2, -3 })
  return { args = { arg("x", operand(r, combo[1], s, 0.2)) }, p = { k = k }, py = { k = tostring(k) } }
end

-- cd.eye: sizes, a diagonal, a dtype
function GEN.eye(r, combo)
  local n, m, k = r.int(4) - 1, r.int(4), r.pick({ 0, 1, -1, 3 })
  return { args = {}, p = { n = n, m = m, k = k, dtype = combo[1] },
           py = { n = tostring(n), m = tostring(m), k = tostring(k), dtype = fmt("%q", combo[1]) } }
end

-- cd.broadcast_to: a shape that the array broadcasts to, or one it does not
function GEN.broadcast(r, combo)
  local pair = r.pick({ { { 3, 1 }, { 2, 3, 4 } }, { { 4 }, { 3, 4 } }, { { 1 }, { 5 } }, { {}, { 2, 2 } },
                        { { 3 }, { 2, 4 } }, { { 2, 1 }, { 2, 0 } } })
  return { args = { arg("x", operand(r, combo[1], pair[1], 0.2)) }, p = { shape = pair[2] },
           py = { shape = M.py(pair[2], true) } }
end

-- cd.linalg: one matrix or a stack of them, of values in [-1, 1] plus n on the diagonal (well conditioned, so
-- LAPACK's answers are close to NumPy's), symmetric positive definite for cholesky and eigh (e.square = "spd"),
-- any shape for qr, svd and pinv, a b for solve and lstsq; norm's ord and axis are drawn too.
local function linalg_matrix(r, dt, shape, spd)
  local n = shape[#shape]
  local unit = function(rr) return rr.int(17) / 8 - 1.125 end
  local f = make(r, "float64", shape, unit)
  if spd then f = cd.matmul(f, cd.swapaxes(f, -1, -2):contiguous()) end
  if #shape >= 2 and shape[#shape - 1] == n then
    f = f + cd.eye(n, n, 0, "float64") * n
  end
  if dt:match("^int") or dt == "bool" then f = cd.round(f) end
  return plain(f:astype(dt))
end

local NORM_ORDS = { { nil, "None" }, { "fro", "'fro'" }, { "nuc", "'nuc'" }, { 1, "1" }, { -1, "-1" }, { 2, "2" },
                    { -2, "-2" }, { math.huge, "np.inf" }, { -math.huge, "-np.inf" }, { 0, "0" }, { 3, "3" } }

function GEN.linalg(r, combo, e)
  local dt = combo[1]
  local shape
  if e.square then
    shape = r.pick({ { 1, 1 }, { 2, 2 }, { 3, 3 }, { 4, 4 }, { 2, 3, 3 }, { 3, 2, 2 }, { 0, 2, 2 } })
  elseif e.lstsq then
    shape = r.pick({ { 4, 2 }, { 3, 3 }, { 5, 3 }, { 2, 4 } })
  else
    shape = r.pick({ { 3, 3 }, { 4, 2 }, { 2, 4 }, { 2, 3, 2 }, { 2, 2, 3 }, { 5, 1 } })
  end
  local x = linalg_matrix(r, dt, shape, e.square == "spd")
  local args, p, py = { arg("x", x) }, {}, {}
  if e.rhs then   -- b: a vector for every matrix, or a matrix of one or two columns per matrix
    local m = shape[#shape - 1]
    local bs = r.chance(0.4) and { m } or { m, r.int(2) }
    if e.square and #shape == 3 and #bs == 2 and r.chance(0.5) then bs = { shape[1], m, bs[2] } end
    local bdt = r.pick({ "float32", "float64", dt == "float16" and "float64" or dt })   -- NumPy's common dtype
    args[2] = arg("y", plain(make(r, bdt, bs, function(rr) return rr.int(9) - 5 end)))
  end
  if e.norm then
    local o = r.pick(NORM_ORDS)
    local nd = #shape
    local form = r.int(3)
    p.ord, py.ord, py.axis, py.keepdims = o[1], o[2], "None", "False"
    if form == 2 then
      local ax = r.int(nd)
      p.axis, py.axis = ax, tostring(ax - 1)
    elseif form == 3 then
      local a1 = r.int(nd)
      local a2 = a1 % nd + 1
      p.axis, py.axis = { a1, a2 }, fmt("(%d, %d)", a1 - 1, a2 - 1)
    end
    if r.chance(0.3) then p.keepdims, py.keepdims = true, "True" end
  end
  return { args = args, p = p, py = py }
end

-- ------------------------------------------------------------------------------------------ the entries
local ENTRIES = {}
M.ENTRIES = ENTRIES
local function entry(e)
  e.tol = e.tol or 0
  ENTRIES[#ENTRIES + 1] = e
  return e
end

-- binary functions: cd name, NumPy name, ulps, Lua operator (metamethod), method
local BINARY = {
  { "add", "add", 0, "+" }, { "subtract", "subtract", 0, "-" }, { "multiply", "multiply", 0, "*" },
  { "divide", "true_divide", 0, "/" }, { "floor_divide", "floor_divide", 0, "//" },
  { "remainder", "remainder", 0, "%" }, { "power", "power", 2, "^" }, { "minimum", "minimum", 0 },
  { "maximum", "maximum", 0 }, { "arctan2", "arctan2", 2 }, { "hypot", "hypot", 1 },
  { "bitwise_and", "bitwise_and", 0, "&" }, { "bitwise_or", "bitwise_or", 0, "|" },
  { "bitwise_xor", "bitwise_xor", 0, "~" }, { "left_shift", "left_shift", 0, "<<" },
  { "right_shift", "right_shift", 0, ">>" },
  { "equal", "equal", 0, nil, "eq" }, { "not_equal", "not_equal", 0, nil, "ne" }, { "less", "less", 0, nil, "lt" },
  { "less_equal", "less_equal", 0, nil, "le" }, { "greater", "greater", 0, nil, "gt" },
  { "greater_equal", "greater_equal", 0, nil, "ge" },
}
local OPERATOR = {
  ["+"] = function(x, y) return x + y end, ["-"] = function(x, y) return x - y end,
  ["*"] = function(x, y) return x * y end, ["/"] = function(x, y) return x / y end,
  ["//"] = function(x, y) return x // y end, ["%"] = function(x, y) return x % y end,
  ["^"] = function(x, y) return x ^ y end, ["&"] = function(x, y) return x & y end,
  ["|"] = function(x, y) return x | y end, ["~"] = function(x, y) return x ~ y end,
  ["<<"] = function(x, y) return x << y end, [">>"] = function(x, y) return x >> y end,
}
local INPLACE = { ["+"] = "add_", ["-"] = "sub_", ["*"] = "mul_", ["/"] = "div_", ["//"] = "floordiv_",
                  ["%"] = "mod_", ["^"] = "pow_", ["&"] = "band_", ["|"] = "bor_", ["~"] = "bxor_",
                  ["<<"] = "shl_", [">>"] = "shr_" }
for _, b in ipairs(BINARY) do
  local name, npn, ulps, sym, method = b[1], b[2], b[3], b[4], b[5]
  local np = fmt("np.%s(x, y)", npn)
  local main = entry({ "cd." .. name, kind = "binary", tol = ulps, np = np, combos = 4,
                       lua = function(x, y) return cd[name](x, y) end })
  if sym then
    entry({ "operator " .. sym, kind = "binary", tol = ulps, np = np, same_as = main, lua = OPERATOR[sym] })
    -- the in-place method by its operator's name (add_) and by NumPy's (subtract_)
    local names = INPLACE[sym] == name .. "_" and { INPLACE[sym] } or { INPLACE[sym], name .. "_" }
    for _, m in ipairs(names) do
      entry({ "Array:" .. m, kind = "inplace", tol = ulps, np = fmt("inplace(np.%s, x, y)", npn), same_as = main,
              lua = function(x, y) return x[m](x, y) end })
    end
  end
  if method then
    entry({ "Array:" .. method, kind = "binary", np = np, same_as = main, method = true,
            lua = function(x, y) return x[method](x, y) end })
  end
end

-- unary functions: cd name, NumPy name, ulps (libm against NumPy's loops)
local UNARY = {
  { "exp", "exp", 4 }, { "exp2", "exp2", 4 }, { "expm1", "expm1", 4 }, { "log", "log", 4 }, { "log2", "log2", 4 },
  { "log10", "log10", 4 }, { "log1p", "log1p", 4 }, { "sqrt", "sqrt", 0 }, { "cbrt", "cbrt", 4 },
  { "sin", "sin", 4 }, { "cos", "cos", 4 }, { "tan", "tan", 4 }, { "asin", "arcsin", 4 }, { "acos", "arccos", 4 },
  { "atan", "arctan", 4 }, { "sinh", "sinh", 4 }, { "cosh", "cosh", 4 }, { "tanh", "tanh", 4 },
  { "asinh", "arcsinh", 4 }, { "acosh", "arccosh", 4 }, { "atanh", "arctanh", 4 }, { "floor", "floor", 0 },
  { "ceil", "ceil", 0 }, { "trunc", "trunc", 0 }, { "rint", "rint", 0 }, { "abs", "absolute", 0 },
  { "negative", "negative", 0 }, { "sign", "sign", 0 }, { "square", "square", 0 }, { "isnan", "isnan", 0 },
  { "isinf", "isinf", 0 }, { "isfinite", "isfinite", 0 }, { "logical_not", "logical_not", 0 },
  { "erf", "erf", 4 }, { "erfc", "erfc", 4 },
}
local ALIAS = { asin = "arcsin", acos = "arccos", atan = "arctan", asinh = "arcsinh", acosh = "arccosh",
                atanh = "arctanh" }
local UMAIN = {}
for _, u in ipairs(UNARY) do
  local name, npn, ulps = u[1], u[2], u[3]
  -- erf and erfc: NumPy has no ufunc for them (scipy.special has); the Python side computes them with math.erf
  local np = (name == "erf" or name == "erfc") and fmt("special(%q, x)", name) or fmt("np.%s(x)", npn)
  UMAIN[name] = entry({ "cd." .. name, kind = "unary", tol = ulps, np = np, combos = 2,
                        lua = function(x) return cd[name](x) end })
  if ALIAS[name] then
    entry({ "cd." .. ALIAS[name], kind = "unary", tol = ulps, np = np, same_as = UMAIN[name],
            lua = function(x) return cd[ALIAS[name]](x) end })
  end
end
entry({ "Array:abs", kind = "unary", np = "np.absolute(x)", same_as = UMAIN.abs, lua = function(x) return x:abs() end })
entry({ "operator -a", kind = "unary", np = "np.negative(x)", same_as = UMAIN.negative, lua = function(x) return -x end })
entry({ "operator ~a", kind = "unary", np = "np.invert(x)", combos = 4, ints = true, lua = function(x) return ~x end })

entry({ "cd.where", kind = "where", np = "np.where(c, x, y)", combos = 5, lua = function(c, x, y) return cd.where(c, x, y) end })

-- reductions: cd name, NumPy expression, tolerance, method name
local REDUCE = {
  { "sum", "np.sum(x, axis=axis, keepdims=keepdims)", "sum" },
  { "prod", "np.prod(x, axis=axis, keepdims=keepdims)", "sum" },
  { "mean", "np.mean(x, axis=axis, keepdims=keepdims)", "sum" },
  { "max", "np.max(x, axis=axis, keepdims=keepdims)", 0 },
  { "min", "np.min(x, axis=axis, keepdims=keepdims)", 0 },
  { "argmax", "argpos(np.argmax, x, axis, keepdims)", 0 },
  { "argmin", "argpos(np.argmin, x, axis, keepdims)", 0 },
  { "all", "np.all(x, axis=axis, keepdims=keepdims)", 0 },
  { "any", "np.any(x, axis=axis, keepdims=keepdims)", 0 },
}
for _, rd in ipairs(REDUCE) do
  local name, np, tol = rd[1], rd[2], rd[3]
  local main = entry({ "cd." .. name, kind = "reduce", tol = tol, np = np, combos = 4,
                       lua = function(x, p) return cd[name](x, p.arg) end })
  entry({ "Array:" .. name, kind = "reduce", tol = tol, np = np, same_as = main,
          lua = function(x, p) return x[name](x, p.arg) end })
  if name == "max" or name == "min" then
    entry({ "cd.a" .. name, kind = "reduce", tol = tol, np = np, same_as = main,
            lua = function(x, p) return cd["a" .. name](x, p.arg) end })
  end
end

entry({ "Array:astype", kind = "astype", np = "x.astype(dtype)", combos = 48, lua = function(x, p) return x:astype(p.dtype) end })

local MM = entry({ "cd.matmul", kind = "matmul", tol = "matmul", np = "np.matmul(x, y)", combos = 8,
                   lua = function(x, y) return cd.matmul(x, y) end })
entry({ "Array:matmul", kind = "matmul", tol = "matmul", np = "np.matmul(x, y)", same_as = MM,
        lua = function(x, y) return x:matmul(y) end })

-- views and element access
local V = { combos = 4, kind = "view" }
local function view_entry(name, np, lua) return entry({ name, kind = "view", np = np, lua = lua, combos = V.combos }) end
view_entry("Array:slice", "x[sl]", function(x, p) return x:slice(p.i, p.j, p.step, p.axis) end)
view_entry("Array:transpose", "np.transpose(x, perm)", function(x, p) return x:transpose(p.perm) end)
view_entry("Array:reshape", "x.reshape(-1)", function(x, p) return x:reshape(p.shape) end)
view_entry("Array:view", "np.ascontiguousarray(x).view(dtype)", function(x, p) return x:contiguous():view(p.dtype) end)
view_entry("Array:contiguous", "x", function(x) return x:contiguous() end)
view_entry("Array:copy", "x.copy()", function(x) return x:copy() end)
view_entry("Array:totable", "x.tolist()", function(x) return x:totable() end)
view_entry("Array:tobytes", "x.tobytes()", function(x) return x:tobytes() end)
view_entry("Array:fill", "full_of(x, True if x.dtype == bool else 3)", function(x)
  return x:copy():fill(x.dtype == "bool" or 3)
end)
view_entry("Array:zero", "np.zeros_like(x)", function(x) return x:copy():zero() end)
view_entry("Array:copy_from", "x.copy()", function(x) return cd.empty(x.shape, x.dtype):copy_from(x) end)
view_entry("cd.copy", "x.reshape(-1)", function(x)
  local d = cd.empty(#x, x.dtype)
  cd.copy(d, x:contiguous())
  return d
end)
view_entry("Array:__index", "x.reshape(-1)[-1].item() if x.size else fail()", function(x)
  if #x == 0 then error("empty") end
  return x:contiguous():reshape(#x)[#x]
end)

-- creation
local function create_entry(name, np, lua, combos)
  return entry({ name, kind = "create", np = np, lua = lua, combos = combos or 4 })
end
create_entry("cd.zeros", "np.zeros(shape, dtype)", function(_, p) return cd.zeros(p.shape, p.dtype) end)
create_entry("cd.ones", "np.ones(shape, dtype)", function(_, p) return cd.ones(p.shape, p.dtype) end)
create_entry("cd.empty", "shape_only(np.empty(shape, dtype))", function(_, p) return cd.empty(p.shape, p.dtype) end)
create_entry("cd.full", "np.full(shape, value, dtype)", function(_, p) return cd.full(p.shape, p.value, p.dtype) end)
create_entry("cd.array", "np.array(data, dtype)", function(_, p) return cd.array(p.data, p.dtype) end, 12).table = true
create_entry("cd.zeros_like", "np.zeros_like(x)", function(x) return cd.zeros_like(x) end)
create_entry("cd.empty_like", "shape_only(np.empty_like(x))", function(x) return cd.empty_like(x) end)
create_entry("cd.full_like", "np.full_like(x, value)", function(x, p) return cd.full_like(x, p.value) end)
create_entry("Array:new_zeros", "np.zeros(shape, x.dtype)", function(x, p) return x:new_zeros(p.shape) end)
create_entry("Array:new_empty", "shape_only(np.empty(shape, x.dtype))", function(x, p) return x:new_empty(p.shape) end)
create_entry("Array:new_full", "np.full(shape, value, x.dtype)", function(x, p) return x:new_full(p.shape, p.value) end)

entry({ "cd.arange", kind = "range", np = "np.arange(a, b, step, dtype)", combos = 4, range = true,
        lua = function(p) return p.dtype == "default" and cd.arange(p.a, p.b, p.step) or cd.arange(p.a, p.b, p.step, p.dtype) end })
entry({ "cd.linspace", kind = "range", np = "np.linspace(a, b, num, endpoint=endpoint, dtype=dtype)", tol = 2,
        combos = 4, range = true, lua = function(p)
  if p.dtype == "default" then return cd.linspace(p.a, p.b, p.num, { endpoint = p.endpoint }) end
  return cd.linspace(p.a, p.b, p.num, p.dtype, { endpoint = p.endpoint })
end })

-- files, both ways: cudadev writes and NumPy reads, NumPy writes (prep) and cudadev reads
entry({ "cd.save", kind = "file", npy = true, np = "np.load(path)", combos = 6,
        lua = function(x, p) cd.save(p.path, x); return x end, swap = true })
entry({ "cd.load", kind = "file", npy = true, np = "x", prep = "np.save(path, x)", combos = 6,
        lua = function(_, p) return cd.load(p.path) end })
entry({ "Array:tofile", kind = "file", np = "np.fromfile(path, dtype).reshape(shape)", combos = 3,
        lua = function(x, p) x:tofile(p.path); return x end, swap = true })
entry({ "cd.fromfile", kind = "file", np = "x", prep = "x.tofile(path)", combos = 3,
        lua = function(_, p) return cd.fromfile(p.path, p.dtype, p.shape) end })

-- sorting, scans, joining and selecting (doc/sorting.md): positions and axes are 1-based on cudadev's side
local function sort_entry(name, np, lua, opts)
  opts = opts or {}
  opts[1], opts.np, opts.lua = name, np, lua
  opts.kind, opts.combos, opts.group = opts.kind or "axis", opts.combos or 2, "sorting"
  return entry(opts)
end
-- h28sort's functions, where they are merged (until then their names are not public, and need no cases)
if cd.sort then
  sort_entry("cd.sort", "np.sort(x, axis=axis)", function(x, p) return cd.sort(x, p.axis) end, { default_axis = "-1" })
  sort_entry("Array:sort", "np.sort(x, axis=axis)", function(x, p) return x:copy():sort(p.axis) end, { default_axis = "-1" })
  sort_entry("cd.argsort", "np.argsort(x, axis=axis, kind='stable') + 1", function(x, p) return cd.argsort(x, p.axis) end,
    { default_axis = "-1" })
  sort_entry("Array:argsort", "np.argsort(x, axis=axis, kind='stable') + 1", function(x, p) return x:argsort(p.axis) end,
    { default_axis = "-1" })
  sort_entry("cd.unique", "np.unique(x, equal_nan=True)", function(x) return cd.unique(x) end)
  sort_entry("cd.searchsorted", "np.searchsorted(np.sort(x), y, side) + 1", function(x, y, p)
    return cd.searchsorted(cd.sort(x), y, p.side)
  end, { kind = "search" })
  for _, f in ipairs({ "cumsum", "cumprod" }) do
    local tol = f == "cumsum" and "cumsum" or "cumprod"
    sort_entry("cd." .. f, fmt("np.%s(x, axis=axis)", f), function(x, p) return cd[f](x, p.axis) end, { tol = tol })
    sort_entry("Array:" .. f, fmt("np.%s(x, axis=axis)", f), function(x, p) return x[f](x, p.axis) end, { tol = tol })
  end
  sort_entry("cd.count_nonzero", "np.count_nonzero(x, axis=axis)", function(x, p) return cd.count_nonzero(x, p.axis) end)
  sort_entry("cd.nonzero", "[i + 1 for i in np.nonzero(x)]", function(x) return cd.nonzero(x) end)
  sort_entry("Array:nonzero", "[i + 1 for i in np.nonzero(x)]", function(x) return x:nonzero() end)
  sort_entry("cd.concatenate", "np.concatenate([x, y], axis)", function(x, y, p) return cd.concatenate({ x, y }, p.axis) end,
    { kind = "join" })
  sort_entry("cd.stack", "np.stack([x, y], axis)", function(x, y, p) return cd.stack({ x, y }, p.axis) end, { kind = "join" })
  sort_entry("cd.split", "np.split(x, 2, axis) if x.ndim else fail()", function(x, _, p) return cd.split(x, 2, p.axis) end,
    { kind = "join" })
  local TAKE = "np.take(x, np.where(i > 0, i - 1, i), axis=axis)"
  sort_entry("cd.take", TAKE, function(x, i, p) return cd.take(x, i, p.axis) end, { kind = "positions" })
  sort_entry("Array:take", TAKE, function(x, i, p) return x:take(i, p.axis) end, { kind = "positions" })
  sort_entry("Array:[idx]", "np.take(x, np.where(i > 0, i - 1, i), axis=0)", function(x, i) return x[i] end,
    { kind = "positions" })
  sort_entry("Array:[mask]", "x[x != 0]", function(x) return x[x:ne(0)] end)
  local PUT = "put(x, np.where(i > 0, i - 1, i), v)"
  sort_entry("cd.put", PUT, function(x, i, p) local c = x:copy(); cd.put(c, i, p.v); return c end,
    { kind = "positions", flat = true })
  sort_entry("Array:put", PUT, function(x, i, p) local c = x:copy(); c:put(i, p.v); return c end,
    { kind = "positions", flat = true })
  sort_entry("Array:item", "x.reshape(-1)[i[0] - 1 if i[0] > 0 else i[0]].item()",
    function(x, i) return x:item(i[1]) end, { kind = "positions", flat = true })
end

-- NumPy's other functions (doc/numpy.md), one or two dtype combinations each
local function misc(name, kind, np, lua, opts)
  opts = opts or {}
  opts[1], opts.kind, opts.np, opts.lua, opts.group = name, kind, np, lua, "misc"
  opts.combos = opts.combos or 2
  return entry(opts)
end
for _, f in ipairs({ "logical_and", "logical_or", "logical_xor", "fmod", "copysign" }) do
  misc("cd." .. f, "binary", fmt("np.%s(x, y)", f), function(x, y) return cd[f](x, y) end, { tol = 0 })
end
misc("cd.isclose", "binary", "np.isclose(x, y)", function(x, y) return cd.isclose(x, y) end)
misc("cd.allclose", "join", "np.allclose(x, y)", function(x, y) return cd.allclose(x, y) end)
misc("cd.array_equal", "join", "np.array_equal(x, y)", function(x, y) return cd.array_equal(x, y) end)
misc("cd.outer", "join", "np.outer(x, y)", function(x, y) return cd.outer(x, y) end)
misc("cd.vdot", "join", "np.vdot(x, y)", function(x, y) return cd.vdot(x, y) end, { tol = "vdot" })
misc("cd.dot", "matmul", "np.dot(x, y)", function(x, y) return cd.dot(x, y) end, { tol = "matmul", combos = 3 })
for _, f in ipairs({ "var", "std" }) do
  local np = fmt("np.%s(x, axis=axis, keepdims=keepdims)", f)
  local main = misc("cd." .. f, "reduce", np, function(x, p) return cd[f](x, p.arg) end, { tol = f })
  misc("Array:" .. f, "reduce", np, function(x, p) return x[f](x, p.arg) end, { tol = f, same_as = main })
end
for _, f in ipairs({ "nansum", "nanmax", "nanmin", "nanmean" }) do
  misc("cd." .. f, "reduce", fmt("np.%s(x, axis=axis, keepdims=keepdims)", f), function(x, p) return cd[f](x, p.arg) end,
    { tol = (f == "nansum" or f == "nanmean") and "sum" or 0 })
end
misc("cd.clip", "clip", "np.clip(x, lo, hi)", function(x, p) return cd.clip(x, p.lo, p.hi) end)
misc("cd.round", "diagonal", "np.round(x, k)", function(x, p) return cd.round(x, p.k) end, { tol = 1 })
misc("cd.diag", "diagonal", "np.diag(x, k)", function(x, p) return cd.diag(x, p.k) end)
misc("cd.triu", "diagonal", "np.triu(x, k)", function(x, p) return cd.triu(x, p.k) end)
misc("cd.tril", "diagonal", "np.tril(x, k)", function(x, p) return cd.tril(x, p.k) end)
misc("cd.eye", "eye", "np.eye(n, m, k, dtype)", function(p) return cd.eye(p.n, p.m, p.k, p.dtype) end, { range = true })
misc("cd.identity", "eye", "np.identity(n, dtype)", function(p) return cd.identity(p.n, p.dtype) end, { range = true })
misc("cd.ones_like", "create", "np.ones_like(x)", function(x) return cd.ones_like(x) end)
misc("cd.flip", "axis", "np.flip(x, axis=axis)", function(x, p) return cd.flip(x, p.axis) end)
misc("Array:squeeze", "axis", "np.squeeze(x, axis=axis)", function(x, p) return x:squeeze(p.axis) end)
misc("cd.expand_dims", "axis", "np.expand_dims(x, 0 if axis is None else axis)",
  function(x, p) return cd.expand_dims(x, p.axis or 1) end)
misc("cd.swapaxes", "axis", "np.swapaxes(x, 0 if axis is None else axis, 0)",
  function(x, p) return cd.swapaxes(x, p.axis or 1, 1) end)
misc("Array:ravel", "axis", "np.ravel(x)", function(x) return x:ravel() end)
misc("Array:flatten", "axis", "x.flatten()", function(x) return x:flatten() end)
misc("cd.broadcast_to", "broadcast", "np.broadcast_to(x, shape)", function(x, p) return cd.broadcast_to(x, p.shape) end)

-- cd.linalg (doc/linalg.md): where signs are free (Q, R, singular vectors) both sides give magnitudes; eigh's
-- eigenvectors are compared through a v - v w (zero), which does not depend on them
local function linalg_entry(name, np, lua, opts)
  opts = opts or {}
  opts[1], opts.np, opts.lua, opts.kind, opts.group = "cd.linalg." .. name, np, lua, "linalg", "linalg"
  opts.combos, opts.tol = 3, "linalg"
  return entry(opts)
end
local LA = cd.linalg
if LA then
  local function pair_of(s, l, x)
    if type(s) ~= "number" then return cd.stack({ s, l }) end
    return cd.array({ s, l }, (x.dtype == "float32") and "float32" or "float64")
  end
  linalg_entry("solve", "solve2(x, y)",
    function(x, y) return LA.solve(x, y) end, { square = true, rhs = true })
  linalg_entry("inv", "np.linalg.inv(x)", function(x) return LA.inv(x) end, { square = true })
  linalg_entry("det", "np.linalg.det(x)", function(x) return LA.det(x) end, { square = true })
  linalg_entry("slogdet", "np.array(np.linalg.slogdet(x))", function(x)
    local sign, logabs = LA.slogdet(x)
    return pair_of(sign, logabs, x)
  end,
    { square = true })
  linalg_entry("cholesky", "np.linalg.cholesky(x)", function(x) return LA.cholesky(x) end, { square = "spd" })
  linalg_entry("qr", "[abs(m) for m in np.linalg.qr(x)]", function(x)
    local q, rr = LA.qr(x)
    return { cd.abs(q), cd.abs(rr) }
  end)
  linalg_entry("eigh", "eigh_parts(x)", function(x)
    local w, v = LA.eigh(x)
    local av = cd.matmul(x:astype(w.dtype), v)
    return { w, av - v * cd.expand_dims(w, -2) }
  end, { square = "spd" })
  linalg_entry("eigvalsh", "np.linalg.eigvalsh(x)", function(x) return LA.eigvalsh(x) end, { square = "spd" })
  linalg_entry("svd", "[abs(m) for m in np.linalg.svd(x, full_matrices=False)]", function(x)
    local u, sv, vh = LA.svd(x, { full_matrices = false })
    return { cd.abs(u), sv, cd.abs(vh) }
  end)
  linalg_entry("lstsq", "lstsq_parts(x, y)", function(x, y)
    local sol, res, rank, sv = LA.lstsq(x, y)
    return { sol, res, cd.array({ rank }, "int64"), sv }
  end, { lstsq = true, rhs = true })
  linalg_entry("pinv", "np.linalg.pinv(x)", function(x) return LA.pinv(x) end)
  linalg_entry("norm", "np.linalg.norm(x, ord, axis, keepdims)", function(x, p)
    return LA.norm(x, p.ord, p.axis, p.keepdims)
  end, { norm = true })
end

-- ------------------------------------------------------------------------------------------ cd.fuse
-- Every elementwise case runs a second time through cd.fuse (issue 31): a twin case of the same operands and
-- parameters whose function is the entry's, fused, compared with NumPy as the unfused case is. The in-place forms
-- are the fused function with out= (their operand, restored first: the unfused case wrote it); the reductions that
-- fuse (sum, prod, mean, max, min) are trailing reductions of an input, and of x * x (entries of their own).
local FUSED_REDUCE = { sum = "sum", prod = "prod", mean = "mean", max = "max", min = "min", amax = "max", amin = "min" }

-- the fused function of a reduction method over one form of its argument (nil, an axis, {axis=, keepdims=}):
-- the form is Lua code of the trace, not an argument, so each form is a fused function of its own
local function fused_reduction(method, of)
  local memo = {}
  return function(x, p)
    local a = p.arg
    local key = type(a) == "table" and fmt("%s,%s", a.axis, a.keepdims) or tostring(a)
    local f = memo[key]
    if f == nil then
      f = cd.fuse(function(v) local w = of(v); return w[method](w, a) end)
      memo[key] = f
    end
    return f(x)
  end
end

local function fused_twin(e)
  local K, f = e.kind, nil
  if e.group ~= nil then return nil end
  if K == "binary" then
    local F = cd.fuse(function(x, y) return e.lua(x, y) end)
    f = function(x, y) return F(x, y) end
  elseif K == "unary" then
    local F = cd.fuse(function(x) return e.lua(x) end)
    f = function(x) return F(x) end
  elseif K == "where" then
    local F = cd.fuse(function(c, x, y) return cd.where(c, x, y) end)
    f = function(c, x, y) return F(c, x, y) end
  elseif K == "inplace" then
    local op = e.same_as.lua
    local F = cd.fuse(function(x, y) return op(x, y) end)
    f = function(x, y, p)
      x:copy_from(p.fuse_x0)
      F(x, y, { out = x })
      return x
    end
  elseif K == "reduce" then
    local method = FUSED_REDUCE[e[1]:match("[%w_]+$")]
    if method == nil then return nil end
    f = fused_reduction(method, function(v) return v end)
  else
    return nil
  end
  return { "cd.fuse " .. e[1], kind = K, np = e.np, tol = e.tol, lua = f, fused = true }
end

for _, e in ipairs(ENTRIES) do e.fused = fused_twin(e) end
for _, name in ipairs({ "sum", "prod", "mean", "max", "min" }) do
  entry({ "cd.fuse (x * x):" .. name, kind = "reduce", tol = name == "max" and 0 or name == "min" and 0 or "sum",
          np = fmt("np.%s(np.multiply(x, x), axis=axis, keepdims=keepdims)", name), combos = 3, fused = true,
          lua = fused_reduction(name, function(v) return v * v end) })
end

-- The complex dtypes (issue 32, doc/fft.md): their functions over complex and real arrays, their operators with
-- every other dtype (a complex product's or quotient's parts within 4 eps of |x| |y| or |x| / |y|: a fused
-- multiply-add rounds once where NumPy's loop rounds twice, which a cancelling part shows in many ulps of its own),
-- their sums, conversions and files
for _, f in ipairs({ { "real", "np.real(x)" }, { "imag", "np.imag(x)" }, { "conj", "np.conj(x)" },
                     { "conjugate", "np.conjugate(x)" }, { "angle", "np.angle(x)", 2 } }) do
  local main = entry({ "cd." .. f[1], kind = "unary", np = f[2], tol = f[3] or 0, combos = 4, cplx = "mixed",
                       group = "complex", lua = function(x) return cd[f[1]](x) end })
  if f[1] ~= "angle" then
    entry({ "Array:" .. f[1], kind = "unary", np = f[2], tol = f[3] or 0, same_as = main, cplx = "mixed",
            group = "complex", lua = function(x) return x[f[1]](x) end })
  end
end
for _, b in ipairs({ { "+", "add", 0 }, { "-", "subtract", 0 }, { "*", "multiply", "cmul" }, { "/", "true_divide", "cdiv" } }) do
  entry({ "complex " .. b[1], kind = "binary", np = fmt("np.%s(x, y)", b[2]), tol = b[3], combos = 6, cplx = "pair",
          group = "complex", lua = OPERATOR[b[1]] })
end
for _, m in ipairs({ { "eq", "equal" }, { "ne", "not_equal" } }) do
  entry({ "complex " .. m[1], kind = "binary", np = fmt("np.%s(x, y)", m[2]), combos = 4, cplx = "pair", method = true,
          group = "complex", lua = function(x, y) return x[m[1]](x, y) end })
end
entry({ "complex -a", kind = "unary", np = "np.negative(x)", combos = 2, cplx = "complex", group = "complex",
        lua = function(x) return -x end })
entry({ "complex abs", kind = "unary", np = "np.absolute(x)", tol = 2, combos = 2, cplx = "complex", group = "complex",
        lua = function(x) return cd.abs(x) end })
entry({ "complex astype", kind = "astype", np = "x.astype(dtype)", combos = 8, cplx = "pair", group = "complex",
        lua = function(x, p) return x:astype(p.dtype) end })
for _, f in ipairs({ "sum", "mean" }) do
  entry({ "complex " .. f, kind = "reduce", np = fmt("np.%s(x, axis=axis, keepdims=keepdims)", f), tol = "sum", combos = 2,
          cplx = "complex", group = "complex", lua = function(x, p) return x[f](x, p.arg) end })
end
entry({ "complex save", kind = "file", npy = true, np = "np.load(path)", combos = 2, cplx = "complex", group = "complex",
        lua = function(x, p) cd.save(p.path, x); return x end, swap = true })
entry({ "complex load", kind = "file", npy = true, np = "x", prep = "np.save(path, x)", combos = 2, cplx = "complex",
        group = "complex", lua = function(_, p) return cd.load(p.path) end })

-- cd.fft (doc/fft.md): NumPy 2's dtypes (fft() in numpy_diff.py makes NumPy 1's single-precision answers single)
for _, f in ipairs({ "fft", "ifft", "rfft", "irfft" }) do
  entry({ "cd.fft." .. f, kind = "fft", np = fmt("fft(%q, x, n, axis, norm)", f), tol = "fft", combos = 5,
          cplx = f == "rfft" and "rfft" or "fft",
          group = "fft", lua = function(x, p) return cd.fft[f](x, p.n, p.axis, p.norm) end })
end
for _, f in ipairs({ "fft2", "ifft2", "fftn", "ifftn" }) do
  entry({ "cd.fft." .. f, kind = "fftn", np = fmt("fft(%q, x, s, axes, norm)", f), tol = "fft", combos = 5, cplx = "fft",
          group = "fft", lua = function(x, p) return cd.fft[f](x, p.s, p.axes, p.norm) end })
end
for _, f in ipairs({ "fftfreq", "rfftfreq" }) do
  entry({ "cd.fft." .. f, kind = "freq", np = fmt("np.fft.%s(n, d)", f), tol = 1, combos = 1, range = true,
          group = "fft", lua = function(p) return cd.fft[f](p.n, p.d) end })
end
for _, f in ipairs({ "fftshift", "ifftshift" }) do
  entry({ "cd.fft." .. f, kind = "fftshift", np = fmt("np.fft.%s(x, axes)", f), combos = 3, group = "fft",
          lua = function(x, p) return cd.fft[f](x, p.axes) end })
end

-- The names each entry covers, for the spec's check that every public array function has cases.
function M.covered()
  local t = {}
  for _, e in ipairs(ENTRIES) do
    t[e[1]] = true
    if e.fused then t["cd.fuse"] = true end
  end
  return t
end

-- Public names of cd and Array that are not array functions, by reason (the spec checks the list both ways: each
-- name exists, and none has cases). A new cd function or Array method is in neither list until someone decides.
local NOT_ARRAY_GROUPS = {
  ["devices and peer access"] = { "cd.cuda_devices", "cd.detect", "cd.device", "cd.device_count", "cd.devices",
    "cd.for_each_device", "cd.get_device", "cd.is_available", "cd.is_mempool_access_enabled",
    "cd.is_mempool_access_supported", "cd.is_peer_access_enabled", "cd.is_peer_access_supported",
    "cd.map_cuda_device", "cd.peer_access_matrix", "cd.peer_access_summary", "cd.scope", "cd.set_device",
    "cd.set_mempool_access_enabled", "cd.set_peer_access_enabled", "cd.unmap_cuda_device", "cd.with_device",
    "cd.with_mempool_access", "cd.with_peer_access", "cd.synchronize", "cd.synchronize_device",
    "cd.synchronize_devices" },
  ["streams, events and graphs"] = { "cd.stream", "cd.get_stream", "cd.set_stream", "cd.with_stream", "cd.event",
    "cd.elapsed_time", "cd.wait_streams", "cd.capture", "cd.poll", "cd.open_ipc_event" },
  ["kernels and their caches (kernel generators of CUDA C have no NumPy counterpart)"] = { "cd.compile",
    "cd.load_module", "cd.launch_config", "cd.elementwise", "cd.reduction", "cd.kernel_cache_stats",
    "cd.clear_kernel_cache" },
  ["memory statistics"] = { "cd.empty_cache", "cd.max_memory_allocated", "cd.memory_allocated",
    "cd.memory_reserved", "cd.memory_stats", "cd.pinned_memory_stats", "cd.reset_peak_memory_stats" },
  ["profiling and time"] = { "cd.now", "cd.time", "cd.profile_start", "cd.profile_stop", "cd.profiling",
    "cd.range", "cd.range_pop", "cd.range_push" },
  ["types"] = { "cd.type" },
  ["interop and sharing (spec/97-dlpack_spec.lua)"] = { "cd.from_dlpack", "cd.open_ipc", "Array:__dlpack",
    "Array:__dlpack_device", "Array:ipc_handle" },
  ["an Array's memory, not its values"] = { "Array:to", "Array:free", "Array:prefetch", "Array:advise" },
  ["text (spec/20-arrays_spec.lua)"] = { "Array:tostring" },
}
M.NOT_ARRAY = {}
for why, names in pairs(NOT_ARRAY_GROUPS) do
  for _, n in ipairs(names) do M.NOT_ARRAY[n] = why end
end

-- The public names of the loaded module that the suite must cover or list: cd's functions and the Array
-- methods (operators are entries of their own, "operator +").
function M.public_names()
  local names = {}
  for k, v in pairs(cd) do
    if type(v) == "function" and not k:match("^_") then names[#names + 1] = "cd." .. k end
  end
  for k, v in pairs(cd.linalg or {}) do
    if type(v) == "function" then names[#names + 1] = "cd.linalg." .. k end
  end
  for k, v in pairs(cd.fft) do   -- cd.fft's functions too (issue 32)
    if type(v) == "function" then names[#names + 1] = "cd.fft." .. k end
  end
  for k in pairs(getmetatable(cd.empty(0)).methods) do
    if not k:match("^_") or k:match("^__dlpack") then names[#names + 1] = "Array:" .. k end
  end
  table.sort(names)
  return names
end

-- ------------------------------------------------------------------------------------------ combinations
-- Every entry's dtype combinations, dealt from its own shuffled decks of the 144 ordered pairs and the 12 dtypes;
-- same_as entries reuse their main entry's combinations (and kernels).
-- FNV-1a of a name, 64 bits
local function name_hash(s)
  local h = -3750763034362895579   -- 0xcbf29ce484222325
  for i = 1, #s do h = (h ~ s:byte(i)) * 1099511628211 end
  return h
end

local function deck(r, list)
  local d, i = r.shuffle(list), 0
  return function()
    i = i % #d + 1
    return d[i]
  end
end

-- the combinations of an entry marked cplx (issue 32): "mixed" alternates a complex dtype and any other; "pair" a
-- complex dtype with any of the 14; "fft" the dtypes cd.fft takes as they are, and int32
local FFT_DTYPES = { "float32", "float64", "complex64", "complex128", "int32" }
local RFFT_DTYPES = { "float32", "float64", "int32", "float64" }   -- rfft refuses complex (NumPy 1 drops the parts)
local function complex_combos(r, e, decks)
  local t = {}
  for i = 1, e.combos or 4 do
    local d1, d2
    if e.cplx == "fft" then d1 = FFT_DTYPES[(i - 1) % #FFT_DTYPES + 1]
    elseif e.cplx == "rfft" then d1 = RFFT_DTYPES[(i - 1) % #RFFT_DTYPES + 1]
    elseif e.cplx == "mixed" and i % 2 == 0 then d1 = decks.single()
    else d1 = M.COMPLEX[(i - 1) // (e.cplx == "mixed" and 2 or 1) % 2 + 1] end
    d2 = e.cplx == "pair" and (r.chance(0.5) and r.pick(M.COMPLEX) or decks.single()) or d1
    if e.cplx == "pair" and r.chance(0.5) then d1, d2 = d2, d1 end
    if e.cplx == "pair" and not PART[d1] and not PART[d2] then d1 = "complex64" end
    t[i] = { d1, d2, form = r.pick({ "broadcast", "scalar", "scalar_left", "strided" }), bpair = r.pick(BPAIRS) }
  end
  return t
end

local function combos_for(r, e, decks)
  if e.cplx and not e.same_as then return complex_combos(r, e, decks) end
  if e.same_as then
    local t = {}
    for i = 1, math.min(#e.same_as.combo_list, 3) do t[i] = e.same_as.combo_list[r.int(#e.same_as.combo_list)] end
    return t
  end
  local t = {}
  local K = e.kind
  local forms = K == "binary" and { "broadcast", "scalar", "scalar_left", "strided" } or { "plain", "plain", "strided" }
  for i = 1, e.combos or 4 do
    if K == "binary" or K == "where" or K == "matmul" or K == "astype" then
      t[i] = decks.pair()
      if K == "matmul" and i <= 3 then t[i] = { FLOATS[i], FLOATS[i] } end   -- its dtypes; then others, refused
      if K == "binary" and i == 1 then local d = decks.single(); t[i] = { d, d } end
    elseif K == "linalg" then   -- float32 and float64; integers (computed in float64) or float16 (refused)
      t[i] = { i == 1 and "float32" or i == 2 and "float64" or r.pick({ "int32", "float16", "int64" }) }
    elseif K == "eye" then
      t[i] = { r.pick({ "float32", "float64", "int32", "bool", "uint8", "float16" }) }
    elseif K == "range" then
      t[i] = { r.pick({ "default", "float64", "float32", "int64", "int32", "int16" }) }
    elseif e.ints then
      t[i] = { r.pick({ "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64" }) }
    else
      local d = K == "unary" and i == 1 and decks.float() or decks.single()
      t[i] = { d, decks.single() }
    end
    t[i] = { t[i][1], t[i][2], form = r.pick(forms), bpair = r.pick(BPAIRS) }
  end
  return t
end

-- ------------------------------------------------------------------------------------------ Python literals
-- v as a Python literal: integers as ints, floats as float('...'), strings as bytes, tables as lists (tuples
-- when `tuple`), nil as None.
function M.py(v, tuple)
  local t = type(v)
  if t == "nil" then return "None" end
  if t == "boolean" then return v and "True" or "False" end
  if t == "number" then
    if math.type(v) == "integer" then return fmt("%d", v) end
    if v ~= v then return "float('nan')" end
    return fmt("float('%.17g')", v)
  end
  if t == "string" then return fmt("bytes.fromhex('%s')", (v:gsub(".", function(c) return fmt("%02x", c:byte()) end))) end
  if t == "table" then
    local parts = {}
    for i = 1, #v do parts[i] = M.py(v[i], tuple) end
    if tuple then return "(" .. concat(parts, ", ") .. (#parts == 1 and ",)" or ")") end
    return "[" .. concat(parts, ", ") .. "]"
  end
  return fmt("%q", tostring(v))
end

local function hex(s) return (s:gsub(".", function(c) return fmt("%02x", c:byte()) end)) end

-- An Array for Python: A(dtype, shape, bytes-in-hex [, view of b])
local function py_array(a, view)
  return fmt("A(%q, %s, '%s', %q)", a.dtype, M.py(a.shape, true), hex(a:contiguous():tobytes()), view or "b")
end

local function py_operand(o)
  if cd.type(o.value) ~= "Array" then return M.py(o.value) end
  return py_array(o.base or o.value, o.view)
end

-- cudadev's answer for Python: an Array, a Lua value, or E(message) when it raised
local function py_result(ok, v)
  if not ok then return fmt("E(%q)", tostring(v):gsub("\n", " "):sub(1, 300)) end
  if cd.type(v) == "Array" then return py_array(v) end
  if type(v) == "table" and cd.type(v[1]) == "Array" then
    local parts = {}
    for i, a in ipairs(v) do parts[i] = py_array(a) end
    return "L([" .. concat(parts, ", ") .. "])"
  end
  return fmt("V(%s)", M.py(v))
end

-- ------------------------------------------------------------------------------------------ running
-- the operands for Python, taken before cudadev runs the case (an in-place operation changes its operand)
local function case_env(c)
  local args = {}
  for _, a in ipairs(c.args) do args[#args + 1] = fmt("%q: %s", a.name, py_operand(a)) end
  for k, v in pairs(c.py or {}) do args[#args + 1] = fmt("%q: %s", k, v) end
  table.sort(args)
  return args
end

local function case_line(c)
  local args = c.env
  return fmt("{'id': %d, 'name': %q, 'expr': %q, 'tol': %q, 'prep': %s, 'env': {%s}, 'got': %s}\n", c.id, c.entry[1],
    c.entry.np, tostring(c.entry.tol), c.entry.prep and fmt("%q", c.entry.prep) or "None", concat(args, ", "),
    c.got or "None")
end

local function call(c)
  local vals = {}
  for i, a in ipairs(c.args) do vals[i] = a.value end
  if c.entry.range then return pcall(c.entry.lua, c.p or {}) end
  vals[#vals + 1] = c.p or {}
  if c.entry.kind == "create" then return pcall(c.entry.lua, vals[1], vals[2]) end
  return pcall(c.entry.lua, table.unpack(vals, 1, #c.args + 1))
end

local function python(py, script, mode, infile, outfile)
  local cmd = fmt("%s -B %s %s %s %s 2>&1", py, script, mode, infile, outfile)   -- -B: no __pycache__ in spec/
  local p = io.popen(cmd)
  local out = p:read("a")
  local ok = p:close()
  if not ok then error("numpy side failed: " .. cmd .. "\n" .. out) end
end

-- The twin of case c through cd.fuse (entry fe): its operands, parameters and NumPy expression; an in-place
-- case's operand is kept as it was (the unfused case writes it first).
local function fused_case(c, fe, id)
  local p = setmetatable({}, { __index = c.p })
  if c.entry.kind == "inplace" then p.fuse_x0 = c.args[1].value:copy() end
  return { args = c.args, p = p, py = c.py, env = c.env, entry = fe, combo = c.combo, id = id }
end

-- Generates the cases, runs them through cudadev and NumPy, and returns the verdicts.
--   opts: python (the interpreter), dir (a temporary directory), seed, per_combo (cases per combination),
--   only (a Lua pattern: the entries whose names match, for working on a few)
function M.run(opts)
  local seed = opts.seed or 28
  local pairs_list, singles = {}, {}
  for _, a in ipairs(M.DTYPES) do
    singles[#singles + 1] = a
    for _, b in ipairs(M.DTYPES) do pairs_list[#pairs_list + 1] = { a, b } end
  end
  local ctx = { dir = opts.dir }
  local cases = {}
  for _, e in ipairs(ENTRIES) do
    -- each entry draws from a generator of its own (the seed and its name): adding or changing an entry leaves
    -- every other entry's cases as they were, and with them the known failures and documented differences
    local r = rng(seed ~ name_hash(e[1]))
    local decks = { pair = deck(r, { table.unpack(pairs_list) }), single = deck(r, { table.unpack(singles) }),
                    float = deck(r, { table.unpack(FLOATS) }) }
    e.combo_list = combos_for(r, e, decks)
    if opts.only and not (e[1] .. " " .. (e.group or "")):find(opts.only) then e.combo_list = {} end
    local per = opts.per_combo or 10
    if e.same_as then per = math.max(per // 3, 1) end
    for _, combo in ipairs(e.combo_list) do
      for _ = 1, per do
        local c = GEN[e.kind](r, combo, e, ctx)
        c.entry, c.combo, c.id = e, combo, #cases + 1
        c.env = case_env(c)
        cases[#cases + 1] = c
        if e.fused and e.fused ~= true then cases[#cases + 1] = fused_case(c, e.fused, #cases + 1) end
      end
    end
  end
  -- NumPy writes the files that cudadev reads
  local script = opts.script or "spec/numpy_diff.py"
  local prep = {}
  for _, c in ipairs(cases) do if c.entry.prep then prep[#prep + 1] = case_line(c) end end
  local pin, pout = opts.dir .. "/prep.txt", opts.dir .. "/prep.out"
  local f = assert(io.open(pin, "w"))
  f:write(concat(prep))
  f:close()
  python(opts.python, script, "prep", pin, pout)
  -- cudadev's answers
  local before = cd.kernel_cache_stats().memory_misses
  local stats = cd.kernel_cache_stats
  for _, c in ipairs(cases) do
    local k0 = stats().memory_misses
    c.got = py_result(call(c))
    c.entry.kernels = (c.entry.kernels or 0) + stats().memory_misses - k0
  end
  local kernels = cd.kernel_cache_stats().memory_misses - before
  -- NumPy's answers and the comparison
  local cin, cout = opts.dir .. "/cases.txt", opts.dir .. "/verdicts.txt"
  f = assert(io.open(cin, "w"))
  for _, c in ipairs(cases) do f:write(case_line(c)) end
  f:close()
  python(opts.python, script, "compare", cin, cout)
  local verdicts = {}
  for line in io.lines(cout) do
    local id, verdict, what, detail = line:match("^(%d+)\t(%a+)\t?([^\t]*)\t?(.*)$")
    verdicts[tonumber(id)] = { ok = verdict == "ok", kind = what, detail = detail }
  end
  return { cases = cases, verdicts = verdicts, kernels = kernels }
end

return M
