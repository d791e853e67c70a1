package repository_test

import (
	"context"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/repository/dbtest"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/chat"
)

func sampleAttachment() services.Attachment {
	return services.Attachment{Kind: services.AttachVoice, MIMEType: "audio/ogg", Size: 1234, Duration: 4,
		SHA256: strings.Repeat("ab", 32), StorageKey: "uploads/abababababababab.ogg", Name: "voice.ogg"}
}

// TestAttachmentsCommitWithTheirMessageOnce: a post with a file stores the
// message and its attachment together; the same post again (a redelivered
// update) links nothing twice; a transcript is stored once.
func TestAttachmentsCommitWithTheirMessageOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.Store(t)
	c := chat.New(chat.Deps{Store: s}, chat.Config{})
	p := services.PostParams{TimelineScope: "global", Source: services.SourceTelegram, DedupeKey: "tg:1:7",
		Attachments: []services.Attachment{sampleAttachment()}}
	msg, created, err := c.Post(ctx, p)
	if err != nil || !created || msg.Content != "" {
		t.Fatalf("post: %+v %v %v", msg, created, err)
	}
	if _, created, err := c.Post(ctx, p); err != nil || created {
		t.Fatalf("second post: created=%v err=%v", created, err)
	}
	got, err := s.AttachmentsOf(ctx, "global", []int64{msg.ID})
	if err != nil || len(got[msg.ID]) != 1 {
		t.Fatalf("attachments: %+v %v", got, err)
	}
	a := got[msg.ID][0]
	if a.MessageID != msg.ID || a.TimelineScope != "global" || a.Kind != services.AttachVoice || a.Duration != 4 || a.Name != "voice.ogg" {
		t.Fatalf("attachment read back: %+v", a)
	}
	if other, _ := s.AttachmentsOf(ctx, "tg:9", []int64{msg.ID}); len(other) != 0 {
		t.Fatalf("another timeline sees the attachment: %+v", other)
	}
	if err := s.SetTranscription(ctx, a.ID, "hello there"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetTranscription(ctx, a.ID, "something else"); err != nil {
		t.Fatal(err)
	}
	if a, _ = s.GetAttachment(ctx, a.ID); a.Transcription != "hello there" {
		t.Fatalf("transcription: %q", a.Transcription)
	}
	if _, err := s.GetAttachment(ctx, a.ID+100); !services.IsKind(err, services.ENOTFOUND) {
		t.Fatalf("missing attachment: %v", err)
	}
	// A message needs text or a file.
	if _, _, err := c.Post(ctx, services.PostParams{TimelineScope: "global", Source: services.SourceWeb}); !services.IsKind(err, services.EINVALID) {
		t.Fatalf("empty post: %v", err)
	}
}
