-- spec/manual.lua: what spec/05-manual_spec.lua compares: the names the manual documents (the headings of
-- doc/*.md) and the public names that exist (found by introspection of the loaded module, and by reading
-- src/cudadev.h and the getenv calls of src/ and lua/).
--
--   local manual = require "spec.manual"
--   manual.documented([files])  -> {key = {where, ...}}, receivers    (files: {path = text}; default doc/*.md)
--   manual.real()               -> {key = what}
--   manual.compare(doc, real)   -> missing {key}, extra {key = where} (sorted lists)
--   manual.slurp(path), manual.ls(glob) -> a file's text (nil when unreadable); the sorted paths a glob matches
--
-- A key is how one name reads in both: "cd.empty", "cd.random.seed", "Array:copy_from" (methods and fields
-- of a type alike), "repl.run", "C:cudadev_push_array", "ENV:CUDADEV_DEVICE".
--
-- Headings: a level-3 heading whose first `code span` is the name, as in
--   ### `cd.empty(shape [, dtype] [, opts])`     ### `a:copy_from(src [, opts])`     ### `a.dtype`
--   ### `cudadev_push_array(L, ptr, ...)`         ### `CUDADEV_DEVICE`                 ### `repl.run(host)`
-- The receivers (`a` for Array, ...) are declared in the manual itself, in a comment any doc file may hold:
--   <!-- receivers: a=Array s=Stream -->
-- Headings in other forms (`:time expr`, `luacuda -i`) are prose, not names, and are not compared.
local manual = {}

function manual.slurp(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end
local slurp = manual.slurp

function manual.ls(pattern)
  local out = {}
  local p = io.popen("ls " .. pattern .. " 2>/dev/null")
  for l in p:lines() do out[#out + 1] = l end
  p:close()
  table.sort(out)
  return out
end
local ls = manual.ls

function manual.doc_files()
  local files = {}
  for _, path in ipairs(ls("doc/*.md")) do files[path] = slurp(path) end
  return files
end

-- ---------------------------------------------------------------- the C API and the environment
-- Names declared by src/cudadev.h and src/cudadev_dlpack.h: their CUDADEV_API functions, typedefs and macros (not
-- the guards).
function manual.c_api(text)
  text = text or slurp("src/cudadev.h") .. "\n" .. (slurp("src/cudadev_dlpack.h") or "")
  local names = {}
  for decl in ("\n" .. text):gmatch("\nCUDADEV_API%s+([^;(]-)%s*%(") do names[decl:match("([%w_]+)$")] = true end
  for name in text:gmatch("typedef%s+struct%s+([%w_]+)") do names[name] = true end
  for name in text:gmatch("#define%s+([%w_]+)") do names[name] = true end
  names.CUDADEV_H, names.CUDADEV_API, names.CUDADEV_DLPACK_H = nil, nil, nil
  return names
end

local function sources()
  local files = {}
  for _, pat in ipairs({ "src/*.c", "src/*.h", "lua/cudadev/*.lua", "lua/*.lua" }) do
    for _, path in ipairs(ls(pat)) do files[path] = slurp(path) end
  end
  return files
end

-- Environment variables the code reads: the first argument, a string literal, of getenv, os.getenv and
-- helpers named for it (env_count("CUDADEV_STAGING_CHUNK")).
function manual.env_vars(files)
  local names = {}
  for _, text in pairs(files or sources()) do
    for name in text:gmatch("[%w_]*env[%w_]*%s*%(%s*\"([A-Z][A-Z0-9_]*)\"") do names[name] = true end
  end
  return names
end

-- Whether the code names an environment variable at all ("NAME" or "=NAME" as a literal): a documented
-- variable read indirectly (vars[i], name + 1) exists when this holds.
local function env_named(files, name)
  for _, text in pairs(files) do
    if text:find('"' .. name .. '"', 1, true) or text:find('"=' .. name .. '"', 1, true) then return true end
  end
  return false
end

-- ---------------------------------------------------------------- the Lua side
-- The fields of each type that C answers in its __index function (strcmp(k, "name")), by metatable name:
-- a file's `luaL_newmetatable(L, CDV_X)` names the type whose __index is set next.
function manual.c_fields(files)
  files = files or sources()
  local tnames = {}
  for macro, name in (files["src/cdv.h"] or ""):gmatch("#define%s+(CDV_[%w_]+)%s+\"(cudadev%.[%w_]+)\"") do
    tnames[macro] = name
  end
  local fields = {}
  for _, text in pairs(files) do
    local index_of = {}   -- function name -> metatable name
    local current, pending, old_style
    for line in text:gmatch("[^\n]+") do
      local made = line:match("luaL_newmetatable%(L,%s*([%w_]+)%)")
      if made then current, old_style = made, true end
      local fn = line:match("cdv_set_index%(L,%s*[^,]+,%s*([%w_]+)%)") or line:match("\"__index\",%s*([%w_]+)")
      -- NOTE [class registration]: cdv_new_class(L, tname, meta, methods, index); meta (listing "__index"
      -- for a type without methods) comes on the lines before it
      local class, _, index = line:match("cdv_new_class%(L,%s*([%w_\"%.]+),%s*([%w_]+),%s*[%w_]+,%s*([%w_]+)%)")
      if class then
        current, old_style = class:gsub('"', ""), false
        if index ~= "NULL" then fn = index elseif pending then fn, pending = pending, nil end
      elseif fn and not old_style and line:match("\"__index\"") then
        pending, fn = fn, nil
      end
      if fn and current then index_of[fn] = tnames[current] or current end
    end
    for fn, tname in pairs(index_of) do
      local body = ("\n" .. text):match("\nstatic int " .. fn .. "%(lua_State %*L%)%s*(%b{})")
      if body then
        fields[tname] = fields[tname] or {}
        for k in body:gmatch("strcmp%(%s*[%w_]+%s*,%s*\"([%w_]+)\"%s*%)") do fields[tname][k] = true end
      end
    end
  end
  return fields
end

-- The keys of a cudadev.Error (a table): those of a failed cpu compile, which carries every field.
local function error_fields(cd)
  local ok, err = pcall(cd.compile, "this is not C++", { device = "cpu", name = "manual.cu" })
  local names = {}
  if not ok and type(err) == "table" then
    for k in pairs(err) do names[k] = true end
  end
  return names
end

-- Tables of functions are namespaces whose members are names of their own (cd.random.seed); a table with
-- __name (cd.Error, a metatable) or without functions (data) is one name.
local function is_namespace(t)
  if rawget(t, "__name") ~= nil then return false end
  for _, v in pairs(t) do if type(v) == "function" then return true end end
  return false
end

local function walk(prefix, t, out, seen)
  seen[t] = true
  for k, v in pairs(t) do
    if type(k) == "string" and k:sub(1, 1) ~= "_" then
      local key = prefix .. "." .. k
      if type(v) == "table" and is_namespace(v) and not seen[v] then
        walk(key, v, out, seen)
      else
        out[key] = type(v)
      end
    end
  end
end

-- {key = what} for every public name that exists now.
function manual.real()
  local cd = require "cudadev"
  local out = {}
  walk("cd", cd, out, {})
  local okr, repl = pcall(require, "cudadev.repl")
  if okr and type(repl) == "table" then
    for k, v in pairs(repl) do
      if type(k) == "string" and k:sub(1, 1) ~= "_" then out["repl." .. k] = type(v) end
    end
  end
  local files = sources()
  local fields = manual.c_fields(files)
  local reg = debug.getregistry()
  for name, mt in pairs(reg) do
    if type(name) == "string" and name:match("^cudadev%.%u") and type(mt) == "table" then
      local short = name:match("^cudadev%.(.*)$")
      local members = {}
      if type(rawget(mt, "methods")) == "table" then
        for k in pairs(mt.methods) do members[k] = "method" end
      end
      for k in pairs(fields[name] or {}) do members[k] = members[k] or "field" end
      if name == "cudadev.Error" then
        for k in pairs(error_fields(cd)) do members[k] = "field" end
      end
      for k, what in pairs(members) do
        -- private names start with "_"; protocol methods with "__" (a:__dlpack) are public
        if k:sub(1, 1) ~= "_" or k:sub(1, 2) == "__" then out[short .. ":" .. k] = what end
      end
      if next(members) == nil and rawget(mt, "__index") ~= nil then
        out[short .. ":?"] = "a type with __index whose members this spec cannot list"
      end
    end
  end
  for k in pairs(manual.c_api()) do out["C:" .. k] = "C API" end
  for k in pairs(manual.env_vars(files)) do out["ENV:" .. k] = "environment variable" end
  return out, files
end

-- ---------------------------------------------------------------- the manual's side
-- "a=Array s=Stream" from every <!-- receivers: ... --> comment
local function receivers(files)
  local r = {}
  for _, text in pairs(files) do
    for list in text:gmatch("<!%-%-%s*receivers:(.-)%-%->") do
      for var, ty in list:gmatch("([%a_][%w_]*)%s*=%s*([%a_][%w_]*)") do r[var] = ty end
    end
  end
  return r
end

-- The key a heading's name stands for, or nil for prose headings.
local function heading_key(name, recv, c_names)
  local path = name:match("^(cd%.[%a_][%w_%.]*)")
  if path then return (path:gsub("%.$", "")) end
  local rk = name:match("^repl%.([%a_][%w_]*)")
  if rk then return "repl." .. rk end
  local var, member = name:match("^([%a_][%w_]*)[:%.]([%a_][%w_]*)")
  if var and recv[var] then return recv[var] .. ":" .. member end
  local c = name:match("^([%a_][%w_]*)")
  if c and (c_names[c] or c:match("^cudadev_") or c == "luaopen_cudadev") then return "C:" .. c end
  if name:match("^[A-Z][A-Z0-9_]*$") then return "ENV:" .. name end
  return nil
end

-- {key = {"doc/x.md:12", ...}} for every heading that names something, and the receivers.
function manual.documented(files)
  files = files or manual.doc_files()
  local recv = receivers(files)
  local c_names = manual.c_api()
  local doc = {}
  for path, text in pairs(files) do
    local n = 0
    for line in (text .. "\n"):gmatch("([^\n]*)\n") do
      n = n + 1
      local name = line:match("^###%s+`([^`]+)`")
      local key = name and heading_key(name, recv, c_names)
      if key then
        doc[key] = doc[key] or {}
        table.insert(doc[key], path .. ":" .. n)
      end
    end
  end
  return doc, recv
end

-- missing: real names without a heading; extra: headings naming nothing real ({key, where}).
function manual.compare(doc, real, files)
  local missing, extra = {}, {}
  for k in pairs(real) do
    if not doc[k] then missing[#missing + 1] = k end
  end
  for k, where in pairs(doc) do
    -- a namespace (cd.random) may have a heading of its own
    local namespace = false
    for r in pairs(real) do
      if r:sub(1, #k + 1) == k .. "." then namespace = true break end
    end
    local env = k:match("^ENV:(.*)$")
    if not real[k] and not namespace and not (env and files and env_named(files, env)) then
      extra[#extra + 1] = k .. " (" .. table.concat(where, ", ") .. ")"
    end
  end
  table.sort(missing)
  table.sort(extra)
  return missing, extra
end

return manual
