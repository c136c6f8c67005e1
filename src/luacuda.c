/*
 * luacuda.c: a Lua 5.4 interpreter with cudadev built in, loaded before anything runs and bound to the
 * global `cuda` (as `require "cudadev"` would return it).
 *
 * It behaves as Lua's own `lua` runner does, so scripts and habits carry over:
 *   luacuda [options] [script [args]]
 *     -e stat   execute the string stat        -l mod    require mod into global mod (-l g=mod: into g)
 *     -i        interactive mode after script  -v        print version information
 *     -E        ignore LUA_INIT and LUA_PATH   -W        turn warnings on
 *     --        stop handling options          -         run stdin and stop handling options
 * The script's arguments are in `arg` (arg[0] the script, negative indices the interpreter and options) and
 * in `...`. Errors print `luacuda: message` and a traceback; the exit status is 1 on an error, else 0 (or
 * what os.exit says). Ctrl-C interrupts running Lua code with an error instead of killing the process.
 * The interactive loop (line editing, cudadev-aware printing) comes later; -i says so.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>

#include "cudadev.h"
#include "cdv.h"

static const char *progname = "luacuda";

/* ---------------------------------------------------------------- messages */
static void print_usage(const char *bad) {
  if (bad[1] == 'e' || bad[1] == 'l')
    fprintf(stderr, "%s: '%s' needs argument\n", progname, bad);
  else
    fprintf(stderr, "%s: unrecognized option '%s'\n", progname, bad);
  fprintf(stderr,
          "usage: %s [options] [script [args]]\n"
          "Available options are:\n"
          "  -e stat   execute string 'stat'\n"
          "  -i        enter interactive mode after executing 'script'\n"
          "  -l mod    require library 'mod' into global 'mod'\n"
          "  -l g=mod  require library 'mod' into global 'g'\n"
          "  -v        show version information\n"
          "  -E        ignore environment variables\n"
          "  -W        turn warnings on\n"
          "  --        stop handling options\n"
          "  -         stop handling options and execute stdin\n",
          progname);
}

static void print_version(void) {
  printf("luacuda %s (cudadev) with %s\n", CDV_VERSION, LUA_COPYRIGHT);
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

/* ---------------------------------------------------------------- running chunks */
/* Ctrl-C: the handler only arms a hook; the hook raises the error inside Lua, at a safe point. */
static lua_State *running;

static void interrupt_hook(lua_State *L, lua_Debug *ar) {
  (void)ar;
  lua_sethook(L, NULL, 0, 0);
  luaL_error(L, "interrupted!");
}

static void on_sigint(int sig) {
  signal(sig, SIG_DFL);   /* a second Ctrl-C kills the process, as with lua */
  lua_sethook(running, interrupt_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1);
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
  luaL_traceback(L, L, msg, 1);
  return 1;
}

/* Call the function below its nargs arguments, with the traceback handler and Ctrl-C armed. */
static int docall(lua_State *L, int nargs, int nresults) {
  int base = lua_gettop(L) - nargs;
  lua_pushcfunction(L, traceback);
  lua_insert(L, base);
  running = L;
  signal(SIGINT, on_sigint);
  int status = lua_pcall(L, nargs, nresults, base);
  signal(SIGINT, SIG_DFL);
  lua_remove(L, base);
  return status;
}

static int dochunk(lua_State *L, int status) {
  if (status == LUA_OK)
    status = docall(L, 0, 0);
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
    if (lua_getglobal(L, "arg") != LUA_TTABLE)
      luaL_error(L, "'arg' is not a table");
    int n = (int)luaL_len(L, -1);
    luaL_checkstack(L, n + 3, "too many arguments to script");
    for (int i = 1; i <= n; i++)
      lua_rawgeti(L, -i, i);
    lua_remove(L, -n - 1);   /* the arg table */
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
  if (init == NULL)
    return LUA_OK;
  if (init[0] == '@')
    return dochunk(L, luaL_loadfile(L, init + 1));
  return dostring(L, init, name);
}

/* ---------------------------------------------------------------- the command line */
typedef struct cmdline {
  int argc;
  char **argv;
  int script;             /* index of the script in argv; argc when there is none */
  int bad;                /* index of a malformed option, or 0 */
  int run_e, interactive, version, ignore_env;
} cmdline;

/* Scan the options (they run later, in order, by run_options); stop at the script name. */
static void scan_options(cmdline *c) {
  int i;
  for (i = 1; i < c->argc; i++) {
    const char *a = c->argv[i];
    if (a[0] != '-')
      break;              /* the script */
    if (a[1] == '\0')
      break;              /* "-": stdin is the script */
    if (a[1] == '-' && a[2] == '\0') {
      i++;                /* "--": what follows is the script */
      break;
    }
    if (a[1] == 'e' || a[1] == 'l') {
      c->run_e |= a[1] == 'e';
      if (a[2] == '\0') {          /* the value is the next argument, which must not be an option */
        if (i + 1 >= c->argc || c->argv[i + 1][0] == '-') {
          c->bad = i;
          return;
        }
        i++;
      }
      continue;
    }
    if (a[2] != '\0' || strchr("EWiv", a[1]) == NULL) {
      c->bad = i;
      return;
    }
    if (a[1] == 'E') c->ignore_env = 1;
    if (a[1] == 'i') c->interactive = c->version = 1;
    if (a[1] == 'v') c->version = 1;
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
      if (status != LUA_OK)
        return 0;
    }
  }
  return 1;
}

