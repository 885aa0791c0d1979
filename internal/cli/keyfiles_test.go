package cli

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/speclaunch/speclaunch/internal/config"
	"github.com/speclaunch/speclaunch/internal/secret"
)

// The seeding reads each key file once per load however often it is
// named: 30,000 copies of "--api-key-file", "keys.txt" in engine.args read
// it 30,000 times (profile validate took 82 s and 3.1 GB), and a load read
// again each file typed on the command line, which seedSecrets had read.
// The redactor learns each file's keys all the same.
func TestKeyFilesReadOncePerLoad(t *testing.T) {
	dir := t.TempDir()
	typed, inProf := filepath.Join(dir, "typed.txt"), filepath.Join(dir, "prof.txt")
	writeFile(t, typed, "typed-key-0001\n")
	writeFile(t, inProf, "profile-key-0002\n")
	prof := filepath.Join(dir, "p.toml")
	writeFile(t, prof, "[engine]\nname = \"sim\"\n"+
		"args = [\"--api-key-file\", \""+inProf+"\", \"--api-key-file="+inProf+"\", \"--api-key-file\", \""+inProf+"\"]\n"+
		"[engine.env]\nLLAMA_ARG_API_KEY_FILE = \""+inProf+"\"\n")
	reads := map[string]int{}
	getenv := func(string) string { return "" }
	e := &Env{Getenv: getenv, PolicyTOML: policyTOML, Ctx: context.Background(), secrets: &secret.Redactor{}}
	e.readKeyFile = func(p string) ([]byte, error) {
		reads[p]++
		return os.ReadFile(p)
	}
	pass := []string{"--api-key-file", typed, "--api-key-file=" + typed}
	e.seedSecrets(append([]string{"profile", "show", "--profile", prof, "--"}, pass...))
	if _, err := e.loadNamed(config.Input{Flags: map[string]string{"profile": prof}, Passthrough: pass, Getenv: getenv}); err != nil {
		t.Fatal(err)
	}
	if want := map[string]int{typed: 1, inProf: 1}; !maps.Equal(reads, want) {
		t.Errorf("reads %v, want %v", reads, want)
	}
	if got, want := e.secrets.String("typed-key-0001 profile-key-0002"), "****0001 ****0002"; got != want {
		t.Errorf("redacted %q, want %q", got, want)
	}
}
