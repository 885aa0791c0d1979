// Package watch turns edits of the profile and policy files into reload
// triggers: one Change per effective content change, and one per SIGHUP.
//
// Files are watched through their parent directory, never directly:
// editors save by writing a temporary file and renaming it over the
// original, which silently ends a watch on the original inode, and a
// Kubernetes ConfigMap update swaps a "..data" symlink so that no event ever
// names the file itself (fsnotify's README, "Watching a file doesn't work
// well"; fsnotify#214; spf13/viper#284: the update renames a ..data_tmp
// symlink over ..data and removes the old directory). So an
// event counts when it names the file, or when the file's resolved path
// (EvalSymlinks) is no longer what it was. Events are debounced, and only a
// changed sha256 of the content is reported, so an editor's three writes or
// a rewrite of identical bytes cost no engine restart. A slow poll of the
// same hash is the safety net for where inotify is blind: single-file bind
// mounts, NFS, FUSE, queue overflow.
package watch

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/speclaunch/speclaunch/internal/safefile"
)

// Reasons carried by Change. What events saw is named by classify.
const (
	ReasonCreated     = "created"      // the file was not there at the last look, and is now
	ReasonRemoved     = "removed"      // the file was there at the last look, and is not now
	ReasonWrite       = "write"        // the file was written in place (truncate and write)
	ReasonRenameOver  = "rename-over"  // another file was renamed onto it (editor save)
	ReasonSymlinkSwap = "symlink swap" // the file resolves elsewhere now (ConfigMap ..data swap)
	ReasonRescan      = "rescan"       // fsnotify overflowed or failed; every file was re-read
	ReasonPoll        = "poll"         // found by the periodic poll, not by an event
	ReasonSIGHUP      = "SIGHUP"       // explicit reload request
)

// byEvents marks a file pending on events: check names what they did
// (classify) once it has read the file, since an event alone cannot tell a
// file created from one renamed over.
const byEvents = "events"

// Change reports one reload trigger. For SIGHUP, Path is "": the request is
// to reload everything, whether or not any file changed.
type Change struct {
	Path   string
	Reason string
	// Err: the file cannot be read any more (too large, a directory, a
	// FIFO): a change the reader must reject, said once until the file
	// leaves that state.
	Err error
}

// Defaults for Options.
const (
	DefaultDebounce = 150 * time.Millisecond
	DefaultPoll     = 5 * time.Second
)

// Options tunes a Watcher. The zero value debounces by DefaultDebounce,
// does not poll and ignores SIGHUP.
type Options struct {
	// Debounce is how long the files must be quiet after an event before
	// they are read (0 means DefaultDebounce). A steady stream of events
	// still gets a read at least every max(1s, 4×Debounce).
	Debounce time.Duration
	// Poll re-hashes every file at this interval, for mounts that deliver
	// no events (0 = off; DefaultPoll is a good value).
	Poll time.Duration
	// Signals makes SIGHUP a forced reload. Registering also means SIGHUP
	// no longer terminates the process.
	Signals bool
	Logger  *slog.Logger
	// MayVanish are files whose absence is a setting of its own (the
	// tuned layer: no file, no tuned schedule): one deleted is a change,
	// where any other file deleted is an edit under way and waited for.
	MayVanish []string

	pollOnly bool // tests: no fsnotify, as on a bind mount
}

// file is what the loop knows about one watched path. Only the loop
// goroutine touches it after New returns.
type file struct {
	path      string // absolute, cleaned; compared with event names
	dir       string
	resolved  string      // last EvalSymlinks(path) seen with a readable file
	sum       [32]byte    // sha256 of the last content reported (or found at New)
	have      bool        // sum is valid
	pending   string      // strongest reason seen since the last debounced read
	ops       fsnotify.Op // the events that named the file since then
	missing   bool        // last read found no file (warned once)
	mayGo     bool        // its absence is a setting (Options.MayVanish)
	vanishing bool        // a MayVanish file found missing once, not yet twice
	empty     bool        // last read found an empty file (warned once)
	// unreadable is the error of the last read that failed otherwise (a
	// FIFO, a directory, a file too large), warned once until it changes
	// or the file reads again: every poll met it.
	unreadable string
}

