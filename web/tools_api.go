package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/services"
)

// toolsResponse is GET /api/tools: every tool the main agent has (in the
// owner's conversation) and every configured MCP server.
type toolsResponse struct {
	Tools   []services.ToolInfo       `json:"tools"`
	Servers []services.ToolServerInfo `json:"servers"`
}

func (s *Server) handleTools(c echo.Context) error {
	if s.opts.Tools == nil {
		return services.Errorf(services.EUNAVAILABLE, "the tool list is not available on this server")
	}
	tools, servers := s.opts.Tools.ToolCatalog()
	if tools == nil {
		tools = []services.ToolInfo{}
	}
	if servers == nil {
		servers = []services.ToolServerInfo{}
	}
	return c.JSON(http.StatusOK, toolsResponse{Tools: tools, Servers: servers})
}
