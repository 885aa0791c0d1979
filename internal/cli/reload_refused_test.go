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
// is refused before anything stops, naming the profile's file:line and
// the flag: the serving engine (the fake llama-server) serves on. It was
// stopped, the new engine failed on the flag, and the previous settings
// were started again, with requests held throughout.
func TestReloadWithAFlagTheEngineRefusesStopsNothing(t *testing.T) {
	testenv.E2E(t)
	t.Parallel() // see TestMain
	port := freePort(t)
	r, prof, base := serveFakeLlama(t, port, "drain")
	renameOver(t, prof, withBogusFlag(base))
	r.log.waitFor(t, `new settings cannot start; the engine keeps running with the previous ones`, 1, 20*time.Second)
	l := r.log.String()
	if !strings.Contains(l, "p.toml:3: engine argument --bogus-flag is not a flag this llama-server (flag spelling 2026) lists in its --help") || !strings.Contains(l, "a switch in drain mode stops it before the new engine starts") {
		t.Errorf("the refusal names neither the profile's line, the flag nor the mode:\n%s", l)
	}
	if strings.Contains(l, "stopping engine") || strings.Count(l, "starting engine") != 1 {
		t.Errorf("the serving engine was stopped or another started:\n%s", l)
	}
	if code := health(port); code != http.StatusOK {
		t.Errorf("/health %d after the refused reload, want 200", code)
	}
}

// In overlap the same reload is tried, with a warning: the new engine
// starts beside the serving one (the flag list is pinned to captured
// llama.cpp trees; a newer llama-server may take the flag), and when it
// fails on the flag, as the fake llama-server does, the serving engine
// serves on and the reload is rejected. Before, overlap refused it too,
// offering only a restart of speclaunch.
func TestReloadWithAFlagTheEngineRefusesInOverlapIsTried(t *testing.T) {
	testenv.E2E(t)
	t.Parallel() // see TestMain
	port := freePort(t)
	r, prof, base := serveFakeLlama(t, port, "overlap")
	renameOver(t, prof, withBogusFlag(base))
	r.log.waitFor(t, `starting the new engine beside it all the same`, 1, 20*time.Second)
	r.log.waitFor(t, `the new engine failed to start; the old one keeps serving`, 1, 20*time.Second)
	l := r.log.String()
	if !strings.Contains(l, "p.toml:3: engine argument --bogus-flag is not a flag this llama-server (flag spelling 2026) lists in its --help") {
		t.Errorf("the warning names neither the profile's line nor the flag:\n%s", l)
	}
	if strings.Contains(l, "new settings cannot start") || strings.Count(l, "starting engine") != 2 {
		t.Errorf("the reload was refused, or its engine not started:\n%s", l)
	}
	if code := health(port); code != http.StatusOK {
		t.Errorf("/health %d after the failed start, want 200", code)
	}
}

// A reload whose engine.args add --api-prefix, or whose engine.env sets
// LLAMA_ARG_SSL_CERT_FILE, is rejected, naming the profile's line and the
// fix, whatever the switch mode: the new engine's /health would be under
// the prefix or on HTTPS, where speclaunch's readiness check never reaches
// it. The serving engine serves on.
func TestReloadWithAPrefixOrTLSIsRejected(t *testing.T) {
	testenv.E2E(t)
	t.Parallel() // see TestMain
	port := freePort(t)
	r, prof, base := serveFakeLlama(t, port, "overlap")
	prefix := strings.Replace(base, "name = \"llama.cpp\"\n", "name = \"llama.cpp\"\nargs = [\"--api-prefix\", \"/v2\"]\n", 1)
	renameOver(t, prof, prefix)
	r.log.waitFor(t, `reload rejected; the engine keeps running`, 1, 20*time.Second)
	tls := base + "[engine.env]\nLLAMA_ARG_SSL_CERT_FILE = \"/c.pem\"\n"
	renameOver(t, prof, tls)
	r.log.waitFor(t, `reload rejected; the engine keeps running`, 2, 20*time.Second)
	l := r.log.String()
	if !strings.Contains(l, `p.toml:3: engine argument \"--api-prefix\" sets a path prefix`) || !strings.Contains(l, "LLAMA_ARG_SSL_CERT_FILE (llama-server's --ssl-cert-file), which sets HTTPS") {
		t.Errorf("the rejections name neither the profile's line nor the flag:\n%s", l)
	}
	if strings.Contains(l, "stopping engine") || strings.Count(l, "starting engine") != 1 {
		t.Errorf("the serving engine was stopped or another started:\n%s", l)
	}
	if code := health(port); code != http.StatusOK {
		t.Errorf("/health %d after the rejected reloads, want 200", code)
	}
}

// serveFakeLlama serves the fake llama-server's profile on port with
// server.switch = mode, once its width is verified; the log is JSON, a
// line a message whatever the length of the temporary paths.
func serveFakeLlama(t *testing.T, port int, mode string) (r *serveRun, prof, base string) {
	t.Helper()
	prof = fakeLlamaProfile(t, port)
	b, err := os.ReadFile(prof)
	if err != nil {
		t.Fatal(err)
	}
	base = strings.Replace(string(b), "[server]\n", "[server]\nswitch = \""+mode+"\"\n", 1)
	renameOver(t, prof, base)
	r = startServe(t, "--profile", prof, "--log-format", "json")
	r.log.waitFor(t, `width verified`, 1, 30*time.Second)
	return r, prof, base
}

// withBogusFlag is the profile base with a flag llama-server's --help
// does not list in engine.args (its line 3), and another width.
func withBogusFlag(base string) string {
	edited := strings.Replace(base, "name = \"llama.cpp\"\n", "name = \"llama.cpp\"\nargs = [\"--bogus-flag\"]\n", 1)
	return strings.Replace(edited, "kind = \"draft\"\n", "kind = \"draft\"\nblock_size = 3\n", 1)
}
