// Package plan composes one launch: settings and host facts go in, the
// resolved width and the exact engine command come out. It is the single
// path shared by `resolve`, `serve` (and every reload) and `bench`, so what
// `resolve` prints is what `serve` runs. Facts are gathered through Deps so
// that tests substitute the GPU probe, the checkpoint readers and the engine
// detection.
package plan

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/speclaunch/speclaunch/cuda"
	"github.com/speclaunch/speclaunch/engine"
	"github.com/speclaunch/speclaunch/internal/checkpoint"
	"github.com/speclaunch/speclaunch/internal/config"
	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/policy"
	"github.com/speclaunch/speclaunch/internal/quote"
	"github.com/speclaunch/speclaunch/internal/safefile"
	"github.com/speclaunch/speclaunch/internal/schedule"
	"github.com/speclaunch/speclaunch/internal/secret"
	"github.com/speclaunch/speclaunch/internal/width"
)

// Facts are what the launcher learned about the host and the checkpoints,
// each with how it was learned.
type Facts struct {
	Capability    key.Capability `json:"-"`
	CapabilityStr string         `json:"capability"`
	CapSource     string         `json:"capability_source"`
	CapNote       string         `json:"capability_note,omitempty"`
	GPUs          []cuda.GPU     `json:"gpus,omitempty"`
	Driver        string         `json:"driver,omitempty"`

	Quant       key.Quant `json:"quant"`
	QuantSource string    `json:"quant_source"`
	// RepoTarget: the target is a Hugging Face repo id the engine
	// downloads, whose quantization is not read here (QuantSource says so).
	RepoTarget bool `json:"-"`

	Drafter       key.Drafter `json:"drafter,omitempty"`
	DrafterSource string      `json:"drafter_source,omitempty"`
	Hypothetical  bool        `json:"hypothetical,omitempty"`
	// Embedded: the drafter is the target's own layers (EmbeddedDrafter:
	// llama.cpp's MTP with no draft model); DrafterFrom says so.
	Embedded bool `json:"drafter_embedded,omitempty"`
	// DrafterFrom is what drafts: the draft model, or the target's own
	// layers (EmbeddedFrom); "" when nothing does or the drafter is
	// hypothetical.
	DrafterFrom string `json:"drafter_from,omitempty"`

	Declared       int    `json:"declared_width,omitempty"`
	DeclaredReason string `json:"declared_reason,omitempty"`

	// Pair is the model pair by content and the engine's pin, hashed only
	// when the policy holds entries keyed to a pair (speclaunch tune's).
	Pair policy.Pair `json:"pair,omitzero"`

	Binary     string      `json:"binary"`
	BinaryPath string      `json:"binary_path,omitempty"` // "" when not found on this host
	Caps       engine.Caps `json:"engine"`
}

// Plan is one launch, fully decided.
type Plan struct {
	Settings   config.Settings
	Facts      Facts
	Resolution width.Resolution
	// Resolved is the schedule the width precedence gave, kept when the
	// adaptive loop's width replaces it (Options.Adapted): the adaptive
	// controller's safe answer, which a reload may change.
	Resolved schedule.Schedule
	Launch   engine.Launch
	Adapter  engine.Adapter
	Warnings []string
	// Notes are info lines: what the launch does that an operator should
	// know of but need not fix (engine.Launch.Notes).
	Notes []string
	// APIKeys are the keys the engine will require (engine.APIKeySpec: its
	// argv, environment and key files); speclaunch's own requests to it
	// send the first (APIKey). Never printed: see package secret.
	APIKeys []string
}

// APIKey is the key speclaunch's own requests to the engine carry; "" when
// the engine is open.
func (p *Plan) APIKey() string { return secret.First(p.APIKeys) }

