/*
 * cpu_object.c: looks inside a compiled cpu kernel object (an ELF shared object) before it is loaded.
 *
 * NOTE [no static initialisers]: dlopen runs an object's initialisers (.preinit_array, .init_array, .ctors)
 * in the calling thread, and registers its finalisers (.fini_array, .dtors, __cxa_atexit) to run at dlclose
 * or exit: in the host process, outside the fork of NOTE [fault containment] (cpu_run.c). A kernel source
 * with `struct S { S() { *(int *)0 = 1; } } s;` would kill the host at load, one with a loop would hang it,
 * one whose destructor calls exit() would crash it at exit. Loading the object in a child first would not
 * help: the parent still has to dlopen it, and an initialiser need not behave the same twice. So the cpu
 * device refuses them by name, as CUDA refuses dynamic initialisation of __device__ variables: the object's
 * initialiser and finaliser arrays may hold only the C runtime's own entries (frame_dummy,
 * __do_global_dtors_aux and set_fast_math, found by name in .symtab, each once; an object without .symtab may
 * hold one unnamed entry in each array), and the
 * object may not import __cxa_atexit, atexit or on_exit (a function-local static with a destructor). What is
 * refused, by the symbol of its initialiser: a namespace-scope variable whose initialiser is not a constant
 * (a constructor, a function call; GCC gathers them into _GLOBAL__sub_I_<file>), a global with a destructor,
 * a function marked __attribute__((constructor)) or ((destructor)), a header that has such globals
 * (<iostream>). Thread-local variables (the cpu device's __shared__) are constructed lazily in the thread
 * that first uses them, inside the launch, so they are not refused.
 *
 * NOTE [static shared limit]: __shared__ variables are thread_local (cpu_prelude.hpp), so the object's TLS
 * segment (PT_TLS) is what every worker thread allocates for them when it first runs one of its kernels. glibc
 * ends the process (status 127) when that allocation fails, so an object whose TLS is larger than
 * CDV_CPU_MAX_STATIC_SHARED is refused here, before it is loaded.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cpu.h"

#if __SIZEOF_POINTER__ == 8
#define ELF_ST_TYPE ELF64_ST_TYPE
#define ELF_ST_BIND ELF64_ST_BIND
#define ELF_R_SYM ELF64_R_SYM
#else
#define ELF_ST_TYPE ELF32_ST_TYPE
#define ELF_ST_BIND ELF32_ST_BIND
#define ELF_R_SYM ELF32_R_SYM
#endif

typedef struct elf_file {
  int fd;
  off_t size;
  ElfW(Ehdr) eh;
  ElfW(Shdr) * sh;
  char *shstr;
} elf_file;

/* n bytes at off, malloc'd, or NULL when the range is outside the file */
static void *read_at(const elf_file *f, ElfW(Off) off, size_t n) {
  if (off > (ElfW(Off))f->size || n > (size_t)f->size - off) return NULL;
  char *p = malloc(n ? n : 1);
  if (p && pread(f->fd, p, n, (off_t)off) != (ssize_t)n) {
    free(p);
    return NULL;
  }
  return p;
}

static const ElfW(Shdr) * section(const elf_file *f, const char *name) {
  for (unsigned i = 0; f->shstr && i < f->eh.e_shnum; i++)
    if (f->sh[i].sh_name < f->sh[f->eh.e_shstrndx].sh_size && !strcmp(f->shstr + f->sh[i].sh_name, name))
      return &f->sh[i];
  return NULL;
}

static int elf_open(elf_file *f, const char *path) {
  memset(f, 0, sizeof *f);
  f->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
  if (f->fd < 0) return -1;
  f->size = lseek(f->fd, 0, SEEK_END);
  if (pread(f->fd, &f->eh, sizeof f->eh, 0) != (ssize_t)sizeof f->eh || memcmp(f->eh.e_ident, ELFMAG, SELFMAG) ||
      f->eh.e_ident[EI_CLASS] != (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32) ||
      f->eh.e_shentsize != sizeof(ElfW(Shdr)) || f->eh.e_shstrndx >= f->eh.e_shnum)
    return -1;
  f->sh = read_at(f, f->eh.e_shoff, (size_t)f->eh.e_shnum * sizeof *f->sh);
  if (!f->sh) return -1;
  const ElfW(Shdr) *ss = &f->sh[f->eh.e_shstrndx];
  f->shstr = read_at(f, ss->sh_offset, ss->sh_size);
  if (f->shstr && ss->sh_size) f->shstr[ss->sh_size - 1] = 0;
  return f->shstr ? 0 : -1;
}

static void elf_close(elf_file *f) {
  if (f->fd >= 0) close(f->fd);
  free(f->sh);
  free(f->shstr);
}

/* A symbol table and its strings (both NULL when absent). */
typedef struct symtab {
  ElfW(Sym) * s;
  size_t n;
  char *str;
  size_t strn;
} symtab;

