package tgtest

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf16"
)

// Strict is a Bot API server of our own that refuses what the real one
// refuses, for the cases the npm emulator lets through: a text over 4096
// characters after entity parsing, HTML it cannot parse (unknown tags or
// entities, unclosed or misnested tags), an empty text, an unknown chat or
// parse mode, a reply to a message that does not exist. It reads JSON,
// urlencoded and multipart bodies, long-polls getUpdates with its timeout
// and offset, knows sendChatAction and editMessageText, and can be scripted
// to answer 429 or another error, to answer with a reverse proxy's HTML page,
// to hold a call, to serve a call and drop the connection without an
// answer, or to take a given time per sendMessage. Message ids are one
// sequence per chat, shared by both sides, as in a private chat.
type Strict struct {
	// URL is the Bot API base URL (TELEGRAM_API_URL).
	URL   string
	Token string

	mu sync.Mutex
	strictQueries
	changed  chan struct{} // closed and replaced when updates arrive
	updates  []json.RawMessage
	nextUpd  int64
	chats    map[int64]*strictChat
	calls    map[string]int
	script   func(method string, n int) Fault
	latency  time.Duration
	username string
	// files are the files users sent, by file_id; paths maps file_path to
	// file_id.
	files map[string]*storedFile
	paths map[string]string
	// closed ends every hold when the test ends.
	closed chan struct{}
}

// callback queries: lastQuery numbers them; queries holds each one's
// answer (nil until answered).
type strictQueries struct {
	lastQuery int64
	queries   map[string]*string
}

type strictChat struct {
	lastID int64
	ids    map[int64]bool
	sent   []Sent
}

// Sent is a message the bot sent, as the server accepted it.
type Sent struct {
	ChatID    int64
	MessageID int64
	// Text is the visible text, after entity parsing; Raw is what was sent.
	Text, Raw, ParseMode string
	ReplyTo              int64
	At                   time.Time
	// Method is sendMessage, sendPhoto, sendDocument or sendVoice; a file's upload
	// name and bytes are FileName and File, its caption is Text.
	Method   string
	FileName string
	File     []byte
	// Edits counts the editMessageText calls that changed it.
	Edits int
	// Buttons are the callback_data of its inline keyboard's buttons, in
	// order (nil: no keyboard; an edit without reply_markup removes it).
	Buttons []string
}

// Fault is how the server answers one call instead of serving it normally.
type Fault struct {
	// Status and Description answer the call with an error (Status 429
	// carries RetryAfter seconds), without serving it.
	Status      int
	Description string
	RetryAfter  int
	// Hold keeps the call this long before serving it; HoldAfter serves it
	// (a sendMessage is delivered) and then keeps the answer this long.
	// A client that gives up meanwhile gets nothing.
	Hold, HoldAfter time.Duration
	// Page answers the call with Status (502 when 0) and this HTML page
	// instead of the Bot API's JSON, without serving it: what a reverse
	// proxy in front of the Bot API answers when Telegram is away.
	Page string
	// Drop serves the call (a sendMessage is delivered) and then closes the
	// connection without an answer: the client cannot know what happened.
	Drop bool
}

// ProxyPage is a reverse proxy's 502 page, for Fault.Page.
const ProxyPage = "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"

// StartStrict starts a strict server for the bot token; it stops at the
// test's end.
func StartStrict(t testing.TB, token string) *Strict {
	t.Helper()
	s := &Strict{Token: token, changed: make(chan struct{}), nextUpd: 1, chats: map[int64]*strictChat{},
		calls: map[string]int{}, username: "switchbot", closed: make(chan struct{}),
		files: map[string]*storedFile{}, paths: map[string]string{}}
	hs := httptest.NewServer(s)
	t.Cleanup(func() {
		close(s.closed)
		hs.CloseClientConnections()
		hs.Close()
	})
	s.URL = hs.URL
	return s
}

// Script sets how calls are answered: fn gets the method and how many
// times it was called (1 for the first call) and returns a Fault; the zero
// Fault serves the call.
func (s *Strict) Script(fn func(method string, n int) Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = fn
}

// SetLatency makes every sendMessage take d (the real API takes 0.1–0.5 s).
func (s *Strict) SetLatency(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latency = d
}

// Calls returns how many times method was called.
func (s *Strict) Calls(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[method]
}

