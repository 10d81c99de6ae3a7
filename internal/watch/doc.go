// Package watch is `infrakit watch`: the service that keeps every group of
// the applied stack converged for as long as it runs.
//
// Run holds, for its whole life, one plugin host, so providers are
// launched once and relaunched (with backoff) when they crash or stop
// answering; the HTTP API of package status; and, with the local state
// file, a lock of its own beside the state (infrakit.state.json.watch,
// naming the process), so a second watch on the same state refuses to
// start and says who runs. With the etcd backend several watch processes
// share the state instead: they elect a leader, which alone acts, while
// the others run observe-only passes (leader.go); or, with scale_out in
// the backend block, each acts on its share of the groups, ingresses and
// enrollments, leased to it one by one (scaleout.go, owned.go).
//
// What it enforces is the state's desired stack: the stack as last applied,
// with the sizes `group scale` set. Stack files reach it through `apply`.
//
// The loop (loop.go) is one goroutine that owns the schedule. It asks for a
// pass of every group on the interval, when the CLI changes the state (its
// serial moves: a cheap stat every 500 ms, a read when it changed), on
// SIGHUP, and of one group when its provider pushes an instance event
// (subscribe.go). Groups pass independently and in parallel (bounded), so
// a slow or dead provider holds up only its own groups; a group's passes
// never overlap, and a trigger during one makes one more follow right
// after it. While something a pass did is in flight (a create not listed
// yet, a roll waiting for health, an unhealthy member within its grace) the
// group is passed again soon (FollowUp).
//
// The ingresses and enrollments follow group membership (followers.go):
// they are synced on the shortest sync_interval among them, and at once
// for a group a pass changed or saw change (a member joined, or now
// runs), one sync at a time under the state lease, never while a pass of
// a group it covers acts (acting.go). Backends of members that leave go
// sooner: the pass that sees them leave takes them out of the load
// balancers while it creates their replacements (leaving.go).
//
// A pass (pass.go) observes without the state lock, lets heal.Tracker
// adjust what group.Decide sees, decides, trims the decision by the brake
// and the replacement budget, then joins the state lease (lease.go) to act:
// it takes the state lock shared with the other groups acting at that
// moment, refuses to act if another process wrote the state since the pass
// read it (the pass runs again on the new state), acts, records the
// members, and lets go. It acts as apply does, through a plan and the
// executor (act.go), make before break: an unhealthy member, like an
// out-of-date one, is replaced by a new member first and taken away by a
// later pass once the new one is healthy. A rolling update advances by one
// step per pass (roll.go), so no pass waits for health and the CLI never
// waits on a roll.
package watch
