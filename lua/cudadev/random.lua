-- cd.random: random arrays from a counter-based generator, Philox4x32-10 (Salmon et al., "Parallel random
-- numbers: as easy as 1, 2, 3", 2011; the generator curand and PyTorch use).
--
-- NOTE [counter-based random numbers]: element j of a call gets Philox4x32-10 of the counter (offset + j) under
-- the key seed, so each element is a pure function of (seed, offset, j): the same seed gives the same numbers on
-- the cpu device and on every GPU, on any stream, whatever the launch geometry. Each call then advances the
-- offset by its element count, as PyTorch's philox offset does, so successive calls differ. Uniform floats take
-- the top 24 (float32, float16 through float32) or 53 (float64, from two words) bits; normals use Box-Muller in
-- double (identical on every device up to the math library's last bit); integers take 64 bits modulo the range.
local cd, _, internal = ...
local DT, kernel_for, grid_for, header = internal.DT, internal.kernel_for, internal.grid_for, internal.header
local check_opts, raise, argerror, typename = internal.check_opts, internal.raise, internal.argerror, internal.typename
local fmt = string.format

local random = {}
cd.random = random

local state = { seed = 0, offset = 0 }

-- cd.random.seed([n]): restarts the generator at seed n (an integer; default: one from the clock, cd.now's
-- nanoseconds: a host may have removed the os library)
function random.seed(n)
  if n == nil then n = math.floor(cd.now() * 1e9) ~ 0x5DEECE66D end
  if math.type(n) ~= "integer" then argerror("seed", 1, "integer expected, got " .. (math.type(n) or typename(n))) end
  state.seed, state.offset = n, 0
end

-- cd.random.get_state() -> seed, offset; cd.random.set_state(seed, offset): save and restore the generator
function random.get_state() return state.seed, state.offset end
function random.set_state(seed, offset)
  if math.type(seed) ~= "integer" then argerror("set_state", 1, "integer expected, got " .. (math.type(seed) or typename(seed))) end
  if math.type(offset) ~= "integer" or offset < 0 then argerror("set_state", 2, "non-negative integer expected") end
  state.seed, state.offset = seed, offset
end

local PHILOX = [[
__device__ __forceinline__ void _cdv_philox(unsigned long long ctr, unsigned long long key, unsigned int out[4]) {
  unsigned int c0 = (unsigned int)ctr, c1 = (unsigned int)(ctr >> 32), c2 = 0, c3 = 0;
  unsigned int k0 = (unsigned int)key, k1 = (unsigned int)(key >> 32);
  for (int r = 0; r < 10; r++) {
    unsigned long long p0 = (unsigned long long)0xD2511F53u * c0, p1 = (unsigned long long)0xCD9E8D57u * c2;
    unsigned int h0 = (unsigned int)(p0 >> 32), l0 = (unsigned int)p0, h1 = (unsigned int)(p1 >> 32), l1 = (unsigned int)p1;
    c0 = h1 ^ c1 ^ k0; c1 = l1; c2 = h0 ^ c3 ^ k1; c3 = l0;
    k0 += 0x9E3779B9u; k1 += 0xBB67AE85u;
  }
  out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}
]]

-- The value of element i from the four words w, per distribution and dtype (C expressions).
local GEN = {
  uniform = function(d)
    if DT[d].size == 8 then
      return "lo + (hi - lo) * ((double)((((unsigned long long)w[0] << 32) | w[1]) >> 11) * (1.0 / 9007199254740992.0))"
    end
    return "(float)lo + ((float)hi - (float)lo) * ((float)(w[0] >> 8) * (1.0f / 16777216.0f))"
  end,
  normal = function()
    return "lo + hi * (sqrt(-2.0 * log(1.0 - (double)((((unsigned long long)w[0] << 32) | w[1]) >> 11) * (1.0 / 9007199254740992.0)))"
      .. " * cos(6.283185307179586 * (double)((((unsigned long long)w[2] << 32) | w[3]) >> 11) * (1.0 / 9007199254740992.0)))"
  end,
  -- in unsigned arithmetic: hi - lo may exceed a long long (int64's whole range), and the sum wraps back into it
  randint = function()
    return "(long long)((unsigned long long)lo + ((((unsigned long long)w[0] << 32) | w[1]) "
      .. "% ((unsigned long long)hi - (unsigned long long)lo)))"
  end,
}

-- (at, oat: the argument positions the dtype and the options were given at, which the bounds left out move)
local function draw(fname, dist, shape, lo, hi, dtype, opts, at, oat)
  local d = dtype and internal.dtype_of_name(dtype)
  if dtype ~= nil and not d then   -- named by its type when it has no text of its own (tostring: its address)
    argerror(fname, at, "unknown dtype '" .. ((type(dtype) == "string" or type(dtype) == "number") and tostring(dtype) or type(dtype)) .. "'")
  end
  d = d or (dist == "randint" and "int64" or "float32")
  local kind = DT[d].kind
  if dist ~= "randint" and kind ~= "f" then raise(fmt("%s: %s is not a float dtype", fname, d)) end
  if dist == "randint" and kind ~= "i" and kind ~= "u" then raise(fmt("%s: %s is not an integer dtype", fname, d)) end
  opts = check_opts(opts, { device = true, stream = true }, fname, oat)
  local dev = opts.device and cd.device(opts.device) or (opts.stream and opts.stream.device) or cd.get_device()
  local a = cd.empty(shape, d, { device = dev, stream = opts.stream })
  local n = a.size
  if n == 0 then return a end
  local P = dist == "randint" and "long long" or "double"
  local k = kernel_for(dev, "random:" .. dist .. ":" .. d, function()
    return table.concat({ header({ d }), PHILOX,
      fmt('extern "C" __global__ void cdv_random(%s *z, unsigned long long key, unsigned long long offset, %s lo, %s hi, long long _n) {',
        DT[d].ctype, P, P),
      "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < _n; i += (long long)blockDim.x * gridDim.x) {",
      "    unsigned int w[4];",
      "    _cdv_philox(offset + (unsigned long long)i, key, w);",
      fmt("    z[i] = (%s)(%s);", DT[d].ctype, GEN[dist](d)),
      "  }", "}", "" }, "\n"), "cdv_random"
  end)
  local offset = state.offset
  state.offset = state.offset + n
  k({ grid = grid_for(dev, n), block = internal.BLOCK, stream = opts.stream }, a, state.seed, offset, lo, hi, n)
  return a
end

local function check_number(fname, n, v)
  if type(v) ~= "number" then argerror(fname, n, "number expected, got " .. typename(v)) end
  return v
end

-- cd.random.uniform(shape [, lo, hi] [, dtype] [, opts]): floats in [lo, hi) (default [0, 1)), float32 unless a
-- float dtype is given
function random.uniform(shape, lo, hi, dtype, opts)
  local at = 4
  if type(lo) ~= "number" then lo, hi, dtype, opts, at = 0.0, 1.0, lo, hi, 2 end
  check_number("uniform", 2, lo)
  check_number("uniform", 3, hi)
  local oat = at + 1
  if type(dtype) == "table" then dtype, opts, oat = nil, dtype, at end
  return draw("uniform", "uniform", shape, lo + 0.0, hi + 0.0, dtype, opts, at, oat)
end

-- cd.random.normal(shape [, mean, std] [, dtype] [, opts]): normally distributed floats (default mean 0, std 1)
function random.normal(shape, mean, std, dtype, opts)
  local at = 4
  if type(mean) ~= "number" then mean, std, dtype, opts, at = 0.0, 1.0, mean, std, 2 end
  check_number("normal", 2, mean)
  check_number("normal", 3, std)
  if std < 0 then argerror("normal", 3, "standard deviation must not be negative") end
  local oat = at + 1
  if type(dtype) == "table" then dtype, opts, oat = nil, dtype, at end
  return draw("normal", "normal", shape, mean + 0.0, std + 0.0, dtype, opts, at, oat)
end

-- randint's bounds must fit its dtype (NumPy's "high is out of bounds for int8"): hi is exclusive, so it may be
-- one past the largest value. int64 holds every Lua integer, and so does uint64 above 0. (lo and hi are arguments
-- lp and lp + 1.)
local function check_bounds(lo, hi, dtype, lp)
  local d = dtype == nil and "int64" or internal.dtype_of_name(dtype)
  local r = d and internal.INT_RANGE[d]
  if not r then return end
  if lo < r[1] or lo > r[2] then argerror("randint", lp, fmt("low %d is out of bounds for %s (%d..%d)", lo, d, r[1], r[2])) end
  if r[2] < math.maxinteger and hi > r[2] + 1 then
    argerror("randint", lp + 1, fmt("high %d is out of bounds for %s (at most %d, one past its largest value)", hi, d, r[2] + 1))
  end
end

-- cd.random.randint(shape, lo, hi [, dtype] [, opts]) as uniform and normal, or NumPy's order
-- randint(lo, hi, shape [, dtype] [, opts]): integers in [lo, hi), int64 unless given. The shape comes first only
-- as a table: three integers are read in the older order (randint(1, 7, 100): a hundred dice), since both orders
-- could take them.
function random.randint(a, b, c, dtype, opts)
  local shape, lo, hi, lp = c, a, b, 1
  if type(a) == "table" and cd.type(a) == nil then shape, lo, hi, lp = a, b, c, 2 end
  if math.type(lo) ~= "integer" then argerror("randint", lp, "integer expected, got " .. (math.type(lo) or typename(lo))) end
  if math.type(hi) ~= "integer" then argerror("randint", lp + 1, "integer expected, got " .. (math.type(hi) or typename(hi))) end
  if hi <= lo then argerror("randint", lp + 1, fmt("high (%d) must be greater than low (%d)", hi, lo)) end
  local oat = 5   -- the options' position (dtype #4 in both orders)
  if type(dtype) == "table" then dtype, opts, oat = nil, dtype, 4 end
  check_bounds(lo, hi, dtype, lp)
  return draw("randint", "randint", shape, lo, hi, dtype, opts, 4, oat)
end

random.seed()
