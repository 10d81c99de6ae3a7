package ownership

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/infrakit/infrakit/internal/election"
	"github.com/infrakit/infrakit/internal/state/etcd/etcdtest"
	"github.com/infrakit/infrakit/internal/state/etcd/etcdtest/embedded"
	"github.com/infrakit/infrakit/internal/testwait"
)

// One embedded etcd serves every test (goleak runs after them, in
// RunTests); each test works under a prefix of its own, and each member
// has a client of its own, as separate processes would.
var endpoints []string

func TestMain(m *testing.M) {
	os.Exit(embedded.RunTests(m, func(eps []string) { endpoints = eps }))
}

// newClient connects to the shared server (or eps); it is closed at cleanup.
func newClient(t *testing.T, eps ...string) *clientv3.Client {
	if len(eps) == 0 {
		eps = endpoints
	}
	return etcdtest.Client(t, eps)
}

// prefix is a key prefix of the test's own.
func prefix(t *testing.T) string { return etcdtest.Prefix(t) }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// join starts a session of its own client under the test's prefix (TTL
// 2s); it leaves at cleanup.
func join(t *testing.T, identity string) *Session {
	t.Helper()
	return joinWith(t, newClient(t), identity, Options{TTL: 2 * time.Second})
}

// joinWith joins through client with opts, under the test's prefix.
func joinWith(t *testing.T, client *clientv3.Client, identity string, opts Options) *Session {
	t.Helper()
	opts.Prefix = prefix(t)
	s, err := Join(ctxT(t), client, opts, identity)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Leave(ctx)
	})
	return s
}

func objectsN(n int) []Object {
	out := make([]Object, n)
	for i := range out {
		out[i] = Object{Kind: KindGroup, Name: fmt.Sprintf("g%d", i)}
	}
	return out
}

// tracker records the hooks of every member. It fails the test when an
// object is acquired while another member still acts on it (has not
// returned from Releasing).
type tracker struct {
	t        *testing.T
	mu       sync.Mutex
	acting   map[Object]string
	acquired map[Object]int // acquisitions per object
	strict   bool           // check that nobody acts on an object twice
}

func newTracker(t *testing.T) *tracker {
	return &tracker{t: t, acting: map[Object]string{}, acquired: map[Object]int{}, strict: true}
}

func (tr *tracker) hooks(member string) Hooks {
	return Hooks{
		Acquired: func(o Object, f election.Fence) {
			tr.mu.Lock()
			defer tr.mu.Unlock()
			if other, ok := tr.acting[o]; ok && tr.strict {
				tr.t.Errorf("%s acquired %s (%s) while %s acts on it", member, o, f, other)
			}
			tr.acting[o] = member
			tr.acquired[o]++
		},
		Releasing: func(o Object) {
			tr.mu.Lock()
			defer tr.mu.Unlock()
			if tr.acting[o] == member {
				delete(tr.acting, o)
			}
		},
	}
}

func (tr *tracker) acquisitions() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n := 0
	for _, c := range tr.acquired {
		n += c
	}
	return n
}

// member is a session and its running balancer.
type member struct {
	s      *Session
	b      *Balancer
	cancel context.CancelFunc
	done   chan error
}

// startMember joins and runs a balancer over objects; it is stopped at
// cleanup (before its session leaves).
func startMember(t *testing.T, tr *tracker, identity string, objects []Object) *member {
	t.Helper()
	return startMemberWith(t, newClient(t), Options{TTL: 2 * time.Second}, tr, identity, objects)
}

// startMemberWith is startMember through client, with opts.
func startMemberWith(t *testing.T, client *clientv3.Client, opts Options, tr *tracker, identity string, objects []Object) *member {
	t.Helper()
	s := joinWith(t, client, identity, opts)
	ctx, cancel := context.WithCancel(context.Background())
	m := &member{s: s, b: NewBalancer(s, func() []Object { return objects }, tr.hooks(identity)), cancel: cancel, done: make(chan error, 1)}
	go func() { m.done <- m.b.Run(ctx) }()
	t.Cleanup(func() { m.stop(t) })
	return m
}

// stop ends Run and returns what it returned (once; later calls return
// nil).
func (m *member) stop(t *testing.T) error {
	m.cancel()
	select {
	case err, ok := <-m.done:
		if ok {
			close(m.done)
		}
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("Balancer.Run did not return")
		return nil
	}
}

// settled waits until the running members hold all objects between
// them, each its quota (loads within one of each other), every object
// once, and etcd shows exactly those owners.
func settled(t *testing.T, objects []Object, members ...*member) {
	t.Helper()
	testwait.For(t, 30*time.Second, "the members to settle on a balanced share", func() bool {
		seen := map[Object]bool{}
		lo, hi := len(objects), 0
		for _, m := range members {
			h := m.b.Held()
			lo, hi = min(lo, len(h)), max(hi, len(h))
			for o := range h {
				if seen[o] {
					return false
				}
				seen[o] = true
			}
		}
		if len(seen) != len(objects) || hi-lo > 1 {
			return false
		}
		v, err := members[0].s.View(context.Background())
		if err != nil || len(v.Owners) != len(objects) || len(v.Members) != len(members) {
			return false
		}
		for _, m := range members {
			for o, f := range m.b.Held() {
				if ow := v.Owners[o]; ow.Member != m.s.ID() || ow.Fence != f {
					return false
				}
			}
		}
		return true
	})
}
