package config

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/problems"
	"github.com/speclaunch/speclaunch/internal/quote"
	"github.com/speclaunch/speclaunch/internal/safefile"
	"github.com/speclaunch/speclaunch/internal/secret"
	"github.com/speclaunch/speclaunch/profiles"
)

// Input is everything Load layers. It is plain data so that Load is a pure
// function of it (plus reading the profile file).
type Input struct {
	// Flags holds the raw values of flags given on the command line, keyed by
	// long name without dashes ("draft-block-size"). Absent = not given.
	Flags map[string]string
	// Spelled is how a flag of Flags was typed where an alias gave it
	// ("draft-kind": "--spec-type"), for its source to name what the
	// operator typed. Absent = its long name.
	Spelled map[string]string
	// Policies are the --policy values, in order.
	Policies []string
	// Passthrough are the engine args after "--".
	Passthrough []string
	// Getenv reads the environment; a set-but-empty variable counts as unset.
	Getenv func(string) string
	// Profile, when non-nil, is used instead of finding one from Flags/env.
	Profile *profiles.Profile
	// Ctx stops reading the profile (Ctrl-C); nil is context.Background.
	Ctx context.Context
	// LookPath finds an engine binary on PATH for the engine's inference
	// (llama-server alone on PATH means llama.cpp); nil = PATH says nothing.
	LookPath func(string) (string, error)
	// EnvNames are the environment's variable names, read through Getenv
	// for the engine's inference (a LLAMA_ARG_* variable); the rows' own
	// names are always read.
	EnvNames []string
}

// flagName is flag f as typed: its alias where one gave it (Spelled),
// else its long name.
func (in Input) flagName(f string) string {
	if n, ok := in.Spelled[f]; ok {
		return n
	}
	return "--" + f
}

type layer struct {
	in      Input
	prof    *profiles.Profile
	notices []Notice
}

// raw picks the winning raw value of a row: flag, then env (first set name
// wins; a disagreement with a lower name is an info notice), then the
// profile (value and file:line), then nothing.
func (l *layer) raw(r Row) (string, Source, bool) {
	return l.pick(r, true)
}

// peek is raw without the notices: for a look at a row before it layers.
func (l *layer) peek(r Row) (string, Source, bool) {
	return l.pick(r, false)
}

func (l *layer) pick(r Row, notify bool) (string, Source, bool) {
	if v, ok := l.in.Flags[r.Flag]; ok && r.Flag != "" && !(r.blank && v == "") {
		src := Source{Flag, l.in.flagName(r.Flag)}
		if notify {
			l.shadowed(r, src.String(), v, 0)
		}
		return v, src, true
	}
	for i, e := range r.Envs {
		if v := l.in.Getenv(e); v != "" {
			if notify {
				l.shadowed(r, e, v, i+1)
			}
			return v, Source{Env, e}, true
		}
	}
	if v := profValue(l.prof, r.Key); v != "" {
		return v, Source{Profile, l.prof.Where(r.Key)}, true
	}
	return "", Source{}, false
}

// shadowed records an info notice for each lower-precedence env name that is
// set to a different value than the winner.
func (l *layer) shadowed(r Row, winner, val string, from int) {
	for _, e := range r.Envs[from:] {
		if v := l.in.Getenv(e); v != "" && v != val && !sameValue(r, v, val) {
			l.notices = append(l.notices, Notice{"info", fmt.Sprintf("%s=%s differs from %s=%s; keeping %s", e, Quoted(v), winner, Quoted(val), winner)})
		}
	}
}

// shadowedParse refuses a variable of r set below the winner (a flag, or
// a name listed before it) whose value does not parse, where the engine
// parses it all the same (parsedBeside): the launcher keeps the winner,
// but the variable is still in the engine's environment, and llama-server
// parses its LLAMA_ARG_* variables even where a flag overrides them,
// refusing to start on a bad one (LLAMA_ARG_PORT=abc beside --port).
// Any other such variable keeps the info line of shadowed: no engine
// reads it (MLXCEL_PORT=tcp://… that a Kubernetes Service named mlxcel
// injects beside LLAMA_ARG_PORT). docs/environment-variables.md says so.
func (l *layer) shadowedParse(r Row, winner Source, e key.Engine, parse func(string) error) error {
	from := 0
	if winner.Origin == Env {
		from = slices.Index(r.Envs, winner.Name) + 1
	} else if winner.Origin != Flag {
		return nil // the profile or a default: no variable is set
	}
	for _, name := range r.Envs[from:] {
		v := l.in.Getenv(name)
		if v == "" || !parsedBeside(e, name) {
			continue
		}
		if err := parse(v); err != nil {
			return &Error{Src: Source{Env, name}, Msg: fmt.Sprintf("%s; %s wins over it, but the engine inherits it, and llama-server parses its LLAMA_ARG_* variables beside a flag too, refusing to start on a bad one: fix it or unset it", errText(err), winner)}
		}
	}
	return nil
}

