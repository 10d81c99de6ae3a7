// Package plugin serves providers over hashicorp/go-plugin gRPC and connects
// hosts to them.
//
// A provider's main is one call to Serve with the SPI implementations it
// offers:
//
//	func main() {
//		plugin.Serve(&plugin.ServeConfig{
//			Metadata:  provider.Metadata{Name: "simulator", Version: version},
//			Instances: map[string]instance.Plugin{"compute": compute},
//		})
//	}
//
// A provider that takes settings from its stack's provider block
// (`provider "prometheus" { address = "..." }`) sets ServeConfig.Configure,
// which receives the block's attributes as a JSON object.
//
// A host calls Start to launch a provider binary, Client.Configure to hand
// it its block's configuration, and uses the returned Client's adapters
// (Instance, Flavor, LoadBalancer, Authorizer, Metrics), which implement the
// same SPI interfaces. Every error a Client returns reads
// `provider "<name>": <Method>: <cause>`; diagnostics a provider returns come
// back as provider.Diagnostics (use errors.As), failures to reach the process
// wrap ErrUnavailable, and calls a provider does not support wrap
// errors.ErrUnsupported.
//
// A provider logs with NewLogger; its lines reach the host's logger under the
// provider's name. It needs no shutdown logic: Serve exits the process when
// the host kills it, and within about a second when the host dies without
// doing so.
//
// A provider process runs its Go code on one OS thread (GOMAXPROCS=1) unless
// the GOMAXPROCS environment variable is set or its main calls
// runtime.GOMAXPROCS: providers wait on I/O, goroutines still run
// concurrently, and a second thread makes the Go scheduler wake and spin an
// OS thread for each goroutine hand-off of every call, which costs a third of
// a provider's CPU per call and a fifth of a call's round trip. A CPU-bound
// provider sets it in main.
//
// The wire is the infrakit.provider.v1 gRPC protocol in sdk/proto; one
// process serves all of its SPIs on one gRPC server, with mutual TLS unless
// the host turns it off.
package plugin

import (
	"context"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/infrakit/infrakit/sdk/plugin/internal/startup"
	pb "github.com/infrakit/infrakit/sdk/proto/infrakit/provider/v1"
)

// handshake is what host and provider must agree on before they talk (a
// value, never changed at run time). It is not a security measure: it stops a provider binary run by hand from
// hanging, and a binary that is not a provider from being mistaken for one.
// ProtocolVersion changes only with an incompatible infrakit.provider.v1.
var handshake = goplugin.HandshakeConfig{
	ProtocolVersion:  1,
	MagicCookieKey:   startup.MagicCookieKey,
	MagicCookieValue: startup.MagicCookieValue,
}

// pluginName is the one go-plugin plugin a provider serves; it carries every
// service of infrakit.provider.v1.
const pluginName = "provider"

// envHostPID tells a provider the host's pid, so it can tell that the host
// died even if it did not start the provider directly (a wrapper script).
const envHostPID = "INFRAKIT_PLUGIN_HOST_PID"

// grpcPlugin is the go-plugin glue: on the provider side it registers the
// services; on the host side it hands back the connection.
type grpcPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	server *server // nil on the host side
}

var _ goplugin.GRPCPlugin = (*grpcPlugin)(nil)

func (p *grpcPlugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterProviderServer(s, providerServer{s: p.server})
	pb.RegisterInstanceServer(s, instanceServer{s: p.server})
	pb.RegisterFlavorServer(s, flavorServer{s: p.server})
	pb.RegisterLoadBalancerServer(s, loadBalancerServer{s: p.server})
	pb.RegisterAuthorizerServer(s, authorizerServer{s: p.server})
	pb.RegisterMetricsServer(s, metricsServer{s: p.server})
	return nil
}

func (p *grpcPlugin) GRPCClient(_ context.Context, _ *goplugin.GRPCBroker, conn *grpc.ClientConn) (any, error) {
	return conn, nil
}
