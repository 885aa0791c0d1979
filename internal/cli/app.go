// Package cli is speclaunch's command line: a Kong application with one file
// per command. Main maps every error to an exit code: 2 for bad input of any
// kind (flag, env, profile, policy, checkpoint), 1 for a failed check or a
// runtime failure, 3 for a width mismatch under --strict-width, and the
// engine's own exit code when serve's engine exits.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"syscall"

	"github.com/alecthomas/kong"
	"github.com/speclaunch/speclaunch/internal/exitcode"
	"github.com/speclaunch/speclaunch/internal/plan"
	"github.com/speclaunch/speclaunch/internal/secret"
)

// App is the command tree.
type App struct {
	Resolve ResolveCmd `cmd:"" help:"Print the draft width a server would run at, where it came from and why, and the exact engine command line; starts nothing."`
	Serve   ServeCmd   `cmd:"" help:"Resolve the width, start the engine with it, verify it, supervise it, and reload on profile or policy changes."`
	Bench   BenchCmd   `cmd:"" help:"Sweep draft widths against a classic arm on a real engine and write a record (.md, .json, .svg)."`
	Tune    TuneCmd    `cmd:"" help:"Measure this model pair at several loads and write the schedule it earns into the tuned layer ($XDG_CONFIG_HOME/speclaunch/tuned.toml, else ~/.config/speclaunch/tuned.toml; or the last --policy FILE), which serve and resolve read (docs/schedule.md)."`
	Policy  PolicyCmd  `cmd:"" help:"Show, explain and check the width policy."`
	Profile ProfileCmd `cmd:"" help:"Write, show and validate profiles."`
	Version VersionCmd `cmd:"" help:"Print the version, commit and Go version."`

	VersionFlag kong.VersionFlag `name:"version" help:"Print the version and exit (as llama-server --version)."`
}

// Env is what commands get bound to instead of globals.
type Env struct {
	Stdout, Stderr io.Writer
	Getenv         func(string) string
	PolicyTOML     []byte // the embedded policy.toml
	// Records are the embedded records the embedded policy cites (nil in
	// tests that run without them): policy check falls back to them.
	Records     fs.FS
	Passthrough []string
	// spelled is how each launcher flag given by an alias was typed
	// (argvPlan.spelled), for config.Input.Spelled.
	spelled map[string]string
	Ctx     context.Context
	Deps    *plan.Deps // nil = the host's real probes
	parent  context.Context
	// logJSON: the command logs JSON (--log-format json), so its final
	// error and hint are one JSON line too (reportJSON).
	logJSON bool
	// secrets are the API keys and secret env values met so far (build
	// adds them); Stdout and Stderr pass through it, so no byte the
	// launcher writes shows one.
	secrets *secret.Redactor
	// logOut is Stderr as the command's loggers write it (logTo): one
	// record at a time, whichever logger.
	logOut *recordWriter
	// readKeyFile reads an API key file for seedKeyFiles; nil reads it
	// with safefile (tests count the reads).
	readKeyFile func(path string) ([]byte, error)

	kctx *kong.Context
}

// exitError carries an exit code and, for bad input, a hint line.
type exitError = exitcode.Error

// usage wraps bad input: exit code 2.
func usage(err error, hint string) error { return &exitError{Code: 2, Err: err, Hint: hint} }

// exitCode makes a plain exit with a code (e.g. the engine's).
func exitCode(code int, err error) error { return exitcode.New(code, err) }

// Embedded is what the binary carries: the policy, and the records its
// entries cite.
type Embedded struct {
	Policy  []byte
	Records fs.FS
}

// Main runs the CLI and returns the process exit code.
func Main(args []string, emb Embedded, stdout, stderr io.Writer) int {
	survivePipe()
	return run(context.Background(), args, emb, stdout, stderr, nil)
}

