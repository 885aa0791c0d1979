// Package engine turns the launcher's settings and resolved width into an
// engine command line (argv and environment), reads what width an engine
// really runs from its output, and verifies a running llama-server's width.
//
// The adapters are pure: Command does no I/O, so every arm is a table test.
// I/O lives only in DetectLlama (runs `llama-server --help`/`--version`) and
// VerifyLlama (HTTP probe of a running llama-server).
//
// Width is always the launcher's unit: verify rows = draft tokens + 1.
// mlxcel and sim take it as --draft-block-size W; llama.cpp as
// --spec-draft-n-max W-1 (legacy --draft-max W-1); vLLM as
// num_speculative_tokens W-1 in --speculative-config; SGLang as
// --speculative-num-draft-tokens W (a chain of W-1 steps, topk 1).
package engine

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"

	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/width"
)

// Spelling is the flag generation of a llama-server binary.
type Spelling string

const (
	// Spelling2026 is the 2026 tree: --spec-draft-model, --spec-type
	// draft-*, --spec-draft-n-max; --draft-max and LLAMA_ARG_DRAFT_MAX are
	// removed stubs that stop the server.
	Spelling2026 Spelling = "2026"
	// SpellingLegacy is the older tree: --model-draft, --draft-max; no
	// --spec-type draft-*; -md alone drafts.
	SpellingLegacy Spelling = "legacy"
	// SpellingUnknown means the binary was not inspected.
	SpellingUnknown Spelling = ""
)

// Caps is what the launcher knows about the engine binary it will start.
type Caps struct {
	Spelling Spelling `json:"flag_spelling"`
	Version  string   `json:"version"` // e.g. "9749 (d32676d)"
	Commit   string   `json:"commit"`  // e.g. "d32676d"
	Self     string   `json:"self"`    // path of the speclaunch binary, for sim
}

// Launch is an engine command: argv and the child's full environment.
type Launch struct {
	Argv       []string
	Env        []string          // full child environment
	EnvSet     map[string]string // what the launcher added or overrode (for display)
	EnvRemoved []string          // variables kept out of the child, with reasons in Warnings or Notes
	Warnings   []string
	// Notes are what the launcher did that an operator should know of
	// but need not fix (info lines): a name llama.cpp 2026 renamed,
	// passed on under its new one.
	Notes []string
	// Unknown is every distinct pass-through flag the engine's own flag
	// list does not hold (llama.cpp: llama-server's --help), which it
	// refuses to start on; Warnings names the first 20 and counts the
	// rest. Nil for an engine whose full list speclaunch does not hold.
	Unknown []UnknownFlag
	BaseURL string // http://host:port

	// hostAt and portAt are where Argv holds the listen host and port
	// (indices; 0 = the command has none): the slot At fills, so that an
	// engine behind speclaunch's proxy gets its loopback port without its
	// command being built again.
	hostAt, portAt int
}

// listen appends the listen address to argv ("--host H --port P", every
// adapter's spelling) and marks where it is, for At.
func (l *Launch) listen(argv []string, host string, port int) []string {
	l.hostAt, l.portAt = len(argv)+1, len(argv)+3
	return append(argv, "--host", host, "--port", strconv.Itoa(port))
}

// ArgvAt is Argv with its listen address set to host and port (a word,
// so that a dry run can print a placeholder): the command as it was built,
// not built again. ok is false when the command holds no listen address.
func (l Launch) ArgvAt(host, port string) (argv []string, ok bool) {
	if l.hostAt <= 0 || l.portAt <= 0 || l.hostAt >= len(l.Argv) || l.portAt >= len(l.Argv) {
		return nil, false
	}
	argv = slices.Clone(l.Argv)
	argv[l.hostAt], argv[l.portAt] = host, port
	return argv, true
}

// At is the command listening on host:port instead of the address it was
// built with: its argv's listen address and its BaseURL change, nothing
// else (serve starts each engine behind its proxy on a loopback port
// picked at start, from the plan's one command).
func (l Launch) At(host string, port int) (Launch, error) {
	if port <= 0 || port > 65535 {
		return Launch{}, fmt.Errorf("listen port %d is out of range (1-65535)", port)
	}
	argv, ok := l.ArgvAt(host, strconv.Itoa(port))
	if !ok {
		return Launch{}, errors.New("the engine command holds no listen address (--host, --port) to set")
	}
	l.Argv, l.BaseURL = argv, baseURL(host, port)
	return l, nil
}

// Observation is what one engine output line (or a verification probe)
// says about speculation.
type Observation struct {
	Speculative bool   // speculation runs
	Declined    bool   // the engine said it fell back to classic decode
	Width       int    // the width it runs, in the launcher's unit; 0 = not stated
	Kind        string // dflash, mtp, classic, draft-simple, ...
	From        string // block_size_from (mlxcel) or where a probe read the width
	Line        string // the line (or a probe summary) it came from
	// Error is a startup error the engine printed (it is about to exit);
	// empty otherwise.
	Error string
}

