// Package state keeps infrakit's state document (the desired stack as last
// applied and what was last observed) in a backend with locking, so that the
// CLI and a running watch never act at once and nothing is ever lost.
package state

import (
	"crypto/rand"
	"fmt"
	"slices"
	"strings"

	"github.com/infrakit/infrakit/internal/config"
)

// FormatVersion is the version of the document format this build writes.
// A document with a higher version is refused, never overwritten.
const FormatVersion = 1

// Document is the whole state.
type Document struct {
	Version int `json:"version"`
	// Serial increases by one with every write.
	Serial uint64 `json:"serial"`
	// Lineage is fixed when the state is first created; a document of another
	// lineage is a different state and is refused.
	Lineage string `json:"lineage"`
	// Stack is the desired stack as last applied; `group scale` edits sizes here.
	Stack *config.Stack `json:"stack,omitempty"`
	// Groups is what infrakit knows per group beyond the desired stack.
	Groups map[string]*GroupStatus `json:"groups,omitempty"`
	// Ingresses and Enrollments record, by block name, what infrakit knows
	// of them beyond the desired stack (whether they are freed).
	Ingresses   map[string]*ControllerStatus `json:"ingresses,omitempty"`
	Enrollments map[string]*ControllerStatus `json:"enrollments,omitempty"`
	// Outputs are the stack's outputs as evaluated after the last apply
	// (or verb) that acted, by name. Added within format 1: a build that
	// does not know it ignores it, and the next apply writes it again.
	Outputs map[string]config.OutputValue `json:"outputs,omitempty"`
}

// Observed is what the outputs of the stack see of the world: each group's
// members as recorded, by logical ID then ID.
func (d *Document) Observed() *config.Observed {
	obs := &config.Observed{Members: map[string][]config.ObservedMember{}}
	for name, g := range d.Groups {
		ms := make([]config.ObservedMember, 0, len(g.Instances))
		for _, in := range g.Instances {
			ms = append(ms, config.ObservedMember{ID: in.ID, LogicalID: in.LogicalID, Address: in.Address, State: in.State})
		}
		slices.SortFunc(ms, func(a, b config.ObservedMember) int {
			if c := strings.Compare(a.LogicalID, b.LogicalID); c != 0 {
				return c
			}
			return strings.Compare(a.ID, b.ID)
		})
		obs.Members[name] = ms
	}
	return obs
}

// ControllerStatus is the record of an ingress or an enrollment.
type ControllerStatus struct {
	// Freed ones are not synced, and nothing of theirs is touched, until a
	// later apply resumes them.
	Freed bool `json:"freed,omitempty"`
	// Pending are teardowns an apply could not finish (a load balancer or
	// authorizer call failed), kept so that nothing is orphaned once the
	// stored stack no longer names what they act on: each is a stack
	// holding only the block as it was applied. For an ingress, one per
	// load balancer it let go of: the ingress with only the rules naming
	// that load balancer, and its loadbalancer block. For an enrollment,
	// one per target it left: the enrollment with that target. Plans show
	// them and every apply retries them, until they succeed (or the stack
	// takes the load balancer or target back).
	Pending []*config.Stack `json:"pending,omitempty"`
}

// GroupStatus is the per-group record.
type GroupStatus struct {
	// Freed groups are not managed: nothing is created or destroyed for them
	// until a later apply resumes management.
	Freed bool `json:"freed,omitempty"`
	// UpdateStopped halts a rolling update (group stop-update).
	UpdateStopped bool `json:"update_stopped,omitempty"`
	// Destroying is set when an apply, destroy or group destroy began to
	// destroy the group: it is managed by nothing, and every plan destroys
	// what is left of it until the record goes.
	Destroying bool `json:"destroying,omitempty"`
	// Instances are the members as last observed or created.
	Instances []Instance `json:"instances"`
}

// Instance is one member as recorded in state.
type Instance struct {
	ID         string `json:"id"`
	LogicalID  string `json:"logical_id,omitempty"`
	ConfigHash string `json:"config_hash,omitempty"`
	State      string `json:"state,omitempty"`
	Address    string `json:"address,omitempty"`
}

// NewDocument returns the empty state a backend hands out when nothing is
// stored yet: the current format, serial 0 and a fresh lineage.
func NewDocument() *Document {
	return &Document{
		Version: FormatVersion,
		Lineage: NewLineage(),
		Groups:  map[string]*GroupStatus{},
	}
}

// IsNew reports whether the document has never been stored. Serial 0 is
// reserved for that: every write stores serial ≥ 1, and a stored document
// with serial 0 is refused as invalid, so the two cannot be confused.
func (d *Document) IsNew() bool { return d.Serial == 0 }

// Group returns the record of the named group, creating an empty one on
// demand so callers can write d.Group(name).Freed = true.
func (d *Document) Group(name string) *GroupStatus {
	if d.Groups == nil {
		d.Groups = map[string]*GroupStatus{}
	}
	g := d.Groups[name]
	if g == nil {
		g = &GroupStatus{Instances: []Instance{}}
		d.Groups[name] = g
	}
	return g
}

// NewLineage returns a random version-4 UUID string. Lineages only need to
// be unique, so crypto/rand is used directly rather than a UUID library.
func NewLineage() string {
	var b [16]byte
	// crypto/rand.Read never returns an error (it crashes the program
	// instead on the platforms where randomness is unavailable).
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
