package profiles

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/secret"
)

func TestExamplesParse(t *testing.T) {
	names := ExampleNames()
	if len(names) < 4 {
		t.Fatalf("examples %v", names)
	}
	for _, n := range names {
		b, err := Example(n)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Parse(n+".toml", b); err != nil {
			t.Errorf("example %s: %v", n, err)
		}
	}
}

// The names a key that takes a table holds are the engine's, case and
// all: engine.env's FOO and foo are two variables, not a key in another
// case.
func TestParseKeepsTheCaseOfTableNames(t *testing.T) {
	for _, text := range []string{
		"[engine.env]\nFoo = \"1\"\nfoo = \"2\"\n",
		"[engine]\nname = \"sim\"\nenv = { HF_TOKEN = \"x\", Hf_Token = \"y\" }\n",
	} {
		p, err := Parse("p.toml", []byte(text))
		if err != nil || len(p.Engine.Env) != 2 {
			t.Errorf("%q: %v, env %v", text, err, p)
		}
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		name, text string
		want       []string
	}{
		{"unknown top key", "[engine]\nname = \"sim\"\n\n[draft]\nmodle = \"x\"\n", []string{"p.toml:5", "draft.modle", "docs/profiles.md"}},
		{"unknown table", "[serv]\nport = 1\n", []string{"p.toml:", "serv"}},
		{"wrong type", "[draft]\nblock_size = \"four\"\n", []string{"p.toml:2", "draft.block_size", "is a string, want an integer"}},
		// The line with the mistake: the decoder counts the newline it
		// stopped at into the next line (it said :2 of [draft on line 1).
		{"syntax", "[draft\nmodel = 1\n", []string{"p.toml:1:", "invalid TOML"}},
		{"unclosed header alone", "[server", []string{"p.toml:1:", "invalid TOML"}},
		{"unclosed header further down", "[engine]\nname = \"sim\"\n[server\nport = 1\n", []string{"p.toml:3:", "invalid TOML"}},
		{"value missing at the line's end", "[server]\nport =\n", []string{"p.toml:2:", "invalid TOML"}},
		{"bad escape inside a multi-line string", "[model]\npath = \"\"\"\nx\n\\q\n\"\"\"\n", []string{"p.toml:4:", "invalid TOML"}},
		{"unclosed array at the end", "[engine]\nargs = [\"-x\",\n", []string{"p.toml:2:", "invalid TOML"}},
		// A control character at a line's start is on that line (it was
		// said on the line before), as one mid-line is.
		{"NUL at a line's start", "[engine]\nname = \"sim\"\n\n\x00x\n", []string{"p.toml:4:", "control characters"}},
		{"NUL mid-line", "[engine]\nname = \"sim\"\n\nx\x00x\n", []string{"p.toml:4:", "control characters"}},
		// The types are TOML's, not the decoder's Go names.
		{"float for an integer", "[draft]\nblock_size = 3.0\n", []string{"p.toml:2", "draft.block_size: is a float, want an integer"}},
		{"boolean for an integer", "[draft]\nblock_size = true\n", []string{"is a boolean, want an integer"}},
		{"array for an integer", "[draft]\nblock_size = [3]\n", []string{"is an array, want an integer"}},
		{"table for an integer", "[draft]\nblock_size = {a = 1}\n", []string{"is a table, want an integer"}},
		{"date for an integer", "[draft]\nblock_size = 1979-05-27\n", []string{"is a date or time, want an integer"}},
		{"integer for a string", "[server]\nhost = 5\n", []string{"server.host: is an integer, want a string"}},
		{"string for a list", "[engine]\nargs = \"--x\"\n", []string{"engine.args: is a string, want an array"}},
		{"args not list", "[engine]\nargs = \"--x\"\n", []string{"p.toml:2"}},
		// A secret typed without quotes is quoted back by the decoder:
		// masked, as everywhere else (the last 4 characters show).
		{"bare key in args", "[engine]\nargs = [\"--api-key\", skHiddenABCD]\n", []string{"p.toml:2", `found "****ABCD"`}},
		{"bare key in env", "[engine.env]\nHF_TOKEN = hfHiddenWXYZ\n", []string{"p.toml:2", `found "****WXYZ"`}},
		{"bare key on a line of its own", "[engine]\nargs = [\n  \"--api-key\",\n  skHiddenEFGH,\n]\n", []string{"p.toml:4", `found "****EFGH"`}},
		{"bare value elsewhere", "[model]\npath = targetABCD\n", []string{`found "targetABCD"`}},
		// An integer past TOML's is said as one merely too large is,
		// key, bucket and bound: it was "invalid TOML: 99999999999999999999
		// is out of range for int64".
		// The bucket is named as written where it is on one line.
		{"schedule number past int64", "[draft]\nschedule = [[1, 0, 99999999999999999999]]\n", []string{"p.toml:2: bad draft.schedule: bucket 1 [1, 0, 99999999999999999999] has width 99999999999999999999, above 256, which no drafter runs"}},
		{"schedule number past int64 on a line of its own", "[draft]\nschedule = [\n  [1, 3, 4], # [2, 2, 2]\n  [-99999999999999999999, 0, 1],\n]\n", []string{"p.toml:4: bad draft.schedule: bucket 2 [-99999999999999999999, 0, 1] starts at -99999999999999999999 requests in flight: loads start at 1"}},
		{"schedule bucket across lines", "[draft]\nschedule = [[1, 1, 6], [2,\n 99999999999999999999, 4]]\n", []string{"p.toml:3: bad draft.schedule: bucket 2 ends at 99999999999999999999 requests in flight, above 1048576"}},
		{"port past int64", "[server]\nport = 99999999999999999999\n", []string{"p.toml:2: server.port: 99999999999999999999 is far out of range, beyond any TOML integer: see docs/profiles.md for the values server.port takes"}},
		{"secret past int64", "[engine.env]\nHF_TOKEN = 12345678901234567890123\n", []string{"p.toml:2: engine.env.HF_TOKEN: ****0123 is far out of range"}},
		// Keys are matched with their case, as a policy file's are: the
		// decoder matched fields regardless of case, so [Engine] applied,
		// and NAME under name overrode it, said at name's line.
		{"a table in another case", "[Engine]\nName = \"sim\"\n", []string{`p.toml:1: unknown key "Engine"; did you mean "engine"? Keys are matched with their case.`}},
		{"a key in another case after its own", "[engine]\nname = \"sim\"\nNAME = \"vllm\"\n", []string{`p.toml:3: unknown key "engine.NAME"; did you mean "engine.name"?`}},
		{"a key in another case alone", "[engine]\nName = \"sim\"\n", []string{`p.toml:2: unknown key "engine.Name"; did you mean "engine.name"?`}},
		{"a dotted key in another case", "[draft]\nmodel = \"d\"\n[server]\nPORT = 9000\n", []string{`p.toml:4: unknown key "server.PORT"; did you mean "server.port"?`}},
		{"a top-level dotted key", "Engine.name = \"sim\"\n", []string{`p.toml:1: unknown key "Engine"`}},
		{"policy entries in another case", "[[Policy.Entry]]\nid = \"x\"\n", []string{`p.toml:1: unknown key "Policy"; did you mean "policy"?`}},
		{"a bench key in another case", "[bench]\nWidths = [2, 4]\n", []string{`p.toml:2: unknown key "bench.Widths"; did you mean "bench.widths"?`}},
		// Every unknown key at once, a table's once (not again for each
		// key under it), where the keys are listed said once, last.
		{"unknown keys in another case and a table for a list, all of them", "[server]\nprot = 1\n[Draft]\nmodel = \"d\"\n[bench.concurrency]\nx = 1\n", []string{`3 problems in the profile: (1) p.toml:2: unknown key "server.prot"; did you mean "server.port"?; (2) p.toml:3: unknown key "Draft"; did you mean "draft"? Keys are matched with their case.; (3) p.toml:5: bench.concurrency is a table; it takes a number, or a list of levels like [1, 2, 4, 8] (see docs/profiles.md for the schema; ` + "`speclaunch profile init`" + ` writes a commented example)`}},
		// The unknown keys beside the values of the wrong type, in one
		// list: said after those were fixed, they took a second run.
		{"wrong types and unknown keys together", "[server]\nport = \"x\"\nprot = 5\n[sevrer]\nhost = \"y\"\n", []string{`3 problems in the profile: (1) p.toml:2: server.port: is a string, want an integer: write a number, without quotes; (2) p.toml:3: unknown key "server.prot"; did you mean "server.port"?; (3) p.toml:4: unknown key "sevrer"; did you mean "server"? (see docs/profiles.md for the schema`}},
		// A number past its key's type is a parse error the decoder met
		// first or not; a table given for a value is one of the values.
		{"a float out of range beside a wrong type", "[adapt]\nmargin = 9007199254740993\n[server]\nport = \"x\"\n", []string{`2 problems in the profile: (1) p.toml:2: adapt.margin: 9007199254740993 is out of the safe float64 range; (2) p.toml:4: server.port: is a string, want an integer`}},
		{"tables for values", "[server.port]\n[model.path]\n", []string{`2 problems in the profile: (1) p.toml:1: server.port: is a table, want an integer; (2) p.toml:2: model.path: is a table, want a string`}},
		// A key in another case is unknown whatever its value (the
		// decoder matched it to the field and its type was said first),
		// and the unknown keys beside it are said too.
		{"a key in another case with a wrong type", "[server]\nport = 1\nPORT = \"x\"\nhost = 5\n", []string{`2 problems in the profile: (1) p.toml:3: unknown key "server.PORT"; did you mean "server.port"? Keys are matched with their case.; (2) p.toml:4: server.host: is an integer, want a string`}},
		{"a table in another case beside a wrong type", "[Server]\nport = \"x\"\n[draft]\nblock_size = \"3\"\nmodle = \"x\"\n", []string{`3 problems in the profile: (1) p.toml:1: unknown key "Server"; did you mean "server"? Keys are matched with their case.; (2) p.toml:4: draft.block_size: is a string, want an integer: write a number, without quotes; (3) p.toml:5: unknown key "draft.modle"`}},
		{"a quoted name with an escaped quote", "[engine.env]\nA = \"b\"\n\"x\\\"y\" = 5\n", []string{`p.toml:3: engine.env."x\"y": is an integer, want a string`}},
		{"a quoted unknown name", "[server]\nport = 1\n\"pört\" = 1\n", []string{`p.toml:3: unknown key "server.\"pört\""`}},
		// A quoted key's line is its own, not its table's; an array of
		// inline tables is an array.
		{"a quoted name of the wrong type", "[engine]\nname = \"sim\"\n[engine.env]\nA = \"b\"\n\"FOO.BAR\" = 5\n", []string{`p.toml:5: engine.env."FOO.BAR": is an integer, want a string: put the value in quotes`}},
		{"an array of inline tables for a string", "[model]\npath = [{a = 1}]\nquant = 5\n", []string{`(1) p.toml:2: model.path: is an array, want a string`, `(2) p.toml:3: model.quant: is an integer, want a string`}},
		// Every value of the wrong type, in the file's order, whichever the
		// decoder met first (it walks a table's keys in Go's map order).
		{"values of the wrong type, all of them", "[server]\nport = \"x\"\nproxy = \"yes\"\n[serve]\nstrict_width = \"maybe\"\nready_timeout = 30\n[model]\npath = 5\n", []string{`5 problems in the profile: (1) p.toml:2: server.port: is a string, want an integer: write a number, without quotes; (2) p.toml:3: server.proxy: is a string, want a boolean: write true or false, without quotes; (3) p.toml:5: serve.strict_width: is a string, want a boolean: write true or false, without quotes; (4) p.toml:6: serve.ready_timeout = 30 is a number; write a duration string such as "30s"; (5) p.toml:8: model.path: is an integer, want a string: put the value in quotes (see docs/profiles.md)`}},
		{"unknown keys, all of them", "[sevrer]\nport = 1\nhost = \"x\"\n[draft]\nblock_sise = 4\n", []string{`2 problems in the profile: (1) p.toml:1: unknown key "sevrer"; did you mean "server"?; (2) p.toml:5: unknown key "draft.block_sise"; did you mean "draft.block_size"? (see docs/profiles.md`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("p.toml", []byte(c.text))
			if err == nil {
				t.Fatal("want error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "Hidden") {
				t.Errorf("%q shows a secret", err)
			}
		})
	}
}

// A key typed without quotes is quoted back by the decoder in part (its
// leading letters, or one character), never whole: each quote shows as the
// whole key is masked everywhere ("****" and its last 4 characters), or as
// "****", never another part of the key. Before, "OtherSecretKeyABCDEF9876"
// showed as "****CDEF": with the usual ****9876, 8 characters of the key.
func TestSyntaxErrorShowsTheKeyAsItsMask(t *testing.T) {
	quoted := regexp.MustCompile(`"[^"]*"|'[^']*'`)
	for _, key := range []string{
		"OtherSecretKeyABCDEF9876", "sk-Abcdefghijklmnop0123", "ABC_DEF-secretKey1234", "-ABCsecretKEYxyz99",
		"9876ABCDsecretKEYxyz", "0xZZsecretKey5678", "12_34_secretKey9988", "2024-01-02Tsecret7788", "inf123secretKey4321",
	} {
		for _, text := range []string{
			"[engine]\nargs = [\"--api-key\", " + key + "]\n",
			"[engine]\nargs = [\n  \"--api-key\",\n  " + key + ", # the key\n]\n",
			"[engine.env]\nHF_TOKEN = " + key + "\n",
		} {
			_, err := Parse("p.toml", []byte(text))
			if err == nil {
				t.Fatalf("%q: want a syntax error", text)
			}
			msg := err.Error()
			for _, q := range quoted.FindAllString(msg, -1) {
				in := q[1 : len(q)-1]
				if in != secret.Mask(key) && in != secret.Masked && strings.ContainsAny(in, "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz") {
					t.Errorf("%q: the error quotes %s; want %q (the key's mask) or %q:\n%s", key, q, secret.Mask(key), secret.Masked, msg)
				}
			}
		}
	}
	_, err := Parse("p.toml", []byte("[engine]\nargs = [\"--api-key\", OtherSecretKeyABCDEF9876]\n"))
	if want := `found "****9876" instead`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("%v: want %s, the key masked as everywhere else", err, want)
	}
}

