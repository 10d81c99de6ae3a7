// Command testprovider is an in-memory provider for the tests of package
// plugin: it implements every SPI, takes a configuration (which its metrics
// source reads back) and misbehaves on request.
//
// TESTPROVIDER_MODE selects a misbehaviour:
//
//	crash-at-start  write to stderr and exit 3 before the handshake
//	hang-at-start   never handshake
//	garbage         print a line that is not a handshake, then hang
//	slow-call       DescribeInstances blocks until its context ends
//	report-runtime  log the runtime settings it starts with (gomaxprocs)
//	with-child      start a child process (sleep) that lives as long as it
//	no-config       take no configuration (ServeConfig.Configure is nil)
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
	"github.com/infrakit/infrakit/sdk/metrics"
	"github.com/infrakit/infrakit/sdk/nfs"
	"github.com/infrakit/infrakit/sdk/plugin"
	"github.com/infrakit/infrakit/sdk/provider"
)

func main() {
	mode := os.Getenv("TESTPROVIDER_MODE")
	switch mode {
	case "crash-at-start":
		fmt.Fprintln(os.Stderr, "testprovider: crashing at start as asked")
		os.Exit(3)
	case "hang-at-start":
		time.Sleep(time.Hour)
	case "garbage":
		fmt.Println("hello, I am not a plugin")
		time.Sleep(time.Hour)
	}
	logger := plugin.NewLogger()
	if mode == "report-runtime" {
		logger.Info("runtime", "gomaxprocs", runtime.GOMAXPROCS(0))
	}
	if mode == "with-child" {
		// A child in the provider's process group, as a provider that runs
		// tools has; a forced stop must end it too.
		if err := exec.Command("sleep", "3600").Start(); err != nil {
			fmt.Fprintln(os.Stderr, "testprovider: starting a child:", err)
			os.Exit(3)
		}
	}
	compute := &instances{slow: mode == "slow-call", logger: logger, byID: map[instance.ID]instance.Description{}}
	lbs := &loadBalancers{byName: map[string]*l4{}}
	config := &settings{}
	configure := config.configure
	if mode == "no-config" {
		configure = nil
	}
	plugin.Serve(&plugin.ServeConfig{
		Metadata: provider.Metadata{
			Name:    "test",
			Version: "1.2.3",
			Objects: []provider.Object{{
				Kind: provider.KindInstance,
				Type: "compute",
				Schema: provider.Schema{Attributes: map[string]provider.Attribute{
					"note": {Type: "string", Description: "free text"},
					"bad":  {Type: "list(string)"},
				}},
			}},
		},
		Instances: map[string]instance.Plugin{
			"compute": compute,
			"nowatch": struct{ instance.Plugin }{compute}, // hides Watch
		},
		Flavors:      map[string]flavor.Plugin{"vanilla": vanilla{}},
		LoadBalancer: lbs.get,
		Authorizers:  map[string]nfs.Authorizer{"disk": &disks{byID: map[string]nfs.Authorization{}}},
		Metrics:      map[string]metrics.Source{"testql": gauges{settings: config}},
		Configure:    configure,
	})
}

// validate reports {"bad": ...} as an error at bad.0 and {"old": ...} as a warning.
func validate(properties json.RawMessage) error {
	var props map[string]any
	if len(properties) > 0 {
		if err := json.Unmarshal(properties, &props); err != nil {
			return fmt.Errorf("properties are not a JSON object: %w", err)
		}
	}
	var diags provider.Diagnostics
	if _, ok := props["old"]; ok {
		diags = append(diags, provider.Diagnostic{Severity: provider.Warning, Summary: "Deprecated attribute", Detail: "old is going away", Path: []string{"old"}})
	}
	if _, ok := props["bad"]; ok {
		diags = append(diags, provider.Diagnostic{Severity: provider.Error, Summary: "Invalid value", Detail: "bad is not allowed", Path: []string{"bad", "0"}})
	}
	return diags
}

type watcher struct {
	tags   map[string]string
	events chan instance.Event
}

type instances struct {
	slow   bool
	logger hclog.Logger

	mu       sync.Mutex
	next     int
	byID     map[instance.ID]instance.Description
	watchers map[*watcher]bool
}

func (p *instances) Validate(_ context.Context, properties json.RawMessage) error {
	return validate(properties)
}

func (p *instances) Provision(ctx context.Context, spec instance.Spec) (instance.ID, error) {
	d, err := p.ProvisionDescribed(ctx, spec)
	return d.ID, err
}

