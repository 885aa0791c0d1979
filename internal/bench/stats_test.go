package bench

import (
	"testing"

	"github.com/speclaunch/speclaunch/internal/record"
)

func TestPairedDelta(t *testing.T) {
	if d, ok := PairedDelta(110, []float64{100, 100}); !ok || d < 0.0999 || d > 0.1001 {
		t.Errorf("got %v %v", d, ok)
	}
	if d, ok := PairedDelta(90, []float64{95, 105}); !ok || d > -0.0999 || d < -0.1001 {
		t.Errorf("got %v %v", d, ok)
	}
	if _, ok := PairedDelta(90, nil); ok {
		t.Error("a round without classic paired")
	}
}

func TestEntryID(t *testing.T) {
	for _, tc := range []struct{ gpu, capab, quant, drafter, want string }{
		{"NVIDIA H200", "9.0", "q4_0", "draft", "h200-q4_0-draft"},
		{"NVIDIA GB10", "12.1", "affine", "dflash", "gb10-affine-dflash"},
		{"NVIDIA GeForce RTX 4090", "8.9", "q8_0", "draft", "rtx4090-q8_0-draft"},
		{"NVIDIA A100-SXM4-80GB", "8.0", "f16", "draft", "a100-f16-draft"},
		{"", "12.1", "affine", "dflash", "sm121-affine-dflash"},
	} {
		rec := &record.Record{Host: record.Host{GPU: tc.gpu}, Key: record.Key{Capability: tc.capab, Quant: tc.quant, Drafter: tc.drafter}}
		if got := EntryID(rec); got != tc.want {
			t.Errorf("EntryID(%q) = %q, want %q", tc.gpu, got, tc.want)
		}
	}
}