// Deps are the plan's windows on the world.
type Deps struct {
	Probe       func(ctx context.Context) cuda.Result
	TargetQuant func(ctx context.Context, path string) (key.Quant, string)
	DrafterKind func(ctx context.Context, path string) (key.Drafter, bool)
	Declared    func(ctx context.Context, kind key.Drafter, path string) checkpoint.Declaration
	DetectLlama func(ctx context.Context, binary string) (engine.Caps, error)
	LookPath    func(string) (string, error)
	Environ     []string
	Self        string // path of this binary, for the sim engine

	// DetectEngine reads a vLLM or SGLang install's version (and vLLM's
	// flag spelling).
	DetectEngine func(ctx context.Context, e key.Engine, binary string) (engine.Caps, error)
}

// RealDeps returns the host's real probes.
func RealDeps() Deps {
	self, _ := os.Executable()
	return Deps{
		Probe:       func(ctx context.Context) cuda.Result { return cuda.Probe(ctx, cuda.Options{}) },
		TargetQuant: checkpoint.TargetQuant,
		DrafterKind: checkpoint.DrafterKind,
		Declared:    checkpoint.Declare,
		DetectLlama: engine.DetectLlama,
		LookPath:    exec.LookPath,
		Environ:     os.Environ(),
		Self:        self,

		DetectEngine: engine.DetectEngine,
	}
}

// Options change what a plan means.
type Options struct {
	// Hypothetical: a drafter kind without a draft model answers for that
	// kind (resolve), instead of meaning "speculation off" (serve).
	Hypothetical bool
	// ClassicArm forces speculation off (bench's classic arm).
	ClassicArm bool
	// WidthOverride forces an operator width (bench's width arms).
	WidthOverride int
	// Adapted is a width serve's adaptive loop chose (1 = speculation
	// off); AdaptReason says why. An operator width still wins.
	Adapted     int
	AdaptReason string
	// Load is the concurrency the width is chosen for: serve following a
	// schedule builds the plan of the bucket it switches to (0 = 1, a
	// launch's first request). An engine that takes the schedule itself
	// (vLLM) ignores it.
	Load int
	// Offline reads no key file and no model file: profile validate
	// --offline checks a profile for another host, whose key files and
	// models are that host's (it warned that the target could not be
	// read, after saying model files are not checked). The rest of the
	// key checks stand.
	Offline bool
	// NoCommand: the caller shows no engine command (policy explain), so
	// a missing target, which leaves none to show, is not a warning.
	NoCommand bool
}

