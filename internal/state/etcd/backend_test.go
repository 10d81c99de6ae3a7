package etcd

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/election"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/internal/state/etcd/etcdtest"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// storedValue is the raw value of the state's head ("" when absent).
func storedValue(t *testing.T, b *Backend) string {
	t.Helper()
	resp, err := b.Client().Get(ctxT(t), b.StateKey())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return ""
	}
	return string(resp.Kvs[0].Value)
}

func TestRoundTrip(t *testing.T) {
	ctx := ctxT(t)
	b := newBackend(t)
	doc, err := b.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !doc.IsNew() || doc.Lineage == "" || doc.Version != state.FormatVersion {
		t.Fatalf("empty backend reads %+v, want a new document", doc)
	}
	addMarker(doc, "a")
	doc.Group("miners").Instances = []state.Instance{{ID: "i-1", LogicalID: "10.0.0.1", ConfigHash: "h", State: "running", Address: "10.0.0.1:80"}}
	if err := b.Write(ctx, doc); err != nil {
		t.Fatal(err)
	}
	if doc.Serial != 1 {
		t.Fatalf("serial after first write = %d, want 1", doc.Serial)
	}
	// One key per group, a chunk each, the stack's part and the head.
	resp, err := b.Client().Get(ctx, prefix(t)+"/state/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, kv := range resp.Kvs {
		kinds[kindOf(string(kv.Key)[len(prefix(t)):])]++
	}
	if want := map[string]int{"head": 1, "meta": 1, "group": 2, "chunk": 2}; !reflect.DeepEqual(kinds, want) {
		t.Fatalf("stored keys by kind %v, want %v", kinds, want)
	}
	// A second backend (no cache) reads the same document.
	back, err := New(newClient(t), Options{Prefix: prefix(t)}).Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, doc) {
		t.Fatalf("read back %+v, want %+v", back, doc)
	}
	// Writes go on from what was read.
	addMarker(back, "b")
	if err := b.Write(ctx, back); err != nil {
		t.Fatal(err)
	}
	if back.Serial != 2 {
		t.Fatalf("serial = %d, want 2", back.Serial)
	}
}

func TestCompareAndSwap(t *testing.T) {
	ctx := ctxT(t)
	b1 := newBackend(t)
	b2 := New(newClient(t), Options{Prefix: prefix(t)})

	doc, _ := b1.Read(ctx)
	stale := *doc
	for range 2 {
		if err := b1.Write(ctx, doc); err != nil {
			t.Fatal(err)
		}
	}

	tests := []struct {
		name string
		doc  func() *state.Document
		kind error
		msg  string
	}{
		{"new document over a stored one", func() *state.Document { d := stale; return &d },
			state.ErrSerialMoved, "was created by another writer (serial 2)"},
		{"other lineage", func() *state.Document { d := *doc; d.Lineage = state.NewLineage(); return &d },
			state.ErrLineage, "it is a different state"},
		{"stale serial", func() *state.Document { d := *doc; d.Serial = 1; return &d },
			state.ErrSerialMoved, "is at serial 2 but this document was read at serial 1"},
	}
	for _, tt := range tests {
		for name, b := range map[string]*Backend{"same backend": b1, "other backend": b2} {
			t.Run(tt.name+"/"+name, func(t *testing.T) {
				before := storedValue(t, b)
				d := tt.doc()
				serial := d.Serial
				err := b.Write(ctx, d)
				var ce *state.ConflictError
				if !errors.Is(err, tt.kind) || !errors.As(err, &ce) {
					t.Fatalf("Write = %v, want a *state.ConflictError matching %v", err, tt.kind)
				}
				if !strings.Contains(err.Error(), tt.msg) || !strings.Contains(err.Error(), b.Prefix()+"/state in etcd") {
					t.Errorf("message %q lacks %q or the key", err, tt.msg)
				}
				if d.Serial != serial {
					t.Errorf("a failed write changed the document's serial to %d", d.Serial)
				}
				if storedValue(t, b) != before {
					t.Error("a failed write changed the stored document")
				}
			})
		}
	}

	// Two writers that read the same serial: exactly one wins, through
	// either backend, and the loser reads "another writer changed it".
	d1, _ := b1.Read(ctx)
	d2, _ := b2.Read(ctx)
	if err := b2.Write(ctx, d2); err != nil {
		t.Fatal(err)
	}
	err := b1.Write(ctx, d1) // b1's cache still says serial 2 is current
	if !errors.Is(err, state.ErrSerialMoved) || !strings.Contains(err.Error(), "is at serial 3 but this document was read at serial 2") {
		t.Fatalf("stale write = %v", err)
	}
}