func TestPolicyEntriesPassThrough(t *testing.T) {
	p, err := Parse("p.toml", []byte("[[policy.entry]]\nid = \"x\"\nwidth = 4\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Policy.Entry) != 1 || p.Line("policy.entry[0]") != 1 {
		t.Errorf("entries %v line %d", p.Policy.Entry, p.Line("policy.entry[0]"))
	}
}

func TestFind(t *testing.T) {
	dir := t.TempDir()
	wd, _ := os.Getwd()
	defer os.Chdir(wd)
	os.Chdir(dir)
	os.MkdirAll("profiles", 0o755)
	os.WriteFile("profiles/a.toml", []byte(""), 0o644)
	xdg := filepath.Join(dir, "xdg")
	os.MkdirAll(filepath.Join(xdg, "speclaunch", "profiles"), 0o755)
	os.WriteFile(filepath.Join(xdg, "speclaunch", "profiles", "a.toml"), []byte(""), 0o644)
	os.WriteFile(filepath.Join(xdg, "speclaunch", "profiles", "b.toml"), []byte(""), 0o644)
	getenv := func(k string) string {
		if k == "XDG_CONFIG_HOME" {
			return xdg
		}
		return ""
	}
	if p, err := Find("a", getenv); err != nil || p != filepath.Join("profiles", "a.toml") {
		t.Errorf("a: %q %v (./profiles must win)", p, err)
	}
	if p, err := Find("b", getenv); err != nil || !strings.HasPrefix(p, xdg) {
		t.Errorf("b: %q %v", p, err)
	}
	_, err := Find("c", getenv)
	if err == nil || !strings.Contains(err.Error(), "(found: a, b)") {
		t.Errorf("c: %v", err)
	}
	// A typo or the start of a name found is told the name (--profile dem).
	os.WriteFile("profiles/demo.toml", []byte(""), 0o644)
	os.WriteFile("profiles/demo-load.toml", []byte(""), 0o644)
	for ref, want := range map[string]string{"dem": "(did you mean demo? found: a, b, demo, demo-load)", "demo-lod": "did you mean demo-load?"} {
		if _, err := Find(ref, getenv); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", ref, err, want)
		}
	}
	// A bare name no search directory holds, of a file here, is that file
	// (its shape is checked when it is read), and a profile name wins.
	os.WriteFile("myprofile", []byte(""), 0o644)
	os.Mkdir("a", 0o755)
	if p, err := Find("myprofile", getenv); err != nil || p != "myprofile" {
		t.Errorf("myprofile: %q %v", p, err)
	}
	if p, err := Find("a", getenv); err != nil || p != filepath.Join("profiles", "a.toml") {
		t.Errorf("a with a directory a here: %q %v", p, err)
	}
	if _, err := Find("./missing.toml", getenv); err == nil {
		t.Error("missing path must fail")
	}
	// A path that is a symlink leading nowhere is that path: its read
	// says what is wrong and the fix (safefile), as a policy file's does.
	os.Symlink("loop.toml", "loop.toml")
	if p, err := Find("loop.toml", getenv); err != nil || p != "loop.toml" {
		t.Errorf("loop.toml: %q %v", p, err)
	}
}

