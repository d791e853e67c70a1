package llm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// The two providers speak HTTP and JSON through the small client here
// rather than the vendors' SDKs: the request bodies are this package's own
// bytes (encoded.go), and the SDKs' code, type data and function tables
// cost some 7 MiB of the server's idle RSS for the two calls used.

// userAgent is sent with every request to a model server.
const userAgent = "Switchboard"

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 1 << 20

// apiError is an error response (a status other than 2xx) from a model
// server.
type apiError struct {
	method, url string
	status      int
	header      http.Header
	body        []byte
}

func (e *apiError) Error() string {
	return fmt.Sprintf("%s %q: %d %s %s", e.method, e.url, e.status, http.StatusText(e.status), bytes.TrimSpace(e.body))
}

// errorBody is the error object OpenAI- and Anthropic-style servers send:
// {"error":{"type":…,"message":…}}, some servers {"error":"…"} or
// {"message":"…"}.
type errorBody struct {
	Type, Message string
}

func parseErrorBody(b []byte) errorBody {
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(b, &v) != nil {
		return errorBody{}
	}
	var obj struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}
	if json.Unmarshal(v.Error, &obj) == nil && (obj.Type != "" || obj.Message != "") {
		return errorBody{Type: obj.Type, Message: obj.Message}
	}
	var s string
	if json.Unmarshal(v.Error, &s) == nil && s != "" {
		return errorBody{Message: s}
	}
	return errorBody{Message: v.Message}
}

// post sends body to url with header set and returns the response of a
// 2xx status; any other status is an *apiError (its body read and closed).
func post(ctx context.Context, client *http.Client, url string, header http.Header, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = header
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", userAgent)
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	return nil, &apiError{method: http.MethodPost, url: url, status: resp.StatusCode, header: resp.Header, body: b}
}

// readJSON decodes a whole (non-streamed) reply into v and closes it.
func readJSON(resp *http.Response, v any) error {
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: %v in %q", errBadReply, err, truncate(string(b), 200))
	}
	return nil
}

// sseEvent is one server-sent event: its type ("" when the server named
// none) and its data lines joined by newlines.
type sseEvent struct {
	typ  string
	data []byte
}

// sseReader reads server-sent events (text/event-stream): lines up to an
// empty line make an event; "event:" names it, "data:" lines add to its
// data, lines starting with ':' are comments (keep-alives), other fields
// are ignored; CRLF, CR-less and a missing final empty line are accepted.
type sseReader struct {
	r   *bufio.Reader
	err error
}

func newSSEReader(r io.Reader) *sseReader { return &sseReader{r: bufio.NewReaderSize(r, 16<<10)} }

// next returns the next event; false at the end of the stream or on a
// read error (then err says which; nil at a clean end).
func (s *sseReader) next() (sseEvent, bool) {
	var ev sseEvent
	var data bytes.Buffer
	seen := false
	for {
		line, err := s.r.ReadBytes('\n')
		if err != nil && !(errors.Is(err, io.EOF) && len(line) > 0) {
			if !errors.Is(err, io.EOF) {
				s.err = err
				return ev, false
			}
			if seen { // the last event without its empty line
				ev.data = data.Bytes()
				return ev, true
			}
			return ev, false
		}
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		if len(line) == 0 {
			if !seen {
				continue
			}
			ev.data = data.Bytes()
			return ev, true
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := strings.Cut(string(line), ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			ev.typ, seen = value, true
		case "data":
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(value)
			seen = true
		}
	}
}
