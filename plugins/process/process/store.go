package process

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/infrakit/infrakit/plugins/process/proc"
	"github.com/infrakit/infrakit/sdk/atomicfile"
	"github.com/infrakit/infrakit/sdk/filelock"
	"github.com/infrakit/infrakit/sdk/instance"
)

// record is the file of one instance, instances/<id>.json. It is what a
// provider (this one, or one started later) knows about a process it
// started: pid, start time and boot ID prove the process is still that one.
type record struct {
	ID string `json:"id"`
	proc.Identity
	Port        int                   `json:"port"`
	LogicalID   *instance.LogicalID   `json:"logical_id,omitempty"`
	Tags        map[string]string     `json:"tags"`
	Properties  json.RawMessage       `json:"properties,omitempty"`
	Init        string                `json:"init,omitempty"`
	Attachments []instance.Attachment `json:"attachments,omitempty"`
	// Command is the resolved program path; Stdout and Stderr the log files.
	Command     string        `json:"command"`
	Stdout      string        `json:"stdout"`
	Stderr      string        `json:"stderr"`
	KillTimeout time.Duration `json:"kill_timeout"`
	CreatedAt   time.Time     `json:"created_at"`
	// Terminating is set while Destroy waits for the process to stop.
	Terminating bool `json:"terminating,omitempty"`
}

// address is where the instance listens.
func (r record) address() string { return fmt.Sprintf("%s:%d", loopback, r.Port) }

func (r record) describe(withProperties bool) instance.Description {
	d := instance.Description{
		ID:      instance.ID(r.ID),
		Tags:    maps.Clone(r.Tags),
		Address: r.address(),
		State:   instance.StateRunning,
	}
	if d.Tags == nil {
		d.Tags = map[string]string{}
	}
	if r.LogicalID != nil {
		l := *r.LogicalID
		d.LogicalID = &l
	}
	if r.Terminating {
		d.State = instance.StateTerminating
	}
	if withProperties {
		d.Properties = r.Properties
		if len(d.Properties) == 0 {
			d.Properties = json.RawMessage(`{}`)
		}
	}
	return d
}

// store keeps records as files under a directory, safe for several
// provider processes at once (the CLI's and a running watch's): a record is
// replaced atomically (temp file, fsync, rename), and changes that read a
// record first, or choose a port, hold the directory's flock.
//
//	<dir>/instances/<id>.json   one record per instance
//	<dir>/logs/<id>.stdout.log  the instance's stdout (and .stderr.log)
//	<dir>/.lock                 flock for provisions and record updates
type store struct{ dir string }

func (s store) instancesDir() string { return filepath.Join(s.dir, "instances") }
func (s store) logsDir() string      { return filepath.Join(s.dir, "logs") }
func (s store) path(id instance.ID) string {
	return filepath.Join(s.instancesDir(), string(id)+".json")
}

// init creates the directories.
func (s store) init() error {
	for _, d := range []string{s.instancesDir(), s.logsDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("process store: %w", err)
		}
	}
	return nil
}

// validID keeps IDs from naming files outside the store.
func validID(id instance.ID) bool {
	return id != "" && !strings.ContainsAny(string(id), `/\`) && !strings.HasPrefix(string(id), ".")
}

// read returns the record of id; found is false when there is none.
func (s store) read(id instance.ID) (rec record, found bool, err error) {
	if !validID(id) {
		return record{}, false, nil
	}
	b, err := os.ReadFile(s.path(id))
	if errors.Is(err, fs.ErrNotExist) {
		return record{}, false, nil
	}
	if err != nil {
		return record{}, false, fmt.Errorf("read record %q: %w", id, err)
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return record{}, false, fmt.Errorf("read record %q: %w", id, err)
	}
	return rec, true, nil
}

// list returns every readable record, sorted by ID, and the problems with
// the others (a corrupt or half-copied file must not hide the rest); err is
// for the directory itself.
func (s store) list() (recs []record, problems []error, err error) {
	entries, err := os.ReadDir(s.instancesDir())
	if err != nil {
		return nil, nil, fmt.Errorf("list records: %w", err)
	}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || e.IsDir() || !validID(instance.ID(name)) {
			continue // temp files and strays
		}
		rec, found, err := s.read(instance.ID(name))
		switch {
		case err != nil:
			problems = append(problems, err)
		case found && rec.ID == name:
			recs = append(recs, rec)
		case found:
			problems = append(problems, fmt.Errorf("record %s names instance %q; ignored", e.Name(), rec.ID))
		}
	}
	slices.SortFunc(recs, func(a, b record) int { return strings.Compare(a.ID, b.ID) })
	return recs, problems, nil
}

// write replaces the record of rec.ID atomically.
func (s store) write(rec record) error {
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return fmt.Errorf("write record %q: %w", rec.ID, err)
	}
	// 0600: a record holds the instance's properties, env included.
	if err := atomicfile.WriteFile(s.path(instance.ID(rec.ID)), append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("write record %q: %w", rec.ID, err)
	}
	return nil
}

// remove deletes the record of id; a missing one is not an error.
func (s store) remove(id instance.ID) error {
	if !validID(id) {
		return nil
	}
	if err := os.Remove(s.path(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove record %q: %w", id, err)
	}
	return nil
}

// lock takes the store's lock, waiting until ctx ends. It excludes the
// other goroutines of this process too.
func (s store) lock(ctx context.Context) (unlock func(), err error) {
	unlock, err = filelock.Lock(ctx, filepath.Join(s.dir, ".lock"))
	if err != nil {
		return nil, fmt.Errorf("lock store: %w", err)
	}
	return unlock, nil
}

// update re-reads the record of id under the lock, applies fn and writes it
// back. found is false (and fn not called) when there is no record.
func (s store) update(ctx context.Context, id instance.ID, fn func(*record)) (rec record, found bool, err error) {
	unlock, err := s.lock(ctx)
	if err != nil {
		return record{}, false, err
	}
	defer unlock()
	rec, found, err = s.read(id)
	if err != nil || !found {
		return rec, found, err
	}
	fn(&rec)
	return rec, true, s.write(rec)
}
