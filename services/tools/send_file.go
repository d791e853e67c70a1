package tools

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/switchboard/switchboard/services"
)

type sendFileArgs struct {
	Path    string `json:"path" jsonschema:"Path of the file in the workspace, as the file tools name it."`
	Caption string `json:"caption,omitempty" jsonschema:"A short text sent with the file. Default none."`
}

// SendFile is the send_file tool: a workspace file goes to the owner as
// a message of its own (Telegram: a photo or a document; the web page and
// the terminal client: a download link), through the durable outbound
// path: read and saved as an attachment in Media, posted through Chat.
type SendFile struct {
	Media services.Media
	Chat  Poster
	Runs  RunReader
}

// Register adds send_file.
func (t SendFile) Register(reg *Registry) error {
	if t.Media == nil || t.Chat == nil || t.Runs == nil {
		return errors.New("send_file: Media, Chat and Runs are required")
	}
	return reg.Register(Func("send_file", services.EffectEgress,
		"Send a file from the workspace to the owner (an image arrives as a photo on Telegram, anything else as a document; "+
			"the web page shows a download link). Each call sends once; say in your answer what you sent.",
		t.handle).WithHistory(HistoryRule{MaxChars: 300}))
}

func (t SendFile) handle(ctx context.Context, call Call, args sendFileArgs) (Result, error) {
	if strings.TrimSpace(args.Path) == "" {
		return Result{}, services.Errorf(services.EINVALID, "path is empty: name a file of the workspace")
	}
	data, err := t.Media.Read(ctx, call.TimelineScope, args.Path)
	if err != nil {
		return Result{}, err
	}
	if int64(len(data)) > t.Media.MaxBytes() {
		return Result{}, services.Errorf(services.ETOOLARGE, "%s is %s; files sent are at most %s (MEDIA_MAX_BYTES)",
			args.Path, services.HumanBytes(int64(len(data))), services.HumanBytes(t.Media.MaxBytes()))
	}
	a, err := t.Media.Save(ctx, call.TimelineScope, services.Upload{Name: path.Base(args.Path), Data: data})
	if err != nil {
		return Result{}, err
	}
	p := services.PostParams{
		TimelineScope: call.TimelineScope, Source: services.SourceAgent, Role: services.RoleAssistant,
		Content: strings.TrimSpace(args.Caption), Attachments: []services.Attachment{a},
		// One message per call: a call replayed after a crash stores and
		// delivers nothing twice.
		DedupeKey: fmt.Sprintf("run:%d:send_file:%s", call.RunID, call.CallID),
		Metadata:  services.MessageMeta{RunID: call.RunID, Kind: services.MetaFileSent}.Encode(),
	}
	if strings.HasPrefix(call.ContextScope, "sched:") {
		p.NotifyOwner = true // a schedule's fire answers nobody: the owner's channels get it
	} else {
		p.ReplyTo = TriggerOf(ctx, t.Runs, call.RunID)
	}
	msg, _, err := t.Chat.Post(ctx, p)
	if err != nil {
		return Result{}, err
	}
	return JSONResult(map[string]any{"status": "sent", "file": a.DisplayName(), "kind": a.Kind, "mime_type": a.MIMEType,
		"size": a.Size, "message_id": msg.ID})
}
