package container

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/infrakit/infrakit/sdk/properties"
	"github.com/infrakit/infrakit/sdk/provider"
)

// Defaults of the instance properties.
const (
	DefaultNetwork     = "bridge"
	DefaultRestart     = "no"
	DefaultStopTimeout = 5 * time.Second
	// MinMemory is Docker's smallest memory limit.
	MinMemory = 6 << 20
	// MinCPUs is Docker's smallest CPU quota.
	MinCPUs = 0.01
)

// Environment variables the provider sets in every container; the env
// property may not set them.
const (
	EnvLogicalID = "INFRAKIT_LOGICAL_ID"
	EnvInit      = "INFRAKIT_INIT"
)

var reservedEnv = []string{EnvLogicalID, EnvInit}

// Properties are the decoded instance properties.
type Properties struct {
	Image   string
	Command []string
	Env     map[string]string
	Labels  map[string]string
	Network string
	// FixedIP gives a pet the IP that is its logical ID on Network (a
	// user-defined network whose subnet holds it), so a replacement of the
	// pet has the same address.
	FixedIP bool
	Ports   []Port
	// CPUs is the CPU quota (1.5 = one and a half cores); 0 means no limit.
	CPUs float64
	// Memory is the memory limit in bytes; 0 means no limit.
	Memory  int64
	Restart Restart
	// StopTimeout is the grace between the stop signal and SIGKILL.
	StopTimeout time.Duration
}

// Port is one element of the ports property: a container port, exposed
// only or also published on the host.
type Port struct {
	ContainerPort int
	Proto         string // "tcp" or "udp"
	Published     bool
	HostIP        string // empty: every interface
	HostPort      int    // 0: Docker picks a free one
}

// Key is Docker's name of the container port: "80/tcp".
func (p Port) Key() string { return strconv.Itoa(p.ContainerPort) + "/" + p.Proto }

// Restart is Docker's restart policy.
type Restart struct {
	Name       string // no, always, unless-stopped, on-failure
	MaxRetries int    // on-failure only; 0 means unlimited
}

// AddressPort is the port of the instance's Address: the first port's
// container port, or 0 when no port is set.
func (p Properties) AddressPort() int {
	if len(p.Ports) == 0 {
		return 0
	}
	return p.Ports[0].ContainerPort
}

// Schema is the schema of the instance properties.
func Schema() provider.Schema {
	return provider.Schema{Attributes: map[string]provider.Attribute{
		"image": {Type: "string", Required: true,
			Description: "Image to run (name:tag or ID). It must already be on the Docker host: the provider never pulls."},
		"command": {Type: "list(string)",
			Description: "Command and arguments, replacing the image's CMD."},
		"env": {Type: "map(string)",
			Description: "Environment variables; INFRAKIT_LOGICAL_ID and INFRAKIT_INIT are set by the provider."},
		"labels": {Type: "map(string)",
			Description: "Container labels besides the instance's tags; keys starting with \"infrakit.\" are reserved."},
		"network": {Type: "string",
			Description: fmt.Sprintf("Network to attach to (bridge, host, none, or a user-defined network); default %q. The Address is the container's IP on it.", DefaultNetwork)},
		"fixed_ip": {Type: "bool",
			Description: "Give each pet the IPv4 address that is its logical ID on network, which must be a user-defined network whose subnet holds it: a pet and each replacement of it have the same address. Pets only; cattle get an address from Docker as without it."},
		"ports": {Type: "list(string)",
			Description: "Container ports: \"8080\" or \"8080/udp\" exposes one; \"[host_ip:]host_port:container_port[/proto]\" also publishes it (host_port 0: Docker picks). The first one's container port is the Address's port."},
		"cpus": {Type: "number",
			Description: fmt.Sprintf("CPU quota in cores (0.5, 2); at least %g.", MinCPUs)},
		"memory": {Type: "string",
			Description: "Memory limit: bytes, or a number with a unit b, k, m or g (\"64m\"); at least 6m."},
		"restart": {Type: "string",
			Description: fmt.Sprintf("Docker restart policy: no, always, unless-stopped, on-failure or on-failure:N; default %q (infrakit replaces dead containers; with \"no\" Docker removes a container once it exits).", DefaultRestart)},
		"stop_timeout": {Type: "string",
			Description: fmt.Sprintf("How long Destroy waits after the stop signal before killing (a Go duration, whole seconds); default %s.", DefaultStopTimeout)},
	}}
}

var topKeys = []string{"image", "command", "env", "labels", "network", "fixed_ip", "ports", "cpus", "memory", "restart", "stop_timeout"}

