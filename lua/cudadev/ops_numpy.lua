-- NumPy's other everyday functions by NumPy's names (issue 28): statistics (var, std, the nan reductions),
-- reductions over several axes at once and with dtype=, constructors (eye, identity, ones_like, diag, triu,
-- tril, outer), views (flip, squeeze, expand_dims, ravel, flatten, broadcast_to, swapaxes), logical and
-- closeness tests, round, fmod, copysign, dot and vdot. Everything is built on ops.lua's generated kernels
-- (NOTE [generated kernels]): its elementwise runner and its reduction (NOTE [reduction passes]), so the same
-- code runs on the cpu device and on GPUs. Built into the library; run once by luaopen_cudadev after ops.lua
-- (the embedded files run in name order) with the module table, the Array metatable and the parts' internals.
--
-- Positions the user sees are 1-based as everywhere in cudadev (axes, negative from the end); offsets that are
-- not positions keep NumPy's meaning (the diagonal offset k of eye, diag, triu and tril: 0 the main diagonal,
-- 1 the one above it).
local cd, array_mt, internal = ...
local methods = array_mt.methods

local fmt, concat = string.format, table.concat
local DT, raise, argerror, typename = internal.DT, internal.raise, internal.argerror, internal.typename
local check_opts, dtype_of_name, prod = internal.check_opts, internal.dtype_of_name, internal.shape_size
local run_elementwise, run_reduction, result_type = internal.run_elementwise, internal.run_reduction, internal.result_type
local as_strided = array_mt.__as_strided

local function is_array(v) return cd.type(v) == "Array" end

local function check_array(v, fname, n)
  if not is_array(v) then argerror(fname, n, "Array expected, got " .. typename(v), 1) end
  return v
end

local function check_operand(v, fname, n)
  if not is_array(v) and type(v) ~= "number" and type(v) ~= "boolean" then
    argerror(fname, n, "Array or number expected, got " .. typename(v), 1)
  end
end

local function shape_text(s) return "{" .. concat(s, ", ") .. "}" end

-- The converted value of an element of dtype d in double (float16 goes through float, its only conversion).
local function to_double(d, x) return d == "float16" and fmt("(double)(float)%s", x) or fmt("(double)%s", x) end
-- A double expression stored as dtype d.
local function from_double(d, e) return d == "float16" and fmt("(__half)(float)(%s)", e) or fmt("(%s)(%s)", DT[d].ctype, e) end

-- A float result dtype for d (NumPy's: floats stay, bool and 8-bit integers give float16, 16-bit float32, others
-- float64), and of two operands' dtypes (the smallest float both of theirs convert to), as ops.lua's math
-- functions and arctan2 have them.
local float_result, float_pair = internal.float_result, internal.float_pair

