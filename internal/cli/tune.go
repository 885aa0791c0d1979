package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/speclaunch/speclaunch/internal/bench"
	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/plan"
	"github.com/speclaunch/speclaunch/internal/policy"
	"github.com/speclaunch/speclaunch/internal/record"
	"github.com/speclaunch/speclaunch/internal/safefile"
	"github.com/speclaunch/speclaunch/internal/schedule"
	"github.com/speclaunch/speclaunch/internal/width"
)

// TuneCmd measures the operator's own pair at several loads and writes the
// schedule it earns into the tuned layer (docs/schedule.md).
type TuneCmd struct {
	LaunchFlags `embed:""`

	Levels  string `help:"Load levels to measure: concurrent clients, ascending (each level's width covers the loads up to the next) (default 1,2,4,8)." default:"1,2,4,8" placeholder:"N,N,..." group:"Tune"`
	Widths  string `help:"Widths to measure besides classic, the engine's default and the policy's width where it differs, as bench's." placeholder:"W,W,..." group:"Tune"`
	Engines int    `help:"Fresh engines per width, 2 to 20, so the spread between engines is measured (default 3)." default:"3" placeholder:"N" group:"Tune"`
	Window  string `help:"Length of one measured window per engine and level, 100ms to 10m (default 5s; 1s on the sim)." placeholder:"DUR" group:"Tune"`
	// As bench's (its help, word for word): without it an operator could
	// not keep tune's engines inside a port range.
	BasePort int  `help:"First loopback port for arm servers (arm i on base+i); without it each arm draws its own below the ephemeral range, so two benches on one host never collide." placeholder:"PORT" group:"Tune"`
	JSON     bool `help:"Progress as JSON lines on stdout, for machines." group:"Tune"`
}

// The sim's windows: its rates follow a cost model with 1% noise per
// round, so a 1 s window after a 1 s warm-up holds its rate; two windows
// on three engines per width keep a two-level tune on the sim demo pairing
// within 3 minutes (docs/benchmark_results/tune-demo-load-sim-2026-12-05.md
// states the spread between engines it measured).
const (
	tuneSimWarm    = time.Second
	tuneSimWindow  = time.Second
	tuneSimWindows = 2
)

// Run implements `speclaunch tune`.
func (c *TuneCmd) Run(e *Env) error {
	if err := c.checkArgs(e); err != nil { // "—api-key K" dropped, the engines measured open
		return err
	}
	levels, err := parseLevels(c.Levels, "--levels")
	if err != nil {
		return err
	}
	layer, err := c.layerPath(e)
	if err != nil {
		return err
	}
	if err := layerDir(layer, e.Getenv); err != nil {
		return err
	}
	in := c.LaunchFlags.input(e, nil, e.Passthrough)
	if _, err := os.Stat(layer); err != nil {
		// tune creates the file it names; it is not yet a layer to read
		in.Policies = slices.DeleteFunc(slices.Clone(in.Policies), func(p string) bool { return p == layer })
	}
	e.logJSON = logsJSON(c.LogFormat, e.Getenv)
	l, err := e.load(in)
	if err != nil {
		return err
	}
	t, err := c.prepare(e, l, levels, layer)
	if err != nil {
		return err
	}
	// One tune at a time for this user, whatever file it writes: a tune
	// with --policy other.toml ran beside one writing the tuned layer, and
	// each measured under the other's load.
	lockBeside := layer
	if l := tunedLayer(e.Getenv); l != "" {
		lockBeside = l
	}
	run := safefile.RunLock(lockBeside)
	release, ok, err := safefile.Hold(run)
	switch {
	case err != nil:
		return err
	case !ok:
		return usage(fmt.Errorf("another speclaunch tune is running (its lock %s is held)", run),
			"wait for it to end: two tunes on one GPU measure each other's load")
	}
	defer release()
	if err := t.makeRecords(); err != nil {
		return err
	}
	return t.run(e)
}

