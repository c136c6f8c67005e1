/*
 * cpu_choose_path.c: which path each entry of a compile takes on the cpu device (NOTE [kernel paths],
 * NOTE [fast paths]), and the fast functions of those that take one.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <limits.h>
#include "cpu_compile.h"

/* (see NOTE [kernel paths]) each entry's path, from the scans of the source and the request's headers. */
int cdv_cpu_entry_paths(job *j, int wide) {
  const cdv_compile_req *req = j->req;
  int n = 0;
  for (int i = -1; i < req->nheaders; i++) n += i < 0 ? j->src.nfn : j->hdr[i].nfn;
  kfunc **all = calloc((size_t)n + 1, sizeof *all);
  j->entry_fibers = calloc((size_t)req->nentries + 1, sizeof *j->entry_fibers);
  if (!all || !j->entry_fibers) {
    free(all);
    return -1;
  }
  n = 0;
  for (int i = -1; i < req->nheaders; i++) {
    scanres *r = i < 0 ? &j->src : &j->hdr[i];
    for (int k = 0; k < r->nfn; k++) all[n++] = &r->fn[k];
  }
  j->entry_fast = calloc((size_t)req->nentries + 1, sizeof *j->entry_fast);
  j->fast_off = calloc((size_t)req->nentries + 1, sizeof *j->fast_off);
  j->entry_cand = calloc((size_t)req->nentries + 1, sizeof *j->entry_cand);
  j->why = calloc((size_t)req->nentries + 1, sizeof *j->why);
  if (!j->entry_fast || !j->fast_off || !j->entry_cand || !j->why) {
    free(all);
    return -1;
  }
  for (int changed = 1; changed;) {
    changed = 0;
    for (int a = 0; a < n; a++)
      for (int b = 0; b < n && !all[a]->sync; b++)
        if (all[b]->sync && all[b]->name[0]) {
          char pat[132];
          snprintf(pat, sizeof pat, " %s ", all[b]->name);
          if (strstr(all[a]->idents, pat)) all[a]->sync = changed = 1;
        }
  }
  for (int a = 0; a < n; a++) wide |= all[a]->sync && !all[a]->name[0];
  for (int i = 0; i < req->nentries; i++) {
    /* the entry's function: "ns::axpy<float>" names axpy */
    const char *en = req->entries[i];
    size_t end = strcspn(en, "<("), start = end;
    while (end > 0 && en[end - 1] == ' ') end--;
    start = end;
    while (start > 0 && cdv_is_ident1((unsigned char)en[start - 1])) start--;
    int found = 0, sync = 0;
    for (int a = 0; a < n; a++)
      if (strlen(all[a]->name) == end - start && !memcmp(all[a]->name, en + start, end - start) && end > start)
        found = 1, sync |= all[a]->sync;
    j->entry_fibers[i] = wide || !found || sync ? CDV_CPU_FLAG_FIBERS : 0;
    /* (see NOTE [fast paths]) A candidate when the kernel is one function of the source whose barriers are its
     * own (no function or macro it mentions needs fibers); hdr when what it calls may read threadIdx */
    int cand = found == 1 && !wide && !(req->is_expr && req->is_expr[i] == 2) && start == 0 &&
               (end == strlen(en) || (en[end] == '<' && en[strlen(en) - 1] == '>')), /* a name, or a template's */
        hdr = j->co.idirs.n > 0, self = -1;
    for (int a = 0; a < n; a++)
      if (strlen(all[a]->name) == end && !memcmp(all[a]->name, en, end) && end > 0) cand &= self < 0, self = a;
    for (int b = 0; cand && b < n; b++) {
      char pat[132];
      snprintf(pat, sizeof pat, " %s ", all[b]->name);
      if (b == self || !all[b]->name[0] || !strstr(all[self]->idents, pat)) continue;
      /* a callee that reaches a barrier is written into the kernel or keeps it off (NOTE [inlined helpers]):
       * its threadIdx is the kernel's then */
      hdr |= (!all[b]->sync && strstr(all[b]->idents, " threadIdx ")) || strstr(all[b]->idents, " cdv_hdr ") ||
             strstr(all[b]->idents, " __activemask ");
    }
    if (cand && (strstr(all[self]->idents, " __activemask ") || strstr(all[self]->idents, " cdv_hdr "))) hdr = 1;
    j->entry_cand[i] = cand ? 1 + hdr : 0;
    if (!cand && !j->why[i][0]) /* k.cpu_reason */
      snprintf(j->why[i], sizeof j->why[i], "%s",
               wide       ? "a barrier in a class body or in a file from an include path"
               : !found   ? "its body is not in the source or its headers"
               : start    ? "a kernel inside a named namespace"
               : self < 0 ? "its name is not the function's"
                          : "the kernel is defined more than once");
  }
  free(all);
  return 0;
}

