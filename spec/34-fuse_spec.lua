-- cd.fuse (issue 31): a fused function gives what the unfused function gives (dtypes, shapes, values, NaN positions),
-- for every operator and elementwise function, dtype mixes, Lua numbers, broadcasting, views, several results, out=,
-- trailing reductions; in one pass where the unfused function makes temporaries; and clear errors at the line that
-- does what cannot be traced. On every device.
local helper = require "spec.helper"
local cd = require "cudadev"

-- the values of an Array as a flat list, NaN as the string "nan" (so that positions compare)
local function flat(a)
  if cd.type(a) ~= "Array" then return a end
  local out = {}
  local function walk(t)
    if type(t) ~= "table" then
      out[#out + 1] = t ~= t and "nan" or t
      return
    end
    for _, v in ipairs(t) do walk(v) end
  end
  walk(a:totable())
  return out
end

local function same(expected, got, what)
  if cd.type(expected) == "Array" then
    assert.are.equal("Array", cd.type(got), what)
    assert.are.equal(expected.dtype, got.dtype, what)
    assert.are.same(expected.shape, got.shape, what)
  end
  assert.are.same(flat(expected), flat(got), what)
end

-- fn fused and unfused on the same arguments: every result the same
local function check(fn, what, ...)
  local want = table.pack(pcall(fn, ...))
  local got = table.pack(pcall(cd.fuse(fn), ...))
  assert.are.equal(want[1], got[1], what .. ": " .. tostring(want[2]) .. " / " .. tostring(got[2]))
  if not want[1] then return end
  assert.are.equal(want.n, got.n, what)
  for i = 2, want.n do same(want[i], got[i], what) end
end

local BINARY = { "add", "subtract", "multiply", "divide", "floor_divide", "remainder", "power", "minimum", "maximum",
                 "arctan2", "hypot", "bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift", "equal",
                 "not_equal", "less", "less_equal", "greater", "greater_equal" }
local OPERATORS = {
  ["+"] = function(x, y) return x + y end, ["-"] = function(x, y) return x - y end,
  ["*"] = function(x, y) return x * y end, ["/"] = function(x, y) return x / y end,
  ["%"] = function(x, y) return x % y end, ["^"] = function(x, y) return x ^ y end,
  ["//"] = function(x, y) return x // y end, ["&"] = function(x, y) return x & y end,
  ["|"] = function(x, y) return x | y end, ["~"] = function(x, y) return x ~ y end,
  ["<<"] = function(x, y) return x << y end, [">>"] = function(x, y) return x >> y end,
}
local UNARY = { "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "cbrt", "sin", "cos", "tan", "arcsin",
                "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "floor", "ceil", "trunc",
                "rint", "erf", "erfc", "abs", "negative", "sign", "square", "isnan", "isinf", "isfinite",
                "logical_not" }
local PAIRS = { { "float32", "float32" }, { "int32", "float64" }, { "uint8", "int8" }, { "bool", "int16" },
                { "float16", "float32" }, { "int64", "uint64" }, { "int8", "int8" } }

helper.each_device(function(dev)
  local function arr(t, dt) return cd.array(t, dt, { device = dev }) end
  local VALUES = { 3, -2, 0, 7, 1, -5, 2, 0, 6, 1, -1, 4 }
  local FLOATS = { 0.5, -2.25, 0, 7.5, 1, -0.75, 2, 0, 6.125, 0.25, -1, 4 }
  local function values_for(dt)
    if dt == "bool" then return { true, false, true, true, false, false, true, false, true, true, false, true } end
    if dt:match("^uint") then
      local t = {}
      for i, v in ipairs(VALUES) do t[i] = math.abs(v) end
      return t
    end
    return dt:match("^float") and FLOATS or VALUES
  end

  describe("cd.fuse on " .. dev, function()
    -- Many operations in one fused function, one kernel (a kernel each would be a host-compiler run each on the
    -- cpu device): those of ops whose unfused form takes these operands, all their results compared.
    local function check_all(ops, what, ...)
      local ok = {}
      for _, op in ipairs(ops) do
        if pcall(op[2], ...) then ok[#ok + 1] = op else check(op[2], what .. " " .. op[1], ...) end
      end
      check(function(...)
        local r = {}
        for i, op in ipairs(ok) do r[i] = op[2](...) end
        return table.unpack(r, 1, #ok)
      end, what, ...)
    end

    it("gives what every binary function and operator gives, for mixed dtypes and Lua numbers", function()
      local arrays, left, right = {}, {}, {}
      for _, name in ipairs(BINARY) do
        arrays[#arrays + 1] = { name, function(a, b) return cd[name](a, b) end }
        left[#left + 1] = { name, function(a) return cd[name](a, 3) end }
        right[#right + 1] = { name, function(a) return cd[name](2.5, a) end }
      end
      for sym, f in pairs(OPERATORS) do
        arrays[#arrays + 1] = { sym, f }
        left[#left + 1] = { sym, function(a) return f(a, 2) end }
      end
      for _, p in ipairs(PAIRS) do
        local x, y = arr(values_for(p[1]), p[1]), arr(values_for(p[2]), p[2])
        check_all(arrays, p[1] .. " with " .. p[2], x, y)
        check_all(left, p[1] .. " with Lua integers", x)
        check_all(right, "a Lua float with " .. p[2], y)
      end
    end)

    it("gives what every unary function gives, on each dtype", function()
      local ops = { { "unary minus", function(a) return -a end }, { "~", function(a) return ~a end } }
      for _, name in ipairs(UNARY) do ops[#ops + 1] = { name, function(a) return cd[name](a) end } end
      for _, dt in ipairs({ "float32", "float64", "float16", "int32", "uint8", "int64", "bool" }) do
        check_all(ops, dt, arr(values_for(dt), dt))
      end
    end)

    it("chains operations, comparison methods and cd.where, with intermediate roundings as unfused", function()
      local x, y = arr(FLOATS, "float16"), arr(VALUES, "int8")
      check(function(a, b, s) return cd.where(a:gt(b), cd.exp(a) * s - b, a // b) + 1 end, "where chain", x, y, 0.5)
      check(function(a, b) return a:abs():lt(b), a:ge(0), cd.maximum(a, b) * a end, "comparisons", x, y)
      local s = cd.fuse(function(a, n, m) return a * (n * 2 + m) end)   -- Lua arithmetic of numbers, replayed
      same(x * (3 * 2 + 1), s(x, 3, 1), "Lua arithmetic 1")
      same(x * (5 * 2 + 0.5), s(x, 5, 0.5), "Lua arithmetic 2")
      same(x * 11, s(x, 5, 1), "a new value costs no new trace")
    end)

    it("rounds a product before a sum as unfused (no contraction into a fused multiply-add on a GPU)", function()
      -- (1 + 2^-12)^2 lies on a tie of float32: rounded, minus 1 it is 2^-11; through an fma 2^-11 + 2^-24
      local x, z = arr({ 1 + 2 ^ -12, 1 + 3 * 2 ^ -12, 3 }, "float32"), arr({ -1, -1, -9 }, "float32")
      check(function(a, b, c) return a * b + c end, "x * y + z", x, x, z)
      assert.are.equal(2 ^ -11, cd.fuse(function(a, c) return a * a + c end)(x, z)[1])
      check(function(a, c) return (a * a + c):sum() end, "a sum of x * x + z", x, z)
      check(function(a, c) return (a * a):sum(), (a * a - c):max() end, "reductions of products", x, z)
    end)

    it("squares x ^ 2 as the unfused operator, and honours an exponent argument that is no longer 2", function()
      local x = arr({ 1 + 2 ^ -12, 1 + 3 * 2 ^ -12, -2.5, 0 / 0 }, "float32")
      check(function(a) return a ^ 2, a ^ 2.0, cd.power(a, 2) end, "x ^ 2", x)
      check(function(a, b) return ((a - b) ^ 2):sum() end, "((x - y) ^ 2):sum()", x:slice(1, 3),
        arr({ 1, 2, 3 }, "float16"))
      local f = cd.fuse(function(a, e) return a ^ e end)
      for _, e in ipairs({ 2, 3, 2, 0.5, 2.0 }) do same(x ^ e, f(x, e), "x ^ " .. e) end
    end)

    it("broadcasts, reads strided views and returns several results", function()
      local m = arr({ { 1, 2, 3, 4 }, { 5, 6, 7, 8 }, { 9, 10, 11, 12 } }, "float32")
      local col, row = arr({ { 1 }, { 2 }, { 3 } }, "float32"), arr({ 0.5, 1, 2, 4 }, "float64")
      check(function(a, b, c) return a * b + c, a - c end, "broadcast", m, col, row)
      check(function(a, b) return a + b end, "a transposed view", m.T, arr({ 1, 2, 3 }, "int32"))
      check(function(a, b) return a * b, a end, "a stepped slice and an argument returned", m:slice(1, 3, 2), col:slice(1, 3, 2))
      check(function(a, b) return a + b, a + b * 2, 7 end, "results of one shape and a plain value", m, row)
      check(function(a, b) return a + b, b * 2 end, "results of different shapes (run unfused)", m, row)
    end)

    it("writes into out=", function()
      local x, y = arr({ 1, 2, 3 }, "float32"), arr({ 4, 5, 6 }, "float32")
      local f = cd.fuse(function(a, b) return a * b + 1, a - b end)
      local o1, o2 = cd.empty(3, "float64", { device = dev }), cd.empty(3, "float32", { device = dev })
      local r1, r2 = f(x, y, { out = { o1, o2 } })
      assert.are.equal(o1, r1)
      assert.are.equal(o2, r2)
      assert.are.same({ 5, 11, 19 }, o1:totable())
      assert.are.same({ -3, -3, -3 }, o2:totable())
      local oi = cd.empty(3, "int32", { device = dev })
      helper.assert_error_contains(function() f(x, y, { out = oi }) end, "float32, which cannot be stored in an int32")
    end)

    it("fuses a trailing reduction, over everything or an axis, and Lua arithmetic on its result", function()
      local m = arr({ { 1, -2, 3 }, { 4, 5, -6 } }, "float32")
      local n = arr({ { 2, 2, 2 }, { 1, 0, 3 } }, "int16")
      for _, r in ipairs({ "sum", "prod", "mean", "max", "min" }) do
        check(function(a, b) return ((a - b) ^ 2)[r](((a - b) ^ 2)) end, r .. " of all", m, n)
        check(function(a, b) return (a * b)[r](a * b, 1) end, r .. " along axis 1", m, n)
        check(function(a, b) return (a * b)[r](a * b, { axis = -1, keepdims = true }) end, r .. " keepdims", m, n)
      end
      check(function(a, b) return (a - b):sum() / 6, a + b end, "Lua arithmetic on a sum, and an array result", m, n)
      check(function(a) return a:sum(), a:max() end, "two reductions of an argument", n)
      check(function(a, b) return (a * b):sum() end, "a reduction of broadcast inputs (run unfused)", m,
        arr({ 1, 2, 3 }, "float32"))
      local u = arr({ 2 ^ 63, 3 }, "uint64")
      check(function(a) return (a + 0):max() end, "uint64 above 2^63", u)
      helper.assert_error_contains(function() cd.fuse(function(a) return a:max() end)(arr({}, "float32")) end,
        "max: zero-size array to a reduction with no identity")
    end)

    it("keeps the launch of a repeated call, and leaves it for every call of another kind", function()
      -- (NOTE [fuse launches]) Lua and C calls a fused call makes once its launch is kept: the general path made
      -- 233 for x * y + z and 181 for ((x - y) ^ 2):sum() (shapes, the kernel's key, a field read per question)
      local x, y, z = arr(FLOATS, "float32"), arr(VALUES, "float32"), arr(VALUES, "float32")
      local f = cd.fuse(function(a, b, c, s) return a * b + c * s, a:gt(b) end)
      local g = cd.fuse(function(a, b) return ((a - b) ^ 2):sum() end)
      local function calls(fn)
        local n = 0
        debug.sethook(function() n = n + 1 end, "c")
        for _ = 1, 20 do fn() end
        debug.sethook()
        return n / 20
      end
      f(x, y, z, 2)
      g(x, y)
      local fe, fs = calls(function() return f(x, y, z, 2) end), calls(function() return g(x, y) end)
      assert.is_true(fe <= 80, ("the fused elementwise call made %.1f calls"):format(fe))
      assert.is_true(fs <= 70, ("the fused sum made %.1f calls"):format(fs))
      -- every call still gives the unfused answers: new values, Lua numbers, sizes, views, freed arrays, a reset
      -- of the kernels
      local function both(a, b, c, s)
        same(a * b + c * s, (f(a, b, c, s)), "kept x * y + z * s")
        same(((a - b) ^ 2):sum(), g(a, b), "kept sum")
      end
      both(x, y, z, 0.5)
      both(y, x, z, -3)
      local big = cd.arange(1, 100001, 1, "float32", { device = dev }) / 1024
      both(big, big * 0.5, big, 2)                       -- more than one block of partials
      both(arr({ 1, 2, 3 }, "float32"), arr({ 3, 2, 1 }, "float32"), arr({ 0, 0, 0 }, "float32"), 1)
      both(x:slice(1, 12, 2), y:slice(1, 12, 2), z:slice(2, 12, 2), 1)   -- strided: the general path
      same(x * y + z * 1, (f(x, y, z, 1, { out = { cd.empty(12, "float32", { device = dev }),
        cd.empty(12, "bool", { device = dev }) } })), "out=")
      same(x * y + z * 2, (f(x, y, z, 2)), "after out=")
      cd.clear_kernel_cache()
      both(x, y, z, 4)
      local gone = cd.ones(12, "float32", { device = dev })
      gone:free()
      helper.assert_error_contains(function() return f(gone, y, z, 1) end, "freed array")
      helper.assert_error_contains(function() return g(x, gone) end, "freed array")
      same(x * y + z * 3, (f(x, y, z, 3)), "after the errors")
      assert.are.equal(0, g(arr({}, "float32"), arr({}, "float32")))   -- no elements: the general path
      same(((x - y) ^ 2):sum(), g(x, y), "after no elements")
    end)

    it("runs one kernel and makes no temporary where the unfused expression makes one", function()
      local n = 1 << 16
      local x, y, z = cd.full(n, 1.5, "float32", { device = dev }), cd.full(n, 2, "float32", { device = dev }),
        cd.full(n, 3, "float32", { device = dev })
      local f = cd.fuse(function(a, b, c) return a * b + c end)
      f(x, y, z)   -- traced and compiled
      collectgarbage()
      cd.reset_peak_memory_stats(dev)
      local base = cd.memory_allocated(dev)
      local r = f(x, y, z)
      assert.are.equal(base + n * 4, cd.max_memory_allocated(dev))
      assert.are.equal(6, r[n])
      r = nil
      collectgarbage()
      cd.reset_peak_memory_stats(dev)
      base = cd.memory_allocated(dev)
      local u = x * y + z
      assert.are.equal(base + 2 * n * 4, cd.max_memory_allocated(dev))   -- the unfused temporary
      assert.are.equal(6, u[n])
      local g = cd.fuse(function(a, b) return ((a - b) ^ 2):sum() end)
      assert.are.equal(0.25 * n, g(x, y))
    end)
  end)
end)

describe("cd.fuse's errors", function()
  local a
  before_each(function() a = cd.arange(6):astype("float32") end)
  after_each(function() a = nil end)
  local function err(fn, ...)
    local ok, e = pcall(cd.fuse(fn), ...)
    assert.is_false(ok)
    return tostring(e)
  end
  local here = debug.getinfo(1, "S").short_src

  -- (the calls are not tail calls: a tail call's frame is gone, with its line, for every Lua error)
  it("name the line of the function that does what cannot be traced", function()
    local cases = {
      { function(x) return x[1] end, "cd.fuse: element access of a traced Array" },
      { function(x) return x:totable() end, "cd.fuse: 'totable' of a traced Array: only elementwise operations" },
      { function(x) return x .. "s" end, "cd.fuse: a traced value used as a string" },
      { function(x) return x:sum() .. "s" end, "cd.fuse: a traced value used as a string" },
      { function(x) return x:astype("int8") end, "cd.fuse: 'astype' of a traced Array: only elementwise operations" },
      { function(x) if x < 0 then return x end end, "cd.fuse: < of a traced Array is not traced: compare with x:lt(y)" },
      { function(x) return x.shape end, "cd.fuse: a traced Array's shape is not known while tracing" },
      { function(x) return x + a end, "cd.fuse: an Array that is not an argument of the fused function" },
      { function(x) return x - x:sum() end, "cd.fuse: operator -: the result of a reduction can only be returned" },
      { function(x) return x:reshape(3, 2) end, "cd.fuse: 'reshape' of a traced Array" },
      { function(x) return cd.matmul(x, x) end,
        "bad argument #1 to 'matmul' (cudadev.Array expected, got cd.fuse stand-in (cd.fuse traces elementwise operations only))" },
      { function(x) local r = cd.add(x, x, { out = x }) return r end, "cd.fuse: add: out= and stream= are not traced" },
      { function(x) local r = x:sum({ axis = { 1 } }) return r end, "cd.fuse: sum: a list of axes is not fused" },
    }
    for _, c in ipairs(cases) do
      local line = debug.getinfo(c[1], "S").linedefined
      local e = err(c[1], a)
      assert.are.equal(here .. ":" .. line .. ": " .. c[2], e:sub(1, #here + #tostring(line) + 3 + #c[2]), e)
    end
  end)

  it("checks the function and the call's arguments as the unfused operators do", function()
    helper.assert_error_matches(function() cd.fuse(42) end, "bad argument #1 to 'fuse' (function expected, got number)")
    local f = cd.fuse(function(x, s) return x + s end)
    helper.assert_error_contains(function() f(a, "s") end,
      "bad argument #2 to fused function (Array, number or boolean expected, got string)")
    local u8 = cd.array({ 1, 2, 3 }, "uint8")
    assert.are.same({ 4, 5, 6 }, f(u8, 3):totable())
    helper.assert_error_contains(function() f(u8, 300) end, "operator +: Lua integer 300 is out of bounds for uint8")
    helper.assert_error_contains(function() f(a, 1, { outt = a }) end, "bad option 'outt' to fused function (unknown option)")
  end)
end)

-- The fused kernels' sources, compiled by NVRTC for sm_90 with their options (no GPU needed): the cpu device's
-- host compiler takes what NVRTC may refuse, and --fmad=false must reach NVRTC (NOTE [fuse]).
describe("cd.fuse's kernels under NVRTC", function()
  helper.nvrtc_it("compile for sm_90 with --fmad=false, the squares and the trailing reductions", function()
    local real, STOP, srcs = cd.compile, {}, {}
    cd._live()
    cd.compile = function(src, o)
      if type(o) == "table" and type(o.name) == "string" and o.name:match("^cdv_fused") then
        srcs[#srcs + 1] = { o.name, src, o.options }
        error(STOP)
      end
      return real(src, o)
    end
    local x, h = cd.array({ 1, 2, 3 }, "float32", { device = "cpu" }), cd.array({ 1, 2, 3 }, "float16", { device = "cpu" })
    local i = cd.array({ 1, 2, 3 }, "int8", { device = "cpu" })
    local fns = {
      { function(a, b, c) return a * b + c end, x, x, x },
      { function(a, b) return ((a - b) ^ 2):sum() end, x, x },
      { function(a, b) return ((a - b) ^ 2):max(1) end, h, i },
      { function(a, b) return cd.where(a:gt(b), cd.exp(a) ^ 2, b // 2), a ^ 3 end, h, i },
    }
    for _, t in ipairs(fns) do
      local ok, err = pcall(cd.fuse(t[1]), table.unpack(t, 2))
      assert(not ok and err == STOP, tostring(err))
    end
    cd.compile = real
    assert.are.equal(#fns, #srcs)
    for _, s in ipairs(srcs) do
      assert.are.same({ "--fmad=false" }, s[3])
      local opts = { "--fmad=false" }
      local cok, cerr = pcall(cd.compile, s[2], { arch = "sm_90", name = s[1], options = opts })
      assert(cok, tostring(cerr))
    end
    assert.truthy(srcs[2][2]:find("x * x", 1, true))
    assert.falsy(srcs[2][2]:find("pow(x, y)", 1, true))
    assert.truthy(srcs[4][2]:find("pow(x, y)", 1, true))   -- a ^ 3
  end)
end)

-- The option cd.fuse compiles with, on the cpu device: g++ contracts a product and a sum into an FMA in C++, as
-- NVRTC does by default, unless --fmad=false says not to (src/cpu_compile.c)
describe("--fmad on the cpu device", function()
  it("--fmad=false rounds a product before the sum; --fmad=true and the default may contract", function()
    local src = [[extern "C" __global__ void mad(const float *x, const float *z, float *r) {
  float p = x[0] * x[0];
  r[0] = p + z[0];
}]]
    local x, z = cd.array({ 1 + 2 ^ -12 }, "float32", { device = "cpu" }), cd.array({ -1 }, "float32", { device = "cpu" })
    local function run(options)
      local r = cd.zeros(1, "float32", { device = "cpu" })
      cd.compile(src, { device = "cpu", options = options }).mad({ grid = 1, block = 1 }, x, z, r)
      return r[1]
    end
    assert.are.equal(2 ^ -11, run({ "--fmad=false" }))
    assert.are.equal(2 ^ -11, run({ "-fmad", "false" }))
    local contracted = run({ "--fmad=true" })
    assert.is_true(contracted == 2 ^ -11 or contracted == 2 ^ -11 + 2 ^ -24)
    assert.are.equal(contracted, run(nil))
  end)
end)
