package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestEngineLevel(t *testing.T) {
	cases := []struct{ line, want string }{
		// llama-server 2026 (captured stderr)
		{"0.00.003.124 W srv  llama_server: CORS is set to allow all origins ('*') and no API key is set", "WARN"},
		{"0.00.020.037 I srv  llama_server: model loaded", "INFO"},
		{"0.01.020.037 E srv  load_model: failed to load model", "ERROR"},
		{"0.00.000.001 D cmn  debug line", "DEBUG"},
		// mlxcel-server (Rust tracing)
		{"2026-09-20T10:00:00.123456Z  INFO mlxcel::server::model_provider::model_worker: Starting BatchScheduler", "INFO"},
		{"WARN mlxcel: MLXCEL_DRAFT_BLOCK_SIZE=\"x\" is not a valid u32; ignoring", "WARN"},
		{"2026-09-20T10:00:00Z TRACE mlxcel: x", "DEBUG"},
		// llama-server's argument errors
		{"error: invalid argument: --draft-max", "ERROR"},
		// lines that show no level are not guessed at
		{"main: n_parallel is set to auto, using n_parallel = 4 and kv_unified = true", ""},
		{"Starting BatchScheduler (speculative=dflash) [speclaunch sim: simulated engine, not a measurement]", ""},
		{"the INFO word later in a line", ""},
	}
	for _, c := range cases {
		if got := engineLevel(c.line); got != c.want {
			t.Errorf("engineLevel(%q) = %q, want %q", c.line, got, c.want)
		}
	}
}

func TestEngineLineJSON(t *testing.T) {
	b := engineLineJSON(2, "stdout", "\x1b[32m2026-09-20T10:00:00Z  INFO\x1b[0m mlxcel: \"quoted\" \\ done")
	if !strings.HasSuffix(string(b), "}\n") || strings.Count(string(b), "\n") != 1 {
		t.Fatalf("not one line: %q", b)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	if m["source"] != "engine" || m["engine"] != 2.0 || m["stream"] != "stdout" || m["level"] != "INFO" || m["text"] != "2026-09-20T10:00:00Z  INFO mlxcel: \"quoted\" \\ done" {
		t.Errorf("got %v", m)
	}
	if _, err := time.Parse(time.RFC3339Nano, m["time"].(string)); err != nil {
		t.Errorf("time: %v", err)
	}
	var none map[string]string
	_ = json.Unmarshal(engineLineJSON(0, "stderr", "plain"), &none)
	if _, ok := none["level"]; ok {
		t.Errorf("a line without a level got one: %v", none)
	}
}

// With --log-format json every line serve writes is one JSON object, the
// engine's lines too, each with one "source"; the settings are logged once.
func TestServeJSONLog(t *testing.T) {
	dir := t.TempDir()
	port := freePort(t)
	prof := filepath.Join(dir, "p.toml")
	writeFile(t, prof, simProfile(port, ""))
	r := startServe(t, "--profile", prof, "--log-format", "json", "--watch=false")
	r.log.waitFor(t, `"msg":"width verified`, 1, 20*time.Second)
	r.stop()
	r.exit(t, 15*time.Second)

	var engine, settings int
	for _, line := range strings.Split(strings.TrimSpace(r.log.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Errorf("not JSON: %q: %v", line, err)
			continue
		}
		if n := strings.Count(line, `"source":`); n != 1 && m["msg"] != "effective settings" {
			t.Errorf("%d source keys in %q", n, line)
		}
		switch m["source"] {
		case "engine":
			engine++
			if m["stream"] != "stderr" && m["stream"] != "stdout" || m["text"] == nil {
				t.Errorf("engine line without stream or text: %q", line)
			}
		case "speclaunch":
			if m["msg"] == "effective settings" {
				settings++
				s := m["settings"].(map[string]any)
				w := s["watch"].(map[string]any)
				if w["value"] != false || w["source"] != "flag --watch" {
					t.Errorf("watch setting %v, want false from flag --watch", w)
				}
				if e := s["engine"].(map[string]any); e["value"] != "sim" || !strings.HasPrefix(e["source"].(string), "profile ") {
					t.Errorf("engine setting %v", e)
				}
			}
		default:
			t.Errorf("line without a known source: %q", line)
		}
	}
	if engine < 2 || settings != 1 {
		t.Errorf("%d engine lines, %d settings lines; want ≥2 and 1:\n%s", engine, settings, r.log.String())
	}
}

// With --log-format json (flag, env or profile) the error that ends serve or
// bench is a JSON line too, with its hint and exit code; without it the
// error stays the two plain lines.
func TestErrorLineFollowsLogFormat(t *testing.T) {
	dir := t.TempDir()
	prof := filepath.Join(dir, "json.toml")
	writeFile(t, prof, "[engine]\nname = \"llama.cpp\"\n[log]\nformat = \"json\"\n")
	cases := []struct {
		name string
		args []string
		env  string // MLXCEL_LOG_FORMAT
		json bool
		code int
		msg  string
	}{
		{"flag, bad env after it", []string{"serve", "--log-format", "json", "--engine", "tgi"}, "", true, 2, "flag --engine: bad engine"},
		{"env", []string{"serve", "--engine", "llama.cpp", "--engine-binary", "/nonexistent/llama-server", "-m", "t.gguf", "--dry-run"}, "json", true, 2, "dry run: the launch would fail"},
		{"profile", []string{"serve", "--profile", prof, "--engine-binary", "/nonexistent/llama-server", "-m", "t.gguf"}, "", true, 2, "engine binary"},
		{"bench flag", []string{"bench", "--log-format=json", "--engine", "sim", "-m", "t", "--out", filepath.Join(dir, "r")}, "", true, 2, "bench needs a draft model"},
		{"an unknown flag", []string{"serve", "--log-format", "json", "--bogus-flag", "1"}, "", true, 2, "unknown flag --bogus-flag"},
		{"a parse error", []string{"serve", "--log-format=json", "--port"}, "", true, 2, "--port"},
		{"text", []string{"serve", "--engine", "tgi"}, "", false, 2, "flag --engine: bad engine"},
		{"an unknown flag in text", []string{"serve", "--bogus-flag", "1"}, "", false, 2, "unknown flag --bogus-flag"},
		{"flag text over env json", []string{"serve", "--log-format", "text", "--engine", "tgi"}, "json", false, 2, "flag --engine: bad engine"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("MLXCEL_LOG_FORMAT", c.env)
			var stdout, stderr bytes.Buffer
			if code := Main(c.args, Embedded{Policy: policyTOML}, &stdout, &stderr); code != c.code {
				t.Fatalf("exit %d, want %d: %s", code, c.code, stderr.String())
			}
			lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
			last := lines[len(lines)-1]
			if !c.json {
				if !strings.Contains(stderr.String(), "speclaunch: error: "+c.msg) {
					t.Errorf("stderr %q: want the plain error line", stderr.String())
				}
				return
			}
			for _, l := range lines {
				if !json.Valid([]byte(l)) {
					t.Errorf("not JSON: %q", l)
				}
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(last), &m); err != nil {
				t.Fatalf("last line %q: %v", last, err)
			}
			if m["level"] != "ERROR" || m["source"] != "speclaunch" || !strings.Contains(fmt.Sprint(m["msg"]), c.msg) || m["exit_code"] != float64(c.code) {
				t.Errorf("error line %v: want level ERROR, source speclaunch, msg with %q, exit_code %d", m, c.msg, c.code)
			}
		})
	}
}
