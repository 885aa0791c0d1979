package serve

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/engine"
	"github.com/speclaunch/speclaunch/internal/config"
	"github.com/speclaunch/speclaunch/internal/exitcode"
	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/plan"
	"github.com/speclaunch/speclaunch/internal/watch"
)

// llamaPlan is a llama.cpp plan whose engine arguments are the profile's
// args (p.toml:3) then typed ones, with the flags among them that
// llama-server's --help lacks.
func llamaPlan(bin string, prof, typed []string, unknown ...string) *plan.Plan {
	p := &plan.Plan{}
	s := &p.Settings
	s.Engine.Value, s.Model.Value = key.LlamaCpp, "t.gguf"
	p.Facts.BinaryPath = bin
	profSrc := config.Source{Origin: config.Profile, Name: "p.toml:3"}
	s.EngineArgs = config.Field[[]string]{Value: prof, Src: profSrc}
	if len(typed) > 0 {
		s.ProfileArgs = s.EngineArgs
		s.EngineArgs = config.Field[[]string]{Value: append(append([]string(nil), prof...), typed...), Src: config.Source{Origin: config.Flag, Name: "engine arguments (llama-server flags as typed, and after --)"}}
	}
	for _, u := range unknown {
		p.Launch.Unknown = append(p.Launch.Unknown, engine.UnknownFlag{Name: u, Count: 1})
	}
	p.Launch.Argv = append([]string{bin, "-m", "t.gguf"}, s.EngineArgs.Value...)
	return p
}

// A switch to engine arguments holding a flag the engine is known to
// refuse is refused before anything stops, naming where the flag was
// given; one the serving engine already runs (a build newer than the list
// speclaunch holds) is not.
func TestKnownToFail(t *testing.T) {
	const bin = "/opt/llama/llama-server"
	serving := llamaPlan(bin, []string{"-ngl", "99"}, nil)
	for _, tc := range []struct {
		name     string
		cur, np  *plan.Plan
		want     string // "" = no refusal
		notNamed string
	}{
		{"no unknown flag", serving, llamaPlan(bin, []string{"-ngl", "80"}, nil), "", ""},
		{"a new unknown flag in the profile", serving, llamaPlan(bin, []string{"-ngl", "99", "--bogus-flag"}, nil, "--bogus-flag"), "profile p.toml:3: engine argument --bogus-flag is not a flag llama-server lists", ""},
		{"beside typed arguments: the profile is named", llamaPlan(bin, []string{"-ngl", "99"}, []string{"--jinja"}),
			llamaPlan(bin, []string{"-ngl", "99", "--bogus-flag"}, []string{"--jinja"}, "--bogus-flag"), "profile p.toml:3: engine argument --bogus-flag", "typed"},
		{"the serving engine runs it", llamaPlan(bin, []string{"--newer-flag"}, nil, "--newer-flag"), llamaPlan(bin, []string{"--newer-flag", "-ngl", "9"}, nil, "--newer-flag"), "", ""},
		{"the serving engine runs one, the edit adds another", llamaPlan(bin, []string{"--newer-flag"}, nil, "--newer-flag"),
			llamaPlan(bin, []string{"--newer-flag", "--bogus-flag"}, nil, "--newer-flag", "--bogus-flag"), "engine argument --bogus-flag", "--newer-flag is not"},
		{"another binary: what the serving one takes proves nothing", llamaPlan(bin, []string{"--newer-flag"}, nil, "--newer-flag"),
			llamaPlan("/opt/old/llama-server", []string{"--newer-flag"}, nil, "--newer-flag"), "engine argument --newer-flag", ""},
		{"the flag typed at the start: named as typed", llamaPlan("/other", []string{"-ngl", "1"}, []string{"--typed-flag"}),
			llamaPlan(bin, []string{"-ngl", "1"}, []string{"--typed-flag"}, "--typed-flag"), "engine arguments (llama-server flags as typed, and after --): engine argument --typed-flag", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := knownToFail(tc.cur, tc.np)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "remove the flag or fix its spelling in engine.args") || !errors.As(err, new(*exitcode.BadInput)) {
				t.Fatalf("err = %v, want bad input holding %q and the fix", err, tc.want)
			}
			if tc.notNamed != "" && strings.Contains(err.Error(), tc.notNamed) {
				t.Errorf("err = %v, names %q", err, tc.notNamed)
			}
		})
	}
}

// flagLoad is a reading of the files whose plan is fixed.
type flagLoad struct{ p *plan.Plan }

func (l flagLoad) Files() []string                        { return nil }
func (l flagLoad) Settings() config.Settings              { return l.p.Settings }
func (l flagLoad) Build(plan.Options) (*plan.Plan, error) { return l.p, nil }

type flagLoader struct{ l flagLoad }

func (f flagLoader) Load() (Load, error) { return f.l, nil }

// A reload that adds a flag the engine is known to refuse is rejected
// before it reaches the runtime, whatever the switch mode: the serving
// engine is never stopped for it (in drain mode it was, and the previous
// settings were started again after the new engine failed).
func TestReloadRejectsAFlagTheEngineRefuses(t *testing.T) {
	bin, err := os.Executable() // a binary that runs, and a file that is there for the model
	if err != nil {
		t.Fatal(err)
	}
	cur := llamaPlan(bin, []string{"-ngl", "99"}, nil)
	np := llamaPlan(bin, []string{"-ngl", "99", "--bogus-flag"}, nil, "--bogus-flag")
	np.Settings.Model.Value = bin
	var log bytes.Buffer
	sv := &launcher{c: Config{Loader: flagLoader{flagLoad{np}}}, st: newServeStatus(&plan.Plan{}), log: slog.New(slog.NewTextHandler(&log, nil))}
	got, _, changed, err := sv.reload(cur, watch.Change{Path: "p.toml", Reason: "write"})
	if err == nil || got != nil || changed {
		t.Fatalf("reload: plan %v, changed %v, err %v; want it rejected", got != nil, changed, err)
	}
	if l := log.String(); !strings.Contains(l, "reload rejected; the engine keeps running with the previous settings") || !strings.Contains(l, "p.toml:3") || !strings.Contains(l, "--bogus-flag") {
		t.Errorf("log:\n%s", l)
	}
}
