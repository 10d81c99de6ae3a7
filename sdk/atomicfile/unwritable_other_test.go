//go:build !linux

package atomicfile

import "testing"

// makeImmutable skips the test: only Linux has an attribute that stops a
// user whom modes do not stop.
func makeImmutable(t *testing.T, dir string) {
	t.Skipf("this user writes into a 0555 directory; cannot make %s unwritable", dir)
}
