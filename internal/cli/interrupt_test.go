package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/plan"
)

// Issue 33: Ctrl-C while the target's header was read printed a whole
// resolution with quant "unknown" and exited 0; in resolve and propose it
// said "context canceled" and exited 1. An interrupt is exit 130 and
// prints no resolution.
func TestInterruptIs130(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	deps := plan.RealDeps()
	deps.TargetQuant = func(context.Context, string) (key.Quant, string) {
		cancel() // Ctrl-C arrives while the header is read
		return key.QuantUnknown, "cannot read GGUF header: interrupted"
	}
	var o, e bytes.Buffer
	code := MainContext(ctx, []string{"resolve", "--engine", "llama.cpp", "-m", "t.gguf", "--capability", "9.0"}, policyTOML, &o, &e, &deps)
	if code != 130 || strings.Contains(o.String(), "unknown") || !strings.Contains(e.String(), "interrupted") {
		t.Errorf("resolve interrupted in the facts: exit %d\n%s%s", code, o.String(), e.String())
	}

	rec := filepath.Join(t.TempDir(), "r.json")
	os.WriteFile(rec, []byte(`{}`), 0o644)
	done, stop := context.WithCancel(context.Background())
	stop()
	o.Reset()
	e.Reset()
	code = MainContext(done, []string{"policy", "propose", rec}, policyTOML, &o, &e, nil)
	if code != 130 || strings.Contains(e.String(), "context canceled") {
		t.Errorf("propose interrupted: exit %d\n%s%s", code, o.String(), e.String())
	}
}

// Issue 33: engine.args = ["--port","1"] in a profile plus any engine
// argument typed on the command line was blamed on the command line; the
// profile's file:line is named.
func TestProfileEngineArgsBlameTheProfile(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	prof := filepath.Join(t.TempDir(), "ea.toml")
	os.WriteFile(prof, []byte("[engine]\nname = \"llama.cpp\"\nargs = [\"--port\", \"1\"]\n[model]\npath = \"m.gguf\"\n"), 0o644)
	code, o, e := runCLI(t, "serve", "--dry-run", "--profile", prof, "--capability", "9.0", "--", "--jinja")
	if code != 2 || !strings.Contains(e, "profile "+prof+":3: engine argument \"--port\" sets the listen port") {
		t.Errorf("exit %d\n%s%s", code, o, e)
	}
}

// Issue 33: a drafter config.json declaring block_size 10^9 named no file
// and suggested a fix that did not work; 0 and 1 were dropped silently.
func TestDeclaredWidthOutOfRangeNamesTheFile(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.json")
	os.WriteFile(cfg, []byte(`{"model_type":"qwen3_5_mtp","block_size":1000000000}`), 0o644)
	code, o, e := runCLI(t, "resolve", "--engine", "mlxcel", "-m", "t", "-md", dir, "--capability", "9.0")
	if code != 2 || !strings.Contains(e, cfg+" declares width 1000000000") || !strings.Contains(e, "--draft-block-size W") {
		t.Errorf("10^9: exit %d\n%s%s", code, o, e)
	}
	code, o, e = runCLI(t, "resolve", "--engine", "mlxcel", "-m", "t", "-md", dir, "--capability", "9.0", "--draft-block-size", "4")
	if code != 0 || !strings.Contains(o, "draft width 4 (operator override)") {
		t.Errorf("the fix the error suggests: exit %d\n%s%s", code, o, e)
	}
	os.WriteFile(cfg, []byte(`{"model_type":"qwen3_5_mtp","block_size":1}`), 0o644)
	code, o, e = runCLI(t, "resolve", "--engine", "mlxcel", "-m", "t", "-md", dir, "--capability", "9.0")
	if code != 0 || !strings.Contains(o, cfg+": block_size gives width 1, which would turn speculation off") {
		t.Errorf("width 1: exit %d\n%s%s", code, o, e)
	}
	// 0 (read by upstream, verbatim) and -1 (read by no peek: as if absent)
	// are reported with the file and the fix; the width resolves without them.
	// -1 also hides model_type from the kind's read, as upstream's one peek.
	for _, c := range []struct{ bs, want, width string }{
		{"0", cfg + ": block_size gives width 0", "draft width 4 ("},
		{"-1", cfg + ": block_size -1 is negative", "draft width 16 ("},
		{"-1", "nor the kind from model_type qwen3_5_mtp (so dflash)", "draft width 16 ("},
	} {
		os.WriteFile(cfg, []byte(`{"model_type":"qwen3_5_mtp","block_size":`+c.bs+`}`), 0o644)
		code, o, e = runCLI(t, "resolve", "--engine", "mlxcel", "-m", "t", "-md", dir, "--capability", "9.0")
		if code != 0 || !strings.Contains(o, c.want) || !strings.Contains(o, "remove the key") || !strings.Contains(o, c.width) {
			t.Errorf("block_size %s: exit %d\n%s%s", c.bs, code, o, e)
		}
	}
}

// A command stopped by SIGTERM exits 143, by SIGINT 130, as a shell
// reports them (the cause is os/signal.NotifyContext's).
func TestInterruptCode(t *testing.T) {
	for _, c := range []struct {
		sig  syscall.Signal
		code int
		want int
	}{{syscall.SIGTERM, 130, 143}, {syscall.SIGINT, 130, 130}, {syscall.SIGTERM, 2, 2}} {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(errors.New(c.sig.String() + " signal received"))
		if got := interruptCode(ctx, c.code); got != c.want {
			t.Errorf("%v, code %d: %d, want %d", c.sig, c.code, got, c.want)
		}
	}
	if got := interruptCode(context.Background(), 130); got != 130 {
		t.Errorf("no signal: %d", got)
	}
}

// bench's context ends with what stopped it in an operator's words
// (withStopCause), which its --json done event says: it said Go's
// "context canceled". The cause is still a cancellation.
func TestStopCause(t *testing.T) {
	for _, c := range []struct {
		cause error // the parent's, as os/signal.NotifyContext gives it
		want  string
	}{
		{errors.New(syscall.SIGINT.String() + " signal received"), "interrupted (SIGINT)"},
		{errors.New(syscall.SIGTERM.String() + " signal received"), "stopped by SIGTERM"},
		{nil, "interrupted"},
	} {
		parent, cancel := context.WithCancelCause(context.Background())
		ctx, done := withStopCause(parent)
		cancel(c.cause)
		<-ctx.Done()
		if got := context.Cause(ctx); got == nil || got.Error() != c.want || !errors.Is(got, context.Canceled) || !errors.Is(ctx.Err(), context.Canceled) {
			t.Errorf("%v: cause %v (err %v), want %q, a cancellation", c.cause, got, ctx.Err(), c.want)
		}
		done()
	}
}
