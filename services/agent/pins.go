package agent

import (
	"context"
	"fmt"
	"strings"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/prompt"
)

// maxLayerTextRunes bounds each layer's text in /context full; the API's
// preview carries it whole.
const maxLayerTextRunes = 1500

// cmdContextFull is "/context full": the next prompt as the model would get
// it, layer by layer with its text, the sources that were left out and
// why, and the warnings; built without calling the model.
func (s *Service) cmdContextFull(ctx context.Context, msg services.Message) (string, error) {
	pv, err := s.explainPrompt(ctx, msg.TimelineScope)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Next prompt (before your next message): %d of %d tokens, window %d. Nothing was sent to the model.\n", pv.TotalTokens, pv.Budget, pv.Window)
	for _, l := range pv.Layers {
		if l.Tokens == 0 && l.Trimmed == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n== %s: %d of %d tokens, %s", l.Layer, l.Tokens, l.Budget, services.Count(l.Items, "item", "items"))
		if l.Reason != "" {
			fmt.Fprintf(&b, "; trimmed %s", l.Reason)
		}
		b.WriteString("\n")
		if l.Layer == prompt.LayerSystem {
			fmt.Fprintf(&b, "(system prompt and %d tool definitions: %s)\n", len(pv.Request.Tools), strings.Join(pv.Request.Tools, ", "))
			continue
		}
		if t := strings.TrimSpace(l.Text); t != "" {
			b.WriteString(cutRunes(t, maxLayerTextRunes))
			b.WriteString("\n")
		}
	}
	var left []string
	for _, src := range pv.Sources {
		if !src.Included && src.Reason != "" {
			left = append(left, fmt.Sprintf("- %s %s (%d tokens): %s", src.Layer, src.Source, src.Tokens, src.Reason))
		}
	}
	if len(left) > 0 {
		b.WriteString("\nLeft out:\n" + strings.Join(left, "\n") + "\n")
	}
	// Blank lines keep what follows out of the list above.
	for _, w := range pv.Warnings {
		fmt.Fprintf(&b, "\nWarning %s: %s\n", w.Code, w.Message)
	}
	fmt.Fprintf(&b, "\nStable prefix hash: %.12s", pv.PrefixHash)
	return b.String(), nil
}

func cutRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + fmt.Sprintf(" …[%d more characters; GET /api/context/preview has it whole]", len(r)-n)
}

// cmdPin is "/pin PATH[#Section]" and "/unpin PATH[#Section]" (also
// PATH:FIRST-LAST): the context manifest gains or loses the pin.
func (s *Service) cmdPin(ctx context.Context, msg services.Message, args string, add bool) (string, error) {
	if s.opts.Manifests == nil {
		return "Pins are not available on this server.", nil
	}
	verb := "pin"
	if !add {
		verb = "unpin"
	}
	if strings.TrimSpace(args) == "" {
		return fmt.Sprintf("Usage: /%s PATH, /%s PATH#Heading/Subheading or /%s PATH:FIRST-LAST. /pins lists the pins.", verb, verb, verb), nil
	}
	pin, err := services.ParsePin(args)
	if err != nil {
		return "", err
	}
	man, err := s.opts.Manifests.ContextManifest(ctx, msg.TimelineScope)
	if err != nil {
		return "", err
	}
	i := man.Find(pin)
	switch {
	case add && i >= 0:
		return fmt.Sprintf("%s is already pinned.", pin), nil
	case add:
		man.Pins = append(man.Pins, pin)
	case i < 0:
		return fmt.Sprintf("%s is not pinned. /pins lists the pins.", pin), nil
	default:
		man.Pins = append(man.Pins[:i:i], man.Pins[i+1:]...)
	}
	stored, err := s.opts.Manifests.PutContextManifest(ctx, msg.TimelineScope, man)
	if err != nil {
		return "", err
	}
	if add {
		return fmt.Sprintf("Pinned %s: every prompt includes it in the retrieved layer while it fits (manifest version %d).", pin, stored.Version), nil
	}
	return fmt.Sprintf("Unpinned %s (manifest version %d).", pin, stored.Version), nil
}

// cmdPins lists the context manifest's pins.
func (s *Service) cmdPins(ctx context.Context, msg services.Message) (string, error) {
	if s.opts.Manifests == nil {
		return "Pins are not available on this server.", nil
	}
	man, err := s.opts.Manifests.ContextManifest(ctx, msg.TimelineScope)
	if err != nil {
		return "", err
	}
	if len(man.Pins) == 0 {
		return "Nothing is pinned. /pin PATH[#Section] pins a file or a section of it.", nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Pinned (%s, version %d):", services.ContextManifestFile, man.Version)
	for _, p := range man.Pins {
		b.WriteString("\n- " + p.String())
	}
	// What the next prompt could not include of them.
	if next, err := s.previewPrompt(ctx, msg.TimelineScope); err == nil {
		for _, w := range next.Warnings {
			if w.Code == prompt.CodePinMissing || w.Code == prompt.CodePinTrimmed {
				fmt.Fprintf(&b, "\nWarning %s: %s", w.Code, w.Message)
			}
		}
	}
	return b.String(), nil
}
