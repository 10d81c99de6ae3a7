package lb

import (
	"cmp"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
	"github.com/infrakit/infrakit/sdk/provider"
)

// recordVersion is the format of state.json.
const recordVersion = 1

// Record is what the provider keeps in state.json: every load balancer's
// routes, backends and health check, and the structure of the configuration
// the running HAProxy has loaded. Routes and Backends answer from it; the
// configuration and the runtime state of HAProxy are made equal to it on
// every call.
type Record struct {
	Version int `json:"version"`
	// Loaded is the structure hash (see structureHash) of the configuration
	// the running HAProxy was started or last reloaded with; a configuration
	// with another structure needs a reload, one with the same needs only
	// runtime API commands.
	Loaded string `json:"loaded,omitempty"`
	// LoadBalancers by name.
	LoadBalancers map[string]*LB `json:"load_balancers"`
}

// LB is one named load balancer.
type LB struct {
	// Routes, sorted by lb_port: each is a frontend and a backend section.
	Routes []RouteRecord `json:"routes,omitempty"`
	// Backends, sorted by ID: every route's backend section has a server
	// slot for each of them.
	Backends []BackendRecord `json:"backends,omitempty"`
	// Slots is the number of server slots of each backend section; it only
	// grows.
	Slots       int                `json:"slots"`
	HealthCheck *HealthCheckRecord `json:"health_check,omitempty"`
}

// RouteRecord is a route as published; Routes returns it unchanged.
type RouteRecord struct {
	LoadBalancerPort     int    `json:"lb_port"`
	LoadBalancerProtocol string `json:"lb_protocol"`
	Port                 int    `json:"port"`
	Protocol             string `json:"protocol"`
	Certificate          string `json:"certificate,omitempty"`
}

// BackendRecord is a registered backend and where HAProxy sends its traffic.
type BackendRecord struct {
	ID      string `json:"id"`
	Address string `json:"address"` // as registered; Backends returns it
	// IP is Address's host, resolved; empty while it has no address or the
	// name does not resolve (the backend then has no slot and no traffic).
	IP string `json:"ip,omitempty"`
	// Port is Address's port; 0 means each route's backend port.
	Port int `json:"port,omitempty"`
	// Slot is the server slot (s<Slot>) in every route's backend; 0 is none.
	Slot int `json:"slot,omitempty"`
}

// HealthCheckRecord is the configured health check.
type HealthCheckRecord struct {
	BackendPort int `json:"backend_port,omitempty"`
	Healthy     int `json:"healthy"`
	Unhealthy   int `json:"unhealthy"`
	IntervalMS  int `json:"interval_ms"`
	TimeoutMS   int `json:"timeout_ms"`
}

func newRecord() *Record {
	return &Record{Version: recordVersion, LoadBalancers: map[string]*LB{}}
}

// lb returns the named load balancer, creating it with initial slots.
func (r *Record) lb(name string, slots int) *LB {
	l, ok := r.LoadBalancers[name]
	if !ok {
		l = &LB{Slots: slots}
		r.LoadBalancers[name] = l
	}
	return l
}

// names are the load balancer names, sorted.
func (r *Record) names() []string {
	out := make([]string, 0, len(r.LoadBalancers))
	for n := range r.LoadBalancers {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// nameRE is what HAProxy allows in a section name, less ':' (which the
// runtime API's backend/server syntax would not like); a load balancer's
// sections are fe_<name>_<port> and be_<name>_<port>.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// checkName refuses load balancer names HAProxy cannot carry.
func checkName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("load balancer name %q: want letters, digits, '_', '.' and '-' (at most 64, starting with a letter or digit)", name)
	}
	return nil
}