// ProvisionDescribed describes what it made ("nowatch" hides it, as a
// provider that predates it would).
func (p *instances) ProvisionDescribed(_ context.Context, spec instance.Spec) (instance.Description, error) {
	switch spec.Tags["fail"] {
	case "plain":
		return instance.Description{}, errors.New("capacity exhausted")
	case "unsupported":
		return instance.Description{}, fmt.Errorf("attachments: %w", errors.ErrUnsupported)
	case "noid":
		return instance.Description{}, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next++
	d := instance.Description{
		ID:         instance.ID("i-" + strconv.Itoa(p.next)),
		LogicalID:  spec.LogicalID,
		Tags:       maps.Clone(spec.Tags),
		Properties: spec.Properties,
		Address:    "10.0.0." + strconv.Itoa(p.next),
		State:      instance.StateRunning,
	}
	if spec.Tags["fail"] == "state" {
		d.State = "booting"
	}
	if spec.Tags["tag"] == "added" {
		d.Tags["added"] = "by the provider" // not the spec's: described in full
	}
	p.byID[d.ID] = d
	p.logger.Info("provisioned", "id", d.ID)
	p.notify(instance.Event{Type: instance.EventChanged, ID: d.ID, Instance: &d})
	return d, nil
}

func (p *instances) Label(_ context.Context, id instance.ID, tags map[string]string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	d, ok := p.byID[id]
	if !ok {
		return fmt.Errorf("no instance %q", id)
	}
	d.Tags = maps.Clone(d.Tags)
	if d.Tags == nil {
		d.Tags = map[string]string{}
	}
	maps.Copy(d.Tags, tags)
	p.byID[id] = d
	p.notify(instance.Event{Type: instance.EventChanged, ID: id, Instance: &d})
	return nil
}

func (p *instances) Destroy(_ context.Context, id instance.ID, reason instance.DestroyReason) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.byID[id]; !ok {
		return nil // already gone
	}
	delete(p.byID, id)
	p.logger.Info("destroyed", "id", id, "reason", reason)
	p.notify(instance.Event{Type: instance.EventGone, ID: id})
	return nil
}

func (p *instances) DescribeInstances(ctx context.Context, tags map[string]string, withProperties bool) ([]instance.Description, error) {
	if p.slow {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Minute):
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []instance.Description
	for _, id := range slices.Sorted(maps.Keys(p.byID)) {
		d := p.byID[id]
		if !matches(d.Tags, tags) {
			continue
		}
		if !withProperties {
			d.Properties = nil
		}
		out = append(out, d)
	}
	return out, nil
}

func (p *instances) Watch(ctx context.Context, tags map[string]string) (<-chan instance.Event, error) {
	if tags["refuse"] != "" {
		return nil, provider.AttributeError("Cannot watch", "refused as asked", "tags", "refuse")
	}
	w := &watcher{tags: tags, events: make(chan instance.Event, 64)}
	p.mu.Lock()
	if p.watchers == nil {
		p.watchers = map[*watcher]bool{}
	}
	p.watchers[w] = true
	p.mu.Unlock()
	go func() {
		<-ctx.Done()
		p.mu.Lock()
		defer p.mu.Unlock()
		delete(p.watchers, w)
		close(w.events)
	}()
	return w.events, nil
}

// notify runs with p.mu held, so no watcher's channel closes meanwhile.
func (p *instances) notify(e instance.Event) {
	var tags map[string]string
	if e.Instance != nil {
		tags = e.Instance.Tags
	}
	for w := range p.watchers {
		if e.Type == instance.EventGone || matches(tags, w.tags) {
			select {
			case w.events <- e:
			default:
				p.logger.Warn("watcher too slow; event dropped", "id", e.ID)
			}
		}
	}
}

