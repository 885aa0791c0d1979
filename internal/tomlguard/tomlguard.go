// Package tomlguard guards the launcher's TOML input: it checks that a
// text is text (UTF-8, no NUL byte) and how deeply it nests before the
// decoder sees it, and names what a decoded key
// holds in the file's words (Kind). BurntSushi/toml recurses without a limit and copies the key path
// at every level: 2,000,000 nested arrays overflow Go's stack (a fatal
// error, not a panic), and a few thousand nested inline tables or dotted-key
// parts take seconds and gigabytes. A profile or policy file nests at most
// 6 levels, so anything deeper is refused here, in linear time and constant
// memory, with the line where it went too deep.
package tomlguard

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting accepted. The deepest real key is a cost
// table's array inside a profile's [[policy.entry]] (policy, entry, the
// element, cost's array, its inline table, widths' array: 6); 16 leaves
// room for new schema and stays cheap for the decoder at the size caps of
// docs/file-limits.md.
const MaxDepth = 16

// Error is a text that nests deeper than MaxDepth, or one that is not
// UTF-8 text (a UTF-16 byte-order mark, an invalid byte, a NUL: Msg says
// which).
type Error struct {
	Line  int    // where the nesting first passed MaxDepth
	Depth int    // the depth reached there (MaxDepth+1); 0 for an encoding
	Msg   string // what is wrong, where it is not the depth
}

func (e *Error) Error() string {
	if e.Msg != "" {
		return e.Msg
	}
	return fmt.Sprintf("nested more than %d levels deep (tables, dotted-key parts, dots in quoted keys, arrays and inline tables count); profiles and policy files need at most 6: remove the extra nesting or close the bracket left open", MaxDepth)
}

// frame is one open level: the root table, an array or an inline table.
type frame struct {
	kind  byte // 0 for the root, '[' or '{'
	depth int  // the depth of the values directly inside it
}

// scanner walks the text once. It understands only what moves the depth:
// comments, the four kinds of string, table headers, dotted keys, and
// brackets and braces in values. Anything else is skipped, so it never
// rejects a file for its syntax: that stays the decoder's job.
type scanner struct {
	src     string
	i, line int
	stack   []frame // at most MaxDepth+1 frames: a deeper one is an error
	inKey   bool    // reading a key: its dots open tables
	keyDots int     // dots seen in the key being read
}

// utf16BOMs are the byte-order marks of UTF-16. TOML is UTF-8, but the
// decoder drops either mark and reads on, so a profile saved as UTF-16 by
// an editor, then fixed up to UTF-8 bytes behind its mark, validated "ok".
var utf16BOMs = []struct{ bytes, name string }{{"\xff\xfe", "FF FE"}, {"\xfe\xff", "FE FF"}}

// Check returns an *Error if src starts with a UTF-16 byte-order mark, is
// not text (notText) or nests deeper than MaxDepth, else nil.
func Check(src string) error {
	for _, b := range utf16BOMs {
		if len(src) >= 2 && src[:2] == b.bytes {
			return &Error{Line: 1, Msg: fmt.Sprintf("starts with a UTF-16 byte-order mark (bytes %s); TOML files are UTF-8: save the file as UTF-8 (in most editors: Save with Encoding, UTF-8)", b.name)}
		}
	}
	if err := notText(src); err != nil {
		return err
	}
	s := &scanner{src: src, line: 1, stack: make([]frame, 1, MaxDepth+2), inKey: true}
	for s.i < len(s.src) {
		if err := s.step(); err != nil {
			return err
		}
	}
	return nil
}

// notText returns an *Error at the first byte that is not UTF-8 text: a
// byte that is not UTF-8, or a NUL (TOML allows neither anywhere). It runs
// before the depth is scanned, so that a binary file (a program, random
// bytes) named as a profile or policy file is said to be one whatever its
// size: the decoder says so too, but only of a file whose brackets do
// not pass MaxDepth first, and a binary's stray bytes hold brackets
// enough to pass it, which the depth scan would report at a line of the
// binary.
func notText(src string) *Error {
	bad := strings.IndexByte(src, 0)
	what, why := "a NUL byte (0x00)", "TOML files cannot contain control characters, and a NUL is most often the sign of a file that is not a text file (a program, compressed or random bytes): check that this is the file you meant"
	if i := firstInvalid(src); i >= 0 && (bad < 0 || i < bad) {
		bad = i
		what, why = fmt.Sprintf("an invalid UTF-8 byte (0x%02x)", src[i]), "TOML files are UTF-8 text, and this is not a text file or not one saved as UTF-8: check that this is the file you meant, or save it as UTF-8"
	}
	if bad < 0 {
		return nil
	}
	return &Error{Line: 1 + strings.Count(src[:bad], "\n"), Msg: fmt.Sprintf("%s at offset %d: %s", what, bad, why)}
}

