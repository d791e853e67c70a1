package app_test

import (
	"strings"
	"testing"

	"github.com/switchboard/switchboard/app"
	"github.com/switchboard/switchboard/app/apptest"
	"github.com/switchboard/switchboard/services/llm/llmtest"
)

// TestOfflineAnswersStayOutOfPrompts: the offline model's answers (how to
// configure a model) are shown to the owner but never sent to the model
// configured afterwards; the questions themselves are kept.
func TestOfflineAnswersStayOutOfPrompts(t *testing.T) {
	t.Parallel()
	dbURL := apptest.SchemaURL(t)
	offline := apptest.Start(t, apptest.Options{DatabaseURL: dbURL, Configure: func(o *app.Config) {
		o.LLM.Provider = "offline"
		o.Hooks.Turns = nil // the agent answers, with the offline model
	}})
	answer := ask(t, offline, "what can you do?")
	if !strings.Contains(answer, "LLM_PROVIDER") {
		t.Fatalf("offline answer: %q", answer)
	}
	// Its usage is an estimate, and /status says so.
	const estimated = "The offline model calls no provider"
	if status := command(t, offline, "/status"); !strings.Contains(status, estimated) {
		t.Fatalf("/status with the offline model: %q", status)
	}
	offline.Stop()

	model := llmtest.NewServer(t)
	model.Enqueue(llmtest.Text("Now I can answer."))
	online := apptest.Start(t, apptest.Options{DatabaseURL: dbURL, Model: model})
	ask(t, online, "and now?")
	if status := command(t, online, "/status"); strings.Contains(status, estimated) || !strings.Contains(status, "Provider usage") {
		t.Fatalf("/status with a model: %q", status)
	}
	body := string(model.Requests()[0].Body)
	if strings.Contains(body, "LLM_PROVIDER") || !strings.Contains(body, "what can you do?") {
		t.Fatalf("the first real prompt: offline answer present=%v, earlier question present=%v",
			strings.Contains(body, "LLM_PROVIDER"), strings.Contains(body, "what can you do?"))
	}
}
