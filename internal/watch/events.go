package watch

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/execute"
	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/internal/watch/heal"
	"github.com/infrakit/infrakit/internal/watch/status"
	"github.com/infrakit/infrakit/sdk/instance"
)

// finishRoll ends a roll once nothing is out of date and none of its
// replacements is in flight.
func (s *service) finishRoll(gs *groupState, outdated int, log hclog.Logger) {
	if gs.rolling && outdated == 0 && rollingInFlight(gs.inflight) == 0 {
		gs.rolling = false
		log.Info("rolling update done")
		s.rec.Event(status.Event{Kind: status.EventRollDone, Group: gs.name, Message: "every instance has the group's configuration"})
	}
}

// vanishedReplaced records a "replaced" event for each vanished member
// the pass re-creates (creates, the replacements of unhealthy members left
// out).
func (s *service) vanishedReplaced(gs *groupState, creates int, log hclog.Logger) {
	n := min(max(creates, 0), len(gs.vanished))
	for _, id := range gs.vanished[:n] {
		log.Info("replacing instance", "instance", id, "reason", status.ReasonVanished)
		s.rec.Replacement(gs.name, id, status.ReasonVanished, "vanished from the provider's listing")
	}
	gs.vanished = gs.vanished[n:]
}

// healEvents logs what the self-healing policy noticed and records it.
// The brake's own events are recorded by the Recorder from SetGroup.
// Members that left the listing without leaving the group short (owed is
// 0: another command destroyed them, or the group shrank) are no news.
func (s *service) healEvents(gs *groupState, evs []heal.Event, owed int, log hclog.Logger) {
	for _, e := range evs {
		ev := status.Event{Time: e.Time, Group: gs.name, Kind: status.EventKind(e.Kind), Message: e.Message}
		if len(e.IDs) == 1 {
			ev.Instance = e.IDs[0]
		}
		switch e.Kind {
		case heal.KindBrakeEngaged:
			gs.brakeReason = e.Message
			log.Warn("mass-failure brake engaged", "reason", e.Message, "instances", e.IDs)
			continue
		case heal.KindBrakeReleased:
			gs.brakeReason = ""
			log.Info("mass-failure brake released", "reason", e.Message)
			continue
		case heal.KindBudgetExhausted, heal.KindReplaceHeld:
			ev.Kind = status.EventRateLimited
			log.Warn("replacements held", "reason", e.Message, "instances", e.IDs)
		case heal.KindVanished:
			if owed == 0 {
				log.Debug("members left the listing; the group is not short of them", "instances", e.IDs)
				continue
			}
			gs.vanished = append(gs.vanished, e.IDs...)
			log.Warn("instances vanished", "instances", e.IDs)
		default:
			log.Info(e.Message, "instances", e.IDs)
		}
		s.rec.Event(ev)
	}
}

// announce logs and records what a pass starts (w, as planned): the
// replacements of unhealthy members, the vanished members it re-creates,
// a roll batch.
func (s *service) announce(gs *groupState, spec groupSpec, w plan.GroupWork, log hclog.Logger) {
	var batch []instance.ID
	for _, r := range w.Replace {
		switch r.Reason {
		case group.ReasonUnhealthy:
			msg := fmt.Sprintf("unhealthy past the %s grace", time.Duration(spec.cfg.Health.Grace))
			log.Info("replacing instance", "instance", r.Old, "reason", r.Reason)
			s.rec.Replacement(gs.name, r.Old, group.ReasonUnhealthy, msg)
		case group.ReasonRollingUpdate:
			batch = append(batch, r.Old)
		}
	}
	s.vanishedReplaced(gs, len(w.Create), log)
	if len(batch) == 0 {
		return
	}
	d := group.DesiredFromConfig(spec.cfg)
	if !gs.rolling {
		gs.rolling = true
		msg := fmt.Sprintf("rolling update started: out-of-date instances are replaced %d at a time at most (max_parallel %d, max_unavailable %d)",
			max(min(d.MaxParallel, d.MaxUnavailable), 1), max(d.MaxParallel, 1), max(d.MaxUnavailable, 1))
		log.Info(msg)
		s.rec.Event(status.Event{Kind: status.EventRollStarted, Group: gs.name, Message: msg})
	}
	for _, id := range batch {
		log.Info("replacing instance", "instance", id, "reason", group.ReasonRollingUpdate)
		s.rec.Replacement(gs.name, id, group.ReasonRollingUpdate, "out of date: its configuration hash is not the group's")
	}
}

