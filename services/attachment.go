package services

import (
	"context"
	"fmt"
	"path"
	"strings"
	"time"
)

// UploadsDir is the workspace directory attachments are stored in: text
// someone else wrote, untrusted however a run reads it (a tool, a
// reference in a message, a pin).
const UploadsDir = "uploads"

// IsUpload reports whether p, a path relative to a workspace's root, names
// a file under UploadsDir, however it is spelled ("./uploads/x",
// ".//uploads/x"; "\\" as "/").
func IsUpload(p string) bool {
	p = path.Clean("/" + strings.ReplaceAll(p, "\\", "/"))
	return strings.HasPrefix(p, "/"+UploadsDir+"/")
}

// AttachmentKind is what an attachment is, as the agent and the pages treat it.
type AttachmentKind string

// Attachment kinds.
const (
	// AttachImage is a picture: an image part for a model that reads
	// images, otherwise a description with its size and path.
	AttachImage AttachmentKind = "image"
	// AttachDocument is any other file, read with the workspace tools.
	AttachDocument AttachmentKind = "document"
	// AttachVoice is a voice note and AttachAudio an audio file: both are
	// transcribed when a transcription service is configured.
	AttachVoice AttachmentKind = "voice"
	AttachAudio AttachmentKind = "audio"
	// AttachVideo is a video (a Telegram video note).
	AttachVideo AttachmentKind = "video"
)

// Transcribable reports whether the kind is speech to transcribe.
func (k AttachmentKind) Transcribable() bool { return k == AttachVoice || k == AttachAudio }

// Attachment is one file that came with a message (a row of attachments)
// or that the agent sent (send_file). Its bytes live in the timeline's
// workspace at StorageKey (uploads/<hash>.<ext>): the file tools read it
// there, and equal bytes are stored once.
type Attachment struct {
	ID            int64
	MessageID     int64
	TimelineScope string
	Kind          AttachmentKind
	MIMEType      string
	Size          int64
	// SHA256 is the hex digest of the bytes.
	SHA256 string
	// StorageKey is the path in the timeline's workspace.
	StorageKey string
	// Name is the file's original name ("" when the channel gave none).
	Name string
	// Width and Height are an image's pixels (0 when unknown); Duration is
	// a voice note's, audio's or video's length in seconds.
	Width, Height, Duration int
	// Transcription is a voice note's or audio's text ("" until transcribed).
	Transcription string
	CreatedAt     time.Time
}

// DisplayName is the name to show: the original name, or the stored file's.
func (a Attachment) DisplayName() string {
	if a.Name != "" {
		return a.Name
	}
	return a.StorageKey[strings.LastIndex(a.StorageKey, "/")+1:]
}

// Describe is the line a prompt carries for the attachment: what it is and
// where the file tools find it ("[image photo.jpg, image/jpeg, 1280×960,
// 245 KB, saved as uploads/3f2a….jpg]"), with a voice note's transcript.
func (a Attachment) Describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "[%s %s, %s", a.kindWord(), a.DisplayName(), a.MIMEType)
	if a.Width > 0 && a.Height > 0 {
		fmt.Fprintf(&b, ", %d×%d", a.Width, a.Height)
	}
	if a.Duration > 0 {
		fmt.Fprintf(&b, ", %d:%02d", a.Duration/60, a.Duration%60)
	}
	fmt.Fprintf(&b, ", %s, saved as %s", HumanBytes(a.Size), a.StorageKey)
	switch {
	case a.Kind.Transcribable() && a.Transcription != "":
		fmt.Fprintf(&b, "; transcript: %q", a.Transcription)
	case a.Kind.Transcribable():
		b.WriteString("; not transcribed")
	case a.Kind == AttachDocument:
		b.WriteString("; read it with read_file")
	}
	b.WriteString("]")
	return b.String()
}

func (a Attachment) kindWord() string {
	if a.Kind == AttachVoice {
		return "voice note"
	}
	return string(a.Kind)
}

