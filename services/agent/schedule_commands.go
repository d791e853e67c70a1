package agent

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/tools"
)

// The owner's /schedules command (the model's schedule tools are
// services/tools/schedule_tools.go).

// localTime is t in sc's time zone, as the schedule tools show it.
func (s *Service) localTime(sc services.Schedule, t time.Time) string {
	return tools.LocalTime(s.opts.Fires, sc, t)
}

// cmdSchedules answers /schedules (the list) and /schedules pause|resume|
// delete ID.
func (s *Service) cmdSchedules(ctx context.Context, msg services.Message, args string) (string, error) {
	if s.opts.Schedules == nil {
		return "Schedules are not available on this server.", nil
	}
	verb, rest, _ := strings.Cut(strings.TrimSpace(args), " ")
	if verb == "" {
		return s.listSchedulesText(ctx, msg.TimelineScope)
	}
	id, err := strconv.ParseInt(strings.TrimPrefix(strings.TrimSpace(rest), "#"), 10, 64)
	if err != nil || id <= 0 {
		return "Usage: /schedules, or /schedules pause|resume|delete ID (ID from /schedules).", nil
	}
	var sc services.Schedule
	switch verb {
	case "pause", "resume":
		state := string(services.SchedulePaused)
		if verb == "resume" {
			state = string(services.ScheduleActive)
		}
		sc, err = s.opts.Schedules.Update(ctx, msg.TimelineScope, id, 0, services.ScheduleRequest{State: &state})
	case "delete":
		sc, err = s.opts.Schedules.Delete(ctx, msg.TimelineScope, id)
	default:
		return fmt.Sprintf("Unknown /schedules %s. Usage: /schedules, or /schedules pause|resume|delete ID.", verb), nil
	}
	if err != nil {
		return "", err
	}
	s.auditCommand(ctx, msg, services.ScheduleAudit("", verb+"d", sc))
	switch sc.State {
	case services.ScheduleDeleted:
		return fmt.Sprintf("Deleted schedule #%d %q.", sc.ID, sc.Name), nil
	case services.SchedulePaused:
		return fmt.Sprintf("Paused schedule #%d %q.", sc.ID, sc.Name), nil
	}
	next := ""
	if sc.NextFireAt != nil {
		next = "; next fire " + s.localTime(sc, *sc.NextFireAt)
	}
	return fmt.Sprintf("Resumed schedule #%d %q%s.", sc.ID, sc.Name, next), nil
}

// receiptsShown is how many of each schedule's last fires /schedules shows.
const receiptsShown = 5

// receiptLine is one fire's receipt as /schedules shows it: when, how it
// ended (and why), the model calls and tokens it spent, whether it told
// the owner.
func (s *Service) receiptLine(sc services.Schedule, f services.ScheduleFire) string {
	receipt, why := f.Receipt()
	line := s.localTime(sc, f.FireAt) + " " + receipt
	if f.Missed > 0 {
		line += fmt.Sprintf(" (for %d missed)", f.Missed)
	}
	if why != "" {
		line += ": " + truncateText(why, 200)
	}
	line += fmt.Sprintf(" — %s, %d tokens", services.Count(f.ModelCalls, "model call", "model calls"), f.Tokens)
	if f.Notified {
		line += ", told you"
	}
	return line
}

func (s *Service) listSchedulesText(ctx context.Context, timeline string) (string, error) {
	list, err := s.opts.Schedules.List(ctx, timeline, receiptsShown)
	if err != nil {
		return "", err
	}
	if len(list) == 0 {
		return "No schedules. Ask the agent, e.g. \"remind me tomorrow at 9 to call Anna\" or \"check example.org/tickets every 30 minutes and tell me when tickets appear\".", nil
	}
	var b strings.Builder
	b.WriteString("Schedules:")
	for _, w := range list {
		sc := w.Schedule
		fmt.Fprintf(&b, "\n#%d %s — %s %s, notify %s, %s", sc.ID, sc.Name, sc.Kind, sc.Spec, sc.Notify, sc.State)
		if sc.Watch != nil {
			fmt.Fprintf(&b, ", watching %s", sc.Watch.Target())
		}
		if sc.NextFireAt != nil {
			fmt.Fprintf(&b, ", next %s", s.localTime(sc, *sc.NextFireAt))
		}
		if sc.StateReason != "" && sc.State == services.SchedulePaused {
			fmt.Fprintf(&b, " — %s", sc.StateReason)
		}
		for _, f := range w.Fires {
			b.WriteString("\n   " + s.receiptLine(sc, f))
		}
	}
	b.WriteString("\n/schedules pause|resume|delete ID changes one.")
	return b.String(), nil
}
