package app_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/app"
	"github.com/switchboard/switchboard/app/apptest"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm/llmtest"
)

// TestExecInAConversation: the model runs a command in the sandbox, its
// output and the file it wrote reach the model (read_file sees the file),
// /tools lists exec with its limits and /status says it is sandboxed.
func TestExecInAConversation(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bwrap is not installed (apt-get install bubblewrap; scripts/test.sh installs it): exec cannot be tested")
	}
	model := llmtest.NewServer(t)
	in := apptest.Start(t, apptest.Options{Model: model, Configure: func(o *app.Config) {
		o.Exec.Enabled, o.Exec.Timeout = true, 30*time.Second
	}})
	model.Enqueue(llmtest.Call("exec", `{"command":"echo $((6*7)) > answer.txt; cat answer.txt"}`),
		llmtest.Call("read_file", `{"path":"answer.txt"}`), llmtest.Text("It is 42."))
	if got := ask(t, in, "what is six times seven? compute it"); got != "It is 42." {
		t.Fatalf("answer: %q", got)
	}
	reqs := model.Requests()
	if len(reqs) < 3 || !strings.Contains(reqs[1].LastMessage, `"stdout":"42\n"`) || !strings.Contains(reqs[1].LastMessage, `"change":"created"`) {
		t.Fatalf("the exec result the model got: %+v", reqs)
	}
	if !strings.Contains(reqs[2].LastMessage, `"content":"42\n"`) {
		t.Fatalf("read_file after exec: %s", reqs[2].LastMessage)
	}
	if got := ask(t, in, "/tools"); !strings.Contains(got, "exec runs in a sandbox: 30s wall time") || !strings.Contains(got, "no network") {
		t.Fatalf("/tools: %s", got)
	}
	if got := ask(t, in, "/status"); !strings.Contains(got, "Exec: sandboxed (bwrap)") {
		t.Fatalf("/status: %s", got)
	}
}

// TestExecNotOfferedWithoutSandbox: without a working bwrap the tool is not
// offered (never run unsandboxed) and /status says why.
func TestExecNotOfferedWithoutSandbox(t *testing.T) {
	t.Parallel()
	model := llmtest.NewServer(t)
	in := apptest.Start(t, apptest.Options{Model: model, Configure: func(o *app.Config) {
		o.Exec.Enabled, o.Exec.Bwrap = true, "/nonexistent/bwrap"
	}})
	if got := ask(t, in, "/status"); !strings.Contains(got, "Exec: not offered, the sandbox does not work: bwrap (Debian package bubblewrap) is not installed") {
		t.Fatalf("/status: %s", got)
	}
	if got := ask(t, in, "/tools"); strings.Contains(got, "exec") {
		t.Fatalf("/tools offers exec without a sandbox: %s", got)
	}
	if _, ok := in.App.Registry().Get("exec"); ok {
		t.Fatal("exec is registered without a sandbox")
	}
}

// TestTaintedExecWaitsForApproval: after the run read a stranger's page,
// an exec the page asked for is held for the owner's approval (it does not
// run); approved, it runs once in the sandbox.
func TestTaintedExecWaitsForApproval(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bwrap is not installed (apt-get install bubblewrap; scripts/test.sh installs it): exec cannot be tested")
	}
	h := newHostile(t)
	model := llmtest.NewServer(t)
	in := apptest.Start(t, apptest.Options{Model: model, Configure: func(o *app.Config) {
		o.Exec.Enabled, o.Exec.Timeout = true, 30*time.Second
		o.Fetch.Allow = []string{"127.0.0.1"}
	}})
	ctx := context.Background()
	model.Enqueue(llmtest.Call("fetch_url", `{"url":"`+h.page.URL+`/news"}`),
		llmtest.Call("exec", `{"command":"echo ran >> runs.log"}`))
	if _, _, err := in.Chat.Post(ctx, services.PostParams{TimelineScope: services.DefaultTimeline, Source: services.SourceWeb, Content: "read the news"}); err != nil {
		t.Fatal(err)
	}
	var a services.Approval
	waitFor(t, "the exec held for approval", func() bool {
		as, _ := in.Store.ListApprovals(ctx, services.ApprovalQuery{State: services.ApprovalPending})
		if len(as) == 1 {
			a = as[0]
		}
		return len(as) == 1
	})
	if a.Tool != "exec" || a.Effect != services.EffectExec || !strings.Contains(a.TaintedBy, h.page.URL) {
		t.Fatalf("approval: %+v", a)
	}
	if n := model.RequestCount(); n != 2 {
		t.Fatalf("%d model requests while the exec waits, want 2", n)
	}
	// Approved, it runs once; the model reads what it wrote.
	model.Enqueue(llmtest.Call("read_file", `{"path":"runs.log"}`), llmtest.Text("done"))
	if _, err := in.App.Agent().DecideApproval(ctx, a.ID, true, "web"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the approved exec", func() bool {
		got, _ := in.Store.GetApproval(ctx, a.ID)
		return got.State == services.ApprovalExecuted && model.RequestCount() >= 4
	})
	reqs := model.Requests()
	if last := reqs[len(reqs)-1].LastMessage; !strings.Contains(last, `"content":"ran\n"`) {
		t.Fatalf("runs.log after approval: %s", last)
	}
}
