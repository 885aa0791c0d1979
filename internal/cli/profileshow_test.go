package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// showProfile is a profile for profile show, with an [engine.env] of a
// secret-named variable, one secret by its shape and a plain one.
func showProfile(t *testing.T) string {
	t.Helper()
	prof := filepath.Join(t.TempDir(), "p.toml")
	writeFile(t, prof, "[engine]\nname = \"sim\"\n[model]\npath = \"demo-target\"\nquant = \"affine\"\n"+
		"[engine.env]\nLLAMA_API_KEY = \"LEAKCHECKKEY-0123456789\"\nAUTH = \"Bearer sk-LeakCheckAbcdef9876\"\nFOO = \"bar\"\n")
	return prof
}

// profileShowJSON is profile show --json's settings.
func profileShowJSON(t *testing.T, prof string) map[string]Setting {
	t.Helper()
	code, o, e := runCLI(t, "profile", "show", "--json", "--profile", prof)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, e)
	}
	var got struct {
		Settings map[string]Setting `json:"settings"`
	}
	if err := json.Unmarshal([]byte(o), &got); err != nil {
		t.Fatal(err)
	}
	return got.Settings
}

// profile show prints every effective value (docs/profiles.md), the
// profile's [engine.env] too: each variable with its file:line, its value
// masked as serve --dry-run masks it. It listed none of them.
func TestProfileShowListsEngineEnv(t *testing.T) {
	prof := showProfile(t)
	code, text, e := runCLI(t, "profile", "show", "--profile", prof)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, e)
	}
	_, dry, _ := runCLI(t, "serve", "--dry-run", "--profile", prof)
	settings := profileShowJSON(t, prof)
	for _, c := range []struct {
		name, line, dryRun, value string
	}{
		{"LLAMA_API_KEY", "7", "LLAMA_API_KEY='****6789'", "****6789"},
		{"AUTH", "8", "AUTH='****9876'", "****9876"},
		{"FOO", "9", "FOO=bar", "bar"},
	} {
		src := "profile " + prof + ":" + c.line
		if !strings.Contains(dry, c.dryRun) {
			t.Fatalf("serve --dry-run lacks %s:\n%s", c.dryRun, dry)
		}
		_, shown, _ := strings.Cut(c.dryRun, "=")
		if !strings.Contains(text, "engine-env."+c.name+" ") || !strings.Contains(text, " "+shown+" ") || !strings.Contains(text, src+"\n") {
			t.Errorf("profile show lacks engine-env.%s %s (%s):\n%s", c.name, shown, src, text)
		}
		if s := settings["engine-env."+c.name]; s.Value != c.value || s.Source != src {
			t.Errorf("--json: engine-env.%s is %+v, want %q from %s", c.name, s, c.value, src)
		}
	}
	for _, leak := range []string{"LEAKCHECK", "LeakCheck"} {
		if strings.Contains(text, leak) || strings.Contains(dry, leak) {
			t.Errorf("a secret shows:\n%s\n%s", text, dry)
		}
	}
}

// profile show's sources stand in one column: a value longer than the
// others (bench-base-port's default, "none: a free loopback port per arm,
// drawn at random in 20000-31999") pushed its source out of line.
func TestProfileShowAlignsSources(t *testing.T) {
	prof := showProfile(t)
	code, text, e := runCLI(t, "profile", "show", "--profile", prof)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, e)
	}
	settings := profileShowJSON(t, prof)
	col, rows := -1, 0
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(line, "  ") {
			continue
		}
		s, ok := settings[f[0]]
		if !ok {
			t.Fatalf("%q: no such setting in --json", line)
		}
		at := strings.LastIndex(line, " "+s.Source) + 1
		if col < 0 {
			col = at
		}
		if at != col || !strings.HasSuffix(line, s.Source) {
			t.Errorf("the source of %s is at column %d, want %d:\n%s", f[0], at, col, text)
		}
		rows++
	}
	if rows != len(settings) {
		t.Errorf("%d rows printed, %d settings", rows, len(settings))
	}
}

