#!/usr/bin/env bash
# PLACEHOLDER — workload 6b of issue 10, for the lead to fill in once the
# `delegate` tool lands: main-scope prompt tokens over 20 delegated tasks
# with sub-agents (AGENT_SUBAGENTS=1, flags 1/1) versus inline
# (AGENT_SUBAGENTS=0), target: sub-agents ≤ 1/5 of inline.
#
# Intended shape (reuse scripts/bench/run.sh's helpers: newdb, start_fake,
# start_sb, apiturns):
#   1. fresh database; fakellm scripted so that each of 20 user turns makes
#      the main agent call `delegate` with one task whose sub-agent reads a
#      few workspace files (tool results of a few KB) and hands back a
#      short summary;
#   2. run once with AGENT_SUBAGENTS=1 and once with AGENT_SUBAGENTS=0;
#   3. from agent_runs, sum estimated_prompt_tokens and prompt_tokens of the
#      main runs (parent_run_id IS NULL) per mode, and print both and the
#      ratio into docs/bench/subagents.txt; docs/BENCHMARKS.md has the
#      placeholder table for them.
set -euo pipefail
echo "subagents.sh: not implemented yet (needs the delegate tool); see the comment in this script" >&2
exit 2
