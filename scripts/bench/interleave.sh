#!/usr/bin/env bash
# Before/after of two commits, interleaved on one machine: both are built
# as the Dockerfile does, then three `run.sh turns` of each alternate
# (before, after, before, …) with the commit floor (pgbench, one client,
# one insert) after each pair, then BENCH_COLD_N (7) alternating cold
# starts of each, then `turncost -turns 200 -writes` of each. Run it on a
# quiet machine; the load average is recorded at each start.
#
#   scripts/bench/interleave.sh BEFORE_REV AFTER_REV [PREFIX]
#
# Outputs go to $BENCH_OUT (docs/bench) as PREFIX_turns_{before,after}_N.txt,
# PREFIX_floor.txt, PREFIX_coldstart.txt, PREFIX_turncost_{before,after}.txt
# and PREFIX_machine.txt (PREFIX defaults to interleave). Needs what run.sh
# needs, plus pgbench; uses git worktrees under /tmp/sbbench/interleave.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
B=$1; A=$2; P=${3:-interleave}
OUT=${BENCH_OUT:-$ROOT/docs/bench}
PG=${BENCH_PG:-postgres://postgres@127.0.0.1:5432}
W=/tmp/sbbench/interleave
mkdir -p "$W" "$OUT"
for r in "$B" "$A"; do
	rm -rf "$W/src-$r"
	git worktree prune
	git worktree add --detach "$W/src-$r" "$r" >/dev/null
	(cd "$W/src-$r" && CGO_ENABLED=0 go build -trimpath -o "$W/sb-$r" ./cmd/switchboard) || exit 1
done
floor() {
	echo "floor $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)"
	psql -qX "$PG/postgres" -c 'DROP TABLE IF EXISTS sbbench_floor' -c 'CREATE TABLE sbbench_floor (id bigserial PRIMARY KEY, v text)' >/dev/null 2>&1
	echo "INSERT INTO sbbench_floor (v) VALUES ('x');" >"$W/insert.sql"
	pgbench -n -c1 -T10 -f "$W/insert.sql" "$PG/postgres" 2>/dev/null | grep -E 'latency average|tps'
	psql -qX "$PG/postgres" -c 'DROP TABLE sbbench_floor' >/dev/null 2>&1
}
: >"$OUT/${P}_floor.txt"
{ echo "date $(date -u +%FT%TZ)"; echo "nproc $(nproc)"; echo "loadavg_at_start $(cat /proc/loadavg)"; go version; echo "before $B after $A"; } >"$OUT/${P}_machine.txt"
for i in 1 2 3; do
	for r in "$B" "$A"; do
		n=before; [ "$r" = "$A" ] && n=after
		echo "load $(cat /proc/loadavg)" >"$OUT/${P}_turns_${n}_$i.txt"
		BENCH_OUT=$W/out-$n-$i BENCH_SB_BIN=$W/sb-$r scripts/bench/run.sh turns >>"$OUT/${P}_turns_${n}_$i.txt" 2>"$W/turns-$n-$i.err"
	done
	floor >>"$OUT/${P}_floor.txt"
done
BENCH_OUT=$W/cold BENCH_SB_BIN=$W/sb-$A BENCH_ALT_BIN=$W/sb-$B BENCH_COLD_N=${BENCH_COLD_N:-7} scripts/bench/run.sh coldstart >"$OUT/${P}_coldstart.txt" 2>"$W/cold.err"
for r in "$B" "$A"; do
	n=before; [ "$r" = "$A" ] && n=after
	(echo "load $(cat /proc/loadavg)"; cd "$W/src-$r" && go run ./scripts/turncost -turns 200 -writes) >"$OUT/${P}_turncost_$n.txt" 2>&1
done
for r in "$B" "$A"; do git worktree remove --force "$W/src-$r"; done
echo "done: $OUT/${P}_*.txt"
