package cuda

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

// Memory is what serve's automatic switch mode needs to know: whether a
// second copy of the running engine fits beside it.
type Memory struct {
	// FreeMiB is the free memory of the GPU with the least free, among the
	// GPUs the engine sees (an engine split over GPUs needs room on each).
	FreeMiB int64
	// TotalMiB of that GPU.
	TotalMiB int64
	// UsedByPID is the GPU memory each compute process holds, summed over
	// GPUs (an engine split over GPUs shows once per GPU).
	UsedByPID map[int]int64
}

const (
	queryMemory = "--query-gpu=index,memory.total,memory.free"
	queryApps   = "--query-compute-apps=pid,used_memory"
)

// ProbeMemory asks nvidia-smi for free GPU memory and each compute
// process's use. Devices hidden by CUDA_VISIBLE_DEVICES are left out. A
// device whose memory reads "[N/A]" (unified-memory parts such as the GB10
// report no framebuffer figures) is an error: the caller cannot tell
// whether two engines fit.
func ProbeMemory(ctx context.Context, o Options) (Memory, error) {
	o = o.withDefaults()
	bin, err := exec.LookPath(o.Binary)
	if err != nil {
		return Memory{}, fmt.Errorf("%s not found: %w", o.Binary, err)
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	out, fail := run(ctx, o, bin, queryDevices)
	if fail != "" {
		return Memory{}, errors.New(fail)
	}
	all, err := parseDevices(out)
	if err != nil {
		return Memory{}, fmt.Errorf("nvidia-smi printed unparseable output: %w", err)
	}
	cvd, set := o.lookup("CUDA_VISIBLE_DEVICES")
	vis, why := visible(all, cvd, set)
	if why != "" {
		return Memory{}, errors.New(why)
	}
	out, fail = run(ctx, o, bin, queryMemory)
	if fail != "" {
		return Memory{}, errors.New(fail)
	}
	m, err := parseMemory(out, vis)
	if err != nil {
		return Memory{}, err
	}
	out, fail = run(ctx, o, bin, queryApps)
	if fail != "" {
		return Memory{}, errors.New(fail)
	}
	if m.UsedByPID, err = parseApps(out); err != nil {
		return Memory{}, err
	}
	return m, nil
}

// parseMemory reads "index, total, free" lines (MiB, nounits) and keeps
// the visible GPU with the least free memory.
func parseMemory(out string, vis []GPU) (Memory, error) {
	want := map[int]bool{}
	for _, g := range vis {
		want[g.Index] = true
	}
	m := Memory{FreeMiB: -1}
	for _, line := range lines(out) {
		f := splitCSV(line)
		if len(f) != 3 {
			return Memory{}, fmt.Errorf("nvidia-smi memory line %q: want index, memory.total, memory.free", clip(line))
		}
		idx, err := strconv.Atoi(f[0])
		if err != nil {
			return Memory{}, fmt.Errorf("nvidia-smi memory line %q: bad index", clip(line))
		}
		if !want[idx] {
			continue
		}
		total, err1 := strconv.ParseInt(f[1], 10, 64)
		free, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil || total < 0 || free < 0 {
			return Memory{}, fmt.Errorf("GPU %d reports no memory figures (%q): cannot tell whether two engines fit", idx, clip(line))
		}
		if m.FreeMiB < 0 || free < m.FreeMiB {
			m.FreeMiB, m.TotalMiB = free, total
		}
	}
	if m.FreeMiB < 0 {
		return Memory{}, errors.New("nvidia-smi reported memory for none of the visible GPUs")
	}
	return m, nil
}

// parseApps reads "pid, used_memory" lines; "[N/A]" use counts as unknown
// and is left out.
func parseApps(out string) (map[int]int64, error) {
	used := map[int]int64{}
	for _, line := range lines(out) {
		if strings.HasPrefix(strings.ToLower(line), "no running") {
			continue
		}
		f := splitCSV(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("nvidia-smi compute-apps line %q: want pid, used_memory", clip(line))
		}
		pid, err := strconv.Atoi(f[0])
		if err != nil || pid <= 0 {
			return nil, fmt.Errorf("nvidia-smi compute-apps line %q: bad pid", clip(line))
		}
		mib, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil || mib < 0 {
			continue
		}
		used[pid] += mib
	}
	return used, nil
}
