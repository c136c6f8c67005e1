-- examples/11-fft.lua: cd.fft, NumPy's numpy.fft: the spectrum of a sampled signal (two sines), its strongest
-- frequencies found with cd.fft.rfftfreq, the signal filtered by zeroing a band and transformed back, and a 2-d
-- transform of an image-like array with its zero frequency moved to the centre. Runs on the default device: cuda:0
-- (cuFFT) when there is a GPU, else the cpu device (KISS FFT for complex64: apt-get install libkissfft-float131;
-- complex128 needs nothing).
--
--   make build && build/luacuda examples/11-fft.lua
local cd = require "cudadev"

print("device:", cd.get_device().alias)
local n, rate = 256, 64.0                       -- 256 samples at 64 Hz: 4 seconds
local t = {}
for i = 0, n - 1 do
  local s = i / rate
  t[#t + 1] = math.sin(2 * math.pi * 5 * s) + 0.5 * math.sin(2 * math.pi * 12 * s)
end
local x = cd.array(t, "float64")

-- the spectrum: n // 2 + 1 complex128 values, and the frequency of each
local X = cd.fft.rfft(x)
local freqs = cd.fft.rfftfreq(n, 1 / rate)
local mag = cd.abs(X)
local peaks = {}
for i = 1, mag.size do
  if mag[i] > n / 8 then peaks[#peaks + 1] = ("%.1f Hz (|X| = %.1f)"):format(freqs[i], mag[i]) end
end
print("strongest frequencies: " .. table.concat(peaks, ", "))   -- 5 Hz and 12 Hz

-- a low-pass filter: zero every frequency above 8 Hz, transform back to n samples
local keep = freqs:le(8.0)
local filtered = cd.fft.irfft(cd.where(keep, X, 0), n)
local err = 0
for i = 0, n - 1 do err = math.max(err, math.abs(filtered[i + 1] - math.sin(2 * math.pi * 5 * i / rate))) end
print(("after the low-pass filter, the 5 Hz sine remains (largest difference %.2e)"):format(err))

-- the round trip of complex64 data, and a 2-d transform centred with fftshift
local z = cd.array({ { 1, 0 }, { 0, 1 }, { -1, 0 }, { 0, -1 } }, "complex64")
print("fft of a turning phasor:", cd.fft.fft(z))                -- all its energy at frequency 1
print("back:", cd.fft.ifft(cd.fft.fft(z)))
local img = cd.ones({ 4, 4 }, "float32")
print("centred 2-d spectrum of a constant image:", cd.fft.fftshift(cd.abs(cd.fft.fft2(img))))
