# cudadev's front door: a thin layer over CMake (CMakeLists.txt, CMakePresets.json), busted (.busted) and
# .ci/. Nothing here builds anything itself.
#   make / make build   configure (once) and build into build/
#   make deps           install what is missing (as root, with apt), else say what to install
#   make demo           install only what the module needs, build only the module and luacuda, then run
#                       examples/saxpy.lua (on the GPU, or on the cpu device without one)
#   make test           install what the tests need, build, then run spec/ with busted (the suite) and the C tests
#                       of tests/ (ctest); ends with a summary whose last line is the suite's own
#                       `busted: N passed, N failed, N skipped`. About 5 minutes on 2 idle cores.
#   make check          the sanitizer passes (CHECKS, below): the suite again against AddressSanitizer + UBSan and
#                       under valgrind, with the same summary. About 15 minutes on 2 idle cores. .ci/run runs
#                       `make test`, then `make check`
#   make ctest          the C tests of tests/ (CTest: the signature parser, the cpu and cuda backends without Lua)
#   make asan           spec/ against an AddressSanitizer + UBSan build in build-asan/
#   make valgrind       spec/ under valgrind memcheck (leaks included) on the cpu device, then a short fuzz run
#   make fuzz           the API fuzzer for FUZZ_CALLS calls (seed FUZZ_SEED); spec/fuzz.lua --help for longer runs
#   make bench          bench/run
#   make install        build, then install into PREFIX (/usr/local): luacuda, the module, and for C hosts
#                       libcudadev.a, cudadev.h, cudadev.pc, lib/cmake/cudadev (DESTDIR=... stages it)
#   make bench-cpu      bench/cpu (the cpu device against OpenMP; no GPU needed)
#   make clean
# Variables: LUA (lua5.4), BUSTED (how to run busted), BUSTED_ARGS (e.g. spec/20-array_spec.lua), JOBS,
#   PREFIX (make install), TESTS (what `make test` runs after the suite: "ctest"), CHECKS (the passes of `make check`:
#   "asan valgrind"; nothing runs after the suite when BUSTED_ARGS names specs), FUZZ_CALLS, FUZZ_SEED.

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

TESTS       ?= ctest
CHECKS      ?= asan valgrind
FUZZ_CALLS  ?= 100000
FUZZ_SEED   ?= 1

# valgrind: the cpu device (no GPU driver under memcheck), launches in this process (CUDADEV_CPU_FORK=0: a forked
# launch would be checked, and leak-reported, as a process of its own), C modules kept loaded at lua_close
# (.ci/keep_loaded.lua: cudadev's process-lifetime tables stay reachable instead of "lost"), fiber stacks
# (256 KiB apart) taken as stack switches, not as huge frames (--max-stackframe), glibc's own blocks suppressed.
# Memcheck's findings go to build/valgrind.log: any there fail the run. The fuzz spec runs its fuzzer in a
# child process, which valgrind would not see: the fuzzer runs under memcheck by itself instead (no launches
# in-process: its kernels write out of bounds on purpose).
VALGRIND_ENV = CUDADEV_DEVICE=cpu CUDADEV_CPU_FORK=0
VALGRIND = valgrind -q --leak-check=full --keep-debuginfo=yes --max-stackframe=131072 \
  --suppressions=.ci/valgrind.supp --error-exitcode=99

# $(call cmake_build,<preset>,<dir>): configure once (cmake re-runs itself when CMakeLists change), build.
define cmake_build
	@test -f $(2)/CMakeCache.txt || cmake --preset $(1)
	cmake --build --preset $(1) -j $(JOBS)
endef

.PHONY: all build deps deps-demo build-demo demo test check check-ctest check-asan check-valgrind ctest asan valgrind fuzz bench bench-cpu install clean format
.NOTPARALLEL:                       # deps, then build, then run: cmake parallelises the build itself
MAKEFLAGS += --no-print-directory

all: build

build:
	$(call cmake_build,default,build)

deps:
	@bash .ci/deps.sh

deps-demo:
	@bash .ci/deps.sh --demo

# the module and luacuda only: no C tests, examples or benchmarks
build-demo:
	@test -f build/CMakeCache.txt || cmake --preset default
	cmake --build --preset default -j $(JOBS) --target cudadev luacuda

demo: deps-demo build-demo
	$(LUA_ENV) $(LUA) examples/saxpy.lua

