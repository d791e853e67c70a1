package prompt

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// CompressionRule says how one tool's results are kept in history (seed 002,
// A3 and C1). The full result serves the current turn; history keeps the
// output of Compress.
type CompressionRule struct {
	// MaxChars bounds the compressed result, in bytes of UTF-8 (so it is
	// stricter for CJK text); 0 takes the tool's default. Markers may add up
	// to CompressSlack bytes.
	MaxChars int
	// KeepFields, if not empty, is the allow-list of top-level fields of a
	// JSON object result; "status" and "error" are always kept.
	KeepFields []string
	// DropFields are removed from a JSON result wherever they are: a name is
	// a top-level field, a dotted path ("data.raw") descends through objects
	// and applies to every element of arrays on the way. "status" and "error"
	// at the top level cannot be dropped.
	DropFields []string
	// Form, when set, writes the result's history form by its tool's kind
	// (the tool's tools.HistoryForm: a listing's counts and first entries,
	// a search's first matches, a read's numbered lines, an edit's or a
	// write's first lines) from the call's arguments and the result; ok
	// false leaves the result to the rules above.
	Form func(args, result string) (form string, ok bool)
}

// HistoryForm is a past tool result as history keeps it: the rule's Form
// when it reads the result, else Compress.
func HistoryForm(toolName, args, result string, rule CompressionRule) string {
	if rule.Form != nil {
		if form, ok := rule.Form(args, result); ok {
			return form
		}
	}
	return Compress(toolName, result, rule)
}

// CompressSlack is how far markers may take Compress's output beyond MaxChars.
const CompressSlack = 400

// DefaultMaxChars is the bound for tools without a default of their own.
const DefaultMaxChars = 2000

// minStringLimit is the shortest a string is cut to before containers are pruned.
const minStringLimit = 32

// binaryMinLen is the shortest string that can be taken for a binary blob.
const binaryMinLen = 256

// DefaultCompressionRule returns the history rule for a tool, after seed 002
// (A3): reads keep the most (8000 bytes, about 2k tokens, instead of the
// seed's 500 lines), searches and listings 1500 (the first few matches),
// edits, writes and shell commands 2000 (shell output keeps its tail, where
// errors are), todo lists 600 (a recap). Every rule drops "text", "stats" and
// "context" (C1). Tool names are matched case-insensitively, ignoring "_",
// "-" and spaces, with common aliases (read_file, grep/search, ls/glob, bash/shell).
func DefaultCompressionRule(toolName string) CompressionRule {
	drop := []string{"text", "stats", "context"}
	name := strings.ToLower(strings.NewReplacer("_", "", "-", "", " ", "").Replace(toolName))
	limit := DefaultMaxChars
	switch name {
	case "read", "readfile", "view", "cat", "readblock":
		limit = 8000
	case "grep", "search", "rg", "ls", "listfiles", "glob", "find":
		limit = 1500
	case "edit", "multiedit", "write", "writefile", "patch", "bash", "shell", "exec":
		limit = 2000
	case "todowrite", "todo", "todoread":
		limit = 600
	}
	return CompressionRule{MaxChars: limit, DropFields: drop}
}

// Compress returns the form of a tool result kept in history. A zero rule
// means DefaultCompressionRule(toolName); a rule with MaxChars 0 takes the
// default's bound. The output is deterministic.
//
// JSON input stays valid JSON, field order kept: fields are dropped per the
// rule, base64 or binary-looking strings are replaced by a marker, and if the
// result is still over MaxChars, long strings are cut to head and tail with a
// marker saying how much was cut, long arrays and objects keep their first
// entries plus a count, deep containers are summarised, and as a last resort
// only "status" and "error" (code and message) survive. Other text is cut to
// head and tail around a marker. The output is at most MaxChars+CompressSlack
// bytes.
func Compress(toolName string, result string, rule CompressionRule) string {
	if rule.MaxChars <= 0 && rule.KeepFields == nil && rule.DropFields == nil {
		rule = DefaultCompressionRule(toolName)
	}
	if rule.MaxChars <= 0 {
		rule.MaxChars = DefaultCompressionRule(toolName).MaxChars
	}
	if t := strings.TrimSpace(result); t != "" && json.Valid([]byte(t)) {
		if root, err := parseJSON(t); err == nil {
			return compressJSON(root, len(t), rule)
		}
	}
	if looksBinary(result) {
		return fmt.Sprintf("[binary data dropped: %d bytes]", len(result))
	}
	return truncateText(result, rule.MaxChars)
}

