package tools

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/services"
)

func echoTool(name string) Tool {
	return Tool{
		Name:        name,
		Description: "echo",
		Schema: json.RawMessage(`{"type":"object","properties":{
			"text":{"type":"string"},
			"count":{"type":"integer"},
			"ratio":{"type":"number"},
			"loud":{"type":"boolean"},
			"mode":{"type":"string","enum":["a","b"]},
			"tags":{"type":"array","items":{"type":"string"}},
			"opts":{"type":"object","properties":{"depth":{"type":"integer"}},"required":["depth"]}
		},"required":["text"],"additionalProperties":false}`),
		Handler: func(ctx context.Context, call Call) (Result, error) {
			return Result{Content: string(call.Arguments)}, nil
		},
		Effect: services.EffectRead,
	}
}

func TestRegisterRejectsDuplicatesAndBadTools(t *testing.T) {
	t.Parallel()
	reg := NewRegistry(nil)
	if err := reg.Register(echoTool("echo")); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(echoTool("echo")); !services.IsKind(err, services.ECONFLICT) {
		t.Fatalf("duplicate: got %v, want ECONFLICT", err)
	}
	bad := []Tool{
		echoTool("has space"),
		echoTool(""),
		{Name: "nohandler", Schema: json.RawMessage(`{"type":"object"}`)},
		{Name: "badschema", Schema: json.RawMessage(`{"type":`), Handler: echoTool("x").Handler},
		{Name: "notobject", Schema: json.RawMessage(`{"type":"string"}`), Handler: echoTool("x").Handler},
		{Name: "unknowntype", Schema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"text"}}}`), Handler: echoTool("x").Handler},
		{Name: "noeffect", Schema: json.RawMessage(`{"type":"object"}`), Handler: echoTool("x").Handler},
		{Name: "badeffect", Schema: json.RawMessage(`{"type":"object"}`), Handler: echoTool("x").Handler, Effect: "lasting"},
	}
	for _, tool := range bad {
		if err := reg.Register(tool); !services.IsKind(err, services.EINVALID) {
			t.Errorf("Register(%q): got %v, want EINVALID", tool.Name, err)
		}
	}
}

func TestListIsSortedAndGetFinds(t *testing.T) {
	t.Parallel()
	reg := NewRegistry(nil)
	for _, n := range []string{"write_file", "alpha", "search", "read_file"} {
		if err := reg.Register(echoTool(n)); err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	for _, tool := range reg.List() {
		names = append(names, tool.Name)
	}
	if got := strings.Join(names, ","); got != "alpha,read_file,search,write_file" {
		t.Fatalf("List order = %s", got)
	}
	if _, ok := reg.Get("search"); !ok {
		t.Fatal("Get(search) not found")
	}
	if _, ok := reg.Get("nope"); ok {
		t.Fatal("Get(nope) found")
	}
}

func TestExecuteArguments(t *testing.T) {
	t.Parallel()
	reg := NewRegistry(nil)
	if err := reg.Register(echoTool("echo")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, args string
		wantErr    []string // substrings of the message; nil = success
	}{
		{"minimal", `{"text":"hi"}`, nil},
		{"all fields", `{"text":"hi","count":3,"ratio":0.5,"loud":true,"mode":"b","tags":["x"],"opts":{"depth":1}}`, nil},
		{"null optional is absent", `{"text":"hi","count":null}`, nil},
		{"integer-valued number for number", `{"text":"hi","ratio":2}`, nil},
		{"malformed JSON", `{"text":"hi"`, []string{"not valid JSON"}},
		{"trailing garbage", `{"text":"hi"} x`, []string{"not valid JSON"}},
		{"not an object", `["text"]`, []string{"must be a JSON object", "array"}},
		{"null arguments", `null`, []string{"must be a JSON object", "null"}},
		{"empty arguments miss required", ``, []string{`missing required argument "text"`}},
		{"missing required", `{"count":1}`, []string{`missing required argument "text"`}},
		{"wrong type", `{"text":5}`, []string{`argument "text"`, "expected string", "integer 5"}},
		{"null required", `{"text":null}`, []string{`argument "text"`, "expected string", "null"}},
		{"fraction for integer", `{"text":"a","count":1.5}`, []string{`argument "count"`, "expected integer"}},
		{"string for integer", `{"text":"a","count":"3"}`, []string{`argument "count"`, `string "3"`}},
		{"enum", `{"text":"a","mode":"c"}`, []string{`argument "mode"`, `"a", "b"`}},
		{"array items", `{"text":"a","tags":["x",1]}`, []string{`argument "tags[1]"`}},
		{"nested required", `{"text":"a","opts":{}}`, []string{`missing required argument "opts.depth"`}},
		{"nested type", `{"text":"a","opts":{"depth":"deep"}}`, []string{`argument "opts.depth"`}},
		{"unknown field", `{"text":"a","pth":"x"}`, []string{`unknown argument "pth"`, "known: count"}},
		{"several problems", `{"count":"x","loud":1}`, []string{`"text"`, `"count"`, `"loud"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := reg.Execute(context.Background(), "echo", Call{Arguments: json.RawMessage(tt.args)})
			if tt.wantErr == nil {
				if res.IsError {
					t.Fatalf("unexpected error result %s", res.Content)
				}
				return
			}
			if !res.IsError || res.ErrorCode != CodeBadArguments {
				t.Fatalf("got %+v, want %s", res, CodeBadArguments)
			}
			msg := errorMessage(t, res)
			for _, w := range tt.wantErr {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q does not contain %q", msg, w)
				}
			}
		})
	}
}

