// Package ownership shares a stack's objects (groups, ingresses,
// enrollments) among several scale-out `infrakit watch` processes through
// etcd: each object is leased to exactly one process at a time, and the
// process writes its state fenced by that lease.
//
// Keys under the stack prefix P:
//   - P/members/<member-id>: one per live process (a Session), attached to
//     its lease; the value is JSON {"identity", "started"}; the member id is
//     the lease ID in hex.
//   - P/owners/<kind>/<name>: the object's lease, holding the owner's
//     member id, attached to the owner's session lease. Its create revision
//     fences the owner's writes (election.Fence).
//
// A Session is one process's membership (its lease is monitored by
// election.Lease: it is declared lost when etcd forgot it, or when renewal
// is overdue by the margin, before etcd would let anyone else take its
// objects). Acquire and Release take and give back one object; a View is
// members and owners read at one revision; a Balancer keeps this process
// holding its share (package shard decides the shares).
//
// A process's life: Join, then NewBalancer(...).Run until stopping or
// Lost. On SIGTERM cancel Run (it gives every object back, each after its
// Releasing hook returned) and then Leave at once: a member that no longer
// balances but has not left still counts in everyone's quotas, and the
// objects assigned to it wait for it. When the session is lost, Run
// returns; join again with a new Session.
package ownership

import (
	"fmt"
	"strings"
)

// Kinds of objects.
const (
	KindGroup      = "group"
	KindIngress    = "ingress"
	KindEnrollment = "enrollment"
)

// Object is one thing leased to one process: a group, ingress or
// enrollment of the stack, by name.
type Object struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// String is "kind/name" ("group/web"): the object's key under owners/ and
// its name in package shard.
func (o Object) String() string { return o.Kind + "/" + o.Name }

// Valid reports whether o can be leased: a known kind and a name.
func (o Object) Valid() error {
	switch o.Kind {
	case KindGroup, KindIngress, KindEnrollment:
	default:
		return fmt.Errorf("object %q: unknown kind %q", o, o.Kind)
	}
	if o.Name == "" {
		return fmt.Errorf("object %q: no name", o)
	}
	return nil
}

// parseObject is the Object of "kind/name" (the inverse of String).
func parseObject(s string) (Object, bool) {
	kind, name, ok := strings.Cut(s, "/")
	o := Object{Kind: kind, Name: name}
	return o, ok && o.Valid() == nil
}

// Key prefixes under the stack prefix.
const (
	membersDir = "/members/"
	ownersDir  = "/owners/"
)
