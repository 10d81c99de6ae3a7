// Package container implements the docker provider's "container" instance
// type: an instance is a Docker container made from its properties (image,
// command, env, labels, network, ports, cpus, memory, restart), through the
// Engine API (see plugins/docker/engine).
//
// What it promises:
//
//   - The instance's tags are the container's labels, as they are, so
//     DescribeInstances is one filtered list call, and `docker ps --filter
//     label=infrakit.group=web` shows a group. The provider adds labels of
//     its own (infrakit.docker.*); it lists, labels and destroys only
//     containers carrying them, never anyone else's.
//   - The instance ID is the short (12 hex digit) container ID. The
//     container is named "<stack>-<group>[-<logical id>]-<8 hex digits>".
//   - It never pulls: an image missing from the host fails Provision at
//     once with an error naming it. Every Engine call has a deadline.
//   - Docker's restart policy defaults to "no", and then Docker removes a
//     container as soon as it exits (AutoRemove): infrakit, not Docker,
//     replaces dead instances, and none is left behind.
//   - Label cannot relabel a container (Docker cannot); the added tags are
//     kept in a record per container under Config.Dir and merged into
//     every description.
//   - Watch follows Docker's event stream, so a container that dies, is
//     killed, OOM-killed, stopped or removed is reported at once; the stream
//     is reopened with backoff when it breaks, and what was missed meanwhile
//     is reported from a fresh listing. A container Docker will not restart
//     is terminating from its die event on, though Docker's listing says
//     "running" a while longer (died.go).
//   - Destroy stops the container (its stop_timeout, default 5 s, between
//     SIGTERM and SIGKILL), then removes it; one already gone is not an error.
package container

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/infrakit/infrakit/plugins/docker/engine"
	"github.com/infrakit/infrakit/sdk/instance"
)

// Provider is the container instance plugin. It implements instance.Plugin
// and instance.Watcher. Call Close when done: it ends the watches.
type Provider struct {
	cfg    Config
	engine *engine.Client
	side   *sidecar
	logger hclog.Logger

	// ctx ends at Close; it bounds every goroutine the provider starts.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	closed   bool
	watchers map[*watcher]struct{}
	// swept is set once stale label records were removed (see sweep).
	swept bool
	// died are the containers Docker will not restart whose die event a
	// watch saw, and when (see died.go).
	died map[instance.ID]time.Time
}

var (
	_ instance.Plugin  = (*Provider)(nil)
	_ instance.Watcher = (*Provider)(nil)
)

// errClosed is returned by Watch after Close.
var errClosed = errors.New("provider is closed")

// New returns a Provider for cfg. It does not contact the Engine: a
// provider starts even while Docker is down, and says so on its first call.
func New(cfg Config) (*Provider, error) {
	if cfg.Dir == "" {
		cfg.Dir = DefaultDir
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("docker provider: %w", err)
	}
	cfg.Dir = dir
	eng, err := engine.New(engine.Config{Host: cfg.Host, Timeout: cfg.CallTimeout})
	if err != nil {
		return nil, fmt.Errorf("docker provider: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Provider{
		cfg:      cfg,
		engine:   eng,
		side:     &sidecar{dir: dir},
		logger:   cfg.Logger,
		ctx:      ctx,
		cancel:   cancel,
		watchers: map[*watcher]struct{}{},
	}, nil
}

// Dir is the absolute directory of the label records.
func (p *Provider) Dir() string { return p.cfg.Dir }

// Engine is the provider's Engine client.
func (p *Provider) Engine() *engine.Client { return p.engine }

// Close ends every watch (their channels close) and waits for them.
func (p *Provider) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
	p.engine.Close()
}

// Validate checks the properties; it does not contact the Engine.
func (p *Provider) Validate(_ context.Context, properties json.RawMessage) error {
	_, err := Parse(properties)
	return err
}

// MissingImageError is Provision's error when the image is not on the host.
type MissingImageError struct{ Image string }

func (e *MissingImageError) Error() string {
	return fmt.Sprintf("image %q is not present on this Docker host; build or load it first — infrakit never pulls", e.Image)
}

// nameAttempts is how many random names Provision tries before giving up.
const nameAttempts = 3