// firstInvalid is the offset of src's first byte that is not UTF-8, -1
// for none (a U+FFFD written in the text is UTF-8).
func firstInvalid(src string) int {
	if utf8.ValidString(src) {
		return -1
	}
	for i := 0; i < len(src); {
		r, n := utf8.DecodeRuneInString(src[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return -1
}

func (s *scanner) top() *frame { return &s.stack[len(s.stack)-1] }

// deeper reports an *Error when depth d passes MaxDepth.
func (s *scanner) deeper(d int) error {
	if d > MaxDepth {
		return &Error{Line: s.line, Depth: MaxDepth + 1} // a quoted key's dots can pass it by more than one
	}
	return nil
}

// step consumes one token.
func (s *scanner) step() error {
	c := s.src[s.i]
	switch c {
	case '\n':
		s.line++
		s.i++
		if len(s.stack) == 1 { // a new line in the root starts a key
			s.inKey, s.keyDots = true, 0
		}
		return nil
	case '#':
		for s.i < len(s.src) && s.src[s.i] != '\n' {
			s.i++
		}
		return nil
	case '"', '\'':
		start := s.i
		s.skipString()
		if s.inKey { // a quoted key's dots count as its parts: see quotedDots
			s.keyDots += quotedDots(s.src[start:s.i])
			return s.deeper(s.top().depth + s.keyDots)
		}
		return nil
	}
	s.i++
	if s.inKey {
		return s.key(c)
	}
	return s.value(c)
}

// key handles a character of a key (or of the start of a root line).
func (s *scanner) key(c byte) error {
	switch c {
	case '.':
		s.keyDots++
		return s.deeper(s.top().depth + s.keyDots)
	case '=':
		s.inKey = false
	case '}': // {} or a trailing comma: the inline table ends without a key
		return s.value(c)
	case '[':
		if len(s.stack) == 1 && s.keyDots == 0 {
			return s.header()
		}
	}
	return nil
}

// value handles a character of a value: brackets and braces nest, a comma
// in an inline table starts its next key.
func (s *scanner) value(c byte) error {
	switch c {
	case '[', '{':
		d := s.top().depth + s.keyDots + 1 // a.b = [...]: a, then the array
		if err := s.deeper(d); err != nil {
			return err
		}
		s.stack = append(s.stack, frame{kind: c, depth: d})
		s.inKey, s.keyDots = c == '{', 0
	case ']', '}':
		if len(s.stack) > 1 {
			s.stack = s.stack[:len(s.stack)-1]
		}
		s.inKey, s.keyDots = false, 0
	case ',':
		if s.top().kind == '{' {
			s.inKey, s.keyDots = true, 0
		}
	}
	return nil
}

// header reads a [table] or [[array]] header after its first '[' and sets
// the depth of the keys below it: one level per name part, one more for an
// array's element.
func (s *scanner) header() error {
	d := 1
	if s.i < len(s.src) && s.src[s.i] == '[' {
		d++
		s.i++
	}
	for s.i < len(s.src) {
		switch s.src[s.i] {
		case '\n':
			return s.endHeader(d)
		case ']':
			s.i++
			return s.endHeader(d)
		case '"', '\'':
			start := s.i
			s.skipString()
			d += quotedDots(s.src[start:s.i])
			if err := s.deeper(d); err != nil {
				return err
			}
			continue
		case '.':
			d++
			if err := s.deeper(d); err != nil {
				return err
			}
		}
		s.i++
	}
	return s.endHeader(d)
}

func (s *scanner) endHeader(d int) error {
	s.stack[0].depth = d
	s.inKey, s.keyDots = false, 0 // the rest of the header line is ']' or a comment
	return s.deeper(d)
}

// quotedDots counts the dots of a quoted key or header part. The decoder
// takes "a.b" as one key, but every file:line lookup (package tomlpos)
// splits a key path on its dots, so they count toward the depth as parts:
// 20,000 tables named with 80 quoted dots each took minutes to place, one
// key of 400,000 quoted dots over five minutes. No real key has a dot in
// its quotes.
func quotedDots(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			n++
		}
	}
	return n
}

// skipString skips a basic, literal, multi-line basic or multi-line literal
// string starting at s.i. A one-line string also ends at a newline, so a
// stray quote cannot hide the rest of the file.
func (s *scanner) skipString() {
	q := s.src[s.i]
	if s.i+2 < len(s.src) && s.src[s.i+1] == q && s.src[s.i+2] == q {
		s.i += 3
		s.skipMultiline(q)
		return
	}
	s.i++
	for s.i < len(s.src) {
		switch c := s.src[s.i]; {
		case c == '\n':
			return
		case c == q:
			s.i++
			return
		case c == '\\' && q == '"':
			s.i++
			if s.i < len(s.src) && s.src[s.i] == '\n' {
				return
			}
		}
		s.i++
	}
}

// skipMultiline skips to the end of a """ or ”' string, counting its lines.
func (s *scanner) skipMultiline(q byte) {
	for s.i < len(s.src) {
		c := s.src[s.i]
		switch {
		case c == '\n':
			s.line++
		case c == '\\' && q == '"':
			s.i++
			if s.i < len(s.src) && s.src[s.i] == '\n' {
				s.line++
			}
		case c == q && s.i+2 < len(s.src) && s.src[s.i+1] == q && s.src[s.i+2] == q:
			s.i += 3
			// Up to two more quotes belong to the content: """a"""""
			for n := 0; n < 2 && s.i < len(s.src) && s.src[s.i] == q; n++ {
				s.i++
			}
			return
		}
		s.i++
	}
}