/* " a b ": the named functions and macros of the source and headers that reach a barrier (NOTE [inlined helpers]). */
static char *sync_names(const job *j) {
  buf b = {0};
  buf_adds(&b, " ");
  for (int i = -1; i < j->req->nheaders; i++) {
    const scanres *r = i < 0 ? &j->src : &j->hdr[i];
    for (int k = 0; k < r->nfn; k++)
      if (r->fn[k].sync && !r->fn[k].alias && r->fn[k].name[0]) buf_adds(&b, r->fn[k].name), buf_adds(&b, " ");
  }
  if (b.oom) free(b.p);
  return b.oom ? NULL : b.p;
}

/* (see NOTE [fast paths]) The fast function and trampoline of each candidate entry; entry_fast says which. */
int cdv_cpu_fast_paths(job *j, const char *src, size_t n, buf *b) {
  const cdv_compile_req *req = j->req;
  char *sync = sync_names(j);
  if (!sync) return -1;
  /* "0": none; "tracked": every loop stores its thread's index (the default before NOTE [naming the thread]);
   * otherwise ("vector" too) only loops whose callees read the header do */
  const char *mode = getenv("CUDADEV_CPU_FAST");
  int tracked = mode && !strcmp(mode, "tracked");
  if (mode && !strcmp(mode, "0")) {
    memset(j->entry_fast, 0, (size_t)req->nentries * sizeof *j->entry_fast);
    for (int i = 0; i < req->nentries; i++) snprintf(j->why[i], sizeof j->why[i], "CUDADEV_CPU_FAST=0");
    free(sync);
    return 0;
  }
  for (int i = 0; i < req->nentries; i++) {
    j->entry_fast[i] = 0;
    if (j->fast_off[i]) snprintf(j->why[i], sizeof j->why[i], "its written-out fast function did not compile");
    if (j->fast_off[i] || !j->entry_cand[i]) continue;
    buf row = {0}, inst = {0};
    /* "axpy<float>": the function axpy, its fast function instantiated as cdv_fis_<sym><float, 1> */
    const char *en = req->entries[i], *lt = strchr(en, '<');
    char *base = lt ? strndup(en, (size_t)(lt - en)) : strdup(en);
    size_t tl = lt ? strlen(lt + 1) : 0;
    if (tl) buf_add(&inst, lt + 1, tl - 1), buf_adds(&inst, ", ");
    const char *ta = lt ? inst.p : "";
    int rc = !base || inst.oom
                 ? -1
                 : cdv_cpu_fis_kernel(req->name ? req->name : "kernel.cu", src, n, base, lt ? ta : NULL, j->syms[i],
                                      sync, tracked || j->entry_cand[i] == 2, b, &row, j->why[i], sizeof j->why[i]);
    free(base);
    if (rc < 0 || row.oom) {
      free(row.p), free(inst.p), free(sync);
      return -1;
    }
    j->entry_fast[i] = rc == 1 ? CDV_CPU_FLAG_SIMD : rc == 2 ? CDV_CPU_FLAG_FISSION : 0;
    if (rc > 0) {
      buf_addf(b,
               "extern \"C\" __attribute__((visibility(\"default\"))) void %s_fis(cdv_cpu_ctx *cdv_c_, void **cdv_a_, "
               "int) { cdv_run_fis<(cdv_fis_%s<%s1>), (cdv_fis_%s<%s0>)>(cdv_c_, cdv_a_); }\n",
               j->syms[i], j->syms[i], ta, j->syms[i], ta);
      buf_addf(b, "extern \"C\" __attribute__((visibility(\"default\"))) const unsigned long %s_fis_row = %s;\n",
               j->syms[i], row.p);
    }
    free(inst.p);
    free(row.p);
  }
  free(sync);
  return 0;
}
