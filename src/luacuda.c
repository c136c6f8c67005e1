/*
 * luacuda.c: a Lua 5.4 interpreter with cudadev built in, loaded before anything runs and bound to the
 * global `cuda` (as `require "cudadev"` would return it), and an interactive loop that knows about GPUs.
 *
 * It behaves as Lua's own `lua` runner does, so scripts and habits carry over:
 *   luacuda [options] [script [args]]
 *     -e stat   execute the string stat        -l mod    require mod into global mod (-l g=mod: into g)
 *     -i        interactive mode after script  -v        print version information
 *     -E        ignore LUA_INIT and LUA_PATH   -W        turn warnings on
 *     -q        no banner in interactive mode    -h, --help  print the usage and exit
 *     --        stop handling options          -         run stdin and stop handling options
 * The script's arguments are in `arg` (arg[0] the script, negative indices the interpreter and options) and
 * in `...`. Errors print `luacuda: message` and a traceback; the exit status is 1 on an error, else 0 (or
 * what os.exit says). With no script and a terminal on stdin (or with -i), the interactive loop runs: the
 * loop itself is lua/cudadev/repl.lua; this file gives it line editing, history, completion and Ctrl-C.
 * luacuda exports the Lua C API (-Wl,-E), so C modules load as under lua: `luacuda /usr/bin/busted` works.
 *
 * NOTE [line editing]: libedit (BSD licence; `libedit-dev` in Debian; <editline/readline.h>), not GNU
 * readline. Readline is GPL (not LGPL): linking it would put every luacuda binary that we or an embedder
 * ship under the GPL, while Lua and cudadev are under permissive licences. libedit has the part of the
 * readline interface we use (readline, history, the completion and getc hooks) and is part of macOS and
 * the BSDs. It is optional: CMake looks for it (CDV_USE_LIBEDIT); without it, or when stdin is not a
 * terminal, lines are read with fgets (no editing, history or completion). History: ~/.luacuda_history,
 * or the file $LUACUDA_HISTORY names ("" for none).
 *
 * NOTE [Ctrl-C in luacuda]: one SIGINT handler, three situations.
 *   - At the prompt it only sets a flag; our getc hook (or fgets, interrupted) sees it and the line being
 *     typed is dropped for a fresh prompt. (libedit's own signal handling is off: rl_catch_signals = 0.)
 *   - While a command runs, it arms a count hook that raises "interrupted!" at the next Lua instruction,
 *     as lua.c does, and calls cudadev_interrupt(), which stops an interruptible wait for the GPU (the REPL
 *     state is marked interruptible: NOTE [interruptible waits] in embed.c). The GPU work already queued
 *     keeps running; only the waiting stops.
 *   - The handler resets itself to the default action, so a second Ctrl-C before the first took effect
 *     (code stuck in a C call) ends the process, as with lua. It is re-armed after every command.
 * Scripts run as under lua: Ctrl-C interrupts Lua code, and waits for the GPU are not polled.
 */
#include <errno.h>
#include <locale.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>

#include "cudadev.h"

#if defined(CDV_USE_LIBEDIT)
#include <editline/readline.h>
#endif

static const char *progname = "luacuda";

/* ---------------------------------------------------------------- messages */
/* The usage text: on stderr after a bad option (bad), on stdout for -h / --help (bad NULL). */
static void print_usage(const char *bad) {
  FILE *out = bad != NULL ? stderr : stdout;
  if (bad != NULL && (bad[1] == 'e' || bad[1] == 'l'))
    fprintf(stderr, "%s: '%s' needs argument\n", progname, bad);
  else if (bad != NULL)
    fprintf(stderr, "%s: unrecognized option '%s'\n", progname, bad);
  fprintf(out,
          "usage: %s [options] [script [args]]\n"
          "Available options are:\n"
          "  -e stat   execute string 'stat'\n"
          "  -i        enter interactive mode after executing 'script'\n"
          "  -l mod    require library 'mod' into global 'mod'\n"
          "  -l g=mod  require library 'mod' into global 'g'\n"
          "  -v        show version information\n"
          "  -E        ignore environment variables\n"
          "  -W        turn warnings on\n"
          "  -q        no banner in interactive mode\n"
          "  -h, --help  show this text and exit\n"
          "  --        stop handling options\n"
          "  -         stop handling options and execute stdin\n"
          "With no script and a terminal, the interactive console starts (:help there lists its commands).\n"
          "The module is the global `cuda`; `require \"cudadev\"` returns the same table.\n",
          progname);
  fflush(out);
}

