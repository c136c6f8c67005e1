/* A front-end file calling the driver's symbol table: must not compile (NOTE [layers]). */
#include "cdv.h"
#include "syms.h"
int cdv_probe(void);
int cdv_probe(void) { return CDV_HAVE_CU(cuInit); }
