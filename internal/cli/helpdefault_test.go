package cli

import (
	"strings"
	"testing"

	"github.com/alecthomas/kong"
)

// A flag whose default kong does not show (it shows the placeholder, e.g.
// --levels=N,N,...) says its default in its help, once: an operator reading
// `tune --help` learns what an omitted --levels measures.
func TestHelpSaysEveryHiddenDefault(t *testing.T) {
	eachFlag(t, func(n *kong.Node, f *kong.Flag) {
		if f.HasDefault && f.PlaceHolder != "" && !f.IsBool() && f.Default != "" && !strings.Contains(f.Help, "default "+f.Default) {
			t.Errorf("%s --%s: help does not say its default %q: %s", n.Path(), f.Name, f.Default, f.Help)
		}
		if c := strings.Count(f.Help, "(default") + strings.Count(f.Help, "; default"); c > 1 {
			t.Errorf("%s --%s: help says its default %d times: %s", n.Path(), f.Name, c, f.Help)
		}
	})
}

// eachFlag calls fn with every flag of every command of the CLI, as its
// help shows them.
func eachFlag(t *testing.T, fn func(n *kong.Node, f *kong.Flag)) {
	t.Helper()
	app, err := kong.New(&App{}, kong.PostBuild(settingsHelp))
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	var walk func(n *kong.Node)
	walk = func(n *kong.Node) {
		for _, c := range n.Children {
			walk(c)
		}
		for _, f := range n.Flags {
			seen++
			fn(n, f)
		}
	}
	walk(app.Model.Node)
	if seen < 20 {
		t.Fatalf("the walk met %d flags: not the whole CLI", seen)
	}
}

// Every flag that takes a value shows a placeholder of its own (N, T,
// PORT), never one Kong makes from its Go type (--rounds=INT,
// --temperature=FLOAT-64) or its default (--engines=3).
func TestHelpPlaceholders(t *testing.T) {
	eachFlag(t, func(n *kong.Node, f *kong.Flag) {
		if !f.IsBool() && !f.IsCounter() && f.Name != "help" && f.Name != "version" && f.PlaceHolder == "" {
			t.Errorf("%s --%s: no placeholder: help shows --%s=%s", n.Path(), f.Name, f.Name, f.FormatPlaceHolder())
		}
	})
}

// serve's and resolve's --help say how the engine's API key is given: the
// README's first words on keys (--api-key, --api-key-file, LLAMA_API_KEY).
func TestHelpNamesTheAPIKey(t *testing.T) {
	for _, cmd := range []string{"serve", "resolve"} {
		code, o, e := runCLI(t, cmd, "--help")
		o = strings.Join(strings.Fields(o), " ")
		for _, want := range []string{"--api-key KEY", "--api-key-file FILE", "LLAMA_API_KEY", "LLAMA_ARG_API_KEY_FILE"} {
			if code != 0 || !strings.Contains(o, want) {
				t.Errorf("%s --help: exit %d, no %q:\n%s%s", cmd, code, want, o, e)
			}
		}
	}
}

// tune --help names both places of the tuned layer (tunedLayer): with
// XDG_CONFIG_HOME unset, as on most machines, it named only
// $XDG_CONFIG_HOME/speclaunch/tuned.toml.
func TestTuneHelpNamesTheTunedLayer(t *testing.T) {
	code, o, e := runCLI(t, "tune", "--help")
	o = strings.Join(strings.Fields(o), " ")
	for _, want := range []string{"$XDG_CONFIG_HOME/speclaunch/tuned.toml", "~/.config/speclaunch/tuned.toml", "--policy FILE"} {
		if code != 0 || !strings.Contains(o, want) {
			t.Errorf("tune --help: exit %d, no %q:\n%s%s", code, want, o, e)
		}
	}
}
