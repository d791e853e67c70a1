package app_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/app"
	"github.com/switchboard/switchboard/app/apptest"
	"github.com/switchboard/switchboard/services/llm/llmtest"
)

// TestFetchURLInAConversation: the model fetches a local page the operator
// allowed and reads it as Markdown; without the allow list the same call
// is refused as an internal address, and the model is told so.
func TestFetchURLInAConversation(t *testing.T) {
	t.Parallel()
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<html><head><title>Box office</title></head><body><h2>Status</h2><p><b>Tickets available</b> now.</p></body></html>`)
	}))
	t.Cleanup(page.Close)
	for _, allow := range []bool{true, false} {
		model := llmtest.NewServer(t)
		in := apptest.Start(t, apptest.Options{Model: model, Configure: func(o *app.Config) {
			if allow {
				o.Fetch.Allow = []string{"127.0.0.1"}
			}
		}})
		model.Enqueue(llmtest.Call("fetch_url", `{"url":"`+page.URL+`/tickets"}`), llmtest.Text("Checked."))
		ask(t, in, "are there tickets?")
		waitFor(t, "the model's second call", func() bool { return model.RequestCount() >= 2 })
		got := model.Requests()[1].LastMessage
		if allow && (!strings.Contains(got, "## Status") || !strings.Contains(got, "**Tickets available**") || !strings.Contains(got, `"title":"Box office"`)) {
			t.Fatalf("allowed page, the model got: %s", got)
		}
		if !allow && (!strings.Contains(got, "FETCH_REFUSED") || !strings.Contains(got, "loopback")) {
			t.Fatalf("internal page without the allow list, the model got: %s", got)
		}
		// Stopped (its pool closed) before the next starts: the test
		// holds one instance's connections, not two (it held 15).
		in.Stop()
	}
}