// survivePipe keeps a closed stdout or stderr from killing the process:
// Go dies of SIGPIPE on a write to a broken pipe on fd 1 or 2 unless the
// signal is asked for, so a reader that stops early
// (`tune --json | head -3`) would end a measurement, and a log reader
// that goes away a serve, with exit 141 and nothing said. Asked for, a
// write returns EPIPE and the run goes on; a handler, unlike an ignored
// signal, is not inherited by the engines it starts.
func survivePipe() {
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
}

// MainContext is Main with a context (cancelling it stops serve and bench
// as a signal would) and optional fact probes, for tests; it carries the
// policy without records.
func MainContext(parent context.Context, args []string, policyTOML []byte, stdout, stderr io.Writer, deps *plan.Deps) int {
	return run(parent, args, Embedded{Policy: policyTOML}, stdout, stderr, deps)
}

func run(parent context.Context, args []string, emb Embedded, stdout, stderr io.Writer, deps *plan.Deps) int {
	return runEnv(parent, args, emb, stdout, stderr, deps, os.Getenv)
}

// runEnv is run with the settings' and the tuned layer's variables read
// through getenv: a test gives its own (t.Setenv would keep it from
// running in parallel with the others).
func runEnv(parent context.Context, args []string, emb Embedded, stdout, stderr io.Writer, deps *plan.Deps, getenv func(string) string) int {
	out := &outWriter{Writer: stdout}
	return out.settle(runCommand(parent, args, emb, out, stderr, deps, getenv), stderr)
}

// outWriter keeps the first error writing a command's output: a command
// whose output did not reach a full disk had exited 0 with nothing said.
// A reader that went away (EPIPE, `resolve | head -1`) is no failure.
type outWriter struct {
	io.Writer
	err error
}

func (w *outWriter) Write(p []byte) (int, error) {
	n, err := w.Writer.Write(p)
	if err != nil && w.err == nil {
		w.err = err
	}
	return n, err
}

// Unwrap gives the writer beneath (terminal detection).
func (w *outWriter) Unwrap() io.Writer { return w.Writer }

// settle is the exit code of a command that returned code: 1 with the
// error said where it succeeded but its output failed other than by a
// closed pipe.
func (w *outWriter) settle(code int, stderr io.Writer) int {
	if code != 0 || w.err == nil || errors.Is(w.err, syscall.EPIPE) {
		return code
	}
	fmt.Fprintf(stderr, "speclaunch: error: writing output: %v\n", w.err)
	return 1
}

