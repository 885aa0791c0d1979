package main

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// repoPath matches a path into this repository as comments and docs cite
// it: a top-level directory that holds code or docs, then a relative path.
// The character before it must not continue a longer path or word
// (github.com/speclaunch/speclaunch/internal/cli is an import path, not a
// citation; lablup/mlxcel/docs/x is another repository's).
var repoPath = regexp.MustCompile(`(^|[^A-Za-z0-9_./$~-])((?:docs|internal|profiles|scripts|engine|cuda|deploy)/[A-Za-z0-9_.*{},/-]*[A-Za-z0-9_*}/])`)

// oldPath matches a path that starts with a word, as the packages' paths
// did before they moved under internal/: such a citation left behind
// names a file that is no longer there (pathsIn keeps those whose first
// element names a moved package).
var oldPath = regexp.MustCompile(`(^|[^A-Za-z0-9_./$~-])([a-z][a-z0-9]*/[A-Za-z0-9_.*/-]*[A-Za-z0-9_*])`)

// mdLink matches the target of a relative markdown link: ](target).
var mdLink = regexp.MustCompile(`\]\(([^)#\s]+)(?:#[^)]*)?\)`)

// TestDocPathsExist fails naming every repository path that a Go comment,
// README.md or a doc under docs/ (not the records: they are data) cites and
// that does not exist, so a move that leaves a citation behind is caught.
// A glob (`*`, `{a,b}`) must match something; a path with a placeholder
// in capitals (profiles/NAME.toml, DIR/NAME) is an example, not a citation.
func TestDocPathsExist(t *testing.T) {
	moved, err := movedPackages(".")
	if err != nil {
		t.Fatal(err)
	}
	var bad []string
	check := func(where, p string) {
		if !citedPathExists(".", p) {
			bad = append(bad, where+": "+p)
		}
	}
	if err := eachComment(".", func(where, text string) {
		for _, p := range pathsIn(text, moved) {
			check(where, p)
		}
	}); err != nil {
		t.Fatal(err)
	}
	docs, err := operatorDocs(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			where := doc + ":" + strconv.Itoa(i+1)
			for _, p := range pathsIn(line, moved) {
				check(where, p)
			}
			for _, p := range linksIn(line) {
				check(where, filepath.ToSlash(filepath.Join(filepath.Dir(doc), p)))
			}
		}
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Errorf("cites a path that does not exist: %s", b)
	}
}

// TestDocPathsCatchAMissingPath keeps the scan able to fail: a comment
// citing a moved file is reported, an import path and an example are not.
func TestDocPathsCatchAMissingPath(t *testing.T) {
	got := pathsIn("// see internal/adapt/no-such-file.go and docs/design/ (github.com/x/y/internal/z); profiles/NAME.toml; cli/serve.go", map[string]bool{"cli": true})
	if len(got) != 4 || got[0] != "internal/adapt/no-such-file.go" || got[1] != "docs/design/" || got[3] != "cli/serve.go" {
		t.Fatalf("pathsIn = %q", got)
	}
	for _, p := range []string{got[0], got[3]} {
		if citedPathExists(".", p) {
			t.Errorf("%s reported as existing", p)
		}
	}
	if !citedPathExists(".", got[2]) {
		t.Errorf("the placeholder %s is an example and must pass", got[2])
	}
	if !citedPathExists(".", "docs/benchmark_results/*.json") || citedPathExists(".", "docs/nothing-*.md") {
		t.Error("globs: one that matches must pass, one that matches nothing must fail")
	}
}

// pathsIn returns the repository paths cited in text, trailing
// punctuation of the sentence removed; moved holds the names of the
// packages under internal/, whose old top-level paths count as
// citations too when they go deeper than the package (a file or a
// directory in it; "key/value" is prose).
func pathsIn(text string, moved map[string]bool) []string {
	var out []string
	for _, m := range repoPath.FindAllStringSubmatch(text, -1) {
		out = append(out, strings.TrimRight(m[2], ".,:;"))
	}
	for _, m := range oldPath.FindAllStringSubmatch(text, -1) {
		p := strings.TrimRight(m[2], ".,:;")
		first, rest, _ := strings.Cut(p, "/")
		if moved[first] && strings.ContainsAny(rest, "./") {
			out = append(out, p)
		}
	}
	return out
}

