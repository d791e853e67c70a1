package tools

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/markdown"
)

// manifestMu serialises manifest updates of this process, so the version
// check and the write of one update are not interleaved with another's.
var manifestMu sync.Mutex

// ContextManifest reads the context manifest (services.ContextManifestFile)
// of a timeline's workspace: version 0 and no pins when there is none.
func (s *Workspaces) ContextManifest(_ context.Context, timelineScope string) (services.ContextManifest, error) {
	data, err := s.ReadFile(timelineScope, services.ContextManifestFile)
	if services.IsKind(err, services.ENOTFOUND) {
		return services.ContextManifest{Pins: []services.Pin{}}, nil
	}
	if err != nil {
		return services.ContextManifest{}, err
	}
	m, err := services.ParseContextManifest(data)
	if err != nil {
		return services.ContextManifest{}, err
	}
	if m.Pins == nil {
		m.Pins = []services.Pin{}
	}
	return m, nil
}

// PutContextManifest stores m when m.Version is the stored version and
// every pin resolves in the workspace (services.ContextManifests).
func (s *Workspaces) PutContextManifest(ctx context.Context, timelineScope string, m services.ContextManifest) (services.ContextManifest, error) {
	if err := m.Validate(); err != nil {
		return services.ContextManifest{}, err
	}
	for _, p := range m.Pins {
		if _, err := markdown.ResolvePin(p, func(path string) ([]byte, error) { return s.ReadFile(timelineScope, path) }); err != nil {
			return services.ContextManifest{}, services.CodedErrorf(services.EINVALID, services.CodeManifestInvalid, "pin %q: %s", p.String(), services.ErrorMessage(err))
		}
	}
	manifestMu.Lock()
	defer manifestMu.Unlock()
	cur, err := s.storedVersion(timelineScope)
	if err != nil {
		return services.ContextManifest{}, err
	}
	if m.Version != cur {
		return services.ContextManifest{}, services.CodedErrorf(services.ECONFLICT, services.CodeManifestConflict,
			"the manifest changed since version %d was read (it is at version %d); read it again and retry", m.Version, cur)
	}
	m.Version = cur + 1
	if m.Pins == nil {
		m.Pins = []services.Pin{}
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return services.ContextManifest{}, err
	}
	w, err := s.For(timelineScope)
	if err != nil {
		return services.ContextManifest{}, err
	}
	if _, _, err := w.WriteFile(services.ContextManifestFile, append(data, '\n'), false); err != nil {
		return services.ContextManifest{}, err
	}
	return m, nil
}

// storedVersion is the version of the stored manifest: 0 when there is
// none; the "version" field of a file that is not a valid manifest (an
// update replaces it), or 0 when even that cannot be read.
func (s *Workspaces) storedVersion(timelineScope string) (int, error) {
	data, err := s.ReadFile(timelineScope, services.ContextManifestFile)
	if services.IsKind(err, services.ENOTFOUND) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var v struct {
		Version int `json:"version"`
	}
	_ = json.Unmarshal(data, &v)
	return max(v.Version, 0), nil
}
