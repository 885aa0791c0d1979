package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/speclaunch/speclaunch/internal/config"
	"github.com/speclaunch/speclaunch/internal/plan"
	"github.com/speclaunch/speclaunch/internal/quote"
	"github.com/speclaunch/speclaunch/internal/safefile"
	"github.com/speclaunch/speclaunch/internal/secret"
	"github.com/speclaunch/speclaunch/internal/serve"
	"github.com/speclaunch/speclaunch/profiles"
)

// ProfileCmd groups the profile subcommands.
type ProfileCmd struct {
	Init     ProfileInitCmd     `cmd:"" help:"Write a commented example profile."`
	Show     ProfileShowCmd     `cmd:"" help:"Show the effective settings, each with where it came from (flag, env, profile file:line, default)."`
	Validate ProfileValidateCmd `cmd:"" help:"Check a profile as serve would on this host (the port aside): syntax, unknown keys, types, values, its policy entries, the engine binary and model files it names."`
}

// ProfileInitCmd writes an embedded example.
type ProfileInitCmd struct {
	Path  string `arg:"" optional:"" help:"Where to write it (default profiles/NAME.toml for --from, else profiles/example.toml); - for stdout." placeholder:"PATH"`
	From  string `help:"Example to start from: example (every key, commented), demo (sim), demo-load (sim, its best width moving with load; its stand-in model files are written beside it), qwen35-4b-dflash (mlxcel), llama-draft (llama.cpp), vllm-tp2-eagle3 (vLLM), sglang-tp2-eagle3 (SGLang); default example." default:"example" placeholder:"NAME"`
	Force bool   `help:"Overwrite an existing file."`
}

// Run implements `profile init`: the example, and the stand-in files it
// names beside it (demo-load's), each under the same rules.
func (c *ProfileInitCmd) Run(e *Env) error {
	data, err := profiles.Example(c.From)
	if err != nil {
		return usage(err, "")
	}
	path := c.Path
	if path == "" {
		path = filepath.Join("profiles", c.From+".toml")
	}
	if path == "-" {
		if si := profiles.StandIns(c.From); len(si) > 0 {
			fmt.Fprintf(e.Stderr, "speclaunch: note: the %s example names %d stand-in model file(s) relative to itself, which stdout cannot hold: write it to a file (speclaunch profile init --from %s FILE) to get them too\n", c.From, len(si), c.From)
		}
		_, err := e.Stdout.Write(data)
		return err
	}
	if err := c.checkDir(path); err != nil {
		return err
	}
	files := []*initFile{{what: "profile", path: path, data: data}}
	for _, si := range profiles.StandIns(c.From) {
		files = append(files, &initFile{what: "stand-in model file", path: filepath.Join(filepath.Dir(path), filepath.FromSlash(si.Rel)), data: si.Data, standIn: true})
	}
	// Every file is checked before any is written: a refusal leaves
	// nothing half-written.
	for _, f := range files {
		if err := c.check(e, f); err != nil {
			return err
		}
	}
	// The stand-ins first, the profile last: a write that fails leaves no
	// profile naming files that are not there.
	var wrote []string
	for _, f := range slices.Backward(files) {
		if f.same {
			continue
		}
		if err := f.write(); err != nil {
			return usage(fmt.Errorf("%s %s: %w", f.what, f.path, err), "give a path in a directory this user can write")
		}
		wrote = append([]string{f.path}, wrote...)
	}
	switch {
	case len(wrote) == 0:
		// Run twice, or in this repository (which ships the examples), the
		// default path already holds the very example: that is done, not
		// an error. Anything else there is someone's work.
		fmt.Fprintf(e.Stdout, "%s already holds that example (--from %s); edit it, then: speclaunch resolve --profile %s\n", path, c.From, plan.ShellQuote(path))
	case len(files) > 1:
		fmt.Fprintf(e.Stdout, "wrote %s (the example and the stand-in model files it names, which the sim reads no weights from); edit it, then: speclaunch resolve --profile %s\n", strings.Join(wrote, ", "), plan.ShellQuote(path))
	default:
		fmt.Fprintf(e.Stdout, "wrote %s; edit it, then: speclaunch resolve --profile %s\n", path, plan.ShellQuote(path))
	}
	return nil
}

// initFile is one file `profile init` writes: the profile, or a stand-in
// file it names by a path relative to itself.
type initFile struct {
	what, path string
	data       []byte
	standIn    bool // in a directory of its own beside the profile, made where missing
	same       bool // already holds data: nothing to write
}

