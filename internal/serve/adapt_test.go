package serve

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/speclaunch/speclaunch/engine"
	"github.com/speclaunch/speclaunch/internal/adapt"
	"github.com/speclaunch/speclaunch/internal/config"
	"github.com/speclaunch/speclaunch/internal/control"
	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/metrics"
	"github.com/speclaunch/speclaunch/internal/plan"
	"github.com/speclaunch/speclaunch/internal/policy"
	"github.com/speclaunch/speclaunch/internal/proxy"
	"github.com/speclaunch/speclaunch/internal/schedule"
	"github.com/speclaunch/speclaunch/internal/server"
	"github.com/speclaunch/speclaunch/internal/watch"
	"github.com/speclaunch/speclaunch/internal/width"
)

// simProfile is a profile of the sim engine (as cli's tests write it).
const simProfile = `[engine]
name = "sim"
args = ["--sim-warmup", "100ms"]
[model]
path = "target"
quant = "affine"
[draft]
model = "drafter"
kind = "dflash"
[server]
port = 18080
[gpu]
capability = "12.1"
[serve]
stop_timeout = "5s"
`

// profileLoader reads one profile, with no policy (the width comes from
// the engine's default or the adaptive loop): cli's loader, less the
// environment and the policy files.
type profileLoader struct{ path string }

func (pl profileLoader) Load() (Load, error) {
	s, _, _, err := config.Load(config.Input{Ctx: context.Background(), Flags: map[string]string{"profile": pl.path}, Getenv: func(string) string { return "" }})
	if err != nil {
		return nil, err
	}
	return profileLoad{pl.path, s}, nil
}

type profileLoad struct {
	path string
	s    config.Settings
}

func (l profileLoad) Files() []string { return []string{l.path} }

func (profileLoad) LogNotices(*slog.Logger) {}

func (l profileLoad) Settings() config.Settings { return l.s }

func (l profileLoad) Build(o plan.Options) (*plan.Plan, error) {
	return plan.Build(context.Background(), l.s, policy.Merge(), plan.RealDeps(), o)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The probed curve's cache key names the engine build; an engine whose
// version is unknown gets none (serve then does not cache its curve).
func TestEngineIdentity(t *testing.T) {
	for _, c := range []struct {
		engine          key.Engine
		version, commit string
		want            string
	}{
		{key.LlamaCpp, "9749", "d32676d", "llama.cpp 9749 (d32676d)"},
		{key.LlamaCpp, "9749", "", "llama.cpp 9749"},
		{key.LlamaCpp, "", "d32676d", "llama.cpp d32676d"},
		{key.LlamaCpp, "", "", ""},
		{key.Sim, "", "", "sim"},
	} {
		p := &plan.Plan{Settings: config.Settings{Engine: config.Field[key.Engine]{Value: c.engine}}}
		p.Facts.Caps = engine.Caps{Version: c.version, Commit: c.commit}
		if got := engineIdentity(p); got != c.want {
			t.Errorf("%s %q %q: %q, want %q", c.engine, c.version, c.commit, got, c.want)
		}
	}
}

// adapt.trials reaches the controller: 0 turns its trials off; unset or
// a count leaves them on (the controller bounds them by the noise, not by
// a count).
func TestControlConfigTrials(t *testing.T) {
	for _, c := range []struct {
		env string
		off bool
	}{{"", false}, {"0", true}, {"1", false}, {"8", false}} {
		s, _, _, err := config.Load(config.Input{Getenv: func(k string) string {
			if k == "MLXCEL_ADAPT_TRIALS" {
				return c.env
			}
			return ""
		}})
		if err != nil {
			t.Fatal(err)
		}
		p := &plan.Plan{Settings: s}
		p.Resolution.Width = 4
		if got := controlConfig(p).Off["trials"]; got != c.off {
			t.Errorf("MLXCEL_ADAPT_TRIALS=%q: trials off %v, want %v", c.env, got, c.off)
		}
	}
}

// llama-server's controller prices classic under load with
// control.LlamaClassicLive and LlamaClassicLoad; another engine's without.
func TestControlConfigClassicLoad(t *testing.T) {
	for _, c := range []struct {
		e          key.Engine
		live, load float64
	}{{key.LlamaCpp, control.LlamaClassicLive, control.LlamaClassicLoad}, {key.Sim, 0, 0}} {
		p := &plan.Plan{}
		p.Settings.Engine.Value = c.e
		p.Resolution.Width = 4
		if cfg := controlConfig(p); cfg.ClassicLive != c.live || cfg.ClassicLoad != c.load {
			t.Errorf("%s: ClassicLive, ClassicLoad %v, %v; want %v, %v", c.e, cfg.ClassicLive, cfg.ClassicLoad, c.live, c.load)
		}
	}
}

// fakeEngines is a runtime as the loop reads it.
type fakeEngines struct {
	cur    *server.Instance
	beside int
}

func (f fakeEngines) Current() *server.Instance { return f.cur }
func (f fakeEngines) Beside() int               { return f.beside }

// The loop is told when another engine runs beside the serving one, and
// so measures nothing then (adapt.Target.Shared).
func TestCurrentTargetShared(t *testing.T) {
	b, err := proxy.NewBackend("http://127.0.0.1:1", "engine 2")
	if err != nil {
		t.Fatal(err)
	}
	in := &server.Instance{ID: 2, Backend: b, Plan: &plan.Plan{}}
	for _, tc := range []struct {
		name   string
		rt     fakeEngines
		shared bool
	}{
		{"serving alone", fakeEngines{cur: in}, false},
		{"the old engine draining", fakeEngines{cur: in, beside: 1}, true},
		{"a reload's engine starting beside a draining one", fakeEngines{cur: in, beside: 2}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := currentTarget(tc.rt)
			if got.Shared != tc.shared || got.Gen != 2 || got.BaseURL != "http://127.0.0.1:1" {
				t.Errorf("target %+v, want engine 2 with Shared %v", got, tc.shared)
			}
			if got.Served == nil || got.Served(4) != (adapt.Served{}) {
				t.Error("the target does not carry the proxy's served seconds of its engine")
			}
		})
	}
}

