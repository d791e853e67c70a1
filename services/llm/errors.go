package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/switchboard/switchboard/services"
)

// Codes set on the *services.Error values this package returns.
const (
	// CodeUnreachable: the model server could not be reached, timed out or
	// failed (429, 5xx, connection errors); Retry gave up. Kind EUNAVAILABLE.
	CodeUnreachable = "LLM_UNREACHABLE"
	// CodeAuth: the provider refused the API key (401, 403). Kind EUNAVAILABLE.
	CodeAuth = "LLM_AUTH"
	// CodeRejected: the provider refused the request (other 4xx). Kind
	// EINVALID, ETOOLARGE for 413, EUNAVAILABLE for 404 (unknown model).
	CodeRejected = "LLM_REJECTED"
	// CodeStreamInterrupted: a streamed reply broke off after text had been
	// delivered, so it was not retried. Kind EUNAVAILABLE.
	CodeStreamInterrupted = "LLM_STREAM_INTERRUPTED"
	// CodeMalformedToolCall: the model made malformed tool calls (arguments
	// that are not a JSON object, unknown tools, arguments failing the
	// schema) several times in a row; each one came back to it as a tool
	// result first. Kind EUNAVAILABLE.
	CodeMalformedToolCall = "LLM_MALFORMED_TOOL_CALL"
	// CodeCancelled: the caller's context ended. Kind EUNAVAILABLE; the error
	// also matches context.Canceled or context.DeadlineExceeded.
	CodeCancelled = "LLM_CANCELLED"
)

// ProviderError is the cause wrapped in the *services.Error a provider returns
// when a call to a model server fails.
type ProviderError struct {
	// Provider is the provider name ("openai", "anthropic").
	Provider string
	// StatusCode is the HTTP status, 0 when no response arrived.
	StatusCode int
	// RetryAfter is the delay the server asked for (Retry-After,
	// retry-after-ms), 0 when it asked for none.
	RetryAfter time.Duration
	// Retryable reports whether the same request may succeed later: 408,
	// 409, 429, 5xx, timeouts and connection failures.
	Retryable bool
	// Err is the underlying HTTP, stream or transport error.
	Err error
}

func (e *ProviderError) Error() string {
	return fmt.Sprintf("%s: %s", e.Provider, e.describe())
}

func (e *ProviderError) Unwrap() error { return e.Err }

// describe summarises the failure in a few words for user-facing messages.
func (e *ProviderError) describe() string {
	if e.StatusCode != 0 {
		return fmt.Sprintf("HTTP %d %s", e.StatusCode, http.StatusText(e.StatusCode))
	}
	switch {
	case errors.Is(e.Err, context.DeadlineExceeded):
		return "timed out"
	case errors.Is(e.Err, errStreamTruncated), errors.Is(e.Err, errStreamFailed), errors.Is(e.Err, errBadReply):
		return e.Err.Error()
	}
	// url.Error repeats method and URL; the cause is what the reader needs.
	var ue *url.Error
	if errors.As(e.Err, &ue) {
		return ue.Err.Error()
	}
	return e.Err.Error()
}

var (
	// errStreamTruncated: a stream ended without its final event.
	errStreamTruncated = errors.New("the reply stream ended early")
	// errStreamFailed: the server reported an error in the middle of a stream.
	errStreamFailed = errors.New("the server reported an error mid-stream")
	// errBadReply: a reply arrived but could not be understood.
	errBadReply = errors.New("the reply could not be understood")
)

// statusInfo is what the providers extract from an error response.
type statusInfo struct {
	status  int
	header  http.Header
	message string // the server's error message, if any
}

// providerFailure turns an HTTP, stream or transport error into the *services.Error a
// provider returns. info is nil when no HTTP error response arrived.
func providerFailure(ctx context.Context, provider, model string, err error, info *statusInfo) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		return cancelled(ctx)
	}
	pe := &ProviderError{Provider: provider, Err: err}
	if info == nil {
		pe.Retryable = isTransient(err)
		return &services.Error{Kind: services.EUNAVAILABLE, Code: CodeUnreachable,
			Message: fmt.Sprintf("The %s model %q did not answer: %s.", provider, model, pe.describe()), Err: pe}
	}
	pe.StatusCode = info.status
	pe.RetryAfter = retryAfter(info.header)
	detail := ""
	if m := strings.TrimSpace(info.message); m != "" {
		detail = ": " + truncate(m, 300)
	}
	switch s := info.status; {
	case s == http.StatusRequestTimeout || s == http.StatusConflict || s == http.StatusTooManyRequests || s >= 500:
		pe.Retryable = true
		return &services.Error{Kind: services.EUNAVAILABLE, Code: CodeUnreachable,
			Message: fmt.Sprintf("The %s model %q failed: %s%s.", provider, model, pe.describe(), detail), Err: pe}
	case s == http.StatusUnauthorized || s == http.StatusForbidden:
		return &services.Error{Kind: services.EUNAVAILABLE, Code: CodeAuth,
			Message: fmt.Sprintf("The %s provider refused the API key (%s); check LLM_API_KEY.", provider, pe.describe()), Err: pe}
	case s == http.StatusNotFound:
		return &services.Error{Kind: services.EUNAVAILABLE, Code: CodeRejected,
			Message: fmt.Sprintf("The %s provider has no model %q at this address (%s%s); check LLM_MODEL and LLM_BASE_URL.", provider, model, pe.describe(), detail), Err: pe}
	case s == http.StatusRequestEntityTooLarge:
		return &services.Error{Kind: services.ETOOLARGE, Code: CodeRejected,
			Message: fmt.Sprintf("The %s provider refused the request as too large (%s%s).", provider, pe.describe(), detail), Err: pe}
	default:
		return &services.Error{Kind: services.EINVALID, Code: CodeRejected,
			Message: fmt.Sprintf("The %s provider refused the request (%s%s).", provider, pe.describe(), detail), Err: pe}
	}
}

// cancelled is the error for a call whose context was cancelled or expired.
func cancelled(ctx context.Context) error {
	return &services.Error{Kind: services.EUNAVAILABLE, Code: CodeCancelled,
		Message: "The model call was cancelled.", Err: ctx.Err()}
}

// isTransient reports whether a transport-level error (no HTTP status) may go
// away on a new attempt.
func isTransient(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, errStreamTruncated) || errors.Is(err, errStreamFailed) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	var ue *url.Error
	return errors.As(err, &ue)
}

// retryAfter reads retry-after-ms or Retry-After (seconds or HTTP date).
func retryAfter(h http.Header) time.Duration {
	if h == nil {
		return 0
	}
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := time.Until(t); d > 0 {
			return d
		}
	}
	return 0
}

// toolCall is a call the model made; arguments that are not a JSON object
// become {} with the raw text kept in Malformed, so the history stays
// valid for every provider and the model is told what went wrong.
func toolCall(id, name string, raw []byte) services.ToolCall {
	args, ok := toolArguments(raw)
	if !ok {
		return services.ToolCall{ID: id, Name: name, Arguments: []byte("{}"), Malformed: truncate(strings.ToValidUTF8(string(raw), "\uFFFD"), 300)}
	}
	return services.ToolCall{ID: id, Name: name, Arguments: args}
}

// toolArguments validates raw tool arguments and normalises empty ones to {}.
func toolArguments(raw []byte) ([]byte, bool) {
	trimmed := strings.TrimSpace(string(raw))
	if trimmed == "" {
		return []byte("{}"), true
	}
	if !strings.HasPrefix(trimmed, "{") || !json.Valid([]byte(trimmed)) {
		return nil, false
	}
	return []byte(trimmed), true
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
