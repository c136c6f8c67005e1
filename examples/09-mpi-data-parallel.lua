-- examples/09-mpi-data-parallel.lua: data parallelism over MPI ranks (doc/mpi.md). The work, a histogram of
-- (i * i) % 16 for i in 0 .. N-1, is split into one slice per rank; each rank counts its slice with a kernel (on
-- cuda:<local rank> when this node has a GPU for it, else on the cpu device), then the ranks add their partial
-- histograms: through NCCL (cd.mpi.nccl_comm) when cudadev has it and every rank counted on a GPU, else with
-- cd.mpi.allreduce on the cpu device. Every rank checks the total against the histogram computed here in Lua.
--
--   make build && build/luacuda examples/09-mpi-data-parallel.lua
--   mpirun -n 2 build/luacuda examples/09-mpi-data-parallel.lua        (as root: mpirun --allow-run-as-root)
local cd = require "cudadev"
local mpi = cd.mpi

local ok, why = mpi.is_available()
if not ok then
  print("09-mpi-data-parallel: skipped: " .. tostring(why))
  return
end

local rank, size, local_rank = mpi.rank(), mpi.size(), mpi.local_rank()
local dev = cd.device_count() > local_rank and cd.device(local_rank) or cd.device("cpu")
cd.set_device(dev)

-- Whether a condition holds on every rank: each rank's choice that changes what it calls next (stop here, or
-- add through NCCL) must be the same on all of them, or some would wait for the others forever.
local function on_all(flag)
  return mpi.allreduce(cd.array({ flag and 1 or 0 }, "int32", { device = "cpu" }), "min")[1] == 1
end

-- The cpu device needs a host C++ compiler; without one (and without a GPU) there is nothing to show.
local src = [[
extern "C" __global__ void count(unsigned long long *hist, long long lo, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) {
    long long v = lo + i;
    atomicAdd(&hist[(v * v) % 16], 1ULL);
  }
}
]]
local compiled, mod = pcall(cd.compile, src, { name = "count.cu" })
if not on_all(compiled) then
  print(("09-mpi-data-parallel: rank %d: skipped: %s"):format(rank, compiled and "another rank cannot compile kernels"
    or ("the " .. dev.alias .. " device cannot compile kernels: " .. tostring(mod))))
  return
end

-- This rank's slice of 0 .. N-1: the first N % size ranks take one more.
local N = dev.is_cpu and 1 << 16 or 1 << 24
local share, extra = N // size, N % size
local lo = rank * share + math.min(rank, extra)
local n = share + (rank < extra and 1 or 0)

local hist = cd.zeros(16, "uint64")
if n > 0 then mod.count({ dim = n }, hist, lo, n) end

-- The partial histograms, added over the ranks.
local nccl = rawget(cd, "nccl")
local via
if on_all(not dev.is_cpu and type(nccl) == "table" and (type(nccl.is_available) ~= "function" or nccl.is_available()))
then
  local comm = mpi.nccl_comm()
  comm:all_reduce(hist, hist, "sum")
  cd.synchronize()
  hist = hist:to("cpu")
  via = "NCCL"
else
  hist = hist:to("cpu")
  mpi.allreduce(hist, "sum")
  via = "MPI"
end

-- The check: the same histogram over all of 0 .. N-1, counted here (the squares' residues repeat every 16).
local want = {}
for r = 0, 15 do want[r + 1] = 0 end
for v = 0, 15 do
  local r = (v * v) % 16
  want[r + 1] = want[r + 1] + N // 16 + (v < N % 16 and 1 or 0)
end
local got = hist:totable()
for r = 1, 16 do
  if got[r] ~= want[r] then
    error(("rank %d: residue %d counted %d times, expected %d"):format(rank, r - 1, got[r], want[r]))
  end
end
mpi.barrier()
if rank == 0 then
  print(("09-mpi-data-parallel: %d ranks counted %d squares on %s, added through %s: ok"):format(size, N,
    dev.alias, via))
end
