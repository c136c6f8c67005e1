"""bench/py_peers.py: the peer columns of bench/run. The measurements of bench/lua_bench.lua, made with CuPy,
PyTorch and cuda.core where they can be imported (each is skipped, with the reason on stderr, when it cannot).

Output: `framework name value unit` lines on stdout. Same method as c_driver.c: host-side costs by
time.perf_counter with the synchronisation inside the timed region, device work by events, medians, saxpy on
random inputs over a NaN-poisoned output, checked against a float64 result. PyTorch has no raw-kernel launch,
so its launch rows stay empty and its saxpy is torch.add(y, x, alpha=a), its own kernel.
"""
import os
import statistics
import sys
import time
import traceback

try:
    import numpy as np
except ImportError as e:   # every peer needs numpy: without it there are no peer columns, and no failure
    print(f"py_peers: skipped: {e}", file=sys.stderr)
    sys.exit(0)

REPS, LAUNCHES = 5, 20000          # fewer launches than C and Lua: Python launches cost several µs each
COPY_BYTES, COPY_REPS = 256 << 20, 10
SAXPY_N, A = 1 << 24, np.float32(2.0)
MIB_FLOATS = 262144

EMPTY_SRC = 'extern "C" __global__ void empty() {}\n'
ARGS5_SRC = r'''
extern "C" __global__ void args5(float *p, int i, float f, size_t n, float *q)
{
  if (i < 0) p[n] = f * q[0];   /* never taken: the launch is what is measured */
}
'''
SAXPY_SRC = r'''
extern "C" __global__
void saxpy(float a, float *x, float *y, float *out, size_t n)
{
  size_t tid = blockIdx.x * blockDim.x + threadIdx.x;
  if (tid < n) {
    out[tid] = a * x[tid] + y[tid];
  }
}
'''


def emit(fw, name, value, unit):
    print(f"{fw} {name} {value:.4g} {unit}", flush=True)


LIST_N = 1 << 22   # the Lua-table row: 2^22 numbers, as float32


def list_rate(fw, convert, sync):
    """GB/s of float32 from a Python list of LIST_N floats through `convert` (list -> device array), as cudadev's
    row copies a Lua table of as many numbers; checks the first and last values."""
    lst = [k % 16384 + 0.5 for k in range(LIST_N)]
    d = convert(lst)
    sync()
    if float(d[0]) != 0.5 or float(d[-1]) != (LIST_N - 1) % 16384 + 0.5:
        raise AssertionError(f"{fw}: the list copy copied wrong data")
    emit(fw, "h2d_list", LIST_N * 4 / per_op_us(lambda: convert(lst), 1, sync, reps=3) / 1e3, "GB/s")


def per_op_us(fn, n, sync, reps=REPS):
    """µs per call of fn, n calls back to back, then sync(); median of reps, after a warm-up."""
    for _ in range(min(n, 1000)):
        fn()
    sync()
    t = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        sync()
        t.append((time.perf_counter() - t0) / n * 1e6)
    return statistics.median(t)


def event_rate(run, record, elapsed_ms):
    """GB/s of one COPY_BYTES copy, timed by events; median of COPY_REPS after a warm-up."""
    t = []
    for r in range(COPY_REPS + 1):
        e0 = record()
        run()
        ms = elapsed_ms(e0, record())
        if r:
            t.append(COPY_BYTES / (ms * 1e-3) / 1e9)
    return statistics.median(t)


def check_saxpy(x, y, out):
    ref = A.astype(np.float64) * x.astype(np.float64) + y.astype(np.float64)
    err = np.abs(out.astype(np.float64) - ref) / np.maximum(np.abs(ref), 1e-30)
    if not np.all(err <= 1e-6):   # NaN (never written) fails too
        raise AssertionError(f"saxpy is wrong: max relative error {np.nanmax(err)}, NaNs {np.isnan(out).sum()}")


