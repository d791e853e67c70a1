package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/tools"
)

// Error codes of the exec tool.
const (
	// CodeBusy: every sandbox stayed busy for the call's whole wall time.
	CodeBusy = "TOOL_EXEC_BUSY"
	// CodeWorkspaceFull: the workspace is already past its bound.
	CodeWorkspaceFull = "TOOL_WRITE_LIMIT"
	// CodeTaintedWorkspace: an untainted run's exec while the workspace
	// holds a file a tainted run wrote; nothing ran, the run is tainted.
	CodeTaintedWorkspace = "TOOL_EXEC_TAINTED_WORKSPACE"
)

const (
	maxFilesShown  = 50
	stderrTailLine = 20
	maxTailLine    = 300
)

type execArgs struct {
	Command        string   `json:"command,omitempty" jsonschema:"A shell command line, run with sh -c in the workspace (the working directory, /workspace). Give command or script."`
	Script         string   `json:"script,omitempty" jsonschema:"A script file of the workspace to run instead of a command line: its #! line names the interpreter, else sh runs it."`
	Args           []string `json:"args,omitempty" jsonschema:"Arguments for the script, or $1, $2, ... of the command line."`
	TimeoutSeconds int      `json:"timeout_seconds,omitempty" jsonschema:"Wall time in seconds, at most the sandbox's limit (the default)."`
}

// ExecResult is the exec tool's result.
type ExecResult struct {
	// Status is "exited", or "killed" when a limit or a stop ended it.
	Status     string      `json:"status"`
	Summary    string      `json:"summary"`
	ExitCode   int         `json:"exit_code"`
	DurationMS int64       `json:"duration_ms"`
	Limits     []LimitNote `json:"limits,omitempty"`
	Stdout     string      `json:"stdout"`
	Stderr     string      `json:"stderr"`
	// StderrTail is the last 20 lines of stderr, kept in history.
	StderrTail      string       `json:"stderr_tail,omitempty"`
	StdoutBytes     int64        `json:"stdout_bytes"`
	StderrBytes     int64        `json:"stderr_bytes"`
	StdoutTruncated bool         `json:"stdout_truncated,omitempty"`
	StderrTruncated bool         `json:"stderr_truncated,omitempty"`
	OutputCap       string       `json:"output_cap"`
	Files           []FileChange `json:"files"`
	FilesNote       string       `json:"files_note,omitempty"`
}

// LimitNote is a limit a run reached, with what happened.
type LimitNote struct {
	Limit string `json:"limit"`
	Note  string `json:"note"`
}

// Tool is the exec tool: one call runs one command in a sandbox over the
// calling timeline's workspace.
func Tool(sb *Sandbox, ws tools.WorkspaceFor) tools.Tool {
	t := execTool{sb: sb, ws: ws}
	desc := "Run a command line (sh -c) or a script file of your workspace in a sandbox: the workspace is the working directory " +
		"(/workspace) and the only writable place besides a private /tmp; no network; the installed programs only (e.g. python3, " +
		"sqlite3, jq, coreutils). Returns exit code, stdout, stderr, duration and the workspace files created, changed or deleted. " +
		"Limits: " + sb.Limits() + "."
	return tools.Func("exec", services.EffectExec, desc, t.exec).WithHistory(tools.HistoryRule{
		MaxChars:   2000,
		KeepFields: []string{"summary", "exit_code", "duration_ms", "limits", "stderr_tail", "files", "files_note"},
	})
}

type execTool struct {
	sb *Sandbox
	ws tools.WorkspaceFor
}

func badArgument(format string, args ...any) error {
	return services.CodedErrorf(services.EINVALID, tools.CodeBadArguments, format, args...)
}

