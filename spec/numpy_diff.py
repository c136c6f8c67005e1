#!/usr/bin/env python3
"""spec/numpy_diff.py: NumPy's side of spec/29-numpy_diff_spec.lua (the cases come from spec/numpy_diff.lua).

  numpy_diff.py prep CASES OUT      runs each case's `prep` statement (NumPy writes the files cudadev reads)
  numpy_diff.py compare CASES OUT   evaluates each case's expression with NumPy and compares cudadev's answer;
                                    OUT gets one line a case: ID<TAB>ok, or ID<TAB>fail<TAB>KIND<TAB>DETAIL

A case is one line, a Python dict: id, name, expr (NumPy, of the names in env), tol (ulps, "sum", "matmul"),
prep, env (the operands: A(dtype, shape, hex, view) rebuilds an Array from its bytes and takes the view cudadev
took; numbers are weak Python scalars) and got (cudadev's answer: A(...), V(lua value) or E(message)).

NumPy 1.24 (Debian 12) with NEP 50's weak promotion, which NumPy 2 made the default; where a later NumPy
changed an answer, NUMPY2 below gives the later answer, and says which version:
  - NumPy 2.1: floor, ceil and trunc of integer and bool arrays keep the dtype (no float result; numpy#26766)
  - NumPy 2.0: np.where takes Python scalars as weak (NEP 50), as the ufuncs do
  - NumPy 2.0: comparisons of an integer array with a Python integer out of its range give the true answer
    (1.24's weak state raises OverflowError)
"""
import math
import sys
import warnings

import numpy as np

if hasattr(np, "_set_promotion_state"):  # NumPy 1.24-1.26; NumPy 2 promotes weakly by default
    np._set_promotion_state("weak")
np.seterr(all="ignore")
warnings.filterwarnings("ignore")


class Got:
    """cudadev's answer: an Array (arr), a Lua value (lua) or an error (err)."""

    def __init__(self, arr=None, lua=None, err=None, is_lua=False, lst=None):
        self.arr, self.lua, self.err, self.is_lua, self.lst = arr, lua, err, is_lua, lst


class ShapeOnly:
    """NumPy's answer where only the dtype and shape mean anything (np.empty)."""

    def __init__(self, a):
        self.a = a


def array(dtype, shape, hx, view="b"):
    b = np.frombuffer(bytes.fromhex(hx), dtype=np.dtype(dtype)).reshape(shape).copy()
    return eval(view, {"b": b})


def A(dtype, shape, hx, view="b"):
    return array(dtype, shape, hx, view)


# ---------------------------------------------------------------------------------------------- helpers
def inplace(f, x, y):
    x = np.array(x, copy=True)
    f(x, y, out=x, casting="same_kind")
    return x


def argpos(f, x, axis, keepdims):
    return f(x, axis=axis, keepdims=keepdims) + 1  # cudadev's positions are 1-based


def special(name, x):
    x = np.asarray(x)
    dt = np.sin(np.zeros(0, x.dtype)).dtype  # NumPy's float result of an integer input
    f = getattr(math, name)
    out = np.array([f(v) for v in x.astype(np.float64).ravel()], dtype=np.float64).reshape(x.shape)
    return out.astype(dt)


def fft(name, x, n, axis, norm):
    """numpy.fft's answer with NumPy 2's dtypes: float32 and complex64 input keep single precision (NumPy 1 computes
    and answers in double)."""
    r = getattr(np.fft, name)(x, n, axis, norm)
    if np.asarray(x).dtype in (np.float32, np.complex64):
        r = r.astype(np.complex64 if r.dtype.kind == "c" else np.float32)
    return r


def put(x, i, v):
    c = x.copy()
    np.put(c, i, v)
    return c


def full_of(x, v):
    return np.full(x.shape, v, x.dtype)


def shape_only(a):
    return ShapeOnly(a)


def fail():
    raise ValueError("no element")


def eigh_parts(x):
    w, v = np.linalg.eigh(x)
    return [w, np.zeros_like(v)]  # cudadev gives a v - v w, which is zero


def solve2(x, y):
    """NumPy 2's solve (a 1-d b is one vector for every matrix; else b is a stack of matrices) on NumPy 1.24."""
    if y.ndim == 1:
        return np.linalg.solve(x, np.broadcast_to(y[:, None], x.shape[:-1] + (1,)))[..., 0]
    batch = np.broadcast_shapes(x.shape[:-2], y.shape[:-2])
    return np.linalg.solve(np.broadcast_to(x, batch + x.shape[-2:]), np.broadcast_to(y, batch + y.shape[-2:]))