// parsedBeside says whether engine e parses the variable name even where
// the launcher overrides it (it passes the winner as a flag), so that a
// bad value stops the engine: llama-server does so for its LLAMA_ARG_*
// variables. mlxcel-server reads its LLAMA_ARG_* names through clap's
// env binding, which the flag beats (../shared/reference/mlxcel.md §3),
// and keeps no MLXCEL_* name for a setting speclaunch passes as a flag
// (§4: host and port have none); vLLM, SGLang and the sim read neither.
// No engine reads speclaunch's own names (MLXCEL_PORT, MLXCEL_LOG_LEVEL).
func parsedBeside(e key.Engine, name string) bool {
	return e == key.LlamaCpp && strings.HasPrefix(name, "LLAMA_ARG_")
}

// errText is a parser's error without a source: the *Error a parser
// returns has none yet.
func errText(err error) string {
	var e *Error
	if !errors.As(err, &e) {
		return err.Error()
	}
	return e.what()
}

// rows layers every row of the scopes into s, in table order, and says
// every bad value in one error (problems.Join): the first alone left the
// operator to fix one and find the next. A row's check against a bad one
// (Row.reads) is not run, so that no error is one a bad value caused; a
// bad engine ends the list.
func (l *layer) rows(s *Settings, scopes ...Scope) error {
	var errs []error
	bad := map[string]bool{}
	for _, r := range Rows {
		if !slices.Contains(scopes, r.Scope) {
			continue
		}
		check := !slices.ContainsFunc(r.reads, func(n string) bool { return bad[n] })
		if err := r.layer(l, s, check); err != nil {
			errs, bad[r.Name] = append(errs, err), true
			if r.Name == engineRow.Name {
				break
			}
		}
	}
	return problems.Join("in the settings", errs)
}

// Load layers flag > env > profile > default into Settings for every launch
// and serve row. The returned profile is the one in use (nil when none).
// Every error names its source.
func Load(in Input) (Settings, *profiles.Profile, []Notice, error) {
	if in.Getenv == nil {
		in.Getenv = func(string) string { return "" }
	}
	l := &layer{in: in, prof: in.Profile}
	if l.prof == nil {
		p, err := l.findProfile()
		if err != nil {
			return Settings{}, nil, nil, err
		}
		l.prof = p
	}
	var s Settings
	if l.prof != nil {
		if l.prof.Empty() {
			l.notices = append(l.notices, emptyProfile(l.prof.Path))
		}
		s.ProfilePath = l.prof.Path
		if len(l.prof.Engine.Env) > 0 { // passed to the engine as is: no layering
			s.EngineEnv = Field[map[string]string]{l.prof.Engine.Env, Source{Profile, l.prof.Where("engine.env")}}
			s.EngineEnvSrc = map[string]Source{}
			for k := range l.prof.Engine.Env {
				s.EngineEnvSrc[k] = Source{Profile, l.prof.Where("engine.env." + k)}
			}
		}
	}
	if err := l.rows(&s, ScopeLaunch, ScopeServe); err != nil {
		return Settings{}, nil, nil, err
	}
	l.flagOverEnv(&s)
	l.notices = append(l.notices, envTypos(in.EnvNames)...)
	return s, l.prof, l.notices, nil
}

// emptyProfile is the warning for a profile that sets nothing: accepted
// (docs/profiles.md), but the launch is one without it.
func emptyProfile(path string) Notice {
	return Notice{"warn", fmt.Sprintf("profile %s is empty (nothing but whitespace, comments or table headers): every setting comes from flags, the environment and defaults; add settings (`speclaunch profile init --from demo FILE` writes an example) or leave the profile out", path)}
}

// LoadBench layers bench's rows (flag > profile > default) into s.Bench;
// flags as in Input.Flags. Every error names its source.
func LoadBench(s *Settings, p *profiles.Profile, flags map[string]string) error {
	l := &layer{in: Input{Flags: flags, Getenv: func(string) string { return "" }}, prof: p}
	return l.rows(s, ScopeBench)
}

// CannotUseProfile is the message of the error for a profile that cannot be
// found or read, whose source is the flag or variable that named it.
const CannotUseProfile = "cannot use profile"

