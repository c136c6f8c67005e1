/* A backend file using Lua: must not compile (NOTE [layers]). */
#include <lua.h>
int cdv_probe(void);
int cdv_probe(void) { return LUA_OK; }
