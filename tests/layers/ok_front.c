/* The control: a front-end file with the front end's headers compiles. */
#include "cdv.h"
int cdv_probe(void);
int cdv_probe(void) { return LUA_OK + (int)sizeof(cdv_backend); }