// An adaptive switch while the profile on disk does not make a plan that
// can start (an edit the reload rejected) builds on the settings in force,
// as the engine runs on them: those of the last reload that took effect.
// Before, every switch failed until the file was fixed, or (a file that
// loads but cannot start) the switch started it.
func TestAdaptedPlanOnTheSettingsInForce(t *testing.T) {
	good := simProfile + "[adapt]\nenabled = true\n"
	for _, tc := range []struct{ name, broken string }{
		{"invalid TOML", strings.Repeat("[", 100000)},
		{"no target model", strings.Replace(good, `path = "target"`, "", 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prof := filepath.Join(t.TempDir(), "p.toml")
			writeFile(t, prof, good)
			ld := profileLoader{prof}
			l, err := ld.Load()
			if err != nil {
				t.Fatal(err)
			}
			cur, err := l.Build(plan.Options{})
			if err != nil {
				t.Fatal(err)
			}
			sv := &launcher{c: Config{Loader: ld}, log: slog.New(slog.DiscardHandler), w: watched{files: []string{prof}, wasEmpty: map[string]bool{}}, force: inForce{load: l}, st: newServeStatus(cur)}
			reload := func(from *plan.Plan, timeout string) *server.Job {
				writeFile(t, prof, strings.Replace(good, `stop_timeout = "5s"`, `stop_timeout = "`+timeout+`"`, 1))
				np, nl, _, err := sv.reload(from, watch.Change{Path: prof, Reason: watch.ReasonWrite})
				if err != nil {
					t.Fatal(err)
				}
				return &server.Job{Kind: server.KindReload, Plan: np, Origin: nl} // as submit makes it
			}
			// A reload takes effect: its settings are the ones in force.
			j := reload(cur, "7s")
			np := j.Plan
			sv.adopt(np, switchedLoad(server.Switched{Job: j, OK: true}, &server.Instance{Plan: np}))
			// A later reload's switch fails: the previous settings serve again.
			sv.adopt(np, switchedLoad(server.Switched{Job: reload(np, "9s"), OK: false}, &server.Instance{Plan: np}))
			// A reload of the settings in force takes effect without a switch.
			sv.adopted(&server.Job{Kind: server.KindReload, Plan: np})
			writeFile(t, prof, tc.broken)
			ap, _, err := sv.adaptedPlan(np, 3, "a trial")
			if err != nil {
				t.Fatalf("adaptive switch with a broken profile on disk: %v", err)
			}
			if widthOf(ap) != 3 || ap.Resolution.Source != width.Adaptive {
				t.Errorf("plan at width %d (%s), want the adapted 3", widthOf(ap), ap.Resolution.Source)
			}
			if got := ap.Settings.StopTimeout.Value; got != 7*time.Second {
				t.Errorf("stop timeout %v, want the 7s in force (5s: the start's; 9s: a switch that failed)", got)
			}
		})
	}
}

