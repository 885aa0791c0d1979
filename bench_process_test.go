package main

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The process-level footprint targets (issues 2 and 3) measured as
// benchmarks against the real static binary:
//
//	go test -run XXX -bench Process .

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

func staticBinary(b testing.TB) string {
	b.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "speclaunch-bench")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "speclaunch")
		cmd := exec.Command("go", "build", "-trimpath", "-o", builtBin, ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = err
			b.Logf("%s", out)
		}
	})
	if buildErr != nil {
		b.Fatal(buildErr)
	}
	return builtBin
}

// BenchmarkProcessResolve: process wall time of `speclaunch resolve` with no
// GPU probe (nvidia-smi absent from PATH).
func BenchmarkProcessResolve(b *testing.B) {
	bin := staticBinary(b)
	env := append(os.Environ(), "PATH="+b.TempDir())
	for b.Loop() {
		cmd := exec.Command(bin, "resolve", "-m", "target", "-md", "drafter", "--quant", "affine")
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%v: %s", err, out)
		}
	}
}

// BenchmarkProcessServeStartToExec: from starting `speclaunch serve` to the
// engine's first instruction, with a /bin/sh stand-in engine that writes the
// time it started (so the figure includes sh's own start, ~5 ms here).
func BenchmarkProcessServeStartToExec(b *testing.B) {
	bin := staticBinary(b)
	dir := b.TempDir()
	stamp := filepath.Join(dir, "stamp")
	engine := filepath.Join(dir, "engine")
	os.WriteFile(engine, []byte("#!/bin/sh\ndate +%s.%N > "+stamp+".tmp && mv "+stamp+".tmp "+stamp+"\nexec sleep 60\n"), 0o755)
	os.Mkdir(filepath.Join(dir, "t"), 0o755)
	os.Mkdir(filepath.Join(dir, "d"), 0o755)
	var total time.Duration
	port := 19300
	for b.Loop() {
		os.Remove(stamp)
		port++
		cmd := exec.Command(bin, "serve", "--engine", "mlxcel", "--engine-binary", engine, "-m", filepath.Join(dir, "t"), "-md", filepath.Join(dir, "d"),
			"--capability", "12.1", "--quant", "affine", "--port", strconv.Itoa(port), "--ready-timeout", "5s")
		t0 := time.Now()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		var started time.Time
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if raw, err := os.ReadFile(stamp); err == nil {
				sec, err := strconv.ParseFloat(strings.TrimSpace(string(raw)), 64)
				if err == nil {
					started = time.Unix(0, int64(sec*1e9))
					break
				}
			}
		}
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
		if started.IsZero() {
			b.Fatal("the stand-in engine never started")
		}
		total += started.Sub(t0)
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms-to-exec")
}

// BenchmarkProcessServeRSS: the launcher's resident memory while it
// supervises a sim engine that has served a request through its proxy.
func BenchmarkProcessServeRSS(b *testing.B) {
	bin := staticBinary(b)
	var rss, runs float64
	port := 19400
	for b.Loop() {
		port++
		cmd := exec.Command(bin, "serve", "--engine", "sim", "-m", "t", "-md", "d", "--port", strconv.Itoa(port), "--", "--sim-warmup", "50ms")
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		url := "http://127.0.0.1:" + strconv.Itoa(port)
		healthy := func() bool {
			resp, err := http.Get(url + "/health")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		}
		for deadline := time.Now().Add(20 * time.Second); !healthy(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				b.Fatal("the server never answered /health")
			}
		}
		resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"x","max_tokens":16}`))
		if err != nil || resp.StatusCode != http.StatusOK {
			cmd.Process.Kill()
			b.Fatalf("the request through the proxy: %v %v", err, resp)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		f, err := os.Open("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/status")
		if err == nil {
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
					kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
					rss += kb / 1024
					runs++
				}
			}
			f.Close()
		}
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	}
	if runs > 0 {
		b.ReportMetric(rss/runs, "MB-rss")
	}
}
