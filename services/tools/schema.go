package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// A tool's argument schema is JSON Schema, generated from the arguments
// struct for the tools defined with Func and given as JSON for the others
// (tools of MCP servers). Validation is github.com/google/jsonschema-go's;
// this file only turns its verdict into a message a model can act on
// ("argument \"count\": expected integer, got string \"3\"") and keeps two
// leniencies models need: empty arguments mean {}, and null for an optional
// top-level argument means the argument is absent.

// argSchema is a tool's argument schema, resolved once at registration.
type argSchema struct {
	root     *jsonschema.Schema
	resolved *jsonschema.Resolved
}

// schemaFor generates the schema of an arguments struct. Fields without
// omitempty/omitzero are required; a `jsonschema:"..."` tag is the
// description. Optional slices and pointers are typed as what they hold
// (not ["null", ...]): a null optional argument is dropped before
// validation anyway, and providers handle single types best.
func schemaFor[A any]() (json.RawMessage, error) {
	s, err := jsonschema.For[A](nil)
	if err != nil {
		return nil, err
	}
	for name, p := range s.Properties {
		if slices.Contains(s.Required, name) || len(p.Types) != 2 || p.Types[0] != "null" {
			continue
		}
		p.Type, p.Types = p.Types[1], nil
	}
	return json.Marshal(s)
}

var knownTypes = map[string]bool{
	"object": true, "array": true, "string": true, "number": true,
	"integer": true, "boolean": true, "null": true,
}

// compileSchema parses and resolves raw, which must be an object schema.
func compileSchema(raw json.RawMessage) (*argSchema, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, errors.New("empty schema")
	}
	var root jsonschema.Schema
	if err := json.Unmarshal(raw, &root); err != nil {
		return nil, err
	}
	if root.Type != "object" {
		return nil, errors.New(`schema must have "type": "object"`)
	}
	if err := checkTypes(&root); err != nil {
		return nil, err
	}
	resolved, err := root.Resolve(nil)
	if err != nil {
		return nil, err
	}
	return &argSchema{root: &root, resolved: resolved}, nil
}

// checkTypes refuses type names JSON Schema does not have (the library
// would only fail at validation time).
func checkTypes(s *jsonschema.Schema) error {
	if s == nil {
		return nil
	}
	for _, t := range append([]string{s.Type}, s.Types...) {
		if t != "" && !knownTypes[t] {
			return fmt.Errorf("unknown type %q", t)
		}
	}
	children := []*jsonschema.Schema{s.Items, s.AdditionalProperties, s.Not}
	children = append(children, s.AnyOf...)
	children = append(children, s.OneOf...)
	children = append(children, s.AllOf...)
	for _, c := range s.Properties {
		children = append(children, c)
	}
	for _, c := range s.Defs {
		children = append(children, c)
	}
	for _, c := range children {
		if err := checkTypes(c); err != nil {
			return err
		}
	}
	return nil
}

// decodeJSON decodes exactly one JSON value.
func decodeJSON(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("unexpected data after the JSON value")
	}
	return v, nil
}

// maxProblems bounds how many problems one message lists.
const maxProblems = 10

// validateArguments checks raw against s and returns the arguments to hand to
// the handler: raw itself, or "{}" when the model sent nothing at all. The
// library stops at the first problem; to name several at once, the top-level
// argument at fault is set aside and the rest validated again.
func (s *argSchema) validateArguments(raw json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage("{}")
	}
	v, err := decodeJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("arguments are not valid JSON: %v", err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("arguments must be a JSON object, got %s", jsonType(v))
	}
	for k, x := range obj {
		if x == nil && !slices.Contains(s.root.Required, k) {
			delete(obj, k)
		}
	}
	var problems []string
	asideKeys := map[string]bool{}
	for len(problems) < maxProblems {
		err := s.resolved.Validate(obj)
		if err == nil {
			break
		}
		msgs, setAside := s.explain(err, obj, asideKeys)
		problems = append(problems, msgs...)
		n := len(obj)
		for _, k := range setAside {
			delete(obj, k)
			asideKeys[k] = true
		}
		if len(obj) == n {
			break
		}
	}
	if len(problems) > 0 {
		if len(problems) > maxProblems {
			problems = problems[:maxProblems]
		}
		return nil, errors.New(strings.Join(problems, "; "))
	}
	return raw, nil
}

var (
	validatingRE = regexp.MustCompile(`validating (\S+): `)
	typeRE       = regexp.MustCompile(`^type: .* has type "(\w+)", want (.*)$`)
	namesRE      = regexp.MustCompile(`^(?:required: missing properties:|unexpected additional properties) (\[.*\])$`)
)

