package services

import (
	"context"
	"fmt"
	"path"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"
)

// RulesFileNames are the standing-rules files of a timeline's workspace: the
// one at the workspace root whose name matches one of these, ignoring case,
// is sent with every prompt under the rules heading. They are the owner's:
// the agent's write tools refuse them (unless AGENT_RULES_WRITABLE=1).
var RulesFileNames = []string{"rules.md", "code_law.md"}

// IsRulesFile reports whether the slash- or OS-separated relative path p,
// once cleaned, names a rules file at the workspace root ("RULES.md",
// "./rules.MD", "sub/../Code_Law.md"). Symlinks are the caller's to resolve.
func IsRulesFile(p string) bool {
	p = path.Clean(strings.ReplaceAll(p, `\`, "/"))
	if strings.Contains(p, "/") {
		return false
	}
	for _, n := range RulesFileNames {
		if strings.EqualFold(p, n) {
			return true
		}
	}
	return false
}

// Rule proposal statuses.
const (
	ProposalPending  = "pending"
	ProposalApproved = "approved"
	ProposalRejected = "rejected"
)

// RuleProposal is a rule the agent proposed (the propose_rule tool). It
// reaches prompts only once the owner approves it (/rules approve N), which
// makes it a Constraint; until then it is stored and shown, never sent.
type RuleProposal struct {
	ID            int64
	TimelineScope string
	Text          string
	Hard          bool
	Status        string
	// RunID is the run that proposed it.
	RunID int64
	// ConstraintID is the rule an approval created.
	ConstraintID int64
	CreatedAt    time.Time
	DecidedAt    *time.Time
}

// RuleProposals stores the agent's rule proposals and the owner's decisions.
type RuleProposals interface {
	// ProposeRule stores a pending proposal; EINVALID for empty or oversized
	// text.
	ProposeRule(ctx context.Context, p RuleProposal) (RuleProposal, error)
	// DecideRuleProposal approves (creating the Constraint in the same
	// transaction) or rejects proposal id of timelineScope. ENOTFOUND when the
	// timeline has no such proposal, ECONFLICT when it was already decided.
	DecideRuleProposal(ctx context.Context, timelineScope string, id int64, approve bool) (RuleProposal, error)
	// ListRuleProposals returns a timeline's pending proposals, oldest first.
	ListRuleProposals(ctx context.Context, timelineScope string) ([]RuleProposal, error)
}

// NoticeRuleCheck marks the notice that flags an answer matching a hard
// rule's check pattern (Constraint.Check; MessageMeta.Notice).
const NoticeRuleCheck = "rule_check"

// MaxRuleCheckBytes bounds a rule's check pattern.
const MaxRuleCheckBytes = 1000

// ValidRuleCheck reports whether pattern is a valid check pattern of a
// hard rule: "" (none) or a Go regexp (RE2 syntax) of at most
// MaxRuleCheckBytes; EINVALID with the regexp's own complaint otherwise.
func ValidRuleCheck(pattern string) error {
	if pattern == "" {
		return nil
	}
	if len(pattern) > MaxRuleCheckBytes {
		return Errorf(EINVALID, "the check pattern is %d bytes; the limit is %d", len(pattern), MaxRuleCheckBytes)
	}
	if _, err := regexp.Compile(pattern); err != nil {
		return Errorf(EINVALID, "the check pattern %q is not a valid regular expression: %s", pattern, strings.TrimPrefix(err.Error(), "error parsing regexp: "))
	}
	return nil
}

// RuleCheckMatch returns what of text the check pattern matches first
// (ok false when nothing, or the pattern is empty or not valid).
func RuleCheckMatch(pattern, text string) (match string, ok bool) {
	if pattern == "" {
		return "", false
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return "", false
	}
	loc := re.FindStringIndex(text)
	if loc == nil {
		return "", false
	}
	return text[loc[0]:loc[1]], true
}

// ParseRuleAdd reads the arguments of "/rules add": the rule's text, or
// "--check TEXT PATTERN" where TEXT and PATTERN are each one word or
// quoted ('…' or "…"; inside "…", \" and \\ are a quote and a
// backslash): `--check "no exclamation marks" '!'`. The pattern is
// validated (ValidRuleCheck).
func ParseRuleAdd(args string) (text, check string, err error) {
	args = strings.TrimSpace(args)
	rest, ok := strings.CutPrefix(args, "--check")
	if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '\t') {
		return args, "", nil
	}
	fields, err := splitQuoted(rest)
	if err != nil {
		return "", "", err
	}
	if len(fields) != 2 {
		return "", "", Errorf(EINVALID, `want /rules add --check "RULE TEXT" 'PATTERN' (the rule's text and a regular expression, each quoted), got %d arguments`, len(fields))
	}
	text, check = strings.TrimSpace(fields[0]), fields[1]
	if text == "" || check == "" {
		return "", "", Errorf(EINVALID, `want /rules add --check "RULE TEXT" 'PATTERN': the text and the pattern may not be empty`)
	}
	return text, check, ValidRuleCheck(check)
}

// splitQuoted splits s into words, a quoted run ('…' or "…") being one.
func splitQuoted(s string) ([]string, error) {
	var out []string
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == ' ' || r == '\t' || r == '\n':
			i += n
		case r == '\'' || r == '"':
			var b strings.Builder
			j := i + 1
			for ; j < len(s) && rune(s[j]) != r; j++ {
				if r == '"' && s[j] == '\\' && j+1 < len(s) && (s[j+1] == '"' || s[j+1] == '\\') {
					j++
				}
				b.WriteByte(s[j])
			}
			if j >= len(s) {
				return nil, Errorf(EINVALID, "unclosed %c quote in %s", r, fmt.Sprintf("%q", s[i:]))
			}
			out = append(out, b.String())
			i = j + 1
		default:
			j := strings.IndexAny(s[i:], " \t\n")
			if j < 0 {
				j = len(s) - i
			}
			out = append(out, s[i:i+j])
			i += j
		}
	}
	return out, nil
}
