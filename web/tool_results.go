package web

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/web/wire"
)

// registerToolResultRoutes adds GET /api/runs/:run/tools/:call: what one
// tool call of the owner's run returned, for the page's tool lines.
func (s *Server) registerToolResultRoutes(api *echo.Group) {
	api.GET("/runs/:run/tools/:call", s.handleToolResult)
}

// handleToolResult answers a tool call's result (wire.ToolResult): its
// text with secrets masked, cut for a page, and its images as attachment
// URLs. Another timeline's runs are not found.
func (s *Server) handleToolResult(c echo.Context) error {
	if s.opts.ToolResults == nil {
		return services.Errorf(services.EUNAVAILABLE, "tool results are not available on this server")
	}
	run, err := strconv.ParseInt(c.Param("run"), 10, 64)
	if err != nil || run <= 0 {
		return services.Errorf(services.EINVALID, "run id %q: want a positive number", c.Param("run"))
	}
	call := c.Param("call")
	if call == "" || len(call) > 256 {
		return services.Errorf(services.EINVALID, "tool call id: want 1 to 256 characters")
	}
	v, err := s.opts.ToolResults.ToolResult(c.Request().Context(), s.opts.OwnerTimeline, run, call)
	if err != nil {
		return err
	}
	out := wire.ToolResult{RunID: v.RunID, CallID: v.CallID, Tool: v.Tool, IsError: v.IsError, Content: v.Content,
		Chars: v.Chars, Truncated: v.Truncated, Images: []wire.Attachment{}}
	for _, a := range v.Images {
		out.Images = append(out.Images, wire.Attachment{ID: a.ID, Kind: string(a.Kind), Name: a.DisplayName(),
			MIMEType: a.MIMEType, Size: a.Size, Width: a.Width, Height: a.Height, Path: a.StorageKey,
			URL: "/api/attachments/" + strconv.FormatInt(a.ID, 10)})
	}
	return c.JSON(http.StatusOK, out)
}
