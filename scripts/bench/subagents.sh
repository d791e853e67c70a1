#!/usr/bin/env bash
# Workload 6b of issue 10: main-scope prompt tokens over 20 delegated
# research tasks with sub-agents (flags 1/1, AGENT_SUBAGENTS=1) versus
# inline in main (AGENT_SUBAGENTS=0). It is a Go benchmark on a real
# PostgreSQL, the real runtime and River queue, and the OpenAI SDK against
# the scripted fake model; output goes to docs/bench/subagents.txt. The
# figures are tokens, so the machine's load does not change them; the load
# is recorded beside them all the same.
set -euo pipefail
cd "$(dirname "$0")/../.."
{
	echo "# $(date -u +%FT%TZ) load before: $(uptime | sed 's/.*load average: //')"
	go test -run '^$' -bench DelegatedResearch -benchtime 1x ./services/agent/
	echo "# load after: $(uptime | sed 's/.*load average: //')"
} | tee docs/bench/subagents.txt
