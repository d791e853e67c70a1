package prompt

import (
	"testing"

	"github.com/switchboard/switchboard/services"
)

// TestHistoryTaint: what a prompt's history says of its taint. A summary
// segment alone taints (the turns it covers are not sent); a row a tainted
// run wrote taints, named by what it is; the current input never does (the
// owner's words), nor do rows that record nothing; an earlier voice note's
// transcript does; the sources are passed on as recorded, not nested.
func TestHistoryTaint(t *testing.T) {
	page := "after reading http://evil.example/page"
	row := func(id int64, role services.Role, meta services.MessageMeta) services.Message {
		return services.Message{ID: id, Role: role, Metadata: meta.Encode(), Meta: meta}
	}
	owner := row(1, services.RoleUser, services.MessageMeta{})
	clean := turn{msgs: []services.Message{owner, row(2, services.RoleAssistant, services.MessageMeta{ReplyTo: 1})}}
	tainted := turn{msgs: []services.Message{row(3, services.RoleUser, services.MessageMeta{}),
		row(4, services.RoleAssistant, services.MessageMeta{ReplyTo: 3, TaintedBy: page})}}
	handoff := turn{msgs: []services.Message{row(7, services.RoleUser, services.MessageMeta{}),
		row(8, services.RoleAssistant, services.MessageMeta{ReplyTo: 7, ToolCalls: []services.ToolCall{{ID: "c1", Name: "delegate"}}}),
		row(9, services.RoleTool, services.MessageMeta{ReplyTo: 7, ToolCallID: "c1", Kind: services.MetaHandoff, TaintedBy: "after reading the handoff of sub-agent r; " + page})}}
	current := turn{msgs: []services.Message{row(5, services.RoleUser, services.MessageMeta{TaintedBy: page})}}
	voice := turn{msgs: []services.Message{row(6, services.RoleUser, services.MessageMeta{})},
		files: []services.Attachment{{Kind: services.AttachVoice, Transcription: "do as I say"}}}

	cases := []struct {
		name      string
		segs      []services.Segment
		turns     []turn
		retrieved string
		todo      string
		want      string
		roots     string
	}{
		{"clean", []services.Segment{{SummaryText: "s"}}, []turn{clean, current}, "", "", "", ""},
		{"summary", []services.Segment{{TaintedBy: page}}, []turn{clean, current}, "", "", "after reading the summary of earlier turns written " + page, page},
		{"answer", nil, []turn{clean, tainted, current}, "", "", "after reading an earlier answer written " + page, page},
		{"retrieved", nil, []turn{clean, current}, page, "", "after reading a retrieved sub-agent handoff written " + page, page},
		{"handoff", nil, []turn{clean, handoff, current}, "", "", "after reading an earlier sub-agent handoff written after reading the handoff of sub-agent r; " + page, "after reading the handoff of sub-agent r; " + page},
		{"todo recap", nil, []turn{clean, current}, "", page, "after reading the todo recap written " + page, page},
		{"answer before todo", nil, []turn{clean, tainted, current}, "", "after reading x", "after reading an earlier answer written " + page, page},
		{"transcript", nil, []turn{voice, current}, "", "", "after reading a voice transcript", "after reading a voice transcript"},
	}
	for _, c := range cases {
		got, roots := historyTaint(c.segs, c.turns, 5, c.retrieved, c.todo)
		if got != c.want || roots != c.roots {
			t.Errorf("%s: got %q (sources %q), want %q (%q)", c.name, got, roots, c.want, c.roots)
		}
	}
}
