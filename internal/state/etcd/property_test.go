package etcd

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"

	"pgregory.net/rapid"

	"github.com/infrakit/infrakit/internal/state"
)

// TestBehavesLikeLocal drives the etcd backend and the local backend with
// the same random sequences of reads and writes from several writers —
// stale documents, new documents, other lineages — and checks that every
// call has the same outcome on both and that both end up storing the same
// document. The local backend is the reference: the etcd one must not
// differ from it in any compare-and-swap decision.
func TestBehavesLikeLocal(t *testing.T) {
	c := newClient(t)
	dir := t.TempDir()
	run := 0
	rapid.Check(t, func(rt *rapid.T) {
		run++
		ctx := context.Background()
		pfx := fmt.Sprintf("%s/%d", prefix(t), run)
		shared := New(c, Options{Prefix: pfx})
		// Writers 0 and 1 share a Backend (and its cache); 2 has its own.
		etcdStores := []state.Store{shared, shared, New(c, Options{Prefix: pfx})}
		path := filepath.Join(dir, fmt.Sprintf("%d.json", run))
		localStores := []state.Store{state.NewLocal(path), state.NewLocal(path), state.NewLocal(path)}

		// Each writer holds a document on each side: what it last read.
		held := make([][2]*state.Document, len(etcdStores))
		for i := range held {
			d := state.NewDocument()
			held[i] = [2]*state.Document{clone(d), clone(d)}
		}
		steps := rapid.IntRange(1, 25).Draw(rt, "steps")
		for step := range steps {
			w := rapid.IntRange(0, len(etcdStores)-1).Draw(rt, "writer")
			switch op := rapid.SampledFrom([]string{"read", "write", "write", "new", "other lineage"}).Draw(rt, "op"); op {
			case "read":
				e, eerr := etcdStores[w].Read(ctx)
				l, lerr := localStores[w].Read(ctx)
				if (eerr == nil) != (lerr == nil) {
					rt.Fatalf("step %d read: etcd %v, local %v", step, eerr, lerr)
				}
				if eerr == nil {
					if e.IsNew() != l.IsNew() || (!e.IsNew() && !reflect.DeepEqual(e, l)) {
						rt.Fatalf("step %d read: etcd %+v, local %+v", step, e, l)
					}
					if e.IsNew() {
						l = clone(e) // a fresh lineage each; keep both sides alike
					}
					held[w] = [2]*state.Document{e, l}
				}
			case "write":
				marker := fmt.Sprintf("w%d-s%d", w, step)
				addMarker(held[w][0], marker)
				addMarker(held[w][1], marker)
				eerr := etcdStores[w].Write(ctx, held[w][0])
				lerr := localStores[w].Write(ctx, held[w][1])
				if outcome(eerr) != outcome(lerr) {
					rt.Fatalf("step %d write by %d: etcd %v, local %v", step, w, eerr, lerr)
				}
				if held[w][0].Serial != held[w][1].Serial {
					rt.Fatalf("step %d: serials differ after write: %d, %d", step, held[w][0].Serial, held[w][1].Serial)
				}
			case "new":
				d := state.NewDocument()
				held[w] = [2]*state.Document{clone(d), clone(d)}
			case "other lineage":
				d := clone(held[w][0])
				d.Lineage = state.NewLineage()
				held[w] = [2]*state.Document{d, clone(d)}
			}
		}
		e, eerr := etcdStores[2].Read(ctx)
		l, lerr := localStores[2].Read(ctx)
		if eerr != nil || lerr != nil {
			rt.Fatalf("final reads: %v, %v", eerr, lerr)
		}
		if !e.IsNew() && !reflect.DeepEqual(e, l) {
			rt.Fatalf("final documents differ:\netcd  %+v\nlocal %+v", e, l)
		}
	})
}

// outcome classifies a write's result.
func outcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, state.ErrSerialMoved):
		return "serial moved"
	case errors.Is(err, state.ErrLineage):
		return "lineage"
	default:
		return "error: " + err.Error()
	}
}

// clone deep-copies a document through its stored form.
func clone(d *state.Document) *state.Document {
	c := *d
	c.Groups = map[string]*state.GroupStatus{}
	for name, g := range d.Groups {
		gc := *g
		gc.Instances = append([]state.Instance(nil), g.Instances...)
		c.Groups[name] = &gc
	}
	return &c
}
