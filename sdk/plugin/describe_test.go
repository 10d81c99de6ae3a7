package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"testing"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/infrakit/infrakit/sdk/instance"
	pb "github.com/infrakit/infrakit/sdk/proto/infrakit/provider/v1"
	"github.com/infrakit/infrakit/sdk/provider"
)

// DescribeInstances sends the tags all described instances share once
// (common_tags) when the host asks; these tests check both ends against a
// provider built with this SDK and one built before the field existed.
//
// The test binary doubles as the instance provider of these tests: with
// envInstanceProvider set, init serves an in-memory "compute" type
// (memInstances) and never returns.
//
//	current  with this SDK
//	old      as a provider built before common_tags: its DescribeInstances
//	         never sees the host's request for them
const envInstanceProvider = "PLUGIN_TEST_INSTANCE_PROVIDER"

func init() {
	mode := os.Getenv(envInstanceProvider)
	if mode == "" {
		return
	}
	cfg := &ServeConfig{
		Metadata:  provider.Metadata{Name: "instances", Version: "1.0.0"},
		Instances: map[string]instance.Plugin{"compute": &memInstances{byID: map[instance.ID]instance.Description{}}},
	}
	if mode == "current" {
		Serve(cfg)
	}
	// As a provider built before common_tags: the field is unknown to its
	// DescribeInstances, so it answers with every instance's full tags and
	// no common ones.
	serveOld(cfg, func(s *grpc.Server, srv *server) {
		pb.RegisterProviderServer(s, providerServer{s: srv})
		pb.RegisterInstanceServer(s, oldInstanceServer{instanceServer{s: srv}})
	})
}

// serveOld serves cfg as a provider built with an older SDK would, and
// exits: register registers its gRPC services, without what it predates.
func serveOld(cfg *ServeConfig, register func(*grpc.Server, *server)) {
	logger := NewLogger()
	watchHost(logger, os.Getppid(), hostPIDFromEnv())
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig: handshake,
		Plugins:         goplugin.PluginSet{pluginName: &oldPlugin{server: newServer(cfg, logger), register: register}},
		GRPCServer:      goplugin.DefaultGRPCServer,
		Logger:          logger,
	})
	os.Exit(0)
}

// oldPlugin is the go-plugin side of serveOld.
type oldPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	server   *server
	register func(*grpc.Server, *server)
}

func (p *oldPlugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	p.register(s, p.server)
	return nil
}

func (p *oldPlugin) GRPCClient(context.Context, *goplugin.GRPCBroker, *grpc.ClientConn) (any, error) {
	return nil, errors.New("provider side only")
}

type oldInstanceServer struct{ instanceServer }

func (x oldInstanceServer) DescribeInstances(ctx context.Context, req *pb.InstanceDescribeInstancesRequest) (*pb.InstanceDescribeInstancesResponse, error) {
	old := &pb.InstanceDescribeInstancesRequest{Type: req.GetType(), Tags: req.GetTags(), WithProperties: req.GetWithProperties()}
	return x.instanceServer.DescribeInstances(ctx, old)
}

// memInstances keeps instances in memory; they are described in ID order.
type memInstances struct {
	mu   sync.Mutex
	next int
	byID map[instance.ID]instance.Description
}

func (*memInstances) Validate(context.Context, json.RawMessage) error { return nil }

func (p *memInstances) Provision(_ context.Context, spec instance.Spec) (instance.ID, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next++
	id := instance.ID("i-" + strconv.Itoa(p.next))
	p.byID[id] = instance.Description{ID: id, Tags: maps.Clone(spec.Tags), State: instance.StateRunning}
	return id, nil
}

func (p *memInstances) Label(context.Context, instance.ID, map[string]string) error {
	return errors.ErrUnsupported
}

func (p *memInstances) Destroy(_ context.Context, id instance.ID, _ instance.DestroyReason) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.byID, id)
	return nil
}

