/* A front-end file including the driver's header itself: must not compile (NOTE [layers]). */
#include "cdv.h"
#include <cuda.h>
int cdv_probe(void);
int cdv_probe(void) { return CUDA_SUCCESS; }
