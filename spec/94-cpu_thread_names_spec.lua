-- Failures on the cpu device's fast paths name their thread although the loops no longer keep the thread's
-- index in memory (issue #18; NOTE [naming the thread] in src/cpu_run.c, doc/cpu-device.md "Kernel paths"):
-- an assert or a trap passes the threadIdx it sees as it fails; a signal in a contained launch re-runs its
-- block on the kernel's own path in a child, and names the thread when the signal comes again.
local helper = require "spec.helper"
local cd = require "cudadev"

local CPU = { device = "cpu" }
local worker_it = helper.worker_it

-- block 16 threads wide: i == 37 is block (2,0,0), thread (5,0,0)
local SRC = [[
#include <assert.h>
extern "C" __global__ void checks(float *y, int bad)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  assert(i != bad);
  y[i] = 1;
}
extern "C" __global__ void traps(float *y, int bad)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i == bad) __trap();
  y[i] = 1;
}
extern "C" __global__ void stores(float *y, int bad)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float *p = i == bad ? (float *)0 : y;
  p[i] = 2;
}
extern "C" __global__ void divides(int *y, int bad)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  y[i] = 7 / (i - bad);
}
// faults once: the block's re-run finds the flag set and finishes
extern "C" __global__ void once(int *flag)
{
  if (blockIdx.x == 2 && threadIdx.x == 5 && atomicAdd(flag, 1) == 0) *(volatile int *)0 = 1;
}
// prints, then faults every time
extern "C" __global__ void says(int *p)
{
  if (blockIdx.x == 1 && threadIdx.x == 3) {
    printf("said once\n");
    fflush(stdout);
    *(volatile int *)0 = 1;
  }
}
]]

local WHERE = " (block (2,0,0), thread (5,0,0))"

local function failure(k, ...)
  local ok, err = pcall(k, { grid = 4, block = 16 }, ...)
  assert.is_false(ok, "the launch returned normally")
  return err.message
end

describe("naming the thread of a failure on the cpu fast paths", function()
  local m
  before_each(function() m = m or cd.compile(SRC, { device = "cpu", name = "names.cu" }) end)
  teardown(function() m = nil end)

  it("an assert and __trap() in a simd kernel name their thread (in-process launches too)", function()
    assert.are.same({ "simd", "simd" }, { m.checks.cpu_path, m.traps.cpu_path })
    local y = cd.zeros(64, "float32", CPU)
    assert.are.equal("kernel 'checks' failed an assertion: names.cu:5: i != bad" .. WHERE, failure(m.checks, y, 37))
    assert.are.equal("kernel 'traps' trapped: names.cu:11: __trap() called" .. WHERE, failure(m.traps, y, 37))
  end)

  worker_it("a segmentation fault and a division by zero in a simd kernel name their thread", function()
    assert.are.same({ "simd", "simd" }, { m.stores.cpu_path, m.divides.cpu_path })
    assert.are.equal("kernel 'stores' crashed on the cpu device: SIGSEGV (segmentation fault) at address 0x94"
      .. WHERE, failure(m.stores, cd.zeros(64, "float32", CPU), 37))
    assert.are.equal("kernel 'divides' crashed on the cpu device: SIGFPE (arithmetic exception, e.g. an integer "
      .. "division by zero)" .. WHERE, failure(m.divides, cd.zeros(64, "int32", CPU), 37))
    -- the launches after are fine
    local y = cd.zeros(64, "float32", CPU)
    m.stores({ grid = 4, block = 16 }, y, -1)
    assert.are.same({ 2, 2 }, { y[1], y[64] })
  end)

  worker_it("a fault that the block's re-run does not repeat names the block only", function()
    assert.are.equal("simd", m.once.cpu_path)
    local flag = cd.zeros(1, "int32", CPU)
    assert.are.equal("kernel 'once' crashed on the cpu device: SIGSEGV (segmentation fault) at address 0x0 "
      .. "(block (2,0,0))", failure(m.once, flag))
    assert.are.equal(2, flag[1]) -- the launch and the re-run each counted
  end)

  worker_it("what the re-run prints is not shown again", function()
    local out = helper.run_child(([==[
local m = cd.compile(%q, { device = "cpu", name = "names.cu" })
local ok, err = pcall(m.says, { grid = 4, block = 16 }, cd.zeros(1, "int32", { device = "cpu" }))
print(m.says.cpu_path, ok, err.message)
]==]):format(SRC))
    local _, said = out:gsub("said once\n", "")
    assert.are.equal(1, said, out)
    assert.is_truthy(out:find("\nsimd\tfalse\tkernel 'says' crashed on the cpu device: SIGSEGV (segmentation fault) at "
      .. "address 0x0 (block (1,0,0), thread (3,0,0))\nexit 0\n", 1, true), out)
  end)

  -- (contained launches in the child, whatever this process uses) its lines about the launches, and how it ended
  -- (ASan's warnings about fiber switches, in the asan pass, are left out)
  local function child(env)
    local out = helper.run_child(([==[
local m = cd.compile(%q, { device = "cpu", name = "names.cu" })
local function msg(k, a, ...)
  local ok, err = pcall(k, { grid = 4, block = 16 }, a, ...)
  print(k.cpu_path .. " " .. tostring(ok) .. " " .. err.message)
end
msg(m.checks, cd.zeros(64, "float32", { device = "cpu" }), 37)
msg(m.stores, cd.zeros(64, "float32", { device = "cpu" }), 37)
msg(m.once, cd.zeros(1, "int32", { device = "cpu" }))
]==]):format(SRC), env .. " CUDADEV_CPU_FORK=1 CUDADEV_CACHE_DIR=" .. os.tmpname() .. ".d")
    local keep = {}
    for line in out:gmatch("[^\n]*\n") do
      if line:match("^simd ") or line:match("^exit ") then keep[#keep + 1] = line end
    end
    return table.concat(keep)
  end

  it("CUDADEV_CPU_FAST=vector is the default, and still names the thread", function()
    assert.are.equal("simd false kernel 'checks' failed an assertion: names.cu:5: i != bad" .. WHERE .. "\n"
      .. "simd false kernel 'stores' crashed on the cpu device: SIGSEGV (segmentation fault) at address 0x94"
      .. WHERE .. "\n"
      .. "simd false kernel 'once' crashed on the cpu device: SIGSEGV (segmentation fault) at address 0x0 "
      .. "(block (2,0,0))\nexit 0\n", child("CUDADEV_CPU_FAST=vector"))
  end)

  it("CUDADEV_CPU_FAST=tracked keeps every thread's index: a fault that does not repeat names its thread", function()
    assert.are.equal("simd false kernel 'checks' failed an assertion: names.cu:5: i != bad" .. WHERE .. "\n"
      .. "simd false kernel 'stores' crashed on the cpu device: SIGSEGV (segmentation fault) at address 0x94"
      .. WHERE .. "\n"
      .. "simd false kernel 'once' crashed on the cpu device: SIGSEGV (segmentation fault) at address 0x0"
      .. WHERE .. "\nexit 0\n", child("CUDADEV_CPU_FAST=tracked"))
  end)
end)
