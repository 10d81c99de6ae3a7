package plugin

import (
	"context"
	"encoding/json"

	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
	pb "github.com/infrakit/infrakit/sdk/proto/infrakit/provider/v1"
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

var _ flavor.Plugin = flavorClient{}

func (x flavorClient) Validate(ctx context.Context, properties json.RawMessage, allocation flavor.Allocation) error {
	resp, err := x.c.flavors.Validate(ctx, &pb.FlavorValidateRequest{Type: x.typ, Properties: properties, Allocation: allocationToProto(allocation)})
	return x.c.check(ctx, "Validate", err, resp.GetDiagnostics())
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
