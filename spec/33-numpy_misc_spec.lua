-- NumPy's other everyday functions (lua/cudadev/ops_numpy.lua): var and std, reductions over several axes and
-- with dtype=, the nan reductions, clip, the logical functions, isclose/allclose/array_equal, round, fmod,
-- copysign, the constructors (eye, identity, ones_like, diag, triu, tril, outer), the views (flip, squeeze,
-- expand_dims, ravel, flatten, broadcast_to, swapaxes), dot and vdot. Results are checked against references
-- computed here in Lua (the values NumPy gives, worked out by its rules), on every device.
local helper = require "spec.helper"
local cd = require "cudadev"

local E = helper.assert_error_matches
local NAN = 0 / 0

local values = helper.lcg_values   -- deterministic values in [-1, 1)

local function flat(a)
  local t = a:reshape({ a.size }):totable()
  return type(t) == "table" and t or { t }
end

local function close(got, want, tol, what)
  if want ~= want then
    assert(got ~= got, ("%s: got %.17g, expected NaN"):format(what or "", got))
    return
  end
  assert(math.abs(got - want) <= tol * math.max(1, math.abs(want)),
    ("%s: got %.17g, expected %.17g"):format(what or "", got, want))
end

local function all_close(got, want, tol, what)
  assert.equal(#want, #got)
  for i = 1, #want do close(got[i], want[i], tol, (what or "") .. " element " .. i) end
end

-- The reference reduction of the {d1, d2, d3} list x (C order) over the axes set `red`: {shape, values}.
local function ref_reduce(x, shape, red, fold, init)
  local kept = {}
  for i = 1, #shape do if not red[i] then kept[#kept + 1] = i end end
  local acc, order = {}, {}
  local idx = {}
  for i = 1, #shape do idx[i] = 1 end
  for n = 1, #x do
    local key = {}
    for _, k in ipairs(kept) do key[#key + 1] = idx[k] end
    local ks = table.concat(key, ",")
    if acc[ks] == nil then acc[ks] = init(); order[#order + 1] = ks end
    acc[ks] = fold(acc[ks], x[n])
    for i = #shape, 1, -1 do
      idx[i] = idx[i] + 1
      if idx[i] <= shape[i] then break end
      idx[i] = 1
    end
  end
  local out = {}
  for i, ks in ipairs(order) do out[i] = acc[ks] end
  return out
end

local function variance(list, ddof)
  local s = 0
  for _, v in ipairs(list) do s = s + v end
  local m, q = s / #list, 0
  for _, v in ipairs(list) do q = q + (v - m) ^ 2 end
  return q / math.max(#list - ddof, 0)
end

helper.each_device(function(dev)
  local D = { device = dev }
  local function arr(t, dt) return cd.array(t, dt or "float64", D) end

  describe("NumPy's functions on " .. dev .. ": statistics", function()
    it("var and std as NumPy: ddof, axes, keepdims, views, float32 and integer inputs", function()
      local X = values(60, 3)
      local a = arr(X):reshape({ 3, 4, 5 })
      close(a:var(), variance(X, 0), 1e-12, "var")
      close(cd.std(a, { ddof = 1 }), math.sqrt(variance(X, 1)), 1e-12, "std ddof=1")
      for _, axes in ipairs({ { 1 }, { 2 }, { 3 }, { 1, 3 }, { 2, 3 }, { 1, 2 } }) do
        local red = {}
        for _, ax in ipairs(axes) do red[ax] = true end
        local groups = ref_reduce(X, { 3, 4, 5 }, red, function(t, v) t[#t + 1] = v; return t end, function() return {} end)
        local want, wants = {}, {}
        for i, g in ipairs(groups) do want[i] = variance(g, 1); wants[i] = math.sqrt(variance(g, 0)) end
        local axis = #axes == 1 and axes[1] or axes
        all_close(flat(a:var({ axis = axis, ddof = 1 })), want, 1e-12, "var axes " .. table.concat(axes, ","))
        all_close(flat(a:std({ axis = axis, keepdims = true })), wants, 1e-12, "std axes " .. table.concat(axes, ","))
        local ks = a:std({ axis = axis, keepdims = true }).shape
        for i = 1, 3 do assert.equal(red[i] and 1 or a.shape[i], ks[i]) end
      end
      -- a view (transposed) gives the variance of its own elements
      local t = a:transpose({ 3, 1, 2 })
      all_close(flat(t:var(1)), flat(a:var(3)), 1e-12, "view")
      -- float32 with a large mean keeps its digits (NOTE [one-pass variance]); integers give float64
      local big = {}
      for i = 1, 1000 do big[i] = 10000 + (i % 7) * 0.25 end
      local b32 = arr(big, "float32")
      assert.equal("float32", b32:var({ keepdims = true }).dtype)
      close(b32:var(), variance(big, 0), 1e-5, "float32 var with mean 1e4")
      local iv = arr({ 1, 2, 3, 4 }, "int32")
      assert.equal("float64", iv:var({ axis = 1 }).dtype)
      close(iv:var(), 1.25, 1e-15, "int var")
      assert.equal("float16", arr({ 1, 2 }, "float16"):std({ axis = 1 }).dtype)
      -- NumPy's edges: no elements is NaN, ddof past the count is inf
      close(arr({}):var(), NAN, 0, "empty")
      assert.equal(math.huge, arr({ 1, 3 }):var({ ddof = 2 }))
      close(arr({ 5, 5 }):var({ ddof = 2 }), NAN, 0, "0/0")
      close(arr({ 1, 2, 3, 4 }, "int32"):var({ dtype = "float32" }), 1.25, 1e-7, "dtype")
      assert.equal("float32", arr({ 1, 2, 3, 4 }, "int32"):var({ dtype = "float32", axis = 1 }).dtype)
    end)

    it("reduces over several axes at once, with keepdims, out and NumPy's dtype=", function()
      local X = values(24, 5)
      local a = arr(X):reshape({ 2, 3, 4 })
      local red = { [1] = true, [3] = true }
      local want = ref_reduce(X, { 2, 3, 4 }, red, function(s, v) return s + v end, function() return 0 end)
      all_close(flat(a:sum({ axis = { 1, 3 } })), want, 1e-12, "sum {1,3}")
      assert.are.same({ 3 }, a:sum({ axis = { 3, 1 } }).shape)
      assert.are.same({ 1, 3, 1 }, cd.sum(a, { axis = { -1, 1 }, keepdims = true }).shape)
      local mx = ref_reduce(X, { 2, 3, 4 }, red, math.max, function() return -math.huge end)
      all_close(flat(a:max({ axis = { 1, 3 } })), mx, 0, "max")
      all_close(flat(cd.min(a:transpose(), { axis = { 1, 3 } })), ref_reduce(X, { 2, 3, 4 }, red, math.min,
        function() return math.huge end), 0, "min of a view")
      local mean = ref_reduce(X, { 2, 3, 4 }, { [2] = true, [3] = true }, function(s, v) return s + v / 12 end, function() return 0 end)
      all_close(flat(a:mean({ axis = { 2, 3 } })), mean, 1e-12, "mean")
      local o = cd.empty({ 3 }, "float64", D)
      assert.equal(o, a:sum({ axis = { 1, 3 }, out = o }))
      all_close(flat(o), want, 1e-12, "out")
      -- every axis: a Lua value, as with no axis; none: the elements themselves
      local all3 = a:sum({ axis = { 1, 2, 3 } })
      assert.equal(0, all3.ndim)   -- as a:sum({axis = 1}) of a 1-d array: an Array when an axis is given
      close(all3[1], a:sum(), 1e-12, "all axes")
      assert.are.same({ 2, 3, 4 }, a:sum({ axis = {} }).shape)
      local b = arr({ { 1, 0 }, { 1, 1 } }, "int32")
      assert.is_false(b:all({ axis = { 1, 2 } })[1])
      assert.is_true(b:any({ axis = { 2, 1 } })[1])
      assert.are.same({ 0, 1 }, b:prod({ axis = { 2 } }):totable())
      -- dtype=: NumPy accumulates in dtype (int8 wraps), and answers in it
      local i8 = arr({ 100, 100, 100 }, "int8")
      assert.equal(44, i8:sum({ dtype = "int8" }))           -- 300 wraps to 44
      assert.equal("int8", i8:sum({ dtype = "int8", axis = 1, keepdims = true }).dtype)
      assert.equal(300, i8:sum())
      assert.equal("float32", arr({ 1, 2 }, "int64"):mean({ dtype = "float32", axis = 1 }).dtype)
      assert.equal("float32", a:sum({ axis = { 1, 2 }, dtype = "float32" }).dtype)
      E(function() a:sum({ axis = { 1, 1 } }) end, "bad option 'axis' to 'sum' (axis 1 repeated)")
      E(function() a:sum({ axis = { 1, 4 } }) end,
        "bad option 'axis' to 'sum' (axis 4 is out of range for an array of 3 dimensions: 1..3, or -1..-3)")
      E(function() a:sum({ axis = { 1, 1.5 } }) end, "bad option 'axis' to 'sum' (axis 2 is number, not an integer)")
      E(function() a:sum({ dtype = "int5" }) end, "bad option 'dtype' to 'sum' (unknown dtype 'int5')")
      E(function() a:max({ dtype = "float32" }) end, "bad option 'dtype' to 'max' (unknown option)")
    end)

    it("nansum, nanmax, nanmin and nanmean leave NaN out", function()
      local a = arr({ { 1, NAN, 3 }, { NAN, NAN, NAN } })
      assert.equal(4, cd.nansum(a))
      assert.are.same({ 4, 0 }, cd.nansum(a, 2):totable())
      assert.equal(3, cd.nanmax(a))
      assert.equal(1, cd.nanmin(a))
      assert.equal(2, cd.nanmean(a))
      local m = flat(cd.nanmax(a, { axis = 2 }))
      assert.equal(3, m[1])
      assert(m[2] ~= m[2], "an all-NaN row is NaN")
      local mm = flat(cd.nanmean(a, { axis = 2 }))
      assert.equal(2, mm[1])
      assert(mm[2] ~= mm[2])
      local cols = flat(cd.nanmin(a, { axis = { 1 } }))
      assert.equal(1, cols[1])
      assert(cols[2] ~= cols[2])
      assert.equal(3, cols[3])
      assert.equal("float32", cd.nansum(arr({ 1, NAN }, "float32"), { axis = 1 }).dtype)
      assert.equal(3, cd.nansum(arr({ 1, NAN, 2 }, "float16")))
      -- integers have no NaN: the plain reductions
      local i = arr({ 3, 1, 2 }, "int32")
      assert.equal(6, cd.nansum(i))
      assert.equal(3, cd.nanmax(i))
      assert.equal(2, cd.nanmean(i))
      assert.equal(2, cd.nanmean(a:transpose(), { axis = { 1, 2 } })[1])
      E(function() cd.nanmax(arr({})) end, "nanmax: zero-size array to a reduction with no identity")
      E(function() cd.nanmin(cd.zeros({ 2, 0 }, "float32", D), 2) end, "nanmin: zero-size array to a reduction with no identity")
      assert.are.same({ 0 }, cd.nanmin(cd.zeros({ 2, 0 }, "float32", D), 1).shape)   -- nothing to reduce to
      E(function() cd.nansum(5) end, "bad argument #1 to 'nansum' (Array expected, got number)")
    end)
  end)

  describe("NumPy's functions on " .. dev .. ": elementwise", function()
    it("clip limits to [a_min, a_max], either side may be absent, Arrays broadcast, NaN stays", function()
      local a = arr({ -2, -0.5, 0.5, 2, NAN })
      local c = flat(cd.clip(a, -1, 1))
      assert.are.same({ -1, -0.5, 0.5, 1 }, { c[1], c[2], c[3], c[4] })
      assert(c[5] ~= c[5])
      assert.are.same({ -2, -0.5, 0.5, 1 }, { table.unpack(flat(cd.clip(a, nil, 1)), 1, 4) })
      assert.are.same({ 0, 0, 0.5, 2 }, { table.unpack(flat(cd.clip(a, 0)), 1, 4) })
      local m = arr({ { 1, 5, 9 }, { 2, 6, 10 } }, "int32")
      assert.are.same({ { 2, 5, 8 }, { 2, 6, 8 } }, cd.clip(m, 2, 8):totable())
      assert.equal("int32", cd.clip(m, 2, 8).dtype)
      assert.equal("float64", cd.clip(m, 2.5, 8).dtype)
      assert.are.same({ { 1, 5, 8 }, { 2, 5, 5 } }, cd.clip(m, arr({ 1, 2, 3 }, "int32"), arr({ { 8 }, { 5 } }, "int32")):totable())
      -- (row 2's limit is 5)
      assert.are.same({ { 2, 2 }, { 5, 6 }, { 8, 8 } }, cd.clip(m.T, 2, 8):totable())
      E(function() cd.clip(arr({ 1 }, "uint8"), -1, 2) end, "clip: Lua integer -1 is out of bounds for uint8")
      E(function() cd.clip(m) end, "bad argument #2 to 'clip' (a_min and a_max are both nil; give at least one)")
      E(function() cd.clip(m, "x", 1) end, "bad argument #2 to 'clip' (Array or number expected, got string)")
    end)

    it("logical_and, logical_or, logical_xor and logical_not give bool", function()
      local x, y = arr({ 0, 1, 2, 0 }, "int32"), arr({ 0, 0, 3, 5 })
      assert.are.same({ false, false, true, false }, cd.logical_and(x, y):totable())
      assert.are.same({ false, true, true, true }, cd.logical_or(x, y):totable())
      assert.are.same({ false, true, false, true }, cd.logical_xor(x, y):totable())
      assert.are.same({ true, false, false, true }, cd.logical_not(x):totable())
      assert.are.same({ false, true, true, false }, cd.logical_and(x, true):totable())
      assert.equal("bool", cd.logical_or(x, 0).dtype)
      E(function() cd.logical_and(1, 2) end, "logical_and: at least one operand must be an Array")
    end)

    it("isclose, allclose and array_equal as NumPy: tolerances, infinities, NaN", function()
      local a = arr({ 1, 1e10, math.huge, NAN, 0 })
      local b = arr({ 1 + 1e-9, 1.00001e10, math.huge, NAN, 1e-9 })
      assert.are.same({ true, true, true, false, true }, cd.isclose(a, b):totable())
      assert.are.same({ true, true, true, true, true }, cd.isclose(a, b, { equal_nan = true }):totable())
      assert.are.same({ false, false, true, false, false }, cd.isclose(a, b, { rtol = 0, atol = 0 }):totable())
      assert.are.same({ false }, cd.isclose(arr({ 1 }), arr({ math.huge })):totable())
      assert.are.same({ false, true }, cd.isclose(arr({ 1, 255 }, "uint8"), 255):totable())
      assert.are.same({ true, false }, cd.isclose(arr({ 1, 255 }, "uint8"), 1):totable())
      assert.are.same({ false }, cd.isclose(arr({ 255 }, "uint8"), -1):totable())   -- a number any value
      assert.is_false(cd.allclose(a, b))
      assert.is_true(cd.allclose(a, b, { equal_nan = true }))
      assert.is_true(cd.allclose(arr({ 1, 2 }), 1.0000001, { rtol = 1 }))
      assert.is_true(cd.array_equal(arr({ 1, 2 }), arr({ 1, 2 }, "int32")))
      assert.is_false(cd.array_equal(arr({ 1, 2 }), arr({ 1, 3 })))
      assert.is_false(cd.array_equal(arr({ 1, 2 }), arr({ { 1, 2 } })))
      assert.is_false(cd.array_equal(arr({ NAN }), arr({ NAN })))
      assert.is_true(cd.array_equal(arr({ NAN }), arr({ NAN }), { equal_nan = true }))
      assert.is_true(cd.array_equal(arr({}), arr({})))
      E(function() cd.isclose(a, b, { rtol = "x" }) end, "bad option 'rtol' to 'isclose' (number expected, got string)")
    end)

    it("round halves to even, with decimals, on floats and integers", function()
      assert.are.same({ 0, 2, 2, -0.0, -2, 4, 1 }, cd.round(arr({ 0.5, 1.5, 2.5, -0.5, -2.5, 3.5, 0.6 })):totable())
      all_close(flat(cd.round(arr({ 1.25, 2.675, -1.35 }), 1)), { 1.2, 2.7, -1.4 }, 1e-12, "decimals 1")
      assert.are.same({ 1200, 1300, -200 }, cd.round(arr({ 1250, 1251, -150 }), -2):totable())
      assert.are.same({ 20, 20, -20, 0, 30 }, cd.round(arr({ 15, 25, -15, 4, 26 }, "int32"), -1):totable())
      assert.equal("int32", cd.round(arr({ 15 }, "int32"), -1).dtype)
      assert.are.same({ 15, 25 }, cd.round(arr({ 15, 25 }, "int64"), 2):totable())
      assert.are.same({ 200, 200 }, cd.round(arr({ 150, 250 }, "uint8"), -2):totable())
      assert.are.same({ 2, 2 }, cd.round(arr({ 1.5, 2.5 }, "float32")):totable())
      assert.are.same({ 2, 2 }, cd.round(arr({ 1.5, 2.5 }, "float16")):totable())
      E(function() cd.round(arr({ 1 }), 0.5) end, "bad argument #2 to 'round' (integer decimals expected, got number)")
    end)

    it("fmod keeps the dividend's sign; copysign takes the sign of y", function()
      assert.are.same({ 1, -1, 1, -1 }, cd.fmod(arr({ 7, -7, 7, -7 }), arr({ 3, 3, -3, -3 })):totable())
      assert.are.same({ 1, -1, 1, -1 }, cd.fmod(arr({ 7, -7, 7, -7 }, "int32"), arr({ 3, 3, -3, -3 }, "int32")):totable())
      assert.are.same({ 0, 0 }, cd.fmod(arr({ 7, -7 }, "int32"), 0):totable())
      assert.are.same({ 1, 0 }, cd.fmod(arr({ 7, 9 }, "uint32"), 3):totable())
      assert.are.same({ 1.5, -0.5 }, cd.fmod(arr({ 5.5, -0.5 }, "float32"), 2):totable())
      assert.are.same({ -1, 2, -3 }, cd.copysign(arr({ 1, -2, 3 }), arr({ -1, 0, -0.0 })):totable())
      assert.equal("float64", cd.copysign(arr({ 1 }, "int32"), -1).dtype)
      assert.equal("float16", cd.copysign(arr({ 1 }, "int8"), arr({ 1 }, "int8")).dtype)
      assert.are.same({ -1 }, cd.copysign(arr({ 1 }, "float32"), -5):totable())
      -- a Lua integer out of uint8's range is converted to the float copysign computes in (NumPy 2, NEP 50)
      local c = cd.copysign(arr({ 1 }, "uint8"), -1)
      assert.equal("float16", c.dtype)
      assert.are.same({ -1 }, c:totable())
      E(function() cd.fmod(arr({ 1 }, "uint8"), -1) end, "fmod: Lua integer -1 is out of bounds for uint8")
    end)
  end)

  describe("NumPy's functions on " .. dev .. ": constructors", function()
    it("eye, identity, ones_like", function()
      assert.are.same({ { 1, 0, 0 }, { 0, 1, 0 } }, cd.eye(2, 3, D):totable())
      assert.are.same({ { 0, 1, 0 }, { 0, 0, 1 } }, cd.eye(2, 3, 1, D):totable())
      assert.are.same({ { 0, 0 }, { 1, 0 }, { 0, 1 } }, cd.eye(3, 2, -1, "int32", D):totable())
      assert.equal("float32", cd.eye(2, D).dtype)
      assert.equal(dev, cd.eye(2, D).device.alias)
      assert.are.same({ { true, false }, { false, true } }, cd.identity(2, "bool", D):totable())
      assert.are.same({ 0, 4 }, cd.eye(0, 4, D).shape)
      assert.are.same({ { 1, 0 }, { 0, 1 } }, cd.eye(2, "float16", D):totable())
      local a = arr({ { 1, 2 } }, "int16")
      local o = cd.ones_like(a)
      assert.are.same({ { 1, 1 } }, o:totable())
      assert.equal("int16", o.dtype)
      assert.equal("float32", cd.ones_like(a, "float32").dtype)
      E(function() cd.eye(-1) end, "bad argument #1 to 'eye' (non-negative integer row count expected, got -1)")
      E(function() cd.eye(2, 2, 0, "int5") end, "bad argument #4 to 'eye' (dtype name expected, got 'int5')")
      E(function() cd.ones_like({}) end, "bad argument #1 to 'ones_like' (Array expected, got table)")
    end)

    it("eye and identity name the position of the argument that is wrong (the fuzzer found #4 past the arguments)", function()
      E(function() cd.identity(3, 7) end, "bad argument #2 to 'identity' (dtype name expected, got number)")
      E(function() cd.identity(3, "float32", 5) end, "bad argument #3 to 'identity' (options table expected, got number)")
      E(function() cd.identity(3, nil, 5) end, "bad argument #3 to 'identity' (options table expected, got number)")
      E(function() cd.eye(3, true) end, "bad argument #2 to 'eye' (dtype name expected, got boolean)")
      E(function() cd.eye(3, "float32", 5) end, "bad argument #3 to 'eye' (options table expected, got number)")
      E(function() cd.eye(3, 2, "int5") end, "bad argument #3 to 'eye' (dtype name expected, got 'int5')")
      E(function() cd.eye(3, 2, "int8", 5) end, "bad argument #4 to 'eye' (options table expected, got number)")
      E(function() cd.eye(3, nil, 0, "float32", 5) end, "bad argument #5 to 'eye' (options table expected, got number)")
      -- m and k may be nil (NumPy's None): the dtype after them is still the dtype
      assert.are.same({ { 0, 1, 0 }, { 0, 0, 1 }, { 0, 0, 0 } }, cd.eye(3, nil, 1, "int32", D):totable())
      assert.equal("int8", cd.eye(2, nil, nil, "int8", D).dtype)
    end)

    it("diag builds from a vector and reads a diagonal of a matrix (views included)", function()
      assert.are.same({ { 1, 0 }, { 0, 2 } }, cd.diag(arr({ 1, 2 })):totable())
      assert.are.same({ { 0, 1, 0 }, { 0, 0, 2 }, { 0, 0, 0 } }, cd.diag(arr({ 1, 2 }), 1):totable())
      assert.are.same({ { 0, 0, 0 }, { 1, 0, 0 }, { 0, 2, 0 } }, cd.diag(arr({ 1, 2 }), -1):totable())
      local m = arr({ { 1, 2, 3 }, { 4, 5, 6 } })
      assert.are.same({ 1, 5 }, cd.diag(m):totable())
      assert.are.same({ 2, 6 }, cd.diag(m, 1):totable())
      assert.are.same({ 4 }, cd.diag(m, -1):totable())
      assert.are.same({ 0 }, cd.diag(m, 3).shape)
      assert.are.same({ 1, 5 }, cd.diag(m.T):totable())
      assert.are.same({ 4 }, cd.diag(m.T, 1):totable())
      assert.are.same({ 3, 5 }, cd.diag(m:slice(nil, nil, -1, 2)):totable())
      E(function() cd.diag(cd.zeros({ 2, 2, 2 }, "float32", D)) end, "bad argument #1 to 'diag' (1-d or 2-d Array expected, got 3-d)")
    end)

    it("triu and tril keep one side of diagonal k of the last two dimensions", function()
      local m = arr({ { 1, 2, 3 }, { 4, 5, 6 }, { 7, 8, 9 } }, "int32")
      assert.are.same({ { 1, 2, 3 }, { 0, 5, 6 }, { 0, 0, 9 } }, cd.triu(m):totable())
      assert.are.same({ { 0, 2, 3 }, { 0, 0, 6 }, { 0, 0, 0 } }, cd.triu(m, 1):totable())
      assert.are.same({ { 1, 0, 0 }, { 4, 5, 0 }, { 7, 8, 9 } }, cd.tril(m):totable())
      assert.are.same({ { 1, 2, 0 }, { 4, 5, 6 }, { 7, 8, 9 } }, cd.tril(m, 1):totable())
      assert.are.same({ { 0, 0, 0 }, { 4, 0, 0 }, { 7, 8, 0 } }, cd.tril(m, -1):totable())
      assert.are.same({ { 1, 4, 7 }, { 0, 5, 8 }, { 0, 0, 9 } }, cd.triu(m.T):totable())
      local s = cd.triu(arr({ 1, 2, 3, 4, 5, 6, 7, 8 }):reshape({ 2, 2, 2 }))
      assert.are.same({ { { 1, 2 }, { 0, 4 } }, { { 5, 6 }, { 0, 8 } } }, s:totable())
      assert.are.same({ { 1, 0 }, { 1, 1 } }, cd.tril(cd.ones({ 2, 2 }, "float16", D)):totable())
      E(function() cd.triu(cd.zeros({}, "float32", D)) end, "bad argument #1 to 'triu' (Array of 1 or more dimensions expected, got 0-d)")
    end)

    it("outer multiplies every pair", function()
      local o = cd.outer(arr({ 1, 2 }, "int32"), arr({ { 1, 2 }, { 3, 4 } }, "int32"))
      assert.are.same({ { 1, 2, 3, 4 }, { 2, 4, 6, 8 } }, o:totable())
      assert.equal("int32", o.dtype)
      assert.are.same({ { 3 }, { 6 } }, cd.outer(arr({ 1, 2 }), arr({ 3 })):totable())
    end)
  end)

  describe("NumPy's functions on " .. dev .. ": views", function()
    it("flip, squeeze, expand_dims and swapaxes are views of the same memory", function()
      local a = arr({ { 1, 2, 3 }, { 4, 5, 6 } })
      assert.are.same({ { 6, 5, 4 }, { 3, 2, 1 } }, cd.flip(a):totable())
      assert.are.same({ { 4, 5, 6 }, { 1, 2, 3 } }, cd.flip(a, 1):totable())
      assert.are.same({ { 3, 2, 1 }, { 6, 5, 4 } }, cd.flip(a, { -1 }):totable())
      local f = cd.flip(a, 2)
      f[1][1] = 30
      assert.equal(30, a[1][3])
      local b = a:reshape({ 1, 2, 1, 3 })
      assert.are.same({ 2, 3 }, b:squeeze().shape)
      assert.are.same({ 2, 1, 3 }, b:squeeze(1).shape)
      assert.are.same({ 2, 3 }, b:squeeze({ 1, 3 }).shape)
      assert.are.same({ 3, 2 }, a.T:reshape({ 3, 2 }):squeeze().shape)
      assert.are.same({}, arr({ 7 }):squeeze().shape)
      local e = cd.expand_dims(a, 1)
      assert.are.same({ 1, 2, 3 }, e.shape)
      assert.are.same({ 2, 3, 1 }, cd.expand_dims(a, -1).shape)
      assert.are.same({ 1, 2, 1, 3 }, cd.expand_dims(a, { 1, 3 }).shape)
      assert.are.same({ { { 1 }, { 2 }, { 30 } }, { { 4 }, { 5 }, { 6 } } }, cd.expand_dims(a, 3):totable())
      assert.are.same({ { 1, 4 }, { 2, 5 }, { 30, 6 } }, cd.expand_dims(a.T, 1):squeeze():totable())
      local s = cd.swapaxes(cd.zeros({ 2, 3, 4 }, "float32", D), 1, -1)
      assert.are.same({ 4, 3, 2 }, s.shape)
      assert.are.same({ { 1, 4 }, { 2, 5 }, { 30, 6 } }, cd.swapaxes(a, 1, 2):totable())
      E(function() b:squeeze(2) end, "bad argument #2 to 'squeeze' (axis 2 has 2 elements; only axes of one element can be squeezed)")
      E(function() cd.expand_dims(a, 4) end,
        "bad option 'axis' to 'expand_dims' (axis 4 is out of range for an array of 3 dimensions: 1..3, or -1..-3)")
      E(function() cd.swapaxes(a, 1, 3) end, "bad argument #3 to 'swapaxes' (axis 3 out of range 1..2)")
      E(function() cd.flip(a, 3) end, "bad option 'axis' to 'flip' (axis 3 is out of range for an array of 2 dimensions: 1..2, or -1..-2)")
    end)

    it("ravel is a view when it can be, flatten always a copy; reshape copies a view", function()
      local a = arr({ { 1, 2 }, { 3, 4 } })
      local r = a:ravel()
      r[1] = 10
      assert.equal(10, a[1][1])
      local f = a:flatten()
      f[2] = 20
      assert.equal(2, a[1][2])
      assert.are.same({ 10, 3, 2, 4 }, a.T:ravel():totable())
      assert.are.same({ 10, 3, 2, 4 }, a.T:flatten():totable())
      assert.are.same({ 1 }, arr({ 5 }):reshape({}):ravel().shape)
    end)

    it("broadcast_to repeats dimensions of one element with stride 0", function()
      local v = arr({ 1, 2, 3 })
      local b = cd.broadcast_to(v, { 2, 3 })
      assert.are.same({ { 1, 2, 3 }, { 1, 2, 3 } }, b:totable())
      assert.are.same({ 0, 1 }, b.strides)
      assert.is_false(b.is_contiguous)
      assert.are.same({ 2, 4, 6 }, (b + b)[2]:totable())
      assert.are.same({ 2, 4, 6 }, b:sum(1):totable())
      local c = cd.broadcast_to(arr({ { 1 }, { 2 } }).T, { 3, 1, 2 })
      assert.are.same({ { { 1, 2 } }, { { 1, 2 } }, { { 1, 2 } } }, c:totable())
      assert.are.same({ { 7, 7 } }, cd.broadcast_to(arr({ 7 }), { 1, 2 }):totable())
      assert.are.same({ 0, 3 }, cd.broadcast_to(v, { 0, 3 }).shape)
      assert.are.same({ 1, 2, 3 }, cd.broadcast_to(v, 3):contiguous():totable())
      E(function() cd.broadcast_to(v, { 2, 4 }) end, "broadcast_to: an array of shape {3} cannot be broadcast to {2, 4}")
      E(function() cd.broadcast_to(arr({ { 1, 2 } }), { 2 }) end, "broadcast_to: an array of shape {1, 2} cannot be broadcast to {2}")
      E(function() cd.broadcast_to(v, { -1 }) end, "bad argument #2 to 'broadcast_to' (dimension 1 is not a non-negative integer)")
      -- a shape whose bytes are no Lua integer (found by the fuzzer: its nbytes came out -4)
      E(function() cd.broadcast_to(arr({ 1 }), math.maxinteger) end,
        "bad argument #2 to 'broadcast_to' (shape {9223372036854775807} has more than 2^63 - 1 bytes of float64)")
      E(function() cd.broadcast_to(arr({ 1 }), { 1 << 31, 1 << 31 }) end,
        "bad argument #2 to 'broadcast_to' (shape {2147483648, 2147483648} has more than 2^63 - 1 bytes of float64)")
      assert.are.same({ 0, math.maxinteger }, cd.broadcast_to(arr({ 1 }), { 0, math.maxinteger }).shape)
      -- the view never reaches past its base's elements
      E(function() getmetatable(v).__as_strided(v, { 4 }, { 1 }) end,
        "bad argument #2 to '__as_strided' (the view reaches past the array's elements)")
    end)
  end)

  describe("NumPy's functions on " .. dev .. ": dot and vdot", function()
    it("dot of vectors is a number, of matrices matmul; vdot flattens", function()
      assert.equal(32, cd.dot(arr({ 1, 2, 3 }), arr({ 4, 5, 6 })))
      assert.equal(32, cd.dot(arr({ 1, 2, 3 }, "int32"), arr({ 4, 5, 6 }, "int32")))
      assert.are.same({ { 19, 22 }, { 43, 50 } }, cd.dot(arr({ { 1, 2 }, { 3, 4 } }), arr({ { 5, 6 }, { 7, 8 } })):totable())
      assert.are.same({ 5, 11 }, cd.dot(arr({ { 1, 2 }, { 3, 4 } }), arr({ 1, 2 })):totable())
      assert.are.same({ 2, 4 }, cd.dot(arr({ 1, 2 }), 2):totable())
      assert.equal(30, cd.vdot(arr({ { 1, 2 }, { 3, 4 } }), arr({ 1, 2, 3, 4 })))
      assert.equal(1 * 1 + 3 * 2 + 2 * 3 + 4 * 4, cd.vdot(arr({ { 1, 2 }, { 3, 4 } }).T, arr({ 1, 2, 3, 4 })))
      assert.equal(7.0, cd.dot(2, 3.5))
      assert.are.same({ 1, 2 }, cd.dot(true, arr({ 1, 2 })):totable())
      -- a boolean with no Array: a bad argument, not Lua's 'attempt to perform arithmetic' (found by the fuzzer)
      E(function() cd.dot(true, 31) end,
        "bad argument #1 to 'dot' (Array or number expected, got boolean (a boolean needs an Array operand))")
      E(function() cd.dot(2, false) end,
        "bad argument #2 to 'dot' (Array or number expected, got boolean (a boolean needs an Array operand))")
      E(function() cd.dot(arr({ 1, 2 }), arr({ 1, 2, 3 })) end, "dot: shapes {2} and {3} do not match")
      E(function() cd.vdot(arr({ 1, 2 }), arr({ 1, 2, 3 })) end, "vdot: a has 2 elements but b has 3")
      E(function() cd.dot(cd.zeros({ 2, 2, 2 }, "float32", D), cd.zeros({ 2, 2 }, "float32", D)) end,
        "dot: a is 3-d and b 2-d; for stacks of matrices use cd.matmul (NumPy's dot of those differs)")
    end)
  end)
end)

describe("NumPy's statistics on a CUDA device", function()
  helper.gpu_it("var, std and the nan reductions of 2^20 float32 agree with the cpu device", function()
    cd.random.seed(9)
    local a = cd.random.normal({ 1024, 1024 }, { device = "cuda:0" }) + 100
    local h = a:to("cpu")
    close(a:std(), h:std(), 1e-6, "std")
    all_close(flat(a:var({ axis = 1 }):to("cpu")), flat(h:var({ axis = 1 })), 1e-5, "var axis 1")
    all_close(flat(a:sum({ axis = { 1, 2 }, keepdims = true }):to("cpu")), flat(h:sum({ axis = { 1, 2 }, keepdims = true })), 1e-5, "sum")
    close(cd.nanmean(a), h:mean(), 1e-6, "nanmean")
  end)
end)

describe("NumPy's functions' generated kernels", function()
  -- every kernel source these functions generate on the cpu device is compiled by NVRTC for sm_90, so a construct
  -- only the host compiler takes (or a __half conversion only it allows) is caught without a GPU
  helper.nvrtc_it("compile with NVRTC for a GPU, in every dtype", function()
    local sources, compile = {}, cd.compile
    cd.clear_kernel_cache()
    cd.compile = function(src, opts)
      sources[#sources + 1] = src
      return compile(src, opts)
    end
    local ok, err = pcall(function()
      for _, dt in ipairs({ "float16", "float32", "float64", "int32", "uint64", "bool" }) do
        local a = cd.ones({ 2, 3 }, dt, { device = "cpu" })
        a:var(); a:std({ axis = { 1, 2 }, ddof = 1 }); a:sum({ axis = { 1, 2 }, dtype = "float32" })
        cd.nansum(a, 1); cd.nanmax(a, 1); cd.nanmin(a); cd.nanmean(a, 2)
        cd.clip(a, 0, 1); cd.clip(a, nil, a); cd.logical_and(a, 1); cd.logical_xor(a, a)
        cd.isclose(a, 1, { equal_nan = true }); cd.round(a)
        if dt ~= "bool" then cd.fmod(a, 2); cd.round(a, 2); cd.round(a, -1); cd.round(a, -20) end
        cd.copysign(a, -1.5); cd.eye(3, 2, 1, dt); cd.diag(a[1]); cd.triu(a, 1); cd.tril(a, -1)
        cd.copysign(a, math.mininteger); cd.logical_or(a, math.maxinteger); cd.triu(a[1]); cd.vdot(a, a)
      end
    end)
    cd.compile = compile
    assert(ok, err)
    assert(#sources > 50, "only " .. #sources .. " kernels")
    for i, src in ipairs(sources) do
      local ok2, e = pcall(compile, src, { arch = "sm_90" })
      assert(ok2, ("kernel %d does not compile with NVRTC: %s\n%s"):format(i, tostring(e), src))
    end
  end)
end)
