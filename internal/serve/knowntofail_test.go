package serve

import (
	"bytes"
	"errors"
	"github.com/speclaunch/speclaunch/internal/checkpoint"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/engine"
	"github.com/speclaunch/speclaunch/internal/config"
	"github.com/speclaunch/speclaunch/internal/exitcode"
	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/plan"
	"github.com/speclaunch/speclaunch/internal/proxy"
	"github.com/speclaunch/speclaunch/internal/server"
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

// ggufModel writes a file llama-server's model checks take (checkModelPath:
// a GGUF file), for a plan whose model must be there: the GGUF magic and
// version 3.
func ggufModel(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "t.gguf")
	if err := os.WriteFile(p, checkpoint.HeaderOnlyGGUF(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// A switch to engine arguments holding a flag the engine is known to
// refuse is refused before anything stops, naming where the flag was
// given, where the switch would stop the serving engine first (drain, or
// direct: no proxy); in overlap it is tried with a warning, the serving
// engine serving on if the start fails (the flag list is pinned to
// captured llama.cpp trees: a newer llama-server may take it). One the
// serving engine already runs (same binary) is neither. Before, overlap
// refused it too, and the only fix offered was a restart.
func TestKnownToFail(t *testing.T) {
	const bin = "/opt/llama/llama-server"
	serving := llamaPlan(bin, []string{"-ngl", "99"}, nil)
	bogus := llamaPlan(bin, []string{"-ngl", "99", "--bogus-flag"}, nil, "--bogus-flag")
	for _, tc := range []struct {
		name     string
		mode     key.Switch
		cur, np  *plan.Plan
		want     string // the refusal; "" = none
		warn     string // the warning; "" = none
		notNamed string
	}{
		{"no unknown flag", key.SwitchDrain, serving, llamaPlan(bin, []string{"-ngl", "80"}, nil), "", "", ""},
		{"no unknown flag, overlap", key.SwitchOverlap, serving, llamaPlan(bin, []string{"-ngl", "80"}, nil), "", "", ""},
		{"a new unknown flag in the profile, drain", key.SwitchDrain, serving, bogus,
			"profile p.toml:3: engine argument --bogus-flag is not a flag llama-server lists in its --help; llama-server refuses to start on an unknown flag; the serving engine does not run it, and a switch in drain mode stops it before the new engine starts", "", ""},
		{"a new unknown flag in the profile, direct", key.SwitchDirect, serving, bogus,
			"profile p.toml:3: engine argument --bogus-flag is not a flag llama-server lists in its --help; llama-server refuses to start on an unknown flag; the serving engine does not run it, and without the proxy (server.proxy = false) a switch stops it", "", `server.switch = "overlap"`},
		{"a new unknown flag in the profile, overlap", key.SwitchOverlap, serving, bogus,
			"", "profile p.toml:3: engine argument --bogus-flag is not a flag llama-server lists in its --help; llama-server refuses to start on an unknown flag; the serving engine does not run it: starting the new engine beside it all the same (switch mode overlap: if the start fails, the serving engine serves on)", ""},
		{"a new unknown flag, nothing serving", key.SwitchAlone, serving, bogus, "", "switch mode alone", ""},
		{"a new unknown flag, auto unresolved: as drain", key.SwitchAuto, serving, bogus, "engine argument --bogus-flag", "", ""},
		{"two new unknown flags, overlap", key.SwitchOverlap, serving, llamaPlan(bin, []string{"--bogus-flag", "--other-flag"}, nil, "--bogus-flag", "--other-flag"),
			"", "engine argument --bogus-flag is not a flag llama-server lists in its --help; llama-server refuses to start on an unknown flag (not listed either: --other-flag)", ""},
		{"beside typed arguments: the profile is named", key.SwitchDrain, llamaPlan(bin, []string{"-ngl", "99"}, []string{"--jinja"}),
			llamaPlan(bin, []string{"-ngl", "99", "--bogus-flag"}, []string{"--jinja"}, "--bogus-flag"), "profile p.toml:3: engine argument --bogus-flag", "", "typed"},
		{"the serving engine runs it", key.SwitchDrain, llamaPlan(bin, []string{"--newer-flag"}, nil, "--newer-flag"), llamaPlan(bin, []string{"--newer-flag", "-ngl", "9"}, nil, "--newer-flag"), "", "", ""},
		{"the serving engine runs it, overlap", key.SwitchOverlap, llamaPlan(bin, []string{"--newer-flag"}, nil, "--newer-flag"), llamaPlan(bin, []string{"--newer-flag", "-ngl", "9"}, nil, "--newer-flag"), "", "", ""},
		{"the serving engine runs one, the edit adds another", key.SwitchDrain, llamaPlan(bin, []string{"--newer-flag"}, nil, "--newer-flag"),
			llamaPlan(bin, []string{"--newer-flag", "--bogus-flag"}, nil, "--newer-flag", "--bogus-flag"), "engine argument --bogus-flag", "", "--newer-flag is not"},
		{"another binary: what the serving one takes proves nothing", key.SwitchDrain, llamaPlan(bin, []string{"--newer-flag"}, nil, "--newer-flag"),
			llamaPlan("/opt/old/llama-server", []string{"--newer-flag"}, nil, "--newer-flag"), "engine argument --newer-flag", "", ""},
		{"the flag typed at the start: named as typed", key.SwitchDrain, llamaPlan("/other", []string{"-ngl", "1"}, []string{"--typed-flag"}),
			llamaPlan(bin, []string{"-ngl", "1"}, []string{"--typed-flag"}, "--typed-flag"), "engine arguments (llama-server flags as typed, and after --): engine argument --typed-flag", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			warn, err := knownToFail(tc.cur, tc.np, tc.mode)
			if tc.want == "" && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "remove the flag or fix its spelling in engine.args") || !errors.As(err, new(*exitcode.BadInput))) {
				t.Fatalf("err = %v, want bad input holding %q and the fix", err, tc.want)
			}
			if tc.mode == key.SwitchDrain && err != nil && !strings.Contains(err.Error(), `set server.switch = "overlap"`) {
				t.Errorf("err = %v, does not offer overlap", err)
			}
			if tc.warn == "" && warn != "" || !strings.Contains(warn, tc.warn) {
				t.Errorf("warning %q, want %q", warn, tc.warn)
			}
			if said := warn + errString(err); tc.notNamed != "" && strings.Contains(said, tc.notNamed) {
				t.Errorf("said %q, names %q", said, tc.notNamed)
			}
		})
	}
}