func (p *memInstances) DescribeInstances(_ context.Context, tags map[string]string, _ bool) ([]instance.Description, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []instance.Description
	for _, id := range slices.Sorted(maps.Keys(p.byID)) {
		if d := p.byID[id]; matches(d.Tags, tags) {
			out = append(out, d)
		}
	}
	return out, nil
}

func matches(tags, selector map[string]string) bool {
	for k, v := range selector {
		if w, ok := tags[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// describeSeeds are three members of group g (two configs, one pet) and one
// instance of another group: the group's common tags are stack and group.
var describeSeeds = []map[string]string{
	{"infrakit.stack": "s", "infrakit.group": "g", "infrakit.config.hash": "h1"},
	{"infrakit.stack": "s", "infrakit.group": "g", "infrakit.config.hash": "h1", "infrakit.logical_id": "pet"},
	{"infrakit.stack": "s", "infrakit.group": "g", "infrakit.config.hash": "h2"},
	{"infrakit.stack": "s", "infrakit.group": "other", "infrakit.config.hash": "h1"},
}

// startInstances starts the test binary as an instance provider in mode,
// holding describeSeeds (IDs i-1 to i-4).
func startInstances(t *testing.T, mode string) *Client {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c, _ := startTest(t, "", func(cfg *ClientConfig) {
		cfg.Path = exe
		cfg.Env = []string{envInstanceProvider + "=" + mode}
	})
	for _, tags := range describeSeeds {
		if _, err := c.Instance("compute").Provision(ctxT(t), instance.Spec{Tags: tags}); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// wantDescribed asserts what DescribeInstances gives the host for selector
// sel: each instance's full tags, each in a map of its own.
func wantDescribed(t *testing.T, c *Client, sel map[string]string, want ...int) {
	t.Helper()
	descs, err := c.Instance("compute").DescribeInstances(ctxT(t), sel, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(descs) != len(want) {
		t.Fatalf("selector %v: %d instances, want %d: %v", sel, len(descs), len(want), descs)
	}
	for i, seed := range want {
		d := descs[i]
		if id := instance.ID("i-" + strconv.Itoa(seed+1)); d.ID != id || d.State != instance.StateRunning {
			t.Fatalf("instance %d is %s (%s), want %s (running)", i, d.ID, d.State, id)
		}
		if !maps.Equal(d.Tags, describeSeeds[seed]) {
			t.Fatalf("%s: tags %v, want %v", d.ID, d.Tags, describeSeeds[seed])
		}
	}
	// A caller may change one description's tags without changing another's.
	for i := range descs {
		descs[i].Tags["mark"] = strconv.Itoa(i)
	}
	for i, d := range descs {
		if d.Tags["mark"] != strconv.Itoa(i) {
			t.Fatalf("%s shares its tags map with another description", d.ID)
		}
	}
}

// The host gets every instance's full tags back, whether the provider
// factors common tags out (current) or predates common_tags (old).
func TestDescribeCommonTags(t *testing.T) {
	for _, mode := range []string{"current", "old"} {
		t.Run(mode, func(t *testing.T) {
			c := startInstances(t, mode)
			wantDescribed(t, c, map[string]string{"infrakit.stack": "s", "infrakit.group": "g"}, 0, 1, 2)
			wantDescribed(t, c, map[string]string{"infrakit.config.hash": "h1"}, 0, 1, 3) // nothing but the selector in common
			wantDescribed(t, c, map[string]string{"infrakit.stack": "s"}, 0, 1, 2, 3)
			wantDescribed(t, c, map[string]string{"infrakit.group": "other"}, 3) // one instance: nothing to share
			wantDescribed(t, c, map[string]string{"infrakit.group": "none"})
		})
	}
}

// On the wire: a provider built with this SDK sends the shared tags once
// when asked, each instance's own tags (none for a group's cattle) beside
// them, and full tags when not asked.
func TestDescribeFactorsCommonTags(t *testing.T) {
	c := startInstances(t, "current")
	describe := func(sel map[string]string, common bool) *pb.InstanceDescribeInstancesResponse {
		t.Helper()
		resp, err := c.instances.DescribeInstances(ctxT(t), &pb.InstanceDescribeInstancesRequest{Type: "compute", Tags: sel, CommonTags: common})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	wire := func(resp *pb.InstanceDescribeInstancesResponse) []map[string]string {
		var out []map[string]string
		for _, pd := range resp.GetInstances() {
			out = append(out, pd.GetTags())
		}
		return out
	}
	group := map[string]string{"infrakit.stack": "s", "infrakit.group": "g"}

	resp := describe(group, true)
	if want := group; !maps.Equal(resp.GetCommonTags(), want) {
		t.Fatalf("common_tags %v, want %v", resp.GetCommonTags(), want)
	}
	want := []map[string]string{
		{"infrakit.config.hash": "h1"},
		{"infrakit.config.hash": "h1", "infrakit.logical_id": "pet"},
		{"infrakit.config.hash": "h2"},
	}
	if got := wire(resp); !reflect.DeepEqual(got, want) {
		t.Fatalf("own tags on the wire %v, want %v", got, want)
	}

	// Cattle of one config: everything is common, nothing is sent per instance.
	resp = describe(map[string]string{"infrakit.group": "g", "infrakit.config.hash": "h1"}, true)
	if want := describeSeeds[0]; !maps.Equal(resp.GetCommonTags(), want) {
		t.Fatalf("common_tags %v, want %v", resp.GetCommonTags(), want)
	}
	if got := wire(resp); !reflect.DeepEqual(got, []map[string]string{nil, {"infrakit.logical_id": "pet"}}) {
		t.Fatalf("own tags on the wire %v", got)
	}

	// Not asked (a host that predates common_tags): full tags, no common ones.
	resp = describe(group, false)
	if resp.GetCommonTags() != nil {
		t.Fatalf("common_tags %v sent unasked", resp.GetCommonTags())
	}
	if got := wire(resp); !reflect.DeepEqual(got, describeSeeds[:3]) {
		t.Fatalf("tags on the wire %v, want %v", got, describeSeeds[:3])
	}
}

func TestCommonAndOwnTags(t *testing.T) {
	descs := func(tags ...map[string]string) []instance.Description {
		var out []instance.Description
		for _, t := range tags {
			out = append(out, instance.Description{Tags: t})
		}
		return out
	}
	a := map[string]string{"x": "1", "y": "2"}
	b := map[string]string{"x": "1", "y": "3", "z": "4"}
	if got := commonTags(descs(a, b)); !maps.Equal(got, map[string]string{"x": "1"}) {
		t.Fatalf("commonTags = %v", got)
	}
	if got := commonTags(descs(a)); got != nil {
		t.Fatalf("commonTags of one instance = %v, want nil", got)
	}
	if got := commonTags(descs(a, map[string]string{"x": "2"})); got != nil {
		t.Fatalf("commonTags with nothing shared = %v, want nil", got)
	}
	if got := commonTags(descs(a, nil)); got != nil {
		t.Fatalf("commonTags with an untagged instance = %v, want nil", got)
	}
	common := map[string]string{"x": "1"}
	if own := ownTags(b, common); !maps.Equal(own, map[string]string{"y": "3", "z": "4"}) {
		t.Fatalf("ownTags = %v", own)
	}
	if own := ownTags(map[string]string{"x": "1"}, common); own != nil {
		t.Fatalf("ownTags with nothing of its own = %v, want nil", own)
	}
	joined := joinTags(common, map[string]string{"y": "3"})
	if !maps.Equal(joined, map[string]string{"x": "1", "y": "3"}) {
		t.Fatalf("joinTags = %v", joined)
	}
	joined["x"] = "changed"
	if common["x"] != "1" {
		t.Fatal("joinTags shares its map with common")
	}
	if shared := joinTags(common, nil); !maps.Equal(shared, common) {
		t.Fatalf("joinTags with nothing of its own = %v, want %v", shared, common)
	}
	if own := map[string]string{"y": "3"}; !maps.Equal(joinTags(nil, own), own) {
		t.Fatal("joinTags without common tags changed the own tags")
	}
}
