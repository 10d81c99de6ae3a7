package group

import (
	"context"
	"fmt"
	"maps"
	"strings"

	"github.com/infrakit/infrakit/internal/tags"
	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
)

// Prepared is a new member's spec as its flavors prepared it, ready to be
// provisioned, or why it could not be prepared.
type Prepared struct {
	LogicalID string
	Spec      instance.Spec
	Err       error
}

// Provision prepares a member's spec through every flavor and provisions
// it; the member returned is pending, of unknown health.
func (c *Instances) Provision(ctx context.Context, logicalID string) (Member, error) {
	m, _, err := c.ProvisionDescribed(ctx, logicalID)
	return m, err
}

// ProvisionDescribed is Provision, also returning the new instance as the
// provider described it when it made it (instance.DescribingProvisioner):
// with no State when the provider said nothing of it.
func (c *Instances) ProvisionDescribed(ctx context.Context, logicalID string) (Member, instance.Description, error) {
	return c.ProvisionPrepared(ctx, c.PrepareBatch(ctx, []string{logicalID})[0])
}

// PreparesAhead reports whether every flavor of the group prepares ahead
// (Flavor.PrepareAhead): only then may PrepareBatch prepare several members
// before any of them is provisioned.
func (c *Instances) PreparesAhead() bool {
	for _, f := range c.plugins.Flavors {
		if !f.PrepareAhead {
			return false
		}
	}
	return true
}

// PrepareBatch prepares a member's spec per logical ID ("" for cattle), in
// order, each flavor all of them in one call (flavor.PrepareAll: one
// PrepareBatch for a provider). A member whose preparing fails fails alone.
//
// The flavors combine in order: each gets the spec as the previous ones left
// it, with Init cleared; tags are merged (later wins) and the init scripts
// are concatenated here, so a flavor that sets rather than appends Init
// cannot drop another's lines. infrakit's own tags are put last, so no
// flavor can change what group a member belongs to.
func (c *Instances) PrepareBatch(ctx context.Context, logicalIDs []string) []Prepared {
	s := c.prepared()
	out := make([]Prepared, len(logicalIDs))
	items := make([]flavor.PrepareItem, len(logicalIDs))
	alive := make([]int, len(logicalIDs))
	for i, lid := range logicalIDs {
		out[i].LogicalID = lid
		items[i] = flavor.PrepareItem{Spec: s.specOf(lid), Index: flavor.Index{Group: s.name, Sequence: c.seq.Add(1) - 1}}
		alive[i] = i
	}
	inits := make([][]string, len(logicalIDs))
	for fi, f := range c.plugins.Flavors {
		batch := make([]flavor.PrepareItem, len(alive))
		for k, i := range alive {
			batch[k] = items[i]
		}
		cctx, cancel := context.WithTimeout(ctx, c.opts.CallTimeout)
		prepared, errs := flavor.PrepareAll(cctx, f.Plugin, f.Properties, s.alloc, batch)
		cancel()
		next := alive[:0]
		for k, i := range alive {
			if errs != nil && errs[k] != nil {
				out[i].Err = s.failure(out[i].LogicalID, fmt.Sprintf("flavor %d: prepare", fi+1), errs[k])
				continue
			}
			items[i].Spec, inits[i] = merged(items[i].Spec, prepared[k], inits[i], len(c.plugins.Flavors) > 1)
			next = append(next, i)
		}
		alive = next
	}
	for _, i := range alive {
		out[i].Spec = s.final(items[i].Spec, inits[i], out[i].LogicalID)
	}
	return out
}

// ProvisionPrepared provisions a member PrepareBatch prepared (failing with
// its error when it was not).
func (c *Instances) ProvisionPrepared(ctx context.Context, p Prepared) (Member, instance.Description, error) {
	if p.Err != nil {
		return Member{}, instance.Description{}, p.Err
	}
	s := c.prepared()
	cctx, cancel := context.WithTimeout(ctx, c.opts.CallTimeout)
	d, err := instance.ProvisionDescribed(cctx, c.plugins.Instance, p.Spec)
	cancel()
	if err != nil {
		return Member{}, instance.Description{}, s.failure(p.LogicalID, "provision", err)
	}
	m := Member{ID: d.ID, LogicalID: p.LogicalID, ConfigHash: s.hash, State: instance.StatePending, Health: flavor.HealthUnknown}
	return m, d, nil
}

// failure is why a member for logicalID was not made.
func (s *prepared) failure(logicalID, what string, err error) error {
	if logicalID != "" {
		return fmt.Errorf("group %q: create instance for %q: %s: %w", s.name, logicalID, what, err)
	}
	return fmt.Errorf("group %q: create instance: %s: %w", s.name, what, err)
}

// specOf is the spec a member for logicalID starts from, before the
// flavors.
func (s *prepared) specOf(logicalID string) instance.Spec {
	spec := s.base
	if logicalID != "" {
		lid := instance.LogicalID(logicalID)
		spec.LogicalID = &lid
		spec.Tags = maps.Clone(s.base.Tags)
		spec.Tags[tags.LogicalID] = logicalID
	}
	return spec
}

// merged is spec as a flavor prepared it (out), its init lines taken
// aside and, when several flavors combine, its tags merged over spec's.
func merged(spec, out instance.Spec, inits []string, several bool) (instance.Spec, []string) {
	if out.Init != "" {
		inits = append(inits, out.Init)
	}
	out.Init = ""
	if several {
		m := make(map[string]string, len(spec.Tags)+len(out.Tags))
		maps.Copy(m, spec.Tags)
		maps.Copy(m, out.Tags)
		out.Tags = m
	}
	return out, inits
}

// final is a prepared spec as it is provisioned: the flavors' init lines
// joined, infrakit's own tags put last.
func (s *prepared) final(spec instance.Spec, inits []string, logicalID string) instance.Spec {
	spec.Init = strings.Join(inits, "\n")
	// The prepared tags may be the shared base map (a flavor served in
	// process returns what it was given); never write into that.
	t := make(map[string]string, len(spec.Tags)+4)
	maps.Copy(t, spec.Tags)
	maps.Copy(t, s.memberTags)
	if logicalID != "" {
		t[tags.LogicalID] = logicalID
	}
	spec.Tags = t
	if logicalID == "" {
		if last := s.cattleTags.Load(); last != nil && maps.Equal(*last, t) {
			spec.Tags = *last
		} else {
			s.cattleTags.Store(&t)
		}
		spec.LogicalID = nil
	} else {
		lid := instance.LogicalID(logicalID)
		spec.LogicalID = &lid
	}
	return spec
}
