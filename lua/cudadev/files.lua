-- Arrays to and from files: raw bytes (a:tofile, cd.fromfile, as NumPy's tofile and fromfile) and NumPy's .npy
-- format (cd.save, cd.load), so data moves between cudadev and Python tools. Built into the library; run once
-- by luaopen_cudadev.
--
-- NOTE [npy files]: format versions 1.0 (a 2-byte header length), 2.0 and 3.0 (4 bytes) are read; 1.0 is
-- written, or 2.0 when the header needs it. The header is a Python dict literal: 'descr' (a little-endian or
-- byte-order-free type string such as '<f4' or '|b1'), 'fortran_order' and 'shape'. Big-endian data, Fortran
-- order, object and structured dtypes, and files whose data is shorter or longer than the shape says are
-- errors that name the file and what is wrong.
local cd, array_mt, internal = ...
local fmt = string.format

local typename = internal.typename

local raise = internal.raise
local function argerror(fname, n, why) raise(fmt("bad argument #%d to '%s' (%s)", n, fname, why)) end

local function check_array(a, fname, n)
  if cd.type(a) ~= "Array" then argerror(fname, n, "Array expected, got " .. typename(a)) end
  return a
end

local function check_path(p, fname, n)
  if type(p) ~= "string" then argerror(fname, n, "file name expected, got " .. typename(p)) end
  if p:find("\0", 1, true) then argerror(fname, n, "file name contains a NUL byte") end
  return p
end

local function open(path, mode, fname)
  if type(io) ~= "table" or type(io.open) ~= "function" then
    raise(fmt("%s: files cannot be opened here (this Lua state has no io library)", fname))
  end
  local f, err = io.open(path, mode)
  if not f then raise(fmt("%s: cannot open %s", fname, err)) end
  return f
end

local function write_all(path, parts, fname)
  local f = open(path, "wb", fname)
  for _, s in ipairs(parts) do
    local ok, err = f:write(s)
    if not ok then f:close() raise(fmt("%s: cannot write %s: %s", fname, path, err)) end
  end
  local ok, err = f:close()
  if not ok then raise(fmt("%s: cannot write %s: %s", fname, path, err)) end
end

-- a:tofile(path): the elements' bytes, nothing else (NumPy's tofile)
local function tofile(a, path)
  check_array(a, "tofile", 1)
  check_path(path, "tofile", 2)
  write_all(path, { a:tobytes() }, "tofile")
  return a
end

local shape_size = internal.shape_size

local function shape_text(shape)
  return "{" .. table.concat(shape, ", ") .. "}"
end

-- At most max bytes of f, read in pieces: f may be a FIFO whose writer never stops, and f:read(n) takes n
-- bytes of memory before it reads any.
local function read_at_most(f, max)
  local parts, got = {}, 0
  while got < max do
    local s = f:read(math.min(max - got, 1 << 20))
    if s == nil or s == "" then break end
    parts[#parts + 1] = s
    got = got + #s
  end
  return table.concat(parts)
end

-- The shape argument of fromfile as a table of sizes, and the bytes it needs (checked before the file is read)
local function fromfile_shape(shape, item)
  if type(shape) == "number" then shape = { shape } end
  if type(shape) ~= "table" then argerror("fromfile", 3, "shape expected, got " .. typename(shape)) end
  local n = item
  for i, d in ipairs(shape) do
    if math.type(d) ~= "integer" or d < 0 then argerror("fromfile", 3, fmt("dimension %d is not a non-negative integer", i)) end
    if d > 0 and n > (math.maxinteger - 1) // d then argerror("fromfile", 3, fmt("shape %s needs more than 2^63 - 2 bytes", shape_text(shape))) end
    n = n * d
  end
  return shape, n
end

-- cd.fromfile(path, dtype [, shape] [, opts]): an Array of the file's bytes (NumPy's fromfile); opts: device.
-- With a shape, at most its bytes and one more are read (as cd.load): a longer file, or a FIFO written forever,
-- is refused without being read to its end.
function cd.fromfile(path, dtype, shape, opts)
  check_path(path, "fromfile", 1)
  if type(dtype) ~= "string" then argerror("fromfile", 2, "dtype expected, got " .. typename(dtype)) end
  if type(shape) == "table" and cd.type(shape) == nil and shape.device ~= nil and opts == nil then
    shape, opts = nil, shape
  end
  local need
  local item = cd.array("", dtype).itemsize -- (an unknown dtype named as cd.array names it)
  if shape ~= nil then shape, need = fromfile_shape(shape, item) end
  local f = open(path, "rb", "fromfile")
  local data = need and read_at_most(f, need + 1) or f:read("a")
  if need and #data > need then
    local size = f:seek("end") -- a regular file's length; nil for a FIFO
    f:close()
    if size and size % item == 0 then
      raise(fmt("fromfile: %s holds %d %s elements, not the %d of shape %s", path, size // item, dtype,
        shape_size(shape), shape_text(shape)))
    end
    raise(fmt("fromfile: %s holds more than the %d bytes of shape %s", path, need, shape_text(shape)))
  end
  f:close()
  local a = cd.array(data, dtype, opts)
  if shape ~= nil then
    if shape_size(shape) ~= a.size then
      raise(fmt("fromfile: %s holds %d %s elements, not the %d of shape %s", path, a.size, a.dtype, shape_size(shape),
        shape_text(shape)))
    end
    a = a:reshape(shape)
  end
  return a
end

