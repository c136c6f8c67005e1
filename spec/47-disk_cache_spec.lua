-- The kernel cache on disk (API.md "Kernels"; NOTE [cuda kernel cache] in src/cuda_cache.c): CUDA modules
-- that one process compiled, read back by the next without NVRTC. Every compile here runs in a fresh child
-- process (lua5.4, this cudadev) with a cache directory of its own, and is judged by what the child prints:
-- cd.kernel_cache_stats()'s disk counters, whether NVRTC was loaded at all (/proc/self/maps), what the module
-- holds, and on a GPU whether the kernel computes the right values over a NaN-poisoned output.
--
-- Each behaviour runs in two modes: compiled for sm_90 with no device (needs NVRTC only: pending without
-- it) and on cuda:0 (pending without a GPU). The entry format itself is checked without NVRTC by
-- cd._selftest.disk_cache, and the choice of directory without compiling anything.
local helper = require "spec.helper"
local cd = require "cudadev"

local sh = helper.shell_quote

local read = helper.read_file

local write = helper.write_file

local function tmpdir()
  local p = assert(io.popen("mktemp -d " .. sh((os.getenv("TMPDIR") or "/tmp") .. "/cdv-disk-cache.XXXXXX")))
  local d = p:read("l")
  p:close()
  return d
end

local function remove_tree(d) os.execute("rm -rf " .. sh(d)) end

-- The names in a directory matching a Lua pattern, sorted.
local function files(dir, pattern)
  local t, p = {}, assert(io.popen("ls -A " .. sh(dir) .. " 2>/dev/null"))
  for name in p:lines() do
    if name:find(pattern) then t[#t + 1] = name end
  end
  p:close()
  table.sort(t)
  return t
end

-- What every child has: compile(src, opts) in the mode of $CDV_SPEC_MODE, report() (the disk counters and
-- whether NVRTC is loaded), digest(m) (what the module holds, as lengths and checksums), check(arr, f)
-- (every element against f(i), exactly).
local PRELUDE = [==[
local MODE = os.getenv("CDV_SPEC_MODE")
local function compile(src, opts)
  opts = opts or {}
  if MODE == "gpu" then
    opts.device = "cuda:0"
    return cd.compile(src, opts)
  end
  opts.arch = "sm_90"
  return cd.with_device("cpu", cd.compile, src, opts)
end
local function report()
  local s = cd.kernel_cache_stats()
  local maps = io.open("/proc/self/maps"):read("a")
  print(("hits=%d misses=%d writes=%d errors=%d nvrtc=%s"):format(s.disk_hits, s.disk_misses, s.disk_writes,
    s.disk_errors, maps:find("libnvrtc", 1, true) and "yes" or "no"))
end
local function digest(m)
  local function sum(s)
    if s == nil then return "none" end
    local h = 0
    for i = 1, #s do h = (h * 31 + s:byte(i)) % 4294967296 end
    return #s .. ":" .. h
  end
  print(("ptx=%s cubin=%s log=%s kernels=%s"):format(sum(m.ptx), sum(m.cubin), sum(m.log), table.concat(m.kernels, ",")))
end
local function check(arr, f)
  local got = arr:totable()
  for i = 1, #got do
    if got[i] ~= f(i) then return print(("wrong value at %d: %s, expected %s"):format(i, got[i], f(i))) end
  end
  print("values ok")
end
]==]

-- Runs code in a child with the cache in dir (and more environment assignments); returns its output.
local function child(mode, dir, code, env)
  local path = os.tmpname()
  write(path, ("package.cpath = %q\npackage.path = %q\nlocal cd = require 'cudadev'\n"):format(package.cpath,
    package.path) .. PRELUDE .. code)
  local p = assert(io.popen(("env -u CUDADEV_CACHE CDV_SPEC_MODE=%s CUDADEV_CACHE_DIR=%s %s lua5.4 %s 2>&1"):format(
    mode, sh(dir), env or "", sh(path))))
  local out = p:read("a")
  p:close()
  os.remove(path)
  return out
end

-- NVRTC is there when a compile for sm_90 works (in a child: loading NVRTC is slow, and writes a cache entry).
local nvrtc_why
do
  local dir = tmpdir()
  local out = child("arch", dir, [[
    local ok, err = pcall(compile, 'extern "C" __global__ void probe() {}')
    io.write(ok and "ok" or tostring(err))
  ]])
  remove_tree(dir)
  if out ~= "ok" then nvrtc_why = "no NVRTC: " .. out:gsub("\n.*", "") end
end

local function nvrtc_it(name, fn)
  if nvrtc_why then return pending(("%s (%s)"):format(name, nvrtc_why)) end
  return it(name, fn)
end

-- Each test gets a cache directory, removed afterwards.
local function with_dir(fn)
  return function()
    local dir = tmpdir()
    finally(function() remove_tree(dir) end)
    fn(dir)
  end
end

local SAXPY = [[
extern "C" __global__ void saxpy(float a, const float *x, const float *y, float *out, size_t n)
{
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i] + y[i];
}
]]

