package etcd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"pgregory.net/rapid"

	"github.com/infrakit/infrakit/internal/election"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/internal/state/etcd/etcdtest"
)

// realServer is a real etcd process with its default request limits
// (--max-request-bytes 1.5 MiB, --max-txn-ops 128), stopped at cleanup.
func realServer(t *testing.T) []string {
	t.Helper()
	if _, err := os.Stat(etcdtest.RealBinary); err != nil {
		t.Skipf("%s is absent (apt-get install etcd-server; .ci/run installs it): %v", etcdtest.RealBinary, err)
	}
	srv, err := etcdtest.StartProcess(etcdtest.RealBinary, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv.Endpoints
}

// bigDoc is a document of n instances spread over groups groups.
func bigDoc(groups, n int) *state.Document {
	doc := state.NewDocument()
	for g := range groups {
		ins := make([]state.Instance, 0, n/groups)
		for i := g * (n / groups); i < (g+1)*(n/groups); i++ {
			ins = append(ins, instance(i))
		}
		doc.Group(fmt.Sprintf("g%d", g)).Instances = ins
	}
	doc.Ingresses = map[string]*state.ControllerStatus{"lb": {}}
	return doc
}

// keysUnder counts the keys under the state's prefix.
func keysUnder(t *testing.T, c *clientv3.Client, pfx string) int64 {
	t.Helper()
	resp, err := c.Get(ctxT(t), pfx+"/state/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Count
}

// TestHundredThousand writes a document of 100,000 instances (in 10
// groups, and in one) to a real etcd with its default limits — the first
// write takes several requests, none over 1 MiB — reads it back whole
// through another Backend, changes one instance and checks that the write
// sends only that instance's chunk, its group's record and the head, in
// one request; and that a warm re-read sees the change.
func TestHundredThousand(t *testing.T) {
	eps := realServer(t)
	for _, groups := range []int{10, 1} {
		t.Run(fmt.Sprintf("%d groups", groups), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			pfx := fmt.Sprintf("/big/%d", groups)
			w := New(newClient(t, eps...), Options{Prefix: pfx})
			doc := bigDoc(groups, 100_000)
			if err := w.Write(ctx, doc); err != nil {
				t.Fatal(err)
			}
			first := w.LastWrite()
			if first.Requests < 2 || first.MaxRequest >= 1<<20 {
				t.Fatalf("first write: %+v, want several requests of less than 1 MiB each", first)
			}
			t.Logf("first write: %d requests, %d bytes, largest request %d bytes", first.Requests, first.Bytes, first.MaxRequest)

			r := New(newClient(t, eps...), Options{Prefix: pfx})
			start := time.Now()
			got, err := r.Read(ctx)
			cold := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, doc) {
				t.Fatal("the document read back differs from the one written")
			}

			g := got.Groups["g0"]
			g.Instances[len(g.Instances)/2].State = "stopping"
			if err := r.Write(ctx, got); err != nil {
				t.Fatal(err)
			}
			one := r.LastWrite()
			if one.Requests != 1 || one.Puts != 3 || one.Deletes != 2 || one.Bytes > 64<<10 {
				t.Fatalf("one changed instance: %+v, want one request putting a chunk, a group record and the head, deleting the old chunk and record", one)
			}
			start = time.Now()
			back, err := w.Read(ctx)
			warm := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, got) {
				t.Fatal("the re-read document differs from the one written")
			}
			start = time.Now()
			if _, err := New(newClient(t, eps...), Options{Prefix: pfx}).Read(ctx); err != nil {
				t.Fatal(err)
			}
			t.Logf("one changed instance: %d bytes in %d request; read of 100,000: cold %s (then %s), warm after the change %s",
				one.Bytes, one.Requests, cold.Round(time.Millisecond), time.Since(start).Round(time.Millisecond), warm.Round(time.Millisecond))
			// Nothing is left over: the head and the parts it refers to.
			if n := keysUnder(t, w.Client(), pfx); n != int64(len(r.seenRefs)+1) {
				t.Errorf("%d keys under the state, want %d", n, len(r.seenRefs)+1)
			}
			// A part nobody refers to (a dead writer's) is swept, on this
			// etcd too (the sweep's condition is a range compare).
			if _, err := w.Client().Put(ctx, r.live().part(kindChunk, "g0", strings.Repeat("0", 32)), "[]"); err != nil {
				t.Fatal(err)
			}
			r.sweep(ctx, r.live(), r.seenRefs, r.seenRev)
			if n := keysUnder(t, w.Client(), pfx); n != int64(len(r.seenRefs)+1) {
				t.Errorf("%d keys under the state after a sweep, want %d", n, len(r.seenRefs)+1)
			}
		})
	}
}

