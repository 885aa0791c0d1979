package policy

import (
	"fmt"
	"strings"

	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/schedule"
)

// Merge layers policy files, lowest first: the embedded policy.toml, then
// each --policy FILE, then MLXCEL_POLICY's files, then a profile's own
// entries. A later layer replaces a default with the same (engine, drafter)
// and an entry with the same key or the same id, so an operator can retune
// or retire a shipped entry without editing the binary. Nil layers are
// skipped. Order is kept: a replacement takes the place of the first entry
// it replaced. Merge is linear in the number of entries (maps from key and
// id to position), so a 20,000-entry file merges in milliseconds
// (BenchmarkMerge20k).
func Merge(layers ...*File) *Policy {
	n := 0
	for _, f := range layers {
		if f != nil {
			n += len(f.Entries)
		}
	}
	p := &Policy{}
	m := merger{p: p, byKey: make(map[entryKey]int, n), byID: make(map[string]int, n)}
	if n > 0 {
		p.Entries, m.dead = make([]Entry, 0, n), make([]bool, 0, n)
	}
	defaults := map[[2]string]int{}
	for _, f := range layers {
		if f == nil {
			continue
		}
		p.Layers = append(p.Layers, f.Name)
		for _, d := range f.Defaults {
			k := [2]string{string(d.Engine), string(d.Drafter)}
			if i, ok := defaults[k]; ok {
				p.Defaults[i] = d
			} else {
				defaults[k] = len(p.Defaults)
				p.Defaults = append(p.Defaults, d)
			}
		}
		for _, e := range f.Entries {
			m.add(e)
		}
	}
	m.compact()
	return p
}

// merger holds the entries being merged. Keys and ids are unique among the
// live entries, so a new entry replaces at most two: one with its key and
// one with its id. A replaced entry that is not the first is marked dead
// and dropped by compact, rather than shifting the slice on every add.
type merger struct {
	p     *Policy
	dead  []bool
	byKey map[entryKey]int
	byID  map[string]int
}

// entryKey is what a later layer replaces an entry by: its key and, for a
// tuned entry, its pair (a tuned entry never replaces the measured entry
// of its key: that one still answers every other pair).
type entryKey struct {
	key.Key
	Pair
}

func keyOf(e Entry) entryKey { return entryKey{e.Key, e.Pair} }

func (m *merger) add(e Entry) {
	ki, kok := m.byKey[keyOf(e)]
	ii, iok := m.byID[e.ID]
	switch {
	case !kok && !iok:
		m.byKey[keyOf(e)], m.byID[e.ID] = len(m.p.Entries), len(m.p.Entries)
		m.p.Entries = append(m.p.Entries, e)
		m.dead = append(m.dead, false)
		return
	case kok && iok && ki != ii:
		// Two entries go, in their order; e takes the first one's place.
		first, second := min(ki, ii), max(ki, ii)
		m.p.Replaced = append(m.p.Replaced, m.p.Entries[first], m.p.Entries[second])
		m.forget(second)
		m.dead[second] = true
		m.put(first, e)
	case kok:
		m.p.Replaced = append(m.p.Replaced, m.p.Entries[ki])
		m.put(ki, e)
	default:
		m.p.Replaced = append(m.p.Replaced, m.p.Entries[ii])
		m.put(ii, e)
	}
}

// put replaces the live entry at i with e.
func (m *merger) put(i int, e Entry) {
	m.forget(i)
	m.p.Entries[i] = e
	m.byKey[keyOf(e)], m.byID[e.ID] = i, i
}

// forget drops the index entries of the entry at i.
func (m *merger) forget(i int) {
	o := m.p.Entries[i]
	if m.byKey[keyOf(o)] == i {
		delete(m.byKey, keyOf(o))
	}
	if m.byID[o.ID] == i {
		delete(m.byID, o.ID)
	}
}

// compact drops the dead entries, keeping order.
func (m *merger) compact() {
	kept := m.p.Entries[:0]
	for i, e := range m.p.Entries {
		if !m.dead[i] {
			kept = append(kept, e)
		}
	}
	m.p.Entries = kept
}

