package app_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/app"
	"github.com/switchboard/switchboard/app/apptest"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm/llmtest"
)

// TestOpenAICompatNodeSDK runs the compatibility suite of the /v1 endpoint
// with the official `openai` npm package (scripts/testdeps/openai-compat.js)
// against the whole app on the fake model server: models list/retrieve,
// non-streaming and streaming answers with usage, an unknown model, refused
// fields, an oversize body, model failures (before and during a stream),
// response_format json_schema and an image. Every error must parse as the
// SDK's error class for it. Afterwards the model's side is checked: the
// image and the request's settings reached it.
func TestOpenAICompatNodeSDK(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the OpenAI SDK compatibility suite needs it (scripts/test.sh installs it)")
	}
	dir := testdeps(t)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "openai", "package.json")); err != nil {
		t.Fatalf("the openai npm package is missing in %s: run scripts/test.sh (or npm ci there)", dir)
	}

	model := llmtest.NewServer(t)
	model.SetDefault(func(r llmtest.Request) llmtest.Reply {
		switch r.LastMessage {
		case "FAIL 500":
			return llmtest.Status(500, "")
		case "FAIL 429":
			return llmtest.Status(429, "3")
		case "CUT":
			// Two words arrive (each its own delta event), then the
			// connection breaks: the agent does not retry a started answer.
			return llmtest.Reply{Text: "a partial answer that breaks off", CutAfter: 2, FragmentDelay: 80 * time.Millisecond}
		case "NOT JSON":
			return llmtest.Text("Sure! Here is your plan: go to Paris.")
		case "SLOW STORY":
			// Many words slowly: the client aborts after a few.
			return llmtest.Reply{Text: strings.Repeat("word ", 400) + "THE-END", FragmentDelay: 50 * time.Millisecond}
		}
		return llmtest.Echo(r)
	})
	in := apptest.Start(t, apptest.Options{Model: model, Configure: func(o *app.Config) {
		o.Agent.PassImages, o.Context.Images, o.OpenAI.ModelReadsImages = true, true, true // the model reads images (LLM_IMAGES=1)
	}})
	imageURL := pngDataURL(t)

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test-reporter=spec", filepath.Join(dir, "openai-compat.js"))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SB_BASE_URL="+in.URL+"/v1", "SB_TOKEN="+in.Token, "SB_IMAGE="+imageURL, "NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	t.Logf("node %s:\n%s", filepath.Base(cmd.Args[2]), out)
	if err != nil {
		t.Fatalf("the compatibility suite failed: %v", err)
	}
	if !strings.Contains(string(out), "image input") || !strings.Contains(string(out), "pass 14") {
		t.Fatalf("the suite did not run its 14 cases")
	}
	// The aborted stream's run was stopped, not run to its end: cancelled,
	// its partial answer kept as on /stop, never the whole text.
	var aborted services.Run
	var listErr error
	ended := pollEvery(30*time.Second, 100*time.Millisecond, func() bool {
		runs, err := in.Store.ListRuns(context.Background(), services.RunQuery{TimelineScope: services.DefaultTimeline, Limit: 100})
		if err != nil {
			listErr = err
			return true
		}
		for _, r := range runs {
			if m, err := in.Store.GetMessage(context.Background(), r.TriggerMessageID); err == nil && strings.Contains(m.Content, "SLOW STORY") {
				aborted = r
			}
		}
		return aborted.Status != "" && aborted.Status != services.RunRunning && aborted.Status != services.RunQueued
	})
	if listErr != nil {
		t.Fatal(listErr)
	}
	if !ended {
		t.Fatalf("the aborted stream's run: %+v", aborted)
	}
	if aborted.Status != services.RunCancelled {
		t.Fatalf("the aborted stream's run ended %s, want cancelled", aborted.Status)
	}

	// The model's side: the image arrived as an image part, the settings
	// and the system message with their request only.
	var sawImage, sawSettings bool
	for _, r := range model.Requests() {
		// A message's stored images are named after its text.
		first, _, _ := strings.Cut(r.LastMessage, "\n")
		switch first {
		case "what is in this image?":
			sawImage = len(r.LastImages) == 1 && r.LastImages[0] == imageURL
		case "settings check":
			m := r.JSON(t)
			msgs, _ := m["messages"].([]any)
			sys, _ := msgs[0].(map[string]any)
			content, _ := sys["content"].(string)
			sawSettings = m["max_tokens"] == float64(33) && m["temperature"] == 0.5 && len(r.Stop) == 1 && r.Stop[0] == "ZZZ" &&
				strings.Contains(content, "Be terse.")
		case "hello from node":
			_, maxTokens := r.JSON(t)["max_tokens"]
			if strings.Contains(string(r.Body), "Be terse.") || maxTokens || len(r.Stop) > 0 {
				t.Errorf("a request without settings got some: %s", r.Body)
			}
		}
	}
	if !sawImage || !sawSettings {
		t.Fatalf("model side: image %v, settings %v", sawImage, sawSettings)
	}
	// Refused requests stored nothing; failed turns left their notices.
	msgs, err := in.Store.ListTimeline(context.Background(), services.TimelineQuery{TimelineScope: services.DefaultTimeline, BeforeID: 1<<63 - 1, Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if m.Role == services.RoleUser && (strings.Contains(m.Content, "refuse me") || strings.Contains(m.Content, "bad schema") ||
			strings.HasPrefix(m.Content, "xxxx")) {
			t.Errorf("a refused request was stored: %.80q", m.Content)
		}
	}
}

// testdeps is scripts/testdeps of this module.
func testdeps(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "scripts", "testdeps")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = parent
	}
}

// pngDataURL is a small real PNG as a data URL.
func pngDataURL(t *testing.T) string {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 8, 6))
	img.Set(2, 3, color.RGBA{G: 200, A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(b.Bytes())
}