// explain turns one validation error of the library into messages naming
// the argument, and returns the top-level arguments to set aside before
// looking for the next problem (none: stop here). A required argument
// already set aside is not reported missing.
func (s *argSchema) explain(err error, obj map[string]any, aside map[string]bool) (msgs []string, setAside []string) {
	text := err.Error()
	var ptr string
	if ms := validatingRE.FindAllStringSubmatchIndex(text, -1); len(ms) > 0 {
		m := ms[len(ms)-1]
		ptr, text = text[m[2]:m[3]], text[m[1]:]
	}
	// text is now the leaf message; ptr the schema location it is about.
	path, top, sub := s.locate(ptr)
	name := func(p string) string {
		if p == "" {
			return "arguments"
		}
		return fmt.Sprintf("argument %q", p)
	}
	if top != "" {
		setAside = []string{top}
	}
	switch {
	case strings.HasPrefix(text, "required: "), strings.HasPrefix(text, "unexpected additional properties "):
		var names []string
		if m := namesRE.FindStringSubmatch(text); m != nil {
			_ = json.Unmarshal([]byte(m[1]), &names)
		}
		required := strings.HasPrefix(text, "required: ")
		for _, n := range names {
			if required {
				if path == "" && aside[n] {
					continue
				}
				msgs = append(msgs, fmt.Sprintf("missing required argument %q", joinPath(path, n)))
				continue
			}
			msg := fmt.Sprintf("unknown argument %q", joinPath(path, n))
			if known := propertyNames(sub); len(known) > 0 {
				msg += " (known: " + strings.Join(known, ", ") + ")"
			}
			msgs = append(msgs, msg)
			if path == "" {
				setAside = append(setAside, n)
			}
		}
		if len(names) == 0 {
			msgs = append(msgs, name(path)+": "+text)
		}
	case typeRE.MatchString(text):
		m := typeRE.FindStringSubmatch(text)
		want := strings.Trim(m[2], `"`)
		if strings.HasPrefix(m[2], "one of ") {
			var ts []string
			_ = json.Unmarshal([]byte(strings.TrimPrefix(m[2], "one of ")), &ts)
			want = strings.Join(ts, " or ")
		}
		got := m[1]
		if top != "" && path == top {
			got = describeValue(obj[top])
		}
		if items, ok := obj[top].([]any); ok && path == top+"[]" {
			for i, it := range items {
				if t := jsonType(it); !strings.Contains(" "+want+" ", " "+t+" ") && (t != "integer" || !strings.Contains(want, "number")) {
					path, got = fmt.Sprintf("%s[%d]", top, i), describeValue(it)
					break
				}
			}
		}
		msgs = append(msgs, fmt.Sprintf("%s: expected %s, got %s", name(path), want, got))
	case strings.HasPrefix(text, "enum: ") && sub != nil:
		allowed := make([]string, len(sub.Enum))
		for i, e := range sub.Enum {
			b, _ := json.Marshal(e)
			allowed[i] = string(b)
		}
		got := ""
		if top != "" && path == top {
			got = ", got " + describeValue(obj[top])
		}
		msgs = append(msgs, fmt.Sprintf("%s: must be one of %s%s", name(path), strings.Join(allowed, ", "), got))
	default:
		msgs = append(msgs, name(path)+": "+text)
	}
	return msgs, setAside
}

// locate maps a schema location such as /properties/opts/properties/depth
// or /properties/tags/items to the argument path ("opts.depth", "tags[]"),
// the top-level argument it is in, and the schema there.
func (s *argSchema) locate(ptr string) (path, top string, sub *jsonschema.Schema) {
	sub = s.root
	segs := strings.Split(strings.TrimPrefix(ptr, "/"), "/")
	if ptr == "" || ptr == "root" {
		segs = nil
	}
	for i := 0; i < len(segs); i++ {
		seg := segs[i]
		switch {
		case seg == "properties" && i+1 < len(segs):
			i++
			n := strings.NewReplacer("~1", "/", "~0", "~").Replace(segs[i])
			if top == "" && path == "" {
				top = n
			}
			path = joinPath(path, n)
			if sub != nil {
				sub = sub.Properties[n]
			}
		case seg == "items":
			path += "[]"
			if sub != nil {
				sub = sub.Items
			}
		default:
			sub = nil
		}
	}
	return path, top, sub
}

func propertyNames(s *jsonschema.Schema) []string {
	if s == nil {
		return nil
	}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func jsonType(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		if v == float64(int64(v)) {
			return "integer"
		}
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

// describeValue names a value's type and, for scalars, the value itself.
func describeValue(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case map[string]any, []any:
		return jsonType(v)
	}
	b, _ := json.Marshal(v)
	if len(b) > 40 {
		b = append(b[:37], "..."...)
	}
	return jsonType(v) + " " + string(b)
}
