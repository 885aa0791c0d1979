package tomlpos

import (
	"regexp"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
)

// ElementAt is where byte at of src sits in the array value of the
// assignment written on line (from 1): the index from 1 of the element
// that holds it in each enclosing array, outermost first, so that an error
// the decoder reports by offset alone names its element as a validator
// would ("schedule = [[1, 0, 99999999999999999999]]" at the last number:
// [1, 3], bucket 1 number 3). Comments and strings are skipped. It is nil
// where it cannot say: at outside an array of that assignment, or inside
// an inline table.
func ElementAt(src string, line, at int) []int {
	stack, _ := elementAt(src, line, at)
	return stack
}

// elementAt is ElementAt, with the offset of each enclosing array's "[".
func elementAt(src string, line, at int) (stack, opens []int) {
	i := lineStart(src, line)
	if line < 1 || i < 0 || at < i || at >= len(src) {
		return nil, nil
	}
	// The value starts after the assignment's "=", outside any quoted key.
	for i < at && src[i] != '=' {
		if src[i] == '"' || src[i] == '\'' {
			i = skipString(src, i)
			continue
		}
		i++
	}
	// stack has one per open array: the element being read; 0 for an
	// inline table. opens has where each opened.
	for i++; i < at; i++ {
		switch src[i] {
		case '#':
			for i < at && src[i] != '\n' {
				i++
			}
		case '"', '\'':
			i = skipString(src, i) - 1
		case '[':
			stack, opens = append(stack, 1), append(opens, i)
		case '{':
			stack, opens = append(stack, 0), append(opens, i)
		case ']', '}':
			if len(stack) == 0 {
				return nil, nil // the value ended before at
			}
			stack, opens = stack[:len(stack)-1], opens[:len(opens)-1]
		case ',':
			if len(stack) > 0 && stack[len(stack)-1] > 0 {
				stack[len(stack)-1]++
			}
		}
	}
	if len(stack) == 0 || slices.Contains(stack, 0) {
		return nil, nil // outside the array, or inside an inline table, which has keys, not elements
	}
	return stack, opens
}

// ElementLine is the line (from 1) where element i (from 1) of the array
// value of the key at path (as Line takes it) starts, so that an error
// about one bucket of a schedule written over several lines names that
// bucket's line, not that of "schedule = [". It is 0 where it cannot say:
// the key's assignment is not found on its line (a key of an inline
// table), its value is no array, or the array has fewer elements.
func (x Index) ElementLine(path string, i int) int {
	line := x.Line(path)
	start := lineStart(x.src, line)
	if line < 1 || start < 0 || i < 1 {
		return 0
	}
	eq := valueStart(x.src[start:], path[strings.LastIndexAny(path, ".]")+1:])
	if eq < 0 {
		return 0
	}
	at := elementStart(x.src, start+eq, i)
	if at < 0 {
		return 0
	}
	return strings.Count(x.src[:at], "\n") + 1
}

// valueStart is the offset in text, which starts with a line, just past
// the "=" of that line's assignment of key; -1 where the line assigns
// no such key (Line fell back to a table's line).
func valueStart(text, key string) int {
	end := strings.IndexByte(text, '\n')
	if end < 0 {
		end = len(text)
	}
	eq := strings.IndexByte(text[:end], '=')
	if eq < 0 {
		return -1
	}
	k, ok := keyName(text[:eq])
	if !ok || k != key && !strings.HasSuffix(k, "."+key) {
		return -1
	}
	return eq + 1
}

// elementStart is the offset in src of the first byte of element i (from
// 1) of the array value that starts after offset from, -1 where there is
// none. Comments and strings are skipped as elementAt skips them.
func elementStart(src string, from, i int) int {
	depth, n, want := 0, 0, false // want: the next value starts an element
	for j := from; j < len(src); j++ {
		c := src[j]
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
			continue
		case c == '#':
			for j < len(src) && src[j] != '\n' {
				j++
			}
			continue
		case depth == 0 && c != '[':
			return -1 // the value is no array
		}
		if depth == 1 && want && c != ']' {
			if n++; n == i {
				return j
			}
			want = false
		}
		switch c {
		case '"', '\'':
			j = skipString(src, j) - 1
		case '[', '{':
			depth++
			want = depth == 1
		case ']', '}':
			if depth--; depth == 0 {
				return -1
			}
		case ',':
			want = depth == 1
		}
	}
	return -1
}

// BigInt is an integer past int64 that the decoder refused, which it
// does before any key's own check sees it ("99999999999999999999 is out
// of range for int64"): as written and where it sits in its key's array
// value, so that a schedule's reader says it as it says a number merely
// too large (profiles/profile.go, internal/policy/parse.go).
type BigInt struct {
	Text string // as written: "99999999999999999999"
	// At is its element in each enclosing array, outermost first, from 1
	// (ElementAt); nil where it is in none.
	At []int
	// Array is the innermost array that holds it, its elements as
	// written joined by ", ": "[1, 0, 99999999999999999999]"; "" where
	// that array spans lines or holds more than plain values.
	Array string
}

// intRangeRE is the decoder's wording of an integer past int64.
var intRangeRE = regexp.MustCompile(`^(\S+) is out of range for int64$`)

// BigIntOf reads pe as the decoder's refusal of an integer past int64 in
// src; ok is false for any other error, or one whose key it cannot name.
func BigIntOf(src string, pe toml.ParseError) (b BigInt, ok bool) {
	m := intRangeRE.FindStringSubmatch(pe.Message)
	if m == nil || pe.LastKey == "" {
		return BigInt{}, false
	}
	b.Text = m[1]
	// The decoder counts offsets after a byte-order mark (SyntaxLine).
	src = strings.TrimPrefix(src, "\xef\xbb\xbf")
	line := Build(src).LineHolding(pe.LastKey, SyntaxLine(src, pe))
	stack, opens := elementAt(src, line, pe.Position.Start)
	if len(stack) > 0 {
		b.At, b.Array = stack, arrayText(src, opens[len(opens)-1], pe.Position.Start)
	}
	return b, true
}

// arrayText is the array that opens at src[open] and holds byte at, its
// elements as written joined by ", "; "" where it spans lines or holds
// anything but plain values (a string, a comment, an array or a table).
func arrayText(src string, open, at int) string {
	end := strings.IndexByte(src[at:], ']')
	if end < 0 {
		return ""
	}
	inner := src[open+1 : at+end]
	if strings.ContainsAny(inner, "[]{}\"'#\n") {
		return ""
	}
	parts := strings.Split(inner, ",")
	if len(parts) > 1 && strings.TrimSpace(parts[len(parts)-1]) == "" {
		parts = parts[:len(parts)-1] // a trailing comma
	}
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// lineStart is the offset of line n (from 1) of src, -1 past its end.
func lineStart(src string, n int) int {
	i := 0
	for ; n > 1; n-- {
		j := strings.IndexByte(src[i:], '\n')
		if j < 0 {
			return -1
		}
		i += j + 1
	}
	return i
}

// skipString is the offset just past the string that opens at src[i]:
// basic or literal, one line or multi-line; len(src) if it never closes.
func skipString(src string, i int) int {
	q := src[i : i+1]
	if strings.HasPrefix(src[i:], q+q+q) {
		if j := strings.Index(src[i+3:], q+q+q); j >= 0 {
			return i + 3 + j + 3
		}
		return len(src)
	}
	for j := i + 1; j < len(src); j++ {
		switch {
		case src[j] == '\\' && q == `"`:
			j++
		case src[j] == q[0] || src[j] == '\n':
			return j + 1
		}
	}
	return len(src)
}