static const char *version_line(void) {
  static char line[160];
  snprintf(line, sizeof line, "luacuda %s (cudadev) with %s", cudadev_version(), LUA_COPYRIGHT);
  return line;
}

static void print_version(void) {
  printf("%s\n", version_line());
  fflush(stdout);
}

/* Print the error on top of the stack, if any; returns status unchanged. */
static int report(lua_State *L, int status) {
  if (status != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    fprintf(stderr, "%s: %s\n", progname, msg ? msg : "(error object is not a string)");
    fflush(stderr);
    lua_pop(L, 1);
  }
  return status;
}

/* ---------------------------------------------------------------- Ctrl-C (NOTE [Ctrl-C in luacuda]) */
static lua_State *globalL;
static volatile sig_atomic_t at_prompt, prompt_interrupted;

static void interrupt_hook(lua_State *L, lua_Debug *ar) {
  (void)ar;
  lua_sethook(L, NULL, 0, 0);
  luaL_error(L, "interrupted!");
}

static void set_sigint(void (*handler)(int), struct sigaction *old) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0; /* no SA_RESTART: a blocked read or sleep returns, so the flag is seen */
  sigaction(SIGINT, &sa, old);
}

static void on_sigint(int sig) {
  (void)sig;
  if (at_prompt) {
    prompt_interrupted = 1;
    return;
  }
  set_sigint(SIG_DFL, NULL); /* a second Ctrl-C kills the process, as with lua */
  lua_sethook(globalL, interrupt_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1);
  cudadev_interrupt(); /* last: an in-process launch of this thread is stopped once this handler returns (see
                        * NOTE [preempting a block] in cpu_run.c) */
}

/* ---------------------------------------------------------------- running chunks */
/* The level a traceback starts at: past an error raised inside cudadev's Lua parts, whose message is already at
 * the user's line (NOTE [error positions] in extra.lua), and the error() call above them; else 1. */
static int first_user_level(lua_State *L) {
  lua_Debug ar;
  int last_internal = 0;
  for (int level = 1; lua_getstack(L, level, &ar); level++) {
    lua_getinfo(L, "S", &ar);
    if (strncmp(ar.source, "=[cudadev]", 10) == 0)
      last_internal = level;
    else if (strcmp(ar.what, "C") != 0)
      break;
  }
  return last_internal + 1;
}

/* Message handler: any error value as text (honouring __tostring, e.g. cudadev.Error), then a traceback. */
static int traceback(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (msg == NULL) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
      msg = lua_tostring(L, -1);
    else
      msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  }
  luaL_traceback(L, L, msg, first_user_level(L));
  return 1;
}

/* Calls the function below its nargs arguments with the message handler below that, Ctrl-C armed; then
 * puts SIGINT back as it was and drops an interrupt that did not fire. */
static int pcall_armed(lua_State *L, int nargs, int nresults, int handler) {
  struct sigaction old;
  lua_State *prevL = globalL;
  globalL = L;
  cudadev_clear_interrupt();
  set_sigint(on_sigint, &old);
  int status = lua_pcall(L, nargs, nresults, handler);
  sigaction(SIGINT, &old, NULL);
  if (lua_gethook(L) == interrupt_hook) lua_sethook(L, NULL, 0, 0);
  cudadev_clear_interrupt();
  globalL = prevL;
  return status;
}

static int docall(lua_State *L, int nargs, int nresults) {
  int base = lua_gettop(L) - nargs;
  lua_pushcfunction(L, traceback);
  lua_insert(L, base);
  int status = pcall_armed(L, nargs, nresults, base);
  lua_remove(L, base);
  return status;
}

static int dochunk(lua_State *L, int status) {
  if (status == LUA_OK) status = docall(L, 0, 0);
  return report(L, status);
}

static int dostring(lua_State *L, const char *s, const char *name) {
  return dochunk(L, luaL_loadbuffer(L, s, strlen(s), name));
}

