package cli

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strings"

	"github.com/alecthomas/kong"
	"github.com/speclaunch/speclaunch/engine"
	"github.com/speclaunch/speclaunch/internal/config"
	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/llamaflags"
	"github.com/speclaunch/speclaunch/internal/secret"
	"github.com/speclaunch/speclaunch/internal/typo"
)

// LaunchFlags is the flag surface shared by resolve, serve, bench and tune
// (the commands that answer for serve's address add ListenFlags). Every
// value is taken as a string and parsed by config.Load, so that a bad value
// is reported once, the same way, naming its source, whether it came from a
// flag, a variable or a profile. Env names are shown in help but read by
// config.Load (Kong's own env handling lets an empty variable shadow the
// next name and puts config files above env).
type LaunchFlags struct {
	Profile        string   `help:"Profile: a TOML file path, or a NAME looked up in ./profiles, $$XDG_CONFIG_HOME/speclaunch/profiles, /etc/speclaunch/profiles." placeholder:"PATH|NAME" group:"Launch"`
	Policy         []string `help:"Extra policy file layered over the embedded one; repeatable, later files win; the variable is a :-separated list." placeholder:"FILE" group:"Launch"`
	Engine         string   `help:"Engine: mlxcel, llama.cpp, vllm, sglang or sim." placeholder:"NAME" group:"Launch"`
	EngineBinary   string   `help:"Engine binary." placeholder:"PATH" group:"Launch"`
	Model          string   `short:"m" help:"Target model: an MLX checkpoint directory or a GGUF file." placeholder:"PATH" group:"Launch"`
	DraftModel     string   `aliases:"model-draft,spec-draft-model" help:"Draft model; also -md, --model-draft, --spec-draft-model. Without one, speculation is off, except on llama.cpp with --spec-type draft-mtp (the target's own MTP layers draft)." placeholder:"PATH" group:"Launch"`
	DraftKind      string   `aliases:"spec-type" help:"Drafter kind: dflash|mtp (mlxcel, sim), draft|mtp|dflash|dspark|eagle3 (llama.cpp), draft|eagle|eagle3|mtp|ngram|dflash (vllm, sglang); also --spec-type draft-KIND, as llama-server spells it." placeholder:"KIND" group:"Launch"`
	DraftBlockSize string   `help:"Draft width = verify rows = draft tokens + 1; overrides the policy." placeholder:"W" group:"Launch"`
	DraftSchedule  string   `help:"Width by load: 1:6,2-3:4,4+:1 is width 6 at one request in flight, 4 at two or three, off at four or more; a width is one bucket." placeholder:"SCHEDULE" group:"Launch"`
	SpecDraftNMax  string   `name:"spec-draft-n-max" aliases:"draft-max,draft,draft-n" help:"The width in llama.cpp's unit, draft tokens N (= width N+1); also --draft-max; its variables apply to a llama.cpp engine only." placeholder:"N" group:"Launch"`
	Capability     string   `help:"CUDA compute capability to resolve for instead of probing nvidia-smi, e.g. 9.0 or 12.1." placeholder:"X.Y" group:"Launch"`
	Quant          string   `help:"Target quantization instead of reading it from the checkpoint: affine, nvfp4, other, q4_0, q4_k, q8_0, f16, ..." placeholder:"Q" group:"Launch"`
	LogFormat      string   `help:"Log format: auto (colour on a terminal unless NO_COLOR), text, color, json." placeholder:"FMT" group:"Logging"`
	LogLevel       string   `help:"Log level: debug, info, warn, error." placeholder:"LEVEL" group:"Logging"`

	EngineArgs []string `arg:"" optional:"" passthrough:"" help:"Engine arguments: llama-server flags work as typed (-ngl 99 -c 8192 --jinja); anything else goes after --. Passed through verbatim, except --api-key KEY, the engine's API key, which reaches it in env LLAMA_API_KEY, off its command line (the variable works too); a key file, one key a line, is --api-key-file FILE or env LLAMA_ARG_API_KEY_FILE. Keys are never printed in full (docs/engines.md, API keys)." placeholder:"-- ENGINE-ARGS"`
}

// ListenFlags is the public address serve listens on, which resolve,
// policy explain and profile show and validate answer for as serve would.
// bench and tune do not embed it: their engines listen on loopback ports of
// their own (--base-port), and --host and --port, once in LaunchFlags, sat
// in their help and did nothing.
type ListenFlags struct {
	Host string `help:"Public address serve listens on: speclaunch's proxy, with the engine on a loopback port of its own behind it; with --no-proxy, the engine itself. An IP address or host name." placeholder:"HOST" group:"Launch"`
	Port string `help:"Public port serve listens on: the proxy's, or with --no-proxy the engine's." placeholder:"PORT" group:"Launch"`
}

