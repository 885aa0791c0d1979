package cli

import (
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/testenv"
)

// A drain-mode reload that adds a flag llama-server's --help does not list
// is rejected before anything stops, naming the profile's file:line and
// the flag: the serving engine (the fake llama-server) serves on. It was
// stopped, the new engine failed on the flag, and the previous settings
// were started again, with requests held throughout.
func TestReloadWithAFlagTheEngineRefusesStopsNothing(t *testing.T) {
	testenv.E2E(t)
	t.Parallel() // see TestMain
	port := freePort(t)
	prof := fakeLlamaProfile(t, port)
	b, err := os.ReadFile(prof)
	if err != nil {
		t.Fatal(err)
	}
	base := strings.Replace(string(b), "[server]\n", "[server]\nswitch = \"drain\"\n", 1)
	renameOver(t, prof, base)
	r := startServe(t, "--profile", prof)
	r.log.waitFor(t, `width verified`, 1, 30*time.Second)
	edited := strings.Replace(base, "name = \"llama.cpp\"\n", "name = \"llama.cpp\"\nargs = [\"--bogus-flag\"]\n", 1)
	edited = strings.Replace(edited, "kind = \"draft\"\n", "kind = \"draft\"\nblock_size = 3\n", 1)
	renameOver(t, prof, edited)
	r.log.waitFor(t, `reload rejected`, 1, 20*time.Second)
	l := r.log.String()
	if !strings.Contains(l, "p.toml:3: engine argument --bogus-flag is not a flag llama-server lists in its --help") {
		t.Errorf("the rejection names neither the profile's line nor the flag:\n%s", l)
	}
	if strings.Contains(l, "stopping engine") || strings.Count(l, "starting engine") != 1 {
		t.Errorf("the serving engine was stopped or another started:\n%s", l)
	}
	if code := health(port); code != http.StatusOK {
		t.Errorf("/health %d after the rejected reload, want 200", code)
	}
}