// makeRecords makes records/ beside the layer, tune's own
// (docs/schedule.md), where bench.Write makes no directory an operator
// names: under the run lock, so that a tune refused on its flags or on
// another tune's lock leaves nothing behind.
func (t *tuning) makeRecords() error {
	err := os.MkdirAll(filepath.Dir(t.outBase), 0o755)
	if err == nil {
		err = bench.CheckWritable(t.outBase)
	}
	if err != nil {
		return usage(fmt.Errorf("tune cannot write beside %s: %w", t.layer, err), "name a writable file with --policy FILE")
	}
	return nil
}

// layerPath is the file tune writes: the last --policy flag, else the
// user's tuned layer.
func (c *TuneCmd) layerPath(e *Env) (string, error) {
	if n := len(c.Policy); n > 0 {
		return c.Policy[n-1], nil
	}
	if p := tunedLayer(e.Getenv); p != "" {
		return p, nil
	}
	return "", usage(errors.New("tune has nowhere to write: neither XDG_CONFIG_HOME nor HOME is set"), "set one of them, or name the file with --policy FILE")
}

// layerDir refuses, before anything is read or measured, a --policy file
// whose directory does not exist or takes no file: tune made the whole
// tree (--policy /tmp/typo-dir/sub/tuned.toml built typo-dir/sub/records/),
// where profile init and bench --out refuse a missing directory. The
// user's own tuned layer's directory is speclaunch's, made when missing
// (makeRecords).
func layerDir(layer string, getenv func(string) string) error {
	if own := tunedLayer(getenv); own != "" {
		a, errA := filepath.Abs(own)
		b, errB := filepath.Abs(layer)
		if errA == nil && errB == nil && a == b { // ./.config/speclaunch/tuned.toml from $HOME too
			return nil
		}
	}
	return existingDir("flag --policy: "+layer, filepath.Dir(layer))
}

// leftAsItWas says that tune left the layer as it was: "is unchanged",
// or "was not created" for a file that does not exist (an interrupted
// tune said a file that never existed was unchanged).
func leftAsItWas(layer string) string {
	if _, err := os.Lstat(layer); errors.Is(err, fs.ErrNotExist) {
		return layer + " was not created"
	}
	return layer + " is unchanged"
}

// tuning is one tune, planned: everything checked before anything starts.
type tuning struct {
	lo      bench.LoadOptions
	st      *starter
	rec     *record.Record
	outBase string
	layer   string
	profile string       // the profile tune ran on, "" when none
	entry   policy.Entry // without its schedule
}

// prepare checks everything a tune needs before it starts an engine: the
// key and the pair can be named, the layer parses and its directory takes
// files, and the sweep fits a record.
func (c *TuneCmd) prepare(e *Env, l *loaded, levels []int, layer string) (*tuning, error) {
	s, setAside := measuring(l.Settings)
	l.Settings = s
	if s.Engine.Value == key.VLLM || s.Engine.Value == key.SGLang {
		return nil, usage(fmt.Errorf("tune cannot measure %s: serve hands %s a schedule natively, but the load sweep reads a llama-server-compatible stream", s.Engine.Value, s.Engine.Value), "tune a llama.cpp, mlxcel or sim engine; write a vLLM or SGLang schedule by hand with --draft-schedule (docs/schedule.md)")
	}
	if !plan.HasDrafter(s) {
		return nil, usage(errors.New("tune needs a draft model: a schedule says at which loads to speculate"), "set draft.model in the profile, or --draft-model (llama.cpp: or --spec-type draft-mtp for a target with MTP layers)")
	}
	flags := given(e.kctx)
	for _, f := range []string{"levels", "engines", "window", "json"} {
		delete(flags, f)
	}
	bc := c.bench()
	if c.Widths != "" {
		flags["widths"] = c.Widths
	}
	o, widths, _, _, err := bc.options(e.Ctx, s, l.Profile, flags)
	if err != nil {
		return nil, err
	}
	dp, err := defaultPlan(e, l)
	if err != nil {
		return nil, err
	}
	t := &tuning{layer: layer, profile: s.ProfilePath}
	if t.entry, err = tunedEntry(dp, levels); err != nil {
		return nil, err
	}
	if _, err = readLayer(e.Ctx, layer); err != nil { // refused now, not after the sweep
		return nil, err
	}
	t.outBase = filepath.Join(filepath.Dir(layer), "records", t.entry.ID+"-"+time.Now().UTC().Format("20060102-150405"))
	t.entry.Record = filepath.ToSlash(strings.TrimPrefix(t.outBase, filepath.Dir(layer)+string(filepath.Separator))) + ".md"
	arms, _ := benchArms(dp.Resolution, l.Policy, s.Engine.Value, widths)
	o.Arms, o.APIKey = arms, dp.APIKey()
	if t.lo, err = c.loadOptions(e, o, levels, s.Engine.Value); err != nil {
		return nil, err
	}
	log := newLogger(e.logTo(), e.secrets, s.LogFormat.Value, s.LogLevel.Value, e.Getenv)
	if t.lo.Slots, t.lo.SlotsFrom, err = sizeSlots(log, &s, e.Getenv, levels); err != nil {
		return nil, err
	}
	t.st = newStarter(e, l, s, dp, bc.drawsArmPorts(l.Profile))
	t.rec = bc.identity(e, dp, sayAside(t.st.log, nil, setAside))
	t.rec.Name = filepath.Base(t.outBase)
	t.rec.Title = fmt.Sprintf("Tune: %s on this pair under load (%s clients)", t.rec.Key.Engine, joinLevels(levels))
	return t, nil
}

