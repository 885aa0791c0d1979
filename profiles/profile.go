// Package profiles reads operator profiles: TOML files that hold the
// settings a launch needs (engine, models, drafter, width override, server
// address, serve and bench options, and profile-local policy entries). The
// example profiles shipped beside this file are embedded so that
// `speclaunch profile init` can write one anywhere.
package profiles

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/BurntSushi/toml"
	"github.com/speclaunch/speclaunch/internal/problems"
	"github.com/speclaunch/speclaunch/internal/quote"
	"github.com/speclaunch/speclaunch/internal/safefile"
	"github.com/speclaunch/speclaunch/internal/schedule"
	"github.com/speclaunch/speclaunch/internal/secret"
	"github.com/speclaunch/speclaunch/internal/tomlguard"
	"github.com/speclaunch/speclaunch/internal/tomlpos"
	"github.com/speclaunch/speclaunch/internal/typo"
)

//go:embed *.toml
var examples embed.FS

// standIns are the files an example names by a path relative to itself,
// shipped in a directory of the example's name (demo-load/target.txt):
// `profile init` writes them beside the profile, so that the profile it
// writes runs where it is written and tune hashes the stand-ins' bytes,
// as it would a real model's.
//
//go:embed demo-load/*.txt
var standIns embed.FS

// StandIn is one file an example names, relative to the example.
type StandIn struct {
	Rel  string // slash-separated, as the example writes it ("demo-load/target.txt")
	Data []byte
}

// StandIns lists the files example name ships beside it, none for most.
func StandIns(name string) []StandIn {
	ents, err := fs.ReadDir(standIns, name)
	if err != nil {
		return nil
	}
	var out []StandIn
	for _, e := range ents {
		rel := name + "/" + e.Name()
		b, err := standIns.ReadFile(rel)
		if err == nil {
			out = append(out, StandIn{rel, b})
		}
	}
	return out
}

// Profile is one parsed profile. Zero values mean "not set in the profile".
type Profile struct {
	Path string `toml:"-"`

	Engine struct {
		Name   string            `toml:"name"`
		Binary string            `toml:"binary"`
		Args   []string          `toml:"args"`
		Env    map[string]string `toml:"env" example:"LLAMA_API_KEY = \"…\""`
	} `toml:"engine"`
	Model struct {
		Path  string `toml:"path"`
		Quant string `toml:"quant"`
	} `toml:"model"`
	Draft struct {
		Model     *string `toml:"model"` // pointer: draft.model = "" explicitly turns speculation off
		Kind      string  `toml:"kind"`
		BlockSize *int    `toml:"block_size"`
		// Schedule is [[lo, hi, width], ...] triples or the text form
		// "1:6,2-3:4,4+:1"; config reads either.
		Schedule any `toml:"schedule"`
	} `toml:"draft"`
	Server struct {
		Host            string `toml:"host"`
		Port            *int   `toml:"port"`
		Proxy           *bool  `toml:"proxy"`
		Switch          string `toml:"switch"`
		DrainTimeout    string `toml:"drain_timeout" kind:"duration"`
		HoldTimeout     string `toml:"hold_timeout" kind:"duration"`
		ShutdownTimeout string `toml:"shutdown_timeout" kind:"duration"`
		HangTimeout     string `toml:"hang_timeout" kind:"duration" zero:"off"`
		QueueSize       *int   `toml:"queue_size"`
	} `toml:"server"`
	Adapt struct {
		Enabled      *bool    `toml:"enabled"`
		MaxWidth     *int     `toml:"max_width"`
		ExploreWidth *int     `toml:"explore_width"`
		Margin       *float64 `toml:"margin"`
		MinCycles    *int     `toml:"min_cycles"`
		Window       string   `toml:"window" kind:"duration"`
		Trials       *int     `toml:"trials"`
	} `toml:"adapt"`
	GPU struct {
		Capability string `toml:"capability"`
	} `toml:"gpu"`
	Log struct {
		Format string `toml:"format"`
		Level  string `toml:"level"`
	} `toml:"log"`
	Serve struct {
		ReadyTimeout    string `toml:"ready_timeout" kind:"duration"`
		StopTimeout     string `toml:"stop_timeout" kind:"duration"`
		Restart         string `toml:"restart"`
		StrictWidth     *bool  `toml:"strict_width"`
		Probe           *bool  `toml:"probe"`
		Watch           *bool  `toml:"watch"`
		RawEngineOutput *bool  `toml:"raw_engine_output"`
	} `toml:"serve"`
	Bench struct {
		Widths     []int  `toml:"widths"`
		Rounds     *int   `toml:"rounds"`
		Warmup     *int   `toml:"warmup"`
		MaxTokens  *int   `toml:"max_tokens"`
		Schedule   string `toml:"schedule"`
		PromptFile string `toml:"prompt_file"`
		// Prompts is a prompt set: a directory, or a shipped set's name.
		Prompts     string   `toml:"prompts"`
		Temperature *float64 `toml:"temperature"`
		// Concurrency is one level (4) or a load sweep's levels
		// ([1, 2, 4, 8], or the text "1,2,4,8").
		Concurrency any    `toml:"concurrency"`
		BasePort    *int   `toml:"base_port"`
		Out         string `toml:"out"`
	} `toml:"bench"`
	Policy struct {
		Files []string         `toml:"files"`
		Entry []map[string]any `toml:"entry"`
	} `toml:"policy"`

	lines tomlpos.Index
	empty bool // no key holds a value: see Empty
}

// Empty reports a profile that sets nothing: no bytes, or nothing but
// whitespace, comments and table headers. It is valid (serve started on
// one keeps it; docs/profiles.md), but a launch on it is one without a
// profile, so its readers warn.
func (p *Profile) Empty() bool { return p.empty }

