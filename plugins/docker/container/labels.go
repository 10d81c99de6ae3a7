package container

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/infrakit/infrakit/plugins/docker/engine"
	"github.com/infrakit/infrakit/sdk/instance"
)

// Labels the provider puts on each container besides the instance's tags
// (which become labels as they are). The "infrakit." prefix is reserved for
// tags by the core, so these never collide with one.
const (
	// LabelTags lists the instance's tag keys (a JSON array), so Describe
	// tells tags from the labels property; its presence marks a container
	// as one this provider made, and only those are listed or destroyed.
	LabelTags = "infrakit.docker.tags"
	// LabelLogicalID is the pet's logical ID.
	LabelLogicalID = "infrakit.docker.logical_id"
	// LabelPort is the port of the instance's Address.
	LabelPort = "infrakit.docker.port"
	// LabelProperties is the properties the container was made from (JSON).
	LabelProperties = "infrakit.docker.properties"
)

// ShortIDLen is the length of an instance ID: Docker's short container ID,
// the one `docker ps` shows and every docker command accepts.
const ShortIDLen = 12

// shortID is the instance ID of a container ID.
func shortID(id string) instance.ID {
	if len(id) > ShortIDLen {
		id = id[:ShortIDLen]
	}
	return instance.ID(id)
}

// containerConfig is the create request for an instance: the properties,
// the tags as labels (a tag wins over a labels property of the same key),
// the provider's own labels, and INFRAKIT_LOGICAL_ID / INFRAKIT_INIT.
func containerConfig(p Properties, raw json.RawMessage, spec instance.Spec) engine.ContainerConfig {
	labels := maps.Clone(p.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, spec.Tags)
	keys, _ := json.Marshal(append([]string{}, slices.Sorted(maps.Keys(spec.Tags))...)) // a []string always encodes; [] when empty
	labels[LabelTags] = string(keys)
	var compact bytes.Buffer
	if json.Compact(&compact, raw) == nil {
		labels[LabelProperties] = compact.String()
	}
	if port := p.AddressPort(); port != 0 {
		labels[LabelPort] = strconv.Itoa(port)
	}

	env := make([]string, 0, len(p.Env)+2)
	for _, k := range slices.Sorted(maps.Keys(p.Env)) {
		env = append(env, k+"="+p.Env[k])
	}
	if spec.LogicalID != nil {
		labels[LabelLogicalID] = string(*spec.LogicalID)
		env = append(env, EnvLogicalID+"="+string(*spec.LogicalID))
	}
	if spec.Init != "" {
		env = append(env, EnvInit+"="+spec.Init)
	}

	stop := int(math.Ceil(p.StopTimeout.Seconds()))
	cfg := engine.ContainerConfig{
		Image:       p.Image,
		Cmd:         p.Command,
		Env:         env,
		Labels:      labels,
		StopTimeout: &stop,
		HostConfig: engine.HostConfig{
			NetworkMode:   p.Network,
			NanoCPUs:      int64(math.Round(p.CPUs * 1e9)),
			Memory:        p.Memory,
			RestartPolicy: engine.RestartPolicy{Name: p.Restart.Name, MaximumRetryCount: p.Restart.MaxRetries},
			// Without a restart policy a container that exits is removed
			// by Docker at once: infrakit replaces it, and nothing of a
			// dead instance is left behind (not even after `destroy`).
			AutoRemove: p.Restart.Name == "no",
		},
	}
	for _, port := range p.Ports {
		if cfg.ExposedPorts == nil {
			cfg.ExposedPorts = map[string]struct{}{}
		}
		cfg.ExposedPorts[port.Key()] = struct{}{}
		if port.Published {
			if cfg.HostConfig.PortBindings == nil {
				cfg.HostConfig.PortBindings = map[string][]engine.PortBinding{}
			}
			hp := ""
			if port.HostPort != 0 {
				hp = strconv.Itoa(port.HostPort)
			}
			cfg.HostConfig.PortBindings[port.Key()] = append(cfg.HostConfig.PortBindings[port.Key()],
				engine.PortBinding{HostIP: port.HostIP, HostPort: hp})
		}
	}
	return cfg
}

