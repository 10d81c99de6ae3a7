package plugin

import (
	"context"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
	pb "github.com/infrakit/infrakit/sdk/proto/infrakit/provider/v1"
)

func routeToProto(r loadbalancer.Route) *pb.Route {
	return &pb.Route{
		Port:                 int64(r.Port),
		Protocol:             string(r.Protocol),
		LoadBalancerPort:     int64(r.LoadBalancerPort),
		LoadBalancerProtocol: string(r.LoadBalancerProtocol),
		Certificate:          r.Certificate,
	}
}

func routeFromProto(r *pb.Route) loadbalancer.Route {
	return loadbalancer.Route{
		Port:                 int(r.GetPort()),
		Protocol:             loadbalancer.Protocol(r.GetProtocol()),
		LoadBalancerPort:     int(r.GetLoadBalancerPort()),
		LoadBalancerProtocol: loadbalancer.Protocol(r.GetLoadBalancerProtocol()),
		Certificate:          r.GetCertificate(),
	}
}

func backendsToProto(bs []loadbalancer.Backend) []*pb.Backend {
	out := make([]*pb.Backend, len(bs))
	for i, b := range bs {
		out[i] = &pb.Backend{Id: string(b.ID), Address: b.Address}
	}
	return out
}

func backendsFromProto(bs []*pb.Backend) []loadbalancer.Backend {
	out := make([]loadbalancer.Backend, len(bs))
	for i, b := range bs {
		out[i] = loadbalancer.Backend{ID: instance.ID(b.GetId()), Address: b.GetAddress()}
	}
	return out
}

// loadBalancerServer serves the LoadBalancer service from ServeConfig.LoadBalancer.
type loadBalancerServer struct {
	pb.UnimplementedLoadBalancerServer
	s *server
}

func (x loadBalancerServer) Routes(ctx context.Context, req *pb.LoadBalancerRoutesRequest) (*pb.LoadBalancerRoutesResponse, error) {
	lb, err := x.s.loadBalancer(req.GetName())
	if err != nil {
		return nil, err
	}
	routes, err := lb.Routes(ctx)
	diags, err := diagnosticsOrStatus(err)
	if err != nil {
		return nil, err
	}
	resp := &pb.LoadBalancerRoutesResponse{Diagnostics: diags, Routes: make([]*pb.Route, len(routes))}
	for i, r := range routes {
		resp.Routes[i] = routeToProto(r)
	}
	return resp, nil
}

func (x loadBalancerServer) Publish(ctx context.Context, req *pb.LoadBalancerPublishRequest) (*pb.LoadBalancerPublishResponse, error) {
	lb, err := x.s.loadBalancer(req.GetName())
	if err != nil {
		return nil, err
	}
	diags, err := diagnosticsOrStatus(lb.Publish(ctx, routeFromProto(req.GetRoute())))
	if err != nil {
		return nil, err
	}
	return &pb.LoadBalancerPublishResponse{Diagnostics: diags}, nil
}

func (x loadBalancerServer) Unpublish(ctx context.Context, req *pb.LoadBalancerUnpublishRequest) (*pb.LoadBalancerUnpublishResponse, error) {
	lb, err := x.s.loadBalancer(req.GetName())
	if err != nil {
		return nil, err
	}
	diags, err := diagnosticsOrStatus(lb.Unpublish(ctx, int(req.GetLoadBalancerPort())))
	if err != nil {
		return nil, err
	}
	return &pb.LoadBalancerUnpublishResponse{Diagnostics: diags}, nil
}

func (x loadBalancerServer) ConfigureHealthCheck(ctx context.Context, req *pb.LoadBalancerConfigureHealthCheckRequest) (*pb.LoadBalancerConfigureHealthCheckResponse, error) {
	lb, err := x.s.loadBalancer(req.GetName())
	if err != nil {
		return nil, err
	}
	hc := req.GetHealthCheck()
	err = lb.ConfigureHealthCheck(ctx, loadbalancer.HealthCheck{
		BackendPort: int(hc.GetBackendPort()),
		Healthy:     int(hc.GetHealthy()),
		Unhealthy:   int(hc.GetUnhealthy()),
		Interval:    hc.GetInterval().AsDuration(),
		Timeout:     hc.GetTimeout().AsDuration(),
	})
	diags, err := diagnosticsOrStatus(err)
	if err != nil {
		return nil, err
	}
	return &pb.LoadBalancerConfigureHealthCheckResponse{Diagnostics: diags}, nil
}

func (x loadBalancerServer) Backends(ctx context.Context, req *pb.LoadBalancerBackendsRequest) (*pb.LoadBalancerBackendsResponse, error) {
	lb, err := x.s.loadBalancer(req.GetName())
	if err != nil {
		return nil, err
	}
	backends, err := lb.Backends(ctx)
	diags, err := diagnosticsOrStatus(err)
	if err != nil {
		return nil, err
	}
	return &pb.LoadBalancerBackendsResponse{Backends: backendsToProto(backends), Diagnostics: diags}, nil
}

