package llm

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/switchboard/switchboard/services"
)

// RetryPolicy bounds the retries Retry makes.
type RetryPolicy struct {
	// MaxRetries is the number of retries after the first attempt.
	MaxRetries int
	// BaseDelay is the backoff before the first retry; it doubles on each
	// retry, with jitter drawn from [delay/2, delay].
	BaseDelay time.Duration
	// MaxDelay caps one backoff. A Retry-After longer than MaxDelay ends the
	// retries at once rather than holding the caller that long.
	MaxDelay time.Duration
	// AttemptTimeout bounds each attempt, streamed reply included; 0 means
	// no bound besides the caller's context.
	AttemptTimeout time.Duration
}

// DefaultRetryPolicy is 2 retries starting at 500ms, at most 30s apart.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{MaxRetries: DefaultMaxRetries, BaseDelay: 500 * time.Millisecond, MaxDelay: 30 * time.Second}
}

// Retrying is a Provider that retries another on transient failures.
type Retrying struct {
	Provider
	policy RetryPolicy
}

// Retry wraps p with bounded retries and exponential backoff with jitter.
// It retries a call that failed with HTTP 408, 409, 429 or 5xx, a timeout or
// a connection error (a *ProviderError with Retryable set), waiting at least
// the server's Retry-After. It never retries other 4xx answers, and never a
// call that has already passed text to onDelta, since the caller has shown it.
func Retry(p Provider, policy RetryPolicy) *Retrying {
	if policy.BaseDelay <= 0 {
		policy.BaseDelay = DefaultRetryPolicy().BaseDelay
	}
	if policy.MaxDelay < policy.BaseDelay {
		policy.MaxDelay = max(DefaultRetryPolicy().MaxDelay, policy.BaseDelay)
	}
	policy.MaxRetries = max(policy.MaxRetries, 0)
	return &Retrying{Provider: p, policy: policy}
}

// Complete calls the wrapped provider until it succeeds, fails for good or
// runs out of retries. Errors are as documented on Provider; in particular,
// exhausted retries give EUNAVAILABLE with Code CodeUnreachable and a message
// saying what was tried, and a stream that broke off after text was
// delivered gives EUNAVAILABLE with Code CodeStreamInterrupted.
func (r *Retrying) Complete(ctx context.Context, req Request, onDelta func(string)) (*Response, error) {
	start := time.Now()
	for attempt := 0; ; attempt++ {
		streamed := false
		var deltas func(string)
		if onDelta != nil {
			deltas = func(s string) {
				streamed = true
				onDelta(s)
			}
		}
		resp, err := r.attempt(ctx, req, deltas)
		if err == nil {
			return resp, nil
		}
		if ctx.Err() != nil {
			return nil, cancelled(ctx)
		}
		var pe *ProviderError
		if !errors.As(err, &pe) {
			return nil, err // our own validation errors
		}
		if streamed {
			return nil, &services.Error{Kind: services.EUNAVAILABLE, Code: CodeStreamInterrupted,
				Message: fmt.Sprintf("The answer from the %s model %q broke off after it had started (%s). It was not retried, to avoid repeating text already shown; ask again to get a complete answer.",
					r.Name(), r.Model(), pe.describe()),
				Err: err}
		}
		if !pe.Retryable {
			return nil, err
		}
		if attempt >= r.policy.MaxRetries {
			return nil, r.exhausted(attempt+1, time.Since(start), pe, "")
		}
		delay := r.backoff(attempt)
		if pe.RetryAfter > 0 {
			if pe.RetryAfter > r.policy.MaxDelay {
				return nil, r.exhausted(attempt+1, time.Since(start), pe,
					fmt.Sprintf(" The server asked to wait %s before trying again.", pe.RetryAfter.Round(time.Second)))
			}
			delay = max(delay, pe.RetryAfter)
		}
		timer := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, cancelled(ctx)
		case <-timer.C:
		}
	}
}

// attempt makes one call under the per-attempt timeout.
func (r *Retrying) attempt(ctx context.Context, req Request, onDelta func(string)) (*Response, error) {
	if r.policy.AttemptTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.policy.AttemptTimeout)
		defer cancel()
	}
	return r.Provider.Complete(ctx, req, onDelta)
}

// backoff is BaseDelay·2^attempt capped at MaxDelay, with jitter in [d/2, d].
func (r *Retrying) backoff(attempt int) time.Duration {
	d := r.policy.BaseDelay << min(attempt, 30)
	if d <= 0 || d > r.policy.MaxDelay {
		d = r.policy.MaxDelay
	}
	half := d / 2
	return half + rand.N(half+1)
}

// exhausted is the error once retrying is pointless. Its message says
// what happened in the owner's words: the HTTP status the model server
// answered, or that it timed out, or that it could not be reached (then
// with its address, which the owner must check); the server's address of
// an answered call stays in the logs (the error's cause names it).
func (r *Retrying) exhausted(attempts int, elapsed time.Duration, last *ProviderError, extra string) error {
	where := ""
	if b, ok := r.Provider.(interface{ BaseURL() string }); ok {
		where = b.BaseURL()
	}
	plural := "s"
	if attempts == 1 {
		plural = ""
	}
	tries := fmt.Sprintf("the %s model %q failed %d attempt%s over %s", r.Name(), r.Model(), attempts, plural, elapsed.Round(time.Millisecond))
	var msg string
	switch {
	case last.StatusCode != 0:
		msg = fmt.Sprintf("The model server answered %s: %s.%s Try again later; if it persists, check the model server's logs and that LLM_MODEL is right.",
			last.describe(), tries, extra)
	case errors.Is(last.Err, context.DeadlineExceeded) && r.policy.AttemptTimeout > 0:
		msg = fmt.Sprintf("The model server timed out after %s: %s.%s Try again later, or raise LLM_TIMEOUT for a slow model.",
			r.policy.AttemptTimeout.Round(time.Millisecond), tries, extra)
	case where != "":
		msg = fmt.Sprintf("The model server is unreachable: cannot reach %s (%s): %s.%s Check that the server in LLM_BASE_URL is up, or try again later.",
			where, last.describe(), tries, extra)
	default:
		msg = fmt.Sprintf("The model server is unreachable (%s): %s.%s Check that the server in LLM_BASE_URL is up, or try again later.",
			last.describe(), tries, extra)
	}
	var cause error = last
	if where != "" {
		cause = fmt.Errorf("%s: %w", where, last)
	}
	return &services.Error{Kind: services.EUNAVAILABLE, Code: CodeUnreachable, Message: msg, Err: cause}
}
