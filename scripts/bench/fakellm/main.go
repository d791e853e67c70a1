// Command fakellm serves the test fake model (OpenAI-compatible and
// Anthropic APIs) on a local port for benchmarks and manual runs. By default
// every request gets an echo of its last message at once (a 0 ms model).
//
//	go run ./scripts/bench/fakellm -addr 127.0.0.1:18900
//	LLM_PROVIDER=openai LLM_BASE_URL=http://127.0.0.1:18900/v1 LLM_MODEL=fake switchboard
//
// For the benchmarks it can also:
//
//   - -log FILE: append one line per request, "api bytes sha256-prefix
//     prompt_tokens cached_tokens summary", so a run's prompt bytes can be
//     summed and two runs' prompts compared byte for byte;
//   - -cache: report prompt caching by the providers' rules (llmtest.PromptCache):
//     Anthropic's cache_control breakpoints (at most 4, the longest
//     breakpoint prefix written by an earlier request is read, 1,024-token
//     minimum; cache_read_input_tokens / cache_creation_input_tokens) and
//     OpenAI's automatic prefix cache (longest common prefix with an earlier
//     request, 1,024-token minimum, 128-token steps;
//     prompt_tokens_details.cached_tokens). Prompt tokens are then bytes/4
//     of the request's canonical content (tools, system, messages);
//   - answer summary requests (compaction) with a valid summary template,
//     so compaction succeeds against the fake;
//   - call tools on request, for trying tools by hand: a user message
//     "call NAME {json arguments}" is answered with that tool call, and the
//     tool's result with "The tool answered: <result>". Start the service
//     with TOOLS_DEFER_OVER=0 for this: by default most tools are deferred,
//     and the one call the fake makes per message would only load the tool
//     ({"status":"loaded",…}) without running it (docs/TOOLS.md);
//   - -first-pause D: answer every streamed OpenAI chat completion with a
//     first token at once, "t=<unix ns> " (the fake's wall clock just before
//     writing it), then wait D before the rest, so a client can time the
//     model's first token to its first delta (scripts/bench/wsdelta). Other
//     requests are answered as without the flag.
//
// Prompt tokens are reported as bytes/4, the fake's estimate.
package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/switchboard/switchboard/services/llm/llmtest"
)

// summaryMarker is how the ContextManager's compaction request begins.
const summaryMarker = "You are archiving the older part of a conversation"

const summaryText = `## Archived Session Summary

### Objectives & Status
Benchmark conversation; the user sends numbered turns.

### Technical Context
None.

### Completed Milestones
Earlier turns answered.

### Key Insights & Decisions
None.

### File System State
No files.
`

func main() {
	addr := flag.String("addr", "127.0.0.1:18900", "listen address")
	latency := flag.Duration("latency", 0, "delay before every answer")
	logPath := flag.String("log", "", "append one line per request (api, bytes, body hash, reported tokens) to this file")
	cache := flag.Bool("cache", false, "report prompt caching by the providers' rules (Anthropic cache_control breakpoints, OpenAI automatic prefix caching)")
	firstPause := flag.Duration("first-pause", 0, `stream OpenAI answers as a first token "t=<unix ns> " at once, then this pause, then the rest`)
	flag.Parse()
	listen := *addr
	if *firstPause > 0 {
		listen = "127.0.0.1:0" // the ordinary fake, behind the first-token front
	}
	s, err := llmtest.Listen(listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakellm:", err)
		os.Exit(1)
	}
	url := s.URL
	if *firstPause > 0 {
		front, err := newFirstToken(*firstPause, s.URL)
		if err == nil {
			var l net.Listener
			if l, err = net.Listen("tcp", *addr); err == nil {
				url = "http://" + l.Addr().String()
				go func() { _ = http.Serve(l, front) }()
			}
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "fakellm:", err)
			os.Exit(1)
		}
	}
	if *latency > 0 {
		s.SetLatency(*latency)
	}
	var logw *bufio.Writer
	var logMu sync.Mutex
	if *logPath != "" {
		f, err := os.OpenFile(*logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, "fakellm:", err)
			os.Exit(1)
		}
		defer f.Close()
		logw = bufio.NewWriter(f)
		defer logw.Flush()
	}
	pc := llmtest.NewPromptCache()
	s.SetDefault(func(r llmtest.Request) llmtest.Reply {
		reply := llmtest.Echo(r)
		if name, args, ok := toolRequest(r.LastMessage); ok && !r.LastIsToolResult {
			reply = llmtest.Call(name, args)
		} else if r.LastIsToolResult {
			reply = llmtest.Text("The tool answered: " + r.LastMessage)
		}
		summary := strings.Contains(string(r.Body), summaryMarker)
		if summary {
			reply = llmtest.Text(summaryText)
		}
		u := llmtest.Usage{PromptTokens: max(1, len(r.Body)/4), CompletionTokens: max(1, len(reply.Text)/4)}
		if *cache {
			cu, ok := pc.Usage(r.API, r.Model, r.Body)
			if !ok {
				return llmtest.Status(400, "") // more than 4 breakpoints
			}
			u.PromptTokens, u.CachedTokens, u.CacheWriteTokens = cu.PromptTokens, cu.CachedTokens, cu.CacheWriteTokens
		}
		reply.Usage = u
		if logw != nil {
			h := sha256.Sum256(r.Body)
			logMu.Lock()
			fmt.Fprintf(logw, "%s %d %s %d %d %t\n", r.API, len(r.Body), hex.EncodeToString(h[:8]), u.PromptTokens, u.CachedTokens, summary)
			logw.Flush()
			logMu.Unlock()
		}
		return reply
	})
	fmt.Printf("fake model on %s (OpenAI base %s/v1, Anthropic base %s), latency %s, first-token pause %s\n", url, url, url, *latency, *firstPause)
	c := make(chan os.Signal, 1)
	signal.Notify(c, os.Interrupt, syscall.SIGTERM)
	<-c
	s.Close()
}

// toolRequest reads "call NAME {json}" (the arguments default to {}).
func toolRequest(msg string) (name, args string, ok bool) {
	rest, found := strings.CutPrefix(strings.TrimSpace(msg), "call ")
	if !found {
		return "", "", false
	}
	name, args, _ = strings.Cut(strings.TrimSpace(rest), " ")
	args = strings.TrimSpace(args)
	if args == "" {
		args = "{}"
	}
	if name == "" || !json.Valid([]byte(args)) {
		return "", "", false
	}
	return name, args, true
}
