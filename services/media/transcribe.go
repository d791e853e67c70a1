package media

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"strings"
	"time"

	"github.com/switchboard/switchboard/services"
)

// Transcriber is services.Transcriber on an OpenAI-compatible
// POST <URL>/audio/transcriptions (OpenAI, a local Whisper server).
type Transcriber struct {
	// URL is the API base, e.g. https://api.openai.com/v1.
	URL    string
	Model  string
	APIKey string
	Client *http.Client
}

var _ services.Transcriber = (*Transcriber)(nil)

// NewTranscriber returns a transcriber for the API at url (nil when url is
// empty: no transcription). model defaults to whisper-1.
func NewTranscriber(url, model, apiKey string) *Transcriber {
	if url == "" {
		return nil
	}
	if model == "" {
		model = "whisper-1"
	}
	return &Transcriber{URL: strings.TrimRight(url, "/"), Model: model, APIKey: apiKey, Client: &http.Client{Timeout: 2 * time.Minute}}
}

// Transcribe sends the audio and returns its text. Errors are
// EUNAVAILABLE, naming the server's answer.
func (t *Transcriber) Transcribe(ctx context.Context, name, mimeType string, data []byte) (string, error) {
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	_ = mw.WriteField("model", t.Model)
	_ = mw.WriteField("response_format", "json")
	if name == "" {
		name = "audio" + extension("", mimeType)
	}
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename=%q`, name))
	h.Set("Content-Type", mimeType)
	part, _ := mw.CreatePart(h)
	_, _ = part.Write(data)
	_ = mw.Close()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL+"/audio/transcriptions", &body)
	if err != nil {
		return "", services.Errorf(services.EINVALID, "transcription URL: %v", err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	if t.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+t.APIKey)
	}
	resp, err := t.Client.Do(req)
	if err != nil {
		return "", &services.Error{Kind: services.EUNAVAILABLE, Message: "the transcription service could not be reached", Err: err}
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return "", services.Errorf(services.EUNAVAILABLE, "the transcription service answered %d: %s", resp.StatusCode, strings.TrimSpace(string(raw[:min(len(raw), 300)])))
	}
	var out struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return "", services.Errorf(services.EUNAVAILABLE, "the transcription service's answer is not JSON with a text: %v", err)
	}
	return strings.TrimSpace(out.Text), nil
}
