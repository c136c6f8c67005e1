-- What the kernel caches on disk trust (NOTE [cache trust] in src/diskcache.c, doc/cache-trust.md), and what
-- keeps a compile from hanging (NOTE [compile timeout] in src/cpu_compile.c). An entry of either cache is code
-- that runs in this process, so a directory another user could write is never used, symbolic links are not
-- followed, a FIFO at an entry's or an include's name does not block, and the host compiler has a deadline.
--
-- Every case runs a child process (lua5.4 with this cudadev) with an environment of its own and judges what it
-- prints. The attacker is a second, unprivileged user: `nobody`, through setpriv, which needs root (CI runs
-- `make test` as root: the victim is then root, the worst case). Without root those cases are pending; the
-- cases that need no second user (world-writable, symbolic links, FIFOs, timeouts, sizes) run everywhere.
-- The planted object is built with the host compiler directly (not through cudadev) and sealed with a valid
-- trailer, so only the directory and entry checks stand between it and the victim: its constructor writes a
-- mark file when it runs.
local helper = require "spec.helper"

local sh = helper.shell_quote

local function capture(cmd)
  local p = assert(io.popen(cmd))
  local s = p:read("a")
  p:close()
  return s
end

local read, write = helper.read_file, helper.write_file

local function run(cmd) assert(os.execute(cmd), cmd) end

-- A fresh directory under /tmp (the attacker must be able to reach it), sticky and world-writable like /tmp
-- itself, owned by the victim; its real path (the messages name resolved directories).
local function base_dir()
  local d = capture("mktemp -d /tmp/cdv-trust.XXXXXX"):gsub("\n$", "")
  run("chmod 1777 " .. sh(d))
  return (capture("realpath " .. sh(d)):gsub("\n$", ""))
end

local function with_base(fn)
  return function()
    local base = base_dir()
    finally(function() os.execute("rm -rf " .. sh(base)) end)
    fn(base)
  end
end

local function exists(path) return os.execute("test -e " .. sh(path) .. " -o -L " .. sh(path)) == true end

-- The attacker: nobody, when this runs as root and setpriv works.
local AS_OTHER = "setpriv --reuid=65534 --regid=65534 --clear-groups -- "
local other_why
if capture("id -u") ~= "0\n" then
  other_why = "needs root, to plant files as a second user (nobody)"
elseif capture(AS_OTHER .. "sh -c 'id -u' 2>&1") ~= "65534\n" then
  other_why = "setpriv cannot run a command as nobody"
end

local function other_it(name, fn)
  if other_why then return pending(("%s (%s)"):format(name, other_why)) end
  return it(name, fn)
end

local function as_other(cmd) run(AS_OTHER .. "sh -c " .. sh("umask 022; " .. cmd)) end

-- The victim's kernel; each child compiles it on the cpu device, launches it and prints the values, then the
-- cpu cache's directory and the last refusal (cd.kernel_cache_stats()).
local VICTIM_SRC = 'extern "C" __global__ void k(int *x) { x[threadIdx.x] = 10 * threadIdx.x + 1; }\n'
local VICTIM = ([==[
local ok, m = pcall(cd.compile, %q, { device = "cpu" })
if not ok then return print(tostring(m)) end
local x = cd.zeros(4, "int32", { device = "cpu" })
m.k({ grid = 1, block = 4 }, x)
local s = cd.kernel_cache_stats()
print(table.concat(x:totable(), ","))
print(s.cpu_disk_dir)
print(s.disk_refused)
]==]):format(VICTIM_SRC)

-- The private directory's random part replaced by XXXXXX
local function unrandom(out) return (out:gsub("cudadev%-%w%w%w%w%w%w([\n'])", "cudadev-XXXXXX%1")) end

-- Runs the victim with env ("VAR=value ..."); returns its output, unrandom.
local function victim(env)
  return unrandom(helper.run_child(VICTIM, "timeout 120 env -u CUDADEV_CACHE " .. env))
end

-- The line a process writes to stderr, once, when its cpu objects go to the private directory priv instead of
-- the cache, because of why (NOTE [cache fallback]).
local function fallback_line(why, priv)
  return ("cudadev: %s; cpu kernels are compiled in '%s' for this process (removed at its end)\n"):format(why, priv)
