package lb

import (
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Environment variables the provider reads (see website/providers/haproxy.md).
const (
	EnvDir            = "INFRAKIT_HAPROXY_DIR"             // state directory; default .infrakit/haproxy
	EnvBinary         = "INFRAKIT_HAPROXY_BIN"             // haproxy executable; default "haproxy" in PATH, then /usr/sbin
	EnvBind           = "INFRAKIT_HAPROXY_BIND"            // address frontends bind; default 127.0.0.1
	EnvCertDir        = "INFRAKIT_HAPROXY_CERT_DIR"        // where certificate names map to PEM files; default <dir>/certs
	EnvSlots          = "INFRAKIT_HAPROXY_SLOTS"           // server slots per backend before a reload grows them; default 16
	EnvCheckPath      = "INFRAKIT_HAPROXY_CHECK_PATH"      // HTTP health check path; default /
	EnvFastInterval   = "INFRAKIT_HAPROXY_FAST_INTERVAL"   // check interval of a server that is down or changing; default 200ms
	EnvConnectTimeout = "INFRAKIT_HAPROXY_CONNECT_TIMEOUT" // how long a connection to a backend may take; default 1s
	EnvConfig         = "INFRAKIT_HAPROXY_CONFIG"          // external mode: the cfg file infrakit writes for a running HAProxy
	EnvMasterSocket   = "INFRAKIT_HAPROXY_MASTER_SOCKET"   // external mode: that HAProxy's master CLI socket
)

// Defaults.
const (
	DefaultDir       = ".infrakit/haproxy"
	DefaultBind      = "127.0.0.1"
	DefaultSlots     = 16
	DefaultCheckPath = "/"
	// DefaultFastInterval is how often a server that is down or failing is
	// checked: a member that failed a check (one registered a moment
	// before it listens, one that died) is taken out, or back, within
	// fall or rise of these rather than of the configured interval.
	DefaultFastInterval = 200 * time.Millisecond
	// DefaultConnectTimeout is HAProxy's `timeout connect`. A connection to
	// a backend that died without closing its socket (a container killed
	// on a bridge network, a machine gone) is never refused, only left
	// unanswered: this is how long a request waits on such a backend
	// before HAProxy retries it on another server. Backends on loopback,
	// a bridge or a LAN answer a SYN in well under a millisecond, so one
	// second never cuts off a live one; a lost SYN costs a retry, not a
	// failed request.
	DefaultConnectTimeout = time.Second
)

// Settings configure a Provider. ConfigFromEnv fills them from the
// environment; zero values take the defaults.
type Settings struct {
	// Dir holds the record (state.json), the lock and, when the provider
	// owns its HAProxy, haproxy.cfg, the sockets, haproxy.pid and
	// haproxy.log. Relative paths are taken from the working directory.
	Dir string
	// Binary is the haproxy executable.
	Binary string
	// Bind is the address every frontend binds ("127.0.0.1", "0.0.0.0", "::").
	Bind string
	// CertDir is where a route's certificate name is looked up as
	// <name>.pem (or <name>) to terminate TLS.
	CertDir string
	// Slots is how many server slots a backend starts with; more backends
	// than slots grow them (doubling) with a hitless reload.
	Slots int
	// CheckPath is the path HTTP health checks GET.
	CheckPath string
	// FastInterval is the check interval of a server that is down or
	// between up and down (HAProxy's downinter/fastinter), so a new backend
	// joins, and a dead one leaves, within a few of these rather than a few
	// of the configured interval. Never longer than the configured interval.
	FastInterval time.Duration
	// ConnectTimeout bounds each connection attempt to a backend (HAProxy's
	// `timeout connect`; see DefaultConnectTimeout), and so how long a
	// request waits on a dead backend before it is retried elsewhere.
	// Raise it for backends a slow network away.
	ConnectTimeout time.Duration

	// Config and MasterSocket, when MasterSocket is set, select external
	// mode: an HAProxy someone else runs in master-worker mode (-W -S
	// MasterSocket) loads Config (among its other -f files). The provider
	// writes Config and reloads through the socket; it never starts or
	// stops that HAProxy.
	Config       string
	MasterSocket string

	// ReloadTimeout bounds waiting for a reload or a start; default 15s.
	ReloadTimeout time.Duration
	// Logger; default a null logger.
	Logger hclog.Logger

	external bool // set by withDefaults
}

// ConfigFromEnv reads Settings from environment variables.
func ConfigFromEnv(getenv func(string) string) (Settings, error) {
	s := Settings{
		Dir:          getenv(EnvDir),
		Binary:       getenv(EnvBinary),
		Bind:         getenv(EnvBind),
		CertDir:      getenv(EnvCertDir),
		CheckPath:    getenv(EnvCheckPath),
		Config:       getenv(EnvConfig),
		MasterSocket: getenv(EnvMasterSocket),
	}
	if v := getenv(EnvSlots); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxSlots {
			return s, fmt.Errorf("%s=%q: want a number of slots from 1 to %d", EnvSlots, v, maxSlots)
		}
		s.Slots = n
	}
	if v := getenv(EnvFastInterval); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return s, fmt.Errorf("%s=%q: want a positive duration such as 500ms", EnvFastInterval, v)
		}
		s.FastInterval = d
	}
	if v := getenv(EnvConnectTimeout); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Millisecond {
			return s, fmt.Errorf("%s=%q: want a duration of at least 1ms such as 1s", EnvConnectTimeout, v)
		}
		s.ConnectTimeout = d
	}
	return s, nil
}