// Provision creates and starts a container; it returns once Docker has
// started it (its state is then running, or pending with a restart policy
// that is restarting it). A container that fails to start is removed.
func (p *Provider) Provision(ctx context.Context, spec instance.Spec) (instance.ID, error) {
	props, err := Parse(spec.Properties)
	if err != nil {
		return "", err
	}
	cfg := containerConfig(props, spec.Properties, spec)
	if cfg.NetworkingConfig, err = fixedEndpoint(props, spec); err != nil {
		return "", err
	}
	var created engine.Created
	for range nameAttempts {
		name := containerName(spec.Tags, spec.LogicalID, randomSuffix())
		created, err = p.engine.ContainerCreate(ctx, name, cfg)
		if !engine.IsConflict(err) { // a conflict is a name in use: draw another
			break
		}
	}
	if err != nil {
		if engine.IsNotFound(err) {
			if present, ierr := p.engine.ImageInspect(ctx, props.Image); ierr == nil && !present {
				return "", &MissingImageError{Image: props.Image}
			}
		}
		return "", fmt.Errorf("create container from %q: %w", props.Image, err)
	}
	id := shortID(created.ID)
	for _, w := range created.Warnings {
		p.logger.Warn("docker warns about a new container", "id", id, "warning", w)
	}
	if err := p.engine.ContainerStart(ctx, created.ID); err != nil {
		// Leave nothing half made behind, even when ctx has ended.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if rerr := p.engine.ContainerRemove(cctx, created.ID, true); rerr != nil && !engine.IsNotFound(rerr) {
			p.logger.Warn("removing a container that failed to start", "id", id, "error", rerr)
		}
		return "", fmt.Errorf("start container %s from %q: %w", id, props.Image, err)
	}
	p.logger.Debug("provisioned", "id", id, "image", props.Image)
	return id, nil
}

// fixedEndpoint is the endpoint of a pet with fixed_ip: its logical ID as
// its IPv4 address on the network, and as a network alias; nil for cattle
// and without fixed_ip.
func fixedEndpoint(p Properties, spec instance.Spec) (*engine.NetworkingConfig, error) {
	if !p.FixedIP || spec.LogicalID == nil {
		return nil, nil
	}
	ip, err := FixedIPv4(string(*spec.LogicalID))
	if err != nil {
		return nil, err
	}
	return &engine.NetworkingConfig{EndpointsConfig: map[string]engine.EndpointSettings{
		p.Network: {IPAMConfig: &engine.EndpointIPAM{IPv4Address: ip}},
	}}, nil
}

// randomSuffix is 8 random hex digits.
func randomSuffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// owned inspects id and checks it is a container this provider made.
// found is false (with a nil error) when there is no such container.
func (p *Provider) owned(ctx context.Context, id instance.ID) (c engine.ContainerJSON, found bool, err error) {
	if id == "" {
		return c, false, nil
	}
	c, err = p.engine.ContainerInspect(ctx, string(id))
	if engine.IsNotFound(err) {
		return c, false, nil
	}
	if err != nil {
		return c, false, err
	}
	if _, ok := tagKeys(c.Config.Labels); !ok {
		return c, true, fmt.Errorf("container %s (%s) was not made by infrakit's docker provider; it is left alone",
			id, strings.TrimPrefix(c.Name, "/"))
	}
	return c, true, nil
}

// Label merges tags into the instance's tags. Docker cannot relabel a
// container, so the tags that differ from its labels are recorded under
// Config.Dir and merged into its descriptions.
func (p *Provider) Label(ctx context.Context, id instance.ID, tags map[string]string) error {
	c, found, err := p.owned(ctx, id)
	if err != nil {
		return fmt.Errorf("label %s: %w", id, err)
	}
	if !found {
		return fmt.Errorf("label %s: no such container", id)
	}
	short := shortID(c.ID)
	keys, _ := tagKeys(c.Config.Labels) // owned checked they are there
	same := true
	for k, v := range tags {
		// A label of the labels property is not a tag, even with this value.
		if cur, ok := c.Config.Labels[k]; !ok || cur != v || !slices.Contains(keys, k) {
			same = false
		}
	}
	if same {
		// Every tag already is a tag label: nothing to record, unless a
		// record holds another value for one of them.
		recorded, err := p.side.get(short)
		if err != nil {
			return fmt.Errorf("label %s: %w", id, err)
		}
		if recorded == nil {
			return nil
		}
	}
	if err := p.side.merge(short, tags); err != nil {
		return err
	}
	p.nudge(short)
	return nil
}

