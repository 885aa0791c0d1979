// Package deploy holds container and Kubernetes recipes; its test keeps
// them honest: every variable, profile key and flag they name is one
// speclaunch reads, and the Kubernetes timings fit the launcher's.
package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/alecthomas/kong"
	"github.com/speclaunch/speclaunch/internal/cli"
	"github.com/speclaunch/speclaunch/internal/config"
	"github.com/speclaunch/speclaunch/internal/testenv"
	"github.com/speclaunch/speclaunch/profiles"
	"gopkg.in/yaml.v3"
)

// knownEnv reports a variable speclaunch reads as a setting.
func knownEnv(name string) bool {
	for _, names := range config.Envs {
		if slices.Contains(names, name) {
			return true
		}
	}
	return false
}

// manifest is the part of a Kubernetes object the checks read.
type manifest struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Data map[string]string `yaml:"data"`
	Spec struct {
		Template struct {
			Spec podSpec `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type podSpec struct {
	TerminationGracePeriodSeconds *int        `yaml:"terminationGracePeriodSeconds"`
	Containers                    []container `yaml:"containers"`
	Volumes                       []struct {
		Name      string `yaml:"name"`
		ConfigMap *struct {
			Name string `yaml:"name"`
		} `yaml:"configMap"`
	} `yaml:"volumes"`
}

type container struct {
	Name    string   `yaml:"name"`
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	Env     []struct {
		Name  string `yaml:"name"`
		Value string `yaml:"value"`
	} `yaml:"env"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	StartupProbe   *probe `yaml:"startupProbe"`
	ReadinessProbe *probe `yaml:"readinessProbe"`
	LivenessProbe  *probe `yaml:"livenessProbe"`
	VolumeMounts   []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		SubPath   string `yaml:"subPath"`
	} `yaml:"volumeMounts"`
}

type probe struct {
	HTTPGet *struct {
		Path string    `yaml:"path"`
		Port yaml.Node `yaml:"port"`
	} `yaml:"httpGet"`
	PeriodSeconds    int `yaml:"periodSeconds"`
	FailureThreshold int `yaml:"failureThreshold"`
}

// checker is what the manifest checks report to: a *testing.T, or the
// recorder of TestManifestChecksCanFail.
type checker interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Fatal(args ...any)
}

func readManifests(t *testing.T, path string) []manifest {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return parseManifests(t, path, b)
}

func parseManifests(t checker, path string, b []byte) []manifest {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var out []manifest
	for {
		var raw yaml.Node
		if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		var m manifest // the subset the checks read
		if err := raw.Decode(&m); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, m)
	}
	return out
}

func TestKubernetesManifests(t *testing.T) {
	files, _ := filepath.Glob("kubernetes/*.yaml")
	if len(files) == 0 {
		t.Fatal("no manifests in deploy/kubernetes")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) { checkManifests(t, readManifests(t, f)) })
	}
}

func checkManifests(t checker, ms []manifest) {
	configMaps := map[string]map[string]string{}
	var deployments []manifest
	for _, m := range ms {
		switch m.Kind {
		case "ConfigMap":
			configMaps[m.Metadata.Name] = m.Data
		case "Deployment":
			deployments = append(deployments, m)
		}
	}
	if len(deployments) == 0 {
		t.Fatal("no Deployment")
	}
	for _, d := range deployments {
		pod := d.Spec.Template.Spec
		for _, c := range pod.Containers {
			checkContainer(t, pod, c, configMaps)
		}
	}
}

