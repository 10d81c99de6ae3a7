// Package etcd is the etcd state backend: the same state document as the
// local backend (state.Encode/Decode, the same validation and refusals),
// stored under one key, written with compare-and-swap transactions, locked
// with an etcd lease, and optionally fenced by a leader's key (package
// election) so that a deposed leader's writes fail.
//
// Keys, under a stack's prefix P (say /infrakit/mystack):
//
//	P/state            the state document (JSON, as infrakit.state.json)
//	P/state.migrated   the document as `init -migrate-state` moved it out
//	P/lock/<lease>     lock holders and waiters (concurrency.Mutex); the
//	                   holder's key holds its state.LockInfo as JSON
//	P/leader/<lease>   leader election (package election)
package etcd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/infrakit/infrakit/internal/election"
	"github.com/infrakit/infrakit/internal/state"
)

// Defaults of Options.
const (
	DefaultPrefix   = "/infrakit"
	DefaultLeaseTTL = 15 * time.Second
	// WriteGrace bounds a write made after its ctx is done (see Write).
	WriteGrace = 10 * time.Second
)

// Options configure a Backend.
type Options struct {
	// Prefix is the stack's key prefix (DefaultPrefix when empty).
	Prefix string
	// LeaseTTL is the state lock's lease TTL, rounded up to whole seconds
	// (DefaultLeaseTTL when zero): a holder that dies frees the lock after
	// about this long.
	LeaseTTL time.Duration
}

// Backend is a state.Store in etcd. Reads and writes are single
// round trips; Lock holds one lease per acquisition. It is safe for
// concurrent use.
type Backend struct {
	client *clientv3.Client
	owned  bool // Close closes client
	prefix string
	ttl    time.Duration

	mu sync.Mutex
	// holder is the lock held through this Backend, if any: writes are
	// then conditioned on still holding it.
	holder *lockHolder
	// seen is the header of the document at revision seenRev, so a write
	// that starts from it needs no read first.
	seen    state.Header
	seenRev int64
}

var _ state.Store = (*Backend)(nil)

// New returns the backend over client, which the caller owns (Close does
// not close it).
func New(client *clientv3.Client, opts Options) *Backend {
	prefix := strings.TrimSuffix(opts.Prefix, "/")
	if prefix == "" {
		prefix = DefaultPrefix
	}
	ttl := opts.LeaseTTL
	if ttl <= 0 {
		ttl = DefaultLeaseTTL
	}
	return &Backend{client: client, prefix: prefix, ttl: ttl}
}

// Client is the etcd client (for an election on the same connection).
func (b *Backend) Client() *clientv3.Client { return b.client }

// Prefix is the stack's key prefix.
func (b *Backend) Prefix() string { return b.prefix }

// StateKey is where the document is stored.
func (b *Backend) StateKey() string { return b.prefix + "/state" }

// MigratedKey is where MoveAside keeps the document.
func (b *Backend) MigratedKey() string { return b.prefix + "/state.migrated" }

// LockKey is the lock's key prefix (holders are LockKey()+"/<lease>").
func (b *Backend) LockKey() string { return b.prefix + "/lock" }

// LeaseTTL is the lock lease's TTL.
func (b *Backend) LeaseTTL() time.Duration { return b.ttl }

// Close closes the client if Open made it.
func (b *Backend) Close() error {
	if b.owned {
		return b.client.Close()
	}
	return nil
}

// name is the state's name in messages.
func (b *Backend) name() string { return b.StateKey() + " in etcd" }

// Read returns the stored document, or state.NewDocument() when there is
// none. A stored document that state.Decode refuses is an error matching
// state.ErrInvalid.
func (b *Backend) Read(ctx context.Context) (*state.Document, error) {
	resp, err := b.client.Get(ctx, b.StateKey())
	if err != nil {
		return nil, fmt.Errorf("read state %s: %w", b.name(), err)
	}
	if len(resp.Kvs) == 0 {
		return state.NewDocument(), nil
	}
	kv := resp.Kvs[0]
	doc, err := state.Decode(b.name(), kv.Value)
	if err != nil {
		return nil, err
	}
	b.remember(kv.ModRevision, header(doc))
	return doc, nil
}

// Write stores doc with compare-and-swap on its lineage and serial, in one
// transaction; see state.Store. While a lock taken through this Backend is
// held, the transaction is also conditioned on still holding it, so a
// holder whose lease expired (paused, cut off) cannot write: the error
// matches ErrLockLost. ctx bounds only the network wait: when ctx is
// already done the write is still tried, for at most WriteGrace, so state
// can be saved after an interrupt.
func (b *Backend) Write(ctx context.Context, doc *state.Document) error {
	return b.write(ctx, doc, nil)
}

// WriteFenced is Write conditioned also on fence: it fails with an error
// matching ErrFenced (and stores nothing) once the leadership fence stands
// for has ended.
func (b *Backend) WriteFenced(ctx context.Context, doc *state.Document, fence election.Fence) error {
	if fence.IsZero() {
		return errors.New("write state: empty fence")
	}
	return b.write(ctx, doc, &fence)
}

