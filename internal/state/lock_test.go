package state

import (
	"context"
	"errors"
	"os"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func lockWithin(t *testing.T, l *Local, d time.Duration, op string) (func() error, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	return l.Lock(ctx, LockInfo{Operation: op})
}

// checkLocked asserts err is the waiter's error naming the holder.
func checkLocked(t *testing.T, err error, op string, pid int, minWait time.Duration) *LockedError {
	t.Helper()
	var le *LockedError
	if !errors.As(err, &le) || !errors.Is(err, ErrLocked) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v (%T), want a *LockedError after the deadline", err, err)
	}
	host, _ := os.Hostname()
	if !le.Known || le.Holder.Operation != op || le.Holder.PID != pid || le.Holder.Host != host || le.Holder.ID == "" {
		t.Fatalf("holder = %+v (known %v), want op %q pid %d host %q", le.Holder, le.Known, op, pid, host)
	}
	if since := time.Since(le.Holder.Since); since < 0 || since > time.Minute {
		t.Errorf("holder since %v is not recent", le.Holder.Since)
	}
	// The deadline starts a moment before the wait does, so allow a little.
	if le.Waited < minWait*8/10 {
		t.Errorf("waited %v for a timeout of %v", le.Waited, minWait)
	}
	want := `^(write state: )?state locked by "` + regexp.QuoteMeta(op) + `" \(pid ` + strconv.Itoa(pid) + ` on host ` + regexp.QuoteMeta(host) +
		`\) since \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ; waited \d+(\.\d+)?m?s; lock ID ` + regexp.QuoteMeta(le.Holder.ID) + `$`
	if !regexp.MustCompile(want).MatchString(err.Error()) {
		t.Errorf("message %q does not match %q", err, want)
	}
	return le
}

