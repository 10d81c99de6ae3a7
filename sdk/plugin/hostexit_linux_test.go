package plugin

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// The wait on a host's exit returns when the host process (here a child of
// the test standing for a wrapper's host) exits, and not before.
func TestHostExitWaiterReturnsWhenTheHostExits(t *testing.T) {
	host := exec.Command("sleep", "600")
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = host.Process.Kill(); _ = host.Wait() }() // errors once it is reaped
	wait := hostExitWaiter(os.Getppid(), host.Process.Pid)
	if wait == nil {
		t.Skip("no pidfds here: providers poll for their host")
	}
	done := make(chan error, 1)
	go func() { done <- wait() }() // ends when the host does, below
	select {
	case err := <-done:
		t.Fatalf("the wait returned (%v) while the host runs", err)
	default:
	}
	if err := host.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// Not reaped yet: an exited process is gone for the wait even while
	// its parent has not collected it.
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("wait: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the wait did not return within a minute of the host's exit")
	}
}

// A host already gone (its pid reaped) needs no wait.
func TestHostExitWaiterHostAlreadyGone(t *testing.T) {
	host := exec.Command("true")
	if err := host.Run(); err != nil {
		t.Fatal(err)
	}
	wait := hostExitWaiter(os.Getppid(), host.Process.Pid)
	if wait == nil {
		t.Skip("no pidfds here: providers poll for their host")
	}
	if err := wait(); err != nil {
		t.Fatal(err)
	}
}
