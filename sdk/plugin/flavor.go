package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
	pb "github.com/infrakit/infrakit/sdk/proto/infrakit/provider/v1"
	"github.com/infrakit/infrakit/sdk/provider"
)

func allocationToProto(a flavor.Allocation) *pb.Allocation {
	out := &pb.Allocation{Size: int64(a.Size)}
	for _, id := range a.LogicalIDs {
		out.LogicalIds = append(out.LogicalIds, string(id))
	}
	return out
}

func allocationFromProto(a *pb.Allocation) flavor.Allocation {
	out := flavor.Allocation{Size: int(a.GetSize())}
	for _, id := range a.GetLogicalIds() {
		out.LogicalIDs = append(out.LogicalIDs, instance.LogicalID(id))
	}
	return out
}

// flavorServer serves the Flavor service from ServeConfig.Flavors.
type flavorServer struct {
	pb.UnimplementedFlavorServer
	s *server
}

func (x flavorServer) Validate(ctx context.Context, req *pb.FlavorValidateRequest) (*pb.FlavorValidateResponse, error) {
	p, err := x.s.flavor(req.GetType())
	if err != nil {
		return nil, err
	}
	err = p.Validate(ctx, rawJSON(req.GetProperties()), allocationFromProto(req.GetAllocation()))
	diags, err := diagnosticsOrStatus(err)
	if err != nil {
		return nil, err
	}
	return &pb.FlavorValidateResponse{Diagnostics: diags}, nil
}

func (x flavorServer) Prepare(ctx context.Context, req *pb.FlavorPrepareRequest) (*pb.FlavorPrepareResponse, error) {
	p, err := x.s.flavor(req.GetType())
	if err != nil {
		return nil, err
	}
	index := flavor.Index{Group: req.GetIndex().GetGroup(), Sequence: req.GetIndex().GetSequence()}
	spec, err := p.Prepare(ctx, rawJSON(req.GetProperties()), specFromProto(req.GetSpec()), allocationFromProto(req.GetAllocation()), index)
	diags, err := diagnosticsOrStatus(err)
	if err != nil {
		return nil, err
	}
	return &pb.FlavorPrepareResponse{Spec: specToProto(spec), Diagnostics: diags}, nil
}

func (x flavorServer) Healthy(ctx context.Context, req *pb.FlavorHealthyRequest) (*pb.FlavorHealthyResponse, error) {
	p, err := x.s.flavor(req.GetType())
	if err != nil {
		return nil, err
	}
	inst, err := descriptionFromProto(req.GetInstance())
	if err != nil {
		return nil, badRequest(err)
	}
	h, err := p.Healthy(ctx, rawJSON(req.GetProperties()), inst)
	diags, err := diagnosticsOrStatus(err)
	if err != nil {
		return nil, err
	}
	ph, err := healthToProto(h)
	if err != nil {
		return nil, badResult(err)
	}
	return &pb.FlavorHealthyResponse{Health: ph, Diagnostics: diags}, nil
}

