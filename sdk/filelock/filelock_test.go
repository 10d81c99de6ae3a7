//go:build unix

package filelock

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLockExcludesAndTimesOut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	unlock, err := Lock(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := Lock(ctx, path); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), path) {
		t.Fatalf("second Lock while held = %v; want a deadline error naming %s", err, path)
	}
	unlock()
	again, err := Lock(context.Background(), path)
	if err != nil {
		t.Fatalf("Lock after unlock: %v", err)
	}
	again()
}

// TryAcquire on two open files of one path: the second fails while the
// first holds the lock and succeeds once it is released; Acquire takes a
// free lock even with its context already done.
func TestTryAcquireAndRelease(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	open := func() *os.File {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	a, b := open(), open()
	if ok, err := TryAcquire(a); !ok || err != nil {
		t.Fatalf("TryAcquire of a free lock = %v, %v", ok, err)
	}
	if ok, err := TryAcquire(b); ok || err != nil {
		t.Fatalf("TryAcquire of a held lock = %v, %v; want false, nil", ok, err)
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Acquire(done, b); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire of a held lock with a done context = %v; want context.Canceled", err)
	}
	if err := Release(a); err != nil {
		t.Fatal(err)
	}
	if err := Acquire(done, b); err != nil {
		t.Fatalf("Acquire of a free lock with a done context = %v; want it taken", err)
	}
}
