package supervise

import (
	"bytes"
	"io"
	"sync"
	"unicode/utf8"

	"github.com/speclaunch/speclaunch/internal/secret"
)

// maxLine bounds one output line. An engine that prints a megabyte without
// a newline (a progress bar with \r, a JSON dump) is split into pieces of at
// most this many bytes, so memory stays bounded and OnLine still runs.
const maxLine = 64 << 10

// output turns the child's two byte streams into lines: prefixed or passed
// through, remembered in a ring for Tail, and handed to OnLine. One mutex
// serialises everything, so a writer shared by both streams is safe and
// OnLine is never called concurrently with itself.
type output struct {
	prefix string
	format func(stream, line string) []byte
	raw    bool // pass bytes through as they come, secrets redacted (Raw with no Prefix)
	stdout io.Writer
	stderr io.Writer
	onLine func(stream, line string)
	red    *secret.Redactor

	mu sync.Mutex
	// held are raw bytes that may begin a secret, by the writer they go
	// to: both streams write to one terminal, and an engine that split a
	// key between stdout and stderr showed it whole when each stream held
	// its own. open counts the streams still read (drain sets it); the
	// last to end writes what is held.
	held map[io.Writer][]byte
	open int
	ring []string
	next int // next slot in ring
	full bool
}

func newOutput(s Spec, tail int) *output {
	o := &output{
		prefix: s.Prefix,
		format: s.Format,
		raw:    s.Raw && s.Prefix == "",
		stdout: s.Stdout,
		stderr: s.Stderr,
		onLine: s.OnLine,
		red:    s.Secrets,
		held:   map[io.Writer][]byte{},
		ring:   make([]string, tail),
	}
	if o.stdout == nil {
		o.stdout = io.Discard
	}
	if o.stderr == nil {
		o.stderr = io.Discard
	}
	return o
}

// copy reads r until EOF or error. Writes go straight to the destination:
// a slow writer slows the child (as a terminal would), but order within the
// stream is preserved and nothing is dropped. Write errors are ignored so
// that a closed launcher stderr cannot stall the engine's pipe.
func (o *output) copy(r io.Reader, stream string) {
	w := o.stdout
	if stream == "stderr" {
		w = o.stderr
	}
	buf := make([]byte, 32<<10)
	var line []byte
	for {
		n, err := r.Read(buf)
		chunk := buf[:n]
		if o.raw {
			o.rawWrite(w, chunk, err != nil)
		}
		for len(chunk) > 0 {
			i := bytes.IndexByte(chunk, '\n')
			if i < 0 {
				line = append(line, chunk...)
				break
			}
			line = append(line, chunk[:i]...)
			chunk = chunk[i+1:]
			line = o.emitLong(w, stream, line)
			o.emit(w, stream, line)
			line = line[:0]
		}
		line = o.emitLong(w, stream, line)
		if err != nil {
			if len(line) > 0 {
				o.emit(w, stream, line)
			}
			return
		}
	}
}

// rawWrite writes chunk to w as it comes, after what w has held, its
// secrets redacted, holding back the bytes that may begin one for the
// next write to w; ended says this stream has ended, and the last to end
// writes them all.
func (o *output) rawWrite(w io.Writer, chunk []byte, ended bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if ended {
		o.open--
	}
	out := chunk
	if h := o.held[w]; len(h) > 0 {
		out = append(h, chunk...)
	}
	out = o.red.WholeOnly(out) // whole secrets first: what Straddle holds is shorter than one
	keep := len(out)
	if !ended || o.open > 0 {
		keep = o.red.Straddle(out, keep)
	}
	if keep > 0 {
		_, _ = w.Write(o.red.Bytes(out[:keep]))
	}
	o.held[w] = append([]byte(nil), out[keep:]...)
	if ended && o.open <= 0 {
		for hw, h := range o.held { // the other stream's writer, if it differs
			if len(h) > 0 {
				_, _ = hw.Write(o.red.Bytes(h))
			}
			delete(o.held, hw)
		}
	}
}

// emitLong emits maxLine-sized pieces from the front of line while it is
// longer than maxLine, its secrets redacted first, cutting on a UTF-8
// boundary and before a secret the rest of the line may complete, and
// returns the rest.
func (o *output) emitLong(w io.Writer, stream string, line []byte) []byte {
	if len(line) > maxLine {
		line = o.red.WholeOnly(line) // the line goes on: a run at its end may be a secret's start
	}
	for len(line) > maxLine {
		cut := maxLine
		for back := 0; back < utf8.UTFMax && cut > 0 && !utf8.RuneStart(line[cut]); back++ {
			cut--
		}
		if c := o.red.Straddle(line, cut); c > 0 {
			cut = c
		}
		if cut == 0 {
			cut = maxLine
		}
		o.emit(w, stream, line[:cut])
		line = append(line[:0], line[cut:]...)
	}
	return line
}

func (o *output) emit(w io.Writer, stream string, b []byte) {
	b = o.red.Bytes(bytes.TrimSuffix(b, []byte("\r")))
	s := string(b)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ring[o.next] = s
	o.next++
	if o.next == len(o.ring) {
		o.next, o.full = 0, true
	}
	switch {
	case o.raw:
	case o.format != nil:
		_, _ = w.Write(o.format(stream, s))
	default:
		// One Write per line keeps lines whole on a shared writer.
		out := make([]byte, 0, len(o.prefix)+len(s)+1)
		out = append(out, o.prefix...)
		out = append(out, s...)
		out = append(out, '\n')
		_, _ = w.Write(out)
	}
	if o.onLine != nil {
		o.onLine(stream, s)
	}
}

func (o *output) tailLines() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.full {
		return append([]string(nil), o.ring[:o.next]...)
	}
	out := make([]string, 0, len(o.ring))
	out = append(out, o.ring[o.next:]...)
	return append(out, o.ring[:o.next]...)
}
