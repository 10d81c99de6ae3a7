package providertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/infrakit/infrakit/sdk/plugin"
	"github.com/infrakit/infrakit/sdk/provider"
)

// Tag keys the suite puts on what it creates. Every run gets its own run
// value, every test its own case value, so tests never see each other's
// instances and a provider shared with real workloads is left alone.
const (
	TagRun  = "providertest.run"
	TagCase = "providertest.case"
)

// Run launches cfg.Binary through the real plugin path (plugin.Start, the
// go-plugin handshake, gRPC) and runs the conformance subtests for every
// kind the provider's Metadata says it serves. The provider is killed when t
// ends.
// The provider runs in cfg.Dir (a fresh temporary directory by default).
func Run(t *testing.T, cfg Config) {
	t.Helper()
	s := start(t, cfg)

	t.Run("Metadata", s.testMetadata)
	t.Run("Coverage", s.testCoverage)
	if len(cfg.ProviderConfig) > 0 || len(cfg.InvalidProviderConfig) > 0 {
		t.Run("Configure", s.testConfigure)
	}
	// One subtest per served type of each kind; types without a case fail
	// in Coverage and are not tested here.
	typed := func(kind provider.Kind, test func(t *testing.T, typ string)) {
		typs := slices.DeleteFunc(s.md.Types(kind), func(typ string) bool { return !s.hasCase(kind, typ) })
		if len(typs) == 0 {
			return
		}
		t.Run(kindName(kind), func(t *testing.T) {
			for _, typ := range typs {
				t.Run(typ, func(t *testing.T) { test(t, typ) })
			}
		})
	}
	typed(provider.KindInstance, func(t *testing.T, typ string) { s.testInstance(t, typ, s.cfg.Instance[typ]) })
	typed(provider.KindFlavor, func(t *testing.T, typ string) { s.testFlavor(t, typ, s.cfg.Flavor[typ]) })
	if len(s.md.Types(provider.KindLoadBalancer)) > 0 || s.cfg.LoadBalancer != "" {
		t.Run(kindName(provider.KindLoadBalancer), s.testLoadBalancer)
	}
	typed(provider.KindAuthorizer, func(t *testing.T, typ string) { s.testAuthorizer(t, typ, s.cfg.Authorizer[typ]) })
	typed(provider.KindMetrics, func(t *testing.T, typ string) { s.testMetrics(t, typ, s.cfg.Metrics[typ]) })
	t.Run("StillRunning", func(t *testing.T) {
		if s.client.Exited() {
			t.Fatal("the provider process exited during the suite; see its log above")
		}
	})
}

// suite is what the subtests of one Run share.
type suite struct {
	cfg    Config
	client *plugin.Client
	md     provider.Metadata
	run    string // this run's TagRun value
}

// start launches the provider, configures it with cfg.ProviderConfig (as
// infrakit does before its first call) and reads its Metadata.
func start(t *testing.T, cfg Config) *suite {
	t.Helper()
	if cfg.Binary == "" {
		t.Fatal("providertest: Config.Binary is empty")
	}
	bin, err := filepath.Abs(cfg.Binary)
	if err != nil {
		t.Fatalf("providertest: binary %s: %v", cfg.Binary, err)
	}
	if cfg.Name == "" {
		cfg.Name = strings.TrimSuffix(strings.TrimPrefix(filepath.Base(bin), BinaryPrefix), ".exe")
	}
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = defaultTimeout
	}
	if cfg.EventTimeout <= 0 {
		cfg.EventTimeout = defaultEventTimeout
	}
	out := &testLog{t: t}
	t.Cleanup(out.stop) // registered first, so it runs after Kill below
	level := hclog.LevelFromString(os.Getenv("INFRAKIT_LOG"))
	if level == hclog.NoLevel {
		level = hclog.Info
	}
	logger := hclog.New(&hclog.LoggerOptions{Name: "providertest", Output: out, Level: level})

	// t.Context() lives until just before the cleanups, one of which kills
	// the provider.
	client, err := plugin.Start(t.Context(), plugin.ClientConfig{
		Name:         cfg.Name,
		Path:         bin,
		Env:          cfg.Env,
		Dir:          cfg.Dir,
		StartTimeout: cfg.Timeout,
		Logger:       logger,
	})
	if err != nil {
		t.Fatalf("providertest: start %s: %v", bin, err)
	}
	t.Cleanup(client.Kill)

	s := &suite{cfg: cfg, client: client, run: randomID()}
	ctx, cancel := s.ctx(t)
	defer cancel()
	if len(cfg.ProviderConfig) > 0 {
		if err := client.Configure(ctx, cfg.ProviderConfig); err != nil {
			t.Fatalf("providertest: configure with Config.ProviderConfig %s: %v", cfg.ProviderConfig, err)
		}
	}
	if s.md, err = client.Metadata(ctx); err != nil {
		t.Fatalf("providertest: metadata: %v", err)
	}
	t.Logf("provider %s %s, run %s", s.md.Name, s.md.Version, s.run)
	return s
}

