-- Cross-device conformance: the same CUDA C++ kernel strings (spec/conformance_kernels.lua) run on every
-- available device ("cpu", and "cuda:0" with a GPU) and must give the same results, checked against a
-- host reference computed here in Lua (integers, and float64 for floats).
--
-- Inputs come from a seeded generator (below), never zeros. Outputs start poisoned with a sentinel value
-- per dtype, and every element is compared, so an element a kernel failed to write is reported as
-- "never written"; accumulators start from a known non-zero base instead.
--
-- Comparison rules:
--   * integer kernels: bitwise, element by element (the values Lua reads back must be equal integers).
--   * float kernels: per-element relative error |got - ref| <= 1e-6 * max(|ref|, 2^-126) against the float64
--     reference (2^-126 is float32's smallest normal, so this is a plain relative error for every value a
--     kernel here produces, and an exact zero must stay an exact zero). float32 accumulation order differs
--     between devices (a GPU tree vs. a cpu loop, FMA contraction by NVRTC), so the data is chosen to make
--     every partial sum and product exact in float32: small integers or dyadic fractions with few
--     significant bits. Those kernels therefore match the reference exactly, and 1e-6 holds on any device.
--   * float64 kernels: the same rule with 1e-12 (stricter than asked; only FMA contraction differs).
--   * math functions: within CUDA's documented maximum ulp error (CUDA Math API, single precision, no
--     -use_fast_math), measured in float32 ulps of the float64 reference: sinf, cosf, expf, rsqrtf 2 ulp,
--     logf 1 ulp; sqrtf, fmaf and float division are correctly rounded (0 ulp: equal to the reference
--     rounded to float32). Every one of these bounds is also within the 1e-6 relative rule, which is
--     checked too (k ulp <= k * 2^-23 relative, and k <= 2 here).
--   * copies and conversions (transpose, __half): exact.
local helper = require "spec.helper"
local cd = require "cudadev"
local K = require "spec.conformance_kernels"

local REL = 1e-6          -- the suite's relative tolerance for float32 kernels
local REL64 = 1e-12       -- for float64 kernels
local FLOOR = 2.0 ^ -126  -- float32's smallest normal: the floor of |ref| in the relative error

-- ---------------------------------------------------------------- deterministic inputs

