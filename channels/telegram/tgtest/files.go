package tgtest

import (
	"encoding/json"
	"fmt"
	"image"
	_ "image/gif" // image.DecodeConfig for sendPhoto
	_ "image/jpeg"
	_ "image/png"
	"net/http"
	"path"
	"strings"
	"time"
	"unicode/utf16"
)

// MaxDownloadBytes is the Bot API's bound on what getFile serves (20 MB).
const MaxDownloadBytes = 20 << 20

// File is a file a user sends to the bot.
type File struct {
	Data           []byte
	Name, MIMEType string
	// Width and Height are a photo size's; Duration a voice note's.
	Width, Height, Duration int
	// Size, when larger than Data, is the size Telegram reports (a file
	// too large to download without holding its bytes).
	Size int64
	// Unsized leaves file_size out of the update and of getFile's answer
	// (it is optional in the Bot API).
	Unsized bool
}

type storedFile struct {
	File
	id, unique, path string
}

func (f *storedFile) size() int64 {
	if f.Size > int64(len(f.Data)) {
		return f.Size
	}
	return int64(len(f.Data))
}

// Media kinds SendMedia sends, as the Bot API names a message's field.
const (
	Photo     = "photo"
	Document  = "document"
	Voice     = "voice"
	Audio     = "audio"
	VideoNote = "video_note"
)

var (
	mediaDir = map[string]string{Photo: "photos", Document: "documents", Voice: "voice", Audio: "music", VideoNote: "video_notes"}
	mediaExt = map[string]string{Photo: ".jpg", Voice: ".oga", VideoNote: ".mp4"}
)

// SendMedia queues a message from u carrying files (for a photo, its
// sizes, smallest first; otherwise one file) with a caption, as the Bot API
// delivers it: file_id, file_unique_id and file_size in the message, the
// bytes fetched with getFile and the file URL. It returns the message id.
func (s *Strict) SendMedia(u User, kind, caption string, files ...File) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var stored []*storedFile
	for _, f := range files {
		n := len(s.files) + 1
		ext := mediaExt[kind]
		if kind == Document || kind == Audio {
			ext = path.Ext(f.Name)
		}
		sf := &storedFile{File: f, id: fmt.Sprintf("AgAC-file-%d", n), unique: fmt.Sprintf("AQAD%d", n),
			path: fmt.Sprintf("%s/file_%d%s", mediaDir[kind], n, ext)}
		s.files[sf.id], s.paths[sf.path] = sf, sf.id
		stored = append(stored, sf)
	}
	chatID := u.ChatID
	if chatID == 0 {
		chatID = u.ID
	}
	c := s.chat(chatID)
	c.lastID++
	c.ids[c.lastID] = true
	msg := map[string]any{
		"message_id": c.lastID, "date": time.Now().Unix(),
		"from": map[string]any{"id": u.ID, "is_bot": false, "first_name": u.FirstName, "username": u.Username},
		"chat": map[string]any{"id": chatID, "type": "private", "first_name": u.FirstName},
	}
	if caption != "" {
		msg["caption"] = caption
	}
	base := func(f *storedFile) map[string]any {
		m := map[string]any{"file_id": f.id, "file_unique_id": f.unique, "file_size": f.size()}
		if f.Unsized {
			delete(m, "file_size")
		}
		return m
	}
	switch kind {
	case Photo:
		var sizes []map[string]any
		for _, f := range stored {
			p := base(f)
			p["width"], p["height"] = f.Width, f.Height
			sizes = append(sizes, p)
		}
		msg["photo"] = sizes
	case Voice, Audio, VideoNote:
		f := stored[0]
		m := base(f)
		m["duration"] = f.Duration
		if f.MIMEType != "" && kind != VideoNote {
			m["mime_type"] = f.MIMEType
		}
		if kind == Audio && f.Name != "" {
			m["file_name"] = f.Name
		}
		if kind == VideoNote {
			m["length"] = 240
		}
		msg[kind] = m
	default:
		f := stored[0]
		m := base(f)
		if f.Name != "" {
			m["file_name"] = f.Name
		}
		if f.MIMEType != "" {
			m["mime_type"] = f.MIMEType
		}
		msg["document"] = m
	}
	upd, _ := json.Marshal(map[string]any{"update_id": s.nextUpd, "message": msg})
	s.nextUpd++
	s.updates = append(s.updates, upd)
	close(s.changed)
	s.changed = make(chan struct{})
	return c.lastID
}

// getFile answers as the Bot API does: the file's path for the download
// URL, or "file is too big" past 20 MB.
func (s *Strict) getFile(p map[string]string) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.files[p["file_id"]]
	if f == nil {
		return nil, badRequest("invalid file_id")
	}
	if f.size() > MaxDownloadBytes {
		return nil, badRequest("file is too big")
	}
	out := map[string]any{"file_id": f.id, "file_unique_id": f.unique, "file_size": f.size(), "file_path": f.path}
	if f.Unsized {
		delete(out, "file_size")
	}
	return out, nil
}

