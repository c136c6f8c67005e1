-- Strided views (NOTE [strided views] in array.c): a:contiguous() and a:copy(), and the functions array.c calls
-- through the Array metatable when a fill or a copy meets a strided view, all built on ops.lua's generated
-- elementwise copy (which reads and writes strided operands), and the tiled kernel that copies transposed matrices
-- on CUDA devices for it (NOTE [tiled transpose]). Built into the library; run once by luaopen_cudadev after ops.lua
-- with the module table, the Array metatable and the parts' internals.
local cd, array_mt, internal = ...
local methods = array_mt.methods
local copy_elements, raise, check_opts = internal.copy_elements, internal.raise, internal.check_opts

local function same_shape(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do if a[i] ~= b[i] then return false end end
  return true
end

-- ------------------------------------------------------------------------------------------ tiled transpose
-- NOTE [tiled transpose]: a copy of a transposed matrix (a.T of a C-ordered one, or a batch of them: a view whose
-- last two axes have element strides 1 and ld >= rows) read element by element (copy_elements' generated kernel)
-- has each warp read 32 elements ld apart, 32 memory segments a load: on an H200 that made cholesky's two copies
-- of a 4096 x 4096 float64 (NOTE [cholesky fill] in linalg.lua) about 100 us slower than PyTorch's. On CUDA
-- devices such a copy into a contiguous array runs this kernel instead, the classic form: a block of 32 x 8
-- threads moves a 32 x 32 tile through shared memory, read down the source's columns (contiguous there) and
-- written along the result's rows, each warp's loads and stores one segment; the tile's row has 33 elements so
-- that reading it back by columns does not hit one bank 32 times. The elements are moved as bytes of their size
-- (1, 2, 4, 8 or 16: one compile per size and device, whatever the dtype), the batch and tiles are a grid-stride
-- loop (no limit of grid y or z), and `tri` keeps a triangle as cd.tril (1) or cd.triu (2) do with diagonal k,
-- zeroing the rest while writing: the lower factor of cholesky is the tril of a transposed buffer, one pass, and a
-- tile with nothing to keep is not read. The cpu device keeps copy_elements' way (its loop, NOTE [cpu loops]) unless
-- cd._transpose_tiles(true) asks for this kernel there too, as the specs do to check it without a GPU: there it ran
-- faster than the loop (2 shared cores, 4096 x 4096: float64 122 ms against 281-311, float32 48-54 against 165-197),
-- but it is compiled at first use where the loop is built in, and a sandbox compiles no cpu kernels.
local TILE_TYPES = { [1] = "unsigned char", [2] = "unsigned short", [4] = "unsigned int", [8] = "unsigned long long",
                     [16] = "_cdv_e16" }
local TILED = [[
struct _cdv_e16 { unsigned long long lo, hi; };   /* a complex128 moved as bytes, at its 8-byte alignment */
typedef ELEM _cdv_e;
extern "C" __global__ void NAME(const void *src_, void *dst_, long long R, long long C, long long ld, long long bs,
                                long long nb, int tri, long long k) {
  __shared__ _cdv_e tile[32][33];
  const _cdv_e *src = (const _cdv_e *)src_;
  _cdv_e *dst = (_cdv_e *)dst_;
  const _cdv_e zero = _cdv_e();
  const long long ntr = (R + 31) / 32, ntc = (C + 31) / 32, total = ntr * ntc * nb;
  const int tx = threadIdx.x, ty = threadIdx.y;
  for (long long t = blockIdx.x; t < total; t += gridDim.x) {
    const long long tc = t % ntc, rest = t / ntc, tr = rest % ntr, b = rest / ntr;
    const long long r0 = tr * 32, c0 = tc * 32;
    /* the same for the whole block: a tile the triangle drops entirely is only written, with zeros */
    const bool none = (tri == 1 && c0 - (r0 + 31) > k) || (tri == 2 && c0 + 31 - r0 < k);
    if (!none) {
      const _cdv_e *s = src + b * bs;
      for (int j = ty; j < 32; j += 8) {
        const long long r = r0 + tx, c = c0 + j;
        if (r < R && c < C) tile[j][tx] = s[r + c * ld];
      }
    }
    __syncthreads();
    _cdv_e *d = dst + b * R * C;
    for (int j = ty; j < 32; j += 8) {
      const long long r = r0 + j, c = c0 + tx;
      if (r < R && c < C) {
        const bool keep = tri == 0 || (tri == 1 ? c - r <= k : c - r >= k);
        d[r * C + c] = keep ? tile[tx][j] : zero;
      }
    }
    __syncthreads();
  }
}
]]

-- The kernel's source for elements of `size` bytes, and its name
local function tiled_source(size)
  local name = "cdv_transpose" .. size
  return (TILED:gsub("ELEM", TILE_TYPES[size]):gsub("NAME", name)), name
end

-- The layout of a transposed matrix or batch of them (NOTE [tiled transpose]): rows, columns, ld (the columns'
-- stride), the batch's count and stride; nil for any other view, a 1 x n or n x 1 one included (no transpose).
local function transposed_layout(a)
  local nd = a.ndim
  if nd < 2 or a.is_contiguous or a.size == 0 then return nil end
  local s, st = a.shape, a.strides
  local R, C, ld = s[nd - 1], s[nd], st[nd]
  if R < 2 or C < 2 or st[nd - 1] ~= 1 or ld < R then return nil end
  local nb, bs = 1, 0
  for i = nd - 2, 1, -1 do   -- the batch dimensions, as one of stride bs
    if s[i] ~= 1 then
      if nb == 1 then bs = st[i] elseif st[i] ~= bs * nb then return nil end
      nb = nb * s[i]
    end
  end
  if bs < 0 then return nil end
  return R, C, ld, nb, bs
end

local tiles = { cpu = false, launches = 0 }

-- copy_elements (ops.lua) and cd.tril/cd.triu (ops_numpy.lua): a's elements into out (a new contiguous array when
-- nil) by the tiled kernel, keeping triangle tri (0 all, 1 lower, 2 upper) of diagonal k; nil where it does not
-- apply (not a transposed layout, out not a contiguous array of a's dtype, shape and device, a stream of another
-- device, the cpu device), and the caller's generic kernel runs instead.
function internal.copy_transposed(a, out, stream, tri, k)
  local dev = a.device
  if dev.is_cpu and not tiles.cpu then return nil end
  if stream ~= nil and stream.device ~= dev then return nil end
  if out ~= nil and (out.device ~= dev or out.dtype ~= a.dtype or not out.is_contiguous or
                     not same_shape(out.shape, a.shape)) then
    return nil
  end
  local R, C, ld, nb, bs = transposed_layout(a)
  if R == nil then return nil end
  out = out or cd.empty(a.shape, a.dtype, { device = dev, stream = stream })
  local size = internal.DT[a.dtype].size
  local kern = internal.kernel_for(dev, "transpose" .. size, function() return tiled_source(size) end)
  local total = ((R + 31) // 32) * ((C + 31) // 32) * nb
  local grid = math.max(1, math.min(total, math.max(dev.sm_count or 1, 1) * 32))
  kern({ grid = grid, block = { 32, 8 }, stream = stream }, array_mt.__flat_base(a), out, R, C, ld, bs, nb, tri or 0,
    k or 0)
  tiles.launches = tiles.launches + 1
  return out
end

-- cd._transpose_tiles([cpu]) -> how many copies the tiled kernel made (NOTE [tiled transpose]); with a boolean,
-- whether the cpu device takes it too (internal: for the specs)
function cd._transpose_tiles(cpu)
  if cpu ~= nil then
    if type(cpu) ~= "boolean" then
      internal.argerror("_transpose_tiles", 1, "boolean expected, got " .. internal.typename(cpu))
    end
    tiles.cpu = cpu
  end
  return tiles.launches
end

local function check_self(a, fname)
  if cd.type(a) ~= "Array" then
    raise(string.format("bad argument #1 to '%s' (Array expected, got %s)", fname, internal.typename(a)))
  end
end

local function stream_opt(opts, fname)
  return check_opts(opts, { stream = true }, fname, 2).stream
end

-- a:copy([{stream=}]) -> a new contiguous Array with a's elements on a's device (a view's elements in C order)
function methods.copy(a, opts)
  check_self(a, "copy")
  local stream = stream_opt(opts, "copy")
  if a.is_contiguous then
    local c = cd.empty(a.shape, a.dtype, { device = a.device, stream = stream })
    return c:copy_from(a, { stream = stream })
  end
  return copy_elements(a, nil, stream, "copy")
end

-- a:contiguous([{stream=}]) -> a itself when it is contiguous, else a:copy()
function methods.contiguous(a, opts)
  check_self(a, "contiguous")
  local stream = stream_opt(opts, "contiguous")
  if a.is_contiguous then return a end
  return copy_elements(a, nil, stream, "contiguous")
end

-- array.c: a:fill(v) / a:zero() of a strided view, with v as a 0-d array on dst's device
rawset(array_mt, "__views_assign", function(dst, src, stream)
  copy_elements(src, dst, stream, "fill")
end)

-- array.c: a:to(device) of a strided view copies it contiguous where it is first
rawset(array_mt, "__views_contiguous", function(a, stream)
  return copy_elements(a, nil, stream, "to")
end)

-- Whether dst's memory and the span of src's elements may overlap: dst:copy_from(src) of a view of dst itself
-- (m:copy_from(m.T)) reads src whole before it writes, as NumPy does. True where the addresses are not to be had
-- (a sandbox) or src has a negative stride (elements before its element 0).
local function may_overlap(dst, src)
  for _, st in ipairs(src.strides) do
    if st < 0 then return true end
  end
  local ok, d, s = pcall(function() return dst.ptr, src.ptr end)
  if not ok then return true end
  return d < s + array_mt.__flat_base(src).nbytes and s < d + dst.nbytes
end

-- array.c: dst:copy_from(src) where either is strided (sizes and dtypes checked; a table or string source is
-- already a contiguous array on dst's device). The elements go in C order, as between contiguous arrays.
rawset(array_mt, "__views_copy", function(dst, src, stream)
  local on_src = stream ~= nil and stream.device == src.device and stream or nil
  if dst.is_contiguous and not src.is_contiguous and src.device == dst.device and (stream == nil or on_src) and
      not may_overlap(dst, src) then
    -- one pass, straight into dst (a transposed src through the tiled kernel: NOTE [tiled transpose])
    copy_elements(src, dst:reshape(src.shape), on_src, "copy_from")
    return
  end
  if not src.is_contiguous then src = copy_elements(src, nil, on_src, "copy_from") end
  if dst.is_contiguous then
    dst:copy_from(src, { stream = stream })
    return
  end
  if src.device ~= dst.device then src = src:to(dst.device, { stream = stream }) end
  if not same_shape(src.shape, dst.shape) then src = src:reshape(dst.shape) end
  copy_elements(src, dst, stream ~= nil and stream.device == dst.device and stream or nil, "copy_from")
end)
