// Command fakellm serves the test fake model (OpenAI-compatible and
// Anthropic APIs) on a local port for benchmarks and manual runs. By default
// every request gets an echo of its last message at once (a 0 ms model).
//
//	go run ./scripts/bench/fakellm -addr 127.0.0.1:18900
//	LLM_PROVIDER=openai LLM_BASE_URL=http://127.0.0.1:18900/v1 LLM_MODEL=fake switchboard
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"

	"github.com/switchboard/switchboard/services/llm/llmtest"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:18900", "listen address")
	latency := flag.Duration("latency", 0, "delay before every answer")
	flag.Parse()
	s, err := llmtest.Listen(*addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakellm:", err)
		os.Exit(1)
	}
	if *latency > 0 {
		s.SetLatency(*latency)
	}
	fmt.Printf("fake model on %s (OpenAI base %s, Anthropic base %s), latency %s\n", s.URL, s.OpenAIBaseURL(), s.AnthropicBaseURL(), *latency)
	c := make(chan os.Signal, 1)
	signal.Notify(c, os.Interrupt)
	<-c
	s.Close()
}