/* -l [g=]mod: global g (default: mod) = require(mod) */
static int dolibrary(lua_State *L, const char *spec) {
  const char *eq = strchr(spec, '=');
  const char *mod = eq ? eq + 1 : spec;
  lua_getglobal(L, "require");
  lua_pushstring(L, mod);
  int status = docall(L, 1, 1);
  if (status == LUA_OK) {
    if (eq)
      lua_pushlstring(L, spec, (size_t)(eq - spec));
    else
      lua_pushstring(L, spec);
    lua_insert(L, -2);
    lua_setglobal(L, lua_tostring(L, -2));
    lua_pop(L, 1);
  }
  return report(L, status);
}

/* The script (NULL: stdin) with arg[1..n] as its `...`. */
static int doscript(lua_State *L, const char *fname) {
  int status = luaL_loadfile(L, fname);
  if (status == LUA_OK) {
    if (lua_getglobal(L, "arg") != LUA_TTABLE) luaL_error(L, "'arg' is not a table");
    int n = (int)luaL_len(L, -1);
    luaL_checkstack(L, n + 3, "too many arguments to script");
    for (int i = 1; i <= n; i++) lua_rawgeti(L, -i, i);
    lua_remove(L, -n - 1); /* the arg table */
    status = docall(L, n, LUA_MULTRET);
  }
  return report(L, status);
}

/* LUA_INIT_5_4, else LUA_INIT: `@file` runs the file, anything else is Lua code. */
static int doinit(lua_State *L) {
  const char *name = "=LUA_INIT_5_4";
  const char *init = getenv(name + 1);
  if (init == NULL) {
    name = "=LUA_INIT";
    init = getenv(name + 1);
  }
  if (init == NULL) return LUA_OK;
  if (init[0] == '@') return dochunk(L, luaL_loadfile(L, init + 1));
  return dostring(L, init, name);
}

/* ---------------------------------------------------------------- reading lines (NOTE [line editing]) */
static const char COMPLETER_KEY[] = "luacuda.completer";
static int use_editor; /* libedit is linked and stdin is a terminal */
static char *history_path;

#if defined(CDV_USE_LIBEDIT)
static lua_State *completion_L;
static char **candidates;
static int ncandidates;

static char *next_candidate(const char *text, int state) {
  static int i;
  (void)text;
  if (state == 0) i = 0;
  return i < ncandidates ? strdup(candidates[i++]) : NULL;
}

/* rl_attempted_completion_function: the Lua completer (repl.lua) gets the word and the line before it */
static char **complete(const char *text, int start, int end) {
  lua_State *L = completion_L;
  char **matches = NULL;
  (void)end;
  rl_attempted_completion_over = 1; /* never fall back to file names */
  if (L == NULL || !lua_checkstack(L, 4)) return NULL;
  int top = lua_gettop(L);
  if (lua_getfield(L, LUA_REGISTRYINDEX, COMPLETER_KEY) == LUA_TFUNCTION) {
    lua_pushstring(L, text);
    lua_pushlstring(L, rl_line_buffer, start > 0 ? (size_t)start : 0);
    if (lua_pcall(L, 2, 1, 0) == LUA_OK && lua_istable(L, -1)) {
      int n = (int)lua_rawlen(L, -1);
      candidates = calloc((size_t)n + 1, sizeof *candidates);
      for (int i = 1; candidates != NULL && i <= n; i++) {
        lua_rawgeti(L, -1, i);
        const char *s = lua_tostring(L, -1);
        if (s != NULL && (candidates[ncandidates] = strdup(s)) != NULL) ncandidates++;
        lua_pop(L, 1);
      }
      if (ncandidates > 0) matches = rl_completion_matches(text, next_candidate);
      for (int i = 0; i < ncandidates; i++) free(candidates[i]);
      free(candidates);
      candidates = NULL;
      ncandidates = 0;
    }
  }
  lua_settop(L, top);
  return matches;
}

/* rl_getc_function: a key, or '\n' once Ctrl-C was pressed at the prompt (the line is then dropped). It
 * polls with a timeout so that a signal arriving just before the read is not missed. UTF-8 sequences are
 * decoded here when the locale is multibyte, as libedit's own reader would. */
