// Package tomlpos finds the line of a key in TOML text. BurntSushi/toml
// reports positions for syntax errors only; validation errors (unknown key,
// bad width) must still name file:line, so this scans the text for table
// headers and key assignments. It understands what profiles and policy files
// use: [table], [[array.of.tables]], dotted keys, and key = value lines; it
// is not a TOML parser and never fails.
package tomlpos

import (
	"strconv"
	"strings"
)

// Index maps a key path to the 1-based line where it is assigned or where
// its table starts. Paths join segments with "."; the n-th [[a.b]] table
// (0-based) is "a.b[n]".
type Index map[string]int

// Build scans TOML text.
func Build(text string) Index {
	idx := Index{}
	counts := map[string]int{}
	table := ""
	for i, raw := range strings.Split(text, "\n") {
		line := strings.TrimSpace(stripComment(raw))
		n := i + 1
		switch {
		case line == "":
			continue
		case strings.HasPrefix(line, "[["):
			name := clean(strings.TrimSuffix(strings.TrimPrefix(line, "[["), "]]"))
			k := counts[name]
			counts[name] = k + 1
			table = name + "[" + strconv.Itoa(k) + "]"
			setOnce(idx, table, n)
			setOnce(idx, name, n)
		case strings.HasPrefix(line, "["):
			table = clean(strings.TrimSuffix(strings.TrimPrefix(line, "["), "]"))
			setOnce(idx, table, n)
		default:
			eq := strings.Index(line, "=")
			if eq <= 0 {
				continue
			}
			k := clean(line[:eq])
			if table != "" {
				k = table + "." + k
			}
			setOnce(idx, k, n)
		}
	}
	return idx
}

// Line returns the line of path, falling back to its closest enclosing
// table, then 0 when nothing matches.
func (x Index) Line(path string) int {
	for p := path; p != ""; {
		if n, ok := x[p]; ok {
			return n
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return 0
}

func setOnce(idx Index, k string, n int) {
	if _, ok := idx[k]; !ok {
		idx[k] = n
	}
}

// clean normalises a key: trims spaces and quotes around each dotted segment.
func clean(s string) string {
	parts := strings.Split(s, ".")
	for i, p := range parts {
		parts[i] = strings.Trim(strings.TrimSpace(p), `"'`)
	}
	return strings.Join(parts, ".")
}

// stripComment drops a # comment that is not inside a string.
func stripComment(s string) string {
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == '\\' && quote == '"' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '#':
			return s[:i]
		}
	}
	return s
}
