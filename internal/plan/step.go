package plan

import (
	"fmt"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
	"github.com/infrakit/infrakit/sdk/nfs"
)

// A plan's work is a graph of steps. Each step is one provider call (or one
// state write) with the steps it must wait for; the executor runs every
// step whose dependencies are done, with bounded parallelism, and skips
// the dependents of a step that failed. The order that matters to users
// is in the dependencies, never in the order steps are listed:
//
//   - make before break: a member that replaces another is provisioned,
//     awaited running and healthy, registered with every load balancer and
//     authorized before the member it replaces is deregistered, revoked,
//     drained and destroyed;
//   - a member that leaves is deregistered from every load balancer and its
//     authorizations revoked before it is drained, and drained before it
//     is destroyed (the drain waits the group's drain_delay after a
//     deregistration, so requests in flight finish);
//   - a pet is never two: its old instance is destroyed before the new one
//     with the same logical ID is provisioned (its authorization is kept
//     until the new one is authorized);
//   - a rolling update's next batch starts once the previous batch is done;
//   - the intent (the stack to store, the records of teardowns) is written
//     by the first step, before any provider is called.

// StepID identifies a step within its plan: Plan.Steps[id-1]. Zero is no step.
type StepID int

// StepKind is what a step does.
type StepKind string

// Step kinds.
const (
	// StepRecord writes state changes (Changes). The first step of a plan
	// that changes anything is the record of its intent.
	StepRecord StepKind = "record"
	// StepProvision creates a member of Group (a pet when LogicalID is set),
	// replacing the member Replaces when that is set.
	StepProvision StepKind = "provision"
	// StepAwait waits until the instance Made provisioned is listed running
	// (and, when Healthy, judged healthy by every flavor).
	StepAwait StepKind = "await"
	// StepPublish publishes Route on LoadBalancer.
	StepPublish StepKind = "publish"
	// StepRepublish unpublishes OldRoute and publishes Route on its port.
	StepRepublish StepKind = "republish"
	// StepUnpublish unpublishes Route.
	StepUnpublish StepKind = "unpublish"
	// StepHealthCheck configures HealthCheck on LoadBalancer.
	StepHealthCheck StepKind = "health-check"
	// StepRegister registers Backend (or the instance Made, at the address
	// it is listed with) on LoadBalancer.
	StepRegister StepKind = "register"
	// StepDeregister deregisters Backend from LoadBalancer.
	StepDeregister StepKind = "deregister"
	// StepAuthorize makes Authorization at the enrollment's target, or, for
	// the instance Made, the authorization rendered for it once it runs.
	StepAuthorize StepKind = "authorize"
	// StepRevoke revokes Authorization.
	StepRevoke StepKind = "revoke"
	// StepDrain drains Instance through every flavor of Group.
	StepDrain StepKind = "drain"
	// StepDestroy destroys Instance of Group for Reason.
	StepDestroy StepKind = "destroy"
)

// Step is one unit of work. Which fields are set depends on Kind.
type Step struct {
	ID   StepID   `json:"id"`
	Kind StepKind `json:"kind"`
	// Object is the stack object the step is done for, as users address
	// it: "group.cattle", "ingress.test.com", "enrollment.nfs".
	Object string `json:"object"`
	// Provider is the provider key the step calls (for a record, none):
	// the per-provider limit counts it.
	Provider string `json:"provider,omitempty"`
	// After are the steps that must be done first.
	After []StepID `json:"after,omitempty"`

	// Group is the group whose member the step concerns.
	Group string `json:"group,omitempty"`
	// Instance is the member acted on, when it exists before the plan runs.
	Instance instance.ID `json:"instance,omitempty"`
	// Made is the provision step whose instance the step acts on (its ID
	// is known once that step is done).
	Made StepID `json:"made,omitempty"`
	// Awaited is the await whose listing gives the instance acted on: its
	// address (a backend) and what an authorization is rendered from. A
	// register or authorize with it waits for it.
	Awaited StepID `json:"awaited,omitempty"`
	// LogicalID is the pet a provision creates.
	LogicalID string `json:"logical_id,omitempty"`
	// Replaces is the member a provision replaces (a rolling update or a
	// heal); Reason says why.
	Replaces instance.ID `json:"replaces,omitempty"`
	// Reason is why a member is destroyed (or replaced), or an
	// authorization revoked.
	Reason string `json:"reason,omitempty"`
	// Healthy makes an await wait for health too (replacements).
	Healthy bool `json:"healthy,omitempty"`
	// Timeout bounds an await (zero: the executor's default): a
	// replacement's is its group's update.health_timeout.
	Timeout config.Duration `json:"timeout,omitempty"`
	// DrainDelay is how long a drain waits after the member was
	// deregistered from a load balancer by this plan.
	DrainDelay config.Duration `json:"drain_delay,omitempty"`

	// LoadBalancer is the loadbalancer block acted on.
	LoadBalancer string                    `json:"loadbalancer,omitempty"`
	Route        *loadbalancer.Route       `json:"route,omitempty"`
	OldRoute     *loadbalancer.Route       `json:"old_route,omitempty"`
	HealthCheck  *loadbalancer.HealthCheck `json:"health_check,omitempty"`
	Backend      *loadbalancer.Backend     `json:"backend,omitempty"`

	// Enrollment is the enrollment acted on; TargetType is the target's
	// type at Provider.
	Enrollment    string             `json:"enrollment,omitempty"`
	TargetType    string             `json:"target_type,omitempty"`
	Authorization *nfs.Authorization `json:"authorization,omitempty"`

	// Changes are the state changes of a record step.
	Changes []StateChange `json:"changes,omitempty"`
}

