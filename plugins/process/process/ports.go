package process

import (
	"net"
	"strconv"
)

// choosePort picks a port of r that is not taken and that bindable accepts,
// trying r in order from start (wrapping around), so successive instances
// spread over the range instead of reusing the port a dead instance just
// freed, which a load balancer may still route to. ok is false when every
// port of r is taken or unbindable.
func choosePort(r PortRange, taken map[int]bool, start int, bindable func(port int) bool) (port int, ok bool) {
	n := r.To - r.From + 1
	if n <= 0 {
		return 0, false
	}
	off := ((start-r.From)%n + n) % n
	for i := range n {
		p := r.From + (off+i)%n
		if !taken[p] && bindable(p) {
			return p, true
		}
	}
	return 0, false
}

// bindableLocal reports whether 127.0.0.1:port can be listened on now. It
// cannot reserve the port: the process binds it later, and the record
// (written before the provision lock is released) keeps other provisions
// off it.
func bindableLocal(port int) bool {
	ln, err := net.Listen("tcp", net.JoinHostPort(loopback, strconv.Itoa(port)))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

// loopback is the address instances listen on.
const loopback = "127.0.0.1"
