package web_test

import (
	"bytes"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/switchboard/switchboard/app"
	"github.com/switchboard/switchboard/app/apptest"
	"github.com/switchboard/switchboard/channels/telegram/tgtest"
	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm/llmtest"
	"github.com/switchboard/switchboard/web/browsertest"
)

// TestSendFileReachesTelegramOnceAndShowsAsALink: asked on Telegram, the
// agent's send_file reaches the chat once (sendDocument) and the web page
// shows the file as a link that downloads it; a picture attached with the
// page's button is uploaded with the message and shows as a thumbnail.
func TestSendFileReachesTelegramOnceAndShowsAsALink(t *testing.T) {
	t.Parallel()
	const token = "123456:web-media-token"
	strict := tgtest.StartStrict(t, token)
	model := llmtest.NewServer(t)
	in := apptest.Start(t, apptest.Options{Model: model, Token: testToken, Flags: services.Flags{ScopedWrite: true, ScopedRead: true},
		Configure: func(o *app.Config) {
			o.Telegram.Token, o.Telegram.APIURL, o.Telegram.OwnerIDs = token, strict.URL, []int64{1}
			o.Telegram.PollIdle = 50 * time.Millisecond
			o.Media.TranscribeURL = model.OpenAIBaseURL()
		}})
	model.Enqueue(llmtest.Call("write_file", `{"path":"report.txt","content":"Quarterly numbers: up.\n"}`),
		llmtest.Call("send_file", `{"path":"report.txt","caption":"The report"}`), llmtest.Text("Sent you the report."))
	strict.Send(tgtest.User{ID: 1, FirstName: "Owner"}, "Send me the report")
	got := strict.WaitMessages(1, 2, 30*time.Second)
	if len(got) != 2 || got[0].Method != "sendDocument" || got[0].FileName != "report.txt" || got[1].Text != "Sent you the report." {
		t.Fatalf("telegram: %d messages", len(got))
	}

	browser := browsertest.Shared(t)
	ctx := browsertest.Timeout(t, browsertest.NewContext(t, browser), 60*time.Second)
	if err := chromedp.Do(ctx, chromedp.Navigate(in.URL+"/login?token="+testToken), chromedp.WaitVisible(".conn.online")); err != nil {
		t.Fatal(err)
	}
	link, err := chromedp.Run(ctx, chromedp.Poll[string](`(() => { const a = document.querySelector("li.msg.assistant .attachments a.file"); return a ? a.download + "|" + a.textContent : null })()`,
		chromedp.WithPollingTimeout(10*time.Second)))
	if err != nil || !strings.HasPrefix(link, "report.txt|") || !strings.Contains(link, "23 B") {
		t.Fatalf("link on the page: %q %v", link, err)
	}
	body, err := chromedp.Run(ctx, chromedp.Evaluate[string](`fetch(document.querySelector("li.msg.assistant .attachments a.file").href).then(r => r.text())`,
		chromedp.EvalAwaitPromise))
	if err != nil || body != "Quarterly numbers: up.\n" {
		t.Fatalf("downloaded: %q %v", body, err)
	}

	var pic bytes.Buffer
	_ = png.Encode(&pic, image.NewRGBA(image.Rect(0, 0, 40, 30)))
	path := filepath.Join(t.TempDir(), "pic.png")
	if err := os.WriteFile(path, pic.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	model.Enqueue(llmtest.Text("Nice picture."))
	if err := chromedp.Do(ctx, chromedp.SetUploadFiles("#attach", []string{path}),
		chromedp.WaitVisible("#files .chip"), chromedp.SendKeys("#input", "look at this"), chromedp.Click("#send")); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`(() => { const img = document.querySelector("li.msg.user .attachments img.thumb"); return !!img && img.complete && img.naturalWidth === 40 && document.getElementById("files").hidden })()`,
		chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("thumbnail: %v", err)
	}

	// An audio file attached on the page is transcribed before the answer;
	// its transcript replaces "(not transcribed)" under the player live.
	model.SetTranscribe(func(llmtest.Transcription) llmtest.TranscriptReply {
		return llmtest.TranscriptReply{Text: "call the plumber"}
	})
	voice := filepath.Join(t.TempDir(), "memo.ogg")
	if err := os.WriteFile(voice, []byte("OggS fake audio"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.SetUploadFiles("#attach", []string{voice}), chromedp.WaitVisible("#files .chip"), chromedp.Click("#send")); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`[...document.querySelectorAll("li.msg.user figure.audio .transcript")].some(c => c.textContent === "call the plumber") && !!document.querySelector("li.msg.user audio[src^='/api/attachments/']")`,
		chromedp.WithPollingTimeout(15*time.Second))); err != nil {
		t.Fatalf("transcript under the player: %v", err)
	}
	// The player is one a person can see and press: rendered with its
	// controls, a box of its own, not hidden.
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`(() => { const a = document.querySelector("li.msg.user figure.audio audio[src^='/api/attachments/']"); if (!a) return false;
		a.scrollIntoView(); const r = a.getBoundingClientRect(); return a.controls && a.checkVisibility({visibilityProperty: true, opacityProperty: true}) && r.width >= 100 && r.height >= 20 })()`,
		chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("the audio player is not visible: %v", err)
	}
	if !poll(30*time.Second, func() bool {
		reqs := model.Requests()
		return strings.Contains(reqs[len(reqs)-1].LastMessage, `transcript: "call the plumber"`)
	}) {
		reqs := model.Requests()
		t.Fatalf("the model's input: %q", reqs[len(reqs)-1].LastMessage)
	}
	if n := len(strict.Messages(1)); n != 2 || strict.Calls("sendDocument") != 1 {
		t.Fatalf("telegram got %d messages, %d sendDocument", n, strict.Calls("sendDocument"))
	}
}
