package etcd

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/infrakit/infrakit/internal/election"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/internal/state/etcd/etcdtest"
)

// TestRealEtcd runs the backend against a real etcd server process (Debian's
// etcd-server package, which .ci/run installs), not the embedded one: the
// state round trip, a serial conflict, lock contention naming the holder and
// a fenced write after a change of leader.
func TestRealEtcd(t *testing.T) {
	if _, err := os.Stat(etcdtest.RealBinary); err != nil {
		t.Skipf("%s is absent (apt-get install etcd-server; .ci/run installs it): %v", etcdtest.RealBinary, err)
	}
	srv, err := etcdtest.StartProcess(etcdtest.RealBinary, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx := ctxT(t)
	c := newClient(t, srv.Endpoints...)
	b := New(c, Options{Prefix: "/infrakit/real", LeaseTTL: 2 * time.Second})

	doc, err := b.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stale := *doc
	if err := b.Write(ctx, doc); err != nil {
		t.Fatal(err)
	}
	if err := b.Write(ctx, &stale); !errors.Is(err, state.ErrSerialMoved) {
		t.Fatalf("stale write = %v", err)
	}

	unlock, err := b.Lock(ctx, state.LockInfo{Operation: "apply"})
	if err != nil {
		t.Fatal(err)
	}
	other := New(newClient(t, srv.Endpoints...), Options{Prefix: "/infrakit/real"})
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	var le *state.LockedError
	if _, err := other.Lock(short, state.LockInfo{}); !errors.As(err, &le) || le.Holder.Operation != "apply" {
		t.Fatalf("contended lock = %v", err)
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}

	el := election.New(c, election.Options{Prefix: "/infrakit/real", TTL: 2 * time.Second})
	first, err := el.Campaign(ctx, "first")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.WriteFenced(ctx, doc, first.Fence()); err != nil {
		t.Fatal(err)
	}
	if err := first.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	second, err := election.New(other.Client(), election.Options{Prefix: "/infrakit/real", TTL: 2 * time.Second}).Campaign(ctx, "second")
	if err != nil {
		t.Fatal(err)
	}
	defer second.Resign(ctx)
	if err := b.WriteFenced(ctx, doc, first.Fence()); !errors.Is(err, ErrFenced) {
		t.Fatalf("deposed leader's write = %v", err)
	}
	got, err := other.Read(ctx)
	if err != nil || got.Serial != 2 {
		t.Fatalf("final state serial %v (%v), want 2", got, err)
	}
}
