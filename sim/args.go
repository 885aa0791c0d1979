package sim

import (
	"fmt"
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
	var record string // applied last, over the cost flags
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if !strings.HasPrefix(arg, "-") || arg == "-" || arg == "--" {
			return Config{}, fmt.Errorf("unexpected argument %q", arg)
		}
		name, inline, hasInline := strings.Cut(arg, "=")
		value := func() (string, error) {
			if hasInline {
				return inline, nil
			}
			if i+1 >= len(args) {
				return "", fmt.Errorf("%s: missing value", name)
			}
			i++
			return args[i], nil
		}
		boolean := func(dst *bool) error {
			if !hasInline {
				*dst = true
				return nil
			}
			b, err := strconv.ParseBool(inline)
			if err != nil {
				return fmt.Errorf("%s: %q is not a boolean", name, inline)
			}
			*dst = b
			return nil
		}
		var err error
		switch name {
		case "-m", "--model":
			cfg.Model, err = value()
		case "--model-draft", "--draft-model", "-md", "--spec-draft-model":
			cfg.DraftModel, err = value()
		case "--draft-kind":
			var v string
			if v, err = value(); err == nil {
				cfg.DraftKind = strings.ToLower(v)
				if cfg.DraftKind != "dflash" && cfg.DraftKind != "mtp" {
					err = fmt.Errorf("%s: %q is not supported by the sim (want dflash or mtp)", name, v)
				}
			}
		case "--draft-block-size":
			err = intFlag(name, value, &cfg.BlockSize, 2, 1<<16)
		case "--host":
			cfg.Host, err = value()
		case "--port":
			err = intFlag(name, value, &cfg.Port, 0, 65535)
		case "--sim-warmup":
			err = durationFlag(name, value, &cfg.Warmup)
		case "--sim-health-503":
			err = boolean(&cfg.Health503)
		case "--sim-seed":
			var v string
			if v, err = value(); err == nil {
				if cfg.Seed, err = strconv.ParseInt(v, 10, 64); err != nil {
					err = fmt.Errorf("%s: %q is not an integer", name, v)
				}
			}
		case "--sim-decline":
			err = boolean(&cfg.Decline)
		case "--sim-crash-after":
			err = durationFlag(name, value, &cfg.CrashAfter)
		case "--sim-exit-code":
			err = intFlag(name, value, &cfg.ExitCode, 0, 255)
		case "--sim-fail-start":
			err = boolean(&cfg.FailStart)
		case "--sim-drift":
			err = floatFlag(name, value, &cfg.Drift, 0, 10)
		case "--sim-classic-ms":
			err = floatFlag(name, value, &cfg.Cost.ClassicMS, 1e-3, 1e6)
		case "--sim-draft-ms":
			err = floatFlag(name, value, &cfg.Cost.DraftMS, 0, 1e6)
		case "--sim-draft-token-ms":
			err = floatFlag(name, value, &cfg.Cost.DraftTokenMS, 0, 1e6)
		case "--sim-prompt-ms":
			err = floatFlag(name, value, &cfg.Cost.PromptTokenMS, 0, 1e6)
		case "--sim-noise":
			err = floatFlag(name, value, &cfg.Cost.Noise, 0, 0.5)
		case "--sim-verify-ms":
			var t map[int]float64
			if t, err = tableFlag(name, value, 1e-3, 1e6); err == nil {
				maps.Copy(cfg.Cost.Verify, t)
			}
		case "--sim-slots":
			err = intFlag(name, value, &cfg.Slots, 1, maxSlots)
		case "--sim-profile":
			var v string
			if v, err = value(); err == nil {
				cfg.Cost.Accept, err = lookupProfile(v)
			}
		case "--sim-record":
			record, err = value()
		case "--sim-accept":
			var t map[int]float64
			if t, err = tableFlag(name, value, 0, 1); err == nil {
				for w, a := range t { // acceptance → mean emitted per verify
					cfg.Cost.Emitted[w] = 1 + a*float64(w-1)
				}
			}
		default:
			if strings.HasPrefix(name, "--sim-") {
				return Config{}, fmt.Errorf("%s: unknown sim flag", name)
			}
			// An engine flag the sim does not model: skip it and its value.
			if !hasInline && !ignoredBoolFlags[name] && i+1 < len(args) && looksLikeValue(args[i+1]) {
				i++
			}
		}
		if err != nil {
			return Config{}, err
		}
	}
	if cfg.Model == "" {
		return Config{}, fmt.Errorf("-m/--model is required")
	}
	if record != "" {
		r, err := LoadRecord(record)
		if err != nil {
			return Config{}, err
		}
		if cfg.Cost, err = ReplayCost(r, cfg.Cost); err != nil {
			return Config{}, fmt.Errorf("--sim-record %s: %w", record, err)
		}
	}
	return cfg, nil
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
