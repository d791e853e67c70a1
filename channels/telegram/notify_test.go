package telegram

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/switchboard/switchboard/services"
)

type recordingQueue struct{ got []services.Outbound }

func (q *recordingQueue) EnqueueOutbound(_ context.Context, o services.Outbound) error {
	q.got = append(q.got, o)
	return nil
}

func (q *recordingQueue) EnqueueOutboundTx(ctx context.Context, _ services.Tx, o services.Outbound) error {
	return q.EnqueueOutbound(ctx, o)
}

// TestNotifyOwnerReachesTheTimelinesChats: a schedule's notification in the
// owner's timeline goes to each of the owner's chats, one in a Telegram
// user's own timeline to that user's chat, each in the chat's lane with a
// key of its own; other timelines have no Telegram chat.
func TestNotifyOwnerReachesTheTimelinesChats(t *testing.T) {
	t.Parallel()
	q := &recordingQueue{}
	r := Router{Queue: q, OwnerChats: []int64{1, 2}}
	for _, m := range []services.Message{
		{ID: 10, TimelineScope: services.DefaultTimeline, Content: "for the owner"},
		{ID: 11, TimelineScope: "tg:42", Content: "for user 42"},
		{ID: 12, TimelineScope: "elsewhere", Content: "for nobody"},
	} {
		if err := r.NotifyOwnerTx(context.Background(), testTx{}, m); err != nil {
			t.Fatal(err)
		}
	}
	want := []struct {
		lane, key, text string
		chat            int64
	}{{"chat:1", "notify:10:1", "for the owner", 1}, {"chat:2", "notify:10:2", "for the owner", 2}, {"chat:42", "notify:11:42", "for user 42", 42}}
	if len(q.got) != len(want) {
		t.Fatalf("deliveries: %+v", q.got)
	}
	for i, w := range want {
		var p OutboundPayload
		if err := json.Unmarshal(q.got[i].Payload, &p); err != nil {
			t.Fatal(err)
		}
		if q.got[i].Lane != w.lane || q.got[i].Key != w.key || p.ChatID != w.chat || p.Text != w.text || p.ReplyToMessageID != 0 {
			t.Errorf("delivery %d: %+v %+v, want %+v", i, q.got[i], p, w)
		}
	}
}
