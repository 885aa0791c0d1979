package serve

import (
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/config"
	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/plan"
	"github.com/speclaunch/speclaunch/internal/watch"
	"github.com/speclaunch/speclaunch/internal/width"
)

// adaptLoad is a reading of the files with --adapt on and an engine
// argument an edit can change; its plan keeps an adapted width as
// plan.Build does.
type adaptLoad struct{ arg string }

func (adaptLoad) Files() []string         { return nil }
func (adaptLoad) LogNotices(*slog.Logger) {}
func (adaptLoad) Settings() config.Settings {
	var s config.Settings
	s.Engine.Value, s.Model.Value, s.Adapt.Value = key.Sim, "target", true
	return s
}

func (l adaptLoad) Build(o plan.Options) (*plan.Plan, error) {
	p := &plan.Plan{Resolution: width.Resolution{Width: 4, Source: width.KindDefault, Reason: "engine default"}, Settings: l.Settings()}
	if o.Adapted > 0 {
		p.Resolution = width.AdaptedTo(o.Adapted, o.AdaptReason, key.Key{})
	}
	p.Launch.Argv = []string{os.Args[0], l.arg}
	return p, nil
}

type adaptLoader struct{ l *adaptLoad }

func (f adaptLoader) Load() (Load, error) { return *f.l, nil }

// A reload that keeps the adaptive width gives its own reason, not the
// last adaptive switch's: after an edit with no load its start line read
// "… for width 1 repays a 1.1s switch" with nothing switching.
func TestReloadKeepsTheAdaptedWidthForItsOwnReason(t *testing.T) {
	files := &adaptLoad{arg: "a"}
	sv := &launcher{c: Config{Loader: adaptLoader{files}}, st: newServeStatus(&plan.Plan{}), log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	cur, _ := files.Build(plan.Options{})
	sv.ctl.adaptedTo(16)
	files.arg = "b" // an edit of the model path
	np, _, changed, err := sv.reload(cur, watch.Change{Path: "p.toml", Reason: "write"})
	if err != nil || !changed {
		t.Fatalf("reload: %v, changed %v", err, changed)
	}
	if r := np.Resolution; r.Width != 16 || r.Reason != keptAdapted || strings.Contains(r.Reason, "repays") {
		t.Errorf("width %d for %q, want 16 for %q", r.Width, r.Reason, keptAdapted)
	}
}
