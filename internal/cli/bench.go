package cli

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/speclaunch/speclaunch/cuda"
	"github.com/speclaunch/speclaunch/engine"
	"github.com/speclaunch/speclaunch/internal/bench"
	"github.com/speclaunch/speclaunch/internal/config"
	"github.com/speclaunch/speclaunch/internal/defaults"
	"github.com/speclaunch/speclaunch/internal/instance"
	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/modelhash"
	"github.com/speclaunch/speclaunch/internal/plan"
	"github.com/speclaunch/speclaunch/internal/policy"
	"github.com/speclaunch/speclaunch/internal/record"
	"github.com/speclaunch/speclaunch/internal/schedule"
	"github.com/speclaunch/speclaunch/internal/secret"
	"github.com/speclaunch/speclaunch/internal/serve"
	"github.com/speclaunch/speclaunch/internal/sim"
	"github.com/speclaunch/speclaunch/internal/waitlog"
	"github.com/speclaunch/speclaunch/internal/width"
	"github.com/speclaunch/speclaunch/profiles"
)

// BenchCmd sweeps widths against classic on the configured engine.
type BenchCmd struct {
	LaunchFlags `embed:""`

	Widths         string  `help:"Widths to measure, comma-separated." placeholder:"W,W,..." group:"Bench"`
	Rounds         int     `help:"Measured rounds per arm, at least 3." placeholder:"N" group:"Bench"`
	Warmup         int     `help:"Discarded warm-up requests per server start, 0 for none; at least one per prompt of a set." placeholder:"N" group:"Bench"`
	MaxTokens      int     `help:"Tokens per request, 1 to 65536." placeholder:"N" group:"Bench"`
	PromptFile     string  `help:"Prompt file." placeholder:"FILE" group:"Bench"`
	Prompts        string  `help:"A prompt set: a directory of prompt files, or a shipped set (code, prose); every arm runs every prompt, and the record keeps per-prompt and pooled figures." placeholder:"DIR|code|prose" group:"Bench"`
	Temperature    float64 `help:"Sample at this temperature with a fixed seed per request; 0 is greedy." placeholder:"T" group:"Bench"`
	Concurrency    string  `help:"Requests in flight per measured run, for aggregate throughput under load; the engine is started with that many slots unless you set its slot count (docs/bench.md, under Load). A list (1,2,4,8; bench.concurrency in a profile takes one too) is a load sweep: every width at every level under out-of-step clients with mixed prompts, on several fresh engines per width, earning a schedule (docs/schedule.md)." placeholder:"N|N,N,..." group:"Bench"`
	Engines        int     `help:"Load sweep: fresh engines per width, 2 to 20, so the spread between engines is measured (default 3)." default:"3" placeholder:"N" group:"Bench"`
	Window         string  `help:"Load sweep: the length of one measured window per engine and level, 100ms to 10m (default 5s; 3 windows after a 3s warm-up)." placeholder:"DUR" group:"Bench"`
	Schedule       string  `help:"restart: one server at a time, each round restarts every arm (for models that fit once); resident: every arm's server up at once." placeholder:"restart|resident" group:"Bench"`
	BasePort       int     `help:"First loopback port for arm servers (arm i on base+i); without it each arm draws its own below the ephemeral range, so two benches on one host never collide." placeholder:"PORT" group:"Bench"`
	Out            string  `help:"Output path without extension, in an existing directory: writes OUT.md, OUT.json, OUT.svg." placeholder:"DIR/NAME" group:"Bench"`
	Force          bool    `help:"Overwrite existing outputs." group:"Bench"`
	JSON           bool    `help:"Progress as JSON lines on stdout, for machines." group:"Bench"`
	RequestTimeout string  `help:"Per-request timeout, stalled streams included." placeholder:"DUR" group:"Bench"`
	NotesFile      string  `help:"A text file whose paragraphs are added to the record's notes (e.g. how the model pair was made)." placeholder:"FILE" group:"Bench"`
	Title          string  `help:"Record title." placeholder:"TEXT" group:"Bench"`
	ReadyTimeout   string  `help:"How long to wait for each engine's /health." placeholder:"DUR" group:"Bench"`

	// levels are bench.concurrency's levels (flag > profile > 1), set by
	// options: more than one is a load sweep.
	levels []int
	// windows per engine and level in a load sweep; 0 is bench's default
	// (tune on the sim sets its own, tuneSimWindows).
	windows int
}

