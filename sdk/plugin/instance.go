package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/infrakit/infrakit/sdk/instance"
	pb "github.com/infrakit/infrakit/sdk/proto/infrakit/provider/v1"
)

// instanceServer serves the Instance service from ServeConfig.Instances.
type instanceServer struct {
	pb.UnimplementedInstanceServer
	s *server
}

func (x instanceServer) Validate(ctx context.Context, req *pb.InstanceValidateRequest) (*pb.InstanceValidateResponse, error) {
	p, err := x.s.instance(req.GetType())
	if err != nil {
		return nil, err
	}
	diags, err := diagnosticsOrStatus(p.Validate(ctx, rawJSON(req.GetProperties())))
	if err != nil {
		return nil, err
	}
	return &pb.InstanceValidateResponse{Diagnostics: diags}, nil
}

func (x instanceServer) Provision(ctx context.Context, req *pb.InstanceProvisionRequest) (*pb.InstanceProvisionResponse, error) {
	p, err := x.s.instance(req.GetType())
	if err != nil {
		return nil, err
	}
	spec := specFromProto(req.GetSpec())
	d, err := instance.ProvisionDescribed(ctx, p, spec)
	diags, err := diagnosticsOrStatus(err)
	if err != nil {
		return nil, err
	}
	resp := &pb.InstanceProvisionResponse{Id: string(d.ID), Diagnostics: diags}
	if d.ID == "" || d.State == "" {
		return resp, nil // nothing described: the host lists for the rest
	}
	if maps.Equal(d.Tags, spec.Tags) {
		d.Tags = nil // the host has them (see the response's instance field)
	}
	if resp.Instance, err = descriptionToProto(d); err != nil {
		// The instance exists: its ID must reach the host, which lists for
		// the rest (and is told there what is wrong with it).
		x.s.logger.Warn("provisioned instance described wrongly; answering its ID only", "id", d.ID, "error", err)
	}
	return resp, nil
}

func (x instanceServer) Label(ctx context.Context, req *pb.InstanceLabelRequest) (*pb.InstanceLabelResponse, error) {
	p, err := x.s.instance(req.GetType())
	if err != nil {
		return nil, err
	}
	diags, err := diagnosticsOrStatus(p.Label(ctx, instance.ID(req.GetId()), req.GetTags()))
	if err != nil {
		return nil, err
	}
	return &pb.InstanceLabelResponse{Diagnostics: diags}, nil
}

func (x instanceServer) Destroy(ctx context.Context, req *pb.InstanceDestroyRequest) (*pb.InstanceDestroyResponse, error) {
	p, err := x.s.instance(req.GetType())
	if err != nil {
		return nil, err
	}
	err = p.Destroy(ctx, instance.ID(req.GetId()), instance.DestroyReason(req.GetReason()))
	diags, err := diagnosticsOrStatus(err)
	if err != nil {
		return nil, err
	}
	return &pb.InstanceDestroyResponse{Diagnostics: diags}, nil
}

func (x instanceServer) DescribeInstances(ctx context.Context, req *pb.InstanceDescribeInstancesRequest) (*pb.InstanceDescribeInstancesResponse, error) {
	p, err := x.s.instance(req.GetType())
	if err != nil {
		return nil, err
	}
	descs, err := p.DescribeInstances(ctx, req.GetTags(), req.GetWithProperties())
	diags, err := diagnosticsOrStatus(err)
	if err != nil {
		return nil, err
	}
	resp := &pb.InstanceDescribeInstancesResponse{Diagnostics: diags, Instances: make([]*pb.InstanceDescription, 0, len(descs))}
	if req.GetCommonTags() {
		// The host rebuilds each instance's tags (instanceClient.DescribeInstances).
		resp.CommonTags = commonTags(descs)
	}
	for _, d := range descs {
		d.Tags = ownTags(d.Tags, resp.CommonTags)
		pd, err := descriptionToProto(d)
		if err != nil {
			return nil, badResult(err)
		}
		resp.Instances = append(resp.Instances, pd)
	}
	return resp, nil
}

// Watch sends an empty first message once the provider accepted the watch
// (or one with its diagnostics), so the host's Watch call can return the
// provider's refusal as an error instead of a silently closed channel.
func (x instanceServer) Watch(req *pb.InstanceWatchRequest, stream grpc.ServerStreamingServer[pb.InstanceWatchResponse]) error {
	p, err := x.s.instance(req.GetType())
	if err != nil {
		return err
	}
	w, ok := p.(instance.Watcher)
	if !ok {
		return status.Errorf(codes.Unimplemented, "instance type %q cannot be watched", req.GetType())
	}
	ctx := stream.Context()
	events, err := w.Watch(ctx, req.GetTags())
	diags, err := diagnosticsOrStatus(err)
	if err != nil {
		return err
	}
	if err := stream.Send(&pb.InstanceWatchResponse{Diagnostics: diags}); err != nil || diagnosticsFromProto(diags).HasErrors() {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case e, ok := <-events:
			if !ok {
				return nil
			}
			pe, err := eventToProto(e)
			if err != nil {
				return badResult(err)
			}
			if err := stream.Send(&pb.InstanceWatchResponse{Event: pe}); err != nil {
				return err
			}
		}
	}
}

// instanceClient is the host side of one instance type.
type instanceClient struct {
	c   *Client
	typ string
}

var (
	_ instance.Plugin  = instanceClient{}
	_ instance.Watcher = instanceClient{}

	_ instance.DescribingProvisioner = instanceClient{}
)