// Build gathers the facts, resolves the width and builds the engine
// command. It fails only on settings the engine cannot run with; missing or
// unreadable checkpoints degrade to "unknown" facts with a warning, as
// upstream mlxcel does.
func Build(ctx context.Context, s config.Settings, pol *policy.Policy, d Deps, o Options) (*Plan, error) {
	ad, err := engine.For(s.Engine.Value)
	if err != nil {
		return nil, err
	}
	p := &Plan{Settings: s, Adapter: ad}
	if o.Offline {
		d.TargetQuant, d.DrafterKind, d.Declared = nil, nil, nil
	}
	speculative, err := p.drafter(ctx, d, o)
	if err != nil {
		return nil, err
	}
	if err := p.capability(ctx, d, speculative); err != nil {
		return nil, err
	}
	if err := p.quant(ctx, d); err != nil {
		return nil, err
	}
	p.engineCaps(ctx, d)
	if speculative && !p.Facts.Hypothetical && s.Model.Value != "" && !o.Offline && // no target: nothing to hash, and the warning below says so
		pol.HasPairs(width.KeyFor(s.Engine.Value, p.Facts.Drafter, p.Facts.Capability, p.Facts.Quant)) {
		p.pair()
	}
	// An interrupt during the facts (a long GGUF header, the model hash)
	// is an interrupt, never a resolution from facts it cut short.
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p.resolve(pol, o, speculative)

	// A hypothetical drafter has no command line to speak of; build the
	// launch only for a real draft model (or none).
	launchRes := p.Resolution
	if p.Facts.Hypothetical {
		launchRes = width.Resolution{Source: width.Off, Reason: "hypothetical drafter: no draft model to launch"}
	}
	if s.Model.Value == "" {
		// resolve may ask about a host without naming a target; there is
		// no command line to show then. The engine arguments and
		// environment are checked all the same, on a stand-in model
		// (profile validate; a container that names the model in
		// LLAMA_ARG_MODEL): serve would refuse them with any model. A
		// target given as llama-server's -hf is the hint's to explain.
		hint := engine.HFRepoHint(s.Engine.Value, s.EngineArgs.Value)
		if _, err := p.command(ad, width.Resolution{Source: width.Off}, d, "MODEL"); err != nil && hint == "" {
			return nil, err
		}
		if !o.NoCommand {
			p.Warnings = append(p.Warnings, "no target model given (--model, LLAMA_ARG_MODEL or model.path)"+hint+": no engine command to show")
		}
		return p, nil
	}
	l, err := p.command(ad, launchRes, d, s.Model.Value)
	if err != nil {
		return nil, err
	}
	p.Launch = l
	p.Warnings = append(p.Warnings, l.Warnings...)
	p.Notes = append(p.Notes, l.Notes...)
	if p.APIKeys, err = launchKeys(ctx, s, l, o.Offline); err != nil {
		return nil, err
	}
	if len(p.APIKeys) == 0 {
		if w := unreadKeyWarning(s, d.Environ); w != "" {
			if !loopbackHost(s.Host.Value) {
				// Reachable from other hosts with no key, where the
				// operator meant one: refused, not warned (a final
				// user pass served 0.0.0.0 open on LLAMA_API_KYE).
				return nil, fmt.Errorf("%s; with host %s (%s) the server would be reachable from other hosts with no key, so this is refused: give the key, or unset that variable", w, s.Host.Value, s.Host.Src)
			}
			p.Warnings = append(p.Warnings, w)
		}
	}
	return p, nil
}

// loopbackHost says whether host is reached from this machine only: a
// loopback address or localhost.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// unreadKeyWarning warns of a variable whose name says it holds the
// engine's API key while the engine reads none from it (a typo such as
// LLAMA_API_KYE, LLAMA_ARG_API_KEY, MLXCEL_API_KEY): in the profile's
// engine.env (named by its file:line) or in the environment speclaunch
// was started in. "" when there is none. Only for an engine with no key.
func unreadKeyWarning(s config.Settings, environ []string) string {
	sp := engine.APIKeySpec(s.Engine.Value)
	tail := fmt.Sprintf("%s reads no API key from it: the engine serves with no API key; %s", s.Engine.Value, secret.KeyFix(sp))
	var prof []string
	for _, k := range slices.Sorted(maps.Keys(s.EngineEnv.Value)) {
		prof = append(prof, k+"="+s.EngineEnv.Value[k])
	}
	if n := secret.UnreadKeyVar(sp, prof); n != "" {
		return fmt.Sprintf("%s: engine.env sets %s, but %s", s.EnvSrc(n), n, tail)
	}
	if n := secret.UnreadKeyVar(sp, environ); n != "" {
		return fmt.Sprintf("%s is set, but %s", n, tail)
	}
	return ""
}

// command builds the engine command of the plan's settings at res for
// model. Where the profile's engine.args and typed ones together are
// refused and the profile's alone are too, the error names the profile's
// file:line.
func (p *Plan) command(ad engine.Adapter, res width.Resolution, d Deps, model string) (engine.Launch, error) {
	run := func(s config.Settings) (engine.Launch, error) {
		spec := LaunchSpec(s)
		spec.Model = model
		spec.EnvApplied = appliedEnv(s, res)
		return ad.Command(spec, res, p.Facts.Drafter, d.Environ, p.Facts.Caps)
	}
	s := p.Settings
	l, err := run(s)
	if err != nil && (errors.Is(err, engine.ErrPassthrough) || errors.Is(err, engine.ErrKeyFlagMisspelt) || errors.Is(err, engine.ErrKeyFlagJoined) || errors.Is(err, engine.ErrKeyFlagDashed)) && s.ProfileArgs.Value != nil {
		alone := s
		alone.EngineArgs = s.ProfileArgs
		if _, perr := run(alone); perr != nil {
			err = perr
		}
	}
	return l, err
}

