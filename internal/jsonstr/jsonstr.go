// Package jsonstr decodes the body of one JSON string (RFC 8259 §7) without
// going through encoding/json: the bench client's allocation-free fast path
// for token events, and checkpoint's serde_json-exact reader of config.json,
// share it.
//
// It is strict where encoding/json is lenient: a lone UTF-16 surrogate
// escape is refused (as serde_json refuses it) rather than replaced with
// U+FFFD. The bench client then takes the encoding/json path, which gives
// the replacement character, so both callers keep their behaviour.
package jsonstr

import (
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// SyntaxError says what is wrong and where: Off counts from the start of
// the body (just after the opening quote).
type SyntaxError struct {
	Off int
	Msg string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("%s at byte %d of the string", e.Msg, e.Off) }

// Append decodes the JSON string body s, which starts just after the
// opening quote, appends the decoded bytes to dst and returns dst and how
// many bytes of s were consumed, the closing quote included. Bytes of s are
// copied as they are: callers that need valid UTF-8 check s first.
func Append(dst, s []byte) ([]byte, int, error) {
	fail := func(i int, msg string) ([]byte, int, error) { return dst, i, &SyntaxError{Off: i, Msg: msg} }
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"':
			return dst, i + 1, nil
		case c < 0x20:
			return fail(i, "control character in string")
		case c != '\\':
			dst = append(dst, c)
			i++
			continue
		}
		i++ // backslash
		if i >= len(s) {
			return fail(i, "unterminated escape")
		}
		e := s[i]
		i++
		switch e {
		case '"', '\\', '/':
			dst = append(dst, e)
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, ok := hex4(s[i:])
			if !ok {
				return fail(i, "invalid unicode escape")
			}
			i += 4
			if utf16.IsSurrogate(r) {
				if r >= 0xDC00 || len(s)-i < 2 || s[i] != '\\' || s[i+1] != 'u' {
					return fail(i, "lone surrogate in escape")
				}
				r2, ok := hex4(s[i+2:])
				if !ok {
					return fail(i+2, "invalid unicode escape")
				}
				if r2 < 0xDC00 || r2 > 0xDFFF {
					return fail(i+2, "lone surrogate in escape")
				}
				i += 6
				r = utf16.DecodeRune(r, r2)
			}
			dst = utf8.AppendRune(dst, r)
		default:
			return fail(i-1, "invalid escape")
		}
	}
	return fail(len(s), "unterminated string")
}

func hex4(s []byte) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var r rune
	for _, b := range s[:4] {
		r <<= 4
		switch {
		case b >= '0' && b <= '9':
			r |= rune(b - '0')
		case b >= 'a' && b <= 'f':
			r |= rune(b - 'a' + 10)
		case b >= 'A' && b <= 'F':
			r |= rune(b - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
}