func errorMessage(t testing.TB, res Result) string {
	t.Helper()
	var body struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal([]byte(res.Content), &body); err != nil {
		t.Fatalf("error content is not JSON: %q", res.Content)
	}
	if body.Error.Code != res.ErrorCode {
		t.Fatalf("content code %q != ErrorCode %q", body.Error.Code, res.ErrorCode)
	}
	return body.Error.Message
}

func TestExecuteUnknownPanicAndErrors(t *testing.T) {
	t.Parallel()
	reg := NewRegistry(nil)
	schema := json.RawMessage(`{"type":"object"}`)
	handlers := map[string]Handler{
		"panics": func(context.Context, Call) (Result, error) { panic("boom") },
		"notfound": func(context.Context, Call) (Result, error) {
			return Result{}, services.Errorf(services.ENOTFOUND, "no such thing")
		},
		"coded": func(context.Context, Call) (Result, error) {
			return Result{}, services.CodedErrorf(services.EINVALID, "MY_CODE", "bad thing")
		},
		"internal": func(context.Context, Call) (Result, error) {
			return Result{}, errors.New("secret host detail")
		},
		"cancelled": func(ctx context.Context, _ Call) (Result, error) { return Result{}, ctx.Err() },
	}
	for name, h := range handlers {
		if err := reg.Register(Tool{Name: name, Schema: schema, Handler: h, Effect: services.EffectRead}); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	check := func(res Result, code, msgPart string) {
		t.Helper()
		if !res.IsError || res.ErrorCode != code {
			t.Fatalf("got %+v, want code %s", res, code)
		}
		if msg := errorMessage(t, res); !strings.Contains(msg, msgPart) {
			t.Fatalf("message %q does not contain %q", msg, msgPart)
		}
	}
	check(reg.Execute(ctx, "nope", Call{}), CodeUnknown, `unknown tool "nope"`)
	check(reg.Execute(ctx, "panics", Call{}), CodePanic, "panics")
	check(reg.Execute(ctx, "notfound", Call{}), "TOOL_NOT_FOUND", "no such thing")
	check(reg.Execute(ctx, "coded", Call{}), "MY_CODE", "bad thing")
	res := reg.Execute(ctx, "internal", Call{})
	check(res, CodeInternal, "Internal error.")
	if strings.Contains(res.Content, "secret") {
		t.Fatalf("internal cause leaked: %s", res.Content)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	check(reg.Execute(cctx, "cancelled", Call{}), CodeCancelled, "cancelled")
}

type funcArgs struct {
	Path  string   `json:"path" jsonschema:"Where."`
	Limit int      `json:"limit,omitempty"`
	Tags  []string `json:"tags,omitempty"`
	Ratio *float64 `json:"ratio,omitempty"`
}

// TestFuncSchemaFromArgumentsType: a tool defined by Func has the schema of
// its arguments struct (required = fields without omitempty, descriptions
// from jsonschema tags, optional slices typed "array"), arguments are
// validated against it and handed to the function decoded.
func TestFuncSchemaFromArgumentsType(t *testing.T) {
	t.Parallel()
	var got funcArgs
	tool := Func("f", services.EffectRead, "a tool", func(_ context.Context, _ Call, a funcArgs) (Result, error) {
		got = a
		return Result{Content: "ok"}, nil
	})
	var schema struct {
		Type       string
		Required   []string
		Properties map[string]struct {
			Type        any
			Description string
		}
		AdditionalProperties *bool
	}
	if err := json.Unmarshal(tool.Schema, &schema); err != nil {
		t.Fatal(err)
	}
	if schema.Type != "object" || strings.Join(schema.Required, ",") != "path" ||
		schema.AdditionalProperties == nil || *schema.AdditionalProperties {
		t.Fatalf("schema %s", tool.Schema)
	}
	if p := schema.Properties["path"]; p.Description != "Where." || p.Type != "string" {
		t.Fatalf("path property %+v", p)
	}
	if p := schema.Properties["tags"]; p.Type != "array" {
		t.Fatalf("optional slice typed %v, want array", p.Type)
	}
	reg := NewRegistry(nil)
	if err := reg.Register(tool); err != nil {
		t.Fatal(err)
	}
	res := reg.Execute(context.Background(), "f", Call{Arguments: json.RawMessage(`{"path":"a","limit":3,"tags":["x"],"ratio":null}`)})
	if res.IsError || got.Path != "a" || got.Limit != 3 || len(got.Tags) != 1 || got.Ratio != nil {
		t.Fatalf("result %+v, args %+v", res, got)
	}
	res = reg.Execute(context.Background(), "f", Call{Arguments: json.RawMessage(`{"path":7}`)})
	msg := errorMessage(t, res)
	if !strings.Contains(msg, `argument "path": expected string, got integer 7`) || strings.Contains(msg, "missing") {
		t.Fatalf("message %q", msg)
	}

	bad := Func("g", services.EffectRead, "bad", func(context.Context, Call, struct{ C chan int }) (Result, error) { return Result{}, nil })
	if err := reg.Register(bad); !services.IsKind(err, services.EINVALID) {
		t.Fatalf("arguments type with a channel: got %v, want EINVALID", err)
	}
}
