package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/speclaunch/speclaunch/internal/config"
	"github.com/speclaunch/speclaunch/internal/secret"
)

// Issue 33: text log lines of 300 to 900 characters (the effective
// settings, every switch's "starting engine" with its command line, a
// failed start with the engine's output as \n). Every text line fits
// screenWidth; the long attributes follow on lines of their own; JSON
// keeps each record one line with every field.
func TestTextLinesFitTheScreen(t *testing.T) {
	var buf bytes.Buffer
	log := newLogger(&buf, nil, "text", "info", func(string) string { return "" })
	argv := "/usr/bin/llama-server -m /models/" + strings.Repeat("q", 300) + ".gguf --spec-type draft-simple --port 40000"
	settings := settingsAttrs(map[string]Setting{
		"engine": {Value: "sim", Source: "profile p.toml:2"}, "model": {Value: strings.Repeat("m", 150), Source: "flag --model"},
		"port": {Value: 8080, Source: "flag --port"}, "host": {Value: "0.0.0.0", Source: "env LLAMA_ARG_HOST"},
	}, "text")
	log.Info("effective settings", settings...)
	log.Info("starting engine for the new settings: draft width 6 (operator override)", "width", 6, "engine", "sim", "cmd", argv)
	log.Error("engine failed to start", "err", errors.New("exit 1; its last lines:\n"+strings.Repeat("error: unknown argument --bogus\n", 30)))
	log.Info("ready", "url", "http://127.0.0.1:4000", "pid", 42)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	for _, l := range lines {
		if n := utf8.RuneCountInString(l); n > screenWidth {
			t.Errorf("a %d-character line: %s", n, l)
		}
	}
	out := buf.String()
	for _, want := range []string{"  cmd: /usr/bin/llama-server -m /models/qqq", "characters; --log-format json keeps it)", "  err: exit 1; its last lines:", "more lines (--log-format json keeps them)", `ready url=http://127.0.0.1:4000 pid=42`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	var js bytes.Buffer
	newLogger(&js, nil, "json", "info", nil).Info("starting engine", "cmd", argv)
	if strings.Count(js.String(), "\n") != 1 || !strings.Contains(js.String(), argv) {
		t.Errorf("JSON does not keep the whole line: %s", js.String())
	}
}

// Issue 33: an engine's own lines, relayed among the launcher's, ran to
// 300 characters and more. In text they fit screenWidth with the cut said
// (colour codes dropped first, so no cut escape colours the rest); at
// --log-level debug, in JSON and with --raw-engine-output they are whole.
func TestEngineLinesFitTheScreen(t *testing.T) {
	long := "0.01.852.097 W srv  llama_server: \x1b[33m" + strings.Repeat("a very long engine line ", 20) + "\x1b[0m end"
	var s config.Settings
	s.LogFormat.Value, s.LogLevel.Value = "text", "info"
	text := func(s config.Settings) string {
		o := engineOptions(&Env{}, s, 2)
		if o.Format == nil || o.Raw { // instance.Start drops Format when Raw
			return o.Prefix + long + "\n" // supervise's prefix path: the line whole
		}
		return string(o.Format("stderr", long))
	}
	got := text(s)
	if n := utf8.RuneCountInString(strings.TrimSuffix(got, "\n")); n > screenWidth || !strings.HasPrefix(got, "engine 2 | 0.01.852.097 W srv  llama_server: a very long") ||
		!strings.Contains(got, "… (+") || !strings.Contains(got, "chars; whole at --log-level debug, --log-format json)") || strings.Contains(got, "\x1b") {
		t.Errorf("text, %d characters: %q", n, got)
	}
	if short := string(engineLineText("engine 1 | ", "\x1b[32mready\x1b[0m")); short != "engine 1 | \x1b[32mready\x1b[0m\n" {
		t.Errorf("a short line changed: %q", short)
	}
	for _, set := range []func(*config.Settings){
		func(s *config.Settings) { s.LogLevel.Value = "debug" },
		func(s *config.Settings) { s.LogFormat.Value = "json" },
		func(s *config.Settings) { s.RawEngineOutput.Value = true },
	} {
		c := s
		set(&c)
		got := text(c)
		if c.LogFormat.Value == "json" {
			var rec struct{ Text string }
			json.Unmarshal([]byte(got), &rec)
			got = rec.Text
		}
		if !strings.Contains(got, strings.Repeat("a very long engine line ", 20)) {
			t.Errorf("%s/%s raw=%v: not whole: %q", c.LogFormat.Value, c.LogLevel.Value, c.RawEngineOutput.Value, got)
		}
	}
}

// Issue 33: a failed start's error carries the engine's last lines; in
// text each fits the screen, in JSON the message keeps them whole.
func TestErrorTailFitsTheScreen(t *testing.T) {
	tail := "  error: " + strings.Repeat("x", 350) + " the end"
	err := errors.New("sim failed to start: process exited with code 1 while starting; last output:\n" + tail)
	var buf bytes.Buffer
	report(&buf, err, nil)
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if n := utf8.RuneCountInString(l); n > screenWidth {
			t.Errorf("a %d-character line: %s", n, l)
		}
	}
	if !strings.Contains(buf.String(), "speclaunch: error: sim failed to start") || !strings.Contains(buf.String(), "(367 characters; --log-format json keeps it)") {
		t.Errorf("text:\n%s", buf.String())
	}
	buf.Reset()
	reportJSON(&buf, err)
	if !strings.Contains(buf.String(), strings.Repeat("x", 350)+" the end") {
		t.Errorf("JSON cut the line:\n%s", buf.String())
	}
}