func TestLockedErrorMessage(t *testing.T) {
	since := time.Date(2026, 11, 29, 18, 40, 0, 0, time.UTC)
	e := &LockedError{State: "s", Known: true, Waited: 5*time.Second + 3*time.Millisecond, Cause: context.DeadlineExceeded,
		Holder: LockInfo{ID: "0b5e", Operation: "watch", PID: 1234, Host: "web1", Since: since.In(time.FixedZone("x", 3600))}}
	if got, want := e.Error(), `state locked by "watch" (pid 1234 on host web1) since 2026-11-29T18:40:00Z; waited 5s; lock ID 0b5e`; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	e.Known, e.Waited = false, 250*time.Millisecond
	if got, want := e.Error(), `state s locked by an unknown holder; waited 250ms`; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestLockExcludesWithinProcess(t *testing.T) {
	l := newLocal(t)
	unlock, err := lockWithin(t, l, time.Second, "apply")
	if err != nil {
		t.Fatal(err)
	}
	// Another call on the same Local, and one on a second Local for the
	// same file, from another goroutine.
	other := NewLocal(l.Path())
	for _, waiter := range []*Local{l, other} {
		errc := make(chan error, 1)
		go func() {
			_, err := waiter.Lock(ctxTimeout(t, 150*time.Millisecond), LockInfo{Operation: "watch"})
			errc <- err
		}()
		checkLocked(t, <-errc, "apply", os.Getpid(), 150*time.Millisecond)
	}

	// A waiter with time to spare gets the lock once it is released.
	got := make(chan error, 1)
	go func() {
		unlock2, err := other.Lock(ctxTimeout(t, 10*time.Second), LockInfo{Operation: "watch"})
		if err == nil {
			err = unlock2()
		}
		got <- err
	}()
	time.Sleep(50 * time.Millisecond)
	released := time.Now()
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if d := time.Since(released); d > 2*time.Second {
		t.Errorf("waiter took %v after release", d)
	}
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// Many goroutines on several Locals: never two inside at once.
func TestLockMutualExclusion(t *testing.T) {
	l := newLocal(t)
	locals := []*Local{l, NewLocal(l.Path()), NewLocal(l.Path())}
	var inside, entries atomic.Int32
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() {
			for range 5 {
				unlock, err := locals[i%len(locals)].Lock(ctxTimeout(t, 20*time.Second), LockInfo{Operation: "test"})
				if err != nil {
					t.Error(err)
					return
				}
				if inside.Add(1) != 1 {
					t.Error("two holders at once")
				}
				entries.Add(1)
				time.Sleep(time.Millisecond)
				inside.Add(-1)
				if err := unlock(); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if entries.Load() != 30 {
		t.Errorf("%d entries, want 30", entries.Load())
	}
}

func TestLockFreeLockIsTakenWithExpiredContext(t *testing.T) {
	l := newLocal(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	unlock, err := l.Lock(ctx, LockInfo{Operation: "apply"})
	if err != nil {
		t.Fatalf("a free lock with a done context: %v", err)
	}
	// And a held one fails at once, naming the holder.
	_, err = l.Lock(ctx, LockInfo{Operation: "plan"})
	var le *LockedError
	if !errors.As(err, &le) || !errors.Is(err, context.Canceled) || le.Holder.Operation != "apply" {
		t.Fatalf("err = %v", err)
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
}

func TestLockInfoAndUnlock(t *testing.T) {
	l := newLocal(t)
	since := time.Date(2026, 11, 29, 18, 40, 0, 0, time.UTC)
	given := LockInfo{ID: "id-1", Operation: "group scale", PID: 42, Host: "web1", Since: since}
	unlock, err := l.Lock(t.Context(), given)
	if err != nil {
		t.Fatal(err)
	}
	if info, ok := readInfo(l.LockPath()); !ok || info != given {
		t.Errorf("lock file holds %+v (%v), want %+v", info, ok, given)
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	if err := unlock(); err != nil {
		t.Errorf("second unlock: %v", err)
	}
	if data := readFile(t, l.LockPath()); len(data) != 0 {
		t.Errorf("lock file after unlock holds %q", data)
	}
	// Defaults are filled in.
	unlock, err = l.Lock(t.Context(), LockInfo{Operation: "apply"})
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	info, _ := readInfo(l.LockPath())
	host, _ := os.Hostname()
	if info.PID != os.Getpid() || info.Host != host || info.ID == "" || time.Since(info.Since) > time.Minute || info.Since.Location() != time.UTC {
		t.Errorf("defaults not filled: %+v", info)
	}
}

// A holder caught between flock and writing its info is "unknown".
func TestLockUnknownHolder(t *testing.T) {
	l := newLocal(t)
	f, err := l.tryAcquire()
	if err != nil || f == nil {
		t.Fatalf("tryAcquire = %v, %v", f, err)
	}
	defer release(f)
	_, err = l.Lock(ctxTimeout(t, 50*time.Millisecond), LockInfo{Operation: "apply"})
	var le *LockedError
	if !errors.As(err, &le) || le.Known || !regexp.MustCompile(`locked by an unknown holder; waited \d+ms$`).MatchString(err.Error()) {
		t.Fatalf("err = %v", err)
	}
}

// Writes run under a lock this Local holds, from any goroutine, and an
// unlock waits for a write in progress.
func TestWriteUnderHeldLock(t *testing.T) {
	l := newLocal(t)
	unlock, err := l.Lock(t.Context(), LockInfo{Operation: "apply"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxTimeout(t, 2*time.Second)
	doc, err := l.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Write(ctx, doc); err != nil {
		t.Fatalf("Write under the held lock: %v", err)
	}
	errc := make(chan error, 1)
	go func() { errc <- l.Write(ctx, doc) }()
	if err := <-errc; err != nil {
		t.Fatalf("Write from another goroutine under the held lock: %v", err)
	}
	// A second Local for the same file is another holder: it waits.
	err = NewLocal(l.Path()).Write(ctxTimeout(t, 100*time.Millisecond), doc)
	checkLocked(t, err, "apply", os.Getpid(), 100*time.Millisecond)
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	if err := NewLocal(l.Path()).Write(t.Context(), doc); err != nil {
		t.Fatal(err)
	}
	if doc.Serial != 3 {
		t.Errorf("serial %d, want 3", doc.Serial)
	}
}

func TestLockAcrossProcesses(t *testing.T) {
	l := newLocal(t)
	h := startHelper(t, "hold", l.Path(), helperOpEnv+"=watch")
	if got := h.line(t); got != "locked" {
		t.Fatalf("helper said %q", got)
	}
	pid := h.cmd.Process.Pid

	_, err := lockWithin(t, l, 300*time.Millisecond, "apply")
	checkLocked(t, err, "watch", pid, 300*time.Millisecond)

	// A Write without the lock waits for it too, and names the holder.
	doc, _ := l.Read(t.Context())
	err = l.Write(ctxTimeout(t, 100*time.Millisecond), doc)
	checkLocked(t, err, "watch", pid, 100*time.Millisecond)
	if _, serr := os.Stat(l.Path()); !errors.Is(serr, os.ErrNotExist) {
		t.Error("a Write that did not get the lock wrote")
	}

	// The holder lets go (stdin closes); we get the lock.
	h.stdin.Close()
	if err := h.cmd.Wait(); err != nil {
		t.Fatalf("helper: %v", err)
	}
	unlock, err := lockWithin(t, l, 5*time.Second, "apply")
	if err != nil {
		t.Fatal(err)
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
}

func TestLockReleasedWhenHolderIsKilled(t *testing.T) {
	l := newLocal(t)
	h := startHelper(t, "hold", l.Path(), helperOpEnv+"=watch")
	if got := h.line(t); got != "locked" {
		t.Fatalf("helper said %q", got)
	}
	if err := h.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = h.cmd.Wait()
	start := time.Now()
	unlock, err := lockWithin(t, l, 5*time.Second, "apply")
	if err != nil {
		t.Fatalf("lock of a killed holder not released: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("took %v to get the lock of a dead holder", d)
	}
	info, _ := readInfo(l.LockPath())
	if info.PID != os.Getpid() || info.Operation != "apply" {
		t.Errorf("lock file names %+v, not the new holder", info)
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
}

// Writers in two other processes and in goroutines here, with and without
// the lock, on one state: every write lands, none is lost.
func TestConcurrentWritersAcrossProcesses(t *testing.T) {
	l := newLocal(t)
	const perHelper, perGoroutine = 10, 5
	helpers := []*helper{
		startHelper(t, "write-loop", l.Path(), helperNEnv+"="+strconv.Itoa(perHelper)),
		startHelper(t, "write-loop", l.Path(), helperNEnv+"="+strconv.Itoa(perHelper)),
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			local := NewLocal(l.Path())
			for i := range perGoroutine {
				marker := "g" + strconv.Itoa(g) + "-" + strconv.Itoa(i)
				var err error
				if g%2 == 0 {
					_, err = lockedIncrement(local, marker)
				} else {
					err = casIncrement(local, marker)
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, h := range helpers {
		for range perHelper {
			h.line(t)
		}
		if err := h.cmd.Wait(); err != nil {
			t.Fatalf("helper: %v", err)
		}
	}
	doc, err := l.Read(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	const want = 2*perHelper + 4*perGoroutine
	if doc.Serial != want || len(markers(doc)) != want {
		t.Errorf("serial %d with %d markers, want %d of each", doc.Serial, len(markers(doc)), want)
	}
}
