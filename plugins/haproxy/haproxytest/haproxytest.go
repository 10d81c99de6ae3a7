// Package haproxytest holds what tests running a real HAProxy share: finding
// the haproxy executable, a free loopback port to publish on, and stopping
// the HAProxy a test started.
//
// The haproxy provider daemonizes HAProxy (master-worker, `-D`) so that it
// outlives the provider; a test must therefore stop it itself. Stop does that
// by the pid the test's own pid file names, and only when /proc shows that
// pid is an HAProxy running the test's configuration: a pid the kernel has
// since handed to another process is left alone.
package haproxytest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/infrakit/infrakit/plugins/process/proc"
)

// Path returns the haproxy executable: the one on PATH, else one where
// Debian or a source build installs it; "" when there is none.
func Path() string {
	if p, err := exec.LookPath("haproxy"); err == nil {
		return p
	}
	for _, p := range []string{"/usr/sbin/haproxy", "/usr/local/sbin/haproxy"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// Installed reports whether Path finds an haproxy executable.
func Installed() bool { return Path() != "" }

// Require returns the haproxy executable. Without one it skips the test,
// except in CI (CI set), which installs HAProxy: there the test fails.
func Require(tb testing.TB) string {
	tb.Helper()
	if p := Path(); p != "" {
		return p
	}
	if os.Getenv("CI") != "" {
		tb.Fatal("haproxy is not installed; .ci/run installs it")
	}
	tb.Skip("haproxy is not installed (apt-get install haproxy)")
	return ""
}

// FreePort returns a loopback TCP port nothing listens on at the moment.
func FreePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// StopDir stops the HAProxy the haproxy provider started in dir (its
// INFRAKIT_HAPROXY_DIR): Stop with dir's haproxy.pid and haproxy.cfg, the
// latter absolute as the provider passes it.
func StopDir(tb testing.TB, dir string) {
	tb.Helper()
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	Stop(tb, filepath.Join(dir, "haproxy.pid"), filepath.Join(dir, "haproxy.cfg"))
}

// stopWait is how long Stop waits for HAProxy to exit after SIGTERM, and
// again after SIGKILL.
const stopWait = 10 * time.Second

// Stop stops the HAProxy master whose pid pidFile holds, provided its command
// line has cfg as an argument (`-f cfg`), and waits until it has exited. The
// master stops its workers. It sends SIGTERM, and SIGKILL if the master is
// still there after a while. A missing pid file means HAProxy never started;
// nothing else is signalled.
func Stop(tb testing.TB, pidFile, cfg string) {
	tb.Helper()
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return // never started
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		tb.Logf("stop haproxy: %s holds %q, not a pid", pidFile, b)
		return
	}
	ours := func() bool { return running(pid) && cmdlineHas(pid, cfg) }
	if !ours() {
		return
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		_ = syscall.Kill(pid, sig)
		for deadline := time.Now().Add(stopWait); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if !ours() {
				return
			}
		}
	}
	tb.Logf("stop haproxy: pid %d (%s) is still running after SIGKILL", pid, cfg)
}

// running reports whether pid exists and has not exited (a daemonized
// HAProxy is reaped by init, which may take a moment: a zombie has exited).
func running(pid int) bool {
	s, err := proc.ReadStat(pid)
	return err == nil && !s.Exited()
}

// cmdlineHas reports whether arg is one of the arguments pid runs with.
func cmdlineHas(pid int, arg string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && slices.Contains(strings.Split(string(b), "\x00"), arg)
}
