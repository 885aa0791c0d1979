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

	mu   sync.Mutex
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
	var line, held []byte // held: raw bytes that may begin a secret, written with the next read
	for {
		n, err := r.Read(buf)
		chunk := buf[:n]
		if o.raw && (n > 0 || len(held) > 0) {
			out := chunk
			if len(held) > 0 {
				out = append(held, chunk...)
			}
			out = o.red.Bytes(out) // whole secrets first: what Straddle holds is shorter than one
			keep := len(out)
			if err == nil {
				keep = o.red.Straddle(out, keep)
			}
			o.mu.Lock()
			_, _ = w.Write(out[:keep])
			o.mu.Unlock()
			held = append(held[:0:0], out[keep:]...)
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

// emitLong emits maxLine-sized pieces from the front of line while it is
// longer than maxLine, its secrets redacted first, cutting on a UTF-8
// boundary and before a secret the rest of the line may complete, and
// returns the rest.
func (o *output) emitLong(w io.Writer, stream string, line []byte) []byte {
	if len(line) > maxLine {
		line = o.red.Bytes(line)
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
