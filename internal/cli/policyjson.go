package cli

import (
	"github.com/speclaunch/speclaunch/internal/policy"
)

// policyJSON is `policy list --json`: the merged policy in the snake_case
// keys of every other --json output (Go's field names before, the key as
// nested structs).
func policyJSON(p *policy.Policy) map[string]any {
	defaults := make([]map[string]any, 0, len(p.Defaults))
	for _, d := range p.Defaults {
		defaults = append(defaults, map[string]any{"engine": d.Engine, "drafter": d.Drafter, "width": d.Width, "note": d.Note, "origin": d.Origin})
	}
	entries := func(es []policy.Entry) []map[string]any {
		out := make([]map[string]any, 0, len(es))
		for _, e := range es {
			out = append(out, entryJSON(e))
		}
		return out
	}
	return map[string]any{"layers": p.Layers, "defaults": defaults, "entries": entries(p.Entries), "replaced": entries(p.Replaced)}
}

// entryJSON is one entry as policy list --json gives it: the keys a policy
// file writes it with.
func entryJSON(e policy.Entry) map[string]any {
	m := map[string]any{"id": e.ID, "key": keyMap(e.Key), "width": e.Width, "pin": e.Pin, "record": e.Record, "records": e.Records, "note": e.Note, "origin": e.Origin}
	if e.RunnerUp > 0 {
		m["runner_up"] = e.RunnerUp
	}
	if len(e.Schedule) > 0 {
		m["schedule"] = e.Schedule.Triples()
	}
	if !e.Pair.IsZero() {
		m["target_sha256"], m["draft_sha256"], m["tuned"] = e.Pair.Target, e.Pair.Draft, e.Tuned
	}
	if len(e.Cost) > 0 {
		cost := make([]map[string]any, 0, len(e.Cost))
		for _, c := range e.Cost {
			cost = append(cost, map[string]any{"record": c.Record, "classic_ms": c.ClassicMS, "widths": c.Widths, "ms": c.MS})
		}
		m["cost"] = cost
	}
	return m
}
