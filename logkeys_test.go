package main

import (
	"go/ast"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestNoLogAttrNamedSource: serve's JSON logger carries "source" on every
// line (internal/cli/log.go's newLogger: "speclaunch"; engine lines "engine"), so
// an attribute of that name added to a line writes the key twice in one
// JSON object, and a parser keeps only the last ("adapt: verify-cost
// curve ready" read "source":"probe" and lost where it came from). A key
// inside a group is another object and is fine.
func TestNoLogAttrNamedSource(t *testing.T) {
	for _, f := range sourceKeys(t, ".") {
		t.Errorf("%s: a log attribute named \"source\" (the JSON handler's own key): name it for what it is", f)
	}
}

// The check finds the spellings a line can take.
func TestSourceKeysFindsEverySpelling(t *testing.T) {
	dir := t.TempDir()
	src := `package x

import (
	"context"
	"log/slog"
)

const k = "source"

func f(log *slog.Logger, ctx context.Context) {
	log.Info("a", "source", 1)
	log.Warn("b", ` + "`source`" + `, 1)
	log.InfoContext(ctx, "c", "source", 1)
	log.LogAttrs(ctx, slog.LevelInfo, "d", slog.String("source", "x"))
	log.Info("e", slog.Any("source", 1))
	log.Info("f", slog.Attr{Key: "source"})
	attrs := []any{"source", 1}
	log.Info("g", attrs...)
	log.Info("h", slog.Group("g", "source", 1)) // fine: a nested object
	log.With("source", "x").Info("i")
	log.Info("j", k, 1)
	log.Info("k", slog.Group("source", "a", 1))
}
`
	if err := os.WriteFile(filepath.Join(dir, "x.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := len(sourceKeys(t, dir)); got != 10 {
		t.Errorf("found %d, want the 10 spellings that duplicate the key:\n%s", got, strings.Join(sourceKeys(t, dir), "\n"))
	}
}

// sourceKeys lists where a non-test .go file under root names a log
// attribute "source": an argument of a logger method (or a constant of
// that value), the key of an slog attribute constructor or slog.Attr, an
// element of a []any literal. internal/cli/log.go's newLogger, which sets it, is
// the one place allowed.
func sourceKeys(t *testing.T, root string) []string {
	t.Helper()
	methods := map[string]bool{}
	for _, m := range []string{"Debug", "Info", "Warn", "Error", "Log", "With", "LogAttrs"} {
		methods[m], methods[m+"Context"] = true, true
	}
	var found []string
	fset := token.NewFileSet()
	err := eachGoFile(fset, root, func(path string, f *ast.File) {
		consts := map[string]bool{} // names of constants whose value is "source"
		ast.Inspect(f, func(n ast.Node) bool {
			if vs, ok := n.(*ast.ValueSpec); ok {
				for i, v := range vs.Values {
					if isSource(v, nil) && i < len(vs.Names) {
						consts[vs.Names[i].Name] = true
					}
				}
			}
			return true
		})
		allowed := filepath.ToSlash(path) == "internal/cli/log.go"
		var fn string
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				fn = n.Name.Name
			case *ast.CallExpr:
				sel, ok := n.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				pkg, _ := sel.X.(*ast.Ident)
				switch {
				case pkg != nil && pkg.Name == "slog":
					// slog.String("source", …), slog.Any, a group's name: the key is first.
					if len(n.Args) > 0 && isSource(n.Args[0], consts) {
						found = append(found, fset.Position(n.Args[0].Pos()).String())
					}
				case methods[sel.Sel.Name] && !(allowed && fn == "newLogger"):
					for _, a := range n.Args {
						if isSource(a, consts) {
							found = append(found, fset.Position(a.Pos()).String())
						}
					}
				}
			case *ast.CompositeLit:
				if sel, ok := n.Type.(*ast.SelectorExpr); ok && sel.Sel.Name == "Attr" {
					for _, e := range n.Elts {
						if kv, ok := e.(*ast.KeyValueExpr); ok && isSource(kv.Value, consts) {
							found = append(found, fset.Position(kv.Value.Pos()).String())
						}
					}
				}
				if at, ok := n.Type.(*ast.ArrayType); ok {
					if id, ok := at.Elt.(*ast.Ident); ok && id.Name == "any" {
						for _, e := range n.Elts {
							if isSource(e, consts) {
								found = append(found, fset.Position(e.Pos()).String())
							}
						}
					}
				}
			}
			return true
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// isSource says whether e is the string "source", spelled as a literal or
// as one of consts.
func isSource(e ast.Expr, consts map[string]bool) bool {
	switch e := e.(type) {
	case *ast.BasicLit:
		s, err := strconv.Unquote(e.Value)
		return e.Kind == token.STRING && err == nil && s == "source"
	case *ast.Ident:
		return consts[e.Name]
	}
	return false
}