// Run implements `speclaunch bench`.
func (c *BenchCmd) Run(e *Env) error {
	if err := c.checkArgs(e); err != nil {
		return err
	}
	in := c.LaunchFlags.input(e, nil, e.Passthrough)
	e.logJSON = logsJSON(c.LogFormat, e.Getenv)
	l, err := e.load(in)
	if err != nil {
		return err
	}
	s, setAside := measuring(l.Settings)
	l.Settings = s
	e.logJSON = s.LogFormat.Value == "json"
	prof := l.Profile
	if s.Engine.Value == key.VLLM || s.Engine.Value == key.SGLang {
		return usage(fmt.Errorf("bench cannot measure %s: it times llama-server's native /completion stream (timings, draft counts), which %s does not serve", s.Engine.Value, s.Engine.Value), "bench a llama.cpp, mlxcel or sim engine; see docs/engines.md for what works with vLLM and SGLang")
	}
	flags := given(e.kctx)
	o, widths, outBase, notes, err := c.options(e.Ctx, s, prof, flags)
	if err != nil {
		return err
	}
	levels := c.levels
	_, engines := flags["engines"]
	if len(levels) < 2 && (engines || c.Window != "") {
		return usage(errors.New("--engines and --window belong to a load sweep"), "give --concurrency (or bench.concurrency) a list of levels, e.g. --concurrency 1,2,4,8")
	}
	if !plan.HasDrafter(s) {
		return usage(errors.New("bench needs a draft model to measure widths against classic"), "set draft.model in the profile, --draft-model/-md, or LLAMA_ARG_SPEC_DRAFT_MODEL (llama.cpp: or --spec-type draft-mtp for a target with MTP layers)")
	}
	if err := c.checkOut(outBase); err != nil {
		return err
	}
	log := newLogger(e.logTo(), e.secrets, s.LogFormat.Value, s.LogLevel.Value, e.Getenv)
	notes = sayAside(log, notes, setAside)
	dp, err := defaultPlan(e, l)
	if err != nil {
		return err
	}
	arms, skipped := benchArms(dp.Resolution, l.Policy, s.Engine.Value, widths)
	for _, msg := range skipped {
		log.Info(msg)
	}
	o.Arms = arms
	o.APIKey = dp.APIKey()
	if len(levels) > 1 {
		return c.loadSweep(e, log, l, dp, o, levels, outBase, notes)
	}
	// The adaptive loop's probe is checked on the engines it adapts.
	o.Probe = s.Engine.Value == key.LlamaCpp || s.Engine.Value == key.Sim
	if notes, err = oneLevelSlots(log, &s, e.Getenv, &o, notes); err != nil {
		return err
	}

	rec := c.identity(e, dp, notes)
	rec.Name = filepath.Base(outBase)
	if r := dp.Resolution; r.FromEntry() {
		rec.Verdict.PolicyWidth, rec.Verdict.PolicyEntry = r.Width, r.Entry.ID
	}
	st := newStarter(e, l, s, dp, c.drawsArmPorts(prof))
	if c.JSON {
		o.Progress, o.JSONProgress = e.Stdout, true
	} else {
		o.Progress, o.IsTTY = e.Stderr, isTTY(e.Stderr)
	}
	note, err := bench.Check(o)
	if err != nil {
		return usage(err, "") // before anything starts, and no record is written
	}
	if note != "" {
		log.Info(note)
	}
	log.Info("bench starting", "arms", len(arms), "rounds", o.Rounds, "schedule", o.Schedule, "engine", string(s.Engine.Value), "out", outBase)
	return c.sweep(e, log, o, st, rec, outBase)
}

// oneLevelSlots sizes s's engine for bench's one level, o.Concurrency
// (sizeSlots), into o, and adds to notes the record's note where its
// requests queue. It runs at every level, 1 too, so that a slot count
// every engine would refuse is refused before the first one starts.
func oneLevelSlots(log *slog.Logger, s *config.Settings, getenv func(string) string, o *bench.Options, notes []string) ([]string, error) {
	var err error
	if o.Slots, o.SlotsFrom, err = sizeSlots(log, s, getenv, []int{max(o.Concurrency, 1)}); err != nil {
		return notes, err
	}
	if q := bench.QueueNote(o.Slots, o.SlotsFrom, o.Concurrency); q != "" {
		notes = append(notes, q)
	}
	return notes, nil
}

// newStarter starts the arms' engines. Facts are gathered once: every arm
// runs on the same host, and an nvidia-smi probe per arm start would be
// the harness measuring itself.
func newStarter(e *Env, l *loaded, s config.Settings, dp *plan.Plan, anyPort bool) *starter {
	deps := e.deps()
	probed := cuda.Result{GPUs: dp.Facts.GPUs, Capability: dp.Facts.Capability, Reason: dp.Facts.CapNote, Driver: dp.Facts.Driver}
	deps.Probe = func(context.Context) cuda.Result { return probed }
	caps := dp.Facts.Caps
	deps.DetectLlama = func(context.Context, string) (engine.Caps, error) { return caps, nil }
	st := &starter{e: e, l: l, settings: s, deps: deps, opts: instance.Options{Out: io.Discard, Secrets: e.secrets, ReadyTimeout: s.ReadyTimeout.Value, StopTimeout: s.StopTimeout.Value, Client: engineClient},
		log: newLogger(e.logTo(), e.secrets, s.LogFormat.Value, s.LogLevel.Value, e.Getenv)}
	st.anyPort = anyPort
	return st
}

// drawsArmPorts is bench's rule for the arms' ports, which tune follows
// through its bench (TuneCmd.bench): each is drawn at random unless the
// operator gave a base port, --base-port or bench.base_port.
func (c *BenchCmd) drawsArmPorts(p *profiles.Profile) bool {
	return c.BasePort == 0 && (p == nil || p.Bench.BasePort == nil)
}

// checkOut refuses to overwrite a record unless --force.
func (c *BenchCmd) checkOut(outBase string) error {
	if c.Force {
		return nil
	}
	for _, ext := range []string{".md", ".json", ".svg"} {
		if _, err := os.Stat(outBase + ext); err == nil {
			return usage(fmt.Errorf("%s already exists", outBase+ext), "pass --force to overwrite it, or choose another --out")
		}
	}
	return nil
}

