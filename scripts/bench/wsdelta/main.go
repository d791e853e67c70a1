// Command wsdelta measures the time from the model's first token to the
// first delta event on a websocket client, through a running server: it
// connects to /api/ws as the chat page does, posts one message at a time
// (a post frame) and waits for its answer. The model is scripts/bench/fakellm
// -first-pause D, whose first token is "t=<unix ns> " (its wall clock just
// before writing that chunk) and whose other tokens follow D later; the
// client subtracts that stamp from the wall time the first delta frame of
// the turn arrived. Both run on the same machine, so they share the clock.
//
//	go run ./scripts/bench/fakellm -addr 127.0.0.1:19900 -first-pause 200ms
//	go run ./scripts/bench/wsdelta -url http://127.0.0.1:19082 -token T -n 200
//
// Output is one "name value" line per figure, for scripts to pick up.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/switchboard/switchboard/web/wire"
)

// stampPrefix begins fakellm -first-pause's first token.
const stampPrefix = "t="

func main() {
	url := flag.String("url", "http://127.0.0.1:8080", "server root (/api/ws is appended)")
	token := flag.String("token", os.Getenv("SWITCHBOARD_TOKEN"), "bearer token")
	n := flag.Int("n", 200, "measured turns")
	warm := flag.Int("warmup", 5, "turns before measuring")
	timeout := flag.Duration("timeout", 60*time.Second, "timeout of one turn")
	prefix := flag.String("label", "", "prefix of every output name")
	flag.Parse()
	out := func(name string, v any) { fmt.Printf("%s%s %v\n", *prefix, name, v) }
	if err := run(*url, *token, *n, *warm, *timeout, out); err != nil {
		fmt.Fprintln(os.Stderr, "wsdelta:", err)
		os.Exit(1)
	}
}

// frame is a server frame and the wall time it was read.
type frame struct {
	f  wire.Frame
	at time.Time
}

// turn is one measured turn.
type turn struct {
	firstDelta time.Duration // model's first token → first delta frame read
	postDelta  time.Duration // post frame written → first delta frame read
	answer     time.Duration // post frame written → answer message read
	deltas     int           // delta frames of the turn
}

func run(base, token string, n, warm int, timeout time.Duration, out func(string, any)) error {
	ctx := context.Background()
	wsURL := "ws" + strings.TrimPrefix(strings.TrimRight(base, "/"), "http") + "/api/ws"
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	conn, _, err := websocket.Dial(dctx, wsURL, &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + token}},
	})
	cancel()
	if err != nil {
		return fmt.Errorf("dial %s: %w", wsURL, err)
	}
	defer conn.CloseNow()
	conn.SetReadLimit(1 << 20)
	frames := make(chan frame, 1024)
	readErr := make(chan error, 1)
	go func() {
		for {
			_, b, err := conn.Read(ctx)
			at := time.Now()
			if err != nil {
				readErr <- err
				return
			}
			var f wire.Frame
			if err := json.Unmarshal(b, &f); err != nil {
				readErr <- fmt.Errorf("frame %.200s: %w", b, err)
				return
			}
			frames <- frame{f, at}
		}
	}()
	next := func(deadline <-chan time.Time) (frame, error) {
		select {
		case fr := <-frames:
			if fr.f.Type == wire.FrameError {
				return fr, fmt.Errorf("error frame: %s (%s)", fr.f.Error, fr.f.Code)
			}
			return fr, nil
		case err := <-readErr:
			return frame{}, err
		case <-deadline:
			return frame{}, errors.New("timed out")
		}
	}
	ready := time.After(10 * time.Second)
	for {
		fr, err := next(ready)
		if err != nil {
			return fmt.Errorf("waiting for ready: %w", err)
		}
		if fr.f.Type == wire.FrameReady {
			break
		}
	}

	tag := strconv.FormatInt(time.Now().UnixNano(), 36)
	var turns []turn
	for i := 0; i < warm+n; i++ {
		t, err := oneTurn(ctx, conn, next, fmt.Sprintf("wsdelta %s turn %d", tag, i), fmt.Sprintf("wsdelta-%s-%d", tag, i), timeout)
		if err != nil {
			return fmt.Errorf("turn %d: %w", i, err)
		}
		if i >= warm {
			turns = append(turns, t)
		}
	}
	if len(turns) == 0 {
		return nil
	}
	pick := func(f func(turn) time.Duration) []time.Duration {
		l := make([]time.Duration, len(turns))
		for i, t := range turns {
			l[i] = f(t)
		}
		sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
		return l
	}
	fd := pick(func(t turn) time.Duration { return t.firstDelta })
	pd := pick(func(t turn) time.Duration { return t.postDelta })
	an := pick(func(t turn) time.Duration { return t.answer })
	deltas := 0
	for _, t := range turns {
		deltas += t.deltas
	}
	out("turns", len(turns))
	out("first_delta_p50_ms", ms(pct(fd, 0.50)))
	out("first_delta_p95_ms", ms(pct(fd, 0.95)))
	out("first_delta_p99_ms", ms(pct(fd, 0.99)))
	out("first_delta_max_ms", ms(fd[len(fd)-1]))
	out("first_delta_min_ms", ms(fd[0]))
	out("post_to_first_delta_p50_ms", ms(pct(pd, 0.50)))
	out("post_to_first_delta_p99_ms", ms(pct(pd, 0.99)))
	out("post_to_answer_p50_ms", ms(pct(an, 0.50)))
	out("delta_frames_per_turn", fmt.Sprintf("%.2f", float64(deltas)/float64(len(turns))))
	return nil
}

