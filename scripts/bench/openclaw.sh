#!/usr/bin/env bash
# Side by side with OpenClaw (npm `openclaw`, Node): installs OpenClaw and a
# Node 24 runtime from the npm registry into a scratch folder, configures it
# offline against the same fake model as Switchboard, and runs workloads 3
# (turns through /v1/chat/completions) and 4 (cold start, RSS) on both,
# alternating, printing each figure for both and the ratio. Run on purpose,
# never in CI: it downloads ~300 packages and takes minutes.
#
#   scripts/bench/openclaw.sh
#
# Env: OC_DIR (scratch folder, default /tmp/openclaw-bench), BENCH_PG,
# OC_TURNS (sequential turns, default 200), OC_COLD_N (starts, default 5),
# OC_PACKAGE (the openclaw version, default the one measured in docs/BENCHMARKS.md),
# BENCH_BIN, BENCH_SB_PORT, OC_PORT, OC_FAKE_PORT, BENCH_DB_PREFIX (another run
# on the same machine). Switchboard is built as the Dockerfile builds it and
# measured as a fresh copy (see fresh_bins in run.sh); the load average is
# printed before each start and each turns phase.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
OUT=${BENCH_OUT:-$ROOT/docs/bench}
PG=${BENCH_PG:-postgres://postgres@127.0.0.1:5432}
BIN=${BENCH_BIN:-/tmp/sbbench/bin}
OC_DIR=${OC_DIR:-/tmp/openclaw-bench}
OC_PORT=${OC_PORT:-19789}
SB_PORT=${BENCH_SB_PORT:-19082}
FAKE_PORT=${OC_FAKE_PORT:-19901}
TOKEN=bench-token-0123456789
TURNS=${OC_TURNS:-200}
COLD_N=${OC_COLD_N:-5}
OC_PACKAGE=${OC_PACKAGE:-2026.9.6}
mkdir -p "$OUT" "$BIN" "$OC_DIR"
RES="$OUT/openclaw.txt"

go build -o "$BIN/" ./scripts/bench/fakellm ./scripts/bench/apiturns ./scripts/bench/coldstart
CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$BIN/switchboard" ./cmd/switchboard
SB_BIN=$OC_DIR/switchboard.fresh
rm -f "$SB_BIN"
cp "$BIN/switchboard" "$SB_BIN"
loadavg() { echo "${1:-}loadavg $(cut -d' ' -f1-3 /proc/loadavg)"; }

# Install: Node 24 (npm package node@24 ships the binary), then OpenClaw
# with that Node first on PATH (its install script refuses an older Node).
if [ ! -x "$OC_DIR/node_modules/.bin/openclaw" ]; then
	(cd "$OC_DIR" && { [ -f package.json ] || npm init -y >/dev/null; } &&
		npm install --no-audit --no-fund node@24 &&
		PATH="$OC_DIR/node_modules/.bin:$PATH" npm install --no-audit --no-fund "openclaw@$OC_PACKAGE")
fi
NODE="$OC_DIR/node_modules/.bin/node"
OC_MAIN="$OC_DIR/node_modules/openclaw/openclaw.mjs"
"$NODE" --version
OC_VERSION=$(sed -n 's/.*"version": *"\([^"]*\)".*/\1/p' "$OC_DIR/node_modules/openclaw/package.json" | head -1)

# Offline configuration: one custom OpenAI-compatible provider (the fake
# model), the chat completions endpoint on, token auth, state in OC_DIR.
# A fresh state each run: sessions left from an earlier run would lengthen
# the prompts (the turns reuse the same users).
rm -rf "$OC_DIR/state"
mkdir -p "$OC_DIR/state" "$OC_DIR/home"
cat >"$OC_DIR/openclaw.json" <<EOF
{
  "gateway": {
    "mode": "local",
    "port": $OC_PORT,
    "bind": "loopback",
    "auth": { "mode": "token", "token": "$TOKEN" },
    "http": { "endpoints": { "chatCompletions": { "enabled": true } } }
  },
  "models": {
    "mode": "merge",
    "providers": {
      "fake": {
        "baseUrl": "http://127.0.0.1:$FAKE_PORT/v1",
        "apiKey": "bench",
        "api": "openai-completions",
        "models": [{ "id": "fake-model", "name": "Fake model", "reasoning": false, "input": ["text"],
          "cost": { "input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0 },
          "contextWindow": 128000, "maxTokens": 4096 }]
      }
    }
  },
  "agents": { "defaults": { "model": { "primary": "fake/fake-model" } } }
}
EOF
oc_env=(HOME="$OC_DIR/home" OPENCLAW_CONFIG_PATH="$OC_DIR/openclaw.json" OPENCLAW_STATE_DIR="$OC_DIR/state"
	OPENCLAW_GATEWAY_TOKEN="$TOKEN" NODE_ENV=production)

PIDS=()
cleanup() { for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
stop() { kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }

"$BIN/fakellm" -addr "127.0.0.1:$FAKE_PORT" -log "$OUT/openclaw_fake.tmp" >"$OC_DIR/fake.out" 2>&1 &
PIDS+=($!)
sleep 0.5

wait_health() { # URL, seconds
	for _ in $(seq $(($2 * 20))); do
		curl -sf "$1" >/dev/null 2>&1 && return 0
		sleep 0.05
	done
	return 1
}

start_oc() {
	env "${oc_env[@]}" "$NODE" "$OC_MAIN" gateway run --port "$OC_PORT" >"$OC_DIR/gateway.out" 2>&1 &
	OC_PID=$!
	PIDS+=("$OC_PID")
	if ! wait_health "http://127.0.0.1:$OC_PORT/healthz" 180; then
		echo "OpenClaw gateway did not become healthy; last log lines:" >&2
		tail -20 "$OC_DIR/gateway.out" >&2
		return 1
	fi
}

DBNAME=${BENCH_DB_PREFIX:-sbbench}_oc
SB_DB="$PG/$DBNAME?sslmode=disable"
psql "$PG/postgres" -qX -c "DROP DATABASE IF EXISTS $DBNAME" -c "CREATE DATABASE $DBNAME" >/dev/null 2>&1
sb_env=(DATABASE_URL="$SB_DB" DATA_DIR="$OC_DIR/sb-data" HTTP_ADDR="127.0.0.1:$SB_PORT" WEB_AUTH_TOKEN=$TOKEN
	RATE_LIMIT_PER_MINUTE=0 LOG_LEVEL=warn LLM_PROVIDER=openai LLM_BASE_URL="http://127.0.0.1:$FAKE_PORT/v1" LLM_MODEL=gpt-4o-mini)
start_sb() {
	env "${sb_env[@]}" "$SB_BIN" serve >"$OC_DIR/switchboard.out" 2>&1 &
	SB_PID=$!
	PIDS+=("$SB_PID")
	wait_health "http://127.0.0.1:$SB_PORT/healthz" 60
}

{
	echo "openclaw_version $OC_VERSION"
	echo "node_version $("$NODE" --version)"
	echo "date $(date -u +%FT%TZ)"
	echo "switchboard_commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
	loadavg
} | tee "$RES"

# Workload 4, alternating: cold start to /healthz and idle RSS.
start_sb && stop "$SB_PID" # migrate once
: >"$OUT/openclaw_cold_raw.txt"
for i in $(seq "$COLD_N"); do
	loadavg "sb_run_$i " | tee -a "$OUT/openclaw_cold_raw.txt"
	env "${sb_env[@]}" "$BIN/coldstart" -n 1 -settle 5s -label "sb_" -health "http://127.0.0.1:$SB_PORT/healthz" -- "$SB_BIN" serve |
		tee -a "$OUT/openclaw_cold_raw.txt"
	loadavg "oc_run_$i " | tee -a "$OUT/openclaw_cold_raw.txt"
	env "${oc_env[@]}" "$BIN/coldstart" -n 1 -settle 5s -limit 180s -label "oc_" -health "http://127.0.0.1:$OC_PORT/healthz" -- \
		"$NODE" "$OC_MAIN" gateway run --port "$OC_PORT" | tee -a "$OUT/openclaw_cold_raw.txt"
done

# Workload 3, alternating: sequential turns, then 8 sessions × 25 turns.
: >"$OUT/openclaw_fake.tmp"
start_oc
loadavg oc_turns_ | tee "$OUT/openclaw_turns_raw.txt"
"$BIN/apiturns" -url "http://127.0.0.1:$OC_PORT" -token $TOKEN -model openclaw -n "$TURNS" -sessions 8 -per 25 \
	-user oc-bench -pid "$OC_PID" -label "oc_" | tee -a "$OUT/openclaw_turns_raw.txt"
cp "$OUT/openclaw_fake.tmp" "$OUT/openclaw_fake.txt"
stop "$OC_PID"
start_sb
loadavg sb_turns_ | tee -a "$OUT/openclaw_turns_raw.txt"
"$BIN/apiturns" -url "http://127.0.0.1:$SB_PORT" -token $TOKEN -n "$TURNS" -sessions 8 -per 25 \
	-user oc-bench -pid "$SB_PID" -label "sb_" | tee -a "$OUT/openclaw_turns_raw.txt"
stop "$SB_PID"
loadavg end_ | tee -a "$OUT/openclaw_turns_raw.txt"
rm -f "$OUT/openclaw_fake.tmp"

# Table: each figure for both and the ratio (OpenClaw / Switchboard).
med() { grep "^$1 " "$OUT/openclaw_cold_raw.txt" "$OUT/openclaw_turns_raw.txt" -h | awk '{print $2}' | sort -n | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]}'; }
cold_field() { grep -h "^$1run_0_start_ms" "$OUT/openclaw_cold_raw.txt" | awk -v f="$2" '{print (f=="start") ? $2 : $4}' | sort -n | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]}'; }
{
	printf '%-28s %12s %12s %8s\n' figure switchboard openclaw ratio
	# ratio: how many times better Switchboard is (OpenClaw/Switchboard, or
	# Switchboard/OpenClaw for throughput).
	row() { printf '%-28s %12s %12s %8s\n' "$1" "$2" "$3" "$(awk -v a="$2" -v b="$3" -v inv="${4:-}" 'BEGIN {
		if (a > 0 && b > 0) printf "%.1f", (inv ? a / b : b / a); else print "-" }')"; }
	row "cold start median ms" "$(cold_field sb_ start)" "$(cold_field oc_ start)"
	row "RSS idle MiB" "$(cold_field sb_ rss)" "$(cold_field oc_ rss)"
	for f in seq_p50_ms seq_p95_ms seq_p99_ms seq_cpu_ms_per_turn conc_p50_ms conc_p99_ms conc_cpu_ms_per_turn rss_after_mib; do
		row "$f" "$(med "sb_$f")" "$(med "oc_$f")"
	done
	row conc_turns_per_s "$(med sb_conc_turns_per_s)" "$(med oc_conc_turns_per_s)" inv
	echo "(ratio: times better for Switchboard: OpenClaw/Switchboard, throughput Switchboard/OpenClaw)"
	awk '$6 == "false" {n++; b+=$2; if (n == 1) first=$2} END {if (n) printf "openclaw_prompt_bytes_turn1 %d\nopenclaw_prompt_bytes_mean %.0f\n", first, b/n}' "$OUT/openclaw_fake.txt" 2>/dev/null || true
} | tee -a "$RES"
