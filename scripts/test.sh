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

# Two packages at a time, two tests each, the slowest packages first (so
# they overlap one another instead of one running alone at the end), and
# the tests that use PostgreSQL share a budget of connections
# (repository/dbtest): a test's first use of the database waits until its
# package's share per test (5; 9 for a test starting whole instances,
# app/apptest; 12 for one running service processes, internal/servetest;
# the shares are the most a test was measured to hold; a test holding
# more by design, or one of such a package starting no instance or
# process, reserves its own, dbtest.Reserve) fits beside what the
# running tests of every test binary hold and what the tests that began
# to wait before it need (first come, first served), and gives it back
# when it ends: a budget of 28, or what is free less 4 when fewer
# than 32 are free (a test whose share is larger than the budget then runs
# alone). The shares are checked while the tests run: each connection
# names its test binary, process and test (application_name), each binary
# counts its tests' connections every 250 ms and raises the holding of a
# test found holding more than its share, and the run ends with each
# package's largest per-test peak and, polled here every 0.5 s, the most
# connections the suite's tests held at once. TEST_DB_BUDGET,
# TEST_DB_BUDGET_DIR (below) and TEST_PARALLEL_* decide when set. A server
# not reachable here (the tests then start their own) is not asked.
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
# The budget's directory: its own, unless TEST_DB_BUDGET_DIR names one
# shared with other suites on the machine (kept; its peaks file then
# holds theirs too).
budget_dir=${TEST_DB_BUDGET_DIR:-}
own_dir=""
if [ -z "$budget_dir" ]; then budget_dir=$(mktemp -d); own_dir=$budget_dir; fi
poller=""
cleanup() {
  if [ -n "$poller" ]; then kill "$poller" 2>/dev/null || true; fi
  if [ -n "$own_dir" ]; then rm -rf "$own_dir"; fi
}
trap cleanup EXIT
export TEST_DB_BUDGET=${TEST_DB_BUDGET:-$budget} TEST_DB_BUDGET_DIR=$budget_dir

# The suite's connections at once: every test connection's application_name
# is "pkg.test pid TestName" (on a server other suites share, theirs count
# too).
if [ -n "$free" ]; then
  (
    peak=0
    while sleep 0.5; do
      n=$(psql "$db_url" -Atc "select count(*) from pg_stat_activity where application_name like '%.test %'" 2>/dev/null || echo 0)
      n=${n:-0}
      if [ "$n" -gt "$peak" ]; then peak=$n; echo "$peak" > "$budget_dir/suite-peak.$$"; fi
    done
  ) &
  poller=$!
fi

# The slowest packages first (measured, one at a time: web, app, e2e,
# services/agent, cmd/switchboard), then the rest in go list's order.
mod=$(go list -m)
slow=("$mod/web" "$mod/app" "$mod/e2e" "$mod/services/agent" "$mod/cmd/switchboard")
pkgs=("${slow[@]}")
for p in $(go list ./...); do
  case " ${slow[*]} " in *" $p "*) ;; *) pkgs+=("$p") ;; esac
done

# cmd/switchboard's and e2e's tests, which run whole service processes, run
# one at a time (TEST_PARALLEL_PROCESSES=1: as the others).
status=0
go test -race -count=1 -p "${TEST_PARALLEL_PACKAGES:-2}" -parallel "${TEST_PARALLEL_TESTS:-2}" -timeout 30m "${pkgs[@]}" "$@" || status=$?

if [ -f "$budget_dir/peaks" ]; then
  echo "test.sh: PostgreSQL connections per test, the most of each package (peak/share; over its share: raised while it ran):" >&2
  sort -k1,1 -k3,3nr "$budget_dir/peaks" | awk '!seen[$1]++ { printf "  %s %s %d/%d%s\n", $1, $2, $3, $4, ($3 > $4 ? "  OVER" : "") }' >&2
fi
if [ -f "$budget_dir/suite-peak.$$" ]; then
  echo "test.sh: the suite's tests held at most $(cat "$budget_dir/suite-peak.$$") PostgreSQL connections at once" >&2
  rm -f "$budget_dir/suite-peak.$$"
fi
exit "$status"