def host_inputs():
    rng = np.random.default_rng()
    return rng.random(SAXPY_N, dtype=np.float32), rng.random(SAXPY_N, dtype=np.float32)


# ---------------------------------------------------------------------------------------------------- CuPy
def bench_cupy():
    import cupy as cp
    import cupyx
    fw = "cupy"
    dev = cp.cuda.Device(0)
    sync = dev.synchronize
    empty = cp.RawKernel(EMPTY_SRC, "empty")
    args5 = cp.RawKernel(ARGS5_SRC, "args5")
    saxpy = cp.RawKernel(SAXPY_SRC, "saxpy")
    p, q = cp.empty(MIB_FLOATS, cp.float32), cp.empty(MIB_FLOATS, cp.float32)
    a5 = (p, np.int32(1), np.float32(2.5), np.uint64(1024), q)     # made once, like the Lua config table
    emit(fw, "launch_empty", per_op_us(lambda: empty((1,), (1,), ()), LAUNCHES, sync), "us")
    emit(fw, "launch_5arg", per_op_us(lambda: args5((1,), (1,), a5), LAUNCHES, sync), "us")

    def launch_sync():
        empty((1,), (1,), ())
        sync()
    emit(fw, "launch_sync", per_op_us(launch_sync, 2000, lambda: None), "us")

    def record():
        e = cp.cuda.Event()
        e.record()
        return e

    def elapsed(e0, e1):
        e1.synchronize()
        return cp.cuda.get_elapsed_time(e0, e1)

    hx, hy = host_inputs()
    x, y, out = cp.asarray(hx), cp.asarray(hy), cp.empty(SAXPY_N, cp.float32)
    grid = ((SAXPY_N + 255) // 256,)
    t = []
    for r in range(-2, 21):
        out.fill(np.nan)
        e0 = record()
        saxpy(grid, (256,), (A, x, y, out, np.uint64(SAXPY_N)))
        ms = elapsed(e0, record())
        if r > 0:
            t.append(ms * 1e3)
    check_saxpy(hx, hy, cp.asnumpy(out))
    emit(fw, "saxpy_kernel", statistics.median(t), "us")
    del x, y, out

    def alloc():
        a = cp.empty(MIB_FLOATS, cp.float32)
        del a
    emit(fw, "alloc_free_1mib", per_op_us(alloc, 10000, sync), "us")

    n = COPY_BYTES // 4
    h1, h2 = cupyx.empty_pinned(n, np.float32), cupyx.empty_pinned(n, np.float32)
    h1[:] = np.random.default_rng().random(n, dtype=np.float32)
    d1, d2 = cp.empty(n, cp.float32), cp.empty(n, cp.float32)
    emit(fw, "h2d_pinned", event_rate(lambda: d1.set(h1), record, elapsed), "GB/s")
    emit(fw, "d2h_pinned", event_rate(lambda: d1.get(out=h2), record, elapsed), "GB/s")
    if not np.array_equal(h1, h2):
        raise AssertionError("pinned round trip copied wrong data")
    emit(fw, "d2d", event_rate(lambda: d2.data.copy_from_device(d1.data, COPY_BYTES), record, elapsed), "GB/s")
    page = np.array(h1)
    emit(fw, "h2d_pageable", COPY_BYTES / per_op_us(lambda: d1.set(page), 1, sync) / 1e3, "GB/s")
    list_rate(fw, lambda lst: cp.asarray(lst, dtype=cp.float32), sync)
    del d1, d2, h1, h2, page
    timed = compute_rows(fw, lambda n: cp.arange(n, dtype=cp.int32), lambda x: x.astype(cp.float32), lambda a, b: a + b,
                         lambda a: a.sum(), lambda n: cp.random.uniform(0, 1, n, dtype=cp.float32), record, elapsed)
    if os.environ.get("CUPY_TF32", "0") != "0":
        print("py_peers: CUPY_TF32 is set: CuPy's float32 matmul uses TF32 and is not comparable", file=sys.stderr)
    matmul_rows(fw, timed, lambda n, dt: cp.random.random((n, n), dtype=cp.float32).astype(dt), lambda a, b: a @ b,
                lambda x: x.astype(cp.float64))


COMPUTE_N = 1 << 26


def compute_rows(fw, arange, tofloat, add, total, uniform, record, elapsed):
    """a + b, a.sum() and a uniform draw on 2^26 float32, as lua_bench.lua times them (events around the call,
    the result's allocation included, median of 20 after 3 warm-ups), on the same data: i % 1024 and
    (i * 7) % 1000 / 8; the sum is checked."""
    a = tofloat(arange(COMPUTE_N) % 1024)          # counted in int32: a float32 arange is not exact past 2^24
    b = tofloat((arange(COMPUTE_N) * 7) % 1000) / 8
    expect = 523776.0 * (COMPUTE_N // 1024)
    if abs(float(total(a)) - expect) > 1e-5 * expect:
        raise AssertionError(f"{fw}: the sum is wrong")

    def timed(fn):
        t = []
        for r in range(-2, 21):
            e0 = record()
            res = fn()
            ms = elapsed(e0, record())
            del res
            if r > 0:
                t.append(ms * 1e3)
        return statistics.median(t)
    emit(fw, "add_2p26", timed(lambda: add(a, b)), "us")
    emit(fw, "sum_2p26", timed(lambda: total(a)), "us")
    emit(fw, "uniform_2p26", timed(lambda: uniform(COMPUTE_N)), "us")
    return timed


MATMUL_CASES = ((4096, "float32", "matmul_4096"), (8192, "float32", "matmul_8192"), (8192, "float16", "matmul_8192_f16"))


def matmul_rows(fw, timed, rand, matmul, f64):
    """cd.matmul's rows, as lua_bench.lua measures them: `a @ b` of uniform [0, 1) square matrices, timed by
    compute_rows' `timed`. float32 in full precision (no TF32: CuPy's and PyTorch's default, and cudadev's
    CUBLAS_DEFAULT_MATH), float16 accumulated in float32. Checked: the sum of a @ b against the sum over k of
    a's column sums times b's row sums."""
    for n, dtype, key in MATMUL_CASES:
        a, b = rand(n, dtype), rand(n, dtype)
        got = float(f64(matmul(a, b)).sum())
        expect = float((f64(a).sum(0) * f64(b).sum(1)).sum())
        if abs(got - expect) > (1e-2 if dtype == "float16" else 1e-4) * expect:
            raise AssertionError(f"{fw}: {key} gave a sum of {got}, expected {expect}")
        emit(fw, key, timed(lambda: matmul(a, b)), "us")
        del a, b


# ---------------------------------------------------------------------------------------------------- PyTorch
def bench_torch():
    import torch
    fw = "torch"
    if not torch.cuda.is_available():
        raise RuntimeError("torch.cuda.is_available() is False")
    cuda = torch.device("cuda:0")
    sync = torch.cuda.synchronize

    def record():
        e = torch.cuda.Event(enable_timing=True)
        e.record()
        return e

    def elapsed(e0, e1):
        e1.synchronize()
        return e0.elapsed_time(e1)

    hx, hy = host_inputs()
    x, y = torch.from_numpy(hx).to(cuda), torch.from_numpy(hy).to(cuda)
    out = torch.empty(SAXPY_N, device=cuda)
    t = []
    for r in range(-2, 21):
        out.fill_(float("nan"))
        e0 = record()
        torch.add(y, x, alpha=float(A), out=out)
        ms = elapsed(e0, record())
        if r > 0:
            t.append(ms * 1e3)
    check_saxpy(hx, hy, out.cpu().numpy())
    emit(fw, "saxpy_kernel", statistics.median(t), "us")
    del x, y, out

    def alloc():
        a = torch.empty(MIB_FLOATS, device=cuda)
        del a
    emit(fw, "alloc_free_1mib", per_op_us(alloc, 10000, sync), "us")

    n = COPY_BYTES // 4
    h1 = torch.from_numpy(np.random.default_rng().random(n, dtype=np.float32)).pin_memory()
    h2 = torch.empty(n).pin_memory()
    d1, d2 = torch.empty(n, device=cuda), torch.empty(n, device=cuda)
    emit(fw, "h2d_pinned", event_rate(lambda: d1.copy_(h1, non_blocking=True), record, elapsed), "GB/s")
    emit(fw, "d2h_pinned", event_rate(lambda: h2.copy_(d1, non_blocking=True), record, elapsed), "GB/s")
    if not torch.equal(h1, h2):
        raise AssertionError("pinned round trip copied wrong data")
    emit(fw, "d2d", event_rate(lambda: d2.copy_(d1), record, elapsed), "GB/s")
    page = torch.from_numpy(h1.numpy().copy())   # numpy's own, pageable memory
    emit(fw, "h2d_pageable", COPY_BYTES / per_op_us(lambda: d1.copy_(page), 1, sync) / 1e3, "GB/s")
    list_rate(fw, lambda lst: torch.tensor(lst, dtype=torch.float32, device=cuda), sync)
    del d1, d2, h1, h2, page
    timed = compute_rows(fw, lambda n: torch.arange(n, dtype=torch.int32, device=cuda), lambda x: x.float(),
                         lambda a, b: a + b, lambda a: a.sum(), lambda n: torch.rand(n, device=cuda), record, elapsed)
    torch.backends.cuda.matmul.allow_tf32 = False   # PyTorch's default, said out loud: full float32, as cudadev
    matmul_rows(fw, timed, lambda n, dt: torch.rand((n, n), device=cuda).to(getattr(torch, dt)), torch.matmul,
                lambda x: x.double())


# ---------------------------------------------------------------------------------------------------- cuda.core
def bench_cuda_core():
    try:
        from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch
    except ImportError:
        from cuda.core.experimental import Device, LaunchConfig, Program, ProgramOptions, launch
    fw = "cuda.core"
    dev = Device(0)
    dev.set_current()
    s = dev.default_stream
    arch = "".join(str(v) for v in dev.compute_capability)

    def kernel(src, name):
        prog = Program(src, code_type="c++", options=ProgramOptions(arch=f"sm_{arch}"))
        return prog.compile("cubin").get_kernel(name)

    empty, args5 = kernel(EMPTY_SRC, "empty"), kernel(ARGS5_SRC, "args5")
    cfg = LaunchConfig(grid=1, block=1)
    p, q = dev.allocate(1 << 20, stream=s), dev.allocate(1 << 20, stream=s)
    i5, f5, n5 = np.int32(1), np.float32(2.5), np.uint64(1024)
    emit(fw, "launch_empty", per_op_us(lambda: launch(s, cfg, empty), LAUNCHES, s.sync), "us")
    emit(fw, "launch_5arg", per_op_us(lambda: launch(s, cfg, args5, p, i5, f5, n5, q), LAUNCHES, s.sync), "us")

    def launch_sync():
        launch(s, cfg, empty)
        s.sync()
    emit(fw, "launch_sync", per_op_us(launch_sync, 2000, lambda: None), "us")

    def alloc():
        dev.allocate(1 << 20, stream=s).close(s)
    emit(fw, "alloc_free_1mib", per_op_us(alloc, 10000, s.sync), "us")


def main():
    for bench in (bench_cupy, bench_torch, bench_cuda_core):
        name = bench.__name__[len("bench_"):]
        try:
            bench()
        except ImportError as e:
            print(f"py_peers: {name} skipped: {e}", file=sys.stderr)
        except Exception:   # one framework failing must not cost the others their columns
            print(f"py_peers: {name} failed:", file=sys.stderr)
            traceback.print_exc()


if __name__ == "__main__":
    main()
