package engine

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/width"
)

// SimArg is the hidden subcommand the speclaunch binary re-executes itself
// with to run the simulator engine.
const SimArg = "__sim"

type mlxcelAdapter struct{}

func (mlxcelAdapter) Engine() key.Engine    { return key.MLXCEL }
func (mlxcelAdapter) DefaultBinary() string { return "mlxcel-server" }

func (mlxcelAdapter) Command(s Spec, r width.Resolution, kind key.Drafter, environ []string, caps Caps) (Launch, error) {
	l, err := mlxcelFlags(key.MLXCEL, s, r, kind, binary(s, "mlxcel-server"))
	if err != nil {
		return Launch{}, err
	}
	// The width line is an INFO line: RUST_LOG=info unless the operator set one.
	if err := buildEnv("mlxcel-server", environ, mlxcelEnvRules, s.Env, s.envFrom, map[string]string{"RUST_LOG": "info"}, s.applied(nil), &l); err != nil {
		return Launch{}, err
	}
	if v := envValue(l.Env, "RUST_LOG"); r.Width >= key.MinWidth && !logsInfo(v) {
		l.Warnings = append(l.Warnings, fmt.Sprintf("RUST_LOG=%s hides mlxcel's INFO speculative= line, so the width it runs cannot be verified; use RUST_LOG=info (or leave RUST_LOG unset)", v))
	}
	l.keysToEnv(key.MLXCEL, "mlxcel-server")
	return l, nil
}

func envValue(env []string, name string) string {
	for _, e := range env {
		if k, v, ok := strings.Cut(e, "="); ok && k == name {
			return v
		}
	}
	return ""
}

// logsInfo reports whether a RUST_LOG filter lets INFO lines through: any
// directive at info, debug or trace (global or for a target) is taken to.
func logsInfo(filter string) bool {
	f := strings.ToLower(filter)
	return f == "" || strings.Contains(f, "info") || strings.Contains(f, "debug") || strings.Contains(f, "trace")
}

func (mlxcelAdapter) ObserveLine(line string) (Observation, bool) { return observeMLXCEL(line) }

type simAdapter struct{}

func (simAdapter) Engine() key.Engine    { return key.Sim }
func (simAdapter) DefaultBinary() string { return "" }

func (simAdapter) Command(s Spec, r width.Resolution, kind key.Drafter, environ []string, caps Caps) (Launch, error) {
	self := caps.Self
	if s.Binary != "" {
		self = s.Binary
	}
	if self == "" {
		return Launch{}, fmt.Errorf("the sim engine re-executes the speclaunch binary, but its path is unknown: pass Caps.Self (os.Executable) or set engine.binary")
	}
	l, err := mlxcelFlags(key.Sim, s, r, kind, self, SimArg)
	if err != nil {
		return Launch{}, err
	}
	if err := buildEnv("sim", environ, mlxcelEnvRules, s.Env, s.envFrom, nil, s.applied(nil), &l); err != nil {
		return Launch{}, err
	}
	l.keysToEnv(key.Sim, "sim")
	return l, nil
}

func (simAdapter) ObserveLine(line string) (Observation, bool) { return observeMLXCEL(line) }

// mlxcelFlags renders mlxcel-server's command line (shared by sim): head
// (the program) then -m T [--model-draft D --draft-kind K
// --draft-block-size W] --host H --port P + pass-through.
func mlxcelFlags(e key.Engine, s Spec, r width.Resolution, kind key.Drafter, head ...string) (Launch, error) {
	if s.Model == "" {
		return Launch{}, fmt.Errorf("no target model is set: set --model (or model in the profile)")
	}
	host, port, base, err := hostPort(s)
	if err != nil {
		return Launch{}, err
	}
	if err := CheckPassthrough(e, s.Args); err != nil {
		return Launch{}, fmt.Errorf("%s: %w", s.ArgsFrom, err)
	}
	on, err := speculating(s, r, false)
	if err != nil {
		return Launch{}, err
	}
	argv := append(slices.Clone(head), "-m", s.Model)
	if on {
		if err := key.CheckSelectable(e, kind); err != nil {
			return Launch{}, fmt.Errorf("%w: set --draft-kind (or draft.kind in the profile) to one of the accepted values", err)
		}
		argv = append(argv,
			"--model-draft", s.Draft,
			"--draft-kind", string(kind),
			"--draft-block-size", strconv.Itoa(r.Width))
	}
	l := Launch{BaseURL: base}
	argv = l.listen(argv, host, port)
	l.Argv = append(argv, s.Args...)
	return l, nil
}

