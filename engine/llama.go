package engine

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/llamaflags"
	"github.com/speclaunch/speclaunch/internal/quote"
	"github.com/speclaunch/speclaunch/internal/width"
)

type llamaAdapter struct{}

func (llamaAdapter) Engine() key.Engine    { return key.LlamaCpp }
func (llamaAdapter) DefaultBinary() string { return "llama-server" }

// SpecType maps a drafter kind to llama.cpp's 2026 --spec-type value.
func SpecType(kind key.Drafter) (string, error) {
	switch kind {
	case key.Draft:
		return "draft-simple", nil
	case key.MTP, key.DFlash, key.DSpark, key.Eagle3:
		return "draft-" + string(kind), nil
	}
	return "", fmt.Errorf("%w: set --draft-kind (or draft.kind in the profile) to one of the accepted values", key.CheckSelectable(key.LlamaCpp, kind))
}

func (llamaAdapter) Command(s Spec, r width.Resolution, kind key.Drafter, environ []string, caps Caps) (Launch, error) {
	if s.Model == "" {
		return Launch{}, fmt.Errorf("no target model is set: set --model (or model in the profile)")
	}
	host, port, base, err := hostPort(s)
	if err != nil {
		return Launch{}, err
	}
	applied := renameDraftMin(&s, environ, caps.Spelling)
	if err := CheckPassthrough(key.LlamaCpp, s.Args); err != nil {
		return Launch{}, fmt.Errorf("%s: %w", s.ArgsFrom, err)
	}
	if err := checkServedOff(environ, s); err != nil {
		return Launch{}, err
	}
	embedded := s.Draft == "" && Embedded(key.LlamaCpp, kind)
	on, err := speculating(s, r, embedded)
	if err != nil {
		return Launch{}, err
	}
	l := Launch{BaseURL: base, Unknown: unknownLlamaFlags(s.Args, caps.Spelling), Notes: applied.notes}
	l.Warnings = append(l.Warnings, unknownWarnings(l.Unknown)...)
	sp := caps.Spelling
	if sp == SpellingUnknown {
		sp = Spelling2026
		l.Warnings = append(l.Warnings, "the llama-server flag spelling was not detected (binary not inspected); assumed the 2026 spelling (--spec-draft-model/--spec-type/--spec-draft-n-max): an older llama-server will refuse these flags")
	}
	argv := []string{binary(s, "llama-server"), "-m", s.Model}
	if on {
		n := strconv.Itoa(r.Width - 1)
		switch sp {
		case Spelling2026:
			st, err := SpecType(kind)
			if err != nil {
				return Launch{}, err
			}
			// --spec-type is always given: in 2026 trees a draft model alone
			// is loaded and drafts nothing. Embedded MTP has no draft
			// model: the target's own MTP layers draft.
			if !embedded {
				argv = append(argv, "--spec-draft-model", s.Draft)
			}
			argv = append(argv, "--spec-type", st, "--spec-draft-n-max", n)
		case SpellingLegacy:
			if embedded {
				return Launch{}, fmt.Errorf("drafter kind %q with no draft model drafts from the target's own MTP layers, which needs llama.cpp's 2026 tree (--spec-type draft-mtp), but this llama-server predates --spec-type draft-…: upgrade llama.cpp, or give a separate draft model with -md FILE and --spec-type draft-simple", kind)
			}
			if kind != key.Draft {
				return Launch{}, fmt.Errorf("drafter kind %q needs --spec-type draft-%s, but this llama-server predates --spec-type draft-…; it only drafts with a plain draft model: upgrade llama.cpp or use drafter kind draft", kind, kind)
			}
			argv = append(argv, "--model-draft", s.Draft, "--draft-max", n)
		default:
			return Launch{}, fmt.Errorf("unknown llama-server flag spelling %q: the launcher knows %q and %q", sp, Spelling2026, SpellingLegacy)
		}
	}
	argv = l.listen(argv, host, port)
	// Width verification reads /metrics.
	if !slices.Contains(s.Args, "--metrics") {
		argv = append(argv, "--metrics")
	}
	argv = append(argv, s.Args...)
	l.Argv = argv
	if err := buildEnv("llama-server", environ, llamaEnvRules(caps.Spelling), s.Env, s.envFrom, applied.env, s.applied(applied.said), &l); err != nil {
		return Launch{}, err
	}
	l.keysToEnv(key.LlamaCpp, "llama-server")
	return l, nil
}

// Acceptance is llama-server's per-request acceptance log line.
type Acceptance struct {
	Rate       float64
	Accepted   int
	Generated  int
	MeanLen    float64 // tokens per verify step, the bonus token included (2026 trees only)
	HasMeanLen bool
}

// Steps estimates the verify steps of the request: accepted / (mean len - 1).
// 0 when the line has no mean len or nothing was accepted.
func (a Acceptance) Steps() float64 {
	if !a.HasMeanLen || a.MeanLen <= 1 {
		return 0
	}
	return float64(a.Accepted) / (a.MeanLen - 1)
}

