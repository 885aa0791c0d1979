package cli

import (
	"os"
	"strings"

	"github.com/speclaunch/speclaunch/internal/safefile"
	"github.com/speclaunch/speclaunch/internal/secret"
)

// keySources are where any engine reads its API keys (engine.APIKeySpec's
// union): what seedSecrets reads before anything is parsed.
var keySources = secret.Spec{Flags: []string{"--api-key"}, FileFlags: []string{"--api-key-file"},
	Env: []string{"LLAMA_API_KEY", "VLLM_API_KEY"}, FileEnv: []string{"LLAMA_ARG_API_KEY_FILE"}, Split: true}

// seedSecrets gives the redactor, before anything is parsed, the keys the
// command line and the environment carry: a bad value stops the command
// before its plan (which adds the engine's keys) exists, and a key pasted
// into the wrong flag or variable is not printed in that error either.
func (e *Env) seedSecrets(args []string) {
	e.secrets.Add(secret.ArgvValues(args)...)
	var env []string
	seen := map[string]bool{}
	name := func(n string) {
		if n != "" && !seen[n] {
			seen[n] = true
			env = append(env, n+"="+e.Getenv(n))
		}
	}
	environ := os.Environ()
	if e.Deps != nil {
		environ = e.Deps.Environ // a test's environment of the run
	}
	for _, kv := range environ {
		n, _, _ := strings.Cut(kv, "=")
		name(n)
	}
	for _, n := range append(append([]string(nil), keySources.Env...), keySources.FileEnv...) {
		name(n)
	}
	e.secrets.Add(secret.EnvValues(env)...)
	// Key files, each on its own: one that cannot be read is the plan's
	// error to report, and must not hide the others' keys.
	read := func(path string) ([]byte, error) {
		return safefile.ReadFile(e.Ctx, "api key file", path, safefile.KeyFileLimit)
	}
	for i, a := range args {
		f, v, inline := strings.Cut(a, "=")
		if f != "--api-key-file" {
			continue
		}
		if !inline && i+1 < len(args) {
			v = args[i+1]
		}
		keys, _ := secret.Keys(secret.Spec{FileFlags: keySources.FileFlags}, []string{"--api-key-file", v}, nil, read)
		e.secrets.Add(keys...)
	}
	for _, n := range keySources.FileEnv {
		if v := e.Getenv(n); v != "" {
			keys, _ := secret.Keys(secret.Spec{FileEnv: keySources.FileEnv}, nil, []string{n + "=" + v}, read)
			e.secrets.Add(keys...)
		}
	}
}
