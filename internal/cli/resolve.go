package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/speclaunch/speclaunch/internal/config"
	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/plan"
	"github.com/speclaunch/speclaunch/internal/quote"
	"github.com/speclaunch/speclaunch/internal/schedule"
	"github.com/speclaunch/speclaunch/internal/secret"
	"github.com/speclaunch/speclaunch/internal/serve"
	"github.com/speclaunch/speclaunch/internal/width"
)

// ResolveCmd prints the resolution and the engine command; it starts nothing.
type ResolveCmd struct {
	LaunchFlags `embed:""`
	ListenFlags `embed:""`
	JSON        bool `help:"Print JSON for machines instead of text."`
	// As serve's: resolve then says whether serve would adapt this width.
	Adapt bool `negatable:"" help:"Ask as serve --adapt would: say whether the width would be learned from live traffic at serve time, and if not why (docs/adaptive.md)."`
	Proxy bool `negatable:"" default:"true" help:"As serve's --proxy; --no-proxy says serve would not adapt."`
}

// Run implements `speclaunch resolve`.
func (c *ResolveCmd) Run(e *Env) error {
	l, p, err := c.hypothetical(e, plan.Options{})
	if err != nil {
		if l != nil && !c.JSON { // no notes come: the notices said before the error, as serve --dry-run does
			for _, n := range l.Notices {
				fmt.Fprintln(e.Stderr, n.Level+": "+n.Msg)
			}
		}
		return err
	}
	if c.JSON {
		return writeJSON(e.Stdout, resolutionJSON(p, l.Notices))
	}
	writeResolution(e.Stdout, p, l.Notices)
	return nil
}

// hypothetical loads the settings and builds the plan the way resolve and
// policy explain answer: a drafter kind without a draft model is asked
// about, not turned off. o holds the caller's own options (explain's
// NoCommand).
func (f *LaunchFlags) hypothetical(e *Env, o plan.Options) (*loaded, *plan.Plan, error) {
	if err := f.checkArgs(e); err != nil {
		return nil, nil, err
	}
	l, err := e.load(f.input(e, nil, e.Passthrough))
	if err != nil {
		return nil, nil, err
	}
	o.Hypothetical = true
	p, err := build(e, l, o)
	return l, p, err
}

// checkArgs refuses stray positional arguments: engine args go after --;
// a value after a boolean flag (--proxy false) is to be joined to it.
func (f *LaunchFlags) checkArgs(e *Env) error {
	if len(f.EngineArgs) > 0 {
		a := f.EngineArgs[0]
		if strings.HasSuffix(a, ".toml") {
			// "profile validate my.toml": a profile is a flag, not a positional.
			return usage(fmt.Errorf("unexpected argument %q", a), "a profile is named with --profile: --profile "+a)
		}
		if plain, _, dashed := secret.PlainDashes(a); dashed {
			// "—api-key K": a flag typed with another dash (a word
			// processor's); after -- it is no flag either, and a key
			// flag is refused there.
			name, _, _ := strings.Cut(plain, "=")
			return usage(fmt.Errorf("unexpected argument %q", a), "type "+name+" with ASCII dashes")
		}
		if flag := boolFlagBefore(e, a); flag != "" {
			return usage(fmt.Errorf("unexpected argument %q after %s", a, flag), "a boolean flag takes its value after =: "+flag+"="+a)
		}
		cmd := "serve"
		if e.kctx != nil && e.kctx.Selected() != nil {
			cmd = e.kctx.Selected().Path() // tune's example was serve's
		}
		return usage(fmt.Errorf("unexpected argument %q", a), "engine arguments go after --, e.g. speclaunch "+cmd+" --profile P -- --ctx-size 8192")
	}
	return nil
}

// boolFlagBefore is the boolean flag typed just before the stray argument
// a when a reads as a boolean (--proxy false: Kong took --proxy for
// true and false for an engine argument), else "".
func boolFlagBefore(e *Env, a string) string {
	if e == nil || e.kctx == nil {
		return ""
	}
	if _, err := config.ParseBool(a); err != nil {
		return ""
	}
	args := e.kctx.Args
	i := slices.Index(args, a)
	if i <= 0 {
		return ""
	}
	prev := args[i-1]
	owned, _ := ownedFlags(e.kctx.Selected())
	if n, ok := owned[prev]; ok && n == 0 {
		return prev
	}
	return ""
}

