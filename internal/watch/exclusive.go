package watch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/infrakit/infrakit/sdk/filelock"
)

// LockSuffix names the file a running watch holds locked for its whole
// life, beside the state file: infrakit.state.json.watch. It is not the
// state lock (infrakit.state.json.lock), which watch takes only while a pass
// acts, so that the CLI keeps working.
const LockSuffix = ".watch"

// ErrAlreadyRunning is matched (errors.Is) by the error of a watch that
// refused to start because another one runs on the same state.
var ErrAlreadyRunning = errors.New("another infrakit watch is running")

// Holder says which watch process runs on a state.
type Holder struct {
	PID   int       `json:"pid"`
	Host  string    `json:"host"`
	Since time.Time `json:"since"`
	// Listen is where it serves its HTTP API ("" until it does), Scheme
	// how ("http" or "https"), and TokenFile where its API token is (""
	// when INFRAKIT_TOKEN gave it).
	Listen    string `json:"listen,omitempty"`
	Scheme    string `json:"scheme,omitempty"`
	TokenFile string `json:"token_file,omitempty"`
}

// RunningError is the refusal to start a second watch. It names the first.
type RunningError struct {
	// Path is the watch lock file.
	Path string
	// Holder is the running watch; Known is false when it had not written
	// itself down yet.
	Holder Holder
	Known  bool
}

func (e *RunningError) Error() string {
	if !e.Known {
		return fmt.Sprintf("another infrakit watch is running on this state (it holds %s); stop it first", e.Path)
	}
	h := e.Holder
	msg := fmt.Sprintf("another infrakit watch is running on this state: pid %d on host %s, since %s",
		h.PID, h.Host, h.Since.UTC().Format(time.RFC3339))
	if h.Listen != "" {
		msg += ", serving http://" + h.Listen + "/v1/status"
	}
	return msg + fmt.Sprintf(" (it holds %s); stop it first", e.Path)
}

// Is makes errors.Is(err, ErrAlreadyRunning) work.
func (e *RunningError) Is(target error) bool { return target == ErrAlreadyRunning }

// exclusive is the watch lock: an flock on a file that holds the holder's
// JSON. The kernel drops the lock with the process, however it ends, so a
// crashed watch never blocks the next one.
type exclusive struct {
	f *os.File
}

// acquireExclusive takes the watch lock at path without waiting, or returns
// a *RunningError naming the process that has it.
func acquireExclusive(path string, h Holder) (*exclusive, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("watch lock %s: %w", path, err)
	}
	ok, err := filelock.TryAcquire(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("watch lock %s: %w", path, err)
	}
	if !ok {
		f.Close()
		e := &RunningError{Path: path}
		// The holder writes itself down right after locking: give one
		// caught in between a moment.
		for range 5 {
			if e.Holder, e.Known = readHolder(path); e.Known {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		return nil, e
	}
	x := &exclusive{f: f}
	if err := x.update(h); err != nil {
		x.release()
		return nil, err
	}
	return x, nil
}

// update rewrites the holder info (the listen address is known only once
// the server started).
func (x *exclusive) update(h Holder) error {
	data, err := json.Marshal(h)
	if err != nil {
		return err
	}
	data = append(data, '\n')
	// Write first, truncate after: a reader always sees a whole JSON value
	// first (readHolder ignores what follows it).
	if _, err := x.f.WriteAt(data, 0); err != nil {
		return fmt.Errorf("watch lock %s: write holder: %w", x.f.Name(), err)
	}
	return x.f.Truncate(int64(len(data)))
}

// release clears the holder info and drops the lock.
func (x *exclusive) release() error {
	_ = x.f.Truncate(0) // a courtesy: the lock is what counts
	return errors.Join(filelock.Release(x.f), x.f.Close())
}

func readHolder(path string) (Holder, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Holder{}, false
	}
	var h Holder
	if err := json.NewDecoder(bytes.NewReader(data)).Decode(&h); err != nil || h.PID == 0 {
		return Holder{}, false
	}
	return h, true
}
