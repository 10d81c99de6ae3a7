// Package etcdtest starts a real etcd server process for tests (Debian's
// etcd-server package installs /usr/bin/etcd) on 127.0.0.1 ports, and a
// TCP proxy that can cut a client off from etcd as a network partition
// would, without closing its connections. Package embedded starts a server
// inside the test process instead.
//
// It is imported by tests only.
package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/infrakit/infrakit/internal/syncbuf"
)

// RealBinary is where Debian's etcd-server package puts etcd.
const RealBinary = "/usr/bin/etcd"

// Server is a running etcd server of one member.
type Server struct {
	// Endpoints are the client URLs ("http://127.0.0.1:PORT").
	Endpoints []string

	close func() error
	cmd   *exec.Cmd // nil when embedded
}

// NewServer is a Server at endpoints that close stops (for package
// embedded).
func NewServer(endpoints []string, close func() error) *Server {
	return &Server{Endpoints: endpoints, close: close}
}

// Close stops the server (and waits for it). Its data directory is left to
// the caller.
func (s *Server) Close() error { return s.close() }

// Signal sends sig to a server process (to pause it with SIGSTOP, say). It
// fails for an embedded server.
func (s *Server) Signal(sig os.Signal) error {
	if s.cmd == nil {
		return errors.New("etcdtest: an embedded server is no process")
	}
	return s.cmd.Process.Signal(sig)
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// LocalURLs are a client and a peer URL on free 127.0.0.1 ports.
func LocalURLs() (client, peer url.URL, err error) {
	cp, err := FreePort()
	if err != nil {
		return client, peer, err
	}
	pp, err := FreePort()
	if err != nil {
		return client, peer, err
	}
	client = url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", cp)}
	peer = url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", pp)}
	return client, peer, nil
}

// StartProcess starts binary (RealBinary) as a one-member etcd with its
// data in dir, and waits until it answers. Its output goes nowhere unless
// it fails to start, when the error carries its tail.
func StartProcess(binary, dir string) (*Server, error) {
	clientURL, peerURL, err := LocalURLs()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(binary,
		"--name", "test",
		"--data-dir", dir,
		"--listen-client-urls", clientURL.String(),
		"--advertise-client-urls", clientURL.String(),
		"--listen-peer-urls", peerURL.String(),
		"--initial-advertise-peer-urls", peerURL.String(),
		"--initial-cluster", "test="+peerURL.String(),
		"--heartbeat-interval", "20",
		"--election-timeout", "200",
		"--log-level", "error",
	)
	var out syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", binary, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var once sync.Once
	var closeErr error
	stop := func() error {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
				closeErr = fmt.Errorf("%s did not stop on SIGTERM; killed", binary)
			}
		})
		return closeErr
	}
	s := &Server{Endpoints: []string{clientURL.String()}, close: stop, cmd: cmd}
	if err := waitServing(s.Endpoints, exited, 30*time.Second); err != nil {
		_ = stop()
		return nil, fmt.Errorf("start %s: %w\n%s", binary, err, out.String())
	}
	return s, nil
}

// waitServing polls the endpoints until a read succeeds.
func waitServing(endpoints []string, exited <-chan error, timeout time.Duration) error {
	c, err := clientv3.New(clientv3.Config{Endpoints: endpoints, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer c.Close()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := c.Get(ctx, "health")
		cancel()
		if err == nil {
			return nil
		}
		select {
		case werr := <-exited:
			return fmt.Errorf("exited: %v", werr)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not serving after %s: %w", timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