// Fenced is this Backend as a state.Store whose every Write is
// WriteFenced(fence): what a leader hands to the code that acts for it.
func (b *Backend) Fenced(fence election.Fence) state.Store {
	return fenced{b: b, fence: fence}
}

type fenced struct {
	b     *Backend
	fence election.Fence
}

func (f fenced) Read(ctx context.Context) (*state.Document, error) { return f.b.Read(ctx) }
func (f fenced) Write(ctx context.Context, doc *state.Document) error {
	return f.b.WriteFenced(ctx, doc, f.fence)
}
func (f fenced) Lock(ctx context.Context, info state.LockInfo) (func() error, error) {
	return f.b.Lock(ctx, info)
}

func header(doc *state.Document) state.Header {
	return state.Header{Exists: true, Lineage: doc.Lineage, Serial: doc.Serial}
}

func (b *Backend) remember(rev int64, h state.Header) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if rev >= b.seenRev {
		b.seen, b.seenRev = h, rev
	}
}

// graceful returns ctx, or when ctx is done a context that is not, bounded
// by WriteGrace.
func graceful(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx.Err() == nil {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(context.WithoutCancel(ctx), WriteGrace)
}

// maxWriteAttempts bounds the retries of a write whose document did not
// change but whose key did (a rewrite of the same serial).
const maxWriteAttempts = 5

func (b *Backend) write(ctx context.Context, doc *state.Document, fence *election.Fence) error {
	if doc == nil {
		return errors.New("write state: nil document")
	}
	if doc.Lineage == "" {
		return errors.New("write state: document has no lineage (start from Read or NewDocument)")
	}
	if doc.Version > state.FormatVersion {
		return fmt.Errorf("write state: document is format %d; this build writes format %d", doc.Version, state.FormatVersion)
	}
	next := *doc
	next.Version = state.FormatVersion
	next.Serial = doc.Serial + 1
	data, err := state.Encode(&next)
	if err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	ctx, cancel := graceful(ctx)
	defer cancel()

	read := state.Header{Exists: !doc.IsNew(), Lineage: doc.Lineage, Serial: doc.Serial}
	// rev is the mod revision the key must still have: 0 for "absent".
	var rev int64
	var current *mvccpb.KeyValue // what is stored, when it must be checked
	b.mu.Lock()
	known := !read.Exists || (b.seenRev > 0 && b.seen == read)
	if read.Exists && known {
		rev = b.seenRev
	}
	holder := b.holder
	b.mu.Unlock()
	if !known {
		resp, err := b.client.Get(ctx, b.StateKey())
		if err != nil {
			return fmt.Errorf("write state %s: %w", b.name(), err)
		}
		current = first(resp.Kvs)
	}

	for attempt := 0; ; attempt++ {
		if !known {
			stored, err := b.storedHeader(current)
			if err != nil {
				return fmt.Errorf("write state: %w", err)
			}
			if err := conflict(b.name(), stored, read); err != nil {
				return err
			}
			rev = 0
			if current != nil {
				rev = current.ModRevision
			}
			if attempt >= maxWriteAttempts {
				return &state.ConflictError{State: b.name(), Kind: state.ErrSerialMoved, Stored: stored, Read: read}
			}
		}
		cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(b.StateKey()), "=", rev)}
		orElse := []clientv3.Op{clientv3.OpGet(b.StateKey())}
		if holder != nil {
			cmps = append(cmps, holder.owns())
			orElse = append(orElse, clientv3.OpGet(holder.key))
		}
		if fence != nil {
			cmps = append(cmps, fence.Cmp())
			orElse = append(orElse, clientv3.OpGet(fence.Key))
		}
		resp, err := b.client.Txn(ctx).If(cmps...).Then(clientv3.OpPut(b.StateKey(), string(data))).Else(orElse...).Commit()
		if errors.Is(err, rpctypes.ErrRequestTooLarge) {
			return fmt.Errorf("write state %s: the document is %d bytes, more than the etcd server accepts (raise its --max-request-bytes): %w", b.name(), len(data), err)
		}
		if err != nil {
			return fmt.Errorf("write state %s: %w", b.name(), err)
		}
		if resp.Succeeded {
			b.remember(resp.Header.Revision, state.Header{Exists: true, Lineage: doc.Lineage, Serial: next.Serial})
			doc.Serial = next.Serial
			doc.Version = next.Version
			return nil
		}
		// Which condition failed? Leadership and lock first: a deposed
		// writer must hear that, not a serial conflict it caused.
		i := 1
		if holder != nil {
			if kv := first(resp.Responses[i].GetResponseRange().Kvs); kv == nil || kv.CreateRevision != holder.rev {
				return &LockLostError{State: b.name(), Key: holder.key}
			}
			i++
		}
		if fence != nil {
			var now int64
			if kv := first(resp.Responses[i].GetResponseRange().Kvs); kv != nil {
				now = kv.CreateRevision
			}
			if now != fence.Revision {
				return &FencedError{State: b.name(), Fence: *fence, Current: now}
			}
		}
		current = first(resp.Responses[0].GetResponseRange().Kvs)
		known = false
	}
}

