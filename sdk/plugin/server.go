package plugin

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
	"github.com/infrakit/infrakit/sdk/metrics"
	"github.com/infrakit/infrakit/sdk/nfs"
	"github.com/infrakit/infrakit/sdk/provider"
)

// server is the provider side: it finds the SPI implementation a request
// names. The per-service gRPC servers (instanceServer, ...) share it.
type server struct {
	cfg      ServeConfig
	metadata provider.Metadata
	logger   hclog.Logger
}

func newServer(cfg *ServeConfig, logger hclog.Logger) *server {
	return &server{cfg: *cfg, metadata: completeMetadata(cfg), logger: logger}
}

// completeMetadata adds every served type that cfg.Metadata does not list,
// with an open schema, so Metadata never hides a served type.
func completeMetadata(cfg *ServeConfig) provider.Metadata {
	m := cfg.Metadata
	m.Objects = slices.Clone(m.Objects)
	add := func(kind provider.Kind, types []string) {
		slices.Sort(types)
		for _, t := range types {
			if !slices.ContainsFunc(m.Objects, func(o provider.Object) bool { return o.Kind == kind && o.Type == t }) {
				m.Objects = append(m.Objects, provider.Object{Kind: kind, Type: t, Schema: provider.Schema{Open: true}})
			}
		}
	}
	add(provider.KindInstance, keys(cfg.Instances))
	add(provider.KindFlavor, keys(cfg.Flavors))
	add(provider.KindAuthorizer, keys(cfg.Authorizers))
	add(provider.KindMetrics, keys(cfg.Metrics))
	if cfg.LoadBalancer != nil && len(m.Types(provider.KindLoadBalancer)) == 0 {
		add(provider.KindLoadBalancer, []string{provider.AnyName})
	}
	return m
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func (s *server) instance(typ string) (instance.Plugin, error) {
	return lookup(s.cfg.Instances, provider.KindInstance, typ)
}

func (s *server) flavor(typ string) (flavor.Plugin, error) {
	return lookup(s.cfg.Flavors, provider.KindFlavor, typ)
}

func (s *server) authorizer(typ string) (nfs.Authorizer, error) {
	return lookup(s.cfg.Authorizers, provider.KindAuthorizer, typ)
}

func (s *server) metrics(typ string) (metrics.Source, error) {
	return lookup(s.cfg.Metrics, provider.KindMetrics, typ)
}

func (s *server) loadBalancer(name string) (loadbalancer.L4, error) {
	if s.cfg.LoadBalancer == nil {
		return nil, status.Error(codes.NotFound, "this provider serves no load balancers")
	}
	lb, err := s.cfg.LoadBalancer(name)
	if err != nil {
		return nil, statusOf(fmt.Errorf("load balancer %q: %w", name, err))
	}
	if lb == nil {
		return nil, status.Errorf(codes.NotFound, "load balancer %q is not served by this provider", name)
	}
	return lb, nil
}

func lookup[P any](m map[string]P, kind provider.Kind, typ string) (P, error) {
	p, ok := m[typ]
	if !ok {
		served := keys(m)
		slices.Sort(served)
		list := strings.Join(served, ", ")
		if list == "" {
			list = "none"
		}
		return p, status.Errorf(codes.NotFound, "%s type %q is not served by this provider (it serves: %s)", kind, typ, list)
	}
	return p, nil
}

// badResult reports a provider result that cannot be put on the wire, such
// as an unknown instance state: a bug in the provider.
func badResult(err error) error {
	return status.Errorf(codes.Internal, "provider returned an invalid result: %v", err)
}

// badRequest reports a request that cannot be read, such as an enumeration
// value from a newer host.
func badRequest(err error) error {
	return status.Errorf(codes.InvalidArgument, "invalid request: %v", err)
}
