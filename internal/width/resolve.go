package width

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/policy"
	"github.com/speclaunch/speclaunch/internal/schedule"
)

// Input is everything the resolver needs. All I/O (probing the GPU, reading
// checkpoints, asking the engine its version) happens before, in the caller.
type Input struct {
	Engine     key.Engine
	HasDrafter bool // a drafter is configured (plan.HasDrafter), or a hypothetical kind asked about
	Drafter    key.Drafter

	Override    int    // operator width (already validated and converted), 0 = none
	OverrideSrc string // where it came from, for the reason
	// OverrideSchedule is the operator's schedule (already validated), nil
	// = none; config keeps at most one of it and Override.
	OverrideSchedule schedule.Schedule

	// Load is the concurrency the width is chosen for (0 = 1: a launch
	// plans for its first request); the schedule answers every load.
	Load int

	Declared       int    // width the drafter checkpoint declares, 0 = none
	DeclaredReason string // upstream's peek reason

	Capability key.Capability // key.None when no device (or disagreeing devices)
	Quant      key.Quant
	// RepoTarget: the target is a Hugging Face repo id that the engine
	// downloads itself, so an unknown Quant was never read, not unreadable.
	RepoTarget bool

	Policy        *policy.Policy
	EngineVersion string // the running engine's version string, "" when unknown
	// Pair is the launch's model pair by content and engine pin, for the
	// entries `speclaunch tune` keys to a pair (zero when not hashed).
	Pair policy.Pair
}

// TunedBucket is the source of the buckets of a schedule `speclaunch tune`
// measured on the launch's own pair.
const TunedBucket = "tuned"

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
// from"): operator override (a width or a schedule) > drafter checkpoint
// declaration > measured policy entry (a width or a schedule) >
// per-(engine, kind) default. The answer is a
// schedule, each bucket with its source; Width is its bucket at in.Load.
// A single width is the one-bucket schedule. It never returns a width
// below 2 for a load where the schedule speculates.
func Resolve(in Input) Resolution {
	r := resolveSchedule(in)
	if r.Source == Off {
		return r
	}
	return r.AtLoad(in.Load)
}

// AtLoad is the resolution at n concurrent requests: Width is the bucket
// that covers n (0 with Source Off where that bucket is width 1, the
// schedule and its sources kept). A resolution without a schedule is
// returned as is.
func (r Resolution) AtLoad(n int) Resolution {
	if len(r.Schedule) == 0 {
		return r
	}
	r.Load = max(n, 1)
	b := r.Schedule.At(r.Load)
	if r.Source == Off {
		r.Source, r.Reason = r.OnSource, r.OnReason
	}
	r.Width = b.Width
	if b.Width < key.MinWidth {
		r.OnSource, r.OnReason = r.Source, r.Reason
		r.Width, r.Source = 0, Off
		r.Reason = "the schedule is off at " + schedule.InFlight(b.Range()) + " (" + r.OnReason + ")"
	}
	return r
}

// KeyFor is the policy key a launch's facts look up.
func KeyFor(eng key.Engine, d key.Drafter, c key.Capability, q key.Quant) key.Key {
	k := key.Key{Engine: PolicyEngine(eng), Drafter: d, Capability: c, Quant: q}
	if q == "" {
		k.Quant = key.QuantUnknown
	}
	return k
}

func resolveSchedule(in Input) Resolution {
	k := KeyFor(in.Engine, in.Drafter, in.Capability, in.Quant)
	r := Resolution{Key: k}
	switch {
	case !in.HasDrafter:
		r.Source, r.Reason = Off, "no draft model: speculation is off"
		return r
	case len(in.OverrideSchedule) > 0 && in.OverrideSchedule.Max() >= key.MinWidth:
		r.Schedule, r.Source, r.Reason = in.OverrideSchedule.WithSource(string(Override)), Override, "operator schedule"
		return r
	case in.Override >= key.MinWidth:
		r.Schedule, r.Source, r.Reason = schedule.Flat(in.Override, string(Override)), Override, "operator override"
		return r
	case in.Declared >= key.MinWidth:
		r.Schedule, r.Source, r.Reason = schedule.Flat(in.Declared, string(DrafterCheckpoint)), DrafterCheckpoint, in.DeclaredReason
		return r
	}
	if in.Policy != nil {
		e, tuned := in.Policy.LookupPair(k, in.Pair), true
		if e == nil {
			e, tuned = in.Policy.Lookup(k), false
		}
		if e != nil && tuned && e.Sched().Max() >= key.MinWidth {
			entry := *e
			r.Schedule, r.Source, r.Entry = e.Sched().WithSource(TunedBucket), Measured, &entry
			r.Reason = "tuned on this pair " + e.Tuned
			if e.Simulated() {
				r.Source, r.Reason = Simulated, r.Reason+" on the sim: simulated, never a measurement"
			}
			return r
		}
		if e != nil && e.Sched().Max() >= key.MinWidth {
			entry := *e
			r.Schedule, r.Source, r.Entry = e.Sched(), Measured, &entry
			r.Reason = fmt.Sprintf("measured default for %s with %s", k.Capability.SM(), quantPhrase(in, k.Quant))
			if w := PinWarning(e.Pin, in.EngineVersion); w != "" {
				r.Warnings = append(r.Warnings, w)
			}
			return r
		}
	}
	r.Source = KindDefault
	r.Reason = fmt.Sprintf("per-kind default, no measurement for %s with %s", k.Capability.SM(), quantPhrase(in, k.Quant))
	w := fallback(in.Engine, in.Drafter)
	if in.Policy != nil {
		if pw, _, ok := in.Policy.DefaultWidth(in.Engine, in.Drafter); ok && pw >= key.MinWidth {
			w = pw
		}
	}
	r.Schedule = schedule.Flat(w, string(KindDefault))
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

// quantPhrase is mlxcel's wording, except for an unknown quantization
// that no config.json explains: a GGUF target's is in its header (for
// llama.cpp an unreadable target names it), and a repo-id target's is
// never read here, which the operator gives with --quant.
func quantPhrase(in Input, q key.Quant) string {
	switch {
	case q != key.QuantUnknown && q != "":
		return q.Phrase()
	case in.RepoTarget:
		return "a Hugging Face repo-id target, whose quant is not known here: give it with --quant or model.quant"
	case in.Engine == key.LlamaCpp:
		return "a target whose GGUF header could not be read"
	}
	return q.Phrase()
}
