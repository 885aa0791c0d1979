package profiles

import (
	"errors"
	"strings"
	"testing"
)

// envKey is a key written in the cases below: no error may show it.
const envKey = "abc12345"

// [engine.env] written as anything but a table was decoded as nothing,
// without an error (the decoder's unifyMap drops a non-table into a map),
// so the profile validated and the engine served without its key. It is
// refused at the line that gives it, with the fix, the value not shown;
// so are the entries of the table that are not strings.
func TestEngineEnvMustBeATable(t *testing.T) {
	const fix = `want a table: write [engine.env] on a line of its own, then one NAME = "value" line under it for each entry (LLAMA_API_KEY = "…")`
	for _, c := range []struct {
		name, text string
		line       int
		want       string
	}{
		{"a string", "[engine]\nname = \"sim\"\nenv = \"LLAMA_API_KEY=" + envKey + "\"\n", 3, "engine.env: is a string, " + fix},
		{"an integer", "[engine]\nenv = 5\n", 2, "engine.env: is an integer, " + fix},
		{"a boolean", "[engine]\nenv = true\n", 2, "engine.env: is a boolean, " + fix},
		{"an array", "[engine]\nenv = [\"LLAMA_API_KEY=" + envKey + "\"]\n", 2, "engine.env: is an array, " + fix},
		{"a date", "[engine]\nenv = 1979-05-27\n", 2, "engine.env: is a date or time, " + fix},
		{"a dotted key at the top", "# a profile\n\nengine.env = \"LLAMA_API_KEY=" + envKey + "\"\n[model]\npath = \"m\"\n", 3, "engine.env: is a string, " + fix},
		// The entries: a string each.
		{"an entry that is a number", "[engine.env]\nLLAMA_API_KEY = 5\n", 2, "engine.env.LLAMA_API_KEY: is an integer, want a string"},
		{"an entry that is a table", "[engine.env.LLAMA_API_KEY]\nx = \"" + envKey + "\"\n", 1, "engine.env.LLAMA_API_KEY: is a table, want a string"},
		{"an entry that is an inline table", "[engine.env]\nLLAMA_API_KEY = {x = \"" + envKey + "\"}\n", 2, "engine.env.LLAMA_API_KEY: is a table, want a string"},
		{"an entry that is an array", "[engine.env]\nLLAMA_API_KEY = [\"" + envKey + "\"]\n", 2, "engine.env.LLAMA_API_KEY: is an array, want a string"},
	} {
		t.Run(c.name, func(t *testing.T) { refusedAt(t, c.text, c.line, c.want) })
	}
	for _, text := range []string{
		"[engine.env]\nLLAMA_API_KEY = \"k\"\n",
		"[engine]\nenv = {LLAMA_API_KEY = \"k\"}\n",
		"[engine]\nenv.LLAMA_API_KEY = \"k\"\n",
		"engine.env.LLAMA_API_KEY = \"k\"\n",
		"[engine.env]\n",
	} {
		p, err := Parse("p.toml", []byte(text))
		if err != nil {
			t.Errorf("%q: %v", text, err)
		} else if v, ok := p.Engine.Env["LLAMA_API_KEY"]; strings.Contains(text, "LLAMA") && (!ok || v != "k") {
			t.Errorf("%q: engine.env %v", text, p.Engine.Env)
		}
	}
}

