package state

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"
)

// Store is a state backend: the local file (Local) or, later, etcd.
//
// Reads are lock-free and always see a whole document. Writes are
// compare-and-swap on (lineage, serial), so a writer that read a stale
// document fails instead of losing someone else's change. Lock gives the
// coarse mutual exclusion that `apply`, `group scale` and each `watch` pass
// hold around a whole observe → act cycle.
type Store interface {
	// Read returns the stored document. When nothing is stored yet it
	// returns NewDocument() — serial 0, so doc.IsNew() reports true — and a
	// nil error. A stored document that cannot be trusted (corrupt,
	// truncated, newer format, no lineage) is refused with an error
	// matching ErrInvalid.
	Read(ctx context.Context) (*Document, error)

	// Write stores doc if the stored document still has doc.Lineage and
	// doc.Serial (the serial doc was read at; 0 means "nothing stored").
	// It stores serial doc.Serial+1 and, on success only, updates
	// doc.Serial and doc.Version. A mismatch fails with an error matching
	// ErrSerialMoved or ErrLineage; a stored document that Read would
	// refuse is never overwritten (ErrInvalid). ctx bounds only waiting
	// (for the lock, for the network): a write that need not wait goes
	// through even when ctx is done, so state can be saved after an
	// interrupt.
	Write(ctx context.Context, doc *Document) error

	// Lock takes the state lock, waiting until ctx is done (callers put
	// the -lock-timeout in ctx's deadline; without a deadline it waits until
	// ctx is cancelled). A free lock is taken even if ctx is already done.
	// On timeout the error is a *LockedError naming the holder. Zero fields
	// of info are filled in (PID, Host, Since, ID). Two Lock calls exclude
	// each other even within one process. unlock releases the lock; calling
	// it again returns the first call's result.
	Lock(ctx context.Context, info LockInfo) (unlock func() error, err error)
}

// LockInfo says who holds the state lock, so a waiter can name the holder.
type LockInfo struct {
	// ID identifies this acquisition (random unless given).
	ID string `json:"id"`
	// Operation is the verb holding the lock: "apply", "watch", "group scale".
	Operation string    `json:"operation"`
	PID       int       `json:"pid"`
	Host      string    `json:"host"`
	Since     time.Time `json:"since"`
}

// withDefaults fills the zero fields from the running process.
func (i LockInfo) withDefaults() LockInfo {
	if i.ID == "" {
		i.ID = NewLineage()
	}
	if i.PID == 0 {
		i.PID = os.Getpid()
	}
	if i.Host == "" {
		i.Host, _ = os.Hostname() // best effort: only used in messages
	}
	if i.Since.IsZero() {
		i.Since = time.Now()
	}
	i.Since = i.Since.UTC()
	return i
}

// Sentinel errors; match them with errors.Is.
var (
	// ErrSerialMoved: the stored serial is not the one the document was
	// read at — another writer got there first. Read again and retry.
	ErrSerialMoved = errors.New("state serial moved")
	// ErrLineage: the stored document is a different state altogether.
	ErrLineage = errors.New("state lineage differs")
	// ErrInvalid: the stored document is refused (corrupt, truncated,
	// newer format, no lineage). It is never overwritten.
	ErrInvalid = errors.New("invalid state")
	// ErrLocked: the state lock was not obtained before ctx was done.
	ErrLocked = errors.New("state locked")
)

// ConflictError is a failed compare-and-swap. It matches ErrSerialMoved or
// ErrLineage (Kind).
type ConflictError struct {
	// State is where the state lives (a file path, an etcd key).
	State string
	Kind  error
	// Stored is the lineage and serial found; Stored.Exists is false when
	// nothing is stored.
	Stored Header
	// Read is the lineage and serial of the document being written.
	Read Header
}

// Revalidator is a Store that can tell, more cheaply than a Read, whether
// what it stores is still exactly what it last read or wrote at header h
// (Local: the file's bytes). A caller that kept that document unchanged
// may then use it instead of reading again.
type Revalidator interface {
	Unchanged(ctx context.Context, h Header) (bool, error)
}

var _ Revalidator = (*Local)(nil)

// Header is the identity of a stored document.
type Header struct {
	Exists  bool
	Lineage string
	Serial  uint64
}

func (e *ConflictError) Error() string {
	switch {
	case e.Kind == ErrLineage:
		return fmt.Sprintf("state %s has lineage %s but this document has lineage %s: it is a different state; refusing to overwrite it",
			e.State, e.Stored.Lineage, e.Read.Lineage)
	case !e.Stored.Exists:
		return fmt.Sprintf("state %s no longer exists but this document was read from it at serial %d; refusing to recreate it",
			e.State, e.Read.Serial)
	case e.Read.Serial == 0:
		return fmt.Sprintf("state %s was created by another writer (serial %d) after this document was read as new; read it again and retry",
			e.State, e.Stored.Serial)
	default:
		return fmt.Sprintf("state %s is at serial %d but this document was read at serial %d: another writer changed it; read it again and retry",
			e.State, e.Stored.Serial, e.Read.Serial)
	}
}

// Is makes errors.Is(err, ErrSerialMoved/ErrLineage) work.
func (e *ConflictError) Is(target error) bool { return target == e.Kind }

// InvalidError is a stored document that is refused. It matches ErrInvalid.
type InvalidError struct {
	// State is where the state lives (a file path, an etcd key).
	State string
	// Reason says what is wrong, for a human.
	Reason string
	// Hint says what the user can do (e.g. where the backup is); may be empty.
	Hint string
	// Err is the underlying decoding error, if any.
	Err error
}

func (e *InvalidError) Error() string {
	msg := fmt.Sprintf("state %s: %s; refusing to use or overwrite it", e.State, e.Reason)
	if e.Hint != "" {
		msg += "; " + e.Hint
	}
	return msg
}

// Is makes errors.Is(err, ErrInvalid) work.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

// Unwrap gives the decoding error (e.g. a *json.SyntaxError).
func (e *InvalidError) Unwrap() error { return e.Err }

// LockedError is a lock wait that ended before the lock was free. It matches
// ErrLocked, and the context's error (context.DeadlineExceeded or
// context.Canceled) through Unwrap.
type LockedError struct {
	// State is where the state lives (a file path, an etcd key).
	State string
	// Holder is the holder's info; Known is false when it could not be read
	// (the holder had not written it yet).
	Holder LockInfo
	Known  bool
	Waited time.Duration
	Cause  error
}

func (e *LockedError) Error() string {
	waited := e.Waited.Round(time.Millisecond)
	if waited >= time.Second {
		waited = e.Waited.Round(100 * time.Millisecond)
	}
	if !e.Known {
		return fmt.Sprintf("state %s locked by an unknown holder; waited %s", e.State, waited)
	}
	h := e.Holder
	msg := fmt.Sprintf("state locked by %q (pid %d on host %s) since %s; waited %s",
		h.Operation, h.PID, h.Host, h.Since.UTC().Format(time.RFC3339), waited)
	if h.ID != "" {
		// The ID is what `infrakit force-unlock` takes.
		msg += "; lock ID " + h.ID
	}
	return msg
}

// Is makes errors.Is(err, ErrLocked) work.
func (e *LockedError) Is(target error) bool { return target == ErrLocked }

// Unwrap gives the context's error.
func (e *LockedError) Unwrap() error { return e.Cause }
