package serve

import (
	"net"
	"syscall"
	"testing"
)

// A client connection's kernel send buffer is capped (sendBuffer), so
// that a client that stops reading meets the send timeout within some
// 128 KiB, not after the 4 MiB Linux grows it to (a hostile campaign: a
// stream never read held its engine slot for minutes).
func TestClientSendBufferCapped(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &cappedListener{Listener: l, s: newSlots(2)}
	defer ln.Close()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	raw, err := sc.(*slotConn).Conn.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var got int
	var gerr error
	raw.Control(func(fd uintptr) { got, gerr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF) })
	if gerr != nil {
		t.Fatal(gerr)
	}
	if got != 2*sendBuffer { // Linux doubles what is set (socket(7))
		t.Errorf("SO_SNDBUF %d, want %d (sendBuffer, doubled)", got, 2*sendBuffer)
	}
}