// runCommand is runEnv's command, its output kept by outWriter.
func runCommand(parent context.Context, args []string, emb Embedded, stdout, stderr io.Writer, deps *plan.Deps, getenv func(string) string) int {
	// The simulated engine is this binary re-executed; its argv is
	// mlxcel-server's, which Kong must not see.
	if len(args) > 0 && args[0] == simCommand {
		return runSim(args[1:], stdout, stderr)
	}
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	defer stop()
	secrets := &secret.Redactor{}
	stdout, stderr = secrets.Writer(stdout), secrets.Writer(stderr)
	env := &Env{Stdout: stdout, Stderr: stderr, Getenv: getenv, PolicyTOML: emb.Policy, Records: emb.Records, Ctx: ctx, Deps: deps, parent: parent, secrets: secrets}
	env.seedSecrets(args)

	var app App
	exited := -1
	parser, err := kong.New(&app,
		kong.Name("speclaunch"),
		kong.Vars{"version": versionLine()},
		kong.Description("Launch a speculative-decoding LLM server at the draft width measured to be best for this GPU, weight format and drafter."),
		kong.UsageOnError(),
		kong.ConfigureHelp(kong.HelpOptions{Compact: true, WrapUpperBound: 100}),
		kong.Writers(stdout, stderr),
		kong.Exit(func(code int) { exited = code; panic(kongExit{}) }),
		kong.Bind(env),
		kong.PostBuild(settingsHelp),
		kong.KindMapper(reflect.Bool, onOff{}),
	)
	if err != nil {
		fmt.Fprintf(stderr, "speclaunch: internal error: %v\n", err)
		return 1
	}
	// Before Kong has parsed anything, --log-format json as typed (or
	// MLXCEL_LOG_FORMAT=json) makes a usage error a JSON line as well.
	env.logJSON = logsJSON(typedLogFormat(args), getenv)
	if len(args) == 0 {
		return bareUsage(parser, stderr)
	}
	args = helpCommand(args)
	argv, err := prepass(parser.Model.Node, args)
	if err != nil {
		return env.report(stderr, err)
	}
	args, env.Passthrough, env.spelled = argv.kong, argv.engine, argv.spelled
	code, done := func() (code int, done bool) {
		defer func() {
			if r := recover(); r != nil {
				if _, ok := r.(kongExit); ok {
					code, done = exited, true
					return
				}
				panic(r)
			}
		}()
		kctx, err := parser.Parse(args)
		if werr, failed := helpWriteFailure(err); failed {
			return env.report(stderr, werr), true
		}
		var xe *exitError
		if errors.As(err, &xe) {
			// A command's Validate said the flag and its fix: not Kong's
			// "bench: " before it and its generic hint after.
			return env.report(stderr, xe), true
		}
		if err != nil {
			return env.report(stderr, parseError(parser, args, err)), true
		}
		env.kctx = kctx
		if err := kctx.Run(env, kctx); err != nil {
			return env.report(stderr, err), true
		}
		return 0, true
	}()
	if done {
		return interruptCode(ctx, code)
	}
	return 0
}

// bareUsage answers speclaunch typed alone, as a Kong application that
// needs a command does: its help, on stderr, and exit 2 (before, the terse
// `expected one of "resolve", "serve", ...`).
func bareUsage(parser *kong.Kong, stderr io.Writer) int {
	kctx, err := kong.Trace(parser, nil)
	if err == nil {
		parser.Stdout = stderr
		err = kctx.PrintUsage(false)
	}
	if err != nil {
		fmt.Fprintf(stderr, "speclaunch: error: no command given; run speclaunch --help for the commands\n")
	}
	return 2
}

// helpCommand reads "speclaunch help [COMMAND...]" as "speclaunch
// [COMMAND...] --help", as go help and git help do; other argv is
// returned as it is.
func helpCommand(args []string) []string {
	if len(args) == 0 || args[0] != "help" {
		return args
	}
	return append(slices.Clone(args[1:]), "--help")
}

// helpWriteFailure reads a Parse error that is --help failing to reach
// stdout: not bad input, so not exit 2 and no flags hint. A reader gone
// early (EPIPE, `serve --help | head -1`) ends quietly with exit 0, as
// Unix tools do; any other write error (ENOSPC) is an I/O failure, exit 1.
// The returned error is nil for the quiet end; failed is false for any
// error that is not a failed write.
func helpWriteFailure(err error) (out error, failed bool) {
	var pe *fs.PathError
	if err == nil || !errors.As(err, &pe) || pe.Op != "write" {
		return nil, false
	}
	if errors.Is(pe, syscall.EPIPE) {
		return exitCode(0, nil), true
	}
	return exitCode(1, fmt.Errorf("writing help: %w", pe)), true
}

