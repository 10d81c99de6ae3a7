package enrollment

import (
	"fmt"

	"github.com/infrakit/infrakit/internal/controller"
)

// Steps renders the changes as plan steps in the order the Controller takes
// them: every authorize (new ones, then re-authorizations), then every revoke,
// after the settings updated. An authorize targets the member's instance ID;
// a revoke the authorization's ID; an update the attribute.
func (c Changes) Steps() []controller.Step {
	var out []controller.Step
	for _, s := range c.Settings {
		out = append(out, controller.Step{Action: "update", Target: s.Attribute, Reason: s.Old + " -> " + s.New})
	}
	for _, a := range c.Authorize {
		out = append(out, controller.Step{Action: "authorize", Target: string(a.SourceID), Reason: hostReason(a.Host)})
	}
	for _, r := range c.Reauthorize {
		out = append(out, controller.Step{Action: "replace", Target: string(r.New.SourceID),
			Reason: fmt.Sprintf("authorization %s is out of date", r.Old.ID)})
	}
	for _, r := range c.Reauthorize {
		out = append(out, controller.Step{Action: "revoke", Target: r.Old.ID,
			Reason: fmt.Sprintf("%s, member %s", ReasonReplaced, SourceOf(r.Old))})
	}
	for _, r := range c.Revoke {
		out = append(out, controller.Step{Action: "revoke", Target: r.Authorization.ID,
			Reason: fmt.Sprintf("%s, member %s", r.Reason, SourceOf(r.Authorization))})
	}
	return out
}

func hostReason(host string) string {
	if host == "" {
		return ""
	}
	return "host " + host
}
