package cli

import (
	"strings"
	"testing"
)

// The command line's rough edges (a new operator's campaign): speclaunch
// alone prints its help (on stderr, exit 2) and `speclaunch help` prints
// it (exit 0), not a terse error; a command's typo gets a did-you-mean and
// its command's --help, never the engine-flags hint, which is kept for
// unknown flags of a command that takes engine arguments; a flag of
// another command says whose it is; a value after a boolean flag is told
// to join it with =; an engine name's typo gets a did-you-mean.
func TestUsageRoughEdges(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	const engineHint = "engine flags llama-server does not list go after --"
	for _, tc := range []struct {
		run            envRun
		args           []string
		code           int
		stdout, stderr string
		notIn          string
	}{
		{withEnv(nil), nil, 2, "", "Usage: speclaunch <command> [flags]", "speclaunch: error"},
		{withEnv(nil), []string{"help"}, 0, "Usage: speclaunch <command> [flags]", "", "speclaunch: error"},
		{withEnv(nil), []string{"help", "serve"}, 0, "Usage: speclaunch serve", "", "speclaunch: error"},
		{withEnv(nil), []string{"serv"}, 2, "", `unexpected argument serv, did you mean "serve"?` + "\nspeclaunch: hint: run speclaunch --help for the commands", engineHint},
		{withEnv(nil), []string{"policy", "explian"}, 2, "", `did you mean "explain"?` + "\nspeclaunch: hint: run speclaunch policy --help for its commands", engineHint},
		{withEnv(nil), []string{"policy", "list", "-x"}, 2, "", "hint: run speclaunch policy list --help for its flags", engineHint},
		{withEnv(nil), []string{"profile", "show", "--proxy=false"}, 2, "", "unknown flag --proxy: a flag of serve and resolve, not of profile show\nspeclaunch: hint: give it to speclaunch serve or speclaunch resolve", "llama-server's --props"},
		// bench's engines' ports are --base-port's, not serve's --port.
		{withEnv(nil), []string{"bench", "--port", "9"}, 2, "", "unknown flag --port: a flag of serve and resolve and policy explain and profile show and profile validate, not of bench\nspeclaunch: hint: bench and tune run their engines on loopback ports of their own: pick them with --base-port PORT", ""},
		{withEnv(nil), []string{"serve", "--dry-run", "--profile", "../../profiles/demo.toml", "--proxy", "false"}, 2, "", `unexpected argument "false" after --proxy` + "\nspeclaunch: hint: a boolean flag takes its value after =: --proxy=false", ""},
		{withEnv(map[string]string{"MLXCEL_ENGINE": "llama.ccp"}), []string{"resolve", "-m", "x.gguf"}, 2, "", `unknown engine "llama.ccp" (did you mean llama.cpp? known:`, ""},
	} {
		code, o, e := tc.run.cli(tc.args...)
		e = unwrap(e)
		if code != tc.code || !strings.Contains(o, tc.stdout) || !strings.Contains(e, tc.stderr) || tc.notIn != "" && strings.Contains(o+e, tc.notIn) {
			t.Errorf("%q: exit %d, want %d, stdout with %q, stderr with %q, neither with %q:\n%s%s", tc.args, code, tc.code, tc.stdout, tc.stderr, tc.notIn, o, e)
		}
	}
}

// A command operators guess that speclaunch does not have is answered
// with where it is: validate is profile validate's, status is what a
// running serve answers on /speclaunch/status (docs/serving.md). Both got
// "unexpected argument" and "run speclaunch --help" alone; other unknown
// words, and a guess under another command, keep Kong's words and hint.
func TestUnknownCommandHints(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		stderr string
		notIn  string
	}{
		{[]string{"validate"}, "error: unexpected argument validate\nspeclaunch: hint: did you mean `speclaunch profile validate`?", "run speclaunch --help"},
		{[]string{"validate", "--profile", "p.toml"}, "hint: did you mean `speclaunch profile validate`?", "run speclaunch --help"},
		{[]string{"status"}, "error: unexpected argument status\nspeclaunch: hint: speclaunch has no status command: a running serve answers `curl http://HOST:PORT/speclaunch/status` (docs/serving.md, \"/speclaunch/status\")", "run speclaunch --help"},
		{[]string{"frobnicate"}, "error: unexpected argument frobnicate\nspeclaunch: hint: run speclaunch --help for the commands", "did you mean"},
		{[]string{"policy", "validate"}, "hint: run speclaunch policy --help for its commands", "profile validate"},
	} {
		code, o, e := withEnv(nil).cli(tc.args...)
		e = unwrap(e)
		if code != 2 || !strings.Contains(e, tc.stderr) || strings.Contains(o+e, tc.notIn) {
			t.Errorf("%q: exit %d, want 2, stderr with %q, without %q:\n%s%s", tc.args, code, tc.stderr, tc.notIn, o, e)
		}
	}
}
