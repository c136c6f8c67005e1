"""bench/sort_sweep_peers.py WORK check|time: the host side of bench/sort_sweep (issue 28).
check: compares the arrays bench/sort_sweep.lua saved in WORK with NumPy's: argsort (1-based) with NumPy's stable
argsort, exactly; cumsum exactly for integers, and for floats its largest error against a float64 cumsum next to
NumPy's own (NumPy adds float32 in float32, one element after the other: neither is exact). One line per failure,
then a summary.
time: CuPy's sort and argsort of 2^24 uniform float32 and cumsum of 2^26, timed by CUDA events around the call,
median of 20 after 3 warm-ups, as `RESULT name microseconds` lines."""
import glob
import os
import sys

import numpy as np

work, mode = sys.argv[1], sys.argv[2]

if mode == "check":
    bad, n_checked, worst = 0, 0, {}
    for af in sorted(glob.glob(os.path.join(work, "*_a.npy"))):
        stem = af[: -len("a.npy")]
        name = os.path.basename(stem)[:-1]
        a, c = np.load(af), np.load(stem + "c.npy")
        want_c = np.cumsum(a)
        if os.path.exists(stem + "p.npy"):
            p = np.load(stem + "p.npy")
            n_checked += 1
            if p.dtype != np.int64 or not np.array_equal(p - 1, np.argsort(a, kind="stable")):
                bad += 1
                print(f"CHECK FAIL {name}: argsort differs from NumPy's stable argsort")
        if c.dtype != want_c.dtype or c.shape != want_c.shape:
            bad += 1
            print(f"CHECK FAIL {name}: cumsum dtype/shape {c.dtype}{c.shape}, NumPy {want_c.dtype}{want_c.shape}")
            continue
        if a.dtype.kind != "f":
            if not np.array_equal(c, want_c):
                bad += 1
                print(f"CHECK FAIL {name}: cumsum differs from NumPy's")
            continue
        exact = np.cumsum(a.astype(np.float64))
        scale = np.maximum(np.cumsum(np.abs(a.astype(np.float64))), 1e-30)
        ours = float(np.max(np.abs(c - exact) / scale)) if a.size else 0.0
        theirs = float(np.max(np.abs(want_c - exact) / scale)) if a.size else 0.0
        worst[name] = (ours, theirs)
        if ours > 10 * theirs + 4 * np.finfo(a.dtype).eps:
            bad += 1
            print(f"CHECK FAIL {name}: cumsum's error {ours:.2e} (relative to the sum of |a|), NumPy's {theirs:.2e}")
    for name in ("float32_16777216", "big"):
        if name in worst:
            print(f"cumsum {name}: largest error {worst[name][0]:.2e}, NumPy's {worst[name][1]:.2e}")
    print(f"NumPy checks: {bad} failed, {n_checked} argsorts and {len(glob.glob(os.path.join(work, '*_c.npy')))} cumsums compared")
    sys.exit(1 if bad else 0)

import cupy as cp


def timed(fn, reps=20):
    s, e = cp.cuda.Event(), cp.cuda.Event()
    t = []
    for r in range(reps + 3):
        s.record()
        fn()
        e.record()
        e.synchronize()
        if r >= 3:
            t.append(cp.cuda.get_elapsed_time(s, e) * 1e3)
    t.sort()
    return t[len(t) // 2]


cp.random.seed(1)
u = cp.random.rand(1 << 24, dtype=cp.float32)
su = cp.sort(u)
assert bool((su[1:] >= su[:-1]).all())
big = cp.random.rand(1 << 26, dtype=cp.float32)
print(f"RESULT cupy_version {cp.__version__}")
print(f"RESULT cupy_sort {timed(lambda: cp.sort(u)):.2f}")
print(f"RESULT cupy_argsort {timed(lambda: cp.argsort(u)):.2f}")
print(f"RESULT cupy_cumsum {timed(lambda: cp.cumsum(big)):.2f}")
