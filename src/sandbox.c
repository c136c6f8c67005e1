/*
 * sandbox.c: what a sandboxed state (cudadev_options.sandbox) guards beyond the refusals of NOTE [state limits]
 * (embed.c): the files a CUDA compile may read (NOTE [sandboxed includes]), protected metatables (NOTE [protected
 * metatables]), and cd._sandbox, which runs a script in a fresh sandboxed state (for the specs and the fuzzer).
 *
 * NOTE [sandboxed includes]: NVRTC runs in the host process, sandbox or not, and reads every file a source
 * #includes: with the state's rights, from any path, and a compile error quotes what it read (a private file's
 * first line came back in the log). In a sandbox, before anything is compiled (and before the kernel caches are
 * asked), cd.compile checks:
 *   - each option against the options a sandbox allows (SAFE_OPTIONS: macros, architecture, code generation and
 *     diagnostics; none that names a file: --time, --pre-include, the precompiled-header options,
 *     --jobserver-auth and the like), on top of the host's own allow-list; an -I/--include-path option and each
 *     `include_paths` entry must resolve (realpath) inside one of the allowed directories (cudadev_options
 *     .include_dirs; by default the CUDA toolkit's include directory, which holds CCCL too);
 *   - the source and every given header, for what could name a file: `#include`, `#include_next`, `#import`,
 *     `#embed` (also written `%:` or `??=`), and `__has_include`, `__has_include_next`, `__has_embed`. The scan
 *     looks everywhere, comments and strings included, in four readings of the text (with and without trigraphs,
 *     with and without a backslash followed by blanks joining lines), so that no way of hiding a directive from
 *     one reading hides it from all: a commented-out `#include "/x"` is refused too. A file name written as a
 *     macro is refused (what it expands to cannot be known here). An absolute name, or one with a `..`
 *     component, is refused. Any other name is one of the given headers, or is looked up where NVRTC will look
 *     (the -I options, include_paths, the toolkit's directory, in that order): the first file found must be a
 *     regular file (not a FIFO, a device or a directory: NVRTC would block on one, or read a device) whose real
 *     path lies in an allowed directory. A name found nowhere is left to NVRTC, which fails to open it.
 *   - the compile gets --no-source-include: otherwise NVRTC looks for quoted names in the directory of the
 *     source's `name` (the working directory for "kernel.cu"), which a script chooses.
 * Files in the allowed directories are the host's: what they include is not checked.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <lualib.h>

#include "cdv.h"
#include "cudadev.h"

/* ------------------------------------------------------------ NOTE [sandboxed includes] */

/* the options a sandbox allows, without their leading dashes; '*' at the end: any value follows */
static const char *const SAFE_OPTIONS[] = {"D*",
                                           "U*",
                                           "define-macro=*",
                                           "undefine-macro=*",
                                           "std=*",
                                           "arch=*",
                                           "gpu-architecture=*",
                                           "use_fast_math",
                                           "ftz=*",
                                           "prec-div=*",
                                           "prec-sqrt=*",
                                           "fmad=*",
                                           "G",
                                           "device-debug",
                                           "lineinfo",
                                           "generate-line-info",
                                           "dopt=*",
                                           "restrict",
                                           "default-device",
                                           "device-as-default-execution-space",
                                           "rdc=*",
                                           "relocatable-device-code=*",
                                           "dc",
                                           "device-c",
                                           "dw",
                                           "device-w",
                                           "ewp",
                                           "extensible-whole-program",
                                           "extra-device-vectorization",
                                           "maxrregcount=*",
                                           "w",
                                           "disable-warnings",
                                           "diag-error=*",
                                           "diag-suppress=*",
                                           "diag-warn=*",
                                           "err-no",
                                           "no-err-no",
                                           "display-error-number",
                                           "no-display-error-number",
                                           "brief-diagnostics=*",
                                           "builtin-move-forward=*",
                                           "builtin-initializer-list=*",
                                           "O*",
                                           "minimal",
                                           "device-int128",
                                           "device-float128",
                                           "no-source-include",
                                           "optimization-info=*",
                                           "jump-table-density=*",
                                           "frandom-seed=*",
                                           "modify-stack-limit=*",
                                           "device-stack-protector=*",
                                           "dlto",
                                           "dlink-time-opt",
                                           "gen-opt-lto",
                                           "fdevice-syntax-only",
                                           NULL};