var acceptRE = regexp.MustCompile(`draft acceptance(?: rate)? = ([0-9.eE+-]+|nan|inf) \(\s*(\d+) accepted /\s*(\d+) generated\)(?:, mean len =\s*([0-9.eE+-]+|nan|inf))?`)

// ParseLlamaAcceptance parses
// `draft acceptance = X (A accepted / G generated), mean len = Y` (2026) and
// `draft acceptance rate = X (A accepted / G generated)` (older trees).
func ParseLlamaAcceptance(line string) (Acceptance, bool) {
	m := acceptRE.FindStringSubmatch(line)
	if m == nil {
		return Acceptance{}, false
	}
	var a Acceptance
	a.Rate, _ = strconv.ParseFloat(m[1], 64)
	var err error
	if a.Accepted, err = strconv.Atoi(m[2]); err != nil {
		return Acceptance{}, false
	}
	if a.Generated, err = strconv.Atoi(m[3]); err != nil {
		return Acceptance{}, false
	}
	if m[4] != "" {
		if v, err := strconv.ParseFloat(m[4], 64); err == nil {
			a.MeanLen, a.HasMeanLen = v, true
		}
	}
	return a, true
}

var llamaErrRE = regexp.MustCompile(`^(error while handling (?:argument|environment variable) .*|error: invalid argument: .*|error: .*)$`)

func (llamaAdapter) ObserveLine(line string) (Observation, bool) {
	if _, ok := ParseLlamaAcceptance(line); ok {
		// Drafting happened; the line does not state n_max (VerifyLlama reads it).
		return Observation{Speculative: true, Line: line}, true
	}
	t := strings.TrimSpace(line)
	if m := llamaErrRE.FindString(t); m != "" {
		return Observation{Error: m, Line: line}, true
	}
	return Observation{}, false
}

// draftMin is the minimum draft as legacy llama-server trees spell it,
// flags and variable, which llama.cpp 2026 removed (its --help: "the
// argument has been removed. use --spec-draft-n-min"; it refuses to start
// on them), and its 2026 names: renameDraftMin passes it on under those.
var draftMin = struct {
	old         []string
	flag        string
	env, newEnv string
}{[]string{"--draft-min", "--draft-n-min"}, "--spec-draft-n-min", "LLAMA_ARG_DRAFT_MIN", "LLAMA_ARG_SPEC_DRAFT_N_MIN"}

// renamed is what renameDraftMin did: the note on the flags it renamed,
// the variable to set in the child's environment (buildEnv's defaults)
// and the one it stands for (buildEnv's applied).
type renamed struct {
	notes     []string
	env, said map[string]string
}

// renameDraftMin passes the minimum draft, given under its legacy names,
// on under its 2026 ones to a tree not shown legacy (a tree not inspected
// runs the 2026 command), as the width's --draft-max is: the engine
// arguments' --draft-min N / --draft-n-min N become --spec-draft-n-min N
// in s, said once; LLAMA_ARG_DRAFT_MIN=N in the operator's environment,
// kept out (ruleDraftMin), is set as LLAMA_ARG_SPEC_DRAFT_N_MIN=N unless
// that is set already (then it stands, and the old one is warned of). A
// legacy tree takes the old names as given.
func renameDraftMin(s *Spec, environ []string, sp Spelling) renamed {
	var r renamed
	if sp == SpellingLegacy {
		return r
	}
	var from []string
	for i := 0; i < len(s.Args); i++ {
		name, _, inline := strings.Cut(s.Args[i], "=")
		if slices.Contains(draftMin.old, name) {
			if from == nil {
				s.Args = slices.Clone(s.Args)
			}
			s.Args[i], from = draftMin.flag+strings.TrimPrefix(s.Args[i], name), append(from, name)
		}
		if n, ok := llamaflags.Values(name); ok && !inline {
			i += n
		}
	}
	if from != nil {
		r.notes = []string{fmt.Sprintf("llama.cpp 2026 renamed %s to %s and refuses to start on the old name: passing it as %s", strings.Join(slices.Compact(slices.Sorted(slices.Values(from))), " and "), draftMin.flag, draftMin.flag)}
	}
	env := parseEnviron(environ)
	v, _ := env.get(draftMin.env)
	_, inProfile := s.Env[draftMin.newEnv] // set there, even empty on purpose: it stands
	flagged := from != nil || slices.ContainsFunc(s.Args, func(a string) bool {
		name, _, _ := strings.Cut(a, "=")
		return name == draftMin.flag
	}) // a flag wins over the variable in llama-server: passing both would say two things
	if now, _ := env.get(draftMin.newEnv); strings.TrimSpace(v) == "" || strings.TrimSpace(now) != "" || inProfile || flagged {
		return r
	}
	r.env = map[string]string{draftMin.newEnv: v}
	r.said = map[string]string{draftMin.env: "; passing it as " + draftMin.newEnv + "=" + quote.Text(v, 0)}
	return r
}
