package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/alecthomas/kong"
	"github.com/speclaunch/speclaunch/engine"
	"github.com/speclaunch/speclaunch/internal/config"
	"github.com/speclaunch/speclaunch/internal/exitcode"
	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/plan"
	"github.com/speclaunch/speclaunch/internal/policy"
	"github.com/speclaunch/speclaunch/internal/safefile"
	"github.com/speclaunch/speclaunch/internal/secret"
	"github.com/speclaunch/speclaunch/profiles"
)

// EmbeddedPolicyName names the embedded policy in messages.
const EmbeddedPolicyName = "policy.toml (embedded)"

// loaded is one pass of flag > env > profile > default layering and policy
// merging; serve repeats it on every reload.
type loaded struct {
	Settings config.Settings
	Profile  *profiles.Profile
	Policy   *policy.Policy
	Notices  []config.Notice
	// FileNotices are those of Notices about the files as they are now (an
	// empty tuned layer), which serve says again on every reload.
	FileNotices []config.Notice
	Files       []string // profile and policy files to watch
}

// load layers the settings and merges the policies. Every failure is bad
// input (exit 2) naming its file, line, flag or variable.
func (e *Env) load(in config.Input) (*loaded, error) {
	l, err := e.loadNamed(in)
	if err != nil {
		return nil, err
	}
	if msg := typedKeyNotice(l.Settings.Engine.Value, in.Passthrough); msg != "" {
		l.Notices = append(l.Notices, config.Notice{Level: "warn", Msg: msg})
	}
	return l, nil
}

// typedKeyNotice warns of an API key typed on speclaunch's own command
// line (issue 33): the engine gets it in its environment, but speclaunch's
// argv shows it in ps all the same; "" when none is typed, or the engine
// reads no key from its environment (its adapter warns).
func typedKeyNotice(eng key.Engine, typed []string) string {
	sp := engine.APIKeySpec(eng)
	if _, vals, _ := secret.TakeKeyFlags(sp, typed); len(vals) == 0 || len(sp.Env) == 0 {
		return ""
	}
	alt := sp.Env[0]
	if len(sp.FileEnv) > 0 {
		alt += " or " + sp.FileEnv[0]
	}
	return fmt.Sprintf("the API key typed as --api-key is on speclaunch's own command line, which every user of this host sees in ps: set %s instead", alt)
}

// loadNamed is load, except that where the settings load and a policy
// file they name does not, it returns the files they name beside the
// error (loaded.Files alone): serve watches a policy file a reload named
// before it exists or parses, so that its fix is seen.
func (e *Env) loadNamed(in config.Input) (*loaded, error) {
	if in.Ctx == nil {
		in.Ctx = e.Ctx
	}
	s, prof, notices, err := config.Load(in)
	if err != nil {
		return nil, err
	}
	// The profile's engine.args and engine.env may name a key file too
	// (those typed on the command line were seeded before: seedSecrets).
	e.seedKeyFiles(s.ProfileEngineArgs().Value, func(n string) string { return s.EngineEnv.Value[n] })
	tuned := tunedOwn(tunedLayer(e.Getenv), s)
	files := namedFiles(prof, tuned, s)
	pol, tunedNotices, err := loadPolicy(in.Ctx, e.PolicyTOML, tuned, s, prof)
	if err != nil {
		return &loaded{Files: files}, err
	}
	return &loaded{Settings: s, Profile: prof, Policy: pol, Notices: append(notices, tunedNotices...), FileNotices: tunedNotices, Files: files}, nil
}

// tunedOwn is the tuned layer a load of s reads as a layer of its own: ""
// where there is none, or where a policy file s names is that file (it is
// read once, in that place).
func tunedOwn(tuned string, s config.Settings) string {
	if slices.ContainsFunc(s.Policies, func(f config.Field[string]) bool { return f.Value == tuned }) {
		return ""
	}
	return tuned
}

