package config

import (
	"strings"
	"testing"
)

// TestWordValuesQuotedAsGiven: a setting that takes one of a few words
// quotes a bad value as given, as every other setting does (Quoted): a
// byte that is no UTF-8 escaped ("\xff"), never read as U+FFFD, and a
// blank drafter kind as " ", not "".
func TestWordValuesQuotedAsGiven(t *testing.T) {
	for _, tc := range []struct{ name, val, want string }{
		{"MLXCEL_RESTART", "\xff", `env MLXCEL_RESTART: bad restart policy "\xff": want no or on-failure`},
		{"MLXCEL_SWITCH", "\xff", `env MLXCEL_SWITCH: bad switch mode "\xff": want overlap, drain or auto`},
		{"MLXCEL_LOG_FORMAT", "X\xff", `env MLXCEL_LOG_FORMAT: bad log format "X\xff": want auto, text, color or json`},
		{"MLXCEL_LOG_LEVEL", "\xff", `env MLXCEL_LOG_LEVEL: bad log level "\xff": want debug, info, warn or error`},
		{"MLXCEL_DRAFT_KIND", "\xff", `env MLXCEL_DRAFT_KIND: bad drafter kind: unknown drafter kind "\xff" (known:`},
		{"LLAMA_ARG_DRAFT_KIND", "\xff", `env LLAMA_ARG_DRAFT_KIND: bad drafter kind: unknown drafter kind "\xff" (known:`},
		{"LLAMA_ARG_SPEC_TYPE", "Draft-\xff", `env LLAMA_ARG_SPEC_TYPE: bad drafter kind: unknown drafter kind "Draft-\xff" (known:`},
		{"MLXCEL_DRAFT_KIND", " ", `env MLXCEL_DRAFT_KIND: bad drafter kind: unknown drafter kind " " (known:`},
		{"LLAMA_ARG_SPEC_TYPE", " ", `env LLAMA_ARG_SPEC_TYPE: bad drafter kind: unknown drafter kind " " (known:`},
	} {
		t.Run(tc.name+"="+tc.val, func(t *testing.T) {
			_, _, _, err := Load(Input{Getenv: env(map[string]string{tc.name: tc.val})})
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("got %v; want %s…", err, tc.want)
			}
		})
	}
}
