package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is set at link time (-ldflags "-X github.com/speclaunch/speclaunch/internal/cli.Version=v1.2.3").
var Version = "dev"

// VersionCmd prints version information.
type VersionCmd struct{}

// BuildInfo returns the version, the VCS commit (with +dirty) and the Go version.
func BuildInfo() (version, commit, goVersion string) {
	version, commit = Version, "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		dirty := ""
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
				if len(commit) > 12 {
					commit = commit[:12]
				}
			case "vcs.modified":
				if s.Value == "true" {
					dirty = "+dirty"
				}
			}
		}
		commit += dirty
		if version == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			version = bi.Main.Version
		}
	}
	return version, commit, runtime.Version()
}

// Run implements `speclaunch version`.
func (VersionCmd) Run(e *Env) error {
	fmt.Fprintln(e.Stdout, versionLine())
	return nil
}

// versionLine is what `version` and `--version` print.
func versionLine() string {
	v, c, g := BuildInfo()
	return fmt.Sprintf("speclaunch %s (commit %s, %s, %s/%s)", v, c, g, runtime.GOOS, runtime.GOARCH)
}

// LauncherVersion is the one-string form records carry.
func LauncherVersion() string {
	v, c, _ := BuildInfo()
	return v + " (" + c + ")"
}
