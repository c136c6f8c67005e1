-- All-reduce across GPUs with NCCL (cd.nccl, doc/nccl.md), data-parallel style: every GPU computes a partial
-- result with a kernel (its rank's share of a sum), and one all_reduce leaves the total on every GPU, checked
-- against the host. One process drives all its GPUs: cd.nccl.comms makes one communicator per GPU
-- (ncclCommInitAll) and the calls go in one cd.nccl.group, as CuPy and PyTorch do.
--
--   make build && build/luacuda examples/08-allreduce.lua [N]     N elements per GPU (default 2^22)
--   CUDADEV_LIBNCCL=/path/to/libnccl.so.2 build/luacuda examples/08-allreduce.lua
--
-- Where there is no GPU or no NCCL it prints why and exits 0; it exits 1 when a result is wrong.
-- Keep NVLink multicast off on shared hosts: NCCL_NVLS_ENABLE=0 (bench/nccl_run sets it).
local cd = require "cudadev"

local n = math.tointeger(tonumber(arg and arg[1] or "")) or (1 << 22)

local function skip(why)
  print("08-allreduce: skipped: " .. why)
end

-- Each rank's partial result: x[i] = (rank + 1) * (i % 7), computed on its GPU.
local partial_src = [[
extern "C" __global__ void partial(float *x, int rank, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) x[i] = (float)((rank + 1) * (int)(i % 7));
}]]

-- The value every element must hold after the sum over ranks 0 .. size-1, at 0-based position i.
local function total(size, i) return size * (size + 1) // 2 * (i % 7) end

-- ---------------------------------------------------------------- one process, all its GPUs
local function one_process()
  local devices = cd.cuda_devices()
  if #devices == 0 then return skip("no CUDA device (" .. tostring(select(2, cd.is_available())) .. ")") end
  local ok, why = cd.nccl.is_available()
  if not ok then return skip(why) end
  local comms = cd.nccl.comms(devices)
  local xs = {}
  for i, c in ipairs(comms) do
    local _ <close> = cd.scope(c.device)     -- compile, allocate and launch on this rank's GPU
    xs[i] = cd.empty(n, "float32")
    cd.compile(partial_src).partial({ dim = n }, xs[i], c.rank, n)
  end
  local t0 = cd.now()
  cd.nccl.group(function()                   -- NOTE: one call per communicator, inside one group
    for i, c in ipairs(comms) do c:all_reduce(xs[i], xs[i], "sum") end
  end)
  cd.synchronize()
  local dt = cd.now() - t0
  local size = #comms
  for i, c in ipairs(comms) do
    for _, pos in ipairs({ 0, 1, 6, n - 1 }) do
      local got, want = xs[i][pos + 1], total(size, pos)
      if got ~= want then
        print(("08-allreduce: WRONG on rank %d (%s): element %d is %s, expected %s"):format(c.rank, c.device.alias,
          pos + 1, tostring(got), tostring(want)))
        os.exit(1)
      end
    end
  end
  local bytes = n * 4
  print(("08-allreduce: %d GPU%s, NCCL %s, all_reduce of %d float32 (%.1f MiB) each: correct, %.3f ms, bus bandwidth "
    .. "%.1f GB/s (first call, warm-up included)"):format(size, size == 1 and "" or "s", (cd.nccl.version()), n,
    bytes / 2^20, dt * 1e3, size > 1 and 2 * (size - 1) / size * bytes / dt / 1e9 or 0))
  for _, c in ipairs(comms) do c:destroy() end
end

-- ---------------------------------------------------------------- many processes (mpirun)
-- MPI PART (issue 19, cd.mpi): under `mpirun -n <GPUs> build/luacuda examples/08-allreduce.lua`, each rank
-- drives one GPU through cd.mpi.nccl_comm() (cd.nccl.comm(cd.mpi.size(), id broadcast from rank 0,
-- cd.mpi.rank(), device)) and checks the same totals. It belongs here, as many_processes(), chosen below when
-- cd.mpi is built and the script runs under mpirun.
local many_processes = nil

if many_processes and cd.mpi and (os.getenv("OMPI_COMM_WORLD_SIZE") or os.getenv("PMI_SIZE")) then
  many_processes()
else
  one_process()
end
