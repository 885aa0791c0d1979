package watch

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/speclaunch/speclaunch/internal/testenv"
)

// Generous liveness bound for an expected Change; never a speed target.
const patience = 5 * time.Second

func newWatcher(t testing.TB, paths []string, o Options) *Watcher {
	t.Helper()
	if o.Logger == nil && testing.Verbose() {
		o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	w, err := New(paths, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

func expect(t *testing.T, w *Watcher, want Change) {
	t.Helper()
	select {
	case got, ok := <-w.Changes():
		if !ok {
			t.Fatalf("Changes closed, want %+v", want)
		}
		if got != want {
			t.Fatalf("Change = %+v, want %+v", got, want)
		}
	case <-time.After(patience):
		t.Fatalf("no Change, want %+v", want)
	}
}

// expectNoneBefore renames new content over sentinel, a file the watcher
// watches after the others, and checks that the next Change is the
// sentinel's (reason: how it is seen, by events or by a poll): a Change
// the steps before it wrongly made comes first. One watcher's events come
// in order, and a debounce window, like a poll, checks the files in the
// order they were added; so the sentinel's Change also says that whatever
// came before it has been checked, which no sleep says.
func expectNoneBefore(t *testing.T, w *Watcher, sentinel, content, reason string) {
	t.Helper()
	renameOver(t, sentinel, content)
	expect(t, w, Change{Path: sentinel, Reason: reason})
}

// expectNone checks that nothing arrives for d: long enough to cover the
// debounce several times over. Where a step can be followed by another
// save, expectNoneBefore says it without a window.
func expectNone(t *testing.T, w *Watcher, d time.Duration) {
	t.Helper()
	select {
	case got := <-w.Changes():
		t.Fatalf("unexpected Change %+v", got)
	case <-time.After(d):
	}
}

func write(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// renameOver saves the way editors do: a temporary file renamed over path.
func renameOver(t testing.TB, path, content string) {
	t.Helper()
	tmp := path + ".tmp~"
	write(t, tmp, content)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestInPlaceWriteIsOneChange(t *testing.T) {
	t.Parallel() // each has its own directory; the SIGHUP tests run alone, before these
	dir := t.TempDir()
	path, sentinel := filepath.Join(dir, "profile.toml"), filepath.Join(dir, "sentinel.toml")
	write(t, path, "v1")
	write(t, sentinel, "s0")
	// A debounce the burst fits in whatever the load: three writes with an
	// fsync each outlasted the default 150 ms on a loaded machine.
	w := newWatcher(t, []string{path, sentinel}, Options{Debounce: time.Second})

	// Three writes in a burst, as some editors do, make one Change.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range []string{"v", "2", "\n"} {
		f.WriteString(part)
		f.Sync()
	}
	f.Close()
	expect(t, w, Change{Path: path, Reason: ReasonWrite})
	expectNoneBefore(t, w, sentinel, "s1", ReasonRenameOver)
}

func TestRenameOver(t *testing.T) {
	t.Parallel() // each has its own directory; the SIGHUP tests run alone, before these
	path := filepath.Join(t.TempDir(), "profile.toml")
	write(t, path, "v1")
	w := newWatcher(t, []string{path}, Options{})
	renameOver(t, path, "v2")
	expect(t, w, Change{Path: path, Reason: ReasonRenameOver})
	// The watch survives the inode swap: a second save is seen too.
	renameOver(t, path, "v3")
	expect(t, w, Change{Path: path, Reason: ReasonRenameOver})
}

// TestConfigMapSwap reproduces the kubelet's atomic writer: the file is a
// symlink into ..data, which points at a timestamped directory, and an
// update renames a new ..data symlink over the old one. No event names the
// watched file.
func TestConfigMapSwap(t *testing.T) {
	t.Parallel() // each has its own directory; the SIGHUP tests run alone, before these
	dir := t.TempDir()
	path := filepath.Join(dir, "profile.toml")
	mkdata := func(ts, content string) {
		if err := os.Mkdir(filepath.Join(dir, ts), 0o755); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(dir, ts, "profile.toml"), content)
	}
	mkdata("..ts1", "v1")
	must(t, os.Symlink("..ts1", filepath.Join(dir, "..data")))
	must(t, os.Symlink("..data/profile.toml", path))
	sentinel := filepath.Join(dir, "sentinel.toml")
	write(t, sentinel, "s0")
	w := newWatcher(t, []string{path, sentinel}, Options{})

	swap := func(from, to, content string) {
		mkdata(to, content)
		must(t, os.Symlink(to, filepath.Join(dir, "..data_tmp")))
		must(t, os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")))
		must(t, os.RemoveAll(filepath.Join(dir, from)))
	}
	swap("..ts1", "..ts2", "v2")
	expect(t, w, Change{Path: path, Reason: ReasonSymlinkSwap})
	swap("..ts2", "..ts3", "v3")
	expect(t, w, Change{Path: path, Reason: ReasonSymlinkSwap})
	// An update of another key swaps ..data but leaves this file's bytes.
	swap("..ts3", "..ts4", "v3")
	expectNoneBefore(t, w, sentinel, "s1", ReasonRenameOver)
}

func TestUnchangedRewriteIsNoChange(t *testing.T) {
	t.Parallel() // each has its own directory; the SIGHUP tests run alone, before these
	dir := t.TempDir()
	path, sentinel := filepath.Join(dir, "profile.toml"), filepath.Join(dir, "sentinel.toml")
	write(t, path, "same")
	write(t, sentinel, "s0")
	w := newWatcher(t, []string{path, sentinel}, Options{})
	write(t, path, "same")
	renameOver(t, path, "same")
	must(t, os.Chmod(path, 0o600))
	// The rewrites' events are all checked once the sentinel's Change
	// comes: the edit below is a window of its own (a write, not a
	// rename-over folded in with them).
	expectNoneBefore(t, w, sentinel, "s1", ReasonRenameOver)
	// Still watching: a real edit afterwards is reported.
	write(t, path, "different")
	expect(t, w, Change{Path: path, Reason: ReasonWrite})
}

func TestMissingFileWaitsForItsReturn(t *testing.T) {
	t.Parallel() // each has its own directory; the SIGHUP tests run alone, before these
	dir := t.TempDir()
	path, sentinel := filepath.Join(dir, "policy.toml"), filepath.Join(dir, "sentinel.toml")
	write(t, path, "v1")
	write(t, sentinel, "s0")
	w := newWatcher(t, []string{path, sentinel}, Options{})
	// Remove, then recreate once the removal has been checked (the
	// sentinel's Change says so): the gap is not a change, the new
	// content is.
	must(t, os.Remove(path))
	expectNoneBefore(t, w, sentinel, "s1", ReasonRenameOver)
	renameOver(t, path, "v2")
	expect(t, w, Change{Path: path, Reason: ReasonCreated})

	// A file absent at New is reported when it appears, as created
	// whether written by a shell's > or renamed into place.
	later, renamed := filepath.Join(dir, "later.toml"), filepath.Join(dir, "renamed.toml")
	w2 := newWatcher(t, []string{later, renamed}, Options{})
	write(t, later, "x")
	expect(t, w2, Change{Path: later, Reason: ReasonCreated})
	renameOver(t, renamed, "x")
	expect(t, w2, Change{Path: renamed, Reason: ReasonCreated})
}

// classify names what one window's events did, from the events that named
// the file (folded as onEvent folds them) and how it stood before and after.
func TestClassify(t *testing.T) {
	const f, tmp = "/d/tuned.toml", "/d/.tuned.toml.tmp"
	ev := func(name string, op fsnotify.Op) fsnotify.Event { return fsnotify.Event{Name: name, Op: op} }
	for _, c := range []struct {
		name                      string
		events                    []fsnotify.Event
		existed, exists, relinked bool
		want                      string
	}{
		// tune's first write: a temporary file renamed onto a name that
		// was not there (said "symlink swap": it resolved, where it had not)
		{"first tune", []fsnotify.Event{ev(tmp, fsnotify.Create), ev(tmp, fsnotify.Write), ev(tmp, fsnotify.Rename), ev(f, fsnotify.Create)}, false, true, false, ReasonCreated},
		// the same seen only through the temporary file's events
		{"first tune, only tmp's events", []fsnotify.Event{ev(tmp, fsnotify.Write), ev(tmp, fsnotify.Rename)}, false, true, false, ReasonCreated},
		// printf ... > tuned.toml where there was none (said "rename-over")
		{"shell creates", []fsnotify.Event{ev(f, fsnotify.Create), ev(f, fsnotify.Write)}, false, true, false, ReasonCreated},
		{"shell rewrites", []fsnotify.Event{ev(f, fsnotify.Write), ev(f, fsnotify.Write)}, true, true, false, ReasonWrite},
		{"editor save", []fsnotify.Event{ev(tmp, fsnotify.Create), ev(tmp, fsnotify.Write), ev(tmp, fsnotify.Rename), ev(f, fsnotify.Create)}, true, true, false, ReasonRenameOver},
		{"vim: moved aside, written anew", []fsnotify.Event{ev(f, fsnotify.Rename), ev(f, fsnotify.Create), ev(f, fsnotify.Write)}, true, true, false, ReasonRenameOver},
		{"ConfigMap ..data swap", []fsnotify.Event{ev("/d/..data_tmp", fsnotify.Create), ev("/d/..data_tmp", fsnotify.Rename), ev("/d/..data", fsnotify.Create)}, true, true, true, ReasonSymlinkSwap},
		{"deleted", []fsnotify.Event{ev(f, fsnotify.Remove)}, true, false, false, ReasonRemoved},
		{"moved away", []fsnotify.Event{ev(f, fsnotify.Rename)}, true, false, false, ReasonRemoved},
	} {
		var ops fsnotify.Op
		for _, e := range c.events {
			if e.Name == f {
				ops |= e.Op
			}
		}
		if got := classify(sighting{ops: ops, existed: c.existed, exists: c.exists, relinked: c.relinked}); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// A file whose absence is a setting (the tuned layer) deleted is a
// change: serve drops its schedules. Before, it waited for the file's
// return, as for a profile, and the deleted schedule stayed in force.
func TestMayVanishDeletedIsAChange(t *testing.T) {
	t.Parallel() // each has its own directory; the SIGHUP tests run alone, before these
	dir := t.TempDir()
	path := filepath.Join(dir, "tuned.toml")
	write(t, path, "v1")
	w := newWatcher(t, []string{path}, Options{MayVanish: []string{path}, Poll: 20 * time.Millisecond})
	must(t, os.Remove(path))
	// Said as what happened, however the second look came (a review:
	// it said "poll", and nothing with polling off).
	expect(t, w, Change{Path: path, Reason: ReasonRemoved})
	renameOver(t, path, "v1") // back with the content it had: a change too
	expect(t, w, Change{Path: path, Reason: ReasonCreated})
}

func TestFilesInOneDirectoryShareAWatch(t *testing.T) {
	t.Parallel() // each has its own directory; the SIGHUP tests run alone, before these
	d1, d2 := t.TempDir(), t.TempDir()
	a, b, c := filepath.Join(d1, "a.toml"), filepath.Join(d1, "b.toml"), filepath.Join(d2, "c.toml")
	sentinel := filepath.Join(d1, "sentinel.toml")
	for _, p := range []string{a, b, c, sentinel} {
		write(t, p, "v1")
	}
	w := newWatcher(t, []string{a, b, c, a, sentinel}, Options{})
	if got := slices.Sorted(slices.Values(w.fsw.WatchList())); !slices.Equal(got, slices.Sorted(slices.Values([]string{d1, d2}))) {
		t.Errorf("WatchList = %q, want one watch per directory", got)
	}
	write(t, b, "v2")
	expect(t, w, Change{Path: b, Reason: ReasonWrite})
	write(t, c, "v2")
	expect(t, w, Change{Path: c, Reason: ReasonWrite})
	expectNoneBefore(t, w, sentinel, "v2", ReasonRenameOver)
}

// TestPollOnly runs without fsnotify, as a single-file bind mount behaves.
func TestPollOnly(t *testing.T) {
	t.Parallel() // each has its own directory; the SIGHUP tests run alone, before these
	dir := t.TempDir()
	// The sentinel is absent until expectNoneBefore writes it: a poll
	// reads every file, so a Change of it cannot be an earlier poll's.
	path, sentinel := filepath.Join(dir, "profile.toml"), filepath.Join(dir, "sentinel.toml")
	write(t, path, "v1")
	w := newWatcher(t, []string{path, sentinel}, Options{Poll: 20 * time.Millisecond, pollOnly: true})
	if w.fsw != nil {
		t.Fatal("pollOnly still created an fsnotify watcher")
	}
	write(t, path, "v2")
	expect(t, w, Change{Path: path, Reason: ReasonPoll})
	write(t, path, "v2")
	expectNoneBefore(t, w, sentinel, "s1", ReasonPoll)
}

// TestOverflowRescans removes the directory watch so that the kernel
// reports nothing, then injects the overflow error fsnotify would send.
func TestOverflowRescans(t *testing.T) {
	t.Parallel() // each has its own directory; the SIGHUP tests run alone, before these
	dir := t.TempDir()
	path := filepath.Join(dir, "profile.toml")
	// In a directory still watched: one watcher's events come in order,
	// whichever directory they are in.
	sentinel := filepath.Join(t.TempDir(), "sentinel.toml")
	write(t, path, "v1")
	write(t, sentinel, "s0")
	w := newWatcher(t, []string{path, sentinel}, Options{})
	must(t, w.fsw.Remove(dir))
	write(t, path, "v2")
	expectNoneBefore(t, w, sentinel, "s1", ReasonRenameOver)
	w.fsw.Errors <- fsnotify.ErrEventOverflow
	expect(t, w, Change{Path: path, Reason: ReasonRescan})
}

func TestSIGHUPForcesReload(t *testing.T) {
	// Belt and braces: keep SIGHUP caught even if the watcher's
	// registration were missing, so a failure cannot kill the test binary.
	guard := make(chan os.Signal, 4)
	signal.Notify(guard, syscall.SIGHUP)
	defer signal.Stop(guard)

	path := filepath.Join(t.TempDir(), "profile.toml")
	write(t, path, "v1")
	w := newWatcher(t, []string{path}, Options{Signals: true})
	for range 2 { // unchanged files: a SIGHUP is still a reload each time
		must(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
		expect(t, w, Change{Reason: ReasonSIGHUP})
	}
}

func TestCloseStopsEverything(t *testing.T) {
	// Start os/signal's process-wide goroutine before counting.
	warm := make(chan os.Signal, 1)
	signal.Notify(warm, syscall.SIGHUP)
	signal.Stop(warm)
	before := runtime.NumGoroutine()

	path := filepath.Join(t.TempDir(), "profile.toml")
	write(t, path, "v1")
	w, err := New([]string{path}, Options{Poll: 10 * time.Millisecond, Signals: true})
	if err != nil {
		t.Fatal(err)
	}
	write(t, path, "v2") // leave a Change unread: Close must not block on it
	testenv.WaitFor(t, "the write's Change, unread", func() bool { return len(w.changes) > 0 })
	must(t, w.Close())
	must(t, w.Close())
	for range w.Changes() { // drains what was buffered, then sees it closed
	}
	deadline := time.Now().Add(patience)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines after Close, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestNewRejectsMissingDirectory(t *testing.T) {
	t.Parallel() // each has its own directory; the SIGHUP tests run alone, before these
	missing := filepath.Join(t.TempDir(), "nope", "profile.toml")
	_, err := New([]string{missing}, Options{})
	if err == nil || !strings.Contains(err.Error(), filepath.Dir(missing)) {
		t.Fatalf("New = %v, want an error naming the directory", err)
	}
}

// With a poll, a file whose directory is not made yet (the tuned layer
// before the first tune) is watched all the same: New takes it without a
// warning, and the file's arrival, then its edits, are changes.
func TestNewPollsAMissingDirectory(t *testing.T) {
	t.Parallel() // each has its own directory; the SIGHUP tests run alone, before these
	path := filepath.Join(t.TempDir(), "nope", "tuned.toml")
	var logs lockedBuffer
	w := newWatcher(t, []string{path}, Options{Poll: 20 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	expectNone(t, w, 200*time.Millisecond)
	must(t, os.Mkdir(filepath.Dir(path), 0o755))
	renameOver(t, path, "v1")
	expectPath(t, w, path)
	renameOver(t, path, "v2")
	expectPath(t, w, path)
	if logs.String() != "" {
		t.Errorf("a file absent from the start was warned of:\n%s", logs.String())
	}
}

// expectPath waits for a Change of path, whatever saw it (event or poll).
func expectPath(t *testing.T, w *Watcher, path string) {
	t.Helper()
	select {
	case got := <-w.Changes():
		if got.Path != path || got.Err != nil {
			t.Fatalf("Change = %+v, want one of %s", got, path)
		}
	case <-time.After(patience):
		t.Fatalf("no Change of %s", path)
	}
}

// TestSaveToChangeLatency logs how long after a save the Change arrives,
// with the default 150 ms debounce. The budget from save to
// restart start is 500 ms; the bound below is only a liveness check.
func TestSaveToChangeLatency(t *testing.T) {
	t.Parallel() // each has its own directory; the SIGHUP tests run alone, before these
	path := filepath.Join(t.TempDir(), "profile.toml")
	write(t, path, "v0")
	w := newWatcher(t, []string{path}, Options{Poll: DefaultPoll})
	var lat []time.Duration
	for i := range 10 {
		start := time.Now()
		if i%2 == 0 {
			write(t, path, fmt.Sprint("v", i+1))
		} else {
			renameOver(t, path, fmt.Sprint("v", i+1))
		}
		select {
		case <-w.Changes():
			lat = append(lat, time.Since(start))
		case <-time.After(patience):
			t.Fatalf("save %d: no Change", i)
		}
	}
	slices.Sort(lat)
	t.Logf("save→Change over %d saves (debounce %v): min %v, median %v, max %v",
		len(lat), DefaultDebounce, lat[0].Round(time.Millisecond), lat[len(lat)/2].Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond))
}

// BenchmarkSaveToChange reports the save→Change latency as ns/op (and
// ms/save) with the default debounce.
func BenchmarkSaveToChange(b *testing.B) {
	path := filepath.Join(b.TempDir(), "profile.toml")
	write(b, path, "v0")
	w := newWatcher(b, []string{path}, Options{})
	i := 0
	for b.Loop() {
		i++
		renameOver(b, path, fmt.Sprint("v", i))
		<-w.Changes()
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/save")
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// lockedBuffer collects log output from the watcher's goroutine.
type lockedBuffer = testenv.Buffer

// A deleted profile is said at warn (the running settings stay), and an
// empty one (a truncate-then-write caught halfway) is not a change: the
// next write is.
func TestDeletedAndEmptyFilesAreSaidAndNotApplied(t *testing.T) {
	t.Parallel() // each has its own directory; the SIGHUP tests run alone, before these
	dir := t.TempDir()
	path, sentinel := filepath.Join(dir, "p.toml"), filepath.Join(dir, "sentinel.toml")
	write(t, path, "v1")
	write(t, sentinel, "s0")
	var logs lockedBuffer
	w := newWatcher(t, []string{path, sentinel}, Options{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	must(t, os.Remove(path))
	// The sentinel's Change comes after the removal was checked, and said.
	expectNoneBefore(t, w, sentinel, "s1", ReasonRenameOver)
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "missing") {
		t.Errorf("a deleted file was not logged at warn: %q", logs.String())
	}
	write(t, path, "")
	expectNoneBefore(t, w, sentinel, "s2", ReasonRenameOver)
	if !strings.Contains(logs.String(), "empty") {
		t.Errorf("an empty file was not logged: %q", logs.String())
	}
	write(t, path, "v2")
	expect(t, w, Change{Path: path, Reason: ReasonWrite})
}

// A file emptied and then given back what it held is said (the empty
// one's warning waits for the next write, and that write changed nothing,
// so nothing followed it), and is no change.
func TestEmptiedAndRestoredIsSaid(t *testing.T) {
	t.Parallel() // each has its own directory; the SIGHUP tests run alone, before these
	dir := t.TempDir()
	path := filepath.Join(dir, "p.toml")
	write(t, path, "v1")
	var logs lockedBuffer
	w := newWatcher(t, []string{path}, Options{pollOnly: true, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	f := w.files[0]
	write(t, path, "")
	w.check(f, ReasonRescan)
	write(t, path, "v1")
	w.check(f, ReasonRescan)
	w.check(f, ReasonRescan)
	if n := strings.Count(logs.String(), "holds what it held before: nothing to apply"); n != 1 {
		t.Errorf("said %d times, want once:\n%s", n, logs.String())
	}
	select {
	case c := <-w.Changes():
		t.Errorf("a change %+v, want none: the content is what it was", c)
	default:
	}
}

// A watched file that cannot be read (here a link to a FIFO) is said once,
// not at every poll or event, and again after it read well in between.
func TestUnreadableFileIsSaidOnce(t *testing.T) {
	t.Parallel() // each has its own directory; the SIGHUP tests run alone, before these
	dir := t.TempDir()
	path, fifo := filepath.Join(dir, "p.toml"), filepath.Join(dir, "fifo")
	write(t, path, "v1")
	var logs lockedBuffer
	// No fsnotify and no poll: the test calls check itself, as each poll would.
	w := newWatcher(t, []string{path}, Options{pollOnly: true, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	must(t, syscall.Mkfifo(fifo, 0o644))
	must(t, os.Remove(path))
	must(t, os.Symlink(fifo, path))
	f := w.files[0]
	for range 3 {
		w.check(f, ReasonRescan)
	}
	if n := strings.Count(logs.String(), "cannot read watched file"); n != 1 {
		t.Fatalf("%d warnings over 3 reads of a FIFO, want 1:\n%s", n, logs.String())
	}
	must(t, os.Remove(path))
	write(t, path, "v2")
	w.check(f, ReasonRescan)
	must(t, os.Remove(path))
	must(t, os.Symlink(fifo, path))
	w.check(f, ReasonRescan)
	if n := strings.Count(logs.String(), "cannot read watched file"); n != 2 {
		t.Errorf("%d warnings, want a second once the file read well in between:\n%s", n, logs.String())
	}
	// FIFO, missing, FIFO, missing: each change of state is said.
	must(t, os.Remove(path))
	w.check(f, ReasonRescan)
	must(t, os.Symlink(fifo, path))
	w.check(f, ReasonRescan)
	must(t, os.Remove(path))
	w.check(f, ReasonRescan)
	if n, m := strings.Count(logs.String(), "cannot read watched file"), strings.Count(logs.String(), "watched file is missing"); n != 3 || m != 2 {
		t.Errorf("%d unreadable and %d missing warnings, want 3 and 2:\n%s", n, m, logs.String())
	}
	// A link that leads nowhere says so, with its target (it read
	// "watched file is missing (deleted, …)").
	write(t, path, "v3")
	w.check(f, ReasonRescan)
	must(t, os.Remove(path))
	must(t, os.Symlink(filepath.Join(dir, "nowhere"), path))
	w.check(f, ReasonRescan)
	if !strings.Contains(logs.String(), "watched file is a symlink that leads nowhere") || !strings.Contains(logs.String(), "to="+filepath.Join(dir, "nowhere")) {
		t.Errorf("a dangling link was not said as one:\n%s", logs.String())
	}
}

// Watch changes the set: a file added (a policy file a reload named, in
// another directory) reports its next write, not what it held when added;
// a file dropped reports nothing more.
func TestWatchChangesTheSet(t *testing.T) {
	t.Parallel() // each has its own directory; the SIGHUP tests run alone, before these
	prof := filepath.Join(t.TempDir(), "profile.toml")
	pol := filepath.Join(t.TempDir(), "policy.toml")
	write(t, prof, "v1")
	write(t, pol, "p1")
	w := newWatcher(t, []string{prof}, Options{})
	if err := w.Watch([]string{prof, pol}); err != nil {
		t.Fatal(err)
	}
	renameOver(t, pol, "p2")
	expect(t, w, Change{Path: pol, Reason: ReasonRenameOver})
	if err := w.Watch([]string{pol}); err != nil {
		t.Fatal(err)
	}
	// The dropped file's write comes first; the first Change is the
	// watched one's. No wait between them: events come in order, and a
	// window that saw both checks the files in the order they were
	// added, so a Change for the dropped file would come first either way.
	renameOver(t, prof, "v2")
	renameOver(t, pol, "p3")
	expect(t, w, Change{Path: pol, Reason: ReasonRenameOver})
	w.Close()
	if err := w.Watch([]string{prof}); err == nil {
		t.Error("Watch after Close: no error")
	}
}

// Watch called by the reader of Changes while Changes is full (the loop
// blocked handing over a change) returns: serve's reload loop reads
// Changes and calls Watch, and both waited on each other.
func TestWatchWhileChangesIsFull(t *testing.T) {
	t.Parallel() // each has its own directory; the SIGHUP tests run alone, before these
	path := filepath.Join(t.TempDir(), "profile.toml")
	write(t, path, "v0")
	// The loop says "watched file changed" (debug) as it hands a Change
	// over: each save is waited for until then, so that each is a Change
	// of its own.
	var logs testenv.Buffer
	w := newWatcher(t, []string{path}, Options{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	for i := 1; i <= cap(w.changes)+1; i++ { // as many as fit, then one the loop holds
		renameOver(t, path, fmt.Sprintf("v%d", i))
		testenv.WaitFor(t, fmt.Sprintf("Change %d found", i), func() bool { return strings.Count(logs.String(), "watched file changed") >= i })
	}
	renameOver(t, path, fmt.Sprintf("v%d", cap(w.changes)+2)) // and one more while it holds it
	done := make(chan error, 1)
	go func() { done <- w.Watch([]string{path}) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(patience):
		t.Fatal("Watch did not return while Changes was full")
	}
	if n := len(w.changes); n != cap(w.changes) {
		t.Errorf("%d changes waiting, want a full channel (%d): the test did not reach the case", n, cap(w.changes))
	}
}

// A watched file that turns unreadable is a change its reader must reject
// (a reload that only logged it left last_reload and the rejected count
// unchanged), said once; the file read well again is a change even with
// the content it had, so that the reload it failed is applied.
func TestUnreadableFileIsAChange(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path, fifo := filepath.Join(dir, "p.toml"), filepath.Join(dir, "fifo")
	write(t, path, "v1")
	w := newWatcher(t, []string{path}, Options{pollOnly: true, Logger: slog.New(slog.DiscardHandler)})
	must(t, syscall.Mkfifo(fifo, 0o644))
	must(t, os.Remove(path))
	must(t, os.Symlink(fifo, path))
	f := w.files[0]
	next := func() (Change, bool) {
		select {
		case c := <-w.Changes():
			return c, true
		default:
			return Change{}, false
		}
	}
	w.check(f, ReasonRescan)
	if c, ok := next(); !ok || c.Err == nil || c.Path != path {
		t.Fatalf("an unreadable file: %+v %v, want a change with its error", c, ok)
	}
	w.check(f, ReasonRescan)
	if c, ok := next(); ok {
		t.Errorf("the same unreadable state again: %+v, want nothing", c)
	}
	must(t, os.Remove(path))
	write(t, path, "v1")
	w.check(f, ReasonRescan)
	if c, ok := next(); !ok || c.Err != nil {
		t.Errorf("readable again with the content it had: %+v %v, want a change", c, ok)
	}
}
