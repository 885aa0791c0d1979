package width

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/policy"
)

// Input is everything the resolver needs. All I/O (probing the GPU, reading
// checkpoints, asking the engine its version) happens before, in the caller.
type Input struct {
	Engine     key.Engine
	HasDrafter bool // a draft model is configured (or a hypothetical kind asked about)
	Drafter    key.Drafter

	Override    int    // operator width (already validated and converted), 0 = none
	OverrideSrc string // where it came from, for the reason

	Declared       int    // width the drafter checkpoint declares, 0 = none
	DeclaredReason string // upstream's peek reason

	Capability key.Capability // key.None when no device (or disagreeing devices)
	Quant      key.Quant

	Policy        *policy.Policy
	EngineVersion string // the running engine's version string, "" when unknown
}

// PolicyEngine is the engine whose measured entries apply: the sim engine
// stands in for mlxcel (same command line, a GB10 cost model), so mlxcel's
// entries apply to it. A sim record still never backs an entry.
func PolicyEngine(e key.Engine) key.Engine {
	if e == key.Sim {
		return key.MLXCEL
	}
	return e
}

// Resolve applies the precedence of docs/policy.md ("Where a width comes
// from"): operator override > drafter checkpoint declaration > measured
// policy entry > per-(engine, kind) default. It never returns a width
// below 2 for a speculative launch.
func Resolve(in Input) Resolution {
	k := key.Key{Engine: PolicyEngine(in.Engine), Drafter: in.Drafter, Capability: in.Capability, Quant: in.Quant}
	if in.Quant == "" {
		k.Quant = key.QuantUnknown
	}
	r := Resolution{Key: k}
	switch {
	case !in.HasDrafter:
		r.Source, r.Reason = Off, "no draft model: speculation is off"
		return r
	case in.Override >= key.MinWidth:
		r.Width, r.Source, r.Reason = in.Override, Override, "operator override"
		return r
	case in.Declared >= key.MinWidth:
		r.Width, r.Source, r.Reason = in.Declared, DrafterCheckpoint, in.DeclaredReason
		return r
	}
	if in.Policy != nil {
		if e := in.Policy.Lookup(k); e != nil && e.Width >= key.MinWidth {
			entry := *e
			r.Width, r.Source, r.Entry = e.Width, Measured, &entry
			r.Reason = fmt.Sprintf("measured default for %s with %s", k.Capability.SM(), quantPhrase(in.Engine, k.Quant))
			if w := PinWarning(e.Pin, in.EngineVersion); w != "" {
				r.Warnings = append(r.Warnings, w)
			}
			return r
		}
	}
	r.Source = KindDefault
	r.Reason = fmt.Sprintf("per-kind default, no measurement for %s with %s", k.Capability.SM(), quantPhrase(in.Engine, k.Quant))
	r.Width = fallback(in.Engine, in.Drafter)
	if in.Policy != nil {
		if w, _, ok := in.Policy.DefaultWidth(in.Engine, in.Drafter); ok && w >= key.MinWidth {
			r.Width = w
		}
	}
	return r
}

// fallback mirrors the engines' own flat defaults for when the policy has no
// default row (a user policy can only add rows; the embedded one has them).
func fallback(e key.Engine, d key.Drafter) int {
	if e == key.LlamaCpp {
		return 4 // --spec-draft-n-max 3
	}
	if d == key.MTP {
		return 4
	}
	return 16
}

// PinWarning says when the running engine's version does not contain the
// commit an entry was pinned to. The entry still applies: a pin is evidence
// of where it was measured, not a gate. A version that names no commit (a
// llama.cpp built from a source archive prints "0 (unknown)") can neither
// match nor contradict the pin, and the warning says so.
func PinWarning(pin, version string) string {
	if pin == "" || version == "" {
		return ""
	}
	f := strings.Fields(pin)
	commit := f[len(f)-1]
	if strings.Contains(version, commit) {
		return ""
	}
	if !versionCommitRE.MatchString(version) {
		return fmt.Sprintf("policy entry was measured against %q; the engine's version %q names no commit (built without git, e.g. from a source archive), so the pin cannot be confirmed; the width still applies", pin, version)
	}
	return fmt.Sprintf("policy entry was measured against %q but the engine reports %q; the width still applies, re-measure with `speclaunch bench` to confirm it", pin, version)
}

// versionCommitRE finds a commit in an engine version string, as
// llama-server prints it: "9749 (d32676d)".
var versionCommitRE = regexp.MustCompile(`\([0-9a-fA-F]{4,40}\)`)

// quantPhrase is mlxcel's wording, except that a GGUF target has no
// config.json: for llama.cpp an unreadable target names its header.
func quantPhrase(e key.Engine, q key.Quant) string {
	if e == key.LlamaCpp && (q == key.QuantUnknown || q == "") {
		return "a target whose GGUF header could not be read"
	}
	return q.Phrase()
}
