package proxy

import (
	"errors"
	"net/http"
	"os"
	"sync/atomic"
	"time"
)

// DefaultSendTimeout is how long one write of an answer may wait for the
// client to take bytes. Past it the request ends and its engine slot is
// free again: four clients that never read held every slot of an engine
// and stalled all other clients until they disconnected. 60 s is nginx's
// send_timeout default, which bounds the same wait (between two
// successive writes to a client); a client that keeps reading never meets
// it unless it drains a 32 KiB write slower than about 550 bytes a second.
const DefaultSendTimeout = 60 * time.Second

// sendDeadline arms the connection's write deadline afresh before each
// write and flush of an answer, so the deadline bounds one stall, never
// the length of a stream. A write the deadline ends is kept (stalled): the
// client stopped reading, and the proxy says so once the request ends.
type sendDeadline struct {
	http.ResponseWriter
	rc    *http.ResponseController
	d     time.Duration
	armed time.Time    // when the deadline was last armed
	stall atomic.Int64 // how long the write the deadline ended had waited (ns); 0 = none
}

func withSendDeadline(w http.ResponseWriter, d time.Duration) *sendDeadline {
	s := &sendDeadline{ResponseWriter: w, rc: http.NewResponseController(w), d: d}
	s.arm() // from the start: a kept-alive connection keeps the last request's deadline
	return s
}

func (s *sendDeadline) arm() {
	s.armed = time.Now()
	s.rc.SetWriteDeadline(s.armed.Add(s.d))
}

// note keeps a write's error that the deadline caused: the client did not
// take the answer's bytes for the whole send timeout.
func (s *sendDeadline) note(err error) error {
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		s.stall.CompareAndSwap(0, int64(max(time.Since(s.armed), 1)))
	}
	return err
}

// stalled reports how long the write that the send timeout ended had
// waited; 0 when none was.
func (s *sendDeadline) stalled() time.Duration { return time.Duration(s.stall.Load()) }

func (s *sendDeadline) Write(b []byte) (int, error) {
	s.arm()
	n, err := s.ResponseWriter.Write(b)
	return n, s.note(err)
}

// FlushError is what http.ResponseController (the reverse proxy's flush
// after every write) calls.
func (s *sendDeadline) FlushError() error {
	s.arm()
	return s.note(s.rc.Flush())
}

func (s *sendDeadline) Flush() { s.FlushError() }

// Unwrap gives http.ResponseController the writer beneath (full duplex,
// read deadlines).
func (s *sendDeadline) Unwrap() http.ResponseWriter { return s.ResponseWriter }
