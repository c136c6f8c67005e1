-- Build and install from a checkout, with no network:
--   luarocks --lua-version=5.4 make rockspec/cudadev-scm-1.rockspec
-- (--lua-version=5.4: Debian's luarocks defaults to Lua 5.1, for which the dependency below cannot be met.)
-- It builds only the module (deployed to the tree's lib/lua/5.4) and luacuda (the tree's bin).
rockspec_format = "3.0"
package = "cudadev"
version = "scm-1"
source = {
   url = "git+file://.",
}
description = {
   summary = "An embeddable Lua 5.4 runtime for GPU work (CUDA driver + NVRTC, opened at run time)",
   detailed = [[
cudadev gives Lua devices, streams, events, arrays and NVRTC-compiled kernels, with a cpu device that runs
the same kernels where no GPU is present. libcuda and NVRTC are opened with dlopen when first needed, so the
module loads on any machine; the CUDA toolkit's headers are needed to build it.
]],
   license = "MIT",   -- LICENSE, as Lua's own
}
dependencies = {
   "lua >= 5.4, < 5.5",
}
build = {
   type = "cmake",
   variables = {
      CMAKE_BUILD_TYPE = "Release",
      CMAKE_INSTALL_PREFIX = "$(PREFIX)",
      LUA_INCDIR = "$(LUA_INCDIR)",
      LUA_LIBDIR = "$(LUA_LIBDIR)",
      CUDADEV_LUA_CMOD_DIR = "$(LIBDIR)",    -- cudadev.so, deployed by LuaRocks into its Lua C module dir
      CUDADEV_INSTALL_DEV = "OFF",           -- libcudadev.a and cudadev.h are for hosts, not for require
      CUDADEV_EXAMPLES = "OFF",              -- nor the embedding examples and the launch benchmark
      CUDADEV_MPI = "OFF",                   -- nor cudadev_mpi.so (cd.mpi): a rock is the module and luacuda
      CUDADEV_TESTS = "OFF",                 -- nor the C tests: it builds only what it installs
   },
}
