package cuda

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/key"
)

// fakeSMI writes a shell script standing in for nvidia-smi: devices is
// printed for the device query, caps for the compute_cap query (capsExit
// is its exit status).
func fakeSMI(t *testing.T, devices, caps string, capsExit int) string {
	t.Helper()
	dir := t.TempDir()
	script := "#!/bin/sh\n" +
		"case \"$1\" in\n" +
		"  --query-gpu=index,name,uuid,driver_version) printf '%s' '" + devices + "' ;;\n" +
		"  --query-gpu=index,compute_cap) printf '%s' '" + caps + "'; exit " + itoa(capsExit) + " ;;\n" +
		"  *) echo \"unexpected args: $*\" >&2; exit 9 ;;\n" +
		"esac\n"
	p := filepath.Join(dir, "nvidia-smi")
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func itoa(n int) string { return strconv.Itoa(n) }

func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "nvidia-smi")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

const (
	h200     = "0, NVIDIA H200, GPU-8932f937-d72c-4106-c12f-20bd9faed9f6, 580.159.04\n"
	h200x2   = h200 + "1, NVIDIA H200, GPU-11111111-2222-3333-4444-555555555555, 580.159.04\n"
	h200gb10 = h200 + "1, NVIDIA GB10, GPU-abcdef00-2222-3333-4444-555555555555, 580.159.04\n"
	oldField = `Field "compute_cap" is not a valid field to query.`
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestProbe(t *testing.T) {
	sm90 := key.Capability{Major: 9}
	tests := []struct {
		name     string
		bin      func(t *testing.T) string
		env      map[string]string
		wantCap  key.Capability
		wantGPUs []int  // visible indices
		reason   string // substring of Reason, "" = Reason must be empty
		driver   string
	}{
		{"one H200", func(t *testing.T) string { return fakeSMI(t, h200, "0, 9.0\n", 0) },
			nil, sm90, []int{0}, "", "580.159.04"},
		{"two identical", func(t *testing.T) string { return fakeSMI(t, h200x2, "0, 9.0\n1, 9.0\n", 0) },
			nil, sm90, []int{0, 1}, "", "580.159.04"},
		{"crlf and padding", func(t *testing.T) string {
			return fakeSMI(t, "\r\n  0 ,  NVIDIA H200 , GPU-8932f937 , 580.159.04  \r\n\r\n", "\r\n0 , 9.0 \r\n", 0)
		}, nil, sm90, []int{0}, "", "580.159.04"},
		{"two differing", func(t *testing.T) string { return fakeSMI(t, h200gb10, "0, 9.0\n1, 12.1\n", 0) },
			nil, key.None, []int{0, 1}, "2 visible GPUs disagree: 9.0 and 12.1", "580.159.04"},
		{"old driver without compute_cap", func(t *testing.T) string {
			return fakeSMI(t, strings.ReplaceAll(h200, "580.159.04", "470.82.01"), oldField+"\n", 2)
		}, nil, key.None, []int{0}, "driver too old to report compute_cap (driver 470.82.01", "470.82.01"},
		{"compute_cap N/A", func(t *testing.T) string { return fakeSMI(t, h200, "0, [N/A]\n", 0) },
			nil, key.None, []int{0}, "does not report its compute capability", "580.159.04"},
		{"missing binary", func(t *testing.T) string { return "nvidia-smi-does-not-exist-here" },
			nil, key.None, nil, "nvidia-smi-does-not-exist-here not found on PATH", ""},
		{"missing binary by path", func(t *testing.T) string { return filepath.Join(t.TempDir(), "nvidia-smi") },
			nil, key.None, nil, "is not runnable", ""},
		{"garbage output", func(t *testing.T) string { return fakeSMI(t, "<html>hello</html>\n", "", 0) },
			nil, key.None, nil, "nvidia-smi printed unparseable output", ""},
		{"garbage caps", func(t *testing.T) string { return fakeSMI(t, h200, "0, nine\n", 0) },
			nil, key.None, []int{0}, "nvidia-smi printed unparseable output", "580.159.04"},
		{"driver not loaded", func(t *testing.T) string {
			return script(t, `echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."; exit 9`)
		}, nil, key.None, nil, "couldn't communicate with the NVIDIA driver", ""},
		{"no devices", func(t *testing.T) string { return script(t, `echo "No devices were found"; exit 6`) },
			nil, key.None, nil, "No devices were found", ""},
		{"empty list", func(t *testing.T) string { return fakeSMI(t, "\n", "", 0) },
			nil, key.None, nil, "nvidia-smi lists no GPU", ""},
		{"CVD by index hides the odd GPU", func(t *testing.T) string { return fakeSMI(t, h200gb10, "0, 9.0\n1, 12.1\n", 0) },
			map[string]string{"CUDA_VISIBLE_DEVICES": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"},
			key.Capability{Major: 12, Minor: 1}, []int{1}, "", "580.159.04"},
		{"CVD by index on mixed host without PCI order", func(t *testing.T) string { return fakeSMI(t, h200gb10, "0, 9.0\n1, 12.1\n", 0) },
			map[string]string{"CUDA_VISIBLE_DEVICES": "1"}, key.None, []int{1}, "CUDA_DEVICE_ORDER=PCI_BUS_ID", "580.159.04"},
		{"CVD by index on uniform host", func(t *testing.T) string { return fakeSMI(t, h200x2, "0, 9.0\n1, 9.0\n", 0) },
			map[string]string{"CUDA_VISIBLE_DEVICES": "1"}, sm90, []int{1}, "", "580.159.04"},
		{"CVD by UUID prefix", func(t *testing.T) string { return fakeSMI(t, h200gb10, "0, 9.0\n1, 12.1\n", 0) },
			map[string]string{"CUDA_VISIBLE_DEVICES": "GPU-8932f937"}, sm90, []int{0}, "", "580.159.04"},
		{"CVD by full UUID, reordered", func(t *testing.T) string { return fakeSMI(t, h200x2, "0, 9.0\n1, 9.0\n", 0) },
			map[string]string{"CUDA_VISIBLE_DEVICES": "GPU-11111111-2222-3333-4444-555555555555,0"}, sm90, []int{1, 0}, "", "580.159.04"},
		{"CVD invalid entry ends the list", func(t *testing.T) string { return fakeSMI(t, h200gb10, "0, 9.0\n1, 12.1\n", 0) },
			map[string]string{"CUDA_VISIBLE_DEVICES": "0,7,1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, sm90, []int{0}, "", "580.159.04"},
		{"CVD empty", func(t *testing.T) string { return fakeSMI(t, h200, "0, 9.0\n", 0) },
			map[string]string{"CUDA_VISIBLE_DEVICES": ""}, key.None, nil, "CUDA_VISIBLE_DEVICES is empty: no GPU visible", "580.159.04"},
		{"CVD -1", func(t *testing.T) string { return fakeSMI(t, h200, "0, 9.0\n", 0) },
			map[string]string{"CUDA_VISIBLE_DEVICES": "-1"}, key.None, nil, "no GPU visible", "580.159.04"},
		{"CVD matches nothing", func(t *testing.T) string { return fakeSMI(t, h200, "0, 9.0\n", 0) },
			map[string]string{"CUDA_VISIBLE_DEVICES": "3"}, key.None, nil, "matches no GPU", "580.159.04"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := tt.env
			if e == nil {
				e = map[string]string{}
			}
			got := Probe(context.Background(), Options{Binary: tt.bin(t), Timeout: 5 * time.Second, LookupEnv: env(e)})
			if got.Capability != tt.wantCap {
				t.Errorf("Capability = %v, want %v (reason %q)", got.Capability, tt.wantCap, got.Reason)
			}
			if tt.reason == "" && got.Reason != "" {
				t.Errorf("Reason = %q, want none", got.Reason)
			}
			if !strings.Contains(got.Reason, tt.reason) {
				t.Errorf("Reason = %q, want it to contain %q", got.Reason, tt.reason)
			}
			var idx []int
			for _, g := range got.GPUs {
				idx = append(idx, g.Index)
			}
			if !slices.Equal(idx, tt.wantGPUs) {
				t.Errorf("visible GPUs = %v, want %v", idx, tt.wantGPUs)
			}
			if got.Driver != tt.driver {
				t.Errorf("Driver = %q, want %q", got.Driver, tt.driver)
			}
		})
	}
}

// A wedged nvidia-smi whose grandchild keeps the pipes open must not hold
// the probe past its timeout. The bound judges no speed: a probe that
// waits for the pipes waits for the grandchild's 30 s, and 20 s only ends
// that wait (the probe itself takes the timeout and WaitDelay, 0.5 s).
func TestProbeHangTimesOut(t *testing.T) {
	bin := script(t, "sleep 30")
	start := time.Now()
	got := Probe(context.Background(), Options{Binary: bin, Timeout: 300 * time.Millisecond, LookupEnv: env(nil)})
	if took := time.Since(start); took > 20*time.Second {
		t.Fatalf("probe took %v with a 300ms timeout: it waited for the grandchild holding its pipes", took)
	}
	if got.Capability != key.None || got.Reason != "nvidia-smi timed out after 300ms" {
		t.Fatalf("got %+v, want a timeout reason", got)
	}
}

func TestProbeHangInSecondQuery(t *testing.T) {
	bin := script(t, `case "$1" in --query-gpu=index,compute_cap) sleep 30 ;; *) printf '0, NVIDIA H200, GPU-1, 580.159.04\n' ;; esac`)
	got := Probe(context.Background(), Options{Binary: bin, Timeout: 300 * time.Millisecond, LookupEnv: env(nil)})
	if got.Reason != "nvidia-smi timed out after 300ms" || len(got.GPUs) != 1 {
		t.Fatalf("got %+v, want a timeout with the listed GPU kept", got)
	}
}

func TestProbeCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got := Probe(ctx, Options{Binary: fakeSMI(t, h200, "0, 9.0\n", 0), LookupEnv: env(nil)})
	if got.Capability != key.None || !strings.Contains(got.Reason, "cancelled") {
		t.Fatalf("got %+v, want a cancelled reason", got)
	}
}

func TestProbeOutputCapped(t *testing.T) {
	bin := script(t, `yes '0, NVIDIA H200, GPU-1, 580.159.04' | head -c 3000000`)
	got := Probe(context.Background(), Options{Binary: bin, Timeout: 5 * time.Second, LookupEnv: env(nil)})
	if !strings.Contains(got.Reason, "more than") {
		t.Fatalf("got %q, want the output cap to trip", got.Reason)
	}
}

// Env (func(string) string) cannot say "set but empty": empty reads as unset.
func TestProbeEnvFunc(t *testing.T) {
	bin := fakeSMI(t, h200x2, "0, 9.0\n1, 9.0\n", 0)
	got := Probe(context.Background(), Options{Binary: bin, Env: func(k string) string {
		if k == "CUDA_VISIBLE_DEVICES" {
			return "1"
		}
		return ""
	}})
	if len(got.GPUs) != 1 || got.GPUs[0].Index != 1 || got.Capability != (key.Capability{Major: 9}) {
		t.Fatalf("got %+v", got)
	}
	got = Probe(context.Background(), Options{Binary: bin, Env: func(string) string { return "" }})
	if len(got.GPUs) != 2 {
		t.Fatalf("empty Env value should read as unset, got %+v", got)
	}
}

func TestProbeDefaultEnvEmptyHidesAll(t *testing.T) {
	t.Setenv("CUDA_VISIBLE_DEVICES", "")
	got := Probe(context.Background(), Options{Binary: fakeSMI(t, h200, "0, 9.0\n", 0)})
	if got.Reason != "CUDA_VISIBLE_DEVICES is empty: no GPU visible" {
		t.Fatalf("got %+v", got)
	}
}

func TestProbeViaPATH(t *testing.T) {
	bin := fakeSMI(t, h200, "0, 9.0\n", 0)
	t.Setenv("PATH", filepath.Dir(bin))
	got := Probe(context.Background(), Options{LookupEnv: env(nil)})
	if got.Capability != (key.Capability{Major: 9}) {
		t.Fatalf("got %+v", got)
	}
}