// bucketSource names where a bucket came from, the operator's flag,
// variable or file:line for an operator schedule.
func bucketSource(b schedule.Bucket, s config.Settings) string {
	if b.Source != string(width.Override) {
		return b.Source
	}
	switch {
	case s.Schedule.Set():
		return "override from " + s.Schedule.Src.String()
	case s.Width.Set():
		return "override from " + s.Width.Src.String()
	}
	return b.Source
}

// writeSchedule lists a schedule of several widths, one bucket a line.
func writeSchedule(row func(k, v string), p *plan.Plan) {
	r, s := p.Resolution, p.Settings
	if len(r.Schedule) < 2 || r.Schedule.IsFlat() {
		return
	}
	pad := 0 // the widths line up: "1 request in flight:" is shorter than "2+ requests in flight:"
	for _, b := range r.Schedule {
		pad = max(pad, len(schedule.InFlight(b.Range()))+1)
	}
	for i, b := range r.Schedule {
		k := ""
		if i == 0 {
			k = "schedule"
		}
		w := fmt.Sprintf("width %d", b.Width)
		if b.Width <= schedule.Off {
			w = "width 1 (speculation off)"
		}
		row(k, fmt.Sprintf("%-*s %s (%s)", pad, schedule.InFlight(b.Range())+":", w, bucketSource(b, s)))
	}
	row("", scheduleUse(p))
}

// scheduleUse says what serve does with a schedule of several widths (""
// for one width): the engine takes it, or serve follows it, or why
// neither (serve.FollowOff, the rule serve applies).
func scheduleUse(p *plan.Plan) string {
	r, s := p.Resolution, p.Settings
	switch {
	case len(r.Schedule) < 2 || r.Schedule.IsFlat():
		return ""
	case p.RunsOneWidth():
		return fmt.Sprintf("%s takes no schedule: it runs the width for one request in flight at every load (notes say why)", s.Engine.Value)
	case s.Engine.Value == key.VLLM:
		return "vLLM picks the width by batch size itself (num_speculative_tokens_per_batch_size, vLLM 0.24 and later)"
	}
	adapting := s.Adapt.Value && serve.AdaptOff(p, s.Proxy.Value) == ""
	if why := serve.FollowOff(p, s.Proxy.Value, adapting); why != "" {
		return "serve does not follow it: " + why
	}
	return "serve starts at the width for one request in flight and follows the schedule by its own count of requests in flight (docs/engines.md)"
}

func writeResolution(w io.Writer, p *plan.Plan, notices []config.Notice) {
	r, f, s := p.Resolution, p.Facts, p.Settings
	fmt.Fprintln(w, p.Headline())
	row := func(k, v string) { // one line each: a path's control characters escaped
		fmt.Fprintf(w, "  %-11s %s\n", k, strings.ReplaceAll(quote.Controls(v), "\n", `\n`))
	}
	if r.Source == width.Off && r.OnSource != "" {
		// A schedule off at one request: its rows are the schedule's, said
		// as they are for one that starts speculative.
		r.Source = r.OnSource
	}
	if r.Source != width.Off {
		src := string(r.Source)
		if r.Source == width.Override {
			src += " from " + s.Width.Src.String()
			if s.Schedule.Set() {
				src = string(r.Source) + " from " + s.Schedule.Src.String()
			} else if s.Width.Src.Origin == 0 {
				src = string(r.Source)
			}
			if s.WidthNote != "" {
				src += " (" + s.WidthNote + ")"
			}
		}
		row("source", src)
		writeSchedule(row, p)
		switch {
		case f.Hypothetical:
			row("drafter", fmt.Sprintf("%s (hypothetical: no draft model given, answering for the kind from %s)", f.Drafter, f.DrafterSource))
		case f.Embedded:
			row("drafter", fmt.Sprintf("%s (%s), %s", f.Drafter, f.DrafterSource, f.DrafterFrom))
		default:
			row("drafter", fmt.Sprintf("%s (%s) %s", f.Drafter, f.DrafterSource, s.DraftModel.Value))
		}
		row("key", fmt.Sprintf("engine=%s drafter=%s capability=%s quant=%s", r.Key.Engine, r.Key.Drafter, r.Key.Capability, r.Key.Quant))
		if r.Entry != nil {
			row("record", r.Entry.RecordPath()) // a tuned entry's: beside its layer, not the working directory
		}
	}
	row("engine", engineLine(p))
	gpu := f.CapabilityStr
	if f.Capability.Known() {
		gpu = fmt.Sprintf("%s (%s)", f.Capability.SM(), f.CapSource)
	} else if f.CapNote != "" {
		gpu = fmt.Sprintf("no CUDA device: %s", f.CapNote)
	} else {
		gpu = "no CUDA device (" + f.CapSource + ")"
	}
	if len(f.GPUs) > 0 {
		names := make([]string, len(f.GPUs))
		for i, g := range f.GPUs {
			names[i] = fmt.Sprintf("%d %s", g.Index, g.Name)
		}
		gpu += "; " + strings.Join(names, ", ")
		if f.Driver != "" {
			gpu += "; driver " + f.Driver
		}
	}
	row("gpu", gpu)
	target := s.Model.Value
	if target == "" {
		target = "(none)"
	}
	row("target", fmt.Sprintf("%s, quant %s (%s)", target, f.Quant, f.QuantSource))
	switch {
	case s.Adapt.Value:
		row("adaptive", adaptNote(p).Note)
	case s.Adapt.Set(): // set false by a layer (--no-adapt, MLXCEL_ADAPT=0, the profile): said, with where
		row("adaptive", "off ("+s.Adapt.Src.String()+")")
	}
	row("serving", servingLine(p))
	writeLaunch(w, p)
	writeNotes(w, p, notices)
}

