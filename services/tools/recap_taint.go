package tools

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/switchboard/switchboard/services"
)

// CodeServiceFile refuses a write tool's write to a file the service
// keeps in the workspace (services.TodoTaintFile, the block ids under
// BlockIDsDir).
const CodeServiceFile = "TOOL_SERVICE_FILE"

// recapMu serialises updates of the todo recap's taint record.
var recapMu sync.Mutex

// isServiceFile reports whether rel (a resolved workspace path) is a file
// the service keeps: the agent's write tools may not write it.
func isServiceFile(rel string) bool {
	rel = filepath.ToSlash(rel)
	return strings.EqualFold(rel, services.TodoTaintFile) || strings.EqualFold(rel, services.FileTaintFile) || rel == BlockIDsDir || strings.HasPrefix(rel, BlockIDsDir+"/")
}

func refuseServiceFile(name string) error {
	return services.CodedErrorf(services.EINVALID, CodeServiceFile,
		"%q is kept by the service (the todo recap's taint record or the block ids); you may not write it", name)
}

// noteRecapWrite records what call's write to rel means for the todo
// recap: written by a tainted loop (call.TaintSources), the file's entry
// in services.TodoTaintFile names the sources, so the recap in a later
// prompt is marked untrusted; replaced whole by a clean loop (whole), the
// entry goes. A clean partial write (an append, an edit) keeps it: the
// rest of the file is still what the tainted run wrote. Files of no recap
// are not recorded.
//
// Any other file is recorded the same way in services.FileTaintFile: a
// run reading it later is tainted by it (untrustedOf).
func (w *Workspace) noteRecapWrite(call Call, rel string, whole bool) error {
	slash := filepath.ToSlash(rel)
	if key := services.TodoTaintKey(slash); key != "" {
		return w.noteTaint(services.TodoTaintFile, key, call.TaintSources, whole)
	}
	return w.noteTaint(services.FileTaintFile, slash, call.TaintSources, whole)
}

// noteTaint updates the taint record file for key: taint ("" for a clean
// write) replaces it after a whole rewrite or a tainted write.
func (w *Workspace) noteTaint(file, key, taint string, whole bool) error {
	if taint == "" && !whole {
		return nil
	}
	recapMu.Lock()
	defer recapMu.Unlock()
	rec := w.readTaint(file)
	if rec.Files[key] == taint {
		return nil
	}
	if taint == "" {
		delete(rec.Files, key)
	} else {
		rec.Files[key] = taint
	}
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	return w.writeServiceFile(file, append(data, '\n'))
}

// readTaint reads a taint record file (empty when there is none or it is
// not valid).
func (w *Workspace) readTaint(file string) services.TodoTaint {
	rec := services.TodoTaint{Files: map[string]string{}}
	f, _, err := w.Open(file)
	if err != nil {
		return rec
	}
	defer f.Close()
	if json.NewDecoder(f).Decode(&rec) != nil || rec.Files == nil {
		return services.TodoTaint{Files: map[string]string{}}
	}
	return rec
}

// writeServiceFile replaces a file the service keeps (rel, a clean
// relative path), creating its directory; it counts against no limit.
func (w *Workspace) writeServiceFile(rel string, data []byte) error {
	rel = filepath.FromSlash(rel)
	if dir := filepath.Dir(rel); dir != "." {
		if err := w.root.MkdirAll(dir, 0o700); err != nil {
			return fsError("create the directory of", rel, err)
		}
	}
	if err := w.replaceFile(rel, data, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", filepath.ToSlash(rel), err)
	}
	return nil
}

// untrustedIn is the origin of rel's text (a slash path relative to the
// root) when it is untrusted: an uploaded file, or a file a tainted run
// wrote last (rec, the read services.FileTaintFile); nil otherwise.
func untrustedIn(rec services.TodoTaint, rel string) *services.Origin {
	rel = filepath.ToSlash(filepath.Clean(rel))
	if services.IsUpload(rel) {
		return &services.Origin{Kind: services.OriginAttachment, Detail: rel}
	}
	if by := rec.Files[rel]; by != "" {
		o := services.HistoryOrigin("the workspace file "+rel, by)
		return &o
	}
	return nil
}

// untrustedOf is untrustedIn with the workspace's record as it stands.
func (w *Workspace) untrustedOf(rel string) *services.Origin {
	return untrustedIn(w.readTaint(services.FileTaintFile), rel)
}

// UntrustedFile is the origin of the first untrusted file the workspace
// holds (an upload, of paths; else a file a tainted run wrote last, by
// path), nil when none: a program run over the workspace may read it.
func (w *Workspace) UntrustedFile(paths []string) *services.Origin {
	for _, p := range paths {
		if services.IsUpload(p) {
			return &services.Origin{Kind: services.OriginAttachment, Detail: p}
		}
	}
	rec := w.readTaint(services.FileTaintFile)
	keys := make([]string, 0, len(rec.Files))
	for k := range rec.Files {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if o := untrustedIn(rec, k); o != nil {
			return o
		}
	}
	return nil
}
