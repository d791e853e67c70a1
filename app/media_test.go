package app_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/app"
	"github.com/switchboard/switchboard/app/apptest"
	"github.com/switchboard/switchboard/channels/telegram/tgtest"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm/llmtest"
)

const mediaTGToken = "123456:media-test-token"

var owner = tgtest.User{ID: ownerTG, FirstName: "Owner"}

func jpegBytes(t testing.TB, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for x := range w {
		img.Set(x, x%h, color.RGBA{R: 200, A: 255})
	}
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// mediaInstance is an app with the Telegram channel on a strict Bot API
// server and the fake model (which also transcribes).
func mediaInstance(t *testing.T, configure func(*app.Config, *llmtest.Server)) (*apptest.Instance, *tgtest.Strict, *llmtest.Server) {
	t.Helper()
	strict := tgtest.StartStrict(t, mediaTGToken)
	model := llmtest.NewServer(t)
	in := apptest.Start(t, apptest.Options{Model: model, Flags: services.Flags{ScopedWrite: true, ScopedRead: true, SubAgents: true},
		Configure: func(o *app.Config) {
			o.Telegram.Token, o.Telegram.APIURL, o.Telegram.OwnerIDs = mediaTGToken, strict.URL, []int64{ownerTG}
			o.Telegram.PollIdle = 50 * time.Millisecond
			if configure != nil {
				configure(o, model)
			}
		}})
	return in, strict, model
}

// waitReply waits for the bot's nth message to the owner containing want.
func waitReply(t *testing.T, strict *tgtest.Strict, n int, want string) []tgtest.Sent {
	t.Helper()
	got := strict.WaitMessages(ownerTG, n, 30*time.Second)
	if len(got) < n || !strings.Contains(got[n-1].Text, want) {
		var lines []string
		for _, m := range got {
			lines = append(lines, fmt.Sprintf("%s %s %d bytes: %.80q", m.Method, m.FileName, len(m.File), m.Text))
		}
		t.Fatalf("bot messages (want #%d with %q):\n%s", n, want, strings.Join(lines, "\n"))
	}
	return got
}

func attachmentsOf(t *testing.T, in *apptest.Instance, msgID int64) []services.Attachment {
	t.Helper()
	got, err := in.Store.AttachmentsOf(context.Background(), services.DefaultTimeline, []int64{msgID})
	if err != nil {
		t.Fatal(err)
	}
	return got[msgID]
}

func lastUserMessage(t *testing.T, in *apptest.Instance) services.Message {
	t.Helper()
	var last services.Message
	for _, m := range visibleFrom(t, in, services.SourceTelegram) {
		if m.Role == services.RoleUser {
			last = m
		}
	}
	return last
}

// TestTelegramPhotoReachesTheModelAsAnImage: a photo from the owner is
// downloaded (its largest size) with getFile and the file URL, stored once
// in the workspace, and reaches the model as an image part with its
// caption and a line naming where it is saved; the next turn carries the
// line, not the bytes.
func TestTelegramPhotoReachesTheModelAsAnImage(t *testing.T) {
	t.Parallel()
	in, strict, model := mediaInstance(t, func(o *app.Config, _ *llmtest.Server) { o.Context.Images = true })
	small, large := jpegBytes(t, 90, 60), jpegBytes(t, 640, 480)
	strict.SendMedia(owner, tgtest.Photo, "What is in this picture?",
		tgtest.File{Data: small, Width: 90, Height: 60}, tgtest.File{Data: large, Width: 640, Height: 480})
	waitReply(t, strict, 1, "What is in this picture?")

	reqs := model.Requests()
	if len(reqs) != 1 || len(reqs[0].Images) != 1 {
		t.Fatalf("model requests: %d, images %+v", len(reqs), reqs)
	}
	im := reqs[0].Images[0]
	if im.Role != "user" || im.MIMEType != "image/jpeg" || !bytes.Equal(im.Data, large) {
		t.Fatalf("image part: role %s type %s, %d bytes (want the largest size, %d bytes)", im.Role, im.MIMEType, len(im.Data), len(large))
	}
	if !regexp.MustCompile(`\[image photo\.jpg, image/jpeg, 640×480, .*saved as uploads/[0-9a-f]{16}\.jpg\]`).MatchString(reqs[0].LastMessage) {
		t.Fatalf("the input does not describe the photo: %q", reqs[0].LastMessage)
	}
	if strict.Calls("getFile") != 1 || strict.Calls("file") != 1 {
		t.Fatalf("getFile %d, downloads %d", strict.Calls("getFile"), strict.Calls("file"))
	}
	msg := lastUserMessage(t, in)
	files := attachmentsOf(t, in, msg.ID)
	if msg.Content != "What is in this picture?" || len(files) != 1 || files[0].Width != 640 || files[0].Size != int64(len(large)) {
		t.Fatalf("stored: %q %+v", msg.Content, files)
	}

	strict.Send(owner, "Thanks")
	waitReply(t, strict, 2, "Thanks")
	reqs = model.Requests()
	next := reqs[len(reqs)-1]
	if len(next.Images) != 0 || !strings.Contains(string(next.Body), files[0].StorageKey) {
		t.Fatalf("the next turn carries %d images; reference kept: %v", len(next.Images), strings.Contains(string(next.Body), files[0].StorageKey))
	}
}

// TestTelegramPhotoWithoutVisionIsDescribed: with LLM_IMAGES=0 the model
// gets no image part, only the line it can act on.
func TestTelegramPhotoWithoutVisionIsDescribed(t *testing.T) {
	t.Parallel()
	_, strict, model := mediaInstance(t, nil)
	strict.SendMedia(owner, tgtest.Photo, "", tgtest.File{Data: jpegBytes(t, 320, 200), Width: 320, Height: 200})
	waitReply(t, strict, 1, "320×200")
	reqs := model.Requests()
	if len(reqs) != 1 || len(reqs[0].Images) != 0 || !strings.Contains(reqs[0].LastMessage, "saved as uploads/") {
		t.Fatalf("requests: %+v", reqs)
	}
}

// TestTelegramVoiceNoteIsTranscribedAndAnswered: a voice note goes to the
// transcription endpoint, the transcript is stored beside the attachment
// and the model answers it.
func TestTelegramVoiceNoteIsTranscribedAndAnswered(t *testing.T) {
	t.Parallel()
	in, strict, model := mediaInstance(t, func(o *app.Config, m *llmtest.Server) {
		o.Media.TranscribeURL, o.Media.TranscribeModel, o.Media.TranscribeAPIKey = m.OpenAIBaseURL(), "whisper-1", "tk-test"
	})
	model.SetTranscribe(func(tr llmtest.Transcription) llmtest.TranscriptReply {
		return llmtest.TranscriptReply{Text: "Remind me to buy milk"}
	})
	voice := []byte("OggS\x00\x02 fake opus voice note")
	strict.SendMedia(owner, tgtest.Voice, "", tgtest.File{Data: voice, MIMEType: "audio/ogg", Duration: 3})
	waitReply(t, strict, 1, "Remind me to buy milk")

	trs := model.Transcriptions()
	if len(trs) != 1 || !bytes.Equal(trs[0].Data, voice) || trs[0].Model != "whisper-1" || trs[0].Authorization != "Bearer tk-test" || trs[0].ContentType != "audio/ogg" {
		t.Fatalf("transcription requests: %+v", trs)
	}
	reqs := model.Requests()
	if len(reqs) != 1 || !strings.Contains(reqs[0].LastMessage, `[voice note voice.ogg, audio/ogg, 0:03`) ||
		!strings.Contains(reqs[0].LastMessage, `transcript: "Remind me to buy milk"`) {
		t.Fatalf("model input: %+v", reqs)
	}
	files := attachmentsOf(t, in, lastUserMessage(t, in).ID)
	if len(files) != 1 || files[0].Kind != services.AttachVoice || files[0].Transcription != "Remind me to buy milk" || files[0].Duration != 3 {
		t.Fatalf("stored voice note: %+v", files)
	}
}

// TestTelegramDocumentIsReadableWithReadFile: a document is saved in the
// workspace under the path its line names, and read_file reads it.
func TestTelegramDocumentIsReadableWithReadFile(t *testing.T) {
	t.Parallel()
	_, strict, model := mediaInstance(t, nil)
	saved := regexp.MustCompile(`saved as (uploads/[0-9a-f]{16}\.txt)`)
	model.SetDefault(func(r llmtest.Request) llmtest.Reply {
		if r.LastIsToolResult {
			return llmtest.Text("The file says: " + r.LastMessage)
		}
		if m := saved.FindStringSubmatch(r.LastMessage); m != nil {
			return llmtest.Call("read_file", `{"path":"`+m[1]+`"}`)
		}
		return llmtest.Echo(r)
	})
	strict.SendMedia(owner, tgtest.Document, "Summarise this", tgtest.File{Data: []byte("The launch code is 4242.\n"), Name: "notes.txt", MIMEType: "text/plain"})
	waitReply(t, strict, 1, "The launch code is 4242.")
}

// TestTelegramMediaLimitsAreExplained: a file past Telegram's 20 MB or past
// MEDIA_MAX_BYTES is not downloaded; the sender is told which limit, and
// nothing is stored or asked of the model.
func TestTelegramMediaLimitsAreExplained(t *testing.T) {
	t.Parallel()
	in, strict, model := mediaInstance(t, func(o *app.Config, _ *llmtest.Server) { o.Media.MaxBytes = 1000 })
	strict.SendMedia(owner, tgtest.Document, "", tgtest.File{Data: []byte("x"), Size: 25 << 20, Name: "movie.mkv"})
	waitReply(t, strict, 1, "Telegram lets bots download files of at most 20 MB")
	strict.SendMedia(owner, tgtest.Document, "", tgtest.File{Data: bytes.Repeat([]byte("y"), 2000), Name: "big.txt"})
	got := waitReply(t, strict, 2, "MEDIA_MAX_BYTES")
	if !strings.Contains(got[1].Text, "2 KB") || !strings.Contains(got[1].Text, "1000 B") {
		t.Fatalf("limit message: %q", got[1].Text)
	}
	// Telegram did not report the size: the download is cut at the limit.
	strict.SendMedia(owner, tgtest.Voice, "", tgtest.File{Data: bytes.Repeat([]byte("z"), 3000), Unsized: true, MIMEType: "audio/ogg"})
	waitReply(t, strict, 3, "MEDIA_MAX_BYTES")
	if strict.Calls("file") != 1 || model.RequestCount() != 0 || len(visibleFrom(t, in, services.SourceTelegram)) != 0 {
		t.Fatalf("downloads %d, model requests %d, stored %d", strict.Calls("file"), model.RequestCount(), len(visibleFrom(t, in, services.SourceTelegram)))
	}
}

// TestSendFileReachesTelegramOnce: the agent's send_file sends a document
// (sendDocument, multipart) and a picture (sendPhoto) once each, the
// caption within 1024 characters and the rest as a message, before the
// answer; the file is on the timeline with its attachment.
func TestSendFileReachesTelegramOnce(t *testing.T) {
	t.Parallel()
	in, strict, model := mediaInstance(t, nil)
	long := strings.TrimSpace(strings.Repeat("chart ", 250)) // 1499 characters
	saved := regexp.MustCompile(`saved as (uploads/[0-9a-f]{16}\.jpg)`)
	model.SetDefault(func(r llmtest.Request) llmtest.Reply {
		if r.LastIsToolResult {
			return llmtest.Text("Sent.")
		}
		if m := saved.FindStringSubmatch(r.LastMessage); m != nil {
			return llmtest.Call("send_file", `{"path":"`+m[1]+`","caption":"`+long+`"}`)
		}
		return llmtest.Echo(r)
	})
	model.Enqueue(llmtest.Call("write_file", `{"path":"report.txt","content":"Quarterly numbers: up.\n"}`),
		llmtest.Call("send_file", `{"path":"report.txt","caption":"Here is the **report**"}`), llmtest.Text("I sent you the report."))
	strict.Send(owner, "Send me the report")
	got := waitReply(t, strict, 2, "I sent you the report.")
	doc := got[0]
	if doc.Method != "sendDocument" || doc.FileName != "report.txt" || string(doc.File) != "Quarterly numbers: up.\n" || doc.Text != "Here is the report" || doc.ReplyTo == 0 {
		t.Fatalf("document: %+v", doc)
	}

	photo := jpegBytes(t, 200, 100)
	strict.SendMedia(owner, tgtest.Photo, "send it back", tgtest.File{Data: photo, Width: 200, Height: 100})
	got = waitReply(t, strict, 5, "Sent.")
	if p := got[2]; p.Method != "sendPhoto" || !bytes.Equal(p.File, photo) || len([]rune(p.Text)) > 1024 || !strings.HasPrefix(long, p.Text) {
		t.Fatalf("photo: %s %s %d bytes, caption %d chars", p.Method, p.FileName, len(p.File), len([]rune(p.Text)))
	}
	if rest := got[3]; rest.Method != "sendMessage" || strings.Join(strings.Fields(got[2].Text+" "+rest.Text), " ") != long {
		t.Fatalf("the caption's rest: %.100q", rest.Text)
	}
	// Nothing more arrives: every turn and every delivery has ended, so
	// nothing is left that could send (a repeat would be a retried job).
	waitFor(t, "every turn and delivery job to end", func() bool {
		var open int
		err := in.App.Pool().QueryRow(context.Background(), `SELECT count(*) FROM river_job
			WHERE kind IN ('agent_turn', 'outbound') AND state NOT IN ('completed', 'cancelled', 'discarded')`).Scan(&open)
		return err == nil && open == 0
	})
	if n := len(strict.Messages(ownerTG)); n != 5 || strict.Calls("sendPhoto") != 1 || strict.Calls("sendDocument") != 1 {
		t.Fatalf("bot messages %d, sendPhoto %d, sendDocument %d", n, strict.Calls("sendPhoto"), strict.Calls("sendDocument"))
	}
	var files []services.FileRef
	for _, m := range visibleFrom(t, in, services.SourceAgent) {
		meta, _ := services.DecodeMeta(m.Metadata)
		if meta.Kind == services.MetaFileSent {
			files = append(files, meta.Files...)
			if a := attachmentsOf(t, in, m.ID); len(a) != 1 {
				t.Fatalf("attachments of the sent file: %+v", a)
			}
		}
	}
	if len(files) != 2 || files[0].Name != "report.txt" || files[1].Kind != services.AttachImage {
		t.Fatalf("files on the timeline: %+v", files)
	}
}

// TestSendFileImageTelegramRefusesAsAPhotoGoesAsADocument: a picture
// sendPhoto refuses (21:1) is sent with sendDocument instead, once.
func TestSendFileImageTelegramRefusesAsAPhotoGoesAsADocument(t *testing.T) {
	t.Parallel()
	_, strict, model := mediaInstance(t, nil)
	var banner bytes.Buffer
	if err := png.Encode(&banner, image.NewRGBA(image.Rect(0, 0, 2100, 100))); err != nil {
		t.Fatal(err)
	}
	saved := regexp.MustCompile(`saved as (uploads/[0-9a-f]{16}\.png)`)
	model.SetDefault(func(r llmtest.Request) llmtest.Reply {
		if r.LastIsToolResult {
			return llmtest.Text("Sent.")
		}
		if m := saved.FindStringSubmatch(r.LastMessage); m != nil {
			return llmtest.Call("send_file", `{"path":"`+m[1]+`"}`)
		}
		return llmtest.Echo(r)
	})
	strict.SendMedia(owner, tgtest.Document, "send it back", tgtest.File{Data: banner.Bytes(), Name: "banner.png", MIMEType: "image/png"})
	got := waitReply(t, strict, 2, "Sent.")
	if got[0].Method != "sendDocument" || !bytes.Equal(got[0].File, banner.Bytes()) || strict.Calls("sendPhoto") != 1 || strict.Calls("sendDocument") != 1 {
		t.Fatalf("first message %s %s, sendPhoto %d, sendDocument %d", got[0].Method, got[0].FileName, strict.Calls("sendPhoto"), strict.Calls("sendDocument"))
	}
}

// TestVoiceNoteWhenTranscriptionFails: the transcription server failing
// leaves the voice note untranscribed, and the turn goes on: the model is
// told it was not transcribed, and answers.
func TestVoiceNoteWhenTranscriptionFails(t *testing.T) {
	t.Parallel()
	in, strict, model := mediaInstance(t, func(o *app.Config, m *llmtest.Server) { o.Media.TranscribeURL = m.OpenAIBaseURL() })
	model.SetTranscribe(func(llmtest.Transcription) llmtest.TranscriptReply { return llmtest.TranscriptReply{Status: 503} })
	strict.SendMedia(owner, tgtest.Voice, "", tgtest.File{Data: []byte("OggS voice"), MIMEType: "audio/ogg", Duration: 2})
	waitReply(t, strict, 1, "not transcribed")
	if files := attachmentsOf(t, in, lastUserMessage(t, in).ID); len(files) != 1 || files[0].Transcription != "" || len(model.Transcriptions()) != 1 {
		t.Fatalf("voice note: %+v, %d transcription requests", files, len(model.Transcriptions()))
	}
}

// TestAPIImagePartBecomesAnAttachment: an image part a /v1 client sends is
// stored like an upload: an attachment of the message (bytes once in the
// workspace, none in the message's metadata), an image part for the model
// in that turn, and a line naming it in later turns.
func TestAPIImagePartBecomesAnAttachment(t *testing.T) {
	t.Parallel()
	model := llmtest.NewServer(t)
	in := apptest.Start(t, apptest.Options{Model: model, Configure: func(o *app.Config) {
		o.Context.Images, o.Agent.PassImages, o.OpenAI.ModelReadsImages = true, true, true
	}})
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewRGBA(image.Rect(0, 0, 40, 30))); err != nil {
		t.Fatal(err)
	}
	url := "data:image/png;base64," + base64.StdEncoding.EncodeToString(b.Bytes())
	post := func(content string) string {
		body := `{"model":"switchboard","messages":[{"role":"user","content":` + content + `}]}`
		req, _ := http.NewRequest("POST", in.URL+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+apptest.Token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%d %s", resp.StatusCode, out)
		}
		return string(out)
	}
	post(`[{"type":"text","text":"what is this?"},{"type":"image_url","image_url":{"url":"` + url + `"}}]`)
	reqs := model.Requests()
	if len(reqs) != 1 || len(reqs[0].Images) != 1 || !bytes.Equal(reqs[0].Images[0].Data, b.Bytes()) {
		t.Fatalf("model requests %d, images %+v", len(reqs), reqs)
	}
	var q services.Message
	for _, m := range visibleFrom(t, in, services.SourceAPI) {
		if m.Role == services.RoleUser {
			q = m
		}
	}
	files := attachmentsOf(t, in, q.ID)
	if len(files) != 1 || files[0].Width != 40 || files[0].Size != int64(b.Len()) || files[0].MIMEType != "image/png" {
		t.Fatalf("attachments of %q: %+v", q.Content, files)
	}
	if len(q.Metadata) > 1024 || strings.Contains(string(q.Metadata), base64.StdEncoding.EncodeToString(b.Bytes())[:40]) {
		t.Fatalf("the image's bytes are in the message's metadata (%d bytes)", len(q.Metadata))
	}
	post(`"and now?"`)
	next := model.Requests()[len(model.Requests())-1]
	if len(next.Images) != 0 || !strings.Contains(string(next.Body), files[0].StorageKey) {
		t.Fatalf("the next turn carries %d images; reference kept: %v", len(next.Images), strings.Contains(string(next.Body), files[0].StorageKey))
	}
}