static int read_key(FILE *f) {
  int fd = fileno(f);
  unsigned char c;
  for (;;) {
    if (prompt_interrupted) return '\n';
    struct pollfd p = {fd, POLLIN, 0};
    int r = poll(&p, 1, 200);
    if (r == 0 || (r < 0 && errno == EINTR)) continue;
    if (r < 0) return -1;
    ssize_t n = read(fd, &c, 1);
    if (n == 1) break;
    if (n == 0 || (errno != EINTR && errno != EAGAIN)) return -1;
  }
  if (c < 0xc0 || MB_CUR_MAX == 1) return c;
  int more = c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : 1;
  int cp = c & (0x3f >> more);
  for (int i = 0; i < more; i++) {
    unsigned char k;
    if (read(fd, &k, 1) != 1 || (k & 0xc0) != 0x80) return c;
    cp = (cp << 6) | (k & 0x3f);
  }
  return cp;
}

static void save_history(void) {
  if (use_editor && history_path != NULL) write_history(history_path);
}

static void editor_init(void) {
  rl_readline_name = "luacuda";
  rl_catch_signals = 0; /* our handler decides (NOTE [Ctrl-C in luacuda]) */
  rl_getc_function = read_key; /* read by rl_initialize: set before anything initialises libedit */
  rl_attempted_completion_function = complete;
  rl_basic_word_break_characters = " \t\n\"\\'`@$><=;|&{(,+-*/%^~#[])"; /* not '.' or ':': cuda.dev<Tab> */
  rl_completion_append_character = '\0';
  using_history();
  stifle_history(1000);
  if (history_path != NULL) read_history(history_path);
  atexit(save_history); /* os.exit() from the prompt keeps the history too */
}
#endif

/* fgets without a length limit: the line without its newline, or NULL at end of input / on Ctrl-C */
static int read_plain(lua_State *L, const char *prompt) {
  char buf[512];
  luaL_Buffer b;
  int got = 0;
  fputs(prompt, stdout);
  fflush(stdout);
  luaL_buffinit(L, &b);
  while (fgets(buf, sizeof buf, stdin) != NULL) {
    size_t n = strlen(buf);
    got = 1;
    if (n > 0 && buf[n - 1] == '\n') {
      luaL_addlstring(&b, buf, n - 1);
      luaL_pushresult(&b);
      return 1;
    }
    luaL_addlstring(&b, buf, n);
  }
  if (prompt_interrupted) {
    clearerr(stdin);
    luaL_pushresult(&b);
    lua_pop(L, 1);
    fputc('\n', stdout);
    lua_pushboolean(L, 0);
    return 1;
  }
  luaL_pushresult(&b);
  if (!got) {
    lua_pop(L, 1);
    lua_pushnil(L);
  }
  return 1;
}

/* host.readline(prompt) -> the line; nil at end of input; false when Ctrl-C dropped it */
static int l_readline(lua_State *L) {
  const char *prompt = luaL_optstring(L, 1, "> ");
  int n = 1;
  if (lua_gethook(L) == interrupt_hook) lua_sethook(L, NULL, 0, 0); /* a Ctrl-C that came too late */
  prompt_interrupted = 0;
  at_prompt = 1;
  set_sigint(on_sigint, NULL);
#if defined(CDV_USE_LIBEDIT)
  if (use_editor) {
    completion_L = L;
    char *line = readline(prompt);
    completion_L = NULL;
    if (prompt_interrupted)
      lua_pushboolean(L, 0);
    else if (line == NULL)
      lua_pushnil(L);
    else
      lua_pushstring(L, line);
    free(line);
  } else
#endif
    n = read_plain(L, prompt);
  at_prompt = 0;
  prompt_interrupted = 0;
  cudadev_clear_interrupt();
  return n; /* the handler stays: in a session Ctrl-C never kills between commands */
}

static int l_add_history(lua_State *L) {
  const char *line = luaL_checkstring(L, 1);
#if defined(CDV_USE_LIBEDIT)
  if (use_editor && *line) add_history(line);
#else
  (void)line;
#endif
  return 0;
}

static int l_set_completer(lua_State *L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  lua_settop(L, 1);
  lua_setfield(L, LUA_REGISTRYINDEX, COMPLETER_KEY);
  return 0;
}

