package sim

import (
	"fmt"

	"github.com/speclaunch/speclaunch/internal/simcost"
	"maps"
	"strconv"
	"strings"
	"time"
)

// ignoredBoolFlags are engine flags the sim accepts and ignores that take no
// value; knowing them keeps "--metrics --port 1" from eating "--port".
// Unknown flags not listed here take the next argument as their value when
// it does not look like a flag.
var ignoredBoolFlags = map[string]bool{
	"--ignore-eos": true, "--metrics": true, "--props": true, "--slots": true, "--no-slots": true,
	"--warmup": true, "--no-warmup": true, "--no-batch": true, "--jinja": true, "--no-mmap": true,
	"--mlock": true, "--verbose": true, "-v": true, "--cont-batching": true, "--no-cont-batching": true,
	"--enable-preemption": true, "--settings": true, "--log-disable": true, "--no-webui": true,
	"--embeddings": true, "--no-prompt-cache": true, "--trust-remote-code": true,
}

// ParseArgs reads an mlxcel-server command line plus the sim's own --sim-*
// flags. Engine flags it does not model (--max-batch-size N, --ignore-eos,
// --metrics, --props, ...) are accepted and ignored, as the launcher passes
// them to the real engine too; a misspelled --sim-* flag is an error. Both
// "--flag value" and "--flag=value" work. Errors name the flag.
func ParseArgs(args []string) (Config, error) {
	cfg := Config{
		Host:     "127.0.0.1",
		Port:     8080,
		Warmup:   time.Second,
		Cost:     DefaultCostModel(),
		ExitCode: 1,
	}
	var parallel int                               // -np/--parallel: the slot count when --sim-slots is not given
	var record string                              // applied last, over the cost flags
	cfg.EngineSeed = uint64(time.Now().UnixNano()) // another engine each start, unless --sim-engine-seed
	c := &argCursor{args: args}
	for ; c.i < len(args); c.i++ {
		arg := args[c.i]
		if !strings.HasPrefix(arg, "-") || arg == "-" || arg == "--" {
			return Config{}, fmt.Errorf("unexpected argument %q", arg)
		}
		c.name, c.inline, c.hasInline = strings.Cut(arg, "=")
		var err error
		if c.name == "-np" || c.name == "--parallel" {
			err = parallelFlag(c, &parallel)
		} else if strings.HasPrefix(c.name, "--sim-") {
			err = cfg.setSimFlag(c, &record)
		} else {
			err = cfg.setEngineFlag(c)
		}
		if err != nil {
			return Config{}, err
		}
	}
	if cfg.Model == "" {
		return Config{}, fmt.Errorf("-m/--model is required")
	}
	if cfg.Slots == 0 && parallel > 0 { // llama-server's slot count, unless --sim-slots
		cfg.Slots = min(parallel, MaxSlots)
	}
	if record != "" {
		if err := cfg.replayRecord(record); err != nil {
			return Config{}, err
		}
	}
	return cfg, nil
}

// argCursor is the flag being parsed and where it stands in the command
// line, so a flag's value can come from "=value" or the next argument.
type argCursor struct {
	args      []string
	i         int // index of the flag in args
	name      string
	inline    string // the text after "=", when hasInline
	hasInline bool
}

// value returns the flag's value: its "=value", else the next argument,
// which it consumes.
func (c *argCursor) value() (string, error) {
	if c.hasInline {
		return c.inline, nil
	}
	if c.i+1 >= len(c.args) {
		return "", fmt.Errorf("%s: missing value", c.name)
	}
	c.i++
	return c.args[c.i], nil
}

// boolean sets dst from a switch: bare means true, "=value" is parsed.
func (c *argCursor) boolean(dst *bool) error {
	if !c.hasInline {
		*dst = true
		return nil
	}
	b, err := strconv.ParseBool(c.inline)
	if err != nil {
		return fmt.Errorf("%s: %q is not a boolean", c.name, c.inline)
	}
	*dst = b
	return nil
}

// skipUnknown steps over the value of an engine flag the sim does not
// model, when it has one.
func (c *argCursor) skipUnknown() {
	if !c.hasInline && !ignoredBoolFlags[c.name] && c.i+1 < len(c.args) && looksLikeValue(c.args[c.i+1]) {
		c.i++
	}
}