static void symtab_load(const elf_file *f, const char *name, symtab *t) {
  memset(t, 0, sizeof *t);
  const ElfW(Shdr) *s = section(f, name);
  if (!s || s->sh_link >= f->eh.e_shnum || s->sh_entsize != sizeof(ElfW(Sym))) return;
  const ElfW(Shdr) *str = &f->sh[s->sh_link];
  t->s = read_at(f, s->sh_offset, s->sh_size);
  t->str = read_at(f, str->sh_offset, str->sh_size);
  if (!t->s || !t->str || !str->sh_size) {
    free(t->s), free(t->str);
    memset(t, 0, sizeof *t);
    return;
  }
  t->str[str->sh_size - 1] = 0;
  t->n = s->sh_size / sizeof *t->s, t->strn = str->sh_size;
}

static const char *sym_name(const symtab *t, size_t i) {
  return i < t->n && t->s[i].st_name < t->strn ? t->str + t->s[i].st_name : "";
}

/* The function symbol at address a, or NULL. */
static const char *func_at(const symtab *t, ElfW(Addr) a) {
  for (size_t i = 0; i < t->n; i++)
    if (t->s[i].st_value == a && ELF_ST_TYPE(t->s[i].st_info) == STT_FUNC && t->s[i].st_name) return sym_name(t, i);
  return NULL;
}

/* The source file of the local function at a: the STT_FILE symbol that precedes it in .symtab (the linker keeps
 * each input object's locals after its FILE symbol). NULL for a global function, or when .symtab cannot say. */
static const char *file_of(const symtab *t, ElfW(Addr) a) {
  const char *file = NULL;
  for (size_t i = 0; i < t->n; i++) {
    unsigned type = ELF_ST_TYPE(t->s[i].st_info);
    if (type == STT_FILE)
      file = t->s[i].st_name ? sym_name(t, i) : NULL;
    else if (type == STT_FUNC && t->s[i].st_value == a && ELF_ST_BIND(t->s[i].st_info) == STB_LOCAL)
      return file;
  }
  return NULL;
}

/* The address an initialiser-array entry at vaddr holds: its dynamic relocation's addend (a RELATIVE one)
 * or target symbol, else the bytes in the file. */
static ElfW(Addr) entry_target(const elf_file *f, const ElfW(Shdr) * arr, size_t k, const ElfW(Rela) * rel, size_t nrel,
                               const symtab *dyn, const char **name) {
  ElfW(Addr) at = arr->sh_addr + k * sizeof(ElfW(Addr)), v = 0;
  *name = NULL;
  for (size_t i = 0; i < nrel; i++)
    if (rel[i].r_offset == at) {
      size_t si = ELF_R_SYM(rel[i].r_info);
      if (si && si < dyn->n) {
        *name = sym_name(dyn, si);
        return dyn->s[si].st_value;
      }
      return (ElfW(Addr))rel[i].r_addend;
    }
  if (arr->sh_type != SHT_NOBITS) pread(f->fd, &v, sizeof v, (off_t)(arr->sh_offset + k * sizeof v));
  return v;
}

static int refuse(cdv_err *e, const char *what) {
  return cdv_fail(e, "cpu.module_load", 801, "CUDA_ERROR_NOT_SUPPORTED",
                  "the kernel source has %s, which would "
                  "run in the host process when the object is loaded or at exit, outside the launch's fault "
                  "containment: the cpu device refuses static initialisers and finalisers, as CUDA refuses "
                  "dynamic initialisation of __device__ variables (initialise in a kernel instead)",
                  what);
}

/* The C runtime's entries of an initialiser or finaliser array, by name: crtbegin.o's frame_dummy and
 * __do_global_dtors_aux, and crtfastmath.o's set_fast_math, which GCC 12 links into a shared object built with
 * -ffast-math (the cpu device's --use_fast_math; it sets the FTZ and DAZ bits of the thread that loads the
 * object, as it did before objects were checked). Each may stand once in an array: the source may not add a
 * function of the same name. Returns its index, or -1. */
static int runtime_entry(const char *name) {
  static const char *const names[3] = {"frame_dummy", "__do_global_dtors_aux", "set_fast_math"};
  for (int i = 0; name && i < 3; i++)
    if (!strcmp(name, names[i])) return i;
  return -1;
}

