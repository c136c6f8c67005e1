/*
 * fuzz_sig.c: libFuzzer target for the kernel-signature parser (src/sig.c).
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -Isrc \
 *         tests/fuzz_sig.c src/sig.c src/scan.c src/diskcache.c src/util.c -o /tmp/fuzz_sig
 *   mkdir -p /tmp/sig_corpus && /tmp/fuzz_sig -max_total_time=180 /tmp/sig_corpus
 *
 * The input is the source, unterminated (libFuzzer's buffer is exactly `size` bytes, so ASan sees any
 * read past it); its last line doubles as a name to resolve. Every kernel found is then resolved by
 * name and with several template argument lists, and the results are checked for consistency.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sig.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void require(int ok) {
  if (!ok) abort();
}

static void check_sig(const cdv_sig *g) {
  require(memchr(g->name, '\0', sizeof g->name) != NULL);
  require(g->nparams >= 0 && (g->nparams == 0 || g->params != NULL));
  require(g->ntparams >= 0 && g->ntparams <= CDV_SIG_MAXTPARAMS);
  for (int i = 0; i < g->nparams; i++) {
    const cdv_param *p = &g->params[i];
    require(memchr(p->type, '\0', sizeof p->type) != NULL && memchr(p->name, '\0', sizeof p->name) != NULL);
    require(p->kind >= CDV_P_PTR && p->kind <= CDV_P_STRUCT);
    require(p->kind != CDV_P_PTR || (p->size == 8 && p->depth >= 1));
    require(p->kind != CDV_P_VEC || (p->nelem >= 1 && p->nelem <= 4 && p->size > 0));
    require(p->kind != CDV_P_STRUCT || p->size == 0);
    require(strcmp(cdv_pkind_name(p->kind), "unknown") != 0);
  }
}

static void try_resolve(const cdv_sigs *s, const char *name) {
  cdv_sig r;
  char err[200];
  if (cdv_sig_resolve(s, name, &r, err, sizeof err) == 0)
    check_sig(&r);
  else
    require(err[0] != '\0' && r.params == NULL && r.nparams == 0);
  cdv_sig_clear(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  cdv_sigs s;
  char err[256];
  if (cdv_sig_parse((const char *)data, size, &s, err, sizeof err) != 0) {
    require(err[0] != '\0' && s.n == 0 && s.v == NULL);
    return 0;
  }
  size_t off = size;
  while (off > 0 && data[off - 1] != '\n') off--;
  char name[256];
  size_t n = size - off < sizeof name - 1 ? size - off : sizeof name - 1;
  memcpy(name, data + off, n);
  name[n] = '\0';
  try_resolve(&s, name);
  static const char *const args[] = {
      "", "<>", "<int>", "<float4, 3>", "<T *, Foo<int, 2>, void>", "<int &, char, short, long, (1 > 2), 4>"};
  for (int i = 0; i < s.n && i < 32; i++) {
    check_sig(&s.v[i]);
    for (size_t a = 0; a < sizeof args / sizeof args[0]; a++) {
      char expr[400];
      snprintf(expr, sizeof expr, "%s%s", s.v[i].name, args[a]);
      try_resolve(&s, expr);
    }
  }
  cdv_sigs_free(&s);
  return 0;
}
