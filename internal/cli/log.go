package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/lmittmann/tint"
	"golang.org/x/term"

	"github.com/speclaunch/speclaunch/internal/config"
	"github.com/speclaunch/speclaunch/internal/quote"
	"github.com/speclaunch/speclaunch/internal/secret"
)

// newLogger builds the launcher's logger. tint does no terminal or NO_COLOR
// detection itself: colour only when the writer is a terminal, TERM is not
// dumb and NO_COLOR is empty (no-color.org), or when format is "color".
func newLogger(w io.Writer, secrets *secret.Redactor, format, level string, getenv func(string) string) *slog.Logger {
	var lv slog.Level
	switch level {
	case "debug":
		lv = slog.LevelDebug
	case "warn":
		lv = slog.LevelWarn
	case "error":
		lv = slog.LevelError
	}
	out := recordWriterFor(w)
	if format == "json" {
		// source tells the launcher's lines from the engine's
		// (engineLineJSON); a JSON record is one line, one Write.
		return slog.New(slog.NewJSONHandler(out.w, &slog.HandlerOptions{Level: lv})).With("source", "speclaunch")
	}
	color := format == "color"
	if format == "auto" {
		color = isTTY(out.w) && getenv("NO_COLOR") == "" && getenv("TERM") != "dumb"
	}
	tf := time.RFC3339
	if color {
		tf = time.TimeOnly
	}
	th := tint.NewTextHandler(out, &tint.Options{Level: lv, NoColor: !color, TimeFormat: tf})
	return slog.New(&screenHandler{next: th, bare: th, secrets: secrets, out: out})
}

// logNotices logs the settings' notices at their own level: a warning (an
// API key typed where ps shows it) still shows at --log-level warn.
func logNotices(log *slog.Logger, notices []config.Notice) {
	for _, n := range notices {
		if n.Level == "warn" {
			log.Warn(n.Msg)
		} else {
			log.Info(n.Msg)
		}
	}
}

// logsJSON reports --log-format json, or MLXCEL_LOG_FORMAT=json without
// the flag, before the settings are loaded.
func logsJSON(flag string, getenv func(string) string) bool {
	if flag != "" {
		return strings.TrimSpace(flag) == "json"
	}
	return strings.TrimSpace(getenv("MLXCEL_LOG_FORMAT")) == "json"
}

// typedLogFormat is the value of the last --log-format on the command
// line before "--" ("" when none), read before Kong parses it.
func typedLogFormat(args []string) string {
	v := ""
	for i, a := range args {
		switch {
		case a == "--":
			return v
		case a == "--log-format" && i+1 < len(args):
			v = args[i+1]
		case strings.HasPrefix(a, "--log-format="):
			v = strings.TrimPrefix(a, "--log-format=")
		}
	}
	return v
}

func isTTY(w io.Writer) bool {
	for {
		u, ok := w.(interface{ Unwrap() io.Writer })
		if !ok {
			break
		}
		w = u.Unwrap() // the secret redactor, the output's error keeper
	}
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// engineLineJSON renders one engine output line as a JSON log line, so that
// --log-format json gives a stream where every line is JSON: the time, the
// engine's own level where its line shows one, source "engine", the stream
// (stdout or stderr) and the text, terminal colour codes removed.
func engineLineJSON(n int, stream, line string) []byte {
	text := ansiRE.ReplaceAllString(line, "")
	rec := struct {
		Time   string `json:"time"`
		Level  string `json:"level,omitempty"`
		Source string `json:"source"`
		Engine int    `json:"engine,omitempty"` // which engine: 1, 2, … (two run during an overlap switch)
		Stream string `json:"stream"`
		Text   string `json:"text"`
	}{time.Now().Format(time.RFC3339Nano), engineLevel(text), "engine", n, stream, text}
	b, err := json.Marshal(rec)
	if err != nil { // cannot happen for strings; keep the line anyway
		b = []byte(`{"source":"engine","text":"unprintable line"}`)
	}
	return append(b, '\n')
}

var (
	ansiRE = regexp.MustCompile(`\x1b\[[0-9;]*[A-Za-z]`)
	// llama.cpp 2026: "0.00.003.124 W srv  llama_server: ..." (a time, then
	// one letter: D, I, W, E).
	llamaLevelRE = regexp.MustCompile(`^\d+\.\d+\.\d+\.\d+ ([DIWE]) `)
	// Rust tracing (mlxcel-server): "2026-09-20T10:00:00.123456Z  INFO target: ..."
	// or the level first.
	tracingLevelRE = regexp.MustCompile(`^(?:\d\S*\s+)?(TRACE|DEBUG|INFO|WARN|ERROR)\s`)
	// A plain "error: ..." or "warning: ..." (llama.cpp's argument errors).
	prefixLevelRE = regexp.MustCompile(`^(?i)(error|warning|warn):`)
)

// engineLevel is the slog level name an engine line shows, or "" when it
// shows none (the line is then not guessed at).
func engineLevel(line string) string {
	if m := llamaLevelRE.FindStringSubmatch(line); m != nil {
		return map[string]string{"D": "DEBUG", "I": "INFO", "W": "WARN", "E": "ERROR"}[m[1]]
	}
	if m := tracingLevelRE.FindStringSubmatch(line); m != nil {
		if m[1] == "TRACE" {
			return "DEBUG"
		}
		return m[1]
	}
	if m := prefixLevelRE.FindStringSubmatch(line); m != nil {
		if strings.EqualFold(m[1], "error") {
			return "ERROR"
		}
		return "WARN"
	}
	return ""
}

// settingsAttrs renders every effective setting with its source for the
// one line serve logs at start: in text "engine=\"sim (profile p.toml:2)\"",
// in JSON a "settings" object of {"value", "source"} pairs.
func settingsAttrs(m map[string]Setting, format string) []any {
	if format == "json" {
		var group []any
		for _, k := range sortedKeys(m) {
			group = append(group, slog.Group(k, "value", m[k].Value, "source", m[k].Source))
		}
		return []any{slog.Group("settings", group...)}
	}
	// Text is read by people: the settings someone set, and a count of the
	// rest (all of them: `profile show`, or the JSON line).
	var out []any
	defaults := 0
	for _, k := range sortedKeys(m) {
		if m[k].Source == "default" {
			defaults++
			continue
		}
		v := fmt.Sprint(m[k].Value)
		if l, ok := m[k].Value.([]string); ok && len(l) == 0 {
			v = "(none)"
		}
		if v == "" {
			v = "(unset)"
		}
		// A value or source with a newline or other control character (a
		// path "new\nline.gguf") is quoted, as the engine: line quotes it:
		// the line split in two. Printable ones show as they are, whole.
		out = append(out, k, quote.Text(v, len(v))+" ("+quote.Text(m[k].Source, len(m[k].Source))+")")
	}
	if defaults > 0 {
		out = append(out, "at_defaults", fmt.Sprintf("%d more (speclaunch profile show lists every setting)", defaults))
	}
	return out
}
