# cudadev's front door: a thin layer over CMake (CMakeLists.txt, CMakePresets.json), busted (.busted) and
# .ci/. Nothing here builds anything itself.
#   make / make build   configure (once) and build into build/
#   make deps           install what is missing (as root, with apt), else say what to install
#   make demo           build, then run examples/saxpy.lua (on the GPU, or on the cpu device without one)
#   make test           build, then run spec/ with busted
#   make asan           spec/ against an AddressSanitizer + UBSan build in build-asan/
#   make valgrind       spec/ under valgrind on the cpu device
#   make bench          bench/run
#   make clean
# Variables: LUA (lua5.4), BUSTED (how to run busted), BUSTED_ARGS (e.g. spec/20-array_spec.lua), JOBS.

LUA         ?= lua5.4
BUSTED      ?= $(LUA) $(shell command -v busted || echo /usr/bin/busted)
BUSTED_ARGS ?=
JOBS        ?= $(shell nproc 2>/dev/null || echo 2)

# Lua reads LUA_PATH_5_4 / LUA_CPATH_5_4 before LUA_PATH / LUA_CPATH: where a host sets the versioned ones
# (shared/gpu-host/env.sh does), our directories go in front of theirs.
LPATH := lua/?.lua;lua/?/init.lua;
LUA_ENV = LUA_PATH='$(LPATH);' LUA_CPATH='build/?.so;;' \
  $(if $(LUA_PATH_5_4),LUA_PATH_5_4='$(LPATH)$(LUA_PATH_5_4)') \
  $(if $(LUA_CPATH_5_4),LUA_CPATH_5_4='build/?.so;$(LUA_CPATH_5_4)')

# lua5.4 itself is not instrumented, so the ASan runtime is preloaded to come first; its leak report would
# be about the interpreter and busted too, hence detect_leaks=0. UBSan findings stop the run.
ASAN_ENV = LD_PRELOAD=$$($(CC) -print-file-name=libasan.so) ASAN_OPTIONS=detect_leaks=0 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

# $(call cmake_build,<preset>,<dir>): configure once (cmake re-runs itself when CMakeLists change), build.
define cmake_build
	@test -f $(2)/CMakeCache.txt || cmake --preset $(1)
	cmake --build --preset $(1) -j $(JOBS)
endef

.PHONY: all build deps demo test asan valgrind bench clean
.NOTPARALLEL:                       # deps, then build, then run: cmake parallelises the build itself
MAKEFLAGS += --no-print-directory

all: build

build:
	$(call cmake_build,default,build)

deps:
	@bash .ci/deps.sh

demo: deps build
	$(LUA_ENV) $(LUA) examples/saxpy.lua

test: deps build
	$(BUSTED) $(BUSTED_ARGS)

asan: deps
	$(call cmake_build,asan,build-asan)
	$(ASAN_ENV) $(BUSTED) --cpath='build-asan/?.so' $(BUSTED_ARGS)

valgrind: deps build
	CUDADEV_DEVICE=cpu valgrind -q --leak-check=full --keep-debuginfo=yes --error-exitcode=1 $(BUSTED) $(BUSTED_ARGS)

bench: deps build
	@test -x bench/run || { echo "make bench: bench/run does not exist yet" >&2; exit 1; }
	$(LUA_ENV) bench/run

clean:
	rm -rf build build-debug build-asan