// Line returns the line of a dotted key ("draft.block_size",
// "policy.entry[0]") in the profile's file, 0 when unknown.
func (p *Profile) Line(path string) int {
	if p == nil {
		return 0
	}
	return p.lines.Line(path)
}

// ElementLine is the line of element i (from 1) of a key's array value
// ("draft.schedule", "policy.entry[0].schedule"), 0 when unknown.
func (p *Profile) ElementLine(path string, i int) int {
	if p == nil {
		return 0
	}
	return p.lines.ElementLine(path, i)
}

// WhereElement renders "FILE:LINE" for element i (from 1) of a key's
// array value, on the line that element starts (a schedule's bucket
// written on a line of its own); Where's answer where that line is not
// known.
func (p *Profile) WhereElement(path string, i int) string {
	if p == nil {
		return ""
	}
	if n := p.ElementLine(path, i); n > 0 {
		return fmt.Sprintf("%s:%d", p.Path, n)
	}
	return p.Where(path)
}

// Where renders "FILE:LINE" for a key, or just the file.
func (p *Profile) Where(path string) string {
	if n := p.Line(path); n > 0 {
		return fmt.Sprintf("%s:%d", p.Path, n)
	}
	return p.Path
}

// Error is a profile fault with its file and line.
type Error struct {
	File string
	Line int
	Msg  string
	// Schedule is why draft.schedule's value is refused where the decoder
	// refused it before the key's reader could (a number past int64), for
	// that reader to say as it says the key's other faults
	// (internal/config/schedule.go); nil for any other fault.
	Schedule error
}

func (e *Error) Error() string { return e.Where() + ": " + e.Msg }

// Where is the fault's file:line, or its file where no line is known.
func (e *Error) Where() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d", e.File, e.Line)
	}
	return e.File
}

func (e *Error) Unwrap() error { return e.Schedule }

// typesRE is the decoder's wording of a value of the wrong type.
var typesRE = regexp.MustCompile(`incompatible types: TOML value has type (\S+); destination has type (\S+)`)

// tomlTypes names the decoder's Go types as TOML does: an operator wrote
// TOML, not Go ("is a float64, want a slice" said neither).
var tomlTypes = map[string]string{
	"int64": "an integer", "integer": "an integer", "int": "an integer",
	"float64": "a float", "float": "a float",
	"bool": "a boolean", "string": "a string",
	"[]any": "an array", "[]interface": "an array", "slice": "an array", "array": "an array",
	"[]map[string]any": "an array", // an array of inline tables, as the one-value documents write it
	"map[string]any":   "a table", "map": "a table", "struct": "a table",
	"time.Time": "a date or time",
	// MetaData.Type's names, for a key that takes a table (notATable).
	"Integer": "an integer", "Float": "a float", "String": "a string", "Bool": "a boolean",
	"Array": "an array", "ArrayHash": "an array of tables", "Datetime": "a date or time",
}

// article names a decoder type as TOML does, with "a" or "an".
func article(w string) string {
	if n, ok := tomlTypes[w]; ok {
		return n
	}
	return safefile.Article(w) + " " + w
}

// lineRE is the decoder's wording of an error in a value: its line,
// where it knows one (not for a table a dotted key made: port.x = 1),
// and the key it was decoding, quoted as %q quotes.
var lineRE = regexp.MustCompile(`^toml: (?:line (\d+) ?)?(?:\(last key "((?:[^"\\]|\\.)*)"\))?: (.*)$`)

// outOfRange says an integer past what TOML holds as the key's own check
// says one merely too large: the key, and for draft.schedule the bucket,
// the number and the bound, as schedule.TriplesOf does, with that error
// for the key's reader to say (Error.Schedule); "" for any other error.
// It was "invalid TOML: 99999999999999999999 is out of range for int64",
// which named neither the key nor the fix.
func outOfRange(src string, pe toml.ParseError) (string, error) {
	b, ok := tomlpos.BigIntOf(src, pe)
	if !ok {
		return "", nil
	}
	n := b.Text
	if pe.LastKey == "draft.schedule" && len(b.At) == 2 {
		err := schedule.OutOfRange(b.At[0], b.At[1], b.Array, n)
		return "bad draft.schedule: " + err.Error(), err
	}
	if last := pe.LastKey[strings.LastIndexByte(pe.LastKey, '.')+1:]; secret.SecretEnv(last) || secret.SecretFlag(last) {
		n = secret.Mask(n) // the decoder's message showed it whole
	}
	return fmt.Sprintf("%s: %s is far out of range, beyond any TOML integer: see docs/profiles.md for the values %s takes", pe.LastKey, n, pe.LastKey), nil
}

// Parse decodes profile text; name is used in errors. Unknown keys and wrong
// types are errors with a line, so a typo never silently does nothing.
func Parse(name string, data []byte) (*Profile, error) {
	p := &Profile{Path: name}
	// An editor's UTF-8 byte order mark is not TOML; left in, it cost
	// every error its line (issue 33). It sits on line 1: lines stay.
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	var ge *tomlguard.Error
	if err := tomlguard.Check(string(data)); errors.As(err, &ge) {
		return nil, &Error{File: name, Line: ge.Line, Msg: ge.Error()}
	}
	md, err := toml.Decode(string(data), p)
	if err != nil {
		// A syntax error is said alone (valueErrors says it where the
		// file does not decode as TOML); a number past its key's type
		// (adapt.margin = 9007199254740993) is a parse error too, met
		// first or not as the decoder walks the keys: with the others.
		return nil, valueErrors(name, data, md, err)
	}
	p.lines = tomlpos.Build(string(data))
	p.empty = !slices.ContainsFunc(md.Keys(), func(k toml.Key) bool { return md.Type(k...) != "Hash" }) // "Hash": a table
	if err := notATable(name, md, p.lines); err != nil {
		return nil, err
	}
	if unknown := unknownKeys(name, &quoted{data: string(data)}, md, p.lines); len(unknown) > 0 {
		return nil, joinFound(unknown)
	}
	return p, nil
}

