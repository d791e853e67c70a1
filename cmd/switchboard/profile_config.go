package main

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/agent"
)

// decodeProfile reads one profile of AGENT_PROFILES strictly (unknown
// fields refused); its "context" budget profile is validated over the
// defaults, an error naming the field ("context: top_k.index 0: want 1 to
// 1000").
func decodeProfile(data json.RawMessage) (agent.Profile, error) {
	var p struct {
		agent.Profile
		Context json.RawMessage `json:"context"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return agent.Profile{}, fmt.Errorf("want {\"system\":…,\"tools\":[…],\"model\":…,\"context\":{…}}: %v", err)
	}
	out := p.Profile
	if len(p.Context) > 0 && !bytes.Equal(bytes.TrimSpace(p.Context), []byte("null")) {
		var c services.PayloadProfile
		if err := json.Unmarshal(p.Context, &c); err != nil {
			return agent.Profile{}, fmt.Errorf("context: %s", services.ErrorMessage(err))
		}
		out.Context = &c
	}
	return out, nil
}
