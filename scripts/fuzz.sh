#!/usr/bin/env bash
# Runs every fuzz test of the module, one after another, each for FUZZTIME
# (default 30s). The fuzzers are found with `go test -list '^Fuzz'`, so a
# new one is picked up without editing this script. Their checked-in seed
# corpora (testdata/fuzz/<FuzzName>/) also run in the normal test suite.
#
#   ./scripts/fuzz.sh                      every fuzzer, 30s each
#   FUZZTIME=5m ./scripts/fuzz.sh ./web    the web package's, 5 minutes each
#   FUZZ_SAVE=8 ./scripts/fuzz.sh          also copy up to 8 new corpus
#                                          entries per fuzzer into testdata
#
# Tests needing PostgreSQL find it as in scripts/test.sh. The first run of a
# package compiles it with coverage instrumentation, which takes minutes.
# A failure leaves the crashing input in testdata/fuzz/<FuzzName>/ and
# stops the script with its status.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME="${FUZZTIME:-30s}"
FUZZ_SAVE="${FUZZ_SAVE:-0}"
pkgs=("$@")
[ ${#pkgs[@]} -gt 0 ] || pkgs=(./...)
cache="$(go env GOCACHE)/fuzz"
failed=0
total=0
for pkg in $(go list "${pkgs[@]}"); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  names=$(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true)
  for name in $names; do
    total=$((total + 1))
    echo "== $pkg $name ($FUZZTIME)"
    before=$(ls "$cache/$pkg/$name" 2>/dev/null | sort || true)
    if ! go test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" "$pkg"; then
      echo "FAIL: $pkg $name (the input is in $dir/testdata/fuzz/$name/)" >&2
      failed=$((failed + 1))
      continue
    fi
    if [ "$FUZZ_SAVE" -gt 0 ] && [ -d "$cache/$pkg/$name" ]; then
      mkdir -p "$dir/testdata/fuzz/$name"
      comm -13 <(echo "$before") <(ls "$cache/$pkg/$name" | sort) | head -n "$FUZZ_SAVE" |
        while read -r f; do [ -n "$f" ] && cp "$cache/$pkg/$name/$f" "$dir/testdata/fuzz/$name/"; done
    fi
  done
done
echo "fuzz.sh: $total fuzzers, $failed failed"
[ "$failed" -eq 0 ]
