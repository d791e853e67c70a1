package prompt

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/switchboard/switchboard/services"
)

func TestEncodingForModel(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"gpt-4o":                     EncodingO200k,
		"gpt-4o-mini-2024-07-18":     EncodingO200k,
		"openai/gpt-4.1-mini":        EncodingO200k,
		"GPT-5":                      EncodingO200k,
		"gpt-5.1":                    EncodingO200k,
		"o1":                         EncodingO200k,
		"o3-mini":                    EncodingO200k,
		"o4-mini":                    EncodingO200k,
		"chatgpt-4o-latest":          EncodingO200k,
		"gpt-4":                      EncodingCL100k,
		"gpt-4-turbo":                EncodingCL100k,
		"gpt-3.5-turbo":              EncodingCL100k,
		"o10":                        EncodingCL100k,
		"claude-sonnet-4-5":          EncodingCL100k,
		"meta-llama/llama-3.1-70b":   EncodingCL100k,
		"qwen2.5-72b-instruct":       EncodingCL100k,
		"":                           EncodingCL100k,
		"anthropic/claude-opus-4-1":  EncodingCL100k,
		"openrouter/openai/gpt-4o:x": EncodingO200k,
	}
	for model, want := range tests {
		if got := EncodingForModel(model); got != want {
			t.Errorf("EncodingForModel(%q) = %q, want %q", model, got, want)
		}
	}
}

func TestNewTokenizerCounts(t *testing.T) {
	t.Parallel()
	for _, model := range []string{"gpt-4o", "claude-sonnet-4-5"} {
		tok, warn := NewTokenizer(model)
		if warn != nil {
			t.Fatalf("NewTokenizer(%q) warning: %v", model, warn)
		}
		if _, ok := tok.(HeuristicTokenizer); ok {
			t.Fatalf("NewTokenizer(%q) fell back to the heuristic", model)
		}
		if got := tok.Count(""); got != 0 {
			t.Errorf("%s: Count(\"\") = %d", model, got)
		}
		if got := tok.Count("hello world"); got != 2 {
			t.Errorf("%s: Count(hello world) = %d, want 2", model, got)
		}
		// Special-token text in user input is counted, not rejected.
		if got := tok.Count("<|endoftext|>"); got < 2 {
			t.Errorf("%s: Count(<|endoftext|>) = %d, want it counted as text", model, got)
		}
		if got := tok.Count("上下文管理器"); got < 2 || got > 8 {
			t.Errorf("%s: Count(CJK) = %d", model, got)
		}
		content := "Please summarise the design document."
		if got, want := tok.CountMessage("user", content), tok.Count(content)+tok.Count("user")+MessageOverhead; got != want {
			t.Errorf("%s: CountMessage = %d, want %d", model, got, want)
		}
	}
}

func TestNewTokenizerConcurrent(t *testing.T) {
	t.Parallel()
	var wg sync.WaitGroup
	counts := make([]int, 8)
	for i := range counts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			model := "gpt-4o"
			if i%2 == 1 {
				model = "gpt-4"
			}
			tok, _ := NewTokenizer(model)
			counts[i] = tok.Count(strings.Repeat("concurrent counting ", 50))
		}()
	}
	wg.Wait()
	for i := 2; i < len(counts); i++ {
		if counts[i] != counts[i%2] {
			t.Errorf("count %d = %d, want %d", i, counts[i], counts[i%2])
		}
	}
}

func TestNewTokenizerFallback(t *testing.T) {
	t.Parallel()
	tok, warn := newTokenizer(EncodingO200k, func() (*bpeEncoding, error) {
		return nil, errors.New("embedded encoding missing")
	})
	if _, ok := tok.(HeuristicTokenizer); !ok {
		t.Fatalf("tokenizer = %T, want HeuristicTokenizer", tok)
	}
	if services.ErrorCode(warn) != CodeBudgetFallback {
		t.Fatalf("warning = %v, want code %s", warn, CodeBudgetFallback)
	}
	if !strings.Contains(warn.Error(), "embedded encoding missing") {
		t.Errorf("warning %q does not carry its cause", warn)
	}
	if tok.Count("abcdefgh") != 2 {
		t.Errorf("fallback Count = %d", tok.Count("abcdefgh"))
	}
}

func TestHeuristicTokenizer(t *testing.T) {
	t.Parallel()
	var h HeuristicTokenizer
	tests := map[string]int{
		"":          0,
		"a":         1,
		"abcd":      1,
		"abcde":     2,
		"你好":        2,
		"こんにちは":     5,
		"안녕":        2,
		"hi 你好 all": 2 + 2, // 2 CJK + ceil(7/4)
	}
	for in, want := range tests {
		if got := h.Count(in); got != want {
			t.Errorf("Count(%q) = %d, want %d", in, got, want)
		}
	}
	if got := h.CountMessage("user", "abcd"); got != MessageOverhead+1+1 {
		t.Errorf("CountMessage = %d", got)
	}
}