// FuzzParse: any bytes give a profile or an *Error naming the file, never a
// panic.
func FuzzParse(f *testing.F) {
	for _, n := range ExampleNames() {
		b, _ := Example(n)
		f.Add(b)
	}
	f.Add([]byte("[draft]\nblock_size = 1\n[[policy.entry]]\nid = 1\n"))
	// The contents of the wrong files an operator may name: an empty one,
	// what /dev/zero gives, and a binary file.
	f.Add([]byte{})
	f.Add(make([]byte, 4096))
	f.Add([]byte("GGUF\x03\x00\x00\x00\xff\xff"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse("f.toml", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.toml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if p.Path != "f.toml" {
			t.Fatalf("path %q", p.Path)
		}
		_ = p.Line("draft.block_size")
	})
}

// Every file an example names under a directory of its own name is a
// stand-in it ships, so `profile init` writes it beside the profile.
func TestStandInsAreTheNamedFiles(t *testing.T) {
	for _, n := range ExampleNames() {
		b, _ := Example(n)
		p, err := Parse(n+".toml", b)
		if err != nil {
			t.Fatal(err)
		}
		have := map[string]bool{}
		for _, si := range StandIns(n) {
			have[si.Rel] = true
		}
		var named []string
		for _, f := range []string{p.Model.Path, deref(p.Draft.Model)} {
			if strings.HasPrefix(f, n+"/") {
				named = append(named, f)
				if !have[f] {
					t.Errorf("example %s names %s, which it does not ship", n, f)
				}
			}
		}
		if len(named) != len(have) {
			t.Errorf("example %s names %v and ships %v", n, named, have)
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// TestFindNameWithSuffix: NAME.toml that is no file here but whose NAME
// is a profile of a search directory is told that name and its path
// (MLXCEL_PROFILE=cm.toml for cm said only "no such file or directory");
// one that names no profile, or a path with a directory, is not.
func TestFindNameWithSuffix(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	os.MkdirAll("profiles", 0o755)
	os.WriteFile("profiles/a.toml", []byte(""), 0o644)
	xdg := filepath.Join(dir, "xdg")
	os.MkdirAll(filepath.Join(xdg, "speclaunch", "profiles"), 0o755)
	os.WriteFile(filepath.Join(xdg, "speclaunch", "profiles", "cm.toml"), []byte(""), 0o644)
	getenv := func(k string) string {
		if k == "XDG_CONFIG_HOME" {
			return xdg
		}
		return ""
	}
	for _, tc := range []struct{ ref, hint string }{
		{"cm.toml", `; did you mean profile "cm" (` + filepath.Join(xdg, "speclaunch", "profiles", "cm.toml") + `)?`},
		{"a.toml", `; did you mean profile "a" (profiles/a.toml)?`},
		{"c.toml", ""},
		{"./cm.toml", ""},
		{".toml", ""},
	} {
		t.Run(tc.ref, func(t *testing.T) {
			_, err := Find(tc.ref, getenv)
			want := "profile " + strconv.Quote(tc.ref) + ": no such file or directory" + tc.hint
			if err == nil || err.Error() != want || !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("got %v; want %q, wrapping fs.ErrNotExist", err, want)
			}
		})
	}
}

// A profile of many problems says the first maxSaid and counts the rest:
// each wrong value costs a pass over the file, and 16,000 took minutes in
// an error of 1.5 MB; 16,000 unknown keys took 7 s and an error of 1 MB.
func TestManyProblemsBounded(t *testing.T) {
	for _, c := range []struct {
		name, head, line, first string
	}{
		{"values of the wrong type", "[engine.env]\n", "V%d = %d\n", "(1) p.toml:2: engine.env.V0: is an integer"},
		{"unknown keys", "", "unknown_%d = %d\n", "(1) p.toml:1: unknown key \"unknown_0\""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b strings.Builder
			b.WriteString(c.head)
			for i := range 1000 {
				fmt.Fprintf(&b, c.line, i, i)
			}
			_, err := Parse("p.toml", []byte(b.String()))
			if err == nil {
				t.Fatal("want an error")
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, fmt.Sprintf("%d problems in the profile: %s", maxSaid, c.first)) ||
				!strings.HasSuffix(msg, fmt.Sprintf("; and %d more, not listed: fix these, then validate again", 1000-maxSaid)) {
				t.Errorf("error %.300q…, want %d listed and %d more counted", msg, maxSaid, 1000-maxSaid)
			}
		})
	}
}

// The problems said are the file's first maxSaid by line, wrong types and
// unknown keys together: the unknown keys came from a document in
// alphabetical order, and the cap left out lines 3, 12 and 21 (a review).
func TestSaidAreTheFirstByLine(t *testing.T) {
	var b strings.Builder
	b.WriteString("[server]\nport = \"x\"\nzz = 1\n")
	for i := 1; i <= maxSaid; i++ {
		fmt.Fprintf(&b, "a%d = 1\n", i)
	}
	_, err := Parse("p.toml", []byte(b.String()))
	if err == nil {
		t.Fatal("want an error")
	}
	for line := 2; line <= maxSaid+1; line++ {
		if !strings.Contains(err.Error(), fmt.Sprintf(" p.toml:%d: ", line)) {
			t.Errorf("line %d not said: %s", line, err)
		}
	}
	if !strings.HasSuffix(err.Error(), "; and 2 more, not listed: fix these, then validate again") {
		t.Errorf("error %s, want 2 more counted", err)
	}
}

// One problem's text is bounded: its key is the file's, and a 50 kB key
// said five times over made a 5 MB error (a review).
func TestLongKeyBounded(t *testing.T) {
	long := strings.Repeat("K", 50_000)
	_, err := Parse("p.toml", []byte("[engine.env]\n"+long+".x = 1\n[server]\nport = \"x\"\n"))
	if err == nil {
		t.Fatal("want an error")
	}
	if n := len(err.Error()); n > 2*maxSaid*maxSaidBytes/10 || !strings.Contains(err.Error(), "bytes more)") {
		t.Errorf("error of %d bytes, want it cut to about %d a problem: %.200q", n, maxSaidBytes, err.Error())
	}
}