func (t execTool) exec(ctx context.Context, call tools.Call, a execArgs) (tools.Result, error) {
	if reason := t.sb.Reason(); reason != "" {
		return tools.Result{}, services.Errorf(services.EUNAVAILABLE, "the sandbox does not work: %s", reason)
	}
	timeout := t.sb.opts.Timeout
	switch {
	case (a.Command == "") == (a.Script == ""):
		return tools.Result{}, badArgument("give exactly one of \"command\" and \"script\"")
	case a.TimeoutSeconds < 0:
		return tools.Result{}, badArgument("argument \"timeout_seconds\" must be positive, got %d", a.TimeoutSeconds)
	case a.TimeoutSeconds > 0 && time.Duration(a.TimeoutSeconds)*time.Second > timeout:
		return tools.Result{}, badArgument("argument \"timeout_seconds\" is %d; the limit is %s", a.TimeoutSeconds, timeout)
	case a.TimeoutSeconds > 0:
		timeout = time.Duration(a.TimeoutSeconds) * time.Second
	}
	w, err := t.ws(call.TimelineScope)
	if err != nil {
		return tools.Result{}, err
	}
	if w == nil {
		return tools.Result{}, services.Errorf(services.EINTERNAL, "no workspace for timeline %q", call.TimelineScope)
	}
	if call.TaintedBy == "" {
		// A file a tainted run wrote may be the program (or feed it): the
		// run counts as having read it before anything runs, so the policy
		// decides the next exec as a tainted run's (the owner's approval).
		if o := w.UntrustedFile(nil); o != nil {
			r := tools.ErrorResult(CodeTaintedWorkspace, fmt.Sprintf("nothing was run: a file a tainted run wrote is in the workspace, and a program run here could carry its instructions. This run now counts as %s: call exec again and it waits for the owner's approval.", o))
			r.Untrusted = o
			return r, nil
		}
	}
	argv, err := commandLine(w, a)
	if err != nil {
		return tools.Result{}, err
	}
	limit := w.Limits().Workspace
	before := takeSnapshot(w.Dir())
	if limit > 0 && before.bytes > limit {
		return tools.Result{}, services.CodedErrorf(services.ETOOLARGE, CodeWorkspaceFull,
			"the workspace holds %d bytes, past its limit of %s (WORKSPACE_MAX_BYTES); nothing was run. Delete or shorten files first.", before.bytes, humanBytes(limit))
	}
	release, err := t.sb.acquire(ctx, timeout)
	if errors.Is(err, ErrBusy) {
		return tools.Result{}, services.CodedErrorf(services.EUNAVAILABLE, CodeBusy,
			"all %d sandboxes stayed busy for %s (EXEC_CONCURRENCY); nothing was run. Try again later.", t.sb.opts.Concurrency, timeout)
	}
	if err != nil {
		return tools.Result{}, err
	}
	out, err := t.sb.run(ctx, runSpec{dir: w.Dir(), argv: argv, timeout: timeout})
	release()
	w.ChangedOutside()
	if err != nil {
		return tools.Result{}, &services.Error{Kind: services.EINTERNAL, Message: "the sandbox could not start", Err: err}
	}
	after := takeSnapshot(w.Dir())
	changes := diff(before, after)
	res := t.result(out, changes)
	if limit > 0 && after.bytes > limit {
		note := enforceQuota(w.Dir(), changes, after.bytes, limit)
		res.Limits = append(res.Limits, LimitNote{Limit: "workspace", Note: note})
		res.Summary += "; " + note
	}
	r, err := tools.JSONResult(res)
	// The program could read any file of the workspace: its output may
	// carry an uploaded file's text (tools.Result.Untrusted).
	r.Untrusted = w.UntrustedFile(before.paths())
	return r, err
}

// commandLine is the program a call runs, inside the sandbox.
func commandLine(w *tools.Workspace, a execArgs) ([]string, error) {
	if a.Command != "" {
		return append([]string{"/bin/sh", "-c", a.Command, "sh"}, a.Args...), nil
	}
	rel, err := w.Resolve(a.Script)
	if err != nil {
		return nil, err
	}
	f, info, err := w.Open(a.Script)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if !info.Mode().IsRegular() {
		return nil, services.Errorf(services.EINVALID, "%q is not a regular file", a.Script)
	}
	inside := path.Join(WorkDir, filepath.ToSlash(rel))
	first, _ := bufio.NewReader(f).ReadString('\n')
	argv := []string{"/bin/sh", inside}
	if line, ok := strings.CutPrefix(strings.TrimRight(first, "\r\n"), "#!"); ok {
		interp, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
		if interp == "" {
			return nil, services.Errorf(services.EINVALID, "%q has an empty #! line", a.Script)
		}
		argv = []string{interp}
		if rest = strings.TrimSpace(rest); rest != "" {
			argv = append(argv, rest) // Linux passes the rest as one argument
		}
		argv = append(argv, inside)
	}
	return append(argv, a.Args...), nil
}

