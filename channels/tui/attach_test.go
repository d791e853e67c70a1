package tui

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/web/wire"
)

// TestAttachSendsAFileAndShowsItAsALine: "/attach PATH" with text on the
// next line uploads the file to a real server with the text; the message
// shows a line with the file and its download URL; a path that is not
// there is named at once and nothing is sent.
func TestAttachSendsAFileAndShowsItAsALine(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.Schema(t)
	srv := startServer(t, pool, "127.0.0.1:0")
	c := newTestClient(t, srv.URL, testToken)
	path := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(path, []byte("remember milk"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := newTestModel(t, c, wire.Page{}, 120, 30)
	m.opts.ServerURL = srv.URL

	typeText(t, m, "/attach "+filepath.Join(t.TempDir(), "missing.txt"))
	if v := m.View(); !strings.Contains(v, "not attached:") || !strings.Contains(v, "no such file") {
		t.Fatalf("missing file not named:\n%s", v)
	}
	m.ta.Reset()
	m.ta.SetValue("/attach " + path + "\nmy shopping list")
	cmd := m.submit()
	if cmd == nil {
		t.Fatalf("nothing sent; notice %q", m.notice)
	}
	done, ok := cmd().(postDoneMsg)
	if !ok || done.err != nil {
		t.Fatalf("upload: %+v", done)
	}
	m.Update(done)

	page, err := srv.Chat.Timeline(context.Background(), services.DefaultTimeline, 0, 0, 10)
	if err != nil || len(page.Messages) != 1 || page.Messages[0].Content != "my shopping list" || page.Messages[0].Source != "tui" {
		t.Fatalf("stored: %+v %v", page.Messages, err)
	}
	lines := linesWith(m.View(), "📎 notes.txt · document · 13 B · "+srv.URL+"/api/attachments/")
	if len(lines) != 1 {
		t.Fatalf("no attachment line:\n%s", m.View())
	}
}