// TestRefusals stores documents the local backend refuses: etcd refuses
// them alike, on read and on write, and never overwrites them.
func TestRefusals(t *testing.T) {
	ctx := ctxT(t)
	tests := []struct {
		name, value, reason string
	}{
		{"empty", "", "is empty"},
		{"truncated", `{"version": 1, "serial": 3, "lin`, "is truncated"},
		{"not JSON", "lineage: x", "is not valid JSON"},
		{"newer format", `{"version": 99, "serial": 3, "lineage": "x"}`, "newer infrakit (format 99)"},
		{"no lineage", `{"version": 1, "serial": 3}`, `has no "lineage"`},
		{"serial 0", `{"version": 1, "serial": 0, "lineage": "x"}`, "has serial 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBackend(t)
			if _, err := b.Client().Put(ctx, b.StateKey(), tt.value); err != nil {
				t.Fatal(err)
			}
			_, err := b.Read(ctx)
			var inv *state.InvalidError
			if !errors.As(err, &inv) || !errors.Is(err, state.ErrInvalid) || !strings.Contains(err.Error(), tt.reason) {
				t.Fatalf("Read = %v, want an *InvalidError saying %q", err, tt.reason)
			}
			for _, doc := range []*state.Document{state.NewDocument(), {Version: 1, Serial: 3, Lineage: "x"}} {
				err := b.Write(ctx, doc)
				if !errors.Is(err, state.ErrInvalid) {
					t.Errorf("Write over it = %v, want ErrInvalid", err)
				}
			}
			if got := storedValue(t, b); got != tt.value {
				t.Errorf("refused document overwritten with %q", got)
			}
		})
	}

	// Documents that cannot be written at all.
	b := newBackend(t)
	for _, doc := range []*state.Document{nil, {Version: 1}, {Version: 2, Lineage: "x"}} {
		if err := b.Write(ctx, doc); err == nil {
			t.Errorf("Write(%+v) succeeded", doc)
		}
	}
}

// TestWriteAfterInterrupt: a write whose ctx is already done still goes
// through, so state can be saved after Ctrl-C.
func TestWriteAfterInterrupt(t *testing.T) {
	b := newBackend(t)
	doc, _ := b.Read(ctxT(t))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.Write(ctx, doc); err != nil {
		t.Fatalf("Write with a cancelled ctx: %v", err)
	}
	if doc.Serial != 1 {
		t.Fatalf("serial %d", doc.Serial)
	}
}

// TestWriteCutOff: with the network to etcd cut, a write fails when its
// ctx ends instead of hanging.
func TestWriteCutOff(t *testing.T) {
	proxy, err := etcdtest.NewProxy(endpoints[0])
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	b := New(newClient(t, proxy.Endpoint()), Options{Prefix: prefix(t)})
	doc, err := b.Read(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy.Cut()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = b.Write(ctx, doc)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Fatalf("Write cut off = %v after %s", err, time.Since(start))
	}
	proxy.Restore()
}

func TestCreateAndMoveAside(t *testing.T) {
	ctx := ctxT(t)
	b := newBackend(t)
	doc := state.NewDocument()
	doc.Serial = 7
	addMarker(doc, "m")
	if err := b.Create(ctx, doc); err != nil {
		t.Fatal(err)
	}
	back, err := b.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, doc) {
		t.Fatalf("created %+v, read %+v", doc, back)
	}
	if err := b.Create(ctx, doc); !errors.Is(err, state.ErrSerialMoved) {
		t.Errorf("Create over the same state = %v, want ErrSerialMoved", err)
	}
	other := state.NewDocument()
	other.Serial = 1
	if err := b.Create(ctx, other); !errors.Is(err, state.ErrLineage) {
		t.Errorf("Create over another state = %v, want ErrLineage", err)
	}
	if err := b.Create(ctx, state.NewDocument()); err == nil {
		t.Error("Create of a never-stored document succeeded")
	}

	// Moving aside checks it is still the same document.
	if err := b.MoveAside(ctx, other); !errors.Is(err, state.ErrLineage) {
		t.Errorf("MoveAside of another state = %v", err)
	}
	if err := b.MoveAside(ctx, doc); err != nil {
		t.Fatal(err)
	}
	if v := storedValue(t, b); v != "" {
		t.Errorf("state key still holds %q", v)
	}
	kept, err := b.load(ctx, b.backup(), false)
	if err != nil || !reflect.DeepEqual(kept.doc, doc) {
		t.Errorf("kept %+v (%v), want %+v", kept, err, doc)
	}
	// Nothing of the live state is left.
	if resp, err := b.Client().Get(ctx, prefix(t)+"/state/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || resp.Count != 0 {
		t.Errorf("%d keys left under the state (%v)", resp.Count, err)
	}
	if _, err := b.ClusterID(ctx); err != nil {
		t.Error(err)
	}
}

