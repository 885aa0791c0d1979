package serve

import (
	"runtime"
	"testing"
)

// Serve's exit waits for the adaptive loop's end, its last save written,
// though a signal's goroutine (NoteStopping) took its stop first: the exit
// returned at once, and the process ended mid-save (the state lost, a
// temp file left).
func TestEndAdaptWaitsForALoopStoppedElsewhere(t *testing.T) {
	sv := &launcher{}
	done := make(chan struct{})
	sv.ctl.ranAdapt(done)
	sv.ctl.ran(func() {}, false)
	if stop := sv.ctl.takeStopAdapt(false); stop == nil { // the signal's goroutine has it, saving
		t.Fatal("no stop recorded")
	}
	go func() {
		for range 1000 {
			runtime.Gosched() // the save takes a while
		}
		close(done)
	}()
	sv.endAdapt()
	select {
	case <-done:
	default:
		t.Fatal("endAdapt returned before the loop had ended")
	}
	sv2 := &launcher{}
	sv2.endAdapt() // no loop ran: nothing to wait for
}
