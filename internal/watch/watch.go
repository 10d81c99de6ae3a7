package watch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/infrakit/infrakit/internal/operation"
	"github.com/infrakit/infrakit/internal/pluginhost"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/internal/watch/status"
)

// Defaults of Options.
const (
	DefaultInterval    = 10 * time.Second
	DefaultStatePoll   = 500 * time.Millisecond
	DefaultFollowUp    = time.Second
	DefaultCallTimeout = 2 * time.Minute
	// DefaultShutdown is how long Run takes at most to stop once its
	// context is cancelled: the service is documented to exit within 30 s.
	DefaultShutdown = 25 * time.Second
)

// Options configure Run. Zero values take the defaults.
type Options struct {
	// WorkDir holds the state, the lock file and .infrakit/.
	WorkDir string
	// Interval is how often every group is listed again even when nothing
	// announced a change (DefaultInterval).
	Interval time.Duration
	// Listen is where the HTTP API is served (status.DefaultListen); port
	// 0 picks a free port (see Ready).
	Listen string
	// LockTimeout bounds each wait for the state lock (0: only a free lock
	// is taken; the pass is retried later).
	LockTimeout time.Duration
	// Parallelism bounds the provider calls of one group in flight, and the
	// groups reconciled at once (operation.DefaultParallelism).
	Parallelism int
	// CallTimeout bounds each provider call (DefaultCallTimeout). A call
	// that runs out of time has its provider checked, and a provider that
	// does not answer is killed and relaunched.
	CallTimeout time.Duration
	// StatePoll is how often the state file is looked at for changes made
	// by the CLI (DefaultStatePoll); a stat, and a read only when it changed.
	StatePoll time.Duration
	// FollowUp is how soon a group is passed again while something it did
	// is in flight: a roll waiting for health, a create not listed yet, a
	// member unhealthy within its grace (DefaultFollowUp). It doubles while
	// nothing changes, up to Interval.
	FollowUp time.Duration
	// Shutdown bounds how long Run takes to stop once ctx is cancelled
	// (DefaultShutdown).
	Shutdown time.Duration
	// Reload asks for the state, the lock file and the stack files to be
	// read again (SIGHUP). May be nil.
	Reload <-chan struct{}
	// Ready, when set, is called once the HTTP API listens, with its address.
	Ready func(net.Addr)
	// HostEnv is added to every provider's environment ("KEY=value").
	HostEnv []string
	Logger  hclog.Logger
	// Version is infrakit's version, shown in the status.
	Version string
}

func (o Options) withDefaults() Options {
	if o.WorkDir == "" {
		o.WorkDir = "."
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Listen == "" {
		o.Listen = status.DefaultListen
	}
	if o.Parallelism <= 0 {
		o.Parallelism = operation.DefaultParallelism
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	if o.StatePoll <= 0 {
		o.StatePoll = DefaultStatePoll
	}
	if o.FollowUp <= 0 {
		o.FollowUp = DefaultFollowUp
	}
	if o.Shutdown <= 0 {
		o.Shutdown = DefaultShutdown
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	return o
}

// Run is `infrakit watch`: it keeps every group of the applied stack
// converged until ctx is cancelled, then stops cleanly and returns nil.
//
// It refuses to start (a *RunningError) while another watch runs on the
// same state, and fails when the working directory has no providers
// installed, the state cannot be read, or the HTTP API cannot listen. Once
// running, failures are per group and per pass: they are logged, shown in
// the status and retried; they never stop the service.
//
// When ctx is cancelled no new pass starts; passes in flight finish their
// provider calls (each within its own deadline) and record what they did
// in the state; then the providers are stopped and the API closed, all
// within Options.Shutdown.
func Run(ctx context.Context, opts Options) error {
	opts = opts.withDefaults()
	wd, err := filepath.Abs(opts.WorkDir)
	if err != nil {
		return fmt.Errorf("working directory: %w", err)
	}
	opts.WorkDir = wd
	log := opts.Logger

	host, _ := os.Hostname()
	holder := Holder{PID: os.Getpid(), Host: host, Since: time.Now().UTC()}
	lockPath := filepath.Join(wd, operation.StateFile+LockSuffix)
	ex, err := acquireExclusive(lockPath, holder)
	if err != nil {
		return err
	}
	defer ex.release()

	runner, err := operation.New(ctx, operation.Options{
		WorkDir:     wd,
		Logger:      log,
		Parallelism: opts.Parallelism,
		LockTimeout: opts.LockTimeout,
		Operation:   "watch",
		HostEnv:     opts.HostEnv,
		CallTimeout: opts.CallTimeout,
	})
	if err != nil {
		return err
	}
	// Stopping the providers is the last step of a shutdown (see below); this
	// covers the early returns.
	defer runner.Close()
	if _, err := runner.PluginHost(); err != nil {
		return err
	}
	store := runner.StateStore()
	doc, err := store.Read(ctx)
	if err != nil {
		return err
	}
	lockFile, err := readLockFile(wd)
	if err != nil {
		return err
	}

	rec := status.NewRecorder(status.Options{Version: opts.Version, Identity: fmt.Sprintf("%s/%d", host, holder.PID)})
	srv := status.NewServer(rec, log.Named("http"))
	if err := srv.Start(opts.Listen); err != nil {
		return err
	}
	holder.Listen = srv.Addr().String()
	if err := ex.update(holder); err != nil {
		log.Warn("writing the watch lock's holder", "error", err)
	}
	if opts.Ready != nil {
		opts.Ready(srv.Addr())
	}

	s := newService(opts, runner, rec, lockFile)
	s.run(ctx, doc)

	// Stop the providers before the API, so that a scrape during shutdown
	// still answers; each Kill asks gracefully, then forces after 2 s.
	err = runner.Close()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	err = errors.Join(err, srv.Shutdown(sctx))
	if err != nil {
		log.Warn("stopping", "error", err)
	}
	log.Info("stopped")
	return nil
}

// readLockFile returns the provider lock file's content, to tell on SIGHUP
// whether `infrakit init` changed it.
func readLockFile(wd string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(wd, pluginhost.LockFileName))
	if err != nil {
		return nil, fmt.Errorf("read the provider lock file: %w", err)
	}
	return b, nil
}

// service is one running watch: the loop (loop.go) and what it shares with
// the passes it starts (pass.go).
type service struct {
	opts    Options
	log     hclog.Logger
	runner  *operation.Runner
	store   *state.Local
	rec     *status.Recorder
	serials *serials
	lease   *lease
	prov    *providers

	// Into the loop: groups whose provider pushed a change, documents
	// written by other processes, passes finished.
	events   chan string
	docs     chan *state.Document
	done     chan passResult
	followed chan followResult

	// bg owns the poller and the subscriptions.
	bg sync.WaitGroup

	// Owned by the loop goroutine.
	doc       *state.Document
	groups    map[string]*groupSched
	active    int
	fol       followers
	lockFile  []byte
	resetHost bool
}

func newService(opts Options, r *operation.Runner, rec *status.Recorder, lockFile []byte) *service {
	sr := newSerials()
	return &service{
		opts:     opts,
		log:      opts.Logger,
		runner:   r,
		store:    r.StateStore(),
		rec:      rec,
		serials:  sr,
		lease:    newLease(r.StateStore(), sr, opts.LockTimeout),
		prov:     newProviders(r, rec, opts.Logger.Named("providers")),
		events:   make(chan string, 64),
		docs:     make(chan *state.Document),
		done:     make(chan passResult, opts.Parallelism),
		followed: make(chan followResult, 1),
		groups:   map[string]*groupSched{},
		lockFile: lockFile,
	}
}
