/* The control: a backend file with the backend's headers compiles. */
#include "backend.h"
#include "syms.h"
int cdv_probe(void);
int cdv_probe(void) { return CDV_HAVE_CU(cuInit); }
