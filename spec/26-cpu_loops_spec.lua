-- The cpu device's built-in loops (NOTE [cpu loops], issue 28): the built-in operations run without a host
-- compiler run (cd.kernel_cache_stats().cpu_compiles), in a new process with an empty kernel cache and in a
-- sandboxed state, and give the generated kernels' bits (cd._cpu_loops(false) sends them to the kernels) over
-- generated inputs: every pair of edge values of a dtype (NaN, infinities, -0.0, the integer extremes, zero
-- divisors, shifts past the width, float16's rounding), each calc type of every operation, mixed dtypes,
-- broadcasting, strided views and reductions along each axis.
local helper = require "spec.helper"
local cd = require "cudadev"

local function compiles() return cd.kernel_cache_stats().cpu_compiles end

-- edge values of each dtype, as Lua values cd.array takes
local FLOATS = { 0.0, -0.0, 1.0, -1.0, 0.5, 2.5, -2.5, 3.0, -7.0, 65504.0, 1e-8, 1e300, 1 / 0, -1 / 0, 0 / 0, 100.25 }
local RANGE = {
  int8 = { -128, 127 }, int16 = { -32768, 32767 }, int32 = { -2147483648, 2147483647 },
  int64 = { math.mininteger, math.maxinteger }, uint8 = { 0, 255 }, uint16 = { 0, 65535 },
  uint32 = { 0, 4294967295 }, uint64 = { 0, math.maxinteger },
}
local INTS = { 0, 1, -1, 2, 3, -7, 7, 8, 15, 16, 31, 32, 63, 64, 100, -100 }

local function edges(dtype)
  if dtype == "bool" then return { false, true } end
  if dtype:match("^float") then return FLOATS end
  local r, out = RANGE[dtype], {}
  for _, v in ipairs(INTS) do if v >= r[1] and v <= r[2] then out[#out + 1] = v end end
  out[#out + 1], out[#out + 2] = r[1], r[2]
  if r[1] < 0 then out[#out + 1] = r[1] + 1 end
  return out
end

-- x and y of dtypes dx and dy holding every pair of their edge values
local function pairs_of(dx, dy)
  local ex, ey, xs, ys = edges(dx), edges(dy), {}, {}
  for _, a in ipairs(ex) do
    for _, b in ipairs(ey) do xs[#xs + 1], ys[#ys + 1] = a, b end
  end
  return cd.array(xs, dx, { device = "cpu" }), cd.array(ys, dy, { device = "cpu" })
end

-- f() through the loops and through the generated kernels: the same bits, or the same error
local function same(what, f)
  local before = compiles()
  cd._cpu_loops(true)
  local ok1, r1 = pcall(f)
  assert.are.equal(before, compiles(), what .. ": the loops compiled")
  cd._cpu_loops(false)
  local ok2, r2 = pcall(f)
  cd._cpu_loops(true)
  assert.are.equal(ok2, ok1, what .. ": " .. tostring(ok1 and r2 or r1))
  if not ok1 then
    assert.are.equal(helper.error_text(r2), helper.error_text(r1), what)
    return
  end
  if cd.type(r1) ~= "Array" then   -- a Lua value: a number's bits, or a boolean
    local function bits(v) return type(v) == "number" and string.pack("n", v) .. math.type(v) or tostring(v) end
    assert.are.equal(bits(r2), bits(r1), what)
    return
  end
  assert.are.equal(r2.dtype, r1.dtype, what)
  assert.are.same(r2.shape, r1.shape, what)
  if r1:tobytes() ~= r2:tobytes() then
    local a, b = r1:totable(), r2:totable()
    for i = 1, #a do
      if string.pack("n", tonumber(a[i]) or (a[i] and 1 or 0)) ~= string.pack("n", tonumber(b[i]) or (b[i] and 1 or 0)) then
        error(("%s: element %d: the loop gives %s, the kernel %s"):format(what, i, tostring(a[i]), tostring(b[i])))
      end
    end
    error(what .. ": the bytes differ")
  end
end

after_each(function() cd._cpu_loops(true) end)

-- one dtype of each calc type (bool, int, unsigned int, long long, unsigned long long, float via float16, double)
local CALC_DTYPES = { "bool", "int8", "uint16", "int64", "uint64", "float16", "float64" }
local BINARY = { "add", "subtract", "multiply", "divide", "floor_divide", "remainder", "power", "minimum", "maximum",
                 "arctan2", "hypot", "bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift",
                 "equal", "not_equal", "less", "less_equal", "greater", "greater_equal" }
local UNARY_MATH = { "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "cbrt", "sin", "cos", "tan",
                     "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "floor",
                     "ceil", "trunc", "rint", "erf", "erfc" }
local UNARY_ANY = { "abs", "negative", "sign", "square", "isnan", "isinf", "isfinite", "logical_not" }
local REDUCTIONS = { "sum", "prod", "mean", "min", "max", "argmin", "argmax", "all", "any" }

describe("the cpu device's built-in operations", function()
  it("run in a new process with an empty kernel cache without a host compiler run (times printed)", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir " .. dir))
    local out = helper.run_child([[
      local n = 1 << 20
      local a = cd.full(n, 1.5, 'float32', {device = 'cpu'})
      local b = cd.full(n, 2.0, 'float32', {device = 'cpu'})
      local t0 = cd.now()
      local c = a + b
      local t1 = cd.now()
      local s = a:sum()
      local t2 = cd.now()
      local q = cd.sqrt(b)
      local t3 = cd.now()
      print(("a + b %.1f ms, a:sum() %.1f ms, cd.sqrt(a) %.1f ms"):format((t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3))
      print(c[n], s, q[1], cd.kernel_cache_stats().cpu_compiles)]], "CUDADEV_CACHE_DIR=" .. dir)
    os.execute("rm -rf " .. dir)
    io.stderr:write("\n  [cpu loops, 2^20 float32, cold process] " .. (out:match("a %+ b[^\n]*") or out) .. "\n")
    helper.has_line(out, "3.5\t1572864.0\t1.4142135381699\t0")
    helper.has_line(out, "exit 0")
  end)

  it("run in a sandboxed state, where cpu compiles are refused", function()
    local ok, res = cd._sandbox([[
      local a = cd.full(1 << 20, 4.0, 'float32', {device = 'cpu'})
      local b = cd.ones(1 << 20, 'float32', {device = 'cpu'})
      local c = a + b
      local s = a:sum({axis = 1})
      return tostring(c[7]) .. ' ' .. tostring(s[1]) .. ' ' .. tostring(cd.sqrt(a)[3]) .. ' ' ..
        tostring((a:astype('int32') // 3):max()) .. ' ' .. tostring(cd.where(a:gt(b), a, -1.0)[1])]])
    assert(ok, res)
    assert.are.equal("5.0 4194304.0 2.0 1 4.0", res)
    -- a kernel of the script's own still needs a compile, refused as before
    local ok2, err = cd._sandbox([[return cd.elementwise('float32 x', 'float32 y', 'y = x + 1')(cd.ones(2, 'f32', {device = 'cpu'}))]])
    assert.is_false(ok2)
    assert.truthy(tostring(err):find("sandbox", 1, true))
    -- nor may a script turn the process's loops off
    local ok3, err3 = cd._sandbox("return cd._cpu_loops(false)")
    assert.is_false(ok3)
    assert.are.equal("_cpu_loops is not available in this sandbox", (tostring(err3):gsub("^sandboxed:%d+: ", "")))
    assert.is_true(cd._cpu_loops())
  end)

  it("each of them, on every dtype, strided and broadcast, compile nothing", function()
    local before = compiles()
    local dts = { "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
                  "float32", "float64" }
    for _, dx in ipairs(dts) do
      local base = cd.array({ { 1, 2, 3 }, { 4, 5, 6 } }, "int8", { device = "cpu" }):astype(dx)
      local x = base:transpose()          -- strided
      local row = cd.ones({ 2 }, dx, { device = "cpu" })   -- broadcast along x's first axis
      for _, dy in ipairs(dts) do
        local y = cd.ones({ 3, 2 }, dy, { device = "cpu" })
        for _, f in ipairs(BINARY) do pcall(cd[f], x, y) end
        pcall(cd.where, y, x, row)
        pcall(function() return x:astype(dy):copy() end)
      end
      for _, f in ipairs(BINARY) do pcall(cd[f], x, row); pcall(cd[f], x, 3); pcall(cd[f], 2.5, x) end
      for _, f in ipairs(UNARY_MATH) do pcall(cd[f], x) end
      for _, f in ipairs(UNARY_ANY) do pcall(cd[f], x) end
      pcall(function() return ~x end)
      pcall(function() return -x end)
      for _, r in ipairs(REDUCTIONS) do
        pcall(x[r], x)
        pcall(x[r], x, 1)
        pcall(x[r], x, { axis = -1, keepdims = true })
      end
      x:contiguous()
    end
    assert.are.equal(before, compiles())
  end)
end)

describe("the cpu loops against the generated kernels", function()
  it("binary operations: each calc type over every pair of its edge values", function()
    for _, d in ipairs(CALC_DTYPES) do
      local x, y = pairs_of(d, d)
      for _, f in ipairs(BINARY) do same(f .. " " .. d, function() return cd[f](x, y) end) end
    end
  end)

  it("binary operations of mixed dtypes, scalars and outputs of another dtype", function()
    local mixed = { { "int8", "uint8" }, { "int32", "float32" }, { "uint64", "int64" }, { "float16", "int16" },
                    { "bool", "float32" }, { "uint32", "int8" }, { "float16", "float64" }, { "int8", "uint64" } }
    for _, p in ipairs(mixed) do
      local x, y = pairs_of(p[1], p[2])
      for _, f in ipairs({ "add", "multiply", "floor_divide", "remainder", "less", "greater_equal", "equal",
                           "maximum", "power" }) do
        same(f .. " " .. p[1] .. " " .. p[2], function() return cd[f](x, y) end)
      end
    end
    local x = pairs_of("int16", "int16")
    same("int16 + 3", function() return x + 3 end)
    same("int16 * 2.5", function() return x * 2.5 end)
    same("int16 << 20", function() return x << 20 end)
    same("int16 + true", function() return x + true end)
    -- a Lua integer out of the array's range, which true division, arctan2 and hypot take in their float (NEP 50)
    same("int16 / 70000", function() return x / 70000 end)
    same("uint64 / -1", function() return pairs_of("uint64", "uint64") / -1 end)
    same("arctan2 uint8 -300", function() return cd.arctan2(pairs_of("uint8", "uint8"), -300) end)
    same("hypot mininteger int16", function() return cd.hypot(math.mininteger, x) end)
    local h = pairs_of("float16", "float16")
    same("float16 * 1/3", function() return h * (1 / 3) end)
    same("add into int8", function() return cd.add(x, x, { out = cd.empty(x.shape, "int8", { device = "cpu" }) }) end)
    same("add into float16", function()
      return cd.add(x, 0.5, { out = cd.empty(x.shape, "float16", { device = "cpu" }) })
    end)
  end)

  it("unary functions: float16, float64 and integer inputs", function()
    for _, d in ipairs({ "float16", "float64", "int8", "int32" }) do
      local x = pairs_of(d, "bool")
      for _, f in ipairs(UNARY_MATH) do same(f .. " " .. d, function() return cd[f](x) end) end
    end
    for _, d in ipairs(CALC_DTYPES) do
      local x = pairs_of(d, "bool")
      for _, f in ipairs(UNARY_ANY) do same(f .. " " .. d, function() return cd[f](x) end) end
      same("~ " .. d, function() return ~x end)
    end
  end)

  it("where, copies of strided views and broadcasting", function()
    for _, d in ipairs(CALC_DTYPES) do
      local x, y = pairs_of(d, "float32")
      same("where " .. d, function() return cd.where(y, x, y) end)
      same("where scalar " .. d, function() return cd.where(x, y, 2) end)
      local m = x:reshape({ #x // 2, 2 })
      same("copy of a transposed " .. d, function() return m:transpose():copy() end)
      same("copy of every other " .. d, function() return x:slice(1, nil, 2):copy() end)
      same("copy reversed " .. d, function() return m:slice(nil, nil, -1):copy() end)
    end
    local a = cd.arange(24, "float32", { device = "cpu" }):reshape({ 2, 3, 4 })
    local row = cd.array({ 0.5, -1, 0 / 0, 2 }, "float32", { device = "cpu" })
    local col = cd.array({ { 1 }, { -0.0 }, { 3 } }, "float64", { device = "cpu" })
    same("3-d + row", function() return a + row end)
    same("3-d / col", function() return a / col end)
    same("transposed 3-d - row", function() return a:transpose({ 3, 2, 1 }) - col:reshape({ 1, 3 }) end)
    same("in place", function() local b = a:copy(); b:add_(row); return b end)
  end)

  it("reductions: each dtype, whole and along each axis, with the kernels' order of folding", function()
    for _, d in ipairs({ "bool", "int8", "uint16", "int32", "int64", "uint64", "float16", "float32", "float64" }) do
      local x = pairs_of(d, d)
      local m = x:slice(1, #x // 4 * 4):reshape({ #x // 4, 4 })
      for _, r in ipairs(REDUCTIONS) do
        same(r .. " " .. d, function() return x[r](x) end)
        same(r .. " axis 1 " .. d, function() return m[r](m, 1) end)
        same(r .. " axis 2 " .. d, function() return m[r](m, { axis = 2, keepdims = true }) end)
      end
    end
    -- enough elements for several blocks per output and a second pass, and NaN in some of them
    local big = cd.arange(300000, "float32", { device = "cpu" }) * 1.0001
    big[4097] = 0 / 0
    for _, r in ipairs(REDUCTIONS) do
      same(r .. " big", function() return big[r](big) end)
      same(r .. " big axis", function() return big:reshape({ 3000, 100 })[r](big:reshape({ 3000, 100 }), 1) end)
    end
  end)
end)

-- A bool array may hold bytes other than 0 and 1 (a:view("bool") of uint8 data, a file): any byte but 0 is true. The
-- loops read bool elements as bytes (reading 52 as a C _Bool is undefined behaviour: UBSan stopped the fuzzer's run
-- under make check at cpu_loops.c's cast of such an array in argmax).
describe("the cpu loops and bool arrays of any bytes", function()
  it("read any nonzero byte as true", function()
    local u = cd.array({ 0, 52, 1, 255, 0, 2 }, "uint8", { device = "cpu" })
    local b = u:view("bool")
    assert.are.equal(2, b:argmax())
    assert.are.equal(4, b:sum())
    assert.are.same({ 0, 1, 1, 1, 0, 1 }, b:astype("int32"):totable())
    assert.are.same({ false, true, true, true, false, true }, (b ~ false):totable())
    assert.is_true(b:any())
    assert.is_false(b:all())
  end)
end)