// Send queues a private message from user id to the bot and returns its
// message id.
func (s *Strict) Send(u User, text string) int64 { return s.send(u, text, nil) }

// Forward queues a message u forwards to the bot: text written by from
// (forward_origin of type "user"). It returns its message id.
func (s *Strict) Forward(u User, text string, from User) int64 {
	return s.send(u, text, map[string]any{"type": "user", "date": time.Now().Unix(),
		"sender_user": map[string]any{"id": from.ID, "is_bot": false, "first_name": from.FirstName}})
}

func (s *Strict) send(u User, text string, origin map[string]any) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	chatID := u.ChatID
	if chatID == 0 {
		chatID = u.ID
	}
	chatType := u.ChatType
	if chatType == "" {
		chatType = "private"
	}
	c := s.chat(chatID)
	c.lastID++
	c.ids[c.lastID] = true
	msg := map[string]any{
		"message_id": c.lastID, "date": time.Now().Unix(), "text": text,
		"from": map[string]any{"id": u.ID, "is_bot": false, "first_name": u.FirstName, "username": u.Username},
		"chat": map[string]any{"id": chatID, "type": chatType, "first_name": u.FirstName},
	}
	if origin != nil {
		msg["forward_origin"] = origin
	}
	if strings.HasPrefix(text, "/") {
		cmd, _, _ := strings.Cut(text, " ")
		msg["entities"] = []map[string]any{{"type": "bot_command", "offset": 0, "length": len(utf16.Encode([]rune(cmd)))}}
	}
	upd, _ := json.Marshal(map[string]any{"update_id": s.nextUpd, "message": msg})
	s.nextUpd++
	s.updates = append(s.updates, upd)
	close(s.changed)
	s.changed = make(chan struct{})
	return c.lastID
}

// Messages returns what the bot sent to chatID, in the order accepted.
func (s *Strict) Messages(chatID int64) []Sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.chats[chatID]; c != nil {
		return append([]Sent(nil), c.sent...)
	}
	return nil
}

// WaitMessages waits until the bot sent at least n messages to chatID or
// timeout passed, and returns them.
func (s *Strict) WaitMessages(chatID int64, n int, timeout time.Duration) []Sent {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		got := s.Messages(chatID)
		if len(got) >= n {
			return got
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			return s.Messages(chatID)
		}
	}
}

func (s *Strict) chat(id int64) *strictChat {
	c := s.chats[id]
	if c == nil {
		c = &strictChat{ids: map[int64]bool{}}
		s.chats[id] = c
	}
	return c
}

// apiError is the Bot API's error body.
type apiError struct {
	status     int
	desc       string
	retryAfter int
}

func (s *Strict) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if rest, ok := strings.CutPrefix(r.URL.Path, "/file/bot"+s.Token+"/"); ok {
		s.download(w, rest)
		return
	}
	path := strings.TrimPrefix(r.URL.Path, "/")
	tokenPart, method, ok := strings.Cut(path, "/")
	if !ok || tokenPart != "bot"+s.Token {
		writeAPI(w, nil, &apiError{status: 401, desc: "Unauthorized"})
		return
	}
	params, err := readParams(r)
	if err != nil {
		writeAPI(w, nil, &apiError{status: 400, desc: "Bad Request: " + err.Error()})
		return
	}
	s.mu.Lock()
	s.calls[method]++
	var f Fault
	if s.script != nil {
		f = s.script(method, s.calls[method])
	}
	latency := s.latency
	s.mu.Unlock()
	if f.Page != "" {
		writePage(w, f)
		return
	}
	if f.Status != 0 {
		desc := f.Description
		if desc == "" {
			desc = http.StatusText(f.Status)
			if f.Status == 429 {
				desc = fmt.Sprintf("Too Many Requests: retry after %d", f.RetryAfter)
			}
		}
		writeAPI(w, nil, &apiError{status: f.Status, desc: desc, retryAfter: f.RetryAfter})
		return
	}
	if !s.sleep(r, f.Hold) {
		return
	}
	if method == "sendMessage" && !s.sleep(r, latency) {
		return
	}
	result, apiErr := s.serve(r, method, params)
	if apiErr == nil && !s.sleep(r, f.HoldAfter) {
		return
	}
	if f.Drop {
		drop(w)
		return
	}
	writeAPI(w, result, apiErr)
}

