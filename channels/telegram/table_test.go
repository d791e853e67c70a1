package telegram

import (
	"strings"
	"testing"
)

// Tables and task lists reach Telegram as HTML its parser takes: the strict
// Bot API server accepts them and shows the columns aligned, a wide table
// one line per row, and boxes for tasks.
func TestTablesAndTaskListsPassTheStrictParser(t *testing.T) {
	t.Parallel()
	b, srv, store := newStrictBot(t, nil)
	text := "Results:\n\n| Name | Score |\n|:-----|------:|\n| Ann <a> | 31 |\n| Bob & co | 4 |\n\n" +
		"| Product | Description | Price |\n|---|---|---|\n| Widget | A small widget for the kitchen drawer | **$4.99** |\n\n" +
		"- [ ] write the tests\n- [x] read the issue"
	deliverLikeTheQueue(t, b, OutboundPayload{Key: "reply:2", ChatID: 1, ReplyToMessageID: 1, Text: text})
	msgs := srv.Messages(1)
	if len(msgs) != 1 || msgs[0].ParseMode != "HTML" || len(store.notices()) != 0 {
		t.Fatalf("sent %+v, notices %+v", msgs, store.notices())
	}
	want := "Results:\n\n" +
		"Name     │ Score\n─────────┼──────\nAnn <a>  │    31\nBob & co │     4\n\n" +
		"Product · Description · Price\nWidget · A small widget for the kitchen drawer · $4.99\n\n" +
		"☐ write the tests\n☑ read the issue"
	if msgs[0].Text != want {
		t.Fatalf("Telegram shows\n%s\nwant\n%s", msgs[0].Text, want)
	}
	if !strings.Contains(msgs[0].Raw, "<pre>Name") || !strings.Contains(msgs[0].Raw, "<b>Product") {
		t.Fatalf("HTML sent: %s", msgs[0].Raw)
	}
}
