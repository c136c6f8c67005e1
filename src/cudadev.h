/*
 * cudadev.h: the public C API of cudadev, for hosts that embed Lua and want their scripts to drive the GPU.
 * Everything else in the library is hidden (-fvisibility=hidden).
 */
#ifndef CUDADEV_H
#define CUDADEV_H

#include <lua.h>

#if defined(_WIN32)
#define CUDADEV_API __declspec(dllexport)
#else
#define CUDADEV_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Opens the module: `luaL_requiref(L, "cudadev", luaopen_cudadev, 1)`. */
CUDADEV_API int luaopen_cudadev(lua_State *L);

#ifdef __cplusplus
}
#endif
#endif
