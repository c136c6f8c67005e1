-- NumPy's sorting, scans, joining and indexing (API.md "Computing with arrays": cd.sort, cd.argsort, cd.unique,
-- cd.searchsorted, cd.cumsum, cd.cumprod, cd.concatenate, cd.stack, cd.split, cd.take, cd.put, cd.nonzero,
-- one-argument cd.where, cd.count_nonzero, a:item(), a[idx], a[mask], a[-1]). Results are checked against Lua
-- references over generated inputs (every dtype, NaN and -0.0, empty, one element, views, axes) and hand-worked
-- tables. The same tests run on the cpu device and on cuda:0 when there is one.
local helper = require "spec.helper"
local cd = require "cudadev"

local ALL = { "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32",
              "float64", "bool" }

-- n values for dtype with many repeats (a stable sort shows), floats with NaN, -0.0, 0.0 and the infinities
local function values(dtype, n, seed)
  math.randomseed(seed or 7)
  local t = {}
  for i = 1, n do
    if dtype == "bool" then t[i] = math.random(2) == 1
    elseif dtype:match("^u") then t[i] = math.random(0, dtype == "uint8" and 255 or 3000)
    elseif dtype:match("^float") then
      local r = math.random(12)
      t[i] = r == 1 and 0 / 0 or r == 2 and -0.0 or r == 3 and 0.0 or r == 4 and math.huge or r == 5 and -math.huge
        or math.random(-500, 500) / 4
    else t[i] = math.random(dtype == "int8" and -128 or -3000, dtype == "int8" and 127 or 3000) end
  end
  return t
end

local function isnan(v) return v ~= v end
-- NumPy's order: NaN last, -0.0 equal to 0.0, false before true
local function less(x, y)
  if type(x) == "boolean" then return not x and y end
  if isnan(x) then return false end
  if isnan(y) then return true end
  return x < y
end

-- the stable argsort of the Lua list t (1-based positions)
local function ref_argsort(t)
  local idx = {}
  for i = 1, #t do idx[i] = i end
  table.sort(idx, function(a, b)
    if less(t[a], t[b]) then return true end
    if less(t[b], t[a]) then return false end
    return a < b
  end)
  return idx
end

local function same_value(x, y)
  if type(x) == "number" and isnan(x) then return type(y) == "number" and isnan(y) end
  return x == y
end