// jnode is a parsed JSON value that keeps object field order.
type jnode struct {
	kind  byte   // 'o' object, 'a' array, 's' string, 'l' literal (number, true, false, null)
	str   string // string value, or the literal as written
	keys  []string
	vals  []*jnode // object values, or array items
	bytes int      // size of the original encoding, for markers
}

func parseJSON(s string) (*jnode, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	n, err := parseValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("trailing data")
	}
	return n, nil
}

func parseValue(dec *json.Decoder) (*jnode, error) {
	start := dec.InputOffset()
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	n := &jnode{}
	switch t := tok.(type) {
	case json.Delim:
		if t == '{' {
			n.kind = 'o'
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				v, err := parseValue(dec)
				if err != nil {
					return nil, err
				}
				n.keys = append(n.keys, k)
				n.vals = append(n.vals, v)
			}
		} else {
			n.kind = 'a'
			for dec.More() {
				v, err := parseValue(dec)
				if err != nil {
					return nil, err
				}
				n.vals = append(n.vals, v)
			}
		}
		if _, err := dec.Token(); err != nil { // closing delimiter
			return nil, err
		}
	case string:
		n.kind, n.str = 's', t
	case json.Number:
		n.kind, n.str = 'l', t.String()
	case bool:
		n.kind, n.str = 'l', fmt.Sprint(t)
	case nil:
		n.kind, n.str = 'l', "null"
	}
	n.bytes = int(dec.InputOffset() - start)
	return n, nil
}

func compressJSON(root *jnode, inputLen int, rule CompressionRule) string {
	limit := rule.MaxChars
	root = applyFieldRules(root, rule)
	if out := encodeJSON(root); len(out) <= limit {
		return out
	}
	// Tighten string and container limits step by step until it fits.
	strLimit, items := limit/2, 16
	for {
		out := encodeJSON(shrink(root, shrinkLimits{str: strLimit, items: items, depth: -1}))
		if len(out) <= limit {
			return out
		}
		if strLimit <= minStringLimit && items <= 1 {
			break
		}
		strLimit, items = max(strLimit/2, minStringLimit), max(items/2, 1)
	}
	for depth := 3; depth >= 1; depth-- {
		out := encodeJSON(shrink(root, shrinkLimits{str: minStringLimit, items: 1, depth: depth}))
		if len(out) <= limit {
			return out
		}
	}
	return encodeJSON(skeleton(root, inputLen, limit))
}

// applyFieldRules applies KeepFields and DropFields and replaces binary blobs.
func applyFieldRules(root *jnode, rule CompressionRule) *jnode {
	root = dropBinary(root)
	if root.kind != 'o' {
		for _, f := range rule.DropFields {
			root = dropPath(root, strings.Split(f, "."), false)
		}
		return root
	}
	if len(rule.KeepFields) > 0 {
		keep := map[string]bool{"status": true, "error": true}
		for _, f := range rule.KeepFields {
			keep[f] = true
		}
		out := &jnode{kind: 'o', bytes: root.bytes}
		for i, k := range root.keys {
			if keep[k] {
				out.keys = append(out.keys, k)
				out.vals = append(out.vals, root.vals[i])
			}
		}
		root = out
	}
	for _, f := range rule.DropFields {
		root = dropPath(root, strings.Split(f, "."), true)
	}
	return root
}

