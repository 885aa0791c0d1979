package main

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/speclaunch/speclaunch/internal/checkpoint"
	"github.com/speclaunch/speclaunch/internal/cli"
	"github.com/speclaunch/speclaunch/internal/fakellama"
	"github.com/speclaunch/speclaunch/internal/safefile"
	"github.com/speclaunch/speclaunch/internal/safefile/safefiletest"
	"github.com/speclaunch/speclaunch/internal/testenv"
)

func speclaunchMain() int {
	return cli.Main(os.Args[1:], cli.Embedded{Policy: policyTOML, Records: records}, os.Stdout, os.Stderr)
}

// fakeSMI is a stand-in nvidia-smi for scripts: FAKE_SMI_DEVICES answers
// the device query, FAKE_SMI_CAPS the compute_cap query, and
// FAKE_SMI_CAPS_FAIL=1 makes the second query fail as a pre-R510 driver's.
// It is a shell script, not this test binary re-executed: the probe's 3 s
// bound covers both queries, and two starts of a -race test binary on a
// loaded machine took longer (gpu.txtar failed with "nvidia-smi timed out").
const fakeSMI = `#!/bin/sh
case "$*" in
*compute_cap*)
	if [ "$FAKE_SMI_CAPS_FAIL" = 1 ]; then
		echo 'Field "compute_cap" is not a valid field to query.'
		exit 2
	fi
	printf '%b' "$FAKE_SMI_CAPS" ;;
*) printf '%b' "$FAKE_SMI_DEVICES" ;;
esac
`

// httpCmd: httpwait URL polls until 200 (30 s); httpget URL; httppost URL
// BODY. The body goes to stdout; a non-2xx status exits 1.
func httpCmd(method string, wait bool) int {
	url := os.Args[1]
	deadline := time.Now().Add(30 * time.Second)
	for {
		var resp *http.Response
		var err error
		if method == "POST" {
			resp, err = http.Post(url, "application/json", strings.NewReader(os.Args[2]))
		} else {
			resp, err = http.Get(url)
		}
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode/100 == 2 || !wait {
				os.Stdout.Write(b)
				if resp.StatusCode/100 != 2 {
					fmt.Fprintf(os.Stderr, "status %d\n", resp.StatusCode)
					return 1
				}
				return 0
			}
		}
		if !wait || time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "%s %s: %v\n", method, url, err)
			return 1
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestMain(m *testing.M) {
	// The sim engine is this binary re-executed with "__sim".
	if len(os.Args) > 1 && os.Args[1] == "__sim" {
		os.Exit(speclaunchMain())
	}
	testscript.Main(removeBuilt{m}, map[string]func(){
		"speclaunch": func() { os.Exit(speclaunchMain()) },
		"llama-server": func() {
			os.Exit(fakellama.Main(os.Args[1:], os.Environ(), os.Stdout, os.Stderr))
		},
		"mkgguf":   mkgguf,
		"httpwait": func() { os.Exit(httpCmd("GET", true)) },
		"httpget":  func() { os.Exit(httpCmd("GET", false)) },
		"httppost": func() { os.Exit(httpCmd("POST", false)) },
	})
}

// removeBuilt runs the tests, then removes the binary staticBinary built.
type removeBuilt struct{ m *testing.M }

func (r removeBuilt) Run() int {
	// The process tests' children inherit this environment: their caches
	// and config (llama-server detection's llama-caps.json, the adaptive
	// state) go to a directory of the run's own, not the operator's who
	// runs the README's go test ./... (go's build cache stays where it was).
	if os.Getenv("GOCACHE") == "" {
		if d, err := os.UserCacheDir(); err == nil {
			os.Setenv("GOCACHE", filepath.Join(d, "go-build"))
		}
	}
	if home, err := os.MkdirTemp("", "speclaunch-test-home-"); err == nil {
		defer os.RemoveAll(home)
		os.Setenv("XDG_CONFIG_HOME", filepath.Join(home, "config"))
		os.Setenv("XDG_CACHE_HOME", filepath.Join(home, "cache"))
	}
	code := r.m.Run()
	if builtBin != "" {
		os.RemoveAll(filepath.Dir(builtBin))
	}
	return code
}

