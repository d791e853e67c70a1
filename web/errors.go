package web

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/services"
)

// errorBody is every error response's JSON.
type errorBody struct {
	Error string `json:"error"`
	Code  string `json:"code,omitempty"`
}

// handleError turns any handler error into a response. Internal errors are
// logged and shown as "Internal error." only.
func (s *Server) handleError(c echo.Context, err error) {
	if c.Response().Committed {
		return
	}
	if isAPIPath(c.Request().URL.Path) && s.opts.OpenAI != nil {
		s.opts.OpenAI.Error(c, err)
		return
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		msg := http.StatusText(he.Code)
		if m, ok := he.Message.(string); ok && he.Code < 500 {
			msg = m
		}
		_ = c.JSON(he.Code, errorBody{Error: msg})
		return
	}
	status := services.HTTPStatus(err)
	if status == http.StatusInternalServerError {
		s.log.Error("request failed", "method", c.Request().Method, "path", c.Path(), "err", err)
	}
	if status == http.StatusServiceUnavailable {
		c.Response().Header().Set("Retry-After", "5")
	}
	_ = c.JSON(status, errorBody{Error: services.ErrorMessage(err), Code: services.ErrorCode(err)})
}
