-- The embedding API (src/cudadev.h), through the host programs of examples/embed, run as a host would run
-- them (io.popen) and judged by what they print:
--   build/embed_host             a buffer the host owns, lent to a script as an Array (owned, with a release
--                                callback; a borrowed view), the host's stream, a kernel launched on the
--                                buffer, the result checked in C, host callbacks that read Arrays and raise
--   build/embed_host --sandbox   every refusal of a sandboxed state, the quota giving memory back, a host
--                                error; the host keeps running
--   build/embed_threads          four lua_States on four threads at once: allocations, copies, compiles,
--                                launches, per-state quotas
-- On a CUDA machine the hosts run on the GPU, and once more on the cpu device (CUDADEV_DEVICE=cpu).
local helper = require "spec.helper"
local cd = require "cudadev"

local root = io.popen("pwd"):read("l")
local BUILD = os.getenv("CUDADEV_BUILD") or root .. "/build"   -- CUDADEV_BUILD=... tests another build tree

local exists, sh = helper.file_exists, helper.shell_quote

-- stdout and stderr together, and the exit status
local function run(env, prog, args)
  return helper.run_command(("cd %s && env %s %s %s"):format(sh(root), env, sh(BUILD .. "/" .. prog), args or ""))
end

local has_line = helper.has_line

