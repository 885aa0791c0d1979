// Package policy holds the width policy: per-(engine, drafter) defaults that
// mirror each engine, and measured entries keyed on (engine, drafter,
// compute capability, target quantization), each pinned to the engine
// version it was measured against and backed by a committed record. The
// embedded policy.toml is the base; user files layer over it and replace
// entries by key.
package policy

import (
	"fmt"

	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/schedule"
)

// Default is the per-(engine, drafter) fallback width.
type Default struct {
	Engine  key.Engine
	Drafter key.Drafter
	Width   int
	Note    string
	Origin  string // "file:line" it was read from
}

// Entry is a measured width (or schedule) for one key.
type Entry struct {
	ID  string
	Key key.Key
	// Width is the entry's width; for a schedule entry, the width at one
	// request when that bucket speculates, else the schedule's widest
	// (what `policy check` judges against a one-level record).
	Width int
	// Schedule is the entry's `schedule = [[lo, hi, width], ...]`, nil for
	// an entry that gives one width (Sched renders that as one bucket).
	Schedule schedule.Schedule
	Pin      string // engine version it was measured against, e.g. "mlx 81ba1c6a" or "llama.cpp d32676d"
	Record   string // repo-relative path of the (first) record's .md; its .json twin sits beside it
	// Records is every record the entry rests on (a cross-pair choice
	// rests on one per model pair); Records[0] == Record. An entry written
	// with `record` alone has just that one.
	Records  []string
	RunnerUp int // the record's second-best width, 0 if none stated
	// Cost is the cost side of the records, when the entry carries it:
	// ms per draft+verify cycle by width, and classic's; policy check
	// verifies it against the records.
	Cost   []CostRow
	Note   string
	Origin string // "file:line" it was read from
	// Pair, when set, keys the entry to one model pair on one engine
	// build: `speclaunch tune` writes such entries into the operator's
	// tuned layer, and they apply only to that pair (LookupPair). Tuned is
	// the date tune measured it ("" for a measured entry).
	Pair  Pair
	Tuned string
}

// Pair names a model pair by content on one engine build: the target's and
// the drafter's content hashes (modelhash.Sum, or a sim stand-in's) and
// the engine's pin as a record states it ("llama.cpp d32676d", "sim").
// Its JSON (resolve --json's facts.pair) is in the snake_case of every
// other --json key.
type Pair struct {
	Target string `json:"target"`
	Draft  string `json:"draft"`
	Pin    string `json:"pin"`
}

// SimPin is the sim engine's pin, as its records and the entries tuned on
// it state it.
const SimPin = "sim"

// Simulated reports a tuned entry of the sim engine: `speclaunch tune` on
// the sim wrote it from a simulated record (docs/schedule.md). It answers
// only its pair of stand-ins on the sim, is never a measurement, and is
// the one kind of entry a simulated record backs.
func (e Entry) Simulated() bool { return !e.Pair.IsZero() && e.Pin == SimPin }

// IsZero reports an entry keyed on no pair.
func (p Pair) IsZero() bool { return p == Pair{} }

// Short names the pair in a line: the hashes' first 12 digits and the pin.
func (p Pair) Short() string {
	return fmt.Sprintf("target %s, drafter %s, %s", short12(p.Target), short12(p.Draft), p.Pin)
}

func short12(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// File is one parsed policy file.
type File struct {
	Name     string
	Schema   int
	Defaults []Default
	Entries  []Entry
}

// Policy is the merged view: later layers replace earlier entries by key.
type Policy struct {
	Layers   []string // file names, lowest first
	Defaults []Default
	Entries  []Entry
	// Replaced holds the entries a later layer replaced (by key or by id),
	// so that Explain can say why an entry an operator expected is gone.
	Replaced []Entry
}

// CostRow is one record's cost table as an entry carries it.
type CostRow struct {
	Record    string
	ClassicMS float64 // 0 when not stated
	Widths    []int
	MS        []float64 // ms per cycle at Widths[i]
}

// Sched is the entry's answer over load: its schedule, or its width at
// every load, each bucket sourced "measured".
func (e Entry) Sched() schedule.Schedule {
	if len(e.Schedule) > 0 {
		return e.Schedule
	}
	return schedule.Flat(e.Width, "measured")
}