var (
	ansiRE        = regexp.MustCompile("\x1b\\[[0-9;]*[A-Za-z]")
	speculativeRE = regexp.MustCompile(`speculative=(\w+)(?: \((.*)\))?`)
	fieldKeyRE    = regexp.MustCompile(`(?:^|, )(\w+)=`)
	declineRE     = regexp.MustCompile(`(?i)falling back to classic decode`)
	dispatchErrRE = regexp.MustCompile(`Speculative decoding dispatch resolution failed: .*`)
)

// parseFields splits "a=1, b=x, y, c=3" into keys and values; a value runs
// to the next ", key=" so reasons with commas stay whole.
func parseFields(s string) map[string]string {
	out := map[string]string{}
	locs := fieldKeyRE.FindAllStringSubmatchIndex(s, -1)
	for i, m := range locs {
		k := s[m[2]:m[3]]
		end := len(s)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		out[k] = s[m[1]:end]
	}
	return out
}

// observeMLXCEL reads mlxcel's (and sim's) scheduler line
// `speculative=dflash (drafter=…, block_size=N, block_size_from=…, explicit_kind=B)`,
// `speculative=off`, and any "falling back to classic decode" (any case).
func observeMLXCEL(line string) (Observation, bool) {
	clean := ansiRE.ReplaceAllString(line, "")
	if declineRE.MatchString(clean) {
		return Observation{Declined: true, Line: line}, true
	}
	if m := dispatchErrRE.FindString(clean); m != "" {
		return Observation{Error: m, Line: line}, true
	}
	m := speculativeRE.FindStringSubmatch(clean)
	if m == nil {
		return Observation{}, false
	}
	kind := m[1]
	if kind == "off" {
		return Observation{Kind: "off", Line: line}, true
	}
	inner := m[2]
	// The scheduler line closes its own parenthesis after ours: drop
	// closing parens that have no opening partner inside.
	for strings.Count(inner, ")") > strings.Count(inner, "(") && strings.HasSuffix(inner, ")") {
		inner = strings.TrimSuffix(inner, ")")
	}
	f := parseFields(inner)
	o := Observation{Speculative: true, Kind: kind, From: f["block_size_from"], Line: line}
	if v, ok := f["block_size"]; ok {
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
			o.Width = n
		}
	} else if v, ok := f["num_draft_tokens"]; ok {
		// classic dispatch counts draft tokens; the launcher's unit adds the verify row
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
			o.Width = n + 1
		}
	}
	return o, true
}

// Diagnostics is mlxcel's per-request `DFlash diagnostics` line: the cost
// side of a width (all *_ms are per-request totals).
type Diagnostics struct {
	BlockSize          int
	Rounds             int
	ProposedTokens     int
	AcceptedTokens     int
	AcceptanceRate     float64
	EmittedPerVerify   float64
	TargetArgmaxSyncMS float64 // divide by Rounds for the per-round cost
	DecodeMS           float64
	// Fields holds every numeric key=value on the line, these included.
	Fields map[string]float64
}

var diagRE = regexp.MustCompile(`DFlash diagnostics((?:\s+\w+=\S+)+)`)
var kvRE = regexp.MustCompile(`(\w+)=(\S+)`)

// ParseDiagnostics parses `DFlash diagnostics block_size=N rounds=R ...`.
// ok=false when the line is not one, or lacks block_size or rounds.
func ParseDiagnostics(line string) (Diagnostics, bool) {
	m := diagRE.FindStringSubmatch(ansiRE.ReplaceAllString(line, ""))
	if m == nil {
		return Diagnostics{}, false
	}
	d := Diagnostics{Fields: map[string]float64{}}
	for _, kv := range kvRE.FindAllStringSubmatch(m[1], -1) {
		v, err := strconv.ParseFloat(strings.TrimRight(kv[2], ","), 64)
		if err != nil {
			continue
		}
		d.Fields[kv[1]] = v
	}
	bs, ok1 := d.Fields["block_size"]
	rounds, ok2 := d.Fields["rounds"]
	if !ok1 || !ok2 {
		return Diagnostics{}, false
	}
	d.BlockSize, d.Rounds = int(bs), int(rounds)
	d.ProposedTokens = int(d.Fields["proposed_tokens"])
	d.AcceptedTokens = int(d.Fields["accepted_tokens"])
	d.AcceptanceRate = d.Fields["acceptance_rate"]
	d.EmittedPerVerify = d.Fields["emitted_per_verify"]
	d.TargetArgmaxSyncMS = d.Fields["target_argmax_sync_ms"]
	d.DecodeMS = d.Fields["decode_ms"]
	return d, true
}