// measuring is s as bench and tune measure with it: the operator's width
// or schedule set aside, since every arm runs a width of its own and the
// default arm the engine's. A schedule left in force ran every arm at its
// width (tune's width-8 arm ran width 3 under MLXCEL_DRAFT_SCHEDULE=1+:3,
// and tune saved that as the pair's tuned schedule). setAside says what
// was set aside ("" when nothing was); serve still applies it.
func measuring(s config.Settings) (m config.Settings, setAside string) {
	switch {
	case s.Schedule.Value != nil:
		setAside = fmt.Sprintf("the width schedule %s (%s) is set aside: every arm runs its own width; serve still applies it", s.Schedule.Value, s.Schedule.Src)
	case s.Width.Value != 0:
		from := s.Width.Src.String()
		if s.WidthNote != "" {
			from += ": " + s.WidthNote // --spec-draft-n-max 3 is width 4: say the 3
		}
		setAside = fmt.Sprintf("the width %d (%s) is set aside: every arm runs its own width; serve still applies it", s.Width.Value, from)
	}
	s.Width, s.Schedule = config.Field[int]{}, config.Field[schedule.Schedule]{}
	return s, setAside
}

// sayAside logs what measuring set aside and adds it to the record's
// notes, which say what it measured without.
func sayAside(log *slog.Logger, notes []string, setAside string) []string {
	if setAside == "" {
		return notes
	}
	log.Warn(setAside)
	return append(notes, setAside)
}

// defaultPlan is the default arm's plan: the engine's own default width
// (the policy arm, only when the policy resolves another width for this
// host, runs that one; no width is measured twice under two names).
func defaultPlan(e *Env, l *loaded) (*plan.Plan, error) {
	dp, err := build(e, l, plan.Options{}) // l.Settings are measuring's: the default arm's width is the engine's
	if err != nil {
		return nil, err
	}
	if err := serve.Launchable(dp, false); err != nil {
		return nil, err
	}
	if dp.Resolution.Source == width.Off {
		return nil, usage(errors.New("speculation resolves off for this profile"), "bench needs a draft model")
	}
	return dp, nil
}

// sweep runs the arms, writes the record (partial when interrupted) and
// says what it earned.
func (c *BenchCmd) sweep(e *Env, log *slog.Logger, o bench.Options, st *starter, rec *record.Record, outBase string) error {
	ctx, done := withStopCause(e.Ctx)
	defer done()
	cpu0, wall0 := bench.SelfCPU(), time.Now()
	runErr := bench.Run(ctx, o, st.start, rec)
	// The harness must not be what it measures: record its own CPU time
	// (this process only, not the engines) against the run's wall time.
	rec.Method.HarnessCPUS = (bench.SelfCPU() - cpu0).Seconds()
	rec.Method.WallS = time.Since(wall0).Seconds()
	redactRecord(rec, e.secrets)
	if err := bench.Write(rec, outBase, true); err != nil {
		return err // bench.Write says "write record: …"
	}
	if runErr != nil {
		if errors.Is(runErr, context.Canceled) {
			log.Warn("interrupted: every engine stopped; partial record written", "out", outBase+".md")
			return exitCode(130, errors.New("bench interrupted; partial record marked incomplete"))
		}
		return runErr
	}
	log.Info("record written", "md", outBase+".md", "json", outBase+".json", "svg", outBase+".svg")
	fmt.Fprintln(e.Stderr) // after the progress, before the result
	writeVerdict(resultOut(e, o.JSONProgress), rec)
	return measuredNothing(rec, outBase)
}

// measuredNothing fails a bench none of whose arms measured anything
// (every engine failed to start or to answer): it printed "nothing to
// compare against", wrote a record of 0 requests and exited 0, which a
// script reads as a measurement. Exit 1, the record kept for its reasons.
func measuredNothing(rec *record.Record, outBase string) error {
	arms := slices.Clone(rec.Arms)
	for _, l := range rec.Levels {
		arms = append(arms, l.Arms...)
	}
	for _, a := range arms {
		if a.Status == record.StatusOK {
			return nil
		}
	}
	return exitCode(1, fmt.Errorf("no arm measured anything: every engine failed (%s.md says why, arm by arm)", outBase))
}

// writeVerdict says what a record earned: its verdict, the arms that
// failed, and what it earns in a policy entry, as its markdown says it
// (bench.EntryVerdict), with the entry when it earns one.
func writeVerdict(out io.Writer, rec *record.Record) {
	fmt.Fprintln(out, rec.Verdict.Why)
	for _, a := range rec.Arms {
		if a.Status == record.StatusFailed {
			fmt.Fprintf(out, "failed, not measured: %s (%s)\n", a.Label, a.StatusReason)
		}
	}
	if s := bench.EntryVerdict(rec); s != "" {
		fmt.Fprintln(out, s)
	}
	if rec.Verdict.EarnsEntry {
		fmt.Fprintf(out, "\n%s", rec.Verdict.Entry)
	}
}

// resultOut is where bench and tune say what a measurement earned (the
// verdict and its entry, tune's schedule and where it was written):
// stdout, since it is the command's result, while their progress, notes
// and logs go to stderr. With --json stdout holds the progress's JSON
// lines alone, and the result joins the logs on stderr. It writes
// nothing: the caller sets the result apart from the progress with a
// blank line on stderr, where the progress is, so that stdout begins with
// the result.
func resultOut(e *Env, jsonProgress bool) io.Writer {
	if jsonProgress {
		return e.Stderr
	}
	return e.Stdout
}

