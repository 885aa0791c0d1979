package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"strings"
	"syscall"
	"testing"

	"github.com/alecthomas/kong"
	"github.com/speclaunch/speclaunch/internal/config"
)

// serve's and resolve's --help name no retired variable
// ($MLXCEL_ADAPT_EXPLORE_WIDTH, $MLXCEL_ADAPT_MARGIN): --adapt's said it
// was "tuned by" them, where docs/adaptive.md and the serve log say they
// are no longer used. They are still read and validated.
func TestHelpNamesNoRetiredVariable(t *testing.T) {
	var retired []string
	for _, r := range config.Rows {
		if r.Retired {
			retired = append(retired, r.Envs...)
		}
	}
	if len(retired) == 0 {
		t.Fatal("no retired row")
	}
	for _, cmd := range []string{"serve", "resolve"} {
		var out bytes.Buffer
		MainContext(context.Background(), []string{cmd, "--help"}, policyTOML, &out, &out, nil)
		rendered := strings.Join(strings.Fields(out.String()), " ")
		if !strings.Contains(rendered, "tuned by $MLXCEL_ADAPT_MAX_WIDTH,") {
			t.Errorf("%s --help: no --adapt tuning:\n%s", cmd, out.String())
		}
		for _, e := range retired {
			if strings.Contains(rendered, "$"+e) {
				t.Errorf("%s --help names the retired $%s", cmd, e)
			}
		}
	}
}

// Each flag's --help names the variables config.Load reads for it: the
// text comes from config.Rows (settingsHelp), so a new row's variables show
// on its flag, and every row's variables are on some command's flag. Both
// the flag's own help and the command's rendered --help are checked, the
// latter so that MainContext is seen to apply settingsHelp.
func TestHelpNamesEveryRowsVariables(t *testing.T) {
	app, err := kong.New(&App{}, kong.PostBuild(settingsHelp))
	if err != nil {
		t.Fatal(err)
	}
	shown := map[string]bool{}
	var walk func(n *kong.Node)
	walk = func(n *kong.Node) {
		for _, c := range n.Children {
			walk(c)
		}
		if n.Type != kong.CommandNode || len(n.Flags) == 0 {
			return
		}
		var out bytes.Buffer
		MainContext(context.Background(), append(strings.Fields(n.Path()), "--help"), policyTOML, &out, &out, nil)
		rendered := strings.Join(strings.Fields(out.String()), " ")
		for _, f := range n.Flags {
			for _, r := range config.Rows {
				if f.Name != r.Flag && f.Name != r.HelpOn {
					continue
				}
				shown[r.Name] = true
				for _, e := range r.Envs {
					if !strings.Contains(f.Help, "$"+e) || !strings.Contains(rendered, "$"+e) {
						t.Errorf("%s --help: --%s does not name $%s (row %s)", n.Path(), f.Name, e, r.Name)
					}
				}
			}
		}
	}
	walk(app.Model.Node)
	for _, r := range config.Rows {
		if !shown[r.Name] && !r.Retired && (len(r.Envs) > 0 || r.Flag != "") {
			t.Errorf("row %s: no command has its flag --%s (or --%s, HelpOn)", r.Name, r.Flag, r.HelpOn)
		}
	}
}

