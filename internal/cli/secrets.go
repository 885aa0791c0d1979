package cli

import (
	"errors"
	"os"
	"slices"
	"strings"

	"github.com/speclaunch/speclaunch/engine"
	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/safefile"
	"github.com/speclaunch/speclaunch/internal/secret"
)

// keySources is where any engine reads its API keys: the union of
// engine.APIKeySpec over every engine, what seedSecrets reads before the
// engine is known.
func keySources() secret.Spec {
	var u secret.Spec
	add := func(to *[]string, names []string) {
		for _, n := range names {
			if !slices.Contains(*to, n) {
				*to = append(*to, n)
			}
		}
	}
	for _, k := range key.Engines {
		sp := engine.APIKeySpec(k)
		add(&u.Flags, sp.Flags)
		add(&u.FileFlags, sp.FileFlags)
		add(&u.Env, sp.Env)
		add(&u.FileEnv, sp.FileEnv)
	}
	return u
}

// seedSecrets gives the redactor, before anything is parsed, the keys the
// command line and the environment carry: a bad value stops the command
// before its plan (which adds the engine's keys) exists, and a key pasted
// into the wrong flag or variable is not printed in that error either.
func (e *Env) seedSecrets(args []string) {
	e.secrets.Add(secret.ArgvValues(args)...)
	src := keySources()
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
	for _, n := range append(slices.Clone(src.Env), src.FileEnv...) {
		name(n)
	}
	e.secrets.Add(secret.EnvValues(env)...)
	e.seedKeyFiles(args, e.Getenv)
}

// seedKeyFiles gives the redactor the keys in the key files that args (an
// argv, or engine arguments) and getenv name, and a key-file value that
// cannot be read and is not clearly a path (secret.KeyNotFileError): such
// a value is masked wherever it shows (profile show's engine-args, the
// logs). Each file on its own: one that cannot be read is the plan's error
// to report, and must not hide the others' keys.
func (e *Env) seedKeyFiles(args []string, getenv func(string) string) {
	read := e.readKeyFile
	if read == nil {
		read = safefile.KeyFileReader(e.Ctx)
	}
	e.secrets.Add(keyFileSecrets(args, getenv, read)...)
}

// keyFileSecrets are the secrets seedKeyFiles gives the redactor, each
// distinct file read once (read reads one): a key file named 30,000 times
// in engine.args was read 30,000 times.
func keyFileSecrets(args []string, getenv func(string) string, read func(string) ([]byte, error)) []string {
	src := keySources()
	var out []string
	seen := map[string]bool{}
	one := func(v string, sp secret.Spec, argv, env []string) {
		if seen[v] {
			return
		}
		seen[v] = true
		keys, err := secret.Keys(sp, argv, env, read)
		out = append(out, keys...)
		var kf *secret.KeyNotFileError
		if errors.As(err, &kf) {
			out = append(out, kf.Value)
		}
	}
	for i, a := range args {
		f, v, inline := strings.Cut(a, "=")
		if !slices.Contains(src.FileFlags, f) {
			continue
		}
		if !inline && i+1 < len(args) {
			v = args[i+1]
		}
		one(v, secret.Spec{FileFlags: src.FileFlags}, []string{f, v}, nil)
	}
	for _, n := range src.FileEnv {
		if v := getenv(n); v != "" {
			one(v, secret.Spec{FileEnv: src.FileEnv}, nil, []string{n + "=" + v})
		}
	}
	return out
}
