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

	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/safefile"
	"github.com/speclaunch/speclaunch/internal/schedule"
	"github.com/speclaunch/speclaunch/internal/tomlguard"
	"github.com/speclaunch/speclaunch/internal/tomlpos"
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
	entryKeys   = []string{"id", "engine", "drafter", "capability", "quant", "width", "schedule", "runner_up", "pin", "record", "records", "cost", "note", "target_sha256", "draft_sha256", "tuned"}
	costKeys    = []string{"record", "classic_ms", "widths", "ms_per_cycle"}
	idPattern   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
)

// Parse reads one policy file. name is used in errors and in each
// default's and entry's Origin ("name:line"). The first problem found, in
// file order, is returned as a *ParseError; nothing is half-parsed.
func Parse(name string, data []byte) (*File, error) {
	var raw map[string]any
	var ge *tomlguard.Error
	if err := tomlguard.Check(string(data)); errors.As(err, &ge) {
		return nil, &ParseError{name, ge.Line, ge.Error()}
	}
	if _, err := toml.Decode(string(data), &raw); err != nil {
		return nil, syntaxError(name, string(data), err)
	}
	ix := tomlpos.Build(string(data))

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

// blank says whether data holds no TOML at all: no bytes, or nothing but
// whitespace and comments (a UTF-8 byte-order mark aside). Such a file has
// no schema, which a policy file needs; the tuned layer reads it as no
// layer (Budget.ReadTuned).
func blank(data []byte) bool {
	for line := range strings.Lines(strings.TrimPrefix(string(data), "\ufeff")) {
		if l := strings.TrimLeft(line, " \t\r\n"); l != "" && l[0] != '#' {
			return false
		}
	}
	return true
}

// ParseProfileEntries validates a profile's own [[policy.entry]] tables,
// already decoded by the profile loader, with the same rules as a policy
// file's [[entry]] tables. lines[i] is the header line of entries[i] (0 when
// unknown), keyLines[i] the line of each of its keys (nil when unknown): an
// error about a key names the key's line, else the table's. elementLine,
// where not nil, is the line of element b (from 1) of key k of entry i,
// 0 when unknown: an error about one bucket of a schedule names its line.
func ParseProfileEntries(name string, entries []map[string]any, lines []int, keyLines []map[string]int, elementLine func(i int, k string, b int) int) ([]Entry, error) {
	ts := make([]table, len(entries))
	for i, m := range entries {
		t := table{file: name, label: "[[policy.entry]]", m: m}
		if elementLine != nil {
			t.elementLine = func(k string, b int) int { return elementLine(i, k, b) }
		}
		if i < len(lines) {
			t.line = lines[i]
		}
		if i < len(keyLines) {
			t.keyLines = keyLines[i]
		}
		ts[i] = t
	}
	return parseEntries(ts)
}

// syntaxError turns the decoder's error into a ParseError with its line.
func syntaxError(name, src string, err error) error {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		line := tomlpos.SyntaxLine(src, pe)
		// A schedule's number past int64, which the decoder refuses before
		// scheduleOf sees it, is said as one merely too large is: it was
		// "invalid TOML: 99999999999999999999 is out of range for int64".
		if b, ok := tomlpos.BigIntOf(src, pe); ok && pe.LastKey == "entry.schedule" && len(b.At) == 2 {
			return &ParseError{name, line, badSchedule(schedule.OutOfRange(b.At[0], b.At[1], b.Array, b.Text))}
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
	// elementLine is the line of element b (from 1) of key k's array
	// value, 0 when unknown; nil when no element's line is known.
	elementLine func(k string, b int) int
	m           map[string]any
}

func (t table) lineOf(k string) int {
	if l, ok := t.keyLines[k]; ok {
		return l
	}
	return t.line
}

// bucketLine is the line to name for err, a fault of key k's schedule:
// that of the bucket it is about where that is known (a schedule written
// over several lines), else the key's.
func (t table) bucketLine(k string, err error) int {
	if b := schedule.BucketOf(err); b > 0 && t.elementLine != nil {
		if l := t.elementLine(k, b); l > 0 {
			return l
		}
	}
	return t.lineOf(k)
}

func (t table) errAt(line int, format string, args ...any) *ParseError {
	return &ParseError{t.file, line, fmt.Sprintf(format, args...)}
}

func (t table) errf(k string, format string, args ...any) *ParseError {
	return t.errAt(t.lineOf(k), format, args...)
}

// tables returns the elements of the array of tables named name ([[name]]).
func tables(file string, raw map[string]any, name string, ix tomlpos.Index) ([]table, error) {
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
	regs, top := ix.Elements(name), ix.TopLine(name)
	out := make([]table, len(ms))
	for i, m := range ms {
		t := table{file: file, label: "[[" + name + "]]", line: top, m: m}
		if len(regs) == len(ms) {
			t.line, t.keyLines = regs[i].Line, regs[i].Keys
			t.elementLine = func(k string, b int) int { return ix.ElementLine(fmt.Sprintf("%s[%d].%s", name, i, k), b) }
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
	byKey := map[entryKey]Entry{}
	for _, t := range ts {
		e, err := parseEntry(t)
		if err != nil {
			return nil, err
		}
		if first, dup := byID[e.ID]; dup {
			return nil, t.errf("id", "duplicate entry id %q (first at %s); ids must be unique: rename one", e.ID, first.Origin)
		}
		if first, dup := byKey[keyOf(e)]; dup {
			return nil, t.errAt(t.line, "entry %q has the same key (%s) as entry %q at %s; keep one (a later policy file may replace it instead)", e.ID, e.Key, first.ID, first.Origin)
		}
		byID[e.ID], byKey[keyOf(e)] = e, e
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
	c, q, err := t.hostKey()
	if err != nil {
		return Entry{}, err
	}
	w, sched, err := t.widthOrSchedule()
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
	rec, recs, err := t.records()
	if err != nil {
		return Entry{}, err
	}
	cost, err := t.cost(recs)
	if err != nil {
		return Entry{}, err
	}
	note, _, err := t.str("note", "")
	if err != nil {
		return Entry{}, err
	}
	pair, tuned, err := t.pair(strings.TrimSpace(pin))
	if err != nil {
		return Entry{}, err
	}
	return Entry{
		Pair:     pair,
		Tuned:    tuned,
		ID:       id,
		Key:      key.Key{Engine: e, Drafter: d, Capability: c, Quant: q},
		Width:    w,
		Schedule: sched,
		Pin:      strings.TrimSpace(pin),
		Record:   rec,
		Records:  recs,
		RunnerUp: ru,
		Cost:     cost,
		Note:     note,
		Origin:   origin(t.file, t.line),
	}, nil
}

// pair reads a tuned entry's pair: target_sha256 and draft_sha256 (64
// hex digits each, both or neither) and the date it was tuned; the pin is
// the entry's own.
func (t table) pair(pin string) (Pair, string, error) {
	tgt, hasT, err := t.str("target_sha256", "")
	if err != nil {
		return Pair{}, "", err
	}
	dr, hasD, err := t.str("draft_sha256", "")
	if err != nil {
		return Pair{}, "", err
	}
	tuned, _, err := t.str("tuned", "")
	if err != nil {
		return Pair{}, "", err
	}
	switch {
	case !t.tunedEntry():
		return Pair{}, "", nil
	case !hasT || !hasD:
		return Pair{}, "", t.errf("target_sha256", "a tuned entry names both models by content: give target_sha256 and draft_sha256 (speclaunch tune writes them), or neither")
	case !sha256Pattern.MatchString(tgt):
		return Pair{}, "", t.errf("target_sha256", "target_sha256 %q is not 64 lowercase hex digits; delete the entry and re-run speclaunch tune to write it again", tgt)
	case !sha256Pattern.MatchString(dr):
		return Pair{}, "", t.errf("draft_sha256", "draft_sha256 %q is not 64 lowercase hex digits; delete the entry and re-run speclaunch tune to write it again", dr)
	}
	return Pair{Target: tgt, Draft: dr, Pin: pin}, tuned, nil
}

var sha256Pattern = regexp.MustCompile(`^[0-9a-f]{64}$`)

// widthOrSchedule reads an entry's answer: `width = W`, or `schedule =
// [[lo, hi, width], ...]` in its place (hi 0 = no upper bound, width 1 =
// speculation off at that load). The width of a schedule entry is the
// one Entry.Width documents.
func (t table) widthOrSchedule() (int, schedule.Schedule, error) {
	v, has := t.m["schedule"]
	if _, hasWidth := t.m["width"]; !has && !hasWidth {
		// An entry takes either: "is missing width" left schedule unsaid.
		return 0, nil, t.errAt(t.line, "%s is missing width or schedule: give the verify-block width, 2 to 256, e.g. width = 4, or the width by load, e.g. schedule = [[1, 1, 6], [2, 0, 4]] ([lo, hi, width] buckets, hi 0 = no upper bound)", t.label)
	}
	if !has {
		w, _, err := t.width("width", true)
		return w, nil, err
	}
	if _, both := t.m["width"]; both {
		return 0, nil, t.errf("schedule", "an entry gives width or schedule, not both: keep schedule (a width is the one-bucket schedule [[1, 0, W]]) or keep width")
	}
	s, err := scheduleOf(v)
	if err != nil {
		return 0, nil, t.errAt(t.bucketLine("schedule", err), "%s", badSchedule(err))
	}
	if s.Max() < key.MinWidth {
		return 0, nil, t.errf("schedule", "schedule is off (width 1) at every load, which a policy never does: give at least one bucket a width of %d or more (to run without speculation, remove the draft model instead)", key.MinWidth)
	}
	w := s.At(1).Width
	if w < key.MinWidth {
		w = s.Max()
	}
	return w, s, nil
}

// badSchedule is the message for every fault of an entry's schedule,
// found by scheduleOf or by the decoder before it (syntaxError): why, and
// the form with an example.
func badSchedule(err error) string {
	return "schedule: " + err.Error() + "; write it as [lo, hi, width] buckets, e.g. schedule = [[1, 1, 6], [2, 3, 4], [4, 0, 1]]: from load 1 up, without gaps or overlaps, hi 0 = no upper bound, width 1 = speculation off at that load"
}

// scheduleOf reads a decoded TOML array of [lo, hi, width] triples.
func scheduleOf(v any) (schedule.Schedule, error) {
	rows, err := list(v)
	if err != nil {
		return nil, err
	}
	ts, err := schedule.TriplesOf(rows)
	if err != nil {
		return nil, err
	}
	return schedule.FromTriples(ts, "measured")
}

// hostKey reads the host half of an entry's key: the compute capability
// and the target's quantization.
func (t table) hostKey() (key.Capability, key.Quant, error) {
	cs, _, err := t.str("capability", `name the CUDA compute capability measured, e.g. capability = "12.1"`)
	if err != nil {
		return key.Capability{}, "", err
	}
	c, err := key.ParseCapability(cs)
	switch {
	case errors.Is(err, key.ErrCapabilityRange):
		return key.Capability{}, "", t.errf("capability", "capability: %v", err)
	case err != nil || c.String() != cs:
		return key.Capability{}, "", t.errf("capability", "capability %q must be written MAJOR.MINOR, e.g. \"12.1\" for GB10 or \"9.0\" for H200", cs)
	}
	qs, _, err := t.str("quant", `name the target quantization measured, e.g. quant = "affine"`)
	if err != nil {
		return key.Capability{}, "", err
	}
	q, err := key.ParseQuant(qs)
	if err != nil {
		return key.Capability{}, "", t.errf("quant", "quant: %v; use one of the known names", err)
	}
	if q == key.QuantUnknown {
		return key.Capability{}, "", t.errf("quant", "quant \"unknown\" cannot key an entry: it means the target could not be read, which is never measured; name the quantization the record measured, e.g. \"affine\"")
	}
	return c, q, nil
}

// records reads `record` (one path, the schema before cross-pair entries)
// and `records` (every record the entry rests on); at least one is given,
// and a `record` given beside `records` must be among them.
func (t table) records() (string, []string, error) {
	missing := `every entry names the committed records that earned it, e.g. records = ["docs/benchmark_results/<pair-a>.md", "docs/benchmark_results/<pair-b>.md"] (or record = "..." for one)`
	if t.tunedEntry() {
		missing = `a tuned entry names the record speclaunch tune wrote beside this file, e.g. record = "records/<name>.md"`
	}
	one, hasOne, err := t.str("record", "")
	if err != nil {
		return "", nil, err
	}
	if hasOne {
		if err := t.recordPath("record", one); err != nil {
			return "", nil, err
		}
	}
	v, hasMany := t.m["records"]
	if !hasOne && !hasMany {
		return "", nil, t.errAt(t.line, "%s is missing records: %s", t.label, missing)
	}
	if !hasMany {
		return one, []string{one}, nil
	}
	items, ok := v.([]any)
	if !ok {
		if ss, isStrs := v.([]string); isStrs {
			for _, s := range ss {
				items = append(items, s)
			}
		} else {
			return "", nil, t.errf("records", "records must be an array of strings, not a %s: %s", typeName(v), missing)
		}
	}
	if len(items) == 0 {
		return "", nil, t.errf("records", "records is empty: %s", missing)
	}
	var out []string
	seen := make(map[string]bool, len(items)) // a policy file may list many: no quadratic scan
	for _, it := range items {
		s, isStr := it.(string)
		if !isStr {
			return "", nil, t.errf("records", "records must hold strings (record paths), not a %s", typeName(it))
		}
		if err := t.recordPath("records", s); err != nil {
			return "", nil, err
		}
		if seen[s] {
			return "", nil, t.errf("records", "record %q is listed twice in records; list each once", s)
		}
		seen[s] = true
		out = append(out, s)
	}
	if hasOne && !seen[one] {
		return "", nil, t.errf("record", "record %q is not among records; drop record (records lists every record) or add it to records", one)
	}
	if hasOne && one != out[0] {
		// keep record first: it is the record older tools read
		out = append([]string{one}, slices.DeleteFunc(out, func(s string) bool { return s == one })...)
	}
	return out[0], out, nil
}

func (t table) recordPath(k, rec string) error {
	if !strings.HasSuffix(rec, ".md") || path.IsAbs(rec) || path.Clean(rec) != rec || strings.HasPrefix(rec, "../") {
		return t.errf(k, "record %q must be %s (its .json twin sits beside it)", rec, t.recordRule())
	}
	return nil
}

// recordRule says what an entry's record path is relative to, with an
// example that fits it: a tuned entry's (one that names its pair) is
// relative to its file's directory, where tune writes records/
// (Entry.RecordPath); any other's to the repository.
func (t table) recordRule() string {
	if t.tunedEntry() {
		return `the path of the record's .md relative to this file's directory, e.g. "records/<name>.md" (where speclaunch tune writes it)`
	}
	return `the repository-relative path of the record's .md, e.g. "docs/benchmark_results/<name>.md"`
}

// tunedEntry says whether the entry is a tuned one: it gives any of
// target_sha256, draft_sha256 and tuned (what tune writes), and pair then
// reads them.
func (t table) tunedEntry() bool {
	return slices.ContainsFunc([]string{"target_sha256", "draft_sha256", "tuned"}, func(k string) bool { _, ok := t.m[k]; return ok })
}

// cost reads the entry's cost tables: one inline table per record,
// { record = "...", classic_ms = 3.11, widths = [2, 3], ms_per_cycle = [3.94, 4.73] }.
func (t table) cost(records []string) ([]CostRow, error) {
	v, ok := t.m["cost"]
	if !ok {
		return nil, nil
	}
	var ms []map[string]any
	switch a := v.(type) {
	case []map[string]any:
		ms = a
	case []any:
		for _, e := range a {
			m, isMap := e.(map[string]any)
			if !isMap {
				return nil, t.errf("cost", "cost must be an array of inline tables, but an element is a %s; %s", typeName(e), costShape)
			}
			ms = append(ms, m)
		}
	default:
		return nil, t.errf("cost", "cost must be an array of inline tables, not a %s; %s", typeName(v), costShape)
	}
	var out []CostRow
	listed := make(map[string]bool, len(records))
	for _, r := range records {
		listed[r] = true
	}
	costed := map[string]bool{}
	for i, m := range ms {
		at := fmt.Sprintf("cost[%d]", i)
		for k := range m {
			if !slices.Contains(costKeys, k) {
				return nil, t.errf("cost", "unknown key %q in %s (known: %s)", k, at, strings.Join(costKeys, ", "))
			}
		}
		rec, isStr := m["record"].(string)
		if !isStr || !listed[rec] {
			return nil, t.errf("cost", "%s must name one of the entry's records in record (got %v); %s", at, m["record"], costShape)
		}
		if costed[rec] {
			return nil, t.errf("cost", "%s repeats the cost table of %s; give one per record", at, rec)
		}
		costed[rec] = true
		row, err := t.costRow(at, m)
		if err != nil {
			return nil, err
		}
		row.Record = rec
		out = append(out, row)
	}
	return out, nil
}

const costShape = `write cost = [{ record = "docs/benchmark_results/<name>.md", classic_ms = 3.11, widths = [2, 3], ms_per_cycle = [3.94, 4.73] }] (speclaunch policy propose writes it)`

// costRow reads one cost table's figures (at names it in errors).
func (t table) costRow(at string, m map[string]any) (CostRow, error) {
	var row CostRow
	if c, has := m["classic_ms"]; has {
		f, err := asPositive(c)
		if err != nil {
			return row, t.errf("cost", "%s classic_ms %v", at, err)
		}
		row.ClassicMS = f
	}
	ws, err := list(m["widths"])
	if err != nil {
		return row, t.errf("cost", "%s widths %v; %s", at, err, costShape)
	}
	for j, w := range ws {
		n, err := asInt(w)
		if err != nil || n < key.MinWidth || n > key.MaxWidth {
			return row, t.errf("cost", "%s widths[%d] = %v: want a width from %d to %d", at, j, w, key.MinWidth, key.MaxWidth)
		}
		if j > 0 && int(n) <= row.Widths[j-1] {
			return row, t.errf("cost", "%s widths must ascend, each once (%d after %d)", at, n, row.Widths[j-1])
		}
		row.Widths = append(row.Widths, int(n))
	}
	xs, err := list(m["ms_per_cycle"])
	if err != nil {
		return row, t.errf("cost", "%s ms_per_cycle %v; %s", at, err, costShape)
	}
	if len(xs) != len(row.Widths) {
		return row, t.errf("cost", "%s has %d widths but %d ms_per_cycle figures; give one per width", at, len(row.Widths), len(xs))
	}
	for j, x := range xs {
		f, err := asPositive(x)
		if err != nil {
			return row, t.errf("cost", "%s ms_per_cycle[%d] %v", at, j, err)
		}
		row.MS = append(row.MS, f)
	}
	return row, nil
}

// list accepts a decoded TOML array.
func list(v any) ([]any, error) {
	switch a := v.(type) {
	case []any:
		return a, nil
	case nil:
		return nil, errors.New("is missing")
	}
	return nil, fmt.Errorf("must be an array, not a %s", typeName(v))
}

// asPositive accepts a TOML float or integer above zero (milliseconds).
func asPositive(v any) (float64, error) {
	var f float64
	switch n := v.(type) {
	case float64:
		f = n
	case int64:
		f = float64(n)
	case int:
		f = float64(n)
	default:
		return 0, fmt.Errorf("must be a number of milliseconds, not a %s", typeName(v))
	}
	if !(f > 0) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%v must be above 0", f)
	}
	return f, nil
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