// namedFiles are the files a load of s names, in layer order, for serve to
// watch: the profile, the tuned layer, the policy files (each once). They
// are the same whether the load succeeds or not, and the tuned layer is
// named even where it does not exist: a file that left the set on a
// rejected reload, or a layer tune writes while serve runs, would never be
// seen again without a SIGHUP.
func namedFiles(prof *profiles.Profile, tuned string, s config.Settings) []string {
	var files []string
	if prof != nil {
		files = append(files, prof.Path)
	}
	if tuned != "" {
		files = append(files, tuned)
	}
	for _, i := range policy.Distinct(policyPaths(s)) {
		files = append(files, s.Policies[i].Value)
	}
	return files
}

// policyPaths are the policy files s names, in order.
func policyPaths(s config.Settings) []string {
	paths := make([]string, len(s.Policies))
	for i, f := range s.Policies {
		paths[i] = f.Value
	}
	return paths
}

// loadPolicy merges the embedded policy, the tuned layer (when the file
// exists: speclaunch tune writes it), the policy files in order, then the
// profile's own [[policy.entry]] tables. The notices say of an empty
// tuned layer.
func loadPolicy(ctx context.Context, embedded []byte, tuned string, s config.Settings, prof *profiles.Profile) (*policy.Policy, []config.Notice, error) {
	base, err := policy.Parse(EmbeddedPolicyName, embedded)
	if err != nil {
		return nil, nil, fmt.Errorf("embedded policy is invalid (a build problem): %w", err)
	}
	layers := []*policy.File{base}
	var notices []config.Notice
	var budget policy.Budget // the layers are bounded in total, a file named twice read once
	if tuned != "" {
		pf, empty, err := readTuned(ctx, &budget, tuned)
		switch {
		case err != nil:
			return nil, nil, err
		case empty:
			notices = append(notices, emptyTuned(tuned))
		case pf != nil:
			layers = append(layers, pf)
		}
	}
	for _, i := range policy.Distinct(policyPaths(s)) {
		f := s.Policies[i]
		pf, err := budget.Read(ctx, f.Value)
		var se *safefile.Error
		var le *policy.LayerError
		if errors.As(err, &se) || errors.As(err, &le) {
			return nil, nil, &config.Error{Src: f.Src, Msg: "cannot use policy file", Err: err}
		}
		if err != nil {
			return nil, nil, err
		}
		layers = append(layers, pf)
	}
	if prof != nil && len(prof.Policy.Entry) > 0 {
		entries, err := profileEntries(prof)
		if err != nil {
			return nil, nil, err
		}
		layers = append(layers, &policy.File{Name: prof.Path, Schema: 1, Entries: entries})
	}
	return policy.Merge(layers...), notices, nil
}

// profileEntries parses the profile's own [[policy.entry]] tables, each
// error naming the line of the key it is about. An error is the profile's
// (*profiles.Error), so that its hint says to fix the profile, not a
// policy file.
func profileEntries(prof *profiles.Profile) ([]policy.Entry, error) {
	lines := make([]int, len(prof.Policy.Entry))
	keyLines := make([]map[string]int, len(prof.Policy.Entry))
	for i, m := range prof.Policy.Entry {
		lines[i] = prof.Line(fmt.Sprintf("policy.entry[%d]", i))
		keyLines[i] = map[string]int{}
		for k := range m {
			keyLines[i][k] = prof.Line(fmt.Sprintf("policy.entry[%d].%s", i, k))
		}
	}
	bucketLine := func(i int, k string, b int) int {
		return prof.ElementLine(fmt.Sprintf("policy.entry[%d].%s", i, k), b)
	}
	entries, err := policy.ParseProfileEntries(prof.Path, prof.Policy.Entry, lines, keyLines, bucketLine)
	var pe *policy.ParseError
	if errors.As(err, &pe) {
		return nil, &profiles.Error{File: pe.File, Line: pe.Line, Msg: pe.Msg}
	}
	return entries, err
}

// readTuned reads the tuned layer at path within budget: nil where there
// is none, and where it is empty (empty true: no schedules, no layer). A
// layer that cannot be used is bad input naming the file.
func readTuned(ctx context.Context, budget *policy.Budget, path string) (pf *policy.File, empty bool, err error) {
	exists, err := tunedExists(path)
	if !exists {
		return nil, false, nil
	}
	if err == nil {
		pf, empty, err = budget.ReadTuned(ctx, path)
	}
	if err != nil {
		return nil, false, fmt.Errorf("the tuned layer (written by speclaunch tune): %w; fix it, or delete it and re-run speclaunch tune", err)
	}
	return pf, empty, nil
}

