//go:build !linux

package plugin

// hostExitWaiter: no pidfds here; the caller polls.
func hostExitWaiter(int, int) func() error { return nil }
