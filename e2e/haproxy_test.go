package e2e

import (
	"testing"

	"github.com/infrakit/infrakit/plugins/haproxy/haproxytest"
)

// Helpers of the tests whose stacks run a real HAProxy (real_test.go,
// docker_test.go), kept under their short names here; haproxytest holds
// them once for every package. The haproxy provider's daemon outlives the
// provider by design, so each test stops it itself.

// haproxyInstalled reports whether an haproxy binary is on PATH or where
// Debian installs it.
func haproxyInstalled() bool { return haproxytest.Installed() }

// freePort returns a loopback port nothing listens on right now.
func freePort(t *testing.T) int {
	t.Helper()
	return haproxytest.FreePort(t)
}

// stopHAProxy stops the HAProxy master whose pid dir/haproxy.pid holds,
// once /proc shows it is an haproxy running dir's configuration.
func stopHAProxy(t *testing.T, dir string) {
	t.Helper()
	haproxytest.StopDir(t, dir)
}
