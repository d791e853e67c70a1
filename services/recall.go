package services

import (
	"context"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Recall kinds: what a RecallHit points at.
const (
	RecallMessage = "message" // a row of chat_messages (id "m<id>")
	RecallSummary = "summary" // an archived summary segment (id "s<id>")
)

// RecallView is what one context scope may read back from its timeline's
// archive: the rule every recall read applies (docs/CONTEXT.md, "Recall").
// Main reads the main scope's rows (every visible row of the timeline is
// one; so are main's hidden tool steps) and the summaries of the scope its
// prompts read. Any other scope (a sub-agent's sub:/run:, a schedule's
// sched:) reads its own rows and summaries plus main's visible rows, the
// handoffs main received and main's summaries (what a sub-agent's task
// payload may quote as observations), never main's other hidden steps, a
// sibling's or another schedule's rows. No scope reads another timeline. The service's own rows (source system: command
// replies, notices), chat commands, the offline model's answers and the
// visible handoff markers are never returned.
type RecallView struct {
	TimelineScope string
	ContextScope  string
	// SummaryScopes are the summary scopes readable (main: the scope its
	// prompts read, "main" or the legacy "global"; others: their own and
	// that one).
	SummaryScopes []string
}

// NewRecallView is the view of contextScope ("" is main); readScope is the
// summary scope main prompts read under the flags.
func NewRecallView(timeline, contextScope, readScope string) RecallView {
	if contextScope == "" {
		contextScope = MainScope
	}
	if readScope == "" {
		readScope = MainScope
	}
	v := RecallView{TimelineScope: timeline, ContextScope: contextScope, SummaryScopes: []string{readScope}}
	if contextScope != MainScope {
		v.SummaryScopes = []string{contextScope, readScope}
	}
	return v
}

// IsMain reports whether the view is the main agent's.
func (v RecallView) IsMain() bool { return v.ContextScope == MainScope }

// RecallQuery is one full-text search of the archive.
type RecallQuery struct {
	View RecallView
	// Terms are the words searched (lower case); AnyTerm matches rows with
	// at least one of them, otherwise every one must appear.
	Terms   []string
	AnyTerm bool
	// After and Before bound created_at when set.
	After, Before time.Time
	// Kind restricts the hits: RecallMessage, RecallSummary or "" (both).
	// HandoffsOnly keeps the handoffs of sub-agents (main's hidden rows of
	// kind handoff); MaxID, when set, keeps ids up to it.
	Kind         string
	HandoffsOnly bool
	// AfterReset, with HandoffsOnly, keeps the handoffs after the view
	// scope's last /new (its reset segment): a fresh context does not
	// bring back what came before it.
	AfterReset bool
	MaxID      int64
	// Limit bounds the hits (1..100).
	Limit int
}

// RecallHit is one search result: best first by Score.
type RecallHit struct {
	Kind         string
	ID           int64
	Role         Role
	ContextScope string
	AgentID      string
	CreatedAt    time.Time
	// Snippet is the matching passage (whitespace folded).
	Snippet string
	// Tokens is what the whole row or summary costs in a prompt.
	Tokens int
	// Score is the relevance in (0, 1).
	Score float64
	// FromID, UntilID: the messages a summary covers.
	FromID, UntilID int64
	// MessageKind is the row's MessageMeta.Kind (handoff, task_payload).
	MessageKind string
}

// Ref is the hit's id as the recall tools show it: "m<id>" or "s<id>".
func (h RecallHit) Ref() string { return RecallRef(h.Kind, h.ID) }

// RecallRef names a message ("m12") or a summary ("s3").
func RecallRef(kind string, id int64) string {
	if kind == RecallSummary {
		return "s" + strconv.FormatInt(id, 10)
	}
	return "m" + strconv.FormatInt(id, 10)
}

// ParseRecallRef reads "m12", "s3" or a bare number (a message).
func ParseRecallRef(ref string) (kind string, id int64, err error) {
	r := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(ref), "#"))
	kind = RecallMessage
	switch {
	case strings.HasPrefix(r, "m") || strings.HasPrefix(r, "M"):
		r = r[1:]
	case strings.HasPrefix(r, "s") || strings.HasPrefix(r, "S"):
		kind, r = RecallSummary, r[1:]
	}
	if r == "" {
		return "", 0, Errorf(EINVALID, "id %q is not a recall id (m<number> for a message, s<number> for a summary)", ref)
	}
	for _, c := range r {
		if c < '0' || c > '9' {
			return "", 0, Errorf(EINVALID, "id %q is not a recall id (m<number> for a message, s<number> for a summary)", ref)
		}
		id = id*10 + int64(c-'0')
		if id > 1<<53 {
			return "", 0, Errorf(EINVALID, "id %q is out of range", ref)
		}
	}
	return kind, id, nil
}

// RecallStore reads a timeline's archive for the recall tools, the
// retrieved layer and sub-agents' observations. Every method applies the
// view: a row outside it is never returned (an id outside it reads as
// absent).
type RecallStore interface {
	// SearchRecall runs a full-text search (PostgreSQL, 'simple' config).
	SearchRecall(ctx context.Context, q RecallQuery) ([]RecallHit, error)
	// RecallMessages returns the messages of ids the view may read, in id
	// order (ids outside it are left out).
	RecallMessages(ctx context.Context, v RecallView, ids []int64) ([]Message, error)
	// RecallAround returns up to before rows before id and after rows after
	// it (and the row itself) that the view may read, in id order;
	// ENOTFOUND when id itself is not readable.
	RecallAround(ctx context.Context, v RecallView, id int64, before, after int) ([]Message, error)
	// RecallSegments returns the summary segments of ids the view may read.
	RecallSegments(ctx context.Context, v RecallView, ids []int64) ([]Segment, error)
}

// maxRecallTerms bounds the words of one search.
const maxRecallTerms = 16

// recallStopWords are left out of searches: with the language-neutral
// 'simple' index they would match almost every row.
var recallStopWords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`a an and are as at be been but by can could did do does for from had has have he her his how i if in into is it its me my
		no not of on or our she so that the their them then there these they this those to was we were what when where which who why will with would you your
		about after again all also am any before just more most only other over same some such than too very yes`) {
		recallStopWords[w] = true
	}
}

// RecallTerms are the words of text a search looks for: lower case,
// letters and digits (any script), de-duplicated, without one-letter words
// and common English function words, at most 16. A text made only of such
// words keeps them.
func RecallTerms(text string) []string {
	words := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	var out, common []string
	seen := map[string]bool{}
	for _, w := range words {
		if seen[w] || (len([]rune(w)) < 2 && !unicode.IsDigit([]rune(w)[0])) {
			continue
		}
		seen[w] = true
		if recallStopWords[w] {
			common = append(common, w)
			continue
		}
		out = append(out, w)
	}
	if len(out) == 0 {
		out = common
	}
	if len(out) > maxRecallTerms {
		out = out[:maxRecallTerms]
	}
	return out
}
