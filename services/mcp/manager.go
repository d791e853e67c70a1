package mcp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/tools"
)

// Error codes of MCP tool results, beside the registry's (TOOL_TIMEOUT, …).
const (
	// CodeServerDown: the server is not running (it is being restarted) or
	// failed during the call.
	CodeServerDown = "MCP_SERVER_DOWN"
	// CodeServerError: the server refused the call (JSON-RPC error).
	CodeServerError = "MCP_ERROR"
	// CodeToolError: the tool ran and reported an error (isError).
	CodeToolError = "MCP_TOOL_ERROR"
)

const (
	defaultTimeout   = 60 * time.Second
	connectTimeout   = 30 * time.Second
	defaultHistory   = 1500
	maxResultBytes   = 64 << 10
	toolNameSep      = "__"
	stableAfter      = time.Minute // a session this old resets the backoff
	defaultMinBackof = time.Second
	defaultMaxBackof = time.Minute
)

// Options configures a Manager.
type Options struct {
	Logger *slog.Logger
	// Registry receives each server's tools as one group.
	Registry *tools.Registry
	// Observe, when set, hears every call: server, tool, duration and the
	// error code ("" for success).
	Observe func(server, tool string, d time.Duration, code string)
	// MinBackoff and MaxBackoff bound the wait before a server that ended
	// is started again (default 1 s doubling to 1 min).
	MinBackoff, MaxBackoff time.Duration
	// Version is announced to servers.
	Version string
}

// Manager keeps the configured servers running and their tools registered.
type Manager struct {
	opts    Options
	servers []*server
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

var _ services.ToolCatalog = (*Manager)(nil)

// New returns a Manager for cfg; Start starts the servers.
func New(cfg Config, opts Options) *Manager {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = defaultMinBackof
	}
	if opts.MaxBackoff < opts.MinBackoff {
		opts.MaxBackoff = max(defaultMaxBackof, opts.MinBackoff)
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	m := &Manager{opts: opts}
	for _, name := range cfg.Names() {
		c := cfg[name]
		if c.Timeout <= 0 {
			c.Timeout = Duration(defaultTimeout)
		}
		if c.HistoryMaxChars <= 0 {
			c.HistoryMaxChars = defaultHistory
		}
		m.servers = append(m.servers, &server{m: m, name: name, cfg: c, state: "starting", log: opts.Logger.With("mcp_server", name)})
	}
	return m
}

// Start starts every server in the background; a server that cannot start
// is retried with backoff, its tools absent until it runs.
func (m *Manager) Start(ctx context.Context) {
	ctx, m.cancel = context.WithCancel(ctx)
	for _, s := range m.servers {
		m.wg.Add(1)
		go func() { defer m.wg.Done(); s.loop(ctx) }()
	}
}

// Close stops every server and waits for them.
func (m *Manager) Close() {
	if m.cancel != nil {
		m.cancel()
	}
	m.wg.Wait()
}

// ToolCatalog lists every registered tool with its source's state, and the
// servers.
func (m *Manager) ToolCatalog() ([]services.ToolInfo, []services.ToolServerInfo) {
	states := map[string]string{}
	var servers []services.ToolServerInfo
	for _, s := range m.servers {
		info := s.info()
		states[s.name] = info.State
		servers = append(servers, info)
	}
	var out []services.ToolInfo
	if m.opts.Registry != nil {
		for _, t := range m.opts.Registry.List() {
			src, state := "builtin", "ready"
			if t.Source != "" {
				src, state = t.Source, states[t.Source]
			}
			out = append(out, services.ToolInfo{Name: t.Name, Description: t.Description, Source: src, State: state})
		}
	}
	return out, servers
}

// ToolsOf returns the registered tool names of one server (sub-agent
// profiles name servers as "<server>__*").
func ToolsOf(reg *tools.Registry, server string) []string {
	var names []string
	for _, t := range reg.List() {
		if t.Source == server {
			names = append(names, t.Name)
		}
	}
	return names
}

type server struct {
	m    *Manager
	name string
	cfg  ServerConfig
	log  *slog.Logger

	mu       sync.Mutex
	session  *mcp.ClientSession
	state    string
	lastErr  string
	restarts int
	ntools   int
	names    map[string]string // registered name → the server's name
}

func (s *server) info() services.ToolServerInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return services.ToolServerInfo{Name: s.name, Transport: s.cfg.Transport(), State: s.state, Error: s.lastErr,
		Tools: s.ntools, Restarts: s.restarts}
}

func (s *server) setState(state, why string) {
	s.mu.Lock()
	s.state, s.lastErr = state, why
	s.mu.Unlock()
}

// loop runs the server until ctx ends, starting it again with backoff
// whenever it ends or cannot start.
func (s *server) loop(ctx context.Context) {
	backoff := s.m.opts.MinBackoff
	for {
		started := time.Now()
		err := s.runOnce(ctx)
		if ctx.Err() != nil {
			s.setState("stopped", "")
			return
		}
		if time.Since(started) > stableAfter {
			backoff = s.m.opts.MinBackoff
		}
		s.setState("down", err.Error())
		s.log.Warn("MCP server down; starting it again", "err", err, "in", backoff.String())
		select {
		case <-ctx.Done():
			s.setState("stopped", "")
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, s.m.opts.MaxBackoff)
		s.mu.Lock()
		s.restarts++
		s.mu.Unlock()
	}
}