var errCrash = errors.New("crashed")

// TestCrashConsistency interrupts a write of several requests before any
// one of them, as a crash would, and checks that the state then reads as
// either the document before or the one written — never a mix, never
// refused — and that writing goes on from it, leaving no garbage once
// swept.
func TestCrashConsistency(t *testing.T) {
	defer func(b, o int) { txnMaxBytes, txnMaxOps = b, o }(txnMaxBytes, txnMaxOps)
	txnMaxBytes, txnMaxOps = 8<<10, 4 // many requests for small documents
	c := newClient(t)
	run := 0
	outcomes := map[string]int{}
	defer func() {
		// Both sides of the crash were reached, through writes of several
		// requests.
		if outcomes["old"] == 0 || outcomes["new"] == 0 || outcomes["large"] == 0 {
			t.Errorf("outcomes %v: the crashes did not cover both sides", outcomes)
		}
	}()
	rapid.Check(t, func(rt *rapid.T) {
		run++
		ctx := ctxT(t)
		pfx := fmt.Sprintf("%s/%d", prefix(t), run)
		w := New(c, Options{Prefix: pfx})
		old := genDoc(rt)
		old.Serial = 0
		if err := w.Write(ctx, old); err != nil {
			rt.Fatal(err)
		}
		next := genDoc(rt)
		next.Lineage, next.Serial = old.Lineage, old.Serial
		at := rapid.IntRange(0, 30).Draw(rt, "crash before request")
		n := 0
		w.interrupt = func() error {
			n++
			if n > at {
				return errCrash
			}
			return nil
		}
		want := canonical(rt, next)
		err := w.Write(ctx, next)
		w.interrupt = nil
		if err != nil && !errors.Is(err, errCrash) {
			rt.Fatal(err)
		}
		got, rerr := New(c, Options{Prefix: pfx}).Read(ctx)
		if rerr != nil {
			rt.Fatalf("after a crash before request %d: %v", at, rerr)
		}
		want.Serial = old.Serial + 1
		if w.stats.large {
			outcomes["large"]++
		}
		switch {
		case reflect.DeepEqual(got, want):
			outcomes["new"]++
		case err == nil:
			rt.Fatalf("the write succeeded but reads back as %+v", got)
		case !reflect.DeepEqual(got, canonical(rt, old)):
			rt.Fatalf("after a crash before request %d the state reads %+v, neither before %+v nor after %+v", at, got, old, want)
		default:
			outcomes["old"]++
		}
		// Writing goes on, and a sweep leaves only what the head names.
		r := New(c, Options{Prefix: pfx})
		cur, err := r.Read(ctx)
		if err != nil {
			rt.Fatal(err)
		}
		addMarker(cur, "after")
		if err := r.Write(ctx, cur); err != nil {
			rt.Fatal(err)
		}
		r.sweep(ctx, r.live(), r.seenRefs, r.seenRev)
		if n := keysUnder(t, c, pfx); n != int64(len(r.seenRefs)+1) {
			rt.Fatalf("%d keys under the state after a sweep, want %d", n, len(r.seenRefs)+1)
		}
	})
}

