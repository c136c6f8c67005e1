-- Random numbers (cd.random: Philox4x32-10, the same numbers on every device) and arrays to and from files
-- (a:tobytes, a:tofile, cd.fromfile, cd.save and cd.load in NumPy's .npy format).
local helper = require "spec.helper"
local cd = require "cudadev"

local function tmp()
  local p = os.tmpname()
  return p
end

local write = helper.write_file

local read = helper.read_file

-- The .npy bytes NumPy writes for a header dict and data: version 1.0, padded with spaces to 64 bytes.
local function npy(dict, data)
  local total = 10 + #dict + 1
  local header = dict .. string.rep(" ", (64 - total % 64) % 64) .. "\n"
  return "\x93NUMPY\1\0" .. string.pack("<I2", #header) .. header .. data
end

helper.each_device(function(dev)
  local D = { device = dev }
  describe("cd.random on " .. dev, function()
    it("gives the same numbers for the same seed, and new ones after", function()
      cd.random.seed(1234)
      local a = cd.random.uniform(1000, D)
      local b = cd.random.uniform(1000, D)
      cd.random.seed(1234)
      local c = cd.random.uniform(1000, D)
      assert.is_true(a:eq(c):all())
      assert.is_false(a:eq(b):all())
      local seed, offset = cd.random.get_state()
      assert.are.same({ 1234, 1000 }, { seed, offset })
      cd.random.set_state(1234, 0)
      assert.is_true(cd.random.uniform(1000, D):eq(a):all())
    end)

    it("draws uniform floats in [lo, hi) with the right moments", function()
      cd.random.seed(7)
      local u = cd.random.uniform(200000, D)
      assert.are.equal("float32", u.dtype)
      assert.is_true(u:min() >= 0 and u:max() < 1)
      assert(math.abs(u:mean() - 0.5) < 0.005)
      local v = cd.random.uniform({ 100, 1000 }, -2, 3, "float64", D)
      assert.are.same({ 100, 1000 }, v.shape)
      assert.is_true(v:min() >= -2 and v:max() < 3)
      assert(math.abs(v:mean() - 0.5) < 0.02)
      assert.are.equal("float16", cd.random.uniform(10, "float16", D).dtype)
    end)

    it("draws normals with the asked mean and deviation", function()
      cd.random.seed(8)
      local n = cd.random.normal(200000, 3, 2, "float64", D)
      local m = n:mean()
      assert(math.abs(m - 3) < 0.02, m)
      local var = ((n - m) ^ 2):mean()
      assert(math.abs(math.sqrt(var) - 2) < 0.02, var)
      assert.are.equal("float32", cd.random.normal(10, D).dtype)
    end)

    it("draws integers in [lo, hi), every value", function()
      cd.random.seed(9)
      local r = cd.random.randint(-3, 4, 10000, D)
      assert.are.equal("int64", r.dtype)
      assert.are.same({ -3, 3 }, { r:min(), r:max() })
      local seen = {}
      for _, v in ipairs(r:totable()) do seen[v] = true end
      for v = -3, 3 do assert.is_true(seen[v], v) end
      assert.are.equal("uint8", cd.random.randint(0, 256, 10, "uint8", D).dtype)
    end)

    it("randint takes the shape first as uniform and normal do, and NumPy's order (lo, hi, shape) still", function()
      cd.random.seed(21)
      local a = cd.random.randint(-3, 4, { 2, 50 }, "int16", D)
      cd.random.seed(21)
      local b = cd.random.randint({ 2, 50 }, -3, 4, "int16", D)
      assert.are.same({ 2, 50 }, b.shape)
      assert.are.equal("int16", b.dtype)
      assert.are.equal(a:tobytes(), b:tobytes())
      cd.random.seed(21)
      assert.are.equal(a:tobytes(), cd.random.randint({ 2, 50 }, -3, 4, "int16", { device = dev }):tobytes())
      assert.are.equal("int64", cd.random.randint({ 3 }, 0, 2, D).dtype)
      -- three integers: NumPy's order (a hundred dice, not one number in [7, 100))
      local dice = cd.random.randint(1, 7, 100, D)
      assert.are.same({ 100 }, dice.shape)
      assert.is_true(dice:max() <= 6)
      -- errors name the positions of the order given
      helper.assert_error_matches(function() cd.random.randint({ 4 }, 0.5, 5) end,
        "bad argument #2 to 'randint' (integer expected, got float)")
      helper.assert_error_matches(function() cd.random.randint({ 4 }, 5, 5) end,
        "bad argument #3 to 'randint' (high (5) must be greater than low (5))")
      helper.assert_error_matches(function() cd.random.randint({ 4 }, 0, 1000, "int8") end,
        "bad argument #3 to 'randint' (high 1000 is out of bounds for int8 (at most 128, one past its largest value))")
      helper.assert_error_matches(function() cd.random.randint({ 4 }, -1, 5, "uint8") end,
        "bad argument #2 to 'randint' (low -1 is out of bounds for uint8 (0..255))")
    end)

    it("checks its arguments", function()
      helper.assert_error_matches(function() cd.random.uniform(10, "int32", D) end, "uniform: int32 is not a float dtype")
      helper.assert_error_matches(function() cd.random.randint(5, 5, 10) end,
        "bad argument #2 to 'randint' (high (5) must be greater than low (5))")
      helper.assert_error_matches(function() cd.random.randint(0.5, 5, 10) end,
        "bad argument #1 to 'randint' (integer expected, got float)")
      helper.assert_error_matches(function() cd.random.seed("x") end, "bad argument #1 to 'seed' (integer expected, got string)")
      helper.assert_error_matches(function() cd.random.normal(10, 0, -1) end,
        "bad argument #3 to 'normal' (standard deviation must not be negative)")
    end)

    it("refuses bounds its dtype cannot hold, each dtype and both bounds", function()
      helper.assert_error_matches(function() cd.random.randint(0, 1000, 4, "int8", D) end,
        "bad argument #2 to 'randint' (high 1000 is out of bounds for int8 (at most 128, one past its largest value))")
      local R = { int8 = { -128, 127 }, int16 = { -32768, 32767 }, int32 = { -2147483648, 2147483647 },
                  uint8 = { 0, 255 }, uint16 = { 0, 65535 }, uint32 = { 0, 4294967295 } }
      for d, r in pairs(R) do
        helper.assert_error_matches(function() cd.random.randint(r[1] - 1, r[1] + 1, 4, d, D) end,
          ("bad argument #1 to 'randint' (low %d is out of bounds for %s (%d..%d))"):format(r[1] - 1, d, r[1], r[2]))
        helper.assert_error_matches(function() cd.random.randint(r[2], r[2] + 2, 4, d, D) end,
          ("bad argument #2 to 'randint' (high %d is out of bounds for %s (at most %d, one past its largest value))")
          :format(r[2] + 2, d, r[2] + 1))
        local lo = cd.random.randint(r[1], r[1] + 2, 200, d, D)
        local hi = cd.random.randint(r[2] - 1, r[2] + 1, 200, d, D)
        assert.are.same({ r[1], r[1] + 1, r[2] - 1, r[2] }, { lo:min(), lo:max(), hi:min(), hi:max() }, d)
      end
      helper.assert_error_matches(function() cd.random.randint(-1, 5, 4, "uint64", D) end,
        "bad argument #1 to 'randint' (low -1 is out of bounds for uint64 (0..9223372036854775807))")
      helper.assert_error_matches(function() cd.random.randint(3, -3, 4, "int8", D) end,
        "bad argument #2 to 'randint' (high (-3) must be greater than low (3))")
    end)

    it("draws across int64's and uint64's whole range and at their ends", function()
      local mn, mx = math.mininteger, math.maxinteger
      local cases = { { mn, mx, "int64" }, { mn, mn + 2, "int64" }, { mx - 2, mx, "int64" }, { 0, mx, "uint64" },
                      { mx - 2, mx, "uint64" }, { 0, 2, "uint64" } }
      for _, c in ipairs(cases) do
        local v = cd.random.randint(c[1], c[2], 4000, c[3], D):tobytes()
        local seen_low, seen_high = false, false
        for i = 1, #v, 8 do
          local x = string.unpack("<i8", v, i)
          assert(x >= c[1] and x < c[2], ("%d outside [%d, %d) in %s"):format(x, c[1], c[2], c[3]))
          seen_low, seen_high = seen_low or x < 0, seen_high or x > 0
        end
        if c[1] == mn and c[2] == mx then assert.is_true(seen_low and seen_high) end
      end
    end)
  end)

  describe("bytes and files on " .. dev, function()
    it("tobytes gives the elements' bytes", function()
      assert.are.equal(string.pack("<i2<i2<i2", 1, -2, 3), cd.array({ 1, -2, 3 }, "int16", D):tobytes())
      assert.are.equal(string.pack("<d<d", 0.5, 2), cd.array({ 0.5, 2 }, "float64", D):tobytes())
      assert.are.equal("", cd.empty(0, "float32", D):tobytes())
    end)

    it("saves and loads .npy files of every dtype as NumPy writes them", function()
      local path = tmp()
      local a = cd.array({ { 1, 2, 3 }, { 4, 5, 6 } }, "float32", D)
      cd.save(path, a)
      assert.are.equal(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", a:tobytes()), read(path))
      for _, d in ipairs({ "float16", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool" }) do
        local x = d == "bool" and cd.array({ true, false, true }, d, D) or cd.array({ 1, 2, 100 }, d, D)
        cd.save(path, x)
        local y = cd.load(path, D)
        assert.are.equal(d, y.dtype)
        assert.are.equal(dev, y.device.alias)
        assert.are.equal(x:tobytes(), y:tobytes())
      end
      cd.save(path, cd.full({}, 7, "float64", D))
      assert.are.equal(npy("{'descr': '<f8', 'fortran_order': False, 'shape': (), }", string.pack("<d", 7)), read(path))
      assert.are.equal(0, cd.load(path).ndim)
      os.remove(path)
    end)

    it("loads what NumPy wrote, version 2.0 too", function()
      local path = tmp()
      write(path, npy("{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }", string.pack("<i8<i8<i8", 5, -6, 7)))
      assert.are.same({ 5, -6, 7 }, cd.load(path, D):totable())
      local dict = "{'descr': '<u2', 'fortran_order': False, 'shape': (1, 2), }\n"
      write(path, "\x93NUMPY\2\0" .. string.pack("<I4", #dict) .. dict .. string.pack("<I2<I2", 1, 65535))
      assert.are.same({ { 1, 65535 } }, cd.load(path, D):totable())
      os.remove(path)
    end)

    it("refuses bad and truncated files by name", function()
      local path = tmp()
      local function fails(bytes, why)
        write(path, bytes)
        helper.assert_error_matches(function() cd.load(path) end,
          "load: " .. path .. " is not a .npy file cudadev can read: " .. why)
      end
      fails("hello", "it does not start with the .npy magic")
      fails("\x93NUMPY\9\0", "format version 9.0 is unknown")
      fails("\x93NUMPY\1\0\200\0{'descr'", "it ends inside its header")
      fails(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", string.rep("\0", 20)),
        "its shape {2, 3} needs 24 bytes of data, but 20 follow the header")
      fails(npy("{'descr': '>i4', 'fortran_order': False, 'shape': (1,), }", "\0\0\0\1"), "its data is big-endian ('>i4')")
      fails(npy("{'descr': '<c32', 'fortran_order': False, 'shape': (1,), }", string.rep("\0", 32)),
        "its dtype '<c32' has no cudadev dtype")   -- clongdouble (complex64 and complex128 load: spec/36)
      fails(npy("{'descr': '<f8', 'fortran_order': True, 'shape': (2, 2), }", string.rep("\0", 32)),
        "it is in Fortran (column-major) order; save it from NumPy in C order (np.ascontiguousarray)")
      fails(npy("{'descr': '<f8', 'shape': (2, 2), }", ""), "its header lacks 'descr', 'fortran_order' or 'shape'")
      -- sizes that overflow: 2^64 elements wrapped to 0 and reached reshape; 2^61 float64s are 2^64 bytes
      fails(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4), }", ""),
        "its shape {4611686018427387904, 4} has more than 2^63 - 1 elements")
      fails(npy("{'descr': '<f8', 'fortran_order': False, 'shape': (2305843009213693952,), }", ""),
        "its shape {2305843009213693952} needs more than 2^63 - 2 bytes of data")
      fails(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", string.rep("\0", 25)),
        "its shape {2, 3} needs 24 bytes of data, but more follow the header")
      os.remove(path)
      helper.assert_error_contains(function() cd.load(path) end, "load: cannot open " .. path)
      helper.assert_error_matches(function() cd.save(path, {}) end, "bad argument #2 to 'save' (Array expected, got table)")
      -- a file handle for a file name: its type by name, as Lua's own errors give it (was "got userdata": the
      -- API fuzzer's one finding)
      helper.assert_error_matches(function() cd.save(io.stdout, cd.ones(1)) end,
        "bad argument #1 to 'save' (file name expected, got FILE*)")
      helper.assert_error_matches(function() cd.ones(2):tofile(io.stdout) end,
        "bad argument #2 to 'tofile' (file name expected, got FILE*)")
    end)

    it("reads no more than the header promises: a FIFO written forever is refused at once", function()
      local path = tmp()
      os.remove(path)
      assert(os.execute("mkfifo " .. path))
      -- the writer: a header promising 16 bytes, then zeros until its reader goes (SIGPIPE) or 20 s pass; slowly,
      -- so that a load that reads to the end holds a few MiB, not the host's memory
      local header = npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", "")
      local hpath = tmp()
      write(hpath, header)
      -- (the FIFO is opened under timeout, so a writer whose reader never comes goes too)
      local p = io.popen(("exec timeout 20 sh -c 'exec > %s; cat %s; while head -c 65536 /dev/zero; do sleep 0.01; done' " ..
        "2>/dev/null & echo $!"):format(path, hpath))
      local pid = p:read("l")
      p:close()
      finally(function()
        os.execute("kill " .. pid .. " 2>/dev/null")
        os.remove(path)
        os.remove(hpath)
      end)
      local t0 = cd.now()
      helper.assert_error_matches(function() cd.load(path) end,
        "load: " .. path .. " is not a .npy file cudadev can read: its shape {4} needs 16 bytes of data, but more follow the header")
      local took = cd.now() - t0
      assert(took < 2, took)
    end)

    it("fromfile with a shape reads no more than the shape's bytes and one: a FIFO written forever is refused at once", function()
      local path = tmp()
      os.remove(path)
      assert(os.execute("mkfifo " .. path))
      -- the writer: zeros until its reader goes (SIGPIPE) or 20 s pass, slowly (as the cd.load case above)
      local p = io.popen(("exec timeout 20 sh -c 'exec > %s; while head -c 65536 /dev/zero; do sleep 0.01; done' " ..
        "2>/dev/null & echo $!"):format(path))
      local pid = p:read("l")
      p:close()
      finally(function()
        os.execute("kill " .. pid .. " 2>/dev/null")
        os.remove(path)
      end)
      local t0 = cd.now()
      helper.assert_error_matches(function() cd.fromfile(path, "float32", { 2, 2 }, D) end,
        "fromfile: " .. path .. " holds more than the 16 bytes of shape {2, 2}")
      local took = cd.now() - t0
      assert(took < 2, took)
      -- a shape that is no shape is refused before the file is opened
      helper.assert_error_matches(function() cd.fromfile(path, "float32", { 2, -1 }) end,
        "bad argument #3 to 'fromfile' (dimension 2 is not a non-negative integer)")
      helper.assert_error_matches(function() cd.fromfile(path, "float64", { 1 << 62, 4 }) end,
        "bad argument #3 to 'fromfile' (shape {4611686018427387904, 4} needs more than 2^63 - 2 bytes)")
    end)

    it("writes and reads raw bytes with tofile and fromfile", function()
      local path = tmp()
      local a = cd.arange(12, "int32", D)
      assert.are.equal(a, a:tofile(path))
      assert.are.equal(a:tobytes(), read(path))
      local b = cd.fromfile(path, "int32", { 3, 4 }, D)
      assert.are.same({ 3, 4 }, b.shape)
      assert.are.same({ 8, 9, 10, 11 }, b:totable()[3])
      assert.are.equal(6, cd.fromfile(path, "int64", D).size)
      helper.assert_error_matches(function() cd.fromfile(path, "int32", { 5 }) end,
        "fromfile: " .. path .. " holds 12 int32 elements, not the 5 of shape {5}")
      os.remove(path)
    end)
  end)
end)

describe("files without the io library", function()
  it("are a clear error, and the module loads without os and io", function()
    local out = helper.run_child([[
local save_io = io
io, os = nil, nil
package.loaded.cudadev = nil
local cd2 = require "cudadev"
local ok, err = pcall(cd2.save, "x.npy", cd2.zeros(2))
save_io.write(tostring(ok), " ", tostring(err):gsub("^.-:%d+: ", ""), "\n")
]])
    assert.are.equal("false save: files cannot be opened here (this Lua state has no io library)\nexit 0\n", out)
  end)
end)

describe("cd.random across devices", function()
  helper.gpu_it("gives the cpu device's numbers on cuda:0, bit for bit", function()
    for _, d in ipairs({ "float32", "float64" }) do
      cd.random.seed(77)
      local c = cd.random.uniform(100003, d, { device = "cpu" })
      cd.random.seed(77)
      local g = cd.random.uniform(100003, d, { device = "cuda:0" })
      assert.are.equal(c:tobytes(), g:tobytes())
    end
    cd.random.seed(5)
    local c = cd.random.randint(-1000, 1000, 5000, { device = "cpu" })
    cd.random.seed(5)
    assert.are.equal(c:tobytes(), cd.random.randint(-1000, 1000, 5000, { device = "cuda:0" }):tobytes())
    cd.random.seed(6)
    local cn = cd.random.normal(5000, "float32", { device = "cpu" })
    cd.random.seed(6)
    local gn = cd.random.normal(5000, "float32", { device = "cuda:0" })
    assert.is_true((cn - gn:to("cpu")):abs():max() <= 1e-6)
  end)
end)