// emptyTuned says that the tuned layer at path is empty: it holds no
// schedule, as no file would, and deleting it is the way to drop one
// (docs/schedule.md).
func emptyTuned(path string) config.Notice {
	return config.Notice{Level: "warn", Msg: fmt.Sprintf("the tuned layer %s is empty (nothing but whitespace and comments): it holds no tuned schedule; delete it (rm %s) rather than empty it: tune writes it again when it runs", path, plan.ShellQuote(path))}
}

// tunedExists says whether there is a tuned layer at path, for its readers
// (resolve, serve) and its writer (tune). Nothing there, or a path this
// user cannot look at, is no layer; a symlink that leads nowhere (dangling,
// or a loop) is an error naming it and its target: the readers skipped it
// in silence, and tune replaced it with a file. Anything else is a layer,
// whose read says what is wrong with it.
func tunedExists(path string) (bool, error) {
	if _, err := os.Stat(path); err == nil {
		return true, nil
	}
	if _, err := os.Lstat(path); err != nil {
		return false, nil
	}
	return safefile.Existing("policy file", path)
}

// TunedFile is the tuned layer's file name in the user's config directory.
const TunedFile = "tuned.toml"

// tunedLayer is where speclaunch tune writes by default and serve and
// resolve read: $XDG_CONFIG_HOME/speclaunch/tuned.toml, else
// ~/.config/speclaunch/tuned.toml; "" when neither variable is set.
func tunedLayer(getenv func(string) string) string {
	if d := getenv("XDG_CONFIG_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "speclaunch", TunedFile)
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".config", "speclaunch", TunedFile)
	}
	return ""
}

// isBadInput reports errors that mean the operator's input is wrong.
func isBadInput(err error) bool {
	var ce *config.Error
	var pe *profiles.Error
	var pol *policy.ParseError
	var ke *kong.ParseError
	var be *badInput
	var se *safefile.Error
	return errors.As(err, &ce) || errors.As(err, &pe) || errors.As(err, &pol) || errors.As(err, &ke) || errors.As(err, &be) || errors.As(err, &se)
}

// badInput marks other operator errors (adapter refusals, missing files).
type badInput = exitcode.BadInput

// badInputErr marks err as bad input.
func badInputErr(err error) error { return exitcode.Bad(err) }

func hintFor(err error) string {
	var pe *profiles.Error
	var pol *policy.ParseError
	var ce *config.Error
	switch {
	case errors.As(err, &pe):
		return validateHint(pe.File)
	case errors.As(err, &ce) && ce.Src.Origin == config.Profile && ce.Msg != config.CannotUseProfile:
		// A value of the profile the settings refused (file:line).
		file := ce.Src.Name
		if i := strings.LastIndexByte(file, ':'); i > 0 && strings.Trim(file[i+1:], "0123456789") == "" {
			file = file[:i]
		}
		return validateHint(file)
	case errors.As(err, &pol):
		return "fix the policy file (schema: docs/policy.md); `speclaunch policy list` shows the merged policy"
	}
	return ""
}

// validateHint is the hint for a fault in the profile file.
func validateHint(file string) string {
	return "fix the profile, then check it with `speclaunch profile validate --profile " + plan.ShellQuote(file) + "`"
}

// build makes the plan for the loaded settings.
func build(e *Env, l *loaded, o plan.Options) (*plan.Plan, error) {
	p, err := plan.Build(e.Ctx, l.Settings, l.Policy, e.deps(), o)
	if err != nil {
		return nil, badInputErr(err)
	}
	e.secrets.Add(p.APIKeys...)
	e.secrets.Add(secret.EnvValues(p.Launch.Env)...)
	e.secrets.Add(secret.ArgvValues(p.Launch.Argv)...)
	return p, nil
}

// deps returns the plan's dependencies; tests may replace Env.Deps.
func (e *Env) deps() plan.Deps {
	if e.Deps != nil {
		return *e.Deps
	}
	return plan.RealDeps()
}
