#!/usr/bin/env bash
# Side by side with another self-hosted gateway (a "peer"): idle RSS and
# start to its health URL in alternating starts with Switchboard, and, when
# the peer has a websocket chat channel that scripts/bench/peerturns speaks,
# turns against the same fake model (0 ms). Run on purpose, never in CI.
# The peer is brought and built by whoever runs this: the script takes its
# built binary and a configuration template, and builds only Switchboard
# (as the Dockerfile does: CGO_ENABLED=0 -trimpath -ldflags='-s -w').
#
#   scripts/bench/peer.sh PEER_BINARY CONFIG_TEMPLATE
#
# CONFIG_TEMPLATE is copied into the scratch folder with these replaced:
# @FAKE_BASE@ (the fake model's OpenAI base URL, on 127.0.0.1), @PORT@ (the
# peer's port), @TOKEN@ (the bench token), @HOME@ (the peer's scratch home,
# wiped before the run). Point every other address in it at loopback and
# turn off whatever would reach the network.
#
# Env: PEER_NAME (label in the output, default peer), PEER_ARGS (arguments,
# default "gateway"), PEER_ENV (VAR=value pairs for the peer, the same
# placeholders plus @CONFIG@, the written configuration), PEER_HEALTH_PATH
# (default /health), PEER_WS_PATH (the chat websocket path; empty: no turns),
# PEER_SRC (the peer's source folder: its git commit is recorded when it has
# one), PEER_VERSION_ARGS (arguments that make the peer print its version,
# recorded), PEER_COLD_N (starts of each, default 7), PEER_TURNS (sequential turns,
# default 200), PEER_TURN_ROUNDS (turn phases of each, order flipped each
# round, default 2), PEER_SETTLE (idle time before the RSS reading, 5s),
# PEER_PORT (19791), PEER_FAKE_PORT (19912), BENCH_SB_PORT (19182),
# BENCH_PG, BENCH_DB_PREFIX, BENCH_BIN, BENCH_OUT (default docs/bench; the
# files are peer_<name>_*.txt), PEER_WORK (scratch, /tmp/sbbench/peer).
set -euo pipefail
[ $# -eq 2 ] || { sed -n '2,29p' "$0" >&2; exit 2; }
PEER_BIN_SRC=$(realpath "$1")
PEER_TMPL=$(realpath "$2")
cd "$(dirname "$0")/../.."
ROOT=$PWD
OUT=${BENCH_OUT:-$ROOT/docs/bench}
PG=${BENCH_PG:-postgres://postgres@127.0.0.1:5432}
BIN=${BENCH_BIN:-/tmp/sbbench/bin}
WORK=${PEER_WORK:-/tmp/sbbench/peer}
NAME=${PEER_NAME:-peer}
ARGS=${PEER_ARGS:-gateway}
HEALTH_PATH=${PEER_HEALTH_PATH:-/health}
WS_PATH=${PEER_WS_PATH:-}
COLD_N=${PEER_COLD_N:-7}
TURNS=${PEER_TURNS:-200}
ROUNDS=${PEER_TURN_ROUNDS:-2}
SETTLE=${PEER_SETTLE:-5s}
P_PORT=${PEER_PORT:-19791}
FAKE_PORT=${PEER_FAKE_PORT:-19912}
SB_PORT=${BENCH_SB_PORT:-19182}
TOKEN=bench-token-0123456789
mkdir -p "$OUT" "$BIN" "$WORK"
RAW_COLD=$OUT/peer_${NAME}_cold_raw.txt
RAW_TURNS=$OUT/peer_${NAME}_turns_raw.txt
RES=$OUT/peer_${NAME}.txt

go build -o "$BIN/" ./scripts/bench/fakellm ./scripts/bench/apiturns ./scripts/bench/coldstart ./scripts/bench/peerturns
CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$BIN/switchboard" ./cmd/switchboard

# Fresh copies of both binaries, read by nothing else (see fresh_bins in
# run.sh: a binary's page-cache state moves its RSS).
SB_BIN=$WORK/switchboard.fresh
P_BIN=$WORK/$NAME.fresh
rm -f "$SB_BIN" "$P_BIN"
cp "$BIN/switchboard" "$SB_BIN"
cp "$PEER_BIN_SRC" "$P_BIN"

# The peer's home and configuration.
P_HOME=$WORK/home
rm -rf "$P_HOME"
mkdir -p "$P_HOME"
P_CONF=$P_HOME/$(basename "$PEER_TMPL")
subst() {
	sed -e "s|@FAKE_BASE@|http://127.0.0.1:$FAKE_PORT/v1|g" -e "s|@PORT@|$P_PORT|g" -e "s|@TOKEN@|$TOKEN|g" \
		-e "s|@HOME@|$P_HOME|g" -e "s|@CONFIG@|$P_CONF|g"
}
subst <"$PEER_TMPL" >"$P_CONF"
read -r -a p_env <<<"$(echo "${PEER_ENV:-}" | subst)"
read -r -a p_args <<<"$ARGS"

PIDS=()
cleanup() { for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
stop() { kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }
loadavg() { echo "${1:-}loadavg $(cut -d' ' -f1-3 /proc/loadavg)"; }
wait_health() { # URL, seconds
	for _ in $(seq $(($2 * 20))); do
		curl -sf "$1" >/dev/null 2>&1 && return 0
		sleep 0.05
	done
	return 1
}

"$BIN/fakellm" -addr "127.0.0.1:$FAKE_PORT" >"$WORK/fake.out" 2>&1 &
PIDS+=($!)
for _ in $(seq 200); do grep -q "fake model on" "$WORK/fake.out" 2>/dev/null && break; sleep 0.05; done

DBNAME=${BENCH_DB_PREFIX:-sbbench}_peer
psql "$PG/postgres" -qX -c "DROP DATABASE IF EXISTS $DBNAME" -c "CREATE DATABASE $DBNAME" >/dev/null 2>&1
sb_env=(DATABASE_URL="$PG/$DBNAME?sslmode=disable" DATA_DIR="$WORK/sb-data" HTTP_ADDR="127.0.0.1:$SB_PORT"
	WEB_AUTH_TOKEN=$TOKEN RATE_LIMIT_PER_MINUTE=0 LOG_LEVEL=warn LLM_PROVIDER=openai
	LLM_BASE_URL="http://127.0.0.1:$FAKE_PORT/v1" LLM_MODEL=gpt-4o-mini)
SB_HEALTH=http://127.0.0.1:$SB_PORT/healthz
P_HEALTH=http://127.0.0.1:$P_PORT$HEALTH_PATH

start_sb() {
	env "${sb_env[@]}" "$SB_BIN" serve >>"$WORK/switchboard.out" 2>&1 &
	SB_PID=$!
	PIDS+=("$SB_PID")
	wait_health "$SB_HEALTH" 60 || { echo "switchboard did not start: $(tail -5 "$WORK/switchboard.out")" >&2; return 1; }
}
start_peer() {
	(cd "$P_HOME" && exec env "${p_env[@]}" "$P_BIN" "${p_args[@]}") >>"$WORK/$NAME.out" 2>&1 &
	P_PID=$!
	PIDS+=("$P_PID")
	wait_health "$P_HEALTH" 60 || { echo "$NAME did not start: $(tail -5 "$WORK/$NAME.out")" >&2; return 1; }
}

{
	echo "date $(date -u +%FT%TZ)"
	echo "nproc $(nproc)"
	echo "switchboard_commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
	echo "switchboard_binary_bytes $(stat -c %s "$SB_BIN")"
	echo "${NAME}_binary_bytes $(stat -c %s "$P_BIN")"
	if [ -n "${PEER_SRC:-}" ] && git -C "$PEER_SRC" rev-parse HEAD >/dev/null 2>&1; then
		echo "${NAME}_commit $(git -C "$PEER_SRC" rev-parse HEAD)"
	fi
	go version -m "$P_BIN" 2>/dev/null | sed -n 's/^\t\(build\)\t/'"$NAME"'_build_\1 /p' | head -12 | tr '\t' ' '
	if [ -n "${PEER_VERSION_ARGS:-}" ]; then
		read -r -a v_args <<<"$PEER_VERSION_ARGS"
		echo "${NAME}_version $( (cd "$P_HOME" && env "${p_env[@]}" "$P_BIN" "${v_args[@]}" 2>&1) | sed 's/\x1b\[[0-9;]*m//g' | grep -m1 -E '[0-9]+\.[0-9]+' || true)"
	fi
	echo "${NAME}_args $ARGS"
	loadavg
} | tee "$RES"

# Warm-up start of each (migrations, onboarding files), then the
# alternating starts.
start_sb && stop "$SB_PID"
start_peer && stop "$P_PID"
: >"$RAW_COLD"
for i in $(seq "$COLD_N"); do
	loadavg "sb_run_$i " | tee -a "$RAW_COLD"
	env "${sb_env[@]}" "$BIN/coldstart" -n 1 -settle "$SETTLE" -label "sb_" -health "$SB_HEALTH" -- "$SB_BIN" serve |
		tee -a "$RAW_COLD"
	loadavg "${NAME}_run_$i " | tee -a "$RAW_COLD"
	(cd "$P_HOME" && env "${p_env[@]}" "$BIN/coldstart" -n 1 -settle "$SETTLE" -label "${NAME}_" -health "$P_HEALTH" -- \
		"$P_BIN" "${p_args[@]}") | tee -a "$RAW_COLD"
done

turns_peer() {
	start_peer
	loadavg "${NAME}_turns_" | tee -a "$RAW_TURNS"
	"$BIN/peerturns" -url "ws://127.0.0.1:$P_PORT$WS_PATH" -token $TOKEN -n "$TURNS" -sessions 8 -per 25 \
		-pid "$P_PID" -label "${NAME}_" | tee -a "$RAW_TURNS"
	stop "$P_PID"
}
turns_sb() {
	start_sb
	loadavg sb_turns_ | tee -a "$RAW_TURNS"
	"$BIN/apiturns" -url "http://127.0.0.1:$SB_PORT" -token $TOKEN -n "$TURNS" -sessions 8 -per 25 \
		-user "peer-bench-$1" -pid "$SB_PID" -label "sb_" | tee -a "$RAW_TURNS"
	stop "$SB_PID"
}
: >"$RAW_TURNS"
if [ -n "$WS_PATH" ]; then
	for r in $(seq "$ROUNDS"); do
		if [ $((r % 2)) -eq 1 ]; then turns_peer && turns_sb "$r"; else turns_sb "$r" && turns_peer; fi
	done
	loadavg end_ | tee -a "$RAW_TURNS"
fi

# Table: medians, and the ratio peer / Switchboard (throughput:
# Switchboard / peer), so above 1 is better for Switchboard.
med() { awk -v k="$1" '$1 == k {print $2}' "$RAW_COLD" "$RAW_TURNS" | sort -n | awk '{a[NR]=$1} END {if (NR % 2) print a[(NR+1)/2]; else if (NR) print (a[NR/2] + a[NR/2+1]) / 2}'; }
cold_field() { grep -h "^$1run_0_start_ms" "$RAW_COLD" | awk -v f="$2" '{print (f=="start") ? $2 : (f=="rss") ? $4 : (f=="anon") ? $6 : $8}' |
	sort -n | awk '{a[NR]=$1} END {if (NR % 2) print a[(NR+1)/2]; else if (NR) print (a[NR/2] + a[NR/2+1]) / 2}'; }
{
	printf '%-28s %12s %12s %8s\n' figure switchboard "$NAME" ratio
	row() { printf '%-28s %12s %12s %8s\n' "$1" "$2" "$3" "$(awk -v a="$2" -v b="$3" -v inv="${4:-}" 'BEGIN {
		if (a > 0 && b > 0) printf "%.2f", (inv ? a / b : b / a); else print "-" }')"; }
	row "start median ms" "$(cold_field sb_ start)" "$(cold_field "${NAME}_" start)"
	row "RSS idle median MiB" "$(cold_field sb_ rss)" "$(cold_field "${NAME}_" rss)"
	row "  anon MiB" "$(cold_field sb_ anon)" "$(cold_field "${NAME}_" anon)"
	row "  file MiB" "$(cold_field sb_ file)" "$(cold_field "${NAME}_" file)"
	if [ -n "$WS_PATH" ]; then
		for f in seq_p50_ms seq_p95_ms seq_p99_ms seq_cpu_ms_per_turn conc_p50_ms conc_p99_ms conc_cpu_ms_per_turn rss_after_mib; do
			row "$f" "$(med "sb_$f")" "$(med "${NAME}_$f")"
		done
		row conc_turns_per_s "$(med sb_conc_turns_per_s)" "$(med "${NAME}_conc_turns_per_s")" inv
	fi
	echo "(medians over the runs; ratio: $NAME/Switchboard, throughput Switchboard/$NAME)"
} | tee -a "$RES"
