package secret

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// MinRedact is the shortest value a Redactor replaces in free text. A
// shorter one (an env flag "1", a toy key "abc") would blank every
// occurrence of common text; it is still masked wherever it is known to be
// a secret (MaskArgv, MaskEnv).
const MinRedact = 6

// Redactor replaces known secret values in free text with their Mask. It
// is the net under the structural masking: every byte speclaunch writes to
// stdout and stderr, its status page and its records pass through one.
// The zero value and a nil *Redactor are ready (and replace nothing until
// Add). Safe for concurrent use.
type Redactor struct {
	mu   sync.RWMutex
	olds [][]byte // longest first, so a key that contains another is replaced whole
	news [][]byte
	// known marks each of olds (isForm), and each value Add was given
	// (isValue): a value is registered, with its forms, once.
	known map[string]uint8
}

// The marks of Redactor.known.
const (
	isForm  uint8 = 1 << iota // one of olds
	isValue                   // given to Add
)

// Add registers secret values; ones shorter than MinRedact and ones already
// known are ignored. A value that JSON escapes differently (a quote, a
// backslash, <, >, &) is registered in its escaped form as well.
func (r *Redactor) Add(values ...string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.known == nil {
		r.known = map[string]uint8{}
	}
	added := false
	for _, v := range values {
		if len(v) < MinRedact || r.known[v]&isValue != 0 {
			continue
		}
		r.known[v] |= isValue
		forms := spellings(v)
		for _, f := range forms {
			if r.known[f]&isForm != 0 {
				continue
			}
			r.known[f] |= isForm
			r.olds = append(r.olds, []byte(f))
			r.news = append(r.news, []byte(Mask(v)))
			added = true
		}
	}
	if !added {
		return
	}
	// Longest first.
	idx := make([]int, len(r.olds))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return len(r.olds[b]) - len(r.olds[a]) })
	olds, news := make([][]byte, len(idx)), make([][]byte, len(idx))
	for i, j := range idx {
		olds[i], news[i] = r.olds[j], r.news[j]
	}
	r.olds, r.news = olds, news
}

// spellings are v and the forms encoders print it in: inside a JSON
// string, json.Marshal's (<, >, & escaped), slog's JSON handler's and
// llama-server's (only ", \ and controls escaped), and Python's json.dumps
// (vLLM, SGLang: everything past ASCII as \uXXXX, surrogate pairs above
// U+FFFF), each also with PHP's escaped solidus and upper-case escapes;
// and URL-encoded. An engine or the launcher's own JSON log prints a key
// in one of them; a form not registered is printed whole.
func spellings(v string) []string {
	forms := []string{v}
	add := func(f string) {
		if !slices.Contains(forms, f) {
			forms = append(forms, f)
		}
	}
	for _, html := range []bool{true, false} {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(html)
		if enc.Encode(v) == nil {
			if esc := strings.TrimSuffix(b.String(), "\n"); len(esc) >= 2 {
				add(esc[1 : len(esc)-1])
			}
		}
	}
	var ascii strings.Builder
	for _, c := range forms[len(forms)-1] { // slog's form, past ASCII escaped as Python does
		switch {
		case c < utf8.RuneSelf:
			ascii.WriteRune(c)
		case c > 0xFFFF:
			hi, lo := utf16.EncodeRune(c)
			fmt.Fprintf(&ascii, "\\u%04x\\u%04x", hi, lo)
		default:
			fmt.Fprintf(&ascii, "\\u%04x", c)
		}
	}
	add(ascii.String())
	add(upperEscapes(ascii.String())) // \u00E9, as some encoders write it
	for _, f := range slices.Clone(forms) {
		add(strings.ReplaceAll(f, "/", `\/`)) // PHP's and Jackson's escaped solidus
	}
	add(url.QueryEscape(v)) // a key in a logged URL: base64's / + = as %2F %2B %3D
	add(url.PathEscape(v))
	return forms
}

// upperEscapes writes the hex digits of every \uXXXX in s in upper case.
func upperEscapes(s string) string {
	return uEscRE.ReplaceAllStringFunc(s, func(e string) string { return `\u` + strings.ToUpper(e[2:]) })
}

var (
	uEscRE = regexp.MustCompile(`\\u[0-9a-f]{4}`)
	// csiRE is a terminal's colour (CSI) sequence.
	csiRE = regexp.MustCompile("\x1b\\[[0-9;?]*[ -/]*[@-~]")
)