// writeNotes writes what the load and the plan say beside a resolution
// (an empty tuned layer, a variable that lost to another), as resolve and
// policy explain print it: the notes their JSON carries.
func writeNotes(w io.Writer, p *plan.Plan, notices []config.Notice) {
	if len(notices) == 0 && len(p.Warnings) == 0 && len(p.Notes) == 0 {
		return
	}
	fmt.Fprintln(w, "notes:")
	for _, n := range notices {
		fmt.Fprintf(w, "  %s: %s\n", n.Level, n.Msg)
	}
	for _, m := range p.Notes {
		fmt.Fprintf(w, "  info: %s\n", m)
	}
	for _, m := range p.Warnings {
		fmt.Fprintf(w, "  warn: %s\n", m)
	}
}

func engineLine(p *plan.Plan) string {
	f := p.Facts
	s := string(p.Settings.Engine.Value)
	bin := f.Binary
	if f.BinaryPath != "" {
		bin = f.BinaryPath
	} else if bin != "" && p.Settings.Engine.Value != "sim" {
		bin += ", not found on PATH"
	}
	if bin != "" {
		s += " (" + bin + ")"
	}
	if f.Caps.Version != "" {
		s += " version " + f.Caps.Version
	}
	if f.Caps.Spelling != "" {
		s += ", flag spelling " + string(f.Caps.Spelling)
	}
	if src := p.Settings.Engine.Src; !p.Settings.Engine.Set() && src.Name != "" {
		s += "; " + src.Name + " (--engine to choose)"
	}
	return s
}

// ResolutionJSON is resolve --json's shape; fields only ever get added.
// Keys are snake_case (facts.pair and facts.gpus printed Go's field names
// until they were given tags).
type ResolutionJSON struct {
	Width     int               `json:"width"`
	Speculate bool              `json:"speculative"`
	Source    string            `json:"source"`
	Reason    string            `json:"reason"`
	Headline  string            `json:"headline"`
	Key       map[string]string `json:"key"`
	Entry     *EntryJSON        `json:"entry"`
	Facts     plan.Facts        `json:"facts"`
	// Argv is the engine's command as serve starts it: behind the proxy
	// it listens on 127.0.0.1:PORT, a loopback port picked at start.
	Argv       []string          `json:"argv"`
	EnvSet     map[string]string `json:"env_set"`
	EnvRemoved []string          `json:"env_removed"`
	// EnvInherited is the engine's own variables it inherits as they are
	// (the text's "# inherited" lines), masked as the text masks them.
	EnvInherited map[string]string  `json:"env_inherited"`
	Settings     map[string]Setting `json:"settings"`
	Notices      []string           `json:"notices"`
	Warnings     []string           `json:"warnings"`
	Adapt        AdaptJSON          `json:"adapt"`
	// Schedule is the answer at every load, each bucket with its source;
	// Width is its bucket at Load (the launch's: one request in flight),
	// or its widest for an engine that takes the schedule itself.
	Schedule []BucketJSON `json:"schedule"`
	Load     int          `json:"load,omitempty"`
	// Follow says what serve does with a schedule of several widths, as
	// the text's line under the buckets; absent for one width.
	Follow string `json:"follow,omitempty"`
}

