package etcd

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/state"
)

// Config is how to reach etcd and where the stack's keys are: the
// backend "etcd" block (ConfigFrom).
type Config struct {
	Endpoints []string
	// Prefix and LeaseTTL are Options' (defaults there).
	Prefix   string
	LeaseTTL time.Duration
	// TLS: a client certificate and key (both or neither) and the CA that
	// signs the server's certificate (system roots when empty).
	CertFile, KeyFile, CAFile string
	Username, Password        string
	// DialTimeout bounds the first connection (default 5s).
	DialTimeout time.Duration
	// Logger receives the etcd client's own log (discarded when nil).
	Logger *zap.Logger
}

// ConfigFrom is the Config of a backend "etcd" block.
func ConfigFrom(b *config.Backend) Config {
	return Config{
		Endpoints: b.Endpoints,
		Prefix:    b.Prefix,
		LeaseTTL:  time.Duration(b.LeaseTTL),
		CertFile:  b.CertFile,
		KeyFile:   b.KeyFile,
		CAFile:    b.CAFile,
		Username:  b.Username,
		Password:  b.Password,
	}
}

// NewClient connects to etcd. The connection is made in the background:
// an unreachable etcd shows as errors of the first calls (bounded by their
// contexts), not here — except that with a username NewClient
// authenticates at once, waiting up to DialTimeout.
func NewClient(cfg Config) (*clientv3.Client, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("etcd: no endpoints")
	}
	cc := clientv3.Config{
		Endpoints:   cfg.Endpoints,
		DialTimeout: cfg.DialTimeout,
		Username:    cfg.Username,
		Password:    cfg.Password,
		Logger:      cfg.Logger,
	}
	if cc.DialTimeout <= 0 {
		cc.DialTimeout = 5 * time.Second
	}
	if cc.Logger == nil {
		cc.Logger = zap.NewNop()
	}
	if cfg.CertFile != "" || cfg.KeyFile != "" || cfg.CAFile != "" {
		tlsInfo := transport.TLSInfo{CertFile: cfg.CertFile, KeyFile: cfg.KeyFile, TrustedCAFile: cfg.CAFile}
		tc, err := tlsInfo.ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("etcd: TLS: %w", err)
		}
		cc.TLS = tc
	}
	c, err := clientv3.New(cc)
	if err != nil {
		return nil, fmt.Errorf("etcd %v: %w", cfg.Endpoints, err)
	}
	return c, nil
}

// Open connects to etcd and returns the backend; Close closes the
// connection.
func Open(cfg Config) (*Backend, error) {
	c, err := NewClient(cfg)
	if err != nil {
		return nil, err
	}
	b := New(c, Options{Prefix: cfg.Prefix, LeaseTTL: cfg.LeaseTTL})
	b.owned = true
	return b, nil
}

// OpenStore is the state backend a stack's backend block names: the local
// file at localPath when b is nil or "local", else etcd. closeFn releases it
// (the etcd connection; nothing for the local file).
//
// This is the one place that turns configuration into a state.Store; the
// operation runner and `init -migrate-state` both use it.
func OpenStore(b *config.Backend, localPath string) (store state.Store, closeFn func() error, err error) {
	if b.IsLocal() {
		abs, err := filepath.Abs(localPath)
		if err != nil {
			return nil, nil, fmt.Errorf("state file: %w", err)
		}
		return state.NewLocal(abs), func() error { return nil }, nil
	}
	if b.Type != config.BackendEtcd {
		return nil, nil, fmt.Errorf("backend %q is not supported", b.Type)
	}
	be, err := Open(ConfigFrom(b))
	if err != nil {
		return nil, nil, err
	}
	return be, be.Close, nil
}
