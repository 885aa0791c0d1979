package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/speclaunch/speclaunch/internal/bench"
	"github.com/speclaunch/speclaunch/internal/config"
	"github.com/speclaunch/speclaunch/internal/evidence"
	"github.com/speclaunch/speclaunch/internal/plan"
	"github.com/speclaunch/speclaunch/internal/record"
)

// loadSweep is bench's load sweep: the arms at every level, on fresh
// engines sized for the highest level.
func (c *BenchCmd) loadSweep(e *Env, log *slog.Logger, l *loaded, dp *plan.Plan, o bench.Options, levels []int, outBase string, notes []string) error {
	lo, err := c.loadOptions(e, o, levels)
	if err != nil {
		return err
	}
	s, prof := l.Settings, l.Profile
	if lo.Slots, lo.SlotsFrom, err = sizeSlots(log, &s, e.Getenv, levels); err != nil {
		return err
	}
	st := newStarter(e, l, s, dp, c.drawsArmPorts(prof))
	rec := c.identity(e, dp, notes)
	rec.Name = filepath.Base(outBase)
	log.Info("load sweep starting", "arms", len(o.Arms), "levels", joinLevels(levels), "engines_per_width", lo.Engines, "engine", string(s.Engine.Value), "out", outBase)
	return sweepLoad(e, log, lo, st, rec, outBase)
}

// parseLevels reads a list of load levels: whole numbers of concurrent
// clients, ascending, without repeats, from 1 to bench.MaxLevel.
func parseLevels(text, flag string) ([]int, error) {
	src := config.Source{Origin: config.Flag, Name: flag}
	out, err := config.ParseLevels(text)
	if err != nil {
		return nil, &config.Error{Src: src, Msg: err.Error()}
	}
	return out, nil
}

// loadOptions are the load sweep's options: bench's (tokens, prompts,
// ports, timeouts, key) and the sweep's own flags.
func (c *BenchCmd) loadOptions(e *Env, o bench.Options, levels []int) (bench.LoadOptions, error) {
	lo := bench.LoadOptions{Arms: o.Arms, Levels: levels, Engines: c.Engines, MaxTokens: o.MaxTokens, Prompts: o.Prompts, PromptSet: o.PromptSet,
		Temperature: o.Temperature, BasePort: o.BasePort, RequestTimeout: o.RequestTimeout, APIKey: o.APIKey, Windows: c.windows}
	if c.Window != "" {
		d, err := time.ParseDuration(c.Window)
		src := config.Source{Origin: config.Flag, Name: "--window"}
		if err != nil && config.DurationOverflows(c.Window) {
			return lo, &config.Error{Src: src, Msg: fmt.Sprintf("%q is far out of range; give %v or less", c.Window, bench.MaxLoadWindow)}
		}
		if err != nil || d <= 0 {
			return lo, &config.Error{Src: src, Msg: fmt.Sprintf("%q is not a duration from %v to %v, e.g. 5s", c.Window, bench.MinLoadWindow, bench.MaxLoadWindow)}
		}
		if d < bench.MinLoadWindow {
			return lo, &config.Error{Src: src, Msg: fmt.Sprintf("%q is below %v, the shortest window: a window must hold tokens to have a rate; give %v or more", c.Window, bench.MinLoadWindow, bench.MinLoadWindow)}
		}
		if d > bench.MaxLoadWindow {
			return lo, &config.Error{Src: src, Msg: longWindow(c.Window, lo)}
		}
		// a short window is a short warm-up too (the default's 3 s at most)
		lo.Window, lo.Warm = d, min(d, bench.DefaultLoadWarm)
	}
	return withLoadProgress(e, lo, c.JSON)
}

// longWindow says why a window past bench.MaxLoadWindow is refused, with
// the count this sweep would run it: arms × levels × engines × windows per
// engine and level, as the sweep fills them (lo's, else bench's defaults;
// tune on the sim runs its two, tune.go). It said "× 3 times" for every
// sweep, which a tune on the sim, whose record says 2 windows, seemed to
// contradict.
func longWindow(text string, lo bench.LoadOptions) string {
	engines, windows := cmp.Or(lo.Engines, bench.DefaultEngines), cmp.Or(lo.Windows, bench.DefaultWindows)
	n := len(lo.Arms) * len(lo.Levels) * engines * windows
	return fmt.Sprintf("%q is above %v, the longest window: a window of %v already holds a few hundred tokens at one client, and this sweep would run %d of them (%d arms × %d levels × %d engines × %d windows per engine and level); give %v or less",
		text, bench.MaxLoadWindow, bench.DefaultLoadWindow, n, len(lo.Arms), len(lo.Levels), engines, windows, bench.MaxLoadWindow)
}

// withLoadProgress sends the sweep's progress to stderr (a bar on a
// terminal) or, with JSON, to stdout, and checks the plan before anything
// starts.
func withLoadProgress(e *Env, lo bench.LoadOptions, json bool) (bench.LoadOptions, error) {
	if json {
		lo.Progress, lo.JSONProgress = e.Stdout, true
	} else {
		lo.Progress, lo.IsTTY = e.Stderr, isTTY(e.Stderr)
	}
	full, err := lo.WithDefaults()
	if err != nil {
		return lo, usage(err, "")
	}
	return full, nil
}

func joinLevels(ls []int) string {
	s := make([]string, len(ls))
	for i, l := range ls {
		s[i] = strconv.Itoa(l)
	}
	return strings.Join(s, ",")
}

// sweepLoad runs a load sweep and writes its record (partial when
// interrupted).
func sweepLoad(e *Env, log *slog.Logger, lo bench.LoadOptions, st *starter, rec *record.Record, outBase string) error {
	if err := runLoadRecord(e, lo, st, rec, outBase); err != nil {
		if errors.Is(err, context.Canceled) {
			log.Warn("interrupted: every engine stopped; partial record written", "out", outBase+".md")
			return exitCode(130, errors.New("bench interrupted; partial record marked incomplete"))
		}
		return err
	}
	log.Info("record written", "md", outBase+".md", "json", outBase+".json", "svg", outBase+".svg")
	fmt.Fprintln(e.Stderr) // after the progress, before the result
	writeVerdict(resultOut(e, lo.JSONProgress), rec)
	return measuredNothing(rec, outBase)
}

// runLoadRecord measures and writes the record; the error is the sweep's
// (the record is written either way) or the write's.
func runLoadRecord(e *Env, lo bench.LoadOptions, st *starter, rec *record.Record, outBase string) error {
	if few := evidence.FewEngines(lo.Engines); few != "" {
		fmt.Fprintf(e.Stderr, "note: %s\n", few)
	}
	ctx, done := withStopCause(e.Ctx)
	defer done()
	cpu0, wall0 := bench.SelfCPU(), time.Now()
	runErr := bench.RunLoad(ctx, lo, st.start, rec)
	rec.Method.HarnessCPUS = (bench.SelfCPU() - cpu0).Seconds()
	rec.Method.WallS = time.Since(wall0).Seconds()
	redactRecord(rec, e.secrets)
	if err := bench.Write(rec, outBase, true); err != nil {
		return err // bench.Write says "write record: …"
	}
	return runErr
}