local function has_prefix(out, prefix)
  for l in out:gmatch("[^\n]*") do if l:sub(1, #prefix) == prefix then return l end end
  error(("expected a line starting with\n  %s\nin:\n%s"):format(prefix, out), 2)
end

-- The cpu device compiles kernels with the host's C++ compiler; where it cannot, the hosts skip the kernel
-- part with a reason, and so do we.
local function cpu_compiles()
  return (pcall(cd.compile, 'extern "C" __global__ void k(float *x) { x[0] = 1; }', { device = "cpu" }))
end

-- each environment the hosts run in: the machine's default (the GPU when there is one), and cpu
local runs = { { env = "", gpu = helper.cuda_available } }
if helper.cuda_available then runs[2] = { env = "CUDADEV_DEVICE=cpu", gpu = false } end

for _, r in ipairs(runs) do
  local label = r.gpu and "on the GPU" or "on the cpu device"
  local buf_dev = r.gpu and "host" or "cpu"   -- the GPU host adopts its own context as "host"
  local default_dev = r.gpu and cd.cuda_devices()[1].alias or "cpu"
  local kernels = r.gpu or cpu_compiles()

  describe("embed_host " .. label, function()
    local function host_it(name, fn)
      if not exists(BUILD .. "/embed_host") then return pending(name .. " (build/embed_host was not built)") end
      return it(name, fn)
    end

    host_it("lends its buffer to a script, which launches a kernel on it; the host checks the result", function()
      local out, code = run(r.env, "embed_host")
      assert.are.equal(0, code, out)
      has_line(out, ("embed_host: %s buffer of 1024 float32 on %s"):format(r.gpu and "cuMemAlloc'd" or "mmap'd",
        r.gpu and 'the host\'s own CUDA context (adopted as "host")' or "the cpu device"))
      has_prefix(out, ("script: buf = Array(float32[1024] on %s: {0, 1, 2, ..., 1021, 1022, 1023})"):format(buf_dev))
      has_prefix(out, "script: host_stream = Stream(" .. buf_dev)
      if kernels then has_line(out, "script: kernel ran on " .. buf_dev)
      else has_prefix(out, "script: kernel part skipped: the cpu device cannot compile here (") end
      has_line(out, ("script: host.checksum(buf) = 1048576 (float32[1024] on %s)"):format(buf_dev))
      has_line(out, "script: borrowed half: 16x32, half[1][1] = 1025, half[16][32] = 2047")
      has_line(out, "script: is_array(buf), is_array({}): \ttrue\tfalse")
      has_prefix(out, "script: bad dtype: cudadev_push_array: unknown dtype 'float33'")
      has_prefix(out, "script: bad device: cudadev_push_array: no device 'cuda:7'")
      has_line(out, "script: host callback raised Error: host: frame 7 is not ready")
      has_line(out, "host: check ok: buf[i] == 2*i + 1 for all 1024 elements")
      has_line(out, "host: release callback called once, at lua_close")
      has_line(out, "embed_host: ok")
    end)

    host_it("--sandbox shows each refusal as a Lua error, and the host keeps running", function()
      local out, code = run(r.env, "embed_host", "--sandbox")
      assert.are.equal(0, code, out)
      has_line(out, "sandbox: refused a raw address: raw addresses are not available in this sandbox")
      has_line(out, "sandbox: refused a stream handle: raw addresses are not available in this sandbox")
      has_line(out, "sandbox: refused load_module: load_module is not available in this sandbox")
      has_line(out, "sandbox: refused a cpu kernel: compiling kernels for the cpu device is not available in this sandbox")
      has_line(out, "sandbox: refused a disallowed compile option: bad option 'options' to 'compile' " ..
        "(compile option '-G' is not allowed here; allowed: -O3, --use_fast_math, -D*)")
      has_line(out, "sandbox: refused map_cuda_device with a pointer: map_cuda_device with a context pointer is not " ..
        "available in this sandbox")
      has_line(out, ("sandbox: refused memory beyond the quota: device memory quota of 128.0 KiB exceeded on %s " ..
        "(requested 256.0 KiB, in use 0 B)"):format(default_dev))
      has_line(out, "sandbox: refused the debug library: attempt to index a nil value (global 'debug')")
      has_line(out, "sandbox: refused a metatable change: attempt to index a string value")
      has_line(out, "sandbox: allowed: arrays within the quota, and again after frees")
      if r.gpu then
        has_line(out, "sandbox: allowed: compiling on host with allowed options")
        has_line(out, "sandbox: refused an integer as a pointer: bad argument #1 to 'axpb' ('x': expected float *, " ..
          "got 12345)")
      end
      has_line(out, "sandbox: host callback raised Error: host: frame 7 is not ready")
      has_line(out, "host: check ok: buf[i] == 3 for all 1024 elements")
      has_line(out, ("host: still running after %d refusals; quota in use: 0 bytes"):format(r.gpu and 10 or 9))
      has_line(out, "host: release callback called once, at lua_close")
      has_line(out, "embed_host: ok")
    end)

    if r.gpu then
      host_it("--teardown-first: lua_close after the host destroyed its CUDA context is quiet", function()
        local out, code = run(r.env, "embed_host", "--teardown-first")
        assert.are.equal(0, code, out)
        has_line(out, "host: tore down its CUDA context before lua_close")
        has_line(out, "script: after the teardown: host: its CUDA context was destroyed by the program that made " ..
          "it; objects made on it can no longer be used")
        has_line(out, "host: release callback called once, at lua_close")
        has_line(out, "embed_host: ok")
        assert.is_nil(out:find("[Ww]arning"), out)   -- Lua warnings are on: a finalizer's complaint would show
      end)
    end
  end)

  describe("embed_threads " .. label, function()
    local name = "runs four lua_States on four threads at once, each with its own quota"
    if not exists(BUILD .. "/embed_threads") then return pending(name .. " (build/embed_threads was not built)") end
    -- then again with every copy between pageable and pinned host memory (or a GPU) staged in pieces of 4000
    -- bytes, and pinned blocks from the pool without a driver (NOTE [test hooks]): the states share the pinned
    -- pool and the staging buffers
    for _, hooks in ipairs { "", " CUDADEV_STAGING_CHUNK=4000 CUDADEV_FAKE_PINNED=1" } do
      it(name .. (hooks ~= "" and ", with staged copies" or ""), function()
        local out, code = run(r.env .. hooks, "embed_threads")
        assert.are.equal(0, code, out)
        for i = 0, 3 do
          if kernels then
            has_line(out, ("thread %d: ok: 10 rounds of allocations, copies and two kernels on %s; quota %d MiB " ..
              "enforced"):format(i, default_dev, i + 1))
          else
            has_prefix(out, ("thread %d: ok: 10 rounds of allocations, copies (kernels skipped: "):format(i))
          end
        end
        has_line(out, "embed_threads: ok")
      end)
    end
  end)
end
