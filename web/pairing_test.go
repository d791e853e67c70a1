package web_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/web"
)

type fakePairings struct{ approved []string }

func (f *fakePairings) ListPairings(context.Context) ([]services.Pairing, error) {
	now := time.Now()
	return []services.Pairing{
		{UserID: 9, DisplayName: "Ann", TimelineScope: "tg:9", ExpiresAt: now.Add(time.Hour)},
		{UserID: 8, DisplayName: "Bob", TimelineScope: "tg:8", ExpiresAt: now, ApprovedAt: &now},
	}, nil
}

func (f *fakePairings) ApprovePairing(_ context.Context, code string) (services.Pairing, error) {
	if code != "ABC234" {
		return services.Pairing{}, services.Errorf(services.ENOTFOUND, "no pending pairing with code %q", code)
	}
	f.approved = append(f.approved, code)
	return services.Pairing{UserID: 9, TimelineScope: "tg:9"}, nil
}

func (f *fakePairings) DenyPairing(_ context.Context, code string) (services.Pairing, error) {
	return services.Pairing{}, services.Errorf(services.ENOTFOUND, "no pending pairing with code %q", code)
}

func TestPairingRoutes(t *testing.T) {
	t.Parallel()
	// Off: a server without the Telegram channel; then one with it.
	off := httptest.NewServer(web.New(web.Deps{TokenHash: web.HashToken(testToken)}, web.Config{}).Handler())
	t.Cleanup(off.Close)
	base := off.URL
	call := func(method, path, token, body string, hdr ...string) (int, string) {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// Owner only.
	if c, _ := call("GET", "/api/pairings", "", ""); c != 401 {
		t.Fatalf("no token: %d", c)
	}
	if c, _ := call("GET", "/pairings", "", ""); c != 302 {
		t.Fatalf("page without a session: %d", c)
	}
	// Telegram not configured.
	if c, b := call("GET", "/api/pairings", testToken, ""); c != 200 || !strings.Contains(b, `"enabled":false`) {
		t.Fatalf("off: %d %s", c, b)
	}
	if c, _ := call("POST", "/telegram/webhook", "", `{}`); c != 404 {
		t.Fatalf("webhook without webhook mode: %d", c)
	}

	f := &fakePairings{}
	on := httptest.NewServer(web.New(web.Deps{TokenHash: web.HashToken(testToken), Pairings: f,
		TelegramWebhook: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })}, web.Config{}).Handler())
	t.Cleanup(on.Close)
	base = on.URL
	if c, b := call("GET", "/api/pairings", testToken, ""); c != 200 || !strings.Contains(b, `"pending":[{"user_id":9`) || !strings.Contains(b, `"approved":[{"user_id":8`) {
		t.Fatalf("list: %d %s", c, b)
	}
	if c, b := call("POST", "/api/pairings/approve", testToken, `{"code":"NOPE22"}`); c != 404 || !strings.Contains(b, "no pending pairing") {
		t.Fatalf("unknown code: %d %s", c, b)
	}
	if c, _ := call("POST", "/api/pairings/approve", testToken, `{"code":""}`); c != 400 {
		t.Fatalf("empty code: %d", c)
	}
	if c, b := call("POST", "/api/pairings/approve", testToken, `{"code":"ABC234"}`); c != 200 || !strings.Contains(b, `"timeline":"tg:9"`) {
		t.Fatalf("approve: %d %s", c, b)
	}
	if c, _ := call("POST", "/telegram/webhook", "", `{}`); c != http.StatusTeapot {
		t.Fatalf("webhook not mounted: %d", c)
	}
	if c, b := call("GET", "/pairings", testToken, ""); c != 200 || !strings.Contains(b, "pairings.js") {
		t.Fatalf("page: %d", c)
	}
}
