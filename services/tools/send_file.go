package agent

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/tools"
)

type sendFileArgs struct {
	Path    string `json:"path" jsonschema:"Path of the file in the workspace, as the file tools name it."`
	Caption string `json:"caption,omitempty" jsonschema:"A short text sent with the file. Default none."`
}

// registerSendFile adds send_file: a workspace file goes to the owner as a
// message of its own (Telegram: a photo or a document; the web page and the
// terminal client: a download link), through the durable outbound path.
func (s *Service) registerSendFile(reg *tools.Registry) error {
	return reg.Register(tools.Func("send_file", services.EffectEgress,
		"Send a file from the workspace to the owner (an image arrives as a photo on Telegram, anything else as a document; "+
			"the web page shows a download link). Each call sends once; say in your answer what you sent.",
		s.handleSendFile).WithHistory(tools.HistoryRule{MaxChars: 300}))
}

func (s *Service) handleSendFile(ctx context.Context, call tools.Call, args sendFileArgs) (tools.Result, error) {
	if strings.TrimSpace(args.Path) == "" {
		return tools.Result{}, services.Errorf(services.EINVALID, "path is empty: name a file of the workspace")
	}
	data, err := s.opts.Media.Read(ctx, call.TimelineScope, args.Path)
	if err != nil {
		return tools.Result{}, err
	}
	if int64(len(data)) > s.opts.Media.MaxBytes() {
		return tools.Result{}, services.Errorf(services.ETOOLARGE, "%s is %s; files sent are at most %s (MEDIA_MAX_BYTES)",
			args.Path, services.HumanBytes(int64(len(data))), services.HumanBytes(s.opts.Media.MaxBytes()))
	}
	a, err := s.opts.Media.Save(ctx, call.TimelineScope, services.Upload{Name: path.Base(args.Path), Data: data})
	if err != nil {
		return tools.Result{}, err
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
		p.ReplyTo = s.triggerOf(ctx, call.RunID)
	}
	msg, _, err := s.opts.Chat.Post(ctx, p)
	if err != nil {
		return tools.Result{}, err
	}
	return tools.JSONResult(map[string]any{"status": "sent", "file": a.DisplayName(), "kind": a.Kind, "mime_type": a.MIMEType,
		"size": a.Size, "message_id": msg.ID})
}