func first(kvs []*mvccpb.KeyValue) *mvccpb.KeyValue {
	if len(kvs) == 0 {
		return nil
	}
	return kvs[0]
}

// storedHeader validates what is stored (nil: nothing) and returns its
// header. A document Read would refuse is an error, so it is never
// overwritten.
func (b *Backend) storedHeader(kv *mvccpb.KeyValue) (state.Header, error) {
	if kv == nil {
		return state.Header{}, nil
	}
	b.mu.Lock()
	if b.seenRev == kv.ModRevision && b.seenRev > 0 {
		h := b.seen
		b.mu.Unlock()
		return h, nil
	}
	b.mu.Unlock()
	doc, err := state.Decode(b.name(), kv.Value)
	if err != nil {
		return state.Header{}, err
	}
	h := header(doc)
	b.remember(kv.ModRevision, h)
	return h, nil
}

// conflict is the compare-and-swap decision, the same as the local
// backend's: nil when a document read at read may replace stored.
func conflict(name string, stored, read state.Header) error {
	switch {
	case stored.Exists && !read.Exists:
		return &state.ConflictError{State: name, Kind: state.ErrSerialMoved, Stored: stored, Read: read}
	case stored.Exists && stored.Lineage != read.Lineage:
		return &state.ConflictError{State: name, Kind: state.ErrLineage, Stored: stored, Read: read}
	case stored.Serial != read.Serial:
		return &state.ConflictError{State: name, Kind: state.ErrSerialMoved, Stored: stored, Read: read}
	}
	return nil
}

// Create stores doc exactly as it is — its serial too — where nothing is
// stored yet: how `init -migrate-state` brings a state in without changing
// its identity. Anything stored is a *state.ConflictError (ErrLineage for
// another state, ErrSerialMoved for this one).
func (b *Backend) Create(ctx context.Context, doc *state.Document) error {
	if doc == nil || doc.IsNew() {
		return errors.New("create state: the document was never stored (serial 0); use Write")
	}
	data, err := state.Encode(doc)
	if err != nil {
		return fmt.Errorf("create state: %w", err)
	}
	if _, err := state.Decode(b.name(), data); err != nil {
		return fmt.Errorf("create state: %w", err)
	}
	ctx, cancel := graceful(ctx)
	defer cancel()
	resp, err := b.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(b.StateKey()), "=", 0)).
		Then(clientv3.OpPut(b.StateKey(), string(data))).
		Else(clientv3.OpGet(b.StateKey())).Commit()
	if err != nil {
		return fmt.Errorf("create state %s: %w", b.name(), err)
	}
	if resp.Succeeded {
		b.remember(resp.Header.Revision, header(doc))
		return nil
	}
	stored, err := b.storedHeader(first(resp.Responses[0].GetResponseRange().Kvs))
	if err != nil {
		return fmt.Errorf("create state: %w", err)
	}
	kind := state.ErrSerialMoved
	if stored.Lineage != doc.Lineage {
		kind = state.ErrLineage
	}
	return &state.ConflictError{State: b.name(), Kind: kind, Stored: stored, Read: header(doc)}
}

// MoveAside moves the stored document to MigratedKey, in one transaction
// conditioned on it still being doc (same lineage and serial): the source
// side of a migration out of etcd, kept as a backup. A previous backup is
// replaced.
func (b *Backend) MoveAside(ctx context.Context, doc *state.Document) error {
	resp, err := b.client.Get(ctx, b.StateKey())
	if err != nil {
		return fmt.Errorf("move state %s aside: %w", b.name(), err)
	}
	kv := first(resp.Kvs)
	stored, err := b.storedHeader(kv)
	if err != nil {
		return fmt.Errorf("move state aside: %w", err)
	}
	if err := conflict(b.name(), stored, header(doc)); err != nil {
		return err
	}
	tr, err := b.client.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(b.StateKey()), "=", kv.ModRevision)).
		Then(clientv3.OpPut(b.MigratedKey(), string(kv.Value)), clientv3.OpDelete(b.StateKey())).
		Commit()
	if err != nil {
		return fmt.Errorf("move state %s aside: %w", b.name(), err)
	}
	if !tr.Succeeded {
		return &state.ConflictError{State: b.name(), Kind: state.ErrSerialMoved, Stored: stored, Read: header(doc)}
	}
	return nil
}

// ClusterID identifies the etcd cluster behind the client, so two backend
// configurations that name the same cluster differently can be told apart
// from two clusters.
func (b *Backend) ClusterID(ctx context.Context) (uint64, error) {
	resp, err := b.client.Get(ctx, b.StateKey(), clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("etcd: %w", err)
	}
	return resp.Header.ClusterId, nil
}
