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

return cd