static void interactive_later(void) {
  fprintf(stderr, "%s: interactive mode comes later; run a script, or '-' to read one from stdin\n", progname);
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
  if (c->version)
    print_version();
  if (c->ignore_env) {
    lua_pushboolean(L, 1);
    lua_setfield(L, LUA_REGISTRYINDEX, "LUA_NOENV");   /* package.path ignores LUA_PATH */
  }
  luaL_openlibs(L);
  luaL_requiref(L, "cudadev", luaopen_cudadev, 0);
  lua_setglobal(L, "cuda");
  make_arg_table(L, c);
  lua_gc(L, LUA_GCRESTART);
  lua_gc(L, LUA_GCGEN, 0, 0);
  if (!c->ignore_env && doinit(L) != LUA_OK)
    return 0;
  if (!run_options(L, c))
    return 0;
  if (c->script < c->argc) {
    const char *s = c->argv[c->script];
    int from_stdin = strcmp(s, "-") == 0 && strcmp(c->argv[c->script - 1], "--") != 0;
    if (doscript(L, from_stdin ? NULL : s) != LUA_OK)
      return 0;
  }
  if (c->interactive) {
    interactive_later();
  } else if (c->script == c->argc && !c->run_e && !c->version) {
    if (isatty(STDIN_FILENO)) {
      print_version();
      interactive_later();
    } else if (dochunk(L, luaL_loadfile(L, NULL)) != LUA_OK) {
      return 0;
    }
  }
  lua_pushboolean(L, 1);
  return 1;
}

int main(int argc, char **argv) {
  if (argc > 0 && argv[0][0] != '\0')
    progname = argv[0];
  lua_State *L = luaL_newstate();
  if (L == NULL) {
    fprintf(stderr, "%s: cannot create state: not enough memory\n", progname);
    return EXIT_FAILURE;
  }
  lua_gc(L, LUA_GCSTOP);   /* no collection while the libraries load */
  cmdline c = { .argc = argc, .argv = argv };
  lua_pushcfunction(L, pmain);
  lua_pushlightuserdata(L, &c);
  int status = lua_pcall(L, 1, 1, 0);
  int ok = lua_toboolean(L, -1);
  report(L, status);
  lua_close(L);
  return status == LUA_OK && ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
