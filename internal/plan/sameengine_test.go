package plan

import (
	"testing"

	"github.com/speclaunch/speclaunch/engine"
	"github.com/speclaunch/speclaunch/internal/config"
	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/width"
)

// Behind the proxy a new public address needs no new engine (a port edit
// restarted it, reloading the weights); without the proxy the engine
// listens there itself.
func TestSameEngine(t *testing.T) {
	a, err := engine.For(key.Sim)
	if err != nil {
		t.Fatal(err)
	}
	mk := func(proxy bool, host string, port, w int) *Plan {
		l, err := a.Command(engine.Spec{Model: "t", Draft: "d", Host: host, Port: port}, width.Resolution{Width: w, Source: width.Measured}, key.DFlash, nil, engine.Caps{Self: "/bin/speclaunch"})
		if err != nil {
			t.Fatal(err)
		}
		p := &Plan{Launch: l}
		p.Settings.Proxy = config.Field[bool]{Value: proxy}
		return p
	}
	for _, c := range []struct {
		name string
		a, b *Plan
		want bool
	}{
		{"proxy, another port", mk(true, "127.0.0.1", 8080, 4), mk(true, "127.0.0.1", 9090, 4), true},
		{"proxy, another host", mk(true, "127.0.0.1", 8080, 4), mk(true, "0.0.0.0", 8080, 4), true},
		{"proxy, another width", mk(true, "127.0.0.1", 8080, 4), mk(true, "127.0.0.1", 8080, 6), false},
		{"direct, another port", mk(false, "127.0.0.1", 8080, 4), mk(false, "127.0.0.1", 9090, 4), false},
		{"direct, the same", mk(false, "127.0.0.1", 8080, 4), mk(false, "127.0.0.1", 8080, 4), true},
	} {
		if got := SameEngine(c.a, c.b); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