// bench is the bench command tune runs: every flag the two share
// (--json was once left out here, and tune printed nothing on stdout).
func (c *TuneCmd) bench() *BenchCmd {
	return &BenchCmd{LaunchFlags: c.LaunchFlags, Widths: c.Widths, Engines: c.Engines, Window: c.Window, BasePort: c.BasePort, JSON: c.JSON}
}

// loadOptions are the sweep's options: bench's, and on the sim the two
// windows above, 1 s long unless --window is given. --window sets a
// window's length, not their count: with it, a sim tune ran bench's three
// while docs/schedule.md and its refusal of a long window said two.
func (c *TuneCmd) loadOptions(e *Env, o bench.Options, levels []int, eng key.Engine) (bench.LoadOptions, error) {
	bc := c.bench()
	if eng == key.Sim {
		bc.windows = tuneSimWindows
	}
	lo, err := bc.loadOptions(e, o, levels)
	if err != nil {
		return lo, err
	}
	if eng == key.Sim && c.Window == "" {
		lo.Warm, lo.Window = tuneSimWarm, tuneSimWindow
	}
	return lo, nil
}

// tunedEntry is the entry a tune of this launch writes, less its schedule
// and record: keyed on the policy key and the pair (content hashes and
// engine pin). A key the policy cannot hold is refused before measuring.
func tunedEntry(dp *plan.Plan, levels []int) (policy.Entry, error) {
	k := dp.Resolution.Key
	switch {
	case !k.Capability.Known():
		return policy.Entry{}, usage(errors.New("tune needs the GPU's compute capability to key what it measures, and none was found"), "run it on the GPU host, or give --capability X.Y (profile gpu.capability)")
	case k.Quant == key.QuantUnknown || k.Quant == "":
		return policy.Entry{}, usage(errors.New("tune needs the target's quantization to key what it measures, and it could not be read"), "give --quant (profile model.quant)")
	}
	s := dp.Settings
	pair, err := plan.PairOf(s.Engine.Value, s.Model.Value, s.DraftModel.Value, dp.Facts.Caps)
	if err != nil {
		return policy.Entry{}, usage(fmt.Errorf("tune keys its schedule to the models' content, and %w", err), "check --model and --draft-model name readable files")
	}
	id := tunedID(k, pair)
	note := fmt.Sprintf("speclaunch tune at loads %s", joinLevels(levels))
	if s.Engine.Value == key.Sim {
		note += " on the sim engine: SIMULATED, a stand-in for trying tune; never a measurement of a GPU"
	}
	return policy.Entry{ID: id, Key: k, Pin: pair.Pin, Pair: pair, Tuned: time.Now().UTC().Format("2006-01-02"), Note: note}, nil
}

// tunedID names a tuned entry by all it is keyed on, the GPU and the
// target's format as well as the pair: a pair tuned on a second GPU (a
// home directory shared by hosts) is a second entry. With the pair alone
// in the id, WithTuned took the second tune for a re-run and dropped the
// first GPU's schedule.
func tunedID(k key.Key, pair policy.Pair) string {
	return fmt.Sprintf("tuned-%s-%s-%s-sm%d%d-%s", k.Engine, pair.Target[:8], pair.Draft[:8], k.Capability.Major, k.Capability.Minor, k.Quant)
}