// dropPath returns n without the field at path; top protects the top-level
// "status" and "error" fields.
func dropPath(n *jnode, path []string, top bool) *jnode {
	switch n.kind {
	case 'a':
		out := *n
		out.vals = make([]*jnode, len(n.vals))
		for i, v := range n.vals {
			out.vals[i] = dropPath(v, path, false)
		}
		return &out
	case 'o':
		out := &jnode{kind: 'o', bytes: n.bytes}
		for i, k := range n.keys {
			v := n.vals[i]
			if k == path[0] {
				if len(path) == 1 {
					if !(top && (k == "status" || k == "error")) {
						continue
					}
				} else {
					v = dropPath(v, path[1:], false)
				}
			}
			out.keys = append(out.keys, k)
			out.vals = append(out.vals, v)
		}
		return out
	}
	return n
}

func dropBinary(n *jnode) *jnode {
	switch n.kind {
	case 's':
		if looksBinary(n.str) {
			return &jnode{kind: 's', str: fmt.Sprintf("[binary data dropped: %d bytes]", len(n.str)), bytes: n.bytes}
		}
	case 'o', 'a':
		out := *n
		out.vals = make([]*jnode, len(n.vals))
		for i, v := range n.vals {
			out.vals[i] = dropBinary(v)
		}
		return &out
	}
	return n
}

type shrinkLimits struct {
	str   int // longest string kept whole, in bytes
	items int // array items kept; objects keep 4× as many fields
	depth int // containers nested deeper are summarised; -1 for no limit
}

// shrink returns a copy of root within lim. Top-level "status" and "error"
// are never cut, and error.code and error.message keep their text.
func shrink(root *jnode, lim shrinkLimits) *jnode {
	return shrinkAt(root, lim, 0, true, false)
}

func shrinkAt(n *jnode, lim shrinkLimits, depth int, top, keepText bool) *jnode {
	switch n.kind {
	case 's':
		if keepText {
			return n
		}
		return &jnode{kind: 's', str: truncateMiddle(n.str, lim.str), bytes: n.bytes}
	case 'l':
		if len(n.str) > lim.str+minStringLimit {
			return &jnode{kind: 's', str: fmt.Sprintf("[number of %d digits dropped]", len(n.str))}
		}
		return n
	case 'a':
		if lim.depth >= 0 && depth >= lim.depth {
			return &jnode{kind: 's', str: fmt.Sprintf("[array of %d items, %d bytes dropped]", len(n.vals), n.bytes)}
		}
		out := &jnode{kind: 'a', bytes: n.bytes}
		for i, v := range n.vals {
			if i == lim.items {
				out.vals = append(out.vals, &jnode{kind: 's', str: fmt.Sprintf("[+%d more items, %d total]", len(n.vals)-i, len(n.vals))})
				break
			}
			out.vals = append(out.vals, shrinkAt(v, lim, depth+1, false, false))
		}
		return out
	case 'o':
		if lim.depth >= 0 && depth >= lim.depth && !top {
			return &jnode{kind: 's', str: fmt.Sprintf("[object of %d fields, %d bytes dropped]", len(n.keys), n.bytes)}
		}
		out := &jnode{kind: 'o', bytes: n.bytes}
		kept, dropped := 0, 0
		for i, k := range n.keys {
			protected := top && (k == "status" || k == "error")
			if !protected && kept >= lim.items*4 {
				dropped++
				continue
			}
			if !protected {
				kept++
			}
			child := n.vals[i]
			switch {
			case top && k == "error" && child.kind == 'o':
				child = shrinkError(child, lim)
			case top && k == "error":
				child = shrinkAt(child, lim, depth+1, false, true)
			default:
				child = shrinkAt(child, lim, depth+1, false, false)
			}
			out.keys = append(out.keys, k)
			out.vals = append(out.vals, child)
		}
		if dropped > 0 {
			out.keys = append(out.keys, "…")
			out.vals = append(out.vals, &jnode{kind: 's', str: fmt.Sprintf("[+%d more fields]", dropped)})
		}
		return out
	}
	return n
}

