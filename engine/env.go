package engine

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// envRule names a variable the launcher keeps out of an engine's
// environment, and why.
type envRule struct {
	name string
	why  string // completes "NAME=v is kept out of the child: ..."
	fix  string // what to set instead (for engine.env errors)
	// unused completes the line instead where the launch does not apply
	// the value (another setting gave it, or speculation is off): why
	// said it was passed on as a flag ("" = why stands).
	unused string
}

// widthUnused and kindUnused say a width or kind variable the launch
// does not apply.
const (
	widthUnused = "the launcher read it, but the width comes from another setting or speculation is off: it is not used"
	kindUnused  = "the launcher read it, but the drafter kind comes from another setting or speculation is off: it is not used"
)

const widthFix = "set the width with --draft-block-size or draft.block_size"

// refusedOn2026 ends the line of a variable a 2026 llama-server refuses.
const refusedOn2026 = "; a 2026 llama-server refuses to start while it is set (\"the argument has been removed\")"

// Width variables: the launcher passes the width as a flag and the settings
// layer has already read these as operator overrides.
var (
	ruleDraftBlockSize = envRule{"LLAMA_ARG_DRAFT_BLOCK_SIZE",
		"the launcher read it as a width override and passes the resolved width as a flag", widthFix, widthUnused}
	ruleMLXCELBlockSize = envRule{"MLXCEL_DRAFT_BLOCK_SIZE",
		"the launcher read it as a width override and passes the resolved width as a flag", widthFix, widthUnused}
	ruleSpecNMax = envRule{"LLAMA_ARG_SPEC_DRAFT_N_MAX",
		"the launcher translated it into the width (draft tokens + 1) and passes the width as a flag", widthFix, widthUnused}
	ruleDraftMax = envRule{"LLAMA_ARG_DRAFT_MAX",
		"the launcher translated it into the width (draft tokens + 1) and passes the width as a flag" + refusedOn2026, widthFix, widthUnused + refusedOn2026}
	ruleDraftMin = envRule{draftMin.env,
		"llama.cpp 2026 renamed it " + draftMin.newEnv + " (" + draftMin.flag + ") and refuses to start while it is set (\"the argument has been removed\")",
		"set the minimum draft with " + draftMin.newEnv + " (" + draftMin.flag + ") on a 2026 tree", ""}
)

// ruleSpecType: the settings layer read LLAMA_ARG_SPEC_TYPE as the drafter
// kind. Left in the child's environment it would restate a flag, or, with
// speculation off, ask the engine for a drafter it has no model for.
var ruleSpecType = envRule{"LLAMA_ARG_SPEC_TYPE",
	"the launcher read it as the drafter kind and passes the kind as a flag", "set the drafter kind with draft.kind in the profile (or --draft-kind)", kindUnused}

// llamaEnvRules are the rules for a llama-server of spelling sp:
// LLAMA_ARG_DRAFT_MIN is a legacy tree's own minimum draft, which the
// launcher does not set, so it is kept out only of a 2026 tree (or one
// not inspected, taken for a 2026 one), which refuses to start on it.
func llamaEnvRules(sp Spelling) []envRule {
	if sp == SpellingLegacy {
		return []envRule{ruleDraftMax, ruleSpecNMax, ruleDraftBlockSize, ruleMLXCELBlockSize, ruleSpecType}
	}
	return []envRule{ruleDraftMax, ruleDraftMin, ruleSpecNMax, ruleDraftBlockSize, ruleMLXCELBlockSize, ruleSpecType}
}

var mlxcelEnvRules = []envRule{ruleDraftBlockSize, ruleMLXCELBlockSize, ruleSpecType}

// settingEnvRules are engine variables for settings the launcher passes as
// flags. In the operator's own environment they are launcher settings (read
// by config.Load) and harmless to pass on; set through the profile's
// engine.env they would only restate or contradict a flag, so they are
// refused there, as the matching pass-through arguments are.
var settingEnvRules = []envRule{
	{name: "LLAMA_ARG_MODEL", fix: "set the target with model.path in the profile (or --model)"},
	{name: "LLAMA_ARG_SPEC_DRAFT_MODEL", fix: "set the drafter with draft.model in the profile (or --draft-model)"},
	{name: "LLAMA_ARG_MODEL_DRAFT", fix: "set the drafter with draft.model in the profile (or --draft-model)"},
	{name: "LLAMA_ARG_SPEC_TYPE", fix: "set the drafter kind with draft.kind in the profile (or --draft-kind)"},
	{name: "LLAMA_ARG_DRAFT_KIND", fix: "set the drafter kind with draft.kind in the profile (or --draft-kind)"},
	{name: "LLAMA_ARG_HOST", fix: "set the address with server.host in the profile (or --host)"},
	{name: "LLAMA_ARG_PORT", fix: "set the port with server.port in the profile (or --port)"},
}

