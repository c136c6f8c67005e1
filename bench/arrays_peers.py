"""bench/arrays_peers.py: the peer side of bench/arrays_run. PyTorch's and CuPy's a + b and sum of 2^26 float32,
CuPy's sort, argsort, cumsum, mask selection and concatenate (issue 28's rows),
and PyTorch's device-to-device copy of 256 MiB (cudaMemcpyAsync: the C copy the traffic goal is measured
against), each timed by CUDA events around the call (allocation of the result included, as cudadev's), median
of 30 after 3 warm-ups, results checked. Output: `RESULT name microseconds` lines; a peer that cannot be
imported is skipped with the reason on stderr."""
import sys

N = 1 << 26
try:
    import torch
except ImportError as e:
    print(f"arrays_peers: no PyTorch: {e}", file=sys.stderr)
    sys.exit(0)


def timed(fn, reps=30):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t = []
    for r in range(reps + 3):
        s.record()
        fn()
        e.record()
        e.synchronize()
        if r >= 3:
            t.append(s.elapsed_time(e) * 1e3)
    t.sort()
    return t[len(t) // 2]


i = torch.arange(N, device="cuda", dtype=torch.int32)
a = (i % 1024).float()
b = ((i * 7) % 1000).float() / 8
expect = 523776.0 * (N // 1024)
assert torch.equal((a + b)[:4096], a[:4096] + b[:4096]) and float(a.sum()) == expect
c = torch.full_like(a, -1.0)
print(f"RESULT torch_add {timed(lambda: a + b):.2f}")
print(f"RESULT torch_sum {timed(lambda: a.sum()):.2f}")
print(f"RESULT torch_copy {timed(lambda: c.copy_(a)):.2f}")
assert torch.equal(c, a)
print(f"RESULT torch_version {torch.__version__}")
# issue 28: std of the same data, and matmul of 256 stacked 256 x 256 float32 matrices (bench/arrays.lua's rows)
sd_expect = ((1024 * 1024 - 1) / 12) ** 0.5
assert abs(float(a.std(correction=0)) - sd_expect) <= 1e-4 * sd_expect
print(f"RESULT torch_std {timed(lambda: a.std(correction=0)):.2f}")
gen = torch.Generator(device="cuda").manual_seed(28)
x = torch.rand((256, 256, 256), device="cuda", generator=gen)
y = torch.rand((256, 256, 256), device="cuda", generator=gen)
torch.backends.cuda.matmul.allow_tf32 = False  # full float32, as cudadev's and CuPy's default
assert torch.allclose(torch.matmul(x, y)[7], x[7] @ y[7], rtol=1e-4, atol=1e-3)
print(f"RESULT torch_bmm {timed(lambda: torch.matmul(x, y)):.2f}")
try:
    import cupy as cp
except ImportError as e:
    print(f"arrays_peers: no CuPy: {e}", file=sys.stderr)
    sys.exit(0)
ca, cb = cp.asarray(a), cp.asarray(b)
assert float(ca.sum()) == expect
print(f"RESULT cupy_add {timed(lambda: ca + cb):.2f}")
print(f"RESULT cupy_sum {timed(lambda: ca.sum()):.2f}")
print(f"RESULT cupy_version {cp.__version__}")
assert abs(float(ca.std()) - sd_expect) <= 1e-4 * sd_expect
print(f"RESULT cupy_std {timed(lambda: ca.std()):.2f}")
cx, cy = cp.asarray(x), cp.asarray(y)
assert cp.allclose(cp.matmul(cx, cy)[7], cx[7] @ cy[7], rtol=1e-4, atol=1e-3)
print(f"RESULT cupy_bmm {timed(lambda: cp.matmul(cx, cy)):.2f}")

# issue 28's rows: sort and argsort of 2^24 uniform float32, cumsum of 2^26, a[mask] selecting about half of
# 2^26, concatenate of two 2^25 (its traffic against torch_copy's)
cp.random.seed(1)
u = cp.random.rand(1 << 24, dtype=cp.float32)
su = cp.sort(u)
assert bool((su[1:] >= su[:-1]).all())
print(f"RESULT cupy_sort {timed(lambda: cp.sort(u)):.2f}")
print(f"RESULT cupy_argsort {timed(lambda: cp.argsort(u)):.2f}")
big = cp.random.rand(N, dtype=cp.float32)
print(f"RESULT cupy_cumsum {timed(lambda: cp.cumsum(big)):.2f}")
mask = big > 0.5
assert int(big[mask].size) == int(mask.sum())
print(f"RESULT cupy_mask {timed(lambda: big[mask]):.2f}")
h1, h2 = big[: N // 2], big[N // 2 :]
print(f"RESULT cupy_concat {timed(lambda: cp.concatenate((h1, h2))):.2f}")

# issue 31's rows: cupy.fuse and torch.compile of x * y + z and of ((x - y) ** 2).sum() on 2^26 float32 (the same
# data as bench/arrays.lua's a, b, a + b); torch.compile when it works on this host (it needs Triton)
def axpy(p, q, r):  # cupy.fuse names its kernel after the function: a lambda's name is no C identifier
    return p * q + r


def sqdiff(p, q):
    return cp.sum((p - q) ** 2)


fx = cp.fuse(axpy)
cc = ca + cb
assert bool(cp.allclose(fx(ca, cb, cc)[:4096], (ca * cb + cc)[:4096]))
print(f"RESULT cupy_fuse_axpy {timed(lambda: fx(ca, cb, cc)):.2f}")
fs = cp.fuse(sqdiff)
print(f"RESULT cupy_fuse_sq {timed(lambda: fs(ca, cb)):.2f}")
try:
    tx = torch.compile(lambda p, q, r: p * q + r)
    ts = torch.compile(lambda p, q: ((p - q) ** 2).sum())
    cx3 = a + b
    tx(a, b, cx3), ts(a, b)
    print(f"RESULT torch_compile_axpy {timed(lambda: tx(a, b, cx3)):.2f}")
    print(f"RESULT torch_compile_sq {timed(lambda: ts(a, b)):.2f}")
except Exception as e:  # no Triton, no compiler: the rows say so
    print(f"arrays_peers: torch.compile failed: {type(e).__name__}: {e}", file=sys.stderr)

# issue 32's rows: linalg on the same sizes as bench/arrays.lua's (solve 4096² float32 with one vector, a batch of
# 1024 32 x 32 float32 systems, cholesky of 4096² float64 and a 4096² float64 transposed copy, svd of 1024² float32),
# well-conditioned data
LN = 4096
gl = torch.Generator(device="cuda").manual_seed(32)
tA = torch.rand((LN, LN), device="cuda", generator=gl) + LN * torch.eye(LN, device="cuda")
tb = torch.rand((LN,), device="cuda", generator=gl)
assert float((tA @ torch.linalg.solve(tA, tb) - tb).abs().max()) <= 1e-3
tAb = torch.rand((1024, 32, 32), device="cuda", generator=gl) + 32 * torch.eye(32, device="cuda")
tbb = torch.rand((1024, 32, 1), device="cuda", generator=gl)
tR = torch.rand((LN, LN), device="cuda", generator=gl, dtype=torch.float64)
tS = tR @ tR.T + LN * torch.eye(LN, device="cuda", dtype=torch.float64)
tM = torch.rand((1024, 1024), device="cuda", generator=gl)
print(f"RESULT torch_solve {timed(lambda: torch.linalg.solve(tA, tb), 10):.2f}")
print(f"RESULT torch_bsolve {timed(lambda: torch.linalg.solve(tAb, tbb), 10):.2f}")
print(f"RESULT torch_tcopy {timed(lambda: tR.T.contiguous()):.2f}")
print(f"RESULT torch_chol {timed(lambda: torch.linalg.cholesky(tS), 10):.2f}")
print(f"RESULT torch_svd {timed(lambda: torch.linalg.svd(tM), 10):.2f}")
cA, cbv, cAb, cbb, cS, cM = (cp.asarray(v) for v in (tA, tb, tAb, tbb, tS, tM))
assert float(cp.abs(cA @ cp.linalg.solve(cA, cbv) - cbv).max()) <= 1e-3
print(f"RESULT cupy_solve {timed(lambda: cp.linalg.solve(cA, cbv), 10):.2f}")
print(f"RESULT cupy_bsolve {timed(lambda: cp.linalg.solve(cAb, cbb), 10):.2f}")
cR = cp.asarray(tR)
print(f"RESULT cupy_tcopy {timed(lambda: cp.ascontiguousarray(cR.T)):.2f}")
print(f"RESULT cupy_chol {timed(lambda: cp.linalg.cholesky(cS), 10):.2f}")
print(f"RESULT cupy_svd {timed(lambda: cp.linalg.svd(cM), 10):.2f}")

# issue 32's FFT rows: the sizes of bench/arrays.lua's (fft of 2^24 complex64, rfft of 2^24 float32, fft2 of 4096²
# complex64), results checked by their inverses
gf = torch.Generator(device="cuda").manual_seed(33)
fr = torch.rand((1 << 24,), device="cuda", generator=gf)
fc = fr.to(torch.complex64)
f2 = torch.rand((4096, 4096), device="cuda", generator=gf).to(torch.complex64)
assert float((torch.fft.ifft(torch.fft.fft(fc)) - fc).abs().max()) <= 1e-4
print(f"RESULT torch_fft {timed(lambda: torch.fft.fft(fc), 10):.2f}")
print(f"RESULT torch_rfft {timed(lambda: torch.fft.rfft(fr), 10):.2f}")
print(f"RESULT torch_fft2 {timed(lambda: torch.fft.fft2(f2), 10):.2f}")
cfr, cfc, cf2 = (cp.asarray(v) for v in (fr, fc, f2))
assert float(cp.abs(cp.fft.ifft(cp.fft.fft(cfc)) - cfc).max()) <= 1e-4
print(f"RESULT cupy_fft {timed(lambda: cp.fft.fft(cfc), 10):.2f}")
print(f"RESULT cupy_rfft {timed(lambda: cp.fft.rfft(cfr), 10):.2f}")
print(f"RESULT cupy_fft2 {timed(lambda: cp.fft.fft2(cf2), 10):.2f}")