// putOldLayout stores, as an older infrakit did, a document at serial as
// one value under b's prefix, and returns it and the value.
func putOldLayout(t *testing.T, b *Backend, serial uint64) (*state.Document, []byte) {
	t.Helper()
	doc := state.NewDocument()
	doc.Serial = serial
	addMarker(doc, "old")
	data, err := state.Encode(doc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Client().Put(ctxT(t), b.LegacyKey(), string(data)); err != nil {
		t.Fatal(err)
	}
	return doc, data
}

// TestOldLayout: a state stored as one value by an older infrakit is
// refused by Read and Write, naming `infrakit init -migrate-state`;
// MigrateLayout moves it, keeping the one value as a backup, and is then
// idempotent; an interrupted migration finishes.
func TestOldLayout(t *testing.T) {
	ctx := ctxT(t)
	b := newBackend(t)
	doc, data := putOldLayout(t, b, 9)
	_, err := b.Read(ctx)
	if !errors.Is(err, ErrOldLayout) || !errors.Is(err, state.ErrInvalid) || !strings.Contains(err.Error(), `"infrakit init -migrate-state"`) {
		t.Fatalf("Read of a one-value state = %v", err)
	}
	for _, d := range []*state.Document{state.NewDocument(), doc} {
		if err := b.Write(ctx, d); !errors.Is(err, ErrOldLayout) {
			t.Errorf("Write over a one-value state = %v, want ErrOldLayout", err)
		}
	}
	if old, err := b.OldLayout(ctx); err != nil || !old {
		t.Fatalf("OldLayout = %v, %v", old, err)
	}

	m, err := MigrateLayout(ctx, b)
	if err != nil || !m.Moved || m.Resumed || m.Serial != 9 || m.Backup != b.MigratedKey()+" in etcd" {
		t.Fatalf("MigrateLayout = %+v, %v", m, err)
	}
	got, err := New(b.Client(), Options{Prefix: prefix(t)}).Read(ctx)
	if err != nil || !reflect.DeepEqual(got, doc) {
		t.Fatalf("after the migration: %+v, %v", got, err)
	}
	resp, err := b.Client().Get(ctx, b.MigratedKey())
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != string(data) {
		t.Fatalf("backup %v, %v", resp, err)
	}
	if v, _ := b.Client().Get(ctx, b.LegacyKey()); len(v.Kvs) != 0 {
		t.Error("the one value is still in place")
	}
	if m, err := MigrateLayout(ctx, b); err != nil || m.Moved {
		t.Fatalf("second MigrateLayout = %+v, %v", m, err)
	}

	// Interrupted after the split state was written (and written to since):
	// the one value is moved aside, the split state kept.
	addMarker(got, "since")
	if err := b.Write(ctx, got); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Client().Put(ctx, b.LegacyKey(), string(data)); err != nil {
		t.Fatal(err)
	}
	if m, err := MigrateLayout(ctx, b); err != nil || !m.Resumed || m.Serial != 10 {
		t.Fatalf("resumed MigrateLayout = %+v, %v", m, err)
	}
	if now, err := b.Read(ctx); err != nil || !reflect.DeepEqual(now, got) {
		t.Fatalf("after the resumed migration: %+v, %v", now, err)
	}
	// Another state in the one value is refused.
	other := state.NewDocument()
	other.Serial = 1
	odata, _ := state.Encode(other)
	if _, err := b.Client().Put(ctx, b.LegacyKey(), string(odata)); err != nil {
		t.Fatal(err)
	}
	if _, err := MigrateLayout(ctx, b); !errors.Is(err, state.ErrLineage) {
		t.Fatalf("MigrateLayout of another state = %v", err)
	}
}

// TestFences: a write fenced by several fences lands only while all
// stand, and the error names the one that fell.
func TestFences(t *testing.T) {
	ctx := ctxT(t)
	c := newClient(t)
	b := New(c, Options{Prefix: prefix(t)})
	lease, err := c.Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	var fences []election.Fence
	for _, obj := range []string{"group/a", "group/b"} {
		key := prefix(t) + "/owners/" + obj
		resp, err := c.Put(ctx, key, "me", clientv3.WithLease(lease.ID))
		if err != nil {
			t.Fatal(err)
		}
		fences = append(fences, election.Fence{Key: key, Revision: resp.Header.Revision})
	}
	doc, _ := b.Read(ctx)
	if err := b.Fenced(fences...).Write(ctx, doc); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Delete(ctx, fences[1].Key); err != nil {
		t.Fatal(err)
	}
	before := storedValue(t, b)
	err = b.WriteFenced(ctx, doc, fences...)
	var fe *FencedError
	if !errors.As(err, &fe) || fe.Fence != fences[1] || !strings.Contains(err.Error(), "no longer the owner") {
		t.Fatalf("write with a fallen fence = %v", err)
	}
	if storedValue(t, b) != before || doc.Serial != 1 {
		t.Fatal("a fenced-off write changed something")
	}
	if err := b.WriteFenced(ctx, doc, fences[0]); err != nil {
		t.Fatalf("write with the standing fence: %v", err)
	}
	if err := b.WriteFenced(ctx, doc); err == nil {
		t.Error("a fenced write without fences succeeded")
	}
}

// TestUnchanged: the etcd backend is a state.Revalidator, through Fenced
// too: true while the state is what it last read or wrote, false once
// another writer changed it.
func TestUnchanged(t *testing.T) {
	ctx := ctxT(t)
	b := newBackend(t)
	doc, _ := b.Read(ctx)
	if same, err := b.Unchanged(ctx, header(doc)); err != nil || same {
		t.Fatalf("nothing stored: Unchanged = %v, %v", same, err)
	}
	if err := b.Write(ctx, doc); err != nil {
		t.Fatal(err)
	}
	rv := b.Fenced(election.Fence{Key: "k", Revision: 1}).(state.Revalidator)
	if same, err := rv.Unchanged(ctx, header(doc)); err != nil || !same {
		t.Fatalf("after its own write: Unchanged = %v, %v", same, err)
	}
	other := New(b.Client(), Options{Prefix: prefix(t)})
	if _, err := lockedIncrement(other, "x"); err != nil {
		t.Fatal(err)
	}
	if same, err := b.Unchanged(ctx, header(doc)); err != nil || same {
		t.Fatalf("after another's write: Unchanged = %v, %v", same, err)
	}
}

// TestSweepSparesWritesUnderWay pauses a write of several requests after
// it wrote some of its new parts (referred to by nothing yet) and sweeps
// meanwhile from another Backend: the sweep deletes none of them (the
// writer's marker holds it off), so the write, resumed, lands whole. A
// write of another Backend in the pause makes the resumed one fail as a
// compare-and-swap, leaving the other's document.
func TestSweepSparesWritesUnderWay(t *testing.T) {
	defer func(b, o int) { txnMaxBytes, txnMaxOps = b, o }(txnMaxBytes, txnMaxOps)
	txnMaxBytes, txnMaxOps = 8<<10, 4
	for _, interleaved := range []bool{false, true} {
		t.Run(fmt.Sprintf("another write in the pause: %v", interleaved), func(t *testing.T) {
			ctx := ctxT(t)
			c := newClient(t)
			pfx := prefix(t)
			base := New(c, Options{Prefix: pfx})
			doc := bigDoc(2, 10)
			if err := base.Write(ctx, doc); err != nil {
				t.Fatal(err)
			}
			a := New(c, Options{Prefix: pfx})
			da, err := a.Read(ctx)
			if err != nil {
				t.Fatal(err)
			}
			big := bigDoc(3, 3000)
			big.Lineage, big.Serial = da.Lineage, da.Serial
			paused, resume := make(chan struct{}), make(chan struct{})
			n := 0
			a.interrupt = func() error {
				if n++; n == 5 { // grant, marker, two batches written
					close(paused)
					<-resume
				}
				return nil
			}
			done := make(chan error, 1)
			go func() { done <- a.Write(ctx, big) }()
			<-paused

			b := New(c, Options{Prefix: pfx})
			db, err := b.Read(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if interleaved {
				addMarker(db, "b")
				if err := b.Write(ctx, db); err != nil {
					t.Fatal(err)
				}
			}
			before := keysUnder(t, c, pfx)
			b.sweep(ctx, b.live(), b.seenRefs, b.seenRev)
			if after := keysUnder(t, c, pfx); after != before {
				t.Fatalf("a sweep during a write deleted %d keys", before-after)
			}
			close(resume)
			err = <-done
			got, rerr := New(c, Options{Prefix: pfx}).Read(ctx)
			if rerr != nil {
				t.Fatal(rerr)
			}
			want := big
			if interleaved {
				if !errors.Is(err, state.ErrSerialMoved) {
					t.Fatalf("the resumed write = %v, want ErrSerialMoved", err)
				}
				want = db
			} else if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, canonical(t, want)) {
				t.Fatal("the state is not the document expected")
			}
			// Once no write is under way, a sweep leaves only what the head
			// names.
			r := New(c, Options{Prefix: pfx})
			if _, err := r.Read(ctx); err != nil {
				t.Fatal(err)
			}
			r.sweep(ctx, r.live(), r.seenRefs, r.seenRev)
			if n := keysUnder(t, c, pfx); n != int64(len(r.seenRefs)+1) {
				t.Fatalf("%d keys after the sweep, want %d", n, len(r.seenRefs)+1)
			}
		})
	}
}

// TestSharedBackend: writers and readers sharing one Backend (and its
// cache) at once: every read is a whole document — as many markers as
// writes — and no write is lost. Run it with -race.
func TestSharedBackend(t *testing.T) {
	b := newBackend(t)
	const writers, writes = 3, 8
	errs := make(chan error, writers+2)
	stop := make(chan struct{})
	for range 2 {
		go func() {
			for {
				select {
				case <-stop:
					errs <- nil
					return
				default:
				}
				doc, err := b.Read(context.Background())
				if err == nil && uint64(len(markers(doc))) != doc.Serial {
					err = fmt.Errorf("serial %d with %d markers", doc.Serial, len(markers(doc)))
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for w := range writers {
		go func() {
			for i := range writes {
				if _, err := lockedIncrement(b, fmt.Sprintf("w%d-%d", w, i)); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	var failed error
	for range writers {
		if err := <-errs; err != nil && failed == nil {
			failed = err
		}
	}
	close(stop)
	if failed != nil {
		t.Fatal(failed)
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	doc, err := New(b.Client(), Options{Prefix: prefix(t)}).Read(ctxT(t))
	if err != nil || doc.Serial != writers*writes || len(markers(doc)) != writers*writes {
		t.Fatalf("final state %+v, %v", doc, err)
	}
}
