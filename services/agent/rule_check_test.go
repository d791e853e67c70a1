package agent_test

import (
	"strings"
	"testing"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm/llmtest"
)

// TestRuleCheckFlagsTheAnswer: a hard rule added with /rules add --check
// carries its pattern (a bad one is refused with the regexp's complaint);
// an answer the pattern matches is stored as written and followed by one
// system notice naming the rule and what matched; an answer it does not
// match gets none.
func TestRuleCheckFlagsTheAnswer(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.say(t, `/rules add --check "no exclamation marks" '(!'`)
	msgs := b.waitVisible(t, 2)
	if r := msgs[1].Content; !strings.Contains(r, "not a valid regular expression") {
		t.Fatalf("bad pattern's reply: %q", r)
	}
	b.say(t, `/rules add --check "no exclamation marks" '!'`)
	msgs = b.waitVisible(t, 4)
	if r := msgs[3].Content; !strings.Contains(r, "Added rule #") || !strings.Contains(r, "'!'") {
		t.Fatalf("add's reply: %q", r)
	}
	b.model.Enqueue(llmtest.Text("Great news!"), llmtest.Text("Calm news."), llmtest.Text("Wow! Done!"))
	q1 := b.say(t, "how did it go?")
	b.waitVisible(t, 7)
	q2 := b.say(t, "and the other one?")
	b.waitVisible(t, 9)
	q3 := b.say(t, "and the last?")
	msgs = b.waitVisible(t, 12)

	const want = `This answer may break your rule "no exclamation marks" (it contains '!').`
	var flagged []int64
	for i, m := range msgs {
		if m.Source != services.SourceSystem || m.Meta.Notice != services.NoticeRuleCheck {
			continue
		}
		if m.Content != want {
			t.Errorf("notice %q, want %q", m.Content, want)
		}
		if prev := msgs[i-1]; prev.Source != services.SourceAgent || prev.Meta.ReplyTo != m.Meta.ReplyTo {
			t.Errorf("notice not under its answer: after %+v", prev)
		}
		flagged = append(flagged, m.Meta.ReplyTo)
	}
	if len(flagged) != 2 || flagged[0] != q1.ID || flagged[1] != q3.ID {
		t.Fatalf("flagged answers to %v, want %d and %d (not %d)", flagged, q1.ID, q3.ID, q2.ID)
	}
	if msgs[5].Content != "Great news!" {
		t.Fatalf("the answer was changed: %q", msgs[5].Content)
	}
	b.say(t, "/rules")
	msgs = b.waitVisible(t, 14)
	if r := msgs[13].Content; !strings.Contains(r, "no exclamation marks (check '!')") {
		t.Fatalf("/rules: %q", r)
	}
}
