package prompt

import (
	"context"
	"fmt"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm"
)

// sourceParts is what Build had in hand when it explains a prompt.
type sourceParts struct {
	p                                BuildParams
	base                             string
	rules, settings, retrieved, todo textLayer
	rulesOut                         []bool
	trims                            map[Layer]int
	reasons                          []LayerReport
	segKept                          []services.Segment
	segTrim                          int
	turns                            []turn
	turnTrim                         int
	inputTokens                      int
}

// sources breaks an explained prompt down by source: the system prompt and
// each tool; each rule, setting, retrieved item and todo line, with
// whether it was included and, if not, the layer's reason; the summaries
// and turns of history; the input.
func (m *Manager) sources(s sourceParts) []SourceReport {
	tok := m.opts.Tokenizer
	reason := func(l Layer) string {
		for _, r := range s.reasons {
			if r.Layer == l {
				return r.Reason
			}
		}
		return ""
	}
	out := []SourceReport{{Layer: LayerSystem, Source: "system prompt", Tokens: tok.Count(s.base), Included: true}}
	for _, t := range s.p.Tools {
		out = append(out, SourceReport{Layer: LayerSystem, Source: "tool " + t.Name, Tokens: ToolTokens(tok, t), Included: true})
	}
	for _, l := range []struct {
		layer Layer
		text  textLayer
	}{{LayerRules, s.rules}, {LayerSettings, s.settings}, {LayerRetrieved, s.retrieved}} {
		trim := s.trims[l.layer]
		kept := len(l.text.items) - trim
		if l.text.cuttable && trim == 1 && kept > 0 {
			kept = len(l.text.items) // cut inside: every item went in, the text shortened
		}
		for i, item := range l.text.items {
			r := SourceReport{Layer: l.layer, Source: l.text.sources[i], Tokens: tok.Count(item), Included: i < kept}
			if l.layer == LayerRules && s.rulesOut != nil {
				r.Included = !s.rulesOut[i]
			}
			if !r.Included {
				r.Reason = reason(l.layer)
			}
			out = append(out, r)
		}
	}
	if len(s.segKept) > 0 || s.segTrim > 0 {
		tokens := 0
		for _, seg := range s.segKept {
			tokens += seg.TokenCount + MessageOverhead
		}
		r := SourceReport{Layer: LayerHistory, Source: fmt.Sprintf("summary segments (%d kept, %d left out)", len(s.segKept), s.segTrim), Tokens: tokens, Included: len(s.segKept) > 0}
		if s.segTrim > 0 {
			r.Reason = "oldest segments left out to fit"
		}
		out = append(out, r)
	}
	for i, t := range s.turns {
		if s.p.TriggerID != 0 && i == len(s.turns)-1 {
			break
		}
		out = append(out, SourceReport{Layer: LayerHistory, Source: fmt.Sprintf("turn from message %d (%d messages)", t.msgs[0].ID, len(t.msgs)), Tokens: t.tokens, Included: true})
	}
	if s.turnTrim > 0 {
		out = append(out, SourceReport{Layer: LayerHistory, Source: fmt.Sprintf("%d older turns since the summary cursor", s.turnTrim), Reason: "oldest turns left out to fit"})
	}
	if s.p.TriggerID != 0 {
		out = append(out, SourceReport{Layer: LayerInput, Source: fmt.Sprintf("message %d", s.p.TriggerID), Tokens: s.inputTokens, Included: true})
	}
	if len(s.todo.items) > 0 {
		r := SourceReport{Layer: LayerTodo, Source: s.todo.sources[0], Tokens: s.todo.tokens(tok), Included: s.trims[LayerTodo] < len(s.todo.items)}
		if s.trims[LayerTodo] > 0 {
			r.Reason = fmt.Sprintf("%d lines left out to fit", s.trims[LayerTodo])
		}
		out = append(out, r)
	}
	return out
}

// Preview is the next prompt of a scope as the model would get it, built
// without an input and without calling the model: the explained
// inspection (each layer's text, tokens per layer and per source, what
// was trimmed and why, warnings with their codes) and the request itself.
type Preview struct {
	Inspection
	Request PreviewRequest `json:"request"`
}

// PreviewRequest is a provider-neutral copy of a built request.
type PreviewRequest struct {
	// System is the stable prefix (system prompt, rules, settings);
	// SystemContext the archived summaries sent after it.
	System        string           `json:"system"`
	SystemContext string           `json:"system_context,omitempty"`
	Messages      []PreviewMessage `json:"messages"`
	Tools         []string         `json:"tools"`
}

// PreviewMessage is one message of a previewed request.
type PreviewMessage struct {
	Role       string   `json:"role"`
	Content    string   `json:"content"`
	ToolCalls  []string `json:"tool_calls,omitempty"`
	ToolCallID string   `json:"tool_call_id,omitempty"`
}

// Preview builds the next prompt of p's scope with Explain set and returns
// it with its request; nothing is sent to a model.
func (m *Manager) Preview(ctx context.Context, p BuildParams) (Preview, error) {
	p.Explain = true
	pr, err := m.Build(ctx, p)
	if err != nil {
		return Preview{}, err
	}
	return Preview{Inspection: pr.Inspection, Request: previewRequest(pr.Request)}, nil
}

func previewRequest(r llm.Request) PreviewRequest {
	out := PreviewRequest{System: r.System, SystemContext: r.SystemContext, Messages: []PreviewMessage{}, Tools: []string{}}
	for _, msg := range r.Messages {
		pm := PreviewMessage{Role: string(msg.Role), Content: msg.Content, ToolCallID: msg.ToolCallID}
		for _, c := range msg.ToolCalls {
			pm.ToolCalls = append(pm.ToolCalls, c.Name+" "+string(c.Arguments))
		}
		out.Messages = append(out.Messages, pm)
	}
	for _, t := range r.Tools {
		out.Tools = append(out.Tools, t.Name)
	}
	return out
}
