package cli

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// Issue 33: text log lines of 300 to 900 characters (the effective
// settings, every switch's "starting engine" with its command line, a
// failed start with the engine's output as \n). Every text line fits
// screenWidth; the long attributes follow on lines of their own; JSON
// keeps each record one line with every field.
func TestTextLinesFitTheScreen(t *testing.T) {
	var buf bytes.Buffer
	log := newLogger(&buf, "text", "info", func(string) string { return "" })
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
	newLogger(&js, "json", "info", nil).Info("starting engine", "cmd", argv)
	if strings.Count(js.String(), "\n") != 1 || !strings.Contains(js.String(), argv) {
		t.Errorf("JSON does not keep the whole line: %s", js.String())
	}
}
