package tools

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/switchboard/switchboard/services"
)

// Bounds of the tool-call arguments kept in records.
const (
	// MaxRecordedArgumentBytes: arguments up to this size are recorded as
	// they are; larger ones are recorded by reference (RecordedArguments).
	MaxRecordedArgumentBytes = 4 << 10
	// recordedHeadBytes of the raw arguments are kept in the reference.
	recordedHeadBytes = 256
	// recordedFieldBytes: top-level fields up to this size are kept in the
	// reference, up to recordedFieldsBytes in all.
	recordedFieldBytes  = 256
	recordedFieldsBytes = 1 << 10
)

// OmittedArguments is the "_omitted" field of arguments recorded by
// reference: their size and SHA-256, the fields left out and the first
// bytes.
type OmittedArguments struct {
	Note   string   `json:"note"`
	Bytes  int      `json:"bytes"`
	SHA256 string   `json:"sha256"`
	Fields []string `json:"fields,omitempty"`
	Head   string   `json:"head"`
}

// RecordedArguments is what the records keep of a call's arguments: the
// steps (agent_run_steps), the hidden assistant row that carries the call
// and the later requests of the run. Up to MaxRecordedArgumentBytes they are
// kept whole. Larger ones become a JSON object holding the small top-level
// fields as they were (so "path" stays readable) and an "_omitted" field
// with the size, the SHA-256 and the first bytes of the whole: a megabyte
// written to a file is not stored, nor sent to the model again, a second
// time. The call itself ran with the whole arguments.
func RecordedArguments(args json.RawMessage) json.RawMessage {
	if len(args) <= MaxRecordedArgumentBytes {
		return args
	}
	sum := sha256.Sum256(args)
	out := map[string]json.RawMessage{}
	om := OmittedArguments{
		Note:   "the arguments were too large to keep in the history; the call ran with all of them",
		Bytes:  len(args),
		SHA256: hex.EncodeToString(sum[:]),
		Head:   head(args, recordedHeadBytes),
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(args, &obj) == nil {
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		kept := 0
		for _, k := range keys {
			v := obj[k]
			if n := len(k) + len(v); n <= recordedFieldBytes && kept+n <= recordedFieldsBytes && k != "_omitted" {
				out[k] = v
				kept += n
				continue
			}
			om.Fields = append(om.Fields, k)
		}
	}
	b, _ := marshalJSON(om) // plain fields: cannot fail
	out["_omitted"] = b
	rec, _ := marshalJSON(out)
	return rec
}

// RecordedCalls maps RecordedArguments over calls, keeping ids and names.
// It returns calls itself when nothing changes.
func RecordedCalls(calls []services.ToolCall) []services.ToolCall {
	var out []services.ToolCall
	for i, c := range calls {
		if len(c.Arguments) <= MaxRecordedArgumentBytes {
			continue
		}
		if out == nil {
			out = append([]services.ToolCall(nil), calls...)
		}
		out[i].Arguments = RecordedArguments(c.Arguments)
	}
	if out == nil {
		return calls
	}
	return out
}

// head is the first n bytes of b, cut on a UTF-8 boundary, as valid text.
func head(b []byte, n int) string {
	if len(b) <= n {
		return strings.ToValidUTF8(string(b), "\uFFFD")
	}
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return strings.ToValidUTF8(string(b[:n]), "\uFFFD") + "…"
}
