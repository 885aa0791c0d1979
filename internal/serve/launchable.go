package serve

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/speclaunch/speclaunch/engine"
	"github.com/speclaunch/speclaunch/internal/checkpoint"
	"github.com/speclaunch/speclaunch/internal/config"
	"github.com/speclaunch/speclaunch/internal/exitcode"
	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/plan"
	"github.com/speclaunch/speclaunch/internal/problems"
	"github.com/speclaunch/speclaunch/internal/quote"
	"github.com/speclaunch/speclaunch/internal/safefile"
	"github.com/speclaunch/speclaunch/internal/schedule"
	"github.com/speclaunch/speclaunch/internal/width"
)

// processStart is taken at package initialization, after the Go runtime
// and every dependency have initialized: the launcher's own work before the
// engine's exec is measured from it (serve logs it as init_to_exec).
var processStart = time.Now()

// ExitWidthMismatch is serve's exit code under --strict-width.
const ExitWidthMismatch = 3

// Launchable refuses a plan that cannot start, before anything runs:
// a missing target (what the operator typed, first), what Runnable
// refuses, or a port already taken.
func Launchable(p *plan.Plan, checkPort bool) error {
	s := p.Settings
	if s.Model.Value == "" {
		in := "the profile"
		if s.ProfilePath != "" {
			in = s.ProfilePath // a reload under serve: which file (it named none)
		}
		return exitcode.Bad(errors.New("no target model: set model.path in " + in + ", --model/-m, or LLAMA_ARG_MODEL" + engine.HFRepoHint(s.Engine.Value, s.EngineArgs.Value)))
	}
	if err := Runnable(p); err != nil {
		return err
	}
	if checkPort {
		if err := PortFree(s.Host.Value, s.Port.Value); err != nil {
			return unavailable(s.Host.Value, s.Port.Value, err, "")
		}
	}
	return nil
}

// Runnable refuses a plan whose engine binary, or model files, this host
// lacks: what serve checks before anything runs besides a target being
// given and the port, and what profile validate checks with it. A plan
// with no target (profile validate of a profile that names none: an empty
// one, a container's that gets it from LLAMA_ARG_MODEL) has only what the
// settings name checked: engine.binary where set, the drafter. Every one
// of hostProblems is said, in one error (problems.Join): serve said the first,
// and fixing it showed the next.
func Runnable(p *plan.Plan) error {
	return problems.Join("on this host", hostProblems(p))
}

// hostProblems is every problem Runnable checks for, in its order: the
// engine binary, then each model file.
func hostProblems(p *plan.Plan) []error {
	var out []error
	if err := binaryProblem(p); err != nil {
		out = append(out, err)
	}
	s := p.Settings
	for _, m := range []struct {
		what string
		f    config.Field[string]
	}{{"target model", s.Model}, {"draft model", s.DraftModel}} {
		if m.f.Value == "" || plan.SimName(s, m.f) {
			continue
		}
		if err := checkModelPath(s.Engine.Value, m.what, m.f.Value, m.f.Src.String()); err != nil {
			out = append(out, err)
		}
	}
	return out
}

// binaryProblem is Runnable's check of the engine binary.
func binaryProblem(p *plan.Plan) error {
	s := p.Settings
	if s.Engine.Value != key.Sim && p.Facts.BinaryPath == "" && (s.Model.Value != "" || s.EngineBinary.Set()) {
		return exitcode.Bad(binaryMissing(s, p.Facts.Binary))
	}
	if len(p.Launch.Argv) > 0 {
		// What will be exec'd, whatever the engine: a drain switch stops
		// the old engine only after this check. A binary an operator set
		// (the sim's, which the check above leaves here) is refused
		// naming where it was set.
		bin := p.Launch.Argv[0]
		if _, err := exec.LookPath(bin); err != nil {
			if s.EngineBinary.Set() {
				return exitcode.Bad(binaryMissing(s, bin))
			}
			return exitcode.Bad(fmt.Errorf("engine binary %s cannot be run (%v); install it or set engine.binary in the profile (--engine-binary, MLXCEL_ENGINE_BINARY)", bin, errors.Unwrap(err)))
		}
	}
	return nil
}

// unproven is each flag of np's engine arguments that the engine is known
// to refuse at its start (engine.Launch.Unknown: no captured llama-server
// --help lists such a flag; one another tree lists may be this build's)
// and that the serving engine, cur, does not run
// already: a flag it runs (same engine, same binary) is proven taken,
// whatever the list says (a build newer than the list).
func unproven(cur, np *plan.Plan) []engine.UnknownFlag {
	runs := map[string]bool{}
	if cur != nil && cur.Settings.Engine.Value == np.Settings.Engine.Value && cur.Facts.BinaryPath == np.Facts.BinaryPath {
		for _, u := range cur.Launch.Unknown {
			runs[u.Name] = true
		}
	}
	var out []engine.UnknownFlag
	for _, u := range np.Launch.Unknown {
		if !runs[u.Name] && u.Unproven() {
			out = append(out, u)
		}
	}
	return out
}

