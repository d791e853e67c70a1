package app_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/switchboard/switchboard/app"
	"github.com/switchboard/switchboard/app/apptest"
	"github.com/switchboard/switchboard/services/llm/llmtest"
)

// TestWhoamiNamesTheBuiltModelAndTheMessageLimit: the page learns from
// GET /api/whoami the model and provider the app built and the limit of
// one message (CHAT_MAX_CONTENT_BYTES), which the app gives the web
// server as settings.
func TestWhoamiNamesTheBuiltModelAndTheMessageLimit(t *testing.T) {
	t.Parallel()
	in := apptest.Start(t, apptest.Options{Model: llmtest.NewServer(t), Configure: func(o *app.Config) { o.Chat.MaxContentBytes = 5000 }})
	req, _ := http.NewRequest("GET", in.URL+"/api/whoami", nil)
	req.Header.Set("Authorization", "Bearer "+in.Token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var who struct {
		Model, Provider string
		MaxMessageBytes int `json:"max_message_bytes"`
	}
	if err := json.NewDecoder(res.Body).Decode(&who); err != nil {
		t.Fatal(err)
	}
	p := in.App.Provider()
	if who.Model == "" || who.Model != p.Model() || who.Provider != p.Name() || who.MaxMessageBytes != 5000 {
		t.Fatalf("whoami: %+v; want model %q, provider %q, 5000 bytes", who, p.Model(), p.Name())
	}
}