// findProfile loads the profile --profile or MLXCEL_PROFILE names, nil
// when neither does.
func (l *layer) findProfile() (*profiles.Profile, error) {
	ref, src, ok := l.raw(profileRow)
	if !ok {
		return nil, nil
	}
	if err := blankPath(src, ref); err != nil {
		return nil, err
	}
	path, err := profiles.Find(ref, l.in.Getenv)
	if err != nil {
		return nil, &Error{Src: src, Msg: CannotUseProfile, Err: err}
	}
	ctx := l.in.Ctx
	if ctx == nil {
		ctx = context.Background()
	}
	p, err := profiles.Load(ctx, path)
	var se *safefile.Error
	var pe *profiles.Error
	switch {
	case errors.As(err, &se):
		return nil, &Error{Src: src, Msg: CannotUseProfile, Err: err}
	case errors.As(err, &pe) && pe.Schedule != nil:
		// draft.schedule's value, which the decoder refused before the
		// key's reader saw it, is said as the reader says its others.
		return nil, badProfileSchedule(Source{Profile, pe.Where()}, pe.Schedule)
	}
	return p, err
}

// policyRow layers the policy files: the profile's, then MLXCEL_POLICY's,
// then --policy's (later files win).
var policyRow = Row{Name: "policy", Flag: "policy", Envs: []string{"MLXCEL_POLICY"}, Key: "policy.files", Default: "none",
	Doc: "`:`-separated policy files layered over the embedded policy; the flag is repeatable; order: profile files < `MLXCEL_POLICY` < `--policy` < the profile's `[[policy.entry]]` (docs/policy.md)",
	apply: func(_ Row, l *layer, s *Settings) error {
		var files []Field[string]
		if p := l.prof; p != nil {
			for _, f := range p.Policy.Files {
				files = append(files, Field[string]{f, Source{Profile, p.Where("policy.files")}})
			}
		}
		for _, f := range filepath.SplitList(l.in.Getenv("MLXCEL_POLICY")) {
			if f != "" {
				files = append(files, Field[string]{f, Source{Env, "MLXCEL_POLICY"}})
			}
		}
		for _, f := range l.in.Policies {
			files = append(files, Field[string]{f, Source{Flag, "--policy"}})
		}
		for _, f := range files {
			if err := blankIn(f.Src, f.Value, true); err != nil {
				return err
			}
			if f.Src.Origin == Profile {
				f.Value = RelTo(l.prof.Path, f.Value)
			}
			s.Policies = append(s.Policies, f)
		}
		return nil
	},
	show: func(s *Settings) (any, string) {
		pols := []string{}
		for _, p := range s.Policies {
			pols = append(pols, p.Value+" ("+p.Src.String()+")")
		}
		if len(pols) == 0 {
			return pols, "default" // no file named: the startup line counts it with the defaults, not as "(none) (layered)"
		}
		return pols, "layered"
	}}

// engineArgsRow is the engine's pass-through arguments: the profile's
// engine.args, then those typed on the command line.
var engineArgsRow = Row{Name: "engine-args", Key: "engine.args", Default: "none",
	Doc: "passed to the engine verbatim: the profile's, then llama-server flags typed on the command line and anything after `--`",
	apply: func(_ Row, l *layer, s *Settings) error {
		var args []string
		var src Source
		if p := l.prof; p != nil && len(p.Engine.Args) > 0 {
			args, src = slices.Clone(p.Engine.Args), Source{Profile, p.Where("engine.args")}
		}
		if len(l.in.Passthrough) > 0 {
			if len(args) > 0 {
				s.ProfileArgs = Field[[]string]{slices.Clone(args), src}
			}
			// Both the llama-server flags typed as such (-ngl 99) and what
			// follows "--": "flag --" would blame the separator for the former.
			args, src = append(args, l.in.Passthrough...), Source{Flag, typedArgs(s.Engine.Value)}
		}
		s.EngineArgs = Field[[]string]{args, src}
		return nil
	},
	// A secret among the arguments (--api-key K) is masked.
	show: func(s *Settings) (any, string) { return secret.MaskArgv(s.EngineArgs.Value), s.EngineArgs.Src.String() }}

// typedArgs names the engine arguments of the command line for engine e
// (the engine row layers first): llama-server's flags where the engine
// takes them, else vLLM's or SGLang's own, so that an error in a vLLM
// argument is not said to be in a llama-server flag. A vLLM or SGLang
// argument goes after --; a flag typed before it that the pre-pass routes
// to the engine (internal/cli/flags.go: it knows no engine) is one too,
// named so without llama-server, which it is not for. No flag's name, it
// shows as it is (Source.String), not as "flag engine arguments …".
func typedArgs(e key.Engine) string {
	switch e {
	case key.VLLM:
		return "engine arguments for vLLM on the command line (after --, and any engine flag typed before it)"
	case key.SGLang:
		return "engine arguments for SGLang on the command line (after --, and any engine flag typed before it)"
	}
	return "engine arguments on the command line (llama-server flags as typed, and after --)"
}

