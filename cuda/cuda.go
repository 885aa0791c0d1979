// Package cuda finds the CUDA compute capability of the GPUs the engine
// will see, by asking nvidia-smi. The launcher is a static CGO_ENABLED=0
// binary, so it cannot dlopen libcuda or NVML; nvidia-smi ships with every
// driver and answers in about 20 ms.
//
// The probe never fails: a host with no usable device yields a Result whose
// Capability is key.None and whose Reason says why, because "no measured
// entry applies" is a normal outcome that the log must explain, not an
// error that stops the launch.
package cuda

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/speclaunch/speclaunch/internal/key"
)

// GPU is one device as nvidia-smi lists it. Index is nvidia-smi's (PCI bus
// order), which is CUDA's only when CUDA_DEVICE_ORDER=PCI_BUS_ID.
type GPU struct {
	Index      int            `json:"index"`
	Name       string         `json:"name"`
	UUID       string         `json:"uuid"`
	Driver     string         `json:"driver"`
	Capability key.Capability `json:"capability"`
	CapKnown   bool           `json:"cap_known"` // false when the driver or device did not report compute_cap
}

// MarshalJSON writes the capability as resolve --json's other facts do,
// "9.0" (or "none"), where key.Capability alone printed {"Major":9,"Minor":0}.
func (g GPU) MarshalJSON() ([]byte, error) {
	type plain GPU
	return json.Marshal(struct {
		plain
		Capability string `json:"capability"`
	}{plain(g), g.Capability.String()})
}

// Result is what the probe found.
type Result struct {
	GPUs       []GPU          // visible GPUs after CUDA_VISIBLE_DEVICES filtering
	Capability key.Capability // the one capability all visible GPUs share; key.None otherwise
	Reason     string         // when Capability is None: why, readable by an operator
	Driver     string         // driver version nvidia-smi reported, "" if none
}

// Options tunes the probe; the zero value probes the real host.
type Options struct {
	// Binary is the nvidia-smi to run: a path, or a name looked up on
	// PATH. Default "nvidia-smi".
	Binary string
	// Timeout bounds the whole probe, both queries together. Default 3s.
	Timeout time.Duration
	// Env reads CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER. A func(string)
	// string cannot tell unset from empty, so with Env an empty value
	// means unset; use LookupEnv (or leave both nil, which uses
	// os.LookupEnv) when CUDA_VISIBLE_DEVICES="" must hide every GPU.
	Env func(string) string
	// LookupEnv, when set, takes precedence over Env.
	LookupEnv func(string) (string, bool)
}

// Output caps: nvidia-smi prints one short line per GPU, so anything past
// these is not what we asked for.
const (
	maxStdout = 1 << 20
	maxStderr = 64 << 10
	waitDelay = 200 * time.Millisecond
)

const (
	defaultBinary  = "nvidia-smi"
	defaultTimeout = 3 * time.Second
	queryDevices   = "--query-gpu=index,name,uuid,driver_version"
	queryCaps      = "--query-gpu=index,compute_cap"
	csvFormat      = "--format=csv,noheader,nounits"
)

// Probe lists the GPUs, applies CUDA_VISIBLE_DEVICES, reads each visible
// GPU's compute capability and reports the one they share. The device list
// and compute_cap are separate queries because drivers before about R510
// reject the compute_cap field outright; the device list still helps the
// operator then.
func Probe(ctx context.Context, o Options) Result {
	o = o.withDefaults()
	bin, err := exec.LookPath(o.Binary)
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) && !strings.ContainsRune(o.Binary, os.PathSeparator) {
			return none(o.Binary + " not found on PATH")
		}
		return none(fmt.Sprintf("%s is not runnable: %v", o.Binary, err))
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()

	out, fail := run(ctx, o, bin, queryDevices)
	if fail != "" {
		return none(fail)
	}
	all, err := parseDevices(out)
	if err != nil {
		return none(fmt.Sprintf("nvidia-smi printed unparseable output: %v", err))
	}
	if len(all) == 0 {
		return none("nvidia-smi lists no GPU")
	}
	res := Result{Driver: all[0].Driver}
	cvd, set := o.lookup("CUDA_VISIBLE_DEVICES")
	vis, why := visible(all, cvd, set)
	if why != "" {
		res.Reason = why
		return res
	}

	out, fail = run(ctx, o, bin, queryCaps)
	switch {
	case fail != "" && strings.Contains(strings.ToLower(fail), "not a valid field"):
		res.GPUs = vis
		res.Reason = fmt.Sprintf("driver too old to report compute_cap (driver %s; compute_cap needs about R510 or newer)", nameOr(res.Driver))
		return res
	case fail != "":
		res.GPUs = vis
		res.Reason = fail
		return res
	}
	caps, err := parseCaps(out)
	if err != nil {
		res.GPUs = vis
		res.Reason = fmt.Sprintf("nvidia-smi printed unparseable output: %v", err)
		return res
	}
	res.GPUs = withCaps(vis, caps)
	all = withCaps(all, caps)
	if c, why := agree(res.GPUs); why != "" {
		res.Reason = why
	} else if why := orderCaveat(all, cvd, set, o.get("CUDA_DEVICE_ORDER")); why != "" {
		res.Reason = why
	} else {
		res.Capability = c
	}
	return res
}

