-- cd.mpi: MPI's launcher and host collectives for cudadev (doc/mpi.md), mpi4py's shape in Lua: rank, size,
-- barrier, bcast, allreduce, send and recv on Lua values and on arrays of the cpu device, and nccl_comm, an NCCL
-- communicator over every rank. Built into the library; run once by luaopen_cudadev. The C side (src/mpi.c,
-- cd._mpi, taken away here) opens cudadev_mpi.so on first use (NOTE [mpi shim] in src/mpi_api.h) and moves
-- the bytes; the protocols are here.
--
-- NOTE [mpi agreement]: a collective that one rank leaves with an error while the others go on would leave them
-- waiting forever. So what each rank may find wrong with its own arguments (an Array on a GPU, a dtype or shape
-- that differs from the root's, a value that cannot be sent, an unknown op) is not raised at once: the ranks
-- first agree (an all-reduce of the first rank with a problem; then that rank's message is broadcast), and every
-- rank raises the same error, which names the rank. Only arguments every rank checks alike (a root or
-- destination out of range) raise at once. Point-to-point calls do the same in one direction: a send that
-- cannot send tells the receiver, which raises too. (And a rank that ends with an error ends the whole job:
-- NOTE [mpi start] in src/mpi.c.)
--
-- NOTE [mpi messages]: every bcast, send and recv goes as a header (kind, dtype, shape, length: 12 int64s)
-- and then the payload: an array's elements, or a Lua value serialised by encode below (nil, booleans, integers,
-- floats, strings, and tables of those, without metatables; a table that contains itself is refused).
local cd, _, internal = ...
local C = cd._mpi
cd._mpi = nil

local fmt, spack, sunpack = string.format, string.pack, string.unpack
local raise = internal.raise

local mpi = {}
cd.mpi = mpi

local function typename(v)
  local t = cd.type(v)
  return t and "cudadev." .. t or type(v)
end

local function argmsg(fname, n, why) return fmt("bad argument #%d to '%s' (%s)", n, fname, why) end
local function argerror(fname, n, why) raise(argmsg(fname, n, why)) end

-- calls a C function of cd._mpi; its errors (MPI's, or MPI not starting) are raised at the user's line
local function call(f, ...)
  local r = table.pack(pcall(f, ...))
  if not r[1] then raise(r[2]) end
  return table.unpack(r, 2, r.n)
end

local world   -- {rank=, size=, local_rank=} once MPI started (NOTE [mpi start])
local function start()
  if world == nil then
    local rank, size, local_rank = call(C.init)
    world = { rank = rank, size = size, local_rank = local_rank }
  end
  return world
end

-- ------------------------------------------------------------ serialised values (NOTE [mpi messages])
local MAX_DEPTH = 100

local function encode(v, out, depth, open)
  local t = type(v)
  if t == "nil" then out[#out + 1] = "n"
  elseif t == "boolean" then out[#out + 1] = v and "t" or "f"
  elseif math.type(v) == "integer" then out[#out + 1] = spack("<c1i8", "i", v)
  elseif t == "number" then out[#out + 1] = spack("<c1d", "d", v)
  elseif t == "string" then out[#out + 1] = spack("<c1s8", "s", v)
  elseif t == "table" and cd.type(v) == nil then
    if open[v] then return "cannot send a table that contains itself" end
    if depth >= MAX_DEPTH then return fmt("cannot send tables nested more than %d deep", MAX_DEPTH) end
    open[v] = true
    out[#out + 1] = "T"
    for k, x in next, v do
      local err = encode(k, out, depth + 1, open) or encode(x, out, depth + 1, open)
      if err then return err end
    end
    out[#out + 1] = "e"
    open[v] = nil
  else
    return "cannot send a " .. typename(v) .. (depth > 0 and " inside a table" or "")
  end
end

-- the bytes of v, or nil and why it cannot be sent
local function serialise(v)
  local out = {}
  local err = encode(v, out, 0, {})
  if err then return nil, err end
  return table.concat(out)
end

local function decode(s, pos)
  local tag = s:sub(pos, pos)
  pos = pos + 1
  if tag == "n" then return nil, pos
  elseif tag == "t" then return true, pos
  elseif tag == "f" then return false, pos
  elseif tag == "i" then return sunpack("<i8", s, pos)
  elseif tag == "d" then return sunpack("<d", s, pos)
  elseif tag == "s" then return sunpack("<s8", s, pos)
  elseif tag == "T" then
    local t = {}
    while s:sub(pos, pos) ~= "e" do
      local k, x
      k, pos = decode(s, pos)
      x, pos = decode(s, pos)
      if k == nil then error("malformed MPI message", 0) end
      t[k] = x
    end
    return t, pos + 1
  end
  error("malformed MPI message", 0)
end

local function deserialise(s) return (decode(s, 1)) end

-- ------------------------------------------------------------ headers (NOTE [mpi messages])
local VALUE, ARRAY, PROBLEM = 0, 1, 2
local DTYPES = { "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                 "uint64", "bool" }
local DTYPE_INDEX = {}
for i, name in ipairs(DTYPES) do DTYPE_INDEX[name] = i end
local HEADER = "<" .. ("i8"):rep(12)
local HEADER_LEN = spack(HEADER, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0):len()

-- kind, then: an array's dtype, ndim and shape (length: its bytes), or a value's or message's length
local function header(kind, length, a, extra)
  local dims = { 0, 0, 0, 0, 0, 0, 0, 0 }
  local dtype, ndim = 0, 0
  if a ~= nil then
    local shape = a.shape
    for i, d in ipairs(shape) do dims[i] = d end
    dtype, ndim, length = DTYPE_INDEX[a.dtype], #shape, a.nbytes
  end
  return spack(HEADER, kind, dtype, ndim, dims[1], dims[2], dims[3], dims[4], dims[5], dims[6], dims[7], dims[8],
               length) .. (extra or "")
end

local function parse(s)
  local v = { sunpack(HEADER, s) }
  local shape = {}
  for i = 1, v[3] do shape[i] = v[3 + i] end
  return { kind = v[1], dtype = DTYPES[v[2]], shape = shape, length = v[12] }, s:sub(HEADER_LEN + 1)
end

local function describe(dtype, shape) return fmt("%s[%s]", dtype, table.concat(shape, ",")) end

local function same(a, h)
  if a.dtype ~= h.dtype then return false end
  local shape = a.shape
  if #shape ~= #h.shape then return false end
  for i, d in ipairs(shape) do if d ~= h.shape[i] then return false end end
  return true
end

-- Raises on every rank (see NOTE [mpi agreement]) when any rank has a problem (its whole message: pass nil when none)
local function agree(w, problem)
  local bad = call(C.min_int, problem and w.rank or w.size)
  if bad < w.size then raise((call(C.bcast_bytes, problem, bad))) end
end

-- ------------------------------------------------------------ arguments
local function check_rank(w, v, fname, n, default)
  if v == nil and default ~= nil then return default end
  if math.type(v) ~= "integer" then argerror(fname, n, "rank expected, got " .. typename(v)) end
  if v < 0 or v >= w.size then
    argerror(fname, n, fmt("rank %d out of range (the job has %d rank%s)", v, w.size, w.size == 1 and "" or "s"))
  end
  return v
end

local function check_tag(v, fname, n)
  if v == nil then return 0 end
  if math.type(v) ~= "integer" or v < 0 or v > 32767 then
    argerror(fname, n, "tag must be an integer from 0 to 32767, got " .. tostring(v))
  end
  return v
end

local OPS = { sum = 0, prod = 1, max = 2, min = 3 }

-- ------------------------------------------------------------ the API
function mpi.is_available() return C.load() end

function mpi.rank() return start().rank end
function mpi.size() return start().size end
function mpi.local_rank() return start().local_rank end

function mpi.barrier()
  start()
  call(C.barrier)
end

function mpi.bcast(x, root)
  local w = start()
  root = check_rank(w, root, "bcast", 2, 0)
  local is_array = cd.type(x) == "Array"
  local problem, h
  local function fail(why) problem = argmsg("bcast", 1, fmt("rank %d: %s", w.rank, why)) end
  if w.rank == root then
    local msg
    if is_array then
      local why = C.host_problem(x)
      if why then fail(why) else msg = header(ARRAY, 0, x) end
    else
      local bytes, why = serialise(x)
      if why then fail(why) else msg = header(VALUE, #bytes, nil, bytes) end
    end
    h = parse(call(C.bcast_bytes, msg or header(PROBLEM, 0), root))
  else
    local payload
    h, payload = parse(call(C.bcast_bytes, nil, root))
    if h.kind == ARRAY then
      local root_has = describe(h.dtype, h.shape)
      if x == nil then
        local ok, a = pcall(cd.empty, h.shape, h.dtype, { device = "cpu" })
        if ok then x = a else fail(tostring(a)) end
      elseif not is_array then
        fail(fmt("the root broadcasts an Array %s: pass an Array or nil, not a %s", root_has, typename(x)))
      else
        local why = C.host_problem(x)
        if why then fail(why)
        elseif not same(x, h) then
          fail(fmt("Array %s does not match the root's %s", describe(x.dtype, x.shape), root_has))
        end
      end
    elseif h.kind == VALUE then
      if is_array then fail("the root broadcasts a value, not an Array") else x = deserialise(payload) end
    end
  end
  agree(w, problem)
  if h.kind == ARRAY then return call(C.bcast_array, x, root) end
  return x
end

function mpi.allreduce(a, op)
  local w = start()
  local problem
  local function fail(n, why) problem = problem or argmsg("allreduce", n, fmt("rank %d: %s", w.rank, why)) end
  local why = C.host_problem(a)
  if why then fail(1, why) end
  if OPS[op] == nil then
    fail(2, fmt("op must be \"sum\", \"prod\", \"max\" or \"min\", got %s",
                type(op) == "string" and fmt("%q", op) or typename(op)))
  end
  -- rank 0's dtype, shape and op, which every other rank's must match
  local mine = w.rank == 0 and (problem and header(PROBLEM, 0) or header(ARRAY, 0, a, op)) or nil
  local h, op0 = parse(call(C.bcast_bytes, mine, 0))
  if w.rank ~= 0 and h.kind == ARRAY and not problem then
    if not same(a, h) then
      fail(1, fmt("Array %s does not match rank 0's %s", describe(a.dtype, a.shape), describe(h.dtype, h.shape)))
    elseif op ~= op0 then
      fail(2, fmt("op %q does not match rank 0's %q", op, op0))
    end
  end
  agree(w, problem)
  return call(C.allreduce_array, a, OPS[op])
end

function mpi.send(x, dest, tag)
  local w = start()
  dest = check_rank(w, dest, "send", 2)
  tag = check_tag(tag, "send", 3)
  local why
  if cd.type(x) == "Array" then
    why = C.host_problem(x)
    if not why then
      call(C.send_bytes, header(ARRAY, 0, x), dest, tag)
      call(C.send_array, x, dest, tag)
      return
    end
  else
    local bytes
    bytes, why = serialise(x)
    if bytes then
      call(C.send_bytes, header(VALUE, #bytes), dest, tag)
      call(C.send_bytes, bytes, dest, tag)
      return
    end
  end
  -- The receiver learns (see NOTE [mpi agreement]) why nothing comes, and raises too
  call(C.send_bytes, header(PROBLEM, #why), dest, tag)
  call(C.send_bytes, why, dest, tag)
  argerror("send", 1, why)
end

function mpi.recv(x, source, tag)
  local w = start()
  local is_array = cd.type(x) == "Array"
  if x ~= nil and not is_array then argerror("recv", 1, "Array or nil expected, got " .. typename(x)) end
  source = check_rank(w, source, "recv", 2)
  tag = check_tag(tag, "recv", 3)
  local h = parse(call(C.recv_bytes, HEADER_LEN, source, tag))
  if h.kind == PROBLEM then
    raise(fmt("recv: rank %d could not send (%s)", source, call(C.recv_bytes, h.length, source, tag)))
  elseif h.kind == VALUE then
    local bytes = call(C.recv_bytes, h.length, source, tag)
    if is_array then argerror("recv", 1, fmt("rank %d sent a value, not an Array", source)) end
    return deserialise(bytes)
  end
  local why
  if x == nil then
    local ok, a = pcall(cd.empty, h.shape, h.dtype, { device = "cpu" })
    if ok then x = a else why = tostring(a) end
  else
    why = C.host_problem(x)
    if not why and not same(x, h) then
      why = fmt("Array %s does not match the %s that rank %d sent", describe(x.dtype, x.shape),
                describe(h.dtype, h.shape), source)
    end
  end
  if why then   -- the elements are received all the same, so that the sender is not left waiting
    call(C.recv_bytes, h.length, source, tag)
    argerror("recv", 1, why)
  end
  return call(C.recv_array, x, source, tag)
end

-- NOTE [mpi nccl]: an NCCL communicator over every rank of the job: rank 0 makes the unique id
-- (cd.nccl.unique_id), MPI broadcasts it, and each rank joins with cd.nccl.comm(size, id, rank, device); the
-- device is the rank's place on its node (cd.mpi.local_rank(): one GPU per rank), unless given.
function mpi.nccl_comm(device)
  local w = start()
  local nccl = rawget(cd, "nccl")
  local problem
  local function fail(why) problem = problem or fmt("nccl_comm: rank %d: %s", w.rank, why) end
  if type(nccl) ~= "table" or type(nccl.comm) ~= "function" or type(nccl.unique_id) ~= "function" then
    fail("NCCL is not available (this cudadev has no cd.nccl)")
  elseif type(nccl.is_available) == "function" then
    local ok, why = nccl.is_available()
    if not ok then fail("NCCL is not available (" .. tostring(why) .. ")") end
  end
  local id
  if not problem and w.rank == 0 then
    local ok, r = pcall(nccl.unique_id)
    if ok then id = r else fail(tostring(r)) end
  end
  agree(w, problem)
  id = call(C.bcast_bytes, id, 0)
  if device == nil then device = w.local_rank end
  return nccl.comm(w.size, id, w.rank, device)
end