// Bytes returns b with every known secret replaced; b itself when none
// occurs. Besides each secret whole it replaces one that colour codes
// split (the line is then written without its codes, "sk-li\x1b[31mve-…"
// showed whole on a terminal) and one cut short: a run of at least half
// of a secret's first or last bytes, and at least minPartial, that the
// text does not continue or begin with the rest (an engine's log that cut
// the key, or wrote its halves to two streams). Text
// that may continue in a next read is for WholeOnly and Straddle first.
func (r *Redactor) Bytes(b []byte) []byte {
	if r == nil {
		return b
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.partial(r.whole(b))
}

// WholeOnly replaces the secrets b holds whole (and those colour codes
// split), never a run that only begins one: before Straddle, on text the
// next read may continue.
func (r *Redactor) WholeOnly(b []byte) []byte {
	if r == nil {
		return b
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.whole(b)
}

// String is Bytes for a string.
func (r *Redactor) String(s string) string {
	if r == nil || !r.Any() {
		return s
	}
	if b := r.Bytes([]byte(s)); string(b) != s {
		return string(b)
	}
	return s
}

// whole replaces each secret b holds whole, and, when that leaves one a
// colour code splits, returns b without its codes, redacted.
func (r *Redactor) whole(b []byte) []byte {
	b = r.exact(b)
	if bytes.IndexByte(b, 0x1b) >= 0 {
		if plain := csiRE.ReplaceAll(b, nil); !bytes.Equal(plain, b) {
			if red := r.exact(plain); !bytes.Equal(red, plain) {
				return red
			}
		}
	}
	return b
}

func (r *Redactor) exact(b []byte) []byte {
	for i, o := range r.olds {
		if bytes.Contains(b, o) {
			b = bytes.ReplaceAll(b, o, r.news[i])
		}
	}
	return b
}

// minPartial is the shortest run of a secret's first or last bytes Bytes
// replaces when the rest does not follow or precede it: 12 characters of
// a key are key material, not a word an engine prints by chance.
const minPartial = 12

// partial replaces what is left of a secret cut short (minPartial).
func (r *Redactor) partial(b []byte) []byte {
	for _, o := range r.olds {
		need := max(minPartial, (len(o)+1)/2)
		if need >= len(o) {
			continue
		}
		for from := 0; ; {
			i := bytes.Index(b[from:], o[:need])
			if i < 0 {
				break
			}
			i += from
			n := need
			for n < len(o) && i+n < len(b) && b[i+n] == o[n] {
				n++
			}
			b = append(b[:i:i], append([]byte(Masked), b[i+n:]...)...)
			from = i + len(Masked)
		}
		// And a run of its last bytes the text does not begin with the
		// rest (an engine that wrote a key's halves to two streams).
		tail := o[len(o)-need:]
		for from := 0; ; {
			i := bytes.Index(b[from:], tail)
			if i < 0 {
				break
			}
			i += from
			start, n := i, need
			for n < len(o) && start > 0 && b[start-1] == o[len(o)-n-1] {
				start, n = start-1, n+1
			}
			b = append(b[:start:start], append([]byte(Masked), b[i+need:]...)...)
			from = start + len(Masked)
		}
	}
	return b
}

// Writer returns a writer that redacts each Write before passing it to w.
// Each Write is redacted on its own: the launcher's writers (slog handlers,
// the engine output copier, fmt) write a line at a time.
func (r *Redactor) Writer(w io.Writer) io.Writer { return &writer{r: r, w: w} }

type writer struct {
	r *Redactor
	w io.Writer
}

func (w *writer) Write(p []byte) (int, error) {
	q := w.r.Bytes(p)
	if len(q) == len(p) && (len(p) == 0 || &q[0] == &p[0]) {
		return w.w.Write(p)
	}
	if _, err := w.w.Write(q); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Unwrap returns the writer underneath (for terminal detection).
func (w *writer) Unwrap() io.Writer { return w.w }

// Any reports whether r replaces anything: text is redacted before it is
// cut or wrapped only then (a key cut in two matches neither half).
func (r *Redactor) Any() bool {
	if r == nil {
		return false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.olds) > 0
}

// Straddle moves a cut of b back so that no known secret spans it: it is
// the start of the first secret that begins before cut and runs past it,
// or that begins before cut and runs past the end of b as far as b shows
// it (the rest may follow in the next read); else cut. b is to be
// redacted (WholeOnly) first: then only a secret cut by the end of what was
// read can span the cut, and the piece after it is shorter than the
// longest secret.
func (r *Redactor) Straddle(b []byte, cut int) int {
	if r == nil || cut <= 0 || cut > len(b) {
		return cut
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	best := cut
	for _, f := range r.olds {
		for p := max(0, cut-len(f)+1); p < best; p++ {
			end := min(len(b), p+len(f))
			if p+len(f) > cut && bytes.Equal(b[p:end], f[:end-p]) {
				best = p
				break
			}
		}
	}
	return best
}