// `profile show` lists every row of the table: under its own name, under
// the row it is shown as (ShownAs), or, for the profile, as the profile.
func TestProfileShowListsEveryRow(t *testing.T) {
	var out, errOut bytes.Buffer
	code := MainContext(context.Background(), []string{"profile", "show", "--json", "--profile", "../../profiles/demo.toml"}, policyTOML, &out, &errOut, nil)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var got struct {
		Profile  string                     `json:"profile"`
		Settings map[string]json.RawMessage `json:"settings"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	for _, r := range config.Rows {
		name := r.Name
		if r.ShownAs != "" {
			name = r.ShownAs
		}
		if _, ok := got.Settings[name]; !ok && !(name == "profile" && got.Profile != "") {
			t.Errorf("profile show does not list row %s (as %s)", r.Name, name)
		}
	}
}

// --host and --port are serve's public address, which resolve, policy
// explain and profile show and validate answer for; bench's and tune's
// engines listen on loopback ports of their own (--base-port), so their
// help lists neither: both did, from the flags they shared with serve, and
// took them without effect.
func TestSweepHelpListsNoServeAddress(t *testing.T) {
	for cmd, want := range map[string]bool{"serve": true, "resolve": true, "bench": false, "tune": false} {
		var out bytes.Buffer
		MainContext(context.Background(), []string{cmd, "--help"}, policyTOML, &out, &out, nil)
		for _, f := range []string{"--host=HOST", "--port=PORT"} {
			if got := strings.Contains(out.String(), f); got != want {
				t.Errorf("%s --help lists %s: %v, want %v", cmd, f, got, want)
			}
		}
		if !want && !strings.Contains(out.String(), "--base-port=PORT") {
			t.Errorf("%s --help lists no --base-port:\n%s", cmd, out.String())
		}
	}
}

// failingWriter fails every write as a closed or full stdout does.
type failingWriter struct{ errno syscall.Errno }

func (w failingWriter) Write([]byte) (int, error) {
	return 0, &fs.PathError{Op: "write", Path: "/dev/stdout", Err: w.errno}
}

// --help that cannot reach stdout is not bad input: a reader gone early
// (EPIPE) ends quietly with 0; a full disk (ENOSPC) is an I/O failure,
// exit 1, said without the flags hint.
func TestHelpWriteFailure(t *testing.T) {
	cases := []struct {
		args    []string
		errno   syscall.Errno
		code    int
		wantErr string
	}{
		{[]string{"serve", "--help"}, syscall.EPIPE, 0, ""},
		{[]string{"bench", "--help"}, syscall.EPIPE, 0, ""},
		{[]string{"profile", "show", "--help"}, syscall.EPIPE, 0, ""},
		{[]string{"--help"}, syscall.EPIPE, 0, ""},
		{[]string{"serve", "--help"}, syscall.ENOSPC, 1, "writing help: write /dev/stdout: no space left on device"},
		{[]string{"help", "tune"}, syscall.ENOSPC, 1, "writing help: write /dev/stdout: no space left on device"},
		// A command's own output, not help (a recheck: each exited 0).
		{[]string{"--version"}, syscall.ENOSPC, 1, "writing output: write /dev/stdout: no space left on device"},
		{[]string{"policy", "list"}, syscall.ENOSPC, 1, "writing output: write /dev/stdout: no space left on device"},
		{[]string{"resolve", "--profile", "../../profiles/demo.toml"}, syscall.ENOSPC, 1, "writing output: write /dev/stdout: no space left on device"},
		{[]string{"resolve", "--profile", "../../profiles/demo.toml"}, syscall.EPIPE, 0, ""},
	}
	for _, c := range cases {
		var errOut bytes.Buffer
		code := MainContext(context.Background(), c.args, policyTOML, failingWriter{c.errno}, &errOut, nil)
		if code != c.code {
			t.Errorf("%v (%v): exit %d, want %d; stderr %q", c.args, c.errno, code, c.code, errOut.String())
		}
		if strings.Contains(errOut.String(), "hint") {
			t.Errorf("%v (%v): a hint was given: %q", c.args, c.errno, errOut.String())
		}
		if c.wantErr == "" && errOut.Len() != 0 {
			t.Errorf("%v (%v): want nothing said, got %q", c.args, c.errno, errOut.String())
		}
		if c.wantErr != "" && !strings.Contains(errOut.String(), c.wantErr) {
			t.Errorf("%v (%v): stderr %q, want %q", c.args, c.errno, errOut.String(), c.wantErr)
		}
	}
	// A parse error that is no write failure is left to parseError.
	if _, failed := helpWriteFailure(&fs.PathError{Op: "open", Path: "x", Err: syscall.ENOENT}); failed {
		t.Error("an open error was read as a failed help write")
	}
}
