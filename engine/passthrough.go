package engine

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"

	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/llamaflags"
	"github.com/speclaunch/speclaunch/internal/secret"
	"github.com/speclaunch/speclaunch/internal/typo"
)

// ErrPassthrough is what every CheckPassthrough error for an argument
// the launcher refuses as its own is (errors.Is): an ownedArgError.
var ErrPassthrough = errors.New("engine argument conflicts with the launcher")

// ownedArgError is the refusal of an engine argument that sets what the
// launcher sets, or what it cannot serve: a sentence naming the argument
// ("engine argument \"--draft-max\" sets the draft width: FIX"). It is
// ErrPassthrough, whose words it does not repeat.
type ownedArgError struct{ msg string }

func (e *ownedArgError) Error() string { return e.msg }

// Is makes the error ErrPassthrough.
func (e *ownedArgError) Is(target error) bool { return target == ErrPassthrough }

// ownedArg is the refusal of engine argument arg (as shown, masked),
// which sets what; fix says what to do instead.
func ownedArg(arg, what, fix string) error {
	return &ownedArgError{fmt.Sprintf("engine argument %s sets %s: %s", arg, what, fix)}
}

// ErrKeyFlagMisspelt is wrapped by the CheckPassthrough error for an
// engine argument that is not a flag the engine knows and is nearest a
// key flag (--api-kye K).
var ErrKeyFlagMisspelt = errors.New("engine argument is a misspelt key flag")

// ErrKeyFlagSpaced is wrapped by the CheckPassthrough error for a key
// flag with white space or an invisible character around it ("--api-key ",
// "\u200b--api-key", its key the next item).
var ErrKeyFlagSpaced = errors.New("engine argument is a key flag with white space or an invisible character around it")

// ErrKeyFlagDashed is wrapped by the CheckPassthrough error for a key
// flag that begins with another dash than "-" ("—api-key": autocorrect's
// em dash for "--"), which the engine reads as a value.
var ErrKeyFlagDashed = errors.New("engine argument is a key flag written with another dash")

// ErrKeyFlagJoined is wrapped by the CheckPassthrough error for an engine
// argument that is a key flag and its value in one ("--api-key K").
var ErrKeyFlagJoined = errors.New("engine argument is a key flag and its value in one")

type ownedFlag struct {
	what string // "the draft width", ...
	fix  string // the launcher's own way to set it
}

var (
	ownWidth = ownedFlag{"the draft width",
		"set the width with speclaunch --draft-block-size W (or draft.block_size in the profile), in the launcher's unit: verify rows = draft tokens + 1"}
	// ownLlamaWidth is llama-server's width flags, which speclaunch takes
	// as its own before "--" (cli: --spec-draft-n-max and its aliases).
	ownLlamaWidth = ownedFlag{ownWidth.what,
		"speclaunch takes it as its own flag typed before -- (draft tokens N, width N+1): move it before --, or " + ownWidth.fix}
	ownDraftModel = ownedFlag{"the draft model",
		"set it with speclaunch --draft-model (or draft.model in the profile)"}
	ownKind = ownedFlag{"the drafter kind",
		"set it with speclaunch --draft-kind (or draft.kind in the profile)"}
	ownModel = ownedFlag{"the target model",
		"set it with speclaunch --model (or model.path in the profile)"}
	ownHFModel = ownedFlag{"the target model from a Hugging Face repo",
		"speclaunch reads the target's weight format from a local file: download the GGUF first (llama-server -hf caches it under ~/.cache/llama.cpp) and pass --model PATH"}
	ownHFDraft = ownedFlag{"the draft model from a Hugging Face repo",
		"speclaunch reads the drafter from a local file: download the draft GGUF first and pass --draft-model PATH"}
	ownHFToken = ownedFlag{"a Hugging Face token, which would show on the engine's command line (ps)",
		"speclaunch runs llama-server on local model files (its -hf is refused), so it downloads nothing: drop the flag (llama-server reads HF_TOKEN from its environment, should it ever need one)"}
	ownHost = ownedFlag{"the listen address",
		"set it with speclaunch serve --host (or server.host in the profile); bench and tune run their engines on loopback"}
	ownPort = ownedFlag{"the listen port",
		"set it with speclaunch serve --port (or server.port in the profile); bench and tune pick their engines' ports (--base-port, bench.base_port)"}
)