func TestScripts(t *testing.T) {
	t.Parallel() // with the process tests: they wait on their children together
	testscript.Run(t, testscript.Params{
		Dir:  "testdata/script",
		Cmds: map[string]func(*testscript.TestScript, bool, []string){"exits": cmdExits},
		Setup: func(env *testscript.Env) error {
			wd, _ := os.Getwd()
			env.Setenv("REPO", wd)
			// A clean environment: no host GPU, no inherited engine variables.
			env.Setenv("HOME", env.WorkDir)
			env.Setenv("XDG_CONFIG_HOME", filepath.Join(env.WorkDir, ".config"))
			env.Setenv("XDG_CACHE_HOME", filepath.Join(env.WorkDir, ".cache"))
			env.Setenv("NO_COLOR", "1")
			// PORT: a free port for a script's server (a fixed one met
			// another run's on a shared machine: "address already in use").
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return err
			}
			env.Setenv("PORT", strconv.Itoa(l.Addr().(*net.TCPAddr).Port))
			l.Close()
			bin := filepath.Join(env.WorkDir, ".fakebin")
			if err := os.Mkdir(bin, 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(bin, "nvidia-smi"), []byte(fakeSMI), 0o755); err != nil {
				return err
			}
			env.Setenv("PATH", bin+string(os.PathListSeparator)+env.Getenv("PATH"))
			return nil
		},
	})
}

// cmdExits is "exits CODE program [args...]": run the program and require
// that exact exit code. `! exec` takes any failure, where the CLI's
// contract is 2 for bad input and 1 for a failure at run time.
func cmdExits(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("unsupported: ! exits (give the code the command must exit with)")
	}
	if len(args) < 2 {
		ts.Fatalf("usage: exits CODE program [args...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exits: bad code %q: %v", args[0], err)
	}
	got := 0
	if err := ts.Exec(args[1], args[2:]...); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			ts.Fatalf("%s: %v", args[1], err)
		}
		got = ee.ExitCode()
	}
	if got != want {
		ts.Fatalf("%s exited with code %d, want %d", args[1], got, want)
	}
}

// TestStaticBinary checks that the binary is static: no interpreter, no
// dynamic section, so it runs in FROM scratch. .ci/run names the binary
// it ships in SPECLAUNCH_STATIC_CHECK, so the check is of that file;
// without it the test builds the binary as CI and operators do
// (staticBinary, shared with the process tests).
func TestStaticBinary(t *testing.T) {
	out := os.Getenv("SPECLAUNCH_STATIC_CHECK")
	if out == "" {
		testenv.E2E(t) // it builds the binary
		out = staticBinary(t)
	}
	if err := CheckStatic(out); err != nil {
		t.Fatal(err)
	}
}

// CheckStatic fails for an ELF with an interpreter or shared-library needs.
func CheckStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s has an ELF interpreter: it is dynamically linked", path)
		}
		if p.Type == elf.PT_DYNAMIC {
			return fmt.Errorf("%s has a dynamic section", path)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		return fmt.Errorf("%s needs shared libraries %v", path, libs)
	}
	return nil
}

// TestCheckStaticRejectsDynamic: CheckStatic must fail for an ELF that has
// an interpreter or a dynamic section, and pass one with neither. The ELF
// files are made here, so the test never depends on how the host's own
// binaries were linked.
func TestCheckStaticRejectsDynamic(t *testing.T) {
	for _, tc := range []struct {
		name  string
		progs []elf.ProgType
		want  string // "" = static
	}{
		{"static", []elf.ProgType{elf.PT_LOAD}, ""},
		{"interpreter", []elf.ProgType{elf.PT_PHDR, elf.PT_INTERP, elf.PT_LOAD}, "has an ELF interpreter"},
		{"dynamic section", []elf.ProgType{elf.PT_LOAD, elf.PT_DYNAMIC}, "has a dynamic section"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "a.out")
			if err := os.WriteFile(path, fakeELF(tc.progs), 0o755); err != nil {
				t.Fatal(err)
			}
			err := CheckStatic(path)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("static ELF refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CheckStatic = %v; want %q", err, tc.want)
			}
		})
	}
}

