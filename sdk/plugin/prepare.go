package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
	pb "github.com/infrakit/infrakit/sdk/proto/infrakit/provider/v1"
	"github.com/infrakit/infrakit/sdk/provider"
)

// PrepareBatch answers with the flavor's PrepareAll when it implements
// flavor.BatchPreparer, else with one Prepare per item in order, here in
// the provider (flavor.PrepareEach): the host pays one round trip per
// batch. An item's failure travels as that item's diagnostics (a plain
// error as one error diagnostic), so the other items' specs still arrive.
func (x flavorServer) PrepareBatch(ctx context.Context, req *pb.FlavorPrepareBatchRequest) (*pb.FlavorPrepareBatchResponse, error) {
	p, err := x.s.flavor(req.GetType())
	if err != nil {
		return nil, err
	}
	items := make([]flavor.PrepareItem, len(req.GetItems()))
	for i, it := range req.GetItems() {
		items[i] = flavor.PrepareItem{Spec: specFromProto(it.GetSpec()),
			Index: flavor.Index{Group: it.GetIndex().GetGroup(), Sequence: it.GetIndex().GetSequence()}}
	}
	specs, errs := flavor.PrepareAll(ctx, p, rawJSON(req.GetProperties()), allocationFromProto(req.GetAllocation()), items)
	if len(specs) != len(items) || (errs != nil && len(errs) != len(items)) {
		return nil, badResult(fmt.Errorf("PrepareAll returned %d specs and %d errors for %d items", len(specs), len(errs), len(items)))
	}
	resp := &pb.FlavorPrepareBatchResponse{Results: make([]*pb.FlavorPrepareResponse, len(items))}
	for i := range items {
		var itemErr error
		if errs != nil {
			itemErr = errs[i]
		}
		if itemErr == nil {
			resp.Results[i] = &pb.FlavorPrepareResponse{Spec: specToProto(specs[i])}
			continue
		}
		resp.Results[i] = &pb.FlavorPrepareResponse{Diagnostics: itemDiagnostics(itemErr)}
	}
	return resp, nil
}

// itemDiagnostics is an item's error as diagnostics: its own, or a plain
// error as one error diagnostic.
func itemDiagnostics(err error) []*pb.Diagnostic {
	var diags provider.Diagnostics
	if errors.As(err, &diags) {
		return diagnosticsToProto(diags)
	}
	return diagnosticsToProto(provider.Diagnostics{{Severity: provider.Error, Summary: err.Error()}})
}

// maxPrepareBatch bounds the items of one PrepareBatch call: specs are
// small, and the host sends batches of a few dozen.
const maxPrepareBatch = 500

// PrepareAll prepares items in PrepareBatch calls of at most
// maxPrepareBatch, one after another. A failed call fails its items.
func (x flavorClient) PrepareAll(ctx context.Context, properties json.RawMessage, allocation flavor.Allocation, items []flavor.PrepareItem) ([]instance.Spec, []error) {
	specs := make([]instance.Spec, len(items))
	errs := make([]error, len(items))
	failed := false
	for start := 0; start < len(items); start += maxPrepareBatch {
		end := min(start+maxPrepareBatch, len(items))
		s, e := x.prepareChunk(ctx, properties, allocation, items[start:end])
		copy(specs[start:end], s)
		if e != nil {
			copy(errs[start:end], e)
			failed = true
		}
	}
	if !failed {
		return specs, nil
	}
	return specs, errs
}

// prepareChunk is one PrepareBatch call; a provider that does not know
// PrepareBatch is asked Prepare for each item in order instead
// (flavor.PrepareEach), and remembered as such.
func (x flavorClient) prepareChunk(ctx context.Context, properties json.RawMessage, allocation flavor.Allocation, items []flavor.PrepareItem) ([]instance.Spec, []error) {
	if !unsupported(x.c, "PrepareBatch") {
		specs, errs, err := x.prepareBatch(ctx, properties, allocation, items)
		if !errors.Is(err, errUnimplemented) {
			return specs, errs
		}
		x.c.logger.Debug("provider does not serve PrepareBatch; asking Prepare per item", "type", x.typ)
		remember(x.c, "PrepareBatch")
	}
	return flavor.PrepareEach(ctx, x, properties, allocation, items)
}

// prepareBatch is one PrepareBatch call: a spec per item, or an error per
// item (the call's own failure for every item); errUnimplemented when the
// provider does not serve it.
func (x flavorClient) prepareBatch(ctx context.Context, properties json.RawMessage, allocation flavor.Allocation, items []flavor.PrepareItem) ([]instance.Spec, []error, error) {
	req := &pb.FlavorPrepareBatchRequest{Type: x.typ, Properties: properties, Allocation: allocationToProto(allocation),
		Items: make([]*pb.FlavorPrepareItem, len(items))}
	for i, it := range items {
		req.Items[i] = &pb.FlavorPrepareItem{Spec: specToProto(it.Spec), Index: &pb.Index{Group: it.Index.Group, Sequence: it.Index.Sequence}}
	}
	resp, err := x.c.flavors.PrepareBatch(ctx, req)
	if status.Code(err) == codes.Unimplemented {
		return nil, nil, errUnimplemented
	}
	all := func(err error) ([]instance.Spec, []error, error) {
		errs := make([]error, len(items))
		for i := range errs {
			errs[i] = err
		}
		return make([]instance.Spec, len(items)), errs, nil
	}
	if err := x.c.check(ctx, "PrepareBatch", err, resp.GetDiagnostics()); err != nil {
		return all(err)
	}
	if got := len(resp.GetResults()); got != len(items) {
		return all(x.c.fail("PrepareBatch", fmt.Errorf("provider returned %d results for %d items", got, len(items))))
	}
	specs := make([]instance.Spec, len(items))
	var errs []error
	for i, r := range resp.GetResults() {
		if err := x.c.check(ctx, "Prepare", nil, r.GetDiagnostics()); err != nil {
			if errs == nil {
				errs = make([]error, len(items))
			}
			errs[i] = err
			continue
		}
		specs[i] = specFromProto(r.GetSpec())
	}
	return specs, errs, nil
}
