// Package media stores the files that come with messages (attachments) in
// the timelines' workspaces, once per content, within a size limit; it
// reads images' dimensions, and transcribes voice through an
// OpenAI-compatible /v1/audio/transcriptions endpoint.
package media

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"image"
	_ "image/gif" // image.DecodeConfig reads GIF, JPEG and PNG sizes
	_ "image/jpeg"
	_ "image/png"
	"io"
	"net/http"
	"path"
	"strings"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/tools"
)

// DefaultMaxBytes is the largest attachment accepted by default
// (MEDIA_MAX_BYTES): Telegram's own bound on what a bot may download.
const DefaultMaxBytes = 20 << 20

// Dir is the workspace directory attachments are stored in.
const Dir = services.UploadsDir

// ImageTypes are the image formats passed to a model as images.
var ImageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// Store is services.Media on the workspaces.
type Store struct {
	spaces   func(timeline string) (*tools.Workspace, error)
	maxBytes int64
}

var _ services.Media = (*Store)(nil)

// New returns the store of attachments in the workspaces spaces opens;
// maxBytes <= 0 takes DefaultMaxBytes.
func New(spaces func(timeline string) (*tools.Workspace, error), maxBytes int64) *Store {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	return &Store{spaces: spaces, maxBytes: maxBytes}
}

// MaxBytes is the largest file accepted.
func (s *Store) MaxBytes() int64 { return s.maxBytes }

// Save stores u in timeline's workspace as uploads/<first 16 hex digits of
// its SHA-256><extension>; the same bytes sent again are not written again.
func (s *Store) Save(ctx context.Context, timeline string, u services.Upload) (services.Attachment, error) {
	name := cleanName(u.Name)
	if len(u.Data) == 0 {
		return services.Attachment{}, services.Errorf(services.EINVALID, "file %q is empty", name)
	}
	if n := int64(len(u.Data)); n > s.maxBytes {
		return services.Attachment{}, services.Errorf(services.ETOOLARGE, "file %q is %s; the limit is %s (MEDIA_MAX_BYTES)",
			name, services.HumanBytes(n), services.HumanBytes(s.maxBytes))
	}
	a := Describe(u)
	a.Name = name
	sum := sha256.Sum256(u.Data)
	a.SHA256 = hex.EncodeToString(sum[:])
	a.StorageKey = Dir + "/" + a.SHA256[:16] + extension(name, a.MIMEType)
	w, err := s.spaces(timeline)
	if err != nil {
		return services.Attachment{}, err
	}
	if f, info, err := w.Open(a.StorageKey); err == nil {
		f.Close()
		if info.Size() == a.Size {
			return a, nil // stored before: same hash, same size
		}
	}
	if _, err := w.SaveUpload(a.StorageKey, u.Data); err != nil {
		return services.Attachment{}, err
	}
	return a, nil
}

// Read returns a stored file's bytes.
func (s *Store) Read(ctx context.Context, timeline, key string) ([]byte, error) {
	w, err := s.spaces(timeline)
	if err != nil {
		return nil, err
	}
	f, _, err := w.Open(key)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, s.maxBytes+1))
}

// Describe decides what an upload is: its MIME type (sniffed when the
// sender's is missing or generic), its kind, and an image's size. Images
// whose format a model does not read, or whose header cannot be decoded,
// are documents.
func Describe(u services.Upload) services.Attachment {
	mt := strings.ToLower(strings.TrimSpace(strings.Split(u.MIMEType, ";")[0]))
	if mt == "" || mt == "application/octet-stream" {
		mt = strings.Split(http.DetectContentType(u.Data), ";")[0]
		if mt == "application/octet-stream" || mt == "text/plain" {
			if byExt := typeByExt[strings.ToLower(path.Ext(u.Name))]; byExt != "" {
				mt = byExt
			}
		}
	}
	a := services.Attachment{MIMEType: mt, Size: int64(len(u.Data)), Kind: u.Kind, Duration: u.Duration}
	if a.Kind == "" {
		switch {
		case ImageTypes[mt]:
			a.Kind = services.AttachImage
		case strings.HasPrefix(mt, "audio/"):
			a.Kind = services.AttachAudio
		case strings.HasPrefix(mt, "video/"):
			a.Kind = services.AttachVideo
		default:
			a.Kind = services.AttachDocument
		}
	}
	if a.Kind == services.AttachImage {
		cfg, _, err := image.DecodeConfig(bytes.NewReader(u.Data))
		switch {
		case err == nil:
			a.Width, a.Height = cfg.Width, cfg.Height
		case mt != "image/webp": // no WebP decoder here: kept without a size
			a.Kind = services.AttachDocument // not an image a model can read
		}
	}
	return a
}

var typeByExt = map[string]string{
	".txt": "text/plain", ".md": "text/markdown", ".csv": "text/csv", ".json": "application/json",
	".pdf": "application/pdf", ".ogg": "audio/ogg", ".oga": "audio/ogg", ".mp3": "audio/mpeg", ".m4a": "audio/mp4",
	".wav": "audio/wav", ".webp": "image/webp", ".mp4": "video/mp4",
}

var extByType = map[string]string{
	"image/jpeg": ".jpg", "image/png": ".png", "image/gif": ".gif", "image/webp": ".webp",
	"audio/ogg": ".ogg", "audio/mpeg": ".mp3", "audio/mp4": ".m4a", "audio/wav": ".wav", "video/mp4": ".mp4",
	"application/pdf": ".pdf", "text/plain": ".txt", "text/markdown": ".md", "text/csv": ".csv", "application/json": ".json",
}

// extension keeps the name's extension when it is a plain one, else the
// type's; a file tool reads a ".txt" as text either way.
func extension(name, mimeType string) string {
	ext := strings.ToLower(path.Ext(name))
	if len(ext) >= 2 && len(ext) <= 8 && strings.Trim(ext[1:], "abcdefghijklmnopqrstuvwxyz0123456789") == "" {
		return ext
	}
	if e := extByType[mimeType]; e != "" {
		return e
	}
	return ".bin"
}

// cleanName keeps the last element of a sender's file name, without control
// characters, at most 200 bytes.
func cleanName(name string) string {
	name = strings.ReplaceAll(name, "\\", "/")
	name = name[strings.LastIndex(name, "/")+1:]
	name = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, strings.ToValidUTF8(name, ""))
	name = strings.TrimSpace(name)
	for len(name) > 200 {
		r := []rune(name)
		name = string(r[:len(r)-1])
	}
	if name == "." || name == ".." {
		return ""
	}
	return name
}
