-- The module loads on any machine, GPU or not, and says whether CUDA can be used.
local helper = require "spec.helper"

describe("require 'cudadev'", function()
  local cd = require "cudadev"

  it("returns a table", function()
    assert.is_table(cd)
  end)

  it("is_available() returns a boolean, and a reason when false", function()
    local ok, why = cd.is_available()
    assert.is_boolean(ok)
    if not ok then assert.is_string(why) end
  end)

  helper.gpu_it("sees at least one CUDA device when available", function()
    assert.is_true(cd.device_count() >= 1)
  end)
end)