static int safe_option(const char *base) {
  for (int i = 0; SAFE_OPTIONS[i] != NULL; i++) {
    size_t n = strlen(SAFE_OPTIONS[i]);
    if (SAFE_OPTIONS[i][n - 1] == '*' ? strncmp(SAFE_OPTIONS[i], base, n - 1) == 0 : strcmp(SAFE_OPTIONS[i], base) == 0)
      return 1;
  }
  return 0;
}

typedef struct inc_check {
  lua_State *L;
  const cdv_compile_req *req;
  char **allowed; /* resolved directories a sandbox may read */
  const char **search; /* where NVRTC looks, in order (-I options, include_paths, the toolkit's) */
  int nsearch;
  const char *where; /* "the source", or "header 'a.h'" for messages */
  int in_header;
} inc_check;

/* 1 when the resolved path p is dir or lies under it */
static int under(const char *p, const char *dir) {
  size_t n = strlen(dir);
  if (n > 0 && dir[n - 1] == '/') n--; /* "/" */
  return strncmp(p, dir, n) == 0 && (p[n] == '\0' || p[n] == '/');
}

static int allowed_path(const inc_check *c, const char *resolved) {
  for (size_t i = 0; c->allowed[i] != NULL; i++)
    if (under(resolved, c->allowed[i])) return 1;
  return 0;
}

/* the toolkit's include directory, as NVRTC gets it ("" when none) */
static const char *toolkit_dir(void) {
  const char *tk = cdv_nvrtc_toolkit_include(0); /* its cccl folder (CUDA 13) lies inside */
  return tk[0] == '-' && tk[1] == 'I' ? tk + 2 : "";
}

static void refuse(const inc_check *c, const char *fmt, ...) {
  lua_State *L = c->L;
  va_list ap;
  va_start(ap, fmt);
  const char *why = lua_pushvfstring(L, fmt, ap);
  va_end(ap);
  if (c->in_header) luaL_error(L, "bad option 'headers' to 'compile' (%s: %s)", c->where, why);
  luaL_error(L, "bad argument #1 to 'compile' (%s)", why);
}

static int ident_char(int ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_';
}

/* past blanks and block comments on the same line (a // comment ends it: nothing follows) */
static const char *skip_blanks(const char *p, const char *end) {
  for (;;) {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\v' || *p == '\f' || *p == '\r')) p++;
    if (end - p >= 2 && p[0] == '/' && p[1] == '*') {
      const char *q = p + 2;
      while (end - q >= 2 && !(q[0] == '*' && q[1] == '/')) q++;
      p = end - q >= 2 ? q + 2 : end;
      continue;
    }
    return p;
  }
}