// tagKeys reads LabelTags; ok is false for a container this provider did not make.
func tagKeys(labels map[string]string) (keys []string, ok bool) {
	raw, ok := labels[LabelTags]
	if !ok {
		return nil, false
	}
	if err := json.Unmarshal([]byte(raw), &keys); err != nil {
		return nil, false
	}
	return keys, true
}

// describe is the description of a listed container: its tags are its tag
// labels overlaid with extra (the tags Label added); ok is false for a
// container this provider did not make.
func describe(c engine.Container, extra map[string]string, withProperties bool) (instance.Description, bool) {
	keys, ok := tagKeys(c.Labels)
	if !ok {
		return instance.Description{}, false
	}
	tags := make(map[string]string, len(keys)+len(extra))
	for _, k := range keys {
		if v, ok := c.Labels[k]; ok {
			tags[k] = v
		}
	}
	maps.Copy(tags, extra)
	d := instance.Description{
		ID:      shortID(c.ID),
		Tags:    tags,
		State:   stateOf(c.State),
		Address: addressOf(c),
	}
	if lid, ok := c.Labels[LabelLogicalID]; ok {
		l := instance.LogicalID(lid)
		d.LogicalID = &l
	}
	if withProperties {
		d.Properties = json.RawMessage(c.Labels[LabelProperties])
		if !json.Valid(d.Properties) {
			d.Properties = json.RawMessage("{}")
		}
	}
	return d, true
}

// stateOf maps Docker's container state onto the instance states: a
// container that is not running yet counts as pending (so the group does
// not make another), one that exited or is being removed as terminating.
func stateOf(docker string) instance.State {
	switch docker {
	case "running", "paused":
		return instance.StateRunning
	case "removing", "exited", "dead":
		return instance.StateTerminating
	default: // created, restarting, and whatever a newer Engine adds
		return instance.StatePending
	}
}

// addressOf is the container's IP on its network, with LabelPort when set;
// "127.0.0.1[:port]" on the host network; empty while it has no IP.
func addressOf(c engine.Container) string {
	port := c.Labels[LabelPort]
	var ip string
	switch mode := c.HostConfig.NetworkMode; {
	case mode == "host":
		ip = "127.0.0.1"
	case mode == "none" || strings.HasPrefix(mode, "container:"):
		return ""
	default:
		if mode == "default" || mode == "" {
			mode = "bridge"
		}
		if ep, ok := c.NetworkSettings.Networks[mode]; ok {
			ip = ep.IPAddress
		} else if len(c.NetworkSettings.Networks) == 1 {
			// Attached by network ID rather than name.
			for _, ep := range c.NetworkSettings.Networks {
				ip = ep.IPAddress
			}
		}
	}
	if ip == "" || port == "" {
		return ip
	}
	return net.JoinHostPort(ip, port)
}

// matches reports whether tags carries every tag of want.
func matches(tags, want map[string]string) bool {
	for k, v := range want {
		if got, ok := tags[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// labelFilter is the Engine filter for containers of this provider carrying
// the tags of want, except those whose key overridden says Label may have
// changed (those are checked on the description instead).
func labelFilter(want map[string]string, overridden func(key string) bool) engine.Filters {
	labels := []string{LabelTags}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if !overridden(k) {
			labels = append(labels, k+"="+want[k])
		}
	}
	return engine.Filters{"label": labels}
}

// nameUnsafe is what Docker does not allow in a container name.
var nameUnsafe = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

// containerName is "<stack>-<group>[-<logical id>]-<suffix>" from the
// tags (those parts that are set), made safe for Docker; "infrakit-<suffix>"
// without any.
func containerName(tags map[string]string, lid *instance.LogicalID, suffix string) string {
	var parts []string
	for _, s := range []string{tags["infrakit.stack"], tags["infrakit.group"]} {
		if s != "" {
			parts = append(parts, s)
		}
	}
	if lid != nil && *lid != "" {
		parts = append(parts, string(*lid))
	}
	if len(parts) == 0 {
		parts = []string{"infrakit"}
	}
	name := strings.Trim(nameUnsafe.ReplaceAllString(strings.Join(parts, "-"), "-"), "-_.")
	if name == "" {
		name = "infrakit"
	}
	if len(name) > 100 {
		name = name[:100]
	}
	return fmt.Sprintf("%s-%s", name, suffix)
}
