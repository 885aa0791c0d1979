package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/simcost"
)

// The mlxcel adapter's command line (engine/testdata/mlxcel-dflash.golden) must parse, with
// the engine flags the sim does not model ignored.
func TestParseArgsMLXCelCommandLine(t *testing.T) {
	cfg, err := ParseArgs(strings.Fields(
		"-m /m/qwen3.5-4b-4bit --model-draft /m/qwen3.5-4b-dflash --draft-kind dflash --draft-block-size 4 " +
			"--host 0.0.0.0 --port 9001 --max-batch-size 1 --ignore-eos --metrics --props --parallel -1 -c=4096 " +
			"--sim-warmup 250ms --sim-seed 7 --sim-decline --sim-crash-after 3s --sim-exit-code 9 --sim-drift 0.01 " +
			"--sim-classic-ms 20 --sim-verify-ms 2=10,3=12.5 --sim-accept 2=0.5 --sim-noise 0 --sim-health-503=true " +
			"--sim-draft-ms 1 --sim-draft-token-ms 0.5 --sim-prompt-ms 0.1"))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Model: "/m/qwen3.5-4b-4bit", DraftModel: "/m/qwen3.5-4b-dflash", DraftKind: "dflash", BlockSize: 4,
		Host: "0.0.0.0", Port: 9001, Warmup: 250 * time.Millisecond, Seed: 7, Decline: true, CrashAfter: 3 * time.Second,
		ExitCode: 9, Drift: 0.01, Health503: true}
	got := cfg
	got.Cost = CostModel{}
	want.Cost = CostModel{}
	if got.Model != want.Model || got.DraftModel != want.DraftModel || got.DraftKind != want.DraftKind ||
		got.BlockSize != want.BlockSize || got.Host != want.Host || got.Port != want.Port || got.Warmup != want.Warmup ||
		got.Seed != want.Seed || got.Decline != want.Decline || got.CrashAfter != want.CrashAfter ||
		got.ExitCode != want.ExitCode || got.Drift != want.Drift || got.Health503 != want.Health503 || got.FailStart {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	c := cfg.Cost
	if c.ClassicMS != 20 || c.Verify[2] != 10 || c.Verify[3] != 12.5 || c.Verify[16] != 69 || c.Noise != 0 ||
		c.DraftMS != 1 || c.DraftTokenMS != 0.5 || c.PromptTokenMS != 0.1 {
		t.Errorf("cost %+v", c)
	}
	if c.Emitted[2] != 1.5 || c.Emitted[3] != 2.24 { // acceptance 0.5 at W=2 → 1.5 emitted; 3 keeps the default
		t.Errorf("emitted %v", c.Emitted)
	}
}

func TestParseArgsDefaultsAndSpellings(t *testing.T) {
	for _, spelling := range []string{"--model-draft", "--draft-model", "-md", "--spec-draft-model"} {
		cfg, err := ParseArgs([]string{"--model=/m/t", spelling, "/m/d"})
		if err != nil {
			t.Fatalf("%s: %v", spelling, err)
		}
		if cfg.DraftModel != "/m/d" {
			t.Errorf("%s: draft %q", spelling, cfg.DraftModel)
		}
		if cfg.Host != "127.0.0.1" || cfg.Port != 8080 || cfg.Warmup != time.Second || cfg.ExitCode != 1 ||
			cfg.Cost.ClassicMS != DefaultCostModel().ClassicMS || cfg.Cost.Noise != 0.01 {
			t.Errorf("defaults: %+v", cfg)
		}
	}
	// A known boolean engine flag must not swallow the next flag.
	cfg, err := ParseArgs([]string{"--ignore-eos", "--port", "1234", "-m", "x", "--no-warmup", "--some-new-flag", "v"})
	if err != nil || cfg.Port != 1234 || cfg.Model != "x" {
		t.Errorf("got %+v, %v", cfg, err)
	}
}

