package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/speclaunch/speclaunch/internal/config"
	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/plan"
)

// A record of embedded MTP (llama.cpp's mtp kind, no draft model) names
// its drafter as the target's own layers, hashed as the pair hashes it
// (plan.EmbeddedSum), with no note that a draft model could not be hashed.
func TestRecordModelsOfAnEmbeddedDrafter(t *testing.T) {
	target := filepath.Join(t.TempDir(), "t.gguf")
	if err := os.WriteFile(target, []byte("weights"), 0o644); err != nil {
		t.Fatal(err)
	}
	var s config.Settings
	s.Engine.Value, s.Model.Value, s.DraftKind.Value = key.LlamaCpp, target, "draft-mtp"
	f := plan.Facts{Drafter: key.MTP, DrafterSource: "flag --spec-type", Embedded: true, DrafterFrom: plan.EmbeddedFrom(key.MTP)}
	var notes []string
	ms := recordModels(s, f, &notes)
	pair, err := plan.PairOf(key.LlamaCpp, target, "", f.Caps)
	if err != nil {
		t.Fatal(err)
	}
	d := ms[1]
	if len(notes) != 0 || d.Role != "draft" || d.Path != "" || d.Content != pair.Draft || ms[0].Content != pair.Target ||
		d.Note != "flag --spec-type; the target's own MTP layers (no draft model)" {
		t.Errorf("models %+v, notes %q; pair %+v", ms, notes, pair)
	}
}
