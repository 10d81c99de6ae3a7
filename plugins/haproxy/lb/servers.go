package lb

import (
	"net/netip"

	"github.com/infrakit/infrakit/plugins/haproxy/runtimeapi"
)

// serverWant is what one server slot of one backend section should be.
type serverWant struct {
	Backend, Server string
	Ready           bool       // takes traffic; otherwise in maintenance
	IP              netip.Addr // valid when Ready
	Port            int
}

// wantedServers lists every slot of every route's backend section.
func wantedServers(rec *Record) []serverWant {
	var out []serverWant
	for _, name := range rec.names() {
		l := rec.LoadBalancers[name]
		bySlot := map[int]BackendRecord{}
		for _, b := range l.Backends {
			if b.Slot > 0 {
				bySlot[b.Slot] = b
			}
		}
		for _, rt := range l.Routes {
			be := backendName(name, rt.LoadBalancerPort)
			for slot := 1; slot <= l.Slots; slot++ {
				w := serverWant{Backend: be, Server: slotName(slot)}
				if b, ok := bySlot[slot]; ok {
					ip, err := netip.ParseAddr(b.IP)
					if err == nil {
						w.Ready, w.IP, w.Port = true, ip, serverPort(b, rt)
					}
				}
				out = append(out, w)
			}
		}
	}
	return out
}

// change is one runtime API change to one server.
type change struct {
	Backend, Server string
	// SetAddr: point the server at IP:Port first.
	SetAddr bool
	IP      netip.Addr
	Port    int
	// State to set afterwards ("" for none): runtimeapi.StateReady or
	// runtimeapi.StateMaint.
	State string
}

// runtimeChanges compares the wanted slots with what the worker reports
// and returns the commands that make them equal. A wanted server the worker
// does not have at all means it runs another configuration: the names of
// such backends come back in missing, and only a reload fixes them.
func runtimeChanges(want []serverWant, have []runtimeapi.Server) (changes []change, missing []string) {
	type key struct{ be, srv string }
	got := make(map[key]runtimeapi.Server, len(have))
	for _, s := range have {
		got[key{s.Backend, s.Name}] = s
	}
	seenMissing := map[string]bool{}
	for _, w := range want {
		s, ok := got[key{w.Backend, w.Server}]
		if !ok {
			if !seenMissing[w.Backend] {
				seenMissing[w.Backend] = true
				missing = append(missing, w.Backend)
			}
			continue
		}
		c := change{Backend: w.Backend, Server: w.Server}
		if w.Ready {
			if s.Addr != w.IP.String() || s.Port != w.Port {
				c.SetAddr, c.IP, c.Port = true, w.IP, w.Port
			}
			if s.Maint() {
				c.State = runtimeapi.StateReady
			}
		} else if !s.Maint() {
			c.State = runtimeapi.StateMaint
		}
		if c.SetAddr || c.State != "" {
			changes = append(changes, c)
		}
	}
	return changes, missing
}
