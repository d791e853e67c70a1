package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/web/wire"
)

// MaxUploadFiles bounds the files of one uploaded message.
const MaxUploadFiles = 4

// isUpload is a multipart POST /api/messages: bounded by the media limit
// in handleUpload instead of the body limit of every other request.
func isUpload(c echo.Context) bool {
	r := c.Request()
	return r.Method == http.MethodPost && r.URL.Path == "/api/messages" &&
		strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/form-data")
}

// handleUpload is POST /api/messages as multipart/form-data: the fields
// content, source and client_key of the JSON form, and up to
// MaxUploadFiles parts named file, each at most MEDIA_MAX_BYTES. The files
// are saved in the owner's workspace and linked to the message. Errors name
// the file and the limit; nothing is stored when one file is refused.
func (s *Server) handleUpload(c echo.Context) error {
	if s.opts.Media == nil {
		return services.Errorf(services.EUNAVAILABLE, "uploads are not available on this server")
	}
	r := c.Request()
	limit := s.opts.Media.MaxBytes()
	bodyLimit := int64(MaxUploadFiles)*limit + MaxBodyBytes
	r.Body = http.MaxBytesReader(c.Response(), r.Body, bodyLimit)
	_, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || params["boundary"] == "" {
		return services.Errorf(services.EINVALID, "Content-Type: multipart/form-data needs a boundary")
	}
	mr := multipart.NewReader(r.Body, params["boundary"])
	fields := map[string]string{}
	var uploads []services.Upload
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return uploadReadError(err, bodyLimit)
		}
		name := part.FormName()
		if name != "file" {
			v, err := io.ReadAll(io.LimitReader(part, MaxBodyBytes+1))
			if err != nil {
				return uploadReadError(err, bodyLimit)
			}
			if len(v) > MaxBodyBytes {
				return services.Errorf(services.ETOOLARGE, "field %q is over %d bytes", name, MaxBodyBytes)
			}
			switch name {
			case "content", "source", "client_key":
				fields[name] = string(v)
			default:
				return services.Errorf(services.EINVALID, "unknown field %q: want content, source, client_key and file", name)
			}
			continue
		}
		if len(uploads) == MaxUploadFiles {
			return services.Errorf(services.EINVALID, "one message takes at most %d files", MaxUploadFiles)
		}
		data, err := io.ReadAll(io.LimitReader(part, limit+1))
		if err != nil {
			return uploadReadError(err, bodyLimit)
		}
		if int64(len(data)) > limit {
			return services.Errorf(services.ETOOLARGE, "file %q is over the limit of %s (MEDIA_MAX_BYTES)", part.FileName(), services.HumanBytes(limit))
		}
		uploads = append(uploads, services.Upload{Name: part.FileName(), MIMEType: part.Header.Get("Content-Type"), Data: data})
	}
	for _, f := range []string{"content", "source", "client_key"} {
		if err := checkText(f, fields[f]); err != nil {
			return err
		}
	}
	p, err := s.ownerPost(services.SourceAPI, fields["source"], fields["content"], fields["client_key"])
	if err != nil {
		return err
	}
	ctx := r.Context()
	for _, u := range uploads {
		a, err := s.opts.Media.Save(ctx, p.TimelineScope, u)
		if err != nil {
			return err
		}
		p.Attachments = append(p.Attachments, a)
	}
	msg, created, err := s.opts.Chat.Post(ctx, p)
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if !created {
		status = http.StatusOK
	}
	return c.JSON(status, wire.PostResponse{Message: s.present(ctx, []services.Message{msg})[0], Created: created})
}

func uploadReadError(err error, bodyLimit int64) error {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return services.Errorf(services.ETOOLARGE, "upload is over %s in all (%d files of MEDIA_MAX_BYTES)", services.HumanBytes(bodyLimit), MaxUploadFiles)
	}
	return services.Errorf(services.EINVALID, "reading the upload: %v", err)
}

// presentFiles adds the attachments of messages that carry files.
func (s *Server) presentFiles(ctx context.Context, msgs []services.Message, out []wire.Message) {
	if s.opts.Attachments == nil {
		return
	}
	byTimeline := map[string][]int64{}
	for _, m := range msgs {
		if len(m.Meta.Files) > 0 {
			byTimeline[m.TimelineScope] = append(byTimeline[m.TimelineScope], m.ID)
		}
	}
	files := map[int64][]services.Attachment{}
	for tl, ids := range byTimeline {
		got, err := s.opts.Attachments.AttachmentsOf(ctx, tl, ids)
		if err != nil {
			s.log.Warn("attachments unavailable", "err", err)
			return
		}
		for id, a := range got {
			files[id] = a
		}
	}
	for i, m := range msgs {
		for _, a := range files[m.ID] {
			out[i].Attachments = append(out[i].Attachments, wire.Attachment{ID: a.ID, Kind: string(a.Kind), Name: a.DisplayName(),
				MIMEType: a.MIMEType, Size: a.Size, Width: a.Width, Height: a.Height, Duration: a.Duration, Path: a.StorageKey,
				Transcription: a.Transcription, URL: "/api/attachments/" + strconv.FormatInt(a.ID, 10)})
		}
	}
}

// inlineTypes are shown in the page (img, audio, video); anything else is
// downloaded, never rendered by the browser.
var inlineTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true,
	"audio/ogg": true, "audio/mpeg": true, "audio/mp4": true, "audio/wav": true, "video/mp4": true}

// handleAttachment is GET /api/attachments/:id: the file's bytes, for the
// owner only (another timeline's files are not found). ?download=1 asks
// for a download of an image too.
func (s *Server) handleAttachment(c echo.Context) error {
	if s.opts.Attachments == nil || s.opts.Media == nil {
		return services.Errorf(services.ENOTFOUND, "no attachments on this server")
	}
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		return services.Errorf(services.EINVALID, "attachment id %q: want a positive number", c.Param("id"))
	}
	ctx := c.Request().Context()
	a, err := s.opts.Attachments.GetAttachment(ctx, id)
	if err == nil && a.TimelineScope != s.opts.OwnerTimeline {
		err = services.Errorf(services.ENOTFOUND, "no attachment #%d", id)
	}
	if err != nil {
		return err
	}
	data, err := s.opts.Media.Read(ctx, a.TimelineScope, a.StorageKey)
	if err != nil {
		return err
	}
	h := c.Response().Header()
	ct, disposition := a.MIMEType, "inline"
	if !inlineTypes[ct] || c.QueryParam("download") != "" {
		disposition = "attachment"
	}
	if !inlineTypes[ct] {
		ct = "application/octet-stream"
	}
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	h.Set("Cache-Control", "private, max-age=86400")
	h.Set("Content-Disposition", mime.FormatMediaType(disposition, map[string]string{"filename": a.DisplayName()}))
	h.Set("Content-Length", fmt.Sprint(len(data)))
	return c.Blob(http.StatusOK, ct, data)
}
