package status

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// The API has no authentication: it relies on who can reach it. A web page
// the operator opens can reach it too, through DNS rebinding (a name of the
// attacker's that resolves to 127.0.0.1): the browser then sends the
// attacker's name as Host. So every request's Host must name where the
// server listens:
//
//   - bound to a loopback address: "localhost" or a loopback IP;
//   - bound to another address: the host given to -listen, or the IP bound;
//   - bound to every address (0.0.0.0, [::]): an IP literal, the host
//     given to -listen, or "localhost".
//
// The port, when the Host carries one, must be the one listened on (none
// means 80). An IP literal cannot be rebound, so a scraper that dials the
// machine's IP always passes. Anything else is refused with 421
// (Misdirected Request) and a JSON error.
type hostCheck struct {
	// configured is the host part of -listen, lower-cased ("" for none).
	configured string
	bound      net.IP
	port       int
}

func newHostCheck(listen string, addr net.Addr) hostCheck {
	h := hostCheck{}
	if host, _, err := net.SplitHostPort(listen); err == nil {
		h.configured = strings.ToLower(strings.Trim(host, "[]"))
	}
	if ta, ok := addr.(*net.TCPAddr); ok {
		h.bound, h.port = ta.IP, ta.Port
	}
	return h
}

// refuse says why host (a request's Host header) is refused, or "".
func (h hostCheck) refuse(host string) string {
	if h.bound == nil {
		return "" // not serving yet (Handler in a test): nothing to compare with
	}
	name, port := host, "80"
	if n, p, err := net.SplitHostPort(host); err == nil {
		name, port = n, p
	}
	name = strings.ToLower(strings.TrimSuffix(strings.Trim(name, "[]"), "."))
	if n, err := strconv.Atoi(port); err != nil || n != h.port {
		return fmt.Sprintf("Host %q names port %s; this API listens on port %d", host, port, h.port)
	}
	ip := net.ParseIP(name)
	loopbackName := name == "localhost" || ip != nil && ip.IsLoopback()
	switch {
	case h.bound.IsLoopback():
		if loopbackName {
			return ""
		}
	case h.bound.IsUnspecified():
		if ip != nil || name == "localhost" || name == h.configured && name != "" {
			return ""
		}
	default:
		if name == h.configured || ip != nil && ip.Equal(h.bound) {
			return ""
		}
	}
	return fmt.Sprintf("Host %q does not name this API's address (%s): refused, as a web page reaching it through DNS rebinding would be",
		host, net.JoinHostPort(h.bound.String(), strconv.Itoa(h.port)))
}

// checkHost wraps next with the check.
func (s *Server) checkHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		h := s.hosts
		s.mu.Unlock()
		if why := h.refuse(r.Host); why != "" {
			writeError(w, http.StatusMisdirectedRequest, why)
			return
		}
		next.ServeHTTP(w, r)
	})
}