// readLayer reads the tuned layer's entries (a missing or empty file:
// none, as serve reads it). A layer that does not parse, or a link that
// leads nowhere, stops tune before it measures.
func readLayer(ctx context.Context, path string) ([]policy.Entry, error) {
	if _, err := tunedExists(path); err != nil {
		return nil, usage(err, "tune would replace the link with a file, not write where it points: point the link at a file, or remove it")
	}
	var b policy.Budget // one file: its cap alone bounds it
	f, empty, err := b.ReadTuned(ctx, path)
	var se *safefile.Error
	switch {
	case errors.Is(err, fs.ErrNotExist) || empty:
		return nil, nil
	case errors.As(err, &se):
		return nil, usage(fmt.Errorf("the tuned layer %s: %w", path, err), "tune replaces one entry of it: fix or delete the file")
	case err != nil:
		return nil, err
	}
	// tune rewrites the whole file from its tuned entries: an operator's
	// policy file named with --policy would lose its defaults and the
	// fields of measured entries the tuned form does not write.
	where := ""
	if len(f.Defaults) > 0 {
		where = "a [[default]] table (" + f.Defaults[0].Origin + ")"
	}
	back, err := policy.Parse(path, policy.RenderTuned(f.Entries))
	for i, e := range f.Entries {
		switch {
		case where != "":
		case e.Pair.IsZero():
			where = "the measured entry " + e.ID + " (" + e.Origin + ")"
		case err != nil || len(back.Entries) != len(f.Entries) || !sameEntry(e, back.Entries[i]):
			where = "the entry " + e.ID + " (" + e.Origin + "), with fields tune does not write back"
		}
	}
	if where != "" {
		return nil, usage(fmt.Errorf("%s is not a tuned layer: it holds %s, which tune would not keep when it rewrites the file", path, where), layerFix(path))
	}
	return f.Entries, nil
}

// sameEntry: a and b say the same, wherever each was read.
func sameEntry(a, b policy.Entry) bool {
	a.Origin, b.Origin = "", ""
	return reflect.DeepEqual(a, b)
}

// layerFix is what to do with a file tune will not rewrite: the default
// layer is tune's own (move what is yours out of it); a --policy file is
// the operator's (give tune another).
func layerFix(path string) string {
	if filepath.Base(path) == TunedFile {
		return "move your own [[default]] tables and entries into a policy file of yours (--policy, policy.files); leave this file to tune, or delete it"
	}
	return "name a file of its own for tune with --policy (e.g. tuned.toml beside it), and pass both files to serve"
}

// run measures, writes the record, and writes the schedule earned into the
// layer; interrupted, it writes the partial record and leaves the layer
// as it was.
func (t *tuning) run(e *Env) error {
	started := time.Now()
	err := runLoadRecord(e, t.lo, t.st, t.rec, t.outBase)
	switch {
	case errors.Is(err, context.Canceled):
		return exitCode(130, fmt.Errorf("tune interrupted: %s; partial record %s.md", leftAsItWas(t.layer), t.outBase))
	case err != nil:
		return err
	}
	earned := t.rec.Earned
	if earned == nil {
		return fmt.Errorf("tune: %s (%s; record %s.md says why, engine by engine)", t.rec.Verdict.Why, leftAsItWas(t.layer), t.outBase)
	}
	sched, err := schedule.FromTriples(earned.Triples, width.TunedBucket)
	if err != nil {
		return fmt.Errorf("tune earned an invalid schedule %s: %w", earned.Text, err)
	}
	if sched.Max() < key.MinWidth {
		fmt.Fprintln(e.Stderr) // after the progress, before the result
		fmt.Fprintf(resultOut(e, t.lo.JSONProgress), "classic decoding beat the engine's default at every load measured: no schedule is written (%s). Run without a draft model to turn speculation off.\n", leftAsItWas(t.layer))
		return nil
	}
	entry := t.entry
	entry.Schedule, entry.Width = sched, sched.At(1).Width
	if entry.Width < key.MinWidth {
		entry.Width = sched.Max()
	}
	if err := t.write(e.Ctx, entry); err != nil {
		return fmt.Errorf("tune measured %s (record %s.md) but did not write it: %w", sched, t.outBase, err)
	}
	fmt.Fprintln(e.Stderr) // after the progress, before the result
	fmt.Fprintf(resultOut(e, t.lo.JSONProgress), "tuned in %s: %s (%s)%s\nwritten to %s as entry %s; record %s.md\n%s\n",
		time.Since(started).Round(time.Second), sched.Describe(), sched, t.queued(), t.layer, entry.ID, t.outBase, tunedNext(t.layer, t.profile, e.Getenv))
	return nil
}

