package tools

import (
	"encoding/json"
	"fmt"
	"path/filepath"
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
	return strings.EqualFold(rel, services.TodoTaintFile) || rel == BlockIDsDir || strings.HasPrefix(rel, BlockIDsDir+"/")
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
func (w *Workspace) noteRecapWrite(call Call, rel string, whole bool) error {
	key := services.TodoTaintKey(filepath.ToSlash(rel))
	if key == "" {
		return nil
	}
	taint := call.TaintSources
	if taint == "" && !whole {
		return nil
	}
	recapMu.Lock()
	defer recapMu.Unlock()
	rec := w.recapTaint()
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
	return w.writeServiceFile(services.TodoTaintFile, append(data, '\n'))
}

// recapTaint reads the taint record (empty when there is none or it is
// not valid).
func (w *Workspace) recapTaint() services.TodoTaint {
	rec := services.TodoTaint{Files: map[string]string{}}
	f, _, err := w.Open(services.TodoTaintFile)
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
