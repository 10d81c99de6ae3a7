// Package plugin serves providers over hashicorp/go-plugin gRPC and connects
// hosts to them. A provider's main is a call to Serve; a host calls Start.
package plugin

import (
	"context"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
	"github.com/infrakit/infrakit/sdk/nfs"
	"github.com/infrakit/infrakit/sdk/provider"
)

// ServeConfig is what a provider serves. Maps are keyed by type name.
type ServeConfig struct {
	// Metadata: Name, Version and Objects (kind, type, property schema).
	Metadata provider.Metadata
	// Instances by instance type ("compute"). A Plugin that also implements
	// instance.Watcher serves the Watch stream.
	Instances map[string]instance.Plugin
	// Flavors by flavor type ("vanilla").
	Flavors map[string]flavor.Plugin
	// LoadBalancer returns the named load balancer; nil when none are served.
	LoadBalancer func(name string) (loadbalancer.L4, error)
	// Authorizers by authorizer type ("disk").
	Authorizers map[string]nfs.Authorizer
	// Logger is optional; by default logs go to stderr as JSON, which the
	// host's go-hclog picks up.
	Logger hclog.Logger
}

// Serve runs the provider until the host goes away. It does not return
// normally; it exits the process when the host dies.
func Serve(cfg *ServeConfig) { panic("TODO: sdk/plugin.Serve") }

// ClientConfig says how to launch a provider binary.
type ClientConfig struct {
	// Name is how errors and logs call the provider ("simulator" or
	// "simulator.nfs-auth").
	Name string
	Path string
	Args []string
	Env  []string
	// SHA256, when set, is checked against the binary at launch (go-plugin SecureConfig).
	SHA256 []byte
	// StartTimeout bounds the handshake; default 10s.
	StartTimeout time.Duration
	// DisableMTLS turns AutoMTLS off (on by default).
	DisableMTLS bool
	Logger      hclog.Logger
}

// Client is one running provider process.
type Client struct{}

// Start launches a provider and completes the handshake.
func Start(ctx context.Context, cfg ClientConfig) (*Client, error) { panic("TODO") }

// Metadata asks the provider about itself.
func (c *Client) Metadata(ctx context.Context) (provider.Metadata, error) { panic("TODO") }

// Instance returns the instance SPI of one type; it also implements instance.Watcher.
func (c *Client) Instance(typ string) instance.Plugin { panic("TODO") }

// Flavor returns the flavor SPI of one type.
func (c *Client) Flavor(typ string) flavor.Plugin { panic("TODO") }

// LoadBalancer returns the named load balancer.
func (c *Client) LoadBalancer(name string) loadbalancer.L4 { panic("TODO") }

// Authorizer returns the NFS authorizer of one type.
func (c *Client) Authorizer(typ string) nfs.Authorizer { panic("TODO") }

// Exited reports whether the provider process has ended.
func (c *Client) Exited() bool { panic("TODO") }

// Kill stops the provider process (gracefully, then forcibly).
func (c *Client) Kill() { panic("TODO") }
