package e2e

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/switchboard/switchboard/channels/telegram/tgtest"
	"github.com/switchboard/switchboard/services/llm/llmtest"
)

// Real `switchboard serve` processes against tgtest.Strict, a Bot API
// server that refuses what Telegram refuses (over 4096 characters after
// entity parsing, HTML it cannot parse, empty texts) and takes a realistic
// time per sendMessage.

// longAnswer is Markdown of about size bytes: numbered paragraphs with
// inline formatting and characters HTML must escape, and Go code blocks.
// Every paragraph carries a marker [[Pnnn]] so the order of what arrives
// can be checked.
func longAnswer(size int) (string, int) {
	var b strings.Builder
	n := 0
	for b.Len() < size {
		n++
		fmt.Fprintf(&b, "[[P%03d]] Paragraph %d has **bold**, _italic_ and `inline <code> & more` text, "+
			"a comparison a < b && c > d, and enough words to fill a line or two of a phone screen.\n\n", n, n)
		if n%6 == 0 {
			fmt.Fprintf(&b, "```go\nfunc step%d(a, b int) bool {\n\t// a < b && b > 0\n\treturn a < b && b > 0\n}\n```\n\n", n)
		}
	}
	return b.String(), n
}

var markerRE = regexp.MustCompile(`\[\[P(\d{3})\]\]`)

// markers returns the paragraph numbers in the order they appear.
func markers(msgs []tgtest.Sent) []int {
	var out []int
	for _, m := range msgs {
		for _, sm := range markerRE.FindAllStringSubmatch(m.Text, -1) {
			n, _ := strconv.Atoi(sm[1])
			out = append(out, n)
		}
	}
	return out
}

func telegramEnv(strict *tgtest.Strict, model *llmtest.Server, token string) []string {
	return []string{"WEB_AUTH_TOKEN=" + token,
		"TELEGRAM_BOT_TOKEN=" + strict.Token, "TELEGRAM_OWNER_IDS=" + strconv.FormatInt(ownerTGID, 10), "TELEGRAM_API_URL=" + strict.URL,
		"LLM_PROVIDER=openai", "LLM_BASE_URL=" + model.OpenAIBaseURL(), "LLM_MODEL=gpt-4o-mini", "LLM_API_KEY=sk-fault-test"}
}

// TestFaultTelegramLongAnswerThenStatus: a 41 KB Markdown answer with code
// reaches the owner's chat whole, as HTML messages Telegram accepts (none
// over 4096 characters after entity parsing, none sent as a plain-text
// fallback), every paragraph once and in order; and /status, sent as the
// first chunk arrives while each sendMessage takes 0.4 s, is answered
// after the last chunk, not between two chunks.
func TestFaultTelegramLongAnswerThenStatus(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	db := migratedDB(t)
	strict := tgtest.StartStrict(t, tgToken)
	strict.SetLatency(400 * time.Millisecond)
	answer, paragraphs := longAnswer(41_000)
	model := llmtest.NewServer(t)
	model.Enqueue(llmtest.Text(answer))
	startProc(t, bin, db, telegramEnv(strict, model, "tg-long-token-0123456789")...)

	owner := tgtest.User{ID: ownerTGID, FirstName: "Owner"}
	strict.Send(owner, "write me something long")
	if got := strict.WaitMessages(ownerTGID, 1, 30*time.Second); len(got) == 0 {
		t.Fatal("no part of the answer arrived within 30s")
	}
	strict.Send(owner, "/status") // mid-answer: about ten more chunks at 0.4 s each are to come

	var msgs []tgtest.Sent
	statusAt := -1
	waitUntil(60*time.Second, func() bool {
		msgs = strict.Messages(ownerTGID)
		statusAt = -1
		for i, m := range msgs {
			if strings.HasPrefix(m.Text, "Model: ") {
				statusAt = i
			}
		}
		got := markers(msgs)
		return statusAt >= 0 && len(got) > 0 && got[len(got)-1] == paragraphs
	})
	if statusAt < 0 {
		t.Fatalf("no /status reply within 60s; the chat has %d messages", len(msgs))
	}
	for i, m := range msgs[statusAt+1:] {
		if markerRE.MatchString(m.Text) {
			t.Fatalf("the /status reply arrived as message %d, between the chunks of the answer (chunk %d came after it)", statusAt+1, statusAt+2+i)
		}
	}
	chunks := msgs[:statusAt]
	if len(answer) < 40_000 || len(chunks) < 11 {
		t.Fatalf("a %d-byte answer arrived as %d messages; want at least 11 of at most 4096 characters", len(answer), len(chunks))
	}
	for i, m := range chunks {
		if m.ParseMode != "HTML" {
			t.Errorf("chunk %d was sent with parse mode %q (a plain-text fallback?)", i, m.ParseMode)
		}
		if n := len(utf16.Encode([]rune(m.Text))); n > 4096 {
			t.Errorf("chunk %d has %d characters after entity parsing", i, n)
		}
		if strings.Contains(m.Text, "could not be delivered") {
			t.Errorf("chunk %d is an undeliverable notice: %q", i, m.Text)
		}
	}
	got := markers(chunks)
	if len(got) != paragraphs {
		t.Fatalf("%d paragraph markers arrived, want %d", len(got), paragraphs)
	}
	for i, n := range got {
		if n != i+1 {
			t.Fatalf("paragraph %d arrived in position %d: the answer is out of order or repeated", n, i+1)
		}
	}
	if !strings.Contains(chunks[0].Text, "a < b && c > d") || !strings.Contains(strings.Join(textsOf(chunks), ""), "return a < b && b > 0") {
		t.Fatalf("escaped text or code did not survive: %q", chunks[0].Text[:200])
	}
}

