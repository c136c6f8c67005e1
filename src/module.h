/*
 * module.h: what module.c (cudadev.Module, the kernel cache) and kernel.c (cudadev.Kernel) share: the record
 * of a compiled and loaded module, counted by its Module values, the cache and each Kernel.
 */
#ifndef CDV_MODULE_H
#define CDV_MODULE_H

#include "cdv.h"
#include "sig.h"

typedef struct cdv_module {
  uint64_t key[2];
  cdv_device *dev; /* NULL: compiled for an arch with no device (not loaded) */
  unsigned generation;
  int arch;
  cdv_image img;
  void *handle; /* backend module */
  int nentries;
  char **entries; /* the names kernels are looked up by ("saxpy", "axpy<float>") */
  int nglobals, nauto; /* nauto: the globals the scanner found (the first ones), not named by expressions */
  char **globals; /* (see NOTE [module globals]) the names get_global takes ("table", "ns::counter"); their
                               * lowered names follow the kernels' in img.lowered */
  cdv_sigs sigs;
  int have_sigs;
  char sig_error[256]; /* why the source's kernels could not be read, when they could not */
  int refs; /* Module values + the cache list */
  struct cdv_module *next;
} cdv_module_t;

void cdv_module_ref(cdv_module_t *m);
void cdv_module_unref(cdv_module_t *m); /* the last reference unloads and frees it */
int cdv_module_no_device(lua_State *L, cdv_module_t *m); /* raises: compiled for an arch, not loaded */
const char *cdv_push_joined(lua_State *L, int n, char **v); /* "a, b, c" (pushed) */

/* kernel.c */
/* m's kernel `name`; timeout: its launches' default time limit (cd.compile's, -1 for none: NOTE [launch limits]) */
int cdv_push_kernel(lua_State *L, int mod_idx, cdv_module_t *m, const char *name, double timeout);
void cdv_kernel_open(lua_State *L);

#endif
