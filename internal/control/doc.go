// Package control is the adaptive width's controller: a pure
// Step(State, Observation) (State, []Action) that learns, per load bucket,
// the width this model pair serves fastest on this host, and writes it as
// a schedule (internal/schedule) with the evidence for each bucket.
//
// State has three parts, each reset by one assignment: Pair (what belongs
// to the model pair: acceptance by draft position, the probed verify cost
// by rows, each width's measured runs per bucket, the switch time, the
// learnt schedule; saved, it survives restarts), Engine (the engine
// serving now: its baseline scrape, warm-up and the run it is measuring)
// and Exp (the experiment under way: a switch asked for, a trial).
//
// The rule, on one page in docs/adaptive.md: a width other than the
// default (the policy's or the engine's) is chosen for a bucket only when
// the lower bound of its measured gain over the default, after the spread
// between fresh engines (Config.Spread), exceeds the switch time over the
// payback window. Widths never measured are tried only when the model
// (tokens per cycle from the acceptance, ms per cycle from the probed
// verify cost plus a fitted drafting cost) predicts a gain that could pass
// that rule. Everything else stays at the default and says why.
package control