// writePage answers with a proxy's HTML page (Fault.Page).
func writePage(w http.ResponseWriter, f Fault) {
	status := f.Status
	if status == 0 {
		status = http.StatusBadGateway
	}
	w.Header().Set("Content-Type", "text/html")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, f.Page)
}

// drop closes the connection of w without an answer.
func drop(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

// sleep waits d, or until the client goes away or the server closes
// (false).
func (s *Strict) sleep(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	select {
	case <-time.After(d):
		return true
	case <-r.Context().Done():
		return false
	case <-s.closed:
		return false
	}
}

func (s *Strict) serve(r *http.Request, method string, p map[string]string) (any, *apiError) {
	switch method {
	case "getMe":
		return map[string]any{"id": 4242, "is_bot": true, "first_name": "Switchboard", "username": s.username}, nil
	case "deleteWebhook", "setWebhook":
		return true, nil
	case "setMyCommands":
		var cmds []struct{ Command, Description string }
		if err := json.Unmarshal([]byte(p["commands"]), &cmds); err != nil {
			return nil, badRequest("can't parse commands JSON object")
		}
		for _, c := range cmds {
			if !validCommand(c.Command) {
				return nil, badRequest("BOT_COMMAND_INVALID")
			}
			if n := len([]rune(c.Description)); n < 1 || n > 256 {
				return nil, badRequest("BOT_COMMAND_DESCRIPTION_INVALID")
			}
		}
		return true, nil
	case "getUpdates":
		return s.getUpdates(r, p)
	case "sendChatAction":
		if _, err := s.knownChat(p["chat_id"]); err != nil {
			return nil, err
		}
		switch p["action"] {
		case "typing", "upload_photo", "record_video", "upload_video", "record_voice", "upload_voice",
			"upload_document", "choose_sticker", "find_location", "record_video_note", "upload_video_note":
			return true, nil
		}
		return nil, badRequest("wrong parameter action in request")
	case "sendMessage":
		return s.sendMessage(p)
	case "editMessageText":
		return s.editMessageText(p)
	case "answerCallbackQuery":
		return s.answerCallbackQuery(p)
	case "getFile":
		return s.getFile(p)
	case "sendPhoto", "sendDocument", "sendVoice":
		return s.sendFile(method, p)
	}
	return nil, &apiError{status: 404, desc: "Not Found"}
}

func (s *Strict) knownChat(raw string) (int64, *apiError) {
	if raw == "" {
		return 0, badRequest("chat_id is empty")
	}
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil {
		return 0, badRequest("chat not found")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.chats[id] == nil {
		return 0, badRequest("chat not found")
	}
	return id, nil
}

func (s *Strict) getUpdates(r *http.Request, p map[string]string) (any, *apiError) {
	offset, _ := strconv.ParseInt(p["offset"], 10, 64)
	limit := 100
	if v, err := strconv.Atoi(p["limit"]); err == nil && v >= 1 && v <= 100 {
		limit = v
	}
	timeout, _ := strconv.Atoi(p["timeout"])
	deadline := time.After(time.Duration(timeout) * time.Second)
	for {
		s.mu.Lock()
		// Telegram forgets the updates before offset once asked with it.
		if offset > 0 {
			keep := s.updates[:0]
			for _, u := range s.updates {
				var head struct {
					UpdateID int64 `json:"update_id"`
				}
				_ = json.Unmarshal(u, &head)
				if head.UpdateID >= offset {
					keep = append(keep, u)
				}
			}
			s.updates = keep
		}
		out := append([]json.RawMessage{}, s.updates[:min(limit, len(s.updates))]...)
		changed := s.changed
		s.mu.Unlock()
		if len(out) > 0 || timeout <= 0 {
			return out, nil
		}
		select {
		case <-changed:
		case <-deadline:
			return []json.RawMessage{}, nil
		case <-r.Context().Done():
			return []json.RawMessage{}, nil
		case <-s.closed:
			return []json.RawMessage{}, nil
		}
	}
}

func (s *Strict) sendMessage(p map[string]string) (any, *apiError) {
	chatID, apiErr := s.knownChat(p["chat_id"])
	if apiErr != nil {
		return nil, apiErr
	}
	raw, text, apiErr := messageText(p)
	if apiErr != nil {
		return nil, apiErr
	}
	for _, k := range []string{"link_preview_options", "reply_parameters", "reply_markup"} {
		if v, ok := p[k]; ok && !json.Valid([]byte(v)) {
			return nil, badRequest("can't parse " + k + " JSON object")
		}
	}
	buttons, apiErr := inlineKeyboard(p["reply_markup"])
	if apiErr != nil {
		return nil, apiErr
	}
	id, apiErr := s.deliver(p, Sent{ChatID: chatID, Text: text, Raw: raw, ParseMode: p["parse_mode"], Method: "sendMessage", Buttons: buttons})
	if apiErr != nil {
		return nil, apiErr
	}
	return map[string]any{"message_id": id, "date": time.Now().Unix(), "text": text,
		"chat": map[string]any{"id": chatID, "type": "private"}}, nil
}

// messageText is a sendMessage's or editMessageText's text as sent and as
// shown, checked as the Bot API checks it: its parse_mode, its entities, not
// blank, at most 4096 UTF-16 units.
func messageText(p map[string]string) (raw, text string, _ *apiError) {
	raw, text = p["text"], p["text"]
	switch p["parse_mode"] {
	case "":
	case "HTML":
		var err error
		if text, err = parseHTML(raw); err != nil {
			return "", "", badRequest("can't parse entities: " + err.Error())
		}
	default:
		return "", "", badRequest("unsupported parse_mode")
	}
	if strings.TrimSpace(text) == "" {
		return "", "", badRequest("message text is empty")
	}
	if n := len(utf16.Encode([]rune(text))); n > 4096 {
		return "", "", badRequest("message is too long")
	}
	return raw, text, nil
}

// editMessageText edits a text message the bot sent, as the Bot API does:
// "message to edit not found" for an id the chat does not have, "message
// can't be edited" for a message the bot did not send, "message is not
// modified" when the text and its formatting are the same.
func (s *Strict) editMessageText(p map[string]string) (any, *apiError) {
	chatID, apiErr := s.knownChat(p["chat_id"])
	if apiErr != nil {
		return nil, apiErr
	}
	id, _ := strconv.ParseInt(p["message_id"], 10, 64)
	raw, text, apiErr := messageText(p)
	if apiErr != nil {
		return nil, apiErr
	}
	buttons, apiErr := inlineKeyboard(p["reply_markup"])
	if apiErr != nil {
		return nil, apiErr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.chat(chatID)
	if !c.ids[id] {
		return nil, badRequest("message to edit not found")
	}
	for i := range c.sent {
		m := &c.sent[i]
		if m.MessageID != id {
			continue
		}
		if m.Method != "sendMessage" {
			return nil, badRequest("there is no text in the message to edit")
		}
		if m.Text == text && m.Raw == raw && m.ParseMode == p["parse_mode"] && slices.Equal(m.Buttons, buttons) {
			return nil, badRequest("message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message")
		}
		m.Text, m.Raw, m.ParseMode, m.Buttons = text, raw, p["parse_mode"], buttons
		m.Edits++
		return map[string]any{"message_id": id, "date": m.At.Unix(), "edit_date": time.Now().Unix(), "text": text,
			"chat": map[string]any{"id": chatID, "type": "private"}}, nil
	}
	return nil, badRequest("message can't be edited")
}

// deliver adds a message the bot sends to its chat, as a reply when
// reply_parameters name a message of the chat (a missing one is refused
// unless allow_sending_without_reply), and returns its id.
func (s *Strict) deliver(p map[string]string, m Sent) (int64, *apiError) {
	var reply struct {
		MessageID                int64 `json:"message_id"`
		AllowSendingWithoutReply bool  `json:"allow_sending_without_reply"`
	}
	if v := p["reply_parameters"]; v != "" && json.Unmarshal([]byte(v), &reply) != nil {
		return 0, badRequest("can't parse reply_parameters JSON object")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.chat(m.ChatID)
	if reply.MessageID != 0 && !c.ids[reply.MessageID] {
		if !reply.AllowSendingWithoutReply {
			return 0, badRequest("message to be replied not found")
		}
		reply.MessageID = 0
	}
	c.lastID++
	c.ids[c.lastID] = true
	m.MessageID, m.ReplyTo, m.At = c.lastID, reply.MessageID, time.Now()
	c.sent = append(c.sent, m)
	return c.lastID, nil
}

func badRequest(desc string) *apiError { return &apiError{status: 400, desc: "Bad Request: " + desc} }

func writeAPI(w http.ResponseWriter, result any, e *apiError) {
	w.Header().Set("Content-Type", "application/json")
	if e != nil {
		body := map[string]any{"ok": false, "error_code": e.status, "description": e.desc}
		if e.retryAfter > 0 {
			body["parameters"] = map[string]any{"retry_after": e.retryAfter}
		}
		w.WriteHeader(e.status)
		_ = json.NewEncoder(w).Encode(body)
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "result": result})
}

// readParams reads a Bot API call's parameters from the query and a JSON,
// urlencoded or multipart body. JSON values that are not strings are kept
// as their JSON text.
func readParams(r *http.Request) (map[string]string, error) {
	p := map[string]string{}
	for k, v := range r.URL.Query() {
		p[k] = v[0]
	}
	if r.Body == nil {
		return p, nil
	}
	// Whatever is left of the body is read, so that a client that goes
	// away is noticed (the request's context ends) during a hold.
	defer func() { _, _ = io.Copy(io.Discard, r.Body) }()
	mt, mp, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch mt {
	case "", "application/x-www-form-urlencoded":
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		vals, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, err
		}
		for k, v := range vals {
			p[k] = v[0]
		}
	case "application/json":
		var m map[string]json.RawMessage
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil && err != io.EOF {
			return nil, fmt.Errorf("can't parse JSON: %v", err)
		}
		for k, v := range m {
			var s string
			if json.Unmarshal(v, &s) == nil {
				p[k] = s
			} else {
				p[k] = string(v)
			}
		}
	case "multipart/form-data":
		mr := multipart.NewReader(r.Body, mp["boundary"])
		for {
			part, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, err
			}
			v, _ := io.ReadAll(part)
			p[part.FormName()] = string(v)
			if part.FileName() != "" {
				p[part.FormName()+"#filename"] = part.FileName()
			}
		}
	default:
		return nil, fmt.Errorf("unsupported content type %q", mt)
	}
	return p, nil
}

func validCommand(c string) bool {
	if len(c) < 1 || len(c) > 32 {
		return false
	}
	for _, r := range c {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return false
		}
	}
	return true
}

