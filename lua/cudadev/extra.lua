-- The parts of cudadev written in Lua. Built into the library; run once by luaopen_cudadev with the
-- module table.
local cd, _, internal = ...

-- Raises msg at the position of the first caller outside cudadev's Lua parts (the user's line, as the C
-- functions' errors have it), or with no position when that caller is not Lua code or the debug library is gone.
local getinfo = debug and debug.getinfo
function internal.raise(msg)
  local level = 2
  if getinfo then
    while true do
      local info = getinfo(level, "S")
      if info == nil then level = 0 break end
      if info.source:sub(1, 10) ~= "=[cudadev]" then break end
      level = level + 1
    end
  else
    level = 0
  end
  error(msg, level)
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
