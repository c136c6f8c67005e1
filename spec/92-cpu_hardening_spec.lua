-- The cpu device against kernel sources and programs that would kill, hang or corrupt the host (issue #14,
-- "Crashes and wrong data"; doc/cpu-device.md, "what the cpu device catches"): static initialisers refused by
-- name, __shared__ beyond the cpu device's limit refused, guard pages around arrays and faults placed
-- relative to the nearest array, a million live small arrays, the mapping limit by name, and SIGINT to the
-- process ending a launch that never ends.
local helper = require "spec.helper"
local cd = require "cudadev"

local CPU = { device = "cpu" }
-- With CUDADEV_CPU_FORK=0 (the valgrind pass) a kernel fault ends this process: those cases are pending then.
local fork_it = os.getenv("CUDADEV_CPU_FORK") == "0"
  and function(name) return pending(name .. " (CUDADEV_CPU_FORK=0: a fault would end this process)") end or it

-- the cudadev.Error that compiling src raises
local function compile_error(src)
  local ok, err = pcall(cd.compile, src, { device = "cpu" })
  assert.is_false(ok, "the source compiled")
  assert.are.equal("Error", cd.type(err))
  return err
end

local REFUSED = ", which would run in the host process when the object is loaded or at exit, outside the launch's "
  .. "fault containment: the cpu device refuses static initialisers and finalisers, as CUDA refuses dynamic "
  .. "initialisation of __device__ variables (initialise in a kernel instead)"
local KERNEL = '\nextern "C" __global__ void k(int *p) { p[0] = 1; }\n'

describe("static initialisers in a cpu kernel source", function()
  it("a global whose constructor faults is refused by its initialiser, before anything runs", function()
    local err = compile_error('int *volatile nowhere = 0;\nstruct S { S() { *nowhere = 1; } } s;' .. KERNEL)
    assert.are.same({ "cpu.module_load", "CUDA_ERROR_NOT_SUPPORTED" }, { err.api, err.name })
    assert.are.equal("the kernel source has a namespace-scope variable with a constructor or an initialiser that is "
      .. "not constant (_GLOBAL__sub_I_kernel.cpp)" .. REFUSED, err.message)
  end)

  it("a global whose destructor calls exit is refused (its destructor is registered by an initialiser)", function()
    local err = compile_error('struct S { int x; ~S() { exit(3); } } s;' .. KERNEL)
    assert.are.equal("the kernel source has a namespace-scope variable with a constructor or an initialiser that is "
      .. "not constant (_GLOBAL__sub_I_kernel.cpp)" .. REFUSED, err.message)
  end)

  it("a function marked constructor (here one that never returns) is refused by name", function()
    local err = compile_error('__attribute__((constructor)) static void boom() { for (;;) {} }' .. KERNEL)
    assert.are.equal("the kernel source has a static initialiser (_ZL4boomv in .init_array)" .. REFUSED, err.message)
    err = compile_error('__attribute__((destructor)) static void bye() { exit(4); }' .. KERNEL)
    assert.are.equal("the kernel source has a static finaliser (_ZL3byev in .fini_array)" .. REFUSED, err.message)
  end)

  it("a source function named as the C runtime's own entry is still refused", function()
    local err = compile_error('extern "C" __attribute__((constructor)) void frame_dummy() { for (;;) {} }' .. KERNEL)
    assert.are.equal("the kernel source has a static initialiser (frame_dummy in .init_array)" .. REFUSED, err.message)
  end)

  it("a --use_fast_math kernel loads and runs (the initialiser GCC links for -ffast-math is the runtime's)", function()
    local m = cd.compile(KERNEL, { device = "cpu", options = { "--use_fast_math" } })
    local a = cd.zeros(1, "int32", CPU)
    m.k({ grid = 1, block = 1 }, a)
    assert.are.equal(1, a[1])
  end)

  it("a toolchain library's initialisers are not the source's: a kernel linked with a static libstdc++ loads", function()
    -- as on a host whose g++ links libstdc++ statically (its _GLOBAL__sub_I_eh_alloc.cc comes along)
    local out = helper.run_child([==[
local m = cd.compile('extern "C" __global__ void k(int *p) { p[0] = 5; }', { device = "cpu" })
local a = cd.zeros(1, "int32", { device = "cpu" })
m.k({ grid = 1, block = 1 }, a)
local ok, err = pcall(cd.compile, 'int *volatile z; struct S { S() { *z = 1; } } s;\n'
  .. 'extern "C" __global__ void k(int *p) { p[0] = 5; }', { device = "cpu" })
print(a[1], ok, err.message:match("^the kernel source has [^(]*%((.-)%)"))
]==], "CUDADEV_CPU_CXXFLAGS=-static-libstdc++")
    assert.are.equal("5\tfalse\t_GLOBAL__sub_I_kernel.cpp\nexit 0\n", out)
  end)

  it("a function-local static with a destructor is refused (__cxa_atexit)", function()
    local err = compile_error('struct S { int x; ~S() { exit(5); } };\n'
      .. 'extern "C" __global__ void k(int *p) { static S s; p[0] = s.x; }\n')
    assert.are.equal("the kernel source has a static variable with a destructor, or a call of __cxa_atexit" .. REFUSED,
      err.message)
  end)

  it("constant-initialised globals, __device__ data and constexpr constructors still load and run", function()
    local m = cd.compile([[
struct P { int x; constexpr P(int v) : x(v) {} };
static P g(40);
__device__ int table[4] = { 1, 2, 3, 4 };
extern "C" __global__ void k(int *p) { p[0] = g.x + table[1]; }
]], CPU)
    local a = cd.zeros(1, "i32", CPU)
    m.k({ dim = 1 }, a)
    assert.are.equal(42, a[1])
  end)
end)