// fakeELF is a minimal x86-64 ELF executable header with one program
// header per type and no sections.
func fakeELF(progs []elf.ProgType) []byte {
	var b bytes.Buffer
	h := elf.Header64{
		Type: uint16(elf.ET_EXEC), Machine: uint16(elf.EM_X86_64), Version: uint32(elf.EV_CURRENT),
		Phoff: 64, Ehsize: 64, Phentsize: 56, Phnum: uint16(len(progs)), Shentsize: 64,
	}
	copy(h.Ident[:], elf.ELFMAG)
	h.Ident[elf.EI_CLASS], h.Ident[elf.EI_DATA], h.Ident[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)
	binary.Write(&b, binary.LittleEndian, h)
	for _, pt := range progs {
		binary.Write(&b, binary.LittleEndian, elf.Prog64{Type: uint32(pt), Flags: uint32(elf.PF_R), Align: 8})
	}
	return b.Bytes()
}

// TestBadFileShapesExit2: a profile, policy file, record or prompt file that is a
// directory, FIFO, socket, device, missing or over its cap is bad input:
// exit code 2, the file named, at once. An empty policy or record is bad
// input too (the parser's error); an empty profile is a valid one.
func TestBadFileShapesExit2(t *testing.T) {
	for _, tc := range []struct {
		what  string
		limit int64
		args  func(path string) []string
		want  string
	}{
		{"profile", safefile.ProfileLimit, func(p string) []string { return []string{"resolve", "--profile", p} }, "flag --profile: cannot use profile: profile "},
		{"policy", safefile.PolicyLimit, func(p string) []string { return []string{"policy", "list", "--policy", p} }, "flag --policy: cannot use policy file: policy file "},
		{"record", safefile.RecordLimit, func(p string) []string { return []string{"policy", "propose", p} }, "record "},
		{"prompt", safefile.PromptLimit, func(p string) []string {
			return []string{"bench", "--engine", "sim", "-m", "t", "-md", "d", "--prompt-file", p, "--out", filepath.Join(filepath.Dir(p), "rec")}
		}, "flag --prompt-file: cannot use the prompt file: prompt file "},
	} {
		name := "x.toml"
		switch tc.what {
		case "record":
			name = "x.json"
		case "prompt":
			name = "x.txt"
		}
		shapes := safefiletest.Make(t, name, tc.limit+1)
		for shape, path := range shapes {
			want, code := tc.want+path, 2
			switch {
			case shape == safefiletest.Empty && tc.what == "profile":
				want, code = "", 0
			case shape == safefiletest.Empty && tc.what == "prompt":
				want = path + " is empty"
			case shape == safefiletest.Missing && tc.what == "prompt":
				want = tc.want + path + ": no such file"
			case shape == safefiletest.Empty || shape == safefiletest.Missing:
				want = path // the parser's or the profile finder's message
			}
			t.Run(tc.what+"/"+shape, func(t *testing.T) {
				var stdout, stderr bytes.Buffer
				got := -1
				safefiletest.Within(t, func() {
					got = cli.Main(tc.args(path), cli.Embedded{Policy: policyTOML, Records: records}, &stdout, &stderr)
				})
				if got != code {
					t.Errorf("exit %d, want %d", got, code)
				}
				if want != "" && (!strings.Contains(stderr.String(), "speclaunch: error: ") || !strings.Contains(stderr.String(), want)) {
					t.Errorf("stderr %q: want the %s named (%q)", stderr.String(), tc.what, want)
				}
			})
		}
	}
}

// mkgguf writes each named file as a whole GGUF header of no tensors and
// no metadata (version 3): the smallest file serve takes as a llama.cpp
// model, where a file cut short before its fixed header ends is refused.
func mkgguf() {
	for _, p := range os.Args[1:] {
		if err := os.WriteFile(p, checkpoint.HeaderOnlyGGUF(), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}
