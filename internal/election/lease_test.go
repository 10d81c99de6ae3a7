package election

import (
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestLeaseRevokedElsewhere: a lease revoked by someone else (as etcd
// does when it expires) is lost at once; the keys attached to it are gone.
func TestLeaseRevokedElsewhere(t *testing.T) {
	ctx := ctxT(t)
	c := newClient(t)
	l, err := GrantLease(ctx, newClient(t), 2*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Revoke(ctx)
	if l.TTL() != 2*time.Second || l.Margin() != 500*time.Millisecond || !l.Standing() || l.Err() != nil {
		t.Fatalf("new lease: ttl %s margin %s standing %v err %v", l.TTL(), l.Margin(), l.Standing(), l.Err())
	}
	key := prefix(t) + "/k"
	if _, err := c.Put(ctx, key, "v", clientv3.WithLease(l.ID())); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Revoke(ctx, l.ID()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("Lost not closed after the lease was revoked")
	}
	<-l.Context().Done()
	if !errors.Is(l.Err(), ErrLeaseLost) || l.Standing() {
		t.Errorf("after the revoke: Err %v, standing %v", l.Err(), l.Standing())
	}
	if resp, err := c.Get(ctx, key); err != nil || len(resp.Kvs) != 0 {
		t.Errorf("the attached key outlived its lease (%v)", err)
	}
	if err := l.Revoke(ctx); err != nil {
		t.Errorf("Revoke of a lease etcd forgot = %v", err)
	}
}

// TestLeaseLoseThenRevoke: Lose ends the lease for this process without
// revoking it (the first reason stays); Revoke then deletes its keys.
func TestLeaseLoseThenRevoke(t *testing.T) {
	ctx := ctxT(t)
	c := newClient(t)
	l, err := GrantLease(ctx, c, 2*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	key := prefix(t) + "/k"
	if _, err := c.Put(ctx, key, "v", clientv3.WithLease(l.ID())); err != nil {
		t.Fatal(err)
	}
	l.Lose(ErrDeposed)
	<-l.Lost()
	if resp, err := c.Get(ctx, key); err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("Lose deleted the attached key (%v)", err)
	}
	if err := l.Revoke(ctx); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(l.Err(), ErrDeposed) {
		t.Errorf("Err = %v, want the first reason, ErrDeposed", l.Err())
	}
	if resp, err := c.Get(ctx, key); err != nil || len(resp.Kvs) != 0 {
		t.Errorf("the attached key outlived Revoke (%v)", err)
	}
}
