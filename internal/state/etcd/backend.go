// Package etcd is the etcd state backend: the same state document as the
// local backend (the same validation and refusals), stored split per
// object so that no request grows with the stack, written with
// compare-and-swap transactions, locked with an etcd lease, and optionally
// fenced by leases' keys (package election's leader key, per-object owner
// keys) so that a deposed writer's writes fail.
//
// Keys, under a stack's prefix P (say /infrakit/mystack):
//
//	P/state/head                 the document's version, serial and lineage,
//	                             and the hash of each part below (JSON): the
//	                             one key every write swaps, by compare-and-swap
//	                             on its mod revision
//	P/state/meta/<hash>          the desired stack and the outputs
//	P/state/group/<name>/<hash>  a group's record: its flags and the hashes
//	                             of its instance list's chunks, in order
//	P/state/chunk/<name>/<hash>  a run of a group's instances (JSON array),
//	                             cut where an instance ID's hash says
//	                             (content-defined: one changed instance
//	                             changes one chunk)
//	P/state/ingress/<name>/<hash>, P/state/enrollment/<name>/<hash>
//	                             an ingress's or enrollment's record
//	P/state/writing/<lease>      a write of more than one request under way
//	                             (on a lease): holds off garbage collection
//	P/state                      the whole document as one value: the layout
//	                             of older infrakit; `init -migrate-state`
//	                             moves it to the split layout
//	P/state.migrated             the one-value document `init -migrate-state`
//	                             moved, kept as a backup; P/state.migrated/...
//	                             a split-layout backup of a state moved out
//	P/lock/<lease>               lock holders and waiters (concurrency.Mutex);
//	                             the holder's key holds its state.LockInfo
//	P/leader/<lease>             leader election (package election)
//
// Every part but the head is named by the hash of its value and never
// changes: a write puts the parts the stored document lacks and then, in
// one transaction, swaps the head and deletes the parts no longer referred
// to. A reader sees the head at one revision and the parts it names as of
// that revision, so it always sees one whole document; a writer that dies
// between requests leaves only unreferenced parts, which a later write
// collects.
package etcd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
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

// Backend is a state.Store in etcd. It is safe for concurrent use.
type Backend struct {
	client *clientv3.Client
	owned  bool // Close closes client
	prefix string
	ttl    time.Duration

	mu sync.Mutex
	// holder is the lock held through this Backend, if any: writes are
	// then conditioned on still holding it.
	holder *lockHolder
	// seen is the header of the document whose head has mod revision
	// seenRev, and seenRefs its parts: a write that starts from it needs
	// no read first, and sends only the parts that changed.
	seen     state.Header
	seenRev  int64
	seenRefs map[string]bool
	cache    cache
	// stats is the running write's; lastWrite the last successful one's.
	stats, lastWrite WriteStats
	writes           int
	// interrupt, set by tests, is called before each request a write
	// makes; an error stops the write there.
	interrupt func() error
}

var (
	_ state.Store       = (*Backend)(nil)
	_ state.Revalidator = (*Backend)(nil)
)

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
	return &Backend{client: client, prefix: prefix, ttl: ttl, cache: newCache()}
}

// Client is the etcd client (for an election on the same connection).
func (b *Backend) Client() *clientv3.Client { return b.client }

// Prefix is the stack's key prefix.
func (b *Backend) Prefix() string { return b.prefix }

// StateKey is the state's head: the key every write swaps.
func (b *Backend) StateKey() string { return b.live().head() }

// LegacyKey is where infrakit before the split layout stored the whole
// document as one value.
func (b *Backend) LegacyKey() string { return b.prefix + "/state" }

// MigratedKey is where a moved-out state is kept: the one-value document
// MigrateLayout moved, or (under MigratedKey()+"/") the split-layout tree
// MoveAside moved.
func (b *Backend) MigratedKey() string { return b.prefix + "/state.migrated" }

// LockKey is the lock's key prefix (holders are LockKey()+"/<lease>").
func (b *Backend) LockKey() string { return b.prefix + "/lock" }

// LeaseTTL is the lock lease's TTL.
func (b *Backend) LeaseTTL() time.Duration { return b.ttl }

func (b *Backend) live() keys   { return keys{root: b.prefix + "/state"} }
func (b *Backend) backup() keys { return keys{root: b.MigratedKey()} }

// Close closes the client if Open made it.
func (b *Backend) Close() error {
	if b.owned {
		return b.client.Close()
	}
	return nil
}

// name is the state's name in messages.
func (b *Backend) name() string { return b.prefix + "/state in etcd" }

// Write stores doc with compare-and-swap on its lineage and serial; see
// state.Store. It sends only the parts of doc that differ from the
// document it was read or last written at (when this Backend read or
// wrote it; otherwise it reads the stored state first), and deletes the
// parts no longer referred to. While a lock taken through this Backend is
// held, the write is also conditioned on still holding it, so a holder
// whose lease expired (paused, cut off) cannot write: the error matches
// ErrLockLost. ctx bounds only the network wait: when ctx is already done
// the write is still tried, for at most WriteGrace, so state can be saved
// after an interrupt.
func (b *Backend) Write(ctx context.Context, doc *state.Document) error {
	return b.write(ctx, doc, nil)
}

// WriteFenced is Write conditioned also on every fence: it fails with an
// error matching ErrFenced (a *FencedError naming the first fence found
// fallen) and stores nothing once any of the leases the fences stand for
// has ended.
func (b *Backend) WriteFenced(ctx context.Context, doc *state.Document, fences ...election.Fence) error {
	if len(fences) == 0 {
		return errors.New("write state: no fence")
	}
	for _, f := range fences {
		if f.IsZero() {
			return errors.New("write state: empty fence")
		}
	}
	return b.write(ctx, doc, fences)
}