// buildEnv makes the child's environment: environ minus the rules'
// variables, plus the profile's engine.env, plus defaults (set only when the
// operator's environment lacks them, or has them empty). envFrom says where
// an engine.env variable was set (Spec.envFrom: its own file:line).
// applied names the rules' variables whose value the launcher applies
// itself, each with what more to say of it (keepOut).
func buildEnv(engine string, environ []string, rules []envRule, engineEnv map[string]string, envFrom func(string) string, defaults, applied map[string]string, l *Launch) error {
	if err := checkOwned(engine, rules, engineEnv, envFrom); err != nil {
		return err
	}
	env := parseEnviron(environ)
	removed := keepOut(engine, rules, env, applied, l)
	l.EnvSet = map[string]string{}
	for _, k := range slices.Sorted(maps.Keys(engineEnv)) {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("%s: engine.env has a malformed variable name %q: use NAME = \"value\" with a name without '='", envFrom(k), k)
		}
		env.set(k, engineEnv[k])
		l.EnvSet[k] = engineEnv[k]
	}
	for _, k := range slices.Sorted(maps.Keys(defaults)) {
		if v, ok := env.get(k); ok && v != "" {
			continue // the operator's value stands
		}
		env.set(k, defaults[k])
		l.EnvSet[k] = defaults[k]
	}
	l.Env = env.list(removed)
	slices.Sort(l.EnvRemoved)
	return nil
}

// checkOwned refuses a profile whose engine.env sets what the launcher
// owns: the same rule as for pass-through arguments.
func checkOwned(engine string, rules []envRule, engineEnv map[string]string, envFrom func(string) string) error {
	for _, r := range append(slices.Clone(rules), settingEnvRules...) {
		if v, ok := engineEnv[r.name]; ok {
			return fmt.Errorf("%s: engine.env sets %s=%s, which the launcher owns for %s: %s", envFrom(r.name), r.name, v, engine, r.fix)
		}
	}
	return nil
}

// keepOut names the rules' variables present in env, to be left out of
// the child's environment, and records each in l with a line that says
// why: a note where the launcher applies the value itself (applied, whose
// words end the line), else a warning (or that it was set but empty,
// which the launcher reads as unset).
func keepOut(engine string, rules []envRule, env *envList, applied map[string]string, l *Launch) map[string]bool {
	removed := map[string]bool{}
	for _, r := range rules {
		v, ok := env.get(r.name)
		if !ok {
			continue
		}
		removed[r.name] = true
		l.EnvRemoved = append(l.EnvRemoved, r.name)
		if strings.TrimSpace(v) == "" {
			// Set but empty counts as unset for the launcher (config.Load):
			// nothing was read from it, so say so rather than r.why.
			l.Warnings = append(l.Warnings, fmt.Sprintf("%s is set but empty: the launcher treats it as unset and keeps it out of %s's environment", r.name, engine))
			continue
		}
		line := fmt.Sprintf("%s=%s is kept out of %s's environment: ", r.name, v, engine)
		if then, ok := applied[r.name]; ok {
			l.Notes = append(l.Notes, line+r.why+then)
			continue
		}
		why := r.why
		if r.unused != "" {
			why = r.unused
		}
		l.Warnings = append(l.Warnings, line+why)
	}
	return removed
}

// envList is an environment in its original order, one entry per name,
// so the child sees the operator's variables where they were.
type envList struct {
	vars []envVar
	idx  map[string]int // name → index in vars
}

// envVar is one NAME=value of an envList.
type envVar struct{ k, v string }

// parseEnviron reads KEY=VALUE entries, skipping malformed ones; of a
// repeated name the last value wins, as in getenv on most libcs.
func parseEnviron(environ []string) *envList {
	e := &envList{idx: map[string]int{}}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			continue
		}
		if i, dup := e.idx[k]; dup {
			e.vars[i].v = v
			continue
		}
		e.idx[k] = len(e.vars)
		e.vars = append(e.vars, envVar{k, v})
	}
	return e
}

// get is k's value, and whether k is set at all (set but empty counts).
func (e *envList) get(k string) (string, bool) {
	i, ok := e.idx[k]
	if !ok {
		return "", false
	}
	return e.vars[i].v, true
}

// set replaces k's value in place, or appends it.
func (e *envList) set(k, v string) {
	if i, ok := e.idx[k]; ok {
		e.vars[i].v = v
		return
	}
	e.idx[k] = len(e.vars)
	e.vars = append(e.vars, envVar{k, v})
}

// list is the environment as KEY=VALUE entries, less the removed names.
func (e *envList) list(removed map[string]bool) []string {
	out := make([]string, 0, len(e.vars))
	for _, v := range e.vars {
		if removed[v.k] {
			continue
		}
		out = append(out, v.k+"="+v.v)
	}
	return out
}
