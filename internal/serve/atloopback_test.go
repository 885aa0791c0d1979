package serve

import (
	"slices"
	"testing"

	"github.com/speclaunch/speclaunch/engine"
	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/plan"
	"github.com/speclaunch/speclaunch/internal/width"
)

// An engine behind the proxy starts on the plan's command with the
// loopback address filled in: the command is not built again (the plan
// has no adapter here to build it with), and the plan in force keeps its
// public command.
func TestAtLoopbackFillsThePlansCommand(t *testing.T) {
	a, err := engine.For(key.Sim)
	if err != nil {
		t.Fatal(err)
	}
	l, err := a.Command(engine.Spec{Model: "t", Draft: "d", Host: "0.0.0.0", Port: 8080}, width.Resolution{Width: 4, Source: width.Measured}, key.DFlash, nil, engine.Caps{Self: "/bin/speclaunch"})
	if err != nil {
		t.Fatal(err)
	}
	p := &plan.Plan{Launch: l} // no Adapter: a rebuild would panic
	public := slices.Clone(l.Argv)
	ep, err := atLoopback(p, 41234)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/bin/speclaunch", "__sim", "-m", "t", "--model-draft", "d", "--draft-kind", "dflash", "--draft-block-size", "4", "--host", "127.0.0.1", "--port", "41234"}
	if !slices.Equal(ep.Launch.Argv, want) || ep.Launch.BaseURL != "http://127.0.0.1:41234" {
		t.Errorf("engine command %q at %s, want %q at http://127.0.0.1:41234", ep.Launch.Argv, ep.Launch.BaseURL, want)
	}
	if !slices.Equal(p.Launch.Argv, public) || p.Launch.BaseURL != "http://127.0.0.1:8080" {
		t.Errorf("the plan's own command changed: %q at %s", p.Launch.Argv, p.Launch.BaseURL)
	}
}
