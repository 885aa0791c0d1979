package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/llamaflags"
	"github.com/speclaunch/speclaunch/internal/secret"
)

// flagOverEnv notes each llama-server variable the engine inherits whose
// flag the engine arguments give as well: llama-server takes its command
// line over its variables, so LLAMA_ARG_CTX_SIZE=4096 beside a profile's
// engine.args "-c 2048" runs -c 2048, where speclaunch's own settings
// take the variable over the profile (docs/containers.md). The flag <->
// variable table is llama-server's own --help (llamaflags.EnvFlag). A
// variable speclaunch reads as a setting of its own (a row's), or one the
// profile's engine.env sets (the engine does not inherit it), is left out;
// so is a valued flag that agrees with the variable.
func (l *layer) flagOverEnv(s *Settings) {
	args := s.EngineArgs.Value
	if s.Engine.Value != key.LlamaCpp || len(args) == 0 {
		return
	}
	names := slices.Clone(l.in.EnvNames)
	slices.Sort(names)
	for _, name := range slices.Compact(names) {
		if !strings.HasPrefix(name, "LLAMA_ARG_") || slices.Contains(rowEnvNames, name) {
			continue
		}
		if _, set := s.EngineEnv.Value[name]; set {
			continue
		}
		v := l.in.Getenv(name)
		spellings := llamaflags.EnvFlag(name)
		if v == "" || len(spellings) == 0 {
			continue
		}
		at, flag, vals := LastGiven(args, spellings)
		if at < 0 || len(vals) > 0 && strings.Join(vals, " ") == strings.TrimSpace(v) {
			continue
		}
		shown := secret.MaskArgv(append([]string{flag}, vals...))
		given := strings.Join(shown, " ")
		if len(given) > MaxQuoted {
			given = flag + " " + Quoted(strings.Join(shown[1:], " "))
		}
		masked := strings.TrimPrefix(secret.MaskEnv([]string{name + "=" + v})[0], name+"=")
		where, fix := "typed on the command line", "the command line"
		if src := s.EngineArgSrc(at); src.Origin == Profile {
			where, fix = "in the profile's engine.args ("+src.Name+")", "the profile's engine.args"
		}
		verb := "differs from"
		if len(vals) == 0 {
			verb = "is set beside" // a switch: the flag decides, whatever the variable says
		}
		l.notices = append(l.notices, Notice{"info", fmt.Sprintf("%s=%s %s %s %s; the engine runs %s, as llama-server takes its command line over its variables; to have the variable win, drop %s from %s", name, Quoted(masked), verb, given, where, given, flag, fix)})
	}
}

// LastGiven finds the last of spellings among engine arguments args,
// stepping over each llama-server flag's values as llama-server does, so
// that a value (--alias -np) is never taken for a flag: its index, the
// flag as given and its values ("-c", ["2048"]; "--ctx-size=2048" gives
// ["2048"]); -1 when none is given. The engine takes the last one given;
// this is the one place that rule lives (the settings' notices, bench's
// slot count). A spelling llama-server does not know (the sim's
// --sim-slots) takes one value.
func LastGiven(args, spellings []string) (at int, flag string, vals []string) {
	at = -1
	for i := 0; i < len(args); i++ {
		name, val, inline := strings.Cut(args[i], "=")
		wanted := slices.Contains(spellings, name)
		n, known := llamaflags.Values(name)
		if !known && !wanted {
			continue
		}
		if !known {
			n = 1
		}
		vs := []string{val}
		if !inline {
			vs = args[i+1 : min(i+1+n, len(args))]
		}
		if wanted {
			at, flag, vals = i, name, vs
		}
		if !inline {
			i += n
		}
	}
	return at, flag, vals
}