// A message longer than a line (a warning naming a file and its fix) is
// wrapped at spaces, every word kept; its attributes follow on their own.
func TestLongMessageWraps(t *testing.T) {
	var buf bytes.Buffer
	log := newLogger(&buf, nil, "text", "info", func(string) string { return "" })
	msg := "/models/" + strings.Repeat("deep/", 20) + "config.json: block_size -1 is negative: no width is read from it, nor the kind from model_type qwen3_5_mtp (so dflash); set a width 2 to 256 or remove the key"
	log.Warn(msg, "engine", "mlxcel")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	var words []string
	for i, l := range lines {
		if n := utf8.RuneCountInString(l); n > screenWidth {
			t.Errorf("a %d-character line: %s", n, l)
		}
		_, text, _ := strings.Cut(l, "WRN ")
		if i < len(lines)-1 {
			words = append(words, strings.TrimSpace(text))
		} else if !strings.Contains(l, "engine: mlxcel") {
			t.Errorf("last line %q, want the attribute", l)
		}
	}
	if len(lines) < 3 || strings.Join(words, " ") != msg {
		t.Errorf("the message is not whole across %d lines:\n%s", len(lines), buf.String())
	}
}

// An error attribute longer than a line is wrapped at spaces, not cut:
// its end is the fix (a reload of a profile over its cap lost "check that
// this is the file you meant"). One of very many lines keeps its first
// lines and its last two, saying how many went.
func TestErrorAttrWraps(t *testing.T) {
	var buf bytes.Buffer
	log := newLogger(&buf, nil, "text", "info", func(string) string { return "" })
	msg := "the profile changed and cannot be used: profile /srv/" + strings.Repeat("d", 40) + "/profiles-copy/demo.toml: file is larger than 1 MiB (1048576 bytes), the cap for a profile; check that this is the file you meant (caps: docs/file-limits.md)"
	log.Error("reload rejected; the engine keeps running with the previous settings", "err", errors.New(msg))
	many := strings.Repeat("engine line\n", 40) + "hint: pass --ctx-size 4096"
	log.Error("engine failed to start", "err", errors.New(many))
	out := buf.String()
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if n := utf8.RuneCountInString(l); n > screenWidth {
			t.Errorf("a %d-character line: %s", n, l)
		}
	}
	joined := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{"check that this is the file you meant (caps: docs/file-limits.md)", "… 30 more lines (--log-format json keeps them)", "hint: pass --ctx-size 4096"} {
		if !strings.Contains(joined, want) {
			t.Errorf("the text output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "characters; --log-format json keeps it") {
		t.Errorf("an error was cut:\n%s", out)
	}
}

// An error and its hint printed at exit fit the screen, wrapped at spaces
// with every word kept (issue 33: a 250-character error line).
func TestReportWrapsToTheScreen(t *testing.T) {
	words := strings.Repeat("the drafter's config.json declares block_size 1000000000 ", 6)
	var b strings.Builder
	code := report(&b, usage(errors.New(strings.TrimSpace(words)), "set block_size to a width from 2 to 256 in /models/some/long/path/config.json, or remove the key: "+words), nil)
	if code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
	out := b.String()
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if n := len([]rune(l)); n > screenWidth {
			t.Errorf("a line of %d characters (at most %d):\n%s", n, screenWidth, l)
		}
	}
	if got := unwrap(out); !strings.Contains(got, strings.TrimSpace(words)) || !strings.Contains(got, "speclaunch: hint: set block_size") {
		t.Errorf("a word was lost in the wrap:\n%s", out)
	}
}

