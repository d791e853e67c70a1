package openai

import (
	"context"
	"encoding/json"

	"github.com/switchboard/switchboard/services"
)

// turnResult is the agent's answer to one inbound message.
type turnResult struct {
	content string
	// notice is the run status of a system notice ("error", "timeout", …);
	// empty for an answer. meta is the notice's metadata (what failed).
	notice string
	meta   services.MessageMeta
	runID  int64
	msgID  int64
}

// turnWaiter follows a timeline's subscription until the answer to one
// message arrives, handing streamed text of that message's run to onDelta.
type turnWaiter struct {
	ch       *Channel
	timeline string
	msgID    int64
	// runs caches whether a run id belongs to the message (true) or not.
	runs    map[int64]bool
	onDelta func(text string) error
}

// wait reads sub until the reply arrives, ctx ends, or the subscription is
// dropped; a dropped subscription is replaced and the reply looked up in
// the timeline, so a slow reader loses nothing.
func (w *turnWaiter) wait(ctx context.Context, sub services.Subscription) (turnResult, error) {
	for {
		select {
		case <-ctx.Done():
			return turnResult{}, ctx.Err()
		case it, ok := <-sub.Items():
			if !ok {
				next, res, found, err := w.resubscribe(ctx)
				if err != nil || found {
					return res, err
				}
				sub = next
				continue
			}
			if res, done, err := w.item(ctx, it); done || err != nil {
				return res, err
			}
		}
	}
}

// resubscribe replaces a dropped subscription and looks for a reply stored
// meanwhile. The caller unsubscribes the returned subscription.
func (w *turnWaiter) resubscribe(ctx context.Context) (services.Subscription, turnResult, bool, error) {
	hub, chat := w.ch.deps.Hub, w.ch.deps.Chat
	sub, err := hub.Subscribe(ctx, w.timeline, 1024)
	if err != nil {
		return nil, turnResult{}, false, err
	}
	after := w.msgID
	for {
		page, err := chat.TimelineAfter(ctx, w.timeline, after, 500)
		if err != nil {
			hub.Unsubscribe(sub)
			return nil, turnResult{}, false, err
		}
		for _, m := range page.Messages {
			if res, ok := w.reply(m); ok {
				hub.Unsubscribe(sub)
				return nil, res, true, nil
			}
			after = m.ID
		}
		if len(page.Messages) < 500 {
			break
		}
	}
	// The caller's deferred Unsubscribe only holds the first subscription.
	go func() { <-ctx.Done(); hub.Unsubscribe(sub) }()
	return sub, turnResult{}, false, nil
}

// item handles one subscription item; done when it is the reply.
func (w *turnWaiter) item(ctx context.Context, it services.TimelineItem) (turnResult, bool, error) {
	if it.Message != nil {
		res, ok := w.reply(*it.Message)
		return res, ok, nil
	}
	e := it.Event
	if e == nil || e.RunID == 0 || (e.Type != services.EventDelta && e.Type != services.EventRun) {
		return turnResult{}, false, nil
	}
	mine, known := w.runs[e.RunID]
	if !known {
		mine = w.ownsRun(ctx, e.RunID)
		w.runs[e.RunID] = mine
	}
	if !mine || e.Type != services.EventDelta || w.onDelta == nil {
		return turnResult{}, false, nil
	}
	var d struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(e.Data, &d) != nil || d.Text == "" {
		return turnResult{}, false, nil
	}
	return turnResult{}, false, w.onDelta(d.Text)
}

// ownsRun reports whether runID was triggered by the waiter's message.
// Without a RunReader no run is known, so no text streams before the end.
func (w *turnWaiter) ownsRun(ctx context.Context, runID int64) bool {
	if w.ch.deps.Runs == nil {
		return false
	}
	run, err := w.ch.deps.Runs.GetRun(ctx, runID)
	if err != nil {
		w.ch.log.Warn("api: read run", "run_id", runID, "err", err)
		return false
	}
	return run.TriggerMessageID == w.msgID
}

// reply reports whether m answers the waiter's message.
func (w *turnWaiter) reply(m services.Message) (turnResult, bool) {
	meta := m.Meta
	if m.Role != services.RoleAssistant || meta.ReplyTo != w.msgID || (meta.Notice != "" && meta.Notice != services.NoticeOfflineModel) {
		return turnResult{}, false
	}
	res := turnResult{content: m.Content, runID: meta.RunID, msgID: m.ID, meta: meta}
	if m.Source == services.SourceSystem && meta.RunStatus != "" && meta.RunStatus != services.RunOK {
		res.notice = string(meta.RunStatus)
	}
	if meta.Notice == services.NoticeOfflineModel {
		res.notice = services.NoticeOfflineModel
	}
	return res, true
}

// usageOf reads the provider-reported usage of the answer's run (zero when
// unknown: a command's answer, or no RunReader).
func (ch *Channel) usageOf(ctx context.Context, runID int64) Usage {
	if runID == 0 || ch.deps.Runs == nil {
		return Usage{}
	}
	run, err := ch.deps.Runs.GetRun(ctx, runID)
	if err != nil {
		return Usage{}
	}
	return Usage{PromptTokens: run.PromptTokens, CompletionTokens: run.CompletionTokens,
		TotalTokens: run.PromptTokens + run.CompletionTokens}
}