/* host.call(handler, f, ...) -> like xpcall, with Ctrl-C armed and waits interruptible */
static int l_call(lua_State *L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  luaL_checkany(L, 2);
  int status = pcall_armed(L, lua_gettop(L) - 2, LUA_MULTRET, 1);
  lua_pushboolean(L, status == LUA_OK);
  lua_replace(L, 1);
  return lua_gettop(L);
}

/* host.now() -> seconds of a monotonic clock */
static int l_now(lua_State *L) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  lua_pushnumber(L, (lua_Number)ts.tv_sec + ts.tv_nsec * 1e-9);
  return 1;
}

/* The interactive session: repl.lua's run(host); restarted (without the banner) if it ever fails. */
static int doREPL(lua_State *L, int banner, int version_printed) {
  static const luaL_Reg host_fns[] = {{"readline", l_readline},
                                      {"add_history", l_add_history},
                                      {"set_completer", l_set_completer},
                                      {"call", l_call},
                                      {"now", l_now},
                                      {NULL, NULL}};
  const char *h = getenv("LUACUDA_HISTORY"), *home = getenv("HOME");
  cudadev_set_interruptible(L, 1);
#if defined(CDV_USE_LIBEDIT)
  use_editor = isatty(STDIN_FILENO);
#endif
  if (h != NULL)
    history_path = *h ? strdup(h) : NULL;
  else if (home != NULL && (history_path = malloc(strlen(home) + 32)) != NULL)
    sprintf(history_path, "%s/.luacuda_history", home);
#if defined(CDV_USE_LIBEDIT)
  if (use_editor) {
    setlocale(LC_CTYPE, ""); /* libedit displays what the terminal's encoding allows */
    editor_init();
  }
#endif
  lua_getglobal(L, "require");
  lua_pushliteral(L, "cudadev.repl");
  if (report(L, docall(L, 1, 1)) != LUA_OK) return 0;
  int repl = lua_gettop(L);
  int status;
  for (int attempt = 0; attempt < 100; attempt++) {
    lua_getfield(L, repl, "run");
    luaL_newlib(L, host_fns);
    lua_pushstring(L, use_editor ? "libedit" : "none");
    lua_setfield(L, -2, "line_editing");
    lua_pushstring(L, version_line());
    lua_setfield(L, -2, "version");
    lua_pushboolean(L, banner && attempt == 0);
    lua_setfield(L, -2, "banner");
    lua_pushboolean(L, version_printed);
    lua_setfield(L, -2, "version_printed");
    if (history_path != NULL && use_editor) {
      lua_pushstring(L, history_path);
      lua_setfield(L, -2, "history");
    }
    status = report(L, docall(L, 1, 0));
    if (status == LUA_OK) break;
  }
#if defined(CDV_USE_LIBEDIT)
  save_history();
#endif
  lua_settop(L, repl - 1);
  return status == LUA_OK;
}

/* ---------------------------------------------------------------- the command line */
typedef struct cmdline {
  int argc;
  char **argv;
  int script; /* index of the script in argv; argc when there is none */
  int bad; /* index of a malformed option, or 0 */
  int run_e, interactive, version, ignore_env, quiet, help;
} cmdline;

/* Scan the options (they run later, in order, by run_options); stop at the script name. */
static void scan_options(cmdline *c) {
  int i;
  for (i = 1; i < c->argc; i++) {
    const char *a = c->argv[i];
    if (a[0] != '-') break; /* the script */
    if (a[1] == '\0') break; /* "-": stdin is the script */
    if (a[1] == '-' && a[2] == '\0') {
      i++; /* "--": what follows is the script */
      break;
    }
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      c->help = 1; /* before anything runs, as other tools' --help */
      continue;
    }
    if (a[1] == 'e' || a[1] == 'l') {
      c->run_e |= a[1] == 'e';
      if (a[2] == '\0') { /* the value is the next argument, which must not be an option */
        if (i + 1 >= c->argc || c->argv[i + 1][0] == '-') {
          c->bad = i;
          return;
        }
        i++;
      }
      continue;
    }
    if (a[2] != '\0' || strchr("EWivq", a[1]) == NULL) {
      c->bad = i;
      return;
    }
    if (a[1] == 'E') c->ignore_env = 1;
    if (a[1] == 'i') c->interactive = 1;
    if (a[1] == 'v') c->version = 1;
    if (a[1] == 'q') c->quiet = 1;
  }
  c->script = i;
}