# The suite, then each of TESTS as a pass of its own (.ci/check.sh keeps each pass's log and closing line in
# build/check-*), then the summary: every pass's line, and the suite's own closing line last. Fails when any
# pass failed. `make check` runs the sanitizer passes the same way, and its summary lists the suite's passes too
# when they ran before it (as in .ci/run).
test: deps build
	@rm -f build/check-*.status
	@bash .ci/check.sh suite $(BUSTED) $(BUSTED_ARGS)
	@$(if $(BUSTED_ARGS),,$(foreach c,$(TESTS),$(MAKE) check-$(c) || true;))
	@bash .ci/check.sh --summary suite $(if $(BUSTED_ARGS),,$(TESTS))

check: deps
	@rm -f $(foreach c,$(CHECKS),build/check-$(c).status)
	@$(foreach c,$(CHECKS),$(MAKE) check-$(c) || true;)
	@bash .ci/check.sh --summary $(foreach c,suite $(TESTS),?$(c)) $(CHECKS)

# GPU-labelled C tests need a GPU host (.ci/gpu-session smoke runs that one).
check-ctest: deps build
	@bash .ci/check.sh ctest ctest --test-dir build -LE gpu --output-on-failure

ctest: deps build
	ctest --test-dir build -LE gpu --output-on-failure

# The install spec (spec/78-install_spec.lua) tests packaging, not memory: it runs in the suite pass only.
# The MPI spec (spec/96-mpi_spec.lua) runs its ranks as processes of their own (mpirun, build/luacuda) that neither
# the ASan nor the valgrind pass instruments (valgrind does not follow into mpirun's ranks): suite pass only.
# The embedding examples (spec/75-embed_spec.lua) run from build-asan/ (CUDADEV_BUILD), instrumented too: their
# threads fork launch processes, which start no thread under ASan (NOTE [forks under ASan] in src/cpu_run.c).
check-asan: deps
	$(call cmake_build,asan,build-asan)
	@CUDADEV_DEVICE=cpu CUDADEV_BUILD=$(CURDIR)/build-asan bash .ci/check.sh asan $(MAKE) asan BUSTED_ARGS="--exclude-pattern=install_spec --exclude-pattern=mpi_spec"

check-valgrind: deps build
	@if command -v valgrind >/dev/null; then bash .ci/check.sh valgrind $(MAKE) valgrind; \
	 else bash .ci/check.sh --skip valgrind "valgrind is not installed"; fi

asan: deps
	$(call cmake_build,asan,build-asan)
	$(ASAN_ENV) $(BUSTED) --cpath='build-asan/?.so' $(BUSTED_ARGS)

valgrind: deps build
	@rm -f build/valgrind.log build/valgrind-fuzz.log build/valgrind-fuzz.status
	-$(VALGRIND_ENV) $(VALGRIND) --log-file=build/valgrind.log $(BUSTED) --helper=.ci/keep_loaded.lua --exclude-pattern=fuzz_spec --exclude-pattern=install_spec --exclude-pattern=mpi_spec $(BUSTED_ARGS)
	@# the fuzzer in an empty directory: its random cd.save and a:tofile calls take relative paths
	d=$$(mktemp -d) && cd "$$d" && $(VALGRIND_ENV) CUDADEV_CPU_MEMORY=8G $(subst =.ci/,=$(CURDIR)/.ci/,$(VALGRIND)) \
	  --log-file=$(CURDIR)/build/valgrind-fuzz.log $(LUA) -e "dofile('$(CURDIR)/.ci/keep_loaded.lua')" \
	  $(CURDIR)/spec/fuzz.lua --worker --brief --calls 20000 --seed $(FUZZ_SEED) --root $(CURDIR); \
	  echo $$? > $(CURDIR)/build/valgrind-fuzz.status; rm -rf "$$d"
	@cat build/valgrind-fuzz.log >> build/valgrind.log; rm -f build/valgrind-fuzz.log
	@if [ -s build/valgrind.log ]; then cat build/valgrind.log; echo "valgrind: memcheck found errors (build/valgrind.log)"; exit 1; fi
	@if [ "$$(cat build/valgrind-fuzz.status)" != 0 ]; then echo "valgrind: the fuzz run failed"; exit 1; fi
	@echo "valgrind: no memcheck errors"

fuzz: deps build
	$(LUA) spec/fuzz.lua --calls $(FUZZ_CALLS) --seed $(FUZZ_SEED) --verbose

bench: deps build
	@test -x bench/run || { echo "make bench: bench/run does not exist yet" >&2; exit 1; }
	$(LUA_ENV) bench/run

PREFIX      ?= /usr/local
install: build
	cmake --install build --prefix '$(PREFIX)'

# The C is formatted by clang-format with the repository's .clang-format (issue 15): `make format` before a commit.
format:
	clang-format -i src/*.c src/*.h src/mpi/*.c tests/*.c tests/layers/*.c examples/embed/*.c bench/*.c

bench-cpu: deps build
	$(LUA_ENV) bench/cpu

clean:
	rm -rf build build-debug build-asan
