// Package adapt learns the draft width that is best for this model pair,
// on this host, under this traffic, and asks serve to switch to it.
//
// The core is pure and table-tested: counters parsed from llama-server's
// /metrics (Snapshot, Delta), acceptance by draft position with Wilson
// bounds (Counts, Acceptance), the cost of a cycle from a verify-cost curve
// and a drafting cost fitted to the widths measured (Curve, FitDraft,
// CycleCost), the decision rule (Decide, Decision), the check of a switch
// against the width it left, and the stepper that turns one scrape into an
// action (Loop.Step, Observation, Action). The edges are the verify-cost
// probe (Probe, Loop.BeforeTraffic), its cache (LoadCurve, SaveCurve) and
// the shell that scrapes, probes and switches (New, Loop.Run, LoopDeps).
// docs/design/adaptive.md explains the model, the rule and its margin.
package adapt
