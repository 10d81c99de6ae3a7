// Package state keeps infrakit's state document (the desired stack as last
// applied and what was last observed) in a backend with locking, so that the
// CLI and a running watch never act at once and nothing is ever lost.
package state

import (
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
}

// GroupStatus is the per-group record.
type GroupStatus struct {
	// Freed groups are not managed: nothing is created or destroyed for them
	// until a later apply resumes management.
	Freed bool `json:"freed,omitempty"`
	// UpdateStopped halts a rolling update (group stop-update).
	UpdateStopped bool `json:"update_stopped,omitempty"`
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
