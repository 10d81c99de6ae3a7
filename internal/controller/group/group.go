// Package group decides what a group of instances needs: which members to
// create, which to destroy and which to replace because their configuration
// is out of date.
//
// The decision is a pure function of the desired group and its observed
// members (Decide, NextRollBatch, RollSchedule), in the manner of Nomad's
// reconciler: no provider is called by them, so tables and rapid
// properties drive them directly. Package plan turns decisions into steps;
// Instances is how the executor acts on a group's members.
//
// Two rules keep a slow or failing cloud from causing harm:
//   - a terminating member no longer counts (it is already going away), and
//   - a pending member counts toward the size, so a cloud that is slow to start
//     machines never makes the group over-provision.
package group

import (
	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
)

// Member is one observed instance of a group.
type Member struct {
	ID instance.ID `json:"id"`
	// LogicalID is the pet identity; empty for cattle.
	LogicalID string `json:"logical_id,omitempty"`
	// ConfigHash is the hash the member was created from (tags.ConfigHash).
	ConfigHash string         `json:"config_hash,omitempty"`
	State      instance.State `json:"state"`
	Health     flavor.Health  `json:"health"`
	Address    string         `json:"address,omitempty"`
}

// Desired is what a group should be.
type Desired struct {
	// Size is the number of members of cattle; nil makes the group pets,
	// sized by LogicalIDs. Zero is legal (and negative is taken as zero).
	Size *int
	// LogicalIDs are the pets, one member each (duplicates are ignored).
	LogicalIDs []string
	// ConfigHash is the hash of the desired instance and flavor sections.
	// Members with another hash are out of date. Empty means unknown: no
	// member is then judged out of date.
	ConfigHash string
	// MaxParallel is how many members a rolling update replaces at once
	// (at most; values below 1 mean 1).
	MaxParallel int
	// MaxUnavailable is how many members may lack a healthy instance at once
	// during a rolling update. A replaced member's slot stays unavailable
	// until its replacement is healthy, so a roll needs at least 1: values
	// below 1 mean 1.
	MaxUnavailable int
	// ReplaceUnhealthy destroys running members that their flavors judge
	// unhealthy and creates replacements. Callers apply the grace period by
	// reporting members still within it as flavor.HealthUnknown.
	ReplaceUnhealthy bool
}

// IsPets reports whether the group is sized by logical IDs.
func (d Desired) IsPets() bool { return d.Size == nil }

// Create asks for one new member with the desired configuration.
type Create struct {
	// LogicalID is the pet to provision; empty for cattle.
	LogicalID string `json:"logical_id,omitempty"`
}

// Destroy asks for one member to be destroyed.
type Destroy struct {
	ID     instance.ID            `json:"id"`
	Reason instance.DestroyReason `json:"reason"`
}

// Destroy reasons of a decision, passed on to the provider's Destroy. The SPI
// defines the common ones; a group adds its own.
const (
	// ReasonScaleDown: the group has more members than its size.
	ReasonScaleDown = instance.ReasonScaleDown
	// ReasonDuplicate: another member already is this pet.
	ReasonDuplicate instance.DestroyReason = "duplicate"
	// ReasonUnknownLogicalID: the member is no pet of the group (its logical
	// ID is empty or not among the desired ones).
	ReasonUnknownLogicalID instance.DestroyReason = "unknown-logical-id"
	// ReasonRollingUpdate: the member is out of date and being replaced.
	ReasonRollingUpdate = instance.ReasonRollingUpdate
	// ReasonUnhealthy: the member is unhealthy and being replaced.
	ReasonUnhealthy = instance.ReasonUnhealthy
)

// Decision is what a group needs now. Creates and destroys are independent
// and may run in any order or in parallel. Roll lists the members that are
// out of date; Decide does not destroy them, because replacing them is paced
// by the update policy: see NextRollBatch.
type Decision struct {
	Create  []Create      `json:"create,omitempty"`
	Destroy []Destroy     `json:"destroy,omitempty"`
	Roll    []instance.ID `json:"roll,omitempty"`
}

// Settled reports whether the group has the right members (nothing to create
// or destroy); out-of-date members may remain.
func (d Decision) Settled() bool { return len(d.Create) == 0 && len(d.Destroy) == 0 }

// Empty reports whether the group has converged.
func (d Decision) Empty() bool { return d.Settled() && len(d.Roll) == 0 }
