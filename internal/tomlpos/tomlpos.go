// Package tomlpos finds the line of a key in TOML text. BurntSushi/toml
// reports positions for syntax errors only; validation errors (an unknown
// key, a bad width) must still name file:line, so this scans the text for
// table headers and key assignments. It places messages only; the decoder
// stays the authority on what a file means, and a key the scanner cannot
// place falls back to its enclosing table's line.
package tomlpos

import (
	"iter"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/BurntSushi/toml"
	"github.com/speclaunch/speclaunch/internal/tomlguard"
)

// SyntaxLine is the line of src that a decoder syntax error is about, for
// every file:line a TOML error names (profiles, policy files). The
// decoder's Position.Line counts the newline it stopped at into the next
// line, so "[server" with its newline, on line 1, was said as line 2. The
// line to fix is that of the last byte of the span the decoder reports
// (Position.Start and Len): for a bad escape inside a multi-line string
// the span starts where the string opens. The decoder drops a leading
// byte-order mark before it counts offsets, so it is dropped here too. For
// a control character the decoder's span is the byte before it, which for
// one at a line's start is the newline ending the line before: the
// character itself is the byte to place. An error without a position
// keeps the decoder's line.
func SyntaxLine(src string, pe toml.ParseError) int {
	if pe.Position.Line == 0 {
		return pe.Line
	}
	for _, bom := range []string{"\xef\xbb\xbf", "\xff\xfe", "\xfe\xff"} {
		if strings.HasPrefix(src, bom) {
			src = src[len(bom):]
			break
		}
	}
	last := pe.Position.Start + max(pe.Position.Len, 1) - 1
	if next := pe.Position.Start + 1; strings.Contains(pe.Message, "control characters") && next >= 0 && next < len(src) && isControl(src[next]) {
		last = next
	}
	return strings.Count(src[:min(max(last, 0), len(src))], "\n") + 1
}