-- compile saxpy, show the module; on a GPU run it over a NaN-poisoned output and check every value
local SAXPY_CHILD = ([==[
local m = compile(%q)
digest(m)
if MODE == "gpu" then
  local n = 1000
  local x = cd.array((function() local t = {} for i = 1, n do t[i] = i end return t end)(), { device = "cuda:0" })
  local y = cd.full(n, 0.5, "float32", { device = "cuda:0" })
  local out = cd.full(n, 0 / 0, "float32", { device = "cuda:0" })
  m.saxpy({ dim = n }, 2.0, x, y, out, n)
  check(out, function(i) return 2 * i + 0.5 end)
end
report()
]==]):format(SAXPY)

local AXPY = [[
template <typename T>
__global__ void axpy(T a, const T *x, T *y, int n)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
]]

local AXPY_CHILD = ([==[
local m = compile(%q, { name_expressions = { "axpy<float>" } })
digest(m)
if MODE == "gpu" then
  local n = 300
  local x = cd.full(n, 3, "float32", { device = "cuda:0" })
  local y = cd.full(n, 1, "float32", { device = "cuda:0" })
  m["axpy<float>"]({ dim = n }, 2.0, x, y, n)
  check(y, function() return 7 end)
end
report()
]==]):format(AXPY)

-- a kernel whose value comes from a header found on an include path ($INC)
local SCALED_CHILD = [==[
local m = compile('#include "scale.h"\nextern "C" __global__ void scaled(int *x, int n)\n'
  .. '{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = SCALE * i; }\n',
  { include_paths = { os.getenv("INC") } })
digest(m)
if MODE == "gpu" then
  local x = cd.full(100, -1, "int32", { device = "cuda:0" })
  m.scaled({ dim = 100 }, x, 100)
  check(x, function(i) return tonumber(os.getenv("SCALE")) * (i - 1) end)
end
report()
]==]

local BAD_CHILD = [==[
local ok, err = pcall(compile, 'extern "C" __global__ void broken(float *x) { x[0] = undefined_thing; }', { name = "broken.cu" })
print(ok, err.name, err.log:find("undefined_thing", 1, true) ~= nil)
report()
]==]

local MODES = {
  { mode = "arch", title = "compiled for sm_90 with no device", it = nvrtc_it },
  { mode = "gpu", title = "on cuda:0", it = helper.gpu_it },
}

-- the lines a child prints: the module's digest, "values ok" on a GPU, the report
local function lines(mode, digest, report)
  return digest .. "\n" .. (mode == "gpu" and "values ok\n" or "") .. report .. "\n"
end

local function first_line(s) return s:match("^[^\n]*") end

