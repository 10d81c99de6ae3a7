package watch

import (
	"context"
	"fmt"
	"time"

	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/watch/status"
)

// observe is a follower's pass: it lists the group (with health on full
// passes, when the group replaces unhealthy members), through the providers
// it keeps running for the day it leads, and shows what it saw in the
// status. It decides nothing and acts on nothing, and keeps no self-healing
// memory: the leader's judgement is the leader's.
func (s *service) observe(ctx context.Context, gs *groupState, spec groupSpec, full bool) passResult {
	start := time.Now()
	cfg := spec.cfg
	d := group.DesiredFromConfig(cfg)
	rep := status.GroupReport{Name: gs.name, Desired: d, Start: start, Rolling: status.Rolling{Stopped: spec.updateStopped}}
	res := passResult{name: gs.name}
	report := func(err error) passResult {
		if err != nil && ctx.Err() == nil {
			s.log.Debug("observing failed", "group", gs.name, "error", err)
			res.err, rep.Err = err, err
		}
		rep.Duration = time.Since(start)
		s.rec.SetGroup(rep)
		return res
	}
	for _, key := range providerKeys(cfg) {
		if _, err := s.prov.client(ctx, key); err != nil {
			return report(fmt.Errorf("group %q: %w", gs.name, err))
		}
	}
	inst, err := s.runner.Instances(ctx, spec.stack, cfg)
	if err != nil {
		return report(err)
	}
	_, members, err := inst.ObserveDescriptions(ctx, full && d.ReplaceUnhealthy)
	if err != nil {
		s.prov.failed(ctx, cfg.Instance.Provider, "DescribeInstances", err)
		return report(err)
	}
	if ctx.Err() != nil {
		return report(nil)
	}
	rep.Members = members
	rep.Rolling.Outdated = len(group.Decide(d, members).Roll)
	return report(nil)
}

// healthMatters reports whether a pass that listed members without health
// must ask it: a roll and a scale-down choose by health.
func healthMatters(d group.Desired, members []group.Member, gs *groupState, spec groupSpec) bool {
	if len(gs.inflight) > 0 {
		return true
	}
	dec := group.Decide(d, members)
	if len(dec.Roll) > 0 && !spec.updateStopped && gs.halted == "" {
		return true
	}
	for _, x := range dec.Destroy {
		if x.Reason == group.ReasonScaleDown {
			return true
		}
	}
	return false
}
