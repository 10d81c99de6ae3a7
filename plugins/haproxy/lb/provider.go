// Package lb is the HAProxy L4 load balancer provider: every load balancer
// name the host asks for becomes frontends and backends of one HAProxy,
// which the provider either runs itself or manages for an operator.
//
// How it changes HAProxy, and why:
//
//   - The state directory's state.json (the record) holds every load
//     balancer's routes, backends and health check. Each call takes the
//     directory's flock (so the CLI's provider and watch's provider never
//     interleave), loads the record, changes it, and converges HAProxy on
//     it: renders the configuration, writes it if it changed, reloads if its
//     structure changed, and otherwise uses the runtime API only.
//   - A route is a frontend (bind <bind>:<lb_port>) and a backend section
//     with a fixed number of server slots (s1..sN). Backends are slots: a
//     registered backend's slot gets `set server be/sK addr <ip> port <p>`
//     and `state ready`; a deregistered one's slot goes to `state maint`.
//     No reload, no dropped connection; established connections to a
//     backend in maintenance carry on until they close.
//   - Publish, Unpublish, a health check change and more backends than
//     slots (slots double) change the structure and need a reload: a hitless
//     master-worker reload (the new worker takes over the listening sockets,
//     the old one finishes its connections).
//   - The configuration file always lists the current backends in their
//     slots, so any reload, by the provider or an operator, starts right.
//   - Reads (Routes, Backends) answer from the record after the same
//     convergence, so a worker that lost runtime changes (an operator
//     reloaded an old file, HAProxy was restarted) is corrected, and an
//     owned HAProxy that died is started again.
package lb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/infrakit/infrakit/plugins/haproxy/runtimeapi"
	"github.com/infrakit/infrakit/sdk/atomicfile"
	"github.com/infrakit/infrakit/sdk/filelock"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
	"github.com/infrakit/infrakit/sdk/provider"
)

// Name is the provider's name.
const Name = "haproxy"

// Metadata says the provider serves load balancers of any name.
func Metadata(version string) provider.Metadata {
	return provider.Metadata{
		Name:    Name,
		Version: version,
		Objects: []provider.Object{{Kind: provider.KindLoadBalancer, Type: provider.AnyName}},
	}
}

// Provider drives one HAProxy for every load balancer name.
type Provider struct {
	s      Settings
	master runtimeapi.Master
	mu     sync.Mutex // one call at a time in this process; the flock covers other processes
}

// New checks the settings and creates the state directory. It does not
// start HAProxy: the first call that needs it does.
func New(s Settings) (*Provider, error) {
	s, err := s.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("haproxy state dir: %w", err)
	}
	return &Provider{s: s, master: runtimeapi.Master{Socket: s.MasterSocket}}, nil
}

// Settings are the provider's settings with defaults filled in.
func (p *Provider) Settings() Settings { return p.s }

// L4 returns the named load balancer, for plugin.ServeConfig.LoadBalancer.
func (p *Provider) L4(name string) (loadbalancer.L4, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	return &balancer{p: p, name: name}, nil
}

// balancer is one named load balancer of the provider.
type balancer struct {
	p    *Provider
	name string
}

var _ loadbalancer.L4 = (*balancer)(nil)

func (b *balancer) Routes(ctx context.Context) ([]loadbalancer.Route, error) {
	var out []loadbalancer.Route
	err := b.p.read(ctx, b.name, func(l *LB) {
		for _, r := range l.Routes {
			out = append(out, r.route())
		}
	})
	if err != nil {
		return nil, fmt.Errorf("load balancer %q: routes: %w", b.name, err)
	}
	return out, nil
}

func (b *balancer) Backends(ctx context.Context) ([]loadbalancer.Backend, error) {
	var out []loadbalancer.Backend
	err := b.p.read(ctx, b.name, func(l *LB) {
		for _, x := range l.Backends {
			out = append(out, loadbalancer.Backend{ID: instance.ID(x.ID), Address: x.Address})
		}
	})
	if err != nil {
		return nil, fmt.Errorf("load balancer %q: backends: %w", b.name, err)
	}
	return out, nil
}