// check applies the profile's rules to f: a file there is kept unless it
// already holds f's bytes or --force is given, and a symbolic link (at f,
// or as f's stand-in directory) is refused, never written through.
func (c *ProfileInitCmd) check(e *Env, f *initFile) error {
	if dir := filepath.Dir(f.path); f.standIn {
		if li, err := os.Lstat(dir); err == nil && (li.Mode()&fs.ModeSymlink != 0 || !li.IsDir()) {
			kind := safefile.Kind(li.Mode())
			if li.Mode()&fs.ModeSymlink != 0 {
				kind = "a symbolic link" // never written through
			}
			return usage(fmt.Errorf("%s %s: %s is %s, not a directory; remove it or give the profile another directory", f.what, f.path, dir, kind), "")
		}
	}
	exists, err := safefile.Existing(f.what, f.path)
	if err != nil {
		return usage(err, "")
	}
	if exists && !c.Force {
		if old, err := safefile.ReadFile(e.Ctx, f.what, f.path, safefile.ProfileLimit); err == nil && bytes.Equal(old, f.data) {
			f.same = true
			return nil
		}
		return usage(fmt.Errorf("%s already exists", f.path), "pass --force to overwrite it, or give another path")
	}
	if li, err := os.Lstat(f.path); err == nil && li.Mode()&fs.ModeSymlink != 0 {
		// --force replaces a file; it wrote through a link, to its target
		target, err := filepath.EvalSymlinks(f.path)
		if err != nil {
			target, _ = os.Readlink(f.path)
		}
		return usage(fmt.Errorf("%s is a symbolic link to %s; remove it or give the target's path", f.path, target), "")
	}
	return nil
}

// write writes f, making a stand-in's directory (one level, beside the
// profile) where it is missing. Replace, not WriteFile: a link made at the
// path since the check is replaced too, never written through.
func (f *initFile) write() error {
	if f.standIn {
		if err := os.Mkdir(filepath.Dir(f.path), 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
	}
	return safefile.Replace(f.path, f.data, 0o644)
}

// checkDir refuses a directory for PATH that does not exist (a typo built
// a tree of them) or takes no file, as bench --out does; without PATH the
// default's profiles/ is made, as init's own.
func (c *ProfileInitCmd) checkDir(path string) error {
	dir := filepath.Dir(path)
	if c.Path == "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return usage(fmt.Errorf("profile %s: %w", path, err), "give a path in a directory this user can write")
		}
	}
	return existingDir("profile "+path, dir)
}

// existingDir refuses dir, where what (the file, with how it was named)
// is to be written, when it does not exist (a typo would build a tree) or
// takes no file, saying how to make it; one rule for profile init and
// tune --policy.
func existingDir(what, dir string) error {
	err := safefile.CheckDir(dir)
	switch _, serr := os.Stat(dir); {
	case err == nil:
		return nil
	case errors.Is(serr, fs.ErrNotExist):
		return usage(fmt.Errorf("%s: %w", what, err), fmt.Sprintf("create the directory first (mkdir -p %s), or name a file in an existing directory", plan.ShellQuote(dir)))
	}
	return usage(fmt.Errorf("%s: %w", what, err), "name a file in a directory this user can write")
}

// ProfileShowCmd prints the effective settings.
type ProfileShowCmd struct {
	LaunchFlags `embed:""`
	ListenFlags `embed:""`
	JSON        bool `help:"Print JSON."`
}

// Run implements `profile show`.
func (c *ProfileShowCmd) Run(e *Env) error {
	if err := c.checkArgs(e); err != nil {
		return err
	}
	l, err := e.load(c.input(e, nil, e.Passthrough))
	if err != nil {
		return err
	}
	m := settingsMap(l.Settings)
	// bench's options too, as bench would read them (benchWarning).
	notices := l.Notices
	s := l.Settings
	if _, err := loadBench(e.Ctx, &s, l.Profile, given(e.kctx)); err != nil {
		notices = append(notices, benchWarning(err))
	} else {
		maps.Copy(m, rowsMap(s, config.ScopeBench))
	}
	maps.Copy(m, engineEnvMap(l.Settings))
	if err := launchRefusal(e, l); err != nil {
		notices = append(notices, config.Notice{Level: "warn", Msg: "serve would refuse this launch: " + err.Error()})
	}
	if c.JSON {
		// the warn: and info: lines as resolve --json and policy explain
		// --json carry theirs (resolutionJSON): --json dropped them all
		return writeJSON(e.Stdout, map[string]any{"profile": l.Settings.ProfilePath, "settings": m, "policy_layers": l.Policy.Layers, "notices": noticeLines(notices)})
	}
	if l.Settings.ProfilePath != "" {
		fmt.Fprintf(e.Stdout, "profile %s\n", cellText(l.Settings.ProfilePath))
	} else {
		fmt.Fprintln(e.Stdout, "no profile (set --profile or MLXCEL_PROFILE)")
	}
	writeSettings(e.Stdout, m)
	fmt.Fprintf(e.Stdout, "policy layers: %s\n", strings.Join(l.Policy.Layers, " < "))
	for _, n := range notices {
		fmt.Fprintf(e.Stdout, "%s: %s\n", n.Level, n.Msg)
	}
	return nil
}

// ProfileValidateCmd checks one profile.
type ProfileValidateCmd struct {
	LaunchFlags `embed:""`
	ListenFlags `embed:""`
	Offline     bool `help:"Check the profile alone, not this host's engine binary, model files and key files: a profile written for another machine, or a check in CI."`
}

