package operation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/pluginhost"
	"github.com/infrakit/infrakit/internal/state"
	stateetcd "github.com/infrakit/infrakit/internal/state/etcd"
	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/provider"
)

// StateFile is the local state's file name in the working directory,
// named once in config, whose loader must never read it as a stack file.
const StateFile = config.StateFile

// Defaults of Options.
const (
	DefaultParallelism        = 10
	DefaultStateWriteInterval = time.Second
	DefaultLockWaitInterval   = 3 * time.Second
)

// ErrNotInitialized says the working directory has no lock file: no
// provider was installed for it.
var ErrNotInitialized = errors.New(`no providers are installed here: run "infrakit init"`)

func newRunner(opts Options) (*Runner, error) {
	wd := opts.WorkDir
	if wd == "" {
		wd = "."
	}
	abs, err := filepath.Abs(wd)
	if err != nil {
		return nil, fmt.Errorf("working directory: %w", err)
	}
	opts.WorkDir = abs
	if opts.StackDir == "" {
		opts.StackDir = abs
	}
	if opts.Parallelism <= 0 {
		opts.Parallelism = DefaultParallelism
	}
	if opts.StateWriteInterval <= 0 {
		opts.StateWriteInterval = DefaultStateWriteInterval
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	// The state is where `infrakit init` last put it (the local file when
	// init recorded nothing): every command of the directory, from any
	// machine, then works on the one state.
	recorded, err := stateetcd.ReadRecord(abs)
	if err != nil {
		return nil, fmt.Errorf("the backend recorded by \"infrakit init\": %w", err)
	}
	store, closeStore, err := stateetcd.OpenStore(recorded, filepath.Join(abs, StateFile))
	if err != nil {
		return nil, fmt.Errorf("state backend %s: %w", recorded, err)
	}
	return &Runner{
		opts:       opts,
		log:        opts.Logger,
		backend:    recorded,
		raw:        store,
		store:      newLineageGuard(store, stateName(recorded, abs), abs, opts.ForceLineage),
		closeStore: closeStore,
	}, nil
}

// stateName says where the state is, for messages: the local file's path
// or the etcd backend.
func stateName(b *config.Backend, workDir string) string {
	if b.IsLocal() {
		return filepath.Join(workDir, StateFile)
	}
	return b.String()
}

func (r *Runner) close() error {
	r.mu.Lock()
	h := r.host
	r.host, r.closed = nil, true
	closeStore := r.closeStore
	r.closeStore = nil
	r.mu.Unlock()
	var err error
	if h != nil {
		err = h.Close()
	}
	if closeStore != nil {
		err = errors.Join(err, closeStore())
	}
	return err
}

// hostFor returns the plugin host, creating it on first use. A working
// directory without a lock file has had no `infrakit init`.
func (r *Runner) hostFor() (*pluginhost.Host, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, pluginhost.ErrClosed
	}
	if r.host != nil {
		return r.host, nil
	}
	lockPath := filepath.Join(r.opts.WorkDir, pluginhost.LockFileName)
	if _, err := os.Stat(lockPath); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s has no %s: %w", r.opts.WorkDir, pluginhost.LockFileName, ErrNotInitialized)
	}
	h, err := pluginhost.New(pluginhost.Options{
		WorkDir: r.opts.WorkDir,
		Logger:  r.log.Named("pluginhost"),
		Env:     r.opts.HostEnv,
	})
	if err != nil {
		return nil, err
	}
	for key, c := range r.configs {
		h.SetConfig(key, c)
	}
	r.host = h
	return h, nil
}

// loadStack loads the stack files and validates them with the providers.
// A stack whose backend block is not the backend `infrakit init` recorded
// is refused: the commands work on the recorded one, and must not guess
// which of the two holds the state.
func (r *Runner) loadStack(ctx context.Context) (*config.Stack, map[string]*hcl.File, hcl.Diagnostics) {
	st, diags := config.LoadWith(r.opts.StackDir, r.opts.Inputs, r.opts.ExtraFiles...)
	if diags.HasErrors() {
		return st, st.Files, diags
	}
	if d := r.checkBackend(st); d != nil {
		return st, st.Files, append(diags, d)
	}
	h, err := r.hostFor()
	if err != nil {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Providers not available",
			Detail:   err.Error(),
		})
		return st, st.Files, diags
	}
	r.useStackFiles(st) // before the launch, which configures the processes
	launchAll(ctx, h, st)
	diags = append(diags, config.ValidateWithProviders(ctx, st, validator{host: h})...)
	return st, st.Files, diags
}

