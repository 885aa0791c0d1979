package engine

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// envRule names a variable the launcher keeps out of an engine's
// environment, and why.
type envRule struct {
	name string
	why  string // completes "NAME=v is kept out of the child: ..."
	fix  string // what to set instead (for engine.env errors)
}

const widthFix = "set the width with --draft-block-size or draft.block_size"

// Width variables: the launcher passes the width as a flag and the settings
// layer has already read these as operator overrides.
var (
	ruleDraftBlockSize = envRule{"LLAMA_ARG_DRAFT_BLOCK_SIZE",
		"the launcher read it as a width override and passes the resolved width as a flag", widthFix}
	ruleMLXCELBlockSize = envRule{"MLXCEL_DRAFT_BLOCK_SIZE",
		"the launcher read it as a width override and passes the resolved width as a flag", widthFix}
	ruleSpecNMax = envRule{"LLAMA_ARG_SPEC_DRAFT_N_MAX",
		"the launcher translated it into the width (draft tokens + 1) and passes the width as a flag", widthFix}
	ruleDraftMax = envRule{"LLAMA_ARG_DRAFT_MAX",
		"the launcher translated it into the width (draft tokens + 1) and passes the width as a flag; a 2026 llama-server refuses to start while it is set (\"the argument has been removed\")", widthFix}
	ruleDraftMin = envRule{"LLAMA_ARG_DRAFT_MIN",
		"a 2026 llama-server refuses to start while it is set (\"the argument has been removed\"); the launcher sizes the draft with the width alone", widthFix}
)

// ruleSpecType: the settings layer read LLAMA_ARG_SPEC_TYPE as the drafter
// kind. Left in the child's environment it would restate a flag, or, with
// speculation off, ask the engine for a drafter it has no model for.
var ruleSpecType = envRule{"LLAMA_ARG_SPEC_TYPE",
	"the launcher read it as the drafter kind and passes the kind as a flag", "set the drafter kind with draft.kind in the profile (or --draft-kind)"}

var llamaEnvRules = []envRule{ruleDraftMax, ruleDraftMin, ruleSpecNMax, ruleDraftBlockSize, ruleMLXCELBlockSize, ruleSpecType}

var mlxcelEnvRules = []envRule{ruleDraftBlockSize, ruleMLXCELBlockSize, ruleSpecType}

// settingEnvRules are engine variables for settings the launcher passes as
// flags. In the operator's own environment they are launcher settings (read
// by config.Load) and harmless to pass on; set through the profile's
// engine.env they would only restate or contradict a flag, so they are
// refused there, as the matching pass-through arguments are.
var settingEnvRules = []envRule{
	{"LLAMA_ARG_MODEL", "", "set the target with model.path in the profile (or --model)"},
	{"LLAMA_ARG_SPEC_DRAFT_MODEL", "", "set the drafter with draft.model in the profile (or --draft-model)"},
	{"LLAMA_ARG_MODEL_DRAFT", "", "set the drafter with draft.model in the profile (or --draft-model)"},
	{"LLAMA_ARG_SPEC_TYPE", "", "set the drafter kind with draft.kind in the profile (or --draft-kind)"},
	{"LLAMA_ARG_DRAFT_KIND", "", "set the drafter kind with draft.kind in the profile (or --draft-kind)"},
	{"LLAMA_ARG_HOST", "", "set the address with server.host in the profile (or --host)"},
	{"LLAMA_ARG_PORT", "", "set the port with server.port in the profile (or --port)"},
}

// buildEnv makes the child's environment: environ minus the rules'
// variables, plus the profile's engine.env, plus defaults (set only when the
// operator's environment lacks them, or has them empty).
func buildEnv(engine string, environ []string, rules []envRule, engineEnv map[string]string, envFrom string, defaults map[string]string, l *Launch) error {
	// The profile's engine.env must not set what the launcher owns: the
	// same rule as for pass-through arguments.
	for _, r := range append(slices.Clone(rules), settingEnvRules...) {
		if v, ok := engineEnv[r.name]; ok {
			return fmt.Errorf("%s: engine.env sets %s=%s, which the launcher owns for %s: %s", envFrom, r.name, v, engine, r.fix)
		}
	}
	type kv struct{ k, v string }
	var vars []kv
	idx := map[string]int{}
	for _, e := range environ {
		k, v, ok := strings.Cut(e, "=")
		if !ok || k == "" {
			continue
		}
		if i, dup := idx[k]; dup {
			vars[i].v = v // the last one wins, as in getenv on most libcs
			continue
		}
		idx[k] = len(vars)
		vars = append(vars, kv{k, v})
	}
	removed := map[string]bool{}
	for _, r := range rules {
		i, ok := idx[r.name]
		if !ok {
			continue
		}
		removed[r.name] = true
		l.EnvRemoved = append(l.EnvRemoved, r.name)
		if strings.TrimSpace(vars[i].v) == "" {
			// Set but empty counts as unset for the launcher (config.Load):
			// nothing was read from it, so say so rather than r.why.
			l.Warnings = append(l.Warnings, fmt.Sprintf("%s is set but empty: the launcher treats it as unset and keeps it out of %s's environment", r.name, engine))
			continue
		}
		l.Warnings = append(l.Warnings, fmt.Sprintf("%s=%s is kept out of %s's environment: %s", r.name, vars[i].v, engine, r.why))
	}
	l.EnvSet = map[string]string{}
	set := func(k, v string) {
		l.EnvSet[k] = v
		if i, ok := idx[k]; ok {
			vars[i].v = v
			return
		}
		idx[k] = len(vars)
		vars = append(vars, kv{k, v})
	}
	keys := make([]string, 0, len(engineEnv))
	for k := range engineEnv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("%s: engine.env has a malformed variable name %q: use NAME = \"value\" with a name without '='", envFrom, k)
		}
		set(k, engineEnv[k])
	}
	dkeys := make([]string, 0, len(defaults))
	for k := range defaults {
		dkeys = append(dkeys, k)
	}
	sort.Strings(dkeys)
	for _, k := range dkeys {
		if i, ok := idx[k]; ok && vars[i].v != "" {
			continue // the operator's value stands
		}
		set(k, defaults[k])
	}
	l.Env = make([]string, 0, len(vars))
	for _, e := range vars {
		if removed[e.k] {
			continue
		}
		l.Env = append(l.Env, e.k+"="+e.v)
	}
	slices.Sort(l.EnvRemoved)
	return nil
}