func (x loadBalancerServer) RegisterBackends(ctx context.Context, req *pb.LoadBalancerRegisterBackendsRequest) (*pb.LoadBalancerRegisterBackendsResponse, error) {
	lb, err := x.s.loadBalancer(req.GetName())
	if err != nil {
		return nil, err
	}
	diags, err := diagnosticsOrStatus(lb.RegisterBackends(ctx, backendsFromProto(req.GetBackends())))
	if err != nil {
		return nil, err
	}
	return &pb.LoadBalancerRegisterBackendsResponse{Diagnostics: diags}, nil
}

func (x loadBalancerServer) DeregisterBackends(ctx context.Context, req *pb.LoadBalancerDeregisterBackendsRequest) (*pb.LoadBalancerDeregisterBackendsResponse, error) {
	lb, err := x.s.loadBalancer(req.GetName())
	if err != nil {
		return nil, err
	}
	ids := make([]instance.ID, len(req.GetIds()))
	for i, id := range req.GetIds() {
		ids[i] = instance.ID(id)
	}
	diags, err := diagnosticsOrStatus(lb.DeregisterBackends(ctx, ids))
	if err != nil {
		return nil, err
	}
	return &pb.LoadBalancerDeregisterBackendsResponse{Diagnostics: diags}, nil
}

// loadBalancerClient is the host side of one named load balancer.
type loadBalancerClient struct {
	c    *Client
	name string
}

var _ loadbalancer.L4 = loadBalancerClient{}

func (x loadBalancerClient) Routes(ctx context.Context) ([]loadbalancer.Route, error) {
	resp, err := x.c.loadBalancers.Routes(ctx, &pb.LoadBalancerRoutesRequest{Name: x.name})
	if err := x.c.check(ctx, "Routes", err, resp.GetDiagnostics()); err != nil {
		return nil, err
	}
	out := make([]loadbalancer.Route, len(resp.GetRoutes()))
	for i, r := range resp.GetRoutes() {
		out[i] = routeFromProto(r)
	}
	return out, nil
}

func (x loadBalancerClient) Publish(ctx context.Context, route loadbalancer.Route) error {
	resp, err := x.c.loadBalancers.Publish(ctx, &pb.LoadBalancerPublishRequest{Name: x.name, Route: routeToProto(route)})
	return x.c.check(ctx, "Publish", err, resp.GetDiagnostics())
}

func (x loadBalancerClient) Unpublish(ctx context.Context, loadBalancerPort int) error {
	resp, err := x.c.loadBalancers.Unpublish(ctx, &pb.LoadBalancerUnpublishRequest{Name: x.name, LoadBalancerPort: int64(loadBalancerPort)})
	return x.c.check(ctx, "Unpublish", err, resp.GetDiagnostics())
}

func (x loadBalancerClient) ConfigureHealthCheck(ctx context.Context, hc loadbalancer.HealthCheck) error {
	resp, err := x.c.loadBalancers.ConfigureHealthCheck(ctx, &pb.LoadBalancerConfigureHealthCheckRequest{
		Name: x.name,
		HealthCheck: &pb.HealthCheck{
			BackendPort: int64(hc.BackendPort),
			Healthy:     int64(hc.Healthy),
			Unhealthy:   int64(hc.Unhealthy),
			Interval:    durationpb.New(hc.Interval),
			Timeout:     durationpb.New(hc.Timeout),
		},
	})
	return x.c.check(ctx, "ConfigureHealthCheck", err, resp.GetDiagnostics())
}

func (x loadBalancerClient) Backends(ctx context.Context) ([]loadbalancer.Backend, error) {
	resp, err := x.c.loadBalancers.Backends(ctx, &pb.LoadBalancerBackendsRequest{Name: x.name})
	if err := x.c.check(ctx, "Backends", err, resp.GetDiagnostics()); err != nil {
		return nil, err
	}
	return backendsFromProto(resp.GetBackends()), nil
}

func (x loadBalancerClient) RegisterBackends(ctx context.Context, backends []loadbalancer.Backend) error {
	resp, err := x.c.loadBalancers.RegisterBackends(ctx, &pb.LoadBalancerRegisterBackendsRequest{Name: x.name, Backends: backendsToProto(backends)})
	return x.c.check(ctx, "RegisterBackends", err, resp.GetDiagnostics())
}

func (x loadBalancerClient) DeregisterBackends(ctx context.Context, ids []instance.ID) error {
	pids := make([]string, len(ids))
	for i, id := range ids {
		pids[i] = string(id)
	}
	resp, err := x.c.loadBalancers.DeregisterBackends(ctx, &pb.LoadBalancerDeregisterBackendsRequest{Name: x.name, Ids: pids})
	return x.c.check(ctx, "DeregisterBackends", err, resp.GetDiagnostics())
}
