package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/config"
)

// Help spells out each flag's environment names. They are written in the
// struct tags (Kong's ${var} interpolation cost ~7 ms per start); this test
// keeps them equal to what config.Load actually reads.
func TestHelpNamesEveryEnvVar(t *testing.T) {
	for _, cmd := range []string{"resolve", "serve", "bench"} {
		var out bytes.Buffer
		MainContext(context.Background(), []string{cmd, "--help"}, policyTOML, &out, &out, nil)
		help := strings.Join(strings.Fields(out.String()), " ")
		for name, envs := range config.Envs {
			switch name {
			case "ready-timeout", "stop-timeout", "restart", "strict-width", "probe", "watch", "raw-engine-output",
				"proxy", "switch", "drain-timeout", "hold-timeout", "queue-size", "adapt", "adapt-max-width", "adapt-explore", "adapt-margin", "adapt-min-cycles", "adapt-window", "adapt-trials":
				if cmd != "serve" {
					continue
				}
			}
			for _, e := range envs {
				if !strings.Contains(help, "$"+e) {
					t.Errorf("%s --help does not name $%s (setting %s)", cmd, e, name)
				}
			}
		}
	}
}