// given returns the raw values of the flags that appeared on the command
// line, keyed by long name.
func given(kctx *kong.Context) map[string]string {
	out := map[string]string{}
	for _, p := range kctx.Path {
		if p.Flag == nil || p.Resolved {
			continue
		}
		if p.Flag.Name == "policy" {
			continue
		}
		out[p.Flag.Name] = fmt.Sprint(p.Flag.Value.Target.Interface())
	}
	return out
}

// input builds config.Input from parsed flags. PATH and the
// environment's names feed the engine's inference (config.InferEngine).
func (f *LaunchFlags) input(e *Env, extra map[string]string, pass []string) config.Input {
	flags := given(e.kctx)
	for k, v := range extra {
		flags[k] = v
	}
	look := exec.LookPath
	if e.Deps != nil && e.Deps.LookPath != nil {
		look = e.Deps.LookPath
	}
	var names []string
	for _, kv := range os.Environ() {
		names = append(names, strings.SplitN(kv, "=", 2)[0])
	}
	return config.Input{Flags: flags, Spelled: e.spelled, Policies: f.Policy, Passthrough: pass, Getenv: e.Getenv, LookPath: look, EnvNames: names}
}

// llamaAliases are llama-server's spellings of what the launcher owns, as a
// llama-server user types them. The long ones are also Kong aliases (so help
// and errors know them); -md needs the pre-pass, since Kong (like clap)
// would read it as -m -d.
var llamaAliases = map[string]string{
	"-md":     "--draft-model",
	"--usage": "--help",
}

// argvPlan is the pre-pass's result: what Kong parses, the engine
// arguments in the order they were typed (those routed out of the launcher's
// flags, then those after "--"), and how each launcher flag given by an
// alias was typed (config.Input.Spelled: "draft-kind": "--spec-type").
type argvPlan struct {
	kong    []string
	engine  []string
	spelled map[string]string
}

// prepass rewrites argv before Kong sees it. In a launch command (one that
// takes engine arguments: resolve, serve, bench, profile show/validate):
//
//   - a flag the launcher owns, under its name or a llama-server alias (-md,
//     --model-draft, --spec-type, --draft-max), stays with the launcher,
//     joined to its value ("--draft-block-size=-3") so that a value starting
//     with '-' reaches validation and gets the real message;
//   - any other flag llama-server lists in its --help (-ngl 99, -c 8192,
//     --jinja, -hf REPO) moves to the engine arguments with as many values as
//     llama-server gives it (internal/llamaflags, from the captured --help);
//   - a flag neither knows is refused here, with the nearest launcher flag:
//     Kong would read "-ngx" as "-n -g -x", and would take an unknown --flag
//     for an engine argument. A single-letter one is left to Kong.
//
// Everything after "--" goes to the engine untouched. Other commands only
// get the value joining and the short-to-long rewriting.
func prepass(app *kong.Node, args []string) (argvPlan, error) {
	var out argvPlan
	cmd, at := findCommand(app, args)
	owned, shortToLong := ownedFlags(cmd)
	aliases := flagAliases(cmd)
	launch := takesEngineArgs(cmd)
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			out.engine = append(out.engine, args[i+1:]...)
			return out, nil
		}
		if i <= at || !strings.HasPrefix(a, "-") || a == "-" || isNegativeNumber(a) {
			out.kong = append(out.kong, a)
			continue
		}
		name, val, hasVal := strings.Cut(a, "=")
		typed := name
		if long, ok := llamaAliases[name]; ok {
			name = long
		}
		if values, ok := owned[name]; ok {
			out.spelled = spelledAs(out.spelled, aliases, shortToLong, typed, name)
			if l, ok := shortToLong[name]; ok && (hasVal || values == 1) {
				name = l
			}
			switch {
			case hasVal:
				out.kong = append(out.kong, name+"="+val)
			case values == 1 && i+1 < len(args) && looksLikeValue(args[i+1], owned):
				// Kong would read "--rounds -1" as a flag followed by
				// short flags.
				out.kong = append(out.kong, name+"="+args[i+1])
				i++
			default:
				out.kong = append(out.kong, name)
			}
			continue
		}
		if !launch {
			out.kong = append(out.kong, a)
			continue
		}
		if values, ok := llamaflags.Values(name); ok {
			if elsewhere(app, name) {
				return out, unknownFlag(app, cmd, a, owned)
			}
			if err := typedEmptyKey(name, val, hasVal, args[i+1:]); err != nil {
				return out, err
			}
			if hasVal || values == 0 {
				out.engine = append(out.engine, a)
				continue
			}
			if i+values >= len(args) || slices.Contains(args[i+1:i+1+values], "--") {
				return out, usage(fmt.Errorf("llama-server flag %s takes %d value(s) and got none", a, values), "give it its value ("+a+" VALUE), or put engine arguments after --")
			}
			// "-c --dry-run" took --dry-run as the context size and
			// started a real server: a known flag is no value.
			for _, v := range args[i+1 : i+1+values] {
				if flagName := knownFlag(v, owned); flagName != "" {
					return out, usage(fmt.Errorf("llama-server flag %s needs a value, and %s after it is a flag", a, flagName), "give it its value ("+a+" VALUE)")
				}
			}
			out.engine = append(out.engine, args[i:i+1+values]...)
			i += values
			continue
		}
		if strings.HasPrefix(a, "--") || len(name) > 2 {
			return out, unknownFlag(app, cmd, a, owned)
		}
		out.kong = append(out.kong, a)
	}
	return out, nil
}

