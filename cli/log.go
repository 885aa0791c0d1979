package cli

import (
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/lmittmann/tint"
	"golang.org/x/term"
)

// newLogger builds the launcher's logger. tint does no terminal or NO_COLOR
// detection itself: colour only when the writer is a terminal, TERM is not
// dumb and NO_COLOR is empty (no-color.org), or when format is "color".
func newLogger(w io.Writer, format, level string, getenv func(string) string) *slog.Logger {
	var lv slog.Level
	switch level {
	case "debug":
		lv = slog.LevelDebug
	case "warn":
		lv = slog.LevelWarn
	case "error":
		lv = slog.LevelError
	}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lv}))
	}
	color := format == "color"
	if format == "auto" {
		color = isTTY(w) && getenv("NO_COLOR") == "" && getenv("TERM") != "dumb"
	}
	tf := time.RFC3339
	if color {
		tf = time.TimeOnly
	}
	return slog.New(tint.NewTextHandler(w, &tint.Options{Level: lv, NoColor: !color, TimeFormat: tf}))
}

func isTTY(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
