package adapt

import (
	"cmp"
	"context"
	"fmt"
	"maps"
)

// BeforeTraffic probes a new engine before the proxy routes any request to
// it: the runtime calls it on every engine once it is ready and verified,
// at the first start (client requests held meanwhile) and at every
// overlap switch (the old engine serving meanwhile). A new engine is idle
// by construction, so the probe needs no idle moment of a busy server
// (on the sim under 4 clients from the first second the probe under load
// had 146 of 294 samples after 3 attempts, and the loop never switched).
// It probes only the rows the loop lacks for t's slots (/props
// total_slots; rows 1..MaxWidth and n·W for n up to 4 sequences) into the
// loop's curve and its cache, so after the first engine of a pair it
// usually sends nothing. It is safe to call while Run runs; an error
// means only "not probed" (the runtime logs it and routes anyway; Run
// probes what it still lacks).
func (l *Loop) BeforeTraffic(ctx context.Context, t Target) error {
	if t.BaseURL == "" {
		return fmt.Errorf("adapt: before traffic: the engine has no URL")
	}
	// The slots are read whatever the curve's source: they bound the
	// load a width is measured at and the warm-up (Target.Served).
	rows := l.rowsFor(ctx, t.BaseURL)
	if l.cfg.Curve != nil && len(l.cfg.Curve.VerifyMS) > 0 {
		return nil // given, never probed
	}
	c, _ := l.knownCurve(t.Pair)
	missing := c.missing(rows)
	if len(missing) == 0 {
		return nil
	}
	var st probeState
	if _, err := st.try(ctx, l.cfg.ProbeTimeout, l.d.HTTP, t.BaseURL, missing, l.cfg.ProbeReps); err != nil {
		// The rows probed whole before the bound are kept: the probe under
		// load (Run) then has only the rest to do, on a busy engine where
		// each sample waits for a slot (the demo's sim at 4 slots probed
		// 21 of 42 row counts in the 10 s a first start holds requests,
		// lost them all, and was still probing under load 2 minutes later).
		done := st.whole(l.cfg.ProbeReps)
		if len(done) > 0 {
			l.addCurve(t.Pair, done)
		}
		return fmt.Errorf("adapt: probing %d row counts before traffic (%d done, kept): %w", len(missing), len(done), err)
	}
	l.addCurve(t.Pair, st.samples)
	l.d.Log.Info("adapt: probed the new engine before traffic", "rows", len(missing), "gen", t.Gen)
	return nil
}

// knownCurve is the curve known for pair: what this process probed for
// it, else the cache (for the pair the loop was built for: the cache key
// names its model files). ok is false when none is known.
func (l *Loop) knownCurve(pair string) (Curve, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if pair != "" && l.sharedPair != "" && pair != l.sharedPair {
		l.shared, l.sharedPair = Curve{}, pair // another pair: its own curve
	}
	if l.sharedPair == "" {
		l.sharedPair = pair
	}
	if l.sharedSlot != l.slots {
		l.shared, l.sharedSlot = Curve{}, l.slots // another slot count: its own curve
	}
	if len(l.shared.VerifyMS) > 0 {
		return copyCurve(l.shared), true
	}
	if l.cacheable() && (pair == "" || pair == l.firstPair()) {
		if c, ok := LoadCurve(l.d.CacheDir, l.cacheKey(), l.d.Log); ok {
			l.shared = c
			return copyCurve(c), true
		}
	}
	return Curve{}, false
}

// firstPair is the pair the cache key was made for: the first one seen.
// Call with l.mu held.
func (l *Loop) firstPair() string {
	if l.keyPair == "" {
		l.keyPair = l.sharedPair
	}
	return l.keyPair
}

// cacheKey is the deps' key with the slots of the engine last asked
// (rowsFor). Call with l.mu held.
func (l *Loop) cacheKey() CacheKey {
	k := l.d.CacheKey
	k.Slots = l.slots
	return k
}

// addCurve extends the known curve for pair by probed samples, caches it
// and returns it.
func (l *Loop) addCurve(pair string, samples map[int][]float64) Curve {
	l.mu.Lock()
	defer l.mu.Unlock()
	if pair != "" && l.sharedPair != "" && pair != l.sharedPair {
		l.shared = Curve{}
	}
	if l.sharedSlot != l.slots {
		l.shared = Curve{}
	}
	l.sharedPair, l.sharedSlot = cmp.Or(l.sharedPair, pair), l.slots
	l.shared = l.shared.with(samples)
	if l.cacheable() && (pair == "" || pair == l.firstPair()) {
		if err := SaveCurve(l.d.CacheDir, l.cacheKey(), l.shared, l.d.Now()); err != nil {
			l.d.Log.Warn("adapt: could not cache the verify-cost curve", "err", err)
		}
	}
	return copyCurve(l.shared)
}

// refreshCurve takes into Run's curve the rows BeforeTraffic probed
// meanwhile (for the pair the loop runs on).
func (l *Loop) refreshCurve() {
	if l.curve.Source == "config" || len(l.curve.VerifyMS) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pair != "" && l.sharedPair != l.pair {
		return
	}
	for r, ms := range l.shared.VerifyMS {
		if _, ok := l.curve.VerifyMS[r]; !ok {
			l.curve.VerifyMS[r] = ms
			l.curve.Source = "probe"
		}
	}
}

// saveCurve adds Run's own probe (rows of concurrent decoding under load)
// to the known curve and the cache.
func (l *Loop) saveCurve(samples map[int][]float64) {
	l.curve = l.addCurve(l.pair, samples)
}

func copyCurve(c Curve) Curve {
	return Curve{VerifyMS: maps.Clone(c.VerifyMS), Source: c.Source}
}
