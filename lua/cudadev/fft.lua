-- cd.fft (NumPy's numpy.fft, doc/fft.md): fft, ifft, rfft, irfft, fft2, ifft2, fftn, ifftn, fftfreq, rfftfreq,
-- fftshift, ifftshift; and the refusal of the complex dtypes by the functions not written for them
-- (NOTE [complex dtypes] in ops.lua). Built into the library; run at open with the module table, the Array metatable and the
-- parts' shared internals. It runs before ops.lua (the parts run in the order of their names), so what it takes
-- from ops.lua it looks up at call time.
--
-- NOTE [fft passes]: every transform is a sequence of passes, each over up to 3 axes at once (cuFFT's rank limit).
-- A pass moves its axes last, in ascending order, unless they already are (a view), converts to the pass's input
-- dtype, pads or truncates those axes to the lengths the transform reads (one generated kernel, which also makes
-- the contiguous copy the transform needs), and runs the Array metatable's __fft (src/fft.c: one cuFFT plan of
-- that rank on a GPU, KISS FFT or cudadev's double transform along each axis on the cpu device) on every block at
-- once; then scales by the norm and moves the axes back. fft2, ifft2, fftn and ifftn over the last k <= 3 axes of
-- a contiguous complex array are thus one cuFFT execution, with no copy (issue 32: fft2 of 4096² took 2.3 times
-- CuPy's as two 1-d passes with their transposes). The c2c transforms along different axes commute, so fftn
-- takes its axes in ascending order, three at a time from the last; rfft and irfft are 1-d passes.
local cd, array_mt, internal = ...

local fmt = string.format
local F = {}
cd.fft = F

local function raise(msg, level) internal.raise(msg, (level or 1) + 1) end
local function argerror(fname, n, why) raise(fmt("bad argument #%d to '%s' (%s)", n, fname, why), 2) end
local function is_array(v) return cd.type(v) == "Array" end

local function check_array(a, fname)
  if not is_array(a) then argerror(fname, 1, "Array expected, got " .. internal.typename(a)) end
  return a
end

-- The complex dtype a c2c pass computes in: complex stays; float16 and float32 give complex64, the other dtypes
-- complex128 (NumPy 2 keeps float32's precision, as CuPy does).
local function complex_of(d)
  if d == "complex64" or d == "complex128" then return d end
  return (d == "float16" or d == "float32") and "complex64" or "complex128"
end

-- The real dtype of an rfft's input: float32 (of float16 and float32) or float64.
local function real_input(d, fname)
  if d == "complex64" or d == "complex128" then
    raise(fmt("%s: the input is %s; %s takes a real array (fft takes complex ones)", fname, d, fname), 2)
  end
  return (d == "float16" or d == "float32") and "float32" or "float64"
end

local function real_of(c) return c == "complex64" and "float32" or "float64" end

-- a 1-based axis of an ndim-d array (negative: from the end), checked
local function check_axis(axis, ndim, fname, n)
  if math.type(axis) ~= "integer" then argerror(fname, n, "integer axis expected, got " .. internal.typename(axis)) end
  local ax = axis < 0 and ndim + axis + 1 or axis
  if ax < 1 or ax > ndim then argerror(fname, n, fmt("axis %d out of range for a %d-d array", axis, ndim)) end
  return ax
end

local function check_length(v, fname, n, what)
  if math.type(v) ~= "integer" and not (type(v) == "number" and v == math.floor(v)) then
    argerror(fname, n, fmt("%s must be a positive integer, got %s", what, internal.typename(v)))
  end
  if v < 1 then argerror(fname, n, fmt("%s must be a positive integer, got %d", what, math.tointeger(v) or v)) end
  return math.tointeger(v)
end

local NORMS = { backward = true, ortho = true, forward = true }
local function check_norm(norm, fname, n)
  if norm == nil then return "backward" end
  if not NORMS[norm] then
    argerror(fname, n, fmt('norm must be "backward", "ortho" or "forward", got %s', type(norm) == "string" and
      fmt('"%s"', norm) or internal.typename(norm)))
  end
  return norm
end

-- x (contiguous or not) with its last #lens axes cut or zero-padded to lens: a new contiguous Array, or x itself
-- when it is already that and `own` is not asked for (NOTE [fft passes]).
local function resize_trailing(x, lens, own, fname)
  local shape, k = x.shape, #lens
  local nd = #shape
  local same = true
  for j = 1, k do same = same and shape[nd - k + j] == lens[j] end
  if same and not (own and x.is_contiguous) then return x:contiguous() end
  if not x.is_contiguous then x = x:contiguous() end
  local ins, steps = { { name = "x", dtype = x.dtype, value = x, raw = true } }, {}
  for j = k, 1, -1 do   -- the output index's coordinates, last axis first; _s the input's offset, _m its stride
    local L, M = "L" .. j .. "_", "M" .. j .. "_"
    ins[#ins + 1] = { name = L, dtype = "int64", value = shape[nd - k + j] }
    ins[#ins + 1] = { name = M, dtype = "int64", value = lens[j] }
    steps[#steps + 1] = fmt("_c = _r %% %s; _r /= %s; _in &= _c < %s; _s += _c * _m; _m *= %s;", M, M, L, L)
    shape[nd - k + j] = lens[j]
  end
  local ctype = internal.DT[x.dtype].ctype
  return internal.run_elementwise({ fname = fname, name = "cdv_fft_resize", shape = shape, ins = ins,
    outs = { { name = "z", dtype = x.dtype } }, key = "fft_resize" .. k,
    body = fmt("{ long long _r = i, _s = 0, _m = 1, _c; int _in = 1; %s z = _in ? x[_s + _r * _m] : (%s)0; }",
      table.concat(steps, " "), ctype) })[1]
end

-- One pass (NOTE [fft passes]): kind "c2c" over the axes ax (1-based, checked, distinct, 3 at most) with lengths
-- len, or "r2c" or "c2r" over one axis ax[1] of length len[1], of a.
local function pass(a, ax, len, kind, inverse, norm, fname)
  local nd, at = a.ndim, {}
  for i, v in ipairs(ax) do at[v] = len[i] end
  local perm, lens, moved = {}, {}, false
  for i = 1, nd do if not at[i] then perm[#perm + 1] = i end end
  for i = 1, nd do if at[i] then perm[#perm + 1], lens[#lens + 1] = i, at[i] end end
  for i = 1, nd do moved = moved or perm[i] ~= i end
  local x = moved and a:transpose(perm) or a
  local d = x.dtype
  local xin = kind == "r2c" and real_input(d, fname) or complex_of(d)
  local own = kind == "c2r"   -- cuFFT's c2r writes over its input: it gets a copy of its own
  if xin ~= d then x, own = x:astype(xin), false end
  local n, count = lens[#lens], 1
  for _, v in ipairs(lens) do count = count * v end
  lens[#lens] = kind == "c2r" and n // 2 + 1 or n
  x = resize_trailing(x, lens, own, fname)
  local shape = x.shape
  shape[nd] = kind == "r2c" and n // 2 + 1 or n
  local ydt = kind == "c2r" and real_of(xin) or kind == "r2c" and (xin == "float32" and "complex64" or "complex128")
    or xin
  local y = cd.empty(shape, ydt, { device = x.device })
  lens[#lens] = n
  array_mt.__fft(kind, inverse, x, y, #lens == 1 and n or lens)
  local scale = (norm == "ortho" and 1 / math.sqrt(count)) or ((norm == "forward") ~= inverse and 1 / count) or nil
  if scale and y.size > 0 then y:mul_(scale) end
  if moved then
    local back = {}
    for i, p in ipairs(perm) do back[p] = i end
    y = y:transpose(back):contiguous()
  end
  return y
end

-- fft, ifft, rfft, irfft: (a [, n [, axis [, norm]]])
local function one_d(fname, kind, inverse)
  F[fname] = function(a, n, axis, norm)
    check_array(a, fname)
    if a.ndim == 0 then raise(fmt("%s: a is 0-d; %s transforms an axis of an array of 1 or more dimensions", fname, fname)) end
    local ax = check_axis(axis == nil and -1 or axis, a.ndim, fname, 3)
    norm = check_norm(norm, fname, 4)
    local L = a.shape[ax]
    if n == nil then
      n = kind == "c2r" and 2 * (L - 1) or L
      if n < 1 then
        raise(fmt("%s: %d points along axis %d make no transform (give n)", fname, L, ax))
      end
    else
      n = check_length(n, fname, 2, "n")
    end
    return pass(a, { ax }, { n }, kind, inverse, norm, fname)
  end
end
one_d("fft", "c2c", false)
one_d("ifft", "c2c", true)
one_d("rfft", "r2c", false)
one_d("irfft", "c2r", true)

-- The axes and lengths of an n-d transform (NumPy's _cook_nd_args): axes default to the last #s axes, or all of
-- them; s to the axes' lengths (irfftn's last: 2 (m - 1)).
local function nd_args(a, s, axes, fname, last_c2r, default_axes)
  local nd = a.ndim
  local ax = {}
  if axes ~= nil then
    if math.type(axes) == "integer" then axes = { axes } end
    if type(axes) ~= "table" then argerror(fname, 3, "axes must be a list of integers, got " .. internal.typename(axes)) end
    for i, v in ipairs(axes) do ax[i] = check_axis(v, nd, fname, 3) end
  elseif s ~= nil and type(s) == "table" then
    for i = 1, #s do ax[i] = nd - #s + i end
  else
    for i, v in ipairs(default_axes or {}) do ax[i] = check_axis(v, nd, fname, 3) end
    if not default_axes then for i = 1, nd do ax[i] = i end end
  end
  local seen = {}
  for _, v in ipairs(ax) do
    if seen[v] then argerror(fname, 3, fmt("axis %d appears twice", v)) end
    seen[v] = true
  end
  local len = {}
  if s ~= nil then
    if math.type(s) == "integer" then s = { s } end
    if type(s) ~= "table" then argerror(fname, 2, "s must be a list of lengths, got " .. internal.typename(s)) end
    if #s ~= #ax then argerror(fname, 2, fmt("s has %d lengths but there are %d axes", #s, #ax)) end
    for i, v in ipairs(s) do len[i] = check_length(v, fname, 2, "each length of s") end
  else
    for i, v in ipairs(ax) do len[i] = a.shape[v] end
    if last_c2r and #ax > 0 then len[#ax] = 2 * (a.shape[ax[#ax]] - 1) end
  end
  for i, v in ipairs(len) do
    if v < 1 then raise(fmt("%s: %d points along axis %d make no transform (give s)", fname, a.shape[ax[i]], ax[i]), 2) end
  end
  return ax, len
end

-- fftn, ifftn, fft2, ifft2: (a [, s [, axes [, norm]]])
local function n_d(fname, inverse, default_axes)
  F[fname] = function(a, s, axes, norm)
    check_array(a, fname)
    norm = check_norm(norm, fname, 4)
    if default_axes and a.ndim < 2 and axes == nil then
      raise(fmt("%s: a is %d-d; %s transforms its last two axes (give axes)", fname, a.ndim, fname))
    end
    local ax, len = nd_args(a, s, axes, fname, false, default_axes)
    if #ax == 0 then return a:astype(complex_of(a.dtype)) end   -- no axes: NumPy's copy
    local order = {}   -- ascending axes, so the last three are the trailing block when they can be
    for i = 1, #ax do order[i] = i end
    table.sort(order, function(i, j) return ax[i] < ax[j] end)
    local y, hi = a, #ax
    while hi >= 1 do   -- (NOTE [fft passes]) three axes a pass, the last ones first
      local pax, plen = {}, {}
      for i = math.max(1, hi - 2), hi do pax[#pax + 1], plen[#plen + 1] = ax[order[i]], len[order[i]] end
      y, hi = pass(y, pax, plen, "c2c", inverse, norm, fname), hi - 3
    end
    return y
  end
end
n_d("fftn", false)
n_d("ifftn", true)
n_d("fft2", false, { -2, -1 })
n_d("ifft2", true, { -2, -1 })

-- fftfreq(n [, d [, opts]]) and rfftfreq: the sample frequencies, float64, on opts.device
local function freq(fname, half)
  F[fname] = function(n, d, opts)
    n = check_length(n, fname, 1, "n")
    if d == nil then d = 1.0 end
    if type(d) ~= "number" then argerror(fname, 2, "number expected, got " .. internal.typename(d)) end
    if opts ~= nil and type(opts) ~= "table" then argerror(fname, 3, "options table expected, got " .. internal.typename(opts)) end
    local t = {}
    if half then
      for k = 0, n // 2 do t[#t + 1] = k / (d * n) end
    else
      for k = 0, (n - 1) // 2 do t[#t + 1] = k / (d * n) end
      for k = -(n // 2), -1 do t[#t + 1] = k / (d * n) end
    end
    return cd.array(t, "float64", opts and { device = opts.device })
  end
end
freq("fftfreq", false)
freq("rfftfreq", true)

-- fftshift(x [, axes]) and ifftshift: x rolled by n // 2 (the inverse: -(n // 2)) along each axis (default all)
local function shift(fname, inverse)
  F[fname] = function(x, axes)
    check_array(x, fname)
    local ax = {}
    if axes == nil then for i = 1, x.ndim do ax[i] = i end
    elseif math.type(axes) == "integer" then ax[1] = check_axis(axes, x.ndim, fname, 2)
    elseif type(axes) == "table" then for i, v in ipairs(axes) do ax[i] = check_axis(v, x.ndim, fname, 2) end
    else argerror(fname, 2, "axes must be an integer or a list of them, got " .. internal.typename(axes)) end
    local y = x
    for _, a in ipairs(ax) do
      local n = x.shape[a]
      local k = inverse and -(n // 2) or n // 2
      local idx = {}
      for i = 1, n do idx[i] = (i - 1 - k) % n + 1 end   -- y[i] = x[i - k]
      if n > 0 then y = cd.take(y, cd.array(idx, "int64", { device = x.device }), a) end
    end
    if y == x then y = x:copy() end
    return y
  end
end
shift("fftshift", false)
shift("ifftshift", true)

-- (NOTE [complex dtypes]) The functions of ops_numpy.lua and sorting.lua not written for them refuse complex
-- arguments by name (their kernels would not compile, or would order or round the pairs wrongly), wrapped once
-- every part has run (before extra.lua's wrap_public, which this chains).
local REFUSE = { "sort", "argsort", "unique", "searchsorted", "cumsum", "cumprod", "clip", "fmod", "copysign", "round",
                 "nansum", "nanmax", "nanmin", "nanmean", "dot", "vdot", "isclose", "allclose", "count_nonzero",
                 "nonzero", "logical_and", "logical_or", "logical_xor", "var", "std" }
local function refuse_complex_args(name, f)
  return function(...)
    for i = 1, select("#", ...) do
      local v = select(i, ...)
      if is_array(v) and (v.dtype == "complex64" or v.dtype == "complex128") then internal.refuse_complex(name, v.dtype) end
    end
    return f(...)
  end
end
local wrap_public = internal.wrap_public
function internal.wrap_public(mt)
  for _, name in ipairs(REFUSE) do
    if type(cd[name]) == "function" then cd[name] = refuse_complex_args(name, cd[name]) end
    if type(mt.methods[name]) == "function" then mt.methods[name] = refuse_complex_args(name, mt.methods[name]) end
  end
  if wrap_public then return wrap_public(mt) end
end
