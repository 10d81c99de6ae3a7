package ownership

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/infrakit/infrakit/internal/election"
	"github.com/infrakit/infrakit/internal/testwait"
)

func TestObjectString(t *testing.T) {
	o := Object{Kind: KindGroup, Name: "web"}
	if o.String() != "group/web" {
		t.Errorf("String = %q", o)
	}
	if p, ok := parseObject("ingress/front"); !ok || p != (Object{KindIngress, "front"}) {
		t.Errorf("parseObject = %v %v", p, ok)
	}
	for _, bad := range []string{"group", "pod/x", "group/", ""} {
		if _, ok := parseObject(bad); ok {
			t.Errorf("parseObject(%q) accepted", bad)
		}
	}
}

// TestJoinView: members show with their identities, sorted; owners with
// their fences; Leave removes the member and its owner keys.
func TestJoinView(t *testing.T) {
	ctx := ctxT(t)
	a := join(t, "host-a")
	b := join(t, "host-b")
	if a.ID() == b.ID() || a.ID() == "" || a.Identity() != "host-a" {
		t.Fatalf("ids %q %q identity %q", a.ID(), b.ID(), a.Identity())
	}
	ms, err := a.Members(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[0].ID > ms[1].ID {
		t.Fatalf("members %+v", ms)
	}
	for _, s := range []*Session{a, b} {
		v, err := s.View(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m, ok := v.Member(s.ID())
		if !ok || m.Identity != s.Identity() || m.Started.IsZero() {
			t.Errorf("member %s in view: %+v %v", s.ID(), m, ok)
		}
	}
	o := Object{KindEnrollment, "nodes"}
	f, err := b.Acquire(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	v, err := a.View(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ow, ok := v.Owner(o); !ok || ow.Member != b.ID() || ow.Fence != f {
		t.Errorf("owner of %s = %+v %v, want %s %s", o, ow, ok, b.ID(), f)
	}
	if has, err := HasMembers(ctx, newClient(t), prefix(t)+"/"); err != nil || !has {
		t.Errorf("HasMembers with two members = %v, %v", has, err)
	}
	if has, err := HasMembers(ctx, newClient(t), prefix(t)+"-other"); err != nil || has {
		t.Errorf("HasMembers of another prefix = %v, %v", has, err)
	}
	if err := b.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.Lost():
		if !errors.Is(b.Err(), election.ErrResigned) || b.Standing() {
			t.Errorf("after Leave: Err %v, standing %v", b.Err(), b.Standing())
		}
	default:
		t.Error("Lost open after Leave")
	}
	v, err = a.View(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := v.Member(b.ID()); ok || len(v.Owners) != 0 {
		t.Errorf("after b left: members %+v owners %+v", v.Members, v.Owners)
	}
}

// TestAcquireRelease: one owner at a time; a stale fence releases
// nothing; a new owner's fence comes after the old one's.
func TestAcquireRelease(t *testing.T) {
	ctx := ctxT(t)
	a, b := join(t, "a"), join(t, "b")
	c := newClient(t)
	o := Object{KindGroup, "web"}
	fa, err := a.Acquire(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if fa.Key != prefix(t)+"/owners/group/web" || fa.Revision == 0 {
		t.Fatalf("fence %s", fa)
	}
	if _, err := b.Acquire(ctx, o); !errors.Is(err, ErrOwned) {
		t.Fatalf("b acquired an owned object: %v", err)
	}
	// Acquiring again what it holds (a retried request) returns its fence.
	if again, err := a.Acquire(ctx, o); err != nil || again != fa {
		t.Fatalf("a re-acquiring = %s, %v; want %s", again, err, fa)
	}
	if _, err := a.Acquire(ctx, Object{"pod", "x"}); err == nil {
		t.Error("acquired an object of an unknown kind")
	}

	// A stale fence (an earlier lease of the key) deletes nothing.
	if err := b.Release(ctx, o, election.Fence{Key: fa.Key, Revision: fa.Revision - 1}); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx, Object{KindGroup, "other"}, fa); err == nil {
		t.Error("released with another object's fence")
	}
	if tr, err := c.Txn(ctx).If(fa.Cmp()).Commit(); err != nil || !tr.Succeeded {
		t.Fatalf("the stale release deleted the owner key (%v)", err)
	}

	if err := a.Verify(ctx, fa); err != nil {
		t.Fatalf("Verify of an owned object = %v", err)
	}
	if err := a.Release(ctx, o, fa); err != nil {
		t.Fatal(err)
	}
	if tr, err := c.Txn(ctx).If(fa.Cmp()).Commit(); err != nil || tr.Succeeded {
		t.Fatalf("the fence still stands after Release (%v)", err)
	}
	if err := a.Verify(ctx, fa); !errors.Is(err, ErrNotOwned) {
		t.Fatalf("Verify after Release = %v, want ErrNotOwned", err)
	}
	fb, err := b.Acquire(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if fb.Revision <= fa.Revision {
		t.Errorf("new fence %s not after the old %s", fb, fa)
	}
	// The old owner's late release leaves the new owner's key alone.
	if err := a.Release(ctx, o, fa); err != nil {
		t.Fatal(err)
	}
	if tr, err := c.Txn(ctx).If(fb.Cmp()).Commit(); err != nil || !tr.Succeeded {
		t.Fatalf("a late release deleted the new owner's key (%v)", err)
	}
	// The key lives with b's lease: revoking it frees the object.
	if _, err := c.Revoke(ctx, b.lease.ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Acquire(ctx, o); err != nil {
		t.Fatalf("acquire after the owner's lease was revoked: %v", err)
	}
	testwait.For(t, 10*time.Second, "b to notice its lease is gone", func() bool { return b.Err() != nil })
	if err := b.Verify(ctx, fb); !errors.Is(err, election.ErrLeaseLost) {
		t.Errorf("Verify of a lost session = %v, want ErrLeaseLost", err)
	}
}

// TestObserve: a change of members or owners sends a new view.
func TestObserve(t *testing.T) {
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	a := join(t, "a")
	views := a.Observe(ctx, 0)
	if v := <-views; len(v.Members) != 1 {
		t.Fatalf("first view %+v", v)
	}
	o := Object{KindIngress, "front"}
	if _, err := a.Acquire(ctx, o); err != nil {
		t.Fatal(err)
	}
	for v := range views {
		if _, ok := v.Owner(o); ok {
			break
		}
	}
	b := join(t, "b")
	for v := range views {
		if _, ok := v.Member(b.ID()); ok {
			break
		}
	}
	cancel()
	for range views {
		// closed once ctx is done
	}
}
