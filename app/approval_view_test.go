package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/app/apptest"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm/llmtest"
)

// TestApprovalsAreShownWithSecretsMasked: a held call whose arguments hold
// one of the service's secrets (a tainted run's remember of the owner
// token) is shown masked everywhere the owner reads it: GET /api/approvals
// (arguments and the request's text) and the approval the timeline gives
// its notice; the stored row keeps the call as made. A decision naming a
// client that is not one is refused, naming it, and decides nothing.
func TestApprovalsAreShownWithSecretsMasked(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	model := llmtest.NewServer(t)
	in := startHostile(t, model, "")
	ctx := context.Background()
	model.Enqueue(llmtest.Call("fetch_url", `{"url":"`+h.page.URL+`/news"}`),
		llmtest.Call("remember", `{"key":"token","value":"`+apptest.Token+`"}`))
	if _, _, err := in.Chat.Post(ctx, services.PostParams{TimelineScope: services.DefaultTimeline, Source: services.SourceWeb, Content: "read the news"}); err != nil {
		t.Fatal(err)
	}
	var held services.Approval
	waitFor(t, "the held remember", func() bool {
		as, _ := in.Store.ListApprovals(ctx, services.ApprovalQuery{State: services.ApprovalPending})
		if len(as) == 1 {
			held = as[0]
		}
		return len(as) == 1
	})
	if !strings.Contains(string(held.Arguments), apptest.Token) {
		t.Fatalf("the stored call lost its arguments: %s", held.Arguments)
	}
	for _, path := range []string{"/api/approvals?state=pending", "/api/timeline"} {
		req, _ := http.NewRequest("GET", in.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+in.Token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || strings.Contains(string(body), apptest.Token) || !strings.Contains(string(body), "[secret]") {
			t.Fatalf("GET %s: %s %s", path, res.Status, body)
		}
		if path == "/api/timeline" {
			continue
		}
		var list struct{ Approvals []services.Approval }
		if err := json.Unmarshal(body, &list); err != nil || len(list.Approvals) != 1 {
			t.Fatalf("approvals: %s %v", body, err)
		}
		a := list.Approvals[0]
		var args map[string]string
		if err := json.Unmarshal(a.Arguments, &args); err != nil || args["value"] != "[secret]" || !strings.HasPrefix(a.Request, "Approve #") {
			t.Fatalf("the approval as shown: %+v (%v)", a, err)
		}
	}
	req, _ := http.NewRequest("POST", fmt.Sprintf("%s/api/approvals/%d", in.URL, held.ID), strings.NewReader(`{"decision":"approve","source":"telegram"}`))
	req.Header.Set("Authorization", "Bearer "+in.Token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `source \"telegram\"`) {
		t.Fatalf("a decision from an unknown client: %s %s", res.Status, body)
	}
	if got, _ := in.Store.GetApproval(ctx, held.ID); got.State != services.ApprovalPending {
		t.Fatalf("the refused decision decided: %s", got.State)
	}
}
