package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/infrakit/infrakit/plugins/process/proc"
)

// Helpers of the tests whose stacks run a real HAProxy (real_test.go,
// docker_test.go). The haproxy provider's daemon outlives the provider by
// design, so each test stops it itself.

// haproxyInstalled reports whether an haproxy binary is on PATH or where
// Debian installs it.
func haproxyInstalled() bool {
	if _, err := exec.LookPath("haproxy"); err == nil {
		return true
	}
	for _, p := range []string{"/usr/sbin/haproxy", "/usr/local/sbin/haproxy"} {
		if _, err := os.Stat(p); err == nil {
			return true
		}
	}
	return false
}

// freePort returns a loopback port nothing listens on right now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// stopHAProxy stops the HAProxy master whose pid dir/haproxy.pid holds,
// once /proc/<pid>/cmdline shows it is an haproxy running dir's
// configuration.
func stopHAProxy(t *testing.T, dir string) {
	b, err := os.ReadFile(filepath.Join(dir, "haproxy.pid"))
	if err != nil {
		return // never started
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		t.Logf("cleanup: haproxy.pid holds %q", b)
		return
	}
	isOurs := func() bool {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		return err == nil && strings.Contains(string(cmdline), "haproxy") &&
			strings.Contains(string(cmdline), filepath.Join(dir, "haproxy.cfg"))
	}
	if !isOurs() {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(10 * time.Second)
	for isOurs() && !exited(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// exited reports whether pid is gone or a zombie.
func exited(pid int) bool {
	s, err := proc.ReadStat(pid)
	return err != nil || s.Exited()
}