/* a file name a directive names: checked, or refused with the reason */
static void check_name(const inc_check *c, const char *shown, const char *name) {
  if (name[0] == '\0') return; /* NVRTC refuses it */
  if (name[0] == '/') refuse(c, "%s is not available in this sandbox: an absolute path", shown);
  for (const char *p = name; *p;) { /* a ".." component */
    const char *slash = strchr(p, '/');
    size_t n = slash ? (size_t)(slash - p) : strlen(p);
    if (n == 2 && p[0] == '.' && p[1] == '.')
      refuse(c, "%s is not available in this sandbox: a path out of its directory ('..')", shown);
    p += n + (slash != NULL);
  }
  for (int i = 0; i < c->req->nheaders; i++)
    if (strcmp(c->req->header_names[i], name) == 0) return; /* given by content: NVRTC reads no file */
  for (int i = 0; i < c->nsearch; i++) {
    lua_State *L = c->L;
    const char *path = lua_pushfstring(L, "%s/%s", c->search[i], name);
    struct stat sb;
    if (stat(path, &sb) != 0) {
      lua_pop(L, 1);
      continue;
    }
    if (!S_ISREG(sb.st_mode)) refuse(c, "%s is not available in this sandbox: '%s' is not a regular file", shown, path);
    char *real = realpath(path, NULL);
    int ok = real != NULL && allowed_path(c, real);
    if (!ok) {
      lua_pushstring(L, real != NULL ? real : path);
      free(real);
      refuse(c, "%s is not available in this sandbox: '%s' is outside its include directories", shown,
             lua_tostring(L, -1));
    }
    free(real);
    lua_pop(L, 1);
    return; /* NVRTC stops at the first it finds */
  }
}

/* the "name" or <name> at p (after a directive or "__has_include("), checked */
static void check_operand(const inc_check *c, const char *word, int directive, const char *p, const char *end) {
  lua_State *L = c->L;
  p = skip_blanks(p, end);
  if (!directive) {
    if (p < end && *p == '(')
      p = skip_blanks(p + 1, end);
    else
      p = end;
  }
  char close = p < end && *p == '"' ? '"' : p < end && *p == '<' ? '>' : 0;
  const char *q = close ? p + 1 : end;
  while (q < end && *q != close && *q != '\n') q++;
  if (!close || q >= end || *q != close) {
    const char *eol = p;
    while (eol < end && *eol != '\n' && eol - p < 60) eol++;
    lua_pushlstring(L, p, (size_t)(eol - p));
    refuse(c, "%s%s %s is not available in this sandbox: write the file name in quotes or <>, not a macro",
           directive ? "#" : "", word, lua_tostring(L, -1));
  }
  const char *name = lua_pushlstring(L, p + 1, (size_t)(q - p - 1));
  const char *shown = directive ? lua_pushfstring(L, "#%s %c%s%c", word, *p, name, close)
                                : lua_pushfstring(L, "%s(%c%s%c)", word, *p, name, close);
  check_name(c, shown, name);
  lua_pop(L, 2);
}

static const char *const DIRECTIVES[] = {"include", "include_next", "import", "embed", NULL};
static const char *const OPERATORS[] = {"__has_include", "__has_include_next", "__has_embed", NULL};

static int in_list(const char *const *list, const char *w, size_t n) {
  for (int i = 0; list[i] != NULL; i++)
    if (strlen(list[i]) == n && memcmp(list[i], w, n) == 0) return i;
  return -1;
}

/* one reading of the text (already joined and translated): every directive and operator that names a file */
static void scan(const inc_check *c, const char *t, size_t len) {
  const char *end = t + len;
  for (const char *p = t; p < end; p++) {
    const char *q = NULL;
    if (*p == '#')
      q = p + 1;
    else if (*p == '%' && p + 1 < end && p[1] == ':')
      q = p + 2;
    if (q != NULL) {
      q = skip_blanks(q, end);
      const char *w = q;
      while (q < end && (ident_char((unsigned char)*q) || *q == '\\')) q++;
      if (memchr(w, '\\', (size_t)(q - w)) != NULL)
        refuse(c, "a directive spelled with a backslash is not available in this sandbox");
      int k = in_list(DIRECTIVES, w, (size_t)(q - w));
      if (k >= 0) check_operand(c, DIRECTIVES[k], 1, q, end);
    } else if (ident_char((unsigned char)*p) && (p == t || !ident_char((unsigned char)p[-1]))) {
      const char *w = p;
      while (p < end && ident_char((unsigned char)*p)) p++;
      int k = in_list(OPERATORS, w, (size_t)(p - w));
      if (k >= 0) check_operand(c, OPERATORS[k], 0, p, end);
      p--;
    }
  }
}