// elsewhere reports a llama-server flag that speclaunch sets on the engine
// itself (engine.CheckPassthrough refuses it) and another command takes:
// --host and --port, which bench and tune lack (their engines take
// loopback ports). Routed to the engine, `tune --port 9000` was refused
// with serve's fix, "set it with speclaunch --port".
func elsewhere(app *kong.Node, name string) bool {
	return errors.Is(engine.CheckPassthrough(key.LlamaCpp, []string{name}), engine.ErrPassthrough) && len(commandsWithFlag(app, name)) > 0
}

// unknownFlag is the refusal of argument a, a flag neither speclaunch's
// command cmd nor llama-server knows, with the nearest flag of either: a
// typo of a key flag is to be spelt right (after --, the engine would
// refuse it and the key would be on its command line), any other may go
// after -- as it is. A value is shown masked.
func unknownFlag(app, cmd *kong.Node, a string, owned map[string]int) error {
	name, val, hasVal := strings.Cut(a, "=")
	if of := commandsWithFlag(app, name); len(of) > 0 {
		// profile show --proxy=false: a flag of serve, not of this command.
		hint := "give it to speclaunch " + strings.Join(of, " or speclaunch ") + "; speclaunch " + cmd.Path() + " --help lists this command's flags"
		if (name == "--port" || name == "--host") && hasFlag(cmd, "base-port") {
			// bench --port: its engines' ports are --base-port's.
			hint = "bench and tune run their engines on loopback ports of their own: pick them with --base-port PORT (or bench.base_port in the profile)"
		}
		return usage(fmt.Errorf("unknown flag %s: a flag of %s, not of %s", name, strings.Join(of, " and "), cmd.Path()), hint)
	}
	if bare, spaced := secret.TrimFlag(name); spaced {
		// "--api-key\u200b": say what is around it, which may not show.
		return usage(fmt.Errorf("flag %q has white space or an invisible character around it", secret.MaskArg(name)),
			"write "+bare+" with nothing around it")
	}
	msg := fmt.Sprintf("unknown flag %s: neither a speclaunch flag nor one llama-server lists", secret.MaskArg(name))
	near, says := suggestion(name, owned)
	// A typo of a secret flag (--api-kye=K) still carries a key.
	hint := "to pass a flag to the engine as it is, put it after --: speclaunch " + cmd.Path() + " ... -- " + secret.MaskArg(a)
	if plain, _, dashed := secret.DashedKeyFlag(name); dashed {
		// "-—api-key": after -- it is refused too.
		hint = "type " + plain + " with ASCII dashes"
	} else if secret.CredentialHeader([]string{a}, 0) || secret.CurlCredentialFlag(name) {
		hint = secret.HeaderFix // after --, refused too
	} else if jn, _, joined := secret.JoinedFlag(a); joined {
		// "--api-key K" quoted as one: after -- it is refused too.
		hint = secret.JoinedFix(jn)
	} else if secret.SecretFlag(near) {
		spelt := near
		if hasVal {
			spelt = secret.MaskArg(near + "=" + val)
		}
		hint = "spell it " + spelt + "; a misspelt key flag is refused after -- too"
	} else if strings.EqualFold(near, name) {
		// --PORT: after -- llama-server would refuse it; flags are case-sensitive.
		hint = "spell it " + near + ": flags are case-sensitive, and after -- llama-server refuses " + name
	} else if near != "" {
		// --draft-blok-size: the hint led with passing the typo on as it is.
		hint = "spell it " + near + "; " + hint
	}
	return usage(errors.New(msg+says), hint)
}

