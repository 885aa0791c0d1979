// Package quote renders outside text (a path, a variable's value, a field
// of a record) for a line an operator reads: a newline or other control
// character would split or forge the line, and a megabyte value would bury
// it, so both are escaped or cut, and the cut says how much there was.
package quote

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Max is the default number of bytes kept of one value.
const Max = 120

// Text returns s as is when it is valid UTF-8 of printable characters (and
// spaces) no longer than max bytes; otherwise Go-quoted, cut at max bytes
// with the full length said ("..." (131072 bytes)). max <= 0 means Max.
func Text(s string, max int) string {
	if max <= 0 {
		max = Max
	}
	if len(s) <= max && plain(s) {
		return s
	}
	return Quoted(s, max)
}

// Quoted always quotes s (strconv.Quote), cut at max bytes on a rune
// boundary with the full length said. max <= 0 means Max.
func Quoted(s string, max int) string {
	if max <= 0 {
		max = Max
	}
	if len(s) <= max {
		return strconv.Quote(s)
	}
	cut := s[:max]
	for len(cut) > 0 && !utf8.ValidString(cut) {
		cut = cut[:len(cut)-1]
	}
	return fmt.Sprintf("%s... (%d bytes)", strconv.Quote(cut), len(s))
}

func plain(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return !Printable(r) })
}

// Printable reports whether r shows as itself on a terminal, taking one
// line: not a control (a newline, an escape), nor a format character
// (a bidirectional control reorders what follows it), nor a line or
// paragraph separator. The one rule of printable text for every place
// that prints what an operator or a file gave.
func Printable(r rune) bool { return unicode.IsPrint(r) }

// Controls is s with each control character but newline written as its
// Go escape (\t, \x1b, \u0085): a value said inside a line of text
// (a path in a log line or a table) cannot move the cursor, clear the
// screen or break the line's columns; printable text is unchanged.
func Controls(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return r != '\n' && unicode.IsControl(r) }) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if r == '\n' || !unicode.IsControl(r) {
			b.WriteRune(r)
			continue
		}
		q := strconv.QuoteRune(r)
		b.WriteString(q[1 : len(q)-1])
	}
	return b.String()
}
