package policy

import (
	"strconv"
	"strings"
)

// BurntSushi/toml v1.6.0 reports positions only for syntax errors: its
// MetaData has no per-key position. A policy error must still name the line
// to fix, so this file recovers lines from the raw text: table headers and
// the first line of each key inside a table. It is only used to place
// messages; the decoder remains the authority on what the file means, so a
// line the scanner cannot place falls back to the enclosing table's line.

// region is one table of the file: the root, a [table] or one [[array]]
// element.
type region struct {
	name  string         // "" for the root table; the header's name otherwise
	array bool           // [[name]] rather than [name]
	line  int            // the header's line (1 for the root)
	keys  map[string]int // key -> line of its first assignment in this region
}

// lineIndex is the list of regions in file order.
type lineIndex []region

// indexLines scans src for table headers and key assignments. It is
// deliberately forgiving: anything it does not understand is skipped.
func indexLines(src string) lineIndex {
	ix := lineIndex{{line: 1, keys: map[string]int{}}}
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
				ix = append(ix, region{name: tableName(t[2:end]), array: true, line: line, keys: map[string]int{}})
			}
		case t[0] == '[':
			if end := strings.IndexByte(t, ']'); end > 1 {
				ix = append(ix, region{name: tableName(t[1:end]), line: line, keys: map[string]int{}})
			}
		default:
			if eq := strings.IndexByte(t, '='); eq > 0 {
				if k, ok := keyName(t[:eq]); ok {
					cur := ix[len(ix)-1].keys
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

// root returns the root region.
func (ix lineIndex) root() region { return ix[0] }

// elements returns the [[name]] regions in file order: element i of the
// decoded array of tables is elements(name)[i] when the file uses headers.
func (ix lineIndex) elements(name string) []region {
	var out []region
	for _, r := range ix {
		if r.array && r.name == name {
			out = append(out, r)
		}
	}
	return out
}

// topLine is the first line that mentions a top-level key: its assignment in
// the root, or the first header that starts with it.
func (ix lineIndex) topLine(k string) int {
	if l, ok := ix.root().keys[k]; ok {
		return l
	}
	for _, r := range ix[1:] {
		if r.name == k || strings.HasPrefix(r.name, k+".") {
			return r.line
		}
	}
	return 0
}
