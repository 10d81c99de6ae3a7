package election

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/infrakit/infrakit/internal/state/etcd/etcdtest"
	"github.com/infrakit/infrakit/internal/testwait"
)

func TestMarginAndTTL(t *testing.T) {
	tests := []struct {
		ttl, configured, want time.Duration
	}{
		{2 * time.Second, 0, 500 * time.Millisecond}, // TTL/4 = MinMargin
		{15 * time.Second, 0, 3750 * time.Millisecond},
		{1 * time.Second, 0, 500 * time.Millisecond},
		{1 * time.Second, 5 * time.Second, 900 * time.Millisecond}, // a tenth stays to renew in
		{10 * time.Second, time.Second, time.Second},
	}
	for _, tt := range tests {
		if got := marginFor(tt.ttl, tt.configured); got != tt.want {
			t.Errorf("marginFor(%s, %s) = %s, want %s", tt.ttl, tt.configured, got, tt.want)
		}
	}
	for d, want := range map[time.Duration]int64{0: 1, 500 * time.Millisecond: 1, time.Second: 1, 1500 * time.Millisecond: 2, 15 * time.Second: 15} {
		if got := ttlSeconds(d); got != want {
			t.Errorf("ttlSeconds(%s) = %d, want %d", d, got, want)
		}
	}
}

// campaign runs Campaign in a goroutine; the result arrives on the channel.
type result struct {
	l   *Leadership
	err error
	at  time.Time
}

func campaign(ctx context.Context, e *Election, id string) <-chan result {
	out := make(chan result, 1)
	go func() {
		l, err := e.Campaign(ctx, id)
		out <- result{l, err, time.Now()}
	}()
	return out
}

func TestCampaignResign(t *testing.T) {
	ctx := ctxT(t)
	e := newElection(t, nil)
	if _, err := e.Leader(ctx); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("Leader of an empty election = %v, want ErrNoLeader", err)
	}
	obs, stopObs := context.WithCancel(ctx)
	defer stopObs()
	seen := e.Observe(obs)
	if l := <-seen; l != (Leader{}) {
		t.Fatalf("first observed leader %+v, want none", l)
	}

	a, err := e.Campaign(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if f := a.Fence(); f.Key == "" || f.Revision == 0 || a.Identity() != "a" || a.TTL() != 2*time.Second {
		t.Fatalf("leadership %+v", a)
	}
	if l := <-seen; l.Identity != "a" || l.Fence != a.Fence() {
		t.Fatalf("observed %+v, want a", l)
	}
	// b, on another connection, waits behind a.
	b := campaign(ctx, newElection(t, newClient(t)), "b")
	select {
	case r := <-b:
		t.Fatalf("b led while a leads: %+v", r)
	case <-time.After(300 * time.Millisecond):
	}
	if l, err := e.Leader(ctx); err != nil || l.Identity != "a" {
		t.Fatalf("Leader = %+v, %v", l, err)
	}

	resigned := time.Now()
	if err := a.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Resign(ctx); err != nil {
		t.Errorf("second Resign = %v", err)
	}
	select {
	case <-a.Lost():
		if !errors.Is(a.Err(), ErrResigned) {
			t.Errorf("Err after Resign = %v", a.Err())
		}
	default:
		t.Error("Lost not closed after Resign")
	}
	r := <-b
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.l.Resign(ctx)
	if d := r.at.Sub(resigned); d > time.Second {
		t.Errorf("b led %s after a resigned; want under 1s", d)
	}
	if r.l.Fence().Revision <= a.Fence().Revision {
		t.Errorf("new fence %v not after old %v", r.l.Fence(), a.Fence())
	}
	if l := <-seen; l.Identity != "b" {
		// Observe may show "no leader" in between.
		if l != (Leader{}) || (<-seen).Identity != "b" {
			t.Fatalf("observed %+v, want b", l)
		}
	}
	if l, err := e.Leader(ctx); err != nil || l.Identity != "b" || l.Fence != r.l.Fence() {
		t.Fatalf("Leader = %+v, %v", l, err)
	}
	stopObs()
	for range seen {
		// Observe closes its channel once ctx is done.
	}
}