// shrinkError keeps an error object's code and message whole (seed 002, C1)
// and shrinks its other fields.
func shrinkError(n *jnode, lim shrinkLimits) *jnode {
	out := &jnode{kind: 'o', bytes: n.bytes}
	for i, k := range n.keys {
		v := n.vals[i]
		if (k == "code" || k == "message") && v.kind == 's' {
			out.keys = append(out.keys, k)
			out.vals = append(out.vals, v)
			continue
		}
		out.keys = append(out.keys, k)
		out.vals = append(out.vals, shrinkAt(v, shrinkLimits{str: lim.str, items: lim.items, depth: 1}, 1, false, false))
	}
	return out
}

// skeleton is the last resort: status and error code and message only, with
// bounded sizes, and a marker.
func skeleton(root *jnode, inputLen, limit int) *jnode {
	marker := &jnode{kind: 's', str: fmt.Sprintf("[compressed: %d bytes of JSON, fields dropped]", inputLen)}
	switch root.kind {
	case 'a':
		return &jnode{kind: 'a', vals: []*jnode{{kind: 's', str: fmt.Sprintf("[array of %d items, %d bytes dropped]", len(root.vals), inputLen)}}}
	case 's':
		return &jnode{kind: 's', str: truncateEncoded(root.str, limit/2)}
	case 'l':
		return marker
	}
	out := &jnode{kind: 'o'}
	for i, k := range root.keys {
		v := root.vals[i]
		switch k {
		case "status":
			if v.kind == 's' {
				v = &jnode{kind: 's', str: truncateEncoded(v.str, 64)}
			} else if len(encodeJSON(v)) > 64 {
				v = &jnode{kind: 's', str: "[status dropped]"}
			}
		case "error":
			switch v.kind {
			case 's':
				v = &jnode{kind: 's', str: truncateEncoded(v.str, max(limit/2, minStringLimit))}
			case 'o':
				e := &jnode{kind: 'o'}
				for j, ek := range v.keys {
					ev := v.vals[j]
					if (ek != "code" && ek != "message") || containsKey(e, ek) {
						continue
					}
					keepLen := 64
					if ek == "message" {
						keepLen = max(limit/2, minStringLimit)
					}
					switch {
					case ev.kind == 's':
						ev = &jnode{kind: 's', str: truncateEncoded(ev.str, keepLen)}
					case ev.kind == 'l' && len(ev.str) <= 64:
					default:
						continue
					}
					e.keys = append(e.keys, ek)
					e.vals = append(e.vals, ev)
				}
				v = e
			default:
				continue
			}
		default:
			continue
		}
		if containsKey(out, k) {
			continue
		}
		out.keys = append(out.keys, k)
		out.vals = append(out.vals, v)
	}
	out.keys = append(out.keys, "…")
	out.vals = append(out.vals, marker)
	return out
}

func containsKey(n *jnode, k string) bool {
	for _, have := range n.keys {
		if have == k {
			return true
		}
	}
	return false
}

func encodeJSON(n *jnode) string {
	var b bytes.Buffer
	writeJSON(&b, n)
	return b.String()
}

func writeJSON(b *bytes.Buffer, n *jnode) {
	switch n.kind {
	case 's':
		writeJSONString(b, n.str)
	case 'l':
		b.WriteString(n.str)
	case 'a':
		b.WriteByte('[')
		for i, v := range n.vals {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSON(b, v)
		}
		b.WriteByte(']')
	case 'o':
		b.WriteByte('{')
		for i, k := range n.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSONString(b, k)
			b.WriteByte(':')
			writeJSON(b, n.vals[i])
		}
		b.WriteByte('}')
	}
}

