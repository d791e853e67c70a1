package prompt

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"hash"
	"io"
	"slices"
	"strings"

	"github.com/switchboard/switchboard/services"
)

// PrefixParts is the stable prefix of a prompt: the layers that do not change
// from one request to the next unless the owner changes them.
type PrefixParts struct {
	System   string
	Tools    []services.ToolSpec
	Rules    string
	Settings string
}

// prefixHashVersion is mixed into every hash; bump it when the framing changes.
const prefixHashVersion = "switchboard/prefix/v1"

// PrefixHash returns the hex SHA-256 of p. It is deterministic: tools are
// hashed sorted by name whatever their order in p.Tools, and every field is
// length-prefixed, so no two different prefixes share a framing. An unchanged
// hash between two requests means the provider's prompt cache can be used.
func PrefixHash(p PrefixParts) string {
	h := sha256.New()
	writeField(h, []byte(prefixHashVersion))
	writeField(h, []byte(p.System))

	tools := make([]canonicalTool, 0, len(p.Tools))
	for _, t := range p.Tools {
		tools = append(tools, canonicalTool{name: t.Name, description: t.Description, params: canonicalJSONMemo(t.Parameters)})
	}
	slices.SortStableFunc(tools, func(a, b canonicalTool) int {
		if c := strings.Compare(a.name, b.name); c != 0 {
			return c
		}
		if c := strings.Compare(a.description, b.description); c != 0 {
			return c
		}
		return bytes.Compare(a.params, b.params)
	})
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(tools)))
	h.Write(n[:])
	for _, t := range tools {
		writeField(h, []byte(t.name))
		writeField(h, []byte(t.description))
		writeField(h, t.params)
	}

	writeField(h, []byte(p.Rules))
	writeField(h, []byte(p.Settings))
	return hex.EncodeToString(h.Sum(nil))
}

type canonicalTool struct {
	name, description string
	params            []byte
}

func writeField(h hash.Hash, b []byte) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(b)))
	h.Write(n[:])
	h.Write(b)
}

// canonicalJSON re-encodes raw with sorted object keys and no insignificant
// whitespace, keeping numbers as written. Invalid JSON is returned unchanged
// behind a marker byte, so it cannot collide with a valid encoding.
func canonicalJSON(raw json.RawMessage) []byte {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.Decode(new(any)) != io.EOF {
		return append([]byte{0}, raw...)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return append([]byte{0}, raw...)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}
