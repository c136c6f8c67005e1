/*
 * sig.h: kernel signatures read from CUDA C++ source.
 *
 * Every launch checks its Lua arguments against the kernel's real parameter list before anything is
 * queued, on the GPU (NVRTC) and on the cpu device (host C++ compiler) alike, so the list comes from the
 * source text itself rather than from a compiler: cdv_sig_parse finds every __global__ function
 * declaration or definition, cdv_sig_resolve picks one by the name the user compiles it under and, for
 * templates, substitutes the template arguments.
 *
 * The parser is a tolerant token scanner, not a C++ front end: code it does not understand is passed
 * over (NVRTC reports that better). It fails only on a kernel whose arguments could not be checked: a
 * reference parameter, a variadic kernel, a void or empty parameter, a name longer than the fields below,
 * more than CDV_SIG_MAXTPARAMS template parameters. It skips comments, string and character literals
 * (raw ones too), preprocessor lines (with their continuations) and `#if 0` groups; it neither expands
 * macros nor evaluates other conditionals, so a kernel made by a macro is not seen and both branches of
 * an #ifdef count. A __global__ inside parentheses (a macro argument) is ignored. It does not recurse,
 * allocates a token array, a brace stack and the results, reads no byte past `len`, and accepts any
 * input (tests/fuzz_sig.c).
 *
 * Sizes assume the LP64 data model of Linux (long is 8 bytes), as the CUDA toolchains do there.
 * Messages are lowercase, have no final period, and name the source line where there is one.
 */
#ifndef CDV_SIG_H
#define CDV_SIG_H

#include <stddef.h>

/* parameter kinds */
typedef enum cdv_pkind {
  CDV_P_PTR,
  CDV_P_I8,
  CDV_P_I16,
  CDV_P_I32,
  CDV_P_I64,
  CDV_P_U8,
  CDV_P_U16,
  CDV_P_U32,
  CDV_P_U64,
  CDV_P_F16,
  CDV_P_BF16,
  CDV_P_F32,
  CDV_P_F64,
  CDV_P_BOOL,
  CDV_P_VEC,
  CDV_P_STRUCT
} cdv_pkind;

typedef struct cdv_param {
  char type[96]; /* the C type as written, normalised spacing, qualifiers kept but __restrict__,
                       * __grid_constant__ and attributes dropped: "const float *", "size_t", "float4",
                       * "Foo<int, 2>", "void (*)(int)"; array parameters decay: "float x[]" gives
                       * "float *", "float m[3][4]" gives "float (*)[4]". Longer types end in "..." */
  char name[64]; /* the parameter's name, or "" (truncated past 63 bytes) */
  cdv_pkind kind;
  int size, align; /* bytes; 0 for CDV_P_STRUCT (unknown: the caller asks the driver) */
  cdv_pkind elem; /* CDV_P_VEC: the lane kind. CDV_P_PTR: the pointee's kind when it is a scalar
                       * (depth 1, "float *" gives CDV_P_F32), else CDV_P_STRUCT (void, a struct, a
                       * vector, another pointer, an array, a function). A scalar: its own kind */
  int nelem; /* CDV_P_VEC: lanes, 1..4 */
  int pointee_const; /* CDV_P_PTR: what the pointer points to is const ("const float *", "float *const *") */
  int depth; /* CDV_P_PTR: levels of indirection ("float **" is 2) */
  int pointee_size; /* CDV_P_PTR: bytes of what it points to when known (4 for "float *", 16 for
                       * "float4 *", 8 for "float **"), else 0 */
} cdv_param;

#define CDV_SIG_MAXTPARAMS 16

typedef struct cdv_sig {
  char name[128]; /* kernel name, qualified with the enclosing named namespaces: "ns::k" (anonymous and
                       * inline namespaces are left out, as a name expression may leave them out) */
  int extern_c; /* declared extern "C" (directly or inside an extern "C" { } block) */
  int ntparams; /* template parameters, in order: "T", "N" ("" for an unnamed one) */
  char tparams[CDV_SIG_MAXTPARAMS][64];
  int nparams;
  cdv_param *params; /* for a template that is not resolved, types that use a template parameter are
                       * CDV_P_STRUCT ("T x") or pointers to one ("T *x") */
  int line; /* 1-based line of the __global__ of the declaration (of the definition when the
                       * kernel is declared first and defined later) */
  char *decl; /* private: the normalised template and function parameter lists, for resolve */
} cdv_sig;

/* A variable at namespace scope declared __constant__, __device__ or __managed__ (NOTE [module globals] in
 * module.c): its name qualified like a kernel's, whether it is a variable template (then only a name
 * expression such as "table<float>" names one), and its line. `extern` declarations are not definitions and
 * are left out; so are globals past the 4096th. */
typedef struct cdv_global {
  char name[128];
  int is_template, line;
} cdv_global;

typedef struct cdv_sigs {
  int n;
  cdv_sig *v;
  int nglobals;
  cdv_global *globals; /* in source order, each name once */
} cdv_sigs;

/* Read every kernel (and module global) of src[0..len) (src need not be NUL-terminated) into *out, in source order. A kernel
 * declared and later defined is one entry (the definition's); overloads are separate entries. Returns 0,
 * or -1 with a message in err (out is then empty). *out must be freed with cdv_sigs_free either way. */
int cdv_sig_parse(const char *src, size_t len, cdv_sigs *out, char *err, size_t errlen);
void cdv_sigs_free(cdv_sigs *s);

/* Find the kernel for a plain name ("saxpy", "ns::k") or a C++ name expression ("axpy<float>",
 * "ns::k<int, 4>", "k<float4>", a leading & or :: allowed) and fill *out with its resolved signature:
 * the template arguments (split at top-level commas, brackets and nested <> hide commas) replace the
 * template parameters wherever they stand as whole identifiers in the parameter types (not "::T" or
 * ".T"), missing ones take their defaults (which may use earlier parameters), a parameter pack expands
 * into one parameter per argument, and the types are classified again. A non-type parameter ("int N")
 * ends up inside a type ("Vec<float, 4>") or nowhere. out->name is the normalised name or expression
 * ("axpy<float>"). An extern "C" kernel is also found by its unqualified name (C linkage ignores
 * namespaces). Errors: an unknown name (the message lists the kernels found), a template named without
 * arguments (the message shows a name_expressions entry to use), arguments for a non-template, too
 * few or too many arguments, an overloaded name, a parameter that becomes a reference or void.
 * Returns 0, or -1 with a message in err. *out is always left valid for cdv_sig_clear, which frees
 * what resolve allocated. */
int cdv_sig_resolve(const cdv_sigs *s, const char *name_or_expr, cdv_sig *out, char *err, size_t errlen);
void cdv_sig_clear(cdv_sig *s);

/* "pointer", "int8" ... "float64", "bool", "vector", "struct": for messages */
const char *cdv_pkind_name(cdv_pkind k);
int cdv_pkind_size(cdv_pkind k); /* bytes of a scalar kind (pointers 8), 0 for VEC and STRUCT */

#endif