// appliedEnv are the variables the settings read the width and the
// drafter kind from, where launch res applies them (engine.Spec.EnvApplied):
// speculating, the width the operator's (not a schedule's over it). A
// variable that lost to another setting is not the field's source.
func appliedEnv(s config.Settings, res width.Resolution) []string {
	if res.Source == width.Off {
		return nil
	}
	var out []string
	if res.IsOperator() && !s.Schedule.Set() && s.Width.Src.Origin == config.Env {
		out = append(out, s.Width.Src.Name)
	}
	if s.DraftKind.Src.Origin == config.Env {
		out = append(out, s.DraftKind.Src.Name)
	}
	return out
}

// launchKeys are the API keys the engine of l requires. A key typed as a
// flag is checked where it was given first: the launch hands it to the
// engine in a variable (LLAMA_API_KEY), and a bad one must name the flag.
func launchKeys(ctx context.Context, s config.Settings, l engine.Launch, offline bool) ([]string, error) {
	sp := engine.APIKeySpec(s.Engine.Value)
	flags := secret.Spec{Flags: sp.Flags, Split: sp.Split, Multi: sp.Multi}
	if _, err := secret.Keys(flags, s.EngineArgs.Value, nil, nil); err != nil {
		return nil, keyArgsSource(s, err)
	}
	read := safefile.KeyFileReader(ctx)
	if offline {
		read = func(string) ([]byte, error) { return []byte("offline-stand-in\n"), nil } // another host's file
	}
	keys, err := secret.Keys(sp, l.Argv, l.Env, read)
	var un *secret.UnsendableError
	if errors.As(err, &un) && un.Env != "" {
		if _, ok := s.EngineEnv.Value[un.Env]; ok {
			return nil, fmt.Errorf("%s: engine.env: %w", s.EnvSrc(un.Env), err)
		}
	}
	var kf *secret.KeyNotFileError
	if errors.As(err, &kf) {
		return nil, keyFileSource(s, kf, err)
	}
	if err != nil {
		return nil, keyArgsSource(s, err)
	}
	return keys, nil
}

// keyFileSource names where a key-file value that is not shown
// (secret.KeyNotFileError) was given, when the profile gave it: its
// engine.env variable or its engine.args, by file:line. One given on the
// command line or in the environment is named by its flag or variable
// alone, as the error does.
func keyFileSource(s config.Settings, kf *secret.KeyNotFileError, err error) error {
	if v, ok := s.EngineEnv.Value[kf.From]; ok && v == kf.Value {
		return fmt.Errorf("%s: engine.env: %w", s.EnvSrc(kf.From), err)
	}
	prof := s.ProfileEngineArgs()
	for i, a := range prof.Value {
		name, v, inline := strings.Cut(a, "=")
		if name == kf.From && (inline && v == kf.Value || !inline && i+1 < len(prof.Value) && prof.Value[i+1] == kf.Value) {
			return fmt.Errorf("%s: %w", prof.Src, err)
		}
	}
	return err
}

// keyArgsSource names where a key flag given no key, or a key no client
// can send, came from: the profile's engine.args (file:line) when they
// alone hold it, else the engine arguments typed on the command line.
func keyArgsSource(s config.Settings, err error) error {
	var un *secret.UnsendableError
	isArgs := func(err error) bool {
		return errors.As(err, new(*secret.NoValueError)) || errors.As(err, &un) && un.Flag != ""
	}
	if !isArgs(err) {
		return err
	}
	prof := s.ProfileEngineArgs()
	none := func(string) ([]byte, error) { return nil, nil }
	if _, perr := secret.Keys(engine.APIKeySpec(s.Engine.Value), prof.Value, nil, none); isArgs(perr) {
		return fmt.Errorf("%s: %w", prof.Src, err)
	}
	return fmt.Errorf("%s: %w", s.EngineArgs.Src, err)
}

