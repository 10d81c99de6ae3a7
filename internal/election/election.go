// Package election elects one leader among several `infrakit watch`
// processes that share a stack through etcd, and hands the leader a Fence:
// the condition that makes its state writes fail once it is no longer the
// leader.
//
// It is a thin layer over etcd's concurrency.Session, campaigning the way
// concurrency.Election does (same keys, oldest key leads) but with every
// wait on etcd bounded. What it adds is the part a leader that acts on real
// infrastructure needs: it learns that it must stop acting *before* its
// lease runs out, not after (see Leadership.Lost), and can verify its
// leadership right before it acts (Leadership.Verify).
//
// Lease semantics, in one place:
//   - A campaign holds one etcd lease of TTL (whole seconds; etcd may raise
//     it to its minimum). Its key <prefix>/leader/<lease> lives as long as
//     the lease, and the campaigner whose key was created first leads.
//   - The lease is renewed every TTL/5 (besides the Session's own
//     renewals). A renewal counts from the moment its request was sent, so
//     after a successful renewal sent at t the lease lives at least until
//     t+TTL on etcd's clock.
//   - Leadership is declared lost when renewal has not succeeded for
//     TTL-Margin, or when the lease is gone (expired, revoked), or when the
//     leader key is deleted. A leader that is cut off from etcd, or paused,
//     therefore stops acting at least Margin before etcd lets another
//     campaigner lead — provided its clock runs at the rate of etcd's.
//   - A process that is frozen (SIGSTOP) cannot notice anything; that is
//     what the Fence is for: every state write carries Fence.Cmp, which
//     fails once the key is gone.
//
// The renewing and the deadlines are Lease's (GrantLease): a Leadership
// holds one, and so does each scale-out member (package ownership), whose
// per-object keys are attached to it.
package election

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Defaults of Options.
const (
	DefaultTTL = 15 * time.Second
	// MinMargin is the smallest default safety margin.
	MinMargin = 500 * time.Millisecond
)

// Errors that say why leadership ended (Leadership.Err) or a campaign failed.
var (
	// ErrNoLeader: nobody leads right now.
	ErrNoLeader = errors.New("no leader")
	// ErrLeaseLost: the lease expired or was revoked (etcd forgot it).
	ErrLeaseLost = errors.New("leader lease lost")
	// ErrRenewalOverdue: the lease could not be renewed for TTL-Margin; it
	// may still be alive in etcd for at most Margin more, but this process
	// must stop acting now.
	ErrRenewalOverdue = errors.New("leader lease renewal overdue")
	// ErrDeposed: the leader key was deleted by someone else.
	ErrDeposed = errors.New("leader key deleted")
	// ErrResigned: Resign was called.
	ErrResigned = errors.New("resigned")
)

// Fence is a leadership as etcd sees it: the leader's key and the revision
// that created it. While the leadership stands the key exists with that
// create revision; once it ends (resigned, expired, revoked) the key is
// gone, and a later leader's key has a later revision. A write made in one
// transaction with Cmp therefore lands only while the leadership stands.
type Fence struct {
	Key      string `json:"key"`
	Revision int64  `json:"revision"`
}

// Cmp is the transaction condition "the leadership of f still stands".
func (f Fence) Cmp() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(f.Key), "=", f.Revision)
}

// IsZero reports whether f is the zero Fence (no leadership).
func (f Fence) IsZero() bool { return f.Key == "" }

func (f Fence) String() string { return fmt.Sprintf("%s@%d", f.Key, f.Revision) }

// Options configure an Election.
type Options struct {
	// Prefix is the stack's key prefix; campaigns run under Prefix+"/leader/".
	Prefix string
	// TTL is the lease's time to live, rounded up to whole seconds
	// (DefaultTTL when zero). A crashed leader is replaced after about TTL.
	TTL time.Duration
	// Margin is how long before the lease would run out the leader stops
	// acting when it cannot renew. Zero means TTL/4, at least MinMargin;
	// it is always less than TTL.
	Margin time.Duration
}

// Election is one election among the processes using the same client
// prefix. It holds no resources; each Campaign holds its own lease.
type Election struct {
	client *clientv3.Client
	prefix string // <prefix>/leader, without the trailing slash
	ttl    time.Duration
	margin time.Duration
}

// New returns the election at opts.Prefix+"/leader" through client. The
// caller owns client and closes it after every Leadership is resigned.
func New(client *clientv3.Client, opts Options) *Election {
	ttl := opts.TTL
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	return &Election{
		client: client,
		prefix: strings.TrimSuffix(opts.Prefix, "/") + "/leader",
		ttl:    ttl,
		margin: opts.Margin,
	}
}

// Key is the election's key prefix (keys are Key()+"/<lease>").
func (e *Election) Key() string { return e.prefix }

// ttlSeconds is the TTL as etcd takes it: whole seconds, rounded up.
func ttlSeconds(d time.Duration) int64 {
	return max(1, int64(math.Ceil(d.Seconds())))
}

// marginFor is the safety margin for a lease of ttl.
func marginFor(ttl, configured time.Duration) time.Duration {
	m := configured
	if m <= 0 {
		m = max(ttl/4, MinMargin)
	}
	// At least a tenth of the TTL must remain to renew in.
	return min(m, ttl-ttl/10)
}

// Leader is who leads, as followers see it.
type Leader struct {
	// Identity is the value the leader campaigned with.
	Identity string
	Fence    Fence
}

// Leader returns the current leader, or ErrNoLeader.
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	resp, err := e.client.Get(ctx, e.prefix+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		return Leader{}, fmt.Errorf("election %s: read leader: %w", e.prefix, err)
	}
	if len(resp.Kvs) == 0 {
		return Leader{}, ErrNoLeader
	}
	kv := resp.Kvs[0]
	return Leader{Identity: string(kv.Value), Fence: Fence{Key: string(kv.Key), Revision: kv.CreateRevision}}, nil
}

// Observe sends the leader every time it changes, starting with the
// current one; a zero Leader means nobody leads. The channel is closed when
// ctx is done (the goroutine behind it stops then) or when etcd cannot be
// read. A slow reader only ever misses intermediate leaders, never the
// latest.
func (e *Election) Observe(ctx context.Context) <-chan Leader {
	out := make(chan Leader)
	go e.observe(ctx, out)
	return out
}

func (e *Election) observe(ctx context.Context, out chan<- Leader) {
	defer close(out)
	var last Leader
	first := true
	for {
		resp, err := e.client.Get(ctx, e.prefix+"/", clientv3.WithFirstCreate()...)
		if err != nil {
			return
		}
		var cur Leader
		if len(resp.Kvs) > 0 {
			kv := resp.Kvs[0]
			cur = Leader{Identity: string(kv.Value), Fence: Fence{Key: string(kv.Key), Revision: kv.CreateRevision}}
		}
		if first || cur != last {
			select {
			case out <- cur:
			case <-ctx.Done():
				return
			}
			first, last = false, cur
		}
		// Any change under the prefix may change the leader; look again.
		if !e.waitChange(ctx, resp.Header.Revision+1) {
			return
		}
	}
}

// waitChange waits for any event under the prefix from rev on. It reports
// false when ctx is done.
func (e *Election) waitChange(ctx context.Context, rev int64) bool {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for wr := range e.client.Watch(wctx, e.prefix+"/", clientv3.WithPrefix(), clientv3.WithRev(rev)) {
		if len(wr.Events) > 0 || wr.Err() != nil {
			// On an error (compaction), reading again is the recovery.
			return ctx.Err() == nil
		}
	}
	return ctx.Err() == nil
}
