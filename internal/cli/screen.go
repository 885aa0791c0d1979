package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/speclaunch/speclaunch/internal/quote"
	"github.com/speclaunch/speclaunch/internal/secret"
)

// Text log lines are read by people: issue 33 counted 17 lines over 300
// characters in one reload run (the effective settings, 897; every
// switch's "starting engine", 687; a failed start with the engine's output
// inside it as \n). screenWidth is what a line may take; about 25 of it
// go to the time and level.
const (
	screenWidth = 200
	screenAttrs = screenWidth - 30 // the message and its attributes
	// screenLines: a value of many lines (an engine's output) shows its
	// first lines; JSON keeps it whole.
	screenLines = 12
	// screenLong: an attribute longer than this goes to a line of its own
	// when the line is too long, before any shorter one does.
	screenLong = 60
)

// screenHandler keeps each text line within screenWidth: the message and
// the attributes that fit stay on the line, in order; each attribute that
// does not fit follows on a line of its own ("  key: value"), a value of
// several lines on as many, and a value longer than a line is cut saying
// how long it was. JSON output is not wrapped: it keeps every field.
type screenHandler struct {
	next slog.Handler
	// bare is next before any WithAttrs or WithGroup: a long message's
	// lines but its last go through it, so that the logger's own
	// attributes (component=adapt) end the message, not each of its lines
	// (an operator's pass: "… no component=adapt" / "  trial: …").
	bare  slog.Handler
	attrs []slog.Attr // from WithAttrs, for measuring: next already has them
	// secrets are the keys the output writer redacts: a record is redacted
	// before it is cut or wrapped, where a key cut in two would match
	// neither half.
	secrets *secret.Redactor
	// out is the writer under next, shared by every handler derived from
	// this one.
	out *recordWriter
}

// recordWriter writes each record's lines in one Write: a record that
// screenHandler splits into lines ("  err: ...") is never interleaved
// with another goroutine's record, nor read with its first line only (a
// reader polling the log saw "new settings cannot start" without its
// cause).
type recordWriter struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
}

// recordWriterFor is w's recordWriter: w itself when it is one, so that
// every logger on one stream (bench makes two on stderr) writes its
// records whole between the others'.
func recordWriterFor(w io.Writer) *recordWriter {
	if rw, ok := w.(*recordWriter); ok {
		return rw
	}
	return &recordWriter{w: w}
}

// Write is called by next only, within record, under mu.
func (rw *recordWriter) Write(p []byte) (int, error) {
	rw.buf = append(rw.buf, p...)
	return len(p), nil
}

// record runs f, which writes one record's lines, and writes them at once.
func (rw *recordWriter) record(f func() error) error {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	err := f()
	if len(rw.buf) > 0 {
		if _, werr := rw.w.Write(rw.buf); err == nil {
			err = werr
		}
	}
	if cap(rw.buf) > 64<<10 {
		rw.buf = nil // an engine's long output does not stay held
	} else {
		rw.buf = rw.buf[:0]
	}
	return err
}

func (h *screenHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h *screenHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &screenHandler{next: h.next.WithAttrs(as), bare: h.bare, attrs: append(h.attrs[:len(h.attrs):len(h.attrs)], as...), secrets: h.secrets, out: h.out}
}

func (h *screenHandler) WithGroup(name string) slog.Handler {
	return &screenHandler{next: h.next.WithGroup(name), bare: h.bare, attrs: h.attrs, secrets: h.secrets, out: h.out}
}

func (h *screenHandler) Handle(ctx context.Context, r slog.Record) error {
	r = h.redacted(r) // outside the lock: only the writing is serialised
	return h.out.record(func() error { return h.handle(ctx, r) })
}

