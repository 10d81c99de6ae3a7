package runtimeapi

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Server is one server line of "show servers state".
type Server struct {
	Backend string
	Name    string
	Addr    string // IP address as HAProxy holds it ("0.0.0.0" for an empty slot)
	Port    int
	// OpState is the operational state: OpStopped (down), OpStarting,
	// OpRunning (up) or OpStopping.
	OpState int
	// AdminState holds the Admin* bits.
	AdminState int
}

// Operational states (srv_op_state).
const (
	OpStopped  = 0
	OpStarting = 1
	OpRunning  = 2
	OpStopping = 3
)

// Administrative state bits (srv_admin_state).
const (
	// AdminForcedMaint: put in maintenance by "set server ... state maint"
	// or by "disabled" in the configuration.
	AdminForcedMaint = 0x01
	// AdminConfigMaint: "disabled" in the configuration; HAProxy keeps the
	// bit as history after "state ready" clears AdminForcedMaint, so it
	// does not by itself keep a server from traffic.
	AdminConfigMaint = 0x04
	// AdminForcedDrain: "set server ... state drain".
	AdminForcedDrain = 0x08
)

// Maint reports whether the server is kept from new connections by an
// operator (maintenance or drain).
func (s Server) Maint() bool { return s.AdminState&(AdminForcedMaint|AdminForcedDrain) != 0 }

// Up reports whether HAProxy sends new connections to the server.
func (s Server) Up() bool { return !s.Maint() && s.OpState == OpRunning }

// ErrNoBackend is returned for a backend the worker does not have.
var ErrNoBackend = errors.New("no such backend")

// ServersState runs "show servers state" for one backend, or for all when
// backend is empty.
func (m Master) ServersState(ctx context.Context, backend string) ([]Server, error) {
	cmd := "show servers state"
	if backend != "" {
		cmd += " " + backend
	}
	out, err := m.Worker(ctx, cmd)
	if err != nil {
		return nil, err
	}
	if strings.HasPrefix(strings.TrimSpace(out), "Can't find backend") {
		return nil, fmt.Errorf("show servers state %s: %w", backend, ErrNoBackend)
	}
	ss, err := ParseServersState(out)
	if err != nil {
		return nil, fmt.Errorf("show servers state %s: %w", backend, err)
	}
	return ss, nil
}

// ParseServersState parses the answer of "show servers state": a version
// line ("1"), a "# be_id be_name srv_id ..." header naming the columns, and
// one line per server. Columns are found by name, so extra columns of later
// versions do not matter.
func ParseServersState(out string) ([]Server, error) {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) == 0 || strings.TrimSpace(lines[0]) != "1" {
		return nil, fmt.Errorf("unexpected answer %q (want format version 1)", firstLine(out))
	}
	var col map[string]int
	var out2 []Server
	for _, line := range lines[1:] {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "#") {
			col = map[string]int{}
			for i, name := range strings.Fields(strings.TrimPrefix(line, "#")) {
				col[name] = i
			}
			continue
		}
		if col == nil {
			return nil, fmt.Errorf("server line %q before the header", line)
		}
		f := strings.Fields(line)
		get := func(name string) (string, error) {
			i, ok := col[name]
			if !ok || i >= len(f) {
				return "", fmt.Errorf("server line %q has no %s", line, name)
			}
			return f[i], nil
		}
		num := func(name string) (int, error) {
			s, err := get(name)
			if err != nil {
				return 0, err
			}
			n, err := strconv.Atoi(s)
			if err != nil {
				return 0, fmt.Errorf("server line %q: %s: %w", line, name, err)
			}
			return n, nil
		}
		var s Server
		var err error
		if s.Backend, err = get("be_name"); err != nil {
			return nil, err
		}
		if s.Name, err = get("srv_name"); err != nil {
			return nil, err
		}
		if s.Addr, err = get("srv_addr"); err != nil {
			return nil, err
		}
		if s.Port, err = num("srv_port"); err != nil {
			return nil, err
		}
		if s.OpState, err = num("srv_op_state"); err != nil {
			return nil, err
		}
		if s.AdminState, err = num("srv_admin_state"); err != nil {
			return nil, err
		}
		out2 = append(out2, s)
	}
	return out2, nil
}

// SetServerAddr points backend/server at ip:port.
func (m Master) SetServerAddr(ctx context.Context, backend, server string, ip netip.Addr, port int) error {
	cmd := fmt.Sprintf("set server %s/%s addr %s port %d", backend, server, ip, port)
	out, err := m.Worker(ctx, cmd)
	if err != nil {
		return err
	}
	// Success reads "IP changed from ..." / "port changed ..." or "no need
	// to change the addr[, port]"; anything else is HAProxy's complaint.
	if a := strings.TrimSpace(out); !strings.Contains(a, "changed") && !strings.HasPrefix(a, "no need to change") {
		return fmt.Errorf("%s: %s", cmd, firstLine(a))
	}
	return nil
}

// Admin states SetServerState sets.
const (
	StateReady = "ready"
	StateMaint = "maint"
	StateDrain = "drain"
)

// SetServerState sets backend/server's administrative state: StateReady
// (takes new connections, subject to its health check), StateDrain (only
// persistent ones) or StateMaint (none). Established connections stay up in
// every state.
func (m Master) SetServerState(ctx context.Context, backend, server, state string) error {
	cmd := fmt.Sprintf("set server %s/%s state %s", backend, server, state)
	out, err := m.Worker(ctx, cmd)
	if err != nil {
		return err
	}
	if a := strings.TrimSpace(out); a != "" {
		return fmt.Errorf("%s: %s", cmd, firstLine(a))
	}
	return nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