// TestCampaignCancelled: a campaign given up leaves no key behind.
func TestCampaignCancelled(t *testing.T) {
	ctx := ctxT(t)
	c := newClient(t)
	e := newElection(t, c)
	a, err := e.Campaign(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Resign(ctx)
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := e.Campaign(short, "b"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cancelled campaign = %v", err)
	}
	resp, err := c.Get(ctx, e.Key()+"/", clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("keys after a cancelled campaign: %d (%v)", len(resp.Kvs), err)
	}
}

// TestLostOnRevoke: when the leader's lease is revoked (as etcd does when
// it expires), Lost closes at once and the fence stops matching.
func TestLostOnRevoke(t *testing.T) {
	ctx := ctxT(t)
	c := newClient(t)
	a, err := newElection(t, nil).Campaign(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Resign(ctx)
	revoked := time.Now()
	if _, err := c.Revoke(ctx, a.lease); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.Lost():
	case <-time.After(2 * time.Second):
		t.Fatal("Lost not closed after the lease was revoked")
	}
	if d := time.Since(revoked); d > 500*time.Millisecond {
		t.Errorf("Lost closed %s after the revoke", d)
	}
	if err := a.Err(); !errors.Is(err, ErrDeposed) && !errors.Is(err, ErrLeaseLost) {
		t.Errorf("Err = %v", err)
	}
	tr, err := c.Txn(ctx).If(a.Fence().Cmp()).Commit()
	if err != nil || tr.Succeeded {
		t.Errorf("the fence still holds after the revoke (%v)", err)
	}
	if err := a.Resign(ctx); err != nil {
		t.Errorf("Resign after the lease is gone = %v", err)
	}
}

// TestLostOnKeyDelete: deleting the leader key deposes the leader.
func TestLostOnKeyDelete(t *testing.T) {
	ctx := ctxT(t)
	c := newClient(t)
	a, err := newElection(t, nil).Campaign(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Resign(ctx)
	if _, err := c.Delete(ctx, a.Fence().Key); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.Lost():
		if !errors.Is(a.Err(), ErrDeposed) {
			t.Errorf("Err = %v, want ErrDeposed", a.Err())
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Lost not closed after the leader key was deleted")
	}
}

// TestLostBeforeLeaseRunsOut cuts the leader off from etcd: Lost closes
// while etcd still holds its lease (so it stops acting before anyone else
// can lead), and another campaigner leads once the lease has expired.
func TestLostBeforeLeaseRunsOut(t *testing.T) {
	ctx := ctxT(t)
	proxy, err := etcdtest.NewProxy(endpoints[0])
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	direct := newClient(t)
	a, err := newElection(t, newClient(t, proxy.Endpoint())).Campaign(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Resign(context.Background())
	other := campaign(ctx, newElection(t, direct), "b")

	// Let a renew once, then cut it off.
	time.Sleep(600 * time.Millisecond)
	proxy.Cut()
	cut := time.Now()
	select {
	case <-a.Lost():
	case r := <-other:
		t.Fatalf("b led (%v) before a knew it had lost", r.err)
	case <-time.After(3 * time.Second):
		t.Fatal("Lost not closed although the leader cannot renew")
	}
	lostAfter := time.Since(cut)
	if !errors.Is(a.Err(), ErrRenewalOverdue) {
		t.Errorf("Err = %v, want ErrRenewalOverdue", a.Err())
	}
	// etcd still holds a's lease and key: nobody else can lead yet.
	// (TimeToLive says -1 for a lease that is gone; it rounds down, so a
	// lease with less than a second left shows 0.)
	ttl, err := direct.TimeToLive(ctx, a.lease)
	if err != nil {
		t.Fatal(err)
	}
	key, err := direct.Get(ctx, a.Fence().Key)
	if err != nil {
		t.Fatal(err)
	}
	if ttl.TTL < 0 || len(key.Kvs) == 0 {
		t.Errorf("Lost closed %s after the cut, but etcd had already expired the lease", lostAfter)
	}
	if lostAfter > a.TTL()-a.Margin()+200*time.Millisecond {
		t.Errorf("Lost closed %s after the cut; want within TTL-margin = %s", lostAfter, a.TTL()-a.Margin())
	}

	// The lease expires in etcd; b leads.
	r := <-other
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.l.Resign(ctx)
	if r.at.Sub(cut) > a.TTL()+1500*time.Millisecond {
		t.Errorf("b led %s after the cut; TTL is %s", r.at.Sub(cut), a.TTL())
	}
	proxy.Restore()
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := a.Resign(rctx); err != nil {
		t.Errorf("Resign after reconnecting = %v", err)
	}
}

// TestLeaderKilled: a leader process that is SIGKILLed is replaced within
// TTL + 1s.
func TestLeaderKilled(t *testing.T) {
	ctx := ctxT(t)
	cmd, out := startHelper(t)
	if !out.Scan() || out.Text() != "leading" {
		t.Fatalf("helper did not lead: %q %v", out.Text(), out.Err())
	}
	e := newElection(t, nil)
	if l, err := e.Leader(ctx); err != nil || l.Identity != fmt.Sprintf("pid %d", cmd.Process.Pid) {
		t.Fatalf("Leader = %+v, %v", l, err)
	}
	b := campaign(ctx, e, "b")
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	killed := time.Now()
	r := <-b
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.l.Resign(ctx)
	if d := r.at.Sub(killed); d > 3*time.Second {
		t.Errorf("new leader %s after the kill; want within TTL+1s = 3s", d)
	}
	t.Logf("new leader %s after SIGKILL (TTL 2s)", r.at.Sub(killed).Round(time.Millisecond))
}

// TestVerify: a standing leadership verifies; once its key is gone (as when
// its lease expired while the process was frozen) Verify says so and
// declares the leadership lost, whatever the monitor has noticed yet.
func TestVerify(t *testing.T) {
	ctx := ctxT(t)
	c := newClient(t)
	a, err := newElection(t, nil).Campaign(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Resign(ctx)
	if err := a.Verify(ctx); err != nil || !a.Standing() {
		t.Fatalf("Verify of a standing leadership = %v (standing %v)", err, a.Standing())
	}
	select {
	case <-a.Context().Done():
		t.Fatal("Context done while leading")
	default:
	}
	if _, err := c.Delete(ctx, a.Fence().Key); err != nil {
		t.Fatal(err)
	}
	if err := a.Verify(ctx); !errors.Is(err, ErrDeposed) {
		t.Fatalf("Verify after the key was deleted = %v, want ErrDeposed", err)
	}
	select {
	case <-a.Lost():
	default:
		t.Error("Verify found the leadership gone but Lost is open")
	}
	<-a.Context().Done()
	if a.Standing() {
		t.Error("Standing after the leadership ended")
	}
}

// TestCampaignCancelledCutOff: a campaign waiting behind a leader whose
// connection to etcd is cut returns when its context ends (the library's
// own Campaign would try to delete its key with no deadline and hang).
func TestCampaignCancelledCutOff(t *testing.T) {
	ctx := ctxT(t)
	proxy, err := etcdtest.NewProxy(endpoints[0])
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	a, err := newElection(t, nil).Campaign(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Resign(ctx)
	wait, cancel := context.WithCancel(ctx)
	eb := newElection(t, newClient(t, proxy.Endpoint()))
	b := campaign(wait, eb, "b")
	// b waits once its key is in, beside a's.
	direct := newClient(t)
	testwait.For(t, 10*time.Second, "b's key beside a's", func() bool {
		resp, err := direct.Get(ctx, eb.Key()+"/", clientv3.WithPrefix())
		return err == nil && len(resp.Kvs) == 2
	})
	proxy.Cut()
	cancel()
	select {
	case r := <-b:
		if !errors.Is(r.err, context.Canceled) {
			t.Errorf("cancelled campaign = %v", r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a cancelled campaign did not return while etcd was unreachable")
	}
	proxy.Restore()
}