// A switch job a reload replaced, or one asked for while serve stops, is
// not a failed switch to the loop.
func TestSwitchErr(t *testing.T) {
	other := errors.New("the engine did not start")
	for _, tc := range []struct {
		err     error
		dropped bool
	}{
		{server.ErrSuperseded, true},
		{server.ErrStopping, true},
		{other, false},
		{nil, false},
	} {
		got := switchErr(tc.err)
		if errors.Is(got, adapt.ErrSwitchDropped) != tc.dropped || !errors.Is(got, tc.err) {
			t.Errorf("switchErr(%v) = %v, want dropped %v, wrapping it", tc.err, got, tc.dropped)
		}
	}
}

// The adaptive loop's state is one answer on the status page and in
// speclaunch_adapt_state: with --adapt and an operator width the page
// said "not adapting" while the metric said off.
func TestAdaptStateOnPageAndMetric(t *testing.T) {
	sv := &launcher{log: slog.New(slog.DiscardHandler), st: newServeStatus(&plan.Plan{}), met: metrics.New(metrics.Sources{})}
	p := &plan.Plan{Resolution: width.Resolution{Source: width.Override}}
	p.Settings.Adapt.Value = true
	if c := sv.newAdapt(p, nil); c != nil {
		t.Fatal("a controller under an operator width")
	}
	if want := `speclaunch_adapt_state{state="not adapting"} 1`; !strings.Contains(string(sv.met.Text()), want) {
		t.Errorf("metric without %s:\n%s", want, sv.met.Text())
	}
}

// Adaptation off for an operator setting names the setting and its
// source: a schedule was named as a width "(default)" (a new-user pass).
func TestAdaptOffNamesTheOperatorSetting(t *testing.T) {
	sch, err := schedule.Parse("1:5,2+:1", "MLXCEL_DRAFT_SCHEDULE")
	if err != nil {
		t.Fatal(err)
	}
	flag := config.Source{Origin: config.Flag, Name: "--draft-block-size"}
	env := config.Source{Origin: config.Env, Name: "MLXCEL_DRAFT_SCHEDULE"}
	for _, tc := range []struct {
		name string
		s    config.Settings
		want string
	}{
		{"width", config.Settings{Width: config.Field[int]{Value: 3, Src: flag}}, "an operator width is set (flag --draft-block-size); it always wins"},
		{"schedule", config.Settings{Schedule: config.Field[schedule.Schedule]{Value: sch, Src: env}}, "an operator schedule is set (env MLXCEL_DRAFT_SCHEDULE); it always wins"},
	} {
		tc.s.Adapt.Value, tc.s.DraftModel.Value, tc.s.Engine.Value = true, "d", key.Sim
		p := &plan.Plan{Settings: tc.s, Resolution: width.Resolution{Source: width.Override}}
		if got := AdaptOff(p, true); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// Once an operator width turned the adaptive width off, the status
// follows the plan in force and says it stays off until a restart: with
// the width removed by a later reload, the page still said "an operator
// width is set (profile ad.toml:30); it always wins" with its width 3,
// while the engine ran the default 16. The loop's stop runs on a goroutine
// of its own (synctest.Wait waits for it).
func TestAdaptOffFollowsThePlanInForce(t *testing.T) {
	prof := config.Source{Origin: config.Profile, Name: "ad.toml:30"}
	operator := func(w int) *plan.Plan {
		p := &plan.Plan{Resolution: width.Resolution{Source: width.Override, Width: w}}
		p.Settings.Width = config.Field[int]{Value: w, Src: prof}
		p.Settings.Adapt.Value, p.Settings.DraftModel.Value, p.Settings.Engine.Value = true, "d", key.Sim
		return p
	}
	dflt := &plan.Plan{Resolution: width.Resolution{Source: width.KindDefault, Width: 16}}
	dflt.Settings.Adapt.Value, dflt.Settings.DraftModel.Value, dflt.Settings.Engine.Value = true, "d", key.Sim
	offAtOne := &plan.Plan{Resolution: width.Resolution{Source: width.Off, OnSource: width.Override}}
	offAtOne.Settings.Schedule = config.Field[schedule.Schedule]{Value: schedule.Flat(1, "override"), Src: config.Source{Origin: config.Profile, Name: "ad.toml:31"}}
	offAtOne.Settings.Adapt.Value, offAtOne.Settings.DraftModel.Value, offAtOne.Settings.Engine.Value = true, "d", key.Sim
	for _, tc := range []struct {
		name    string
		running bool // the loop ran until a reload set the width; else the width was set at start
	}{{"ended by a reload", true}, {"off from the start", false}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sv := &launcher{px: proxy.New(proxy.Options{}), log: slog.New(slog.DiscardHandler), st: newServeStatus(&plan.Plan{}), met: metrics.New(metrics.Sources{})}
				if tc.running {
					sv.ctl.loop, sv.ctl.stopAdapt = &controlShell{}, func() {}
				} else if c := sv.newAdapt(operator(3), nil); c != nil {
					t.Fatal("a controller under an operator width")
				} else if got, _ := sv.st.adapt.(adapt.Status); got.Width != 3 || !strings.HasSuffix(got.Note, "it always wins; it stays off until speclaunch restarts") {
					// at start as after a reload: it lacked both until one came
					t.Errorf("adapt status at start %+v, want width 3 and that it stays off", got)
				}
				show := func(p *plan.Plan, width int, note string) {
					t.Helper()
					sv.adopt(p, nil)
					synctest.Wait()
					got, _ := sv.st.adapt.(adapt.Status)
					if got.State != adapt.StateNotAdapting || got.Width != width || got.Note != note {
						t.Errorf("adapt status %+v, want not adapting at width %d: %q", got, width, note)
					}
				}
				show(operator(3), 3, "an operator width is set (profile ad.toml:30); it always wins; it stays off until speclaunch restarts")
				show(operator(4), 4, "an operator width is set (profile ad.toml:30); it always wins; it stays off until speclaunch restarts")
				// an operator schedule off at one request is the operator's too
				// (it read "since removed" while the schedule was in force)
				show(offAtOne, 1, "an operator schedule is set (profile ad.toml:31); it always wins; it stays off until speclaunch restarts")
				show(dflt, 16, "an operator width or schedule turned it off, since removed; it stays off until speclaunch restarts")
				if sv.ctl.adaptive() != nil {
					t.Error("the loop is kept after an operator width ended it")
				}
			})
		})
	}
}