// Parse decodes and checks the properties. A non-nil error is
// provider.Diagnostics with one diagnostic per problem, each at the path of
// the offending attribute (["image"], ["ports", "1"], ["env", "PORT"]).
func Parse(raw json.RawMessage) (Properties, error) {
	p := Properties{Network: DefaultNetwork, Restart: Restart{Name: DefaultRestart}, StopTimeout: DefaultStopTimeout}
	var d properties.Decoder
	missingImage := func() {
		d.Errorf([]string{"image"}, "Missing required argument", "A container needs an image to run.")
	}
	if properties.IsNull(raw) {
		missingImage()
		return Properties{}, d.Err()
	}
	fields, ok := d.Object(raw, nil, topKeys, "the container's properties")
	if !ok {
		return Properties{}, d.Err()
	}
	if v, ok := fields.Get("image"); !ok {
		missingImage()
	} else if s, ok := d.String(v, []string{"image"}); ok {
		if msg := checkImage(s); msg != "" {
			d.Errorf([]string{"image"}, "Invalid image", "%s", msg)
		}
		p.Image = s
	}
	if v, ok := fields.Get("command"); ok {
		p.Command = d.StringList(v, []string{"command"})
	}
	if v, ok := fields.Get("env"); ok {
		p.Env = d.Environment(v, []string{"env"}, reservedEnv, "the docker provider for each container")
	}
	if v, ok := fields.Get("labels"); ok {
		p.Labels = d.StringMap(v, []string{"labels"})
		for _, k := range slices.Sorted(maps.Keys(p.Labels)) {
			switch {
			case strings.TrimSpace(k) == "":
				d.Errorf([]string{"labels", k}, "Invalid label", "A label needs a name.")
			case strings.HasPrefix(k, "infrakit."):
				d.Errorf([]string{"labels", k}, "Reserved label", "Labels starting with \"infrakit.\" are the instance's tags and the provider's own records; set tags on the group or flavor instead.")
			}
		}
	}
	if v, ok := fields.Get("network"); ok {
		if s, ok := d.String(v, []string{"network"}); ok {
			if strings.TrimSpace(s) == "" {
				d.Errorf([]string{"network"}, "Invalid value", "network must not be empty; leave it out for %q.", DefaultNetwork)
			}
			p.Network = s
		}
	}
	if v, ok := fields.Get("fixed_ip"); ok {
		if b, ok := d.Bool(v, []string{"fixed_ip"}); ok {
			if b && !userDefinedNetwork(p.Network) {
				d.Errorf([]string{"fixed_ip"}, "Fixed IP needs a user-defined network",
					"Docker assigns chosen addresses only on a user-defined network with a subnet; set network to one (created with docker network create --subnet ...), not %q.", p.Network)
			}
			p.FixedIP = b
		}
	}
	if v, ok := fields.Get("ports"); ok {
		p.Ports = decodePorts(&d, v)
		if p.Network == "host" || p.Network == "none" {
			for i, port := range p.Ports {
				if port.Published {
					d.Errorf([]string{"ports", strconv.Itoa(i)}, "Cannot publish a port",
						"A container on the %q network cannot publish ports; give only the container port.", p.Network)
				}
			}
		}
	}
	if v, ok := fields.Get("cpus"); ok {
		if f, ok := d.Number(v, []string{"cpus"}); ok {
			if f < MinCPUs || math.IsInf(f, 0) {
				d.Errorf([]string{"cpus"}, "Invalid value", "cpus = %g: the quota must be at least %g cores.", f, MinCPUs)
			}
			p.CPUs = f
		}
	}
	if v, ok := fields.Get("memory"); ok {
		p.Memory = decodeMemory(&d, v)
	}
	if v, ok := fields.Get("restart"); ok {
		if s, ok := d.String(v, []string{"restart"}); ok {
			r, err := parseRestart(s)
			if err != nil {
				d.Errorf([]string{"restart"}, "Invalid restart policy", "%v", err)
			}
			p.Restart = r
		}
	}
	if v, ok := fields.Get("stop_timeout"); ok {
		if dur, ok := d.Duration(v, []string{"stop_timeout"}); ok {
			p.StopTimeout = dur
		}
	}
	if err := d.Err(); err != nil {
		return Properties{}, err
	}
	return p, nil
}

// userDefinedNetwork reports whether name is not one of Docker's own
// networks (bridge, host, none), on which no address can be chosen.
func userDefinedNetwork(name string) bool {
	return name != "bridge" && name != "host" && name != "none" && name != "default"
}

// FixedIPv4 is the address a pet gets with fixed_ip: its logical ID, which
// must be an IPv4 address.
func FixedIPv4(logicalID string) (string, error) {
	ip := net.ParseIP(logicalID)
	if ip == nil || ip.To4() == nil {
		return "", fmt.Errorf("fixed_ip: logical ID %q is not an IPv4 address, so it cannot be the container's address", logicalID)
	}
	return ip.To4().String(), nil
}

// checkImage returns why s cannot name an image, or "".
func checkImage(s string) string {
	switch {
	case strings.TrimSpace(s) == "":
		return "image must not be empty."
	case strings.ContainsAny(s, " \t\r\n?#"):
		return fmt.Sprintf("%q is not an image reference (name:tag, name@digest or an ID).", s)
	}
	return ""
}

