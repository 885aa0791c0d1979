// Package adapt learns the draft width that is best for this model pair,
// on this host, under this traffic, and asks serve to switch to it.
//
// The core is pure and table-tested: counters parsed from llama-server's
// /metrics (Snapshot, Delta), acceptance by draft position with Wilson
// bounds (Counts, Acceptance), the cost of a cycle from a verify-cost curve
// and the engine's own time per cycle (Curve, CycleCost), and the decision
// rule (Decide, Decision). The edges are the verify-cost probe (Probe), its
// cache (LoadCurve, SaveCurve) and the loop serve runs (Run, LoopDeps).
// docs/adaptive.md explains the model, the rule and its margin.
package adapt
