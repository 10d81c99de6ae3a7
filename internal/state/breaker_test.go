package state

import (
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestCheckForceUnlock(t *testing.T) {
	holder := LockInfo{ID: "abc", Operation: "apply", PID: 42, Host: "h1", Since: time.Unix(0, 0)}
	for _, tc := range []struct {
		name string
		req  UnlockRequest
		want string // "" allowed; else a part of the refusal
		none bool   // the refusal matches ErrNoSuchLock
	}{
		{"nothing locked", UnlockRequest{ID: "abc"}, "not locked", true},
		{"held, holder unknown", UnlockRequest{Status: LockStatus{Held: true}, ID: "abc"}, "recorded no info", true},
		{"other ID", UnlockRequest{Status: LockStatus{Held: true, Holder: holder, Known: true}, ID: "xyz"}, "ID is abc, not xyz", true},
		{"holder alive here", UnlockRequest{Status: LockStatus{Held: true, Holder: holder, Known: true}, ID: "abc", ThisHost: "h1", HolderAlive: true}, "pid 42, is running", false},
		{"holder alive, forced", UnlockRequest{Status: LockStatus{Held: true, Holder: holder, Known: true}, ID: "abc", HolderAlive: true, Force: true}, "", false},
		{"holder dead", UnlockRequest{Status: LockStatus{Held: true, Holder: holder, Known: true}, ID: "abc", ThisHost: "h1"}, "", false},
		{"holder elsewhere", UnlockRequest{Status: LockStatus{Held: true, Holder: holder, Known: true}, ID: "abc", ThisHost: "h2"}, "", false},
		{"stale record", UnlockRequest{Status: LockStatus{Holder: holder, Known: true}, ID: "abc"}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckForceUnlock(tc.req)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err = %v, want one saying %q", err, tc.want)
			case tc.want != "" && errors.Is(err, ErrNoSuchLock) != tc.none:
				t.Fatalf("err = %v: matches ErrNoSuchLock %v, want %v", err, !tc.none, tc.none)
			}
		})
	}
}

// A holder process that is SIGKILLed loses its flock with its process, but
// its record stays in the lock file: LockStatus shows it as not held, and
// ForceUnlock of its ID clears the record; one of another ID is refused.
func TestForceUnlockOfKilledHolder(t *testing.T) {
	l := NewLocal(t.TempDir() + "/infrakit.state.json")
	h := startHelper(t, "hold", l.Path(), helperOpEnv+"=apply")
	if got := h.line(t); got != "locked" {
		t.Fatalf("helper said %q", got)
	}
	st, err := l.LockStatus(t.Context())
	if err != nil || !st.Held || !st.Known || st.Holder.PID != h.cmd.Process.Pid || st.Holder.ID == "" {
		t.Fatalf("status while the helper holds the lock = %+v, %v", st, err)
	}
	if !Alive(st.Holder.PID) {
		t.Fatalf("Alive(%d) = false for the running helper", st.Holder.PID)
	}
	if _, err := l.ForceUnlock(t.Context(), st.Holder.ID); !errors.Is(err, ErrUnbreakable) {
		t.Fatalf("ForceUnlock of a living flock = %v, want ErrUnbreakable", err)
	}
	id := st.Holder.ID

	if err := h.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = h.cmd.Wait() // reaped: no zombie answers signal 0
	if Alive(h.cmd.Process.Pid) {
		t.Fatalf("Alive(%d) = true after SIGKILL and wait", h.cmd.Process.Pid)
	}
	st, err = l.LockStatus(t.Context())
	if err != nil || st.Held || !st.Known || st.Holder.ID != id {
		t.Fatalf("status after the holder was killed = %+v, %v; want not held, with its record", st, err)
	}
	if _, err := l.ForceUnlock(t.Context(), "other"); !errors.Is(err, ErrNoSuchLock) {
		t.Fatalf("ForceUnlock of another ID = %v, want ErrNoSuchLock", err)
	}
	if res, err := l.ForceUnlock(t.Context(), id); err != nil || res.WasHeld {
		t.Fatalf("ForceUnlock of the dead holder's ID = %+v, %v", res, err)
	}
	if data, err := os.ReadFile(l.LockPath()); err != nil || len(data) != 0 {
		t.Fatalf("lock file after ForceUnlock: %q, %v; want it empty", data, err)
	}
	st, err = l.LockStatus(t.Context())
	if err != nil || st.Held || st.Known {
		t.Fatalf("status after ForceUnlock = %+v, %v; want nothing", st, err)
	}
	unlock, err := lockWithin(t, l, 0, "next")
	if err != nil {
		t.Fatal(err)
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
}