def lstsq_parts(x, y):
    sol, res, rank, s = np.linalg.lstsq(x, y, rcond=None)
    return [sol, res, np.array([rank], np.int64), s]


# ---------------------------------------------------------------------------------------------- NumPy 2
def keep_int(f):
    def g(x, *a, **k):
        x = np.asarray(x)
        if x.dtype.kind in "biu":
            return x.copy()
        return f(x, *a, **k)

    return g


def exact_compare(f):
    def g(x, y, *a, **k):
        for s, arr in ((y, x), (x, y)):
            if type(s) is int and isinstance(arr, np.ndarray) and arr.dtype.kind in "iu":
                info = np.iinfo(arr.dtype)
                if not info.min <= s <= info.max:
                    xs = x.astype(object) if isinstance(x, np.ndarray) else x
                    ys = y.astype(object) if isinstance(y, np.ndarray) else y
                    return np.asarray(f(xs, ys), dtype=bool)
        return f(x, y, *a, **k)

    return g


def weak_where(c, x, y):
    dt = np.result_type(x, y)
    for v in (x, y):
        if type(v) is int and dt.kind in "iu" and not np.iinfo(dt).min <= v <= np.iinfo(dt).max:
            raise OverflowError("Python integer %d out of bounds for %s" % (v, dt))
    return np.where(c, np.asarray(x).astype(dt), np.asarray(y).astype(dt))


