-- Many GPUs: peer and memory-pool access (Warp's directional semantics), copies between GPUs with and
-- without access, launches that use another GPU's memory, a mapped context, the multi-device helpers.
-- The multi-GPU tests need two CUDA devices and are pending with the reason otherwise; the argument
-- checks run everywhere.
local helper = require "spec.helper"
local cd = require "cudadev"

local function rand_floats(n, seed)
  local t, x = {}, seed
  for i = 1, n do
    x = (x * 1103515245 + 12345) % 2147483648
    t[i] = (x % 65536) / 4 - 8192       -- exact in float32 (quarters below 2^14), so byte-for-byte comparable
  end
  return t
end

local function same(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do if a[i] ~= b[i] then return false, i end end
  return true
end

describe("peer access arguments", function()
  it("refuses the cpu device", function()
    helper.assert_error_matches(function() cd.set_peer_access_enabled("cpu", "cpu", true) end,
      "bad argument #1 to 'set_peer_access_enabled' (peer access is between CUDA devices, not cpu)")
    assert.is_false(cd.is_mempool_access_supported("cpu", "cpu"))   -- a query answers false (issue 16)
  end)

  it("wants a boolean to enable or disable", function()
    helper.assert_error_matches(function() cd.set_peer_access_enabled("cpu", "cpu", 1) end,
      "bad argument #1 to 'set_peer_access_enabled' (peer access is between CUDA devices, not cpu)")
  end)

  it("for_each_device runs once per device with that device as the default", function()
    local seen = cd.for_each_device(function(d) return cd.get_device().alias .. "/" .. d.alias end)
    local n = 0
    for alias, v in pairs(seen) do
      n = n + 1
      assert.are.equal(alias .. "/" .. alias, v)
    end
    assert.is_true(n >= 1)
    helper.assert_error_matches(function() cd.for_each_device(42) end,
      "bad argument #1 to 'for_each_device' (function expected, got number)")
  end)
end)

describe("two GPUs", function()
  local d0, d1, default

  -- every case leaves the default device, and with it the current context, as it found them, on failure too
  before_each(function() default = cd.get_device() end)
  after_each(function() cd.set_device(default) end)

  before_each(function()
    if cd.device_count() >= 2 then
      d0, d1 = cd.device("cuda:0"), cd.device("cuda:1")
      cd.set_peer_access_enabled(d0, d1, false)
      cd.set_peer_access_enabled(d1, d0, false)
      if cd.is_mempool_access_supported(d0, d1) then
        cd.set_mempool_access_enabled(d0, d1, false)
        cd.set_mempool_access_enabled(d1, d0, false)
      end
    end
  end)

  helper.multi_gpu_it("enables access in one direction only, idempotently", function()
    assert.is_true(cd.is_peer_access_enabled(d0, d0))           -- target == peer: always
    cd.set_peer_access_enabled(d0, d0, false)                   -- a no-op
    assert.is_true(cd.is_peer_access_enabled(d0, d0))
    if not cd.is_peer_access_supported(d0, d1) then
      helper.assert_error_contains(function() cd.set_peer_access_enabled(d0, d1, true) end, "is not supported")
      return
    end
    assert.is_false(cd.is_peer_access_enabled(d0, d1))
    cd.set_peer_access_enabled(d0, d1, true)
    cd.set_peer_access_enabled(d0, d1, true)                    -- twice: fine
    assert.is_true(cd.is_peer_access_enabled(d0, d1))
    assert.is_false(cd.is_peer_access_enabled(d1, d0))          -- directional
    cd.set_peer_access_enabled(d0, d1, false)
    cd.set_peer_access_enabled(d0, d1, false)                   -- disabling when off: fine
    assert.is_false(cd.is_peer_access_enabled(d0, d1))
  end)

  helper.multi_gpu_it("with_peer_access and with_mempool_access restore the state, on error too", function()
    if not cd.is_peer_access_supported(d0, d1) then return end
    local r = cd.with_peer_access(d0, d1, true, function(x) return cd.is_peer_access_enabled(d0, d1), x end, 7)
    assert.is_true(r)
    assert.is_false(cd.is_peer_access_enabled(d0, d1))
    local ok, err = pcall(cd.with_peer_access, d0, d1, true, function() error({ tag = "mine" }) end)
    assert.is_false(ok)
    assert.are.equal("mine", err.tag)
    assert.is_false(cd.is_peer_access_enabled(d0, d1))
    if cd.is_mempool_access_supported(d0, d1) then
      assert.is_false(cd.is_mempool_access_enabled(d0, d1))
      cd.with_mempool_access(d0, d1, true, function() assert.is_true(cd.is_mempool_access_enabled(d0, d1)) end)
      assert.is_false(cd.is_mempool_access_enabled(d0, d1))
    end
  end)

  helper.multi_gpu_it("peer_access_matrix reports every pair", function()
    local m = cd.peer_access_matrix()
    for _, k in ipairs({ "supported", "enabled", "mempool_supported", "mempool_enabled" }) do
      assert.is_table(m[k]["cuda:0"])
      assert.is_boolean(m[k]["cuda:0"]["cuda:1"])
      assert.is_true(m[k]["cuda:1"]["cuda:1"])
    end
    assert.are.equal(cd.is_peer_access_supported(d0, d1), m.supported["cuda:0"]["cuda:1"])
  end)

  -- every direction, with and without access, synchronous and on a stream; byte for byte
  for _, access in ipairs({ false, true }) do
    helper.multi_gpu_it("copies between GPUs byte for byte " .. (access and "with" or "without") .. " access", function()
      if access and not cd.is_peer_access_supported(d0, d1) then return end
      local n = 1 << 16
      local host = rand_floats(n, access and 3 or 5)
      -- device arrays come from the stream-ordered pools: their direct path needs pool access as well
      local pool = access and cd.is_mempool_access_supported(d0, d1) and cd.is_mempool_access_supported(d1, d0)
      cd.set_mempool_access_enabled(d0, d1, pool)
      cd.set_mempool_access_enabled(d1, d0, pool)
      cd.with_peer_access(d0, d1, access, function()
        cd.with_peer_access(d1, d0, access, function()
          local a0 = cd.array(host, "float32", { device = d0 })
          local a1 = cd.empty(n, "float32", { device = d1 }):fill(0 / 0)
          cd.copy(a1, a0)                                        -- 0 -> 1
          assert.is_true(same(host, a1:totable()))
          local b0 = cd.empty(n, "float32", { device = d0 }):fill(0 / 0)
          local s = cd.stream(d1)
          cd.copy(b0, a1, { stream = s })                        -- 1 -> 0, asynchronous on d1's stream
          s:synchronize()
          assert.is_true(same(host, b0:totable()))
          local c1 = a0:to(d1)                                   -- a:to across GPUs
          assert.are.equal(d1, c1.device)
          assert.is_true(same(host, c1:totable()))
          local part = cd.zeros(10, "float32", { device = d1 })
          cd.copy(part, a0, { count = 4, src_offset = 6, dst_offset = 2 })
          local got = part:totable()
          assert.are.same({ 0, 0, host[7], host[8], host[9], host[10], 0, 0, 0, 0 }, got)
        end)
      end)
    end)
  end

  local src = [[extern "C" __global__ void add1(float *dst, const float *src, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i] + 1.0f;
  }]]

  helper.multi_gpu_it("refuses a launch that uses another GPU's memory without access, accepts it with", function()
    local k = cd.compile(src, { device = d1 }).add1
    local n = 1000
    local host = rand_floats(n, 11)
    local x0 = cd.array(host, "float32", { device = d0 })         -- pool memory of cuda:0
    local y1 = cd.empty(n, "float32", { device = d1 }):fill(0 / 0)
    local pool = d0.is_mempool_supported
    helper.assert_error_matches(function() k({ dim = n }, y1, x0, n) end,
      ("bad argument #2 to 'add1' ('src': array is on cuda:0 but the kernel runs on cuda:1; move it with " ..
       "a:to(\"cuda:1\"), or let cuda:1 reach it with cd.set_%s_access_enabled(\"cuda:0\", \"cuda:1\", true))")
      :format(pool and "mempool" or "peer"))
    local supported = pool and cd.is_mempool_access_supported(d0, d1) or cd.is_peer_access_supported(d0, d1)
    if not supported then return end
    local with = pool and cd.with_mempool_access or cd.with_peer_access
    with(d0, d1, true, function()
      k({ dim = n }, y1, x0, n)
      d1:synchronize()
    end)
    local got = y1:totable()
    for i = 1, n do assert.are.equal(host[i] + 1, got[i]) end
  end)

  helper.multi_gpu_it("a mapped context is a device by alias", function()
    cd.set_device(d1)                                            -- makes cuda:1's context current
    local alias = "mapped" .. tostring(os.time())
    local m = cd.map_cuda_device(alias)
    assert.are.equal(alias, m.alias)
    assert.is_false(m.is_primary)
    assert.are.equal(d1.name, m.name)
    local k = cd.compile(src, { device = alias }).add1
    local x = cd.array({ 1, 2, 3 }, "float32", { device = alias })
    local y = cd.empty(3, "float32", { device = alias })
    k({ dim = 3 }, y, x, 3)
    assert.are.same({ 2, 3, 4 }, y:totable())
    helper.assert_error_matches(function() cd.map_cuda_device(alias) end,
      ("bad argument #1 to 'map_cuda_device' (alias '%s' is already mapped)"):format(alias))
    cd.unmap_cuda_device(alias)
    helper.assert_error_contains(function() cd.device(alias) end, "no device '" .. alias .. "'")
    cd.set_device(d0)
  end)

  helper.multi_gpu_it("waits across devices and synchronises a set of devices", function()
    local n = 1 << 20
    local s0, s1 = cd.stream(d0), cd.stream(d1)
    local a0 = cd.full(n, 2, "float32", { device = d0, stream = s0 })
    local b1 = cd.empty(n, "float32", { device = d1 })
    cd.wait_streams(s1, { s0 })                                  -- s1 waits for a0's fill on s0
    cd.copy(b1, a0, { stream = s1 })
    cd.synchronize_devices({ d0, d1 })
    assert.are.equal(2, b1[n])
    local r = cd.for_each_device(function(d) return cd.zeros(4, { device = d }).device.alias end)
    assert.are.equal("cuda:0", r["cuda:0"])
    assert.are.equal("cuda:1", r["cuda:1"])
  end)
end)
