package telegram

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/switchboard/switchboard/services"
)

// MaxDownloadBytes is the Bot API's bound on a file a bot may download
// with getFile (20 MB).
const MaxDownloadBytes = 20 << 20

// inboundFile is the file of a message that the channel stores.
type inboundFile struct {
	id       string
	name     string
	mimeType string
	kind     services.AttachmentKind
	size     int64 // as Telegram reported it (0: unknown)
	duration int
	what     string // "photo", "document", … for messages
}

// fileOf is the file a message carries that becomes an attachment: a
// photo (the largest size within limit), a document, a voice note, an
// audio file or a video note; nil for other messages.
func fileOf(m *models.Message, limit int64) *inboundFile {
	switch {
	case len(m.Photo) > 0:
		// Sizes come smallest first; take the largest that may be
		// downloaded (a size of unknown length is tried).
		best := m.Photo[0]
		for _, p := range m.Photo[1:] {
			if int64(p.FileSize) <= limit && p.Width*p.Height > best.Width*best.Height {
				best = p
			}
		}
		return &inboundFile{id: best.FileID, name: "photo.jpg", mimeType: "image/jpeg", size: int64(best.FileSize), what: "photo"}
	case m.Document != nil:
		d := m.Document
		return &inboundFile{id: d.FileID, name: d.FileName, mimeType: d.MimeType, size: d.FileSize, what: "document"}
	case m.Voice != nil:
		v := m.Voice
		mt := v.MimeType
		if mt == "" {
			mt = "audio/ogg"
		}
		return &inboundFile{id: v.FileID, name: "voice.ogg", mimeType: mt, kind: services.AttachVoice, size: v.FileSize, duration: v.Duration, what: "voice note"}
	case m.Audio != nil:
		a := m.Audio
		return &inboundFile{id: a.FileID, name: a.FileName, mimeType: a.MimeType, kind: services.AttachAudio, size: a.FileSize, duration: a.Duration, what: "audio file"}
	case m.VideoNote != nil:
		v := m.VideoNote
		return &inboundFile{id: v.FileID, name: "video_note.mp4", mimeType: "video/mp4", kind: services.AttachVideo, size: int64(v.FileSize), duration: v.Duration, what: "video note"}
	}
	return nil
}

// downloadLimit is the largest file the channel downloads: Telegram's
// bound, or MEDIA_MAX_BYTES when lower.
func (b *Bot) downloadLimit() int64 {
	limit := int64(MaxDownloadBytes)
	if m := b.opts.Media.MaxBytes(); m > 0 && m < limit {
		limit = m
	}
	return limit
}

// tooLarge says why a file of n bytes is not taken.
func (b *Bot) tooLarge(f *inboundFile, n int64) error {
	if n > MaxDownloadBytes {
		return services.Errorf(services.ETOOLARGE, "This %s is %s; Telegram lets bots download files of at most 20 MB, so I did not receive it.",
			f.what, services.HumanBytes(n))
	}
	return services.Errorf(services.ETOOLARGE, "This %s is %s; the limit here is %s (MEDIA_MAX_BYTES), so I did not receive it.",
		f.what, services.HumanBytes(n), services.HumanBytes(b.downloadLimit()))
}

// fetch downloads a message's file with getFile and the file URL, and
// saves it in the timeline's workspace. EINVALID and ETOOLARGE are the
// sender's to hear; other errors mean the update should come again.
func (b *Bot) fetch(ctx context.Context, timeline string, f *inboundFile) (services.Attachment, error) {
	limit := b.downloadLimit()
	if f.size > limit {
		return services.Attachment{}, b.tooLarge(f, f.size)
	}
	gctx, cancel := context.WithTimeout(ctx, b.opts.SendTimeout)
	defer cancel()
	file, oc, err := callAPI(gctx, b, func(ctx context.Context) (*models.File, error) {
		return b.api.GetFile(ctx, &bot.GetFileParams{FileID: f.id})
	})
	if err != nil {
		if errors.Is(err, bot.ErrorBadRequest) {
			// "file is too big", or an id Telegram no longer knows.
			return services.Attachment{}, services.Errorf(services.EINVALID, "I could not download this %s from Telegram (%v).", f.what, err)
		}
		return services.Attachment{}, &fetchError{what: f.what, reason: why("getFile", oc, err), err: err}
	}
	if file.FileSize > limit {
		return services.Attachment{}, b.tooLarge(f, file.FileSize)
	}
	if file.FilePath == "" {
		return services.Attachment{}, services.Errorf(services.EINVALID, "Telegram gave no download path for this %s.", f.what)
	}
	req, err := http.NewRequestWithContext(gctx, http.MethodGet, b.api.FileDownloadLink(file), nil)
	if err != nil {
		return services.Attachment{}, err
	}
	resp, err := b.opts.HTTPClient.Do(req)
	if err != nil {
		return services.Attachment{}, &fetchError{what: f.what, reason: "the download failed", err: errors.New(redact(err.Error(), b.opts.Token))}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return services.Attachment{}, &fetchError{what: f.what, reason: fmt.Sprintf("the download answered HTTP %d", resp.StatusCode),
			err: fmt.Errorf("HTTP %d", resp.StatusCode)}
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return services.Attachment{}, &fetchError{what: f.what, reason: "the download was cut off", err: err}
	}
	if int64(len(data)) > limit {
		return services.Attachment{}, b.tooLarge(f, int64(len(data)))
	}
	return b.opts.Media.Save(ctx, timeline, services.Upload{Name: f.name, MIMEType: f.mimeType, Kind: f.kind, Data: data, Duration: f.duration})
}