// LaunchSpec is the part of the settings an engine adapter reads.
func LaunchSpec(s config.Settings) engine.Spec {
	return engine.Spec{
		Binary: s.EngineBinary.Value,
		Model:  s.Model.Value,
		Draft:  s.DraftModel.Value, DraftFrom: s.DraftModel.Src.String(),
		Host: s.Host.Value,
		Port: s.Port.Value, PortFrom: s.Port.Src.String(),
		Args: s.EngineArgs.Value, ArgsFrom: s.EngineArgs.Src.String(),
		Env: s.EngineEnv.Value, EnvFrom: s.EngineEnv.Src.String(),
		EnvKeyFrom: func(k string) string { return s.EnvSrc(k).String() },
	}
}

// EmbeddedDrafter reports whether the settings' target drafts with its
// own layers: no draft model, and a drafter kind the engine runs from the
// target (engine.Embedded: llama.cpp's MTP, --spec-type draft-mtp). Every
// question "is there a drafter" asks it, through HasDrafter.
func EmbeddedDrafter(s config.Settings) bool {
	if s.DraftModel.Value != "" || s.DraftKind.Value == "" {
		return false
	}
	k, err := key.ParseDrafter(s.DraftKind.Value)
	return err == nil && engine.Embedded(s.Engine.Value, k)
}

// HasDrafter reports whether the settings give a drafter: a draft model,
// or the target's own layers (EmbeddedDrafter). Without one, speculation
// is off.
func HasDrafter(s config.Settings) bool {
	return s.DraftModel.Value != "" || EmbeddedDrafter(s)
}

// EmbeddedFrom is how a drafter that is the target's own layers is named
// where a draft model would be.
func EmbeddedFrom(kind key.Drafter) string {
	return "the target's own " + strings.ToUpper(string(kind)) + " layers (no draft model)"
}

// drafter settles whether the launch is speculative and with which drafter
// kind (given, else detected from the checkpoint, else the engine's
// default), and reads the width the drafter checkpoint declares.
func (p *Plan) drafter(ctx context.Context, d Deps, o Options) (speculative bool, err error) {
	s, f := p.Settings, &p.Facts
	hasDraft := HasDrafter(s) && !o.ClassicArm
	f.Embedded = hasDraft && EmbeddedDrafter(s)
	kindGiven := s.DraftKind.Value != ""
	if !hasDraft && kindGiven && o.Hypothetical && !o.ClassicArm {
		f.Hypothetical = true
	}
	speculative = hasDraft || f.Hypothetical
	if !hasDraft && kindGiven && !o.Hypothetical && !o.ClassicArm {
		p.Warnings = append(p.Warnings, fmt.Sprintf("drafter kind %q is set (%s) but no draft model is: speculation is off; %s", s.DraftKind.Value, s.DraftKind.Src, kindFix(s)))
	}
	if !speculative {
		if !o.ClassicArm {
			p.unusedWidth()
		}
		return false, nil
	}
	switch {
	case kindGiven:
		k, err := key.ParseDrafter(s.DraftKind.Value)
		if err != nil {
			return false, &config.Error{Src: s.DraftKind.Src, Msg: "bad drafter kind", Err: err}
		}
		f.Drafter, f.DrafterSource = k, s.DraftKind.Src.String()
		if s.DraftModel.Value != "" && d.DrafterKind != nil {
			if det, ok := d.DrafterKind(ctx, s.DraftModel.Value); ok && det != k && key.CheckSelectable(s.Engine.Value, det) == nil {
				p.Warnings = append(p.Warnings, fmt.Sprintf("drafter kind %s (%s) differs from %s; keeping %s", k, s.DraftKind.Src, checkpoint.KindFrom(s.DraftModel.Value, det), k))
			}
		}
	case d.DrafterKind != nil:
		if det, ok := d.DrafterKind(ctx, s.DraftModel.Value); ok && key.CheckSelectable(s.Engine.Value, det) == nil {
			f.Drafter, f.DrafterSource = det, "detected from the drafter's checkpoint"
		}
	}
	if f.Drafter == "" {
		f.Drafter, f.DrafterSource = key.DefaultDrafter(s.Engine.Value), "the engine's default kind"
	}
	if err := key.CheckSelectable(s.Engine.Value, f.Drafter); err != nil {
		return false, &config.Error{Src: s.DraftKind.Src, Msg: "bad drafter kind", Err: err}
	}
	switch {
	case f.Embedded:
		f.DrafterFrom = EmbeddedFrom(f.Drafter)
	case hasDraft:
		f.DrafterFrom = s.DraftModel.Value
	}
	if s.DraftModel.Value != "" && hasDraft && d.Declared != nil {
		dec := d.Declared(ctx, f.Drafter, s.DraftModel.Value)
		f.Declared, f.DeclaredReason = dec.Width, dec.Reason
		if err := p.checkDeclared(dec); err != nil {
			return false, err
		}
	}
	return true, nil
}