// servedOff are llama-server's settings that move what it serves off
// plain HTTP at the root, where speclaunch's own requests to it go: its
// readiness check (GET /health, internal/supervise), the width probe and
// the /metrics scrape would never succeed (llama-server serves /health
// under the prefix too, or speaks only TLS), and serve would wait out its
// whole ready timeout. Each is refused as a flag (llamaOwned) and as the
// variable llama-server reads it from (checkServedOff), naming the fix.
var servedOff = []struct {
	flag, env string
	what, fix string // what it sets; how to have it all the same
}{
	{"--api-prefix", "LLAMA_ARG_API_PREFIX", servePrefix, prefixFix},
	{"--ssl-key-file", "LLAMA_ARG_SSL_KEY_FILE", serveTLS, tlsFix},
	{"--ssl-cert-file", "LLAMA_ARG_SSL_CERT_FILE", serveTLS, tlsFix},
}

const (
	servePrefix = "a path prefix for every route of the engine, /health included, where speclaunch asks at the root (its readiness check, width probe and /metrics scrape would never succeed: serve would wait out its ready timeout)"
	prefixFix   = "speclaunch's proxy serves the engine's routes at the root of its port; to serve them under a prefix, put a path-rewriting proxy in front of speclaunch's port"
	serveTLS    = "HTTPS for the engine, where speclaunch speaks plain HTTP to it (its readiness check, width probe and /metrics scrape would never succeed: serve would wait out its ready timeout)"
	tlsFix      = "speclaunch's proxy serves plain HTTP; for HTTPS, put a TLS-terminating proxy in front of speclaunch's port"
)

// checkServedOff refuses a servedOff variable set to a value, in the
// operator's environment (environ, NAME=VALUE) or the profile's
// engine.env (s.Env, each named by its file:line): llama-server reads it
// as its flag. Set but empty, it is unset to the launcher, and to
// llama-server harmless (no prefix; no TLS without both files); engine.env's
// value, empty included, is the one the engine gets over the operator's.
func checkServedOff(environ []string, s Spec) error {
	env := parseEnviron(environ)
	for _, f := range servedOff {
		if v, set := s.Env[f.env]; set {
			if v != "" {
				return fmt.Errorf("%s: engine.env sets %s (llama-server's %s), which sets %s: remove it; %s", s.envFrom(f.env), f.env, f.flag, f.what, f.fix)
			}
			continue // the profile's empty value is what the engine gets
		}
		if v, _ := env.get(f.env); v != "" {
			return fmt.Errorf("env %s (llama-server's %s) sets %s: unset it; %s", f.env, f.flag, f.what, f.fix)
		}
	}
	return nil
}

var commonOwned = map[string]ownedFlag{
	"-md": ownDraftModel, "--model-draft": ownDraftModel, "--draft-model": ownDraftModel, "--spec-draft-model": ownDraftModel,
	"--spec-type": ownKind, "--draft-kind": ownKind,
	"-m": ownModel, "--model": ownModel,
	"--host": ownHost, "--port": ownPort,
}

var mlxcelOwned = map[string]ownedFlag{
	"--draft-block-size": ownWidth,
}

var llamaOwned = map[string]ownedFlag{
	"--spec-draft-n-max": ownLlamaWidth, "--draft-max": ownLlamaWidth, "--draft": ownLlamaWidth, "--draft-n": ownLlamaWidth,
	"--spec-draft-hf": ownHFDraft, "-hfd": ownHFDraft, "-hfrd": ownHFDraft, "--hf-repo-draft": ownHFDraft,
	"--spec-default": ownKind,
	"-hf":            ownHFModel, "-hfr": ownHFModel, "--hf-repo": ownHFModel, "-mu": ownModel, "--model-url": ownModel,
	"--hf-token": ownHFToken, "-hft": ownHFToken,
}

func init() {
	for _, f := range servedOff {
		llamaOwned[f.flag] = ownedFlag{f.what, "drop it; " + f.fix}
	}
}

