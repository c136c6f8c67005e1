-- Installing, as a C host and a Lua user do (issue 16; doc/repl-install.md): build/ installed into a scratch
-- prefix (cmake --install), then a tiny host built against it with pkg-config and with find_package(cudadev);
-- and `luarocks make` into a scratch tree. Run by `make test` in the suite pass only (not under ASan or
-- valgrind: it tests packaging). Pending, with the reason, where build/, a compiler, pkg-config, the Lua
-- library or luarocks is missing.
local helper = require "spec.helper"
local cd = require "cudadev"

local sh, exists = helper.shell_quote, helper.file_exists
local root = io.popen("pwd"):read("l")

local function ok_cmd(cmd) return os.execute(cmd .. " >/dev/null 2>&1") == true end

-- runs a shell command; its output and whether it succeeded
local function run(cmd)
  local p = io.popen("(" .. cmd .. ") 2>&1")
  local out = p:read("a")
  return out, p:close() == true
end

local function write(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end

local function scratch()
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p " .. sh(dir)))
  return dir
end

-- The installed files are used as a user's machine uses them: Lua 5.4's headers where the system keeps them, and
-- no versioned module path that a host's environment puts first (a GPU host with Lua unpacked under /tmp has
-- neither).
local system_lua = exists("/usr/include/lua5.4/lua.h") and os.getenv("LUA_CPATH_5_4") == nil
local have_build = exists(root .. "/build/CMakeCache.txt") and exists(root .. "/build/luacuda") and system_lua
local have_cc = ok_cmd("command -v cc")
local have_pkgconfig = ok_cmd("command -v pkg-config") and ok_cmd("pkg-config --exists lua5.4")
local have_luarocks = ok_cmd("command -v luarocks")

local function pending_unless(cond, reason, name, fn)
  if not cond then return pending(("%s (%s)"):format(name, reason)) end
  return it(name, fn)
end

-- A host that embeds Lua and cudadev: runs a line of Lua with the module as `cd`.
local HOST_C = [[
#include <stdio.h>
#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>
#include <cudadev.h>
int main(void) {
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  luaL_requiref(L, "cudadev", luaopen_cudadev, 0);
  lua_setglobal(L, "cd");
  int rc = luaL_dostring(L, "local a = cd.full(3, 2, 'f32', {device = 'cpu'}) "
                            "print('host', cd.version, a[1] + a[3], require('cudadev') == cd)");
  if (rc != LUA_OK) fprintf(stderr, "%s\n", lua_tostring(L, -1));
  lua_close(L);
  return rc;
}
]]

describe("installing", function()
  local prefix
  setup(function()
    if have_build then
      prefix = scratch()
      local out, ok = run(("cmake --install %s --prefix %s"):format(sh(root .. "/build"), sh(prefix)))
      assert(ok, out)
    end
  end)
  teardown(function() if prefix then os.execute("rm -rf " .. sh(prefix)) end end)

  local expected = "host\t" .. cd.version .. "\t4.0\ttrue\n"

  pending_unless(have_build, "build/ was not built (make build), or Lua 5.4 is not installed system-wide",
    "make install's layout: luacuda, the module, and the files for C hosts", function()
      for _, f in ipairs({ "bin/luacuda", "lib/lua/5.4/cudadev.so", "lib/libcudadev.a", "include/cudadev.h",
                           "include/cudadev_dlpack.h", "lib/pkgconfig/cudadev.pc",
                           "lib/cmake/cudadev/cudadevConfig.cmake" }) do
        assert(exists(prefix .. "/" .. f), f .. " is not installed")
      end
      local out = run(("cd / && %s -e %s"):format(sh(prefix .. "/bin/luacuda"), sh("print(cuda.version)")))
      assert.are.equal(cd.version .. "\n", out)
      out = run(("cd / && LUA_CPATH=%s lua5.4 -e %s"):format(sh(prefix .. "/lib/lua/5.4/?.so"),
        sh("print(require('cudadev').version)")))
      assert.are.equal(cd.version .. "\n", out)
    end)

  pending_unless(have_build and have_cc and have_pkgconfig, "needs build/, cc, pkg-config and lua5.4.pc",
    "pkg-config --cflags --libs cudadev compiles and links a host", function()
      local dir = scratch()
      write(dir .. "/host.c", HOST_C)
      local flags, ok = run(("PKG_CONFIG_PATH=%s pkg-config --cflags --libs cudadev"):format(sh(prefix .. "/lib/pkgconfig")))
      assert(ok, flags)
      assert.truthy(flags:find("-lcudadev", 1, true), flags)
      assert.truthy(flags:find("lua5.4", 1, true), flags)   -- Lua's own flags come with it
      local out, built = run(("cd %s && cc host.c -o host %s && ./host"):format(sh(dir), flags:gsub("\n", "")))
      os.execute("rm -rf " .. sh(dir))
      assert(built, out)
      assert.are.equal(expected, out)
    end)

  pending_unless(have_build and have_cc, "needs build/, cc and Lua 5.4 installed system-wide",
    "find_package(cudadev CONFIG REQUIRED) gives the imported target cudadev::cudadev", function()
      local dir = scratch()
      write(dir .. "/host.c", HOST_C)
      write(dir .. "/CMakeLists.txt", [[
cmake_minimum_required(VERSION 3.21)
project(host C)
find_package(cudadev CONFIG REQUIRED)
add_executable(host host.c)
target_link_libraries(host PRIVATE cudadev::cudadev)
]])
      local out, built = run(("cd %s && cmake -S . -B b -DCMAKE_PREFIX_PATH=%s >/dev/null && cmake --build b >/dev/null && b/host")
        :format(sh(dir), sh(prefix)))
      os.execute("rm -rf " .. sh(dir))
      assert(built, out)
      assert.are.equal(expected, out)
    end)

  pending_unless(have_luarocks, "luarocks is not installed: apt-get install luarocks",
    "luarocks --lua-version=5.4 make installs the module and luacuda into a tree", function()
      local tree = scratch()
      local lr = ("luarocks --lua-version=5.4 --tree=%s"):format(sh(tree))
      local out, ok = run(("cd %s && CMAKE_BUILD_PARALLEL_LEVEL=%d %s make rockspec/cudadev-scm-1.rockspec")
        :format(sh(root), 4, lr))
      assert(ok, out)
      local show = run(lr .. " show cudadev")
      assert.truthy(show:find("cudadev scm-1", 1, true), show)
      -- clean paths: the module where require finds it, luacuda in the tree's bin, nothing else
      local files = run(("cd %s && find . -type f -path './lib/lua/*' -o -type f -path './bin/*'"):format(sh(tree)))
      local list = {}
      for l in files:gmatch("[^\n]+") do list[#list + 1] = l end
      table.sort(list)
      assert.are.same({ "./bin/luacuda", "./lib/lua/5.4/cudadev.so" }, list)
      out = run(("cd / && LUA_CPATH=%s lua5.4 -e %s"):format(sh(tree .. "/lib/lua/5.4/?.so"),
        sh("print(require('cudadev').version)")))
      local lc = run(("cd / && %s -e %s"):format(sh(tree .. "/bin/luacuda"), sh("print(cuda.version)")))
      os.execute("rm -rf " .. sh(tree))
      assert.are.equal(cd.version .. "\n", out)
      assert.are.equal(cd.version .. "\n", lc)
    end)
end)
