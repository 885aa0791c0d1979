package serve

import (
	"errors"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/cuda"
	"github.com/speclaunch/speclaunch/internal/key"
)

func TestChooseSwitch(t *testing.T) {
	gpu := func(free int64) cuda.Memory { return cuda.Memory{FreeMiB: free, TotalMiB: 143771} }
	for _, c := range []struct {
		name string
		mode key.Switch
		f    switchFacts
		want key.Switch
		why  string
	}{
		{"explicit overlap", "overlap", switchFacts{Engine: key.LlamaCpp, MemErr: errors.New("x")}, "overlap", "server.switch = overlap"},
		{"explicit drain", "drain", switchFacts{Engine: key.Sim}, "drain", "server.switch = drain"},
		{"sim", "auto", switchFacts{Engine: key.Sim}, "overlap", "no GPU memory"},
		{"no nvidia-smi", "auto", switchFacts{Engine: key.LlamaCpp, MemErr: errors.New("nvidia-smi not found")}, "drain", "GPU memory unknown (nvidia-smi not found)"},
		{"engine fits twice", "auto", switchFacts{Engine: key.LlamaCpp, Mem: gpu(100000), EngineMiB: 9000}, "overlap", "the serving engine holds 9000 MiB, 100000 MiB free"},
		{"engine does not fit", "auto", switchFacts{Engine: key.LlamaCpp, Mem: gpu(9500), EngineMiB: 9000}, "drain", "would not fit: the serving engine holds 9000 MiB, 9500 MiB free"},
		{"headroom boundary", "auto", switchFacts{Engine: key.LlamaCpp, Mem: gpu(9900), EngineMiB: 9000}, "overlap", "fits"},
		{"files when the engine's use is unknown", "auto", switchFacts{Engine: key.LlamaCpp, Mem: gpu(1000), ModelBytes: 2 << 30}, "drain", "the model files take 2048 MiB"},
		{"files fit", "auto", switchFacts{Engine: key.MLXCEL, Mem: gpu(100000), ModelBytes: 2 << 30}, "overlap", "the model files take 2048 MiB"},
		{"nothing known", "auto", switchFacts{Engine: key.LlamaCpp, Mem: gpu(100000)}, "drain", "neither"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, why := chooseSwitch(c.mode, c.f)
			if got != c.want || !strings.Contains(why, c.why) {
				t.Errorf("chooseSwitch = %s (%s), want %s (…%s…)", got, why, c.want, c.why)
			}
		})
	}
}
