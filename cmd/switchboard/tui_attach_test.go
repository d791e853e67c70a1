package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/services/llm/llmtest"
)

// TestTUIAttachInTmux: in tmux, against the real binary, "/attach PATH"
// sends a voice memo; its line shows under the message with the download
// URL, the transcript (from the fake transcription server) appears under it
// live, and the agent answers the transcript.
func TestTUIAttachInTmux(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil && os.Getenv("CI") != "true" {
		t.Skip("tmux not installed")
	}
	bin := buildBinary(t)
	db := migratedDB(t)
	model := llmtest.NewServer(t)
	model.SetTranscribe(func(llmtest.Transcription) llmtest.TranscriptReply {
		return llmtest.TranscriptReply{Text: "water the plants"}
	})
	model.SetDefault(func(r llmtest.Request) llmtest.Reply {
		if strings.Contains(r.LastMessage, `transcript: "water the plants"`) {
			return llmtest.Text("I will remind you to water the plants.")
		}
		return llmtest.Echo(r)
	})
	const token = "tui-attach-owner-token-0123456789"
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	startServeAt(t, bin, db, addr, "WEB_AUTH_TOKEN="+token, "LLM_PROVIDER=openai", "LLM_BASE_URL="+model.OpenAIBaseURL(),
		"LLM_MODEL=gpt-4o-mini", "LLM_API_KEY=sk-test", "TRANSCRIBE_URL="+model.OpenAIBaseURL())
	memo := filepath.Join(t.TempDir(), "memo.ogg")
	if err := os.WriteFile(memo, []byte("OggS a fake voice memo"), 0o600); err != nil {
		t.Fatal(err)
	}
	tm := newTmux(t, 120, 30, fmt.Sprintf("%q tui --url %q --token %q; sleep 600", bin, "http://"+addr, token))
	tm.waitFor("the live status", func(s string) bool { return strings.Contains(statusLine(s), "● live") })
	tm.typeLine("/attach " + filepath.Join(t.TempDir(), "nope.ogg"))
	tm.waitFor("the missing file named", func(s string) bool { return strings.Contains(s, "not attached:") })
	tm.run("send-keys", "-t", "tui", "C-u") // the composer kept the line to fix; clear it
	tm.typeLine("/attach " + memo)
	screen := tm.waitFor("the answer to the transcript", func(s string) bool {
		return strings.Contains(s, "I will remind you to water the plants.") && strings.Contains(s, "“water the plants”")
	})
	if !strings.Contains(screen, "📎 memo.ogg · audio · 22 B · http://"+addr+"/api/attachments/") {
		t.Fatalf("no attachment line:\n%s", screen)
	}
}