// knownToFail judges a switch from cur to np in mode whose engine
// arguments hold unproven flags. Where the switch would stop the serving
// engine before the new one starts (drain, or direct: no proxy) it is
// refused, naming where the first flag was given: the serving engine is
// not stopped for a start known to fail. In overlap the new engine starts
// beside the serving one, which serves on if it fails: the switch is
// tried, with the warning returned (the flag list is pinned to captured
// llama.cpp trees; a newer llama-server may take the flag). A start only
// warns of such flags (docs/engines.md).
func knownToFail(cur, np *plan.Plan, mode key.Switch) (warn string, err error) {
	us := unproven(cur, np)
	if len(us) == 0 {
		return "", nil
	}
	u := us[0]
	where := argsSource(np.Settings, u.Name)
	more := ""
	if len(us) > 1 {
		var names []string
		for _, o := range us[1:min(len(us), 6)] {
			names = append(names, o.Name)
		}
		if len(us) > 6 {
			names = append(names, fmt.Sprintf("and %d more", len(us)-6))
		}
		more = " (not listed either: " + strings.Join(names, ", ") + ")"
	}
	if !stopsFirst(mode) {
		return fmt.Sprintf("%s: %s%s; the serving engine does not run it: starting the new engine beside it all the same (switch mode %s: if the start fails, the serving engine serves on)", where, u.Why(), more, mode), nil
	}
	how := fmt.Sprintf("a switch in %s mode stops it before the new engine starts", mode)
	fix := "; if this llama-server build takes it, restart speclaunch with it (a start only warns of it)"
	switch mode {
	case key.SwitchDirect:
		how = "without the proxy (server.proxy = false) a switch stops it before the new engine starts"
	case key.SwitchDrain:
		fix += `, or, where two engines fit in GPU memory, set server.switch = "overlap", which tries it beside the serving engine`
	}
	return "", exitcode.Bad(fmt.Errorf("%s: %s%s; the serving engine does not run it, and %s: it is not stopped for a start known to fail: remove the flag or fix its spelling in engine.args%s", where, u.Why(), more, how, fix))
}

// stopsFirst says whether a switch in mode stops the serving engine
// before the new one starts: drain and direct (no proxy) do; overlap
// starts the new one beside it, and alone has nothing serving. An
// unresolved auto is taken as drain, its safe choice.
func stopsFirst(mode key.Switch) bool {
	return mode != key.SwitchOverlap && mode != key.SwitchAlone
}

// argsSource is where an engine argument was given: the profile's
// engine.args (its file:line) when they hold it, else the arguments as
// the settings name them.
func argsSource(s config.Settings, name string) string {
	for _, a := range s.ProfileArgs.Value {
		if n, _, _ := strings.Cut(a, "="); n == name {
			return s.ProfileArgs.Src.String()
		}
	}
	return s.EngineArgs.Src.String()
}

// binaryMissing is the refusal of an engine binary, bin, not found: where
// it was looked for, and where it was set when an operator set it. The
// sim's binary is a speclaunch, this one unless set.
func binaryMissing(s config.Settings, bin string) error {
	if !s.EngineBinary.Set() {
		return fmt.Errorf("engine binary %q not found (looked up %q on PATH); install %s or set engine.binary in the profile (--engine-binary, MLXCEL_ENGINE_BINARY)", bin, bin, s.Engine.Value)
	}
	where, fix := "no executable file at that path", fmt.Sprintf("install %s there or fix the path", s.Engine.Value)
	if !strings.ContainsRune(bin, os.PathSeparator) {
		where, fix = "looked up on PATH", fmt.Sprintf("install %s or give its path", s.Engine.Value)
	}
	if s.Engine.Value == key.Sim {
		fix = "the sim engine runs a speclaunch binary: fix the path, or unset it to run this speclaunch"
	}
	return fmt.Errorf("engine binary %q not found (%s): %s; %s", bin, s.EngineBinary.Src, where, fix)
}

