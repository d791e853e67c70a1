package main

import (
	"strings"
	"testing"
)

// FuzzLoadConfig sets one or two variables of the configuration table to
// arbitrary values: LoadConfig never panics, and when it refuses, every
// line of its error names a variable of the table (so the operator knows
// what to fix), never echoing a secret's value.
func FuzzLoadConfig(f *testing.F) {
	table := envTable()
	f.Add(uint8(0), "postgres://u:p@h/db", uint8(1), "/tmp/x")
	f.Add(uint8(2), "70000", uint8(3), "localhost")
	f.Add(uint8(3), "127.0.0.1:8080", uint8(4), "ftp://x")
	f.Add(uint8(5), "short", uint8(6), "yaml")
	f.Add(uint8(9), "1", uint8(10), "1")
	f.Add(uint8(10), "1", uint8(9), "0")
	f.Add(uint8(18), "-5s", uint8(19), "11")
	f.Add(uint8(20), "0", uint8(21), "1h")
	f.Add(uint8(26), "123:abc", uint8(27), "webhook")
	f.Add(uint8(29), "bad secret!", uint8(31), "1,x,-3")
	f.Add(uint8(23), "-1", uint8(24), "0")
	f.Add(uint8(7), "\n", uint8(8), "\x00")
	f.Fuzz(func(t *testing.T, i uint8, v1 string, j uint8, v2 string) {
		a, b := table[int(i)%len(table)], table[int(j)%len(table)]
		vals := map[string]string{a.Name: v1}
		if b.Name != a.Name {
			vals[b.Name] = v2
		}
		cfg, err := LoadConfig(func(k string) string { return vals[k] })
		if err == nil {
			if cfg == nil {
				t.Fatal("no config and no error")
			}
			return
		}
		lines := strings.Split(err.Error(), "\n")
		if lines[0] != "configuration:" {
			t.Fatalf("error does not start with configuration: %q", err)
		}
		for _, l := range lines[1:] {
			l = strings.TrimPrefix(l, "  ")
			named := false
			for _, v := range table {
				if strings.HasPrefix(l, v.Name+":") || strings.HasPrefix(l, v.Name+"=") {
					named = true
				}
			}
			if !named {
				t.Fatalf("error line names no variable: %q (values %q)", l, vals)
			}
		}
		for _, v := range []envVar{a, b} {
			if val := strings.TrimSpace(vals[v.Name]); v.Secret && len(val) >= 8 && strings.Contains(err.Error(), val) {
				t.Fatalf("error shows the secret %s: %q", v.Name, err)
			}
		}
	})
}