// A key is redacted before a text line is cut or wrapped: cut inside it,
// each piece matched nothing and showed (a hostile-input campaign: 18 of a
// key's 20 characters in a cut engine line, a 164-character key in two
// pieces of a wrapped error, 14 in a cut failed-start tail; a review: the
// error that ends the command, cut by report).
func TestNoCutShowsAKey(t *testing.T) {
	const key = "sk-proj-gVt8qDFMyhfAza03Lmj2tuPh1CM8eT2JhTfSxlBgKq7ZpXw3mN8vLr2TzzQ9Zx81Kq7ZpXw3mN8vLr2TzzQ9aa55gVt8qDFMyhfAza03Lmj2tuPh1CM8eT2JhTfSxlBg0123456789abcdefghijklmnopqrstuv"
	var red secret.Redactor
	red.Add(key)
	var buf bytes.Buffer
	log := newLogger(red.Writer(&buf), &red, "text", "info", func(string) string { return "" })
	for _, at := range []int{100, 130, 150, 160, 190} {
		pad := strings.Repeat("x", at)
		log.Info(pad + " api_key=" + key + " " + strings.Repeat("y", 300))                                       // a message wrapped
		log.Error("reload rejected", "err", errors.New("engine exited: config: "+pad+" api_key="+key+" host=h")) // an error wrapped
		log.Info("engine failed to start", "output", pad+" 'api_key': ['"+key+"'], "+strings.Repeat("z", 200))   // an attribute cut
	}
	// An engine line is redacted by supervise before it is cut (Secrets).
	var s config.Settings
	s.LogFormat.Value, s.LogLevel.Value = "text", "info"
	if o := engineOptions(&Env{secrets: &red}, s, 1); o.Secrets != &red {
		t.Error("the engine's lines are not redacted before they are cut: instance.Options.Secrets unset")
	}
	// A failed start's tail, cut by report; a key of no known shape, so
	// that only the redactor can catch it.
	const plain = "Zx81Kq7ZpXw3mN8vLr2TzzQ9aa55Kq7ZpXw3mN8vLr2Tzz"
	red.Add(plain)
	report(red.Writer(&buf), errors.New("sim failed to start; last output:\n  "+strings.Repeat("x", 135)+" "+plain+" "+strings.Repeat("y", 100)), &red)
	out := buf.String()
	for i := 0; i+8 <= len(plain); i += 4 {
		if part := plain[i : i+8]; strings.Contains(out, part) {
			t.Fatalf("%q of the key shows:\n%s", part, out)
		}
	}
	for i := 0; i+8 <= len(key); i += 4 {
		if part := key[i : i+8]; strings.Contains(out, part) {
			t.Fatalf("%q of the key shows:\n%s", part, out)
		}
	}
	if !strings.Contains(out, secret.Mask(key)) {
		t.Errorf("no mask of the key in:\n%s", out)
	}
}

// writeCalls keeps each Write apart, as a reader polling the log sees it.
type writeCalls struct {
	mu    sync.Mutex
	calls []string
}

func (w *writeCalls) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls = append(w.calls, string(p))
	return len(p), nil
}