// Adapter knows one engine's command line and output.
type Adapter interface {
	Engine() key.Engine
	// DefaultBinary is the binary looked up on PATH when the settings name
	// none: "mlxcel-server", "llama-server"; sim: "" (Caps.Self + "__sim").
	DefaultBinary() string
	// Command is pure: settings + resolution + resolved drafter kind + the
	// launcher's environment + caps -> argv/env.
	Command(s Spec, r width.Resolution, kind key.Drafter, environ []string, caps Caps) (Launch, error)
	// ObserveLine inspects one engine output line for the width it runs or
	// a decline. ok=false if the line says nothing.
	ObserveLine(line string) (Observation, bool)
}

// For returns the adapter for an engine.
func For(e key.Engine) (Adapter, error) {
	switch e {
	case key.MLXCEL:
		return mlxcelAdapter{}, nil
	case key.LlamaCpp:
		return llamaAdapter{}, nil
	case key.Sim:
		return simAdapter{}, nil
	case key.VLLM:
		return vllmAdapter{}, nil
	case key.SGLang:
		return sglangAdapter{}, nil
	}
	return nil, fmt.Errorf("no adapter for engine %q: pick one of mlxcel, llama.cpp, vllm, sglang, sim", e)
}

// Spec is what an adapter needs of the settings to build an engine's
// command: the binary, the models, the address, and the operator's extra
// arguments and environment, with where each came from (a source label
// such as "profile p.toml:12", for errors). The width comes as a
// resolution beside it. plan.LaunchSpec makes one from the settings.
type Spec struct {
	Binary    string // "" = the engine's own binary name
	Model     string
	Draft     string
	DraftFrom string
	Host      string
	Port      int
	PortFrom  string
	Args      []string // passed through to the engine
	ArgsFrom  string
	Env       map[string]string // engine.env: set in the engine's environment
	EnvFrom   string            // where engine.env was set
	// EnvKeyFrom says where engine.env's variable k was set, its own
	// file:line (config.Settings.EnvSrc); nil: at EnvFrom.
	EnvKeyFrom func(k string) string
	// EnvApplied are the engine variables the settings took a value from
	// that this launch applies itself (the width's LLAMA_ARG_SPEC_DRAFT_N_MAX,
	// the kind's LLAMA_ARG_SPEC_TYPE): kept out of the engine's environment
	// with an info line, where one that lost to another setting, or whose
	// value speculation off drops, is warned of.
	EnvApplied []string
}

// applied is buildEnv's applied for s: its EnvApplied, with nothing more
// to say of them, and more.
func (s Spec) applied(more map[string]string) map[string]string {
	out := maps.Clone(more)
	if out == nil {
		out = map[string]string{}
	}
	for _, n := range s.EnvApplied {
		if _, ok := out[n]; !ok {
			out[n] = ""
		}
	}
	return out
}

// envFrom is where engine.env's variable k was set.
func (s Spec) envFrom(k string) string {
	if s.EnvKeyFrom != nil {
		return s.EnvKeyFrom(k)
	}
	return s.EnvFrom
}

// binary is the executable the settings name, else the engine default.
func binary(s Spec, def string) string {
	if s.Binary != "" {
		return s.Binary
	}
	return def
}

// hostPort returns the host and port to bind, with defaults, and the base URL.
func hostPort(s Spec) (host string, port int, base string, err error) {
	host = s.Host
	if host == "" {
		host = "127.0.0.1"
	}
	port = s.Port
	if port <= 0 || port > 65535 {
		return "", 0, "", fmt.Errorf("%s: port %d is out of range: set --port to a value between 1 and 65535", s.PortFrom, port)
	}
	return host, port, baseURL(host, port), nil
}

// baseURL is the URL speclaunch reaches an engine listening on host:port
// at: loopback when the engine binds every interface.
func baseURL(host string, port int) string {
	dial := host
	switch host {
	case "0.0.0.0", "":
		dial = "127.0.0.1"
	case "::", "[::]":
		dial = "::1"
	}
	return "http://" + net.JoinHostPort(dial, strconv.Itoa(port))
}

// Embedded reports whether drafter kind on engine e drafts from the
// target's own layers when no draft model is given: llama.cpp's MTP (its
// 2026 tree's --spec-type draft-mtp without --spec-draft-model). Given a
// draft model, the kind drafts from that model as any other. It is the one
// rule every "is there a drafter" asks (plan.EmbeddedDrafter); no other
// engine or kind has it: vLLM's and SGLang's MTP name the target as their
// draft model, mlxcel's MTP drafter is a checkpoint of its own.
func Embedded(e key.Engine, kind key.Drafter) bool {
	return e == key.LlamaCpp && kind == key.MTP
}

// speculating reports whether the resolution turns speculation on, and
// checks it against the settings. embedded: the drafter is the target's
// own layers (Embedded), so no draft model is needed.
func speculating(s Spec, r width.Resolution, embedded bool) (bool, error) {
	if r.Source == width.Off || (r.Source == "" && r.Width == 0 && s.Draft == "") {
		return false, nil
	}
	if s.Draft == "" && !embedded {
		return false, fmt.Errorf("a draft width %d was resolved (%s) but no draft model is set: set --draft-model (or draft.model in the profile), or leave the width unset to run without speculation", r.Width, r.Source)
	}
	if err := key.CheckWidth(r.Width); err != nil {
		return false, fmt.Errorf("resolved width (%s): %w", r.Source, err)
	}
	return true, nil
}
