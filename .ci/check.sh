#!/usr/bin/env bash
# The passes of `make test` (Makefile) and their summary.
#   .ci/check.sh NAME CMD...        runs one pass: its output is shown and kept in build/check-NAME.log, and
#                                   build/check-NAME.status gets its exit status and closing line (busted's
#                                   `busted: N passed, N failed, ...`, or ctest's `...% tests passed, N tests
#                                   failed out of N`); a pass
#                                   that runs longer than CHECK_TIMEOUT seconds (default 1200) is stopped, so that
#                                   a hang costs CI one pass, not its whole time
#   .ci/check.sh --skip NAME WHY    records a pass that could not run
#   .ci/check.sh --summary NAMES... one line per pass, then the first pass's closing line again, last (the
#                                   line CI reads); exits 1 when any pass failed: its command failed, or its
#                                   closing line counts failures. A NAME written ?NAME is listed only when it
#                                   ran (`make check` lists the passes of a `make test` before it)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mkdir -p build

case ${1:-} in
--skip)
  printf '%s\t%s\t%s\n' skip "skipped: $3" 0 > "build/check-$2.status"
  echo "== $2: skipped ($3)"
  exit 0 ;;
--summary)
  shift
  failed=0 first=""
  echo
  echo "== summary of the passes"
  for name in "$@"; do
    optional=0
    [ "${name#\?}" != "$name" ] && optional=1 name=${name#\?}
    f="build/check-$name.status"
    [ "$optional" = 1 ] && [ ! -f "$f" ] && continue
    if [ ! -f "$f" ]; then
      printf '  %-9s did not run\n' "$name:"
      failed=1
      continue
    fi
    IFS=$'\t' read -r status line seconds < "$f"
    [ -z "$first" ] && first=$line
    verdict=ok
    if [ "$status" = skip ]; then verdict=skipped
    elif [ "$status" != 0 ] || ! [[ "$line" =~ ,\ 0\ (tests\ )?failed ]]; then verdict="FAILED (exit $status)"; failed=1; fi
    printf '  %-9s %-8s %s (%ss)\n' "$name:" "$verdict" "$line" "$seconds"
  done
  echo "$first"
  exit $failed ;;
esac

name=$1
shift
start=$(date +%s)
echo "== $name: $*"
timeout --kill-after=30 "${CHECK_TIMEOUT:-1200}" "$@" 2>&1 | tee "build/check-$name.log"
status=${PIPESTATUS[0]}
if [ "$status" = 124 ] || [ "$status" = 137 ]; then
  echo "== $name: stopped after ${CHECK_TIMEOUT:-1200} s" | tee -a "build/check-$name.log"
fi
line=$(grep -a -E '^busted: |% tests passed, [0-9]+ tests failed out of' "build/check-$name.log" | tail -n 1)
[ -n "$line" ] || line="no closing line (the run ended early?)"
printf '%s\t%s\t%d\n' "$status" "$line" "$(( $(date +%s) - start ))" > "build/check-$name.status"
exit 0
