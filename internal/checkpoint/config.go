package checkpoint

import (
	"context"
	"path/filepath"
	"strings"

	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/safefile"
)

// ClassifyConfig classifies an MLX config.json with upstream mlxcel's
// classify_quantization rules (src/cli/draft_block_policy.rs), because a
// measured entry keyed on "affine" must match exactly the targets mlxcel
// itself calls affine:
//
//   - the root scope is tried first, then text_config (VLMs nest there);
//     the first scope that declares anything wins;
//   - a "quantization" object declares: its "mode" string maps by name,
//     and a missing (or non-string) mode is affine (classic MLX exports);
//   - else a "quantization_config" object declares: the first
//     config_groups.*.format string, in file order, maps by name, and
//     no group format is other (vendor fp8, bitsandbytes);
//   - nothing declared anywhere is other (unquantized, but readable);
//   - the name mapping is an ASCII-lowercase substring match: "nvfp4"
//     before "affine", anything else other.
//
// Input that serde_json would refuse (not JSON, invalid UTF-8, nesting
// deeper than 127, a number out of f64 range, a lone surrogate) is
// key.QuantUnknown: unreadable, distinct from unquantized.
func ClassifyConfig(raw []byte) key.Quant {
	v, err := parseJSON(raw)
	if err != nil {
		return key.QuantUnknown
	}
	return classify(v)
}

func classify(cfg *jval) key.Quant {
	for _, scope := range []*jval{cfg, cfg.get("text_config")} {
		if scope == nil {
			continue
		}
		if q, ok := classifyScope(scope); ok {
			return q
		}
	}
	return key.QuantOther
}

func classifyScope(scope *jval) (key.Quant, bool) {
	if q := scope.get("quantization"); q != nil && q.kind == jobj {
		mode, ok := q.get("mode").asStr()
		if !ok {
			return key.QuantAffine, true
		}
		return modeName(mode), true
	}
	qc := scope.get("quantization_config")
	if qc == nil || qc.kind != jobj {
		return "", false
	}
	if groups := qc.get("config_groups"); groups != nil && groups.kind == jobj {
		for _, k := range groups.keys {
			if f, ok := groups.obj[k].get("format").asStr(); ok {
				return modeName(f), true
			}
		}
	}
	return key.QuantOther, true
}

func modeName(s string) key.Quant {
	l := asciiLower(s)
	switch {
	case strings.Contains(l, "nvfp4"):
		return key.QuantNVFP4
	case strings.Contains(l, "affine"):
		return key.QuantAffine
	}
	return key.QuantOther
}

// asciiLower is Rust's to_ascii_lowercase: strings.ToLower would also fold
// non-ASCII letters (the Kelvin sign to k) and so match names upstream
// does not.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// readConfig reads dir/config.json: a regular file of at most
// safefile.ConfigLimit bytes (real ones are a few KiB; upstream would read
// any size); ctx ending stops the read.
func readConfig(ctx context.Context, dir string) ([]byte, error) {
	return safefile.ReadFile(ctx, "config.json", filepath.Join(dir, "config.json"), safefile.ConfigLimit)
}
