package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A copy of profiles/demo-load.toml naming a stand-in file that is not
// there fails the dry run as a llama.cpp profile does (the sim ran on it);
// profiles/demo.toml, whose models are stand-in names, still passes.
func TestDryRunChecksTheSimsModelFiles(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile("../../profiles/demo-load.toml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "demo-load"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"target.txt", "drafter.txt"} {
		writeFile(t, filepath.Join(dir, "demo-load", f), "")
	}
	prof := filepath.Join(dir, "p.toml")
	writeFile(t, prof, strings.Replace(string(b), `path = "demo-load/target.txt"`, `path = "demo-load/nope.txt"`, 1))
	code, out, errs := runCLI(t, "serve", "--dry-run", "--profile", prof)
	missing := filepath.Join(dir, "demo-load", "nope.txt")
	if code != 2 || !strings.Contains(out+errs, "target model "+missing+" (profile "+prof+":") || !strings.Contains(out+errs, "no such file") {
		t.Errorf("dry run of a sim profile naming a missing file: exit %d\n%s%s", code, out, errs)
	}
	if code, out, errs := runCLI(t, "serve", "--dry-run", "--profile", "../../profiles/demo.toml"); code != 0 {
		t.Errorf("dry run of profiles/demo.toml (stand-in names): exit %d\n%s%s", code, out, errs)
	}
}
