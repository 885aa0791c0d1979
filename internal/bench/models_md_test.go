package bench

import (
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/record"
)

// A drafter that is the target's own layers (llama.cpp's embedded MTP)
// has no path, shown as a dash, and a content hash of its own method,
// said beside the target's: the record said only the last model's
// method, the target's lost, and showed an empty path as two backquotes.
func TestModelsOfAnEmbeddedDrafter(t *testing.T) {
	md := &mdWriter{rec: &record.Record{Models: []record.Model{
		{Role: "target", Path: "t.gguf", Content: strings.Repeat("a", 64), ContentMethod: "sha256 of the file"},
		{Role: "draft", Content: strings.Repeat("b", 64), ContentMethod: "the target's own layers", Kind: "mtp"},
	}}}
	md.models()
	got := md.String()
	for _, want := range []string{
		"| target | `t.gguf` |",
		"| draft | — | — | `bbbbbbbbbbbb` |",
		"Content hash: sha256 of the file.\n\nContent hash of the draft: the target's own layers.\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "``") {
		t.Errorf("an empty path shown:\n%s", got)
	}
}