// TestFencedWrite: a leader's writes carry its fence; once another leads,
// the old leader's fenced writes fail and store nothing.
func TestFencedWrite(t *testing.T) {
	ctx := ctxT(t)
	c := newClient(t)
	b := New(c, Options{Prefix: prefix(t)})
	el := election.New(c, election.Options{Prefix: prefix(t), TTL: 2 * time.Second})

	first, err := el.Campaign(ctx, "first")
	if err != nil {
		t.Fatal(err)
	}
	old := first.Fence()
	doc, _ := b.Read(ctx)
	if err := b.WriteFenced(ctx, doc, old); err != nil {
		t.Fatalf("leader's fenced write: %v", err)
	}

	if err := first.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	second, err := el.Campaign(ctx, "second")
	if err != nil {
		t.Fatal(err)
	}
	defer second.Resign(ctx)

	before := storedValue(t, b)
	addMarker(doc, "from the deposed leader")
	err = b.Fenced(old).Write(ctx, doc)
	var fe *FencedError
	if !errors.Is(err, ErrFenced) || !errors.As(err, &fe) || fe.Current != 0 {
		t.Fatalf("deposed leader's write = %v, want a *FencedError", err)
	}
	if !strings.Contains(err.Error(), "no longer the leader") {
		t.Errorf("message: %v", err)
	}
	if doc.Serial != 1 || storedValue(t, b) != before {
		t.Fatal("a fenced-off write changed something")
	}
	// The fence is checked before the serial: a deposed leader with a stale
	// document hears that it is deposed.
	stale := state.NewDocument()
	if err := b.WriteFenced(ctx, stale, old); !errors.Is(err, ErrFenced) {
		t.Errorf("deposed leader's stale write = %v, want ErrFenced", err)
	}
	if err := b.WriteFenced(ctx, doc, second.Fence()); err != nil {
		t.Fatalf("new leader's write: %v", err)
	}
	if err := b.WriteFenced(ctx, doc, election.Fence{}); err == nil {
		t.Error("a write with an empty fence succeeded")
	}
}

func TestOpenStore(t *testing.T) {
	dir := t.TempDir()
	s, closeFn, err := OpenStore(nil, filepath.Join(dir, "infrakit.state.json"))
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := s.(*state.Local); !ok || l.Path() != filepath.Join(dir, "infrakit.state.json") {
		t.Errorf("OpenStore(nil) = %T %v", s, s)
	}
	closeFn()

	s, closeFn, err = OpenStore(&config.Backend{Type: config.BackendEtcd, Endpoints: endpoints, Prefix: prefix(t), LeaseTTL: config.Duration(2 * time.Second)}, "unused")
	if err != nil {
		t.Fatal(err)
	}
	b, ok := s.(*Backend)
	if !ok || b.Prefix() != prefix(t) || b.LeaseTTL() != 2*time.Second {
		t.Fatalf("OpenStore(etcd) = %T %+v", s, s)
	}
	if _, err := lockedIncrement(s, "x"); err != nil {
		t.Fatal(err)
	}
	if err := closeFn(); err != nil {
		t.Fatal(err)
	}

	if _, _, err := OpenStore(&config.Backend{Type: "consul"}, "x"); err == nil {
		t.Error("OpenStore(consul) succeeded")
	}
}

// leaseOf returns the lease of the oldest key under pfx.
func leaseOf(t *testing.T, c *clientv3.Client, pfx string) clientv3.LeaseID {
	t.Helper()
	resp, err := c.Get(ctxT(t), pfx+"/", clientv3.WithFirstCreate()...)
	if err != nil || len(resp.Kvs) == 0 {
		t.Fatalf("no key under %s (%v)", pfx, err)
	}
	return clientv3.LeaseID(resp.Kvs[0].Lease)
}

// TestTooLarge: a document over etcd's request limit fails with a hint.
func TestTooLarge(t *testing.T) {
	b := newBackend(t)
	doc := state.NewDocument()
	addMarker(doc, strings.Repeat("x", 1700*1024))
	err := b.Write(ctxT(t), doc)
	if err == nil || !strings.Contains(err.Error(), "--max-request-bytes") {
		t.Fatalf("oversized write = %v", err)
	}
	if doc.Serial != 0 {
		t.Error("a failed write changed the serial")
	}
}
