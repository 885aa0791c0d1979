package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/speclaunch/speclaunch/engine"
	"github.com/speclaunch/speclaunch/internal/config"
	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/modelhash"
	"github.com/speclaunch/speclaunch/internal/policy"
)

// EnginePin is what a record, and a tuned entry, pin an engine build to:
// its commit where the engine reports one, else its version; the sim is
// "sim".
func EnginePin(eng key.Engine, caps engine.Caps) string {
	switch {
	case eng == key.Sim:
		return policy.SimPin
	case caps.Commit != "":
		return string(eng) + " " + caps.Commit
	case caps.Version != "":
		return string(eng) + " " + caps.Version
	}
	return string(eng) + " unknown"
}

// SimStandIn is how a sim model stand-in is hashed: the sim's models are
// names, not files (profiles/demo.toml's "demo-target"), so a stand-in is
// keyed by the sha256 of this prefix and its base name.
const SimStandIn = "speclaunch sim stand-in\x00"

// ModelSum names a model by content (modelhash.Sum); for the sim, a name
// that is no file is a stand-in, hashed by its base name (SimStandIn).
func ModelSum(eng key.Engine, path string) (string, error) {
	sum, err := modelhash.Sum(path)
	if err != nil && eng == key.Sim && errors.Is(err, fs.ErrNotExist) {
		h := sha256.Sum256([]byte(SimStandIn + filepath.Base(path)))
		return hex.EncodeToString(h[:]), nil
	}
	return sum, err
}

// SimName reports whether a model setting of a sim launch is a stand-in
// name, not a path: written without a directory, as a flag or variable
// ("demo-target") or in a profile (which config made relative to the
// profile's directory). A name needs no file (the sim serves it as its
// model id; ModelSum hashes a missing one by its name), so it is not
// checked; a path written with a directory ("demo-load/target.txt",
// "/models/x") must be there, as for every engine whose model is a local
// path. False for every other engine.
func SimName(s config.Settings, f config.Field[string]) bool {
	if s.Engine.Value != key.Sim || f.Value == "" {
		return false
	}
	if f.Src.Origin == config.Profile && s.ProfilePath != "" {
		return filepath.Dir(f.Value) == filepath.Dir(s.ProfilePath)
	}
	return filepath.Base(f.Value) == f.Value
}

// EmbeddedDraft prefixes the drafter hash of a pair whose drafter is the
// target's own layers (EmbeddedDrafter): EmbeddedSum.
const EmbeddedDraft = "speclaunch embedded drafter\x00"

// EmbeddedSum is the drafter's hash of a pair that drafts with the
// target's own layers: the sha256 of EmbeddedDraft and the target's hash
// (hex). It is 64 hex digits as a file's is, and never a file's: a tuned
// entry of embedded MTP answers no pair with a separate draft model, not
// even the target given as its own draft model.
func EmbeddedSum(target string) string {
	h := sha256.Sum256([]byte(EmbeddedDraft + target))
	return hex.EncodeToString(h[:])
}

// PairOf is the launch's pair: both models' content and the engine's pin.
// A draft "" is a drafter embedded in the target (EmbeddedDrafter),
// hashed as EmbeddedSum; callers ask only for a launch with a drafter.
func PairOf(eng key.Engine, target, draft string, caps engine.Caps) (policy.Pair, error) {
	t, err := ModelSum(eng, target)
	if err != nil {
		return policy.Pair{}, fmt.Errorf("hash the target %s: %w", target, err)
	}
	d := EmbeddedSum(t)
	if draft != "" {
		if d, err = ModelSum(eng, draft); err != nil {
			return policy.Pair{}, fmt.Errorf("hash the draft model %s: %w", draft, err)
		}
	}
	return policy.Pair{Target: t, Draft: d, Pin: EnginePin(eng, caps)}, nil
}

// pair hashes the launch's pair for the policy's tuned entries; a model
// that cannot be hashed leaves the pair unknown (no tuned entry applies)
// with a warning.
func (p *Plan) pair() {
	s := p.Settings
	pair, err := PairOf(s.Engine.Value, s.Model.Value, s.DraftModel.Value, p.Facts.Caps)
	if err != nil {
		p.Warnings = append(p.Warnings, fmt.Sprintf("the tuned layer holds a schedule for this engine, GPU and target format, but it applies only to the pair it was tuned on, and this pair cannot be read to compare (%v)", err))
		return
	}
	p.Facts.Pair = pair
}
