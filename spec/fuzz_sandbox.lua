-- spec/fuzz_sandbox.lua: the fuzzer's sandboxed states (spec/fuzz.lua, issue 14). Each call runs, in a fresh
-- sandboxed lua_State that has the debug library (cd._sandbox), a script made of hostile steps drawn at random:
-- removing or replacing cudadev's record of the state and calling its finalizer by hand, emptying cudadev's
-- tables and metatables in the registry, nil'ing metatables' __gc (with and without debug), calling registry
-- metamethods with wrong values, includes and compile options that read files; between them, ordinary work. Each
-- step runs under pcall (its errors are expected); after each, the script checks that the sandbox still holds
-- (no raw address, no handle in tostring, no load_module, no cpu kernel, the quota) and raises "SANDBOX BROKEN"
-- when it does not: that, or any crash, is a finding. Steps put back what they took (a __gc, a registry entry)
-- before the state closes, so that nothing leaks under valgrind. Issue 27: steps that put the edge sizes (0, 1,
-- 2^31 - 1, 2^31, 2^31 + 1, 2^32, 2^62, 2^63 - 1) in shapes, counts, axes and indexes, and a check after every step
-- that every Array the script keeps lies inside its block (cd._inside; NOTE [arrays inside their blocks]); the
-- script returns how many edge sizes it drew and how many Arrays it checked, which the fuzzer counts.
local M = {}

