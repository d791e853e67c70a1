#!/usr/bin/env bash
# Runs Switchboard's whole test suite. It first makes sure what the tests
# need is on the machine (PostgreSQL server binaries, Chromium for the browser
# tests, tmux for the TUI test, the Telegram Bot API emulator and the MCP
# servers from npm),
# installing what is missing when it can (as root with apt-get), then checks
# formatting (gofmt), `go vet` and staticcheck (installed when missing), and
# runs `go test` over every package with the race detector.
#
# Tests find PostgreSQL through TEST_DATABASE_URL, else a server on
# 127.0.0.1:5432, else they start a throwaway cluster from the binaries.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
have_pg_bins() { ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1; }
have_pg_bins || need_apt+=(postgresql)
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
command -v tmux >/dev/null 2>&1 || need_apt+=(tmux)
command -v npm >/dev/null 2>&1 || need_apt+=(npm)
command -v bwrap >/dev/null 2>&1 || need_apt+=(bubblewrap)

if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "test.sh: installing ${need_apt[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
  else
    echo "test.sh: missing ${need_apt[*]}; install them (sudo apt-get install ${need_apt[*]}) for the full suite" >&2
  fi
fi

if [ -f scripts/testdeps/package.json ] && command -v npm >/dev/null 2>&1; then
  # Installed again when package-lock.json changed since the last install.
  if [ ! -f scripts/testdeps/node_modules/.package-lock.json ] ||
     [ scripts/testdeps/package-lock.json -nt scripts/testdeps/node_modules/.package-lock.json ]; then
    (cd scripts/testdeps && npm ci --no-audit --no-fund --loglevel=error)
  fi
fi

# Static checks first: a finding fails the run before any test starts.
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './scripts/testdeps/*'))
if [ -n "$unformatted" ]; then
  echo "test.sh: gofmt would change these files (run gofmt -w):" >&2
  echo "$unformatted" >&2
  exit 1
fi
go vet ./...
staticcheck=$(go env GOPATH)/bin/staticcheck
if [ -n "$(go env GOBIN)" ]; then staticcheck=$(go env GOBIN)/staticcheck; fi
if ! [ -x "$staticcheck" ]; then
  echo "test.sh: installing staticcheck" >&2
  go install honnef.co/go/tools/cmd/staticcheck@latest
fi
"$staticcheck" ./...

# One package at a time, two tests each, keeps the suite within about 30
# connections of a shared PostgreSQL (measured: 29, app's tests; two
# packages at once peaked at 45 and took 549 s against 828 s:
# TEST_PARALLEL_PACKAGES=2). When the server
# has fewer than 32 connections free, one test at a time (25 measured
# against max_connections=60 with 30 held by others). TEST_PARALLEL_*
# decide when set. A server not reachable here (the tests then start their
# own) is not asked.
db_url=${TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable&connect_timeout=2}
free=""
if command -v psql >/dev/null 2>&1; then
  free=$(psql "$db_url" -Atc "select current_setting('max_connections')::int - (select count(*) from pg_stat_activity)" 2>/dev/null || true)
fi
def_packages=1 def_tests=2
if [ -n "$free" ]; then
  if [ "$free" -lt 32 ]; then def_tests=1; fi
  echo "test.sh: PostgreSQL has $free connections free: $def_packages package at a time, $def_tests test(s) each" >&2
fi

# Packages run -p at a time (default 1), each with at most -parallel tests
# at once (default 2, whatever the machine's cores, or 1 as above):
# each test holds a few PostgreSQL connections (repository/dbtest: a pool
# of 4 per test, schemas reused; an app instance app/apptest.PoolSize, idle
# ones let go after 2 s).
# cmd/switchboard, whose tests run whole service processes, runs its tests
# one at a time (TEST_PARALLEL_PROCESSES=1: as the others). Raise
# TEST_PARALLEL_PACKAGES and TEST_PARALLEL_TESTS on a server of your own.
exec go test -race -count=1 -p "${TEST_PARALLEL_PACKAGES:-$def_packages}" -parallel "${TEST_PARALLEL_TESTS:-$def_tests}" -timeout 30m ./... "$@"
