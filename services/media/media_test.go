package media_test

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/media"
	"github.com/switchboard/switchboard/services/tools"
)

func pngBytes(t testing.TB, w, h int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewRGBA(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func newStore(t *testing.T, max int64) (*media.Store, string) {
	dir := t.TempDir()
	spaces := tools.NewWorkspaces(dir)
	t.Cleanup(func() { spaces.Close() })
	return media.New(spaces.For, max), dir
}

// TestSaveStoresEqualBytesOnce: the same picture sent twice under two
// names is one file in uploads/, with its size, type and pixels.
func TestSaveStoresEqualBytesOnce(t *testing.T) {
	s, dir := newStore(t, 0)
	data := pngBytes(t, 64, 48)
	a, err := s.Save(context.Background(), "global", services.Upload{Name: "photo.png", Data: data})
	if err != nil {
		t.Fatal(err)
	}
	if a.Kind != services.AttachImage || a.MIMEType != "image/png" || a.Width != 64 || a.Height != 48 || a.Size != int64(len(data)) ||
		!strings.HasPrefix(a.StorageKey, "uploads/") || !strings.HasSuffix(a.StorageKey, ".png") || a.StorageKey[8:24] != a.SHA256[:16] {
		t.Fatalf("attachment: %+v", a)
	}
	b, err := s.Save(context.Background(), "global", services.Upload{Name: "other name.png", Data: data})
	if err != nil || b.StorageKey != a.StorageKey || b.Name != "other name.png" {
		t.Fatalf("second save: %+v %v", b, err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*", "uploads", "*"))
	if len(files) != 1 {
		t.Fatalf("files stored: %v", files)
	}
	got, err := s.Read(context.Background(), "global", a.StorageKey)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back: %d bytes, %v", len(got), err)
	}
	if !strings.Contains(a.Describe(), "image photo.png, image/png, 64×48") || !strings.Contains(a.Describe(), "saved as "+a.StorageKey) {
		t.Fatalf("description: %s", a.Describe())
	}
}

// TestSaveRefusesWhatIsTooLargeOrEmpty names the limit and stores nothing.
func TestSaveRefusesWhatIsTooLargeOrEmpty(t *testing.T) {
	s, dir := newStore(t, 1000)
	_, err := s.Save(context.Background(), "global", services.Upload{Name: "big.bin", Data: make([]byte, 1001)})
	if !services.IsKind(err, services.ETOOLARGE) || !strings.Contains(err.Error(), "MEDIA_MAX_BYTES") || !strings.Contains(err.Error(), "big.bin") {
		t.Fatalf("over the limit: %v", err)
	}
	if _, err := s.Save(context.Background(), "global", services.Upload{Name: "empty.txt"}); !services.IsKind(err, services.EINVALID) {
		t.Fatalf("empty file: %v", err)
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "*", "uploads", "*")); len(files) != 0 {
		t.Fatalf("refused files were stored: %v", files)
	}
}

// TestSaveRespectsTheWorkspaceBound: uploads count against
// WORKSPACE_MAX_BYTES like the agent's writes.
func TestSaveRespectsTheWorkspaceBound(t *testing.T) {
	dir := t.TempDir()
	spaces := tools.NewWorkspacesWith(dir, tools.WriteLimits{Workspace: 1500})
	defer spaces.Close()
	s := media.New(spaces.For, 0)
	if _, err := s.Save(context.Background(), "global", services.Upload{Name: "a.txt", Data: bytes.Repeat([]byte("a"), 1000)}); err != nil {
		t.Fatal(err)
	}
	_, err := s.Save(context.Background(), "global", services.Upload{Name: "b.txt", Data: bytes.Repeat([]byte("b"), 1000)})
	if !services.IsKind(err, services.ETOOLARGE) || !strings.Contains(err.Error(), "WORKSPACE_MAX_BYTES") {
		t.Fatalf("past the workspace bound: %v", err)
	}
}

func TestDescribeKinds(t *testing.T) {
	for _, c := range []struct {
		u    services.Upload
		kind services.AttachmentKind
		mime string
	}{
		{services.Upload{Name: "notes.txt", Data: []byte("hello")}, services.AttachDocument, "text/plain"},
		{services.Upload{Name: "x", MIMEType: "audio/ogg", Kind: services.AttachVoice, Data: []byte("OggS...")}, services.AttachVoice, "audio/ogg"},
		{services.Upload{Name: "song.mp3", MIMEType: "audio/mpeg", Data: []byte("ID3...")}, services.AttachAudio, "audio/mpeg"},
		// A file that claims to be a JPEG but is not one is a document: the
		// model must not get a broken image.
		{services.Upload{Name: "fake.jpg", MIMEType: "image/jpeg", Data: []byte("not a jpeg")}, services.AttachDocument, "image/jpeg"},
		{services.Upload{Name: "doc.pdf", Data: []byte("%PDF-1.4\n")}, services.AttachDocument, "application/pdf"},
	} {
		a := media.Describe(c.u)
		if a.Kind != c.kind || a.MIMEType != c.mime {
			t.Errorf("%s: kind %s mime %s, want %s %s", c.u.Name, a.Kind, a.MIMEType, c.kind, c.mime)
		}
	}
}