func (h *screenHandler) handle(ctx context.Context, r slog.Record) error {
	if utf8.RuneCountInString(r.Message) > screenWidth || strings.Contains(r.Message, "\n") {
		// A message that alone fills a line: one a little shorter stays
		// whole, as a test or an operator's grep may look for it.
		return h.handleLong(ctx, r)
	}
	used := utf8.RuneCountInString(r.Message)
	for _, a := range h.attrs {
		used += attrLen(a)
	}
	total, lines := used, false
	r.Attrs(func(a slog.Attr) bool {
		total += attrLen(a)
		lines = lines || strings.Contains(a.Value.String(), "\n")
		return true
	})
	if total <= screenAttrs && !lines {
		return h.next.Handle(ctx, r)
	}
	// The long attributes (a command line, a list of settings, an engine's
	// output) go first to lines of their own; the short ones stay while
	// they fit.
	var keep, rest []slog.Attr
	r.Attrs(func(a slog.Attr) bool {
		if n := attrLen(a); n <= screenLong && used+n <= screenAttrs && !strings.Contains(a.Value.String(), "\n") {
			used += n
			keep = append(keep, a)
		} else {
			rest = append(rest, a)
		}
		return true
	})
	if len(rest) == 0 {
		return h.next.Handle(ctx, r)
	}
	first := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	first.AddAttrs(keep...)
	if err := h.next.Handle(ctx, first); err != nil {
		return err
	}
	for _, a := range rest {
		for _, line := range screenValue(a) {
			if err := h.next.Handle(ctx, slog.NewRecord(r.Time, r.Level, line, r.PC)); err != nil {
				return err
			}
		}
	}
	return nil
}

// redacted is r with every known key in its message and attributes
// replaced, as the writer would replace it in the whole line; r itself
// when there are no keys.
func (h *screenHandler) redacted(r slog.Record) slog.Record {
	if !h.secrets.Any() {
		return r
	}
	out := slog.NewRecord(r.Time, r.Level, h.secrets.String(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.redactAttr(a))
		return true
	})
	return out
}

func (h *screenHandler) redactAttr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		g := v.Group()
		as := make([]slog.Attr, len(g))
		for i, x := range g {
			as[i] = h.redactAttr(x)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(as...)}
	}
	if k := v.Kind(); k != slog.KindString && k != slog.KindAny {
		return a // a number, a time, a bool: no key in it
	}
	s := v.String()
	red := h.secrets.String(s)
	switch {
	case red == s:
		return a
	case isErrAttr(a.Key, v):
		return slog.Any(a.Key, errors.New(red)) // still an error: wrapped, not cut
	}
	return slog.String(a.Key, red)
}

// handleLong writes a message longer than a line (a warning that names a
// file and its fix) wrapped at spaces, its further lines indented, then
// each attribute on lines of its own: no word of it is cut.
func (h *screenHandler) handleLong(ctx context.Context, r slog.Record) error {
	var lines []string
	for i, para := range strings.Split(r.Message, "\n") {
		for j, l := range wrapWords(para, screenAttrs-2) {
			if i > 0 || j > 0 {
				l = "  " + l
			}
			lines = append(lines, l)
		}
	}
	for i, l := range lines {
		next := h.next
		if i < len(lines)-1 && h.bare != nil {
			next = h.bare
		}
		if err := next.Handle(ctx, slog.NewRecord(r.Time, r.Level, l, r.PC)); err != nil {
			return err
		}
	}
	var err error
	r.Attrs(func(a slog.Attr) bool {
		for _, line := range screenValue(a) {
			if err = h.next.Handle(ctx, slog.NewRecord(r.Time, r.Level, line, r.PC)); err != nil {
				return false
			}
		}
		return true
	})
	return err
}

// wrapWords splits s into lines of at most n characters at spaces; a word
// longer than n is cut where it must be.
func wrapWords(s string, n int) []string {
	var out []string
	for r := []rune(s); ; {
		if len(r) <= n {
			return append(out, string(r))
		}
		cut := n
		for cut > 0 && r[cut] != ' ' {
			cut--
		}
		if cut == 0 {
			out, r = append(out, string(r[:n])), r[n:]
			continue
		}
		out, r = append(out, string(r[:cut])), r[cut+1:]
	}
}

