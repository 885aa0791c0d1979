package control

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// variants are the ablation's: each rule turned off, each constant moved.
var variants = map[string]func(*Config){
	"baseline":              func(*Config) {},
	"no spread":             func(c *Config) { c.off = map[string]bool{"spread": true} },
	"no payback":            func(c *Config) { c.off = map[string]bool{"payback": true} },
	"no warm-up":            func(c *Config) { c.off = map[string]bool{"warmup": true} },
	"no shared pause":       func(c *Config) { c.off = map[string]bool{"shared": true} },
	"no load hysteresis":    func(c *Config) { c.off = map[string]bool{"hysteresis": true} },
	"no drift test":         func(c *Config) { c.off = map[string]bool{"drift": true} },
	"no trials":             func(c *Config) { c.off = map[string]bool{"trials": true} },
	"no optimistic tail":    func(c *Config) { c.off = map[string]bool{"optimistic": true} },
	"no trial band":         func(c *Config) { c.off = map[string]bool{"band": true} },
	"no stay unmeasured":    func(c *Config) { c.off = map[string]bool{"stayunmeasured": true} },
	"Z 1.0":                 func(c *Config) { c.Z = 1.0 },
	"Z 2.33":                func(c *Config) { c.Z = 2.33 },
	"min cycles 128":        func(c *Config) { c.MinCycles = 128 },
	"min cycles 1024":       func(c *Config) { c.MinCycles = 1024 },
	"payback 3 min":         func(c *Config) { c.Payback = 3 * time.Minute },
	"payback 30 min":        func(c *Config) { c.Payback = 30 * time.Minute },
	"trial band 0.2":        func(c *Config) { c.TrialBand = 0.2 },
	"retry after 10 min":    func(c *Config) { c.RetryAfter = 10 * time.Minute },
	"retry after 2 h":       func(c *Config) { c.RetryAfter = 2 * time.Hour },
	"drift z 3":             func(c *Config) { c.DriftZ = 3 },
	"drift z 8":             func(c *Config) { c.DriftZ = 8 },
	"load window 4":         func(c *Config) { c.LoadWindow = 4 },
	"load window 16":        func(c *Config) { c.LoadWindow = 16 },
	"spread halved":         func(c *Config) { c.Spread1, c.SpreadN = 0.017, 0.028 },
	"spread doubled":        func(c *Config) { c.Spread1, c.SpreadN = 0.068, 0.112 },
	"warm-up 15 s":          func(c *Config) { c.WarmUp = 15 * time.Second },
	"baseline, other seeds": func(*Config) {},
}

// BenchmarkControlAblation runs the matrix for the variants named in
// CONTROL_VARIANTS (comma-separated; all when unset) and prints one line
// per variant: its summary.
func BenchmarkControlAblation(b *testing.B) {
	names := strings.Split(os.Getenv("CONTROL_VARIANTS"), ",")
	if names[0] == "" {
		names = names[:0]
		for n := range variants {
			names = append(names, n)
		}
	}
	for b.Loop() {
		for _, n := range names {
			set, ok := variants[n]
			if !ok {
				b.Fatalf("no variant %q", n)
			}
			var cfg Config
			set(&cfg)
			seed := uint64(1)
			if n == "baseline, other seeds" {
				seed = 500_001
			}
			s := summarize(runMatrix(cfg, seed))
			fmt.Printf("ABLATION\t%s\t%.4f\t%.4f\t%.4f\t%d\t%d\t%.0f\n", n, s.worst, s.median, s.worstBelow, s.judgedBelow97, s.belowDefault, s.switches)
		}
	}
}