func (x instanceClient) Validate(ctx context.Context, properties json.RawMessage) error {
	resp, err := x.c.instances.Validate(ctx, &pb.InstanceValidateRequest{Type: x.typ, Properties: properties})
	return x.c.check(ctx, "Validate", err, resp.GetDiagnostics())
}

func (x instanceClient) Provision(ctx context.Context, spec instance.Spec) (instance.ID, error) {
	d, err := x.ProvisionDescribed(ctx, spec)
	return d.ID, err
}

// ProvisionDescribed returns the new instance as the provider described it
// in its answer, tags defaulting to the spec's; from a provider that
// described nothing (one that predates the field, or does not know), only
// its ID, with no State.
func (x instanceClient) ProvisionDescribed(ctx context.Context, spec instance.Spec) (instance.Description, error) {
	resp, err := x.c.instances.Provision(ctx, &pb.InstanceProvisionRequest{Type: x.typ, Spec: specToProto(spec)})
	if err := x.c.check(ctx, "Provision", err, resp.GetDiagnostics()); err != nil {
		return instance.Description{}, err
	}
	id := instance.ID(resp.GetId())
	if id == "" {
		return instance.Description{}, x.c.fail("Provision", errors.New("provider returned no instance ID"))
	}
	pd := resp.GetInstance()
	if pd == nil {
		return instance.Description{ID: id}, nil
	}
	d, err := descriptionFromProto(pd)
	if err == nil && d.ID != id {
		err = fmt.Errorf("provider described instance %q as %q", id, d.ID)
	}
	if err != nil {
		// The instance exists: keep its ID, and list for the rest.
		x.c.logger.Warn("Provision: ignoring the description of a new instance", "id", id, "error", err)
		return instance.Description{ID: id}, nil
	}
	if len(d.Tags) == 0 {
		d.Tags = spec.Tags
	}
	return d, nil
}

func (x instanceClient) Label(ctx context.Context, id instance.ID, tags map[string]string) error {
	resp, err := x.c.instances.Label(ctx, &pb.InstanceLabelRequest{Type: x.typ, Id: string(id), Tags: tags})
	return x.c.check(ctx, "Label", err, resp.GetDiagnostics())
}

func (x instanceClient) Destroy(ctx context.Context, id instance.ID, reason instance.DestroyReason) error {
	resp, err := x.c.instances.Destroy(ctx, &pb.InstanceDestroyRequest{Type: x.typ, Id: string(id), Reason: string(reason)})
	return x.c.check(ctx, "Destroy", err, resp.GetDiagnostics())
}

// DescribeInstances asks for the tags all instances share once (common_tags)
// and gives each description its full tags back; descriptions with no tags
// of their own share the common map, which nobody may change. A provider
// that predates common_tags sends every instance's full tags and no common
// ones, which come out unchanged.
func (x instanceClient) DescribeInstances(ctx context.Context, tags map[string]string, withProperties bool) ([]instance.Description, error) {
	resp, err := x.c.instances.DescribeInstances(ctx, &pb.InstanceDescribeInstancesRequest{Type: x.typ, Tags: tags, WithProperties: withProperties, CommonTags: true})
	if err := x.c.check(ctx, "DescribeInstances", err, resp.GetDiagnostics()); err != nil {
		return nil, err
	}
	common := resp.GetCommonTags()
	out := make([]instance.Description, 0, len(resp.GetInstances()))
	for _, pd := range resp.GetInstances() {
		d, err := descriptionFromProto(pd)
		if err != nil {
			return nil, x.c.fail("DescribeInstances", err)
		}
		d.Tags = joinTags(common, d.Tags)
		out = append(out, d)
	}
	return out, nil
}

// Watch returns once the provider accepted the watch. The channel closes
// when ctx ends, the provider ends the stream, or the provider goes away;
// the last two are logged. A provider that cannot watch gives an error
// wrapping errors.ErrUnsupported: poll DescribeInstances instead.
func (x instanceClient) Watch(ctx context.Context, tags map[string]string) (<-chan instance.Event, error) {
	ctx, cancel := context.WithCancel(ctx)
	stream, err := x.c.instances.Watch(ctx, &pb.InstanceWatchRequest{Type: x.typ, Tags: tags})
	if err != nil {
		cancel()
		return nil, x.c.check(ctx, "Watch", err, nil)
	}
	first, err := stream.Recv()
	if errors.Is(err, io.EOF) {
		err = status.Error(codes.Unknown, "provider ended the watch before it started")
	}
	if err := x.c.check(ctx, "Watch", err, first.GetDiagnostics()); err != nil {
		cancel()
		return nil, err
	}
	events := make(chan instance.Event)
	go func() {
		defer cancel()
		defer close(events)
		for {
			resp, err := stream.Recv()
			if err != nil {
				if !errors.Is(err, io.EOF) && ctx.Err() == nil {
					x.c.logger.Warn("watch ended", "type", x.typ, "error", errorFromStatus(ctx, err))
				}
				return
			}
			if err := x.c.check(ctx, "Watch", nil, resp.GetDiagnostics()); err != nil {
				x.c.logger.Warn("watch", "type", x.typ, "error", err)
			}
			if resp.GetEvent() == nil {
				continue
			}
			e, err := eventFromProto(resp.GetEvent())
			if err != nil {
				x.c.logger.Warn("watch: dropping invalid event", "type", x.typ, "error", err)
				continue
			}
			select {
			case events <- e:
			case <-ctx.Done():
				return
			}
		}
	}()
	return events, nil
}