/* The text as the preprocessor reads it: trigraphs translated (when asked), then lines joined at a backslash
 * before the newline (also with blanks between them, when asked). Pushed as a string. */
static void logical(lua_State *L, const char *s, size_t n, int trigraphs, int blank_splices) {
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (size_t i = 0; i < n;) {
    char ch = s[i];
    size_t len = 1;
    if (trigraphs && i + 2 < n && s[i] == '?' && s[i + 1] == '?') {
      static const char from[] = "=/'()!<>-", to[] = "#\\^[]|{}~";
      const char *f = strchr(from, s[i + 2]);
      if (f != NULL && s[i + 2] != '\0') {
        ch = to[f - from];
        len = 3;
      }
    }
    if (ch == '\\') { /* a splice: backslash, [blanks], newline */
      size_t j = i + len;
      if (blank_splices)
        while (j < n && (s[j] == ' ' || s[j] == '\t' || s[j] == '\r' || s[j] == '\v' || s[j] == '\f')) j++;
      else if (j < n && s[j] == '\r')
        j++;
      if (j < n && s[j] == '\n') {
        i = j + 1;
        continue;
      }
    }
    luaL_addchar(&b, ch);
    i += len;
  }
  luaL_pushresult(&b);
}

static void scan_text(inc_check *c, const char *s, size_t n) {
  for (int v = 0; v < 4; v++) {
    logical(c->L, s, n, v & 1, v >> 1);
    size_t len;
    const char *t = lua_tolstring(c->L, -1, &len);
    scan(c, t, len);
    lua_pop(c->L, 1);
  }
}

/* a directory a script names (an -I option, an include_paths entry): resolved, inside the allowed ones */
static const char *check_dir(inc_check *c, const char *dir, const char *opt, int item) {
  lua_State *L = c->L;
  luaL_checkstack(L, 4, "too many include paths");
  char *real = realpath(dir, NULL);
  if (real == NULL || !allowed_path(c, real)) {
    free(real);
    if (opt != NULL)
      luaL_error(L,
                 "bad option 'options' to 'compile' (include path '%s' is outside the include directories of "
                 "this sandbox)",
                 dir);
    luaL_error(L,
               "bad option 'include_paths' to 'compile' (item %d: '%s' is outside the include directories of "
               "this sandbox)",
               item, dir);
  }
  lua_pushstring(L, real); /* anchored on the stack for the scan */
  free(real);
  return lua_tostring(L, -1);
}

/* NOTE [sandboxed includes]. Leaves what it pushed on the stack (the caller's frame drops it). */
void cdv_check_includes(lua_State *L, const cdv_compile_req *req) {
  cdv_state *st = cdv_get_state(L);
  inc_check c = {L, req, NULL, NULL, 0, "the source", 0};
  char *defaults[2] = {NULL, NULL};
  char *tk = toolkit_dir()[0] ? realpath(toolkit_dir(), NULL) : NULL;
  if (tk != NULL) {
    lua_pushstring(L, tk); /* anchored: the list lives on the stack */
    free(tk);
    defaults[0] = (char *)lua_tostring(L, -1);
  }
  c.allowed = st->include_dirs != NULL ? st->include_dirs : defaults;
  c.search = lua_newuserdatauv(L, sizeof(char *) * (size_t)(req->nopts + req->nincludes + 1), 0);
  for (int i = 0; i < req->nopts; i++) {
    const char *o = req->opts[i], *base = o;
    while (*base == '-') base++;
    const char *dir = NULL;
    if (base != o && base[0] == 'I')
      dir = base[1] == '=' ? base + 2 : base + 1;
    else if (base != o && strncmp(base, "include-path=", 13) == 0)
      dir = base + 13;
    if (dir != NULL)
      c.search[c.nsearch++] = check_dir(&c, dir, o, i + 1);
    else if (base == o || !safe_option(base))
      luaL_error(L, "bad option 'options' to 'compile' (compile option '%s' is not available in this sandbox)", o);
  }
  for (int i = 0; i < req->nincludes; i++) c.search[c.nsearch++] = check_dir(&c, req->include_paths[i], NULL, i + 1);
  if (defaults[0] != NULL) c.search[c.nsearch++] = defaults[0];
  scan_text(&c, req->source, req->source_len);
  c.in_header = 1;
  for (int i = 0; i < req->nheaders; i++) {
    c.where = lua_pushfstring(L, "header '%s'", req->header_names[i]);
    scan_text(&c, req->header_srcs[i], strlen(req->header_srcs[i]));
    lua_pop(L, 1);
  }
}