// routeRecord validates a route and returns its record. Diagnostics name
// the route field (lb_port, lb_protocol, port, protocol, certificate).
func routeRecord(r loadbalancer.Route) (RouteRecord, error) {
	var ds provider.Diagnostics
	bad := func(path, summary, detail string) {
		ds = append(ds, provider.Diagnostic{Severity: provider.Error, Summary: summary, Detail: detail, Path: []string{path}})
	}
	if r.LoadBalancerPort < 1 || r.LoadBalancerPort > 65535 {
		bad("lb_port", "Invalid port", fmt.Sprintf("lb_port %d is not a TCP port (1-65535)", r.LoadBalancerPort))
	}
	if r.Port < 1 || r.Port > 65535 {
		bad("port", "Invalid port", fmt.Sprintf("port %d is not a TCP port (1-65535)", r.Port))
	}
	for _, p := range []struct {
		path  string
		proto loadbalancer.Protocol
	}{{"lb_protocol", r.LoadBalancerProtocol}, {"protocol", r.Protocol}} {
		switch normProto(p.proto) {
		case loadbalancer.TCP, loadbalancer.HTTP, loadbalancer.HTTPS, loadbalancer.SSL:
		case loadbalancer.UDP:
			bad(p.path, "UDP is not supported", "HAProxy balances TCP (tcp, ssl) and HTTP (http, https) only")
		default:
			bad(p.path, "Unknown protocol", fmt.Sprintf("%q: want tcp, http, https or ssl", p.proto))
		}
	}
	if strings.ContainsAny(r.Certificate, " \t\r\n\"'#") {
		bad("certificate", "Invalid certificate name", fmt.Sprintf("%q has spaces, quotes or '#'", r.Certificate))
	}
	if err := ds.Err(); err != nil {
		return RouteRecord{}, err
	}
	return RouteRecord{
		LoadBalancerPort:     r.LoadBalancerPort,
		LoadBalancerProtocol: string(r.LoadBalancerProtocol),
		Port:                 r.Port,
		Protocol:             string(r.Protocol),
		Certificate:          r.Certificate,
	}, nil
}

// normProto lower-cases a protocol; empty is tcp.
func normProto(p loadbalancer.Protocol) loadbalancer.Protocol {
	if p == "" {
		return loadbalancer.TCP
	}
	return loadbalancer.Protocol(strings.ToLower(string(p)))
}

// route turns a record back into the SPI's Route, exactly as published.
func (r RouteRecord) route() loadbalancer.Route {
	return loadbalancer.Route{
		Port:                 r.Port,
		Protocol:             loadbalancer.Protocol(r.Protocol),
		LoadBalancerPort:     r.LoadBalancerPort,
		LoadBalancerProtocol: loadbalancer.Protocol(r.LoadBalancerProtocol),
		Certificate:          r.Certificate,
	}
}

// portOwner names the load balancer publishing lbPort, if any.
func (r *Record) portOwner(lbPort int) (string, bool) {
	for _, name := range r.names() {
		for _, rt := range r.LoadBalancers[name].Routes {
			if rt.LoadBalancerPort == lbPort {
				return name, true
			}
		}
	}
	return "", false
}

// publish adds or replaces (by lb_port) a route.
func (l *LB) publish(rt RouteRecord) {
	l.Routes = slices.DeleteFunc(l.Routes, func(x RouteRecord) bool { return x.LoadBalancerPort == rt.LoadBalancerPort })
	l.Routes = append(l.Routes, rt)
	slices.SortFunc(l.Routes, func(a, b RouteRecord) int { return cmp.Compare(a.LoadBalancerPort, b.LoadBalancerPort) })
}

// unpublish removes the route on lbPort; a missing one is not an error.
func (l *LB) unpublish(lbPort int) {
	l.Routes = slices.DeleteFunc(l.Routes, func(x RouteRecord) bool { return x.LoadBalancerPort == lbPort })
}

// parseAddress splits a backend address into host and port: "10.0.0.1",
// "10.0.0.1:8080", "[::1]:8080", "::1", "web-1", "web-1:80". Port 0 means
// none was given.
func parseAddress(addr string) (host string, port int, err error) {
	if addr == "" {
		return "", 0, nil
	}
	if strings.ContainsAny(addr, " \t\r\n/") {
		return "", 0, fmt.Errorf("address %q: want host or host:port", addr)
	}
	if a, err := netip.ParseAddr(strings.Trim(addr, "[]")); err == nil {
		return a.String(), 0, nil // a bare IPv4 or IPv6 address
	}
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return addr, 0, nil // a bare host name
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 {
		return "", 0, fmt.Errorf("address %q: port %q is not a TCP port (1-65535)", addr, p)
	}
	if h == "" {
		return "", 0, fmt.Errorf("address %q: no host", addr)
	}
	return h, n, nil
}

