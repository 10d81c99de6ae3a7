package ownership

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/infrakit/infrakit/internal/election"
)

// Hooks are how a Balancer tells its caller what this process owns. They
// are called from Run's goroutine, one at a time (a hook that blocks holds
// up the balancing); they may call the Balancer's Held, Fence and View.
type Hooks struct {
	// Acquired: the process owns the object now; fence every state write
	// made for it with the fence.
	Acquired func(Object, election.Fence)
	// Releasing: the process is about to give the object up. It must
	// return only once the caller no longer acts on the object (its pass
	// has ended); the owner key is deleted after it returns. When the
	// session is lost it is called too, for every object held, after the
	// fact: the caller must stop at once.
	Releasing func(Object)
	// Released: the object is no longer this process's.
	Released func(Object)
}

// Balancer keeps this process holding its share of the stack's objects:
// on every change of members or owners, and on Refresh, it computes the
// assignment (shard.Assign over the live members, sticky to the current
// owners), acquires the free objects assigned to this member and releases
// those it holds that are assigned elsewhere. An object whose owner key
// names a member that is gone is left alone until the key expires (nobody
// acts while a lease is in doubt).
type Balancer struct {
	session *Session
	objects func() []Object
	hooks   Hooks
	refresh chan struct{}
	retry   time.Duration

	mu   sync.Mutex
	held map[Object]election.Fence // guarded by mu
	view View                      // the last view read; guarded by mu
}

// NewBalancer is the balancer of session's share among objects() (called
// at every re-balance: the stack's groups, ingresses and enrollments as
// configured now). Nil hooks are skipped.
func NewBalancer(session *Session, objects func() []Object, hooks Hooks) *Balancer {
	return &Balancer{
		session: session,
		objects: objects,
		hooks:   hooks,
		refresh: make(chan struct{}, 1),
		retry:   max(session.TTL()/5, 100*time.Millisecond),
		held:    map[Object]election.Fence{},
	}
}

// Refresh asks Run to re-balance: call it when the objects changed. It
// does not wait.
func (b *Balancer) Refresh() {
	select {
	case b.refresh <- struct{}{}:
	default: // one is pending already
	}
}

// Session is the session the balancer holds objects for.
func (b *Balancer) Session() *Session { return b.session }

// Held is what this process owns now, with the fences.
func (b *Balancer) Held() map[Object]election.Fence {
	b.mu.Lock()
	defer b.mu.Unlock()
	return maps.Clone(b.held)
}

// Fence is o's fence when this process owns o.
func (b *Balancer) Fence(o Object) (election.Fence, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f, ok := b.held[o]
	return f, ok
}

// View is the members and owners as last read (for a status page).
func (b *Balancer) View() View {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.view
}

// Run balances until ctx is done or the session is lost. On return it
// holds nothing: when ctx is done it gives every object back (Releasing,
// then deletes the owner key, then Released) and returns nil; when the
// session is lost, every object counts as released at once (Releasing and
// Released, no key deleted: the lease is gone or in doubt) and it returns
// an error wrapping the session's Err.
func (b *Balancer) Run(ctx context.Context) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	views := b.session.Observe(wctx, b.retry)
	defer func() {
		cancel()
		for range views {
			// Observe closes its channel once wctx is done.
		}
	}()
	var retry <-chan time.Time
	for {
		select {
		case <-b.session.Lost():
			b.dropAll()
			return fmt.Errorf("ownership %s: member %s: %w", b.session.prefix, b.session.id, b.session.Err())
		case <-ctx.Done():
			b.releaseAll(ctx)
			return nil
		case v := <-views:
			b.mu.Lock()
			b.view = v
			b.mu.Unlock()
		case <-b.refresh:
		case <-retry:
		}
		retry = nil
		if !b.balance(ctx) {
			// An acquire or release failed on etcd, not on a rival: try
			// again even when nothing changes.
			retry = time.After(b.retry)
		}
	}
}

// balance acts on the last view once. It reports false when an action
// failed for a reason a change of members or owners will not report.
func (b *Balancer) balance(ctx context.Context) bool {
	b.mu.Lock()
	view := b.view
	held := maps.Clone(b.held)
	b.mu.Unlock()
	if view.Revision == 0 {
		return true // nothing read yet
	}
	p := decide(view, held, b.objects(), b.session.id)
	for _, o := range p.lost {
		b.drop(o)
	}
	ok := true
	for _, ow := range p.stray {
		if err := b.session.Release(ctx, ow.object, ow.Fence); err != nil {
			ok = false
		}
	}
	for _, o := range p.release {
		if err := b.release(ctx, o, held[o]); err != nil {
			ok = false
		}
	}
	for _, o := range p.acquire {
		if err := b.acquire(ctx, o); err != nil && !errors.Is(err, ErrOwned) {
			ok = false
		}
	}
	return ok
}

func (b *Balancer) acquire(ctx context.Context, o Object) error {
	f, err := b.session.Acquire(ctx, o)
	if err != nil {
		return err
	}
	b.mu.Lock()
	b.held[o] = f
	b.mu.Unlock()
	if b.hooks.Acquired != nil {
		b.hooks.Acquired(o, f)
	}
	return nil
}

// release gives o back: the caller stops acting on it, then its key is
// deleted. When the delete fails o is no longer treated as held either
// (the caller has stopped), and the key is deleted on the next try or
// expires with the session.
func (b *Balancer) release(ctx context.Context, o Object, f election.Fence) error {
	if b.hooks.Releasing != nil {
		b.hooks.Releasing(o)
	}
	err := b.session.Release(ctx, o, f)
	b.forget(o)
	return err
}

// drop forgets o without deleting its key: it was lost.
func (b *Balancer) drop(o Object) {
	if b.hooks.Releasing != nil {
		b.hooks.Releasing(o)
	}
	b.forget(o)
}

// forget removes o from held and reports it Released.
func (b *Balancer) forget(o Object) {
	b.mu.Lock()
	delete(b.held, o)
	b.mu.Unlock()
	if b.hooks.Released != nil {
		b.hooks.Released(o)
	}
}

// dropAll drops every held object (the session is lost).
func (b *Balancer) dropAll() {
	for o := range b.Held() {
		b.drop(o)
	}
}

// releaseAll gives every held object back, asking etcd for at most the
// session's margin (the keys expire with the session anyway).
func (b *Balancer) releaseAll(ctx context.Context) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.session.lease.Margin())
	defer cancel()
	for o, f := range b.Held() {
		if b.hooks.Releasing != nil {
			b.hooks.Releasing(o)
		}
		_ = b.session.Release(rctx, o, f) // best effort: see above
		b.forget(o)
	}
}
