package llmtest

import (
	"io"
	"net/http"
	"strings"
)

// Transcription is one request to POST /v1/audio/transcriptions, as an
// OpenAI-compatible speech-to-text server (OpenAI, a local Whisper) gets it.
type Transcription struct {
	Model, FileName, ContentType, Authorization string
	Data                                        []byte
}

// TranscriptReply is the server's answer: Text, or an HTTP error Status.
type TranscriptReply struct {
	Text   string
	Status int
}

// SetTranscribe scripts the transcription endpoint; by default it answers
// "transcript of <file name>".
func (s *Server) SetTranscribe(fn func(Transcription) TranscriptReply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.transcribe = fn
}

// Transcriptions returns the transcription requests received so far.
func (s *Server) Transcriptions() []Transcription {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Transcription(nil), s.transcripts...)
}

// handleTranscription serves the endpoint as OpenAI does: a multipart form
// with file and model (both required), answered with {"text": …}.
func (s *Server) handleTranscription(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	fail := func(status int, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		writeJSON(w, map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "code": nil, "param": nil}})
	}
	if err := r.ParseMultipartForm(32 << 20); err != nil {
		fail(http.StatusBadRequest, "the body must be multipart/form-data: "+err.Error())
		return
	}
	f, hdr, err := r.FormFile("file")
	if err != nil {
		fail(http.StatusBadRequest, "file is required")
		return
	}
	data, _ := io.ReadAll(f)
	f.Close()
	t := Transcription{Model: r.FormValue("model"), FileName: hdr.Filename, ContentType: hdr.Header.Get("Content-Type"),
		Authorization: r.Header.Get("Authorization"), Data: data}
	if t.Model == "" {
		fail(http.StatusBadRequest, "model is required")
		return
	}
	s.mu.Lock()
	s.transcripts = append(s.transcripts, t)
	fn := s.transcribe
	s.mu.Unlock()
	reply := TranscriptReply{Text: "transcript of " + strings.TrimSpace(t.FileName)}
	if fn != nil {
		reply = fn(t)
	}
	if reply.Status != 0 {
		fail(reply.Status, "scripted transcription error")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	writeJSON(w, map[string]any{"text": reply.Text})
}