// queued repeats, beside the schedule written, that its levels with more
// clients than the engine's slots measured the slots (bench.Queued), as
// the warning before the run said: "" where none did.
func (t *tuning) queued() string {
	q := bench.Queued(t.lo.Slots, t.lo.Levels)
	if len(q) == 0 {
		return ""
	}
	return fmt.Sprintf("; at %s in flight the excess requests queued for the engine's slots (%s): tune again with as many slots as clients", strings.ReplaceAll(joinLevels(q), ",", ", "), t.lo.SlotsFrom)
}

// tunedNext says how serve comes to read what tune wrote (by itself from
// the user's tuned layer, or with --policy naming another file) and the
// command that says where it came from: policy explain on the profile tune
// ran on, whose pair the entry answers (without it, explain asks about no
// draft model and answers "speculation off").
func tunedNext(layer, profile string, getenv func(string) string) string {
	explain := "speclaunch policy explain"
	if profile != "" {
		explain += " --profile " + plan.ShellQuote(profile)
	}
	tail := ""
	if profile == "" {
		tail = " with the model flags tune was given"
	}
	if d := tunedLayer(getenv); d != "" && filepath.Clean(d) == filepath.Clean(layer) {
		return "serve on this pair starts at it; `" + explain + "`" + tail + " says where it came from"
	}
	q := plan.ShellQuote(layer)
	return fmt.Sprintf("serve and resolve read it when given --policy %s (or MLXCEL_POLICY); `%s --policy %s`%s says where it came from", q, explain, q, tail)
}

// tuneLockWait bounds how long a tune waits for another process writing
// the same layer (a tune's write takes milliseconds).
const tuneLockWait = 30 * time.Second

// write replaces the pair's entry in the layer under the layer's lock,
// reading the layer again there: another tune may have written it since
// this one began (two at once kept only the last one's entry).
func (t *tuning) write(ctx context.Context, entry policy.Entry) error {
	return safefile.Locked(ctx, t.layer, tuneLockWait, func() error {
		others, err := readLayer(ctx, t.layer)
		if err != nil {
			return err
		}
		return writeLayer(t.layer, policy.WithTuned(others, entry))
	})
}

// writeLayer renders the layer, checks it parses back, and replaces the
// file in one rename: an interruption leaves the old file or the new one.
func writeLayer(path string, entries []policy.Entry) error {
	data := policy.RenderTuned(entries)
	if _, err := policy.Parse(path, data); err != nil {
		return fmt.Errorf("the tuned layer would not parse (a bug; %s): %w", leftAsItWas(path), err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("tuned layer: %w", err)
	}
	if err := safefile.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("tuned layer: %w", err)
	}
	return nil
}

// Validate refuses --engines outside 2-20 before anything starts; 0 was
// taken as the default before, and a sweep ran on 3 engines.
func (c *TuneCmd) Validate() error { return checkEngines(c.Engines) }

// checkEngines is the --engines rule of tune and bench's load sweep.
func checkEngines(n int) error {
	if n < bench.MinEnginesPerArm || n > bench.MaxEnginesPerArm {
		return usage(fmt.Errorf("flag --engines: %d is outside %d to %d fresh engines per width", n, bench.MinEnginesPerArm, bench.MaxEnginesPerArm),
			fmt.Sprintf("give --engines 3 (the default), up to %d: fewer than %d leave the spread between engines unmeasured", bench.MaxEnginesPerArm, bench.MinEnginesPerArm))
	}
	return nil
}