// kindFix is how to give a drafter kind set without a draft model one to
// draft with: for vLLM's and SGLang's MTP, the target itself is the draft
// model (docs/engines.md).
func kindFix(s config.Settings) string {
	k, err := key.ParseDrafter(s.DraftKind.Value)
	if err == nil && k == key.MTP && (s.Engine.Value == key.VLLM || s.Engine.Value == key.SGLang) {
		return fmt.Sprintf("%s drafts with a target's MTP layers when the draft model is the target itself: set --draft-model to the target's path (draft.model = model.path)", s.Engine.Value)
	}
	if s.Engine.Value == key.LlamaCpp {
		return "set --draft-model (draft.model in the profile), or --spec-type draft-mtp for a target with MTP layers"
	}
	return "set --draft-model (draft.model in the profile)"
}

// unusedWidth warns of a width or schedule the operator set for a launch
// with no drafter: speculation is off, so it is not used.
func (p *Plan) unusedWidth() {
	s := p.Settings
	what, src := "", ""
	switch {
	case s.Schedule.Set():
		what, src = "a draft schedule is set", s.Schedule.Src.String()
	case s.Width.Set():
		what, src = fmt.Sprintf("draft width %d is set", s.Width.Value), s.Width.Src.String()
		if s.WidthNote != "" {
			src += ": " + s.WidthNote
		}
	default:
		return
	}
	p.Warnings = append(p.Warnings, fmt.Sprintf("%s (%s) but no drafter is: speculation is off and it is not used; %s", what, src, noDrafterFix(s.Engine.Value)))
}

// noDrafterFix is how to give a launch of engine e a drafter.
func noDrafterFix(e key.Engine) string {
	switch e {
	case key.LlamaCpp:
		return "give a draft model with -md FILE (draft.model in the profile), or --spec-type draft-mtp (draft.kind = \"mtp\") for a target with MTP layers"
	case key.VLLM, key.SGLang:
		return "give a draft model with --draft-model (draft.model in the profile), the target itself with --draft-kind mtp for its MTP layers"
	}
	return "give a draft model with --draft-model (draft.model in the profile)"
}