func textsOf(msgs []tgtest.Sent) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Text
	}
	return out
}

// TestFaultKill9MidTelegramSend: the process is killed while Telegram has
// processed a chunk's sendMessage but not yet answered it. The next
// process, started 3 s later, resumes the delivery within seconds (not at
// the queue's stuck-job rescue, minutes later): every other chunk arrives
// once and in order, and the chunk in flight is sent again at most once,
// with a warning in the log saying so.
func TestFaultKill9MidTelegramSend(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	db := migratedDB(t)
	strict := tgtest.StartStrict(t, tgToken)
	strict.Script(func(method string, n int) tgtest.Fault {
		if method == "sendMessage" && n == 3 {
			return tgtest.Fault{HoldAfter: 5 * time.Minute} // delivered; the answer never comes
		}
		return tgtest.Fault{}
	})
	answer, paragraphs := longAnswer(20_000)
	model := llmtest.NewServer(t)
	model.Enqueue(llmtest.Text(answer))
	env := telegramEnv(strict, model, "tg-kill-token-0123456789")
	a := startProc(t, bin, db, env...)

	strict.Send(tgtest.User{ID: ownerTGID, FirstName: "Owner"}, "write me something long")
	if got := strict.WaitMessages(ownerTGID, 3, 30*time.Second); len(got) < 3 {
		t.Fatalf("%d chunks arrived before the crash, want 3", len(got))
	}
	a.kill9()
	time.Sleep(3 * time.Second) // why kept: the scenario's downtime (the next process starts 3 s after the crash, as the doc says); real processes, not a bubble
	b := startProc(t, bin, db, env...)
	restarted := time.Now()

	var msgs []tgtest.Sent
	// The checks below say what is missing if this gives up.
	pollEvery(30*time.Second, 50*time.Millisecond, func() bool {
		msgs = strict.Messages(ownerTGID)
		got := markers(msgs)
		return len(got) > 0 && got[len(got)-1] == paragraphs
	})
	took := time.Since(restarted)
	got := markers(msgs)
	if len(got) == 0 || got[len(got)-1] != paragraphs {
		t.Fatalf("the rest of the answer did not arrive within 30s of the restart (%d messages)", len(msgs))
	}
	t.Logf("the rest of the answer arrived %s after the restart, in %d messages", took.Round(time.Millisecond), len(msgs))
	// Chunk 3 (index 2) was in flight: it may be there twice, nothing else.
	texts := textsOf(msgs)
	dups := 0
	for i := 1; i < len(texts); i++ {
		if texts[i] == texts[i-1] {
			dups++
			if i != 3 {
				t.Fatalf("message %d repeats message %d, which was not the chunk in flight", i, i-1)
			}
		}
	}
	if len(msgs)-dups != len(uniq(texts)) {
		t.Fatalf("a chunk other than the one in flight arrived twice")
	}
	if dups > 0 && !strings.Contains(b.Stderr.String(), "resending a chunk") {
		t.Fatalf("the chunk in flight was sent again without a warning in the log")
	}
	want := 0
	for _, n := range got {
		if n == want+1 {
			want = n
		} else if n > want+1 {
			t.Fatalf("paragraph %d arrived before paragraph %d", n, want+1)
		}
	}
}

func uniq(s []string) map[string]bool {
	m := map[string]bool{}
	for _, x := range s {
		m[x] = true
	}
	return m
}

// TestFaultTelegramServerErrorsLoseNothing: chunks of an answer answered
// with server errors — a 500 (ok:false) then a proxy's 502 HTML page on
// one, two 502 pages on another, two 500s on a third — all arrive, once and
// in order, and nobody is told a part was refused.
func TestFaultTelegramServerErrorsLoseNothing(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	db := migratedDB(t)
	strict := tgtest.StartStrict(t, tgToken)
	page := tgtest.Fault{Page: tgtest.ProxyPage}
	five := tgtest.Fault{Status: 500, Description: "Internal Server Error"}
	faults := map[int]tgtest.Fault{2: five, 3: page, 5: page, 6: page, 8: five, 9: five}
	strict.Script(func(method string, n int) tgtest.Fault {
		if method == "sendMessage" {
			return faults[n]
		}
		return tgtest.Fault{}
	})
	answer, paragraphs := longAnswer(14_000)
	model := llmtest.NewServer(t)
	model.Enqueue(llmtest.Text(answer))
	startProc(t, bin, db, telegramEnv(strict, model, "tg-5xx-token-0123456789")...)

	strict.Send(tgtest.User{ID: ownerTGID, FirstName: "Owner"}, "write me something long")
	var msgs []tgtest.Sent
	// The checks below say what is missing if this gives up.
	waitUntil(90*time.Second, func() bool {
		msgs = strict.Messages(ownerTGID)
		got := markers(msgs)
		return len(got) > 0 && got[len(got)-1] == paragraphs
	})
	if strict.Calls("sendMessage") < 9 {
		t.Fatalf("only %d sendMessage calls: the faults were not all met", strict.Calls("sendMessage"))
	}
	for i, m := range msgs {
		if strings.Contains(m.Text, "could not be delivered") || strings.Contains(m.Text, "refused") {
			t.Fatalf("message %d tells the user: %q", i, m.Text)
		}
	}
	got := markers(msgs)
	if len(got) != paragraphs {
		t.Fatalf("%d paragraph markers arrived, want %d", len(got), paragraphs)
	}
	for i, n := range got {
		if n != i+1 {
			t.Fatalf("paragraph %d arrived in position %d: the answer is out of order or repeated", n, i+1)
		}
	}
}
