package runtimeapi

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"
)

// A master that goes away holding a connection (killed, or re-executing
// itself) resets it: that is the master being unavailable, which callers
// answer by waiting for it or starting one, not a failed command.
func TestDroppedConnectionIsUnavailable(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "master.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	served := make(chan struct{})
	go func() {
		defer close(served)
		c, err := l.Accept()
		if err != nil {
			return
		}
		// Read one byte of the command, so the rest is in, then close
		// with it unread: the kernel resets the connection.
		_, _ = c.Read(make([]byte, 1))
		c.Close()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = Master{Socket: sock}.Do(ctx, "show proc")
	<-served
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Do on a dropped connection: %v; want ErrUnavailable", err)
	}
}