// HFRepoHint is what to add where no target model is given but the
// engine arguments name a Hugging Face repo for it (llama-server's -hf
// habit): the flag and the fix; "" when they do not. The flags are
// llamaOwned's, so the refusal of -hf beside a target and this hint
// name the same ones.
func HFRepoHint(e key.Engine, args []string) string {
	for _, a := range args {
		name, _, _ := strings.Cut(a, "=")
		if f, ok := llamaOwned[name]; ok && f == ownHFModel {
			switch {
			case key.FetchesModel(e, "org/repo"): // vLLM, SGLang: the target may be a repo id
				return " (" + name + " is llama-server's flag: give the Hugging Face repo id as the target, -m ORG/REPO)"
			case e == key.MLXCEL || e == key.Sim: // the sim stands in for mlxcel
				return " (" + name + " is llama-server's flag: mlxcel's target is an MLX checkpoint directory; download it and pass -m DIR)"
			}
			return " (" + name + " is not enough: " + f.fix + ")"
		}
	}
	return ""
}

// vllmOwned: vLLM's pre-0.8 speculative flags (the launcher writes
// --speculative-config, or these on an old vLLM), and the --spec-method /
// --spec-model / --spec-tokens shorthands that launchers pass to newer vLLM
// trees in place of those --speculative-config keys (docs/engines.md).
// --speculative-config itself (also -sc and --speculative-config.KEY)
// passes through: its keys merge into the launcher's JSON (splitSpecConfig),
// except those the launcher owns (vllmOwnedKeys).
var vllmOwned = map[string]ownedFlag{
	"--num-speculative-tokens": ownWidth,
	"--speculative-model":      ownDraftModel,
	"--spec-tokens":            ownWidth,
	"--spec-model":             ownDraftModel,
	"--spec-method":            ownKind,
}

// sglangOwned: SGLang's speculative settings (python/sglang/srt/server_args.py)
// and its model flag with its alias.
var sglangOwned = map[string]ownedFlag{
	"--speculative-num-draft-tokens":  ownWidth,
	"--speculative-num-steps":         ownWidth,
	"--speculative-eagle-topk":        {"the draft tree's branching (the launcher runs a chain, topk 1, so that the width is num_draft_tokens)", "set the width with speclaunch --draft-block-size W (or draft.block_size in the profile)"},
	"--speculative-dflash-block-size": ownWidth,
	"--speculative-dspark-block-size": ownWidth,
	"--speculative-algorithm":         ownKind,
	"--speculative-draft-model-path":  ownDraftModel,
	"--speculative-draft-model":       ownDraftModel,
	"--model-path":                    ownModel,
	// SGLang's own adaptive mode moves num_steps (so the width) at run time.
	"--speculative-adaptive": {"SGLang's adaptive speculation, which changes num_steps and so the width while serving (the launcher's width and its verification would no longer hold)",
		"drop it: the launcher runs the one width it resolved; pick another with speclaunch --draft-block-size W (or draft.block_size in the profile)"},
}

// normFlag spells a long flag with dashes: vLLM's and SGLang's parsers
// accept --tensor_parallel_size for --tensor-parallel-size.
func normFlag(name string) string {
	if strings.HasPrefix(name, "--") {
		return "--" + strings.ReplaceAll(name[2:], "_", "-")
	}
	return name
}

// CheckPassthrough rejects pass-through engine arguments that set what the
// launcher owns: the width (mlxcel --draft-block-size; llama.cpp
// --spec-draft-n-max, --draft-max, --draft, --draft-n), the draft model or
// kind, the target model, host and port; both `--flag v` and `--flag=v`
// forms. The error names the launcher's own flag. Arguments are never
// passed through a shell, so no quoting is checked. Then a key flag
// joined to its value or with characters around it (keyFlagArg), then a
// misspelt key flag (misspeltKeyFlag). Every pass reads an argument's flag
// by argName. The minimum draft's legacy names (--draft-min), which a 2026
// tree removed, are not refused: llama's Command renames them
// (renameDraftMin).
func CheckPassthrough(e key.Engine, args []string) error {
	var extra map[string]ownedFlag
	switch e {
	case key.MLXCEL, key.Sim:
		extra = mlxcelOwned
	case key.LlamaCpp:
		extra = llamaOwned
	case key.VLLM:
		extra = vllmOwned
	case key.SGLang:
		extra = sglangOwned
	default:
		return fmt.Errorf("no pass-through rules for engine %q: pick one of mlxcel, llama.cpp, vllm, sglang, sim", e)
	}
	flags := make([]flagArg, len(args))
	for i, a := range args {
		flags[i] = argName(e, a)
		o, ok := extra[flags[i].name]
		if !ok {
			o, ok = commonOwned[flags[i].name]
		}
		if ok {
			return ownedArg(strconv.Quote(secret.MaskArg(a)), o.what, o.fix)
		}
	}
	j := newKeyFlagJudge(e)
	for i, a := range args {
		_, _, fileJoined := joinedFileFlag(j.sp, a)
		if i > 0 && (flags[i].dash != 0 || flags[i].joined || fileJoined) && valueOf(e, args[i-1]) && (i+1 == len(args) || strings.HasPrefix(args[i+1], "-")) {
			// "--reverse-prompt —API-KEY:": a prose value, the flag
			// before it takes one, and no key follows it (after
			// "--alias —api-key K" K would be one: refused below).
			flags[i] = flagArg{}
			continue
		}
		if err := keyFlagArg(j, a, flags[i]); err != nil {
			return err
		}
		if secret.CredentialHeader(args, i) {
			return &ownedArgError{fmt.Sprintf("engine argument %s: %s", strconv.Quote(secret.MaskArgv(args)[i]), secret.HeaderFix)}
		}
	}
	return misspeltKeyFlag(j, args, flags)
}

