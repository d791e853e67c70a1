package agent

import (
	"context"
	"strings"

	"github.com/switchboard/switchboard/services"
)

// transcribe stores the transcript of each voice note and audio file of
// the run's message that has none yet, so the prompt (and the pages) carry
// its text. A transcript is stored once; a failure is logged and the
// prompt says the file was not transcribed.
func (s *Service) transcribe(ctx context.Context, run services.Run, trigger services.Message) {
	if s.opts.Transcriber == nil || s.opts.Media == nil {
		return
	}
	files, err := s.opts.Store.AttachmentsOf(ctx, run.TimelineScope, []int64{trigger.ID})
	if err != nil {
		s.log.Warn("read attachments to transcribe", "run_id", run.ID, "err", err)
		return
	}
	for _, f := range files[trigger.ID] {
		if !f.Kind.Transcribable() || f.Transcription != "" {
			continue
		}
		data, err := s.opts.Media.Read(ctx, run.TimelineScope, f.StorageKey)
		if err == nil {
			var text string
			if text, err = s.opts.Transcriber.Transcribe(ctx, f.DisplayName(), f.MIMEType, data); err == nil && text != "" {
				err = s.opts.Store.SetTranscription(ctx, f.ID, strings.ToValidUTF8(strings.ReplaceAll(text, "\x00", ""), ""))
			}
		}
		if err != nil {
			s.log.Warn("transcription failed", "run_id", run.ID, "attachment_id", f.ID, "err", err)
			continue
		}
		if s.opts.Publisher != nil {
			_ = s.opts.Publisher.Publish(ctx, services.Event{Type: services.EventTranscript, TimelineScope: run.TimelineScope, ID: trigger.ID})
		}
	}
}