-- .npy ----------------------------------------------------------------------------------------------------
local DESCR = { float16 = "<f2", float32 = "<f4", float64 = "<f8", int8 = "|i1", int16 = "<i2", int32 = "<i4",
                int64 = "<i8", uint8 = "|u1", uint16 = "<u2", uint32 = "<u4", uint64 = "<u8", bool = "|b1",
                complex64 = "<c8", complex128 = "<c16" }
local FROM_DESCR = {}
for d, s in pairs(DESCR) do
  FROM_DESCR[s] = d
  FROM_DESCR[s:sub(2)] = d                       -- '=' and no order mark: this machine's order, little-endian
end
FROM_DESCR["<i1"], FROM_DESCR["<u1"], FROM_DESCR["<b1"] = "int8", "uint8", "bool"
FROM_DESCR["=f4"], FROM_DESCR["=f8"] = "float32", "float64"

local MAGIC = "\x93NUMPY"

-- cd.save(path, a): a in NumPy's .npy format (version 1.0)
function cd.save(path, a)
  check_path(path, "save", 1)
  check_array(a, "save", 2)
  local shape = a.shape
  local dims = #shape == 1 and (shape[1] .. ",") or table.concat(shape, ", ")
  local header = fmt("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", DESCR[a.dtype], dims)
  -- magic, version, length, header: padded with spaces to a multiple of 64 bytes, ending in a newline
  local version, lenfmt, fixed = "\1\0", "<I2", 10
  if #header + fixed + 1 > 65535 then version, lenfmt, fixed = "\2\0", "<I4", 12 end
  local total = fixed + #header + 1
  header = header .. string.rep(" ", (64 - total % 64) % 64) .. "\n"
  write_all(path, { MAGIC, version, string.pack(lenfmt, #header), header, a:tobytes() }, "save")
  return a
end

-- (f: the file, closed first when given)
local function bad(path, why, f)
  if f then f:close() end
  raise(fmt("load: %s is not a .npy file cudadev can read: %s", path, why))
end

-- The header dict's fields: descr, fortran_order, shape (a table)
local function parse_header(path, h)
  local descr = h:match("['\"]descr['\"]%s*:%s*['\"]([^'\"]*)['\"]")
  local fortran = h:match("['\"]fortran_order['\"]%s*:%s*(%a+)")
  local shape_s = h:match("['\"]shape['\"]%s*:%s*(%b())")
  if not descr or not fortran or not shape_s then bad(path, "its header lacks 'descr', 'fortran_order' or 'shape'") end
  local shape = {}
  for d in shape_s:sub(2, -2):gmatch("[^,%s]+") do
    local n = math.tointeger(tonumber(d))
    if not n or n < 0 then bad(path, "its shape " .. shape_s .. " is not a tuple of sizes") end
    shape[#shape + 1] = n
  end
  return descr, fortran, shape
end

-- The bytes of data a header promises: its shape's element count times the item size, either of which may
-- overflow a Lua integer (such a shape reached reshape, whose message named neither the file nor the cause).
-- One byte is kept spare: load reads one more than this to tell a longer file.
local function data_bytes(f, path, shape, item)
  for _, d in ipairs(shape) do if d == 0 then return 0 end end
  local n = 1
  for _, d in ipairs(shape) do
    if n > math.maxinteger // d then bad(path, fmt("its shape %s has more than 2^63 - 1 elements", shape_text(shape)), f) end
    n = n * d
  end
  if n > (math.maxinteger - 1) // item then
    bad(path, fmt("its shape %s needs more than 2^63 - 2 bytes of data", shape_text(shape)), f)
  end
  return n * item
end

-- cd.load(path [, {device=, stream=}]) -> Array: a .npy file (NOTE [npy files])
function cd.load(path, opts)
  check_path(path, "load", 1)
  internal.check_opts(opts, { device = true, stream = true }, "load", 2) -- (ops.lua's, there once loading is done)
  local f = open(path, "rb", "load")
  local head = f:read(8) or ""
  if #head < 8 or head:sub(1, 6) ~= MAGIC then f:close() bad(path, "it does not start with the .npy magic") end
  local major = head:byte(7)
  local lenbytes = major == 1 and 2 or (major == 2 or major == 3) and 4 or nil
  if not lenbytes then f:close() bad(path, fmt("format version %d.%d is unknown", major, head:byte(8))) end
  local ls = f:read(lenbytes) or ""
  if #ls < lenbytes then f:close() bad(path, "it ends inside its header") end
  local hlen = string.unpack(lenbytes == 2 and "<I2" or "<I4", ls)
  local h = read_at_most(f, hlen)
  if #h < hlen then f:close() bad(path, "it ends inside its header") end
  local descr, fortran, shape = parse_header(path, h)
  local dtype = FROM_DESCR[descr]
  if not dtype then
    f:close()
    if descr:sub(1, 1) == ">" then bad(path, fmt("its data is big-endian ('%s')", descr)) end
    bad(path, fmt("its dtype '%s' has no cudadev dtype", descr))
  end
  local need = data_bytes(f, path, shape, cd.empty(0, dtype).itemsize)
  if fortran ~= "False" and shape_size(shape) > 1 and #shape > 1 then
    f:close()
    bad(path, "it is in Fortran (column-major) order; save it from NumPy in C order (np.ascontiguousarray)")
  end
  local data = read_at_most(f, need + 1)
  f:close()
  if #data > need then
    bad(path, fmt("its shape %s needs %d bytes of data, but more follow the header", shape_text(shape), need))
  elseif #data < need then
    bad(path, fmt("its shape %s needs %d bytes of data, but %d follow the header", shape_text(shape), need, #data))
  end
  local a = cd.array(data, dtype, opts)
  return a:reshape(shape)
end

array_mt.methods.tofile = tofile