// unknownKeys are the keys of the file (md, its lines) that are none of
// the profile's, every one at once, a table's once (not again for each
// key under it): a profile with two typos was said one at a time.
func unknownKeys(name string, q *quoted, md toml.MetaData, lines tomlpos.Index) []pending {
	var unknown []pending
	said := map[string]bool{}
	saidUnder := func(k toml.Key) bool {
		for i := 1; i <= len(k); i++ {
			if said[k[:i].String()] {
				return true
			}
		}
		return false
	}
	add := func(path string, line int, e func() *Error) {
		said[path] = true
		unknown = append(unknown, pending{line, e})
	}
	for _, c := range caseKeys(md) {
		if !said[c[0]] {
			add(c[0], lines.Line(c[0]), func() *Error { return unknownKey(name, lines, c[0], c[1]) })
		}
	}
	for _, k := range md.Undecoded() {
		path := k.String()
		if saidUnder(k) {
			continue
		}
		// [[policy.entry]] tables are validated by the policy parser.
		if strings.HasPrefix(path, "policy.entry") {
			continue
		}
		// draft.schedule's type, a table among others, is its reader's to
		// say, with the key's other faults (internal/config/schedule.go):
		// every command that loads a profile reads the key.
		if strings.HasPrefix(path, "draft.schedule.") {
			continue
		}
		// A table where a key takes a list or a number: what the key takes,
		// whether or not this command reads it (not "unknown key").
		if k := "bench.concurrency"; strings.HasPrefix(path, k+".") {
			add(k, lines.Line(k), func() *Error {
				return &Error{File: name, Line: lines.Line(k), Msg: k + " is a table; it takes a number, or a list of levels like [1, 2, 4, 8] (see docs/profiles.md)"}
			})
			continue
		}
		// A quoted name ("pört" = 1), which the index does not hold, is
		// looked for under its table: it was said at the table's line.
		line := lines.Line(path)
		if n := q.line(lines, k); n > 0 {
			line = n
		}
		add(path, line, func() *Error {
			e := unknownKey(name, lines, path, typo.Nearest(path, knownPaths))
			e.Line = line
			return e
		})
	}
	return unknown
}

// unknownKey is the *Error for a key of the file that is none of the
// profile's (path, as written), with the key it was likely meant to be
// (near, "" for none).
func unknownKey(name string, lines tomlpos.Index, path, near string) *Error {
	msg := fmt.Sprintf("unknown key %q", path)
	if near != "" {
		msg += fmt.Sprintf("; did you mean %q?", near)
	}
	if near != "" && strings.EqualFold(near, path) {
		msg += " Keys are matched with their case."
	}
	return &Error{File: name, Line: lines.Line(path), Msg: msg + " (see docs/profiles.md for the schema; `speclaunch profile init` writes a commented example)"}
}

// caseKeys are the keys and tables of the file, in its order, that name
// one of the profile's only in another case ("Engine" for engine,
// "engine.NAME"): each as written, then the profile's spelling.
// The decoder matches a struct's fields regardless of case, so
// `[Engine] Name = "sim"` was applied, and `NAME = "vllm"` under
// `name = "sim"` overrode it, said at name's line. Keys are matched
// exactly, as a policy file's are (it refuses [[Entry]]): such a key is
// an unknown one, as a misspelt key is. What a key that takes a table or
// a list of tables holds (engine.env's names, policy.entry's keys) is its
// reader's to check.
func caseKeys(md toml.MetaData) [][2]string {
	var out [][2]string
	for _, k := range md.Keys() {
		for n := 1; n <= len(k); n++ {
			p := k[:n].String()
			if leafPaths[p] {
				break
			}
			if tablePaths[p] {
				continue
			}
			if i := slices.IndexFunc(knownPaths, func(kp string) bool { return strings.EqualFold(kp, p) }); i >= 0 {
				if !slices.ContainsFunc(out, func(c [2]string) bool { return c[0] == p }) {
					out = append(out, [2]string{p, knownPaths[i]})
				}
			}
			break // unknown in any case: md.Undecoded says it
		}
	}
	return out
}

// leafPaths are keyPaths as a set; tablePaths the profile's tables
// ("engine", "draft"), the prefixes of its keys; knownPaths its tables
// and keys together, which a key in another case is matched to.
var leafPaths, tablePaths, knownPaths = func() (map[string]bool, map[string]bool, []string) {
	leaves, tables := map[string]bool{}, map[string]bool{}
	for _, k := range keyPaths {
		leaves[k] = true
		for i, c := range k {
			if c == '.' {
				tables[k[:i]] = true
			}
		}
	}
	return leaves, tables, slices.Concat(slices.Sorted(maps.Keys(tables)), keyPaths)
}()

