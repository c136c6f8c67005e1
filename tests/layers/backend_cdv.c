/* A backend file reaching up into the front end: must not compile (NOTE [layers]). */
#include "cdv.h"
int cdv_probe(void);
int cdv_probe(void) { return 0; }
