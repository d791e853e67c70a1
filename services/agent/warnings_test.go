package agent_test

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// lockedBuffer is a log sink safe for the app's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestPromptWarningsInContextAndLog: a rules file over its share of the
// budget gets CONTEXT_RULES_OVERBUDGET in the prompt's inspection, which
// /context shows (last and next prompt) and the log records with the run.
func TestPromptWarningsInContextAndLog(t *testing.T) {
	t.Parallel()
	var logs lockedBuffer
	b := setup(t, setupOpts{window: 8000, logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	ws := filepath.Join(b.ws, "global")
	_ = os.MkdirAll(ws, 0o700)
	if err := os.WriteFile(filepath.Join(ws, "RULES.md"), []byte(strings.Repeat("Always cite the source file and line of every claim. ", 120)), 0o600); err != nil {
		t.Fatal(err)
	}
	b.say(t, "hello")
	b.waitVisible(t, 2)
	b.say(t, "/context")
	msgs := b.waitVisible(t, 4)
	reply := msgs[3].Content
	if strings.Count(reply, "Warning CONTEXT_RULES_OVERBUDGET: rules need") != 2 {
		t.Fatalf("/context does not show the warning for the last and the next prompt:\n%s", reply)
	}
	log := logs.String()
	if !strings.Contains(log, `"msg":"prompt warning","code":"CONTEXT_RULES_OVERBUDGET"`) || !strings.Contains(log, `"run_id":`) {
		t.Fatalf("the warning is not logged with its code and run: %s", log)
	}
}