// oneTurn posts content and reads frames until its answer arrives.
func oneTurn(ctx context.Context, conn *websocket.Conn, next func(<-chan time.Time) (frame, error), content, key string, timeout time.Duration) (turn, error) {
	b, _ := json.Marshal(wire.Frame{Type: wire.FramePost, Content: content, ClientKey: key, Source: "web"})
	deadline := time.After(timeout)
	sent := time.Now()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err := conn.Write(wctx, websocket.MessageText, b)
	cancel()
	if err != nil {
		return turn{}, err
	}
	var t turn
	var posted int64 // id of our message, once it is back
	var seen bool
	for {
		fr, err := next(deadline)
		if err != nil {
			return turn{}, err
		}
		switch {
		case fr.f.Type == wire.FrameMessage && fr.f.Message != nil:
			m := fr.f.Message
			if m.Role == "user" && m.Content == content {
				posted = m.ID
			}
			if posted != 0 && m.Role == "assistant" && (m.ReplyTo == posted || m.ReplyTo == 0) {
				if !seen {
					return turn{}, fmt.Errorf("answer %d arrived without a delta", m.ID)
				}
				t.answer = fr.at.Sub(sent)
				return t, nil
			}
		case fr.f.Type == wire.FrameEvent && fr.f.Event != nil && fr.f.Event.Type == wire.EventDelta:
			var d wire.DeltaData
			if err := json.Unmarshal(fr.f.Event.Data, &d); err != nil {
				return turn{}, fmt.Errorf("delta %s: %w", fr.f.Event.Data, err)
			}
			t.deltas++
			if seen {
				continue
			}
			rest, ok := strings.CutPrefix(d.Text, stampPrefix)
			if !ok {
				return turn{}, fmt.Errorf("first delta %q lacks the fake's stamp (run fakellm -first-pause)", d.Text)
			}
			digits, _, _ := strings.Cut(rest, " ")
			ns, err := strconv.ParseInt(digits, 10, 64)
			if err != nil {
				return turn{}, fmt.Errorf("first delta %q: %w", d.Text, err)
			}
			seen = true
			t.firstDelta = fr.at.Sub(time.Unix(0, ns))
			t.postDelta = fr.at.Sub(sent)
		}
	}
}

func pct(l []time.Duration, q float64) time.Duration { return l[int(q*float64(len(l)-1))] }

func ms(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d.Microseconds())/1000) }
