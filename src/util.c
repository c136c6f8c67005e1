/*
 * util.c: small helpers every layer shares: filling a cdv_err, freeing a compiled image. No Lua here: the
 * backends' own tests link it.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend.h"

/* Fill e from a printf-style message; -1 lets a backend write `return cdv_fail(...)`. */
int cdv_fail(cdv_err *e, const char *api, int code, const char *name, const char *fmt, ...) {
  if (!e) return -1;
  e->api = api ? api : "";
  e->code = code;
  snprintf(e->name, sizeof e->name, "%s", name ? name : "");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->message, sizeof e->message, fmt, ap);
  va_end(ap);
  e->sticky = 0;
  e->log = NULL;
  return -1;
}

/* Free every field and leave img empty, so a second call is harmless. */
void cdv_image_free(cdv_image *img) {
  if (!img) return;
  free(img->ptx);
  free(img->cubin);
  free(img->path);
  free(img->log);
  for (int i = 0; img->lowered && i < img->nentries; i++) free(img->lowered[i]);
  free(img->lowered);
  memset(img, 0, sizeof *img);
}