end

-- What the victim prints when its object is compiled into dir and nothing is refused (or refused: the text);
-- fell: why it fell back to dir, the private directory (the refusal when not given).
local function victim_out(dir, refused, fell)
  fell = fell or refused
  return ("%s1,11,21,31\n%s\n%s\nexit 0\n"):format(fell and fallback_line(fell, dir) or "", dir, refused or "nil")
end

-- The name the victim's object has in any cache directory (the key does not depend on the directory).
local victim_key
local function key()
  if not victim_key then
    local d = base_dir()
    helper.run_child(VICTIM, "env -u CUDADEV_CACHE CUDADEV_CACHE_DIR=" .. sh(d))
    victim_key = capture("ls " .. sh(d .. "/cpu")):match("(%x+%.so)")
    os.execute("rm -rf " .. sh(d))
  end
  return assert(victim_key)
end

-- The planted object: a shared object whose constructor writes $CDV_PLANTED_MARK, with a valid trailer
-- (magic, size, the first 16 bytes of its SHA-256), made once; its path.
local planted_path
local function planted()
  if planted_path then return planted_path end
  local d = base_dir()
  write(d .. "/planted.cpp", [[
#include <cstdio>
#include <cstdlib>
__attribute__((constructor)) static void planted() {
  if (const char *p = getenv("CDV_PLANTED_MARK")) { FILE *f = fopen(p, "w"); if (f) { fputs("ran", f); fclose(f); } }
}
]])
  run(("c++ -shared -fPIC -o %s %s"):format(sh(d .. "/planted.so"), sh(d .. "/planted.cpp")))
  local bytes = read(d .. "/planted.so")
  local hex = capture("sha256sum " .. sh(d .. "/planted.so")):sub(1, 32)
  local hash = hex:gsub("%x%x", function(h) return string.char(tonumber(h, 16)) end)
  write(d .. "/planted.sealed", bytes .. "CDVCPU01" .. string.pack("<I8", #bytes) .. hash)
  run("chmod 0644 " .. sh(d .. "/planted.sealed"))
  planted_path = d .. "/planted.sealed"
  return planted_path
end

-- the victim's environment: its mark file, a private temporary directory, and more
local function env(base, more)
  return ("CDV_PLANTED_MARK=%s TMPDIR=%s %s"):format(sh(base .. "/mark"), sh(base .. "/tmp"), more)
end

local function private(base) return base .. "/tmp/cudadev-XXXXXX" end

local function prepare(base)
  run(("mkdir -m 0700 %s"):format(sh(base .. "/tmp")))
  return planted(), key()
end

describe("the cpu kernel cache trusts no directory another user could write", function()
  other_it("a cache directory planted by another user is not used: its object's constructor never runs",
    with_base(function(base)
      local obj, k = prepare(base)
      as_other(("mkdir -p %s && cp %s %s"):format(sh(base .. "/cache/cpu"), sh(obj), sh(base .. "/cache/cpu/" .. k)))
      assert.are.equal(victim_out(private(base), ("the kernel cache directory '%s/cache/cpu' is not used: '%s/cache' "
        .. "above it is owned by another user (uid 65534)"):format(base, base)),
        victim(env(base, "CUDADEV_CACHE_DIR=" .. sh(base .. "/cache"))))
      assert.is_false(exists(base .. "/mark"))
    end))

  other_it("a cache directory owned by another user is not used, even in a directory of the victim",
    with_base(function(base)
      local obj, k = prepare(base)
      run(("mkdir -m 1777 %s"):format(sh(base .. "/cache")))
      as_other(("mkdir -m 0755 %s && cp %s %s"):format(sh(base .. "/cache/cpu"), sh(obj), sh(base .. "/cache/cpu/" .. k)))
      assert.are.equal(victim_out(private(base), ("the kernel cache directory '%s/cache/cpu' is not used: it is owned "
        .. "by another user (uid 65534)"):format(base)), victim(env(base, "CUDADEV_CACHE_DIR=" .. sh(base .. "/cache"))))
      assert.is_false(exists(base .. "/mark"))
    end))

  other_it("without HOME the objects go to a fresh private directory, never to a name another user can take first",
    with_base(function(base)
      local obj, k = prepare(base)
      -- the name the fallback had (a guessable one per uid), planted under the victim's TMPDIR
      local uid = capture("id -u"):gsub("\n", "")
      run(("mkdir -m 1777 %s && chmod 1777 %s"):format(sh(base .. "/tmp2"), sh(base .. "/tmp2")))
      as_other(("mkdir -p %s && cp %s %s"):format(sh(base .. "/tmp2/cudadev-" .. uid .. "/cpu"), sh(obj),
        sh(base .. "/tmp2/cudadev-" .. uid .. "/cpu/" .. k)))
      local out = victim(("CDV_PLANTED_MARK=%s TMPDIR=%s env -u HOME -u XDG_CACHE_HOME -u CUDADEV_CACHE_DIR"):format(
        sh(base .. "/mark"), sh(base .. "/tmp2")))
      assert.are.equal(victim_out(base .. "/tmp2/cudadev-XXXXXX", nil, "no kernel cache directory (CUDADEV_CACHE_DIR, "
        .. "XDG_CACHE_HOME and HOME are unset)"), out)
      assert.is_false(exists(base .. "/mark"))
      -- and the private directory went with the process
      assert.are.equal("cudadev-" .. uid .. "\n", capture("ls " .. sh(base .. "/tmp2")))
    end))

  it("a cache directory writable by others is not used", with_base(function(base)
    local obj, k = prepare(base)
    run(("mkdir -p %s && chmod 0777 %s && cp %s %s"):format(sh(base .. "/cache/cpu"), sh(base .. "/cache/cpu"), sh(obj),
      sh(base .. "/cache/cpu/" .. k)))
    assert.are.equal(victim_out(private(base), ("the kernel cache directory '%s/cache/cpu' is not used: it is writable "
      .. "by other users (mode 0777)"):format(base)), victim(env(base, "CUDADEV_CACHE_DIR=" .. sh(base .. "/cache"))))
    assert.is_false(exists(base .. "/mark"))
  end))

  it("a cache directory under a directory writable by others (not sticky) is not used", with_base(function(base)
    local obj, k = prepare(base)
    run(("mkdir -p -m 0700 %s && chmod 0777 %s && cp %s %s"):format(sh(base .. "/cache/cpu"), sh(base .. "/cache"),
      sh(obj), sh(base .. "/cache/cpu/" .. k)))
    assert.are.equal(victim_out(private(base), ("the kernel cache directory '%s/cache/cpu' is not used: '%s/cache' "
      .. "above it is writable by other users (mode 0777)"):format(base, base)),
      victim(env(base, "CUDADEV_CACHE_DIR=" .. sh(base .. "/cache"))))
    assert.is_false(exists(base .. "/mark"))
  end))

  it("a cache directory that is a symbolic link is not followed", with_base(function(base)
    local obj, k = prepare(base)
    run(("mkdir -m 0700 %s %s && cp %s %s && ln -s %s %s"):format(sh(base .. "/cache"), sh(base .. "/elsewhere"), sh(obj),
      sh(base .. "/elsewhere/" .. k), sh(base .. "/elsewhere"), sh(base .. "/cache/cpu")))
    assert.are.equal(victim_out(private(base), ("the kernel cache directory '%s/cache/cpu' is not used: it is a "
      .. "symbolic link"):format(base)), victim(env(base, "CUDADEV_CACHE_DIR=" .. sh(base .. "/cache"))))
    assert.is_false(exists(base .. "/mark"))
  end))

  it("the directory it creates is 0700, and it is used", with_base(function(base)
    prepare(base)
    assert.are.equal(victim_out(base .. "/cache/cpu"), victim(env(base, "CUDADEV_CACHE_DIR=" .. sh(base .. "/cache"))))
    assert.are.equal("700\n700\n", capture(("stat -c %%a %s %s"):format(sh(base .. "/cache"), sh(base .. "/cache/cpu"))))
  end))
end)

-- The victim run as `nobody` (an ordinary user, for whom a mode is a mode) from a script it can read; its
-- output, unrandom.
local function other_victim(base, code, env)
  local path = base .. "/victim.lua"
  write(path, ("package.cpath = %q\nlocal cd = require 'cudadev'\n"):format(package.cpath) .. code)
  run("chmod 0644 " .. sh(path))
  return unrandom(capture(("timeout 120 %senv -u CUDADEV_CACHE %s lua5.4 %s 2>&1; echo \"exit $?\""):format(AS_OTHER,
    env, sh(path))))
end

-- NOTE [cache fallback] (src/cpu_compile.c): every way a cache directory can be of no use ends in the private
-- directory, said once on stderr.
describe("a cpu kernel cache directory that cannot be used", function()
  other_it("because the user cannot write it (its own, mode 0555): the objects go to the private directory",
    with_base(function(base)
      as_other(("mkdir -m 0700 %s %s && mkdir -m 0555 %s"):format(sh(base .. "/tmp"), sh(base .. "/cache"),
        sh(base .. "/cache/cpu")))
      -- a second kernel: the line is written once a process
      local out = other_victim(base, VICTIM .. "cd.compile('extern \"C\" __global__ void k2() {}', { device = 'cpu' })\n"
        .. "print(cd.kernel_cache_stats().cpu_disk_dir)\n", "TMPDIR=" .. sh(base .. "/tmp") .. " CUDADEV_CACHE_DIR="
        .. sh(base .. "/cache"))
      local priv = base .. "/tmp/cudadev-XXXXXX"
      assert.are.equal(fallback_line(("the kernel cache directory '%s/cache/cpu' is not writable: Permission denied")
        :format(base), priv) .. ("1,11,21,31\n%s\nnil\n%s\nexit 0\n"):format(priv, priv), out)
    end))

  it("because a directory above it cannot be created (a file is in the way)", with_base(function(base)
    prepare(base)
    write(base .. "/file", "")
    assert.are.equal(victim_out(private(base), nil, ("cannot create the kernel cache directory '%s/file/cache/cpu': "
      .. "Not a directory"):format(base)), victim(env(base, "CUDADEV_CACHE_DIR=" .. sh(base .. "/file/cache"))))
  end))

  -- a full file system: a 16 KiB tmpfs, mounted in a user and mount namespace of the child's own (unshare -rm)
  local full_why = os.execute("unshare -rm true 2>/dev/null") ~= true and "unshare -rm does not run here"
  local full_it = full_why and function(name) pending(("%s (%s)"):format(name, full_why)) end or it
  full_it("because its file system is full (ENOSPC)", with_base(function(base)
    prepare(base)
    run(("mkdir -m 0700 %s"):format(sh(base .. "/cache")))
    local out = victim(("unshare -rm sh -c %s"):format(sh(("mount -t tmpfs -o size=16k,mode=0700 tmpfs %s && exec env %s "
      .. "lua5.4 \"$1\""):format(sh(base .. "/cache"), env(base, "CUDADEV_CACHE_DIR=" .. sh(base .. "/cache"))))))
    local tmp = out:match("cannot write the sources into '" .. base:gsub("%p", "%%%0") .. "/cache/cpu/(tmp%-%x+%-%w+)'")
    assert.is_truthy(tmp, out)
    assert.are.equal(victim_out(private(base), nil, ("cannot write the sources into '%s/cache/cpu/%s': No space left on "
      .. "device"):format(base, tmp)), out)
  end))

  -- a directory nobody can make anything in, root included (sysfs): the build in it fails, the private one works
  local sys_why = not exists("/sys/devices/system/cpu") and "no /sys/devices/system/cpu (sysfs) here"
  local sys_it = sys_why and function(name) pending(("%s (%s)"):format(name, sys_why)) end or it
  sys_it("because nothing can be created in it, whoever runs (sysfs)", with_base(function(base)
    prepare(base)
    local out = victim(env(base, "CUDADEV_CACHE_DIR=/sys/devices/system"))
    local line, rest = out:match("^(cudadev: [^\n]*)\n(.*)$")
    assert.is_truthy(line, out)
    -- as root the build fails (EPERM); as another user the directory is refused (root's)
    assert.is_truthy(line:find("'/sys/devices/system/cpu'", 1, true), line)
    assert.are.equal(fallback_line(line:match("^cudadev: (.*); cpu kernels"), private(base)), line .. "\n")
    assert.are.equal(("1,11,21,31\n%s\n"):format(private(base)), rest:match("^(1,11,21,31\n[^\n]*\n)"))
    assert.are.equal("exit 0\n", rest:match("exit %d+\n$"))
  end))
end)

describe("a cpu kernel cache entry", function()
  local function entry_case(name, make, after)
    it(name, with_base(function(base)
      local obj, k = prepare(base)
      local entry = base .. "/cache/cpu/" .. k
      run(("mkdir -p -m 0700 %s"):format(sh(base .. "/cache/cpu")))
      make(entry, obj)
      assert.are.equal(after and after:format(entry) or victim_out(base .. "/cache/cpu"),
        victim(env(base, "CUDADEV_CACHE_DIR=" .. sh(base .. "/cache"))))
      assert.is_false(exists(base .. "/mark"))
      if not after then   -- written again, as a regular file of its own
        assert.is_true(os.execute(("test -f %s -a ! -L %s"):format(sh(entry), sh(entry))) == true)
      end
    end))
  end

  entry_case("that is a symbolic link is not followed: the object is compiled again and replaces it",
    function(entry, obj) run(("ln -s %s %s"):format(sh(obj), sh(entry))) end)
  entry_case("that is a FIFO does not block: the object is compiled again and replaces it",
    function(entry) run("mkfifo " .. sh(entry)) end)
  entry_case("that is a directory is a clear error, not a hang", function(entry) run("mkdir " .. sh(entry)) end,
    "cpu.compile: EISDIR: cannot write the kernel cache entry '%s': Is a directory\nexit 0\n")
end)

-- The FIFO includes and the timeout: a child that compiles SRC with include_paths = { $INC } and prints the
-- error (or "ok") and whether it took less than 30 s.
local FIFO_CHILD = [==[
local t = os.time()
local ok, err = pcall(cd.compile, os.getenv("SRC"), { device = "cpu", include_paths = { os.getenv("INC") } })
print(ok and "ok" or tostring(err))
print(os.time() - t < 30)
]==]

local function fifo_child(base, src, more)
  return helper.run_child(FIFO_CHILD, ("timeout 120 env -u CUDADEV_CACHE CUDADEV_CACHE_DIR=%s INC=%s SRC=%s %s"):format(
    sh(base .. "/cache"), sh(base .. "/inc"), sh(src), more or ""))
end

describe("a compile", function()
  -- NOTE [failed compiles] (src/cpu_compile.c)
  it("that failed is remembered: the same broken source again does not run the host compiler", with_base(function(base)
    write(base .. "/cxx", '#!/bin/sh\ncase "$*" in *kernel.cpp*) echo run >> "$CXX_RUNS";; esac\nexec c++ "$@"\n')
    run("chmod 0755 " .. sh(base .. "/cxx"))
    local out = helper.run_child([==[
local function runs() local f = io.open(os.getenv("CXX_RUNS")) local n = f and #f:read("a") // 4 or 0 if f then f:close() end return n end
local bad = 'extern "C" __global__ void k(int *x) { x[0] = nope; }'
local ok1, e1 = pcall(cd.compile, bad, { device = "cpu" })
local n1 = runs()
local ok2, e2 = pcall(cd.compile, bad, { device = "cpu" })
print(ok1, ok2, n1 > 0, runs() == n1, tostring(e1) == tostring(e2), e2.name, e1.log == e2.log and #e2.log > 0)
-- another name is another message: compiled again; so is another source
pcall(cd.compile, bad, { device = "cpu", name = "other.cu" })
local n2 = runs()
print(n2 > n1, pcall(cd.compile, 'extern "C" __global__ void k(int *x) { x[0] = 1; }', { device = "cpu" }), runs() > n2)
cd.clear_kernel_cache()   -- forgets failures too
pcall(cd.compile, bad, { device = "cpu" })
print(runs() > n2 + 1)
]==], ("env -u CUDADEV_CACHE CUDADEV_CACHE_DIR=%s CUDADEV_CXX=%s CXX_RUNS=%s"):format(sh(base .. "/cache"),
      sh(base .. "/cxx"), sh(base .. "/runs")))
    assert.are.equal("false\tfalse\ttrue\ttrue\ttrue\tHOST_COMPILER_ERROR\ttrue\ntrue\ttrue\ttrue\ntrue\nexit 0\n",
      (out:gsub("Module%b()", "M")))
  end))

  it("that includes a FIFO is refused before the host compiler opens it", with_base(function(base)
    run(("mkdir %s && mkfifo %s"):format(sh(base .. "/inc"), sh(base .. "/inc/fifo.h")))
    assert.are.equal(("cpu.compile: NVRTC_ERROR_COMPILATION: the included file '%s/inc/fifo.h' is not a regular file "
      .. "(a FIFO or a device would block the compiler or never end)\ntrue\nexit 0\n"):format(base),
      fifo_child(base, '#include "fifo.h"\n__global__ void k(int *x) {}\n'))
  end))

  it("that includes a device is refused before the host compiler opens it", with_base(function(base)
    run(("mkdir %s"):format(sh(base .. "/inc")))
    assert.are.equal("cpu.compile: NVRTC_ERROR_COMPILATION: the included file '/dev/zero' is not a regular file "
      .. "(a FIFO or a device would block the compiler or never end)\ntrue\nexit 0\n",
      fifo_child(base, '#include "/dev/zero"\n__global__ void k(int *x) {}\n'))
  end))

  it("that runs past CUDADEV_COMPILE_TIMEOUT is ended: the host compiler's process group is killed",
    with_base(function(base)
      -- the include scan cannot see a name a macro gives, so the compiler opens the FIFO and blocks
      run(("mkdir %s && mkfifo %s"):format(sh(base .. "/inc"), sh(base .. "/inc/fifo.h")))
      assert.are.equal("c++: ETIMEDOUT: compilation of kernel.cu timed out after 1 s: the host C++ compiler was killed "
        .. "(CUDADEV_COMPILE_TIMEOUT sets the limit in seconds, 0 for none)\ntrue\nexit 0\n",
        fifo_child(base, '#define F "fifo.h"\n#include F\n__global__ void k(int *x) {}\n', "CUDADEV_COMPILE_TIMEOUT=1"))
      -- nobody reads the FIFO any more: opening it for writing blocks until `timeout` ends it (status 124)
      assert.are.equal("124\n", capture(("timeout 2 sh -c 'exec 3>%s'; echo $?"):format(sh(base .. "/inc/fifo.h"))))
    end))

  it("refuses a CUDADEV_COMPILE_TIMEOUT that is not a number of seconds", with_base(function(base)
    for _, v in ipairs { "soon", "-1", "nan", "5s" } do
      assert.are.equal(("cpu.compile: EINVAL: CUDADEV_COMPILE_TIMEOUT must be a number of seconds (0 for no limit), "
        .. "not '%s'\ntrue\nexit 0\n"):format(v),
        fifo_child(base, "__global__ void k(int *x) {}\n", "CUDADEV_COMPILE_TIMEOUT=" .. sh(v)))
    end
  end))

  it("with CUDADEV_COMPILE_TIMEOUT=0 has no limit, and a fractional one works", with_base(function(base)
    for _, v in ipairs { "0", "90.5" } do
      assert.are.equal("ok\ntrue\nexit 0\n", fifo_child(base, "__global__ void k(int *x) {}\n",
        "CUDADEV_COMPILE_TIMEOUT=" .. v))
    end
  end))
end)

describe("a cpu object over 64 MiB", function()
  it("is sealed and checked whole: it loads, and the next process uses it as it is", with_base(function(base)
    local code = [==[
      local m = cd.compile([[
        __device__ unsigned char big[65 << 20] = {7};
        extern "C" __global__ void k(int *x) { big[(65 << 20) - 1] = 9; x[0] = big[0]; x[1] = big[(65 << 20) - 1]; }
      ]], { device = "cpu" })
      local x = cd.zeros(2, "int32", { device = "cpu" })
      m.k({ grid = 1, block = 1 }, x)
      print(table.concat(x:totable(), ","))
    ]==]
    local function go() return helper.run_child(code, "env -u CUDADEV_CACHE CUDADEV_CACHE_DIR=" .. sh(base .. "/cache")) end
    assert.are.equal("7,9\nexit 0\n", go())
    local inode = capture("stat -c '%i %s' " .. sh(base .. "/cache/cpu") .. "/*.so")
    assert.is_true(tonumber(inode:match(" (%d+)")) > 64 * 2 ^ 20)
    assert.are.equal("7,9\nexit 0\n", go())
    assert.are.equal(inode, capture("stat -c '%i %s' " .. sh(base .. "/cache/cpu") .. "/*.so"))
  end))
end)

-- The CUDA cache (NOTE [cuda kernel cache]) follows the same rule; a compile for sm_90 needs NVRTC only.
local CUDA_CHILD = [==[
local ok, m = pcall(cd.with_device, "cpu", cd.compile, 'extern "C" __global__ void k(int *x) { x[0] = 1; }',
  { arch = "sm_90" })
local s = cd.kernel_cache_stats()
print(ok and table.concat(m.kernels, ",") or tostring(m))
print(("hits=%d misses=%d writes=%d errors=%d"):format(s.disk_hits, s.disk_misses, s.disk_writes, s.disk_errors))
print(s.disk_last_error)
]==]

local function cuda_child(base)
  return helper.run_child(CUDA_CHILD, "timeout 120 env -u CUDADEV_CACHE CUDADEV_CACHE_DIR=" .. sh(base .. "/cache"))
end

local nvrtc_why
do
  local base = base_dir()
  local out = cuda_child(base)
  os.execute("rm -rf " .. sh(base))
  if not out:find("^k\n") then nvrtc_why = "no NVRTC: " .. out:match("^[^\n]*") end
end

local function nvrtc_it(name, fn)
  if nvrtc_why then return pending(("%s (%s)"):format(name, nvrtc_why)) end
  return it(name, fn)
end

describe("the CUDA kernel cache", function()
  nvrtc_it("skips a directory writable by others: the compile works, the refusal is counted", with_base(function(base)
    run(("mkdir -p %s && chmod 0777 %s"):format(sh(base .. "/cache/cuda"), sh(base .. "/cache/cuda")))
    assert.are.equal(("k\nhits=0 misses=0 writes=0 errors=1\nthe kernel cache directory '%s/cache/cuda' is not used: "
      .. "it is writable by other users (mode 0777)\nexit 0\n"):format(base), cuda_child(base))
    assert.are.equal("", capture("ls -A " .. sh(base .. "/cache/cuda")))
  end))

  for _, c in ipairs {
    { "a FIFO", "mkfifo %s", "it is not a regular file" },
    { "a symbolic link", "ln -s /dev/null %s", "it is a symbolic link (not followed)" },
  } do
    nvrtc_it("reads no entry that is " .. c[1] .. ": a miss, compiled and written again", with_base(function(base)
      assert.are.equal("k\nhits=0 misses=1 writes=1 errors=0\nnil\nexit 0\n", cuda_child(base))
      local entry = base .. "/cache/cuda/" .. capture("ls " .. sh(base .. "/cache/cuda")):match("(%x+%.mod)")
      run(("rm %s && " .. c[2]):format(sh(entry), sh(entry)))
      assert.are.equal(("k\nhits=0 misses=1 writes=1 errors=1\ncannot read the kernel cache entry '%s': %s\nexit 0\n")
        :format(entry, c[3]), cuda_child(base))
      assert.are.equal("k\nhits=1 misses=0 writes=0 errors=0\nnil\nexit 0\n", cuda_child(base))
    end))
  end
end)

describe("cd._selftest.cache_trust", function()
  it("judges directories and entries in this process as the children above see them", function()
    local cd = require "cudadev"
    local d = capture("mktemp -d /tmp/cdv-trust-self.XXXXXX"):gsub("\n$", "")
    d = capture("realpath " .. sh(d)):gsub("\n$", "")
    finally(function() os.execute("rm -rf " .. sh(d)) end)
    assert.are.same({ true }, { cd._selftest.cache_trust(d) })
  end)
end)