// checkDeclared names the drafter's config.json when the width it
// declares is none a drafter runs (issue 33: a block_size of 10^9 named no
// file and suggested a fix that did not work; 0, 1 and -1 were dropped
// without a word). Above the range it is an error unless an operator width
// overrides it: upstream would run it. Below (0, 1), or a value upstream
// reads no width from (-1, "4", 3.5), a warning with the fix: the width
// is resolved as if the key were absent, as upstream does for the latter.
func (p *Plan) checkDeclared(dec checkpoint.Declaration) error {
	f, s := &p.Facts, p.Settings
	where := quote.Text(filepath.Join(s.DraftModel.Value, "config.json"), 0)
	if dec.Unread != "" {
		p.Warnings = append(p.Warnings, where+": "+dec.Unread)
	}
	switch {
	case f.Declared > key.MaxWidth && !s.Width.Set():
		return &config.Error{Src: s.DraftModel.Src, Msg: "bad drafter checkpoint", Err: fmt.Errorf("%s declares width %d (%s), above %d, which no drafter runs: fix its block_size, or give the width yourself (--draft-block-size W, 2 to %d)", where, f.Declared, f.DeclaredReason, key.MaxWidth, key.MaxWidth)}
	case f.Declared > key.MaxWidth:
		p.Warnings = append(p.Warnings, fmt.Sprintf("%s declares width %d, above %d; ignored: the operator's width applies", where, f.Declared, key.MaxWidth))
		f.Declared = 0
	case dec.OK && f.Declared < key.MinWidth:
		what := map[bool]string{true: "which would turn speculation off", false: "which no drafter runs"}[f.Declared == 1]
		p.Warnings = append(p.Warnings, fmt.Sprintf("%s: block_size gives width %d, %s; ignored: set a width %d to %d or remove the key", where, f.Declared, what, key.MinWidth, key.MaxWidth))
		f.Declared = 0
	}
	return nil
}

// capability: an override wins; the probe runs only when a measured entry
// could apply.
func (p *Plan) capability(ctx context.Context, d Deps, speculative bool) error {
	s, f := p.Settings, &p.Facts
	switch {
	case s.Capability.Value != "":
		c, err := key.ParseCapability(s.Capability.Value)
		if err != nil {
			return &config.Error{Src: s.Capability.Src, Msg: "bad compute capability", Err: err}
		}
		f.Capability, f.CapSource = c, s.Capability.Src.String()
	case speculative && d.Probe != nil:
		r := d.Probe(ctx)
		f.Capability, f.CapSource, f.CapNote, f.GPUs, f.Driver = r.Capability, "nvidia-smi", r.Reason, r.GPUs, r.Driver
	default:
		f.CapSource = "not probed"
	}
	f.CapabilityStr = f.Capability.String()
	return nil
}

// quant is the target's quantization: an override wins, else the
// checkpoint's; unreadable is unknown, with a warning.
func (p *Plan) quant(ctx context.Context, d Deps) error {
	s, f := p.Settings, &p.Facts
	switch {
	case s.Quant.Value != "":
		q, err := key.ParseQuant(s.Quant.Value)
		if err != nil {
			return &config.Error{Src: s.Quant.Src, Msg: "bad quantization", Err: err}
		}
		f.Quant, f.QuantSource = q, s.Quant.Src.String()
	case s.Model.Value == "":
		f.Quant, f.QuantSource = key.QuantUnknown, "no target model given"
	case d.TargetQuant != nil:
		q, note := d.TargetQuant(ctx, s.Model.Value)
		f.RepoTarget = q == key.QuantUnknown && key.FetchesModel(s.Engine.Value, s.Model.Value)
		if f.RepoTarget {
			note = "a Hugging Face repo id, which the launcher does not download: set model.quant (or --quant) for a measured entry to apply"
		}
		f.Quant, f.QuantSource = q, note
		if q == key.QuantUnknown {
			p.Warnings = append(p.Warnings, fmt.Sprintf("target %s: %s; resolving as an unknown quantization", s.Model.Value, note))
		}
	default:
		f.Quant, f.QuantSource = key.QuantUnknown, "not read"
	}
	return nil
}