// htmlTags are the tags Telegram's HTML parse mode knows.
var htmlTags = map[string]bool{
	"b": true, "strong": true, "i": true, "em": true, "u": true, "ins": true, "s": true, "strike": true,
	"del": true, "span": true, "tg-spoiler": true, "a": true, "tg-emoji": true, "code": true, "pre": true,
	"blockquote": true,
}

// parseHTML returns the visible text of Telegram HTML, or why Telegram
// would refuse it: an unknown tag, a tag not closed or closed out of order,
// an unknown named entity, a bare "<".
func parseHTML(s string) (string, error) {
	var out strings.Builder
	var stack []string
	for i := 0; i < len(s); {
		switch s[i] {
		case '<':
			end := strings.IndexByte(s[i:], '>')
			if end < 0 {
				return "", fmt.Errorf("unclosed start tag at byte offset %d", i)
			}
			tag := s[i+1 : i+end]
			closing := strings.HasPrefix(tag, "/")
			name := strings.TrimPrefix(tag, "/")
			if sp := strings.IndexAny(name, " \t\n"); sp >= 0 {
				if closing {
					return "", fmt.Errorf("unexpected end tag at byte offset %d", i)
				}
				name = name[:sp]
			}
			name = strings.ToLower(name)
			if !htmlTags[name] {
				return "", fmt.Errorf("unsupported start tag %q at byte offset %d", name, i)
			}
			if closing {
				if len(stack) == 0 || stack[len(stack)-1] != name {
					return "", fmt.Errorf("can't find end tag corresponding to start tag at byte offset %d", i)
				}
				stack = stack[:len(stack)-1]
			} else {
				stack = append(stack, name)
			}
			i += end + 1
		case '&':
			end := strings.IndexByte(s[i:], ';')
			if end < 0 || end > 10 {
				out.WriteByte('&') // a lone ampersand is text
				i++
				continue
			}
			ent := s[i+1 : i+end]
			switch {
			case ent == "lt":
				out.WriteByte('<')
			case ent == "gt":
				out.WriteByte('>')
			case ent == "amp":
				out.WriteByte('&')
			case ent == "quot":
				out.WriteByte('"')
			case strings.HasPrefix(ent, "#x") || strings.HasPrefix(ent, "#X"):
				n, err := strconv.ParseUint(ent[2:], 16, 32)
				if err != nil {
					return "", fmt.Errorf("unsupported HTML entity %q", "&"+ent+";")
				}
				out.WriteRune(rune(n))
			case strings.HasPrefix(ent, "#"):
				n, err := strconv.ParseUint(ent[1:], 10, 32)
				if err != nil {
					return "", fmt.Errorf("unsupported HTML entity %q", "&"+ent+";")
				}
				out.WriteRune(rune(n))
			default:
				return "", fmt.Errorf("unsupported HTML entity %q", "&"+ent+";")
			}
			i += end + 1
		default:
			out.WriteByte(s[i])
			i++
		}
	}
	if len(stack) > 0 {
		return "", fmt.Errorf("can't find end tag corresponding to start tag %q", stack[len(stack)-1])
	}
	return out.String(), nil
}