-- A 64-bit linear congruential generator (Knuth's MMIX constants) on Lua's wrapping integers; the top 31
-- bits of the state are the output. Same seed, same sequence, on every machine.
local function rng(seed)
  local s = seed
  local r = {}
  function r.bits31()
    s = s * 6364136223846793005 + 1442695040888963407
    return (s >> 33) & 0x7fffffff
  end
  function r.u32() return ((r.bits31() << 1) ~ (r.bits31() & 1)) & 0xffffffff end
  function r.bits64() return (r.bits31() << 33) ~ (r.bits31() << 2) ~ (r.bits31() & 3) end
  function r.int(lo, hi) return lo + r.bits31() % (hi - lo + 1) end   -- hi - lo < 2^31
  function r.unit() return r.bits31() / 2147483648.0 end                -- [0, 1), 31 bits
  return r
end

local function f32(v) return (string.unpack("<f", string.pack("<f", v))) end

-- ---------------------------------------------------------------- arrays, kernels

local SENTINEL = {
  float16 = -1234.0, float32 = -7777.5, float64 = -7777.5,
  int8 = -91, uint8 = 0xA5, int32 = -559038737, uint32 = 0xDEADBEEF,
  int64 = -0x2152411021524111, uint64 = 0x0BADC0DE0BADC0DE,
}

local function upload(dev, t, dtype) return cd.array(t, dtype, { device = dev }) end
local function poisoned(dev, n, dtype) return cd.full(n, SENTINEL[dtype], dtype, { device = dev }) end

-- NVRTC finds <cuda_fp16.h> only on an include path (NVRTC 13.0 has no built-in copy): the
-- toolkit's include folder, where there is one. The cpu device brings its own and gets nothing added.
local function toolkit_include()
  for _, root in ipairs({ os.getenv("CUDA_HOME"), os.getenv("CUDA_PATH"), "/usr/local/cuda" }) do
    local f = root and root ~= "" and io.open(root .. "/include/cuda_fp16.h", "r")
    if f then
      f:close()
      return root .. "/include"
    end
  end
end

-- One compile per (device, group), shared by the tests of the group; a failed compile is remembered so
-- that each test of the group reports it without compiling again.
local compiled = {}
local function kernel(dev, group, name)
  local key = dev .. "|" .. group
  local entry = compiled[key]
  if entry == nil then
    local g = K[group]
    local inc = g.cuda_headers and dev ~= "cpu" and toolkit_include() or nil
    local ok, m = pcall(cd.compile, g.source, { device = dev, name = group .. ".cu",
                                                name_expressions = g.name_expressions,
                                                include_paths = inc and { inc } or nil })
    entry = { ok = ok, value = ok and m or tostring(m) }
    compiled[key] = entry
  end
  if not entry.ok then
    error(("compiling %s.cu for %s failed:\n%s"):format(group, dev, entry.value), 2)
  end
  return entry.value[name]
end

-- ---------------------------------------------------------------- comparisons

local function report(what, bad, n, lines, extra)
  assert.is_true(bad == 0, ("%s: %d of %d elements differ%s:\n  %s"):format(what, bad, n, extra or "",
    table.concat(lines, "\n  ")))
end

local function never(got, sentinel, ref)
  return (got == sentinel and ref ~= sentinel) and " (never written)" or ""
end

-- Integers, bitwise. `out` is an Array (or a table already read back), `ref` a table of integers.
local function expect_ints(what, out, ref)
  local sentinel = type(out) ~= "table" and SENTINEL[out.dtype] or nil
  local got = type(out) == "table" and out or out:totable()
  assert.are.equal(#ref, #got, what .. ": number of elements")
  local bad, lines = 0, {}
  for i = 1, #ref do
    local g, r = got[i], ref[i]
    assert(math.type(r) == "integer", what .. ": the reference must be integers")
    if math.type(g) ~= "integer" or g ~= r then
      bad = bad + 1
      if #lines < 8 then
        lines[#lines + 1] = ("[%d] got %s, want %s%s"):format(i, tostring(g), tostring(r), never(g, sentinel, r))
      end
    end
  end
  report(what, bad, #ref, lines)
end

-- Floats, per-element relative error (see the top of the file), `tol` defaults to REL.
local function expect_close(what, out, ref, tol)
  tol = tol or REL
  local sentinel = type(out) ~= "table" and SENTINEL[out.dtype] or nil
  local got = type(out) == "table" and out or out:totable()
  assert.are.equal(#ref, #got, what .. ": number of elements")
  local bad, lines, worst = 0, {}, 0.0
  for i = 1, #ref do
    local g, r = got[i], ref[i]
    if g ~= r then
      local err = math.abs(g - r) / math.max(math.abs(r), FLOOR)
      if err ~= err then err = math.huge end   -- NaN, or an infinity that differs
      if err > worst then worst = err end
      if not (err <= tol) then
        bad = bad + 1
        if #lines < 8 then
          lines[#lines + 1] = ("[%d] got %.9g, want %.17g (relative error %.3g)%s"):format(i, g, r, err,
            never(g, sentinel, r))
        end
      end
    end
  end
  report(what, bad, #ref, lines, (" (tolerance %g, worst %.3g)"):format(tol, worst))
end

-- One float32 ulp at x (float32's subnormal spacing below the smallest normal).
local function ulp32(x)
  local a = math.abs(x)
  if a < FLOOR then return 2.0 ^ -149 end
  local e = math.floor(math.log(a, 2))
  if 2.0 ^ e > a then e = e - 1 elseif 2.0 ^ (e + 1) <= a then e = e + 1 end
  return 2.0 ^ (e - 23)
end

-- |got - ref| <= ulps float32 ulps of ref; with ulps == 0, got must be ref rounded to float32.
local function expect_ulps(what, out, ref, ulps)
  local got = out:totable()
  assert.are.equal(#ref, #got, what .. ": number of elements")
  local bad, lines, worst = 0, {}, 0.0
  for i = 1, #ref do
    local g, r = got[i], ref[i]
    local err = math.abs(g - r) / ulp32(r)
    if err ~= err then err = math.huge end
    if err > worst then worst = err end
    local ok = ulps == 0 and g == f32(r) or ulps > 0 and err <= ulps
    if not ok then
      bad = bad + 1
      if #lines < 8 then
        lines[#lines + 1] = ("[%d] got %.9g, want %.17g (%.3g ulp)%s"):format(i, g, r, err,
          never(g, SENTINEL.float32, r))
      end
    end
  end
  report(what, bad, #ref, lines, (" (bound %g ulp, worst %.3g ulp)"):format(ulps, worst))
  expect_close(what, got, ref, REL)
end

-- ---------------------------------------------------------------- references

local function gcd(a, b)
  while b ~= 0 do a, b = b, a % b end
  return a
end

local function collatz_steps(v)
  local s = 0
  while v ~= 1 do
    v = (v & 1) == 1 and 3 * v + 1 or v >> 1
    s = s + 1
  end
  return s
end

-- The float16 nearest to v (ties to even), infinity past the largest finite half (65504).
local function f16(v)
  local a = math.abs(v)
  if a ~= a then return v end
  if a >= 65520 then return v < 0 and -math.huge or math.huge end
  local e = -14
  if a >= 2.0 ^ -14 then
    e = math.floor(math.log(a, 2))
    if 2.0 ^ e > a then e = e - 1 elseif 2.0 ^ (e + 1) <= a then e = e + 1 end
  end
  local q = a / 2.0 ^ (e - 10)
  local fl = math.floor(q)
  local frac = q - fl
  if frac > 0.5 or (frac == 0.5 and fl % 2 == 1) then fl = fl + 1 end
  local res = fl * 2.0 ^ (e - 10)
  return v < 0 and -res or res
end

local function ceil_div(a, b) return (a + b - 1) // b end

local function fill(n, fn)
  local t = {}
  for i = 1, n do t[i] = fn(i) end
  return t
end

-- ---------------------------------------------------------------- the suite

helper.each_device(function(dev)
  describe("conformance on " .. dev, function()

    -- ------------------------------------------------ element-wise, indexing, parameters (group basic)

    it("saxpy: out = a*x + y in float32, n not a multiple of the block", function()
      local n, r, a = 10007, rng(101), 1.75
      local x = fill(n, function() return r.int(-4096, 4096) / 64 end)
      local y = fill(n, function() return r.int(-4096, 4096) / 32 end)
      local out = poisoned(dev, n, "float32")
      kernel(dev, "basic", "saxpy")({ dim = n }, n, a, upload(dev, x, "float32"), upload(dev, y, "float32"), out)
      expect_close("saxpy", out, fill(n, function(i) return a * x[i] + y[i] end))
    end)

    it("vector add, int32", function()
      local n, r = 5003, rng(102)
      local a = fill(n, function() return r.int(-(1 << 30), (1 << 30) - 1) end)
      local b = fill(n, function() return r.int(-(1 << 30), (1 << 30) - 1) end)
      local c = poisoned(dev, n, "int32")
      kernel(dev, "basic", "vadd_i32")({ dim = n }, n, upload(dev, a, "int32"), upload(dev, b, "int32"), c)
      expect_ints("vadd_i32", c, fill(n, function(i) return a[i] + b[i] end))
    end)

    it("vector add, int64 beyond 32 bits", function()
      local n, r = 4099, rng(103)
      local a = fill(n, function() return (r.bits64() >> 2) - (1 << 61) end)
      local b = fill(n, function() return (r.bits64() >> 2) - (1 << 61) end)
      local c = poisoned(dev, n, "int64")
      kernel(dev, "basic", "vadd_i64")({ dim = n }, n, upload(dev, a, "int64"), upload(dev, b, "int64"), c)
      expect_ints("vadd_i64", c, fill(n, function(i) return a[i] + b[i] end))
    end)

    it("vector add, uint8 wrapping modulo 256", function()
      local n, r = 4097, rng(104)
      local a = fill(n, function() return r.int(0, 255) end)
      local b = fill(n, function() return r.int(0, 255) end)
      local c = poisoned(dev, n, "uint8")
      kernel(dev, "basic", "vadd_u8")({ dim = n }, n, upload(dev, a, "uint8"), upload(dev, b, "uint8"), c)
      expect_ints("vadd_u8", c, fill(n, function(i) return (a[i] + b[i]) & 0xff end))
    end)

    it("__device__ helper functions calling each other (a kernel with C++ linkage)", function()
      local n, r = 2000, rng(105)
      local a = fill(n, function() return r.int(1, 100000) end)
      local b = fill(n, function(i) return i % 5 == 0 and a[i] * r.int(1, 9) or r.int(1, 100000) end)
      local out = poisoned(dev, n, "uint32")
      kernel(dev, "basic", "helpers")({ dim = n }, n, upload(dev, a, "uint32"), upload(dev, b, "uint32"), out)
      expect_ints("helpers", out, fill(n, function(i) return gcd(a[i], b[i]) * 1000 + collatz_steps(a[i]) end))
    end)

    it("grid-stride loop over more elements than threads", function()
      local n, r = 50021, rng(106)
      local x = fill(n, function() return r.u32() end)
      local out = poisoned(dev, n, "uint32")
      kernel(dev, "basic", "grid_stride")({ grid = 3, block = 96 }, n, upload(dev, x, "uint32"), out)
      expect_ints("grid_stride", out, fill(n, function(i) return (x[i] * 2654435761 + (i - 1)) & 0xffffffff end))
    end)

    it("2-D grid: blockIdx.y, blockDim.y and gridDim", function()
      local w, h, bx, by = 50, 37, 16, 8
      local gx, gy = ceil_div(w, bx), ceil_div(h, by)
      local out = poisoned(dev, w * h, "int32")
      kernel(dev, "basic", "grid2d")({ grid = { gx, gy }, block = { bx, by } }, w, h, out)
      local ref = {}
      for y = 0, h - 1 do
        for x = 0, w - 1 do
          local blk = (y // by) * gx + x // bx
          local thr = (y % by) * bx + x % bx
          ref[y * w + x + 1] = (blk * 1000 + thr) * 10 + gy
        end
      end
      expect_ints("grid2d", out, ref)
    end)

    it("3-D blocks on a 3-D grid", function()
      local nx, ny, nz, bx, by, bz = 19, 10, 7, 8, 4, 2
      local gx, gy, gz = ceil_div(nx, bx), ceil_div(ny, by), ceil_div(nz, bz)
      local out = poisoned(dev, nx * ny * nz, "int32")
      kernel(dev, "basic", "block3d")({ grid = { gx, gy, gz }, block = { bx, by, bz } }, nx, ny, nz, out)
      local ref = {}
      for z = 0, nz - 1 do
        for y = 0, ny - 1 do
          for x = 0, nx - 1 do
            local thr = ((z % bz) * by + y % by) * bx + x % bx
            local blk = ((z // bz) * gy + y // by) * gx + x // bx
            ref[(z * ny + y) * nx + x + 1] = blk * 1000 + thr
          end
        end
      end
      expect_ints("block3d", out, ref)
    end)

    it("bool, char and unsigned char parameters", function()
      local n, r = 1000, rng(107)
      local x = fill(n, function() return r.int(-128, 127) end)
      local input = upload(dev, x, "int8")
      local k = kernel(dev, "basic", "flags")
      local out1, out2 = poisoned(dev, n, "int32"), poisoned(dev, n, "int32")
      k({ dim = n }, n, input, out1, true, -7, 0x0F)
      k({ dim = n }, n, input, out2, false, 100, 0xF0)
      expect_ints("flags(negate=true, offset=-7, mask=0x0f)", out1, fill(n, function(i) return (-x[i] - 7) ~ 0x0F end))
      expect_ints("flags(negate=false, offset=100, mask=0xf0)", out2, fill(n, function(i) return (x[i] + 100) ~ 0xF0 end))
    end)

    it("double precision: Horner's rule in a __device__ function, and sqrt", function()
      local n, m, r = 3001, 7, rng(108)
      local coef = fill(m, function() return 0.5 + r.unit() end)
      local x = fill(n, function() return 0.25 + 1.75 * r.unit() end)
      local out = poisoned(dev, n, "float64")
      kernel(dev, "basic", "dpoly")({ dim = n }, n, upload(dev, coef, "float64"), m, upload(dev, x, "float64"), out)
      expect_close("dpoly", out, fill(n, function(i)
        local acc = coef[m]
        for j = m - 1, 1, -1 do acc = acc * x[i] + coef[j] end
        return acc + math.sqrt(x[i])
      end), REL64)
    end)

    it("threads past the end return after the block's last barrier (kernel in a namespace)", function()
      local n, r, bs = 1000, rng(109), 128
      local x = fill(n, function() return r.int(-1000000, 1000000) end)
      local out = poisoned(dev, n, "int32")
      kernel(dev, "basic", "conf::reverse_in_block")({ grid = ceil_div(n, bs), block = bs }, n, upload(dev, x, "int32"), out)
      expect_ints("reverse_in_block", out, fill(n, function(i)
        local g = i - 1
        local t = g % bs
        local j = (g - t) + bs - 1 - t
        return (j < n and x[j + 1] or -1) * 3 + t
      end))
    end)

    it("whole blocks return before a barrier; their outputs stay untouched", function()
      local r, nblocks, nactive = rng(110), 10, 7
      local n = nblocks * 64
      local x = fill(n, function() return r.int(-100000, 100000) end)
      local out = poisoned(dev, n, "int32")
      kernel(dev, "basic", "active_blocks")({ grid = nblocks, block = 64 }, nactive, upload(dev, x, "int32"), out)
      expect_ints("active_blocks", out, fill(n, function(i)
        local b, t = (i - 1) // 64, (i - 1) % 64
        if b >= nactive then return SENTINEL.int32 end
        return x[b * 64 + (t + 1) % 64 + 1] - x[b * 64 + t + 1]
      end))
    end)

    -- ------------------------------------------------ shared memory (group shared)

    it("block sum reduction, static __shared__, 256 threads", function()
      local n, r = 512 * 23 + 300, rng(201)
      local x = fill(n, function() return r.int(-1000, 1000) end)
      local nb = ceil_div(n, 512)
      local partial = poisoned(dev, nb, "float32")
      kernel(dev, "shared", "block_sum_static")({ grid = nb, block = 256 }, n, upload(dev, x, "float32"), partial)
      expect_close("block_sum_static", partial, fill(nb, function(b)
        local s = 0
        for i = (b - 1) * 512 + 1, math.min(b * 512, n) do s = s + x[i] end
        return s
      end))
    end)

    it("block sum reduction, extern __shared__ sized at launch", function()
      local n, r = 5000, rng(202)
      local x = fill(n, function() return r.int(-500, 500) / 8 end)
      local input = upload(dev, x, "float32")
      for _, bs in ipairs({ 128, 64 }) do
        local nb = ceil_div(n, bs)
        local partial = poisoned(dev, nb, "float32")
        kernel(dev, "shared", "block_sum_dynamic")({ grid = nb, block = bs, shared = bs * 4 }, n, input, partial)
        expect_close("block_sum_dynamic, block " .. bs, partial, fill(nb, function(b)
          local s = 0.0
          for i = (b - 1) * bs + 1, math.min(b * bs, n) do s = s + x[i] end
          return s
        end))
      end
    end)

    it("tree reduction with __syncthreads in the loop (int64 sum and int32 max in dynamic shared)", function()
      local n, r, bs = 256 * 11 + 19, rng(203), 256
      local x = fill(n, function() return r.int(-(1 << 30), 1 << 30) end)
      local nb = ceil_div(n, bs)
      local sums, maxs = poisoned(dev, nb, "int64"), poisoned(dev, nb, "int32")
      kernel(dev, "shared", "tree_sum_max")({ grid = nb, block = bs, shared = bs * 12 }, n, upload(dev, x, "int32"),
        sums, maxs)
      local rs, rm = {}, {}
      for b = 1, nb do
        local s, m = 0, math.mininteger
        for i = (b - 1) * bs + 1, math.min(b * bs, n) do
          s = s + x[i] * 1000003
          m = math.max(m, x[i])
        end
        rs[b], rm[b] = s, m
      end
      expect_ints("tree_sum_max sums", sums, rs)
      expect_ints("tree_sum_max maxs", maxs, rm)
    end)

    it("Hillis-Steele inclusive prefix scan with barriers in a loop, across blocks", function()
      local n, r, bs = 512 * 7 + 123, rng(204), 512
      local x = fill(n, function() return r.int(-1000, 1000) end)
      local nb = ceil_div(n, bs)
      local out, bsums, scanned = poisoned(dev, n, "int32"), poisoned(dev, nb, "int32"), poisoned(dev, nb, "int32")
      local scan, add = kernel(dev, "shared", "scan_block"), kernel(dev, "shared", "scan_add")
      scan({ grid = nb, block = bs }, n, upload(dev, x, "int32"), out, bsums)
      scan({ grid = 1, block = bs }, nb, bsums, scanned, nil)
      add({ grid = nb, block = bs }, n, scanned, out)
      local ref, acc = {}, 0
      for i = 1, n do
        acc = acc + x[i]
        ref[i] = acc
      end
      local rb = fill(nb, function(b)
        local s = 0
        for i = (b - 1) * bs + 1, math.min(b * bs, n) do s = s + x[i] end
        return s
      end)
      expect_ints("scan block sums", bsums, rb)
      expect_ints("scan of the block sums", scanned, fill(nb, function(b) return ref[math.min(b * bs, n)] end))
      expect_ints("inclusive scan", out, ref)
    end)

    it("tiled transpose, 32x32 tiles padded to 33, sizes not multiples of 32", function()
      local rows, cols, r = 67, 45, rng(205)
      local x = fill(rows * cols, function() return r.int(-(1 << 23), 1 << 23) / 1024 end)
      local out = poisoned(dev, rows * cols, "float32")
      kernel(dev, "shared", "transpose")({ grid = { ceil_div(cols, 32), ceil_div(rows, 32) }, block = { 32, 8 } },
        rows, cols, upload(dev, x, "float32"), out)
      local ref = {}
      for i = 0, rows - 1 do
        for j = 0, cols - 1 do ref[j * rows + i + 1] = x[i * cols + j + 1] end
      end
      expect_close("transpose", out, ref, 0)
    end)

    it("tiled matrix multiply, 16x16 tiles, sizes not multiples of 16", function()
      local M, N, Kd, r = 37, 29, 53, rng(206)
      local A = fill(M * Kd, function() return r.int(-16, 16) / 4 end)
      local B = fill(Kd * N, function() return r.int(-10, 10) / 2 end)
      local C = poisoned(dev, M * N, "float32")
      kernel(dev, "shared", "matmul")({ grid = { ceil_div(N, 16), ceil_div(M, 16) }, block = { 16, 16 } },
        M, N, Kd, upload(dev, A, "float32"), upload(dev, B, "float32"), C)
      local ref = {}
      for i = 0, M - 1 do
        for j = 0, N - 1 do
          local s = 0.0
          for k = 0, Kd - 1 do s = s + A[i * Kd + k + 1] * B[k * N + j + 1] end
          ref[i * N + j + 1] = s
        end
      end
      expect_close("matmul", C, ref)
    end)

    it("1-D 3-point stencil with a halo in shared memory", function()
      local n, r = 1000, rng(207)
      local x = fill(n, function() return r.int(-4096, 4096) / 16 end)
      local out = poisoned(dev, n, "float32")
      kernel(dev, "shared", "stencil1d")({ grid = ceil_div(n, 128), block = 128 }, n, upload(dev, x, "float32"), out)
      expect_close("stencil1d", out, fill(n, function(i)
        return 0.25 * x[math.max(i - 1, 1)] + 0.5 * x[i] + 0.25 * x[math.min(i + 1, n)]
      end))
    end)

    it("2-D 5-point stencil on 16x16 tiles with a halo", function()
      local w, h, r = 45, 38, rng(208)
      local x = fill(w * h, function() return r.int(-1000000, 1000000) end)
      local out = poisoned(dev, w * h, "int32")
      kernel(dev, "shared", "laplace2d")({ grid = { ceil_div(w, 16), ceil_div(h, 16) }, block = { 16, 16 } },
        w, h, upload(dev, x, "int32"), out)
      local function at(px, py)
        px, py = math.min(math.max(px, 0), w - 1), math.min(math.max(py, 0), h - 1)
        return x[py * w + px + 1]
      end
      local ref = {}
      for py = 0, h - 1 do
        for px = 0, w - 1 do
          ref[py * w + px + 1] = 4 * at(px, py) - at(px, py - 1) - at(px, py + 1) - at(px - 1, py) - at(px + 1, py)
        end
      end
      expect_ints("laplace2d", out, ref)
    end)

    -- ------------------------------------------------ atomics (group atomics)

    it("histogram: shared-memory atomicAdd, then global atomicAdd (unsigned)", function()
      local n, r = 20000, rng(301)
      local data = fill(n, function()
        local u = r.int(0, 9)
        if u < 5 then return 7 elseif u < 7 then return r.int(250, 255) else return r.int(0, 255) end
      end)
      local base = 1000
      local hist = cd.full(256, base, "uint32", { device = dev })
      kernel(dev, "atomics", "histogram_shared")({ grid = 16, block = 128 }, n, upload(dev, data, "uint8"), hist)
      local ref = fill(256, function() return base end)
      for i = 1, n do ref[data[i] + 1] = ref[data[i] + 1] + 1 end
      expect_ints("histogram_shared", hist, ref)
    end)

    it("histogram: global atomicAdd on int counts and signed weights", function()
      local n, nbins, r = 12345, 37, rng(302)
      local keys = fill(n, function() return r.int(0, 3) == 0 and 5 or r.int(0, nbins - 1) end)
      local weights = fill(n, function() return r.int(-100, 100) end)
      local hist = cd.full(nbins, -500, "int32", { device = dev })
      local wsum = cd.full(nbins, 77, "int32", { device = dev })
      kernel(dev, "atomics", "histogram_global")({ dim = n }, n, upload(dev, keys, "int32"),
        upload(dev, weights, "int32"), hist, wsum)
      local rh, rw = fill(nbins, function() return -500 end), fill(nbins, function() return 77 end)
      for i = 1, n do
        rh[keys[i] + 1] = rh[keys[i] + 1] + 1
        rw[keys[i] + 1] = rw[keys[i] + 1] + weights[i]
      end
      expect_ints("histogram_global counts", hist, rh)
      expect_ints("histogram_global weights", wsum, rw)
    end)

    it("atomicMax and atomicMin on int, unsigned and long long", function()
      local n, r = 6000, rng(303)
      local x = fill(n, function() return r.u32() - (1 << 31) end)
      local mx = cd.full(8, -(1 << 31), "int32", { device = dev })
      local mn = cd.full(8, (1 << 31) - 1, "int32", { device = dev })
      local umx = cd.full(1, 0, "uint32", { device = dev })
      local umn = cd.full(1, 0xffffffff, "uint32", { device = dev })
      local lmx = cd.full(1, math.mininteger, "int64", { device = dev })
      kernel(dev, "atomics", "minmax")({ dim = n }, n, upload(dev, x, "int32"), mx, mn, umx, umn, lmx)
      local rmx, rmn = fill(8, function() return -(1 << 31) end), fill(8, function() return (1 << 31) - 1 end)
      local rumx, rumn, rlmx = 0, 0xffffffff, math.mininteger
      for i = 1, n do
        local v, s = x[i], (i - 1) % 8 + 1
        rmx[s], rmn[s] = math.max(rmx[s], v), math.min(rmn[s], v)
        rumx, rumn = math.max(rumx, v & 0xffffffff), math.min(rumn, v & 0xffffffff)
        rlmx = math.max(rlmx, v * i)
      end
      expect_ints("atomicMax int", mx, rmx)
      expect_ints("atomicMin int", mn, rmn)
      expect_ints("atomicMax unsigned", umx, { rumx })
      expect_ints("atomicMin unsigned", umn, { rumn })
      expect_ints("atomicMax long long", lmx, { rlmx })
    end)

    it("atomicCAS loops: multiply modulo a prime, float max, double add", function()
      local n, p, r = 4000, 1000003, rng(304)
      local u = fill(n, function() return r.int(1, 0x7fffffff) end)
      local f = fill(n, function() return r.int(-(1 << 23), 1 << 23) / 8192 end)
      local d = fill(n, function() return r.int(-1000, 1000) + 0.0 end)
      local prod = cd.full(4, 1, "uint32", { device = dev })
      local fmx = cd.full(1, -math.huge, "float32", { device = dev })
      local dsum = cd.full(1, 0.5, "float64", { device = dev })
      kernel(dev, "atomics", "cas_ops")({ dim = n }, n, upload(dev, u, "uint32"), upload(dev, f, "float32"),
        upload(dev, d, "float64"), p, prod, fmx, dsum)
      local rp, rf, rd = { 1, 1, 1, 1 }, -math.huge, 0.5
      for i = 1, n do
        local s = (i - 1) % 4 + 1
        rp[s] = rp[s] * u[i] % p
        rf = math.max(rf, f[i])
        rd = rd + d[i]
      end
      expect_ints("atomicCAS multiply mod p", prod, rp)
      expect_close("atomicCAS float max", fmx, { rf }, 0)
      expect_close("atomicCAS double add", dsum, { rd }, 0)
    end)

    it("atomicAdd on float and double with integer-valued data (exact sums)", function()
      local n, nbins, r = 20000, 50, rng(305)
      local vals = fill(n, function() return r.int(0, 100) + 0.0 end)
      local bins = fill(n, function() return r.int(0, nbins - 1) end)
      local sums = cd.full(nbins, 0.25, "float32", { device = dev })
      local total = cd.full(1, 0.125, "float64", { device = dev })
      kernel(dev, "atomics", "float_bins")({ dim = n }, n, upload(dev, vals, "float32"), upload(dev, bins, "int32"),
        sums, total)
      local rs, rt = fill(nbins, function() return 0.25 end), 0.125
      for i = 1, n do
        rs[bins[i] + 1] = rs[bins[i] + 1] + vals[i]
        rt = rt + vals[i]
      end
      expect_close("atomicAdd float", sums, rs)
      expect_close("atomicAdd double", total, { rt }, REL64)
    end)

    it("unsigned long long counter and sum with atomicAdd", function()
      local n, r = 8000, rng(306)
      local vals = fill(n, function() return r.bits64() >> 24 end)   -- below 2^40
      local threshold = 1 << 39
      local count = cd.full(1, 5, "uint64", { device = dev })
      local sum = cd.full(1, 1 << 50, "uint64", { device = dev })
      kernel(dev, "atomics", "count_big")({ dim = n }, n, upload(dev, vals, "uint64"), threshold, count, sum)
      local rc, rs = 5, 1 << 50
      for i = 1, n do
        if vals[i] >= threshold then rc, rs = rc + 1, rs + vals[i] end
      end
      expect_ints("atomicAdd unsigned long long count", count, { rc })
      expect_ints("atomicAdd unsigned long long sum", sum, { rs })
    end)

    it("atomicOr, atomicAnd, atomicXor, atomicSub, atomicInc, atomicDec, atomicExch", function()
      local n, limit, r = 5003, 999, rng(307)
      local x = fill(n, function() return r.u32() end)
      local init = { 0, 0xffffffff, 0x12345678, 1000000000, 0, 3 }
      local res = upload(dev, init, "uint32")
      local slots = fill(n, function() return r.u32() end)
      local olds = poisoned(dev, n, "uint32")
      kernel(dev, "atomics", "bit_atomics")({ dim = n }, n, upload(dev, x, "uint32"), limit, res,
        upload(dev, slots, "uint32"), olds)
      local ref = { table.unpack(init) }
      for i = 1, n do
        local v = x[i]
        ref[1] = ref[1] | (1 << (v % 32))
        ref[2] = ref[2] & ~(1 << (v % 29)) & 0xffffffff
        ref[3] = ref[3] ~ v
        ref[4] = (ref[4] - v % 1000) & 0xffffffff
      end
      ref[5] = (init[5] + n) % (limit + 1)
      ref[6] = (init[6] - n) % (limit + 1)
      expect_ints("bitwise atomics [or, and, xor, sub, inc, dec]", res, ref)
      expect_ints("atomicExch old values", olds, slots)
    end)

    -- ------------------------------------------------ warps and votes (group warp)

    it("warp-shuffle reduction with __shfl_down_sync, then across warps", function()
      local bs, nb, r = 256, 10, rng(401)
      local n = bs * (nb - 1) + 77
      local x = fill(n, function() return r.int(-100000, 100000) end)
      local nw = nb * bs // 32
      local ws, bsums = poisoned(dev, nw, "int32"), poisoned(dev, nb, "int32")
      kernel(dev, "warp", "shfl_down_reduce")({ grid = nb, block = bs }, n, upload(dev, x, "int32"), ws, bsums)
      local function sum(lo, hi)
        local s = 0
        for i = lo, math.min(hi, n) do s = s + x[i] end
        return s
      end
      expect_ints("per-warp sums", ws, fill(nw, function(w) return sum((w - 1) * 32 + 1, w * 32) end))
      expect_ints("per-block sums", bsums, fill(nb, function(b) return sum((b - 1) * bs + 1, b * bs) end))
    end)

    it("__shfl_xor_sync butterfly: every lane gets the warp's sum and max; warpSize is 32", function()
      local n, r = 1024, rng(402)
      local x = fill(n, function() return r.int(-1000000, 1000000) end)
      local fx = fill(n, function() return r.int(-4000, 4000) / 4 end)
      local sums, maxs = poisoned(dev, n, "int32"), poisoned(dev, n, "int32")
      local fsums, wsz = poisoned(dev, n, "float32"), poisoned(dev, 1, "int32")
      kernel(dev, "warp", "shfl_xor_allreduce")({ grid = n // 128, block = 128 }, upload(dev, x, "int32"),
        upload(dev, fx, "float32"), sums, maxs, fsums, wsz)
      local rs, rm, rf = {}, {}, {}
      for w = 0, n // 32 - 1 do
        local s, m, f = 0, math.mininteger, 0.0
        for l = 1, 32 do
          local i = w * 32 + l
          s, m, f = s + x[i], math.max(m, x[i]), f + fx[i]
        end
        for l = 1, 32 do rs[w * 32 + l], rm[w * 32 + l], rf[w * 32 + l] = s, m, f end
      end
      expect_ints("warpSize", wsz, { 32 })
      expect_ints("butterfly sums", sums, rs)
      expect_ints("butterfly max", maxs, rm)
      expect_close("butterfly float sums", fsums, rf)
    end)

    it("__ballot_sync with __popc, __ffs and __clz: warp compaction", function()
      local n, r = 1000, rng(403)
      local x = fill(n, function(i)
        if i <= 32 then return 3 * r.int(-1000, 1000) end           -- warp 0: every lane selected
        if i <= 64 then return 3 * r.int(-1000, 1000) + 1 end       -- warp 1: none
        if i <= 96 then return i == 90 and 300 or 301 end           -- warp 2: lane 25 only
        return r.int(-1000000, 1000000)
      end)
      local nthreads = ceil_div(n, 128) * 128
      local nw = nthreads // 32
      local masks, ranks = poisoned(dev, nw, "uint32"), poisoned(dev, nthreads, "int32")
      local counts, firsts, lzs = poisoned(dev, nw, "int32"), poisoned(dev, nw, "int32"), poisoned(dev, nw, "int32")
      kernel(dev, "warp", "ballot_compact")({ grid = nthreads // 128, block = 128 }, n, upload(dev, x, "int32"),
        masks, ranks, counts, firsts, lzs)
      local rmask, rrank, rcount, rfirst, rlz = {}, {}, {}, {}, {}
      for w = 0, nw - 1 do
        local m, c = 0, 0
        for l = 0, 31 do
          local i = w * 32 + l + 1
          if i <= n and x[i] % 3 == 0 then
            rrank[i] = c
            m, c = m | (1 << l), c + 1
          else
            rrank[i] = -1
          end
        end
        local first, lz = 0, 32
        for l = 0, 31 do if first == 0 and m & (1 << l) ~= 0 then first = l + 1 end end
        for l = 31, 0, -1 do if m & (1 << l) ~= 0 then lz = 31 - l break end end
        rmask[w + 1], rcount[w + 1], rfirst[w + 1], rlz[w + 1] = m, c, first, lz
      end
      expect_ints("ballot masks", masks, rmask)
      expect_ints("ranks by __popc", ranks, rrank)
      expect_ints("__popc counts", counts, rcount)
      expect_ints("__ffs", firsts, rfirst)
      expect_ints("__clz", lzs, rlz)
    end)

    it("__shfl_up_sync inclusive warp scan; __shfl_sync gather and width-8 broadcast", function()
      local n, r = 512, rng(404)
      local x = fill(n, function() return r.int(-100000, 100000) end)
      local incl, gathered, seg = poisoned(dev, n, "int32"), poisoned(dev, n, "int32"), poisoned(dev, n, "int32")
      kernel(dev, "warp", "warp_scan")({ grid = n // 128, block = 128 }, upload(dev, x, "int32"), incl, gathered, seg)
      local ri, rg, rseg = {}, {}, {}
      for i = 1, n do
        local lane, base = (i - 1) % 32, (i - 1) - (i - 1) % 32
        ri[i] = (lane == 0 and 0 or ri[i - 1]) + x[i]
        rg[i] = x[base + (lane * 7 + 3) % 32 + 1]
        rseg[i] = x[(i - 1) - (i - 1) % 8 + 1]
      end
      expect_ints("warp inclusive scan", incl, ri)
      expect_ints("__shfl_sync gather", gathered, rg)
      expect_ints("__shfl_sync width 8", seg, rseg)
    end)

    it("a shuffle of the odd lanes in an if, then one of every lane: each completes with its own lanes", function()
      local n, r = 256, rng(406)
      local x = fill(n, function() return r.int(-100000, 100000) end)
      local odd, diff = poisoned(dev, n, "int32"), poisoned(dev, n, "int32")
      kernel(dev, "warp", "warp_groups")({ grid = n // 128, block = 128 }, upload(dev, x, "int32"), odd, diff)
      local ro, rd = {}, {}
      for i = 1, n do
        local lane = (i - 1) % 32
        ro[i] = lane % 2 == 0 and -1 or lane + 2 < 32 and x[i + 2] or x[i]
        rd[i] = lane == 0 and 0 or x[i] - x[i - 1]
      end
      expect_ints("odd lanes' shuffle", odd, ro)
      expect_ints("every lane's shuffle", diff, rd)
    end)

    it("__any_sync and __all_sync", function()
      local n, r = 512, rng(405)
      local x = fill(n, function(i)
        local w = (i - 1) // 32
        if w == 0 then return r.int(1, 50) end                        -- any > 100: no,  all > 0: yes
        if w == 1 then return i == 40 and 200 or r.int(1, 50) end     -- yes, yes
        if w == 2 then return i == 70 and -5 or r.int(1, 50) end      -- no,  no
        if w == 3 then return 500 end                                 -- yes, yes
        if w == 4 then return -r.int(1, 1000) end                     -- no,  no
        return r.int(-20, 1000)
      end)
      local nw = n // 32
      local anys, alls = poisoned(dev, nw, "int32"), poisoned(dev, nw, "int32")
      kernel(dev, "warp", "vote")({ grid = n // 128, block = 128 }, upload(dev, x, "int32"), anys, alls)
      local ra, rl = {}, {}
      for w = 0, nw - 1 do
        local a, l = 0, 1
        for i = w * 32 + 1, w * 32 + 32 do
          if x[i] > 100 then a = 1 end
          if not (x[i] > 0) then l = 0 end
        end
        ra[w + 1], rl[w + 1] = a, l
      end
      expect_ints("__any_sync", anys, ra)
      expect_ints("__all_sync", alls, rl)
    end)

    it("__syncthreads_count, __syncthreads_and, __syncthreads_or", function()
      local bs, nb, r = 128, 10, rng(406)
      local n = bs * (nb - 1) + 50
      local x = fill(n, function(i)
        local b = (i - 1) // bs
        if b == 0 then return r.int(1, 100) end                          -- all true
        if b == 1 then return -r.int(0, 100) end                         -- all false
        if b == 2 then return i == 300 and 9 or 0 end                    -- one true
        if b == 3 then return i == 450 and 0 or r.int(1, 100) end        -- one false
        return r.int(-100, 100)
      end)
      local counts, ands, ors = poisoned(dev, nb, "int32"), poisoned(dev, nb, "int32"), poisoned(dev, nb, "int32")
      kernel(dev, "warp", "block_votes")({ grid = nb, block = bs }, n, upload(dev, x, "int32"), counts, ands, ors)
      local rc, ra, ro = {}, {}, {}
      for b = 0, nb - 1 do
        local c = 0
        for i = b * bs + 1, b * bs + bs do if i <= n and x[i] > 0 then c = c + 1 end end
        rc[b + 1], ra[b + 1], ro[b + 1] = c, c == bs and 1 or 0, c > 0 and 1 or 0
      end
      expect_ints("__syncthreads_count", counts, rc)
      expect_ints("__syncthreads_and", ands, ra)
      expect_ints("__syncthreads_or", ors, ro)
    end)

    -- ------------------------------------------------ templates (group templates)

    it("template scale<float> through name_expressions", function()
      local n, r, factor = 3000, rng(501), 0.375
      local x = fill(n, function() return r.int(-100000, 100000) / 64 end)
      local out = poisoned(dev, n, "float32")
      kernel(dev, "templates", "scale<float>")({ dim = n }, n, factor, upload(dev, x, "float32"), out)
      expect_close("scale<float>", out, fill(n, function(i) return factor * x[i] end))
    end)

    it("template scale<int> through name_expressions", function()
      local n, r = 3000, rng(502)
      local x = fill(n, function() return r.int(-100000000, 100000000) end)
      local out = poisoned(dev, n, "int32")
      kernel(dev, "templates", "scale<int>")({ dim = n }, n, -3, upload(dev, x, "int32"), out)
      expect_ints("scale<int>", out, fill(n, function(i) return -3 * x[i] end))
    end)

    it("template with a non-type parameter, unroll<4>", function()
      local n, r = 1001, rng(503)
      local x = fill(n, function() return r.int(-4096, 4096) / 16 end)
      local out = poisoned(dev, n, "float32")
      kernel(dev, "templates", "unroll<4>")({ dim = ceil_div(n, 4) }, n, upload(dev, x, "float32"), out)
      expect_close("unroll<4>", out, fill(n, function(i) return x[i] * ((i - 1) % 4 + 1) + 4 end))
    end)

    it("templates with a type and a size: block_reduce<int, 128>, block_reduce<double, 64>", function()
      local r = rng(504)
      local ni = 1000
      local xi = fill(ni, function() return r.int(-1000, 1000) end)
      local nbi = ceil_div(ni, 128)
      local outi = poisoned(dev, nbi, "int32")
      kernel(dev, "templates", "block_reduce<int, 128>")({ grid = nbi, block = 128 }, ni, upload(dev, xi, "int32"), outi)
      expect_ints("block_reduce<int, 128>", outi, fill(nbi, function(b)
        local s = 0
        for i = (b - 1) * 128 + 1, math.min(b * 128, ni) do s = s + xi[i] * xi[i] end
        return s
      end))
      local nd = 700
      local xd = fill(nd, function() return r.unit() * 4 - 2 end)
      local nbd = ceil_div(nd, 64)
      local outd = poisoned(dev, nbd, "float64")
      kernel(dev, "templates", "block_reduce<double, 64>")({ grid = nbd, block = 64 }, nd, upload(dev, xd, "float64"), outd)
      expect_close("block_reduce<double, 64>", outd, fill(nbd, function(b)
        local s = 0.0
        for i = (b - 1) * 64 + 1, math.min(b * 64, nd) do s = s + xd[i] * xd[i] end
        return s
      end), REL64)
    end)

    -- ------------------------------------------------ vector types and math (group vector_math)

    it("vector types: float4 and float3 loads, a float2 parameter, make_float2 stores", function()
      local n, r = 1500, rng(601)
      local v4 = fill(4 * n, function() return r.int(-2048, 2048) / 16 end)
      local v3 = fill(3 * n, function() return r.int(-1024, 1024) / 8 end)
      local off = { x = 0.5, y = -0.25 }
      local sums, pairs_, norms = poisoned(dev, n, "float32"), poisoned(dev, 2 * n, "float32"), poisoned(dev, n, "float32")
      kernel(dev, "vector_math", "vec_float")({ dim = n }, n, upload(dev, v4, "float32"), upload(dev, v3, "float32"),
        off, sums, pairs_, norms)
      local rs, rp, rn = {}, {}, {}
      for i = 0, n - 1 do
        local a, b, c, d = v4[4 * i + 1], v4[4 * i + 2], v4[4 * i + 3], v4[4 * i + 4]
        rs[i + 1] = a + b + c + d
        rp[2 * i + 1], rp[2 * i + 2] = a * b + off.x, c - d + off.y
        local p, q, s = v3[3 * i + 1], v3[3 * i + 2], v3[3 * i + 3]
        rn[i + 1] = p * p + q * q + s * s
      end
      expect_close("float4 sums", sums, rs)
      expect_close("make_float2", pairs_, rp)
      expect_close("float3 norms", norms, rn)
    end)

    it("vector types: int2 loads and make_int2, make_uchar4 stores", function()
      local n, r = 1500, rng(602)
      local v = fill(2 * n, function() return r.int(-(1 << 20), 1 << 20) end)
      local out, bytes = poisoned(dev, 2 * n, "int32"), poisoned(dev, 4 * n, "uint8")
      kernel(dev, "vector_math", "vec_int")({ dim = n }, n, upload(dev, v, "int32"), out, bytes)
      local ro, rb = {}, {}
      for i = 0, n - 1 do
        local a, b = v[2 * i + 1], v[2 * i + 2]
        ro[2 * i + 1], ro[2 * i + 2] = a + b, a - b
        rb[4 * i + 1], rb[4 * i + 2], rb[4 * i + 3], rb[4 * i + 4] = a & 255, b & 255, (a // 256) & 255, i & 255
      end
      expect_ints("make_int2", out, ro)
      expect_ints("make_uchar4", bytes, rb)
    end)

    it("sinf, cosf, expf, logf, rsqrtf within CUDA's documented ulp bounds", function()
      local n, r = 4000, rng(603)
      local x = fill(n, function() return r.int(-10 * (1 << 19), 10 * (1 << 19)) / (1 << 19) end)
      local p = fill(n, function() return r.int(1, 1000 * 4096) / 4096 end)
      local outs = {}
      for j = 1, 5 do outs[j] = poisoned(dev, n, "float32") end
      kernel(dev, "vector_math", "math_approx")({ dim = n }, n, upload(dev, x, "float32"), upload(dev, p, "float32"),
        table.unpack(outs))
      expect_ulps("sinf", outs[1], fill(n, function(i) return math.sin(x[i]) end), 2)
      expect_ulps("cosf", outs[2], fill(n, function(i) return math.cos(x[i]) end), 2)
      expect_ulps("expf", outs[3], fill(n, function(i) return math.exp(x[i]) end), 2)
      expect_ulps("logf", outs[4], fill(n, function(i) return math.log(p[i]) end), 1)
      expect_ulps("rsqrtf", outs[5], fill(n, function(i) return 1 / math.sqrt(p[i]) end), 2)
    end)

    it("sqrtf, fmaf and float division are correctly rounded", function()
      -- a, b in [1, 2) and c in +-[1, 8) with 24 significant bits: a*b + c is exact in float64
      -- (at most 51 bits), so the float64 reference rounded once to float32 is the correct result.
      local n, r = 4000, rng(604)
      local a = fill(n, function() return 1 + r.int(0, (1 << 23) - 1) / (1 << 23) end)
      local b = fill(n, function() return 1 + r.int(0, (1 << 23) - 1) / (1 << 23) end)
      local c = fill(n, function()
        return (r.int(0, 1) == 0 and -1 or 1) * (1 + r.int(0, (1 << 23) - 1) / (1 << 23)) * 2 ^ r.int(0, 2)
      end)
      local sq, fm, dv = poisoned(dev, n, "float32"), poisoned(dev, n, "float32"), poisoned(dev, n, "float32")
      kernel(dev, "vector_math", "math_exact")({ dim = n }, n, upload(dev, a, "float32"), upload(dev, b, "float32"),
        upload(dev, c, "float32"), sq, fm, dv)
      expect_ulps("sqrtf", sq, fill(n, function(i) return math.sqrt(a[i]) end), 0)
      expect_ulps("fmaf", fm, fill(n, function(i) return a[i] * b[i] + c[i] end), 0)
      expect_ulps("division", dv, fill(n, function(i) return a[i] / b[i] end), 0)
    end)

    -- ------------------------------------------------ __half (group half)

    it("__half conversions round trip, ties to even, overflow to infinity", function()
      local r = rng(701)
      local specials = { 0.0, 1.0, -2.5, 65504.0, 65519.0, 65520.0, -70000.0, 1e6,
        1 + 2 ^ -11, 1 + 3 * 2 ^ -11, -(1 + 2 ^ -11), 2048 + 1, 2048 + 3,
        2 ^ -14, 2 ^ -24, 2 ^ -25, 3 * 2 ^ -26, -(2 ^ -20 + 2 ^ -26), 0.1, -0.3333 }
      local x = {}
      for i, v in ipairs(specials) do x[i] = f32(v) end
      for i = #x + 1, 3000 do
        local mag = r.int(0, 2)
        x[i] = mag == 0 and r.int(-100000, 100000) / 1024 or mag == 1 and r.int(-(1 << 20), 1 << 20) / (1 << 34)
          or r.int(-60000, 60000) + r.int(0, 3) / 4
      end
      local n = #x
      local h, back, twice = poisoned(dev, n, "float16"), poisoned(dev, n, "float32"), poisoned(dev, n, "float16")
      kernel(dev, "half", "half_roundtrip")({ dim = n }, n, upload(dev, x, "float32"), h, back, twice)
      local rh = fill(n, function(i) return f16(x[i]) end)
      expect_close("__float2half", h, rh, 0)
      expect_close("__half2float", back, rh, 0)
      expect_close("__float2half(2 * __half2float)", twice, fill(n, function(i) return f16(2 * rh[i]) end), 0)
    end)

    it("__half parameter and __hmul", function()
      local n, r, s = 2000, rng(702), 0.75
      local x = fill(n, function() return r.int(-2047, 2047) / 64 end)   -- exact halves
      local out, prod = poisoned(dev, n, "float32"), poisoned(dev, n, "float16")
      kernel(dev, "half", "half_param")({ dim = n }, n, s, upload(dev, x, "float16"), out, prod)
      expect_close("__half2float(x) * __half2float(scale)", out, fill(n, function(i) return x[i] * s end), 0)
      expect_close("__hmul", prod, fill(n, function(i) return f16(x[i] * s) end), 0)
    end)

    -- ------------------------------------------------ printf (group printf, in a child process)

    it("printf from a kernel, read from a child process's standard output", function()
      local lua = os.getenv("LUA") or "lua5.4"
      local code = ('local cd = require "cudadev"; local K = require "spec.conformance_kernels"; '
        .. 'local m = cd.compile(K.printf.source, {device = "%s", name = "printf.cu"}); '
        .. 'm.say({grid = 2, block = 4}, 41, 1.5); cd.synchronize(); io.stdout:write("conf-printf end\\n")'):format(dev)
      local cmd = ("LUA_PATH='%s' LUA_PATH_5_4='%s' LUA_CPATH='%s' LUA_CPATH_5_4='%s' %s -e '%s' 2>&1"):format(
        package.path, package.path, package.cpath, package.cpath, lua, code)
      local pipe = assert(io.popen(cmd, "r"))
      local text = pipe:read("a")
      local ok, how, status = pipe:close()
      assert.is_true(ok == true, ("child %s with %s; its output:\n%s"):format(how, tostring(status), text))
      local got, saw_end = {}, false
      for line in text:gmatch("[^\n]+") do
        if line:find("^conf%-printf b=") then got[#got + 1] = line end
        if line == "conf-printf end" then saw_end = true end
      end
      table.sort(got)
      local want = {}
      for b = 0, 1 do
        for t = 0, 3 do
          want[#want + 1] = ("conf-printf b=%d t=%d v=%d f=%.3f x=%x s=ok c=%s ll=%d"):format(b, t, 41 + b * 4 + t,
            1.5 * t, 0xf0 + t, string.char(65 + t), 41 * 1000000007)
        end
      end
      table.sort(want)
      assert.is_true(saw_end, "the child did not finish; its output:\n" .. text)
      assert.are.same(want, got)
    end)
  end)
end)

-- the compiled kernels are dropped once the file ran: the suite checks that no object outlives its file
teardown(function()
  for key in pairs(compiled) do compiled[key] = nil end
end)