// Bot API bounds on what a bot sends.
const (
	// MaxCaptionLen is a caption's length after entity parsing.
	MaxCaptionLen = 1024
	// MaxPhotoBytes is sendPhoto's bound; larger images go as documents.
	MaxPhotoBytes = 10 << 20
	// MaxUploadBytes is sendDocument's bound.
	MaxUploadBytes = 50 << 20
)

// photoTypes are the images sendPhoto takes.
var photoTypes = map[string]bool{"image/jpeg": true, "image/png": true, "image/gif": true, "image/webp": true}

// sendFile sends one file of a delivery: a picture with sendPhoto, any
// other file (or a picture sendPhoto would refuse) with sendDocument, as a
// multipart upload read from the workspace. ENOTFOUND when the file is
// gone, ETOOLARGE past sendDocument's 50 MB.
func (b *Bot) sendFile(ctx context.Context, p OutboundPayload, f services.FileRef, caption string, replyTo int, plain bool) (*models.Message, error) {
	if b.opts.Media == nil {
		return nil, services.Errorf(services.ENOTFOUND, "no media store to read %s from", f.Key)
	}
	if f.Size > MaxUploadBytes {
		return nil, services.Errorf(services.ETOOLARGE, "%s is %s; Telegram takes files of at most 50 MB from bots", f.Name, services.HumanBytes(f.Size))
	}
	data, err := b.opts.Media.Read(ctx, p.Timeline, f.Key)
	if err != nil {
		return nil, err
	}
	var mode models.ParseMode = models.ParseModeHTML
	if plain {
		caption, mode = visibleText(caption), ""
	}
	if caption == "" {
		mode = ""
	}
	var reply *models.ReplyParameters
	if replyTo != 0 {
		reply = &models.ReplyParameters{MessageID: replyTo, AllowSendingWithoutReply: true}
	}
	name := f.Name
	if name == "" {
		name = f.Key[strings.LastIndex(f.Key, "/")+1:]
	}
	if f.Kind == services.AttachImage && photoTypes[f.MIMEType] && len(data) <= MaxPhotoBytes {
		m, err := b.api.SendPhoto(ctx, &bot.SendPhotoParams{ChatID: p.ChatID, Photo: &models.InputFileUpload{Filename: name, Data: bytes.NewReader(data)},
			Caption: caption, ParseMode: mode, ReplyParameters: reply})
		if err == nil || !errors.Is(err, bot.ErrorBadRequest) || strings.Contains(err.Error(), "entities") || strings.Contains(err.Error(), "caption") {
			return m, err
		}
		// Telegram would not take it as a photo (its dimensions, say): it
		// goes as a document, which it takes as it is.
		b.log.Warn("telegram: sendPhoto refused, sending the image as a document", "key", p.Key, "err", err)
	}
	return b.api.SendDocument(ctx, &bot.SendDocumentParams{ChatID: p.ChatID, Document: &models.InputFileUpload{Filename: name, Data: bytes.NewReader(data)},
		Caption: caption, ParseMode: mode, ReplyParameters: reply})
}

// spoken makes the voice note of p's text, item i of its delivery: the
// item that sends it with sendVoice. A speech service that fails is logged
// and the item recorded as done without a message (ok false): the text
// went already, and a retry of the delivery does not ask again.
func (b *Bot) spoken(ctx context.Context, p OutboundPayload, i int) (it item, ok bool, err error) {
	audio, serr := b.opts.Speaker.Speak(ctx, speechText(p.Text))
	if serr == nil && len(audio) > MaxUploadBytes {
		serr = services.Errorf(services.ETOOLARGE, "the voice note is %s; Telegram takes files of at most 50 MB from bots", services.HumanBytes(int64(len(audio))))
	}
	if serr != nil {
		if ctx.Err() != nil {
			return item{}, false, ctx.Err()
		}
		b.log.Error("telegram: the answer is not spoken: the speech service failed; the text was sent", "key", p.Key, "chat_id", p.ChatID, "err", serr)
		return item{}, false, b.opts.Store.MarkChunkSent(ctx, p.Key, i, 0)
	}
	return item{send: func(ctx context.Context, replyTo int, _ bool) (*models.Message, error) {
		params := &bot.SendVoiceParams{ChatID: p.ChatID, Voice: &models.InputFileUpload{Filename: "answer.ogg", Data: bytes.NewReader(audio)}}
		if replyTo != 0 {
			params.ReplyParameters = &models.ReplyParameters{MessageID: replyTo, AllowSendingWithoutReply: true}
		}
		return b.api.SendVoice(ctx, params)
	}}, true, nil
}

// speechText is the text of a Markdown answer as it is read aloud: what
// the chat shows of it, without markup.
func speechText(markdown string) string {
	var b strings.Builder
	for _, c := range Split(markdown, MaxMessageLen) {
		b.WriteString(visibleText(c.HTML))
		b.WriteString("\n")
	}
	return strings.TrimSpace(b.String())
}
