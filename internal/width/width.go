// Package width resolves the speculative draft width: the verify block of
// draft tokens per round plus the one row the target always computes. The
// resolver is a pure function of its inputs so that every arm of the
// precedence is a table test with no GPU and no engine.
package width

import (
	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/policy"
	"github.com/speclaunch/speclaunch/internal/schedule"
)

// SourceKind says which rule produced a width, highest precedence first.
type SourceKind string

const (
	Override          SourceKind = "override"           // flag, env or profile draft.block_size
	DrafterCheckpoint SourceKind = "drafter-checkpoint" // the drafter's config declares it
	Measured          SourceKind = "measured"           // a policy entry for this key
	Simulated         SourceKind = "simulated"          // a tuned entry of the sim (policy.Entry.Simulated): never a measurement
	KindDefault       SourceKind = "kind-default"       // the per-(engine, kind) default
	Off               SourceKind = "off"                // no drafter: speculation is off
	// Adaptive is a width serve's adaptive loop chose from live traffic
	// (docs/adaptive.md); it never overrides an operator width.
	Adaptive SourceKind = "adaptive"
)

// Resolution is the resolver's answer: a schedule over load, and the
// width of its bucket at Load.
type Resolution struct {
	Width  int // at Load; 0 when speculation is off there
	Source SourceKind
	// Reason is in mlxcel's vocabulary: "operator override", "measured
	// default for sm_121 with an affine-quantized target", "per-kind default,
	// no measurement for sm_90 with an affine-quantized target", or a
	// checkpoint peek's reason.
	Reason string
	// Entry is the policy entry that applied (Source Measured or
	// Simulated), nil otherwise.
	Entry *policy.Entry
	Key   key.Key // the key the policy was consulted with
	// Warnings: e.g. the running engine's version differs from the entry's pin.
	Warnings []string

	// Schedule is the answer at every load, each bucket with its source
	// ("override", "drafter-checkpoint", "measured", "tuned", "kind-default",
	// "adaptive", ...); nil when there is no draft model. A single width
	// is one bucket.
	Schedule schedule.Schedule
	// Load is the concurrency Width was chosen for (1 at a launch).
	Load int
	// OnSource and OnReason are the schedule's source and reason while
	// Source is Off because the bucket at Load is width 1.
	OnSource SourceKind
	OnReason string
}

// AdaptedTo is the resolution of the adaptive loop's switch to width w
// (1: classic), keyed as k: one bucket at every load, sourced adaptive, so
// that a switch to classic still says who chose it (OnSource).
func AdaptedTo(w int, reason string, k key.Key) Resolution {
	r := Resolution{Width: w, Source: Adaptive, Reason: reason, Key: k,
		Schedule: schedule.Flat(w, string(Adaptive))}.AtLoad(1)
	r.Reason = reason
	return r
}

// FromEntry says a policy entry answers at this load: a measured one, or
// one tuned on the sim (Simulated).
func (r Resolution) FromEntry() bool {
	return r.Entry != nil && (r.Source == Measured || r.Source == Simulated)
}

// IsAdaptive says the adaptive loop chose this resolution's width, classic
// included.
func (r Resolution) IsAdaptive() bool {
	return r.Source == Adaptive || r.Source == Off && r.OnSource == Adaptive
}

// IsOperator says an operator width or schedule chose this resolution's
// width, a schedule's bucket that is off included: the adaptive loop ran
// under an operator schedule whose first bucket was off.
func (r Resolution) IsOperator() bool {
	return r.Source == Override || r.Source == Off && r.OnSource == Override
}

// Describe renders "4 (reason)" as mlxcel's ResolvedBlockSize does.
func (r Resolution) Describe() string {
	if r.Source == Off {
		return "off (" + r.Reason + ")"
	}
	return itoa(r.Width) + " (" + r.Reason + ")"
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	neg := n < 0
	if neg {
		n = -n
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}