// flagArg is an engine argument as every pass of CheckPassthrough reads
// it (argName).
type flagArg struct {
	name   string // the flag it names; "" for a value
	joined bool   // a secret flag and its value in one (secret.JoinedFlag)
	spaced bool   // joinSep characters around the name (secret.TrimFlag)
	dash   rune   // the other dash a key flag began with (secret.PlainDashes), 0 if none
}

// argName is the flag engine argument a names: a joined one's
// ("--hf-token T" is --hf-token), else the part before "=", bare of the
// white space or invisible characters around it (" --hf-token" is
// --hf-token), spelt with dashes for vLLM and SGLang (normFlag); an
// argument that starts with white space is a value unless it names a key
// flag.
func argName(e key.Engine, a string) flagArg {
	name, _, _ := strings.Cut(a, "=")
	var f flagArg
	if n, _, ok := secret.JoinedFlag(a); ok {
		name, f.joined = n, true
	} else {
		name, f.spaced = secret.TrimFlag(name)
	}
	if plain, r, ok := secret.DashedKeyFlag(name); ok {
		name, f.dash = plain, r // "—api-key": autocorrect's dash, a key flag still
	}
	if n, _, colon := strings.Cut(name, ":"); colon && secret.ListedFlag(n) {
		// "--api-key:K": no engine reads a key from it, and the key sits
		// on its command line.
		name, f.joined = n, true
	}
	if !strings.HasPrefix(name, "-") {
		return flagArg{}
	}
	if f.spaced && unicode.IsSpace([]rune(a)[0]) && !secret.ListedFlag(name) {
		// White space before a dash is a value's ("\n-m" after
		// --reverse-prompt, " --port" in a chat template), but a key flag
		// so written is still one the engine cannot read.
		return flagArg{}
	}
	if e == key.VLLM || e == key.SGLang {
		name = normFlag(name) // --api_key is --api-key to them
	}
	f.name = name
	return f
}

// valueOf reports whether argument prev is a llama-server flag that takes
// a value and no key (--reverse-prompt, --alias): the argument after it is
// that value, however it is shaped.
func valueOf(e key.Engine, prev string) bool {
	if e != key.LlamaCpp && e != key.MLXCEL && e != key.Sim || strings.Contains(prev, "=") || secret.SecretFlag(prev) {
		return false
	}
	n, ok := llamaflags.Values(prev)
	return ok && n > 0
}