// setEngineFlag applies one of mlxcel-server's own flags; one the sim does
// not model is skipped with its value.
func (cfg *Config) setEngineFlag(c *argCursor) error {
	var err error
	switch name := c.name; name {
	case "-m", "--model":
		cfg.Model, err = c.value()
	case "--model-draft", "--draft-model", "-md", "--spec-draft-model":
		cfg.DraftModel, err = c.value()
	case "--draft-kind":
		var v string
		if v, err = c.value(); err == nil {
			cfg.DraftKind = strings.ToLower(v)
			if cfg.DraftKind != "dflash" && cfg.DraftKind != "mtp" {
				err = fmt.Errorf("%s: %q is not supported by the sim (want dflash or mtp)", name, v)
			}
		}
	case "--draft-block-size":
		err = intFlag(name, c.value, &cfg.BlockSize, 2, 1<<16)
	case "--host":
		cfg.Host, err = c.value()
	case "--port":
		err = intFlag(name, c.value, &cfg.Port, 0, 65535)
	default:
		c.skipUnknown()
	}
	return err
}

// setSimFlag applies one of the sim's own --sim-* flags; an unknown one is
// an error, since it can only be a misspelling. --sim-record's file is
// only named here (*record): it is replayed after every cost flag.
func (cfg *Config) setSimFlag(c *argCursor, record *string) error {
	var err error
	switch name := c.name; name {
	case "--sim-warmup":
		err = durationFlag(name, c.value, &cfg.Warmup)
	case "--sim-health-503":
		err = c.boolean(&cfg.Health503)
	case "--sim-seed":
		var v string
		if v, err = c.value(); err == nil {
			if cfg.Seed, err = strconv.ParseInt(v, 10, 64); err != nil {
				err = fmt.Errorf("%s: %q is not an integer", name, v)
			}
		}
	case "--sim-decline":
		err = c.boolean(&cfg.Decline)
	case "--sim-crash-after":
		err = durationFlag(name, c.value, &cfg.CrashAfter)
	case "--sim-exit-code":
		err = intFlag(name, c.value, &cfg.ExitCode, 0, 255)
	case "--sim-fail-start":
		err = c.boolean(&cfg.FailStart)
	case "--sim-drift":
		err = floatFlag(name, c.value, &cfg.Drift, 0, 10)
	case "--sim-slots":
		err = intFlag(name, c.value, &cfg.Slots, 1, MaxSlots)
	case "--sim-record":
		*record, err = c.value()
	case "--sim-engine-seed":
		var v string
		if v, err = c.value(); err == nil {
			if cfg.EngineSeed, err = strconv.ParseUint(v, 10, 64); err != nil {
				err = fmt.Errorf("%s: %q is not a non-negative integer", name, v)
			}
		}
	case "--sim-cost":
		var v string
		if v, err = c.value(); err == nil {
			cfg.Cost, err = simcost.LookupPreset(v)
		}
	default:
		return cfg.setCostFlag(c)
	}
	return err
}

// setCostFlag applies a --sim-* flag of the cost model: times, noise,
// verify table, acceptance profile or table.
func (cfg *Config) setCostFlag(c *argCursor) error {
	var err error
	switch name := c.name; name {
	case "--sim-classic-ms":
		err = floatFlag(name, c.value, &cfg.Cost.ClassicMS, 1e-3, 1e6)
	case "--sim-draft-ms":
		err = floatFlag(name, c.value, &cfg.Cost.DraftMS, 0, 1e6)
	case "--sim-draft-token-ms":
		err = floatFlag(name, c.value, &cfg.Cost.DraftTokenMS, 0, 1e6)
	case "--sim-prompt-ms":
		err = floatFlag(name, c.value, &cfg.Cost.PromptTokenMS, 0, 1e6)
	case "--sim-noise":
		err = floatFlag(name, c.value, &cfg.Cost.Noise, 0, 0.5)
	case "--sim-verify-ms":
		var t map[int]float64
		if t, err = tableFlag(name, c.value, 1e-3, 1e6); err == nil {
			maps.Copy(cfg.Cost.Verify, t)
		}
	case "--sim-profile":
		var v string
		if v, err = c.value(); err == nil {
			cfg.Cost.Accept, err = lookupProfile(v)
		}
	case "--sim-accept":
		var t map[int]float64
		if t, err = tableFlag(name, c.value, 0, 1); err == nil {
			for w, a := range t { // acceptance → mean emitted per verify
				cfg.Cost.Emitted[w] = 1 + a*float64(w-1)
			}
		}
	default:
		return fmt.Errorf("%s: unknown sim flag", name)
	}
	return err
}

