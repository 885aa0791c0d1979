package profiles

import (
	"errors"
	"strings"
	"testing"
)

// Issue 33: a profile starting with a UTF-8 byte order mark reported no
// line, and a value of the wrong type was worded in the decoder's Go terms.
func TestParseBOMAndTypeWords(t *testing.T) {
	for _, c := range []struct {
		text string
		line int
		want string
	}{
		{"\xef\xbb\xbf[engine]\nname = \"sim\"\nbogus = 1\n", 3, `unknown key "engine.bogus"`},
		{"\xef\xbb\xbf[engine]\nname = \"sim\"\n", 0, ""},
		// A UTF-16 mark is not dropped: TOML is UTF-8.
		{"\xff\xfe[engine]\nname = \"sim\"\n", 1, "UTF-16 byte-order mark (bytes FF FE); TOML files are UTF-8: save the file as UTF-8"},
		{"\xfe\xff[engine]\nname = \"sim\"\n", 1, "UTF-16 byte-order mark (bytes FE FF)"},
		{"[server]\nport = \"abc\"\n", 2, "server.port: is a string, want an integer"},
		// A table where a key takes a list, a number or a string: what the
		// key takes, at its line, whether or not the command reads it.
		// draft.schedule's reader says a table as it says its other
		// faults (internal/config: TestScheduleLayering).
		{"[draft]\nmodel = \"d\"\nschedule = {a = 1}\n", 0, ""},
		{"[draft.schedule]\nx = 1\n", 0, ""},
		{"[bench]\nconcurrency = {a = 1}\n", 2, "bench.concurrency is a table; it takes a number, or a list of levels"},
		// A duration written as a number: what to write instead.
		{"[server]\ndrain_timeout = 30\n", 2, `server.drain_timeout = 30 is a number; write a duration string such as "30s"`},
		{"[server]\nhold_timeout = 0.5\n", 2, `server.hold_timeout = 0.5 is a number; write a duration string such as "0.5s"`},
		{"[serve]\nready_timeout = 900\n", 2, `serve.ready_timeout = 900 is a number; write a duration string such as "900s"`},
		{"[adapt]\nwindow = 2.0\n", 2, `adapt.window = 2.0 is a number; write a duration string such as "2s"`},
		{"server.hang_timeout = 0\n", 1, `server.hang_timeout = 0 is a number; write a duration string such as "0s"`},
		{"[serve]\nready_timeout = 9000000000\n", 2, `serve.ready_timeout = 9000000000 is a number; write a duration string such as "9000000000s"`},
		// A number no duration string of its seconds would be taken for:
		// an example and the range, never "+Infs", "-5s" or "0s".
		{"[serve]\nready_timeout = inf\n", 2, `serve.ready_timeout = +Inf is a number; write a duration string such as "5m" or "90s", above 0 and at most 2562047h (about 292 years)`},
		{"[serve]\nready_timeout = nan\n", 2, `serve.ready_timeout = NaN is a number; write a duration string such as "5m" or "90s", above 0`},
		{"[serve]\nready_timeout = -5\n", 2, `serve.ready_timeout = -5 is a number; write a duration string such as "5m" or "90s", above 0`},
		{"[serve]\nready_timeout = 99999999999\n", 2, `serve.ready_timeout = 99999999999 is a number; write a duration string such as "5m" or "90s", above 0 and at most 2562047h`},
		{"[serve]\nready_timeout = 1e-12\n", 2, `such as "5m" or "90s", above 0`},
		{"[server]\ndrain_timeout = 0\n", 2, `server.drain_timeout = 0 is a number; write a duration string such as "5m" or "90s", above 0`},
		{"[server]\nhang_timeout = -1\n", 2, `server.hang_timeout = -1 is a number; write a duration string such as "5m" or "90s", from 0 (off) up to 2562047h`},
		{"[server]\ndrain_timeout = true\n", 2, "server.drain_timeout: is a boolean, want a string"},
		{"[server]\nhost = 8\n", 2, "server.host: is an integer, want a string"},
	} {
		_, err := Parse("p.toml", []byte(c.text))
		if c.want == "" {
			if err != nil {
				t.Errorf("%q: %v", c.text, err)
			}
			continue
		}
		var pe *Error
		if !errors.As(err, &pe) || pe.Line != c.line || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "destination") {
			t.Errorf("%q: %v (line %v), want line %d and %q", c.text, err, pe, c.line, c.want)
		}
	}
}

// A mistyped key names the key it was likely meant to be; one too far from
// every key names none.
func TestUnknownKeySuggests(t *testing.T) {
	for _, c := range []struct{ toml, want string }{
		{"[engine]\nnme = \"sim\"\n", `unknown key "engine.nme"; did you mean "engine.name"?`},
		{"[server]\nhold_timout = \"1s\"\n", `unknown key "server.hold_timout"; did you mean "server.hold_timeout"?`},
		{"[engine]\nzzzzzz = 1\n", `unknown key "engine.zzzzzz" (see`},
	} {
		_, err := Parse("p.toml", []byte(c.toml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %s", c.toml, err, c.want)
		}
	}
}

// A profile that sets nothing is valid, and says so: no bytes, or nothing
// but whitespace, comments and table headers.
func TestEmpty(t *testing.T) {
	for _, c := range []struct {
		text  string
		empty bool
	}{
		{"", true},
		{" \n\t\n\n", true},
		{"# a comment\n\n# another\n", true},
		{"\xef\xbb\xbf", true},
		{"[server]\n", true},
		{"[server]\n# port = 8080\n[draft]\n", true},
		{"[server]\nport = 8080\n", false},
		{"server.port = 8080\n", false},
		{"[engine]\nargs = []\n", false},   // set, to nothing
		{"[draft]\nmodel = \"\"\n", false}, // speculation off
	} {
		p, err := Parse("p.toml", []byte(c.text))
		if err != nil {
			t.Fatalf("%q: %v", c.text, err)
		}
		if p.Empty() != c.empty {
			t.Errorf("%q: Empty() = %v, want %v", c.text, p.Empty(), c.empty)
		}
	}
}
