package e2e

import (
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestTokenResetOnRunningServers: two `switchboard serve` processes on one
// database; `switchboard token reset` (run with the servers' HTTP_ADDR)
// prints a link to that address, and at once, on both servers, the new
// token and its link log in while the old token is refused. No restart.
func TestTokenResetOnRunningServers(t *testing.T) {
	bin := buildBinary(t)
	db := migratedDB(t)
	a := startProc(t, bin, db)
	b := startProc(t, bin, db)
	m := generatedTokenRE.FindStringSubmatch(a.Stdout.String() + b.Stdout.String())
	if m == nil {
		t.Fatalf("no generated token printed:\n%s\n%s", a.Stdout.String(), b.Stdout.String())
	}
	oldTok := m[1]
	status := func(url, tok string) int {
		req, _ := http.NewRequest("GET", url, nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		c := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, p := range []*serveProc{a, b} {
		if got := status(p.URL+"/api/timeline", oldTok); got != 200 {
			t.Fatalf("generated token before reset: %d", got)
		}
	}
	addr := strings.TrimPrefix(a.URL, "http://")
	cmd := exec.Command(bin, "token", "reset")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+db, "HTTP_ADDR="+addr, "DATA_DIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("token reset: %v\n%s", err, out)
	}
	m = newTokenRE.FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("token reset printed:\n%s", out)
	}
	newTok, link := m[1], m[2]
	if want := a.URL + "/login?token=" + newTok; link != want {
		t.Fatalf("printed link %s; want %s (HTTP_ADDR)", link, want)
	}
	if strings.Contains(string(out), "restart") {
		t.Errorf("token reset still asks for a restart:\n%s", out)
	}
	for name, p := range map[string]*serveProc{"A": a, "B": b} {
		if got := status(p.URL+"/api/timeline", oldTok); got != 401 {
			t.Errorf("%s: old token after reset: %d; want 401", name, got)
		}
		if got := status(p.URL+"/api/timeline", newTok); got != 200 {
			t.Errorf("%s: new token after reset: %d; want 200", name, got)
		}
		if got := status(p.URL+"/login?token="+newTok, ""); got != 303 {
			t.Errorf("%s: the printed link's token: %d; want 303", name, got)
		}
	}
}
