package watch

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/infrakit/infrakit/internal/state"
)

// fileStamp identifies one version of a file cheaply: a write replaces the
// state file by a rename, so the inode changes with every write.
type fileStamp struct {
	exists bool
	ino    uint64
	size   int64
	mtime  time.Time
}

func stampOf(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fileStamp{}, nil
	}
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{exists: true, ino: inode(fi), size: fi.Size(), mtime: fi.ModTime()}, nil
}

// pollState watches the state for writes by other processes (an apply, a
// group scale, a stop-update, another watch that led before) and sends each
// such document on out. Every interval it looks at the state: the local
// file is stat'ed and read only when it changed; another backend (etcd) is
// read, one small round trip bounded by readTimeout. It sends a document
// only when some serial since the last one it saw is not one this process
// wrote. It returns when ctx ends.
func pollState(ctx context.Context, store state.Store, sr *serials, every time.Duration, seen *state.Document, out chan<- *state.Document, log hclog.Logger) {
	lineage, serial := "", uint64(0)
	if seen != nil {
		lineage, serial = seen.Lineage, seen.Serial
	}
	local, _ := store.(*state.Local)
	var last fileStamp
	if local != nil {
		last, _ = stampOf(local.Path())
	}
	t := time.NewTicker(every)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var stamp fileStamp
		if local != nil {
			var err error
			stamp, err = stampOf(local.Path())
			if err != nil || stamp == last {
				continue
			}
		}
		doc, err := readState(ctx, store)
		if err != nil {
			if ctx.Err() == nil && !failing {
				// An invalid state is refused by every pass too, and an
				// unreachable etcd stays so for a while; say it once, not
				// every tick.
				log.Error("reading the state", "error", err)
			}
			failing = true
			continue
		}
		if failing {
			log.Info("reading the state works again", "serial", doc.Serial)
		}
		failing = false
		last = stamp
		if doc.Lineage == lineage && !sr.foreign(lineage, serial, doc.Serial) {
			serial = doc.Serial
			continue
		}
		lineage, serial = doc.Lineage, doc.Serial
		select {
		case out <- doc:
		case <-ctx.Done():
			return
		}
	}
}

// readTimeout bounds a read of a state that is not the local file: an etcd
// that does not answer must not hold up the loop or the poller.
const readTimeout = 5 * time.Second

// readState reads the state, bounded by readTimeout unless it is the local
// file (whose reads never wait on anyone).
func readState(ctx context.Context, store state.Store) (*state.Document, error) {
	if _, ok := store.(*state.Local); ok {
		return store.Read(ctx)
	}
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	return store.Read(ctx)
}
