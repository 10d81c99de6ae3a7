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

	"github.com/infrakit/infrakit/internal/api"
	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/election"
	"github.com/infrakit/infrakit/internal/operation"
	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/internal/pluginhost"
	"github.com/infrakit/infrakit/internal/state"
	stateetcd "github.com/infrakit/infrakit/internal/state/etcd"
	"github.com/infrakit/infrakit/internal/watch/heal"
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
	// ExtraFiles are stack files named with -f, read beside WorkDir's
	// when the stack files are read again (Reload); a relative path is
	// taken from WorkDir. They should be the files the stack was applied
	// with, or a reload reports that the stack files differ from it.
	ExtraFiles []string
	// Inputs are the values of the stack's variables (-var, -var-file,
	// the environment), used each time the stack files are read.
	Inputs config.Inputs
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
	// BrakeSettle is the mass-failure brake's settle time (heal.Policy's
	// BrakeSettle; heal.DefaultBrakeSettle): deaths within it count
	// together, the brake holds at least that long after the world last
	// changed, and after a release replacements go at a bounded rate per
	// BrakeSettle.
	BrakeSettle time.Duration
	// Reload asks for the state, the lock file and the stack files to be
	// read again (SIGHUP). May be nil.
	Reload <-chan struct{}
	// Ready, when set, is called once the HTTP API listens, with its address.
	Ready func(net.Addr)
	// HostEnv is added to every provider's environment ("KEY=value").
	HostEnv []string
	// IdleGCPercent, when positive, is the process's GC percent while
	// nothing is in flight (gc.go); 0 leaves the GC alone. It changes a
	// setting of the whole process: at most one Run at a time should set it.
	IdleGCPercent int
	Logger        hclog.Logger
	// Version is infrakit's version, shown in the status.
	Version string
	// Identity names this process in the status and, with the etcd
	// backend, in the leader election ("<host>/<pid>" when empty).
	Identity string
	// API configures the object API and the web UI (serve.go).
	API APIOptions
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
	if o.BrakeSettle <= 0 {
		o.BrakeSettle = heal.DefaultBrakeSettle
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	return o
}

// Run is `infrakit watch`: it keeps every group of the applied stack
// converged until ctx is cancelled, then stops cleanly and returns nil.
//
// The state is where `infrakit init` recorded it. With the local file it
// refuses to start (a *RunningError) while another watch runs on the same
// state. With etcd several watch processes share the state and elect one
// leader, which alone acts (leader.go).
//
// It fails when the working directory has no providers installed, the
// state cannot be read, or the HTTP API cannot listen. Once running,
// failures are per group and per pass: they are logged, shown in the
// status and retried; they never stop the service.
//
// When ctx is cancelled no new pass starts; passes in flight finish their
// provider calls (each within its own deadline) and record what they did
// in the state; a leader then resigns, so that another watch leads at
// once; then the providers are stopped and the API closed, all within
// Options.Shutdown.
func Run(ctx context.Context, opts Options) error {
	opts = opts.withDefaults()
	wd, err := filepath.Abs(opts.WorkDir)
	if err != nil {
		return fmt.Errorf("working directory: %w", err)
	}
	opts.WorkDir = wd
	log := opts.Logger
	extra := make([]string, len(opts.ExtraFiles))
	for i, f := range opts.ExtraFiles {
		if !filepath.IsAbs(f) {
			f = filepath.Join(wd, f)
		}
		extra[i] = f
	}
	opts.ExtraFiles = extra

	runner, err := operation.New(ctx, operation.Options{
		WorkDir:     wd,
		ExtraFiles:  opts.ExtraFiles,
		Inputs:      opts.Inputs,
		Logger:      log,
		Parallelism: opts.Parallelism,
		LockTimeout: opts.LockTimeout,
		Operation:   "watch",
		HostEnv:     opts.HostEnv,
		CallTimeout: opts.CallTimeout,
		// The applied stack's provider blocks configure the providers
		// (setDoc), never the files a reload validates.
		KeepProviderConfig: true,
	})
	if err != nil {
		return err
	}
	// Stopping the providers is the last step of a shutdown (see below); this
	// covers the early returns.
	defer runner.Close()
	store := runner.StateStore()
	backend, elected := store.(*stateetcd.Backend)

	host, _ := os.Hostname()
	holder := Holder{PID: os.Getpid(), Host: host, Since: time.Now().UTC()}
	if opts.Identity == "" {
		opts.Identity = fmt.Sprintf("%s/%d", host, holder.PID)
	}
	var ex *exclusive
	if !elected {
		// One watch per local state: a second one refuses to start.
		lockPath := filepath.Join(wd, operation.StateFile+LockSuffix)
		if ex, err = acquireExclusive(lockPath, holder); err != nil {
			return err
		}
		defer ex.release()
	}
	if _, err := runner.PluginHost(); err != nil {
		return err
	}
	doc, err := readInitialState(ctx, store, log)
	if err != nil {
		return err
	}
	// A state of another lineage than this directory's is refused before
	// the first pass could take its instances for this stack's.
	if err := runner.CheckLineage(doc); err != nil {
		return err
	}
	lockFile, err := readLockFile(wd)
	if err != nil {
		return err
	}

	scaleOut := elected && runner.Backend().ScaleOut
	if elected {
		if err := checkMode(ctx, backend, scaleOut); err != nil {
			return err
		}
	}

	rec := status.NewRecorder(status.Options{Version: opts.Version, Identity: opts.Identity, Follower: elected})
	serving, err := newServing(opts, rec, log)
	if err != nil {
		return err
	}
	defer serving.close()
	srv := serving.srv
	if err := srv.Start(opts.Listen); err != nil {
		return err
	}
	holder.Listen, holder.Scheme = srv.Addr().String(), serving.scheme
	if serving.tokenFrom != api.TokenEnv {
		holder.TokenFile = serving.tokenFrom
	}
	if ex != nil {
		if err := ex.update(holder); err != nil {
			log.Warn("writing the watch lock's holder", "error", err)
		}
	}
	if opts.Ready != nil {
		opts.Ready(srv.Addr())
	}

	s := newService(opts, runner, rec, lockFile)
	s.setMode(backend, scaleOut)
	s.run(ctx, doc)

	// Stop the providers before the API, so that a scrape during shutdown
	// still answers; each Kill asks gracefully, then forces after 2 s.
	err = runner.Close()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	err = errors.Join(err, srv.Shutdown(sctx))
	serving.close()
	if err != nil {
		log.Warn("stopping", "error", err)
	}
	log.Info("stopped")
	return nil
}