// HumanBytes writes n as "512 B", "245 KB", "1.2 MB".
func HumanBytes(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%d KB", (n+1<<9)>>10)
	case n*10%(1<<20) == 0 || n >= 100<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	default:
		// Two decimals when one would round: a file just over a limit
		// reads larger than it ("20.03 MB", the limit "20.0 MB").
		return fmt.Sprintf("%.2f MB", float64(n)/(1<<20))
	}
}

// Upload is a file a channel received, before it is stored.
type Upload struct {
	// Name is the original file name ("" when none: one is made up).
	Name string
	// MIMEType is what the sender said ("" or generic: sniffed).
	MIMEType string
	// Kind, when set, is what the channel knows the file is (a Telegram
	// voice note); empty: decided from the MIME type.
	Kind     AttachmentKind
	Data     []byte
	Duration int
}

// Media stores attachments' bytes in the timelines' workspaces.
type Media interface {
	// Save stores u's bytes in timeline's workspace (once per content) and
	// returns the attachment to link to a message (ID and MessageID unset).
	// Errors: ETOOLARGE over MaxBytes or the workspace's bound, EINVALID
	// for an empty file.
	Save(ctx context.Context, timeline string, u Upload) (Attachment, error)
	// Read returns a stored file's bytes.
	Read(ctx context.Context, timeline, key string) ([]byte, error)
	// MaxBytes is the largest file accepted (MEDIA_MAX_BYTES).
	MaxBytes() int64
}

// AttachmentStore keeps the attachments table.
type AttachmentStore interface {
	// InsertAttachment links a saved attachment to its message.
	InsertAttachment(ctx context.Context, a Attachment) (Attachment, error)
	// AttachmentsOf returns the attachments of messages of timeline, by
	// message id, each list in insertion order.
	AttachmentsOf(ctx context.Context, timeline string, messageIDs []int64) (map[int64][]Attachment, error)
	// GetAttachment returns one attachment; ENOTFOUND when absent.
	GetAttachment(ctx context.Context, id int64) (Attachment, error)
	// SetTranscription stores a voice note's transcript (once: a second
	// call keeps the first).
	SetTranscription(ctx context.Context, id int64, text string) error
}

// Transcriber turns speech into text (an OpenAI-compatible
// /v1/audio/transcriptions endpoint).
type Transcriber interface {
	Transcribe(ctx context.Context, name, mimeType string, data []byte) (string, error)
}

// Speaker turns text into speech (an OpenAI-compatible /v1/audio/speech
// endpoint): OGG/Opus bytes, what a Telegram voice note is.
type Speaker interface {
	Speak(ctx context.Context, text string) ([]byte, error)
}

// VoiceReplies keeps, per channel and chat, whether a voice question is
// answered with a voice note as well as the text (/voice on|off).
type VoiceReplies interface {
	// VoiceRepliesOn reports the chat's setting; true when it was never
	// set (the default: on).
	VoiceRepliesOn(ctx context.Context, channel Source, chatID int64) (bool, error)
	// SetVoiceReplies records the chat's setting.
	SetVoiceReplies(ctx context.Context, channel Source, chatID int64, on bool) error
}

// ImageTokens estimates what an image costs in a prompt, by the larger of
// the two providers' published rules: OpenAI (high detail) scales it into
// 2048×2048, then its short side to 768, and counts 170 per 512-pixel tile
// plus 85; Anthropic scales its long side to 1568 and counts
// width×height/750. An image of unknown size counts as 1024×1024.
func (a Attachment) ImageTokens() int {
	w, h := float64(a.Width), float64(a.Height)
	if w <= 0 || h <= 0 {
		w, h = 1024, 1024
	}
	scale := func(w, h, limit float64) (float64, float64) {
		if m := max(w, h); m > limit {
			return w * limit / m, h * limit / m
		}
		return w, h
	}
	ow, oh := scale(w, h, 2048)
	if s := min(ow, oh); s > 768 {
		ow, oh = ow*768/s, oh*768/s
	}
	tiles := int((ow+511)/512) * int((oh+511)/512)
	openai := 85 + 170*tiles
	aw, ah := scale(w, h, 1568)
	anthropic := int(aw * ah / 750)
	return max(openai, anthropic)
}