// parseRestart reads "no", "always", "unless-stopped", "on-failure" or "on-failure:N".
func parseRestart(s string) (Restart, error) {
	name, count, hasCount := strings.Cut(s, ":")
	switch name {
	case "no", "always", "unless-stopped":
		if hasCount {
			return Restart{}, fmt.Errorf("%q: only on-failure takes a retry count", s)
		}
		return Restart{Name: name}, nil
	case "on-failure":
		if !hasCount {
			return Restart{Name: name}, nil
		}
		n, err := strconv.Atoi(count)
		if err != nil || n < 0 {
			return Restart{}, fmt.Errorf("%q: the retry count must be a whole number, 0 or more", s)
		}
		return Restart{Name: name, MaxRetries: n}, nil
	}
	return Restart{}, fmt.Errorf("%q is not one of no, always, unless-stopped, on-failure, on-failure:N", s)
}

// ParsePort reads one element of ports: "80", "80/udp", "8080:80",
// "127.0.0.1:8080:80/tcp", "[::1]:8080:80".
func ParsePort(s string) (Port, error) {
	p := Port{Proto: "tcp"}
	spec, proto, hasProto := strings.Cut(s, "/")
	if hasProto {
		if proto != "tcp" && proto != "udp" && proto != "sctp" {
			return Port{}, fmt.Errorf("%q: protocol %q is not tcp, udp or sctp", s, proto)
		}
		p.Proto = proto
	}
	host, container := "", spec
	if i := strings.LastIndex(spec, ":"); i >= 0 {
		host, container = spec[:i], spec[i+1:]
		p.Published = true
	}
	cp, err := strconv.Atoi(container)
	if err != nil || cp < 1 || cp > 65535 {
		return Port{}, fmt.Errorf("%q: container port %q is not a port number (1-65535)", s, container)
	}
	p.ContainerPort = cp
	if !p.Published {
		return p, nil
	}
	hostPort := host
	if i := strings.LastIndex(host, ":"); i >= 0 {
		p.HostIP, hostPort = strings.TrimSuffix(strings.TrimPrefix(host[:i], "["), "]"), host[i+1:]
		if net.ParseIP(p.HostIP) == nil {
			return Port{}, fmt.Errorf("%q: host address %q is not an IP address", s, p.HostIP)
		}
	}
	hp, err := strconv.Atoi(hostPort)
	if err != nil || hp < 0 || hp > 65535 {
		return Port{}, fmt.Errorf("%q: host port %q is not a port number (0-65535; 0 lets Docker pick)", s, hostPort)
	}
	p.HostPort = hp
	return p, nil
}

// ParseMemory reads a memory size: bytes, or a number with a unit b, k, m,
// g (or kb, mb, gb; any case), in powers of 1024 as Docker counts.
func ParseMemory(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	unit := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30}, {"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"b", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, unit = strings.TrimSuffix(t, u.suffix), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, fmt.Errorf("%q is not a memory size such as \"64m\" or \"1g\"", s)
	}
	b := f * float64(unit)
	if b > math.MaxInt64/2 {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return int64(b), nil
}

// decodePorts decodes the ports list; elements may be strings or numbers.
func decodePorts(d *properties.Decoder, raw json.RawMessage) []Port {
	var elems []json.RawMessage
	if properties.Kind(raw) != "list" || json.Unmarshal(raw, &elems) != nil {
		d.Errorf([]string{"ports"}, "Incorrect attribute value type", "ports must be a list of strings, got %s.", properties.Kind(raw))
		return nil
	}
	out := make([]Port, 0, len(elems))
	for i, e := range elems {
		path := []string{"ports", strconv.Itoa(i)}
		s := strings.TrimSpace(string(e))
		if properties.Kind(e) == "string" {
			_ = json.Unmarshal(e, &s)
		} else if properties.Kind(e) != "number" {
			d.Errorf(path, "Incorrect attribute value type", "ports[%d] must be a string such as \"8080\" or \"8080:80\", got %s.", i, properties.Kind(e))
			continue
		}
		p, err := ParsePort(s)
		if err != nil {
			d.Errorf(path, "Invalid port", "%v.", err)
			continue
		}
		out = append(out, p)
	}
	return out
}

// decodeMemory decodes the memory property: a size string or a number of bytes.
func decodeMemory(d *properties.Decoder, raw json.RawMessage) int64 {
	path := []string{"memory"}
	var s string
	switch properties.Kind(raw) {
	case "string":
		_ = json.Unmarshal(raw, &s)
	case "number":
		s = strings.TrimSpace(string(raw))
	default:
		d.Errorf(path, "Incorrect attribute value type", "memory must be a string such as \"64m\", got %s.", properties.Kind(raw))
		return 0
	}
	n, err := ParseMemory(s)
	if err != nil {
		d.Errorf(path, "Invalid memory size", "%v.", err)
		return 0
	}
	if n < MinMemory {
		d.Errorf(path, "Invalid memory size", "memory %q is below Docker's minimum of 6m.", s)
	}
	return n
}
