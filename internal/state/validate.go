package state

import (
	"fmt"
	"maps"
	"slices"

	"github.com/infrakit/infrakit/internal/config"
)

// checkStacks refuses a document whose stacks break the rules of the stack
// language (config.CheckStored): the desired stack, and every pending
// teardown kept for an ingress or enrollment. The stored stack is acted on
// without the files being read again (watch enforces it; group verbs edit
// it), so a state edited by hand or damaged would otherwise be acted on as
// it stands — a size of -5 destroying a whole group.
func checkStacks(state string, doc *Document) error {
	if err := config.CheckStored(doc.Stack); err != nil {
		return invalidStack(state, "the desired stack", err)
	}
	for _, kind := range []struct {
		what    string
		records map[string]*ControllerStatus
	}{{"ingress", doc.Ingresses}, {"enrollment", doc.Enrollments}} {
		for _, name := range slices.Sorted(maps.Keys(kind.records)) {
			rec := kind.records[name]
			if rec == nil {
				continue
			}
			for _, part := range rec.Pending {
				if err := config.CheckStored(part); err != nil {
					return invalidStack(state, fmt.Sprintf("a pending teardown of %s %q", kind.what, name), err)
				}
			}
		}
	}
	return nil
}

func invalidStack(state, what string, err error) error {
	return &InvalidError{
		State:  state,
		Reason: fmt.Sprintf("%s it holds is not valid (edited by hand, or damaged?): %v", what, err),
		Err:    err,
	}
}

// CheckStacks is the check of the stacks a document holds that Decode
// makes (checkStacks), for a backend that assembles a document from
// several stored parts instead of decoding it whole (the etcd backend).
// state names where the document came from, for messages.
func CheckStacks(state string, doc *Document) error { return checkStacks(state, doc) }