// Fenced is this Backend as a state.Store whose every Write is
// WriteFenced(fences...): what a leader (or an object's owner) hands to
// the code that acts for it.
func (b *Backend) Fenced(fences ...election.Fence) state.Store {
	return fenced{b: b, fences: fences}
}

type fenced struct {
	b      *Backend
	fences []election.Fence
}

var _ state.Revalidator = fenced{}

func (f fenced) Read(ctx context.Context) (*state.Document, error) { return f.b.Read(ctx) }
func (f fenced) Write(ctx context.Context, doc *state.Document) error {
	return f.b.WriteFenced(ctx, doc, f.fences...)
}
func (f fenced) Lock(ctx context.Context, info state.LockInfo) (func() error, error) {
	return f.b.Lock(ctx, info)
}
func (f fenced) Unchanged(ctx context.Context, h state.Header) (bool, error) {
	return f.b.Unchanged(ctx, h)
}

func header(doc *state.Document) state.Header {
	return state.Header{Exists: true, Lineage: doc.Lineage, Serial: doc.Serial}
}

func (b *Backend) remember(rev int64, h state.Header, refs map[string]bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if rev >= b.seenRev {
		b.seen, b.seenRev, b.seenRefs = h, rev, refs
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
// change but whose head did (a rewrite of the same serial).
const maxWriteAttempts = 5

func checkWritable(doc *state.Document) error {
	switch {
	case doc == nil:
		return errors.New("write state: nil document")
	case doc.Lineage == "":
		return errors.New("write state: document has no lineage (start from Read or NewDocument)")
	case doc.Version > state.FormatVersion:
		return fmt.Errorf("write state: document is format %d; this build writes format %d", doc.Version, state.FormatVersion)
	}
	return nil
}

func (b *Backend) write(ctx context.Context, doc *state.Document, fences []election.Fence) error {
	if err := checkWritable(doc); err != nil {
		return err
	}
	next := *doc
	next.Version = state.FormatVersion
	next.Serial = doc.Serial + 1
	ctx, cancel := graceful(ctx)
	defer cancel()

	read := state.Header{Exists: !doc.IsNew(), Lineage: doc.Lineage, Serial: doc.Serial}
	b.mu.Lock()
	b.stats = WriteStats{}
	// rev is the mod revision the head must still have (0: absent), base
	// the parts it refers to.
	var rev int64
	var base map[string]bool
	known := !read.Exists || (b.seenRev > 0 && b.seen == read)
	if read.Exists && known {
		rev, base = b.seenRev, b.seenRefs
	}
	c := conds{holder: b.holder, fences: fences}
	b.mu.Unlock()

	for attempt := 0; ; attempt++ {
		if !known {
			// Start from the stored state, checked whole: a state Read
			// would refuse is never overwritten.
			l, err := b.load(ctx, b.live(), true)
			if err != nil {
				return fmt.Errorf("write state: %w", err)
			}
			stored := state.Header{}
			if l.rev > 0 {
				stored = header(l.doc)
				b.remember(l.rev, stored, l.refs)
			}
			if err := conflict(b.name(), stored, read); err != nil {
				return err
			}
			if attempt >= maxWriteAttempts {
				return &state.ConflictError{State: b.name(), Kind: state.ErrSerialMoved, Stored: stored, Read: read}
			}
			rev, base = l.rev, l.refs
		}
		b.mu.Lock()
		cached := b.cache.chunks
		e, err := encode(b.live(), &next, base, func(key string) []state.Instance { return cached[key] })
		b.mu.Unlock()
		if err != nil {
			return fmt.Errorf("write state: %w", err)
		}
		newRev, f, err := b.commit(ctx, b.live(), e, base, rev, c)
		if err != nil {
			return err
		}
		if f == nil {
			b.written(ctx, e, newRev, header(&next))
			doc.Serial = next.Serial
			doc.Version = next.Version
			return nil
		}
		if f.err != nil {
			return f.err
		}
		stored, err := b.storedHeader(f)
		if err != nil {
			return fmt.Errorf("write state: %w", err)
		}
		if err := conflict(b.name(), stored, read); err != nil {
			return err
		}
		known = false
	}
}

// storedHeader is the header of what a failed commit found stored.
func (b *Backend) storedHeader(f *failure) (state.Header, error) {
	if f.head == nil {
		if f.legacy {
			return state.Header{}, &OldLayoutError{State: b.LegacyKey() + " in etcd"}
		}
		return state.Header{}, nil
	}
	d, err := decodeHead(b.StateKey()+" in etcd", f.head.value)
	if err != nil {
		return state.Header{}, err
	}
	return state.Header{Exists: true, Lineage: d.Lineage, Serial: d.Serial}, nil
}

// written records a successful write: the head it made, its parts (decoded,
// in the cache) and its statistics; every sweepEvery writes it sweeps.
func (b *Backend) written(ctx context.Context, e *encoded, rev int64, h state.Header) {
	b.mu.Lock()
	for key, ins := range e.chunks {
		b.cache.chunks[key] = ins
	}
	for key, rec := range e.groups {
		b.cache.groups[key] = rec
	}
	for _, p := range e.parts {
		if !b.cache.has(p.key) {
			b.cache.raw[p.key] = p.value
		}
	}
	b.cache.prune(e.refs)
	b.lastWrite = b.stats
	b.writes++
	sweep := b.writes%sweepEvery == 0 || b.stats.large
	b.mu.Unlock()
	b.remember(rev, h, e.refs)
	if sweep {
		b.sweep(ctx, b.live(), e.refs, rev)
	}
}

func first(kvs []*mvccpb.KeyValue) *mvccpb.KeyValue {
	if len(kvs) == 0 {
		return nil
	}
	return kvs[0]
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
