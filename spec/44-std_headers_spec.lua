-- The C and C++ standard headers that CUDA code includes compile on both devices alike (issue 29): NVRTC ships
-- none (`cannot open source file "stdio.h"`), so cudadev gives it its own (lua/cudadev/nvrtc_std.hpp, NOTE
-- [nvrtc standard headers] in src/nvrtc_std.c); the cpu device's g++ reads the system's.
--
-- Each header is included alone by a kernel that uses what it declares and writes the values to a float64
-- array: NVRTC compiles each for sm_90 without a GPU, and each device that is present runs it and must give
-- the values computed here in Lua (the GPU's launches pending without one). printf is read from a child
-- process's standard output. A header the caller supplies (the headers option, include_paths, an -I option)
-- keeps precedence over ours, also when one of ours includes it; host-only names are refused by name.
local helper = require "spec.helper"
local cd = require "cudadev"

local nvrtc_it = helper.nvrtc_it

local FLT_MAX = (2 - 2 ^ -23) * 2 ^ 127
local DBL_MAX = (2 - 2 ^ -52) * 2 ^ 1023
local F32_SQRT2 = string.unpack("f", string.pack("f", math.sqrt(2)))

-- name -> {body of the kernel use(double *o), the values o must hold}
local USES = {
  { "stdio.h", "o[0] = EOF; o[1] = sizeof(size_t);", { -1, 8 } },
  { "stdlib.h", [[
    int *p = (int *)malloc(2 * sizeof(int));
    p[0] = 5; p[1] = abs(-6);
    o[0] = p[0] + p[1]; free(p);
    o[1] = EXIT_FAILURE; o[2] = labs(-7L); o[3] = (double)llabs(-8LL);]], { 11, 1, 7, 8 } },
  { "string.h", [[
    float f = 1.5f; unsigned u; int a[4] = {1, 2, 3, 4};
    memcpy(&u, &f, sizeof u); memset(a, 0, sizeof a);
    o[0] = u; o[1] = a[0] + a[3];]], { 1069547520, 0 } },
  { "math.h", [[
    o[0] = sqrt(2.0); o[1] = sqrtf(2.0f); o[2] = M_PI; o[3] = isinf(INFINITY) ? 1 : 0; o[4] = isnan(NAN) ? 1 : 0;
    o[5] = HUGE_VAL > 1e300 ? 1 : 0; o[6] = fabs(-2.5); o[7] = powf(2.0f, 10.0f); o[8] = M_SQRT2;]],
    { math.sqrt(2), F32_SQRT2, math.pi, 1, 1, 1, 2.5, 1024, math.sqrt(2) } },
  { "assert.h", "assert(o != 0); o[0] = 1;", { 1 } },
  -- assert.h follows NDEBUG at each inclusion, also after NVRTC's own assert was defined
  { "assert.h", "assert(o == 0); o[0] = 2;", { 2 }, "#define NDEBUG\n" },
  { "stdint.h", [[
    uint32_t u = UINT32_MAX; int64_t i = INT64_MIN; uint8_t b = (uint8_t)300; int16_t s = INT16_MIN;
    o[0] = u; o[1] = (double)i; o[2] = b; o[3] = sizeof(int64_t); o[4] = sizeof(uintptr_t); o[5] = INT32_MAX;
    o[6] = (double)(UINT64_C(1) << 40); o[7] = s; o[8] = (double)SIZE_MAX;]],
    { 4294967295, -2 ^ 63, 44, 8, 8, 2147483647, 2 ^ 40, -32768, 2 ^ 64 } },
  { "stddef.h", [[
    int *p = NULL;
    o[0] = offsetof(S, d); o[1] = sizeof(size_t); o[2] = sizeof(ptrdiff_t); o[3] = p == 0 ? 1 : 0;
    o[4] = alignof(max_align_t) >= 8 ? 1 : 0;]], { 8, 8, 8, 1, 1 }, "struct S { char c; double d; };\n" },
  { "limits.h", [[
    o[0] = CHAR_BIT; o[1] = INT_MAX; o[2] = INT_MIN; o[3] = UINT_MAX; o[4] = SHRT_MAX; o[5] = (double)LLONG_MAX;
    o[6] = SCHAR_MIN; o[7] = UCHAR_MAX; o[8] = (double)ULLONG_MAX; o[9] = (double)LONG_MIN;]],
    { 8, 2147483647, -2147483648, 4294967295, 32767, 2 ^ 63, -128, 255, 2 ^ 64, -2 ^ 63 } },
  { "float.h", [[
    o[0] = FLT_MAX; o[1] = FLT_EPSILON; o[2] = DBL_EPSILON; o[3] = FLT_MIN; o[4] = DBL_MAX; o[5] = FLT_MANT_DIG;
    o[6] = DBL_DIG; o[7] = DBL_MIN; o[8] = FLT_RADIX;]],
    { FLT_MAX, 2 ^ -23, 2 ^ -52, 2 ^ -126, DBL_MAX, 24, 15, 2 ^ -1022, 2 } },
  { "cstdio", "o[0] = EOF; o[1] = sizeof(std::size_t); if (o[2] == 1) std::printf(\"never\\n\");", { -1, 8, 0 } },
  { "cstdlib", [[
    int *p = (int *)std::malloc(sizeof(int));
    *p = std::abs(-3); o[0] = *p; std::free(p); o[1] = EXIT_SUCCESS;]], { 3, 0 } },
  { "cstring", [[
    double d = 0.5; long long bits; int a[2] = {7, 8};
    std::memcpy(&bits, &d, sizeof bits); std::memset(a, 0, sizeof a);
    o[0] = (double)(bits >> 52); o[1] = a[1];]], { 1022, 0 } },
  { "cmath", [[
    o[0] = std::sqrt(2.0); o[1] = std::sqrt(2.0f); o[2] = std::fabs(-1.25); o[3] = std::floor(2.7);
    o[4] = std::pow(2.0, 3.0); o[5] = std::fmax(1.0, 2.0); o[6] = std::exp(0.0); o[7] = std::isnan(o[0]) ? 1 : 0;
    o[8] = std::abs(-4.5); o[9] = std::round(2.5);]],
    { math.sqrt(2), F32_SQRT2, 1.25, 2, 8, 2, 1, 0, 4.5, 3 } },
  { "cassert", "assert(1 + 1 == 2); o[0] = 3;", { 3 } },
  { "cstdint", [[
    std::uint32_t u = 0xffffffffu; std::int64_t i = -(std::int64_t(1) << 40); std::uint8_t b = 255;
    o[0] = u; o[1] = (double)i; o[2] = (std::uint8_t)(b + 1); o[3] = sizeof(std::uintptr_t);]],
    { 4294967295, -2 ^ 40, 0, 8 } },
  { "cstddef", [[
    std::size_t n = 3; std::ptrdiff_t d = -2; std::nullptr_t z = nullptr; std::byte b{5};
    o[0] = (double)n; o[1] = (double)d; o[2] = z == nullptr ? 1 : 0; o[3] = static_cast<int>(b);
    o[4] = alignof(std::max_align_t) >= 8 ? 1 : 0;]], { 3, -2, 1, 5, 1 } },
  { "climits", "o[0] = INT_MAX; o[1] = (double)LONG_MAX; o[2] = CHAR_BIT; o[3] = USHRT_MAX;",
    { 2147483647, 2 ^ 63, 8, 65535 } },
  { "cfloat", "o[0] = FLT_MAX; o[1] = DBL_EPSILON; o[2] = FLT_DIG;", { FLT_MAX, 2 ^ -52, 6 } },
  { "type_traits", [[
    o[0] = std::is_same<int, std::remove_cv<const volatile int>::type>::value;
    o[1] = std::is_integral<unsigned char>::value + std::is_floating_point<float>::value;
    o[2] = std::is_signed<unsigned>::value; o[3] = sizeof(std::conditional<true, short, double>::type);
    o[4] = twice(21); o[5] = std::is_same_v<std::decay_t<const int (&)[3]>, const int *>;
    o[6] = std::is_same<std::make_unsigned_t<int>, unsigned>::value; o[7] = std::is_pointer<int *const>::value;
    o[8] = std::integral_constant<int, 9>::value; o[9] = std::is_enum<E>::value + std::is_class<E>::value;]],
    { 1, 2, 0, 2, 42, 1, 1, 1, 9, 1 }, [[
template <class T> __device__ typename std::enable_if<std::is_integral<T>::value, T>::type twice(T x) { return 2 * x; }
enum class E { a };
]] },
  { "utility", [[
    int a = 1, b = 2; std::swap(a, b); auto p = std::make_pair(a, 2.5);
    o[0] = a * 10 + b; o[1] = p.first + p.second; o[2] = pass(std::move(b)); o[3] = sum(std::make_index_sequence<5>{});
    o[4] = sizeof(decltype(std::declval<double>())); int old = std::exchange(a, 7); o[5] = old + a;]],
    { 21, 4.5, 1, 10, 8, 9 }, [[
template <class T> __device__ T pass(T &&x) { return std::forward<T>(x); }
template <class T, T... I> __device__ T sum(std::integer_sequence<T, I...>) { return (0 + ... + I); }
]] },
  { "limits", [[
    o[0] = std::numeric_limits<int>::max(); o[1] = std::numeric_limits<int>::min();
    o[2] = std::numeric_limits<float>::max(); o[3] = std::numeric_limits<float>::epsilon();
    o[4] = std::numeric_limits<double>::lowest(); o[5] = std::numeric_limits<unsigned char>::max();
    o[6] = std::numeric_limits<float>::infinity() > 1e38f ? 1 : 0; o[7] = std::numeric_limits<int>::digits;
    o[8] = (double)std::numeric_limits<long long>::max(); o[9] = std::numeric_limits<unsigned>::is_signed;
    o[10] = std::numeric_limits<double>::quiet_NaN() != std::numeric_limits<double>::quiet_NaN() ? 1 : 0;]],
    { 2147483647, -2147483648, FLT_MAX, 2 ^ -23, -DBL_MAX, 255, 1, 31, 2 ^ 63, 0, 1 } },
}

local function source(use)
  return ("%s#include <%s>\n%s\nextern \"C\" __global__ void use(double *o)\n{\n%s\n}\n"):format(
    use[4] and use[4]:find("^#define") and use[4] or "", use[1],
    use[4] and not use[4]:find("^#define") and use[4] or "", use[2])
end

local function label(use)
  return use[1] .. (use[4] and use[4]:find("^#define") and " after " .. use[4]:gsub("\n", "") or "")
end

-- The GPU's tests are registered everywhere: pending with the reason where there is none.
local function device_it(dev, name, fn)
  if dev == "cpu" then return it(name, fn) end
  return helper.gpu_it(name, fn)
end

describe("standard headers under NVRTC (compiled for sm_90)", function()
  for _, use in ipairs(USES) do
    nvrtc_it("<" .. label(use) .. "> compiles and declares what the kernel uses", function()
      local m = cd.compile(source(use), { arch = "sm_90", name = "use.cu" })
      assert.are.same({ "use" }, m.kernels)
    end)
  end

  nvrtc_it("all of them together, in each C++ dialect, with no warning", function()
    local t = {}
    for _, use in ipairs(USES) do t[#t + 1] = "#include <" .. use[1] .. ">" end
    local src = table.concat(t, "\n") .. [[

extern "C" __global__ void k(int *o, float *f) {
  std::uint32_t u = UINT32_MAX; o[0] = (int)u + INT_MAX + std::numeric_limits<int>::max();
  f[0] = std::sqrt(f[1]) + FLT_MAX; std::memcpy(o + 1, o, sizeof(int)); assert(o[0] != 1);
  static_assert(std::is_same<std::int64_t, long long>::value, "int64_t is CCCL's under NVRTC");
}
]]
    for _, std in ipairs({ "c++11", "c++14", "c++17", "c++20" }) do
      local m = cd.compile(src, { arch = "sm_90", options = { "-std=" .. std } })
      assert.are.equal("", m.log, std)
    end
  end)

  nvrtc_it("ours and CCCL's <cuda/std/...> can be included together, in either order", function()
    local ours = "#include <climits>\n#include <cstdint>\n#include <cfloat>\n#include <limits>\n#include <type_traits>\n"
    local cccl = "#include <cuda/std/climits>\n#include <cuda/std/cstdint>\n#include <cuda/std/limits>\n"
      .. "#include <cuda/std/type_traits>\n"
    local body = [[
extern "C" __global__ void k(long long *o) {
  o[0] = INT_MAX; o[1] = (long long)cuda::std::numeric_limits<uint64_t>::max();
  o[2] = std::numeric_limits<int64_t>::max(); o[3] = std::is_same<cuda::std::int64_t, std::int64_t>::value;
}
]]
    for _, src in ipairs({ ours .. cccl .. body, cccl .. ours .. body }) do
      local m = cd.compile(src, { arch = "sm_90" })
      assert.are.equal("", m.log)
    end
  end)

  nvrtc_it("NVRTC's own std::move and std::forward are kept, and ours serve without them", function()
    local src = "#include <utility>\n__global__ void k(int *o) { int a = 1; o[0] = std::move(a); }\n"
    cd.compile(src, { arch = "sm_90" })
    cd.compile(src, { arch = "sm_90", options = { "-builtin-move-forward=false" } })
  end)

  nvrtc_it("a host-only name is refused by name", function()
    for name, body in pairs({ FILE = "FILE *f = 0;", fopen = 'fopen("x", "r");', fprintf = 'fprintf(0, "x");' }) do
      local ok, err = pcall(cd.compile, "#include <stdio.h>\n__global__ void k() { " .. body .. " }\n",
        { arch = "sm_90" })
      assert.is_false(ok)
      assert.matches(('identifier "%s" is undefined'):format(name), err.log, 1, true)
    end
  end)
end)

describe("a header the caller supplies keeps precedence over ours", function()
  local dir
  setup(function()
    dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. helper.shell_quote(dir .. "/inc")))
    for name, text in pairs({ ["stdio.h"] = "#define CDV_MINE 1\n", ["limits.h"] = "#define CDV_MINE 2\n" }) do
      local f = assert(io.open(dir .. "/inc/" .. name, "w"))
      f:write(text)
      f:close()
    end
  end)
  teardown(function() os.execute("rm -rf " .. helper.shell_quote(dir)) end)

  -- <cstdio> and <climits> are ours: the <stdio.h> and <limits.h> they include must be the caller's
  local function check(include, want, opts)
    opts.arch = "sm_90"
    local src = ("#include <%s>\n#if CDV_MINE != %d\n#error not the caller's header\n#endif\n"
      .. "__global__ void k() {}\n"):format(include, want)
    cd.compile(src, opts)
  end

  nvrtc_it("the headers option", function()
    check("cstdio", 3, { headers = { ["stdio.h"] = "#define CDV_MINE 3\n" } })
    check("stdio.h", 3, { headers = { ["stdio.h"] = "#define CDV_MINE 3\n" } })
  end)
  nvrtc_it("an include_paths directory", function()
    check("cstdio", 1, { include_paths = { dir .. "/inc" } })
    check("climits", 2, { include_paths = { dir .. "/inc" } })
  end)
  nvrtc_it("an -I option, joined or not", function()
    check("cstdio", 1, { options = { "-I" .. dir .. "/inc" } })
    check("climits", 2, { options = { "-I", dir .. "/inc" } })
    check("stdio.h", 1, { options = { "--include-path=" .. dir .. "/inc" } })
  end)
end)

