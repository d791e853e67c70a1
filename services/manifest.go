package services

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ContextManifestFile is the context manifest's name at the root of a
// timeline's workspace (docs/CONTEXT.md, "The context manifest").
const ContextManifestFile = "context.json"

// MaxPins bounds the pins of one manifest.
const MaxPins = 50

// maxPinPathBytes bounds a pin's path.
const maxPinPathBytes = 1024

// Codes of the context manifest.
const (
	// CodeManifestConflict: a manifest update carried a version that is no
	// longer the stored one; nothing changed.
	CodeManifestConflict = "CONTEXT_MANIFEST_CONFLICT"
	// CodeManifestInvalid: the manifest is not valid JSON of its shape, or
	// a pin names something the workspace does not have.
	CodeManifestInvalid = "CONTEXT_MANIFEST_INVALID"
)

// ContextManifest lists what every main prompt of a timeline includes
// beyond rules and history: pinned files, Markdown sections and line
// ranges of its workspace. Version counts its stored edits: an update
// carries the version it read and is refused (CONTEXT_MANIFEST_CONFLICT)
// when another update came first.
type ContextManifest struct {
	Version int   `json:"version"`
	Pins    []Pin `json:"pins"`
}

// Pin is one entry of a manifest: a whole file (Path alone), a Markdown
// section (Block: its heading path, "Goals/This week") or a line range
// (Lines: [first, last], 1-based, inclusive).
// ID names a Markdown section by its stable block id instead ("b3", as
// GET /api/workspace/blocks gives it in block_id): the id keeps naming the
// same section when its heading is renamed.
type Pin struct {
	Path  string `json:"path"`
	Block string `json:"block,omitempty"`
	Lines []int  `json:"lines,omitempty"`
	ID    string `json:"id,omitempty"`
}

// String writes the pin as /pin takes it: "notes.md", "notes.md#Goals/This
// week", "plan.md:12-30".
func (p Pin) String() string {
	switch {
	case p.ID != "":
		return p.Path + "#@" + p.ID
	case p.Block != "":
		return p.Path + "#" + p.Block
	case len(p.Lines) == 2:
		return fmt.Sprintf("%s:%d-%d", p.Path, p.Lines[0], p.Lines[1])
	}
	return p.Path
}

// Same reports whether two pins name the same thing (section names compare
// case-insensitively, as sections are found).
func (p Pin) Same(q Pin) bool {
	return p.Path == q.Path && p.ID == q.ID && strings.EqualFold(strings.TrimSpace(p.Block), strings.TrimSpace(q.Block)) &&
		len(p.Lines) == len(q.Lines) && (len(p.Lines) == 0 || p.Lines[0] == q.Lines[0] && p.Lines[1] == q.Lines[1])
}

