package etcd

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/infrakit/infrakit/internal/state"
)

func TestLockContention(t *testing.T) {
	ctx := ctxT(t)
	holder := newBackend(t)
	waiter := New(newClient(t), Options{Prefix: prefix(t)})

	unlock, err := holder.Lock(ctx, state.LockInfo{Operation: "apply"})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = waiter.Lock(wctx, state.LockInfo{Operation: "group scale"})
	var le *state.LockedError
	if !errors.As(err, &le) || !errors.Is(err, state.ErrLocked) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("contended Lock = %v, want a *LockedError", err)
	}
	if time.Since(start) < 250*time.Millisecond {
		t.Errorf("gave up after %s, before its deadline", time.Since(start))
	}
	host, _ := os.Hostname()
	if !le.Known || le.Holder.Operation != "apply" || le.Holder.PID != os.Getpid() || le.Holder.Host != host || le.Holder.ID == "" {
		t.Errorf("holder = %+v (known %v)", le.Holder, le.Known)
	}
	for _, want := range []string{`state locked by "apply"`, "pid " + strconv.Itoa(os.Getpid()), "waited 3"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
	// A waiter that gave up left nothing behind: only the holder's key.
	resp, err := holder.Client().Get(ctx, holder.LockKey()+"/", clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 1 {
		t.Errorf("lock keys after a waiter gave up: %d (%v)", len(resp.Kvs), err)
	}

	// A waiter without a deadline gets the lock as soon as it is released.
	got := make(chan time.Time, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		u, err := waiter.Lock(ctx, state.LockInfo{Operation: "watch"})
		if err != nil {
			t.Error(err)
			return
		}
		got <- time.Now()
		u()
	}()
	time.Sleep(200 * time.Millisecond)
	released := time.Now()
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	if err := unlock(); err != nil {
		t.Errorf("second unlock = %v, want the first's result", err)
	}
	wg.Wait()
	select {
	case at := <-got:
		if d := at.Sub(released); d > time.Second {
			t.Errorf("waiter took the lock %s after release", d)
		}
	default:
		t.Fatal("waiter never got the lock")
	}

	// A free lock is taken even with a ctx that is already done.
	done, cancelDone := context.WithCancel(ctx)
	cancelDone()
	u, err := waiter.Lock(done, state.LockInfo{})
	if err != nil {
		t.Fatalf("free lock with a done ctx: %v", err)
	}
	u()
}

// TestLockExcludesWithinProcess: two Lock calls on one Backend exclude
// each other, and every locked increment lands once.
func TestLockExcludesWithinProcess(t *testing.T) {
	b := newBackend(t)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 5 {
				if _, err := lockedIncrement(b, strconv.Itoa(g)+"-"+strconv.Itoa(i)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	doc, err := b.Read(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if m := markers(doc); len(m) != 20 || doc.Serial != 20 {
		t.Fatalf("serial %d, %d markers %v; want 20 and 20", doc.Serial, len(m), m)
	}
}

// TestLockHolderKilled: a holder process that is SIGKILLed frees the lock
// when its lease runs out.
func TestLockHolderKilled(t *testing.T) {
	ctx := ctxT(t)
	b := newBackend(t)
	h := startHelper(t, "hold", helperOpEnv+"=apply")
	if got := h.line(t); got != "locked" {
		t.Fatalf("helper said %q", got)
	}

	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err := b.Lock(short, state.LockInfo{})
	var le *state.LockedError
	if !errors.As(err, &le) || !le.Known || le.Holder.PID != h.cmd.Process.Pid || le.Holder.Operation != "apply" {
		t.Fatalf("Lock while the helper holds it = %v (holder %+v)", err, le)
	}

	if err := h.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = h.cmd.Wait()
	killed := time.Now()
	unlock, err := b.Lock(ctx, state.LockInfo{})
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	// TTL 2s: the lease ends within TTL of the last renewal.
	if d := time.Since(killed); d > 3500*time.Millisecond {
		t.Errorf("lock freed %s after the holder was killed; TTL is 2s", d)
	}
}

// TestLockLostRefusesWrites: a holder whose lease ended (here revoked, as
// expiry after a pause would) can no longer write through its Backend.
func TestLockLostRefusesWrites(t *testing.T) {
	ctx := ctxT(t)
	b := newBackend(t)
	doc, _ := b.Read(ctx)
	unlock, err := b.Lock(ctx, state.LockInfo{})
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	if err := b.Write(ctx, doc); err != nil {
		t.Fatal(err)
	}
	other := New(newClient(t), Options{Prefix: prefix(t)})
	if _, err := other.Client().Revoke(ctx, leaseOf(t, other.Client(), b.LockKey())); err != nil {
		t.Fatal(err)
	}
	u2, err := other.Lock(ctx, state.LockInfo{Operation: "other"})
	if err != nil {
		t.Fatal(err)
	}
	defer u2()
	err = b.Write(ctx, doc)
	var lle *LockLostError
	if !errors.Is(err, ErrLockLost) || !errors.As(err, &lle) || !strings.Contains(err.Error(), "lock") {
		t.Fatalf("write after losing the lock = %v, want ErrLockLost", err)
	}
	if doc.Serial != 1 {
		t.Fatalf("serial moved to %d", doc.Serial)
	}
	// The new holder writes as usual.
	if _, err := lockedIncrementHeld(other, ctx); err != nil {
		t.Fatal(err)
	}
}

// lockedIncrementHeld writes once through s, whose lock is already held.
func lockedIncrementHeld(s state.Store, ctx context.Context) (uint64, error) {
	doc, err := s.Read(ctx)
	if err != nil {
		return 0, err
	}
	addMarker(doc, "held")
	return doc.Serial, s.Write(ctx, doc)
}

// TestTwoProcessWriters: two processes doing apply-style locked
// increments against one etcd state lose nothing.
func TestTwoProcessWriters(t *testing.T) {
	const n = 10
	var hs []*helper
	for range 2 {
		hs = append(hs, startHelper(t, "write-loop", helperNEnv+"="+strconv.Itoa(n)))
	}
	for _, h := range hs {
		if err := h.cmd.Wait(); err != nil {
			t.Fatalf("helper: %v", err)
		}
	}
	doc, err := newBackend(t).Read(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	m := markers(doc)
	if doc.Serial != 2*n || len(m) != 2*n {
		t.Fatalf("serial %d with %d markers, want %d and %d: %v", doc.Serial, len(m), 2*n, 2*n, m)
	}
	for _, h := range hs {
		for i := range n {
			if k := "p" + strconv.Itoa(h.cmd.Process.Pid) + "-" + strconv.Itoa(i); m[k] != 1 {
				t.Errorf("marker %s recorded %d times", k, m[k])
			}
		}
	}
}

// TestForceUnlockKilledHolder: a holder process that is SIGKILLed keeps the
// lock until its lease expires (60s here); ForceUnlock of its ID frees it
// at once, and one of another ID is refused.
func TestForceUnlockKilledHolder(t *testing.T) {
	ctx := ctxT(t)
	b := newBackend(t)
	h := startHelper(t, "hold", helperOpEnv+"=apply", helperTTLEnv+"=60s")
	if got := h.line(t); got != "locked" {
		t.Fatalf("helper said %q", got)
	}
	if err := h.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = h.cmd.Wait()
	st, err := b.LockStatus(ctx)
	if err != nil || !st.Held || !st.Known || st.Holder.PID != h.cmd.Process.Pid || st.Holder.Operation != "apply" {
		t.Fatalf("status after the holder was killed = %+v, %v; want it held by the helper", st, err)
	}
	if st.Expires <= 0 || st.Expires > time.Minute {
		t.Errorf("lease expires in %s; the helper's TTL is 60s", st.Expires)
	}
	if err := state.CheckForceUnlock(state.UnlockRequest{Status: st, ID: st.Holder.ID, ThisHost: st.Holder.Host,
		HolderAlive: state.Alive(st.Holder.PID)}); err != nil {
		t.Fatalf("force-unlock of a dead holder refused: %v", err)
	}
	if _, err := b.ForceUnlock(ctx, "not-the-id"); !errors.Is(err, state.ErrNoSuchLock) {
		t.Fatalf("ForceUnlock of another ID = %v, want ErrNoSuchLock", err)
	}
	res, err := b.ForceUnlock(ctx, st.Holder.ID)
	if err != nil || !res.WasHeld {
		t.Fatalf("ForceUnlock = %+v, %v", res, err)
	}
	// Taken at once, long before the lease would have expired: a done
	// context takes only a free lock.
	done, cancel := context.WithCancel(ctx)
	cancel()
	unlock, err := b.Lock(done, state.LockInfo{Operation: "next"})
	if err != nil {
		t.Fatalf("Lock after ForceUnlock: %v", err)
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
}
