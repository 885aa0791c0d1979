package tomlguard

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/BurntSushi/toml"
)

// nest is n levels of open, then inner, then n of close.
func nest(open, inner, close string, n int) string {
	return strings.Repeat(open, n) + inner + strings.Repeat(close, n)
}

func TestCheck(t *testing.T) {
	deep := MaxDepth + 1
	for _, tc := range []struct {
		name string
		src  string
		line int // 0: accepted
	}{
		{"empty", "", 0},
		{"flat", "schema = 1\n[engine]\nname = \"sim\"\n", 0},
		{"arrays at the limit", "a = " + nest("[", "", "]", MaxDepth), 0},
		{"arrays one past", "a = " + nest("[", "", "]", deep), 1},
		// The three shapes: they overflowed the stack, took over
		// 5 GB, and took 3.7 s and 1.1 GB in the decoder.
		{"2,000,000 nested arrays", "a = " + nest("[", "", "]", 2_000_000), 1},
		{"20,000 nested inline tables", "a = " + nest("{b = ", "1", "}", 20_000), 1},
		{"5,000 nested inline tables", "x = 1\n\na = " + nest("{b = ", "1", "}", 5_000), 3},
		{"inline tables at the limit", "a = " + nest("{b = ", "1", "}", MaxDepth), 0},
		{"inline tables one past", "a = " + nest("{b = ", "1", "}", deep), 1},
		// A dotted key's last part names its value, not a table: 17 parts
		// open 16 tables, where a header of 17 parts opens 17.
		{"dotted key at the limit", strings.Repeat("a.", MaxDepth) + "a = 1", 0},
		{"dotted key one past", "\n" + strings.Repeat("a.", deep) + "a = 1", 2},
		{"dotted key in an inline table", "a = {" + strings.Repeat("b.", MaxDepth) + "c = 1}", 1},
		{"header at the limit", "[" + strings.Repeat("a.", MaxDepth-1) + "a]\nx = 1", 0},
		{"header one past", "[" + strings.Repeat("a.", MaxDepth) + "a]", 1},
		{"array header one past", "[[" + strings.Repeat("a.", MaxDepth-1) + "a]]", 1},
		{"header, then a key one past", "[" + strings.Repeat("a.", MaxDepth-2) + "a]\nb.c.d = 1\n", 2},
		{"header, then an array one past", "[" + strings.Repeat("a.", MaxDepth-2) + "a]\nb = [[1]]\n", 2},
		{"a later header resets the depth", "[" + strings.Repeat("a.", MaxDepth-1) + "a]\n[b]\nc = " + nest("[", "", "]", MaxDepth-1), 0},
		{"unclosed brackets across lines", strings.Repeat("a = [\n", deep), deep},
		{"brackets in strings", `a = "` + strings.Repeat("[", 100) + `"` + "\nb = '" + strings.Repeat("{", 100) + "'", 0},
		{"escaped quote", `a = "\"` + strings.Repeat("[", 100) + `"`, 0},
		{"brackets in a comment", "a = 1 # " + strings.Repeat("[", 100), 0},
		{"brackets in multi-line strings", "a = \"\"\"\n" + strings.Repeat("[", 100) + "\n\"\"\"\nb = '''" + strings.Repeat("{", 100) + "'''", 0},
		{"lines counted in multi-line strings", "a = \"\"\"\n\n\"\"\"\nb = " + nest("[", "", "]", deep), 4},
		{"extra quotes end a multi-line string", "a = \"\"\"x\"\"\"\"\"\nb = " + nest("[", "", "]", deep), 2},
		// A quoted key's dots count as parts: every file:line lookup
		// splits on them (minutes for 20,000 such tables).
		{"dots in a quoted key at the limit", `"` + strings.Repeat("a.", MaxDepth) + `a" = 1`, 0},
		{"dots in a quoted key one past", "\n" + `"` + strings.Repeat("a.", 100) + `" = 1`, 2},
		{"400,000 dots in a quoted key", `"` + strings.Repeat("d.", 400_000) + `x" = 1`, 1},
		{"dots in a quoted header part one past", `["` + strings.Repeat("a.", MaxDepth) + `a"]`, 1},
		{"dots in a quoted inline-table key one past", `a = {"` + strings.Repeat("b.", MaxDepth) + `c" = 1}`, 1},
		{"dots in values", "a = [" + strings.Repeat("1.5, ", 100) + "]", 0},
		{"empty inline tables", "a = [" + strings.Repeat("{}, ", 100) + "]", 0},
		{"stray closers", strings.Repeat("]}", 100) + "\na = " + nest("[", "", "]", MaxDepth), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(tc.src)
			if tc.line == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var ge *Error
			if !errors.As(err, &ge) {
				t.Fatalf("err = %v, want an *Error at line %d", err, tc.line)
			}
			if ge.Line != tc.line || ge.Depth != deep {
				t.Errorf("line %d depth %d, want line %d depth %d", ge.Line, ge.Depth, tc.line, deep)
			}
		})
	}
}