// Run implements `profile validate`: the same load serve does, and the
// same checks of this host's engine binary and model files, so a profile
// that validates is one serve accepts (its port aside: a running serve
// holds it). Every warning serve would give is printed.
func (c *ProfileValidateCmd) Run(e *Env) error {
	if err := c.checkArgs(e); err != nil {
		return err
	}
	if c.Profile == "" && e.Getenv("MLXCEL_PROFILE") == "" {
		return usage(errors.New("no profile given"), "pass --profile PATH|NAME")
	}
	l, err := e.load(c.input(e, nil, e.Passthrough))
	if err != nil {
		return err
	}
	p, err := build(e, l, plan.Options{Offline: c.Offline})
	if err != nil {
		return err
	}
	// The [bench] table is checked the way bench reads it, as profile show
	// checks it (benchWarning); where the record goes is bench's to check
	// when it runs, so nothing is written here.
	notices := l.Notices
	s := l.Settings
	if _, err := loadBench(e.Ctx, &s, l.Profile, nil); err != nil {
		notices = append(notices, benchWarning(err))
	}
	for _, n := range notices { // an empty profile, a typed key, a [bench] table bench would refuse: valid, but said
		if n.Level == "warn" {
			fmt.Fprintf(e.Stderr, "warn: %s\n", n.Msg)
		}
	}
	for _, w := range p.Warnings { // an unknown engine flag, a misspelt key variable: as serve says them
		fmt.Fprintf(e.Stderr, "warn: %s\n", w)
	}
	if c.Offline {
		fmt.Fprintf(e.Stdout, "%s: ok (offline: this host's engine binary, model files and key files not checked)\n", l.Settings.ProfilePath)
		return nil
	}
	if err := serve.Runnable(p); err != nil {
		return usage(err, "profile validate checks this host's engine binary and model files, as serve does before it starts: run it where the profile will serve, fix the path, or pass --offline to check the profile alone")
	}
	fmt.Fprintf(e.Stdout, "%s: ok\n", l.Settings.ProfilePath)
	return nil
}

// launchRefusal is what serve, resolve and profile validate would refuse
// of the launch (a key flag joined to its key in engine.args, a flag the
// launcher owns), for profile show to say as it says bench's refusal
// (docs/profiles.md): the plan they build, offline and probing nothing of
// this host, since show reads no model or key file and runs nothing.
func launchRefusal(e *Env, l *loaded) error {
	d := e.deps()
	d.Probe, d.DetectLlama, d.DetectEngine = nil, nil, nil
	_, err := plan.Build(e.Ctx, l.Settings, l.Policy, d, plan.Options{Offline: true, NoCommand: true})
	return err
}

// benchWarning is how profile show and profile validate, which run no
// bench, say bench's options that bench would refuse: a warn line naming
// where the option was set, never an error, since serve does not read
// them (docs/environment-variables.md, "bench").
func benchWarning(err error) config.Notice {
	return config.Notice{Level: "warn", Msg: "bench would refuse its options (serve does not read them): " + err.Error()}
}

// writeSettings prints profile show's table: a setting a line, its name,
// value and source in columns as wide as their widest entry (at least 18
// and 40), so that a long value (bench-base-port's default) pushes no
// source out of line.
func writeSettings(w io.Writer, m map[string]Setting) {
	width, vwidth := 18, 40
	for k, s := range m {
		width, vwidth = max(width, utf8.RuneCountInString(k)), max(vwidth, utf8.RuneCountInString(cellText(s.Value))) // fmt pads by runes
	}
	for _, k := range sortedKeys(m) {
		fmt.Fprintf(w, "  %-*s %-*s %s\n", width, k, vwidth, cellText(m[k].Value), cellText(m[k].Source))
	}
}

// cellText is a value as one cell of the settings table: a path a
// profile gave with an escape or a newline in it printed them raw, which
// could recolour the terminal or forge a row.
func cellText(v any) string { return quote.Text(fmt.Sprint(v), 1024) }

// engineEnvMap is the profile's engine.env for profile show, an entry a
// variable ("engine-env.LLAMA_API_KEY") with its file:line, its value
// masked as --dry-run masks it (secret.MaskEnvMap) and, in text, written
// as --dry-run writes it (envText).
func engineEnvMap(s config.Settings) map[string]Setting {
	m := map[string]Setting{}
	for k, v := range secret.MaskEnvMap(s.EngineEnv.Value) {
		m["engine-env."+k] = Setting{envText(v), s.EnvSrc(k).String()}
	}
	return m
}

// envText is a variable's value, already masked, that prints as the
// dry run's environment section prints one (envValue: a newline in it
// cannot forge a line) and goes into JSON as it is.
type envText string

func (v envText) String() string { return envValue(string(v)) }

// settingsMap flattens Settings for show/--json and serve's effective
// settings line: every launch and serve row of config.Rows with a line of
// its own.
func settingsMap(s config.Settings) map[string]Setting {
	return rowsMap(s, config.ScopeLaunch, config.ScopeServe)
}

func rowsMap(s config.Settings, scopes ...config.Scope) map[string]Setting {
	m := map[string]Setting{}
	for _, r := range config.Rows {
		if !slices.Contains(scopes, r.Scope) {
			continue
		}
		if v, src, ok := r.Show(&s); ok {
			m[r.Name] = Setting{v, src}
		}
	}
	return m
}
