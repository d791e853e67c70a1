// Package archtest enforces the import rules of docs/ARCHITECTURE.md
// ("Packages and what each may import") against `go list`, and the limits
// of every function ("Functions": funcs_test.go).
package archtest

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/switchboard/switchboard"

// rule is one line of the table: packages on the left may import what is on
// the right.
type rule struct {
	allow    []string // package paths; "x/*" is any package under x
	anything bool
	stdOnly  bool // the standard library only
}

// readRules parses the code block under "## Packages and what each may
// import" in docs/ARCHITECTURE.md.
func readRules(t *testing.T, doc string) map[string]rule {
	t.Helper()
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i := strings.Index(text, "## Packages and what each may import")
	if i < 0 {
		t.Fatal(`docs/ARCHITECTURE.md has no section "Packages and what each may import"`)
	}
	text = text[i:]
	start := strings.Index(text, "```\n")
	end := strings.Index(text[start+4:], "```")
	if start < 0 || end < 0 {
		t.Fatal("the section has no code block of rules")
	}
	comment := regexp.MustCompile(`\(.*?\)`)
	rules := map[string]rule{}
	sc := bufio.NewScanner(strings.NewReader(text[start+4 : start+4+end]))
	for sc.Scan() {
		left, right, ok := strings.Cut(sc.Text(), "─►")
		if !ok {
			t.Fatalf("rule without ─►: %q", sc.Text())
		}
		right = strings.TrimSpace(comment.ReplaceAllString(right, ""))
		var r rule
		switch right {
		case "anything":
			r.anything = true
		case "the standard library only":
			r.stdOnly = true
		case "nothing of the project":
		default:
			for _, p := range strings.Split(right, ",") {
				r.allow = append(r.allow, strings.TrimSpace(p))
			}
		}
		for _, p := range strings.Split(left, ",") {
			p = strings.TrimSpace(p)
			if _, dup := rules[p]; dup {
				t.Fatalf("package %s has two rules", p)
			}
			rules[p] = r
		}
	}
	return rules
}

// ruleOf finds pkg's rule: its own line, or a "x/..." line above it.
func ruleOf(rules map[string]rule, pkg string) (rule, bool) {
	if r, ok := rules[pkg]; ok {
		return r, true
	}
	for p, r := range rules {
		if base, ok := strings.CutSuffix(p, "/..."); ok && (pkg == base || strings.HasPrefix(pkg, base+"/")) {
			return r, true
		}
	}
	return rule{}, false
}

func (r rule) allows(imp string) bool {
	if r.anything {
		return true
	}
	for _, a := range r.allow {
		if a == imp {
			return true
		}
		if base, ok := strings.CutSuffix(a, "/*"); ok && strings.HasPrefix(imp, base+"/") {
			return true
		}
	}
	return false
}

// goList returns each package of the module (relative path) with its
// non-test imports.
func goList(t *testing.T, root string) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg := strings.TrimPrefix(strings.TrimPrefix(f[0], module), "/")
		pkgs[pkg] = f[1:]
	}
	return pkgs
}

// violations checks every package's imports against the rules.
func violations(rules map[string]rule, pkgs map[string][]string) []string {
	var bad []string
	for pkg, imports := range pkgs {
		r, ok := ruleOf(rules, pkg)
		if !ok {
			bad = append(bad, pkg+": no line in docs/ARCHITECTURE.md's import table")
			continue
		}
		for _, imp := range imports {
			own, internal := strings.CutPrefix(imp, module+"/")
			switch {
			case internal && (strings.HasPrefix(own, "cmd/") || strings.HasPrefix(own, "scripts/")) && !strings.HasPrefix(pkg, "scripts/"):
				bad = append(bad, pkg+" imports "+own+": nothing imports cmd or scripts")
			case internal && !r.allows(own):
				bad = append(bad, pkg+" imports "+own+", which its line of the import table does not allow")
			case !internal && r.stdOnly && strings.Contains(strings.Split(imp, "/")[0], "."):
				bad = append(bad, pkg+" imports "+imp+": it may import the standard library only")
			}
		}
	}
	sort.Strings(bad)
	return bad
}

// TestImportsFollowTheArchitecture: every package's imports (go list) are
// allowed by its line of the table in docs/ARCHITECTURE.md, and every line
// names a package that exists, so the table and the code cannot drift.
func TestImportsFollowTheArchitecture(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	rules := readRules(t, filepath.Join(root, "docs", "ARCHITECTURE.md"))
	pkgs := goList(t, root)
	for _, v := range violations(rules, pkgs) {
		t.Error(v)
	}
	for p := range rules {
		if _, ok := pkgs[strings.TrimSuffix(p, "/...")]; !ok && !strings.HasSuffix(p, "/...") {
			t.Errorf("docs/ARCHITECTURE.md's import table names %s, which is not a package", p)
		}
	}
}

// TestImportRulesCatchAServiceImportingTheRepository: the check is not
// vacuous: a services package that imported repository would fail it.
func TestImportRulesCatchAServiceImportingTheRepository(t *testing.T) {
	root, _ := filepath.Abs("..")
	rules := readRules(t, filepath.Join(root, "docs", "ARCHITECTURE.md"))
	pkgs := goList(t, root)
	pkgs["services/chat"] = append(pkgs["services/chat"], module+"/repository")
	pkgs["services"] = append(pkgs["services"], "github.com/jackc/pgx/v5")
	got := strings.Join(violations(rules, pkgs), "\n")
	for _, want := range []string{"services/chat imports repository", "services imports github.com/jackc/pgx/v5"} {
		if !strings.Contains(got, want) {
			t.Errorf("violations %q lack %q", got, want)
		}
	}
}