// isControl reports a byte TOML refuses outside a comment's or string's
// rules: a control character other than tab and newline (a carriage
// return alone included), or DEL.
func isControl(b byte) bool {
	return b < 0x20 && b != '\t' && b != '\n' || b == 0x7f
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

// visits counts the regions walked through all, for tests: a lookup must
// answer from the maps Build fills in one pass, not by walking every region,
// or one lookup per [[policy.entry]] costs the square of their number (20,000
// entries took a minute to load, and Ctrl-C waited for it).
var visits atomic.Int64

// all yields the regions in file order, the root first, counting each one
// walked, so that every walk over the list is seen by the tests.
func (ix Regions) all() iter.Seq2[int, Region] {
	return func(yield func(int, Region) bool) {
		for i := range ix {
			visits.Add(1)
			if !yield(i, ix[i]) {
				return
			}
		}
	}
}

// Index answers "which line" for dotted key paths. Build fills its maps in
// one pass over the regions, so each lookup costs the length of its path,
// not the number of tables in the file.
type Index struct {
	rs     Regions
	tables map[string][]int // a [name] header's regions, in file order
	arrays map[string][]int // a [[name]] header's regions: element i is arrays[name][i]
	top    map[string]int   // k -> the line of the first header named k or starting k.
	src    string           // the text scanned, for ElementLine
}

// Build scans TOML text and indexes its regions.
func Build(text string) Index {
	x := Index{rs: Scan(text), tables: map[string][]int{}, arrays: map[string][]int{}, top: map[string]int{}, src: text}
	for i, r := range x.rs.all() {
		if r.Array {
			x.arrays[r.Name] = append(x.arrays[r.Name], i)
		} else { // the root too: a path of "" or ".k" names it
			x.tables[r.Name] = append(x.tables[r.Name], i)
		}
		if i > 0 {
			x.indexTop(r)
		}
	}
	return x
}

// indexTop records r's header as the first mention of its name and of each
// dotted prefix of it, unless an earlier header was. Only the first
// tomlguard.MaxDepth dots are indexed: a real header has fewer, and one with
// more (dots inside a quoted part) must not cost its length squared in
// hashed prefixes; TopLine walks the regions for a key that deep.
func (x Index) indexTop(r Region) {
	first := func(k string) {
		if _, seen := x.top[k]; !seen {
			x.top[k] = r.Line
		}
	}
	first(r.Name)
	for i, dots := 0, 0; i < len(r.Name) && dots < tomlguard.MaxDepth; i++ {
		if r.Name[i] == '.' {
			first(r.Name[:i])
			dots++
		}
	}
}

// Elements returns the [[name]] regions in file order: element i of the
// decoded array of tables is Elements(name)[i] when the file uses headers.
func (x Index) Elements(name string) []Region {
	out := make([]Region, len(x.arrays[name]))
	for j, i := range x.arrays[name] {
		out[j] = x.rs[i]
	}
	return out
}

// TopLine is the first line that mentions a top-level key: its assignment in
// the root, or the first header that starts with it.
func (x Index) TopLine(k string) int {
	if len(x.rs) == 0 { // the zero Index: nothing scanned
		return 0
	}
	if l, ok := x.rs.Root().Keys[k]; ok {
		return l
	}
	if strings.Count(k, ".") < tomlguard.MaxDepth {
		return x.top[k]
	}
	for i, r := range x.rs.all() { // deeper than indexTop indexes
		if i > 0 && (r.Name == k || strings.HasPrefix(r.Name, k+".")) {
			return r.Line
		}
	}
	return 0
}

// Line returns the line of a dotted path: "engine.name" (a key in [engine]),
// "engine" (the table), "policy.entry[1]" (the second [[policy.entry]]),
// "policy.entry[1].width"; top-level keys are plain names. It falls back to
// the enclosing table's line, then 0.
func (x Index) Line(path string) int {
	if len(x.rs) == 0 { // the zero Index: nothing scanned
		return 0
	}
	if is := x.tables[path]; len(is) > 0 { // a table by its own header: "engine.env" of [engine.env]
		return x.rs[is[0]].Line
	}
	table, idx, keyName := splitPath(path)
	var regs []int
	if idx >= 0 {
		if els := x.arrays[table]; idx < len(els) {
			regs = els[idx : idx+1]
		}
	} else {
		regs = x.tables[table]
	}
	for _, i := range regs {
		if keyName == "" {
			return x.rs[i].Line
		}
		if l, ok := x.rs[i].Keys[keyName]; ok {
			return l
		}
	}
	if len(regs) > 0 {
		return x.rs[regs[0]].Line
	}
	if idx < 0 && keyName == "" {
		return x.TopLine(table)
	}
	if idx < 0 {
		// "a.b" where a is not a table: a dotted key of an enclosing
		// table or of the root, or a key of the root.
		if l := x.dottedLine(table, keyName); l > 0 {
			return l
		}
		if l, ok := x.rs.Root().Keys[table]; ok {
			return l
		}
		if l := x.TopLine(table); l > 0 {
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

// LineHolding is the line of the assignment of the dotted key path whose
// value holds line n: the last one at or above n, so that of its own
// [[name]] element, where Line names the first element's; 0 where there
// is none. The lines of a multi-line array are no assignments, though
// Scan may take one for a header ("  [1, 3, 4],"): only a table whose
// name starts path is looked in.
func (x Index) LineHolding(path string, n int) int {
	best := 0
	for _, r := range x.rs.all() {
		if r.Line > n {
			break
		}
		rest, ok := path, r.Name == ""
		if !ok {
			rest, ok = strings.CutPrefix(path, r.Name+".")
		}
		if l := r.Keys[rest]; ok && l <= n {
			best = max(best, l)
		}
	}
	return best
}

// dottedLine is the line where key k of table is written as a dotted key
// of an enclosing table or of the root: env.K = "v" in [engine], or
// engine.env.K = "v" at the top, for table engine.env; 0 when it is not.
// The nearest enclosing table is tried first, and only the last
// tomlguard.MaxDepth of them besides the root: a real table is less deep,
// and a name of many dots (inside a quoted part) must not cost its length
// squared.
func (x Index) dottedLine(table, k string) int {
	look := func(prefix, rest string) int {
		for _, i := range x.tables[prefix] {
			if l, ok := x.rs[i].Keys[rest+"."+k]; ok {
				return l
			}
		}
		return 0
	}
	end := len(table)
	for range tomlguard.MaxDepth {
		i := strings.LastIndexByte(table[:end], '.')
		if i < 0 {
			break
		}
		if l := look(table[:i], table[i+1:]); l > 0 {
			return l
		}
		end = i
	}
	return look("", table)
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
