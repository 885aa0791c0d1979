package sim

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Config is one simulated server: what mlxcel-server would be told, plus the
// sim's own knobs (the --sim-* flags).
type Config struct {
	Model      string // -m/--model; required
	DraftModel string // --model-draft and its spellings; empty: speculation off
	// DraftKind is "dflash" or "mtp"; empty means dflash (mlxcel would
	// auto-detect from the drafter's config; the sim has nothing to read).
	DraftKind string
	BlockSize int // --draft-block-size; 0 resolves like mlxcel: dflash 16, mtp 4
	Host      string
	Port      int // 0 picks a free port (the listening line says which)

	Warmup time.Duration // time before the server is ready
	// Health503 binds at once and answers 503 "Loading model" during
	// warm-up (llama-server style) instead of refusing connections (mlxcel).
	Health503 bool
	Seed      int64
	// EngineSeed draws this engine's between-engine effect
	// (CostModel.Spread): --sim-engine-seed, else a fresh one per
	// process started by ParseArgs, so each engine a launcher starts is
	// another engine; 0 in code built Configs.
	EngineSeed uint64
	Cost       CostModel
	Decline    bool // the exactness probe declines: classic decode despite a drafter
	// CrashAfter > 0 makes Run return an *ExitError with ExitCode that long
	// after it became ready (crash injection for supervision tests).
	CrashAfter time.Duration
	ExitCode   int  // for CrashAfter and FailStart; ParseArgs defaults it to 1
	FailStart  bool // fail before binding, as a bad drafter does in mlxcel
	// Drift slows request k (0-based) by a factor 1 + Drift·k, to test a
	// bench's drift check.
	Drift float64
	// Slots is how many requests decode together (--sim-slots; 0 means 1).
	// Their verify rows add up: a round at width W with n requests decoding
	// costs the verify cost of n·W rows, a classic step that of n rows.
	// Under a fake Clock the requests' waits add up instead of overlapping,
	// so concurrent timings are only meaningful on the real clock.
	Slots int
	// APIKeys, when any, are required of every request but /health,
	// /v1/health, /models and /v1/models, as llama-server requires its
	// --api-key (the caller reads them: --api-key, --api-key-file,
	// LLAMA_API_KEY, LLAMA_ARG_API_KEY_FILE).
	APIKeys []string

	// Clock is the time source; nil means SystemClock. Tests use a fake.
	Clock Clock
	// onReady, when set, is called with the listen address once ready.
	onReady func(addr string)
}

// MaxSlots bounds --sim-slots and caps -np/--parallel: the most requests
// the sim decodes at once. Bench reads it to record the slots the sim
// really runs and to refuse a --sim-slots the sim would refuse at start.
const MaxSlots = 64

// Per-kind default widths, mirroring mlxcel's flat defaults.
const (
	defaultDFlashBlock = 16
	defaultMTPBlock    = 4
)

// Reasons for block_size_from in the startup line.
const (
	reasonOverride    = "operator override"
	reasonKindDefault = "per-kind default (sim)"
)

// ResolveBlockSize returns the width the sim is configured for and why, in
// mlxcel's block_size_from vocabulary; 0 and "" when there is no drafter.
// A declined probe does not change it: the width is still what was asked.
func (c Config) ResolveBlockSize() (int, string) {
	switch {
	case c.DraftModel == "":
		return 0, ""
	case c.BlockSize > 0:
		return c.BlockSize, reasonOverride
	case c.kind() == "mtp":
		return defaultMTPBlock, reasonKindDefault
	default:
		return defaultDFlashBlock, reasonKindDefault
	}
}

// kind is the effective draft kind.
func (c Config) kind() string {
	if c.DraftKind == "" {
		return "dflash"
	}
	return c.DraftKind
}

// modelID is what /v1/models and responses call the target: its basename.
func (c Config) modelID() string { return filepath.Base(strings.TrimRight(c.Model, "/")) }

// validate catches a Config built in code that ParseArgs would have refused.
func (c Config) validate() error {
	var errs []error
	if c.Model == "" {
		errs = append(errs, errors.New("-m/--model is required"))
	}
	if c.DraftKind != "" && c.DraftKind != "dflash" && c.DraftKind != "mtp" {
		errs = append(errs, fmt.Errorf("--draft-kind %q: want dflash or mtp", c.DraftKind))
	}
	if c.BlockSize != 0 && c.BlockSize < 2 {
		errs = append(errs, fmt.Errorf("--draft-block-size %d: want at least 2 (leave out --model-draft to turn speculation off)", c.BlockSize))
	}
	if c.Slots < 0 || c.Slots > MaxSlots {
		errs = append(errs, fmt.Errorf("--sim-slots %d: want 1-%d", c.Slots, MaxSlots))
	}
	if c.Port < 0 || c.Port > 65535 {
		errs = append(errs, fmt.Errorf("--port %d: want 0-65535", c.Port))
	}
	if c.Cost.ClassicMS <= 0 {
		errs = append(errs, fmt.Errorf("--sim-classic-ms %v: want > 0", c.Cost.ClassicMS))
	}
	if c.DraftModel != "" && len(c.Cost.Verify) == 0 {
		errs = append(errs, errors.New("cost model has no verify table"))
	}
	if err := validProfile(c.Cost.Accept); err != nil {
		errs = append(errs, err)
	}
	if c.DraftModel != "" && len(c.Cost.Emitted) == 0 && len(c.Cost.Accept) == 0 {
		errs = append(errs, errors.New("cost model has no emitted-per-verify table"))
	}
	return errors.Join(errs...)
}

// clone gives Run its own copy of the cost tables, so a caller reusing
// maps cannot change a running server.
func (c Config) clone() Config {
	c.Cost.Verify = maps.Clone(c.Cost.Verify)
	c.Cost.Emitted = maps.Clone(c.Cost.Emitted)
	c.Cost.Accept = slices.Clone(c.Cost.Accept)
	c.Cost.WidthScale = maps.Clone(c.Cost.WidthScale)
	return c
}