describe("__shared__ beyond what the cpu device can give", function()
  it("1 TiB of __shared__ is refused at load, naming the limit (not a launch process that exits 127)", function()
    local err = compile_error([==[
extern "C" __global__ void k(int *p) { __shared__ char big[1ull << 40]; big[p[0]] = 1; p[1] = big[3]; }
]==])
    -- some toolchains (the H100 host's) refuse the object themselves: the compile error is the host compiler's
    if err.name == "HOST_COMPILER_ERROR" then
      assert.are.equal("c++", err.api)
      assert.is_true(#(err.log or "") > 0, "the compiler's log comes along")
      return
    end
    assert.are.same({ "cpu.module_load", "CUDA_ERROR_INVALID_VALUE" }, { err.api, err.name })
    assert.are.equal("the kernel source's __shared__ and thread-local variables need 1099511627776 bytes, more than "
      .. "the cpu device's limit of 67108864 bytes (CDV_CPU_MAX_STATIC_SHARED; use extern __shared__ memory, or an "
      .. "array)", err.message)
  end)

  it("in-process launches refuse it the same way (the host does not exit)", function()
    local out = helper.run_child([==[
local ok, err = pcall(cd.compile, 'extern "C" __global__ void k(int *p) { __shared__ char big[1ull << 40]; '
  .. 'big[p[0]] = 1; p[1] = big[3]; }', { device = "cpu" })
print(ok, err.name)
]==], "CUDADEV_CPU_FORK=0")
    assert.is_truthy(out == "false\tCUDA_ERROR_INVALID_VALUE\nexit 0\n" or out == "false\tHOST_COMPILER_ERROR\nexit 0\n", out)
  end)
end)

describe("out-of-bounds accesses on the cpu device", function()
  local m
  before_each(function()
    m = m or cd.compile('extern "C" __global__ void st(int *x, long long i, int v) { x[i] = v; }', CPU)
  end)
  teardown(function() m = nil end)

  -- three neighbouring arrays of n i32; a store to b[i]; returns the error and whether a and c are intact
  local function store(n, i)
    local a, b, c = cd.full(n, 7, "i32", CPU), cd.full(n, 8, "i32", CPU), cd.full(n, 9, "i32", CPU)
    local ok, err = pcall(m.st, { dim = 1 }, b, i, -1)
    local intact = true
    for k = 1, n do intact = intact and a[k] == 7 and c[k] == 9 end
    return ok, err, intact, b
  end

  fork_it("a store one element before an array faults in its guard page and names the array", function()
    local ok, err, intact, b = store(1024, -1)
    assert.is_false(ok)
    assert.is_true(intact)
    assert.are.equal("CUDA_ERROR_ILLEGAL_ADDRESS", err.name)
    local addr, base = err.message:match("^kernel 'st' crashed on the cpu device: SIGSEGV %(segmentation fault%) at "
      .. "address 0x(%x+), 4 bytes before the array at 0x(%x+) %(4096 bytes%) %(block %(0,0,0%), thread %(0,0,0%)%)$")
    assert.is_truthy(addr, err.message)
    assert.are.equal(tonumber(base, 16), b.ptr)
  end)

  fork_it("running off the end is reported as that, not as a stack overflow", function()
    local ok, err, intact, b = store(1024, 1024 + 100)
    assert.is_false(ok)
    assert.is_true(intact)
    local base = err.message:match("^kernel 'st' crashed on the cpu device: SIGSEGV %(segmentation fault%) at address "
      .. "0x%x+, 400 bytes past the end of the array at 0x(%x+) %(4096 bytes%) %(block %(0,0,0%), thread %(0,0,0%)%)$")
    assert.is_truthy(base, err.message)
    assert.are.equal(tonumber(base, 16), b.ptr)
  end)

  it("a store inside the array still works next to the guards", function()
    local ok, err, intact, b = store(1024, 1023)
    assert.is_true(ok, err)
    assert.is_true(intact)
    assert.are.equal(-1, b[1024])
  end)
end)

describe("a store past an array's end, seen by the canary after it (NOTE [tail canary])", function()
  local m
  local KIND = { f32 = "float", f64 = "double", i8 = "signed char" }
  before_each(function()
    local src = {}
    for dt, ctype in pairs(KIND) do
      src[#src + 1] = ('extern "C" __global__ void st_%s(%s *x, long long i) { x[i] = 0; }'):format(dt, ctype)
    end
    m = m or cd.compile(table.concat(src, "\n"), CPU)
  end)
  teardown(function() m = nil end)

  local function message(k, bytes, first, last)
    return ("kernel '%s' wrote past the end of argument #1 ('x', an array of %d bytes): bytes %d to %d past its "
      .. "end changed (seen after the launch, in the canary kept there; which thread wrote is not known)")
      :format(k, bytes, first, last)
  end

  -- the bytes an array of n bytes has after it: its block (the block cache's class of n, 512-byte steps, or of
  -- n + 16 when that would leave fewer than 16 in a slab block; a slab block is 256 << k, up to 2048 bytes, else
  -- the array's pages end there, at a guard page), at most 1024 of them
  local function slack(n)
    local class = (n + 511) // 512 * 512
    if class <= 2048 and class - n < 16 then class = (n + 16 + 511) // 512 * 512 end
    local block = class
    if class <= 2048 then block = 256; while block < class do block = block * 2 end end
    return math.min(block - n, 1024)
  end

  local GUARD = "^kernel 'st_%s' crashed on the cpu device: SIGSEGV %%(segmentation fault%%) at address 0x%%x+, 0 bytes "
    .. "past the end of the array at 0x%%x+ %%(%d bytes%%) %%(block %%(0,0,0%%), thread %%(0,0,0%%)%%)$"

  it("one element past the end is an error naming the argument, every size from 1 to 4097 (f32, f64, i8)", function()
    local forking = os.getenv("CUDADEV_CPU_FORK") ~= "0"
    for _, dt in ipairs({ "f32", "f64", "i8" }) do
      local size = dt == "f32" and 4 or dt == "f64" and 8 or 1
      local k = m["st_" .. dt]
      for n = 1, 4097 do
        local bytes = n * size
        if slack(bytes) > 0 or forking then -- else its guard page faults, which would end this process
          local a = cd.full(n, 1, dt, CPU)
          local ok, err = pcall(k, { dim = 1 }, a, n)
          assert.is_false(ok, ("%s n = %d: the store past the end went unseen"):format(dt, n))
          assert.are.equal("CUDA_ERROR_ILLEGAL_ADDRESS", err.name)
          if slack(bytes) == 0 then -- the array ends at its guard page
            assert.is_truthy(err.message:find(GUARD:format(dt, bytes)), err.message)
          elseif err.message ~= message("st_" .. dt, bytes, 0, size - 1) then
            assert.are.equal(message("st_" .. dt, bytes, 0, size - 1), err.message)
          end
          assert.is_true(pcall(k, { dim = 1 }, a, n - 1), "the next launch is clean") -- the canary was rewritten
          assert.are.equal(0, a[n])
          if n > 1 then assert.are.equal(1, a[n - 1]) end
          a:free()
        end
      end
    end
  end)

  it("a store that starts anywhere in the bytes after the end is caught", function()
    for _, n in ipairs({ 1, 100, 496, 497, 512, 1000, 2032, 2048, 3000, 4096 }) do
      local a = cd.full(n, 1, "i8", CPU)
      for j = n, n + slack(n) - 1 do
        local ok, err = pcall(m.st_i8, { dim = 1 }, a, j)
        assert.is_false(ok, ("n = %d, a store at %d went unseen"):format(n, j))
        assert.are.equal(message("st_i8", n, j - n, j - n), err.message)
      end
      assert.is_true(pcall(m.st_i8, { dim = 1 }, a, 0))
      a:free()
    end
  end)

  fork_it("past the bytes after a big array's end, its guard page faults", function()
    local a = cd.full(1000, 1, "f32", CPU) -- 4000 bytes in a block of 4096 at the end of its pages
    local ok, err = pcall(m.st_f32, { dim = 1 }, a, 1024)
    assert.is_false(ok)
    assert.are.equal("CUDA_ERROR_ILLEGAL_ADDRESS", err.name)
    assert.is_truthy(err.message:find("SIGSEGV", 1, true), err.message)
    assert.is_true(pcall(m.st_f32, { dim = 1 }, a, 999), "the canary of a failed launch was written again")
  end)

  it("a view's end is its array's: a store past a view that ends inside the array is not seen", function()
    local a = cd.full(1000, 1, "f32", CPU)
    assert.is_true(pcall(m.st_f32, { dim = 1 }, a:slice(1, 500), 500))
    assert.are.equal(0, a[501])
    local ok, err = pcall(m.st_f32, { dim = 1 }, a:slice(501, 1000), 500)
    assert.is_false(ok)
    assert.are.equal(message("st_f32", 4000, 0, 3), err.message)
  end)
end)

describe("many arrays on the cpu device", function()
  it("a million live small arrays fit (pooled: a few hundred mappings, not one each)", function()
    local out = helper.run_child([[
local t = {}
for i = 1, 1000000 do t[i] = cd.empty(1, "f32", { device = "cpu" }) end
t[1][1], t[1000000][1] = 3, 4
local maps = 0
for _ in io.lines("/proc/self/maps") do maps = maps + 1 end
print(#t, t[1][1], t[1000000][1], maps < 5000)
]])
    assert.are.equal("1000000\t3.0\t4.0\ttrue\nexit 0\n", out)
  end)

  it("running out of memory mappings is an error naming vm.max_map_count, and freeing makes room", function()
    local out = helper.run_child([[
local f = io.open("/proc/sys/vm/max_map_count")
local max = f and tonumber(f:read("l"))
if not max or max > 300000 or (os.getenv("LD_PRELOAD") or ""):match("asan") then print("skip") return end
local t, err = {}
for i = 1, max + 10 do
  local ok, a = pcall(cd.empty, 1024, "f32", { device = "cpu" })
  if not ok then err = a break end
  t[i] = a
end
print(cd.type(err), err.name)
print(err.message:gsub("has %d+ memory", "has N memory"):gsub("allows %d+", "allows M"), "")
t = nil
collectgarbage()
print(cd.empty(1024, "f32", { device = "cpu" }) ~= nil)
]])
    -- under ASan the sanitizer's own mmap fails first at the limit, and it aborts the process
    if out == "skip\nexit 0\n" then return pending("vm.max_map_count unreadable, too large to reach, or ASan") end
    assert.are.equal("Error\tENOMEM\ncannot map 4096 bytes: the process has N memory mappings and the kernel allows M "
      .. "(vm.max_map_count: raise it with `sysctl -w vm.max_map_count=N`, or keep fewer arrays of over 2048 bytes "
      .. "alive)\t\ntrue\nexit 0\n", out)
  end)

  it("CUDADEV_CPU_MEMORY makes the cpu device one of that size: total_memory, out of memory past it, room again "
    .. "when freed", function()
    local out = helper.run_child([[
local dev = cd.device("cpu")
print(dev.total_memory)
local a = cd.empty(8 << 20, "f32", { device = "cpu" })          -- 32 MiB of the 64
print(pcall(cd.empty, 8 << 20, "f32", { device = "cpu" }))      -- 32 MiB more, with guard pages: past it
a = nil
collectgarbage()
cd.empty_cache(dev)
print(#cd.empty(8 << 20, "f32", { device = "cpu" }))
]], "CUDADEV_CPU_MEMORY=64M")
    assert.are.equal("67108864\nfalse\tout of memory on cpu (requested 32.0 MiB, free 32.0 MiB)\n8388608\nexit 0\n",
      (out:gsub("free 3[12]%.%d MiB", "free 32.0 MiB")))
    out = helper.run_child([[print(pcall(cd.empty, 1, "f32", { device = "cpu" }))]], "CUDADEV_CPU_MEMORY=lots")
    assert.are.equal("false\tcpu.mem_alloc: CUDA_ERROR_INVALID_VALUE: CUDADEV_CPU_MEMORY='lots' is not a size: write "
      .. "bytes, or a number with K, M, G or T (4G)\nexit 0\n", out)
  end)
end)

describe("a launch that never ends", function()
  -- Runs code in a child lua5.4 (or prog) in the background, waits for the file it creates before launching,
  -- then sends SIGINT to that process alone; returns its output and how it ended (a bound of 60 s: "hung").
  local function interrupt_child(code, env, prog)
    local path, mark = os.tmpname(), os.tmpname()
    os.remove(mark)
    local f = assert(io.open(path, "w"))
    f:write(("package.cpath = %q\nlocal cd = require 'cudadev'\nlocal MARK = %q\n"):format(package.cpath, mark), code)
    f:close()
    local sh = ([[%s %s %s >%s.out 2>&1 & p=$!
for i in $(seq 600); do [ -e %s ] && break; sleep 0.1; done
sleep 0.5; kill -INT $p
for i in $(seq 300); do kill -0 $p 2>/dev/null || break; sleep 0.1; done
if kill -0 $p 2>/dev/null; then kill -KILL $p; echo hung; fi
wait $p; echo "exit $?"]]):format(env or "", prog or "lua5.4", path, path, mark)
    local p = assert(io.popen(sh))
    local how = p:read("a")
    p:close()
    local o = io.open(path .. ".out")
    local out = o and o:read("a") or ""
    if o then o:close() end
    os.remove(path)
    os.remove(path .. ".out")
    os.remove(mark)
    return out, how
  end

  local SPIN = [==[
local m = cd.compile('extern "C" __global__ void spin(int *p) { while (*(volatile int *)p == 0) {} }',
  { device = "cpu" })
local a = cd.zeros(1, "i32", { device = "cpu" })
io.open(MARK, "w"):close()
local ok, err = pcall(m.spin, { dim = 1 }, a)
print("returned", ok, err)
]==]

  -- NOTE [launch time limit] (src/cpu_run.c): every limit here is under a second, and each case checks that
  -- it took less than 20 s in all
  local SPIN_SRC = 'extern "C" __global__ void spin(int *p) { while (*(volatile int *)p == 0) {} }\n'
    .. 'extern "C" __global__ void one(int *p) { p[blockIdx.x * blockDim.x + threadIdx.x] = 7; }'
  local function past(limit)
    return ("kernel 'spin' ran past its time limit of %s s on the cpu device and was stopped (the launch's timeout, "
      .. "else cd.compile's, else CUDADEV_CPU_TIMEOUT)"):format(limit)
  end

  helper.worker_it("a launch's timeout stops a kernel that never ends, naming it and the limit; the next launch works",
    function()
      local t0 = os.time()
      local m = cd.compile(SPIN_SRC, CPU)
      local a = cd.zeros(256, "i32", CPU)
      local ok, err = pcall(m.spin, { grid = 4, block = 32, timeout = 0.5 }, a)
      assert.is_false(ok)
      assert.are.same({ "cpu.launch", "CUDA_ERROR_LAUNCH_TIMEOUT", past("0.5"), false },
        { err.api, err.name, err.message, err.sticky })
      m.one({ grid = 4, block = 64 }, a)
      assert.are.same({ 7, 7 }, { a[1], a[256] })
      -- a LaunchConfig carries it, and a launch within its limit is not disturbed
      local lc = cd.launch_config { grid = 1, block = 1, timeout = 0.25 }
      assert.are.same({ 0.25, "LaunchConfig(grid=1, block=1, timeout=0.25)" }, { lc.timeout, tostring(lc) })
      a[1] = 0
      assert.are.equal(past("0.25"), select(2, pcall(m.spin, lc, a)).message)
      m.one({ grid = 4, block = 64, timeout = 30 }, a)
      assert.are.equal(7, a[1])
      assert.is_true(os.time() - t0 < 20)
    end)

  helper.worker_it("cd.compile's timeout is its kernels' limit; a launch's own wins, and 0 is no limit", function()
    local t0 = os.time()
    local m = cd.compile(SPIN_SRC, { device = "cpu", timeout = 0.3 })
    local a = cd.zeros(1, "i32", CPU)
    assert.are.equal(past("0.3"), select(2, pcall(m.spin, { dim = 1 }, a)).message)
    assert.are.equal(past("0.2"), select(2, pcall(m.spin, { dim = 1, timeout = 0.2 }, a)).message)
    -- the same source without the option: the cached module, without the limit
    local plain = cd.compile(SPIN_SRC, CPU)
    assert.are.equal(past("0.2"), select(2, pcall(plain.spin, { dim = 1, timeout = 0.2 }, a)).message)
    assert.are.equal(past("0.3"), select(2, pcall(m.spin, { dim = 1 }, a)).message)
    assert.is_true(os.time() - t0 < 20)
  end)

  local ENV_CHILD = [==[
local m = cd.compile(os.getenv("SRC"), { device = "cpu" })
local a = cd.zeros(64, "i32", { device = "cpu" })
-- under ASan a cooperative launch runs in-process (NOTE [forks under ASan]), where there is no time limit
local asan = (os.getenv("LD_PRELOAD") or ""):match("asan")
for _, c in ipairs({ { grid = 1, block = 32 }, not asan and { grid = 2, block = 32, cooperative = true } or nil }) do
  local ok, err = pcall(m.spin, c, a)
  print(ok, err and err.message)
end
m.one({ grid = 1, block = 64 }, a)
print(a[1], a[64])
]==]

  it("CUDADEV_CPU_TIMEOUT bounds every contained launch: through the worker, a child per launch, a cooperative one",
    function()
      local t0 = os.time()
      local coop = not (os.getenv("LD_PRELOAD") or ""):match("asan")   -- see ENV_CHILD
      for _, fork in ipairs({ "1", "each" }) do
        local out = helper.run_child(ENV_CHILD, ("timeout 60 env CUDADEV_CPU_TIMEOUT=0.4 CUDADEV_CPU_FORK=%s SRC=%s")
          :format(fork, helper.shell_quote(SPIN_SRC)))
        assert.are.equal(("false\t%s\n"):rep(coop and 2 or 1):format(past("0.4"), past("0.4")) .. "7\t7\nexit 0\n", out)
      end
      local out = helper.run_child(ENV_CHILD, ("timeout 60 env CUDADEV_CPU_TIMEOUT=soon SRC=%s"):format(
        helper.shell_quote(SPIN_SRC)))
      local bad = "CUDADEV_CPU_TIMEOUT must be a number of seconds (0 for no limit), not 'soon'"
      assert.are.equal(("false\t%s\n"):format(bad):rep(coop and 2 or 1),
        out:match("^false\t[^\n]*\n" .. (coop and "false\t[^\n]*\n" or "")), out)
      assert.is_true(os.time() - t0 < 40)
    end)

  it("an in-process launch (CUDADEV_CPU_FORK=0) has no time limit: the option is taken and has no effect", function()
    local out = helper.run_child([==[
local m = cd.compile('extern "C" __global__ void slow(int *p) { for (volatile int i = 0; i < 100000000; i++) {} '
  .. 'p[0] = 1; }', { device = "cpu" })
local a = cd.zeros(1, "i32", { device = "cpu" })
local t = cd.now()
m.slow({ dim = 1, timeout = 0.01 }, a)
print(a[1], cd.now() - t > 0.02)
]==], "timeout 60 env CUDADEV_CPU_FORK=0 CUDADEV_CPU_TIMEOUT=0.01")
    assert.are.equal("1\ttrue\nexit 0\n", out)
  end)

  it("a timeout that is not a number of seconds is refused, by the launch and by cd.compile", function()
    local m = cd.compile(SPIN_SRC, CPU)
    local a = cd.zeros(1, "i32", CPU)
    for _, v in ipairs({ -1, "soon", 0 / 0, 1e10 }) do
      helper.assert_error_matches(function() m.one({ dim = 1, timeout = v }, a) end,
        "bad launch configuration for 'one' ('timeout' must be a number of seconds from 0 (no limit) to 1e9, got "
        .. tostring(v) .. ")")
      helper.assert_error_matches(function() cd.compile(SPIN_SRC, { device = "cpu", timeout = v }) end,
        "bad option 'timeout' to 'compile' (a number of seconds from 0 (no limit) to 1e9 expected, got " .. tostring(v)
        .. ")")
    end
  end)

  it("SIGINT sent to the process (not its group) ends a forked launch; lua then raises interrupted!", function()
    local out, how = interrupt_child(SPIN, "CUDADEV_CPU_FORK=1")
    assert.are.equal("exit 1\n", how, out)
    assert.is_truthy(out:match("interrupted!"), out)
  end)

  local LUACUDA = "build/luacuda"
  local has_luacuda = helper.file_exists(LUACUDA)
  local luacuda_it = has_luacuda and it or function(name) return pending(name .. " (build/luacuda was not built)") end
  luacuda_it("in luacuda with in-process launches, Ctrl-C stops a long grid and the process lives", function()
    local out, how = interrupt_child([==[
local m = cd.compile('extern "C" __global__ void slow(int *p) { for (volatile int i = 0; i < 20000000; i++) {} '
  .. 'p[0] = 1; }', { device = "cpu" })
local a = cd.zeros(1, "i32", { device = "cpu" })
io.open(MARK, "w"):close()
local ok, err = pcall(m.slow, { grid = 1000000, block = 1 }, a)
print("returned", ok, err)
]==], "CUDADEV_CPU_FORK=0", LUACUDA)
    assert.are.equal("exit 1\n", how, out)
    assert.is_truthy(out:match("interrupted!"), out)
  end)

  -- (see NOTE [preempting a block]) was a hang (the first Ctrl-C stopped only the handing out of blocks), then the
  -- second Ctrl-C ended the session
  luacuda_it("in luacuda with in-process launches, Ctrl-C stops blocks that never end, and the next launch works",
    function()
      local out, how = interrupt_child([==[
local m = cd.compile('extern "C" __global__ void spin(int *p) { while (*(volatile int *)p == 0) {} }\n'
  .. 'extern "C" __global__ void one(int *p) { p[blockIdx.x * blockDim.x + threadIdx.x] = 7; }', { device = "cpu" })
local a = cd.zeros(256, "i32", { device = "cpu" })
io.open(MARK, "w"):close()
-- the launch's error, then luacuda's "interrupted!" at the next Lua instruction: both caught
local ok, err = pcall(function()
  local _, e = pcall(m.spin, { grid = 4, block = 32 }, a)
  return e
end)
print("spin", ok, err)
m.one({ grid = 4, block = 64 }, a)
print("after", a[1], a[256])
]==], "CUDADEV_CPU_FORK=0", LUACUDA)
      assert.are.equal("exit 0\n", how, out)
      assert.is_truthy(out:match("spin\tfalse\t[^\n]*interrupted"), out)
      assert.is_truthy(out:match("after\t7\t7\n"), out)
    end)
end)
