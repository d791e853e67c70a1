package tools

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// Compact returns the form of r kept in conversation history.
//
// Error results are kept whole: they are short and the model needs them to
// avoid repeating a mistake. A Content that is a JSON object loses the fields
// not in KeepFields (when set) and those in DropFields; then, with MaxChars
// set, every string field longer than MaxChars characters is cut with a
// "…[N chars omitted]" marker, and every array field whose JSON form is
// longer than MaxChars keeps only its leading elements that fit, the number
// dropped being recorded in a "<field>_omitted" field. Any other Content is
// cut to MaxChars characters. The output's keys are sorted, so the same
// result always compacts to the same bytes.
func (h HistoryRule) Compact(r Result) string {
	if r.IsError {
		return r.Content
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(r.Content), &obj); err != nil || obj == nil {
		return cutString(r.Content, h.MaxChars)
	}
	if len(h.KeepFields) > 0 {
		kept := make(map[string]json.RawMessage, len(h.KeepFields))
		for _, f := range h.KeepFields {
			if v, ok := obj[f]; ok {
				kept[f] = v
			}
		}
		obj = kept
	}
	for _, f := range h.DropFields {
		delete(obj, f)
	}
	if h.MaxChars > 0 {
		for name, raw := range obj {
			if len(raw) == 0 {
				continue
			}
			switch raw[0] {
			case '"':
				var s string
				if json.Unmarshal(raw, &s) == nil && utf8.RuneCountInString(s) > h.MaxChars {
					obj[name], _ = marshalJSON(cutString(s, h.MaxChars))
				}
			case '[':
				if len(raw) <= h.MaxChars {
					continue
				}
				var items []json.RawMessage
				if json.Unmarshal(raw, &items) != nil {
					continue
				}
				n, size := 0, 2 // the brackets
				for n < len(items) && size+len(items[n])+1 <= h.MaxChars {
					size += len(items[n]) + 1
					n++
				}
				obj[name], _ = marshalJSON(items[:n])
				obj[name+"_omitted"], _ = marshalJSON(len(items) - n)
			}
		}
	}
	b, err := marshalJSON(obj)
	if err != nil {
		return cutString(r.Content, h.MaxChars)
	}
	return string(b)
}

// cutString keeps the first max characters of s and says how many were cut.
// max <= 0 means no cap.
func cutString(s string, max int) string {
	if max <= 0 {
		return s
	}
	n := utf8.RuneCountInString(s)
	if n <= max {
		return s
	}
	i, count := 0, 0
	for i = range s {
		if count == max {
			break
		}
		count++
	}
	return s[:i] + fmt.Sprintf("…[%d chars omitted]", n-max)
}