// A UTF-16 byte-order mark is refused at line 1 with the fix, whatever
// follows it: the decoder drops it and reads on.
func TestCheckRefusesUTF16BOM(t *testing.T) {
	for _, tc := range []struct {
		name, src, want string // want "": accepted
	}{
		{"FF FE then UTF-8", "\xff\xfe[engine]\nname = \"sim\"\n", "UTF-16 byte-order mark (bytes FF FE)"},
		{"FE FF then UTF-8", "\xfe\xff[engine]\nname = \"sim\"\n", "UTF-16 byte-order mark (bytes FE FF)"},
		{"FF FE then UTF-16", "\xff\xfe[\x00e\x00", "UTF-16 byte-order mark (bytes FF FE)"},
		{"FF FE alone", "\xff\xfe", "UTF-16 byte-order mark"},
		{"UTF-8 text", "a = \"\xc3\xbf\xc3\xbe\"\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(tc.src)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var ge *Error
			if !errors.As(err, &ge) || ge.Line != 1 || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "save the file as UTF-8") {
				t.Fatalf("err = %v, want an *Error at line 1 saying %q and the fix", err, tc.want)
			}
		})
	}
}

// A file that is not UTF-8 text (a program, random bytes, a NUL) is
// refused as that, at the line of its first such byte, before its depth
// is scanned: a binary of a few hundred KiB was refused as nested more
// than 16 levels deep, at a line of its binary.
func TestCheckRefusesBinary(t *testing.T) {
	deep := "a = " + nest("[", "", "]", MaxDepth+1) + "\n"
	for _, tc := range []struct {
		name, src string
		line      int    // 0: accepted
		want      string // in the message
	}{
		{"a lone FF", "\xff", 1, "an invalid UTF-8 byte (0xff) at offset 0"},
		{"an invalid byte, then deep nesting", "a = 1\nb = \"\xf7\"\n" + deep, 2, "an invalid UTF-8 byte (0xf7) at offset 11"},
		{"deep nesting, then an invalid byte", deep + "\xc3(", 2, "invalid UTF-8 byte (0xc3)"},
		{"a NUL, then deep nesting", "a = 1\n\n\x00" + deep, 3, "a NUL byte (0x00) at offset 7"},
		{"a NUL after an invalid byte", "\xff\n\x00", 1, "invalid UTF-8 byte (0xff)"},
		{"an invalid byte after a NUL", "\x00\n\xff", 1, "a NUL byte"},
		{"a truncated sequence at the end", "a = \"\xe2\x82", 1, "invalid UTF-8 byte (0xe2) at offset 5"},
		{"UTF-8 text", "a = \"h\u00e9 \u20ac \U0001F600 \ufffd\"\n", 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(tc.src)
			if tc.line == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var ge *Error
			if !errors.As(err, &ge) || ge.Line != tc.line || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "not a text file") {
				t.Fatalf("err = %v, want an *Error at line %d saying %q and not a text file", err, tc.line, tc.want)
			}
		})
	}
}

