// Package operation runs infrakit's operations (plan, apply, destroy, and the
// group verbs) over one working directory: it loads the stack, reads and
// locks the state, talks to providers through the plugin host, and drives the
// group controllers. Commands stay thin: they parse flags, call a Runner and
// render what it returns.
package operation

import (
	"context"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/plan"
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
	// LockTimeout is how long to wait for the state lock.
	LockTimeout time.Duration
	// Operation names the lock holder ("apply", "group scale").
	Operation string
	// Progress, when set, receives progress events while work is done.
	Progress func(Progress)
}

// Progress is one progress event: an instance created, destroyed or failed.
type Progress struct {
	Group  string
	Action string // "create", "destroy", "drain", "error"
	ID     instance.ID
	Err    error
	// Done and Total count work items of the current group step.
	Done, Total int
}

// Runner runs operations. Close it to stop the providers it launched.
type Runner struct{ _ struct{} }

// New prepares a Runner. It does not load the stack or launch providers yet.
func New(ctx context.Context, opts Options) (*Runner, error) { panic("TODO") }

// Close stops every provider the runner launched.
func (r *Runner) Close() error { panic("TODO") }

// LoadStack loads and validates the stack files (with the providers' schemas).
// The returned files let the caller render diagnostics with the source shown.
func (r *Runner) LoadStack(ctx context.Context) (*config.Stack, map[string]*hcl.File, hcl.Diagnostics) {
	panic("TODO")
}

// PlanMode selects what Plan computes.
type PlanMode struct {
	// Destroy plans the destruction of everything in state (infrakit destroy).
	Destroy bool
}

// Plan observes the world and computes the plan for the loaded stack.
func (r *Runner) Plan(ctx context.Context, st *config.Stack, mode PlanMode) (*plan.Plan, error) {
	panic("TODO")
}

// ApplyResult is what Apply did.
type ApplyResult struct {
	Created, Destroyed, Rolled int
	// Failed lists per-instance failures; the rest of the work proceeded.
	Failed []Failure
}

// Failure is one provider call that failed.
type Failure struct {
	Group string
	ID    instance.ID
	Err   error
}

// Apply takes the state lock, refuses a stale plan, executes it with bounded
// parallelism and writes state in batches, so an interrupt loses nothing created.
func (r *Runner) Apply(ctx context.Context, p *plan.Plan) (*ApplyResult, error) { panic("TODO") }

// State reads the current state document.
func (r *Runner) State(ctx context.Context) (*state.Document, error) { panic("TODO") }

// GroupView is a group as the providers report it now.
type GroupView struct {
	Name      string
	Size      *int
	Freed     bool
	Instances []group.Member
	// Tags of each member, by ID.
	Tags map[instance.ID]map[string]string
}

// Groups lists every group in state with its members as the providers see them.
func (r *Runner) Groups(ctx context.Context) ([]GroupView, error) { panic("TODO") }

// Group describes one group.
func (r *Runner) Group(ctx context.Context, name string) (*GroupView, error) { panic("TODO") }

// Scale sets a group's desired size in state and converges before returning.
func (r *Runner) Scale(ctx context.Context, name string, size int) (*ApplyResult, error) {
	panic("TODO")
}

// DestroyInstances destroys the given members and lowers the group's desired
// size by as many (for cattle), so the group does not grow them back.
func (r *Runner) DestroyInstances(ctx context.Context, name string, ids []instance.ID) (*ApplyResult, error) {
	panic("TODO")
}

// FreeGroup stops managing a group; nothing is touched. A later apply resumes.
func (r *Runner) FreeGroup(ctx context.Context, name string) error { panic("TODO") }

// DestroyGroup destroys every member of a group and removes it from state.
func (r *Runner) DestroyGroup(ctx context.Context, name string) (*ApplyResult, error) {
	panic("TODO")
}
