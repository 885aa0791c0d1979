package policy

import (
	"errors"
	"os"
	"slices"
	"testing"

	"github.com/speclaunch/speclaunch/internal/key"
)

// FuzzParse: no input panics; every error is a *ParseError; whatever is
// accepted obeys the schema's invariants and survives Merge and Explain.
func FuzzParse(f *testing.F) {
	if data, err := os.ReadFile("../../policy.toml"); err == nil {
		f.Add(data)
	}
	for _, s := range []string{
		"", "schema = 1", "schema = 1\n" + validEntry, entryWith("width", "1"), entryWith("quant", `"unknown"`),
		"schema = 1\ndefault = [{engine = \"sim\", drafter = \"mtp\", width = 4}]\n",
		"schema = 1\n[default]\nx = 1\n", "schema = 1\n[[entry]]\n'''\n", "schema = 1\nentry = [1]\n",
		"schema = 1\n[[entry]]\nid = \"\"\"\nmulti\n\"\"\"\n", "\"schema\" = 1\n[[ 'entry' ]]\n\"id\" = 3\n",
	} {
		f.Add([]byte(s))
	}
	// The contents of the wrong files an operator may name: what /dev/zero
	// gives, a binary file, and a policy of many entries.
	f.Add(make([]byte, 4096))
	f.Add([]byte("GGUF\x03\x00\x00\x00\xff\xff"))
	f.Add(bigPolicy(200, "fz"))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse("fuzz.toml", data)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || pe.File != "fuzz.toml" || pe.Msg == "" || pe.Line < 0 {
				t.Fatalf("bad error %T %v", err, err)
			}
			return
		}
		if file.Schema != SchemaVersion {
			t.Fatalf("schema %d accepted", file.Schema)
		}
		for _, d := range file.Defaults {
			if d.Width < key.MinWidth || d.Width > key.MaxWidth || d.Engine == "" || d.Drafter == "" {
				t.Fatalf("invalid default accepted: %+v", d)
			}
		}
		ids := map[string]bool{}
		keys := map[key.Key]bool{}
		for _, e := range file.Entries {
			if len(e.Records) == 0 || e.Records[0] != e.Record {
				t.Fatalf("entry's record %q is not the first of its records %q", e.Record, e.Records)
			}
			for _, c := range e.Cost {
				if len(c.Widths) != len(c.MS) || !slices.Contains(e.Records, c.Record) {
					t.Fatalf("invalid cost row accepted: %+v", c)
				}
			}
			if e.Width < key.MinWidth || e.Width > key.MaxWidth || e.ID == "" || e.Pin == "" || e.Record == "" ||
				!e.Key.Capability.Known() || e.Key.Quant == key.QuantUnknown || ids[e.ID] || keys[e.Key] {
				t.Fatalf("invalid entry accepted: %+v", e)
			}
			ids[e.ID], keys[e.Key] = true, true
		}
		p := Merge(file, file)
		for _, e := range file.Entries {
			if got := p.Lookup(e.Key); got == nil || got.ID != e.ID {
				t.Fatalf("merged policy lost %+v", e)
			}
			_ = p.Explain(e.Key)
		}
	})
}