/* ------------------------------------------------------------ NOTE [protected metatables] */
/* NOTE [protected metatables]: in a sandbox, getmetatable(v) of a cudadev value answers its type's name, and
 * setmetatable on it fails: a script cannot change `__gc` (and stop a host's release callback), `__index` or
 * `__close`. The types without a __tostring get one that shows their name without the userdata's address. Outside a sandbox the metatables stay readable (the REPL and cudadev.extra read `methods`, and
 * cd.Error is the Error metatable). The debug library reads past __metatable: NOTE [state record] and the
 * threat model in cudadev.h say what a host must remove. */
static const char *const TYPES[] = {CDV_ARRAY,
                                    CDV_DEVICE,
                                    CDV_STREAM,
                                    CDV_EVENT,
                                    CDV_MODULE,
                                    CDV_KERNEL,
                                    CDV_GRAPH,
                                    CDV_LAUNCH_CONFIG,
                                    CDV_ERROR,
                                    "cudadev.Scope",
                                    "cudadev.StreamScope",
                                    "cudadev.AccessScope",
                                    "cudadev.Stage",
                                    NULL};

/* __tostring of the types that have none (the scopes): their name, not Lua's "cudadev.Scope: 0x55d0..." */
static int name_only(lua_State *L) {
  lua_pushstring(L, lua_tostring(L, lua_upvalueindex(1)));
  return 1;
}

