-- cd.fuse(fn): a Lua function over arrays becomes one generated kernel (CuPy's cupy.fuse, PyTorch's torch.compile
-- for elementwise code). Built into the library; run at open with the module table, the Array metatable and the
-- parts' shared internals.
--
-- NOTE [fuse]: the first call for each combination of argument dtypes, ranks and Lua-number kinds runs fn with
-- stand-ins: tables whose operators, comparison methods, reductions and the elementwise functions of the module
-- (which hand stand-ins here: NOTE [operation plans] in ops.lua) record what fn computes instead of computing it.
-- Each recorded operation carries the plan the unfused operation would have (its dtypes and C code), so the fused
-- kernel's answers are the unfused operators', intermediate roundings included: an intermediate is kept in its
-- dtype's C type, as the unfused array would hold it. The trace becomes the body of one elementwise kernel (all the
-- array results, written in one pass), and a trailing reduction a reduction kernel whose map is that body, so
-- ((x - y) ^ 2):sum() reads x and y once and writes nothing but its partials. The kernels are generated kernels like
-- the operators' (memory and disk caches, every device). Lua numbers given as arguments are kernel parameters
-- (a new value costs nothing); Lua arithmetic between them, or on a whole reduction's result, is replayed in Lua at
-- each call. What the kernels cannot express with the unfused answers (results of different shapes, a reduction
-- of broadcast inputs, a Lua integer that changes which comparison code a plan chose, an exponent argument that
-- becomes 2 or stops being 2: NOTE [square power]) runs fn unfused, the same
-- answers at the unfused cost. What cannot be traced at all is an error at fn's line that does it. The kernels are
-- compiled with --fmad=false: a product and a sum in one kernel would otherwise become one fused multiply-add
-- (NVRTC does it by default, and so does g++ for the cpu device), rounding once where the unfused operators round
-- twice; memory-bound, the kernels lose nothing by it.
local cd, array_mt, internal = ...

local fmt, concat, unpack = string.format, table.concat, table.unpack
local raise, typename = internal.raise, internal.typename

local O   -- internal.ops: ops.lua runs after this file
local function ops()
  O = O or internal.ops
  return O
end

local ST = { __name = "cd.fuse stand-in (cd.fuse traces elementwise operations only)" }
internal.fuse_mt = ST

local trace   -- the trace under way: {nodes = {}, uses = {}} (one at a time: a fused call inside it is inlined)

local function stand_in(node) return setmetatable(node, ST) end
local function is_stand_in(v) return getmetatable(v) == ST end
-- an operand that is an array while tracing: an argument's stand-in or an operation's
local function arr(v) return is_stand_in(v) and (v.kind == "in" or v.kind == "op") end
-- a Lua value while tracing: a number or boolean, a Lua-number argument's stand-in, Lua arithmetic of them, or a
-- whole reduction's result
local function numlike(v)
  local t = type(v)
  return t == "number" or t == "boolean" or (is_stand_in(v) and (v.kind == "num" or (v.kind == "red" and v.full)))
end
local function value_of(v) return is_stand_in(v) and v.value or v end

local function not_traced(what) raise("cd.fuse: " .. what) end

local function tracing()
  if trace == nil then not_traced("a stand-in kept after its fused function's trace was used") end
  return trace
end

local function outside_array()
  not_traced("an Array that is not an argument of the fused function (an upvalue or a global) cannot be fused; " ..
    "pass it as an argument")
end