local function assert_values(expected, got, what)
  assert.are.equal(#expected, #got, what)
  for i = 1, #expected do
    if not same_value(expected[i], got[i]) then
      error(("%s: element %d is %s, expected %s"):format(what or "values", i, tostring(got[i]), tostring(expected[i])), 2)
    end
  end
end

-- the sign of a zero, which == does not see
local function negzero(v) return v == 0 and 1 / v < 0 end

helper.each_device(function(dev)
  local function arr(t, dt) return cd.array(t, dt or "int32", { device = dev }) end

  describe("sort and argsort on " .. dev, function()
    it("sort every dtype as Lua's stable reference does, NaN last, over several tiles", function()
      for _, dt in ipairs(ALL) do
        local t = values(dt, 5000)
        local a = arr(t, dt)
        t = a:totable()   -- as stored (float16 rounds)
        local idx = ref_argsort(t)
        local want = {}
        for i, p in ipairs(idx) do want[i] = t[p] end
        assert.are.same(idx, cd.argsort(a):totable(), dt)
        assert_values(want, cd.sort(a):totable(), dt)
        assert.are.equal(dt, cd.sort(a).dtype)
        assert.are.equal("int64", cd.argsort(a).dtype)
      end
    end)

    -- NOTE [sort tuning]: small tiles, so that these sizes take many tiles and the look-backs go over windows of
    -- 32 tiles, in both rankings, the radix look-back a tile or 3 at once (windows past tile 0), in 32- and 64-bit
    -- status words, the histogram in 1 and 32 (fewer where they do not fit) copies; the tuning in force comes back
    -- whatever happens
    it("sort, argsort and cumsum over many small tiles, in both rankings", function()
      local saved = cd._sort_tune()
      local ok, err = pcall(function()
        for _, tune in ipairs({ "block=256,items=1,pitems=1,rank=ballot,look=1,hpart=1,scan=1",
          "block=288,items=2,pitems=1,rank=match,look=3,hpart=32,status=64,scan=2" }) do
          cd._sort_tune(tune)
          for _, dt in ipairs(ALL) do
            local t = values(dt, 3000)
            local a = arr(t, dt)
            t = a:totable()
            local idx = ref_argsort(t)
            local want = {}
            for i, p in ipairs(idx) do want[i] = t[p] end
            assert.are.same(idx, cd.argsort(a):totable(), tune .. " " .. dt)
            assert_values(want, cd.sort(a):totable(), tune .. " " .. dt)
            local rows = cd.argsort(a:reshape({ 30, 100 })):totable()
            for r = 1, 30 do
              local row = {}
              for c = 1, 100 do row[c] = t[(r - 1) * 100 + c] end
              assert.are.same(ref_argsort(row), rows[r], tune .. " rows " .. dt)
            end
          end
          local n, t, sum = 20000, {}, {}
          for i = 1, n do t[i] = (i * 7919) % 13 - 6; sum[i] = (sum[i - 1] or 0) + t[i] end
          for _, dt in ipairs({ "int32", "float32", "float64" }) do
            assert.are.same(sum, cd.cumsum(arr(t, dt)):totable(), tune .. " cumsum " .. dt)
          end
          local picked = {}
          for i = 1, n do if t[i] ~= 0 then picked[#picked + 1] = i end end
          assert.are.same(picked, cd.nonzero(arr(t))[1]:totable(), tune .. " nonzero")
        end
      end)
      cd._sort_tune(saved)
      assert(ok, err)
      helper.assert_error_matches(function() cd._sort_tune("block=100") end,
        "bad argument #1 to '_sort_tune' (block must be a multiple of 32 in 256..1024)")
      helper.assert_error_matches(function() cd._sort_tune("look=17") end,
        "bad argument #1 to '_sort_tune' (look must be in 1..16)")
      helper.assert_error_matches(function() cd._sort_tune("block=1024,occ=3") end,
        "bad argument #1 to '_sort_tune' (occ must be at least 1, and occ * block at most 2048)")
      helper.assert_error_matches(function() cd._sort_tune("hpart=3") end,
        "bad argument #1 to '_sort_tune' (hpart must be 1, 2, 4, 8, 16 or 32)")
      helper.assert_error_matches(function() cd._sort_tune("status=48") end,
        "bad argument #1 to '_sort_tune' (status must be 32 or 64)")
      assert.are.equal(saved, cd._sort_tune())
    end)

    -- NOTE [sort tuning]'s hpart: most elements' top byte is one digit, as uniform floats' is (the copies' case)
    it("count the radix sort's digits with the histogram in 1, 8 and 32 copies", function()
      local n, t, want = 5000, {}, {}
      for i = 1, 1024 do want[i] = 0 end
      for i = 1, n do
        local v = (i * 2654435761) % 2^32 // 1
        if i % 5 ~= 0 then v = 0xBF000000 | (v & 0xFFFFFF) end
        t[i] = v
        for q = 0, 3 do
          local j = q * 256 + ((v >> (8 * q)) & 255) + 1
          want[j] = want[j] + 1
        end
      end
      local a = arr(t, "uint32")
      local saved = cd._sort_tune()
      local ok, err = pcall(function()
        for _, tune in ipairs({ "hpart=1", "hpart=8,hist=1", "hpart=32" }) do
          cd._sort_tune(tune)
          assert.are.same(want, cd._sort_hist(a):totable(), tune)
        end
      end)
      cd._sort_tune(saved)
      assert(ok, err)
      assert.are.equal(1, cd._sort_hist(arr({ 7 }, "uint8"))[8])
      helper.assert_error_matches(function() cd._sort_hist(arr({ { 1 } })) end,
        "bad argument #1 to '_sort_hist' (a contiguous 1-d array expected)")
    end)

    it("argsort keeps -0.0 and 0.0, and NaNs, in their order; sort puts NaNs last", function()
      local a = arr({ 0.0, 0 / 0, -0.0, 1, -1, 0 / 0, 0.0, -0.0 }, "float32")
      assert.are.same({ 5, 1, 3, 7, 8, 4, 2, 6 }, a:argsort():totable())
      local s = cd.sort(a):totable()
      assert.are.equal(-1, s[1])
      for i = 2, 5 do assert.are.equal(0, s[i]) end
      assert.are.equal(1, s[6])
      assert.is_true(isnan(s[7]) and isnan(s[8]))
      local d = cd.sort(arr({ math.huge, -math.huge, 0 / 0, 2 }, "float64")):totable()
      assert.are.same({ -math.huge, 2, math.huge }, { d[1], d[2], d[3] })
      assert.is_true(isnan(d[4]))
    end)

    it("sort empty, one-element and 0-d arrays", function()
      assert.are.same({}, cd.sort(arr({}, "float32")):totable())
      assert.are.same({ 0 }, { cd.argsort(cd.empty(0, "int8", { device = dev })).size })
      assert.are.same({ 4 }, cd.sort(arr({ 4 })):totable())
      assert.are.same({ 1 }, cd.argsort(arr({ 4 })):totable())
      local z = cd.full({}, 3, "float32", { device = dev })
      assert.are.same({}, cd.sort(z).shape)
      assert.are.equal(3, cd.sort(z):item())
      assert.are.same({ 0, 2 }, cd.sort(cd.empty({ 0, 2 }, "int32", { device = dev })).shape)
    end)

    it("sort along an axis (default the last), of views, in place with a:sort()", function()
      local m = arr({ { 3, 1, 2 }, { 9, 7, 8 }, { 5, 6, 4 } })
      assert.are.same({ { 1, 2, 3 }, { 7, 8, 9 }, { 4, 5, 6 } }, cd.sort(m):totable())
      assert.are.same({ { 3, 1, 2 }, { 5, 6, 4 }, { 9, 7, 8 } }, cd.sort(m, 1):totable())
      assert.are.same({ { 1, 1, 1 }, { 3, 3, 3 }, { 2, 2, 2 } }, cd.argsort(m, 1):totable())
      assert.are.same({ { 2, 3, 1 }, { 2, 3, 1 }, { 3, 1, 2 } }, cd.argsort(m, -1):totable())
      -- a transposed view and a stepped slice
      assert.are.same({ { 3, 5, 9 }, { 1, 6, 7 }, { 2, 4, 8 } }, cd.sort(m.T, 2):totable())
      assert.are.same({ 2, 3 }, cd.sort(arr({ 3, 0, 2, 0 }):slice(1, 4, 2)):totable())
      -- many rows of generated values against the reference, row by row
      local t, rows = values("float32", 600, 3), {}
      for r = 1, 20 do
        rows[r] = {}
        for c = 1, 30 do rows[r][c] = t[(r - 1) * 30 + c] end
      end
      local a = arr(rows, "float32")
      local s, p = cd.sort(a):totable(), cd.argsort(a):totable()
      for r = 1, 20 do
        local idx = ref_argsort(rows[r])
        assert.are.same(idx, p[r], "row " .. r)
        local want = {}
        for i, q in ipairs(idx) do want[i] = rows[r][q] end
        assert_values(want, s[r], "row " .. r)
      end
      local x = arr({ 5, 4, 3 })
      assert.are.equal(x, x:sort())
      assert.are.same({ 3, 4, 5 }, x:totable())
      local y = arr({ { 2, 1 }, { 0, 3 } })
      y:sort(1)
      assert.are.same({ { 0, 1 }, { 2, 3 } }, y:totable())
    end)

    it("sort a 3-d array along its middle axis", function()
      local t, v = {}, { 4, 2, 9, 1, 7, 3, 8, 6, 5, 0, 11, 10 }
      for i = 1, 2 do
        t[i] = {}
        for j = 1, 3 do t[i][j] = { v[(i - 1) * 6 + (j - 1) * 2 + 1], v[(i - 1) * 6 + (j - 1) * 2 + 2] } end
      end
      assert.are.same({ { { 4, 1 }, { 7, 2 }, { 9, 3 } }, { { 5, 0 }, { 8, 6 }, { 11, 10 } } }, cd.sort(arr(t), 2):totable())
    end)

    it("refuses bad arguments", function()
      helper.assert_error_matches(function() cd.sort({ 1, 2 }) end, "bad argument #1 to 'sort' (Array expected, got table)")
      helper.assert_error_matches(function() cd.sort(arr({ 1 }), 2) end,
        "bad argument #2 to 'sort' (axis 2 is out of range for an array of 1 dimensions (1..1, or -1..-1))")
      helper.assert_error_matches(function() cd.argsort(arr({ 1 }), "x") end,
        "bad argument #2 to 'argsort' (axis (integer) expected, got string)")
    end)
  end)

  describe("cumsum and cumprod on " .. dev, function()
    it("promote as sum does and scan every dtype across tiles", function()
      local want_dt = { int8 = "int64", int16 = "int64", int32 = "int64", int64 = "int64", uint8 = "uint64",
        uint16 = "uint64", uint32 = "uint64", uint64 = "uint64", bool = "int64", float16 = "float16",
        float32 = "float32", float64 = "float64" }
      for _, dt in ipairs(ALL) do
        local t = values(dt, 5000, 11)
        for i, v in ipairs(t) do if type(v) == "number" and (v ~= v or math.abs(v) == math.huge) then t[i] = 1 end end
        local a = arr(t, dt)
        local c = cd.cumsum(a)
        assert.are.equal(want_dt[dt], c.dtype, dt)
        local got, s = c:totable(), 0
        for i, v in ipairs(a:totable()) do
          s = s + (v == true and 1 or v == false and 0 or v)
          local ok = dt == "float16" and math.abs(got[i] - s) <= 2 + math.abs(s) * 0.01
            or dt:match("^float") and math.abs(got[i] - s) <= 1e-3 * (1 + math.abs(s)) or got[i] == s
          if not ok then error(("%s: element %d is %s, expected %s"):format(dt, i, tostring(got[i]), tostring(s))) end
        end
      end
    end)

    it("scan along an axis, flatten without one, take dtype, and multiply", function()
      local m = arr({ { 1, 2, 3 }, { 4, 5, 6 } })
      assert.are.same({ 1, 3, 6, 10, 15, 21 }, cd.cumsum(m):totable())
      assert.are.same({ { 1, 2, 3 }, { 5, 7, 9 } }, cd.cumsum(m, 1):totable())
      assert.are.same({ { 1, 3, 6 }, { 4, 9, 15 } }, m:cumsum(-1):totable())
      assert.are.same({ { 1, 2, 6 }, { 4, 20, 120 } }, cd.cumprod(m, 2):totable())
      assert.are.same({ 1, 2, 6, 24, 120, 720 }, m:cumprod():totable())
      assert.are.same({ { 1, 2, 3 }, { 5, 7, 9 } }, cd.cumsum(m.T, 2).T:totable())
      local f = cd.cumsum(m, { axis = 2, dtype = "float32" })
      assert.are.equal("float32", f.dtype)
      assert.are.same({ { 1, 3, 6 }, { 4, 9, 15 } }, f:totable())
      assert.are.same({}, cd.cumsum(arr({})):totable())
      assert.are.same({ 7 }, cd.cumsum(cd.full({}, 7, "int32", { device = dev })):totable())
      assert.are.same({ -128, 0 }, { cd.cumprod(arr({ 2, 2, 2, 2, 2, 2, 2, 2 }, "int8"), { dtype = "int8" })[7],
        cd.cumprod(arr({ 2, 2, 2, 2, 2, 2, 2, 2 }, "int8"), { dtype = "int8" })[8] })
      helper.assert_error_matches(function() cd.cumsum(m, { axs = 1 }) end, "bad option 'axs' to 'cumsum' (unknown option)")
      helper.assert_error_matches(function() cd.cumsum(m, { dtype = "float8" }) end,
        "bad option 'dtype' to 'cumsum' (unknown dtype float8)")
    end)

    it("scan a row of more than 2048 tiles (a long look-back chain)", function()
      local n = 2048 * 2048 + 3000
      local c = cd.cumsum(cd.ones(n, "int32", { device = dev }))
      assert.are.equal(n, c[-1])
      assert.are.equal(2048 * 2048 + 1, c[2048 * 2048 + 1])
      assert.are.equal(4097, c[4097])
    end)
  end)

  describe("concatenate, stack and split on " .. dev, function()
    it("join along axes with NumPy's promotion, views included", function()
      local a, b = arr({ { 1, 2 }, { 3, 4 } }), arr({ { 5, 6 } }, "float32")
      local c = cd.concatenate({ a, b })
      assert.are.equal("float64", c.dtype)
      assert.are.same({ { 1, 2 }, { 3, 4 }, { 5, 6 } }, c:totable())
      assert.are.same({ { 1, 2, 1, 3 }, { 3, 4, 2, 4 } }, cd.concatenate({ a, a.T }, 2):totable())
      assert.are.same({ 1, 2, 3 }, cd.concatenate({ arr({ 1 }), arr({}), arr({ 2, 3 }) }):totable())
      assert.are.same({ { 1, 2 }, { 1, 2 } }, cd.stack({ arr({ 1, 2 }), arr({ 1, 2 }) }):totable())
      assert.are.same({ { 1, 5 }, { 2, 6 } }, cd.stack({ arr({ 1, 2 }), arr({ 5, 6 }) }, -1):totable())
      assert.are.same({ { { 1, 2 }, { 1, 2 } }, { { 3, 4 }, { 3, 4 } } }, cd.stack({ a, a }, 2):totable())
      local big = cd.arange(5000, "int64", { device = dev })
      local j = cd.concatenate({ big, big:slice(1, 5000, 2) })
      assert.are.equal(7500, j.size)
      assert.are.same({ 4999, 0, 2 }, { j[5000], j[5001], j[5002] })
    end)

    it("split into sections or at cuts, as views", function()
      local a = cd.arange(10, "int32", { device = dev })
      local parts = cd.split(a, { 3, 5 })
      assert.are.equal(3, #parts)
      assert.are.same({ 0, 1, 2 }, parts[1]:totable())
      assert.are.same({ 3, 4 }, parts[2]:totable())
      assert.are.same({ 5, 6, 7, 8, 9 }, parts[3]:totable())
      parts[2][1] = 42
      assert.are.equal(42, a[4])
      local h = cd.split(arr({ { 1, 2, 3, 4 }, { 5, 6, 7, 8 } }), 2, 2)
      assert.are.same({ { 1, 2 }, { 5, 6 } }, h[1]:totable())
      assert.are.same({ { 3, 4 }, { 7, 8 } }, h[2]:totable())
      assert.are.same({ 0, 10 }, { cd.split(a, { 12 })[2].size, cd.split(a, { 12 })[1].size })
    end)

    it("refuse what does not join or split", function()
      helper.assert_error_matches(function() cd.concatenate({}) end, "bad argument #1 to 'concatenate' (need at least one array)")
      helper.assert_error_matches(function() cd.concatenate({ arr({ { 1, 2 } }), arr({ { 1, 2, 3 } }) }) end,
        "bad argument #1 to 'concatenate' (array 2 has shape {1, 3}, array 1 {1, 2}: all but axis 1 must match)")
      helper.assert_error_matches(function() cd.concatenate({ arr({ 1 }), 5 }) end,
        "bad argument #1 to 'concatenate' (element 2 is number, not an Array)")
      helper.assert_error_matches(function() cd.stack({ nil, arr({ 1 }) }) end,
        "bad argument #1 to 'stack' (element 1 is nil, not an Array)")
      helper.assert_error_matches(function() cd.stack({ arr({ 1 }), arr({ 1, 2 }) }) end,
        "bad argument #1 to 'stack' (array 2 has shape {2}, array 1 {1}: stacked arrays must have one shape)")
      helper.assert_error_matches(function() cd.split(cd.arange(10, "int32", { device = dev }), 3) end,
        "bad argument #2 to 'split' (10 elements do not split into 3 equal sections)")
    end)
  end)

  describe("take, put and indexing by Arrays on " .. dev, function()
    it("take positions of the flattened array or along an axis, negative from the end", function()
      local a = arr({ { 1, 2, 3 }, { 4, 5, 6 } })
      local i = arr({ 1, -1, 3 }, "int64")
      assert.are.same({ 1, 6, 3 }, cd.take(a, i):totable())
      assert.are.same({ { 1, 3, 3 }, { 4, 6, 6 } }, cd.take(a, i, 2):totable())
      assert.are.same({ { 4, 5, 6 }, { 1, 2, 3 } }, a:take(arr({ 2, 1 }, "uint8"), 1):totable())
      assert.are.same({ { 1, 4 }, { 2, 5 }, { 3, 6 } }, cd.take(a.T, arr({ 1, 2, 3 }), 1):totable())
      assert.are.same({}, cd.take(a, arr({}, "int64")):totable())
      helper.assert_error_matches(function() cd.take(a, arr({ 7 })) end,
        "bad argument #2 to 'take' (index 7 out of range 1..6 (or -6..-1 from the end))")
      helper.assert_error_matches(function() cd.take(a, arr({ 0 })) end,
        "bad argument #2 to 'take' (index 0 out of range 1..6 (or -6..-1 from the end))")
      helper.assert_error_matches(function() cd.take(a, arr({ 1 }, "float32")) end,
        "bad argument #2 to 'take' (positions must be integers, not float32)")
    end)

    it("put values at positions, cycling them", function()
      local a = cd.zeros(6, "float32", { device = dev })
      cd.put(a, arr({ 1, -1, 3 }), 7)
      assert.are.same({ 7, 0, 7, 0, 0, 7 }, a:totable())
      a:put(arr({ 2, 4, 5 }), arr({ 1, 2 }, "float64"))
      assert.are.same({ 7, 1, 7, 2, 1, 7 }, a:totable())
      local m = cd.zeros({ 2, 2 }, "int32", { device = dev })
      cd.put(m, arr({ 4 }), 9)
      assert.are.same({ { 0, 0 }, { 0, 9 } }, m:totable())
      helper.assert_error_matches(function() cd.put(a, arr({ 9 }), 1) end,
        "bad argument #2 to 'put' (index 9 out of range 1..6 (or -6..-1 from the end))")
      helper.assert_error_matches(function() cd.put(m.T, arr({ 1 }), 1) end,
        "put: the array is not contiguous (put writes into a view's own elements only when it is)")
    end)

    it("a[idx], a[mask], a[mask] = v, a[idx] = v and negative positions", function()
      local a = cd.arange(6, "int32", { device = dev })
      assert.are.equal(5, a[-1])
      assert.are.equal(0, a[-6])
      a[-2] = 40
      assert.are.equal(40, a[5])
      assert.are.same({ 5, 0 }, a[arr({ 6, 1 }, "int64")]:totable())
      assert.are.same({ 3, 40, 5 }, a[a:gt(2)]:totable())
      a[a:gt(2)] = -1
      assert.are.same({ 0, 1, 2, -1, -1, -1 }, a:totable())
      a[arr({ 1, 2 })] = arr({ 10, 20 })
      assert.are.same({ 10, 20, 2, -1, -1, -1 }, a:totable())
      local m = arr({ { 1, 2 }, { 3, 4 }, { 5, 6 } })
      assert.are.same({ 3, 4 }, m[-2]:totable())
      assert.are.same({ 2, 3, 4, 5, 6 }, m[m:gt(1)]:totable())
      assert.are.same({ { 1, 2 }, { 5, 6 } }, m[arr({ true, false, true }, "bool")]:totable())
      assert.are.same({ { 5, 6 }, { 1, 2 } }, m[arr({ 3, 1 })]:totable())
      m[arr({ false, true, false }, "bool")] = 0
      assert.are.same({ { 1, 2 }, { 0, 0 }, { 5, 6 } }, m:totable())
      assert.are.same({}, a[cd.zeros(6, "bool", { device = dev })]:totable())
    end)

    it("refuse indices the API does not take", function()
      local a = cd.arange(3, "int32", { device = dev })
      helper.assert_error_matches(function() return a[{ 1 }] end,
        "bad argument #2 to 'index' (a table is not an index (use a number, an integer or bool Array, or a:slice(i, j)))")
      helper.assert_error_matches(function() a[{ 1 }] = 2 end,
        "bad argument #2 to 'newindex' (a table is not an index (use a number, an integer or bool Array, or a:slice(i, j)))")
      helper.assert_error_matches(function() return a[-4] end, "bad argument #2 to 'index' (index -4 out of range 1..3)")
      helper.assert_error_matches(function() return a[arr({ 1 }, "float32")] end,
        "bad argument #2 to 'index' (an index Array must be of integers or bool, not float32)")
      helper.assert_error_matches(function() return a[arr({ true }, "bool")] end,
        "bad argument #2 to 'index' (a bool mask of shape {1} does not match the array's shape {3})")
      helper.assert_error_matches(function() return a[arr({ 4 })] end,
        "bad argument #2 to 'index' (index 4 out of range 1..3 (or -3..-1 from the end))")
      helper.assert_error_matches(function() a[arr({ 1 }, "float64")] = 1 end,
        "bad argument #2 to 'newindex' (an index Array must be of integers or bool, not float64)")
      helper.assert_error_matches(function() cd.zeros({ 2, 2 }, "int32", { device = dev }).T[arr({ 1 })] = 1 end,
        "bad argument #1 to 'newindex' (assigning through an index Array needs a contiguous array)")
      helper.assert_error_matches(function() a[arr({ -4 })] = 1 end,
        "bad argument #2 to 'newindex' (index -4 out of range 1..3 (or -3..-1 from the end))")
    end)
  end)

  describe("nonzero, where, count_nonzero, searchsorted, unique and item on " .. dev, function()
    it("nonzero and one-argument where give 1-based positions per dimension", function()
      assert.are.same({ 2, 4 }, cd.nonzero(arr({ 0, 1, 0, 2 }))[1]:totable())
      local nz = cd.where(arr({ { 0, 3 }, { 4, 0 } }))
      assert.are.same({ 1, 2 }, nz[1]:totable())
      assert.are.same({ 2, 1 }, nz[2]:totable())
      assert.are.equal("int64", nz[1].dtype)
      assert.are.same({ 1, 3 }, cd.nonzero(arr({ 0 / 0, 0.0, -1, -0.0 }, "float32"))[1]:totable())
      assert.are.same({}, cd.nonzero(arr({}))[1]:totable())
      local t, want = values("int8", 9000, 5), {}
      for i, v in ipairs(t) do if v > 0 then want[#want + 1] = i end end
      assert.are.same(want, cd.nonzero(arr(t, "int8"):gt(0))[1]:totable())
      assert.are.same({ 10, 20 }, cd.where(arr({ true, false }, "bool"), 10, 20):totable())
      helper.assert_error_matches(function() cd.nonzero(cd.full({}, 1, "int32", { device = dev })) end,
        "bad argument #1 to 'nonzero' (a 0-d array has no positions: use a:item() ~= 0 or a:reshape(1))")
    end)

    it("count_nonzero counts all or along an axis", function()
      local m = arr({ { 0, 1, 2 }, { 3, 0, 0 } })
      assert.are.equal(3, cd.count_nonzero(m))
      assert.are.same({ 1, 1, 1 }, cd.count_nonzero(m, 1):totable())
      assert.are.same({ 2, 1 }, cd.count_nonzero(m, 2):totable())
      assert.are.equal(2, cd.count_nonzero(arr({ 0 / 0, -0.0, 1 }, "float32")))
    end)

    it("searchsorted finds 1-based insertion positions, left and right, NaN last", function()
      local s = arr({ 1, 2, 2, 3 })
      assert.are.equal(2, cd.searchsorted(s, 2))
      assert.are.equal(4, cd.searchsorted(s, 2, "right"))
      assert.are.same({ 1, 4, 5, 1 }, cd.searchsorted(s, arr({ 0, 2.5, 9, -1 }, "float64")):totable())
      local f = arr({ -1, 0, 5, 0 / 0 }, "float32")
      assert.are.same({ 4, 5, 3 }, { cd.searchsorted(f, 0 / 0), cd.searchsorted(f, 0 / 0, "right"), cd.searchsorted(f, 1) })
      assert.are.same({ 4, 3 }, cd.searchsorted(f, arr({ 0 / 0, 1 }, "float32")):totable())
      assert.are.equal(1, cd.searchsorted(arr({}), 3))
      helper.assert_error_matches(function() cd.searchsorted(s, 1, "middle") end,
        "bad argument #3 to 'searchsorted' (side must be \"left\" or \"right\", got \"middle\")")
      helper.assert_error_matches(function() cd.searchsorted(arr({ { 1 } }), 1) end,
        "bad argument #1 to 'searchsorted' (a 1-d sorted array expected, got 2 dimensions)")
    end)

    it("unique sorts, collapses NaNs and gives index, inverse and counts", function()
      local a = arr({ 3, 1, 3, 0 / 0, 2, 0 / 0, 1 }, "float64")
      local u, i, inv, c = cd.unique(a, { return_index = true, return_inverse = true, return_counts = true })
      local ut = u:totable()
      assert.are.same({ 1, 2, 3 }, { ut[1], ut[2], ut[3] })
      assert.is_true(#ut == 4 and isnan(ut[4]))
      assert.are.same({ 2, 5, 1, 4 }, i:totable())
      assert.are.same({ 3, 1, 3, 4, 2, 4, 1 }, inv:totable())
      assert.are.same({ 2, 1, 2, 2 }, c:totable())
      local v, cnt = cd.unique(arr({ { 2, 2 }, { 1, 2 } }), { return_counts = true })
      assert.are.same({ 1, 2 }, v:totable())
      assert.are.same({ 1, 3 }, cnt:totable())
      assert.are.same({}, cd.unique(arr({})):totable())
      local t = values("int16", 6000, 9)
      local seen, want = {}, {}
      for _, x in ipairs(t) do if not seen[x] then seen[x] = true; want[#want + 1] = x end end
      table.sort(want)
      assert.are.same(want, cd.unique(arr(t, "int16")):totable())
      helper.assert_error_matches(function() cd.unique(a, { counts = true }) end,
        "bad option 'counts' to 'unique' (unknown option)")
    end)

    it("item gives the only element, or one at a flat position", function()
      assert.are.equal(7, arr({ { 7 } }):item())
      assert.are.equal(4, arr({ { 1, 2 }, { 3, 4 } }):item(-1))
      assert.are.equal(3, arr({ { 1, 2 }, { 3, 4 } }).T:item(2))
      assert.is_true(cd.full({}, true, "bool", { device = dev }):item())
      helper.assert_error_matches(function() arr({ 1, 2 }):item() end,
        "bad argument #1 to 'item' (can only convert an array of size 1 to a Lua value, not 2)")
      helper.assert_error_matches(function() arr({ 1, 2 }):item(3) end, "bad argument #2 to 'item' (position 3 out of range 1..2)")
    end)
  end)
end)

describe("sorting kernels for the GPU", function()
  -- every generated source compiled by NVRTC for sm_90 as well, so the CUDA side of each kernel is checked
  -- where there is no GPU
  helper.nvrtc_it("compile with NVRTC", function()
    local compile, failures, n = cd.compile, {}, 0
    cd.clear_kernel_cache()
    cd.compile = function(src, opts)
      n = n + 1
      local ok, err = pcall(compile, src, { arch = "sm_90", name = opts.name })
      if not ok then failures[#failures + 1] = opts.name .. ": " .. tostring(err) end
      return compile(src, opts)
    end
    local saved = cd._sort_tune()
    local ok, err = pcall(function()
      -- the default tuning, then the other ranking in other shapes (NOTE [sort tuning])
      for _, tune in ipairs({ saved, "block=512,items=9,pitems=7,rank=ballot,look=16,hpart=2,status=64,scan=20" }) do
        cd._sort_tune(tune)
        for _, dt in ipairs({ "int8", "uint16", "int32", "float16", "float32", "float64", "bool" }) do
          local a = cd.array(values(dt, 40), dt, { device = "cpu" })
          cd.sort(a)
          cd.argsort(cd.array({ values(dt, 6), values(dt, 6, 2) }, dt, { device = "cpu" }))
          cd.cumsum(a)
          cd.unique(a, { return_index = true, return_counts = true })
          cd.searchsorted(cd.sort(a), a)
          local _ = a[a:ne(0)], a[cd.array({ 1 }, "int64", { device = "cpu" })]
          a[cd.array({ 1 }, "int64", { device = "cpu" })] = a[1]
        end
        cd.cumprod(cd.arange(5, "float32", { device = "cpu" }))
      end
    end)
    cd._sort_tune(saved)
    cd.compile = compile
    assert(ok, err)
    assert.are.same({}, failures)
    assert.is_true(n > 20)
  end)
end)
