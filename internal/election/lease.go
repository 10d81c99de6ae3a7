package election

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Lease is an etcd lease this process keeps alive and stops trusting
// before etcd would let it run out (see the package comment for the
// semantics: renewed every TTL/5, lost when etcd forgot it or when renewal
// has not succeeded for TTL-Margin). A Leadership holds one; so does a
// scale-out member (package ownership). It owns one goroutine (the
// monitor) and the concurrency.Session's keep-alive; Revoke stops both.
// Always call Revoke, lost or not.
type Lease struct {
	client  *clientv3.Client
	id      clientv3.LeaseID
	ttl     time.Duration // as granted by etcd
	margin  time.Duration
	session *concurrency.Session

	// bg is done once Revoke has stopped the renewals: hand it to the
	// watches that live as long as the lease.
	bg     context.Context
	cancel context.CancelFunc

	stop chan struct{} // closed by Revoke
	done chan struct{} // closed when the monitor has returned

	lostOnce   sync.Once
	lost       chan struct{}
	lostCtx    context.Context // done when lost is closed
	lostCancel context.CancelFunc
	mu         sync.Mutex
	err        error // why the lease ended; guarded by mu
	// renewed is when the last successful renewal was sent (Unix
	// nanoseconds): the monitor keeps it, Standing and Verify read it.
	renewed atomic.Int64

	revokeOnce sync.Once
	revokeErr  error
}

// GrantLease asks etcd for a lease of ttl (rounded up to whole seconds;
// DefaultTTL when zero) and keeps it alive until Revoke. margin is how long
// before the lease would run out Lost closes when it cannot be renewed
// (zero: TTL/4, at least MinMargin; always less than the TTL). ctx bounds
// the grant only.
func GrantLease(ctx context.Context, client *clientv3.Client, ttl, margin time.Duration) (*Lease, error) {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	// Renewal deadlines count from before the grant was asked for: the
	// lease certainly lives until then + TTL.
	start := time.Now()
	grant, err := client.Grant(ctx, ttlSeconds(ttl))
	if err != nil {
		return nil, fmt.Errorf("grant lease: %w", err)
	}
	granted := time.Duration(grant.TTL) * time.Second
	bg, cancel := context.WithCancel(context.Background())
	session, err := concurrency.NewSession(client, concurrency.WithLease(grant.ID), concurrency.WithContext(bg))
	if err != nil {
		cancel()
		rctx, rcancel := context.WithTimeout(context.Background(), granted)
		defer rcancel()
		_, _ = client.Revoke(rctx, grant.ID) // best effort: the lease expires anyway
		return nil, fmt.Errorf("lease %x: session: %w", int64(grant.ID), err)
	}
	l := &Lease{
		client:  client,
		id:      grant.ID,
		ttl:     granted,
		margin:  marginFor(granted, margin),
		session: session,
		bg:      bg,
		cancel:  cancel,
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
		lost:    make(chan struct{}),
	}
	l.lostCtx, l.lostCancel = context.WithCancel(context.Background())
	l.renewed.Store(start.UnixNano())
	go l.monitor(start)
	return l, nil
}

// monitor renews the lease every TTL/5 and declares it lost (see the
// package comment). It returns when the lease is lost or Revoke closes
// stop.
func (l *Lease) monitor(start time.Time) {
	defer close(l.done)
	lastRenew := start
	renew := time.NewTicker(max(l.ttl/5, 50*time.Millisecond))
	defer renew.Stop()
	overdue := time.NewTimer(time.Until(start.Add(l.ttl - l.margin)))
	defer overdue.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-l.lost:
			return // declared lost by its holder (a deleted key, say)
		case <-l.session.Done():
			l.lose(ErrLeaseLost)
			return
		case <-overdue.C:
			l.lose(ErrRenewalOverdue)
			// The lease may still live in etcd for up to Margin; revoking
			// it lets another process take over at once if etcd is
			// reachable.
			l.revokeWithin(l.margin)
			return
		case <-renew.C:
			sent := time.Now()
			// Bound the renewal by the overdue instant, so the timer is
			// served on time even when etcd does not answer.
			rctx, cancel := context.WithDeadline(l.bg, lastRenew.Add(l.ttl-l.margin))
			_, err := l.client.KeepAliveOnce(rctx, l.id)
			cancel()
			switch {
			case err == nil:
				lastRenew = sent
				l.renewed.Store(sent.UnixNano())
				overdue.Reset(time.Until(lastRenew.Add(l.ttl - l.margin)))
			case errors.Is(err, rpctypes.ErrLeaseNotFound):
				l.lose(ErrLeaseLost)
				return
			}
		}
	}
}

// lose records why the lease ended and closes Lost, once.
func (l *Lease) lose(err error) {
	l.lostOnce.Do(func() {
		l.mu.Lock()
		l.err = err
		l.mu.Unlock()
		close(l.lost)
		l.lostCancel()
	})
}

// revokeWithin revokes the lease, giving up after d.
func (l *Lease) revokeWithin(d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	_, _ = l.client.Revoke(ctx, l.id) // best effort: the lease expires anyway
}

// overdue reports whether renewal is overdue by this process's clock.
func (l *Lease) overdue() bool {
	return time.Since(time.Unix(0, l.renewed.Load())) >= l.ttl-l.margin
}

// ID is the lease's etcd ID: attach keys to it (clientv3.WithLease).
func (l *Lease) ID() clientv3.LeaseID { return l.id }

// TTL is the lease's time to live as etcd granted it.
func (l *Lease) TTL() time.Duration { return l.ttl }

// Margin is how long before the lease would run out Lost is closed when
// the lease cannot be renewed.
func (l *Lease) Margin() time.Duration { return l.margin }

// Lost is closed when the lease ends: etcd forgot it (expired, revoked),
// its renewal is overdue, Lose or Revoke was called. Err says why.
func (l *Lease) Lost() <-chan struct{} { return l.lost }

// Context is done when Lost is closed.
func (l *Lease) Context() context.Context { return l.lostCtx }

// Err is why the lease ended (ErrLeaseLost, ErrRenewalOverdue, ErrResigned
// after Revoke, or what Lose was given), or nil while it stands.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Lose ends the lease as far as this process is concerned (Lost closes,
// Err is err) without revoking it: for a holder that learnt otherwise that
// it must stop acting. The first reason given wins.
func (l *Lease) Lose(err error) { l.lose(err) }

// Standing reports, without asking etcd, whether the lease still stands
// as far as this process can tell: not lost, and renewed recently enough
// by this process's clock. Unlike Lost it does not wait for the monitor,
// so a process that was frozen past its renewal deadline says false from
// the moment it resumes.
func (l *Lease) Standing() bool {
	return l.Err() == nil && !l.overdue()
}

// Revoke ends the lease at once: Lost closes (ErrResigned unless it was
// lost before), the renewals stop, and etcd is asked to revoke the lease,
// which deletes every key attached to it. Stop acting first. It is safe to
// call after Lost, and more than once (later calls return the first
// result). If etcd cannot be reached before ctx is done, the lease simply
// expires after its TTL.
func (l *Lease) Revoke(ctx context.Context) error {
	l.revokeOnce.Do(func() {
		l.lose(ErrResigned)
		close(l.stop)
		<-l.done
		l.cancel()
		l.session.Orphan() // waits for the Session's keep-alive to end
		_, err := l.client.Revoke(ctx, l.id)
		if err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			l.revokeErr = fmt.Errorf("revoke lease %x: %w (it expires within %s)", int64(l.id), err, l.ttl)
		}
	})
	return l.revokeErr
}
