-- Computing with arrays (CuPy's semantics): the two kernel generators, cd.elementwise and cd.reduction
-- (CuPy's ElementwiseKernel and ReductionKernel), and the operators, math functions and reductions of Arrays
-- built on them. Built into the library; run once by luaopen_cudadev with the module table and the Array
-- metatable, whose methods table it extends.
--
-- NOTE [generated kernels]: every operation becomes CUDA C source generated here, compiled by cd.compile for
-- the array's device (so the same code runs on the cpu device and on every GPU, and lands in the memory and
-- disk kernel caches like any module), specialised by the dtypes and shapes' broadcasting pattern of the call.
-- A table maps that specialisation key to its Kernel per device, so a repeated call costs a table lookup, an
-- output allocation and one launch. Elementwise kernels are grid-stride loops over a flat index; inputs whose
-- shape differs from the output's (broadcasting) get their element offset from the output index and their own
-- strides, passed as arguments, so one kernel serves every shape of the same rank. Reductions are two passes
-- (NOTE [reduction passes]).
local cd, array_mt, internal = ...
local methods = array_mt.methods

local unpack, concat, fmt = table.unpack, table.concat, string.format

-- ------------------------------------------------------------------------------------------ dtypes
-- kind: b(ool), i(nt), u(nsigned), f(loat), c(omplex); ctype: the element's C type in kernels; calc: the C type arithmetic
-- is done in (float16 through float, as CuPy does); arg: the C type a scalar of this dtype is passed as.
local DT = {}
local function dt(name, kind, size, ctype, calc, arg)
  DT[name] = { name = name, kind = kind, size = size, ctype = ctype, calc = calc or ctype, arg = arg or ctype }
end
dt("bool", "b", 1, "bool", "bool", "int")
dt("int8", "i", 1, "signed char", "int", "int")
dt("int16", "i", 2, "short", "int", "int")
dt("int32", "i", 4, "int")
dt("int64", "i", 8, "long long")
dt("uint8", "u", 1, "unsigned char", "unsigned int", "unsigned int")
dt("uint16", "u", 2, "unsigned short", "unsigned int", "unsigned int")
dt("uint32", "u", 4, "unsigned int")
dt("uint64", "u", 8, "unsigned long long")
dt("float16", "f", 2, "__half", "float", "float")
dt("float32", "f", 4, "float")
dt("float64", "f", 8, "double")
-- NOTE [complex dtypes]: a complex element is two floats (complex64) or doubles (complex128), real part first, as
-- NumPy, cuFFT and DLPack lay it out. In kernels its C type is the struct of COMPLEX (a typedef named as the dtype),
-- whose operators the expressions use; a Lua number passed for one is a double, converted with imaginary part 0.
-- Complex operations have no precompiled cpu loops (array_loops.c answers false): the generated kernels run them,
-- compiled by the host compiler on the cpu device. Operations not written for them refuse them by name (plan_binary,
-- plan_unary, reduction_method).
dt("complex64", "c", 8, "complex64", "complex64", "double")
dt("complex128", "c", 16, "complex128", "complex128", "double")
local SHORT = { f16 = "float16", f32 = "float32", f64 = "float64", i8 = "int8", i16 = "int16", i32 = "int32",
                i64 = "int64", u8 = "uint8", u16 = "uint16", u32 = "uint32", u64 = "uint64", c64 = "complex64",
                c128 = "complex128" }
-- C type names accepted in generator parameter lists, as CuPy accepts NumPy's and C's names
local CNAMES = { float = "float32", double = "float64", half = "float16", __half = "float16", int = "int32",
                 ["unsigned int"] = "uint32", char = "int8", ["signed char"] = "int8", ["unsigned char"] = "uint8",
                 short = "int16", ["unsigned short"] = "uint16", ["long long"] = "int64",
                 ["unsigned long long"] = "uint64", bool = "bool", int8_t = "int8", int16_t = "int16",
                 int32_t = "int32", int64_t = "int64", uint8_t = "uint8", uint16_t = "uint16", uint32_t = "uint32",
                 uint64_t = "uint64" }

local function dtype_of_name(s) return DT[s] and s or SHORT[s] or CNAMES[s] end

local typename = internal.typename   -- extra.lua

local function is_array(v) return cd.type(v) == "Array" end
-- a stand-in of cd.fuse's tracing (fuse.lua), which the operations hand to it (NOTE [operation plans])
local function fuse_stand_in(v) return type(v) == "table" and getmetatable(v) == internal.fuse_mt and internal.fuse_mt ~= nil end

local raise = internal.raise   -- extra.lua: at the position of the caller outside cudadev's Lua parts

-- Raises Lua's "bad argument #n to 'fname' (why)".
local function argerror(fname, n, why, level) raise(fmt("bad argument #%d to '%s' (%s)", n, fname, why), (level or 1) + 2) end

-- NumPy's result_type for two dtypes (names): the smallest type both convert to safely.
local function promote2(a, b)
  if a == b then return a end
  local A, B = DT[a], DT[b]
  if A.kind == "b" then return b end
  if B.kind == "b" then return a end
  if A.kind == "c" or B.kind == "c" then   -- the complex of the wider float: float64 + complex64 is complex128
    local C, R = A.kind == "c" and A or B, A.kind == "c" and B or A
    local rsize = R.kind == "c" and R.size // 2 or DT[promote2(R.name, "float16")].size
    return math.max(C.size // 2, rsize) == 8 and "complex128" or "complex64"
  end
  if A.kind == "f" or B.kind == "f" then
    if A.kind == "f" and B.kind == "f" then return A.size >= B.size and a or b end
    local F, I = A.kind == "f" and A or B, A.kind == "f" and B or A
    -- an integer fits a float whose mantissa holds it: 8-bit ints in float16, 16-bit in float32, else float64
    local need = I.size == 1 and 2 or I.size == 2 and 4 or 8
    local size = math.max(F.size, need)
    return size == 2 and "float16" or size == 4 and "float32" or "float64"
  end
  if A.kind == B.kind then return A.size >= B.size and a or b end
  local S, U = A.kind == "i" and A or B, A.kind == "u" and A or B
  if S.size > U.size then return S.name end
  if U.size == 8 then return "float64" end
  return "int" .. (U.size * 16)
end

-- NumPy 2's weak scalars (NEP 50): a Lua integer takes an integer array's dtype (a bool array's becomes int64),
-- a Lua float takes a float array's (an integer or bool array's becomes float64), a boolean any array's.
local function scalar_kind(v)
  if type(v) == "boolean" then return "b" end
  return math.type(v) == "integer" and "i" or "f"
end

local function promote_scalar(dtype, v)
  local k, K = scalar_kind(v), DT[dtype].kind
  if k == "b" then return dtype end
  if k == "i" then return K == "b" and "int64" or dtype end
  return (K == "f" or K == "c") and dtype or "float64"
end

local function default_scalar_dtype(v)
  local k = scalar_kind(v)
  return k == "b" and "bool" or k == "i" and "int64" or "float64"
end

-- The result dtype of arrays and scalars together. arr (default is_array) says which of args are arrays: cd.fuse's
-- stand-ins are too (NOTE [operation plans]).
local function result_type(args, arr)
  arr = arr or is_array
  local r
  for _, v in ipairs(args) do
    if arr(v) then r = r and promote2(r, v.dtype) or v.dtype end
  end
  if r == nil then
    for _, v in ipairs(args) do
      local d = default_scalar_dtype(v)
      r = r and promote2(r, d) or d
    end
    return r
  end
  for _, v in ipairs(args) do
    if not arr(v) then r = promote_scalar(r, v) end
  end
  return r
end

-- ------------------------------------------------------------------------------------------ shapes
-- Broadcasting (NumPy's rule): shapes aligned at their last dimension; each dimension equal, or 1.
local function broadcast_shapes(shapes, fname)
  local nd = 0
  for _, s in ipairs(shapes) do nd = math.max(nd, #s) end
  local out = {}
  for i = 1, nd do
    local n = 1
    for _, s in ipairs(shapes) do
      local d = s[#s - nd + i] or 1
      if d ~= 1 then
        if n ~= 1 and n ~= d then
          local txt = {}
          for j, t in ipairs(shapes) do txt[j] = "{" .. concat(t, ", ") .. "}" end
          raise(fmt("%s: shapes %s cannot be broadcast together (dimension %d is %d and %d)", fname,
            concat(txt, " and "), i, n, d))
        end
        n = d
      end
    end
    out[i] = n
  end
  return out
end

local function same_shape(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do if a[i] ~= b[i] then return false end end
  return true
end

local prod = internal.shape_size

-- The strides, in elements, with which an array of `shape` is read at each dimension of `out` (0 where it is
-- broadcast).
local function broadcast_strides(shape, out)
  local st, acc = {}, 1
  for i = #out, 1, -1 do
    local d = shape[#shape - #out + i]
    if d == nil or d == 1 then st[i] = 0 else st[i] = acc end
    acc = acc * (d or 1)
  end
  return st
end

-- The strides, in elements, with which the Array v is read or written at each dimension of `out` (broadcast
-- dimensions 0), or nil when that is at the flat index (v is contiguous and of out's shape): NOTE [strided views]
-- in array.c.
local function operand_strides(v, out)
  local vs = v.shape
  if v.is_contiguous then
    if same_shape(vs, out) then return nil end
    return broadcast_strides(vs, out)
  end
  local vst, st = v.strides, {}
  for i = 1, #out do
    local j = #vs - #out + i
    st[i] = (vs[j] == nil or vs[j] == 1) and 0 or vst[j]
  end
  return st
end

-- A raw parameter is indexed by the kernel's own code, as C-ordered memory.
local function need_contiguous(v, fname, name)
  if not v.is_contiguous then
    raise(fmt("%s: raw argument '%s' is not contiguous: copy it with a:contiguous() first", fname, name))
  end
end

local flat_base = array_mt.__flat_base

-- ------------------------------------------------------------------------------------------ kernels
-- [device alias .. "\n" .. generation .. "\n" .. key] = Kernel (NOTE [generated kernels]). Held, as CuPy holds
-- its kernels: with a weak table every collection (which the operators' own allocations step) dropped them, and
-- the next call generated and hashed the source again: a small a + b cost 17 us on the cpu device, most of it
-- that. At KERNELS_MAX keys the table starts afresh (a program generating kernels without end keeps no more):
-- on the cpu device each is a loaded object of a few memory mappings, of the process's 65530 (vm.max_map_count).
-- A reset leaves the old generation's entries until then; they are never asked for again.
local KERNELS_MAX = 1024
local kernels, nkernels = {}, 0
-- the tables of the fast paths (NOTE [binary fast path], NOTE [reduction fast path]), which hold Kernels too
local fast_caches = {}
local function fast_cache()
  local t = setmetatable({}, { __mode = "k" })
  fast_caches[#fast_caches + 1] = t
  return t
end

-- The Kernel of key on dev; on a miss, build() gives the source, the kernel's name and any compile options (which
-- the key must tell apart) (NOTE [generated kernels]).
local function kernel_for(dev, key, build)
  local ck = dev.alias .. "\n" .. dev.generation .. "\n" .. key   -- a reset makes a device's Kernels stale
  local k = kernels[ck]
  if k == nil then
    local src, name, options = build()
    local m = cd.compile(src, { name = name .. ".cu", device = dev, options = options })
    k = m:get(name)
    if nkernels >= KERNELS_MAX then kernels, nkernels = {}, 0 end
    kernels[ck], nkernels = k, nkernels + 1
  end
  return k
end

-- Launch geometry of a grid-stride loop over n items: enough blocks to fill the device, no more than needed,
-- and for large n a block per 4 * BLOCK items. Measured on the H100 (2^26 float32, a + b): 4224 blocks (32 per
-- SM) moved 2713 GB/s, 65536 blocks 2904 GB/s (PyTorch's a + b about the same); unrolling the loop by 4 instead
-- gained nothing.
local BLOCK = 256
local function grid_for(dev, n)
  local blocks = (n + BLOCK - 1) // BLOCK
  local cap = math.max(math.max(dev.sm_count or 1, 1) * 32, (n + 4 * BLOCK - 1) // (4 * BLOCK))
  return math.max(1, math.min(blocks, cap, 0x7fffffff))
end

local function needs_half(list)
  for _, t in ipairs(list) do if t == "float16" then return true end end
  return false
end

-- The complex element type of the kernels (NOTE [complex dtypes]). NVRTC has no <complex>: a struct of two parts
-- with the operators the complex operations use. The default constructor is trivial, so a __shared__ array of it
-- (the reductions') needs no initialiser; a real converts with imaginary part 0, a complex to a real keeps its
-- real part (NumPy's astype), to bool tells whether either part is nonzero. Division is Smith's, as NumPy's.
local COMPLEX = [[
template <typename T> struct _cdv_complex {
  T re, im;
  _cdv_complex() = default;
  __device__ _cdv_complex(T r, T i) : re(r), im(i) {}
  template <typename U> __device__ _cdv_complex(U v) : re((T)v), im((T)0) {}
  template <typename U> __device__ _cdv_complex(_cdv_complex<U> z) : re((T)z.re), im((T)z.im) {}
  template <typename U> __device__ explicit operator U() const { return (U)re; }
  __device__ explicit operator bool() const { return re != (T)0 || im != (T)0; }
};
typedef _cdv_complex<float> complex64;
typedef _cdv_complex<double> complex128;
template <typename T> __device__ __forceinline__ _cdv_complex<T> operator+(_cdv_complex<T> a, _cdv_complex<T> b) {
  return _cdv_complex<T>(a.re + b.re, a.im + b.im);
}
template <typename T> __device__ __forceinline__ _cdv_complex<T> operator-(_cdv_complex<T> a, _cdv_complex<T> b) {
  return _cdv_complex<T>(a.re - b.re, a.im - b.im);
}
template <typename T> __device__ __forceinline__ _cdv_complex<T> operator-(_cdv_complex<T> a) {
  return _cdv_complex<T>(-a.re, -a.im);
}
template <typename T> __device__ __forceinline__ _cdv_complex<T> operator*(_cdv_complex<T> a, _cdv_complex<T> b) {
  return _cdv_complex<T>(a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re);
}
template <typename T> __device__ __forceinline__ _cdv_complex<T> operator/(_cdv_complex<T> a, _cdv_complex<T> b) {
  T ar = b.re < (T)0 ? -b.re : b.re, ai = b.im < (T)0 ? -b.im : b.im;
  if (ar >= ai) {
    if (ar == (T)0 && ai == (T)0) return _cdv_complex<T>(a.re / (ar - ar), a.im / (ar - ar));   // +0: NumPy's fabs
    T r = b.im / b.re, scl = (T)1 / (b.re + b.im * r);   // NumPy's steps: a reciprocal, then two products
    return _cdv_complex<T>((a.re + a.im * r) * scl, (a.im - a.re * r) * scl);
  }
  T r = b.re / b.im, scl = (T)1 / (b.im + b.re * r);
  return _cdv_complex<T>((a.re * r + a.im) * scl, (a.im * r - a.re) * scl);
}
template <typename T> __device__ __forceinline__ bool operator==(_cdv_complex<T> a, _cdv_complex<T> b) {
  return a.re == b.re && a.im == b.im;
}
template <typename T> __device__ __forceinline__ bool operator!=(_cdv_complex<T> a, _cdv_complex<T> b) { return !(a == b); }
template <typename T> __device__ __forceinline__ _cdv_complex<T> _cdv_conj(_cdv_complex<T> a) {
  return _cdv_complex<T>(a.re, -a.im);
}
__device__ __forceinline__ float _cdv_abs(complex64 a) { return hypotf(a.re, a.im); }
__device__ __forceinline__ double _cdv_abs(complex128 a) { return hypot(a.re, a.im); }
__device__ __forceinline__ float _cdv_angle(complex64 a) { return atan2f(a.im, a.re); }
__device__ __forceinline__ double _cdv_angle(complex128 a) { return atan2(a.im, a.re); }
]]

local function needs_complex(list)
  for _, t in ipairs(list) do if DT[t] and DT[t].kind == "c" then return true end end
  return false
end

local function header(dtypes)
  -- NVRTC 13 has no built-in <cuda_fp16.h>: it comes from the toolkit's include path, which cudadev passes;
  -- the cpu device serves the header itself
  return (needs_half(dtypes) and "#include <cuda_fp16.h>\n" or "") .. (needs_complex(dtypes) and COMPLEX or "")
end

local function hash(s)
  -- a short name for a kernel from its key (FNV-1a, 32 bits), so names stay within the compilers' limits
  local h = 2166136261
  for i = 1, #s do h = ((h ~ s:byte(i)) * 16777619) & 0xffffffff end
  return fmt("%08x", h)
end

-- ------------------------------------------------------------------------------------------ parameters
-- A parameter list as CuPy writes it: "T x, raw float32 y, int32 n". Returns {name=, type=, raw=, generic=}.
local function parse_params(s, fname, n)
  if type(s) ~= "string" then argerror(fname, n, "string of parameters expected, got " .. typename(s), 1) end
  local out, seen = {}, {}
  for item in s:gmatch("[^,]+") do
    item = item:match("^%s*(.-)%s*$")
    local words = {}
    for w in item:gmatch("%S+") do words[#words + 1] = w end
    if #words < 2 then argerror(fname, n, fmt("parameter '%s' needs a type and a name", item), 1) end
    local p = { name = table.remove(words) }
    if words[1] == "raw" then p.raw = true; table.remove(words, 1) end
    local tname = concat(words, " ")
    if not p.name:match("^[%a_][%w_]*$") or p.name:match("^_") then
      argerror(fname, n, fmt("bad parameter name '%s' (a C identifier not starting with '_')", p.name), 1)
    end
    if seen[p.name] then argerror(fname, n, fmt("parameter '%s' appears twice", p.name), 1) end
    seen[p.name] = true
    local d = dtype_of_name(tname)
    if d then p.type = d
    elseif tname:match("^[%a_][%w_]*$") then p.type, p.generic = tname, true
    else argerror(fname, n, fmt("unknown type '%s' of parameter '%s'", tname, p.name), 1) end
    out[#out + 1] = p
  end
  if #out == 0 then argerror(fname, n, "no parameters", 1) end
  return out
end

local function check_opts(opts, known, fname, n)
  if opts == nil then return {} end
  if type(opts) ~= "table" or is_array(opts) then argerror(fname, n, "options table expected, got " .. typename(opts), 1) end
  for k in pairs(opts) do
    -- a key that is no string or number is named by its type: tostring would give its address
    if not known[k] then raise(fmt("bad option '%s' to '%s' (unknown option)", type(k) == "number" and tostring(k)
      or type(k) == "string" and k or typename(k), fname)) end
  end
  return opts
end

-- Binds generic type names to dtypes from the arrays given for them, then from scalars.
local function bind_types(params, args, fname)
  local bound = {}
  for i, p in ipairs(params) do
    local v = args[i]
    if p.generic and is_array(v) then
      if bound[p.type] and bound[p.type] ~= v.dtype then
        raise(fmt("%s: type %s is %s from an earlier argument but %s from '%s'", fname, p.type, bound[p.type],
          v.dtype, p.name))
      end
      bound[p.type] = v.dtype
    end
  end
  for i, p in ipairs(params) do
    local v = args[i]
    if p.generic and not bound[p.type] and v ~= nil and not is_array(v) then bound[p.type] = default_scalar_dtype(v) end
  end
  return bound
end

-- ------------------------------------------------------------------------------------------ elementwise
-- The source of an elementwise kernel. ins/outs: {name=, dtype=, scalar=, raw=, bcast=}; nd: the output's
-- rank when some input is broadcast (its shape and their strides come as arguments), else 0.
-- The kernel parameters of the inputs, and the statements that give each its element's value in the loop body
-- (a scalar's converted value; nothing for a raw array, which the body indexes itself); dts gets their dtypes.
local function input_code(ins, indent)
  local params, pre, dts = {}, {}, {}
  for _, p in ipairs(ins) do
    local T = DT[p.dtype]
    dts[#dts + 1] = p.dtype
    if p.scalar then
      params[#params + 1] = fmt("%s _s_%s", T.arg, p.name)
      pre[#pre + 1] = fmt("%sconst %s %s = (%s)_s_%s;", indent, T.ctype, p.name, T.ctype, p.name)
    elseif p.raw then
      params[#params + 1] = fmt("const %s *__restrict__ %s", T.ctype, p.name)
    else
      params[#params + 1] = fmt("const %s *__restrict__ _in_%s", T.ctype, p.name)
      local at = p.bcast and ("_o_" .. p.name) or "i"
      if p.dtype == "bool" then   -- any byte but 0 is true (a bool array may hold others: NOTE [cpu loops]'s STORE_cbool)
        pre[#pre + 1] = fmt("%sconst bool %s = ((const unsigned char *)_in_%s)[%s] != 0;", indent, p.name, p.name, at)
      else
        pre[#pre + 1] = fmt("%sconst %s %s = _in_%s[%s];", indent, T.ctype, p.name, p.name, at)
      end
    end
  end
  return params, pre, dts
end

local function elementwise_source(name, ins, outs, body, preamble, nd)
  local params, pre, dts = input_code(ins, "    ")
  for _, p in ipairs(outs) do
    local T = DT[p.dtype]
    dts[#dts + 1] = p.dtype
    if p.raw then params[#params + 1] = fmt("%s *%s", T.ctype, p.name)
    else
      params[#params + 1] = fmt("%s *_out_%s", T.ctype, p.name)
      pre[#pre + 1] = fmt("    %s &%s = _out_%s[%s];", T.ctype, p.name, p.name, p.bcast and ("_o_" .. p.name) or "i")
    end
  end
  params[#params + 1] = "long long _n"
  local offs = {}
  if nd > 0 then
    for d = 1, nd do params[#params + 1] = "long long _d" .. d end
    local bc = {}
    for _, list in ipairs({ ins, outs }) do
      for _, p in ipairs(list) do
        if p.bcast then
          bc[#bc + 1] = p
          for d = 1, nd do params[#params + 1] = fmt("long long _t_%s_%d", p.name, d) end
        end
      end
    end
    offs[#offs + 1] = "    long long _r = i, _c;"
    for _, p in ipairs(bc) do offs[#offs + 1] = fmt("    long long _o_%s = 0;", p.name) end
    for d = nd, 1, -1 do
      offs[#offs + 1] = fmt("    _c = _r %% _d%d; _r /= _d%d;", d, d)
      for _, p in ipairs(bc) do offs[#offs + 1] = fmt("    _o_%s += _c * _t_%s_%d;", p.name, p.name, d) end
    end
  end
  return concat({
    header(dts), preamble or "",
    fmt('extern "C" __global__ void %s(%s) {', name, concat(params, ", ")),
    "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < _n;",
    "       i += (long long)blockDim.x * gridDim.x) {",
    concat(offs, "\n"), concat(pre, "\n"),
    "    " .. body .. ";",
    "  }",
    "}", "" }, "\n")
end

-- NOTE [cpu loops] (src/cpu_loops.c): a built-in operation's spec carries loop = {op=, calc=, res=, bits=} (the
-- calc dtype its operands are converted to, the dtype of its expression's value, the promoted dtype's width for
-- the shifts); a device whose backend has loops runs it without a compile (the cpu device), others answer false
-- and the kernel is generated as before. A stream of another device goes to the kernel, which says so.
local loop_c, reduce_c = array_mt.__loop, array_mt.__reduce
local function run_loop(lp, dev, stream, out, ins)
  if stream ~= nil and stream.device ~= dev then return false end
  local a = {}
  for i, p in ipairs(ins) do a[2 * i - 1], a[2 * i] = p.value, p.dtype end
  return loop_c(lp.op, lp.calc, lp.calc2, lp.res, lp.bits or 0, out, unpack(a, 1, 2 * #ins))
end

-- Runs an elementwise operation. spec: {name=, ins = {{name=, dtype=, value=, raw=}}, outs = {{name=, dtype=,
-- value= (an Array or nil)}}, body=, preamble=, fname=, stream=, key=, shape=, options= (compile options, which
-- key must imply)}: creates the missing outputs with the
-- broadcast shape, checks devices and shapes, and launches. Returns the output arrays.
local function run_elementwise(spec)
  local fname, dev = spec.fname, nil
  local shapes = {}
  for _, p in ipairs(spec.ins) do
    if is_array(p.value) then
      dev = dev or p.value.device
      if p.value.device ~= dev then
        raise(fmt("%s: arrays are on %s and %s; move one with a:to(device)", fname, dev.alias, p.value.device.alias))
      end
      if not p.raw then shapes[#shapes + 1] = p.value.shape end
    end
  end
  for _, p in ipairs(spec.outs) do
    if p.value ~= nil then
      dev = dev or p.value.device
      if p.value.device ~= dev then
        raise(fmt("%s: output '%s' is on %s but the inputs on %s", fname, p.name, p.value.device.alias, dev.alias))
      end
    end
  end
  dev = dev or (spec.stream and spec.stream.device) or cd.get_device()
  if spec.shape then shapes[#shapes + 1] = spec.shape end   -- inputs broadcast to it (copy_elements)
  local shape
  if #shapes > 0 then shape = broadcast_shapes(shapes, fname)
  else
    for _, p in ipairs(spec.outs) do if p.value and not p.raw then shape = p.value.shape; break end end
    shape = shape or {}
  end
  local n = prod(shape)
  for _, p in ipairs(spec.ins) do
    if p.raw and is_array(p.value) then need_contiguous(p.value, fname, p.name) end
  end
  local outs = {}
  for i, p in ipairs(spec.outs) do
    local o = p.value
    if o == nil then
      o = cd.empty(shape, p.dtype, { device = dev, stream = spec.stream })
    else
      if o.dtype ~= p.dtype then
        raise(fmt("%s: output '%s' is %s but the result is %s (give an output of that dtype, or convert with " ..
          "a:astype(\"%s\"))", fname, p.name, o.dtype, p.dtype, o.dtype))
      end
      if not p.raw and not same_shape(o.shape, shape) then
        raise(fmt("%s: output '%s' has shape {%s} but the result has shape {%s}", fname, p.name,
          concat(o.shape, ", "), concat(shape, ", ")))
      end
      if p.raw then need_contiguous(o, fname, p.name) end
    end
    outs[i] = o
  end
  if n == 0 then return outs end
  if spec.loop and run_loop(spec.loop, dev, spec.stream, outs[1], spec.ins) then return outs end
  -- the specialisation: dtypes, scalars, raw, which inputs broadcast (NOTE [generated kernels])
  -- an array read or written at other than its flat index (broadcast, or a strided view: NOTE [strided views]
  -- in array.c) gets its strides over the output's shape as arguments, and a strided view its flat base
  local ins, keyparts, bcast = {}, { spec.key or spec.body, spec.preamble or "" }, false
  for i, p in ipairs(spec.ins) do
    local q = { name = p.name, dtype = p.dtype, raw = p.raw, scalar = not is_array(p.value) }
    if not q.scalar and not q.raw then q.strides = operand_strides(p.value, shape) end
    if q.strides then q.bcast = true; bcast = true end
    ins[i] = q
    keyparts[#keyparts + 1] = fmt("%s:%s:%s%s%s", p.name, p.dtype, q.scalar and "s" or "a", q.raw and "r" or "",
      q.bcast and "b" or "")
  end
  local oq = {}
  for i, p in ipairs(spec.outs) do
    local q = { name = p.name, dtype = p.dtype, raw = p.raw }
    if not p.raw and p.value ~= nil then q.strides = operand_strides(outs[i], shape) end   -- ours are contiguous
    if q.strides then q.bcast = true; bcast = true end
    oq[i] = q
    keyparts[#keyparts + 1] = fmt("%s:%s%s%s", p.name, p.dtype, p.raw and "r" or "", q.bcast and "b" or "")
  end
  local nd = bcast and #shape or 0
  keyparts[#keyparts + 1] = "nd" .. nd
  local key = concat(keyparts, "|")
  local k = kernel_for(dev, key, function()
    local kname = (spec.name or "cdv_elementwise") .. "_" .. hash(key)
    return elementwise_source(kname, ins, oq, spec.body, spec.preamble, nd), kname, spec.options
  end)
  local args = {}
  for i, p in ipairs(spec.ins) do
    local v = p.value
    if type(v) == "boolean" then v = v and 1 or 0 end
    if ins[i].strides and not v.is_contiguous then v = flat_base(v) end
    args[#args + 1] = v
  end
  for i, o in ipairs(outs) do args[#args + 1] = oq[i].strides and not o.is_contiguous and flat_base(o) or o end
  args[#args + 1] = n
  if nd > 0 then
    for d = 1, nd do args[#args + 1] = shape[d] end
    for _, list in ipairs({ ins, oq }) do
      for _, q in ipairs(list) do
        if q.bcast then
          for _, st in ipairs(q.strides) do args[#args + 1] = st end
        end
      end
    end
  end
  k({ grid = grid_for(dev, n), block = BLOCK, stream = spec.stream }, unpack(args, 1, #args))
  return outs, k
end

-- A contiguous copy of the Array a on its device (a strided view read through its strides), into out when given
-- (of a's dtype, a's shape or one a broadcasts to, any strides): a:contiguous(), a:copy(), strided copy_from and
-- fill (views.lua), reductions of views (NOTE [strided views] in array.c).
local function copy_elements(a, out, stream, fname)
  -- a transposed matrix on a CUDA device: views.lua's tiled kernel (NOTE [tiled transpose])
  local t = internal.copy_transposed and internal.copy_transposed(a, out, stream)
  if t then return t end
  return run_elementwise({ fname = fname or "copy", name = "cdv_copy", ins = { { name = "x", dtype = a.dtype, value = a } },
    outs = { { name = "z", dtype = a.dtype, value = out } }, body = "z = x", key = "copy", stream = stream,
    shape = out and out.shape, loop = { op = "copy", calc = a.dtype, res = a.dtype } })[1]
end
internal.copy_elements = copy_elements

-- cd.elementwise(in_params, out_params, body [, {name=, preamble=, options=}]) -> a callable (CuPy's
-- ElementwiseKernel): f(inputs..., [outputs...] [, {stream=}]) runs `body` once per element, with `i` the flat
-- index, each input parameter the element's value (a raw one the whole array), each output a reference to
-- the element. Returns the outputs (created when not given).
function cd.elementwise(in_params, out_params, body, opts)
  local ins = parse_params(in_params, "elementwise", 1)
  local outs = parse_params(out_params, "elementwise", 2)
  if type(body) ~= "string" then argerror("elementwise", 3, "string expected, got " .. typename(body)) end
  opts = check_opts(opts, { name = true, preamble = true, options = true }, "elementwise", 4)
  if opts.name ~= nil and (type(opts.name) ~= "string" or not opts.name:match("^[%a_][%w_]*$")) then
    raise("bad option 'name' to 'elementwise' (a C identifier expected)")
  end
  if opts.preamble ~= nil and type(opts.preamble) ~= "string" then
    raise("bad option 'preamble' to 'elementwise' (string expected, got " .. typename(opts.preamble) .. ")")
  end
  local name = opts.name or "cdv_elementwise"
  local all = {}
  for _, p in ipairs(ins) do all[#all + 1] = p end
  for _, p in ipairs(outs) do all[#all + 1] = p end
  local obj = {}
  local function call(_, ...)
    local nargs = select("#", ...)
    local args = { ... }
    local copts = {}
    if nargs > 0 and type(args[nargs]) == "table" and not is_array(args[nargs]) then
      copts = check_opts(args[nargs], { stream = true }, name, nargs)
      nargs = nargs - 1
    end
    if nargs ~= #ins and nargs ~= #ins + #outs then
      raise(fmt("%s: expected %d input arguments (or %d with the outputs), got %d", name, #ins, #ins + #outs, nargs))
    end
    for i, p in ipairs(ins) do
      local v = args[i]
      if p.raw and not is_array(v) then argerror(name, i, fmt("'%s': raw parameter needs an Array, got %s", p.name, typename(v))) end
      if not is_array(v) and type(v) ~= "number" and type(v) ~= "boolean" then
        argerror(name, i, fmt("'%s': Array or number expected, got %s", p.name, typename(v)))
      end
    end
    for j = 1, nargs - #ins do
      if not is_array(args[#ins + j]) then
        argerror(name, #ins + j, fmt("'%s': output Array expected, got %s", outs[j].name, typename(args[#ins + j])))
      end
    end
    local bound = bind_types(all, { unpack(args, 1, nargs) }, name)
    local function resolve(p, i)
      local t = p.generic and bound[p.type] or (not p.generic and p.type)
      if not t then raise(fmt("%s: cannot tell the type %s of '%s' from the arguments", name, p.type, p.name)) end
      return t
    end
    local sin, sout = {}, {}
    for i, p in ipairs(ins) do
      local t = resolve(p, i)
      local v = args[i]
      if is_array(v) and v.dtype ~= t then
        argerror(name, i, fmt("'%s' is %s but the kernel takes %s (convert with a:astype(\"%s\"))", p.name, v.dtype, t, t))
      end
      sin[i] = { name = p.name, dtype = t, value = v, raw = p.raw }
    end
    for j, p in ipairs(outs) do
      sout[j] = { name = p.name, dtype = resolve(p, #ins + j), value = nargs > #ins and args[#ins + j] or nil, raw = p.raw }
    end
    local defs = {}
    for tn, d in pairs(bound) do defs[#defs + 1] = fmt("typedef %s %s;", DT[d].ctype, tn) end
    table.sort(defs)
    local r = run_elementwise({ fname = name, name = name, ins = sin, outs = sout, body = body, stream = copts.stream,
      preamble = concat(defs, "\n") .. "\n" .. (opts.preamble or "") })
    return unpack(r, 1, #r)
  end
  return setmetatable(obj, { __call = internal.public(name, call, 1), __name = "cudadev.ElementwiseKernel",
    __tostring = function() return fmt("ElementwiseKernel(%s: %s -> %s)", name, in_params, out_params) end })
end

-- ------------------------------------------------------------------------------------------ reductions
-- NOTE [reduction passes]: the reduced axis has K elements for each of the nout outputs (outer * inner of
-- them, the array read as {outer, K, inner}). The first kernel gives each output nsplit blocks of 256 threads;
-- each thread folds its strided share of a block's slice of K with reduce_expr, then the block folds its 256
-- values in shared memory. With nsplit 1 that block's value goes through post_map_expr to the output; else each
-- block writes a partial, and the second kernel folds each output's nsplit partials the same way. Correct for
-- any K, 0 included (the identity), whatever its relation to the block size.
local RBLOCK = 256

local function reduction_source(name, ins, out, rtype, map_expr, reduce_expr, post_map, identity, preamble)
  local params, pre, dts = input_code(ins, "      ")
  dts[#dts + 1] = out.dtype
  if DT[rtype.dtype or ""] then dts[#dts + 1] = rtype.dtype end
  local OT = DT[out.dtype].ctype
  local tree = {
    "  _sdata[threadIdx.x] = a;",
    "  __syncthreads();",
    "  for (unsigned _w = blockDim.x / 2; _w > 0; _w >>= 1) {",
    "    if (threadIdx.x < _w) _sdata[threadIdx.x] = _cdv_reduce(_sdata[threadIdx.x], _sdata[threadIdx.x + _w]);",
    "    __syncthreads();",
    "  }" }
  return concat({
    header(dts), preamble or "",
    "typedef " .. rtype.ctype .. " _cdv_R;",
    "__device__ __forceinline__ _cdv_R _cdv_reduce(_cdv_R a, _cdv_R b) { return (" .. reduce_expr .. "); }",
    fmt('extern "C" __global__ void %s_p1(%s, %s *_out_%s, %s *_part, long long _K, long long _inner, long long _nsplit, int _final) {',
      name, concat(params, ", "), OT, out.name, rtype.ctype),
    fmt("  __shared__ _cdv_R _sdata[%d];", RBLOCK),
    "  long long _o = blockIdx.x / _nsplit, _s = blockIdx.x % _nsplit;",
    "  long long _outer = _o / _inner, _io = _o % _inner;",
    "  long long _chunk = (_K + _nsplit - 1) / _nsplit, _k0 = _s * _chunk;",
    "  long long _k1 = _K - _k0 < _chunk ? _K : _k0 + _chunk;",
    "  _cdv_R a = (_cdv_R)(" .. identity .. ");",
    "  for (long long _k = _k0 + threadIdx.x; _k < _k1; _k += blockDim.x) {",
    "    long long i = (_outer * _K + _k) * _inner + _io;",
    "    {",
    concat(pre, "\n"),
    "      _cdv_R b = (_cdv_R)(" .. map_expr .. ");",
    "      a = _cdv_reduce(a, b);",
    "    }",
    "  }",
    concat(tree, "\n"),
    "  if (threadIdx.x == 0) {",
    "    _cdv_R a = _sdata[0];",
    fmt("    if (_final) { %s &%s = _out_%s[_o]; %s; }", OT, out.name, out.name, post_map),
    "    else _part[blockIdx.x] = a;",
    "  }",
    "}",
    fmt('extern "C" __global__ void %s_p2(const %s *_part, %s *_out_%s, long long _K, long long _nsplit) {', name, rtype.ctype, OT, out.name),
    fmt("  __shared__ _cdv_R _sdata[%d];", RBLOCK),
    "  long long _o = blockIdx.x;",
    "  _cdv_R a = (_cdv_R)(" .. identity .. ");",
    "  for (long long _k = threadIdx.x; _k < _nsplit; _k += blockDim.x) a = _cdv_reduce(a, _part[_o * _nsplit + _k]);",
    concat(tree, "\n"),
    "  if (threadIdx.x == 0) {",
    "    _cdv_R a = _sdata[0];",
    fmt("    %s &%s = _out_%s[_o]; %s;", OT, out.name, out.name, post_map),
    "  }",
    "}", "" }, "\n")
end

-- A reduction's axis (1-based, negative from the end, nil: all) as outer, K, inner and the output's shape.
local function reduction_geometry(shape, axis, keepdims, fname)
  local nd = #shape
  if axis == nil then
    local oshape = {}
    if keepdims then for i = 1, nd do oshape[i] = 1 end end
    return 1, prod(shape), 1, oshape
  end
  if math.type(axis) ~= "integer" then raise(fmt("bad option 'axis' to '%s' (integer expected, got %s)", fname, typename(axis))) end
  local ax = axis < 0 and nd + 1 + axis or axis
  if nd == 0 then raise(fmt("bad option 'axis' to '%s' (axis %d is out of range: a 0-d array has no axes)", fname, axis)) end
  if ax < 1 or ax > nd then
    raise(fmt("bad option 'axis' to '%s' (axis %d is out of range for an array of %d dimension%s: 1..%d, or -1..-%d)",
      fname, axis, nd, nd == 1 and "" or "s", nd, nd))
  end
  local outer, inner, oshape = 1, 1, {}
  for i = 1, nd do
    if i < ax then outer = outer * shape[i] elseif i > ax then inner = inner * shape[i] end
    if i ~= ax then oshape[#oshape + 1] = shape[i] elseif keepdims then oshape[#oshape + 1] = 1 end
  end
  return outer, shape[ax], inner, oshape
end

-- Runs a reduction. spec: {fname=, name=, ins = {{name=, dtype=, value=, raw=}}, out = {name=, dtype=, value=},
-- rtype = {ctype=, dtype= or size=}, map_expr=, reduce_expr=, post_map=, identity=, preamble=, axis=, keepdims=,
-- stream=, options= (compile options, which key must imply)}. Returns the output Array.
-- Blocks for each of nout outputs of K elements: enough to fill the device when there are few outputs, 1 when
-- there are many. 16 per SM: a sum of 2^26 float32 on the H100 took 117.8 us with 4 per SM, 111.2 with 8,
-- 106.5 with 16 (PyTorch's 108).
local function splits(dev, K, nout)
  local fill = math.max(dev.sm_count or 1, 1) * 16
  return math.max(1, math.min((K + RBLOCK * 4 - 1) // (RBLOCK * 4), (fill + nout - 1) // nout))
end

local function run_reduction(spec)
  local fname, dev, shape = spec.fname, nil, nil
  for _, p in ipairs(spec.ins) do
    local v = p.value
    if is_array(v) then
      dev = dev or v.device
      if v.device ~= dev then raise(fmt("%s: arrays are on %s and %s; move one with a:to(device)", fname, dev.alias, v.device.alias)) end
      if not p.raw then
        if shape and not same_shape(shape, v.shape) then
          raise(fmt("%s: inputs have shapes {%s} and {%s}; a reduction takes inputs of one shape", fname,
            concat(shape, ", "), concat(v.shape, ", ")))
        end
        shape = shape or v.shape
      end
    end
  end
  if shape == nil then raise(fmt("%s: no input Array to reduce", fname)) end
  -- a strided view is reduced from a contiguous copy; a raw one is refused (NOTE [strided views] in array.c)
  local sins = {}
  for i, p in ipairs(spec.ins) do
    sins[i] = p
    if is_array(p.value) and p.raw then need_contiguous(p.value, fname, p.name)
    elseif is_array(p.value) and not p.value.is_contiguous then
      sins[i] = { name = p.name, dtype = p.dtype, value = copy_elements(p.value, nil, spec.stream, fname) }
    end
  end
  local outer, K, inner, oshape = reduction_geometry(shape, spec.axis, spec.keepdims, fname)
  local nout = outer * inner
  local o = spec.out.value
  if o == nil then o = cd.empty(oshape, spec.out.dtype, { device = dev, stream = spec.stream })
  else
    if not is_array(o) then raise(fmt("bad option 'out' to '%s' (Array expected, got %s)", fname, typename(o))) end
    if o.device ~= dev then raise(fmt("%s: output is on %s but the input on %s", fname, o.device.alias, dev.alias)) end
    if o.dtype ~= spec.out.dtype then
      raise(fmt("%s: output is %s but the result is %s", fname, o.dtype, spec.out.dtype))
    end
    if o.size ~= nout then raise(fmt("%s: output has %d elements but the result has %d", fname, o.size, nout)) end
    if not o.is_contiguous then
      raise(fmt("%s: output is not contiguous: give a contiguous one (a:contiguous() makes a copy)", fname))
    end
  end
  if nout == 0 then return o end
  local ins, keyparts = {}, { spec.key or (spec.map_expr .. "\0" .. spec.reduce_expr .. "\0" .. spec.post_map ..
    "\0" .. spec.identity), spec.preamble or "", spec.rtype.ctype, spec.out.dtype }
  for i, p in ipairs(spec.ins) do
    ins[i] = { name = p.name, dtype = p.dtype, raw = p.raw, scalar = not is_array(p.value) }
    keyparts[#keyparts + 1] = fmt("%s:%s:%s%s", p.name, p.dtype, ins[i].scalar and "s" or "a", p.raw and "r" or "")
  end
  local key = concat(keyparts, "|")
  local kname, src
  local function build(pass)
    return function()
      kname = kname or (spec.name or "cdv_reduction") .. "_" .. hash(key)
      src = src or reduction_source(kname, ins, spec.out, spec.rtype, spec.map_expr, spec.reduce_expr, spec.post_map,
        spec.identity, spec.preamble)
      return src, kname .. pass, spec.options
    end
  end
  local nsplit = splits(dev, K, nout)
  -- (NOTE [cpu loops]) the same folds in the same order, without a compile
  if spec.loop and (spec.stream == nil or spec.stream.device == dev) and
     reduce_c(spec.loop.op, spec.loop.acc, sins[1].value, o, outer, K, inner, nsplit) then
    return o
  end
  local p1 = kernel_for(dev, key .. "|p1", build("_p1"))
  if nout * nsplit > 0x7fffffff then raise(fmt("%s: %d outputs are more than one launch can reduce", fname, nout)) end
  local args, m = {}, #spec.ins
  for i, p in ipairs(sins) do
    local v = p.value
    if type(v) == "boolean" then v = v and 1 or 0 end
    args[i] = v
  end
  local cfg = { grid = nout * nsplit, block = RBLOCK, stream = spec.stream }
  -- nsplit 1: one pass, no partials (a NULL pointer)
  local part = nsplit > 1 and (spec.rtype.dtype and cd.empty(nout * nsplit, spec.rtype.dtype, { device = dev, stream = spec.stream })
    or cd.empty(nout * nsplit * spec.rtype.size, "uint8", { device = dev, stream = spec.stream })) or nil
  args[m + 1], args[m + 2], args[m + 3], args[m + 4], args[m + 5], args[m + 6] = o, part, K, inner, nsplit, nsplit == 1 and 1 or 0
  p1(cfg, unpack(args, 1, m + 6))
  if nsplit == 1 then return o, p1 end
  local p2 = kernel_for(dev, key .. "|p2", build("_p2"))
  p2({ grid = nout, block = RBLOCK, stream = spec.stream }, part, o, K, nsplit)
  return o, p1, p2
end

-- cd.reduction(in_params, out_params, map_expr, reduce_expr, post_map_expr, identity [, {name=, preamble=,
-- reduce_type=}]) -> a callable (CuPy's ReductionKernel): f(inputs... [, output] [, {axis=, keepdims=,
-- stream=}]) maps each element with map_expr (inputs by name, `i` the flat index), folds the values with
-- reduce_expr (of `a` and `b`) starting from identity, and stores post_map_expr (of `a`, writing the output
-- parameter) per output element: over every element, or along one axis.
function cd.reduction(in_params, out_params, map_expr, reduce_expr, post_map_expr, identity, opts)
  local F = "reduction"
  local ins = parse_params(in_params, F, 1)
  local outs = parse_params(out_params, F, 2)
  if #outs ~= 1 then argerror(F, 2, "a reduction has one output parameter") end
  if outs[1].raw then argerror(F, 2, "the output of a reduction cannot be raw") end
  for i, v in ipairs({ map_expr, reduce_expr, post_map_expr }) do
    if type(v) ~= "string" then argerror(F, i + 2, "string expected, got " .. typename(v)) end
  end
  if type(identity) == "number" then identity = tostring(identity)
  elseif type(identity) ~= "string" then argerror(F, 6, "string or number expected, got " .. typename(identity)) end
  opts = check_opts(opts, { name = true, preamble = true, reduce_type = true }, F, 7)
  if opts.name ~= nil and (type(opts.name) ~= "string" or not opts.name:match("^[%a_][%w_]*$")) then
    raise("bad option 'name' to 'reduction' (a C identifier expected)")
  end
  local rdt = opts.reduce_type
  if rdt ~= nil and not (type(rdt) == "string" and (dtype_of_name(rdt) or rdt:match("^[%a_][%w_]*$"))) then
    raise("bad option 'reduce_type' to 'reduction' (a dtype or a type parameter's name expected)")
  end
  local name = opts.name or "cdv_reduction"
  local all = {}
  for _, p in ipairs(ins) do all[#all + 1] = p end
  all[#all + 1] = outs[1]
  local function call(_, ...)
    local nargs = select("#", ...)
    local args = { ... }
    local copts = {}
    if nargs > 0 and type(args[nargs]) == "table" and not is_array(args[nargs]) then
      copts = check_opts(args[nargs], { axis = true, keepdims = true, stream = true }, name, nargs)
      nargs = nargs - 1
    end
    if nargs ~= #ins and nargs ~= #ins + 1 then
      raise(fmt("%s: expected %d input arguments (or %d with the output), got %d", name, #ins, #ins + 1, nargs))
    end
    for i, p in ipairs(ins) do
      local v = args[i]
      if not is_array(v) and (p.raw or (type(v) ~= "number" and type(v) ~= "boolean")) then
        argerror(name, i, fmt("'%s': Array%s expected, got %s", p.name, p.raw and "" or " or number", typename(v)))
      end
    end
    if nargs > #ins and not is_array(args[nargs]) then
      argerror(name, nargs, fmt("'%s': output Array expected, got %s", outs[1].name, typename(args[nargs])))
    end
    local bound = bind_types(all, { unpack(args, 1, nargs) }, name)
    local sin = {}
    for i, p in ipairs(ins) do
      local t = p.generic and bound[p.type] or (not p.generic and p.type)
      if not t then raise(fmt("%s: cannot tell the type %s of '%s' from the arguments", name, p.type, p.name)) end
      if is_array(args[i]) and args[i].dtype ~= t then
        argerror(name, i, fmt("'%s' is %s but the kernel takes %s (convert with a:astype(\"%s\"))", p.name, args[i].dtype, t, t))
      end
      sin[i] = { name = p.name, dtype = t, value = args[i], raw = p.raw }
    end
    local op = outs[1]
    local ot = op.generic and bound[op.type] or (not op.generic and op.type)
    if not ot then raise(fmt("%s: cannot tell the type %s of '%s' from the arguments", name, op.type, op.name)) end
    local rt = rdt and (dtype_of_name(rdt) or bound[rdt]) or ot
    if not rt then raise(fmt("%s: cannot tell the reduce type %s from the arguments", name, rdt)) end
    local defs = {}
    for tn, d in pairs(bound) do defs[#defs + 1] = fmt("typedef %s %s;", DT[d].ctype, tn) end
    table.sort(defs)
    return (run_reduction({ fname = name, name = name, ins = sin, out = { name = op.name, dtype = ot, value = nargs > #ins and args[#ins + 1] or nil },
      rtype = { ctype = DT[rt].ctype, dtype = rt }, map_expr = map_expr, reduce_expr = reduce_expr, post_map = post_map_expr,
      identity = identity, preamble = concat(defs, "\n") .. "\n" .. (opts.preamble or ""), axis = copts.axis,
      keepdims = copts.keepdims, stream = copts.stream }))
  end
  return setmetatable({}, { __call = internal.public(name, call, 1), __name = "cudadev.ReductionKernel",
    __tostring = function() return fmt("ReductionKernel(%s: %s -> %s)", name, in_params, out_params) end })
end

-- ------------------------------------------------------------------------------------------ operators
-- The unsigned type in which a kind-i calculation wraps instead of overflowing (signed overflow is undefined
-- in C: arithmetic on signed integers is done on their unsigned twins and converted back, which is NumPy's
-- wrap-around).
local function wrap_type(d)
  local T = DT[d]
  if T.kind == "i" or T.kind == "u" then return T.size == 8 and "unsigned long long" or "unsigned int" end
end

-- Each binary operation's rules, one place for every implementation of it (the generated kernels here, and any
-- precompiled loop, which must give the same answers). Of the promoted dtype r (result_type of the operands)
-- and the operands' own dtypes da, db (a Lua number's is r):
--   result(r, da, db): the result dtype;
--   compute(r, da, db): the dtype both operands are converted to, and the expression computed in (its C
--     calculation type: float16 in float), when it is not r: true division computes in the result's float type,
--     not in the integers (C's truncating quotient, and a trap for a zero divisor);
--   expr(c, W): the C expression of x and y, already of compute dtype c's calculation type (W: c's wrapping
--     type, nil for floats and bool);
--   bool_as: the dtype r becomes when it is bool (NumPy's loops for these start at int8);
--   refuse(r): a message when the operation is not defined for r;
--   exact_scalars: a Lua integer outside r's range is compared exactly (NOTE [exact comparisons]) instead of
--     raising (where compute gives another dtype than r, such an integer is converted to it, as NumPy 2 does);
--   cmp: a comparison's C operator; a signed integer and a uint64 (promoted to float64) are compared exactly,
--     each as its own 64-bit type (NOTE [exact comparisons]).
local BIN = {}
local function bin(name, sym, result, expr, more)
  local op = { name = name, sym = sym, result = result, expr = expr }
  for k, v in pairs(more or {}) do op[k] = v end
  BIN[name] = op
end
local function same(r) return r end
local function to_bool() return "bool" end
-- true division: float64 for integers and bool, whatever their size (NumPy's true_divide)
local function true_div(r) return (DT[r].kind == "f" or DT[r].kind == "c") and r or "float64" end
-- the float of an integer, as NumPy's unary and binary float functions find their loops: bool and 8-bit
-- integers float16, 16-bit float32, wider float64 (a float stays)
local function float_result(d) return DT[d].kind == "f" and d or promote2(d, "float16") end
-- a binary float function: the smallest float both operands' floats convert to (arctan2 of int8 and uint8 is
-- float16, though int8 + uint8 is int16)
local function float_pair(_, da, db) return promote2(float_result(da), float_result(db)) end
local function int_only(r)
  if DT[r].kind == "f" then return "bitwise operations take integer or bool arrays, not " .. r end
end

bin("add", "+", same, function(r, W)
  if r == "bool" then return "x || y" end
  return W and fmt("(%s)x + (%s)y", W, W) or "x + y"
end, { complex = true })
bin("sub", "-", same, function(r, W)
  return W and fmt("(%s)x - (%s)y", W, W) or "x - y"
end, { refuse = function(r)
  if r == "bool" then return "boolean subtract is not supported; use bxor (~) or a:astype(\"int8\") first" end
end, complex = true })
bin("mul", "*", same, function(r, W)
  if r == "bool" then return "x && y" end
  return W and fmt("(%s)x * (%s)y", W, W) or "x * y"
end, { complex = true })
bin("div", "/", true_div, function() return "x / y" end, { compute = true_div, complex = true })
bin("floordiv", "//", same, function(r, W)
  local K = DT[r].kind
  if K == "f" then return "_cdv_floordiv(x, y)" end
  if K == "u" then return "y == 0 ? 0 : x / y" end
  -- floor, not C's truncation; a zero divisor gives 0 (NumPy's answer) and MIN // -1 wraps, instead of a trap
  return fmt("y == 0 ? 0 : y == -1 ? (%s)0 - (%s)x : (x / y - ((x %% y != 0) && ((x < 0) != (y < 0))))", W, W)
end, { bool_as = "int8" })
bin("mod", "%", same, function(r)
  local K = DT[r].kind
  if K == "f" then return "_cdv_remainder(x, y)" end
  if K == "u" then return "y == 0 ? 0 : x % y" end
  return "(y == 0 || y == -1) ? 0 : ((x % y != 0) && ((x % y < 0) != (y < 0))) ? x % y + y : x % y"
end, { bool_as = "int8" })
bin("pow", "^", same, function(r, W)
  if DT[r].kind == "f" then return "pow(x, y)" end
  return fmt("_cdv_ipow<%s, %s>(x, y)", DT[r].calc, W)
end, { bool_as = "int8" })
bin("minimum", nil, same, function(r)
  return DT[r].kind == "f" and "(x != x || x < y) ? x : y" or "x < y ? x : y"
end)
bin("maximum", nil, same, function(r)
  return DT[r].kind == "f" and "(x != x || x > y) ? x : y" or "x > y ? x : y"
end)
bin("atan2", nil, float_pair, function() return "atan2(x, y)" end, { compute = float_pair })
bin("hypot", nil, float_pair, function() return "hypot(x, y)" end, { compute = float_pair })
bin("band", "&", same, function(r) return r == "bool" and "x && y" or "x & y" end, { refuse = int_only })
bin("bor", "|", same, function(r) return r == "bool" and "x || y" or "x | y" end, { refuse = int_only })
bin("bxor", "~", same, function(r) return r == "bool" and "x != y" or "x ^ y" end, { refuse = int_only })
bin("shl", "<<", same, function(r, W)
  return fmt("(y < 0 || y >= %d) ? 0 : (%s)x << y", DT[r].size * 8, W or "unsigned int")
end, { refuse = int_only, bool_as = "int8" })
bin("shr", ">>", same, function(r)
  return fmt("(y < 0 || y >= %d) ? (x < 0 ? -1 : 0) : x >> y", DT[r].size * 8)
end, { refuse = int_only, bool_as = "int8" })
for _, c in ipairs({ { "eq", "==" }, { "ne", "!=" }, { "lt", "<" }, { "le", "<=" }, { "gt", ">" }, { "ge", ">=" } }) do
  bin(c[1], nil, to_bool, function() return "x " .. c[2] .. " y" end, { exact_scalars = true, cmp = c[2],
    complex = c[1] == "eq" or c[1] == "ne" })
end

-- NOTE [exact comparisons]: NumPy 2 compares an integer array with a Python integer outside its dtype's range
-- exactly (uint8 < 256 is true everywhere, uint8 == -1 false), where arithmetic raises. Here such a comparison
-- is computed in a dtype that holds both: int64 (every Lua integer, and every value of the integer dtypes up to
-- 32 bits), or for uint64, whose only out-of-range Lua integers are negative, float64 (the conversion keeps every
-- uint64 value non-negative and every negative integer negative, which is all the comparison needs).
local function wide_compare(r) return r == "uint64" and "float64" or "int64" end
-- Two integer arrays, one of them uint64 and the other signed, promote to float64, which rounds above 2^53 (2^63 - 1
-- and 2^63 compared equal); NumPy (1.25 and later) compares them exactly, and so do comparisons here: each operand
-- as its own 64-bit type, through _cdv_cmp.
local function mixed_ints(r, da, db)
  return r == "float64" and DT[da].kind ~= "f" and DT[db].kind ~= "f"
end
local function int64_type(d) return DT[d].kind == "u" and "unsigned long long" or "long long" end

-- helpers the expressions use, in every kernel that needs them. _cdv_divmod is NumPy's npy_divmod: the
-- quotient from (x - fmod(x, y)) / y snapped to an integer, not floor(x / y), whose rounding gives 10 for
-- 1 // 0.1 (NumPy and Python: 9); an infinite x gives NaN, a zero remainder takes the divisor's sign.
local HELPERS = [[
template <typename T> __device__ __forceinline__ T _cdv_divmod(T x, T y, T *mod) {
  T m = fmod(x, y);
  if (!y) { *mod = m; return x / y; }
  T d = (x - m) / y;
  if (m) {
    if ((y < 0) != (m < 0)) { m += y; d -= 1; }
  } else {
    m = copysign((T)0, y);
  }
  T q;
  if (d) {
    q = floor(d);
    if (d - q > (T)0.5) q += 1;
  } else {
    q = copysign((T)0, x / y);
  }
  *mod = m;
  return q;
}
// a signed and an unsigned 64-bit integer, compared exactly: -1, 0 or 1 (NOTE [exact comparisons])
__device__ __forceinline__ int _cdv_cmp(long long s, unsigned long long u) {
  return (s < 0 || (unsigned long long)s < u) ? -1 : (unsigned long long)s > u;
}
__device__ __forceinline__ int _cdv_cmp(unsigned long long u, long long s) { return -_cdv_cmp(s, u); }
template <typename T> __device__ __forceinline__ T _cdv_floordiv(T x, T y) { T m; return _cdv_divmod(x, y, &m); }
template <typename T> __device__ __forceinline__ T _cdv_remainder(T x, T y) { T m; _cdv_divmod(x, y, &m); return m; }
// integer powers multiply in the unsigned twin W: signed overflow is undefined in C
template <typename T, typename W> __device__ __forceinline__ T _cdv_ipow(T x, T y) {
  if (y < 0) return x == 1 ? 1 : x == (T)-1 ? ((y & 1) ? (T)-1 : 1) : 0;
  W r = 1, b = (W)x;
  for (; y; y >>= 1, b = b * b) if (y & 1) r = r * b;
  return (T)r;
}
]]

local INT_RANGE = {
  int8 = { -128, 127 }, int16 = { -32768, 32767 }, int32 = { -2147483648, 2147483647 },
  uint8 = { 0, 255 }, uint16 = { 0, 65535 }, uint32 = { 0, 4294967295 }, uint64 = { 0, math.maxinteger },
}

-- A Lua number given for an integer dtype must fit it (NumPy 2 raises the same way).
local function scalar_fits(v, d)
  local r = INT_RANGE[d]
  return not (r and math.type(v) == "integer" and (v < r[1] or v > r[2]))
end

local function scalar_fits_all(vs, d, arr)
  arr = arr or is_array
  for _, v in ipairs(vs) do if not arr(v) and not scalar_fits(v, d) then return false end end
  return true
end

local function check_scalar_fits(v, d, fname)
  if not scalar_fits(v, d) then raise(fmt("%s: Lua integer %d is out of bounds for %s", fname, v, d)) end
end

-- Kinds ordered for in-place casting (NumPy's same_kind): a result may be stored into an array of its kind
-- or a later one.
local KIND_ORDER = { b = 0, u = 1, i = 2, f = 3, c = 4 }

-- what an operation not written for the complex dtypes says of them (NOTE [complex dtypes])
local COMPLEX_OPS = "the complex dtypes have + - * /, unary -, eq, ne, abs, real, imag, conj, angle, sum, mean and cd.fft"
local function refuse_complex(fname, d)
  raise(fmt("%s: %s arrays are not supported (%s)", fname, d, COMPLEX_OPS))
end

local function check_operand(v, fname, n)
  if not is_array(v) and type(v) ~= "number" and type(v) ~= "boolean" then
    argerror(fname, n, "Array or number expected, got " .. typename(v), 2)
  end
end

-- NOTE [binary fast path]: x OP y of two contiguous Arrays of one shape on one device, without stream=, is the common
-- case, and the general path (checks, the result dtype, the kernel's body and key, broadcasting) cost about 20 us a
-- call on the cpu device, most of a small a + b, and as long again on the H100's host, where the GPU waited for it.
-- Once that path has run for an operator, dtypes and device, its result dtype and Kernel are kept here, and the next
-- such call checks the operands, allocates and launches. out= of the result's dtype, shape and device, contiguous,
-- takes it too and allocates nothing: cd.add(a, b, {out = c}) is the form meant to be the cheapest (issue 28: it
-- took the general path, 36 us at 2^10 on the H100 where a + b took 11). A reset (dev.generation) sends it down the
-- general path again.
local fast_bin = fast_cache()   -- [Device][op][x.dtype][y.dtype] = {k, loop, res, gen, n, cfg}
-- The checks are one C call (__pair: the device, its generation, the dtypes and the size, where reading them as
-- fields took a dozen __index calls) and the result one more (__like); the kernel's launch configuration is kept
-- for the last size. At 2^10 float32 on the cpu device (callgrind, instructions a call): cd.add(a, b, {out = c})
-- 37900 before, a + b 35000.
local pair_c, like_c = array_mt.__pair, array_mt.__like
-- taken now: a script that replaces cd.launch_config does not reach the operators
local launch_config = assert(cd.launch_config, "cd.launch_config is opened before ops.lua")

local function fast_binary(op, x, y, out)
  local dev, gen, xd, yd, n, od = pair_c(x, y, out)
  if dev == nil then return nil end
  local f = fast_bin[dev]
  f = f and f[op]
  f = f and f[xd]
  f = f and f[yd]
  if f == nil or f.gen ~= gen or (out ~= nil and od ~= f.res) then return nil end
  local o = out or like_c(x, f.res)
  if n == 0 then return o end
  if f.loop then
    local lp = f.loop
    if loop_c(lp.op, lp.calc, lp.calc2, lp.res, lp.bits, o, x, xd, y, yd) then return o end
    return nil   -- loops turned off since: the general path
  end
  if f.n ~= n then f.n, f.cfg = n, launch_config({ grid = grid_for(dev, n), block = BLOCK }) end
  f.k(f.cfg, x, y, o, n)
  return o
end

-- the fast path's entry for op on dtypes xd, yd of dev (NOTE [binary fast path])
local function keep_fast(dev, op, xd, yd, entry)
  local t = fast_bin[dev] or {}
  fast_bin[dev] = t
  t[op] = t[op] or {}
  t[op][xd] = t[op][xd] or {}
  t[op][xd][yd] = entry
end

-- NOTE [operation plans]: what an operation computes, apart from running it: the checks on its operands, its
-- dtypes, and its C code, given the operands' dtypes and Lua scalars. binary(), unary() and cd.where make a kernel
-- of one plan; cd.fuse (fuse.lua) joins the plans of a traced function into one kernel, so its answers are the
-- unfused operators' by construction. arr says which operands are arrays (cd.fuse's stand-ins are too).

-- The plan of x OP y: {r = promoted dtype, cdt = compute dtype, res = result dtype, xdt, ydt = the dtypes the
-- operands arrive in (a scalar's: the promoted dtype, or the compute dtype where it does not fit:
-- NOTE [exact comparisons]), pre = C statements declaring x and y in the compute type from x_ and y_, value = the
-- result's C expression in its calculation type}.
local function plan_binary(op, x, y, fname, arr)
  arr = arr or is_array
  if not arr(x) and not arr(y) then raise(fmt("%s: at least one operand must be an Array", fname)) end
  local r = result_type({ x, y }, arr)
  if DT[r].kind == "c" and not op.complex then refuse_complex(fname, r) end
  if r == "bool" and op.bool_as then r = op.bool_as end
  local why = op.refuse and op.refuse(r)
  if why then raise(fmt("%s: %s", fname, why)) end
  local da, db = arr(x) and x.dtype or r, arr(y) and y.dtype or r
  local cdt = op.compute and op.compute(r, da, db) or r
  for _, v in ipairs({ x, y }) do
    if not arr(v) and not scalar_fits(v, r) then
      -- NumPy 2 converts such an integer to the type the operation computes in where that is not r's (true
      -- division, arctan2, hypot: a float), and refuses it where r's integers would hold it
      if op.exact_scalars then cdt = wide_compare(r) elseif cdt == r then check_scalar_fits(v, r, fname) end
    end
  end
  local C = DT[cdt].calc
  local sdt = scalar_fits_all({ x, y }, r, arr) and r or cdt
  local expr = op.expr(cdt, wrap_type(cdt))
  -- NOTE [square power]: a float array to the Lua number 2 is x * x, as NumPy's ** computes it (its power
  -- operator's fast path is np.square): the product is correctly rounded (pow's is within an ulp or two, on the
  -- GPU), and a multiplication where pow costs tens of instructions: ((x - y) ^ 2):sum() fused was bound by it.
  -- The plan then depends on y's value, not only its kind: square says so (the kernel's key, the cpu loop, and
  -- cd.fuse's check of a Lua-number argument at each call).
  local square = op.name == "pow" and DT[cdt].kind == "f" and not arr(y) and y == 2
  if square then expr = "x * x" end
  local xC, yC = C, C
  if op.cmp and mixed_ints(r, da, db) then
    xC, yC, expr = int64_type(da), int64_type(db), fmt("_cdv_cmp(x, y) %s 0", op.cmp)
  end
  local res = op.result(r, da, db)
  return { r = r, cdt = cdt, res = res, xdt = arr(x) and x.dtype or sdt, ydt = arr(y) and y.dtype or sdt, xC = xC, yC = yC,
    square = square, pre = fmt("const %s x = (%s)x_; const %s y = (%s)y_;", xC, xC, yC, yC),
    value = fmt("(%s)(%s)", DT[res].calc, expr) }
end

-- The dtype an operation's result of dtype res is stored in: res, or out's (NumPy's same_kind casting).
local function out_dtype(res, out, fname)
  if out == nil then return res end
  if not is_array(out) then raise(fmt("bad option 'out' to '%s' (Array expected, got %s)", fname, typename(out))) end
  if KIND_ORDER[DT[res].kind] > KIND_ORDER[DT[out.dtype].kind] then
    raise(fmt("%s: the result is %s, which cannot be stored in %s %s array (use an out of the result's dtype, " ..
      "or a:astype first)", fname, res, DT[out.dtype].kind == "i" and "an" or "a", out.dtype))
  end
  return out.dtype
end

-- x OP y -> Array; out: an Array to write (in place when it is x), stream: where to run.
local function binary(op, x, y, out, stream, fname)
  if stream == nil then
    local o = fast_binary(op, x, y, out)
    if o then return o end
  end
  local both = stream == nil and is_array(x) and is_array(y) and (out == nil or is_array(out))
  fname = fname or op.name
  if fuse_stand_in(x) or fuse_stand_in(y) then return internal.fuse_binary(op, x, y, out, stream, fname) end
  check_operand(x, fname, 1)
  check_operand(y, fname, 2)
  local p = plan_binary(op, x, y, fname)
  local res, odt = p.res, out_dtype(p.res, out, fname)
  local ins = { { name = "x_", dtype = p.xdt, value = x }, { name = "y_", dtype = p.ydt, value = y } }
  local body = fmt("{ %s z = (%s)(%s); }", p.pre, DT[odt].ctype, p.value)
  -- (NOTE [cpu loops]) y's calc type is given apart where it is not x's (a signed and a uint64 array compared)
  local lp = { op = p.square and "square" or op.name, calc = dtype_of_name(p.xC), calc2 = p.xC ~= p.yC and dtype_of_name(p.yC) or nil,
    res = dtype_of_name(DT[res].calc), bits = DT[p.cdt].size * 8 }
  local o, k = run_elementwise({ fname = fname, name = "cdv_" .. op.name, ins = ins,
    outs = { { name = "z", dtype = odt, value = out } }, body = body, preamble = HELPERS,
    key = "bin:" .. op.name .. (p.square and "2:" or ":") .. p.r .. ":" .. p.cdt .. ":" .. res .. ":" .. odt,
    stream = stream, loop = lp })
  -- the kernel of contiguous operands of one shape (its arguments are x, y, z, n), or the loop that ran instead
  -- of one: NOTE [binary fast path]
  if both and x.is_contiguous and y.is_contiguous and same_shape(x.shape, y.shape) and o[1].size > 0 and
      (out == nil or (odt == res and out.is_contiguous and same_shape(out.shape, x.shape))) then
    local dev = x.device
    keep_fast(dev, op, x.dtype, y.dtype, { k = k, loop = not k and lp, res = odt, gen = dev.generation })
  end
  return o[1]
end

local function op_opts(opts, fname, n)
  if type(opts) == "table" and next(opts) == "out" and next(opts, "out") == nil then return opts.out end  -- {out=}
  opts = check_opts(opts, { out = true, stream = true }, fname, n)
  return opts.out, opts.stream
end

-- cd.add(x, y [, {out=, stream=}]) and the other binary functions; operators and in-place methods.
local FNAMES = { add = "add", sub = "subtract", mul = "multiply", div = "divide", floordiv = "floor_divide",
                 mod = "remainder", pow = "power", minimum = "minimum", maximum = "maximum", atan2 = "arctan2",
                 hypot = "hypot", band = "bitwise_and", bor = "bitwise_or", bxor = "bitwise_xor",
                 shl = "left_shift", shr = "right_shift", eq = "equal", ne = "not_equal", lt = "less",
                 le = "less_equal", gt = "greater", ge = "greater_equal" }
for key, fname in pairs(FNAMES) do
  local op = BIN[key]
  cd[fname] = function(x, y, opts)
    local out, stream = op_opts(opts, fname, 3)
    return binary(op, x, y, out, stream, fname)
  end
end

local META = { add = "__add", sub = "__sub", mul = "__mul", div = "__div", floordiv = "__idiv", mod = "__mod",
               pow = "__pow", band = "__band", bor = "__bor", bxor = "__bxor", shl = "__shl", shr = "__shr" }
for key, mm in pairs(META) do
  local op = BIN[key]
  local fname = "operator " .. op.sym
  array_mt[mm] = function(x, y) return binary(op, x, y, nil, nil, fname) end
end

-- a:eq(b), a:lt(b), ...: comparisons as bool arrays (Lua's == and < must answer a boolean)
for _, key in ipairs({ "eq", "ne", "lt", "le", "gt", "ge" }) do
  local op = BIN[key]
  methods[key] = function(a, b, opts)
    local out, stream = op_opts(opts, key, 2)
    return binary(op, a, b, out, stream, key)
  end
end

-- a:add_(b) and the other in-place forms: a is the output, its dtype kept (NumPy's same_kind casting)
for _, key in ipairs({ "add", "sub", "mul", "div", "floordiv", "mod", "pow", "band", "bor", "bxor", "shl", "shr" }) do
  local op, mname = BIN[key], key .. "_"
  methods[mname] = function(a, b, opts)
    if not is_array(a) then argerror(mname, 1, "Array expected, got " .. typename(a)) end
    opts = check_opts(opts, { stream = true }, mname, 2)
    binary(op, a, b, a, opts.stream, mname)
    return a
  end
  -- the same under the function's name, as PyTorch users write it (a:subtract_, a:remainder_, a:bitwise_and_)
  if FNAMES[key] ~= key then methods[FNAMES[key] .. "_"] = methods[mname] end
end

-- ------------------------------------------------------------------------------------------ unary functions
-- Each unary operation's rules, one place for every implementation of it (as BIN's): result(d) gives the result
-- dtype of an input of dtype d; the expression expr(C, W, d) of x is computed in C, the result's calculation type
-- (the input's for a bool result), W being d's wrapping type; refuse(d) gives a message when the operation is not
-- defined for d. Results of integer inputs of the float functions are floats as in NumPy (bool and 8-bit integers
-- give float16, 16-bit float32, wider float64); floor, ceil and trunc of integers and bool keep the dtype, as
-- NumPy 2.1 and the Array API standard do.
local MATH = {}
for _, f in ipairs({ "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "cbrt", "sin", "cos", "tan",
                     "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "rint", "erf",
                     "erfc" }) do
  MATH[f] = { result = float_result, expr = function(C) return fmt("%s%s(x)", f, C == "float" and "f" or "") end }
end
for _, f in ipairs({ "floor", "ceil", "trunc" }) do
  MATH[f] = { result = same, expr = function(C, _, d)
    if DT[d].kind ~= "f" then return "x" end
    return fmt("%s%s(x)", f, C == "float" and "f" or "")
  end }
end
local NUMPY_NAMES = { arcsin = "asin", arccos = "acos", arctan = "atan", arcsinh = "asinh", arccosh = "acosh",
                      arctanh = "atanh" }
-- the real dtype of a complex one's parts (complex64: float32); any other dtype itself
local function real_of(d)
  if DT[d].kind ~= "c" then return d end
  return d == "complex64" and "float32" or "float64"
end
MATH.abs = { result = real_of, complex = true, expr = function(C, W, d)
  if DT[d].kind == "c" then return "_cdv_abs(x)" end
  if DT[d].kind == "f" then return C == "float" and "fabsf(x)" or "fabs(x)" end
  if DT[d].kind == "i" then return fmt("x < 0 ? (%s)(0 - (%s)x) : x", C, W) end
  return "x"
end }
MATH.negative = { result = same, complex = true, expr = function(C, W, d)
  if DT[d].kind == "f" or DT[d].kind == "c" then return "-x" end
  return fmt("(%s)(0 - (%s)x)", C, W)
end, refuse = function(d)
  if d == "bool" then return "the unary minus is not supported for bool arrays; use cd.logical_not" end
end }
MATH.sign = { result = same, expr = function(C, W, d)
  if DT[d].kind == "u" then return "x > 0" end
  return "x != x ? x : (x > 0) - (x < 0)"
end, refuse = function(d)
  if d == "bool" then return "bool arrays have no sign (NumPy refuses them too); convert with a:astype(\"int8\")" end
end }
-- bool squares in int8, as NumPy's square has no bool loop
MATH.square = { result = function(d) return d == "bool" and "int8" or d end, expr = function(C, W, d)
  return W and fmt("(%s)x * (%s)x", W, W) or "x * x"
end }
MATH.isnan = { result = to_bool, expr = function(_, _, d) return DT[d].kind == "f" and "x != x" or "false" end }
MATH.isinf = { result = to_bool, expr = function(C, _, d)
  return DT[d].kind == "f" and fmt("x == x && (x - x) != (x - x)") or "false"
end }
MATH.isfinite = { result = to_bool, expr = function(_, _, d) return DT[d].kind == "f" and "(x - x) == (x - x)" or "true" end }
MATH.logical_not = { result = to_bool, expr = function() return "!x" end }
-- NumPy's real, imag, conj and angle: of a real array, itself, zeros, itself and 0 or pi (angle of an integer array is
-- a float, as NumPy's arctan2(0, x) gives); complex_only: no cpu loop has them, for any dtype
MATH.real = { complex_only = true, result = real_of, complex = true, expr = function(_, _, d) return DT[d].kind == "c" and "x.re" or "x" end }
MATH.imag = { complex_only = true, result = real_of, complex = true, expr = function(_, _, d) return DT[d].kind == "c" and "x.im" or "0" end }
-- (conj of bool is int8: NumPy's conjugate has no bool loop)
MATH.conj = { complex_only = true, result = function(d) return d == "bool" and "int8" or d end, complex = true, expr = function(_, _, d) return DT[d].kind == "c" and "_cdv_conj(x)" or "x" end }
MATH.conjugate = MATH.conj   -- NumPy's two names: each its own function, so that errors name the one called
MATH.angle = { complex_only = true, result = function(d) return DT[d].kind == "c" and real_of(d) or float_result(d) end, complex = true,
  expr = function(C, _, d)
    if DT[d].kind == "c" then return "_cdv_angle(x)" end
    return fmt("atan2((%s)0, x)", C)
  end }

-- The plan of a unary operation on an array of dtype d (NOTE [operation plans]): {res = result dtype, pre = C
-- declaring x from x_, value = the result's C expression}. It is computed in the result's calculation type (an
-- integer input of a float function is converted first; the input's for a bool result).
local function plan_unary(name, spec, d)
  if DT[d].kind == "c" and not spec.complex then refuse_complex(name, d) end
  local why = spec.refuse and spec.refuse(d)
  if why then raise(fmt("%s: %s", name, why)) end
  local res = spec.result(d)
  -- a complex input stays complex: abs, real, imag and angle read its parts
  local C = (DT[res].kind == "b" or DT[d].kind == "c") and DT[d].calc or DT[res].calc
  return { res = res, C = C, pre = fmt("const %s x = (%s)x_;", C, C), value = spec.expr(C, wrap_type(d), d) }
end

local function unary(name, spec, x, out, stream)
  if fuse_stand_in(x) then return internal.fuse_unary(name, spec, x, out, stream) end
  if not is_array(x) then argerror(name, 1, "Array expected, got " .. typename(x), 1) end
  local d = x.dtype
  local p = plan_unary(name, spec, d)
  local res = p.res
  local odt = res
  if out ~= nil then
    if not is_array(out) then raise(fmt("bad option 'out' to '%s' (Array expected, got %s)", name, typename(out))) end
    if KIND_ORDER[DT[res].kind] > KIND_ORDER[DT[out.dtype].kind] then
      raise(fmt("%s: the result is %s, which cannot be stored in a %s array", name, res, out.dtype))
    end
    odt = out.dtype
  end
  local body = fmt("{ %s z = (%s)(%s); }", p.pre, DT[odt].ctype, p.value)
  local lp = { op = name, calc = dtype_of_name(p.C), res = DT[res].kind == "b" and "bool" or dtype_of_name(p.C) }
  return run_elementwise({ fname = name, name = "cdv_" .. name, ins = { { name = "x_", dtype = d, value = x } },
    outs = { { name = "z", dtype = odt, value = out } }, body = body, key = "un:" .. name .. ":" .. d .. ":" .. odt,
    stream = stream, loop = not spec.complex_only and lp or nil })[1]
end

for name, spec in pairs(MATH) do
  cd[name] = function(x, opts)
    local out, stream = op_opts(opts, name, 2)
    return unary(name, spec, x, out, stream)
  end
end
for np, c in pairs(NUMPY_NAMES) do cd[np] = cd[c] end
for _, n in ipairs({ "real", "imag", "conj", "conjugate" }) do methods[n] = cd[n] end
array_mt.__unm = function(x) return unary("negative", MATH.negative, x) end
array_mt.__bnot = function(x)
  if DT[x.dtype].kind == "f" then raise("operator ~: bitwise not takes integer or bool arrays, not " .. x.dtype) end
  return unary("invert", { result = same, expr = function(C, W, d) return d == "bool" and "!x" or "~x" end }, x)
end
methods.abs = function(a, opts) return cd.abs(a, opts) end

-- cd.where(cond, x, y [, {out=, stream=}]): x where cond is nonzero, else y (broadcast together)
-- The plan of cd.where (NOTE [operation plans]): {res = result dtype, value = the C expression of c_, x_, y_}.
local function plan_where(c, x, y, arr)
  arr = arr or is_array
  local r = result_type({ x, y }, arr)
  for _, v in ipairs({ x, y }) do if not arr(v) then check_scalar_fits(v, r, "where") end end
  local C, CC = DT[r].calc, DT[c.dtype].calc
  return { res = r, C = C, value = fmt("((%s)c_ != 0) ? (%s)(%s)x_ : (%s)(%s)y_", CC, DT[r].ctype, C, DT[r].ctype, C) }
end

function cd.where(c, x, y, opts)
  if fuse_stand_in(c) or fuse_stand_in(x) or fuse_stand_in(y) then return internal.fuse_where(c, x, y, opts) end
  if not is_array(c) then argerror("where", 1, "Array expected, got " .. typename(c)) end
  check_operand(x, "where", 2)
  check_operand(y, "where", 3)
  local out, stream = op_opts(opts, "where", 4)
  local p = plan_where(c, x, y)
  local r = p.res
  if out ~= nil and out.dtype ~= r then
    raise(fmt("where: output is %s but the result is %s", out.dtype, r))
  end
  local body = "z = " .. p.value
  return run_elementwise({ fname = "where", name = "cdv_where", stream = stream, key = "where:" .. r,
    ins = { { name = "c_", dtype = c.dtype, value = c }, { name = "x_", dtype = is_array(x) and x.dtype or r, value = x },
            { name = "y_", dtype = is_array(y) and y.dtype or r, value = y } },
    outs = { { name = "z", dtype = r, value = out } }, body = body,
    loop = { op = "where", calc = dtype_of_name(p.C), res = dtype_of_name(p.C) } })[1]
end


-- ------------------------------------------------------------------------------------------ array reductions
-- The largest and smallest values of a dtype as C expressions (floats: the infinities), for identities.
local function extreme(d, high)
  local T = DT[d]
  if T.kind == "f" then return high and "_cdv_inf()" or "-_cdv_inf()" end
  if T.kind == "b" then return high and "true" or "false" end
  if T.kind == "u" then return high and fmt("(%s)~0ull", T.calc) or "0" end
  local bits = T.size * 8
  if bits == 64 then return high and "9223372036854775807ll" or "(-9223372036854775807ll - 1)" end
  return high and tostring((1 << (bits - 1)) - 1) or tostring(-(1 << (bits - 1)))
end

local INF = [[
__device__ __forceinline__ double _cdv_inf() { union { unsigned long long u; double d; } v; v.u = 0x7ff0000000000000ull; return v.d; }
]]

-- The accumulation dtype of sum and prod (NumPy's: integers and bool in 64 bits, floats as they are; float16
-- accumulates in float32 and is stored as float16).
local function sum_dtype(d)
  local K = DT[d].kind
  if K == "c" then return d, d end
  if K == "b" or K == "i" then return "int64", "int64" end
  if K == "u" then return "uint64", "uint64" end
  if d == "float16" then return "float16", "float32" end
  return d, d
end

-- The options of a reduction method: an axis (integer) or a table {axis=, keepdims=, out=, stream=}.
local function reduce_opts(v, fname)
  if v == nil then return {} end
  if math.type(v) == "integer" then return { axis = v } end
  if type(v) ~= "table" or is_array(v) then argerror(fname, 2, "axis (integer) or options table expected, got " .. typename(v), 1) end
  return check_opts(v, { axis = true, keepdims = true, out = true, stream = true }, fname, 2)
end

-- The Lua value of a reduction's 0-d result: its element. A uint64 answer is the Lua integer with its 64 bits,
-- exact, as string.unpack("J") gives one (a[i] reads every uint64 element so): above 2^63 - 1 that integer is
-- negative (math.ult compares it as unsigned, ("%x"):format shows it).
local function lua_value(res)
  return res[1]
end

-- Runs a built-in reduction of a; with no axis and no out/keepdims the answer is a Lua value.
local function reduce(a, o, fname, r)
  if not is_array(a) then argerror(fname, 1, "Array expected, got " .. typename(a), 1) end
  if r.empty_error and a.size == 0 or (r.empty_error and o.axis ~= nil and a.ndim > 0) then
    local _, K = reduction_geometry(a.shape, o.axis, false, fname)
    if K == 0 then raise(fmt("%s: zero-size array to a reduction with no identity", fname)) end
  end
  local res, p1, p2 = run_reduction({ fname = fname, name = "cdv_" .. fname,
    ins = { { name = "x", dtype = a.dtype, value = a } }, out = { name = "y", dtype = r.out, value = o.out },
    rtype = r.rtype, map_expr = r.map, reduce_expr = r.reduce, post_map = r.post, identity = r.identity,
    preamble = r.preamble, axis = o.axis, keepdims = o.keepdims, stream = o.stream,
    loop = { op = fname, acc = r.acc or r.rtype.dtype } })
  if o.axis == nil and o.out == nil and not o.keepdims then return lua_value(res), p1, p2 end
  return res, p1, p2
end

-- NOTE [reduction fast path]: a:sum() or a:sum({out = o}) of a whole contiguous array is the common call, and
-- the general path (options, the description's strings, geometry, the kernels' key) cost the GPU about 20 us of
-- waiting on the H100 (a:sum() of 2^26 float32 took 126.9 us, its kernels 106). After that path has reduced a
-- whole array of a dtype on a device, its two kernels and dtypes are kept per method, and the next such call
-- allocates and launches (NOTE [reduction passes]; the same kernels and arguments).

-- nil or the Array of {out = Array} when those are all the options; false otherwise
local function plain_reduce_opts(v)
  if v == nil then return true, nil end
  if type(v) ~= "table" then return false end
  local k, out = next(v)
  if k == nil then return true, nil end
  if k ~= "out" or next(v, k) ~= nil or not is_array(out) then return false end
  return true, out
end

local function fast_reduce(kept, a, v)
  local plain, out = plain_reduce_opts(v)
  local dev = plain and a.device
  local f = dev and kept[dev] and kept[dev][a.dtype]
  if not f or f.gen ~= dev.generation or not a.is_contiguous then return nil end
  local K = a.size
  local nsplit = K > 0 and splits(dev, K, 1)
  if not nsplit or (nsplit > 1 and f.p2 == nil) then return nil end
  if out ~= nil and (out.device ~= dev or out.dtype ~= f.out or out.size ~= 1 or not out.is_contiguous) then return nil end
  local o = out or cd.empty({}, f.out, { device = dev })
  local part = nsplit > 1 and cd.empty(nsplit, f.rdt, { device = dev }) or nil
  f.p1({ grid = nsplit, block = RBLOCK }, a, o, part, K, 1, nsplit, nsplit == 1 and 1 or 0)
  if nsplit > 1 then f.p2({ grid = 1, block = RBLOCK }, part, o, K, nsplit) end
  if out ~= nil then return o end
  return lua_value(o)
end

-- A reduction method: make(dtype, opts) gives the reduction's description for reduce().
local REDUCTIONS = {}   -- [fname] = make, for cd.fuse's trailing reductions (NOTE [operation plans])
local function reduction_method(fname, make)
  REDUCTIONS[fname] = make
  local kept = fast_cache()   -- [Device][dtype] = {p1, p2, out, rdt, gen}: NOTE [reduction fast path]
  return function(a, v)
    if is_array(a) then
      local r = fast_reduce(kept, a, v)
      if r ~= nil then return r end
    end
    local o = reduce_opts(v, fname)
    if not is_array(a) then argerror(fname, 1, "Array expected, got " .. typename(a)) end
    if DT[a.dtype].kind == "c" and fname ~= "sum" and fname ~= "mean" then refuse_complex(fname, a.dtype) end
    local r = make(a.dtype, o)
    local res, p1, p2 = reduce(a, o, fname, r)
    if p1 and plain_reduce_opts(v) and r.rtype.dtype and a.is_contiguous then
      local dev = a.device
      kept[dev] = kept[dev] or {}
      local f = kept[dev][a.dtype]
      if f == nil or f.gen ~= dev.generation then
        f = { out = r.out, rdt = r.rtype.dtype, gen = dev.generation }
        kept[dev][a.dtype] = f
      end
      f.p1, f.p2 = p1, p2 or f.p2
    end
    return res
  end
end

local function sum_like(fname, reduce_expr, ident)
  return reduction_method(fname, function(d)
    local out, acc = sum_dtype(d)
    local W = wrap_type(acc)
    return { out = out, rtype = { ctype = DT[acc].ctype, dtype = acc }, map = fmt("(%s)x", DT[acc].ctype),
      reduce = W and fmt("(%s)(%s)", DT[acc].ctype, reduce_expr(W)) or reduce_expr(), post = fmt("y = (%s)a", DT[out].ctype),
      identity = ident }
  end)
end
methods.sum = sum_like("sum", function(W) return W and fmt("(%s)a + (%s)b", W, W) or "a + b" end, "0")
methods.prod = sum_like("prod", function(W) return W and fmt("(%s)a * (%s)b", W, W) or "a * b" end, "1")

methods.mean = reduction_method("mean", function(d)
  local out = (DT[d].kind == "f" or DT[d].kind == "c") and d or "float64"
  local acc = out == "float16" and "float32" or out
  return { out = out, rtype = { ctype = DT[acc].ctype, dtype = acc }, empty_error = true, map = fmt("(%s)x", DT[acc].ctype),
    reduce = "a + b", post = fmt("y = (%s)(a / (%s)_K)", DT[out].ctype, DT[acc].ctype), identity = "0" }
end)

local function minmax(fname, high)
  return reduction_method(fname, function(d)
    local C = DT[d].calc
    -- NaN wins, as NumPy's min and max propagate it
    local cmp = high and ">" or "<"
    local red = DT[d].kind == "f" and fmt("(a != a) ? a : (b != b) ? b : (a %s b ? a : b)", cmp) or fmt("a %s b ? a : b", cmp)
    return { out = d, rtype = { ctype = C, dtype = dtype_of_name(C) }, empty_error = true, map = fmt("(%s)x", C),
      reduce = red, post = fmt("y = (%s)a", DT[d].ctype), identity = extreme(d, not high), preamble = INF }
  end)
end
methods.max = minmax("max", true)
methods.min = minmax("min", false)

local function argminmax(fname, high)
  return reduction_method(fname, function(d, o)
    local C = DT[d].calc
    local cmp = high and ">" or "<"
    -- the first position of the extreme value (NaN first of all), 1-based as Lua counts
    local pre = INF .. fmt([[
struct _cdv_vi { %s v; long long i; };
__device__ __forceinline__ _cdv_vi _cdv_pick(_cdv_vi a, _cdv_vi b) {
  bool an = a.v != a.v, bn = b.v != b.v;
  if (an || bn) return (an && bn) ? (a.i <= b.i ? a : b) : (an ? a : b);
  if (b.v %s a.v) return b;
  if (a.v %s b.v) return a;
  return a.i <= b.i ? a : b;
}
]], C, cmp, cmp)
    -- i is the flat index; along an axis the position within the axis: (i / inner) % K
    local map = o.axis == nil and fmt("_cdv_vi{(%s)x, i}", C) or fmt("_cdv_vi{(%s)x, (i / _inner) %% _K}", C)
    return { out = "int64", rtype = { ctype = "_cdv_vi", size = 16 }, acc = dtype_of_name(C), empty_error = true, map = map,
      reduce = "_cdv_pick(a, b)", post = "y = a.i + 1", preamble = pre,
      identity = fmt("_cdv_vi{(%s)(%s), 9223372036854775807ll}", C, extreme(d, not high)) }
  end)
end
methods.argmax = argminmax("argmax", true)
methods.argmin = argminmax("argmin", false)

local function allany(fname, all)
  return reduction_method(fname, function(d)
    return { out = "bool", rtype = { ctype = "bool", dtype = "bool" }, map = fmt("(%s)x != 0", DT[d].calc),
      reduce = all and "a && b" or "a || b", post = "y = a", identity = all and "true" or "false" }
  end)
end
methods.all = allany("all", true)
methods.any = allany("any", false)
for _, n in ipairs({ "sum", "prod", "mean", "max", "min", "argmax", "argmin", "all", "any" }) do
  cd[n] = cd[n] or methods[n]
end
cd.amax, cd.amin = methods.max, methods.min

-- ------------------------------------------------------------------------------------------ ranges
local function range_opts(rest, fname, first)
  -- [dtype] [, opts]
  local dtype, opts = nil, nil
  if type(rest[1]) == "string" then dtype = rest[1]; opts = rest[2] else opts = rest[1] end
  if dtype and not dtype_of_name(dtype) then argerror(fname, first, "unknown dtype '" .. dtype .. "'", 2) end
  opts = check_opts(opts, { device = true, stream = true }, fname, first + (dtype and 1 or 0))
  return dtype and dtype_of_name(dtype), opts
end

-- i * step, rounded before start is added, as NumPy's linspace and arange add it: never fused into an FMA, whose
-- one rounding differs in the last bit (and then by 1 after linspace's floor). CUDA's __dmul_rn is never fused; the
-- cpu device's g++ contracts C++ even in ISO mode (its contract-off default is C's), so there the product goes
-- through a volatile.
local RANGE_MUL = [[
__device__ __forceinline__ double _cdv_mul_rn(double a, double b) {
#ifdef __CUDADEV_CPU__
  volatile double p = a * b;
  return p;
#else
  return __dmul_rn(a, b);
#endif
}
]]

-- floor: round each value down before it is stored (linspace into an integer dtype: NumPy floors, where a C
-- conversion truncates towards zero)
local function fill_range(fname, n, dtype, start, step, last, opts, floor)
  local dev = opts.device and cd.device(opts.device) or (opts.stream and opts.stream.device) or cd.get_device()
  local o = cd.empty(n, dtype, { device = dev, stream = opts.stream })
  if n == 0 then return o end
  local T = DT[dtype]
  -- integers count in 64-bit integers (wrapping), anything else in double
  local int = math.type(start) == "integer" and math.type(step) == "integer" and T.kind ~= "f"
  local C = int and "long long" or "double"
  local W = int and "unsigned long long"
  local expr = W and fmt("(%s)((%s)start + (%s)i * (%s)step)", C, W, W, W) or "start + _cdv_mul_rn((double)i, step)"
  if last ~= nil then expr = fmt("i == _n - 1 ? last : %s", expr) end
  if floor then expr = fmt("floor(%s)", expr) end
  local k = kernel_for(dev, "range:" .. dtype .. ":" .. C .. ":" .. tostring(last ~= nil) .. ":" .. tostring(floor), function()
    return concat({ header({ dtype }), W and "" or RANGE_MUL, fmt('extern "C" __global__ void cdv_range(%s *z, %s start, %s step, %s last, long long _n) {',
      T.ctype, C, C, C),
      "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < _n; i += (long long)blockDim.x * gridDim.x)",
      fmt("    z[i] = (%s)(%s);", T.ctype, expr), "}", "" }, "\n"), "cdv_range"
  end)
  k({ grid = grid_for(dev, n), block = BLOCK, stream = opts.stream }, o, start, step, last or start, n)
  return o
end

-- cd.arange([start,] stop [, step] [, dtype] [, opts]): start, start + step, ... up to but not including stop
-- (NumPy's arange: int64 when every bound is an integer, else float64).
function cd.arange(...)
  local args = { ... }
  local nums = {}
  while type(args[1]) == "number" do nums[#nums + 1] = table.remove(args, 1) end
  if #nums == 0 or #nums > 3 then argerror("arange", 1, "number expected, got " .. typename(args[1])) end
  local start, stop, step = 0, nums[1], 1
  if #nums >= 2 then start, stop = nums[1], nums[2] end
  if #nums == 3 then step = nums[3] end
  if step == 0 then argerror("arange", 3, "step must not be zero") end
  local dtype, opts = range_opts(args, "arange", #nums + 1)
  local allint = math.type(start) == "integer" and math.type(stop) == "integer" and math.type(step) == "integer"
  dtype = dtype or (allint and "int64" or "float64")
  -- integer bounds subtract as integers: arange(math.mininteger, math.maxinteger) wrapped to -1 (an empty array)
  if allint and stop ~= start and (stop > start) ~= (stop - start > 0) then
    if (stop > start) == (step > 0) then raise("arange: too many elements") end
    stop = start   -- the true difference has the other sign than step: no elements
  end
  local n = math.ceil((stop - start) / step)
  if n < 0 or n ~= n then n = 0 end
  n = math.tointeger(n) or raise("arange: too many elements")
  local T = DT[dtype]
  if (T.kind == "i" or T.kind == "u") and not (math.type(start) == "integer" and math.type(step) == "integer") then
    -- NumPy's arange into an integer dtype converts start and start + step to it (truncating) and steps by their
    -- difference, not by step (arange(0.5, 3, 0.25, "int64") is all 0: int(0.75) - int(0.5))
    local function trunc(v) return math.tointeger(v >= 0 and math.floor(v) or math.ceil(v)) end
    local s0, s1 = trunc(start), trunc(start + step)
    if s0 and s1 then start, step = s0, s1 - s0 end
  end
  return fill_range("arange", n, dtype, start, step, nil, opts)
end

-- cd.linspace(start, stop [, num=50] [, dtype] [, opts]): num evenly spaced values from start to stop, both
-- included (opts.endpoint = false leaves stop out); float64 unless a dtype is given. Into an integer dtype the
-- values are floored, as NumPy's are (-0.5 gives -1).
function cd.linspace(start, stop, num, ...)
  if type(start) ~= "number" then argerror("linspace", 1, "number expected, got " .. typename(start)) end
  if type(stop) ~= "number" then argerror("linspace", 2, "number expected, got " .. typename(stop)) end
  local rest = { ... }
  if type(num) ~= "number" then table.insert(rest, 1, num); num = 50 end
  if math.type(num) ~= "integer" or num < 0 then argerror("linspace", 3, "non-negative integer expected, got " .. tostring(num)) end
  local endpoint = true
  local last = type(rest[#rest]) == "table" and rest[#rest] or nil
  if last and last.endpoint ~= nil then endpoint = last.endpoint ~= false; last.endpoint = nil end
  local dtype, opts = range_opts(rest, "linspace", 4)
  dtype = dtype or "float64"
  local div = endpoint and num - 1 or num
  local step = div > 0 and (stop - start) / div or 0.0
  local T = DT[dtype]
  return fill_range("linspace", num, dtype, start + 0.0, step, endpoint and num > 1 and stop + 0.0 or nil, opts,
    T.kind == "i" or T.kind == "u")
end

-- cd.clear_kernel_cache() forgets the generated kernels too
-- true when there was something to forget
local function forget_generated()
  local any = nkernels > 0
  kernels, nkernels = {}, 0
  for _, t in ipairs(fast_caches) do
    any = any or next(t) ~= nil
    for k in pairs(t) do t[k] = nil end
  end
  return any
end
local clear = cd.clear_kernel_cache
function cd.clear_kernel_cache(...)
  forget_generated()
  return clear(...)
end

-- cd._live() counts what the program holds: the generated kernels kept for reuse are forgotten (and collected)
-- first, so that a leak check does not count them
local live = cd._live
function cd._live()
  if forget_generated() then
    collectgarbage()
    collectgarbage()
  end
  return live()
end

-- ------------------------------------------------------------------------------------------ astype on a device
-- NOTE [astype kernel]: a:astype on a GPU (NOTE [astype] in array.c) runs this one generated kernel, for every
-- pair of dtypes (the pair is a launch argument: one compile per device, not 144). It takes the host loop's
-- steps in order, so the bytes are the host's: an element is loaded as a double (a float, float16 through
-- float) or as a 64-bit integer, then stored; float16 is converted bit by bit as cdv_f32_to_f16/cdv_f16_to_f32
-- are, and a NaN changing width keeps its sign and payload quietened as x86's cvtss2sd/cvtsd2ss keep them (a
-- GPU's cvt gives the canonical NaN).
local ASTYPE_DT = { "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
                    "float32", "float64" }
local ASTYPE_CODE = {}
for i, d in ipairs(ASTYPE_DT) do ASTYPE_CODE[d] = i - 1 end
local ASTYPE_HELPERS = [[
typedef unsigned long long _cdv_u64;
union _cdv_f32bits { float f; unsigned int u; };
union _cdv_f64bits { double f; _cdv_u64 u; };
__device__ static double _cdv_f32_to_f64(float f) {
  _cdv_f32bits x; x.f = f;
  if (f != f) { _cdv_f64bits r; r.u = ((_cdv_u64)(x.u >> 31) << 63) | 0x7ff8000000000000ull | ((_cdv_u64)(x.u & 0x7fffff) << 29); return r.f; }
  return (double)f;
}
__device__ static float _cdv_f64_to_f32(double d) {
  _cdv_f64bits x; x.f = d;
  if (d != d) { _cdv_f32bits r; r.u = (unsigned int)(x.u >> 63) << 31 | 0x7fc00000u | (unsigned int)((x.u >> 29) & 0x3fffff); return r.f; }
  return (float)d;
}
__device__ static float _cdv_h2f(unsigned short h) {
  unsigned int sign = (unsigned int)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, mant = h & 0x3ff, x;
  if (e == 0x1f) x = sign | 0x7f800000u | (mant << 13);
  else if (e != 0) x = sign | ((e + 112) << 23) | (mant << 13);
  else if (mant == 0) x = sign;
  else { int k = -1; do { k++; mant <<= 1; } while (!(mant & 0x400)); x = sign | ((unsigned int)(112 - k) << 23) | ((mant & 0x3ff) << 13); }
  _cdv_f32bits r; r.u = x; return r.f;
}
__device__ static unsigned short _cdv_f2h(float f) {
  _cdv_f32bits b; b.f = f;
  unsigned int x = b.u, sign = (x >> 16) & 0x8000, mant = x & 0x7fffff;
  int e = (int)((x >> 23) & 0xff) - 127 + 15;
  if (((x >> 23) & 0xff) == 0xff) return (unsigned short)(sign | 0x7c00 | (mant ? 0x200 : 0));
  if (e >= 31) return (unsigned short)(sign | 0x7c00);
  if (e <= 0) {
    if (e < -10) return (unsigned short)sign;
    mant |= 0x800000;
    unsigned int shift = (unsigned int)(14 - e), h = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) h++;
    return (unsigned short)(sign | h);
  }
  unsigned int h = sign | ((unsigned int)e << 10) | (mant >> 13), rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;
  return (unsigned short)h;
}
]]

-- array.c's int_min and int_max of each integer dtype: as doubles (INT64_MAX's is 2^63, UINT64_MAX's 2^64) and
-- as the stored two's complement
local ASTYPE_SAT = {
  int8 = { "-128.0", "127.0", "(_cdv_u64)-128LL", "127ull" },
  int16 = { "-32768.0", "32767.0", "(_cdv_u64)-32768LL", "32767ull" },
  int32 = { "-2147483648.0", "2147483647.0", "(_cdv_u64)-2147483648LL", "2147483647ull" },
  int64 = { "-9223372036854775808.0", "9223372036854775808.0", "0x8000000000000000ull", "0x7fffffffffffffffull" },
  uint8 = { "0.0", "255.0", "0ull", "255ull" },
  uint16 = { "0.0", "65535.0", "0ull", "65535ull" },
  uint32 = { "0.0", "4294967295.0", "0ull", "4294967295ull" },
  uint64 = { "0.0", "18446744073709551616.0", "0ull", "0xffffffffffffffffull" },
}

-- C statements loading element i of dtype d into (isf, f, u) (array.c's load_scalar), and storing them as d
-- (store_scalar; sgn: the source is a signed integer)
local function astype_load(d)
  local T = DT[d]
  if d == "float16" then return "isf = 1; f = _cdv_f32_to_f64(_cdv_h2f(((const unsigned short *)src)[i]));" end
  if d == "float32" then return "isf = 1; f = _cdv_f32_to_f64(((const float *)src)[i]);" end
  if d == "float64" then return "isf = 1; f = ((const double *)src)[i];" end
  if d == "bool" then return "u = ((const unsigned char *)src)[i] != 0;" end   -- any byte but 0 is true
  if T.kind == "i" then return fmt("u = (_cdv_u64)(long long)((const %s *)src)[i];", T.ctype) end
  return fmt("u = (_cdv_u64)((const %s *)src)[i];", T.ctype)
end
local function astype_store(d)
  local T = DT[d]
  if d == "bool" then return "((unsigned char *)dst)[i] = isf ? f != 0 : u != 0;" end
  local fd = "(isf ? f : sgn ? (double)(long long)u : (double)u)"
  if d == "float64" then return fmt("((double *)dst)[i] = %s;", fd) end
  if d == "float32" then return fmt("((float *)dst)[i] = _cdv_f64_to_f32(%s);", fd) end
  if d == "float16" then return fmt("((unsigned short *)dst)[i] = _cdv_f2h(_cdv_f64_to_f32(%s));", fd) end
  local r = ASTYPE_SAT[d] -- (double)int_min, (double)int_max, and the two as stored
  local sat = T.kind == "i" and fmt("f <= %s ? %s : f >= %s ? %s : (_cdv_u64)(long long)f", r[1], r[3], r[2], r[4])
    or fmt("f <= 0 ? 0 : f >= %s ? %s : (_cdv_u64)f", r[2], r[4])
  return fmt("{ _cdv_u64 v = isf ? (f != f ? 0 : %s) : u; ((%s *)dst)[i] = (%s)v; }", sat, T.ctype, T.ctype)
end

local function astype_source()
  local src = { ASTYPE_HELPERS,
    'extern "C" __global__ void cdv_astype(const void *src, void *dst, int from, int to, int sgn, long long _n) {',
    "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < _n; i += (long long)blockDim.x * gridDim.x) {",
    "    int isf = 0; double f = 0; _cdv_u64 u = 0;", "    switch (from) {" }
  for i, d in ipairs(ASTYPE_DT) do src[#src + 1] = fmt("      case %d: %s break;", i - 1, astype_load(d)) end
  src[#src + 1] = "    }"
  src[#src + 1] = "    switch (to) {"
  for i, d in ipairs(ASTYPE_DT) do src[#src + 1] = fmt("      case %d: %s break;", i - 1, astype_store(d)) end
  src[#src + 1] = "    }"
  src[#src + 1] = "  }"
  src[#src + 1] = "}"
  return concat(src, "\n") .. "\n", "cdv_astype"
end

-- getmetatable(a).__astype_kernel(a, dtype [, {stream=}]): a:astype by the generated kernel on a's device, any
-- device (a:astype calls it for GPU arrays, its arguments checked: NOTE [astype])
array_mt.__astype_kernel = function(a, d, opts)
  local stream = opts and opts.stream
  local dev = a.device
  if stream ~= nil and stream.device ~= dev then stream = nil end -- (another device's stream: as the host path)
  d = dtype_of_name(d) or d   -- a short name ("f64", "c64") as its full one
  -- a's own dtype: the copy alone, one pass where the contiguous copy and the kernel would be two
  if d == a.dtype and not a.is_contiguous then return copy_elements(a, nil, stream, "astype") end
  -- the struct's conversions (NOTE [complex dtypes])
  if DT[a.dtype].kind == "c" or DT[d].kind == "c" then
    return run_elementwise({ fname = "astype", name = "cdv_astype_c", ins = { { name = "x", dtype = a.dtype, value = a } },
      outs = { { name = "z", dtype = d } }, body = fmt("z = (%s)x", DT[d].ctype), key = "astype_c", stream = stream })[1]
  end
  local out = cd.empty(a.shape, d, { device = dev, stream = stream })
  local n = a.size
  if n == 0 then return out end
  if not a.is_contiguous then a = a:contiguous(stream and { stream = stream } or nil) end
  local k = kernel_for(dev, "astype", astype_source)
  k({ grid = grid_for(dev, n), block = BLOCK, stream = stream }, a, out, ASTYPE_CODE[a.dtype], ASTYPE_CODE[d],
    DT[a.dtype].kind == "i" and 1 or 0, n)
  return out
end

-- for random.lua (NOTE [generated kernels])
internal.DT, internal.kernel_for, internal.grid_for, internal.header = DT, kernel_for, grid_for, header
internal.check_opts, internal.raise, internal.argerror, internal.typename = check_opts, raise, argerror, typename
internal.INT_RANGE = INT_RANGE
internal.dtype_of_name, internal.BLOCK = dtype_of_name, BLOCK
internal.float_result, internal.float_pair = float_result, float_pair   -- ops_numpy.lua: NumPy's float results
-- for ops_numpy.lua (NumPy's other functions, on the same generators)
internal.run_elementwise, internal.run_reduction, internal.result_type = run_elementwise, run_reduction, result_type
internal.promote2, internal.check_scalar_fits = promote2, check_scalar_fits
internal.refuse_complex = refuse_complex   -- for fft.lua (NOTE [complex dtypes])
internal.sum_dtype, internal.hash = sum_dtype, hash   -- sorting.lua

-- What cd.fuse (fuse.lua) builds on: NOTE [operation plans]
internal.ops = { DT = DT, BIN = BIN, MATH = MATH, FNAMES = FNAMES, META = META, HELPERS = HELPERS,
  plan_binary = plan_binary, plan_unary = plan_unary, plan_where = plan_where, out_dtype = out_dtype,
  scalar_fits = scalar_fits, check_scalar_fits = check_scalar_fits, run_elementwise = run_elementwise,
  run_reduction = run_reduction, reduction_geometry = reduction_geometry, reductions = REDUCTIONS,
  lua_value = lua_value, broadcast_shapes = broadcast_shapes, same_shape = same_shape, is_array = is_array,
  grid_for = grid_for, BLOCK = BLOCK, splits = splits, RBLOCK = RBLOCK, fast_cache = fast_cache,
  launch_config = launch_config }
