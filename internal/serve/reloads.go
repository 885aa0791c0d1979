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
	Result string    `json:"result"`          // applied, rejected, switching, superseded
	File   string    `json:"file"`            // the file that changed; on SIGHUP, every watched file
	Why    string    `json:"why"`             // what the watcher saw: created, write, rename-over, SIGHUP, …
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
	if errors.Is(err, server.ErrStopping) {
		return // cut short by the stop: nothing to show
	}
	sv.reloading(ch)(err)
}

// reloading shows a reload whose settings went to the runtime as
// switching, and returns what records its outcome when the runtime
// replies: applied, or rejected with the error (the new engine failed and
// the old settings serve on); superseded, on the status page alone, when
// a later switch took its place before it began (a follow or adaptive
// switch is built from the same files on disk; a later reload shows its
// own record), or a later reload, rejected, dropped it (rejectReload). A
// reload cut by the stop records nothing. reloading runs on
// the feed goroutine (it reads the watched files); the func it returns
// may run on any.
func (sv *launcher) reloading(ch watch.Change) func(error) {
	files := slices.Clone(sv.w.files)
	seq := sv.st.setReload(0, lastReload{At: time.Now(), Result: reloadSwitching, File: reloadFile(ch, files), Why: ch.Reason})
	return func(err error) {
		switch {
		case errors.Is(err, server.ErrStopping):
			return
		case errors.Is(err, server.ErrSuperseded), errors.Is(err, server.ErrWithdrawn):
			sv.st.setReload(seq, lastReload{At: time.Now(), Result: reloadSuperseded, File: reloadFile(ch, files), Why: ch.Reason})
			return
		}
		r := reloadRecord(time.Now(), ch, files, err, sv.c.Secrets.String)
		sv.st.setReload(seq, r)
		sv.met.Reloaded(r.Result)
	}
}

// last_reload's results beside applied and rejected: while the reload's
// switch runs, and when a later switch took its place.
const (
	reloadSwitching  = "switching"
	reloadSuperseded = "superseded"
)

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
