package group

import (
	"github.com/infrakit/infrakit/internal/tags"
	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
)

// MembersFromDescriptions turns what an instance provider listed, and what
// the flavors said about each instance's health, into members.
//
// The logical ID is the one the provider reports, else the tags.LogicalID
// tag; the config hash is the tags.ConfigHash tag (empty when missing, which
// makes an adopted instance out of date). An instance with no health entry
// has flavor.HealthUnknown; one whose provider reports no state is taken as
// running. The order of descs is kept.
func MembersFromDescriptions(descs []instance.Description, health map[instance.ID]flavor.Health) []Member {
	out := make([]Member, 0, len(descs))
	for _, d := range descs {
		m := Member{
			ID:         d.ID,
			LogicalID:  d.Tags[tags.LogicalID],
			ConfigHash: d.Tags[tags.ConfigHash],
			State:      d.State,
			Health:     health[d.ID],
			Address:    d.Address,
		}
		if d.LogicalID != nil && *d.LogicalID != "" {
			m.LogicalID = string(*d.LogicalID)
		}
		if m.State == "" {
			m.State = instance.StateRunning
		}
		if m.Health == "" {
			m.Health = flavor.HealthUnknown
		}
		out = append(out, m)
	}
	return out
}