func (b *balancer) Publish(ctx context.Context, route loadbalancer.Route) error {
	rt, err := routeRecord(route)
	if err != nil {
		return err
	}
	err = b.p.update(ctx, b.name, func(rec *Record, l *LB) error {
		owner, taken := rec.portOwner(rt.LoadBalancerPort)
		switch {
		case taken && owner != b.name:
			return provider.AttributeError("Port in use",
				fmt.Sprintf("lb_port %d is published by load balancer %q of this HAProxy", rt.LoadBalancerPort, owner), "lb_port")
		case !taken:
			if err := b.p.portFree(ctx, rt.LoadBalancerPort); err != nil {
				return provider.AttributeError("Port in use", err.Error(), "lb_port")
			}
		}
		l.publish(rt)
		return nil
	})
	if err != nil {
		return fmt.Errorf("load balancer %q: publish %d: %w", b.name, rt.LoadBalancerPort, err)
	}
	return nil
}

func (b *balancer) Unpublish(ctx context.Context, lbPort int) error {
	err := b.p.update(ctx, b.name, func(_ *Record, l *LB) error {
		l.unpublish(lbPort)
		return nil
	})
	if err != nil {
		return fmt.Errorf("load balancer %q: unpublish %d: %w", b.name, lbPort, err)
	}
	return nil
}

func (b *balancer) ConfigureHealthCheck(ctx context.Context, hc loadbalancer.HealthCheck) error {
	r, err := healthCheckRecord(hc)
	if err != nil {
		return err
	}
	err = b.p.update(ctx, b.name, func(_ *Record, l *LB) error {
		l.HealthCheck = r
		return nil
	})
	if err != nil {
		return fmt.Errorf("load balancer %q: configure health check: %w", b.name, err)
	}
	return nil
}

func (b *balancer) RegisterBackends(ctx context.Context, backends []loadbalancer.Backend) error {
	err := b.p.update(ctx, b.name, func(_ *Record, l *LB) error { return l.register(backends) })
	if err != nil {
		return fmt.Errorf("load balancer %q: register %d backend(s): %w", b.name, len(backends), err)
	}
	return nil
}

func (b *balancer) DeregisterBackends(ctx context.Context, ids []instance.ID) error {
	err := b.p.update(ctx, b.name, func(_ *Record, l *LB) error {
		l.deregister(ids)
		return nil
	})
	if err != nil {
		return fmt.Errorf("load balancer %q: deregister %d backend(s): %w", b.name, len(ids), err)
	}
	return nil
}

// portFree reports whether lbPort can be bound: a port another program
// holds would make the reload fail. The probe sets SO_REUSEPORT as HAProxy
// does, so a port an old worker of this HAProxy may still hold for a moment (just
// unpublished, now published again) counts as free, and a program
// listening without it (almost every other) does not.
func (p *Provider) portFree(ctx context.Context, lbPort int) error {
	addr := net.JoinHostPort(p.s.Bind, fmt.Sprint(lbPort))
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1) })
		return errors.Join(err, serr)
	}}
	l, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("cannot bind %s: %v", addr, err)
	}
	return l.Close()
}

// locked runs fn holding both locks, with the record loaded.
func (p *Provider) locked(ctx context.Context, fn func(rec *Record) error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	unlock, err := filelock.Lock(ctx, p.s.lockPath())
	if err != nil {
		return err
	}
	defer unlock()
	rec, err := loadRecord(p.s.recordPath())
	if err != nil {
		return err
	}
	return fn(rec)
}

// read converges and then hands the named load balancer (possibly empty) to fn.
func (p *Provider) read(ctx context.Context, name string, fn func(l *LB)) error {
	return p.locked(ctx, func(rec *Record) error {
		l, ok := rec.LoadBalancers[name]
		if !ok {
			fn(&LB{})
			return nil
		}
		if err := p.converge(ctx, rec); err != nil {
			return err
		}
		fn(l)
		return nil
	})
}

