package prompt_test

import (
	"bytes"
	"context"
	"encoding/json"
	"hash/fnv"
	"io/fs"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/prompt"
)

// mapSpace is a workspace of files in memory, and its manifest.
type mapSpace struct {
	files    map[string]string
	manifest string
}

func (w mapSpace) ReadFile(_, path string) ([]byte, error) {
	if path == services.ContextManifestFile && w.manifest != "" {
		return []byte(w.manifest), nil
	}
	s, ok := w.files[path]
	if !ok {
		return nil, &services.Error{Kind: services.ENOTFOUND, Message: "file " + path + " not found", Err: fs.ErrNotExist}
	}
	return []byte(s), nil
}

func (w mapSpace) RootFiles(string) ([]string, error) { return nil, nil }

// FileStamp stamps a file with its size and, for a modification time, a
// hash of its content: a changed file is read again.
func (w mapSpace) FileStamp(_, path string) (int64, time.Time, error) {
	data, err := w.ReadFile("", path)
	if err != nil {
		return 0, time.Time{}, err
	}
	h := fnv.New64a()
	h.Write(data)
	return int64(len(data)), time.Unix(0, int64(h.Sum64()>>1)), nil
}

func (w mapSpace) PinBlock(string, services.Pin) (services.Pin, error) {
	return services.Pin{}, services.Errorf(services.ENOTFOUND, "block ids cannot be read here")
}

func (w mapSpace) ContextManifest(_ context.Context, _ string) (services.ContextManifest, error) {
	if w.manifest == "" {
		return services.ContextManifest{}, nil
	}
	return services.ParseContextManifest([]byte(w.manifest))
}

func (w mapSpace) PutContextManifest(context.Context, string, services.ContextManifest) (services.ContextManifest, error) {
	panic("not used")
}

// TestPinsFitTheRetrievedLayerAndNameWhatDoesNot: pins enter the
// retrieved layer of main prompts in the manifest's order; a pin too large
// for the layer's budget is left out with CONTEXT_PIN_TRIMMED and its
// source says why; a missing file is skipped with CONTEXT_PIN_MISSING; an
// invalid manifest with CONTEXT_MANIFEST_INVALID; the prompt is built
// every time, and a sub-agent's scope gets no pins.
func TestPinsFitTheRetrievedLayerAndNameWhatDoesNot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.Store(t)
	space := mapSpace{files: map[string]string{
		"plan.md": "line one\nline two: deploy on Monday\nline three\n",
		"big.md":  strings.Repeat("a long paragraph of background words ", 2000),
	}, manifest: `{"version":3,"pins":[{"path":"plan.md","lines":[2,2]},{"path":"big.md"},{"path":"gone.md","block":"Intro"}]}`}
	build := func(scope string) prompt.Preview {
		t.Helper()
		m := mustNew(t, prompt.Deps{Store: s, Context: s, Sources: s, Recall: s, Workspace: space, Manifests: space}, prompt.Config{Window: 8000})
		pv, err := m.Preview(ctx, prompt.BuildParams{TimelineScope: "global", ContextScope: scope})
		if err != nil {
			t.Fatal(err)
		}
		return pv
	}
	pv := build(services.MainScope)
	var retrieved prompt.LayerReport
	for _, l := range pv.Layers {
		if l.Layer == prompt.LayerRetrieved {
			retrieved = l
		}
	}
	if !strings.Contains(retrieved.Text, "### pin: plan.md:2-2\nline two: deploy on Monday") || strings.Contains(retrieved.Text, "background words") ||
		retrieved.Trimmed != 1 || retrieved.Reason == "" {
		t.Fatalf("retrieved layer: %+v", retrieved)
	}
	codes := map[string]string{}
	for _, w := range pv.Warnings {
		codes[w.Code] = w.Message
	}
	if !strings.Contains(codes[prompt.CodePinTrimmed], "pin: big.md") || !strings.Contains(codes[prompt.CodePinMissing], "gone.md#Intro") {
		t.Fatalf("warnings: %+v", pv.Warnings)
	}
	var big *prompt.SourceReport
	for i, src := range pv.Sources {
		if src.Source == "pin: big.md" {
			big = &pv.Sources[i]
		}
	}
	if big == nil || big.Included || big.Reason == "" || big.Tokens < retrieved.Budget {
		t.Fatalf("big.md's source: %+v (layer budget %d)", big, retrieved.Budget)
	}
	found := false
	for _, msg := range pv.Request.Messages {
		found = found || strings.Contains(msg.Content, "deploy on Monday")
	}
	if !found {
		t.Fatalf("the request lacks the pin: %+v", pv.Request.Messages)
	}

	if sub := build("sub:researcher:1"); strings.Contains(sub.Request.System+sub.Layers[3].Text, "deploy on Monday") {
		t.Fatal("a sub-agent's scope got the owner's pins")
	}

	space.manifest = `{"version":1,"pins":[{"path":"plan.md","colour":"red"}]}`
	pv = build(services.MainScope)
	if len(pv.Warnings) != 1 || pv.Warnings[0].Code != prompt.CodeManifestInvalid || !strings.Contains(pv.Warnings[0].Message, "colour") {
		t.Fatalf("invalid manifest: %+v", pv.Warnings)
	}
}

// docExample returns the JSON block after "<!-- example: NAME -->" in
// docs/CONTEXT.md.
func docExample(t *testing.T, name string) []byte {
	t.Helper()
	doc, err := os.ReadFile("../../docs/CONTEXT.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "<!-- example: "+name+" -->\n```json\n")
	if !ok {
		t.Fatalf("docs/CONTEXT.md has no example %q", name)
	}
	block, _, ok := strings.Cut(rest, "\n```")
	if !ok {
		t.Fatalf("example %q is not closed", name)
	}
	return []byte(block)
}

// TestContextDocExamplesDecode: the preview and manifest examples of
// docs/CONTEXT.md are what the code reads and writes.
func TestContextDocExamplesDecode(t *testing.T) {
	dec := json.NewDecoder(bytes.NewReader(docExample(t, "context-preview")))
	dec.DisallowUnknownFields()
	var pv prompt.Preview
	if err := dec.Decode(&pv); err != nil {
		t.Fatalf("preview example: %v", err)
	}
	if len(pv.Layers) != len(prompt.Layers()) || len(pv.Sources) == 0 || pv.Warnings[0].Code != prompt.CodePinTrimmed ||
		pv.Request.Messages[2].Role != "user" || pv.Layers[3].Text == "" {
		t.Fatalf("preview example: %+v", pv)
	}
	sum := 0
	for _, l := range pv.Layers {
		sum += l.Tokens
	}
	if sum != pv.TotalTokens {
		t.Fatalf("preview example: layers sum to %d, total_tokens %d", sum, pv.TotalTokens)
	}
	m, err := services.ParseContextManifest(docExample(t, "context-manifest"))
	if err != nil {
		t.Fatalf("manifest example: %v", err)
	}
	if m.Version != 3 || len(m.Pins) != 3 || m.Pins[0].String() != "notes.md#Goals/This week" || m.Pins[1].String() != "plan.md:12-30" {
		t.Fatalf("manifest example: %+v", m)
	}
}