void cdv_protect_metatables(lua_State *L) {
  for (int i = 0; TYPES[i] != NULL; i++) {
    if (luaL_getmetatable(L, TYPES[i]) == LUA_TTABLE) {
      lua_pushstring(L, TYPES[i]);
      lua_setfield(L, -2, "__metatable");
      if (lua_getfield(L, -1, "__tostring") == LUA_TNIL) {
        lua_pushstring(L, TYPES[i]);
        lua_pushcclosure(L, name_only, 1);
        lua_setfield(L, -3, "__tostring");
      }
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
}

/* ------------------------------------------------------------ cd._sandbox */

/* the strings of list field k of the options table (NULL when absent), anchored in a userdata on the stack */
static const char *const *opt_list(lua_State *L, const char *k) {
  int t = cdv_opt_field(L, 2, k);
  if (t == LUA_TNIL) return NULL;
  if (t != LUA_TTABLE)
    cdv_opt_error(L, k, "_sandbox", lua_pushfstring(L, "table of strings expected, got %s", cdv_typename(L, -1)));
  int tab = lua_gettop(L);
  lua_Integer n = (lua_Integer)lua_rawlen(L, tab);
  const char **v = lua_newuserdatauv(L, sizeof(char *) * (size_t)(n + 1), 0);
  for (lua_Integer i = 0; i < n; i++) {
    if (lua_rawgeti(L, tab, i + 1) != LUA_TSTRING)
      cdv_opt_error(L, k, "_sandbox", lua_pushfstring(L, "item %I: string expected", i + 1));
    v[i] = lua_tostring(L, -1); /* the options table keeps it */
    lua_pop(L, 1);
  }
  v[n] = NULL;
  return v;
}

static size_t opt_size(lua_State *L, const char *k) {
  size_t v = 0;
  if (cdv_opt_field(L, 2, k) != LUA_TNIL) {
    int isint;
    lua_Integer n = lua_tointegerx(L, -1, &isint);
    if (!isint || n < 0) cdv_opt_error(L, k, "_sandbox", "non-negative integer expected");
    v = (size_t)n;
  }
  lua_pop(L, 1);
  return v;
}

/* the error as a string, in the sandboxed state (a message handler: it runs protected) */
static int to_text(lua_State *S) {
  luaL_tolstring(S, 1, NULL);
  return 1;
}

/* loads and runs the script (named by upvalue 1); its first result as a string (under lua_pcall with to_text) */
static int run_in(lua_State *S) {
  const char *script = lua_touserdata(S, 1);
  lua_settop(S, 0);
  if (luaL_loadbuffer(S, script, strlen(script), lua_tostring(S, lua_upvalueindex(1))) != LUA_OK) return lua_error(S);
  lua_call(S, 0, 1);
  if (lua_isnil(S, -1)) return 1;
  luaL_tolstring(S, -1, NULL);
  return 1;
}

/* Runs code in S under to_text, as chunk `name`; 1 when it ran, else 0 (the error on S's stack). */
static int run_code(lua_State *S, const char *code, const char *name) {
  lua_pushcfunction(S, to_text);
  lua_pushstring(S, name);
  lua_pushcclosure(S, run_in, 1);
  lua_pushlightuserdata(S, (void *)code);
  return lua_pcall(S, 1, 1, -3) == LUA_OK;
}

/* cd._sandbox(script [, {memory_quota=, max_arrays=, include_dirs=, allowed_compile_options=, debug=,
 * prelude=}]) -> ok, result: runs script in a new lua_State with the standard libraries (debug too unless
 * debug=false), sandboxed with those options, cudadev loaded as the global `cd`; closes it. prelude: Lua code
 * run in that state first, before the sandbox is turned on (cudadev_set_sandbox), as a host that compiles its
 * kernels and then runs scripts does. */
int cdv_sandbox_run(lua_State *L) {
  static const char *const known[] = {"memory_quota", "max_arrays", "include_dirs", "allowed_compile_options", "debug",
                                      "prelude",      NULL};
  const char *script = luaL_checkstring(L, 1);
  if (cdv_get_state(L)->sandbox) return luaL_error(L, "_sandbox is not available in this sandbox");
  cdv_check_options(L, 2, known, "_sandbox");
  cudadev_options o = {0};
  o.sandbox = 1;
  o.memory_quota = opt_size(L, "memory_quota");
  o.max_arrays = opt_size(L, "max_arrays");
  o.include_dirs = opt_list(L, "include_dirs");
  o.allowed_compile_options = opt_list(L, "allowed_compile_options");
  int keep_debug = cdv_check_boolean_field(L, 2, "debug", 1, "_sandbox");
  const char *prelude = NULL;
  if (cdv_opt_field(L, 2, "prelude") != LUA_TNIL && !(prelude = lua_tostring(L, -1)))
    cdv_opt_error(L, "prelude", "_sandbox", "string expected");
  o.sandbox = prelude == NULL; /* else turned on after the prelude */
  lua_State *S = luaL_newstate();
  if (S == NULL) return luaL_error(L, "not enough memory");
  luaL_openlibs(S);
  if (!keep_debug) {
    lua_pushnil(S);
    lua_setglobal(S, "debug");
  }
  cudadev_set_options(S, &o);
  luaL_requiref(S, "cudadev", luaopen_cudadev, 1);
  lua_setglobal(S, "cd");
  int ok = prelude ? run_code(S, prelude, "=prelude") : 1;
  if (ok && prelude) {
    cudadev_set_sandbox(S, 1);
    lua_settop(S, 0);
  }
  if (ok) ok = run_code(S, script, "=sandboxed");
  lua_pushboolean(L, ok);
  if (lua_type(S, -1) == LUA_TSTRING)
    lua_pushstring(L, lua_tostring(S, -1));
  else
    lua_pushnil(L);
  lua_close(S);
  return 2;
}