// keyFlagArg refuses a key flag the engine cannot read as one: with
// white space or an invisible character around it ("--api-key\u200b",
// its key the next item), which the engine takes for another flag; or
// joined to its value in one argument (secret.JoinedFlag: "--api-key K",
// a TOML list's one item where two were meant), from which the engine
// reads no key, so it refuses to start on an unknown flag (llama-server)
// or serves with no API key (the sim), and the value would sit on its
// command line. The argument is masked. The fix names the flag spelt
// right ("--api-kye K" → --api-key): as given it would be refused again,
// as misspelt. A flag secret by its words only (--eos-token </s>) is
// masked, not refused.
func keyFlagArg(j keyFlagJudge, a string, f flagArg) error {
	if f.dash != 0 {
		fix := f.name
		if near := j.near(f.name); near != "" {
			fix = near
		}
		then := "type " + fix + " with ASCII dashes"
		if o, owned := llamaOwned[fix]; owned && j.e == key.LlamaCpp {
			then = fmt.Sprintf("%s sets %s: %s", fix, o.what, o.fix) // spelt right it is refused too
		}
		return fmt.Errorf("%w: %q begins with %s (U+%04X), not \"-\": the engine reads it as no flag, and the key after it would sit on its command line as a plain argument; %s",
			ErrKeyFlagDashed, secret.MaskArg(a), string(f.dash), f.dash, then)
	}
	if name, file, ok := joinedFileFlag(j.sp, a); ok {
		shown := a
		if !strings.ContainsAny(file, "/.") { // no path's shape: maybe a key given to the wrong flag
			shown, file = name+" "+secret.Mask(file), secret.Mask(file)
		}
		return fmt.Errorf("%w: %q: the engine reads no key file from it (it refuses to start on an unknown flag, or serves with no API key); give the flag and its file as two arguments (%s PATH; in a profile's engine.args, two list items: [%q, %q]) or as %s=PATH",
			ErrKeyFlagJoined, shown, name, name, file, name)
	}
	if (!f.joined && !f.spaced) || !secret.ListedFlag(f.name) {
		return nil
	}
	fix, typed := f.name, ""
	if near := j.near(f.name); near != "" {
		fix, typed = near, fmt.Sprintf("; %s is not a flag the engine (%s) knows", f.name, j.e)
	}
	if f.spaced {
		return fmt.Errorf("%w: %q: the engine takes it for another flag; write %s with nothing around it%s", ErrKeyFlagSpaced, secret.MaskArg(a), fix, typed)
	}
	return fmt.Errorf("%w: %q: the engine reads no key from it (it refuses to start on an unknown flag, or serves with no API key); %s%s",
		ErrKeyFlagJoined, secret.MaskArg(a), secret.JoinedFix(fix), typed)
}

// joinedFileFlag is a key-file flag of the engine (sp.FileFlags:
// --api-key-file) and its file in one argument ("--api-key-file k.txt", a
// TOML list's one item where two were meant), its case, the words after
// it and the white space or invisible characters between them aside: the
// engine reads no key file from it and the sim served with no key at
// all. A file is no secret, so it is shown, unless it has no path's
// shape (no "/" or "."): a key given to the wrong flag is masked.
func joinedFileFlag(sp secret.Spec, a string) (name, file string, ok bool) {
	f := strings.FieldsFunc(a, func(r rune) bool { return unicode.IsSpace(r) || unicode.Is(unicode.Cf, r) })
	if len(f) < 2 {
		return "", "", false
	}
	for _, n := range sp.FileFlags {
		if strings.EqualFold(n, f[0]) { // --API-KEY-FILE: no flag the engine reads either
			return n, strings.Join(f[1:], " "), true
		}
	}
	return "", "", false
}

// misspeltKeyFlag refuses an argument that is no flag the engine knows
// and whose nearest known flag, case ignored, takes a secret (--api-kye K,
// --hf-tokn T, --API-KEY K):
// the engine refuses an unknown flag anyway, and meanwhile its value, a
// key, would sit on the engine's command line as a plain argument. The
// flags known are llama-server's --help (internal/llamaflags) for the
// engines that take its flags, and the engine's key flags for the others
// (whose full lists speclaunch does not hold). The value is masked. Each
// distinct name is judged once, and the nearest of every known flag is
// looked for only where a key flag is within reach: a profile's many
// copies of one argument cost one look, not one each.
func misspeltKeyFlag(j keyFlagJudge, args []string, flags []flagArg) error {
	judged := map[string]bool{}
	for i, a := range args {
		name := flags[i].name
		if name == "" || name == "-" || strings.TrimLeft(name, "-0123456789.") == "" || judged[name] {
			continue
		}
		judged[name] = true
		near := j.near(name)
		if near == "" {
			continue
		}
		_, val, inline := strings.Cut(a, "=")
		if !inline && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			val = args[i+1]
		}
		shown := name
		if val != "" {
			shown += " " + secret.Mask(val)
		}
		if o, owned := llamaOwned[near]; owned && j.e == key.LlamaCpp {
			// Spelt right it is refused too (--hf-token): say why, not "spell it".
			return fmt.Errorf("%w: %s is not a flag the engine (%s) knows; did you mean %s? That sets %s: %s", ErrKeyFlagMisspelt, shown, j.e, near, o.what, o.fix)
		}
		return fmt.Errorf("%w: %s is not a flag the engine (%s) knows; did you mean %s? Spell it %s: as given, the engine refuses to start on the unknown flag, and the key would be on its command line as a plain argument", ErrKeyFlagMisspelt, shown, j.e, near, near)
	}
	return nil
}