// Validate reports, as an EINVALID error naming the pin and the field, why
// the pin cannot be used.
func (p Pin) Validate() error {
	bad := func(format string, args ...any) error {
		return CodedErrorf(EINVALID, CodeManifestInvalid, "pin %q: "+format, append([]any{p.String()}, args...)...)
	}
	path := p.Path
	switch {
	case strings.TrimSpace(path) == "":
		return CodedErrorf(EINVALID, CodeManifestInvalid, "a pin has an empty \"path\"")
	case len(path) > maxPinPathBytes:
		return bad("\"path\" is longer than %d bytes", maxPinPathBytes)
	case strings.ContainsRune(path, 0):
		return bad("\"path\" contains a NUL byte")
	case strings.HasPrefix(path, "/") || strings.HasPrefix(path, `\`) || strings.HasPrefix(path, "~") || len(path) >= 2 && path[1] == ':':
		return bad("\"path\" must be relative to the workspace")
	}
	for _, seg := range strings.FieldsFunc(path, func(c rune) bool { return c == '/' || c == '\\' }) {
		if seg == ".." {
			return bad("\"path\" leaves the workspace (..)")
		}
	}
	if p.Block != "" && p.Lines != nil {
		return bad("give \"block\" or \"lines\", not both")
	}
	if p.ID != "" && (p.Block != "" || p.Lines != nil) {
		return bad("give \"id\" alone, without \"block\" or \"lines\"")
	}
	if p.ID != "" && !IsBlockID(p.ID) {
		return bad("\"id\" %q is not a block id (b and a number, e.g. b3)", p.ID)
	}
	if p.Block != "" && strings.Trim(p.Block, "/ \t") == "" {
		return bad("\"block\" is an empty heading path")
	}
	if p.Lines != nil {
		if len(p.Lines) != 2 {
			return bad("\"lines\" must be [first, last]")
		}
		if p.Lines[0] < 1 || p.Lines[1] < p.Lines[0] {
			return bad("\"lines\" [%d, %d]: want 1 ≤ first ≤ last", p.Lines[0], p.Lines[1])
		}
	}
	return nil
}

// Validate checks every pin, the version and that no pin repeats another.
func (m ContextManifest) Validate() error {
	if m.Version < 0 {
		return CodedErrorf(EINVALID, CodeManifestInvalid, "\"version\" %d: want 0 or more", m.Version)
	}
	if len(m.Pins) > MaxPins {
		return CodedErrorf(EINVALID, CodeManifestInvalid, "%d pins: at most %d", len(m.Pins), MaxPins)
	}
	for i, p := range m.Pins {
		if err := p.Validate(); err != nil {
			return err
		}
		for _, q := range m.Pins[:i] {
			if p.Same(q) {
				return CodedErrorf(EINVALID, CodeManifestInvalid, "pin %q is listed twice", p.String())
			}
		}
	}
	return nil
}

// Find returns the index of the pin that is the same as p, or -1.
func (m ContextManifest) Find(p Pin) int {
	for i, q := range m.Pins {
		if q.Same(p) {
			return i
		}
	}
	return -1
}

// ParseContextManifest decodes a manifest strictly (unknown fields and
// trailing data are errors) and validates it. Errors are EINVALID with
// CONTEXT_MANIFEST_INVALID and name the problem.
func ParseContextManifest(data []byte) (ContextManifest, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var m ContextManifest
	if err := dec.Decode(&m); err != nil {
		return ContextManifest{}, CodedErrorf(EINVALID, CodeManifestInvalid, "%s is not a valid manifest: %s", ContextManifestFile, jsonProblem(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return ContextManifest{}, CodedErrorf(EINVALID, CodeManifestInvalid, "%s is not a valid manifest: data after the JSON object", ContextManifestFile)
	}
	if err := m.Validate(); err != nil {
		return ContextManifest{}, err
	}
	return m, nil
}

func jsonProblem(err error) string {
	switch e := err.(type) {
	case *json.SyntaxError:
		return fmt.Sprintf("invalid JSON at byte %d (%s)", e.Offset, e.Error())
	case *json.UnmarshalTypeError:
		return fmt.Sprintf("field %q: want %s, got %s", e.Field, e.Type, e.Value)
	}
	if err == io.EOF {
		return "empty"
	}
	return err.Error()
}

// ParsePin reads a pin as /pin and /unpin take it: "PATH" (the whole
// file), "PATH#Heading/Sub" (a Markdown section), "PATH#@b3" (a section by
// its block id) or "PATH:FIRST-LAST" (a line range).
func ParsePin(s string) (Pin, error) {
	s = strings.TrimSpace(s)
	var p Pin
	if path, block, ok := strings.Cut(s, "#"); ok {
		p = Pin{Path: strings.TrimSpace(path), Block: strings.TrimSpace(block)}
		if id, isID := strings.CutPrefix(p.Block, "@"); isID {
			p.Block, p.ID = "", id
		}
		if p.Block == "" && p.ID == "" {
			return Pin{}, CodedErrorf(EINVALID, CodeManifestInvalid, "pin %q: the section after # is empty", s)
		}
	} else if i := strings.LastIndexByte(s, ':'); i > 0 {
		if a, b, ok := strings.Cut(s[i+1:], "-"); ok {
			first, err1 := strconv.Atoi(a)
			last, err2 := strconv.Atoi(b)
			if err1 != nil || err2 != nil {
				return Pin{}, CodedErrorf(EINVALID, CodeManifestInvalid, "pin %q: want PATH:FIRST-LAST with line numbers", s)
			}
			p = Pin{Path: s[:i], Lines: []int{first, last}}
		} else {
			p = Pin{Path: s}
		}
	} else {
		p = Pin{Path: s}
	}
	return p, p.Validate()
}

// ContextManifests read and write the context manifest of a timeline's
// workspace, and find the section a pin by block id names now.
type ContextManifests interface {
	PinBlocks
	// ContextManifest reads the manifest: version 0 and no pins when the
	// file does not exist; EINVALID (CONTEXT_MANIFEST_INVALID) when it is
	// not a valid manifest.
	ContextManifest(ctx context.Context, timelineScope string) (ContextManifest, error)
	// PutContextManifest stores m when m.Version is the stored version
	// (ECONFLICT with CONTEXT_MANIFEST_CONFLICT otherwise, nothing
	// changed) and every pin names a file (and section, and lines) the
	// workspace has (EINVALID naming the pin otherwise). It returns the
	// stored manifest, whose version is one more.
	PutContextManifest(ctx context.Context, timelineScope string, m ContextManifest) (ContextManifest, error)
}

// IsBlockID reports whether s is a stable block id: "b" and a number
// from 1 ("b3").
func IsBlockID(s string) bool {
	n, ok := strings.CutPrefix(s, "b")
	if !ok || n == "" || n[0] == '0' || len(n) > 9 {
		return false
	}
	for _, c := range n {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// PinBlocks find the section a pin by block id names now (tools.Workspaces).
type PinBlocks interface {
	// PinBlock returns p (a pin by ID) as a pin by the heading path its
	// block has now; ENOTFOUND when the file or the block is gone.
	PinBlock(timelineScope string, p Pin) (Pin, error)
}
