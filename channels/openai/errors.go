package openai

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/services"
)

// apiFail is a refusal in OpenAI's error shape: the status, the code, the
// parameter it is about (param) and what to do.
type apiFail struct {
	status int
	code   string
	param  string
	msg    string
	// retryAfter, when positive, is sent as Retry-After (seconds).
	retryAfter int
}

func (e *apiFail) Error() string { return e.msg }

// body is the refusal's JSON.
func (e *apiFail) body() ErrorBody { return errorBody(e.status, e.code, e.param, e.msg) }

// errorType is OpenAI's error type for a status.
func errorType(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusForbidden:
		return "permission_error"
	case status == http.StatusNotFound:
		return "not_found_error"
	case status == http.StatusConflict:
		return "conflict_error"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

// errorCode is the code of an error that names none: one per status, so
// that every /v1 error carries a code a client can switch on.
func errorCode(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request"
	case http.StatusUnauthorized:
		return "invalid_api_key"
	case http.StatusForbidden:
		return "permission_denied"
	case http.StatusNotFound:
		return "not_found"
	case http.StatusConflict:
		return "conflict"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_exceeded"
	case http.StatusServiceUnavailable:
		return "service_unavailable"
	case http.StatusGatewayTimeout:
		return "timeout"
	}
	if status >= 500 {
		return "server_error"
	}
	return "invalid_request"
}

// errorBody is OpenAI's error shape; an empty param is null, an empty code
// is the status's (errorCode).
func errorBody(status int, code, param, msg string) ErrorBody {
	d := ErrorDetail{Message: msg, Type: errorType(status)}
	if code == "" {
		code = errorCode(status)
	}
	d.Code = &code
	if param != "" {
		d.Param = &param
	}
	return ErrorBody{Error: d}
}

// fail answers any error of a handler in OpenAI's shape: an *apiFail as it
// is, a domain error with the status of its kind (internal errors are
// logged and shown as "Internal error." only).
func (ch *Channel) fail(c echo.Context, err error) error {
	var f *apiFail
	if errors.As(err, &f) {
		if f.retryAfter > 0 {
			c.Response().Header().Set("Retry-After", strconv.Itoa(f.retryAfter))
		}
		return c.JSON(f.status, f.body())
	}
	status := services.HTTPStatus(err)
	if status == http.StatusInternalServerError {
		ch.log.Error("api request failed", "path", c.Path(), "err", err)
	}
	if status == http.StatusServiceUnavailable {
		c.Response().Header().Set("Retry-After", "5")
	}
	code := services.ErrorCode(err)
	if code == "" && services.IsKind(err, services.ETOOLARGE) {
		code = "message_too_long" // the text is over the message limit
	}
	return c.JSON(status, errorBody(status, code, "", services.ErrorMessage(err)))
}

// Error answers, in OpenAI's shape, an error raised under /v1 before or
// around a handler: the router's (unknown route, wrong method), a
// middleware's (oversize body, rate limit, authentication) or a handler's.
// The web server's error handler calls it for every /v1 path.
func (ch *Channel) Error(c echo.Context, err error) {
	r := c.Request()
	var he *echo.HTTPError
	if !errors.As(err, &he) {
		_ = ch.fail(c, err)
		return
	}
	switch he.Code {
	case http.StatusNotFound:
		_ = ch.fail(c, &apiFail{status: http.StatusNotFound, code: "unknown_url",
			msg: "unknown URL: " + r.Method + " " + r.URL.Path + "; this endpoint serves GET /v1/models, GET /v1/models/{id} and POST /v1/chat/completions"})
	case http.StatusMethodNotAllowed:
		allowed := "POST"
		if strings.HasPrefix(r.URL.Path, "/v1/models") {
			allowed = "GET"
		}
		_ = ch.fail(c, &apiFail{status: http.StatusMethodNotAllowed, code: "method_not_allowed",
			msg: "method " + r.Method + " is not allowed on " + r.URL.Path + "; use " + allowed})
	case http.StatusRequestEntityTooLarge:
		_ = ch.fail(c, tooLarge())
	default:
		msg := http.StatusText(he.Code)
		if m, ok := he.Message.(string); ok && he.Code < 500 {
			msg = m
		}
		_ = c.JSON(he.Code, errorBody(he.Code, "", "", msg))
	}
}
