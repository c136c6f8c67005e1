-- The parts of cudadev written in Lua. Built into the library; run once by luaopen_cudadev with the
-- module table.
local cd = ...

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

-- Multi-device helpers ---------------------------------------------------------------------------------

-- The devices a helper works on: the given list (specs or Devices), else every CUDA device, else cpu.
local function device_list(devices)
  local out = {}
  if devices == nil then
    out = cd.cuda_devices()
    if #out == 0 then out = { cd.device("cpu") } end
    return out
  end
  if type(devices) ~= "table" then error("bad argument #2 (table of devices expected, got " .. type(devices) .. ")", 3) end
  for i, d in ipairs(devices) do out[i] = cd.device(d) end
  return out
end

-- cd.for_each_device(fn [, devices]) -> {[alias] = result}: fn(device) runs once per device with that
-- device as the default (with_device), and its first result is kept under the device's alias.
function cd.for_each_device(fn, devices)
  if type(fn) ~= "function" then error("bad argument #1 to 'for_each_device' (function expected, got " .. type(fn) .. ")", 2) end
  local results = {}
  for _, d in ipairs(device_list(devices)) do
    results[d.alias] = cd.with_device(d, fn, d)
  end
  return results
end

-- cd.synchronize_devices([devices]): wait for all work on each of the devices.
function cd.synchronize_devices(devices)
  for _, d in ipairs(device_list(devices)) do d:synchronize() end
end

-- cd.wait_streams(stream, others): work queued on `stream` from now on waits for the work queued so far
-- on every stream in `others`, on any devices (one event each, recorded on the other stream).
function cd.wait_streams(stream, others)
  if type(others) ~= "table" then error("bad argument #2 to 'wait_streams' (table of streams expected, got " .. type(others) .. ")", 2) end
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