// checkMode refuses to start beside watch processes of the other mode
// (scaleout.go): a scale-out watch beside a leader key, a leader-mode one
// beside scale-out members.
func checkMode(ctx context.Context, backend *stateetcd.Backend, scaleOut bool) error {
	other := membersDir
	if scaleOut {
		other = leaderDir
	}
	cctx, cancel := context.WithTimeout(ctx, initialStateWait)
	defer cancel()
	return checkNoOther(cctx, backend.Client(), backend.Prefix(), other)
}

// setMode makes s a lone watch (backend nil: the local state), a leader
// election's candidate, or a scale-out member.
func (s *service) setMode(backend *stateetcd.Backend, scaleOut bool) {
	switch {
	case scaleOut:
		s.so = newScaleOut(backend, s.opts.Identity)
		s.publishScaleOut()
		s.log.Info("scale-out: joining the stack's watch processes; each acts on its share of the groups, ingresses and enrollments",
			"identity", s.opts.Identity, "backend", s.runner.Backend().String(), "lease_ttl", backend.LeaseTTL())
	case backend != nil:
		s.ha = &ha{
			backend:  backend,
			election: election.New(backend.Client(), election.Options{Prefix: backend.Prefix(), TTL: backend.LeaseTTL()}),
			identity: s.opts.Identity,
			won:      make(chan *term),
		}
		s.log.Info("campaigning for leadership; following until elected",
			"identity", s.opts.Identity, "backend", s.runner.Backend().String(), "lease_ttl", backend.LeaseTTL())
	default:
		s.term = lifelongTerm(newLease(s.store, s.serials, s.opts.LockTimeout))
	}
}

// initialStateWait is how long a watch on etcd waits for the state at
// start: etcd may be starting too.
const initialStateWait = 30 * time.Second

// readInitialState reads the state at start. The local file is read once;
// etcd is asked again until initialStateWait has passed.
func readInitialState(ctx context.Context, store state.Store, log hclog.Logger) (*state.Document, error) {
	if _, ok := store.(*state.Local); ok {
		return store.Read(ctx)
	}
	deadline := time.Now().Add(initialStateWait)
	for {
		doc, err := readState(ctx, store)
		if err == nil || errors.Is(err, state.ErrInvalid) || ctx.Err() != nil || time.Now().After(deadline) {
			return doc, err
		}
		log.Warn("reading the state; trying again", "error", err)
		sleep(ctx, time.Second)
	}
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
	store   state.Store
	rec     *status.Recorder
	serials *serials
	prov    *providers
	// ha is set with the etcd backend (leader.go), so instead in
	// scale-out mode (scaleout.go).
	ha *ha
	so *scaleOut
	// acting keeps a group's pass and the syncs of its followers apart
	// (acting.go).
	acting acting
	// gc lowers the GC percent while nothing is in flight (gc.go).
	gc gcTuner
	// listings are the groups' listings by passes that acted on nothing,
	// for the syncs (listings.go).
	listings listings
	// rendered remembers the enrollments' rendered authorization
	// properties across the plans of passes and syncs.
	rendered plan.RenderMemo

	// Into the loop: groups whose provider pushed a change, documents
	// written by other processes, passes finished.
	events   chan string
	docs     chan *state.Document
	done     chan passResult
	followed chan followResult
	// scaled takes the autoscale evaluations' results (autoscale.go).
	scaled chan scaleResult

	// bg owns the poller and the subscriptions.
	bg sync.WaitGroup

	// Owned by the loop goroutine.
	//
	// term is the leadership the loop acts for; nil while it follows
	// (and in scale-out mode, whose terms are per object: owned.go).
	// epoch counts the changes of leadership: a group's pass after one
	// starts with a fresh self-healing memory.
	term  *term
	epoch int
	doc   *state.Document
	// stackGen counts the changes of what the followers are synced
	// against (the applied stack and what the state says of them): a
	// sync after one covers all of them.
	stackGen  int
	groups    map[string]*groupSched
	active    int
	scaling   int // autoscale evaluations in flight
	fol       followers
	lockFile  []byte
	resetHost bool
	// reloadWarnings are the stack files' warnings the last reload
	// logged (reload.go), so the same ones are not logged again.
	reloadWarnings string
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
		prov:     newProviders(r, rec, opts.Logger.Named("providers"), opts.CallTimeout),
		gc:       gcTuner{idle: opts.IdleGCPercent},
		events:   make(chan string, 64),
		docs:     make(chan *state.Document),
		done:     make(chan passResult, opts.Parallelism),
		followed: make(chan followResult, 1),
		scaled:   make(chan scaleResult, opts.Parallelism),
		groups:   map[string]*groupSched{},
		lockFile: lockFile,
	}
}