// download serves GET /file/bot<token>/<file_path>; the script sees it as
// the method "file" (a Fault's Status or Page answers it instead).
func (s *Strict) download(w http.ResponseWriter, filePath string) {
	s.mu.Lock()
	s.calls["file"]++
	f := s.files[s.paths[filePath]]
	var fault Fault
	if s.script != nil {
		fault = s.script("file", s.calls["file"])
	}
	s.mu.Unlock()
	switch {
	case fault.Page != "":
		writePage(w, fault)
		return
	case fault.Status != 0:
		http.Error(w, http.StatusText(fault.Status), fault.Status)
		return
	}
	if f == nil || r404(f) {
		http.Error(w, `{"ok":false,"error_code":404,"description":"Not Found"}`, http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = w.Write(f.Data)
}

// r404: a file only announced (Size past its bytes) cannot be downloaded.
func r404(f *storedFile) bool { return f.Size > int64(len(f.Data)) }

// Bot API bounds on what a bot uploads.
const (
	MaxPhotoBytes  = 10 << 20
	MaxUploadBytes = 50 << 20
	MaxCaptionLen  = 1024
)

// sendFile serves sendPhoto, sendDocument and sendVoice with a multipart
// upload, as the Bot API refuses them: no file, a voice note that is not
// OGG, a photo past 10 MB, that is not an
// image or whose dimensions Telegram refuses, a document past 50 MB, a caption over 1024 characters after
// entity parsing or with HTML it cannot parse.
func (s *Strict) sendFile(method string, p map[string]string) (any, *apiError) {
	chatID, apiErr := s.knownChat(p["chat_id"])
	if apiErr != nil {
		return nil, apiErr
	}
	field := map[string]string{"sendPhoto": "photo", "sendDocument": "document", "sendVoice": "voice"}[method]
	data, name := p[field], p[field+"#filename"]
	if name == "" {
		// A file_id or URL string is not what these tests send.
		return nil, badRequest("there is no " + field + " in the request")
	}
	switch {
	case method == "sendPhoto" && len(data) > MaxPhotoBytes:
		return nil, badRequest("photo is too big (at most 10 MB)")
	case method == "sendPhoto":
		cfg, _, err := image.DecodeConfig(strings.NewReader(data))
		if err != nil {
			return nil, badRequest("IMAGE_PROCESS_FAILED")
		}
		// A photo's width and height together are at most 10000, their
		// ratio at most 20.
		if w, h := cfg.Width, cfg.Height; w+h > 10000 || max(w, h) > 20*min(w, h) {
			return nil, badRequest("PHOTO_INVALID_DIMENSIONS")
		}
	case method == "sendVoice" && len(data) > 0 && !voiceAudio(data):
		// Telegram takes a voice note as OGG/Opus, MP3 or M4A; these tests
		// expect OGG (what the speech API is asked for).
		return nil, badRequest("wrong file type: a voice note must be OGG/Opus")
	case len(data) > MaxUploadBytes:
		return nil, &apiError{status: 413, desc: "Request Entity Too Large"}
	case len(data) == 0:
		return nil, badRequest("file must be non-empty")
	}
	raw, caption := p["caption"], p["caption"]
	switch p["parse_mode"] {
	case "":
	case "HTML":
		var err error
		if caption, err = parseHTML(raw); err != nil {
			return nil, badRequest("can't parse entities: " + err.Error())
		}
	default:
		return nil, badRequest("unsupported parse_mode")
	}
	if n := len(utf16.Encode([]rune(caption))); n > MaxCaptionLen {
		return nil, badRequest("message caption is too long")
	}
	id, apiErr := s.deliver(p, Sent{ChatID: chatID, Text: caption, Raw: raw, ParseMode: p["parse_mode"],
		Method: method, FileName: name, File: []byte(data)})
	if apiErr != nil {
		return nil, apiErr
	}
	return map[string]any{"message_id": id, "date": time.Now().Unix(), "caption": caption,
		"chat": map[string]any{"id": chatID, "type": "private"}, field: sentFile(method, id, len(data))}, nil
}

// sentFile is the message's photo (its sizes), document or voice, as the
// Bot API returns it.
func sentFile(method string, id int64, size int) any {
	f := map[string]any{"file_id": fmt.Sprintf("sent-%d", id), "file_unique_id": fmt.Sprintf("S%d", id), "file_size": size}
	switch method {
	case "sendPhoto":
		f["width"], f["height"] = 90, 90
		return []any{f}
	case "sendVoice":
		f["duration"], f["mime_type"] = 1, "audio/ogg"
	}
	return f
}

// voiceAudio reports whether data is an OGG stream ("OggS"), the container
// of an Opus voice note.
func voiceAudio(data string) bool { return strings.HasPrefix(data, "OggS") }
