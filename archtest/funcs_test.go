package archtest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Limits of every function of the project (docs/ARCHITECTURE.md, "Functions").
const (
	maxParams = 6   // parameters of any function or function type
	maxLines  = 120 // lines of a production function's body
)

// contextSecond are the function types whose context.Context may come
// second, by file and name, with why.
var contextSecond = map[string]string{
	"services/command.go:Run": "the type of a method expression (CommandHandlers.Help): its receiver comes first",
}

// funcProblems parses one Go file and returns what breaks the limits:
// more than maxParams parameters, a context.Context that is not the first
// parameter, and (outside tests) a body longer than maxLines lines unless
// it is a declarative table (a body that is one return of a composite
// literal).
// A fuzz target's parameters are the fuzzed values, and a test helper's
// testing.TB comes before its context (the testing convention).
func funcProblems(fset *token.FileSet, path, rel string, src any) ([]string, error) {
	f, err := parser.ParseFile(fset, path, src, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	if ast.IsGenerated(f) {
		return nil, nil
	}
	isTest := strings.HasSuffix(path, "_test.go")
	var out []string
	// The type of a declared function or literal is checked with it (Inspect
	// visits the function before its type).
	checked := map[*ast.FuncType]bool{}
	fuzzed := map[*ast.FuncType]bool{}
	names := map[*ast.FuncType]string{} // a field's or an interface method's
	ast.Inspect(f, func(n ast.Node) bool {
		var ft *ast.FuncType
		var body *ast.BlockStmt
		name := "function type"
		switch x := n.(type) {
		case *ast.CallExpr:
			if sel, ok := x.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Fuzz" && len(x.Args) == 1 {
				if lit, ok := x.Args[0].(*ast.FuncLit); ok {
					fuzzed[lit.Type] = true
				}
			}
			return true
		case *ast.Field:
			if t, ok := x.Type.(*ast.FuncType); ok && len(x.Names) == 1 {
				names[t] = x.Names[0].Name
			}
			return true
		case *ast.FuncDecl:
			ft, body, name = x.Type, x.Body, x.Name.Name
		case *ast.FuncLit:
			ft, body, name = x.Type, x.Body, "func literal"
		case *ast.FuncType:
			if checked[x] {
				return true
			}
			ft = x
			if names[x] != "" {
				name = names[x] + " (function type)"
			}
		default:
			return true
		}
		checked[ft] = true
		pos := fset.Position(ft.Pos())
		if p := paramCount(ft); p > maxParams && !fuzzed[ft] {
			out = append(out, fmt.Sprintf("%s: %s takes %d parameters (at most %d)", pos, name, p, maxParams))
		}
		if i := contextIndex(ft); i > 0 && contextSecond[rel+":"+names[ft]] == "" {
			out = append(out, fmt.Sprintf("%s: %s takes a context.Context as parameter %d, not first", pos, name, i+1))
		}
		if body != nil && !isTest && !isTable(body) {
			if l := fset.Position(body.End()).Line - fset.Position(body.Pos()).Line; l > maxLines {
				out = append(out, fmt.Sprintf("%s: %s is %d lines long (at most %d outside declarative tables)", pos, name, l, maxLines))
			}
		}
		return true
	})
	return out, nil
}

func paramCount(ft *ast.FuncType) int {
	n := 0
	for _, f := range ft.Params.List {
		n += max(len(f.Names), 1)
	}
	return n
}

// contextIndex is the position of the first context.Context parameter
// after the testing.TB, *testing.T or *testing.B a test helper takes first
// (-1: none).
func contextIndex(ft *ast.FuncType) int {
	i := 0
	for _, f := range ft.Params.List {
		switch typeName(f.Type) {
		case "context.Context":
			return i
		case "testing.TB", "*testing.T", "*testing.B":
			if i == 0 {
				i += max(len(f.Names), 1) - 1
				continue
			}
		}
		i += max(len(f.Names), 1)
	}
	return -1
}

// typeName is a parameter's type as written, for the few contextIndex
// knows ("context.Context", "*testing.T").
func typeName(e ast.Expr) string {
	star := ""
	if s, ok := e.(*ast.StarExpr); ok {
		star, e = "*", s.X
	}
	if sel, ok := e.(*ast.SelectorExpr); ok {
		if id, ok := sel.X.(*ast.Ident); ok {
			return star + id.Name + "." + sel.Sel.Name
		}
	}
	return ""
}

// isTable reports whether body is a declarative table: one return of a
// composite literal.
func isTable(body *ast.BlockStmt) bool {
	if len(body.List) != 1 {
		return false
	}
	ret, ok := body.List[0].(*ast.ReturnStmt)
	if !ok || len(ret.Results) != 1 {
		return false
	}
	_, ok = ret.Results[0].(*ast.CompositeLit)
	return ok
}

// goFiles are the project's Go files (not node_modules or testdata).
func goFiles(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != root && (strings.HasPrefix(n, ".") || n == "node_modules" || n == "testdata" || n == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".go") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestFunctionsAreSmall: no function takes more than 6 parameters, a
// context.Context is always the first, and no production function is
// longer than 120 lines except a declarative table (generated code aside).
func TestFunctionsAreSmall(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	files := goFiles(t, root)
	if len(files) < 100 {
		t.Fatalf("found %d Go files under %s; the walk is wrong", len(files), root)
	}
	for _, p := range files {
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, p)
		problems, err := funcProblems(fset, p, filepath.ToSlash(rel), src)
		if err != nil {
			t.Fatal(err)
		}
		for _, pr := range problems {
			t.Error(pr)
		}
	}
}

// TestFunctionLimitsCatchTheirCases: the check finds each kind of problem.
func TestFunctionLimitsCatchTheirCases(t *testing.T) {
	long := "func long() {\n" + strings.Repeat("\t_ = 1\n", maxLines+1) + "}\n"
	table := "func table() []int {\n\treturn []int{\n" + strings.Repeat("\t\t1,\n", maxLines+1) + "\t}\n}\n"
	src := `package p

import (
	"context"
	"testing"
)

func seven(a, b, c, d, e, f, g int) {}
func six(a, b, c, d, e, f int)     {}
func late(id int, ctx context.Context) {}
func first(ctx context.Context, id int) {}
type Handler func(a, b, c, d, e, f, g int)
type Late interface{ Do(id int, ctx context.Context) }
var lit = func(id int, ctx context.Context) {}
func helper(t testing.TB, ctx context.Context) {}
func FuzzX(f *testing.F) { f.Fuzz(func(t *testing.T, a, b, c, d, e, g int) {}) }
` + long + table
	problems, err := funcProblems(token.NewFileSet(), "p.go", "p.go", src)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(problems, "\n")
	for _, want := range []string{"seven takes 7", "late takes a context.Context as parameter 2", "function type takes 7",
		"Do (function type) takes a context.Context as parameter 2", "func literal takes a context.Context as parameter 2", "long is 122 lines"} {
		if !strings.Contains(got, want) {
			t.Errorf("no problem %q in:\n%s", want, got)
		}
	}
	if len(problems) != 6 {
		t.Errorf("%d problems, want 6:\n%s", len(problems), got)
	}
	// Tests may be long.
	if p, _ := funcProblems(token.NewFileSet(), "p_test.go", "p_test.go", "package p\n"+long); len(p) != 0 {
		t.Errorf("a long test function counted: %v", p)
	}
}