// options reads bench's rows of the settings table (flag > profile >
// default, config.LoadBench) into the harness's options, and reads the
// prompt and notes files they name. Every bad value names where it came
// from: the flag, or the profile's file and line.
func (c *BenchCmd) options(ctx context.Context, s config.Settings, p *profiles.Profile, flags map[string]string) (bench.Options, []int, string, []string, error) {
	o, err := loadBench(ctx, &s, p, flags)
	if err != nil {
		return o, nil, "", nil, err
	}
	b := s.Bench
	c.levels = b.Concurrency.Value // more than one: a load sweep
	out, src := b.Out.Value, b.Out.Src
	if out == "" {
		out, src = fmt.Sprintf("speclaunch-bench-%s-%s", s.Engine.Value, time.Now().Format("20060102-150405")), config.Source{}
	}
	out = strings.TrimSuffix(out, ".md")
	if err := bench.CheckWritable(out); err != nil {
		return o, nil, "", nil, &config.Error{Src: src, Msg: fmt.Sprintf("the record cannot be written to %s: %v; give --out (profile bench.out) a file stem in an existing directory you can write to, e.g. DIR/run1 for DIR/run1.md, .json and .svg", out, err)}
	}
	if why := record.TextFits(c.Title); why != "" {
		return o, nil, "", nil, &config.Error{Src: config.Source{Origin: config.Flag, Name: "--title"}, Msg: "the title " + why}
	}
	notes, err := readNotes(ctx, c.NotesFile)
	return o, b.Widths.Value, out, notes, err
}

// loadBench layers bench's rows into s (config.LoadBench) and reads the
// prompt file or set they name into the harness's options: all that bench
// reads of its options, with nothing written (options then checks where
// the record goes). profile show and profile validate check a [bench]
// table with it.
func loadBench(ctx context.Context, s *config.Settings, p *profiles.Profile, flags map[string]string) (bench.Options, error) {
	if err := config.LoadBench(s, p, flags); err != nil {
		return bench.Options{}, err
	}
	b := s.Bench
	o := bench.Options{Rounds: b.Rounds.Value, Warmup: b.Warmup.Value, MaxTokens: b.MaxTokens.Value, BasePort: b.BasePort.Value,
		Schedule: b.Schedule.Value, Temperature: b.Temperature.Value, Concurrency: b.Concurrency.Value[0], RequestTimeout: b.RequestTimeout.Value}
	if o.Warmup == 0 {
		o.Warmup = -1 // bench.Options: negative = none
	}
	return o, readPrompts(ctx, &o, b, p)
}

// readPrompts reads the prompt file or the prompt set the options name: a
// set is a directory (relative to the profile when it came from one), or a
// shipped set's name where no such directory exists.
func readPrompts(ctx context.Context, o *bench.Options, b config.Bench, p *profiles.Profile) error {
	if pf := b.PromptFile.Value; pf != "" {
		text, err := bench.ReadPromptFile(ctx, pf)
		if err != nil {
			return &config.Error{Src: b.PromptFile.Src, Msg: "cannot use the prompt file", Err: err}
		}
		o.Prompt, o.PromptName = text, filepath.Base(pf)
	}
	set := b.Prompts.Value
	if set == "" {
		return nil
	}
	dir := set
	if b.Prompts.Src.Origin == config.Profile {
		dir = config.RelTo(p.Path, set)
	}
	if _, err := os.Stat(dir); err != nil && slices.Contains(bench.ShippedSets, set) {
		o.Prompts, _ = bench.ShippedSet(set)
		o.PromptSet = "shipped:" + set
		return nil
	}
	ps, err := bench.ReadPromptDir(ctx, dir)
	if err != nil {
		return &config.Error{Src: b.Prompts.Src, Msg: "cannot use the prompt set", Err: err}
	}
	o.Prompts, o.PromptSet = ps, filepath.Base(filepath.Clean(dir))
	return nil
}

// readNotes reads --notes-file's paragraphs for the record.
func readNotes(ctx context.Context, path string) ([]string, error) {
	if path == "" {
		return nil, nil
	}
	b, err := bench.ReadTextFile(ctx, "notes file", path) // the prompt file's caps: a small text file
	if err != nil {
		return nil, &config.Error{Src: config.Source{Origin: config.Flag, Name: "--notes-file"}, Msg: "cannot use the notes file", Err: err}
	}
	var notes []string
	src := config.Source{Origin: config.Flag, Name: "--notes-file"}
	for _, para := range strings.Split(strings.TrimSpace(b), "\n\n") {
		if p := strings.TrimSpace(para); p != "" {
			if why := record.TextFits(p); why != "" {
				return nil, &config.Error{Src: src, Msg: fmt.Sprintf("%s: paragraph %d %s; split it with a blank line", path, len(notes)+1, why)}
			}
			notes = append(notes, p)
		}
	}
	if len(notes) > record.MaxNotes {
		return nil, &config.Error{Src: src, Msg: fmt.Sprintf("%s holds %d paragraphs, above the %d notes a record may hold; join some", path, len(notes), record.MaxNotes)}
	}
	return notes, nil
}

