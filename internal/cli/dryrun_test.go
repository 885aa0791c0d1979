package cli

import (
	"strings"
	"testing"
)

// A dry run behind the proxy prints the engine's command as serve will
// start it: the plan's one command with the loopback listen address
// (engine.Launch.ArgvAt), the public address nowhere in it; proxy off, the
// command as built.
func TestDryRunCommandListensWhereServeStartsIt(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	for _, c := range []struct {
		proxy, want string
	}{
		{"--proxy=true", "--host 127.0.0.1 --port PORT"},
		{"--proxy=false", "--host 0.0.0.0 --port 18999"},
	} {
		code, o, e := runCLI(t, "serve", "--dry-run", "--profile", "../../profiles/demo.toml", "--host", "0.0.0.0", "--port", "18999", c.proxy)
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s%s", c.proxy, code, o, e)
		}
		_, cmd, _ := strings.Cut(o, "command:\n")
		cmd, _, _ = strings.Cut(cmd, "\n")
		if !strings.Contains(cmd, c.want) || strings.Count(cmd, "--port") != 1 {
			t.Errorf("%s: the command line is %q, want %q in it", c.proxy, cmd, c.want)
		}
	}
}
