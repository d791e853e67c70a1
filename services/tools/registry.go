// Package tools holds the tools an agent can call: a Registry that validates
// arguments and turns every failure into a Result the model can read, the
// sandboxed per-timeline Workspace, and the workspace file tools built on it.
package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"runtime/debug"
	"sort"
	"strings"
	"sync"

	"github.com/switchboard/switchboard/services"
)

// Error codes carried by error Results. The model sees them; the agent runner
// records them on the tool_result step.
const (
	// CodeBadArguments: the arguments were not a JSON object matching the
	// tool's schema. The message names the argument; the model can retry.
	CodeBadArguments = "TOOL_BAD_ARGUMENTS"
	// CodeUnknown: no tool of that name is registered.
	CodeUnknown = "TOOL_UNKNOWN"
	// CodePanic: the handler panicked; the panic was recovered and logged.
	CodePanic = "TOOL_PANIC"
	// CodePathRefused: a workspace path was empty, absolute, contained "..",
	// a NUL byte, or led outside the workspace.
	CodePathRefused = "TOOL_PATH_REFUSED"
	// CodeCancelled and CodeTimeout: the call's context ended.
	CodeCancelled = "TOOL_CANCELLED"
	CodeTimeout   = "TOOL_TIMEOUT"
	// CodeInternal: the handler failed for a reason the model cannot fix; the
	// cause is logged, the model sees "Internal error.".
	CodeInternal = "TOOL_INTERNAL"
)

// Handler runs one tool call. A returned error becomes an error Result in
// Execute: a *services.Error keeps its Code (or gets TOOL_<KIND>) and its
// Message; any other error is logged and shown as "Internal error.". A handler
// may also return a Result with IsError set itself.
type Handler func(ctx context.Context, call Call) (Result, error)

// Call is one invocation of a tool by an agent.
type Call struct {
	// TimelineScope is the user-visible timeline the run belongs to
	// ("global", "tg:123"); it selects the workspace.
	TimelineScope string
	// ContextScope is the reasoning scope of the calling agent ("main",
	// "run:42", "sub:coder:42").
	ContextScope string
	// RunID is the agent_runs row of the calling run.
	RunID int64
	// Arguments is the raw JSON the model produced.
	Arguments json.RawMessage
	// CallID is the provider's id of this call (the tool result answers it).
	CallID string
	// Depth is how deep the calling agent is in a delegation tree (0: main).
	Depth int
	// TaintedBy is the untrusted origin that had tainted the calling loop
	// when the call ran ("" while clean), as the owner is shown it; a
	// tainted loop's lasting call runs only once the owner approved it.
	TaintedBy string
	// TaintSources are the untrusted sources behind that taint ("; "-joined,
	// as a row the loop writes records them in its tainted_by; "" while
	// clean): what a tool records with text it keeps for later prompts
	// (the todo recap's taint record), so that taint does not nest.
	TaintSources string
}

// Result is what the model sees after a tool call.
type Result struct {
	// Content is the text shown to the model, usually a JSON object.
	Content string
	// IsError marks a failed call; Content then holds
	// {"error":{"code":...,"message":...}}.
	IsError bool
	// ErrorCode is a machine code such as TOOL_BAD_ARGUMENTS; "" on success.
	ErrorCode string
	// Stored means the handler already stored the result row itself, in the
	// transaction that produced it (a sub-agent's handoff): the runtime must
	// not store it again.
	Stored bool
	// Untrusted, when not nil, is the origin of untrusted text the result
	// carries from the workspace, as the tool resolved the path: an uploaded
	// file (services.UploadsDir) or a file a tainted run wrote last
	// (services.FileTaintFile). The loop that reads it is tainted however
	// the model spelled the path (a search, "././uploads/…", a program run
	// over the workspace).
	Untrusted *services.Origin
	// Images go to a model that reads them, with this result only (they are
	// not kept in history; Content describes them).
	Images []services.Image
}

// HistoryRule describes how a tool's result is kept in conversation history
// once it is no longer the newest turn. The ContextManager applies it: the
// tool's Form when it has one and it reads the result, else
// prompt.Compress (status and errors kept, bulky fields dropped, the rest
// cut to MaxChars).
type HistoryRule struct {
	// MaxChars bounds the history form of a result (bytes). 0: the default.
	MaxChars int
	// KeepFields, when not empty, lists the only top-level fields kept.
	KeepFields []string
	// DropFields lists top-level fields removed.
	DropFields []string
	// Form writes the history form by the tool's kind (list, search, read,
	// edit, write, one line: history_forms.go); nil: the rules above.
	Form HistoryForm
}

