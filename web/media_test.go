package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/png"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/app"
	"github.com/switchboard/switchboard/app/apptest"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/web/wire"
)

type upFile struct {
	name, mime string
	data       []byte
}

// upload posts a multipart message and returns the response and its body.
func upload(t *testing.T, base, token string, fields map[string]string, files ...upFile) (*http.Response, []byte) {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for k, v := range fields {
		_ = mw.WriteField(k, v)
	}
	for _, f := range files {
		h := make(map[string][]string)
		h["Content-Disposition"] = []string{`form-data; name="file"; filename="` + f.name + `"`}
		if f.mime != "" {
			h["Content-Type"] = []string{f.mime}
		}
		w, _ := mw.CreatePart(h)
		_, _ = w.Write(f.data)
	}
	_ = mw.Close()
	req, _ := http.NewRequest(http.MethodPost, base+"/api/messages", &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func uploadInstance(t *testing.T, maxBytes int64) *apptest.Instance {
	return apptest.Start(t, apptest.Options{Token: testToken, Configure: func(o *app.Config) { o.Media.MaxBytes = maxBytes }})
}

// TestUploadAndDownload: a multipart POST /api/messages stores the text
// and its files (the answer lists them with their URL and workspace path);
// the owner downloads each — a document as an attachment, an image inline,
// both never sniffed — and nobody else can; a retried upload with the same
// client_key stores nothing new.
func TestUploadAndDownload(t *testing.T) {
	t.Parallel()
	in := uploadInstance(t, 0)
	var pic bytes.Buffer
	_ = png.Encode(&pic, image.NewRGBA(image.Rect(0, 0, 30, 20)))
	fields := map[string]string{"content": "here are the notes", "client_key": "up-1"}
	files := []upFile{{"notes.txt", "text/plain", []byte("first line\n")}, {"pic.png", "", pic.Bytes()}}
	resp, body := upload(t, in.URL, testToken, fields, files...)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("upload: %d %s", resp.StatusCode, body)
	}
	var out wire.PostResponse
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatal(err)
	}
	atts := out.Message.Attachments
	if out.Message.Content != "here are the notes" || len(atts) != 2 || atts[0].Name != "notes.txt" || atts[0].Kind != "document" ||
		!strings.HasPrefix(atts[0].Path, "uploads/") || atts[1].Kind != "image" || atts[1].Width != 30 || atts[1].MIMEType != "image/png" {
		t.Fatalf("posted: %s", body)
	}

	r, got := do(t, http.MethodGet, in.URL+atts[0].URL, testToken, "")
	if r.StatusCode != 200 || got != "first line\n" || r.Header.Get("Content-Type") != "application/octet-stream" ||
		!strings.HasPrefix(r.Header.Get("Content-Disposition"), "attachment") || r.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("download: %d %q %v", r.StatusCode, got, r.Header)
	}
	r, got = do(t, http.MethodGet, in.URL+atts[1].URL, testToken, "")
	if r.StatusCode != 200 || got != pic.String() || r.Header.Get("Content-Type") != "image/png" || !strings.HasPrefix(r.Header.Get("Content-Disposition"), "inline") {
		t.Fatalf("image: %d %v", r.StatusCode, r.Header)
	}
	if r, _ := do(t, http.MethodGet, in.URL+atts[0].URL, "", ""); r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("download without credentials: %d", r.StatusCode)
	}
	if r, _ := do(t, http.MethodGet, in.URL+"/api/attachments/999999", testToken, ""); r.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown attachment: %d", r.StatusCode)
	}

	resp, body = upload(t, in.URL, testToken, fields, files...)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("retried upload: %d %s", resp.StatusCode, body)
	}
	page, _ := in.Chat.Timeline(context.Background(), services.DefaultTimeline, 0, 0, 50)
	ids := []int64{}
	for _, m := range page.Messages {
		ids = append(ids, m.ID)
	}
	all, _ := in.Store.AttachmentsOf(context.Background(), services.DefaultTimeline, ids)
	if len(page.Messages) != 1 || len(all[page.Messages[0].ID]) != 2 {
		t.Fatalf("after a retry: %d messages, attachments %+v", len(page.Messages), all)
	}
	// The timeline lists the files too.
	_, tl := do(t, http.MethodGet, in.URL+"/api/timeline", testToken, "")
	if !strings.Contains(tl, `"url":"`+atts[0].URL+`"`) {
		t.Fatalf("timeline: %s", tl)
	}
}

// TestUploadLimits: a file over MEDIA_MAX_BYTES, too many files, an empty
// message and an unknown field are refused with errors that name the
// problem, and nothing is stored.
func TestUploadLimits(t *testing.T) {
	t.Parallel()
	in := uploadInstance(t, 1000)
	small := upFile{"a.txt", "text/plain", []byte("a")}
	for _, c := range []struct {
		fields map[string]string
		files  []upFile
		status int
		want   string
	}{
		{nil, []upFile{{"big.bin", "", bytes.Repeat([]byte("x"), 1001)}}, http.StatusRequestEntityTooLarge, `file \"big.bin\" is over the limit of 1000 B (MEDIA_MAX_BYTES)`},
		{nil, []upFile{small, small, small, small, small}, http.StatusBadRequest, "at most 4 files"},
		{map[string]string{"content": "  "}, nil, http.StatusBadRequest, "message text is empty"},
		{map[string]string{"colour": "red"}, []upFile{small}, http.StatusBadRequest, `unknown field \"colour\"`},
		{nil, []upFile{{"empty.txt", "", nil}}, http.StatusBadRequest, `file \"empty.txt\" is empty`},
	} {
		resp, body := upload(t, in.URL, testToken, c.fields, c.files...)
		if resp.StatusCode != c.status || !strings.Contains(string(body), c.want) {
			t.Errorf("want %d %q, got %d %s", c.status, c.want, resp.StatusCode, body)
		}
	}
	if page, _ := in.Chat.Timeline(context.Background(), services.DefaultTimeline, 0, 0, 50); len(page.Messages) != 0 {
		t.Fatalf("refused uploads stored %d messages", len(page.Messages))
	}
	if resp, _ := upload(t, in.URL, "", nil, small); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("upload without credentials: %d", resp.StatusCode)
	}
}
