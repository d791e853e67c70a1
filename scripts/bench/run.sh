#!/usr/bin/env bash
# Switchboard's benchmark suite: run on purpose (never in CI). Each workload
# prints its figures and keeps its raw output in $BENCH_OUT (docs/bench).
#
#   scripts/bench/run.sh                 # every workload below, in order
#   scripts/bench/run.sh turns coldstart # some of them
#
# Workloads: build delivery turns coldstart flags flagsab wsdelta tokens cache subagents plots
# rssturns (not in the default list: RSS after every 1,000 sequential turns)
# (every figure of docs/BENCHMARKS.md's round-2 table; OpenClaw side by side:
# scripts/bench/openclaw.sh).
#
#   scripts/bench/run.sh wsdelta   # model's first token → first delta on a websocket
#                                  # client (wsdelta.txt); BENCH_SB_BIN=… for another build
#   scripts/bench/run.sh flagsab   # flags 1/0 and 1/1 vs 0/0, three servers, turns
#                                  # interleaved round by round (flags_ab.txt)
#   BENCH_ALT_BIN=/path/switchboard.old scripts/bench/run.sh coldstart
#                                  # starts alternate between the build and
#                                  # this one, BENCH_COLD_N of each (a_…, b_…)
#   BENCH_RSS_TURNS=3000 scripts/bench/run.sh rssturns
#                                  # RSS after every 1,000 sequential turns
#                                  # (rss_turns.txt); BENCH_SB_BIN=… for another build
#
# Needs: Go, psql, a PostgreSQL superuser URL in BENCH_PG (default
# postgres://postgres@127.0.0.1:5432, the local server); ports 19082 (the
# server; flagsab also 19083 and 19084) and 19900 (the fake model) free.
# Traffic goes to 127.0.0.1 only. Databases named sbbench_* (BENCH_DB_PREFIX_*)
# are dropped and created.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
OUT=${BENCH_OUT:-$ROOT/docs/bench}
PG=${BENCH_PG:-postgres://postgres@127.0.0.1:5432}
BIN=${BENCH_BIN:-/tmp/sbbench/bin}
WORK=${BENCH_WORK:-/tmp/sbbench/work}
SB_PORT=${BENCH_SB_PORT:-19082}
FAKE_PORT=${BENCH_FAKE_PORT:-19900}
TOKEN=bench-token-0123456789
TURNS=${BENCH_TURNS:-200}
DBP=${BENCH_DB_PREFIX:-sbbench}
mkdir -p "$OUT" "$BIN" "$WORK"

log() { printf '\n=== %s\n' "$*" >&2; }

# The server is built as the Dockerfile builds it (CGO_ENABLED=0,
# -trimpath: a static binary without libc; with the Dockerfile's flags it
# measured 1.5 MiB less idle RSS than a default cgo build here), keeping
# the symbol table that rsspages reads (-s -w drop only sections that are
# never loaded).
build_bins() {
	log "building binaries into $BIN"
	CGO_ENABLED=0 go build -trimpath -o "$BIN/" ./cmd/switchboard ./scripts/bench/fakellm ./scripts/bench/apiturns \
		./scripts/bench/coldstart ./scripts/bench/plot ./scripts/bench/wsdelta
}

# fresh_bins copies the server binaries under test (BENCH_SB_BIN or the
# build, BENCH_ALT_BIN) to new files in WORK, SB_BIN and ALT_BIN: the same
# bytes, read by nothing yet. How a binary's file pages sit in the page
# cache changes its RSS: after a whole-file read (go tool nm, rsspages,
# readelf, a copy from it) the kernel can keep it in large folios and map
# 2 MiB of them at a touch, and the same binary measured ~8 MiB more idle
# RSS (45.1 against 37.2 MiB, alternating starts, 2026-11-26).
fresh_bins() {
	SB_BIN=$WORK/switchboard.fresh
	rm -f "$SB_BIN" "$WORK/switchboard_alt.fresh"
	cp "${BENCH_SB_BIN:-$BIN/switchboard}" "$SB_BIN"
	ALT_BIN=
	if [ -n "${BENCH_ALT_BIN:-}" ]; then
		ALT_BIN=$WORK/switchboard_alt.fresh
		cp "$BENCH_ALT_BIN" "$ALT_BIN"
	fi
}

# newdb NAME: an empty database (NAME's sbbench prefix replaced by
# BENCH_DB_PREFIX).
newdb() {
	local name=$DBP${1#sbbench}
	psql "$PG/postgres" -qX -v ON_ERROR_STOP=1 -c "DROP DATABASE IF EXISTS $name" -c "CREATE DATABASE $name" >/dev/null 2>&1
	echo "$PG/$name?sslmode=disable"
}

PIDS=()
cleanup() { for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

# start_fake LOGFILE [flags…]: the fake model on FAKE_PORT; sets FAKE_PID.
start_fake() {
	local logf=$1
	shift
	rm -f "$logf"
	"$BIN/fakellm" -addr "127.0.0.1:$FAKE_PORT" -log "$logf" "$@" >"$WORK/fakellm.out" 2>&1 &
	FAKE_PID=$!
	PIDS+=("$FAKE_PID")
	for _ in $(seq 200); do
		grep -q "fake model on" "$WORK/fakellm.out" 2>/dev/null && return 0
		sleep 0.05
	done
	echo "fakellm did not start: $(cat "$WORK/fakellm.out")" >&2
	return 1
}

# start_sb DBURL [VAR=value…]: the server on SB_PORT (or PORT, with its own
# data directory) against the fake model; sets SB_PID once /healthz answers.
start_sb() {
	local db=$1 port=${PORT:-$SB_PORT}
	shift
	local data=$WORK/data out=$WORK/switchboard.out
	if [ "$port" != "$SB_PORT" ]; then data=$WORK/data_$port out=$WORK/switchboard_$port.out; fi
	env DATABASE_URL="$db" DATA_DIR="$data" HTTP_ADDR="127.0.0.1:$port" WEB_AUTH_TOKEN=$TOKEN \
		RATE_LIMIT_PER_MINUTE=0 LOG_LEVEL=warn LLM_PROVIDER=openai LLM_BASE_URL="http://127.0.0.1:$FAKE_PORT/v1" \
		LLM_MODEL=gpt-4o-mini "$@" "$SB_BIN" serve >"$out" 2>&1 &
	SB_PID=$!
	PIDS+=("$SB_PID")
	for _ in $(seq 600); do
		curl -sf "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && return 0
		sleep 0.05
	done
	echo "switchboard did not start: $(tail -5 "$out")" >&2
	return 1
}

stop() { kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }

apiturns() { "$BIN/apiturns" -url "http://127.0.0.1:$SB_PORT" -token $TOKEN "$@"; }

machine() {
	{
		echo "date $(date -u +%FT%TZ)"
		echo "nproc $(nproc)"
		echo "cpu $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
		echo "mem_total $(free -m | awk '/Mem:/ {print $2}') MiB"
		echo "loadavg_at_start $(cut -d' ' -f1-3 /proc/loadavg)"
		echo "go $(go env GOVERSION)"
		psql "$PG/postgres" -AtX -c "SELECT 'postgres ' || version()" -c "SELECT 'fsync ' || current_setting('fsync')" \
			-c "SELECT 'synchronous_commit ' || current_setting('synchronous_commit')" -c "SELECT 'shared_buffers ' || current_setting('shared_buffers')"
	} | tee "$OUT/machine.txt"
}

# 1. ContextManager.Build, 200 recent turns, at 1k/10k/100k/1M rows.
w_build() {
	log "1. Build latency vs history size"
	go test -run '^$' -bench BuildSizes -benchtime "${BENCH_BUILD_N:-200}x" -timeout 60m ./services/prompt/ | tee "$OUT/build.txt"
	go test -run '^$' -bench TokenizerMemory -benchtime 1000x ./services/prompt/ | tee "$OUT/tokenizer_memory.txt"
}

# 2. POST → websocket delivery at 1/100/1000 clients; ingest throughput.
w_delivery() {
	log "2. delivery and ingest"
	ulimit -n 8192
	go test -run '^$' -bench DeliveryScale -benchtime "${BENCH_DELIVERY_N:-200}x" -timeout 30m ./web/ | tee "$OUT/delivery.txt"
	go test -run '^$' -bench 'Ingest$' -benchtime 3000x -timeout 30m ./web/ | tee "$OUT/ingest.txt"
}

# 3. Per-turn overhead through /v1/chat/completions (0 ms model), and RSS
# after 1,000 turns.
w_turns() {
	log "3. turns through /v1/chat/completions"
	local db
	db=$(newdb sbbench_turns)
	start_fake "$WORK/fake_turns.log"
	start_sb "$db"
	{
		apiturns -n "$TURNS" -sessions 8 -per 25 -pid "$SB_PID" -label ""
		# Up to 1,000 turns in all for the RSS reading.
		apiturns -n $((1000 - TURNS - 200 - 10)) -warmup 0 -sessions 0 -user bench-rss -pid "$SB_PID" -label "after1000_"
	} | tee "$OUT/turns.txt"
	stop "$SB_PID"
	stop "$FAKE_PID"
}

# 4. Cold start to /healthz on a migrated database, RSS idle.
w_coldstart() {
	log "4. cold start"
	local db
	db=$(newdb sbbench_cold)
	start_fake "$WORK/fake_cold.log"
	start_sb "$db" # migrates
	stop "$SB_PID"
	env DATABASE_URL="$db" DATA_DIR="$WORK/data" HTTP_ADDR="127.0.0.1:$SB_PORT" WEB_AUTH_TOKEN=$TOKEN LOG_LEVEL=warn \
		LLM_PROVIDER=openai LLM_BASE_URL="http://127.0.0.1:$FAKE_PORT/v1" LLM_MODEL=gpt-4o-mini \
		"$BIN/coldstart" -n "${BENCH_COLD_N:-10}" -settle 3s ${ALT_BIN:+-alt "$ALT_BIN"} \
		-health "http://127.0.0.1:$SB_PORT/healthz" -- "$SB_BIN" serve |
		tee "$OUT/coldstart.txt"
	stop "$FAKE_PID"
}

# RSS after every 1,000 sequential turns (one conversation, 0 ms model),
# up to BENCH_RSS_TURNS (3,000): whether memory levels off as the bounded
# caches fill. The load average is recorded with each reading.
w_rssturns() {
	local total=${BENCH_RSS_TURNS:-3000} db k
	log "RSS after every 1,000 of $total sequential turns"
	db=$(newdb sbbench_rss)
	start_fake "$WORK/fake_rss.log"
	start_sb "$db"
	{
		echo "rssturns_date $(date -u +%FT%TZ)"
		echo "rssturns_server ${BENCH_SB_BIN:-$BIN/switchboard}"
		for k in $(seq $((total / 1000))); do
			apiturns -n 1000 -warmup 0 -sessions 0 -user bench-rss -pid "$SB_PID" -label "rssturns_${k}000_" |
				grep -E 'rss_after|seq_p50|cpu_ms_per_turn'
			echo "rssturns_${k}000_anon_file_kib $(awk '/^RssAnon|^RssFile/ {printf "%s ", $2}' "/proc/$SB_PID/status")"
			echo "rssturns_${k}000_loadavg $(cut -d' ' -f1-3 /proc/loadavg)"
		done
	} | tee "$OUT/rss_turns.txt"
	stop "$SB_PID"
	stop "$FAKE_PID"
}

# 5. Flags 0/0, 1/0, 1/1: the same sequential workload on fresh databases;
# prompt bytes from the fake model's request log.
w_flags() {
	log "5. flags"
	: >"$OUT/flags.txt"
	for f in 00 10 11; do
		local w=${f:0:1} r=${f:1:1} db
		db=$(newdb "sbbench_flags_$f")
		start_fake "$OUT/fake_flags_$f.txt"
		start_sb "$db" AGENT_CONTEXT_SCOPED_WRITE="$w" AGENT_CONTEXT_SCOPED_READ="$r"
		apiturns -n "$TURNS" -warmup 0 -sessions 0 -user "" -pid "$SB_PID" -label "flags_${f}_" | tee -a "$OUT/flags.txt"
		awk -v f="$f" '{n++; b+=$2} END {printf "flags_%s_requests %d\nflags_%s_prompt_bytes %d\nflags_%s_prompt_bytes_per_turn %.0f\n", f, n, f, b, f, b/n}' \
			"$OUT/fake_flags_$f.txt" | tee -a "$OUT/flags.txt"
		stop "$SB_PID"
		stop "$FAKE_PID"
	done
	if cmp -s <(cut -d' ' -f2,3 "$OUT/fake_flags_00.txt") <(cut -d' ' -f2,3 "$OUT/fake_flags_10.txt"); then
		echo "flags_00_equals_10 yes (every request body identical: same sizes and SHA-256)" | tee -a "$OUT/flags.txt"
	else
		echo "flags_00_equals_10 NO" | tee -a "$OUT/flags.txt"
	fi
}

# 6. Token economy: prompt tokens per turn over 200 turns with a small
# window (compaction), Anthropic API with the fake reporting cache reads.
w_tokens() {
	log "6. token economy (anthropic fake with cache reads, window ${BENCH_TOKENS_WINDOW:-8000})"
	local db
	db=$(newdb sbbench_tokens)
	start_fake "$OUT/fake_tokens.txt" -cache
	start_sb "$db" LLM_PROVIDER=anthropic LLM_BASE_URL="http://127.0.0.1:$FAKE_PORT" LLM_API_KEY=bench \
		LLM_MODEL=claude-sonnet-4-5 LLM_CONTEXT_WINDOW="${BENCH_TOKENS_WINDOW:-8000}"
	apiturns -n "$TURNS" -warmup 0 -sessions 0 -user "" -pid "$SB_PID" -label "tokens_" | tee "$OUT/tokens_turns.txt"
	stop "$SB_PID"
	stop "$FAKE_PID"
	psql "${db%%\?*}" -AtX -F' ' -c "SELECT row_number() OVER (ORDER BY id), estimated_prompt_tokens, prompt_tokens, cached_tokens, prompt_token_budget
		FROM agent_runs WHERE parent_run_id IS NULL OR parent_run_id = 0 ORDER BY id" >"$OUT/tokens_runs.txt"
	psql "${db%%\?*}" -AtX -c "SELECT 'summary_segments ' || count(*) FROM chat_summary_segments" |
		tee -a "$OUT/tokens_turns.txt"
	awk '{n++; e+=$2; p+=$3; c+=$4; if ($2>m) m=$2} END {
		printf "turns %d\nestimated_prompt_tokens_mean %.0f\nestimated_prompt_tokens_max %d\nprovider_prompt_tokens_mean %.0f\ncached_tokens_mean %.0f\ncached_share %.3f\n", n, e/n, m, p/n, c/n, c/p }' \
		"$OUT/tokens_runs.txt" | tee "$OUT/tokens.txt"
}

# 7. Prompt caching: the cached share of prompt tokens over a 200-turn
# conversation through /v1/chat/completions, against the fake applying each
# provider's caching rules (fakellm -cache: Anthropic's cache_control
# breakpoints, OpenAI's automatic prefix cache), from turn 2.
# BENCH_CACHE_WINDOW (8000: compactions happen) sets LLM_CONTEXT_WINDOW;
# BENCH_SB_BIN runs another build of the server (a before/after comparison).
w_cache() {
	local api db model base
	for api in anthropic openai; do
		log "7. prompt caching, $api fake with the provider's caching rules, window ${BENCH_CACHE_WINDOW:-8000}"
		db=$(newdb sbbench_cache)
		start_fake "$OUT/fake_cache_$api.txt" -cache
		model=claude-sonnet-4-5 base="http://127.0.0.1:$FAKE_PORT"
		if [ "$api" = openai ]; then model=gpt-4o-mini base="http://127.0.0.1:$FAKE_PORT/v1"; fi
		start_sb "$db" LLM_PROVIDER=$api LLM_BASE_URL="$base" LLM_API_KEY=bench LLM_MODEL=$model \
			LLM_CONTEXT_WINDOW="${BENCH_CACHE_WINDOW:-8000}"
		apiturns -n "$TURNS" -warmup 0 -sessions 0 -user "" -label "cache_${api}_" >"$WORK/cache_turns.txt"
		stop "$SB_PID"
		stop "$FAKE_PID"
		psql "${db%%\?*}" -AtX -F' ' -c "SELECT row_number() OVER (ORDER BY id), prompt_tokens, cached_tokens
			FROM agent_runs WHERE parent_run_id IS NULL OR parent_run_id = 0 ORDER BY id" >"$OUT/cache_runs_$api.txt"
		local segs
		segs=$(psql "${db%%\?*}" -AtX -c "SELECT count(*) FROM chat_summary_segments")
		awk -v api="$api" -v segs="$segs" '$1 >= 2 {n++; p+=$2; c+=$3} END {
			printf "cache_%s_turns %d\ncache_%s_prompt_tokens_mean %.0f\ncache_%s_cached_tokens_mean %.0f\ncache_%s_cached_share_from_turn2 %.3f\ncache_%s_compactions %d\n",
				api, n+1, api, p/n, api, c/n, api, c/p, api, segs }' "$OUT/cache_runs_$api.txt" | tee -a "$OUT/cache.txt"
	done
}

# EXPLAIN (ANALYZE, BUFFERS) of the hot queries on ~1M messages.
w_explain() {
	log "EXPLAIN of the hot queries"
	local db
	db=$(newdb sbbench_explain)
	start_fake "$WORK/fake_explain.log"
	start_sb "$db" # migrates
	stop "$SB_PID"
	stop "$FAKE_PID"
	psql "${db%%\?*}" -qX -v ON_ERROR_STOP=1 <<-'SQL' >/dev/null
		INSERT INTO chat_messages (timeline_scope, context_scope, role, source, content, visible, token_count)
		SELECT 'tg:' || (g % 1000), 'main', CASE WHEN g % 2 = 0 THEN 'user' ELSE 'assistant' END, 'telegram',
		       'background message number ' || g, 1, 8
		FROM generate_series(1, 1000000) g;
		INSERT INTO chat_messages (timeline_scope, context_scope, role, source, content, visible, token_count)
		SELECT 'global', 'main', CASE WHEN g % 2 = 0 THEN 'user' ELSE 'assistant' END, 'web', 'a typical message ' || g, 1, 5
		FROM generate_series(1, 400) g;
		INSERT INTO agent_runs (timeline_scope, context_scope, status, source, model)
		SELECT CASE WHEN g % 10 = 0 THEN 'global' ELSE 'tg:' || (g % 1000) END, 'main', 'ok', 'telegram', 'fake'
		FROM generate_series(1, 100000) g;
		ANALYZE;
	SQL
	psql "${db%%\?*}" -X -f scripts/bench/explain.sql | tee "$OUT/explain.txt"
}

# 8. Model's first token → first delta on a websocket client: the fake
# streams a first token carrying its wall clock ("t=<unix ns> "), then waits
# BENCH_WSDELTA_PAUSE (200ms) before the rest; the client (the chat page's
# protocol: post frames on /api/ws) takes the stamp from the first delta
# frame of each turn and subtracts it from the time it read that frame.
# Same machine, same clock. The load average is recorded before and after.
w_wsdelta() {
	log "8. first token → first websocket delta, $TURNS turns, pause ${BENCH_WSDELTA_PAUSE:-200ms}"
	local db
	db=$(newdb sbbench_wsdelta)
	start_fake "$WORK/fake_wsdelta.log" -first-pause "${BENCH_WSDELTA_PAUSE:-200ms}"
	start_sb "$db"
	{
		echo "wsdelta_date $(date -u +%FT%TZ)"
		echo "wsdelta_server ${BENCH_SB_BIN:-$BIN/switchboard}"
		echo "wsdelta_loadavg_before $(cut -d' ' -f1-3 /proc/loadavg)"
		"$BIN/wsdelta" -url "http://127.0.0.1:$SB_PORT" -token $TOKEN -n "$TURNS" -label wsdelta_
		echo "wsdelta_loadavg_after $(cut -d' ' -f1-3 /proc/loadavg)"
	} | tee -a "$OUT/wsdelta.txt"
	stop "$SB_PID"
	stop "$FAKE_PID"
}

# 9. Flags 1/0 and 1/1 against 0/0, interleaved: three servers, each on its
# own fresh database and port, one fake model (0 ms); round i's turn goes to
# each server in turn (no user field: the global timeline, as in 5.), the
# order rotated by one each round, so load from elsewhere on the machine
# falls on the three alike. 600 rounds (BENCH_FLAGSAB_ROUNDS). Reports
# each mode's p50/p95/p99 and CPU per turn, the ratios of p50 and p95 to
# 0/0 with a bootstrap 95% interval, and the paired per-round differences
# (median, quartiles); every turn's latency in flags_ab_rounds.txt.
w_flagsab() {
	local rounds=${BENCH_FLAGSAB_ROUNDS:-600} spec="" pids="" i=0 f port db
	log "9. flags 0/0, 1/0, 1/1 interleaved turn by turn, $rounds rounds"
	start_fake "$WORK/fake_flagsab.log"
	for f in 00 10 11; do
		port=$((SB_PORT + i))
		db=$(newdb "sbbench_flagsab_$f")
		PORT=$port start_sb "$db" AGENT_CONTEXT_SCOPED_WRITE="${f:0:1}" AGENT_CONTEXT_SCOPED_READ="${f:1:1}"
		spec+="${spec:+,}$f=http://127.0.0.1:$port"
		pids+="${pids:+,}$SB_PID"
		i=$((i + 1))
	done
	{
		echo "flagsab_date $(date -u +%FT%TZ)"
		echo "flagsab_server ${BENCH_SB_BIN:-$BIN/switchboard}"
		echo "flagsab_loadavg_before $(cut -d' ' -f1-3 /proc/loadavg)"
		"$BIN/apiturns" -token $TOKEN -user "" -n "$rounds" -warmup 5 -ab "$spec" -ab-pids "$pids" \
			-ab-raw "$OUT/flags_ab_rounds.txt" -label flagsab_
		echo "flagsab_loadavg_after $(cut -d' ' -f1-3 /proc/loadavg)"
	} | tee -a "$OUT/flags_ab.txt"
	for p in ${pids//,/ }; do stop "$p"; done
	stop "$FAKE_PID"
}

# Main-scope prompt tokens per turn, sub-agents vs inline, 20 delegated
# research tasks (a Go benchmark on the real runtime; token counts).
w_subagents() {
	log "sub-agents vs inline"
	{
		echo "# $(date -u +%FT%TZ) load before: $(cut -d' ' -f1-3 /proc/loadavg)"
		go test -run '^$' -bench DelegatedResearch -benchtime 1x ./services/agent/
	} | tee "$OUT/subagents.txt"
}

w_plots() {
	log "plots"
	# Build latency versus history size.
	awk '/BenchmarkBuildSizes\/rows=/ { split($1, a, "="); sub(/-[0-9]+$/, "", a[2]);
		for (i = 1; i <= NF; i++) { if ($i == "p50-ms") p50 = $(i-1); if ($i == "p95-ms") p95 = $(i-1) }
		print a[2], p50 > "'"$WORK"'/build_p50.txt"; print a[2], p95 > "'"$WORK"'/build_p95.txt" }' "$OUT/build.txt"
	"$BIN/plot" -o "$OUT/build_latency.svg" -title "ContextManager.Build, 200 recent turns" -x "rows in chat_messages" -y "ms" -logx \
		"$WORK/build_p50.txt=p50" "$WORK/build_p95.txt=p95"
	# Prompt tokens per turn (main runs, in order).
	awk '{print $1, $2}' "$OUT/tokens_runs.txt" >"$WORK/tok_est.txt"
	awk '{print $1, $3}' "$OUT/tokens_runs.txt" >"$WORK/tok_prov.txt"
	awk '{print $1, $4}' "$OUT/tokens_runs.txt" >"$WORK/tok_cached.txt"
	local series=("$WORK/tok_est.txt=Switchboard estimate" "$WORK/tok_prov.txt=Switchboard, fake-reported" "$WORK/tok_cached.txt=Switchboard cached")
	if [ -s "$OUT/openclaw_fake.txt" ]; then
		awk '$6 == "false" {n++; print n, $4}' "$OUT/openclaw_fake.txt" | head -"$TURNS" >"$WORK/tok_openclaw.txt"
		series+=("$WORK/tok_openclaw.txt=OpenClaw, fake-reported")
	fi
	"$BIN/plot" -o "$OUT/prompt_tokens.svg" -title "Prompt tokens per turn" -x "turn" -y "tokens" "${series[@]}"
	echo "wrote $OUT/build_latency.svg $OUT/prompt_tokens.svg"
}

todo=("$@")
[ ${#todo[@]} -eq 0 ] && todo=(build delivery turns coldstart flags flagsab wsdelta tokens cache subagents plots)
for w in "${todo[@]}"; do
	if ! declare -F "w_$w" >/dev/null; then
		echo "run.sh: unknown workload \"$w\" (see the list at the top of this script)" >&2
		exit 2
	fi
done
build_bins
fresh_bins
machine
# Each workload runs in a subshell of its own with errexit: a failing
# command (a benchmark that fails, a server that does not start) ends that
# workload, the others still run, and the script says which failed and
# exits non-zero, so no figure is taken from a run that did not happen.
failed=()
for w in "${todo[@]}"; do
	set +e
	(
		set -euo pipefail
		PIDS=()
		trap cleanup EXIT
		"w_$w"
	)
	rc=$?
	set -e
	if [ "$rc" -ne 0 ]; then
		printf '\n!!! run.sh: workload %s FAILED (exit %d): its figures in %s are missing or partial\n' "$w" "$rc" "$OUT" >&2
		failed+=("$w")
	fi
done
if [ ${#failed[@]} -gt 0 ]; then
	printf '\n!!! run.sh: %d workload(s) FAILED: %s\n' "${#failed[@]}" "${failed[*]}" >&2
	exit 1
fi
