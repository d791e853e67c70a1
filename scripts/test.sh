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

# One package at a time, two tests each, and the tests that use
# PostgreSQL share a budget of connections (repository/dbtest): a test's
# first use of the database waits until its package's share per test (5,
# 14 for a test starting whole instances, 20 for one running service
# processes) fits beside what the running tests hold, and gives it back
# when it ends: a budget of 28, or what is free less 4 when fewer than 32
# are free (a test whose share is larger than the budget then runs alone).
# The budget counts across test binaries, but the shares are estimates:
# with two packages at a time (TEST_PARALLEL_PACKAGES=2) a fresh-clone run
# peaked at 47 connections (1,2xx s), so one at a time is the default on a
# shared server (measured peak 25-28). TEST_DB_BUDGET and TEST_PARALLEL_*
# decide when set. A server not reachable here (the tests then start
# their own) is not asked.
db_url=${TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable&connect_timeout=2}
free=""
if command -v psql >/dev/null 2>&1; then
  free=$(psql "$db_url" -Atc "select current_setting('max_connections')::int - (select count(*) from pg_stat_activity)" 2>/dev/null || true)
fi
budget=28
if [ -n "$free" ]; then
  if [ "$free" -lt 32 ]; then budget=$((free > 5 ? free - 4 : 1)); fi
  echo "test.sh: PostgreSQL has $free connections free: tests hold at most ${TEST_DB_BUDGET:-$budget} at once" >&2
fi
budget_dir=$(mktemp -d)
trap 'rm -rf "$budget_dir"' EXIT
export TEST_DB_BUDGET=${TEST_DB_BUDGET:-$budget} TEST_DB_BUDGET_DIR=$budget_dir

# cmd/switchboard's and e2e's tests, which run whole service processes, run
# one at a time (TEST_PARALLEL_PROCESSES=1: as the others).
go test -race -count=1 -p "${TEST_PARALLEL_PACKAGES:-1}" -parallel "${TEST_PARALLEL_TESTS:-2}" -timeout 30m ./... "$@"
