package proxy

import (
	"net/http"
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
// the length of a stream.
type sendDeadline struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

func withSendDeadline(w http.ResponseWriter, d time.Duration) *sendDeadline {
	s := &sendDeadline{ResponseWriter: w, rc: http.NewResponseController(w), d: d}
	s.arm() // from the start: a kept-alive connection keeps the last request's deadline
	return s
}

func (s *sendDeadline) arm() { s.rc.SetWriteDeadline(time.Now().Add(s.d)) }

func (s *sendDeadline) Write(b []byte) (int, error) {
	s.arm()
	return s.ResponseWriter.Write(b)
}

// FlushError is what http.ResponseController (the reverse proxy's flush
// after every write) calls.
func (s *sendDeadline) FlushError() error {
	s.arm()
	return s.rc.Flush()
}

func (s *sendDeadline) Flush() { s.FlushError() }

// Unwrap gives http.ResponseController the writer beneath (full duplex,
// read deadlines).
func (s *sendDeadline) Unwrap() http.ResponseWriter { return s.ResponseWriter }
