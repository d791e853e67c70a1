package llm_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm"
	"github.com/switchboard/switchboard/services/llm/llmtest"
)

func TestRetryThenSuccess(t *testing.T) {
	t.Parallel()
	for _, api := range apis {
		for _, stream := range []bool{false, true} {
			t.Run(api+"/"+mode(stream), func(t *testing.T) {
				t.Parallel()
				p, srv := setup(t, api, 3)
				srv.Enqueue(
					llmtest.Status(http.StatusTooManyRequests, "0"),
					llmtest.Status(http.StatusServiceUnavailable, ""),
					llmtest.Reply{CutAfter: 1}, // no text: the connection drops before any delta
					llmtest.Text("finally"),
				)
				resp, deltas, err := complete(t, p, userRequest("hi"), stream)
				if err != nil {
					t.Fatalf("Complete: %v", err)
				}
				if resp.Text != "finally" {
					t.Errorf("Text = %q", resp.Text)
				}
				if stream && strings.Join(deltas, "") != "finally" {
					t.Errorf("deltas = %q", deltas)
				}
				if n := srv.RequestCount(); n != 4 {
					t.Errorf("server got %d requests, want 4", n)
				}
			})
		}
	}
}

func TestRetryHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	p, srv := setup(t, llm.ProviderOpenAI, 1)
	srv.Enqueue(llmtest.Status(http.StatusTooManyRequests, "1"), llmtest.Text("ok"))
	start := time.Now()
	if _, _, err := complete(t, p, userRequest("hi"), false); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if elapsed := time.Since(start); elapsed < time.Second {
		t.Errorf("retried after %s, want at least the 1s Retry-After", elapsed)
	}
	if n := srv.RequestCount(); n != 2 {
		t.Errorf("server got %d requests, want 2", n)
	}
}

func TestRetryAfterTooLongGivesUp(t *testing.T) {
	t.Parallel()
	p, srv := setup(t, llm.ProviderAnthropic, 3)
	srv.Enqueue(llmtest.Status(http.StatusTooManyRequests, "3600"))
	_, _, err := complete(t, p, userRequest("hi"), false)
	if services.ErrorCode(err) != llm.CodeUnreachable || !strings.Contains(services.ErrorMessage(err), "asked to wait 1h0m0s") {
		t.Errorf("err = %v", err)
	}
	if n := srv.RequestCount(); n != 1 {
		t.Errorf("server got %d requests, want 1", n)
	}
}

func TestRetriesExhausted(t *testing.T) {
	t.Parallel()
	for _, api := range apis {
		t.Run(api, func(t *testing.T) {
			t.Parallel()
			p, srv := setup(t, api, 2)
			srv.Enqueue(llmtest.Status(500, ""), llmtest.Status(502, ""), llmtest.Status(500, ""), llmtest.Text("too late"))
			_, _, err := complete(t, p, userRequest("hi"), true)
			if !services.IsKind(err, services.EUNAVAILABLE) || services.ErrorCode(err) != llm.CodeUnreachable {
				t.Fatalf("err = %v, want EUNAVAILABLE %s", err, llm.CodeUnreachable)
			}
			msg := services.ErrorMessage(err)
			for _, want := range []string{"The model server answered HTTP 500", `"test-model"`, "3 attempts"} {
				if !strings.Contains(msg, want) {
					t.Errorf("message %q lacks %q", msg, want)
				}
			}
			// An answered call is not "unreachable", and the server's
			// address is for the logs (the error's cause), not the owner.
			if strings.Contains(msg, "unreachable") || strings.Contains(msg, srv.URL) {
				t.Errorf("message %q says unreachable or names the server", msg)
			}
			if !strings.Contains(err.Error(), srv.URL) {
				t.Errorf("error %q lacks the server's address for the logs", err)
			}
			var pe *llm.ProviderError
			if !errors.As(err, &pe) || pe.StatusCode != 500 || pe.Provider != api {
				t.Errorf("ProviderError = %+v", pe)
			}
			if n := srv.RequestCount(); n != 3 {
				t.Errorf("server got %d requests, want 3", n)
			}
		})
	}
}

func TestNoRetryOnClientErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		status int
		kind   string
		code   string
		hint   string
	}{
		{http.StatusBadRequest, services.EINVALID, llm.CodeRejected, "refused the request"},
		{http.StatusUnauthorized, services.EUNAVAILABLE, llm.CodeAuth, "LLM_API_KEY"},
		{http.StatusNotFound, services.EUNAVAILABLE, llm.CodeRejected, "LLM_MODEL"},
		{http.StatusRequestEntityTooLarge, services.ETOOLARGE, llm.CodeRejected, "too large"},
	}
	for _, api := range apis {
		for _, c := range cases {
			t.Run(api+"/"+http.StatusText(c.status), func(t *testing.T) {
				t.Parallel()
				p, srv := setup(t, api, 3)
				srv.Enqueue(llmtest.Status(c.status, "0"), llmtest.Text("not reached"))
				_, _, err := complete(t, p, userRequest("hi"), false)
				if !services.IsKind(err, c.kind) || services.ErrorCode(err) != c.code {
					t.Fatalf("err = %v, want %s %s", err, c.kind, c.code)
				}
				if msg := services.ErrorMessage(err); !strings.Contains(msg, c.hint) {
					t.Errorf("message %q lacks %q", msg, c.hint)
				}
				if n := srv.RequestCount(); n != 1 {
					t.Errorf("server got %d requests, want 1", n)
				}
			})
		}
	}
}