// maxSlots caps the slots of one backend; HAProxy handles far more, but a
// load balancer with more backends than this is not what this provider is for.
const maxSlots = 4096

// withDefaults fills zero values and makes paths absolute, because HAProxy
// re-executes itself on reload and must find the same files.
func (s Settings) withDefaults() (Settings, error) {
	if s.Dir == "" {
		s.Dir = DefaultDir
	}
	dir, err := filepath.Abs(s.Dir)
	if err != nil {
		return s, fmt.Errorf("haproxy dir %q: %w", s.Dir, err)
	}
	s.Dir = dir
	if s.Binary == "" {
		s.Binary = "haproxy"
	}
	if s.Bind == "" {
		s.Bind = DefaultBind
	}
	if s.CertDir == "" {
		s.CertDir = filepath.Join(s.Dir, "certs")
	}
	if s.Slots <= 0 {
		s.Slots = DefaultSlots
	}
	if s.CheckPath == "" {
		s.CheckPath = DefaultCheckPath
	}
	if s.FastInterval <= 0 {
		s.FastInterval = DefaultFastInterval
	}
	if s.ConnectTimeout <= 0 {
		s.ConnectTimeout = DefaultConnectTimeout
	}
	if s.ReloadTimeout <= 0 {
		s.ReloadTimeout = 15 * time.Second
	}
	if s.Logger == nil {
		s.Logger = hclog.NewNullLogger()
	}
	if s.MasterSocket != "" {
		if s.Config == "" {
			return s, fmt.Errorf("%s is set but %s is not: external mode needs the cfg file the running HAProxy loads", EnvMasterSocket, EnvConfig)
		}
		if s.Config, err = filepath.Abs(s.Config); err != nil {
			return s, err
		}
		if s.MasterSocket, err = filepath.Abs(s.MasterSocket); err != nil {
			return s, err
		}
		s.external = true
	} else {
		if s.Config != "" {
			return s, fmt.Errorf("%s is set but %s is not: to manage a running HAProxy give both; to let the provider run its own, give neither", EnvConfig, EnvMasterSocket)
		}
		s.Config = filepath.Join(s.Dir, "haproxy.cfg")
		s.MasterSocket = filepath.Join(s.Dir, "master.sock")
	}
	// sun_path holds 108 bytes with the terminating NUL.
	for _, p := range []string{s.MasterSocket, s.adminSocket()} {
		if len(p) > 107 {
			return s, fmt.Errorf("socket path %s is %d bytes, longer than a UNIX socket path may be (107); set %s to a shorter directory", p, len(p), EnvDir)
		}
	}
	return s, nil
}

// External reports whether the provider manages an HAProxy it did not start.
func (s Settings) External() bool { return s.external }

func (s Settings) recordPath() string  { return filepath.Join(s.Dir, "state.json") }
func (s Settings) lockPath() string    { return filepath.Join(s.Dir, "lock") }
func (s Settings) pidPath() string     { return filepath.Join(s.Dir, "haproxy.pid") }
func (s Settings) logPath() string     { return filepath.Join(s.Dir, "haproxy.log") }
func (s Settings) adminSocket() string { return filepath.Join(s.Dir, "admin.sock") }
