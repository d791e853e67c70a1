package prompt

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/switchboard/switchboard/services"
)

func TestLazyTokenizerCountsLikeEager(t *testing.T) {
	t.Parallel()
	for _, model := range []string{"gpt-4o-mini", "claude-sonnet-4-5"} {
		eager, warn := NewTokenizer(model)
		if warn != nil {
			t.Fatal(warn)
		}
		lazy := NewLazyTokenizer(model, func(err error) { t.Errorf("fallback: %v", err) })
		for _, text := range []string{"", "hello world", "你好，世界", "<|endoftext|> is text here", "func main() { fmt.Println(42) }"} {
			if got, want := lazy.Count(text), eager.Count(text); got != want {
				t.Errorf("%s: Count(%q) = %d, want %d", model, text, got, want)
			}
			if got, want := lazy.CountMessage("user", text), eager.CountMessage("user", text); got != want {
				t.Errorf("%s: CountMessage(%q) = %d, want %d", model, text, got, want)
			}
		}
	}
}

func TestLazyTokenizerLoadsOnceOnFirstCount(t *testing.T) {
	t.Parallel()
	var loads atomic.Int32
	l := &lazyTokenizer{enc: EncodingO200k, load: func() (*bpeEncoding, error) {
		loads.Add(1)
		return encoders[EncodingO200k].load()
	}}
	if loads.Load() != 0 {
		t.Fatal("loaded before the first count")
	}
	if l.Count("") != 0 || loads.Load() != 0 {
		t.Fatal("an empty text must not load the encoding")
	}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); _ = l.Count("hello world") }()
	}
	wg.Wait()
	if n := loads.Load(); n != 1 {
		t.Fatalf("loaded %d times, want 1", n)
	}
}

func TestLazyTokenizerFallback(t *testing.T) {
	t.Parallel()
	var warned []error
	l := &lazyTokenizer{enc: EncodingO200k, onFallback: func(err error) { warned = append(warned, err) },
		load: func() (*bpeEncoding, error) { return nil, errors.New("no encoding") }}
	text := "some words to count"
	if got, want := l.Count(text), (HeuristicTokenizer{}).Count(text); got != want {
		t.Fatalf("fallback count %d, want the heuristic's %d", got, want)
	}
	_ = l.Count(text)
	if len(warned) != 1 || services.ErrorCode(warned[0]) != CodeBudgetFallback {
		t.Fatalf("warnings: %v; want one %s", warned, CodeBudgetFallback)
	}
}
