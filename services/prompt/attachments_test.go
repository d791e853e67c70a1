package prompt_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm"
	"github.com/switchboard/switchboard/services/llm/llmtest"
	"github.com/switchboard/switchboard/services/prompt"
)

// fixedMedia serves every file as the same bytes.
type fixedMedia struct{ data []byte }

func (f fixedMedia) Save(context.Context, string, services.Upload) (services.Attachment, error) {
	return services.Attachment{}, nil
}
func (f fixedMedia) Read(context.Context, string, string) ([]byte, error) { return f.data, nil }
func (f fixedMedia) MaxBytes() int64                                      { return 1 << 20 }

// TestInputImagesCountAndHistoryKeepsTheLine: the current input's image
// goes to the model with its tokens counted in the input layer; once it is
// history, the prompt carries its line and no bytes.
func TestInputImagesCountAndHistoryKeepsTheLine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.Store(t)
	a := services.Attachment{TimelineScope: "global", Kind: services.AttachImage, MIMEType: "image/jpeg", Size: 5000,
		SHA256: strings.Repeat("0", 64), StorageKey: "uploads/0000000000000000.jpg", Name: "photo.jpg", Width: 1600, Height: 1200}
	// As chat.Post stores it: the message names its files, the row links them.
	photo, _, _ := s.InsertMessage(ctx, services.NewMessage{TimelineScope: "global", Role: "user", Source: "telegram", Content: "look", Visible: true,
		Metadata: services.MessageMeta{Files: []services.FileRef{a.Ref()}}.Encode()})
	a.MessageID = photo.ID
	if _, err := s.InsertAttachment(ctx, a); err != nil {
		t.Fatal(err)
	}
	build := func(images bool, trigger int64) prompt.Prompt {
		m := mustNew(t, prompt.Deps{Store: s, Context: s, Sources: s, Recall: s, Attachments: s, Media: fixedMedia{[]byte("jpeg")}}, prompt.Config{Window: 32000, Images: images})
		p, err := m.Build(ctx, prompt.BuildParams{TimelineScope: "global", ContextScope: "main", TriggerID: trigger})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	inputTokens := func(p prompt.Prompt) int {
		for _, l := range p.Inspection.Layers {
			if l.Layer == prompt.LayerInput {
				return l.Tokens
			}
		}
		return -1
	}
	with, without := build(true, photo.ID), build(false, photo.ID)
	last := with.Request.Messages[len(with.Request.Messages)-1]
	if len(last.Images) != 1 || string(last.Images[0].Data) != "jpeg" || !strings.Contains(last.Content, "saved as uploads/0000000000000000.jpg") {
		t.Fatalf("input with images: %+v", last)
	}
	if d := inputTokens(with) - inputTokens(without); d != a.ImageTokens() || d < 700 {
		t.Fatalf("image tokens counted: %d, want %d", d, a.ImageTokens())
	}
	if l := without.Request.Messages[len(without.Request.Messages)-1]; len(l.Images) != 0 || !strings.Contains(l.Content, "1600×1200") {
		t.Fatalf("input without images: %+v", l)
	}

	next, _, _ := s.InsertMessage(ctx, services.NewMessage{TimelineScope: "global", Role: "user", Source: "telegram", Content: "and now?", Visible: true})
	p := build(true, next.ID)
	var sawLine bool
	for _, m := range p.Request.Messages {
		if len(m.Images) != 0 {
			t.Fatalf("history carries image bytes: %+v", m)
		}
		sawLine = sawLine || strings.Contains(m.Content, "[image photo.jpg")
	}
	if !sawLine {
		t.Fatalf("history lost the photo's line: %+v", p.Request.Messages)
	}
}

// TestCompactionKeepsTheFilesLines: a summarised turn's files are in the
// transcript the summary is written from, so the summary can name them.
func TestCompactionKeepsTheFilesLines(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.Store(t)
	model := llmtest.NewServer(t)
	provider, err := llm.New(llm.Config{Provider: llm.ProviderOpenAI, BaseURL: model.OpenAIBaseURL(), Model: "m", APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		plan := services.Attachment{TimelineScope: "global", Kind: services.AttachDocument,
			MIMEType: "text/plain", Size: 10, SHA256: strings.Repeat("1", 64), StorageKey: "uploads/1111111111111111.txt", Name: "plan.txt"}
		var meta []byte
		if i == 0 { // as chat.Post stores it: the message names its files
			meta = services.MessageMeta{Files: []services.FileRef{plan.Ref()}}.Encode()
		}
		u, _, _ := s.InsertMessage(ctx, services.NewMessage{TimelineScope: "global", Role: "user", Source: "web", Content: "turn " + strconv.Itoa(i), Visible: true,
			Metadata: meta})
		if i == 0 {
			plan.MessageID = u.ID
			if _, err := s.InsertAttachment(ctx, plan); err != nil {
				t.Fatal(err)
			}
		}
		_, _, _ = s.InsertMessage(ctx, services.NewMessage{TimelineScope: "global", Role: "assistant", Source: "agent", Content: "ok", Visible: true,
			Metadata: services.MessageMeta{ReplyTo: u.ID}.Encode()})
	}
	m := mustNew(t, prompt.Deps{Store: s, Context: s, Sources: s, Recall: s, Attachments: s, Summariser: provider}, prompt.Config{Window: 32000, Compaction: prompt.CompactionConfig{KeepTurns: 1}})
	if _, err := m.Compact(ctx, "global", "main", ""); err != nil {
		t.Fatal(err)
	}
	reqs := model.Requests()
	if len(reqs) != 1 || !strings.Contains(string(reqs[0].Body), "[document plan.txt, text/plain, 10 B, saved as uploads/1111111111111111.txt") {
		t.Fatalf("summary request: %d requests %s", len(reqs), reqs[0].Body)
	}
}
