package proxy

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"
)

// lateBodyTransport answers like an engine that starts streaming before
// net/http's transport has finished with the request body: the transport
// reads the body once more after the body's last byte (to see EOF) while
// the response already streams, and closes the engine connection when
// that read fails. Here the response starts at once; the body is read
// after the client has received the first event, and a failed read cuts
// the stream, exactly as net/http's persistConn.writeLoop does.
type lateBodyTransport struct {
	firstSeen chan struct{} // closed by the client after the first event
}

func (t *lateBodyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	pr, pw := io.Pipe()
	go func() {
		io.WriteString(pw, "data: {\"content\":\"a\"}\n\n")
		<-t.firstSeen
		if _, err := io.Copy(io.Discard, req.Body); err != nil {
			pw.CloseWithError(err) // the transport closes the connection
			return
		}
		io.WriteString(pw, "data: {\"content\":\"b\",\"stop\":true}\n\ndata: [DONE]\n\n")
		pw.Close()
	}()
	return &http.Response{StatusCode: 200, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: pr, ContentLength: -1, Request: req}, nil
}

// The stream cut after one token (issue: overlap switches cut streams):
// once the proxy sends the answer's headers with the client's body not
// read to its end, net/http's server reads the rest itself and closes the
// body; the transport's last read of it then failed and closed the
// engine connection mid-stream. The proxy reads the body first.
func TestAnswerBeforeBodyEndDoesNotCutTheStream(t *testing.T) {
	tr := &lateBodyTransport{firstSeen: make(chan struct{})}
	p := New(Options{Transport: tr})
	b, err := NewBackend("http://127.0.0.1:1", "fake")
	if err != nil {
		t.Fatal(err)
	}
	p.Route(b)
	body := `{"prompt":"def fib(n):","stream":true,"max_tokens":2}`
	resp, err := http.Post(front(t, p)+"/completion", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	first, err := r.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	close(tr.firstSeen)
	rest, err := io.ReadAll(r)
	if err != nil || !strings.Contains(string(rest), "[DONE]") || strings.Contains(string(rest), `"error"`) {
		t.Fatalf("the stream was cut after %q: read error %v, rest %q", first, err, rest)
	}
}
