package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// maxFuncLines is the length above which a function is a defect unless it
// reads as one story; longFuncCeiling is how many such non-test
// functions the repository still has. Lower the ceiling as functions are
// split along their seams; it must never rise.
const (
	maxFuncLines    = 80
	longFuncCeiling = 0
)

// TestLongFunctionsCeiling fails when a change adds a non-test function
// longer than maxFuncLines lines (from `func` to its closing brace) beyond
// the ceiling. `go test -run LongFunctions -v .` lists them.
func TestLongFunctionsCeiling(t *testing.T) {
	long, err := longFuncs(".", maxFuncLines)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range long {
		t.Log(f)
	}
	if len(long) > longFuncCeiling {
		t.Errorf("%d non-test functions are longer than %d lines (listed above), above the ceiling of %d: split the new one along its seams",
			len(long), maxFuncLines, longFuncCeiling)
	}
}

// longFuncs lists "lines path:line name" for every function declared in a
// non-test .go file under root (testdata and dot directories left out)
// that spans more than max lines, longest first.
func longFuncs(root string, max int) ([]string, error) {
	type fn struct {
		lines int
		where string
	}
	var found []fn
	fset := token.NewFileSet()
	err := eachGoFile(fset, root, func(path string, f *ast.File) {
		for _, decl := range f.Decls {
			d, ok := decl.(*ast.FuncDecl)
			if !ok || d.Body == nil {
				continue
			}
			start, end := fset.Position(d.Pos()), fset.Position(d.End())
			if n := end.Line - start.Line + 1; n > max {
				found = append(found, fn{n, fmt.Sprintf("%d %s:%d %s", n, path, start.Line, d.Name.Name)})
			}
		}
	})
	sort.Slice(found, func(i, j int) bool { return found[i].lines > found[j].lines })
	out := make([]string, len(found))
	for i, f := range found {
		out[i] = f.where
	}
	return out, err
}

// eachGoFile parses every non-test .go file under root (testdata and dot
// directories left out) and hands it to fn.
func eachGoFile(fset *token.FileSet, root string, fn func(path string, f *ast.File)) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		fn(path, f)
		return nil
	})
}
