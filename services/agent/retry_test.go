package agent_test

import (
	"context"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm/llmtest"
)

// TestRetryAsksTheFailedQuestionAgain: /retry after a failed answer posts
// the question again through the instance's one ChatService, whose turn
// handler is the runtime, so the question gets a run of its own and the
// model's answer.
func TestRetryAsksTheFailedQuestionAgain(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.model.Enqueue(llmtest.Status(500, ""), llmtest.Text("Sunny, at last."))
	q := b.say(t, "what is the weather")
	if !poll(waitLong, func() bool { return b.runOf(t, q.ID).Status == services.RunError }) {
		t.Fatalf("the first answer did not fail: %s", b.runOf(t, q.ID).Status)
	}
	b.say(t, "/retry")
	var page services.TimelinePage
	var err error
	if !poll(waitLong, func() bool {
		page, err = b.chat.Timeline(context.Background(), "global", 0, 0, 50)
		return err != nil || len(page.Messages) > 0 && strings.Contains(page.Messages[len(page.Messages)-1].Content, "Sunny, at last.")
	}) || err != nil {
		t.Fatalf("no answer after /retry (%v): %+v", err, page.Messages)
	}
	reqs := b.model.Requests()
	if len(reqs) != 2 || !strings.Contains(reqs[1].LastMessage, "what is the weather") {
		t.Fatalf("%d model requests; the retried one asked %q", len(reqs), reqs[len(reqs)-1].LastMessage)
	}
}