// Watcher watches a set of files. Create it with New; Close it when done.
type Watcher struct {
	files    []*file
	dirs     []string
	fsw      *fsnotify.Watcher // nil when poll-only
	sig      chan os.Signal    // nil unless Options.Signals
	debounce time.Duration
	maxWait  time.Duration
	poll     time.Duration
	log      *slog.Logger
	// mayVanish: Options.MayVanish, absolute.
	mayVanish []string

	changes   chan Change
	paths     chan setReq // Watch: the new set, taken in by the loop
	quit      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// New starts watching paths. A file may be missing (its appearance is a
// change), and so may its directory when o.Poll is on: the poll looks for
// the file and watches the directory once it exists (~/.config/speclaunch
// before the first tune made it). Without a poll nothing would ever see
// it, so the directory must exist. Files sharing a directory share one
// inotify watch.
func New(paths []string, o Options) (*Watcher, error) {
	w := &Watcher{
		debounce:  o.Debounce,
		poll:      o.Poll,
		log:       o.Logger,
		mayVanish: absAll(o.MayVanish),
		changes:   make(chan Change, 8),
		paths:     make(chan setReq),
		quit:      make(chan struct{}),
		done:      make(chan struct{}),
	}
	if w.debounce <= 0 {
		w.debounce = DefaultDebounce
	}
	w.maxWait = max(time.Second, 4*w.debounce)
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	for _, p := range paths {
		if err := w.addFile(p); err != nil {
			return nil, err
		}
	}
	if !o.pollOnly {
		fsw, err := fsnotify.NewWatcher()
		if err != nil {
			return nil, fmt.Errorf("watch: %w", err)
		}
		w.fsw = fsw
		for _, d := range w.dirs {
			if err := w.addDir(d); err != nil {
				fsw.Close()
				return nil, fmt.Errorf("watch: %s: %w", d, err)
			}
		}
	}
	if o.Signals {
		w.sig = make(chan os.Signal, 1)
		signal.Notify(w.sig, syscall.SIGHUP)
	}
	go w.loop()
	return w, nil
}

// addFile starts watching p, its content now the baseline: no change is
// reported for what it holds already. A path watched already is skipped.
func (w *Watcher) addFile(p string) error {
	abs, err := filepath.Abs(p)
	if err != nil {
		return fmt.Errorf("watch: %s: %w", p, err)
	}
	if slices.ContainsFunc(w.files, func(f *file) bool { return f.path == abs }) {
		return nil
	}
	f := &file{path: abs, dir: filepath.Dir(abs), mayGo: slices.Contains(w.mayVanish, abs)}
	if sum, resolved, _, err := readSum(abs); err == nil {
		f.sum, f.resolved, f.have = sum, resolved, true
	} else if errors.Is(err, fs.ErrNotExist) {
		// Absent from the start (a tuned layer not written yet) is not a
		// file deleted: the first poll must not warn that it is missing.
		f.missing = true
	} else {
		f.unreadable = err.Error()
		w.log.Warn("cannot read watched file", "path", abs, "err", err)
	}
	w.files = append(w.files, f)
	if !slices.Contains(w.dirs, f.dir) {
		w.dirs = append(w.dirs, f.dir)
	}
	return nil
}

// Watch makes paths the files watched: files new to the set start from
// their content now (a reload that named them has just read it; a write
// between that read and this call is not seen until the next one), files
// no longer named are dropped. It returns once the set is in force, and
// an error after Close. A reload that adds a policy file to the profile is
// how the set grows. The reader of Changes may call it while Changes is
// full.
func (w *Watcher) Watch(paths []string) error {
	r := setReq{paths: paths, done: make(chan struct{})}
	select {
	case w.paths <- r:
	case <-w.done:
		return errors.New("watch: closed")
	}
	select { // the new files' baselines are read: a later write is a change
	case <-r.done:
		return nil
	case <-w.done:
		return errors.New("watch: closed")
	}
}

// setReq is one Watch call: done closes once the set is in force.
type setReq struct {
	paths []string
	done  chan struct{}
}

// setPaths is Watch, on the loop's goroutine.
func (w *Watcher) setPaths(paths []string) {
	keep := map[string]bool{}
	for _, p := range paths {
		if abs, err := filepath.Abs(p); err == nil {
			keep[abs] = true
		}
	}
	// A new slice: emit may run this in the middle of a range over the old.
	w.files = slices.DeleteFunc(slices.Clone(w.files), func(f *file) bool { return !keep[f.path] })
	for _, p := range paths {
		if err := w.addFile(p); err != nil {
			w.log.Warn("cannot watch file", "path", p, "err", err)
		}
	}
	if w.fsw == nil {
		return
	}
	have := w.fsw.WatchList()
	for _, d := range w.dirs {
		if !slices.Contains(have, d) {
			if err := w.addDir(d); err != nil {
				w.log.Warn("cannot watch directory; its files are polled", "dir", d, "err", err)
			}
		}
	}
}

// addDir watches directory d. One that does not exist yet is left to the
// poll, where one runs (rewatch adds it once it exists): said at debug, not
// an error; it is the tuned layer's on every host tune has not run on.
func (w *Watcher) addDir(d string) error {
	err := w.fsw.Add(d)
	if err != nil && w.poll > 0 && errors.Is(err, fs.ErrNotExist) {
		w.log.Debug("the directory of a watched file does not exist yet; polled until it does", "dir", d)
		return nil
	}
	return err
}

// Changes delivers reload triggers. It is closed by Close. A slow reader
// holds up the watcher but loses nothing.
func (w *Watcher) Changes() <-chan Change { return w.changes }

// Close stops watching, releases the inotify instance and the SIGHUP
// registration, waits for the loop to end, and closes Changes. It is safe
// to call more than once.
func (w *Watcher) Close() error {
	w.closeOnce.Do(func() {
		close(w.quit)
		if w.sig != nil {
			signal.Stop(w.sig)
		}
		if w.fsw != nil {
			w.closeErr = w.fsw.Close()
		}
		<-w.done
	})
	return w.closeErr
}

// loop turns file events, watch errors, polls and SIGHUP into checks and
// Changes until Close. Events are debounced; a poll or SIGHUP acts at once.
func (w *Watcher) loop() {
	defer close(w.done)
	defer close(w.changes)

	var events <-chan fsnotify.Event
	var errs <-chan error
	if w.fsw != nil {
		events, errs = w.fsw.Events, w.fsw.Errors
	}
	var pollC <-chan time.Time
	if w.poll > 0 {
		t := time.NewTicker(w.poll)
		defer t.Stop()
		pollC = t.C
	}
	d := newDebounce(w.debounce, w.maxWait)
	defer d.timer.Stop()

	for {
		select {
		case <-w.quit:
			return
		case r := <-w.paths:
			w.setPaths(r.paths)
			close(r.done)
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if w.onEvent(ev) {
				d.arm()
			}
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			w.onError(err)
			d.arm()
		case <-d.c:
			d.c = nil
			if !w.checkPending() {
				return
			}
		case <-pollC:
			if !w.pollAll() {
				return
			}
		case <-w.sig:
			if !w.onSIGHUP() {
				return
			}
		}
	}
}

// debounce coalesces a burst of events into one check: it fires wait
// after the latest event, but no later than maxWait after the first.
type debounce struct {
	timer         *time.Timer
	c             <-chan time.Time // the timer's channel while armed, else nil
	first         time.Time        // first event of the current window
	wait, maxWait time.Duration
}

// newDebounce returns a debounce that is not armed.
func newDebounce(wait, maxWait time.Duration) *debounce {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &debounce{timer: t, wait: wait, maxWait: maxWait}
}

// arm (re)starts the timer for an event.
func (d *debounce) arm() {
	now := time.Now()
	if d.c == nil {
		d.first = now
	}
	d.timer.Reset(min(d.wait, d.first.Add(d.maxWait).Sub(now)))
	d.c = d.timer.C
}

// onError marks every file for a rescan: an overflow means events were
// lost; any other watch error may have lost some too.
func (w *Watcher) onError(err error) {
	w.log.Warn("file watch error; rescanning", "err", err, "overflow", errors.Is(err, fsnotify.ErrEventOverflow))
	for _, f := range w.files {
		f.pending = stronger(f.pending, ReasonRescan)
	}
}

// checkPending checks each file an event marked, with the strongest
// reason it was marked for; false once the watcher is closing.
func (w *Watcher) checkPending() bool {
	for _, f := range w.files {
		if f.pending != "" {
			reason, ops := f.pending, f.ops
			f.pending, f.ops = "", 0
			if !w.checkAfter(f, reason, ops) {
				return false
			}
		}
	}
	return true
}

// pollAll re-adds lost watches and checks every file, for file systems
// whose events cannot be trusted; false once the watcher is closing.
func (w *Watcher) pollAll() bool {
	w.rewatch()
	for _, f := range w.files {
		if !w.check(f, ReasonPoll) {
			return false
		}
	}
	return true
}

// onSIGHUP takes in the current content, so that events for what SIGHUP
// already reloaded do not trigger a second reload, and sends the reload
// Change; false once the watcher is closing.
func (w *Watcher) onSIGHUP() bool {
	for _, f := range w.files {
		f.pending, f.ops = "", 0
		if sum, resolved, _, err := readSum(f.path); err == nil {
			f.sum, f.resolved, f.have = sum, resolved, true
		}
	}
	return w.emit(Change{Reason: ReasonSIGHUP})
}

// onEvent marks the files an event may have changed and reports whether
// any was marked.
func (w *Watcher) onEvent(ev fsnotify.Event) bool {
	if ev.Op == fsnotify.Chmod {
		return false // attribute-only: editors and the kernel storm these
	}
	name := filepath.Clean(ev.Name)
	dir := filepath.Dir(name)
	marked := false
	for _, f := range w.files {
		if f.dir != dir {
			continue
		}
		mark := name == f.path
		if mark {
			f.ops |= ev.Op
		} else if resolved, err := filepath.EvalSymlinks(f.path); err == nil && resolved != f.resolved {
			// The ConfigMap case: no event names the file, but it now
			// resolves into a different ..<timestamp> directory (or, new,
			// resolves at all: a file renamed into place).
			mark = true
		}
		if mark {
			w.log.Debug("watched file event", "path", f.path, "event", ev.String())
			f.pending = stronger(f.pending, byEvents)
			marked = true
		}
	}
	return marked
}

// stronger keeps the most telling reason seen in one debounce window.
func stronger(a, b string) string {
	if rank(b) > rank(a) {
		return b
	}
	return a
}

func rank(reason string) int {
	switch reason {
	case byEvents:
		return 1
	case ReasonRescan:
		return 2
	}
	return 0
}

// sighting is what one debounce window saw of a watched file: the events
// that named it, and how it stood at the last look and stands now.
type sighting struct {
	ops      fsnotify.Op // the events naming the file (none: a swap elsewhere)
	existed  bool        // it was there at the last look
	exists   bool        // it is there now
	relinked bool        // it resolves to another path than at the last look
}

// classify names what a window's events did to a file. The event alone
// misled: a first tune renaming tuned.toml into place was a "symlink swap"
// (it resolved at all, where it had not), and a shell's `>` creating it a
// "rename-over" (its Create event).
func classify(s sighting) string {
	switch {
	case !s.existed && s.exists:
		return ReasonCreated
	case s.existed && !s.exists:
		return ReasonRemoved
	case s.relinked:
		return ReasonSymlinkSwap
	case s.ops.Has(fsnotify.Create) || s.ops.Has(fsnotify.Rename) || s.ops.Has(fsnotify.Remove):
		return ReasonRenameOver
	}
	return ReasonWrite
}

// checkAfter is check for a file pending for reason; for events it first
// reads what they did (classify).
func (w *Watcher) checkAfter(f *file, reason string, ops fsnotify.Op) bool {
	if reason != byEvents {
		return w.check(f, reason)
	}
	resolved, err := filepath.EvalSymlinks(f.path)
	exists := err == nil || !errors.Is(err, fs.ErrNotExist)
	// A file never read (absent, or empty since it appeared) was not
	// there as content: its first is a creation.
	existed := !f.missing && (f.have || f.unreadable != "")
	reason = classify(sighting{ops: ops, existed: existed, exists: exists, relinked: err == nil && existed && f.have && resolved != f.resolved})
	return w.check(f, reason)
}

// check re-reads f and emits a Change if its content hash differs from the
// last one seen. A missing file (between an editor's remove and create) is
// not a change: the next event or poll looks again. It returns false only
// if the watcher is closing.
func (w *Watcher) check(f *file, reason string) bool {
	sum, resolved, size, err := readSum(f.path)
	if err != nil {
		// Each state is said once, until the file leaves it.
		if errors.Is(err, fs.ErrNotExist) {
			f.unreadable, f.empty = "", false
			if f.mayGo && !f.missing && !f.vanishing {
				// Gone at one look may be a save's gap that a poll fell
				// into: the next look (event or poll) decides.
				f.vanishing = true
				return true
			}
			if f.mayGo && !f.missing {
				// Gone is what it says now: the next content that appears
				// is a change, even the one it had.
				f.missing, f.have, f.vanishing = true, false, false
				w.log.Info("watched file deleted; reloading without it", "path", f.path)
				// What happened, however this second look came (a poll).
				return w.emit(Change{Path: f.path, Reason: ReasonRemoved})
			}
			if !f.missing {
				f.missing = true
				if to, lerr := os.Readlink(f.path); lerr == nil {
					// A link that leads nowhere is not "deleted": say where it points.
					w.log.Warn("watched file is a symlink that leads nowhere; the running settings stay until it leads to a file", "path", f.path, "to", to)
				} else {
					w.log.Warn("watched file is missing (deleted, or being replaced); the running settings stay until it is back", "path", f.path)
				}
			}
		} else if msg := err.Error(); msg != f.unreadable {
			// Its content once readable again is a change, even the
			// content it had: the reload this one failed is then applied.
			f.unreadable, f.missing, f.empty, f.have = msg, false, false, false
			w.log.Warn("cannot read watched file", "path", f.path, "err", err)
			return w.emit(Change{Path: f.path, Reason: reason, Err: err})
		}
		return true
	}
	f.unreadable, f.vanishing = "", false
	if f.missing {
		f.missing = false
		if f.have {
			w.log.Info("watched file is back", "path", f.path)
		} else {
			w.log.Info("watched file appeared", "path", f.path)
		}
		if f.mayGo {
			// A file whose absence was a setting came to be: what
			// happened, however this look came (a poll).
			reason = ReasonCreated
		}
	}
	f.resolved = resolved
	if size == 0 {
		// A truncate-then-write caught between its two steps, or a file
		// emptied by mistake: neither is a profile to apply. The next
		// write brings a change.
		if !f.empty {
			f.empty = true
			w.log.Warn("watched file is empty (a write caught halfway?); not applied: waiting for the next write", "path", f.path)
		}
		return true
	}
	wasEmpty := f.empty
	f.empty = false
	if f.have && bytes.Equal(sum[:], f.sum[:]) {
		if wasEmpty { // the warning said it waits for the next write: this one changes nothing
			w.log.Info("watched file is not empty any more and holds what it held before: nothing to apply", "path", f.path)
		}
		return true
	}
	f.sum, f.have = sum, true
	w.log.Debug("watched file changed", "path", f.path, "reason", reason)
	return w.emit(Change{Path: f.path, Reason: reason})
}

func (w *Watcher) emit(c Change) bool {
	for {
		select {
		case w.changes <- c:
			return true
		case <-w.quit:
			return false
		case r := <-w.paths:
			// The reader of Changes may be the one calling Watch (serve's
			// reload loop): waiting only on Changes would deadlock both.
			w.setPaths(r.paths)
			close(r.done)
		}
	}
}

// rewatch re-adds directories whose watch was dropped (deleted and
// recreated, or unmounted and remounted), so events resume after the poll
// has noticed.
func (w *Watcher) rewatch() {
	if w.fsw == nil {
		return
	}
	have := w.fsw.WatchList()
	for _, d := range w.dirs {
		if !slices.Contains(have, d) {
			if err := w.fsw.Add(d); err == nil {
				w.log.Info("watching directory again", "dir", d)
			}
		}
	}
}

// readSum returns the content hash of path, where it resolves to and its
// size. The read is safefile's: a watched file swapped for a FIFO or a
// device, or grown past the policy cap, is a warning here (and bad input on
// reload), never a watcher stuck in a read.
func readSum(path string) (sum [32]byte, resolved string, size int, err error) {
	data, err := safefile.ReadFile(context.Background(), "watched file", path, safefile.PolicyLimit)
	if err != nil {
		return sum, "", 0, err
	}
	resolved, err = filepath.EvalSymlinks(path)
	if err != nil {
		return sum, "", 0, err
	}
	return sha256.Sum256(data), resolved, len(data), nil
}

// absAll is paths made absolute (those that cannot be are left out).
func absAll(paths []string) []string {
	var out []string
	for _, p := range paths {
		if a, err := filepath.Abs(p); err == nil {
			out = append(out, a)
		}
	}
	return out
}
