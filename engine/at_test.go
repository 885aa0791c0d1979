package engine

import (
	"strings"
	"testing"
)

// At fills the listen address of a command built once: what it gives is
// what building the command again at that address gives (serve's engine
// behind the proxy, on a loopback port picked at start, before At
// rebuilt the command from the settings at each start).
func TestAtIsTheCommandBuiltAtThatAddress(t *testing.T) {
	for _, tc := range append(cmdCases(), pyCmdCases(t)...) {
		t.Run(tc.golden, func(t *testing.T) {
			a, err := For(tc.engine)
			if err != nil {
				t.Fatal(err)
			}
			public := tc.s
			public.Host, public.Port = "0.0.0.0", 8080
			l, err := a.Command(public, tc.r, tc.kind, tc.environ, tc.caps)
			if err != nil {
				t.Fatal(err)
			}
			loop := tc.s
			loop.Host, loop.Port = "127.0.0.1", 41234
			want, err := a.Command(loop, tc.r, tc.kind, tc.environ, tc.caps)
			if err != nil {
				t.Fatal(err)
			}
			got, err := l.At("127.0.0.1", 41234)
			if err != nil {
				t.Fatal(err)
			}
			if render(got) != render(want) {
				t.Errorf("At differs from the command built at that address:\n--- At\n%s--- built\n%s", render(got), render(want))
			}
			if render(l) == render(got) || !strings.Contains(render(l), "0.0.0.0") {
				t.Error("At changed the command it was called on, or the public command lost its address")
			}
		})
	}
}

func TestAtRefuses(t *testing.T) {
	if _, err := (Launch{Argv: []string{"engine", "--port", "1"}}).At("127.0.0.1", 2); err == nil {
		t.Error("a command built without a listen slot was bound")
	}
	l, err := mlxcelAdapter{}.Command(settings("", ""), off, "", baseEnv, Caps{})
	if err != nil {
		t.Fatal(err)
	}
	for _, port := range []int{0, -1, 65536} {
		if _, err := l.At("127.0.0.1", port); err == nil {
			t.Errorf("port %d was bound", port)
		}
	}
	argv, ok := l.ArgvAt("127.0.0.1", "PORT")
	if !ok || strings.Join(argv, " ") != "mlxcel-server -m /models/target.gguf --host 127.0.0.1 --port PORT" {
		t.Errorf("ArgvAt = %q, %v", argv, ok)
	}
}
