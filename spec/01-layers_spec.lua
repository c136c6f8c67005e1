-- NOTE [layers] (src/backend.h): the front end (the Lua types) asks the backend of a device for operations and
-- properties and never for its kind, and includes no driver header; the backends include no Lua header. The
-- build enforces the headers (ctest layers_*); these read the sources, as issue 15 asks to show.
local helper = require "spec.helper"

local function backend_files()
  local cmake = helper.read_file("CMakeLists.txt")
  local list = assert(cmake:match("set%(CDV_BACKEND_FILES (.-)%)"), "CDV_BACKEND_FILES in CMakeLists.txt")
  local set = {}
  for f in list:gmatch("[%w_]+%.c") do set[f] = true end
  return set
end

local function sources()
  local p = assert(io.popen("ls src"))
  local backend, front, headers = backend_files(), {}, {}
  for f in p:lines() do
    if f:match("%.c$") and not backend[f] then front[#front + 1] = f end
    if f:match("%.h$") then headers[#headers + 1] = f end
  end
  p:close()
  return backend, front, headers
end

-- "file:line: text" of each line of a front-end file for which hit(file, line) is true
local function front_lines(hit)
  local _, front = sources()
  local found = {}
  for _, f in ipairs(front) do
    local n = 0
    for line in helper.read_file("src/" .. f):gmatch("[^\n]*") do
      n = n + 1
      if hit(f, line) then found[#found + 1] = f .. ":" .. n .. ": " .. line end
    end
  end
  return found
end

-- a line of C without its comments ("" inside a block comment's continuation lines)
local function code_of(line)
  local code = line:gsub("/%*.-%*/", ""):gsub("//.*", "")
  return code:match("^%s*%*") and "" or code
end

describe("the layers", function()
  it("the front end tests no device kind and includes no driver or NVRTC header", function()
    assert.are.same({}, front_lines(function(f, line)
      -- the registry (device.c) is the one place that names backends: it gives each device its own
      local registry = f == "device.c" and (line:match("%->be = &cdv_backend_") or line:match("cdv_arch_backend%(void%)"))
      local kind = not registry and (line:match("%->is_cpu") or line:match("cdv_backend_cpu") or
                                     line:match("cdv_backend_cuda"))
      return kind or line:match('#%s*include%s*[<"]syms%.h') or line:match('#%s*include%s*[<"]cuda%.h')
          or line:match('#%s*include%s*[<"]nvrtc%.h') or line:match('#%s*include%s*[<"]cudaProfiler%.h')
    end))
  end)

  -- NOTE [layers]: every library is opened by the loader (loader.c: libcuda, NVRTC, NCCL, cuBLAS, cd.mpi's shim)
  -- and the front end calls the tables it fills; the cpu backend's own kernel objects are the backend's
  it("the front end opens no library: no dlopen, dlsym or dlfcn.h outside the backend and loader files", function()
    assert.are.same({}, front_lines(function(_, line)
      local code = code_of(line)
      for _, fn in ipairs({"dlopen", "dlmopen", "dlsym", "dlvsym", "dladdr", "dlinfo", "dlerror", "dlclose"}) do
        if code:match("%f[%w_]" .. fn .. "%s*%(") then return true end
      end
      return code:match("#%s*include%s*<dlfcn%.h>") ~= nil
    end))
  end)

  -- bad input and a failed allocation are Lua errors in the front end (NOTE [registry storage] in device.c)
  it("the front end calls no abort()", function()
    assert.are.same({}, front_lines(function(_, line)
      return code_of(line):match("%f[%w_:.>]abort%s*%(%s*%)") ~= nil
    end))
  end)

  -- NOTE [source scanner]: the readers of CUDA C text tokenise with scan.c, none skips comments on its own
  it("the signature reader, the cpu compiler and the kernel caches lex with the source scanner", function()
    local found = {}
    for _, f in ipairs({ "sig.c", "cpu_compile.c", "diskcache.c", "cuda_cache.c" }) do
      local n = 0
      for line in helper.read_file("src/" .. f):gmatch("[^\n]*") do
        n = n + 1
        local code = code_of(line)
        if code:match("'/'.-'%*'") or code:match("'%*'.-'/'") then found[#found + 1] = f .. ":" .. n .. ": " .. line end
      end
    end
    assert.are.same({}, found)
    assert.truthy(helper.read_file("src/sig.c"):find("cdv_scan_lex(", 1, true), "sig.c reads cdv_scan_lex's tokens")
  end)

  it("the backends and backend.h include no Lua header and not cdv.h", function()
    local backend = sources()
    local found = {}
    local files = {"backend.h", "cpu.h", "syms.h", "diskcache.h", "scan.h", "sig.h", "cublas_abi.h", "nccl_abi.h",
                   "mpi_api.h"}
    for f in pairs(backend) do files[#files + 1] = f end
    for _, f in ipairs(files) do
      for line in helper.read_file("src/" .. f):gmatch("[^\n]*") do
        if line:match('#%s*include%s*[<"]lua') or line:match('#%s*include%s*[<"]cdv%.h') then
          found[#found + 1] = f .. ": " .. line
        end
      end
    end
    assert.are.same({}, found)
  end)

  it("no cdv_device field says the kind: the contract's properties do", function()
    assert.is_nil(helper.read_file("src/backend.h"):match("int is_cpu"))
  end)

  -- NOTE hygiene: a note is defined once, as "NOTE [name]:"; every other mention is a reference to it
  it("each NOTE is defined once, and every referenced NOTE is defined", function()
    local defined, referenced, twice, missing = {}, {}, {}, {}
    local p = assert(io.popen("ls src/*.c src/*.h src/*.hpp lua/cudadev/*.lua lua/cudadev/*.hpp 2>/dev/null"))
    for path in p:lines() do
      local text = helper.read_file(path)
      for name, colon in text:gmatch("NOTE %[([^%]]+)%](:?)") do
        name = name:gsub("%s*\n%s*%*?%s*", " ")   -- a name broken across comment lines
        if colon == ":" then
          if defined[name] then twice[#twice + 1] = name .. " (" .. defined[name] .. ", " .. path .. ")" end
          defined[name] = path
        else
          referenced[name] = path
        end
      end
    end
    p:close()
    for name, path in pairs(referenced) do
      if not defined[name] then missing[#missing + 1] = name .. " (" .. path .. ")" end
    end
    table.sort(twice)
    table.sort(missing)
    assert.are.same({}, twice)
    assert.are.same({}, missing)
  end)
end)
