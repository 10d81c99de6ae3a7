//go:build linux

package main_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/infrakit/infrakit/sdk/providertest"
)

// builder builds the provider and testdata/webserver once for the tests.
var builder *providertest.Builder

func TestMain(m *testing.M) {
	// Instances orphaned by a provider the tests kill become this process's
	// children instead of init's, so the tests reap them (an init that does
	// not reap, a container's, would keep them as zombies).
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "PR_SET_CHILD_SUBREAPER:", err)
	}
	builder = providertest.NewBuilder()
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		builder.Close()
		os.Exit(code)
	}))
}