// Subject is the instance a step acts on, for people: its ID, or "the
// instance of step N" when it is made by the plan.
func (s Step) Subject() string {
	switch {
	case s.Instance != "":
		return string(s.Instance)
	case s.Made != 0:
		return fmt.Sprintf("(new, step %d)", s.Made)
	}
	return ""
}

// String is the step for people and logs: "7 register group web's
// (new, step 3) on lb1 after 5".
func (s Step) String() string {
	out := fmt.Sprintf("%d %s %s", s.ID, s.Kind, s.Object)
	if sub := s.Subject(); sub != "" {
		out += " " + sub
	}
	switch {
	case s.LoadBalancer != "" && s.Route != nil:
		out += fmt.Sprintf(" on %s:%d", s.LoadBalancer, s.Route.LoadBalancerPort)
	case s.LoadBalancer != "":
		out += " on " + s.LoadBalancer
	}
	if len(s.After) > 0 {
		out += fmt.Sprintf(" after %v", s.After)
	}
	return out
}

// Calls reports whether the step calls a provider.
func (s Step) Calls() bool { return s.Kind != StepRecord }

// Counts counts what a plan does or did, the same fields for both: a plan's
// Summary counts its steps, an apply's result counts the steps that were
// done, so the two agree field by field when every step succeeds.
type Counts struct {
	// Add counts members provisioned that replace none; Roll the members
	// replaced by a rolling update; Replace those replaced for their
	// health; Destroy the members destroyed that nothing replaces.
	Add     int `json:"add"`
	Roll    int `json:"roll"`
	Replace int `json:"replace"`
	Destroy int `json:"destroy"`
	// Routes published, republished (new settings on the same port) and
	// unpublished.
	Publish   int `json:"publish"`
	Republish int `json:"republish"`
	Unpublish int `json:"unpublish"`
	// Backends registered and deregistered (a re-addressed backend counts
	// once in each).
	Register   int `json:"register"`
	Deregister int `json:"deregister"`
	// Authorizations made and revoked (a re-authorization counts once in
	// each).
	Authorize int `json:"authorize"`
	Revoke    int `json:"revoke"`
}

// Count counts s into c.
func (c *Counts) Count(s Step) {
	switch s.Kind {
	case StepProvision:
		switch {
		case s.Replaces == "" && s.Reason == "":
			c.Add++
		case s.Reason == string(instance.ReasonRollingUpdate):
			c.Roll++
		default:
			c.Replace++
		}
	case StepDestroy:
		if !replaced(s) {
			c.Destroy++
		}
	case StepPublish:
		c.Publish++
	case StepRepublish:
		c.Republish++
	case StepUnpublish:
		c.Unpublish++
	case StepRegister:
		c.Register++
	case StepDeregister:
		c.Deregister++
	case StepAuthorize:
		c.Authorize++
	case StepRevoke:
		c.Revoke++
	}
}

// replaced reports whether a destroy is the second half of a replacement
// (its provision is counted instead).
func replaced(s Step) bool {
	return s.Reason == string(instance.ReasonRollingUpdate) || s.Reason == string(instance.ReasonUnhealthy)
}

// Instances is the number of members changed: added, rolled, replaced or
// destroyed.
func (c Counts) Instances() int { return c.Add + c.Roll + c.Replace + c.Destroy }

// Followers is the number of load balancer and authorization changes.
func (c Counts) Followers() int {
	return c.Publish + c.Republish + c.Unpublish + c.Register + c.Deregister + c.Authorize + c.Revoke
}

// Plus is c and o summed field by field.
func (c Counts) Plus(o Counts) Counts {
	return Counts{
		Add: c.Add + o.Add, Roll: c.Roll + o.Roll, Replace: c.Replace + o.Replace, Destroy: c.Destroy + o.Destroy,
		Publish: c.Publish + o.Publish, Republish: c.Republish + o.Republish, Unpublish: c.Unpublish + o.Unpublish,
		Register: c.Register + o.Register, Deregister: c.Deregister + o.Deregister,
		Authorize: c.Authorize + o.Authorize, Revoke: c.Revoke + o.Revoke,
	}
}

// CountSteps counts steps.
func CountSteps(steps []Step) Counts {
	var c Counts
	for _, s := range steps {
		c.Count(s)
	}
	return c
}
