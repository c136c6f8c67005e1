/*
 * mangle.h: the Itanium C++ ABI name of a simple kernel (mangle.c, NOTE [mangled names]).
 */
#ifndef CDV_MANGLE_H
#define CDV_MANGLE_H
#include <stddef.h>

/* The mangled name of `void name(types...)` into out (n bytes): 0, or -1 when name or a type is not one that
 * mangle.c writes (a namespace, a template, a reference, an array, a function pointer...). */
int cdv_mangle(const char *name, int nparams, const char *const *types, char *out, size_t n);
#endif