// HealthyBatch answers with the flavor's HealthyAll when it implements
// flavor.BatchHealthChecker, else with one Healthy per instance, run here in
// the provider (flavor.HealthyEach, bounded parallelism): either way the
// host pays one round trip per batch, not per instance.
func (x flavorServer) HealthyBatch(ctx context.Context, req *pb.FlavorHealthyBatchRequest) (*pb.FlavorHealthyBatchResponse, error) {
	p, err := x.s.flavor(req.GetType())
	if err != nil {
		return nil, err
	}
	insts := make([]instance.Description, len(req.GetInstances()))
	common := req.GetCommonTags()
	for i, pd := range req.GetInstances() {
		if insts[i], err = descriptionFromProto(pd); err != nil {
			return nil, badRequest(err)
		}
		switch {
		case len(common) == 0:
		case len(insts[i].Tags) == 0:
			// Shared by every instance with no tags of its own (all of a
			// group's cattle): HealthyAll takes its input read-only, and
			// healthyAll gives each Healthy call its own copy.
			insts[i].Tags = common
		default:
			tags := make(map[string]string, len(common)+len(insts[i].Tags))
			maps.Copy(tags, common)
			maps.Copy(tags, insts[i].Tags)
			insts[i].Tags = tags
		}
	}
	hs, warn, err := healthyAll(ctx, p, rawJSON(req.GetProperties()), insts)
	diags, err := diagnosticsOrStatus(err)
	if status.Code(err) == codes.Unimplemented {
		// UNIMPLEMENTED tells a host that this provider predates the RPC
		// (see flavorClient.HealthyAll); a flavor that cannot judge health
		// at all is an ordinary failure of the batch.
		err = status.Error(codes.Unknown, status.Convert(err).Message())
	}
	if err != nil {
		return nil, err
	}
	if diagnosticsFromProto(diags).HasErrors() {
		return &pb.FlavorHealthyBatchResponse{Diagnostics: diags}, nil
	}
	if len(hs) != len(insts) {
		return nil, badResult(fmt.Errorf("HealthyAll returned %d healths for %d instances", len(hs), len(insts)))
	}
	resp := &pb.FlavorHealthyBatchResponse{Health: make([]pb.Health, len(hs)), Diagnostics: diags}
	for i, h := range hs {
		if resp.Health[i], err = healthToProto(h); err != nil {
			return nil, badResult(fmt.Errorf("instance %q: %w", insts[i].ID, err))
		}
	}
	if warn != nil {
		resp.Diagnostics = append(resp.Diagnostics, diagnosticsToProto(provider.Diagnostics{*warn})...)
	}
	return resp, nil
}

