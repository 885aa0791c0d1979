package cuda

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/key"
)

// nvidia-smi-real.txt holds the real driver's answers on an H200
// (2026-11-30) to the launcher's two queries, the device query first, then
// a "--- compute_cap" line, then the compute_cap query.
func readH200SMI(t *testing.T) (devices, caps string) {
	t.Helper()
	b, err := os.ReadFile("../engine/testdata/h200/nvidia-smi-real.txt")
	if err != nil {
		t.Fatal(err)
	}
	devices, caps, ok := strings.Cut(string(b), "--- compute_cap\n")
	if !ok {
		t.Fatal("nvidia-smi-real.txt has no --- compute_cap line")
	}
	return devices, caps
}

func TestH200RealNvidiaSMI(t *testing.T) {
	devices, caps := readH200SMI(t)
	want := GPU{Index: 0, Name: "NVIDIA H200", UUID: "GPU-9b6acbf3-463e-e0e5-d0ec-e7764b1d43d8", Driver: "580.159.04"}
	gpus, err := parseDevices(devices)
	if err != nil || len(gpus) != 1 || gpus[0] != want {
		t.Fatalf("parseDevices = %+v, %v; want [%+v]", gpus, err, want)
	}
	cm, err := parseCaps(caps)
	if err != nil || len(cm) != 1 || cm[0] != (key.Capability{Major: 9, Minor: 0}) || cm[0].String() != "9.0" {
		t.Fatalf("parseCaps = %v, %v; want map[0:9.0]", cm, err)
	}

	// The whole probe, with the real bytes served by a stand-in nvidia-smi.
	r := Probe(context.Background(), Options{Binary: fakeSMI(t, devices, caps, 0), LookupEnv: env(nil)})
	if r.Capability.String() != "9.0" || r.Reason != "" || r.Driver != "580.159.04" || len(r.GPUs) != 1 {
		t.Fatalf("Probe = %+v", r)
	}
	if g := r.GPUs[0]; g.Name != "NVIDIA H200" || !g.CapKnown || g.Capability.SM() != "sm_90" {
		t.Errorf("Probe GPU = %+v", g)
	}
}
