-- Strided views (NOTE [strided views] in array.c): a:contiguous() and a:copy(), and the functions array.c calls
-- through the Array metatable when a fill or a copy meets a strided view, all built on ops.lua's generated
-- elementwise copy (which reads and writes strided operands). Built into the library; run once by
-- luaopen_cudadev after ops.lua with the module table, the Array metatable and the parts' internals.
local cd, array_mt, internal = ...
local methods = array_mt.methods
local copy_elements, raise, check_opts = internal.copy_elements, internal.raise, internal.check_opts

local function same_shape(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do if a[i] ~= b[i] then return false end end
  return true
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

-- array.c: dst:copy_from(src) where either is strided (sizes and dtypes checked; a table or string source is
-- already a contiguous array on dst's device). The elements go in C order, as between contiguous arrays.
rawset(array_mt, "__views_copy", function(dst, src, stream)
  local on_src = stream ~= nil and stream.device == src.device and stream or nil
  if not src.is_contiguous then src = copy_elements(src, nil, on_src, "copy_from") end
  if dst.is_contiguous then
    dst:copy_from(src, { stream = stream })
    return
  end
  if src.device ~= dst.device then src = src:to(dst.device, { stream = stream }) end
  if not same_shape(src.shape, dst.shape) then src = src:reshape(dst.shape) end
  copy_elements(src, dst, stream ~= nil and stream.device == dst.device and stream or nil, "copy_from")
end)