/* arg[0] is the script; the interpreter and its options get negative indices. */
static void make_arg_table(lua_State *L, const cmdline *c) {
  int zero = c->script < c->argc ? c->script : 0;
  lua_createtable(L, c->argc - zero - 1 > 0 ? c->argc - zero - 1 : 0, zero + 1);
  for (int i = 0; i < c->argc; i++) {
    lua_pushstring(L, c->argv[i]);
    lua_rawseti(L, -2, i - zero);
  }
  lua_setglobal(L, "arg");
}

/* Run -e, -l and -W in the order given; stop at the first failure. */
static int run_options(lua_State *L, const cmdline *c) {
  for (int i = 1; i < c->script; i++) {
    const char *a = c->argv[i];
    if (a[1] == 'W') {
      lua_warning(L, "@on", 0);
    } else if (a[1] == 'e' || a[1] == 'l') {
      const char *value = a[2] != '\0' ? a + 2 : c->argv[++i];
      int status = a[1] == 'e' ? dostring(L, value, "=(command line)") : dolibrary(L, value);
      if (status != LUA_OK) return 0;
    }
  }
  return 1;
}

/* Everything runs in protected mode, so that even a memory error while setting up is reported. */
static int pmain(lua_State *L) {
  cmdline *c = lua_touserdata(L, 1);
  luaL_checkversion(L);
  scan_options(c);
  if (c->bad) {
    print_usage(c->argv[c->bad]);
    return 0;
  }
  if (c->help) {
    print_usage(NULL);
    lua_pushboolean(L, 1);
    return 1;
  }
  /* as lua: -i shows the version; here the banner does, unless -q */
  if (c->version) print_version();
  if (c->ignore_env) {
    lua_pushboolean(L, 1);
    lua_setfield(L, LUA_REGISTRYINDEX, "LUA_NOENV"); /* package.path ignores LUA_PATH */
  }
  luaL_openlibs(L);
  luaL_requiref(L, "cudadev", luaopen_cudadev, 0);
  lua_setglobal(L, "cuda");
  make_arg_table(L, c);
  lua_gc(L, LUA_GCRESTART);
  lua_gc(L, LUA_GCGEN, 0, 0);
  if (!c->ignore_env && doinit(L) != LUA_OK) return 0;
  if (!run_options(L, c)) return 0;
  if (c->script < c->argc) {
    const char *s = c->argv[c->script];
    int from_stdin = strcmp(s, "-") == 0 && strcmp(c->argv[c->script - 1], "--") != 0;
    if (doscript(L, from_stdin ? NULL : s) != LUA_OK) return 0;
  }
  if (c->interactive) {
    if (!doREPL(L, !c->quiet, c->version)) return 0;
  } else if (c->script == c->argc && !c->run_e && !c->version) {
    if (isatty(STDIN_FILENO)) {
      if (!doREPL(L, !c->quiet, 0)) return 0;
    } else if (dochunk(L, luaL_loadfile(L, NULL)) != LUA_OK) {
      return 0;
    }
  }
  lua_pushboolean(L, 1);
  return 1;
}

int main(int argc, char **argv) {
  if (argc > 0 && argv[0][0] != '\0') progname = argv[0];
  /* a person is watching: a compile that takes seconds says so (NOTE [compile notice] in module.c); a script run
   * with CUDADEV_VERBOSE=0 keeps stderr quiet */
  setenv("CUDADEV_VERBOSE", "1", 0);
  lua_State *L = luaL_newstate();
  if (L == NULL) {
    fprintf(stderr, "%s: cannot create state: not enough memory\n", progname);
    return EXIT_FAILURE;
  }
  lua_gc(L, LUA_GCSTOP); /* no collection while the libraries load */
  cmdline c = {.argc = argc, .argv = argv};
  lua_pushcfunction(L, pmain);
  lua_pushlightuserdata(L, &c);
  int status = lua_pcall(L, 1, 1, 0);
  int ok = lua_toboolean(L, -1);
  report(L, status);
  lua_close(L);
  return status == LUA_OK && ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