// commandsWithFlag are the commands under app (their paths: "serve",
// "policy explain") that take the flag name in any of its spellings.
func commandsWithFlag(app *kong.Node, name string) []string {
	var out []string
	var walk func(n *kong.Node)
	walk = func(n *kong.Node) {
		for _, c := range n.Children {
			if c.Type != kong.CommandNode {
				continue
			}
			if owned, _ := ownedFlags(c); len(c.Children) == 0 {
				if _, ok := owned[name]; ok {
					out = append(out, c.Path())
				}
			}
			walk(c)
		}
	}
	walk(app)
	// serve first: the command most flags are for.
	if i := slices.Index(out, "serve"); i > 0 {
		out = append([]string{"serve"}, slices.Delete(out, i, i+1)...)
	}
	return out
}

// knownFlag is v's flag name when v is a flag speclaunch or llama-server
// knows (not a negative number), else "".
func knownFlag(v string, owned map[string]int) string {
	if !strings.HasPrefix(v, "-") || v == "-" || isNegativeNumber(v) {
		return ""
	}
	name, _, _ := strings.Cut(v, "=")
	if long, ok := llamaAliases[name]; ok {
		name = long
	}
	if _, ok := owned[name]; ok {
		return name
	}
	if _, ok := llamaflags.Values(name); ok {
		return name
	}
	return ""
}

// typedEmptyKey refuses a key flag typed on speclaunch's own command line
// with no key (--api-key "", --api-key=), naming that flag: the engine
// would serve with no API key. (One with no value at all is refused as any
// llama-server flag without its value is.)
func typedEmptyKey(name, val string, hasVal bool, rest []string) error {
	sp := engine.APIKeySpec(key.LlamaCpp)
	if !slices.Contains(sp.Flags, name) && !slices.Contains(sp.FileFlags, name) {
		return nil
	}
	if !hasVal {
		if len(rest) == 0 || rest[0] == "--" {
			return nil
		}
		val = rest[0]
	}
	if !sp.EmptyKey(name, val) {
		return nil
	}
	return usage(fmt.Errorf("flag %s has no value", name), sp.NoValue(name).Fix())
}

// findCommand returns the command node args select and the index of its
// name in args (-1 for the application itself). Flags before a command name
// are the application's (--help, --version), which take no value.
func findCommand(app *kong.Node, args []string) (*kong.Node, int) {
	node, at := app, -1
	for i, a := range args {
		if a == "--" {
			break
		}
		if strings.HasPrefix(a, "-") {
			continue
		}
		child := childNamed(node, a)
		if child == nil {
			break
		}
		node, at = child, i
	}
	return node, at
}

func childNamed(n *kong.Node, name string) *kong.Node {
	for _, c := range n.Children {
		if c.Type != kong.CommandNode {
			continue
		}
		if c.Name == name || slices.Contains(c.Aliases, name) {
			return c
		}
	}
	return nil
}

// flagAliases maps each alias of n's flags to the flag's long name
// ("--spec-type" to "draft-kind"), a negatable flag's --no- form among
// them, so that a source reads as typed: "flag --no-adapt", not "flag
// --adapt" for a false one.
func flagAliases(n *kong.Node) map[string]string {
	out := map[string]string{}
	for _, group := range n.AllFlags(false) {
		for _, f := range group {
			for _, a := range f.Aliases {
				out["--"+a] = f.Name
			}
			if f.Tag != nil && f.Tag.Negatable != "" {
				out["--no-"+f.Name] = f.Name
			}
		}
	}
	return out
}

// spelledAs records in spelled that a flag was typed as typed where that
// is an alias: a Kong alias (--spec-type for --draft-kind), or one of
// llamaAliases (-md), name being what it rewrote it to. Typed by its own
// name (or short one), the flag's record goes: the last one typed is the
// one whose value stands.
func spelledAs(spelled, aliases, shortToLong map[string]string, typed, name string) map[string]string {
	long, ok := aliases[typed]
	if !ok && typed != name && strings.HasPrefix(name, "--") {
		long, ok = strings.TrimPrefix(name, "--"), true
	}
	if !ok {
		if l, short := shortToLong[name]; short {
			name = l
		}
		delete(spelled, strings.TrimPrefix(name, "--"))
		return spelled
	}
	if spelled == nil {
		spelled = map[string]string{}
	}
	spelled[long] = typed
	return spelled
}