func checkContainer(t checker, pod podSpec, c container, configMaps map[string]map[string]string) {
	env := map[string]string{}
	for _, e := range c.Env {
		if !knownEnv(e.Name) {
			t.Errorf("container %s: env %s is not a variable speclaunch reads (config.Envs)", c.Name, e.Name)
		}
		env[e.Name] = e.Value
	}
	checkArgs(t, c)

	// The profile: a NAME, found in a ConfigMap mounted as a directory
	// where profiles.Find looks.
	name := env["MLXCEL_PROFILE"]
	if name == "" {
		t.Fatalf("container %s: no MLXCEL_PROFILE", c.Name)
	}
	var prof *profiles.Profile
	for _, vm := range c.VolumeMounts {
		for _, v := range pod.Volumes {
			if v.Name != vm.Name || v.ConfigMap == nil {
				continue
			}
			if vm.SubPath != "" {
				t.Errorf("volume %s is mounted with subPath: Kubernetes never updates it, so edits would not reload", vm.Name)
			}
			if !slices.Contains(profiles.SearchDirs(func(string) string { return "" }), vm.MountPath) {
				t.Errorf("ConfigMap %s is mounted at %s, where a profile NAME is not looked up (%v)", v.ConfigMap.Name, vm.MountPath, profiles.SearchDirs(func(string) string { return "" }))
			}
			data, ok := configMaps[v.ConfigMap.Name][name+".toml"]
			if !ok {
				t.Errorf("ConfigMap %s has no %s.toml for MLXCEL_PROFILE=%s", v.ConfigMap.Name, name, name)
				continue
			}
			p, err := profiles.Parse(name+".toml", []byte(data)) // unknown keys and wrong types are errors
			if err != nil {
				t.Fatalf("profile %s.toml: %v", name, err)
			}
			prof = p
		}
	}
	if prof == nil {
		t.Fatalf("container %s: profile %s is not mounted from a ConfigMap", c.Name, name)
	}
	s, _, _, err := config.Load(config.Input{Profile: prof, Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatalf("container %s: the settings do not load: %v", c.Name, err)
	}

	// Probes on /health at serve's port.
	port := 0
	for _, p := range c.Ports {
		if p.ContainerPort == s.Port.Value {
			port = p.ContainerPort
			for _, pr := range []struct {
				what string
				p    *probe
			}{{"readiness", c.ReadinessProbe}, {"liveness", c.LivenessProbe}, {"startup", c.StartupProbe}} {
				if pr.p == nil || pr.p.HTTPGet == nil {
					t.Errorf("no %s probe", pr.what)
					continue
				}
				if pr.p.HTTPGet.Path != "/health" {
					t.Errorf("%s probe on %s, want /health", pr.what, pr.p.HTTPGet.Path)
				}
				if v := pr.p.HTTPGet.Port.Value; v != p.Name && v != strconv.Itoa(p.ContainerPort) {
					t.Errorf("%s probe on port %s, want %s (%d)", pr.what, v, p.Name, p.ContainerPort)
				}
			}
		}
	}
	if port == 0 {
		t.Errorf("no containerPort for serve's port %d (%s)", s.Port.Value, s.Port.Src)
	}
	if sp := c.StartupProbe; sp != nil {
		if allowed := sp.PeriodSeconds * sp.FailureThreshold; float64(allowed) < s.ReadyTimeout.Value.Seconds() {
			t.Errorf("the startup probe allows %ds, less than the ready timeout %s (%s): liveness would kill a loading engine", allowed, s.ReadyTimeout.Value, s.ReadyTimeout.Src)
		}
	}
	grace := 30 // Kubernetes' default
	if g := pod.TerminationGracePeriodSeconds; g != nil {
		grace = *g
	}
	if float64(grace) <= (s.ShutdownTimeout.Value + s.StopTimeout.Value).Seconds() {
		t.Errorf("terminationGracePeriodSeconds %d is not above the shutdown timeout %s (%s) plus the stop timeout %s (%s)",
			grace, s.ShutdownTimeout.Value, s.ShutdownTimeout.Src, s.StopTimeout.Value, s.StopTimeout.Src)
	}
}

// checkArgs parses a container's args as `speclaunch serve` would.
func checkArgs(t checker, c container) {
	if len(c.Command) > 0 {
		t.Errorf("container %s sets command: the image's entrypoint is speclaunch serve", c.Name)
	}
	if len(c.Args) == 0 {
		return
	}
	var app cli.App
	p, err := kong.New(&app, kong.Exit(func(int) {}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Parse(append([]string{"serve"}, c.Args...)); err != nil {
		t.Errorf("container %s args %q: %v", c.Name, c.Args, err)
	}
}

// recorder collects what the checks report; Fatalf ends the check run.
type recorder struct{ msgs []string }

type fatal struct{}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) { r.Errorf(format, args...); panic(fatal{}) }
func (r *recorder) Fatal(args ...any)                 { r.msgs = append(r.msgs, fmt.Sprint(args...)); panic(fatal{}) }

// The manifest checks can fail: each edit of the shipped manifest that
// breaks one rule is reported, and the manifest itself passes.
func TestManifestChecksCanFail(t *testing.T) {
	b, err := os.ReadFile("kubernetes/speclaunch.yaml")
	if err != nil {
		t.Fatal(err)
	}
	run := func(text string) (msgs []string) {
		r := &recorder{}
		defer func() {
			if v := recover(); v != nil {
				if _, ok := v.(fatal); !ok {
					panic(v)
				}
			}
			msgs = r.msgs
		}()
		checkManifests(r, parseManifests(r, "speclaunch.yaml", []byte(text)))
		return r.msgs
	}
	if msgs := run(string(b)); len(msgs) != 0 {
		t.Fatalf("the shipped manifest fails: %q", msgs)
	}
	cases := []struct {
		name, old, new, want string
	}{
		{"grace period at the stop timeout", "terminationGracePeriodSeconds: 60", "terminationGracePeriodSeconds: 45", "is not above the shutdown timeout 25s"},
		{"an env name speclaunch does not read", "- name: MLXCEL_LOG_FORMAT", "- name: MLXCEL_LOG_FMT", "env MLXCEL_LOG_FMT is not a variable speclaunch reads"},
		{"a bad env value", "value: json", "value: xml", "the settings do not load"},
		{"a probe off /health", "path: /health", "path: /healthz", "want /health"},
		{"a startup probe shorter than the ready timeout", "failureThreshold: 120", "failureThreshold: 12", "less than the ready timeout"},
		{"a profile the ConfigMap lacks", "value: llama-draft", "value: llama-other", "has no llama-other.toml"},
		{"an unknown profile key", `    args = ["-ngl"`, `    argz = ["-ngl"`, "unknown key"},
		{"a subPath mount", "mountPath: /etc/speclaunch/profiles", "mountPath: /etc/speclaunch/profiles\n              subPath: llama-draft.toml", "subPath"},
		{"a mount where names are not looked up", "mountPath: /etc/speclaunch/profiles", "mountPath: /config", "where a profile NAME is not looked up"},
		{"a command over the entrypoint", "image: registry.example.com/speclaunch-llama:server-cuda", "image: registry.example.com/speclaunch-llama:server-cuda\n          command: [\"/bin/sh\"]", "sets command"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			text := strings.Replace(string(b), c.old, c.new, 1)
			if text == string(b) {
				t.Fatalf("the manifest has no %q to edit", c.old)
			}
			msgs := run(text)
			if !slices.ContainsFunc(msgs, func(m string) bool { return strings.Contains(m, c.want) }) {
				t.Errorf("reported %q, want one containing %q", msgs, c.want)
			}
		})
	}
}

// The Containerfiles set only variables speclaunch reads.
func TestContainerfiles(t *testing.T) {
	files, _ := filepath.Glob("Containerfile*")
	if len(files) < 2 {
		t.Fatalf("want the scratch and the engine Containerfile, have %v", files)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.ReplaceAll(string(b), "\\\n", " ")
		for _, line := range strings.Split(text, "\n") {
			fields := strings.Fields(line)
			if len(fields) < 2 || fields[0] != "ENV" {
				continue
			}
			for _, kv := range fields[1:] {
				name, _, _ := strings.Cut(kv, "=")
				if !knownEnv(name) {
					t.Errorf("%s: ENV %s is not a variable speclaunch reads", f, name)
				}
			}
		}
	}
	b, _ := os.ReadFile("Containerfile")
	if !strings.Contains(string(b), "FROM scratch") || !strings.Contains(string(b), `ENTRYPOINT ["/speclaunch"]`) {
		t.Errorf("deploy/Containerfile is not the scratch image with /speclaunch as entrypoint")
	}
}

// TestScratchImageBuilds runs scripts/build_image.sh where podman is
// installed (running the container is not needed: the binary's static
// linking is checked by TestStaticBinary) and reads the image back: one
// layer, /speclaunch as entrypoint, a non-root user. The engine layer
// (Containerfile.llama-server) is built over the scratch image standing in
// for llama.cpp's, which cannot be pulled here: that checks its syntax and
// its COPY, not llama.cpp's image.
func TestScratchImageBuilds(t *testing.T) {
	testenv.E2E(t)
	if _, err := exec.LookPath("podman"); err != nil {
		t.Skip("podman is not installed")
	}
	tag := "localhost/speclaunch-test:" + strconv.Itoa(os.Getpid())
	t.Cleanup(func() { _ = exec.Command("podman", "rmi", "-f", tag, tag+"-llama").Run() })
	if out, err := exec.Command("../scripts/build_image.sh", tag).CombinedOutput(); err != nil {
		t.Fatalf("build_image.sh: %v\n%s", err, out)
	}
	out, err := exec.Command("podman", "image", "inspect", tag, "--format", "{{json .Config.Entrypoint}} {{.Config.User}} {{len .RootFS.Layers}}").CombinedOutput()
	if err != nil {
		t.Fatalf("inspect: %v\n%s", err, out)
	}
	if got, want := strings.TrimSpace(string(out)), `["/speclaunch"] 65532:65532 1`; got != want {
		t.Errorf("image config %q, want %q", got, want)
	}
	cmd := exec.Command("podman", "build", "-f", "Containerfile.llama-server", "-t", tag+"-llama",
		"--build-arg", "SPECLAUNCH_IMAGE="+tag, "--build-arg", "LLAMA_IMAGE="+tag, t.TempDir())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("engine layer: %v\n%s", err, out)
	}
	out, err = exec.Command("podman", "image", "inspect", tag+"-llama", "--format", "{{json .Config.Entrypoint}}").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != `["/usr/local/bin/speclaunch","serve"]` {
		t.Errorf("engine layer entrypoint %s (%v)", out, err)
	}
}
