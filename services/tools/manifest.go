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
// every pin it adds resolves in the workspace (services.ContextManifests).
// Pins the stored manifest already has are kept as they are, so a pin
// whose file went away (warned about each turn) does not block the next
// edit.
func (s *Workspaces) PutContextManifest(ctx context.Context, timelineScope string, m services.ContextManifest) (services.ContextManifest, error) {
	if err := m.Validate(); err != nil {
		return services.ContextManifest{}, err
	}
	manifestMu.Lock()
	defer manifestMu.Unlock()
	cur, stored, err := s.storedManifest(timelineScope)
	if err != nil {
		return services.ContextManifest{}, err
	}
	if m.Version != cur {
		return services.ContextManifest{}, services.CodedErrorf(services.ECONFLICT, services.CodeManifestConflict,
			"the manifest changed since version %d was read (it is at version %d); read it again and retry", m.Version, cur)
	}
	for _, p := range m.Pins {
		if stored.Find(p) >= 0 {
			continue
		}
		target := p
		var err error
		if p.ID != "" {
			target, err = s.PinBlock(timelineScope, p)
		}
		if err == nil {
			_, err = markdown.ResolvePin(target, func(path string) ([]byte, error) { return s.ReadFile(timelineScope, path) })
		}
		if err != nil {
			return services.ContextManifest{}, services.CodedErrorf(services.EINVALID, services.CodeManifestInvalid, "pin %q: %s", p.String(), services.ErrorMessage(err))
		}
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

// storedManifest is the version and the manifest stored: 0 and none when
// there is none; for a file that is not a valid manifest, its "version"
// field (or 0 when even that cannot be read) and no pins, so an update
// replaces it.
func (s *Workspaces) storedManifest(timelineScope string) (int, services.ContextManifest, error) {
	data, err := s.ReadFile(timelineScope, services.ContextManifestFile)
	if services.IsKind(err, services.ENOTFOUND) {
		return 0, services.ContextManifest{}, nil
	}
	if err != nil {
		return 0, services.ContextManifest{}, err
	}
	if m, err := services.ParseContextManifest(data); err == nil {
		return m.Version, m, nil
	}
	var v struct {
		Version int `json:"version"`
	}
	_ = json.Unmarshal(data, &v)
	return max(v.Version, 0), services.ContextManifest{}, nil
}
