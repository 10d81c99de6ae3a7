package ownership

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/infrakit/infrakit/internal/election"
	"github.com/infrakit/infrakit/internal/state/etcd/etcdtest"
	"github.com/infrakit/infrakit/internal/testwait"
)

// TestBalancerShares: three members settle on 3/3/3 of nine objects; one
// leaving moves exactly its three (the others keep theirs, same fences);
// one joining takes a bounded share, moved only from the others to it.
func TestBalancerShares(t *testing.T) {
	objects := objectsN(9)
	tr := newTracker(t)
	a := startMember(t, tr, "a", objects)
	b := startMember(t, tr, "b", objects)
	c := startMember(t, tr, "c", objects)
	settled(t, objects, a, b, c)
	for _, m := range []*member{a, b, c} {
		if n := len(m.b.Held()); n != 3 {
			t.Fatalf("%s holds %d of 9, want 3", m.s.Identity(), n)
		}
	}

	// c leaves (as on SIGTERM): its three move, nothing else does.
	heldA, heldB, heldC := a.b.Held(), b.b.Held(), c.b.Held()
	before := tr.acquisitions()
	if err := c.stop(t); err != nil {
		t.Fatalf("Run after its context ended = %v", err)
	}
	if len(c.b.Held()) != 0 {
		t.Errorf("c still holds %v after Run returned", c.b.Held())
	}
	if err := c.s.Leave(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	settled(t, objects, a, b)
	keeps(t, "a", heldA, a.b.Held())
	keeps(t, "b", heldB, b.b.Held())
	if moved := tr.acquisitions() - before; moved != len(heldC) {
		t.Errorf("%d acquisitions after c left; it held %d", moved, len(heldC))
	}

	// d joins: it takes at most ceil(9/3) = 3, only from a and b.
	heldA, heldB = a.b.Held(), b.b.Held()
	before = tr.acquisitions()
	d := startMember(t, tr, "d", objects)
	settled(t, objects, a, b, d)
	moved := tr.acquisitions() - before
	if moved > 3 || moved != len(d.b.Held()) {
		t.Errorf("%d acquisitions after d joined (d holds %d); want at most 3, all d's", moved, len(d.b.Held()))
	}
	kept := 0
	for _, pair := range []struct{ before, after map[Object]election.Fence }{{heldA, a.b.Held()}, {heldB, b.b.Held()}} {
		for o, f := range pair.after {
			if pair.before[o] != f {
				t.Errorf("%s changed owner fence to %s, though only d joined", o, f)
			}
			kept++
		}
	}
	if kept+moved != len(objects) {
		t.Errorf("kept %d + moved %d != %d", kept, moved, len(objects))
	}
}

// keeps fails unless every object of before is still held with its fence.
func keeps(t *testing.T, who string, before, after map[Object]election.Fence) {
	t.Helper()
	for o, f := range before {
		if after[o] != f {
			t.Errorf("%s's %s moved (fence %s -> %s) though another member left", who, o, f, after[o])
		}
	}
}

// TestBalancerSessionRevoked: a member whose lease is revoked behind its
// back reports Lost, drops everything at once (Run returns the session's
// error) and its objects move to the others, theirs untouched.
func TestBalancerSessionRevoked(t *testing.T) {
	objects := objectsN(9)
	tr := newTracker(t)
	// The revoked member cannot stop before others take over: that is what
	// fences are for; the exclusion check does not apply here.
	tr.strict = false
	a := startMember(t, tr, "a", objects)
	b := startMember(t, tr, "b", objects)
	c := startMember(t, tr, "c", objects)
	settled(t, objects, a, b, c)
	heldA, heldB, heldC := a.b.Held(), b.b.Held(), c.b.Held()

	ctx := ctxT(t)
	if _, err := newClient(t).Revoke(ctx, c.s.lease.ID()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.s.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("Lost not closed after the session lease was revoked")
	}
	if !errors.Is(c.s.Err(), election.ErrLeaseLost) {
		t.Errorf("Err = %v, want ErrLeaseLost", c.s.Err())
	}
	if err := c.stop(t); !errors.Is(err, election.ErrLeaseLost) {
		t.Errorf("Run of the lost member = %v", err)
	}
	if h := c.b.Held(); len(h) != 0 {
		t.Errorf("the lost member still holds %v", h)
	}
	settled(t, objects, a, b)
	keeps(t, "a", heldA, a.b.Held())
	keeps(t, "b", heldB, b.b.Held())
	for o, f := range heldC {
		if nf, ok := a.b.Fence(o); ok && nf.Revision <= f.Revision {
			t.Errorf("%s re-acquired with %s, not after %s", o, nf, f)
		}
	}
	// Its fences no longer stand.
	for _, f := range heldC {
		if tr, err := newClient(t).Txn(ctx).If(f.Cmp()).Commit(); err != nil || tr.Succeeded {
			t.Errorf("fence %s still stands (%v)", f, err)
		}
	}
	if _, err := c.s.Acquire(ctx, Object{KindGroup, "late"}); !errors.Is(err, ErrNotStanding) {
		t.Errorf("a lost session acquired: %v", err)
	}
}

// TestBalancerRefreshAndOrphans: objects added and removed are taken and
// given back on Refresh; an owner key whose member is gone is left alone
// until it goes.
func TestBalancerRefreshAndOrphans(t *testing.T) {
	ctx := ctxT(t)
	tr := newTracker(t)
	objects := objectsN(2)
	var mu sync.Mutex
	configured := objects
	current := func() []Object {
		mu.Lock()
		defer mu.Unlock()
		return configured
	}
	s := join(t, "a")
	runCtx, cancel := context.WithCancel(context.Background())
	b := NewBalancer(s, current, tr.hooks("a"))
	done := make(chan error, 1)
	go func() { done <- b.Run(runCtx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	}()
	testwait.For(t, 20*time.Second, "a holds both objects", func() bool { return len(b.Held()) == 2 })

	first := b.Held()

	// An owner key of a member that is not live (its member key gone, its
	// lease not yet expired): nobody takes that object meanwhile.
	c := newClient(t)
	ghost, err := c.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	orphan := Object{KindGroup, "orphan"}
	put, err := c.Put(ctx, prefix(t)+"/owners/group/orphan", "gone", clientv3.WithLease(ghost.ID))
	if err != nil {
		t.Fatal(err)
	}
	gf := election.Fence{Key: prefix(t) + "/owners/group/orphan", Revision: put.Header.Revision}
	mu.Lock()
	configured = append(objectsN(1), orphan) // g1 removed, orphan added
	mu.Unlock()
	b.Refresh()
	testwait.For(t, 20*time.Second, "a gives g1 back", func() bool {
		_, has := b.Fence(objects[1])
		return !has
	})
	if _, has := b.Fence(orphan); has {
		t.Fatal("a took an object whose owner's lease is in doubt")
	}
	v, err := s.View(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Owners) != 2 || v.Owners[objects[0]].Fence != first[objects[0]] || v.Owners[orphan].Fence != gf {
		t.Fatalf("owners after g1 was removed: %+v; want g0 still %s and the orphan still %s", v.Owners, first[objects[0]], gf)
	}
	// The ghost's lease ends: a takes the object.
	if _, err := c.Revoke(ctx, ghost.ID); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 20*time.Second, "a takes the orphan once its owner key is gone", func() bool {
		f, has := b.Fence(orphan)
		return has && f.Revision > gf.Revision
	})
	if got := b.Held(); len(got) != 2 {
		t.Errorf("held %v", got)
	}
}

// TestReleaseAllOnStop: stopping Run gives every object back (keys
// deleted, hooks called) before it returns.
func TestReleaseAllOnStop(t *testing.T) {
	ctx := ctxT(t)
	tr := newTracker(t)
	m := startMember(t, tr, "a", objectsN(3))
	testwait.For(t, 20*time.Second, "a holds all three", func() bool { return len(m.b.Held()) == 3 })
	if err := m.stop(t); err != nil {
		t.Fatal(err)
	}
	tr.mu.Lock()
	acting := len(tr.acting)
	tr.mu.Unlock()
	if acting != 0 {
		t.Errorf("%d objects still acted on after Run returned", acting)
	}
	resp, err := newClient(t).Get(ctx, prefix(t)+"/owners/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 0 {
		t.Errorf("%d owner keys left after Run returned (%v)", resp.Count, err)
	}
}

// TestBalancerPartitioned cuts one member off from etcd: it stops acting
// on its objects (Releasing returns) before its lease runs out, so that
// nobody acquires them while it still acts (the tracker checks); they move
// once the lease has expired; the others keep theirs. Reconnected, it
// joins again and takes a share back, moved only to it.
func TestBalancerPartitioned(t *testing.T) {
	proxy, err := etcdtest.NewProxy(endpoints[0])
	if err != nil {
		t.Fatal(err)
	}
	// Closed after the members have left (cleanups run last-in first-out).
	t.Cleanup(func() { proxy.Close() })
	objects := objectsN(9)
	tr := newTracker(t)
	a := startMember(t, tr, "a", objects)
	b := startMember(t, tr, "b", objects)
	cut := newClient(t, proxy.Endpoint())
	// A wide margin (stop acting 1.5s before the lease can run out): the
	// exclusion must hold on a busy machine too.
	cutOpts := Options{TTL: 3 * time.Second, Margin: 1500 * time.Millisecond}
	c := startMemberWith(t, cut, cutOpts, tr, "c", objects)
	settled(t, objects, a, b, c)
	heldA, heldB, heldC := a.b.Held(), b.b.Held(), c.b.Held()

	proxy.Cut()
	cutAt := time.Now()
	select {
	case <-c.s.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("Lost not closed although the member cannot renew its lease")
	}
	if !errors.Is(c.s.Err(), election.ErrRenewalOverdue) {
		t.Errorf("Err = %v, want ErrRenewalOverdue", c.s.Err())
	}
	if err := c.stop(t); !errors.Is(err, election.ErrRenewalOverdue) {
		t.Errorf("Run of the cut-off member = %v", err)
	}
	t.Logf("lost %s after the cut", time.Since(cutAt).Round(time.Millisecond))
	settled(t, objects, a, b)
	t.Logf("moved %s after the cut", time.Since(cutAt).Round(time.Millisecond))
	keeps(t, "a", heldA, a.b.Held())
	keeps(t, "b", heldB, b.b.Held())
	for o := range heldC {
		if _, ok := a.b.Fence(o); !ok {
			if _, ok := b.b.Fence(o); !ok {
				t.Errorf("%s of the cut-off member was not taken over", o)
			}
		}
	}

	proxy.Restore()
	heldA, heldB = a.b.Held(), b.b.Held()
	before := tr.acquisitions()
	restored := time.Now()
	c2 := startMemberWith(t, cut, cutOpts, tr, "c again", objects)
	t.Logf("joined again %s after the restore", time.Since(restored).Round(time.Millisecond))
	settled(t, objects, a, b, c2)
	t.Logf("settled %s after the restore", time.Since(restored).Round(time.Millisecond))
	if moved := tr.acquisitions() - before; moved > 3 || moved != len(c2.b.Held()) {
		t.Errorf("%d acquisitions after c joined again (it holds %d); want at most 3, all its own", moved, len(c2.b.Held()))
	}
	for _, pair := range []struct{ before, after map[Object]election.Fence }{{heldA, a.b.Held()}, {heldB, b.b.Held()}} {
		for o, f := range pair.after {
			if pair.before[o] != f {
				t.Errorf("%s changed owner fence to %s, though only c joined", o, f)
			}
		}
	}
}

// TestReleasingBlocksDelete: the owner key of an object being given up is
// deleted only once Releasing has returned (the caller stopped acting), so
// the next owner cannot take it before.
func TestReleasingBlocksDelete(t *testing.T) {
	ctx := ctxT(t)
	objects := objectsN(2)
	releasing := make(chan Object, len(objects))
	gate := make(chan struct{})
	a := join(t, "a")
	ab := NewBalancer(a, func() []Object { return objects }, Hooks{
		Releasing: func(o Object) {
			releasing <- o
			<-gate
		},
	})
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ab.Run(runCtx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	}()
	testwait.For(t, 20*time.Second, "a holds both objects", func() bool { return len(ab.Held()) == 2 })
	fences := ab.Held()

	tr := newTracker(t)
	b := startMember(t, tr, "b", objects)
	var o Object
	select {
	case o = <-releasing:
	case <-time.After(20 * time.Second):
		t.Fatal("a did not start giving an object to b")
	}
	// a is inside Releasing: its key stands, b does not hold it.
	resp, err := newClient(t).Get(ctx, fences[o].Key)
	if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].CreateRevision != fences[o].Revision {
		t.Fatalf("owner key of %s while a is releasing it: %v (%v)", o, resp.Kvs, err)
	}
	if _, has := b.b.Fence(o); has {
		t.Fatalf("b holds %s while a is releasing it", o)
	}
	close(gate)
	testwait.For(t, 20*time.Second, "b takes the object a gave up", func() bool {
		_, has := b.b.Fence(o)
		return has
	})
	if _, has := ab.Fence(o); has || len(ab.Held()) != 1 {
		t.Errorf("a holds %v after giving %s up", ab.Held(), o)
	}
}