// Tool is one callable tool. Tools of this program are built with Func from
// an arguments struct and a function; a Tool literal with a JSON Schema is
// for tools whose schema comes from elsewhere (an MCP server).
type Tool struct {
	// Name is unique in a Registry and matches ^[A-Za-z0-9_-]{1,64}$, the
	// intersection of what the LLM providers accept.
	Name        string
	Description string
	// Schema is the JSON Schema of the arguments; its top level must be
	// {"type":"object",...}. Execute validates arguments against it.
	Schema  json.RawMessage
	Handler Handler
	// History says how results are compacted in history.
	History HistoryRule
	// Source is where the tool comes from: "" for a built-in tool, else the
	// name of the MCP server whose tools are one group (SetGroup).
	Source string
	// Shared, for a tool with a Source, offers it on every timeline, not
	// only the owner's.
	Shared bool
	// Effect is the class of what a call can change or send out
	// (services.Effect); the policy decides on it. Register refuses a tool
	// without a valid one.
	Effect services.Effect

	schemaErr error // from Func: the arguments type has no JSON Schema
}

// Func defines a tool from its arguments type A and the function that runs
// it. The schema the model sees is generated from A: json tags name the
// arguments, fields without omitempty are required, a `jsonschema:"..."`
// tag describes one. Execute validates the model's arguments against it and
// fn receives them decoded, so fn checks only what a schema cannot say
// (ranges, paths).
func Func[A any](name string, effect services.Effect, description string, fn func(ctx context.Context, call Call, args A) (Result, error)) Tool {
	schema, err := schemaFor[A]()
	return Tool{
		Name: name, Description: description, Schema: schema, schemaErr: err, Effect: effect,
		Handler: func(ctx context.Context, call Call) (Result, error) {
			var args A
			if err := decodeArguments(call, &args); err != nil {
				return Result{}, err
			}
			return fn(ctx, call, args)
		},
	}
}

// WithHistory returns t with its history rule set.
func (t Tool) WithHistory(h HistoryRule) Tool {
	t.History = h
	return t
}

// Spec is the tool as the model sees it.
func (t Tool) Spec() services.ToolSpec {
	return services.ToolSpec{Name: t.Name, Description: t.Description, Parameters: t.Schema}
}

// Registry holds the tools available to agents. It is safe for concurrent use.
type Registry struct {
	logger *slog.Logger

	mu      sync.RWMutex
	tools   map[string]Tool
	schemas map[string]*argSchema
}

// NewRegistry returns an empty Registry. Handler failures the model cannot
// fix (internal errors, panics) are logged to logger; nil discards them.
func NewRegistry(logger *slog.Logger) *Registry {
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Registry{logger: logger, tools: map[string]Tool{}, schemas: map[string]*argSchema{}}
}

var toolNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Register adds a tool. It returns EINVALID for a bad name, a nil handler or
// a schema that does not parse or is not an object schema, and ECONFLICT when
// the name is taken.
func (r *Registry) Register(t Tool) error {
	s, err := check(t)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.tools[t.Name]; ok {
		return services.Errorf(services.ECONFLICT, "tool %q is already registered", t.Name)
	}
	r.tools[t.Name] = t
	r.schemas[t.Name] = s
	return nil
}