-- A scalar operand of an operation: a kernel parameter of the dtype the plan gives it (NOTE [fuse]).
local function scalar_use(v, dtype, r, exact, fname)
  local uses = tracing().uses
  local u = { src = v, dtype = dtype, r = r, exact = exact, fname = fname,
              fits = ops().scalar_fits(value_of(v), r), name = "s" .. (#uses + 1) }
  uses[#uses + 1] = u
  return u.name
end

-- The C name of an operand: an array's element, an operation's value, or a scalar parameter.
local function operand(v, dtype, r, exact, fname)
  if is_stand_in(v) and v.kind == "in" then return "a" .. v.index end
  if is_stand_in(v) and v.kind == "op" then return "t" .. v.id end
  return scalar_use(v, dtype, r, exact, fname)
end

local function ndim_of(...)
  local n = 0
  for i = 1, select("#", ...) do
    local v = select(i, ...)
    if arr(v) then n = math.max(n, v.ndim) end
  end
  return n
end

-- the arguments (indices) an operation's operands read, joined
local function deps_of(...)
  local d = {}
  for i = 1, select("#", ...) do
    local v = select(i, ...)
    if arr(v) then for k in pairs(v.deps) do d[k] = true end end
  end
  return d
end

-- Records an operation: its value v<id> in its calculation type (RC), kept as t<id> in its dtype's C type as the
-- unfused array would hold it; raw names its operands x_, y_ (c_, x_, y_ for where) as the plan's code does.
local function record(res, rc, raw, pre, value, ...)
  local DT = ops().DT
  local nodes = tracing().nodes
  local id = #nodes + 1
  local reads = {}
  for i = 1, select("#", ...) do
    local v = select(i, ...)
    if is_stand_in(v) and v.kind == "op" then reads[#reads + 1] = v end
  end
  local decl = {}
  for i, name in ipairs(raw) do decl[i] = fmt("const auto %s = %s;", name[1], name[2]) end
  local code = fmt("  %s v%d;\n  { %s %s v%d = %s; }\n  const %s t%d = (%s)v%d;", rc, id, concat(decl, " "), pre, id,
    value, DT[res].ctype, id, DT[res].ctype, id)
  local node = stand_in({ kind = "op", id = id, dtype = res, ndim = ndim_of(...), deps = deps_of(...), code = code,
                          rc = rc, reads = reads })
  nodes[id] = node
  return node
end

local function check_operands(fname, ...)
  for i = 1, select("#", ...) do
    local v = select(i, ...)
    if ops().is_array(v) then outside_array() end
    if is_stand_in(v) and v.kind == "red" then
      not_traced(fmt("%s: the result of a reduction can only be returned, or used in Lua arithmetic when it is a " ..
        "number; an elementwise operation on it is a second pass: call the fused function for it", fname))
    end
  end
end

-- x OP y with a stand-in among them (ops.lua's binary() hands it here)
function internal.fuse_binary(op, x, y, out, stream, fname)
  if out ~= nil or stream ~= nil then
    not_traced(fname .. ": out= and stream= are not traced; give them to the fused function's call")
  end
  check_operands(fname, x, y)
  local O = ops()
  local xv, yv = arr(x) and x or value_of(x), arr(y) and y or value_of(y)
  local p = O.plan_binary(op, xv, yv, fname, arr)
  -- a scalar out of r's range changes the plan's code where the operation computes in another dtype (true
  -- division, arctan2, hypot take it in their float) as where it compares exactly: such a call runs unfused
  local exact = op.exact_scalars or p.cdt ~= p.r
  local xs = operand(x, p.xdt, p.r, exact, fname)
  local ys = operand(y, p.ydt, p.r, exact, fname)
  -- a Lua-number argument as an exponent: the plan is a square (NOTE [square power] in ops.lua) or pow while
  -- it is 2 or not, checked at each call
  if op.name == "pow" and O.DT[p.cdt].kind == "f" and is_stand_in(y) and y.kind == "num" then
    trace.uses[#trace.uses].square = p.square
  end
  return record(p.res, O.DT[p.res].calc, { { "x_", xs }, { "y_", ys } }, p.pre, p.value, x, y)
end

-- a unary function of a stand-in (ops.lua's unary())
function internal.fuse_unary(name, spec, x, out, stream)
  if out ~= nil or stream ~= nil then
    not_traced(name .. ": out= and stream= are not traced; give them to the fused function's call")
  end
  check_operands(name, x)
  if not arr(x) then
    raise(fmt("bad argument #1 to '%s' (Array expected, got %s)", name, type(value_of(x))))
  end
  local O = ops()
  local p = O.plan_unary(name, spec, x.dtype)
  return record(p.res, O.DT[p.res].calc, { { "x_", operand(x) } }, p.pre, p.value, x)
end

-- cd.where(c, x, y) with a stand-in among them
function internal.fuse_where(c, x, y, opts)
  if opts ~= nil then not_traced("where: options are not traced; give out= to the fused function's call") end
  check_operands("where", c, x, y)
  if not arr(c) then raise(fmt("bad argument #1 to 'where' (Array expected, got %s)", typename(value_of(c)))) end
  local O = ops()
  local xv, yv = arr(x) and x or value_of(x), arr(y) and y or value_of(y)
  local p = O.plan_where(c, xv, yv, arr)
  local function use(v) return operand(v, p.res, p.res, false, "where") end
  return record(p.res, O.DT[p.res].ctype, { { "c_", operand(c) }, { "x_", use(x) }, { "y_", use(y) } }, "", p.value,
    c, x, y)
end

-- Lua arithmetic of Lua values while tracing, replayed at each call (NOTE [fuse])
local LUA_OPS = {
  add = function(a, b) return a + b end, sub = function(a, b) return a - b end,
  mul = function(a, b) return a * b end, div = function(a, b) return a / b end,
  mod = function(a, b) return a % b end, pow = function(a, b) return a ^ b end,
  floordiv = function(a, b) return a // b end, band = function(a, b) return a & b end,
  bor = function(a, b) return a | b end, bxor = function(a, b) return a ~ b end,
  shl = function(a, b) return a << b end, shr = function(a, b) return a >> b end,
}

local function eval(v, vals)
  if not is_stand_in(v) then return v end
  return v.eval(vals)
end

local function lua_arith(f, a, b)
  return stand_in({ kind = "num", value = f(value_of(a), value_of(b)), operands = { a, b },
                    eval = function(vals) return f(eval(a, vals), eval(b, vals)) end })
end

-- The operators of the stand-ins: an operation when an array takes part, Lua arithmetic otherwise.
for key, mm in pairs({ add = "__add", sub = "__sub", mul = "__mul", div = "__div", floordiv = "__idiv",
                       mod = "__mod", pow = "__pow", band = "__band", bor = "__bor", bxor = "__bxor",
                       shl = "__shl", shr = "__shr" }) do
  ST[mm] = function(x, y)
    if numlike(x) and numlike(y) then return lua_arith(LUA_OPS[key], x, y) end
    local op = ops().BIN[key]
    return internal.fuse_binary(op, x, y, nil, nil, "operator " .. op.sym)
  end
end
ST.__unm = function(x)
  if numlike(x) then return lua_arith(function(a) return -a end, x, 0) end
  return internal.fuse_unary("negative", ops().MATH.negative, x)
end
ST.__bnot = function(x)
  if numlike(x) then return lua_arith(function(a) return ~a end, x, 0) end
  if ops().DT[x.dtype].kind == "f" then raise("operator ~: bitwise not takes integer or bool arrays, not " .. x.dtype) end
  return internal.fuse_unary("invert", { result = function(d) return d end,
    expr = function(_, _, d) return d == "bool" and "!x" or "~x" end }, x)
end
ST.__eq = function() not_traced("== of a traced Array is Lua's identity, not traced: compare with x:eq(y)") end
ST.__lt = function() not_traced("< of a traced Array is not traced: compare with x:lt(y), which gives a bool array") end
ST.__le = function() not_traced("<= of a traced Array is not traced: compare with x:le(y), which gives a bool array") end
ST.__len = function() not_traced("# of a traced Array: its size is not known while tracing") end
ST.__concat = function() not_traced("a traced value used as a string: it has no value while tracing") end
ST.__tostring = function() not_traced("a traced value used as a string: it has no value while tracing") end
ST.__call = function() not_traced("a traced value called as a function") end
ST.__newindex = function() not_traced("element assignment to a traced Array: cd.fuse traces elementwise operations") end

-- The stand-ins' methods: comparisons, abs and the reductions.
local METHODS = {}
for _, key in ipairs({ "eq", "ne", "lt", "le", "gt", "ge" }) do
  METHODS[key] = function(a, b, opts)
    return internal.fuse_binary(ops().BIN[key], a, b, opts and opts.out, opts and opts.stream, key)
  end
end
METHODS.abs = function(a, opts)
  return internal.fuse_unary("abs", ops().MATH.abs, a, opts and opts.out, opts and opts.stream)
end

-- x:sum([axis | {axis=, keepdims=}]) and the other reductions that fuse (NOTE [fuse])
for _, name in ipairs({ "sum", "prod", "mean", "max", "min" }) do
  METHODS[name] = function(a, v)
    check_operands(name, a)
    if not arr(a) then raise(fmt("calling '%s' on bad self (Array expected, got %s)", name, typename(value_of(a)))) end
    local o = {}
    if math.type(v) == "integer" then o.axis = v
    elseif type(v) == "table" then
      for k in pairs(v) do
        if k ~= "axis" and k ~= "keepdims" then
          not_traced(fmt("%s: option '%s' is not traced; give out= and stream= to the fused function's call", name,
            tostring(k)))
        end
      end
      o.axis, o.keepdims = v.axis, v.keepdims
    elseif v ~= nil then
      raise(fmt("bad argument #2 to '%s' (axis (integer) or options table expected, got %s)", name, typename(v)))
    end
    if type(o.axis) == "table" then not_traced(name .. ": a list of axes is not fused; reduce over one axis or all") end
    local desc = ops().reductions[name](a.dtype, o)
    local full = o.axis == nil and not o.keepdims
    local kind = ops().DT[desc.out].kind
    -- (the options in a table of their own: a nil field of a stand-in would reach __index)
    local red = stand_in({ kind = "red", name = name, of = a, o = { axis = o.axis, keepdims = o.keepdims }, desc = desc,
                           full = full, dtype = desc.out, value = kind == "f" and 0.0 or kind == "b" and false or 0 })
    rawset(red, "eval", function(vals) return vals.reds[red] end)
    return red
  end
end

local FIELDS = { shape = true, size = true, nbytes = true, device = true, strides = true, itemsize = true, ptr = true,
                 is_contiguous = true, T = true }
ST.__index = function(t, k)
  if type(k) == "number" then
    not_traced("element access of a traced Array: cd.fuse traces elementwise operations; index the result instead")
  end
  if t.kind == "num" or (t.kind == "red" and t.full) then
    not_traced(fmt("'%s' of a Lua number traced by cd.fuse", tostring(k)))
  end
  local m = METHODS[k]
  if m then return m end
  if FIELDS[k] then not_traced(fmt("a traced Array's %s is not known while tracing", k)) end
  not_traced(fmt("'%s' of a traced Array: only elementwise operations, comparisons (x:gt(y)), cd.where, the " ..
    "elementwise math functions and a trailing sum, prod, mean, max or min are traced", tostring(k)))
end

-- ------------------------------------------------------------------------------------------ the plan
-- The key of a call: each argument's dtype and rank, or a Lua value's kind (NOTE [fuse]).
local function call_key(args, n)
  local key = array_mt.__sig(args, n)   -- one C call; the loop below words the errors
  if key then return key end
  local parts = {}
  for i = 1, n do
    local v = args[i]
    if ops().is_array(v) then parts[i] = v.dtype .. ":" .. v.ndim
    elseif math.type(v) then parts[i] = math.type(v)
    elseif type(v) == "boolean" then parts[i] = "boolean"
    else raise(fmt("bad argument #%d to fused function (Array, number or boolean expected, got %s)", i, typename(v))) end
  end
  return concat(parts, ",")
end

-- Runs fn on stand-ins; the plan of its results.
local function make_plan(fn, args, n)
  local saved = trace
  trace = { nodes = {}, uses = {} }
  local ins = {}
  for i = 1, n do
    local v = args[i]
    if ops().is_array(v) then
      ins[i] = stand_in({ kind = "in", index = i, dtype = v.dtype, ndim = v.ndim, deps = { [i] = true } })
    else
      ins[i] = stand_in({ kind = "num", value = v, eval = function(vals) return vals[i] end })
    end
  end
  local ok, results = pcall(function() return table.pack(fn(unpack(ins, 1, n))) end)
  local t = trace
  trace = saved
  if not ok then error(results, 0) end
  return { results = results, nodes = t.nodes, uses = t.uses }
end

-- The C statements computing the wanted nodes' values and those they read, in the order recorded (each once).
local function body_of(plan, wanted)
  local need = {}
  local function mark(node)
    if need[node.id] then return end
    need[node.id] = true
    for _, r in ipairs(node.reads) do mark(r) end
  end
  for _, node in ipairs(wanted) do mark(node) end
  local code = {}
  for id = 1, #plan.nodes do
    if need[id] then code[#code + 1] = plan.nodes[id].code end
  end
  return concat(code, "\n")
end

-- the kernel inputs: the array arguments the nodes read, then every scalar parameter
local function kernel_inputs(plan, deps, args, vals)
  local ins, idx = {}, {}
  for i in pairs(deps) do idx[#idx + 1] = i end
  table.sort(idx)
  for _, i in ipairs(idx) do ins[#ins + 1] = { name = "a" .. i, dtype = args[i].dtype, value = args[i] } end
  for _, u in ipairs(plan.uses) do ins[#ins + 1] = { name = u.name, dtype = u.dtype, value = eval(u.src, vals) } end
  return ins, idx
end

-- Checks each Lua scalar of the call as the unfused operation would; false when one would change the plan's code
-- (NOTE [exact comparisons] in ops.lua): the call then runs unfused.
local function scalars_ok(plan, vals)
  local O = ops()
  for _, u in ipairs(plan.uses) do
    local v = eval(u.src, vals)
    if u.square ~= nil and (v == 2) ~= u.square then return false end
    local fits = O.scalar_fits(v, u.r)
    if fits ~= u.fits then
      if u.exact then return false end
      O.check_scalar_fits(v, u.r, u.fname)
    end
  end
  return true
end

local function shape_of(deps, args)
  local shapes = {}
  for i in pairs(deps) do shapes[#shapes + 1] = args[i].shape end
  return ops().broadcast_shapes(shapes, "fused function")
end

local function same_shape(a, b) return ops().same_shape(a, b) end

-- The fused kernels' compile options: no multiply-add contraction (NVRTC's default, and g++'s in C++), which would
-- round x * y + z once where the unfused operators round the product first (NOTE [fuse]).
local NO_FMA = { "--fmad=false" }

local function same_shapes(deps, args)
  local s
  for i in pairs(deps) do
    if s and not same_shape(s, args[i].shape) then return false end
    s = s or args[i].shape
  end
  return true
end

-- A trailing reduction of node red.of: one reduction kernel whose map is the fused body (NOTE [fuse]).
local function run_red(plan, red, args, vals, stream)
  local O = ops()
  local src, d = red.of, red.desc
  local deps = src.deps
  local x = src.kind == "in" and "a" .. src.index or "t" .. src.id
  local ins, idx = kernel_inputs(plan, deps, args, vals)
  local shape = shape_of(deps, args)
  if d.empty_error then
    local _, K = O.reduction_geometry(shape, red.o.axis, false, red.name)
    if K == 0 then raise(fmt("%s: zero-size array to a reduction with no identity", red.name)) end
  end
  -- the kernel's text, made once per plan (its inputs' dtypes are the plan's): a call builds no string
  local code = rawget(red, "code")
  if code == nil then
    local params, call = {}, {}
    for _, p in ipairs(ins) do
      params[#params + 1] = fmt("const %s %s", O.DT[p.dtype].ctype, p.name)
      call[#call + 1] = p.name
    end
    local body = src.kind == "op" and body_of(plan, { src }) or ""
    local fmap = fmt("_cdv_fmap_%s", red.name)
    local preamble = concat({ O.HELPERS, d.preamble or "",
      fmt("__device__ __forceinline__ %s %s(%s) {\n%s\n  return %s;\n}\n", O.DT[src.dtype].ctype, fmap,
        concat(params, ", "), body, x) }, "\n")
    local map = d.map:gsub("%f[%w_]x%f[^%w_]", fmt("%s(%s)", fmap, concat(call, ", ")))
    code = { preamble = preamble, map = map,
             key = "fuse:" .. preamble .. "\0" .. map .. "\0" .. d.reduce .. "\0" .. d.post .. "\0" .. d.identity }
    rawset(red, "code", code)
  end
  local res, p1, p2 = O.run_reduction({ fname = red.name, name = "cdv_fused_" .. red.name, ins = ins,
    out = { name = "y", dtype = d.out }, rtype = d.rtype, map_expr = code.map, reduce_expr = d.reduce,
    post_map = d.post, identity = d.identity, preamble = code.preamble, axis = red.o.axis, keepdims = red.o.keepdims,
    stream = stream, key = code.key, options = NO_FMA })
  if red.full then return O.lua_value(res), p1, p2, idx end
  return res
end

local function outs_of(opts)
  if opts == nil then return {}, nil end
  for k in pairs(opts) do
    if k ~= "out" and k ~= "stream" then raise(fmt("bad option '%s' to fused function (unknown option)", tostring(k))) end
  end
  local out = opts.out
  if ops().is_array(out) then out = { out } end
  if out ~= nil and type(out) ~= "table" then
    raise(fmt("bad option 'out' to fused function (Array or list of Arrays expected, got %s)", typename(out)))
  end
  return out or {}, opts.stream
end

-- NOTE [fuse launches]: a fused call's host work delays its one kernel, and bench/arrays times from an event before
-- the call to one after it, so the general path's work (shapes, the kernel's key and lookup, the result's
-- options) was in the fused x * y + z's time where the unfused expression hid its second operator's behind the
-- first kernel (issue 31). A plan whose array results are one elementwise kernel, or whose one result is a whole
-- reduction, keeps the kernels of its first call when every array it reads is contiguous and of one shape: a
-- later call of the same kind, without out= or stream=, checks the arrays in one C call (__same), makes its
-- results (__like) and launches with the arguments the general path gives.

-- the values a call returns, from the kernels' results
local function plan_results(plan, args, vals, arrays)
  local out = {}
  for i = 1, plan.results.n do
    local r = plan.results[i]
    if not is_stand_in(r) then out[i] = r
    elseif r.kind == "in" then out[i] = args[r.index]
    elseif r.kind == "op" then out[i] = arrays[r]
    else out[i] = eval(r, vals) end
  end
  return out
end

local function launch_config(f, n, grid, block)
  if f.n ~= n then f.n, f.cfg = n, ops().launch_config({ grid = grid, block = block }) end
  return f.cfg
end

-- The arguments of a kept launch: the arrays, then the scalars (NOTE [fuse launches]).
local function kept_args(plan, f, args, vals)
  local kargs, m = {}, 0
  for _, i in ipairs(f.idx) do m = m + 1; kargs[m] = args[i] end
  for _, u in ipairs(plan.uses) do
    local v = eval(u.src, vals)
    if type(v) == "boolean" then v = v and 1 or 0 end
    m = m + 1
    kargs[m] = v
  end
  return kargs, m
end

-- A kept launch (NOTE [fuse launches]): the elementwise results (into arrays[node]) or the reduction's value
-- (vals.reds), and true; nil when this call is not of the kind kept.
local kept_launches   -- [plan] = the kept launch: a table of ops.lua's fast caches, which cd.clear_kernel_cache empties
local function run_kept(plan, args, vals, arrays)
  local f = kept_launches[plan]
  local dev, gen, n, first = array_mt.__same(args, f.idx)
  if dev ~= f.dev or gen ~= f.gen or n == 0 then return nil end
  local O = ops()
  local kargs, m = kept_args(plan, f, args, vals)
  if f.red == nil then
    for j, r in ipairs(f.ew) do
      local o = array_mt.__like(first, f.odts[j])
      arrays[r] = o
      kargs[m + j] = o
    end
    m = m + #f.ew + 1
    kargs[m] = n
    f.k(launch_config(f, n, O.grid_for(dev, n), O.BLOCK), unpack(kargs, 1, m))
    return true
  end
  local d, nsplit = f.red.desc, O.splits(dev, n, 1)
  if nsplit > 1 and f.p2 == nil then return nil end
  local o = cd.empty({}, d.out, { device = dev })
  local part = nsplit > 1 and cd.empty(nsplit, d.rtype.dtype, { device = dev }) or nil
  kargs[m + 1], kargs[m + 2], kargs[m + 3], kargs[m + 4], kargs[m + 5], kargs[m + 6] = o, part, n, 1, nsplit,
    nsplit == 1 and 1 or 0
  f.p1(launch_config(f, n, nsplit, O.RBLOCK), unpack(kargs, 1, m + 6))
  if nsplit > 1 then f.p2({ grid = 1, block = O.RBLOCK }, part, o, n, nsplit) end
  vals.reds[f.red] = O.lua_value(o)
  return true
end

-- Keeps this call's launch when its arrays are of the kind run_kept takes (NOTE [fuse launches]).
local function keep(plan, args, idx, kept)
  local dev, gen = array_mt.__same(args, idx)
  if dev == nil then return end
  kept.dev, kept.gen, kept.idx = dev, gen, idx
  kept_launches[plan] = kept
end

-- Runs a plan on the call's arguments: the results, or nil when the call must run unfused (NOTE [fuse]).
local function run_plan(plan, args, n, opts)
  local O = ops()
  local vals = { reds = {} }
  for i = 1, n do vals[i] = args[i] end
  if not scalars_ok(plan, vals) then return nil end
  kept_launches = kept_launches or O.fast_cache()
  if opts == nil and kept_launches[plan] then
    local arrays = {}
    if run_kept(plan, args, vals, arrays) then return plan_results(plan, args, vals, arrays) end
  end
  local outs, stream = outs_of(opts)
  -- the array results: one elementwise kernel over their common shape
  local ew, seen, deps = {}, {}, {}
  for _, r in ipairs(plan.results) do
    if is_stand_in(r) and r.kind == "op" and not seen[r] then
      seen[r] = true
      ew[#ew + 1] = r
      for i in pairs(r.deps) do deps[i] = true end
    end
  end
  local arrays = {}
  if #ew > 0 then
    local shape = shape_of(deps, args)
    for _, r in ipairs(ew) do
      if not same_shape(shape_of(r.deps, args), shape) then return nil end
    end
    local ins, idx = kernel_inputs(plan, deps, args, vals)
    local kouts, odts = {}, {}
    for j, r in ipairs(ew) do
      local o = outs[j]
      local odt = O.out_dtype(r.dtype, o, "fused function")
      kouts[j] = { name = "z" .. j, dtype = odt, value = o }
      odts[j] = odt
    end
    -- the kernel's text, made once per plan and output dtypes: a call builds no string
    local sig = concat(odts, ",")
    plan.bodies = plan.bodies or {}
    local text = plan.bodies[sig]
    if text == nil then
      local write = {}
      for j, r in ipairs(ew) do write[j] = fmt("  z%d = (%s)v%d;", j, O.DT[odts[j]].ctype, r.id) end
      local body = "{\n" .. body_of(plan, ew) .. "\n" .. concat(write, "\n") .. "\n}"
      text = { body = body, key = "fuse:" .. body }
      plan.bodies[sig] = text
    end
    local res, k = O.run_elementwise({ fname = "fused function", name = "cdv_fused", ins = ins, outs = kouts,
      body = text.body, preamble = O.HELPERS, key = text.key, stream = stream, options = NO_FMA })
    for j, r in ipairs(ew) do arrays[r] = res[j] end
    if opts == nil and k and #plan.reds == 0 then keep(plan, args, idx, { k = k, ew = ew, odts = odts }) end
  end
  -- the reductions, each a kernel of its own
  for _, r in ipairs(plan.reds) do
    if not same_shapes(r.of.deps, args) then return nil end
  end
  for _, r in ipairs(plan.reds) do
    local v, p1, p2, idx = run_red(plan, r, args, vals, stream)
    vals.reds[r] = v
    if opts == nil and p1 and #ew == 0 and #plan.reds == 1 and r.desc.rtype.dtype then
      keep(plan, args, idx, { red = r, p1 = p1, p2 = p2 })
    end
  end
  return plan_results(plan, args, vals, arrays)
end

-- the reductions a plan's results need, each once
local function reductions_of(results)
  local reds, seen = {}, {}
  local function walk(v)
    if not is_stand_in(v) or seen[v] then return end
    seen[v] = true
    if v.kind == "red" then reds[#reds + 1] = v end
    for _, o in ipairs(v.kind == "num" and rawget(v, "operands") or {}) do walk(o) end
  end
  for i = 1, results.n do walk(results[i]) end
  return reds
end

-- cd.fuse(fn) -> a callable: f(...) returns what fn(...) returns (NOTE [fuse]); a trailing {out =, stream =}.
function cd.fuse(fn)
  if type(fn) ~= "function" then
    raise(fmt("bad argument #1 to 'fuse' (function expected, got %s)", typename(fn)))
  end
  local plans = {}
  local function call(_, ...)
    local n = select("#", ...)
    local args = { ... }
    for i = 1, n do
      if is_stand_in(args[i]) then return fn(...) end   -- inside another fused function's trace: traced there
    end
    local opts
    if n > 0 and type(args[n]) == "table" and not is_stand_in(args[n]) and cd.type(args[n]) == nil then
      opts, n = args[n], n - 1
    end
    local key = call_key(args, n)
    local plan = plans[key]
    if plan == nil then
      plan = make_plan(fn, args, n)
      plan.reds = reductions_of(plan.results)   -- returned, or read by Lua arithmetic that is
      plans[key] = plan
    end
    local out = run_plan(plan, args, n, opts)
    if out == nil then
      if opts and opts.out ~= nil then
        raise("fused function: out= cannot be honoured for this call (its results do not fuse); call it without out=")
      end
      return fn(unpack(args, 1, n))
    end
    return unpack(out, 1, plan.results.n)
  end
  return setmetatable({}, { __call = call, __name = "cudadev.FusedFunction",
    __tostring = function() return "FusedFunction" end })
end
