package lb

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/infrakit/infrakit/sdk/loadbalancer"
)

// renderInput is everything the configuration is made of; render is a pure
// function of it.
type renderInput struct {
	// Owned: the provider runs this HAProxy, so the file has a global
	// section (with the admin socket). In external mode the file holds only
	// a defaults section and the load balancers' sections, to be loaded
	// beside the operator's own files.
	Owned        bool
	AdminSocket  string
	Bind         string
	CheckPath    string
	FastInterval time.Duration
	// ConnectTimeout is `timeout connect` (Settings.ConnectTimeout).
	ConnectTimeout time.Duration
	// CertFiles maps a certificate name to the PEM file that terminates it;
	// a name missing here is passed through (see modeOf).
	CertFiles map[string]string
	Record    *Record
}

// Section names of a route of a load balancer.
func frontendName(lb string, port int) string { return fmt.Sprintf("fe_%s_%d", lb, port) }
func backendName(lb string, port int) string  { return fmt.Sprintf("be_%s_%d", lb, port) }
func slotName(slot int) string                { return fmt.Sprintf("s%d", slot) }

// routeMode is how a route is proxied.
type routeMode struct {
	Mode      string // "tcp" or "http"
	CertFile  string // set when the frontend terminates TLS
	ServerSSL bool   // re-encrypt to the backends (TLS terminated, backend https/ssl)
	HTTPCheck bool   // health check with an HTTP GET rather than a TCP connect
}

// modeOf decides how a route is proxied:
//
//   - tcp and ssl listen in tcp mode, http in http mode.
//   - https and ssl with a certificate whose PEM file exists terminate TLS
//     at the frontend (https then in http mode); without one the TLS stream
//     is passed through untouched in tcp mode, and the certificate name is
//     only kept in the record.
//   - Terminated TLS towards an https or ssl backend is re-encrypted.
//   - Health checks are HTTP GETs when the backend speaks plain HTTP to an
//     http-mode section, TCP connects otherwise.
func modeOf(rt RouteRecord, certFiles map[string]string) routeMode {
	lbp, bp := normProto(loadbalancer.Protocol(rt.LoadBalancerProtocol)), normProto(loadbalancer.Protocol(rt.Protocol))
	var m routeMode
	if lbp == loadbalancer.HTTPS || lbp == loadbalancer.SSL {
		m.CertFile = certFiles[rt.Certificate]
	}
	switch {
	case lbp == loadbalancer.HTTP, lbp == loadbalancer.HTTPS && m.CertFile != "":
		m.Mode = "http"
	default:
		m.Mode = "tcp"
	}
	m.ServerSSL = m.CertFile != "" && (bp == loadbalancer.HTTPS || bp == loadbalancer.SSL)
	m.HTTPCheck = m.Mode == "http" && bp == loadbalancer.HTTP
	return m
}

// render writes the HAProxy configuration. With servers false every slot is
// rendered as an empty one, which gives the configuration's structure: two
// configurations with the same structure differ only in what the runtime
// API can change without a reload.
func render(in renderInput, servers bool) []byte {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("# Written by infrakit-provider-haproxy from its state.json; edits are lost on its next change.")
	if in.Owned {
		w("global")
		// The admin socket exposes the listening sockets so a reloaded
		// worker takes them over without a moment of refused connections.
		w("    stats socket %s mode 600 level admin expose-fd listeners", in.AdminSocket)
		w("    stats timeout 30s")
		w("")
	}
	w("defaults")
	w("    mode tcp")
	w("    balance roundrobin")
	// How long a request waits on a backend that does not answer its SYN
	// (one that died without closing its socket) before the retry below
	// sends it to another server: see DefaultConnectTimeout.
	w("    timeout connect %dms", connectMS(in.ConnectTimeout))
	w("    timeout client 1m")
	w("    timeout server 1m")
	w("    timeout tunnel 1h")
	// A backend that refuses the connection (stopped, not yet listening)
	// costs a retry on another server, not a failed request; each backend
	// section sets how many (retriesOf).
	w("    option redispatch 1")
	for _, name := range in.Record.names() {
		l := in.Record.LoadBalancers[name]
		for _, rt := range l.Routes {
			w("")
			renderRoute(w, in, name, l, rt, servers)
		}
	}
	return []byte(b.String())
}