// keyFlagJudge knows an engine's flags, to say which key flag an unknown
// one is a typo of.
type keyFlagJudge struct {
	e               key.Engine
	sp              secret.Spec
	known, keyFlags []string
}

func newKeyFlagJudge(e key.Engine) keyFlagJudge {
	known, keyFlags := knownFlags(e)
	return keyFlagJudge{e: e, sp: APIKeySpec(e), known: known, keyFlags: keyFlags}
}

// near is the key flag name is a typo of, "" when name is a flag the
// engine knows or near no key flag. The nearest key flag must be within 2
// edits, case ignored (--API-KEY is a typo as well: llama-server's flags
// are case-sensitive, and it refuses it as an unknown flag): the short
// list first, the long one only then.
func (j keyFlagJudge) near(name string) string {
	llamaLike := j.e == key.LlamaCpp || j.e == key.MLXCEL || j.e == key.Sim
	if _, ok := llamaflags.Values(name); (llamaLike && ok) || slices.Contains(j.known, name) {
		return ""
	}
	if typo.NearestFold(name, j.keyFlags) == "" {
		return ""
	}
	near := typo.NearestFold(name, j.known)
	if near == "" || !isKeyFlag(j.sp, near) {
		return ""
	}
	return near
}

// isKeyFlag reports whether flag f of an engine whose keys sp names takes
// a key or a key file: a key file's flag counts, as a key pasted after
// --API-KEY-FILE would sit on the command line as surely as one after
// --API-KEY.
func isKeyFlag(sp secret.Spec, f string) bool {
	return secret.SecretFlag(f) || slices.Contains(sp.Flags, f) || slices.Contains(sp.FileFlags, f)
}

// knownFlags are the flags engine e is known to take (llama-server's
// --help for the engines that take its flags, else e's key flags) and
// those of them that take a key or a key file.
func knownFlags(e key.Engine) (known, keyFlags []string) {
	if kf, ok := llamaKeyFlags()[e]; ok {
		return llamaflags.All(), kf
	}
	sp := APIKeySpec(e)
	known = append(slices.Clone(sp.Flags), sp.FileFlags...)
	return known, known
}

// llamaKeyFlags are, for each engine that takes llama-server's flags, the
// ones of them that take a key or a key file: judged once, not on every
// engine command (some 500 flags, each a name rule and a typo search).
var llamaKeyFlags = sync.OnceValue(func() map[key.Engine][]string {
	m := map[key.Engine][]string{}
	for _, e := range []key.Engine{key.LlamaCpp, key.MLXCEL, key.Sim} {
		sp := APIKeySpec(e)
		m[e] = slices.DeleteFunc(slices.Clone(llamaflags.All()), func(f string) bool { return !isKeyFlag(sp, f) })
	}
	return m
})

// UnknownFlag is a pass-through argument that looks like a flag the
// engine's own flag list does not hold: the engine refuses to start on it.
type UnknownFlag struct {
	Name  string // as given, without its "=value"
	Count int    // how many times it is given
	// Spelling is the llama-server tree whose --help was judged (the
	// binary's, as detected); SpellingUnknown judges every captured tree's.
	Spelling Spelling
	// OtherTree is a flag another captured tree lists: a build of this
	// spelling newer or older than its capture may list it too, so it is
	// said, not held against a reload (Unproven).
	OtherTree bool
	// Removed is the 2026 tree's --help for a flag it lists as a removed
	// stub (llamaflags.Removed: "the argument has been removed. use
	// ..."), given to a tree not shown legacy; "" for any other flag.
	Removed string
}

// Unproven reports whether u is known to stop the engine at its start: a
// flag no captured llama-server tree lists.
func (u UnknownFlag) Unproven() bool { return !u.OtherTree }