func TestNoRetryAfterPartialStream(t *testing.T) {
	t.Parallel()
	for _, api := range apis {
		t.Run(api, func(t *testing.T) {
			t.Parallel()
			p, srv := setup(t, api, 3)
			srv.Enqueue(llmtest.Reply{Text: "one two three four", CutAfter: 2}, llmtest.Text("must not be used"))
			resp, deltas, err := complete(t, p, userRequest("hi"), true)
			if err == nil {
				t.Fatalf("Complete succeeded with %+v", resp)
			}
			if !services.IsKind(err, services.EUNAVAILABLE) || services.ErrorCode(err) != llm.CodeStreamInterrupted {
				t.Errorf("err = %v, want EUNAVAILABLE %s", err, llm.CodeStreamInterrupted)
			}
			if msg := services.ErrorMessage(err); !strings.Contains(msg, "broke off") || !strings.Contains(msg, "not retried") {
				t.Errorf("message = %q", msg)
			}
			if got := strings.Join(deltas, ""); got != "one two " {
				t.Errorf("deltas = %q, want the first two words only", got)
			}
			if n := srv.RequestCount(); n != 1 {
				t.Errorf("server got %d requests, want 1", n)
			}
			if srv.Pending() != 1 {
				t.Errorf("the next scripted reply was used")
			}
		})
	}
}

func TestAttemptTimeoutRetried(t *testing.T) {
	t.Parallel()
	for _, api := range apis {
		t.Run(api, func(t *testing.T) {
			t.Parallel()
			srv := llmtest.NewServer(t)
			p := newProvider(t, api, srv, llm.Config{MaxRetries: 1, Timeout: 100 * time.Millisecond})
			srv.Enqueue(llmtest.Reply{Text: "slow", Delay: 5 * time.Second}, llmtest.Text("fast"))
			start := time.Now()
			resp, _, err := complete(t, p, userRequest("hi"), true)
			if err != nil || resp.Text != "fast" {
				t.Fatalf("Complete = %+v, %v", resp, err)
			}
			if elapsed := time.Since(start); elapsed > 3*time.Second {
				t.Errorf("took %s; the first attempt was not cut at its timeout", elapsed)
			}
		})
	}
}

func TestTimeoutExhausted(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t)
	p := newProvider(t, llm.ProviderOpenAI, srv, llm.Config{MaxRetries: -1, Timeout: 50 * time.Millisecond})
	srv.Enqueue(llmtest.Reply{Text: "slow", Delay: 5 * time.Second})
	_, _, err := complete(t, p, userRequest("hi"), false)
	if services.ErrorCode(err) != llm.CodeUnreachable || !strings.Contains(services.ErrorMessage(err), "1 attempt over") ||
		!strings.Contains(services.ErrorMessage(err), "The model server timed out after 50ms") {
		t.Errorf("err = %v", err)
	}
}

func TestCancelledWhileWaiting(t *testing.T) {
	t.Parallel()
	p, srv := setup(t, llm.ProviderAnthropic, 3)
	srv.Enqueue(llmtest.Reply{Text: "slow", Delay: 5 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err := p.Complete(ctx, userRequest("hi"), nil)
	if !errors.Is(err, context.Canceled) || services.ErrorCode(err) != llm.CodeCancelled {
		t.Errorf("err = %v, want %s matching context.Canceled", err, llm.CodeCancelled)
	}
	if n := srv.RequestCount(); n != 1 {
		t.Errorf("server got %d requests, want 1", n)
	}
}

func TestConnectionRefused(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t)
	p := newProvider(t, llm.ProviderOpenAI, srv, llm.Config{MaxRetries: 1})
	srv.Close()
	_, _, err := complete(t, p, userRequest("hi"), false)
	msg := services.ErrorMessage(err)
	if !services.IsKind(err, services.EUNAVAILABLE) || !strings.Contains(msg, "2 attempts") ||
		!strings.Contains(msg, "cannot reach "+srv.URL) || !strings.Contains(msg, "connection refused") {
		t.Errorf("err = %v", err)
	}
}

// flaky fails its first n calls with a retryable error, then answers.
type flaky struct {
	llm.Provider
	n, calls int
}

func (f *flaky) Complete(ctx context.Context, req llm.Request, onDelta func(string)) (*llm.Response, error) {
	f.calls++
	if f.calls <= f.n {
		return nil, &services.Error{Kind: services.EUNAVAILABLE, Err: &llm.ProviderError{Provider: "flaky", StatusCode: 503, Retryable: true}}
	}
	return &llm.Response{Text: "ok"}, nil
}

func TestRetryBackoffGrows(t *testing.T) {
	t.Parallel()
	f := &flaky{Provider: llm.NewOffline(0), n: 3}
	r := llm.Retry(f, llm.RetryPolicy{MaxRetries: 3, BaseDelay: 20 * time.Millisecond, MaxDelay: time.Second})
	start := time.Now()
	if _, err := r.Complete(context.Background(), userRequest("hi"), nil); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	// Jittered waits are at least 10+20+40 ms and at most 20+40+80 ms.
	if elapsed := time.Since(start); elapsed < 70*time.Millisecond || elapsed > 2*time.Second {
		t.Errorf("three retries took %s, want about 70-140ms", elapsed)
	}
	if f.calls != 4 {
		t.Errorf("calls = %d, want 4", f.calls)
	}
}