// ownedFlags maps every spelling of the command's flags (--name, aliases,
// -s) to how many values it takes, and each short spelling to its long
// name (Kong would read "-m=x" as the value "=x").
func ownedFlags(n *kong.Node) (values map[string]int, long map[string]string) {
	values, long = map[string]int{}, map[string]string{}
	for _, group := range n.AllFlags(false) {
		for _, f := range group {
			v := 1
			if f.IsBool() || f.IsCounter() {
				v = 0
			}
			values["--"+f.Name] = v
			for _, a := range f.Aliases {
				values["--"+a] = v
			}
			if f.Short != 0 {
				values["-"+string(f.Short)] = v
				long["-"+string(f.Short)] = "--" + f.Name
			}
			if f.Tag != nil && f.Tag.Negatable != "" {
				values["--no-"+f.Name] = 0
			}
		}
	}
	return values, long
}

// suggestion names the flag closest to an unknown one, case ignored, when
// it is close enough to be a typo: a launcher flag, or a llama-server one
// with all its spellings (--ngl: llama-server's -ngl, --gpu-layers,
// --n-gpu-layers). near is that flag ("" for none), says the words.
func suggestion(name string, owned map[string]int) (near, says string) {
	known := maps.Clone(owned)
	for _, n := range llamaflags.All() {
		if _, ok := known[n]; !ok {
			known[n] = -1 // a llama-server flag
		}
	}
	switch near = typo.NearestFold(name, slices.Sorted(maps.Keys(known))); {
	case near == "":
		return "", ""
	case known[near] >= 0:
		return near, fmt.Sprintf(" (did you mean %s?)", near)
	default:
		return near, fmt.Sprintf(" (did you mean llama-server's %s?)", strings.Join(llamaflags.Spellings(near), ", "))
	}
}

// takesEngineArgs reports a command with the engine-arguments positional.
func takesEngineArgs(n *kong.Node) bool {
	for _, p := range n.Positional {
		if p.Name == "engine-args" {
			return true
		}
	}
	return false
}

// looksLikeValue reports a token starting with '-' that must be the
// preceding flag's value: a negative number, or anything that is no flag
// either table knows ("-", "--" and flags are left alone).
func looksLikeValue(next string, owned map[string]int) bool {
	if !strings.HasPrefix(next, "-") || next == "-" || next == "--" {
		return false
	}
	if isNegativeNumber(next) {
		return true
	}
	name, _, _ := strings.Cut(next, "=")
	if _, ok := owned[name]; ok {
		return false
	}
	if _, ok := llamaAliases[name]; ok {
		return false
	}
	_, known := llamaflags.Values(name)
	return !known
}

func isNegativeNumber(s string) bool {
	if len(s) < 2 || s[0] != '-' {
		return false
	}
	for _, r := range s[1:] {
		if (r < '0' || r > '9') && r != '.' {
			return false
		}
	}
	return true
}

// settingsHelp adds each flag's variables, profile key and default to its
// --help from config.Rows (kong.PostBuild), so the help names what
// config.Load reads. It edits the built model: no interpolation at start.
func settingsHelp(k *kong.Kong) error {
	var walk func(n *kong.Node)
	walk = func(n *kong.Node) {
		for _, f := range n.Flags {
			if clause, ok := config.HelpFor(f.Name); ok {
				help, dot := strings.CutSuffix(strings.TrimSpace(f.Help), ".")
				f.Help = strings.TrimSpace(help + " " + clause)
				if dot {
					f.Help += "."
				}
			}
		}
		for _, c := range n.Children {
			walk(c)
		}
	}
	walk(k.Model.Node)
	return nil
}

// onOff reads a boolean flag's value as config.ParseBool reads a
// variable's (on/off and enabled/disabled too, which Kong's own mapper
// refuses), so that --watch=on means what MLXCEL_WATCH=on means.
type onOff struct{}

func (onOff) IsBool() bool { return true }

func (onOff) Decode(ctx *kong.DecodeContext, target reflect.Value) error {
	if ctx.Scan.Peek().Type != kong.FlagValueToken {
		target.SetBool(true)
		return nil
	}
	switch v := ctx.Scan.Pop().Value.(type) {
	case bool:
		target.SetBool(v)
	case string:
		b, err := config.ParseBool(v)
		if err != nil {
			return err
		}
		target.SetBool(b)
	default:
		return fmt.Errorf("bad boolean %v: want true or false (also 1/0, yes/no, on/off)", v)
	}
	return nil
}

// hasFlag says whether cmd takes the flag --name.
func hasFlag(cmd *kong.Node, name string) bool {
	for _, f := range cmd.AllFlags(true) {
		for _, g := range f {
			if g.Name == name {
				return true
			}
		}
	}
	return false
}
