package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/tools"
)

// maxShownResult is how much of a tool's result the owner's page shows at
// once (the model read all of it; the page says how much more there is).
const maxShownResult = 8 << 10

var _ services.ToolResults = (*Service)(nil)

// ToolResult is the result of tool call callID of run runID as the owner's
// page shows it: the text the model read with the service's secrets masked
// (again, at read time, like approvals: a secret added since is masked
// too), cut at maxShownResult bytes on a character boundary, and the images
// the tool returned.
func (s *Service) ToolResult(ctx context.Context, timeline string, runID int64, callID string) (services.ToolResultView, error) {
	m, err := s.opts.Store.ToolResultMessage(ctx, timeline, runID, callID)
	if err != nil {
		return services.ToolResultView{}, err
	}
	meta := m.Meta
	text := s.opts.Secrets.Mask(m.Content)
	if t := strings.TrimSpace(text); strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[") {
		// JSON indented, so a cut one still reads line by line.
		var b bytes.Buffer
		if json.Indent(&b, []byte(t), "", "  ") == nil {
			text = b.String()
		}
	}
	v := services.ToolResultView{RunID: runID, CallID: callID, Tool: meta.ToolName, IsError: meta.IsError, Content: text, Chars: utf8.RuneCountInString(text)}
	if len(text) > maxShownResult {
		cut := maxShownResult
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		// End on a line when one ends near the cut.
		if nl := strings.LastIndexByte(text[:cut], '\n'); nl > cut*3/4 {
			cut = nl
		}
		v.Content, v.Truncated = text[:cut], true
	}
	files, err := s.opts.Store.AttachmentsOf(ctx, timeline, []int64{m.ID})
	if err != nil {
		return services.ToolResultView{}, err
	}
	for _, a := range files[m.ID] {
		if a.Kind == services.AttachImage {
			v.Images = append(v.Images, a)
		}
	}
	return v, nil
}

// saveResultImages keeps the images a tool returned (an MCP screenshot) with
// the result's row msgID, in the timeline's workspace, so the owner's page
// can show them; without Media nothing is kept. An image the workspace
// refuses (its bound) is logged, not the run's failure: the model got it.
func (s *Service) saveResultImages(ctx context.Context, st services.Store, timeline string, msgID int64, call services.ToolCall, res tools.Result) error {
	if s.opts.Media == nil {
		return nil
	}
	for i, img := range res.Images {
		ext := strings.TrimPrefix(img.MIMEType, "image/")
		a, err := s.opts.Media.Save(ctx, timeline, services.Upload{Name: fmt.Sprintf("%s-%d.%s", call.Name, i+1, ext),
			MIMEType: img.MIMEType, Kind: services.AttachImage, Data: img.Data})
		if err != nil {
			s.log.Warn("a tool's image is not kept for the page", "tool", call.Name, "call", call.ID, "err", err)
			continue
		}
		a.MessageID, a.TimelineScope = msgID, timeline
		if _, err := st.InsertAttachment(ctx, a); err != nil {
			return err
		}
	}
	return nil
}