// engineCaps finds the engine binary and asks it (llama.cpp, vLLM,
// SGLang) its version and flag spelling; a failed ask is a warning.
func (p *Plan) engineCaps(ctx context.Context, d Deps) {
	s, f := p.Settings, &p.Facts
	f.Binary = s.EngineBinary.Value
	if f.Binary == "" {
		f.Binary = p.Adapter.DefaultBinary()
	}
	f.Caps.Self = d.Self
	if f.Binary != "" && d.LookPath != nil {
		if path, err := d.LookPath(f.Binary); err == nil {
			f.BinaryPath, _ = filepath.Abs(path)
		}
	}
	detect := d.DetectLlama
	if s.Engine.Value != key.LlamaCpp {
		detect = nil
		if (s.Engine.Value == key.VLLM || s.Engine.Value == key.SGLang) && d.DetectEngine != nil {
			detect = func(ctx context.Context, bin string) (engine.Caps, error) {
				return d.DetectEngine(ctx, s.Engine.Value, bin)
			}
		}
	}
	if f.BinaryPath == "" || detect == nil {
		return
	}
	caps, err := detect(ctx, f.BinaryPath)
	if err != nil {
		what := "flag spelling"
		if s.Engine.Value == key.SGLang {
			what = "sglang version" // SGLang has one spelling; the version is the pin
		}
		p.Warnings = append(p.Warnings, fmt.Sprintf("could not read %s's %s: %v", f.BinaryPath, what, err))
		return
	}
	caps.Self = d.Self
	f.Caps = caps
}

// resolve applies the width precedence to the facts; the adaptive loop's
// width replaces all but an operator's.
func (p *Plan) resolve(pol *policy.Policy, o Options, speculative bool) {
	s, f := p.Settings, &p.Facts
	override := s.Width.Value
	if o.WidthOverride > 0 {
		override = o.WidthOverride // bench's and tune's arms, whose settings hold no operator schedule (cli's measuring)
	}
	p.Resolution = width.Resolve(width.Input{
		Engine:      s.Engine.Value,
		HasDrafter:  speculative,
		Drafter:     f.Drafter,
		Override:    override,
		OverrideSrc: s.Width.Src.String(),
		Load:        o.Load,
		// Schedule: the operator's (config keeps it or a width, not both).
		OverrideSchedule: s.Schedule.Value,
		Declared:         f.Declared,
		DeclaredReason:   f.DeclaredReason,
		Capability:       f.Capability,
		Quant:            f.Quant,
		RepoTarget:       f.RepoTarget,
		Policy:           pol,
		EngineVersion:    f.Caps.Version,
		Pair:             f.Pair,
	})
	p.Warnings = append(p.Warnings, p.Resolution.Warnings...)
	p.nativeSchedule()
	p.Resolved = p.Resolution.Schedule
	if o.Adapted > 0 && speculative && !f.Hypothetical && p.Resolution.Source != width.Override {
		p.Resolution = width.AdaptedTo(o.Adapted, o.AdaptReason, p.Resolution.Key)
	}
}

// nativeSchedule hands a schedule of several widths to an engine that
// takes one itself: the launch runs at the schedule's widest width (what
// the engine reports as its width) and the engine picks by batch size.
// An engine version that cannot take it runs the width for the expected
// load (the resolution as is), and its adapter warns.
func (p *Plan) nativeSchedule() {
	r := p.Resolution
	if len(r.Schedule) < 2 || r.Schedule.IsFlat() {
		return
	}
	// The adapter says why where the engine runs one width.
	if ok, _ := engine.TakesSchedule(p.Settings.Engine.Value, p.Facts.Caps); !ok {
		return
	}
	if r.Source == width.Off {
		r.Source, r.Reason = r.OnSource, r.OnReason
	}
	r.Width = r.Schedule.Max()
	p.Resolution = r
}

// SameEngine says b starts the engine a does, so that a change from a to b
// needs no switch. Behind the proxy the engine listens on a loopback port
// of its own, so the public address is not part of its command: moving it
// (a reload of server.port) rebinds the proxy and leaves the engine
// serving.
func SameEngine(a, b *Plan) bool {
	return slices.Equal(EngineArgv(a), EngineArgv(b)) && slices.Equal(a.Launch.Env, b.Launch.Env)
}

// EngineArgv is the command of p's engine as serve starts it: behind the
// proxy at a loopback address (a placeholder port: it is chosen per
// start), without the proxy at the public address.
func EngineArgv(p *Plan) []string {
	if !p.Settings.Proxy.Value {
		return p.Launch.Argv
	}
	if argv, ok := p.Launch.ArgvAt("127.0.0.1", "PORT"); ok {
		return argv
	}
	return p.Launch.Argv
}
