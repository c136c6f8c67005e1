-- The parts of cudadev written in Lua. Built into the library; run once by luaopen_cudadev with the
-- module table.
local cd, _, internal = ...

-- NOTE [error positions]: an error names the user's own file and line and the function the user called, as
-- the C functions' errors do (luaL_error's level 1). The Lua parts raise through internal.raise, which puts the
-- position of the first caller outside them. Errors they do not raise themselves (a C function that they call
-- fails, such as cd.array under cd.fromfile or an Array's __index on a freed array, or a cudadev.Error from a
-- compile) would carry a position inside them ("[cudadev] cudadev.ops:212:"), so every public function
-- written in Lua runs under internal.public: its message handler moves such an error to the user's line and
-- words it for the function the user called. An error that already has no position (internal.raise's, whose
-- walk ends at the xpcall) is given the user's position on the way out.
local getinfo, getlocal = debug and debug.getinfo, debug and debug.getlocal
local INTERNAL = "=[cudadev]"

-- The level of the first caller outside cudadev's Lua parts, counted as this function's caller would pass it
-- to error() or debug.getinfo; 0 when there is none or the debug library is gone. (A caller that is a C
-- function, pcall say, is found too: error() at its level adds no position, as luaL_error's does not.)
local function user_level()
  if not getinfo then return 0 end
  local level = 3
  while true do
    local info = getinfo(level, "S")
    if info == nil then return 0 end
    if info.source:sub(1, #INTERNAL) ~= INTERNAL then return level - 1 end
    level = level + 1
  end
end

-- Raises msg at the position of the first caller outside cudadev's Lua parts (the user's line, as the C
-- functions' errors have it), or with no position when that caller is not Lua code or the debug library is gone.
function internal.raise(msg)
  error(msg, user_level())
end
local raise = internal.raise

-- "file:line" of the first caller outside cudadev's Lua parts, or "" (a cudadev.Error's where); nil when that
-- caller is the xpcall of another public function (NOTE [error positions]), whose own rethrow knows the line.
local function user_where()
  local level = user_level()
  local info = level > 0 and getinfo(level, "Sl")
  if not info then return "" end
  if info.what == "C" then
    local up = getinfo(level + 1, "S")
    if up and up.source:sub(1, #INTERNAL) == INTERNAL then return nil end
  end
  return info.currentline > 0 and ("%s:%d"):format(info.short_src, info.currentline) or ""
end

-- The argument of the public call (the frame of `fn`) that is a freed Array, or nil; hidden: how many of
-- the first arguments the user did not write (a callable object's self).
local function freed_argument(fn, hidden)
  if not getlocal then return nil end
  for level = 3, 200 do
    local info = getinfo(level, "f")
    if info == nil then return nil end
    if info.func == fn then
      for i = 1, 250 do
        local name, v = getlocal(level, -i)
        if name == nil then return nil end
        if i > hidden and cd.type(v) == "Array" and tostring(v) == "Array(freed)" then return i - hidden end
      end
      return nil
    end
  end
end

local function internal_position(s) return s:sub(1, #INTERNAL - 1) == INTERNAL:sub(2) end

-- An error raised under the public function `name` (the closure fn), in the words of that function.
local function reword(e, name, fn, hidden)
  if type(e) ~= "string" then return e end
  -- another public function that this one called (allclose's isclose, flatten's copy) left its freed-array
  -- error without a position, for the outermost call to place: it names this one's argument if it is one of them
  local nested = not internal_position(e) and e:match("^bad argument #%d+ to '[^']*' %(attempt to use a freed array%)$")
  if not internal_position(e) and not nested then return e end
  local rest = e:match("^%[cudadev%] [^:]*:%d+: (.*)$") or e
  if nested then
    local n = freed_argument(fn, hidden)
    return n and ("bad argument #%d to '%s' (attempt to use a freed array)"):format(n, name) or e
  end
  if rest:find("%(attempt to use a freed array%)$") then
    local n = freed_argument(fn, hidden)
    if n then return ("bad argument #%d to '%s' (attempt to use a freed array)"):format(n, name) end
  end
  local inner = rest:match("^bad argument #%d+ to '([^']*)'") or rest:match("^calling '([^']*)' on bad self")
  if inner == name or rest:sub(1, #name + 1) == name .. ":" then return rest end
  return name .. ": " .. rest
end

-- The public function `name` backed by f (NOTE [error positions]); hidden: as freed_argument's. Not for one
-- that calls the user's functions (cd.time): their errors are the user's own and pass through untouched.
function internal.public(name, f, hidden)
  local fn
  local function handler(e) return reword(e, name, fn, hidden or 0) end
  local function rethrow(ok, ...)
    if ok then return ... end
    local e = ...
    if cd.type(e) == "Error" then
      local where = rawget(e, "where")
      if type(where) == "string" and internal_position(where) then rawset(e, "where", user_where() or where) end
      error(e, 0)
    end
    if type(e) ~= "string" then error(e, 0) end
    raise(e)
  end
  fn = function(...) return rethrow(xpcall(f, handler, ...)) end
  return fn
end

-- The operators of the Array type written in Lua, by the name their errors give them (ops.lua's words).
local OPERATORS = { __add = "+", __sub = "-", __mul = "*", __div = "/", __mod = "%", __pow = "^", __unm = "-",
                    __idiv = "//", __band = "&", __bor = "|", __bxor = "~", __shl = "<<", __shr = ">>", __bnot = "~" }
-- Functions of the module that run the user's own code (or are not part of the API): left as they are.
local USER_CODE = { time = true, for_each_device = true, _live = true }

-- Run by cudadev.c once every part has run: each Lua-written function of the module, of its plain tables
-- (cd.random, cd.mpi), of the Array methods and each Array operator goes under internal.public. Without the
-- debug library no position can be found, and nothing is wrapped.
function internal.wrap_public(mt)
  if not getinfo then return end
  local function lua_part(f) return type(f) == "function" and getinfo(f, "S").source:sub(1, #INTERNAL) == INTERNAL end
  local function wrap_table(t, skip)
    for k, f in pairs(t) do
      if type(k) == "string" and not skip[k] and lua_part(f) then t[k] = internal.public(k, f) end
    end
  end
  wrap_table(cd, USER_CODE)
  for _, t in pairs(cd) do
    if type(t) == "table" and getmetatable(t) == nil and t ~= cd then wrap_table(t, {}) end
  end
  wrap_table(mt.methods, {})
  for k, sym in pairs(OPERATORS) do
    if lua_part(rawget(mt, k)) then rawset(mt, k, internal.public("operator " .. sym, rawget(mt, k))) end
  end
end

-- the element count of a shape (a table of sizes; {} is 1)
function internal.shape_size(shape)
  local n = 1
  for _, d in ipairs(shape) do n = n * d end
  return n
end

local function gib(n) return string.format("%.1f GiB", n / 2^30) end

-- cd.detect(): a start-up summary in the manner of Warp's banner; true when a CUDA device exists.
function cd.detect()
  local out = {}
  local ok, why = cd.is_available()
  out[#out + 1] = string.format("cudadev %s", cd.version)
  if not ok then out[#out + 1] = "   CUDA not available: " .. why end
  out[#out + 1] = "   Devices:"
  for _, d in ipairs(cd.devices()) do
    if d.is_cpu then
      out[#out + 1] = string.format('     %-10s: "%s"', '"cpu"', d.name)
    else
      out[#out + 1] = string.format('     %-10s: "%s" (%s, sm_%d, %d SMs, mempool %s)', '"' .. d.alias .. '"', d.name,
        gib(d.total_memory), d.arch, d.sm_count, d.is_mempool_supported and "enabled" or "not supported")
    end
  end
  local okd, def = pcall(cd.get_device)
  out[#out + 1] = '   Default device: ' .. (okd and ('"' .. def.alias .. '"') or tostring(def))
  if cd.peer_access_summary then
    for _, l in ipairs(cd.peer_access_summary()) do out[#out + 1] = l end
  end
  print(table.concat(out, "\n"))
  return ok
end

-- The name an argument error gives a value: cudadev.Array for ours, a metatable's __name for another named
-- type (FILE*, a host's own userdata), else its Lua type. One for every Lua part (internal.typename).
local function typename(v)
  local t = cd.type(v)
  if t then return "cudadev." .. t end
  local mt = getmetatable(v)
  return type(mt) == "table" and type(rawget(mt, "__name")) == "string" and mt.__name or type(v)
end
internal.typename = typename

-- cd.time(fn, ...) -> the seconds fn(...) took (wall time, cd.now), then fn's results. Work that fn queues on a
-- GPU runs asynchronously: synchronize inside fn to time it. An error in fn passes through untimed.
function cd.time(fn, ...)
  if type(fn) ~= "function" and not (type(getmetatable(fn)) == "table" and getmetatable(fn).__call) then
    error(("bad argument #1 to 'time' (function expected, got %s)"):format(typename(fn)), 2)
  end
  local now = cd.now
  local t0 = now()
  local function done(...) return now() - t0, ... end
  return done(fn(...))
end

-- Multi-device helpers ---------------------------------------------------------------------------------

-- Raises Lua's own "bad argument #n to 'fname' (why)" at the caller of the public helper (depth: how many
-- local functions lie between argerror and the helper).
local function argerror(fname, n, why, depth) error(("bad argument #%d to '%s' (%s)"):format(n, fname, why), 3 + (depth or 0)) end

-- The devices a helper works on: the given list (specs or Devices), else every CUDA device, else cpu.
local function device_list(devices, fname, n)
  local out = {}
  if devices == nil then
    out = cd.cuda_devices()
    if #out == 0 then out = { cd.device("cpu") } end
    return out
  end
  if type(devices) ~= "table" then argerror(fname, n, "table of devices expected, got " .. typename(devices), 1) end
  for i, d in ipairs(devices) do
    local ok, dev = pcall(cd.device, d)
    if not ok then argerror(fname, n, ("item %d: %s"):format(i, tostring(dev):match("%((.*)%)$") or tostring(dev)), 1) end
    out[i] = dev
  end
  return out
end

-- A stream argument, or item i of a list of streams, checked the way the C functions check theirs.
local function check_stream(s, fname, n, item)
  if cd.type(s) ~= "Stream" then
    argerror(fname, n, (item and ("item %d: "):format(item) or "") .. "cudadev.Stream expected, got " .. typename(s), 1)
  end
  return s
end

-- cd.for_each_device(fn [, devices]) -> {[alias] = result}: fn(device) runs once per device with that
-- device as the default (with_device), and its first result is kept under the device's alias.
function cd.for_each_device(fn, devices)
  if type(fn) ~= "function" then argerror("for_each_device", 1, "function expected, got " .. typename(fn)) end
  local results = {}
  for _, d in ipairs(device_list(devices, "for_each_device", 2)) do
    results[d.alias] = cd.with_device(d, fn, d)
  end
  return results
end

-- cd.synchronize_devices([devices]): wait for all work on each of the devices.
function cd.synchronize_devices(devices)
  for _, d in ipairs(device_list(devices, "synchronize_devices", 1)) do d:synchronize() end
end

-- cd.wait_streams(stream, others): work queued on `stream` from now on waits for the work queued so far
-- on every stream in `others`, on any devices (one event each, recorded on the other stream).
function cd.wait_streams(stream, others)
  check_stream(stream, "wait_streams", 1)
  if type(others) ~= "table" then argerror("wait_streams", 2, "table of streams expected, got " .. typename(others)) end
  for i, o in ipairs(others) do check_stream(o, "wait_streams", 2, i) end
  for _, o in ipairs(others) do stream:wait_event(o:record_event()) end
  return stream
end

-- The peer-access summary of detect() and luacuda's banner, in Warp's words.
function cd.peer_access_summary()
  local devs = cd.cuda_devices()
  if #devs < 2 then return {} end
  local m = cd.peer_access_matrix()
  local all = true
  for _, t in ipairs(devs) do
    for _, p in ipairs(devs) do all = all and m.supported[t.alias][p.alias] end
  end
  if all then return { "   CUDA peer access:", "     Supported fully (all-directional)" } end
  local lines = { "   CUDA peer access (row: whose memory, column: who reads it):" }
  local head = "     " .. string.rep(" ", 8)
  for _, p in ipairs(devs) do head = head .. string.format("%-8s", p.alias) end
  lines[#lines + 1] = head
  for _, t in ipairs(devs) do
    local row = "     " .. string.format("%-8s", t.alias)
    for _, p in ipairs(devs) do row = row .. string.format("%-8s", m.supported[t.alias][p.alias] and "yes" or "no") end
    lines[#lines + 1] = row
  end
  return lines
end

return cd
