-- cudadev.repl: the interactive loop of luacuda, and its pieces for anyone who builds another front end.
--
--   local repl = require "cudadev.repl"
--   repl.pretty(v [, opts])        -> text: tables nested and truncated, cudadev objects by their tostring
--   repl.format_error(err [, tb])  -> text: a cudadev.Error with its compile log and the source lines it cites
--   repl.complete(word [, before]) -> sorted candidates for tab completion of globals, fields and methods
--   repl.fields                    -> the field names of each cudadev type (what completion offers after '.')
--   repl.banner([version_line])    -> the start-up banner: version, devices, peer access
--   repl.doc(name_or_value)        -> the manual's entry for a name or a function (nil, why when none)
--   repl.rewrite_locals(src)       -> src with its top-level `local`s made REPL locals, and their names
--   repl.run([host])               -> the loop; every field of host is optional (doc/repl-install.md)
--
-- The loop works as lua.c's: a line is first tried as an expression (`return <line>`), then as a statement;
-- an incomplete statement continues with the ">> " prompt; results are printed (here, pretty). Lines
-- starting with ':' are commands (:help lists them).
local cd = require "cudadev"

local M = {}

local fmt, concat, sort = string.format, table.concat, table.sort

-- ---------------------------------------------------------------- field names, for completion
-- Each type's metatable lists its fields (mt.fields, read at build time from the C code that answers them:
-- NOTE [class fields] in src/args.c) and its methods (mt.methods), so completion reads the metatables and a new
-- name needs no list here. repl.fields is made from them: {Device = {...}, Array = {...}, ...}.
M.fields = {}

-- v's fields: its metatable's, or, where that is hidden (a sandbox: NOTE [protected metatables]), repl.fields'
local function class_fields(v)
  local mt = getmetatable(v)
  local f = type(mt) == "table" and rawget(mt, "fields")
  return type(f) == "table" and f or M.fields[cd.type(v)] or {}
end

