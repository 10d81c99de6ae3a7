// Package tags names the tags infrakit puts on the instances it creates.
//
// The tags make providers the source of truth for what exists: listing
// instances by stack and group finds every member even when the state file is
// lost, and the config hash and logical ID tags say whether a member is up to
// date and which pet it is. The names are a contract with users and with
// instances already running, so they never change.
package tags

import "strings"

// Tag names. Every reserved tag starts with Prefix.
const (
	// Prefix starts every tag infrakit reserves for itself.
	Prefix = "infrakit."
	// Stack is the name of the stack an instance belongs to.
	Stack = "infrakit.stack"
	// Group is the name of the group an instance is a member of.
	Group = "infrakit.group"
	// ConfigHash is the hash of the group's instance and flavor sections the
	// member was created from; a member whose hash differs is out of date.
	ConfigHash = "infrakit.config.hash"
	// LogicalID is the pet identity a member was provisioned for.
	LogicalID = "infrakit.logical_id"
	// EnrollmentName is the enrollment that created an authorization.
	EnrollmentName = "infrakit.enrollment.name"
	// EnrollmentSourceID is the source group member an authorization is for.
	EnrollmentSourceID = "infrakit.enrollment.source_id"
)

// IsReserved reports whether key is one of infrakit's own tags, which user
// tags in a stack must not set. The prefix is compared without regard to
// case: some clouds fold tag keys to one case (and show them so), so
// "INFRAKIT.stack" may well reach an instance as infrakit.stack.
func IsReserved(key string) bool {
	return len(key) >= len(Prefix) && strings.EqualFold(key[:len(Prefix)], Prefix)
}

// GroupSelector is the tag filter that lists every member of one group of one
// stack (the argument to DescribeInstances).
func GroupSelector(stack, group string) map[string]string {
	return map[string]string{Stack: stack, Group: group}
}

// Member returns the tags infrakit puts on a new member of a group: its stack,
// group and config hash, and for a pet its logical ID (omitted when empty).
func Member(stack, group, configHash, logicalID string) map[string]string {
	t := map[string]string{Stack: stack, Group: group, ConfigHash: configHash}
	if logicalID != "" {
		t[LogicalID] = logicalID
	}
	return t
}