// bindFix is what to do when the public address cannot be bound, by why.
// unavailable is the error of an address that cannot be bound: the port
// where the port is at fault (taken, privileged), else the host (it does
// not resolve, or is not this machine's), with bindFix's fix; then says
// where the proxy stays, for a reload ("" at start).
func unavailable(host string, port int, err error, then string) error {
	what := fmt.Sprintf("port %d on %s is not available", port, host)
	if !errors.Is(err, syscall.EADDRINUSE) && !errors.Is(err, syscall.EACCES) {
		what = fmt.Sprintf("host %s cannot be listened on (port %d)", host, port)
	}
	return exitcode.Bad(fmt.Errorf("%s (%w)%s; %s", what, err, then, bindFix(err)))
}

func bindFix(err error) string {
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return "stop what holds it or set --port / server.port / LLAMA_ARG_PORT"
	case errors.Is(err, syscall.EACCES):
		return "ports below 1024 need privileges: pick one from 1024 up with --port / server.port / LLAMA_ARG_PORT"
	}
	return "this host cannot listen on that address: set --host / server.host / LLAMA_ARG_HOST to one of its own (127.0.0.1, 0.0.0.0)"
}

// PortFree checks that nothing listens on host:port now, by binding it
// for a moment.
func PortFree(host string, port int) error {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return err
	}
	return ln.Close()
}

// checkModelPath refuses a model path the engine cannot load: missing
// (unless the engine fetches it by name), or a FIFO, socket or device (the
// engine would block on it or read it without end); for llama.cpp also a
// directory, since llama-server's -m takes the .gguf file itself, and a
// file that is empty, not readable by this user or not GGUF (ggufProblem).
func checkModelPath(e key.Engine, what, path, src string) error {
	fi, err := os.Stat(path)
	if err != nil {
		if key.FetchesModel(e, path) {
			return nil
		}
		if to, ok := safefile.Nowhere(path, err); ok {
			return exitcode.Bad(fmt.Errorf("%s %s (%s) is a symlink %s: remove it or give another path", what, shown(path), src, to))
		}
		fix := "check the path"
		switch {
		case errors.Is(err, fs.ErrNotExist):
			fix = "no such file: check the path (a relative one is read from the directory speclaunch runs in, or the profile's for model.path)"
		case errors.Is(err, fs.ErrPermission):
			fix = "a directory on the path cannot be entered by this user: make it searchable (chmod a+x), or run speclaunch as a user who can"
		}
		if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
			err = pe.Err // its path is said above, quoted; os's would repeat it raw
		}
		return exitcode.Bad(fmt.Errorf("%s %s (%s): %s: %w", what, shown(path), src, fix, err))
	}
	m := fi.Mode()
	switch {
	case m.IsRegular() && e == key.LlamaCpp:
		return ggufProblem(what, path, src, fi.Size())
	case m.IsRegular():
		return nil
	case m.IsDir() && e != key.LlamaCpp:
		return nil
	case m.IsDir():
		return exitcode.Bad(fmt.Errorf("%s %s (%s) is a directory: llama-server loads a .gguf file; give the path of the file itself", what, shown(path), src))
	}
	return exitcode.Bad(fmt.Errorf("%s %s (%s) is %s, not a model file or directory; give the path of the model itself", what, shown(path), src, safefile.Kind(m)))
}

// startHeadline is the start line's headline: for a schedule of several
// widths, the width the engine starts with, for the bucket of the load its
// plan was built at, then the schedule (p.Headline). The schedule alone
// read "width 5 at 1-3, off at 4+" where the follower started speculation
// off for 4+.
func startHeadline(p *plan.Plan) string {
	if s := p.Resolution.Schedule; len(s) <= 1 || s.IsFlat() || p.RunsOneWidth() {
		return p.Headline() // one width, said as such
	}
	return briefHeadline(p) + ", of the schedule " + p.Headline()
}

// briefHeadline is what the engine runs: its width, and the bucket it runs
// it for under a schedule of several; a width switch's start headline,
// whose reason the adaptive loop's or the follower's line gave when it
// asked for the switch (or, for the previous settings started again after
// the switch failed, the failure's line just before).
func briefHeadline(p *plan.Plan) string {
	r := p.Resolution
	runs := fmt.Sprintf("draft width %d", r.Width)
	if r.Source == width.Off {
		runs = "speculation off"
	}
	if s := r.Schedule; len(s) > 1 && !s.IsFlat() && !p.RunsOneWidth() {
		runs += " for " + schedule.InFlight(s.At(r.Load).Range())
	}
	return runs
}

