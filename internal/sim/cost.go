package sim

import "github.com/speclaunch/speclaunch/internal/simcost"

// CostModel is what a simulated request costs: package simcost holds it,
// so the HTTP sim and the virtual-time harnesses price work alike.
type CostModel = simcost.Model

// DefaultCostModel returns the GB10 affine model with 1% noise.
func DefaultCostModel() CostModel { return simcost.Default() }

// Profiles are the named acceptance shapes (simcost.Profiles).
var Profiles = simcost.Profiles

// ProfileNames lists the profiles, sorted, for flag errors and docs.
func ProfileNames() []string { return simcost.ProfileNames() }

func acceptProb(w int, mean float64) float64        { return simcost.AcceptProb(w, mean) }
func emittedFromProfile(s []float64, w int) float64 { return simcost.EmittedFromProfile(s, w) }
func profileAt(s []float64, k int) float64          { return simcost.ProfileAt(s, k) }
func promptProfile(prompt string) []float64         { return simcost.PromptProfile(prompt) }
func lookupProfile(name string) ([]float64, error)  { return simcost.LookupProfile(name) }
func validProfile(s []float64) error                { return simcost.ValidProfile(s) }