// orderCaveat refuses an index-based CUDA_VISIBLE_DEVICES on a host whose
// GPUs differ: CUDA numbers devices fastest-first unless
// CUDA_DEVICE_ORDER=PCI_BUS_ID, nvidia-smi by PCI bus, so index 0 may name
// a different GPU to each and the capability could be the wrong one.
func orderCaveat(all []GPU, cvd string, set bool, order string) string {
	if !set || strings.TrimSpace(order) == "PCI_BUS_ID" {
		return ""
	}
	if _, why := agree(all); why == "" {
		return "" // every GPU is alike: numbering cannot change the answer
	}
	for _, e := range strings.Split(cvd, ",") {
		if _, err := strconv.Atoi(strings.TrimSpace(e)); err == nil {
			return "CUDA_VISIBLE_DEVICES selects by index on a host with differing GPUs, and CUDA's numbering matches nvidia-smi's only with CUDA_DEVICE_ORDER=PCI_BUS_ID: set that, or select by UUID"
		}
	}
	return ""
}

func withCaps(gpus []GPU, caps map[int]key.Capability) []GPU {
	out := make([]GPU, len(gpus))
	for i, g := range gpus {
		g.Capability, g.CapKnown = caps[g.Index]
		out[i] = g
	}
	return out
}

func none(reason string) Result { return Result{Reason: reason} }

func (o Options) withDefaults() Options {
	if o.Binary == "" {
		o.Binary = defaultBinary
	}
	if o.Timeout <= 0 {
		o.Timeout = defaultTimeout
	}
	if o.LookupEnv == nil {
		if o.Env != nil {
			env := o.Env
			o.LookupEnv = func(k string) (string, bool) { v := env(k); return v, v != "" }
		} else {
			o.LookupEnv = os.LookupEnv
		}
	}
	return o
}

func (o Options) lookup(k string) (string, bool) { return o.LookupEnv(k) }
func (o Options) get(k string) string            { v, _ := o.LookupEnv(k); return v }

// run executes one query and returns stdout, or an operator-readable
// failure. The context kills the process at the deadline, and WaitDelay
// stops waiting for pipes a surviving grandchild still holds, so a wedged
// nvidia-smi (a driver in D state, a hung wrapper script) cannot hang the
// launcher.
func run(ctx context.Context, o Options, bin, query string) (string, string) {
	cmd := exec.CommandContext(ctx, bin, query, csvFormat)
	cmd.WaitDelay = waitDelay
	cmd.Env = append(os.Environ(), "LC_ALL=C") // nvidia-smi's decimal point must be '.'
	var stdout, stderr capped
	stdout.max, stderr.max = maxStdout, maxStderr
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return "", fmt.Sprintf("nvidia-smi timed out after %s", o.Timeout)
		}
		return "", fmt.Sprintf("nvidia-smi probe cancelled: %v", ctx.Err())
	}
	if err != nil {
		msg := firstLine(stdout.String())
		if m := firstLine(stderr.String()); m != "" {
			msg = m
		}
		for _, l := range strings.Split(stdout.String()+"\n"+stderr.String(), "\n") {
			if strings.Contains(strings.ToLower(l), "not a valid field") {
				msg = clip(strings.TrimSpace(l))
				break
			}
		}
		if msg == "" {
			return "", fmt.Sprintf("nvidia-smi failed: %v", err)
		}
		return "", fmt.Sprintf("nvidia-smi failed (%v): %s", err, msg)
	}
	if stdout.over {
		return "", fmt.Sprintf("nvidia-smi printed unparseable output: more than %d bytes", maxStdout)
	}
	return stdout.String(), ""
}

func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return clip(l)
		}
	}
	return ""
}

// capped keeps the first max bytes written and discards the rest, so a
// runaway child cannot make the launcher allocate without bound. It wraps
// rather than embeds bytes.Buffer: an embedded Buffer's ReadFrom would let
// io.Copy bypass Write and the cap.
type capped struct {
	buf  bytes.Buffer
	max  int
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); room < len(p) {
		c.over = true
		if room > 0 {
			c.buf.Write(p[:room])
		}
		return len(p), nil
	}
	return c.buf.Write(p)
}

func (c *capped) String() string { return c.buf.String() }
