# cudadevConfig.cmake: find_package(cudadev CONFIG REQUIRED) gives the imported target cudadev::cudadev, the
# static library for C hosts that embed Lua 5.4, with its include directory, Lua 5.4 (found as cudadev's own
# build found it: FindLua54.cmake, installed beside this file; LUA_INCDIR / LUA_LIBDIR are honoured) and the
# system libraries it needs. cudadev is under the MIT licence (share/doc/cudadev/LICENSE).
set(cudadev_LICENSE "MIT")
include(CMakeFindDependencyMacro)
find_dependency(Threads)
set(_cdv_module_path "${CMAKE_MODULE_PATH}")
list(PREPEND CMAKE_MODULE_PATH "${CMAKE_CURRENT_LIST_DIR}")
find_dependency(Lua54)
set(CMAKE_MODULE_PATH "${_cdv_module_path}")
unset(_cdv_module_path)
if(NOT TARGET Lua54::lua)
  set(cudadev_FOUND FALSE)
  set(cudadev_NOT_FOUND_MESSAGE "cudadev needs the Lua 5.4 library (apt-get install liblua5.4-dev, or set LUA_LIBDIR)")
  return()
endif()
include("${CMAKE_CURRENT_LIST_DIR}/cudadevTargets.cmake")
set_property(TARGET cudadev::cudadev APPEND PROPERTY INTERFACE_LINK_LIBRARIES Lua54::lua)