// notATable refuses a key that takes a table (tableKeys: engine.env)
// given as anything else: BurntSushi/toml v1.6.0 decodes a string, number,
// boolean or array into a map as nothing, with no error (its unifyMap), so
// `env = "LLAMA_API_KEY=…"` validated and the engine served without its
// key. MetaData.Type says what the file wrote; "" is a table a dotted key
// made (env.K = "v"). The value is never quoted: it may be a key.
func notATable(name string, md toml.MetaData, lines tomlpos.Index) error {
	for _, path := range slices.Sorted(maps.Keys(tableKeys)) {
		t := md.Type(strings.Split(path, ".")...)
		if t == "" || t == "Hash" {
			continue
		}
		return &Error{File: name, Line: lines.Line(path), Msg: fmt.Sprintf("%s: is %s, want a table: write [%s] on a line of its own, then one NAME = \"value\" line under it for each entry (%s) (see docs/profiles.md)", path, article(t), path, tableKeys[path])}
	}
	return nil
}

// decodeError is the *Error for the decoder's err on data: its file:line,
// and the key and the fix in TOML's words, not the decoder's Go ones.
func decodeError(name string, data []byte, md toml.MetaData, err error) error {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		line := tomlpos.SyntaxLine(string(data), pe)
		if msg, sched := outOfRange(string(data), pe); msg != "" {
			return &Error{File: name, Line: line, Msg: msg, Schedule: sched}
		}
		return &Error{File: name, Line: line, Msg: "invalid TOML: " + maskQuoted(pe.Message, statementAt(data, line))}
	}
	m := lineRE.FindStringSubmatch(err.Error())
	if m == nil {
		return &Error{File: name, Msg: err.Error()}
	}
	last := m[2]
	if k, err := strconv.Unquote(`"` + last + `"`); err == nil {
		last = k
	}
	var line int
	fmt.Sscan(m[1], &line)
	under := keyUnder(md, last)
	if line == 0 {
		// A table a dotted key made (port.x = 1) has no position in
		// the decoder: the line of the key that made it.
		line = tomlpos.Build(string(data)).Line(under)
	}
	msg := m[3]
	if strings.Contains(msg, "expected table but found") {
		// The decoder's message names a Go struct type; say the fix.
		msg = fmt.Sprintf("%q must be a table, e.g. [%s] followed by its keys (see docs/profiles.md)", last, last)
	} else if d := numberForDuration(data, last); d != "" {
		msg = d
	} else if t := typesRE.FindStringSubmatch(msg); t != nil {
		// Not the decoder's Go words ("destination has type
		// integer"): what the key holds and what it takes.
		msg = fmt.Sprintf("%s: is %s, want %s%s%s (see docs/profiles.md)", last, article(t[1]), article(t[2]), dottedFix(last, under, t[1]), quoteFix(t[1], t[2]))
	} else if last != "" {
		msg = fmt.Sprintf("%s: %s", last, msg)
	}
	return &Error{File: name, Line: line, Msg: msg}
}

// valueErrors says every value of data the profile cannot take, in the
// file's order: the decoder stops at the first it meets (err, md), and
// which that is changed from run to run (it walks a table's keys in Go's
// map order), so each value is decoded again on its own. A value under
// an array of tables ([[policy.entry]]) is its reader's to check.
func valueErrors(name string, data []byte, md toml.MetaData, err error) error {
	var raw map[string]any
	rmd, rerr := toml.Decode(string(data), &raw)
	if rerr != nil {
		return decodeError(name, data, md, err)
	}
	lines := tomlpos.Build(string(data))
	q := &quoted{data: string(data)}
	var found []pending
	arrays := map[string]bool{}
	said := map[string]bool{}
	var wrong []toml.Key
	// A key in another case than the profile's is unknown, whatever its
	// value: the decoder matched it to the field regardless of case, and
	// its type was said first, then its name in the next run (a review).
	cases := map[string]bool{}
	for _, c := range caseKeys(rmd) {
		cases[c[0]] = true
		found = append(found, pending{lines.Line(c[0]), func() *Error { return unknownKey(name, lines, c[0], c[1]) }})
	}
	for _, k := range rmd.Keys() {
		path := k.String()
		t := rmd.Type(k...)
		if underCase(k, cases) {
			wrong = append(wrong, k) // said as unknown above; not again beside
			continue
		}
		switch {
		case t == "ArrayHash":
			arrays[path] = true
			continue
		case underArray(k, arrays), !mayHold(k):
			continue // a key of no profile value: unknown at most (unknownKeys)
		case t == "Hash" && (!leafLower[strings.ToLower(path)] || tableKeys[strings.ToLower(path)] != ""):
			continue // a table, or one of names (engine.env): its keys are checked
		case underNames(k) && t == "String":
			continue // a name's value (engine.env): a string, as it must be
		}
		pe, last, bad := wrongValue(name, data, q, raw, rmd, lines, k)
		if !bad {
			continue
		}
		wrong = append(wrong, k)
		if !said[last] { // the keys of one table given for a value fail as one: said once
			said[last] = true
			found = append(found, pe)
		}
	}
	if len(found) == 0 {
		return decodeError(name, data, md, err)
	}
	return joinFound(append(found, unknownBeside(name, q, raw, wrong, lines)...))
}

