package policy

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// TunedHeader opens the tuned layer `speclaunch tune` writes.
const TunedHeader = `# speclaunch's tuned layer: schedules measured by ` + "`speclaunch tune`" + ` on the
# operator's own model pairs. Each entry applies only to the pair it names
# (target_sha256, draft_sha256) on the engine build it names (pin), and
# answers before the embedded policy's measured entries; operator policy
# files and profiles layer over it (docs/schedule.md). Re-running tune on a
# pair on the same GPU and target format replaces its entry; one on another
# GPU adds one; edit or delete entries freely (tune rewrites the
# file, so comments you add are not kept). Records sit beside this file,
# their paths relative to it.
`

// WithTuned is the layer's entries with e in place of any entry of the
// same key and pair, or of the same id (a re-run replaces its pair's
// entry), else added at the end.
func WithTuned(entries []Entry, e Entry) []Entry {
	out := make([]Entry, 0, len(entries)+1)
	placed := false
	for _, x := range entries {
		if keyOf(x) == keyOf(e) || x.ID == e.ID {
			if !placed {
				out, placed = append(out, e), true
			}
			continue
		}
		out = append(out, x)
	}
	if !placed {
		out = append(out, e)
	}
	return out
}

// RenderTuned renders a tuned layer: the header, schema 1 and one [[entry]]
// per entry. Parse reads back exactly these entries; the caller checks
// that before writing.
func RenderTuned(entries []Entry) []byte {
	var b bytes.Buffer
	b.WriteString(TunedHeader)
	b.WriteString("\nschema = 1\n")
	for _, e := range entries {
		fmt.Fprintf(&b, "\n[[entry]]\nid = %s\n", strconv.Quote(e.ID))
		fmt.Fprintf(&b, "engine = %s\ndrafter = %s\ncapability = %s\nquant = %s\n",
			strconv.Quote(string(e.Key.Engine)), strconv.Quote(string(e.Key.Drafter)), strconv.Quote(e.Key.Capability.String()), strconv.Quote(string(e.Key.Quant)))
		if len(e.Schedule) > 0 {
			parts := make([]string, len(e.Schedule))
			for i, bk := range e.Schedule {
				parts[i] = fmt.Sprintf("[%d, %d, %d]", bk.Lo, bk.Hi, bk.Width)
			}
			fmt.Fprintf(&b, "schedule = [%s]\n", strings.Join(parts, ", "))
		} else {
			fmt.Fprintf(&b, "width = %d\n", e.Width)
		}
		fmt.Fprintf(&b, "pin = %s\n", strconv.Quote(e.Pin))
		if !e.Pair.IsZero() {
			fmt.Fprintf(&b, "target_sha256 = %s\ndraft_sha256 = %s\n", strconv.Quote(e.Pair.Target), strconv.Quote(e.Pair.Draft))
		}
		if e.Tuned != "" {
			fmt.Fprintf(&b, "tuned = %s\n", strconv.Quote(e.Tuned))
		}
		fmt.Fprintf(&b, "record = %s\n", strconv.Quote(e.Record))
		if e.Note != "" {
			fmt.Fprintf(&b, "note = %s\n", strconv.Quote(e.Note))
		}
	}
	return b.Bytes()
}

// RecordPath is where the entry's record is on this machine
// (RecordFile).
func (e Entry) RecordPath() string {
	path, _ := e.RecordFile(e.Record)
	return path
}

// RecordFile is where rec, one of the entry's records as the entry lists
// it, is on this machine, and whether that is beside the entry's file: a
// tuned entry's records sit beside its layer (their paths are relative to
// the layer's directory, where tune writes records/); any other entry's
// are relative to the repository, and rec is returned as it is. resolve,
// policy explain and policy check all read a record's place here.
func (e Entry) RecordFile(rec string) (path string, beside bool) {
	if e.Pair.IsZero() || rec == "" {
		return rec, false
	}
	file := e.Origin
	if i := strings.LastIndexByte(file, ':'); i > 0 {
		file = file[:i]
	}
	if file == "" {
		return rec, true
	}
	return filepath.Join(filepath.Dir(file), filepath.FromSlash(rec)), true
}
