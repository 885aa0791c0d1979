package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoLogAttrNamedSource: serve's JSON logger carries "source" on every
// line (cli/log.go: "speclaunch", "engine", "probe"), so a call that adds
// an attribute of that name writes the key twice in one JSON object, and
// a parser keeps only the last ("adapt: verify-cost curve ready" read
// "source":"probe" and lost where it came from).
func TestNoLogAttrNamedSource(t *testing.T) {
	fset := token.NewFileSet()
	logCalls := map[string]bool{"Debug": true, "Info": true, "Warn": true, "Error": true, "Log": true, "With": true}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || path == filepath.Join("cli", "log.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || !logCalls[sel.Sel.Name] {
				return true
			}
			for _, a := range call.Args {
				if lit, ok := a.(*ast.BasicLit); ok && lit.Kind == token.STRING && lit.Value == `"source"` {
					t.Errorf("%s: a log attribute named \"source\" (the JSON handler's own key): name it for what it is", fset.Position(lit.Pos()))
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