// wrongValue decodes the value at key k of the file (data, raw, rmd, its
// lines) alone into a profile: bad where the profile cannot take it, with
// its problem and the key the decoder named (last: a table given for a
// value names the table).
func wrongValue(name string, data []byte, q *quoted, raw map[string]any, rmd toml.MetaData, lines tomlpos.Index, k toml.Key) (p pending, last string, bad bool) {
	one, ok := oneValue(k, raw)
	var buf bytes.Buffer
	if !ok || toml.NewEncoder(&buf).Encode(one) != nil {
		return pending{}, "", false
	}
	var alone Profile
	_, oerr := toml.Decode(buf.String(), &alone)
	if oerr == nil {
		return pending{}, "", false
	}
	path := k.String()
	at := snippetLineRE.ReplaceAllString(oerr.Error(), "toml: ")
	last = at
	if m := lineRE.FindStringSubmatch(at); m != nil {
		last = m[2]
	}
	line := lines.Line(path)
	if n := q.line(lines, k); n > 0 {
		line = n
	}
	return pending{line, func() *Error {
		var pe toml.ParseError
		if errors.As(oerr, &pe) { // a number past what its key's type holds
			return &Error{File: name, Line: line, Msg: fmt.Sprintf("%s: %s (see docs/profiles.md)", path, pe.Message)}
		}
		// Said of the file as written: its line is found from the key
		// (the one-value document's is not the file's), and a dotted
		// key is told from a table's header (dottedFix). A quoted key,
		// which the index does not hold, is looked for under its table.
		if line != lines.Line(path) {
			at = fmt.Sprintf("toml: line %d %s", line, strings.TrimPrefix(at, "toml: "))
		}
		e, _ := decodeError(name, data, rmd, errors.New(at)).(*Error)
		return e
	}}, last, true
}

// unknownBeside are the unknown keys beside the values of the wrong type
// (wrong), those of the file (raw, its lines) without them: said after
// those were fixed, they took a second run.
func unknownBeside(name string, q *quoted, raw map[string]any, wrong []toml.Key, lines tomlpos.Index) []pending {
	rest, ok := without(raw, wrong)
	var buf bytes.Buffer
	if !ok || toml.NewEncoder(&buf).Encode(rest) != nil {
		return nil
	}
	var again Profile
	amd, err := toml.Decode(buf.String(), &again)
	if err != nil {
		return nil
	}
	return unknownKeys(name, q, amd, lines)
}

// pending is a problem of a profile at its line, said (say) only if it is
// among the first maxSaid: saying one may cost a pass over the file.
type pending struct {
	line int
	say  func() *Error
}

// joinFound says the first maxSaid of fs, in the file's order, and counts
// the rest (joinSaid).
func joinFound(fs []pending) error {
	slices.SortStableFunc(fs, func(a, b pending) int { return a.line - b.line })
	var errs []*Error
	for _, f := range fs[:min(len(fs), maxSaid)] {
		if e := f.say(); e != nil {
			if len(e.Msg) > maxSaidBytes { // a key of 50 kB, said five times over (a review: a 5 MB error)
				e.Msg = fmt.Sprintf("%s… (%d bytes more)", strings.ToValidUTF8(e.Msg[:maxSaidBytes], ""), len(e.Msg)-maxSaidBytes)
			}
			errs = append(errs, e)
		}
	}
	return joinSaid(errs, len(fs)-min(len(fs), maxSaid))
}

// mayHold says k may hold a profile value, whatever its case (the decoder
// matches fields so): a key or table of the profile's, or a name under a
// table of names (engine.env). Any other key is unknown, and its value is
// none of the profile's.
func mayHold(k toml.Key) bool {
	p := strings.ToLower(k.String())
	return leafLower[p] || tableLower[p] || underNames(k)
}

// underNames says k is a name under a table of names (engine.env).
func underNames(k toml.Key) bool {
	for i := 1; i < len(k); i++ {
		if _, ok := tableKeys[strings.ToLower(k[:i].String())]; ok {
			return true
		}
	}
	return false
}

// leafLower and tableLower are leafPaths and tablePaths in lower case.
var leafLower, tableLower = func() (map[string]bool, map[string]bool) {
	l, t := map[string]bool{}, map[string]bool{}
	for p := range leafPaths {
		l[strings.ToLower(p)] = true
	}
	for p := range tablePaths {
		t[strings.ToLower(p)] = true
	}
	return l, t
}()

// without is raw less the values at keys, in a copy (raw is left); false
// where a key is not a path of tables to a value.
func without(raw map[string]any, keys []toml.Key) (map[string]any, bool) {
	var cp func(m map[string]any) map[string]any
	cp = func(m map[string]any) map[string]any {
		out := make(map[string]any, len(m))
		for k, v := range m {
			if t, ok := v.(map[string]any); ok {
				v = cp(t)
			}
			out[k] = v
		}
		return out
	}
	rest := cp(raw)
next:
	for _, k := range keys {
		m := rest
		for _, part := range k[:len(k)-1] {
			v, there := m[part]
			if !there {
				continue next // under a key deleted already
			}
			sub, ok := v.(map[string]any)
			if !ok {
				return nil, false
			}
			m = sub
		}
		delete(m, k[len(k)-1])
	}
	return rest, true
}

// maxSaid bounds the problems of a profile said, the rest counted: a
// hostile profile of 16,000 values of the wrong type took minutes to say
// them all (each pass reads the file), in an error of 1.5 MB.
const maxSaid = 20

// maxSaidBytes bounds one problem's text: its key is the file's, and may
// be as long as the file.
const maxSaidBytes = 2000

// quoted finds the lines of data that assign a quoted name
// (engine.env."FOO.BAR" = 5), which the line index does not hold. Its
// index of them is built once, at the first such key: a search of the
// whole file for each made 20,000 quoted names take 46 s.
type quoted struct {
	data string
	at   map[string][]int // the name as written ("\"FOO.BAR\"", "'FOO.BAR'") → its lines, ascending
}