// update changes the named load balancer with change and converges.
// Nothing is saved when change or convergence fails.
func (p *Provider) update(ctx context.Context, name string, change func(rec *Record, l *LB) error) error {
	return p.locked(ctx, func(rec *Record) error {
		l := rec.lb(name, p.s.Slots)
		if err := change(rec, l); err != nil {
			return err
		}
		if len(l.Routes) == 0 && len(l.Backends) == 0 && l.HealthCheck == nil {
			delete(rec.LoadBalancers, name) // nothing left to remember
		}
		return p.converge(ctx, rec)
	})
}

// converge makes HAProxy what rec says and saves rec.
func (p *Provider) converge(ctx context.Context, rec *Record) error {
	p.resolve(ctx, rec)
	for _, name := range rec.names() {
		if err := rec.LoadBalancers[name].assignSlots(p.s.Slots); err != nil {
			return fmt.Errorf("load balancer %q: %w", name, err)
		}
	}
	in := p.renderInput(rec)
	cfg, structure := render(in, true), structureHash(in)

	prev, err := os.ReadFile(p.s.Config)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("read %s: %w", p.s.Config, err)
	}
	up, err := p.running(ctx)
	if err != nil {
		return err
	}
	if !up && !anyRoutes(rec) {
		// Nothing to serve: an HAProxy need not run yet. The file is kept
		// current for when one does.
		if !bytes.Equal(prev, cfg) {
			if err := atomicfile.WriteFile(p.s.Config, cfg, 0o644); err != nil {
				return err
			}
		}
		return saveRecord(p.s.recordPath(), rec)
	}
	reload := up && rec.Loaded != structure
	if reload || !up {
		// A new structure is checked before it replaces a working file.
		if err := p.checkCandidate(ctx, cfg); err != nil {
			return err
		}
	}
	if !bytes.Equal(prev, cfg) {
		if err := atomicfile.WriteFile(p.s.Config, cfg, 0o644); err != nil {
			return err
		}
	}
	restore := func(cause error) error {
		if prev == nil {
			return cause
		}
		if err := atomicfile.WriteFile(p.s.Config, prev, 0o644); err != nil {
			return errors.Join(cause, fmt.Errorf("restore the previous configuration: %w", err))
		}
		if up {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.s.ReloadTimeout)
			defer cancel()
			if err := p.master.Reload(rctx); err != nil {
				return errors.Join(cause, fmt.Errorf("reload the previous configuration: %w", err))
			}
		}
		return cause
	}
	switch {
	case !up:
		if err := p.start(ctx); err != nil {
			return restore(err)
		}
		rec.Loaded = structure
	case reload:
		if err := p.reload(ctx); err != nil {
			return restore(err)
		}
		rec.Loaded = structure
	}
	if err := p.syncServers(ctx, rec); err != nil {
		return err
	}
	return saveRecord(p.s.recordPath(), rec)
}

// checkCandidate runs `haproxy -c` on cfg written beside the live file.
func (p *Provider) checkCandidate(ctx context.Context, cfg []byte) error {
	cand := p.s.Config + ".new"
	if err := atomicfile.WriteFile(cand, cfg, 0o644); err != nil {
		return err
	}
	defer os.Remove(cand)
	if err := p.check(ctx, cand); err != nil {
		return fmt.Errorf("the new configuration does not load (nothing changed): %w", err)
	}
	return nil
}