func renderRoute(w func(string, ...any), in renderInput, name string, l *LB, rt RouteRecord, servers bool) {
	m := modeOf(rt, in.CertFiles)
	w("# load balancer %s: lb_port %d %s -> port %d %s%s", name, rt.LoadBalancerPort, rt.LoadBalancerProtocol, rt.Port, rt.Protocol, certComment(rt, m))
	w("frontend %s", frontendName(name, rt.LoadBalancerPort))
	bind := "    bind " + net.JoinHostPort(in.Bind, fmt.Sprint(rt.LoadBalancerPort))
	if m.CertFile != "" {
		bind += " ssl crt " + m.CertFile
	}
	w("%s", bind)
	w("    mode %s", m.Mode)
	if m.Mode == "http" {
		w("    option forwardfor")
	}
	w("    default_backend %s", backendName(name, rt.LoadBalancerPort))
	w("backend %s", backendName(name, rt.LoadBalancerPort))
	w("    mode %s", m.Mode)
	w("    retries %d", retriesOf(l.Slots))
	if m.Mode == "http" {
		// A backend killed with requests in flight (an instance that
		// crashed, a process sent SIGKILL) closes connections it had
		// accepted without answering; `retries` alone covers only refused
		// connections. Retry those requests on another server too, but only
		// idempotent ones: a POST the dead server may have acted on is not
		// sent twice.
		w("    retry-on conn-failure empty-response junk-response")
		w("    http-request disable-l7-retry unless METH_GET || METH_OPTIONS || METH_PUT || METH_DELETE")
	}
	var ds []string
	if hc := l.HealthCheck; hc != nil {
		if m.HTTPCheck {
			w("    option httpchk GET %s", in.CheckPath)
		}
		w("    timeout check %dms", hc.TimeoutMS)
		fast := min(int(in.FastInterval/time.Millisecond), hc.IntervalMS)
		ds = append(ds, "check", fmt.Sprintf("inter %dms fastinter %dms downinter %dms rise %d fall %d", hc.IntervalMS, fast, fast, hc.Healthy, hc.Unhealthy))
		// No `observe layer4`: it would take a server out on its first
		// failed connection, which spares the requests a dead backend
		// costs until the checks or `watch` take it out, but a refused
		// connection counts too, and a new member is usually registered
		// tens of milliseconds before it listens: every replacement would
		// then wait rise fast checks before its first request (measured:
		// 2 x FastInterval added to most Docker heals). Its requests are
		// instead retried on another server (retries, redispatch), which
		// for a refused connection costs nothing.
		// A check port only makes sense when backends take the route's
		// port; one that registered with its own port is checked there.
		if hc.BackendPort > 0 && !anyOwnPort(l) {
			ds = append(ds, fmt.Sprintf("port %d", hc.BackendPort))
		}
	}
	if m.ServerSSL {
		ds = append(ds, "ssl verify none")
	}
	if len(ds) > 0 {
		w("    default-server %s", strings.Join(ds, " "))
	}
	bySlot := map[int]BackendRecord{}
	if servers {
		for _, be := range l.Backends {
			if be.Slot > 0 {
				bySlot[be.Slot] = be
			}
		}
	}
	for slot := 1; slot <= l.Slots; slot++ {
		be, ok := bySlot[slot]
		if !ok {
			w("    server %s 0.0.0.0:0 disabled", slotName(slot))
			continue
		}
		ip, _ := netip.ParseAddr(be.IP) // resolved IPs are valid; see resolve
		w("    server %s %s # %s", slotName(slot), net.JoinHostPort(ip.String(), fmt.Sprint(serverPort(be, rt))), be.ID)
	}
}

// maxRetries bounds retriesOf: a backend that died without closing its
// socket costs `timeout connect` per retry that lands on it.
const maxRetries = 15

// retriesOf is a backend section's `retries`: enough to try each of its
// slots once (up to maxRetries), and at least 3. A scale-up registers its
// new members a moment before they listen; with 5 of 6 servers refusing,
// 3 retries (each redispatched to the next server) failed requests that a
// retry more would have served.
func retriesOf(slots int) int {
	return min(max(slots-1, 3), maxRetries)
}

// connectMS is `timeout connect` in milliseconds: d, or
// DefaultConnectTimeout when unset.
func connectMS(d time.Duration) int {
	if d <= 0 {
		d = DefaultConnectTimeout
	}
	return max(int(d/time.Millisecond), 1)
}

func certComment(rt RouteRecord, m routeMode) string {
	switch {
	case rt.Certificate == "":
		return ""
	case m.CertFile != "":
		return fmt.Sprintf(" (certificate %s: TLS terminated with %s)", rt.Certificate, m.CertFile)
	default:
		return fmt.Sprintf(" (certificate %s: no PEM file, TLS passed through)", rt.Certificate)
	}
}

// serverPort is where a backend takes a route's traffic: the port of its
// address when it registered with one (each local process listens on its
// own), else the route's backend port.
func serverPort(b BackendRecord, rt RouteRecord) int {
	if b.Port > 0 {
		return b.Port
	}
	return rt.Port
}

func anyOwnPort(l *LB) bool {
	for _, b := range l.Backends {
		if b.Port > 0 {
			return true
		}
	}
	return false
}

// structureHash identifies a configuration's structure (render with empty
// slots): when it changes, HAProxy must reload.
func structureHash(in renderInput) string {
	sum := sha256.Sum256(render(in, false))
	return hex.EncodeToString(sum[:12])
}
