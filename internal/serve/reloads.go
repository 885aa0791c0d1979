package serve

import (
	"strings"
	"time"

	"github.com/speclaunch/speclaunch/internal/metrics"
	"github.com/speclaunch/speclaunch/internal/watch"
)

// lastReload is the last reload's outcome as /speclaunch/status shows it:
// a rejected one (an edited ConfigMap that does not load) is otherwise
// only in the log.
type lastReload struct {
	At     time.Time `json:"time"`
	Result string    `json:"result"`          // applied, rejected
	File   string    `json:"file"`            // the file that changed; on SIGHUP, every watched file
	Why    string    `json:"why"`             // what the watcher saw: write, rename-over, SIGHUP, …
	Error  string    `json:"error,omitempty"` // why it was rejected, secrets masked
}

// reloadRecord is a reload's outcome: applied when its settings were
// taken (a switch it asks for is counted and shown among the switches),
// rejected with the error, masked, when not.
func reloadRecord(now time.Time, ch watch.Change, files []string, err error, mask func(string) string) lastReload {
	r := lastReload{At: now, Result: metrics.ReloadApplied, File: ch.Path, Why: ch.Reason}
	if r.File == "" {
		r.File = strings.Join(files, ", ")
	}
	if err != nil {
		r.Result, r.Error = metrics.ReloadRejected, mask(err.Error())
	}
	return r
}

// reloaded records a reload's outcome for the status page and /metrics.
func (sv *launcher) reloaded(ch watch.Change, err error) {
	r := reloadRecord(time.Now(), ch, sv.w.files, err, sv.c.Secrets.String)
	sv.st.setReload(r)
	sv.met.Reloaded(r.Result)
}

func (st *serveStatus) setReload(r lastReload) {
	st.mu.Lock()
	st.reload = &r
	st.mu.Unlock()
}