func (p *Provider) reload(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, p.s.ReloadTimeout)
	defer cancel()
	start := time.Now()
	if err := p.master.Reload(ctx); err != nil {
		return fmt.Errorf("%w%s", err, p.logHint())
	}
	p.s.Logger.Info("reloaded haproxy", "config", p.s.Config, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

func (p *Provider) logHint() string {
	if p.s.External() {
		return " (see the HAProxy's log)"
	}
	return tail(p.s.logPath())
}

// syncServers makes the worker's server slots what rec says with runtime
// API commands. A worker lacking a backend section runs another
// configuration (an operator reloaded an old file): one reload fixes that.
func (p *Provider) syncServers(ctx context.Context, rec *Record) error {
	want := wantedServers(rec)
	for attempt := 0; ; attempt++ {
		have, err := p.master.ServersState(ctx, "")
		if err != nil {
			return err
		}
		changes, missing := runtimeChanges(want, have)
		if len(missing) > 0 {
			if attempt > 0 {
				return fmt.Errorf("haproxy lacks backend(s) %s after a reload of %s", strings.Join(missing, ", "), p.s.Config)
			}
			p.s.Logger.Warn("haproxy runs another configuration; reloading", "missing", missing)
			if err := p.reload(ctx); err != nil {
				return err
			}
			continue
		}
		for _, c := range changes {
			if c.SetAddr {
				if err := p.master.SetServerAddr(ctx, c.Backend, c.Server, c.IP, c.Port); err != nil {
					return err
				}
			}
			if c.State != "" {
				if err := p.master.SetServerState(ctx, c.Backend, c.Server, c.State); err != nil {
					return err
				}
			}
			p.s.Logger.Debug("server changed", "backend", c.Backend, "server", c.Server, "addr", c.IP, "port", c.Port, "state", c.State)
		}
		return nil
	}
}

// resolveTimeout bounds resolving one backend host name.
const resolveTimeout = 2 * time.Second

// resolve fills the IP of backends that have an address but no IP yet. A
// name that does not resolve is logged and tried again on the next call;
// until then the backend has no slot.
func (p *Provider) resolve(ctx context.Context, rec *Record) {
	for _, name := range rec.names() {
		l := rec.LoadBalancers[name]
		for i := range l.Backends {
			b := &l.Backends[i]
			if b.IP != "" || b.Address == "" {
				continue
			}
			host, _, err := parseAddress(b.Address)
			if err != nil {
				continue // checked on register
			}
			if ip, err := netip.ParseAddr(host); err == nil {
				b.IP = ip.Unmap().String()
				continue
			}
			rctx, cancel := context.WithTimeout(ctx, resolveTimeout)
			ips, err := net.DefaultResolver.LookupNetIP(rctx, "ip", host)
			cancel()
			if err != nil || len(ips) == 0 {
				p.s.Logger.Warn("backend address does not resolve; it gets no traffic until it does", "load_balancer", name, "backend", b.ID, "address", b.Address, "error", err)
				continue
			}
			// Prefer IPv4: the default bind and most backends are IPv4.
			slices.SortStableFunc(ips, func(a, b netip.Addr) int {
				switch {
				case a.Unmap().Is4() == b.Unmap().Is4():
					return 0
				case a.Unmap().Is4():
					return -1
				}
				return 1
			})
			b.IP = ips[0].Unmap().String()
		}
	}
}

// renderInput gathers what render needs, looking up certificate files.
func (p *Provider) renderInput(rec *Record) renderInput {
	in := renderInput{
		Owned:          !p.s.External(),
		AdminSocket:    p.s.adminSocket(),
		Bind:           p.s.Bind,
		CheckPath:      p.s.CheckPath,
		FastInterval:   p.s.FastInterval,
		ConnectTimeout: p.s.ConnectTimeout,
		CertFiles:      map[string]string{},
		Record:         rec,
	}
	for _, name := range rec.names() {
		for _, rt := range rec.LoadBalancers[name].Routes {
			if f := p.certFile(rt.Certificate); f != "" {
				in.CertFiles[rt.Certificate] = f
			}
		}
	}
	return in
}

// certFile maps a certificate name to <cert dir>/<name>.pem or
// <cert dir>/<name> when such a file exists; "" otherwise (the route then
// passes TLS through).
func (p *Provider) certFile(name string) string {
	if name == "" || name != filepath.Base(name) || name == "." || name == ".." {
		return ""
	}
	for _, f := range []string{filepath.Join(p.s.CertDir, name+".pem"), filepath.Join(p.s.CertDir, name)} {
		if st, err := os.Stat(f); err == nil && st.Mode().IsRegular() {
			return f
		}
	}
	return ""
}

func anyRoutes(rec *Record) bool {
	for _, l := range rec.LoadBalancers {
		if len(l.Routes) > 0 {
			return true
		}
	}
	return false
}