// attrLen is about what an attribute takes on a text line: " key=value".
func attrLen(a slog.Attr) int {
	return 4 + utf8.RuneCountInString(a.Key) + utf8.RuneCountInString(a.Value.String()) // " k=\"v\""
}

// screenValue renders one attribute as continuation lines: "  key: value",
// a line per line of the value (at most screenLines), each cut to fit.
func screenValue(a slog.Attr) []string {
	v := a.Value.Resolve()
	var lines []string
	if v.Kind() == slog.KindGroup {
		for _, g := range v.Group() {
			lines = append(lines, screenValue(slog.Attr{Key: a.Key + "." + g.Key, Value: g.Value})...)
		}
		return lines
	}
	if isErrAttr(a.Key, v) {
		return screenWrapped(a.Key, v.String())
	}
	parts := strings.Split(strings.TrimRight(v.String(), "\n"), "\n")
	for i, p := range parts {
		if i == screenLines {
			lines = append(lines, fmt.Sprintf("  %s: … %d more lines (--log-format json keeps them)", a.Key, len(parts)-i))
			break
		}
		prefix := "  " + a.Key + ": "
		if i > 0 {
			prefix = "    "
		}
		lines = append(lines, prefix+clipLine(quote.Controls(p), screenAttrs-utf8.RuneCountInString(prefix)))
	}
	return lines
}

// isErrAttr: an error's value ends with its fix ("…; check that this is
// the file you meant"), so it is wrapped, not cut.
func isErrAttr(key string, v slog.Value) bool {
	if key == "err" || key == "error" {
		return true
	}
	_, ok := v.Any().(error)
	return v.Kind() == slog.KindAny && ok
}

// screenWrapped renders an error as continuation lines wrapped at spaces:
// "  key: value", further lines indented. Over screenLines, its first
// lines and its last two (where the fix is) stay, saying how many went.
func screenWrapped(key, s string) []string {
	prefix := "  " + key + ": "
	var lines []string
	for _, para := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		lines = append(lines, wrapWords(para, screenAttrs-utf8.RuneCountInString(prefix))...)
	}
	if len(lines) > screenLines {
		gone := len(lines) - (screenLines - 1)
		tail := lines[len(lines)-2:]
		lines = append(lines[:screenLines-3:screenLines-3], fmt.Sprintf("… %d more lines (--log-format json keeps them)", gone))
		lines = append(lines, tail...)
	}
	for i := range lines {
		if i == 0 {
			lines[i] = prefix + lines[i]
		} else {
			lines[i] = "    " + lines[i]
		}
	}
	return lines
}

// clipLine cuts s to n characters, saying how long it was.
func clipLine(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	tail := fmt.Sprintf("… (%d characters; --log-format json keeps it)", len(r))
	keep := max(n-utf8.RuneCountInString(tail), 20)
	return string(r[:keep]) + tail
}

// engineLineText is one engine output line in text format: the prefix and
// the line, cut to screenWidth saying how much was cut and where the whole
// line is. An engine's own lines run past it: issue 33 met engine lines of
// 300 characters and more among the launcher's. A line that is cut loses
// its colour codes first, so that no cut escape sequence colours the rest.
func engineLineText(prefix, line string) []byte {
	const more = "… (+%d chars; whole at --log-level debug, --log-format json)"
	n := screenWidth - utf8.RuneCountInString(prefix)
	if utf8.RuneCountInString(line) > n {
		line = ansiRE.ReplaceAllString(line, "")
	}
	if r := []rune(line); len(r) > n {
		keep := max(n-utf8.RuneCountInString(fmt.Sprintf(more, len(r))), 20)
		line = string(r[:keep]) + fmt.Sprintf(more, len(r)-keep)
	}
	return []byte(prefix + line + "\n")
}