// width layers the operator width: --draft-block-size or the engine-unit
// --spec-draft-n-max, then LLAMA_ARG_DRAFT_BLOCK_SIZE, MLXCEL_DRAFT_BLOCK_SIZE,
// then (llama.cpp) LLAMA_ARG_SPEC_DRAFT_N_MAX and the legacy
// LLAMA_ARG_DRAFT_MAX, converted, then the profile's draft.block_size.
func (l *layer) width(e key.Engine) (Field[int], string, error) {
	blockFlag, hasBlock := l.in.Flags["draft-block-size"]
	nmaxFlag, hasNmax := l.in.Flags["spec-draft-n-max"]
	if hasBlock && hasNmax {
		return Field[int]{}, "", &Error{Src: Source{Flag, l.in.flagName("spec-draft-n-max")}, Msg: "give the width once: --draft-block-size W (verify rows) or --spec-draft-n-max N (draft tokens, = width N+1), not both"}
	}
	if hasBlock {
		return blockWidth(blockFlag, Source{Flag, "--draft-block-size"})
	}
	if hasNmax {
		return nmaxWidth(nmaxFlag, Source{Flag, l.in.flagName("spec-draft-n-max")})
	}
	for i, name := range blockEnvs {
		if v := l.in.Getenv(name); v != "" {
			f, note, err := blockWidth(v, Source{Env, name})
			if err == nil {
				for _, lower := range blockEnvs[i+1:] {
					if w := l.in.Getenv(lower); w != "" && strings.TrimSpace(w) != strings.TrimSpace(v) {
						l.notices = append(l.notices, Notice{"info", fmt.Sprintf("%s=%s is set but %s=%s already provides the width; keeping %s", lower, Quoted(w), name, Quoted(v), name)})
					}
				}
				if e == key.LlamaCpp {
					l.noteShadowedNmax(nmaxEnvs, name, v, f.Value)
				}
			}
			return f, note, err
		}
	}
	for i, name := range nmaxEnvs {
		v := l.in.Getenv(name)
		if v == "" {
			continue
		}
		if e != key.LlamaCpp {
			l.notices = append(l.notices, Notice{"info", fmt.Sprintf("%s=%s is llama.cpp's draft-token cap; it does not set the %s width (use --draft-block-size)", name, Quoted(v), e)})
			continue
		}
		f, note, err := nmaxWidth(v, Source{Env, name})
		if err == nil {
			l.noteShadowedNmax(nmaxEnvs[i+1:], name, v, f.Value)
		}
		return f, note, err
	}
	if p := l.prof; p != nil && p.Draft.BlockSize != nil {
		return blockWidth(strconv.Itoa(*p.Draft.BlockSize), Source{Profile, p.Where("draft.block_size")})
	}
	return Field[int]{}, "", nil
}

// noteShadowedNmax says each of names (llama.cpp's draft-token variables)
// set to another width than winner=v's width w: a variable that sets no
// width is never ignored silently (LLAMA_ARG_SPEC_DRAFT_N_MAX=3 beside
// LLAMA_ARG_DRAFT_BLOCK_SIZE=5 ran width 5 and said nothing).
func (l *layer) noteShadowedNmax(names []string, winner, v string, w int) {
	for _, lower := range names {
		x := l.in.Getenv(lower)
		if x == "" {
			continue
		}
		if n, err := strconv.Atoi(strings.TrimSpace(x)); err == nil && n+1 == w {
			continue
		}
		l.notices = append(l.notices, Notice{"info", fmt.Sprintf("%s=%s (draft tokens) is set but %s=%s already provides the width (%d); keeping %s", lower, Quoted(x), winner, Quoted(v), w, winner)})
	}
}

func blockWidth(v string, src Source) (Field[int], string, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if errors.Is(err, strconv.ErrRange) {
		return Field[int]{}, "", &Error{Src: src, Msg: fmt.Sprintf("draft width %s is far out of range; want a width from %d to %d (verify rows = draft tokens + 1)", Quoted(v), key.MinWidth, key.MaxWidth)}
	}
	if err != nil {
		return Field[int]{}, "", &Error{Src: src, Msg: fmt.Sprintf("draft width %s is not a whole number; want a width from %d to %d (verify rows = draft tokens + 1)", Quoted(v), key.MinWidth, key.MaxWidth)}
	}
	if err := key.CheckWidth(n); err != nil {
		return Field[int]{}, "", &Error{Src: src, Msg: err.Error()}
	}
	return Field[int]{n, src}, "", nil
}