// checkBackend is the diagnostic of a stack whose backend block differs
// from the recorded backend (nil when they agree), at the backend block, or
// at the stack block when the stack has none.
func (r *Runner) checkBackend(st *config.Stack) *hcl.Diagnostic {
	if stateetcd.SameBackend(r.backend, st.Backend) {
		return nil
	}
	configured := st.Backend
	if configured.IsLocal() {
		configured = &config.Backend{Type: config.BackendLocal}
	}
	subject := st.DeclRange
	if st.Backend != nil {
		subject = st.Backend.DeclRange
	}
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Backend changed; run \"infrakit init\"",
		Detail: fmt.Sprintf("The stack keeps its state in %s, but \"infrakit init\" initialized %s in this directory, "+
			"and that is where the state is. Run \"infrakit init\" to use the configured backend; when %s holds "+
			"a state, \"infrakit init -migrate-state\" moves it (keeping the old copy as a backup). Or set the backend block back.",
			configured, r.backend, r.backend),
		Subject: subject.Ptr(),
	}
}

// launchAll starts the stack's providers side by side: validation asks them
// one after another, and a launch (process start, handshake, mTLS keys) is
// the slowest part of a small command. Launch errors are left for
// validation to report, at the provider block.
func launchAll(ctx context.Context, h *pluginhost.Host, st *config.Stack) {
	var wg sync.WaitGroup
	for _, p := range st.Providers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = h.Client(ctx, p.Key())
		}()
	}
	wg.Wait()
}

// validator answers config.ValidateWithProviders with the host's providers.
type validator struct{ host *pluginhost.Host }

var _ config.Validator = validator{}

func (v validator) Metadata(ctx context.Context, key string) (provider.Metadata, error) {
	c, err := v.host.Client(ctx, key)
	if err != nil {
		return provider.Metadata{}, err
	}
	return c.Metadata(ctx)
}

func (v validator) ValidateInstance(ctx context.Context, key, typ string, props json.RawMessage) error {
	c, err := v.host.Client(ctx, key)
	if err != nil {
		return err
	}
	return c.Instance(typ).Validate(ctx, props)
}

func (v validator) ValidateFlavor(ctx context.Context, key, typ string, props json.RawMessage, alloc flavor.Allocation) error {
	c, err := v.host.Client(ctx, key)
	if err != nil {
		return err
	}
	return c.Flavor(typ).Validate(ctx, props, alloc)
}

// lock takes the state lock for op, waiting up to LockTimeout. While it
// waits it says so on Options.LockWait, naming the holder: once when it
// finds the lock held, then every LockWaitInterval.
func (r *Runner) lock(ctx context.Context, op string) (func() error, error) {
	if r.opts.Operation != "" {
		op = r.opts.Operation
	}
	lctx, cancel := context.WithTimeout(ctx, max(r.opts.LockTimeout, 0))
	defer cancel()
	start := time.Now()
	every := r.opts.LockWaitInterval
	if every <= 0 {
		every = DefaultLockWaitInterval
	}
	// The first try does not wait (a free lock is taken even with a done
	// context); each later one waits at most every, then reports.
	try, stop := context.WithCancel(lctx)
	stop()
	for {
		unlock, err := r.store.Lock(try, state.LockInfo{Operation: op})
		stop()
		var locked *state.LockedError
		if err == nil || !errors.As(err, &locked) || lctx.Err() != nil {
			if locked != nil {
				locked.Waited = time.Since(start)
			}
			if err != nil && ctx.Err() != nil {
				return nil, fmt.Errorf("waiting for the state lock: %w", errors.Join(err, ctx.Err()))
			}
			return unlock, err
		}
		if r.opts.LockWait != nil {
			fmt.Fprintf(r.opts.LockWait, "Waiting for the state lock (%s of -lock-timeout %s): %s.\n",
				time.Since(start).Round(time.Second), max(r.opts.LockTimeout, 0), lockHolder(locked))
		}
		try, stop = context.WithTimeout(lctx, every)
	}
}

// lockHolder says who holds the lock, for the waiting message.
func lockHolder(e *state.LockedError) string {
	if !e.Known {
		return "held by an unknown holder"
	}
	h := e.Holder
	msg := fmt.Sprintf("held by %q (pid %d on host %s) since %s", h.Operation, h.PID, h.Host, h.Since.UTC().Format(time.RFC3339))
	if h.ID != "" {
		msg += ", lock ID " + h.ID
	}
	return msg
}
