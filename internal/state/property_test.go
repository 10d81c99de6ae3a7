package state

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestPropertyNoLostWrites drives random sequences of reads, stale and
// foreign writes, crash leftovers and bursts of concurrent writers (locked
// and lock-free) against one state file, and checks after every step that
// the file is whole and holds exactly the writes that were acknowledged:
// serial = number of acknowledged writes, every acknowledged marker present,
// the backup equal to the previous file.
//
// It runs thousands of writes, so it works on tmpfs when there is one: the
// code path is the same (renames, links, flock), only fsync costs nothing —
// and what fsync guards against, power loss, no test here can simulate.
func TestPropertyNoLostWrites(t *testing.T) {
	base := memTempDir(t)
	rapid.Check(t, func(rt *rapid.T) {
		dir, err := os.MkdirTemp(base, "")
		if err != nil {
			rt.Fatal(err)
		}
		path := filepath.Join(dir, "infrakit.state.json")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()

		locals := make([]*Local, rapid.IntRange(1, 3).Draw(rt, "locals"))
		for i := range locals {
			locals[i] = NewLocal(path)
		}
		held := make([]*Document, len(locals)) // each client's last read
		var model struct {
			exists  bool
			lineage string
			serial  uint64
			markers map[string]bool
			file    []byte // the file as last acknowledged
		}
		model.markers = map[string]bool{}
		next := 0
		marker := func() string { next++; return fmt.Sprint("m", next) }

		acknowledge := func(doc *Document) {
			now, err := os.ReadFile(path)
			if err != nil {
				rt.Fatal(err)
			}
			if model.exists {
				if backup, _ := os.ReadFile(path + ".backup"); !bytes.Equal(backup, model.file) {
					rt.Fatalf("backup is not the previous file")
				}
			}
			model.exists, model.lineage, model.serial, model.file = true, doc.Lineage, doc.Serial, now
			model.markers = markers(doc)
		}

		rt.Repeat(map[string]func(*rapid.T){
			"": func(rt *rapid.T) { // the invariant, checked after every step
				doc, err := locals[0].Read(ctx)
				if err != nil {
					rt.Fatalf("state unreadable: %v", err)
				}
				if !model.exists {
					if !doc.IsNew() {
						rt.Fatalf("state exists before any acknowledged write: %+v", doc)
					}
					return
				}
				if doc.Lineage != model.lineage || doc.Serial != model.serial || !maps.Equal(markers(doc), model.markers) {
					rt.Fatalf("stored lineage %s serial %d markers %d; want %s %d %d",
						doc.Lineage, doc.Serial, len(markers(doc)), model.lineage, model.serial, len(model.markers))
				}
			},
			"read": func(rt *rapid.T) {
				i := rapid.IntRange(0, len(locals)-1).Draw(rt, "client")
				doc, err := locals[i].Read(ctx)
				if err != nil {
					rt.Fatal(err)
				}
				held[i] = doc
			},
			"write": func(rt *rapid.T) {
				i := rapid.IntRange(0, len(locals)-1).Draw(rt, "client")
				doc := held[i]
				if doc == nil {
					rt.Skip("client has read nothing")
				}
				fresh := model.exists && doc.Lineage == model.lineage && doc.Serial == model.serial ||
					!model.exists && doc.IsNew()
				before := doc.Serial
				addMarker(doc, marker())
				err := locals[i].Write(ctx, doc)
				switch {
				case fresh && err != nil:
					rt.Fatalf("write of a fresh document failed: %v", err)
				case fresh:
					if doc.Serial != before+1 {
						rt.Fatalf("serial %d after writing %d", doc.Serial, before)
					}
					acknowledge(doc)
				case !errors.Is(err, ErrSerialMoved):
					rt.Fatalf("write of a stale document = %v, want ErrSerialMoved", err)
				case doc.Serial != before:
					rt.Fatalf("a failed write changed doc.Serial")
				}
			},
			"foreign": func(rt *rapid.T) {
				if !model.exists {
					rt.Skip("nothing stored")
				}
				doc := NewDocument()
				doc.Serial = model.serial
				if err := locals[0].Write(ctx, doc); !errors.Is(err, ErrLineage) {
					rt.Fatalf("foreign write = %v, want ErrLineage", err)
				}
			},
			"crash leftover": func(rt *rapid.T) {
				junk := rapid.SampledFrom([]string{".tmp-", ".backup.tmp-"}).Draw(rt, "kind")
				if err := os.WriteFile(path+junk+fmt.Sprint(next), []byte(`{"version": 1, "seri`), 0o600); err != nil {
					rt.Fatal(err)
				}
			},
			"concurrent": func(rt *rapid.T) {
				writers := rapid.IntRange(2, 4).Draw(rt, "writers")
				each := rapid.IntRange(1, 3).Draw(rt, "each")
				locked := rapid.SliceOfN(rapid.Bool(), writers, writers).Draw(rt, "locked")
				names := make([][]string, writers)
				for w := range names {
					for range each {
						names[w] = append(names[w], marker())
					}
				}
				errs := make(chan error, writers+1)
				var wg sync.WaitGroup
				for w := range writers {
					// Lock-free writers share the clients' Locals. A locked
					// writer gets its own: a lock-free Write through the
					// Local whose lock is held runs under that lock (see
					// Local), so it could move the serial under the holder.
					l := locals[w%len(locals)]
					if locked[w] {
						l = NewLocal(path)
					}
					wg.Go(func() {
						for _, m := range names[w] {
							var err error
							if locked[w] {
								_, err = lockedIncrement(l, m)
							} else {
								err = casIncrement(l, m)
							}
							if err != nil {
								errs <- err
								return
							}
						}
					})
				}
				// A reader meanwhile never sees a torn file or a serial going back.
				stop := make(chan struct{})
				var rg sync.WaitGroup
				rg.Go(func() {
					reader := NewLocal(path)
					var last uint64
					for {
						select {
						case <-stop:
							return
						default:
						}
						doc, err := reader.Read(ctx)
						if err == nil && doc.Serial < last {
							err = fmt.Errorf("serial went back from %d to %d", last, doc.Serial)
						}
						if err != nil {
							errs <- err
							return
						}
						last = doc.Serial
					}
				})
				wg.Wait()
				close(stop)
				rg.Wait()
				close(errs)
				for err := range errs {
					rt.Fatal(err)
				}
				doc, err := locals[0].Read(ctx)
				if err != nil {
					rt.Fatal(err)
				}
				if want := model.serial + uint64(writers*each); doc.Serial != want {
					rt.Fatalf("serial %d after %d concurrent writes from %d: writes lost", doc.Serial, writers*each, model.serial)
				}
				for _, ms := range names {
					for _, m := range ms {
						if !markers(doc)[m] {
							rt.Fatalf("acknowledged write %s lost", m)
						}
					}
				}
				model.exists, model.lineage, model.serial = true, doc.Lineage, doc.Serial
				model.markers = markers(doc)
				model.file, _ = os.ReadFile(path)
			},
		})
	})
}

// memTempDir is a temporary directory on tmpfs (/dev/shm) when available,
// else t.TempDir().
func memTempDir(t *testing.T) string {
	t.Helper()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "infrakit-state-test-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}
