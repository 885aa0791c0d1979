package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"strings"
	"time"

	"github.com/speclaunch/speclaunch/internal/config"
	"github.com/speclaunch/speclaunch/internal/exitcode"
	"github.com/speclaunch/speclaunch/internal/follow"
	"github.com/speclaunch/speclaunch/internal/plan"
	"github.com/speclaunch/speclaunch/internal/safefile"
	"github.com/speclaunch/speclaunch/internal/server"
	"github.com/speclaunch/speclaunch/internal/watch"
)

// readsEmpty says whether a file that says it has 0 bytes reads as empty:
// one that blocks on read (a link to /proc/kmsg) does not, and is left to
// the load, which refuses it naming the file (safefile gives up on it
// within safefile.StallLimit).
func readsEmpty(path string) bool {
	r, err := safefile.Open(context.Background(), "watched file", path, safefile.PolicyLimit)
	if err != nil {
		return false
	}
	defer r.Close()
	n, err := r.Read(make([]byte, 1))
	return n == 0 && errors.Is(err, io.EOF)
}

// reload re-reads profile and policy files and rebuilds the plan. A bad
// file is logged with its file and line and changes nothing.
func (sv *launcher) reload(cur *plan.Plan, ch watch.Change) (*plan.Plan, Load, bool, error) {
	if ch.Path == "" {
		sv.log.Info("reloading", "files", strings.Join(sv.w.files, ", "), "why", ch.Reason)
	} else {
		sv.log.Info("reloading", "file", ch.Path, "why", ch.Reason)
	}
	// The watcher skips an empty file, but the file is read again here: a
	// truncate-then-write can be caught halfway after the watcher's read,
	// or by a SIGHUP. A profile that had content and is empty now would
	// load as all defaults. (One that was empty when serve started stays
	// a valid, empty profile.)
	for _, f := range sv.w.files {
		if fi, err := os.Stat(f); err == nil && fi.Mode().IsRegular() && fi.Size() == 0 && !sv.w.wasEmpty[f] && readsEmpty(f) {
			sv.rejectReload(slog.LevelWarn, "reload: the file is empty (a write caught halfway?); not applied: waiting for the next write", "file", f)
			return nil, nil, false, fmt.Errorf("%s is empty", f)
		}
	}
	l, err := sv.c.Loader.Load()
	if errors.Is(err, context.Canceled) {
		// A SIGHUP after SIGTERM: the stop cut the read short; nothing
		// was rejected.
		sv.log.Info("reload not applied: speclaunch is stopping")
		return nil, nil, false, server.ErrStopping
	}
	if err != nil {
		err = reloadErr(err)
		if l != nil {
			sv.followFiles(l.Files()) // a policy file named but missing or bad: its fix is a change
		}
		sv.rejectReload(slog.LevelError, reloadRejected, "err", err)
		return nil, nil, false, err
	}
	// The files' own notices (an empty tuned layer), said on every reload.
	l.LogNotices(sv.log)
	adapted := sv.ctl.kept() // the runtime's goroutine sets it after an adaptive switch
	// The bucket of the schedule serve follows stays while the edit leaves
	// the engine as it is (the follower moves it when the load does).
	load := cur.Resolution.Load
	if sv.force.switching() {
		// A switch under way (the follower's, to another bucket) applies
		// before this reload: build at the load now, so that an edit that
		// changes nothing is nothing to do after it rather than a switch
		// back to the bucket it left.
		load = reloadLoad(sv.st.followNow(), sv.Load(), time.Now())
	}
	o := plan.Options{Load: load}
	if adapted > 0 && l.Settings().Adapt.Value {
		// The width the adaptive loop chose stays (an operator width still
		// wins), built once, for the reload's own reason (keptAdapted).
		o.Adapted, o.AdaptReason = adapted, keptAdapted
	}
	np, err := l.Build(o)
	if err == nil && !np.Resolution.IsAdaptive() && !plan.SameEngine(np, cur) {
		// The edit starts a new engine anyway, not at the adaptive loop's
		// width (an operator width or schedule wins): at the bucket of the
		// load now, not the one the follower last switched to, which it
		// keeps while the server idles (no gain repays a switch at no load).
		if now := reloadLoad(sv.st.followNow(), sv.Load(), time.Now()); np.Resolution.Schedule.At(now).Lo != np.Resolution.Schedule.At(load).Lo {
			np, err = l.Build(plan.Options{Load: now})
		}
	}
	if err == nil {
		// An engine argument the engine is known to refuse is judged
		// where the switch mode is known (submit): overlap tries it.
		err = Launchable(np, false)
	}
	if err != nil {
		sv.rejectReload(slog.LevelError, reloadRejected, "err", err)
		return nil, nil, false, err
	}
	sv.sayAdaptChanges(cur.Settings, np.Settings)
	if plan.SameEngine(np, cur) {
		return np, l, false, nil
	}
	return np, l, true, nil
}

// sayAdaptChanges says which adapt.* settings a reload changed from a to
// b: those that apply only at a restart, and the retired ones, which
// change nothing.
func (sv *launcher) sayAdaptChanges(a, b config.Settings) {
	if ch := adaptChanges(a, b, false); len(ch) > 0 {
		sv.log.Warn(fmt.Sprintf("reload: %s changed, but adapt.* settings apply when speclaunch starts; restart it for this change to take effect", strings.Join(ch, ", ")))
	}
	if ch := adaptChanges(a, b, true); len(ch) > 0 {
		sv.log.Info(fmt.Sprintf("reload: %s changed; read but no longer used, so nothing changes", strings.Join(ch, ", ")))
	}
}