// Lookup returns the measured entry for exactly k, or nil. A host with no
// CUDA device, or a target whose quantization could not be read, never
// matches: a measurement says nothing about either.
func (p *Policy) Lookup(k key.Key) *Entry {
	if p == nil || !k.Capability.Known() || k.Quant == key.QuantUnknown || k.Quant == "" {
		return nil
	}
	for _, e := range p.Entries {
		if e.Key == k && e.Pair.IsZero() {
			return &e
		}
	}
	return nil
}

// LookupPair returns the tuned entry for exactly k and this pair (its
// content hashes and engine pin), or nil; a zero pair matches none.
func (p *Policy) LookupPair(k key.Key, pair Pair) *Entry {
	if p == nil || pair.IsZero() || pair.Target == "" || pair.Draft == "" {
		return nil
	}
	for _, e := range p.Entries {
		if e.Key == k && e.Pair == pair {
			return &e
		}
	}
	return nil
}

// HasPairs reports whether any entry for k is keyed to a pair: only then
// is the launch's pair worth hashing (a model that cannot be read is worth
// a warning only then: a tuned entry for another GPU or engine would not
// apply anyway).
func (p *Policy) HasPairs(k key.Key) bool {
	if p == nil {
		return false
	}
	for _, e := range p.Entries {
		if !e.Pair.IsZero() && e.Key == k {
			return true
		}
	}
	return false
}

// DefaultWidth returns the per-(engine, drafter) default, which mirrors the
// engine's own; ok is false when the policy has none for the pair.
func (p *Policy) DefaultWidth(e key.Engine, d key.Drafter) (int, *Default, bool) {
	if p == nil {
		return 0, nil, false
	}
	for _, def := range p.Defaults {
		if def.Engine == e && def.Drafter == d {
			return def.Width, &def, true
		}
	}
	return 0, nil, false
}

// Explain says, in lines for `speclaunch policy explain`, how k resolves
// under the policy alone (operator overrides and drafter checkpoints are the
// resolver's business): which entry matched and from which layer, or why
// none did, naming the entries that miss by a single field, then the
// default that applies.
func (p *Policy) Explain(k key.Key) []string {
	if p == nil {
		p = &Policy{}
	}
	out := []string{"key: " + k.String()}
	if len(p.Layers) > 0 {
		out = append(out, "layers, lowest first: "+strings.Join(p.Layers, ", "))
	}
	switch {
	case !k.Capability.Known():
		out = append(out, "no measured entry applies: no CUDA device was found, and every entry is measured on one")
	case k.Quant == key.QuantUnknown || k.Quant == "":
		out = append(out, "no measured entry applies: the target's quantization is unknown (its config could not be read), and no entry measures an unreadable target")
	}
	if e := p.Lookup(k); e != nil {
		out = append(out, fmt.Sprintf("entry %s matches (%s): %s, pin %s, record %s", e.ID, e.Origin, e.Sched().Describe(), e.Pin, e.Record))
		out = append(out, bucketLines(e.Schedule)...)
		if e.RunnerUp != 0 {
			out = append(out, fmt.Sprintf("  runner-up width %d", e.RunnerUp))
		}
		for _, r := range p.Replaced {
			if r.Key == e.Key || r.ID == e.ID {
				out = append(out, fmt.Sprintf("  it replaced entry %s (%s), %s", r.ID, r.Origin, r.Sched().Describe()))
			}
		}
		return out
	}
	if k.Capability.Known() && k.Quant != key.QuantUnknown && k.Quant != "" {
		out = append(out, "no measured entry for this key")
	}
	near, measured := 0, 0
	for _, e := range p.Entries {
		if !e.Pair.IsZero() {
			continue // a tuned entry answers for its pair only (ExplainPair), never as a measured one
		}
		measured++
		if field, want, got, ok := oneFieldApart(e.Key, k); ok {
			out = append(out, fmt.Sprintf("  entry %s differs in %s: %s vs %s", e.ID, field, want, got))
			near++
		}
	}
	for _, r := range p.Replaced {
		if r.Key == k {
			out = append(out, fmt.Sprintf("  entry %s (%s) had this key but a later layer replaced it", r.ID, r.Origin))
		}
	}
	if near == 0 {
		n := fmt.Sprintf("%d measured entries", measured)
		if measured == 1 {
			n = "1 measured entry"
		}
		out = append(out, fmt.Sprintf("  no measured entry is within one field of this key (%s in all)", n))
	}
	if w, d, ok := p.DefaultWidth(k.Engine, k.Drafter); ok {
		line := fmt.Sprintf("default for engine %s drafter %s: width %d (%s)", k.Engine, k.Drafter, w, d.Origin)
		if d.Note != "" {
			line += ": " + d.Note
		}
		out = append(out, line)
	} else {
		out = append(out, fmt.Sprintf("no default for engine %s drafter %s in the policy", k.Engine, k.Drafter))
	}
	return out
}