// A dot after the name of a key that takes a value (port.x = 1) makes the
// key a table; the decoder said so in its Go words with no line
// ("toml: (last key \"server.port\"): incompatible types: TOML value has
// type map[string]any; destination has type integer"). It is said at the
// line of the dotted key, in TOML's words, with the fix.
func TestDottedKeyOnAValue(t *testing.T) {
	const noDot = "its value with no dot after its name (see docs/profiles.md)"
	for _, c := range []struct {
		name, text string
		line       int
		want       string
	}{
		{"a number", "[server]\nhost = \"h\"\nport.x = 1\n", 3, "server.port: is a table, want an integer: the dot in server.port.x makes server.port a table; give server.port " + noDot},
		{"a string from the top", "# x\nengine.name.x = 1\n", 2, "engine.name: is a table, want a string: the dot in engine.name.x makes engine.name a table; give engine.name " + noDot},
		{"a string from its table's parent", "[engine]\nname.x = 1\n", 2, "engine.name: is a table, want a string: the dot in engine.name.x makes engine.name a table"},
		// A variable's name may hold a dot: quoted, it is one name.
		{"a variable", "[engine.env]\nA = \"a\"\nFOO.BAR = \"x\"\n", 3, `engine.env.FOO: is a table, want a string: the dot in engine.env.FOO.BAR makes engine.env.FOO a table; give engine.env.FOO its value with no dot after its name, or quote a name that holds a dot ("FOO.BAR" = …) (see docs/profiles.md)`},
		{"a variable from engine", "[engine]\nenv.X.Y = \"b\"\n", 2, `or quote a name that holds a dot ("X.Y" = …)`},
		// A [table] header where a value belongs keeps its line and words.
		{"a header", "[server.port]\nx = 1\n", 1, "server.port: is a table, want an integer (see docs/profiles.md)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("p.toml", []byte(c.text))
			var pe *Error
			if !errors.As(err, &pe) || pe.Line != c.line || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "destination") {
				t.Fatalf("got %v; want p.toml:%d and %q", err, c.line, c.want)
			}
		})
	}
}

// A key the decoder refuses by its name (defined twice, a value and a
// table at once) is named, on a line that names a secret too: the name
// is not the secret, the value is, and the message quotes no value. It
// read "Key '****' has already been defined.", which left the operator
// nothing to act on, or "Key '****_KEY'", part of the name masked as a
// value.
func TestKeyNamedTwiceIsNamed(t *testing.T) {
	for _, c := range []struct {
		name, text string
		line       int
		want       string
	}{
		{"a variable twice", "[engine]\nname = \"sim\"\n[engine.env]\nLLAMA_API_KEY = \"" + envKey + "\"\nLLAMA_API_KEY = \"" + envKey + "\"\n", 5, "invalid TOML: Key 'engine.env.LLAMA_API_KEY' has already been defined."},
		{"quoted the second time", "[engine.env]\nHF_TOKEN = \"" + envKey + "\"\n\"HF_TOKEN\" = \"x\"\n", 3, "Key 'engine.env.HF_TOKEN' has already been defined."},
		{"args twice", "[engine]\nargs = [\"--api-key\", \"" + envKey + "\"]\nargs = [\"--api-key\", \"" + envKey + "\"]\n", 3, "Key 'engine.args' has already been defined."},
		{"a value, then a table", "[engine.env]\nLLAMA_API_KEY = \"" + envKey + "\"\n[engine.env.LLAMA_API_KEY]\nx = 1\n", 3, "Key 'engine.env.LLAMA_API_KEY' has already been defined."},
		{"a value, then an array of tables", "[engine.env]\nLLAMA_API_KEY = \"" + envKey + "\"\n[[engine.env.LLAMA_API_KEY]]\n", 3, "Key 'engine.env.LLAMA_API_KEY' was already created and cannot be used as an array."},
		{"a value, then a dotted key", "[engine.env]\nLLAMA_API_KEY = \"" + envKey + "\"\nLLAMA_API_KEY.x = \"b\"\n", 3, "Key 'engine.env.LLAMA_API_KEY' has already been defined."},
	} {
		t.Run(c.name, func(t *testing.T) { refusedAt(t, c.text, c.line, c.want) })
	}
}

// refusedAt checks that Parse refuses text at p.toml:line saying want, and
// never shows envKey, the value.
func refusedAt(t *testing.T, text string, line int, want string) {
	t.Helper()
	_, err := Parse("p.toml", []byte(text))
	var pe *Error
	if !errors.As(err, &pe) || pe.Line != line || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v; want p.toml:%d and %q", err, line, want)
	}
	if strings.Contains(err.Error(), envKey) {
		t.Errorf("%q shows the value", err)
	}
}
