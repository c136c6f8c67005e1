/*
 * cpu_fiber.c: user-mode context switching and fiber stacks for the cpu device.
 *
 * A block's threads must really meet at __syncthreads, wherever the barrier sits (loops, divergent paths
 * that all reach it), so every CUDA thread of a block that uses barriers runs on its own fiber, and a
 * barrier switches to the next thread. swapcontext would cost a sigprocmask system call per switch, so
 * x86-64 gets a six-register switch in assembly; other architectures (or -DCDV_CPU_UCONTEXT) use ucontext.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include "cpu.h"
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h> /* client requests: a few no-op instructions outside valgrind */
#define CDV_VALGRIND 1
#endif
#endif

#if defined(__x86_64__) && !defined(CDV_CPU_UCONTEXT)

/* cdv_cpu_fiber_switch(from, to): push the callee-saved registers, swap stack pointers, pop, return into
 * the other context. The floating-point control words are not saved: all fibers of a worker share them.
 * cdv_cpu_fiber_boot is where a new fiber's first "return" lands: r12 holds the argument, r13 the function;
 * .cfi_undefined rip ends a debugger's backtrace there. */
__asm__(
    ".text\n"
    ".globl cdv_cpu_fiber_switch\n"
    ".hidden cdv_cpu_fiber_switch\n"
    ".type cdv_cpu_fiber_switch,@function\n"
    ".p2align 4\n"
    "cdv_cpu_fiber_switch:\n"
    "  pushq %rbp\n"
    "  pushq %rbx\n"
    "  pushq %r12\n"
    "  pushq %r13\n"
    "  pushq %r14\n"
    "  pushq %r15\n"
    "  movq %rsp, (%rdi)\n"
    "  movq (%rsi), %rsp\n"
    "  popq %r15\n"
    "  popq %r14\n"
    "  popq %r13\n"
    "  popq %r12\n"
    "  popq %rbx\n"
    "  popq %rbp\n"
    "  ret\n"
    ".size cdv_cpu_fiber_switch, .-cdv_cpu_fiber_switch\n"
    ".type cdv_cpu_fiber_boot,@function\n"
    ".p2align 4\n"
    "cdv_cpu_fiber_boot:\n"
    "  .cfi_startproc\n"
    "  .cfi_undefined rip\n"
    "  movq %r12, %rdi\n"
    "  callq *%r13\n"
    "  ud2\n"
    "  .cfi_endproc\n"
    ".size cdv_cpu_fiber_boot, .-cdv_cpu_fiber_boot\n");

void cdv_cpu_fiber_boot(void);

void cdv_cpu_fiber_init(cdv_cpu_fctx *f, void *stack_lo, void *top, void (*fn)(void *), void *arg) {
  (void)stack_lo;
  /* Seven words that cdv_cpu_fiber_switch pops: r15 r14 r13 r12 rbx rbp, then the return address. The
   * frame starts 8 bytes off a 16-byte boundary so that fn is entered with the ABI's alignment. */
  uintptr_t t = (uintptr_t)top & ~(uintptr_t)15;
  void **sp = (void **)(t - 72);
  sp[0] = 0;
  sp[1] = 0;
  sp[2] = (void *)fn;
  sp[3] = arg;
  sp[4] = 0;
  sp[5] = 0;
  sp[6] = (void *)cdv_cpu_fiber_boot;
  f->sp = sp;
}

#else /* ucontext fallback */

#include <ucontext.h>

/* makecontext passes int arguments only: the function and its argument travel as 32-bit halves. */
static void fiber_start(unsigned fn_lo, unsigned fn_hi, unsigned arg_lo, unsigned arg_hi) {
  void (*fn)(void *) = (void (*)(void *))(((uintptr_t)fn_hi << 16 << 16) | fn_lo);
  void *arg = (void *)(((uintptr_t)arg_hi << 16 << 16) | arg_lo);
  fn(arg);
  abort();
}

void cdv_cpu_fiber_init(cdv_cpu_fctx *f, void *stack_lo, void *top, void (*fn)(void *), void *arg) {
  uintptr_t ufn = (uintptr_t)fn, uarg = (uintptr_t)arg;
  getcontext(&f->uc);
  f->uc.uc_stack.ss_sp = stack_lo;
  f->uc.uc_stack.ss_size = (size_t)((char *)top - (char *)stack_lo) & ~(size_t)15;
  f->uc.uc_link = NULL;
  makecontext(&f->uc, (void (*)(void))fiber_start, 4, (unsigned)ufn, (unsigned)(ufn >> 16 >> 16), (unsigned)uarg,
              (unsigned)(uarg >> 16 >> 16));
}

/* swapcontext */
void cdv_cpu_fiber_switch(cdv_cpu_fctx *from, cdv_cpu_fctx *to) { swapcontext(&from->uc, &to->uc); }

#endif

#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102
#endif

/* Linux 6.13 and later can mark guard pages in the page tables (MADV_GUARD_INSTALL) without splitting the
 * mapping; mprotect makes every guard page a mapping of its own (two per stack), and a process with a
 * thousand extra mappings forks several times slower (measured: fork() 0.5 ms -> 4.5 ms). Probed once. */
static int guard_markers(void) {
  static int known = -1;
  if (known < 0) {
    long pg = sysconf(_SC_PAGESIZE);
    char *p = mmap(NULL, 2 * (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    known = p != MAP_FAILED && madvise(p, (size_t)pg, MADV_GUARD_INSTALL) == 0;
    if (p != MAP_FAILED) munmap(p, 2 * (size_t)pg);
  }
  return known;
}

int cdv_cpu_stack_vmas(void) { return guard_markers() ? 0 : 2; }

/* NOTE [fiber stacks] (cpu.h): one mmap reserves n+1 regions so that n aligned ones fit; the slack is given
 * back. The memory is committed lazily (MAP_NORESERVE), so a 256 KiB stack costs the pages a thread touches.
 * The lowest page of each region is a guard: a thread that overflows its stack faults there instead of
 * writing over its neighbour's. */
char *cdv_cpu_stacks_map(size_t n) {
  size_t len = (n + 1) * CDV_CPU_STACK;
  long pg = sysconf(_SC_PAGESIZE);
  char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return NULL;
  char *a = (char *)(((uintptr_t)p + CDV_CPU_STACK - 1) & ~(uintptr_t)(CDV_CPU_STACK - 1));
  if (a > p) munmap(p, (size_t)(a - p));
  char *end = a + n * CDV_CPU_STACK;
  if (end < p + len) munmap(end, (size_t)(p + len - end));
  for (size_t i = 0; i < n; i++) {
    char *r = a + i * CDV_CPU_STACK;
    if (!guard_markers() || madvise(r, (size_t)pg, MADV_GUARD_INSTALL)) mprotect(r, (size_t)pg, PROT_NONE);
#ifdef CDV_VALGRIND
    /* so that memcheck takes a switch between fibers for a change of stacks, not a huge frame */
    (void)VALGRIND_STACK_REGISTER(r + pg, r + CDV_CPU_STACK);
#endif
  }
  return a;
}

/* The header's place in a region; the prelude's cdv_hdr() computes the same from any stack address. */
cdv_cpu_fhdr *cdv_cpu_stack_hdr(char *region) {
  uintptr_t base = (uintptr_t)region;
  return (cdv_cpu_fhdr *)(base + CDV_CPU_STACK - CDV_CPU_FHDR_SLOT - ((base >> 12) & 0xFFC0));
}