describe("standard headers and the disk cache", function()
  -- A child with the cache in dir compiles a <cstdio> kernel with inc on its include path; prints what it got.
  local function child(dir, inc)
    local code = ([[
local cd = require "cudadev"
local ok, err = pcall(cd.compile, '#include <cstdio>\n#ifdef CDV_MINE\n#error the caller\'s stdio.h\n#endif\n'
  .. '__global__ void k() { std::printf("x"); }', { arch = "sm_90", include_paths = { %q } })
local s = cd.kernel_cache_stats()
io.write(ok and "ok" or tostring(err.log):match("#error[^\n]*"), (" hits=%%d writes=%%d"):format(s.disk_hits, s.disk_writes))
]]):format(inc)
    local cmd = ("env -u CUDADEV_CACHE CUDADEV_CACHE_DIR=%s LUA_PATH=%s LUA_CPATH=%s lua5.4 -e %s 2>&1"):format(
      helper.shell_quote(dir), helper.shell_quote(package.path), helper.shell_quote(package.cpath),
      helper.shell_quote(code))
    local p = assert(io.popen(cmd, "r"))
    local out = p:read("a")
    p:close()
    return out
  end

  nvrtc_it("a stdio.h that appears on the include path, under our <cstdio>, misses the entry made without it",
    function()
      local dir = os.tmpname()
      os.remove(dir)
      assert(os.execute("mkdir -p " .. helper.shell_quote(dir .. "/inc")))
      finally(function() os.execute("rm -rf " .. helper.shell_quote(dir)) end)
      assert.are.equal("ok hits=0 writes=1", child(dir .. "/cache", dir .. "/inc"))
      assert.are.equal("ok hits=1 writes=0", child(dir .. "/cache", dir .. "/inc"))
      local f = assert(io.open(dir .. "/inc/stdio.h", "w"))
      f:write("#define CDV_MINE 1\n")
      f:close()
      assert.are.equal("#error directive: the caller's stdio.h hits=0 writes=0", child(dir .. "/cache", dir .. "/inc"))
    end)
end)