// identity fills the record's host, engine and model identity.
func (c *BenchCmd) identity(e *Env, p *plan.Plan, notes []string) *record.Record {
	s, f := p.Settings, p.Facts
	rec := &record.Record{Schema: record.Schema, Date: time.Now().UTC().Format(time.RFC3339), Complete: true,
		Simulated: s.Engine.Value == key.Sim, Launcher: "speclaunch " + LauncherVersion(), Notes: notes, Title: c.Title}
	rk := p.Resolution.Key
	rec.Key = record.Key{Engine: string(s.Engine.Value), Drafter: string(rk.Drafter), Capability: rk.Capability.String(), Quant: string(rk.Quant)}
	host, _ := os.Hostname()
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	rec.Host = record.Host{Hostname: host, Kernel: strings.TrimSpace(string(kernel)), Arch: runtime.GOARCH, Capability: f.CapabilityStr}
	gpus := f.GPUs
	if len(gpus) == 0 && s.Engine.Value != key.Sim {
		gpus = cuda.Probe(e.Ctx, cuda.Options{}).GPUs
	}
	if len(gpus) > 0 {
		rec.Host.GPU, rec.Host.Driver, rec.Host.GPUCount = gpus[0].Name, gpus[0].Driver, len(gpus)
	}
	bin := f.BinaryPath
	if s.Engine.Value == key.Sim {
		bin = f.Caps.Self
	}
	rec.Engine = record.Engine{Name: string(s.Engine.Value), Binary: bin, Version: f.Caps.Version, Spelling: string(f.Caps.Spelling), SHA256: fileSHA(bin)}
	rec.Engine.Pin = plan.EnginePin(s.Engine.Value, f.Caps)
	if s.Engine.Value == key.Sim {
		rec.Engine.Version = "sim " + LauncherVersion()
	}
	rec.Models = recordModels(s, f, &rec.Notes)
	return rec
}

// recordModels are the record's target and draft models, each by content
// where it can be hashed (a note says where not). A drafter that is the
// target's own layers (plan.EmbeddedDrafter) has no path of its own: it
// is hashed as the pair hashes it (plan.EmbeddedSum).
func recordModels(s config.Settings, f plan.Facts, notes *[]string) []record.Model {
	models := []record.Model{
		{Role: "target", Path: s.Model.Value, Bytes: modelhash.Size(s.Model.Value), Quant: string(f.Quant), Note: f.QuantSource},
		{Role: "draft", Path: s.DraftModel.Value, Bytes: modelhash.Size(s.DraftModel.Value), Kind: string(f.Drafter), Note: f.DrafterSource},
	}
	for i := range models {
		m := &models[i]
		if m.Role == "draft" && f.Embedded {
			m.Note += "; " + f.DrafterFrom
			if t := models[0].Content; t != "" {
				m.Content, m.ContentMethod = plan.EmbeddedSum(t), "the target's own layers: sha256 of \"speclaunch embedded drafter\", a NUL and the target's content_sha256"
			}
			continue
		}
		if sum, err := modelhash.Sum(m.Path); err == nil {
			m.Content, m.ContentMethod = sum, modelhash.Method
		} else if s.Engine.Value == key.Sim {
			m.Content, _ = plan.ModelSum(key.Sim, m.Path)
			m.ContentMethod = "a sim stand-in: sha256 of \"speclaunch sim stand-in\", a NUL and its base name"
		} else {
			*notes = append(*notes, fmt.Sprintf("the %s's content could not be hashed (%v): the record names it by path alone", m.Role, err))
		}
	}
	return models
}

// benchArms lays out the arms: classic, the engine's own default width,
// the policy's width when it differs, then the requested widths less those
// two. skipped says which requested widths were folded into them.
func benchArms(r width.Resolution, pol *policy.Policy, eng key.Engine, widths []int) ([]bench.ArmSpec, []string) {
	def, why := engineDefault(r, pol, eng)
	arms := []bench.ArmSpec{
		{Label: "classic", Kind: bench.KindClassic},
		{Label: fmt.Sprintf("default = %d (%s)", def, why), Kind: bench.KindDefault, Width: def, WidthSource: "the engine's own default"},
	}
	taken := map[int]string{def: "the default arm"}
	if r.Width != def {
		src := string(r.Source)
		label := fmt.Sprintf("policy = %d (%s)", r.Width, r.Reason)
		if r.Entry != nil {
			src = "policy entry " + r.Entry.ID
			label = fmt.Sprintf("policy = %d (entry %s)", r.Width, r.Entry.ID)
		}
		arms = append(arms, bench.ArmSpec{Label: label, Kind: bench.KindPolicy, Width: r.Width, WidthSource: src})
		taken[r.Width] = "the policy arm"
	}
	var skipped []string
	for _, w := range widths {
		if by, ok := taken[w]; ok {
			skipped = append(skipped, fmt.Sprintf("width %d is measured once, as %s", w, by))
			continue
		}
		arms = append(arms, bench.ArmSpec{Label: fmt.Sprintf("width %d", w), Kind: bench.KindWidth, Width: w, WidthSource: "--draft-block-size (bench arm)"})
	}
	return arms, skipped
}

// engineDefault is the width the engine runs with no width given: the
// resolution itself unless a policy entry answered it (measured, or tuned
// on the sim), in which case the same key resolved without the policy's
// entries.
func engineDefault(r width.Resolution, pol *policy.Policy, eng key.Engine) (int, string) {
	if !r.FromEntry() {
		return r.Width, "engine default: " + r.Reason
	}
	var defaults *policy.Policy
	if pol != nil {
		defaults = &policy.Policy{Layers: pol.Layers, Defaults: pol.Defaults}
	}
	d := width.Resolve(width.Input{Engine: eng, HasDrafter: true, Drafter: r.Key.Drafter, Capability: r.Key.Capability, Quant: r.Key.Quant, Policy: defaults})
	return d.Width, fmt.Sprintf("engine default for %s %s, without the policy's entry", eng, r.Key.Drafter)
}

