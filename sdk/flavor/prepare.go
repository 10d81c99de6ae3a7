package flavor

import (
	"context"
	"encoding/json"

	"github.com/infrakit/infrakit/sdk/instance"
)

// PrepareItem is one spec of a new member to prepare, and where the member
// goes.
type PrepareItem struct {
	Spec  instance.Spec
	Index Index
}

// BatchPreparer is implemented by flavors (and by the host's client of a
// provider) that prepare the specs of several new members in one call. It
// is optional: Plugin.Prepare stays the contract.
//
// It exists for the same reason as BatchHealthChecker: across a process
// boundary one Prepare per member is one round trip per member, and an
// apply of 10,000 members spends more on the round trips than on the
// preparing. PrepareAll returns one spec and one error per item, in order;
// errs is nil when every item was prepared. A failure of the batch as a
// whole is that error for every item.
type BatchPreparer interface {
	PrepareAll(ctx context.Context, properties json.RawMessage, allocation Allocation, items []PrepareItem) (specs []instance.Spec, errs []error)
}

// PrepareEach prepares items through p one after another, in order: a
// flavor's Prepare may count or allocate (an index, a token), so a batch is
// prepared as the same calls in a row would be. It is the SDK's answer to a
// batch for a flavor without PrepareAll, and the host's for a provider
// without the batch RPC.
func PrepareEach(ctx context.Context, p Plugin, properties json.RawMessage, allocation Allocation, items []PrepareItem) ([]instance.Spec, []error) {
	specs := make([]instance.Spec, len(items))
	var errs []error
	for i, it := range items {
		spec, err := p.Prepare(ctx, properties, it.Spec, allocation, it.Index)
		if err != nil {
			if errs == nil {
				errs = make([]error, len(items))
			}
			errs[i] = err
			continue
		}
		specs[i] = spec
	}
	return specs, errs
}

// PrepareAll prepares items through p's PrepareAll when it has one, else
// through PrepareEach.
func PrepareAll(ctx context.Context, p Plugin, properties json.RawMessage, allocation Allocation, items []PrepareItem) ([]instance.Spec, []error) {
	if b, ok := p.(BatchPreparer); ok {
		return b.PrepareAll(ctx, properties, allocation, items)
	}
	return PrepareEach(ctx, p, properties, allocation, items)
}