// register adds backends or changes their address (by ID). Addresses are
// checked first, so a bad one changes nothing. A backend whose address
// changed keeps its slot but loses its resolved IP until resolved again.
func (l *LB) register(bs []loadbalancer.Backend) error {
	var ds provider.Diagnostics
	parsed := make([]BackendRecord, len(bs))
	for i, b := range bs {
		idx := strconv.Itoa(i)
		if b.ID == "" {
			ds = append(ds, provider.Diagnostic{Severity: provider.Error, Summary: "Backend without ID", Path: []string{idx, "id"}})
			continue
		}
		_, port, err := parseAddress(b.Address)
		if err != nil {
			ds = append(ds, provider.Diagnostic{Severity: provider.Error, Summary: "Invalid backend address",
				Detail: fmt.Sprintf("backend %q: %v", b.ID, err), Path: []string{idx, "address"}})
			continue
		}
		parsed[i] = BackendRecord{ID: string(b.ID), Address: b.Address, Port: port}
	}
	if err := ds.Err(); err != nil {
		return err
	}
	for _, nb := range parsed {
		i := slices.IndexFunc(l.Backends, func(x BackendRecord) bool { return x.ID == nb.ID })
		if i < 0 {
			l.Backends = append(l.Backends, nb)
			continue
		}
		if l.Backends[i].Address != nb.Address {
			nb.Slot = l.Backends[i].Slot
			l.Backends[i] = nb
		}
	}
	slices.SortFunc(l.Backends, func(a, b BackendRecord) int { return cmp.Compare(a.ID, b.ID) })
	return nil
}

// deregister removes backends by ID; unknown IDs are ignored.
func (l *LB) deregister(ids []instance.ID) {
	gone := make(map[string]bool, len(ids))
	for _, id := range ids {
		gone[string(id)] = true
	}
	l.Backends = slices.DeleteFunc(l.Backends, func(b BackendRecord) bool { return gone[b.ID] })
}

// assignSlots gives every backend with a resolved IP a slot of its own and
// takes slots from those without one. Backends keep the slot they have, so
// their established connections and counters stay with the same server;
// new ones take the lowest free slots in ID order. When more slots are
// needed than exist, Slots doubles (a structure change, so a reload).
func (l *LB) assignSlots(minSlots int) error {
	if l.Slots < minSlots {
		l.Slots = minSlots
	}
	used := map[int]bool{}
	need := 0
	for i := range l.Backends {
		b := &l.Backends[i]
		switch {
		case b.IP == "":
			b.Slot = 0
		case b.Slot >= 1 && b.Slot <= l.Slots && !used[b.Slot]:
			used[b.Slot] = true
		default:
			b.Slot = 0
			need++
		}
	}
	for l.Slots-len(used) < need {
		if l.Slots*2 > maxSlots {
			return fmt.Errorf("%d backends need more than %d server slots", len(used)+need, maxSlots)
		}
		l.Slots *= 2
	}
	next := 1
	for i := range l.Backends {
		b := &l.Backends[i]
		if b.IP == "" || b.Slot != 0 {
			continue
		}
		for used[next] {
			next++
		}
		b.Slot = next
		used[next] = true
	}
	return nil
}

// healthCheckRecord turns the SPI's health check into a record; the zero
// HealthCheck turns checks off (nil).
func healthCheckRecord(hc loadbalancer.HealthCheck) (*HealthCheckRecord, error) {
	if hc == (loadbalancer.HealthCheck{}) {
		return nil, nil
	}
	var ds provider.Diagnostics
	bad := func(path, detail string) {
		ds = append(ds, provider.Diagnostic{Severity: provider.Error, Summary: "Invalid health check", Detail: detail, Path: []string{path}})
	}
	if hc.BackendPort < 0 || hc.BackendPort > 65535 {
		bad("backend_port", fmt.Sprintf("%d is not a TCP port", hc.BackendPort))
	}
	if hc.Healthy < 0 {
		bad("healthy", "must not be negative")
	}
	if hc.Unhealthy < 0 {
		bad("unhealthy", "must not be negative")
	}
	if hc.Interval < 0 || (hc.Interval > 0 && hc.Interval < time.Millisecond) {
		bad("interval", "must be at least 1ms")
	}
	if hc.Timeout < 0 || (hc.Timeout > 0 && hc.Timeout < time.Millisecond) {
		bad("timeout", "must be at least 1ms")
	}
	if err := ds.Err(); err != nil {
		return nil, err
	}
	r := &HealthCheckRecord{
		BackendPort: hc.BackendPort,
		Healthy:     max(hc.Healthy, 1),
		Unhealthy:   max(hc.Unhealthy, 1),
		IntervalMS:  int(hc.Interval / time.Millisecond),
		TimeoutMS:   int(hc.Timeout / time.Millisecond),
	}
	if r.IntervalMS == 0 {
		r.IntervalMS = 2000
	}
	if r.TimeoutMS == 0 {
		r.TimeoutMS = r.IntervalMS
	}
	return r, nil
}