// movedPackages names the directories under root/internal that no
// top-level directory shares a name with.
func movedPackages(root string) (map[string]bool, error) {
	ents, err := os.ReadDir(filepath.Join(root, "internal"))
	if err != nil {
		return nil, err
	}
	moved := map[string]bool{}
	for _, e := range ents {
		if _, err := os.Stat(filepath.Join(root, e.Name())); e.IsDir() && err != nil {
			moved[e.Name()] = true
		}
	}
	return moved, nil
}

// linksIn returns the relative targets of markdown links in line.
func linksIn(line string) []string {
	var out []string
	for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
		p := m[1]
		if strings.Contains(p, "://") || strings.HasPrefix(p, "mailto:") || strings.HasPrefix(p, "/") {
			continue
		}
		out = append(out, p)
	}
	return out
}

// placeholder matches a path element written as an example: a word in
// capitals (NAME, DIR, PATH) or one holding such a word (pair-NAME.md).
var placeholder = regexp.MustCompile(`(^|[^A-Za-z])[A-Z]{3,}([^A-Za-z]|$)`)

// citedPathExists reports whether p (slash-separated, relative to root)
// names something in the repository.
func citedPathExists(root, p string) bool {
	if placeholder.MatchString(p) {
		return true
	}
	for _, alt := range expandBraces(p) {
		if strings.ContainsAny(alt, "*?[") {
			if m, _ := filepath.Glob(filepath.Join(root, filepath.FromSlash(alt))); len(m) == 0 {
				return false
			}
			continue
		}
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(alt))); err != nil {
			return false
		}
	}
	return true
}

// expandBraces expands one level of {a,b} alternatives, as a shell would.
func expandBraces(p string) []string {
	i := strings.IndexByte(p, '{')
	j := strings.IndexByte(p, '}')
	if i < 0 || j < i {
		return []string{p}
	}
	var out []string
	for _, alt := range strings.Split(p[i+1:j], ",") {
		out = append(out, expandBraces(p[:i]+alt+p[j+1:])...)
	}
	return out
}

// eachComment hands fn the text of every comment of every .go file under
// root (tests included; testdata and dot directories left out), with its
// file:line.
func eachComment(root string, fn func(where, text string)) error {
	fset := token.NewFileSet()
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, g := range f.Comments {
			for _, c := range g.List {
				pos := fset.Position(c.Pos())
				for i, line := range strings.Split(c.Text, "\n") {
					fn(path+":"+strconv.Itoa(pos.Line+i), line)
				}
			}
		}
		return nil
	})
}

// operatorDocs lists README.md and the docs written by hand: docs/*.md,
// docs/design/*.md and the records' index. The records themselves are
// data, never edited after a run, so what they cite stays as it was.
func operatorDocs(root string) ([]string, error) {
	out := []string{filepath.Join(root, "README.md"), filepath.Join(root, "docs", "benchmark_results", "README.md")}
	for _, pat := range []string{"docs/*.md", "docs/design/*.md"} {
		m, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(pat)))
		if err != nil {
			return nil, err
		}
		out = append(out, m...)
	}
	return out, nil
}

// TestArchitectureNamesEveryPackage keeps docs/ARCHITECTURE.md a true
// map: every package under internal/ (and engine, cuda, profiles) is
// named there, in backquotes, by its path.
func TestArchitectureNamesEveryPackage(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("docs", "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	dirs, err := packageDirs(".", "internal", "engine", "cuda", "profiles")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if !strings.Contains(string(doc), "`"+d+"`") {
			t.Errorf("docs/ARCHITECTURE.md does not name package %s: add it to the layer it belongs to (\"The packages as layers\"), as `%s`", d, d)
		}
	}
}

// packageDirs lists the directories under each of tops (slash-separated,
// relative to root) that hold a non-test .go file; testdata and dot
// directories are left out.
func packageDirs(root string, tops ...string) ([]string, error) {
	var out []string
	for _, top := range tops {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" {
					return filepath.SkipDir
				}
				return nil
			}
			if strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
				rel, err := filepath.Rel(root, filepath.Dir(path))
				if err != nil {
					return err
				}
				if rel = filepath.ToSlash(rel); !slices.Contains(out, rel) {
					out = append(out, rel)
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