// runOnce connects, registers the tools and waits until the session ends.
func (s *server) runOnce(ctx context.Context) error {
	s.mu.Lock()
	s.state = "starting"
	s.mu.Unlock()
	client := mcp.NewClient(&mcp.Implementation{Name: "switchboard", Version: s.m.opts.Version}, &mcp.ClientOptions{
		Logger: s.log,
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			go func() {
				if err := s.refresh(ctx); err != nil && ctx.Err() == nil {
					s.log.Warn("MCP server: refreshing the tool list failed", "err", err)
				}
			}()
		},
	})
	transport, err := s.transport()
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	session, err := client.Connect(cctx, transport, nil)
	cancel()
	if err != nil {
		return fmt.Errorf("could not start: %v", err)
	}
	s.mu.Lock()
	s.session = session
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if s.session == session {
			s.session = nil
		}
		s.mu.Unlock()
		_ = session.Close()
	}()
	if err := s.refresh(ctx); err != nil {
		return fmt.Errorf("could not list its tools: %v", err)
	}
	s.setState("ready", "")
	s.log.Info("MCP server ready", "tools", s.info().Tools)
	done := make(chan error, 1)
	go func() { done <- session.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			err = errors.New("the server closed the connection")
		}
		return fmt.Errorf("ended: %v", err)
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *server) transport() (mcp.Transport, error) {
	if s.cfg.URL != "" {
		return &mcp.StreamableClientTransport{Endpoint: s.cfg.URL,
			HTTPClient: &http.Client{Transport: headerTransport{headers: s.cfg.Headers}}}, nil
	}
	cmd := exec.Command(s.cfg.Command, s.cfg.Args...)
	cmd.Dir = s.cfg.Cwd
	// The server gets what the operator gave it, not the service's secrets.
	for _, k := range []string{"PATH", "HOME", "LANG", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	for k, v := range s.cfg.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stderr = &logWriter{log: s.log}
	return &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, nil
}

type headerTransport struct{ headers map[string]string }

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(h.headers) > 0 {
		r = r.Clone(r.Context())
		for k, v := range h.headers {
			r.Header.Set(k, v)
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}

// logWriter logs a stdio server's stderr, line by line, at debug level.
type logWriter struct {
	log *slog.Logger
	mu  sync.Mutex
	buf []byte
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := slices.Index(w.buf, '\n')
		if i < 0 {
			break
		}
		w.log.Debug("MCP server stderr", "line", string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) > 4096 {
		w.buf = w.buf[:0]
	}
	return len(p), nil
}

var badNameChars = regexp.MustCompile(`[^A-Za-z0-9_-]`)

// refresh lists the server's tools and replaces its group in the registry.
func (s *server) refresh(ctx context.Context) error {
	s.mu.Lock()
	session := s.session
	s.mu.Unlock()
	if session == nil {
		return errors.New("not connected")
	}
	lctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	var list []tools.Tool
	names := map[string]string{}
	for t, err := range session.Tools(lctx, nil) {
		if err != nil {
			return err
		}
		if len(s.cfg.Allow) > 0 && !slices.Contains(s.cfg.Allow, t.Name) || slices.Contains(s.cfg.Deny, t.Name) {
			continue
		}
		name := s.name + toolNameSep + badNameChars.ReplaceAllString(t.Name, "_")
		if len(name) > 64 {
			name = name[:64]
		}
		schema, err := json.Marshal(t.InputSchema)
		if err != nil || t.InputSchema == nil {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		tool := tools.Tool{Name: name, Description: t.Description, Schema: schema, Handler: s.call(t.Name),
			History: tools.HistoryRule{MaxChars: s.cfg.HistoryMaxChars}, Shared: s.cfg.Shared, Source: s.name,
			Effect: toolEffect(s.cfg, t)}
		if err := tools.Check(tool); err != nil {
			s.log.Warn("MCP server: tool left out", "tool", t.Name, "err", err)
			continue
		}
		if _, dup := names[name]; dup {
			s.log.Warn("MCP server: tool left out: its name clashes with another once cleaned", "tool", t.Name)
			continue
		}
		names[name] = t.Name
		list = append(list, tool)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	changed, err := s.m.opts.Registry.SetGroup(s.name, list)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.ntools, s.names = len(list), names
	s.mu.Unlock()
	if changed {
		s.log.Info("MCP server: tool list updated", "tools", len(list))
	}
	return nil
}

// call is the handler of one of the server's tools.
func (s *server) call(toolName string) tools.Handler {
	return func(ctx context.Context, call tools.Call) (tools.Result, error) {
		s.mu.Lock()
		session, why := s.session, s.lastErr
		s.mu.Unlock()
		if session == nil {
			if why == "" {
				why = "it is starting"
			}
			s.observe(toolName, 0, CodeServerDown)
			return tools.Result{}, services.CodedErrorf(services.EUNAVAILABLE, CodeServerDown,
				"the MCP server %q is not running (%s); it is being started again. Try later, or do without this tool", s.name, why)
		}
		cctx, cancel := context.WithTimeout(ctx, time.Duration(s.cfg.Timeout))
		defer cancel()
		start := time.Now()
		res, err := session.CallTool(cctx, &mcp.CallToolParams{Name: toolName, Arguments: json.RawMessage(call.Arguments)})
		d := time.Since(start)
		var rpcErr *jsonrpc.Error
		switch {
		case err == nil:
		case ctx.Err() != nil:
			s.observe(toolName, d, "cancelled")
			return tools.Result{}, ctx.Err()
		case cctx.Err() != nil:
			s.observe(toolName, d, tools.CodeTimeout)
			return tools.Result{}, services.CodedErrorf(services.EUNAVAILABLE, tools.CodeTimeout,
				"the MCP tool %s of server %q did not answer within %s", toolName, s.name, time.Duration(s.cfg.Timeout))
		case errors.As(err, &rpcErr):
			s.observe(toolName, d, CodeServerError)
			return tools.Result{}, services.CodedErrorf(services.EINVALID, CodeServerError, "the MCP server %q refused the call: %s", s.name, rpcErr.Message)
		default:
			// The connection broke: end the session so the server is started again.
			s.observe(toolName, d, CodeServerDown)
			_ = session.Close()
			return tools.Result{}, services.CodedErrorf(services.EUNAVAILABLE, CodeServerDown,
				"the MCP server %q failed during the call (%v); it is being started again", s.name, err)
		}
		content, images := resultContent(res)
		if res.IsError {
			s.observe(toolName, d, CodeToolError)
			return tools.ErrorResult(CodeToolError, content), nil
		}
		s.observe(toolName, d, "")
		return tools.Result{Content: content, Images: images}, nil
	}
}

func (s *server) observe(tool string, d time.Duration, code string) {
	if s.m.opts.Observe != nil {
		s.m.opts.Observe(s.name, tool, d, code)
	}
}

// Images a result may pass to the model: how many, how large, which types.
const (
	maxImages     = 4
	maxImageBytes = 2 << 20
)

var imageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// resultContent is what the model reads of a result: text as it is, images
// passed on (within limits; a model that does not read images sees only
// their description), other content described, structured content as JSON
// when no text says it, the text cut at 64 KiB.
func resultContent(res *mcp.CallToolResult) (string, []services.Image) {
	var parts []string
	var images []services.Image
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, c.Text)
		case *mcp.ImageContent:
			if imageTypes[c.MIMEType] && len(c.Data) <= maxImageBytes && len(images) < maxImages {
				images = append(images, services.Image{MIMEType: c.MIMEType, Data: c.Data})
				parts = append(parts, fmt.Sprintf("[image %d, %s, %d bytes]", len(images), c.MIMEType, len(c.Data)))
			} else {
				parts = append(parts, fmt.Sprintf("[image, %s, %d bytes: not passed on (at most %d images of %d bytes, PNG, JPEG, GIF or WebP)]",
					c.MIMEType, len(c.Data), maxImages, maxImageBytes))
			}
		case *mcp.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio, %s, %d bytes: not shown]", c.MIMEType, len(c.Data)))
		case *mcp.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource %q: %s %s]", c.Name, c.URI, c.MIMEType))
		case *mcp.EmbeddedResource:
			if r := c.Resource; r != nil {
				if r.Text != "" {
					parts = append(parts, fmt.Sprintf("[resource %s]\n%s", r.URI, r.Text))
				} else {
					parts = append(parts, fmt.Sprintf("[resource %s, %s, %d bytes: not shown]", r.URI, r.MIMEType, base64.StdEncoding.DecodedLen(len(r.Blob))))
				}
			}
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			parts = append(parts, string(b))
		}
	}
	text := strings.Join(parts, "\n")
	if len(text) > maxResultBytes {
		cut := maxResultBytes
		for cut > 0 && (text[cut]&0xC0) == 0x80 {
			cut--
		}
		text = text[:cut] + fmt.Sprintf("\n[result cut at %d of %d bytes]", cut, len(text))
	}
	if text == "" {
		text = "(no content)"
	}
	return text, images
}

// toolEffect is the effect class of an MCP tool: read when the server's
// configuration lists it in read_only (the owner's word); else destructive
// when destructiveHint is set, even beside readOnlyHint (a server's hints
// that contradict each other get the stricter one); else read when its
// annotations say it is read-only (readOnlyHint); else external.
func toolEffect(cfg ServerConfig, t *mcp.Tool) services.Effect {
	if slices.Contains(cfg.ReadOnly, t.Name) {
		return services.EffectRead
	}
	a := t.Annotations
	if a != nil && a.DestructiveHint != nil && *a.DestructiveHint {
		return services.EffectDestructive
	}
	if a != nil && a.ReadOnlyHint {
		return services.EffectRead
	}
	return services.EffectExternal
}