// healthyAll judges insts through p's HealthyAll, or Healthy per instance
// when p has none (or its HealthyAll says errors.ErrUnsupported). Per
// instance, failures make those instances unknown and are summed up in a
// warning; when every call failed, the first failure fails the batch, as it
// would have failed each call (invalid properties, typically).
func healthyAll(ctx context.Context, p flavor.Plugin, props json.RawMessage, insts []instance.Description) ([]flavor.Health, *provider.Diagnostic, error) {
	if b, ok := p.(flavor.BatchHealthChecker); ok {
		hs, err := b.HealthyAll(ctx, props, insts)
		if !errors.Is(err, errors.ErrUnsupported) {
			return hs, nil, err
		}
	}
	// Healthy never promised to leave its input alone: each call gets its
	// own tags.
	for i := range insts {
		insts[i].Tags = maps.Clone(insts[i].Tags)
	}
	hs, errs := flavor.HealthyEach(ctx, p, props, insts, flavor.DefaultHealthParallelism)
	if errs == nil {
		return hs, nil, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	failed, first := 0, -1
	var lines []string
	for i, err := range errs {
		if err == nil {
			continue
		}
		failed++
		if first < 0 {
			first = i
		}
		if len(lines) < maxHealthErrorLines {
			lines = append(lines, fmt.Sprintf("%s: %v", insts[i].ID, err))
		}
	}
	if failed == len(insts) {
		return nil, nil, errs[first]
	}
	if failed > len(lines) {
		lines = append(lines, fmt.Sprintf("and %d more", failed-len(lines)))
	}
	return hs, &provider.Diagnostic{
		Severity: provider.Warning,
		Summary:  fmt.Sprintf("health of %d of %d instances is unknown: the check failed", failed, len(insts)),
		Detail:   strings.Join(lines, "\n"),
	}, nil
}

// maxHealthErrorLines bounds the failures a batch's warning names.
const maxHealthErrorLines = 5

func (x flavorServer) Drain(ctx context.Context, req *pb.FlavorDrainRequest) (*pb.FlavorDrainResponse, error) {
	p, err := x.s.flavor(req.GetType())
	if err != nil {
		return nil, err
	}
	inst, err := descriptionFromProto(req.GetInstance())
	if err != nil {
		return nil, badRequest(err)
	}
	diags, err := diagnosticsOrStatus(p.Drain(ctx, rawJSON(req.GetProperties()), inst))
	if err != nil {
		return nil, err
	}
	return &pb.FlavorDrainResponse{Diagnostics: diags}, nil
}

// flavorClient is the host side of one flavor type.
type flavorClient struct {
	c   *Client
	typ string
}

var (
	_ flavor.Plugin             = flavorClient{}
	_ flavor.BatchHealthChecker = flavorClient{}
	_ flavor.BatchPreparer      = flavorClient{}
)

func (x flavorClient) Validate(ctx context.Context, properties json.RawMessage, allocation flavor.Allocation) error {
	resp, err := x.c.flavors.Validate(ctx, &pb.FlavorValidateRequest{Type: x.typ, Properties: properties, Allocation: allocationToProto(allocation)})
	if err := x.c.check(ctx, "Validate", err, resp.GetDiagnostics()); err != nil {
		return err
	}
	// Warnings alone come back too, as provider.Diagnostics without an
	// error among them: validate shows them (an even number of cluster
	// members, say) and goes on.
	if ds := diagnosticsFromProto(resp.GetDiagnostics()); len(ds) > 0 {
		return x.c.fail("Validate", ds)
	}
	return nil
}

func (x flavorClient) Prepare(ctx context.Context, properties json.RawMessage, spec instance.Spec, allocation flavor.Allocation, index flavor.Index) (instance.Spec, error) {
	resp, err := x.c.flavors.Prepare(ctx, &pb.FlavorPrepareRequest{
		Type:       x.typ,
		Properties: properties,
		Spec:       specToProto(spec),
		Allocation: allocationToProto(allocation),
		Index:      &pb.Index{Group: index.Group, Sequence: index.Sequence},
	})
	if err := x.c.check(ctx, "Prepare", err, resp.GetDiagnostics()); err != nil {
		return instance.Spec{}, err
	}
	return specFromProto(resp.GetSpec()), nil
}

func (x flavorClient) Healthy(ctx context.Context, properties json.RawMessage, inst instance.Description) (flavor.Health, error) {
	pd, err := descriptionToProto(inst)
	if err != nil {
		return "", x.c.fail("Healthy", err)
	}
	resp, err := x.c.flavors.Healthy(ctx, &pb.FlavorHealthyRequest{Type: x.typ, Properties: properties, Instance: pd})
	if err := x.c.check(ctx, "Healthy", err, resp.GetDiagnostics()); err != nil {
		return "", err
	}
	h, err := healthFromProto(resp.GetHealth())
	if err != nil {
		return "", x.c.fail("Healthy", err)
	}
	return h, nil
}

func (x flavorClient) Drain(ctx context.Context, properties json.RawMessage, inst instance.Description) error {
	pd, err := descriptionToProto(inst)
	if err != nil {
		return x.c.fail("Drain", err)
	}
	resp, err := x.c.flavors.Drain(ctx, &pb.FlavorDrainRequest{Type: x.typ, Properties: properties, Instance: pd})
	return x.c.check(ctx, "Drain", err, resp.GetDiagnostics())
}

// A batch is sent in calls of at most maxBatch instances and about
// maxBatchBytes of encoded descriptions, well under gRPC's default 4 MiB
// message limit, so one call never holds the provider for long either.
const (
	maxBatch      = 1000
	maxBatchBytes = 1 << 20
)

// HealthyAll asks the provider about every instance in as few HealthyBatch
// calls as the limits above allow, one after another; a provider that does
// not know HealthyBatch is asked Healthy for each instance instead
// (flavor.HealthyEach), and remembered as such. A failed call fails the
// batch.
func (x flavorClient) HealthyAll(ctx context.Context, properties json.RawMessage, insts []instance.Description) ([]flavor.Health, error) {
	if len(insts) == 0 {
		return []flavor.Health{}, nil
	}
	if !unsupported(x.c, "HealthyBatch") {
		hs, err := x.healthyBatches(ctx, properties, insts)
		if !errors.Is(err, errUnimplemented) {
			return hs, err
		}
		x.c.logger.Debug("provider does not serve HealthyBatch; asking Healthy per instance", "type", x.typ)
		remember(x.c, "HealthyBatch")
	}
	hs, errs := flavor.HealthyEach(ctx, x, properties, insts, flavor.DefaultHealthParallelism)
	if errs == nil {
		return hs, nil
	}
	failed, first := 0, -1
	for i, err := range errs {
		if err != nil {
			if first < 0 {
				first = i
			}
			failed++
		}
	}
	if failed == len(insts) || ctx.Err() != nil {
		return nil, errs[first] // already names the provider and method
	}
	x.c.logger.Warn("health check failed; those instances are unknown", "type", x.typ,
		"failed", failed, "of", len(insts), "first", insts[first].ID, "error", errs[first])
	return hs, nil
}

// errUnimplemented marks a batch RPC (HealthyBatch, PrepareBatch) the
// provider does not serve.
var errUnimplemented = errors.New("batch RPC unimplemented")

func (x flavorClient) healthyBatches(ctx context.Context, properties json.RawMessage, insts []instance.Description) ([]flavor.Health, error) {
	common := commonTags(insts)
	out := make([]flavor.Health, 0, len(insts))
	chunk := make([]*pb.InstanceDescription, 0, min(len(insts), maxBatch))
	size := 0
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		hs, err := x.healthyBatch(ctx, properties, common, chunk)
		if err != nil {
			return err
		}
		out = append(out, hs...)
		chunk, size = chunk[:0], 0
		return nil
	}
	for _, d := range insts {
		d.Tags = ownTags(d.Tags, common)
		pd, err := descriptionToProto(d)
		if err != nil {
			return nil, x.c.fail("HealthyBatch", err)
		}
		n := approxSize(d)
		if len(chunk) == maxBatch || (len(chunk) > 0 && size+n > maxBatchBytes) {
			if err := flush(); err != nil {
				return nil, err
			}
		}
		chunk = append(chunk, pd)
		size += n
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return out, nil
}

// approxSize is about the encoded size of d (a little over): computing it
// exactly would cost a second encoding of every description.
func approxSize(d instance.Description) int {
	n := 16 + len(d.ID) + len(d.Address) + len(d.Properties)
	if d.LogicalID != nil {
		n += len(*d.LogicalID)
	}
	for k, v := range d.Tags {
		n += len(k) + len(v) + 8
	}
	return n
}

func (x flavorClient) healthyBatch(ctx context.Context, properties json.RawMessage, common map[string]string, chunk []*pb.InstanceDescription) ([]flavor.Health, error) {
	resp, err := x.c.flavors.HealthyBatch(ctx, &pb.FlavorHealthyBatchRequest{Type: x.typ, Properties: properties, Instances: chunk, CommonTags: common})
	if status.Code(err) == codes.Unimplemented {
		return nil, errUnimplemented
	}
	if err := x.c.check(ctx, "HealthyBatch", err, resp.GetDiagnostics()); err != nil {
		return nil, err
	}
	if got := len(resp.GetHealth()); got != len(chunk) {
		return nil, x.c.fail("HealthyBatch", fmt.Errorf("provider returned %d healths for %d instances", got, len(chunk)))
	}
	out := make([]flavor.Health, len(chunk))
	for i, v := range resp.GetHealth() {
		h, err := healthFromProto(v)
		if err != nil {
			return nil, x.c.fail("HealthyBatch", fmt.Errorf("instance %q: %w", chunk[i].GetId(), err))
		}
		if h == "" {
			h = flavor.HealthUnknown
		}
		out[i] = h
	}
	return out, nil
}
