// Package mcptest gives tests real MCP servers from the npm registry
// (installed by scripts/test.sh into scripts/testdeps):
// @modelcontextprotocol/server-everything over stdio and over streamable
// HTTP, and @modelcontextprotocol/server-filesystem. Without node or the
// packages the tests are skipped, except under CI=true, where that is a
// failure.
package mcptest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/services/mcp"
)

// Everything is the configuration of server-everything over stdio.
func Everything(t testing.TB) mcp.ServerConfig {
	t.Helper()
	return mcp.ServerConfig{Command: node(t), Args: []string{pkg(t, "server-everything"), "stdio"}}
}

// Filesystem is the configuration of server-filesystem serving dir.
func Filesystem(t testing.TB, dir string) mcp.ServerConfig {
	t.Helper()
	return mcp.ServerConfig{Command: node(t), Args: []string{pkg(t, "server-filesystem"), dir}}
}

// EverythingHTTP starts server-everything over streamable HTTP on a free
// 127.0.0.1 port and returns its endpoint; it stops at the test's end.
func EverythingHTTP(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(node(t), pkg(t, "server-everything"), "streamableHttp")
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "listening on port") {
				close(ready)
				break
			}
		}
		for sc.Scan() {
		}
	}()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatal("server-everything (streamable HTTP) did not start within 30s")
	}
	return fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
}

func node(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("node")
	if err != nil {
		missing(t, "node")
	}
	return p
}

// pkg returns the entry point of @modelcontextprotocol/<name>.
func pkg(t testing.TB, name string) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			p := filepath.Join(dir, "scripts", "testdeps", "node_modules", "@modelcontextprotocol", name, "dist", "index.js")
			if _, err := os.Stat(p); err != nil {
				missing(t, "@modelcontextprotocol/"+name)
			}
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			missing(t, "the module root")
		}
		dir = parent
	}
}

func missing(t testing.TB, what string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s missing (scripts/test.sh installs it)", what)
	}
	t.Skipf("%s missing; run scripts/test.sh (or npm ci in scripts/testdeps)", what)
}
