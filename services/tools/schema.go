package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// schema is the subset of JSON Schema that Execute checks before a handler
// runs. It is deliberately small: tool arguments are flat objects of strings,
// numbers and booleans, and the point is to give the model a precise message
// it can act on, not to implement the specification.
//
// Understood keywords:
//   - type: a name or a list of names among object, array, string, number,
//     integer, boolean, null. "integer" means a JSON number written without
//     fraction or exponent that fits in int64 (what a Go int field accepts).
//   - properties: per-field schemas, checked recursively when the field is
//     present. A null value for a field that is not required counts as absent
//     (models often send null for an omitted optional argument).
//   - required: fields that must be present.
//   - enum: the value must equal one of the listed JSON values.
//   - items: a schema every element of an array must match.
//   - additionalProperties: only the boolean false, which rejects fields not
//     listed in properties.
//
// Every other keyword (description, default, minimum, pattern, ...) is
// accepted and ignored; handlers check ranges themselves.
type schema struct {
	types         []string
	properties    map[string]*schema
	required      []string
	enum          []any
	items         *schema
	noAdditional  bool
	propertyNames []string // sorted keys of properties, for messages
}

var knownTypes = map[string]bool{
	"object": true, "array": true, "string": true, "number": true,
	"integer": true, "boolean": true, "null": true,
}

func parseSchema(raw json.RawMessage) (*schema, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, errors.New("empty schema")
	}
	var doc struct {
		Type                 json.RawMessage            `json:"type"`
		Properties           map[string]json.RawMessage `json:"properties"`
		Required             []string                   `json:"required"`
		Enum                 []json.RawMessage          `json:"enum"`
		Items                json.RawMessage            `json:"items"`
		AdditionalProperties json.RawMessage            `json:"additionalProperties"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	s := &schema{required: doc.Required}
	if len(doc.Type) > 0 {
		var one string
		if err := json.Unmarshal(doc.Type, &one); err == nil {
			s.types = []string{one}
		} else if err := json.Unmarshal(doc.Type, &s.types); err != nil {
			return nil, fmt.Errorf("type must be a string or a list of strings")
		}
		for _, t := range s.types {
			if !knownTypes[t] {
				return nil, fmt.Errorf("unknown type %q", t)
			}
		}
	}
	if len(doc.Properties) > 0 {
		s.properties = make(map[string]*schema, len(doc.Properties))
		for name, p := range doc.Properties {
			ps, err := parseSchema(p)
			if err != nil {
				return nil, fmt.Errorf("property %q: %w", name, err)
			}
			s.properties[name] = ps
			s.propertyNames = append(s.propertyNames, name)
		}
		sort.Strings(s.propertyNames)
	}
	for _, e := range doc.Enum {
		v, err := decodeJSON(e)
		if err != nil {
			return nil, fmt.Errorf("enum: %w", err)
		}
		s.enum = append(s.enum, v)
	}
	if len(doc.Items) > 0 {
		is, err := parseSchema(doc.Items)
		if err != nil {
			return nil, fmt.Errorf("items: %w", err)
		}
		s.items = is
	}
	if string(bytes.TrimSpace(doc.AdditionalProperties)) == "false" {
		s.noAdditional = true
	}
	return s, nil
}

func (s *schema) allows(t string) bool {
	for _, x := range s.types {
		if x == t {
			return true
		}
	}
	return false
}

// decodeJSON decodes exactly one JSON value, numbers as json.Number.
func decodeJSON(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("unexpected data after the JSON value")
	}
	return v, nil
}

// validateArguments checks raw against s and returns the arguments to hand to
// the handler: raw itself, or "{}" when the model sent nothing at all.
func (s *schema) validateArguments(raw json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage("{}")
	}
	v, err := decodeJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("arguments are not valid JSON: %v", err)
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, fmt.Errorf("arguments must be a JSON object, got %s", jsonType(v))
	}
	var errs []string
	s.validate(v, "", &errs)
	if len(errs) > 0 {
		const maxErrs = 10
		if len(errs) > maxErrs {
			errs = append(errs[:maxErrs], fmt.Sprintf("and %d more problems", len(errs)-maxErrs))
		}
		return nil, errors.New(strings.Join(errs, "; "))
	}
	return raw, nil
}

func (s *schema) validate(v any, path string, errs *[]string) {
	if len(s.types) > 0 && !s.matchesType(v) {
		*errs = append(*errs, fmt.Sprintf("%s: expected %s, got %s", describe(path), strings.Join(s.types, " or "), describeValue(v)))
		return
	}
	if len(s.enum) > 0 {
		found := false
		for _, e := range s.enum {
			if equalJSON(v, e) {
				found = true
				break
			}
		}
		if !found {
			allowed := make([]string, len(s.enum))
			for i, e := range s.enum {
				b, _ := json.Marshal(e)
				allowed[i] = string(b)
			}
			*errs = append(*errs, fmt.Sprintf("%s: must be one of %s, got %s", describe(path), strings.Join(allowed, ", "), describeValue(v)))
			return
		}
	}
	switch v := v.(type) {
	case map[string]any:
		for _, name := range s.required {
			if _, ok := v[name]; !ok {
				*errs = append(*errs, fmt.Sprintf("missing required argument %q", join(path, name)))
			}
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			ps, ok := s.properties[k]
			if !ok {
				if s.noAdditional {
					*errs = append(*errs, fmt.Sprintf("unknown argument %q (known: %s)", join(path, k), strings.Join(s.propertyNames, ", ")))
				}
				continue
			}
			if v[k] == nil && !s.isRequired(k) {
				continue
			}
			ps.validate(v[k], join(path, k), errs)
		}
	case []any:
		if s.items != nil {
			for i, e := range v {
				s.items.validate(e, fmt.Sprintf("%s[%d]", path, i), errs)
			}
		}
	}
}

func (s *schema) isRequired(name string) bool {
	for _, r := range s.required {
		if r == name {
			return true
		}
	}
	return false
}

func (s *schema) matchesType(v any) bool {
	t := jsonType(v)
	if s.allows(t) {
		return true
	}
	if n, ok := v.(json.Number); ok {
		if s.allows("number") {
			return true
		}
		if s.allows("integer") {
			_, err := strconv.ParseInt(string(n), 10, 64)
			return err == nil
		}
	}
	return false
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// describeValue names a value's type and, for scalars, a short form of it.
func describeValue(v any) string {
	switch v := v.(type) {
	case json.Number:
		return "number " + string(v)
	case string:
		if len(v) > 40 {
			v = v[:40] + "..."
		}
		return "string " + strconv.Quote(v)
	case bool:
		return "boolean " + strconv.FormatBool(v)
	}
	return jsonType(v)
}

func describe(path string) string {
	if path == "" {
		return "arguments"
	}
	return fmt.Sprintf("argument %q", path)
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func equalJSON(a, b any) bool {
	switch a := a.(type) {
	case json.Number:
		bn, ok := b.(json.Number)
		if !ok {
			return false
		}
		if a == bn {
			return true
		}
		af, err1 := a.Float64()
		bf, err2 := bn.Float64()
		return err1 == nil && err2 == nil && af == bf
	case []any:
		bs, ok := b.([]any)
		if !ok || len(a) != len(bs) {
			return false
		}
		for i := range a {
			if !equalJSON(a[i], bs[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		bm, ok := b.(map[string]any)
		if !ok || len(a) != len(bm) {
			return false
		}
		for k, av := range a {
			bv, ok := bm[k]
			if !ok || !equalJSON(av, bv) {
				return false
			}
		}
		return true
	default:
		return a == b
	}
}