describe("standard headers on each device", function()
  for _, dev in ipairs({ "cpu", "cuda:0" }) do
    for _, use in ipairs(USES) do
      device_it(dev, ("<%s> on %s gives the values computed in Lua"):format(label(use), dev), function()
        local m = cd.compile(source(use), { device = dev, name = "use.cu" })
        local o = cd.zeros(16, "float64", { device = dev })
        m.use({ grid = 1, block = 1 }, o)
        local got = o:totable()
        for i, want in ipairs(use[3]) do
          assert.are.equal(want, got[i], ("o[%d] of <%s>"):format(i - 1, use[1]))
        end
      end)
    end

    -- The issue's example: the same answers on both devices.
    device_it(dev, "numeric_limits, INT_MAX, FLT_MAX, uint32_t, memcpy, sqrtf and assert on " .. dev, function()
      local m = cd.compile([[
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <climits>
#include <cfloat>
#include <cmath>
#include <cassert>
#include <limits>
extern "C" __global__ void mix(double *o, const float *x, int n)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  assert(x[i] >= 0);
  uint32_t bits;
  std::memcpy(&bits, &x[i], sizeof bits);
  o[4 * i] = std::numeric_limits<int>::max() - INT_MAX + sqrtf(x[i]);
  o[4 * i + 1] = bits;
  o[4 * i + 2] = x[i] < FLT_MAX ? FLT_MAX : 0;
  o[4 * i + 3] = (uint32_t)(bits * 2654435761u);
}
]], { device = dev })
      local n, xs = 64, {}
      for i = 1, n do xs[i] = (i - 1) * 0.75 end
      local o = cd.zeros(4 * n, "float64", { device = dev })
      m.mix({ dim = n }, o, cd.array(xs, "float32", { device = dev }), n)
      local got = o:totable()
      for i = 1, n do
        local bits = string.unpack("<I4", string.pack("<f", xs[i]))
        local want = { string.unpack("f", string.pack("f", math.sqrt(xs[i]))), bits, FLT_MAX,
          (bits * 2654435761) % 2 ^ 32 }
        for j = 1, 4 do assert.are.equal(want[j], got[4 * (i - 1) + j], ("x=%g, value %d"):format(xs[i], j)) end
      end
    end)

    device_it(dev, "printf through <stdio.h> and <cstdio> on " .. dev .. ", read from a child's standard output",
      function()
        local lua = os.getenv("LUA") or "lua5.4"
        local code = ([[
local cd = require "cudadev"
for _, h in ipairs({ "stdio.h", "cstdio" }) do
  local f = h == "cstdio" and "std::printf" or "printf"
  local m = cd.compile("#include <" .. h .. ">\n#include <cstdint>\n"
    .. 'extern "C" __global__ void say(int v) { uint32_t t = threadIdx.x; '
    .. f .. '("h29 %%s t=%%u v=%%d f=%%.2f\\n", "' .. h .. '", t, v + (int)t, 0.5 * t); }', { device = "%s" })
  m.say({ grid = 1, block = 3 }, 40)
  cd.synchronize()
end
io.stdout:write("h29 end\n")
]]):format(dev)
        local cmd = ("LUA_PATH=%s LUA_CPATH=%s %s -e %s 2>&1"):format(helper.shell_quote(package.path),
          helper.shell_quote(package.cpath), lua, helper.shell_quote(code))
        local pipe = assert(io.popen(cmd, "r"))
        local text = pipe:read("a")
        local ok = pipe:close()
        assert.is_true(ok == true, "the child failed:\n" .. text)
        local got = {}
        for line in text:gmatch("[^\n]+") do
          if line:find("^h29 ") then got[#got + 1] = line end
        end
        table.sort(got)
        local want = { "h29 end" }
        for _, h in ipairs({ "stdio.h", "cstdio" }) do
          for t = 0, 2 do want[#want + 1] = ("h29 %s t=%d v=%d f=%.2f"):format(h, t, 40 + t, 0.5 * t) end
        end
        table.sort(want)
        assert.are.same(want, got)
      end)
  end
end)