func matches(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// vanilla is a flavor that tags and numbers what it prepares.
type vanilla struct{}

func (vanilla) Validate(_ context.Context, properties json.RawMessage, a flavor.Allocation) error {
	if a.Size < 0 {
		return provider.AttributeError("Invalid size", "size must not be negative", "size")
	}
	return validate(properties)
}

func (vanilla) Prepare(_ context.Context, properties json.RawMessage, spec instance.Spec, a flavor.Allocation, index flavor.Index) (instance.Spec, error) {
	spec.Tags = maps.Clone(spec.Tags)
	if spec.Tags == nil {
		spec.Tags = map[string]string{}
	}
	spec.Tags["flavor"] = "vanilla"
	spec.Tags["size"] = strconv.Itoa(a.Size) + "/" + strconv.Itoa(len(a.LogicalIDs))
	spec.Init += fmt.Sprintf("echo %s-%d %s\n", index.Group, index.Sequence, properties)
	spec.Attachments = append(spec.Attachments, instance.Attachment{ID: "vol-" + index.Group, Type: "volume"})
	return spec, nil
}

// Healthy answers the instance's "health" tag, whatever it says.
func (vanilla) Healthy(_ context.Context, _ json.RawMessage, inst instance.Description) (flavor.Health, error) {
	return flavor.Health(inst.Tags["health"]), nil
}

func (vanilla) Drain(_ context.Context, _ json.RawMessage, inst instance.Description) error {
	if inst.State != instance.StateTerminating {
		return fmt.Errorf("drain %s: instance is %s, not terminating", inst.ID, inst.State)
	}
	return nil
}

type loadBalancers struct {
	mu     sync.Mutex
	byName map[string]*l4
}

func (s *loadBalancers) get(name string) (loadbalancer.L4, error) {
	if name == "missing" {
		return nil, nil
	}
	if name == "broken" {
		return nil, errors.New("cannot reach the load balancer API")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	lb, ok := s.byName[name]
	if !ok {
		lb = &l4{routes: map[int]loadbalancer.Route{}, backends: map[instance.ID]loadbalancer.Backend{}}
		s.byName[name] = lb
	}
	return lb, nil
}

type l4 struct {
	mu       sync.Mutex
	routes   map[int]loadbalancer.Route
	backends map[instance.ID]loadbalancer.Backend
	hc       loadbalancer.HealthCheck
}

func (lb *l4) Routes(context.Context) ([]loadbalancer.Route, error) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	var out []loadbalancer.Route
	for _, port := range slices.Sorted(maps.Keys(lb.routes)) {
		out = append(out, lb.routes[port])
	}
	if lb.hc.BackendPort != 0 { // make the health check observable
		out = append(out, loadbalancer.Route{Port: lb.hc.BackendPort, Protocol: "health",
			LoadBalancerPort: lb.hc.Healthy*100 + lb.hc.Unhealthy, Certificate: lb.hc.Interval.String() + "/" + lb.hc.Timeout.String()})
	}
	return out, nil
}

func (lb *l4) Publish(_ context.Context, r loadbalancer.Route) error {
	if r.LoadBalancerPort <= 0 {
		return provider.AttributeError("Invalid port", "lb_port must be positive", "route", "lb_port")
	}
	lb.mu.Lock()
	defer lb.mu.Unlock()
	lb.routes[r.LoadBalancerPort] = r
	return nil
}

func (lb *l4) Unpublish(_ context.Context, port int) error {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	delete(lb.routes, port)
	return nil
}

func (lb *l4) ConfigureHealthCheck(_ context.Context, hc loadbalancer.HealthCheck) error {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	lb.hc = hc
	return nil
}

func (lb *l4) Backends(context.Context) ([]loadbalancer.Backend, error) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	var out []loadbalancer.Backend
	for _, id := range slices.Sorted(maps.Keys(lb.backends)) {
		out = append(out, lb.backends[id])
	}
	return out, nil
}

func (lb *l4) RegisterBackends(_ context.Context, bs []loadbalancer.Backend) error {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	for _, b := range bs {
		lb.backends[b.ID] = b
	}
	return nil
}

func (lb *l4) DeregisterBackends(_ context.Context, ids []instance.ID) error {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	for _, id := range ids {
		delete(lb.backends, id)
	}
	return nil
}

type disks struct {
	mu   sync.Mutex
	next int
	byID map[string]nfs.Authorization
}

func (d *disks) Validate(_ context.Context, properties json.RawMessage) error {
	return validate(properties)
}

func (d *disks) Describe(context.Context) ([]nfs.Authorization, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []nfs.Authorization
	for _, id := range slices.Sorted(maps.Keys(d.byID)) {
		out = append(out, d.byID[id])
	}
	return out, nil
}

func (d *disks) Authorize(_ context.Context, a nfs.Authorization) (string, error) {
	if a.Host == "" {
		return "", provider.AttributeError("Missing host", "an authorization needs a host", "host")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.next++
	a.ID = "a-" + strconv.Itoa(d.next)
	d.byID[a.ID] = a
	return a.ID, nil
}

func (d *disks) Revoke(_ context.Context, id string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.byID, id)
	return nil
}
