package serve

import (
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/speclaunch/speclaunch/internal/metrics"
	"github.com/speclaunch/speclaunch/internal/server"
	"github.com/speclaunch/speclaunch/internal/watch"
)

// lastReload is the last reload's outcome as /speclaunch/status shows it:
// a rejected one (an edited ConfigMap that does not load) is otherwise
// only in the log.
type lastReload struct {
	At     time.Time `json:"time"`
	Result string    `json:"result"`          // applied, rejected, switching
	File   string    `json:"file"`            // the file that changed; on SIGHUP, every watched file
	Why    string    `json:"why"`             // what the watcher saw: write, rename-over, SIGHUP, …
	Error  string    `json:"error,omitempty"` // why it was rejected, secrets masked
}

// reloadRecord is a reload's outcome: applied when its settings were
// taken (a switch it asks for is counted and shown among the switches),
// rejected with the error, masked, when not.
func reloadRecord(now time.Time, ch watch.Change, files []string, err error, mask func(string) string) lastReload {
	r := lastReload{At: now, Result: metrics.ReloadApplied, File: reloadFile(ch, files), Why: ch.Reason}
	if err != nil {
		r.Result, r.Error = metrics.ReloadRejected, mask(err.Error())
	}
	return r
}

// reloaded records a reload's outcome for the status page and /metrics.
func (sv *launcher) reloaded(ch watch.Change, err error) {
	sv.reloading(ch)(err)
}

// reloading shows a reload whose settings went to the runtime as
// switching, and returns what records its outcome when the runtime
// replies: applied, or rejected with the error (the new engine failed and
// the old settings serve on). A reload a later one superseded, or one cut
// by the stop, records nothing: the later one's outcome is the one shown.
// It may be called from any goroutine: the watched files are read now.
func (sv *launcher) reloading(ch watch.Change) func(error) {
	files := slices.Clone(sv.w.files)
	seq := sv.st.setReload(0, lastReload{At: time.Now(), Result: reloadSwitching, File: reloadFile(ch, files), Why: ch.Reason})
	return func(err error) {
		if errors.Is(err, server.ErrSuperseded) || errors.Is(err, server.ErrStopping) {
			return
		}
		r := reloadRecord(time.Now(), ch, files, err, sv.c.Secrets.String)
		sv.st.setReload(seq, r)
		sv.met.Reloaded(r.Result)
	}
}

// reloadSwitching is last_reload's result while the reload's switch runs.
const reloadSwitching = "switching"

// reloadFile is the file a reload names: the one that changed; on SIGHUP,
// every watched file.
func reloadFile(ch watch.Change, files []string) string {
	if ch.Path == "" {
		return strings.Join(files, ", ")
	}
	return ch.Path
}

// setReload shows r as the last reload. seq 0 begins a reload and returns
// its number; a reload's outcome (seq its number) shows only while no
// later reload has begun, whose own record stands.
func (st *serveStatus) setReload(seq uint64, r lastReload) uint64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	if seq == 0 {
		st.reloadSeq++
		seq = st.reloadSeq
	}
	if seq == st.reloadSeq {
		st.reload = &r
	}
	return seq
}