local STEPS = {
  -- the record's anchor, removed from the registry (the collector finds it and puts it back)
  [==[for k, v in pairs(debug.getregistry()) do
      if type(v) == 'userdata' and getmetatable(v) == 'cudadev.StateAnchor' then debug.getregistry()[k] = nil end
    end
    collectgarbage()]==],
  -- ... replaced by another value, the original kept and put back at the end
  [==[for k, v in pairs(debug.getregistry()) do
      if type(v) == 'userdata' and getmetatable(v) == 'cudadev.StateAnchor' then
        keep[#keep + 1] = v
        debug.getregistry()[k] = ({cd.zeros(1), {}, 5, io.stdout, 'x'})[pick(5)]
        restore[#restore + 1] = function() debug.getregistry()[k] = v end
      end
    end]==],
  -- its finalizer, called by hand on anything
  [==[for _, v in pairs(debug.getregistry()) do
      if type(v) == 'userdata' and getmetatable(v) == 'cudadev.StateAnchor' then
        local gc = debug.getmetatable(v).__gc
        gc(({v, cd.zeros(1), io.stdout, 1, nil})[pick(5)])
      end
    end]==],
  -- cudadev's tables in the registry, emptied
  [==[local reg = debug.getregistry()
    reg[({'cudadev.current_streams', 'cudadev.device_values', 'cudadev.launch_keys'})[pick(3)]] = nil
    collectgarbage()]==],
  -- a type's metatable in the registry replaced for a while (a value made meanwhile gets its own back)
  [==[local reg = debug.getregistry()
    local names = {'cudadev.Array', 'cudadev.Stream', 'cudadev.Event', 'cudadev.LaunchConfig'}
    local which = pick(4)
    local name = names[which]
    local mt = reg[name]
    reg[name] = ({5, {}, 'x'})[pick(3)]
    local made = {select(2, pcall(cd.zeros, 2)), select(2, pcall(cd.stream, 'cpu')), select(2, pcall(cd.event, 'cpu')),
                  select(2, pcall(cd.launch_config, {dim = 1}))}
    reg[name] = mt
    local v = made[which]
    if type(v) == 'userdata' and debug.getmetatable(v) ~= mt then debug.setmetatable(v, mt) end]==],
  -- __gc set to nil, without the debug library (refused) and with it (put back before anything is collected)
  [==[getmetatable(cd.zeros(4)).__gc = nil]==],
  [==[local a = cd.zeros(4)
    local mt = debug.getmetatable(a)
    local gc = mt.__gc
    mt.__gc = nil
    a:fill(2)
    mt.__gc = gc]==],
  -- the metamethods of cudadev's registry metatables, called with wrong values
  [==[local vals = {1, 'x', {}, io.stdout, cd.zeros(1), cd.stream('cpu'), cd.event('cpu'), cd.device('cpu'), nil}
    for k, mt in pairs(debug.getregistry()) do
      if type(k) == 'string' and k:find('^cudadev%.') and type(mt) == 'table' then
        for name, f in pairs(mt) do
          if type(f) == 'function' and name:find('^__') then pcall(f, vals[pick(9)], vals[pick(9)]) end
        end
      end
    end]==],
  -- includes and options that would read or write files: refused before NVRTC runs
  [==[local inc = ({'"/etc/hostname"', '<../x.h>', '"a/../../b.h"', 'F', '</proc/self/environ>'})[pick(5)]
    local how = ({'#include ', '%:include ', '??=include ', '# /**/ include ', '#include_next ', '#import '})[pick(6)]
    cd.compile('#define F "/etc/passwd"\n' .. how .. inc .. '\n', {arch = 'sm_90'})]==],
  [==[cd.compile('#if __has_include("/etc/shadow")\n#endif\n', {arch = 'sm_90'})]==],
  [==[cd.compile('', {arch = 'sm_90', options = {({'--time=t', '-I/etc', '--pre-include=/etc/passwd', '--pch',
    '-include=/etc/passwd', '--jobserver-auth=0,1', '--create-pch=x'})[pick(7)]}})]==],
  [==[cd.compile('#include "a.h"\n', {arch = 'sm_90', include_paths = {({'/etc', '/', '.', '/usr/local/cuda/include/..'})[pick(4)]}})]==],
  [==[cd.compile('#include "a.h"\n', {arch = 'sm_90', headers = {['a.h'] = '#include "/etc/passwd"\n'}})]==],
  -- ordinary work in between
  [==[local a = cd.zeros(pick(64)); a:fill(1); keep[#keep + 1] = a]==],
  [==[local s = cd.stream('cpu'); cd.set_stream(s); keep[#keep + 1] = cd.launch_config{grid = 1, block = 1, stream = s}]==],
  [==[keep = {}; collectgarbage()]==],
  [==[local t = {} for j = 1, pick(200) do t[j] = cd.empty(pick(3) - 1) end]==],
  [==[cd.empty(1 << pick(24))]==],
  -- the edge sizes: matmul's product ({2^32, 0} x {0, 2^32} was a {2^32, 2^32} Array over no memory), shapes,
  -- views, reductions, ranges, random arrays, indexes and copy counts
  [==[local a, b = cd.zeros({edge(), 0}, ({'f32', 'f64'})[pick(2)]), cd.zeros({0, edge()}, ({'f32', 'f64'})[pick(2)])
    keep[#keep + 1] = a; keep[#keep + 1] = b
    keep[#keep + 1] = cd.matmul(a, b, ({nil, {transa = false}, {transa = true, transb = true}})[pick(3)])]==],
  [==[local s = {edge(), edge(), edge()}
    if pick(4) > 1 then s[pick(3)] = 0 end
    keep[#keep + 1] = ({cd.zeros, cd.empty, cd.ones})[pick(3)](s, ({'f32', 'u8', 'f64'})[pick(3)])]==],
  [==[local a = cd.zeros({edge(), 0, edge()})
    keep[#keep + 1] = a
    local v = ({function() return a:reshape({edge(), 0, -1}) end, function() return a:transpose() end,
      function() return a:slice(edge(), edge(), edge(), pick(3)) end, function() return a[edge()] end,
      function() return a:view(({'u8', 'f64', 'i16'})[pick(3)]) end, function() return a:sum({axis = pick(3) - 4}) end,
      function() return a:new_zeros({edge(), 0}) end})[pick(7)]()
    keep[#keep + 1] = v]==],
  [==[keep[#keep + 1] = ({function() return cd.arange(edge(), edge(), edge()) end,
      function() return cd.linspace(0, 1, edge()) end, function() return cd.random.uniform({edge(), edge()}) end,
      function() return cd.random.randint(0, edge(), edge()) end, function() return cd.empty(edge(), 'u8') end})[pick(5)]()]==],
  [==[local a = cd.zeros(pick(8))
    keep[#keep + 1] = a
    keep[#keep + 1] = a:slice(edge(), edge())
    a[edge()] = 1
    cd.copy(a, a, {count = edge(), dst_offset = edge(), src_offset = edge()})]==],
}

-- what must still be refused after every step
local CHECKS = [[
local E = {0, 1, 2147483647, 2147483648, 2147483649, 4294967296, 4611686018427387904, math.maxinteger}
local edges, checks = 0, 0
local function edge() edges = edges + 1 return E[pick(8)] end
-- a build without cd._inside (before issue 27) is judged by its sizes
local inside = cd._inside or function(...)
  for j = 1, select('#', ...) do
    local a = select(j, ...)
    local p = 1.0
    for _, d in ipairs(a.shape) do p = p * d end
    if p ~= a.size then return false, 'its size is not the product of its shape' end
  end
  return true
end
local function must_refuse(what, f)
  local ok = pcall(f)
  if ok then error('SANDBOX BROKEN: ' .. what .. ' was allowed', 0) end
end
local function check()
  must_refuse('a.ptr', function() return cd.zeros(1).ptr end)
  must_refuse('s.handle', function() return cd.stream('cpu').handle end)
  must_refuse('load_module', function() return cd.load_module('x') end)
  must_refuse('a cpu kernel', function() return cd.compile('', {device = 'cpu'}) end)
  must_refuse('memory beyond the quota', function() return cd.empty(1 << 22) end)
  for _, v in ipairs({cd.stream('cpu'), cd.launch_config{dim = 1, stream = cd.stream('cpu')}}) do
    if tostring(v):find('0x') then error('SANDBOX BROKEN: ' .. tostring(v), 0) end
  end
  local live = {}
  for _, v in ipairs(keep) do if cd.type(v) == 'Array' and pcall(function() return v.size end) then live[#live + 1] = v end end
  checks = checks + #live
  local ok, why = inside(table.unpack(live))
  if not ok then error('SANDBOX BROKEN: an Array describes memory it does not own: ' .. tostring(why), 0) end
end
]]

-- A function of the fuzzer's call index that makes one sandboxed call (through `call`, as every call is made);
-- count(edges, checks) is told what the script drew and checked.
function M.action(cd, r, call, fail, count)
  return function(i)
    local parts = { "local keep, restore = {}, {}\nlocal seed = " .. r.int(1 << 30) .. "\n",
                    "local function pick(n) seed = (seed * 1103515245 + 12345) % 2147483648 return seed % n + 1 end\n",
                    CHECKS }
    for _ = 1, r.range(1, 6) do
      parts[#parts + 1] = ("pcall(function()\n%s\nend)\ncheck()\n"):format(r.pick(STEPS))
    end
    parts[#parts + 1] = "for j = #restore, 1, -1 do restore[j]() end\nreturn ('held %d %d'):format(edges, checks)\n"
    local script = table.concat(parts)
    local opts = { memory_quota = 1 << 20, max_arrays = r.chance(0.5) and r.range(1, 300) or nil }
    return call(i, "cd._sandbox", function(...)
      local ok, res = cd._sandbox(...)
      if not ok and tostring(res):find("SANDBOX BROKEN", 1, true) then fail(i, res, script) end
      local edges, checks = tostring(res):match("^held (%d+) (%d+)$")
      if edges and count then count(tonumber(edges), tonumber(checks)) end
      return ok
    end, { script, opts }, 2)
  end
end

return M
