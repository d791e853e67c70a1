// Package services holds Switchboard's domain types, the error kinds every layer
// speaks, and the interfaces the services consume (stores, LLM, publisher).
// Implementations live elsewhere and are named after what they depend on
// (repository for pgx, web for echo); cmd wires them together.
package services

import (
	"errors"
	"fmt"
	"net/http"
)

// Error kinds. Transport layers map them to status codes in one place; users
// see Message for every kind except EINTERNAL, which is shown as "Internal error.".
const (
	ECONFLICT     = "conflict"
	EINTERNAL     = "internal"
	EINVALID      = "invalid"
	ENOTFOUND     = "not_found"
	EUNAUTHORIZED = "unauthorized"
	EUNAVAILABLE  = "unavailable"
	ETOOLARGE     = "too_large"
	ERATELIMITED  = "rate_limited"
)

// Error is a domain error: a kind from the list above, an optional machine code
// (such as CONTEXT_INPUT_TOO_LARGE) and a message safe to show to the owner.
type Error struct {
	Kind    string
	Code    string
	Message string
	Err     error // wrapped cause, never shown to users
}

func (e *Error) Error() string {
	s := e.Kind
	if e.Code != "" {
		s += " " + e.Code
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error of the given kind with a formatted message.
func Errorf(kind, format string, args ...any) *Error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// CodedErrorf returns an *Error with a machine code, e.g. CONTEXT_BACKPRESSURE.
func CodedErrorf(kind, code, format string, args ...any) *Error {
	return &Error{Kind: kind, Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorKind returns the kind of err, EINTERNAL for errors that are not *Error,
// and "" for nil.
func ErrorKind(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return EINTERNAL
}

// ErrorCode returns the machine code of err, or "".
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// ErrorMessage returns the user-safe message of err; "Internal error." for
// internal errors so that nothing leaks.
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) && e.Kind != EINTERNAL {
		return e.Message
	}
	return "Internal error."
}

// IsKind reports whether err is an *Error of the given kind.
func IsKind(err error, kind string) bool { return ErrorKind(err) == kind }

// HTTPStatus maps err's kind to the HTTP status of an answer that reports
// it: the one place it is done (the web server and the OpenAI-compatible
// channel both answer with it).
func HTTPStatus(err error) int {
	switch ErrorKind(err) {
	case EINVALID:
		return http.StatusBadRequest
	case ENOTFOUND:
		return http.StatusNotFound
	case ECONFLICT:
		return http.StatusConflict
	case EUNAUTHORIZED:
		return http.StatusUnauthorized
	case ETOOLARGE:
		return http.StatusRequestEntityTooLarge
	case ERATELIMITED:
		return http.StatusTooManyRequests
	case EUNAVAILABLE:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}
