package policy

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/speclaunch/speclaunch/internal/safefile"
	"github.com/speclaunch/speclaunch/internal/tomlpos"
	"github.com/speclaunch/speclaunch/key"
)

// SchemaVersion is the policy file schema this package reads.
const SchemaVersion = 1

// ParseError is every error Parse and ParseProfileEntries return. The
// message says what to change: a bad policy edit is reported, never applied,
// so the operator must be able to fix it from the message alone.
type ParseError struct {
	File string
	Line int // 0 when no line can be named
	Msg  string
}

func (e *ParseError) Error() string {
	if e.Line <= 0 {
		return e.File + ": " + e.Msg
	}
	return e.File + ":" + strconv.Itoa(e.Line) + ": " + e.Msg
}

var (
	topKeys     = []string{"schema", "default", "entry"}
	defaultKeys = []string{"engine", "drafter", "width", "note"}
	entryKeys   = []string{"id", "engine", "drafter", "capability", "quant", "width", "runner_up", "pin", "record", "note"}
	idPattern   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
)

// Parse reads one policy file. name is used in errors and in each
// default's and entry's Origin ("name:line"). The first problem found, in
// file order, is returned as a *ParseError; nothing is half-parsed.
func Parse(name string, data []byte) (*File, error) {
	var raw map[string]any
	if _, err := toml.Decode(string(data), &raw); err != nil {
		return nil, syntaxError(name, err)
	}
	ix := tomlpos.Scan(string(data))

	if err := checkUnknown(name, raw, topKeys, ix.TopLine, "at the top level",
		"a policy file holds only schema, [[default]] and [[entry]]"); err != nil {
		return nil, err
	}
	f := &File{Name: name}
	sv, ok := raw["schema"]
	if !ok {
		return nil, &ParseError{name, 1, "missing schema: add `schema = 1` as the first line"}
	}
	n, err := asInt(sv)
	if err != nil {
		return nil, &ParseError{name, ix.TopLine("schema"), "schema " + err.Error() + "; write schema = 1"}
	}
	if n != SchemaVersion {
		return nil, &ParseError{name, ix.TopLine("schema"), fmt.Sprintf("schema %d is not supported (this speclaunch reads schema %d); set schema = 1 or use a speclaunch that reads schema %d", n, SchemaVersion, n)}
	}
	f.Schema = SchemaVersion

	defs, err := tables(name, raw, "default", ix)
	if err != nil {
		return nil, err
	}
	seenDefault := map[[2]string]int{}
	for _, t := range defs {
		d, err := parseDefault(t)
		if err != nil {
			return nil, err
		}
		k := [2]string{string(d.Engine), string(d.Drafter)}
		if first, dup := seenDefault[k]; dup {
			return nil, t.errAt(t.line, "duplicate [[default]] for engine %s drafter %s (first at %s:%d); keep one", d.Engine, d.Drafter, name, first)
		}
		seenDefault[k] = t.line
		f.Defaults = append(f.Defaults, d)
	}

	ents, err := tables(name, raw, "entry", ix)
	if err != nil {
		return nil, err
	}
	if f.Entries, err = parseEntries(ents); err != nil {
		return nil, err
	}
	return f, nil
}

// ReadFile reads and parses the policy file at path. It must be a regular
// file of at most safefile.PolicyLimit bytes; anything else is refused with
// a *safefile.Error naming it, and ctx ending stops the read.
func ReadFile(ctx context.Context, path string) (*File, error) {
	data, err := safefile.ReadFile(ctx, "policy file", path, safefile.PolicyLimit)
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

// ParseProfileEntries validates a profile's own [[policy.entry]] tables,
// already decoded by the profile loader, with the same rules as a policy
// file's [[entry]] tables. lines[i] is the header line of entries[i] (0 when
// unknown); per-key lines are not available here, so errors name the table.
func ParseProfileEntries(name string, entries []map[string]any, lines []int) ([]Entry, error) {
	ts := make([]table, len(entries))
	for i, m := range entries {
		line := 0
		if i < len(lines) {
			line = lines[i]
		}
		ts[i] = table{file: name, label: "[[policy.entry]]", line: line, m: m}
	}
	return parseEntries(ts)
}

// syntaxError turns the decoder's error into a ParseError with its line.
func syntaxError(name string, err error) error {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		line := pe.Position.Line
		if line == 0 {
			line = pe.Line
		}
		return &ParseError{name, line, "invalid TOML: " + pe.Message + "; fix the syntax on this line"}
	}
	return &ParseError{name, 0, "invalid TOML: " + err.Error()}
}