// Destroy stops the container (SIGTERM, its stop_timeout, then SIGKILL) and
// removes it. A container that is already gone is not an error; one this
// provider did not make is refused.
func (p *Provider) Destroy(ctx context.Context, id instance.ID, reason instance.DestroyReason) error {
	c, found, err := p.owned(ctx, id)
	if err != nil {
		return fmt.Errorf("destroy %s: %w", id, err)
	}
	if !found {
		return nil
	}
	short := shortID(c.ID)
	grace := DefaultStopTimeout
	if c.Config.StopTimeout != nil {
		grace = time.Duration(*c.Config.StopTimeout) * time.Second
	}
	p.logger.Debug("destroying", "id", short, "reason", reason, "grace", grace)
	// A stop that fails (the container died meanwhile, or is being
	// removed) is not final: the forced remove below still ends it.
	if err := p.engine.ContainerStop(ctx, c.ID, grace); err != nil && !engine.IsNotFound(err) {
		p.logger.Debug("stop before remove", "id", short, "error", err)
	}
	// With AutoRemove Docker may already be removing it: a 404 means it is
	// gone, a conflict ("removal already in progress") that it soon will
	// be, which is waited for, so that nothing is left once Destroy returns.
	err = p.engine.ContainerRemove(ctx, c.ID, true)
	if engine.IsConflict(err) {
		err = p.engine.ContainerWait(ctx, c.ID, "removed")
	}
	if err != nil && !engine.IsNotFound(err) {
		return fmt.Errorf("destroy %s: %w", short, err)
	}
	if err := p.side.remove(short); err != nil {
		p.logger.Warn("destroy", "id", short, "error", err)
	}
	return nil
}

// DescribeInstances lists the containers carrying every tag, in one list
// call. Tags Label recorded are merged in; a tag that may have been changed
// that way is matched here rather than by the Engine's filter.
func (p *Provider) DescribeInstances(ctx context.Context, tags map[string]string, withProperties bool) ([]instance.Description, error) {
	extra, err := p.side.all()
	if err != nil {
		return nil, err
	}
	if len(extra) > 0 {
		p.sweep(ctx, extra)
	}
	cs, err := p.engine.ContainerList(ctx, labelFilter(tags, overriddenBy(extra)))
	if err != nil {
		return nil, fmt.Errorf("describe instances: %w", err)
	}
	out := make([]instance.Description, 0, len(cs))
	for _, c := range cs {
		d, ok := p.describe(c, extra[shortID(c.ID)], withProperties)
		if ok && matches(d.Tags, tags) {
			out = append(out, d)
		}
	}
	slices.SortFunc(out, func(a, b instance.Description) int { return strings.Compare(string(a.ID), string(b.ID)) })
	return out, nil
}

// overriddenBy says which tag keys a label record sets for some container.
func overriddenBy(extra map[instance.ID]map[string]string) func(string) bool {
	keys := map[string]bool{}
	for _, tags := range extra {
		for k := range tags {
			keys[k] = true
		}
	}
	return func(k string) bool { return keys[k] }
}

// sweep removes, once per provider process, the label records of
// containers that no longer exist (removed by Docker or by hand while no
// provider was watching).
func (p *Provider) sweep(ctx context.Context, extra map[instance.ID]map[string]string) {
	p.mu.Lock()
	done := p.swept
	p.swept = true
	p.mu.Unlock()
	if done {
		return
	}
	cs, err := p.engine.ContainerList(ctx, engine.Filters{"label": {LabelTags}})
	if err != nil {
		p.logger.Debug("sweep label records", "error", err)
		return
	}
	live := map[instance.ID]bool{}
	for _, c := range cs {
		live[shortID(c.ID)] = true
	}
	for _, id := range slices.Sorted(maps.Keys(extra)) {
		if !live[id] {
			if err := p.side.remove(id); err != nil {
				p.logger.Debug("sweep label records", "error", err)
			}
			delete(extra, id)
		}
	}
}