// writeJSONString writes s as a JSON string without HTML escaping.
func writeJSONString(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	for _, r := range s {
		if r >= 0x20 && r != '"' && r != '\\' && r != '\u2028' && r != '\u2029' {
			b.WriteRune(r)
			continue
		}
		b.WriteString(escapeRune(r))
	}
	b.WriteByte('"')
}

func escapeRune(r rune) string {
	switch r {
	case '"':
		return `\"`
	case '\\':
		return `\\`
	case '\n':
		return `\n`
	case '\r':
		return `\r`
	case '\t':
		return `\t`
	case '\u2028', '\u2029':
		return fmt.Sprintf(`\u%04x`, r)
	}
	if r < 0x20 {
		return fmt.Sprintf(`\u%04x`, r)
	}
	return string(r)
}

// truncateEncoded cuts s so that its JSON encoding, quotes excluded, is at
// most limit bytes, marking the cut.
func truncateEncoded(s string, limit int) string {
	size := 0
	for i, r := range s {
		size += len(escapeRune(r))
		if size > limit {
			return s[:i] + "…[truncated]"
		}
	}
	return s
}

// truncateMiddle keeps about limit bytes of s, two thirds from the head and
// one third from the tail, with a marker in between.
func truncateMiddle(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	head := runeFloor(s, limit*2/3)
	tail := runeCeil(s, len(s)-(limit-head))
	return s[:head] + fmt.Sprintf("…[truncated %d bytes]…", tail-head) + s[tail:]
}

// truncateText cuts text to head (60%) and tail (40%) of limit bytes around
// a marker, preferring line boundaries near the cut points.
func truncateText(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	head := runeFloor(s, limit*6/10)
	if nl := strings.LastIndexByte(s[:head], '\n'); nl >= head*3/4 {
		head = nl + 1
	}
	tail := runeCeil(s, len(s)-(limit-head))
	if nl := strings.IndexByte(s[tail:], '\n'); nl >= 0 && nl < (len(s)-tail)/4 {
		tail += nl + 1
	}
	sep := "\n"
	if head > 0 && s[head-1] == '\n' {
		sep = ""
	}
	return s[:head] + sep + fmt.Sprintf("…[truncated %d of %d bytes]…\n", tail-head, len(s)) + s[tail:]
}

// runeFloor returns the largest rune boundary of s at or below i.
func runeFloor(s string, i int) int {
	i = min(max(i, 0), len(s))
	for i > 0 && i < len(s) && !utf8.RuneStart(s[i]) {
		i--
	}
	return i
}

// runeCeil returns the smallest rune boundary of s at or above i.
func runeCeil(s string, i int) int {
	i = min(max(i, 0), len(s))
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return i
}

// looksBinary reports whether s is a blob not worth keeping in history: a
// data: URI, a long run of base64 (letters of both cases and digits, no
// spaces) or hex, or text that is more than a tenth control characters or
// invalid UTF-8.
func looksBinary(s string) bool {
	if len(s) < binaryMinLen {
		return false
	}
	if strings.HasPrefix(s, "data:") && strings.Contains(s[:min(len(s), 128)], ";base64,") {
		return true
	}
	var upper, lower, digit, other, hexOnly bool = false, false, false, false, true
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'A' && c <= 'Z':
			upper = true
			hexOnly = hexOnly && c <= 'F'
		case c >= 'a' && c <= 'z':
			lower = true
			hexOnly = hexOnly && c <= 'f'
		case c >= '0' && c <= '9':
			digit = true
		case c == '+' || c == '/' || c == '=' || c == '-' || c == '_':
			hexOnly = false
		default:
			other = true
			hexOnly = false
		}
	}
	if !other && (hexOnly && digit || upper && lower && digit) {
		return true
	}
	bad, total := 0, 0
	for _, r := range s {
		total++
		if r == utf8.RuneError || (r < 0x20 && r != '\n' && r != '\r' && r != '\t') {
			bad++
		}
	}
	return bad*10 > total
}