for _, M in ipairs(MODES) do
  local mode, it_ = M.mode, M.it

  describe("the disk cache, " .. M.title, function()
    it_("a new process compiles and writes the entry; the next reads it without loading NVRTC", with_dir(function(dir)
      local a = child(mode, dir, SAXPY_CHILD)
      local d = first_line(a)
      assert.are.equal(lines(mode, d, "hits=0 misses=1 writes=1 errors=0 nvrtc=yes"), a)
      assert.are.equal(1, #files(dir .. "/cuda", "^%x+%.mod$"))
      assert.are.equal(1, #files(dir .. "/cuda", "^nvrtc%-%x+%.id$"))
      assert.are.equal(lines(mode, d, "hits=1 misses=0 writes=0 errors=0 nvrtc=no"), child(mode, dir, SAXPY_CHILD))
      assert.are.same({}, files(dir .. "/cuda", "^%.tmp"))
    end))

    for _, damage in ipairs {
      { "a truncated entry", function(s) return s:sub(1, #s // 2) end },
      { "an entry with one byte flipped", function(s)
        local k = #s // 3
        return s:sub(1, k - 1) .. string.char(s:byte(k) ~ 0xff) .. s:sub(k + 1)
      end },
      { "an empty entry", function() return "" end },
    } do
      it_(damage[1] .. " is a miss: compiled again, written again, the same module", with_dir(function(dir)
        local a = child(mode, dir, SAXPY_CHILD)
        local d = first_line(a)
        local entry = dir .. "/cuda/" .. files(dir .. "/cuda", "%.mod$")[1]
        write(entry, damage[2](read(entry)))
        local b = child(mode, dir, SAXPY_CHILD .. "print(cd.kernel_cache_stats().disk_last_error)\n")
        assert.are.equal(lines(mode, d, "hits=0 misses=1 writes=1 errors=1 nvrtc=yes")
          .. ("the kernel cache entry '%s' is damaged (truncated or modified)\n"):format(entry), b)
        assert.are.equal(lines(mode, d, "hits=1 misses=0 writes=0 errors=0 nvrtc=no"), child(mode, dir, SAXPY_CHILD))
      end))
    end

    it_("a template named by a name expression hits, with its lowered name", with_dir(function(dir)
      local a = child(mode, dir, AXPY_CHILD)
      local d = first_line(a)
      assert.is_truthy(d:find("kernels=axpy<float>$"))
      assert.are.equal(lines(mode, d, "hits=0 misses=1 writes=1 errors=0 nvrtc=yes"), a)
      assert.are.equal(lines(mode, d, "hits=1 misses=0 writes=0 errors=0 nvrtc=no"), child(mode, dir, AXPY_CHILD))
    end))

    it_("a compile error is raised by every process and never stored", with_dir(function(dir)
      local want = "false\tNVRTC_ERROR_COMPILATION\ttrue\nhits=0 misses=1 writes=0 errors=0 nvrtc=yes\n"
      assert.are.equal(want, child(mode, dir, BAD_CHILD))
      assert.are.equal(want, child(mode, dir, BAD_CHILD))
      assert.are.same({}, files(dir .. "/cuda", "%.mod$"))
    end))

    it_("changing a header file the source includes is a miss; changing it back hits the first entry",
      with_dir(function(dir)
        local inc = dir .. "/include"
        os.execute("mkdir " .. sh(inc))
        local function run(scale)
          write(inc .. "/scale.h", ("#define SCALE %d\n"):format(scale))
          return child(mode, dir, SCALED_CHILD, ("INC=%s SCALE=%d"):format(sh(inc), scale))
        end
        local three = run(3)
        local d3 = first_line(three)
        assert.are.equal(lines(mode, d3, "hits=0 misses=1 writes=1 errors=0 nvrtc=yes"), three)
        local five = run(5)
        local d5 = first_line(five)
        assert.are_not.equal(d3, d5)
        assert.are.equal(lines(mode, d5, "hits=0 misses=1 writes=1 errors=0 nvrtc=yes"), five)
        assert.are.equal(lines(mode, d3, "hits=1 misses=0 writes=0 errors=0 nvrtc=no"), run(3))
      end))
  end)
end

describe("the disk cache", function()
  nvrtc_it("a header next to the source file (named by its path) is part of the key", with_dir(function(dir)
    local code = [==[
      local m = compile('#include "near.h"\nextern "C" __global__ void k(int *x) { x[0] = NEAR; }\n',
        { name = os.getenv("SRC"), target = "ptx" })
      print(m.ptx:find(", 4711;", 1, true) ~= nil, m.ptx:find(", 4712;", 1, true) ~= nil)
      report()
    ]==]
    local env = "SRC=" .. sh(dir .. "/k.cu")
    write(dir .. "/near.h", "#define NEAR 4711\n")
    assert.are.equal("true\tfalse\nhits=0 misses=1 writes=1 errors=0 nvrtc=yes\n", child("arch", dir, code, env))
    assert.are.equal("true\tfalse\nhits=1 misses=0 writes=0 errors=0 nvrtc=no\n", child("arch", dir, code, env))
    write(dir .. "/near.h", "#define NEAR 4712\n")
    assert.are.equal("false\ttrue\nhits=0 misses=1 writes=1 errors=0 nvrtc=yes\n", child("arch", dir, code, env))
  end))

  nvrtc_it("headers given inline are keyed by name and text, whatever the order of the table", with_dir(function(dir)
    -- six headers: the order a table gives its keys varies from process to process (Lua seeds its string hashes)
    local code = [==[
      local headers = {}
      for name in os.getenv("ORDER"):gmatch("%S+") do headers[name .. ".h"] = "#define " .. name:upper() .. " 1\n" end
      headers["c.h"] = os.getenv("C")
      compile('#include "a.h"\n#include "b.h"\n#include "c.h"\n#include "d.h"\n#include "e.h"\n#include "f.h"\n'
        .. 'extern "C" __global__ void k(int *x) { x[0] = A + B + C + D + E + F; }\n', { headers = headers })
      report()
    ]==]
    local miss, hit = "hits=0 misses=1 writes=1 errors=0 nvrtc=yes\n", "hits=1 misses=0 writes=0 errors=0 nvrtc=no\n"
    assert.are.equal(miss, child("arch", dir, code, "ORDER='a b c d e f' C='#define C 1'"))
    assert.are.equal(hit, child("arch", dir, code, "ORDER='f e d c b a' C='#define C 1'"))
    assert.are.equal(hit, child("arch", dir, code, "ORDER='c a e b f d' C='#define C 1'"))
    assert.are.equal(miss, child("arch", dir, code, "ORDER='f e d c b a' C='#define C 2'"))
  end))

  nvrtc_it("NVRTC is known by its record: another library search, or a damaged record, loads it once more",
    with_dir(function(dir)
      local code = ("compile(%q)\nreport()\n"):format(SAXPY)
      local other = "LD_LIBRARY_PATH=/nonexistent-cdv-dir"
      assert.are.equal("hits=0 misses=1 writes=1 errors=0 nvrtc=yes\n", child("arch", dir, code))
      assert.are.equal("hits=1 misses=0 writes=0 errors=0 nvrtc=yes\n", child("arch", dir, code, other))
      assert.are.equal("hits=1 misses=0 writes=0 errors=0 nvrtc=no\n", child("arch", dir, code, other))
      local records = files(dir .. "/cuda", "^nvrtc%-%x+%.id$")
      assert.are.equal(2, #records)
      for _, r in ipairs(records) do write(dir .. "/cuda/" .. r, read(dir .. "/cuda/" .. r):gsub("nvrtc", "NVRTC", 1)) end
      assert.are.equal("hits=1 misses=0 writes=0 errors=0 nvrtc=yes\n", child("arch", dir, code))
      assert.are.equal("hits=1 misses=0 writes=0 errors=0 nvrtc=no\n", child("arch", dir, code))
    end))

  nvrtc_it("cd.clear_kernel_cache() clears the memory only: the next compile reads the disk", with_dir(function(dir)
    assert.are.equal("hits=1 misses=1 writes=1 errors=0 nvrtc=yes\n", child("arch", dir, ([==[
      compile(%q)
      cd.clear_kernel_cache()
      compile(%q)
      report()
    ]==]):format(SAXPY, SAXPY)))
  end))

  nvrtc_it("CUDADEV_CACHE=0 turns it off", with_dir(function(dir)
    assert.are.equal("nil\nhits=0 misses=0 writes=0 errors=0 nvrtc=yes\n", child("arch", dir, ([==[
      compile(%q)
      print(cd.kernel_cache_stats().disk_dir)
      report()
    ]==]):format(SAXPY), "CUDADEV_CACHE=0"))
    assert.are.same({}, files(dir, "."))
  end))

  nvrtc_it("a directory that cannot be written is skipped: the compile works, the error is counted", with_dir(function(dir)
    local file = dir .. "/not-a-directory"
    write(file, "")
    local out = child("arch", file, ([==[
      local m = compile(%q)
      print(m.kernels[1], cd.kernel_cache_stats().disk_last_error)
      report()
    ]==]):format(SAXPY))
    assert.are.equal(("saxpy\tcannot create the kernel cache directory '%s/cuda': Not a directory\n"):format(file)
      .. "hits=0 misses=0 writes=0 errors=1 nvrtc=yes\n", out)   -- checked before the lookup (NOTE [cache trust])
  end))

  it("lives in $CUDADEV_CACHE_DIR/cuda, else $XDG_CACHE_HOME/cudadev/cuda, else ~/.cache/cudadev/cuda", function()
    local code = "print(cd.kernel_cache_stats().disk_dir)"
    assert.are.equal("/c/cuda\n", child("arch", "/c", code, "XDG_CACHE_HOME=/x HOME=/h"))
    assert.are.equal("/x/cudadev/cuda\n", child("arch", "", code, "XDG_CACHE_HOME=/x HOME=/h"))
    assert.are.equal("/h/.cache/cudadev/cuda\n", child("arch", "", code, "XDG_CACHE_HOME= HOME=/h"))
    assert.are.equal("nil\n", child("arch", "/c", code, "CUDADEV_CACHE=off"))
  end)

  it("cd.kernel_cache_stats() has the memory counters and the disk counters", function()
    local s = cd.kernel_cache_stats()
    for _, k in ipairs { "memory_hits", "memory_misses", "memory_entries", "disk_hits", "disk_misses", "disk_writes",
      "disk_errors" } do
      assert.is_true(math.type(s[k]) == "integer" and s[k] >= 0, k)
    end
  end)

  it("reads back what it wrote, and refuses every truncated, modified or foreign entry (no NVRTC needed)",
    with_dir(function(dir)
      assert.are.equal("true\n", child("arch", dir, ("print(cd._selftest.disk_cache(%q))"):format(dir)))
    end))
end)