NUMPY2 = {"where": weak_where}
NUMPY2.update({name: keep_int(getattr(np, name)) for name in ("floor", "ceil", "trunc")})
NUMPY2.update({name: exact_compare(getattr(np, name)) for name in
               ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal")})


class NP:
    """np, with NUMPY2's later answers in place of 1.24's."""

    def __getattr__(self, name):
        return NUMPY2.get(name) or getattr(np, name)


ENV = {"np": NP(), "A": A, "inplace": inplace, "fft": fft, "argpos": argpos, "special": special, "full_of": full_of,
       "eigh_parts": eigh_parts, "lstsq_parts": lstsq_parts, "solve2": solve2,
       "shape_only": shape_only, "fail": fail, "float": float, "bytes": bytes,
       "put": put, "V": lambda v: Got(lua=v, is_lua=True), "E": lambda m: Got(err=m), "L": lambda l: Got(lst=l)}


def read_case(line):
    case = eval(line, dict(ENV))
    got = case["got"]
    if isinstance(got, np.ndarray):
        case["got"] = Got(arr=got)
    return case


# ---------------------------------------------------------------------------------------------- comparing
def short(v):
    if isinstance(v, np.ndarray):
        return "%s%s %s" % (v.dtype, list(v.shape), np.array2string(v.ravel()[:8], separator=",", threshold=8))
    if isinstance(v, Got):
        if v.err is not None:
            return "error: " + v.err
        return short(v.arr) if not v.is_lua else "Lua " + repr(v.lua)
    if isinstance(v, ShapeOnly):
        return short(v.a)
    if isinstance(v, np.generic):
        return "%s %r" % (v.dtype, v.item())
    return repr(v)[:200]


def eps(dt):
    return float(np.finfo(dt).eps) if np.dtype(dt).kind in "fc" else 0.0


def allowed(case, g, w, dt):
    """How far a float answer may be from NumPy's, element by element."""
    tol, env = case["tol"], case["env"]
    big = np.maximum(np.abs(g), np.abs(w))
    if tol == "sum":
        x = np.asarray(env["x"])
        x = np.abs(x.astype(np.complex128 if x.dtype.kind == "c" else np.float64))  # a complex's modulus
        ax, kd = env.get("axis"), env.get("keepdims", False)
        n = max(x.size if ax is None else x.shape[ax] if x.ndim else 1, 1)
        if case["name"].endswith("prod"):
            return 4 * eps(dt) * (n + 1) * big
        s = np.nansum(np.abs(x), axis=ax, keepdims=kd)
        if case["name"].endswith("mean"):
            s = s / n
        return 4 * eps(dt) * (n + 1) * np.broadcast_to(s, g.shape)
    if tol in ("var", "std"):
        x = np.asarray(env["x"]).astype(np.float64)
        ax, kd = env.get("axis"), env.get("keepdims", False)
        n = max(x.size if ax is None else x.shape[ax] if x.ndim else 1, 1)
        m2 = np.broadcast_to(np.mean(x * x, axis=ax, keepdims=kd) if x.size else 0.0, g.shape)
        lim = 8 * eps(dt) * (n + 1) * m2
        return np.sqrt(lim) if tol == "std" else lim
    if tol in ("cumsum", "cumprod"):
        x = np.abs(np.asarray(env["x"]).astype(np.float64))
        ax = env.get("axis")
        n = max(x.size if ax is None else x.shape[ax], 1)
        if tol == "cumprod":
            return 4 * eps(dt) * (n + 1) * big
        return 4 * eps(dt) * (n + 1) * np.cumsum(x, axis=ax).reshape(g.shape)
    if tol == "vdot":
        x, y = (np.abs(np.asarray(env[k]).astype(np.float64)).ravel() for k in ("x", "y"))
        return 4 * eps(dt) * (x.size + 1) * np.sum(x * y) if x.size == y.size else 0.0
    if tol in ("cmul", "cdiv"):  # a complex product or quotient: each part within eps of |x| |y| or |x| / |y|
        x, y = (np.abs(np.asarray(env[k]).astype(np.complex128)) for k in ("x", "y"))
        with np.errstate(all="ignore"):
            lim = 4 * eps(dt) * (x * y if tol == "cmul" else x / y)
        return np.broadcast_to(np.nan_to_num(lim, nan=0.0), g.shape)
    if tol == "fft":  # a transform's error grows with log n and the sum of the magnitudes it adds
        x = np.abs(np.asarray(env["x"]).astype(np.complex128))
        n = max(x.size, 2)
        return 16 * eps(dt) * (math.log2(n) + 1) * max(float(np.sum(x)), 1.0)
    if tol == "matmul":
        x, y = (np.abs(np.asarray(env[k]).astype(np.float64)) for k in ("x", "y"))
        k = x.shape[-1] if x.ndim else 1
        return 4 * eps(dt) * (k + 1) * np.broadcast_to(np.matmul(x, y), g.shape)
    if tol == "linalg":
        # LAPACK against NumPy's LAPACK: the inputs are well conditioned, so each answer is within a small multiple
        # of eps times the size of the matrices and of the answer's largest element
        x = np.asarray(env["x"])
        k = max(x.shape[-1] if x.ndim else 1, 1)
        scale = max(1.0, float(np.max(big))) if big.size else 1.0
        return 64 * eps(dt) * (k + 1) * (k + 1) * scale
    ulps = float(tol)
    sp = np.spacing(big.astype(dt)).astype(np.float64)
    return ulps * np.abs(sp)


def values_differ(case, g, w, dt):
    """None when g and w (arrays of NumPy's shape) agree, else (kind, detail)."""
    if np.dtype(dt).kind == "c":  # each part as a float of the parts' dtype
        part = np.finfo(dt).dtype
        r = values_differ(case, np.real(g).astype(part), np.real(w).astype(part), part)
        if r:
            return r[0], "real part " + r[1]
        r = values_differ(case, np.imag(g).astype(part), np.imag(w).astype(part), part)
        return (r[0], "imaginary part " + r[1]) if r else None
    if np.dtype(dt).kind != "f":
        bad = g != w
        if bad.any():
            i = tuple(np.argwhere(bad)[0])
            return "value", "at %s: cudadev %r, numpy %r" % (list(i), g[i].item(), w[i].item())
        return None
    g64, w64 = g.astype(np.float64), w.astype(np.float64)
    gn, wn = np.isnan(g64), np.isnan(w64)
    if (gn != wn).any():
        i = tuple(np.argwhere(gn != wn)[0])
        return "nan", "at %s: cudadev %r, numpy %r" % (list(i), g64[i].item(), w64[i].item())
    ok = gn | (g64 == w64)
    finite = ~ok & np.isfinite(g64) & np.isfinite(w64)
    lim = allowed(case, g64, w64, dt)
    ok |= finite & (np.abs(g64 - w64) <= np.broadcast_to(lim, g64.shape))
    if not ok.all():
        i = tuple(np.argwhere(~ok)[0])
        return "value", "at %s: cudadev %r, numpy %r" % (list(i), g64[i].item(), w64[i].item())
    return None


def lua_kind_ok(v, kind):
    if kind == "b":
        return type(v) is bool
    if kind in "iu":
        return type(v) is int
    return type(v) is float


def compare_lua(case, v, want):
    """cudadev gave a Lua value: a number, boolean, string (bytes) or nested table (list)."""
    if isinstance(want, (bytes, list)):
        if isinstance(want, list):
            w = np.array(want, dtype=object)
            if not isinstance(v, list) or np.array(v, dtype=object).shape != w.shape:
                return "shape", "cudadev %s, numpy %s" % (short(v), short(want))
            flat_g, flat_w = np.array(v, dtype=object).ravel(), w.ravel()
            u64 = getattr(case["env"].get("x"), "dtype", None) == np.uint64
            for a, b in zip(flat_g, flat_w):
                if u64 and type(a) is int and a < 0:
                    a += 1 << 64  # a uint64 element above 2^63 - 1: the Lua integer of the same 64 bits
                if type(a) is not type(b) or not (a == b or (a != a and b != b)):
                    return "value", "cudadev %s, numpy %s" % (short(v), short(want))
            return None
        return None if v == want else ("value", "cudadev %s, numpy %s" % (short(v), short(want)))
    w = np.asarray(want)
    if w.ndim != 0:
        return "shape", "cudadev gave a Lua value %r, numpy %s" % (v, short(w))
    if w.dtype.kind == "c":  # a complex answer reaches Lua as the pair {re, im}
        if not isinstance(v, list) or len(v) != 2:
            return "dtype", "cudadev gave Lua %r for numpy's %s %r" % (v, w.dtype, w.item())
        return values_differ(case, np.array(complex(v[0], v[1]), dtype=w.dtype), w, w.dtype)
    if not lua_kind_ok(v, w.dtype.kind):
        return "dtype", "cudadev gave Lua %s %r for numpy's %s %r" % (type(v).__name__, v, w.dtype, w.item())
    if w.dtype.kind == "u" and type(v) is int and v < 0:
        v += 1 << 64  # a uint64 above 2^63 - 1 reaches Lua as the integer of the same 64 bits
    if w.dtype.kind in "biu":
        return None if v == w.item() else ("value", "cudadev Lua %r, numpy %s %r" % (v, w.dtype, w.item()))
    return values_differ(case, np.array(float(v)), w, w.dtype)


def compare(case):
    got = case["got"]
    try:
        want = eval(case["expr"], dict(ENV), dict(case["env"]))
    except Exception as e:  # noqa: BLE001 - any NumPy error is "raises"
        want = Got(err="%s: %s" % (type(e).__name__, e))
    w_err = isinstance(want, Got) and want.err is not None
    if got.err is not None or w_err:
        if got.err is not None and w_err:
            return None
        return "raise", "cudadev %s; numpy %s" % (short(got), short(want))
    if got.is_lua:
        return compare_lua(case, got.lua, want)
    if got.lst is not None:
        if not isinstance(want, (list, tuple)) or len(want) != len(got.lst):
            return "shape", "cudadev %d arrays, numpy %s" % (len(got.lst), short(want))
        for k, (g, w) in enumerate(zip(got.lst, want)):
            r = compare_arrays(case, g, w)
            if r:
                return r[0], "array %d: %s" % (k + 1, r[1])
        return None
    return compare_arrays(case, got.arr, want)


def compare_arrays(case, g, want):
    only_shape = isinstance(want, ShapeOnly)
    w = np.asarray(want.a if only_shape else want)
    if g.dtype != w.dtype:
        return "dtype", "cudadev %s, numpy %s" % (short(g), short(w))
    if g.shape != w.shape:
        return "shape", "cudadev %s, numpy %s" % (short(g), short(w))
    if only_shape:
        return None
    return values_differ(case, g, w, g.dtype)


def main():
    mode, cases, out = sys.argv[1:4]
    with open(cases) as f, open(out, "w") as o:
        for line in f:
            case = read_case(line)
            if mode == "prep":
                exec(case["prep"], dict(ENV), dict(case["env"]))
                continue
            try:
                r = compare(case)
            except Exception as e:  # noqa: BLE001 - a comparison that breaks is a failure to report
                r = ("compare", "%s: %s" % (type(e).__name__, e))
            if r is None:
                o.write("%d\tok\n" % case["id"])
            else:
                o.write("%d\tfail\t%s\t%s\n" % (case["id"], r[0], r[1].replace("\t", " ").replace("\n", " ")))


if __name__ == "__main__":
    main()
