package autoscale

import (
	"fmt"

	"github.com/infrakit/infrakit/internal/config"
)

// Ownership is what a plan says about an autoscaled group's size.
type Ownership struct {
	Group string `json:"group"`
	// Size is the size the plan converges to.
	Size      int `json:"size"`
	StartSize int `json:"start_size"`
	Min       int `json:"min"`
	Max       int `json:"max"`
	// Kept says Size is the one the autoscaler (or group scale -override)
	// set, kept by apply; otherwise it is the stack's start size.
	Kept bool `json:"kept"`
	// Note says so in a sentence, for the plan.
	Note string `json:"note"`
}

// Keep returns desired with the size of each autoscaled group replaced by
// the size stored for it, when the group was autoscaled under the same
// start size and bounds when it was stored: apply keeps what the
// autoscaler decided until the stack's size or bounds change. It returns
// desired itself when nothing is kept, and never modifies either stack.
func Keep(desired, stored *config.Stack) (*config.Stack, []Ownership) {
	if desired == nil {
		return nil, nil
	}
	var owned []Ownership
	out := desired
	for i, g := range desired.Groups {
		if g.Autoscale == nil || g.Size == nil {
			continue
		}
		o := Ownership{Group: g.Name, Size: *g.Size, StartSize: g.Autoscale.StartSize, Min: g.Autoscale.Min, Max: g.Autoscale.Max}
		if n, ok := keptSize(g, stored); ok {
			o.Size, o.Kept = n, true
			if n != *g.Size {
				if out == desired {
					cp := *desired
					cp.Groups = append([]*config.Group(nil), desired.Groups...)
					out = &cp
				}
				kept := *g
				kept.Size = &n
				out.Groups[i] = &kept
			}
		}
		o.Note = o.note(stored != nil && stored.Group(g.Name) != nil && stored.Group(g.Name).Autoscale != nil)
		owned = append(owned, o)
	}
	return out, owned
}

// keptSize is the stored size of g when g was stored autoscaled with the
// same start size and bounds.
func keptSize(g *config.Group, stored *config.Stack) (int, bool) {
	if stored == nil {
		return 0, false
	}
	s := stored.Group(g.Name)
	if s == nil || s.Autoscale == nil || s.Size == nil {
		return 0, false
	}
	a, b := g.Autoscale, s.Autoscale
	if a.StartSize != b.StartSize || a.Min != b.Min || a.Max != b.Max {
		return 0, false
	}
	return *s.Size, true
}

func (o Ownership) note(wasAutoscaled bool) string {
	bounds := fmt.Sprintf("min %d, max %d", o.Min, o.Max)
	switch {
	case o.Kept:
		return fmt.Sprintf("the autoscaler owns the size of group %q: %d (%s); apply keeps it", o.Group, o.Size, bounds)
	case wasAutoscaled:
		return fmt.Sprintf("the size or bounds of group %q changed: apply sets its start size %d (%s), then the autoscaler owns it",
			o.Group, o.Size, bounds)
	default:
		return fmt.Sprintf("group %q starts at size %d (%s), then the autoscaler owns its size", o.Group, o.Size, bounds)
	}
}