// A record split into lines reaches the writer in one Write: a reader
// never sees its first line without its cause, and two goroutines'
// records never interleave.
func TestRecordIsOneWrite(t *testing.T) {
	var w writeCalls
	// Two loggers on one stream, as bench makes on stderr (Env.logTo).
	out := (&Env{Stderr: &w}).logTo()
	logs := []*slog.Logger{newLogger(out, nil, "text", "info", func(string) string { return "" }), newLogger(out, nil, "text", "info", func(string) string { return "" })}
	var wg sync.WaitGroup
	for g := range 4 {
		log := logs[g%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				log.Error("new settings cannot start", "err", errors.New(strings.Repeat("port busy ", 30)), "g", g, "i", i)
			}
		}()
	}
	wg.Wait()
	if len(w.calls) != 80 {
		t.Errorf("%d writes for 80 records", len(w.calls))
	}
	for _, c := range w.calls {
		if strings.Count(c, "new settings cannot start") != 1 || strings.Count(c, "  err: port busy") != 1 {
			t.Fatalf("a write that is not one whole record:\n%q", c)
		}
	}
}

// A setting whose value or source holds a newline or another control
// character is quoted on the text log's settings line, as the engine:
// line quotes it: a model path "new\nline.gguf" split the line in two
// ("model: new" then "line.gguf (flag --model)"). Printable values,
// however long, show as they are.
func TestSettingsLinesQuoteControlCharacters(t *testing.T) {
	long := strings.Repeat("m", 150)
	for _, tc := range []struct {
		name string
		s    Setting
		want string
	}{
		{"a newline", Setting{Value: "new\nline.gguf", Source: "flag --model"}, `"new\nline.gguf" (flag --model)`},
		{"an escape", Setting{Value: "m\x1b[31m.gguf", Source: "env LLAMA_ARG_MODEL"}, `"m\x1b[31m.gguf" (env LLAMA_ARG_MODEL)`},
		{"in the source", Setting{Value: "t.gguf", Source: "profile /tmp/a\nb/p.toml:3"}, `t.gguf ("profile /tmp/a\nb/p.toml:3")`},
		{"printable", Setting{Value: "my model.gguf", Source: "flag --model"}, "my model.gguf (flag --model)"},
		{"long", Setting{Value: long, Source: "flag --model"}, long + " (flag --model)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			attrs := settingsAttrs(map[string]Setting{"model": tc.s}, "text")
			if len(attrs) != 2 || attrs[1] != tc.want {
				t.Fatalf("attrs %q, want model %q", attrs, tc.want)
			}
			var buf bytes.Buffer
			newLogger(&buf, nil, "text", "info", func(string) string { return "" }).Info("effective settings", attrs...)
			for _, l := range strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n") {
				if !strings.Contains(l, "effective settings") && !strings.Contains(l, "  model: ") {
					t.Errorf("a line of its own, split from the setting: %q in\n%s", l, buf.String())
				}
			}
		})
	}
}

// An attribute said on a line of its own has its control characters
// escaped: a drafter path with an ESC reached the terminal raw.
func TestOwnLineAttrEscapesControls(t *testing.T) {
	var buf bytes.Buffer
	log := newLogger(&buf, nil, "text", "info", func(string) string { return "" })
	log.Info("starting engine", "cmd", strings.Repeat("c", 100), "drafter_from", "/models/"+strings.Repeat("d", 100)+"\x1b[31m.gguf")
	if out := buf.String(); strings.Contains(out, "\x1b") || !strings.Contains(out, `\x1b[31m.gguf`) {
		t.Errorf("log:\n%q", out)
	}
}

// A logger's own attributes (component=adapt) end a long message, not
// each of its lines: "… no component=adapt" / "  trial: …" broke the
// sentence and a grep for it (an operator's pass).
func TestLongMessageKeepsItsAttrsToTheEnd(t *testing.T) {
	var buf bytes.Buffer
	log := newLogger(&buf, nil, "text", "info", func(string) string { return "" }).With("component", "adapt")
	log.Info("adapt: stay at width 1 at 2-4 requests in flight: " + strings.Repeat("width 1 measured +26.7% over default width 16; ", 6) + "no trial")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	for i, l := range lines {
		if has := strings.Contains(l, "component=adapt"); has != (i == len(lines)-1) {
			t.Errorf("line %d of %d has component=adapt %v: %s", i+1, len(lines), has, l)
		}
	}
	if len(lines) < 2 {
		t.Fatalf("the message did not wrap:\n%s", buf.String())
	}
}