// withSlots starts the engine with as many slots as requests in flight
// (--parallel N, which llama-server, mlxcel-server and the sim read), so
// that a level measures the load and not a queue, unless the operator set
// the slot count or n is 1 (any engine's own count serves one request).
// The operator's count is read as the engine reads it, since the record
// says what ran: the last -np/--parallel among the engine arguments
// (config.LastGiven: a profile's -np 1 and `-- -np 4` after it run 4
// slots); the sim's --sim-slots, which wins over them;
// LLAMA_ARG_N_PARALLEL, the profile's engine.env over the shell's, on
// llama-server alone (the sim and mlxcel do not read it); on the sim at
// most sim.MaxSlots, whatever -np or bench asks (engineSlots). It returns
// the engine arguments and the slot count (slotSize). A value that is no
// slot count (abc, 0, 2.5, a --sim-slots the sim refuses) is an error
// naming it and where it was given (a profile's engine.args by file:line,
// even with arguments typed after them), before anything starts: every
// engine would fail on it, or the record would hold a count that never
// ran.
func withSlots(s config.Settings, env slotEnv, n int) (config.Field[[]string], slotSize, error) {
	eng, args := s.Engine.Value, s.EngineArgs
	at, flag, vals := config.LastGiven(args.Value, []string{"-np", "--parallel"})
	if eng == key.Sim {
		if i, f, v := config.LastGiven(args.Value, []string{"--sim-slots"}); i >= 0 {
			at, flag, vals = i, f, v
		}
	}
	fits := engineSlots(eng, n)
	if at >= 0 {
		val := strings.Join(vals, " ")
		k, ok := slotCount(eng, flag, val)
		switch {
		case !ok && flag == "--sim-slots":
			return args, slotSize{}, &config.Error{Src: s.EngineArgSrc(at), Msg: fmt.Sprintf("--sim-slots %s is not a slot count the sim takes: want a whole number from 1 to %d, e.g. --sim-slots %d for %d %s in flight", config.Quoted(val), sim.MaxSlots, fits, n, bench.Plural(n, "request", "requests"))}
		case !ok:
			return args, slotSize{}, &config.Error{Src: s.EngineArgSrc(at), Msg: fmt.Sprintf("%s %s is not a slot count: %s, %s", flag, config.Quoted(val), slotWant, slotExample(eng, "-np ", "drop it", n))}
		}
		from := "the operator's " + flag + " " + val
		if asked, _ := strconv.Atoi(strings.TrimSpace(val)); asked > k && k > 0 {
			from += fmt.Sprintf("; the sim runs at most %d", k)
		}
		return args, slotSize{n: k, from: from, by: flag}, nil
	}
	if v, src := env("LLAMA_ARG_N_PARALLEL"); v != "" && eng == key.LlamaCpp {
		k, ok := slotCount(eng, "LLAMA_ARG_N_PARALLEL", v)
		if !ok {
			return args, slotSize{}, &config.Error{Src: src, Msg: fmt.Sprintf("%s is not a slot count: %s, %s", config.Quoted(v), slotWant, slotExample(eng, "LLAMA_ARG_N_PARALLEL=", "unset it", n))}
		}
		return args, slotSize{n: k, from: "the operator's LLAMA_ARG_N_PARALLEL=" + v, by: "LLAMA_ARG_N_PARALLEL"}, nil
	}
	if n <= 1 { // one request at a time: the engine's own count serves it
		return args, slotSize{}, nil
	}
	out := config.Field[[]string]{Value: append(slices.Clone(args.Value), "--parallel", strconv.Itoa(fits)), Src: args.Src}
	return out, slotSize{n: fits, from: fmt.Sprintf("--parallel %d, added by bench", fits)}, nil
}

// slotExample is a refused slot count's fix: set (the flag or variable
// with its separator) to the slots eng runs for n requests in flight, or
// undo it and have what withSlots then does, which is no --parallel at one
// request in flight.
func slotExample(eng key.Engine, set, undo string, n int) string {
	if n <= 1 {
		return fmt.Sprintf("e.g. %s1 for 1 request in flight, or %s and the engine keeps its own count", set, undo)
	}
	k := engineSlots(eng, n)
	return fmt.Sprintf("e.g. %s%d for %d requests in flight, or %s and the engine is started with --parallel %d", set, k, n, undo, k)
}

// slotSize is the engine's slot count n (0 unknown), where it came from,
// for the record, and by, the flag or variable that set it ("" where bench
// added --parallel): the queue warning's fix depends on which.
type slotSize struct {
	n        int
	from, by string
}

// slotEnv reads a variable as the engine gets it, and where it was set.
type slotEnv func(name string) (string, config.Source)

// engineEnv is s's engine environment for withSlots: the profile's
// engine.env over the shell's.
func engineEnv(s *config.Settings, getenv func(string) string) slotEnv {
	return func(k string) (string, config.Source) {
		if v, ok := s.EngineEnv.Value[k]; ok {
			return v, s.EnvSrc(k)
		}
		return getenv(k), config.Source{Origin: config.Env, Name: k}
	}
}

// slotWant is what a slot count may be.
const slotWant = "want a whole number of 1 or more (or -1, llama-server's auto)"

// llamaAutoSlots is the slots llama-server's -np -1 (auto, its default)
// gives: "n_parallel is set to auto, using n_parallel = 4" in the captures
// of internal/fakellama/testdata.
const llamaAutoSlots = 4

// slotCount reads flag's slot count v as eng takes it: a whole number of
// 1 or more, or -1, auto: llamaAutoSlots on llama.cpp, the sim's one slot
// (it keeps its default for any count below 1), unknown (0) on mlxcel.
// The sim runs at most sim.MaxSlots whatever -np asks (engineSlots), and
// its own --sim-slots is 1 to sim.MaxSlots or it refuses to start. ok is
// false for anything else.
func slotCount(eng key.Engine, flag, v string) (n int, ok bool) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	switch {
	case err != nil:
		return 0, false
	case flag == "--sim-slots":
		return n, n >= 1 && n <= sim.MaxSlots
	case n < -1 || n == 0:
		return 0, false
	case n >= 1:
		return engineSlots(eng, n), true
	case eng == key.LlamaCpp:
		return llamaAutoSlots, true
	case eng == key.Sim:
		return 1, true
	}
	return 0, true
}

