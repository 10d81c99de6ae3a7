package group

import (
	"github.com/infrakit/infrakit/internal/config"
)

// DesiredFromConfig is the Desired of a configured group. Its ConfigHash is
// the group's (*config.Group).ConfigHash, the value members are tagged with
// (tags.ConfigHash), so there is one definition of "out of date".
func DesiredFromConfig(g *config.Group) Desired {
	d := Desired{
		LogicalIDs:       g.LogicalIDs,
		ConfigHash:       g.ConfigHash(),
		MaxParallel:      g.Update.MaxParallel,
		MaxUnavailable:   g.Update.MaxUnavailable,
		ReplaceUnhealthy: g.Health.ReplaceUnhealthy,
	}
	if g.Size != nil {
		size := *g.Size
		d.Size = &size
	}
	return d
}
