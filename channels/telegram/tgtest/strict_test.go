package tgtest

import (
	"bytes"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestStrictRefusesWhatTelegramRefuses: the strict server is only useful
// if it refuses what the real Bot API refuses, whatever the body encoding.
func TestStrictRefusesWhatTelegramRefuses(t *testing.T) {
	t.Parallel()
	s := StartStrict(t, "1:tok")
	s.Send(User{ID: 7, FirstName: "Ann"}, "hi")
	long := strings.Repeat("x", 4097)
	cases := []struct {
		name   string
		params map[string]string
		want   string // "" = accepted
	}{
		{"plain", map[string]string{"chat_id": "7", "text": "hello"}, ""},
		{"html", map[string]string{"chat_id": "7", "text": "<b>a</b> &lt;b&gt; &#38; &#x26;", "parse_mode": "HTML"}, ""},
		{"4096 after entities", map[string]string{"chat_id": "7", "text": "<b>" + long[:4096] + "</b>", "parse_mode": "HTML"}, ""},
		{"too long", map[string]string{"chat_id": "7", "text": long}, "message is too long"},
		{"empty", map[string]string{"chat_id": "7", "text": " "}, "message text is empty"},
		{"empty after entities", map[string]string{"chat_id": "7", "text": "<b></b>", "parse_mode": "HTML"}, "message text is empty"},
		{"unknown tag", map[string]string{"chat_id": "7", "text": "<h1>x</h1>", "parse_mode": "HTML"}, "can't parse entities"},
		{"unknown entity", map[string]string{"chat_id": "7", "text": "a &nbsp; b", "parse_mode": "HTML"}, "can't parse entities"},
		{"unclosed", map[string]string{"chat_id": "7", "text": "<b>x", "parse_mode": "HTML"}, "can't parse entities"},
		{"misnested", map[string]string{"chat_id": "7", "text": "<b><i>x</b></i>", "parse_mode": "HTML"}, "can't parse entities"},
		{"bad parse mode", map[string]string{"chat_id": "7", "text": "x", "parse_mode": "html5"}, "unsupported parse_mode"},
		{"unknown chat", map[string]string{"chat_id": "8", "text": "x"}, "chat not found"},
		{"missing reply", map[string]string{"chat_id": "7", "text": "x", "reply_parameters": `{"message_id":99}`}, "message to be replied not found"},
		{"missing reply allowed", map[string]string{"chat_id": "7", "text": "x", "reply_parameters": `{"message_id":99,"allow_sending_without_reply":true}`}, ""},
	}
	for _, enc := range []string{"json", "form", "multipart"} {
		for _, c := range cases {
			ok, desc := call(t, s.URL+"/bot1:tok/sendMessage", enc, c.params)
			if c.want == "" && !ok {
				t.Errorf("%s (%s): refused: %s", c.name, enc, desc)
			}
			if c.want != "" && (ok || !strings.Contains(desc, c.want)) {
				t.Errorf("%s (%s): ok=%v %q; want refused with %q", c.name, enc, ok, desc, c.want)
			}
		}
	}
	if ok, desc := call(t, s.URL+"/bot1:wrong/getMe", "json", nil); ok || desc != "Unauthorized" {
		t.Errorf("wrong token: ok=%v %q", ok, desc)
	}
	if ok, _ := call(t, s.URL+"/bot1:tok/sendChatAction", "json", map[string]string{"chat_id": "7", "action": "typing"}); !ok {
		t.Error("sendChatAction refused")
	}
}

// TestStrictGetUpdatesHonoursTimeoutAndOffset: getUpdates waits up to its
// timeout for an update, and an offset confirms the updates before it.
func TestStrictGetUpdatesHonoursTimeoutAndOffset(t *testing.T) {
	t.Parallel()
	s := StartStrict(t, "1:tok")
	start := time.Now()
	go func() { time.Sleep(300 * time.Millisecond); s.Send(User{ID: 7}, "late") }() // why kept: the update must come while the long poll already waits, over a real socket (no bubble), and the server has no "waiting" hook to poll

	var out struct {
		Result []struct {
			UpdateID int64 `json:"update_id"`
		}
	}
	get := func(params map[string]string) {
		out.Result = nil
		body, _ := json.Marshal(params)
		resp, err := http.Post(s.URL+"/bot1:tok/getUpdates", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		_ = json.NewDecoder(resp.Body).Decode(&out)
	}
	get(map[string]string{"timeout": "5"})
	if len(out.Result) != 1 || time.Since(start) < 250*time.Millisecond {
		t.Fatalf("long poll returned %d updates after %s", len(out.Result), time.Since(start))
	}
	id := out.Result[0].UpdateID
	get(map[string]string{"offset": strconv.FormatInt(id+1, 10)})
	if len(out.Result) != 0 {
		t.Fatalf("a confirmed update came again: %+v", out.Result)
	}
}

func call(t *testing.T, u, enc string, params map[string]string) (bool, string) {
	t.Helper()
	var body bytes.Buffer
	ct := ""
	switch enc {
	case "json":
		_ = json.NewEncoder(&body).Encode(params)
		ct = "application/json"
	case "form":
		v := url.Values{}
		for k, x := range params {
			v.Set(k, x)
		}
		body.WriteString(v.Encode())
		ct = "application/x-www-form-urlencoded"
	case "multipart":
		w := multipart.NewWriter(&body)
		for k, x := range params {
			_ = w.WriteField(k, x)
		}
		_ = w.Close()
		ct = w.FormDataContentType()
	}
	resp, err := http.Post(u, ct, &body)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		OK          bool   `json:"ok"`
		Description string `json:"description"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&r)
	return r.OK, r.Description
}

// sendVoice takes a multipart OGG upload and answers with a Message whose
// voice names it; without a file, or with one that is not OGG, it refuses.
func TestStrictSendVoice(t *testing.T) {
	t.Parallel()
	s := StartStrict(t, "1:tok")
	s.Send(User{ID: 7, FirstName: "Ann"}, "hi")
	if ok, desc := call(t, s.URL+"/bot1:tok/sendVoice", "multipart", map[string]string{"chat_id": "7"}); ok || desc != "Bad Request: there is no voice in the request" {
		t.Fatalf("no file: ok=%v %q", ok, desc)
	}
	upload := func(data string) (ok bool, desc string, voice map[string]any) {
		var body bytes.Buffer
		w := multipart.NewWriter(&body)
		_ = w.WriteField("chat_id", "7")
		part, _ := w.CreateFormFile("voice", "answer.ogg")
		_, _ = part.Write([]byte(data))
		_ = w.Close()
		resp, err := http.Post(s.URL+"/bot1:tok/sendVoice", w.FormDataContentType(), &body)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var r struct {
			OK          bool   `json:"ok"`
			Description string `json:"description"`
			Result      struct {
				Voice map[string]any `json:"voice"`
			} `json:"result"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&r)
		return r.OK, r.Description, r.Result.Voice
	}
	if ok, desc, _ := upload("ID3 an mp3"); ok || !strings.Contains(desc, "OGG") {
		t.Fatalf("not OGG: ok=%v %q", ok, desc)
	}
	ok, desc, voice := upload("OggS opus")
	if !ok || voice["mime_type"] != "audio/ogg" || voice["file_id"] == "" {
		t.Fatalf("OGG: ok=%v %q %v", ok, desc, voice)
	}
	if m := s.Messages(7); m[len(m)-1].Method != "sendVoice" || string(m[len(m)-1].File) != "OggS opus" {
		t.Fatalf("messages: %+v", m)
	}
}
