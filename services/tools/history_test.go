package tools

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestHistoryRuleCompact(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 50)
	content, _ := json.Marshal(map[string]any{
		"path": "a.txt", "content": long, "secret": "x", "note": "n",
		"matches": []int{1111, 2222, 3333, 4444},
	})
	rule := HistoryRule{MaxChars: 12, KeepFields: []string{"path", "content", "matches", "note"}, DropFields: []string{"note"}}
	got := rule.Compact(Result{Content: string(content)})
	var obj map[string]any
	if err := json.Unmarshal([]byte(got), &obj); err != nil {
		t.Fatalf("compacted form is not JSON: %q", got)
	}
	if _, ok := obj["secret"]; ok {
		t.Error("field outside KeepFields kept")
	}
	if _, ok := obj["note"]; ok {
		t.Error("DropFields field kept")
	}
	if c := obj["content"].(string); !strings.HasPrefix(c, strings.Repeat("é", 12)+"…[38 chars omitted]") {
		t.Errorf("content = %q", c)
	}
	if m := obj["matches"].([]any); len(m) != 2 || obj["matches_omitted"].(float64) != 2 {
		t.Errorf("matches = %v, omitted = %v", m, obj["matches_omitted"])
	}
	if again := rule.Compact(Result{Content: string(content)}); again != got {
		t.Error("Compact is not deterministic")
	}

	errRes := ErrorResult(CodeBadArguments, strings.Repeat("x", 100))
	if rule.Compact(errRes) != errRes.Content {
		t.Error("error result was compacted")
	}
	if got := (HistoryRule{MaxChars: 3}).Compact(Result{Content: "plain text"}); got != "pla…[7 chars omitted]" {
		t.Errorf("plain = %q", got)
	}
	if got := (HistoryRule{}).Compact(Result{Content: `{"b":1,"a":2}`}); got != `{"a":2,"b":1}` {
		t.Errorf("no-op rule = %q", got)
	}
}
