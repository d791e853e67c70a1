package agent

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard/switchboard/services"
)

// deltaRecorder is a Publisher keeping the text of every delta event.
type deltaRecorder struct {
	mu    sync.Mutex
	texts []string
}

func (r *deltaRecorder) Publish(_ context.Context, e services.Event) error {
	var d struct{ Text string }
	if e.Type != services.EventDelta || json.Unmarshal(e.Data, &d) != nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.texts = append(r.texts, d.Text)
	return nil
}

func (r *deltaRecorder) sent() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.texts...)
}

// TestDeltaStreamSendsTheFirstTextAtOnce: the owner sees an answer begin
// as soon as the model's first text arrives, even when the model then
// pauses; text that follows within the coalescing interval goes out
// together at the interval's end (even when the model pauses then) or the
// call's end, none of it lost and in order. The clock is synctest's, so nothing here depends on how fast
// the machine is.
func TestDeltaStreamSendsTheFirstTextAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pub := &deltaRecorder{}
		d := newDeltaStream(t.Context(), pub, services.Run{ID: 7, TimelineScope: "global"})
		d.add("The ")
		if got := pub.sent(); len(got) != 1 || got[0] != "The " {
			t.Fatalf("after the first text the client has %q, want [\"The \"] at once", got)
		}
		d.add("answer ")
		d.add("is ")
		if got := pub.sent(); len(got) != 1 {
			t.Fatalf("text right after the first went out alone: %q (want it coalesced)", got)
		}
		time.Sleep(deltaInterval) // inside the synctest bubble: fake time, the model pauses and what waited goes out
		synctest.Wait()           // (the timer's send runs beside this sleep's end)
		if got := pub.sent(); len(got) != 2 || got[1] != "answer is " {
			t.Fatalf("after a pause the client has %q, want the waiting text sent", got)
		}
		d.add("forty-two")
		d.add(".")
		d.flush() // the call ends
		want := []string{"The ", "answer is ", "forty-two."}
		got := pub.sent()
		if len(got) != len(want) {
			t.Fatalf("deltas %q, want %q", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("deltas %q, want %q", got, want)
			}
		}
		if d.all.String() != "The answer is forty-two." {
			t.Fatalf("the call's whole text is %q", d.all.String())
		}
	})
}

// TestDeltaStreamFirstTextOfEachCall: every model call of a run (one
// stream each, after a tool call) shows its first text at once too.
func TestDeltaStreamFirstTextOfEachCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pub := &deltaRecorder{}
		run := services.Run{ID: 8, TimelineScope: "global"}
		first := newDeltaStream(t.Context(), pub, run)
		first.add("Looking it up.")
		first.flush()
		second := newDeltaStream(t.Context(), pub, run)
		second.add("Found ")
		if got := pub.sent(); len(got) != 2 || got[1] != "Found " {
			t.Fatalf("deltas %q, want the second call's first text sent at once", got)
		}
	})
}