func TestParseArgsErrorsNameTheFlag(t *testing.T) {
	cases := []struct{ args, want string }{
		{"--port 1", "-m/--model"},
		{"-m x --draft-block-size 1", "--draft-block-size"},
		{"-m x --draft-block-size four", "--draft-block-size"},
		{"-m x --draft-kind eagle", "--draft-kind"},
		{"-m x --port 70000", "--port"},
		{"-m x --sim-warmup 2", "--sim-warmup"},
		{"-m x --sim-warmup -1s", "--sim-warmup"},
		{"-m x --sim-verify-ms 2=abc", "--sim-verify-ms"},
		{"-m x --sim-verify-ms 1=3", "--sim-verify-ms"},
		{"-m x --sim-verify-ms 2=3,2=4", "--sim-verify-ms"},
		{"-m x --sim-verify-ms 23", "--sim-verify-ms"},
		{"-m x --sim-accept 4=1.5", "--sim-accept"},
		{"-m x --sim-noise NaN", "--sim-noise"},
		{"-m x --sim-classic-ms 0", "--sim-classic-ms"},
		{"-m x --sim-exit-code 300", "--sim-exit-code"},
		{"-m x --sim-seed 1.5", "--sim-seed"},
		{"-m x --sim-decline=maybe", "--sim-decline"},
		{"-m x --sim-typo 1", "--sim-typo"},
		{"-m x --port", "--port"},
		{"-m x stray", "stray"},
	}
	for _, c := range cases {
		_, err := ParseArgs(strings.Fields(c.args))
		if err == nil {
			t.Errorf("%q: no error", c.args)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %q does not name %s", c.args, err, c.want)
		}
	}
}

func TestResolveBlockSize(t *testing.T) {
	cases := []struct {
		cfg      Config
		w        int
		from     string
		explicit bool
	}{
		{Config{Model: "t"}, 0, "", false},
		{Config{Model: "t", DraftModel: "d"}, 16, reasonKindDefault, false},
		{Config{Model: "t", DraftModel: "d", DraftKind: "mtp"}, 4, reasonKindDefault, true},
		{Config{Model: "t", DraftModel: "d", DraftKind: "dflash", BlockSize: 3}, 3, reasonOverride, true},
		{Config{Model: "t", BlockSize: 3}, 0, "", false}, // a width without a drafter drafts nothing
	}
	for _, c := range cases {
		w, from := c.cfg.ResolveBlockSize()
		if w != c.w || from != c.from {
			t.Errorf("%+v: got %d %q, want %d %q", c.cfg, w, from, c.w, c.from)
		}
	}
}

// FuzzParseArgs: any argv parses or errors, never panics, and a parsed one
// names a model and a valid width.
func FuzzParseArgs(f *testing.F) {
	f.Add("-m x --draft-block-size 4 --sim-verify-ms 2=19,3=24.5")
	f.Add("--model=x -md d --port -1 --sim-accept 2=0.7")
	f.Fuzz(func(t *testing.T, s string) {
		cfg, err := ParseArgs(strings.Fields(s))
		if err != nil {
			return
		}
		if cfg.Model == "" || (cfg.BlockSize != 0 && cfg.BlockSize < 2) {
			t.Errorf("accepted %q as %+v", s, cfg)
		}
		if verr := cfg.validate(); verr != nil {
			t.Errorf("ParseArgs accepted %q but validate says %v", s, verr)
		}
	})
}

// CostSpread names the spread of the model the arguments pick, without
// reading a file: a --sim-record's model is in a file, so it is unknown.
func TestCostSpread(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		single float64
		ok     bool
	}{
		{nil, 0, true},
		{[]string{"-np", "4"}, 0, true},
		{[]string{"--sim-cost", "demo-load", "-np", "4"}, simcost.H200Spread.Single, true},
		{[]string{"--sim-cost=demo-load"}, simcost.H200Spread.Single, true},
		{[]string{"--sim-cost", "demo-load", "--sim-cost", "gb10"}, 0, true},
		{[]string{"--sim-record", "/dev/stdin"}, 0, false},
		{[]string{"--sim-cost", "nope"}, 0, false},
		{[]string{"--sim-cost"}, 0, false},
	} {
		sp, ok := CostSpread(tc.args)
		if ok != tc.ok || sp.Single != tc.single {
			t.Errorf("%q: %v %v, want %v %v", tc.args, sp.Single, ok, tc.single, tc.ok)
		}
	}
}
