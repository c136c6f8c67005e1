-- examples/12-linalg.lua: cd.linalg, NumPy's numpy.linalg: a batch of small systems solved at once, a least-squares
-- line fit, the eigen-decomposition of a covariance matrix and a low-rank approximation by the SVD, each checked
-- by what it promises (a x = b, a v = v w, the error of the approximation). Runs on the cpu device (LAPACKE: make
-- test installs Debian's liblapacke; without it the first call says what to install).
--
--   make build && build/luacuda examples/12-linalg.lua
local cd = require "cudadev"
local L = cd.linalg
local on = { device = "cpu" }

-- 1. 1000 systems of 8 equations, one call: a stack {1000, 8, 8} and one right-hand side per system
cd.random.seed(12)
local a = cd.random.normal({ 1000, 8, 8 }, "float64", on) + cd.eye(8, 8, 0, "float64", on) * 8
local b = cd.random.normal({ 1000, 8, 1 }, "float64", on)
local x = L.solve(a, b)
print(("solve: %d systems, max |a x - b| = %.2e"):format(x.shape[1], cd.abs(cd.matmul(a, x) - b):max()))
local sign, logdet = L.slogdet(a)                                      -- one of each per system
print(("       det of the first %.6g = %d * exp(%.4f)"):format(L.det(a)[1], sign[1], logdet[1]))

-- 2. a least-squares line through noisy points: y = 3 + 0.5 t
local n = 200
local t = cd.linspace(0, 10, n, "float64", on)
local y = 3 + 0.5 * t + cd.random.normal(n, "float64", on) * 0.1
local design = cd.stack({ cd.ones(n, "float64", on), t }, 2)            -- columns 1 and t
local coef, residuals, rank = L.lstsq(design, y)
print(("lstsq: intercept %.3f, slope %.3f (rank %d, residual sum of squares %.3f)"):format(coef[1], coef[2], rank,
  residuals[1]))

-- 3. the principal axes of correlated 3-d data: eigh of the covariance matrix, eigenvalues ascending
local data = cd.matmul(cd.random.normal({ 500, 3 }, "float64", on),
  cd.array({ { 3, 0, 0 }, { 1, 1, 0 }, { 0, 0.2, 0.1 } }, "float64", on))
local centred = data - data:mean({ axis = 1, keepdims = true })
local cov = cd.matmul(centred.T, centred) / (500 - 1)
local w, v = L.eigh(cov)
print(("eigh:  variances along the axes %.3f %.3f %.3f, max |cov v - v w| = %.2e"):format(w[1], w[2], w[3],
  cd.abs(cd.matmul(cov, v) - v * w:reshape({ 1, 3 })):max()))

-- 4. the best rank-2 approximation of a 6 x 5 matrix (Eckart-Young): its error is the third singular value
local m = cd.random.normal({ 6, 5 }, "float64", on)
local u, s, vh = L.svd(m, { full_matrices = false })
local k = 2
local approx = cd.matmul(u:slice(1, k, 1, 2) * s:slice(1, k):reshape({ 1, k }), vh:slice(1, k))
print(("svd:   singular values %s; ||m - rank-2||_2 = %.4f = s[3] = %.4f"):format(
  table.concat((function() local r = {} for i = 1, 5 do r[i] = ("%.3f"):format(s[i]) end return r end)(), " "),
  L.norm(m - approx, 2), s[3]))
print(("norm:  fro %.4f, nuc %.4f, inf %.4f, pinv(m) m = I: %s"):format(L.norm(m), L.norm(m, "nuc"),
  L.norm(m, math.huge), tostring(cd.allclose(cd.matmul(L.pinv(m), m), cd.eye(5, 5, 0, "float64", on)))))