// What serve, resolve and profile validate refuse of the launch, profile
// show says as a warning line, the key masked, and still exits 0, as it
// says a [bench] table bench would refuse (docs/profiles.md): a key flag
// joined to its key in engine.args was shown with no word, exit 0, where
// the others exit 2 on it.
func TestProfileShowSaysWhatServeRefuses(t *testing.T) {
	const key = "SECRETKEY123456"
	for _, c := range []struct{ name, args, refusal string }{
		{"a key joined to its flag", `["--api-key ` + key + `"]`, `:3: engine argument is a key flag and its value in one: "--api-key ****3456"`},
		{"a flag the launcher owns", `["--port", "9"]`, `:3: engine argument "--port" sets the listen port`},
	} {
		prof := filepath.Join(t.TempDir(), "sec.toml")
		writeFile(t, prof, "[engine]\nname = \"sim\"\nargs = "+c.args+"\n[model]\npath = \"demo-target\"\nquant = \"affine\"\n")
		_, _, refused := runCLI(t, "profile", "validate", "--offline", "--profile", prof)
		code, o, e := runCLI(t, "profile", "show", "--profile", prof)
		want := "warn: serve would refuse this launch: profile " + prof + c.refusal
		if code != 0 || !strings.Contains(o, want) || strings.Contains(o+e, key) {
			t.Errorf("%s: exit %d, want 0 and %q, the key masked:\n%s%s", c.name, code, want, o, e)
		}
		if _, same, _ := strings.Cut(want, "launch: "); !strings.Contains(unwrap(refused), same) {
			t.Errorf("%s: profile validate says otherwise:\n%s", c.name, refused)
		}
	}
	// A launch serve takes gets no such line.
	if code, o, e := runCLI(t, "profile", "show", "--profile", showProfile(t)); code != 0 || strings.Contains(o, "would refuse") {
		t.Errorf("a good profile: exit %d:\n%s%s", code, o, e)
	}
}

// profile show --json carries the warn: and info: lines its text prints,
// as resolve --json and policy explain --json carry theirs ("notices",
// "LEVEL: message"), the key masked: --json dropped them all, exit 0.
func TestProfileShowJSONKeepsItsNotices(t *testing.T) {
	const key = "SECRETKEY123456"
	for _, c := range []struct{ name, text, want string }{
		{"what serve refuses", "[engine]\nname = \"sim\"\n[model]\npath = \"demo-target\"\n[engine.env]\nLLAMA_ARG_PORT = \"19811\"\n", "warn: serve would refuse this launch: profile PROF:6: engine.env sets LLAMA_ARG_PORT=19811"},
		{"a key joined to its flag", "[engine]\nname = \"sim\"\nargs = [\"--api-key " + key + "\"]\n[model]\npath = \"demo-target\"\n", "warn: serve would refuse this launch: profile PROF:3: engine argument is a key flag and its value in one: \"--api-key ****3456\""},
		{"an empty profile", "# nothing\n", "warn: profile PROF is empty"},
		{"bench's options", "[engine]\nname = \"sim\"\n[bench]\nconcurrency = \"4,1\"\n", "warn: bench would refuse its options (serve does not read them): profile PROF:4:"},
		{"none", "[engine]\nname = \"sim\"\n[model]\npath = \"demo-target\"\n", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			prof := filepath.Join(t.TempDir(), "p.toml")
			writeFile(t, prof, c.text)
			code, o, e := runCLI(t, "profile", "show", "--json", "--profile", prof)
			var got struct {
				Notices []string `json:"notices"`
			}
			if err := json.Unmarshal([]byte(o), &got); code != 0 || err != nil || got.Notices == nil {
				t.Fatalf("exit %d, %v, want 0 and a notices list:\n%s%s", code, err, o, e)
			}
			// the lines the text prints, no more and no fewer
			_, text, _ := runCLI(t, "profile", "show", "--profile", prof)
			var lines []string
			for l := range strings.Lines(text) {
				if strings.HasPrefix(l, "warn: ") || strings.HasPrefix(l, "info: ") {
					lines = append(lines, strings.TrimSuffix(l, "\n"))
				}
			}
			if !slices.Equal(lines, got.Notices) && len(lines)+len(got.Notices) > 0 {
				t.Errorf("--json notices %q, the text's lines %q", got.Notices, lines)
			}
			joined := strings.Join(got.Notices, "\n")
			want := strings.ReplaceAll(c.want, "PROF", prof)
			if c.want == "" && len(got.Notices) != 0 || !strings.Contains(joined, want) || strings.Contains(o+e, key) {
				t.Errorf("notices %q, want %q, the key masked", got.Notices, want)
			}
		})
	}
}

// A value a profile gave with an escape or a newline in it is one cell of
// one row: profile show printed them raw.
func TestProfileShowEscapesControls(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "x\x1b[31my")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	prof := filepath.Join(dir, "p.toml")
	writeFile(t, prof, "[engine]\nname = \"sim\"\n[model]\npath = \"a\\u001b[31mred\\nmodel  forged default\"\n")
	code, o, e := runCLI(t, "profile", "show", "--profile", prof)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, e)
	}
	if strings.ContainsRune(o, 0x1b) || strings.Contains(o, "\nmodel  forged") {
		t.Errorf("a control character reached the table:\n%s", o)
	}
	if !strings.Contains(o, `\x1b[31mred\nmodel  forged default"`) {
		t.Errorf("the model row does not show the value escaped:\n%s", o)
	}
}
