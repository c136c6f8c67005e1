/*
 * mangle.c: the Itanium C++ ABI name of a kernel with simple parameters, as NVRTC and g++ give it
 * (NOTE [mangled names]).
 */
#include "mangle.h"
#include <stdio.h>
#include <string.h>

/* NOTE [mangled names]: a CUDA C++ kernel's symbol is its mangled name (`void kernel(float *, int)` is
 * `_Z6kernelPfi`), and code written for the driver API asks for that (cuModuleGetFunction), so
 * m["_Z6kernelPfi"] finds the kernel `kernel` too: on a CUDA device by NVRTC's lowered names, on the cpu device
 * (whose object keeps no such name: its trampolines are extern "C") by the name mangled here from the parameter
 * list sig.c read. Only what kernels commonly take is mangled: a kernel at namespace scope that is no template,
 * parameters of builtin types (int, unsigned, size_t as unsigned long, ...), named types (float4, a struct),
 * pointers to them and const, with the ABI's substitutions (`void add(float *, float *)` is `_Z3addPfS_`).
 * Anything else is not mangled, and that kernel is found by its own name only. */

typedef struct mg {
  char sub[32][96]; /* the substitution candidates met so far, fully written out, in order */
  int nsub;
  char *out;
  size_t n, cap;
  int bad;
} mg;

static void put(mg *m, const char *s) {
  size_t l = strlen(s);
  if (m->n + l + 1 > m->cap) {
    m->bad = 1;
    return;
  }
  memcpy(m->out + m->n, s, l + 1);
  m->n += l;
}

static const struct {
  const char *type, *code;
} builtin[] = {{"void", "v"},
               {"bool", "b"},
               {"char", "c"},
               {"signed char", "a"},
               {"unsigned char", "h"},
               {"short", "s"},
               {"short int", "s"},
               {"unsigned short", "t"},
               {"unsigned short int", "t"},
               {"int", "i"},
               {"signed", "i"},
               {"signed int", "i"},
               {"unsigned", "j"},
               {"unsigned int", "j"},
               {"long", "l"},
               {"long int", "l"},
               {"unsigned long", "m"},
               {"unsigned long int", "m"},
               {"long long", "x"},
               {"long long int", "x"},
               {"unsigned long long", "y"},
               {"unsigned long long int", "y"},
               {"float", "f"},
               {"double", "d"},
               {"size_t", "m"},
               {"ptrdiff_t", "l"},
               {"int8_t", "a"},
               {"uint8_t", "h"},
               {"int16_t", "s"},
               {"uint16_t", "t"},
               {"int32_t", "i"},
               {"uint32_t", "j"},
               {"int64_t", "l"},
               {"uint64_t", "m"},
               {"__half", "6__half"},
               {NULL, NULL}};

/* Emit key (a type written out) as its substitution when met before; 1 when it did. */
static int subst(mg *m, const char *key) {
  for (int i = 0; i < m->nsub; i++)
    if (!strcmp(m->sub[i], key)) {
      char s[16];
      if (i == 0)
        snprintf(s, sizeof s, "S_");
      else
        snprintf(s, sizeof s, "S%c_", "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"[(i - 1) % 36]);
      put(m, s);
      return 1;
    }
  return 0;
}

static void add_sub(mg *m, const char *key) {
  if (m->nsub < 32 && strlen(key) < sizeof m->sub[0])
    snprintf(m->sub[m->nsub++], sizeof m->sub[0], "%s", key);
  else
    m->bad = 1;
}

typedef struct ptype {
  char base[64]; /* the type under the pointers, without const */
  int depth;
  int cv[8]; /* cv[L]: the type at pointer level L is const (cv[0]: the base) */
} ptype;

/* The type at level L written out (no substitutions) into k. */
static void full(const ptype *p, int L, int cv, char *k, size_t n, const char *basecode) {
  char inner[96];
  if (L == 0)
    snprintf(inner, sizeof inner, "%s", basecode);
  else {
    char sub[96];
    full(p, L - 1, p->cv[L - 1], sub, sizeof sub, basecode);
    snprintf(inner, sizeof inner, "P%.90s", sub);
  }
  snprintf(k, n, "%s%.90s", cv ? "K" : "", inner);
}

static void emit(mg *m, const ptype *p, int L, int cv, const char *basecode, int basesub) {
  char key[96];
  full(p, L, cv, key, sizeof key, basecode);
  if (cv) {
    if (subst(m, key)) return;
    put(m, "K");
    emit(m, p, L, 0, basecode, basesub);
    add_sub(m, key);
    return;
  }
  if (L == 0) {
    if (basesub && subst(m, key)) return;
    put(m, basecode);
    if (basesub) add_sub(m, key);
    return;
  }
  if (subst(m, key)) return;
  put(m, "P");
  emit(m, p, L - 1, p->cv[L - 1], basecode, basesub);
  add_sub(m, key);
}

/* "const float *const *" as a base, pointer levels and their const; 0 when it is not that simple. */
static int read_type(const char *t, ptype *p) {
  memset(p, 0, sizeof *p);
  char w[128];
  int level = 0;
  size_t bl = 0;
  for (const char *s = t; *s;) {
    if (*s == ' ') {
      s++;
      continue;
    }
    if (*s == '*') {
      if (++level >= 8) return 0;
      s++;
      continue;
    }
    size_t l = strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_");
    if (l == 0 || l >= sizeof w) return 0; /* <, :, (, [ ...: not simple */
    memcpy(w, s, l), w[l] = 0, s += l;
    if (!strcmp(w, "const")) {
      p->cv[level] = 1;
    } else if (!strcmp(w, "volatile") || level > 0) {
      return 0;
    } else {
      if (bl + l + 2 > sizeof p->base) return 0;
      if (bl) p->base[bl++] = ' ';
      memcpy(p->base + bl, w, l + 1), bl += l;
    }
  }
  p->depth = level;
  return bl > 0;
}

int cdv_mangle(const char *name, int nparams, const char *const *types, char *out, size_t n) {
  mg m = {.out = out, .cap = n};
  if (n == 0) return -1;
  out[0] = 0;
  if (!name[0] || strpbrk(name, ":<> ")) return -1; /* namespaces and templates: not mangled here */
  char head[160];
  snprintf(head, sizeof head, "_Z%zu%s", strlen(name), name);
  put(&m, head);
  if (nparams == 0) put(&m, "v");
  for (int i = 0; i < nparams && !m.bad; i++) {
    ptype p;
    if (!read_type(types[i], &p)) return -1;
    const char *code = NULL;
    for (int b = 0; builtin[b].type && !code; b++)
      if (!strcmp(builtin[b].type, p.base)) code = builtin[b].code;
    char cls[80];
    int basesub = !code || code[0] == '6'; /* a named type is a substitution candidate, a builtin one is not */
    if (!code) {
      if (strchr(p.base, ' ')) return -1;
      snprintf(cls, sizeof cls, "%zu%s", strlen(p.base), p.base);
      code = cls;
    }
    if (!strcmp(p.base, "void") && p.depth == 0) return -1;
    emit(&m, &p, p.depth, 0, code, basesub); /* a parameter's own const is not in the name */
  }
  return m.bad ? -1 : 0;
}