do   -- the metatables are in the registry under their __name ("cudadev.Array"); cd.Error is Error's
  local registry = debug and debug.getregistry and debug.getregistry() or { ["cudadev.Error"] = cd.Error }
  for name, mt in next, registry do
    local ty = type(name) == "string" and name:match("^cudadev%.(%u%w*)$")
    local f = ty and type(mt) == "table" and rawget(mt, "fields")
    if type(f) == "table" then M.fields[ty] = table.move(f, 1, #f, 1, {}) end
  end
end

-- ---------------------------------------------------------------- pretty printing
local defaults = { depth = 4, items = 40, width = 80, string_max = 120, indent = "  " }

local keywords = {}
for w in ([[and break do else elseif end false for function goto if in local nil not or repeat return then
  true until while]]):gmatch("%a+") do keywords[w] = true end

local function is_identifier(k)
  return type(k) == "string" and k:match("^[%a_][%w_]*$") ~= nil and not keywords[k]
end

local escapes = { ["\n"] = "\\n", ["\t"] = "\\t", ["\r"] = "\\r", ['"'] = '\\"', ["\\"] = "\\\\", ["\0"] = "\\0" }

local function quote(s, max)
  local cut = max and #s > max
  local t = cut and s:sub(1, max) or s
  t = t:gsub('[%c"\\]', function(c) return escapes[c] or fmt("\\%d", c:byte()) end)
  return '"' .. t .. '"' .. (cut and fmt("...(%d bytes)", #s) or "")
end

-- the text of a value that is not a plain table: cudadev objects print themselves (Arrays with values)
local function atom(v, o)
  local t = type(v)
  if t == "string" then return quote(v, o.string_max) end
  if t == "number" or t == "boolean" or t == "nil" then return tostring(v) end
  local ok, s = pcall(tostring, v)
  if not ok then return "<" .. t .. ": tostring failed>" end
  if cd.type(v) == "Error" then s = s:match("^[^\n]*") end   -- the first line; format_error shows the rest
  return s
end

local function sorted_keys(t)
  local n = rawlen(t)
  local keys = {}
  for k in next, t do
    if not (math.type(k) == "integer" and k >= 1 and k <= n) then keys[#keys + 1] = k end
  end
  local rank = { number = 1, string = 2 }
  sort(keys, function(a, b)
    local ta, tb = type(a), type(b)
    if ta ~= tb then return (rank[ta] or 3) < (rank[tb] or 3) end
    if ta == "number" or ta == "string" then return a < b end
    return tostring(a) < tostring(b)
  end)
  return keys, n
end

-- one table: the parts (already rendered), laid out on one line when it fits, else one part per line
local function layout(parts, more, level, o)
  if more > 0 then parts[#parts + 1] = fmt("... (%d more)", more) end
  if #parts == 0 then return "{}" end
  local flat = "{" .. concat(parts, ", ") .. "}"
  if #flat + #o.indent * level <= o.width and not flat:find("\n", 1, true) then return flat end
  local pad = o.indent:rep(level + 1)
  return "{\n" .. pad .. concat(parts, ",\n" .. pad) .. "\n" .. o.indent:rep(level) .. "}"
end

-- tables are read raw: printing never runs a table's __index or __len
local function render(v, o, level, seen)
  local mt = getmetatable(v)
  if type(v) ~= "table" or (type(mt) == "table" and rawget(mt, "__tostring")) then return atom(v, o) end
  if seen[v] then return "<cycle>" end
  if level >= o.depth then return next(v) == nil and "{}" or "{...}" end
  seen[v] = true
  local keys, n = sorted_keys(v)
  local parts, budget = {}, o.items
  for i = 1, n do
    if budget == 0 then break end
    parts[#parts + 1] = render(rawget(v, i), o, level + 1, seen)
    budget = budget - 1
  end
  for _, k in ipairs(keys) do
    if budget == 0 then break end
    local ks = is_identifier(k) and k or "[" .. render(k, o, level + 1, seen) .. "]"
    parts[#parts + 1] = ks .. " = " .. render(rawget(v, k), o, level + 1, seen)
    budget = budget - 1
  end
  seen[v] = nil
  return layout(parts, n + #keys - #parts, level, o)
end

-- An Array prints on one line (array.c); a long 2-d or higher one is broken after each top-level row.
local function break_rows(s, width)
  if #s <= width or not s:find("{{", 1, true) then return s end
  local depth, out, start = 0, {}, 1
  for i = 1, #s do
    local c = s:sub(i, i)
    if c == "{" then depth = depth + 1 elseif c == "}" then depth = depth - 1 end
    if c == "," and depth == 1 then
      out[#out + 1] = s:sub(start, i)
      start = i + 2
    end
  end
  out[#out + 1] = s:sub(start)
  return concat(out, "\n  ")
end

function M.pretty(v, opts)
  local o = setmetatable(opts or {}, { __index = defaults })
  if cd.type(v) == "Array" then return break_rows(atom(v, o), o.width) end
  return render(v, o, 0, {})
end

-- ---------------------------------------------------------------- errors
-- Diagnostic lines of NVRTC ("kernel.cu(3): error: ...") and of host compilers ("kernel.cu:3:5: error: ...")
local function cited_line(l)
  local file, n = l:match("^(.-)%((%d+)%): ")
  if not file then file, n = l:match("^(.-):(%d+):%d+: ") end
  if not file then file, n = l:match("^(.-):(%d+): ") end
  return file, tonumber(n)
end

local function source_lines(src)
  local lines = {}
  for l in (src .. "\n"):gmatch("([^\n]*)\n") do lines[#lines + 1] = l end
  return lines
end

local function trim(s) return (s:gsub("^%s+", ""):gsub("%s+$", "")) end

-- A compile error: the header, the options, then the log; after each diagnostic that cites a line of the
-- compiled source, that line (unless the log already quotes it on the next line, as recent NVRTC does).
local function format_compile_log(err, out)
  local src = rawget(err, "source")
  local name = rawget(err, "source_name") or "kernel.cu"
  local lines = type(src) == "string" and source_lines(src) or nil
  local log = source_lines(rawget(err, "log"))
  while #log > 0 and log[#log]:match("^%s*$") do log[#log] = nil end
  for i, l in ipairs(log) do
    out[#out + 1] = l
    local file, n = cited_line(l)
    if lines and n and lines[n] and (file == name or file:sub(-#name - 1) == "/" .. name) then
      local nextl = log[i + 1]
      if not (nextl and trim(lines[n]) ~= "" and trim(nextl) == trim(lines[n])) then
        out[#out + 1] = fmt("  %4d | %s", n, lines[n])
      end
    end
  end
end

-- The frames of a traceback down to the REPL machinery (host.call), less cudadev's own Lua frames (with the
-- error() call above them and the tail calls below: NOTE [error positions] put the message at the user's
-- line); nil when they say nothing the message does not: no Lua function of the user's besides the line typed
-- at the prompt.
local function user_traceback(tb)
  if type(tb) ~= "string" then return nil end
  local keep, useful, after_internal = {}, false, false
  for l in tb:gmatch("[^\n]+") do
    if l:find("cudadev.repl", 1, true) or l:match("^%s*%[C%]: in field 'call'") or l:match("^%s*%[C%]: in %?$") then
      break
    end
    local internal = l:match("^%s*%[cudadev%] cudadev%.") ~= nil
    if internal and #keep > 0 and keep[#keep]:match("^%s*%[C%]: in function 'error'$") then keep[#keep] = nil end
    if internal or (after_internal and l:match("^%s*%(%.%.%.tail calls%.%.%.%)$")) then
      after_internal = internal
      goto next
    end
    after_internal = false
    keep[#keep + 1] = l
    if #keep > 1 and not (l:match("^%s*stdin:%d+: in main chunk$") or l:match("^%s*%[C%]:")) then useful = true end
    ::next::
  end
  return useful and concat(keep, "\n") or nil
end

function M.format_error(err, tb)
  local out = {}
  if cd.type(err) == "Error" then
    out[1] = (tostring(err):match("^[^\n]*"))
    local opts = rawget(err, "options")
    if type(opts) == "table" and #opts > 0 then out[#out + 1] = "options: " .. concat(opts, " ") end
    if type(rawget(err, "log")) == "string" and rawget(err, "log") ~= "" then format_compile_log(err, out) end
  elseif type(err) == "string" then
    out[1] = err
  else
    out[1] = "(error object is a " .. type(err) .. " value) " .. M.pretty(err)
  end
  local t = user_traceback(tb)
  if t then out[#out + 1] = t end
  return concat(out, "\n")
end

-- ---------------------------------------------------------------- completion
local function safe_index(v, k)
  local ok, r = pcall(function() return v[k] end)
  if ok then return r end
end

-- the names offered after `v.` (colon: methods only)
local function members(v, colon)
  local names, seen = {}, {}
  local function add(k, val)
    if type(k) == "string" and k:match("^[%a_][%w_]*$") and not seen[k] and (not colon or type(val) == "function") then
      seen[k] = true
      names[#names + 1] = k
    end
  end
  local t = type(v)
  if t == "string" then v = string end
  if type(v) == "table" then
    local hops, tv = 0, v
    while type(tv) == "table" and hops < 8 do   -- a table and the tables its __index leads to (classes)
      for k, val in next, tv do add(k, val) end
      local mt = getmetatable(tv)
      tv = type(mt) == "table" and rawget(mt, "__index") or nil
      hops = hops + 1
    end
    if cd.type(v) and not colon then   -- a cudadev.Error is a table: the fields it may have too
      for _, k in ipairs(class_fields(v)) do add(k, true) end
    end
  elseif t == "userdata" then
    local mt = getmetatable(v)
    if type(mt) == "table" then
      if type(rawget(mt, "methods")) == "table" then
        for k, val in next, rawget(mt, "methods") do add(k, val) end
      end
      if type(rawget(mt, "__index")) == "table" then
        for k, val in next, rawget(mt, "__index") do add(k, val) end
      end
    end
    local ty = cd.type(v)
    if not colon and ty then
      for _, k in ipairs(class_fields(v)) do add(k, true) end
      if ty == "Module" then   -- m.saxpy is m:get("saxpy")
        local ks = safe_index(v, "kernels")
        for _, k in ipairs(type(ks) == "table" and ks or {}) do add(k, true) end
      end
    end
  end
  return names
end

-- complete(word [, before]): word is what precedes the cursor back to a space or operator (it keeps '.'
-- and ':'); before is the rest of the line, in front of it. Returns full words.
function M.complete(word, before, env)
  env = env or _G
  if before and (select(2, before:gsub('"', "")) % 2 == 1 or select(2, before:gsub("'", "")) % 2 == 1) then
    return {}   -- inside a string
  end
  local path, sep, partial = word:match("^(.-)([.:])([%w_]*)$")
  local out = {}
  if not path then
    partial = word
    if not partial:match("^[%a_][%w_]*$") and partial ~= "" then return out end
    for k in pairs(keywords) do if k:sub(1, #partial) == partial then out[#out + 1] = k end end
    for _, k in ipairs(members(env)) do
      if k:sub(1, #partial) == partial and (partial:sub(1, 1) == "_" or k:sub(1, 1) ~= "_") then out[#out + 1] = k end
    end
  else
    if path:find(":", 1, true) or not path:match("^[%a_][%w_]*[%w_.]*$") or path:find("..", 1, true) then
      return out
    end
    local v = env
    for k in path:gmatch("[^.]+") do
      v = safe_index(v, k)
      if v == nil then return out end
    end
    -- Every candidate keeps the separator typed: after '.' fields and methods (a.fill is the function), after ':'
    -- methods. Line editing replaces the word with the candidates' common prefix, so a mix of x.shape and x:shl_
    -- would have cut x.sh back to x.
    for _, k in ipairs(members(v, sep == ":")) do
      if k:sub(1, #partial) == partial and (partial:sub(1, 1) == "_" or k:sub(1, 1) ~= "_") then
        out[#out + 1] = path .. sep .. k
      end
    end
  end
  sort(out)
  local uniq = {}
  for i, k in ipairs(out) do if k ~= out[i - 1] then uniq[#uniq + 1] = k end end
  return uniq
end

-- ---------------------------------------------------------------- locals that persist
-- NOTE [REPL locals]: each entry is a chunk of its own, so `local x = 1` would be gone on the next line. As
-- IPython keeps every name typed at its prompt, the loop rewrites the entry's top-level `local` statements
-- (outside any function, do, if, loop) into assignments to globals before compiling it: `local x, y = 1, 2`
-- becomes `x, y = 1, 2`, `local n` becomes `n = nil`, `local function f` becomes `function f` (f still sees
-- itself), `<const>` is dropped. `<close>` keeps its `local`, since closing at the end of the entry is what it
-- asks for. Strings and comments are skipped, so a "local" inside them is left alone.
local block_open = { ["function"] = 1, ["do"] = 1, ["repeat"] = 1, ["if"] = 1, ["end"] = -1, ["until"] = -1 }

-- the end of the string, long string or comment starting at i, or nil when none starts there
local function skip_literal(src, i)
  local c = src:sub(i, i)
  if c == "-" and src:sub(i + 1, i + 1) == "-" then
    local eq = src:match("^%[(=*)%[", i + 2)
    local e = eq and select(2, src:find("]" .. eq .. "]", i + 2, true)) or (not eq and src:find("\n", i, true))
    return e or #src
  elseif c == '"' or c == "'" then
    local j = i + 1
    while j <= #src do
      local d = src:sub(j, j)
      if d == "\\" then j = j + 2 elseif d == c or d == "\n" then break else j = j + 1 end
    end
    return j
  elseif c == "[" then
    local eq = src:match("^%[(=*)%[", i)
    if eq then return select(2, src:find("]" .. eq .. "]", i, true)) or #src end
  end
end

-- the local statement at i (the word `local`): its replacement text, where it ends, and its names
local function rewrite_local(src, i)
  local k = i + 5 + #src:match("^%s*", i + 5)
  local fname = src:match("^function%s+([%a_][%w_]*)", k)
  if fname then return "", k, { fname } end
  if not src:match("^[%a_]", k) then return nil end
  local names = {}
  repeat
    local nm = src:match("^[%a_][%w_]*", k)
    if not nm then return nil end
    names[#names + 1] = nm
    k = k + #nm
    local attr = src:match("^%s*<%s*([%a_][%w_]*)%s*>", k)
    if attr == "close" then return nil end
    if attr then k = k + #src:match("^%s*<[^>]*>", k) end
    local comma = src:match("^%s*,%s*", k)
    if comma then k = k + #comma end
  until not comma
  return concat(names, ", ") .. (src:match("^%s*=", k) and "" or " = nil"), k, names
end

function M.rewrite_locals(src)
  local out, names, depth, last, i = {}, {}, 0, 1, 1
  while i <= #src do
    local e = skip_literal(src, i)
    if e then
      i = e + 1
    elseif src:match("^[%a_]", i) and not src:sub(i - 1, i - 1):match("[%w_.:]") then
      local w = src:match("^[%w_]+", i)
      local text, stop, declared
      if w == "local" and depth == 0 then text, stop, declared = rewrite_local(src, i) end
      if text then
        out[#out + 1] = src:sub(last, i - 1) .. text
        for _, nm in ipairs(declared) do names[#names + 1] = nm end
        last, i = stop, stop
      else
        depth = depth + (block_open[w] or 0)
        i = i + #w
      end
    else
      i = i + 1
    end
  end
  out[#out + 1] = src:sub(last)
  return concat(out), names
end

-- ---------------------------------------------------------------- the manual: help() and :doc
-- NOTE [REPL help]: the manual's entries are its `### \`name\`` headings (doc/*.md, built into the library:
-- cd._doc_files). An entry is its heading and what follows, up to the next heading of level 1 to 3.
local doc_index
local function entries()
  if doc_index then return doc_index end
  doc_index = {}
  local files = cd._doc_files and cd._doc_files() or {}
  local names = {}
  for name in pairs(files) do names[#names + 1] = name end
  sort(names)
  for _, file in ipairs(names) do
    local cur
    for line in (files[file] .. "\n"):gmatch("([^\n]*)\n") do
      local title = line:match("^###%s+`([^`]+)`")
      if title or line:match("^#%s") or line:match("^##%s") or line:match("^###%s") then
        cur = nil
        if title then
          cur = { title = title, key = title:match("^[^%s(%[]+"), file = file, lines = { line } }
          doc_index[#doc_index + 1] = cur
        end
      elseif cur then
        cur.lines[#cur.lines + 1] = line
      end
    end
  end
  -- A heading with no text of its own shares a neighbour's: the one above that names the same function
  -- (`### \`a:sum\`` then `### \`cd.sum\``), else the next heading's (a group of headings over one text).
  local function text_of(e) for i = 2, #e.lines do if e.lines[i]:match("%S") then return true end end end
  local function last(e) return e.key:match("[.:]([%w_]+)$") or e.key end
  for i, e in ipairs(doc_index) do
    if not text_of(e) then
      local prev, give = doc_index[i - 1], nil
      if prev and prev.file == e.file and last(prev) == last(e) and text_of(prev) then give = prev end
      for j = i + 1, #doc_index do
        if give or doc_index[j].file ~= e.file then break end
        if text_of(doc_index[j]) then give = doc_index[j] end
      end
      if give then e.lines = { e.lines[1], table.unpack(give.lines, 2) } end
    end
  end
  return doc_index
end

-- the name a function has in the module (cd.now) or among a type's methods (a:astype -> ":astype")
local function name_of(v)
  for k, f in pairs(cd) do if f == v then return "cd." .. k end end
  for _, t in ipairs({ "Array", "Stream", "Event", "Device", "Module", "Kernel", "Graph", "LaunchConfig" }) do
    local mt = debug.getregistry()["cudadev." .. t]
    local methods = type(mt) == "table" and rawget(mt, "methods")
    if type(methods) == "table" then
      for k, f in pairs(methods) do if f == v then return ":" .. k end end
    end
  end
end

-- the entries whose heading names `want`: exactly, or by its last part (astype, :astype, a:astype, now)
local function find_entries(want)
  local found, last = {}, want:match("[.:]([%w_]+)$") or want
  want = want:gsub("^cuda%.", "cd."):gsub("^cudadev%.", "cd.")
  for _, e in ipairs(entries()) do
    local key = e.key
    if key == want or key:match("[.:]([%w_]+)$") == last and (want == last or want:sub(1, 1) == ":" and key:find(want, 1, true))
       or key == last then
      found[#found + 1] = e
    end
  end
  return found
end

function M.doc(v)
  local want = type(v) == "string" and v or name_of(v)
  if want == nil then return nil, "no manual entry: help() takes a name (\"cd.zeros\") or a cudadev function" end
  want = want:gsub("%(.*$", ""):gsub("^%s+", ""):gsub("%s+$", "")
  if #entries() == 0 then return nil, "the manual (doc/*.md) was not built into this cudadev" end
  local found = find_entries(want)
  if #found == 0 then return nil, ("no manual entry for '%s'"):format(want) end
  local out = {}
  for i, e in ipairs(found) do
    local lines = e.lines
    local n = #lines
    while n > 1 and lines[n]:match("^%s*$") do n = n - 1 end
    out[i] = concat(lines, "\n", 1, n) .. "\n(" .. e.file .. ")"
  end
  return concat(out, "\n\n")
end

-- ---------------------------------------------------------------- banner and commands
local function gib(n) return fmt("%.1f GiB", n / 2^30) end

local function device_line(d, default)
  local mark = default and d == default and "  (default)" or ""
  if d.is_cpu then return fmt('  %-9s %s%s', '"cpu"', d.name, mark) end
  return fmt('  %-9s %s  %s  sm_%d  %d SMs%s', '"' .. d.alias .. '"', d.name, gib(d.total_memory), d.arch,
    d.sm_count, mark)
end

-- The peer-access lines of cd.detect() (cd.peer_access_summary, shared with it), one line when access is full.
local function peer_lines(out)
  if not cd.peer_access_summary then return end
  local ok, lines = pcall(cd.peer_access_summary)
  if not ok then
    out[#out + 1] = "  peer access: " .. tostring(lines)
  elseif #lines == 2 then
    out[#out + 1] = "  CUDA peer access: " .. lines[2]:gsub("^%s+", "")
  else
    for _, l in ipairs(lines) do out[#out + 1] = (l:gsub("^   ", "  ")) end
  end
end

-- The banner: what cd.detect() reports, compact. Says why CUDA is missing when it is.
function M.banner(version)
  local out = {}
  if version then out[#out + 1] = version end
  local ok, why = cd.is_available()
  local okd, default = pcall(cd.get_device)
  for _, d in ipairs(cd.devices()) do out[#out + 1] = device_line(d, okd and default or nil) end
  if not ok then   -- the reason without its parenthesised details: "no CUDA driver: tried libcuda.so.1, libcuda.so"
    out[#out + 1] = "  CUDA not available: " .. tostring(why):match("^[^\n]*"):gsub("%s*%b()", "")
  end
  if not okd then out[#out + 1] = "  default device: " .. tostring(default) end
  peer_lines(out)
  out[#out + 1] = "Type :help for commands, Ctrl-D to leave."
  return concat(out, "\n")
end

local function fmt_time(s)
  if s < 1e-3 then return fmt("%.1f us", s * 1e6) end
  if s < 1 then return fmt("%.3f ms", s * 1e3) end
  return fmt("%.3f s", s)
end

local function bytes(n)
  local units, u = { "B", "KiB", "MiB", "GiB", "TiB" }, 1
  while n >= 1024 and u < #units do n, u = n / 1024, u + 1 end
  return u == 1 and fmt("%d B", n) or fmt("%.1f %s", n, units[u])
end

local help = [[
Commands:
  :devices        the devices, the default one and its current stream
  :mem            free/total memory per device, and cudadev's allocation statistics
  :time <code>    run an expression or statement; wall time, and GPU time on a CUDA device (events on the
                  current stream)
  :doc <name>     the manual's entry for a name (:doc cd.zeros, :doc astype); help(f) for a function
  :sync           wait for every device (Ctrl-C stops waiting; the GPU work keeps running)
  :help           this text
  :quit           leave (Ctrl-D too)
Expressions print their values; an incomplete statement continues on the next line (>>).
Tab completes globals, fields and methods (cuda.dev<Tab>, a:<Tab>). A `local` typed at the prompt is kept
for the lines after it. Ctrl-C stops a running command, a loop
or a wait for the GPU; at the prompt it drops the line. The module is the global `cuda`.]]

local commands = {}

function commands.help(_, ctx)
  local h = ctx.host
  ctx.print(help .. "\nLine editing: " .. tostring(h.line_editing or "none") ..
    (h.history and ("; history in " .. h.history) or ""))
end

function commands.devices(_, ctx)
  local out = {}
  local okd, default = pcall(cd.get_device)
  for _, d in ipairs(cd.devices()) do out[#out + 1] = device_line(d, okd and default or nil) end
  peer_lines(out)
  if okd then out[#out + 1] = fmt("  current stream: %s", tostring(cd.get_stream(default))) end
  ctx.print(concat(out, "\n"))
end

function commands.mem(_, ctx)
  local out = {}
  for _, d in ipairs(cd.devices()) do
    local ok, free, total = pcall(d.memory_info, d)
    local line = fmt("  %-9s ", '"' .. d.alias .. '"') ..
      (not ok and "memory_info failed: " .. tostring(free) or
       d.is_cpu and fmt("host memory %s", bytes(total)) or fmt("free %s of %s", bytes(free), bytes(total)))
    if cd.memory_stats then
      local oks, st = pcall(cd.memory_stats, d)
      if oks and type(st) == "table" then
        line = line .. fmt("; arrays: %s allocated (peak %s), %s reserved, %d blocks", bytes(st.allocated or 0),
          bytes(st.max_allocated or 0), bytes(st.reserved or 0), st.active_blocks or 0)
      end
    end
    out[#out + 1] = line
  end
  ctx.print(concat(out, "\n"))
end

function commands.doc(arg, ctx)
  if arg == "" then return ctx.print("usage: :doc <name> (for example :doc cd.zeros)") end
  local text, why = M.doc(arg)
  ctx.print(text or why)
end

function commands.sync(_, ctx)
  local t0 = ctx.host.now()
  if ctx.eval_fn(cd.synchronize) then ctx.print("synchronized in " .. fmt_time(ctx.host.now() - t0)) end
end

function commands.time(arg, ctx)
  if arg == "" then return ctx.print("usage: :time <expression or statement>") end
  local f, err = ctx.compile(arg)
  if not f then return ctx.print(err) end
  local dev = cd.get_device()
  local stream = cd.get_stream(dev)
  local e0, e1 = cd.event(dev), cd.event(dev)
  e0:record(stream)
  local t0 = ctx.host.now()
  local r = table.pack(ctx.eval_fn(f))
  if not r[1] then return end
  e1:record(stream)
  if not ctx.eval_fn(e1.synchronize, e1) then return end
  local wall = ctx.host.now() - t0
  ctx.show(table.unpack(r, 2, r.n))
  if dev.is_cpu then   -- the cpu device's events time the host: no second, "gpu" figure
    return ctx.print(fmt("wall %s (on cpu)", fmt_time(wall)))
  end
  local okg, gpu = pcall(e0.elapsed, e0, e1)
  ctx.print(fmt("wall %s, gpu %s (events on %s)", fmt_time(wall), okg and fmt_time(gpu / 1e3) or "?",
    tostring(stream)))
end

commands.quit = function(_, ctx) ctx.quit = true end
commands.q, commands.exit = commands.quit, commands.quit
commands.h, commands["?"] = commands.help, commands.help

-- ---------------------------------------------------------------- the loop
-- A line as a chunk: first as an expression (lua.c's addreturn), then as a statement; `=expr` as in 5.3.
local function compile(src)
  if src:sub(1, 1) == "=" then src = "return " .. src:sub(2) end
  local f = load("return " .. src, "=stdin")
  if f then return f end
  return load((M.rewrite_locals(src)), "=stdin")   -- NOTE [REPL locals]
end

local function incomplete(err) return err and err:sub(-5) == "<eof>" end

-- What a host leaves out (doc/repl-install.md): lines from io.read, no history or completion, plain pcall.
local function plain_readline(prompt)
  io.stdout:write(prompt)
  io.stdout:flush()
  return io.read("l")
end

local host_defaults = {
  readline = plain_readline,
  add_history = function() end,
  call = function(handler, f, ...) return xpcall(f, handler, ...) end,
  now = function() return cd.now() end,
}

function M.run(host)
  host = setmetatable(host or {}, { __index = host_defaults })
  local function out(s)
    io.stdout:write(s, "\n")
    io.stdout:flush()
  end
  local ctx = { host = host, print = out, compile = compile }
  local function handler(e) return { err = e, tb = debug.traceback(nil, 2) } end
  -- runs f(...) the way typed code runs: Ctrl-C armed, errors printed; true and the results, or false
  function ctx.eval_fn(f, ...)
    local r = table.pack(host.call(handler, f, ...))
    if not r[1] then
      local e = r[2]
      out(M.format_error(type(e) == "table" and e.err or e, type(e) == "table" and e.tb or nil))
      return false
    end
    return table.unpack(r, 1, r.n)
  end
  local function show(...)
    local n = select("#", ...)
    if n == 0 then return end
    local parts = {}
    for i = 1, n do
      local v = select(i, ...)
      parts[i] = cd.type(v) == "Error" and M.format_error(v) or M.pretty(v)   -- an Error with its whole log
    end
    out(concat(parts, "\t"))
  end
  ctx.show = show

  if host.set_completer then host.set_completer(function(word, before) return M.complete(word, before) end) end
  if rawget(_G, "help") == nil then   -- help(f) / help("cd.zeros"): the manual's entry (NOTE [REPL help])
    rawset(_G, "help", function(v)
      local text, why = M.doc(v == nil and "cd" or v)
      out(text or why)
    end)
  end
  if host.banner then
    local ok, b = pcall(M.banner, not host.version_printed and host.version or nil)
    out(ok and b or ("banner: " .. tostring(b)))
  end

  while not ctx.quit do
    local line = host.readline("> ")
    if line == nil then break end                       -- end of input
    if line ~= false then
      local cmd, arg = line:match("^%s*:([%a?]%w*)%s*(.-)%s*$")
      if cmd or not line:match("%S") then host.add_history(line) end
      if cmd then
        local c = commands[cmd]
        if not c then out(fmt("unknown command ':%s' (:help lists them)", cmd))
        else
          local ok, err = pcall(c, arg, ctx)
          if not ok then out(M.format_error(err)) end
        end
      elseif line:match("%S") then
        local src = line
        local f, err = compile(src)
        while not f and incomplete(err) do                 -- lua.c's multiline: wait for the rest
          local more = host.readline(">> ")
          if more == nil or more == false then break end
          src = src .. "\n" .. more
          f, err = load((M.rewrite_locals(src)), "=stdin")
        end
        host.add_history(src)                              -- a multi-line entry is one history item
        if f then
          local ok, msg = pcall(function(...) if ... then show(select(2, ...)) end end, ctx.eval_fn(f))
          if not ok then out(M.format_error(msg)) end
        elseif err and not incomplete(err) then
          out(err)
        end
      end
    end
  end
  if not ctx.quit then io.stdout:write("\n") end
  io.stdout:flush()
end

return M
