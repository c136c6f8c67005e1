#!/usr/bin/env bash
# .ci/deps.sh: make sure what cudadev's build and tests use is installed (`make deps` runs it).
# Each Debian package is checked by what it provides (a command, a header, a Lua module), not by dpkg's
# database, so a host that has them some other way (e.g. a GPU host with the .debs unpacked under
# /tmp/gpuroot, see shared/gpu-host/env.sh) passes without apt. As root, the missing ones are installed
# with one `apt-get update` and one `apt-get install -y`; otherwise this prints the command to run.
# Essential packages missing: exit 1. Only optional ones (libedit-dev, tmux, valgrind, luarocks, OpenMPI for cd.mpi
# and its spec, liblapacke for cd.linalg and libkissfft-float131 for cd.fft's complex64 on the cpu device): a
# note, exit 0.
#   .ci/deps.sh          everything the build and the tests use (`make deps`, `make test`)
#   .ci/deps.sh --demo   only what the module, luacuda and the demo need (`make demo`): the compilers, CMake and Lua
# apt waits up to 10 minutes for another apt's lock (DPkg::Lock::Timeout) instead of failing at once.
set -euo pipefail
demo=no
[ "${1:-}" = --demo ] && demo=yes

lua=${LUA:-lua5.4}
has() { command -v "$1" >/dev/null 2>&1; }
has_lua_module() { has "$lua" && "$lua" -e "require '$1'" >/dev/null 2>&1; }
has_python_module() { has python3 && python3 -c "import $1" >/dev/null 2>&1; }
has_lib() { /sbin/ldconfig -p 2>/dev/null | grep -q "[[:space:]]$1 "; }
has_header() { for d in /usr/include /usr/local/include; do [ -e "$d/$1" ] && return 0; done; return 1; }

# package  essential?  check; the first seven are all that `make demo` installs
checks=(
  "cmake          yes  has cmake"
  "gcc            yes  has gcc"
  "g++            yes  has g++"
  "make           yes  has make"
  "pkg-config     yes  has pkg-config"
  "lua5.4         yes  has $lua"
  "liblua5.4-dev  yes  has_header lua5.4/lua.h"
  "lua-busted     yes  has_lua_module busted.runner"
  "python3-numpy  no   has_python_module numpy"
  "liblapacke     no   has_lib liblapacke.so.3"
  "libkissfft-float131 no has_lib libkissfft-float.so.131"
  "libedit-dev    no   has_header histedit.h"
  "tmux           no   has tmux"
  "valgrind       no   has valgrind"
  "luarocks       no   has luarocks"
  "libopenmpi-dev no   has mpicc"
  "openmpi-bin    no   has mpirun"
)

[ "$demo" = yes ] && checks=("${checks[@]:0:7}")
missing=() essential=()
for c in "${checks[@]}"; do
  read -r pkg need check <<<"$c"
  if ! eval "$check"; then
    missing+=("$pkg")
    [ "$need" = yes ] && essential+=("$pkg")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" = 0 ] && has apt-get; then
  echo "deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  lock=(-o DPkg::Lock::Timeout=600)
  if apt-get "${lock[@]}" update -qq &&
     apt-get "${lock[@]}" install -y -qq -o Dpkg::Use-Pty=0 --no-install-recommends "${missing[@]}" </dev/null; then
    # luarocks brings lua5.1, whose alternative outranks 5.4 and would make /usr/bin/lua (busted's shebang) 5.1
    if [[ " ${missing[*]} " == *" luarocks "* ]] && has update-alternatives && [ -x /usr/bin/lua5.4 ]; then
      update-alternatives --set lua-interpreter /usr/bin/lua5.4 >/dev/null 2>&1 || true
      [ -x /usr/bin/luac5.4 ] && update-alternatives --set lua-compiler /usr/bin/luac5.4 >/dev/null 2>&1 || true
    fi
    exit 0
  fi
  echo "deps: apt-get could not install ${missing[*]}" >&2
else
  echo "deps: missing ${missing[*]}; install with:" >&2
  echo "  sudo apt-get install ${missing[*]}" >&2
fi
if [ ${#essential[@]} -gt 0 ]; then
  echo "deps: cannot build or test without ${essential[*]}" >&2
  exit 1
fi
echo "deps: continuing without the optional ${missing[*]}" >&2