// parseError is Kong's refusal of args said as bad input with the fix: a
// flag given without its value names what it takes; a command's typo gets
// Kong's did-you-mean and the command's --help; only an unknown flag of a
// command that takes engine arguments is told where engine flags go.
func parseError(parser *kong.Kong, args []string, err error) error {
	pe, ok := err.(*kong.ParseError)
	if !ok || pe.Context == nil {
		return usage(err, "")
	}
	if mv := missingValue(pe); mv != nil {
		return usage(mv, "run with --help for what each flag takes")
	}
	cmd, _ := findCommand(parser.Model.Node, args)
	hint := "run speclaunch --help for the commands"
	if m := kongUnexpected.FindStringSubmatch(err.Error()); m != nil && cmd.Type != kong.CommandNode && commandHints[m[1]] != "" {
		return usage(err, commandHints[m[1]])
	}
	if cmd.Type == kong.CommandNode {
		what := "its flags"
		if slices.ContainsFunc(cmd.Children, func(c *kong.Node) bool { return c.Type == kong.CommandNode }) {
			what = "its commands"
		}
		hint = "run speclaunch " + cmd.Path() + " --help for " + what
	}
	if strings.HasPrefix(err.Error(), "unknown flag") && takesEngineArgs(cmd) {
		hint += "; engine flags llama-server does not list go after --"
	}
	return usage(err, hint)
}

// commandHints answer a command speclaunch does not have, and that
// operators guess, with where it is: Kong's did-you-mean finds no command
// near either name, and "run speclaunch --help" left the guess there.
var commandHints = map[string]string{
	"validate": "did you mean `speclaunch profile validate`?",
	"status":   "speclaunch has no status command: a running serve answers `curl http://HOST:PORT/speclaunch/status` (docs/serving.md, \"/speclaunch/status\")",
}

// kongUnexpected is Kong's refusal of a word that names no command:
// "unexpected argument validate", with ", did you mean …" after it when a
// command is near.
var kongUnexpected = regexp.MustCompile(`^unexpected argument ([^\s,]+)`)

// Kong's words for a flag given without its value: `--port: expected
// string value but got "EOL" (<EOL>)`, or the next flag's name in place of
// "EOL", and `--policy: missing value, expecting "<arg>,..."` for a list.
var (
	kongNoValue   = regexp.MustCompile(`^--([^\s:=]+): expected \S+ value but got "(.*)" \(([^)]*)\)`)
	kongNoListVal = regexp.MustCompile(`^--([^\s:=]+): missing value, expecting `)
)

// missingValue is a flag given without its value, said as the flag's name
// and what it takes (--port needs a value: give --port=PORT), for every
// flag; nil for any other parse error.
func missingValue(pe *kong.ParseError) error {
	name, next := "", ""
	if m := kongNoValue.FindStringSubmatch(pe.Error()); m != nil {
		name = m[1]
		if strings.HasSuffix(m[3], "flag") { // "long flag", "short flag"
			next = m[2]
		}
	} else if m := kongNoListVal.FindStringSubmatch(pe.Error()); m != nil {
		name = m[1]
	} else {
		return nil
	}
	for _, f := range pe.Context.Flags() {
		if f.Name != name {
			continue
		}
		if next != "" {
			return fmt.Errorf("--%s needs a value, and %s after it is a flag: give %s", name, next, f.Summary())
		}
		return fmt.Errorf("--%s needs a value: give %s", name, f.Summary())
	}
	return nil
}

// interruptCode is 128 + the signal that stopped a command, as a shell
// reports it: the commands say 130 (SIGINT) for either, and a container
// runtime stopping one with SIGTERM is told 143.
func interruptCode(ctx context.Context, code int) int {
	if code == 130 && stopSignal(ctx) == syscall.SIGTERM {
		return 143
	}
	return code
}

// stopSignal is the signal that stopped ctx, read from
// os/signal.NotifyContext's cause; 0 for none.
func stopSignal(ctx context.Context) syscall.Signal {
	c := context.Cause(ctx)
	for _, s := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		if c != nil && c.Error() == s.String()+" signal received" {
			return s
		}
	}
	return 0
}

// stopped is what stopped a command, in an operator's words; it is a
// cancellation (errors.Is context.Canceled).
type stopped string

func (s stopped) Error() string        { return string(s) }
func (s stopped) Is(target error) bool { return target == context.Canceled }

