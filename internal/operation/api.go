// Package operation runs infrakit's operations over one working directory:
// it loads the stack, reads and locks the state, observes what a plan needs
// through the plugin host, computes the plan (package plan) and hands it to
// the executor (package execute). `plan`, `apply`, `destroy` and every
// object verb (the controller.Controller of groups, ingresses and
// enrollments) go through it, so the CLI's verbs act the one way watch's
// passes act. Commands stay thin: they parse flags, call a Runner and
// render what it returns.
package operation

import (
	"context"
	"encoding/json"
	"io"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller"
	"github.com/infrakit/infrakit/internal/execute"
	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/internal/pluginhost"
	"github.com/infrakit/infrakit/internal/state"
)

// Options configure a Runner.
type Options struct {
	// WorkDir holds the stack files, the state and .infrakit/.
	WorkDir string
	// StackDir, when set, holds the stack files instead of WorkDir: the
	// files a remote CLI sent (internal/api), planned against WorkDir's
	// state and providers.
	StackDir string
	// ExtraFiles are stack files named with -f, read beside WorkDir's.
	ExtraFiles []string
	// Inputs are the values of the stack's variables (-var, -var-file,
	// the environment); the directory's variable files are read too.
	Inputs config.Inputs
	Logger hclog.Logger
	// Parallelism bounds provider calls in flight (default 10); a provider
	// block's parallelism bounds the calls to it.
	Parallelism int
	// LockTimeout is how long to wait for the state lock; zero takes it
	// only if it is free.
	LockTimeout time.Duration
	// Operation names the lock holder ("apply", "group scale").
	Operation string
	// LockWait, when set, is told (a line each time) that the command
	// waits for the state lock and who holds it: once when it finds the
	// lock held, then every LockWaitInterval (default
	// DefaultLockWaitInterval). The CLI passes its stderr.
	LockWait         io.Writer
	LockWaitInterval time.Duration
	// ForceLineage adopts a state of another lineage than the one the
	// working directory last used (LineageFile), instead of refusing it.
	ForceLineage bool
	// Progress, when set, receives an event per step finished, from one
	// goroutine at a time.
	Progress func(execute.Event)
	// StateWriteInterval spaces the state writes of a long operation
	// (default 1s): what providers report done is recorded in memory at
	// once and written at most this often (less often when a write takes
	// more than a tenth of it), plus once at the end, also after an
	// interrupt. Instances created after the last write of a process that
	// crashes are still found by their tags.
	StateWriteInterval time.Duration
	// HostEnv is added to every provider's environment ("KEY=value").
	HostEnv []string
	// CallTimeout bounds each provider call (zero: the executor's default).
	CallTimeout time.Duration
	// AwaitTimeout bounds how long a new member may take to run before the
	// steps waiting for it (its backends, its authorizations) give up
	// (zero: the executor's default).
	AwaitTimeout time.Duration
	// KeepProviderConfig keeps the stack files' provider blocks from
	// configuring the providers: only the stacks operations act on (the
	// state's) and SetProviderConfigs do. watch sets it, which validates
	// stack files not yet applied while its providers serve the applied
	// stack.
	KeepProviderConfig bool
}

// Runner runs operations. Close it to stop the providers it launched.
//
// It owns a plugin host, launched on first use from the working directory's
// lock file, and the state backend `infrakit init` recorded in WorkDir
// (stateetcd.ReadRecord): the local file StateFile, or etcd. Its methods
// may be called one after another (plan, then apply); they are not meant to
// run concurrently with each other.
type Runner struct {
	opts Options
	log  hclog.Logger
	// backend is the recorded backend; raw is it opened, store is raw
	// checked against the lineage the directory last used (lineageGuard),
	// and closeStore closes it (the etcd connection).
	backend    *config.Backend
	raw        state.Store
	store      *lineageGuard
	closeStore func() error

	mu     sync.Mutex
	host   *pluginhost.Host
	closed bool
	cache  map[instancesKey]cachedInstances
	// configs are the provider blocks' configurations by key, for the
	// host's processes (see useProviders).
	configs map[string]json.RawMessage
}

// New prepares a Runner. It does not load the stack or launch providers yet.
func New(ctx context.Context, opts Options) (*Runner, error) { return newRunner(opts) }

// Close stops every provider the runner launched.
func (r *Runner) Close() error { return r.close() }

// LoadStack loads and validates the stack files (with the providers' schemas).
// The returned files let the caller render diagnostics with the source shown.
func (r *Runner) LoadStack(ctx context.Context) (*config.Stack, map[string]*hcl.File, hcl.Diagnostics) {
	return r.loadStack(ctx)
}

// PlanMode selects what Plan computes.
type PlanMode struct {
	// Destroy plans the destruction of everything in state (infrakit destroy).
	// The stack passed to Plan may then be nil: the stack in state is used.
	// Freed objects are not managed, so they are left alone.
	Destroy bool
	// Health asks every member's health. Without it health is asked only for
	// groups whose plan depends on it (scale-down picks, rolls), which keeps
	// a no-op plan to one DescribeInstances per group; replacing unhealthy
	// members is then left to `watch`.
	Health bool
}

// Plan observes the world and computes the plan for the loaded stack. Stack
// files that rename the stack the state holds are refused with an
// hcl.Diagnostics error at the stack block (see checkStackName).
func (r *Runner) Plan(ctx context.Context, st *config.Stack, mode PlanMode) (*plan.Plan, error) {
	return r.plan(ctx, st, mode)
}

// Apply takes the state lock, refuses a plan made against another state or
// another world (plan.CheckState, plan.CheckWorld), and executes its steps.
// When ctx is cancelled no new step starts, the calls in flight finish, the
// state records everything done, and the error says so (with the partial
// result).
func (r *Runner) Apply(ctx context.Context, p *plan.Plan) (*controller.Result, error) {
	return r.apply(ctx, p)
}

// State reads the current state document.
func (r *Runner) State(ctx context.Context) (*state.Document, error) { return r.store.Read(ctx) }

// Groups is the controller of the stack's groups.
func (r *Runner) Groups() controller.Group { return groups{r} }

// Ingresses is the controller of the stack's ingresses.
func (r *Runner) Ingresses() controller.Controller { return followers{r, controller.KindIngress} }

// Enrollments is the controller of the stack's enrollments.
func (r *Runner) Enrollments() controller.Controller { return followers{r, controller.KindEnrollment} }