// replayRecord replaces the cost model with one fitted to a bench record,
// starting from the flags' costs.
func (cfg *Config) replayRecord(record string) error {
	r, err := LoadRecord(record)
	if err != nil {
		return err
	}
	if cfg.Cost, err = ReplayCost(r, cfg.Cost); err != nil {
		return fmt.Errorf("--sim-record %s: %w", record, err)
	}
	return nil
}

// parallelFlag reads llama-server's -np/--parallel N; -1 (auto) and other
// values below 1 leave the slot count alone.
func parallelFlag(c *argCursor, dst *int) error {
	v, err := c.value()
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return fmt.Errorf("%s: %q is not an integer", c.name, v)
	}
	*dst = n
	return nil
}

// looksLikeValue: not a flag, or a negative number (--parallel -1).
func looksLikeValue(s string) bool {
	if !strings.HasPrefix(s, "-") {
		return true
	}
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

func intFlag(name string, value func() (string, error), dst *int, lo, hi int) error {
	v, err := value()
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return fmt.Errorf("%s: %q is not an integer", name, v)
	}
	if n < lo || n > hi {
		return fmt.Errorf("%s: %d is out of range %d-%d", name, n, lo, hi)
	}
	*dst = n
	return nil
}

func floatFlag(name string, value func() (string, error), dst *float64, lo, hi float64) error {
	v, err := value()
	if err != nil {
		return err
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return fmt.Errorf("%s: %q is not a number", name, v)
	}
	if !(f >= lo && f <= hi) { // also rejects NaN
		return fmt.Errorf("%s: %v is out of range %v-%v", name, f, lo, hi)
	}
	*dst = f
	return nil
}

func durationFlag(name string, value func() (string, error), dst *time.Duration) error {
	v, err := value()
	if err != nil {
		return err
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return fmt.Errorf("%s: %q is not a duration like 2s or 500ms", name, v)
	}
	if d < 0 {
		return fmt.Errorf("%s: %v is negative", name, d)
	}
	*dst = d
	return nil
}

// tableFlag parses "2=19,3=24.5": widths (≥ 2) to values in [lo, hi].
func tableFlag(name string, value func() (string, error), lo, hi float64) (map[int]float64, error) {
	v, err := value()
	if err != nil {
		return nil, err
	}
	t := map[int]float64{}
	for item := range strings.SplitSeq(v, ",") {
		item = strings.TrimSpace(item)
		ws, fs, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fmt.Errorf("%s: %q is not width=value", name, item)
		}
		w, err := strconv.Atoi(strings.TrimSpace(ws))
		if err != nil || w < 2 || w > 1<<16 {
			return nil, fmt.Errorf("%s: width %q is not an integer of at least 2", name, ws)
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(fs), 64)
		if err != nil || !(f >= lo && f <= hi) {
			return nil, fmt.Errorf("%s: value %q for width %d is not a number in %v-%v", name, fs, w, lo, hi)
		}
		if _, dup := t[w]; dup {
			return nil, fmt.Errorf("%s: width %d given twice", name, w)
		}
		t[w] = f
	}
	return t, nil
}

// CostSpread is the between-engine spread of the cost model the sim's
// engine arguments pick (--sim-cost, the last given; the default model
// without one), read without opening any file: false where it cannot be
// known so (a --sim-record, whose model is in a file, or a bad preset).
func CostSpread(args []string) (simcost.Spread, bool) {
	m := DefaultCostModel()
	c := &argCursor{args: args}
	for ; c.i < len(args); c.i++ {
		c.name, c.inline, c.hasInline = strings.Cut(args[c.i], "=")
		switch c.name {
		case "--sim-record":
			return simcost.Spread{}, false
		case "--sim-cost":
			v, err := c.value() // ParseArgs's rule for a flag's value
			if err == nil {
				m, err = simcost.LookupPreset(v)
			}
			if err != nil {
				return simcost.Spread{}, false
			}
		}
	}
	return m.Spread, true
}
