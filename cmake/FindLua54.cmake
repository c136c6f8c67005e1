# FindLua54: Lua 5.4's headers (for the module) and library (for luacuda only).
#
# Honours LUA_INCDIR and LUA_LIBDIR (what LuaRocks passes), then pkg-config (lua5.4, lua-5.4, lua54, lua),
# then the usual places. Defines
#   Lua54::headers   interface target with the include directory (the module links nothing else of Lua:
#                    its Lua symbols come from the host interpreter)
#   Lua54::lua       the Lua library, when one was found (Lua54_LIBRARY)
#   Lua54_VERSION    "5.4.x" read from lua.h
find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
  pkg_search_module(PC_LUA QUIET lua5.4 lua-5.4 lua54 lua)
endif()

find_path(Lua54_INCLUDE_DIR lua.h
  HINTS ${LUA_INCDIR} ${PC_LUA_INCLUDE_DIRS}
  PATH_SUFFIXES lua5.4 lua54 lua-5.4 lua)
find_library(Lua54_LIBRARY NAMES lua5.4 lua54 lua-5.4 lua
  HINTS ${LUA_LIBDIR} ${PC_LUA_LIBRARY_DIRS})

if(Lua54_INCLUDE_DIR AND EXISTS "${Lua54_INCLUDE_DIR}/lua.h")
  file(STRINGS "${Lua54_INCLUDE_DIR}/lua.h" _lua_ver REGEX "^#define LUA_VERSION_(MAJOR|MINOR|RELEASE)[ \t]+\"[0-9]+\"")
  string(REGEX REPLACE ".*MAJOR[ \t]+\"([0-9]+)\".*MINOR[ \t]+\"([0-9]+)\".*RELEASE[ \t]+\"([0-9]+)\".*"
         "\\1.\\2.\\3" Lua54_VERSION "${_lua_ver}")
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(Lua54
  REQUIRED_VARS Lua54_INCLUDE_DIR
  VERSION_VAR Lua54_VERSION
  REASON_FAILURE_MESSAGE "cudadev needs Lua 5.4's headers: apt-get install liblua5.4-dev, or pass -DLUA_INCDIR=...")

if(Lua54_FOUND AND NOT Lua54_VERSION VERSION_GREATER_EQUAL 5.4)
  message(FATAL_ERROR "cudadev needs Lua 5.4; ${Lua54_INCLUDE_DIR}/lua.h is Lua ${Lua54_VERSION}")
endif()

if(Lua54_FOUND AND NOT TARGET Lua54::headers)
  add_library(Lua54::headers INTERFACE IMPORTED)
  set_target_properties(Lua54::headers PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${Lua54_INCLUDE_DIR}")
  if(Lua54_LIBRARY)
    add_library(Lua54::lua UNKNOWN IMPORTED)
    set_target_properties(Lua54::lua PROPERTIES IMPORTED_LOCATION "${Lua54_LIBRARY}"
                          INTERFACE_LINK_LIBRARIES Lua54::headers)
  endif()
endif()
mark_as_advanced(Lua54_INCLUDE_DIR Lua54_LIBRARY)