// engineSlots is the slots eng runs for -np n: the sim caps it at
// sim.MaxSlots, so a record and a queue warning count the slots that ran.
func engineSlots(eng key.Engine, n int) int {
	if eng == key.Sim {
		return min(n, sim.MaxSlots)
	}
	return n
}

// sizeSlots gives s's engine its slots for the highest of levels
// (withSlots) and says on log, once and before anything starts, where the
// slots are fewer than a level's requests in flight (bench.Queued): the
// excess requests queue there, so that level measures the slots and not
// the load, and the operator can fix the count before the time is spent.
// It returns the slot count and where it came from, for the record.
func sizeSlots(log *slog.Logger, s *config.Settings, getenv func(string) string, levels []int) (int, string, error) {
	top := levels[len(levels)-1]
	args, sz, err := withSlots(*s, engineEnv(s, getenv), top)
	if err != nil {
		return 0, "", err
	}
	s.EngineArgs = args
	if q := bench.Queued(sz.n, levels); len(q) > 0 {
		at := strings.ReplaceAll(joinLevels(q), ",", ", ")
		log.Warn(fmt.Sprintf("the engine has %d %s (%s) for up to %d requests in flight: at %s in flight the excess requests queue, and the rate measured is the slots', not the load's; %s",
			sz.n, bench.Plural(sz.n, "slot", "slots"), sz.from, top, at, slotAdvice(s.Engine.Value, sz, top)))
	}
	return sz.n, sz.from, nil
}

// slotAdvice is how the operator gives eng's engine, of sz slots, the
// slots for n requests in flight. It follows what set the count (sz.by)
// and what the engine reads: the sim takes --sim-slots over -np and runs
// at most sim.MaxSlots, and only llama-server reads LLAMA_ARG_N_PARALLEL,
// so advice naming -np under --sim-slots, or the variable elsewhere,
// would change nothing.
func slotAdvice(eng key.Engine, sz slotSize, n int) string {
	var most string
	if k := engineSlots(eng, n); k < n {
		most = fmt.Sprintf("the sim decodes at most %d requests at once, so above %d in flight they queue whatever its slots", k, k)
		if sz.n >= k {
			return most
		}
		most, n = most+"; ", k
	}
	switch {
	case sz.by == "--sim-slots":
		return most + fmt.Sprintf("give it %d slots: `-- --sim-slots %d` after the flags, which wins over a profile's and over -np", n, n)
	case sz.by == "LLAMA_ARG_N_PARALLEL":
		return most + fmt.Sprintf("give it %d slots: LLAMA_ARG_N_PARALLEL=%d where it is set (a profile's engine.env wins over the shell's), or `-- -np %d` after the flags, which llama-server takes over the variable; or unset it and the engine is started with --parallel %d", n, n, n, n)
	case eng == key.LlamaCpp:
		return most + fmt.Sprintf("give it %d slots: `-- -np %d` after the flags, which wins over a profile's; or give neither -np nor LLAMA_ARG_N_PARALLEL and the engine is started with --parallel %d", n, n, n)
	}
	return most + fmt.Sprintf("give it %d slots: `-- -np %d` after the flags, which wins over a profile's; or drop %s and the engine is started with --parallel %d", n, n, cmp.Or(sz.by, "-np"), n)
}

func fileSHA(path string) string {
	if path == "" {
		return ""
	}
	fh, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer fh.Close()
	h := sha256.New()
	if _, err := io.Copy(h, fh); err != nil {
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))
}

// starter starts one bench arm through the same plan, adapter and
// supervisor as serve.
type starter struct {
	deps     plan.Deps // facts probed once for the whole bench
	e        *Env
	l        *loaded
	settings config.Settings
	opts     instance.Options
	// log says an engine start or width check that lasts (waitlog).
	log *slog.Logger
	// anyPort: the base port is the default, not the operator's, so each
	// arm takes a free loopback port drawn at random below the ephemeral range (a shared host's
	// other servers, or another bench, sit on the default ports).
	anyPort bool
	// mu guards given: the ports handed out in this run, so that two arms
	// started at once never get the same one before either engine binds.
	mu    sync.Mutex
	given map[int]bool
	pick  func() (int, error) // armPortPick; a test's own
}

func (st *starter) start(ctx context.Context, arm bench.ArmSpec, port int) (bench.Server, error) {
	s := st.settings
	s.Port = config.Field[int]{Value: port, Src: config.Source{Origin: config.Flag, Name: "bench"}}
	s.Host = config.Field[string]{Value: "127.0.0.1"}
	o := plan.Options{}
	switch arm.Kind {
	case "classic":
		o.ClassicArm = true
	default:
		// default, policy and width arms all run their arm's width
		// explicitly: the default arm's is the engine's own default
		o.WidthOverride = arm.Width
	}
	p, err := plan.Build(ctx, s, st.l.Policy, st.deps, o)
	if err != nil {
		return nil, badInputErr(err)
	}
	// The port is picked after the plan (which may run the engine's
	// --help), right before it is checked: picked before, another run
	// took it meanwhile ("address already in use" in a tier-2 run). A
	// picked port found taken at the check is picked again: a tier-1 run
	// in 20 found a port taken between its pick and its check (21002).
	built := p
	if _, err := st.armPortChecked(port, func(free int) error {
		if p, err = atPort(built, free); err != nil {
			return err
		}
		return serve.Launchable(p, true)
	}); err != nil {
		return nil, err
	}
	which := "the classic arm's engine"
	if arm.Kind != "classic" {
		which = fmt.Sprintf("the width-%d arm's engine", arm.Width)
	}
	eo := st.opts
	eo.Log, eo.Name = st.log, which
	r, err := instance.Start(ctx, p, eo)
	if err != nil {
		err = serve.StartErr(err)
		if r != nil {
			return benchServer{r}, err
		}
		return nil, err
	}
	if arm.Kind != "classic" {
		end := waitlog.Start(st.log, nil, waitlog.For(which+"'s width check", instance.CheckBound(s.Engine.Value), ", then it runs unverified"))
		r.Verify(ctx, true)
		end()
	}
	return benchServer{r}, nil
}