func (t execTool) result(out *Outcome, files []FileChange) ExecResult {
	o := t.sb.opts
	res := ExecResult{
		Status: "exited", ExitCode: out.ExitCode, DurationMS: out.Duration.Milliseconds(),
		Stdout: out.Stdout.String(), Stderr: out.Stderr.String(),
		StdoutBytes: out.Stdout.Total(), StderrBytes: out.Stderr.Total(),
		StdoutTruncated: out.Stdout.Truncated(), StderrTruncated: out.Stderr.Truncated(),
		OutputCap: fmt.Sprintf("%s kept of stdout and of stderr each (EXEC_MAX_OUTPUT_BYTES); head and tail when longer", humanBytes(o.MaxOutputBytes)),
		Files:     files,
	}
	if out.Killed {
		res.Status = "killed"
	}
	for _, l := range out.Limits {
		res.Limits = append(res.Limits, LimitNote{Limit: string(l.Limit), Note: l.Note})
	}
	if res.StderrBytes > 0 {
		res.StderrTail = tailLines(out.Stderr, stderrTailLine)
	}
	if len(res.Files) > maxFilesShown {
		res.FilesNote = fmt.Sprintf("showing %d of %d changed paths", maxFilesShown, len(res.Files))
		res.Files = res.Files[:maxFilesShown]
	}
	if res.Files == nil {
		res.Files = []FileChange{}
	}
	res.Summary = summary(res, out, len(files))
	return res
}

func tailLines(c *Capture, n int) string {
	lines := strings.Split(c.LastLines(n), "\n")
	for i, l := range lines {
		if len(l) > maxTailLine {
			lines[i] = strings.ToValidUTF8(l[:maxTailLine], "") + "…"
		}
	}
	return strings.Join(lines, "\n")
}

// summary is the result in one sentence: how it ended, the streams'
// sizes (and stdout's last line), the limits and the files.
func summary(res ExecResult, out *Outcome, nfiles int) string {
	var b strings.Builder
	secs := out.Duration.Seconds()
	if out.Killed {
		fmt.Fprintf(&b, "killed after %.2fs", secs)
	} else {
		fmt.Fprintf(&b, "exit %d after %.2fs", res.ExitCode, secs)
	}
	for _, l := range res.Limits {
		fmt.Fprintf(&b, " (%s limit)", l.Limit)
	}
	fmt.Fprintf(&b, "; stdout %d lines, %d bytes", out.Stdout.Lines(), res.StdoutBytes)
	if last := out.Stdout.LastLines(1); last != "" {
		if len(last) > 120 {
			last = strings.ToValidUTF8(last[:120], "") + "…"
		}
		fmt.Fprintf(&b, ", last line %q", last)
	}
	fmt.Fprintf(&b, "; stderr %d lines, %d bytes", out.Stderr.Lines(), res.StderrBytes)
	counts := map[string]int{}
	for _, f := range res.Files {
		counts[f.Change]++
	}
	if nfiles == 0 {
		b.WriteString("; no workspace file changed")
	} else {
		var parts []string
		for _, c := range []string{"created", "changed", "deleted"} {
			if counts[c] > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", counts[c], c))
			}
		}
		fmt.Fprintf(&b, "; %d workspace path(s): %s", nfiles, strings.Join(parts, ", "))
	}
	return b.String()
}

// enforceQuota removes the largest files the run created until the
// workspace is back within limit, and says what it did.
func enforceQuota(dir string, files []FileChange, used, limit int64) string {
	created := []FileChange{}
	for _, f := range files {
		if f.Change == "created" && f.Type == "file" {
			created = append(created, f)
		}
	}
	sort.Slice(created, func(i, j int) bool { return created[i].Size > created[j].Size })
	var removed []string
	for _, f := range created {
		if used <= limit {
			break
		}
		if err := os.Remove(filepath.Join(dir, filepath.FromSlash(f.Path))); err == nil {
			used -= f.Size
			removed = append(removed, f.Path)
		}
	}
	note := fmt.Sprintf("the run left the workspace past its limit of %s (WORKSPACE_MAX_BYTES)", humanBytes(limit))
	if len(removed) > 0 {
		note += fmt.Sprintf("; these files it created were removed: %s", strings.Join(removed, ", "))
	}
	if used > limit {
		note += fmt.Sprintf("; it still holds %d bytes: delete or shorten files", used)
	}
	return note
}
