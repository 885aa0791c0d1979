// Package tomlpos finds the line of a key in TOML text. BurntSushi/toml
// reports positions for syntax errors only; validation errors (an unknown
// key, a bad width) must still name file:line, so this scans the text for
// table headers and key assignments. It places messages only; the decoder
// stays the authority on what a file means, and a key the scanner cannot
// place falls back to its enclosing table's line.
package tomlpos

import (
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// SyntaxLine is the line of src that a decoder syntax error is about, for
// every file:line a TOML error names (profiles, policy files). The
// decoder's Position.Line counts the newline it stopped at into the next
// line, so "[server" with its newline, on line 1, was said as line 2; the
// byte offset (Position.Start) is the character in question, and its line
// is the one to fix. An error without a position keeps the decoder's line.
func SyntaxLine(src string, pe toml.ParseError) int {
	if pe.Position.Line == 0 {
		return pe.Line
	}
	return strings.Count(src[:min(max(pe.Position.Start, 0), len(src))], "\n") + 1
}

// BurntSushi/toml v1.6.0 reports positions only for syntax errors: its
// MetaData has no per-key position. A policy error must still name the line
// to fix, so this file recovers lines from the raw text: table headers and
// the first line of each key inside a table. It is only used to place
// messages; the decoder remains the authority on what the file means, so a
// line the scanner cannot place falls back to the enclosing table's line.

// Region is one table of the file: the root, a [table] or one [[array]]
// element.
type Region struct {
	Name  string         // "" for the root table; the header's name otherwise
	Array bool           // [[name]] rather than [name]
	Line  int            // the header's line (1 for the root)
	Keys  map[string]int // key -> line of its first assignment in this region
}

// Regions is the list of regions in file order.
type Regions []Region

// Scan scans src for table headers and key assignments. It is
// deliberately forgiving: anything it does not understand is skipped.
func Scan(src string) Regions {
	ix := Regions{{Line: 1, Keys: map[string]int{}}}
	inML := "" // the delimiter of the multi-line string we are inside, if any
	for n, raw := range strings.Split(src, "\n") {
		line := n + 1
		if inML != "" {
			if strings.Count(raw, inML)%2 == 1 {
				inML = ""
			}
			continue
		}
		t := strings.TrimSpace(raw)
		switch {
		case t == "" || t[0] == '#':
		case strings.HasPrefix(t, "[["):
			if end := strings.Index(t, "]]"); end > 2 {
				ix = append(ix, Region{Name: tableName(t[2:end]), Array: true, Line: line, Keys: map[string]int{}})
			}
		case t[0] == '[':
			if end := strings.IndexByte(t, ']'); end > 1 {
				ix = append(ix, Region{Name: tableName(t[1:end]), Line: line, Keys: map[string]int{}})
			}
		default:
			if eq := strings.IndexByte(t, '='); eq > 0 {
				if k, ok := keyName(t[:eq]); ok {
					cur := ix[len(ix)-1].Keys
					// A dotted key (a.b = 1) also places its first part.
					for _, name := range []string{k, strings.TrimSpace(strings.Split(k, ".")[0])} {
						if _, seen := cur[name]; !seen {
							cur[name] = line
						}
					}
				}
			}
		}
		for _, d := range []string{`"""`, `'''`} {
			if strings.Count(raw, d)%2 == 1 {
				inML = d
				break
			}
		}
	}
	return ix
}

// tableName normalises a header's name: `policy . "entry"` -> policy.entry.
func tableName(s string) string {
	parts := strings.Split(s, ".")
	for i, p := range parts {
		if k, ok := keyName(p); ok {
			parts[i] = k
		} else {
			parts[i] = strings.TrimSpace(p)
		}
	}
	return strings.Join(parts, ".")
}

// keyName returns a bare or quoted key's name.
func keyName(s string) (string, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", false
	}
	if s[0] == '"' {
		k, err := strconv.Unquote(s)
		return k, err == nil
	}
	if s[0] == '\'' {
		if len(s) >= 2 && s[len(s)-1] == '\'' {
			return s[1 : len(s)-1], true
		}
		return "", false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.' || r == ' ') {
			return "", false
		}
	}
	return s, true
}

// Root returns the root region.
func (ix Regions) Root() Region { return ix[0] }

// Elements returns the [[name]] regions in file order: element i of the
// decoded array of tables is Elements(name)[i] when the file uses headers.
func (ix Regions) Elements(name string) []Region {
	var out []Region
	for _, r := range ix {
		if r.Array && r.Name == name {
			out = append(out, r)
		}
	}
	return out
}

// TopLine is the first line that mentions a top-level key: its assignment in
// the root, or the first header that starts with it.
func (ix Regions) TopLine(k string) int {
	if l, ok := ix.Root().Keys[k]; ok {
		return l
	}
	for _, r := range ix[1:] {
		if r.Name == k || strings.HasPrefix(r.Name, k+".") {
			return r.Line
		}
	}
	return 0
}

// Index answers "which line" for dotted key paths.
type Index struct{ rs Regions }

// Build scans TOML text.
func Build(text string) Index { return Index{Scan(text)} }

// Line returns the line of a dotted path: "engine.name" (a key in [engine]),
// "engine" (the table), "policy.entry[1]" (the second [[policy.entry]]),
// "policy.entry[1].width"; top-level keys are plain names. It falls back to
// the enclosing table's line, then 0.
func (x Index) Line(path string) int {
	if len(x.rs) == 0 { // the zero Index: nothing scanned
		return 0
	}
	for _, r := range x.rs {
		if r.Name == path && !r.Array { // a table by its own header: "engine.env" of [engine.env]
			return r.Line
		}
	}
	table, idx, keyName := splitPath(path)
	var regs []Region
	if idx >= 0 {
		if els := x.rs.Elements(table); idx < len(els) {
			regs = []Region{els[idx]}
		}
	} else {
		for _, r := range x.rs {
			if r.Name == table && !r.Array {
				regs = append(regs, r)
			}
		}
	}
	for _, r := range regs {
		if keyName == "" {
			return r.Line
		}
		if l, ok := r.Keys[keyName]; ok {
			return l
		}
	}
	if len(regs) > 0 {
		return regs[0].Line
	}
	if idx < 0 && keyName == "" {
		return x.rs.TopLine(table)
	}
	if idx < 0 {
		// "a.b" where a is not a table: a top-level dotted key, or a key
		// of the root.
		if l, ok := x.rs.Root().Keys[table+"."+keyName]; ok {
			return l
		}
		if l, ok := x.rs.Root().Keys[table]; ok {
			return l
		}
		if l := x.rs.TopLine(table); l > 0 {
			return l
		}
	}
	if idx >= 0 {
		return x.Line(table) // an element of an inline array: the array's line
	}
	if i := strings.LastIndex(path, "."); i > 0 {
		return x.Line(path[:i]) // a key inside an inline table: the table's line
	}
	return 0
}

// splitPath turns "a.b[2].c" into ("a.b", 2, "c"), "a.b.c" into ("a.b", -1,
// "c"), and "a" into ("a", -1, "") when a names a table, else ("", -1, "a").
func splitPath(path string) (table string, idx int, key string) {
	idx = -1
	if i := strings.IndexByte(path, '['); i >= 0 {
		if j := strings.IndexByte(path[i:], ']'); j > 0 {
			n, err := strconv.Atoi(path[i+1 : i+j])
			if err == nil {
				rest := strings.TrimPrefix(path[i+j+1:], ".")
				return path[:i], n, rest
			}
		}
	}
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		return path[:i], -1, path[i+1:]
	}
	return path, -1, ""
}