// oneFieldApart reports the single key field in which e and k differ, with
// the entry's value first; ok is false when they differ in none or several.
func oneFieldApart(e, k key.Key) (field, want, got string, ok bool) {
	n := 0
	if e.Engine != k.Engine {
		n, field, want, got = n+1, "engine", string(e.Engine), string(k.Engine)
	}
	if e.Drafter != k.Drafter {
		n, field, want, got = n+1, "drafter", string(e.Drafter), string(k.Drafter)
	}
	if e.Capability != k.Capability {
		n, field, want, got = n+1, "capability", e.Capability.String(), k.Capability.String()
	}
	if e.Quant != k.Quant {
		n, field, want, got = n+1, "quant", string(e.Quant), quantName(k.Quant)
	}
	return field, want, got, n == 1
}

func quantName(q key.Quant) string {
	if q == "" {
		return string(key.QuantUnknown)
	}
	return string(q)
}

// bucketLines are an entry's buckets for explain, one a line, the load
// in words with its own number ("at 1 request in flight: width 6").
func bucketLines(s schedule.Schedule) []string {
	out := make([]string, 0, len(s))
	for _, b := range s {
		w := fmt.Sprintf("width %d", b.Width)
		if b.Width <= schedule.Off {
			w = "width 1 (speculation off)"
		}
		out = append(out, fmt.Sprintf("  at %s: %s", schedule.InFlight(b.Range()), w))
	}
	return out
}

// ExplainPair is Explain with the tuned layer first: the tuned entry that
// answers this pair (its file, the date it was tuned and its record), or
// the tuned entries of this key that were made for other pairs or engine
// builds, then Explain's lines for the key.
func (p *Policy) ExplainPair(k key.Key, pair Pair) []string {
	var out []string
	if e := p.LookupPair(k, pair); e != nil {
		out = append(out, fmt.Sprintf("tuned entry %s matches this pair (%s): %s, tuned %s on this pair, record %s", e.ID, e.Origin, e.Sched().Describe(), orUnknown(e.Tuned), e.RecordPath()))
		out = append(out, bucketLines(e.Sched())...)
		out = append(out, "  it answers before any measured entry of the key: "+tunedOn(*e))
	} else if p != nil {
		for _, e := range p.Entries {
			if e.Key == k && !e.Pair.IsZero() {
				out = append(out, fmt.Sprintf("tuned entry %s (%s) is for another pair or engine build (%s), not this one (%s): re-run speclaunch tune to tune this one", e.ID, e.Origin, e.Pair.Short(), pairOrUnknown(pair)))
			}
		}
	}
	return append(out, p.Explain(k)...)
}

// tunedOn says what a tuned entry rests on: a measurement of these very
// models, or for one tuned on the sim (Simulated) the sim's run of them,
// as resolve's headline says it ("simulated, never a measurement"), not
// a measurement.
func tunedOn(e Entry) string {
	if e.Simulated() {
		return "tune ran these very models on the sim engine (simulated, never a measurement)"
	}
	return "it was measured on these very models"
}

func orUnknown(s string) string {
	if s == "" {
		return "(date unknown)"
	}
	return s
}

func pairOrUnknown(p Pair) string {
	if p.IsZero() {
		return "its models could not be hashed"
	}
	return p.Short()
}
