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
	app, err := kong.New(&App{}, kong.PostBuild(settingsHelp))
	if err != nil {
		t.Fatal(err)
	}
	var walk func(n *kong.Node)
	walk = func(n *kong.Node) {
		for _, c := range n.Children {
			walk(c)
		}
		for _, f := range n.Flags {
			if !f.HasDefault || f.PlaceHolder == "" || f.IsBool() || f.Default == "" {
				continue
			}
			if !strings.Contains(f.Help, "default "+f.Default) {
				t.Errorf("%s --%s: help does not say its default %q: %s", n.Path(), f.Name, f.Default, f.Help)
			}
		}
		for _, f := range n.Flags {
			if c := strings.Count(f.Help, "(default") + strings.Count(f.Help, "; default"); c > 1 {
				t.Errorf("%s --%s: help says its default %d times: %s", n.Path(), f.Name, c, f.Help)
			}
		}
	}
	walk(app.Model.Node)
}