-- ------------------------------------------------------------------------------------------ axes
-- Runs the reduction r ({out=, rtype=, map=, reduce=, post=, identity=, preamble=, empty_error=}, ops.lua's
-- description) of a with the options o (axis an integer or nil); extra: more inputs (raw ones). With no axis,
-- out or keepdims the answer is a Lua value, as ops.lua's reductions give.
local function reduce(a, o, fname, r, extra)
  if r.empty_error and a.size == 0 then
    -- only a reduced axis of no elements has no answer ({2, 0} along axis 1 is an empty result)
    local ax = o.axis ~= nil and math.type(o.axis) == "integer" and (o.axis < 0 and a.ndim + 1 + o.axis or o.axis)
    if not ax or a.shape[ax] == 0 then raise(fmt("%s: zero-size array to a reduction with no identity", fname)) end
  end
  local ins = { { name = "x", dtype = a.dtype, value = a } }
  for _, p in ipairs(extra or {}) do ins[#ins + 1] = p end
  local res = run_reduction({ fname = fname, name = "cdv_" .. fname, ins = ins, out = { name = "y", dtype = r.out, value = o.out },
    rtype = r.rtype, map_expr = r.map, reduce_expr = r.reduce, post_map = r.post, identity = r.identity,
    preamble = r.preamble, axis = o.axis, keepdims = o.keepdims, stream = o.stream })
  if o.axis == nil and o.out == nil and not o.keepdims then return res[1] end
  return res
end

-- An axis option (an integer or a list of them, 1-based, negative from the end) as a sorted list of distinct
-- axes of an array of nd dimensions.
local function axis_list(axis, nd, fname)
  if math.type(axis) == "integer" then axis = { axis } end
  if type(axis) ~= "table" or is_array(axis) then
    raise(fmt("bad option 'axis' to '%s' (integer or list of integers expected, got %s)", fname, typename(axis)))
  end
  local out, seen = {}, {}
  for i = 1, #axis do
    local v = axis[i]
    if math.type(v) ~= "integer" then
      raise(fmt("bad option 'axis' to '%s' (axis %d is %s, not an integer)", fname, i, typename(v)))
    end
    local ax = v < 0 and nd + 1 + v or v
    if ax < 1 or ax > nd then
      raise(fmt("bad option 'axis' to '%s' (axis %d is out of range for an array of %d dimensions: 1..%d, or -1..-%d)",
        fname, v, nd, nd, nd))
    end
    if seen[ax] then raise(fmt("bad option 'axis' to '%s' (axis %d repeated)", fname, v)) end
    seen[ax] = true
    out[#out + 1] = ax
  end
  table.sort(out)
  return out, seen
end

-- The axes of `axis` as axis_list gives them, or when it is nil those i of 1..nd where pick(i) is true.
local function axes_or(axis, nd, fname, pick)
  if axis ~= nil then return axis_list(axis, nd, fname) end
  local axes, set = {}, {}
  for i = 1, nd do
    if pick(i) then axes[#axes + 1] = i; set[i] = true end
  end
  return axes, set
end

-- The shape a reduction over the axes in `red` (a set) leaves, with ones there when keepdims.
local function reduced_shape(shape, red, keepdims)
  local s = {}
  for i, d in ipairs(shape) do
    if not red[i] then s[#s + 1] = d elseif keepdims then s[#s + 1] = 1 end
  end
  return s
end

-- NOTE [several axes]: a reduction over a list of axes runs as one reduction along one axis. Neighbouring axes of
-- a contiguous array ({2, 3} of a 4-d one) are one axis of a {before, reduced, after} view; otherwise a's kept
-- axes are moved first and the reduced ones last (a transposed view), which reshape turns into a copy of
-- {kept elements, reduced elements}, reduced along axis 2. The result gets the kept axes' shape. run(x, opts) is the
-- one-axis reduction (ops.lua's). As there, a given axis answers an Array (0-d when every axis is reduced).
local function over_axes(a, o, fname, run)
  local axes, red = axis_list(o.axis, a.ndim, fname)
  local x, axis
  local first, last = axes[1], axes[#axes]
  if first and last - first + 1 == #axes and a.is_contiguous then
    -- one run of neighbouring axes of a contiguous array: {before, run, after} is a view, reduced along 2
    local n = { 1, 1, 1 }
    for i, d in ipairs(a.shape) do
      local k = i < first and 1 or i > last and 3 or 2
      n[k] = n[k] * d
    end
    x, axis = a:reshape(n), 2
  else
    local kept, perm = {}, {}
    for i = 1, a.ndim do if not red[i] then kept[#kept + 1] = a.shape[i]; perm[#perm + 1] = i end end
    for _, ax in ipairs(axes) do perm[#perm + 1] = ax end
    local nr = 1
    for _, ax in ipairs(axes) do nr = nr * a.shape[ax] end
    x, axis = (a.ndim > 0 and a:transpose(perm) or a):reshape({ prod(kept), nr }), 2
  end
  local r = run(x, { axis = axis, out = o.out, stream = o.stream, ddof = o.ddof })
  if o.out ~= nil then return r end
  return r:reshape(reduced_shape(a.shape, red, o.keepdims))
end

-- The options of a reduction: an axis or a table of known options (ops.lua's reduce_opts, with more names).
local function reduce_opts(v, fname, known)
  if v == nil then return {} end
  if math.type(v) == "integer" then return { axis = v } end
  if type(v) ~= "table" or is_array(v) then
    argerror(fname, 2, "axis (integer or list) or options table expected, got " .. typename(v), 1)
  end
  return check_opts(v, known, fname, 2)
end

-- dtype=: a is converted first and the answer converted to dtype (NumPy accumulates in dtype; for integers the
-- answer of a wider sum converted is the same wrapped value, for floats the conversion comes first).
local function with_dtype(a, o, fname, run)
  local d = dtype_of_name(o.dtype)
  if not d then raise(fmt("bad option 'dtype' to '%s' (unknown dtype '%s')", fname, tostring(o.dtype))) end
  if a.dtype ~= d then a = a:astype(d) end
  local all = o.axis == nil
  local inner = { axis = o.axis, keepdims = true, stream = o.stream, ddof = o.ddof }
  local r = run(a, inner)
  if r.dtype ~= d then r = r:astype(d) end
  local red = all and setmetatable({}, { __index = function() return true end }) or select(2, axis_list(o.axis, a.ndim, fname))
  if o.out ~= nil then
    if o.out.dtype ~= d then raise(fmt("%s: output is %s but the result is %s", fname, o.out.dtype, d)) end
    if o.out.size ~= r.size then raise(fmt("%s: output has %d elements but the result has %d", fname, o.out.size, r.size)) end
    return o.out:copy_from(r)
  end
  if o.keepdims then return r end
  if all then return r:reshape({ 1 })[1] end
  return r:reshape(reduced_shape(a.shape, red, false))
end

-- A reduction method that takes a list of axes (NOTE [several axes]) and, where takes_dtype, dtype=; one axis,
-- and no dtype, go straight to run (ops.lua's fast paths stay first).
local function multi_axis(fname, run, takes_dtype, extra)
  return function(a, v)
    if type(v) ~= "table" or (v.dtype == nil and (v.axis == nil or math.type(v.axis) == "integer")) then
      return run(a, v)
    end
    check_array(a, fname, 1)
    local known = { axis = true, keepdims = true, out = true, stream = true, dtype = takes_dtype or nil }
    for k in pairs(extra or {}) do known[k] = true end
    local o = reduce_opts(v, fname, known)
    if o.dtype ~= nil then
      return with_dtype(a, o, fname, function(x, oo)
        local r = (oo.axis == nil or math.type(oo.axis) == "integer") and run(x, oo) or over_axes(x, oo, fname, run)
        return r
      end)
    end
    return over_axes(a, o, fname, run)
  end
end

for _, n in ipairs({ "sum", "prod", "mean", "min", "max", "all", "any" }) do
  local takes = n == "sum" or n == "prod" or n == "mean"
  local old = methods[n]
  local f = multi_axis(n, old, takes)
  methods[n] = f
  if cd[n] == old then cd[n] = f end
end
cd.amax, cd.amin = methods.max, methods.min

-- ------------------------------------------------------------------------------------------ var, std
-- NOTE [one-pass variance]: var is one pass over the data: each element's difference from a shift (the first
-- element of its slice, read through a raw pointer) and that difference squared are summed in float64, and
-- var = (q - s^2 / n) / (n - ddof). The shift keeps the sums small where the data's mean is far from 0 (the
-- cancellation of the textbook sum of squares); NumPy and CuPy read the data twice (mean, then squares), which
-- is the memory traffic that bounds this on a GPU.
local VAR_PRE = [[
struct _cdv_sq { double s, q; };
__device__ __forceinline__ _cdv_sq _cdv_sq_of(double v, double c) { double d = v - c; return _cdv_sq{d, d * d}; }
]]

local function var_like(fname, root)
  local known = { axis = true, keepdims = true, out = true, stream = true, ddof = true, dtype = true }
  local function run(a, o)
    local d = a.dtype
    local out = float_result(d) == d and d or "float64"
    local ddof = o.ddof or 0
    if type(ddof) ~= "number" then raise(fmt("bad option 'ddof' to '%s' (number expected, got %s)", fname, typename(ddof))) end
    local x = a:contiguous({ stream = o.stream })
    -- squares past double's range, of finite differences (s finite): inf, as NumPy's two passes give (q - s^2 / n
    -- would be inf - inf, NaN); an infinite element (s infinite) gives NaN, as NumPy's inf - inf does
    local v = "(a.q > 1.7976931348623157e308 && a.s - a.s == 0) ? a.q : "
      .. "(a.q - a.s * a.s / _n) < 0 ? 0.0 : (a.q - a.s * a.s / _n)"
    local post = fmt("double _n = (double)_K, _d = _n - (%.17g); if (_d < 0) _d = 0; y = %s", ddof,
      from_double(out, (root and "sqrt" or "") .. "((" .. v .. ") / _d)"))
    local r = { out = out, rtype = { ctype = "_cdv_sq", size = 16 }, preamble = VAR_PRE,
      map = fmt("_cdv_sq_of(%s, %s)", to_double(d, "x"), to_double(d, "x0[(_outer * _K) * _inner + _io]")),
      reduce = "_cdv_sq{a.s + b.s, a.q + b.q}", post = post, identity = "_cdv_sq{0.0, 0.0}" }
    return (reduce(x, o, fname, r, { { name = "x0", dtype = d, value = x, raw = true } }))
  end
  local f = multi_axis(fname, function(a, v)
    check_array(a, fname, 1)
    return run(a, reduce_opts(v, fname, known))
  end, true, { ddof = true })
  return function(a, v) return f(a, v) end
end
methods.var = var_like("var", false)
methods.std = var_like("std", true)
cd.var, cd.std = methods.var, methods.std

-- ------------------------------------------------------------------------------------------ nan reductions
-- NaN elements left out: nansum counts them as 0, nanmax/nanmin skip them (an all-NaN slice gives NaN, as NumPy,
-- without its warning), nanmean divides by the count of the others. Integer arrays have no NaN: sum, max and min;
-- nanmean is their mean in float64, but NaN for no elements, as NumPy's (mean raises there: doc/compute.md).
local NAN = [[
__device__ __forceinline__ double _cdv_nan() { union { unsigned long long u; double d; } v; v.u = 0x7ff8000000000000ull; return v.d; }
struct _cdv_sn { double s; long long n; };
]]

local function nan_reduction(fname, plain, make)
  local known = { axis = true, keepdims = true, out = true, stream = true, dtype = true }
  return multi_axis(fname, function(a, v)
    check_array(a, fname, 1)
    if DT[a.dtype].kind ~= "f" and fname ~= "nanmean" then return plain(a, v) end
    local o = reduce_opts(v, fname, known)
    return (reduce(a, o, fname, make(a.dtype)))
  end, fname == "nansum" or fname == "nanmean")
end

cd.nansum = nan_reduction("nansum", methods.sum, function(d)
  local acc = d == "float16" and "float32" or d
  return { out = d, rtype = { ctype = DT[acc].ctype, dtype = acc }, map = fmt("x != x ? (%s)0 : (%s)x", DT[acc].ctype, DT[acc].ctype),
    reduce = "a + b", post = fmt("y = (%s)a", DT[d].ctype), identity = "0" }
end)

local function nan_minmax(fname, plain, high)
  return nan_reduction(fname, plain, function(d)
    local C, cmp = DT[d].calc, high and ">" or "<"
    return { out = d, rtype = { ctype = C, dtype = dtype_of_name(C) }, empty_error = true, map = fmt("(%s)x", C),
      reduce = fmt("(a != a) ? b : (b != b) ? a : (a %s b ? a : b)", cmp), post = fmt("y = (%s)a", DT[d].ctype),
      identity = "_cdv_nan()", preamble = NAN }
  end)
end
cd.nanmax = nan_minmax("nanmax", methods.max, true)
cd.nanmin = nan_minmax("nanmin", methods.min, false)

cd.nanmean = nan_reduction("nanmean", methods.mean, function(d)
  local out = DT[d].kind == "f" and d or "float64"
  return { out = out, rtype = { ctype = "_cdv_sn", size = 16 }, preamble = NAN,
    map = fmt("x != x ? _cdv_sn{0.0, 0} : _cdv_sn{%s, 1}", to_double(d, "x")),
    reduce = "_cdv_sn{a.s + b.s, a.n + b.n}", post = "y = " .. from_double(out, "a.n ? a.s / (double)a.n : _cdv_nan()"),
    identity = "_cdv_sn{0.0, 0}" }
end)

-- ------------------------------------------------------------------------------------------ elementwise helpers
-- Runs body over the broadcast inputs (name = value pairs, in order) into one output of dtype odt.
local function ew(fname, key, ins, odt, body, opts, preamble)
  local spec = {}
  for i, p in ipairs(ins) do
    local v = p[2]
    spec[i] = { name = p[1], dtype = is_array(v) and v.dtype or p[3], value = v, raw = p.raw }
  end
  return run_elementwise({ fname = fname, name = "cdv_" .. fname, key = fname .. ":" .. key, ins = spec,
    outs = { { name = "z", dtype = odt, value = opts and opts.out } }, body = body, stream = opts and opts.stream,
    preamble = preamble })[1]
end

local function ew_opts(opts, fname, n) return check_opts(opts, { out = true, stream = true }, fname, n) end

-- The checks of a function of two operands (Arrays or numbers, one an Array at least): its {out=, stream=}
-- options and the operands' result dtype. A Lua integer out of that dtype's range is refused, as NumPy 2 (NEP 50)
-- refuses it, unless the function converts it (any_int): NumPy 2 takes it where the function computes in a float
-- or in bool.
local function two_operands(x, y, opts, fname, any_int)
  check_operand(x, fname, 1)
  check_operand(y, fname, 2)
  if not is_array(x) and not is_array(y) then raise(fname .. ": at least one operand must be an Array") end
  local r = result_type({ x, y })
  for _, v in ipairs({ x, y }) do
    if type(v) == "number" and not any_int then internal.check_scalar_fits(v, r, fname) end
  end
  return ew_opts(opts, fname, 3), r
end

-- The dtype a scalar operand is passed as (the result's, or the default of its kind).
local function scalar_dtype(v, r)
  if is_array(v) then return v.dtype end
  return r
end

-- ------------------------------------------------------------------------------------------ clip
-- cd.clip(a, a_min, a_max [, {out=, stream=}]): a's elements limited to [a_min, a_max] (either may be nil, not
-- both; Arrays broadcast with a); NaN stays NaN. The dtype is NumPy's result type of the three.
function cd.clip(a, lo, hi, opts)
  check_array(a, "clip", 1)
  if lo ~= nil then check_operand(lo, "clip", 2) end
  if hi ~= nil then check_operand(hi, "clip", 3) end
  if lo == nil and hi == nil then argerror("clip", 2, "a_min and a_max are both nil; give at least one") end
  local o = ew_opts(opts, "clip", 4)
  local r = result_type({ a, lo, hi })
  for _, v in ipairs({ lo, hi }) do
    if type(v) == "number" then internal.check_scalar_fits(v, r, "clip") end
  end
  local C = DT[r].calc
  local ins, parts = { { "x_", a } }, { fmt("%s z_ = (%s)x_;", C, C) }
  if lo ~= nil then
    ins[#ins + 1] = { "lo_", lo, scalar_dtype(lo, r) }
    parts[#parts + 1] = fmt("if (z_ < (%s)lo_) z_ = (%s)lo_;", C, C)
  end
  if hi ~= nil then
    ins[#ins + 1] = { "hi_", hi, scalar_dtype(hi, r) }
    parts[#parts + 1] = fmt("if (z_ > (%s)hi_) z_ = (%s)hi_;", C, C)
  end
  local odt = o.out and o.out.dtype or r
  parts[#parts + 1] = fmt("z = (%s)z_;", DT[odt].ctype)
  return ew("clip", r .. (lo ~= nil and "l" or "") .. (hi ~= nil and "h" or ""), ins, odt, "{ " .. concat(parts, " ") .. " }", o)
end

-- ------------------------------------------------------------------------------------------ logical functions
-- cd.logical_and(x, y [, {out=, stream=}]) and or, xor: the truth of x and y (nonzero) combined, as bool. A Lua
-- number is passed as its truth (NumPy converts any Python integer to the bool it computes in: uint8 and -1 is true).
local function truth(v)
  if type(v) == "number" then return v ~= 0 end
  return v
end
for name, op in pairs({ logical_and = "&&", logical_or = "||", logical_xor = "!=" }) do
  cd[name] = function(x, y, opts)
    local o = two_operands(x, y, opts, name, true)
    x, y = truth(x), truth(y)
    local dx, dy = scalar_dtype(x, "bool"), scalar_dtype(y, "bool")
    local body = fmt("z = ((%s)x_ != 0) %s ((%s)y_ != 0)", DT[dx].calc, op, DT[dy].calc)
    return ew(name, dx .. dy, { { "x_", x, dx }, { "y_", y, dy } }, o.out and o.out.dtype or "bool", body, o)
  end
end

-- ------------------------------------------------------------------------------------------ closeness
local function close_opts(opts, fname, n)
  local o = check_opts(opts, { rtol = true, atol = true, equal_nan = true, stream = true }, fname, n)
  for _, k in ipairs({ "rtol", "atol" }) do
    if o[k] ~= nil and type(o[k]) ~= "number" then
      raise(fmt("bad option '%s' to '%s' (number expected, got %s)", k, fname, typename(o[k])))
    end
  end
  return o
end

-- cd.isclose(a, b [, {rtol = 1e-5, atol = 1e-8, equal_nan = false, stream=}]): |a - b| <= atol + rtol |b|
-- elementwise, as bool (NumPy's test: infinities are close only to themselves, NaN to nothing unless equal_nan).
function cd.isclose(a, b, opts)
  check_operand(a, "isclose", 1)
  check_operand(b, "isclose", 2)
  if not is_array(a) and not is_array(b) then raise("isclose: at least one operand must be an Array") end
  local o = close_opts(opts, "isclose", 3)
  local r = "float64"   -- a number operand is passed as a double (any value: the test is in doubles)
  local x, y = to_double(scalar_dtype(a, r), "x_"), to_double(scalar_dtype(b, r), "y_")
  local body = fmt("{ double x = %s, y = %s; z = x == y || ((y - y) == 0 && fabs(x - y) <= atol_ + rtol_ * fabs(y))%s; }",
    x, y, o.equal_nan and " || (x != x && y != y)" or "")
  local key = scalar_dtype(a, r) .. scalar_dtype(b, r) .. tostring(o.equal_nan)
  return ew("isclose", key, { { "x_", a, r }, { "y_", b, r }, { "rtol_", o.rtol or 1e-5, "float64" },
    { "atol_", o.atol or 1e-8, "float64" } }, "bool", body, { stream = o.stream })
end

-- cd.allclose(a, b [, opts]) -> boolean: every element isclose
function cd.allclose(a, b, opts)
  local c = cd.isclose(a, b, opts)
  if c.size == 0 then return true end
  return c:all()
end

-- cd.array_equal(a, b [, {equal_nan=}]) -> boolean: the same shape and the same elements
function cd.array_equal(a, b, opts)
  check_array(a, "array_equal", 1)
  check_array(b, "array_equal", 2)
  local o = check_opts(opts, { equal_nan = true }, "array_equal", 3)
  local sa, sb = a.shape, b.shape
  if #sa ~= #sb then return false end
  for i = 1, #sa do if sa[i] ~= sb[i] then return false end end
  if a.size == 0 then return true end
  if o.equal_nan then return cd.isclose(a, b, { rtol = 0, atol = 0, equal_nan = true }):all() end
  return a:eq(b):all()
end

-- ------------------------------------------------------------------------------------------ round, fmod, copysign
-- 10^n as NumPy's round scales by it (power_of_ten in its calculation.c): products of 10 from 1, each rounded, so
-- the same double where 10^n has none (past 10^22); inf past the range
local function power_of_ten(n)
  local p = 1.0
  for _ = 1, n do
    p = p * 10.0
    if p == math.huge then break end
  end
  return p
end

-- The C expression storing the double v as the integer dtype d as NumPy's conversion gives it on x86-64, where it
-- runs most (C leaves a value out of d's range undefined; CUDA saturates): int32 and int64 take their lowest value,
-- uint32 and uint64 0, the narrower types the low bits of a 32-bit conversion (300 as uint8 is 44); NaN as out
-- of range.
local function int_from_double(d, v)
  local T = DT[d]
  local lo, hi = T.kind == "u" and "0.0" or "-2147483648.0", "2147483648.0"
  if T.size == 8 then
    lo, hi = T.kind == "u" and "0.0" or "-9223372036854775808.0", T.kind == "u" and "18446744073709551616.0" or "9223372036854775808.0"
  elseif T.size == 4 and T.kind == "u" then
    hi = "4294967296.0"
  end
  local out = T.size < 4 and fmt("(%s)(int)%s", T.ctype, v) or fmt("(%s)%s", T.ctype, v)
  local other = T.kind == "u" and "0" or T.size == 8 and "-9223372036854775807ll - 1" or T.size == 4 and "-2147483647 - 1" or "0"
  return fmt("(%s >= %s && %s < %s) ? %s : (%s)(%s)", v, lo, v, hi, out, T.ctype, other)
end

-- cd.round(a [, decimals = 0] [, {out=, stream=}]): to the nearest multiple of 10^-decimals, halves to even
-- (NumPy's round; floats scale by 10^decimals, round with rint and scale back, as NumPy does). Integers are
-- unchanged unless decimals < 0; then they are rounded as NumPy rounds them, in float64 (x / 10^-decimals, rint,
-- times 10^-decimals, back to the dtype: int64 values above 2^53 round to a double's value, and one rounded past
-- the dtype's range converts as int_from_double has it).
function cd.round(a, decimals, opts)
  check_array(a, "round", 1)
  if type(decimals) == "table" and opts == nil then decimals, opts = nil, decimals end
  decimals = decimals or 0
  if math.type(decimals) ~= "integer" then argerror("round", 2, "integer decimals expected, got " .. typename(decimals)) end
  local o = ew_opts(opts, "round", 3)
  local d = a.dtype
  local odt = o.out and o.out.dtype or d
  local T = DT[d]
  local p = power_of_ten(decimals < 0 and -decimals or decimals)
  local body
  if T.kind == "f" then
    local C = T.calc
    local f = C == "float" and "rintf" or "rint"
    if decimals == 0 then body = fmt("z = (%s)%s((%s)x)", DT[odt].ctype, f, C)
    elseif decimals > 0 then body = fmt("z = (%s)(%s((%s)x * (%s)p_) / (%s)p_)", DT[odt].ctype, f, C, C, C)
    else body = fmt("z = (%s)(%s((%s)x / (%s)p_) * (%s)p_)", DT[odt].ctype, f, C, C, C) end
    return ew("round", d .. odt .. (decimals > 0 and "+" or decimals < 0 and "-" or "0"),
      { { "x", a }, { "p_", p, "float64" } }, odt, body, o)
  end
  if T.kind == "b" then
    -- NumPy's round of bool is its rint, float16 (bool is no integer dtype there); other decimals fail to cast
    if decimals ~= 0 then
      argerror("round", 2, "a bool array rounds only with 0 decimals, to float16 as NumPy's; convert it with " ..
        "a:astype(\"float16\") first", 1)
    end
    odt = o.out and o.out.dtype or "float16"
    return ew("round", d .. odt .. "b", { { "x", a } }, odt, fmt("z = (%s)(float)x", DT[odt].ctype), o)
  end
  if decimals >= 0 then
    return ew("round", d .. odt .. "id", { { "x", a } }, odt, fmt("z = (%s)x", DT[odt].ctype), o)
  end
  local store = DT[odt].kind == "f" and fmt("(%s)v", DT[odt].ctype) or int_from_double(odt, "v")
  local body_i = fmt("{ double v = rint((double)x / p_) * p_; z = %s; }", store)
  return ew("round", d .. odt .. "float64", { { "x", a }, { "p_", p, "float64" } }, odt, body_i, o)
end

-- any_int: the function computes in a float, to which a Lua integer out of r's range is converted (two_operands)
local function binary_float(fname, make, any_int)
  cd[fname] = function(x, y, opts)
    local o, r = two_operands(x, y, opts, fname, any_int)
    local res, body, pre = make(r, scalar_dtype(x, r), scalar_dtype(y, r))
    local odt = o.out and o.out.dtype or res
    local function passed(v)
      return (is_array(v) or internal.ops.scalar_fits(v, r)) and r or res
    end
    local px, py = passed(x), passed(y)
    return ew(fname, r .. odt, { { "x_", x, px }, { "y_", y, py } }, odt, fmt("z = (%s)(%s)", DT[odt].ctype, body), o, pre)
  end
end

-- cd.fmod(x, y [, {out=, stream=}]): C's remainder, with the sign of x (NumPy's fmod; `%` has y's sign). An
-- integer remainder by 0 is 0, as NumPy gives.
binary_float("fmod", function(r)
  local T = DT[r]
  if T.kind == "f" then
    return r, fmt("fmod%s((%s)x_, (%s)y_)", T.calc == "float" and "f" or "", T.calc, T.calc)
  end
  local res = r == "bool" and "int8" or r
  local C = DT[res].calc
  if DT[res].kind == "u" then return res, fmt("(%s)y_ == 0 ? (%s)0 : (%s)x_ %% (%s)y_", C, C, C, C) end
  return res, fmt("((%s)y_ == 0 || (%s)y_ == (%s)-1) ? (%s)0 : (%s)x_ %% (%s)y_", C, C, C, C, C, C)
end)

-- cd.copysign(x, y [, {out=, stream=}]): |x| with the sign of y (of its sign bit: -0.0 counts), a float
binary_float("copysign", function(r, da, db)
  local res = float_pair(r, da, db)   -- copysign(int8, uint8) is float16, as NumPy finds its loop
  local C = DT[res].calc
  return res, fmt("copysign%s((%s)%s, (%s)%s)", C == "float" and "f" or "", C, r == "float16" and "(float)x_" or "x_", C,
    r == "float16" and "(float)y_" or "y_")
end, true)

-- ------------------------------------------------------------------------------------------ constructors
-- [dtype] [, {device=, stream=}] after the positional arguments of a constructor
local function make_opts(dtype, opts, fname, n)
  local on = n + 1 -- the options' position: n when they come in the dtype's place
  if type(dtype) == "table" and opts == nil then dtype, opts, on = nil, dtype, n end
  if dtype ~= nil and (type(dtype) ~= "string" or not dtype_of_name(dtype)) then
    argerror(fname, n, "dtype name expected, got " .. (type(dtype) == "string" and "'" .. dtype .. "'" or typename(dtype)), 1)
  end
  local o = check_opts(opts, { device = true, stream = true }, fname, on)
  local dev = o.device and cd.device(o.device) or (o.stream and o.stream.device) or cd.get_device()
  return dtype and dtype_of_name(dtype) or "float32", dev, o.stream
end

local function check_count(v, fname, n, what)
  if math.type(v) ~= "integer" or v < 0 then argerror(fname, n, fmt("non-negative integer %s expected, got %s", what,
    math.type(v) and tostring(v) or typename(v)), 1) end
end

-- cd.eye(n [, m [, k]] [, dtype] [, {device=, stream=}]): the n x m array (m = n) with ones on diagonal k
-- (0 the main one, above it positive) and zeros elsewhere; cudadev's default dtype float32 (NumPy's: float64)
-- (m and k may be nil, as NumPy's None; the first argument after n that is neither a number nor nil is the dtype
-- or the options, and errors name its real position)
function cd.eye(n, m, k, dtype, opts)
  local dpos = 4
  if m ~= nil and type(m) ~= "number" then m, k, dtype, opts, dpos = nil, nil, m, k, 2
  elseif k ~= nil and type(k) ~= "number" then k, dtype, opts, dpos = nil, k, dtype, 3 end
  check_count(n, "eye", 1, "row count")
  if m ~= nil then check_count(m, "eye", 2, "column count") end
  m, k = m or n, k or 0
  if math.type(k) ~= "integer" then argerror("eye", 3, "integer diagonal offset expected, got " .. tostring(k)) end
  local d, dev, stream = make_opts(dtype, opts, "eye", dpos)
  local out = cd.empty({ n, m }, d, { device = dev, stream = stream })
  if out.size == 0 then return out end
  return ew("eye", d, { { "m_", m, "int64" }, { "k_", k, "int64" } }, d,
    fmt("z = (%s)(float)((i %% m_) - (i / m_) == k_)", DT[d].ctype), { out = out, stream = stream })
end

-- cd.identity(n [, dtype] [, opts]): cd.eye(n)
function cd.identity(n, dtype, opts)
  check_count(n, "identity", 1, "size")
  make_opts(dtype, opts, "identity", 2) -- (checked here: eye would name its own positions)
  return cd.eye(n, n, 0, dtype, opts)
end

-- cd.ones_like(a [, dtype] [, {stream=}]): ones of a's shape, a's dtype (or dtype) and device
function cd.ones_like(a, dtype, opts)
  check_array(a, "ones_like", 1)
  if type(dtype) == "table" and opts == nil then dtype, opts = nil, dtype end
  if dtype ~= nil and (type(dtype) ~= "string" or not dtype_of_name(dtype)) then
    argerror("ones_like", 2, "dtype name expected, got " .. (type(dtype) == "string" and "'" .. dtype .. "'" or typename(dtype)))
  end
  local o = check_opts(opts, { stream = true }, "ones_like", 3)
  return cd.ones(a.shape, dtype or a.dtype, { device = a.device, stream = o.stream })
end

local function check_offset(k, fname, n)
  if k ~= nil and math.type(k) ~= "integer" then argerror(fname, n, "integer diagonal offset expected, got " .. typename(k), 1) end
  return k or 0
end

-- cd.diag(v [, k]): of a 1-d v, the square array with v on diagonal k; of a 2-d v, a copy of its diagonal k
function cd.diag(v, k)
  check_array(v, "diag", 1)
  k = check_offset(k, "diag", 2)
  if v.ndim == 1 then
    local n = v.size + math.abs(k)
    local out = cd.zeros({ n, n }, v.dtype, { device = v.device })
    if v.size == 0 then return out end
    local body = "{ long long r = i / n_, c = i % n_; if (c - r == k_) z = v_[k_ >= 0 ? r : c]; }"
    return run_elementwise({ fname = "diag", name = "cdv_diag", key = "diag:" .. v.dtype,
      ins = { { name = "v_", dtype = v.dtype, value = v:contiguous(), raw = true }, { name = "n_", dtype = "int64", value = n },
              { name = "k_", dtype = "int64", value = k } },
      outs = { { name = "z", dtype = v.dtype, value = out } }, body = body })[1]
  end
  if v.ndim ~= 2 then argerror("diag", 1, fmt("1-d or 2-d Array expected, got %d-d", v.ndim)) end
  local r, c = v.shape[1], v.shape[2]
  local len = k >= 0 and math.min(r, c - k) or math.min(r + k, c)
  if len <= 0 then return cd.empty(0, v.dtype, { device = v.device }) end
  local start = v:slice(k >= 0 and 1 or 1 - k, nil, 1, 1):slice(k >= 0 and 1 + k or 1, nil, 1, 2)
  local st = start.strides
  return as_strided(start, { len }, { st[1] + st[2] }):copy()
end

local function tri(fname, keep)
  -- keep: the C condition on column minus row (c - r) and k under which an element stays
  cd[fname] = function(m, k, opts)
    check_array(m, fname, 1)
    if type(k) == "table" and opts == nil then k, opts = nil, k end
    k = check_offset(k, fname, 2)
    local o = ew_opts(opts, fname, 3)
    if m.ndim == 0 then argerror(fname, 1, "Array of 1 or more dimensions expected, got 0-d") end
    -- a 1-d m is each row of the square (NumPy broadcasts it there: triu({1, 2, 3}) is 3 x 3)
    if m.ndim == 1 then m = cd.broadcast_to(m, { m.size, m.size }) end
    -- a transposed matrix on a CUDA device: the tiled kernel, the triangle kept while writing (NOTE [tiled transpose])
    local t = internal.copy_transposed(m, o.out, o.stream, keep == "<=" and 1 or 2, k)
    if t then return t end
    local rows, cols = m.shape[m.ndim - 1], m.shape[m.ndim]
    local body = fmt("{ long long c = i %% c_, r = (i / c_) %% r_; z = (c - r %s k_) ? x : (%s)0; }", keep, DT[m.dtype].ctype)
    if m.dtype == "float16" then
      body = fmt("{ long long c = i %% c_, r = (i / c_) %% r_; z = (c - r %s k_) ? x : __float2half(0.0f); }", keep)
    end
    return ew(fname, m.dtype, { { "x", m }, { "r_", rows, "int64" }, { "c_", math.max(cols, 1), "int64" }, { "k_", k, "int64" } },
      m.dtype, body, o)
  end
end
-- cd.triu(m [, k]): the elements on and above diagonal k of m's last two dimensions, zeros below
tri("triu", ">=")
-- cd.tril(m [, k]): the elements on and below diagonal k, zeros above
tri("tril", "<=")

-- cd.outer(a, b): the product of every element of a (flattened) with every element of b, {a.size, b.size}
function cd.outer(a, b)
  check_array(a, "outer", 1)
  check_array(b, "outer", 2)
  return a:reshape({ a.size, 1 }) * b:reshape({ 1, b.size })
end

-- ------------------------------------------------------------------------------------------ views
-- cd.flip(a [, axis]): a view with the order of the elements reversed along axis (an integer or a list; all
-- axes when nil)
function cd.flip(a, axis)
  check_array(a, "flip", 1)
  local axes = axes_or(axis, a.ndim, "flip", function() return true end)
  local v = a
  for _, ax in ipairs(axes) do v = v:slice(nil, nil, -1, ax) end
  if v == a then v = as_strided(a, a.shape, a.strides) end
  return v
end

-- a:squeeze([axis]): a view without the dimensions of one element (all of them, or those of axis, an integer or
-- a list, each of which must have one element)
function methods.squeeze(a, axis)
  check_array(a, "squeeze", 1)
  local axes, drop = axes_or(axis, a.ndim, "squeeze", function(i) return a.shape[i] == 1 end)
  for _, ax in ipairs(axes) do
    if a.shape[ax] ~= 1 then
      argerror("squeeze", 2, fmt("axis %d has %d elements; only axes of one element can be squeezed", ax, a.shape[ax]))
    end
  end
  local shape, strides, st = {}, {}, a.strides
  for i, d in ipairs(a.shape) do
    if not drop[i] then shape[#shape + 1] = d; strides[#strides + 1] = st[i] end
  end
  return as_strided(a, shape, strides)
end

-- cd.expand_dims(a, axis): a view with a dimension of one element at each position of axis (an integer or a
-- list, positions in the result: 1 the first, -1 the last)
function cd.expand_dims(a, axis)
  check_array(a, "expand_dims", 1)
  if axis == nil then argerror("expand_dims", 2, "axis (integer or list) expected, got nil") end
  local n = (math.type(axis) == "integer" and 1 or (type(axis) == "table" and #axis or 0))
  local _, new = axis_list(axis, a.ndim + n, "expand_dims")
  local shape, strides, j, st = {}, {}, 1, a.strides
  for i = 1, a.ndim + n do
    if new[i] then shape[i], strides[i] = 1, 0
    else shape[i], strides[i] = a.shape[j], st[j]; j = j + 1 end
  end
  return as_strided(a, shape, strides)
end

-- a:ravel(): the elements as a 1-d array in C order (a view when a is contiguous, else a copy)
function methods.ravel(a)
  check_array(a, "ravel", 1)
  return a:reshape({ a.size })
end

-- a:flatten(): a 1-d copy of the elements in C order
function methods.flatten(a)
  check_array(a, "flatten", 1)
  return a:copy():reshape({ a.size })
end

-- cd.broadcast_to(a, shape): a view of a with the given shape by NumPy's broadcasting (dimensions added in front,
-- dimensions of one element repeated with stride 0): every element of a dimension that was 1 is the same memory
-- (writing one writes them all; NumPy makes the view read-only)
function cd.broadcast_to(a, shape)
  check_array(a, "broadcast_to", 1)
  if type(shape) == "number" then shape = { shape } end
  if type(shape) ~= "table" or is_array(shape) then argerror("broadcast_to", 2, "shape (table of sizes) expected, got " .. typename(shape)) end
  local bytes, zero = a.itemsize, false -- (of the shape: its nbytes must be a Lua integer, as an allocation's)
  for i, d in ipairs(shape) do
    if math.type(d) ~= "integer" or d < 0 then argerror("broadcast_to", 2, fmt("dimension %d is not a non-negative integer", i)) end
    zero = zero or d == 0
    if bytes and d > 0 and bytes > math.maxinteger // d then bytes = nil elseif bytes then bytes = bytes * d end
  end
  if bytes == nil and not zero then
    argerror("broadcast_to", 2, fmt("shape %s has more than 2^63 - 1 bytes of %s", shape_text(shape), a.dtype))
  end
  local nd, an, st = #shape, a.ndim, a.strides
  local bad = nd < an
  local strides = {}
  for i = 1, nd do
    local j = i - (nd - an)
    if j >= 1 then
      local d = a.shape[j]
      if d == shape[i] then strides[i] = st[j]
      elseif d == 1 then strides[i] = 0
      else bad = true end
    else strides[i] = 0 end
  end
  if bad then
    raise(fmt("broadcast_to: an array of shape %s cannot be broadcast to %s", shape_text(a.shape), shape_text(shape)))
  end
  return as_strided(a, { table.unpack(shape) }, strides)
end

-- cd.swapaxes(a, axis1, axis2): a view with the two axes exchanged
function cd.swapaxes(a, ax1, ax2)
  check_array(a, "swapaxes", 1)
  local perm = {}
  for i = 1, a.ndim do perm[i] = i end
  local function norm(v, n)
    if math.type(v) ~= "integer" then argerror("swapaxes", n, "integer axis expected, got " .. typename(v), 2) end
    local ax = v < 0 and a.ndim + 1 + v or v
    if ax < 1 or ax > a.ndim then argerror("swapaxes", n, fmt("axis %d out of range 1..%d", v, a.ndim), 2) end
    return ax
  end
  local i, j = norm(ax1, 2), norm(ax2, 3)
  perm[i], perm[j] = perm[j], perm[i]
  if a.ndim == 0 then return as_strided(a, {}, {}) end
  return a:transpose(perm)
end

-- ------------------------------------------------------------------------------------------ dot, vdot
-- cd.dot(a, b): NumPy's dot for arrays of up to 2 dimensions: of two 1-d arrays the sum of products (a Lua
-- number), with a number the product, else cd.matmul's product (float arrays). Stacks: cd.matmul.
function cd.dot(a, b)
  check_operand(a, "dot", 1)
  check_operand(b, "dot", 2)
  if not is_array(a) and not is_array(b) then
    -- two scalars: Lua's product of numbers; a boolean scales only an Array (Lua has no boolean arithmetic)
    for n, v in ipairs({ a, b }) do
      if type(v) == "boolean" then argerror("dot", n, "Array or number expected, got boolean (a boolean needs an Array operand)", 1) end
    end
    return a * b
  end
  if not is_array(a) or not is_array(b) or a.ndim == 0 or b.ndim == 0 then return a * b end
  if a.ndim > 2 or b.ndim > 2 then
    raise(fmt("dot: a is %d-d and b %d-d; for stacks of matrices use cd.matmul (NumPy's dot of those differs)", a.ndim, b.ndim))
  end
  if a.ndim == 1 and b.ndim == 1 then
    if a.size ~= b.size then raise(fmt("dot: shapes %s and %s do not match", shape_text(a.shape), shape_text(b.shape))) end
    return cd.vdot(a, b)
  end
  return cd.matmul(a, b)
end

-- cd.vdot(a, b): the sum of the products of a's and b's elements in C order (same element count), a Lua value of
-- the operands' promoted dtype, as NumPy's: integers wrap in it (int8 sums wrap in int8, where a:sum() adds in
-- 64 bits), bool is whether any pair is true in both
function cd.vdot(a, b)
  check_array(a, "vdot", 1)
  check_array(b, "vdot", 2)
  if a.size ~= b.size then raise(fmt("vdot: a has %d elements but b has %d", a.size, b.size)) end
  local p = a:reshape({ a.size }) * b:reshape({ b.size })
  local K = DT[p.dtype].kind
  if K == "b" then return p:any() end
  if K == "i" or K == "u" then return p:sum({ dtype = p.dtype }) end
  return p:sum()
end