// table is one decoded TOML table with what is known of its lines.
type table struct {
	file     string
	label    string // "[[entry]]", "[[default]]", "[[policy.entry]]"
	line     int
	keyLines map[string]int // nil when only the table's line is known
	m        map[string]any
}

func (t table) lineOf(k string) int {
	if l, ok := t.keyLines[k]; ok {
		return l
	}
	return t.line
}

func (t table) errAt(line int, format string, args ...any) *ParseError {
	return &ParseError{t.file, line, fmt.Sprintf(format, args...)}
}

func (t table) errf(k string, format string, args ...any) *ParseError {
	return t.errAt(t.lineOf(k), format, args...)
}

// tables returns the elements of the array of tables named name ([[name]]).
func tables(file string, raw map[string]any, name string, ix tomlpos.Regions) ([]table, error) {
	v, ok := raw[name]
	if !ok {
		return nil, nil
	}
	var ms []map[string]any
	switch a := v.(type) {
	case []map[string]any:
		ms = a
	case []any: // an inline array: name = [{...}, {...}]
		for _, e := range a {
			m, ok := e.(map[string]any)
			if !ok {
				return nil, &ParseError{file, ix.TopLine(name), fmt.Sprintf("%s must be an array of tables ([[%s]]), but an element is a %s", name, name, typeName(e))}
			}
			ms = append(ms, m)
		}
	default:
		return nil, &ParseError{file, ix.TopLine(name), fmt.Sprintf("%s must be an array of tables, not a %s: write [[%s]] (double brackets) before each one", name, typeName(v), name)}
	}
	regs := ix.Elements(name)
	out := make([]table, len(ms))
	for i, m := range ms {
		t := table{file: file, label: "[[" + name + "]]", line: ix.TopLine(name), m: m}
		if len(regs) == len(ms) {
			t.line, t.keyLines = regs[i].Line, regs[i].Keys
		}
		out[i] = t
	}
	return out, nil
}

