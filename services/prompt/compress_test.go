package prompt

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func TestCompressSmallJSONKeepsShapeDropsFields(t *testing.T) {
	t.Parallel()
	in := `{"status":"success","data":{"path":"a.go","lines":3},"text":"dup","stats":{"ms":4},"context":{"args":1}}`
	got := Compress("read_file", in, CompressionRule{})
	if want := `{"status":"success","data":{"path":"a.go","lines":3}}`; got != want {
		t.Errorf("Compress = %s, want %s", got, want)
	}
}

func TestCompressKeepAndDropFields(t *testing.T) {
	t.Parallel()
	in := `{"error":{"code":"E1","message":"m"},"status":"error","data":{"items":[{"name":"x","raw":"r"}]},"other":1}`
	got := Compress("custom", in, CompressionRule{MaxChars: 1000, KeepFields: []string{"data"}, DropFields: []string{"data.items.raw", "status", "error"}})
	want := `{"error":{"code":"E1","message":"m"},"status":"error","data":{"items":[{"name":"x"}]}}`
	if got != want {
		t.Errorf("Compress = %s\nwant       %s", got, want)
	}
}

func TestCompressBulkyJSON(t *testing.T) {
	t.Parallel()
	var matches []string
	for i := range 200 {
		matches = append(matches, fmt.Sprintf("src/file%03d.go:%d: match line with some content", i, i))
	}
	blob := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("\x00\x01binary\xff", 100)))
	payload := map[string]any{
		"status":  "success",
		"pattern": "TODO",
		"data":    map[string]any{"matches": matches, "note": strings.Repeat("long note ", 300), "image": blob},
	}
	raw, _ := json.Marshal(payload)
	got := Compress("grep", string(raw), CompressionRule{})
	if !json.Valid([]byte(got)) {
		t.Fatalf("invalid JSON: %s", got)
	}
	if len(got) > 1500 {
		t.Errorf("len = %d, want ≤ 1500", len(got))
	}
	for _, want := range []string{`"status":"success"`, "src/file000.go", "more items, 200 total", "[binary data dropped: "} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q: %s", want, got)
		}
	}
	if got != Compress("grep", string(raw), CompressionRule{}) {
		t.Error("output not deterministic")
	}
}

func TestCompressKeepsErrorMessage(t *testing.T) {
	t.Parallel()
	msg := strings.Repeat("x", 500)
	in := fmt.Sprintf(`{"status":"error","error":{"code":"ENOENT","message":%q,"trace":%q},"data":%q}`, msg, strings.Repeat("t", 3000), strings.Repeat("d", 3000))
	got := Compress("bash", in, CompressionRule{MaxChars: 1000})
	if !json.Valid([]byte(got)) || len(got) > 1000 {
		t.Fatalf("len %d valid %v: %s", len(got), json.Valid([]byte(got)), got)
	}
	if !strings.Contains(got, `"code":"ENOENT"`) || !strings.Contains(got, msg) {
		t.Errorf("error code or message lost: %s", got)
	}

	// A message longer than the budget is cut in the last-resort skeleton.
	in = fmt.Sprintf(`{"status":"error","error":{"code":"E","message":%q},"data":[1,2,3]}`, strings.Repeat("m", 5000))
	got = Compress("bash", in, CompressionRule{MaxChars: 800})
	if !json.Valid([]byte(got)) || len(got) > 800 || !strings.Contains(got, `"status":"error"`) || !strings.Contains(got, `"code":"E"`) {
		t.Errorf("skeleton = %s", got)
	}
}

func TestCompressText(t *testing.T) {
	t.Parallel()
	var lines []string
	for i := range 500 {
		lines = append(lines, fmt.Sprintf("output line %d", i))
	}
	in := strings.Join(lines, "\n")
	got := Compress("bash", in, CompressionRule{MaxChars: 400})
	if len(got) > 400+CompressSlack {
		t.Errorf("len = %d", len(got))
	}
	if !strings.HasPrefix(got, "output line 0\n") || !strings.HasSuffix(got, "output line 499") || !strings.Contains(got, "…[truncated ") {
		t.Errorf("text = %q", got)
	}
	if short := "fine"; Compress("bash", short, CompressionRule{}) != short {
		t.Error("short text changed")
	}
	cjk := strings.Repeat("上下文", 1000)
	if got := Compress("x", cjk, CompressionRule{MaxChars: 100}); !strings.Contains(got, "truncated") || !isValidUTF8(got) {
		t.Errorf("CJK = %q", got)
	}
	bin := strings.Repeat("\x00\x01\x02", 200)
	if got := Compress("x", bin, CompressionRule{}); got != "[binary data dropped: 600 bytes]" {
		t.Errorf("binary = %q", got)
	}
}

func isValidUTF8(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

func TestDefaultCompressionRule(t *testing.T) {
	t.Parallel()
	if DefaultCompressionRule("Read_File").MaxChars != 8000 || DefaultCompressionRule("grep").MaxChars != 1500 ||
		DefaultCompressionRule("TodoWrite").MaxChars != 600 || DefaultCompressionRule("whatever").MaxChars != DefaultMaxChars {
		t.Error("unexpected defaults")
	}
}

func FuzzCompress(f *testing.F) {
	f.Add(`{"status":"ok","data":[1,2,3]}`, 10)
	f.Add(`{"status":"error","error":{"code":"E","message":"boom"},"text":"x"}`, 5)
	f.Add(`[`+strings.Repeat(`"item",`, 100)+`"end"]`, 50)
	f.Add(`"`+strings.Repeat("\\u0001", 300)+`"`, 20)
	f.Add("plain text\nwith lines\n", 8)
	f.Add(`{"a":{"b":{"c":{"d":[{"e":"deep"}]}}}}`, 1)
	f.Add(`123456789012345678901234567890`, 3)
	f.Fuzz(func(t *testing.T, in string, maxChars int) {
		maxChars = maxChars%5000 + 1
		if maxChars < 1 {
			maxChars += 5000
		}
		rule := CompressionRule{MaxChars: maxChars, DropFields: []string{"text", "data.raw"}}
		out := Compress("tool", in, rule)
		if out != Compress("tool", in, rule) {
			t.Fatal("not deterministic")
		}
		if len(out) > maxChars+CompressSlack {
			t.Fatalf("output %d bytes for max %d", len(out), maxChars)
		}
		if t2 := strings.TrimSpace(in); t2 != "" && json.Valid([]byte(t2)) {
			if !json.Valid([]byte(out)) {
				t.Fatalf("invalid JSON output %q for %q", out, in)
			}
			if len(out) > maxChars+CompressSlack {
				t.Fatalf("JSON output %d bytes for max %d", len(out), maxChars)
			}
			var inObj, outObj map[string]json.RawMessage
			if json.Unmarshal([]byte(t2), &inObj) == nil {
				if _, ok := inObj["status"]; ok {
					if json.Unmarshal([]byte(out), &outObj) != nil {
						t.Fatalf("object became %q", out)
					}
					if _, ok := outObj["status"]; !ok {
						t.Fatalf("status lost: %q", out)
					}
				}
			}
		}
	})
}
