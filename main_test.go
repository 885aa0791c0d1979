package main

import (
	"debug/elf"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/speclaunch/speclaunch/cli"
	"github.com/speclaunch/speclaunch/internal/fakellama"
)

func speclaunchMain() int {
	cli.Records, _ = fs.Sub(records, ".")
	return cli.Main(os.Args[1:], policyTOML, os.Stdout, os.Stderr)
}

// fakeSMI is a stand-in nvidia-smi for scripts: FAKE_SMI_DEVICES answers
// the device query, FAKE_SMI_CAPS the compute_cap query, and
// FAKE_SMI_CAPS_FAIL=1 makes the second query fail as a pre-R510 driver's.
func fakeSMI() int {
	q := strings.Join(os.Args[1:], " ")
	if strings.Contains(q, "compute_cap") {
		if os.Getenv("FAKE_SMI_CAPS_FAIL") == "1" {
			fmt.Println(`Field "compute_cap" is not a valid field to query.`)
			return 2
		}
		fmt.Print(strings.ReplaceAll(os.Getenv("FAKE_SMI_CAPS"), `\n`, "\n"))
		return 0
	}
	fmt.Print(strings.ReplaceAll(os.Getenv("FAKE_SMI_DEVICES"), `\n`, "\n"))
	return 0
}

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
	testscript.Main(m, map[string]func(){
		"speclaunch": func() { os.Exit(speclaunchMain()) },
		"llama-server": func() {
			os.Exit(fakellama.Main(os.Args[1:], os.Environ(), os.Stdout, os.Stderr))
		},
		"nvidia-smi": func() { os.Exit(fakeSMI()) },
		"httpwait":   func() { os.Exit(httpCmd("GET", true)) },
		// settle gives a background launcher time to see its engine ready.
		"settle":   func() { time.Sleep(500 * time.Millisecond); os.Exit(0) },
		"httpget":  func() { os.Exit(httpCmd("GET", false)) },
		"httppost": func() { os.Exit(httpCmd("POST", false)) },
	})
}

func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			wd, _ := os.Getwd()
			env.Setenv("REPO", wd)
			// A clean environment: no host GPU, no inherited engine variables.
			env.Setenv("HOME", env.WorkDir)
			env.Setenv("XDG_CONFIG_HOME", filepath.Join(env.WorkDir, ".config"))
			env.Setenv("XDG_CACHE_HOME", filepath.Join(env.WorkDir, ".cache"))
			env.Setenv("NO_COLOR", "1")
			return nil
		},
	})
}

// TestStaticBinary builds the binary as CI and operators do and checks its
// ELF: no interpreter, no dynamic section, so it runs in FROM scratch.
func TestStaticBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	out := filepath.Join(t.TempDir(), "speclaunch")
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, b)
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

func TestCheckStaticRejectsDynamic(t *testing.T) {
	// /bin/sh is dynamically linked on every distribution CI uses; the check
	// must be able to fail.
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	real, _ := filepath.EvalSymlinks(sh)
	if err := CheckStatic(real); err == nil {
		t.Skipf("%s is static here", real)
	}
}