// Only overlap, and a switch with nothing serving, leave the serving
// engine up while the new one starts.
func TestStopsFirst(t *testing.T) {
	for mode, want := range map[key.Switch]bool{
		key.SwitchOverlap: false, key.SwitchAlone: false,
		key.SwitchDrain: true, key.SwitchDirect: true, key.SwitchAuto: true,
	} {
		if got := stopsFirst(mode); got != want {
			t.Errorf("stopsFirst(%s) = %v, want %v", mode, got, want)
		}
	}
}

// flagLoad is a reading of the files whose plan is fixed.
type flagLoad struct{ p *plan.Plan }

func (l flagLoad) Files() []string                        { return nil }
func (l flagLoad) Settings() config.Settings              { return l.p.Settings }
func (l flagLoad) Build(plan.Options) (*plan.Plan, error) { return l.p, nil }
func (flagLoad) LogNotices(*slog.Logger)                  {}

type flagLoader struct{ l flagLoad }

func (f flagLoader) Load() (Load, error) { return f.l, nil }

// A reload that adds a flag the engine is known to refuse is passed on to
// submit, which judges it where the switch mode is known: where the switch
// would stop the serving engine first (drain; direct, without the proxy)
// it is refused before anything stops or reaches the runtime (a nil one
// here), logged and replied, naming the file:line and the flag. Before,
// the reload refused it whatever the mode, overlap included.
func TestReloadRejectsAFlagTheEngineRefuses(t *testing.T) {
	bin, err := os.Executable() // a binary that runs
	if err != nil {
		t.Fatal(err)
	}
	cur := llamaPlan(bin, []string{"-ngl", "99"}, nil)
	np := llamaPlan(bin, []string{"-ngl", "99", "--bogus-flag"}, nil, "--bogus-flag")
	np.Settings.Model.Value = ggufModel(t)
	for _, tc := range []struct {
		name string
		mode key.Switch // server.switch
		px   *proxy.Proxy
	}{
		{"drain", key.SwitchDrain, proxy.New(proxy.Options{})},
		{"auto, without the proxy", key.SwitchAuto, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			np.Settings.Switch.Value = tc.mode
			var log bytes.Buffer
			sv := &launcher{c: Config{Loader: flagLoader{flagLoad{np}}}, px: tc.px, st: newServeStatus(&plan.Plan{}), log: slog.New(slog.NewTextHandler(&log, nil))}
			got, _, changed, err := sv.reload(cur, watch.Change{Path: "p.toml", Reason: "write"})
			if err != nil || got != np || !changed {
				t.Fatalf("reload: plan %v, changed %v, err %v; want it passed on", got != nil, changed, err)
			}
			reply := make(chan error, 1)
			if err := sv.submit(server.KindReload, "reload: p.toml", cur, np, nil, reply); err == nil || <-reply != err {
				t.Fatalf("submit: %v; want it refused and replied", err)
			}
			if l := log.String(); !strings.Contains(l, "new settings cannot start; the engine keeps running with the previous ones") || !strings.Contains(l, "p.toml:3") || !strings.Contains(l, "--bogus-flag") {
				t.Errorf("log:\n%s", l)
			}
		})
	}
}

// An adaptive or follow switch builds on the files on disk; where they
// add a flag the engine is known to refuse and the serving engine does
// not run, it builds on the settings in force in every mode, as for any
// edit that cannot start: a reload tries such a flag in overlap, and
// once its start failed the edit stays on disk, where every width switch
// built on it would fail the same way.
func TestRebuildNeverStartsAnUnprovenFlag(t *testing.T) {
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cur := llamaPlan(bin, []string{"-ngl", "99"}, nil)
	cur.Settings.Model.Value = ggufModel(t)
	disk := llamaPlan(bin, []string{"-ngl", "99", "--bogus-flag"}, nil, "--bogus-flag")
	disk.Settings.Model.Value = cur.Settings.Model.Value
	for _, tc := range []struct {
		mode key.Switch
		want *plan.Plan
	}{
		{key.SwitchOverlap, cur},
		{key.SwitchDrain, cur},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			cur.Settings.Switch.Value, disk.Settings.Switch.Value = tc.mode, tc.mode
			sv := &launcher{c: Config{Loader: flagLoader{flagLoad{disk}}}, px: proxy.New(proxy.Options{}), force: inForce{plan: cur, load: flagLoad{cur}}, st: newServeStatus(cur), log: slog.New(slog.DiscardHandler)}
			got, _, err := sv.rebuild(plan.Options{}, "adaptive switch")
			if err != nil || got != tc.want {
				t.Errorf("rebuild: the disk's plan %v, err %v; want the settings in force", got == disk, err)
			}
		})
	}
}
