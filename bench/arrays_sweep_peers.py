"""bench/arrays_sweep_peers.py: the peer side of bench/arrays_sweep.lua (issue 28's sweep, run by bench/arrays_run).
For 2^10 to 2^26 float32 (SWEEP_MAX lowers the top): `c = a + b` in a loop (the old result freed by reference
counting) and the out= form (torch.add(a, b, out=c), cupy.add(a, b, out=c)), host time per operation with the
device synchronised at the end of each run, best of 3; PyTorch's memory reserved after the a + b loop over the live
bytes. Output: `RESULT name value` lines; a peer that cannot be imported is skipped with the reason on stderr."""
import os
import sys
import time

TOP = int(os.environ.get("SWEEP_MAX", "26"))


def per_op(fn, iters, sync):
    best = float("inf")
    for _ in range(3):
        sync()
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        sync()
        best = min(best, (time.perf_counter() - t0) / iters * 1e6)
    return best


def iters_for(n):
    return max(20, min(2000, (1 << 30) // (12 * n)))


try:
    import torch
except ImportError as e:
    print(f"arrays_sweep_peers: no PyTorch: {e}", file=sys.stderr)
    torch = None
if torch is not None:
    print(f"RESULT torch_version {torch.__version__}")
    for l in range(10, TOP + 1, 2):
        n = 1 << l
        torch.cuda.empty_cache()
        a = torch.full((n,), 1.5, device="cuda")
        b = torch.full((n,), 2.25, device="cuda")
        box = [a + b]

        def plus():
            box[0] = a + b

        t = per_op(plus, iters_for(n), torch.cuda.synchronize)
        assert float(box[0][-1]) == 3.75
        print(f"RESULT torch_add_{l} {t:.2f}")
        print(f"RESULT torch_reserved_{l} {torch.cuda.memory_reserved() / (12 * n):.2f}")
        c = box[0]
        t = per_op(lambda: torch.add(a, b, out=c), iters_for(n), torch.cuda.synchronize)
        print(f"RESULT torch_out_{l} {t:.2f}")
        del a, b, c, box
try:
    import cupy as cp
except ImportError as e:
    print(f"arrays_sweep_peers: no CuPy: {e}", file=sys.stderr)
    sys.exit(0)
print(f"RESULT cupy_version {cp.__version__}")
sync = cp.cuda.Device().synchronize
for l in range(10, TOP + 1, 2):
    n = 1 << l
    a = cp.full((n,), 1.5, dtype=cp.float32)
    b = cp.full((n,), 2.25, dtype=cp.float32)
    box = [a + b]

    def plus():
        box[0] = a + b

    t = per_op(plus, iters_for(n), sync)
    assert float(box[0][-1]) == 3.75
    print(f"RESULT cupy_add_{l} {t:.2f}")
    c = box[0]
    t = per_op(lambda: cp.add(a, b, out=c), iters_for(n), sync)
    print(f"RESULT cupy_out_{l} {t:.2f}")
    del a, b, c, box