/* One offending entry of the initialiser and finaliser arrays, described into out (empty when none). */
static void find_initialisers(const elf_file *f, const symtab *sym, const symtab *dyn, char *out, size_t n) {
  static const char *const arrays[] = {".preinit_array", ".init_array", ".ctors", ".fini_array", ".dtors"};
  ElfW(Rela) *rel = NULL;
  size_t nrel = 0;
  const ElfW(Shdr) *rs = section(f, ".rela.dyn");
  if (rs && rs->sh_entsize == sizeof *rel && (rel = read_at(f, rs->sh_offset, rs->sh_size)))
    nrel = rs->sh_size / sizeof *rel;
  out[0] = 0;
  for (size_t a = 0; a < sizeof arrays / sizeof arrays[0] && !out[0]; a++) {
    const ElfW(Shdr) *s = section(f, arrays[a]);
    size_t cnt = s ? s->sh_size / sizeof(ElfW(Addr)) : 0, unnamed = 0;
    int runtime_seen[3] = {0, 0, 0};
    int have_files = 0;
    for (size_t i = 0; i < sym->n && !have_files; i++) have_files = ELF_ST_TYPE(sym->s[i].st_info) == STT_FILE;
    for (size_t k = 0; k < cnt && !out[0]; k++) {
      const char *name;
      ElfW(Addr) v = entry_target(f, s, k, rel, nrel, dyn, &name);
      if (!name && sym->n) name = func_at(sym, v);
      if (!name && (v == 0 || v == (ElfW(Addr)) - 1)) continue; /* .ctors/.dtors sentinels */
      /* an initialiser of a toolchain library linked in (a host whose g++ links libstdc++ statically gets
       * libstdc++'s _GLOBAL__sub_I_eh_alloc.cc): the source can only add code to its own file, kernel.cpp */
      const char *file = name && sym->n ? file_of(sym, v) : NULL;
      const char *base = file ? strrchr(file, '/') : NULL;
      base = base ? base + 1 : file;
      if (base && strcmp(base, "kernel.cpp") != 0) continue;
      /* where .symtab names the files, a function outside them (a global one) is the source's, whatever its
       * name; only an object without FILE symbols falls back on the runtime's names, each once */
      int rt = have_files ? -1 : runtime_entry(name);
      if (rt >= 0 && runtime_seen[rt]++ == 0)
        continue; /* the C runtime's own, once: a second entry of that name is the source's, named so */
      if (!name && !sym->n && ++unnamed <= 1) continue; /* no .symtab: the runtime's one entry cannot be told apart */
      int is_init = a < 3;
      if (name && !strncmp(name, "_GLOBAL__sub_I_", 15))
        snprintf(out, n,
                 "a namespace-scope variable with a constructor or an initialiser that is not constant "
                 "(%s)",
                 name);
      else if (name && !strncmp(name, "_GLOBAL__sub_D_", 15))
        snprintf(out, n, "a namespace-scope variable with a destructor (%s)", name);
      else
        snprintf(out, n, "a static %s (%s in %s)", is_init ? "initialiser" : "finaliser", name ? name : "unnamed",
                 arrays[a]);
    }
  }
  free(rel);
}

/* NOTE [no static initialisers], NOTE [static shared limit] */
int cdv_cpu_object_check(const char *path, cdv_err *e) {
  elf_file f;
  if (elf_open(&f, path)) {
    elf_close(&f);
    return cdv_fail(e, "cpu.module_load", 0, "CUDA_ERROR_INVALID_IMAGE",
                    "cannot read the kernel object '%s' "
                    "as an ELF shared object",
                    path);
  }
  int rc = 0;
  ElfW(Phdr) *ph = f.eh.e_phentsize == sizeof *ph ? read_at(&f, f.eh.e_phoff, (size_t)f.eh.e_phnum * sizeof *ph) : NULL;
  for (unsigned i = 0; ph && i < f.eh.e_phnum && rc == 0; i++)
    if (ph[i].p_type == PT_TLS && ph[i].p_memsz > CDV_CPU_MAX_STATIC_SHARED)
      rc = cdv_fail(e, "cpu.module_load", 1, "CUDA_ERROR_INVALID_VALUE",
                    "the kernel source's __shared__ and "
                    "thread-local variables need %llu bytes, more than the cpu device's limit of %llu bytes "
                    "(CDV_CPU_MAX_STATIC_SHARED; use extern __shared__ memory, or an array)",
                    (unsigned long long)ph[i].p_memsz, (unsigned long long)CDV_CPU_MAX_STATIC_SHARED);
  free(ph);
  symtab sym, dyn;
  symtab_load(&f, ".symtab", &sym);
  symtab_load(&f, ".dynsym", &dyn);
  char what[300];
  if (rc == 0) {
    find_initialisers(&f, &sym, &dyn, what, sizeof what);
    if (what[0]) rc = refuse(e, what);
  }
  static const char *const exits[] = {"__cxa_atexit", "atexit", "on_exit"};
  for (size_t i = 0; rc == 0 && i < dyn.n; i++)
    for (size_t k = 0; k < sizeof exits / sizeof exits[0]; k++)
      if (dyn.s[i].st_shndx == SHN_UNDEF && !strcmp(sym_name(&dyn, i), exits[k])) {
        snprintf(what, sizeof what, "a static variable with a destructor, or a call of %s", exits[k]);
        rc = refuse(e, what);
        break;
      }
  free(sym.s), free(sym.str), free(dyn.s), free(dyn.str);
  elf_close(&f);
  return rc;
}
