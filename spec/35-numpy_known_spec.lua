-- The differential NumPy suite's known failures, fixed (issue 28; spec/29-numpy_diff_spec.lua's KNOWN table had a
-- row for each): one direct case each, with NumPy's answer worked out here (python3 with NumPy gave the same).
local helper = require "spec.helper"
local cd = require "cudadev"

local E = helper.assert_error_matches

helper.each_device(function(dev)
  local D = { device = dev }
  local function arr(t, dt) return cd.array(t, dt or "float64", D) end

  describe("NumPy's answers on " .. dev .. " where cudadev once differed", function()
    it("linspace into an integer dtype floors, as NumPy (a C conversion truncates towards zero)", function()
      assert.are.same({ -1, -1, 0 }, cd.linspace(-1, 0, 3, "int32", D):totable())
      -- -3.5, -2.125, -0.75, 0.625, 2
      assert.are.same({ -4, -3, -1, 0, 2 }, cd.linspace(-3.5, 2, 5, "int16", D):totable())
      assert.are.same({ -3, -2, -2 }, cd.linspace(-2.5, -0.5, 3, "int64", { endpoint = false, device = dev }):totable())
      assert.are.same({ -2.5, -1.25 }, cd.linspace(-2.5, 0, 2, "float64", { endpoint = false, device = dev }):totable())
    end)
  end)
end)