// Where the loop could not run whatever the width (here the proxy is off),
// an operator width is not what keeps it off: with it removed the status
// keeps that reason, and does not say a restart would bring the loop back.
func TestAdaptOffForAnotherReasonIsNotOverruled(t *testing.T) {
	p := &plan.Plan{Resolution: width.Resolution{Source: width.Override, Width: 3}}
	p.Settings.Width = config.Field[int]{Value: 3, Src: config.Source{Origin: config.Flag, Name: "--draft-block-size"}}
	p.Settings.Adapt.Value, p.Settings.DraftModel.Value, p.Settings.Engine.Value = true, "d", key.Sim
	sv := &launcher{log: slog.New(slog.DiscardHandler), st: newServeStatus(&plan.Plan{}), met: metrics.New(metrics.Sources{})}
	if c := sv.newAdapt(p, nil); c != nil || sv.ctl.isOverruled() {
		t.Fatalf("controller %v, overruled %v: want neither without the proxy", c, sv.ctl.isOverruled())
	}
	if got, _ := sv.st.adapt.(adapt.Status); got.Note != "the proxy is off (--no-proxy): a switch would fail requests" {
		t.Errorf("note %q, want the proxy's", got.Note)
	}
}

// The controller's noise is the engine's own spread where it is known:
// the sim's cost model's (none for the default model, the demo-load
// model's as measured on the H200), where it assumed the H200's for every
// engine and so stayed within 3-6 % of widths the sim's engines tell
// apart; llama-server keeps the H200's measured spread.
func TestControlConfigSpread(t *testing.T) {
	for _, c := range []struct {
		name         string
		e            key.Engine
		args         []string
		trialsOff    bool
		off          bool
		single, mult float64
	}{
		{"sim, default cost", key.Sim, nil, false, true, 0, 0},
		{"sim, default cost, trials off", key.Sim, nil, true, true, 0, 0},
		{"sim, demo-load", key.Sim, []string{"--sim-cost", "demo-load", "-np", "4"}, false, false, 0.034, 0.066},
		{"llama.cpp", key.LlamaCpp, []string{"-ngl", "99"}, false, false, 0, 0},
	} {
		p := &plan.Plan{}
		p.Settings.Engine.Value, p.Settings.EngineArgs.Value = c.e, c.args
		p.Resolution.Width = 4
		if c.trialsOff {
			p.Settings.AdaptTrials.Value = 0
		} else {
			p.Settings.AdaptTrials.Value = 2
		}
		got := controlConfig(p)
		if got.Off["spread"] != c.off || got.Spread1 != c.single || got.SpreadN != c.mult || got.Off["trials"] != c.trialsOff {
			t.Errorf("%s: spread off %v (%v, %v), trials off %v; want %v (%v, %v), %v", c.name, got.Off["spread"], got.Spread1, got.SpreadN, got.Off["trials"], c.off, c.single, c.mult, c.trialsOff)
		}
	}
}
