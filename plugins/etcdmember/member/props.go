package member

import (
	"encoding/json"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"time"

	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/properties"
	"github.com/infrakit/infrakit/sdk/provider"
)

// Defaults of the flavor's properties.
const (
	DefaultClientPort = 2379
	DefaultPeerPort   = 2380
	DefaultTimeout    = 2 * time.Second
	// TokenPrefix starts the default cluster token: "infrakit-<group>".
	TokenPrefix = "infrakit-"
)

// Properties are the decoded flavor properties.
type Properties struct {
	ClientPort int
	PeerPort   int
	// Token is the initial cluster token; empty means TokenPrefix + the
	// group's name.
	Token string
	// Timeout bounds each call to the cluster.
	Timeout time.Duration
}

// Schema is the schema of the flavor's properties.
func Schema() provider.Schema {
	return provider.Schema{Attributes: map[string]provider.Attribute{
		"client_port": {Type: "number",
			Description: fmt.Sprintf("Port each member serves clients on, at its logical ID; default %d.", DefaultClientPort)},
		"peer_port": {Type: "number",
			Description: fmt.Sprintf("Port each member serves its peers on, at its logical ID; default %d.", DefaultPeerPort)},
		"cluster_token": {Type: "string",
			Description: fmt.Sprintf("etcd's initial cluster token; default %q followed by the group's name.", TokenPrefix)},
		"timeout": {Type: "string",
			Description: fmt.Sprintf("Bound on each call to the cluster (a Go duration); default %s.", DefaultTimeout)},
	}}
}

var topKeys = []string{"client_port", "peer_port", "cluster_token", "timeout"}

// Parse decodes and checks the properties; absent ones are the defaults.
// A non-nil error is provider.Diagnostics, each at its attribute's path.
func Parse(raw json.RawMessage) (Properties, error) {
	p := Properties{ClientPort: DefaultClientPort, PeerPort: DefaultPeerPort, Timeout: DefaultTimeout}
	if properties.IsNull(raw) {
		return p, nil
	}
	var d properties.Decoder
	fields, ok := d.Object(raw, nil, topKeys, "the etcdmember flavor's properties")
	if !ok {
		return Properties{}, d.Err()
	}
	for _, port := range []struct {
		key string
		dst *int
	}{{"client_port", &p.ClientPort}, {"peer_port", &p.PeerPort}} {
		v, ok := fields.Get(port.key)
		if !ok {
			continue
		}
		if n, ok := d.Int(v, []string{port.key}); ok {
			if n < 1 || n > 65535 {
				d.Errorf([]string{port.key}, "Invalid port", "%s = %d is not a TCP port (1-65535).", port.key, n)
			}
			*port.dst = n
		}
	}
	if p.ClientPort == p.PeerPort {
		d.Errorf([]string{"peer_port"}, "Invalid port", "peer_port and client_port are both %d; a member serves them on different ports.", p.PeerPort)
	}
	if v, ok := fields.Get("cluster_token"); ok {
		if s, ok := d.String(v, []string{"cluster_token"}); ok {
			if !token.MatchString(s) {
				d.Errorf([]string{"cluster_token"}, "Invalid value", "cluster_token %q must be letters, digits, '.', '_' and '-' only; leave it out for %q followed by the group's name.", s, TokenPrefix)
			}
			p.Token = s
		}
	}
	if v, ok := fields.Get("timeout"); ok {
		if dur, ok := d.Duration(v, []string{"timeout"}); ok {
			if dur <= 0 {
				d.Errorf([]string{"timeout"}, "Invalid duration", "timeout must be positive.")
			}
			p.Timeout = dur
		}
	}
	if err := d.Err(); err != nil {
		return Properties{}, err
	}
	return p, nil
}

// token is what a cluster token may hold: it goes into the init script.
var token = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// hostname is an RFC 1123 host name: dot-separated labels of letters,
// digits and inner hyphens.
var hostname = regexp.MustCompile(`^([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$`)

// CheckLogicalID returns why id cannot be a member's name and address, or
// "". A member's logical ID is where it is reached (its peer and client
// URLs are built from it) and its member name, so it must be an IP address
// or a host name; that also keeps it clear of the ',' and '=' of etcd's
// initial-cluster syntax.
func CheckLogicalID(id string) string {
	if net.ParseIP(id) != nil {
		return ""
	}
	if len(id) > 253 || !hostname.MatchString(id) {
		return fmt.Sprintf("Logical ID %q is neither an IP address nor a host name, so it cannot be an etcd member's address: its peer and client URLs are built from it.", id)
	}
	return ""
}

// CheckAllocation checks that the group is pets whose logical IDs can be
// members, and warns of an even number of them. The diagnostics about a
// logical ID are at flavor.LogicalIDPath, so `infrakit validate`
// underlines it in the group's logical_ids.
func CheckAllocation(a flavor.Allocation) provider.Diagnostics {
	var ds provider.Diagnostics
	if len(a.LogicalIDs) == 0 {
		if a.Size == 0 {
			return nil // an empty group has no members to judge
		}
		return provider.Diagnostics{{Severity: provider.Error, Summary: "Members need logical IDs",
			Detail: "The etcdmember flavor runs a group of pets: each member is named and reached by its logical ID. Use logical_ids = [...] instead of size."}}
	}
	for i, id := range a.LogicalIDs {
		if msg := CheckLogicalID(string(id)); msg != "" {
			ds = append(ds, provider.Diagnostic{Severity: provider.Error, Summary: "Invalid member address",
				Detail: msg, Path: flavor.LogicalIDPath(i)})
		}
	}
	if n := len(a.LogicalIDs); n%2 == 0 {
		ds = append(ds, provider.Diagnostic{Severity: provider.Warning, Summary: "Even number of etcd members",
			Detail: fmt.Sprintf("%d members tolerate the loss of %d, as %d would: the extra member adds a vote to every write without adding fault tolerance. An odd number (3, 5) is what etcd recommends.", n, (n-1)/2, n-1)})
	}
	return ds
}

// Pet is one member as the flavor derives it from a logical ID.
type Pet struct {
	Name      string
	PeerURL   string
	ClientURL string
}

// PetOf is the member a logical ID stands for.
func (p Properties) PetOf(id instance.LogicalID) Pet {
	host := string(id)
	return Pet{
		Name:      host,
		PeerURL:   "http://" + net.JoinHostPort(host, strconv.Itoa(p.PeerPort)),
		ClientURL: "http://" + net.JoinHostPort(host, strconv.Itoa(p.ClientPort)),
	}
}
