package testwait

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestForReturnsOnceTheConditionHolds(t *testing.T) {
	var n atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 3 {
			n.Add(1)
		}
	}()
	For(t, time.Minute, "three increments", func() bool { return n.Load() == 3 })
	<-done
}

// fatalRecorder is a testing.TB whose Fatalf records instead of stopping.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}
func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = format
	panic(f)
}

func TestForFailsAfterTheBound(t *testing.T) {
	r := &fatalRecorder{TB: t}
	func() {
		defer func() {
			if p := recover(); p != r {
				t.Fatalf("For did not fail: %v", p)
			}
		}()
		For(r, 10*time.Millisecond, "never", func() bool { return false })
	}()
	if r.msg == "" {
		t.Error("no failure message")
	}
}