// SetGroup replaces, at once, the tools whose Source is group (an MCP
// server's) with ts, each of which gets that Source. A tool that fails
// Register's checks, or whose name another group holds, leaves the group
// as it was and returns the error. It reports whether the tool list changed.
func (r *Registry) SetGroup(group string, ts []Tool) (bool, error) {
	if group == "" {
		return false, services.Errorf(services.EINVALID, "a tool group needs a name")
	}
	schemas := make(map[string]*argSchema, len(ts))
	for i := range ts {
		ts[i].Source = group
		s, err := check(ts[i])
		if err != nil {
			return false, err
		}
		if _, dup := schemas[ts[i].Name]; dup {
			return false, services.Errorf(services.ECONFLICT, "tool %q is listed twice", ts[i].Name)
		}
		schemas[ts[i].Name] = s
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, t := range ts {
		if old, ok := r.tools[t.Name]; ok && old.Source != group {
			return false, services.Errorf(services.ECONFLICT, "tool %q is already registered", t.Name)
		}
	}
	old := map[string]Tool{}
	for name, t := range r.tools {
		if t.Source == group {
			old[name] = t
			delete(r.tools, name)
			delete(r.schemas, name)
		}
	}
	changed := len(old) != len(ts)
	for _, t := range ts {
		if o, ok := old[t.Name]; !ok || o.Description != t.Description || !bytes.Equal(o.Schema, t.Schema) {
			changed = true
		}
		r.tools[t.Name] = t
		r.schemas[t.Name] = schemas[t.Name]
	}
	return changed, nil
}

func check(t Tool) (*argSchema, error) {
	if !toolNameRE.MatchString(t.Name) {
		return nil, services.Errorf(services.EINVALID, "tool name %q must match %s", t.Name, toolNameRE)
	}
	if t.Handler == nil {
		return nil, services.Errorf(services.EINVALID, "tool %q has no handler", t.Name)
	}
	if t.schemaErr != nil {
		return nil, services.Errorf(services.EINVALID, "tool %q: arguments type: %v", t.Name, t.schemaErr)
	}
	if !t.Effect.Valid() {
		return nil, services.Errorf(services.EINVALID, "tool %q has no effect class (one of read, workspace, persist, egress, external, destructive, exec)", t.Name)
	}
	s, err := compileSchema(t.Schema)
	if err != nil {
		return nil, services.Errorf(services.EINVALID, "tool %q: schema: %v", t.Name, err)
	}
	return s, nil
}

// Get returns the tool registered under name.
func (r *Registry) Get(name string) (Tool, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.tools[name]
	return t, ok
}

// List returns every tool sorted by name, so that the tool definitions in the
// prompt's stable prefix are byte-identical from one call to the next.
func (r *Registry) List() []Tool {
	r.mu.RLock()
	out := make([]Tool, 0, len(r.tools))
	for _, t := range r.tools {
		out = append(out, t)
	}
	r.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Execute runs the named tool. It never panics and never returns a Go error:
// every failure is an error Result the model can read — TOOL_UNKNOWN for an
// unknown name, TOOL_BAD_ARGUMENTS for arguments that are not JSON or do not
// match the schema, TOOL_PANIC for a recovered panic, and the handler's own
// error otherwise (see Handler). Callers that need to stop on cancellation
// check ctx.Err() themselves.
func (r *Registry) Execute(ctx context.Context, name string, call Call) Result {
	r.mu.RLock()
	t, ok := r.tools[name]
	s := r.schemas[name]
	r.mu.RUnlock()
	if !ok {
		return ErrorResult(CodeUnknown, fmt.Sprintf("unknown tool %q; available tools: %s", name, strings.Join(r.names(), ", ")))
	}
	args, err := s.validateArguments(call.Arguments)
	if err != nil {
		return ErrorResult(CodeBadArguments, fmt.Sprintf("bad arguments for %s: %v", name, err))
	}
	call.Arguments = args
	return r.run(ctx, t, call)
}

func (r *Registry) names() []string {
	tools := r.List()
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	return names
}

func (r *Registry) run(ctx context.Context, t Tool, call Call) (res Result) {
	defer func() {
		if p := recover(); p != nil {
			r.logger.ErrorContext(ctx, "tool panicked",
				slog.String("tool", t.Name), slog.Int64("run_id", call.RunID),
				slog.String("panic", fmt.Sprint(p)), slog.String("stack", string(debug.Stack())))
			res = ErrorResult(CodePanic, fmt.Sprintf("tool %s failed unexpectedly (the failure was logged)", t.Name))
		}
	}()
	res, err := t.Handler(ctx, call)
	if err != nil {
		return r.errorResult(ctx, t, call, err)
	}
	return res
}

func (r *Registry) errorResult(ctx context.Context, t Tool, call Call, err error) Result {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return ErrorResult(CodeTimeout, fmt.Sprintf("tool %s timed out", t.Name))
	case errors.Is(err, context.Canceled):
		return ErrorResult(CodeCancelled, fmt.Sprintf("tool %s was cancelled", t.Name))
	}
	kind := services.ErrorKind(err)
	if kind == services.EINTERNAL {
		r.logger.ErrorContext(ctx, "tool failed",
			slog.String("tool", t.Name), slog.Int64("run_id", call.RunID), slog.String("error", err.Error()))
		return ErrorResult(CodeInternal, services.ErrorMessage(err))
	}
	code := services.ErrorCode(err)
	if code == "" {
		code = "TOOL_" + strings.ToUpper(kind)
	}
	return ErrorResult(code, services.ErrorMessage(err))
}

// ErrorResult builds an error Result whose Content is
// {"error":{"code":code,"message":message}}.
func ErrorResult(code, message string) Result {
	var body struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	body.Error.Code, body.Error.Message = code, message
	b, _ := marshalJSON(body) // cannot fail: two strings
	return Result{Content: string(b), IsError: true, ErrorCode: code}
}

// JSONResult marshals v as the Content of a successful Result.
func JSONResult(v any) (Result, error) {
	b, err := marshalJSON(v)
	if err != nil {
		return Result{}, fmt.Errorf("tools: marshal result: %w", err)
	}
	return Result{Content: string(b)}, nil
}

// marshalJSON is json.Marshal without HTML escaping: the reader is a model,
// and \u003c for every "<" in a file costs tokens for nothing.
func marshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// decodeArguments unmarshals validated arguments into dst. A failure here
// (a number too large for an int field, say) is the model's to fix, so it
// becomes TOOL_BAD_ARGUMENTS.
func decodeArguments(call Call, dst any) error {
	if err := json.Unmarshal(call.Arguments, dst); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return services.CodedErrorf(services.EINVALID, CodeBadArguments, "argument %q: cannot use %s as %s", te.Field, te.Value, te.Type)
		}
		return services.CodedErrorf(services.EINVALID, CodeBadArguments, "arguments: %v", err)
	}
	return nil
}

// Check reports whether Register would accept t (its name, handler and
// schema), without registering it.
func Check(t Tool) error {
	_, err := check(t)
	return err
}
