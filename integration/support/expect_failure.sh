#!/bin/sh
# expect_failure.sh PATTERN... -- COMMAND [ARGS...]
# Runs COMMAND; passes only when it fails (non-zero exit status) AND its output (stdout and stderr)
# has a line matching each extended regular expression PATTERN. For checks that must be seen to
# catch what they are for: a check that stays silent on a planted fault fails here.
set -u
patterns=""
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  patterns="$patterns
$1"
  shift
done
if [ $# -lt 2 ] || [ -z "$patterns" ]; then
  echo "usage: expect_failure.sh PATTERN... -- COMMAND [ARGS...]" >&2
  exit 2
fi
shift
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$@" >"$out" 2>&1
status=$?
cat "$out"
if [ "$status" -eq 0 ]; then
  echo "expect_failure: '$*' exited 0; it should have failed" >&2
  exit 1
fi
missing=0
echo "$patterns" | while IFS= read -r p; do
  [ -z "$p" ] && continue
  grep -Eq -- "$p" "$out" || { echo "expect_failure: no line says /$p/" >&2; exit 1; }
done || missing=1
if [ "$missing" -ne 0 ]; then
  echo "expect_failure: '$*' failed (status $status), but not saying what it should" >&2
  exit 1
fi
echo "expect_failure: failed as expected (status $status)"