// inlineKeyboard checks reply_markup as the Bot API does for an inline
// keyboard and returns its buttons' callback_data ("" when absent).
func inlineKeyboard(raw string) ([]string, *apiError) {
	if raw == "" {
		return nil, nil
	}
	var m struct {
		InlineKeyboard [][]struct {
			Text         string  `json:"text"`
			CallbackData *string `json:"callback_data"`
			URL          string  `json:"url"`
		} `json:"inline_keyboard"`
	}
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		return nil, badRequest("can't parse reply keyboard markup JSON object")
	}
	var out []string
	for _, row := range m.InlineKeyboard {
		for _, b := range row {
			if b.Text == "" {
				return nil, badRequest("text buttons are unallowed in the inline keyboard")
			}
			if b.CallbackData == nil && b.URL == "" {
				return nil, badRequest("BUTTON_TYPE_INVALID")
			}
			if b.CallbackData != nil {
				if n := len(*b.CallbackData); n < 1 || n > 64 {
					return nil, badRequest("BUTTON_DATA_INVALID")
				}
				out = append(out, *b.CallbackData)
			}
		}
	}
	return out, nil
}

// Press makes user u press the inline button with data under message
// messageID of chatID, as a callback_query update, and returns the
// query's id. The message must be one the bot sent there.
func (s *Strict) Press(u User, chatID, messageID int64, data string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.chat(chatID)
	text := ""
	for _, m := range c.sent {
		if m.MessageID == messageID {
			text = m.Text
		}
	}
	s.lastQuery++
	id := strconv.FormatInt(s.lastQuery, 10) + "000"
	if s.queries == nil {
		s.queries = map[string]*string{}
	}
	s.queries[id] = nil
	q := map[string]any{
		"id": id, "chat_instance": "1", "data": data,
		"from": map[string]any{"id": u.ID, "is_bot": false, "first_name": u.FirstName, "username": u.Username},
		"message": map[string]any{"message_id": messageID, "date": time.Now().Unix(), "text": text,
			"chat": map[string]any{"id": chatID, "type": "private"}},
	}
	upd, _ := json.Marshal(map[string]any{"update_id": s.nextUpd, "callback_query": q})
	s.nextUpd++
	s.updates = append(s.updates, upd)
	close(s.changed)
	s.changed = make(chan struct{})
	return id
}

// Answer returns the text a callback query was answered with and whether
// it was answered.
func (s *Strict) Answer(queryID string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.queries[queryID]
	if a == nil {
		return "", false
	}
	return *a, true
}

// answerCallbackQuery answers a query once, as the Bot API does.
func (s *Strict) answerCallbackQuery(p map[string]string) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.queries[p["callback_query_id"]]
	if !ok || a != nil {
		return nil, badRequest("query is too old and response timeout expired or query ID is invalid")
	}
	if n := len([]rune(p["text"])); n > 200 {
		return nil, badRequest("MESSAGE_TOO_LONG")
	}
	text := p["text"]
	s.queries[p["callback_query_id"]] = &text
	return true, nil
}