func nmaxWidth(v string, src Source) (Field[int], string, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if errors.Is(err, strconv.ErrRange) {
		return Field[int]{}, "", &Error{Src: src, Msg: fmt.Sprintf("draft token count %s is far out of range; want N from 1 to %d (width N+1)", Quoted(v), key.MaxWidth-1)}
	}
	if err != nil {
		return Field[int]{}, "", &Error{Src: src, Msg: fmt.Sprintf("draft token count %s is not a whole number; want N from 1 to %d (width N+1)", Quoted(v), key.MaxWidth-1)}
	}
	if n < 0 {
		return Field[int]{}, "", &Error{Src: src, Msg: fmt.Sprintf("draft token count %d is negative; want N from 1 to %d (width N+1), or remove the draft model to run without speculation", n, key.MaxWidth-1)}
	}
	if n == 0 {
		return Field[int]{}, "", &Error{Src: src, Msg: "draft token count 0 means no drafting (width 1); to run without speculation, remove the draft model"}
	}
	if n > key.MaxWidth-1 { // checked before n+1, which would overflow for the largest ints
		return Field[int]{}, "", &Error{Src: src, Msg: fmt.Sprintf("draft token count %d is above %d (width %d), which no drafter runs; want N from 1 to %d (width N+1)", n, key.MaxWidth-1, key.MaxWidth, key.MaxWidth-1)}
	}
	name := strings.TrimPrefix(src.Name, "--")
	return Field[int]{n + 1, src}, fmt.Sprintf("%s=%d draft tokens = width %d", name, n, n+1), nil
}

// ParseBool accepts true/false, 1/0, yes/no, on/off, enabled/disabled.
func ParseBool(v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "yes", "on", "enabled":
		return true, nil
	case "0", "false", "no", "off", "disabled":
		return false, nil
	}
	return false, errors.New("bad boolean " + strconv.Quote(v) + ": want true or false (also 1/0, yes/no, on/off)")
}

// ParseKind reads a drafter kind in the launcher's words (dflash, draft)
// or llama-server's --spec-type / LLAMA_ARG_SPEC_TYPE words (draft-dflash,
// draft-simple). The spec types that name no drafter the launcher can size
// are refused with what to do instead.
func ParseKind(v string) (key.Drafter, error) {
	t := strings.ToLower(strings.TrimSpace(v))
	switch {
	case strings.Contains(t, ","):
		return "", fmt.Errorf("%s lists several speculative types; speclaunch runs one drafter: name one kind (draft-simple, draft-mtp, draft-dflash, draft-dspark, draft-eagle3 or dflash, mtp, draft, ...)", Quoted(v))
	case t == "none":
		return "", fmt.Errorf("%s would turn speculation off; speclaunch turns it off when no drafter is set: unset the draft model and this value", Quoted(v))
	case strings.HasPrefix(t, "ngram") && t != string(key.Ngram): // bare "ngram" is vLLM's and SGLang's kind
		return "", fmt.Errorf("%s is n-gram speculation, which drafts from the prompt without a draft model, so there is no drafter width for speclaunch to resolve: name a draft-model kind, or run llama-server with --spec-type %s directly", Quoted(v), Quoted(t))
	}
	return key.ParseDrafter(v) // which quotes v as given, not t
}

// sameValue reports two spellings of one value of row r: drafter kinds
// (LLAMA_ARG_SPEC_TYPE=draft-dflash and MLXCEL_DRAFT_KIND=dflash), and a
// switch's true or false (MLXCEL_ADAPT=0 and --no-adapt).
func sameValue(r Row, a, b string) bool {
	switch {
	case r.Name == "draft-kind":
		x, err1 := ParseKind(a)
		y, err2 := ParseKind(b)
		return err1 == nil && err2 == nil && x == y
	case r.Default == "true" || r.Default == "false": // a switch: MLXCEL_ADAPT=0 is --no-adapt's false
		x, err1 := ParseBool(a)
		y, err2 := ParseBool(b)
		return err1 == nil && err2 == nil && x == y
	}
	return false
}

// MaxQuoted is how much of a value an error or notice quotes: a value of
// kilobytes (a wrong variable, a pasted file) would bury the message.
const MaxQuoted = 64

// Quoted is v quoted as %q does, cut to MaxQuoted bytes with its length
// said ("a/a/..."... (100000 bytes)): every notice and error of the
// settings, and resolve's environment lines, quote a value so.
func Quoted(v string) string { return quote.Quoted(v, MaxQuoted) }