// checkUnknown rejects keys outside known, reporting the earliest one.
func checkUnknown(file string, m map[string]any, known []string, lineOf func(string) int, where, hint string) error {
	var bad []string
	for k := range m {
		if !slices.Contains(known, k) {
			bad = append(bad, k)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	slices.SortFunc(bad, func(a, b string) int {
		if la, lb := lineOf(a), lineOf(b); la != lb {
			return la - lb
		}
		return strings.Compare(a, b)
	})
	return &ParseError{file, lineOf(bad[0]), fmt.Sprintf("unknown key %q %s (known: %s); remove it or fix its spelling: %s",
		bad[0], where, strings.Join(known, ", "), hint)}
}

func (t table) unknown(known []string, hint string) error {
	return checkUnknown(t.file, t.m, known, t.lineOf, "in "+t.label, hint)
}

// str reads a string key; missing is the message when a required key is
// absent ("" for optional keys).
func (t table) str(k, missing string) (string, bool, error) {
	v, ok := t.m[k]
	if !ok {
		if missing != "" {
			return "", false, t.errAt(t.line, "%s is missing %s: %s", t.label, k, missing)
		}
		return "", false, nil
	}
	s, isStr := v.(string)
	if !isStr {
		return "", false, t.errf(k, "%s must be a string, not a %s; quote it: %s = \"...\"", k, typeName(v), k)
	}
	return s, true, nil
}

// width reads a width key and keeps it inside the range every engine runs.
func (t table) width(k string, required bool) (int, bool, error) {
	v, ok := t.m[k]
	if !ok {
		if required {
			return 0, false, t.errAt(t.line, "%s is missing %s: give the verify-block width, 2 to 256, e.g. %s = 4", t.label, k, k)
		}
		return 0, false, nil
	}
	n, err := asInt(v)
	if err != nil {
		return 0, false, t.errf(k, "%s %s; write %s = 4 (a whole number of rows)", k, err, k)
	}
	switch {
	case n < key.MinWidth:
		return 0, false, t.errf(k, "%s %d is below %d: widths 0 and 1 disable speculation, which a policy never does; use %d or more (to run without speculation, remove the draft model instead)", k, n, key.MinWidth, key.MinWidth)
	case n > key.MaxWidth:
		return 0, false, t.errf(k, "%s %d is above %d, which no drafter runs; use a width between %d and %d", k, n, key.MaxWidth, key.MinWidth, key.MaxWidth)
	}
	return int(n), true, nil
}

func (t table) engineDrafter() (key.Engine, key.Drafter, error) {
	es, _, err := t.str("engine", `name the engine, e.g. engine = "mlxcel" (known: mlxcel, llama.cpp, vllm, sglang, sim)`)
	if err != nil {
		return "", "", err
	}
	e, err := key.ParseEngine(es)
	if err != nil {
		return "", "", t.errf("engine", "engine: %v; use one of the known names", err)
	}
	ds, _, err := t.str("drafter", `name the drafter kind, e.g. drafter = "dflash"`)
	if err != nil {
		return "", "", err
	}
	d, err := key.ParseDrafter(ds)
	if err != nil {
		return "", "", t.errf("drafter", "drafter: %v; use one of the known kinds", err)
	}
	// internal-mtp is never chosen by an operator but mlxcel detects it, so
	// a width for it is meaningful on mlxcel-speaking engines.
	if d != key.InternalMTP || e == key.LlamaCpp {
		if err := key.CheckSelectable(e, d); err != nil {
			return "", "", t.errf("drafter", "%v, so this table could never apply; fix the engine or the drafter", err)
		}
	}
	return e, d, nil
}

func parseDefault(t table) (Default, error) {
	if err := t.unknown(defaultKeys, "a [[default]] is keyed on engine and drafter only; measured widths go in an [[entry]]"); err != nil {
		return Default{}, err
	}
	e, d, err := t.engineDrafter()
	if err != nil {
		return Default{}, err
	}
	w, _, err := t.width("width", true)
	if err != nil {
		return Default{}, err
	}
	note, _, err := t.str("note", "")
	if err != nil {
		return Default{}, err
	}
	return Default{Engine: e, Drafter: d, Width: w, Note: note, Origin: origin(t.file, t.line)}, nil
}

// parseEntries validates entry tables and rejects duplicate ids and keys.
func parseEntries(ts []table) ([]Entry, error) {
	var out []Entry
	byID := map[string]Entry{}
	byKey := map[key.Key]Entry{}
	for _, t := range ts {
		e, err := parseEntry(t)
		if err != nil {
			return nil, err
		}
		if first, dup := byID[e.ID]; dup {
			return nil, t.errf("id", "duplicate entry id %q (first at %s); ids must be unique: rename one", e.ID, first.Origin)
		}
		if first, dup := byKey[e.Key]; dup {
			return nil, t.errAt(t.line, "entry %q has the same key (%s) as entry %q at %s; keep one (a later policy file may replace it instead)", e.ID, e.Key, first.ID, first.Origin)
		}
		byID[e.ID], byKey[e.Key] = e, e
		out = append(out, e)
	}
	return out, nil
}

func parseEntry(t table) (Entry, error) {
	if err := t.unknown(entryKeys, "see docs/policy.md for the entry schema"); err != nil {
		return Entry{}, err
	}
	id, _, err := t.str("id", `give every entry a unique id, e.g. id = "gb10-affine-dflash"`)
	if err != nil {
		return Entry{}, err
	}
	if !idPattern.MatchString(id) {
		return Entry{}, t.errf("id", "id %q must be 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit, e.g. \"gb10-affine-dflash\"", id)
	}
	e, d, err := t.engineDrafter()
	if err != nil {
		return Entry{}, err
	}
	if e == key.Sim {
		// The simulator resolves with mlxcel's entries (width.PolicyEngine),
		// and a sim record never backs an entry: one keyed on sim would
		// never apply.
		return Entry{}, t.errf("engine", `a measured entry cannot name engine "sim": the simulator resolves with mlxcel's entries and its records are never measurements; write engine = "mlxcel" with a record from a real engine`)
	}
	cs, _, err := t.str("capability", `name the CUDA compute capability measured, e.g. capability = "12.1"`)
	if err != nil {
		return Entry{}, err
	}
	c, err := key.ParseCapability(cs)
	if err != nil || c.String() != cs {
		return Entry{}, t.errf("capability", "capability %q must be written MAJOR.MINOR, e.g. \"12.1\" for GB10 or \"9.0\" for H200", cs)
	}
	qs, _, err := t.str("quant", `name the target quantization measured, e.g. quant = "affine"`)
	if err != nil {
		return Entry{}, err
	}
	q, err := key.ParseQuant(qs)
	if err != nil {
		return Entry{}, t.errf("quant", "quant: %v; use one of the known names", err)
	}
	if q == key.QuantUnknown {
		return Entry{}, t.errf("quant", "quant \"unknown\" cannot key an entry: it means the target could not be read, which is never measured; name the quantization the record measured, e.g. \"affine\"")
	}
	w, _, err := t.width("width", true)
	if err != nil {
		return Entry{}, err
	}
	ru, hasRU, err := t.width("runner_up", false)
	if err != nil {
		return Entry{}, err
	}
	if hasRU && ru == w {
		return Entry{}, t.errf("runner_up", "runner_up %d equals width: name the record's second-best width, or remove runner_up", ru)
	}
	pin, _, err := t.str("pin", `every entry names the engine version it was measured against, e.g. pin = "mlx 81ba1c6a"`)
	if err != nil {
		return Entry{}, err
	}
	if strings.TrimSpace(pin) == "" {
		return Entry{}, t.errf("pin", `pin is empty: name the engine version the record measured, e.g. pin = "mlx 81ba1c6a"`)
	}
	rec, _, err := t.str("record", `every entry names the committed record that earned it, e.g. record = "docs/benchmark_results/<name>.md"`)
	if err != nil {
		return Entry{}, err
	}
	if !strings.HasSuffix(rec, ".md") || path.IsAbs(rec) || path.Clean(rec) != rec || strings.HasPrefix(rec, "../") {
		return Entry{}, t.errf("record", "record %q must be the repository-relative path of the record's .md, e.g. \"docs/benchmark_results/<name>.md\" (its .json twin sits beside it)", rec)
	}
	note, _, err := t.str("note", "")
	if err != nil {
		return Entry{}, err
	}
	return Entry{
		ID:       id,
		Key:      key.Key{Engine: e, Drafter: d, Capability: c, Quant: q},
		Width:    w,
		Pin:      strings.TrimSpace(pin),
		Record:   rec,
		RunnerUp: ru,
		Note:     note,
		Origin:   origin(t.file, t.line),
	}, nil
}

func origin(file string, line int) string {
	if line <= 0 {
		return file
	}
	return file + ":" + strconv.Itoa(line)
}

// asInt accepts the integer types a TOML decoder (or a profile loader that
// built the map itself) produces; the error reads after the key's name.
func asInt(v any) (int64, error) {
	switch n := v.(type) {
	case int64:
		return n, nil
	case int:
		return int64(n), nil
	case int32:
		return int64(n), nil
	case uint64:
		if n > math.MaxInt64 {
			return 0, fmt.Errorf("is out of range")
		}
		return int64(n), nil
	case float64:
		return 0, fmt.Errorf("must be an integer, not a float (%v)", n)
	}
	return 0, fmt.Errorf("must be an integer, not a %s", typeName(v))
}

// typeName names a decoded value's TOML type for messages.
func typeName(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case int, int32, int64, uint64:
		return "integer"
	case float32, float64:
		return "float"
	case bool:
		return "boolean"
	case time.Time:
		return "datetime"
	case map[string]any:
		return "table"
	case []map[string]any, []any:
		return "array"
	}
	return fmt.Sprintf("%T", v)
}
