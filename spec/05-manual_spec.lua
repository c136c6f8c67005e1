-- The manual (doc/*.md) documents every public name, and only names that exist: module functions and fields,
-- each type's methods and fields, the REPL module, the C API of src/cudadev.h and the environment variables
-- the code reads. spec/manual.lua says how both sides are found.
local manual = require "spec.manual"

local function listing(title, items)
  if #items == 0 then return "" end
  return ("%s (%d):\n  %s\n"):format(title, #items, table.concat(items, "\n  "))
end

describe("the manual", function()
  local real, sources = manual.real()
  local doc, recv = manual.documented()

  it("exists, with an index that links every topic file", function()
    local files = manual.doc_files()
    local index = assert(files["doc/manual.md"], "doc/manual.md is missing")
    local unlinked = {}
    for path in pairs(files) do
      local base = path:match("^doc/(.*)$")
      if base ~= "manual.md" and not index:find("(" .. base .. ")", 1, true) then unlinked[#unlinked + 1] = base end
    end
    table.sort(unlinked)
    assert(#unlinked == 0, "doc/manual.md does not link " .. table.concat(unlinked, ", "))
  end)

  it("declares a receiver for every type", function()
    for _, ty in ipairs({ "Device", "Stream", "Event", "Array", "Module", "Kernel", "Graph", "LaunchConfig",
                          "Error" }) do
      local found = false
      for _, t in pairs(recv) do found = found or t == ty end
      assert(found, "no <!-- receivers: x=" .. ty .. " --> in doc/*.md")
    end
  end)

  it("documents every public name, and no name that does not exist", function()
    local missing, extra = manual.compare(doc, real, sources)
    local declared, undeclared = {}, {}
    for _, ty in pairs(recv) do declared[ty] = true end
    for _, k in ipairs(missing) do
      local ty = k:match("^(%u[%w_]*):")
      if ty and not declared[ty] and not undeclared[ty] then
        undeclared[ty] = true
        undeclared[#undeclared + 1] = ("%s (name one in a doc file: <!-- receivers: x=%s -->, then ### `x:method()`)"):format(ty, ty)
      end
    end
    local msg = listing("types without a receiver name", undeclared) .. listing("public names the manual does not document (add a `### `name`` heading in doc/)", missing)
      .. listing("headings in doc/ that name nothing that exists (a typo, or a removed name)", extra)
    assert(#missing == 0 and #extra == 0, "\n" .. msg)
  end)

  it("finds the names of every kind it compares", function()
    local kinds = {}
    for k in pairs(real) do kinds[k:match("^(%a+)[%.:]")] = true end
    for _, want in ipairs({ "cd", "repl", "Array", "Device", "Stream", "Event", "Module", "Kernel", "Graph",
                            "LaunchConfig", "Error", "C", "ENV" }) do
      assert(kinds[want], "no real names of kind " .. want)
    end
    assert.equal("function", real["cd.empty"])
    assert.equal("method", real["Array:copy_from"])
    assert.equal("field", real["Array:dtype"])
    assert.equal("field", real["Graph:num_nodes"])       -- read from graph.c: the cpu device makes no graphs
    assert.equal("field", real["LaunchConfig:grid"])
    assert.equal("field", real["Error:log"])
    assert.equal("C API", real["C:cudadev_push_array"])
    assert.equal("C API", real["C:cudadev_options"])
    assert.same({ luaopen_x = true, cudadev_two_lines = true, CUDADEV_N = true },
                manual.c_api("#define CUDADEV_API __attribute__((x))\nCUDADEV_API int luaopen_x(lua_State *L);\n"
                             .. "CUDADEV_API const char *\ncudadev_two_lines(void);\n#define CUDADEV_N 8\n"))
    assert.equal("environment variable", real["ENV:CUDADEV_STAGING_CHUNK"])   -- read through env_count
    assert.is_nil(real["cd._hooks"])
  end)

  it("reports a name removed from the manual as missing, and a made-up heading as extra", function()
    local files = manual.doc_files()
    local cut = {}
    for path, text in pairs(files) do
      cut[path] = text:gsub("\n### `a:copy_from%([^\n]*", "\n"):gsub("\n### `CUDADEV_CPU_FORK`[^\n]*", "\n")
    end
    cut["doc/zz-made-up.md"] = "### `cd.no_such_function(x)`\n### `a:no_such_method()`\n### `NO_SUCH_VARIABLE`\n"
                               .. "### `cudadev_no_such_call(L)`\n### `:time expr`\n"
    local d = manual.documented(cut)
    local missing, extra = manual.compare(d, real, sources)
    assert.same({ "Array:copy_from", "ENV:CUDADEV_CPU_FORK" }, missing)
    assert.same({ "Array:no_such_method (doc/zz-made-up.md:2)", "C:cudadev_no_such_call (doc/zz-made-up.md:4)",
                  "ENV:NO_SUCH_VARIABLE (doc/zz-made-up.md:3)", "cd.no_such_function (doc/zz-made-up.md:1)" }, extra)
  end)

  it("reads fields from a type's __index function and environment variables from getenv-like calls", function()
    local files = {
      ["src/cdv.h"] = '#define CDV_THING "cudadev.Thing"\n',
      ["src/thing.c"] = 'static int thing_index(lua_State *L) {\n  if (strcmp(k, "size") == 0) x();\n'
        .. '  else if (strcmp(k, "kind") == 0) { y(); }\n  return 1;\n}\n'
        .. 'int open(lua_State *L) {\n  luaL_newmetatable(L, CDV_THING);\n  cdv_set_index(L, -2, thing_index);\n'
        .. '  const char *v = getenv("THING_DIR"), *w = os.getenv("THING_MODE"); env_count("THING_N");\n}\n',
    }
    assert.same({ ["cudadev.Thing"] = { size = true, kind = true } }, manual.c_fields(files))
    assert.same({ THING_DIR = true, THING_MODE = true, THING_N = true }, manual.env_vars(files))
  end)
end)