// BucketJSON is one bucket of a schedule: lo to hi requests in flight (hi
// 0 = no upper bound) run at width (1 = speculation off).
type BucketJSON struct {
	Lo     int    `json:"lo"`
	Hi     int    `json:"hi"`
	Width  int    `json:"width"`
	Source string `json:"source"`
}

// AdaptJSON says whether serve would adapt this width from live traffic.
type AdaptJSON struct {
	Enabled bool   `json:"enabled"`
	Note    string `json:"note"`
}

// adaptNote is resolve's line about the adaptive width: serve starts at
// the resolved width and may move from it.
func adaptNote(p *plan.Plan) AdaptJSON {
	if why := serve.AdaptOff(p, p.Settings.Proxy.Value); why != "" {
		return AdaptJSON{Note: "off: " + why}
	}
	return AdaptJSON{Enabled: true, Note: "on (" + p.Settings.Adapt.Src.String() + "): serve starts at this width, probes the cost curve and switches to the width live traffic favours (docs/adaptive.md)"}
}

// EntryJSON is the policy entry that applied.
type EntryJSON struct {
	ID       string  `json:"id"`
	Width    int     `json:"width"`
	Schedule [][]int `json:"schedule,omitempty"`
	RunnerUp int     `json:"runner_up,omitempty"`
	Pin      string  `json:"pin"`
	Record   string  `json:"record"`
	Origin   string  `json:"origin"`
}

// Setting is one effective setting and where it came from.
type Setting struct {
	Value  any    `json:"value"`
	Source string `json:"source"`
}

func resolutionJSON(p *plan.Plan, notices []config.Notice) ResolutionJSON {
	r := p.Resolution
	out := ResolutionJSON{
		Width: r.Width, Speculate: r.Source != width.Off, Source: string(r.Source), Reason: r.Reason, Headline: p.Headline(),
		Key:   map[string]string{"engine": string(r.Key.Engine), "drafter": string(r.Key.Drafter), "capability": r.Key.Capability.String(), "quant": string(r.Key.Quant)},
		Facts: p.Facts, Argv: secret.MaskArgv(engineArgv(p)), EnvSet: secret.MaskEnvMap(p.Launch.EnvSet), EnvRemoved: p.Launch.EnvRemoved,
		EnvInherited: shownInherited(p),
		Settings:     settingsMap(p.Settings), Notices: []string{}, Warnings: append([]string{}, p.Warnings...),
		Adapt: adaptNote(p),
	}
	if out.EnvSet == nil {
		out.EnvSet = map[string]string{}
	}
	if out.EnvRemoved == nil {
		out.EnvRemoved = []string{}
	}
	if r.Entry != nil {
		out.Entry = &EntryJSON{ID: r.Entry.ID, Width: r.Entry.Width, Schedule: r.Entry.Schedule.Triples(), RunnerUp: r.Entry.RunnerUp, Pin: r.Entry.Pin, Record: r.Entry.Record, Origin: r.Entry.Origin}
	}
	out.Notices = noticeLines(notices)
	for _, m := range p.Notes {
		out.Notices = append(out.Notices, "info: "+m)
	}
	out.Schedule, out.Load, out.Follow = []BucketJSON{}, r.Load, scheduleUse(p)
	for _, b := range r.Schedule {
		out.Schedule = append(out.Schedule, BucketJSON{Lo: b.Lo, Hi: b.Hi, Width: b.Width, Source: bucketSource(b, p.Settings)})
	}
	return out
}

// noticeLines are notices as a command's JSON carries them, one
// "LEVEL: message" string each, as its text prints them; [] for none.
func noticeLines(notices []config.Notice) []string {
	out := []string{}
	for _, n := range notices {
		out = append(out, n.Level+": "+n.Msg)
	}
	return out
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