// TestRealFiles: the embedded policy and every shipped profile pass, and
// the scanner's depth is the decoder's for each.
func TestRealFiles(t *testing.T) {
	files, _ := filepath.Glob("../../profiles/*.toml")
	files = append(files, "../../policy.toml")
	if len(files) < 2 {
		t.Fatalf("found %v", files)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := Check(string(b)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// decodedDepth is how deep a decoded TOML document nests, counted as
// Check counts: each table and each array below the root is one level,
// and so is each dot in a key (a quoted key's, which the decoder keeps
// whole).
func decodedDepth(root map[string]any) int {
	return keyed(root) - 1
}

// keyed is the levels of a table holding m: one, plus its deepest value
// with the dots of that value's key.
func keyed(m map[string]any) int {
	d := 1
	for k, x := range m {
		d = max(d, 1+strings.Count(k, ".")+levels(x))
	}
	return d
}

func levels(v any) int {
	switch v := v.(type) {
	case map[string]any:
		return keyed(v)
	case []map[string]any:
		d := 1
		for _, x := range v {
			d = max(d, 1+keyed(x))
		}
		return d
	case []any:
		d := 1
		for _, x := range v {
			d = max(d, 1+levels(x))
		}
		return d
	}
	return 0
}

// FuzzCheck: Check never panics, names a line of the text, and on every
// text the decoder accepts it agrees with the decoded nesting: it refuses
// exactly the documents deeper than MaxDepth.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{
		"", "a = 1", "[a.b]\nc = [[1], {d = 2}]", "[[a]]\n[[a]]\nb = 1", "a = {b = {c = [1, 2]}}",
		"a = '''\n[\n'''", `a = "\"["`, `"a.b".c = 1`, "a = [ # [\n 1 ]", "a = {}\nb = {c = {}, }",
		"a = " + nest("[", "", "]", MaxDepth), "a = " + nest("[", "", "]", MaxDepth+1),
		strings.Repeat("a.", MaxDepth) + "a = 1", "[" + strings.Repeat("a.", MaxDepth) + "a]",
		`"` + strings.Repeat("a.", MaxDepth) + `a" = 1`, `"` + strings.Repeat("a.", MaxDepth+1) + `a" = 1`,
		`["a.b"]` + "\nc = {\"d.e\" = [1]}",
	} {
		f.Add(s)
	}
	if b, err := os.ReadFile("../../policy.toml"); err == nil {
		f.Add(string(b))
	}
	for _, s := range []string{"\xe3", "a = 1\n\xff", "a = \"\x00\"", "# é\n[a]\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		err := Check(src)
		var ge *Error
		if err != nil && (!errors.As(err, &ge) || ge.Line < 1 || ge.Line > strings.Count(src, "\n")+1) {
			t.Fatalf("bad error %#v", err)
		}
		// Not text (a byte not UTF-8, or a NUL): refused as that, depth 0.
		if text := utf8.ValidString(src) && !strings.Contains(src, "\x00"); !text {
			if err == nil || ge.Depth != 0 || ge.Msg == "" {
				t.Fatalf("not text, Check: %#v", err)
			}
			return
		}
		if err != nil && ge.Depth != MaxDepth+1 {
			t.Fatalf("bad error %#v", err)
		}
		if err != nil && len(src) > 4096 {
			return // too deep to hand the decoder cheaply
		}
		var doc map[string]any
		if _, derr := toml.Decode(src, &doc); derr != nil {
			return
		}
		if deep := decodedDepth(doc) > MaxDepth; deep != (err != nil) {
			t.Fatalf("decoded depth %d, Check: %v", decodedDepth(doc), err)
		}
	})
}
