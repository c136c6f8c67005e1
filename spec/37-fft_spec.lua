-- cd.fft, issue 32 (doc/fft.md, lua/cudadev/fft.lua, src/fft.c): every function against NumPy's numpy.fft run by
-- python3 on the same inputs (saved as .npy), on the cpu device (`it`: KISS FFT for complex64, cudadev's own double
-- transform for complex128) and on cuda:0 (`gpu_it`: cuFFT, pending without a GPU); lengths that are powers of two,
-- primes and others, padding and truncation, every axis, the three norms, every input dtype kind; the result
-- dtypes (NumPy 2's: float32 gives complex64); the refusals; a missing KISS FFT named with what was tried.
local helper = require "spec.helper"
local cd = require "cudadev"

local expect_error = helper.assert_error_matches
local sh = helper.shell_quote

-- The Python with NumPy, as spec/29 finds it.
local function find_python()
  for _, py in ipairs({ os.getenv("CUDADEV_PYTHON") or false, "/usr/bin/python3", "python3" }) do
    if py and os.execute(sh(py) .. " -c 'import numpy' >/dev/null 2>&1") then return py end
  end
end
local PY = find_python()

-- Python's literal of a Lua argument: nil is None, a list a tuple; axes (1-based) become 0-based.
local function py_value(v, axes)
  if v == nil then return "None" end
  if type(v) == "string" then return "'" .. v .. "'" end
  if type(v) == "table" then
    local t = {}
    for i, x in ipairs(v) do t[i] = py_value(x, axes) end
    return "(" .. table.concat(t, ", ") .. ",)"
  end
  if axes and v > 0 then return tostring(v - 1) end
  return tostring(v)
end

-- The cases: f, the input's shape and dtype, and the arguments after it (n or s, axis or axes, norm).
local CASES = {
  { "fft", { 16 }, "float64" }, { "fft", { 7 }, "float64" }, { "fft", { 12 }, "complex128" },
  { "fft", { 1 }, "complex128" }, { "fft", { 30 }, "float32" }, { "fft", { 13 }, "complex64" },
  { "fft", { 10 }, "int32" }, { "fft", { 10 }, "float64", 16 }, { "fft", { 10 }, "float64", 6 },
  { "fft", { 4, 6 }, "complex128", nil, 1 }, { "fft", { 3, 5, 4 }, "float64", 9, 2, "ortho" },
  { "fft", { 3, 5 }, "float32", nil, -2, "forward" }, { "fft", { 5, 9 }, "float64", 11, -1, "ortho" },
  { "ifft", { 16 }, "complex128" }, { "ifft", { 9 }, "complex64" }, { "ifft", { 6, 5 }, "complex128", 8, 1 },
  { "ifft", { 11 }, "complex128", nil, nil, "ortho" }, { "ifft", { 11 }, "complex128", nil, nil, "forward" },
  { "rfft", { 16 }, "float64" }, { "rfft", { 15 }, "float64" }, { "rfft", { 8 }, "float32" },
  { "rfft", { 4, 7 }, "float64", nil, 1 }, { "rfft", { 9 }, "int64", 12, nil, "ortho" },
  { "rfft", { 3, 10 }, "float64", 7, -1, "forward" },
  { "irfft", { 9 }, "complex128" }, { "irfft", { 9 }, "complex128", 17 }, { "irfft", { 5 }, "complex64" },
  { "irfft", { 6, 4 }, "complex128", 10, 1 }, { "irfft", { 7 }, "complex128", 8, nil, "ortho" },
  { "irfft", { 4, 5 }, "float64", nil, -1, "forward" },
  { "fft2", { 4, 6 }, "float64" }, { "fft2", { 3, 5, 4 }, "complex128", { 4, 8 } },
  { "fft2", { 5, 6 }, "complex64", nil, { 2, 1 }, "ortho" },
  { "ifft2", { 6, 7 }, "complex128" }, { "ifft2", { 2, 3, 4 }, "complex128", nil, { 1, 3 }, "forward" },
  { "fftn", { 3, 4, 5 }, "float64" }, { "fftn", { 3, 4, 5 }, "complex128", { 6, 2 } },
  { "fftn", { 4, 6 }, "float32", { 5 }, { 1 } }, { "ifftn", { 3, 4, 5 }, "complex128", nil, { 3, 1 }, "ortho" },
  { "ifftn", { 5, 7 }, "complex64" },
  -- complex64 lengths with a prime factor above 61: the double transform, rounded (KISS_MAX_FACTOR in src/fft.c)
  { "fft", { 67 }, "complex64" }, { "rfft", { 2, 127 }, "float32" }, { "irfft", { 70 }, "complex64", 138 },
}

-- The n-d transforms as passes of rank 2 and 3 (NOTE [fft passes]: one cuFFT plan each, cached by rank and
-- lengths): trailing axes, moved axes, more than 3 axes, several padded or cut at once, unit axes; and shapes whose
-- plans would share a key if the key lacked the rank or the earlier lengths ({64, 48} x 3 beside {48} x 3 and
-- {32, 48} x 3; {16, 32} x 16 beside {8, 16, 32} x 2).
local ND_CASES = {
  { "fft2", { 3, 64, 48 }, "complex64" }, { "fft", { 3, 48 }, "complex64" }, { "fft2", { 3, 32, 48 }, "complex64" },
  { "fft2", { 128, 256 }, "complex64" }, { "ifft2", { 128, 256 }, "complex128", nil, nil, "ortho" },
  { "fftn", { 2, 8, 16, 32 }, "complex64", nil, { 2, 3, 4 } }, { "fft2", { 2, 8, 16, 32 }, "complex64" },
  { "ifftn", { 2, 8, 16, 32 }, "complex128", nil, { -3, -2, -1 }, "forward" },
  { "fftn", { 2, 3, 4, 5 }, "complex128" }, { "fftn", { 2, 3, 4, 5 }, "float32", nil, { 4, 1, 3, 2 }, "ortho" },
  { "fftn", { 4, 6, 5 }, "float64", nil, { 1, 3 } }, { "ifftn", { 4, 6, 5 }, "complex64", { 3, 8 }, { 3, 1 } },
  { "fftn", { 3, 7, 6 }, "complex128", { 4, 9, 5 } }, { "fft2", { 2, 5, 6 }, "int32", { 8, 3 } },
  { "ifftn", { 6, 5, 4 }, "complex128", { 6, 7 }, { 1, 2 }, "ortho" },
  -- unit axes (left out of a cuFFT plan)
  { "fft2", { 4, 1, 6 }, "complex64" }, { "fftn", { 1, 5, 1 }, "complex128" },
  { "ifftn", { 3, 1, 1 }, "complex64", nil, { 2, 3 } },
}

-- NumPy 2's result dtypes (the NumPy run here may be 1.x, whose results are complex128/float64 throughout)
local COMPLEX_OF = { float32 = "complex64", complex64 = "complex64" }
local function want_dtype(f, d)
  local c = COMPLEX_OF[d] or "complex128"
  if f == "irfft" then return c == "complex64" and "float32" or "float64" end
  return c
end

local function values(a)
  local kind = (a.dtype == "complex64" or a.dtype == "complex128") and "complex128" or "float64"
  return helper.values(a:astype(kind))
end

-- the largest difference, relative to the largest expected magnitude (1 at least)
local function max_error(got, want)
  local worst, big = 0, 1
  assert.equal(#want, #got, "element counts differ")
  for i = 1, #want do
    local w, g = want[i], got[i]
    if type(w) == "table" then
      big = math.max(big, math.abs(w[1]), math.abs(w[2]))
      worst = math.max(worst, math.abs(w[1] - g[1]), math.abs(w[2] - g[2]))
    else
      big = math.max(big, math.abs(w))
      worst = math.max(worst, math.abs(w - g))
    end
  end
  return worst / big
end

-- an input of shape and dtype with seeded values (complex: real and imaginary parts differ)
local function input(shape, dtype, seed, dev)
  local n = 1
  for _, d in ipairs(shape) do n = n * d end
  local v = helper.lcg_values(2 * n, seed)
  local t = {}
  for i = 1, n do
    if dtype:match("^complex") then t[i] = { v[i] * 4, v[n + i] * 4 }
    elseif dtype:match("^int") then t[i] = math.floor(v[i] * 50)
    else t[i] = v[i] * 4 end
  end
  return cd.array(t, dtype, { device = dev }):reshape(shape)
end

-- Each case of list run by cudadev on dev and by NumPy: the same shape, dtype and values within the precision's
-- tolerance.
local function match_numpy(list, dev)
  if not PY then return pending("no python3 with NumPy") end
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p " .. sh(dir)))
  local script = { "import numpy as np" }
  for i, c in ipairs(list) do
    local x = input(c[2], c[3], i, dev)
    cd.save(("%s/in%d.npy"):format(dir, i), x:to("cpu"))
    local axes = c[1]:match("2$") or c[1]:match("n$")
    -- NumPy's axes=None is every axis, fft2's default (-2, -1): a 3-d fft2 passes that
    local ax = c[5] or (not axes and -1) or (c[1]:match("2$") and { -2, -1 }) or nil
    script[#script + 1] = ("np.save('%s/out%d.npy', np.ascontiguousarray(np.fft.%s(np.load('%s/in%d.npy'), %s, %s, %s)))"):format(dir, i,
      c[1], dir, i, py_value(c[4]), py_value(ax, true), py_value(c[6] or "backward"))
    assert(axes or c[5] == nil or math.type(c[5]) == "integer")
  end
  helper.write_file(dir .. "/run.py", table.concat(script, "\n") .. "\n")
  assert(os.execute(sh(PY) .. " " .. sh(dir .. "/run.py")))
  for i, c in ipairs(list) do
    local what = ("%s of %s{%s} (%s, %s, %s)"):format(c[1], c[3], table.concat(c[2], ","), tostring(c[4]),
      type(c[5]) == "table" and "{" .. table.concat(c[5], ",") .. "}" or tostring(c[5]), tostring(c[6]))
    local x = input(c[2], c[3], i, dev)
    local y = cd.fft[c[1]](x, c[4], c[5], c[6])
    local want = cd.load(("%s/out%d.npy"):format(dir, i))
    assert.equal(dev, y.device.alias, what)
    assert.same(want.shape, y.shape, what)
    assert.equal(want_dtype(c[1], c[3]), y.dtype, what)
    local tol = (y.dtype == "complex64" or y.dtype == "float32") and 2e-5 or 1e-12
    local err = max_error(values(y), values(want))
    assert(err <= tol, ("%s: relative error %g over %g"):format(what, err, tol))
  end
  os.execute("rm -rf " .. sh(dir))
end

local function cases(dev)
  local on = dev == "cpu" and it or helper.gpu_it
  describe("on " .. dev, function()
    on("every transform matches NumPy's (" .. #CASES .. " cases)", function() match_numpy(CASES, dev) end)

    on("the n-d transforms done as passes of rank 2 and 3 match NumPy's (" .. #ND_CASES .. " cases)", function()
      match_numpy(ND_CASES, dev)
    end)

    on("fftfreq, rfftfreq, fftshift and ifftshift give NumPy's values", function()
      local opts = { device = dev }
      assert.same({ 0, 0.2, 0.4, -0.4, -0.2 }, helper.values(cd.fft.fftfreq(5, 1, opts)))
      assert.same({ 0, 0.125, 0.25, 0.375, -0.5, -0.375, -0.25, -0.125 }, helper.values(cd.fft.fftfreq(8, 0.125 * 8)))
      assert.same({ 0, 1 / 3, 2 / 3, 1 }, helper.values(cd.fft.rfftfreq(6, 0.5, opts)))
      assert.equal("float64", cd.fft.fftfreq(3).dtype)
      local x = cd.array({ 0, 1, 2, 3, 4 }, "int32", opts)
      assert.same({ 3, 4, 0, 1, 2 }, helper.values(cd.fft.fftshift(x)))
      assert.same({ 2, 3, 4, 0, 1 }, helper.values(cd.fft.ifftshift(x)))
      assert.same({ 0, 1, 2, 3, 4 }, helper.values(cd.fft.ifftshift(cd.fft.fftshift(x))))
      local m = cd.array({ { 1, 2, 3 }, { 4, 5, 6 } }, "float64", opts)
      assert.same({ { 6, 4, 5 }, { 3, 1, 2 } }, cd.fft.fftshift(m):totable())
      assert.same({ { 3, 1, 2 }, { 6, 4, 5 } }, cd.fft.fftshift(m, 2):totable())
      assert.same({ { 4, 5, 6 }, { 1, 2, 3 } }, cd.fft.ifftshift(m, { 1 }):totable())
    end)

    on("a round trip keeps the values, and the input is not changed", function()
      local x = input({ 6, 10 }, "complex128", 99, dev)
      local before = values(x)
      assert(max_error(values(cd.fft.ifftn(cd.fft.fftn(x))), before) < 1e-13)
      assert.same(before, values(x))
      local r = input({ 33 }, "float64", 98, dev)
      local spec = cd.fft.rfft(r)
      local spec_before = values(spec)
      assert(max_error(values(cd.fft.irfft(spec, 33)), values(r)) < 1e-13)
      assert.same(spec_before, values(spec))   -- cuFFT's c2r writes over its input: irfft gives it a copy
    end)

    on("a complex64 length with a large prime factor takes O(n log n), not KISS FFT's O(n p)", function()
      local n = 100003   -- prime: KISS FFT's generic butterfly would take about 10^10 operations
      local x = cd.ones(n, "complex64", { device = dev })
      local t0 = cd.now()
      local y = cd.fft.fft(x)
      assert(cd.now() - t0 < 10, "fft of 100003 complex64 took " .. (cd.now() - t0) .. " s")
      local dc = y[1]
      -- float32 accumulates: cuFFT's Bluestein leaves about 2e-7 n in the imaginary part (0.0198 on an H200)
      assert(math.abs(dc[1] - n) < 1e-3 * n and math.abs(dc[2]) < 1e-6 * n, ("{%g, %g}"):format(dc[1], dc[2]))
      local f1 = y[2]
      assert(math.abs(f1[1]) < 1 and math.abs(f1[2]) < 1, ("{%g, %g}"):format(f1[1], f1[2]))
    end)

    on("refuses bad arguments by name", function()
      local x = cd.ones(4, "float32", { device = dev })
      expect_error(function() return cd.fft.fft(x, 0) end, "bad argument #2 to 'fft' (n must be a positive integer, got 0)")
      expect_error(function() return cd.fft.fft(x, 2.5) end, "bad argument #2 to 'fft' (n must be a positive integer, got number)")
      expect_error(function() return cd.fft.ifft(x, nil, 2) end, "bad argument #3 to 'ifft' (axis 2 out of range for a 1-d array)")
      expect_error(function() return cd.fft.fft(x, nil, nil, "both") end,
        "bad argument #4 to 'fft' (norm must be \"backward\", \"ortho\" or \"forward\", got \"both\")")
      expect_error(function() return cd.fft.rfft(x:astype("complex64")) end,
        "rfft: the input is complex64; rfft takes a real array (fft takes complex ones)")
      expect_error(function() return cd.fft.irfft(cd.ones(1, "complex64", { device = dev })) end,
        "irfft: 1 points along axis 1 make no transform (give n)")
      expect_error(function() return cd.fft.fft({ 1, 2 }) end, "bad argument #1 to 'fft' (Array expected, got table)")
      expect_error(function() return cd.fft.fft2(x) end, "fft2: a is 1-d; fft2 transforms its last two axes (give axes)")
      expect_error(function() return cd.fft.fftn(cd.ones({ 2, 2 }), { 2 }, { 1, 2 }) end,
        "bad argument #2 to 'fftn' (s has 1 lengths but there are 2 axes)")
      expect_error(function() return cd.fft.fftn(cd.ones({ 2, 2 }), nil, { 1, -2 }) end,
        "bad argument #3 to 'fftn' (axis 1 appears twice)")
      expect_error(function() return cd.fft.fftfreq(0) end, "bad argument #1 to 'fftfreq' (n must be a positive integer, got 0)")
    end)
  end)
end

describe("cd.fft", function()
  cases("cpu")
  cases("cuda:0")

  it("on the cpu device without KISS FFT, complex64 transforms name the package and what was tried", function()
    local out = helper.run_child([[
      print(select(2, pcall(cd.fft.fft, cd.ones(4, "float32", { device = "cpu" }))))
      print(cd.fft.fft(cd.ones(2, "float64", { device = "cpu" })))   -- complex128 needs no KISS FFT
    ]], "CUDADEV_LIBKISSFFT=/nonexistent/libkissfft-float.so.131")
    assert.truthy(out:find("fft: no KISS FFT for the cpu device's complex64 transforms: tried " ..
      "/nonexistent/libkissfft-float.so.131 (/nonexistent/libkissfft-float.so.131: cannot open shared object file: " ..
      "No such file or directory); install Debian's libkissfft-float131 (apt-get install libkissfft-float131), or set " ..
      "CUDADEV_LIBKISSFFT to the library's path", 1, true), out)
    assert.truthy(out:find("Array(complex128[2] on cpu: {2+0j, 0+0j})", 1, true), out)
  end)

  it("cd._selftest names the KISS FFT and cuFFT libraries, or every name tried", function()
    local kiss, why = cd._selftest.kissfft()
    assert(kiss and kiss:find("libkissfft%-float%.so"), why)
    local cufft, cwhy = cd._selftest.cufft()
    assert(cufft and cufft:find("libcufft%.so") or cwhy:find("^no cuFFT: tried libcufft%.so%.12 %("), cwhy)
  end)

  it("fft2, ifft2, fftn and ifftn run one __fft of rank k for k <= 3 axes, moving them last only when they are not", function()
    local mt = getmetatable(cd.ones(1))
    local fft, calls = mt.__fft, {}
    mt.__fft = function(kind, inverse, x, y, n)   -- every call's lengths, then the real transform
      calls[#calls + 1] = type(n) == "table" and table.concat(n, "x") or tostring(n)
      return fft(kind, inverse, x, y, n)
    end
    local x = cd.ones({ 2, 8, 16, 32 }, "complex64", { device = "cpu" })
    local function run(f, ...)
      calls = {}
      cd.fft[f](x, ...)
      return table.concat(calls, " ")
    end
    local ok, err = pcall(function()
      assert.equal("16x32", run("fft2"))
      assert.equal("16x32", run("ifft2", nil, { 4, 3 }))
      assert.equal("8x16x32", run("fftn", nil, { 2, 3, 4 }))
      assert.equal("8x16x32 2", run("fftn"))   -- four axes: the last three, then the first
      assert.equal("2x8x32", run("ifftn", nil, { 4, 1, 2 }))   -- moved last, in ascending order
      assert.equal("8x20", run("ifft2", { 8, 20 }, { 2, 3 }))   -- padded, then moved
      assert.equal("16", run("fft", nil, 3))
    end)
    mt.__fft = fft
    assert(ok, err)
  end)

  it("__fft takes 1 to 3 lengths for c2c, one for r2c and c2r, and arrays whose last axes they are", function()
    local fft = getmetatable(cd.ones(1)).__fft
    local cpu = { device = "cpu" }
    local x, y = cd.ones({ 3, 4, 5 }, "complex64", cpu), cd.empty({ 3, 4, 5 }, "complex64", cpu)
    fft("c2c", false, x, y, { 3, 4, 5 })
    assert.same({ 60, 0 }, y[1][1][1])
    assert.same({ 0, 0 }, y[2][1][1])
    fft("c2c", true, x, y, { 4, 5 })
    assert.same({ 20, 0 }, y[3][1][1])
    assert.same({ 0, 0 }, y[3][2][1])
    expect_error(function() fft("c2c", false, x, y, { 2, 3, 4, 5 }) end, "__fft: a c2c transform takes 1 to 3 lengths, got 4")
    expect_error(function() fft("c2c", false, x, y, {}) end, "__fft: a c2c transform takes 1 to 3 lengths, got 0")
    expect_error(function() fft("c2c", false, x, y, { 4.5, 5 }) end, "__fft: length 1 is not an integer")
    expect_error(function() fft("c2c", false, x, y, { 0, 5 }) end, "__fft: length 0 out of range")
    expect_error(function() fft("c2c", false, x, y, { 4, 6 }) end,
      "__fft: the arrays do not fit a 2-d c2c transform ending in 6")
    expect_error(function() fft("r2c", false, cd.ones({ 4, 4 }, "float32", cpu), cd.empty({ 4, 3 }, "complex64", cpu), { 4, 4 }) end,
      "__fft: a r2c transform takes one length, got 2")
  end)

  helper.gpu_it("on a GPU, more shapes than the plan cache holds (16) still transform right, on the current stream", function()
    local s = cd.stream()
    cd.with_stream(s, function()
      for n = 1, 40 do
        local x = input({ 3, n }, "complex128", n, "cuda:0")
        local y = cd.fft.fft(x)
        local back = cd.fft.ifft(y)
        assert(max_error(values(back), values(x)) < 1e-12, "length " .. n)
      end
    end)
    s:synchronize()
  end)
end)