// benchServer is an engine instance as the bench harness reads it.
type benchServer struct{ *instance.Engine }

// Diagnostics converts the engine's diagnostics lines to bench's.
func (s benchServer) Diagnostics() []bench.Diag {
	ds := s.Engine.Diagnostics()
	out := make([]bench.Diag, 0, len(ds))
	for _, d := range ds {
		out = append(out, bench.Diag{Rounds: d.Rounds, Proposed: d.ProposedTokens, Accepted: d.AcceptedTokens, SyncMS: d.TargetArgmaxSyncMS, DecodeMS: d.DecodeMS})
	}
	return out
}

// armPort is the port an arm listens on: base port + index when the
// operator gave the base port, else a free loopback port drawn at random below the ephemeral range.
// Scanning up from the default base port, two benches (or tunes) on one
// host both found 18790 free and the second engine failed to bind (tier 2
// failed 3 of 13 runs so, two at once in one `go test ./...`).
func (st *starter) armPort(port int) int {
	if !st.anyPort {
		return port
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	pick := st.pick
	if pick == nil {
		pick = armPortPick
	}
	for range 16 { // a pick may be one handed out already
		p, err := pick()
		if err != nil {
			break
		}
		if !st.given[p] {
			if st.given == nil {
				st.given = map[int]bool{}
			}
			st.given[p] = true
			return p
		}
	}
	return port
}

// Arm ports are drawn at random below Linux's ephemeral range (32768 up),
// which outgoing connections take from: a kernel-picked port there was
// taken by another process between the pick and the engine's bind (tier 2
// failed 1 of 7 runs so, port 33247), as scanning up from 18790 collided
// with a second bench (3 of 13 runs).
const armPortLo, armPortHi = defaults.BenchArmPortLo, defaults.BenchArmPortHi

// armPortChecked is armPort with the arm's check (check, on the port it
// got): a picked port found taken at the check is picked again, up to
// armPortTries ports; a port the operator gave is checked once. Taken is
// the check's own answer (EADDRINUSE), not a second look: a port held for
// an instant by another process's free-port probe was free again at the
// second look, and the arm failed (a CI run: "port 20121 … address
// already in use").
func (st *starter) armPortChecked(port int, check func(int) error) (int, error) {
	for try := 1; ; try++ {
		free := st.armPort(port)
		err := check(free)
		if err == nil || !st.anyPort || try == armPortTries || !errors.Is(err, syscall.EADDRINUSE) {
			return free, err
		}
		if st.log != nil {
			st.log.Info("an arm's port was taken between its pick and its check; picking another", "port", free)
		}
	}
}

// armPortTries is how many ports an arm is given before a port found
// taken at its check fails the arm.
const armPortTries = 3

// armPortPick draws a free loopback port in [armPortLo, armPortHi).
func armPortPick() (int, error) {
	var err error
	for range 64 {
		p := armPortLo + rand.IntN(armPortHi-armPortLo)
		if err = serve.PortFree("127.0.0.1", p); err == nil {
			return p, nil
		}
	}
	return 0, fmt.Errorf("no free loopback port in %d-%d: %w", armPortLo, armPortHi-1, err)
}

// atPort is p with its engine on 127.0.0.1:port: the plan's command with
// its listen address filled in (engine.Launch.At), the settings saying so.
func atPort(p *plan.Plan, port int) (*plan.Plan, error) {
	l, err := p.Launch.At("127.0.0.1", port)
	if err != nil {
		return nil, err
	}
	np := *p
	np.Launch = l
	np.Settings.Port = config.Field[int]{Value: port, Src: config.Source{Origin: config.Flag, Name: "bench"}}
	return &np, nil
}

// redactRecord masks secrets in what a record keeps of the engines and
// their output: each arm's command line, last log lines and status, the
// notes and the probe's error. Numbers are left alone.
func redactRecord(rec *record.Record, r *secret.Redactor) {
	for i := range rec.Arms {
		a := &rec.Arms[i]
		if a.Argv != nil {
			a.Argv = secret.MaskArgv(a.Argv)
		}
		for j, l := range a.LastLog {
			a.LastLog[j] = r.String(l)
		}
		a.StatusReason = r.String(a.StatusReason)
	}
	for i, n := range rec.Notes {
		rec.Notes[i] = r.String(n)
	}
	if rec.ProbeCheck != nil {
		rec.ProbeCheck.Error = r.String(rec.ProbeCheck.Error)
	}
}

// Validate refuses --engines outside 2-20 before anything starts (it
// counts for a load sweep only; see checkEngines).
func (c *BenchCmd) Validate() error { return checkEngines(c.Engines) }