// adaptChanges names, by profile key in the order of config.Rows, the
// adapt.* settings that differ between a and b: the reload's warning says
// which, where it said only "adapt.*" (an operator campaign). The table
// of settings is the one list of them. The retired settings are named
// apart (retired true): a restart would change nothing (a user pass was
// told to restart for adapt.margin).
func adaptChanges(a, b config.Settings, retired bool) []string {
	var out []string
	for _, r := range config.Rows {
		if !strings.HasPrefix(r.Key, "adapt.") || r.Retired != retired {
			continue
		}
		va, _, _ := r.Show(&a)
		vb, _, _ := r.Show(&b)
		if fmt.Sprint(va) != fmt.Sprint(vb) {
			out = append(out, r.Key)
		}
	}
	return out
}

// keptAdapted is the reason of the width a reload keeps from the
// adaptive loop, as the reload's start line gives it: it gave the last
// adaptive switch's ("… for width 1 repays a 1.1s switch", with nothing
// switching).
const keptAdapted = "the adaptive width in force, which a reload keeps"

// reloadRejected is the log line of a reload the files as they are now do
// not make.
const reloadRejected = "reload rejected; the engine keeps running with the previous settings"

// rejectReload logs a reload the files as they are now do not make, at
// level with msg and attrs, and has the runtime drop the reload that waits
// for the switch under way (server.Withdraw), saying so on the same line:
// the files' latest state wins. Before, the edit that waited applied
// after the switch all the same, and counted applied, while last_reload
// read rejected. The address bound ahead for the dropped edit is closed
// (public.withdraw): the proxy kept listening where the file no longer
// said until the next reload taken.
func (sv *launcher) rejectReload(level slog.Level, msg string, attrs ...any) {
	if sv.rt != nil {
		if w := sv.rt.Withdraw(server.KindReload); w.Job != nil {
			msg += "; the edit waiting for the switch under way is dropped: the file no longer reads that way"
			sv.withdrawAddress(w)
		}
	}
	sv.log.Log(context.Background(), level, msg, attrs...)
}

// withdrawAddress gives back the address bound ahead for the job w
// dropped: the proxy follows the plan in force again, or the switch still
// under way.
func (sv *launcher) withdrawAddress(w server.Withdrawal) {
	if sv.pub == nil {
		return
	}
	var under *plan.Plan
	if w.UnderWay != nil {
		under = w.UnderWay.Plan
	}
	sv.pub.withdraw(sv.plan(), w.Job.Plan, under)
	sv.st.setPublic(sv.pub.address())
}

// followFresh is how recent the follower's word must be for a reload to
// read the load from it: it speaks every follow.Tick (250 ms) while it
// runs, so older means it stopped.
const followFresh = 20 * follow.Tick

// reloadLoad is the load (requests in flight, at least 1) a reload that
// starts a new engine builds its plan for: the follower's mean over its
// last window when it follows a schedule and said so within followFresh
// of now, else the requests in flight now.
func reloadLoad(f *FollowStatus, inFlight int, now time.Time) int {
	if f != nil && f.Off == "" && f.Bucket != "" && now.Sub(f.Updated) < followFresh {
		return max(1, int(math.Round(f.Load)))
	}
	return max(1, inFlight)
}

// reloadErr names the file, not the flag: a profile that cannot be found
// or read on a reload was edited, replaced or removed since the start,
// and the error under the flag's names the file.
func reloadErr(err error) error {
	var ce *config.Error
	if errors.As(err, &ce) && ce.Msg == config.CannotUseProfile && ce.Err != nil {
		return fmt.Errorf("the profile as it is now cannot be used: %w", ce.Err)
	}
	return err
}

func codeOf(code int) error {
	if code == 0 {
		return nil
	}
	return exitcode.New(code, errors.New(""))
}

// diffArgv says what changed between two engine command lines, flag by
// flag: "--draft-block-size 4 → 3", "+--no-mmap", "-(--spec-draft-n-max 3)"
// (removed).
func diffArgv(a, b []string) string {
	pa, pb := argPairs(a), argPairs(b)
	var out []string
	for _, f := range pb.order {
		va, ok := pa.vals[f]
		switch {
		case !ok:
			out = append(out, "+"+strings.TrimSpace(f+" "+pb.vals[f]))
		case va != pb.vals[f]:
			out = append(out, fmt.Sprintf("%s %s → %s", f, va, pb.vals[f]))
		}
	}
	for _, f := range pa.order {
		if _, ok := pb.vals[f]; !ok {
			out = append(out, "-("+strings.TrimSpace(f+" "+pa.vals[f])+")")
		}
	}
	if len(out) == 0 {
		return "environment"
	}
	return strings.Join(out, ", ")
}

type pairs struct {
	order []string
	vals  map[string]string
}

// argPairs reads argv as flags with their values (a flag followed by a
// word that is not a flag); the program and bare words are keyed by
// position.
func argPairs(argv []string) pairs {
	p := pairs{vals: map[string]string{}}
	for i := 0; i < len(argv); i++ {
		a := argv[i]
		key, val := a, ""
		switch {
		case strings.HasPrefix(a, "-") && strings.Contains(a, "="):
			key, val, _ = strings.Cut(a, "=")
		case strings.HasPrefix(a, "-") && i+1 < len(argv) && !isFlag(argv[i+1]):
			val = argv[i+1]
			i++
		case !strings.HasPrefix(a, "-"):
			key, val = fmt.Sprintf("arg %d", i), a
		}
		if _, dup := p.vals[key]; !dup {
			p.order = append(p.order, key)
		}
		p.vals[key] = val
	}
	return p
}

// isFlag: "-x" or "--xy", not a negative number.
func isFlag(s string) bool {
	return strings.HasPrefix(s, "-") && len(s) > 1 && (s[1] < '0' || s[1] > '9') && s[1] != '.'
}