// stopCause says what stopped ctx: the signal (stopSignal), else that it
// was interrupted.
func stopCause(ctx context.Context) error {
	switch stopSignal(ctx) {
	case syscall.SIGINT:
		return stopped("interrupted (SIGINT)")
	case syscall.SIGTERM:
		return stopped("stopped by SIGTERM")
	}
	return stopped("interrupted")
}

// withStopCause is ctx with stopCause's words as the cause of its end,
// for a harness that says its context's cause (bench's progress).
func withStopCause(ctx context.Context) (context.Context, func()) {
	c, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() { cancel(stopCause(ctx)) })
	return c, func() { stop(); cancel(nil) }
}

type kongExit struct{}

// report prints err as the command logs: a JSON line under --log-format
// json, else the error and hint lines; it returns the exit code.
func (e *Env) report(w io.Writer, err error) int {
	if e.logJSON {
		return reportJSON(w, err)
	}
	return report(w, err, e.secrets)
}

// report prints an error with its hint and returns the exit code. The
// known secrets are redacted before the lines are wrapped or cut: a key
// cut in two matches the writer's redaction in neither piece.
func report(w io.Writer, err error, secrets *secret.Redactor) int {
	msg, hint, code := explain(err)
	msg, hint = secret.MaskValue(secrets.String(msg)), secret.MaskValue(secrets.String(hint))
	if msg != "" {
		// The lines under the first are an engine's last output (a failed
		// start): cut to the screen, as the engine's lines are in the log.
		first, more, _ := strings.Cut(msg, "\n")
		printWrapped(w, "speclaunch: error: ", first)
		for _, l := range strings.Split(more, "\n") {
			if more != "" {
				fmt.Fprintln(w, clipLine(l, screenWidth))
			}
		}
	}
	if hint != "" {
		printWrapped(w, "speclaunch: hint: ", hint)
	}
	return code
}

// printWrapped prints prefix and s wrapped at spaces to the screen's width,
// every word kept (a path or a fix is never cut), the lines after the
// first indented.
func printWrapped(w io.Writer, prefix, s string) {
	for i, l := range wrapWords(s, screenWidth-len(prefix)) {
		if i == 0 {
			fmt.Fprintf(w, "%s%s\n", prefix, l)
			continue
		}
		fmt.Fprintf(w, "  %s\n", l)
	}
}

// reportJSON is report for a command that logs JSON: one line, as the
// launcher's other log lines (time, level ERROR, msg, source), with the
// hint and the exit code as fields, so that every line of the stream
// parses.
func reportJSON(w io.Writer, err error) int {
	msg, hint, code := explain(err)
	msg, hint = secret.MaskValue(msg), secret.MaskValue(hint)
	attrs := []any{"exit_code", code}
	if hint != "" {
		attrs = append(attrs, "hint", hint)
	}
	if msg != "" || hint != "" {
		newLogger(w, nil, "json", "info", nil).Error(msg, attrs...)
	}
	return code
}

// explain is an error's message, hint and exit code.
func explain(err error) (msg, hint string, code int) {
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.Err != nil {
			msg = ee.Err.Error()
		}
		return msg, ee.Hint, ee.Code
	}
	if errors.Is(err, context.Canceled) {
		// Ctrl-C or SIGTERM, as a shell reports it: 128 + SIGINT; what
		// stopped says so in words, not as Go's "context canceled".
		msg := strings.TrimSuffix(strings.TrimSuffix(err.Error(), context.Canceled.Error()), ": ")
		if msg == "" {
			return "interrupted", "", 130
		}
		return msg + ": interrupted", "", 130
	}
	if isBadInput(err) {
		return err.Error(), hintFor(err), 2
	}
	return err.Error(), "", 1
}

// logTo is where a command's loggers write: Stderr, one whole record at a
// time across all of them (bench has two).
func (e *Env) logTo() io.Writer {
	if e.logOut == nil {
		e.logOut = &recordWriter{w: e.Stderr}
	}
	return e.logOut
}
