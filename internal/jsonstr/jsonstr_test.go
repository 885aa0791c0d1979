package jsonstr

import (
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"
)

func TestAppend(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		n        int    // bytes consumed on success
		err      string // "" = success
	}{
		{in: `abc"rest`, want: "abc", n: 4},
		{in: `a\"b\\c\/d"`, want: `a"b\c/d`, n: 11},
		{in: `\t\r\n\b\f"`, want: "\t\r\n\b\f", n: 11},
		{in: `\u0041\u00e9"`, want: "Aé", n: 13},
		{in: `\ud83d\ude00"`, want: "😀", n: 13},
		{in: `"`, want: "", n: 1},
		{in: `\ud83d"`, err: "lone surrogate in escape"},
		{in: `\ude00\ud83d"`, err: "lone surrogate in escape"},
		{in: `\ud83d\u0041"`, err: "lone surrogate in escape"},
		{in: `\ud83d\uzz00"`, err: "invalid unicode escape"},
		{in: `abc`, err: "unterminated string"},
		{in: `abc\`, err: "unterminated escape"},
		{in: `\x"`, err: "invalid escape"},
		{in: `\u12"`, err: "invalid unicode escape"},
		{in: "a\x01\"", err: "control character in string"},
	} {
		got, n, err := Append([]byte("pre:"), []byte(tc.in))
		if tc.err == "" {
			if err != nil || string(got) != "pre:"+tc.want || n != tc.n {
				t.Errorf("%q: %q, %d, %v; want %q, %d", tc.in, got, n, err, "pre:"+tc.want, tc.n)
			}
			continue
		}
		var se *SyntaxError
		if !errors.As(err, &se) || se.Msg != tc.err {
			t.Errorf("%q: error %v, want %q", tc.in, err, tc.err)
		}
	}
}

// FuzzAppend: whatever Append accepts, encoding/json decodes to the same
// string; whatever valid UTF-8 encoding/json accepts without a lone
// surrogate, Append accepts.
func FuzzAppend(f *testing.F) {
	for _, s := range []string{`abc"`, `\ud83d\ude00"`, `\ud83d"`, `\u00e9\n"`, `\"`, `\`, "\x00\"", `\uD800\uDC00"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, s []byte) {
		got, n, err := Append(nil, s)
		if err != nil {
			return
		}
		if n < 1 || n > len(s) || s[n-1] != '"' {
			t.Fatalf("consumed %d of %q", n, s)
		}
		var want string
		if jerr := json.Unmarshal(append([]byte{'"'}, s[:n]...), &want); jerr != nil {
			t.Fatalf("Append accepted %q, encoding/json refused it: %v", s[:n], jerr)
		}
		if utf8.Valid(s[:n]) && string(got) != want {
			t.Fatalf("%q: Append %q, encoding/json %q", s[:n], got, want)
		}
	})
}
