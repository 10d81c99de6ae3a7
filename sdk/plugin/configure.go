package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	pb "github.com/infrakit/infrakit/sdk/proto/infrakit/provider/v1"
	"github.com/infrakit/infrakit/sdk/provider"
)

// Configure gives the provider its provider block's configuration: the
// block's attributes other than alias and parallelism, as a JSON object
// (`{}` or empty when there are none). A host calls it before any other call
// to a process and again when the block changed; see ServeConfig.Configure
// for what the provider does with it. Diagnostics come back as
// provider.Diagnostics whose paths are inside the configuration object.
func (c *Client) Configure(ctx context.Context, config json.RawMessage) error {
	resp, err := c.provider.Configure(ctx, &pb.ProviderConfigureRequest{Config: config})
	return c.check(ctx, "Configure", err, resp.GetDiagnostics())
}

func (x providerServer) Configure(ctx context.Context, req *pb.ProviderConfigureRequest) (*pb.ProviderConfigureResponse, error) {
	config := req.GetConfig()
	if len(config) == 0 {
		config = []byte("{}") // the provider always gets an object
	}
	var attrs map[string]json.RawMessage
	if err := json.Unmarshal(config, &attrs); err != nil || attrs == nil {
		return &pb.ProviderConfigureResponse{Diagnostics: diagnosticsToProto(provider.AttributeError(
			"Invalid provider configuration", "The configuration is not a JSON object.",
		))}, nil
	}
	if x.s.cfg.Configure == nil {
		return &pb.ProviderConfigureResponse{Diagnostics: diagnosticsToProto(ignored(x.s.metadata.Name, attrs))}, nil
	}
	diags, err := diagnosticsOrStatus(x.s.cfg.Configure(ctx, config))
	if err != nil {
		return nil, err
	}
	return &pb.ProviderConfigureResponse{Diagnostics: diags}, nil
}

// ignored warns about each attribute given to a provider that takes no
// configuration. Refusing them would break stacks that worked before
// providers received their blocks' attributes (which were then dropped
// silently); a warning still points at a misspelt or misplaced attribute.
func ignored(name string, attrs map[string]json.RawMessage) provider.Diagnostics {
	var ds provider.Diagnostics
	for _, a := range slices.Sorted(maps.Keys(attrs)) {
		ds = append(ds, provider.Diagnostic{
			Severity: provider.Warning,
			Summary:  "Attribute ignored",
			Detail:   fmt.Sprintf("Provider %q takes no configuration, so %s has no effect.", name, a),
			Path:     []string{a},
		})
	}
	return ds
}
