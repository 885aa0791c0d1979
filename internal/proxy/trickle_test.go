package proxy

import (
	"bytes"
	"io"
	"net/http/httptest"
	"testing"
)

// trickle is a body that sends one byte, then nothing until stop closes:
// a client that sends its headers and then a byte now and then.
type trickle struct {
	sent    bool
	waiting chan<- struct{} // told when it is read past its byte
	stop    <-chan struct{}
}

func (t *trickle) Read(b []byte) (int, error) {
	if !t.sent {
		t.sent = true
		b[0] = '{'
		return 1, nil
	}
	t.waiting <- struct{}{}
	<-t.stop
	return 0, io.ErrUnexpectedEOF
}

// Load review of 088c135: eight connections that sent headers with
// Content-Length: 8388608 and then 1 byte/s reserved the whole body budget
// (64 MiB) before any byte came, and every other request lost its
// re-send. Bytes are reserved as they arrive: the eight trickling bodies
// hold about what they sent, and an ordinary body is still kept whole.
func TestTricklingBodiesHoldWhatTheySent(t *testing.T) {
	p := New(Options{})
	waiting, stop := make(chan struct{}), make(chan struct{})
	done := make(chan func(), 8)
	for range 8 {
		go func() {
			r := httptest.NewRequest("POST", "/v1/completions", &trickle{waiting: waiting, stop: stop})
			r.ContentLength = maxReplay
			release, _ := p.replayable(httptest.NewRecorder(), r)
			done <- release
		}()
	}
	for range 8 {
		<-waiting // each has sent its byte and is read for more
	}
	held, _ := p.bodies.stats()
	if held > 8*firstChunk {
		t.Errorf("8 bodies that sent 1 byte each hold %d bytes, want at most %d", held, 8*firstChunk)
	}
	body := bytes.Repeat([]byte("a"), 1<<20)
	r := httptest.NewRequest("POST", "/v1/completions", bytes.NewReader(body))
	release, err := p.replayable(httptest.NewRecorder(), r)
	if err != nil || r.GetBody == nil {
		t.Errorf("an ordinary 1 MiB body beside them: err %v, kept for a re-send %v", err, r.GetBody != nil)
	}
	release()
	close(stop)
	for range 8 {
		(<-done)()
	}
	if held, _ := p.bodies.stats(); held != 0 {
		t.Errorf("%d bytes held after every body ended", held)
	}
}

// A body whose bytes outrun the budget part way keeps what it had and
// streams the rest, as a body too large for it does: the engine gets every
// byte, in order, and nothing is kept beyond the budget.
func TestBodyOutrunsTheBudgetMidRead(t *testing.T) {
	const budget = 3 * bodyChunk
	p := New(Options{BodyBudget: budget})
	body := make([]byte, 10*bodyChunk+123)
	for i := range body {
		body[i] = byte(i * 7)
	}
	for _, known := range []bool{true, false} {
		r := httptest.NewRequest("POST", "/v1/completions", bytes.NewReader(body))
		if !known {
			r.ContentLength = -1
		}
		release, err := p.replayable(httptest.NewRecorder(), r)
		if err != nil {
			t.Fatal(err)
		}
		held, _ := p.bodies.stats()
		got, err := io.ReadAll(r.Body)
		release()
		if err != nil || !bytes.Equal(got, body) || r.GetBody != nil || held == 0 || held > budget {
			t.Errorf("known length %v: read %d of %d bytes (equal %v, err %v), re-send %v, held %d (budget %d)",
				known, len(got), len(body), bytes.Equal(got, body), err, r.GetBody != nil, held, budget)
		}
	}
	if _, streamed := p.bodies.stats(); streamed != 2 {
		t.Errorf("streamed %d, want 2", streamed)
	}
}
