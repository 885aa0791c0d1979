package probe

import (
	"maps"
	"slices"
)

// Curve is the verify cost by rows: ms for one target forward over that
// many new tokens, probed on the running engine (or carried in a policy
// entry). It is read between probed rows by linear interpolation and never
// extrapolated: a width whose rows lie past the last probed point is no
// candidate.
type Curve struct {
	VerifyMS map[int]float64 `json:"verify_ms"` // rows → median ms
	Source   string          `json:"source"`    // "probe", "cache", "config"
	// Bare: live traffic kept evicting the probe's cached prefix, so some
	// rows were measured without one, batched with that traffic (Run).
	Bare bool `json:"bare,omitempty"`
}

// At is the verify cost of rows new tokens.
func (c Curve) At(rows int) (float64, bool) {
	if v, ok := c.VerifyMS[rows]; ok {
		return v, true
	}
	keys := slices.Sorted(maps.Keys(c.VerifyMS))
	i, _ := slices.BinarySearch(keys, rows)
	if i == 0 || i == len(keys) {
		return 0, false
	}
	lo, hi := keys[i-1], keys[i]
	f := float64(rows-lo) / float64(hi-lo)
	return c.VerifyMS[lo] + f*(c.VerifyMS[hi]-c.VerifyMS[lo]), true
}