// ctx bounds one call to the provider.
func (s *suite) ctx(t *testing.T) (context.Context, context.CancelFunc) {
	return context.WithTimeout(t.Context(), s.cfg.Timeout)
}

// cleanupCtx bounds one call made from a t.Cleanup, when t.Context() has
// already ended.
func (s *suite) cleanupCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), s.cfg.Timeout)
}

// tags returns fresh tags for one test's objects.
func (s *suite) tags() map[string]string {
	return map[string]string{TagRun: s.run, TagCase: randomID()}
}

func (s *suite) testMetadata(t *testing.T) {
	for _, err := range checkMetadata(s.md) {
		t.Error(err)
	}
	for _, o := range s.md.Objects {
		var valid []byte
		switch o.Kind {
		case provider.KindInstance:
			valid = s.cfg.Instance[o.Type].Valid
		case provider.KindFlavor:
			valid = s.cfg.Flavor[o.Type].Valid
		case provider.KindAuthorizer:
			valid = s.cfg.Authorizer[o.Type].Valid
		}
		if valid == nil {
			continue
		}
		for _, err := range checkSchema(o.Schema, valid) {
			t.Errorf("%s %q schema: %v", o.Kind, o.Type, err)
		}
	}
}

// testCoverage fails when a served type has no case or a case names a type
// that is not served, so the Config keeps up with the provider.
func (s *suite) testCoverage(t *testing.T) {
	cover := func(kind provider.Kind, cases []string) {
		served := s.md.Types(kind)
		for _, typ := range served {
			if !slices.Contains(cases, typ) {
				t.Errorf("provider serves %s type %q but the Config has no case for it", kind, typ)
			}
		}
		for _, typ := range cases {
			if !slices.Contains(served, typ) {
				t.Errorf("Config has a %s case for %q but the provider does not serve it (serves %q)", kind, typ, served)
			}
		}
	}
	cover(provider.KindInstance, keys(s.cfg.Instance))
	cover(provider.KindFlavor, keys(s.cfg.Flavor))
	cover(provider.KindAuthorizer, keys(s.cfg.Authorizer))
	cover(provider.KindMetrics, keys(s.cfg.Metrics))
	for typ, c := range s.cfg.Flavor {
		if c.Instance == "" {
			continue
		}
		if _, ok := s.cfg.Instance[c.Instance]; !ok {
			t.Errorf("flavor case %q provisions with instance type %q, which has no instance case", typ, c.Instance)
		}
	}
}

// kindName names the subtests of a kind.
func kindName(k provider.Kind) string {
	switch k {
	case provider.KindInstance:
		return "Instance"
	case provider.KindFlavor:
		return "Flavor"
	case provider.KindLoadBalancer:
		return "LoadBalancer"
	case provider.KindAuthorizer:
		return "Authorizer"
	case provider.KindMetrics:
		return "Metrics"
	}
	return string(k)
}

func (s *suite) hasCase(kind provider.Kind, typ string) bool {
	var ok bool
	switch kind {
	case provider.KindInstance:
		_, ok = s.cfg.Instance[typ]
	case provider.KindFlavor:
		_, ok = s.cfg.Flavor[typ]
	case provider.KindAuthorizer:
		_, ok = s.cfg.Authorizer[typ]
	case provider.KindMetrics:
		_, ok = s.cfg.Metrics[typ]
	}
	return ok
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// randomID is a short random hex string that keeps runs and tests apart.
func randomID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// testLog forwards the host's go-plugin log (which carries the provider's
// stderr) to t.Log until stop; a line arriving after the test ended would
// otherwise panic.
type testLog struct {
	mu      sync.Mutex
	t       testing.TB
	stopped bool
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.stopped {
		l.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (l *testLog) stop() {
	l.mu.Lock()
	l.stopped = true
	l.mu.Unlock()
}