// actions turns the executor's progress into log lines and events.
type actions struct {
	group    string
	provider string
	log      hclog.Logger
	rec      *status.Recorder
	failed   func(method string, err error)
}

func (a *actions) progress(ev execute.Event) {
	s := ev.Step
	if ev.Status == execute.StatusFailed {
		a.log.Error("step failed", "step", s.Kind, "object", s.Object, "instance", ev.Instance, "error", ev.Err)
		a.rec.Event(status.Event{Kind: status.EventError, Group: a.group, Instance: ev.Instance, Provider: s.Provider, Message: errText(ev.Err)})
		switch s.Kind {
		case plan.StepProvision:
			a.failed("Provision", ev.Err)
		case plan.StepDestroy:
			a.failed("Destroy", ev.Err)
		}
		return
	}
	if ev.Status != execute.StatusDone {
		return
	}
	switch s.Kind {
	case plan.StepProvision:
		a.log.Info("created instance", "instance", ev.Instance, "logical_id", s.LogicalID)
		a.rec.Event(status.Event{Kind: status.EventCreated, Group: a.group, Instance: ev.Instance, Message: "provisioned"})
	case plan.StepDrain:
		// Scale-downs are left out: a large one would double its events
		// and push the ones operators look for out of the event ring.
		if s.Reason != string(group.ReasonScaleDown) {
			a.rec.Event(status.Event{Kind: status.EventDrained, Group: a.group, Instance: s.Instance, Reason: s.Reason,
				Message: "drained by every flavor before the destroy"})
		}
	case plan.StepDestroy:
		a.log.Info("destroyed instance", "instance", s.Instance, "reason", s.Reason)
		a.rec.Event(status.Event{Kind: status.EventDestroyed, Group: a.group, Instance: s.Instance, Reason: s.Reason,
			Message: "drained and destroyed"})
	}
}

// followerLines say, one per load balancer of an ingress and one per
// enrollment, what a run did to them ("ingress \"web\": lb1: 1 backend
// registered, 1 backend deregistered").
func followerLines(p *plan.Plan, r *execute.Result) []string {
	type tally struct{ published, unpublished, registered, deregistered, authorized, revoked int }
	var order []string
	by := map[string]*tally{}
	for _, st := range p.Steps {
		if r.Status[st.ID-1] != execute.StatusDone {
			continue
		}
		kind, name := plan.SplitObject(st.Object)
		var key string
		switch kind {
		case plan.KindIngress:
			key = fmt.Sprintf("ingress %q: %s", name, st.LoadBalancer)
		case plan.KindEnrollment:
			key = fmt.Sprintf("enrollment %q", name)
		default:
			continue
		}
		t := by[key]
		if t == nil {
			t = &tally{}
			by[key] = t
			order = append(order, key)
		}
		switch st.Kind {
		case plan.StepPublish, plan.StepRepublish:
			t.published++
		case plan.StepUnpublish:
			t.unpublished++
		case plan.StepRegister:
			t.registered++
		case plan.StepDeregister:
			t.deregistered++
		case plan.StepAuthorize:
			t.authorized++
		case plan.StepRevoke:
			t.revoked++
		}
	}
	lines := make([]string, 0, len(order))
	for _, key := range order {
		t := by[key]
		var parts []string
		for _, x := range []struct {
			n    int
			noun string
		}{{t.published, "route%s published"}, {t.unpublished, "route%s unpublished"}, {t.registered, "backend%s registered"},
			{t.deregistered, "backend%s deregistered"}, {t.authorized, "authorization%s made"}, {t.revoked, "authorization%s revoked"}} {
			if x.n > 0 {
				parts = append(parts, fmt.Sprintf("%d "+x.noun, x.n, pluralS(x.n)))
			}
		}
		if len(parts) > 0 {
			lines = append(lines, key+": "+strings.Join(parts, ", "))
		}
	}
	return slices.Clip(lines)
}

func pluralS(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