// line is the line of key k where its last part needs quotes: the first
// from its table's line that assigns it; 0 for a bare key, which the
// index finds.
func (q *quoted) line(lines tomlpos.Index, k toml.Key) int {
	if len(k) == 0 {
		return 0
	}
	last := k[len(k)-1]
	if !strings.ContainsFunc(last, func(r rune) bool {
		return !(r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) {
		return 0
	}
	if q.at == nil {
		q.index()
	}
	from := max(1, lines.Line(k[:len(k)-1].String()))
	n := 0
	for _, name := range []string{strconv.Quote(last), "'" + last + "'"} {
		at := q.at[name]
		if i, _ := slices.BinarySearch(at, from); i < len(at) && (n == 0 || at[i] < n) {
			n = at[i]
		}
	}
	return n
}

// index reads every line that starts with a quoted name and an "=".
func (q *quoted) index() {
	q.at = map[string][]int{}
	for i, l := range strings.Split(q.data, "\n") {
		t := strings.TrimSpace(l)
		if t == "" || t[0] != '"' && t[0] != '\'' {
			continue
		}
		end := 1
		for end < len(t) && t[end] != t[0] {
			if t[0] == '"' && t[end] == '\\' {
				end++ // an escape: the next byte is the name's
			}
			end++
		}
		if end < len(t) && strings.HasPrefix(strings.TrimSpace(t[end+1:]), "=") {
			q.at[t[:end+1]] = append(q.at[t[:end+1]], i+1)
		}
	}
}

// underCase says k is, or lies under, one of cases (keys in another case).
func underCase(k toml.Key, cases map[string]bool) bool {
	for i := 1; i <= len(k); i++ {
		if cases[k[:i].String()] {
			return true
		}
	}
	return false
}

// underArray says k lies under one of arrays (of tables).
func underArray(k toml.Key, arrays map[string]bool) bool {
	for i := 1; i < len(k); i++ {
		if arrays[k[:i].String()] {
			return true
		}
	}
	return false
}

// snippetLineRE is the line a one-value document's error names.
var snippetLineRE = regexp.MustCompile(`^toml: line \d+ ?`)

// oneValue is the document that holds key k of raw alone, in its tables;
// false where k is not a path of tables to a value (a key inside an
// array's inline table).
func oneValue(k toml.Key, raw map[string]any) (map[string]any, bool) {
	v := any(raw)
	for _, part := range k {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[part]; !ok {
			return nil, false
		}
	}
	for i := len(k) - 1; i >= 0; i-- {
		v = map[string]any{k[i]: v}
	}
	return v.(map[string]any), len(k) > 0
}

// seeRE is where an error sends the operator: docs/profiles.md.
var seeRE = regexp.MustCompile(` \(see docs/profiles\.md[^)]*\)$`)

// joinSaid is errs, in the file's order, in one error (problems.Join),
// where to read more said once, by the last that says it, in its longest
// form; more: further errors not listed.
func joinSaid(errs []*Error, more int) error {
	slices.SortStableFunc(errs, func(a, b *Error) int { return a.Line - b.Line })
	see, said := -1, ""
	for i, e := range errs {
		if m := seeRE.FindString(e.Msg); m != "" {
			see = i
			if len(m) > len(said) {
				said = m
			}
		}
	}
	out := make([]error, len(errs))
	for i, e := range errs {
		if see >= 0 && len(errs) > 1 {
			e.Msg = seeRE.ReplaceAllString(e.Msg, "")
			if i == see {
				e.Msg += said
			}
		}
		out[i] = e
	}
	err := problems.Join("in the profile", out)
	if more > 0 { // not one of the problems listed: after them
		err = fmt.Errorf("%w; and %d more, not listed: fix these, then validate again", err, more)
	}
	return err
}

// keyUnder is the first key of the file at or under table path last
// ("server.port.x" of `port.x = 1` in [server]), for its line; last
// itself when the file has none.
func keyUnder(md toml.MetaData, last string) string {
	for _, k := range md.Keys() {
		for n := len(k); n > 0; n-- {
			if k[:n].String() == last {
				return k.String()
			}
		}
	}
	return last
}

// quoteFix is the fix for a value quoted that its key takes bare (proxy =
// "yes"), or bare that it takes quoted: the environment takes "yes" for a
// boolean, the profile only TOML's true and false.
func quoteFix(held, want string) string {
	switch h, w := article(held), article(want); {
	case h == "a string" && w == "a boolean":
		return ": write true or false, without quotes"
	case h == "a string" && (w == "an integer" || w == "a float"):
		return ": write a number, without quotes"
	case w == "a string" && (h == "an integer" || h == "a float" || h == "a boolean"):
		return ": put the value in quotes"
	}
	return ""
}

// dottedFix is the fix for a table given where key last takes a value
// (its type held, the decoder's word) because a dot follows its name
// (under, "server.port.x" of `port.x = 1`): a dot in a key nests a table,
// which the operator rarely means; "" for any other mismatch. In a table
// of names (engine.env) a name may hold a dot, quoted.
func dottedFix(last, under, held string) string {
	if tomlTypes[held] != "a table" || under == last {
		return ""
	}
	fix := fmt.Sprintf(": the dot in %s makes %s a table; give %s its value with no dot after its name", under, last, last)
	if i := strings.LastIndexByte(last, '.'); i > 0 {
		if _, ok := tableKeys[last[:i]]; ok {
			fix += fmt.Sprintf(", or quote a name that holds a dot (\"%s\" = …)", strings.TrimPrefix(under, last[:i+1]))
		}
	}
	return fix
}

// Load reads and parses a profile file. The file must be a regular file
// of at most safefile.ProfileLimit bytes; anything else is refused with a
// *safefile.Error naming it, and ctx ending stops the read.
func Load(ctx context.Context, path string) (*Profile, error) {
	data, err := safefile.ReadFile(ctx, "profile", path, safefile.ProfileLimit)
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

// SearchDirs lists where a profile NAME is looked up, in order: ./profiles,
// the user's config dir, then /etc/speclaunch/profiles.
func SearchDirs(getenv func(string) string) []string {
	dirs := []string{"profiles"}
	cfg := getenv("XDG_CONFIG_HOME")
	if cfg == "" {
		if home := getenv("HOME"); home != "" {
			cfg = filepath.Join(home, ".config")
		}
	}
	if cfg != "" {
		dirs = append(dirs, filepath.Join(cfg, "speclaunch", "profiles"))
	}
	return append(dirs, "/etc/speclaunch/profiles")
}

// Find resolves --profile PATH|NAME. Anything with a path separator or a
// .toml suffix that exists is a path; otherwise NAME(.toml) is searched for
// in SearchDirs, then NAME itself in the working directory. An unknown name
// lists the profiles that were found.
func Find(ref string, getenv func(string) string) (string, error) {
	if ref == "" {
		return "", errors.New("empty profile name")
	}
	if strings.ContainsRune(ref, os.PathSeparator) || strings.HasSuffix(ref, ".toml") {
		if _, err := os.Stat(ref); err != nil {
			if _, lerr := os.Lstat(ref); lerr == nil {
				// A symlink that leads nowhere (dangling, or a loop):
				// opening it says so and what to do, as for a policy file.
				return ref, nil
			}
			// The path is said once, readable (a newline in it is
			// quoted, not printed raw); the cause without it.
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return "", fmt.Errorf("profile %s: %w%s", quote.Quoted(ref, 0), err, byStem(ref, getenv))
		}
		return ref, nil
	}
	dirs := SearchDirs(getenv)
	for _, d := range dirs {
		if p := filepath.Join(d, ref+".toml"); statOK(p) {
			return p, nil
		}
	}
	if _, err := os.Lstat(ref); err == nil {
		// No profile of that name, but a file (or a FIFO, a directory) of
		// that name here: it is what was meant, and opening it says what
		// is wrong with it rather than "no profile named".
		return ref, nil
	}
	found := Available(getenv)
	list := "none"
	if len(found) > 0 {
		list = strings.Join(found, ", ")
	}
	if near := typo.NearestName(ref, found); near != "" {
		list = "did you mean " + near + "? found: " + list
	} else {
		list = "found: " + list
	}
	return "", fmt.Errorf("no profile named %q in %s (%s); pass a path, or create one with `speclaunch profile init`", ref, strings.Join(dirs, ", "), list)
}

// byStem is the hint for a NAME.toml that is no file here but whose NAME
// is a profile in SearchDirs (MLXCEL_PROFILE=cm.toml for cm): "; did you
// mean profile "cm" (PATH)?", else "". A path with a directory is a path.
func byStem(ref string, getenv func(string) string) string {
	stem, ok := strings.CutSuffix(ref, ".toml")
	if !ok || stem == "" || strings.ContainsRune(ref, os.PathSeparator) {
		return ""
	}
	for _, d := range SearchDirs(getenv) {
		if p := filepath.Join(d, ref); statOK(p) {
			return fmt.Sprintf("; did you mean profile %s (%s)?", quote.Quoted(stem, 0), quote.Text(p, 0))
		}
	}
	return ""
}

// statOK says p names something: a name's search takes the first
// directory where it does.
func statOK(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// Available lists profile names found in SearchDirs, first hit per name.
func Available(getenv func(string) string) []string {
	seen := map[string]bool{}
	var names []string
	for _, d := range SearchDirs(getenv) {
		ents, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range ents {
			n, ok := strings.CutSuffix(e.Name(), ".toml")
			if ok && !e.IsDir() && !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
	}
	sort.Strings(names)
	return names
}

// Example returns an embedded example profile by name (ExampleNames).
func Example(name string) ([]byte, error) {
	b, err := examples.ReadFile(name + ".toml")
	if err != nil {
		return nil, fmt.Errorf("no example profile %q (have: %s)", name, strings.Join(ExampleNames(), ", "))
	}
	return b, nil
}

// ExampleNames lists the embedded examples.
func ExampleNames() []string {
	ents, _ := fs.ReadDir(examples, ".")
	var out []string
	for _, e := range ents {
		out = append(out, strings.TrimSuffix(e.Name(), ".toml"))
	}
	return out
}

// quotedRE is what the decoder quotes back: a token ("…") or a
// character ('…').
var quotedRE = regexp.MustCompile(`"[^"]*"|'[^']*'`)

// keyNamedRE is the decoder's wording of a key it refuses by its name,
// the whole message: defined twice, or a value and a table at once. What
// it quotes is the key's dotted path (engine.env.LLAMA_API_KEY), which
// holds the names the file gives keys, never a value.
var keyNamedRE = regexp.MustCompile(`^(?:Key '.*' (?:has already been defined|was already created as a hash|was already created and cannot be used as an array)\.|".*" is not a table)$`)

// maskQuoted masks what a TOML error quotes from line when the line names a
// secret (a variable or flag whose name says key, token, secret or
// password): a value typed without quotes is quoted back in part in the
// decoder's message (its leading letters: "expected value but found
// \"sk\" instead" for sk-…; a character: "but got 'A'"), and the error goes
// to the terminal and the log. Each quote shows as the whole value would
// (secret.Mask: "****" and its last 4 characters), so that no other part
// of the key shows; one not found among the line's values shows as "****".
// A quote of TOML's own punctuation ("(',')") stays.
//
// A message that refuses a key by its name (keyNamedRE) quotes the key's
// dotted path, not a value: it stays, so that the operator can see which
// key (it was "Key '****' has already been defined.").
func maskQuoted(msg, line string) string {
	if keyNamedRE.MatchString(msg) {
		return msg
	}
	names := strings.FieldsFunc(line, func(r rune) bool {
		return !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	})
	for _, n := range names {
		if secret.SecretEnv(n) || secret.SecretFlag(n) {
			values := bareValues(line)
			return quotedRE.ReplaceAllStringFunc(msg, func(q string) string {
				in, mark := q[1:len(q)-1], q[:1]
				if !strings.ContainsFunc(in, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) {
					return q
				}
				for _, v := range values {
					if strings.Contains(v, in) {
						return mark + secret.Mask(v) + mark
					}
				}
				return mark + secret.Masked + mark
			})
		}
	}
	return msg
}

// bareValues are the words right of the statement's first "=" that stand
// outside quotes and comments: a value typed without quotes is one of them.
func bareValues(stmt string) []string {
	_, v, ok := strings.Cut(stmt, "=")
	if !ok {
		return nil
	}
	var out []string
	at := -1 // start of the word being read
	end := func(i int) {
		if at >= 0 {
			out = append(out, v[at:i])
			at = -1
		}
	}
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '"' || c == '\'':
			end(i)
			for i++; i < len(v) && v[i] != c; i++ {
				if c == '"' && v[i] == '\\' {
					i++
				}
			}
		case c == '#':
			end(i)
			for i < len(v) && v[i] != '\n' {
				i++
			}
		case strings.IndexByte(" \t\r\n,[]{}=", c) >= 0:
			end(i)
		case at < 0:
			at = i
		}
	}
	end(len(v))
	return out
}

// statementAt is the statement line n (from 1) of data is in: the line, and
// the lines above it back to the nearest one with "=" (an array's values
// may sit on lines of their own under its key), or "".
func statementAt(data []byte, n int) string {
	lines := strings.Split(string(data), "\n")
	if n < 1 || n > len(lines) {
		return ""
	}
	from := n - 1
	for from > 0 && !strings.Contains(lines[from], "=") {
		from--
	}
	return strings.Join(lines[from:n], "\n")
}

// numberForDuration is the message for a duration key (one tagged
// kind:"duration") that the file gives as a number: what it wrote and a
// string to write instead that the key takes; "" for any other key or
// value.
func numberForDuration(data []byte, path string) string {
	if !durationKeys[path] {
		return ""
	}
	var raw map[string]any
	if _, err := toml.Decode(string(data), &raw); err != nil {
		return ""
	}
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		if raw, _ = raw[p].(map[string]any); raw == nil {
			return ""
		}
	}
	v := raw[parts[len(parts)-1]]
	var x float64
	switch n := v.(type) {
	case int64:
		x = float64(n)
	case float64:
		x = n
	default:
		return ""
	}
	if s := secondsDuration(x, offKeys[path]); s != "" {
		return fmt.Sprintf("%s = %s is a number; write a duration string such as %q (see docs/profiles.md)", path, tomlguard.Text(v), s)
	}
	return fmt.Sprintf("%s = %s is a number; write a duration string such as \"5m\" or \"90s\", %s (see docs/profiles.md)", path, tomlguard.Text(v), DurationRange(offKeys[path]))
}

// longestDuration is the longest duration a setting takes, as its
// messages say it: what a time.Duration holds.
const longestDuration = "2562047h (about 292 years)"

// DurationRange is the range of a duration setting as every message that
// refuses one says it (a bare number here, a string in config's parser):
// "above 0 and at most 2562047h …", or from 0 where 0 is off (off). A
// negative string said "must be above 0" and no bound, where a negative
// number said the range.
func DurationRange(off bool) string {
	if off {
		return "from 0 (off) up to " + longestDuration
	}
	return "above 0 and at most " + longestDuration
}

// secondsDuration is x seconds as a duration string ("30s") where a
// duration key takes it: above 0 and within what a time.Duration holds,
// or 0 for a key that reads 0 as off (off); "" otherwise (a negative
// number, inf, nan, one too large, or so small it reads as 0).
func secondsDuration(x float64, off bool) string {
	if x == 0 && off {
		return "0s"
	}
	s := strconv.FormatFloat(x, 'f', -1, 64) + "s"
	if d, err := time.ParseDuration(s); err != nil || d <= 0 {
		return ""
	}
	return s
}

// DurationKey reports whether a profile key holds a duration (tagged
// kind:"duration"): a string such as "30s".
func DurationKey(path string) bool { return durationKeys[path] }

// OffKey reports whether a duration key reads 0 as off (tagged
// zero:"off"), as its setting's parser does (config's test holds them
// equal).
func OffKey(path string) bool { return offKeys[path] }

// keyPaths are a profile's keys as dotted paths ("engine.name"), read from
// Profile's toml tags: what a mistyped key is matched against; durationKeys
// and offKeys those tagged kind:"duration" and zero:"off"; tableKeys those
// that take a table (a map: engine.env), each with its example entry
// (tagged example:"…") for notATable to show.
var keyPaths, durationKeys, offKeys, tableKeys = func() ([]string, map[string]bool, map[string]bool, map[string]string) {
	var out []string
	durations, offs, tables := map[string]bool{}, map[string]bool{}, map[string]string{}
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for f := range t.Fields() {
			tag, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
			if tag == "" || tag == "-" {
				continue
			}
			if f.Type.Kind() == reflect.Struct {
				walk(f.Type, prefix+tag+".")
				continue
			}
			out = append(out, prefix+tag)
			if f.Tag.Get("kind") == "duration" {
				durations[prefix+tag] = true
			}
			if f.Tag.Get("zero") == "off" {
				offs[prefix+tag] = true
			}
			if f.Type.Kind() == reflect.Map {
				tables[prefix+tag] = f.Tag.Get("example")
			}
		}
	}
	walk(reflect.TypeFor[Profile](), "")
	return out, durations, offs, tables
}()