// Why is the warning of u: whose list lacks it, how often it is given,
// and the nearest flag the list holds (found here, not for every unknown
// flag: a profile may hold tens of thousands). A flag another captured
// tree lists is said to be that tree's.
func (u UnknownFlag) Why() string {
	given := ""
	if u.Count > 1 {
		given = fmt.Sprintf(" (given %d times)", u.Count)
	}
	known, whose := llamaflags.All(), "llama-server"
	if t, ok := llamaTree(u.Spelling); ok {
		known, whose = llamaflags.AllOf(t), fmt.Sprintf("this llama-server (flag spelling %s)", u.Spelling)
	}
	if u.Removed != "" {
		return fmt.Sprintf("engine argument %s%s is a flag 2026 llama-server trees removed: their --help says %q, and they refuse to start on it; pass the flag it names instead (a legacy tree takes %s as given)", u.Name, given, u.Removed, u.Name)
	}
	msg := fmt.Sprintf("engine argument %s%s is not a flag %s lists in its --help; llama-server refuses to start on an unknown flag", u.Name, given, whose)
	if u.OtherTree {
		msg = fmt.Sprintf("engine argument %s%s is listed by another llama.cpp tree's --help, not by the one captured for %s; a build that does not list it refuses to start on it", u.Name, given, whose)
	}
	if near := llamaflags.Nearest(u.Name, known); near != "" {
		msg += fmt.Sprintf(" (did you mean %s?)", strings.Join(llamaflags.Spellings(near), ", "))
	}
	return msg
}

// llamaTree is the captured tree of spelling sp (internal/llamaflags);
// ok is false for SpellingUnknown, judged against every captured tree.
func llamaTree(sp Spelling) (t llamaflags.Tree, ok bool) {
	switch sp {
	case Spelling2026:
		return llamaflags.Tree2026, true
	case SpellingLegacy:
		return llamaflags.TreeLegacy, true
	}
	return 0, false
}

// maxUnknownFlagWarnings is how many distinct unknown flags are each named
// in a warning; the rest are counted in one more.
const maxUnknownFlagWarnings = 20

// unknownWarnings are the warnings of the unknown flags us: the first
// maxUnknownFlagWarnings named, each with the nearest known flag, the
// rest counted in one more (a profile of 40,000 distinct ones printed
// 40,000 warnings).
func unknownWarnings(us []UnknownFlag) []string {
	var out []string
	for _, u := range us[:min(len(us), maxUnknownFlagWarnings)] {
		out = append(out, u.Why())
	}
	if rest := us[min(len(us), maxUnknownFlagWarnings):]; len(rest) > 0 {
		n := 0
		for _, u := range rest {
			n += u.Count
		}
		out = append(out, fmt.Sprintf("and %d more distinct engine arguments (%d in all, the first %s) are not flags llama-server lists in its --help; llama-server refuses to start on an unknown flag", len(rest), n, rest[0].Name))
	}
	return out
}

// unknownLlamaFlags finds every distinct pass-through argument that looks
// like a flag the --help of llama-server's tree of spelling sp does not
// list (internal/llamaflags; every captured tree's for SpellingUnknown),
// first given first, with how often it is given: llama-server refuses to
// start on an unknown flag, and a dry run should say so first (the
// warnings are unknownWarnings'). Values are stepped over by each known
// flag's arity, so "--keep -1" is not read as a flag. A flag the 2026
// tree's --help lists as a removed stub (--spec-ngram-size-n) is one it
// refuses too, unless the tree is shown legacy, whose own it is (a tree
// not inspected runs the 2026 command): known to stop the engine
// (Unproven), as a flag no tree lists is.
func unknownLlamaFlags(args []string, sp Spelling) []UnknownFlag {
	var out []UnknownFlag
	at := map[string]int{} // name → index in out
	tree, oneTree := llamaTree(sp)
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" || strings.TrimLeft(a, "-0123456789.") == "" {
			continue
		}
		name, _, hasVal := strings.Cut(a, "=")
		stub := ""
		if n, ok := llamaflags.Values(name); ok {
			if !hasVal {
				i += n
			}
			if why, removed := llamaflags.Removed(name); removed && sp != SpellingLegacy {
				stub = why
			} else if !oneTree || llamaflags.ListedBy(name, tree) {
				continue
			}
		}
		j, seen := at[name]
		if !seen {
			j = len(out)
			at[name] = j
			_, other := llamaflags.Values(name)
			other = other && stub == ""
			out = append(out, UnknownFlag{Name: name, Spelling: sp, OtherTree: other, Removed: stub})
		}
		out[j].Count++
	}
	return out
}
