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

// pollState watches the state file for writes by other processes (an
// apply, a group scale, a stop-update) and sends each such document on out.
// Every interval it stats the file; only when the file changed does it read
// and decode it, and it sends it only when some serial since the last one
// it saw is not one this process wrote. It returns when ctx ends.
func pollState(ctx context.Context, store *state.Local, sr *serials, every time.Duration, seen *state.Document, out chan<- *state.Document, log hclog.Logger) {
	lineage, serial := "", uint64(0)
	if seen != nil {
		lineage, serial = seen.Lineage, seen.Serial
	}
	last, _ := stampOf(store.Path())
	t := time.NewTicker(every)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		stamp, err := stampOf(store.Path())
		if err != nil || stamp == last {
			continue
		}
		doc, err := store.Read(ctx)
		if err != nil {
			if ctx.Err() == nil && !failing {
				// An invalid state is refused by every pass too; say it
				// once, not every tick.
				log.Error("reading the state written by another process", "error", err)
			}
			failing = true
			continue
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