// logPlan writes the one startup line: width, source, reason, entry and
// pin, the facts used, and the engine command. The reason is an attribute
// only where the headline does not already say it, and a width switch
// (brief: the adaptive loop's or the schedule's, which change the width
// only, briefStart) says neither its reason, which the line before it
// gave, nor the facts that did not change: an adaptive switch logged its
// reason four times in 27 lines (an H100 run's log,
// docs/benchmark_results/follow/h100-2026-12-07d/serve-A1.log).
func logPlan(log *slog.Logger, p *plan.Plan, msg string, brief bool, extra ...any) {
	r, f := p.Resolution, p.Facts
	head := startHeadline(p)
	if brief {
		head = briefHeadline(p)
	}
	attrs := []any{"width", r.Width, "width_source", string(r.Source)}
	if r.Source == width.Off {
		attrs = []any{"speculation", "off"}
	}
	if !brief && !strings.Contains(head, "("+r.Reason) {
		attrs = append(attrs, "reason", r.Reason)
	}
	if r.Entry != nil {
		attrs = append(attrs, "entry", r.Entry.ID, "pin", r.Entry.Pin, "record", r.Entry.RecordPath())
	}
	switch {
	case r.IsOperator() && p.Settings.Schedule.Set():
		attrs = append(attrs, "from", p.Settings.Schedule.Src.String())
	case r.IsOperator():
		attrs = append(attrs, "from", p.Settings.Width.Src.String())
	}
	if s := r.Schedule; len(s) > 1 && !s.IsFlat() {
		attrs = append(attrs, "schedule", s.String(), "bucket", s.At(r.Load).Range())
	}
	if !brief {
		attrs = append(attrs, "engine", string(p.Settings.Engine.Value), "drafter", string(f.Drafter))
		if f.DrafterFrom != "" && r.Source != width.Off {
			attrs = append(attrs, "drafter_from", f.DrafterFrom) // the draft model, or the target's own layers
		}
		attrs = append(attrs, "capability", f.CapabilityStr, "quant", string(f.Quant))
	}
	attrs = append(attrs, "cmd", plan.ShellJoin(p.Launch.Argv))
	attrs = append(attrs, extra...)
	log.Info(msg+": "+head, attrs...)
	for _, n := range p.Notes {
		log.Info(n)
	}
	for _, w := range p.Warnings {
		log.Warn(w)
	}
}

// shown is a path as an error says it: as given, or Go-quoted where it
// holds a newline or another character that would break the line.
func shown(path string) string { return quote.Text(path, max(len(path), quote.Max)) }

// ggufProblem refuses a regular file llama-server cannot load as a GGUF
// model: empty (a download that did not finish), not readable by this
// user, or not starting with the GGUF magic (a safetensors file, an HTML
// error page saved as .gguf), or cut short before its fixed header ends or
// declaring counts its size cannot hold. The first shard of a split GGUF
// is a GGUF file and passes. Only the fixed header's 24 bytes are read.
func ggufProblem(what, path, src string, size int64) error {
	const fix = "llama-server loads a GGUF model file: give the path of the .gguf file itself"
	said := shown(path)
	if size == 0 {
		return exitcode.Bad(fmt.Errorf("%s %s (%s) is empty: %s (a download that did not finish leaves an empty file: fetch it again)", what, said, src, fix))
	}
	// safefile: a FIFO swapped in after the caller's Stat is refused, not
	// waited on.
	f, err := safefile.Open(context.Background(), what, path, checkpoint.GGUFHeaderSize)
	if err != nil {
		if errors.Is(err, fs.ErrPermission) {
			return exitcode.Bad(fmt.Errorf("%s %s (%s) is not readable by this user: %v; make it readable (chmod a+r), or run speclaunch as a user who can read it", what, said, src, fs.ErrPermission))
		}
		return exitcode.Bad(fmt.Errorf("%s (%s): %w", what, src, err))
	}
	defer f.Close()
	magic := make([]byte, len(checkpoint.GGUFMagic))
	n, err := io.ReadFull(f, magic)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return exitcode.Bad(fmt.Errorf("%s %s (%s) cannot be read: %v; %s", what, said, src, err, fix))
	}
	if string(magic[:n]) != checkpoint.GGUFMagic {
		return exitcode.Bad(fmt.Errorf("%s %s (%s) is not a GGUF file (it starts with %s, not %q): %s; convert a Hugging Face checkpoint with llama.cpp's convert_hf_to_gguf.py", what, said, src, quote.Quoted(string(magic[:n]), 0), checkpoint.GGUFMagic, fix))
	}
	// A file cut short (a copy or download that stopped) or corrupt at its
	// start, which llama-server fails to load with an exit code of its own.
	if err := checkpoint.GGUFHeaderProblem(io.MultiReader(bytes.NewReader(magic), f), size); err != nil {
		return exitcode.Bad(fmt.Errorf("%s %s (%s) is not a whole GGUF file (%v): a copy or download cut short leaves one: fetch or copy it again", what, said, src, err))
	}
	return nil
}
