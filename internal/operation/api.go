// Package operation runs infrakit's operations (plan, apply, destroy, and the
// group verbs) over one working directory: it loads the stack, reads and
// locks the state, talks to providers through the plugin host, and drives the
// group controllers. Commands stay thin: they parse flags, call a Runner and
// render what it returns.
package operation

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/internal/pluginhost"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/sdk/instance"
)

// Options configure a Runner.
type Options struct {
	// WorkDir holds the stack files, the state and .infrakit/.
	WorkDir string
	// ExtraFiles are stack files named with -f, read beside WorkDir's.
	ExtraFiles []string
	Logger     hclog.Logger
	// Parallelism bounds provider calls in flight (default 10).
	Parallelism int
	// LockTimeout is how long to wait for the state lock; zero takes it
	// only if it is free.
	LockTimeout time.Duration
	// Operation names the lock holder ("apply", "group scale").
	Operation string
	// Progress, when set, receives progress events while work is done, from
	// one goroutine at a time.
	Progress func(Progress)
	// StateWriteInterval spaces the state writes of a long operation
	// (default 1s): what providers report done is recorded in memory at
	// once and written at most this often (less often when a write takes
	// more than a tenth of it), plus once at the end, also after an
	// interrupt. Writing per instance would rewrite the whole state
	// thousands of times. Instances created after the last write of a
	// process that crashes are still found by their tags.
	StateWriteInterval time.Duration
	// HostEnv is added to every provider's environment ("KEY=value").
	HostEnv []string
	// CallTimeout bounds each provider call of the group controllers
	// (zero: group.DefaultCallTimeout).
	CallTimeout time.Duration
}

// Progress is one progress event: an instance created, destroyed or failed.
type Progress struct {
	Group  string
	Action string // "create", "destroy", or "error" (a failed call; Err says which)
	ID     instance.ID
	Err    error
	// Done and Total count work items of the current group step.
	Done, Total int
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
	// backend is the recorded backend; store is it opened, and closeStore
	// closes it (the etcd connection).
	backend    *config.Backend
	store      state.Store
	closeStore func() error

	mu     sync.Mutex
	host   *pluginhost.Host
	closed bool
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
	// Freed groups are not managed, so they are left alone.
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

// ApplyResult is what Apply did.
type ApplyResult struct {
	Created, Destroyed, Rolled int
	// Failed lists per-instance failures; the rest of the work proceeded.
	Failed []Failure
	// Controllers is what was done to load balancers and authorizers.
	Controllers ControllerResult
}

// Failure is one provider call that failed.
type Failure struct {
	Group string
	ID    instance.ID
	Err   error
}

// Apply takes the state lock, refuses a stale plan, executes it with bounded
// parallelism and writes state in batches, so an interrupt loses nothing created.
//
// Groups are applied one after another in dependency order, each with up to
// Parallelism provider calls at once. When ctx is cancelled no new call
// starts, the calls in flight finish, state is written with everything done,
// and the context's error is returned (with the partial result).
func (r *Runner) Apply(ctx context.Context, p *plan.Plan) (*ApplyResult, error) {
	return r.apply(ctx, p)
}

// State reads the current state document.
func (r *Runner) State(ctx context.Context) (*state.Document, error) { return r.store.Read(ctx) }

// GroupView is a group as the providers report it now.
type GroupView struct {
	Name string
	// Size is the desired size of cattle (nil for pets).
	Size  *int
	Freed bool
	// ConfigHash is the configuration hash members should carry; members
	// with another are out of date (empty when the configuration is not in
	// the state).
	ConfigHash string
	// UpdateStopped is set after `group stop-update`, until the next apply.
	UpdateStopped bool
	// Instances are the live members (terminating ones left out), by ID,
	// with their health.
	Instances []group.Member
	// Tags of each member, by ID.
	Tags map[instance.ID]map[string]string
}

// Groups lists every group in state with its members as the providers see them.
func (r *Runner) Groups(ctx context.Context) ([]GroupView, error) { return r.groups(ctx) }

// Group describes one group.
func (r *Runner) Group(ctx context.Context, name string) (*GroupView, error) {
	return r.group(ctx, name)
}

// Scale sets a group's desired size in state and converges before returning:
// it creates or destroys members (and replaces unhealthy ones when the group
// says so) but does not roll out-of-date members; apply does that.
func (r *Runner) Scale(ctx context.Context, name string, size int) (*ApplyResult, error) {
	return r.scale(ctx, name, size)
}

// DestroyInstances destroys the given members and lowers the group's desired
// size by as many (for cattle), so the group does not grow them back. Every
// ID must be a live member of the group; otherwise the error names the
// strangers and nothing is destroyed. Pets keep their logical IDs: a
// destroyed pet is re-created by the next apply (that is how a pet is rebuilt).
func (r *Runner) DestroyInstances(ctx context.Context, name string, ids []instance.ID) (*ApplyResult, error) {
	return r.destroyInstances(ctx, name, ids)
}

// FreeGroup stops managing a group; nothing is touched. A later apply resumes.
func (r *Runner) FreeGroup(ctx context.Context, name string) error { return r.freeGroup(ctx, name) }

// DestroyGroup destroys every member of a group and removes it from state
// (its record and its configuration in the stored stack). If some member
// cannot be destroyed the group stays in state and the error says why.
func (r *Runner) DestroyGroup(ctx context.Context, name string) (*ApplyResult, error) {
	return r.destroyGroup(ctx, name)
}
